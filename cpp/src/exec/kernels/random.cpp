// Kernels of the random ops: random_bernoulli, random_categorical, random_normal, random_uniform.
//
// Every element draws from a counter-based generator: element i of a run with key K gets the
// 64-bit word mix(K + mix(i)) (splitmix64's finalizer), so the values do not depend on the thread
// count and a seed gives the same tensor on every run. seed = -1 (the default) means
// nondeterministic: the key comes from std::random_device on each run; any other seed is the key.
// Values are computed in double and rounded to the output dtype (fp16 or fp32).
// - bernoulli: 1 where u < prob, else 0. uniform: low + (high - low) * u in [low, high) (clamped
//   below high in the output dtype). normal: mean + stddev * z, z from Box-Muller over two words.
// - categorical: per distribution (x's last dim) `size` draws of a class index (as a float) with
//   probabilities softmax(x) (mode "logits") or x / sum(x) (mode "probs": coremltools applies log
//   then softmax).
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "../dispatch.h"
#include "kernels.h"
#include "milkit/exec/threads.h"

namespace milkit {

namespace {

inline uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// A uniform double in [0, 1) for counter i.
inline double uniform01(uint64_t key, uint64_t i) {
  return static_cast<double>(mix(key + mix(i)) >> 11) * 0x1.0p-53;
}

uint64_t run_key(KernelCtx& k) {
  int64_t seed = k.int_or("seed", -1);
  if (seed == -1) {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }
  return mix(static_cast<uint64_t>(seed) ^ 0x6d696c6b6974ULL);
}

/// The output shape from the run-time `shape` input.
std::vector<int64_t> out_shape(KernelCtx& k) {
  const Tensor& s = k.in("shape");
  if (s.rank() != 1) k.fail("input 'shape' must be a 1-D tensor, got shape " + shape_str(s.shape()));
  std::vector<int64_t> shape(static_cast<size_t>(s.numel()));
  for (int64_t i = 0; i < s.numel(); ++i) {
    shape[i] = static_cast<int64_t>(s.get(i));
    if (shape[i] < 0) k.fail("input 'shape' = " + shape_str(shape) + " has a negative dim");
  }
  shape_numel(shape);  // overflow check
  return shape;
}

double scalar_param(KernelCtx& k, const char* name, double def) {
  if (!k.has(name)) return def;
  const Tensor& t = k.in(name);
  if (t.numel() != 1) k.fail("input '" + std::string(name) + "' must be a scalar, got shape " + shape_str(t.shape()));
  return t.get(0);
}

/// Fills output 0 (fp16 or fp32) with f(i) for every element.
template <typename F>
void fill_out(KernelCtx& k, const std::vector<int64_t>& shape, F f) {
  DataType dt = k.out_dtype(0);
  Tensor& out = k.alloc(0, shape);
  int64_t n = out.numel();
  if (dt == DataType::Float32) {
    float* o = out.mutable_data<float>();
    parallel_for(n, 16384, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) o[i] = f(i, dt);
    });
  } else if (dt == DataType::Float16) {
    uint16_t* o = out.mutable_data<uint16_t>();
    parallel_for(n, 16384, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) o[i] = float_to_half(f(i, dt));
    });
  } else {
    k.fail("unsupported output dtype " + std::string(dtype_name(dt)));
  }
}

/// `v` rounded to dt, moved below `hi` if rounding reached it (for [lo, hi) intervals).
float below(double v, double lo, double hi, DataType dt) {
  float r = static_cast<float>(v);
  if (dt == DataType::Float16) r = half_to_float(float_to_half(r));
  if (hi > lo && r >= hi) {
    float h = static_cast<float>(hi);
    if (dt == DataType::Float16) {
      uint16_t b = float_to_half(h);
      // the next half toward -inf: for positive values one code down, for negative one up
      b = (h > 0) ? static_cast<uint16_t>(b - 1) : (h == 0 ? uint16_t{0x8001} : static_cast<uint16_t>(b + 1));
      r = std::max(half_to_float(b), static_cast<float>(lo));
    } else {
      r = std::max(std::nextafter(h, -std::numeric_limits<float>::infinity()), static_cast<float>(lo));
    }
  }
  return r;
}

void random_bernoulli(KernelCtx& k) {
  std::vector<int64_t> shape = out_shape(k);
  double p = scalar_param(k, "prob", 0.5);
  uint64_t key = run_key(k);
  fill_out(k, shape, [&](int64_t i, DataType) { return uniform01(key, static_cast<uint64_t>(i)) < p ? 1.0f : 0.0f; });
}

void random_uniform(KernelCtx& k) {
  std::vector<int64_t> shape = out_shape(k);
  double lo = scalar_param(k, "low", 0.0), hi = scalar_param(k, "high", 1.0);
  uint64_t key = run_key(k);
  fill_out(k, shape, [&](int64_t i, DataType dt) {
    return below(lo + (hi - lo) * uniform01(key, static_cast<uint64_t>(i)), lo, hi, dt);
  });
}

void random_normal(KernelCtx& k) {
  std::vector<int64_t> shape = out_shape(k);
  double mean = scalar_param(k, "mean", 0.0), sd = scalar_param(k, "stddev", 1.0);
  uint64_t key = run_key(k);
  fill_out(k, shape, [&](int64_t i, DataType) {
    double u1 = uniform01(key, 2 * static_cast<uint64_t>(i));
    double u2 = uniform01(key, 2 * static_cast<uint64_t>(i) + 1);
    double z = std::sqrt(-2.0 * std::log1p(-u1)) * std::cos(6.283185307179586 * u2);
    return static_cast<float>(mean + sd * z);
  });
}

void random_categorical(KernelCtx& k) {
  const Tensor& x = k.in("x");
  if (x.dtype() != DataType::Float32) k.fail("input 'x' must be fp16 or fp32");
  if (x.rank() < 1) k.fail("input 'x' must have rank >= 1 (distributions over its last dim), got a scalar");
  std::string mode = k.str_or("mode", "logits");
  if (mode != "logits" && mode != "probs") k.fail("mode \"" + mode + "\" is not supported (\"logits\" or \"probs\")");
  int64_t size = k.int_or("size", 1);
  if (size < 0) k.fail("size = " + std::to_string(size) + " must be non-negative");
  const int64_t K = x.dim(-1), rows = K ? x.numel() / K : 0;
  std::vector<int64_t> shape(x.shape().begin(), x.shape().end() - 1);
  shape.push_back(size);
  if (size > 0 && K == 0 && shape_numel(shape) > 0) k.fail("input 'x' has no classes (last dim 0)");
  // the cumulative distribution of every row
  std::vector<double> cdf(static_cast<size_t>(rows * K));
  const float* xp = x.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = xp + r * K;
    double* c = cdf.data() + r * K;
    double sum = 0;
    if (mode == "probs") {
      for (int64_t j = 0; j < K; ++j) {
        if (!(row[j] >= 0) || std::isinf(row[j]))
          k.fail("mode \"probs\": input 'x' must hold finite non-negative probabilities, got " +
                 std::to_string(row[j]) + " in distribution " + std::to_string(r));
        sum += row[j];
        c[j] = sum;
      }
    } else {
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < K; ++j) {
        if (std::isnan(row[j]) || row[j] == std::numeric_limits<float>::infinity())
          k.fail("mode \"logits\": input 'x' holds " + std::to_string(row[j]) + " in distribution " +
                 std::to_string(r));
        mx = std::max(mx, static_cast<double>(row[j]));
      }
      for (int64_t j = 0; j < K; ++j) {
        sum += std::exp(static_cast<double>(row[j]) - mx);
        c[j] = sum;
      }
    }
    if (!(sum > 0))
      k.fail("input 'x' gives an empty distribution (all probabilities 0) in distribution " + std::to_string(r));
    for (int64_t j = 0; j < K; ++j) c[j] /= sum;
  }
  uint64_t key = run_key(k);
  fill_out(k, shape, [&](int64_t i, DataType) {
    const double* c = cdf.data() + (i / size) * K;
    double u = uniform01(key, static_cast<uint64_t>(i));
    int64_t j = std::upper_bound(c, c + K, u) - c;
    // a class of probability 0 at the end is never drawn; rounding may leave the last cdf < 1
    if (j >= K) j = K - 1;
    while (j > 0 && c[j] == c[j - 1]) --j;
    return static_cast<float>(j);
  });
}

}  // namespace

void register_random_kernels(KernelRegistry& r) {
  // no fp32 detour: the outputs are rounded to their own dtype here (uniform stays below high)
  r.add("random_bernoulli", {random_bernoulli, false});
  r.add("random_categorical", {random_categorical, true});
  r.add("random_normal", {random_normal, false});
  r.add("random_uniform", {random_uniform, false});
}

}  // namespace milkit
