// Scaled dot-product attention: scores, masks as one additive bias, a guarded softmax.
#include "milkit/compose/attention.h"

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace milkit {
namespace compose {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

Var* matmul(Emitter& e, Var* x, Var* y, bool ty) {
  return e.op("matmul", {Builder::arg("x", x), Builder::arg("y", y),
                         Builder::arg("transpose_x", Value::scalar_bool(false)),
                         Builder::arg("transpose_y", Value::scalar_bool(ty))});
}

// shape(x) with axis `ax` replaced by `size` (a const when x's shape is known).
Var* shape_with(Emitter& e, Var* x, int64_t ax, int64_t size) {
  if (auto s = Emitter::static_shape(x)) {
    (*s)[static_cast<size_t>(ax)] = size;
    return e.ci(*s);
  }
  int64_t r = Emitter::rank(x);
  Var* sh = e.op("shape", {Builder::arg("x", x)});
  std::vector<Var*> parts;
  if (ax > 0) parts.push_back(e.slice_axis(sh, 0, 0, ax));
  parts.push_back(e.ci({size}));
  if (ax + 1 < r) parts.push_back(e.slice_axis(sh, 0, ax + 1, r));
  return e.concat(parts, 0);
}

// The causal / windowed bias [Lq, Lk]: 0 where query i may see key j, else -inf.
Var* causal_bias(Emitter& e, Var* q, Var* k, const AttentionSpec& s, DataType dt) {
  int r = Emitter::rank(q);
  const Dim& L = q->type()->shape()[static_cast<size_t>(r - 2)];
  const Dim& S = k->type()->shape()[static_cast<size_t>(r - 2)];
  bool window = s.left_window >= 0 || s.right_window >= 0;
  if (!L->is_const() || !S->is_const()) {
    if (window || s.align != CausalAlign::TopLeft)
      fail("a bottom-right causal or windowed mask needs the sequence lengths to be known");
    // lower triangle of ones of the run-time [L, S]
    Var* shape = e.concat({e.slice_axis(e.op("shape", {Builder::arg("x", q)}), 0, r - 2, r - 1),
                           e.slice_axis(e.op("shape", {Builder::arg("x", k)}), 0, r - 2, r - 1)},
                          0);
    Var* ones = e.op(
        "fill", {Builder::arg("shape", shape), Builder::arg("value", Value::scalar_float(dt, 1))});
    Var* tri = e.op("band_part", {Builder::arg("x", ones),
                                  Builder::arg("lower", Value::scalar_int(DataType::Int32, -1)),
                                  Builder::arg("upper", Value::scalar_int(DataType::Int32, 0))});
    return e.sel(e.bin("greater", tri, e.cs(0, dt)), e.cs(0, dt), e.cs(kNegInf, dt));
  }
  int64_t sq = L->value(), sk = S->value();
  int64_t off = s.align == CausalAlign::TopLeft ? 0 : s.offset.value_or(sk - sq);
  std::vector<double> c(static_cast<size_t>(sq * sk));
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < sk; ++j) {
      int64_t diff = i + off - j;
      bool ok = !s.causal || diff >= 0;
      if (s.left_window >= 0) ok = ok && diff <= s.left_window;
      if (s.right_window >= 0) ok = ok && -diff <= s.right_window;
      c[static_cast<size_t>(i * sk + j)] = ok ? 0.0 : kNegInf;
    }
  return e.c(Value::from_doubles(dt, {sq, sk}, c));
}

// The user mask as an additive bias (bool -> 0 / -inf), padded with -inf up to Lk if asked.
Var* mask_bias(Emitter& e, Var* k, const AttentionSpec& s, DataType dt) {
  Var* m = s.mask;
  if (Emitter::dtype(m) == DataType::Bool)
    m = e.sel(m, e.cs(0, dt), e.cs(kNegInf, dt));
  else
    m = e.cast(m, dt);
  auto ms = Emitter::static_shape(m);
  auto ks = Emitter::static_shape(k);
  if (s.pad_mask && ms && ks && !ms->empty() && ms->back() < (*ks)[ks->size() - 2]) {
    std::vector<int64_t> pad(2 * ms->size(), 0);
    pad.back() = (*ks)[ks->size() - 2] - ms->back();
    m = e.op("pad", {Builder::arg("x", m), Builder::arg("pad", Value::int_list(pad)),
                     Builder::arg("constant_val", Value::scalar_float(dt, kNegInf))});
  }
  return m;
}

}  // namespace

Var* repeat_heads(Emitter& e, Var* x, int64_t groups) {
  if (groups == 1) return x;
  int64_t r = Emitter::rank(x);
  if (r < 3) fail("repeating heads needs rank >= 3");
  const Dim& h = x->type()->shape()[static_cast<size_t>(r - 3)];
  if (!h->is_const()) fail("repeating heads needs the head count to be known");
  Var* ex = e.expand_dims(x, {r - 2});
  std::vector<int64_t> reps(static_cast<size_t>(r + 1), 1);
  reps[static_cast<size_t>(r - 2)] = groups;
  Var* t = e.op("tile", {Builder::arg("x", ex), Builder::arg("reps", Value::int_list(reps))});
  return e.op("reshape", {Builder::arg("x", t),
                          Builder::arg("shape", shape_with(e, x, r - 3, h->value() * groups))});
}

Var* split_heads(Emitter& e, Var* x, int64_t heads) {
  if (heads <= 0) fail("splitting heads needs a positive head count");
  Var* r;
  if (auto s = Emitter::static_shape(x)) {
    r = e.reshape(x, {(*s)[0], (*s)[1], heads, (*s)[2] / heads});
  } else {
    Var* bs = e.slice_axis(e.op("shape", {Builder::arg("x", x)}), 0, 0, 2);
    r = e.op("reshape",
             {Builder::arg("x", x), Builder::arg("shape", e.concat({bs, e.ci({heads, -1})}, 0))});
  }
  return e.transpose(r, {0, 2, 1, 3});
}

Var* merge_heads(Emitter& e, Var* x) {
  Var* y = e.transpose(x, {0, 2, 1, 3});
  if (auto s = Emitter::static_shape(y)) return e.reshape(y, {(*s)[0], (*s)[1], (*s)[2] * (*s)[3]});
  Var* bs = e.slice_axis(e.op("shape", {Builder::arg("x", y)}), 0, 0, 2);
  return e.op("reshape",
              {Builder::arg("x", y), Builder::arg("shape", e.concat({bs, e.ci({-1})}, 0))});
}

AttentionResult attention(Emitter& e, Var* q, Var* k, Var* v, const AttentionSpec& s) {
  int r = Emitter::rank(q);
  if (r < 2) fail("the query must have rank >= 2");
  DataType dt = Emitter::dtype(q);
  double scale;
  if (s.scale) {
    scale = *s.scale;
  } else {
    const Dim& d = q->type()->shape()[static_cast<size_t>(r - 1)];
    if (!d->is_const()) fail("the head size must be known when no scale is given");
    scale = 1.0 / std::sqrt(static_cast<double>(d->value()));
  }
  AttentionResult res;
  if (s.past_key) k = e.concat({s.past_key, k}, r - 2);
  if (s.past_value) v = e.concat({s.past_value, v}, r - 2);
  res.key = k;
  res.value = v;
  if (s.group_heads && r >= 3) {
    const Dim& hq = q->type()->shape()[static_cast<size_t>(r - 3)];
    const Dim& hk = k->type()->shape()[static_cast<size_t>(r - 3)];
    if (hq->is_const() && hk->is_const() && hq->value() != hk->value()) {
      if (hk->value() == 0 || hq->value() % hk->value())
        fail("the query's head count must be a multiple of the key's");
      k = repeat_heads(e, k, hq->value() / hk->value());
      v = repeat_heads(e, v, hq->value() / hk->value());
    }
  }
  Var* sc;
  if (s.split_scale) {
    Var* rs = e.cs(std::sqrt(scale), dt);
    sc = matmul(e, e.bin("mul", q, rs), e.bin("mul", k, rs), true);
  } else {
    sc = matmul(e, e.bin("mul", q, e.cs(scale, dt)), k, true);
  }
  if (s.softcap > 0)
    sc =
        e.bin("mul", e.un("tanh", e.bin("real_div", sc, e.cs(s.softcap, dt))), e.cs(s.softcap, dt));
  res.scores = sc;
  Var* bias = s.mask ? mask_bias(e, k, s, dt) : nullptr;
  if (s.causal || s.left_window >= 0 || s.right_window >= 0) {
    Var* cb = causal_bias(e, q, k, s, dt);
    bias = bias ? e.bin("add", bias, cb) : cb;
  }
  if (s.bias) bias = bias ? e.bin("add", bias, e.cast(s.bias, dt)) : e.cast(s.bias, dt);
  res.masked = bias ? e.bin("add", sc, bias) : sc;
  Var* p = e.op("softmax", {Builder::arg("x", res.masked),
                            Builder::arg("axis", Value::scalar_int(DataType::Int32, -1))});
  if (bias) {
    // a row hidden everywhere gives 0, not NaN
    Var* top =
        e.op("reduce_max", {Builder::arg("x", bias), Builder::arg("axes", Value::int_list({-1})),
                            Builder::arg("keep_dims", Value::scalar_bool(true))});
    p = e.sel(e.bin("equal", top, e.cs(kNegInf, dt)), e.cs(0, dt), p);
  }
  res.probs = p;
  res.y = matmul(e, p, v, false);
  return res;
}

}  // namespace compose
}  // namespace milkit
