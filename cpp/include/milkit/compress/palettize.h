// milkit/compress/palettize.h - weight palettization (look-up-table compression) numerics,
// reproducing coremltools.optimize.coreml's palettize_weights.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "milkit/types/datatype.h"

namespace milkit::compress {

/// A weight to compress: values row-major, its shape, and the numpy dtype whose arithmetic to
/// reproduce (Float16, Float32, or Int32 for int8 data that joint compression widens). For
/// Float16 every value must be exactly representable in fp16.
struct WeightView {
  const float* data = nullptr;         ///< Row-major values (shape's product of them).
  std::vector<int64_t> shape;          ///< The weight's shape.
  DataType dtype = DataType::Float32;  ///< Arithmetic to reproduce.
};

/// How the look-up table is built.
enum class PaletteMode {
  KMeans,   ///< Optimal weighted 1-D k-means (scalars) / k-means++ and Lloyd (vectors).
  Uniform,  ///< 2^nbits evenly spaced entries from the minimum to the maximum.
  Unique,   ///< One entry per distinct value (or vector).
};

/// What to palettize and how.
struct PaletteSpec {
  PaletteMode mode = PaletteMode::KMeans;  ///< LUT construction.
  int nbits = 0;                           ///< 1, 2, 3, 4, 6 or 8; 0 infers it (Unique mode only).
  int channel_axis = 0;    ///< Axis whose channels are grouped (negative counts from the end).
  int64_t group_size = 0;  ///< Channels per group; 0: one group (per tensor).
  int cluster_dim = 1;     ///< Length of each LUT entry (vector palettization when > 1).
};

/// A palettized weight, laid out as coremltools' iOS18 constexpr_lut_to_dense operands.
struct Palette {
  int nbits = 0;                       ///< Index width (the LUT has 2^nbits entries per group).
  std::vector<float> lut;              ///< LUT values, rounded to the weight's dtype, row-major.
  std::vector<int64_t> lut_shape;      ///< Rank+2: group count at channel_axis, 1 elsewhere,
                                       ///< then 2^nbits, then cluster_dim.
  std::vector<uint8_t> indices;        ///< Unpacked, one per element (or per vector), row-major.
  std::vector<int64_t> indices_shape;  ///< The weight's shape (channel_axis / cluster_dim).
  int vector_axis = -1;                ///< channel_axis for vector palettization, -1 for scalars.
};

/// Palettizes `w`; std::nullopt with *skip_reason set where coremltools warns and skips (group
/// size not dividing the channels, cluster_dim not dividing the group size, more distinct values
/// than 256 in Unique mode). Throws milkit::ValueError for invalid arguments and for NaN / inf
/// values in KMeans mode. Channel groups run in parallel (milkit::parallel_for); the result does
/// not depend on the thread count.
std::optional<Palette> palettize(const WeightView& w, const PaletteSpec& s,
                                 std::string* skip_reason);

/// Packs unsigned values of `nbits` each, least significant bit first (coremltools'
/// pack_elements_into_bits), as blob storage writes sub-byte types. Throws milkit::ValueError
/// when a value does not fit.
std::vector<uint8_t> pack_bits(const std::vector<uint8_t>& v, int nbits);

}  // namespace milkit::compress
