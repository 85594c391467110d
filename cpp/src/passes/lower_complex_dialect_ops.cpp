// common::lower_complex_dialect_ops: rewrites the complex dialect ops of each function body into
// core ops on separate fp32 real and imaginary tensors, op for op as coremltools' pass does
// (mil/passes/defs/lower_complex_dialect_ops.py), so programs and names match:
// - complex(real_data, imag_data) makes no op: its parts are the two inputs;
// - complex_real / complex_imag -> identity of the part; complex_abs -> sqrt(square + square);
//   complex_shape -> shape of the real part;
// - the FFTs are DFT matrix products along one axis at a time: transpose the axis to the front,
//   trim (range_1d + gather) or zero-pad (fill + concat) it to the signal size, reshape to
//   [n, -1], matmul with cos / sin matrices built from range_1d outer products, reshape and
//   transpose back, then real_div by n or sqrt(n) per `norm`; rfft keeps the first n // 2 + 1
//   bins (gather), irfft first restores the conjugate half (gather of the mirrored bins, the
//   imaginary part negated, concat);
// - complex_stft -> two (four for complex input) valid convolutions with the windowed DFT
//   matrices as weights and hop_length as stride.
// New ops go right before the dialect op they replace; a non-complex result takes over the
// dialect op's uses (and its name when it is a function output), then the dialect ops are removed.
// Consts coremltools makes and leaves unused (n / dim of the N-D loops) are made too.
//
// Where milkit differs: everything is checked before anything changes (coremltools fails half
// way), with errors naming the op: complex function outputs (coremltools' message), complex data
// reaching or leaving a core op (coremltools builds a broken program), FFT inputs whose shape is
// not fully known (coremltools fails on a sympy comparison or a symbolic const), stft's
// win_length > n_fft and onesided complex input (coremltools' messages). complex_shape is lowered
// to shape(real part); coremltools' lowering reads a missing input `data` and raises
// AttributeError. Like coremltools, dialect ops inside nested blocks are left alone (the writer and
// the interpreter then refuse them).
#include <cmath>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "milkit/builder/builder.h"
#include "milkit/ops/fft_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

constexpr const char* kPass = "common::lower_complex_dialect_ops";

bool is_dialect(const Operation* op) { return op->schema().dialect == "complex"; }

bool is_complex_var(const Var* v) {
  return v->type()->is_tensor() && is_complex(v->type()->dtype());
}

bool is_fft(const std::string& t) {
  static const std::unordered_set<std::string> k = {
      "complex_fft",  "complex_fftn",  "complex_rfft",  "complex_rfftn",
      "complex_ifft", "complex_ifftn", "complex_irfft", "complex_irfftn"};
  return k.count(t) != 0;
}

[[noreturn]] void fail(const Operation* op, const std::string& msg) {
  throw ValueError(std::string(kPass) + ": " + op->describe() + ": " + msg);
}

std::vector<int64_t> static_dims(const Var* v) {
  std::vector<int64_t> r;
  for (Dim d : v->type()->shape()) r.push_back(d->value());
  return r;
}

bool fully_known(const Type* t) {
  if (!t->has_rank()) return false;
  for (Dim d : t->shape())
    if (!d->is_const()) return false;
  return true;
}

std::optional<std::vector<int64_t>> opt_ints(const Operation* op, const char* name) {
  Var* v = op->input1(name);
  if (!v) return std::nullopt;
  return v->value()->to_ints();
}

std::optional<int64_t> opt_int(const Operation* op, const char* name) {
  Var* v = op->input1(name);
  if (!v) return std::nullopt;
  return v->value()->as_int(0);
}

bool bool_input(const Operation* op, const char* name) {
  Var* v = op->input1(name);
  return v && v->value()->as_int(0) != 0;
}

// ---- checks before anything changes ------------------------------------------------------------

void check_function(const std::string& fname, Function& f) {
  for (Var* v : f.body().outputs())
    if (is_complex_var(v))
      throw ValueError(
          std::string(kPass) + ": function '" + fname + "' output '" + v->name() +
          "': MIL doesn't support complex data as model's output, please extract real and "
          "imaginary parts explicitly.");
  Block* body = &f.body();
  auto lowered_here = [&](const Operation* op) {
    return op && is_dialect(op) && op->parent() == body;
  };
  for (Operation* op : body->ops()) {
    if (!is_dialect(op)) {
      for (Var* v : op->args())
        if (is_complex_var(v))
          fail(op,
               "reads complex value '" + v->name() +
                   "'; complex data can only flow between complex dialect ops (use complex_real / "
                   "complex_imag to get its parts)");
      continue;
    }
    for (Var* v : op->args())
      if (is_complex_var(v) && !lowered_here(v->op()))
        fail(op, "reads complex value '" + v->name() +
                     "', which no complex dialect op of the function body makes");
    for (Var* out : op->outputs()) {
      if (!is_complex_var(out)) continue;
      for (const auto& u : out->uses())
        if (!lowered_here(u.op))
          fail(
              u.op,
              "reads complex value '" + out->name() +
                  "'; complex data can only flow between complex dialect ops of the function body");
      if (!out->block_uses().empty())
        fail(op, "its complex output '" + out->name() + "' is a block output");
    }
    const std::string& t = op->op_type();
    if (is_fft(t)) {
      const Type* in = op->input1("data")->type();
      if (!fully_known(in))
        fail(op,
             "lowering needs the input's shape fully known (it builds the DFT matrices from the "
             "sizes), got " +
                 in->str());
    } else if (t == "complex_stft") {
      const int64_t n_fft = op->input1("n_fft")->value()->as_int(0);
      if (auto w = opt_int(op, "win_length"); w && *w > n_fft)
        fail(op, "Window length must be less than or equal to n_fft");
      if (is_complex_var(op->input1("input")) && bool_input(op, "onesided"))
        fail(op, "Onesided is only valid for real inputs");
    }
  }
}

// ---- the lowering ------------------------------------------------------------------------------

struct Parts {
  Var* re;
  Var* im;
};

class Lowering {
 public:
  explicit Lowering(Function& f) : f_(f), b_(f) {}

  // Returns whether it lowered any op.
  bool run() {
    std::vector<Operation*> done;
    for (Operation* op : f_.body().ops()) {
      if (!is_dialect(op)) continue;
      b_.set_insertion_point(&f_.body(), op);
      b_.set_location(op->location());
      lower(op);
      done.push_back(op);
    }
    for (auto it = done.rbegin(); it != done.rend(); ++it) f_.body().erase(*it);
    return !done.empty();
  }

 private:
  // ---- op helpers (arguments in coremltools' keyword order, so implicit consts match) ----------
  static Value i32(int64_t v) { return Value::scalar_int(DataType::Int32, v); }
  static Value f32(double v) { return Value::scalar_float(DataType::Float32, v); }
  static Value ints(const std::vector<int64_t>& v) { return Value::int_list(v); }
  static Value str(std::string s) { return Value::scalar_string(std::move(s)); }
  static Arg A(std::string n, Var* v) { return Builder::arg(std::move(n), v); }
  static Arg A(std::string n, Value v) { return Builder::arg(std::move(n), std::move(v)); }
  static Arg seq(std::string n, const std::vector<Var*>& vs) {
    Arg a;
    a.name = std::move(n);
    a.is_sequence = true;
    for (Var* v : vs) a.items.push_back(ArgItem{v, nullptr});
    return a;
  }

  Var* mk(const char* type, std::vector<Arg> args) { return b_.create(type, args).at(0); }
  Var* constant(int64_t v) { return b_.add_const(std::make_shared<const Value>(i32(v))); }

  Parts parts_of(const Operation* op, Var* v) const {
    auto it = parts_.find(v);
    if (it == parts_.end()) fail(op, "internal: complex value '" + v->name() + "' has no parts");
    return it->second;
  }

  // coremltools' _resize_data along one axis: trim with range_1d + gather, pad with fill + concat.
  Var* resize(Var* x, int64_t dim, int64_t size) {
    std::vector<int64_t> shape = static_dims(x);
    const size_t ax = fft_axis_index(dim, shape.size());
    if (size < shape[ax]) {
      Var* idx = mk("range_1d", {A("start", i32(0)), A("end", i32(size)), A("step", i32(1))});
      return mk("gather", {A("x", x), A("indices", idx), A("axis", i32(dim))});
    }
    if (size > shape[ax]) {
      shape[ax] = size - shape[ax];
      Var* zero = mk("fill", {A("shape", ints(shape)), A("value", f32(0.0))});
      return mk("concat", {seq("values", {x, zero}), A("axis", i32(dim))});
    }
    return x;
  }

  // coremltools' _calculate_dft_matrix: cos and sin of outer(range(k), range(n)) * 2pi / n.
  std::pair<Var*, Var*> dft_matrix(Var* n_fft, bool onesided) {
    Var* n = mk("cast", {A("x", n_fft), A("dtype", str("fp32"))});
    Var* half = nullptr;
    if (onesided) {
      half = mk("floor_div", {A("x", n), A("y", f32(2.0))});
      half = mk("add", {A("x", half), A("y", f32(1.0))});
    }
    Var* tx =
        mk("range_1d", {A("start", f32(0.0)), A("end", onesided ? half : n), A("step", f32(1.0))});
    Var* ty = mk("range_1d", {A("start", f32(0.0)), A("end", n), A("step", f32(1.0))});
    tx = mk("reshape", {A("x", tx), A("shape", ints({-1, 1}))});
    ty = mk("reshape", {A("x", ty), A("shape", ints({1, -1}))});
    Var* base = mk("matmul", {A("x", tx), A("y", ty)});
    base = mk("mul", {A("x", base), A("y", f32(2 * M_PI))});
    base = mk("real_div", {A("x", base), A("y", n)});
    Var* c = mk("cos", {A("x", base)});
    Var* s = mk("sin", {A("x", base)});
    return {c, s};
  }

  // coremltools' _fft_1d: the DFT along `dim` by matrix products.
  Parts fft_1d(Parts in, std::optional<int64_t> n_opt, int64_t dim, const std::string& norm,
               bool inverse) {
    const size_t rank = in.re->type()->rank();
    const size_t ax = fft_axis_index(dim, rank);
    const int64_t n = n_opt ? *n_opt : static_dims(in.re)[ax];
    std::vector<int64_t> axes(rank);
    std::iota(axes.begin(), axes.end(), 0);
    axes[0] = dim;  // as coremltools writes it: the axis as given (a negative dim stays negative)
    axes[ax] = 0;
    Var* re = mk("transpose", {A("x", in.re), A("perm", ints(axes))});
    Var* im = mk("transpose", {A("x", in.im), A("perm", ints(axes))});
    re = resize(re, 0, n);
    im = resize(im, 0, n);
    const std::vector<int64_t> original_shape = static_dims(re);
    const int64_t rows = original_shape[0];
    re = mk("reshape", {A("x", re), A("shape", ints({rows, -1}))});
    im = mk("reshape", {A("x", im), A("shape", ints({rows, -1}))});
    Var* N = mk("cast", {A("x", i32(rows)), A("dtype", str("fp32"))});
    auto [cos_base, sin_base] = dft_matrix(N, false);
    Var* real_part;
    Var* imag_part;
    if (!inverse) {
      Var* a = mk("matmul", {A("x", cos_base), A("y", re)});
      Var* b = mk("matmul", {A("x", sin_base), A("y", im)});
      real_part = mk("add", {A("x", a), A("y", b)});
      Var* c = mk("matmul", {A("x", sin_base), A("y", re)});
      Var* d = mk("matmul", {A("x", cos_base), A("y", im)});
      imag_part = mk("sub", {A("x", c), A("y", d)});
      imag_part = mk("mul", {A("x", imag_part), A("y", f32(-1.0))});
    } else {
      Var* a = mk("matmul", {A("x", cos_base), A("y", re)});
      Var* b = mk("matmul", {A("x", sin_base), A("y", im)});
      real_part = mk("sub", {A("x", a), A("y", b)});
      Var* c = mk("matmul", {A("x", sin_base), A("y", re)});
      Var* d = mk("matmul", {A("x", cos_base), A("y", im)});
      imag_part = mk("add", {A("x", c), A("y", d)});
    }
    real_part = mk("reshape", {A("x", real_part), A("shape", ints(original_shape))});
    imag_part = mk("reshape", {A("x", imag_part), A("shape", ints(original_shape))});
    real_part = mk("transpose", {A("x", real_part), A("perm", ints(axes))});
    imag_part = mk("transpose", {A("x", imag_part), A("perm", ints(axes))});
    // fft: "forward" divides by n, "ortho" by sqrt(n); ifft: "backward" by n, "ortho" by sqrt(n)
    const char* by_n = inverse ? "backward" : "forward";
    if (norm == by_n || norm == "ortho") {
      Var* scale = norm == by_n ? N : mk("sqrt", {A("x", N)});
      real_part = mk("real_div", {A("x", real_part), A("y", scale)});
      imag_part = mk("real_div", {A("x", imag_part), A("y", scale)});
    }
    return {real_part, imag_part};
  }

  // coremltools' _rfft_1d: fft of (x, 0), keeping the first n // 2 + 1 bins along `dim`.
  Parts rfft_1d(Var* x, std::optional<int64_t> n, int64_t dim, const std::string& norm) {
    Var* zeros = mk("fill", {A("shape", mk("shape", {A("x", x)})), A("value", f32(0.0))});
    Parts p = fft_1d({x, zeros}, n, dim, norm, false);
    const int64_t keep = static_dims(p.re)[fft_axis_index(dim, p.re->type()->rank())] / 2 + 1;
    Var* idx = mk("range_1d", {A("start", i32(0)), A("end", i32(keep)), A("step", i32(1))});
    return {mk("gather", {A("x", p.re), A("indices", idx), A("axis", i32(dim))}),
            mk("gather", {A("x", p.im), A("indices", idx), A("axis", i32(dim))})};
  }

  // coremltools' _restore_conj: the full spectrum from its one-sided half, X[i] = conj(X[-i]).
  Parts restore_conj(Parts in, std::optional<int64_t> n, int64_t dim) {
    Var* re = in.re;
    Var* im = in.im;
    const size_t ax = fft_axis_index(dim, re->type()->rank());
    int64_t size = 2 * (static_dims(re)[ax] - 1);
    if (n) {
      size = *n;
      re = resize(re, dim, size / 2 + 1);
      im = resize(im, dim, size / 2 + 1);
    }
    const int64_t len = static_dims(re)[ax];
    const int64_t range_end = size % 2 == 0 ? len - 2 : len - 1;
    if (range_end > 0) {
      Var* mirror =
          mk("range_1d", {A("start", i32(range_end)), A("end", i32(0)), A("step", i32(-1))});
      Var* re_m = mk("gather", {A("x", re), A("indices", mirror), A("axis", i32(dim))});
      Var* im_m = mk("gather", {A("x", im), A("indices", mirror), A("axis", i32(dim))});
      im_m = mk("mul", {A("x", im_m), A("y", f32(-1.0))});
      re = mk("concat", {seq("values", {re, re_m}), A("axis", i32(dim))});
      im = mk("concat", {seq("values", {im, im_m}), A("axis", i32(dim))});
    }
    return {re, im};
  }

  // coremltools' _stft: convolutions of the signal with the windowed DFT matrices.
  Parts stft(const Operation* op, Var* re, Var* im) {
    Var* n_fft = op->input1("n_fft");
    Var* hop = op->input1("hop_length");
    Var* win_length = op->input1("win_length");
    Var* window = op->input1("window");
    if (!hop) hop = mk("floor_div", {A("x", n_fft), A("y", i32(4))});
    const bool add_batch = re->type()->rank() == 1;
    if (add_batch) {
      re = mk("expand_dims", {A("x", re), A("axes", ints({0}))});
      if (im) im = mk("expand_dims", {A("x", im), A("axes", ints({0}))});
    }
    auto [cos_base, sin_base] = dft_matrix(n_fft, bool_input(op, "onesided"));
    if (win_length) {
      const int64_t n = n_fft->value()->as_int(0);
      const int64_t w = win_length->value()->as_int(0);
      const int64_t n_left = (n - w) / 2;
      const int64_t n_right = n - w - n_left;
      Var* left = mk("fill", {A("shape", ints({n_left})), A("value", f32(0.0))});
      if (!window) window = mk("fill", {A("shape", ints({w})), A("value", f32(1.0))});
      Var* right = mk("fill", {A("shape", ints({n_right})), A("value", f32(0.0))});
      window = mk("concat", {seq("values", {left, window, right}), A("axis", i32(0))});
    }
    if (window) {
      cos_base = mk("mul", {A("x", window), A("y", cos_base)});
      sin_base = mk("mul", {A("x", window), A("y", sin_base)});
    }
    sin_base = mk("sub", {A("x", f32(0.0)), A("y", sin_base)});
    cos_base = mk("expand_dims", {A("x", cos_base), A("axes", ints({1}))});
    sin_base = mk("expand_dims", {A("x", sin_base), A("axes", ints({1}))});
    Var* strides = mk("expand_dims", {A("x", hop), A("axes", ints({0}))});
    auto conv = [&](Var* x, Var* w) {
      return mk("conv",
                {A("x", x), A("weight", w), A("strides", strides), A("pad_type", str("valid"))});
    };
    Var* sig_re = mk("expand_dims", {A("x", re), A("axes", ints({1}))});
    Var* cos_re = conv(sig_re, cos_base);
    Var* sin_re = conv(sig_re, sin_base);
    Var* real_result = cos_re;
    Var* imag_result = sin_re;
    if (im) {
      Var* sig_im = mk("expand_dims", {A("x", im), A("axes", ints({1}))});
      Var* cos_im = conv(sig_im, cos_base);
      Var* sin_im = conv(sig_im, sin_base);
      real_result = mk("sub", {A("x", cos_re), A("y", sin_im)});  // the sin weights are negated
      imag_result = mk("add", {A("x", sin_re), A("y", cos_im)});
    }
    if (add_batch) {
      real_result = mk("squeeze", {A("x", real_result), A("axes", ints({0}))});
      imag_result = mk("squeeze", {A("x", imag_result), A("axes", ints({0}))});
    }
    if (bool_input(op, "normalized")) {
      Var* divisor = mk("sqrt", {A("x", mk("cast", {A("x", n_fft), A("dtype", str("fp32"))}))});
      real_result = mk("real_div", {A("x", real_result), A("y", divisor)});
      imag_result = mk("real_div", {A("x", imag_result), A("y", divisor)});
    }
    return {real_result, imag_result};
  }

  // An fft / fftn input that is real: (x, zeros) as coremltools makes it (fill of a cast 0.0).
  Parts real_with_zeros(Var* data) {
    Var* shape = mk("shape", {A("x", data)});
    Var* zero = b_.add_const(std::make_shared<const Value>(f32(0.0)));
    Var* value =
        mk("cast", {A("x", zero), A("dtype", str(std::string(dtype_name(data->type()->dtype()))))});
    return {data, mk("fill", {A("shape", shape), A("value", value)})};
  }

  void lower(Operation* op) {
    const std::string& t = op->op_type();
    Var* out = op->output(0);
    const std::string norm =
        op->input1("norm") ? op->input1("norm")->value()->string_values().at(0) : "";
    auto done_complex = [&](Parts p) { parts_[out] = p; };
    auto done_real = [&](Var* v) { pass_util::replace_var(out, v); };
    auto data_parts = [&]() {
      Var* data = op->input1("data");
      return is_complex_var(data) ? parts_of(op, data) : real_with_zeros(data);
    };
    if (t == "complex") {
      done_complex({op->input1("real_data"), op->input1("imag_data")});
    } else if (t == "complex_real" || t == "complex_imag") {
      Parts p = parts_of(op, op->input1("data"));
      done_real(mk("identity", {A("x", t == "complex_real" ? p.re : p.im)}));
    } else if (t == "complex_abs") {
      Parts p = parts_of(op, op->input1("x"));
      Var* sr = mk("square", {A("x", p.re)});
      Var* si = mk("square", {A("x", p.im)});
      done_real(mk("sqrt", {A("x", mk("add", {A("x", sr), A("y", si)}))}));
    } else if (t == "complex_shape") {
      done_real(mk("shape", {A("x", parts_of(op, op->input1("x")).re)}));
    } else if (t == "complex_fft") {
      done_complex(fft_1d(data_parts(), opt_int(op, "n"), *opt_int(op, "dim"), norm, false));
    } else if (t == "complex_ifft") {
      done_complex(fft_1d(parts_of(op, op->input1("data")), opt_int(op, "n"), *opt_int(op, "dim"),
                          norm, true));
    } else if (t == "complex_rfft") {
      done_complex(rfft_1d(op->input1("data"), opt_int(op, "n"), *opt_int(op, "dim"), norm));
    } else if (t == "complex_fftn" || t == "complex_ifftn") {
      Parts p = t == "complex_fftn" ? data_parts() : parts_of(op, op->input1("data"));
      FftAxes a = axes(op, p.re, false);
      for (size_t i = 0; i < a.dims.size(); ++i) {
        const int64_t n = a.sizes[i]->value();
        constant(n);
        constant(a.dims[i]);
        p = fft_1d(p, n, a.dims[i], norm, t == "complex_ifftn");
      }
      done_complex(p);
    } else if (t == "complex_rfftn") {
      Var* data = op->input1("data");
      FftAxes a = axes(op, data, false);
      const int64_t last_n = a.sizes.back()->value();
      constant(last_n);
      constant(a.dims.back());
      Parts p = rfft_1d(data, last_n, a.dims.back(), norm);
      for (size_t i = 0; i + 1 < a.dims.size(); ++i) {
        const int64_t n = a.sizes[i]->value();
        constant(n);
        constant(a.dims[i]);
        p = fft_1d(p, n, a.dims[i], norm, false);
      }
      done_complex(p);
    } else if (t == "complex_irfft") {
      Var* data = op->input1("data");
      const int64_t dim = *opt_int(op, "dim");
      Parts p = restore_conj(parts_of(op, data), opt_int(op, "n"), dim);
      FftAxes a = axes(op, data, true);
      const int64_t n = a.sizes[0]->value();
      constant(n);
      constant(a.dims[0]);
      done_real(fft_1d(p, n, a.dims[0], norm, true).re);
    } else if (t == "complex_irfftn") {
      Parts p = parts_of(op, op->input1("data"));
      FftAxes a = axes(op, p.re, true);
      for (size_t i = 0; i + 1 < a.dims.size(); ++i) {
        const int64_t n = a.sizes[i]->value();
        constant(n);
        constant(a.dims[i]);
        p = fft_1d(p, n, a.dims[i], norm, true);
      }
      const int64_t n = a.sizes.back()->value();
      const int64_t dim = a.dims.back();
      constant(n);
      constant(dim);
      p = restore_conj(p, n, dim);
      p = fft_1d(p, n, dim, norm, true);
      done_real(resize(p.re, dim, n));
    } else if (t == "complex_stft") {
      Var* in = op->input1("input");
      Parts p = is_complex_var(in) ? parts_of(op, in) : Parts{in, nullptr};
      done_complex(stft(op, p.re, p.im));
    } else {
      fail(op, "internal: no lowering for this complex dialect op");
    }
  }

  // The canonical FFT axes of an N-D op, over the shape of `like` (the data or its real part).
  FftAxes axes(const Operation* op, const Var* like, bool c2r) {
    const bool one_d = op->input_index("n") >= 0;
    return fft_canonicalize(f_.ctx(), like->type()->shape(), opt_ints(op, one_d ? "n" : "shapes"),
                            opt_ints(op, one_d ? "dim" : "dims"), c2r);
  }

  Function& f_;
  Builder b_;
  std::unordered_map<const Var*, Parts> parts_;
};

class LowerComplexDialectOps : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, kPass, {});
    bool changed = false;
    // every dialect op reads or makes complex data, so a function whose context never made a
    // complex type has neither dialect ops nor complex vars: no walk
    for (auto& [name, f] : p.functions())
      if (f->ctx().has_complex_types()) check_function(name, *f);
    for (auto& [name, f] : p.functions())
      if (f->ctx().has_complex_types()) changed = Lowering(*f).run() || changed;
    return changed;
  }
};

}  // namespace

/// Registers common::lower_complex_dialect_ops.
void register_lower_complex_dialect_ops(PassRegistry& r) {
  r.add(kPass, [] { return std::make_unique<LowerComplexDialectOps>(); });
}

}  // namespace milkit
