// common::dequantize_quantize_pair_elimination: dequantize -> quantize with the same scale, zero
// point and axis is a no-op; the quantize's readers read the dequantize's input instead, and the
// dequantize goes when nothing else reads it, as in coremltools. A dequantize whose output is an
// output of its block is left alone. Nested blocks first, each repeated until nothing changes.
//
// Beyond coremltools: the quantize's output must also have the dequantize input's type (a
// quantize to another dtype is not a no-op), and a pair whose quantize output is a function output
// that would have to rename a function input is left alone (coremltools' replacement refuses it).
#include <algorithm>

#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

// The known values of two optional inputs agree (both absent, or equal after broadcasting a size-1
// side), like coremltools' np.any(a != b).
bool same_param(const Operation* a, const Operation* b, const char* name) {
  Var* x = a->input1(name);
  Var* y = b->input1(name);
  if (!x || !y) return !x && !y;
  if (!x->has_value() || !y->has_value()) return false;
  std::vector<double> u = x->value()->to_doubles(), v = y->value()->to_doubles();
  if (u.size() != v.size() && u.size() != 1 && v.size() != 1) return false;
  size_t n = std::max(u.size(), v.size());
  for (size_t i = 0; i < n; ++i)
    if (u[u.size() == 1 ? 0 : i] != v[v.size() == 1 ? 0 : i]) return false;
  return true;
}

bool try_eliminate(Operation* dq) {
  Var* out = dq->output(0);
  Block* blk = dq->parent();
  const auto& bo = blk->outputs();
  if (std::find(bo.begin(), bo.end(), out) != bo.end()) return false;
  Var* src = dq->input1("input");
  bool removed = false;
  std::vector<Operation*> readers;
  for (const Use& u : out->uses()) readers.push_back(u.op);
  for (Operation* q : readers) {
    if (q->erased() || q->op_type() != "quantize" || q->input1("input") != out) continue;
    if (!same_param(dq, q, "scale") || !same_param(dq, q, "zero_point") ||
        !same_param(dq, q, "axis"))
      continue;
    Var* qo = q->output(0);
    if (qo->type() != src->type()) continue;
    if (pass_util::is_function_output(qo) && pass_util::is_function_input(src) &&
        src->name() != qo->name())
      continue;
    pass_util::replace_var(qo, src);
    q->parent()->erase(q);
    removed = true;
  }
  if (removed && !out->used()) blk->erase(dq);
  return removed;
}

// Returns whether it removed a pair.
bool eliminate_block(Block& b) {
  bool any = false;
  bool changed = true;
  while (changed) {
    changed = false;
    for (Operation* op : b.ops()) {
      if (op->erased()) continue;
      for (Block* nb : op->blocks()) any = eliminate_block(*nb) || any;
      if (op->op_type() == "dequantize" && try_eliminate(op)) changed = true;
    }
    any = any || changed;
  }
  return any;
}

class DequantizeQuantizePairElimination : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::dequantize_quantize_pair_elimination", {});
    bool changed = false;
    if (!pass_util::has_op_type(p, {"dequantize"})) return false;  // nothing to match
    for (auto& [name, f] : p.functions()) changed = eliminate_block(f->body()) || changed;
    return changed;
  }
};

}  // namespace

/// Registers common::dequantize_quantize_pair_elimination.
void register_dequantize_quantize_pair_elimination(PassRegistry& r) {
  r.add("common::dequantize_quantize_pair_elimination",
        [] { return std::make_unique<DequantizeQuantizePairElimination>(); });
}

}  // namespace milkit
