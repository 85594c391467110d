// nn_backend::handle_unused_inputs: every function input that no op reads (being returned does not
// count) gets an identity op "<input>_tmp" appended to the function body, as coremltools does.
#include "milkit/builder/builder.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

class HandleUnusedInputs : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "nn_backend::handle_unused_inputs", {});
    bool changed = false;
    for (auto& [name, f] : p.functions()) {
      std::vector<Var*> unused;
      for (Var* v : f->inputs())
        if (v->uses().empty()) unused.push_back(v);
      Builder b(*f);
      for (Var* v : unused) b.op("identity", {{"x", v}}, v->name() + "_tmp");
      changed = changed || !unused.empty();
    }
    return changed;
  }
};

}  // namespace

/// Registers nn_backend::handle_unused_inputs.
void register_handle_unused_inputs(PassRegistry& r) {
  r.add("nn_backend::handle_unused_inputs", [] { return std::make_unique<HandleUnusedInputs>(); });
}

}  // namespace milkit
