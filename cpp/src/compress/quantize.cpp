// Linear quantization of a weight, reproducing coremltools' compute_qparams_by_dtype /
// quantize_weight_by_dtype step by step in the weight's numpy dtype: for fp16 weights every
// arithmetic step is done in fp32 and rounded to fp16, as numpy's float16 loops do; python int
// operands are "weak" (NEP 50) and take the array's dtype.
#include "milkit/compress/quantize.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <tuple>

#include "milkit/exec/threads.h"
#include "milkit/ir/value.h"
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

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

/// A block's scale and zero point from its minimum and maximum (coremltools'
/// compute_qparams_by_dtype, in the weight's dtype).
struct CellParams {
  Rounder r;
  bool symmetric, has_zp;
  int32_t qmin, qmax;
  float range;
  CellParams(bool half, const QuantSpec& spec) : r{half}, symmetric(spec.symmetric) {
    std::tie(qmin, qmax) = quant_range(spec.dtype, spec.symmetric);
    has_zp = !spec.symmetric || is_unsigned_int(spec.dtype);
    range = r(static_cast<float>(qmax - qmin));
  }
  /// `nan`: the block holds a NaN (numpy's amin / amax propagate it).
  void operator()(float mn, float mx, bool nan, float& scale, float& zp) const {
    if (nan) mn = mx = NAN;
    float lo, hi;
    if (symmetric) {
      float m = nan_max(std::fabs(mn), std::fabs(mx));
      lo = -m;
      hi = m;
    } else {
      lo = nan_min(0.0f, mn);
      hi = nan_max(0.0f, mx);
    }
    scale = r(r(hi - lo) / range);
    zp = 0.0f;
    if (symmetric && has_zp) {
      zp = static_cast<float>(qmax / 2);
    } else if (!symmetric) {
      float z =
          r(r(r(static_cast<float>(qmin) * hi) - r(static_cast<float>(qmax) * lo)) / r(hi - lo));
      z = std::nearbyint(z);
      if (!std::isnan(z))
        z = std::min(std::max(z, static_cast<float>(qmin)), static_cast<float>(qmax));
      zp = z;
    }
  }
  QuantStep step(float scale, float zp, bool half) const {
    QuantStep s;
    s.scale = scale;
    s.zero = zp;
    s.has_zero = has_zp;
    s.half = half;
    s.qmin = static_cast<float>(qmin);
    s.qmax = static_cast<float>(qmax);
    return s;
  }
};

/// quantize() over fp32 values or fp16 raw bits (`half`: the weight's dtype is Float16).
template <class T>
std::optional<Quantized> quantize_values(const T* data, const std::vector<int64_t>& shape,
                                         bool half, const QuantSpec& spec, std::string* skip_reason,
                                         bool* has_inf) {
  auto blocks = blocks_of(shape, spec.block_sizes, skip_reason);
  if (!blocks) return std::nullopt;
  const CellParams params(half, spec);
  const int64_t cells = blocks->cells;
  Quantized q;
  q.param_shape = blocks->pshape;
  q.scale.resize(cells);
  std::vector<float> zp(cells, 0.0f);
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  // w / scale is rounded to the dtype (for fp16 with the CPU's conversion); after it numpy's
  // further fp16 roundings (of the rounded integer, and of it plus the zero point) only change
  // values beyond 2048 in magnitude, which the clip to the 8-bit range maps the same way
  const Blocks runs = merged(*blocks);
  bool rows_own_cells = true;
  for (size_t a = 0; a + 1 < runs.shape.size(); ++a)
    rows_own_cells = rows_own_cells && runs.block[a] == 1;
  // a block of the last axis shorter than it: rows are cut into pieces of whole blocks
  const int64_t last = runs.shape.empty() ? 1 : runs.shape.back();
  const int64_t lblock = runs.block.empty() ? 1 : runs.block.back();
  const bool pieces = lblock < last;
  const bool fused = rows_own_cells && (runs.shape.size() > 1 || pieces);
  // 4-bit values packed piece by piece, where every piece starts on a byte
  q.packed = fused && spec.allow_packed && dtype_bits(spec.dtype) == 4 && last % 2 == 0 &&
             (!pieces || lblock % 2 == 0);
  numel = std::max<int64_t>(0, numel);
  q.data.resize(static_cast<size_t>(q.packed ? numel / 2 : numel));
  if (fused) {
    // every leading axis has blocks of 1 (per channel, per block): each row's blocks are its own,
    // so one parallel pass reduces, sets the parameters of and quantizes a row (or a piece of
    // whole blocks) while it is in the cache
    std::atomic<bool> inf{false};
    for_each_row(runs, true, pieces, [&](int64_t i0, int64_t n, int64_t c0, int64_t lb) {
      thread_local std::vector<uint8_t> row, nan;
      thread_local std::vector<float> lo, hi;
      thread_local std::vector<QuantStep> steps;
      if (q.packed) row.resize(static_cast<size_t>(n));
      uint8_t* out = q.packed ? row.data() : q.data.data() + i0;
      // the piece's blocks reduced, given their parameters, then quantized (block sizes divide
      // their axes, so a piece holds whole blocks; a shorter last one would go alone)
      const int64_t whole = n / lb, rest = n - whole * lb, nb = whole + (rest > 0 ? 1 : 0);
      lo.assign(static_cast<size_t>(nb), kInf);
      hi.assign(static_cast<size_t>(nb), -kInf);
      nan.resize(static_cast<size_t>(nb));
      steps.resize(static_cast<size_t>(nb));
      min_max_blocks(data + i0, whole, lb, lo.data(), hi.data(), nan.data());
      if (rest) nan[whole] = min_max_run(data + i0 + whole * lb, rest, lo[whole], hi[whole]);
      for (int64_t b = 0; b < nb; ++b) {
        const int64_t c = c0 + b;
        if (has_inf && (lo[b] == -kInf || hi[b] == kInf)) inf = true;
        params(lo[b], hi[b], nan[b] != 0, q.scale[c], zp[c]);
        steps[b] = params.step(q.scale[c], zp[c], half);
      }
      quantize_blocks(data + i0, whole, lb, steps.data(), out);
      if (rest) quantize_run(data + i0 + whole * lb, rest, steps[whole], out + whole * lb);
      if (q.packed) pack_bits(out, static_cast<size_t>(n), 4, q.data.data() + i0 / 2);
    });
    if (has_inf) *has_inf = inf;
    if (inf) return std::nullopt;
  } else {
    // rows share blocks (reduced in order), or there is one row
    std::vector<float> mn(cells, kInf), mx(cells, -kInf);
    std::vector<uint8_t> has_nan(cells, 0);
    for_each_row(runs, false, false, [&](int64_t i0, int64_t n, int64_t c0, int64_t lb) {
      for (int64_t j0 = 0, c = c0; j0 < n; j0 += lb, ++c)
        if (min_max_run(data + i0 + j0, std::min(lb, n - j0), mn[c], mx[c])) has_nan[c] = 1;
    });
    if (has_inf) {
      // the minimum and maximum leave NaNs out, so an inf shows in them (a block of NaNs only
      // keeps its starting +inf / -inf, the other way round)
      bool inf = false;
      for (int64_t c = 0; c < cells; ++c) inf = inf || mn[c] == -kInf || mx[c] == kInf;
      *has_inf = inf;
      if (inf) return std::nullopt;
    }
    for (int64_t c = 0; c < cells; ++c) params(mn[c], mx[c], has_nan[c] != 0, q.scale[c], zp[c]);
    for_each_row(runs, true, true, [&](int64_t i0, int64_t cnt, int64_t c0, int64_t lb) {
      for (int64_t j0 = 0, c = c0; j0 < cnt; j0 += lb, ++c)
        quantize_run(data + i0 + j0, std::min(lb, cnt - j0), params.step(q.scale[c], zp[c], half),
                     q.data.data() + i0 + j0);
    });
  }
  if (params.has_zp) {
    q.zero_point.resize(cells);
    for (int64_t c = 0; c < cells; ++c) q.zero_point[c] = to_int(zp[c]);
  }
  return q;
}

}  // namespace

std::optional<Quantized> quantize(const float* data, const std::vector<int64_t>& shape,
                                  DataType dtype, const QuantSpec& spec, std::string* skip_reason,
                                  bool* has_inf) {
  if (dtype != DataType::Float16 && dtype != DataType::Float32)
    throw ValueError("Only floating numpy arrays are supported.");
  return quantize_values(data, shape, dtype == DataType::Float16, spec, skip_reason, has_inf);
}

std::optional<Quantized> quantize(const uint16_t* halves, const std::vector<int64_t>& shape,
                                  const QuantSpec& spec, std::string* skip_reason, bool* has_inf) {
  return quantize_values(halves, shape, true, spec, skip_reason, has_inf);
}

}  // namespace milkit::compress
