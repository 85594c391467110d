// quantization ops: quantize, dequantize (coremltools iOS17/quantization_ops.py).
//
// quantize(input: SrcT, zero_point: const DstT?, scale: const SrcT, axis: const int32?,
// output_dtype: const string) -> clip(round_half_even(input / scale) + zero_point) as DstT;
// dequantize(input: SrcT, zero_point: const SrcT?, scale: const DstT, axis?) -> scale * (input -
// zero_point) as DstT. Quantized types are int8 / uint8, float types fp16 / fp32. scale and
// zero_point are scalars (per tensor; no axis) or vectors along `axis` (per channel). quantize
// folds a known input as numpy does (the division in SrcT, the zero point added in fp32);
// dequantize has no value inference (coremltools only materializes it for passes).
#include <cmath>

#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"

namespace milkit {

namespace {

const DTypeSet kQuant = {DataType::Int8, DataType::UInt8};

/// coremltools' _check_scale_zp_shapes.
void check_scale_zp(InferCtx& ic, const char* op) {
  const Type* ts = ic.type("scale");
  const Type* tx = ic.type("input");
  bool has_zp = ic.has("zero_point");
  const Type* tz = has_zp ? ic.type("zero_point") : nullptr;
  if (!ts->has_rank()) ic.fail_input("scale", "must have a known rank");
  if (ts->rank() == 0) {
    if (ic.has("axis"))
      ic.fail_input("axis", std::string("must not be given to ") + op + " when scale and zero_point are scalars");
    if (tz && tz->rank() != 0)
      ic.fail_input("zero_point", "must be a scalar when scale is a scalar, got " + tz->str());
    return;
  }
  if (ts->rank() != 1)
    ic.fail_input("scale", "= " + ts->str() + ": scale and zero_point must both be scalars or vectors");
  if (!ic.has("axis"))
    ic.fail_input("axis", std::string("must be given to ") + op + " when scale and zero_point are vectors");
  if (!tx->has_rank()) ic.fail_input("input", "must have a known rank for per-axis (de)quantization");
  int64_t rank = tx->rank();
  int64_t a = ic.int_("axis");
  if (a < -rank || a >= rank)
    ic.fail_input("axis", "= " + std::to_string(a) + " must be in the range -input.rank <= axis < input.rank (rank " +
                              std::to_string(rank) + ")");
  Dim ad = tx->shape()[a < 0 ? a + rank : a];
  auto same_len = [&](const Type* t, const char* name) {
    Dim n = t->shape()[0];
    // coremltools compares the vector length with input.shape[axis] directly: a symbolic input
    // dim never equals the (known) length
    if (!(ad->is_const() && n->is_const() && ad->value() == n->value()))
      ic.fail_input(name, "is a vector of length " + n->str() + "; it needs the same size as the input's dim " +
                              std::to_string(a) + " (" + ad->str() + ", input " + tx->str() + ")");
  };
  same_len(ts, "scale");
  if (tz) {
    if (tz->rank() != 1) ic.fail_input("zero_point", "must be a vector when scale is a vector, got " + tz->str());
    same_len(tz, "zero_point");
  }
}

/// scale and zero_point broadcast over the input: the flat index into the parameter of each
/// input element (0 for scalars).
std::vector<int64_t> param_index(const std::vector<int64_t>& shape, const Value& p, int64_t axis) {
  std::vector<int64_t> idx(static_cast<size_t>(shape_numel(shape)), 0);
  if (p.rank() == 0) return idx;
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  int64_t n = shape[static_cast<size_t>(axis)];
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = (static_cast<int64_t>(i) / inner) % n;
  return idx;
}

void add_quantize(OpRegistry& r) {
  OpSchema s;
  s.name = "quantize";
  s.since = Target::iOS17;
  s.inputs = {in("input", dt::floats(), "SrcT"),
              in_opt_const("zero_point", kQuant, nullptr, "DstT"),
              in_const("scale", dt::floats(), "SrcT"),
              in_opt_const("axis", dt::int32()),
              in_const("output_dtype", dt::string())};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
    std::string ods = ic.str("output_dtype");
    std::optional<DataType> od = dtype_from_name(ods);
    if (!od || !kQuant.contains(*od))
      ic.fail_input("output_dtype", "= \"" + ods + "\" is not a supported output dtype (\"int8\" or \"uint8\")");
    if (ic.has("zero_point") && ic.type("zero_point")->dtype() != *od)
      ic.fail_input("zero_point", "has dtype " + std::string(dtype_name(ic.type("zero_point")->dtype())) +
                                      " but output_dtype is \"" + ods + "\"; they must match");
    if (const Value* sv = ic.val("scale"); sv && !sv->is_symbolic()) {
      bool all_zero = true;
      for (int64_t i = 0; i < sv->numel() && all_zero; ++i) all_zero = sv->as_double(i) == 0.0;
      if (all_zero) ic.fail_input("scale", "cannot be 0");
    }
    check_scale_zp(ic, "quantize");
    return {ops::with_dtype(ic.ctx, ic.type("input"), *od)};
  };
  s.value = [](InferCtx& ic, std::vector<std::shared_ptr<const Value>>& out) {
    if (!ic.known("input") || !ic.known("scale")) return false;
    if (ic.has("zero_point") && !ic.known("zero_point")) return false;
    const Value& x = *ic.val("input");
    const Value& sc = *ic.val("scale");
    const Value* zp = ic.has("zero_point") ? ic.val("zero_point") : nullptr;
    int64_t axis = 0;
    if (sc.rank() == 1) axis = ic.axis("axis", ic.int_("axis"), x.rank());
    DataType od = *dtype_from_name(ic.str("output_dtype"));
    auto is = param_index(x.shape(), sc, axis);
    std::vector<int64_t> iz = zp ? param_index(x.shape(), *zp, axis) : std::vector<int64_t>();
    const double lo = static_cast<double>(int_min(od)), hi = static_cast<double>(int_max(od));
    std::vector<double> res(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) {
      // numpy: input / scale in SrcT, np.around (half to even), += zero_point (in SrcT)
      double q = std::nearbyint(ops::rnd(x.dtype(), x.as_double(i) / sc.as_double(is[i])));
      if (zp) q = ops::rnd(x.dtype(), q + static_cast<double>(zp->as_int(iz[i])));
      // a NaN stays NaN through np.clip; numpy's (x86) cast of NaN to int8 / uint8 gives 0
      res[i] = std::isnan(q) ? 0.0 : std::min(std::max(q, lo), hi);
    }
    out.push_back(ops::share(Value::from_doubles(od, x.shape(), res)));
    return true;
  };
  r.add(std::move(s));
}

void add_dequantize(OpRegistry& r) {
  OpSchema s;
  s.name = "dequantize";
  s.since = Target::iOS17;
  s.inputs = {in("input", kQuant, "SrcT"),
              in_opt_const("zero_point", kQuant, nullptr, "SrcT"),
              in_const("scale", dt::floats(), "DstT"),
              in_opt_const("axis", dt::int32())};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
    check_scale_zp(ic, "dequantize");
    return {ops::with_dtype(ic.ctx, ic.type("input"), ic.type("scale")->dtype())};
  };
  r.add(std::move(s));
}

}  // namespace

void register_quantization_ops(OpRegistry& r) {
  add_dequantize(r);
  add_quantize(r);
}

}  // namespace milkit
