// ATen normalizations: batch, layer, group, instance and RMS norm.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

Var* batch_norm(C& cv, const json& n, Var* x, Var* w, Var* b, Var* mean, Var* var, double eps) {
  int r = cv.rank(n, x);
  DataType dt = C::dtype(x);
  if (!mean || !var) cv.fail(n, "batch_norm without running statistics (training mode) is not supported");
  bool ok_const = is_const(mean) && is_const(var) && (!w || is_const(w)) && (!b || is_const(b));
  if (ok_const && r >= 3 && r <= 5) {
    std::vector<Arg> args{C::a("x", x), C::a("mean", cv.cast(mean, dt)), C::a("variance", cv.cast(var, dt))};
    if (w) args.push_back(C::a("gamma", cv.cast(w, dt)));
    if (b) args.push_back(C::a("beta", cv.cast(b, dt)));
    args.push_back(C::a("epsilon", Value::scalar_float(dt, eps)));
    return cv.op("batch_norm", std::move(args));
  }
  // general form: (x - mean) / sqrt(var + eps) * w + b, per channel (axis 1)
  int rr = std::max(r, 2);
  auto pc = [&](Var* v) { return per_channel(cv, cv.cast(v, dt), rr); };
  Var* y = bin(cv, "sub", x, pc(mean));
  Var* den = cv.op("rsqrt", {C::a("x", bin(cv, "add", pc(var), cv.cs(eps, dt)))});
  y = bin(cv, "mul", y, den);
  if (w) y = bin(cv, "mul", y, pc(w));
  if (b) y = bin(cv, "add", y, pc(b));
  return y;
}

Var* layer_norm(C& cv, const json& n, Var* x, const std::vector<int64_t>& normalized, Var* w, Var* b, double eps) {
  int r = cv.rank(n, x);
  DataType dt = C::dtype(x);
  std::vector<int64_t> axes;
  for (size_t k = 0; k < normalized.size(); ++k) axes.push_back(r - static_cast<int64_t>(normalized.size()) + static_cast<int64_t>(k));
  bool wc = (!w || is_const(w)) && (!b || is_const(b));
  if (wc) {
    std::vector<Arg> args{C::a("x", x), C::aints32("axes", axes)};
    if (w) args.push_back(C::a("gamma", cv.cast(w, dt)));
    if (b) args.push_back(C::a("beta", cv.cast(b, dt)));
    args.push_back(C::a("epsilon", Value::scalar_float(dt, eps)));
    return cv.op("layer_norm", std::move(args));
  }
  Var* y = cv.op("layer_norm", {C::a("x", x), C::aints32("axes", axes), C::a("epsilon", Value::scalar_float(dt, eps))});
  if (w) y = bin(cv, "mul", y, cv.cast(w, dt));
  if (b) y = bin(cv, "add", y, cv.cast(b, dt));
  return y;
}

Var* group_norm(C& cv, const json& n, Var* x, int64_t groups, Var* w, Var* b, double eps) {
  int r = cv.rank(n, x);
  DataType dt = C::dtype(x);
  // [N, C, *] -> [N, G, C/G * prod(*)]; normalize over the last axis; back; per-channel affine
  Var* shp = cv.op("shape", {C::a("x", x)});
  Var* g = cv.op("reshape", {C::a("x", x), C::a("shape", cv.shape_of_pieces(x, {{true, 0}, {false, groups}, {false, -1}}))});
  Var* mean = cv.op("reduce_mean", {C::a("x", g), C::aints32("axes", {2}), C::abool("keep_dims", true)});
  Var* d = bin(cv, "sub", g, mean);
  Var* var = cv.op("reduce_mean", {C::a("x", bin(cv, "mul", d, d)), C::aints32("axes", {2}), C::abool("keep_dims", true)});
  Var* y = bin(cv, "mul", d, cv.op("rsqrt", {C::a("x", bin(cv, "add", var, cv.cs(eps, dt)))}));
  y = cv.op("reshape", {C::a("x", y), C::a("shape", shp)});
  if (w) y = bin(cv, "mul", y, per_channel(cv, cv.cast(w, dt), r));
  if (b) y = bin(cv, "add", y, per_channel(cv, cv.cast(b, dt), r));
  return y;
}

void batch_norm_op(C& cv, const json& n) {
  if (cv.bo(n, "training", false)) cv.fail(n, "batch_norm in training mode is not supported (export the model in eval mode)");
  Var* x = input(cv, n);
  cv.out(n, batch_norm(cv, n, x, cv.opt_tensor(n, "weight"), cv.opt_tensor(n, "bias"), cv.opt_tensor(n, "running_mean"),
                       cv.opt_tensor(n, "running_var"), cv.f(n, "eps", 1e-5)));
}

void native_batch_norm_legit_no_training(C& cv, const json& n) {
  Var* x = input(cv, n);
  cv.out(n, batch_norm(cv, n, x, cv.opt_tensor(n, "weight"), cv.opt_tensor(n, "bias"), cv.opt_tensor(n, "running_mean"),
                       cv.opt_tensor(n, "running_var"), cv.f(n, "eps", 1e-5)));
}

void native_batch_norm_legit_functional(C& cv, const json& n) {
  if (cv.bo(n, "training", false)) cv.fail(n, "batch_norm in training mode is not supported (export the model in eval mode)");
  Var* x = input(cv, n);
  cv.out(n, batch_norm(cv, n, x, cv.opt_tensor(n, "weight"), cv.opt_tensor(n, "bias"), cv.opt_tensor(n, "running_mean"),
                       cv.opt_tensor(n, "running_var"), cv.f(n, "eps", 1e-5)));
}

// no running statistics: normalized by the batch's own (instance_norm decomposes to this)
void native_batch_norm_legit_no_stats(C& cv, const json& n) {
  Var* x = input(cv, n);
  int r = cv.rank(n, x);
  DataType dt = C::dtype(x);
  std::vector<int64_t> axes{0};
  for (int k = 2; k < r; ++k) axes.push_back(k);
  double eps = cv.f(n, "eps", 1e-5);
  Var* mean = cv.op("reduce_mean", {C::a("x", x), C::aints32("axes", axes), C::abool("keep_dims", true)});
  Var* d = bin(cv, "sub", x, mean);
  Var* var = cv.op("reduce_mean", {C::a("x", bin(cv, "mul", d, d)), C::aints32("axes", axes), C::abool("keep_dims", true)});
  Var* y = bin(cv, "mul", d, cv.op("rsqrt", {C::a("x", bin(cv, "add", var, cv.cs(eps, dt)))}));
  if (Var* w = cv.opt_tensor(n, "weight")) y = bin(cv, "mul", y, per_channel(cv, cv.cast(w, dt), std::max(r, 2)));
  if (Var* b = cv.opt_tensor(n, "bias")) y = bin(cv, "add", y, per_channel(cv, cv.cast(b, dt), std::max(r, 2)));
  cv.out(n, y);
}

void instance_norm(C& cv, const json& n) {
  Var* x = input(cv, n);
  int r = cv.rank(n, x);
  DataType dt = C::dtype(x);
  std::vector<int64_t> axes;
  for (int k = 2; k < r; ++k) axes.push_back(k);
  double eps = cv.f(n, "eps", 1e-5);
  Var* mean = cv.op("reduce_mean", {C::a("x", x), C::aints32("axes", axes), C::abool("keep_dims", true)});
  Var* d = bin(cv, "sub", x, mean);
  Var* var = cv.op("reduce_mean", {C::a("x", bin(cv, "mul", d, d)), C::aints32("axes", axes), C::abool("keep_dims", true)});
  Var* y = bin(cv, "mul", d, cv.op("rsqrt", {C::a("x", bin(cv, "add", var, cv.cs(eps, dt)))}));
  if (Var* w = cv.opt_tensor(n, "weight")) y = bin(cv, "mul", y, per_channel(cv, cv.cast(w, dt), r));
  if (Var* b = cv.opt_tensor(n, "bias")) y = bin(cv, "add", y, per_channel(cv, cv.cast(b, dt), r));
  cv.out(n, y);
}

void layer_norm_op(C& cv, const json& n) {
  Var* x = input(cv, n);
  cv.out(n, layer_norm(cv, n, x, cv.ints(n, "normalized_shape"), cv.opt_tensor(n, "weight"), cv.opt_tensor(n, "bias"),
                       cv.f(n, "eps", 1e-5)));
}

void group_norm_op(C& cv, const json& n) {
  Var* x = input(cv, n);
  cv.out(n, group_norm(cv, n, x, cv.i(n, "num_groups", 1), cv.opt_tensor(n, "weight"), cv.opt_tensor(n, "bias"),
                       cv.f(n, "eps", 1e-5)));
}

void native_group_norm(C& cv, const json& n) {
  Var* x = input(cv, n);
  cv.out(n, group_norm(cv, n, x, cv.i(n, "group", 1), cv.opt_tensor(n, "weight"), cv.opt_tensor(n, "bias"),
                       cv.f(n, "eps", 1e-5)));
}

void rms_norm(C& cv, const json& n) {
  Var* x = input(cv, n);
  DataType dt = C::dtype(x);
  int r = cv.rank(n, x);
  auto ns = cv.ints(n, "normalized_shape");
  std::vector<int64_t> axes;
  for (size_t k = 0; k < ns.size(); ++k) axes.push_back(r - static_cast<int64_t>(ns.size()) + static_cast<int64_t>(k));
  double eps = C::has(n, "eps") ? cv.f(n, "eps", 0)
                                : (dt == DataType::Float16 ? 0.0009765625 : static_cast<double>(std::numeric_limits<float>::epsilon()));
  Var* ms = cv.op("reduce_mean", {C::a("x", bin(cv, "mul", x, x)), C::aints32("axes", axes), C::abool("keep_dims", true)});
  Var* y = bin(cv, "mul", x, cv.op("rsqrt", {C::a("x", bin(cv, "add", ms, cv.cs(eps, dt)))}));
  if (Var* w = cv.opt_tensor(n, "weight")) y = bin(cv, "mul", y, cv.cast(w, dt));
  cv.out(n, y);
}

}  // namespace

void register_normalization(OpTable& t) {
  t.on("aten.batch_norm", batch_norm_op);
  t.on("aten._native_batch_norm_legit_no_training", native_batch_norm_legit_no_training);
  t.on({"aten._native_batch_norm_legit_functional", "aten.native_batch_norm", "aten._native_batch_norm_legit"}, native_batch_norm_legit_functional);
  t.on("aten._native_batch_norm_legit.no_stats", native_batch_norm_legit_no_stats);
  t.on("aten.instance_norm", instance_norm);
  t.on({"aten.layer_norm", "aten.native_layer_norm"}, layer_norm_op);
  t.on("aten.group_norm", group_norm_op);
  t.on("aten.native_group_norm", native_group_norm);
  t.on({"aten.rms_norm", "aten._fused_rms_norm"}, rms_norm);
}

}  // namespace torch_detail
}  // namespace milkit
