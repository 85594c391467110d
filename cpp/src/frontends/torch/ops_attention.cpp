// ATen scaled dot-product attention.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "milkit/compose/attention.h"
#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

// scaled_dot_product_attention (mask, causal top-left, scale, GQA) by compose::attention
Var* sdpa(C& cv, const json& n) {
  Var* q = cv.tensor(n, "query");
  Var* k = cv.tensor(n, "key");
  Var* v = cv.tensor(n, "value");
  DataType dt = C::dtype(q);
  int r = cv.rank(n, q);
  if (r < 2) cv.fail(n, "query must have rank >= 2");
  compose::AttentionSpec s;
  if (C::has(n, "scale"))
    s.scale = cv.f(n, "scale", 1);
  else if (!C::shape(q)[static_cast<size_t>(r - 1)]->is_const())
    cv.fail(n, "the embedding size of the query must be known");
  s.group_heads = cv.bo(n, "enable_gqa", false) && r >= 3;
  if (s.group_heads) {
    Dim hq = C::shape(q)[static_cast<size_t>(r - 3)], hk = C::shape(k)[static_cast<size_t>(r - 3)];
    if (!hq->is_const() || !hk->is_const() || hk->value() == 0 || hq->value() % hk->value())
      cv.fail(n, "enable_gqa needs known head counts, the query's a multiple of the key's");
  }
  s.mask = cv.opt_tensor(n, "attn_mask");
  s.causal = cv.bo(n, "is_causal", false);
  s.align = compose::CausalAlign::TopLeft;
  return compose::attention(cv.e, q, cv.cast(k, dt), cv.cast(v, dt), s).y;
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
