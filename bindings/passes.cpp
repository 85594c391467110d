// Graph passes from Python.
#include "common.h"
#include "milkit/passes/compression.h"
#include "milkit/passes/const_sharing.h"
#include "milkit/passes/pass.h"

namespace milkit::py_bind {

void init_passes(py::module_& m) {
  m.def("pass_names", [] { return PassRegistry::instance().names(); });
  m.def(
      "share_consts_across_functions",
      [](Program& p) {
        std::vector<std::vector<SharedConst>> groups;
        {
          py::gil_scoped_release release;
          groups = share_consts_across_functions(p);
        }
        py::list out;
        for (const auto& g : groups) {
          py::list l;
          for (const SharedConst& c : g) l.append(py::make_tuple(c.function, c.op));
          out.append(l);
        }
        return out;
      },
      py::arg("program"),
      "Makes equal consts of the program's functions share one value (written once); returns the "
      "groups of two or more as lists of (function, const op name).");
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
  // custom LUT functions are Python callables, run here with the GIL held
  compression::set_lut_function_hook([](int64_t id, const std::vector<float>& data,
                                        const std::vector<int64_t>& shape, DataType dtype, int64_t axis,
                                        int64_t group, int64_t cluster_dim) {
    py::gil_scoped_acquire gil;
    std::vector<py::ssize_t> dims(shape.begin(), shape.end());
    py::array_t<float> arr(dims);
    std::copy(data.begin(), data.end(), arr.mutable_data());
    py::object w = dtype == DataType::Float16 ? arr.attr("astype")("float16") : py::object(arr);
    py::tuple r = py::module_::import("milkit.optimize.coreml._post_training_quantization")
                      .attr("_custom_lut")(id, w, axis, group, cluster_dim);
    compression::CustomLut out;
    out.nbits = r[0].cast<int>();
    auto lut = py::array_t<float, py::array::c_style | py::array::forcecast>(r[1]);
    out.lut.assign(lut.data(), lut.data() + lut.size());
    for (py::ssize_t d = 0; d < lut.ndim(); ++d) out.lut_shape.push_back(lut.shape(d));
    auto idx = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>(r[2]);
    out.indices.assign(idx.data(), idx.data() + idx.size());
    for (py::ssize_t d = 0; d < idx.ndim(); ++d) out.indices_shape.push_back(idx.shape(d));
    out.vector_axis = r[3].is_none() ? -1 : r[3].cast<int>();
    return out;
  });
  m.def("take_compression_warnings", &compression::take_warnings,
        "The warnings the compression passes recorded since the last call (weights skipped).");
}

}  // namespace milkit::py_bind
