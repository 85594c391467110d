// Operators of ONNX's other domains that MIL expresses: ai.onnx.preview (FlexAttention, with its
// score_mod / prob_mod subgraphs), ai.onnx.preview.training (the optimizers' update rules:
// Adagrad, Adam, Momentum) and ai.onnx.ml (Binarizer, ArrayFeatureExtractor). Keyed "domain:Op".
#include <cmath>

#include "converter.h"

namespace milkit {
namespace onnx_detail {

namespace {

using onnx::NodeProto;
using C = Converter;

Var* binary(C& cv, const char* type, Var* x, Var* y) { return cv.op(type, {C::a("x", x), C::a("y", y)}); }
Var* f32c(C& cv, double v) { return cv.cs(v, DataType::Float32); }

// ---- ai.onnx.preview ----------------------------------------------------------------------------

void flex_attention(C& cv, const NodeProto& n) {
  Var* q = cv.in(n, 0);
  Var* k = cv.in(n, 1);
  Var* v = cv.in(n, 2);
  auto qs = C::static_shape(q), ks = C::static_shape(k);
  if (!qs || !ks || qs->size() != 4 || ks->size() != 4) cv.fail(n, "needs 4-D Q, K and V of known shapes");
  DataType dt = C::dtype(q), f32 = DataType::Float32;
  int64_t hq = (*qs)[1], hkv = (*ks)[1], E = (*qs)[3];
  if (hq != hkv) {
    if (hkv <= 0 || hq % hkv) cv.fail(n, "q heads must be a multiple of kv heads");
    int64_t g = hq / hkv;
    auto rep = [&](Var* x) {
      auto s = C::static_shape(x);
      Var* e = cv.op("expand_dims", {C::a("x", x), C::aints32("axes", {2})});
      Var* t = cv.op("tile", {C::a("x", e), C::aints32("reps", {1, 1, g, 1, 1})});
      return cv.op("reshape", {C::a("x", t), C::aints32("shape", {(*s)[0], hq, (*s)[2], (*s)[3]})});
    };
    k = rep(k);
    v = rep(v);
  }
  double scale = C::attr(n, "scale") ? C::af(n, "scale", 1.0f) : 1.0 / std::sqrt(static_cast<double>(E));
  Var* sq = cv.cs(std::sqrt(static_cast<float>(scale)), dt);
  Var* scores = cv.op("matmul", {C::a("x", binary(cv, "mul", q, sq)), C::a("y", binary(cv, "mul", k, sq)), C::abool("transpose_y", true)});
  // the softmax in fp32 (fp16 / bf16 promoted, as the reference does) unless softmax_precision says
  int sp = static_cast<int>(C::ai(n, "softmax_precision", 0));
  DataType ct = sp == onnx::TensorProto::FLOAT16 ? DataType::Float16 : f32;
  scores = cv.cast(scores, ct);
  auto mod = [&](const char* name, Var* x) {
    auto* a = C::attr(n, name);
    if (!a || !a->has_g()) return x;
    auto outs = convert_subgraph(cv, a->g(), {x});
    if (outs.size() != 1) cv.fail(n, std::string(name) + " must return one value");
    return cv.cast(outs[0], ct);
  };
  scores = mod("score_mod", scores);
  Var* probs = cv.op("softmax", {C::a("x", scores), C::ai32("axis", -1)});
  probs = mod("prob_mod", probs);
  Var* y = cv.op("matmul", {C::a("x", probs), C::a("y", cv.cast(v, ct))});
  cv.out(n, 0, cv.cast(y, C::dtype(v)));
}

// ---- ai.onnx.preview.training -------------------------------------------------------------------

// The optimizers take (R, T, then groups of n tensors each) and return groups of n tensors.
int groups_of(C& cv, const NodeProto& n, int per) {
  int m = n.input_size() - 2;
  if (m <= 0 || m % per) cv.fail(n, "needs R, T and " + std::to_string(per) + " tensors per optimized tensor");
  return m / per;
}

void adagrad(C& cv, const NodeProto& n) {
  int k = groups_of(cv, n, 3);
  double decay = C::af(n, "decay_factor", 0.0f), eps = C::af(n, "epsilon", 1e-6f), norm = C::af(n, "norm_coefficient", 0.0f);
  Var* r = cv.cast(cv.in(n, 0), DataType::Float32);
  Var* t = cv.cast(cv.in(n, 1), DataType::Float32);
  Var* rr = binary(cv, "real_div", r, binary(cv, "add", f32c(cv, 1), binary(cv, "mul", t, f32c(cv, decay))));
  for (int i = 0; i < k; ++i) {
    Var* x = cv.in(n, 2 + i);
    Var* g = binary(cv, "add", binary(cv, "mul", x, f32c(cv, norm)), cv.in(n, 2 + k + i));
    Var* h = binary(cv, "add", cv.in(n, 2 + 2 * k + i), binary(cv, "mul", g, g));
    Var* hs = binary(cv, "add", cv.op("sqrt", {C::a("x", h)}), f32c(cv, eps));
    cv.out(n, i, binary(cv, "sub", x, binary(cv, "real_div", binary(cv, "mul", rr, g), hs)));
    cv.out(n, k + i, h);
  }
}

void adam(C& cv, const NodeProto& n) {
  int k = groups_of(cv, n, 4);
  double alpha = C::af(n, "alpha", 0.9f), beta = C::af(n, "beta", 0.999f), eps = C::af(n, "epsilon", 1e-6f);
  double norm = C::af(n, "norm_coefficient", 0.0f), post = C::af(n, "norm_coefficient_post", 0.0f);
  Var* r = cv.cast(cv.in(n, 0), DataType::Float32);
  Var* t = cv.cast(cv.in(n, 1), DataType::Float32);
  // R * sqrt(1 - beta^T) / (1 - alpha^T) after the first step, R at T = 0
  Var* bt = cv.op("pow", {C::a("x", f32c(cv, beta)), C::a("y", t)});
  Var* at = cv.op("pow", {C::a("x", f32c(cv, alpha)), C::a("y", t)});
  Var* adj = binary(cv, "real_div", binary(cv, "mul", r, cv.op("sqrt", {C::a("x", binary(cv, "sub", f32c(cv, 1), bt))})),
                    binary(cv, "sub", f32c(cv, 1), at));
  Var* ra = cv.op("select", {C::a("cond", binary(cv, "greater", t, f32c(cv, 0))), C::a("a", adj), C::a("b", r)});
  for (int i = 0; i < k; ++i) {
    Var* x = cv.in(n, 2 + i);
    Var* g = binary(cv, "add", binary(cv, "mul", x, f32c(cv, norm)), cv.in(n, 2 + k + i));
    Var* v = binary(cv, "add", binary(cv, "mul", cv.in(n, 2 + 2 * k + i), f32c(cv, alpha)), binary(cv, "mul", g, f32c(cv, 1 - alpha)));
    Var* h = binary(cv, "add", binary(cv, "mul", cv.in(n, 2 + 3 * k + i), f32c(cv, beta)),
                    binary(cv, "mul", binary(cv, "mul", g, g), f32c(cv, 1 - beta)));
    Var* hs = binary(cv, "add", cv.op("sqrt", {C::a("x", h)}), f32c(cv, eps));
    Var* xn = binary(cv, "sub", x, binary(cv, "mul", ra, binary(cv, "real_div", v, hs)));
    cv.out(n, i, binary(cv, "mul", xn, f32c(cv, 1 - post)));
    cv.out(n, k + i, v);
    cv.out(n, 2 * k + i, h);
  }
}

void momentum(C& cv, const NodeProto& n) {
  int k = groups_of(cv, n, 3);
  if (!C::attr(n, "alpha") || !C::attr(n, "beta") || !C::attr(n, "mode") || !C::attr(n, "norm_coefficient"))
    cv.fail(n, "alpha, beta, mode and norm_coefficient are required");
  double alpha = C::af(n, "alpha", 0), beta = C::af(n, "beta", 0), norm = C::af(n, "norm_coefficient", 0);
  std::string mode = C::as(n, "mode", "");
  if (mode != "standard" && mode != "nesterov") cv.fail(n, "mode must be standard or nesterov");
  Var* r = cv.cast(cv.in(n, 0), DataType::Float32);
  Var* t = cv.cast(cv.in(n, 1), DataType::Float32);
  Var* b = cv.op("select", {C::a("cond", binary(cv, "greater", t, f32c(cv, 0))), C::a("a", f32c(cv, beta)), C::a("b", f32c(cv, 1))});
  for (int i = 0; i < k; ++i) {
    Var* x = cv.in(n, 2 + i);
    Var* g = binary(cv, "add", binary(cv, "mul", x, f32c(cv, norm)), cv.in(n, 2 + k + i));
    Var* v = binary(cv, "add", binary(cv, "mul", cv.in(n, 2 + 2 * k + i), f32c(cv, alpha)), binary(cv, "mul", g, b));
    Var* step = mode == "standard" ? v : binary(cv, "add", g, binary(cv, "mul", v, f32c(cv, alpha)));
    cv.out(n, i, binary(cv, "sub", x, binary(cv, "mul", r, step)));
    cv.out(n, k + i, v);
  }
}

}  // namespace

void register_domains(OpTable& t) {
  t["ai.onnx.preview:FlexAttention"] = flex_attention;
  t["ai.onnx.preview.training:Adagrad"] = adagrad;
  t["ai.onnx.preview.training:Adam"] = adam;
  t["ai.onnx.preview.training:Momentum"] = momentum;
  t["ai.onnx.ml:Binarizer"] = [](C& cv, const NodeProto& n) {
    Var* x = cv.in(n, 0);
    DataType dt = C::dtype(x);
    Var* gt = binary(cv, "greater", x, cv.cs(C::af(n, "threshold", 0.0f), dt));
    cv.out(n, 0, cv.op("select", {C::a("cond", gt), C::a("a", cv.cs(1, dt)), C::a("b", cv.cs(0, dt))}));
  };
  t["ai.onnx.ml:ArrayFeatureExtractor"] = [](C& cv, const NodeProto& n) {
    // x[..., indices] along the last axis
    Var* x = cv.in(n, 0);
    Var* idx = cv.op("reshape", {C::a("x", cv.cast(cv.in(n, 1), DataType::Int32)), C::aints32("shape", {-1})});
    cv.out(n, 0, cv.op("gather", {C::a("x", x), C::a("indices", idx), C::ai32("axis", -1)}));
  };
}

}  // namespace onnx_detail
}  // namespace milkit
