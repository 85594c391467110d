// Linear quantization of a weight, reproducing coremltools' compute_qparams_by_dtype /
// quantize_weight_by_dtype step by step in the weight's numpy dtype: for fp16 weights every
// arithmetic step is done in fp32 and rounded to fp16, as numpy's float16 loops do; python int
// operands are "weak" (NEP 50) and take the array's dtype.
#include "milkit/compress/quantize.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "milkit/exec/threads.h"
#include "milkit/types/error.h"
#include "numerics.h"

namespace milkit::compress {

namespace {

/// Rounds a float to the arithmetic dtype (fp16 or fp32).
struct Rounder {
  bool half;
  float operator()(float v) const { return half ? detail::r16(v) : v; }
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

/// The same blocks with the trailing axes that are not blocked (one block along each) folded into
/// the last blocked axis (its length and block size times theirs; one axis for a weight that is
/// not blocked at all): rows become as long as they can be, cells keep their indices.
Blocks merged(const Blocks& b) {
  size_t keep = b.shape.size();
  while (keep > 0 && b.pshape[keep - 1] == 1) --keep;
  if (keep == b.shape.size()) return b;
  int64_t tail = 1;
  for (size_t a = keep; a < b.shape.size(); ++a) tail *= b.shape[a];
  Blocks m;
  m.cells = b.cells;
  if (keep == 0) {
    m.shape = {tail};
    m.block = {tail};
    m.pshape = {1};
    return m;
  }
  m.shape.assign(b.shape.begin(), b.shape.begin() + static_cast<std::ptrdiff_t>(keep));
  m.block.assign(b.block.begin(), b.block.begin() + static_cast<std::ptrdiff_t>(keep));
  m.pshape.assign(b.pshape.begin(), b.pshape.begin() + static_cast<std::ptrdiff_t>(keep));
  m.shape.back() *= tail;
  m.block.back() *= tail;
  return m;
}

/// Calls fn(first element, count, first cell, elements per cell along the run) for runs along
/// the last axis, in order when serial. `parallel`: rows over the thread pool; `split`: long rows
/// cut into pieces too (at block boundaries, or anywhere inside a single block), for callers whose
/// pieces may write the same cell's outputs but not its reductions.
template <class Fn>
void for_each_row(const Blocks& b, bool parallel, bool split, Fn fn) {
  const size_t rank = b.shape.size();
  if (rank == 0) {
    fn(0, 1, 0, 1);
    return;
  }
  const int64_t last = b.shape.back(), lblock = b.block.back();
  int64_t rows = 1;
  for (size_t a = 0; a + 1 < rank; ++a) rows *= b.shape[a];
  constexpr int64_t kPiece = 65536;
  // piece length: any cut inside one block, else whole blocks
  const int64_t piece = !split           ? last
                        : lblock >= last ? kPiece
                                         : lblock * std::max<int64_t>(1, kPiece / lblock);
  const int64_t pieces = std::max<int64_t>(1, (last + piece - 1) / piece);
  auto run = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r = t / pieces, s = (t % pieces) * piece;
      int64_t rem = r, cell = 0;
      int64_t stride = b.pshape.back();
      for (size_t a = rank - 1; a-- > 0;) {
        const int64_t x = rem % b.shape[a];
        rem /= b.shape[a];
        cell += (x / b.block[a]) * stride;
        stride *= b.pshape[a];
      }
      fn(r * last + s, std::min(piece, last - s), cell + (lblock >= last ? 0 : s / lblock), lblock);
    }
  };
  const int64_t tasks = rows * pieces;
  if (parallel && tasks > 1)
    parallel_for(tasks, std::max<int64_t>(1, kPiece / std::max<int64_t>(1, std::min(piece, last))),
                 run);
  else
    run(0, tasks);
}

/// Rounds to the nearest integer, ties to even (np.round / rint in the default rounding mode).
inline float round_even(float v) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: adding it leaves no fraction bits
  return std::fabs(v) < 4194304.0f ? (v + kMagic) - kMagic : v;
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
  // rows share cells unless every leading axis has blocks of 1 (per channel, per block): only then
  // are rows reduced in parallel
  const Blocks runs = merged(*blocks);
  bool rows_own_cells = true;
  for (size_t a = 0; a + 1 < runs.shape.size(); ++a)
    rows_own_cells = rows_own_cells && runs.block[a] == 1;
  std::vector<uint8_t> has_nan(cells, 0);
  for_each_row(runs, rows_own_cells, false, [&](int64_t i0, int64_t n, int64_t c0, int64_t lb) {
    for (int64_t j0 = 0, c = c0; j0 < n; j0 += lb, ++c) {
      float lo = mn[c], hi = mx[c];
      bool nan = false;
      const float* p = data + i0;
      for (int64_t j = j0, e = std::min(j0 + lb, n); j < e; ++j) {
        const float v = p[j];
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        nan = nan || v != v;
      }
      mn[c] = lo;
      mx[c] = hi;
      if (nan) has_nan[c] = 1;
    }
  });
  for (int64_t c = 0; c < cells; ++c)
    if (has_nan[c]) mn[c] = mx[c] = NAN;  // numpy's amin / amax propagate NaN
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
      float z =
          r(r(r(static_cast<float>(qmin) * hi) - r(static_cast<float>(qmax) * lo)) / r(hi - lo));
      z = std::nearbyint(z);
      if (!std::isnan(z))
        z = std::min(std::max(z, static_cast<float>(qmin)), static_cast<float>(qmax));
      zp[c] = z;
    }
  }
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  q.data.resize(static_cast<size_t>(std::max<int64_t>(0, n)));
  const float lo_q = static_cast<float>(qmin), hi_q = static_cast<float>(qmax);
  // w / scale is rounded to the dtype (for fp16 in chunks, with the CPU's conversion); after it
  // numpy's further fp16 roundings (of the rounded integer, and of it plus the zero point) only
  // change values beyond 2048 in magnitude, which the clip to the 8-bit range maps the same way
  const bool half = dtype == DataType::Float16;
  for_each_row(runs, true, true, [&](int64_t i0, int64_t cnt, int64_t c0, int64_t lb) {
    uint8_t* out = q.data.data() + i0;
    const float* p = data + i0;
    constexpr int64_t kChunk = 1024;
    float t[kChunk];
    uint16_t h[kChunk];
    for (int64_t j0 = 0, c = c0; j0 < cnt; j0 += lb, ++c) {
      const float sc = q.scale[c], z = zp[c];
      for (int64_t k0 = j0, e = std::min(j0 + lb, cnt); k0 < e; k0 += kChunk) {
        const int64_t m = std::min(kChunk, e - k0);
        for (int64_t k = 0; k < m; ++k) t[k] = p[k0 + k] / sc;
        if (half) {
          floats_to_halves(t, h, static_cast<size_t>(m));
          halves_to_floats(h, t, static_cast<size_t>(m));
        }
        for (int64_t k = 0; k < m; ++k) {
          float v = round_even(t[k]);
          if (has_zp) v += z;
          v = std::min(std::max(v, lo_q), hi_q);  // NaN stays NaN
          out[k0 + k] = static_cast<uint8_t>(v == v ? static_cast<int32_t>(v) : 0);
        }
      }
    }
  });
  if (has_zp) {
    q.zero_point.resize(cells);
    for (int64_t c = 0; c < cells; ++c) q.zero_point[c] = to_int(zp[c]);
  }
  return q;
}

}  // namespace milkit::compress
