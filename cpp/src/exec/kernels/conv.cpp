// Kernels of the conv ops: conv, conv_transpose, conv_quantized (1 to 3 spatial dims, all computed
// as 3-d with leading unit dims). conv is im2col + GEMM (sgemm below) per image and group: with
// enough output rows each thread makes the columns of its own bands of rows and multiplies them
// (the columns still in its cache, one hand-over per conv), else columns are made in bands of at
// most 3 MB and the GEMM is split across threads; a 1x1, stride-1, unpadded conv multiplies the
// NCHW input directly (up to 32 input channels in tiles by conv_direct.cpp's pointwise kernel, the
// fused chain per tile; on a 1x1 image as matrix-vector products); one input channel per group -
// depthwise - is a direct loop across threads
// (conv_direct.cpp for 1-d and 2-d). Elementwise ops the plan fused into the conv (FusedChain) are
// applied to its output in place. A weight the plan keeps packed (an fp16 weight read in place, a
// compressed one) is never widened whole: up to 256K elements it is decoded for the call, larger
// ones a chunk of output channels at a time into a per-thread buffer (per band of rows when
// bands have 256 pixels or more, else once per image across the threads). conv_transpose is one
// GEMM per image, group and band of input rows into columns, then col2im. conv_quantized
// dequantizes its uint8 weight ("linear": weight * scale + bias, per output channel or scalar) and
// runs conv. fp16 arrives as fp32 (float_compute).
//
// Padding: "same" pads total = max(0, (ceil(n / s) - 1) * s + ek - n) with total / 2 before
// (the extra element after, coremltools' BOTTOM_RIGHT_HEAVY), "same_lower" puts the extra one
// before; "custom" reads pad[2 i], pad[2 i + 1]. conv_transpose crops its full output
// ((n - 1) * s + ek) by pad[2 i] before for "custom", by max(0, (n - 1) * s + ek - out) / 2 for
// "same" (TensorFlow's conv2d_transpose), by nothing for "valid"; an output_shape larger than
// the cropped output extends it at the end (positions no input reaches hold the bias), which
// is torch's output_padding.

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "../dispatch.h"
#include "../fused_chain.h"
#include "../packed_weight.h"
#include "conv_direct.h"
#include "conv_winograd.h"
#include "gemm.h"
#include "gemv.h"
#include "kernels.h"
#include "milkit/exec/threads.h"
#include "milkit/ops/conv_util.h"
#include "milkit/types/datatype.h"
#include "sgemm.h"

namespace milkit {

namespace {

using exec::floor_div;

/// Output indices o in [lo, hi) of a dim of size `out` whose input index o * s + off falls in
/// [0, n).
void valid_range(int64_t out, int64_t n, int64_t s, int64_t off, int64_t& lo, int64_t& hi) {
  lo = std::clamp<int64_t>(-floor_div(off, s), 0, out);  // ceil(-off / s)
  hi = std::clamp<int64_t>(floor_div(n - 1 - off, s) + 1, lo, out);
}

/// Row-major C[M, N] (+)= op(A)[M, K] * B[K, N]: milkit's GEMM (B's rows packed into panels,
/// A's weights read in place) unless A is transposed or it is off, else OpenBLAS; beta 0 or 1.
/// Inside a parallel loop it runs on its caller's thread. `narrow_dots`: see exec::GemmRhs.
void sgemm(bool ta, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
           int64_t ldb, float beta, float* C, int64_t ldc, bool narrow_dots = true) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (beta == 0.0f)
      for (int64_t m = 0; m < M; ++m) std::fill(C + m * ldc, C + m * ldc + N, 0.0f);
    return;
  }
  if (!ta && exec::sgemm_panels_enabled()) {
    exec::GemmRhs rhs;
    rhs.f32 = B;
    rhs.nk = false;
    rhs.ld = std::max<int64_t>(ldb, N);
    rhs.narrow_dots = narrow_dots;
    exec::sgemm_panels(M, N, K, A, std::max<int64_t>(lda, K), rhs, nullptr, beta != 0.0f, C, ldc);
    return;
  }
  exec::parallel_sgemm(ta, false, M, N, K, A, std::max<int64_t>(lda, 1), B, std::max<int64_t>(ldb, 1), beta, C,
                       std::max<int64_t>(ldc, 1));
}

/// A conv's geometry, spatial dims right-aligned into 3 (leading dims of size 1).
struct Geom {
  int nd = 0;
  int64_t N = 0, Cin = 0, Cout = 0, G = 1;
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, pb[3] = {0, 0, 0};
  int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  int64_t out_plane() const { return out[0] * out[1] * out[2]; }
  int64_t kprod() const { return k[0] * k[1] * k[2]; }
};

/// Floats of one decoded chunk of a packed weight (a chunk is whole output channels).
constexpr int64_t kChunkFloats = 1 << 18;

/// Output pixels up to which a GEMM reads its weight's rows block by block for all the column
/// panels (exec::sgemm_rows_outer): a packed weight larger than a chunk decoded there rather than
/// by chunks, a dense one read from memory once rather than once per 48-column panel.
constexpr int64_t kRowsOuterPixels = 256;

/// Output pixels of a band below which a packed weight is not decoded once per band (decoding
/// costs about what 4 multiply-adds per element do, per pixel of the band).
constexpr int64_t kBandDecodePixels = 256;

/// A conv's weight [C_out, C_in / G, *k] as fp32 rows of kc elements: a dense buffer, or a
/// packed weight (an fp16 weight read in place, a compressed one) decoded a chunk of output
/// channels at a time into a per-thread buffer, so no fp32 copy of the whole weight is made.
struct ConvWeight {
  const float* dense = nullptr;
  const PackedWeight* packed = nullptr;
  std::optional<exec::PackedRows> packed_rows;  ///< packed's rows of kc elements (run_conv)
  int64_t kc = 0;
  /// Rows [r0, r0 + n) as fp32: in place, or decoded into this thread's buffer, across the pool
  /// (inside a parallel task, where kernels decode their chunks, on the task's thread). Decoded
  /// by the calling thread alone, a whole weight read by a parallel kernel was a serial part of
  /// every fp16 conv, and fp16 programs ran slower than fp32 ones on two threads.
  const float* rows(int64_t r0, int64_t n) const {
    if (dense) return dense + r0 * kc;
    thread_local std::vector<float> buf;
    if (static_cast<int64_t>(buf.size()) < n * kc) buf.resize(static_cast<size_t>(n * kc));
    float* out = buf.data();
    parallel_for(
        n, std::max<int64_t>(1, 16384 / std::max<int64_t>(kc, 1)),
        [&](int64_t b, int64_t e) { packed_rows->decode(r0 + b, e - b, 0, kc, out + b * kc); });
    return out;
  }
  /// Output channels per chunk out of `cout`: all of them for a dense weight.
  int64_t chunk(int64_t cout) const {
    if (dense) return cout;
    return std::clamp<int64_t>(kChunkFloats / std::max<int64_t>(kc, 1), 1,
                               std::max<int64_t>(cout, 1));
  }
};

/// A 3-vector from a parameter list of nd values (aligned right, padded with `fill`).
void spatial_param(KernelCtx& k, const char* name, int nd, int64_t fill, int64_t* dst, bool positive) {
  std::vector<int64_t> v = k.has(name) ? k.ints(name) : std::vector<int64_t>(static_cast<size_t>(nd), fill);
  if (static_cast<int>(v.size()) != nd)
    k.fail(std::string(name) + " has " + std::to_string(v.size()) + " values for " + std::to_string(nd) +
           " spatial dims");
  for (int i = 0; i < nd; ++i) {
    if (positive && v[i] <= 0) k.fail(std::string(name) + " must be positive, got " + std::to_string(v[i]));
    dst[3 - nd + i] = v[i];
  }
}

/// The custom pad list (2 values per spatial dim, non-negative).
std::vector<int64_t> custom_pad(KernelCtx& k, int nd) {
  std::vector<int64_t> pad =
      k.has("pad") ? k.ints("pad") : std::vector<int64_t>(2 * static_cast<size_t>(nd), 0);
  if (static_cast<int>(pad.size()) != 2 * nd)
    k.fail("pad has " + std::to_string(pad.size()) + " values, expected " + std::to_string(2 * nd));
  for (int64_t p : pad)
    if (p < 0) k.fail("pad values must be non-negative, got " + std::to_string(p));
  return pad;
}

/// conv / conv_quantized geometry from x, the weight shape and the parameters.
Geom conv_geom(KernelCtx& k, const Tensor& x, const std::vector<int64_t>& ws) {
  Geom g;
  if (x.rank() < 3 || x.rank() > 5) k.fail("x must have rank 3 to 5, got " + x.describe());
  g.nd = x.rank() - 2;
  if (static_cast<int>(ws.size()) != x.rank())
    k.fail("weight " + shape_str(ws) + " must have the rank of x " + x.describe());
  g.N = x.dim(0);
  g.Cin = x.dim(1);
  g.Cout = ws[0];
  g.G = k.int_or("groups", 1);
  if (g.G <= 0) k.fail("groups must be positive, got " + std::to_string(g.G));
  if (g.Cin % g.G != 0 || g.Cin / g.G != ws[1] || g.Cout % g.G != 0)
    k.fail("x " + x.describe() + " with groups " + std::to_string(g.G) + " does not match weight " +
           shape_str(ws) + " (C_in / groups must equal weight[1], C_out must divide by groups)");
  const int nd = g.nd;
  for (int i = 0; i < nd; ++i) {
    g.in[3 - nd + i] = x.dim(2 + i);
    g.k[3 - nd + i] = ws[2 + i];
  }
  spatial_param(k, "strides", nd, 1, g.s, true);
  spatial_param(k, "dilations", nd, 1, g.d, true);
  std::string pad_type = k.str_or("pad_type", "valid");
  std::vector<int64_t> pad;
  if (pad_type == "custom")
    pad = custom_pad(k, nd);
  else if (pad_type != "valid" && pad_type != "same" && pad_type != "same_lower")
    k.fail("unknown pad_type \"" + pad_type + "\"");
  for (int i = 0; i < nd; ++i) {
    int j = 3 - nd + i;
    int64_t ek = (g.k[j] - 1) * g.d[j] + 1, n = g.in[j], s = g.s[j], total = 0;
    if (pad_type == "custom") {
      g.pb[j] = pad[2 * i];
      total = pad[2 * i] + pad[2 * i + 1];
    } else if (pad_type != "valid") {
      total = ops::same_total_pad(n, ek, s);
      g.pb[j] = ops::same_pad_before(pad_type, total);
    }
    g.out[j] = ops::spatial_out_size(n, total, ek, s, false);
    if (g.out[j] <= 0)
      k.fail("spatial dim " + std::to_string(i) + " has invalid output size " + std::to_string(g.out[j]) +
             ": the effective kernel size " + std::to_string(ek) + " exceeds the padded input size " +
             std::to_string(n + total));
  }
  return g;
}

/// Rows [rb, re) of the columns for output rows [r0, r1) (row r = od * OH + oh) of one image's
/// group: col[(c, kd, kh, kw), (r - r0) * OW + ow] = x[c, id, ih, iw] (0 in the padding).
void im2col_rows(const Geom& g, const float* x, int64_t r0, int64_t r1, int64_t rb, int64_t re,
                 float* col) {
  const int64_t OH = g.out[1], OW = g.out[2], IH = g.in[1], IW = g.in[2], ID = g.in[0];
  const int64_t kp = g.kprod(), plane = g.in_plane(), pc = (r1 - r0) * OW;
  for (int64_t row = rb; row < re; ++row) {
    const int64_t c = row / kp, kk = row % kp;
    const int64_t kd = kk / (g.k[1] * g.k[2]), kh = (kk / g.k[2]) % g.k[1], kw = kk % g.k[2];
    const int64_t offw = kw * g.d[2] - g.pb[2];
    int64_t lo, hi;
    valid_range(OW, IW, g.s[2], offw, lo, hi);
    const float* xc = x + c * plane;
    float* dst = col + row * pc;
    for (int64_t r = r0; r < r1; ++r, dst += OW) {
      const int64_t od = r / OH, oh = r % OH;
      const int64_t id = od * g.s[0] - g.pb[0] + kd * g.d[0],
                    ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
      if (id < 0 || id >= ID || ih < 0 || ih >= IH) {
        std::fill(dst, dst + OW, 0.0f);
        continue;
      }
      const float* src = xc + (id * IH + ih) * IW;
      std::fill(dst, dst + lo, 0.0f);
      if (g.s[2] == 1) {
        if (hi > lo) std::copy(src + lo + offw, src + hi + offw, dst + lo);
      } else {
        const int64_t sw = g.s[2];
        for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = src[ow * sw + offw];
      }
      std::fill(dst + hi, dst + OW, 0.0f);
    }
  }
}

/// The columns for output rows [r0, r1) of one image's group, made across threads.
void im2col(const Geom& g, const float* x, int64_t cin_g, int64_t r0, int64_t r1, float* col) {
  const int64_t pc = (r1 - r0) * g.out[2];
  parallel_for(cin_g * g.kprod(), std::max<int64_t>(1, 16384 / std::max<int64_t>(pc, 1)),
               [&](int64_t rb, int64_t re) { im2col_rows(g, x, r0, r1, rb, re, col); });
}

/// dst[ow] += sum_kw w[kw] * src[ow * S + kw * dil + off] for ow in [lo, hi), where every tap is
/// inside the input row (S = 0: the runtime stride `sw`). KW > 0 fixes the kernel width so the
/// taps unroll and the ow loop vectorizes.
template <int KW, int S>
void dw_interior(float* dst, const float* src, const float* w, int64_t kw_n, int64_t sw, int64_t dil,
                 int64_t off, int64_t lo, int64_t hi) {
  const int64_t n = KW > 0 ? KW : kw_n, st = S > 0 ? S : sw;
  for (int64_t ow = lo; ow < hi; ++ow) {
    float acc = dst[ow];
    const int64_t base = ow * st + off;
    for (int64_t kw = 0; kw < n; ++kw) acc += w[kw] * src[base + kw * dil];
    dst[ow] = acc;
  }
}

/// One output row of a depthwise conv from one input row: the interior with fused taps, the
/// borders tap by tap.
void dw_row(float* dst, const float* src, const float* w, int64_t KW, int64_t sw, int64_t dil, int64_t off,
            int64_t OW, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi, int64_t ilo,
            int64_t ihi) {
  for (int64_t kw = 0; kw < KW; ++kw) {
    const float wv = w[kw];
    const int64_t o = kw * dil + off;
    for (int64_t ow = lo[kw]; ow < std::min(hi[kw], ilo); ++ow) dst[ow] += wv * src[ow * sw + o];
    for (int64_t ow = std::max(lo[kw], ihi); ow < hi[kw]; ++ow) dst[ow] += wv * src[ow * sw + o];
  }
  if (ihi <= ilo) return;
  if (KW == 3 && sw == 1)
    dw_interior<3, 1>(dst, src, w, KW, sw, dil, off, ilo, ihi);
  else if (KW == 3 && sw == 2)
    dw_interior<3, 2>(dst, src, w, KW, sw, dil, off, ilo, ihi);
  else if (KW == 5 && sw == 1)
    dw_interior<5, 1>(dst, src, w, KW, sw, dil, off, ilo, ihi);
  else if (KW == 5 && sw == 2)
    dw_interior<5, 2>(dst, src, w, KW, sw, dil, off, ilo, ihi);
  else if (KW == 7 && sw == 1)
    dw_interior<7, 1>(dst, src, w, KW, sw, dil, off, ilo, ihi);
  else if (sw == 1)
    dw_interior<0, 1>(dst, src, w, KW, sw, dil, off, ilo, ihi);
  else
    dw_interior<0, 0>(dst, src, w, KW, sw, dil, off, ilo, ihi);
}

/// Direct conv of groups with one input channel each (depthwise): output channel co reads
/// input channel co / (C_out / groups).
void conv_depthwise(const Geom& g, const float* x, const float* w, const float* bias, float* y) {
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2], ID = g.in[0], IH = g.in[1], IW = g.in[2];
  const int64_t mult = g.Cout / g.G, kp = g.kprod(), op = g.out_plane(), ip = g.in_plane();
  const int64_t KW = g.k[2], sw = g.s[2], dil = g.d[2], off = -g.pb[2];
  // per tap, the outputs whose input is inside the row; the interior has every tap inside
  std::vector<int64_t> lo(KW), hi(KW);
  int64_t ilo = 0, ihi = OW;
  for (int64_t kw = 0; kw < KW; ++kw) {
    valid_range(OW, IW, sw, kw * dil + off, lo[kw], hi[kw]);
    ilo = std::max(ilo, lo[kw]);
    ihi = std::min(ihi, hi[kw]);
  }
  ihi = std::max(ihi, ilo);  // no interior: the borders [lo, ilo) and [ilo, hi) cover each tap once
  // output plane p = (n, co)
  auto plane = [&](int64_t p) {
    const int64_t n = p / g.Cout, co = p % g.Cout;
    const float* xin = x + (n * g.Cin + co / mult) * ip;
    const float* wk = w + co * kp;
    const float bv = bias ? bias[co] : 0.0f;
    for (int64_t od = 0; od < OD; ++od)
      for (int64_t oh = 0; oh < OH; ++oh) {
        float* dst = y + p * op + (od * OH + oh) * OW;
        std::fill(dst, dst + OW, bv);
        for (int64_t kd = 0; kd < g.k[0]; ++kd) {
          const int64_t id = od * g.s[0] - g.pb[0] + kd * g.d[0];
          if (id < 0 || id >= ID) continue;
          for (int64_t kh = 0; kh < g.k[1]; ++kh) {
            const int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
            if (ih < 0 || ih >= IH) continue;
            dw_row(dst, xin + (id * IH + ih) * IW, wk + (kd * g.k[1] + kh) * KW, KW, sw, dil, off, OW, lo, hi,
                   ilo, ihi);
          }
        }
      }
  };
  parallel_for(g.N * g.Cout, std::max<int64_t>(1, 8192 / std::max<int64_t>(op * kp, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t p = b; p < e; ++p) plane(p);
               });
}

/// The 2-d geometry of a conv whose depth dims are all 1.
exec::Conv2dShape shape_2d(const Geom& g) {
  exec::Conv2dShape s;
  s.N = g.N;
  s.Cin = g.Cin;
  s.Cout = g.Cout;
  s.IH = g.in[1];
  s.IW = g.in[2];
  s.OH = g.out[1];
  s.OW = g.out[2];
  s.KH = g.k[1];
  s.KW = g.k[2];
  s.sh = g.s[1];
  s.sw = g.s[2];
  s.dh = g.d[1];
  s.dw = g.d[2];
  s.ph = g.pb[1];
  s.pw = g.pb[2];
  return s;
}

/// Columns of at most this many floats per GEMM (larger images are done in bands of rows).
constexpr int64_t kColBudget = 3 << 18;

/// Columns of at most this many floats per thread's band when each thread makes its own.
constexpr int64_t kThreadCols = 1 << 18;

/// Whether some thread count takes conv g by bands (conv_thread_bands): a condition on the shape
/// alone, so that the other paths can sum its columns as the bands would (GemmRhs::narrow_dots).
bool may_take_bands(const Geom& g) {
  const int64_t kc = g.Cin / g.G * g.kprod(), rows = g.out[0] * g.out[1];
  return kc > 0 && g.out_plane() >= g.Cout / g.G && rows >= 4;
}

/// The im2col convs whose output has at least as many columns per group as rows and at least two
/// rows per thread: each thread takes whole bands of output rows, making their columns in its own
/// buffer (still in cache) and multiplying them single-threaded; false for the others.
/// A packed weight is decoded once per band (by chunks), so bands of few pixels are left to the
/// path that decodes each chunk once per image.
bool conv_thread_bands(const Geom& g, const float* x, const ConvWeight& w, float beta, float* y) {
  const int64_t op = g.out_plane(), ip = g.in_plane(), cin_g = g.Cin / g.G, cout_g = g.Cout / g.G;
  const int64_t kc = cin_g * g.kprod(), rows = g.out[0] * g.out[1], OW = g.out[2];
  const int t = num_threads();
  if (t <= 1 || !may_take_bands(g) || rows < 2 * t) return false;
  // at least two bands per thread, a multiple of the threads, each within the budget
  int64_t nb = std::max<int64_t>(2 * t, (kc * op + kThreadCols - 1) / kThreadCols);
  nb = std::min(rows, (nb + t - 1) / t * t);
  const int64_t band = (rows + nb - 1) / nb;
  nb = (rows + band - 1) / band;
  if (w.packed && band * OW < kBandDecodePixels) return false;
  const int64_t ch = w.chunk(cout_g);
  parallel_for(g.N * g.G * nb, 1, [&](int64_t b, int64_t e) {
    // this thread's column buffer (scratch slot 0), kept between convs: made and freed per
    // conv, buffers of a megabyte or more would leave the allocator's heap grown after each run
    float* col = exec::conv_scratch(0, kc * band * OW);
    for (int64_t task = b; task < e; ++task) {
      const int64_t n = task / (g.G * nb), gr = task / nb % g.G, r0 = task % nb * band;
      const int64_t r1 = std::min(rows, r0 + band), pc = (r1 - r0) * OW;
      im2col_rows(g, x + (n * g.Cin + gr * cin_g) * ip, r0, r1, 0, kc, col);
      for (int64_t c0 = 0; c0 < cout_g; c0 += ch) {
        const int64_t nc = std::min(ch, cout_g - c0);
        // bands whose width depends on the thread count: every column summed in k order
        sgemm(false, nc, pc, kc, w.rows(gr * cout_g + c0, nc), kc, col, pc, beta,
              y + (n * g.Cout + gr * cout_g + c0) * op + r0 * OW, op, false);
      }
    }
  });
  return true;
}

/// Whether a group's GEMM over `pc` output pixels reads the weight's rows once for all the
/// column panels (exec::sgemm_rows_outer).
bool rows_outer_suits(int64_t pc) { return pc <= kRowsOuterPixels && exec::sgemm_panels_enabled(); }

/// C[cout_g, pc] (+)= lhs * col[kc, pc] by exec::sgemm_rows_outer (C holds the bias when beta
/// is 1). `dots`: see exec::GemmRhs::narrow_dots.
void rows_outer_gemm(const exec::GemmLhs& lhs, int64_t cout_g, int64_t pc, int64_t kc,
                     const float* col, int64_t ldcol, float beta, float* c, int64_t ldc,
                     bool dots) {
  exec::GemmRhs rhs;
  rhs.f32 = col;
  rhs.nk = false;
  rhs.ld = ldcol;
  rhs.narrow_dots = dots;
  exec::sgemm_rows_outer(cout_g, pc, kc, lhs, rhs, beta != 0.0f, c, ldc);
}

/// C[cout_g, pc] (+)= w[group gr] * col[kc, pc] for a packed weight: a group within one chunk
/// decoded whole and multiplied as a dense one (the same products, so the same bits); a larger
/// one by chunks of output channels across the threads, each decoded once into its thread's
/// buffer and multiplied single-threaded (kc > 0 there: an empty weight is decoded whole).
void packed_group_gemm(const ConvWeight& w, int64_t gr, int64_t cout_g, int64_t pc,
                       const float* col, int64_t ldcol, float beta, float* c, int64_t ldc,
                       bool dots) {
  const int64_t kc = w.kc;
  if (w.chunk(cout_g) == cout_g) {
    sgemm(false, cout_g, pc, kc, w.rows(gr * cout_g, cout_g), kc, col, ldcol, beta, c, ldc, dots);
    return;
  }
  if (rows_outer_suits(pc)) {
    // few pixels: the GEMM decodes each block of 8 rows once, while in L1, for all the column
    // panels, instead of chunks of a megabyte that leave L2, each multiplied against the
    // columns packed again (ResNet-18's fp16 3x3 convs at 7x7)
    exec::GemmLhs lhs;
    lhs.packed = &*w.packed_rows;
    lhs.row0 = gr * cout_g;
    rows_outer_gemm(lhs, cout_g, pc, kc, col, ldcol, beta, c, ldc, dots);
    return;
  }
  const int t = num_threads();
  // chunks within the budget, and at least one per thread when there are rows enough
  const int64_t ch = std::min(w.chunk(cout_g), std::max<int64_t>(8, (cout_g + t - 1) / t));
  const int64_t chunks = (cout_g + ch - 1) / ch;
  parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t q = b; q < e; ++q) {
      const int64_t c0 = q * ch, nc = std::min(ch, cout_g - c0);
      sgemm(false, nc, pc, kc, w.rows(gr * cout_g + c0, nc), kc, col, ldcol, beta, c + c0 * ldc,
            ldc, dots);
    }
  });
}

/// C[cout_g, pc] (+)= w[group gr] * col[kc, pc]: one parallel GEMM over a dense weight, chunks
/// over a packed one. `dots`: see exec::GemmRhs::narrow_dots.
void group_gemm(const ConvWeight& w, int64_t gr, int64_t cout_g, int64_t pc, const float* col,
                int64_t ldcol, float beta, float* c, int64_t ldc, bool dots = true) {
  if (w.packed) {
    packed_group_gemm(w, gr, cout_g, pc, col, ldcol, beta, c, ldc, dots);
  } else if (rows_outer_suits(pc)) {
    // few pixels: each block of 8 weight rows read from memory once for all the column panels
    exec::GemmLhs lhs;
    lhs.f32 = w.dense + gr * cout_g * w.kc;
    lhs.ld = w.kc;
    rows_outer_gemm(lhs, cout_g, pc, w.kc, col, ldcol, beta, c, ldc, dots);
  } else {
    sgemm(false, cout_g, pc, w.kc, w.dense + gr * cout_g * w.kc, w.kc, col, ldcol, beta, c, ldc,
          dots);
  }
}

/// Tiles of a pointwise conv hold at most this many floats of output (so that a tile stays in L2
/// between its products and its fused chain) and about this many multiply-adds.
constexpr int64_t kPointwiseTile = 1 << 15;
constexpr int64_t kPointwiseMacs = 1 << 19;
/// Planes of up to this many pixels are not split (a tile's rows then lie together).
constexpr int64_t kPointwiseRowPixels = 4096;

/// The fused chain over a tile of `rows` rows of `cols` values, rows `ld` apart: one run when the
/// rows are whole (a chain's per-call cost is worth more than a 7x7 plane's 49 values).
void chain_tile(const ChainCall& ch, float* p, int64_t rows, int64_t cols, int64_t ld) {
  if (cols == ld) {
    ch.here(p, rows * cols);
    return;
  }
  for (int64_t r = 0; r < rows; ++r) ch.here(p + r * ld, cols);
}

/// Whether a 1x1, stride-1, unpadded conv with `cin_g` input channels per group goes to
/// `pointwise_conv` (up to exec::kPointwiseSmallK; MILKIT_POINTWISE=blas sends every one to
/// BLAS, read once per process, for measuring).
bool pointwise_small_k(int64_t cin_g) {
  static const int64_t small_k = [] {
    const char* e = std::getenv("MILKIT_POINTWISE");
    return e && std::string(e) == "blas" ? int64_t{0} : exec::kPointwiseSmallK;
  }();
  return cin_g > 0 && cin_g <= small_k;
}

/// A 1x1, stride-1, unpadded conv of few input channels over a dense weight, y[n, group] =
/// bias + w[group] @ x[n, group] on the NCHW layout, in tiles of output channels x pixels across
/// the threads, each computed by exec::pointwise_tile (BLAS's packing costs more than the
/// products at this depth) and run through the fused chain `ch` while it is in cache. Tiles
/// split the channels (by multiples of 16) and, in planes of more than kPointwiseRowPixels,
/// first the pixels (runs of 64 or more, a multiple of 16); they depend on the shape only, never on
/// the thread count, so neither do the bits. (With more input channels, BLAS over the whole output
/// is faster: split into tiles, each GEMM packs its part of the input again.)
void pointwise_conv(const Geom& g, const float* x, const float* w, const float* bias,
                    const ChainCall* ch, float* y) {
  const int64_t op = g.out_plane(), ip = g.in_plane(), cin_g = g.Cin / g.G, cout_g = g.Cout / g.G;
  const int64_t want = std::max<int64_t>(
      {1, (cout_g * op * cin_g + kPointwiseMacs - 1) / kPointwiseMacs,
       (cout_g * op + kPointwiseTile - 1) / kPointwiseTile});
  int64_t ns = op <= kPointwiseRowPixels ? 1 : std::clamp<int64_t>(want, 1, (op + 63) / 64);
  // runs of pixels a multiple of 16: a fused chain's rows then have no tail but the plane's last
  // (a vector loop's tail is scalar: 16>96 at 112x112 with silu 0.88 -> 0.81 ms alone)
  const int64_t S = ns > 1 ? ((op + ns - 1) / ns + 15) / 16 * 16 : op;
  ns = (op + S - 1) / S;
  int64_t nr = std::clamp<int64_t>((want + ns - 1) / ns, 1, (cout_g + 15) / 16);
  const int64_t R = std::max<int64_t>(1, ((cout_g + nr - 1) / nr + 15) / 16 * 16);
  nr = (cout_g + R - 1) / R;
  parallel_for(g.N * g.G * nr * ns, 1, [&](int64_t b, int64_t e) {
    for (int64_t task = b; task < e; ++task) {
      const int64_t sb = task % ns, rb = task / ns % nr, gr = task / (ns * nr) % g.G;
      const int64_t n = task / (ns * nr * g.G);
      const int64_t co0 = rb * R, rows = std::min(R, cout_g - co0);
      const int64_t c0 = sb * S, cols = std::min(S, op - c0);
      const int64_t co = gr * cout_g + co0;
      float* yt = y + (n * g.Cout + co) * op + c0;
      exec::pointwise_tile(cin_g, rows, cols, w + co * cin_g, bias ? bias + co : nullptr,
                           x + (n * g.Cin + gr * cin_g) * ip + c0, ip, yt, op);
      if (ch) chain_tile(*ch, yt, rows, cols, op);
    }
  });
}

/// conv forward on fp32 buffers: x [N, Cin, *in], w [Cout, Cin / G, *k], bias [Cout] or null.
/// A packed weight within one chunk is decoded whole for the call and read as a dense one (the
/// same products, so the same bits as a plan that decompressed it).
/// Returns true when it applied the fused chain `ch` itself (tile by tile, while in cache); the
/// caller applies it to the whole output otherwise.
bool conv_forward(const Geom& g, const float* x, ConvWeight w, const float* bias, float* y,
                  const ChainCall* ch = nullptr) {
  const int64_t op = g.out_plane(), ip = g.in_plane(), kp = g.kprod();
  const int64_t cin_g = g.Cin / g.G, cout_g = g.Cout / g.G, kc = cin_g * kp;
  if (g.N == 0 || g.Cout == 0 || op == 0) return false;
  bool any_bias = false;
  if (bias)
    for (int64_t c = 0; c < g.Cout && !any_bias; ++c) any_bias = bias[c] != 0.0f;
  bool direct = kp == 1;
  for (int j = 0; j < 3; ++j) direct = direct && g.s[j] == 1 && g.pb[j] == 0 && g.out[j] == g.in[j];
  if (direct && op == 1 && cin_g > 0 && g.N <= exec::kGemvRows && (!w.packed || g.G == 1)) {
    // 1x1 images (squeeze-and-excite) of a few inputs: matrix-vector products, each weight row
    // read once for all images, a packed one where it lies (fp16 rows in place)
    if (any_bias)
      for (int64_t n = 0; n < g.N; ++n) std::copy(bias, bias + g.Cout, y + n * g.Cout);
    for (int64_t gr = 0; gr < g.G; ++gr) {
      exec::GemvWeight gw;
      if (w.packed)
        gw.packed = w.packed;
      else
        gw = {w.dense + gr * cout_g * cin_g, cin_g, nullptr};
      exec::gemv_nk(g.N, cout_g, cin_g, x + gr * cin_g, g.Cin, gw, any_bias, y + gr * cout_g,
                    g.Cout);
    }
    return false;
  }
  if (w.packed && (g.Cout * kc <= kChunkFloats || cin_g == 1)) {
    w.dense = w.rows(0, g.Cout);  // this thread's buffer, not read by the paths below again
    w.packed = nullptr;
  }
  if (cin_g == 1 && kc > 0) {
    // depthwise: its weight is small (C_out * kernel), decoded whole for the call
    const float* wp = w.dense;
    if (g.in[0] == 1 && g.k[0] == 1 && g.out[0] == 1 && g.pb[0] == 0) {
      // the fused chain runs on each block of planes as it is finished, while in cache
      std::function<void(float*, int64_t)> done;
      if (ch) done = [ch](float* p, int64_t n) { ch->here(p, n); };
      exec::depthwise_conv2d(shape_2d(g), x, wp, bias, y, done);
      return ch != nullptr;
    }
    conv_depthwise(g, x, wp, bias, y);
    return false;
  }
  if (g.G == 1 && !w.packed && g.in[0] == 1 && g.k[0] == 1 && g.out[0] == 1 && g.pb[0] == 0 &&
      exec::small_cin_conv2d_fits(shape_2d(g))) {
    exec::small_cin_conv2d(shape_2d(g), x, w.dense, bias, y);  // a stem: few input channels
    return false;
  }
  if (g.G == 1 && g.in[0] == 1 && g.k[0] == 1 && g.out[0] == 1 && g.pb[0] == 0) {
    // 3x3 stride 1: Winograd, unless an output is not finite (recomputed below, directly)
    const exec::Conv2dShape s2 = shape_2d(g);
    if (exec::winograd_suits(s2) &&
        exec::winograd_conv3x3(
            s2, x, [&w](int64_t r0, int64_t n) { return w.rows(r0, n); }, bias, y))
      return false;
  }
  if (direct && !w.packed && pointwise_small_k(cin_g)) {
    pointwise_conv(g, x, w.dense, any_bias ? bias : nullptr, ch, y);
    return ch != nullptr;
  }
  if (direct && g.G == 1 && !w.packed) {
    // 1x1 of more input channels over a small image (the input packed whole stays in L2):
    // blocks of output channels across every pixel, starting from their bias, the fused chain
    // applied to each block while it is in cache (one pass over the output instead of three)
    bool taken = true;
    for (int64_t n = 0; n < g.N && taken; ++n) {
      float* yn = y + n * g.Cout * op;
      exec::GemmRhs rhs;
      rhs.f32 = x + n * g.Cin * ip;
      rhs.nk = false;
      rhs.ld = ip;
      exec::RowsDone done;
      if (ch) done = [&](int64_t m0, int64_t m1) { ch->here(yn + m0 * op, (m1 - m0) * op); };
      taken = exec::sgemm_row_blocks(g.Cout, op, kc, w.dense, kc, rhs, any_bias ? bias : nullptr,
                                     yn, op, done);
    }
    if (taken) return ch != nullptr;  // the shape decides: every image or none
  }
  if (any_bias)
    parallel_for(g.N * g.Cout, std::max<int64_t>(1, 65536 / op), [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) std::fill(y + p * op, y + (p + 1) * op, bias[p % g.Cout]);
    });
  const float beta = any_bias ? 1.0f : 0.0f;
  if (direct) {
    // 1x1: y[n, group] = w[group] @ x[n, group] on the NCHW layout
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t gr = 0; gr < g.G; ++gr)
        group_gemm(w, gr, cout_g, op, x + (n * g.Cin + gr * cin_g) * ip, ip, beta,
                   y + (n * g.Cout + gr * cout_g) * op, op);
    return false;
  }
  if (conv_thread_bands(g, x, w, beta, y)) return false;
  const int64_t rows = g.out[0] * g.out[1], OW = g.out[2];
  // a shape that other thread counts take by bands: no narrow panel as dot products here either,
  // so that its columns are summed alike on any number of threads
  const bool dots = !may_take_bands(g);
  const int64_t band = std::clamp<int64_t>(kColBudget / std::max<int64_t>(kc * OW, 1), 1, rows);
  float* col = exec::conv_scratch(0, kc * band * OW);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t gr = 0; gr < g.G; ++gr)
      for (int64_t r0 = 0; r0 < rows; r0 += band) {
        const int64_t r1 = std::min(rows, r0 + band), pc = (r1 - r0) * OW;
        im2col(g, x + (n * g.Cin + gr * cin_g) * ip, cin_g, r0, r1, col);
        group_gemm(w, gr, cout_g, pc, col, pc, beta, y + (n * g.Cout + gr * cout_g) * op + r0 * OW,
                   op, dots);
      }
  return false;
}

/// The float weights, the bias, shape checks shared by conv and conv_quantized, then the conv.
void run_conv(KernelCtx& k, const Tensor& x, const std::vector<int64_t>& ws, ConvWeight w,
              const float* bias) {
  if (x.dtype() != DataType::Float32) k.fail("x must be fp16 or fp32, got " + x.describe());
  Geom g = conv_geom(k, x, ws);
  w.kc = g.Cin / g.G * g.kprod();
  if (w.packed) w.packed_rows.emplace(*w.packed, w.kc);
  std::vector<int64_t> oshape{g.N, g.Cout};
  for (int i = 0; i < g.nd; ++i) oshape.push_back(g.out[3 - g.nd + i]);
  Tensor& out = k.alloc(0, oshape);
  const FusedChain* ch = k.fused();
  if (!ch && k.rounds_output()) {
    // an fp16 output without a chain: rounded by the kernels' tiles while in cache, as a chain
    // of no links would be, instead of by the frame in a pass of its own
    static const FusedChain round_only = [] {
      FusedChain c;
      c.half = true;
      return c;
    }();
    ch = &round_only;
    k.set_rounded();
  }
  ChainCall call;
  if (ch) {
    call.ch = ch;
    call.out = out.data<float>();
    if (ch->ext_var) {
      // a residual added to the output: read at each element's offset
      const Tensor* e = k.fused_operand();
      if (!e || e->dtype() != DataType::Float32 || e->shape() != out.shape())
        k.fail("the tensor the fused " + ch->describe() + " reads (" + ch->ext_var->name() +
               ") is " + (e ? e->describe() : std::string("missing")) + ", not " + out.describe());
      call.ext = e->data<float>();
    }
  }
  if (!conv_forward(g, x.data<float>(), w, bias, out.mutable_data<float>(), ch ? &call : nullptr) &&
      ch)
    call.all(out.mutable_data<float>(), out.numel());
}

/// The bias input as fp32 [C_out], or null when absent.
const float* bias_of(KernelCtx& k, int64_t cout, Tensor& keep) {
  if (!k.has("bias")) return nullptr;
  keep = cast_tensor(k.in("bias"), DataType::Float32);
  if (keep.numel() != cout)
    k.fail("bias " + keep.describe() + " does not have C_out = " + std::to_string(cout) + " values");
  return keep.data<float>();
}

void conv_kernel(KernelCtx& k) {
  const Tensor& x = k.in("x");
  Tensor bkeep;
  if (const PackedWeight* pw = k.packed("weight")) {
    // read packed (an fp16 weight in place, a compressed one): decoded by chunks as it is used
    if (pw->dtype() != DataType::Float16 && pw->dtype() != DataType::Float32)
      k.fail("weight must be fp16 or fp32, got " + std::string(dtype_name(pw->dtype())));
    if (pw->shape().size() < 2)
      k.fail("weight must have rank >= 2, got rank " + std::to_string(pw->shape().size()));
    ConvWeight cw;
    cw.packed = pw;
    run_conv(k, x, pw->shape(), cw, bias_of(k, pw->shape()[0], bkeep));
    return;
  }
  const Tensor& w = k.in("weight");
  if (w.dtype() != DataType::Float32) k.fail("weight must be fp16 or fp32, got " + w.describe());
  if (w.rank() < 2) k.fail("weight must have rank >= 2, got " + w.describe());
  ConvWeight cw;
  cw.dense = w.data<float>();
  run_conv(k, x, w.shape(), cw, bias_of(k, w.dim(0), bkeep));
}

/// conv_quantized: weight_float = weight * quant_scale + quant_bias ("linear", scale and bias
/// per output channel or scalar), then conv; its uint8 bias is added as floats.
void conv_quantized_kernel(KernelCtx& k) {
  const Tensor& x = k.in("x");
  const Tensor& wq = k.in("weight");
  if (wq.dtype() != DataType::UInt8) k.fail("weight must be uint8, got " + wq.describe());
  if (wq.rank() < 2) k.fail("weight must have rank >= 2, got " + wq.describe());
  std::string qt = k.str("quantization_type");
  if (qt != "linear")
    k.fail("quantization_type \"" + qt +
           "\" is not supported: only \"linear\" has its parameters in the op "
           "(\"lut\" needs a lookup table the op does not carry)");
  int64_t nbits = k.int_or("nbits", 8);
  if (nbits < 1 || nbits > 8) k.fail("nbits must be in [1, 8], got " + std::to_string(nbits));
  const int64_t cout = wq.dim(0), per = cout ? wq.numel() / cout : 0;
  Tensor sc = cast_tensor(k.in("quant_scale"), DataType::Float32);
  Tensor qb = cast_tensor(k.in("quant_bias"), DataType::Float32);
  if ((sc.numel() != 1 && sc.numel() != cout) || (qb.numel() != 1 && qb.numel() != cout))
    k.fail("quant_scale " + sc.describe() + " and quant_bias " + qb.describe() +
           " must hold 1 or C_out = " + std::to_string(cout) + " values");
  const uint8_t* q = wq.data<uint8_t>();
  const int64_t limit = int64_t(1) << nbits;
  for (int64_t i = 0; i < wq.numel(); ++i)
    if (q[i] >= limit)
      k.fail("weight value " + std::to_string(q[i]) + " at flat index " + std::to_string(i) +
             " does not fit in nbits = " + std::to_string(nbits));
  Tensor wf = Tensor::empty(DataType::Float32, wq.shape());
  float* wp = wf.mutable_data<float>();
  const float* s = sc.data<float>();
  const float* b = qb.data<float>();
  for (int64_t c = 0; c < cout; ++c) {
    const float sv = s[sc.numel() == 1 ? 0 : c], bv = b[qb.numel() == 1 ? 0 : c];
    for (int64_t i = c * per; i < (c + 1) * per; ++i) wp[i] = static_cast<float>(q[i]) * sv + bv;
  }
  Tensor bkeep;
  const float* bias = bias_of(k, cout, bkeep);
  ConvWeight cw;
  cw.dense = wp;
  run_conv(k, x, wq.shape(), cw, bias);
}

// ------------------------------------------------------------------------------------------
// conv_transpose

void conv_transpose_kernel(KernelCtx& k) {
  const Tensor& x = k.in("x");
  Tensor wkeep;  // a packed weight, decompressed for this run only
  const Tensor& w = weight_tensor(k, "weight", wkeep);
  if (x.dtype() != DataType::Float32 || w.dtype() != DataType::Float32)
    k.fail("x and weight must be fp16 or fp32, got " + x.describe() + " and " + w.describe());
  if (x.rank() < 3 || x.rank() > 5) k.fail("x must have rank 3 to 5, got " + x.describe());
  if (w.rank() != x.rank()) k.fail("weight " + w.describe() + " must have the rank of x " + x.describe());
  Geom g;  // in = conv_transpose's input (x), out = its output
  const int nd = g.nd = x.rank() - 2;
  g.N = x.dim(0);
  g.Cin = x.dim(1);
  g.G = k.int_or("groups", 1);
  if (g.G <= 0) k.fail("groups must be positive, got " + std::to_string(g.G));
  if (w.dim(0) != g.Cin || g.Cin % g.G != 0)
    k.fail("weight " + w.describe() + " must be [C_in, C_out / groups, *K] for x " + x.describe() +
           " and groups " + std::to_string(g.G));
  g.Cout = w.dim(1) * g.G;
  for (int i = 0; i < nd; ++i) {
    g.in[3 - nd + i] = x.dim(2 + i);
    g.k[3 - nd + i] = w.dim(2 + i);
  }
  spatial_param(k, "strides", nd, 1, g.s, true);
  spatial_param(k, "dilations", nd, 1, g.d, true);
  std::string pad_type = k.str_or("pad_type", "valid");
  std::vector<int64_t> pad;
  if (pad_type == "custom")
    pad = custom_pad(k, nd);
  else if (pad_type != "valid" && pad_type != "same")
    k.fail("unknown pad_type \"" + pad_type + "\"");
  std::vector<int64_t> os;
  if (k.has("output_shape")) {
    os = k.ints("output_shape");
    if (static_cast<int>(os.size()) != x.rank() || os[0] != g.N || os[1] != g.Cout)
      k.fail("output_shape " + shape_str(os) + " must be [" + std::to_string(g.N) + ", " +
             std::to_string(g.Cout) + ", *D_out] with one size per spatial dim");
  }
  for (int i = 0; i < nd; ++i) {
    int j = 3 - nd + i;
    int64_t ek = (g.k[j] - 1) * g.d[j] + 1, full = (g.in[j] - 1) * g.s[j] + ek;
    int64_t o;
    if (!os.empty())
      o = os[2 + i];
    else if (pad_type == "same")
      o = g.in[j] * g.s[j];
    else if (pad_type == "custom")
      o = full - pad[2 * i] - pad[2 * i + 1];
    else
      o = full;
    if (o < 0) k.fail("spatial dim " + std::to_string(i) + " has invalid output size " + std::to_string(o));
    g.out[j] = o;
    if (pad_type == "custom")
      g.pb[j] = pad[2 * i];
    else if (pad_type == "same")
      g.pb[j] = std::max<int64_t>(0, full - o) / 2;
  }
  Tensor bkeep;
  const float* bias = bias_of(k, g.Cout, bkeep);
  std::vector<int64_t> oshape{g.N, g.Cout};
  for (int i = 0; i < nd; ++i) oshape.push_back(g.out[3 - nd + i]);
  Tensor& out = k.alloc(0, oshape);
  float* y = out.mutable_data<float>();
  const int64_t op = g.out_plane(), ip = g.in_plane(), kp = g.kprod();
  const int64_t cin_g = g.Cin / g.G, cout_g = g.Cout / g.G, mc = cout_g * kp;
  if (out.numel() == 0) return;
  parallel_for(g.N * g.Cout, std::max<int64_t>(1, 65536 / std::max<int64_t>(op, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t p = b; p < e; ++p)
                   std::fill(y + p * op, y + (p + 1) * op, bias ? bias[p % g.Cout] : 0.0f);
               });
  if (ip == 0 || cin_g == 0 || kp == 0) return;
  const float* xd = x.data<float>();
  const float* wd = w.data<float>();
  const int64_t ID = g.in[0], IH = g.in[1], IW = g.in[2], OD = g.out[0], OH = g.out[1], OW = g.out[2];
  // bands of input rows (row r = id * IH + ih) keep the columns within the budget
  const int64_t rows = ID * IH;
  const int64_t band = std::clamp<int64_t>(kColBudget / std::max<int64_t>(mc * IW, 1), 1, rows);
  Tensor colbuf = Tensor::empty(DataType::Float32, {std::max<int64_t>(mc * band * IW, 1)});
  float* col = colbuf.mutable_data<float>();
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t gr = 0; gr < g.G; ++gr)
      for (int64_t r0 = 0; r0 < rows; r0 += band) {
        const int64_t r1 = std::min(rows, r0 + band), pc = (r1 - r0) * IW;
        // col[(co, kd, kh, kw), i] = sum_ci w[ci, co, kd, kh, kw] * x[n, ci, r0 * IW + i]
        sgemm(true, mc, pc, cin_g, wd + gr * cin_g * mc, mc, xd + (n * g.Cin + gr * cin_g) * ip + r0 * IW, ip,
              0.0f, col, pc);
        float* yg = y + (n * g.Cout + gr * cout_g) * op;
        parallel_for(cout_g, 1, [&](int64_t cb, int64_t ce) {
          for (int64_t co = cb; co < ce; ++co) {
            float* yo = yg + co * op;
            for (int64_t kk = 0; kk < kp; ++kk) {
              const int64_t kd = kk / (g.k[1] * g.k[2]), kh = (kk / g.k[2]) % g.k[1], kw = kk % g.k[2];
              const float* c = col + (co * kp + kk) * pc;
              // input iw lands on ow = iw * sw + offw
              const int64_t offw = kw * g.d[2] - g.pb[2], sw = g.s[2];
              const int64_t lo = std::max<int64_t>(0, -floor_div(offw, sw));
              const int64_t hi = std::min<int64_t>(IW, floor_div(OW - 1 - offw, sw) + 1);
              if (hi <= lo) continue;
              for (int64_t r = r0; r < r1; ++r) {
                const int64_t od = (r / IH) * g.s[0] + kd * g.d[0] - g.pb[0];
                const int64_t oh = (r % IH) * g.s[1] + kh * g.d[1] - g.pb[1];
                if (od < 0 || od >= OD || oh < 0 || oh >= OH) continue;
                const float* src = c + (r - r0) * IW;
                float* dst = yo + (od * OH + oh) * OW;
                if (sw == 1) {
                  float* dd = dst + lo + offw;
                  const float* ss = src + lo;
                  for (int64_t j = 0; j < hi - lo; ++j) dd[j] += ss[j];
                } else {
                  for (int64_t iw = lo; iw < hi; ++iw) dst[iw * sw + offw] += src[iw];
                }
              }
            }
          }
        });
      }
}

}  // namespace

void register_conv_kernels(KernelRegistry& r) {
  r.add("conv", {conv_kernel, true});
  r.add("conv_transpose", {conv_transpose_kernel, true});
  r.add("conv_quantized", {conv_quantized_kernel, true});
}

}  // namespace milkit
