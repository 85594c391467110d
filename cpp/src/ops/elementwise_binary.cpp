// The 18 elementwise binary ops (coremltools iOS15/elementwise_binary.py): x and y share a
// dtype from T, broadcast numpy-style; comparisons and logical ops return bool.
#include <cmath>

#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"

namespace milkit {

namespace {

using FF = std::function<double(double, double)>;
using FI = std::function<int64_t(int64_t, int64_t)>;
/// Symbolic rule over dims (nullptr when the op has none).
using FD = std::function<Dim(Context&, Dim, Dim)>;

int64_t py_floordiv(int64_t a, int64_t b) {
  if (b == 0) return 0;
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t py_mod(int64_t a, int64_t b) {
  if (b == 0) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
int64_t ipow(int64_t a, int64_t b) {
  if (b < 0) return 0;
  int64_t r = 1;
  while (b--) r *= a;
  return r;
}

void add_binary(OpRegistry& r, const std::string& name, DTypeSet domain, bool bool_out, FF ff,
                FI fi, FD fd) {
  OpSchema s;
  s.name = name;
  s.inputs = {in("x", domain, "T"), in("y", domain, "T")};
  s.infer = [bool_out](InferCtx& ic) -> std::vector<const Type*> {
    const Type* tx = ic.type("x");
    const Type* ty = ic.type("y");
    DataType dt = bool_out ? DataType::Bool : tx->dtype();
    if (!tx->has_rank() || !ty->has_rank()) return {ic.ctx.tensor_unknown_rank(dt)};
    // (types are interned: when the result has one operand's dtype and shape, it is that
    // operand's type)
    if (!bool_out) {
      if (ty->rank() == 0 || tx == ty) return {tx};
      if (tx->rank() == 0 && ty->dtype() == dt) return {ty};
    }
    return {ic.ctx.tensor(dt, ops::broadcast_shapes(ic, tx->shape(), ty->shape()))};
  };
  s.value = [bool_out, ff, fi, fd](InferCtx& ic, std::vector<std::shared_ptr<const Value>>& out) {
    const Value* a = ic.val("x");
    const Value* b = ic.val("y");
    if (!a || !b) return false;
    DataType dt = bool_out ? DataType::Bool : ic.type("x")->dtype();
    if (a->is_symbolic() || b->is_symbolic()) {
      // symbolic integer arithmetic on shape values: add/sub/mul/floor_div/mod/max/min
      if (!fd || bool_out) return false;
      std::vector<int64_t> shape = ops::broadcast_concrete(a->shape(), b->shape());
      if (shape != a->shape() && !(b->numel() == 1) ) {
        if (a->numel() != 1) return false;
      }
      int64_t n = shape_numel(shape);
      std::vector<Dim> r(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) {
        Dim x = a->as_dim(ic.ctx, a->numel() == 1 ? 0 : k);
        Dim y = b->as_dim(ic.ctx, b->numel() == 1 ? 0 : k);
        r[k] = fd(ic.ctx, x, y);
      }
      out.push_back(ops::share(Value::from_dims(dt, shape, std::move(r))));
      return true;
    }
    out.push_back(ops::share(ops::fold_binary(*a, *b, dt, ff, fi)));
    return true;
  };
  r.add(std::move(s));
}

}  // namespace

void register_elementwise_binary_ops(OpRegistry& r) {
  DTypeSet num = dt::numeric();
  DTypeSet lb = dt::boolean();
  auto none = FD();
  add_binary(r, "add", num, false, [](double a, double b) { return a + b; },
             [](int64_t a, int64_t b) { return a + b; },
             [](Context& c, Dim a, Dim b) { return c.add(a, b); });
  add_binary(r, "sub", num, false, [](double a, double b) { return a - b; },
             [](int64_t a, int64_t b) { return a - b; },
             [](Context& c, Dim a, Dim b) { return c.sub(a, b); });
  add_binary(r, "mul", num, false, [](double a, double b) { return a * b; },
             [](int64_t a, int64_t b) { return a * b; },
             [](Context& c, Dim a, Dim b) { return c.mul(a, b); });
  add_binary(r, "real_div", num, false, [](double a, double b) { return a / b; },
             nullptr, none);
  add_binary(r, "floor_div", num, false, [](double a, double b) { return std::floor(a / b); },
             py_floordiv, [](Context& c, Dim a, Dim b) { return c.floordiv(a, b); });
  add_binary(r, "mod", num, false,
             [](double a, double b) {
               double m = std::fmod(a, b);
               if (m != 0 && ((m < 0) != (b < 0))) m += b;
               return m;
             },
             py_mod, [](Context& c, Dim a, Dim b) { return c.mod(a, b); });
  add_binary(r, "pow", num, false, [](double a, double b) { return std::pow(a, b); }, ipow, none);
  // np.maximum / np.minimum (coremltools' value inference): NaN in either operand gives NaN
  add_binary(r, "maximum", num, false, [](double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::fmax(a, b); },
             [](int64_t a, int64_t b) { return std::max(a, b); },
             [](Context& c, Dim a, Dim b) { return c.max(a, b); });
  add_binary(r, "minimum", num, false, [](double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::fmin(a, b); },
             [](int64_t a, int64_t b) { return std::min(a, b); },
             [](Context& c, Dim a, Dim b) { return c.min(a, b); });
  add_binary(r, "equal", num, true, [](double a, double b) { return double(a == b); },
             [](int64_t a, int64_t b) { return int64_t(a == b); }, none);
  add_binary(r, "not_equal", num, true, [](double a, double b) { return double(a != b); },
             [](int64_t a, int64_t b) { return int64_t(a != b); }, none);
  add_binary(r, "greater", num, true, [](double a, double b) { return double(a > b); },
             [](int64_t a, int64_t b) { return int64_t(a > b); }, none);
  add_binary(r, "greater_equal", num, true, [](double a, double b) { return double(a >= b); },
             [](int64_t a, int64_t b) { return int64_t(a >= b); }, none);
  add_binary(r, "less", num, true, [](double a, double b) { return double(a < b); },
             [](int64_t a, int64_t b) { return int64_t(a < b); }, none);
  add_binary(r, "less_equal", num, true, [](double a, double b) { return double(a <= b); },
             [](int64_t a, int64_t b) { return int64_t(a <= b); }, none);
  add_binary(r, "logical_and", lb, true, [](double a, double b) { return double(a && b); },
             [](int64_t a, int64_t b) { return int64_t(a && b); }, none);
  add_binary(r, "logical_or", lb, true, [](double a, double b) { return double(a || b); },
             [](int64_t a, int64_t b) { return int64_t(a || b); }, none);
  add_binary(r, "logical_xor", lb, true, [](double a, double b) { return double((a != 0) != (b != 0)); },
             [](int64_t a, int64_t b) { return int64_t((a != 0) != (b != 0)); }, none);
}

}  // namespace milkit
