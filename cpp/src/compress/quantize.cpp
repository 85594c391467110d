// Linear quantization of a weight, reproducing coremltools' compute_qparams_by_dtype /
// quantize_weight_by_dtype step by step in the weight's numpy dtype: for fp16 weights every
// arithmetic step is done in fp32 and rounded to fp16, as numpy's float16 loops do; python int
// operands are "weak" (NEP 50) and take the array's dtype.
#include "milkit/compress/quantize.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "milkit/types/error.h"

namespace milkit::compress {

namespace {

/// Rounds a float to the arithmetic dtype (fp16 or fp32).
struct Rounder {
  bool half;
  float operator()(float v) const { return half ? half_to_float(float_to_half(v)) : v; }
};

/// Maps each element to its block (scale cell) index.
struct Blocks {
  std::vector<int64_t> shape, block, pshape;
  int64_t cells = 1;
};

std::optional<Blocks> blocks_of(const std::vector<int64_t>& shape, const std::vector<int64_t>& bs,
                                std::string* skip_reason) {
  if (bs.size() != shape.size())
    throw ValueError("quantize: block_sizes has " + std::to_string(bs.size()) +
                     " entries for a weight of rank " + std::to_string(shape.size()));
  Blocks b;
  b.shape = shape;
  for (size_t a = 0; a < shape.size(); ++a) {
    if (bs[a] < 0) throw ValueError("quantize: block sizes must be non-negative");
    if (bs[a] > 0 && shape[a] % bs[a] != 0) {
      if (skip_reason)
        *skip_reason = "Invalid block_sizes; On " + std::to_string(a) + "th axis, the dim size " +
                       std::to_string(shape[a]) + " is not divisible by block size " +
                       std::to_string(bs[a]) + ". Unable to perform structured quantization.";
      return std::nullopt;
    }
    b.block.push_back(bs[a] > 0 ? bs[a] : shape[a]);
    b.pshape.push_back(bs[a] > 0 ? shape[a] / bs[a] : 1);
    b.cells *= b.pshape.back();
  }
  return b;
}

/// Calls fn(element index, cell index) for every element, in order.
template <class Fn>
void for_each_cell(const Blocks& b, Fn fn) {
  const size_t rank = b.shape.size();
  std::vector<int64_t> idx(rank, 0);
  int64_t n = 1;
  for (int64_t d : b.shape) n *= d;
  for (int64_t i = 0; i < n; ++i) {
    int64_t cell = 0;
    for (size_t a = 0; a < rank; ++a) cell = cell * b.pshape[a] + idx[a] / b.block[a];
    fn(i, cell);
    for (size_t a = rank; a-- > 0;) {
      if (++idx[a] < b.shape[a]) break;
      idx[a] = 0;
    }
  }
}

float nan_min(float a, float b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }
float nan_max(float a, float b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }

/// numpy's float -> int cast after a clip: NaN becomes 0 (what x86 numpy gives).
int32_t to_int(float v) { return std::isnan(v) ? 0 : static_cast<int32_t>(v); }

}  // namespace

std::pair<int32_t, int32_t> quant_range(DataType dtype, bool symmetric) {
  if (!is_int(dtype)) throw ValueError("quantize: a quantized dtype must be an integer type");
  const int bits = dtype_bits(dtype);
  const int64_t max_q = int64_t{1} << bits;
  int64_t lo, hi;
  if (is_unsigned_int(dtype)) {
    lo = 0;
    hi = max_q - 1 - (symmetric ? 1 : 0);
  } else {
    lo = -max_q / 2 + (symmetric ? 1 : 0);
    hi = max_q / 2 - 1;
  }
  return {static_cast<int32_t>(lo), static_cast<int32_t>(hi)};
}

std::optional<Quantized> quantize(const float* data, const std::vector<int64_t>& shape,
                                  DataType dtype, const QuantSpec& spec, std::string* skip_reason) {
  if (dtype != DataType::Float16 && dtype != DataType::Float32)
    throw ValueError("Only floating numpy arrays are supported.");
  auto blocks = blocks_of(shape, spec.block_sizes, skip_reason);
  if (!blocks) return std::nullopt;
  const Rounder r{dtype == DataType::Float16};
  const auto [qmin, qmax] = quant_range(spec.dtype, spec.symmetric);
  const int64_t cells = blocks->cells;
  std::vector<float> mn(cells, std::numeric_limits<float>::infinity());
  std::vector<float> mx(cells, -std::numeric_limits<float>::infinity());
  for_each_cell(*blocks, [&](int64_t i, int64_t c) {
    mn[c] = nan_min(mn[c], data[i]);
    mx[c] = nan_max(mx[c], data[i]);
  });
  Quantized q;
  q.param_shape = blocks->pshape;
  q.scale.resize(cells);
  std::vector<float> zp(cells, 0.0f);
  const bool has_zp = !spec.symmetric || is_unsigned_int(spec.dtype);
  const float range = r(static_cast<float>(qmax - qmin));
  for (int64_t c = 0; c < cells; ++c) {
    float lo, hi;
    if (spec.symmetric) {
      float m = nan_max(std::fabs(mn[c]), std::fabs(mx[c]));
      lo = -m;
      hi = m;
    } else {
      lo = nan_min(0.0f, mn[c]);
      hi = nan_max(0.0f, mx[c]);
    }
    q.scale[c] = r(r(hi - lo) / range);
    if (spec.symmetric && has_zp) {
      zp[c] = static_cast<float>(qmax / 2);
    } else if (!spec.symmetric) {
      float z = r(r(r(static_cast<float>(qmin) * hi) - r(static_cast<float>(qmax) * lo)) / r(hi - lo));
      z = std::nearbyint(z);
      if (!std::isnan(z)) z = std::min(std::max(z, static_cast<float>(qmin)), static_cast<float>(qmax));
      zp[c] = z;
    }
  }
  q.data.resize(static_cast<size_t>(std::max<int64_t>(0, [&] {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }())));
  for_each_cell(*blocks, [&](int64_t i, int64_t c) {
    float v = r(std::nearbyint(r(data[i] / q.scale[c])));
    if (has_zp) v = r(v + zp[c]);
    if (!std::isnan(v)) v = std::min(std::max(v, static_cast<float>(qmin)), static_cast<float>(qmax));
    q.data[static_cast<size_t>(i)] = to_int(v);
  });
  if (has_zp) {
    q.zero_point.resize(cells);
    for (int64_t c = 0; c < cells; ++c) q.zero_point[c] = to_int(zp[c]);
  }
  return q;
}

}  // namespace milkit::compress
