// Graph passes from Python.
#include "common.h"
#include "milkit/passes/compression.h"
#include "milkit/passes/pass.h"

namespace milkit::py_bind {

void init_passes(py::module_& m) {
  m.def("pass_names", [] { return PassRegistry::instance().names(); });
  m.def(
      "run_passes",
      [](Program& p, const std::vector<std::string>& names,
         const std::map<std::string, PassOptions>& options, bool verify_each, bool skip_unknown) {
        PassManager pm;
        for (auto& n : names) {
          auto it = options.find(n);
          pm.add(n, it == options.end() ? PassOptions{} : it->second);
        }
        // C++ only: other Python threads (a progress bar's clock) run meanwhile
        py::gil_scoped_release release;
        return pm.run(p, verify_each, skip_unknown);
      },
      py::arg("program"), py::arg("names"),
      py::arg("options") = std::map<std::string, PassOptions>{}, py::arg("verify_each") = false,
      py::arg("skip_unknown") = false,
      "Runs the named passes in order; returns the names skipped (skip_unknown=True).");
  m.def(
      "run_pass",
      [](Program& p, const std::string& name, const PassOptions& options) {
        std::unique_ptr<Pass> pass = PassRegistry::instance().create(name);
        py::gil_scoped_release release;
        return pass->run(p, options);
      },
      py::arg("program"), py::arg("name"), py::arg("options") = PassOptions{},
      "Runs one pass; returns whether it changed the program.");
  m.def("take_compression_warnings", &compression::take_warnings,
        "The warnings the compression passes recorded since the last call (weights skipped).");
}

}  // namespace milkit::py_bind
