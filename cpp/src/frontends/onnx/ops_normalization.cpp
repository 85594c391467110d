// ONNX operators: normalizations (batch, instance, layer, group, RMS, mean-variance, Lp, LRN).
#include <cmath>
#include <limits>
#include <numeric>

#include "milkit/compose/norms.h"
#include "milkit/compose/windows.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

// (x - mean) / sqrt(var + eps) * scale + bias, every parameter broadcast per channel.
Var* norm_composite(C& cv, Var* x, Var* mean, Var* var, Var* scale, Var* bias, double eps) {
  return compose::norm_by_stats(cv.em, x, {mean, var, scale, bias, eps});
}

void batch_normalization(C& cv, const NodeProto& n, bool training) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  double eps = C::attr_float(n, "epsilon", 1e-5f);
  if (training) {
    // normalized with the batch's statistics (population variance over N and the spatial
    // dims); the running statistics are updated by momentum
    std::vector<int64_t> axes = {0};
    for (int i = 2; i < r; ++i) axes.push_back(i);
    DataType dt = C::dtype(x);
    Var* mean = cv.op("reduce_mean", {C::arg("x", x), C::arg_ints32("axes", axes),
                                      C::arg_bool("keep_dims", false)});
    Var* d = binary(cv, "sub", x, per_channel(cv, mean, r));
    Var* var = cv.op("reduce_mean", {C::arg("x", binary(cv, "mul", d, d)),
                                     C::arg_ints32("axes", axes), C::arg_bool("keep_dims", false)});
    cv.out(n, 0, norm_composite(cv, x, mean, var, cv.in(n, 1), cv.in(n, 2), eps));
    double mom = C::attr_float(n, "momentum", 0.9f);
    auto running = [&](Var* old, Var* now) {
      return binary(cv, "add", binary(cv, "mul", old, cv.cs(mom, dt)),
                    binary(cv, "mul", now, cv.cs(1 - mom, dt)));
    };
    if (C::wants(n, 1)) cv.out(n, 1, running(cv.in(n, 3), mean));
    if (C::wants(n, 2)) cv.out(n, 2, running(cv.in(n, 4), var));
    return;
  }
  bool consts = cv.value(n, 1) && cv.value(n, 2) && cv.value(n, 3) && cv.value(n, 4);
  if (consts && r >= 3 && r <= 5) {
    cv.out(n, 0,
           cv.op("batch_norm", {C::arg("x", x), C::arg("mean", cv.in(n, 3)),
                                C::arg("variance", cv.in(n, 4)), C::arg("gamma", cv.in(n, 1)),
                                C::arg("beta", cv.in(n, 2)), C::arg_f32("epsilon", eps)}));
    return;
  }
  cv.out(n, 0, norm_composite(cv, x, cv.in(n, 3), cv.in(n, 4), cv.in(n, 1), cv.in(n, 2), eps));
}

// BatchNormalization before opset 14: training when the running statistics are asked for.
void batch_normalization_v1(C& cv, const NodeProto& n) {
  bool training = C::wants(n, 1) || C::wants(n, 2);
  if (training && (C::wants(n, 3) || C::wants(n, 4)))
    cv.fail(n, "the saved mean / variance outputs of opset < 14 are not supported");
  batch_normalization(cv, n, training);
}

// BatchNormalization from opset 14: the training_mode attribute.
void batch_normalization_v14(C& cv, const NodeProto& n) {
  batch_normalization(cv, n, C::attr_int(n, "training_mode", 0) != 0);
}

void instance_normalization(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  double eps = C::attr_float(n, "epsilon", 1e-5f);
  std::vector<int64_t> axes;
  for (int i = 2; i < r; ++i) axes.push_back(i);
  Var* mean = cv.op("reduce_mean",
                    {C::arg("x", x), C::arg_ints32("axes", axes), C::arg_bool("keep_dims", true)});
  Var* d = binary(cv, "sub", x, mean);
  Var* var = cv.op("reduce_mean", {C::arg("x", binary(cv, "mul", d, d)),
                                   C::arg_ints32("axes", axes), C::arg_bool("keep_dims", true)});
  Var* s = cv.op("sqrt", {C::arg("x", binary(cv, "add", var, cv.cs(eps, C::dtype(x))))});
  Var* y = binary(cv, "real_div", d, s);
  y = binary(cv, "mul", y, per_channel(cv, cv.in(n, 1), r));
  cv.out(n, 0, binary(cv, "add", y, per_channel(cv, cv.in(n, 2), r)));
}

void layer_normalization(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", -1), r);
  double eps = C::attr_float(n, "epsilon", 1e-5f);
  std::vector<int64_t> axes;
  for (int64_t i = ax; i < r; ++i) axes.push_back(i);
  if (C::wants(n, 1) || C::wants(n, 2)) {
    // the statistics are outputs too: compute them, then normalize with them
    Var* mean = cv.op("reduce_mean", {C::arg("x", x), C::arg_ints32("axes", axes),
                                      C::arg_bool("keep_dims", true)});
    Var* d = binary(cv, "sub", x, mean);
    Var* var = cv.op("reduce_mean", {C::arg("x", binary(cv, "mul", d, d)),
                                     C::arg_ints32("axes", axes), C::arg_bool("keep_dims", true)});
    Var* inv = cv.op("rsqrt", {C::arg("x", binary(cv, "add", var, cv.cs(eps, C::dtype(x))))});
    Var* y = binary(cv, "mul", binary(cv, "mul", d, inv), cv.in(n, 1));
    if (C::has(n, 2)) y = binary(cv, "add", y, cv.in(n, 2));
    cv.out(n, 0, y);
    cv.out(n, 1, mean);
    cv.out(n, 2, inv);
    return;
  }
  auto xs = C::static_shape(x);
  const Value* sv = cv.value(n, 1);
  const Value* bv = C::has(n, 2) ? cv.value(n, 2) : nullptr;
  std::vector<int64_t> norm_shape;
  if (xs) norm_shape.assign(xs->begin() + ax, xs->end());
  bool direct =
      sv && xs && sv->shape() == norm_shape && (!C::has(n, 2) || (bv && bv->shape() == norm_shape));
  if (direct) {
    std::vector<Arg> args = {C::arg("x", x), C::arg_ints32("axes", axes),
                             C::arg("gamma", cv.in(n, 1))};
    if (C::has(n, 2)) args.push_back(C::arg("beta", cv.in(n, 2)));
    args.push_back(C::arg_f32("epsilon", eps));
    return cv.out(n, 0, cv.op("layer_norm", std::move(args)));
  }
  Var* y = cv.op("layer_norm",
                 {C::arg("x", x), C::arg_ints32("axes", axes), C::arg_f32("epsilon", eps)});
  y = binary(cv, "mul", y, cv.in(n, 1));
  if (C::has(n, 2)) y = binary(cv, "add", y, cv.in(n, 2));
  cv.out(n, 0, y);
}

void lrn(C& cv, const NodeProto& n) {
  cv.out(n, 0,
         cv.op("local_response_norm",
               {C::arg("x", cv.in(n, 0)), C::arg_i32("size", C::attr_int(n, "size", 1)),
                C::arg_f32("alpha", C::attr_float(n, "alpha", 1e-4f)),
                C::arg_f32("beta", C::attr_float(n, "beta", 0.75f)),
                C::arg_f32("k", C::attr_float(n, "bias", 1.0f))}));
}

void rms_normalization(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", -1), cv.rank(n, x));
  cv.out(n, 0, compose::rms_norm(cv.em, x, ax, cv.in(n, 1), C::attr_float(n, "epsilon", 1e-5f)));
}

void mean_variance_normalization(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  auto axes = C::attr_ints(n, "axes", {0, 2, 3});
  for (auto& a : axes) a = cv.axis(n, a, r);
  Var* mean = cv.op("reduce_mean",
                    {C::arg("x", x), C::arg_ints32("axes", axes), C::arg_bool("keep_dims", true)});
  Var* d = binary(cv, "sub", x, mean);
  Var* var = cv.op("reduce_mean", {C::arg("x", binary(cv, "mul", d, d)),
                                   C::arg_ints32("axes", axes), C::arg_bool("keep_dims", true)});
  Var* sd = cv.op("sqrt", {C::arg("x", var)});
  cv.out(n, 0, binary(cv, "real_div", d, binary(cv, "add", sd, cv.cs(1e-9, C::dtype(x)))));
}

void group_normalization(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  auto s = C::static_shape(x);
  if (!s) cv.fail(n, "needs the input's shape to be known");
  int64_t g = C::attr_int(n, "num_groups", 1), ch = (*s)[1];
  if (g <= 0 || ch % g) cv.fail(n, "num_groups must divide the channels");
  Var* scale = cv.in(n, 1);
  Var* bias = cv.in(n, 2);
  auto ss = C::static_shape(scale);
  if (ss && ss->size() == 1 && (*ss)[0] == g && g != ch) {
    // opset 18: one scale per group
    auto rep = [&](Var* v) {
      Var* e = cv.em.expand_dims(v, {1});
      return cv.em.reshape(cv.op("tile", {C::arg("x", e), C::arg_ints32("reps", {1, ch / g})}),
                           {ch});
    };
    scale = rep(scale);
    bias = rep(bias);
  }
  cv.out(n, 0, compose::group_norm(cv.em, x, g, scale, bias, C::attr_float(n, "epsilon", 1e-5f)));
}

void lp_normalization(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", -1), cv.rank(n, x));
  int64_t p = C::attr_int(n, "p", 2);
  if (p != 1 && p != 2) cv.fail(n, "p must be 1 or 2");
  Var* norm = cv.op(p == 1 ? "reduce_l1_norm" : "reduce_l2_norm",
                    {C::arg("x", x), C::arg_ints32("axes", {ax}), C::arg_bool("keep_dims", true)});
  Var* safe = cv.op("select", {C::arg("cond", binary(cv, "equal", norm, cv.cs(0, C::dtype(x)))),
                               C::arg("a", cv.cs(1, C::dtype(x))), C::arg("b", norm)});
  cv.out(n, 0, binary(cv, "real_div", x, safe));
}

}  // namespace

void register_normalization(OpTable& t) {
  t.on("BatchNormalization", 1, batch_normalization_v1);
  t.on("BatchNormalization", 14, batch_normalization_v14);
  t.on("InstanceNormalization", 1, instance_normalization);
  t.on("LayerNormalization", 1, layer_normalization);
  t.on("LRN", 1, lrn);
  t.on("RMSNormalization", 1, rms_normalization);
  t.on("MeanVarianceNormalization", 1, mean_variance_normalization);
  t.on("GroupNormalization", 1, group_normalization);
  t.on("LpNormalization", 1, lp_normalization);
}

}  // namespace onnx_detail
}  // namespace milkit
