// milkit/ops/fft_util.h - the signal sizes and axes of the complex dialect's FFT ops, shared by
// their type inference and common::lower_complex_dialect_ops.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "milkit/ir/ir.h"

namespace milkit {

/// The transformed axes of an FFT op and the signal size along each.
struct FftAxes {
  /// Signal size per transformed axis (symbolic when taken from the input).
  std::vector<Dim> sizes;
  /// The axes as given (may be negative, Python-style).
  std::vector<int64_t> dims;
};

/// coremltools' fft_canonicalize_shapes_dims (PyTorch's rules): `sizes` (shapes / n) and `dims`
/// (dims / dim) as given, or nullopt when absent. Without sizes, each axis keeps the input's size;
/// without dims, the axes are the last len(sizes) ones (all axes when both are absent). `c2r`
/// (irfft, irfftn) without sizes expands the last axis to 2 * (size - 1). Throws ValueError with
/// coremltools' message for an axis out of range, a size <= 0, or lengths that differ.
FftAxes fft_canonicalize(Context& ctx, const std::vector<Dim>& shape,
                         const std::optional<std::vector<int64_t>>& sizes,
                         const std::optional<std::vector<int64_t>>& dims, bool c2r);

/// A Python-style axis (possibly negative) as an index into a shape of `rank` dims; throws
/// ValueError when out of range.
size_t fft_axis_index(int64_t dim, size_t rank);

}  // namespace milkit
