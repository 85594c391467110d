// Depthwise conv: each input plane is copied once, zero-padded, into a per-thread buffer laid
// out as `sw` phase planes (phase q holds the padded columns q, q + sw, q + 2 sw, ...), so that
// every tap of every stride reads a contiguous run of columns (at stride 2 the copy splits the
// columns with vector loads and a permute). The buffer is zeroed once per thread's run of planes:
// each plane writes the same positions, so its padding stays zero. 3x3 and 5x5 taps at stride 1
// or 2 (no dilation) are computed four output rows at a time, one vector of output columns
// (16 lanes with AVX-512, 8 with AVX2 + FMA, 4 with SSE, chosen at run time) per accumulator,
// each padded row loaded once per tap column for every output row it reaches; the last columns
// of a row wider than a vector as a block overlapping the previous one. Other geometries go row
// by row in blocks of 16 columns (GCC vector extensions), the padded rows long enough that a
// block may run past the output's last column into scratch. Every output sums its taps in the
// order (kh, kw) from the bias, whichever body computes it. The stem kernel (few input channels)
// pads bands of rows the same way; the pointwise kernel (a 1x1 conv's tile of few input
// channels) reads the input where it lies.
#include "conv_direct.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "milkit/exec/threads.h"
#include "transpose.h"
#include "vec_math.h"

// GCC 12's AVX-512 intrinsics (the transposes' unpacks) start from an undefined vector, which it
// reports as maybe uninitialized where they inline
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace milkit::exec {

namespace {

constexpr int64_t kBlock = 16;  // output columns per register block

typedef vmath::Lanes<8>::f v8;

/// The plane layout of one padded input channel.
struct Padded {
  int64_t rows = 0;   // padded rows read by the taps
  int64_t width = 0;  // floats per row of one phase plane
  int64_t phase = 0;  // floats per phase plane
};

Padded padded_layout(const Conv2dShape& s) {
  Padded p;
  p.rows = (s.OH - 1) * s.sh + (s.KH - 1) * s.dh + 1;
  const int64_t blocks = (s.OW + kBlock - 1) / kBlock;
  p.width = blocks * kBlock + (s.KW - 1) * s.dw / s.sw + 1;
  p.phase = p.rows * p.width;
  return p;
}

/// Copies padded rows [r0, r0 + p.rows) of input plane `xc` [IH, IW] into `buf` as the padded
/// phase planes. Only the positions of input elements are written, and the rows outside the input
/// when `zero_rows`: `buf` starts zeroed and every plane (band) of one conv writes the same column
/// positions, so the padding columns stay zero without being filled again. At stride 2 the
/// columns are split into their phases L at a time (two loads, one permute).
template <int L>
inline __attribute__((always_inline)) void pad_plane(const Conv2dShape& s, const Padded& p,
                                                     const float* xc, float* buf, int64_t r0 = 0,
                                                     bool zero_rows = false) {
  typedef typename vmath::Lanes<L>::f V;
  if (s.sw == 2) {
    // both phases from one pass over each input row: padded column 2j + q is input column
    // 2j + q - pw, so the 2L columns from 2j - pw hold phase 0's j..j+L-1 in their even lanes and
    // phase 1's in their odd ones (reading the row once per phase took the input from memory
    // twice: 64x112x112 3x3 stride 2 spent half its time splitting)
    int64_t lo[2], hi[2];
    for (int q = 0; q < 2; ++q) {
      lo[q] = std::max<int64_t>(0, (s.pw - q + 1) / 2);
      hi[q] = std::min<int64_t>(p.width, (s.IW + s.pw - q + 1) / 2);
    }
    const int64_t vlo = std::max({lo[0], lo[1], (s.pw + 1) / 2});
    int64_t vhi = vlo;
    while (vhi + L <= std::min(hi[0], hi[1]) && 2 * (vhi + L) - s.pw <= s.IW) vhi += L;
    for (int64_t r = 0; r < p.rows; ++r) {
      float* d0 = buf + r * p.width;
      float* d1 = buf + p.phase + r * p.width;
      const int64_t ih = r0 + r - s.ph;
      if (ih < 0 || ih >= s.IH) {
        if (zero_rows) {
          std::fill_n(d0, p.width, 0.0f);
          std::fill_n(d1, p.width, 0.0f);
        }
        continue;
      }
      const float* src = xc + ih * s.IW;
      for (int64_t j = vlo; j < vhi; j += L) {
        V e, o;
        vmath::load_even_odd_lanes<L>(src + 2 * j - s.pw, e, o);
        std::memcpy(d0 + j, &e, sizeof e);
        std::memcpy(d1 + j, &o, sizeof o);
      }
      for (int q = 0; q < 2; ++q) {
        float* d = q ? d1 : d0;
        for (int64_t j = lo[q]; j < std::min(hi[q], vlo); ++j) d[j] = src[2 * j + q - s.pw];
        for (int64_t j = std::max(lo[q], vhi); j < hi[q]; ++j) d[j] = src[2 * j + q - s.pw];
      }
    }
    return;
  }
  // phase by phase, its column range worked out once (the divisions, per row, were a tenth of a
  // 3x3 stride-2 plane's time): padded column j * sw + q is input column j * sw + q - pw, for j
  // in [lo, hi); at stride 2 the vector loads run up to vhi (their two loads read input columns
  // up to 2 (j + L - 1) + q - pw + 1)
  for (int64_t q = 0; q < s.sw; ++q) {
    const int64_t lo = std::max<int64_t>(0, (s.pw - q + s.sw - 1) / s.sw);
    const int64_t hi = std::min<int64_t>(p.width, (s.IW + s.pw - q + s.sw - 1) / s.sw);
    int64_t vhi = lo;
    if (s.sw == 2)
      while (vhi + L <= hi && 2 * (vhi + L - 1) + q - s.pw + 1 < s.IW) vhi += L;
    for (int64_t r = 0; r < p.rows; ++r) {
      float* dst = buf + q * p.phase + r * p.width;
      const int64_t ih = r0 + r - s.ph;
      if (ih < 0 || ih >= s.IH) {
        if (zero_rows) std::fill_n(dst, p.width, 0.0f);
        continue;
      }
      const float* src = xc + ih * s.IW;
      if (s.sw == 1) {
        if (hi > lo) std::memcpy(dst + lo, src + lo - s.pw, sizeof(float) * (hi - lo));
      } else if (s.sw == 2) {
        int64_t j = lo;
        for (; j < vhi; j += L) {
          V v;
          vmath::load_even_lanes<L>(src + 2 * j + q - s.pw, v);
          std::memcpy(dst + j, &v, sizeof v);
        }
        for (; j < hi; ++j) dst[j] = src[2 * j + q - s.pw];
      } else {
        for (int64_t j = lo; j < hi; ++j) dst[j] = src[j * s.sw + q - s.pw];
      }
    }
  }
}

/// Rows [oh0, oh0 + R) of one plane, K x K taps at stride S (no dilation), L output columns per
/// register block (the last block overlapping the previous one when the row is wider than L,
/// else its first columns stored lane by lane): each padded input row is loaded once per tap
/// column and multiplied into every output row it reaches. Every output sums its taps in the
/// order (kh, kw), as the generic body does, so the bits do not depend on R or L's blocking.
template <int L, int K, int S, int R>
inline __attribute__((always_inline)) void dw_rows_fixed(const Conv2dShape& s, const Padded& p,
                                                         const float* buf, const float* w, float b,
                                                         float* y, int64_t oh0) {
  typedef typename vmath::Lanes<L>::f V;
  V wv[K * K];
#pragma GCC unroll 32
  for (int i = 0; i < K * K; ++i) vmath::splat(wv[i], w + i);
  const int64_t OW = s.OW;
  auto block = [&](int64_t ow, int64_t n) __attribute__((always_inline)) {
    V acc[R];
#pragma GCC unroll 8
    for (int j = 0; j < R; ++j) acc[j] = V{} + b;
    const float* base = buf + oh0 * S * p.width + ow;
#pragma GCC unroll 16
    for (int r = 0; r < (R - 1) * S + K; ++r) {
      const float* row = base + r * p.width;
#pragma GCC unroll 8
      for (int kw = 0; kw < K; ++kw) {
        V xv;
        std::memcpy(&xv, row + (kw % S) * p.phase + kw / S, sizeof xv);
#pragma GCC unroll 8
        for (int j = 0; j < R; ++j) {
          const int kh = r - j * S;
          if (kh >= 0 && kh < K) acc[j] += xv * wv[kh * K + kw];
        }
      }
    }
    for (int j = 0; j < R; ++j) {
      float* dst = y + (oh0 + j) * OW + ow;
      if (n == L)
        std::memcpy(dst, &acc[j], sizeof(V));
      else
        for (int i = 0; i < L; ++i)
          if (i < n) dst[i] = acc[j][i];
    }
  };
  int64_t ow = 0;
  for (; ow + L <= OW; ow += L) block(ow, L);
  if (ow < OW) {
    if (OW >= L)
      block(OW - L, L);
    else
      block(ow, OW - ow);
  }
}

/// One plane with K x K taps at stride S: blocks of four output rows, then the rest one by one.
template <int L, int K, int S>
inline __attribute__((always_inline)) void dw_plane_fixed(const Conv2dShape& s, const Padded& p,
                                                          const float* buf, const int64_t* off,
                                                          const float* w, float b, float* y) {
  int64_t oh = 0;
  for (; oh + 4 <= s.OH; oh += 4) dw_rows_fixed<L, K, S, 4>(s, p, buf, w, b, y, oh);
  for (; oh < s.OH; ++oh) dw_rows_fixed<L, K, S, 1>(s, p, buf, w, b, y, oh);
}

/// All output rows of one plane from its padded input; off[kw] is tap kw's offset in the
/// padded buffer (phase plane and column), `tail` a scratch block for the last columns.
inline __attribute__((always_inline)) void dw_plane_body(const Conv2dShape& s, const Padded& p,
                                                         const float* buf, const int64_t* off,
                                                         const float* w, float b, float* y) {
  float tail[kBlock];
  for (int64_t oh = 0; oh < s.OH; ++oh) {
    float* dst = y + oh * s.OW;
    for (int64_t ow = 0; ow < s.OW; ow += kBlock) {
      v8 a0 = v8{} + b, a1 = a0;
      for (int64_t kh = 0; kh < s.KH; ++kh) {
        const float* row = buf + (oh * s.sh + kh * s.dh) * p.width + ow;
        const float* wk = w + kh * s.KW;
        for (int64_t kw = 0; kw < s.KW; ++kw) {
          const float* src = row + off[kw];
          const v8 wv = v8{} + wk[kw];
          v8 x0, x1;
          std::memcpy(&x0, src, sizeof x0);
          std::memcpy(&x1, src + 8, sizeof x1);
          a0 += wv * x0;
          a1 += wv * x1;
        }
      }
      float* o = ow + kBlock <= s.OW ? dst + ow : tail;
      std::memcpy(o, &a0, sizeof a0);
      std::memcpy(o + 8, &a1, sizeof a1);
      if (o == tail) std::copy(tail, tail + (s.OW - ow), dst + ow);
    }
  }
}

/// Pads input plane `xc` into `buf` when `pad` (a new input plane), then computes output plane
/// `y`: the fixed-size bodies for 3x3 and 5x5 taps at stride 1 or 2 and 7x7 at stride 1 (rows of
/// a vector or more: ConvNeXt's 56x56 96 channels 0.96 -> 0.56 ms on one thread; at 7x7 the
/// generic body is faster) without dilation, the generic body otherwise.
template <int L>
inline __attribute__((always_inline)) void dw_plane_any(const Conv2dShape& s, const Padded& p,
                                                        const float* xc, bool pad, float* buf,
                                                        const int64_t* off, const float* w, float b,
                                                        float* y) {
  if (pad) pad_plane<L>(s, p, xc, buf);
  const bool fixed = s.KH == s.KW && s.sh == s.sw && s.dh == 1 && s.dw == 1;
  if (fixed && s.KH == 3 && s.sh == 1)
    dw_plane_fixed<L, 3, 1>(s, p, buf, off, w, b, y);
  else if (fixed && s.KH == 3 && s.sh == 2)
    dw_plane_fixed<L, 3, 2>(s, p, buf, off, w, b, y);
  else if (fixed && s.KH == 5 && s.sh == 1)
    dw_plane_fixed<L, 5, 1>(s, p, buf, off, w, b, y);
  else if (fixed && s.KH == 5 && s.sh == 2)
    dw_plane_fixed<L, 5, 2>(s, p, buf, off, w, b, y);
  else if (fixed && s.KH == 7 && s.sh == 1 && s.OW >= L)
    dw_plane_fixed<L, 7, 1>(s, p, buf, off, w, b, y);  // ConvNeXt's
  else
    dw_plane_body(s, p, buf, off, w, b, y);
}

typedef void (*DwPlane)(const Conv2dShape&, const Padded&, const float*, bool, float*,
                        const int64_t*, const float*, float, float*);

void dw_plane_base(const Conv2dShape& s, const Padded& p, const float* xc, bool pad, float* buf,
                   const int64_t* off, const float* w, float b, float* y) {
  dw_plane_any<4>(s, p, xc, pad, buf, off, w, b, y);
}

#ifdef MILKIT_VMATH_AVX2
__attribute__((target("avx2,fma"))) void dw_plane_avx2(const Conv2dShape& s, const Padded& p,
                                                       const float* xc, bool pad, float* buf,
                                                       const int64_t* off, const float* w, float b,
                                                       float* y) {
  dw_plane_any<8>(s, p, xc, pad, buf, off, w, b, y);
}

__attribute__((target("avx2,fma,avx512f,avx512vl"))) void dw_plane_avx512(
    const Conv2dShape& s, const Padded& p, const float* xc, bool pad, float* buf,
    const int64_t* off, const float* w, float b, float* y) {
  dw_plane_any<16>(s, p, xc, pad, buf, off, w, b, y);
}
#endif

/// Output rows per band of the small-Cin conv (a thread's unit of work).
constexpr int64_t kStemBand = 4;

/// The padded layout of a band of kStemBand output rows of the small-Cin conv.
Padded stem_layout(const Conv2dShape& s) {
  Padded p = padded_layout(s);
  p.rows = (kStemBand - 1) * s.sh + (s.KH - 1) * s.dh + 1;
  p.phase = p.rows * p.width;
  return p;
}

/// Every accumulator of row j set to bias[j] in all lanes (0 without a bias): the start of the
/// stem's and the pointwise kernel's register blocks.
template <typename V, int CB, int NV>
inline __attribute__((always_inline)) void bias_accumulators(V (&acc)[CB][NV],
                                                             const float* bias) {
#pragma GCC unroll 16
  for (int j = 0; j < CB; ++j)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[j][v] = V{} + (bias ? bias[j] : 0.0f);
}

/// CB output channels x NV vectors of L output columns of output row `ohl` of a band (rows of
/// `buf`, whose channel ci starts at ci * cstride), from the output column `ow`: the accumulators
/// start from the bias and add each tap (ci, kh, kw) in that order. `n` < L stores only the first
/// n columns of a single vector.
template <int L, int CB, int NV>
inline __attribute__((always_inline)) void stem_block(const Conv2dShape& s, const Padded& p,
                                                      const float* buf, int64_t cstride,
                                                      const int64_t* off, int64_t ohl, int64_t ow,
                                                      const float* w, int64_t kc, const float* bias,
                                                      float* y, int64_t op, int64_t n) {
  typedef typename vmath::Lanes<L>::f V;
  V acc[CB][NV];
  bias_accumulators(acc, bias);
  const float* wt = w;
  for (int64_t ci = 0; ci < s.Cin; ++ci)
    for (int64_t kh = 0; kh < s.KH; ++kh) {
      const float* row = buf + ci * cstride + (ohl * s.sh + kh * s.dh) * p.width + ow;
      for (int64_t kw = 0; kw < s.KW; ++kw, ++wt) {
        const float* src = row + off[kw];
        V xv[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) std::memcpy(&xv[v], src + v * L, sizeof(V));
#pragma GCC unroll 16
        for (int j = 0; j < CB; ++j) {
          V wv;
          vmath::splat(wv, wt + j * kc);
#pragma GCC unroll 4
          for (int v = 0; v < NV; ++v) acc[j][v] += xv[v] * wv;
        }
      }
    }
#pragma GCC unroll 16
  for (int j = 0; j < CB; ++j)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* dst = y + j * op + ow + v * L;
      if (n == L)
        std::memcpy(dst, &acc[j][v], sizeof(V));
      else
        for (int i = 0; i < L; ++i)
          if (i < n) dst[i] = acc[j][v][i];
    }
}

/// CB output channels of one output row: blocks of 2 L columns, then L, then the last columns
/// as a block overlapping the previous one (or, narrower than L, the first columns of one).
template <int L, int CB>
inline __attribute__((always_inline)) void stem_row(const Conv2dShape& s, const Padded& p,
                                                    const float* buf, int64_t cstride,
                                                    const int64_t* off, int64_t ohl, const float* w,
                                                    int64_t kc, const float* bias, float* y,
                                                    int64_t op) {
  int64_t ow = 0;
  for (; ow + 2 * L <= s.OW; ow += 2 * L)
    stem_block<L, CB, 2>(s, p, buf, cstride, off, ohl, ow, w, kc, bias, y, op, L);
  for (; ow + L <= s.OW; ow += L)
    stem_block<L, CB, 1>(s, p, buf, cstride, off, ohl, ow, w, kc, bias, y, op, L);
  if (ow < s.OW) {
    if (s.OW >= L)
      stem_block<L, CB, 1>(s, p, buf, cstride, off, ohl, s.OW - L, w, kc, bias, y, op, L);
    else
      stem_block<L, CB, 1>(s, p, buf, cstride, off, ohl, ow, w, kc, bias, y, op, s.OW - ow);
  }
}

/// One band of output rows [oh0, oh1) of image `x` (all its channels) into `y` (the image's
/// output): pads the band's input rows of every channel into `buf`, then computes CB output
/// channels at a time (CB = 8 with 16 lanes, else 4), the rest one by one.
template <int L>
inline __attribute__((always_inline)) void stem_band(const Conv2dShape& s, const Padded& p,
                                                     const float* x, float* buf, const int64_t* off,
                                                     const float* w, const float* bias, float* y,
                                                     int64_t oh0, int64_t oh1) {
  constexpr int CB = L == 16 ? 8 : 4;
  const int64_t cstride = p.phase * s.sw, kc = s.Cin * s.KH * s.KW, op = s.OH * s.OW;
  for (int64_t ci = 0; ci < s.Cin; ++ci)
    pad_plane<L>(s, p, x + ci * s.IH * s.IW, buf + ci * cstride, oh0 * s.sh, true);
  int64_t co = 0;
  for (; co + CB <= s.Cout; co += CB)
    for (int64_t oh = oh0; oh < oh1; ++oh)
      stem_row<L, CB>(s, p, buf, cstride, off, oh - oh0, w + co * kc, kc,
                      bias ? bias + co : nullptr, y + co * op + oh * s.OW, op);
  for (; co < s.Cout; ++co)
    for (int64_t oh = oh0; oh < oh1; ++oh)
      stem_row<L, 1>(s, p, buf, cstride, off, oh - oh0, w + co * kc, kc, bias ? bias + co : nullptr,
                     y + co * op + oh * s.OW, op);
}

typedef void (*StemBand)(const Conv2dShape&, const Padded&, const float*, float*, const int64_t*,
                         const float*, const float*, float*, int64_t, int64_t);

void stem_band_base(const Conv2dShape& s, const Padded& p, const float* x, float* buf,
                    const int64_t* off, const float* w, const float* bias, float* y, int64_t oh0,
                    int64_t oh1) {
  stem_band<4>(s, p, x, buf, off, w, bias, y, oh0, oh1);
}

#ifdef MILKIT_VMATH_AVX2
__attribute__((target("avx2,fma"))) void stem_band_avx2(const Conv2dShape& s, const Padded& p,
                                                        const float* x, float* buf,
                                                        const int64_t* off, const float* w,
                                                        const float* bias, float* y, int64_t oh0,
                                                        int64_t oh1) {
  stem_band<8>(s, p, x, buf, off, w, bias, y, oh0, oh1);
}

__attribute__((target("avx2,fma,avx512f,avx512vl"))) void stem_band_avx512(
    const Conv2dShape& s, const Padded& p, const float* x, float* buf, const int64_t* off,
    const float* w, const float* bias, float* y, int64_t oh0, int64_t oh1) {
  stem_band<16>(s, p, x, buf, off, w, bias, y, oh0, oh1);
}
#endif

/// CB rows x NV vectors of L columns of a pointwise tile from column c: the accumulators start
/// from the bias and add w[r, k] * x[k, c] for k in order.
template <int L, int CB, int NV>
inline __attribute__((always_inline)) void pointwise_block(int64_t K, const float* w,
                                                           const float* bias, const float* x,
                                                           int64_t ldx, float* y, int64_t ldy) {
  typedef typename vmath::Lanes<L>::f V;
  V acc[CB][NV];
  bias_accumulators(acc, bias);
  for (int64_t k = 0; k < K; ++k) {
    V xv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) std::memcpy(&xv[v], x + k * ldx + v * L, sizeof(V));
#pragma GCC unroll 16
    for (int j = 0; j < CB; ++j) {
      V wv;
      vmath::splat(wv, w + j * K + k);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[j][v] += xv[v] * wv;
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < CB; ++j)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) std::memcpy(y + j * ldy + v * L, &acc[j][v], sizeof(V));
}

/// CB rows of a pointwise tile: blocks of NV vectors, then single vectors, the last columns as a
/// vector overlapping the previous one (the same sums), or one by one when narrower than L.
template <int L, int CB, int NV>
inline __attribute__((always_inline)) void pointwise_rows(int64_t K, int64_t cols, const float* w,
                                                          const float* bias, const float* x,
                                                          int64_t ldx, float* y, int64_t ldy) {
  int64_t c = 0;
  for (; c + NV * L <= cols; c += NV * L)
    pointwise_block<L, CB, NV>(K, w, bias, x + c, ldx, y + c, ldy);
  for (; c + L <= cols; c += L) pointwise_block<L, CB, 1>(K, w, bias, x + c, ldx, y + c, ldy);
  if (c == cols) return;
  if (cols >= L) {
    pointwise_block<L, CB, 1>(K, w, bias, x + cols - L, ldx, y + cols - L, ldy);
    return;
  }
  for (int j = 0; j < CB; ++j)
    for (int64_t i = c; i < cols; ++i) {
      float a = bias ? bias[j] : 0.0f;
      for (int64_t k = 0; k < K; ++k) a += x[k * ldx + i] * w[j * K + k];
      y[j * ldy + i] = a;
    }
}

template <int L, int CB, int NV>
inline __attribute__((always_inline)) void pointwise_tile_body(int64_t K, int64_t rows,
                                                               int64_t cols, const float* w,
                                                               const float* bias, const float* x,
                                                               int64_t ldx, float* y, int64_t ldy) {
  int64_t r = 0;
  for (; r + CB <= rows; r += CB)
    pointwise_rows<L, CB, NV>(K, cols, w + r * K, bias ? bias + r : nullptr, x, ldx, y + r * ldy,
                              ldy);
  for (; r < rows; ++r)
    pointwise_rows<L, 1, NV>(K, cols, w + r * K, bias ? bias + r : nullptr, x, ldx, y + r * ldy,
                             ldy);
}

typedef void (*PointwiseTile)(int64_t, int64_t, int64_t, const float*, const float*, const float*,
                              int64_t, float*, int64_t);

void pointwise_tile_base(int64_t K, int64_t rows, int64_t cols, const float* w, const float* bias,
                         const float* x, int64_t ldx, float* y, int64_t ldy) {
  pointwise_tile_body<4, 4, 2>(K, rows, cols, w, bias, x, ldx, y, ldy);
}

#ifdef MILKIT_VMATH_AVX2
__attribute__((target("avx2,fma"))) void pointwise_tile_avx2(int64_t K, int64_t rows, int64_t cols,
                                                             const float* w, const float* bias,
                                                             const float* x, int64_t ldx, float* y,
                                                             int64_t ldy) {
  pointwise_tile_body<8, 4, 3>(K, rows, cols, w, bias, x, ldx, y, ldy);
}

__attribute__((target("avx2,fma,avx512f,avx512vl"))) void pointwise_tile_avx512(
    int64_t K, int64_t rows, int64_t cols, const float* w, const float* bias, const float* x,
    int64_t ldx, float* y, int64_t ldy) {
  pointwise_tile_body<16, 8, 3>(K, rows, cols, w, bias, x, ldx, y, ldy);
}
#endif

#ifdef MILKIT_VMATH_AVX2
#define MILKIT_DW_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512vl")))

/// NP output pixels of one row of 16 channels (one per lane) from the channel-interleaved padded
/// input `in` (its first tap; rows `row` floats apart, pixels S * 16 apart), KH x KW taps of
/// `wb` (16 channels per tap) summed in (kh, kw) order from the bias, as the per-plane bodies do;
/// out[NP..15] zero. The sums are written as theirs (acc += x * w, which the compiler contracts
/// to one FMA when it optimizes, and not in an unoptimized build), so the bits stay theirs.
template <int NP, int S>
MILKIT_DW_TARGET inline __attribute__((always_inline)) void dw_cblock_pixels(
    const float* in, int64_t row, int64_t KH, int64_t KW, const float* wb, __m512 b,
    __m512 out[16]) {
  __m512 acc[NP];
#pragma GCC unroll 16
  for (int i = 0; i < NP; ++i) acc[i] = b;
  for (int64_t kh = 0; kh < KH; ++kh) {
    const float* r = in + kh * row;
    for (int64_t kw = 0; kw < KW; ++kw) {
      const __m512 wv = _mm512_loadu_ps(wb + (kh * KW + kw) * 16);
      const float* q = r + kw * 16;
#pragma GCC unroll 16
      for (int i = 0; i < NP; ++i) acc[i] += _mm512_loadu_ps(q + i * S * 16) * wv;
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) out[i] = i < NP ? acc[i] : _mm512_setzero_ps();
}

template <int S>
MILKIT_DW_TARGET void dw_cblock_run(int np, const float* in, int64_t row, int64_t KH, int64_t KW,
                                    const float* wb, __m512 b, __m512 out[16]) {
  switch (np) {
#define MILKIT_DW_CASE(n) \
  case n:                 \
    return dw_cblock_pixels<n, S>(in, row, KH, KW, wb, b, out);
    MILKIT_DW_CASE(1)
    MILKIT_DW_CASE(2)
    MILKIT_DW_CASE(3)
    MILKIT_DW_CASE(4)
    MILKIT_DW_CASE(5)
    MILKIT_DW_CASE(6)
    MILKIT_DW_CASE(7)
    MILKIT_DW_CASE(8)
    MILKIT_DW_CASE(9)
    MILKIT_DW_CASE(10)
    MILKIT_DW_CASE(11)
    MILKIT_DW_CASE(12)
    MILKIT_DW_CASE(13)
    MILKIT_DW_CASE(14)
    MILKIT_DW_CASE(15)
    default:
      return dw_cblock_pixels<16, S>(in, row, KH, KW, wb, b, out);
#undef MILKIT_DW_CASE
  }
}

/// The channel-blocked padded input of a depthwise conv: rows and columns of padded pixels,
/// 16 channels each.
struct DwBlocked {
  int64_t rows = 0, cols = 0;
  size_t floats() const { return static_cast<size_t>(rows * cols * 16); }
};

DwBlocked dw_blocked_layout(const Conv2dShape& s) {
  return {(s.OH - 1) * s.sh + s.KH, (s.OW - 1) * s.sw + s.KW};
}

/// Channels c0 .. c0 + 15 of one image (x, y at the image): the input transposed 16 x 16 in
/// registers into `pb` (zero-padded, laid out [row][col][channel]; only input positions are
/// written, so the padding written zero once stays zero), the weights into wb [tap][channel],
/// then each output row in runs of up to 16 pixels, every FMA a vector of 16 channels, and the
/// results transposed back into the 16 output planes.
MILKIT_DW_TARGET void dw_cblock_avx512(const Conv2dShape& s, const DwBlocked& L, const float* x,
                                       const float* w, const float* bias, float* y, int64_t c0,
                                       float* pb, float* wb) {
  const int64_t kp = s.KH * s.KW, ip = s.IH * s.IW, op = s.OH * s.OW;
  for (int64_t t = 0; t < kp; ++t)
    for (int64_t c = 0; c < 16; ++c) wb[t * 16 + c] = w[(c0 + c) * kp + t];
  for (int64_t h = 0; h < s.IH; ++h) {
    const int64_t r = h + s.ph;
    if (r < 0 || r >= L.rows) continue;
    for (int64_t w0 = 0; w0 < s.IW; w0 += 16) {
      const int64_t n = std::min<int64_t>(16, s.IW - w0);
      const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
      __m512 v[16];
      for (int64_t c = 0; c < 16; ++c)
        v[c] = _mm512_maskz_loadu_ps(m, x + (c0 + c) * ip + h * s.IW + w0);
      transpose16(v);
      for (int64_t j = 0; j < n; ++j) {
        const int64_t col = w0 + j + s.pw;
        if (col >= 0 && col < L.cols) _mm512_storeu_ps(pb + (r * L.cols + col) * 16, v[j]);
      }
    }
  }
  const __m512 b = bias ? _mm512_loadu_ps(bias + c0) : _mm512_setzero_ps();
  const int64_t row = L.cols * 16;
  for (int64_t oh = 0; oh < s.OH; ++oh)
    for (int64_t ow = 0; ow < s.OW; ow += 16) {
      const int np = static_cast<int>(std::min<int64_t>(16, s.OW - ow));
      const float* in = pb + (oh * s.sh * L.cols + ow * s.sw) * 16;
      __m512 out[16];
      if (s.sw == 1)
        dw_cblock_run<1>(np, in, row, s.KH, s.KW, wb, b, out);
      else
        dw_cblock_run<2>(np, in, row, s.KH, s.KW, wb, b, out);
      transpose16(out);
      const __mmask16 m = static_cast<__mmask16>((1u << np) - 1);
      for (int64_t c = 0; c < 16; ++c)
        _mm512_mask_storeu_ps(y + (c0 + c) * op + oh * s.OW + ow, m, out[c]);
    }
}
#undef MILKIT_DW_TARGET
#endif

/// Floats of the channel-blocked padded input at most (256 KB, in L2 with the planes it reads and
/// writes): 56x56 planes and smaller with taps up to 7x7.
constexpr size_t kDwBlockedFloats = size_t{1} << 16;

/// Channels of each image the channel-blocked body takes (a multiple of 16), 0 for none: an
/// AVX-512 CPU, one output channel per input channel, stride 1 or 2 both ways, no dilation and
/// planes up to 56x56, where the per-plane bodies spend more on each plane's setup, narrow rows
/// and phase splitting than on its taps. One thread, against the per-plane bodies: 960x7x7 5x5
/// 0.123 -> 0.052 ms, 672x14x14 5x5 stride 2 0.160 -> 0.053, 192x28x28 7x7 0.30 -> 0.18-0.21,
/// 96x56x56 7x7 0.54 -> 0.37-0.43, 72x56x56 3x3 even; 112x112 planes are slower (their padded
/// block leaves L2) and stay per plane.
int64_t dw_blocked_channels(const Conv2dShape& s) {
#ifdef MILKIT_VMATH_AVX2
  if (!vmath::cpu_avx512() || s.Cout != s.Cin || s.dh != 1 || s.dw != 1 || s.sh != s.sw ||
      (s.sh != 1 && s.sh != 2) || dw_blocked_layout(s).floats() > kDwBlockedFloats || s.Cin < 16)
    return 0;
  return s.Cin / 16 * 16;
#else
  (void)s;
  return 0;
#endif
}

}  // namespace

void depthwise_conv2d(const Conv2dShape& s, const float* x, const float* w, const float* bias,
                      float* y, const std::function<void(float*, int64_t)>& done) {
  if (s.N == 0 || s.Cout == 0 || s.OH <= 0 || s.OW <= 0) return;
  const Padded p = padded_layout(s);
  const int64_t mult = s.Cout / s.Cin, kp = s.KH * s.KW, op = s.OH * s.OW, ip = s.IH * s.IW;
  std::vector<int64_t> off(static_cast<size_t>(s.KW));
  for (int64_t kw = 0; kw < s.KW; ++kw) off[kw] = (kw * s.dw) % s.sw * p.phase + (kw * s.dw) / s.sw;
  DwPlane plane_fn = dw_plane_base;
#ifdef MILKIT_VMATH_AVX2
  // rows narrower than 16 columns take the 8-lane body: 960x7x7 5x5 0.13 against 0.31 ms,
  // 480x14x14 3x3 0.08 against 0.11 ms with 16 lanes (Zen4, one thread); the same sums
  if (vmath::cpu_avx512() && s.OW >= 16)
    plane_fn = dw_plane_avx512;
  else if (vmath::cpu_avx2_fma())
    plane_fn = dw_plane_avx2;
#endif
  const int64_t work = std::max<int64_t>(1, op * kp + p.phase * s.sw);
  const int64_t blocked = dw_blocked_channels(s);
#ifdef MILKIT_VMATH_AVX2
  if (blocked > 0) {
    const DwBlocked L = dw_blocked_layout(s);
    const int64_t groups = blocked / 16;
    parallel_for(s.N * groups, std::max<int64_t>(1, 32768 / (16 * work)),
                 [&](int64_t b, int64_t e) {
                   std::vector<float> pb(L.floats()),
                       wb(static_cast<size_t>(16 * kp));  // zeros: the padding
                   for (int64_t g = b; g < e; ++g) {
                     const int64_t n = g / groups, c0 = g % groups * 16;
                     dw_cblock_avx512(s, L, x + n * s.Cin * ip, w, bias, y + n * s.Cout * op, c0,
                                      pb.data(), wb.data());
                     if (done) done(y + (n * s.Cout + c0) * op, 16 * op);
                   }
                 });
  }
#endif
  // the other planes (all of them, or the channels past the last block of 16) one by one
  const int64_t rest = s.Cout - blocked;
  if (rest == 0) return;
  parallel_for(s.N * rest, std::max<int64_t>(1, 32768 / work), [&](int64_t b, int64_t e) {
    std::vector<float> buf(static_cast<size_t>(p.phase * s.sw));  // zeros: the padding
    int64_t filled = -1;  // the input plane (n * Cin + ci) in buf
    for (int64_t q = b; q < e; ++q) {
      const int64_t n = q / rest, co = blocked + q % rest, pl = n * s.Cout + co;
      const int64_t in = n * s.Cin + co / mult;
      plane_fn(s, p, x + in * ip, in != filled, buf.data(), off.data(), w + co * kp,
               bias ? bias[co] : 0.0f, y + pl * op);
      if (done) done(y + pl * op, op);
      filled = in;
    }
  });
}

bool small_cin_conv2d_fits(const Conv2dShape& s) {
  return s.Cin >= 1 && s.Cin <= 4 && s.Cin * s.KH * s.KW <= 160 && s.KH * s.KW > 1;
}

void small_cin_conv2d(const Conv2dShape& s, const float* x, const float* w, const float* bias,
                      float* y) {
  if (s.N == 0 || s.Cout == 0 || s.OH <= 0 || s.OW <= 0) return;
  const Padded p = stem_layout(s);
  std::vector<int64_t> off(static_cast<size_t>(s.KW));
  for (int64_t kw = 0; kw < s.KW; ++kw) off[kw] = (kw * s.dw) % s.sw * p.phase + (kw * s.dw) / s.sw;
  StemBand band_fn = stem_band_base;
#ifdef MILKIT_VMATH_AVX2
  if (vmath::cpu_avx512())
    band_fn = stem_band_avx512;
  else if (vmath::cpu_avx2_fma())
    band_fn = stem_band_avx2;
#endif
  const int64_t bands = (s.OH + kStemBand - 1) / kStemBand;
  const int64_t ip = s.Cin * s.IH * s.IW, op = s.Cout * s.OH * s.OW;
  parallel_for(s.N * bands, 1, [&](int64_t b, int64_t e) {
    std::vector<float> buf(
        static_cast<size_t>(p.phase * s.sw * s.Cin));  // zeros: the padding columns
    for (int64_t t = b; t < e; ++t) {
      const int64_t n = t / bands, oh0 = t % bands * kStemBand;
      band_fn(s, p, x + n * ip, buf.data(), off.data(), w, bias, y + n * op, oh0,
              std::min(s.OH, oh0 + kStemBand));
    }
  });
}

void pointwise_tile(int64_t K, int64_t rows, int64_t cols, const float* w, const float* bias,
                    const float* x, int64_t ldx, float* y, int64_t ldy) {
  static const PointwiseTile fn = [] {
#ifdef MILKIT_VMATH_AVX2
    if (vmath::cpu_avx512()) return &pointwise_tile_avx512;
    if (vmath::cpu_avx2_fma()) return &pointwise_tile_avx2;
#endif
    return &pointwise_tile_base;
  }();
  if (rows > 0 && cols > 0) fn(K, rows, cols, w, bias, x, ldx, y, ldy);
}

}  // namespace milkit::exec
