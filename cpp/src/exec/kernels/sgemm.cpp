// sgemm_panels: C = A * B (+ bias) with B packed per call into 48-column panels (k-major, fp32),
// one panel per thread at a time, and one register-blocked kernel, for AVX-512 and AVX2 alike,
// that broadcasts A's elements from its rows where they lie: 8 rows x 48 columns (24
// accumulators) or 4 rows x 24 columns (12), each output summed over k in order; with AVX-512 a
// last panel of 1-8 columns as dot products along k (GemmRhs::narrow_dots). See sgemm.h.
#include "sgemm.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "../packed_weight.h"
#include "gemv.h"
#include "milkit/exec/plan.h"
#include "milkit/exec/threads.h"
#include "milkit/types/datatype.h"
#include "transpose.h"
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

/// How the accumulators start: zero, the bias row, each row's own bias value, or C
/// (accumulating).
enum class Init { Zero, Bias, RowBias, Load };

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

void pack_nk_dense(const GemmRhs& b, int64_t n0, int64_t nb, int64_t k0, int64_t kc, float* p);

/// A packed weight stored [N, K]: the panel's rows decoded, then packed as an fp32 weight is (by
/// register transposes).
void pack_nk_packed(const PackedRows& rows, int64_t n0, int64_t nb, int64_t k0, int64_t kc,
                    float* p) {
  thread_local std::vector<float> buf;
  if (static_cast<int64_t>(buf.size()) < nb * kc) buf.resize(static_cast<size_t>(nb * kc));
  rows.decode(n0, nb, k0, kc, buf.data());
  GemmRhs d;
  d.f32 = buf.data();
  d.nk = true;
  d.ld = kc;
  pack_nk_dense(d, 0, nb, 0, kc, p);
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
/// nb zero); `rows` decodes a packed B stored [N, K].
void pack_panel(const GemmRhs& b, const PackedRows* rows, int64_t n0, int64_t nb, int64_t k0,
                int64_t kc, float* p) {
  if (nb < kNR)
    for (int64_t k = 0; k < kc; ++k) std::fill(p + k * kNR + nb, p + (k + 1) * kNR, 0.0f);
  if (!b.nk) return pack_kn(b, n0, nb, k0, kc, p);
  if (b.packed) return pack_nk_packed(*rows, n0, nb, k0, kc, p);
  pack_nk_dense(b, n0, nb, k0, kc, p);
}

/// The row decoder of a packed B stored [N, K], made once per product (empty for other B).
std::optional<PackedRows> packed_rows(const GemmRhs& b) {
  if (!b.packed || !b.nk) return std::nullopt;
  return PackedRows(*b.packed, b.ld);
}

/// Rows of an fp32 or fp16 B stored [N, K] into the panel p.
void pack_nk_dense(const GemmRhs& b, int64_t n0, int64_t nb, int64_t k0, int64_t kc, float* p) {
#ifdef MILKIT_VMATH_AVX2
  if (vmath::cpu_avx512()) return pack_nk_avx512(b, n0, nb, k0, kc, p);
  if (vmath::cpu_avx2_fma()) return pack_nk_avx2(b, n0, nb, k0, kc, p);
#endif
  pack_scalar(b, n0, 0, nb, k0, 0, kc, p);
}

/// Asks for `rows` rows of `cols` floats at `a` (row stride `ld`) to be brought into the cache:
/// the next block of a weight read where it lies. Its rows are short runs (a 1x1 conv's: 112-960
/// floats), too short for the hardware's stream prefetchers to learn before each ends; fetched
/// while the current block is computed, a 960x160 weight over a 7x7 image took 0.19 ms instead
/// of 0.23 with cold caches (single-threaded; 0.17 with the weight in cache).
inline void prefetch_rows(const float* a, int64_t ld, int64_t rows, int64_t cols) {
  prefetch_runs(a, ld * static_cast<int64_t>(sizeof(float)), rows,
                cols * static_cast<int64_t>(sizeof(float)));
}

// ---- kernels ----------------------------------------------------------------------------------

/// Where a kernel's tile goes: rows of C at ldc, `cols` (<= 48) columns, starting from `init`
/// (bias: 48 values, zero padded).
struct Tile {
  float* c;
  int64_t ldc;
  int cols;
  Init init;
  const float* bias;
  const float* row_bias = nullptr;  // Init::RowBias: the tile's first row's value
  /// A panel of up to kTailCols columns also stored column by column (column j at tcols + j *
  /// ldt, its kc elements contiguous), for the dot-product kernel (AVX-512); null otherwise
  const float* tcols = nullptr;
  int64_t ldt = 0;
};

/// Most columns of a last panel that the dot-product kernel takes (N = 49, 196, 197: 7x7 and
/// 14x14 images, ViT's 197 tokens).
constexpr int kTailCols = 8;

/// Elements of k per block when a product of N columns goes by blocks of k whose panels together
/// stay in L2 (sgemm_rows_outer), a multiple of 16; also the blocks of k over which every path
/// sums a narrow last panel's dot products, so that their sums (each block's added to C in turn)
/// are the same whichever path computes them.
inline int64_t outer_block_k(int64_t N) {
  const int64_t panels = (N + kNR - 1) / kNR;
  return std::clamp<int64_t>((int64_t{1} << 16) / (panels * kNR) / 16 * 16, 16, kKC);
}

/// Columns of a product's last panel that go as dot products (tail_rows): N % 48 when that is
/// 1-8, B allows it and the CPU has AVX-512 (`wide`); else 0.
inline int narrow_cols(const GemmRhs& b, int64_t N, bool wide) {
  const int64_t r = N % kNR;
  return wide && b.narrow_dots && r <= kTailCols ? static_cast<int>(r) : 0;
}

/// The first `cols` columns of the panel p (kc x 48) column by column into t (column j at
/// t + j * kc): the form tail_rows reads.
inline void transpose_tail(const float* p, int64_t kc, int cols, float* t) {
  for (int j = 0; j < cols; ++j)
    for (int64_t k = 0; k < kc; ++k) t[j * kc + k] = p[k * kNR + j];
}

/// MR rows x NV vectors of L columns over kc of the packed panel p (its first NV L columns; C's
/// first t.cols of them written): each element of A broadcast against the panel's vectors. One
/// body for every vector width, instantiated in the target functions below.
template <int L, int MR, int NV>
inline __attribute__((always_inline)) void kernel(int64_t kc, const float* a, int64_t lda,
                                                  const float* p, const Tile& t) {
  typedef typename vmath::Lanes<L>::f V;
  constexpr int W = L * NV;
  const bool part = t.cols < W;  // a narrow last panel: C's rows through a zero-padded row
  float row[W];
  V acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    const float* src = t.init == Init::Bias ? t.bias : t.c + i * t.ldc;
    if (t.init == Init::Load && part) {
      std::fill(row, row + W, 0.0f);
      std::copy(src, src + t.cols, row);
      src = row;
    }
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) {
      acc[i][v] = V{};
      if (t.init == Init::RowBias)
        acc[i][v] += t.row_bias[i];
      else if (t.init != Init::Zero)
        std::memcpy(&acc[i][v], src + L * v, sizeof(V));
    }
  }
  // two k per iteration: the loop's own instructions halved (8 x 48: 7-15% faster in a
  // microbenchmark of this loop on a Xeon with AVX512-FP16, 145-155 -> 158-168 GFLOP/s)
#pragma GCC unroll 2
  for (int64_t k = 0; k < kc; ++k) {
    V b[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) std::memcpy(&b[v], p + k * kNR + L * v, sizeof(V));
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      V x;
      vmath::splat(x, a + i * lda + k);
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) acc[i][v] += x * b[v];
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    float* dst = part ? row : t.c + i * t.ldc;
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) std::memcpy(dst + L * v, &acc[i][v], sizeof(V));
    if (part) std::copy(row, row + t.cols, t.c + i * t.ldc);
  }
}

/// `rows` (<= R) rows with the kernel of exactly that many.
template <int L, int NV, int R>
inline __attribute__((always_inline)) void kernel_rows(int rows, int64_t kc, const float* a,
                                                       int64_t lda, const float* p, const Tile& t) {
  if constexpr (R > 1) {
    if (rows < R) return kernel_rows<L, NV, R - 1>(rows, kc, a, lda, p, t);
  }
  kernel<L, R, NV>(kc, a, lda, p, t);
}

#ifdef MILKIT_VMATH_AVX2
#define MILKIT_DOT_TARGET __attribute__((target("avx2,fma,avx512f,avx512vl"), always_inline))

/// R rows x NC columns of a narrow last panel as dot products along k, 16 k per vector: A's
/// rows and the columns of t (t.tcols) are both contiguous in k, so every lane of every FMA is
/// used (a column of 8 lanes broadcast A's elements for 1-8 useful columns: N = 49 cost 37% more
/// than N = 48). Each output is init + the sum of its 16 partial sums (k = lane mod 16), a fixed
/// order that depends on the shape only.
template <int R, int NC>
MILKIT_DOT_TARGET inline void dot_block(int64_t kc, const float* a, int64_t lda, const float* t,
                                        int64_t ldt, const Tile& tile, int j0) {
  __m512 acc[R][NC];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < NC; ++j) acc[i][j] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= kc; k += 16) {
    __m512 b[NC];
    for (int j = 0; j < NC; ++j) b[j] = _mm512_loadu_ps(t + (j0 + j) * ldt + k);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m512 x = _mm512_loadu_ps(a + i * lda + k);
      for (int j = 0; j < NC; ++j) acc[i][j] = _mm512_fmadd_ps(x, b[j], acc[i][j]);
    }
  }
  if (k < kc) {
    const __mmask16 m = static_cast<__mmask16>((1u << (kc - k)) - 1);
    __m512 b[NC];
    for (int j = 0; j < NC; ++j) b[j] = _mm512_maskz_loadu_ps(m, t + (j0 + j) * ldt + k);
    for (int i = 0; i < R; ++i) {
      const __m512 x = _mm512_maskz_loadu_ps(m, a + i * lda + k);
      for (int j = 0; j < NC; ++j) acc[i][j] = _mm512_fmadd_ps(x, b[j], acc[i][j]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < NC; ++j) {
      float& c = tile.c[i * tile.ldc + j0 + j];
      const float init = tile.init == Init::Zero      ? 0.0f
                         : tile.init == Init::Bias    ? tile.bias[j0 + j]
                         : tile.init == Init::RowBias ? tile.row_bias[i]
                                                      : c;
      c = init + _mm512_reduce_add_ps(acc[i][j]);
    }
}

/// `rows` (<= R) rows of the narrow panel of tile t (t.cols <= kTailCols), 3 columns at a time.
template <int R>
MILKIT_DOT_TARGET inline void tail_rows(int rows, int64_t kc, const float* a, int64_t lda,
                                        const Tile& t) {
  if constexpr (R > 1) {
    if (rows < R) return tail_rows<R - 1>(rows, kc, a, lda, t);
  }
  int j = 0;
  for (; j + 3 <= t.cols; j += 3) dot_block<R, 3>(kc, a, lda, t.tcols, t.ldt, t, j);
  if (t.cols - j == 2)
    dot_block<R, 2>(kc, a, lda, t.tcols, t.ldt, t, j);
  else if (t.cols - j == 1)
    dot_block<R, 1>(kc, a, lda, t.tcols, t.ldt, t, j);
}
#undef MILKIT_DOT_TARGET

/// tail_rows for up to 8 rows (a call of its own: panel_rows is compiled for AVX2 too).
__attribute__((target("avx2,fma,avx512f,avx512vl"))) void tail_rows_avx512(int rows, int64_t kc,
                                                                           const float* a,
                                                                           int64_t lda,
                                                                           const Tile& t) {
  tail_rows<8>(rows, kc, a, lda, t);
}
#endif

/// `rows` (<= MR) rows of one panel: sub-panels of up to 3 vectors of L columns (one of 48 with
/// AVX-512, two of 24 with AVX2: 24 and 12 accumulators), each taking as many vectors as its
/// columns need (a last one of up to 8 columns with AVX-512: one vector of 8).
template <int L, int MR>
inline __attribute__((always_inline)) void panel_rows(int rows, int64_t kc, const float* a,
                                                      int64_t lda, const float* p, const Tile& t) {
  constexpr int W = 3 * L;
  for (int h = 0; h * W < t.cols; ++h) {
    Tile th = t;
    th.cols = std::min(t.cols - h * W, W);
    th.c = t.c + h * W;
    th.bias = t.bias + h * W;
    const float* ph = p + h * W;
#ifdef MILKIT_VMATH_AVX2
    if constexpr (L > 8) {
      if (th.cols <= kTailCols && t.tcols) {  // the narrow last panel, as dot products
        tail_rows_avx512(rows, kc, a, lda, th);
        continue;
      }
    }
#endif
    if (th.cols > 2 * L)
      kernel_rows<L, 3, MR>(rows, kc, a, lda, ph, th);
    else if (th.cols > L)
      kernel_rows<L, 2, MR>(rows, kc, a, lda, ph, th);
    else if (L > 8 && th.cols <= 8)
      // a tail of 8 columns or fewer (N = 49, 196: 7x7 and 14x14 images) in 8 lanes: half the
      // cost of a 16-lane vector on CPUs that split them (Zen 4), and the same sums
      kernel_rows<(L > 8 ? 8 : L), 1, MR>(rows, kc, a, lda, ph, th);
    else
      kernel_rows<L, 1, MR>(rows, kc, a, lda, ph, th);
  }
}

typedef void (*PanelRows)(int, int64_t, const float*, int64_t, const float*, const Tile&);

#ifdef MILKIT_VMATH_AVX2
__attribute__((target("avx2,fma"))) void panel_rows_avx2(int rows, int64_t kc, const float* a,
                                                         int64_t lda, const float* p,
                                                         const Tile& t) {
  panel_rows<8, 4>(rows, kc, a, lda, p, t);
}

__attribute__((target("avx2,fma,avx512f,avx512vl"))) void panel_rows_avx512(
    int rows, int64_t kc, const float* a, int64_t lda, const float* p, const Tile& t) {
  panel_rows<16, 8>(rows, kc, a, lda, p, t);
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
  const int mr = wide ? 8 : 4;  // rows per register block
  const PanelRows rows_fn = wide ? &panel_rows_avx512 : &panel_rows_avx2;
  const std::optional<PackedRows> rows_of_b = packed_rows(b);
  const int64_t panels = (N + kNR - 1) / kNR;
  // fewer panels than two per thread: rows of A split too (each part packs its panel)
  const int t = num_threads();
  int64_t parts = 1;
  if (panels < 2 * t)
    parts = std::max<int64_t>(1, std::min<int64_t>((2 * t + panels - 1) / panels, M / 32));
  const int tail_cols = narrow_cols(b, N, wide);
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
      const bool dots = tail_cols > 0 && panel == panels - 1;
      const int64_t kb = dots ? outer_block_k(N) : kKC;  // a narrow panel: the dots' blocks
      for (int64_t k0 = 0; k0 < K; k0 += kb) {
        const int64_t kc = std::min(kb, K - k0);
        pack_panel(b, rows_of_b ? &*rows_of_b : nullptr, n0, cols, k0, kc, p);
        Tile tile{nullptr, ldc, cols,
                  k0 > 0 || accumulate ? Init::Load
                  : bias               ? Init::Bias
                                       : Init::Zero,
                  bias_row};
        if (dots) {  // the last panel, narrow: as dot products
          thread_local std::vector<float> tail;
          tail.resize(static_cast<size_t>(cols * kc));
          transpose_tail(p, kc, cols, tail.data());
          tile.tcols = tail.data();
          tile.ldt = kc;
        }
        const bool round = round_half && k0 + kc == K;
        // blocks of up to mr rows, as even as they go (49 rows: 7 of 7, not 6 of 8 and 1 of 1)
        const int64_t blocks = (m1 - m0 + mr - 1) / mr;
        for (int64_t q = 0; q < blocks; ++q) {
          const int64_t m = m0 + (m1 - m0) * q / blocks;
          const int rows = static_cast<int>(m0 + (m1 - m0) * (q + 1) / blocks - m);
          tile.c = C + m * ldc + n0;
          if (q + 1 < blocks) {
            const int64_t m2 = m0 + (m1 - m0) * (q + 2) / blocks;
            prefetch_rows(A + (m + rows) * lda + k0, lda, m2 - m - rows, kc);
          }
          rows_fn(rows, kc, A + m * lda + k0, lda, p, tile);
          if (round)  // an fp16 output: its values rounded while the tile is in cache
            for (int i = 0; i < rows; ++i) round_to_half(tile.c + i * ldc, cols);
        }
      }
    }
  });
#else
  (void)M, (void)N, (void)K, (void)A, (void)lda, (void)b, (void)bias, (void)accumulate, (void)C,
      (void)ldc, (void)round_half;
#endif
}

void sgemm_rows_outer(int64_t M, int64_t N, int64_t K, const GemmLhs& a, const GemmRhs& b,
                      bool accumulate, float* C, int64_t ldc) {
#ifdef MILKIT_VMATH_AVX2
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // an empty sum: C = 0, or C as it is
    if (!accumulate)
      for (int64_t m = 0; m < M; ++m) std::fill(C + m * ldc, C + m * ldc + N, 0.0f);
    return;
  }
  const bool wide = vmath::cpu_avx512();
  const int mr = wide ? 8 : 4;
  const PanelRows rows_fn = wide ? &panel_rows_avx512 : &panel_rows_avx2;
  const int64_t panels = (N + kNR - 1) / kNR;
  // blocks of k whose panels together stay in L2 (256 KB), a multiple of 16
  const int64_t kcb = outer_block_k(N);
  const std::optional<PackedRows> rows_of_b = packed_rows(b);
  const int64_t blocks = (M + mr - 1) / mr;  // blocks of up to mr rows, as even as they go
  const float zeros[kNR] = {};
  const int tail_cols = narrow_cols(b, N, wide);
  // one contiguous range of row blocks per thread: each packs B's panels once per block of k
  parallel_for(blocks, std::max<int64_t>(1, blocks / num_threads()), [&](int64_t s, int64_t e) {
    thread_local std::vector<float> pb, abuf;
    if (pb.size() < static_cast<size_t>(panels * kcb * kNR))
      pb.resize(static_cast<size_t>(panels * kcb * kNR));
    if (a.packed && abuf.size() < static_cast<size_t>(mr * kcb))
      abuf.resize(static_cast<size_t>(mr * kcb));
    thread_local std::vector<float> tail;
    if (tail_cols > 0) tail.resize(static_cast<size_t>(tail_cols * kcb));
    for (int64_t k0 = 0; k0 < K; k0 += kcb) {
      const int64_t kc = std::min(kcb, K - k0);
      for (int64_t q = 0; q < panels; ++q)
        pack_panel(b, rows_of_b ? &*rows_of_b : nullptr, q * kNR,
                   std::min<int64_t>(kNR, N - q * kNR), k0, kc, pb.data() + q * kc * kNR);
      if (tail_cols > 0)  // the last panel, narrow: as dot products
        transpose_tail(pb.data() + (panels - 1) * kc * kNR, kc, tail_cols, tail.data());
      for (int64_t u = s; u < e; ++u) {
        const int64_t m = M * u / blocks, rows = M * (u + 1) / blocks - m;
        const float* ar = a.f32 + m * a.ld + k0;
        int64_t lda = a.ld;
        const int64_t m1 = m + rows, rows1 = u + 1 < e ? M * (u + 2) / blocks - m1 : 0;
        if (a.packed) {
          a.packed->decode(a.row0 + m, rows, k0, kc, abuf.data());  // once, for every panel
          a.packed->prefetch(a.row0 + m1, rows1, k0, kc);           // the next rows' stored bytes
          ar = abuf.data();
          lda = kc;
        } else if (rows1 > 0) {
          prefetch_rows(a.f32 + m1 * a.ld + k0, a.ld, rows1, kc);
        }
        for (int64_t q = 0; q < panels; ++q) {
          Tile tile{C + m * ldc + q * kNR, ldc,
                    static_cast<int>(std::min<int64_t>(kNR, N - q * kNR)),
                    k0 > 0 || accumulate ? Init::Load : Init::Zero, zeros};
          if (tail_cols > 0 && q == panels - 1) {
            tile.tcols = tail.data();
            tile.ldt = kc;
          }
          rows_fn(static_cast<int>(rows), kc, ar, lda, pb.data() + q * kc * kNR, tile);
        }
      }
    }
  });
#else
  (void)M, (void)N, (void)K, (void)a, (void)b, (void)accumulate, (void)C, (void)ldc;
#endif
}

bool sgemm_row_blocks(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                      const GemmRhs& b, const float* row_bias, float* C, int64_t ldc,
                      const RowsDone& done) {
#ifdef MILKIT_VMATH_AVX2
  const int64_t panels = (N + kNR - 1) / kNR;
  if (M <= 0 || N <= 0 || K <= 0 || !sgemm_panels_enabled() || panels * K * kNR > kRowBlockFloats)
    return false;
  const bool wide = vmath::cpu_avx512();
  const int mr = wide ? 8 : 4;
  const PanelRows rows_fn = wide ? &panel_rows_avx512 : &panel_rows_avx2;
  // B packed whole by each thread that takes blocks, once per call, into its own buffer (panel q
  // at q * K * kNR, k-major): one buffer packed by the caller and read by the other cores was
  // fetched across cores on every call (80x196x200: 0.076 ms on 2 threads against 0.068 on one)
  const std::optional<PackedRows> rows_of_b = packed_rows(b);
  static std::atomic<uint64_t> calls{0};
  const uint64_t call = calls.fetch_add(1, std::memory_order_relaxed) + 1;
  const int64_t blocks = (M + mr - 1) / mr;  // blocks of up to mr rows, as even as they go
  const float zeros[kNR] = {};
  const int tail_cols = narrow_cols(b, N, wide);
  parallel_for(blocks, 1, [&](int64_t s, int64_t e) {
    thread_local std::vector<float> packed, tail;
    thread_local uint64_t packed_for = 0;
    if (packed_for != call) {
      if (static_cast<int64_t>(packed.size()) < panels * K * kNR)
        packed.resize(static_cast<size_t>(panels * K * kNR));
      for (int64_t q = 0; q < panels; ++q)
        for (int64_t k0 = 0; k0 < K; k0 += kKC) {
          const int64_t n0 = q * kNR;
          pack_panel(b, rows_of_b ? &*rows_of_b : nullptr, n0, std::min<int64_t>(kNR, N - n0), k0,
                     std::min(kKC, K - k0), packed.data() + (q * K + k0) * kNR);
        }
      if (tail_cols > 0) {  // the last panel (K x 48, k-major), narrow: as dot products
        tail.resize(static_cast<size_t>(tail_cols * K));
        transpose_tail(packed.data() + (panels - 1) * K * kNR, K, tail_cols, tail.data());
      }
      packed_for = call;
    }
    const float* pb = packed.data();
    for (int64_t q = s; q < e; ++q) {
      const int64_t m = M * q / blocks, m1 = M * (q + 1) / blocks;
      const int rows = static_cast<int>(m1 - m);
      if (q + 1 < e) prefetch_rows(A + m1 * lda, lda, M * (q + 2) / blocks - m1, K);
      for (int64_t pq = 0; pq < panels; ++pq) {
        const int64_t n0 = pq * kNR;
        const bool dots = tail_cols > 0 && pq == panels - 1;
        const int64_t kb = dots ? outer_block_k(N) : kKC;  // a narrow panel: the dots' blocks
        for (int64_t k0 = 0; k0 < K; k0 += kb) {
          Tile tile{C + m * ldc + n0,
                    ldc,
                    static_cast<int>(std::min<int64_t>(kNR, N - n0)),
                    k0 > 0     ? Init::Load
                    : row_bias ? Init::RowBias
                               : Init::Zero,
                    zeros,
                    row_bias ? row_bias + m : nullptr};
          if (dots) {
            tile.tcols = tail.data() + k0;
            tile.ldt = K;
          }
          rows_fn(rows, std::min(kb, K - k0), A + m * lda + k0, lda, pb + (pq * K + k0) * kNR,
                  tile);
        }
      }
      if (done) done(m, m1);
    }
  });
  return true;
#else
  (void)M, (void)N, (void)K, (void)A, (void)lda, (void)b, (void)row_bias, (void)C, (void)ldc,
      (void)done;
  return false;
#endif
}

}  // namespace milkit::exec

namespace milkit {

std::string gemm_kernel() { return exec::sgemm_panels_enabled() ? "panels" : "blas"; }

}  // namespace milkit
