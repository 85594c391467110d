// Weight pruning numerics (coremltools' prune_weights.compress_by_threshold / _by_magnitude /
// _by_nm_sparsity).
#include "milkit/compress/prune.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "milkit/types/error.h"
#include "numerics.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

namespace milkit::compress {

using detail::fix;

namespace {

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// A Python float as numpy uses it against an array of `dt` (cast to the array's type; int arrays
// compare in float64).
double as_operand(DataType dt, double x) {
  if (dt == DataType::Float16) return detail::d2h(x);
  if (dt == DataType::Float32) return static_cast<float>(x);
  return x;
}

std::optional<std::vector<float>> by_threshold(const WeightView& w, const PruneSpec& s,
                                               std::string* skip_reason) {
  const int64_t n = numel(w.shape);
  const double t = as_operand(w.dtype, s.threshold);
  std::vector<float> out(w.data, w.data + n);
  int64_t zeros = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::fabs(static_cast<double>(out[i])) <= t) out[i] = 0.0f;
    zeros += out[i] == 0.0f;
  }
  const double sparsity = static_cast<double>(zeros) / static_cast<double>(n);
  if (sparsity < s.minimum_sparsity) {
    if (skip_reason)
      *skip_reason = "weight value has sparsity of " + std::to_string(sparsity) +
                     " < minimum_sparsity_percentile " + std::to_string(s.minimum_sparsity);
    return std::nullopt;
  }
  return out;
}

// Block magnitudes: the L2 norm over each run of `block` channels on `dim` (the last run padded
// with zeros), numpy's arithmetic: squares, a sequential sum over the block, sqrt, each rounded
// to the dtype.
std::vector<float> block_magnitudes(const WeightView& w, int64_t block, int dim) {
  const std::vector<int64_t>& sh = w.shape;
  const int64_t c0 = sh[0], c1 = sh[1], rest = numel(sh) / (c0 * c1);
  const int64_t channels = dim == 0 ? c0 : c1, others = dim == 0 ? c1 : c0;
  auto at = [&](int64_t ch, int64_t o, int64_t r) {
    int64_t i0 = dim == 0 ? ch : o, i1 = dim == 0 ? o : ch;
    return (i0 * c1 + i1) * rest + r;
  };
  const DataType dt = w.dtype;
  std::vector<float> mag(numel(sh));
  for (int64_t b0 = 0; b0 < channels; b0 += block)
    for (int64_t o = 0; o < others; ++o)
      for (int64_t r = 0; r < rest; ++r) {
        float acc = 0;
        for (int64_t ch = b0; ch < std::min(channels, b0 + block); ++ch) {
          float a = std::fabs(w.data[at(ch, o, r)]);
          acc = fix(dt, acc + fix(dt, a * a));
        }
        float norm = fix(dt, std::sqrt(acc));
        for (int64_t ch = b0; ch < std::min(channels, b0 + block); ++ch) mag[at(ch, o, r)] = norm;
      }
  return mag;
}

// The order statistics np.percentile(x, q) interpolates between for n values (linear method):
// ranks lo <= hi and the weight of the upper one.
struct Ranks {
  int64_t lo = 0, hi = 0;
  double gamma = 0;
};

Ranks ranks_of(int64_t n, double q) {
  Ranks r;
  const double virt = static_cast<double>(n - 1) * (q / 100.0);
  r.lo = static_cast<int64_t>(std::floor(virt));
  r.gamma = virt - static_cast<double>(r.lo);
  if (virt >= static_cast<double>(n - 1)) r.lo = n - 1;
  if (virt < 0) r.lo = 0;
  r.hi = virt >= static_cast<double>(n - 1) ? n - 1 : (virt < 0 ? 0 : r.lo + 1);
  return r;
}

// The value between order statistics a <= b, in the dtype's arithmetic (the weight a Python
// float, cast to the dtype).
float interpolate(float a, float b, double gamma, DataType dt) {
  if (dt == DataType::Int32) {
    double d = static_cast<double>(b) - a;
    return static_cast<float>(gamma >= 0.5 ? b - d * (1 - gamma) : a + d * gamma);
  }
  const float diff = fix(dt, b - a);
  if (gamma >= 0.5)
    return fix(dt, b - fix(dt, diff * static_cast<float>(as_operand(dt, 1 - gamma))));
  return fix(dt, a + fix(dt, diff * static_cast<float>(as_operand(dt, gamma))));
}

// Order statistics lo and hi of fp16 magnitudes from their count by bit pattern (sign cleared):
// the patterns of non-negative halves sort like their values.
std::pair<float, float> half_order_stats(const std::vector<int64_t>& hist, const Ranks& r) {
  auto kth = [&](int64_t k) {
    int64_t seen = 0;
    for (uint32_t h = 0; h < 0x8000; ++h) {
      seen += hist[h];
      if (seen > k) return half_to_float(static_cast<uint16_t>(h));
    }
    return half_to_float(0x7C00);
  };
  const float a = kth(r.lo);
  return {a, r.hi == r.lo ? a : kth(r.hi)};
}

// np.percentile(x, q) with the default linear method, in the dtype's arithmetic (q a Python
// float: the interpolation weight is cast to the dtype), of the n values at x, or of their
// magnitudes when `absolute` (without a copy of them where the dtype allows).
float percentile(const float* x, int64_t n, bool absolute, double q, DataType dt) {
  for (int64_t i = 0; i < n; ++i)
    if (std::isnan(x[i])) return NAN;
  const Ranks r = ranks_of(n, q);
  float a, b;
  if (dt == DataType::Float16 &&
      (absolute || std::all_of(x, x + n, [](float v) { return !(v < 0); }))) {
    // magnitudes of fp16 values: the two order statistics come from a count over the 31744
    // finite patterns (and inf) instead of a selection; rounding to fp16 is symmetric, so the
    // sign bit cleared is the magnitude's
    std::vector<int64_t> hist(0x8000, 0);
    uint16_t h[1024];
    for (int64_t i0 = 0; i0 < n; i0 += 1024) {
      const size_t m = static_cast<size_t>(std::min<int64_t>(1024, n - i0));
      floats_to_halves(x + i0, h, m);
      for (size_t k = 0; k < m; ++k) ++hist[h[k] & 0x7FFF];
    }
    std::tie(a, b) = half_order_stats(hist, r);
  } else {
    std::vector<float> y(x, x + n);
    if (absolute)
      for (float& v : y) v = std::fabs(v);
    std::nth_element(y.begin(), y.begin() + r.lo, y.end());
    a = y[r.lo];
    b = r.hi == r.lo ? a : *std::min_element(y.begin() + r.lo + 1, y.end());
  }
  return interpolate(a, b, r.gamma, dt);
}

std::optional<std::vector<float>> by_magnitude(const WeightView& w, const PruneSpec& s,
                                               std::string* skip_reason) {
  const int64_t n = numel(w.shape);
  std::vector<float> mag;  // block magnitudes; element magnitudes are read from the weight
  if (s.block_size != 0) {
    const int rank = static_cast<int>(w.shape.size());
    if (s.dim != 0 && s.dim != 1) throw ValueError("prune: block sparsity supports dim 0 or 1");
    if (rank < 2 || rank > 5) throw ValueError("prune: block sparsity needs a weight of rank 2-5");
    const int64_t channels = w.shape[s.dim];
    if (static_cast<double>(s.block_size) > static_cast<double>(channels) / 2) {
      if (skip_reason)
        *skip_reason =
            "block_size > channel / 2 is not applicable for block sparsity. Got "
            "block_size = " +
            std::to_string(s.block_size) + ", channel = " + std::to_string(channels);
      return std::nullopt;
    }
    mag = block_magnitudes(w, s.block_size, s.dim);
  }
  const bool blocks = !mag.empty();
  std::vector<float> out(w.data, w.data + n);
  const double q = s.target_sparsity * 100;
  if (q == 100) {
    for (float& v : out) v *= 0.0f;  // keeps -0 for negatives and NaN for NaN
  } else if (q != 0) {
    const float p = blocks ? percentile(mag.data(), n, false, q, w.dtype)
                           : percentile(w.data, n, true, q, w.dtype);
    for (int64_t i = 0; i < n; ++i)
      if ((blocks ? mag[i] : std::fabs(w.data[i])) <= p) out[i] = 0.0f;
  }
  return out;
}

std::optional<std::vector<float>> by_nm(const WeightView& w, const PruneSpec& s,
                                        std::string* skip_reason) {
  const int rank = static_cast<int>(w.shape.size());
  if (s.dim != 0 && s.dim != 1) throw ValueError("prune: n:m pruning supports dim 0 or 1");
  if (rank < 2 || rank > 5) throw ValueError("prune: n:m pruning needs a weight of rank 2-5");
  if (s.m < 1 || s.n < 0 || s.n > s.m) throw ValueError("prune: n:m needs 0 <= n <= m, m >= 1");
  const int64_t c0 = w.shape[0], c1 = w.shape[1], rest = numel(w.shape) / (c0 * c1);
  // runs go along the input channels (dim 1) or the output channels (dim 0)
  const int64_t channels = s.dim == 1 ? c1 : c0, others = s.dim == 1 ? c0 : c1;
  if (static_cast<double>(s.m) > static_cast<double>(channels) / 2) {
    if (skip_reason)
      *skip_reason =
          "m > channel / 2 is not applicable for n:m pruning. Got m = " + std::to_string(s.m) +
          ", channel = " + std::to_string(channels);
    return std::nullopt;
  }
  auto at = [&](int64_t o, int64_t ch, int64_t r) {
    int64_t i0 = s.dim == 1 ? o : ch, i1 = s.dim == 1 ? ch : o;
    return (i0 * c1 + i1) * rest + r;
  };
  std::vector<float> out(w.data, w.data + numel(w.shape));
  std::vector<float> mag(s.m);
  std::vector<int> order(s.m);
  auto less = [&](int a, int b) {
    float x = mag[a], y = mag[b];
    return x < y || (std::isnan(y) && !std::isnan(x));
  };
  for (int64_t r = 0; r < rest; ++r)
    for (int64_t o = 0; o < others; ++o)
      for (int64_t b0 = 0; b0 < channels; b0 += s.m) {
        for (int j = 0; j < s.m; ++j) {
          int64_t ch = b0 + j;
          mag[j] = ch < channels ? std::fabs(w.data[at(o, ch, r)]) : 0.0f;  // zero padding
          order[j] = j;
        }
        std::stable_sort(order.begin(), order.end(), less);
        for (int j = 0; j < s.n; ++j) {
          int64_t ch = b0 + order[j];
          if (ch < channels) out[at(o, ch, r)] *= 0.0f;
        }
      }
  return out;
}

}  // namespace

namespace {

// The magnitude pattern at most which fp16 values are pruned (zeros always leave the non-zero
// data), from the count of each magnitude pattern; `hist` is filled (left empty where the
// sparsity needs no count).
uint32_t half_cut(const uint16_t* h, int64_t n, double target_sparsity,
                  std::vector<int64_t>& hist) {
  const double q = target_sparsity * 100;
  if (q == 100) return 0x7BFF;  // every finite value times 0 is 0; inf and NaN times 0 are NaN
  if (q == 0 || n <= 0) return 0;
  hist.assign(0x8000, 0);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    ++hist[h[i] & 0x7FFF];
    ++hist[h[i + 1] & 0x7FFF];
    ++hist[h[i + 2] & 0x7FFF];
    ++hist[h[i + 3] & 0x7FFF];
  }
  for (; i < n; ++i) ++hist[h[i] & 0x7FFF];
  for (uint32_t m = 0x7C01; m < 0x8000; ++m)
    if (hist[m] != 0) return 0;  // a NaN percentile prunes nothing
  const Ranks r = ranks_of(n, q);
  auto [a, b] = half_order_stats(hist, r);
  const float p = interpolate(a, b, r.gamma, DataType::Float16);
  return std::isnan(p) ? 0 : float_to_half(std::fabs(p));
}

// Mask bits and kept values of elements [0, n) from `i0` on, scalar; returns the count kept.
// `out` has room for one more value than are kept (each value is written, then kept or not).
int64_t sparse_scalar(const uint16_t* h, int64_t i0, int64_t n, uint32_t last, uint8_t* mask,
                      uint16_t* out) {
  int64_t j = 0;
  for (int64_t i = i0; i < n; ++i) {
    const uint32_t keep = (h[i] & 0x7FFFu) > last ? 1u : 0u;
    mask[i / 8] = static_cast<uint8_t>(mask[i / 8] | (keep << (i % 8)));
    out[j] = h[i];
    j += keep;
  }
  return j;
}

#if defined(__GNUC__) && defined(__x86_64__)
#define MILKIT_PRUNE_AVX2 1

bool cpu_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
  return yes;
}

// For each 8-bit keep mask, the byte shuffle that moves the kept halves of 8 to the front.
struct CompactTable {
  alignas(16) uint8_t shuffle[256][16];
  CompactTable() {
    for (int m = 0; m < 256; ++m) {
      int k = 0;
      for (int e = 0; e < 8; ++e)
        if (m & (1 << e)) {
          shuffle[m][2 * k] = static_cast<uint8_t>(2 * e);
          shuffle[m][2 * k + 1] = static_cast<uint8_t>(2 * e + 1);
          ++k;
        }
      for (int b = 2 * k; b < 16; ++b) shuffle[m][b] = 0x80;
    }
  }
};

// Whole groups of 16 elements: the mask bytes and the kept values (each group's store may write
// up to 16 bytes past the values it keeps); returns the elements done and the count kept.
__attribute__((target("avx2,popcnt"))) std::pair<int64_t, int64_t> sparse_avx2(
    const uint16_t* h, int64_t n, uint32_t last, uint8_t* mask, uint16_t* out) {
  static const CompactTable table;
  const __m256i magnitude = _mm256_set1_epi16(0x7FFF);
  const __m256i cut = _mm256_set1_epi16(static_cast<int16_t>(last));
  int64_t i = 0, j = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i));
    // magnitudes and the cut are below 0x8000, so the signed compare orders them
    const __m256i keep = _mm256_cmpgt_epi16(_mm256_and_si256(x, magnitude), cut);
    const auto bits = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_packs_epi16(keep, keep)));
    const uint32_t m0 = bits & 0xFF, m1 = (bits >> 16) & 0xFF;
    mask[i / 8] = static_cast<uint8_t>(m0);
    mask[i / 8 + 1] = static_cast<uint8_t>(m1);
    const __m128i lo = _mm256_castsi256_si128(x), hi = _mm256_extracti128_si256(x, 1);
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(out + j),
        _mm_shuffle_epi8(lo, _mm_load_si128(reinterpret_cast<const __m128i*>(table.shuffle[m0]))));
    j += _mm_popcnt_u32(m0);
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(out + j),
        _mm_shuffle_epi8(hi, _mm_load_si128(reinterpret_cast<const __m128i*>(table.shuffle[m1]))));
    j += _mm_popcnt_u32(m1);
  }
  return {i, j};
}
#endif

}  // namespace

std::vector<uint8_t> magnitude_keep_half(const uint16_t* h, int64_t n, double target_sparsity) {
  std::vector<int64_t> hist;
  const uint32_t last = half_cut(h, n, target_sparsity, hist);
  std::vector<uint8_t> keep(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) keep[static_cast<size_t>(i)] = (h[i] & 0x7FFFu) > last;
  return keep;
}

SparseHalves magnitude_sparse_half(const uint16_t* h, int64_t n, double target_sparsity,
                                   bool vector) {
  std::vector<int64_t> hist;
  const uint32_t last = half_cut(h, n, target_sparsity, hist);
  SparseHalves r;
  if (hist.empty()) {
    for (int64_t i = 0; i < n; ++i) r.count += (h[i] & 0x7FFFu) > last;
  } else {
    for (uint32_t m = last + 1; m < 0x8000; ++m) r.count += hist[m];
  }
  r.mask.assign(static_cast<size_t>((std::max<int64_t>(n, 0) + 7) / 8), 0);
  // room for the stores past the last kept value (16 bytes), cut off after
  r.nonzero.resize(static_cast<size_t>(r.count + 8) * 2);
  auto* out = reinterpret_cast<uint16_t*>(r.nonzero.data());
  int64_t i = 0, j = 0;
#ifdef MILKIT_PRUNE_AVX2
  if (vector && cpu_avx2()) std::tie(i, j) = sparse_avx2(h, n, last, r.mask.data(), out);
#endif
  (void)vector;
  j += sparse_scalar(h, i, n, last, r.mask.data(), out + j);
  if (j != r.count) throw ValueError("prune: kept values do not match their count");
  r.nonzero.resize(static_cast<size_t>(r.count) * 2);
  return r;
}

std::optional<std::vector<float>> prune(const WeightView& w, const PruneSpec& s,
                                        std::string* skip_reason) {
  if (w.dtype != DataType::Float16 && w.dtype != DataType::Float32 && w.dtype != DataType::Int32)
    throw ValueError("prune: weights must be fp16, fp32 or int32");
  if (numel(w.shape) == 0) {
    if (skip_reason) *skip_reason = "the weight is empty";
    return std::nullopt;
  }
  switch (s.kind) {
    case PruneSpec::Threshold:
      return by_threshold(w, s, skip_reason);
    case PruneSpec::Magnitude:
      return by_magnitude(w, s, skip_reason);
    case PruneSpec::NM:
      return by_nm(w, s, skip_reason);
  }
  throw ValueError("prune: unknown kind");
}

}  // namespace milkit::compress
