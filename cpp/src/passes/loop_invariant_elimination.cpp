// common::loop_invariant_elimination: removes the while_loop loop vars that the body returns
// unchanged; the blocks read the outer var instead, and the loop's output is replaced by it. As
// in coremltools, a while_loop that loses loop vars gets "_renamed" appended to its name, and an
// eliminated output that is an output of the enclosing block is kept by an identity op of its
// name placed before the loop.
//
// Deliberate difference: coremltools also treats a loop var as invariant when the body returns a
// var from outside the loop, which is wrong whenever that var differs from the loop var's initial
// value (after one iteration the loop var holds the outer var, but the rewritten loop reads the
// initial value). milkit eliminates such a loop var only when the outer var is the initial value
// itself.
#include <algorithm>
#include <tuple>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

std::vector<size_t> invariants(const Operation* op) {
  std::vector<size_t> r;
  const Block* body = op->blocks()[1];
  VarSpan lv = op->input("loop_vars");
  for (size_t i = 0; i < body->inputs().size() && i < body->outputs().size(); ++i) {
    const Var* in = body->inputs()[i];
    const Var* out = body->outputs()[i];
    if (out == in || out == lv[i]) r.push_back(i);
  }
  return r;
}

bool eliminate_block(Function& f, Block& b) {
  bool changed = false;
  std::vector<std::tuple<Var*, Var*, Operation*>> renames;
  for (Operation* op = b.front(); op; op = op->next()) {
    for (Block* nb : op->blocks()) changed = eliminate_block(f, *nb) || changed;
    if (op->op_type() != "while_loop" || op->blocks().size() != 2) continue;
    auto inv = invariants(op);
    for (size_t i : inv) renames.emplace_back(op->input("loop_vars")[i], op->output(i), op);
    if (!inv.empty()) {
      op->set_name(op->name() + "_renamed");
      changed = true;
    }
  }
  Builder bld(f);
  for (auto& [src, tgt, op] : renames) {
    if (!pass_util::is_block_output(tgt, &b)) continue;
    bld.set_insertion_point(&b, op);
    bld.set_location(op->location());
    Var* res = bld.op("identity", {{"x", src}}, tgt->name());
    tgt->replace_all_uses_with(res);
  }
  for (Operation* op = b.front(); op; op = op->next()) {
    if (op->op_type() != "while_loop" || op->blocks().size() != 2) continue;
    auto inv = invariants(op);
    if (inv.empty()) continue;
    std::vector<Var*> lv(op->input("loop_vars").begin(), op->input("loop_vars").end());
    Block* body = op->blocks()[1];
    // the body's outputs first, so the block inputs it returned become unused
    std::vector<Var*> outs;
    for (size_t i = 0; i < body->outputs().size(); ++i)
      if (std::find(inv.begin(), inv.end(), i) == inv.end()) outs.push_back(body->outputs()[i]);
    body->set_outputs(outs);
    // cond and body share their inputs when built by the builder; a loaded file may not
    for (Block* nb : op->blocks()) {
      for (size_t i : inv) nb->inputs()[i]->replace_all_uses_with(lv[i]);
      f.remove_block_inputs(nb, inv);
    }
    for (size_t i : inv) op->output(i)->replace_all_uses_with(lv[i]);
    f.remove_outputs(op, inv);
    f.remove_args(op, static_cast<size_t>(op->input_index("loop_vars")), inv);
  }
  return changed;
}

class LoopInvariantElimination : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::loop_invariant_elimination", {});
    bool changed = false;
    if (!pass_util::has_op_type(p, {"while_loop"})) return false;  // nothing to match
    for (auto& [name, f] : p.functions()) changed = eliminate_block(*f, f->body()) || changed;
    return changed;
  }
};

}  // namespace

/// Registers common::loop_invariant_elimination.
void register_loop_invariant_elimination(PassRegistry& r) {
  r.add("common::loop_invariant_elimination",
        [] { return std::make_unique<LoopInvariantElimination>(); });
}

}  // namespace milkit
