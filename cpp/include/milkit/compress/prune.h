// milkit/compress/prune.h - weight pruning numerics, reproducing coremltools.optimize.coreml's
// prune_weights.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "milkit/compress/palettize.h"
#include "milkit/compress/quantize.h"

namespace milkit::compress {

/// How to prune.
struct PruneSpec {
  /// Threshold: zero |w| <= threshold (skipped below minimum_sparsity). Magnitude: zero the
  /// target_sparsity fraction of smallest magnitudes (per element, or per block of block_size
  /// channels on `dim`). NM: in every run of m elements along the input (dim 1) or output
  /// (dim 0) channels, zero the n smallest magnitudes.
  enum Kind { Threshold, Magnitude, NM } kind = Threshold;
  double threshold = 1e-12;       ///< Threshold: largest magnitude pruned.
  double minimum_sparsity = 0.5;  ///< Threshold: least fraction of zeros to accept.
  double target_sparsity = 0;     ///< Magnitude: fraction in [0, 1].
  int64_t block_size = 0;         ///< Magnitude: channels per block; 0: element-wise.
  int n = 0;                      ///< NM: elements pruned per run.
  int m = 0;                      ///< NM: run length.
  int dim = 0;                    ///< Magnitude blocks / NM runs: 0 output, 1 input channels.
};

/// The pruned values (zeros where pruned, same order as w; NM and target_sparsity 1 keep the
/// sign of a pruned negative value as -0, as coremltools multiplies by 0); std::nullopt with
/// *skip_reason set where coremltools skips. N:M ties in magnitude prune the earlier element.
std::optional<std::vector<float>> prune(const WeightView& w, const PruneSpec& s,
                                        std::string* skip_reason);

/// Element-wise magnitude pruning (PruneSpec::Magnitude, no blocks) of `n` fp16 values given
/// as bit patterns, without converting them: 1 for each element that stays non-zero, exactly
/// where prune()'s result is non-zero (the same percentile, ties and NaN / infinity rules).
std::vector<uint8_t> magnitude_keep_half(const uint16_t* h, int64_t n, double target_sparsity);

/// The sparse form of an fp16 weight pruned as magnitude_keep_half says: the kept values in
/// order and the keep flags packed.
struct SparseHalves {
  /// The kept values' bit patterns, two bytes each (little-endian), in element order.
  UninitBytes nonzero;
  /// The keep flags, 8 per byte, the first element in the lowest bit (Core ML's uint1 layout and
  /// the pre-iOS18 mask); the bits after the last element are 0.
  std::vector<uint8_t> mask;
  /// Number of kept values.
  int64_t count = 0;
};

/// magnitude_keep_half's result in its sparse form, without a byte per element: one pass counts
/// the magnitudes, one writes the mask and the kept values (with AVX2 when the CPU has it;
/// `vector` false runs the portable code, which gives the same bytes).
SparseHalves magnitude_sparse_half(const uint16_t* h, int64_t n, double target_sparsity,
                                   bool vector = true);

}  // namespace milkit::compress
