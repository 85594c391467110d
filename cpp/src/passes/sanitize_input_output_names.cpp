// common::sanitize_input_output_names: coremltools' NameSanitizer ("var_" prefix) applied to the
// inputs of the "main" function, then to the main body's op outputs that are function outputs (in
// op order). Other names are left alone.
#include "milkit/passes/names.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

class SanitizeInputOutputNames : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::sanitize_input_output_names", {});
    bool changed = false;
    Function* f = p.function("main");
    if (!f) return false;
    pass_util::NameSanitizer vars("var_");
    std::string fresh;
    for (Var* v : f->inputs())
      if (vars.sanitize_changed(v->name(), fresh)) {
        v->set_name(fresh);
        changed = true;
      }
    for (Operation* op : f->body().ops())
      for (Var* v : op->outputs())
        if (pass_util::is_function_output(v) && vars.sanitize_changed(v->name(), fresh)) {
          v->set_name(fresh);
          changed = true;
        }
    return changed;
  }
};

}  // namespace

/// Registers common::sanitize_input_output_names.
void register_sanitize_input_output_names(PassRegistry& r) {
  r.add("common::sanitize_input_output_names",
        [] { return std::make_unique<SanitizeInputOutputNames>(); });
}

}  // namespace milkit
