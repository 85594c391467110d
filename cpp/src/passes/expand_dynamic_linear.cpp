// common::expand_dynamic_linear: a linear whose weight or bias is not the output of a const or
// constexpr_* op (a compile-time value computed by another op, e.g. a cast that const_elimination
// has not folded) becomes matmul / add, as coremltools does:
//   static weight, dynamic bias: linear(x, weight) (automatic name) -> add(., bias) named after
//     the linear;
//   dynamic weight: matmul(x, weight, transpose_y=True) (automatic name), then add(., bias) named
//     after the linear unless the bias is static and known to be zero (a const of zeros, or a
//     constexpr_affine_dequantize whose quantized data equal the zero point; other constexpr
//     biases count as non-zero).
// The new ops go before the linear, take its uses, and the linear goes. Ops created by the pass
// are not visited; nested blocks are handled when their op is reached (one sweep).
#include <string>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

bool is_static(const Var* v) {
  if (!v) return true;
  const Operation* op = v->op();
  if (!op) return false;
  return op->op_type() == "const" || op->op_type().rfind("constexpr_", 0) == 0;
}

// constexpr_affine_dequantize.is_all_zeros: every quantized value equals its zero point.
bool affine_all_zeros(const Operation* op) {
  Var* q = op->input1("quantized_data");
  Var* zp = op->input1("zero_point");
  Var* ax = op->input1("axis");
  if (!q || !zp || !ax || !q->has_value() || !zp->has_value() || !ax->has_value()) return false;
  const Value& qv = *q->value();
  const Value& zv = *zp->value();
  if (zv.numel() == 1) {
    for (int64_t i = 0; i < qv.numel(); ++i)
      if (qv.as_double(i) != zv.as_double(0)) return false;
    return true;
  }
  const auto& shape = qv.shape();
  int64_t axis = ax->value()->as_int(0);
  if (axis < 0) axis += static_cast<int64_t>(shape.size());
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size())) return false;
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t dim = shape[static_cast<size_t>(axis)];
  if (zv.numel() != dim) return false;
  for (int64_t i = 0; i < qv.numel(); ++i)
    if (qv.as_double(i) != zv.as_double((i / inner) % dim)) return false;
  return true;
}

bool bias_nonzero(const Var* bias) {
  const Operation* op = bias->op();
  if (op->op_type() == "const") {
    const Value& v = *bias->value();
    for (int64_t i = 0; i < v.numel(); ++i)
      if (v.as_double(i) != 0) return true;
    return false;
  }
  if (op->op_type() == "constexpr_affine_dequantize") return !affine_all_zeros(op);
  return true;
}

bool expand(Builder& b, Block& blk, Operation* op) {
  Var* x = op->input1("x");
  Var* w = op->input1("weight");
  Var* bias = op->input1("bias");
  const bool w_static = is_static(w), b_static = is_static(bias);
  if (w_static && b_static) return false;
  b.set_insertion_point(&blk, op);
  b.set_location(op->location());
  Var* result = nullptr;
  if (w_static) {
    Var* lin = b.op("linear", {{"x", x}, {"weight", w}});
    result = b.op("add", {{"x", lin}, {"y", bias}}, op->name());
  } else {
    std::vector<Arg> margs = {Builder::arg("x", x), Builder::arg("y", w),
                              Builder::arg("transpose_y", Value::scalar_bool(true))};
    result = b.create("matmul", margs).at(0);
    if (bias && (!b_static || bias_nonzero(bias)))
      result = b.op("add", {{"x", result}, {"y", bias}}, op->name());
  }
  pass_util::replace_var(op->output(0), result);
  blk.erase(op);
  return true;
}

bool expand_block(Builder& b, Block& blk) {
  bool changed = false;
  for (Operation* op : blk.ops()) {
    for (Block* nb : op->blocks()) changed = expand_block(b, *nb) || changed;
    if (op->op_type() == "linear") changed = expand(b, blk, op) || changed;
  }
  return changed;
}

}  // namespace

/// Registers common::expand_dynamic_linear.
void register_expand_dynamic_linear(PassRegistry& r) {
  r.add("common::expand_dynamic_linear",
        pass_util::block_pass("common::expand_dynamic_linear", {"linear"}, expand_block,
                              pass_util::OpScan::Function));
}

}  // namespace milkit
