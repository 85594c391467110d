// sgemm_panels: C = A * B (+ bias) with B packed per call into 48-column panels (k-major, fp32),
// one panel per thread at a time, and register-blocked kernels that broadcast A's elements from
// its rows where they lie: AVX-512 8 rows x 48 columns (24 accumulators), AVX2 4 rows x 24
// columns (12), each output summed over k in order. See sgemm.h.
#include "sgemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../packed_weight.h"
#include "milkit/exec/plan.h"
#include "milkit/exec/threads.h"
#include "milkit/types/datatype.h"
#include "vec_math.h"

// GCC 12's AVX-512 intrinsics (unpacks, fp16 conversions) start from an undefined vector, which
// it reports as maybe uninitialized where they inline
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace milkit::exec {

namespace {

/// Columns of a panel.
constexpr int kNR = 48;
/// Elements of k packed at a time: a panel block of 512 x 48 fp32 (96 KB) stays in L2 while the
/// rows of A pass over it; longer products accumulate into C block by block.
constexpr int64_t kKC = 512;

/// How the accumulators start: zero, the bias row, or C (accumulating).
enum class Init { Zero, Bias, Load };

// ---- packing ----------------------------------------------------------------------------------

/// Element (n, k) of B as fp32.
inline float rhs_at(const GemmRhs& b, int64_t n, int64_t k) {
  const int64_t i = b.nk ? n * b.ld + k : k * b.ld + n;
  return b.f32 ? b.f32[i] : half_to_float(b.f16[i]);
}

/// p[k][j] = B(n0 + j, k0 + k) for j < nb, k < kc (columns nb..47 are zero): any layout, one
/// element at a time (the edges of the vector transposes).
void pack_scalar(const GemmRhs& b, int64_t n0, int64_t j0, int64_t j1, int64_t k0, int64_t kb,
                 int64_t ke, float* p) {
  for (int64_t k = kb; k < ke; ++k)
    for (int64_t j = j0; j < j1; ++j) p[k * kNR + j] = rhs_at(b, n0 + j, k0 + k);
}

/// A packed weight stored [N, K]: each row's run of k decoded, then spread over the panel.
void pack_nk_packed(const GemmRhs& b, int64_t n0, int64_t nb, int64_t k0, int64_t kc, float* p) {
  thread_local std::vector<float> row;
  if (static_cast<int64_t>(row.size()) < kc) row.resize(static_cast<size_t>(kc));
  for (int64_t j = 0; j < nb; ++j) {
    b.packed->decode((n0 + j) * b.ld + k0, kc, row.data());
    for (int64_t k = 0; k < kc; ++k) p[k * kNR + j] = row[k];
  }
}

/// Rows of B stored [K, N]: each k's nb elements copied (widened, decoded) in one run.
void pack_kn(const GemmRhs& b, int64_t n0, int64_t nb, int64_t k0, int64_t kc, float* p) {
  for (int64_t k = 0; k < kc; ++k) {
    const int64_t i = (k0 + k) * b.ld + n0;
    if (b.packed)
      b.packed->decode(i, nb, p + k * kNR);
    else if (b.f32)
      std::memcpy(p + k * kNR, b.f32 + i, static_cast<size_t>(nb) * sizeof(float));
    else
      halves_to_floats(b.f16 + i, p + k * kNR, static_cast<size_t>(nb));
  }
}

#ifdef MILKIT_VMATH_AVX2
/// 16 x 16 transpose of r in place (rows become columns).
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl"), always_inline)) inline void transpose16(
    __m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  // u[4 g + j], 128-bit lane l: column 4 l + j of rows 4 g .. 4 g + 3
  for (int j = 0; j < 4; ++j) {
    const __m512 a = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88);
    const __m512 b = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);
    const __m512 c = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
    const __m512 d = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);
    r[j] = _mm512_shuffle_f32x4(a, c, 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(a, c, 0xDD);
    r[4 + j] = _mm512_shuffle_f32x4(b, d, 0x88);
    r[12 + j] = _mm512_shuffle_f32x4(b, d, 0xDD);
  }
}

/// Rows of B stored [N, K], AVX-512: 16 x 16 blocks loaded by rows (fp16 widened) and
/// transposed; the edges one element at a time.
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl"))) void pack_nk_avx512(
    const GemmRhs& b, int64_t n0, int64_t nb, int64_t k0, int64_t kc, float* p) {
  const int64_t jf = nb / 16 * 16, kf = kc / 16 * 16;
  for (int64_t j = 0; j < jf; j += 16)
    for (int64_t k = 0; k < kf; k += 16) {
      __m512 r[16];
      for (int i = 0; i < 16; ++i) {
        const int64_t at = (n0 + j + i) * b.ld + k0 + k;
        r[i] =
            b.f32
                ? _mm512_loadu_ps(b.f32 + at)
                : _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.f16 + at)));
      }
      transpose16(r);
      for (int i = 0; i < 16; ++i) _mm512_storeu_ps(p + (k + i) * kNR + j, r[i]);
    }
  pack_scalar(b, n0, 0, jf, k0, kf, kc, p);
  pack_scalar(b, n0, jf, nb, k0, 0, kc, p);
}

/// 8 x 8 transpose of r in place.
__attribute__((target("avx2,fma,f16c"), always_inline)) inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i + 0] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
    r[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
  }
}

/// Rows of B stored [N, K], AVX2: 8 x 8 blocks.
__attribute__((target("avx2,fma,f16c"))) void pack_nk_avx2(const GemmRhs& b, int64_t n0, int64_t nb,
                                                           int64_t k0, int64_t kc, float* p) {
  const int64_t jf = nb / 8 * 8, kf = kc / 8 * 8;
  for (int64_t j = 0; j < jf; j += 8)
    for (int64_t k = 0; k < kf; k += 8) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i) {
        const int64_t at = (n0 + j + i) * b.ld + k0 + k;
        r[i] = b.f32
                   ? _mm256_loadu_ps(b.f32 + at)
                   : _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.f16 + at)));
      }
      transpose8(r);
      for (int i = 0; i < 8; ++i) _mm256_storeu_ps(p + (k + i) * kNR + j, r[i]);
    }
  pack_scalar(b, n0, 0, jf, k0, kf, kc, p);
  pack_scalar(b, n0, jf, nb, k0, 0, kc, p);
}
#endif

/// Packs columns [n0, n0 + nb) and k in [k0, k0 + kc) of B into p (kc x 48 fp32, columns past
/// nb zero).
void pack_panel(const GemmRhs& b, int64_t n0, int64_t nb, int64_t k0, int64_t kc, float* p) {
  if (nb < kNR)
    for (int64_t k = 0; k < kc; ++k) std::fill(p + k * kNR + nb, p + (k + 1) * kNR, 0.0f);
  if (!b.nk) return pack_kn(b, n0, nb, k0, kc, p);
  if (b.packed) return pack_nk_packed(b, n0, nb, k0, kc, p);
#ifdef MILKIT_VMATH_AVX2
  if (vmath::cpu_avx512()) return pack_nk_avx512(b, n0, nb, k0, kc, p);
  if (vmath::cpu_avx2_fma()) return pack_nk_avx2(b, n0, nb, k0, kc, p);
#endif
  pack_scalar(b, n0, 0, nb, k0, 0, kc, p);
}

// ---- kernels ----------------------------------------------------------------------------------

/// Where a kernel's tile goes: `rows` rows of C at ldc, `cols` (<= 48) columns, starting from
/// `init` (bias: 48 values, zero padded).
struct Tile {
  float* c;
  int64_t ldc;
  int cols;
  Init init;
  const float* bias;
  bool round = false;  ///< store fp16's values (the last block of k of an fp16 output)
};

#ifdef MILKIT_VMATH_AVX2
/// MR rows x NV vectors of 16 columns (48 for a whole panel, fewer for a narrow last one) over kc
/// of the packed panel p: AVX-512.
template <int MR, int NV>
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl"), always_inline)) inline void kernel_avx512(
    int64_t kc, const float* a, int64_t lda, const float* p, const Tile& t) {
  __m512 acc[MR][NV];
  __mmask16 mask[NV];
  for (int v = 0; v < NV; ++v) {
    const int left = std::clamp(t.cols - 16 * v, 0, 16);
    mask[v] = static_cast<__mmask16>(left == 16 ? 0xFFFFu : (1u << left) - 1);
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v)
      acc[i][v] = t.init == Init::Load   ? _mm512_maskz_loadu_ps(mask[v], t.c + i * t.ldc + 16 * v)
                  : t.init == Init::Bias ? _mm512_loadu_ps(t.bias + 16 * v)
                                         : _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    __m512 b[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) b[v] = _mm512_loadu_ps(p + k * kNR + 16 * v);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 x = _mm512_set1_ps(a[i * lda + k]);
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(x, b[v], acc[i][v]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) {
      const __m512 r = t.round
                           ? _mm512_cvtph_ps(_mm512_cvtps_ph(acc[i][v], _MM_FROUND_TO_NEAREST_INT))
                           : acc[i][v];
      _mm512_mask_storeu_ps(t.c + i * t.ldc + 16 * v, mask[v], r);
    }
}

template <int NV>
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl"), always_inline)) inline void rows_avx512_nv(
    int rows, int64_t kc, const float* a, int64_t lda, const float* p, const Tile& t) {
  switch (rows) {
    case 8:
      return kernel_avx512<8, NV>(kc, a, lda, p, t);
    case 7:
      return kernel_avx512<7, NV>(kc, a, lda, p, t);
    case 6:
      return kernel_avx512<6, NV>(kc, a, lda, p, t);
    case 5:
      return kernel_avx512<5, NV>(kc, a, lda, p, t);
    case 4:
      return kernel_avx512<4, NV>(kc, a, lda, p, t);
    case 3:
      return kernel_avx512<3, NV>(kc, a, lda, p, t);
    case 2:
      return kernel_avx512<2, NV>(kc, a, lda, p, t);
    default:
      return kernel_avx512<1, NV>(kc, a, lda, p, t);
  }
}

/// `rows` (<= 8) rows of one panel, AVX-512: as many vectors as its columns need.
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl"))) void rows_avx512(
    int rows, int64_t kc, const float* a, int64_t lda, const float* p, const Tile& t) {
  if (t.cols > 32) return rows_avx512_nv<3>(rows, kc, a, lda, p, t);
  if (t.cols > 16) return rows_avx512_nv<2>(rows, kc, a, lda, p, t);
  rows_avx512_nv<1>(rows, kc, a, lda, p, t);
}

/// MR rows x NV vectors of 8 columns of half a panel (`cols` <= 8 NV of them written): AVX2.
template <int MR, int NV>
__attribute__((target("avx2,fma,f16c"), always_inline)) inline void kernel_avx2(
    int64_t kc, const float* a, int64_t lda, const float* p, const Tile& t) {
  __m256 acc[MR][NV];
  float buf[MR][8 * NV];
  const bool part = t.cols < 8 * NV;
  if (t.init == Init::Load && part)
    for (int i = 0; i < MR; ++i) {
      std::fill(buf[i], buf[i] + 8 * NV, 0.0f);
      std::copy(t.c + i * t.ldc, t.c + i * t.ldc + t.cols, buf[i]);
    }
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v)
      acc[i][v] = t.init == Init::Load
                      ? _mm256_loadu_ps(part ? buf[i] + 8 * v : t.c + i * t.ldc + 8 * v)
                  : t.init == Init::Bias ? _mm256_loadu_ps(t.bias + 8 * v)
                                         : _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    __m256 b[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) b[v] = _mm256_loadu_ps(p + k * kNR + 8 * v);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const __m256 x = _mm256_broadcast_ss(a + i * lda + k);
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_fmadd_ps(x, b[v], acc[i][v]);
    }
  }
  if (t.round)
    for (int i = 0; i < MR; ++i)
      for (int v = 0; v < NV; ++v)
        acc[i][v] = _mm256_cvtph_ps(_mm256_cvtps_ph(acc[i][v], _MM_FROUND_TO_NEAREST_INT));
  for (int i = 0; i < MR; ++i) {
    if (!part) {
      for (int v = 0; v < NV; ++v) _mm256_storeu_ps(t.c + i * t.ldc + 8 * v, acc[i][v]);
      continue;
    }
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(buf[i] + 8 * v, acc[i][v]);
    std::copy(buf[i], buf[i] + t.cols, t.c + i * t.ldc);
  }
}

template <int NV>
__attribute__((target("avx2,fma,f16c"), always_inline)) inline void rows_avx2_nv(
    int rows, int64_t kc, const float* a, int64_t lda, const float* p, const Tile& t) {
  switch (rows) {
    case 4:
      return kernel_avx2<4, NV>(kc, a, lda, p, t);
    case 3:
      return kernel_avx2<3, NV>(kc, a, lda, p, t);
    case 2:
      return kernel_avx2<2, NV>(kc, a, lda, p, t);
    default:
      return kernel_avx2<1, NV>(kc, a, lda, p, t);
  }
}

/// `rows` (<= 4) rows of one panel, AVX2: its two halves of 24 columns, each with as many
/// vectors as its columns need.
__attribute__((target("avx2,fma,f16c"))) void rows_avx2(int rows, int64_t kc, const float* a,
                                                        int64_t lda, const float* p,
                                                        const Tile& t) {
  for (int h = 0; h < 2; ++h) {
    Tile th = t;
    th.cols = std::clamp(t.cols - 24 * h, 0, 24);
    if (th.cols == 0) return;
    th.c = t.c + 24 * h;
    th.bias = t.bias + 24 * h;
    const float* ph = p + 24 * h;
    if (th.cols > 16)
      rows_avx2_nv<3>(rows, kc, a, lda, ph, th);
    else if (th.cols > 8)
      rows_avx2_nv<2>(rows, kc, a, lda, ph, th);
    else
      rows_avx2_nv<1>(rows, kc, a, lda, ph, th);
  }
}
#endif

}  // namespace

bool sgemm_panels_enabled() {
#ifdef MILKIT_VMATH_AVX2
  static const bool on = [] {
    const char* e = std::getenv("MILKIT_GEMM");
    return vmath::cpu_avx2_fma() && cpu_has_f16c() && !(e && std::strcmp(e, "blas") == 0);
  }();
  return on;
#else
  return false;
#endif
}

void sgemm_panels(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const GemmRhs& b,
                  const float* bias, bool accumulate, float* C, int64_t ldc, bool round_half) {
#ifdef MILKIT_VMATH_AVX2
  if (M <= 0 || N <= 0) return;
  const bool wide = vmath::cpu_avx512();
  const int mr = wide ? 8 : 4;
  const int64_t panels = (N + kNR - 1) / kNR;
  // fewer panels than two per thread: rows of A split too (each part packs its panel)
  const int t = num_threads();
  int64_t parts = 1;
  if (panels < 2 * t)
    parts = std::max<int64_t>(1, std::min<int64_t>((2 * t + panels - 1) / panels, M / 32));
  parallel_for(panels * parts, 1, [&](int64_t s, int64_t e) {
    thread_local std::vector<float> buf;
    const size_t need = static_cast<size_t>(std::min(K, kKC) * kNR + kNR);
    if (buf.size() < need) buf.resize(need);
    float* p = buf.data();
    float* bias_row = p + std::min(K, kKC) * kNR;  // 48 bias values, zero padded
    for (int64_t u = s; u < e; ++u) {
      const int64_t panel = u / parts, part = u % parts;
      const int64_t m0 = M * part / parts, m1 = M * (part + 1) / parts;
      const int64_t n0 = panel * kNR;
      const int cols = static_cast<int>(std::min<int64_t>(kNR, N - n0));
      std::fill(bias_row, bias_row + kNR, 0.0f);
      if (bias) std::copy(bias + n0, bias + n0 + cols, bias_row);
      if (accumulate && bias)  // C + bias first: the kernels then accumulate into C
        for (int64_t m = m0; m < m1; ++m)
          for (int j = 0; j < cols; ++j) C[m * ldc + n0 + j] += bias_row[j];
      if (K == 0)  // C = bias or 0, or C as it is (+ bias)
        for (int64_t m = m0; m < m1; ++m)
          for (int j = 0; j < cols; ++j) {
            float& c = C[m * ldc + n0 + j];
            c = accumulate ? c : bias_row[j];
            if (round_half) c = half_to_float(float_to_half(c));
          }
      for (int64_t k0 = 0; k0 < K; k0 += kKC) {
        const int64_t kc = std::min(kKC, K - k0);
        pack_panel(b, n0, cols, k0, kc, p);
        Tile tile{nullptr,  ldc,
                  cols,     k0 > 0 || accumulate ? Init::Load : bias ? Init::Bias : Init::Zero,
                  bias_row, round_half && k0 + kc == K};
        // blocks of up to mr rows, as even as they go (49 rows: 7 of 7, not 6 of 8 and 1 of 1)
        const int64_t blocks = (m1 - m0 + mr - 1) / mr;
        for (int64_t q = 0; q < blocks; ++q) {
          const int64_t m = m0 + (m1 - m0) * q / blocks;
          const int rows = static_cast<int>(m0 + (m1 - m0) * (q + 1) / blocks - m);
          tile.c = C + m * ldc + n0;
          if (wide)
            rows_avx512(rows, kc, A + m * lda + k0, lda, p, tile);
          else
            rows_avx2(rows, kc, A + m * lda + k0, lda, p, tile);
        }
      }
    }
  });
#else
  (void)M, (void)N, (void)K, (void)A, (void)lda, (void)b, (void)bias, (void)accumulate, (void)C,
      (void)ldc, (void)round_half;
#endif
}

}  // namespace milkit::exec

namespace milkit {

std::string gemm_kernel() { return exec::sgemm_panels_enabled() ? "panels" : "blas"; }

}  // namespace milkit
