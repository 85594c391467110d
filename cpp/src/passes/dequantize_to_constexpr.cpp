// common::dequantize_to_constexpr, as coremltools does it (quantization weights stay compressed in
// the file): a dequantize whose input, scale, zero_point and axis are all known becomes a
// constexpr op named "<dequantize>_affine_dequantized", built before it, and takes its uses
// (coremltools' frontend _construct_constexpr_dequant_op):
// - before iOS18, constexpr_affine_dequantize(quantized_data, zero_point, scale, axis): a missing
//   zero point is 0 of the data's dtype, a missing axis is the first dim where scale is not 1 (0
//   for a scalar), scale and zero point are squeezed (size-1 dims dropped);
// - from iOS18, constexpr_blockwise_shift_scale(data, scale, offset?): scale takes the data's
//   rank (its length at `axis`, 1 elsewhere), int8 / uint8 data whose values fit int4 [-8, 7] /
//   uint4 [0, 15] becomes int4 / uint4, and the zero point becomes the offset (scale's shape, the
//   data's dtype) unless it is all zeros.
// Nested blocks first.
//
// Deliberate differences (coremltools raises or writes a broken model):
// - a scalar (rank-0) or empty const input is left alone (coremltools' constexpr ops need rank
//   >= 1, and numpy's max of an empty array raises): the dequantize still runs as an op;
// - at iOS18 the data stays 8-bit when a non-zero offset does not fit the 4-bit range
//   (coremltools narrows the data anyway and gives the offset the 4-bit dtype it cannot hold).
#include <algorithm>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

bool known(const Var* v) { return !v || v->has_value(); }

// numpy's squeeze: size-1 dims dropped.
Value squeezed(const Value& v) {
  std::vector<int64_t> s;
  for (int64_t d : v.shape())
    if (d != 1) s.push_back(d);
  return v.reshaped(std::move(s));
}

bool fits(const Value& v, int64_t lo, int64_t hi) {
  for (int64_t x : v.to_ints())
    if (x < lo || x > hi) return false;
  return true;
}

bool any_nonzero(const Value& v) {
  for (int64_t x : v.to_ints())
    if (x != 0) return true;
  return false;
}

std::vector<Arg> affine_args(const Operation* op, const Value& data) {
  const Var* sc = op->input1("scale");
  const Var* zp = op->input1("zero_point");
  const Var* ax = op->input1("axis");
  const Value& scale = *sc->value();
  int64_t axis = 0;
  if (ax) {
    axis = ax->value()->as_int(0);
  } else {
    // the first dim of scale that is not 1 (a missing axis means a scalar scale)
    for (int i = 0; i < scale.rank(); ++i)
      if (scale.shape()[static_cast<size_t>(i)] > 1) {
        axis = i;
        break;
      }
  }
  Value zero = zp ? *zp->value() : Value::scalar_int(data.dtype(), 0);
  return {Builder::arg("quantized_data", data), Builder::arg("zero_point", squeezed(zero)),
          Builder::arg("scale", squeezed(scale)),
          Builder::arg("axis", Value::scalar_int(DataType::Int32, axis))};
}

// Empty when coremltools' rewrite would be wrong (see the header).
std::vector<Arg> blockwise_args(const Operation* op, const Value& data) {
  const Var* zp = op->input1("zero_point");
  const Var* ax = op->input1("axis");
  Value scale = *op->input1("scale")->value();
  const int rank = data.rank();
  if (scale.rank() != rank) {
    std::vector<int64_t> target(static_cast<size_t>(rank), 1);
    if (ax) {
      int64_t a = ax->value()->as_int(0);
      if (a < 0) a += rank;
      target[static_cast<size_t>(a)] = data.shape()[static_cast<size_t>(a)];
    } else {
      std::copy(scale.shape().begin(), scale.shape().end(), target.begin());
    }
    if (shape_numel(target) != scale.numel())
      throw ValueError("dequantize '" + op->name() +
                       "': unable to infer scale's shape; scale needs the same rank as the weight");
    scale = scale.reshaped(std::move(target));
  }
  const bool has_offset = zp && any_nonzero(*zp->value());
  const bool is_unsigned = data.dtype() == DataType::UInt8;
  const DataType narrow = is_unsigned ? DataType::UInt4 : DataType::Int4;
  const int64_t lo = is_unsigned ? 0 : -8, hi = is_unsigned ? 15 : 7;
  DataType dt = data.dtype();
  if (fits(data, lo, hi) && (!has_offset || fits(*zp->value(), lo, hi))) dt = narrow;
  // int4 / uint4 elements are stored one per byte like int8 / uint8: the buffer is shared
  std::vector<Arg> args = {Builder::arg("data", Value(dt, data.shape(), data.buffer())),
                           Builder::arg("scale", scale)};
  if (has_offset) {
    const Value& z = *zp->value();
    Value offset(dt, scale.shape(), z.reshaped(scale.shape()).buffer());
    args.push_back(Builder::arg("offset", std::move(offset)));
  }
  return args;
}

bool transform(Function& f, Operation* op) {
  if (op->op_type() != "dequantize") return false;
  Var* in = op->input1("input");
  if (!in->has_value() || !known(op->input1("scale")) || !known(op->input1("zero_point")) ||
      !known(op->input1("axis")))
    return false;
  const Value& data = *in->value();
  if (data.rank() == 0 || data.numel() == 0) return false;
  const bool ios18 = f.opset() >= Target::iOS18;
  std::vector<Arg> args = ios18 ? blockwise_args(op, data) : affine_args(op, data);
  Builder b(f);
  b.set_insertion_point(op->parent(), op);
  b.set_location(op->location());
  const char* type = ios18 ? "constexpr_blockwise_shift_scale" : "constexpr_affine_dequantize";
  Var* nv = b.create(type, args, op->name() + "_affine_dequantized").at(0);
  pass_util::replace_var(op->output(0), nv);
  op->parent()->erase(op);
  return true;
}

// Returns whether it replaced a dequantize.
bool apply_block(Function& f, Block& blk) {
  bool changed = false;
  for (Operation* op : blk.ops()) {
    if (op->erased()) continue;
    for (Block* nb : op->blocks()) changed = apply_block(f, *nb) || changed;
    changed = transform(f, op) || changed;
  }
  return changed;
}

class DequantizeToConstexpr : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::dequantize_to_constexpr", {});
    bool changed = false;
    if (!pass_util::has_op_type(p, {"dequantize"})) return false;  // nothing to match
    for (auto& [name, f] : p.functions()) changed = apply_block(*f, f->body()) || changed;
    return changed;
  }
};

}  // namespace

/// Registers common::dequantize_to_constexpr.
void register_dequantize_to_constexpr(PassRegistry& r) {
  r.add("common::dequantize_to_constexpr",
        [] { return std::make_unique<DequantizeToConstexpr>(); });
}

}  // namespace milkit
