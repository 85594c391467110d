// ATen scaled dot-product attention.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

// scaled_dot_product_attention by its definition (mask, causal, scale, GQA)
Var* sdpa(C& cv, const json& n) {
  Var* q = cv.tensor(n, "query");
  Var* k = cv.tensor(n, "key");
  Var* v = cv.tensor(n, "value");
  Var* mask = cv.opt_tensor(n, "attn_mask");
  bool causal = cv.bo(n, "is_causal", false);
  DataType dt = C::dtype(q);
  int r = cv.rank(n, q);
  if (r < 2) cv.fail(n, "query must have rank >= 2");
  Dim e = C::shape(q)[static_cast<size_t>(r - 1)];
  double scale;
  if (C::has(n, "scale")) {
    scale = cv.f(n, "scale", 1);
  } else {
    if (!e->is_const()) cv.fail(n, "the embedding size of the query must be known");
    scale = 1.0 / std::sqrt(static_cast<double>(e->value()));
  }
  if (cv.bo(n, "enable_gqa", false) && r >= 3) {
    Dim hq = C::shape(q)[static_cast<size_t>(r - 3)], hk = C::shape(k)[static_cast<size_t>(r - 3)];
    if (!hq->is_const() || !hk->is_const() || hk->value() == 0 || hq->value() % hk->value())
      cv.fail(n, "enable_gqa needs known head counts, the query's a multiple of the key's");
    int64_t rep = hq->value() / hk->value();
    if (rep > 1) {
      // repeat_interleave along the head axis: [.., Hk, S, E] -> [.., Hk, rep, S, E] -> [.., Hk*rep, S, E]
      auto rep_kv = [&](Var* t) {
        Var* ex = cv.op("expand_dims", {C::a("x", t), C::aints32("axes", {r - 2})});
        std::vector<int64_t> reps(static_cast<size_t>(r + 1), 1);
        reps[static_cast<size_t>(r - 2)] = rep;
        Var* tl = cv.op("tile", {C::a("x", ex), C::aints32("reps", reps)});
        std::vector<Dim> sh = C::shape(t);
        sh[static_cast<size_t>(r - 3)] = cv.ctx().constant(hq->value());
        return cv.op("reshape", {C::a("x", tl), C::a("shape", cv.shape_var(sh))});
      };
      k = rep_kv(k);
      v = rep_kv(v);
    }
  }
  Var* qs = bin(cv, "mul", q, cv.cs(scale, dt));
  Var* s = matmul(cv, qs, cv.cast(k, dt), true);
  if (causal) {
    Dim L = C::shape(q)[static_cast<size_t>(r - 2)], S = C::shape(k)[static_cast<size_t>(r - 2)];
    Var* ones = cv.op("fill", {C::a("shape", cv.shape_var({L, S})), C::a("value", Value::scalar_float(dt, 1))});
    Var* tri = cv.op("band_part", {C::a("x", ones), C::ai32("lower", -1), C::ai32("upper", 0)});
    Var* keep = bin(cv, "greater", tri, cv.cs(0, dt));
    s = cv.op("select", {C::a("cond", keep), C::a("a", s), C::a("b", cv.cs(-std::numeric_limits<double>::infinity(), dt))});
  }
  if (mask) {
    if (C::dtype(mask) == DataType::Bool)
      s = cv.op("select", {C::a("cond", mask), C::a("a", s), C::a("b", cv.cs(-std::numeric_limits<double>::infinity(), dt))});
    else
      s = bin(cv, "add", s, cv.cast(mask, dt));
  }
  // a mask can hide every key from a query (padding): torch gives that row 0
  Var* p = mask ? safe_softmax(cv, s, -1) : cv.op("softmax", {C::a("x", s), C::ai32("axis", -1)});
  return matmul(cv, p, cv.cast(v, dt));
}

void scaled_dot_product_attention(C& cv, const json& n) {
  if (cv.f(n, "dropout_p", 0) > 0) cv.fail(n, "attention dropout is not supported (export the model in eval mode)");
  cv.out(n, sdpa(cv, n));
}

void scaled_dot_product_flash_attention_for_cpu(C& cv, const json& n) {
  if (cv.f(n, "dropout_p", 0) > 0) cv.fail(n, "attention dropout is not supported");
  cv.out(n, sdpa(cv, n));
}

}  // namespace

void register_attention(OpTable& t) {
  t.on("aten.scaled_dot_product_attention", scaled_dot_product_attention);
  t.on("aten._scaled_dot_product_flash_attention_for_cpu", scaled_dot_product_flash_attention_for_cpu);
}

}  // namespace torch_detail
}  // namespace milkit
