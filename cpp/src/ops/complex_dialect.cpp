// The complex dialect (coremltools' mil/ops/defs/complex_dialect_ops.py, namespace "complex"):
// ops over complex64 data that Core ML lacks. Frontends use them (torch.fft.*, torch.stft,
// view_as_real, ...); common::lower_complex_dialect_ops rewrites them into core ops on separate
// real and imaginary fp32 tensors before a program is written or run.
//
//   complex(real_data: fp32, imag_data: fp32) -> complex64      (shapes must be equal)
//   complex_real / complex_imag(data: complex64) -> fp32
//   complex_fft / complex_ifft / complex_rfft / complex_irfft
//       (data, n?, dim = -1, norm = "backward")
//   complex_fftn / complex_ifftn / complex_rfftn / complex_irfftn
//       (data, shapes?, dims?, norm = "backward")
//   complex_shape(x: complex64) -> int32[rank]                  (value: the shape)
//   complex_abs(x: complex64) -> fp32
//   complex_stft(input, n_fft, hop_length?, win_length?, window?, normalized = false,
//                onesided = true)
//
// Inputs, defaults, dtypes and output shapes follow coremltools' type inference, including its
// choices: only fft / fftn check `norm`; rfft / rfftn take fp32 only, ifft* / irfft* complex64
// only. Dialect ops exist at every opset (coremltools registers them outside the opset versions).
#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"
#include "milkit/ops/fft_util.h"
#include "milkit/types/error.h"

namespace milkit {

size_t fft_axis_index(int64_t dim, size_t rank) {
  const auto r = static_cast<int64_t>(rank);
  if (dim < -r || dim >= r) throw ValueError("Invalid dim " + std::to_string(dim) + " in `dims`.");
  return static_cast<size_t>(dim < 0 ? dim + r : dim);
}

FftAxes fft_canonicalize(Context& ctx, const std::vector<Dim>& shape,
                         const std::optional<std::vector<int64_t>>& sizes,
                         const std::optional<std::vector<int64_t>>& dims, bool c2r) {
  const size_t rank = shape.size();
  if (dims)
    for (int64_t d : *dims) fft_axis_index(d, rank);
  if (sizes)
    for (int64_t s : *sizes)
      if (s <= 0) throw ValueError("Invalid shape " + std::to_string(s) + " in `shapes`.");
  FftAxes r;
  if (sizes) {
    if (!dims) {
      const auto n = static_cast<int64_t>(sizes->size());
      for (int64_t d = static_cast<int64_t>(rank) - n; d < static_cast<int64_t>(rank); ++d)
        r.dims.push_back(d);
    } else {
      if (sizes->size() != dims->size())
        throw ValueError("shapes and dims must have the same number of elements.");
      r.dims = *dims;
    }
    for (int64_t s : *sizes) r.sizes.push_back(ctx.constant(s));
    for (int64_t d : r.dims) fft_axis_index(d, rank);  // the defaulted axes must exist too
  } else {
    if (dims) {
      r.dims = *dims;
    } else {
      for (size_t d = 0; d < rank; ++d) r.dims.push_back(static_cast<int64_t>(d));
    }
    for (int64_t d : r.dims) r.sizes.push_back(shape[fft_axis_index(d, rank)]);
    // irfft / irfftn: the input is the one-sided half of a Hermitian signal (rfft's output), so
    // the last axis is restored to 2 * (size - 1)
    if (c2r && !r.dims.empty())
      r.sizes.back() = ctx.mul(
          ctx.constant(2), ctx.sub(shape[fft_axis_index(r.dims.back(), rank)], ctx.constant(1)));
  }
  return r;
}

namespace {

using Types = std::vector<const Type*>;
using Outs = std::vector<std::shared_ptr<const Value>>;

const DTypeSet kFp32 = {DataType::Float32};
const DTypeSet kComplex = {DataType::Complex64};
const DTypeSet kFp32OrComplex = {DataType::Float32, DataType::Complex64};

OpSchema dialect_schema(std::string name) {
  OpSchema s;
  s.name = std::move(name);
  s.since = Target::iOS13;
  s.dialect = "complex";
  return s;
}

std::optional<std::vector<int64_t>> opt_ints(InferCtx& ic, std::string_view name) {
  if (!ic.has(name)) return std::nullopt;
  return ic.ints(name);
}

/// The canonical axes of an FFT op's inputs (`n` / `dim` for 1-D ops, `shapes` / `dims` for N-D),
/// failing with the op's name.
FftAxes axes_of(InferCtx& ic, bool one_d, bool c2r) {
  const std::vector<Dim>& shape = ops::ranked_shape(ic, "data");
  try {
    return fft_canonicalize(ic.ctx, shape, opt_ints(ic, one_d ? "n" : "shapes"),
                            opt_ints(ic, one_d ? "dim" : "dims"), c2r);
  } catch (const ValueError& e) {
    ic.fail(e.what());
  }
}

void check_norm(InferCtx& ic) {
  const std::string norm = ic.str("norm");
  if (norm != "forward" && norm != "backward" && norm != "ortho")
    ic.fail_input("norm", "Invalid norm param '" + norm +
                              "'. Valid options are {'backward', 'forward', 'ortho'}");
}

/// The input's shape with each transformed axis set to its signal size; `half_last` (rfft,
/// rfftn) then keeps size // 2 + 1 along the last transformed axis.
std::vector<Dim> fft_shape(InferCtx& ic, const FftAxes& a, bool half_last) {
  std::vector<Dim> out = ops::ranked_shape(ic, "data");
  for (size_t i = 0; i < a.dims.size(); ++i)
    out[fft_axis_index(a.dims[i], out.size())] = a.sizes[i];
  if (half_last) {
    if (a.dims.empty()) ic.fail_input("data", "has no axis to transform");
    Dim& d = out[fft_axis_index(a.dims.back(), out.size())];
    d = ic.ctx.add(ic.ctx.floordiv(d, ic.ctx.constant(2)), ic.ctx.constant(1));
  }
  return out;
}

enum class Fft { Fft, Rfft, Ifft, Irfft };

/// One FFT op: 1-D (n, dim = -1) or N-D (shapes, dims).
void add_fft(OpRegistry& r, const std::string& name, Fft kind, bool one_d) {
  OpSchema s = dialect_schema(name);
  const DTypeSet data_t = kind == Fft::Fft ? kFp32OrComplex : kind == Fft::Rfft ? kFp32 : kComplex;
  if (one_d)
    s.inputs = {in("data", data_t, "T"), in_opt_const("n", dt::int32()),
                in_opt_const("dim", dt::int32(), def_int(-1)),
                in_opt_const("norm", dt::string(), def_str("backward"))};
  else
    s.inputs = {in("data", data_t, "T"), in_opt_const("shapes", dt::int32()),
                in_opt_const("dims", dt::int32()),
                in_opt_const("norm", dt::string(), def_str("backward"))};
  s.infer = [kind, one_d](InferCtx& ic) -> Types {
    if (kind == Fft::Fft) check_norm(ic);
    const bool c2r = kind == Fft::Irfft;
    FftAxes a = axes_of(ic, one_d, c2r);
    std::vector<Dim> shape = fft_shape(ic, a, kind == Fft::Rfft);
    const DataType out = c2r ? DataType::Float32 : DataType::Complex64;
    return {ic.ctx.tensor(out, shape)};
  };
  r.add(std::move(s));
}

void add_complex(OpRegistry& r) {
  OpSchema s = dialect_schema("complex");
  s.inputs = {in("real_data", kFp32, "T"), in("imag_data", kFp32, "T")};
  s.infer = [](InferCtx& ic) -> Types {
    const Type* re = ic.type("real_data");
    const Type* im = ic.type("imag_data");
    if (re->has_rank() != im->has_rank() || (re->has_rank() && re->shape() != im->shape()))
      ic.fail("The shape of real_data (" + re->str() + ") and imag_data (" + im->str() +
              ") must match to construct complex data.");
    return {ops::with_dtype(ic.ctx, re, DataType::Complex64)};
  };
  r.add(std::move(s));
}

void add_part(OpRegistry& r, const std::string& name, const char* input) {
  OpSchema s = dialect_schema(name);
  s.inputs = {in(input, kComplex, "T")};
  s.infer = [input](InferCtx& ic) -> Types {
    return {ops::with_dtype(ic.ctx, ic.type(input), DataType::Float32)};
  };
  r.add(std::move(s));
}

void add_shape(OpRegistry& r) {
  OpSchema s = dialect_schema("complex_shape");
  s.inputs = {in("x", kComplex, "T")};
  s.infer = [](InferCtx& ic) -> Types {
    const std::vector<Dim>& shape = ops::ranked_shape(ic, "x");
    return {
        ic.ctx.tensor(DataType::Int32, std::vector<int64_t>{static_cast<int64_t>(shape.size())})};
  };
  s.value = [](InferCtx& ic, Outs& out) {
    const Type* t = ic.type("x");
    out.push_back(ops::share(
        Value::from_dims(DataType::Int32, {static_cast<int64_t>(t->rank())}, t->shape())));
    return true;
  };
  r.add(std::move(s));
}

void add_stft(OpRegistry& r) {
  OpSchema s = dialect_schema("complex_stft");
  s.inputs = {in("input", kFp32OrComplex, "T"),
              in_const("n_fft", dt::int32()),
              in_opt_const("hop_length", dt::int32()),
              in_opt_const("win_length", dt::int32()),
              in_opt_const("window", kFp32),
              in_opt_const("normalized", dt::boolean(), def_bool(false)),
              in_opt_const("onesided", dt::boolean(), def_bool(true))};
  s.infer = [](InferCtx& ic) -> Types {
    const std::vector<Dim>& shape = ops::ranked_shape(ic, "input");
    if (shape.empty())
      ic.fail_input("input", "must have rank 1 (a signal) or 2 (a batch of signals)");
    const int64_t n_fft = ic.int_("n_fft");
    if (n_fft <= 0) ic.fail_input("n_fft", "= " + std::to_string(n_fft) + " must be positive");
    // coremltools: hop_length defaults to n_fft // 4 (onesided and normalized are always present)
    const int64_t hop = ic.has("hop_length") ? ic.int_("hop_length") : n_fft / 4;
    if (hop <= 0)
      ic.fail_input("hop_length", "= " + std::to_string(hop) + " must be positive" +
                                      (ic.has("hop_length") ? "" : " (the default is n_fft // 4)"));
    const int64_t bins = ic.bool_("onesided") ? n_fft / 2 + 1 : n_fft;
    Context& c = ic.ctx;
    Dim frames =
        c.add(c.floordiv(c.sub(shape.back(), c.constant(n_fft)), c.constant(hop)), c.constant(1));
    if (frames->is_const() && frames->value() < 1)
      ic.fail_input("input", "has " + shape.back()->str() +
                                 " samples, fewer than n_fft = " + std::to_string(n_fft));
    std::vector<Dim> out = {c.constant(bins), frames};
    if (shape.size() == 2) out.insert(out.begin(), shape[0]);
    return {c.tensor(DataType::Complex64, out)};
  };
  r.add(std::move(s));
}

}  // namespace

void register_complex_dialect_ops(OpRegistry& r) {
  add_complex(r);
  add_part(r, "complex_real", "data");
  add_part(r, "complex_imag", "data");
  add_fft(r, "complex_fft", Fft::Fft, true);
  add_fft(r, "complex_fftn", Fft::Fft, false);
  add_fft(r, "complex_rfft", Fft::Rfft, true);
  add_fft(r, "complex_rfftn", Fft::Rfft, false);
  add_fft(r, "complex_ifft", Fft::Ifft, true);
  add_fft(r, "complex_ifftn", Fft::Ifft, false);
  add_fft(r, "complex_irfft", Fft::Irfft, true);
  add_fft(r, "complex_irfftn", Fft::Irfft, false);
  add_shape(r);
  add_part(r, "complex_abs", "x");
  add_stft(r);
}

}  // namespace milkit
