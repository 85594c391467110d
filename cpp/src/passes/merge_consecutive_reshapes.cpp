// common::merge_consecutive_reshapes: a chain reshape -> reshape -> ... -> reshape becomes one
// reshape, as coremltools does. A chain starts at a reshape and goes on while the current
// reshape's output has exactly one consuming op that is a reshape and is not an output of its
// block. A chain of two or more is replaced by reshape(x=<first reshape's x>, shape=<last
// reshape's shape var>), inserted just before the last reshape and named after the last reshape's
// output (which it replaces); the chain's reshapes are removed. Nested blocks are rewritten until
// stable before the op that owns them is looked at; every block is repeated until nothing changes.
#include <algorithm>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

using pass_util::is_block_output;

std::vector<Operation*> reshape_chain(Operation* op) {
  std::vector<Operation*> chain;
  while (op->op_type() == "reshape") {
    chain.push_back(op);
    Var* out = op->output(0);
    if (out->uses().size() != 1 || is_block_output(out, op->parent())) break;
    op = out->uses()[0].op;
  }
  return chain;
}

bool merge_block(Builder& b, Block& blk, bool& nested) {
  bool changed = false;
  for (Operation* op : blk.ops()) {
    if (op->erased()) continue;
    for (Block* nb : op->blocks())
      while (merge_block(b, *nb, nested)) nested = true;
    if (op->op_type() != "reshape") continue;
    std::vector<Operation*> chain = reshape_chain(op);
    if (chain.size() < 2) continue;
    Operation* last = chain.back();
    Var* old_out = last->output(0);
    b.set_insertion_point(last->parent(), last);
    b.set_location(last->location());
    Var* merged =
        b.op("reshape", {{"x", chain.front()->input1("x")}, {"shape", last->input1("shape")}},
             old_out->name());
    pass_util::replace_var(old_out, merged);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) (*it)->parent()->erase(*it);
    changed = true;
  }
  return changed;
}

class MergeConsecutiveReshapes : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::merge_consecutive_reshapes", {});
    bool changed = false;
    bool nested = false;                                        // a change in a nested block
    if (!pass_util::has_op_type(p, {"reshape"})) return false;  // nothing to match
    for (auto& [name, f] : p.functions()) {
      Builder b(*f);
      while (merge_block(b, f->body(), nested)) changed = true;
    }
    return changed || nested;
  }
};

}  // namespace

/// Registers common::merge_consecutive_reshapes.
void register_merge_consecutive_reshapes(PassRegistry& r) {
  r.add("common::merge_consecutive_reshapes",
        [] { return std::make_unique<MergeConsecutiveReshapes>(); });
}

}  // namespace milkit
