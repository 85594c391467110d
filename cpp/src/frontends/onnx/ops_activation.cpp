// ONNX operators: activations, Clip, Softmax / LogSoftmax / Hardmax, Dropout.
#include <cmath>
#include <limits>
#include <numeric>

#include "milkit/compose/arith.h"
#include "milkit/compose/norms.h"
#include "milkit/compose/windows.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

void p_relu(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  Var* slope = cv.in(n, 1);
  Var* pos = binary(cv, "greater_equal", x, cv.cs(0, C::dtype(x)));
  cv.out(n, 0,
         cv.op("select",
               {C::arg("cond", pos), C::arg("a", x), C::arg("b", binary(cv, "mul", x, slope))}));
}

void leaky_relu(C& cv, const NodeProto& n) {
  cv.out(n, 0,
         cv.op("leaky_relu",
               {C::arg("x", cv.in(n, 0)), C::arg_f32("alpha", C::attr_float(n, "alpha", 0.01f))}));
}

void elu(C& cv, const NodeProto& n) {
  cv.out(n, 0,
         cv.op("elu",
               {C::arg("x", cv.in(n, 0)), C::arg_f32("alpha", C::attr_float(n, "alpha", 1.0f))}));
}

void selu(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  float alpha = C::attr_float(n, "alpha", 1.67326319217681884765625f),
        gamma = C::attr_float(n, "gamma", 1.05070102214813232421875f);
  Var* e = cv.op("elu", {C::arg("x", x), C::arg_f32("alpha", alpha)});
  cv.out(n, 0, binary(cv, "mul", e, cv.cs(gamma, C::dtype(x))));
}

void celu(C& cv, const NodeProto& n) {  // alpha * elu(x / alpha)
  Var* x = cv.in(n, 0);
  float alpha = C::attr_float(n, "alpha", 1.0f);
  Var* e = cv.op("elu", {C::arg("x", binary(cv, "real_div", x, cv.cs(alpha, C::dtype(x)))),
                         C::arg_f32("alpha", 1.0)});
  cv.out(n, 0, binary(cv, "mul", e, cv.cs(alpha, C::dtype(x))));
}

void hard_sigmoid(C& cv, const NodeProto& n) {
  cv.out(n, 0,
         cv.op("sigmoid_hard",
               {C::arg("x", cv.in(n, 0)), C::arg_f32("alpha", C::attr_float(n, "alpha", 0.2f)),
                C::arg_f32("beta", C::attr_float(n, "beta", 0.5f))}));
}

void hard_swish(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  Var* s = cv.op("sigmoid_hard",
                 {C::arg("x", x), C::arg_f32("alpha", 1.0 / 6.0), C::arg_f32("beta", 0.5)});
  cv.out(n, 0, binary(cv, "mul", x, s));
}

void gelu(C& cv, const NodeProto& n) {
  std::string approx = C::attr_string(n, "approximate", "none");
  if (approx != "none" && approx != "tanh")
    cv.fail(n, "approximate='" + approx + "' is not 'none' or 'tanh'");
  cv.out(n, 0,
         cv.op("gelu", {C::arg("x", cv.in(n, 0)),
                        C::arg_str("mode", approx == "tanh" ? "TANH_APPROXIMATION" : "EXACT")}));
}

void mish(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  Var* sp = cv.op("softplus", {C::arg("x", x)});
  cv.out(n, 0, binary(cv, "mul", x, cv.op("tanh", {C::arg("x", sp)})));
}

void thresholded_relu(C& cv, const NodeProto& n) {  // x where x > alpha (strictly), else 0
  Var* x = cv.in(n, 0);
  Var* keep = binary(cv, "greater", x, cv.cs(C::attr_float(n, "alpha", 1.0f), C::dtype(x)));
  cv.out(
      n, 0,
      cv.op("select", {C::arg("cond", keep), C::arg("a", x), C::arg("b", cv.cs(0, C::dtype(x)))}));
}

// x clamped to [lo, hi] (either may be absent).
void clamp(C& cv, const NodeProto& n, Var* x, Var* lo, Var* hi) {
  Var* r = x;
  if (lo) r = binary(cv, "maximum", r, lo);
  if (hi) r = binary(cv, "minimum", r, hi);
  if (r == x) r = cv.op("identity", {C::arg("x", x)});
  cv.out(n, 0, r);
}

// Clip before opset 11: the bounds are the attributes min and max.
void clip_v1(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  DataType dt = C::dtype(x);
  Var* lo = C::has_attr(n, "min") ? cv.cs(C::attr_float(n, "min", 0), dt) : nullptr;
  Var* hi = C::has_attr(n, "max") ? cv.cs(C::attr_float(n, "max", 0), dt) : nullptr;
  clamp(cv, n, x, lo, hi);
}

// Clip from opset 11: the bounds are the optional inputs 1 and 2.
void clip_v11(C& cv, const NodeProto& n) {
  clamp(cv, n, cv.in(n, 0), C::has(n, 1) ? cv.in(n, 1) : nullptr,
        C::has(n, 2) ? cv.in(n, 2) : nullptr);
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

// Dropout in inference: the input, and an all-true mask.
void dropout_v1(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  cv.out(n, 0, x);
  if (C::wants(n, 1)) {
    Var* shp = cv.op("shape", {C::arg("x", x)});
    cv.out(n, 1, cv.op("fill", {C::arg("shape", shp), C::arg("value", Value::scalar_bool(true))}));
  }
}

// Dropout from opset 12: ratio and training_mode are inputs; training draws a keep mask.
void dropout_v12(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  if (C::has(n, 2) && cv.ints(n, 2, "training_mode").at(0) != 0) {
    double ratio = C::has(n, 1) ? cv.doubles(n, 1, "ratio").at(0) : 0.5;
    if (ratio < 0 || ratio >= 1) cv.fail(n, "ratio must be in [0, 1)");
    if (ratio > 0) {
      // a random keep mask (Core ML's generator: not the numbers of any other runtime)
      DataType dt = C::dtype(x);
      Var* keep =
          cv.op("random_bernoulli",
                {C::arg("shape", cv.op("shape", {C::arg("x", x)})),
                 C::arg_i32("seed", C::has_attr(n, "seed") ? C::attr_int(n, "seed", 0) : -1),
                 C::arg("prob", Value::scalar_float(dt, 1.0 - ratio))});
      cv.out(n, 0, binary(cv, "mul", binary(cv, "mul", x, keep), cv.cs(1.0 / (1.0 - ratio), dt)));
      if (C::wants(n, 1)) cv.out(n, 1, cv.cast(keep, DataType::Bool));
      return;
    }
  }
  dropout_v1(cv, n);
}

// One-hot of the argmax along axis `ax`.
void hardmax_along(C& cv, const NodeProto& n, Var* x, int64_t ax) {
  Dim d = C::shape(x)[ax];
  if (!d->is_const()) cv.fail(n, "the axis' size must be known");
  Var* am = cv.op("reduce_argmax",
                  {C::arg("x", x), C::arg_i32("axis", ax), C::arg_bool("keep_dims", false)});
  DataType dt = C::dtype(x);
  cv.out(n, 0,
         cv.op("one_hot", {C::arg("indices", am), C::arg_i32("one_hot_vector_size", d->value()),
                           C::arg_i32("axis", ax), C::arg("on_value", Value::scalar_float(dt, 1)),
                           C::arg("off_value", Value::scalar_float(dt, 0))}));
}

// Hardmax from opset 13: along one axis (default the last).
void hardmax_v13(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  hardmax_along(cv, n, x, cv.axis(n, C::attr_int(n, "axis", -1), cv.rank(n, x)));
}

// Hardmax before opset 13: over the flattened trailing dims [axis, rank) (default axis 1); only
// the last axis alone is supported.
void hardmax_v1(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", 1), r);
  if (ax != r - 1) cv.fail(n, "Hardmax before opset 13 over several axes is not supported");
  hardmax_along(cv, n, x, ax);
}

void swish(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  float alpha = C::attr_float(n, "alpha", 1.0f);
  Var* s =
      cv.op("sigmoid",
            {C::arg("x", alpha == 1.0f ? x : binary(cv, "mul", x, cv.cs(alpha, C::dtype(x))))});
  cv.out(n, 0, binary(cv, "mul", x, s));
}

void shrink(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  DataType dt = C::dtype(x);
  Var* xf = is_float(dt) ? x : cv.cast(x, DataType::Float32);
  DataType ft = C::dtype(xf);
  double bias = C::attr_float(n, "bias", 0.0f), lambd = C::attr_float(n, "lambd", 0.5f);
  Var* lo = binary(cv, "less", xf, cv.cs(-lambd, ft));
  Var* hi = binary(cv, "greater", xf, cv.cs(lambd, ft));
  Var* y = cv.op("select", {C::arg("cond", lo), C::arg("a", binary(cv, "add", xf, cv.cs(bias, ft))),
                            C::arg("b", cv.cs(0, ft))});
  y = cv.op("select", {C::arg("cond", hi), C::arg("a", binary(cv, "sub", xf, cv.cs(bias, ft))),
                       C::arg("b", y)});
  cv.out(n, 0, xf == x ? y : cv.cast(y, dt));
}

}  // namespace

void register_activation(OpTable& t) {
  t.on("PRelu", 1, p_relu);
  simple_unary(t, "Tanh", "tanh");
  simple_unary(t, "Relu", "relu");
  simple_unary(t, "Sigmoid", "sigmoid");
  simple_unary(t, "Softplus", "softplus");
  simple_unary(t, "Softsign", "softsign");
  t.on("LeakyRelu", 1, leaky_relu);
  t.on("Elu", 1, elu);
  t.on("Selu", 1, selu);
  t.on("Celu", 1, celu);
  t.on("HardSigmoid", 1, hard_sigmoid);
  t.on("HardSwish", 1, hard_swish);
  t.on("Gelu", 1, gelu);
  t.on("Mish", 1, mish);
  t.on("ThresholdedRelu", 1, thresholded_relu);
  t.on("Clip", 1, clip_v1);
  t.on("Clip", 11, clip_v11);
  t.on("Softmax", 1, softmax_v1);
  t.on("Softmax", 13, softmax_v13);
  t.on("LogSoftmax", 1, log_softmax_v1);
  t.on("LogSoftmax", 13, log_softmax_v13);
  t.on("Dropout", 1, dropout_v1);
  t.on("Dropout", 12, dropout_v12);
  t.on("Hardmax", 1, hardmax_v1);
  t.on("Hardmax", 13, hardmax_v13);
  t.on("Swish", 1, swish);
  t.on("Shrink", 1, shrink);
}

}  // namespace onnx_detail
}  // namespace milkit
