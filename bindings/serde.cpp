// Python bindings of the serialization layer: .mlpackage writing and reading.
#include "common.h"

#include "milkit/serde/mlpackage.h"
#include "milkit/serde/model_description.h"
#include "milkit/serde/proto_reader.h"
#include "milkit/types/error.h"
#include "milkit/types/target.h"

namespace milkit::py_bind {

void init_serde(py::module_& m) {
  m.def(
      "save_mlpackage",
      [](std::shared_ptr<Program> p, const std::string& path, std::optional<int> target, bool sync,
         std::map<std::string, std::pair<std::vector<std::vector<int64_t>>, std::vector<int64_t>>> enumerated) {
        PackageOptions o;
        for (auto& [name, sd] : enumerated) o.enumerated_shapes[name] = EnumeratedShapesSpec{sd.first, sd.second};
        if (target) {
          auto t = target_from_spec(*target);
          if (!t) throw ValueError("unknown deployment target (specification version " + std::to_string(*target) + ")");
          o.target = *t;
        }
        o.sync = sync;
        py::gil_scoped_release release;
        write_mlpackage(*p, o, path);
      },
      py::arg("program"), py::arg("path"), py::arg("target") = py::none(), py::arg("sync") = true,
      py::arg("enumerated_shapes") = std::map<std::string, std::pair<std::vector<std::vector<int64_t>>, std::vector<int64_t>>>{},
      "Writes a program as an .mlpackage (atomically). `target` is a specification version; "
      "`enumerated_shapes` maps input names to (shapes, default shape).");
  m.def(
      "load_mlpackage",
      [](const std::string& path, std::optional<int> minimum_target) {
        std::optional<Target> t;
        if (minimum_target) t = static_cast<Target>(*minimum_target);
        std::shared_ptr<Program> p;
        {
          py::gil_scoped_release release;
          p = read_mlpackage(path, t);
        }
        return p;
      },
      py::arg("path"), py::arg("minimum_target") = std::nullopt,
      "Reads an .mlpackage (or a model.mlmodel beside its weights folder); a model older than "
      "minimum_target (a milkit.target value) is read at that target.");
  m.def("default_package_target", [](std::shared_ptr<Program> p) {
    return static_cast<int>(default_package_target(*p));
  });
  m.def("enumerated_shapes", [](py::bytes b) { return read_enumerated_shapes(std::string(b)); }, py::arg("model_bytes"),
        "The enumerated shapes of each input of a serialized Model proto.");
  m.def("manifest_json", &manifest_json, py::arg("model_id"), py::arg("weights_id"));
  m.def(
      "model_description_json",
      [](py::bytes b, const std::string& source) { return model_description_json(std::string(b), source); },
      py::arg("model_bytes"), py::arg("source") = "model.mlmodel",
      "The ModelDescription (metadata, inputs, outputs, states, functions) of a serialized Model proto as JSON.");
}

}  // namespace milkit::py_bind
