// Optimal weighted 1-D k-means: dynamic program with SMAWK row minima.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "milkit/compress/kmeans.h"
#include "milkit/types/error.h"

namespace milkit::compress {

namespace {

// Prefix sums of sorted values: at index i (three doubles) the weights, weighted values and
// weighted squares of values [0, i).
std::vector<double> prefix_sums(const std::vector<double>& x, const std::vector<double>& w) {
  std::vector<double> p(3 * (x.size() + 1), 0.0);
  for (size_t i = 0; i < x.size(); ++i) {
    p[3 * i + 3] = w[i] + p[3 * i];
    p[3 * i + 4] = w[i] * x[i] + p[3 * i + 1];
    p[3 * i + 5] = w[i] * x[i] * x[i] + p[3 * i + 2];
  }
  return p;
}

// Within-cluster cost of sorted values [i, j] (a = prefix at i, b = prefix at j + 1): sum w x^2 -
// (sum w x)^2 / sum w, evaluated as sum w x^2 + W mu^2 - 2 mu sum w x (the order of operations is
// part of the contract: the dynamic program's ties are decided on these exact doubles).
inline double cost(const double* a, const double* b) {
  double w = b[0] - a[0];
  double s = b[1] - a[1];
  double mu = s / w;
  double r = b[2] - a[2];
  r += w * (mu * mu);
  r -= (2 * mu) * s;
  return r;
}

// Row minima of the layer matrix C(i, j) = prev[min(i, j - 1)] + cost(j, i) (column 0 reads
// prev[i]; a column past the row is an empty last cluster, prev[i] + 0, which compares the same)
// with SMAWK: a reduce step keeps at most one candidate column per row, the odd rows recurse, the
// even rows scan between their neighbours' minima. Ties keep the leftmost column of a scan and
// the earlier column on reduce (a later column must be strictly smaller to pop). Every
// comparison is the reference's, on the same doubles; an entry is computed once where the
// reference computes it twice in a row (a column pushed after pops sits in the row of the last
// entry it popped, whose value the comparison just computed). All scratch is allocated once.
class Smawk {
 public:
  Smawk(const double* prefix, int64_t n) : p_(prefix), n_(n), pos_(n), cols_(n) {
    for (int64_t j = 0; j < n; ++j) cols_[j] = j;
    // the stacks of every recursion depth, back to back (rows halve at each depth)
    size_t total = 0;
    for (int64_t r = n; r > 0; r /= 2) total += static_cast<size_t>(r);
    stack_.resize(total);
    top_.resize(total);
  }

  /// Fills cur[i] with the minimum of row i and arg[i] with its column.
  void layer(const double* prev, double* cur, int64_t* arg) {
    prev_ = prev;
    min_ = cur;
    arg_ = arg;
    solve(0, 1, n_, cols_.data(), n_, stack_.data(), top_.data());
  }

 private:
  // C(i, col) for rows i of one column
  struct Column {
    const Smawk& m;
    int64_t j;
    const double* a;  // prefix at j
    double base;      // prev[j - 1]
    Column(const Smawk& s, int64_t col)
        : m(s), j(col), a(s.p_ + 3 * col), base(col > 0 ? s.prev_[col - 1] : 0.0) {}
    double at(int64_t i) const {
      if (j > i) return m.prev_[i];
      return (j == 0 ? m.prev_[i] : base) + cost(a, m.p_ + 3 * (i + 1));
    }
  };

  // C(row, j) for columns j of one row
  struct Row {
    const Smawk& m;
    int64_t i;
    const double* b;  // prefix at i + 1
    double prev_i;
    Row(const Smawk& s, int64_t row)
        : m(s), i(row), b(s.p_ + 3 * (row + 1)), prev_i(s.prev_[row]) {}
    double at(int64_t j) const {
      if (j > i) return prev_i;
      return (j == 0 ? prev_i : m.prev_[j - 1]) + cost(m.p_ + 3 * j, b);
    }
  };

  // Rows first, first + step, ... (nrows of them) against `ncols` candidate columns; `st` / `top`
  // hold this depth's surviving columns and their values in their own rows, deeper depths after.
  void solve(int64_t first, int64_t step, int64_t nrows, const int64_t* cols, int64_t ncols,
             int64_t* st, double* top) {
    if (nrows == 0) return;
    int64_t size = 0;
    for (int64_t k = 0; k < ncols; ++k) {
      const Column c(*this, cols[k]);
      double popped = 0;  // the value of the column in the row of the last entry it popped
      bool any = false;
      while (size > 0) {
        const double v = c.at(first + (size - 1) * step);
        if (v >= top[size - 1]) break;
        --size;
        popped = v;
        any = true;
      }
      if (size < nrows) {
        st[size] = c.j;
        top[size] = any ? popped : c.at(first + size * step);
        ++size;
      }
    }
    solve(first + step, step * 2, nrows / 2, st, size, st + size, top + size);
    for (int64_t k = 0; k < size; ++k) pos_[st[k]] = k;
    int64_t start = 0;
    for (int64_t r = 0; r < nrows; r += 2) {
      const Row row(*this, first + r * step);
      const int64_t stop = r < nrows - 1 ? pos_[arg_[row.i + step]] : size - 1;
      int64_t best = st[start];
      double best_v = row.at(best);
      for (int64_t k = start + 1; k <= stop; ++k) {
        const double v = row.at(st[k]);
        if (v < best_v) {
          best = st[k];
          best_v = v;
        }
      }
      arg_[row.i] = best;
      min_[row.i] = best_v;
      start = stop;
    }
  }

  const double* p_;
  int64_t n_;
  const double* prev_ = nullptr;
  double* min_ = nullptr;   // each row's minimum, C(row, arg_[row])
  int64_t* arg_ = nullptr;  // each row's column
  std::vector<int64_t> pos_, cols_, stack_;
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
  const std::vector<double> p = prefix_sums(values, weights);
  // layer l holds the best cost of values [0, i] in l + 1 clusters and the first index of the
  // last cluster (at l * n; every layer's row is written before it is read)
  std::unique_ptr<int64_t[]> first(new int64_t[static_cast<size_t>(kk * n)]);
  std::fill(first.get(), first.get() + n, 0);
  std::vector<double> prev(n), cur(n);
  for (int64_t i = 0; i < n; ++i) prev[i] = cost(p.data(), p.data() + 3 * (i + 1));
  Smawk smawk(p.data(), n);
  for (int64_t l = 1; l < kk; ++l) {
    smawk.layer(prev.data(), cur.data(), first.get() + l * n);
    prev.swap(cur);
  }
  KMeans1D out;
  out.centroids.assign(kk, 0.0);
  out.cluster.assign(n, 0);
  // backtrack from the last value; each cluster's centroid is its running weighted mean
  auto weight = [&](int64_t i, int64_t j) { return p[3 * (j + 1)] - p[3 * i]; };
  int64_t end = n, last = n - 1;
  int64_t l = kk - 1;
  do {
    int64_t begin = first[static_cast<size_t>(l * n + last)];
    double centroid = 0.0;
    for (int64_t i = begin; i < end; ++i) {
      out.cluster[i] = static_cast<uint8_t>(l);
      centroid += (values[i] - centroid) * weight(i, i) / weight(begin, i);
    }
    out.centroids[l] = centroid;
    end = begin;
    last = begin - 1;
    l -= 1;
  } while (end > 0);
  return out;
}

}  // namespace milkit::compress
