// ONNX elementwise operators: arithmetic, comparisons, logic, unary math, activations, Cast, Clip.
#include <cmath>
#include <limits>

#include "milkit/compose/arith.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

// Makes y the dtype of x (ONNX's Pow, and int/float mixes after narrowing).
Var* like(C& cv, Var* y, Var* x) { return cv.cast(y, C::dtype(x)); }

void simple_binary(OpTable& t, const char* onnx, const char* mil) {
  t.on(onnx, 1, [mil](C& cv, const NodeProto& n) { cv.out(n, 0, binary(cv, mil, cv.in(n, 0), cv.in(n, 1))); });
}

void simple_unary(OpTable& t, const char* onnx, const char* mil) {
  t.on(onnx, 1, [mil](C& cv, const NodeProto& n) { cv.out(n, 0, cv.op(mil, {C::arg("x", cv.in(n, 0))})); });
}

void variadic(OpTable& t, const char* onnx, const char* mil, bool mean) {
  t.on(onnx, 1, [mil, mean](C& cv, const NodeProto& n) {
    if (n.input_size() == 0) cv.fail(n, "needs at least one input");
    Var* acc = cv.in(n, 0);
    for (int i = 1; i < n.input_size(); ++i) acc = binary(cv, mil, acc, cv.in(n, i));
    if (mean && n.input_size() > 1) acc = binary(cv, "real_div", acc, cv.cs(n.input_size(), C::dtype(acc)));
    cv.out(n, 0, acc);
  });
}

Var* neg(C& cv, Var* x) { return binary(cv, "mul", x, cv.cs(-1, C::dtype(x))); }

bool is_fp(Var* v) { return is_float(C::dtype(v)); }

}  // namespace

namespace {

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
  cv.out(n, 0, C::attr_int(n, "fmod", 0) != 0 ? compose::fmod(cv.em, x, y) : binary(cv, "mod", x, y));
}

void p_relu(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  Var* slope = cv.in(n, 1);
  Var* pos = binary(cv, "greater_equal", x, cv.cs(0, C::dtype(x)));
  cv.out(n, 0, cv.op("select", {C::arg("cond", pos), C::arg("a", x), C::arg("b", binary(cv, "mul", x, slope))}));
}

void where_op(C& cv, const NodeProto& n) {
  cv.out(n, 0, cv.op("select", {C::arg("cond", cv.in(n, 0)), C::arg("a", cv.in(n, 1)), C::arg("b", cv.in(n, 2))}));
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
  cv.out(n, 0, cv.op("log", {C::arg("x", x), C::arg("epsilon", Value::scalar_float(C::dtype(x), 0))}));
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
  Var* s = cv.op("sqrt", {C::arg("x", binary(cv, "add", binary(cv, "mul", x, x), cv.cs(1, C::dtype(x))))});
  cv.out(n, 0, cv.op("log", {C::arg("x", binary(cv, "add", x, s))}));
}

void acosh(C& cv, const NodeProto& n) {  // log(x + sqrt(x^2 - 1))
  Var* x = cv.in(n, 0);
  Var* s = cv.op("sqrt", {C::arg("x", binary(cv, "sub", binary(cv, "mul", x, x), cv.cs(1, C::dtype(x))))});
  cv.out(n, 0, cv.op("log", {C::arg("x", binary(cv, "add", x, s))}));
}

void is_na_n(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  cv.out(n, 0, binary(cv, "not_equal", x, x));
}

void is_inf(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  double inf = std::numeric_limits<double>::infinity();
  bool neg_ = C::attr_int(n, "detect_negative", 1) != 0, pos = C::attr_int(n, "detect_positive", 1) != 0;
  Var* r;
  if (neg_ && pos) r = binary(cv, "equal", cv.op("abs", {C::arg("x", x)}), cv.cs(inf, C::dtype(x)));
  else if (pos) r = binary(cv, "equal", x, cv.cs(inf, C::dtype(x)));
  else if (neg_) r = binary(cv, "equal", x, cv.cs(-inf, C::dtype(x)));
  else r = binary(cv, "not_equal", x, x), r = binary(cv, "logical_and", r, binary(cv, "equal", x, x));
  cv.out(n, 0, r);
}

void leaky_relu(C& cv, const NodeProto& n) {
  cv.out(n, 0, cv.op("leaky_relu", {C::arg("x", cv.in(n, 0)), C::arg_f32("alpha", C::attr_float(n, "alpha", 0.01f))}));
}

void elu(C& cv, const NodeProto& n) {
  cv.out(n, 0, cv.op("elu", {C::arg("x", cv.in(n, 0)), C::arg_f32("alpha", C::attr_float(n, "alpha", 1.0f))}));
}

void selu(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  float alpha = C::attr_float(n, "alpha", 1.67326319217681884765625f), gamma = C::attr_float(n, "gamma", 1.05070102214813232421875f);
  Var* e = cv.op("elu", {C::arg("x", x), C::arg_f32("alpha", alpha)});
  cv.out(n, 0, binary(cv, "mul", e, cv.cs(gamma, C::dtype(x))));
}

void celu(C& cv, const NodeProto& n) {  // alpha * elu(x / alpha)
  Var* x = cv.in(n, 0);
  float alpha = C::attr_float(n, "alpha", 1.0f);
  Var* e = cv.op("elu", {C::arg("x", binary(cv, "real_div", x, cv.cs(alpha, C::dtype(x)))), C::arg_f32("alpha", 1.0)});
  cv.out(n, 0, binary(cv, "mul", e, cv.cs(alpha, C::dtype(x))));
}

void hard_sigmoid(C& cv, const NodeProto& n) {
  cv.out(n, 0, cv.op("sigmoid_hard", {C::arg("x", cv.in(n, 0)), C::arg_f32("alpha", C::attr_float(n, "alpha", 0.2f)),
                                      C::arg_f32("beta", C::attr_float(n, "beta", 0.5f))}));
}

void hard_swish(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  Var* s = cv.op("sigmoid_hard", {C::arg("x", x), C::arg_f32("alpha", 1.0 / 6.0), C::arg_f32("beta", 0.5)});
  cv.out(n, 0, binary(cv, "mul", x, s));
}

void gelu(C& cv, const NodeProto& n) {
  std::string approx = C::attr_string(n, "approximate", "none");
  if (approx != "none" && approx != "tanh") cv.fail(n, "approximate='" + approx + "' is not 'none' or 'tanh'");
  cv.out(n, 0, cv.op("gelu", {C::arg("x", cv.in(n, 0)), C::arg_str("mode", approx == "tanh" ? "TANH_APPROXIMATION" : "EXACT")}));
}

void mish(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  Var* sp = cv.op("softplus", {C::arg("x", x)});
  cv.out(n, 0, binary(cv, "mul", x, cv.op("tanh", {C::arg("x", sp)})));
}

void thresholded_relu(C& cv, const NodeProto& n) {  // x where x > alpha (strictly), else 0
  Var* x = cv.in(n, 0);
  Var* keep = binary(cv, "greater", x, cv.cs(C::attr_float(n, "alpha", 1.0f), C::dtype(x)));
  cv.out(n, 0, cv.op("select", {C::arg("cond", keep), C::arg("a", x), C::arg("b", cv.cs(0, C::dtype(x)))}));
}

void clip(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  DataType dt = C::dtype(x);
  Var* lo = nullptr;
  Var* hi = nullptr;
  if (cv.opset < 11) {
    if (C::find_attr(n, "min")) lo = cv.cs(C::attr_float(n, "min", 0), dt);
    if (C::find_attr(n, "max")) hi = cv.cs(C::attr_float(n, "max", 0), dt);
  } else {
    if (C::has(n, 1)) lo = cv.in(n, 1);
    if (C::has(n, 2)) hi = cv.in(n, 2);
  }
  Var* r = x;
  if (lo) r = binary(cv, "maximum", r, lo);
  if (hi) r = binary(cv, "minimum", r, hi);
  if (r == x) r = cv.op("identity", {C::arg("x", x)});
  cv.out(n, 0, r);
}

// Softmax from opset 13: along one axis (default the last).
void softmax_v13(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", -1), cv.rank(n, x));
  cv.out(n, 0, cv.op("softmax", {C::arg("x", x), C::arg_i32("axis", ax)}));
}

// Softmax before opset 13: over the flattened trailing dims [axis, rank) (default axis 1).
void softmax_v1(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", 1), r);
  if (ax == r - 1) return cv.out(n, 0, cv.op("softmax", {C::arg("x", x), C::arg_i32("axis", ax)}));
  Var* shp = cv.op("shape", {C::arg("x", x)});
  Var* flat = cv.op("reshape", {C::arg("x", x), C::arg_ints32("shape", {0, -1})});
  if (ax != 1 || r != 2) {
    Var* lead =
        cv.op("reduce_prod",
              {C::arg("x", cv.op("slice_by_index", {C::arg("x", shp), C::arg_ints32("begin", {0}),
                                                    C::arg_ints32("end", {ax})})),
               C::arg_bool("keep_dims", true)});
    if (ax == 0) lead = cv.ci({1});
    Var* ns = cv.op("concat",
                    {Arg{"values", {ArgItem{lead, nullptr}, ArgItem{cv.ci({-1}), nullptr}}, true},
                     C::arg_i32("axis", 0)});
    flat = cv.op("reshape", {C::arg("x", x), C::arg("shape", ns)});
  }
  Var* s = cv.op("softmax", {C::arg("x", flat), C::arg_i32("axis", -1)});
  cv.out(n, 0, cv.op("reshape", {C::arg("x", s), C::arg("shape", shp)}));
}

// x - logsumexp(x) over `axes`.
void log_softmax_over(C& cv, const NodeProto& n, Var* x, const std::vector<int64_t>& axes) {
  Var* lse = cv.op("reduce_log_sum_exp",
                   {C::arg("x", x), C::arg_ints32("axes", axes), C::arg_bool("keep_dims", true)});
  cv.out(n, 0, binary(cv, "sub", x, lse));
}

// LogSoftmax from opset 13: along one axis (default the last).
void log_softmax_v13(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  log_softmax_over(cv, n, x, {cv.axis(n, C::attr_int(n, "axis", -1), cv.rank(n, x))});
}

// LogSoftmax before opset 13: over the trailing dims [axis, rank) (default axis 1).
void log_softmax_v1(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  std::vector<int64_t> axes;
  for (int64_t i = cv.axis(n, C::attr_int(n, "axis", 1), r); i < r; ++i) axes.push_back(i);
  log_softmax_over(cv, n, x, axes);
}

void identity(C& cv, const NodeProto& n) { cv.out(n, 0, cv.in(n, 0)); }

void cast(C& cv, const NodeProto& n) {
  int to = static_cast<int>(C::attr_int(n, "to", 0));
  auto dt = mil_dtype(to);
  if (!dt) cv.fail(n, "cast to " + onnx_type_name(to) + " is not supported");
  Var* x = cv.in(n, 0);
  if (is_narrow_type(to) && cv.elem_type(n, 0) != to) {
    cv.out(n, 0, to_narrow(cv, n, x, to, C::attr_int(n, "saturate", 1) != 0));
    return;
  }
  cv.out(n, 0, C::dtype(x) == *dt ? x : cv.cast(x, *dt));
}

void cast_like(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int to = cv.elem_type(n, 1);
  if (is_narrow_type(to) && cv.elem_type(n, 0) != to) {
    cv.out(n, 0, to_narrow(cv, n, x, to, C::attr_int(n, "saturate", 1) != 0));
    return;
  }
  DataType dt = C::dtype(cv.in(n, 1));
  cv.out(n, 0, C::dtype(x) == dt ? x : cv.cast(x, dt));
}

}  // namespace

void register_elementwise(OpTable& t) {
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
  simple_binary(t, "Equal", "equal");
  simple_binary(t, "Greater", "greater");
  simple_binary(t, "GreaterOrEqual", "greater_equal");
  simple_binary(t, "Less", "less");
  simple_binary(t, "LessOrEqual", "less_equal");
  simple_binary(t, "And", "logical_and");
  simple_binary(t, "Or", "logical_or");
  simple_binary(t, "Xor", "logical_xor");
  simple_unary(t, "Not", "logical_not");
  t.on("PRelu", 1, p_relu);
  t.on("Where", 1, where_op);

  // ---- unary math -------------------------------------------------------------------------
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
  for (auto [o, m] : std::initializer_list<std::pair<const char*, const char*>>{
           {"Sin", "sin"}, {"Cos", "cos"}, {"Tan", "tan"}, {"Asin", "asin"}, {"Acos", "acos"}, {"Atan", "atan"},
           {"Sinh", "sinh"}, {"Cosh", "cosh"}, {"Tanh", "tanh"}, {"Atanh", "atanh"}, {"Erf", "erf"},
           {"Relu", "relu"}, {"Sigmoid", "sigmoid"}, {"Softplus", "softplus"}, {"Softsign", "softsign"}})
    simple_unary(t, o, m);
  t.on("Asinh", 1, asinh);
  t.on("Acosh", 1, acosh);
  t.on("IsNaN", 1, is_na_n);
  t.on("IsInf", 1, is_inf);

  // ---- activations ------------------------------------------------------------------------
  t.on("LeakyRelu", 1, leaky_relu);
  t.on("Elu", 1, elu);
  t.on("Selu", 1, selu);
  t.on("Celu", 1, celu);
  t.on("HardSigmoid", 1, hard_sigmoid);
  t.on("HardSwish", 1, hard_swish);
  t.on("Gelu", 1, gelu);
  t.on("Mish", 1, mish);
  t.on("ThresholdedRelu", 1, thresholded_relu);
  t.on("Clip", 1, clip);
  t.on("Softmax", 1, softmax_v1);
  t.on("Softmax", 13, softmax_v13);
  t.on("LogSoftmax", 1, log_softmax_v1);
  t.on("LogSoftmax", 13, log_softmax_v13);

  // ---- casts and identity -------------------------------------------------------------------
  t.on("Identity", 1, identity);
  t.on("Cast", 1, cast);
  t.on("CastLike", 1, cast_like);
}

}  // namespace onnx_detail
}  // namespace milkit
