// common::fuse_stack_split: stack(values, axis) -> split(axis) -> one squeeze(axes=[axis]) per
// split output cancels out, as coremltools does: every squeeze output is replaced by
// identity(values[i]) (left for noop_elimination). The stack output must not be a block output;
// each split reading it must split along the stack axis (negative axes count from rank + 1) into
// len(values) pieces (split_sizes all 1 and / or num_splits == len(values)), none of its outputs a
// block output, and each output must be read by exactly one op, a squeeze whose axes are exactly
// the stack axis. The identities ("identity_<n>") all go before the squeeze of the last split
// output; the split and its squeezes are removed, and the stack too once nothing reads it.
// Nested blocks are handled before the op that owns them; one sweep. Where coremltools would
// fail (a split output read by several ops or by a non-squeeze, squeeze without axes, split sizes
// that are not constant, a squeezed value read before the anchoring squeeze) milkit leaves the
// pattern alone.
#include <algorithm>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

using pass_util::is_block_output;

int64_t positive_axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank + 1 : axis; }

bool try_fuse_branch(Builder& b, Block& blk, const std::vector<Var*>& values, int64_t rank,
                     int64_t axis, Operation* split) {
  Var* av = split->input1("axis");
  if (!av || !av->has_value() || positive_axis(av->value()->to_ints().at(0), rank) != axis)
    return false;
  const auto n = static_cast<int64_t>(values.size());
  Var* sizes = split->input1("split_sizes");
  if (sizes) {
    if (!sizes->has_value()) return false;
    std::vector<int64_t> s = sizes->value()->to_ints();
    // all_of rather than == against a vector of ones, on which GCC 12 at -O3 gives a false
    // -Wfree-nonheap-object
    if (s.size() != values.size() ||
        !std::all_of(s.begin(), s.end(), [](int64_t k) { return k == 1; }))
      return false;
  }
  Var* ns = split->input1("num_splits");
  if (ns) {
    if (!ns->has_value() || ns->value()->to_ints().at(0) != n) return false;
  }
  if (!sizes && !ns) return false;
  if (static_cast<int64_t>(split->outputs().size()) != n) return false;
  for (Var* o : split->outputs())
    if (is_block_output(o, &blk)) return false;
  std::vector<Operation*> squeezes;
  for (Var* o : split->outputs()) {
    if (o->uses().size() != 1 || o->uses()[0].op->op_type() != "squeeze") return false;
    Operation* sq = o->uses()[0].op;
    Var* axes = sq->input1("axes");
    if (!axes || !axes->has_value()) return false;
    std::vector<int64_t> a = axes->value()->to_ints();
    if (a.size() != 1 || positive_axis(a[0], rank) != axis) return false;
    squeezes.push_back(sq);
  }
  Operation* anchor = squeezes.back();
  std::vector<Operation*> ops = blk.ops();
  auto pos = [&](const Operation* op) {
    return std::find(ops.begin(), ops.end(), op) - ops.begin();
  };
  const auto anchor_pos = pos(anchor);
  for (Operation* sq : squeezes)
    for (const Use& u : sq->output(0)->uses())
      if (u.op->parent() == &blk && pos(u.op) < anchor_pos) return false;
  b.set_insertion_point(anchor->parent(), anchor);
  b.set_location(anchor->location());
  for (size_t i = 0; i < squeezes.size(); ++i) {
    Var* id = b.op("identity", {{"x", values[i]}});
    pass_util::replace_var(squeezes[i]->output(0), id);
  }
  for (Operation* sq : squeezes) blk.erase(sq);
  blk.erase(split);
  return true;
}

bool try_transform(Builder& b, Block& blk, Operation* stack) {
  Var* out = stack->output(0);
  if (is_block_output(out, &blk)) return false;
  const auto span = stack->input(0);
  std::vector<Var*> values(span.begin(), span.end());
  Var* av = stack->input1("axis");
  if (values.empty() || !values[0]->type()->has_rank() || !av || !av->has_value()) return false;
  const int64_t rank = values[0]->type()->rank();
  const int64_t axis = positive_axis(av->value()->to_ints().at(0), rank);
  std::vector<Operation*> splits;
  for (const Use& u : out->uses())
    if (u.op->op_type() == "split" && std::find(splits.begin(), splits.end(), u.op) == splits.end())
      splits.push_back(u.op);
  bool changed = false;
  for (Operation* s : splits) changed = try_fuse_branch(b, blk, values, rank, axis, s) || changed;
  if (out->uses().empty()) {
    blk.erase(stack);
    changed = true;
  }
  return changed;
}

bool fuse_block(Builder& b, Block& blk) {
  bool changed = false;
  for (Operation* op : blk.ops()) {
    if (op->erased()) continue;
    for (Block* nb : op->blocks()) changed = fuse_block(b, *nb) || changed;
    if (op->op_type() == "stack" && try_transform(b, blk, op)) changed = true;
  }
  return changed;
}

}  // namespace

/// Registers common::fuse_stack_split.
void register_fuse_stack_split(PassRegistry& r) {
  r.add("common::fuse_stack_split",
        pass_util::block_pass("common::fuse_stack_split", {"stack"}, fuse_block));
}

}  // namespace milkit
