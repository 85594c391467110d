// common::replace_stack_reshape: stack(values, axis) -> reshape that only merges the new axis into
// a neighbour becomes one concat, as coremltools does. The stack output must have exactly one
// consuming op, a reshape whose output rank is one less than the stack's; the first value's shape
// and the reshape's output shape must differ in exactly one dim, where the reshape's dim is twice
// the value's (symbolic dims compare as expressions), and that dim must be the stack axis (plain
// concat) or the one before it (interleave=True). The stack axis is taken as written, so a
// negative axis never matches. The concat ("concat_<n>", fresh axis / interleave consts) is
// inserted before the stack and takes the reshape output's uses (and its name when that is a
// function output); stack and reshape are removed. Only the function body is searched (no nested
// blocks), in one sweep. coremltools fails when the stack output is also a block output; milkit
// leaves that pattern alone.
#include <algorithm>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

using pass_util::is_block_output;

bool try_replace(Builder& b, Context& ctx, Operation* stack) {
  Var* out = stack->output(0);
  if (out->uses().size() != 1 || is_block_output(out, stack->parent())) return false;
  Operation* reshape = out->uses()[0].op;
  if (reshape->op_type() != "reshape") return false;
  Var* axis_var = stack->input1("axis");
  if (!axis_var || !axis_var->has_value()) return false;
  const int64_t axis = axis_var->value()->to_ints().at(0);
  const Type* st = out->type();
  const Type* rt = reshape->output(0)->type();
  const auto& values = stack->input(0);
  if (values.empty() || !st->has_rank() || !rt->has_rank() || !values[0]->type()->has_rank())
    return false;
  if (st->rank() != rt->rank() + 1) return false;
  const auto& in_shape = values[0]->type()->shape();
  const auto& r_shape = rt->shape();
  std::vector<size_t> diff;
  for (size_t i = 0; i < std::min(in_shape.size(), r_shape.size()); ++i)
    if (in_shape[i] != r_shape[i]) diff.push_back(i);
  if (diff.size() != 1) return false;
  const auto concat_axis = static_cast<int64_t>(diff[0]);
  if (ctx.mul(in_shape[diff[0]], ctx.constant(2)) != r_shape[diff[0]]) return false;
  if (concat_axis != axis && concat_axis != axis - 1) return false;
  b.set_insertion_point(stack->parent(), stack);
  b.set_location(stack->location());
  Arg vals;
  vals.name = "values";
  vals.is_sequence = true;
  for (Var* v : values) vals.items.push_back(ArgItem{v, nullptr});
  std::vector<Arg> args = {vals,
                           Builder::arg("axis", Value::scalar_int(DataType::Int32, concat_axis)),
                           Builder::arg("interleave", Value::scalar_bool(concat_axis == axis - 1))};
  Var* concat = b.create("concat", args).at(0);
  pass_util::replace_var(reshape->output(0), concat);
  reshape->parent()->erase(reshape);
  stack->parent()->erase(stack);
  return true;
}

// One sweep over the function body (nested blocks are not looked at).
bool replace_in(Builder& b, Block& blk) {
  bool changed = false;
  for (Operation* op : blk.ops())
    if (!op->erased() && op->op_type() == "stack" && try_replace(b, blk.function()->ctx(), op))
      changed = true;
  return changed;
}

}  // namespace

/// Registers common::replace_stack_reshape.
void register_replace_stack_reshape(PassRegistry& r) {
  r.add("common::replace_stack_reshape",
        pass_util::block_pass("common::replace_stack_reshape", {"stack"}, replace_in));
}

}  // namespace milkit
