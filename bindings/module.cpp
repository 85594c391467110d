// milkit._core: the compiled core of milkit.
#include "common.h"

#include "milkit/types/error.h"

namespace milkit::py_bind {

void init_errors(py::module_& m) {
  static py::exception<milkit::Error> base(m, "MilkitError", PyExc_Exception);
  static py::object type_error =
      py::module_::import("builtins").attr("type")(
          "MilkitTypeError",
          // also a ValueError: coremltools raises ValueError for every input validation failure,
          // so code written for it keeps catching what it caught
          py::make_tuple(base, py::handle(PyExc_TypeError), py::handle(PyExc_ValueError)),
          py::dict());
  static py::object value_error =
      py::module_::import("builtins").attr("type")("MilkitValueError",
                                                   py::make_tuple(base, py::handle(PyExc_ValueError)),
                                                   py::dict());
  static py::object format_error = py::module_::import("builtins").attr("type")(
      "FormatError", py::make_tuple(value_error), py::dict());
  static py::object verify_error = py::module_::import("builtins").attr("type")(
      "VerifyError", py::make_tuple(value_error), py::dict());
  static py::object io_error =
      py::module_::import("builtins").attr("type")("MilkitIOError",
                                                   py::make_tuple(base, py::handle(PyExc_OSError)),
                                                   py::dict());
  static py::object index_error = py::module_::import("builtins").attr("type")(
      "MilkitIndexError", py::make_tuple(value_error, py::handle(PyExc_IndexError)), py::dict());
  // an importer's list of every node it cannot convert; `nodes` holds one label per node
  static py::object unsupported_error = py::module_::import("builtins").attr("type")(
      "UnsupportedOpsError", py::make_tuple(value_error), py::dict());
  for (auto* o : {&type_error, &value_error, &format_error, &verify_error, &io_error, &index_error,
                  &unsupported_error})
    o->attr("__module__") = "milkit";
  base.attr("__module__") = "milkit";
  m.attr("MilkitTypeError") = type_error;
  m.attr("MilkitValueError") = value_error;
  m.attr("FormatError") = format_error;
  m.attr("VerifyError") = verify_error;
  m.attr("MilkitIOError") = io_error;
  m.attr("MilkitIndexError") = index_error;
  m.attr("UnsupportedOpsError") = unsupported_error;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const milkit::UnsupportedOpsError& e) {
      py::object exc = unsupported_error(py::str(e.what()));
      exc.attr("nodes") = py::cast(e.nodes());
      PyErr_SetObject(unsupported_error.ptr(), exc.ptr());
    } catch (const milkit::FormatError& e) {
      PyErr_SetString(format_error.ptr(), e.what());
    } catch (const milkit::IndexError& e) {
      PyErr_SetString(index_error.ptr(), e.what());
    } catch (const milkit::VerifyError& e) {
      PyErr_SetString(verify_error.ptr(), e.what());
    } catch (const milkit::TypeError& e) {
      PyErr_SetString(type_error.ptr(), e.what());
    } catch (const milkit::ValueError& e) {
      PyErr_SetString(value_error.ptr(), e.what());
    } catch (const milkit::IOError& e) {
      PyErr_SetString(io_error.ptr(), e.what());
    } catch (const milkit::Error& e) {
      PyErr_SetString(base.ptr(), e.what());
    }
  });
}

}  // namespace milkit::py_bind

PYBIND11_MODULE(_core, m) {
  m.doc() = "milkit core: typed MIL IR, symbolic dims, op registry, builder, serialization";
  using namespace milkit::py_bind;
  init_errors(m);
  init_symbolic(m);
  init_types(m);
  init_ir(m);
  init_builder(m);
  init_passes(m);
  init_serde(m);
  init_text(m);
  init_exec(m);
  init_calibrate(m);
  init_frontends(m);
  init_compress(m);
}
