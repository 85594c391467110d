// common::prefer_state_in_downstream: after `value -> coreml_update_state`, the ops that read
// `value` later read the update's output instead (reusing the state's memory), as coremltools
// does. For each coreml_update_state (nested blocks first, one sweep) whose value has another
// consumer that is not a coreml_update_state, and is not both an input and an output of the
// function, the uses of the value by ops after the update in its block (their nested blocks
// included) and by the outputs of that block and of those ops' nested blocks move to the update's
// output (which takes the name of a function output it replaces, as in coremltools, so two vars
// may share a name until dedup_op_and_var_names), unless that would drop a constexpr dependency.
#include <algorithm>
#include <vector>

#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"

namespace milkit {

namespace {

bool contains(const std::vector<Var*>& vs, const Var* v) {
  return std::find(vs.begin(), vs.end(), v) != vs.end();
}

bool apply_block(Block& blk) {
  bool changed = false;
  for (Operation* op : blk.ops()) {
    if (op->erased()) continue;
    for (Block* nb : op->blocks()) changed = apply_block(*nb) || changed;
    if (op->op_type() != "coreml_update_state") continue;
    Var* value = op->input1("value");
    if (!blk.parent_op() && contains(blk.outputs(), value) && contains(blk.inputs(), value))
      continue;
    bool other = false;
    for (const Use& u : value->uses())
      if (u.op != op && u.op->op_type() != "coreml_update_state") other = true;
    if (!other) continue;
    if (!pass_util::can_be_replaced(value, op->output(0))) continue;
    if (pass_util::replace_uses_after(op, value, op->output(0))) changed = true;
  }
  return changed;
}

class PreferStateInDownstream : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::prefer_state_in_downstream", {});
    bool changed = false;
    for (auto& [name, f] : p.functions())
      if (pass_util::has_op_type(*f, {"coreml_update_state"}))
        changed = apply_block(f->body()) || changed;
    return changed;
  }
};

}  // namespace

/// Registers common::prefer_state_in_downstream.
void register_prefer_state_in_downstream(PassRegistry& r) {
  r.add("common::prefer_state_in_downstream",
        [] { return std::make_unique<PreferStateInDownstream>(); });
}

}  // namespace milkit
