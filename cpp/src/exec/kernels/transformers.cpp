// Kernel of scaled_dot_product_attention: per batch (the dims before the last two, equal in
// query, key and value), scores = query @ key^T / sqrt(E) [L, S] (OpenBLAS), plus the mask
// broadcast to [B*, L, S] (a bool mask: False -> -inf; a float mask is added), a softmax over S,
// and @ value. fp32 compute (fp16 programs are converted by the executor). A row whose scores are
// all -inf gives NaN, as the documented formula and coremltools' value inference do (torch's
// math kernel gives 0 there).
#include <cmath>
#include <limits>

#include "gemm.h"
#include "kernels.h"

namespace milkit {

namespace {

void sdpa(KernelCtx& k) {
  const Tensor& q = k.in("query");
  const Tensor& kt = k.in("key");
  const Tensor& v = k.in("value");
  for (const Tensor* t : {&q, &kt, &v})
    if (t->dtype() != DataType::Float32) k.fail("query, key and value must be fp16 or fp32");
  const int r = q.rank();
  if (r < 3 || kt.rank() != r || v.rank() != r)
    k.fail("query, key, value must have the same rank >= 3, got shapes " + shape_str(q.shape()) + ", " +
           shape_str(kt.shape()) + ", " + shape_str(v.shape()));
  int64_t batch = 1;
  for (int i = 0; i < r - 2; ++i) {
    if (kt.dim(i) != q.dim(i) || v.dim(i) != q.dim(i))
      k.fail("query, key, value must have the same batch dims, got shapes " + shape_str(q.shape()) + ", " +
             shape_str(kt.shape()) + ", " + shape_str(v.shape()));
    batch *= q.dim(i);
  }
  const int64_t L = q.dim(-2), E = q.dim(-1), S = kt.dim(-2), EV = v.dim(-1);
  if (kt.dim(-1) != E)
    k.fail("key " + shape_str(kt.shape()) + " must have query's embedding dim " + std::to_string(E));
  if (v.dim(-2) != S)
    k.fail("value " + shape_str(v.shape()) + " must have key's sequence length " + std::to_string(S));
  std::vector<int64_t> out_shape(q.shape().begin(), q.shape().end() - 1);
  out_shape.push_back(EV);
  Tensor& out = k.alloc(0, out_shape);

  // the mask's element strides over the score dims [B*, L, S] (0 where it broadcasts)
  const bool has_mask = k.has("attn_mask");
  const Tensor* m = has_mask ? &k.in("attn_mask") : nullptr;
  std::vector<int64_t> mstride(static_cast<size_t>(r), 0);
  if (m) {
    std::vector<int64_t> score_shape(q.shape().begin(), q.shape().end() - 1);
    score_shape.push_back(S);
    if (m->rank() < 1 || m->rank() > r)
      k.fail("attn_mask of shape " + shape_str(m->shape()) + " does not broadcast to " + shape_str(score_shape));
    int64_t st = 1;
    for (int i = m->rank() - 1; i >= 0; --i) {
      int d = r - m->rank() + i;
      if (m->dim(i) != 1 && m->dim(i) != score_shape[d])
        k.fail("attn_mask of shape " + shape_str(m->shape()) + " does not broadcast to " + shape_str(score_shape));
      mstride[d] = m->dim(i) == 1 ? 0 : st;
      st *= m->dim(i);
    }
    if (m->dtype() != DataType::Bool && m->dtype() != DataType::Float32)
      k.fail("attn_mask must be bool, fp16 or fp32");
  }
  const float ninf = -std::numeric_limits<float>::infinity();
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(E)));
  std::vector<float> scores(static_cast<size_t>(L * S));
  const float* qp = q.data<float>();
  const float* kp = kt.data<float>();
  const float* vp = v.data<float>();
  float* op = out.mutable_data<float>();
  for (int64_t b = 0; b < batch; ++b) {
    if (L == 0 || EV == 0) break;
    float* sc = scores.data();
    if (E > 0)
      exec::parallel_sgemm(false, true, L, S, E, qp + b * L * E, E, kp + b * S * E, E, 0.0f, sc, std::max<int64_t>(S, 1));
    else
      std::fill(scores.begin(), scores.end(), 0.0f);
    // the mask offset of this batch
    int64_t moff = 0;
    if (m) {
      int64_t rem = b;
      for (int d = r - 3; d >= 0; --d) {
        moff += (rem % q.dim(d)) * mstride[d];
        rem /= q.dim(d);
      }
    }
    for (int64_t l = 0; l < L; ++l) {
      float* row = sc + l * S;
      float mx = ninf;
      for (int64_t s = 0; s < S; ++s) {
        float x = row[s] * scale;
        if (m) {
          int64_t mi = moff + l * mstride[r - 2] + s * mstride[r - 1];
          if (m->dtype() == DataType::Bool)
            x = m->data<uint8_t>()[mi] ? x : ninf;
          else
            x += m->data<float>()[mi];
        }
        row[s] = x;
        mx = std::max(mx, x);
      }
      // exp(x - max) / sum; a row of -inf gives NaN (-inf - -inf), and so does a NaN score
      double sum = 0;
      bool nan = std::isnan(mx);
      for (int64_t s = 0; s < S; ++s) {
        float e = std::exp(row[s] - mx);
        nan |= std::isnan(row[s]);
        row[s] = e;
        sum += e;
      }
      float inv = static_cast<float>(1.0 / sum);
      for (int64_t s = 0; s < S; ++s) row[s] = nan ? std::numeric_limits<float>::quiet_NaN() : row[s] * inv;
    }
    float* ob = op + b * L * EV;
    if (S > 0)
      exec::parallel_sgemm(false, false, L, EV, S, sc, S, vp + b * S * EV, EV, 0.0f, ob, EV);
    else
      std::fill(ob, ob + L * EV, std::numeric_limits<float>::quiet_NaN());  // softmax over nothing
  }
}

}  // namespace

void register_transformers_kernels(KernelRegistry& r) { r.add("scaled_dot_product_attention", {sdpa}); }

}  // namespace milkit
