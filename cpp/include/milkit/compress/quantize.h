// milkit/compress/quantize.h - linear (affine) quantization of a weight, as coremltools computes
// it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
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
};

/// A quantized weight: dequantized value = (data - zero_point) * scale, per block.
struct Quantized {
  /// The quantized integers, in the weight's element order, one byte each (two's complement for
  /// signed dtypes): milkit's unpacked layout of int8 / uint8 / int4 / uint4 values.
  std::vector<uint8_t> data;
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
/// coremltools skips the weight (a block size that does not divide its axis).
std::optional<Quantized> quantize(const float* data, const std::vector<int64_t>& shape,
                                  DataType dtype, const QuantSpec& spec, std::string* skip_reason);

/// The integer range of a quantized dtype for a mode (coremltools' get_quant_range).
std::pair<int32_t, int32_t> quant_range(DataType dtype, bool symmetric);

}  // namespace milkit::compress
