// Python bindings of the importers: ONNX ModelProto (bytes or file) to a Program.
#include "common.h"

#include "milkit/frontends/onnx.h"
#include "milkit/types/error.h"

namespace milkit::py_bind {

namespace {

py::dict info_dict(const OnnxImportInfo& i) {
  py::dict d;
  d["ir_version"] = i.ir_version;
  d["opset"] = i.opset;
  d["input_names"] = i.input_names;
  d["input_types"] = i.input_types;
  d["output_names"] = i.output_names;
  d["output_types"] = i.output_types;
  d["metadata"] = i.metadata;
  return d;
}

OnnxImportOptions options(int target, const std::string& base_dir, const std::string& source,
                          std::map<std::string, std::vector<int64_t>> dims) {
  OnnxImportOptions o;
  o.input_dims = std::move(dims);
  auto t = target_from_spec(target);
  if (!t) throw ValueError("unknown deployment target (specification version " + std::to_string(target) + ")");
  o.target = *t;
  o.base_dir = base_dir;
  o.source = source;
  return o;
}

}  // namespace

void init_frontends(py::module_& m) {
  m.def(
      "import_onnx_bytes",
      [](py::buffer data, int target, const std::string& base_dir, const std::string& source,
         std::map<std::string, std::vector<int64_t>> dims) {
        py::buffer_info b = data.request();
        OnnxImportInfo info;
        std::shared_ptr<Program> p;
        {
          py::gil_scoped_release release;
          p = import_onnx(b.ptr, static_cast<size_t>(b.size * b.itemsize), options(target, base_dir, source, dims), &info);
        }
        return py::make_tuple(p, info_dict(info));
      },
      py::arg("data"), py::arg("target"), py::arg("base_dir") = "", py::arg("source") = "<ModelProto>",
      py::arg("input_dims") = std::map<std::string, std::vector<int64_t>>{},
      "Imports a serialized ONNX ModelProto; returns (program, info). `input_dims` fixes input dims "
      "(name -> dims, -1 keeps the model's).");
  m.def(
      "import_onnx_file",
      [](const std::string& path, int target, std::map<std::string, std::vector<int64_t>> dims) {
        OnnxImportInfo info;
        std::shared_ptr<Program> p;
        {
          py::gil_scoped_release release;
          p = import_onnx_file(path, options(target, "", "<ModelProto>", dims), &info);
        }
        return py::make_tuple(p, info_dict(info));
      },
      py::arg("path"), py::arg("target"), py::arg("input_dims") = std::map<std::string, std::vector<int64_t>>{},
      "Imports an .onnx file (external data beside it); returns (program, info).");
  m.def("onnx_supported_ops", &onnx_supported_ops, "The ONNX operators (default domain) milkit converts.");
}

}  // namespace milkit::py_bind
