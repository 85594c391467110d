// Direct convolution kernels that need no im2col columns: over a zero-padded copy of each input
// plane, the 2-d depthwise conv (one input channel per group) and the conv of few input channels
// (a network's stem); over the input itself, tiles of 1x1 convs of few input channels. Private to
// cpp/src/exec.
#pragma once

#include <cstdint>
#include <functional>

namespace milkit::exec {

/// The geometry of a 2-d conv on NCHW fp32 buffers (a 1-d conv has IH = OH = KH = 1).
struct Conv2dShape {
  int64_t N = 0;              ///< Batch.
  int64_t Cin = 0, Cout = 0;  ///< Channels in and out.
  int64_t IH = 0, IW = 0;     ///< Input height and width.
  int64_t OH = 0, OW = 0;     ///< Output height and width.
  int64_t KH = 1, KW = 1;     ///< Kernel height and width.
  int64_t sh = 1, sw = 1;     ///< Strides.
  int64_t dh = 1, dw = 1;     ///< Dilations.
  int64_t ph = 0, pw = 0;     ///< Zero padding before the first row and column.
};

/// Depthwise conv (groups = Cin, Cout a multiple of Cin: output channel co reads input channel
/// co / (Cout / Cin)): y[n, co] = bias[co] + sum_kh,kw w[co, kh, kw] * x[n, ci, oh * sh + kh *
/// dh - ph, ow * sw + kw * dw - pw], 0 outside the input. bias may be null.
/// `done`, when given, is called on each finished run of the output (whole planes: a block of 16
/// channels of one image, or one plane) on the thread that wrote it, while it is in cache.
void depthwise_conv2d(const Conv2dShape& s, const float* x, const float* w, const float* bias,
                      float* y, const std::function<void(float*, int64_t)>& done = {});

/// Whether `small_cin_conv2d` takes this (groups = 1) conv: 1 to 4 input channels, at most 160
/// taps per output (C_in * KH * KW), more than one tap per channel (a network's stem).
bool small_cin_conv2d_fits(const Conv2dShape& s);

/// Direct conv with groups = 1 and few input channels (an image's stem), weight [Cout, Cin, KH,
/// KW] dense fp32: y[n, co] = bias[co] + sum_ci,kh,kw w[co, ci, kh, kw] * x[n, ci, oh * sh + kh *
/// dh - ph, ow * sw + kw * dw - pw] (0 outside the input), the taps added in that order. bias may
/// be null. Bands of output rows across the threads; vectors of output columns times 8 (AVX-512)
/// or 4 output channels per register block.
void small_cin_conv2d(const Conv2dShape& s, const float* x, const float* w, const float* bias,
                      float* y);

/// Input channels up to which a 1x1 conv's tiles are computed by `pointwise_tile` rather than
/// by BLAS, whose packing costs more than the products there.
constexpr int64_t kPointwiseSmallK = 32;

/// One tile of a 1x1 conv: y[r, c] = bias[r] + sum_k w[r, k] * x[k, c] for r < rows, c < cols
/// (x rows `ldx` apart, y rows `ldy` apart, w [rows, K] dense, bias null for none), the products
/// added in k order from the bias. Vectors of columns times 8 (AVX-512) or 4 rows per register
/// block, chosen at run time.
void pointwise_tile(int64_t K, int64_t rows, int64_t cols, const float* w, const float* bias,
                    const float* x, int64_t ldx, float* y, int64_t ldy);

}  // namespace milkit::exec

