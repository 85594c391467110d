// common::dedup_op_and_var_names: makes op names and var names unique per function, appending
// "_1", "_2", ... like coremltools; function inputs and outputs keep their names.
#include <unordered_set>

#include "milkit/passes/pass.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

std::string fresh(std::unordered_set<std::string>& seen, const std::string& n) {
  if (!seen.count(n)) return n;
  for (int i = 1;; ++i) {
    std::string c = n + "_" + std::to_string(i);
    if (!seen.count(c)) return c;
  }
}

void dedup_block(Block& b, bool is_function, const std::unordered_set<const Var*>& fouts,
                 std::unordered_set<std::string>& vars, std::unordered_set<std::string>& ops) {
  if (!is_function)
    for (Var* v : b.inputs()) {
      v->set_name(fresh(vars, v->name()));
      vars.insert(v->name());
    }
  for (Operation* op : b.ops()) {
    for (Block* nb : op->blocks()) dedup_block(*nb, false, fouts, vars, ops);
    op->set_name(fresh(ops, op->name()));
    ops.insert(op->name());
    for (Var* v : op->outputs()) {
      if (fouts.count(v)) continue;
      v->set_name(fresh(vars, v->name()));
      vars.insert(v->name());
    }
  }
}

class DedupNames : public Pass {
 public:
  void run(Program& p, const PassOptions&) override {
    for (auto& [name, f] : p.functions()) {
      std::unordered_set<std::string> vars, ops;
      std::unordered_set<const Var*> fouts(f->body().outputs().begin(), f->body().outputs().end());
      for (Var* v : f->inputs()) {
        if (!vars.insert(v->name()).second)
          throw ValueError("function '" + name + "': input name '" + v->name() + "' is used twice");
      }
      std::unordered_set<const Var*> seen_out;
      for (Var* v : f->body().outputs()) {
        if (v->input_of() || !seen_out.insert(v).second) continue;
        if (!vars.insert(v->name()).second)
          throw ValueError("function '" + name + "': var name '" + v->name() +
                           "' is used both as an input and an output");
      }
      dedup_block(f->body(), true, fouts, vars, ops);
    }
  }
};

}  // namespace

/// Registers common::dedup_op_and_var_names.
void register_dedup_op_and_var_names(PassRegistry& r) {
  r.add("common::dedup_op_and_var_names", [] { return std::make_unique<DedupNames>(); });
}

}  // namespace milkit
