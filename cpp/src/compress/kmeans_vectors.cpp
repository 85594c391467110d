// Deterministic k-means for vector palettization: greedy k-means++ seeding and Lloyd iterations.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "milkit/compress/kmeans.h"
#include "milkit/types/error.h"

namespace milkit::compress {

namespace {

// splitmix64: a small fixed-seed generator, the same sequence on every platform
struct Rng {
  uint64_t s;
  double uniform() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
  }
};

double dist2(const double* a, const double* b, int dim) {
  double s = 0;
  for (int d = 0; d < dim; ++d) s += (a[d] - b[d]) * (a[d] - b[d]);
  return s;
}

// index of the first point whose cumulative weight exceeds r (the last one when rounding runs out)
int64_t pick(const std::vector<double>& w, double r) {
  double acc = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    acc += w[i];
    if (acc > r) return static_cast<int64_t>(i);
  }
  return static_cast<int64_t>(w.size()) - 1;
}

std::vector<double> seed(const double* x, int64_t n, int dim, int k, Rng* rng) {
  std::vector<double> c(static_cast<size_t>(k) * dim);
  int64_t first = std::min<int64_t>(n - 1, static_cast<int64_t>(rng->uniform() * n));
  std::copy(x + first * dim, x + (first + 1) * dim, c.begin());
  std::vector<double> closest(n), trial(n);
  double pot = 0;
  for (int64_t i = 0; i < n; ++i) pot += closest[i] = dist2(x + i * dim, c.data(), dim);
  const int trials = 2 + static_cast<int>(std::log(static_cast<double>(k)));
  for (int j = 1; j < k; ++j) {
    int64_t best = -1;
    double best_pot = std::numeric_limits<double>::infinity();
    for (int t = 0; t < trials; ++t) {
      int64_t cand = pot > 0 ? pick(closest, rng->uniform() * pot) : j % n;
      double p = 0;
      for (int64_t i = 0; i < n; ++i)
        p += std::min(closest[i], dist2(x + i * dim, x + cand * dim, dim));
      if (p < best_pot) {
        best_pot = p;
        best = cand;
      }
    }
    std::copy(x + best * dim, x + (best + 1) * dim, c.begin() + static_cast<size_t>(j) * dim);
    pot = 0;
    for (int64_t i = 0; i < n; ++i)
      pot += closest[i] = std::min(closest[i], dist2(x + i * dim, x + best * dim, dim));
  }
  return c;
}

}  // namespace

std::vector<double> kmeans_vectors(const double* data, int64_t n, int dim, int k,
                                   std::vector<uint8_t>* labels) {
  if (n < 1 || dim < 1 || k < 1 || k > 256) throw ValueError("kmeans: bad problem size");
  for (int64_t i = 0; i < n * dim; ++i)
    if (!std::isfinite(data[i])) throw ValueError("kmeans: cannot cluster NaN or infinite values");
  k = static_cast<int>(std::min<int64_t>(k, n));
  Rng rng{0};
  std::vector<double> c = seed(data, n, dim, k, &rng);
  labels->assign(n, 0);
  std::vector<double> sum(c.size());
  std::vector<int64_t> count(k);
  for (int it = 0; it < 300; ++it) {
    bool changed = it == 0;
    for (int64_t i = 0; i < n; ++i) {
      int best = 0;
      double bd = dist2(data + i * dim, c.data(), dim);
      for (int j = 1; j < k; ++j) {
        double d = dist2(data + i * dim, c.data() + static_cast<size_t>(j) * dim, dim);
        if (d < bd) {
          bd = d;
          best = j;
        }
      }
      if ((*labels)[i] != best) changed = true;
      (*labels)[i] = static_cast<uint8_t>(best);
    }
    if (!changed) break;
    std::fill(sum.begin(), sum.end(), 0.0);
    std::fill(count.begin(), count.end(), 0);
    for (int64_t i = 0; i < n; ++i) {
      int j = (*labels)[i];
      ++count[j];
      for (int d = 0; d < dim; ++d) sum[static_cast<size_t>(j) * dim + d] += data[i * dim + d];
    }
    for (int j = 0; j < k; ++j)
      if (count[j] > 0)  // an emptied cluster keeps its centroid
        for (int d = 0; d < dim; ++d)
          c[static_cast<size_t>(j) * dim + d] = sum[static_cast<size_t>(j) * dim + d] / count[j];
  }
  return c;
}

}  // namespace milkit::compress
