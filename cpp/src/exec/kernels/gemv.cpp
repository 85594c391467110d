// Matrix-vector products over fp32 or packed weights (see gemv.h). One dot and one axpy kernel
// per process (AVX2 + FMA when the CPU has them, else a portable loop), used for every weight
// storage, so the sums of a packed weight and of its fp32 copy are the same operations.
#include "gemv.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../packed_weight.h"
#include "milkit/exec/threads.h"
#include "vec_math.h"

namespace milkit::exec {

namespace {

/// Elements a thread decodes at once (a panel of rows in L2).
constexpr int64_t kPanelElems = 16384;

/// sum_k a[k] * b[k]: eight lanes of partial sums (4 x 8 in flight), then a fixed reduction.
float dot_base(const float* a, const float* b, int64_t K) {
  float p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 8 <= K; k += 8)
    for (int j = 0; j < 8; ++j) p[j] += a[k + j] * b[k + j];
  float r = ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7]));
  for (; k < K; ++k) r += a[k] * b[k];
  return r;
}

/// y[j] += a * x[j].
void axpy_base(float a, const float* x, float* y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] += a * x[j];
}

#ifdef MILKIT_VMATH_AVX2
__attribute__((target("avx2,fma"))) float dot_avx2(const float* a, const float* b, int64_t K) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), _mm256_loadu_ps(b + k + 8), s1);
    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 16), _mm256_loadu_ps(b + k + 16), s2);
    s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 24), _mm256_loadu_ps(b + k + 24), s3);
  }
  for (; k + 8 <= K; k += 8)
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), s0);
  const __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  float r = _mm_cvtss_f32(h);
  for (; k < K; ++k) r = std::fma(a[k], b[k], r);
  return r;
}

__attribute__((target("avx2,fma"))) void axpy_avx2(float a, const float* x, float* y, int64_t n) {
  const __m256 av = _mm256_set1_ps(a);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(y + j, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + j), _mm256_loadu_ps(y + j)));
  for (; j < n; ++j) y[j] = std::fma(a, x[j], y[j]);
}
#endif

using DotFn = float (*)(const float*, const float*, int64_t);
using AxpyFn = void (*)(float, const float*, float*, int64_t);

DotFn dot_fn() {
#ifdef MILKIT_VMATH_AVX2
  if (vmath::cpu_avx2_fma()) return dot_avx2;
#endif
  return dot_base;
}

AxpyFn axpy_fn() {
#ifdef MILKIT_VMATH_AVX2
  if (vmath::cpu_avx2_fma()) return axpy_avx2;
#endif
  return axpy_base;
}

/// A per-thread scratch of at least n floats.
float* scratch(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

/// Rows [n0, n0 + nb) of W (given as fp32 rows of stride ld) times the rows of A.
void rows_times(int64_t M, int64_t n0, int64_t nb, int64_t K, const float* A, int64_t lda,
                const float* W, int64_t ld, bool accumulate, float* C, int64_t ldc, DotFn dot) {
  for (int64_t i = 0; i < nb; ++i)
    for (int64_t m = 0; m < M; ++m) {
      const float r = dot(A + m * lda, W + i * ld, K);
      float& c = C[m * ldc + n0 + i];
      c = accumulate ? c + r : r;
    }
}

}  // namespace

void gemv_nk(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const GemvWeight& w,
             bool accumulate, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  const DotFn dot = dot_fn();
  const int64_t kk = std::max<int64_t>(K, 1);
  if (w.dense) {
    parallel_for(N, std::max<int64_t>(16, 65536 / kk), [&](int64_t s, int64_t e) {
      rows_times(M, s, e - s, K, A, lda, w.dense + s * w.ld, w.ld, accumulate, C, ldc, dot);
    });
    return;
  }
  const int64_t R = std::clamp<int64_t>(kPanelElems / kk, 1, 64);
  const int64_t panels = (N + R - 1) / R;
  parallel_for(panels, std::max<int64_t>(1, 65536 / (R * kk)), [&](int64_t s, int64_t e) {
    thread_local std::vector<float> buf;
    float* p = scratch(buf, R * K);
    for (int64_t q = s; q < e; ++q) {
      const int64_t n0 = q * R, nb = std::min(R, N - n0);
      w.packed->decode(n0 * K, nb * K, p);
      rows_times(M, n0, nb, K, A, lda, p, K, accumulate, C, ldc, dot);
    }
  });
}

void gemv_kn(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const GemvWeight& w,
             bool accumulate, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  const AxpyFn axpy = axpy_fn();
  // column blocks: a few per thread, at least 256 columns (all of them for small products)
  const int64_t t = num_threads();
  int64_t bc = N * K < 65536 ? N : std::max<int64_t>(256, (N + 4 * t - 1) / (4 * t));
  bc = std::min(N, (bc + 15) / 16 * 16);
  const int64_t blocks = (N + bc - 1) / bc;
  parallel_for(blocks, 1, [&](int64_t s, int64_t e) {
    thread_local std::vector<float> acc_buf, dec_buf;
    float* acc = scratch(acc_buf, M * bc);
    float* dec = w.packed ? scratch(dec_buf, bc) : nullptr;
    for (int64_t b = s; b < e; ++b) {
      const int64_t n0 = b * bc, nb = std::min(bc, N - n0);
      std::fill(acc, acc + M * nb, 0.0f);
      for (int64_t k = 0; k < K; ++k) {
        const float* row = dec;
        if (w.dense)
          row = w.dense + k * w.ld + n0;
        else
          w.packed->decode(k * N + n0, nb, dec);
        for (int64_t m = 0; m < M; ++m) axpy(A[m * lda + k], row, acc + m * nb, nb);
      }
      for (int64_t m = 0; m < M; ++m) {
        float* c = C + m * ldc + n0;
        const float* a = acc + m * nb;
        for (int64_t j = 0; j < nb; ++j) c[j] = accumulate ? c[j] + a[j] : a[j];
      }
    }
  });
}

}  // namespace milkit::exec
