// Python bindings of the importers: ONNX ModelProto (bytes or file) to a Program.
#include "common.h"

#include "milkit/frontends/onnx.h"
#include "milkit/frontends/pt2.h"
#include "milkit/frontends/torch.h"
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

py::dict torch_info_dict(const TorchImportInfo& i) {
  py::dict d;
  d["input_names"] = i.input_names;
  d["output_names"] = i.output_names;
  d["state_names"] = i.state_names;
  d["dialect"] = i.dialect;
  d["schema_version"] = py::make_tuple(i.schema_major, i.schema_minor);
  d["torch_version"] = i.torch_version;
  return d;
}

TorchImportOptions torch_options(int target, const std::string& source, std::map<std::string, std::vector<int64_t>> dims) {
  TorchImportOptions o;
  auto t = target_from_spec(target);
  if (!t) throw ValueError("unknown deployment target (specification version " + std::to_string(target) + ")");
  o.target = *t;
  o.source = source;
  o.input_dims = std::move(dims);
  return o;
}

// {fqn: (array, dtype name)} -> values borrowing the arrays' memory (contiguous, as torch stores it)
TorchTensors torch_tensors(const py::dict& d) {
  TorchTensors r;
  for (auto kv : d) {
    std::string name = kv.first.cast<std::string>();
    py::tuple tup = kv.second.cast<py::tuple>();
    py::array a = py::array::ensure(tup[0], py::array::c_style);
    if (!a) throw TypeError("weight '" + name + "' is not an array");
    std::string dn = tup[1].cast<std::string>();
    auto dt = dtype_from_name(dn);
    if (!dt) throw ValueError("weight '" + name + "' has unknown dtype '" + dn + "'");
    std::vector<int64_t> shape(static_cast<size_t>(a.ndim()));
    for (py::ssize_t i = 0; i < a.ndim(); ++i) shape[static_cast<size_t>(i)] = a.shape(i);
    int64_t numel = 1;
    for (auto s : shape) numel *= s;
    size_t nbytes = static_cast<size_t>(a.nbytes());
    if (nbytes != static_cast<size_t>(numel) * static_cast<size_t>(dtype_storage_bytes(*dt)))
      throw ValueError("weight '" + name + "' holds " + std::to_string(nbytes) + " bytes, its shape and dtype need " +
                       std::to_string(numel * dtype_storage_bytes(*dt)));
    auto* keep = new py::object(a);
    std::shared_ptr<const void> owner(keep, [](const void* p) {
      py::gil_scoped_acquire gil;
      delete static_cast<const py::object*>(p);
    });
    r[name] = std::make_shared<const Value>(*dt, shape, Buffer::borrow(a.data(), nbytes, std::move(owner)));
  }
  return r;
}

}  // namespace

void init_pt2_archive(py::module_& m);

void init_frontends(py::module_& m) {
  m.def(
      "import_torch_export",
      [](py::bytes text, py::dict weights, py::dict constants, int target, std::map<std::string, std::vector<int64_t>> dims,
         const std::string& source) {
        TorchTensors w = torch_tensors(weights), c = torch_tensors(constants);
        std::string s = text;
        TorchImportInfo info;
        std::shared_ptr<Program> p;
        {
          py::gil_scoped_release release;
          p = import_torch_export(s, w, c, torch_options(target, source, dims), &info);
        }
        return py::make_tuple(p, torch_info_dict(info));
      },
      py::arg("json"), py::arg("weights"), py::arg("constants"), py::arg("target"),
      py::arg("input_dims") = std::map<std::string, std::vector<int64_t>>{}, py::arg("source") = "<ExportedProgram>",
      "Imports a serialized ExportedProgram (JSON bytes) with its weights ({fqn: (array, dtype)}); returns (program, info).");
  m.def(
      "import_pt2_file",
      [](const std::string& path, int target, std::map<std::string, std::vector<int64_t>> dims) {
        TorchImportInfo info;
        std::shared_ptr<Program> p;
        {
          py::gil_scoped_release release;
          p = import_pt2_file(path, torch_options(target, "<ExportedProgram>", dims), &info);
        }
        return py::make_tuple(p, torch_info_dict(info));
      },
      py::arg("path"), py::arg("target"), py::arg("input_dims") = std::map<std::string, std::vector<int64_t>>{},
      "Imports a .pt2 archive (torch.export.save), its weights mapped in place; returns (program, info).");
  m.def("torch_supported_ops", &torch_supported_ops, "The ATen operators the torch.export importer converts.");
  m.def("torch_unsupported_ops", &torch_unsupported_ops,
        "The operators (or families) the torch.export importer does not convert, with the reason.");
  m.def("torch_unsupported_reason", &torch_unsupported_reason, py::arg("target"),
        "Why the torch.export importer cannot convert the operator of `target` (\"\" when none is on record).");
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
  init_pt2_archive(m);
}

// ---- .pt2 archives (for tests of the reader) ----------------------------------------------------

namespace {

void add_pt2_tensors(const std::unordered_map<std::string, Pt2Tensor>& tensors, py::dict& arrays, py::dict& is_param,
                     py::dict& borrowed, py::dict& dtypes) {
  for (const auto& [fqn, t] : tensors) {
    const Value& v = *t.value;
    // numpy has no bf16 / fp8: their bits, as uint16 / uint8, over the same buffer
    DataType as = v.dtype();
    if (as == DataType::BFloat16) as = DataType::UInt16;
    if (as == DataType::Float8E4M3FN || as == DataType::Float8E5M2) as = DataType::UInt8;
    auto view = std::make_shared<const Value>(as, v.shape(), v.buffer());
    arrays[py::str(fqn)] = value_to_py(view, nullptr);
    is_param[py::str(fqn)] = t.is_param;
    borrowed[py::str(fqn)] = v.buffer() && v.buffer()->borrowed();
    dtypes[py::str(fqn)] = std::string(dtype_name(v.dtype()));
  }
}

}  // namespace

void init_pt2_archive(py::module_& m) {
  m.def(
      "read_pt2_archive",
      [](const std::string& path) {
        Pt2Archive a;
        {
          py::gil_scoped_release release;
          a = read_pt2(path);
        }
        py::dict d, weights, constants, is_param, borrowed, dtypes;
        add_pt2_tensors(a.weights, weights, is_param, borrowed, dtypes);
        add_pt2_tensors(a.constants, constants, is_param, borrowed, dtypes);
        d["model_json"] = a.model_json;
        d["model_name"] = a.model_name;
        d["source"] = a.source;
        d["weights"] = weights;
        d["constants"] = constants;
        d["is_param"] = is_param;
        d["borrowed"] = borrowed;
        d["dtype"] = dtypes;
        return d;
      },
      py::arg("path"),
      "Reads a torch.export .pt2 archive (for tests): a dict with model_json, model_name, source, "
      "weights and constants ({fqn: read-only numpy array over milkit's buffer; bf16 as uint16 bits, "
      "fp8 as uint8}), is_param, borrowed (whether the buffer borrows the file's mapping or an inflated "
      "entry) and dtype ({fqn: milkit dtype name}).");
}

}  // namespace milkit::py_bind
