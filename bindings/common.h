// Shared declarations of the pybind11 translation units of milkit._core.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <string_view>

#include "milkit/builder/builder.h"
#include "milkit/ir/ir.h"

namespace py = pybind11;

namespace milkit::py_bind {

/// A dim as seen from Python: the node plus the context that owns it.
struct PyDim {
  std::shared_ptr<SymbolContext> ctx;  ///< Owner of the node.
  Dim d;                               ///< The node.
};

/// The shared owner of IR objects: every handle keeps its Function alive.
std::shared_ptr<Function> owner_of(const Function* f);

/// Handles for IR objects (aliasing the owning Function).
std::shared_ptr<Var> handle(Var* v);
/// Op handle.
std::shared_ptr<Operation> handle(Operation* op);
/// Block handle.
std::shared_ptr<Block> handle(Block* b);

/// What a converted value is for, as error messages name it ("mb.add input 'y'"). The builder's
/// form (op type and input name) is put together only when a message is written.
class What {
 public:
  /// A fixed description (must outlive the conversion).
  What(const char* s) : text_(s) {}  // NOLINT(google-explicit-constructor)
  /// A fixed description (must outlive the conversion).
  What(const std::string& s) : text_(s.c_str()) {}  // NOLINT(google-explicit-constructor)
  /// "mb.<op_type> input '<input>'".
  What(const std::string& op_type, std::string_view input) : op_(&op_type), input_(input) {}
  /// The description.
  std::string str() const {
    if (op_) return "mb." + *op_ + " input '" + std::string(input_) + "'";
    return text_;
  }
  /// The description followed by `s`.
  friend std::string operator+(const What& w, const char* s) { return w.str() + s; }
  /// The description followed by `s`.
  friend std::string operator+(const What& w, const std::string& s) { return w.str() + s; }

 private:
  const char* text_ = "";
  const std::string* op_ = nullptr;
  std::string_view input_;
};

/// Converts a Python value to a const Value with coremltools' typing rules.
Value value_from_py(py::handle o, const What& what);
/// A MIL list of scalars from a Python sequence (the elements of a `mil_list`): str elements make
/// a list of str; integers a list of int64 when the first is an np.int64 or `ints_as_int64`,
/// else of int32 (coremltools' const typing). Empty or mixed lists raise.
Value list_value_from_py(py::handle seq, const What& what, bool ints_as_int64);
/// Whether `o` is a `mil_list` (milkit's or coremltools'): an object of that class name with a
/// list `ls`.
bool is_mil_list(py::handle o);
/// Converts a Value to numpy (or a Python scalar for strings).
py::object value_to_py(const std::shared_ptr<const Value>& v, const std::shared_ptr<SymbolContext>& ctx);
/// A shape as a Python tuple of ints and Dims.
py::tuple shape_to_py(const Type* t, const std::shared_ptr<SymbolContext>& ctx);
/// A Python dim-like (int, Dim, -1/None for a fresh symbol) to a Dim of `ctx`.
Dim dim_from_py(py::handle o, SymbolContext& ctx);
/// Wraps a Dim for Python: int for constants, else a Dim object.
py::object dim_to_py(Dim d, const std::shared_ptr<SymbolContext>& ctx);

/// Registration of each area.
void init_symbolic(py::module_& m);
/// Types, values.
void init_types(py::module_& m);
/// IR classes.
void init_ir(py::module_& m);
/// Builder, op callers, scopes.
void init_builder(py::module_& m);
/// Errors.
void init_errors(py::module_& m);
/// Graph passes.
void init_passes(py::module_& m);
/// Serialization (.mlpackage save / load).
void init_serde(py::module_& m);
/// MIL text: printing with options and parsing.
void init_text(py::module_& m);
/// The interpreter: plans, runs, states, threads.
void init_exec(py::module_& m);
/// Activation calibration.
void init_calibrate(py::module_& m);
/// Importers (ONNX).
void init_frontends(py::module_& m);
/// Compression numerics for tests: the private submodule _core._compress.
void init_compress(py::module_& m);

}  // namespace milkit::py_bind
