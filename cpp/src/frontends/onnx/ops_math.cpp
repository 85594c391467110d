// ONNX operators: arithmetic, unary math, matrix products, cumulative sums and products, Det,
// Einsum.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>

#include "milkit/compose/arith.h"
#include "milkit/compose/einsum.h"
#include "milkit/compose/norms.h"
#include "milkit/compose/sampling.h"
#include "milkit/compose/scan.h"
#include "milkit/compose/windows.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

// Makes y the dtype of x (ONNX's Pow, and int/float mixes after narrowing).
Var* like(C& cv, Var* y, Var* x) { return cv.cast(y, C::dtype(x)); }

void variadic(OpTable& t, const char* onnx, const char* mil, bool mean) {
  t.on(onnx, 1, [mil, mean](C& cv, const NodeProto& n) {
    if (n.input_size() == 0) cv.fail(n, "needs at least one input");
    Var* acc = cv.in(n, 0);
    for (int i = 1; i < n.input_size(); ++i) acc = binary(cv, mil, acc, cv.in(n, i));
    if (mean && n.input_size() > 1)
      acc = binary(cv, "real_div", acc, cv.cs(n.input_size(), C::dtype(acc)));
    cv.out(n, 0, acc);
  });
}

Var* neg(C& cv, Var* x) { return binary(cv, "mul", x, cv.cs(-1, C::dtype(x))); }

bool is_fp(Var* v) { return is_float(C::dtype(v)); }

void div(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  Var* y = cv.in(n, 1);
  // integer division truncates toward zero in ONNX (C semantics); MIL's floor_div floors
  cv.out(n, 0, is_fp(x) ? binary(cv, "real_div", x, y) : compose::trunc_div(cv.em, x, y));
}

void pow(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  Var* y = cv.in(n, 1);
  if (!is_fp(x)) {
    Var* r = binary(cv, "pow", cv.cast(x, DataType::Float32), cv.cast(y, DataType::Float32));
    return cv.out(n, 0, cv.cast(cv.op("round", {C::arg("x", r)}), C::dtype(x)));
  }
  cv.out(n, 0, binary(cv, "pow", x, like(cv, y, x)));
}

void mod(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  Var* y = cv.in(n, 1);
  // fmod=1: C's fmod (the sign of the dividend); else MIL's mod (the sign of the divisor)
  cv.out(n, 0,
         C::attr_int(n, "fmod", 0) != 0 ? compose::fmod(cv.em, x, y) : binary(cv, "mod", x, y));
}

void abs(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  if (is_fp(x)) return cv.out(n, 0, cv.op("abs", {C::arg("x", x)}));
  Var* neg_x = neg(cv, x);
  cv.out(n, 0, binary(cv, "maximum", x, neg_x));
}

void neg_op(C& cv, const NodeProto& n) { cv.out(n, 0, neg(cv, cv.in(n, 0))); }

void log(C& cv, const NodeProto& n) {  // log(0) = -inf, as ONNX (MIL's default epsilon is 1e-45)
  Var* x = cv.in(n, 0);
  cv.out(n, 0,
         cv.op("log", {C::arg("x", x), C::arg("epsilon", Value::scalar_float(C::dtype(x), 0))}));
}

void reciprocal(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  cv.out(n, 0, binary(cv, "real_div", cv.cs(1, C::dtype(x)), x));
}

void sign(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  if (is_fp(x)) return cv.out(n, 0, cv.op("sign", {C::arg("x", x)}));
  cv.out(n, 0, cv.cast(cv.op("sign", {C::arg("x", cv.cast(x, DataType::Float32))}), C::dtype(x)));
}

void asinh(C& cv, const NodeProto& n) {  // log(x + sqrt(x^2 + 1))
  Var* x = cv.in(n, 0);
  Var* s = cv.op("sqrt",
                 {C::arg("x", binary(cv, "add", binary(cv, "mul", x, x), cv.cs(1, C::dtype(x))))});
  cv.out(n, 0, cv.op("log", {C::arg("x", binary(cv, "add", x, s))}));
}

void acosh(C& cv, const NodeProto& n) {  // log(x + sqrt(x^2 - 1))
  Var* x = cv.in(n, 0);
  Var* s = cv.op("sqrt",
                 {C::arg("x", binary(cv, "sub", binary(cv, "mul", x, x), cv.cs(1, C::dtype(x))))});
  cv.out(n, 0, cv.op("log", {C::arg("x", binary(cv, "add", x, s))}));
}

void mat_mul(C& cv, const NodeProto& n) {
  cv.out(n, 0, cv.op("matmul", {C::arg("x", cv.in(n, 0)), C::arg("y", cv.in(n, 1))}));
}

void gemm(C& cv, const NodeProto& n) {
  Var* a = cv.in(n, 0);
  Var* b = cv.in(n, 1);
  float alpha = C::attr_float(n, "alpha", 1.0f), beta = C::attr_float(n, "beta", 1.0f);
  Var* y = cv.op("matmul", {C::arg("x", a), C::arg("y", b),
                            C::arg_bool("transpose_x", C::attr_int(n, "transA", 0) != 0),
                            C::arg_bool("transpose_y", C::attr_int(n, "transB", 0) != 0)});
  if (alpha != 1.0f) y = binary(cv, "mul", y, cv.cs(alpha, C::dtype(y)));
  if (C::has(n, 2) && beta != 0.0f) {
    Var* c = cv.in(n, 2);
    if (beta != 1.0f) c = binary(cv, "mul", c, cv.cs(beta, C::dtype(c)));
    y = binary(cv, "add", y, c);
  }
  cv.out(n, 0, y);
}

void einsum(C& cv, const NodeProto& n) {
  std::vector<Var*> ins;
  for (int i = 0; i < n.input_size(); ++i) ins.push_back(cv.in(n, i));
  Var* y = compose::einsum(cv.em, C::attr_string(n, "equation", ""), ins);
  if (std::find(ins.begin(), ins.end(), y) != ins.end()) y = cv.em.un("identity", y);
  cv.out(n, 0, y);
}

// CumSum / CumProd's axis (input 1), exclusive and reverse.
compose::ScanSpec scan_spec(C& cv, const NodeProto& n, Var* x) {
  compose::ScanSpec s;
  s.axis = cv.axis(n, cv.ints(n, 1, "axis").at(0), cv.rank(n, x));
  s.exclusive = C::attr_int(n, "exclusive", 0) != 0;
  s.reverse = C::attr_int(n, "reverse", 0) != 0;
  return s;
}

void cum_sum(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  cv.out(n, 0, compose::cumsum(cv.em, x, scan_spec(cv, n, x)));
}

void cum_prod(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  cv.out(n, 0, compose::cumprod(cv.em, x, scan_spec(cv, n, x)));
}

void det(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  auto xs = C::static_shape(x);
  if (!xs || xs->size() < 2) cv.fail(n, "needs the input's shape to be known");
  int r = static_cast<int>(xs->size());
  int64_t m = xs->back();
  if ((*xs)[static_cast<size_t>(r - 2)] != m) cv.fail(n, "the matrices must be square");
  if (m > 3) cv.fail(n, "determinants of matrices larger than 3x3 are not supported");
  std::vector<int64_t> out(xs->begin(), xs->end() - 2);
  auto e = [&](int64_t i, int64_t j) {
    Var* s = cv.em.slice_axis(cv.em.slice_axis(x, r - 2, i, i + 1), r - 1, j, j + 1);
    return cv.op("reshape", {C::arg("x", s), C::arg_ints32("shape", out)});
  };
  auto mul = [&](Var* a, Var* b) { return binary(cv, "mul", a, b); };
  Var* y;
  if (m == 1)
    y = e(0, 0);
  else if (m == 2)
    y = binary(cv, "sub", mul(e(0, 0), e(1, 1)), mul(e(0, 1), e(1, 0)));
  else {
    auto minor = [&](int64_t a, int64_t b, int64_t c, int64_t d) {
      return binary(cv, "sub", mul(e(1, a), e(2, b)), mul(e(1, c), e(2, d)));
    };
    y = binary(cv, "add",
               binary(cv, "sub", mul(e(0, 0), minor(1, 2, 2, 1)), mul(e(0, 1), minor(0, 2, 2, 0))),
               mul(e(0, 2), minor(0, 1, 1, 0)));
  }
  cv.out(n, 0, y);
}

}  // namespace

void register_math(OpTable& t) {
  simple_binary(t, "Add", "add");
  simple_binary(t, "Sub", "sub");
  simple_binary(t, "Mul", "mul");
  t.on("Div", 1, div);
  t.on("Pow", 1, pow);
  t.on("Mod", 1, mod);
  variadic(t, "Max", "maximum", false);
  variadic(t, "Min", "minimum", false);
  variadic(t, "Sum", "add", false);
  variadic(t, "Mean", "add", true);
  t.on("Abs", 1, abs);
  t.on("Neg", 1, neg_op);
  simple_unary(t, "Exp", "exp");
  t.on("Log", 1, log);
  simple_unary(t, "Sqrt", "sqrt");
  t.on("Reciprocal", 1, reciprocal);
  simple_unary(t, "Floor", "floor");
  simple_unary(t, "Ceil", "ceil");
  simple_unary(t, "Round", "round");
  t.on("Sign", 1, sign);
  simple_unary(t, "Sin", "sin");
  simple_unary(t, "Cos", "cos");
  simple_unary(t, "Tan", "tan");
  simple_unary(t, "Asin", "asin");
  simple_unary(t, "Acos", "acos");
  simple_unary(t, "Atan", "atan");
  simple_unary(t, "Sinh", "sinh");
  simple_unary(t, "Cosh", "cosh");
  simple_unary(t, "Atanh", "atanh");
  simple_unary(t, "Erf", "erf");
  t.on("Asinh", 1, asinh);
  t.on("Acosh", 1, acosh);
  t.on("MatMul", 1, mat_mul);
  t.on("Gemm", 1, gemm);
  t.on("CumSum", 1, cum_sum);
  t.on("Einsum", 1, einsum);
  t.on("CumProd", 1, cum_prod);
  t.on("Det", 1, det);
}

}  // namespace onnx_detail
}  // namespace milkit
