// Optimal weighted 1-D k-means: dynamic program with SMAWK row minima.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "milkit/compress/kmeans.h"
#include "milkit/types/error.h"

namespace milkit::compress {

namespace {

// Within-cluster cost of sorted values [i, j] from prefix sums: sum w x^2 - (sum w x)^2 / sum w,
// evaluated as sum w x^2 + W mu^2 - 2 mu sum w x (the order of operations is part of the
// contract: the dynamic program's ties are decided on these exact doubles).
class Costs {
 public:
  Costs(const std::vector<double>& x, const std::vector<double>& w) : p_(x.size() + 1) {
    for (size_t i = 0; i < x.size(); ++i) {
      p_[i + 1].w = w[i] + p_[i].w;
      p_[i + 1].s = w[i] * x[i] + p_[i].s;
      p_[i + 1].s2 = w[i] * x[i] * x[i] + p_[i].s2;
    }
  }
  double weight(int64_t i, int64_t j) const { return i <= j ? p_[j + 1].w - p_[i].w : 0.0; }
  double cost(int64_t i, int64_t j) const {
    if (j < i) return 0.0;
    const Prefix &a = p_[i], &b = p_[j + 1];
    double w = b.w - a.w;
    double s = b.s - a.s;
    double mu = s / w;
    double r = b.s2 - a.s2;
    r += w * (mu * mu);
    r -= (2 * mu) * s;
    return r;
  }

 private:
  struct Prefix {
    double w = 0, s = 0, s2 = 0;
  };
  std::vector<Prefix> p_;  // sums over values [0, i)
};

// Row minima of the layer matrix C(i, j) = prev[min(i, j - 1)] + cost(j, i) (column 0 reads
// prev[i]) with SMAWK: a reduce step keeps at most one candidate column per row, the odd rows
// recurse, the even rows scan between their neighbours' minima. Ties keep the leftmost column of
// a scan and the earlier column on reduce (a later column must be strictly smaller to pop).
// Every comparison is the reference's, on the same doubles; an entry is computed once where the
// reference computes it twice in a row (a column pushed after pops sits in the row of the last
// entry it popped, whose value the comparison just computed). All scratch is allocated once.
class Smawk {
 public:
  Smawk(const Costs& c, int64_t n) : c_(c), n_(n), pos_(n), arg_(n), cols_(n), min_(n) {
    for (int64_t j = 0; j < n; ++j) cols_[j] = j;
    // the stacks of every recursion depth, back to back (rows halve at each depth)
    size_t total = 0;
    for (int64_t r = n; r > 0; r /= 2) total += static_cast<size_t>(r);
    stack_.resize(total);
    top_.resize(total);
  }

  void layer(const double* prev, double* cur, int64_t* arg) {
    prev_ = prev;
    solve(0, 1, n_, cols_.data(), n_, stack_.data(), top_.data());
    std::copy(arg_.begin(), arg_.end(), arg);
    std::copy(min_.begin(), min_.end(), cur);
  }

 private:
  double at(int64_t i, int64_t j) const {
    // a column past the row is an empty last cluster: prev[i] + 0 (compares the same)
    if (j > i) return prev_[i];
    return prev_[j == 0 ? i : j - 1] + c_.cost(j, i);
  }

  // Rows first, first + step, ... (nrows of them) against `ncols` candidate columns; `st` / `top`
  // hold this depth's surviving columns and their values in their own rows, deeper depths after.
  void solve(int64_t first, int64_t step, int64_t nrows, const int64_t* cols, int64_t ncols,
             int64_t* st, double* top) {
    if (nrows == 0) return;
    int64_t size = 0;
    for (int64_t k = 0; k < ncols; ++k) {
      const int64_t col = cols[k];
      double popped = 0;  // the value of `col` in the row of the last entry it popped
      bool any = false;
      while (size > 0) {
        const double v = at(first + (size - 1) * step, col);
        if (v >= top[size - 1]) break;
        --size;
        popped = v;
        any = true;
      }
      if (size < nrows) {
        st[size] = col;
        top[size] = any ? popped : at(first + size * step, col);
        ++size;
      }
    }
    solve(first + step, step * 2, nrows / 2, st, size, st + size, top + size);
    for (int64_t k = 0; k < size; ++k) pos_[st[k]] = k;
    int64_t start = 0;
    for (int64_t r = 0; r < nrows; r += 2) {
      const int64_t row = first + r * step;
      const int64_t stop = r < nrows - 1 ? pos_[arg_[row + step]] : size - 1;
      int64_t best = st[start];
      double best_v = at(row, best);
      for (int64_t k = start + 1; k <= stop; ++k) {
        const double v = at(row, st[k]);
        if (v < best_v) {
          best = st[k];
          best_v = v;
        }
      }
      arg_[row] = best;
      min_[row] = best_v;
      start = stop;
    }
  }

  const Costs& c_;
  int64_t n_;
  const double* prev_ = nullptr;
  std::vector<int64_t> pos_, arg_, cols_, stack_;
  std::vector<double> min_;  // each row's minimum, C(row, arg_[row])
  std::vector<double> top_;  // C(row of stack entry, its column), beside stack_
};

void check_input(const std::vector<double>& values, const std::vector<double>& weights, int k) {
  if (values.empty()) throw ValueError("kmeans1d: no values to cluster");
  if (weights.size() != values.size())
    throw ValueError("kmeans1d: " + std::to_string(weights.size()) + " weights for " +
                     std::to_string(values.size()) + " values");
  if (k < 1 || k > 256)
    throw ValueError("kmeans1d: k must be in [1, 256], got " + std::to_string(k));
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i]))
      throw ValueError("kmeans1d: cannot cluster a NaN or infinite value (" +
                       std::to_string(values[i]) + ")");
    if (i > 0 && !(values[i - 1] < values[i]))
      throw ValueError("kmeans1d: values must be strictly ascending");
    if (!(weights[i] > 0) || !std::isfinite(weights[i]))
      throw ValueError("kmeans1d: weights must be positive and finite");
  }
}

}  // namespace

KMeans1D kmeans1d(const std::vector<double>& values, const std::vector<double>& weights, int k) {
  check_input(values, weights, k);
  const int64_t n = static_cast<int64_t>(values.size());
  const int64_t kk = std::min<int64_t>(k, n);
  Costs costs(values, weights);
  // layer l holds the best cost of values [0, i] in l + 1 clusters and the first index of the
  // last cluster
  std::vector<int64_t> first(static_cast<size_t>(kk * n), 0);  // layer l at l * n
  std::vector<double> prev(n), cur(n);
  for (int64_t i = 0; i < n; ++i) prev[i] = costs.cost(0, i);
  Smawk smawk(costs, n);
  for (int64_t l = 1; l < kk; ++l) {
    smawk.layer(prev.data(), cur.data(), first.data() + l * n);
    prev.swap(cur);
  }
  KMeans1D out;
  out.centroids.assign(kk, 0.0);
  out.cluster.assign(n, 0);
  // backtrack from the last value; each cluster's centroid is its running weighted mean
  int64_t end = n, last = n - 1;
  int64_t l = kk - 1;
  do {
    int64_t begin = first[static_cast<size_t>(l * n + last)];
    double centroid = 0.0;
    for (int64_t i = begin; i < end; ++i) {
      out.cluster[i] = static_cast<uint8_t>(l);
      centroid += (values[i] - centroid) * costs.weight(i, i) / costs.weight(begin, i);
    }
    out.centroids[l] = centroid;
    end = begin;
    last = begin - 1;
    l -= 1;
  } while (end > 0);
  return out;
}

}  // namespace milkit::compress
