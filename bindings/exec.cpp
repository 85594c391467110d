// The interpreter from Python: plans, runs (GIL released), states, thread count.
#include <cstring>

#include "common.h"
#include "milkit/exec/plan.h"
#include "milkit/exec/threads.h"
#include "milkit/types/error.h"

namespace milkit::py_bind {

namespace {

std::optional<DataType> dtype_of_numpy(const py::dtype& d) {
  char kind = d.kind();
  int size = static_cast<int>(d.itemsize());
  if (kind == 'b') return DataType::Bool;
  if (kind == 'f') {
    if (size == 2) return DataType::Float16;
    if (size == 4) return DataType::Float32;
    if (size == 8) return DataType::Float64;
  }
  if (kind == 'i') {
    if (size == 1) return DataType::Int8;
    if (size == 2) return DataType::Int16;
    if (size == 4) return DataType::Int32;
    if (size == 8) return DataType::Int64;
  }
  if (kind == 'u') {
    if (size == 1) return DataType::UInt8;
    if (size == 2) return DataType::UInt16;
    if (size == 4) return DataType::UInt32;
    if (size == 8) return DataType::UInt64;
  }
  return std::nullopt;
}

const char* numpy_name(DataType dt) {
  switch (dt) {
    case DataType::Bool: return "bool";
    case DataType::Float16: return "float16";
    case DataType::Float32: return "float32";
    case DataType::Float64: return "float64";
    case DataType::Int8: return "int8";
    case DataType::Int16: return "int16";
    case DataType::Int32: return "int32";
    case DataType::Int64: return "int64";
    case DataType::UInt8: return "uint8";
    case DataType::UInt16: return "uint16";
    case DataType::UInt32: return "uint32";
    case DataType::UInt64: return "uint64";
    default: return nullptr;
  }
}

/// A numpy array as a tensor, borrowing its memory (the array is kept alive; C order required).
Tensor tensor_from_numpy(const std::string& name, py::handle obj) {
  py::array a = py::array::ensure(obj, py::array::c_style);
  if (!a) throw ValueError("input '" + name + "' is not convertible to a numpy array");
  auto dt = dtype_of_numpy(a.dtype());
  if (!dt) throw ValueError("input '" + name + "' has unsupported dtype " + py::str(a.dtype()).cast<std::string>());
  std::vector<int64_t> shape(a.ndim());
  for (py::ssize_t i = 0; i < a.ndim(); ++i) shape[i] = a.shape(i);
  auto* keep = new py::object(a);
  std::shared_ptr<const void> owner(keep, [](const void* p) {
    py::gil_scoped_acquire g;
    delete static_cast<const py::object*>(p);
  });
  return Tensor::borrow(*dt, shape, a.data(), owner);
}

/// A tensor as a numpy array without copying (the array keeps the storage alive).
py::array tensor_to_numpy(const Tensor& t) {
  const char* n = numpy_name(t.dtype());
  if (!n) throw TypeError("cannot return a tensor of dtype " + std::string(dtype_name(t.dtype())) + " to numpy");
  py::dtype dt(n);
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  auto* holder = new std::shared_ptr<const void>(t.owner());
  py::capsule cap(holder, [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); });
  py::array a(dt, shape, {}, t.bytes(), cap);
  // results are read-only views of interpreter memory that may be shared (weights, states)
  py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return a;
}

/// A run's output as Python: a numpy array; a string tensor as str (rank 0) or an array of str;
/// a dictionary (classify's probabilities) as a dict of str / int -> float, as Core ML gives them.
py::object output_to_py(const Tensor& t) {
  if (t.is_dict()) {
    const Tensor& keys = t.dict_keys();
    const Tensor& vals = t.dict_values();
    py::dict d;
    for (int64_t i = 0; i < keys.numel(); ++i) {
      py::object k = keys.dtype() == DataType::String
                         ? py::object(py::str(keys.string_values()[static_cast<size_t>(i)]))
                         : py::object(py::int_(static_cast<long long>(keys.data<int64_t>()[i])));
      d[k] = py::float_(vals.get(i));
    }
    return d;
  }
  if (t.dtype() == DataType::String) {
    if (t.rank() == 0) return py::str(t.string_values().at(0));
    py::list l;
    for (const auto& s : t.string_values()) l.append(py::str(s));
    std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
    return py::module_::import("numpy").attr("array")(l).attr("reshape")(py::tuple(py::cast(shape)));
  }
  return tensor_to_numpy(t);
}

}  // namespace

void init_exec(py::module_& m) {
  py::class_<State, std::shared_ptr<State>>(m, "State", "The states of a stateful model (KV caches).")
      .def("names", &State::names, "State names.")
      .def("read_state", [](const State& s, const std::string& name) { return tensor_to_numpy(s.get(name)); },
           py::arg("name"), "A copy-free, read-only view of a state's value.")
      .def("write_state", [](State& s, const std::string& name, py::handle v) { s.set(name, tensor_from_numpy(name, v)); },
           py::arg("name"), py::arg("value"), "Sets a state's value (copied).");

  py::class_<Plan, std::shared_ptr<Plan>>(m, "Plan", "A function planned for the interpreter.")
      .def(py::init([](std::shared_ptr<Function> f, bool packed_weights) {
             py::gil_scoped_release nogil;
             return std::make_shared<Plan>(std::const_pointer_cast<const Function>(f), nullptr,
                                           packed_weights);
           }),
           py::arg("function"), py::arg("packed_weights") = true,
           "Plans a function; packed_weights=False decompresses every constexpr op when the plan "
           "is made "
           "(also MILKIT_DENSE_WEIGHTS=1).")
      .def(
          "run",
          [](const Plan& p, py::dict inputs, std::shared_ptr<State> state) {
            std::map<std::string, Tensor> in;
            for (auto kv : inputs) {
              std::string name = py::str(kv.first).cast<std::string>();
              in.emplace(name, tensor_from_numpy(name, kv.second));
            }
            std::vector<std::pair<std::string, Tensor>> out;
            {
              py::gil_scoped_release nogil;
              out = p.run(in, state.get());
              in.clear();
            }
            py::list r;
            for (auto& kv : out) r.append(py::make_tuple(kv.first, output_to_py(kv.second)));
            return r;
          },
          py::arg("inputs"), py::arg("state") = nullptr,
          "Runs the function; returns [(output name, array)] (a classifier's label is a str or "
          "int, its "
          "probabilities a dict).")
      .def("make_state", &Plan::make_state, "A zero-filled state object.")
      .def_property_readonly("input_names", &Plan::input_names)
      .def_property_readonly("has_states", &Plan::has_states)
      .def_property_readonly("last_peak_bytes", &Plan::last_peak_bytes)
      .def_property_readonly("const_bytes", &Plan::const_bytes)
      .def_property_readonly(
          "packed_weight_bytes", &Plan::packed_weight_bytes,
          "Bytes of the weights kept packed (indices, quantized data, masks, tables).")
      .def_property_readonly(
          "packed_weight_dense_bytes", &Plan::packed_weight_dense_bytes,
          "Bytes the weights kept packed would take decompressed, in their dtypes.")
      .def_property_readonly("packed_weight_count", &Plan::packed_weight_count,
                             "Number of weights kept packed.")
      .def_property_readonly("in_place_weight_count", &Plan::in_place_weight_count,
                             "Number of large fp16 weights read in place by fp32 kernels.")
      .def_property_readonly("in_place_weight_bytes", &Plan::in_place_weight_bytes,
                             "Bytes of the weights read in place, in their dtype.");

  m.def("num_threads", &num_threads, "Threads the interpreter's kernels use.");
  m.def("set_num_threads", &set_num_threads, py::arg("n"),
        "Sets the interpreter's thread count (0: the default, MILKIT_NUM_THREADS or every core).");
  m.def("weight_cache_bytes", &weight_cache_bytes,
        "Bytes of fp32 weight copies the process's weight cache holds (MILKIT_WEIGHT_CACHE_MB).");
  m.def("buffer_cache_bytes", &buffer_cache_bytes,
        "Bytes of freed tensor buffers kept for reuse (MILKIT_BUFFER_CACHE_MB).");
  m.def("gemm_kernel", &gemm_kernel,
        "The kernel of products by a weight of 5 rows or more: 'panels' (milkit's own) or 'blas'.");
  m.def("kernel_names", [] { return KernelRegistry::instance().names(); }, "Op types that have a kernel.");
}

}  // namespace milkit::py_bind
