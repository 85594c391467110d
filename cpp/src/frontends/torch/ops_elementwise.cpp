// ATen elementwise arithmetic: torch's type promotion and alpha, division modes, powers, rounding, clamp, where / masked_fill, lerp, addcmul / addcdiv.
#include <cmath>
#include <limits>

#include "milkit/compose/arith.h"
#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

// self <op> other, with other a tensor or a number (torch's promotion)
std::pair<Var*, Var*> operands(C& cv, const json& n) {
  if (C::is_number(n, "self") && !C::is_number(n, "other")) {
    // number <op> tensor (decompositions write rsub so)
    Var* y = cv.tensor(n, "other");
    DataType dt = C::dtype(y);
    auto od = cv.out_dtype(n);
    if (od && *od != DataType::Bool) dt = *od;
    return {cv.scalar_or_tensor(n, "self", dt), cv.cast(y, dt)};
  }
  Var* x = self(cv, n);
  if (C::is_number(n, "other")) {
    DataType dt = C::dtype(x);
    auto od = cv.out_dtype(n);
    if (od && *od != DataType::Bool) dt = *od;
    else if (!is_float(dt) && cv.number(n, "other", 0) != std::floor(cv.number(n, "other", 0))) dt = DataType::Float32;
    return {cv.cast(x, dt), cv.scalar_or_tensor(n, "other", dt)};
  }
  Var* y = cv.tensor(n, "other");
  return cv.promoted(n, x, y);
}

void arith(OpTable& t, const char* name, const char* mil) {
  t.on(name, [mil](C& cv, const json& n) {
    auto [x, y] = operands(cv, n);
    if (C::dtype(x) == DataType::Bool && C::dtype(y) == DataType::Bool) {
      // torch keeps bool: add is logical or, mul logical and
      std::string op = mil;
      if (op == "sub") cv.fail(n, "sub of two bool tensors is not defined (torch refuses it too)");
      cv.out(n, bin(cv, op == "add" ? "logical_or" : "logical_and", x, y));
      return;
    }
    if (C::has(n, "alpha") && cv.f(n, "alpha", 1) != 1)
      y = bin(cv, "mul", y, cv.cs(cv.f(n, "alpha", 1), C::dtype(y)));
    cv.out(n, bin(cv, mil, x, y));
  });
}

void rsub(C& cv, const json& n) {
  auto [x, y] = operands(cv, n);
  if (cv.f(n, "alpha", 1) != 1) x = bin(cv, "mul", x, cv.cs(cv.f(n, "alpha", 1), C::dtype(x)));
  cv.out(n, bin(cv, "sub", y, x));
}

void div_op(C& cv, const json& n) {
  auto [x, y] = operands(cv, n);
  std::string mode = cv.s(n, "rounding_mode", "");
  if (mode.empty()) {
    DataType dt = float_out(cv, n, x);
    cv.out(n, bin(cv, "real_div", cv.cast(x, dt), cv.cast(y, dt)));
  } else if (mode == "floor") {
    if (is_float(C::dtype(x))) cv.out(n, cv.op("floor", {C::a("x", bin(cv, "real_div", x, y))}));
    else cv.out(n, bin(cv, "floor_div", x, y));
  } else if (mode == "trunc") {
    cv.out(n, compose::trunc_div(cv.e, x, y));
  } else {
    cv.fail(n, "rounding_mode '" + mode + "' is not one of None, 'trunc', 'floor'");
  }
}

void floor_divide(C& cv, const json& n) {
  auto [x, y] = operands(cv, n);
  if (is_float(C::dtype(x))) cv.out(n, cv.op("floor", {C::a("x", bin(cv, "real_div", x, y))}));
  else cv.out(n, bin(cv, "floor_div", x, y));
}

// Python's modulo (sign of the divisor)
void remainder_op(C& cv, const json& n) {
  auto [x, y] = operands(cv, n);
  cv.out(n, compose::python_mod(cv.e, x, y));
}

// C's fmod (sign of the dividend)
void fmod_op(C& cv, const json& n) {
  auto [x, y] = operands(cv, n);
  cv.out(n, compose::fmod(cv.e, x, y));
}

void pow_op(C& cv, const json& n) {
  if (!C::has(n, "self") && C::is_number(n, "self")) {
    // pow.Scalar: number ** tensor
    Var* e = cv.tensor(n, "exponent");
    DataType dt = float_out(cv, n, e);
    cv.out(n, bin(cv, "pow", cv.scalar_or_tensor(n, "self", dt), cv.cast(e, dt)));
    return;
  }
  if (C::is_number(n, "self")) {
    Var* e = cv.tensor(n, "exponent");
    DataType dt = float_out(cv, n, e);
    cv.out(n, bin(cv, "pow", cv.scalar_or_tensor(n, "self", dt), cv.cast(e, dt)));
    return;
  }
  Var* x = self(cv, n);
  if (const json* ea = C::arg(n, "exponent"); ea && cv.item_value(*ea)) {
    // an exponent read from a tensor (.item()): the value at run time
    Var* e = cv.item_value(*ea);
    auto [a, b] = cv.promoted(n, x, e);
    cv.out(n, bin(cv, "pow", a, b));
    return;
  }
  if (C::is_number(n, "exponent")) {
    double e = cv.number(n, "exponent", 1);
    DataType dt = C::dtype(x);
    if (auto od = cv.out_dtype(n)) dt = *od;
    x = cv.cast(x, dt);
    if (e == 2) {
      cv.out(n, bin(cv, "mul", x, x));
      return;
    }
    if (e == 0.5 && is_float(dt)) {
      cv.out(n, cv.op("sqrt", {C::a("x", x)}));
      return;
    }
    cv.out(n, bin(cv, "pow", x, cv.cs(e, dt)));
    return;
  }
  Var* e = cv.tensor(n, "exponent");
  auto [a, b] = cv.promoted(n, x, e);
  cv.out(n, bin(cv, "pow", a, b));
}

void floor_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  cv.out(n, is_float(C::dtype(x)) ? cv.op("floor", {C::a("x", x)}) : cv.op("identity", {C::a("x", x)}));
}

void ceil_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  cv.out(n, is_float(C::dtype(x)) ? cv.op("ceil", {C::a("x", x)}) : cv.op("identity", {C::a("x", x)}));
}

void trunc_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  cv.out(n, compose::trunc(cv.e, x));
}

void round_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  int64_t dec = cv.i(n, "decimals", 0);
  if (dec == 0) {
    cv.out(n, cv.op("round", {C::a("x", x)}));
    return;
  }
  double s = std::pow(10.0, static_cast<double>(dec));
  Var* r = cv.op("round", {C::a("x", bin(cv, "mul", x, cv.cs(s, C::dtype(x))))});
  cv.out(n, bin(cv, "real_div", r, cv.cs(s, C::dtype(x))));
}

void sign_op(C& cv, const json& n) { cv.out(n, cv.op("sign", {C::a("x", self(cv, n))})); }

void neg_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  cv.out(n, bin(cv, "mul", x, cv.cs(-1, C::dtype(x))));
}

void reciprocal_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  DataType dt = float_out(cv, n, x);
  cv.out(n, bin(cv, "real_div", cv.cs(1, dt), cv.cast(x, dt)));
}

void square_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  cv.out(n, bin(cv, "mul", x, x));
}

void frac_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  Var* tr = bin(cv, "mul", cv.op("sign", {C::a("x", x)}), cv.op("floor", {C::a("x", cv.op("abs", {C::a("x", x)}))}));
  cv.out(n, bin(cv, "sub", x, tr));
}

// nan_to_num: NaN -> nan (0), +inf -> posinf (the dtype's max), -inf -> neginf (its lowest)
void nan_to_num(C& cv, const json& n) {
  Var* x = self(cv, n);
  DataType dt = C::dtype(x);
  if (!is_float(dt)) {
    cv.out(n, cv.op("identity", {C::a("x", x)}));
    return;
  }
  double big = dt == DataType::Float16 ? 65504.0 : static_cast<double>(std::numeric_limits<float>::max());
  double nan = cv.has(n, "nan") ? cv.f(n, "nan", 0) : 0.0;
  double pinf = cv.has(n, "posinf") ? cv.f(n, "posinf", big) : big;
  double ninf = cv.has(n, "neginf") ? cv.f(n, "neginf", -big) : -big;
  Var* r = sel(cv, bin(cv, "equal", x, cv.cs(INFINITY, dt)), cv.cs(pinf, dt), x);
  r = sel(cv, bin(cv, "equal", x, cv.cs(-INFINITY, dt)), cv.cs(ninf, dt), r);
  cv.out(n, sel(cv, bin(cv, "not_equal", x, x), cv.cs(nan, dt), r));
}

// clamp family
void clamp_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  if (auto od = cv.out_dtype(n)) x = cv.cast(x, *od);
  if (C::has(n, "min") && !C::is_number(n, "min")) {
    // clamp.Tensor
    Var* r = x;
    if (Var* lo = cv.opt_tensor(n, "min")) r = bin(cv, "maximum", r, cv.cast(lo, C::dtype(x)));
    if (Var* hi = cv.opt_tensor(n, "max")) r = bin(cv, "minimum", r, cv.cast(hi, C::dtype(x)));
    cv.out(n, r == x ? cv.op("identity", {C::a("x", x)}) : r);
    return;
  }
  // a bound may be a symbolic size (decomposed upsampling clamps indices to s - 1)
  auto symbolic = [&](const char* k) {
    const json* a = C::arg(n, k);
    return a && ((a->contains("as_sym_int") && !cv.sym_dim(*a)->is_const()) || cv.item_value(*a));
  };
  if (symbolic("min") || symbolic("max")) {
    Var* r = x;
    if (C::has(n, "min")) r = bin(cv, "maximum", r, cv.scalar_or_tensor(n, "min", C::dtype(x)));
    if (C::has(n, "max")) r = bin(cv, "minimum", r, cv.scalar_or_tensor(n, "max", C::dtype(x)));
    cv.out(n, r);
    return;
  }
  std::optional<double> lo, hi;
  if (C::has(n, "min")) lo = cv.f(n, "min", 0);
  if (C::has(n, "max")) hi = cv.f(n, "max", 0);
  Var* r = clip(cv, x, lo, hi);
  cv.out(n, r == x ? cv.op("identity", {C::a("x", x)}) : r);
}

void clamp_min(C& cv, const json& n) {
  Var* x = self(cv, n);
  if (C::is_number(n, "min") && !C::arg(n, "min")->contains("as_sym_int") && !cv.item_value(*C::arg(n, "min")))
    cv.out(n, clip(cv, x, cv.f(n, "min", 0), std::nullopt));
  else cv.out(n, bin(cv, "maximum", x, cv.scalar_or_tensor(n, "min", C::dtype(x))));
}

void clamp_max(C& cv, const json& n) {
  Var* x = self(cv, n);
  if (C::is_number(n, "max") && !C::arg(n, "max")->contains("as_sym_int") && !cv.item_value(*C::arg(n, "max")))
    cv.out(n, clip(cv, x, std::nullopt, cv.f(n, "max", 0)));
  else cv.out(n, bin(cv, "minimum", x, cv.scalar_or_tensor(n, "max", C::dtype(x))));
}

// where / masked_fill
void where_op(C& cv, const json& n) {
  Var* cond = cv.cast(cv.tensor(n, "condition"), DataType::Bool);
  if (!C::has(n, "self") && !C::has(n, "other")) cv.fail(n, "where(condition) (nonzero) is not supported");
  DataType dt = DataType::Float32;
  if (auto od = cv.out_dtype(n)) dt = *od;
  Var* a = cv.scalar_or_tensor(n, "self", dt);
  Var* b2 = cv.scalar_or_tensor(n, "other", dt);
  cv.out(n, cv.op("select", {C::a("cond", cond), C::a("a", a), C::a("b", b2)}));
}

void masked_fill(C& cv, const json& n) {
  Var* x = self(cv, n);
  Var* mask = cv.cast(cv.tensor(n, "mask"), DataType::Bool);
  Var* v = cv.scalar_or_tensor(n, "value", C::dtype(x));
  cv.out(n, cv.op("select", {C::a("cond", mask), C::a("a", v), C::a("b", x)}));
}

void lerp_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  Var* e = cv.cast(cv.tensor(n, "end"), C::dtype(x));
  Var* w = cv.scalar_or_tensor(n, "weight", C::dtype(x));
  cv.out(n, bin(cv, "add", x, bin(cv, "mul", w, bin(cv, "sub", e, x))));
}

void addcmul(C& cv, const json& n) {
  Var* x = self(cv, n);
  Var* p = bin(cv, "mul", cv.cast(cv.tensor(n, "tensor1"), C::dtype(x)), cv.cast(cv.tensor(n, "tensor2"), C::dtype(x)));
  double v = cv.f(n, "value", 1);
  if (v != 1) p = bin(cv, "mul", p, cv.cs(v, C::dtype(x)));
  cv.out(n, bin(cv, "add", x, p));
}

void addcdiv(C& cv, const json& n) {
  Var* x = self(cv, n);
  Var* p = bin(cv, "real_div", cv.cast(cv.tensor(n, "tensor1"), C::dtype(x)), cv.cast(cv.tensor(n, "tensor2"), C::dtype(x)));
  double v = cv.f(n, "value", 1);
  if (v != 1) p = bin(cv, "mul", p, cv.cs(v, C::dtype(x)));
  cv.out(n, bin(cv, "add", x, p));
}

}  // namespace

void register_elementwise(OpTable& t) {
  t.on("aten.rsub", rsub);
  t.on({"aten.div", "aten.true_divide"}, div_op);
  t.on("aten.floor_divide", floor_divide);
  t.on("aten.remainder", remainder_op);
  t.on("aten.fmod", fmod_op);
  t.on("aten.pow", pow_op);
  t.on("aten.floor", floor_op);
  t.on("aten.ceil", ceil_op);
  t.on("aten.trunc", trunc_op);
  t.on("aten.round", round_op);
  t.on({"aten.sign", "aten.sgn"}, sign_op);
  t.on("aten.neg", neg_op);
  t.on("aten.reciprocal", reciprocal_op);
  t.on("aten.square", square_op);
  t.on("aten.frac", frac_op);
  t.on("aten.nan_to_num", nan_to_num);
  t.on({"aten.clamp", "aten.clip"}, clamp_op);
  t.on("aten.clamp_min", clamp_min);
  t.on("aten.clamp_max", clamp_max);
  t.on("aten.where", where_op);
  t.on("aten.masked_fill", masked_fill);
  t.on("aten.lerp", lerp_op);
  t.on("aten.addcmul", addcmul);
  t.on("aten.addcdiv", addcdiv);
  arith(t, "aten.add", "add");
  arith(t, "aten.sub", "sub");
  arith(t, "aten.mul", "mul");
  arith(t, "aten.maximum", "maximum");
  arith(t, "aten.minimum", "minimum");
  arith(t, "aten.fmax", "maximum");
  arith(t, "aten.fmin", "minimum");
  unary_keep(t, "aten.abs", "abs");
}

}  // namespace torch_detail
}  // namespace milkit
