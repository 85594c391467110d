// The builder from Python: scopes (current function / insertion point) and op callers.
// (common.h first: Python.h comes before the frame header)
#include "common.h"

#include <frameobject.h>

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

// The Var a Python Var object holds (is_var(o) checked; as op_caller_tp_call reads its caller,
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

  py::object call(py::args args, py::kwargs kwargs) const {
    Scope& sc = current(op_type_);
    const OpSchema& s = sc.fn->opset_auto()
                            ? *OpRegistry::instance().versions(op_type_).front()
                            : schema_for(op_type_, sc.fn->opset(), "");
    std::vector<Arg> out;
    out.reserve(args.size() + kwargs.size());
    std::string name;
    Operation* before_override = nullptr;
    bool has_before = false;
    if (args.size() > s.inputs.size())
      throw TypeError("mb." + op_type_ + " takes at most " + std::to_string(s.inputs.size()) +
                      " positional arguments (" + s.input_names() + "), got " +
                      std::to_string(args.size()));
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
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i].is_none()) continue;
      add(s.inputs[i].name, args[i]);
    }
    // control flow: the Python functions that build the blocks
    std::vector<std::pair<std::string, py::object>> block_fns;
    if (s.num_blocks > 0) {
      if (op_type_ == "cond") block_fns = {{"_true_fn", py::none()}, {"_false_fn", py::none()}};
      else block_fns = {{"_cond", py::none()}, {"_body", py::none()}};
    }
    for (auto kv : kwargs) {
      // (the keyword's own UTF-8, no copy)
      Py_ssize_t key_len = 0;
      const char* key_data = PyUnicode_AsUTF8AndSize(kv.first.ptr(), &key_len);
      if (!key_data) throw py::error_already_set();
      const std::string_view key(key_data, static_cast<size_t>(key_len));
      bool is_block_fn = false;
      for (auto& bf : block_fns)
        if (bf.first == key) {
          if (!PyCallable_Check(kv.second.ptr()))
            throw TypeError("mb." + op_type_ + ": '" + std::string(key) +
                            "' must be a function, got " +
                            std::string(py::str(py::type::of(kv.second).attr("__name__"))));
          bf.second = py::reinterpret_borrow<py::object>(kv.second);
          is_block_fn = true;
        }
      if (is_block_fn) continue;
      if (key == "_existing_blocks") continue;
      if (key == "name") {
        if (!kv.second.is_none()) name = py::str(kv.second);
        continue;
      }
      if (key == "before_op") {
        if (!kv.second.is_none()) {
          before_override = kv.second.cast<Operation*>();
          has_before = true;
        }
        continue;
      }
      if (kv.second.is_none()) continue;
      add(key, kv.second);
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

#if __has_include(<pybind11/detail/exception_translation.h>)
#include <pybind11/detail/exception_translation.h>
#define MILKIT_FAST_OP_CALL 1
// mb.<op>(...) without pybind11's dispatcher (CPython calls the type's tp_call with the
// positional tuple and keyword dict it builds; the dispatcher would look up __call__, bind it and
// copy the keywords into a dict of its own). Errors are translated as the dispatcher does.
PyObject* op_caller_tp_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  try {
    py::detail::loader_life_support life_support;
    auto* inst = reinterpret_cast<py::detail::instance*>(self);
    const auto* caller = static_cast<const OpCaller*>(inst->get_value_and_holder().value_ptr());
    py::kwargs kw = kwargs ? py::reinterpret_borrow<py::kwargs>(kwargs) : py::kwargs();
    return caller->call(py::reinterpret_borrow<py::args>(args), std::move(kw)).release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
    return nullptr;
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
}
#endif

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
  py::class_<OpCaller> op_caller(m, "OpCaller", "Calls an op of the registry on the current function.");
  op_caller.def("__call__", &OpCaller::call)
      .def_property_readonly("op_type", &OpCaller::op_type)
      .def("__repr__", [](const OpCaller& c) { return "<milkit op '" + c.op_type() + "'>"; });
#ifdef MILKIT_FAST_OP_CALL
  reinterpret_cast<PyTypeObject*>(op_caller.ptr())->tp_call = &op_caller_tp_call;
#endif

  m.def("op_caller", [](const std::string& name) {
    if (!OpRegistry::instance().exists(name)) throw TypeError("unknown op type '" + name + "'");
    return OpCaller(name);
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
