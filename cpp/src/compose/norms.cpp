// Normalizations from MIL ops.
#include "milkit/compose/norms.h"

#include <algorithm>
#include <utility>

namespace milkit {
namespace compose {

namespace {

bool is_const(Var* v) { return v->value() && !v->value()->is_symbolic(); }

Var* reduce_mean(Emitter& e, Var* x, const std::vector<int64_t>& axes) {
  return e.op("reduce_mean", {Builder::arg("x", x), Builder::arg("axes", Value::int_list(axes)),
                              Builder::arg("keep_dims", Value::scalar_bool(true))});
}

}  // namespace

Var* batch_norm(Emitter& e, Var* x, const ChannelNormSpec& s) {
  int r = Emitter::rank(x);
  DataType dt = Emitter::dtype(x);
  if (!s.mean || !s.variance)
    fail("batch norm without running statistics (training mode) is not supported");
  bool consts = is_const(s.mean) && is_const(s.variance) && (!s.gamma || is_const(s.gamma)) &&
                (!s.beta || is_const(s.beta));
  if (consts && r >= 3 && r <= 5) {
    std::vector<Arg> args{Builder::arg("x", x), Builder::arg("mean", e.cast(s.mean, dt)),
                          Builder::arg("variance", e.cast(s.variance, dt))};
    if (s.gamma) args.push_back(Builder::arg("gamma", e.cast(s.gamma, dt)));
    if (s.beta) args.push_back(Builder::arg("beta", e.cast(s.beta, dt)));
    args.push_back(Builder::arg("epsilon", Value::scalar_float(dt, s.eps)));
    return e.op("batch_norm", std::move(args));
  }
  int rr = std::max(r, 2);
  auto pc = [&](Var* v) { return e.per_channel(e.cast(v, dt), rr); };
  Var* y = e.bin("sub", x, pc(s.mean));
  y = e.bin("mul", y, e.un("rsqrt", e.bin("add", pc(s.variance), e.cs(s.eps, dt))));
  if (s.gamma) y = e.bin("mul", y, pc(s.gamma));
  if (s.beta) y = e.bin("add", y, pc(s.beta));
  return y;
}

Var* norm_by_stats(Emitter& e, Var* x, const ChannelNormSpec& s) {
  if (!s.mean || !s.variance || !s.gamma || !s.beta)
    fail("the normalization needs mean, variance, scale and bias");
  int r = Emitter::rank(x);
  DataType dt = Emitter::dtype(x);
  Var* d = e.bin("sub", x, e.per_channel(s.mean, r));
  Var* sd = e.un("sqrt", e.bin("add", e.per_channel(s.variance, r), e.cs(s.eps, dt)));
  Var* y = e.bin("mul", e.bin("real_div", d, sd), e.per_channel(s.gamma, r));
  return e.bin("add", y, e.per_channel(s.beta, r));
}

Var* layer_norm(Emitter& e, Var* x, int64_t normalized, Var* gamma, Var* beta, double eps) {
  int r = Emitter::rank(x);
  if (normalized < 1 || normalized > r)
    fail("layer norm over " + std::to_string(normalized) + " axes of a rank-" + std::to_string(r) +
         " input");
  DataType dt = Emitter::dtype(x);
  std::vector<int64_t> axes;
  for (int64_t k = r - normalized; k < r; ++k) axes.push_back(k);
  if ((!gamma || is_const(gamma)) && (!beta || is_const(beta))) {
    std::vector<Arg> args{Builder::arg("x", x), Builder::arg("axes", Value::int_list(axes))};
    if (gamma) args.push_back(Builder::arg("gamma", e.cast(gamma, dt)));
    if (beta) args.push_back(Builder::arg("beta", e.cast(beta, dt)));
    args.push_back(Builder::arg("epsilon", Value::scalar_float(dt, eps)));
    return e.op("layer_norm", std::move(args));
  }
  Var* y = e.op("layer_norm", {Builder::arg("x", x), Builder::arg("axes", Value::int_list(axes)),
                               Builder::arg("epsilon", Value::scalar_float(dt, eps))});
  if (gamma) y = e.bin("mul", y, e.cast(gamma, dt));
  if (beta) y = e.bin("add", y, e.cast(beta, dt));
  return y;
}

Var* group_norm(Emitter& e, Var* x, int64_t groups, Var* gamma, Var* beta, double eps) {
  int r = Emitter::rank(x);
  if (r < 2) fail("group norm needs an input [N, C, ...]");
  const Dim& c = x->type()->shape()[1];
  if (groups < 1 || (c->is_const() && c->value() % groups))
    fail("the channel count is not a multiple of the " + std::to_string(groups) + " groups");
  DataType dt = Emitter::dtype(x);
  Var* shp = e.op("shape", {Builder::arg("x", x)});
  Var* n =
      e.op("slice_by_size", {Builder::arg("x", shp), Builder::arg("begin", Value::int_list({0})),
                             Builder::arg("size", Value::int_list({1}))});
  Var* g = e.op("reshape", {Builder::arg("x", x),
                            Builder::arg("shape", e.concat({n, e.ci({groups, -1})}, 0))});
  Var* d = e.bin("sub", g, reduce_mean(e, g, {2}));
  Var* var = reduce_mean(e, e.bin("mul", d, d), {2});
  Var* y = e.bin("mul", d, e.un("rsqrt", e.bin("add", var, e.cs(eps, dt))));
  y = e.op("reshape", {Builder::arg("x", y), Builder::arg("shape", shp)});
  if (gamma) y = e.bin("mul", y, e.per_channel(e.cast(gamma, dt), r));
  if (beta) y = e.bin("add", y, e.per_channel(e.cast(beta, dt), r));
  return y;
}

Var* rms_norm(Emitter& e, Var* x, int64_t axis, Var* scale, double eps) {
  int r = Emitter::rank(x);
  int64_t ax = Emitter::axis(axis, r);
  std::vector<int64_t> axes;
  for (int64_t k = ax; k < r; ++k) axes.push_back(k);
  Var* ms = reduce_mean(e, e.bin("mul", x, x), axes);
  Var* y = e.bin("mul", x, e.un("rsqrt", e.bin("add", ms, e.cs(eps, Emitter::dtype(x)))));
  return scale ? e.bin("mul", y, scale) : y;
}

}  // namespace compose
}  // namespace milkit
