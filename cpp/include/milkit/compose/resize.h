// milkit/compose/resize.h - resizing the trailing axes of a tensor by gathered taps or by a matrix.
#pragma once

#include <cstdint>
#include <vector>

#include "milkit/compose/emitter.h"

namespace milkit {
namespace compose {

/// How an output sample is interpolated from the input.
enum class ResizeMode { Nearest, Linear, Cubic };
/// Where output index i lands on the input axis (ONNX's coordinate_transformation_mode names).
enum class ResizeCoord {
  HalfPixel,           ///< (i + 0.5) / scale - 0.5.
  PytorchHalfPixel,    ///< As HalfPixel, 0 when the output has one sample.
  AlignCorners,        ///< i * (in - 1) / (out - 1): the corner samples meet.
  Asymmetric,          ///< i / scale.
  HalfPixelSymmetric,  ///< HalfPixel re-centred on the input (Onnx only).
  TfCropAndResize,     ///< Inside the region of interest [roi_lo, roi_hi] (Onnx only).
};
/// How Nearest turns a fractional source coordinate into an index (Onnx; Torch floors).
enum class NearestRound { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };
/// Whose arithmetic the taps follow where the two references differ.
/// Onnx (the ONNX reference): coordinates in double, every coordinate mode and rounding rule,
/// linear as x[lo] * (1 - w) + x[hi] * w, cubic weights normalized only with exclude_outside,
/// antialiasing by a widened tap kernel; integer inputs interpolate in fp32 and are rounded back.
/// Torch (ATen's upsample kernels): coordinates in float; Nearest with Asymmetric is `nearest`
/// (floor(i * s)), Nearest with any other coord is `nearest-exact` (floor((i + 0.5) * s));
/// Linear / Cubic take AlignCorners or a half-pixel source (linear clamped at 0); linear as
/// x[lo] + (x[hi] - x[lo]) * w; antialiasing by a dense weight matrix (triangle or Keys a=-0.5).
enum class ResizeConvention { Onnx, Torch };

/// One resized axis.
struct ResizeAxis {
  int64_t axis = 0;   ///< The axis of x (may be negative).
  int64_t in = 0;     ///< Its input length.
  int64_t out = 0;    ///< Its output length.
  double scale = 0;   ///< out / in as the framework states it; 0: none given (Torch uses in / out).
  double roi_lo = 0;  ///< TfCropAndResize's region start (normalized).
  double roi_hi = 1;  ///< TfCropAndResize's region end (normalized).
};

/// A resize's parameters.
struct ResizeSpec {
  std::vector<ResizeAxis> axes;                           ///< The resized axes, applied in order.
  ResizeMode mode = ResizeMode::Nearest;                  ///< Interpolation.
  ResizeCoord coord = ResizeCoord::HalfPixel;             ///< Coordinate transformation.
  NearestRound nearest = NearestRound::RoundPreferFloor;  ///< Nearest's rounding (Onnx).
  double cubic_a = -0.75;        ///< Cubic coefficient (Onnx; Torch -0.75).
  bool exclude_outside = false;  ///< Taps outside the input weigh 0, the rest renormalized (Onnx).
  bool antialias = false;        ///< Downscaling widens the kernel (linear / cubic).
  double extrapolation = 0;      ///< TfCropAndResize's value outside the input (Onnx).
  ResizeConvention convention = ResizeConvention::Onnx;  ///< See ResizeConvention.
};

/// One axis resized to a length known only at run time.
struct RunTimeAxis {
  int64_t axis = 0;    ///< The axis of x (non-negative).
  Var* in = nullptr;   ///< Its input length, an int32 scalar.
  Var* out = nullptr;  ///< Its output length, an int32 scalar.
  double scale = 0;    ///< out / in as the framework states it; 0: none given (in / out is used).
};

/// Resizes x along `axes`, whose lengths are known only at run time: each axis's source
/// coordinates (fp32), clamped taps (1 nearest, 2 linear, 4 cubic) and weights are computed by
/// MIL ops, by s.mode, s.coord, s.nearest, s.cubic_a and s.convention as resize_by_taps takes
/// them (s.axes is not read). Antialiasing, exclude_outside, TfCropAndResize and interpolating
/// integer tensors need known lengths: ValueError.
Var* resize_at_run_time(Emitter& e, Var* x, const ResizeSpec& s,
                        const std::vector<RunTimeAxis>& axes);
/// Resizes x along s.axes (known lengths) by per-axis gathers weighted by constant taps (1
/// nearest, 2 linear, 4 cubic, more when Onnx antialiases); Torch antialiasing goes to
/// resize_by_matrix. Returns a new var even when nothing is resized.
Var* resize(Emitter& e, Var* x, const ResizeSpec& s);
/// Resizes x along s.axes by the taps of s (no antialiasing under Torch).
Var* resize_by_taps(Emitter& e, Var* x, const ResizeSpec& s);
/// Resizes x along s.axes by a dense [in, out] weight matrix per axis (transpose, matmul,
/// transpose back): Torch's antialiased linear (triangle) or cubic (Keys, a = -0.5) filters.
Var* resize_by_matrix(Emitter& e, Var* x, const ResizeSpec& s);

}  // namespace compose
}  // namespace milkit
