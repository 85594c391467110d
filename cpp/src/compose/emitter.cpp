// The Emitter: op creation, constants, the cast policy and shape helpers of compose/.
#include "milkit/compose/emitter.h"

#include <cstddef>
#include <memory>
#include <utility>

#include "milkit/types/error.h"

namespace milkit {
namespace compose {

void fail(const std::string& msg) { throw ValueError(msg); }

Var* Emitter::op(std::string_view type, std::vector<Arg> args) {
  return b_.create(type, args).at(0);
}

std::vector<Var*> Emitter::ops(std::string_view type, std::vector<Arg> args) {
  return b_.create(type, args);
}

Var* Emitter::c(Value v) { return b_.add_const(std::make_shared<const Value>(std::move(v)), ""); }

Var* Emitter::cs(double v, DataType dt) {
  if (is_float(dt)) return c(Value::scalar_float(dt, v));
  if (dt == DataType::Bool) return c(Value::scalar_bool(v != 0));
  return c(Value::scalar_int(dt, static_cast<int64_t>(v)));
}

Var* Emitter::cast(Var* x, DataType dt) {
  if (dtype(x) == dt) return x;
  if (auto& val = x->value(); val && !val->is_symbolic() && val->numel() <= 16)
    return c(val->cast(dt));
  return op("cast", {Builder::arg("x", x),
                     Builder::arg("dtype", Value::scalar_string(std::string(dtype_name(dt))))});
}

Var* Emitter::bin(std::string_view type, Var* x, Var* y) {
  return op(type, {Builder::arg("x", x), Builder::arg("y", y)});
}

Var* Emitter::un(std::string_view type, Var* x) { return op(type, {Builder::arg("x", x)}); }

Var* Emitter::sel(Var* cond, Var* a, Var* b) {
  return op("select", {Builder::arg("cond", cond), Builder::arg("a", a), Builder::arg("b", b)});
}

Var* Emitter::reshape(Var* x, const std::vector<int64_t>& shape) {
  return op("reshape", {Builder::arg("x", x), Builder::arg("shape", Value::int_list(shape))});
}

Var* Emitter::transpose(Var* x, const std::vector<int64_t>& perm) {
  return op("transpose", {Builder::arg("x", x), Builder::arg("perm", Value::int_list(perm))});
}

Var* Emitter::expand_dims(Var* x, const std::vector<int64_t>& axes) {
  return op("expand_dims", {Builder::arg("x", x), Builder::arg("axes", Value::int_list(axes))});
}

Var* Emitter::squeeze(Var* x, const std::vector<int64_t>& axes) {
  return op("squeeze", {Builder::arg("x", x), Builder::arg("axes", Value::int_list(axes))});
}

Var* Emitter::concat(const std::vector<Var*>& xs, int64_t axis) {
  if (xs.size() == 1) return xs[0];
  Arg vals{"values", {}, true};
  for (Var* v : xs) vals.items.push_back(ArgItem{v, nullptr});
  return op("concat", {vals, Builder::arg("axis", Value::scalar_int(DataType::Int32, axis))});
}

Var* Emitter::stack(const std::vector<Var*>& xs, int64_t axis) {
  Arg vals{"values", {}, true};
  for (Var* v : xs) vals.items.push_back(ArgItem{v, nullptr});
  return op("stack", {vals, Builder::arg("axis", Value::scalar_int(DataType::Int32, axis))});
}

namespace {
Value bool_list(const std::vector<int64_t>& v) {
  return Value::from_ints(DataType::Bool, {static_cast<int64_t>(v.size())}, v);
}
}  // namespace

Var* Emitter::slice_axis(Var* x, int64_t axis, int64_t begin, int64_t end) {
  size_t r = static_cast<size_t>(rank(x)), a = static_cast<size_t>(axis);
  std::vector<int64_t> b(r, 0), e(r, 0), bm(r, 1), em(r, 1);
  b[a] = begin;
  e[a] = end;
  bm[a] = em[a] = 0;
  return op("slice_by_index",
            {Builder::arg("x", x), Builder::arg("begin", Value::int_list(b)),
             Builder::arg("end", Value::int_list(e)), Builder::arg("begin_mask", bool_list(bm)),
             Builder::arg("end_mask", bool_list(em))});
}

Var* Emitter::strided(Var* x, const std::vector<int64_t>& axes, const std::vector<int64_t>& begin,
                      const std::vector<int64_t>& count, const std::vector<int64_t>& step) {
  size_t r = static_cast<size_t>(rank(x));
  std::vector<int64_t> b(r, 0), e(r, 0), st(r, 1), bm(r, 1), em(r, 1);
  for (size_t k = 0; k < axes.size(); ++k) {
    size_t a = static_cast<size_t>(axes[k]);
    b[a] = begin[k];
    e[a] = begin[k] + (count[k] - 1) * step[k] + 1;
    st[a] = step[k];
    bm[a] = em[a] = 0;
  }
  return op("slice_by_index",
            {Builder::arg("x", x), Builder::arg("begin", Value::int_list(b)),
             Builder::arg("end", Value::int_list(e)), Builder::arg("stride", Value::int_list(st)),
             Builder::arg("begin_mask", bool_list(bm)), Builder::arg("end_mask", bool_list(em))});
}

Var* Emitter::shift(Var* x, int64_t axis, int64_t k, double fill) {
  const Dim& d = x->type()->shape().at(static_cast<size_t>(axis));
  if (!d->is_const()) fail("a shift along a symbolic dim is not supported");
  int64_t len = d->value();
  Var* h = slice_axis(x, axis, 0, len - k);
  DataType dt = dtype(x);
  if (!is_float(dt)) {
    // MIL pads floats only: integers get x[:k] * 0 + fill in front
    Var* f = bin("add", bin("mul", slice_axis(x, axis, 0, k), cs(0, dt)), cs(fill, dt));
    return concat({f, h}, axis);
  }
  std::vector<int64_t> pad(2 * static_cast<size_t>(rank(x)), 0);
  pad[2 * static_cast<size_t>(axis)] = k;
  return op("pad", {Builder::arg("x", h), Builder::arg("pad", Value::int_list(pad)),
                    Builder::arg("mode", Value::scalar_string("constant")),
                    Builder::arg("constant_val", Value::scalar_float(dt, fill))});
}

Var* Emitter::pad_trailing(Var* x, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi,
                           double val) {
  int r = rank(x);
  bool any = false;
  std::vector<int64_t> pads(2 * static_cast<size_t>(r) - 2 * lo.size(), 0);
  for (size_t k = 0; k < lo.size(); ++k) {
    pads.push_back(lo[k]);
    pads.push_back(hi[k]);
    any = any || lo[k] || hi[k];
  }
  if (!any) return x;
  return op("pad", {Builder::arg("x", x), Builder::arg("pad", Value::int_list(pads)),
                    Builder::arg("mode", Value::scalar_string("constant")),
                    Builder::arg("constant_val", cs(val, dtype(x)))});
}

Var* Emitter::per_channel(Var* v, int r) {
  std::vector<int64_t> axes;
  for (int i = 2; i < r; ++i) axes.push_back(i - 1);
  if (axes.empty()) return v;
  return expand_dims(v, axes);
}

int Emitter::rank(Var* v) {
  if (!v->type()->has_rank()) fail("the rank of '" + v->name() + "' is not known");
  return v->type()->rank();
}

std::optional<std::vector<int64_t>> Emitter::static_shape(Var* v) {
  if (!v->type()->has_rank()) return std::nullopt;
  std::vector<int64_t> r;
  for (Dim d : v->type()->shape()) {
    if (!d->is_const()) return std::nullopt;
    r.push_back(d->value());
  }
  return r;
}

std::vector<int64_t> Emitter::need_static_shape(Var* v, const std::string& what) {
  auto s = static_shape(v);
  if (!s) fail(what + " needs the shape of '" + v->name() + "' to be known");
  return *s;
}

int64_t Emitter::axis(int64_t a, int64_t r) {
  if (a < -r || a >= r)
    fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(r));
  return a < 0 ? a + r : a;
}

}  // namespace compose
}  // namespace milkit
