// mil_backend::fuse_activation_silu: x * sigmoid(x) -> silu(x), as coremltools does. The sigmoid's
// output must not be a block output and must have exactly one user, a mul whose two inputs are
// (by name) the sigmoid's input and output. The silu, named after the mul's output, goes before
// the sigmoid; both old ops are removed. Ops with nested blocks are not matched; their blocks are
// rewritten until stable first. Repeated until nothing changes.
#include <set>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

using pass_util::is_block_output;

Operation* match(Operation* op) {
  if (op->op_type() != "sigmoid") return nullptr;
  Var* s = op->output(0);
  if (is_block_output(s, op->parent()) || s->uses().size() != 1) return nullptr;
  Operation* mul = s->uses()[0].op;
  if (mul->op_type() != "mul") return nullptr;
  std::set<std::string> actual = {mul->input1("x")->name(), mul->input1("y")->name()};
  std::set<std::string> expect = {op->input1("x")->name(), s->name()};
  return actual == expect ? mul : nullptr;
}

class FuseActivationSilu : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "mil_backend::fuse_activation_silu", {});
    bool changed = false;
    if (!pass_util::has_op_type(p, {"sigmoid"})) return false;  // nothing to match
    for (auto& [name, f] : p.functions()) {
      changed = pass_util::fuse_unary_chains(*f, match, "silu") || changed;
    }
    return changed;
  }
};

}  // namespace

/// Registers mil_backend::fuse_activation_silu.
void register_fuse_activation_silu(PassRegistry& r) {
  r.add("mil_backend::fuse_activation_silu", [] { return std::make_unique<FuseActivationSilu>(); });
}

}  // namespace milkit
