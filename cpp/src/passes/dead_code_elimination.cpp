// common::dead_code_elimination: removes ops whose outputs do not reach a block output.
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

// Returns whether it removed an op.
bool dce_block(Block& b) {
  bool changed = false;
  // reverse order: erasing an op frees its inputs, which are earlier in the block
  for (Operation* op = b.back(); op;) {
    Operation* prev = op->prev();
    for (Block* nb : op->blocks()) changed = dce_block(*nb) || changed;
    bool used = pass_util::has_side_effects(*op);
    if (op->num_outputs() == 1)  // output(0) is beside the links: no read of the outputs array
      used = used || op->output(0)->used();
    else
      for (Var* v : op->outputs()) used = used || v->used();
    if (!used) {
      b.erase(op);
      changed = true;
    }
    op = prev;
  }
  return changed;
}

class DeadCodeElimination : public Pass {
 public:
  bool run(Program& p, const PassOptions&) override {
    bool changed = false;
    for (auto& [name, f] : p.functions()) changed = dce_block(f->body()) || changed;
    return changed;
  }
};

}  // namespace

/// Registers common::dead_code_elimination.
void register_dead_code_elimination(PassRegistry& r) {
  r.add(
      "common::dead_code_elimination", [] { return std::make_unique<DeadCodeElimination>(); },
      PassTraits{/*skip_rerun_when_unchanged=*/true});
}

}  // namespace milkit
