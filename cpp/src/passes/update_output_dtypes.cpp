// common::update_output_dtypes: in coremltools, casts each function output to the dtype the user
// asked for in convert(outputs=[...]) (Function.output_types), renaming the old output
// "<name>_type_<dtype>" and giving its name to a new cast. A function without user output types
// is left unchanged. milkit functions carry no user output types (the IR has no
// Function.output_types, and milkit's convert() only takes output names from `outputs`), so for
// every milkit program this pass leaves the program unchanged, exactly like coremltools on a
// program whose functions have no output_types.
#include "milkit/passes/pass.h"

namespace milkit {

namespace {

class UpdateOutputDtypes : public Pass {
 public:
  bool run(Program&, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::update_output_dtypes", {});
    return false;  // no milkit function carries user output types (see above)
  }
};

}  // namespace

/// Registers common::update_output_dtypes.
void register_update_output_dtypes(PassRegistry& r) {
  r.add("common::update_output_dtypes", [] { return std::make_unique<UpdateOutputDtypes>(); });
}

}  // namespace milkit
