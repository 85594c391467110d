// common::dedup_op_and_var_names: makes op names and var names unique per function, appending
// "_1", "_2", ... like coremltools; function inputs and outputs keep their names.
#include <unordered_set>

#include "milkit/passes/names.h"
#include "milkit/passes/pass.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

// Keeps `n` if unused (the common case: one hash, no copy of the name), else renames to the
// first free "<n>_<i>".
// (a kept name is not renamed later in the pass, so the set keeps a view of it)
// Returns whether it renamed `obj`.
template <class T>
bool claim(pass_util::NameSet& seen, T* obj) {
  if (seen.insert_view(obj->name())) return false;
  for (int i = 1;; ++i) {
    std::string c = obj->name() + "_" + std::to_string(i);
    if (seen.insert(c)) {
      obj->set_name(std::move(c));
      return true;
    }
  }
}

// Returns whether it renamed anything.
bool dedup_block(Block& b, bool is_function, const std::unordered_set<const Var*>& fouts,
                 pass_util::NameSet& vars, pass_util::NameSet& ops) {
  bool changed = false;
  if (!is_function)
    for (Var* v : b.inputs()) changed = claim(vars, v) || changed;
  for (Operation* op = b.front(); op; op = op->next()) {
    for (Block* nb : op->blocks()) changed = dedup_block(*nb, false, fouts, vars, ops) || changed;
    changed = claim(ops, op) || changed;
    for (Var* v : op->outputs())
      if (!fouts.count(v)) changed = claim(vars, v) || changed;
  }
  return changed;
}

class DedupNames : public Pass {
 public:
  bool run(Program& p, const PassOptions&) override {
    bool changed = false;
    for (auto& [name, f] : p.functions()) {
      pass_util::NameSet vars, ops;
      size_t n = f->num_ops();
      vars.reserve(n + n / 4 + f->inputs().size() + 16);  // mostly one output per op
      ops.reserve(n + 16);
      std::unordered_set<const Var*> fouts(f->body().outputs().begin(), f->body().outputs().end());
      for (Var* v : f->inputs()) {
        if (!vars.insert(v->name()))
          throw ValueError("function '" + name + "': input name '" + v->name() + "' is used twice");
      }
      std::unordered_set<const Var*> seen_out;
      for (Var* v : f->body().outputs()) {
        if (v->input_of() || !seen_out.insert(v).second) continue;
        if (!vars.insert(v->name()))
          throw ValueError("function '" + name + "': var name '" + v->name() +
                           "' is used both as an input and an output");
      }
      changed = dedup_block(f->body(), true, fouts, vars, ops) || changed;
    }
    return changed;
  }
};

}  // namespace

/// Registers common::dedup_op_and_var_names.
void register_dedup_op_and_var_names(PassRegistry& r) {
  r.add(
      "common::dedup_op_and_var_names", [] { return std::make_unique<DedupNames>(); },
      PassTraits{/*skip_rerun_when_unchanged=*/true});
}

}  // namespace milkit
