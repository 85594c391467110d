// milkit/compose/sampling.h - grid sampling (2-D and 3-D, every mode and padding mode).
#pragma once

#include "milkit/compose/emitter.h"

namespace milkit {
namespace compose {

/// How a sample between pixels is interpolated.
enum class SampleMode { Linear, Nearest, Cubic };
/// What a coordinate outside the input reads.
enum class SamplePadding { Zeros, Border, Reflection };
/// Whose reference numbers the general (gather) path reproduces where they differ.
/// Torch (GridSampler.h): the padding mode applies to the unnormalized coordinate (nearest,
/// linear: border clamps, reflection reflects then clamps; nearest rounds after it) or to each
/// tap (cubic). Onnx (the ONNX reference): nearest rounds first; border clamps only coordinates
/// outside the input; reflection reflects the coordinate and each tap (truncated toward zero).
enum class GridConvention { Torch, Onnx };

/// grid_sample's parameters.
struct GridSampleSpec {
  SampleMode mode = SampleMode::Linear;          ///< Interpolation.
  SamplePadding padding = SamplePadding::Zeros;  ///< Outside handling.
  bool align_corners =
      false;  ///< -1 / 1 are the centers (true) or the outer edges (false) of the corner pixels.
  GridConvention convention = GridConvention::Torch;  ///< See GridConvention.
};

/// Samples x [N, C, spatial...] at grid [N, out..., k] (k spatial dims, the last spatial dim
/// first in the grid's last axis, normalized to [-1, 1]); returns [N, C, out...] in x's dtype.
/// 2-D linear / nearest becomes MIL's resample (reflection without align_corners is resample's
/// "symmetric"; Torch casts an integer x to fp32 first); cubic and 3-D (any k with Onnx) gather
/// every combination of taps from x flattened to [N * P, C] and sum them weighted (known shapes).
Var* grid_sample(Emitter& e, Var* x, Var* grid, const GridSampleSpec& s);

}  // namespace compose
}  // namespace milkit
