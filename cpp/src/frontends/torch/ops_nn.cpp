// ATen neural-network operators: linear algebra (linear, addmm, matmul, bmm, baddbmm),
// convolutions (conv*d, convolution, transposed), normalization (batch, layer, group, RMS),
// pooling (max, avg, adaptive), softmax, dropout, scaled_dot_product_attention, embedding.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "converter.h"

namespace milkit {
namespace torch_detail {

namespace {

using C = Converter;

Var* bin(C& cv, const char* op, Var* x, Var* y) { return cv.op(op, {C::a("x", x), C::a("y", y)}); }

Var* input(C& cv, const json& n) { return C::has(n, "input") ? cv.tensor(n, "input") : cv.tensor(n, "self"); }

bool is_const(Var* v) { return v->value() && !v->value()->is_symbolic(); }

// `v` (per-channel, rank 1) reshaped to broadcast over [N, C, spatial...] of rank `rank`.
Var* per_channel(C& cv, Var* v, int rank) {
  std::vector<int64_t> axes;
  for (int i = 2; i < rank; ++i) axes.push_back(i - 1);
  if (axes.empty()) return v;
  return cv.op("expand_dims", {C::a("x", v), C::aints32("axes", axes)});
}

std::vector<int64_t> expand_list(C& cv, const json& n, std::vector<int64_t> v, size_t k, const char* what) {
  if (v.size() == 1 && k > 1) v.assign(k, v[0]);
  if (v.size() != k) cv.fail(n, std::string(what) + " has " + std::to_string(v.size()) + " values for " + std::to_string(k) + " spatial dims");
  return v;
}

// conv / conv_transpose with torch's arguments
Var* convolution(C& cv, const json& n, Var* x, Var* w, Var* bias, bool transposed) {
  int r = cv.rank(n, x);
  bool unbatched = false;
  int wr = cv.rank(n, w);
  if (r == wr - 1) {  // torch accepts unbatched inputs
    x = cv.op("expand_dims", {C::a("x", x), C::aints32("axes", {0})});
    unbatched = true;
    r += 1;
  }
  if (r < 3) cv.fail(n, "input has rank " + std::to_string(r) + "; expected N, C and spatial dims");
  size_t sp = static_cast<size_t>(r - 2);
  auto stride = expand_list(cv, n, cv.ints(n, "stride", {1}), sp, "stride");
  auto dil = expand_list(cv, n, cv.ints(n, "dilation", {1}), sp, "dilation");
  int64_t groups = cv.i(n, "groups", 1);
  DataType dt = C::dtype(x);
  w = cv.cast(w, dt);
  std::vector<Arg> args{C::a("x", x), C::a("weight", w)};
  if (bias) args.push_back(C::a("bias", cv.cast(bias, dt)));
  args.push_back(C::aints32("strides", stride));
  args.push_back(C::aints32("dilations", dil));
  args.push_back(C::ai32("groups", groups));
  Var* out;
  if (!transposed) {
    const json* pa = C::arg(n, "padding");
    if (pa && pa->contains("as_string")) {
      std::string p = (*pa)["as_string"].get<std::string>();
      if (p != "same" && p != "valid") cv.fail(n, "padding '" + p + "' is not 'same' or 'valid'");
      args.push_back(C::astr("pad_type", p));
    } else {
      auto pad = expand_list(cv, n, cv.ints(n, "padding", {0}), sp, "padding");
      std::vector<int64_t> p2;
      for (auto p : pad) {
        p2.push_back(p);
        p2.push_back(p);
      }
      args.push_back(C::astr("pad_type", "custom"));
      args.push_back(C::aints32("pad", p2));
    }
    out = cv.op("conv", std::move(args));
  } else {
    auto pad = expand_list(cv, n, cv.ints(n, "padding", {0}), sp, "padding");
    auto opad = expand_list(cv, n, cv.ints(n, "output_padding", {0}), sp, "output_padding");
    std::vector<int64_t> p2, extra(sp, 0);
    for (size_t k = 0; k < sp; ++k) {
      p2.push_back(pad[k]);
      int64_t e = pad[k] - opad[k];
      if (e < 0) {
        extra[k] = -e;
        e = 0;
      }
      p2.push_back(e);
    }
    args.push_back(C::astr("pad_type", "custom"));
    args.push_back(C::aints32("pad", p2));
    if (bias && std::any_of(extra.begin(), extra.end(), [](int64_t e) { return e > 0; })) args.erase(args.begin() + 2);
    out = cv.op("conv_transpose", std::move(args));
    if (std::any_of(extra.begin(), extra.end(), [](int64_t e) { return e > 0; })) {
      std::vector<int64_t> pads(4, 0);
      for (size_t k = 0; k < sp; ++k) {
        pads.push_back(0);
        pads.push_back(extra[k]);
      }
      out = cv.op("pad", {C::a("x", out), C::aints32("pad", pads), C::astr("mode", "constant"),
                          C::a("constant_val", Value::scalar_float(dt, 0))});
      // the added border holds only the bias
      if (bias) out = cv.op("add", {C::a("x", out), C::a("y", per_channel(cv, cv.cast(bias, dt), r))});
    }
  }
  if (unbatched) out = cv.op("squeeze", {C::a("x", out), C::aints32("axes", {0})});
  return out;
}

void conv_fn(C& cv, const json& n, bool transposed) {
  Var* x = input(cv, n);
  Var* w = cv.tensor(n, "weight");
  Var* bias = cv.opt_tensor(n, "bias");
  cv.out(n, convolution(cv, n, x, w, bias, transposed));
}

Var* matmul(C& cv, Var* x, Var* y, bool ty = false) {
  return cv.op("matmul", {C::a("x", x), C::a("y", y), C::abool("transpose_x", false), C::abool("transpose_y", ty)});
}

Var* batch_norm(C& cv, const json& n, Var* x, Var* w, Var* b, Var* mean, Var* var, double eps) {
  int r = cv.rank(n, x);
  DataType dt = C::dtype(x);
  if (!mean || !var) cv.fail(n, "batch_norm without running statistics (training mode) is not supported");
  bool ok_const = is_const(mean) && is_const(var) && (!w || is_const(w)) && (!b || is_const(b));
  if (ok_const && r >= 3 && r <= 5) {
    std::vector<Arg> args{C::a("x", x), C::a("mean", cv.cast(mean, dt)), C::a("variance", cv.cast(var, dt))};
    if (w) args.push_back(C::a("gamma", cv.cast(w, dt)));
    if (b) args.push_back(C::a("beta", cv.cast(b, dt)));
    args.push_back(C::a("epsilon", Value::scalar_float(dt, eps)));
    return cv.op("batch_norm", std::move(args));
  }
  // general form: (x - mean) / sqrt(var + eps) * w + b, per channel (axis 1)
  int rr = std::max(r, 2);
  auto pc = [&](Var* v) { return per_channel(cv, cv.cast(v, dt), rr); };
  Var* y = bin(cv, "sub", x, pc(mean));
  Var* den = cv.op("rsqrt", {C::a("x", bin(cv, "add", pc(var), cv.cs(eps, dt)))});
  y = bin(cv, "mul", y, den);
  if (w) y = bin(cv, "mul", y, pc(w));
  if (b) y = bin(cv, "add", y, pc(b));
  return y;
}

Var* layer_norm(C& cv, const json& n, Var* x, const std::vector<int64_t>& normalized, Var* w, Var* b, double eps) {
  int r = cv.rank(n, x);
  DataType dt = C::dtype(x);
  std::vector<int64_t> axes;
  for (size_t k = 0; k < normalized.size(); ++k) axes.push_back(r - static_cast<int64_t>(normalized.size()) + static_cast<int64_t>(k));
  bool wc = (!w || is_const(w)) && (!b || is_const(b));
  if (wc) {
    std::vector<Arg> args{C::a("x", x), C::aints32("axes", axes)};
    if (w) args.push_back(C::a("gamma", cv.cast(w, dt)));
    if (b) args.push_back(C::a("beta", cv.cast(b, dt)));
    args.push_back(C::a("epsilon", Value::scalar_float(dt, eps)));
    return cv.op("layer_norm", std::move(args));
  }
  Var* y = cv.op("layer_norm", {C::a("x", x), C::aints32("axes", axes), C::a("epsilon", Value::scalar_float(dt, eps))});
  if (w) y = bin(cv, "mul", y, cv.cast(w, dt));
  if (b) y = bin(cv, "add", y, cv.cast(b, dt));
  return y;
}

Var* group_norm(C& cv, const json& n, Var* x, int64_t groups, Var* w, Var* b, double eps) {
  int r = cv.rank(n, x);
  DataType dt = C::dtype(x);
  // [N, C, *] -> [N, G, C/G * prod(*)]; normalize over the last axis; back; per-channel affine
  Var* shp = cv.op("shape", {C::a("x", x)});
  Var* g = cv.op("reshape", {C::a("x", x), C::a("shape", cv.shape_of_pieces(x, {{true, 0}, {false, groups}, {false, -1}}))});
  Var* mean = cv.op("reduce_mean", {C::a("x", g), C::aints32("axes", {2}), C::abool("keep_dims", true)});
  Var* d = bin(cv, "sub", g, mean);
  Var* var = cv.op("reduce_mean", {C::a("x", bin(cv, "mul", d, d)), C::aints32("axes", {2}), C::abool("keep_dims", true)});
  Var* y = bin(cv, "mul", d, cv.op("rsqrt", {C::a("x", bin(cv, "add", var, cv.cs(eps, dt)))}));
  y = cv.op("reshape", {C::a("x", y), C::a("shape", shp)});
  if (w) y = bin(cv, "mul", y, per_channel(cv, cv.cast(w, dt), r));
  if (b) y = bin(cv, "add", y, per_channel(cv, cv.cast(b, dt), r));
  return y;
}

bool output_used(C& cv, const json& n, size_t k);

struct PoolArgs {
  std::vector<int64_t> kernel, stride, pad;
  bool ceil = false;
};

PoolArgs pool_args(C& cv, const json& n, size_t sp) {
  PoolArgs p;
  p.kernel = expand_list(cv, n, cv.ints(n, "kernel_size"), sp, "kernel_size");
  auto st = cv.ints(n, "stride", {});
  p.stride = st.empty() ? p.kernel : expand_list(cv, n, st, sp, "stride");
  auto pad = expand_list(cv, n, cv.ints(n, "padding", {0}), sp, "padding");
  for (auto v : pad) {
    p.pad.push_back(v);
    p.pad.push_back(v);
  }
  p.ceil = cv.bo(n, "ceil_mode", false);
  return p;
}

std::pair<Var*, Var*> max_pool_taps(C& cv, const json& n, Var* x, size_t sp, const PoolArgs& p, const std::vector<int64_t>& dil,
                                    bool want_idx);

void max_pool(C& cv, const json& n, size_t sp) {
  Var* x = input(cv, n);
  int r = cv.rank(n, x);
  bool unbatched = r == static_cast<int>(sp) + 1;
  if (unbatched) x = cv.op("expand_dims", {C::a("x", x), C::aints32("axes", {0})});
  auto p = pool_args(cv, n, sp);
  auto dil = expand_list(cv, n, cv.ints(n, "dilation", {1}), sp, "dilation");
  bool dilated = std::any_of(dil.begin(), dil.end(), [](int64_t d) { return d != 1; });
  // max_pool*d_with_indices: the indices are computed only when something reads them
  bool want_idx = output_used(cv, n, 1);
  if (dilated || want_idx) {
    for (size_t q = 0; q < sp; ++q)
      if (!C::shape(x)[static_cast<size_t>(r) + (unbatched ? 1 : 0) - sp + q]->is_const())
        cv.fail(n, std::string(want_idx ? "the indices output" : "dilated max pooling") + " needs known spatial sizes");
    auto [y, idx] = max_pool_taps(cv, n, x, sp, p, dil, want_idx);
    if (unbatched) {
      y = cv.op("squeeze", {C::a("x", y), C::aints32("axes", {0})});
      if (idx) idx = cv.op("squeeze", {C::a("x", idx), C::aints32("axes", {0})});
    }
    cv.outs(n, {y, idx});
    return;
  }
  Var* y = cv.op("max_pool", {C::a("x", x), C::aints32("kernel_sizes", p.kernel), C::aints32("strides", p.stride),
                              C::astr("pad_type", "custom"), C::aints32("pad", p.pad), C::abool("ceil_mode", p.ceil)});
  if (unbatched) y = cv.op("squeeze", {C::a("x", y), C::aints32("axes", {0})});
  cv.out(n, y);
}

void avg_pool(C& cv, const json& n, size_t sp) {
  Var* x = input(cv, n);
  int r = cv.rank(n, x);
  bool unbatched = r == static_cast<int>(sp) + 1;
  if (unbatched) x = cv.op("expand_dims", {C::a("x", x), C::aints32("axes", {0})});
  auto p = pool_args(cv, n, sp);
  if (C::has(n, "divisor_override")) cv.fail(n, "divisor_override is not supported");
  bool include = cv.bo(n, "count_include_pad", true);
  Var* y = cv.op("avg_pool", {C::a("x", x), C::aints32("kernel_sizes", p.kernel), C::aints32("strides", p.stride),
                              C::astr("pad_type", "custom"), C::aints32("pad", p.pad),
                              C::abool("exclude_padding_from_average", !include), C::abool("ceil_mode", p.ceil)});
  if (unbatched) y = cv.op("squeeze", {C::a("x", y), C::aints32("axes", {0})});
  cv.out(n, y);
}

// adaptive average / max pooling over the last `sp` dims
void adaptive_pool(C& cv, const json& n, size_t sp, bool is_max) {
  if (is_max && output_used(cv, n, 1)) cv.fail(n, "the indices output of adaptive max pooling is not supported");
  Var* x = input(cv, n);
  int r = cv.rank(n, x);
  auto out_size = expand_list(cv, n, cv.ints(n, "output_size"), sp, "output_size");
  const char* reduce = is_max ? "reduce_max" : "reduce_mean";
  bool all_one = std::all_of(out_size.begin(), out_size.end(), [](int64_t v) { return v == 1; });
  std::vector<int64_t> axes;
  for (size_t k = 0; k < sp; ++k) axes.push_back(r - static_cast<int64_t>(sp) + static_cast<int64_t>(k));
  if (all_one) {
    cv.out(n, cv.op(reduce, {C::a("x", x), C::aints32("axes", axes), C::abool("keep_dims", true)}));
    return;
  }
  std::vector<int64_t> in_size;
  for (auto ax : axes) {
    Dim d = C::shape(x)[static_cast<size_t>(ax)];
    if (!d->is_const()) cv.fail(n, "adaptive pooling of a symbolic size to " + std::to_string(out_size[0]) + " is not supported");
    in_size.push_back(d->value());
  }
  bool divisible = true;
  for (size_t k = 0; k < sp; ++k) divisible = divisible && in_size[k] % out_size[k] == 0;
  if (divisible && r == static_cast<int>(sp) + 2) {
    std::vector<int64_t> kern;
    for (size_t k = 0; k < sp; ++k) kern.push_back(in_size[k] / out_size[k]);
    std::vector<int64_t> pad(2 * sp, 0);
    cv.out(n, cv.op(is_max ? "max_pool" : "avg_pool",
                    {C::a("x", x), C::aints32("kernel_sizes", kern), C::aints32("strides", kern),
                     C::astr("pad_type", "valid")}));
    return;
  }
  // general: one window per output position, axis by axis (torch's start/end rule)
  Var* cur = x;
  for (size_t k = 0; k < sp; ++k) {
    int64_t ax = axes[k], in = in_size[k], o = out_size[k];
    Arg vals{"values", {}, true};
    for (int64_t i = 0; i < o; ++i) {
      int64_t s = (i * in) / o, e = ((i + 1) * in + o - 1) / o;
      Var* sl = cv.op("slice_by_size", {C::a("x", cur), C::a("begin", [&] {
                                           std::vector<int64_t> b(static_cast<size_t>(r), 0);
                                           b[static_cast<size_t>(ax)] = s;
                                           return Value::int_list(b);
                                         }()),
                                        C::a("size", [&] {
                                          std::vector<int64_t> z(static_cast<size_t>(r), -1);
                                          z[static_cast<size_t>(ax)] = e - s;
                                          return Value::int_list(z);
                                        }())});
      vals.items.push_back(ArgItem{cv.op(reduce, {C::a("x", sl), C::aints32("axes", {ax}), C::abool("keep_dims", true)}), nullptr});
    }
    cur = o == 1 ? vals.items[0].var : cv.op("concat", {vals, C::ai32("axis", ax)});
  }
  cv.out(n, cur);
}

Var* softmax(C& cv, const json& n, bool log) {
  Var* x = input(cv, n);
  if (auto dt = cv.dtype_arg(n, "dtype")) x = cv.cast(x, *dt);
  if (auto od = cv.out_dtype(n); od && is_float(*od)) x = cv.cast(x, *od);
  if (!is_float(C::dtype(x))) x = cv.cast(x, DataType::Float32);
  int64_t d = cv.axis(n, cv.i(n, "dim", -1), cv.rank(n, x));
  if (!log) return cv.op("softmax", {C::a("x", x), C::ai32("axis", d)});
  Var* lse = cv.op("reduce_log_sum_exp", {C::a("x", x), C::aints32("axes", {d}), C::abool("keep_dims", true)});
  return bin(cv, "sub", x, lse);
}

// softmax(x) along `axis` with rows that are -inf throughout giving 0, not NaN (torch's
// _safe_softmax, which scaled_dot_product_attention uses for fully masked query rows)
Var* safe_softmax(C& cv, Var* x, int64_t axis) {
  Var* p = cv.op("softmax", {C::a("x", x), C::ai32("axis", axis)});
  DataType dt = C::dtype(x);
  Var* top = cv.op("reduce_max", {C::a("x", x), C::aints32("axes", {axis}), C::abool("keep_dims", true)});
  Var* dead = bin(cv, "equal", top, cv.cs(-std::numeric_limits<double>::infinity(), dt));
  return cv.op("select", {C::a("cond", dead), C::a("a", cv.cs(0, dt)), C::a("b", p)});
}

// scaled_dot_product_attention by its definition (mask, causal, scale, GQA)
Var* sdpa(C& cv, const json& n) {
  Var* q = cv.tensor(n, "query");
  Var* k = cv.tensor(n, "key");
  Var* v = cv.tensor(n, "value");
  Var* mask = cv.opt_tensor(n, "attn_mask");
  bool causal = cv.bo(n, "is_causal", false);
  DataType dt = C::dtype(q);
  int r = cv.rank(n, q);
  if (r < 2) cv.fail(n, "query must have rank >= 2");
  Dim e = C::shape(q)[static_cast<size_t>(r - 1)];
  double scale;
  if (C::has(n, "scale")) {
    scale = cv.f(n, "scale", 1);
  } else {
    if (!e->is_const()) cv.fail(n, "the embedding size of the query must be known");
    scale = 1.0 / std::sqrt(static_cast<double>(e->value()));
  }
  if (cv.bo(n, "enable_gqa", false) && r >= 3) {
    Dim hq = C::shape(q)[static_cast<size_t>(r - 3)], hk = C::shape(k)[static_cast<size_t>(r - 3)];
    if (!hq->is_const() || !hk->is_const() || hk->value() == 0 || hq->value() % hk->value())
      cv.fail(n, "enable_gqa needs known head counts, the query's a multiple of the key's");
    int64_t rep = hq->value() / hk->value();
    if (rep > 1) {
      // repeat_interleave along the head axis: [.., Hk, S, E] -> [.., Hk, rep, S, E] -> [.., Hk*rep, S, E]
      auto rep_kv = [&](Var* t) {
        Var* ex = cv.op("expand_dims", {C::a("x", t), C::aints32("axes", {r - 2})});
        std::vector<int64_t> reps(static_cast<size_t>(r + 1), 1);
        reps[static_cast<size_t>(r - 2)] = rep;
        Var* tl = cv.op("tile", {C::a("x", ex), C::aints32("reps", reps)});
        std::vector<Dim> sh = C::shape(t);
        sh[static_cast<size_t>(r - 3)] = cv.ctx().constant(hq->value());
        return cv.op("reshape", {C::a("x", tl), C::a("shape", cv.shape_var(sh))});
      };
      k = rep_kv(k);
      v = rep_kv(v);
    }
  }
  Var* qs = bin(cv, "mul", q, cv.cs(scale, dt));
  Var* s = matmul(cv, qs, cv.cast(k, dt), true);
  if (causal) {
    Dim L = C::shape(q)[static_cast<size_t>(r - 2)], S = C::shape(k)[static_cast<size_t>(r - 2)];
    Var* ones = cv.op("fill", {C::a("shape", cv.shape_var({L, S})), C::a("value", Value::scalar_float(dt, 1))});
    Var* tri = cv.op("band_part", {C::a("x", ones), C::ai32("lower", -1), C::ai32("upper", 0)});
    Var* keep = bin(cv, "greater", tri, cv.cs(0, dt));
    s = cv.op("select", {C::a("cond", keep), C::a("a", s), C::a("b", cv.cs(-std::numeric_limits<double>::infinity(), dt))});
  }
  if (mask) {
    if (C::dtype(mask) == DataType::Bool)
      s = cv.op("select", {C::a("cond", mask), C::a("a", s), C::a("b", cv.cs(-std::numeric_limits<double>::infinity(), dt))});
    else
      s = bin(cv, "add", s, cv.cast(mask, dt));
  }
  // a mask can hide every key from a query (padding): torch gives that row 0
  Var* p = mask ? safe_softmax(cv, s, -1) : cv.op("softmax", {C::a("x", s), C::ai32("axis", -1)});
  return matmul(cv, p, cv.cast(v, dt));
}

// ---- helpers for the composed operators below -------------------------------------------------

// whether `j` (node inputs or graph outputs, subgraphs included) reads tensor `name`
bool json_reads(const json& j, const std::string& name) {
  if (j.is_object()) {
    auto t = j.find("as_tensor");
    if (t != j.end() && t->is_object() && t->value("name", std::string()) == name) return true;
    auto ts = j.find("as_tensors");
    if (ts != j.end() && ts->is_array())
      for (auto& e : *ts)
        if (e.is_object() && e.value("name", std::string()) == name) return true;
    for (auto it = j.begin(); it != j.end(); ++it)
      if ((it->is_object() || it->is_array()) && json_reads(*it, name)) return true;
  } else if (j.is_array()) {
    for (auto& e : j)
      if (json_reads(e, name)) return true;
  }
  return false;
}

// whether output `k` of node `n` is read by any node or is a program output (torch names every
// output of a multi-output op, used or not)
bool output_used(C& cv, const json& n, size_t k) {
  auto names = C::output_names(n);
  if (k >= names.size() || names[k].empty()) return false;
  if (auto it = cv.graph.find("nodes"); it != cv.graph.end())
    for (auto& nd : *it)
      if (nd.contains("inputs") && json_reads(nd["inputs"], names[k])) return true;
  if (auto it = cv.graph.find("outputs"); it != cv.graph.end()) return json_reads(*it, names[k]);
  return false;
}

int64_t known_dim(C& cv, const json& n, Var* x, int64_t ax, const char* what) {
  Dim d = C::shape(x)[static_cast<size_t>(ax)];
  if (!d->is_const()) cv.fail(n, std::string(what) + " must be known (it is " + d->str() + ")");
  return d->value();
}

Var* reduce_op(C& cv, const char* op, Var* x, const std::vector<int64_t>& axes, bool keep) {
  return cv.op(op, {C::a("x", x), C::aints32("axes", axes), C::abool("keep_dims", keep)});
}

// x[begin : begin + (count - 1) * step + 1 : step] along the axes of `axes` (other axes whole)
Var* strided(C& cv, Var* x, int r, const std::vector<int64_t>& axes, const std::vector<int64_t>& begin,
             const std::vector<int64_t>& count, const std::vector<int64_t>& step) {
  std::vector<int64_t> b(static_cast<size_t>(r), 0), e(static_cast<size_t>(r), 0), st(static_cast<size_t>(r), 1);
  std::vector<int64_t> bm(static_cast<size_t>(r), 1), em(static_cast<size_t>(r), 1);
  for (size_t k = 0; k < axes.size(); ++k) {
    size_t a = static_cast<size_t>(axes[k]);
    b[a] = begin[k];
    e[a] = begin[k] + (count[k] - 1) * step[k] + 1;
    st[a] = step[k];
    bm[a] = em[a] = 0;
  }
  return cv.op("slice_by_index", {C::a("x", x), C::aints32("begin", b), C::aints32("end", e), C::aints32("stride", st),
                                  C::a("begin_mask", Value::from_ints(DataType::Bool, {r}, bm)),
                                  C::a("end_mask", Value::from_ints(DataType::Bool, {r}, em))});
}

// pads the last spatial axes of `x` (rank r) by (lo[k], hi[k]) with `val`
Var* pad_spatial(C& cv, Var* x, int r, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi, double val) {
  bool any = false;
  std::vector<int64_t> pads(2 * static_cast<size_t>(r) - 2 * lo.size(), 0);
  for (size_t k = 0; k < lo.size(); ++k) {
    pads.push_back(lo[k]);
    pads.push_back(hi[k]);
    any = any || lo[k] || hi[k];
  }
  if (!any) return x;
  return cv.op("pad", {C::a("x", x), C::aints32("pad", pads), C::astr("mode", "constant"),
                       C::a("constant_val", cv.cs(val, C::dtype(x)))});
}

// ---- grid sampling ---------------------------------------------------------------------------

// torch's reflect_coordinates: `c` reflected into [twice_low / 2, twice_high / 2]
Var* reflect_coords(C& cv, Var* c, double twice_low, double twice_high) {
  DataType dt = C::dtype(c);
  if (twice_low == twice_high) return bin(cv, "mul", c, cv.cs(0, dt));
  double mn = twice_low / 2, span = (twice_high - twice_low) / 2;
  Var* in = cv.op("abs", {C::a("x", bin(cv, "sub", c, cv.cs(mn, dt)))});
  Var* flips = cv.op("floor", {C::a("x", bin(cv, "real_div", in, cv.cs(span, dt)))});
  Var* extra = bin(cv, "sub", in, bin(cv, "mul", flips, cv.cs(span, dt)));
  Var* half = cv.op("floor", {C::a("x", bin(cv, "mul", flips, cv.cs(0.5, dt)))});
  Var* even = bin(cv, "equal", bin(cv, "sub", flips, bin(cv, "mul", half, cv.cs(2, dt))), cv.cs(0, dt));
  return cv.op("select", {C::a("cond", even), C::a("a", bin(cv, "add", extra, cv.cs(mn, dt))),
                          C::a("b", bin(cv, "add", bin(cv, "sub", cv.cs(span, dt), extra), cv.cs(mn, dt)))});
}

// grid sampling as torch computes it (GridSampler.h), for what resample does not do (bicubic,
// 3-D): per spatial axis the unnormalized coordinate, its taps and weights (nearest: 1 tap at
// the coordinate rounded half to even; linear: 2; bicubic: 4 around its floor with Keys' weights,
// A = -0.75); the padding mode applies to the coordinate (nearest, linear) or to each tap
// (bicubic): border clamps, reflection reflects then clamps; taps outside the input weigh 0. Every
// combination of taps is gathered from x as [N * prod(spatial), C]. Known shapes only.
Var* grid_gather(C& cv, const json& n, Var* x, Var* grid, int64_t mode, int64_t pad, bool align) {
  auto xs = C::static_shape(x);
  auto gsz = C::static_shape(grid);
  if (!xs || !gsz) cv.fail(n, std::string(mode == 2 ? "bicubic" : "3-D") + " grid sampling needs the shapes of the input and the grid to be known");
  size_t sp = xs->size() - 2;
  int gr = static_cast<int>(sp) + 2;
  int64_t N = (*xs)[0], Cc = (*xs)[1], P = 1;
  for (size_t a = 0; a < sp; ++a) P *= (*xs)[2 + a];
  DataType dt = DataType::Float32;
  grid = cv.cast(grid, dt);
  Var* flat = cv.op("transpose", {C::a("x", cv.op("reshape", {C::a("x", cv.cast(x, dt)), C::aints32("shape", {N, Cc, P})})),
                                  C::aints32("perm", {0, 2, 1})});
  flat = cv.op("reshape", {C::a("x", flat), C::aints32("shape", {N * P, Cc})});
  std::vector<double> base(static_cast<size_t>(N));
  for (int64_t b = 0; b < N; ++b) base[static_cast<size_t>(b)] = static_cast<double>(b * P);
  std::vector<int64_t> bshape(static_cast<size_t>(gr - 1), 1);
  bshape[0] = N;
  Var* pos0 = cv.c(Value::from_doubles(dt, bshape, base));
  const double A = -0.75;
  int taps = mode == 1 ? 1 : mode == 0 ? 2 : 4;
  std::vector<std::vector<Var*>> pos(sp), wt(sp);  // per spatial axis: flat offsets, weights
  int64_t stride = 1;
  for (int64_t a = static_cast<int64_t>(sp) - 1; a >= 0; --a) {
    size_t u = static_cast<size_t>(a);
    double D = static_cast<double>((*xs)[2 + u]);
    // the grid's last axis holds (x, y[, z]): the last spatial axis first
    int64_t comp = static_cast<int64_t>(sp) - 1 - a;
    std::vector<int64_t> b(static_cast<size_t>(gr), 0), e(static_cast<size_t>(gr), 0), m(static_cast<size_t>(gr), 1), sq(static_cast<size_t>(gr), 0);
    b.back() = comp;
    e.back() = comp + 1;
    m.back() = 0;
    sq.back() = 1;
    Var* g = cv.op("slice_by_index", {C::a("x", grid), C::aints32("begin", b), C::aints32("end", e),
                                      C::a("begin_mask", Value::from_ints(DataType::Bool, {gr}, m)),
                                      C::a("end_mask", Value::from_ints(DataType::Bool, {gr}, m)),
                                      C::a("squeeze_mask", Value::from_ints(DataType::Bool, {gr}, sq))});
    Var* c = align ? bin(cv, "mul", bin(cv, "add", g, cv.cs(1, dt)), cv.cs((D - 1) / 2, dt))
                   : bin(cv, "mul", bin(cv, "sub", bin(cv, "mul", bin(cv, "add", g, cv.cs(1, dt)), cv.cs(D, dt)), cv.cs(1, dt)), cv.cs(0.5, dt));
    auto clip = [&](Var* v) { return cv.op("clip", {C::a("x", v), C::af32("alpha", 0), C::af32("beta", D - 1)}); };
    auto padded = [&](Var* v) {
      if (pad == 1) return clip(v);
      if (pad == 2) return clip(align ? reflect_coords(cv, v, 0, 2 * (D - 1)) : reflect_coords(cv, v, -1, 2 * D - 1));
      return v;
    };
    if (mode != 2) c = padded(c);
    Var* f;
    Var* t = nullptr;
    if (mode == 1) {
      // round half to even (torch's nearbyint): floor, plus one above the half or at an odd half
      Var* fl = cv.op("floor", {C::a("x", c)});
      Var* d = bin(cv, "sub", c, fl);
      Var* odd = bin(cv, "not_equal", bin(cv, "sub", fl, bin(cv, "mul", cv.op("floor", {C::a("x", bin(cv, "mul", fl, cv.cs(0.5, dt)))}), cv.cs(2, dt))),
                     cv.cs(0, dt));
      Var* up = cv.op("logical_or", {C::a("x", bin(cv, "greater", d, cv.cs(0.5, dt))),
                                     C::a("y", cv.op("logical_and", {C::a("x", bin(cv, "equal", d, cv.cs(0.5, dt))), C::a("y", odd)}))});
      f = bin(cv, "add", fl, cv.cast(up, dt));
    } else {
      f = cv.op("floor", {C::a("x", c)});
      t = bin(cv, "sub", c, f);
    }
    for (int j = 0; j < taps; ++j) {
      double off = mode == 2 ? j - 1 : j;
      Var* q = bin(cv, "add", f, cv.cs(off, dt));
      Var* w;
      if (mode == 1) {
        w = bin(cv, "add", bin(cv, "mul", q, cv.cs(0, dt)), cv.cs(1, dt));
      } else if (mode == 0) {
        w = j == 0 ? bin(cv, "sub", cv.cs(1, dt), t) : t;
      } else {
        Var* d = cv.op("abs", {C::a("x", bin(cv, "sub", t, cv.cs(off, dt)))});
        Var* d2 = bin(cv, "mul", d, d);
        Var* d3 = bin(cv, "mul", d2, d);
        Var* near = bin(cv, "add", bin(cv, "sub", bin(cv, "mul", d3, cv.cs(A + 2, dt)), bin(cv, "mul", d2, cv.cs(A + 3, dt))), cv.cs(1, dt));
        Var* far = bin(cv, "sub", bin(cv, "add", bin(cv, "sub", bin(cv, "mul", d3, cv.cs(A, dt)), bin(cv, "mul", d2, cv.cs(5 * A, dt))),
                                      bin(cv, "mul", d, cv.cs(8 * A, dt))),
                       cv.cs(4 * A, dt));
        w = cv.op("select", {C::a("cond", bin(cv, "less_equal", d, cv.cs(1, dt))), C::a("a", near), C::a("b", far)});
        q = padded(q);
      }
      Var* ok = cv.op("logical_and", {C::a("x", bin(cv, "greater_equal", q, cv.cs(0, dt))), C::a("y", bin(cv, "less_equal", q, cv.cs(D - 1, dt)))});
      w = cv.op("select", {C::a("cond", ok), C::a("a", w), C::a("b", cv.cs(0, dt))});
      pos[u].push_back(bin(cv, "mul", clip(q), cv.cs(static_cast<double>(stride), dt)));
      wt[u].push_back(w);
    }
    stride *= (*xs)[2 + u];
  }
  Var* y = nullptr;
  int64_t combos = 1;
  for (size_t a = 0; a < sp; ++a) combos *= taps;
  for (int64_t cmb = 0; cmb < combos; ++cmb) {
    Var* id = pos0;
    Var* w = nullptr;
    for (int64_t rem = cmb, a = static_cast<int64_t>(sp) - 1; a >= 0; --a, rem /= taps) {
      size_t u = static_cast<size_t>(a), j = static_cast<size_t>(rem % taps);
      id = bin(cv, "add", id, pos[u][j]);
      w = w ? bin(cv, "mul", w, wt[u][j]) : wt[u][j];
    }
    Var* v = cv.op("gather", {C::a("x", flat), C::a("indices", cv.cast(id, DataType::Int32)), C::ai32("axis", 0)});  // [N, out..., C]
    v = bin(cv, "mul", v, cv.op("expand_dims", {C::a("x", w), C::aints32("axes", {gr - 1})}));
    y = y ? bin(cv, "add", y, v) : v;
  }
  std::vector<int64_t> perm{0, gr - 1};
  for (int k = 1; k < gr - 1; ++k) perm.push_back(k);
  return cv.cast(cv.op("transpose", {C::a("x", y), C::aints32("perm", perm)}), C::dtype(x));
}

// F.grid_sample (grid_sampler / grid_sampler_2d / _3d): MIL's resample samples as torch does (see the
// interpreter's kernel); torch's reflection without align_corners reflects about the image edges,
// which is resample's "symmetric"
void grid_sampler(C& cv, const json& n) {
  Var* x = cv.tensor(n, "input");
  Var* grid = cv.tensor(n, "grid");
  int64_t mode = cv.i(n, "interpolation_mode", 0), pad = cv.i(n, "padding_mode", 0);
  bool align = cv.bo(n, "align_corners", false);
  int r = cv.rank(n, x);
  if (r != 4 && r != 5) cv.fail(n, "input must be 4-D or 5-D, not rank " + std::to_string(r));
  if (mode == 2 && r == 5) cv.fail(n, "bicubic grid sampling of 5-D input is not supported (torch has none)");
  if (mode != 0 && mode != 1 && mode != 2) cv.fail(n, "interpolation_mode " + std::to_string(mode) + " is not supported");
  const char* pm = pad == 0 ? "constant" : pad == 1 ? "border" : pad == 2 ? (align ? "reflection" : "symmetric") : nullptr;
  if (!pm) cv.fail(n, "padding_mode " + std::to_string(pad) + " is not supported");
  if (!is_float(C::dtype(x))) x = cv.cast(x, DataType::Float32);
  if (mode == 2 || r == 5) {
    cv.out(n, grid_gather(cv, n, x, grid, mode, pad, align));
    return;
  }
  DataType dt = C::dtype(x);
  cv.out(n, cv.op("resample", {C::a("x", x), C::a("coordinates", cv.cast(grid, dt)), C::astr("sampling_mode", mode == 0 ? "bilinear" : "nearest"),
                               C::astr("padding_mode", pm), C::a("padding_value", Value::scalar_float(dt, 0.0)),
                               C::astr("coordinates_mode", "normalized_minus_one_to_one"), C::abool("align_corners", align)}));
}

// ---- distances -------------------------------------------------------------------------------

// the p-norm distances between the rows of x1 [..., P, M] and x2 [..., R, M]: [..., P, R]. p = 2
// with `use_mm`: torch's _euclidean_dist, |a|^2 + |b|^2 - 2 a.b clamped at 1e-30 before the sqrt;
// otherwise from the differences (p = 0 counts the nonzero ones)
Var* pair_dist(C& cv, const json& n, Var* x1, Var* x2, double p, bool use_mm) {
  if (p < 0) cv.fail(n, "p must be >= 0");
  if (!is_float(C::dtype(x1))) x1 = cv.cast(x1, DataType::Float32);
  DataType dt = C::dtype(x1);
  x2 = cv.cast(x2, dt);
  int r1 = cv.rank(n, x1), r2 = cv.rank(n, x2);
  if (r1 < 2 || r2 < 2) cv.fail(n, "inputs must have rank >= 2");
  if (p == 2 && use_mm) {
    Var* n1 = reduce_op(cv, "reduce_sum", bin(cv, "mul", x1, x1), {r1 - 1}, true);    // [..., P, 1]
    Var* n2 = reduce_op(cv, "reduce_sum", bin(cv, "mul", x2, x2), {r2 - 1}, false);   // [..., R]
    n2 = cv.op("expand_dims", {C::a("x", n2), C::aints32("axes", {r2 - 2})});          // [..., 1, R]
    Var* mm = matmul(cv, x1, x2, true);
    Var* d = bin(cv, "sub", bin(cv, "add", n1, n2), bin(cv, "mul", mm, cv.cs(2, dt)));
    d = bin(cv, "maximum", d, cv.cs(1e-30, dt));
    return cv.op("sqrt", {C::a("x", d)});
  }
  Var* a = cv.op("expand_dims", {C::a("x", x1), C::aints32("axes", {r1 - 1})});  // [..., P, 1, M]
  Var* b = cv.op("expand_dims", {C::a("x", x2), C::aints32("axes", {r2 - 2})});  // [..., 1, R, M]
  Var* d = cv.op("abs", {C::a("x", bin(cv, "sub", a, b))});
  int ax = std::max(r1, r2);  // the last axis of the difference
  if (p == 0) return reduce_op(cv, "reduce_sum", cv.cast(bin(cv, "not_equal", d, cv.cs(0, dt)), dt), {ax}, false);
  if (p == 1) return reduce_op(cv, "reduce_sum", d, {ax}, false);
  if (p == 2) return cv.op("sqrt", {C::a("x", reduce_op(cv, "reduce_sum", bin(cv, "mul", d, d), {ax}, false))});
  if (std::isinf(p)) return reduce_op(cv, "reduce_max", d, {ax}, false);
  Var* s = reduce_op(cv, "reduce_sum", bin(cv, "pow", d, cv.cs(p, dt)), {ax}, false);
  return bin(cv, "pow", s, cv.cs(1.0 / p, dt));
}

// torch.cdist / _cdist_forward: compute_mode None / 0 uses the matmul form for p = 2 when either
// side has more than 25 rows, 1 always, 2 never
void cdist(C& cv, const json& n) {
  Var* x1 = cv.tensor(n, "x1");
  Var* x2 = cv.tensor(n, "x2");
  double p = cv.f(n, "p", 2);
  int64_t mode = cv.opt_i(n, "compute_mode").value_or(0);
  bool mm = mode == 1;
  if (mode == 0) {
    Dim P = C::shape(x1)[static_cast<size_t>(cv.rank(n, x1) - 2)], R = C::shape(x2)[static_cast<size_t>(cv.rank(n, x2) - 2)];
    // symbolic counts: torch guarded the export on one side of 25 (their range tells which)
    mm = cv.ctx().range(P).hi > 25 || cv.ctx().range(R).hi > 25;
  }
  cv.out(n, pair_dist(cv, n, x1, x2, p, mm));
}

// F.pdist: the distances of the row pairs i < j of [N, M], row-major ([N (N - 1) / 2])
void pdist(C& cv, const json& n) {
  Var* x = cv.tensor(n, "self");
  if (cv.rank(n, x) != 2) cv.fail(n, "input must have rank 2");
  int64_t N = known_dim(cv, n, x, 0, "the number of rows");
  if (N < 2) cv.fail(n, "pdist of fewer than 2 rows (an empty result) is not supported");
  Var* d = pair_dist(cv, n, x, x, cv.f(n, "p", 2), false);
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = i + 1; j < N; ++j) idx.push_back(i * N + j);
  Var* flat = cv.op("reshape", {C::a("x", d), C::aints32("shape", {N * N})});
  cv.out(n, cv.op("gather", {C::a("x", flat), C::a("indices", cv.ci(idx)), C::ai32("axis", 0)}));
}

// ---- embedding_bag ---------------------------------------------------------------------------

// embedding_bag / _embedding_bag / _embedding_bag_forward_only with 1-D indices and offsets
// (F.embedding_bag flattens 2-D input, with offsets 0, L, 2L, ...). Bag b holds the entries
// offsets[b] <= k < offsets[b + 1] (the last: to the end, or offsets[B] with
// include_last_offset, which torch documents as the number of indices); entries equal to
// padding_idx are skipped. sum: a [B, N] weight matrix
// (per_sample_weights) times the gathered rows; mean: divided by the bag's count; max: the
// masked max. Empty bags give 0. Only the first output (the bags) is produced.
void embedding_bag(C& cv, const json& n) {
  static const char* const names[] = {"", "offset2bag", "bag_size", "max_indices"};
  for (size_t k = 1; k < 4; ++k)
    if (output_used(cv, n, k))
      cv.fail(n, std::string("output ") + std::to_string(k) + " (" + names[k] + ") is used; only the first output (the bags) is supported");
  Var* w = cv.tensor(n, "weight");
  Var* idx = cv.cast(cv.tensor(n, "indices"), DataType::Int32);
  Var* off = cv.cast(cv.tensor(n, "offsets"), DataType::Int32);
  int64_t mode = cv.i(n, "mode", 0);
  Var* psw = cv.opt_tensor(n, "per_sample_weights");
  bool last = cv.bo(n, "include_last_offset", false);
  if (cv.rank(n, idx) != 1 || cv.rank(n, off) != 1) cv.fail(n, "indices and offsets must be 1-D");
  if (mode < 0 || mode > 2) cv.fail(n, "mode " + std::to_string(mode) + " is not sum (0), mean (1) or max (2)");
  if (psw && mode != 0) cv.fail(n, "per_sample_weights need mode 'sum'");
  // the padding_idx overload wraps a negative index (F.embedding_bag passes it wrapped);
  // _embedding_bag takes -1 (or any negative) for none
  int64_t pad = cv.opt_i(n, "padding_idx").value_or(-1);
  if (pad < 0 && C::has(n, "padding_idx") && n.value("target", std::string()).find(".padding_idx") != std::string::npos)
    pad += known_dim(cv, n, w, 0, "the number of embeddings");
  if (!is_float(C::dtype(w))) w = cv.cast(w, DataType::Float32);
  DataType dt = C::dtype(w);
  Var* rows = cv.op("gather", {C::a("x", w), C::a("indices", idx), C::ai32("axis", 0)});  // [N, D]
  Var* N = cv.dim_var(C::shape(idx)[0]);
  Var* k = cv.op("range_1d", {C::a("end", N), C::a("start", Value::scalar_int(DataType::Int32, 0)),
                              C::a("step", Value::scalar_int(DataType::Int32, 1))});
  auto sl = [&](int64_t b, bool bm, int64_t e, bool em) {
    return cv.op("slice_by_index", {C::a("x", off), C::aints32("begin", {b}), C::aints32("end", {e}),
                                    C::a("begin_mask", Value::from_ints(DataType::Bool, {1}, {bm ? 1 : 0})),
                                    C::a("end_mask", Value::from_ints(DataType::Bool, {1}, {em ? 1 : 0}))});
  };
  Var* start = last ? sl(0, true, -1, false) : off;
  Var* end = sl(1, false, 0, true);
  if (!last) {
    Var* nn = cv.op("expand_dims", {C::a("x", N), C::aints32("axes", {0})});
    end = cv.op("concat", {Arg{"values", {ArgItem{end, nullptr}, ArgItem{nn, nullptr}}, true}, C::ai32("axis", 0)});
  }
  auto col = [&](Var* v) { return cv.op("expand_dims", {C::a("x", v), C::aints32("axes", {1})}); };
  Var* mask = cv.op("logical_and", {C::a("x", bin(cv, "greater_equal", k, col(start))), C::a("y", bin(cv, "less", k, col(end)))});  // [B, N]
  if (pad >= 0) mask = cv.op("logical_and", {C::a("x", mask), C::a("y", bin(cv, "not_equal", idx, cv.cs(static_cast<double>(pad), DataType::Int32)))});
  Var* m = cv.cast(mask, dt);
  Var* cnt = reduce_op(cv, "reduce_sum", m, {1}, true);  // [B, 1]
  Var* y;
  if (mode == 2) {
    Var* big = cv.op("select", {C::a("cond", cv.op("expand_dims", {C::a("x", mask), C::aints32("axes", {2})})),
                                C::a("a", cv.op("expand_dims", {C::a("x", rows), C::aints32("axes", {0})})),
                                C::a("b", cv.cs(-std::numeric_limits<double>::infinity(), dt))});
    y = reduce_op(cv, "reduce_max", big, {1}, false);
    y = cv.op("select", {C::a("cond", bin(cv, "greater", cnt, cv.cs(0, dt))), C::a("a", y), C::a("b", cv.cs(0, dt))});
  } else {
    if (psw) m = bin(cv, "mul", m, cv.cast(psw, dt));
    y = matmul(cv, m, rows);
    if (mode == 1) y = bin(cv, "real_div", y, bin(cv, "maximum", cnt, cv.cs(1, dt)));
  }
  cv.out(n, y);
}

// ---- im2col / col2im -------------------------------------------------------------------------

struct Im2Col {
  std::vector<int64_t> k, d, p, s;
};

Im2Col im2col_args(C& cv, const json& n) {
  Im2Col a;
  a.k = expand_list(cv, n, cv.ints(n, "kernel_size"), 2, "kernel_size");
  a.d = expand_list(cv, n, cv.ints(n, "dilation"), 2, "dilation");
  a.p = expand_list(cv, n, cv.ints(n, "padding"), 2, "padding");
  a.s = expand_list(cv, n, cv.ints(n, "stride"), 2, "stride");
  return a;
}

// F.unfold: [N, C, H, W] -> [N, C * kh * kw, L], channel c * kh * kw + i * kw + j holding tap
// (i, j) of every block: one strided slice of the zero-padded input per tap (exact)
void im2col(C& cv, const json& n) {
  Var* x = cv.tensor(n, "self");
  int r = cv.rank(n, x);
  if (r != 3 && r != 4) cv.fail(n, "input must be [N, C, H, W] or [C, H, W]");
  bool unb = r == 3;
  if (unb) x = cv.op("expand_dims", {C::a("x", x), C::aints32("axes", {0})});
  auto a = im2col_args(cv, n);
  std::vector<int64_t> o(2);
  for (size_t q = 0; q < 2; ++q) {
    int64_t in = known_dim(cv, n, x, 2 + static_cast<int64_t>(q), "the spatial sizes");
    o[q] = (in + 2 * a.p[q] - a.d[q] * (a.k[q] - 1) - 1) / a.s[q] + 1;
    if (o[q] <= 0) cv.fail(n, "the kernel does not fit the padded input");
  }
  x = pad_spatial(cv, x, 4, a.p, a.p, 0);
  Arg vals{"values", {}, true};
  for (int64_t i = 0; i < a.k[0]; ++i)
    for (int64_t j = 0; j < a.k[1]; ++j)
      vals.items.push_back(ArgItem{strided(cv, x, 4, {2, 3}, {i * a.d[0], j * a.d[1]}, o, a.s), nullptr});
  Var* y = vals.items.size() == 1 ? cv.op("expand_dims", {C::a("x", vals.items[0].var), C::aints32("axes", {2})})
                                  : cv.op("stack", {vals, C::ai32("axis", 2)});  // [N, C, K, oh, ow]
  y = cv.op("reshape", {C::a("x", y), C::a("shape", cv.shape_of_pieces(x, {{true, 0}, {false, -1}, {false, o[0] * o[1]}}))});
  if (unb) y = cv.op("squeeze", {C::a("x", y), C::aints32("axes", {0})});
  cv.out(n, y);
}

// F.fold: [N, C * kh * kw, L] -> [N, C, H, W], overlapping blocks summed: a grouped
// conv_transpose with one-hot kernels puts tap (i, j) of each block in place; then the padding is
// cropped (and rows / columns no block reaches are zeros)
void col2im(C& cv, const json& n) {
  Var* x = cv.tensor(n, "self");
  int r = cv.rank(n, x);
  if (r != 2 && r != 3) cv.fail(n, "input must be [N, C * kh * kw, L] or [C * kh * kw, L]");
  bool unb = r == 2;
  if (unb) x = cv.op("expand_dims", {C::a("x", x), C::aints32("axes", {0})});
  auto a = im2col_args(cv, n);
  auto out = expand_list(cv, n, cv.ints(n, "output_size"), 2, "output_size");
  int64_t K = a.k[0] * a.k[1];
  int64_t CK = known_dim(cv, n, x, 1, "the channel count");
  if (CK % K) cv.fail(n, "the channel count " + std::to_string(CK) + " is not a multiple of the kernel size " + std::to_string(K));
  int64_t Cn = CK / K;
  std::vector<int64_t> o(2);
  for (size_t q = 0; q < 2; ++q) {
    o[q] = (out[q] + 2 * a.p[q] - a.d[q] * (a.k[q] - 1) - 1) / a.s[q] + 1;
    if (o[q] <= 0) cv.fail(n, "the kernel does not fit the padded output");
  }
  Dim L = C::shape(x)[2];
  if (L->is_const() && L->value() != o[0] * o[1])
    cv.fail(n, "the input has " + std::to_string(L->value()) + " blocks; the output size needs " + std::to_string(o[0] * o[1]));
  DataType odt = C::dtype(x);
  if (!is_float(odt)) x = cv.cast(x, DataType::Float32);
  DataType dt = C::dtype(x);
  x = cv.op("reshape", {C::a("x", x), C::a("shape", cv.shape_of_pieces(x, {{true, 0}, {false, CK}, {false, o[0]}, {false, o[1]}}))});
  std::vector<double> wv(static_cast<size_t>(CK * K), 0.0);
  for (int64_t c = 0; c < CK; ++c) wv[static_cast<size_t>(c * K + c % K)] = 1.0;
  Var* w = cv.c(Value::from_doubles(dt, {CK, 1, a.k[0], a.k[1]}, wv));
  Var* y = cv.op("conv_transpose", {C::a("x", x), C::a("weight", w), C::astr("pad_type", "valid"), C::aints32("strides", a.s),
                                    C::aints32("dilations", a.d), C::ai32("groups", Cn)});
  // full size (o - 1) * s + d * (k - 1) + 1; the output is rows p .. p + H of it
  std::vector<int64_t> lo(2, 0), hi(2, 0), begin(2), cnt(2), one(2, 1);
  for (size_t q = 0; q < 2; ++q) {
    int64_t full = (o[q] - 1) * a.s[q] + a.d[q] * (a.k[q] - 1) + 1;
    hi[q] = std::max<int64_t>(0, a.p[q] + out[q] - full);
    begin[q] = a.p[q];
    cnt[q] = out[q];
  }
  y = pad_spatial(cv, y, 4, lo, hi, 0);
  y = strided(cv, y, 4, {2, 3}, begin, cnt, one);
  if (unb) y = cv.op("squeeze", {C::a("x", y), C::aints32("axes", {0})});
  cv.out(n, cv.cast(y, odt));
}

// ---- cosine_similarity, bilinear, _trilinear ---------------------------------------------------

// torch's cosine_similarity: both broadcast, each divided by its norm along `dim` (clamped at
// eps), the products summed along `dim`
void cosine_similarity(C& cv, const json& n) {
  Var* x1 = cv.tensor(n, "x1");
  Var* x2 = cv.tensor(n, "x2");
  DataType dt = C::promote(x1, x2);
  if (!is_float(dt)) dt = DataType::Float32;
  x1 = cv.cast(x1, dt);
  x2 = cv.cast(x2, dt);
  // broadcast each to the common shape (a norm over a broadcast axis counts the repeats)
  Var* b1 = bin(cv, "mul", x1, cv.op("fill_like", {C::a("ref_tensor", x2), C::a("value", Value::scalar_float(dt, 1))}));
  Var* b2 = bin(cv, "mul", x2, cv.op("fill_like", {C::a("ref_tensor", x1), C::a("value", Value::scalar_float(dt, 1))}));
  int r = cv.rank(n, b1);
  int64_t d = cv.axis(n, cv.i(n, "dim", 1), r);
  Var* eps = cv.cs(cv.f(n, "eps", 1e-8), dt);
  Var* n1 = bin(cv, "maximum", reduce_op(cv, "reduce_l2_norm", b1, {d}, true), eps);
  Var* n2 = bin(cv, "maximum", reduce_op(cv, "reduce_l2_norm", b2, {d}, true), eps);
  Var* pr = bin(cv, "mul", bin(cv, "real_div", b1, n1), bin(cv, "real_div", b2, n2));
  cv.out(n, reduce_op(cv, "reduce_sum", pr, {d}, false));
}

// F.bilinear: y[..., o] = sum_ij x1[..., i] W[o, i, j] x2[..., j] + b[o], as
// (x1 @ W') reshaped [..., O, J] times x2 [..., 1, J] summed over J (W' = W as [I, O * J])
Var* bilinear_form(C& cv, const json& n, Var* x1, Var* x2, Var* w) {
  DataType dt = C::dtype(x1);
  x2 = cv.cast(x2, dt);
  w = cv.cast(w, dt);
  if (cv.rank(n, w) != 3) cv.fail(n, "weight must be [out, in1, in2]");
  int64_t O = known_dim(cv, n, w, 0, "the output features"), I = known_dim(cv, n, w, 1, "in1"), J = known_dim(cv, n, w, 2, "in2");
  int r = cv.rank(n, x1);
  Var* wt = cv.op("reshape", {C::a("x", cv.op("transpose", {C::a("x", w), C::aints32("perm", {1, 0, 2})})), C::aints32("shape", {I, O * J})});
  Var* t = matmul(cv, x1, wt);  // [..., O * J]
  std::vector<std::pair<bool, int64_t>> pieces;
  for (int k = 0; k + 1 < r; ++k) pieces.push_back({true, k});
  pieces.push_back({false, O});
  pieces.push_back({false, J});
  t = cv.op("reshape", {C::a("x", t), C::a("shape", cv.shape_of_pieces(x1, pieces))});
  Var* e = cv.op("expand_dims", {C::a("x", x2), C::aints32("axes", {cv.rank(n, x2) - 1})});
  return reduce_op(cv, "reduce_sum", bin(cv, "mul", t, e), {r}, false);
}

void bilinear(C& cv, const json& n) {
  Var* x1 = cv.tensor(n, "input1");
  Var* bias = cv.opt_tensor(n, "bias");
  if (!is_float(C::dtype(x1))) x1 = cv.cast(x1, DataType::Float32);
  Var* y = bilinear_form(cv, n, x1, cv.tensor(n, "input2"), cv.tensor(n, "weight"));
  if (bias) y = bin(cv, "add", y, cv.cast(bias, C::dtype(x1)));
  cv.out(n, y);
}

// _trilinear: i1, i2, i3 each unsqueezed at their expand dims (in order), multiplied
// (broadcasting) and summed over sumdim. F.bilinear's decomposition (x1 [B, I], W [O, I, J],
// x2 [B, J], expands [1, 3], [0], [1, 2], sum [2, 3]) goes through a matmul instead of the
// [B, O, I, J] product
void trilinear(C& cv, const json& n) {
  std::vector<Var*> in{cv.tensor(n, "i1"), cv.tensor(n, "i2"), cv.tensor(n, "i3")};
  const char* ex[] = {"expand1", "expand2", "expand3"};
  DataType dt = C::dtype(in[0]);
  if (!is_float(dt)) dt = DataType::Float32;
  if (cv.ints(n, "expand1", {}) == std::vector<int64_t>{1, 3} && cv.ints(n, "expand2", {}) == std::vector<int64_t>{0} &&
      cv.ints(n, "expand3", {}) == std::vector<int64_t>{1, 2} && cv.ints(n, "sumdim", {}) == std::vector<int64_t>{2, 3} &&
      cv.rank(n, in[0]) == 2 && cv.rank(n, in[1]) == 3 && cv.rank(n, in[2]) == 2) {
    cv.out(n, bilinear_form(cv, n, cv.cast(in[0], dt), in[2], in[1]));
    return;
  }
  Var* prod = nullptr;
  for (size_t q = 0; q < 3; ++q) {
    Var* v = cv.cast(in[q], dt);
    for (int64_t a : cv.ints(n, ex[q], {})) {
      int rr = cv.rank(n, v) + 1;
      v = cv.op("expand_dims", {C::a("x", v), C::aints32("axes", {cv.axis(n, a, rr)})});
    }
    prod = prod ? bin(cv, "mul", prod, v) : v;
  }
  auto sd = cv.ints(n, "sumdim", {});
  int r = cv.rank(n, prod);
  for (auto& a : sd) a = cv.axis(n, a, r);
  cv.out(n, sd.empty() ? prod : reduce_op(cv, "reduce_sum", prod, sd, false));
}

// ---- max pooling by taps, max_unpool2d ---------------------------------------------------------

// max pooling from its definition, for what MIL's max_pool cannot do (dilation, the indices
// output): the max over the kernel's taps, each a strided slice of the input padded with -inf.
// Indices are torch's flat positions in the input plane (h * W + w) of the first maximum (a NaN
// wins, as in torch's `val > max || isnan(val)`); a window of -inf gives its first in-bounds tap.
// x is batched [N, C, spatial...] with known spatial sizes.
std::pair<Var*, Var*> max_pool_taps(C& cv, const json& n, Var* x, size_t sp, const PoolArgs& p, const std::vector<int64_t>& dil,
                                    bool want_idx) {
  int r = cv.rank(n, x);
  std::vector<int64_t> in(sp), o(sp), axes(sp), lo(sp), hi(sp);
  for (size_t q = 0; q < sp; ++q) {
    axes[q] = r - static_cast<int64_t>(sp) + static_cast<int64_t>(q);
    in[q] = known_dim(cv, n, x, axes[q], "the spatial sizes");
    int64_t k = p.kernel[q], s = p.stride[q], pd = p.pad[2 * q], d = dil[q];
    int64_t span = in[q] + 2 * pd - d * (k - 1) - 1;
    o[q] = (p.ceil ? (span + s - 1) / s : span / s) + 1;
    if (p.ceil && (o[q] - 1) * s >= in[q] + pd) --o[q];  // the last window must start inside
    if (o[q] <= 0) cv.fail(n, "the kernel does not fit the padded input");
    lo[q] = pd;
    hi[q] = std::max<int64_t>(pd, (o[q] - 1) * s + d * (k - 1) + 1 - in[q] - pd);
  }
  DataType dt = C::dtype(x);
  double lowest = is_float(dt) ? -std::numeric_limits<double>::infinity() : static_cast<double>(std::numeric_limits<int32_t>::min());
  Var* xp = pad_spatial(cv, x, r, lo, hi, lowest);
  int64_t taps = 1, L = 1;
  for (size_t q = 0; q < sp; ++q) taps *= p.kernel[q], L *= o[q];
  // the input position each output reads at tap t (a padded position: the window's first
  // in-bounds one, which is where torch's index starts)
  auto tap_of = [&](int64_t t) {
    std::vector<int64_t> tq(sp);
    for (int64_t rem = t, q = static_cast<int64_t>(sp) - 1; q >= 0; --q) {
      tq[static_cast<size_t>(q)] = rem % p.kernel[static_cast<size_t>(q)];
      rem /= p.kernel[static_cast<size_t>(q)];
    }
    return tq;
  };
  std::vector<int64_t> first(static_cast<size_t>(L), -1);
  std::vector<std::vector<int64_t>> pos_of(static_cast<size_t>(taps), std::vector<int64_t>(static_cast<size_t>(L), -1));
  if (want_idx)
    for (int64_t t = 0; t < taps; ++t) {
      auto tq = tap_of(t);
      for (int64_t pos = 0; pos < L; ++pos) {
        int64_t flat = 0, mul = 1;
        bool ok = true;
        for (int64_t rem = pos, q = static_cast<int64_t>(sp) - 1; q >= 0; --q) {
          size_t u = static_cast<size_t>(q);
          int64_t c = (rem % o[u]) * p.stride[u] - p.pad[2 * u] + tq[u] * dil[u];
          rem /= o[u];
          ok = ok && c >= 0 && c < in[u];
          flat += c * mul;
          mul *= in[u];
        }
        if (!ok) continue;
        pos_of[static_cast<size_t>(t)][static_cast<size_t>(pos)] = flat;
        if (first[static_cast<size_t>(pos)] < 0) first[static_cast<size_t>(pos)] = flat;
      }
    }
  Var* cur = nullptr;
  Var* idx = nullptr;
  for (int64_t t = 0; t < taps; ++t) {
    auto tq = tap_of(t);
    std::vector<int64_t> begin(sp);
    for (size_t q = 0; q < sp; ++q) begin[q] = tq[q] * dil[q];
    Var* v = strided(cv, xp, r, axes, begin, o, p.stride);
    if (!want_idx) {
      cur = cur ? bin(cv, "maximum", cur, v) : v;
      continue;
    }
    std::vector<int64_t> row = pos_of[static_cast<size_t>(t)];
    for (int64_t k = 0; k < L; ++k)
      if (row[static_cast<size_t>(k)] < 0) row[static_cast<size_t>(k)] = first[static_cast<size_t>(k)];
    Var* rv = cv.c(Value::from_ints(DataType::Int32, o, row));
    if (!cur) {
      cur = v;
      idx = bin(cv, "add", cv.op("fill_like", {C::a("ref_tensor", v), C::a("value", Value::scalar_int(DataType::Int32, 0))}), rv);
      continue;
    }
    Var* upd = cv.op("logical_or", {C::a("x", bin(cv, "greater", v, cur)), C::a("y", bin(cv, "not_equal", v, v))});
    cur = cv.op("select", {C::a("cond", upd), C::a("a", v), C::a("b", cur)});
    idx = cv.op("select", {C::a("cond", upd), C::a("a", rv), C::a("b", idx)});
  }
  return {cur, idx};
}

// F.max_unpool2d / 3d: zeros [N, C, out...] with each input value written at its index (a flat
// position in its plane); stride and padding (max_unpool3d's) only shaped the indices
void max_unpool(C& cv, const json& n, size_t sp) {
  Var* x = cv.tensor(n, "self");
  Var* idx = cv.cast(cv.tensor(n, "indices"), DataType::Int32);
  auto size = expand_list(cv, n, cv.ints(n, "output_size"), sp, "output_size");
  int r = cv.rank(n, x);
  if (r != static_cast<int>(sp) + 1 && r != static_cast<int>(sp) + 2) cv.fail(n, "input must be [N, C, spatial...] or [C, spatial...]");
  bool unb = r == static_cast<int>(sp) + 1;
  if (unb) {
    x = cv.op("expand_dims", {C::a("x", x), C::aints32("axes", {0})});
    idx = cv.op("expand_dims", {C::a("x", idx), C::aints32("axes", {0})});
  }
  int64_t plane = 1;
  std::vector<std::pair<bool, int64_t>> out_shape{{true, 0}, {true, 1}};
  for (auto v : size) {
    plane *= v;
    out_shape.push_back({false, v});
  }
  Var* flat = cv.op("reshape", {C::a("x", x), C::a("shape", cv.shape_of_pieces(x, {{true, 0}, {true, 1}, {false, -1}}))});
  Var* fi = cv.op("reshape", {C::a("x", idx), C::a("shape", cv.shape_of_pieces(x, {{true, 0}, {true, 1}, {false, -1}}))});
  Var* zeros = cv.op("fill", {C::a("shape", cv.shape_of_pieces(x, {{true, 0}, {true, 1}, {false, plane}})),
                              C::a("value", C::dtype(x) == DataType::Int32 ? Value::scalar_int(DataType::Int32, 0) : Value::scalar_float(C::dtype(x), 0))});
  Var* y = cv.op("scatter_along_axis", {C::a("data", zeros), C::a("indices", fi), C::a("updates", flat), C::ai32("axis", 2), C::astr("mode", "update")});
  y = cv.op("reshape", {C::a("x", y), C::a("shape", cv.shape_of_pieces(x, out_shape))});
  if (unb) y = cv.op("squeeze", {C::a("x", y), C::aints32("axes", {0})});
  cv.out(n, y);
}

}  // namespace

void register_nn(OpTable& t) {
  t["aten.linear"] = [](C& cv, const json& n) {
    Var* x = input(cv, n);
    Var* w = cv.tensor(n, "weight");
    Var* b = cv.opt_tensor(n, "bias");
    DataType dt = C::dtype(x);
    if (is_const(w) && (!b || is_const(b)) && cv.rank(n, w) == 2) {
      std::vector<Arg> args{C::a("x", x), C::a("weight", cv.cast(w, dt))};
      if (b) args.push_back(C::a("bias", cv.cast(b, dt)));
      cv.out(n, cv.op("linear", std::move(args)));
      return;
    }
    Var* y = matmul(cv, x, cv.cast(w, dt), true);
    if (b) y = bin(cv, "add", y, cv.cast(b, dt));
    cv.out(n, y);
  };
  t["aten.addmm"] = [](C& cv, const json& n) {
    Var* bias = cv.tensor(n, "self");
    Var* m1 = cv.tensor(n, "mat1");
    Var* m2 = cv.tensor(n, "mat2");
    double beta = cv.f(n, "beta", 1), alpha = cv.f(n, "alpha", 1);
    DataType dt = C::dtype(m1);
    Var* y = matmul(cv, m1, cv.cast(m2, dt));
    if (alpha != 1) y = bin(cv, "mul", y, cv.cs(alpha, dt));
    if (beta != 0) {
      Var* bb = cv.cast(bias, dt);
      if (beta != 1) bb = bin(cv, "mul", bb, cv.cs(beta, dt));
      y = bin(cv, "add", y, bb);
    }
    cv.out(n, y);
  };
  t["aten.mm"] = [](C& cv, const json& n) {
    Var* x = cv.tensor(n, "self");
    cv.out(n, matmul(cv, x, cv.cast(cv.tensor(n, "mat2"), C::dtype(x))));
  };
  t["aten.bmm"] = t["aten.mm"];
  t["aten.matmul"] = [](C& cv, const json& n) {
    Var* x = cv.tensor(n, "self");
    cv.out(n, matmul(cv, x, cv.cast(cv.tensor(n, "other"), C::dtype(x))));
  };
  t["aten.baddbmm"] = [](C& cv, const json& n) {
    Var* bias = cv.tensor(n, "self");
    Var* b1 = cv.tensor(n, "batch1");
    DataType dt = C::dtype(b1);
    Var* y = matmul(cv, b1, cv.cast(cv.tensor(n, "batch2"), dt));
    double beta = cv.f(n, "beta", 1), alpha = cv.f(n, "alpha", 1);
    if (alpha != 1) y = bin(cv, "mul", y, cv.cs(alpha, dt));
    if (beta != 0) {
      Var* bb = cv.cast(bias, dt);
      if (beta != 1) bb = bin(cv, "mul", bb, cv.cs(beta, dt));
      y = bin(cv, "add", y, bb);
    }
    cv.out(n, y);
  };
  t["aten.dot"] = [](C& cv, const json& n) {
    Var* x = cv.tensor(n, "self");
    Var* y = cv.cast(cv.tensor(n, "tensor"), C::dtype(x));
    cv.out(n, cv.op("reduce_sum", {C::a("x", bin(cv, "mul", x, y)), C::aints32("axes", {0}), C::abool("keep_dims", false)}));
  };

  for (const char* name : {"aten.conv1d", "aten.conv2d", "aten.conv3d"})
    t[name] = [](C& cv, const json& n) { conv_fn(cv, n, false); };
  for (const char* name : {"aten.conv_transpose1d", "aten.conv_transpose2d", "aten.conv_transpose3d"})
    t[name] = [](C& cv, const json& n) { conv_fn(cv, n, true); };
  t["aten.convolution"] = [](C& cv, const json& n) { conv_fn(cv, n, cv.bo(n, "transposed", false)); };
  t["aten._convolution"] = t["aten.convolution"];

  t["aten.batch_norm"] = [](C& cv, const json& n) {
    if (cv.bo(n, "training", false)) cv.fail(n, "batch_norm in training mode is not supported (export the model in eval mode)");
    Var* x = input(cv, n);
    cv.out(n, batch_norm(cv, n, x, cv.opt_tensor(n, "weight"), cv.opt_tensor(n, "bias"), cv.opt_tensor(n, "running_mean"),
                         cv.opt_tensor(n, "running_var"), cv.f(n, "eps", 1e-5)));
  };
  t["aten._native_batch_norm_legit_no_training"] = [](C& cv, const json& n) {
    Var* x = input(cv, n);
    cv.out(n, batch_norm(cv, n, x, cv.opt_tensor(n, "weight"), cv.opt_tensor(n, "bias"), cv.opt_tensor(n, "running_mean"),
                         cv.opt_tensor(n, "running_var"), cv.f(n, "eps", 1e-5)));
  };
  t["aten._native_batch_norm_legit_functional"] = [](C& cv, const json& n) {
    if (cv.bo(n, "training", false)) cv.fail(n, "batch_norm in training mode is not supported (export the model in eval mode)");
    Var* x = input(cv, n);
    cv.out(n, batch_norm(cv, n, x, cv.opt_tensor(n, "weight"), cv.opt_tensor(n, "bias"), cv.opt_tensor(n, "running_mean"),
                         cv.opt_tensor(n, "running_var"), cv.f(n, "eps", 1e-5)));
  };
  t["aten.native_batch_norm"] = t["aten._native_batch_norm_legit_functional"];
  t["aten._native_batch_norm_legit"] = t["aten._native_batch_norm_legit_functional"];
  // no running statistics: normalized by the batch's own (instance_norm decomposes to this)
  t["aten._native_batch_norm_legit.no_stats"] = [](C& cv, const json& n) {
    Var* x = input(cv, n);
    int r = cv.rank(n, x);
    DataType dt = C::dtype(x);
    std::vector<int64_t> axes{0};
    for (int k = 2; k < r; ++k) axes.push_back(k);
    double eps = cv.f(n, "eps", 1e-5);
    Var* mean = cv.op("reduce_mean", {C::a("x", x), C::aints32("axes", axes), C::abool("keep_dims", true)});
    Var* d = bin(cv, "sub", x, mean);
    Var* var = cv.op("reduce_mean", {C::a("x", bin(cv, "mul", d, d)), C::aints32("axes", axes), C::abool("keep_dims", true)});
    Var* y = bin(cv, "mul", d, cv.op("rsqrt", {C::a("x", bin(cv, "add", var, cv.cs(eps, dt)))}));
    if (Var* w = cv.opt_tensor(n, "weight")) y = bin(cv, "mul", y, per_channel(cv, cv.cast(w, dt), std::max(r, 2)));
    if (Var* b = cv.opt_tensor(n, "bias")) y = bin(cv, "add", y, per_channel(cv, cv.cast(b, dt), std::max(r, 2)));
    cv.out(n, y);
  };
  t["aten.instance_norm"] = [](C& cv, const json& n) {
    Var* x = input(cv, n);
    int r = cv.rank(n, x);
    DataType dt = C::dtype(x);
    std::vector<int64_t> axes;
    for (int k = 2; k < r; ++k) axes.push_back(k);
    double eps = cv.f(n, "eps", 1e-5);
    Var* mean = cv.op("reduce_mean", {C::a("x", x), C::aints32("axes", axes), C::abool("keep_dims", true)});
    Var* d = bin(cv, "sub", x, mean);
    Var* var = cv.op("reduce_mean", {C::a("x", bin(cv, "mul", d, d)), C::aints32("axes", axes), C::abool("keep_dims", true)});
    Var* y = bin(cv, "mul", d, cv.op("rsqrt", {C::a("x", bin(cv, "add", var, cv.cs(eps, dt)))}));
    if (Var* w = cv.opt_tensor(n, "weight")) y = bin(cv, "mul", y, per_channel(cv, cv.cast(w, dt), r));
    if (Var* b = cv.opt_tensor(n, "bias")) y = bin(cv, "add", y, per_channel(cv, cv.cast(b, dt), r));
    cv.out(n, y);
  };
  t["aten.layer_norm"] = [](C& cv, const json& n) {
    Var* x = input(cv, n);
    cv.out(n, layer_norm(cv, n, x, cv.ints(n, "normalized_shape"), cv.opt_tensor(n, "weight"), cv.opt_tensor(n, "bias"),
                         cv.f(n, "eps", 1e-5)));
  };
  t["aten.native_layer_norm"] = t["aten.layer_norm"];
  t["aten.group_norm"] = [](C& cv, const json& n) {
    Var* x = input(cv, n);
    cv.out(n, group_norm(cv, n, x, cv.i(n, "num_groups", 1), cv.opt_tensor(n, "weight"), cv.opt_tensor(n, "bias"),
                         cv.f(n, "eps", 1e-5)));
  };
  t["aten.native_group_norm"] = [](C& cv, const json& n) {
    Var* x = input(cv, n);
    cv.out(n, group_norm(cv, n, x, cv.i(n, "group", 1), cv.opt_tensor(n, "weight"), cv.opt_tensor(n, "bias"),
                         cv.f(n, "eps", 1e-5)));
  };
  t["aten.rms_norm"] = [](C& cv, const json& n) {
    Var* x = input(cv, n);
    DataType dt = C::dtype(x);
    int r = cv.rank(n, x);
    auto ns = cv.ints(n, "normalized_shape");
    std::vector<int64_t> axes;
    for (size_t k = 0; k < ns.size(); ++k) axes.push_back(r - static_cast<int64_t>(ns.size()) + static_cast<int64_t>(k));
    double eps = C::has(n, "eps") ? cv.f(n, "eps", 0)
                                  : (dt == DataType::Float16 ? 0.0009765625 : static_cast<double>(std::numeric_limits<float>::epsilon()));
    Var* ms = cv.op("reduce_mean", {C::a("x", bin(cv, "mul", x, x)), C::aints32("axes", axes), C::abool("keep_dims", true)});
    Var* y = bin(cv, "mul", x, cv.op("rsqrt", {C::a("x", bin(cv, "add", ms, cv.cs(eps, dt)))}));
    if (Var* w = cv.opt_tensor(n, "weight")) y = bin(cv, "mul", y, cv.cast(w, dt));
    cv.out(n, y);
  };
  t["aten._fused_rms_norm"] = t["aten.rms_norm"];

  t["aten.max_pool1d"] = [](C& cv, const json& n) { max_pool(cv, n, 1); };
  t["aten.max_pool2d"] = [](C& cv, const json& n) { max_pool(cv, n, 2); };
  t["aten.max_pool3d"] = [](C& cv, const json& n) { max_pool(cv, n, 3); };
  t["aten.max_pool1d_with_indices"] = t["aten.max_pool1d"];
  t["aten.max_pool2d_with_indices"] = t["aten.max_pool2d"];
  t["aten.max_pool3d_with_indices"] = t["aten.max_pool3d"];
  t["aten.avg_pool1d"] = [](C& cv, const json& n) { avg_pool(cv, n, 1); };
  t["aten.avg_pool2d"] = [](C& cv, const json& n) { avg_pool(cv, n, 2); };
  t["aten.avg_pool3d"] = [](C& cv, const json& n) { avg_pool(cv, n, 3); };
  t["aten.adaptive_avg_pool1d"] = [](C& cv, const json& n) { adaptive_pool(cv, n, 1, false); };
  t["aten.adaptive_avg_pool2d"] = [](C& cv, const json& n) { adaptive_pool(cv, n, 2, false); };
  t["aten._adaptive_avg_pool2d"] = t["aten.adaptive_avg_pool2d"];
  t["aten.adaptive_avg_pool3d"] = [](C& cv, const json& n) { adaptive_pool(cv, n, 3, false); };
  t["aten.adaptive_max_pool1d"] = [](C& cv, const json& n) { adaptive_pool(cv, n, 1, true); };
  t["aten.adaptive_max_pool2d"] = [](C& cv, const json& n) { adaptive_pool(cv, n, 2, true); };

  t["aten.softmax"] = [](C& cv, const json& n) { cv.out(n, softmax(cv, n, false)); };
  t["aten._softmax"] = t["aten.softmax"];
  t["aten._safe_softmax"] = [](C& cv, const json& n) {
    Var* x = input(cv, n);
    if (auto dt = cv.dtype_arg(n, "dtype")) x = cv.cast(x, *dt);
    if (auto od = cv.out_dtype(n); od && is_float(*od)) x = cv.cast(x, *od);
    if (!is_float(C::dtype(x))) x = cv.cast(x, DataType::Float32);
    cv.out(n, safe_softmax(cv, x, cv.axis(n, cv.i(n, "dim", -1), cv.rank(n, x))));
  };
  t["aten.log_softmax"] = [](C& cv, const json& n) { cv.out(n, softmax(cv, n, true)); };
  t["aten._log_softmax"] = t["aten.log_softmax"];

  t["aten.dropout"] = [](C& cv, const json& n) {
    if (cv.bo(n, "train", false) && cv.f(n, "p", 0) > 0) cv.fail(n, "dropout in training mode is not supported (export the model in eval mode)");
    cv.out(n, cv.op("identity", {C::a("x", input(cv, n))}));
  };
  t["aten.native_dropout"] = t["aten.dropout"];
  t["aten.feature_dropout"] = t["aten.dropout"];
  t["aten.alpha_dropout"] = t["aten.dropout"];

  t["aten.scaled_dot_product_attention"] = [](C& cv, const json& n) {
    if (cv.f(n, "dropout_p", 0) > 0) cv.fail(n, "attention dropout is not supported (export the model in eval mode)");
    cv.out(n, sdpa(cv, n));
  };
  t["aten._scaled_dot_product_flash_attention_for_cpu"] = [](C& cv, const json& n) {
    if (cv.f(n, "dropout_p", 0) > 0) cv.fail(n, "attention dropout is not supported");
    cv.out(n, sdpa(cv, n));
  };
  t["aten.embedding"] = [](C& cv, const json& n) {
    Var* w = cv.tensor(n, "weight");
    Var* idx = cv.cast(cv.tensor(n, "indices"), DataType::Int32);
    cv.out(n, cv.op("gather", {C::a("x", w), C::a("indices", idx), C::ai32("axis", 0)}));
  };
  t["aten.pixel_shuffle"] = [](C& cv, const json& n) {
    cv.out(n, cv.op("pixel_shuffle", {C::a("x", cv.tensor(n, "self")), C::ai32("upscale_factor", cv.i(n, "upscale_factor", 1))}));
  };
  t["aten.pixel_unshuffle"] = [](C& cv, const json& n) {
    cv.out(n, cv.op("pixel_unshuffle", {C::a("x", cv.tensor(n, "self")),
                                        C::a("downscale_factor", Value::scalar_int(DataType::UInt32, cv.i(n, "downscale_factor", 1)))}));
  };
  t["aten._adaptive_avg_pool3d"] = t["aten.adaptive_avg_pool3d"];
  t["aten.grid_sampler"] = grid_sampler;
  t["aten.grid_sampler_2d"] = grid_sampler;
  t["aten.grid_sampler_3d"] = grid_sampler;
  t["aten.cdist"] = cdist;
  t["aten._cdist_forward"] = cdist;
  t["aten.pdist"] = pdist;
  t["aten._pdist_forward"] = pdist;
  t["aten.embedding_bag"] = embedding_bag;
  t["aten._embedding_bag"] = embedding_bag;
  t["aten._embedding_bag_forward_only"] = embedding_bag;
  t["aten.im2col"] = im2col;
  t["aten.col2im"] = col2im;
  t["aten.cosine_similarity"] = cosine_similarity;
  t["aten.bilinear"] = bilinear;
  t["aten._trilinear"] = trilinear;
  t["aten.max_unpool2d"] = [](C& cv, const json& n) { max_unpool(cv, n, 2); };
  t["aten.max_unpool3d"] = [](C& cv, const json& n) { max_unpool(cv, n, 3); };
}

}  // namespace torch_detail
}  // namespace milkit
