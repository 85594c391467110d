// The builder from Python: scopes (current function / insertion point) and op callers.
// (common.h first: Python.h comes before the frame header)
#include "common.h"

#include <frameobject.h>
#include <pybind11/detail/exception_translation.h>
#include <structmember.h>

#include <string>
#include <string_view>
#include <unordered_map>

#include "milkit/types/error.h"

namespace milkit::py_bind {

namespace {

struct Scope {
  std::shared_ptr<Function> fn;
  Builder builder;
};

std::vector<Scope>& scopes() {
  static thread_local std::vector<Scope> s;
  return s;
}

std::string& package_dir() {
  static std::string d;
  return d;
}

// What caller_location knows of a code object: its file and the lines of the instructions it was
// called from.
struct CodeInfo {
  std::shared_ptr<const std::string> file;
  std::unordered_map<int, int> line_at;  // instruction offset -> line
};

// The line `f` is at (looked up once per call site: the line table is scanned each time Python
// computes it).
int frame_line(PyFrameObject* f, CodeInfo& info) {
#if PY_VERSION_HEX >= 0x030B0000
  const int lasti = PyFrame_GetLasti(f);
  auto it = info.line_at.find(lasti);
  if (it != info.line_at.end()) return it->second;
  const int line = PyFrame_GetLineNumber(f);
  info.line_at.emplace(lasti, line);
  return line;
#else
  (void)info;
  return PyFrame_GetLineNumber(f);
#endif
}

// Location of the innermost frame outside the milkit package.
Location caller_location() {
  static std::unordered_map<PyObject*, CodeInfo> codes;
  PyFrameObject* f = PyEval_GetFrame();
  if (!f) return {};
  Py_INCREF(f);
  Location loc;
  for (int depth = 0; f && depth < 16; ++depth) {
    PyCodeObject* code = PyFrame_GetCode(f);
    auto it = codes.find(reinterpret_cast<PyObject*>(code));
    if (it == codes.end()) {
      CodeInfo info;
      PyObject* fn = PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), "co_filename");
      info.file = std::make_shared<const std::string>(
          fn && PyUnicode_Check(fn) ? PyUnicode_AsUTF8(fn) : "?");
      Py_XDECREF(fn);
      Py_INCREF(code);  // keep the key alive
      it = codes.emplace(reinterpret_cast<PyObject*>(code), std::move(info)).first;
    }
    Py_DECREF(code);
    const std::string& pd = package_dir();
    if (pd.empty() || it->second.file->compare(0, pd.size(), pd) != 0) {
      loc.file = it->second.file;
      loc.line = frame_line(f, it->second);
      Py_DECREF(f);
      return loc;
    }
    PyFrameObject* back = PyFrame_GetBack(f);
    Py_DECREF(f);
    f = back;
  }
  Py_XDECREF(f);
  return loc;
}

Scope& current(const std::string& op_type) {
  auto& s = scopes();
  if (s.empty())
    throw ValueError("mb." + op_type +
                     ": no function is being built; call ops inside @mb.program, @mb.function or "
                     "`with mb.set_before_op(op):`");
  return s.back();
}

// Whether `o` is a Var (without pybind11's type lookup).
bool is_var(py::handle o) {
  static PyTypeObject* const var_type = reinterpret_cast<PyTypeObject*>(py::type::of<Var>().ptr());
  return PyObject_TypeCheck(o.ptr(), var_type);
}

// The Var a Python Var object holds (is_var(o) checked; as op_caller_vectorcall reads its caller,
// without the type caster's second type lookup).
Var* var_of(py::handle o) {
  auto* inst = reinterpret_cast<py::detail::instance*>(o.ptr());
  auto* v = static_cast<Var*>(inst->get_value_and_holder().value_ptr());
  if (!v) throw ValueError("a Var object that holds no var (made outside the builder?)");
  return v;
}

ArgItem item_from_py(py::handle o, const What& what) {
  if (is_var(o)) return ArgItem{var_of(o), nullptr};
  return ArgItem{nullptr, std::make_shared<const Value>(value_from_py(o, what))};
}

class OpCaller {
 public:
  explicit OpCaller(std::string op_type) : op_type_(std::move(op_type)) {}
  const std::string& op_type() const { return op_type_; }

  /// Calls the op with CPython's vectorcall arguments: `nargs` positional arguments, then one
  /// value per name of `kwnames` (a tuple of str, or null).
  py::object call(PyObject* const* args, size_t nargs, PyObject* kwnames) const {
    Scope& sc = current(op_type_);
    const OpSchema& s = sc.fn->opset_auto()
                            ? *OpRegistry::instance().versions(op_type_).front()
                            : schema_for(op_type_, sc.fn->opset(), "");
    std::vector<Arg> out;
    const size_t nkw = kwnames ? static_cast<size_t>(PyTuple_GET_SIZE(kwnames)) : 0;
    out.reserve(nargs + nkw);
    std::string name;
    Operation* before_override = nullptr;
    bool has_before = false;
    if (nargs > s.inputs.size())
      throw TypeError("mb." + op_type_ + " takes at most " + std::to_string(s.inputs.size()) +
                      " positional arguments (" + s.input_names() + "), got " +
                      std::to_string(nargs));
    auto add = [&](std::string_view key, py::handle v) {
      int idx = s.input_index(key);
      if (idx < 0)
        throw TypeError("mb." + op_type_ + ": Unknown input '" + std::string(key) + "' for op '" +
                        op_type_ + "'; its inputs are: " + s.input_names());
      for (auto& a : out)
        if (a.name == key)
          throw TypeError("mb." + op_type_ + ": argument '" + std::string(key) + "' given twice");
      Arg a;
      a.name.assign(key.data(), key.size());
      a.slot = idx;
      const What what(op_type_, key);
      const InputDef& d = s.inputs[idx];
      if (d.kind == InputKind::List && (PyList_Check(v.ptr()) || PyTuple_Check(v.ptr()))) {
        // a Python list for a list input (classify's classes) is a mil_list; its ints are int64,
        // the label type classify takes (coremltools needs mb.const(val=mil_list([...])) here)
        a.items.push_back(ArgItem{nullptr, std::make_shared<const Value>(list_value_from_py(v, what, true))});
      } else if (d.kind == InputKind::Tuple && (PyList_Check(v.ptr()) || PyTuple_Check(v.ptr()))) {
        a.is_sequence = true;
        for (auto e : py::reinterpret_borrow<py::sequence>(v))
          a.items.push_back(item_from_py(e, what));
      } else {
        a.items.push_back(item_from_py(v, what));
      }
      out.push_back(std::move(a));
    };
    for (size_t i = 0; i < nargs; ++i) {
      if (args[i] == Py_None) continue;
      add(s.inputs[i].name, args[i]);
    }
    // control flow: the Python functions that build the blocks
    std::vector<std::pair<std::string, py::object>> block_fns;
    if (s.num_blocks > 0) {
      if (op_type_ == "cond") block_fns = {{"_true_fn", py::none()}, {"_false_fn", py::none()}};
      else block_fns = {{"_cond", py::none()}, {"_body", py::none()}};
    }
    for (size_t k = 0; k < nkw; ++k) {
      const py::handle kw_value(args[nargs + k]);
      // (the keyword's own UTF-8, no copy)
      Py_ssize_t key_len = 0;
      const char* key_data = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(kwnames, k), &key_len);
      if (!key_data) throw py::error_already_set();
      const std::string_view key(key_data, static_cast<size_t>(key_len));
      bool is_block_fn = false;
      for (auto& bf : block_fns)
        if (bf.first == key) {
          if (!PyCallable_Check(kw_value.ptr()))
            throw TypeError("mb." + op_type_ + ": '" + std::string(key) +
                            "' must be a function, got " +
                            std::string(py::str(py::type::of(kw_value).attr("__name__"))));
          bf.second = py::reinterpret_borrow<py::object>(kw_value);
          is_block_fn = true;
        }
      if (is_block_fn) continue;
      if (key == "_existing_blocks") continue;
      if (key == "name") {
        if (!kw_value.is_none()) name = py::str(kw_value);
        continue;
      }
      if (key == "before_op") {
        if (!kw_value.is_none()) {
          before_override = kw_value.cast<Operation*>();
          has_before = true;
        }
        continue;
      }
      if (kw_value.is_none()) continue;
      add(key, kw_value);
    }
    Builder& b = sc.builder;
    b.set_location(caller_location());
    BlockBuildFn blocks;
    if (!block_fns.empty()) {
      for (auto& bf : block_fns)
        if (bf.second.is_none()) throw TypeError("mb." + op_type_ + ": missing required input '" + bf.first + "'");
      auto wrap = [this](py::object f, const std::string& what) -> BlockFn {
        return [f, what, this](const std::vector<Var*>& ins) {
          py::tuple a(ins.size());
          for (size_t i = 0; i < ins.size(); ++i) a[i] = py::cast(handle(ins[i]));
          py::object r = f(*a);
          std::vector<Var*> outs;
          auto one = [&](py::handle o) {
            if (!py::isinstance<Var>(o))
              throw TypeError("mb." + op_type_ + ": " + what + " must return Vars, got " +
                              std::string(py::str(py::type::of(o).attr("__name__"))));
            outs.push_back(o.cast<Var*>());
          };
          if (PyList_Check(r.ptr()) || PyTuple_Check(r.ptr()))
            for (auto e : py::reinterpret_borrow<py::sequence>(r)) one(e);
          else
            one(r);
          return outs;
        };
      };
      BlockFn f0 = wrap(block_fns[0].second, block_fns[0].first);
      BlockFn f1 = wrap(block_fns[1].second, block_fns[1].first);
      blocks = op_type_ == "cond" ? cond_blocks(f0, f1) : while_loop_blocks(f0, f1);
    }
    std::vector<Var*> outs;
    if (has_before) {
      Block* saved_block = b.block();
      Operation* saved_before = b.before();
      b.set_insertion_point(before_override->parent(), before_override);
      try {
        outs = b.create(s, out, name, blocks);
      } catch (...) {
        b.set_insertion_point(saved_block, saved_before);
        throw;
      }
      b.set_insertion_point(saved_block, saved_before);
    } else {
      outs = b.create(s, out, name, blocks);
    }
    if (outs.size() == 1) return py::cast(handle(outs[0]));
    py::list l;
    for (Var* v : outs) l.append(handle(v));
    return l;
  }

 private:
  std::string op_type_;
};

// mb.<op>(...) as a vectorcall type: CPython passes the arguments as an array and the keyword
// names as a tuple, with no keyword dict built per call (a pybind11 class only has tp_call, for
// which CPython builds one, and its dispatcher would copy it into another). Errors are translated
// as pybind11's dispatcher does.
struct OpCallerObject {
  PyObject ob_base;           // (what PyObject_HEAD declares)
  vectorcallfunc vectorcall;  // at __vectorcalloffset__
  OpCaller* caller;           // owned
};

PyObject* op_caller_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                               PyObject* kwnames) {
  try {
    py::detail::loader_life_support life_support;
    const OpCaller* caller = reinterpret_cast<OpCallerObject*>(self)->caller;
    return caller->call(args, PyVectorcall_NARGS(nargsf), kwnames).release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
    return nullptr;
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
}

void op_caller_dealloc(PyObject* self) {
  auto* o = reinterpret_cast<OpCallerObject*>(self);
  delete o->caller;
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);  // a heap type's instances hold a reference to it
}

PyObject* op_caller_repr(PyObject* self) {
  const std::string r =
      "<milkit op '" + reinterpret_cast<OpCallerObject*>(self)->caller->op_type() + "'>";
  return PyUnicode_FromStringAndSize(r.data(), static_cast<Py_ssize_t>(r.size()));
}

PyObject* op_caller_get_op_type(PyObject* self, void*) {
  const std::string& t = reinterpret_cast<OpCallerObject*>(self)->caller->op_type();
  return PyUnicode_FromStringAndSize(t.data(), static_cast<Py_ssize_t>(t.size()));
}

// The OpCaller type (made once, at module init).
PyTypeObject* op_caller_type = nullptr;

PyTypeObject* make_op_caller_type() {
  static PyMemberDef members[] = {
      {"__vectorcalloffset__", T_PYSSIZET,
       static_cast<Py_ssize_t>(offsetof(OpCallerObject, vectorcall)), READONLY, nullptr},
      {nullptr, 0, 0, 0, nullptr}};
  static PyGetSetDef getset[] = {
      {"op_type", &op_caller_get_op_type, nullptr, "The op type this calls.", nullptr},
      {nullptr, nullptr, nullptr, nullptr, nullptr}};
  static PyType_Slot slots[] = {
      {Py_tp_dealloc, reinterpret_cast<void*>(&op_caller_dealloc)},
      {Py_tp_call, reinterpret_cast<void*>(&PyVectorcall_Call)},
      {Py_tp_repr, reinterpret_cast<void*>(&op_caller_repr)},
      {Py_tp_members, members},
      {Py_tp_getset, getset},
      {Py_tp_doc, const_cast<char*>("Calls an op of the registry on the current function.")},
      {0, nullptr}};
  static PyType_Spec spec = {
      "milkit._core.OpCaller", static_cast<int>(sizeof(OpCallerObject)), 0,
      // only op_caller() makes them (an object made by the type itself
      // would hold no caller)
      Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_DISALLOW_INSTANTIATION, slots};
  PyObject* t = PyType_FromSpec(&spec);
  if (!t) throw py::error_already_set();
  return reinterpret_cast<PyTypeObject*>(t);
}

// A new OpCaller object for `op_type`.
py::object new_op_caller(const std::string& op_type) {
  auto caller = std::make_unique<OpCaller>(op_type);
  PyObject* o = op_caller_type->tp_alloc(op_caller_type, 0);
  if (!o) throw py::error_already_set();
  auto* obj = reinterpret_cast<OpCallerObject*>(o);
  obj->vectorcall = &op_caller_vectorcall;
  obj->caller = caller.release();
  return py::reinterpret_steal<py::object>(o);
}

py::list schema_info(const OpSchema& s) {
  // (the fixed defaults; defaults computed from other inputs are not listed)
  py::list inputs;
  for (auto& d : s.inputs) {
    const char* kind = "tensor";
    switch (d.kind) {
      case InputKind::Tuple: kind = "tuple"; break;
      case InputKind::List: kind = "list"; break;
      case InputKind::ListOrTensor: kind = "list_or_tensor"; break;
      case InputKind::State: kind = "state"; break;
      case InputKind::Any: kind = "any"; break;
      default: break;
    }
    py::dict e;
    e["name"] = d.name;
    e["kind"] = kind;
    e["dtypes"] = d.dtypes.str();
    e["domain"] = d.domain;
    e["const"] = d.is_const;
    e["optional"] = d.optional;
    e["default"] = d.default_value ? value_to_py(d.default_value, nullptr) : py::none();
    e["any_kind"] = d.any_kind;
    inputs.append(e);
  }
  return inputs;
}

}  // namespace

void init_builder(py::module_& m) {
  op_caller_type = make_op_caller_type();
  m.attr("OpCaller") =
      py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(op_caller_type));
  m.def("op_caller", [](const std::string& name) {
    if (!OpRegistry::instance().exists(name)) throw TypeError("unknown op type '" + name + "'");
    return new_op_caller(name);
  });
  m.def("op_names", [](int opset) { return OpRegistry::instance().names(static_cast<Target>(opset)); },
        py::arg("opset") = static_cast<int>(Target::iOS26));
  m.def("dialect_op_names", [] { return OpRegistry::instance().dialect_names(); },
        "Names of the dialect ops (complex_*), which op_names does not list.");
  m.def("op_inputs", [](const std::string& name, int opset) {
    return schema_info(schema_for(name, static_cast<Target>(opset), ""));
  });
  m.def("op_versions", [](const std::string& name) {
    py::list l;
    for (auto* s : OpRegistry::instance().versions(name)) l.append(static_cast<int>(s->since));
    return l;
  });
  m.def("_set_package_dir", [](const std::string& d) { package_dir() = d; });
  m.def("_push_scope", [](std::shared_ptr<Function> fn, std::shared_ptr<Block> block,
                          std::shared_ptr<Operation> before) {
    Scope s{fn, Builder(*fn)};
    if (block) s.builder.set_insertion_point(block.get(), before ? before.get() : nullptr);
    else if (before) s.builder.set_insertion_point(before->parent(), before.get());
    scopes().push_back(std::move(s));
  }, py::arg("fn"), py::arg("block") = nullptr, py::arg("before") = nullptr);
  m.def("_pop_scope", [] {
    if (scopes().empty()) throw ValueError("builder scope stack is empty");
    scopes().pop_back();
  });
  m.def("_scope_depth", [] { return scopes().size(); });
  m.def("_current_function", []() -> std::shared_ptr<Function> {
    return scopes().empty() ? nullptr : scopes().back().fn;
  });
  m.def("_add_const", [](py::object value, const std::string& name) {
    Scope& sc = current("const");
    sc.builder.set_location(caller_location());
    auto v = std::make_shared<const Value>(value_from_py(value, "mb.const val"));
    Context& ctx = sc.fn->ctx();
    std::string n = name.empty() ? ctx.free_name("const") : name;
    return handle(sc.builder.add_const(v, n));
  }, py::arg("val"), py::arg("name") = "");
}

}  // namespace milkit::py_bind
