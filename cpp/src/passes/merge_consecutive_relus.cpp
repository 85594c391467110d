// common::merge_consecutive_relus: relu(relu(x)) -> relu(x), as coremltools does. When a relu's
// output has exactly one consuming op and it is a relu, the second relu's uses (and function-output
// name) move to the first, and the second is removed. Only the function body is rewritten (not
// nested blocks, like coremltools); repeated until nothing changes.
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

bool merge_sweep(Block& blk) {
  bool merged = false;
  for (Operation* op : blk.ops()) {
    if (op->erased() || op->op_type() != "relu") continue;
    const auto& uses = op->output(0)->uses();
    if (uses.size() != 1 || uses[0].op->op_type() != "relu") continue;
    Operation* child = uses[0].op;
    if (child->parent() != &blk) continue;  // coremltools fails to remove it from this block
    pass_util::replace_var(child->output(0), op->output(0));
    blk.erase(child);
    merged = true;
  }
  return merged;
}

class MergeConsecutiveRelus : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::merge_consecutive_relus", {});
    bool changed = false;
    if (!pass_util::has_op_type(p, {"relu"})) return false;  // nothing to match
    for (auto& [name, f] : p.functions())
      while (merge_sweep(f->body())) changed = true;
    return changed;
  }
};

}  // namespace

/// Registers common::merge_consecutive_relus.
void register_merge_consecutive_relus(PassRegistry& r) {
  r.add("common::merge_consecutive_relus",
        [] { return std::make_unique<MergeConsecutiveRelus>(); });
}

}  // namespace milkit
