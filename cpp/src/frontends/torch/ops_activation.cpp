// ATen activations: relu family, gelu, silu, hardtanh / hardsigmoid / hardswish, elu family, softplus, prelu, glu, shrinkage, softmax / log_softmax.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

Var* softmax(C& cv, const json& n, bool log) {
  Var* x = input(cv, n);
  if (auto dt = cv.dtype_arg(n, "dtype")) x = cv.cast(x, *dt);
  if (auto od = cv.out_dtype(n); od && is_float(*od)) x = cv.cast(x, *od);
  if (!is_float(C::dtype(x))) x = cv.cast(x, DataType::Float32);
  int64_t d = cv.axis(n, cv.i(n, "dim", -1), cv.rank(n, x));
  if (!log) return cv.op("softmax", {C::a("x", x), C::ai32("axis", d)});
  Var* lse = cv.op("reduce_log_sum_exp", {C::a("x", x), C::aints32("axes", {d}), C::abool("keep_dims", true)});
  return bin(cv, "sub", x, lse);
}

// activations
void gelu(C& cv, const json& n) {
  std::string ap = cv.s(n, "approximate", "none");
  cv.out(n, cv.op("gelu", {C::a("x", self(cv, n)), C::astr("mode", ap == "tanh" ? "TANH_APPROXIMATION" : "EXACT")}));
}

void relu6(C& cv, const json& n) { cv.out(n, cv.op("relu6", {C::a("x", self(cv, n))})); }

void hardtanh(C& cv, const json& n) {
  Var* x = self(cv, n);
  double lo = cv.f(n, "min_val", -1), hi = cv.f(n, "max_val", 1);
  if (lo == 0 && hi == 6) cv.out(n, cv.op("relu6", {C::a("x", x)}));
  else cv.out(n, clip(cv, x, lo, hi));
}

void hardsigmoid(C& cv, const json& n) {
  cv.out(n, cv.op("sigmoid_hard", {C::a("x", self(cv, n)), C::af32("alpha", 1.0 / 6), C::af32("beta", 0.5)}));
}

void hardswish(C& cv, const json& n) {
  Var* x = self(cv, n);
  Var* h = cv.op("sigmoid_hard", {C::a("x", x), C::a("alpha", Value::scalar_float(C::dtype(x), 1.0 / 6)),
                                  C::a("beta", Value::scalar_float(C::dtype(x), 0.5))});
  cv.out(n, bin(cv, "mul", x, h));
}

void elu(C& cv, const json& n) {
  Var* x = self(cv, n);
  double alpha = cv.f(n, "alpha", 1), scale = cv.f(n, "scale", 1), in_scale = cv.f(n, "input_scale", 1);
  if (in_scale != 1) x = bin(cv, "mul", x, cv.cs(in_scale, C::dtype(x)));
  Var* r = cv.op("elu", {C::a("x", x), C::a("alpha", Value::scalar_float(C::dtype(x), alpha))});
  if (scale != 1) r = bin(cv, "mul", r, cv.cs(scale, C::dtype(x)));
  cv.out(n, r);
}

void selu(C& cv, const json& n) {
  Var* x = self(cv, n);
  const double alpha = 1.6732632423543772848170429916717, scale = 1.0507009873554804934193349852946;
  Var* r = cv.op("elu", {C::a("x", x), C::a("alpha", Value::scalar_float(C::dtype(x), alpha))});
  cv.out(n, bin(cv, "mul", r, cv.cs(scale, C::dtype(x))));
}

void celu(C& cv, const json& n) {
  Var* x = self(cv, n);
  double alpha = cv.f(n, "alpha", 1);
  Var* xs = bin(cv, "real_div", x, cv.cs(alpha, C::dtype(x)));
  Var* e = cv.op("elu", {C::a("x", xs), C::a("alpha", Value::scalar_float(C::dtype(x), 1.0))});
  cv.out(n, bin(cv, "mul", e, cv.cs(alpha, C::dtype(x))));
}

void leaky_relu(C& cv, const json& n) {
  Var* x = self(cv, n);
  cv.out(n, cv.op("leaky_relu", {C::a("x", x), C::a("alpha", Value::scalar_float(C::dtype(x), cv.f(n, "negative_slope", 0.01)))}));
}

void softplus(C& cv, const json& n) {
  Var* x = self(cv, n);
  double beta = cv.f(n, "beta", 1), thr = cv.f(n, "threshold", 20);
  DataType dt = C::dtype(x);
  Var* bx = beta == 1 ? x : bin(cv, "mul", x, cv.cs(beta, dt));
  Var* sp = cv.op("softplus", {C::a("x", bx)});
  if (beta != 1) sp = bin(cv, "real_div", sp, cv.cs(beta, dt));
  // torch returns x where beta * x > threshold
  Var* lin = bin(cv, "greater", bx, cv.cs(thr, dt));
  cv.out(n, cv.op("select", {C::a("cond", lin), C::a("a", x), C::a("b", sp)}));
}

void mish(C& cv, const json& n) {
  Var* x = self(cv, n);
  cv.out(n, bin(cv, "mul", x, cv.op("tanh", {C::a("x", cv.op("softplus", {C::a("x", x)}))})));
}

void log_sigmoid(C& cv, const json& n) {
  Var* x = self(cv, n);
  Var* nx = bin(cv, "mul", x, cv.cs(-1, C::dtype(x)));
  cv.out(n, bin(cv, "mul", cv.op("softplus", {C::a("x", nx)}), cv.cs(-1, C::dtype(x))));
}

void log_sigmoid_forward(C& cv, const json& n) {
  Var* x = self(cv, n);
  Var* nx = bin(cv, "mul", x, cv.cs(-1, C::dtype(x)));
  cv.out(n, bin(cv, "mul", cv.op("softplus", {C::a("x", nx)}), cv.cs(-1, C::dtype(x))), 0);
}

void prelu(C& cv, const json& n) {
  Var* x = self(cv, n);
  Var* w = cv.tensor(n, "weight");
  // x >= 0 ? x : w * x, w per channel (axis 1) or a single value
  int r = cv.rank(n, x);
  Var* wb = w;
  if (r >= 2 && w->type()->has_rank() && w->type()->rank() == 1) {
    std::vector<int64_t> axes;
    for (int k = 2; k < r; ++k) axes.push_back(k - 1);
    if (!axes.empty()) wb = cv.op("expand_dims", {C::a("x", w), C::aints32("axes", axes)});
  }
  Var* neg = bin(cv, "mul", x, cv.cast(wb, C::dtype(x)));
  Var* pos = bin(cv, "greater_equal", x, cv.cs(0, C::dtype(x)));
  cv.out(n, cv.op("select", {C::a("cond", pos), C::a("a", x), C::a("b", neg)}));
}

void glu(C& cv, const json& n) {
  Var* x = self(cv, n);
  int64_t d = cv.axis(n, cv.i(n, "dim", -1), cv.rank(n, x));
  auto parts = cv.ops("split", {C::a("x", x), C::ai32("num_splits", 2), C::ai32("axis", d)});
  cv.out(n, bin(cv, "mul", parts[0], cv.op("sigmoid", {C::a("x", parts[1])})));
}

void threshold(C& cv, const json& n) {
  Var* x = self(cv, n);
  DataType dt = C::dtype(x);
  Var* keep = bin(cv, "greater", x, cv.cs(cv.f(n, "threshold", 0), dt));
  cv.out(n, cv.op("select", {C::a("cond", keep), C::a("a", x), C::a("b", cv.cs(cv.f(n, "value", 0), dt))}));
}

void hardshrink(C& cv, const json& n) {
  Var* x = self(cv, n);
  DataType dt = C::dtype(x);
  Var* keep = bin(cv, "greater", cv.op("abs", {C::a("x", x)}), cv.cs(cv.f(n, "lambd", 0.5), dt));
  cv.out(n, sel(cv, keep, x, cv.cs(0, dt)));
}

void softshrink(C& cv, const json& n) {
  Var* x = self(cv, n);
  DataType dt = C::dtype(x);
  double l = cv.f(n, "lambd", 0.5);
  Var* hi = bin(cv, "greater", x, cv.cs(l, dt));
  Var* lo = bin(cv, "less", x, cv.cs(-l, dt));
  cv.out(n, sel(cv, hi, bin(cv, "sub", x, cv.cs(l, dt)),
                sel(cv, lo, bin(cv, "add", x, cv.cs(l, dt)), cv.cs(0, dt))));
}

// rrelu in eval mode is leaky_relu with the mean slope; in training it draws random slopes
void rrelu(C& cv, const json& n) {
  if (cv.bo(n, "training", false)) cv.fail(n, "rrelu in training mode draws random slopes; export the model in eval()");
  Var* x = self(cv, n);
  double slope = (cv.f(n, "lower", 1.0 / 8) + cv.f(n, "upper", 1.0 / 3)) / 2;
  cv.out(n, cv.op("leaky_relu", {C::a("x", x), C::a("alpha", Value::scalar_float(C::dtype(x), slope))}));
}

// the functional form (core ATen) returns (out, noise); in eval the noise is left as it was
void rrelu_with_noise_functional(C& cv, const json& n) {
  if (cv.bo(n, "training", false)) cv.fail(n, "rrelu in training mode draws random slopes; export the model in eval()");
  Var* x = self(cv, n);
  double slope = (cv.f(n, "lower", 1.0 / 8) + cv.f(n, "upper", 1.0 / 3)) / 2;
  cv.out(n, cv.op("leaky_relu", {C::a("x", x), C::a("alpha", Value::scalar_float(C::dtype(x), slope))}), 0);
  if (C::output_names(n).size() > 1) cv.out(n, cv.op("identity", {C::a("x", cv.tensor(n, "noise"))}), 1);
}

void softmax_op(C& cv, const json& n) { cv.out(n, softmax(cv, n, false)); }

void safe_softmax_op(C& cv, const json& n) {
  Var* x = input(cv, n);
  if (auto dt = cv.dtype_arg(n, "dtype")) x = cv.cast(x, *dt);
  if (auto od = cv.out_dtype(n); od && is_float(*od)) x = cv.cast(x, *od);
  if (!is_float(C::dtype(x))) x = cv.cast(x, DataType::Float32);
  cv.out(n, safe_softmax(cv, x, cv.axis(n, cv.i(n, "dim", -1), cv.rank(n, x))));
}

void log_softmax(C& cv, const json& n) { cv.out(n, softmax(cv, n, true)); }

}  // namespace

void register_activation(OpTable& t) {
  t.on("aten.gelu", gelu);
  t.on("aten.relu6", relu6);
  t.on("aten.hardtanh", hardtanh);
  t.on("aten.hardsigmoid", hardsigmoid);
  t.on("aten.hardswish", hardswish);
  t.on("aten.elu", elu);
  t.on("aten.selu", selu);
  t.on("aten.celu", celu);
  t.on("aten.leaky_relu", leaky_relu);
  t.on("aten.softplus", softplus);
  t.on("aten.mish", mish);
  t.on("aten.log_sigmoid", log_sigmoid);
  t.on("aten.log_sigmoid_forward", log_sigmoid_forward);
  t.on({"aten.prelu", "aten._prelu_kernel"}, prelu);
  t.on("aten.glu", glu);
  t.on("aten.threshold", threshold);
  t.on("aten.hardshrink", hardshrink);
  t.on("aten.softshrink", softshrink);
  t.on({"aten.rrelu", "aten.rrelu_with_noise"}, rrelu);
  t.on("aten.rrelu_with_noise_functional", rrelu_with_noise_functional);
  t.on({"aten.softmax", "aten._softmax"}, softmax_op);
  t.on("aten._safe_softmax", safe_softmax_op);
  t.on({"aten.log_softmax", "aten._log_softmax"}, log_softmax);
  unary(t, "aten.softsign", "softsign");
  unary_keep(t, "aten.relu", "relu");
  unary(t, "aten.silu", "silu");
}

}  // namespace torch_detail
}  // namespace milkit
