// common::loop_invariant_elimination: in coremltools, removes while_loop loop vars that the body
// returns unchanged (or replaces by a var from outside the loop), reading the outer var instead and
// keeping returned names with identity ops. milkit has no while_loop op (no schema, so no program
// can contain one), and the pass touches nothing else: for every milkit program it is a correct
// no-op. It still walks every block and fails loudly should a while_loop ever appear, so adding
// the op cannot silently skip the rewrite.
#include "milkit/passes/pass.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

class LoopInvariantElimination : public Pass {
 public:
  void run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::loop_invariant_elimination", {});
    for (auto& [name, f] : p.functions())
      pass_util::for_each_block(*f, [](Block& b) {
        for (Operation* op = b.front(); op; op = op->next())
          if (op->op_type() == "while_loop")
            throw ValueError("common::loop_invariant_elimination does not handle while_loop " +
                             op->describe() + " yet");
      });
  }
};

}  // namespace

/// Registers common::loop_invariant_elimination.
void register_loop_invariant_elimination(PassRegistry& r) {
  r.add("common::loop_invariant_elimination",
        [] { return std::make_unique<LoopInvariantElimination>(); });
}

}  // namespace milkit
