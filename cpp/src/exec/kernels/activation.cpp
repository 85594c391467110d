// Kernels of the activation ops. Every op computes in fp32 (fp16 programs arrive as fp32 and are
// rounded back by the executor), with the vectorizable math of vec_math.h (a few ulp). The
// formulas are coremltools' (iOS15/activation.py), in numerically stable forms where theirs lose
// precision in fp32 (the same function, better rounding):
//  - softplus = log1p(exp(-|x|)) + max(x, 0); softplus_parametric = alpha * softplus(beta * x)
//    (coremltools' log(1 + exp(beta * x)) overflows to inf for beta * x > 88);
//  - elu uses expm1; gelu EXACT = x Phi(x) with the normal CDF accurate in the negative tail
//    (0.5 x (1 + erf(x / sqrt 2)) cancels to 0 there); gelu TANH_APPROXIMATION uses
//    0.5 (1 + tanh(u)) = sigmoid(2u).
// maximum / minimum in the formulas propagate NaN like numpy's.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "../dispatch.h"
#include "kernels.h"
#include "milkit/exec/threads.h"
#include "milkit/types/datatype.h"
#include "params.h"
#include "vec_math.h"

namespace milkit {

namespace {

using exec::BroadcastIndexer;

constexpr int64_t kGrain = 8192;

using vmath::np_max;
using vmath::np_min;
using vmath::select;
using vmath::vexp;
using vmath::vexp_for_sum;
using vmath::vexpm1;

// ---- loops --------------------------------------------------------------------------------------

/// x as fp32 (the executor converts fp16); fails for any other dtype.
const Tensor& float_x(KernelCtx& k) {
  const Tensor& x = k.in("x");
  if (x.dtype() != DataType::Float32) k.fail("x has unsupported dtype " + std::string(dtype_name(x.dtype())));
  return x;
}

/// Runs out[i] = f(x[i]) in parallel.
template <typename F>
void map_unary(KernelCtx& k, const Tensor& x, F f) {
  Tensor& out = k.alloc(0, x.shape());
  const float* a = x.data<float>();
  float* o = out.mutable_data<float>();
  const bool half = k.rounds_output();
  parallel_for(x.numel(), kGrain, [&](int64_t s, int64_t e) {
    vmath::map(a + s, o + s, e - s, f);
    if (half) round_to_half(o + s, e - s);  // fp16's values, while in cache
  });
  if (half) k.set_rounded();
}

/// Runs out = f(x, alpha[c], beta[c]) with the rank-1 parameters along x's dim 1 (prelu,
/// softplus_parametric). `beta` may be undefined.
template <typename F>
void map_channels(KernelCtx& k, const Tensor& x, const Tensor& alpha, const Tensor& beta, F f) {
  if (x.rank() < 2) k.fail("x must have rank 2 or more, got " + shape_str(x.shape()));
  int64_t c = x.dim(1);
  for (const Tensor* p : {&alpha, &beta}) {
    if (!p->defined()) continue;
    if (p->rank() != 1 || (p->numel() != c && p->numel() != 1))
      k.fail("a parameter of shape " + shape_str(p->shape()) + " does not match x's dim 1 (" +
             std::to_string(c) + ")");
  }
  Tensor a32 = cast_tensor(alpha, DataType::Float32);
  Tensor b32 = beta.defined() ? cast_tensor(beta, DataType::Float32) : Tensor();
  Tensor& out = k.alloc(0, x.shape());
  int64_t inner = 1;
  for (int d = 2; d < x.rank(); ++d) inner *= x.dim(d);
  int64_t rows = x.dim(0) * c;
  const float* xa = x.data<float>();
  const float* ap = a32.data<float>();
  const float* bp = b32.defined() ? b32.data<float>() : nullptr;
  bool a1 = a32.numel() == 1, b1 = b32.defined() && b32.numel() == 1;
  float* o = out.mutable_data<float>();
  parallel_for(rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(inner, 1)), [&](int64_t s, int64_t e) {
    for (int64_t r = s; r < e; ++r) {
      int64_t ch = r % c;
      float av = ap[a1 ? 0 : ch], bv = bp ? bp[b1 ? 0 : ch] : 0.0f;
      vmath::map(xa + r * inner, o + r * inner, inner, [f, av, bv](float v) { return f(v, av, bv); });
    }
  });
}

// ---- kernels ------------------------------------------------------------------------------------

/// out = f(x); `f` must be a lambda (a function pointer would be an indirect call per element).
template <typename F>
void unary(KernelCtx& k, F f) {
  map_unary(k, float_x(k), f);
}

void relu(KernelCtx& k) {
  unary(k, [](float x) { return vmath::vrelu(x); });
}
void relu6(KernelCtx& k) {
  unary(k, [](float x) { return vmath::vrelu6(x); });
}
void sigmoid(KernelCtx& k) {
  unary(k, [](float x) { return vmath::vsigmoid(x); });
}
void silu(KernelCtx& k) {
  unary(k, [](float x) { return vmath::vsilu(x); });
}
void softsign(KernelCtx& k) {
  unary(k, [](float x) { return x / (1.0f + std::fabs(x)); });
}
void softplus_kernel(KernelCtx& k) {
  unary(k, [](float x) { return vmath::vsoftplus(x); });
}

void gelu(KernelCtx& k) {
  std::string mode = k.str_or("mode", "EXACT");
  if (mode == "EXACT") {
    unary(k, [](float x) { return x * vmath::vnormal_cdf(x); });
  } else if (mode == "TANH_APPROXIMATION") {
    // 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2 / pi) (x + 0.044715 x^3)
    unary(k, [](float x) {
      float u2 = 1.5957691216057308f * (x + 0.044715f * x * x * x);
      return x / (1.0f + vexp_for_sum(-u2));
    });
  } else if (mode == "SIGMOID_APPROXIMATION") {
    unary(k, [](float x) { return x / (1.0f + vexp_for_sum(-1.702f * x)); });
  } else {
    k.fail("unrecognized mode \"" + mode + "\"");
  }
}

/// An op of x and alpha (and beta): out = f(x, alpha, beta), parameters broadcast to x.
template <typename F>
void with_params(KernelCtx& k, bool has_beta, F f) {
  const Tensor& x = float_x(k);
  exec::map_params<float>(k, x, exec::broadcast_param(k, "alpha", x, DataType::Float32),
                          has_beta ? exec::broadcast_param(k, "beta", x, DataType::Float32) : Tensor(), f, kGrain);
}

void clamped_relu(KernelCtx& k) {
  // minimum(maximum(x, 0), beta) + minimum(minimum(x, 0) * alpha, beta)
  with_params(k, true, [](float x, float a, float b) {
    return np_min(np_max(x, 0.0f), b) + np_min(np_min(x, 0.0f) * a, b);
  });
}
void elu(KernelCtx& k) {
  with_params(k, false, [](float x, float a, float) { return select(x < 0, a * vexpm1(x), x); });
}
void leaky_relu(KernelCtx& k) {
  with_params(k, false, [](float x, float a, float) { return select(x < 0, x * a, x); });
}
void linear_activation(KernelCtx& k) {
  with_params(k, true, [](float x, float a, float b) { return a * x + b; });
}
void scaled_tanh(KernelCtx& k) {
  with_params(k, true, [](float x, float a, float b) { return a * vmath::vtanh(x * b); });
}
void sigmoid_hard(KernelCtx& k) {
  with_params(k, true, [](float x, float a, float b) { return vmath::vhard_sigmoid(x, a, b); });
}
void thresholded_relu(KernelCtx& k) {
  // y[y < alpha] = 0: NaN stays
  with_params(k, false, [](float x, float a, float) { return select(x < a, 0.0f, x); });
}

void prelu(KernelCtx& k) {
  // maximum(x, 0) + minimum(x, 0) * alpha[c]
  map_channels(k, float_x(k), k.in("alpha"), Tensor(),
               [](float x, float a, float) { return np_max(x, 0.0f) + np_min(x, 0.0f) * a; });
}
void softplus_parametric(KernelCtx& k) {
  // alpha[c] * log(1 + exp(beta[c] * x))
  map_channels(k, float_x(k), k.in("alpha"), k.in("beta"),
               [](float x, float a, float b) { return a * vmath::vsoftplus(b * x); });
}

// ---- softmax ------------------------------------------------------------------------------------

/// Softmax of one contiguous row of n elements (o apart from x): exp(x - max) / sum, over L lanes
/// (the max and the sum in L partial lanes, the exps summed as they are written; the last n % L
/// elements through one vector padded with -inf for the max, their exps then added in order). A
/// NaN anywhere makes the sum and so the whole row NaN (as numpy); a +inf makes it NaN too
/// (inf - inf). The lanes are GCC vectors: written as arrays of L floats, GCC did not vectorize
/// the max (a scalar maximum per element) and the tail took a scalar exp each; 12x197x197 on
/// Zen 4, one thread: 0.89 -> 0.65 ns per element, the same bits.
template <int L>
__attribute__((always_inline)) inline void softmax_row_lanes(const float* __restrict x,
                                                             float* __restrict o, int64_t n) {
  typedef typename vmath::Lanes<L>::f V;
  typedef typename vmath::Lanes<L>::i I;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int64_t full = n / L * L, r = n - full;
  float t[L];
  V mv = kNegInf - V{};
  auto take_max = [&mv](const float* p) {  // mv = p where p > mv (NaN never is)
    V xv;
    std::memcpy(&xv, p, sizeof xv);
    const I gt = xv > mv;
    mv = (V)(((I)xv & gt) | ((I)mv & ~gt));
  };
  for (int64_t j = 0; j < full; j += L) take_max(x + j);
  if (r > 0) {
    for (int l = 0; l < L; ++l) t[l] = l < r ? x[full + l] : kNegInf;
    take_max(t);
  }
  float m[L];
  std::memcpy(m, &mv, sizeof m);
  float mx = m[0];
  for (int l = 1; l < L; ++l) mx = m[l] > mx ? m[l] : mx;
  V sv = {};
  for (int64_t j = 0; j < full; j += L) {
    for (int l = 0; l < L; ++l) o[j + l] = vexp(x[j + l] - mx);
    V ov;
    std::memcpy(&ov, o + j, sizeof ov);
    sv += ov;
  }
  float s[L];
  std::memcpy(s, &sv, sizeof s);
  float sum = 0;
  for (int l = 0; l < L; ++l) sum += s[l];
  if (r > 0) {
    for (int l = 0; l < L; ++l) t[l] = vexp((l < r ? x[full + l] : 0.0f) - mx);
    for (int l = 0; l < r; ++l) {
      o[full + l] = t[l];
      sum += t[l];
    }
  }
  for (int64_t j = 0; j < n; ++j) o[j] = o[j] / sum;
}

// 16 partial sums on every CPU: the same sums, so the same bits, with 4, 8 or 16 lanes
void softmax_row_base(const float* x, float* o, int64_t n) { softmax_row_lanes<16>(x, o, n); }
#ifdef MILKIT_VMATH_AVX2
__attribute__((target("avx2,fma"))) void softmax_row_avx2(const float* x, float* o, int64_t n) {
  softmax_row_lanes<16>(x, o, n);
}
__attribute__((target("avx2,fma,avx512f,avx512vl"))) void softmax_row_avx512(const float* x,
                                                                             float* o, int64_t n) {
  softmax_row_lanes<16>(x, o, n);
}
#endif

void softmax_row(const float* x, float* o, int64_t n) {
  static void (*const fn)(const float*, float*, int64_t) = [] {
#ifdef MILKIT_VMATH_AVX2
    if (vmath::cpu_avx512()) return &softmax_row_avx512;
    if (vmath::cpu_avx2_fma()) return &softmax_row_avx2;
#endif
    return &softmax_row_base;
  }();
  fn(x, o, n);
}

/// Softmax along the middle dim of one [n, inner] block, for inner columns [c0, c1); m and s are
/// scratch of c1 - c0 floats.
void softmax_cols(const float* x, float* o, int64_t n, int64_t inner, int64_t c0, int64_t c1, float* m,
                  float* s) {
  int64_t w = c1 - c0;
  for (int64_t i = 0; i < w; ++i) m[i] = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    const float* xr = x + j * inner + c0;
    for (int64_t i = 0; i < w; ++i) m[i] = xr[i] > m[i] ? xr[i] : m[i];
  }
  for (int64_t i = 0; i < w; ++i) s[i] = 0;
  for (int64_t j = 0; j < n; ++j) {
    float* orow = o + j * inner + c0;
    vmath::map2(x + j * inner + c0, m, orow, w, [](float v, float mx) { return vexp(v - mx); });
    for (int64_t i = 0; i < w; ++i) s[i] += orow[i];
  }
  for (int64_t j = 0; j < n; ++j) {
    float* orow = o + j * inner + c0;
    vmath::map2(orow, s, orow, w, [](float e, float sum) { return e / sum; });
  }
}

void softmax(KernelCtx& k) {
  const Tensor& x = float_x(k);
  int64_t a = k.int_or("axis", -1);
  std::vector<int64_t> shape = x.shape();
  if (shape.empty()) {
    if (a != 0 && a != -1) k.fail("axis " + std::to_string(a) + " is out of range for rank 0");
    shape = {1};  // a scalar is a row of one
  }
  int64_t axis = k.axis(a, static_cast<int64_t>(shape.size()));
  int64_t n = shape[axis], outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  Tensor& out = k.alloc(0, x.shape());
  if (out.numel() == 0) return;
  const float* xa = x.data<float>();
  float* o = out.mutable_data<float>();
  if (inner == 1) {
    parallel_for(outer, std::max<int64_t>(1, kGrain / n), [&](int64_t s, int64_t e) {
      for (int64_t r = s; r < e; ++r) softmax_row(xa + r * n, o + r * n, n);
    });
    return;
  }
  constexpr int64_t kCols = 512;
  int64_t chunks = (inner + kCols - 1) / kCols;
  parallel_for(outer * chunks, std::max<int64_t>(1, kGrain / (n * std::min(inner, kCols))),
               [&](int64_t s, int64_t e) {
                 float m[kCols], sum[kCols];
                 for (int64_t t = s; t < e; ++t) {
                   int64_t b = t / chunks, c0 = (t % chunks) * kCols, c1 = std::min(inner, c0 + kCols);
                   softmax_cols(xa + b * n * inner, o + b * n * inner, n, inner, c0, c1, m, sum);
                 }
               });
}

}  // namespace

void register_activation_kernels(KernelRegistry& r) {
  r.add("clamped_relu", {clamped_relu});
  r.add("elu", {elu});
  r.add("gelu", {gelu});
  r.add("leaky_relu", {leaky_relu});
  r.add("linear_activation", {linear_activation});
  r.add("prelu", {prelu});
  r.add("relu", {relu});
  r.add("relu6", {relu6});
  r.add("scaled_tanh", {scaled_tanh});
  r.add("sigmoid", {sigmoid});
  r.add("sigmoid_hard", {sigmoid_hard});
  r.add("silu", {silu});
  r.add("softmax", {softmax});
  r.add("softplus", {softplus_kernel});
  r.add("softplus_parametric", {softplus_parametric});
  r.add("softsign", {softsign});
  r.add("thresholded_relu", {thresholded_relu});
}

}  // namespace milkit
