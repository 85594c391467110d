// transformers ops: scaled_dot_product_attention (coremltools iOS18/transformers.py).
//
// softmax(query @ key^T / sqrt(E) + mask) @ value over the last two dims; query [B*, L, E], key
// [B*, S, E], value [B*, S, EV] -> [B*, L, EV] in query's dtype (T = fp16 / fp32). attn_mask (M =
// bool / fp16 / fp32) broadcasts to [B*, L, S]: a bool mask keeps the scores where it is True
// (False -> -inf, so a row with no True gives NaN as in the documented formula), a float mask is
// added. Checks follow coremltools (same rank >= 3; equal batch dims when all are known; E and S
// agree when known; the mask's S and its broadcast against query[:-1]). milkit also rejects a
// mask that would broadcast the output beyond query's shape (more dims than query, or a dim > 1
// where query has 1): the op requires the mask to broadcast *to* [B*, L, S], and coremltools'
// inferred type would not match the result. Folds when query, key, value and the mask (when
// given) are known; coremltools also folds when the mask is unknown, leaving it out, which
// gives a wrong value: milkit does not fold then.
#include <cmath>
#include <limits>

#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"

namespace milkit {

namespace {

bool known_differ(Dim a, Dim b) { return a->is_const() && b->is_const() && a->value() != b->value(); }

std::vector<const Type*> sdpa_infer(InferCtx& ic) {
  const std::vector<Dim>& q = ops::ranked_shape(ic, "query");
  const std::vector<Dim>& k = ops::ranked_shape(ic, "key");
  const std::vector<Dim>& v = ops::ranked_shape(ic, "value");
  if (q.size() != k.size() || q.size() != v.size())
    ic.fail("query, key, value must have the same rank, got query rank " + std::to_string(q.size()) +
            ", key rank " + std::to_string(k.size()) + ", value rank " + std::to_string(v.size()));
  const size_t r = q.size();
  if (r < 3)
    ic.fail("query, key, value must have at least rank 3 (batch, sequence length, embedding), got rank " +
            std::to_string(r));
  bool any_sym = false;
  for (const auto* s : {&q, &k, &v})
    for (size_t i = 0; i + 2 < r; ++i) any_sym |= !(*s)[i]->is_const();
  if (!any_sym) {
    for (size_t i = 0; i + 2 < r; ++i)
      if (q[i]->value() != k[i]->value() || q[i]->value() != v[i]->value())
        ic.fail("query, key, value must have the same batch dims, got query " + ops::shape_str(q) +
                ", key " + ops::shape_str(k) + ", value " + ops::shape_str(v));
  }
  if (known_differ(q[r - 1], k[r - 1]))
    ic.fail_input("key", "must have the same embedding dim as query, got query " + ops::shape_str(q) +
                             " and key " + ops::shape_str(k));
  if (known_differ(k[r - 2], v[r - 2]))
    ic.fail_input("value", "must have the same sequence length as key, got key " + ops::shape_str(k) +
                               " and value " + ops::shape_str(v));
  if (ic.has("attn_mask")) {
    const std::vector<Dim>& m = ops::ranked_shape(ic, "attn_mask");
    if (m.empty()) ic.fail_input("attn_mask", "must have rank >= 1 ([..., S]), got a scalar");
    if (known_differ(m.back(), k[r - 2]))
      ic.fail_input("attn_mask", "must have the same sequence length as key, got key " +
                                     ops::shape_str(k) + " and attn_mask " + ops::shape_str(m));
    std::vector<Dim> qh(q.begin(), q.end() - 1), mh(m.begin(), m.end() - 1);
    ops::broadcast_shapes(ic, qh, mh, "query[:-1]", "attn_mask[:-1]");
    if (m.size() > r)
      ic.fail_input("attn_mask", "of shape " + ops::shape_str(m) +
                                     " has more dims than query " + ops::shape_str(q) +
                                     "; it must broadcast to [B*, L, S]");
    for (size_t i = 0; i < mh.size(); ++i) {
      Dim qd = qh[qh.size() - mh.size() + i];
      if (qd->is_const() && qd->value() == 1 && mh[i]->is_const() && mh[i]->value() > 1)
        ic.fail_input("attn_mask", "of shape " + ops::shape_str(m) + " does not broadcast to query " +
                                       ops::shape_str(q) + "[:-1] + [S]: it must not broadcast the output");
    }
  }
  std::vector<Dim> out(q.begin(), q.end() - 1);
  out.push_back(v.back());
  return {ic.ctx.tensor(ic.type("query")->dtype(), out)};
}

bool sdpa_value(InferCtx& ic, std::vector<std::shared_ptr<const Value>>& out) {
  if (!ic.known("query") || !ic.known("key") || !ic.known("value")) return false;
  if (ic.has("attn_mask") && !ic.known("attn_mask")) return false;
  const Value& q = *ic.val("query");
  const Value& k = *ic.val("key");
  const Value& v = *ic.val("value");
  const int r = q.rank();
  const std::vector<int64_t>& qs = q.shape();
  const int64_t L = qs[r - 2], E = qs[r - 1], S = k.shape()[r - 2], EV = v.shape()[r - 1];
  if (k.shape()[r - 1] != E || v.shape()[r - 2] != S) return false;
  int64_t batch = 1;
  for (int i = 0; i < r - 2; ++i) {
    if (k.shape()[i] != qs[i] || v.shape()[i] != qs[i]) return false;
    batch *= qs[i];
  }
  std::vector<int64_t> score_shape(qs.begin(), qs.end() - 1);
  score_shape.push_back(S);
  std::vector<int64_t> mask_idx;
  const Value* mask = ic.has("attn_mask") ? ic.val("attn_mask") : nullptr;
  if (mask) {
    try {
      if (ops::broadcast_concrete(mask->shape(), score_shape) != score_shape) return false;
    } catch (const std::exception&) {
      return false;
    }
    mask_idx = ops::broadcast_index(mask->shape(), score_shape);
  }
  const bool bool_mask = mask && mask->dtype() == DataType::Bool;
  const double scale = std::sqrt(static_cast<double>(E));
  const double ninf = -std::numeric_limits<double>::infinity();
  std::vector<double> res(static_cast<size_t>(batch * L * EV));
  std::vector<double> row(static_cast<size_t>(S));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t l = 0; l < L; ++l) {
      double mx = ninf;
      for (int64_t s = 0; s < S; ++s) {
        double acc = 0;
        for (int64_t e = 0; e < E; ++e)
          acc += q.as_double((b * L + l) * E + e) * k.as_double((b * S + s) * E + e);
        acc /= scale;
        if (mask) {
          int64_t mi = mask_idx[(b * L + l) * S + s];
          acc += bool_mask ? (mask->as_int(mi) ? 0.0 : ninf) : mask->as_double(mi);
        }
        row[s] = acc;
        mx = std::max(mx, acc);
      }
      double sum = 0;
      for (int64_t s = 0; s < S; ++s) {
        row[s] = std::exp(row[s] - mx);
        sum += row[s];
      }
      for (int64_t e = 0; e < EV; ++e) {
        double acc = 0;
        for (int64_t s = 0; s < S; ++s) acc += row[s] / sum * v.as_double((b * S + s) * EV + e);
        res[(b * L + l) * EV + e] = acc;
      }
    }
  }
  std::vector<int64_t> shape(qs.begin(), qs.end() - 1);
  shape.push_back(EV);
  out.push_back(ops::share(Value::from_doubles(q.dtype(), shape, res)));
  return true;
}

}  // namespace

void register_transformers_ops(OpRegistry& r) {
  OpSchema s;
  s.name = "scaled_dot_product_attention";
  s.since = Target::iOS18;
  s.inputs = {in("query", dt::floats(), "T"), in("key", dt::floats(), "T"), in("value", dt::floats(), "T"),
              in_opt("attn_mask", {DataType::Bool, DataType::Float16, DataType::Float32}, nullptr, false, "M")};
  s.infer = sdpa_infer;
  s.value = sdpa_value;
  r.add(std::move(s));
}

}  // namespace milkit
