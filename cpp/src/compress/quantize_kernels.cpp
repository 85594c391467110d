// The per-run loops of linear quantization (compress::quantize_run, compress::min_max_run): a
// portable scalar version and an AVX2 + F16C one (run when the CPU has them; the build targets
// plain x86-64) that gives the same bytes. Inputs are fp32 values or fp16 raw bits; fp16 values
// are widened exactly, so both sources share the fp32 arithmetic.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "milkit/compress/quantize.h"
#include "milkit/types/datatype.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define MILKIT_QUANT_AVX2 1
#endif

namespace milkit::compress {

namespace {

inline float widen(float v) { return v; }
inline float widen(uint16_t h) { return half_to_float(h); }

/// Rounds to the nearest integer, ties to even (np.round / rint in the default rounding mode).
inline float round_even(float v) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: adding it leaves no fraction bits
  return std::fabs(v) < 4194304.0f ? (v + kMagic) - kMagic : v;
}

/// One element of quantize_run.
inline uint8_t quantize_one(float w, const QuantStep& s) {
  float t = w / s.scale;
  if (s.half) t = half_to_float(float_to_half(t));
  float v = round_even(t);
  if (s.has_zero) v += s.zero;
  v = std::min(std::max(v, s.qmin), s.qmax);  // NaN stays NaN
  return static_cast<uint8_t>(v == v ? static_cast<int32_t>(v) : 0);
}

template <class T>
void quantize_scalar(const T* w, int64_t n, const QuantStep& s, uint8_t* out) {
  for (int64_t k = 0; k < n; ++k) out[k] = quantize_one(widen(w[k]), s);
}

template <class T>
bool min_max_scalar(const T* w, int64_t n, float& lo, float& hi) {
  float a = lo, b = hi;
  bool nan = false;
  for (int64_t k = 0; k < n; ++k) {
    const float v = widen(w[k]);
    a = v < a ? v : a;
    b = v > b ? v : b;
    nan = nan || v != v;
  }
  lo = a;
  hi = b;
  return nan;
}

#ifdef MILKIT_QUANT_AVX2

bool cpu_avx2_f16c() {
  static const bool yes = __builtin_cpu_supports("avx2") && cpu_has_f16c();
  return yes;
}

__attribute__((target("avx2,f16c"))) inline __m256 load8(const float* p) {
  return _mm256_loadu_ps(p);
}
__attribute__((target("avx2,f16c"))) inline __m256 load8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

/// A QuantStep's constants as vectors (made once per run: the output bytes may alias the step,
/// so the compiler would otherwise reload them after every store).
struct StepVec {
  __m256 scale, zero, qmin, qmax;
  bool half, has_zero;
};

__attribute__((target("avx2,f16c"))) inline StepVec step_vec(const QuantStep& s) {
  return {_mm256_set1_ps(s.scale),
          _mm256_set1_ps(s.zero),
          _mm256_set1_ps(s.qmin),
          _mm256_set1_ps(s.qmax),
          s.half,
          s.has_zero};
}

/// Eight elements of quantize_one, as int32 lanes holding the output bytes.
__attribute__((target("avx2,f16c"))) inline __m256i quantize8(__m256 w, const StepVec& s) {
  __m256 t = _mm256_div_ps(w, s.scale);
  if (s.half) t = _mm256_cvtph_ps(_mm256_cvtps_ph(t, _MM_FROUND_TO_NEAREST_INT));
  // rint: the same integers as round_even (which leaves |t| >= 2^22 alone; such values, and
  // their rounded ones, clip to the same end of the quantized range)
  __m256 v = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  if (s.has_zero) v = _mm256_add_ps(v, s.zero);
  const __m256 ordered = _mm256_cmp_ps(v, v, _CMP_ORD_Q);
  v = _mm256_min_ps(_mm256_max_ps(v, s.qmin), s.qmax);
  const __m256i q = _mm256_and_si256(_mm256_cvttps_epi32(v), _mm256_castps_si256(ordered));
  return _mm256_and_si256(q, _mm256_set1_epi32(0xFF));
}

/// The low bytes of eight int32 lanes (each 0..255) stored at `out`.
__attribute__((target("avx2,f16c"))) inline void store8(__m256i q, uint8_t* out) {
  const __m256i w16 = _mm256_permute4x64_epi64(_mm256_packus_epi32(q, q), 0x08);
  const __m128i lo = _mm256_castsi256_si128(w16);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packus_epi16(lo, lo));
}

/// The low bytes of four vectors of int32 lanes (each 0..255), in order, stored at `out`.
__attribute__((target("avx2,f16c"))) inline void store32(__m256i a, __m256i b, __m256i c, __m256i d,
                                                         uint8_t* out) {
  // per 128-bit lane: a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7, then the dwords in order
  const __m256i bytes = _mm256_packus_epi16(_mm256_packus_epi32(a, b), _mm256_packus_epi32(c, d));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permutevar8x32_epi32(bytes, order));
}

template <class T>
__attribute__((target("avx2,f16c"))) inline void quantize_avx2(const T* w, int64_t n,
                                                               const QuantStep& step,
                                                               uint8_t* out) {
  const StepVec s = step_vec(step);
  int64_t k = 0;
  for (; k + 32 <= n; k += 32)
    store32(quantize8(load8(w + k), s), quantize8(load8(w + k + 8), s),
            quantize8(load8(w + k + 16), s), quantize8(load8(w + k + 24), s), out + k);
  for (; k + 8 <= n; k += 8) store8(quantize8(load8(w + k), s), out + k);
  if (k == n) return;
  // the tail through one zero-padded vector, so it takes the same steps
  T pad[8] = {};
  uint8_t bytes[8];
  std::memcpy(pad, w + k, static_cast<size_t>(n - k) * sizeof(T));
  store8(quantize8(load8(pad), s), bytes);
  std::memcpy(out + k, bytes, static_cast<size_t>(n - k));
}

template <class T>
__attribute__((target("avx2,f16c"))) inline bool min_max_avx2(const T* w, int64_t n, float& lo,
                                                              float& hi) {
  // lanes start at lo / hi, and a NaN never replaces a lane (as in min_max_scalar)
  __m256 a = _mm256_set1_ps(lo), b = _mm256_set1_ps(hi), nan = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256 v = load8(w + k);
    a = _mm256_min_ps(v, a);  // v < a ? v : a
    b = _mm256_max_ps(v, b);  // v > b ? v : b
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  // the lanes hold no NaN, so their order of reduction does not matter (but for the sign of a
  // zero)
  a = _mm256_min_ps(a, _mm256_permute2f128_ps(a, a, 1));
  b = _mm256_max_ps(b, _mm256_permute2f128_ps(b, b, 1));
  a = _mm256_min_ps(a, _mm256_shuffle_ps(a, a, 0x4E));
  b = _mm256_max_ps(b, _mm256_shuffle_ps(b, b, 0x4E));
  a = _mm256_min_ps(a, _mm256_shuffle_ps(a, a, 0xB1));
  b = _mm256_max_ps(b, _mm256_shuffle_ps(b, b, 0xB1));
  lo = _mm256_cvtss_f32(a);
  hi = _mm256_cvtss_f32(b);
  const bool tail_nan = k < n && min_max_scalar(w + k, n - k, lo, hi);
  return tail_nan || _mm256_movemask_ps(nan) != 0;
}

#endif

template <class T>
void quantize_dispatch(const T* w, int64_t n, const QuantStep& s, uint8_t* out, bool vector) {
#ifdef MILKIT_QUANT_AVX2
  if (vector && cpu_avx2_f16c()) return quantize_avx2(w, n, s, out);
#endif
  (void)vector;
  quantize_scalar(w, n, s, out);
}

template <class T>
bool min_max_dispatch(const T* w, int64_t n, float& lo, float& hi, bool vector) {
#ifdef MILKIT_QUANT_AVX2
  if (vector && cpu_avx2_f16c()) return min_max_avx2(w, n, lo, hi);
#endif
  (void)vector;
  return min_max_scalar(w, n, lo, hi);
}

}  // namespace

void quantize_run(const float* w, int64_t n, const QuantStep& step, uint8_t* out, bool vector) {
  quantize_dispatch(w, n, step, out, vector);
}

void quantize_run(const uint16_t* w, int64_t n, const QuantStep& step, uint8_t* out, bool vector) {
  quantize_dispatch(w, n, step, out, vector);
}

bool min_max_run(const float* w, int64_t n, float& lo, float& hi, bool vector) {
  return min_max_dispatch(w, n, lo, hi, vector);
}

bool min_max_run(const uint16_t* w, int64_t n, float& lo, float& hi, bool vector) {
  return min_max_dispatch(w, n, lo, hi, vector);
}

namespace {

#ifdef MILKIT_QUANT_AVX2
// blocks loops with the CPU checked once for all blocks (blocks are often 32 values)
template <class T>
__attribute__((target("avx2,f16c"))) void min_max_blocks_avx2(const T* w, int64_t blocks,
                                                              int64_t lb, float* lo, float* hi,
                                                              uint8_t* nan) {
  for (int64_t b = 0; b < blocks; ++b) {
    lo[b] = std::numeric_limits<float>::infinity();
    hi[b] = -std::numeric_limits<float>::infinity();
    nan[b] = min_max_avx2(w + b * lb, lb, lo[b], hi[b]) ? 1 : 0;
  }
}

template <class T>
__attribute__((target("avx2,f16c"))) void quantize_blocks_avx2(const T* w, int64_t blocks,
                                                               int64_t lb, const QuantStep* steps,
                                                               uint8_t* out) {
  for (int64_t b = 0; b < blocks; ++b) quantize_avx2(w + b * lb, lb, steps[b], out + b * lb);
}
#endif

template <class T>
void min_max_blocks_any(const T* w, int64_t blocks, int64_t lb, float* lo, float* hi, uint8_t* nan,
                        bool vector) {
#ifdef MILKIT_QUANT_AVX2
  if (vector && cpu_avx2_f16c()) return min_max_blocks_avx2(w, blocks, lb, lo, hi, nan);
#endif
  for (int64_t b = 0; b < blocks; ++b) {
    lo[b] = std::numeric_limits<float>::infinity();
    hi[b] = -std::numeric_limits<float>::infinity();
    nan[b] = min_max_scalar(w + b * lb, lb, lo[b], hi[b]) ? 1 : 0;
  }
}

template <class T>
void quantize_blocks_any(const T* w, int64_t blocks, int64_t lb, const QuantStep* steps,
                         uint8_t* out, bool vector) {
#ifdef MILKIT_QUANT_AVX2
  if (vector && cpu_avx2_f16c()) return quantize_blocks_avx2(w, blocks, lb, steps, out);
#endif
  for (int64_t b = 0; b < blocks; ++b) quantize_scalar(w + b * lb, lb, steps[b], out + b * lb);
}

}  // namespace

void min_max_blocks(const float* w, int64_t blocks, int64_t lb, float* lo, float* hi, uint8_t* nan,
                    bool vector) {
  min_max_blocks_any(w, blocks, lb, lo, hi, nan, vector);
}

void min_max_blocks(const uint16_t* w, int64_t blocks, int64_t lb, float* lo, float* hi,
                    uint8_t* nan, bool vector) {
  min_max_blocks_any(w, blocks, lb, lo, hi, nan, vector);
}

void quantize_blocks(const float* w, int64_t blocks, int64_t lb, const QuantStep* steps,
                     uint8_t* out, bool vector) {
  quantize_blocks_any(w, blocks, lb, steps, out, vector);
}

void quantize_blocks(const uint16_t* w, int64_t blocks, int64_t lb, const QuantStep* steps,
                     uint8_t* out, bool vector) {
  quantize_blocks_any(w, blocks, lb, steps, out, vector);
}

}  // namespace milkit::compress
