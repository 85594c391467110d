// common::merge_consecutive_transposes: transpose(transpose(x, p), q) becomes one
// transpose(x, [p[i] for i in q]), as coremltools does. The first transpose must have exactly one
// consuming op, the second transpose, and its output must not be an output of the block. The new
// transpose takes a fresh "transpose_<n>" name (its perm an implicit const), goes before the first
// transpose and replaces the second one's output (taking its name when that is a function
// output); both transposes are removed. The result is kept even when the merged permutation is
// the identity (noop_elimination removes that). Only the function body is visited, not nested
// blocks (as in coremltools); repeated until nothing changes.
#include <algorithm>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

bool merge_in(Builder& b, Block& blk) {
  bool changed = false;
  for (Operation* op : blk.ops()) {
    if (op->erased() || op->op_type() != "transpose" || op->outputs().size() != 1) continue;
    Var* out = op->output(0);
    if (out->uses().size() != 1) continue;
    Operation* child = out->uses()[0].op;
    if (child->op_type() != "transpose") continue;
    if (std::find(blk.outputs().begin(), blk.outputs().end(), out) != blk.outputs().end()) continue;
    std::vector<int64_t> perm = op->input1("perm")->value()->to_ints();
    std::vector<int64_t> child_perm = child->input1("perm")->value()->to_ints();
    const int64_t n = static_cast<int64_t>(perm.size());
    std::vector<int64_t> merged;
    merged.reserve(child_perm.size());
    for (int64_t i : child_perm) {
      int64_t j = i < 0 ? i + n : i;  // Python indexing
      if (j < 0 || j >= n)
        throw ValueError("merge_consecutive_transposes: perm index out of range in " +
                         child->describe());
      merged.push_back(perm[static_cast<size_t>(j)]);
    }
    b.set_insertion_point(&blk, op);
    b.set_location(op->location());
    std::vector<Arg> args = {Builder::arg("x", op->input1("x")),
                             Builder::arg("perm", Value::int_list(merged))};
    Var* nv = b.create("transpose", args)[0];
    pass_util::replace_var(child->output(0), nv);
    child->parent()->erase(child);
    blk.erase(op);
    changed = true;
  }
  return changed;
}

class MergeConsecutiveTransposes : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::merge_consecutive_transposes", {});
    bool changed = false;
    if (!pass_util::has_op_type(p, {"transpose"})) return false;  // nothing to match
    for (auto& [name, f] : p.functions()) {
      Builder b(*f);
      while (merge_in(b, f->body())) changed = true;
    }
    return changed;
  }
};

}  // namespace

/// Registers common::merge_consecutive_transposes.
void register_merge_consecutive_transposes(PassRegistry& r) {
  r.add("common::merge_consecutive_transposes",
        [] { return std::make_unique<MergeConsecutiveTransposes>(); });
}

}  // namespace milkit
