// common::dead_code_elimination: removes ops whose outputs do not reach a block output.
#include "milkit/passes/pass.h"

namespace milkit {

namespace {

void dce_block(Block& b) {
  // reverse order: erasing an op frees its inputs, which are earlier in the block
  for (Operation* op = b.back(); op;) {
    Operation* prev = op->prev();
    for (Block* nb : op->blocks()) dce_block(*nb);
    bool used = pass_util::has_side_effects(*op);
    if (op->num_outputs() == 1)  // output(0) is beside the links: no read of the outputs array
      used = used || op->output(0)->used();
    else
      for (Var* v : op->outputs()) used = used || v->used();
    if (!used) b.erase(op);
    op = prev;
  }
}

class DeadCodeElimination : public Pass {
 public:
  void run(Program& p, const PassOptions&) override {
    for (auto& [name, f] : p.functions()) dce_block(f->body());
  }
};

}  // namespace

/// Registers common::dead_code_elimination.
void register_dead_code_elimination(PassRegistry& r) {
  r.add("common::dead_code_elimination", [] { return std::make_unique<DeadCodeElimination>(); });
}

}  // namespace milkit
