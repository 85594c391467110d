// Python bindings of the serialization layer: .mlpackage writing and reading.
#include "common.h"

#include "milkit/serde/mlpackage.h"
#include "milkit/serde/model_description.h"
#include "milkit/serde/multifunction.h"
#include "milkit/serde/proto_reader.h"
#include "milkit/types/error.h"
#include "milkit/types/target.h"

namespace milkit::py_bind {

void init_serde(py::module_& m) {
  m.def(
      "save_mlpackage",
      [](std::shared_ptr<Program> p, const std::string& path, std::optional<int> target, bool sync,
         std::map<std::string, std::pair<std::vector<std::vector<int64_t>>, std::vector<int64_t>>> enumerated,
         std::optional<py::bytes> description, bool build_info) {
        PackageOptions o;
        if (description) o.description = std::string(*description);
        o.build_info = build_info;
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
      py::arg("description") = py::none(), py::arg("build_info") = true,
      "Writes a program as an .mlpackage (atomically). `target` is a specification version; "
      "`enumerated_shapes` maps input names to (shapes, default shape); `description` is a "
      "serialized ModelDescription written as is; `build_info` writes the buildInfo attribute.");
  m.def(
      "multifunction_description",
      [](const std::vector<std::tuple<py::bytes, std::string, std::string>>& fns, const std::string& default_name) {
        std::vector<FunctionSource> src;
        for (const auto& [b, s, t] : fns) src.push_back({std::string(b), s, t});
        return py::bytes(multifunction_description(src, default_name));
      },
      py::arg("functions"), py::arg("default_function_name"),
      "The serialized ModelDescription of a multifunction package from (model bytes, source "
      "function, target function) triples.");
  m.def(
      "blob_references",
      [](py::bytes b, const std::string& source) {
        py::list out;
        for (const BlobReference& r : blob_references(std::string(b), source))
          out.append(py::make_tuple(r.function, r.op, r.attribute, r.file, r.offset));
        return out;
      },
      py::arg("model_bytes"), py::arg("source") = "model.mlmodel",
      "(function, op, attribute, file, offset) of every op attribute stored in a weight file.");
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
