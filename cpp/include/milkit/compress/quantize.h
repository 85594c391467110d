// milkit/compress/quantize.h - linear (affine) quantization of a weight, as coremltools computes
// it.
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "milkit/types/datatype.h"

namespace milkit::compress {

/// How to quantize a weight linearly (coremltools' OpLinearQuantizerConfig, resolved for one
/// weight).
struct QuantSpec {
  /// "LINEAR_SYMMETRIC" (range symmetric around 0) or "LINEAR" (range containing 0, zero point).
  bool symmetric = true;
  /// Int8, UInt8, Int4 or UInt4.
  DataType dtype = DataType::Int8;
  /// Block size per axis of the weight: 0 takes the whole axis (coremltools' block_sizes).
  std::vector<int64_t> block_sizes;
  /// For 4-bit dtypes: the data may come packed (Quantized::packed), which spares a byte per
  /// element where the weight's rows allow it.
  bool allow_packed = false;
};

/// An allocator whose resize leaves new bytes uninitialized (they are all written afterwards,
/// on the threads that compute them: no serial zeroing pass over a weight-sized buffer).
template <class T>
struct UninitAllocator : std::allocator<T> {
  /// The same allocator for another type.
  template <class U>
  struct rebind {
    /// The rebound allocator.
    using other = UninitAllocator<U>;
  };
  UninitAllocator() = default;
  /// Converts from the allocator of another type.
  template <class U>
  UninitAllocator(const UninitAllocator<U>&) noexcept {}
  /// Default-initializes (leaves a byte as it is) instead of value-initializing.
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  /// Constructs from arguments.
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

/// Bytes that a resize leaves uninitialized.
using UninitBytes = std::vector<uint8_t, UninitAllocator<uint8_t>>;

/// A quantized weight: dequantized value = (data - zero_point) * scale, per block.
struct Quantized {
  /// The quantized integers, in the weight's element order, one byte each (two's complement for
  /// signed dtypes): milkit's unpacked layout of int8 / uint8 / int4 / uint4 values; packed
  /// when `packed` is set.
  UninitBytes data;
  /// Whether `data` holds the 4-bit values packed two per byte, the first in the low bits (Core
  /// ML's layout), rather than one per byte (only with QuantSpec::allow_packed).
  bool packed = false;
  /// Scale per block, in the weight's dtype (fp16 values are exact fp16 numbers); shape
  /// `param_shape`.
  std::vector<float> scale;
  /// Zero point per block (empty when coremltools writes none: signed symmetric).
  std::vector<int32_t> zero_point;
  /// The shape of scale and zero_point: the number of blocks along each axis.
  std::vector<int64_t> param_shape;
};

/// Quantizes `data` (row-major, `shape`) whose elements are of `dtype` (Float16 or Float32:
/// numpy's arithmetic in that dtype is reproduced step by step, so the result is bit-identical to
/// coremltools' compute_qparams_by_dtype). Returns std::nullopt with `*skip_reason` set where
/// coremltools skips the weight (a block size that does not divide its axis). With `has_inf` set,
/// a weight holding +-inf is not quantized either: std::nullopt is returned, `*skip_reason` is
/// left as it is and `*has_inf` is set to true (false once the values were read and hold no
/// inf; a weight skipped for its block sizes before that leaves it untouched).
std::optional<Quantized> quantize(const float* data, const std::vector<int64_t>& shape,
                                  DataType dtype, const QuantSpec& spec, std::string* skip_reason,
                                  bool* has_inf = nullptr);

/// Quantizes an fp16 weight given as its raw bits (row-major, `shape`) without a float copy of
/// it: the same result as quantize() over its values with dtype Float16 (and the same
/// `has_inf`).
std::optional<Quantized> quantize(const uint16_t* halves, const std::vector<int64_t>& shape,
                                  const QuantSpec& spec, std::string* skip_reason,
                                  bool* has_inf = nullptr);

/// One block's quantization step of quantize(): element k of a run becomes
/// clip(round_half_even(w[k] / scale) (+ zero), qmin, qmax) as an integer byte (NaN becomes 0),
/// where w[k] / scale is rounded to fp16 first when `half` (numpy's fp16 division).
struct QuantStep {
  /// The block's scale.
  float scale = 1.0f;
  /// The block's zero point (added when `has_zero`).
  float zero = 0.0f;
  /// Whether a zero point is added.
  bool has_zero = false;
  /// Whether the division is rounded to fp16.
  bool half = false;
  /// The quantized range.
  float qmin = -128.0f, qmax = 127.0f;
};

/// Quantizes `n` values with `step` into `out` (one byte each). `vector`: use the CPU's vector
/// instructions when it has them (AVX2 + F16C); false runs the portable scalar code, which gives
/// the same bytes.
void quantize_run(const float* w, int64_t n, const QuantStep& step, uint8_t* out,
                  bool vector = true);
/// The same over fp16 values given as raw bits.
void quantize_run(const uint16_t* w, int64_t n, const QuantStep& step, uint8_t* out,
                  bool vector = true);

/// Folds `n` values into a running minimum and maximum (NaNs are not taken: `lo` / `hi` keep
/// the other values; +-0 compare equal) and returns whether a NaN was among them. `vector` as
/// for quantize_run.
bool min_max_run(const float* w, int64_t n, float& lo, float& hi, bool vector = true);
/// The same over fp16 values given as raw bits.
bool min_max_run(const uint16_t* w, int64_t n, float& lo, float& hi, bool vector = true);

/// min_max_run over `blocks` consecutive blocks of `lb` values: block b's minimum and maximum
/// (from +inf / -inf) go to lo[b] and hi[b], whether it holds a NaN to nan[b]. `vector` as for
/// quantize_run.
void min_max_blocks(const float* w, int64_t blocks, int64_t lb, float* lo, float* hi, uint8_t* nan,
                    bool vector = true);
/// The same over fp16 values given as raw bits.
void min_max_blocks(const uint16_t* w, int64_t blocks, int64_t lb, float* lo, float* hi,
                    uint8_t* nan, bool vector = true);

/// quantize_run over `blocks` consecutive blocks of `lb` values, block b with steps[b].
void quantize_blocks(const float* w, int64_t blocks, int64_t lb, const QuantStep* steps,
                     uint8_t* out, bool vector = true);
/// The same over fp16 values given as raw bits.
void quantize_blocks(const uint16_t* w, int64_t blocks, int64_t lb, const QuantStep* steps,
                     uint8_t* out, bool vector = true);

/// The integer range of a quantized dtype for a mode (coremltools' get_quant_range).
std::pair<int32_t, int32_t> quant_range(DataType dtype, bool symmetric);

}  // namespace milkit::compress
