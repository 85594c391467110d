// Python <-> Value conversion with coremltools' const typing rules.
#include <climits>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "common.h"
#include "milkit/types/error.h"

using namespace pybind11::literals;

namespace milkit::py_bind {

namespace {

struct NumpyTypes {
  PyObject* generic = nullptr;
  PyObject* ndarray = nullptr;
  PyObject* f16 = nullptr;
  PyObject* f32 = nullptr;
  PyObject* i32 = nullptr;
  PyObject* boolean = nullptr;
};

NumpyTypes& np_types() {
  static NumpyTypes t = [] {
    NumpyTypes r;
    py::module_ np = py::module_::import("numpy");
    r.generic = py::object(np.attr("generic")).release().ptr();
    r.ndarray = py::object(np.attr("ndarray")).release().ptr();
    r.f16 = py::object(np.attr("float16")).release().ptr();
    r.f32 = py::object(np.attr("float32")).release().ptr();
    r.i32 = py::object(np.attr("int32")).release().ptr();
    r.boolean = py::object(np.attr("bool_")).release().ptr();
    return r;
  }();
  return t;
}

std::vector<int64_t> shape_of(const py::array& a) {
  std::vector<int64_t> s(a.ndim());
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s[i] = a.shape(i);
  return s;
}

std::optional<DataType> sub_byte_of(const py::dtype& d) {
  py::object md = d.attr("metadata");
  if (md.is_none()) return std::nullopt;
  py::dict mdd = md.cast<py::dict>();
  if (!mdd.contains("true_dtype")) return std::nullopt;
  py::object t = mdd["true_dtype"];
  std::string name;
  if (py::isinstance<py::str>(t))
    name = t.cast<std::string>();
  else if (py::hasattr(t, "name") && py::isinstance<py::str>(t.attr("name")))
    name = t.attr("name").cast<std::string>();
  else if (py::hasattr(t, "get_bitwidth") && py::hasattr(t, "is_unsigned"))
    // a coremltools builtin class (its __name__ is just "int" / "uint")
    name = std::string(t.attr("is_unsigned")().cast<bool>() ? "uint" : "int") +
           std::to_string(t.attr("get_bitwidth")().cast<int>());
  else if (py::hasattr(t, "__name__"))
    name = t.attr("__name__").cast<std::string>();
  auto dt = dtype_from_name(name);
  if (!dt || !is_sub_byte(*dt)) throw ValueError("unknown sub-byte dtype metadata '" + name + "'");
  return dt;
}

Value int32_clipped(const py::array& a) {
  // int64 / uint64 -> int32, clipped (coremltools' rule)
  py::array c = py::array::ensure(a, py::array::c_style);
  std::vector<int64_t> shape = shape_of(c);
  int64_t n = shape_numel(shape);
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * 4);
  bool is_unsigned = c.dtype().kind() == 'u';
  const uint8_t* src = static_cast<const uint8_t*>(c.data());
  for (int64_t i = 0; i < n; ++i) {
    int64_t v;
    if (is_unsigned) {
      uint64_t u;
      std::memcpy(&u, src + i * 8, 8);
      v = u > static_cast<uint64_t>(INT32_MAX) ? INT32_MAX : static_cast<int64_t>(u);
    } else {
      std::memcpy(&v, src + i * 8, 8);
    }
    int32_t w = v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : static_cast<int32_t>(v);
    std::memcpy(bytes.data() + i * 4, &w, 4);
  }
  return Value(DataType::Int32, shape, Buffer::take(std::move(bytes)));
}

Value from_array(py::array a, const What& what) {
  py::dtype d = a.dtype();
  char kind = d.kind();
  int size = static_cast<int>(d.itemsize());
  std::vector<int64_t> shape = shape_of(a);
  if (kind == 'U' || kind == 'S') {
    std::vector<std::string> strs;
    py::list flat = a.attr("ravel")().attr("tolist")();
    for (auto s : flat) strs.push_back(py::str(s).cast<std::string>());
    return Value::strings(shape, std::move(strs));
  }
  if (kind == 'O') {
    throw TypeError(what + ": cannot make a const from an object array (symbolic values or vars "
                           "inside a list?); feed symbolic shapes through mb.shape()");
  }
  DataType dt;
  if (kind == 'f') {
    if (size == 8) {
      py::array f = a.attr("astype")(np_types().f32 ? py::reinterpret_borrow<py::object>(np_types().f32) : py::str("float32"));
      return from_array(f, what);
    }
    if (size == 4) dt = DataType::Float32;
    else if (size == 2) dt = DataType::Float16;
    else throw TypeError(what + ": unsupported float dtype " + std::string(py::str(d)));
  } else if (kind == 'b') {
    dt = DataType::Bool;
  } else if (kind == 'i' || kind == 'u') {
    if (size == 8) return int32_clipped(a);
    bool s = kind == 'i';
    dt = size == 1 ? (s ? DataType::Int8 : DataType::UInt8)
       : size == 2 ? (s ? DataType::Int16 : DataType::UInt16)
                   : (s ? DataType::Int32 : DataType::UInt32);
    if (size == 1)
      if (auto sb = sub_byte_of(d)) dt = *sb;
  } else {
    throw TypeError(what + ": unsupported numpy dtype " + std::string(py::str(d)));
  }
  py::array c = py::array::ensure(a, py::array::c_style);
  if (!c) throw TypeError(what + ": cannot read the array");
  size_t nbytes = static_cast<size_t>(c.nbytes());
  // zero-copy: the buffer keeps the numpy array alive
  auto* keep = new py::object(c);
  std::shared_ptr<const void> owner(keep, [](const void* p) {
    py::gil_scoped_acquire gil;
    delete static_cast<const py::object*>(p);
  });
  return Value(dt, shape, Buffer::borrow(c.data(), nbytes, std::move(owner)));
}

}  // namespace

bool is_mil_list(py::handle o) {
  return std::string(Py_TYPE(o.ptr())->tp_name).find("mil_list") != std::string::npos && py::hasattr(o, "ls") &&
         PyList_Check(py::getattr(o, "ls").ptr());
}

Value list_value_from_py(py::handle seq, const What& what, bool ints_as_int64) {
  if (!PyList_Check(seq.ptr()) && !PyTuple_Check(seq.ptr()))
    throw TypeError(what + ": a list value takes a Python list, got " +
                    std::string(py::str(py::type::of(seq).attr("__name__"))));
  py::sequence items = py::reinterpret_borrow<py::sequence>(seq);
  const size_t n = items.size();
  if (n == 0) throw ValueError(what + ": 'mil_list' points to an empty list");
  py::object np_generic = py::reinterpret_borrow<py::object>(np_types().generic);
  auto is_str = [](py::handle e) { return PyUnicode_Check(e.ptr()) || py::isinstance(e, py::module_::import("numpy").attr("str_")); };
  auto is_integer = [&](py::handle e) {
    if (PyBool_Check(e.ptr())) return false;
    if (PyLong_Check(e.ptr())) return true;
    return py::isinstance(e, np_generic) && py::str(e.attr("dtype").attr("kind")).cast<std::string>() == "i";
  };
  const std::vector<int64_t> shape{static_cast<int64_t>(n)};
  if (is_str(items[0])) {
    std::vector<std::string> strs;
    for (size_t i = 0; i < n; ++i) {
      if (!is_str(items[i]))
        throw TypeError(what + ": list elements must share one type; element 0 is a str, element " +
                        std::to_string(i) + " is " + std::string(py::str(py::type::of(items[i]).attr("__name__"))));
      strs.push_back(py::str(items[i]).cast<std::string>());
    }
    return Value::list_of(Value::strings(shape, std::move(strs)));
  }
  if (is_integer(items[0])) {
    // coremltools: an np.int64 first element keeps int64 (mil_list's special case); other ints
    // are int32
    bool i64 = ints_as_int64 || (py::isinstance(items[0], np_generic) &&
                                 items[0].attr("dtype").attr("itemsize").cast<int>() == 8);
    std::vector<int64_t> ints;
    for (size_t i = 0; i < n; ++i) {
      if (!is_integer(items[i]))
        throw TypeError(what + ": list elements must share one type; element 0 is an integer, element " +
                        std::to_string(i) + " is " + std::string(py::str(py::type::of(items[i]).attr("__name__"))));
      int overflow = 0;
      py::int_ as_int(items[i]);
      long long v = PyLong_AsLongLongAndOverflow(as_int.ptr(), &overflow);
      if (overflow || (!i64 && (v > INT32_MAX || v < INT32_MIN)))
        throw ValueError(what + ": list element " + std::to_string(i) + " (" + std::string(py::str(items[i])) +
                         ") does not fit " + (i64 ? "int64" : "int32"));
      ints.push_back(v);
    }
    return Value::list_of(Value::from_ints(i64 ? DataType::Int64 : DataType::Int32, shape, ints));
  }
  throw TypeError(what + ": list elements must be str or integers (class labels), got " +
                  std::string(py::str(py::type::of(items[0]).attr("__name__"))));
}

namespace {

// A flat list or tuple of Python ints (bools excluded) or of Python floats as numpy makes it and
// from_array types it (int64 clipped to int32, float64 narrowed to fp32), without the array; an
// empty, nested, mixed or out-of-int64 sequence is left to numpy (nullopt).
std::optional<Value> flat_number_list(PyObject* seq) {
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  if (n == 0) return std::nullopt;
  PyObject** items = PySequence_Fast_ITEMS(seq);
  const std::vector<int64_t> shape{static_cast<int64_t>(n)};
  if (PyLong_CheckExact(items[0])) {
    std::vector<uint8_t> bytes(static_cast<size_t>(n) * 4);
    for (Py_ssize_t i = 0; i < n; ++i) {
      if (!PyLong_CheckExact(items[i])) return std::nullopt;
      int overflow = 0;
      const long long v = PyLong_AsLongLongAndOverflow(items[i], &overflow);
      if (overflow) return std::nullopt;
      const int32_t w = v > INT32_MAX   ? INT32_MAX
                        : v < INT32_MIN ? INT32_MIN
                                        : static_cast<int32_t>(v);
      std::memcpy(bytes.data() + i * 4, &w, 4);
    }
    return Value(DataType::Int32, shape, Buffer::take(std::move(bytes)));
  }
  if (PyFloat_CheckExact(items[0])) {
    std::vector<uint8_t> bytes(static_cast<size_t>(n) * 4);
    for (Py_ssize_t i = 0; i < n; ++i) {
      if (!PyFloat_CheckExact(items[i])) return std::nullopt;
      const float f = static_cast<float>(PyFloat_AS_DOUBLE(items[i]));
      std::memcpy(bytes.data() + i * 4, &f, 4);
    }
    return Value(DataType::Float32, shape, Buffer::take(std::move(bytes)));
  }
  return std::nullopt;
}

}  // namespace

Value value_from_py(py::handle o, const What& what) {
  PyObject* p = o.ptr();
  PyTypeObject* t = Py_TYPE(p);
  // (Python and numpy scalars first: none of them is a mil_list)
  if (PyBool_Check(p)) return Value::scalar_bool(p == Py_True);
  if (PyFloat_Check(p)) return Value::scalar_float(DataType::Float32, PyFloat_AsDouble(p));
  if (PyLong_Check(p)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(p, &overflow);
    if (overflow > 0 || v > INT32_MAX) v = INT32_MAX;
    if (overflow < 0 || v < INT32_MIN) v = INT32_MIN;
    return Value::scalar_int(DataType::Int32, v);
  }
  if (PyUnicode_Check(p)) return Value::scalar_string(o.cast<std::string>());
  NumpyTypes& nt = np_types();
  if (reinterpret_cast<PyObject*>(t) == nt.f32)
    return Value::scalar_float(DataType::Float32, PyFloat_AsDouble(p));
  if (reinterpret_cast<PyObject*>(t) == nt.f16) return Value::scalar_float(DataType::Float16, PyFloat_AsDouble(p));
  if (reinterpret_cast<PyObject*>(t) == nt.i32) return Value::scalar_int(DataType::Int32, PyLong_AsLongLong(p));
  if (reinterpret_cast<PyObject*>(t) == nt.boolean) return Value::scalar_bool(PyObject_IsTrue(p));
  if (is_mil_list(o)) return list_value_from_py(py::getattr(o, "ls"), what, false);
  if (PyObject_IsInstance(p, nt.ndarray)) return from_array(py::reinterpret_borrow<py::array>(o), what);
  if (PyObject_IsInstance(p, nt.generic)) {
    py::array a = py::array::ensure(o);
    return from_array(a, what);
  }
  if (PyList_Check(p) || PyTuple_Check(p)) {
    if (auto v = flat_number_list(p)) return std::move(*v);
    py::sequence seq = py::reinterpret_borrow<py::sequence>(o);
    for (auto item : seq) {
      if (py::isinstance<PyDim>(item))
        throw TypeError(what + ": a const cannot hold symbolic values (" + std::string(py::str(item)) +
                        "); build shapes with mb.shape() / mb.concat instead");
      if (py::isinstance<Var>(item))
        throw TypeError(what + ": a list of vars is not a value; this input takes a single tensor "
                               "(use mb.concat or mb.stack)");
    }
    py::array a = py::module_::import("numpy").attr("array")(o);
    return from_array(a, what);
  }
  if (py::isinstance<PyDim>(o))
    throw TypeError(what + ": a const cannot hold a symbolic value (" + std::string(py::str(o)) +
                    "); use mb.shape() to get symbolic sizes at run time");
  throw TypeError(what + ": cannot make a const from a value of type " +
                  std::string(py::str(py::type::of(o).attr("__name__"))));
}

py::object value_to_py(const std::shared_ptr<const Value>& v, const std::shared_ptr<SymbolContext>& ctx) {
  if (!v) return py::none();
  py::module_ np = py::module_::import("numpy");
  if (v->is_list()) {
    // coremltools' val of a mil_list const: a Python list of its elements (str, or numpy ints)
    py::list l;
    if (v->dtype() == DataType::String) {
      for (const auto& s : v->string_values()) l.append(py::str(s));
      return l;
    }
    py::object arr = value_to_py(std::make_shared<const Value>(Value(v->dtype(), v->shape(), v->buffer())), ctx);
    for (int64_t i = 0; i < v->numel(); ++i) l.append(arr[py::int_(i)]);
    return l;
  }
  std::vector<py::ssize_t> shape(v->shape().begin(), v->shape().end());
  if (v->dtype() == DataType::String) {
    if (v->rank() == 0) return py::str(v->string_values()[0]);
    py::list l;
    for (auto& s : v->string_values()) l.append(py::str(s));
    return np.attr("array")(l).attr("reshape")(py::tuple(py::cast(shape)));
  }
  if (v->is_symbolic()) {
    py::list l;
    for (int64_t i = 0; i < v->numel(); ++i) l.append(dim_to_py(v->dims()[i], ctx));
    if (v->rank() == 0) return l[0];
    py::object arr = np.attr("empty")(v->numel(), "dtype"_a = "object");
    for (int64_t i = 0; i < v->numel(); ++i) arr[py::int_(i)] = l[i];
    return arr.attr("reshape")(py::tuple(py::cast(shape)));
  }
  const char* np_name = nullptr;
  switch (v->dtype()) {
    case DataType::Bool: np_name = "bool_"; break;
    case DataType::Float16: np_name = "float16"; break;
    case DataType::Float32: np_name = "float32"; break;
    case DataType::Float64: np_name = "float64"; break;
    case DataType::Int8: case DataType::Int4: np_name = "int8"; break;
    case DataType::Int16: np_name = "int16"; break;
    case DataType::Int32: np_name = "int32"; break;
    case DataType::Int64: np_name = "int64"; break;
    case DataType::UInt8: case DataType::UInt1: case DataType::UInt2: case DataType::UInt3:
    case DataType::UInt4: case DataType::UInt6: np_name = "uint8"; break;
    case DataType::UInt16: np_name = "uint16"; break;
    case DataType::UInt32: np_name = "uint32"; break;
    case DataType::UInt64: np_name = "uint64"; break;
    default: break;
  }
  py::object arr;
  if (!np_name) {  // bf16 / fp8: widen to float32
    std::vector<float> f(static_cast<size_t>(v->numel()));
    for (int64_t i = 0; i < v->numel(); ++i) f[i] = static_cast<float>(v->as_double(i));
    arr = py::array_t<float>(shape, f.data());
  } else {
    py::dtype dt = py::dtype(std::string(np_name) == "bool_" ? "bool" : np_name);
    auto* keep = new std::shared_ptr<const Buffer>(v->buffer());
    py::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<const Buffer>*>(p); });
    py::array a(dt, shape, {}, v->raw(), base);
    py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
    arr = a;
    if (is_sub_byte(v->dtype()))
      arr = arr.attr("view")(py::module_::import("milkit.types").attr("np_dtype_for")(std::string(dtype_name(v->dtype()))));
  }
  if (v->rank() == 0) return arr[py::tuple()];
  return arr;
}

py::tuple shape_to_py(const Type* t, const std::shared_ptr<SymbolContext>& ctx) {
  if (!t->is_tensor() || !t->has_rank()) {
    if (t->kind() == TypeKind::State) return shape_to_py(t->elem(), ctx);
    return py::tuple();
  }
  py::tuple r(t->shape().size());
  for (size_t i = 0; i < t->shape().size(); ++i) r[i] = dim_to_py(t->shape()[i], ctx);
  return r;
}

void init_types(py::module_& m) {
  py::list names;
  for (DataType t : kAllDataTypes) names.append(py::make_tuple(std::string(dtype_name(t)), static_cast<int>(t)));
  // the complex dialect's type (not a MIL.proto type)
  names.append(py::make_tuple(std::string(dtype_name(DataType::Complex64)), static_cast<int>(DataType::Complex64)));
  m.attr("DTYPES") = names;
  m.def("promote_dtypes", [](int a, int b) {
    return static_cast<int>(promote_dtypes(static_cast<DataType>(a), static_cast<DataType>(b)));
  });
  m.def("value_roundtrip", [](py::object o) {
    auto v = std::make_shared<const Value>(value_from_py(o, "value"));
    return py::make_tuple(static_cast<int>(v->dtype()), value_to_py(v, std::make_shared<Context>()));
  }, "Converts a Python value with the const typing rules and back (for tests).");
}

}  // namespace milkit::py_bind
