// Matrix-vector products over fp32 or packed weights (see gemv.h). One dot and one axpy kernel
// per process (AVX2 + FMA when the CPU has them, else a portable loop), used for every weight
// storage, so the sums of a packed weight and of its fp32 copy are the same operations.
#include "gemv.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../packed_weight.h"
#include "milkit/exec/threads.h"
#include "milkit/types/datatype.h"
#include "vec_math.h"

namespace milkit::exec {

namespace {

/// How far ahead of the 4-bit rows being read their bytes are prefetched.
constexpr int64_t kPrefetchBytes = 8192;

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
/// Defines `NAME(a, w, K)` = sum_k a[k] * w(k) for the target `TARGET`: four 8-lane sums over
/// blocks of 32, then blocks of 8, a fixed reduction and a scalar tail. `w.load(k)` gives
/// w(k .. k + 7), `w.at(k)` w(k). Every weight storage runs this one body (instantiated for two
/// instruction sets: a row type's load may need AVX-512VL), so its sums are those of the
/// weight's fp32 copy, bit for bit.
#define MILKIT_DEFINE_DOT(NAME, TARGET)                                                          \
  template <class Row>                                                                           \
  __attribute__((target(TARGET), always_inline)) inline float NAME(const float* a, const Row& w, \
                                                                   int64_t K) {                  \
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;                                  \
    int64_t k = 0;                                                                               \
    for (; k + 32 <= K; k += 32) {                                                               \
      s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), w.load(k), s0);                               \
      s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), w.load(k + 8), s1);                       \
      s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 16), w.load(k + 16), s2);                     \
      s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 24), w.load(k + 24), s3);                     \
    }                                                                                            \
    for (; k + 8 <= K; k += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), w.load(k), s0);      \
    const __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));                \
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));               \
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));                                                      \
    h = _mm_add_ss(h, _mm_movehdup_ps(h));                                                       \
    float r = _mm_cvtss_f32(h);                                                                  \
    for (; k < K; ++k) r = std::fma(a[k], w.at(k), r);                                           \
    return r;                                                                                    \
  }

MILKIT_DEFINE_DOT(dot_avx2_t, "avx2,fma,f16c")
MILKIT_DEFINE_DOT(dot_avx512vl_t, "avx2,fma,f16c,avx512f,avx512vl")

#define MILKIT_GEMV_TARGET __attribute__((target("avx2,fma,f16c")))
#define MILKIT_GEMV_TARGET_VL __attribute__((target("avx2,fma,f16c,avx512f,avx512vl")))

/// Nibbles k .. k + 7 of `b` (two per byte, low nibble first) in the low 4 bits of 8 lanes; the
/// bits above them are the next nibbles' (mask them, or let a permute ignore them).
MILKIT_GEMV_TARGET inline __m256i nibbles8(const uint8_t* b, int64_t k) {
  uint32_t u;
  std::memcpy(&u, b + k / 2, 4);
  return _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(u)),
                           _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
}

/// Nibble k of `b`.
inline int nibble(const uint8_t* b, int64_t k) { return (b[k / 2] >> ((k & 1) * 4)) & 15; }

/// Weights of an fp32 row.
struct FloatRow {
  const float* b;
  MILKIT_GEMV_TARGET __m256 load(int64_t k) const { return _mm256_loadu_ps(b + k); }
  float at(int64_t k) const { return b[k]; }
};

/// Weights of an fp16 row, widened as they are read.
struct HalfRow {
  const uint16_t* h;
  MILKIT_GEMV_TARGET __m256 load(int64_t k) const {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + k)));
  }
  float at(int64_t k) const { return half_to_float(h[k]); }
};

/// Weights of a row of 4-bit indices (two per byte, low nibble first) into a table of 16
/// floats, looked up 8 at a time with two in-register permutes.
struct Lut4Row {
  const uint8_t* b;
  const float* table;
  __m256 lo, hi;
  MILKIT_GEMV_TARGET Lut4Row(const uint8_t* bytes, const float* t)
      : b(bytes), table(t), lo(_mm256_loadu_ps(t)), hi(_mm256_loadu_ps(t + 8)) {}
  MILKIT_GEMV_TARGET __m256 load(int64_t k) const {
    const __m256i idx = _mm256_and_si256(nibbles8(b, k), _mm256_set1_epi32(15));
    const __m256 sel = _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28));  // bit 3 to the sign
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, idx), _mm256_permutevar8x32_ps(hi, idx),
                            sel);
  }
  float at(int64_t k) const { return table[nibble(b, k)]; }
};

/// The same row with AVX-512VL: a two-table permute looks up 16 entries in one instruction.
struct Lut4RowVl {
  const uint8_t* b;
  const float* table;
  __m256 lo, hi;
  MILKIT_GEMV_TARGET_VL Lut4RowVl(const uint8_t* bytes, const float* t)
      : b(bytes), table(t), lo(_mm256_loadu_ps(t)), hi(_mm256_loadu_ps(t + 8)) {}
  MILKIT_GEMV_TARGET_VL __m256 load(int64_t k) const {
    // the permute reads bits 0-3 of each index (bit 3 picks the table half): no mask
    return _mm256_permutex2var_ps(lo, nibbles8(b, k), hi);
  }
  float at(int64_t k) const { return table[nibble(b, k)]; }
};

/// Weights of a row of quantized integers (Bits 8 or 4): ((q - offset) * scale), each step
/// rounded to fp16 as the form says (the constexpr op's arithmetic, lane by lane).
template <int Bits>
struct IntRow {
  const uint8_t* q;
  const float* s;    // the row's block of scales
  const float* off;  // the row's block of offsets, or null
  int shift;
  bool sgn, round_diff, round_out;
  MILKIT_GEMV_TARGET static __m256 round_half(__m256 v) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static float round_half(float v) { return half_to_float(float_to_half(v)); }
  MILKIT_GEMV_TARGET __m256 load(int64_t k) const {
    __m256i v;
    if constexpr (Bits == 8) {
      const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + k));
      v = sgn ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
    } else {
      v = _mm256_and_si256(nibbles8(q, k), _mm256_set1_epi32(15));
      if (sgn)
        v = _mm256_sub_epi32(_mm256_xor_si256(v, _mm256_set1_epi32(8)), _mm256_set1_epi32(8));
    }
    __m256 x = _mm256_cvtepi32_ps(v);
    const int64_t j = k >> shift;
    if (off) {
      x = _mm256_sub_ps(x, _mm256_set1_ps(off[j]));
      if (round_diff) x = round_half(x);
    }
    x = _mm256_mul_ps(x, _mm256_set1_ps(s[j]));
    return round_out ? round_half(x) : x;
  }
  float at(int64_t k) const {
    int32_t v;
    if constexpr (Bits == 8) {
      v = sgn ? static_cast<int8_t>(q[k]) : q[k];
    } else {
      v = nibble(q, k);
      if (sgn && v >= 8) v -= 16;
    }
    float x = static_cast<float>(v);
    const int64_t j = k >> shift;
    if (off) {
      x -= off[j];
      if (round_diff) x = round_half(x);
    }
    x *= s[j];
    return round_out ? round_half(x) : x;
  }
};

MILKIT_GEMV_TARGET float dot_avx2(const float* a, const float* b, int64_t K) {
  return dot_avx2_t(a, FloatRow{b}, K);
}

MILKIT_GEMV_TARGET float dot_half_avx2(const float* a, const uint16_t* h, int64_t K) {
  return dot_avx2_t(a, HalfRow{h}, K);
}

MILKIT_GEMV_TARGET float dot_lut4_avx2(const float* a, const uint8_t* b, const float* table,
                                       int64_t K) {
  return dot_avx2_t(a, Lut4Row(b, table), K);
}

MILKIT_GEMV_TARGET_VL float dot_lut4_avx512vl(const float* a, const uint8_t* b, const float* table,
                                              int64_t K) {
  return dot_avx512vl_t(a, Lut4RowVl(b, table), K);
}

/// The dot of `a` with row n of a quantized weight in row form f.
template <int Bits>
MILKIT_GEMV_TARGET float dot_int_avx2(const float* a, const RowForm& f, int64_t n, int64_t K) {
  const int64_t block = (n / f.rows_per_scale) * f.scale_stride;
  IntRow<Bits> r{f.ints + n * (Bits == 8 ? K : K / 2),
                 f.scales + block,
                 f.offsets ? f.offsets + block : nullptr,
                 f.cols_shift,
                 f.is_signed,
                 f.round_diff,
                 f.round_out};
  return dot_avx2_t(a, r, K);
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
  if (vmath::cpu_avx2_fma() && cpu_has_f16c()) return dot_avx2;
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

#ifdef MILKIT_VMATH_AVX2
/// out[i] = w(k0 + i) for i < kc: single elements until k0 + i is a multiple of 8 (a load's
/// lanes then share a scale block and start on a byte), then 8 at a time, then single again.
#define MILKIT_DEFINE_ROW_RUN(NAME, TARGET)                                                 \
  template <class Row>                                                                      \
  __attribute__((target(TARGET), always_inline)) inline void NAME(const Row& w, int64_t k0, \
                                                                  int64_t kc, float* out) { \
    int64_t i = 0;                                                                          \
    for (; i < kc && (k0 + i) % 8 != 0; ++i) out[i] = w.at(k0 + i);                         \
    for (; i + 8 <= kc; i += 8) _mm256_storeu_ps(out + i, w.load(k0 + i));                  \
    for (; i < kc; ++i) out[i] = w.at(k0 + i);                                              \
  }

MILKIT_DEFINE_ROW_RUN(row_run, "avx2,fma,f16c")
MILKIT_DEFINE_ROW_RUN(row_run_vl, "avx2,fma,f16c,avx512f,avx512vl")

MILKIT_GEMV_TARGET void row_run_avx2(const RowForm& f, int64_t n, int64_t K, int64_t k0, int64_t kc,
                                     float* out) {
  switch (f.kind) {
    case RowForm::Kind::Half:
      return row_run(HalfRow{f.half + n * K}, k0, kc, out);
    case RowForm::Kind::Lut4:
      return row_run(
          Lut4Row(f.nibbles + n * (K / 2), f.tables + (n / f.rows_per_table) * f.table_stride), k0,
          kc, out);
    default: {
      const int64_t block = (n / f.rows_per_scale) * f.scale_stride;
      const float* off = f.offsets ? f.offsets + block : nullptr;
      if (f.kind == RowForm::Kind::Int8)
        return row_run(IntRow<8>{f.ints + n * K, f.scales + block, off, f.cols_shift, f.is_signed,
                                 f.round_diff, f.round_out},
                       k0, kc, out);
      return row_run(IntRow<4>{f.ints + n * (K / 2), f.scales + block, off, f.cols_shift,
                               f.is_signed, f.round_diff, f.round_out},
                     k0, kc, out);
    }
  }
}

MILKIT_GEMV_TARGET_VL void row_run_lut4_avx512vl(const RowForm& f, int64_t n, int64_t K, int64_t k0,
                                                 int64_t kc, float* out) {
  row_run_vl(Lut4RowVl(f.nibbles + n * (K / 2), f.tables + (n / f.rows_per_table) * f.table_stride),
             k0, kc, out);
}
#endif

}  // namespace

PackedRows::PackedRows(const PackedWeight& w, int64_t K) : w_(&w), K_(K), form_(w.row_form()) {
#ifdef MILKIT_VMATH_AVX2
  const std::vector<int64_t>& sh = w.shape();
  const bool ints = form_.kind == RowForm::Kind::Int8 || form_.kind == RowForm::Kind::Int4;
  direct_ = vmath::cpu_avx2_fma() && cpu_has_f16c() && form_.kind != RowForm::Kind::None &&
            (!ints || form_.scales) && !sh.empty() && sh[0] > 0 && w.numel() / sh[0] == K;
#endif
}

void PackedRows::decode(int64_t r0, int64_t n, int64_t k0, int64_t kc, float* out) const {
#ifdef MILKIT_VMATH_AVX2
  if (direct_) {
    const bool vl = form_.kind == RowForm::Kind::Lut4 && vmath::cpu_avx512();
    for (int64_t i = 0; i < n; ++i) {
      if (vl)
        row_run_lut4_avx512vl(form_, r0 + i, K_, k0, kc, out + i * kc);
      else
        row_run_avx2(form_, r0 + i, K_, k0, kc, out + i * kc);
    }
    return;
  }
#endif
  if (k0 == 0 && kc == K_) {  // whole rows, together: one run
    w_->decode(r0 * K_, n * K_, out);
    return;
  }
  for (int64_t i = 0; i < n; ++i) w_->decode((r0 + i) * K_ + k0, kc, out + i * kc);
}

void PackedRows::prefetch(int64_t r0, int64_t n, int64_t k0, int64_t kc) const {
  if (!direct_ || kc <= 0) return;
  const uint8_t* base = nullptr;
  int64_t row_bytes = 0, first = 0, len = 0;  // bytes: a row, the run's first, the run's length
  switch (form_.kind) {
    case RowForm::Kind::Half:
      base = reinterpret_cast<const uint8_t*>(form_.half);
      row_bytes = 2 * K_, first = 2 * k0, len = 2 * kc;
      break;
    case RowForm::Kind::Int8:
      base = form_.ints;
      row_bytes = K_, first = k0, len = kc;
      break;
    case RowForm::Kind::Int4:
    case RowForm::Kind::Lut4:
      base = form_.kind == RowForm::Kind::Lut4 ? form_.nibbles : form_.ints;
      row_bytes = K_ / 2, first = k0 / 2, len = (k0 + kc + 1) / 2 - k0 / 2;
      break;
    default:
      return;
  }
  if (n > 0) prefetch_runs(base + r0 * row_bytes + first, row_bytes, n, len);
}

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
#ifdef MILKIT_VMATH_AVX2
  // rows the fused kernels read where they lie (the same sums as the panel path)
  if (dot == dot_avx2) {
    const RowForm f = w.packed->row_form();
    const bool ints = f.kind == RowForm::Kind::Int8 || f.kind == RowForm::Kind::Int4;
    if (f.kind != RowForm::Kind::None && (!ints || f.scales)) {
      const auto lut4 = vmath::cpu_avx512() ? dot_lut4_avx512vl : dot_lut4_avx2;
      // packed rows are read slower than the hardware prefetcher expects a stream to be: their
      // bytes are asked for about kPrefetchBytes before they are read (fp16 rows need no help)
      const int64_t row_bytes = f.kind == RowForm::Kind::Int8 ? K : K / 2;
      const char* base =
          reinterpret_cast<const char*>(f.kind == RowForm::Kind::Lut4 ? f.nibbles : f.ints);
      const int64_t ahead =
          f.kind != RowForm::Kind::Half
              ? std::max<int64_t>(1, kPrefetchBytes / std::max<int64_t>(row_bytes, 1))
              : 0;
      parallel_for(N, std::max<int64_t>(16, 65536 / kk), [&](int64_t s, int64_t e) {
        for (int64_t n = s; n < e; ++n) {
          if (ahead && n + ahead < e) {
            const char* p = base + (n + ahead) * row_bytes;
            for (int64_t o = 0; o < row_bytes; o += 64) __builtin_prefetch(p + o);
          }
          for (int64_t m = 0; m < M; ++m) {
            const float* a = A + m * lda;
            float r;
            switch (f.kind) {
              case RowForm::Kind::Half:
                r = dot_half_avx2(a, f.half + n * K, K);
                break;
              case RowForm::Kind::Lut4:
                r = lut4(a, f.nibbles + n * (K / 2),
                         f.tables + (n / f.rows_per_table) * f.table_stride, K);
                break;
              case RowForm::Kind::Int8:
                r = dot_int_avx2<8>(a, f, n, K);
                break;
              default:
                r = dot_int_avx2<4>(a, f, n, K);
                break;
            }
            float& c = C[m * ldc + n];
            c = accumulate ? c + r : r;
          }
        }
      });
      return;
    }
  }
#endif
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
