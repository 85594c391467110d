// ONNX operators: the ai.onnx.preview.training optimizers (Adagrad, Adam, Momentum).
#include <cmath>
#include <limits>

#include "milkit/compose/attention.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

Var* f32c(C& cv, double v) { return cv.cs(v, DataType::Float32); }

// ---- ai.onnx.preview.training -------------------------------------------------------------------

// The optimizers take (R, T, then groups of n tensors each) and return groups of n tensors.
int groups_of(C& cv, const NodeProto& n, int per) {
  int m = n.input_size() - 2;
  if (m <= 0 || m % per)
    cv.fail(n, "needs R, T and " + std::to_string(per) + " tensors per optimized tensor");
  return m / per;
}

void adagrad(C& cv, const NodeProto& n) {
  int k = groups_of(cv, n, 3);
  double decay = C::attr_float(n, "decay_factor", 0.0f), eps = C::attr_float(n, "epsilon", 1e-6f),
         norm = C::attr_float(n, "norm_coefficient", 0.0f);
  Var* r = cv.cast(cv.in(n, 0), DataType::Float32);
  Var* t = cv.cast(cv.in(n, 1), DataType::Float32);
  Var* rr = binary(cv, "real_div", r,
                   binary(cv, "add", f32c(cv, 1), binary(cv, "mul", t, f32c(cv, decay))));
  for (int i = 0; i < k; ++i) {
    Var* x = cv.in(n, 2 + i);
    Var* g = binary(cv, "add", binary(cv, "mul", x, f32c(cv, norm)), cv.in(n, 2 + k + i));
    Var* h = binary(cv, "add", cv.in(n, 2 + 2 * k + i), binary(cv, "mul", g, g));
    Var* hs = binary(cv, "add", cv.op("sqrt", {C::arg("x", h)}), f32c(cv, eps));
    cv.out(n, i, binary(cv, "sub", x, binary(cv, "real_div", binary(cv, "mul", rr, g), hs)));
    cv.out(n, k + i, h);
  }
}

void adam(C& cv, const NodeProto& n) {
  int k = groups_of(cv, n, 4);
  double alpha = C::attr_float(n, "alpha", 0.9f), beta = C::attr_float(n, "beta", 0.999f),
         eps = C::attr_float(n, "epsilon", 1e-6f);
  double norm = C::attr_float(n, "norm_coefficient", 0.0f),
         post = C::attr_float(n, "norm_coefficient_post", 0.0f);
  Var* r = cv.cast(cv.in(n, 0), DataType::Float32);
  Var* t = cv.cast(cv.in(n, 1), DataType::Float32);
  // R * sqrt(1 - beta^T) / (1 - alpha^T) after the first step, R at T = 0
  Var* bt = cv.op("pow", {C::arg("x", f32c(cv, beta)), C::arg("y", t)});
  Var* at = cv.op("pow", {C::arg("x", f32c(cv, alpha)), C::arg("y", t)});
  Var* adj =
      binary(cv, "real_div",
             binary(cv, "mul", r, cv.op("sqrt", {C::arg("x", binary(cv, "sub", f32c(cv, 1), bt))})),
             binary(cv, "sub", f32c(cv, 1), at));
  Var* ra = cv.op("select", {C::arg("cond", binary(cv, "greater", t, f32c(cv, 0))),
                             C::arg("a", adj), C::arg("b", r)});
  for (int i = 0; i < k; ++i) {
    Var* x = cv.in(n, 2 + i);
    Var* g = binary(cv, "add", binary(cv, "mul", x, f32c(cv, norm)), cv.in(n, 2 + k + i));
    Var* v = binary(cv, "add", binary(cv, "mul", cv.in(n, 2 + 2 * k + i), f32c(cv, alpha)),
                    binary(cv, "mul", g, f32c(cv, 1 - alpha)));
    Var* h = binary(cv, "add", binary(cv, "mul", cv.in(n, 2 + 3 * k + i), f32c(cv, beta)),
                    binary(cv, "mul", binary(cv, "mul", g, g), f32c(cv, 1 - beta)));
    Var* hs = binary(cv, "add", cv.op("sqrt", {C::arg("x", h)}), f32c(cv, eps));
    Var* xn = binary(cv, "sub", x, binary(cv, "mul", ra, binary(cv, "real_div", v, hs)));
    cv.out(n, i, binary(cv, "mul", xn, f32c(cv, 1 - post)));
    cv.out(n, k + i, v);
    cv.out(n, 2 * k + i, h);
  }
}

void momentum(C& cv, const NodeProto& n) {
  int k = groups_of(cv, n, 3);
  if (!C::has_attr(n, "alpha") || !C::has_attr(n, "beta") || !C::has_attr(n, "mode") ||
      !C::has_attr(n, "norm_coefficient"))
    cv.fail(n, "alpha, beta, mode and norm_coefficient are required");
  double alpha = C::attr_float(n, "alpha", 0), beta = C::attr_float(n, "beta", 0),
         norm = C::attr_float(n, "norm_coefficient", 0);
  std::string mode = C::attr_string(n, "mode", "");
  if (mode != "standard" && mode != "nesterov") cv.fail(n, "mode must be standard or nesterov");
  Var* r = cv.cast(cv.in(n, 0), DataType::Float32);
  Var* t = cv.cast(cv.in(n, 1), DataType::Float32);
  Var* b = cv.op("select", {C::arg("cond", binary(cv, "greater", t, f32c(cv, 0))),
                            C::arg("a", f32c(cv, beta)), C::arg("b", f32c(cv, 1))});
  for (int i = 0; i < k; ++i) {
    Var* x = cv.in(n, 2 + i);
    Var* g = binary(cv, "add", binary(cv, "mul", x, f32c(cv, norm)), cv.in(n, 2 + k + i));
    Var* v = binary(cv, "add", binary(cv, "mul", cv.in(n, 2 + 2 * k + i), f32c(cv, alpha)),
                    binary(cv, "mul", g, b));
    Var* step =
        mode == "standard" ? v : binary(cv, "add", g, binary(cv, "mul", v, f32c(cv, alpha)));
    cv.out(n, i, binary(cv, "sub", x, binary(cv, "mul", r, step)));
    cv.out(n, k + i, v);
  }
}

}  // namespace

void register_training(OpTable& t) {
  t.on("ai.onnx.preview.training", "Adagrad", 1, adagrad);
  t.on("ai.onnx.preview.training", "Adam", 1, adam);
  t.on("ai.onnx.preview.training", "Momentum", 1, momentum);
}

}  // namespace onnx_detail
}  // namespace milkit
