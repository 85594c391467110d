// Activation calibration from Python (milkit.optimize.coreml.linear_quantize_activations).
#include "milkit/exec/calibrate.h"

#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common.h"
#include "milkit/types/error.h"

namespace milkit::py_bind {

namespace {

/// A copy of a numpy array as a tensor (numeric dtypes numpy and the interpreter share).
Tensor tensor_copy(const std::string& name, py::handle obj) {
  py::array a = py::array::ensure(obj, py::array::c_style);
  if (!a) throw ValueError("sample input '" + name + "' is not convertible to a numpy array");
  const char kind = a.dtype().kind();
  const auto size = a.dtype().itemsize();
  std::optional<DataType> dt;
  if (kind == 'f')
    dt = size == 2 ? DataType::Float16 : size == 4 ? DataType::Float32 : DataType::Float64;
  if (kind == 'i')
    dt = size == 1   ? DataType::Int8
         : size == 2 ? DataType::Int16
         : size == 4 ? DataType::Int32
                     : DataType::Int64;
  if (kind == 'u')
    dt = size == 1   ? DataType::UInt8
         : size == 2 ? DataType::UInt16
         : size == 4 ? DataType::UInt32
                     : DataType::UInt64;
  if (kind == 'b') dt = DataType::Bool;
  if (!dt)
    throw ValueError("sample input '" + name + "' has unsupported dtype " +
                     py::str(a.dtype()).cast<std::string>());
  std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
  Tensor t = Tensor::empty(*dt, shape);
  if (t.nbytes()) std::memcpy(t.mutable_bytes(), a.data(), t.nbytes());
  return t;
}

}  // namespace

void init_calibrate(py::module_& m) {
  m.def(
      "calibrate_activations",
      [](std::shared_ptr<Function> fn, py::list samples, int64_t group_size) {
        std::vector<std::map<std::string, Tensor>> in;
        for (py::handle s : samples) {
          std::map<std::string, Tensor> one;
          for (auto kv : py::reinterpret_borrow<py::dict>(s)) {
            std::string name = py::str(kv.first).cast<std::string>();
            one.emplace(name, tensor_copy(name, kv.second));
          }
          in.push_back(std::move(one));
        }
        std::map<std::string, calibration::Range> stats;
        {
          py::gil_scoped_release nogil;
          stats = calibration::calibrate(fn, in, group_size);
        }
        py::dict r;
        for (const auto& [name, range] : stats)
          r[py::str(name)] = py::make_tuple(range.min, range.max);
        return r;
      },
      py::arg("function"), py::arg("samples"), py::arg("group_size") = -1,
      "Runs each sample (a dict input name -> array) through the function with the interpreter; "
      "returns "
      "{var name: (min, max)} over all samples for the vars coremltools calibrates, the inputs and "
      "the "
      "function outputs ops compute; concat groups share one range.");
  m.def(
      "calibrated_vars",
      [](std::shared_ptr<Function> fn) {
        std::vector<std::string> r;
        for (const Var* v : calibration::calibrated_vars(*fn)) r.push_back(v->name());
        return r;
      },
      py::arg("function"), "Names of the vars coremltools' calibration records, in program order.");
  m.def(
      "concat_groups", [](std::shared_ptr<Function> fn) { return calibration::concat_groups(*fn); },
      py::arg("function"),
      "The groups of var names that share one calibrated range (concat inputs and output).");
}

}  // namespace milkit::py_bind
