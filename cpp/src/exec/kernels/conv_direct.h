// Direct convolution kernels that need no im2col columns: the 2-d depthwise conv (one input
// channel per group) over a zero-padded copy of each input plane. Private to cpp/src/exec.
#pragma once

#include <cstdint>

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
void depthwise_conv2d(const Conv2dShape& s, const float* x, const float* w, const float* bias,
                      float* y);

}  // namespace milkit::exec
