// Python view of symbolic dims: milkit._core.SymExpr.
#include "common.h"

#include "milkit/types/error.h"

namespace milkit::py_bind {

namespace {

PyDim make_symbol(const std::string& name, int64_t lo, int64_t hi, bool variadic) {
  auto ctx = std::make_shared<Context>();
  auto sym = name.empty() ? Symbol::fresh(variadic) : Symbol::create(name, lo, hi, variadic);
  if (!name.empty() && variadic && name[0] != '*')
    sym = Symbol::create("*" + name, lo, hi, variadic);
  Dim d = ctx->symbol(sym);
  return PyDim{ctx, d};
}

// Brings b into a's context.
Dim align(const PyDim& a, py::handle b) {
  if (py::isinstance<PyDim>(b)) {
    const PyDim& pb = b.cast<const PyDim&>();
    return pb.ctx == a.ctx ? pb.d : a.ctx->import(pb.d);
  }
  if (py::isinstance<py::int_>(b)) return a.ctx->constant(b.cast<int64_t>());
  throw py::type_error("unsupported operand for a symbolic dim: " +
                       std::string(py::str(py::type::of(b))));
}

py::object wrap(const PyDim& a, Dim d) { return dim_to_py(d, a.ctx); }

py::object cmp_result(Tri t) {
  if (t == Tri::True) return py::bool_(true);
  if (t == Tri::False) return py::bool_(false);
  return py::none();
}

}  // namespace

py::object dim_to_py(Dim d, const std::shared_ptr<SymbolContext>& ctx) {
  if (d->is_const()) return py::int_(d->value());
  return py::cast(PyDim{ctx, d});
}

Dim dim_from_py(py::handle o, SymbolContext& ctx) {
  if (o.is_none()) return ctx.fresh();
  if (py::isinstance<PyDim>(o)) {
    const PyDim& p = o.cast<const PyDim&>();
    return p.ctx.get() == &ctx ? p.d : ctx.import(p.d);
  }
  if (py::isinstance<py::bool_>(o)) throw py::type_error("a dimension cannot be a bool");
  if (py::hasattr(o, "__index__")) {
    int64_t v = py::reinterpret_steal<py::object>(PyNumber_Index(o.ptr())).cast<int64_t>();
    if (v == -1) return ctx.fresh();
    if (v < 0) throw py::value_error("a dimension cannot be negative: " + std::to_string(v));
    return ctx.constant(v);
  }
  if (py::hasattr(o, "free_symbols")) {  // a sympy expression
    py::object conv = py::module_::import("milkit.symbolic").attr("from_sympy")(o);
    return dim_from_py(conv, ctx);
  }
  throw py::type_error("not a dimension: " + std::string(py::repr(o)));
}

void init_symbolic(py::module_& m) {
  py::class_<PyDim>(m, "SymExpr", "A symbolic dimension expression (integer-valued).")
      .def_property_readonly("name",
                             [](const PyDim& p) -> py::object {
                               if (p.d->kind() == Expr::Kind::Symbol) return py::str(p.d->symbol()->name());
                               return py::str(p.d->str());
                             })
      .def_property_readonly("is_symbol", [](const PyDim& p) { return p.d->kind() == Expr::Kind::Symbol; })
      .def_property_readonly("is_variadic", [](const PyDim& p) {
        return p.d->kind() == Expr::Kind::Symbol && p.d->symbol()->variadic();
      })
      .def_property_readonly("range",
                             [](const PyDim& p) {
                               Interval r = p.ctx->range(p.d);
                               py::object lo = r.lo == kNegInf ? py::object(py::none()) : py::int_(r.lo);
                               py::object hi = r.hi == kPosInf ? py::object(py::none()) : py::int_(r.hi);
                               return py::make_tuple(lo, hi);
                             })
      .def(
          "set_range",
          [](PyDim& p, int64_t lo, py::object hi) {
            if (p.d->kind() != Expr::Kind::Symbol) throw py::value_error("set_range needs a symbol");
            p.d->symbol_ptr()->set_range(lo, hi.is_none() ? kPosInf : hi.cast<int64_t>());
          },
          py::arg("lo"), py::arg("hi") = py::none())
      .def_property_readonly("free_symbols",
                             [](const PyDim& p) {
                               py::list out;
                               std::vector<const Expr*> stack{p.d};
                               std::vector<const Symbol*> seen;
                               while (!stack.empty()) {
                                 const Expr* e = stack.back();
                                 stack.pop_back();
                                 if (e->kind() == Expr::Kind::Symbol) {
                                   if (std::find(seen.begin(), seen.end(), e->symbol()) == seen.end()) {
                                     seen.push_back(e->symbol());
                                     out.append(PyDim{p.ctx, e});
                                   }
                                 }
                                 for (auto* a : e->args()) stack.push_back(a);
                                 for (auto& t : e->terms())
                                   for (auto* a : t.atoms) stack.push_back(a);
                               }
                               return out;
                             })
      .def("__str__", [](const PyDim& p) { return p.d->str(); })
      .def("__repr__", [](const PyDim& p) { return p.d->str(); })
      .def("__hash__", [](const PyDim& p) { return py::hash(py::str(p.d->str())); })
      .def("__add__", [](const PyDim& a, py::object b) { return wrap(a, a.ctx->add(a.d, align(a, b))); })
      .def("__radd__", [](const PyDim& a, py::object b) { return wrap(a, a.ctx->add(align(a, b), a.d)); })
      .def("__sub__", [](const PyDim& a, py::object b) { return wrap(a, a.ctx->sub(a.d, align(a, b))); })
      .def("__rsub__", [](const PyDim& a, py::object b) { return wrap(a, a.ctx->sub(align(a, b), a.d)); })
      .def("__mul__", [](const PyDim& a, py::object b) { return wrap(a, a.ctx->mul(a.d, align(a, b))); })
      .def("__rmul__", [](const PyDim& a, py::object b) { return wrap(a, a.ctx->mul(align(a, b), a.d)); })
      .def("__floordiv__",
           [](const PyDim& a, py::object b) { return wrap(a, a.ctx->floordiv(a.d, align(a, b))); })
      .def("__rfloordiv__",
           [](const PyDim& a, py::object b) { return wrap(a, a.ctx->floordiv(align(a, b), a.d)); })
      .def("__mod__", [](const PyDim& a, py::object b) { return wrap(a, a.ctx->mod(a.d, align(a, b))); })
      .def("__rmod__", [](const PyDim& a, py::object b) { return wrap(a, a.ctx->mod(align(a, b), a.d)); })
      .def("__neg__", [](const PyDim& a) { return wrap(a, a.ctx->neg(a.d)); })
      .def("__pos__", [](const PyDim& a) { return wrap(a, a.d); })
      .def("__eq__",
           [](const PyDim& a, py::object b) -> py::object {
             if (!py::isinstance<PyDim>(b) && !py::isinstance<py::int_>(b)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
             return py::bool_(a.ctx->eq(a.d, align(a, b)) == Tri::True);
           })
      .def("__ne__",
           [](const PyDim& a, py::object b) -> py::object {
             if (!py::isinstance<PyDim>(b) && !py::isinstance<py::int_>(b)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
             return py::bool_(a.ctx->eq(a.d, align(a, b)) != Tri::True);
           })
      .def("__lt__",
           [](const PyDim& a, py::object b) {
             Tri t = a.ctx->lt(a.d, align(a, b));
             if (t == Tri::Unknown) throw py::type_error("cannot decide " + a.d->str() + " < " + std::string(py::str(b)));
             return t == Tri::True;
           })
      .def("__le__",
           [](const PyDim& a, py::object b) {
             Tri t = a.ctx->le(a.d, align(a, b));
             if (t == Tri::Unknown) throw py::type_error("cannot decide " + a.d->str() + " <= " + std::string(py::str(b)));
             return t == Tri::True;
           })
      .def("__gt__",
           [](const PyDim& a, py::object b) {
             Tri t = a.ctx->lt(align(a, b), a.d);
             if (t == Tri::Unknown) throw py::type_error("cannot decide " + a.d->str() + " > " + std::string(py::str(b)));
             return t == Tri::True;
           })
      .def("__ge__",
           [](const PyDim& a, py::object b) {
             Tri t = a.ctx->le(align(a, b), a.d);
             if (t == Tri::Unknown) throw py::type_error("cannot decide " + a.d->str() + " >= " + std::string(py::str(b)));
             return t == Tri::True;
           })
      .def("compare_eq", [](const PyDim& a, py::object b) { return cmp_result(a.ctx->eq(a.d, align(a, b))); },
           "True / False when provable, None when unknown.")
      .def("compare_le", [](const PyDim& a, py::object b) { return cmp_result(a.ctx->le(a.d, align(a, b))); },
           "True / False when provable, None when unknown.")
      .def("compare_lt", [](const PyDim& a, py::object b) { return cmp_result(a.ctx->lt(a.d, align(a, b))); },
           "True / False when provable, None when unknown.")
      .def("min", [](const PyDim& a, py::object b) { return wrap(a, a.ctx->min(a.d, align(a, b))); })
      .def("max", [](const PyDim& a, py::object b) { return wrap(a, a.ctx->max(a.d, align(a, b))); })
      .def("ceildiv", [](const PyDim& a, py::object b) { return wrap(a, a.ctx->ceildiv(a.d, align(a, b))); })
      .def_property_readonly("kind", [](const PyDim& a) {
        switch (a.d->kind()) {
          case Expr::Kind::Const: return "const";
          case Expr::Kind::Symbol: return "symbol";
          case Expr::Kind::FloorDiv: return "floordiv";
          case Expr::Kind::Mod: return "mod";
          case Expr::Kind::Min: return "min";
          case Expr::Kind::Max: return "max";
          case Expr::Kind::Poly: return "poly";
        }
        return "?";
      })
      .def_property_readonly("args", [](const PyDim& a) {
        py::list out;
        for (auto* x : a.d->args()) out.append(dim_to_py(x, a.ctx));
        return out;
      })
      .def_property_readonly("terms", [](const PyDim& a) {
        // [(coef, [atoms...]), ...], plus the constant
        py::list out;
        for (auto& t : a.d->terms()) {
          py::list atoms;
          for (auto* x : t.atoms) atoms.append(dim_to_py(x, a.ctx));
          out.append(py::make_tuple(t.coef, atoms));
        }
        return py::make_tuple(out, a.d->kind() == Expr::Kind::Poly ? a.d->value() : 0);
      });

  m.def("new_symbol", &make_symbol, py::arg("name") = "", py::arg("lo") = 1,
        py::arg("hi") = kPosInf, py::arg("variadic") = false,
        "A new symbol (fresh name 'is<N>' when name is empty).");
  m.def("sym_constant", [](int64_t v) { return v; });
}

}  // namespace milkit::py_bind
