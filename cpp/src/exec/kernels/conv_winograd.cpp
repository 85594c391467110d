// Winograd convolution (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks"),
// F(m x m, 3x3) with m = 2 or 4: an m x m output tile from its (m + 2)^2 input patch d is
// A^T [U . V] A with U = G g G^T (the 3x3 filter g, transformed for each call) and V = B^T d B.
// Summed over input channels, the (m + 2)^2 elementwise products become as many GEMMs
// M[xi][co, tile] = U[xi][co, ci] * V[xi][ci, tile], in OpenBLAS's single-threaded GEMM:
// F(2x2, 3x3) does 16 multiply-adds per 4 outputs and channel pair instead of 36 (2.25x fewer),
// F(4x4, 3x3) 36 per 16 (4x fewer). F(4x4)'s transforms have larger coefficients: its error,
// relative to the largest output of a tile, is about 20x the direct sum's (5e-6 against 2.7e-7 on
// ResNet's first stage; F(2x2) matches the direct sum's). It is taken where there are 36 tiles
// of 4x4 or more (outputs of about 21x21 and up), F(2x2) down to 36 tiles of 2x2; below that
// the filter transform, made per call, costs more than the GEMMs save (measured in
// docs/interpreter.md).
//
// Per image, tile rows are taken in chunks whose V fits in kVFloats: the chunk's V is made across
// threads (one input channel per task), then tasks of (output channel block, block of tile rows)
// each run their GEMMs into M in the thread's scratch and transform it into the output rows. U
// is made once per call when it fits in kUFloats, else by each task for its block of output
// channels (such convs take all their tiles in one chunk). Blocks do not depend on the thread
// count, and every GEMM sums over all input channels in one call, so neither do the results.
//
// Transforms are loops over tiles on contiguous runs (a patch row's columns are split by their
// remainder mod m first), compiled for AVX2 + FMA, picked at run time, and for the baseline.
#include "conv_winograd.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <vector>

#include "milkit/exec/threads.h"
#include "vec_math.h"

namespace milkit::exec {

namespace {

constexpr int64_t kUFloats = 1 << 18;     // transformed filters made once per call up to this size
constexpr int64_t kVFloats = 1 << 18;     // transformed input per chunk of tile rows
constexpr int64_t kVFloatsMax = 1 << 22;  // the same, for convs whose filters are made per task
constexpr int64_t kSubTiles = 128;        // tiles per GEMM (whole tile rows, at least one)
constexpr int64_t kResidentBlock = 32;    // output channels per task when U is made once per call

/// A stride between the 16 matrices of U, V or M: n floats rounded up to a cache line, plus one
/// line, so that the 16 runs a transform reads or writes together do not all fall in the same
/// cache sets (a stride that is a multiple of 4 KB would make them evict each other).
int64_t xi_stride(int64_t n) { return (n + 15) / 16 * 16 + 16; }

#define MILKIT_WINO_INLINE __attribute__((always_inline)) inline

/// U[xi][co, ci] = (G g G^T)[xi] (A x A matrices, xi stride `xs`, rows of C_in floats) for the n
/// filters g[co, ci, 3, 3], with `gt` the 1-D transform (three taps to A values): each filter's
/// taps gathered into 9 runs over ci (`sc`, 9 C_in floats), G applied down each column of a
/// filter, then across each row.
template <int A, typename GT>
MILKIT_WINO_INLINE void filter_transform(const float* g, int64_t n, int64_t cin, float* u,
                                         int64_t xs, float* sc, GT gt) {
  for (int64_t co = 0; co < n; ++co) {
    cblas_somatcopy(CblasRowMajor, CblasTrans, static_cast<int>(cin), 9, 1.0f, g + co * cin * 9, 9,
                    sc, static_cast<int>(cin));
    float* o = u + co * cin;
    for (int64_t ci = 0; ci < cin; ++ci) {
      float q[3][A];  // G down each column of the filter
      for (int c = 0; c < 3; ++c)
        gt(sc[c * cin + ci], sc[(3 + c) * cin + ci], sc[(6 + c) * cin + ci], q[c]);
      for (int i = 0; i < A; ++i) {  // then across each row
        float r[A];
        gt(q[0][i], q[1][i], q[2][i], r);
        for (int j = 0; j < A; ++j) o[(A * i + j) * xs + ci] = r[j];
      }
    }
  }
}

/// G of F(2x2, 3x3) applied to (k0, k1, k2): four values.
MILKIT_WINO_INLINE void g4(float k0, float k1, float k2, float* q) {
  q[0] = k0;
  q[1] = 0.5f * (k0 + k1 + k2);
  q[2] = 0.5f * (k0 - k1 + k2);
  q[3] = k2;
}

/// U[xi][co, ci] of F(2x2, 3x3) (16 matrices) for the n filters g[co, ci, 3, 3].
MILKIT_WINO_INLINE void filter_body(const float* g, int64_t n, int64_t cin, float* u, int64_t xs,
                                    float* sc) {
  filter_transform<4>(g, n, cin, u, xs, sc, g4);
}

/// B^T down four rows: t0 = d0 - d2, t1 = d1 + d2, t2 = d2 - d1, t3 = d1 - d3, elementwise.
MILKIT_WINO_INLINE void rows_bt(const float* __restrict d0, const float* __restrict d1,
                                const float* __restrict d2, const float* __restrict d3,
                                float* __restrict t0, float* __restrict t1, float* __restrict t2,
                                float* __restrict t3, int64_t n) {
  for (int64_t m = 0; m < n; ++m) {
    t0[m] = d0[m] - d2[m];
    t1[m] = d1[m] + d2[m];
    t2[m] = d2[m] - d1[m];
    t3[m] = d1[m] - d3[m];
  }
}

/// B across each tile's columns (e[tx], o[tx], e[tx + 1], o[tx + 1]) of a row made by rows_bt.
MILKIT_WINO_INLINE void cols_b(const float* __restrict e, const float* __restrict o,
                               float* __restrict v0, float* __restrict v1, float* __restrict v2,
                               float* __restrict v3, int64_t tw) {
  for (int64_t tx = 0; tx < tw; ++tx) {
    v0[tx] = e[tx] - e[tx + 1];
    v1[tx] = o[tx] + e[tx + 1];
    v2[tx] = e[tx + 1] - o[tx];
    v3[tx] = o[tx] - o[tx + 1];
  }
}

/// A^T down one column j of the tiles' m: s0 = m0 + m1 + m2, s1 = m1 - m2 - m3, elementwise.
MILKIT_WINO_INLINE void rows_at(const float* __restrict m0, const float* __restrict m1,
                                const float* __restrict m2, const float* __restrict m3,
                                float* __restrict s0, float* __restrict s1, int64_t n) {
  for (int64_t t = 0; t < n; ++t) {
    s0[t] = m0[t] + m1[t] + m2[t];
    s1[t] = m1[t] - m2[t] - m3[t];
  }
}

/// A across the columns of one output row of the tiles (s[j] made by rows_at), plus the bias:
/// r[2 tx] = s0 + s1 + s2 + bias, r[2 tx + 1] = s1 - s2 - s3 + bias.
MILKIT_WINO_INLINE void cols_a(const float* __restrict s0, const float* __restrict s1,
                               const float* __restrict s2, const float* __restrict s3, float bias,
                               float* __restrict r, int64_t tw) {
  for (int64_t tx = 0; tx < tw; ++tx) {
    r[2 * tx] = s0[tx] + s1[tx] + s2[tx] + bias;
    r[2 * tx + 1] = s1[tx] - s2[tx] - s3[tx] + bias;
  }
}

/// dst = src (n floats); false when one is not finite.
MILKIT_WINO_INLINE bool copy_finite(const float* __restrict src, float* __restrict dst, int64_t n) {
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float val = src[i];
    bad |= (val - val) != (val - val);  // inf - inf and NaN are NaN
    dst[i] = val;
  }
  return bad == 0;
}

/// V[xi][tile] (xi stride `xs`) of input plane xc for tile rows [ty0, ty1): each patch row split
/// into even and odd columns (zeros outside the input), B^T applied down the 4 rows, then B
/// across each tile's columns (even tx, odd tx, even tx + 1, odd tx + 1). `sc` holds 16 (tw + 1)
/// floats.
MILKIT_WINO_INLINE void input_body(const Conv2dShape& s, int64_t tw, const float* xc, int64_t ty0,
                                   int64_t ty1, float* v, int64_t xs, float* sc) {
  const int64_t w1 = tw + 1;
  float* ev[4];
  float* od[4];
  for (int r = 0; r < 4; ++r) {
    ev[r] = sc + r * w1;
    od[r] = sc + (4 + r) * w1;
  }
  float* a[4];  // B^T down the rows: even columns
  float* b[4];  // odd columns
  for (int i = 0; i < 4; ++i) {
    a[i] = sc + (8 + i) * w1;
    b[i] = sc + (12 + i) * w1;
  }
  // columns 2m - pw (even) and 2m + 1 - pw (odd) are both inside for m in [mlo, mhi)
  const int64_t mlo = std::min<int64_t>(w1, (s.pw + 1) / 2);
  const int64_t mhi = std::max<int64_t>(mlo, std::min<int64_t>(w1, (s.IW + s.pw) / 2));
  for (int64_t ty = ty0; ty < ty1; ++ty) {
    for (int r = 0; r < 4; ++r) {
      const int64_t ih = 2 * ty - s.ph + r;
      float* e = ev[r];
      float* o = od[r];
      if (ih < 0 || ih >= s.IH) {
        std::fill(e, e + w1, 0.0f);
        std::fill(o, o + w1, 0.0f);
        continue;
      }
      const float* row = xc + ih * s.IW;
      auto at = [&](int64_t c) { return c >= 0 && c < s.IW ? row[c] : 0.0f; };
      for (int64_t m = 0; m < mlo; ++m) {
        e[m] = at(2 * m - s.pw);
        o[m] = at(2 * m + 1 - s.pw);
      }
      const float* base = row - s.pw;
      for (int64_t m = mlo; m < mhi; ++m) {
        e[m] = base[2 * m];
        o[m] = base[2 * m + 1];
      }
      for (int64_t m = mhi; m < w1; ++m) {
        e[m] = at(2 * m - s.pw);
        o[m] = at(2 * m + 1 - s.pw);
      }
    }
    rows_bt(ev[0], ev[1], ev[2], ev[3], a[0], a[1], a[2], a[3], w1);
    rows_bt(od[0], od[1], od[2], od[3], b[0], b[1], b[2], b[3], w1);
    float* dst = v + (ty - ty0) * tw;
    for (int i = 0; i < 4; ++i)
      cols_b(a[i], b[i], dst + (4 * i) * xs, dst + (4 * i + 1) * xs, dst + (4 * i + 2) * xs,
             dst + (4 * i + 3) * xs, tw);
  }
}

/// Output rows of one channel from m[xi][tile] (xi stride `xs`) for tile rows [ty0, ty1) (m's
/// tiles start at ty0): A^T m A plus the bias, written to y's rows 2 ty and 2 ty + 1 that
/// exist. `sc` holds 10 tw floats. Returns false when a written value is not finite.
MILKIT_WINO_INLINE bool output_body(const Conv2dShape& s, int64_t tw, const float* m, int64_t xs,
                                    int64_t ty0, int64_t ty1, float bias, float* yc, float* sc) {
  float* sr[2][4];
  for (int j = 0; j < 4; ++j) {
    sr[0][j] = sc + j * tw;
    sr[1][j] = sc + (4 + j) * tw;
  }
  float* r = sc + 8 * tw;
  bool good = true;
  for (int64_t ty = ty0; ty < ty1; ++ty) {
    const float* mt = m + (ty - ty0) * tw;
    for (int j = 0; j < 4; ++j)
      rows_at(mt + j * xs, mt + (4 + j) * xs, mt + (8 + j) * xs, mt + (12 + j) * xs, sr[0][j],
              sr[1][j], tw);
    for (int h = 0; h < 2 && 2 * ty + h < s.OH; ++h) {
      cols_a(sr[h][0], sr[h][1], sr[h][2], sr[h][3], bias, r, tw);
      good &= copy_finite(r, yc + (2 * ty + h) * s.OW, s.OW);
    }
  }
  return good;
}

// ---- F(4x4, 3x3): points 0, 1, -1, 2, -2 and infinity ----------------------------------------
//   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1],
//   G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1],
//   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1].

/// G applied to (k0, k1, k2): six values.
MILKIT_WINO_INLINE void g6(float k0, float k1, float k2, float* q) {
  q[0] = 0.25f * k0;
  q[1] = (-1.0f / 6) * (k0 + k1 + k2);
  q[2] = (-1.0f / 6) * (k0 - k1 + k2);
  q[3] = (1.0f / 24) * k0 + (1.0f / 12) * k1 + (1.0f / 6) * k2;
  q[4] = (1.0f / 24) * k0 - (1.0f / 12) * k1 + (1.0f / 6) * k2;
  q[5] = k2;
}

/// U[xi][co, ci] of F(4x4, 3x3) (36 matrices) for the n filters g[co, ci, 3, 3].
MILKIT_WINO_INLINE void filter4_body(const float* g, int64_t n, int64_t cin, float* u, int64_t xs,
                                     float* sc) {
  filter_transform<6>(g, n, cin, u, xs, sc, g6);
}

/// B^T of F(4x4, 3x3) down six rows, elementwise.
MILKIT_WINO_INLINE void rows_bt6(const float* __restrict d0, const float* __restrict d1,
                                 const float* __restrict d2, const float* __restrict d3,
                                 const float* __restrict d4, const float* __restrict d5,
                                 float* __restrict t0, float* __restrict t1, float* __restrict t2,
                                 float* __restrict t3, float* __restrict t4, float* __restrict t5,
                                 int64_t n) {
  for (int64_t m = 0; m < n; ++m) {
    t0[m] = 4.0f * d0[m] - 5.0f * d2[m] + d4[m];
    t1[m] = -4.0f * (d1[m] + d2[m]) + (d3[m] + d4[m]);
    t2[m] = 4.0f * (d1[m] - d2[m]) + (d4[m] - d3[m]);
    t3[m] = 2.0f * (d3[m] - d1[m]) + (d4[m] - d2[m]);
    t4[m] = 2.0f * (d1[m] - d3[m]) + (d4[m] - d2[m]);
    t5[m] = 4.0f * d1[m] - 5.0f * d3[m] + d5[m];
  }
}

/// B^T of F(4x4, 3x3) across each tile's six columns: p[q] holds columns 4 tx + q (q < 4), and
/// columns 4 tx + 4, 4 tx + 5 are p[0], p[1] at tx + 1. Writes v[j][tx].
MILKIT_WINO_INLINE void cols_b6(const float* __restrict p0, const float* __restrict p1,
                                const float* __restrict p2, const float* __restrict p3,
                                float* __restrict v0, float* __restrict v1, float* __restrict v2,
                                float* __restrict v3, float* __restrict v4, float* __restrict v5,
                                int64_t tw) {
  for (int64_t tx = 0; tx < tw; ++tx) {
    const float c0 = p0[tx], c1 = p1[tx], c2 = p2[tx], c3 = p3[tx], c4 = p0[tx + 1],
                c5 = p1[tx + 1];
    v0[tx] = 4.0f * c0 - 5.0f * c2 + c4;
    v1[tx] = -4.0f * (c1 + c2) + (c3 + c4);
    v2[tx] = 4.0f * (c1 - c2) + (c4 - c3);
    v3[tx] = 2.0f * (c3 - c1) + (c4 - c2);
    v4[tx] = 2.0f * (c1 - c3) + (c4 - c2);
    v5[tx] = 4.0f * c1 - 5.0f * c3 + c5;
  }
}

/// V[xi][tile] of F(4x4, 3x3) (xi stride `xs`) of input plane xc for tile rows [ty0, ty1): each of
/// a patch row's columns split by their remainder mod 4 (zeros outside the input), B^T down the
/// six rows per remainder, then across each tile's columns. `sc` holds 48 (tw + 1) floats.
MILKIT_WINO_INLINE void input4_body(const Conv2dShape& s, int64_t tw, const float* xc, int64_t ty0,
                                    int64_t ty1, float* v, int64_t xs, float* sc) {
  const int64_t w1 = tw + 1;
  auto ph = [&](int r, int q) { return sc + (4 * r + q) * w1; };       // row r, remainder q
  auto tr = [&](int i, int q) { return sc + (24 + 4 * i + q) * w1; };  // B^T row i, remainder q
  // columns 4 m + q - pw are inside for every q when m is in [mlo, mhi)
  const int64_t mlo = std::min<int64_t>(w1, (s.pw + 3) / 4);
  const int64_t mhi = std::max<int64_t>(mlo, std::min<int64_t>(w1, (s.IW + s.pw) / 4));
  for (int64_t ty = ty0; ty < ty1; ++ty) {
    for (int r = 0; r < 6; ++r) {
      const int64_t ih = 4 * ty - s.ph + r;
      if (ih < 0 || ih >= s.IH) {
        for (int q = 0; q < 4; ++q) std::fill(ph(r, q), ph(r, q) + w1, 0.0f);
        continue;
      }
      const float* row = xc + ih * s.IW;
      float* p0 = ph(r, 0);
      float* p1 = ph(r, 1);
      float* p2 = ph(r, 2);
      float* p3 = ph(r, 3);
      auto at = [&](int64_t c) { return c >= 0 && c < s.IW ? row[c] : 0.0f; };
      for (int64_t m = 0; m < mlo; ++m) {
        p0[m] = at(4 * m - s.pw);
        p1[m] = at(4 * m + 1 - s.pw);
        p2[m] = at(4 * m + 2 - s.pw);
        p3[m] = at(4 * m + 3 - s.pw);
      }
      const float* base = row - s.pw;
      for (int64_t m = mlo; m < mhi; ++m) {
        p0[m] = base[4 * m];
        p1[m] = base[4 * m + 1];
        p2[m] = base[4 * m + 2];
        p3[m] = base[4 * m + 3];
      }
      for (int64_t m = mhi; m < w1; ++m) {
        p0[m] = at(4 * m - s.pw);
        p1[m] = at(4 * m + 1 - s.pw);
        p2[m] = at(4 * m + 2 - s.pw);
        p3[m] = at(4 * m + 3 - s.pw);
      }
    }
    for (int q = 0; q < 4; ++q)
      rows_bt6(ph(0, q), ph(1, q), ph(2, q), ph(3, q), ph(4, q), ph(5, q), tr(0, q), tr(1, q),
               tr(2, q), tr(3, q), tr(4, q), tr(5, q), w1);
    float* dst = v + (ty - ty0) * tw;
    for (int i = 0; i < 6; ++i)
      cols_b6(tr(i, 0), tr(i, 1), tr(i, 2), tr(i, 3), dst + (6 * i) * xs, dst + (6 * i + 1) * xs,
              dst + (6 * i + 2) * xs, dst + (6 * i + 3) * xs, dst + (6 * i + 4) * xs,
              dst + (6 * i + 5) * xs, tw);
  }
}

/// A^T of F(4x4, 3x3) down one column j of the tiles' m (six rows), elementwise: four rows.
MILKIT_WINO_INLINE void rows_at6(const float* __restrict m0, const float* __restrict m1,
                                 const float* __restrict m2, const float* __restrict m3,
                                 const float* __restrict m4, const float* __restrict m5,
                                 float* __restrict s0, float* __restrict s1, float* __restrict s2,
                                 float* __restrict s3, int64_t n) {
  for (int64_t t = 0; t < n; ++t) {
    const float a = m1[t] + m2[t], b = m1[t] - m2[t], c = m3[t] + m4[t], d = m3[t] - m4[t];
    s0[t] = m0[t] + a + c;
    s1[t] = b + 2.0f * d;
    s2[t] = a + 4.0f * c;
    s3[t] = b + 8.0f * d + m5[t];
  }
}

/// A^T of F(4x4, 3x3) across the six columns of one output row of the tiles, plus the bias:
/// r[4 tx + l].
MILKIT_WINO_INLINE void cols_a6(const float* __restrict s0, const float* __restrict s1,
                                const float* __restrict s2, const float* __restrict s3,
                                const float* __restrict s4, const float* __restrict s5, float bias,
                                float* __restrict r, int64_t tw) {
  for (int64_t tx = 0; tx < tw; ++tx) {
    const float a = s1[tx] + s2[tx], b = s1[tx] - s2[tx], c = s3[tx] + s4[tx], d = s3[tx] - s4[tx];
    r[4 * tx] = s0[tx] + a + c + bias;
    r[4 * tx + 1] = b + 2.0f * d + bias;
    r[4 * tx + 2] = a + 4.0f * c + bias;
    r[4 * tx + 3] = b + 8.0f * d + s5[tx] + bias;
  }
}

/// Output rows of one channel from F(4x4, 3x3)'s m[xi][tile] (xi stride `xs`) for tile rows
/// [ty0, ty1): A^T m A plus the bias, written to the rows 4 ty + l that exist. `sc` holds 28 tw
/// floats. Returns false when a written value is not finite.
MILKIT_WINO_INLINE bool output4_body(const Conv2dShape& s, int64_t tw, const float* m, int64_t xs,
                                     int64_t ty0, int64_t ty1, float bias, float* yc, float* sc) {
  auto sr = [&](int k, int j) { return sc + (6 * k + j) * tw; };  // A^T row k, column j
  float* r = sc + 24 * tw;
  bool good = true;
  for (int64_t ty = ty0; ty < ty1; ++ty) {
    const float* mt = m + (ty - ty0) * tw;
    for (int j = 0; j < 6; ++j)
      rows_at6(mt + j * xs, mt + (6 + j) * xs, mt + (12 + j) * xs, mt + (18 + j) * xs,
               mt + (24 + j) * xs, mt + (30 + j) * xs, sr(0, j), sr(1, j), sr(2, j), sr(3, j), tw);
    for (int k = 0; k < 4 && 4 * ty + k < s.OH; ++k) {
      cols_a6(sr(k, 0), sr(k, 1), sr(k, 2), sr(k, 3), sr(k, 4), sr(k, 5), bias, r, tw);
      good &= copy_finite(r, yc + (4 * ty + k) * s.OW, s.OW);
    }
  }
  return good;
}

/// One Winograd scheme F(m x m, 3x3): alpha = m + 2 points, alpha^2 GEMMs, its transforms and
/// the scratch floats they need (input: in_sc (tw + 1), output: out_sc tw).
struct Scheme {
  int m = 2, alpha = 4;
  int64_t in_sc = 16, out_sc = 10;
  void (*filter)(const float* g, int64_t n, int64_t cin, float* u, int64_t xs, float* sc) = nullptr;
  void (*input)(const Conv2dShape& s, int64_t tw, const float* xc, int64_t ty0, int64_t ty1,
                float* v, int64_t xs, float* sc) = nullptr;
  bool (*output)(const Conv2dShape& s, int64_t tw, const float* m, int64_t xs, int64_t ty0,
                 int64_t ty1, float bias, float* yc, float* sc) = nullptr;
};

#define MILKIT_WINO_SCHEME(NAME, ATTR, FILTER, INPUT, OUTPUT, M, IN_SC, OUT_SC)          \
  ATTR void NAME##_filter(const float* g, int64_t n, int64_t cin, float* u, int64_t xs,  \
                          float* sc) {                                                   \
    FILTER(g, n, cin, u, xs, sc);                                                        \
  }                                                                                      \
  ATTR void NAME##_input(const Conv2dShape& s, int64_t tw, const float* xc, int64_t ty0, \
                         int64_t ty1, float* v, int64_t xs, float* sc) {                 \
    INPUT(s, tw, xc, ty0, ty1, v, xs, sc);                                               \
  }                                                                                      \
  ATTR bool NAME##_output(const Conv2dShape& s, int64_t tw, const float* m, int64_t xs,  \
                          int64_t ty0, int64_t ty1, float bias, float* yc, float* sc) {  \
    return OUTPUT(s, tw, m, xs, ty0, ty1, bias, yc, sc);                                 \
  }                                                                                      \
  const Scheme NAME{M, M + 2, IN_SC, OUT_SC, NAME##_filter, NAME##_input, NAME##_output};

MILKIT_WINO_SCHEME(f2_base, , filter_body, input_body, output_body, 2, 16, 10)
MILKIT_WINO_SCHEME(f4_base, , filter4_body, input4_body, output4_body, 4, 48, 28)
#ifdef MILKIT_VMATH_AVX2
#define MILKIT_WINO_AVX2 __attribute__((target("avx2,fma")))
MILKIT_WINO_SCHEME(f2_avx2, MILKIT_WINO_AVX2, filter_body, input_body, output_body, 2, 16, 10)
MILKIT_WINO_SCHEME(f4_avx2, MILKIT_WINO_AVX2, filter4_body, input4_body, output4_body, 4, 48, 28)
#endif

/// F(m x m, 3x3) for m = 2 or 4, in the CPU's best version (the AVX2 one may contract products
/// and sums into FMAs, so the last bits can differ between CPUs, as OpenBLAS's do).
const Scheme& scheme(int m) {
#ifdef MILKIT_VMATH_AVX2
  if (vmath::cpu_avx2_fma()) return m == 4 ? f4_avx2 : f2_avx2;
#endif
  return m == 4 ? f4_base : f2_base;
}

/// MILKIT_WINOGRAD: 0 turns Winograd off, 2 or 4 forces F(2x2, 3x3) or F(4x4, 3x3) where either
/// applies (for measuring); unset, the tile is chosen by the output's size.
int forced_scheme() {
  static const int v = [] {
    const char* e = std::getenv("MILKIT_WINOGRAD");
    return e && *e ? std::atoi(e) : -1;
  }();
  return v;
}

/// Tiles of an output plane for a tile size.
int64_t tiles(const Conv2dShape& s, int64_t m) {
  return ((s.OH + m - 1) / m) * ((s.OW + m - 1) / m);
}

/// The tile size for a conv winograd_suits takes: 4 when it still makes 36 tiles or more (output
/// 21x21 and up), else 2.
int tile_size(const Conv2dShape& s) {
  const int f = forced_scheme();
  if (f == 2 || f == 4) return f;
  return tiles(s, 4) >= 36 ? 4 : 2;
}

}  // namespace

float* conv_scratch(int slot, int64_t n) {
  thread_local std::vector<float> bufs[2];
  std::vector<float>& b = bufs[slot];
  if (static_cast<int64_t>(b.size()) < n) b.resize(static_cast<size_t>(std::max<int64_t>(n, 1)));
  return b.data();
}

bool winograd_suits(const Conv2dShape& s) {
  if (forced_scheme() == 0) return false;
  return s.KH == 3 && s.KW == 3 && s.sh == 1 && s.sw == 1 && s.dh == 1 && s.dw == 1 &&
         s.Cin >= 16 && s.Cout >= 16 && tiles(s, 2) >= 36;
}

bool winograd_conv3x3(const Conv2dShape& s, const float* x, const WeightRows& w, const float* bias,
                      float* y) {
  const Scheme& sch = scheme(tile_size(s));
  const int64_t mt = sch.m, nxi = int64_t{sch.alpha} * sch.alpha;
  const int64_t cin = s.Cin, cout = s.Cout, th = (s.OH + mt - 1) / mt, tw = (s.OW + mt - 1) / mt;
  if (s.N == 0 || cout == 0 || th == 0 || tw == 0) return true;
  // Blocks do not depend on the thread count: OpenBLAS's edge kernels may round a row of C
  // differently from its main kernel, so a row must fall at the same place of the same block.
  const bool resident = nxi * cout * cin <= kUFloats;
  const int64_t cb =
      resident ? std::min<int64_t>(cout, kResidentBlock)
               : std::min<int64_t>(cout, std::max<int64_t>(16, kUFloats / (nxi * cin) / 16 * 16));
  const int64_t nco = (cout + cb - 1) / cb;
  // filters made per task are made once per chunk: such convs take all their tiles at once
  const int64_t rows_sub = std::clamp<int64_t>(kSubTiles / tw, 1, th);
  const int64_t rows_chunk = std::clamp<int64_t>(
      (resident ? kVFloats : kVFloatsMax) / (nxi * cin * tw) / rows_sub * rows_sub, rows_sub, th);
  // The calling thread's shared scratch holds U (when made once) and the chunk's V; each task's
  // own scratch holds its filters (when made per task), its products M and the transforms' rows.
  const int64_t ures_n = resident ? nxi * xi_stride(cout * cin) : 0;
  float* ures = conv_scratch(1, ures_n + nxi * xi_stride(cin * rows_chunk * tw));
  float* v = ures + ures_n;
  auto make_filters = [&](int64_t c0, int64_t n, float* u, int64_t xs, float* sc) {
    sch.filter(w(c0, n), n, cin, u, xs, sc);
  };
  if (resident) {
    parallel_for(nco, 1, [&](int64_t b, int64_t e) {
      float* sc = conv_scratch(0, 9 * cin);
      for (int64_t q = b; q < e; ++q) {
        const int64_t c0 = q * cb;
        make_filters(c0, std::min(cb, cout - c0), ures + c0 * cin, xi_stride(cout * cin), sc);
      }
    });
  }
  const int64_t m_most = nxi * xi_stride(cb * rows_sub * tw) + sch.out_sc * tw;
  const int64_t u_own = resident ? 0 : nxi * xi_stride(cb * cin) + 9 * cin;
  const int64_t ip = s.IH * s.IW, op = s.OH * s.OW;
  std::atomic<bool> ok{true};
  for (int64_t n = 0; n < s.N && ok.load(std::memory_order_relaxed); ++n) {
    const float* xn = x + n * cin * ip;
    float* yn = y + n * cout * op;
    for (int64_t ty0 = 0; ty0 < th; ty0 += rows_chunk) {
      const int64_t ty1 = std::min(th, ty0 + rows_chunk), tc = (ty1 - ty0) * tw;
      const int64_t vxs = xi_stride(cin * tc);
      parallel_for(cin, 1, [&](int64_t b, int64_t e) {
        float* sc = conv_scratch(0, sch.in_sc * (tw + 1));
        for (int64_t ci = b; ci < e; ++ci)
          sch.input(s, tw, xn + ci * ip, ty0, ty1, v + ci * tc, vxs, sc);
      });
      const int64_t nsub = (ty1 - ty0 + rows_sub - 1) / rows_sub;
      // resident filters: a task per (channel block, block of tile rows); else per channel block,
      // which makes its filters once and runs every block of tile rows
      const int64_t tasks = resident ? nco * nsub : nco;
      parallel_for(tasks, 1, [&](int64_t b, int64_t e) {
        bool good = true;
        float* own = conv_scratch(0, u_own + m_most);
        for (int64_t task = b; task < e; ++task) {
          const int64_t q = resident ? task / nsub : task;
          const int64_t c0 = q * cb, nc = std::min(cb, cout - c0);
          const float* u;
          int64_t uxs;
          if (resident) {
            u = ures + c0 * cin;
            uxs = xi_stride(cout * cin);
          } else {
            uxs = xi_stride(nc * cin);
            make_filters(c0, nc, own, uxs, own + nxi * uxs);
            u = own;
          }
          const int64_t sb = resident ? task % nsub : 0, se = resident ? sb + 1 : nsub;
          for (int64_t sub = sb; sub < se; ++sub) {
            const int64_t r0 = ty0 + sub * rows_sub, r1 = std::min(ty1, r0 + rows_sub);
            const int64_t nt = (r1 - r0) * tw, toff = (r0 - ty0) * tw;
            const int64_t mxs = xi_stride(nc * nt);
            float* m = own + u_own;
            for (int64_t xi = 0; xi < nxi; ++xi)
              cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(nc),
                          static_cast<int>(nt), static_cast<int>(cin), 1.0f, u + xi * uxs,
                          static_cast<int>(cin), v + xi * vxs + toff, static_cast<int>(tc), 0.0f,
                          m + xi * mxs, static_cast<int>(nt));
            float* sc = m + nxi * mxs;
            for (int64_t co = 0; co < nc; ++co)
              good &= sch.output(s, tw, m + co * nt, mxs, r0, r1, bias ? bias[c0 + co] : 0.0f,
                                 yn + (c0 + co) * op, sc);
          }
        }
        if (!good) ok.store(false, std::memory_order_relaxed);
      });
    }
  }
  return ok.load();
}

}  // namespace milkit::exec
