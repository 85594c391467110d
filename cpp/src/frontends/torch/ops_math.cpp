// ATen unary and binary math: exponentials, logarithms, trigonometric and hyperbolic functions, erf / erfc / erfinv, atan2, hypot, isnan / isinf / signbit.
#include <cmath>
#include <limits>

#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

void log2_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  DataType dt = float_out(cv, n, x);
  cv.out(n, bin(cv, "mul", cv.op("log", {C::a("x", cv.cast(x, dt))}), cv.cs(1.0 / std::log(2.0), dt)));
}

void log10_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  DataType dt = float_out(cv, n, x);
  cv.out(n, bin(cv, "mul", cv.op("log", {C::a("x", cv.cast(x, dt))}), cv.cs(1.0 / std::log(10.0), dt)));
}

void log1p_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  DataType dt = float_out(cv, n, x);
  cv.out(n, cv.op("log", {C::a("x", bin(cv, "add", cv.cast(x, dt), cv.cs(1, dt)))}));
}

void expm1_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  DataType dt = float_out(cv, n, x);
  cv.out(n, bin(cv, "sub", cv.op("exp", {C::a("x", cv.cast(x, dt))}), cv.cs(1, dt)));
}

void isnan_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  cv.out(n, bin(cv, "not_equal", x, x));
}

void isinf_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  cv.out(n, bin(cv, "equal", cv.op("abs", {C::a("x", x)}), cv.cs(INFINITY, C::dtype(x))));
}

void atan2_op(C& cv, const json& n) {
  Var* y = self(cv, n);
  Var* x = cv.tensor(n, "other");
  DataType dt = float_out(cv, n, y);
  cv.out(n, atan2_of(cv, cv.cast(y, dt), cv.cast(x, dt)));
}

void hypot_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  DataType dt = float_out(cv, n, x);
  x = cv.cast(x, dt);
  Var* y = cv.cast(cv.tensor(n, "other"), dt);
  cv.out(n, cv.op("sqrt", {C::a("x", bin(cv, "add", bin(cv, "mul", x, x), bin(cv, "mul", y, y)))}));
}

// acosh(x) = log(x + sqrt(x^2 - 1)); asinh(x) = sign(x) log(|x| + sqrt(x^2 + 1)) (odd, so
// large negative x does not cancel)
void acosh_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  DataType dt = float_out(cv, n, x);
  x = cv.cast(x, dt);
  Var* r = cv.op("sqrt", {C::a("x", bin(cv, "sub", bin(cv, "mul", x, x), cv.cs(1, dt)))});
  cv.out(n, cv.op("log", {C::a("x", bin(cv, "add", x, r))}));
}

void asinh_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  DataType dt = float_out(cv, n, x);
  x = cv.cast(x, dt);
  Var* ax = cv.op("abs", {C::a("x", x)});
  Var* r = cv.op("sqrt", {C::a("x", bin(cv, "add", bin(cv, "mul", x, x), cv.cs(1, dt)))});
  Var* l = cv.op("log", {C::a("x", bin(cv, "add", ax, r))});
  cv.out(n, bin(cv, "mul", cv.op("sign", {C::a("x", x)}), l));
}

void erfc_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  DataType dt = float_out(cv, n, x);
  cv.out(n, bin(cv, "sub", cv.cs(1, dt), cv.op("erf", {C::a("x", cv.cast(x, dt))})));
}

// erfinv: M. Giles' single-precision approximation ("Approximating the erfinv function", GPU
// Computing Gems, 2011; relative error below 3e-7 against torch over (-1, 1)), a polynomial in
// w = -log(1 - x^2) - 2.5 for w < 5, else in sqrt(w) - 3. +-1 give +-inf and |x| > 1 NaN, as
// torch (MIL's log would keep log(0) finite).
void erfinv(C& cv, const json& n) {
  Var* x = self(cv, n);
  DataType dt = float_out(cv, n, x);
  x = cv.cast(x, dt);
  Var* one_m = bin(cv, "sub", cv.cs(1, dt), x);
  Var* one_p = bin(cv, "add", cv.cs(1, dt), x);
  Var* w = bin(cv, "mul", cv.op("log", {C::a("x", bin(cv, "mul", one_m, one_p))}), cv.cs(-1, dt));
  auto horner = [&](Var* t, std::initializer_list<double> cs) {
    auto it = cs.begin();
    Var* p = cv.cs(*it++, dt);
    for (; it != cs.end(); ++it) p = bin(cv, "add", bin(cv, "mul", p, t), cv.cs(*it, dt));
    return p;
  };
  Var* central = horner(bin(cv, "sub", w, cv.cs(2.5, dt)),
                        {2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                         -0.00125372503, -0.00417768164, 0.246640727, 1.50140941});
  Var* tail = horner(bin(cv, "sub", cv.op("sqrt", {C::a("x", w)}), cv.cs(3, dt)),
                     {-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                      -0.0076224613, 0.00943887047, 1.00167406, 2.83297682});
  Var* r = bin(cv, "mul", sel(cv, bin(cv, "less", w, cv.cs(5, dt)), central, tail), x);
  Var* ax = cv.op("abs", {C::a("x", x)});
  r = sel(cv, bin(cv, "equal", ax, cv.cs(1, dt)), bin(cv, "mul", x, cv.cs(INFINITY, dt)), r);
  cv.out(n, sel(cv, bin(cv, "greater", ax, cv.cs(1, dt)), cv.cs(NAN, dt), r));
}

// real tensors: sgn is sign
// signbit: x < 0, or a negative zero (1 / -0 is -inf)
void signbit_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  DataType dt = C::dtype(x);
  if (dt == DataType::Bool) {
    cv.out(n, bin(cv, "not_equal", x, x));  // all false
    return;
  }
  Var* neg = bin(cv, "less", x, cv.cs(0, dt));
  if (is_float(dt)) {
    Var* negzero = bin(cv, "logical_and", bin(cv, "equal", x, cv.cs(0, dt)),
                       bin(cv, "less", bin(cv, "real_div", cv.cs(1, dt), x), cv.cs(0, dt)));
    neg = bin(cv, "logical_or", neg, negzero);
  }
  cv.out(n, neg);
}

}  // namespace

// atan2(y, x): atan(y / x) moved to the right half-plane's quadrant; y / x is +-inf for x == 0
// (atan gives +-pi/2), and atan2(0, 0) is 0 as in torch.
Var* atan2_of(C& cv, Var* y, Var* x) {
  DataType dt = C::dtype(y);
  Var* q = cv.op("atan", {C::a("x", bin(cv, "real_div", y, x))});
  Var* zero = cv.cs(0, dt);
  Var* adj = sel(cv, bin(cv, "less", x, zero),
                 sel(cv, bin(cv, "greater_equal", y, zero), cv.cs(M_PI, dt), cv.cs(-M_PI, dt)), zero);
  Var* r = bin(cv, "add", q, adj);
  Var* both0 = bin(cv, "logical_and", bin(cv, "equal", x, zero), bin(cv, "equal", y, zero));
  return sel(cv, both0, zero, r);
}

void register_math(OpTable& t) {
  t.on("aten.log2", log2_op);
  t.on("aten.log10", log10_op);
  t.on("aten.log1p", log1p_op);
  t.on("aten.expm1", expm1_op);
  t.on("aten.isnan", isnan_op);
  t.on("aten.isinf", isinf_op);
  t.on({"aten.atan2.default", "aten.arctan2.default"}, atan2_op);
  t.on("aten.hypot.default", hypot_op);
  t.on({"aten.acosh", "aten.arccosh"}, acosh_op);
  t.on({"aten.asinh", "aten.arcsinh"}, asinh_op);
  t.on({"aten.erfc", "aten.special_erfc"}, erfc_op);
  t.on({"aten.erfinv", "aten.special_erfinv"}, erfinv);
  t.on("aten.signbit", signbit_op);
  unary(t, "aten.sigmoid", "sigmoid");
  unary(t, "aten.tanh", "tanh");
  unary(t, "aten.exp", "exp");
  unary(t, "aten.exp2", "exp2");
  unary(t, "aten.log", "log");
  unary(t, "aten.sqrt", "sqrt");
  unary(t, "aten.rsqrt", "rsqrt");
  unary(t, "aten.sin", "sin");
  unary(t, "aten.cos", "cos");
  unary(t, "aten.tan", "tan");
  unary(t, "aten.asin", "asin");
  unary(t, "aten.acos", "acos");
  unary(t, "aten.atan", "atan");
  unary(t, "aten.sinh", "sinh");
  unary(t, "aten.cosh", "cosh");
  unary(t, "aten.atanh", "atanh");
  unary(t, "aten.erf", "erf");
}

}  // namespace torch_detail
}  // namespace milkit
