// mil_backend::sanitize_name_strings: makes every var and op name match [A-Za-z_][A-Za-z0-9_]*,
// as coremltools does (NameSanitizer with prefixes "var_" and "op_", one pair per function).
// Order: block inputs, then per op its nested blocks (recursively) and its outputs, then the op
// names of the block. Like coremltools, nothing happens unless the program has a "main" function.
#include "milkit/passes/names.h"
#include "milkit/passes/pass.h"

namespace milkit {

namespace {

// Returns whether it renamed `obj`.
template <class T>
bool sanitize_name(T* obj, pass_util::NameSanitizer& names, std::string& scratch) {
  // a kept name is not renamed later in the pass: the sanitizer may keep a view of it
  if (!names.sanitize_changed(obj->name(), scratch, true)) return false;
  obj->set_name(std::move(scratch));
  return true;
}

// Returns whether it renamed anything.
bool sanitize_block(Block& b, pass_util::NameSanitizer& vars, pass_util::NameSanitizer& ops) {
  std::string scratch;
  bool changed = false;
  for (Var* v : b.inputs()) changed = sanitize_name(v, vars, scratch) || changed;
  for (Operation* op = b.front(); op; op = op->next()) {
    for (Block* nb : op->blocks()) changed = sanitize_block(*nb, vars, ops) || changed;
    for (Var* v : op->outputs()) changed = sanitize_name(v, vars, scratch) || changed;
  }
  for (Operation* op = b.front(); op; op = op->next())
    changed = sanitize_name(op, ops, scratch) || changed;
  return changed;
}

class SanitizeNameStrings : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "mil_backend::sanitize_name_strings", {});
    bool changed = false;
    if (!p.function("main")) return false;
    for (auto& [name, f] : p.functions()) {
      pass_util::NameSanitizer vars("var_"), ops("op_");
      vars.reserve(f->num_ops() + f->inputs().size());
      ops.reserve(f->num_ops());
      changed = sanitize_block(f->body(), vars, ops) || changed;
    }
    return changed;
  }
};

}  // namespace

/// Registers mil_backend::sanitize_name_strings.
void register_sanitize_name_strings(PassRegistry& r) {
  r.add("mil_backend::sanitize_name_strings",
        [] { return std::make_unique<SanitizeNameStrings>(); });
}

}  // namespace milkit
