// Python view of the IR: Program, Function, Block, Operation, Var.
#include "common.h"

#include <functional>
#include <unordered_set>

#include "milkit/ir/verify.h"
#include "milkit/serde/text.h"
#include "milkit/types/error.h"

namespace milkit::py_bind {

std::shared_ptr<Function> owner_of(const Function* f) {
  return const_cast<Function*>(f)->shared_from_this();
}
std::shared_ptr<Var> handle(Var* v) {
  if (!v) return nullptr;
  Function* f = v->op() ? v->op()->function() : v->input_of()->function();
  return std::shared_ptr<Var>(owner_of(f), v);
}
std::shared_ptr<Operation> handle(Operation* op) {
  if (!op) return nullptr;
  return std::shared_ptr<Operation>(owner_of(op->function()), op);
}
std::shared_ptr<Block> handle(Block* b) {
  if (!b) return nullptr;
  return std::shared_ptr<Block>(owner_of(b->function()), b);
}

namespace {

Function* fn_of(const Var& v) { return v.op() ? v.op()->function() : v.input_of()->function(); }

py::list vars_list(const std::vector<Var*>& vs) {
  py::list l;
  for (Var* v : vs) l.append(handle(v));
  return l;
}

py::list ops_of(const Block& b) {
  py::list l;
  for (Operation* op = b.front(); op; op = op->next()) l.append(handle(op));
  return l;
}

void find_ops_rec(const Block& b, const std::string& prefix, const std::string& op_type, py::list& out) {
  for (Operation* op = b.front(); op; op = op->next()) {
    bool ok = (prefix.empty() || op->name().rfind(prefix, 0) == 0) && (op_type.empty() || op->op_type() == op_type);
    if (ok) out.append(handle(op));
    for (Block* nb : op->blocks()) find_ops_rec(*nb, prefix, op_type, out);
  }
}

py::list find_ops(const Block& b, const std::string& prefix, const std::string& op_type, bool exactly_one) {
  py::list out;
  find_ops_rec(b, prefix, op_type, out);
  if (exactly_one && out.size() != 1)
    throw ValueError("find_ops(prefix='" + prefix + "', op_type='" + op_type + "') found " +
                     std::to_string(out.size()) + " ops, expected exactly one");
  return out;
}

}  // namespace

void init_ir(py::module_& m) {
  py::class_<Var, std::shared_ptr<Var>>(m, "Var", "An SSA value: op output or function input.")
      .def_property("name", [](const Var& v) { return v.name(); },
                    [](Var& v, const std::string& n) { v.set_name(n); },
          "The var's name (unique in its function).")
      .def("set_name", [](Var& v, const std::string& n) { v.set_name(n); },
          "Renames the var.")
      .def_property_readonly("shape", [](const Var& v) { return shape_to_py(v.type(), fn_of(v)->ctx_ptr()); },
          "The shape: a tuple of ints and symbolic dims (SymExpr); () for a scalar.")
      .def_property_readonly("rank", [](const Var& v) {
        const Type* t = v.type()->kind() == TypeKind::State ? v.type()->elem() : v.type();
        return t->is_tensor() ? t->rank() : 0;
      },
          "The number of dims (0 for scalars and non-tensors).")
      .def_property_readonly("_dtype_code", [](const Var& v) {
        const Type* t = v.type();
        if (t->kind() == TypeKind::List) t = t->elem();
        return static_cast<int>(t->dtype());
      })
      .def_property_readonly("_kind", [](const Var& v) {
        switch (v.type()->kind()) {
          case TypeKind::Tensor: return v.type()->is_scalar() ? "scalar" : "tensor";
          case TypeKind::List: return "list";
          case TypeKind::Tuple: return "tuple";
          case TypeKind::Dict: return "dict";
          case TypeKind::State: return "state";
        }
        return "?";
      })
      .def_property_readonly("_type_detail", [](const Var& v) -> py::object {
        // dict: (key dtype code, value dtype code); list of scalars: (length or None, dynamic)
        const Type* t = v.type();
        if (t->kind() == TypeKind::Dict)
          return py::make_tuple(static_cast<int>(t->key()->dtype()), static_cast<int>(t->value()->dtype()));
        if (t->kind() == TypeKind::List && t->elem() && t->elem()->is_scalar())
          return py::make_tuple(t->length() && t->length()->is_const() ? py::object(py::int_(t->length()->value()))
                                                                      : py::object(py::none()),
                                t->dynamic_length());
        return py::none();
      })
      .def_property_readonly("_has_rank", [](const Var& v) { return v.type()->has_rank(); })
      .def_property_readonly("_type_str", [](const Var& v) { return v.type()->str(); })
      .def_property_readonly("val", [](const Var& v) -> py::object {
        if (!v.has_value()) return py::none();
        return value_to_py(v.value(), fn_of(v)->ctx_ptr());
      },
          "The value known at build time (a numpy array or Python scalar for consts and folded ops), else None.")
      .def_property_readonly("sym_val", [](const Var& v) -> py::object {
        return value_to_py(v.value(), fn_of(v)->ctx_ptr());
      },
          "The value known at build time, with symbolic elements (e.g. a shape with SymExpr dims), else None.")
      .def_property_readonly("op", [](const Var& v) { return handle(v.op()); },
          "The Operation producing the var; None for a function or block input.")
      .def_property_readonly("op_output_idx", [](const Var& v) -> py::object {
        if (!v.op()) return py::none();
        return py::int_(v.index());
      },
          "Which output of its op the var is; None for an input.")
      .def_property_readonly("child_ops", [](const Var& v) {
        py::list l;
        for (const Use& u : v.uses()) l.append(handle(u.op));
        return l;
      },
          "The ops that read the var (one entry per use).")
      .def_property_readonly("consuming_blocks", [](const Var& v) {
        py::list l;
        for (Block* b : v.block_uses()) l.append(handle(b));
        return l;
      },
          "The blocks that output the var.")
      .def("replace_all_uses_with", [](Var& v, Var& other) { v.replace_all_uses_with(&other); },
          "Makes every op and block that reads this var read the given var instead.")
      .def("__str__", [](const Var& v) { return var_to_text(v); })
      .def("__repr__", [](const Var& v) { return var_to_text(v); });

  py::class_<Operation, std::shared_ptr<Operation>>(m, "Operation", "An op in a block.")
      .def_property_readonly("op_type", [](const Operation& op) { return op.op_type(); },
          "The op's type, e.g. 'conv'.")
      .def_property("name", [](const Operation& op) { return op.name(); },
                    [](Operation& op, const std::string& n) { op.set_name(n); },
          "The op's name (unique in its function).")
      .def_property_readonly("inputs", [](const Operation& op) {
        py::dict d;
        for (size_t i = 0; i < op.num_inputs(); ++i) {
          VarSpan s = op.input(i);
          if (s.empty()) continue;
          const InputDef& def = op.schema().inputs[i];
          if (def.kind == InputKind::Tuple) {
            py::tuple t(s.size());
            for (size_t k = 0; k < s.size(); ++k) t[k] = handle(s[k]);
            d[py::str(def.name)] = t;
          } else {
            d[py::str(def.name)] = handle(s[0]);
          }
        }
        return d;
      },
          "The inputs, a dict of input name -> Var (a tuple of Vars for tuple inputs); inputs not given are absent.")
      .def_property_readonly("outputs", [](const Operation& op) { return vars_list(op.outputs()); },
          "The output Vars, in order.")
      .def_property_readonly("blocks", [](const Operation& op) {
        py::list l;
        for (Block* b : op.blocks()) l.append(handle(b));
        return l;
      },
          "The nested blocks (cond, while_loop), else an empty list.")
      .def_property_readonly("enclosing_block", [](const Operation& op) { return handle(op.parent()); },
          "The Block the op is in; None once erased.")
      .def_property_readonly("opset_version", [](const Operation& op) { return static_cast<int>(op.schema().since); },
          "The spec version (a milkit.target value) of the op's version in use.")
      .def_property_readonly("location", [](const Operation& op) -> py::object {
        if (!op.location().file) return py::none();
        return py::make_tuple(*op.location().file, op.location().line);
      },
          "(file, line) of the Python line that built the op, else None.")
      .def_property_readonly("erased", &Operation::erased,
          "Whether the op was removed from its block (its handle stays valid).")
      .def_property_readonly("_function", [](const Operation& op) { return owner_of(op.function()); })
      .def("__getattr__", [](const Operation& op, const std::string& name) -> py::object {
        // coremltools exposes inputs as attributes: op.x, op.weight
        int i = op.input_index(name);
        if (i < 0) throw py::attribute_error("'" + op.op_type() + "' op has no attribute '" + name + "'");
        VarSpan s = op.input(static_cast<size_t>(i));
        if (s.empty()) return py::none();
        if (op.schema().inputs[i].kind == InputKind::Tuple) {
          py::tuple t(s.size());
          for (size_t k = 0; k < s.size(); ++k) t[k] = handle(s[k]);
          return t;
        }
        return py::cast(handle(s[0]));
      })
      .def("__str__", [](const Operation& op) { return op_to_text(op, "  "); })
      .def("__repr__", [](const Operation& op) { return op_to_text(op, "  "); });

  py::class_<Block, std::shared_ptr<Block>>(m, "Block", "A block of ops.")
      .def_property_readonly("operations", [](const Block& b) { return ops_of(b); },
          "The ops of the block, in order (not those of nested blocks).")
      .def_property_readonly("outputs", [](const Block& b) { return vars_list(b.outputs()); },
          "The block's output Vars.")
      .def_property_readonly("inputs", [](const Block& b) { return vars_list(b.inputs()); },
          "The block's input Vars (a function body has none: see Function.inputs).")
      .def_property_readonly("outer_op", [](const Block& b) { return handle(b.parent_op()); },
          "The op owning this nested block; None for a function body.")
      .def("set_outputs", [](Block& b, std::vector<std::shared_ptr<Var>> outs) {
        std::vector<Var*> v;
        for (auto& o : outs) v.push_back(o.get());
        b.set_outputs(v);
      },
          "Sets the block's output Vars.")
      .def("find_ops", [](const Block& b, const std::string& prefix, const std::string& op_type, bool exactly_one) {
        return find_ops(b, prefix, op_type, exactly_one);
      }, py::arg("prefix") = "", py::arg("op_type") = "", py::arg("exactly_one") = false,
          "Ops of the block and its nested blocks whose name starts with prefix and whose type is op_type (empty: any); with exactly_one, raises ValueError unless exactly one matches.")
      .def(
          "replace_uses_of_var_after_op",
          [](Block& b, std::shared_ptr<Operation> anchor_op, std::shared_ptr<Var> old_var,
             std::shared_ptr<Var> new_var) {
            // coremltools' Block.replace_uses_of_var_after_op: uses by ops after the anchor (and
            // their nested blocks) and by the block outputs switch to new_var
            if (anchor_op && anchor_op->parent() != &b)
              throw ValueError("anchor op '" + anchor_op->name() + "' is not in this block");
            std::unordered_set<const Operation*> later;
            std::function<void(const Operation*)> mark = [&](const Operation* o) {
              later.insert(o);
              for (const Block* nb : o->blocks())
                for (const Operation* i = nb->front(); i; i = i->next()) mark(i);
            };
            for (Operation* o = anchor_op ? anchor_op->next() : b.front(); o; o = o->next()) mark(o);
            auto uses = old_var->uses();
            for (const Use& u : uses)
              if (later.count(u.op)) u.op->set_arg(u.slot, new_var.get());
            std::vector<Var*> outs = b.outputs();
            bool changed = false;
            for (auto& o : outs)
              if (o == old_var.get()) o = new_var.get(), changed = true;
            if (changed) b.set_outputs(outs);
          },
          py::arg("anchor_op"), py::arg("old_var"), py::arg("new_var"))
      .def("remove_ops", [](Block& b, std::vector<std::shared_ptr<Operation>> ops) {
        for (auto it = ops.rbegin(); it != ops.rend(); ++it) b.erase(it->get());
      },
          "Erases the ops (last first); each must have no remaining uses.")
      .def("__str__", [](const Block& b) {
        int c = 0;
        return block_to_text(b, "", c);
      });

  py::class_<Function, std::shared_ptr<Function>>(m, "Function", "A MIL function.")
      .def(py::init([](int opset) { return std::make_shared<Function>(static_cast<Target>(opset)); }))
      .def_property("opset", [](const Function& f) { return static_cast<int>(f.opset()); },
                    [](Function& f, int o) { f.set_opset(static_cast<Target>(o)); },
          "The spec version (a milkit.target value) the function is typed for.")
      .def_property("opset_auto", &Function::opset_auto, &Function::set_opset_auto,
          "Whether the opset follows the ops used (programs built without opset_version).")
      .def("add_input", [](Function& f, const std::string& name, int dtype, py::object shape, bool state) {
        Context& ctx = f.ctx();
        std::vector<Dim> dims;
        for (auto d : shape) dims.push_back(dim_from_py(d, ctx));
        const Type* t = ctx.tensor(static_cast<DataType>(dtype), dims);
        if (state) t = ctx.state(t);
        ctx.reserve_name(name);
        return handle(f.add_input(name, t));
      }, py::arg("name"), py::arg("dtype"), py::arg("shape"), py::arg("state") = false,
          "Adds an input of MIL dtype code dtype and the given shape (ints and SymExprs); state=True makes an iOS18 state.")
      .def("_retype_input", [](Function& f, const std::string& name, int dtype) {
        for (Var* in : f.inputs()) {
          if (in->name() != name) continue;
          const Type* t = in->type();
          if (!t->is_tensor()) throw ValueError("input '" + name + "' is not a tensor");
          const auto to = static_cast<DataType>(dtype);
          in->set_type(t->has_rank() ? f.ctx().tensor(to, t->shape()) : f.ctx().tensor_unknown_rank(to));
          return;
        }
        throw ValueError("the function has no input named '" + name + "'");
      }, py::arg("name"), py::arg("dtype"),
          "Gives tensor input `name` MIL dtype code `dtype`, keeping its shape (its readers are not re-typed).")
      .def_property_readonly("inputs", [](const Function& f) { return vars_list(f.inputs()); })
      .def_property_readonly("outputs", [](const Function& f) { return vars_list(f.body().outputs()); },
          "The function's output Vars.")
      .def_property_readonly("block", [](Function& f) { return handle(&f.body()); },
          "The function's body Block.")
      .def_property_readonly("operations", [](const Function& f) { return ops_of(f.body()); },
          "The ops of the body, in order (not those of nested blocks).")
      .def("set_outputs", [](Function& f, std::vector<std::shared_ptr<Var>> outs) {
        std::vector<Var*> v;
        for (auto& o : outs) {
          if (fn_of(*o) != &f) throw ValueError("output '" + o->name() + "' belongs to another function");
          v.push_back(o.get());
        }
        f.body().set_outputs(v);
      },
          "Sets the function's output Vars (vars of this function).")
      .def("find_ops", [](const Function& f, const std::string& prefix, const std::string& op_type, bool exactly_one) {
        return find_ops(f.body(), prefix, op_type, exactly_one);
      }, py::arg("prefix") = "", py::arg("op_type") = "", py::arg("exactly_one") = false,
          "Ops of the function (nested blocks included) whose name starts with prefix and whose type is op_type (empty: any); with exactly_one, raises ValueError unless exactly one matches.")
      .def("num_ops", &Function::num_ops,
          "The number of ops, consts and nested ones included.")
      .def("_image_inputs", [](const Function& f) {
        py::list l;
        for (const ImageInput& im : f.image_inputs()) {
          py::dict d;
          d["input"] = im.input;
          d["color_layout"] = color_layout_name(im.color_layout);
          d["scale"] = im.scale;
          d["bias"] = im.bias;
          d["channel_first"] = im.channel_first;
          d["enumerated_shapes"] = im.enumerated_shapes;
          d["default_shape"] = im.default_shape;
          l.append(d);
        }
        return l;
      },
          "The image inputs as dicts (input index, color_layout, scale, bias, channel_first, enumerated_shapes, default_shape).")
      .def("_set_image_inputs", [](Function& f, const py::list& l) {
        std::vector<ImageInput> v;
        for (auto h : l) {
          py::dict d = py::reinterpret_borrow<py::dict>(h);
          ImageInput im;
          im.input = d["input"].cast<size_t>();
          if (im.input >= f.inputs().size())
            throw ValueError("image input index " + std::to_string(im.input) + " is past the function's " +
                             std::to_string(f.inputs().size()) + " inputs");
          im.color_layout = parse_color_layout(d["color_layout"].cast<std::string>());
          im.scale = d["scale"].cast<double>();
          im.bias = d["bias"].cast<std::vector<double>>();
          im.channel_first = d["channel_first"].cast<bool>();
          im.enumerated_shapes = d["enumerated_shapes"].cast<std::vector<std::vector<int64_t>>>();
          im.default_shape = d["default_shape"].cast<std::vector<int64_t>>();
          v.push_back(std::move(im));
        }
        f.image_inputs() = std::move(v);
      },
          "Replaces the image inputs (dicts as _image_inputs gives them).")
      .def("_image_outputs", [](const Function& f) {
        py::dict d;
        for (const ImageOutput& im : f.image_outputs()) d[py::int_(im.output)] = color_layout_name(im.color_layout);
        return d;
      },
          "The image outputs: output index -> color layout.")
      .def("_set_image_outputs", [](Function& f, const std::map<size_t, std::string>& m) {
        std::vector<ImageOutput> v;
        for (const auto& [i, c] : m) {
          if (i >= f.body().outputs().size())
            throw ValueError("image output index " + std::to_string(i) + " is past the function's " +
                             std::to_string(f.body().outputs().size()) + " outputs");
          v.push_back(ImageOutput{i, parse_color_layout(c)});
        }
        f.image_outputs() = std::move(v);
      },
          "Replaces the image outputs (output index -> color layout).")
      .def("to_str", [](const Function& f, const std::string& name) { return function_to_text(f, name); },
           py::arg("func_name") = "function",
          "The function's MIL text, headed by func_name.")
      .def("__str__", [](const Function& f) { return function_to_text(f, "function"); });

  m.def("verify_function", [](const Function& f, const std::string& name, bool strict_names) {
    verify(f, name, strict_names);
  }, py::arg("function"), py::arg("name"), py::arg("strict_names") = false);

  py::class_<Program, std::shared_ptr<Program>>(m, "Program", "A MIL program: named functions.")
      .def(py::init([]() { return std::make_shared<Program>(); }))
      .def("add_function", [](Program& p, const std::string& name, std::shared_ptr<Function> f) {
        p.add_function(name, std::move(f));
      },
          "Adds a function under the given name (the first one added is the default).")
      .def_property_readonly("functions", [](const Program& p) {
        py::dict d;
        for (auto& [n, f] : p.functions()) d[py::str(n)] = f;
        return d;
      },
          "The functions, a dict of name -> Function, in the order added.")
      .def_property("default_function_name", [](const Program& p) { return p.default_function_name(); },
                    [](Program& p, const std::string& n) { p.set_default_function_name(n); },
          "The function that runs and describes the model by default.")
      .def("_attributes", [](const Program& p) { return p.attributes(); })
      .def("_set_attribute", [](Program& p, const std::string& k, const std::string& v) { p.attributes()[k] = v; })
      .def("__str__", [](const Program& p) { return program_to_text(p); });
}

}  // namespace milkit::py_bind
