// common::merge_affine_dequantize_with_consecutive_ops, as coremltools does it: a
// constexpr_affine_dequantize whose quantized data has no other reader absorbs the chain of ops
// after it that only move data, by applying them to the quantized data:
//   data -> constexpr_affine_dequantize -> transpose -> expand_dims -> out
// becomes new_data -> constexpr_affine_dequantize -> out.
// The chain follows single readers; it stops at an output of the block (that op is still
// absorbed). With a scalar scale and zero point (per tensor) it takes transpose, reshape,
// expand_dims and squeeze; per channel only transpose (the axis follows the permutation).
// The new op takes the last absorbed op's output name, is built before that op, and reuses the
// old op's zero_point and scale (per tensor also its axis); the new quantized data is the const
// "<name>_quantized_data_0" (per channel the axis is a new const). The old ops go; the consts they
// read stay for dead_code_elimination. Nested blocks first (each to a fixed point); the function
// body is swept until nothing changes.
//
// Deliberate differences (coremltools raises):
// - per tensor, when the absorbed ops leave the old axis outside the new rank (a reshape to
//   fewer dims), the axis is a new const 0 (per tensor the axis does not change the numbers);
// - per tensor at iOS18 the result is constexpr_affine_dequantize, as per channel (coremltools
//   tries to build constexpr_blockwise_shift_scale from the old op's vars and fails);
// - an op in a nested block is not absorbed into a constexpr op outside it.
#include "milkit/builder/builder.h"
#include "milkit/ops/common.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

const char* const kPerTensor[] = {"transpose", "reshape", "expand_dims", "squeeze"};

bool supported(const std::string& t, bool per_tensor) {
  if (!per_tensor) return t == "transpose";
  for (const char* s : kPerTensor)
    if (t == s) return true;
  return false;
}

// The ops the chain absorbs (coremltools' search_for_ops_to_fold).
std::vector<Operation*> chain(Operation* op, bool per_tensor) {
  std::vector<Operation*> ops;
  Operation* cursor = op;
  while (true) {
    Var* out = cursor->output(0);
    if (!out->block_uses().empty() || out->uses().size() != 1) break;
    Operation* next = out->uses()[0].op;
    if (next->parent() != op->parent() || !supported(next->op_type(), per_tensor)) break;
    if (!ops::static_shape(next->output(0)->type())) break;
    ops.push_back(next);
    cursor = next;
  }
  return ops;
}

// numpy's transpose of 1-byte elements.
Value transposed(const Value& v, const std::vector<int64_t>& perm) {
  const std::vector<int64_t>& in = v.shape();
  const size_t r = in.size();
  std::vector<int64_t> in_strides(r, 1);
  for (size_t i = r; i-- > 1;) in_strides[i - 1] = in_strides[i] * in[i];
  std::vector<int64_t> out(r), stride(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t p = perm[i] < 0 ? perm[i] + static_cast<int64_t>(r) : perm[i];
    out[i] = in[static_cast<size_t>(p)];
    stride[i] = in_strides[static_cast<size_t>(p)];
  }
  const uint8_t* src = v.raw();
  std::vector<uint8_t> dst(static_cast<size_t>(v.numel()));
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  for (size_t k = 0; k < dst.size(); ++k) {
    dst[k] = src[off];
    for (size_t d = r; d-- > 0;) {
      off += stride[d];
      if (++idx[d] < out[d]) break;
      off -= stride[d] * out[d];
      idx[d] = 0;
    }
  }
  return Value(v.dtype(), std::move(out), Buffer::take(std::move(dst)));
}

bool try_transform(Function& f, Operation* op) {
  Var* data = op->input1("quantized_data");
  if (data->uses().size() != 1 || !data->has_value()) return false;
  Var* scale = op->input1("scale");
  Var* zp = op->input1("zero_point");
  Var* axis = op->input1("axis");
  const bool per_tensor = scale->type()->rank() == 0 && zp->type()->rank() == 0;
  std::vector<Operation*> ops = chain(op, per_tensor);
  if (ops.empty()) return false;
  Value v = *data->value();
  int64_t ax = axis->value()->as_int(0);
  if (ax < 0) ax += v.rank();
  for (Operation* o : ops) {
    if (o->op_type() == "transpose") {
      std::vector<int64_t> perm = o->input1("perm")->value()->to_ints();
      v = transposed(v, perm);
      for (size_t i = 0; i < perm.size(); ++i)
        if (perm[i] == ax || perm[i] + static_cast<int64_t>(perm.size()) == ax) {
          ax = static_cast<int64_t>(i);
          break;
        }
    } else {
      v = v.reshaped(*ops::static_shape(o->output(0)->type()));
    }
  }
  Operation* last = ops.back();
  Var* old_out = last->output(0);
  std::vector<Arg> args = {Builder::arg("quantized_data", std::move(v)),
                           Builder::arg("zero_point", zp), Builder::arg("scale", scale)};
  const int64_t old_axis = axis->value()->as_int(0);
  const int64_t new_rank = old_out->type()->rank();
  if (!per_tensor)
    args.push_back(Builder::arg("axis", Value::scalar_int(DataType::Int32, ax)));
  else if (old_axis < -new_rank || old_axis >= new_rank)
    args.push_back(Builder::arg("axis", Value::scalar_int(DataType::Int32, 0)));
  else
    args.push_back(Builder::arg("axis", axis));
  Builder b(f);
  b.set_insertion_point(last->parent(), last);
  b.set_location(op->location());
  Var* nv = b.create("constexpr_affine_dequantize", args, old_out->name()).at(0);
  pass_util::replace_var(old_out, nv);
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) (*it)->parent()->erase(*it);
  op->parent()->erase(op);
  return true;
}

bool merge_block(Function& f, Block& blk, bool& nested) {
  bool changed = false;
  for (Operation* op : blk.ops()) {
    if (op->erased()) continue;
    for (Block* nb : op->blocks())
      while (merge_block(f, *nb, nested)) nested = true;
    if (op->op_type() == "constexpr_affine_dequantize" && try_transform(f, op)) changed = true;
  }
  return changed;
}

class MergeAffineDequantizeWithConsecutiveOps : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::merge_affine_dequantize_with_consecutive_ops", {});
    bool changed = false;
    bool nested = false;  // a change in a nested block
    if (!pass_util::has_op_type(p, {"constexpr_affine_dequantize"}))
      return false;  // nothing to match
    for (auto& [name, f] : p.functions())
      while (merge_block(*f, f->body(), nested)) changed = true;
    return changed || nested;
  }
};

}  // namespace

/// Registers common::merge_affine_dequantize_with_consecutive_ops.
void register_merge_affine_dequantize_with_consecutive_ops(PassRegistry& r) {
  r.add("common::merge_affine_dequantize_with_consecutive_ops",
        [] { return std::make_unique<MergeAffineDequantizeWithConsecutiveOps>(); });
}

}  // namespace milkit
