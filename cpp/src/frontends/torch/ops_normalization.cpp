// ATen normalizations: batch, layer, group, instance and RMS norm.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "milkit/compose/norms.h"
#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

// inference batch norm over axis 1 from the running statistics (compose::batch_norm)
Var* batch_norm(C& cv, const json& n, Var* x, Var* w, Var* b, Var* mean, Var* var, double eps) {
  cv.rank(n, x);
  if (!mean || !var) cv.fail(n, "batch_norm without running statistics (training mode) is not supported");
  return compose::batch_norm(cv.e, x, {mean, var, w, b, eps});
}

// x normalized by its own mean and biased variance over `axes` (eps from the node), then scaled
// and shifted by the node's optional per-channel weight and bias (channel axis 1 of `rank` dims)
Var* own_stats_norm(C& cv, const json& n, Var* x, const std::vector<int64_t>& axes, int rank) {
  DataType dt = C::dtype(x);
  double eps = cv.f(n, "eps", 1e-5);
  Var* mean = cv.op("reduce_mean", {C::a("x", x), C::aints32("axes", axes), C::abool("keep_dims", true)});
  Var* d = bin(cv, "sub", x, mean);
  Var* var = cv.op("reduce_mean", {C::a("x", bin(cv, "mul", d, d)), C::aints32("axes", axes), C::abool("keep_dims", true)});
  Var* y = bin(cv, "mul", d, cv.op("rsqrt", {C::a("x", bin(cv, "add", var, cv.cs(eps, dt)))}));
  if (Var* w = cv.opt_tensor(n, "weight"))
    y = bin(cv, "mul", y, cv.e.per_channel(cv.cast(w, dt), rank));
  if (Var* b = cv.opt_tensor(n, "bias"))
    y = bin(cv, "add", y, cv.e.per_channel(cv.cast(b, dt), rank));
  return y;
}

// batch norm by the batch's own statistics: mean and biased variance over every axis but 1
Var* batch_stats_norm(C& cv, const json& n, Var* x) {
  int r = cv.rank(n, x);
  std::vector<int64_t> axes{0};
  for (int k = 2; k < r; ++k) axes.push_back(k);
  return own_stats_norm(cv, n, x, axes, std::max(r, 2));
}

// the normalized output of a batch norm with training set: batch statistics. Refused when the
// node would update running statistics (a module in training mode) or another output (the
// batch's mean / inverse std) is read.
void batch_norm_training(C& cv, const json& n, Var* x) {
  if (cv.opt_tensor(n, "running_mean") || cv.opt_tensor(n, "running_var"))
    cv.fail(n,
            "batch_norm in training mode updates its running statistics, which is not supported "
            "(export the model in eval mode)");
  for (size_t k = 1; k < C::output_names(n).size(); ++k)
    if (output_used(cv, n, k))
      cv.fail(n, "batch_norm in training mode: only the normalized output converts (output " +
                     std::to_string(k) + ", a batch statistic, is read)");
  cv.out(n, batch_stats_norm(cv, n, x));
}

// batch norm from the node's running statistics (every aten variant with them); with `training`
// set, by the batch's own statistics (batch_norm_training)
void batch_norm_op(C& cv, const json& n) {
  Var* x = input(cv, n);
  if (cv.bo(n, "training", false)) return batch_norm_training(cv, n, x);
  cv.out(n, batch_norm(cv, n, x, cv.opt_tensor(n, "weight"), cv.opt_tensor(n, "bias"),
                       cv.opt_tensor(n, "running_mean"), cv.opt_tensor(n, "running_var"),
                       cv.f(n, "eps", 1e-5)));
}

// no running statistics: normalized by the batch's own (instance_norm decomposes to this)
void native_batch_norm_legit_no_stats(C& cv, const json& n) {
  batch_norm_training(cv, n, input(cv, n));
}

// instance norm: each sample and channel normalized over its spatial axes
void instance_norm(C& cv, const json& n) {
  Var* x = input(cv, n);
  int r = cv.rank(n, x);
  std::vector<int64_t> axes;
  for (int k = 2; k < r; ++k) axes.push_back(k);
  cv.out(n, own_stats_norm(cv, n, x, axes, r));
}

void layer_norm_op(C& cv, const json& n) {
  Var* x = input(cv, n);
  cv.rank(n, x);
  int64_t normalized = static_cast<int64_t>(cv.ints(n, "normalized_shape").size());
  cv.out(n, compose::layer_norm(cv.e, x, normalized, cv.opt_tensor(n, "weight"),
                                cv.opt_tensor(n, "bias"), cv.f(n, "eps", 1e-5)));
}

void group_norm_op(C& cv, const json& n) {
  Var* x = input(cv, n);
  cv.rank(n, x);
  cv.out(n, compose::group_norm(cv.e, x, cv.i(n, "num_groups", 1), cv.opt_tensor(n, "weight"),
                                cv.opt_tensor(n, "bias"), cv.f(n, "eps", 1e-5)));
}

void native_group_norm(C& cv, const json& n) {
  Var* x = input(cv, n);
  cv.rank(n, x);
  cv.out(n, compose::group_norm(cv.e, x, cv.i(n, "group", 1), cv.opt_tensor(n, "weight"),
                                cv.opt_tensor(n, "bias"), cv.f(n, "eps", 1e-5)));
}

void rms_norm(C& cv, const json& n) {
  Var* x = input(cv, n);
  DataType dt = C::dtype(x);
  int r = cv.rank(n, x);
  auto ns = cv.ints(n, "normalized_shape");
  double eps = C::has(n, "eps") ? cv.f(n, "eps", 0)
                                : (dt == DataType::Float16 ? 0.0009765625 : static_cast<double>(std::numeric_limits<float>::epsilon()));
  Var* w = cv.opt_tensor(n, "weight");
  cv.out(n, compose::rms_norm(cv.e, x, r - static_cast<int64_t>(ns.size()),
                              w ? cv.cast(w, dt) : nullptr, eps));
}

// torch._weight_norm(v, g, dim): g * v / ||v||, the 2-norm over every axis but `dim` (dim -1:
// over every axis, as torch's norm_except_dim); _weight_norm_interface also returns the norms
void weight_norm(C& cv, const json& n) {
  Var* v = cv.tensor(n, "v");
  DataType dt = C::dtype(v);
  Var* g = cv.cast(cv.tensor(n, "g"), dt);
  int r = cv.rank(n, v);
  int64_t dim = cv.i(n, "dim", 0);
  if (dim != -1) dim = cv.axis(n, dim, r);
  std::vector<int64_t> axes;
  for (int64_t k = 0; k < r; ++k)
    if (k != dim) axes.push_back(k);
  if (axes.empty()) cv.fail(n, "_weight_norm needs a tensor with at least one dim besides `dim`");
  Var* norm = cv.op("reduce_l2_norm",
                    {C::a("x", v), C::aints32("axes", axes), C::abool("keep_dims", true)});
  Var* w = bin(cv, "mul", v, bin(cv, "real_div", g, norm));
  if (C::output_names(n).size() > 1) return cv.outs(n, {w, norm});
  cv.out(n, w);
}

}  // namespace

void register_normalization(OpTable& t) {
  t.on({"aten.batch_norm", "aten._native_batch_norm_legit_no_training", "aten._native_batch_norm_legit_functional",
        "aten.native_batch_norm", "aten._native_batch_norm_legit"},
       batch_norm_op);
  t.on("aten._native_batch_norm_legit.no_stats", native_batch_norm_legit_no_stats);
  t.on("aten.instance_norm", instance_norm);
  t.on({"aten.layer_norm", "aten.native_layer_norm"}, layer_norm_op);
  t.on("aten.group_norm", group_norm_op);
  t.on("aten.native_group_norm", native_group_norm);
  t.on({"aten.rms_norm", "aten._fused_rms_norm"}, rms_norm);
  t.on({"aten._weight_norm", "aten._weight_norm_interface"}, weight_norm);
}

}  // namespace torch_detail
}  // namespace milkit
