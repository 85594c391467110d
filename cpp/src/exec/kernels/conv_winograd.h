// Winograd F(2x2, 3x3) convolution for 3x3, stride-1, undilated, ungrouped 2-d convs on NCHW
// fp32 buffers. Private to cpp/src/exec.
#pragma once

#include <cstdint>
#include <functional>

#include "conv_direct.h"

namespace milkit::exec {

/// Rows [r0, r0 + n) of a conv weight [C_out, C_in * 9] as fp32 (dense in place, or decoded into
/// the calling thread's buffer, valid until that thread's next call).
using WeightRows = std::function<const float*(int64_t r0, int64_t n)>;

/// This thread's scratch of at least n floats in one of two slots, kept between convs (made and
/// freed per conv, megabyte buffers leave the allocator's heap grown): slot 0 for what a task
/// uses alone (im2col columns, a Winograd task's filters and products), slot 1 for what a call
/// shares with its tasks (Winograd's transformed filters and input). A call may move the buffer.
float* conv_scratch(int slot, int64_t n);

/// True for the convs winograd_conv3x3 takes: 3x3 kernel, stride 1, dilation 1, one group, and
/// channels enough that its 2.25x fewer multiply-adds outweigh its transforms (measured, see
/// docs/interpreter.md).
bool winograd_suits(const Conv2dShape& s);

/// y = conv(x, w) + bias (bias may be null) by Winograd's minimal filtering F(2x2, 3x3): each
/// 2x2 output tile is A^T [(G g G^T) . (B^T d B)] A over its 4x4 input patch d, the products
/// summed over input channels as 16 GEMMs per block of tiles. Returns false, with y
/// unspecified, when any output is not finite (an inf or NaN in x or w, or a transform that
/// overflowed): the transforms mix the values of a whole patch, so the caller recomputes such a
/// conv directly, where each output sees only its own window.
bool winograd_conv3x3(const Conv2dShape& s, const float* x, const WeightRows& w, const float* bias,
                      float* y);

}  // namespace milkit::exec
