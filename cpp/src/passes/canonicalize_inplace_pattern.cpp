// common::canonicalize_inplace_pattern: an in-place update `op -> coreml_update_state` gets the
// canonical order, the update right after the functional op, as coremltools does. For each op of a
// block (in the block's original order; nested blocks first; read_state and coreml_update_state
// ops themselves skipped), each coreml_update_state of the same block reading one of its outputs
// (in output, then use order) is rebuilt (same state and value, an automatic name) just after the
// op, after the ones rebuilt before it, and takes the old update's uses (a function output keeps
// its name) unless that would drop a constexpr dependency; the old update goes.
// coremltools inserts the new updates before the op that followed `op` when the pass started and
// raises (KeyError) when that op was an update already rebuilt and removed; milkit inserts them
// right after `op` (and each other) there too.
#include <string>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

bool apply_block(Builder& b, Block& blk) {
  bool changed = false;
  for (Operation* op : blk.ops()) {
    if (op->erased()) continue;
    for (Block* nb : op->blocks()) changed = apply_block(b, *nb) || changed;
    const std::string& t = op->op_type();
    if (t == "read_state" || t == "coreml_update_state") continue;
    std::vector<Operation*> updates;
    for (Var* out : op->outputs())
      for (const Use& u : out->uses())
        if (u.op->op_type() == "coreml_update_state" && u.op->parent() == &blk)
          updates.push_back(u.op);
    if (updates.empty()) continue;
    Operation* after = op;  // each new update goes after the previous one
    for (Operation* u : updates) {
      if (u->erased()) continue;
      b.set_insertion_point(&blk, after->next());
      b.set_location(u->location());
      Var* nu = b.op("coreml_update_state",
                     {{"state", u->input1("state")}, {"value", u->input1("value")}});
      after = nu->op();
      changed = true;  // the new update stays even when the old one cannot go
      if (!pass_util::can_be_replaced(u->output(0), nu)) continue;
      pass_util::replace_var(u->output(0), nu);
      blk.erase(u);
    }
  }
  return changed;
}

}  // namespace

/// Registers common::canonicalize_inplace_pattern.
void register_canonicalize_inplace_pattern(PassRegistry& r) {
  r.add("common::canonicalize_inplace_pattern",
        pass_util::block_pass("common::canonicalize_inplace_pattern", {"coreml_update_state"},
                              apply_block, pass_util::OpScan::Function));
}

}  // namespace milkit
