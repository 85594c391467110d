// milkit/compress/kmeans.h - k-means solvers behind palettization.
#pragma once

#include <cstdint>
#include <vector>

namespace milkit::compress {

/// An optimal 1-D clustering of sorted distinct values.
struct KMeans1D {
  std::vector<double> centroids;  ///< Weighted mean of each cluster (k of them, ascending).
  std::vector<uint8_t> cluster;   ///< Cluster id of each input value (non-decreasing).
};

/// Optimal weighted 1-D k-means of `values` (strictly ascending, finite) with positive `weights`:
/// minimizes sum(weight * (value - centroid)^2) over partitions into min(k, n) contiguous
/// clusters (k <= 256). A dynamic program over prefix sums of weights, weighted values and
/// weighted squares, each layer's row minima found with SMAWK in O(n); its cost arithmetic and
/// tie-breaking are those of coremltools' kmeans1d, so centroids and cluster ids are bit for bit
/// the same. Throws milkit::ValueError for NaN / infinite values, unsorted input or bad k.
KMeans1D kmeans1d(const std::vector<double>& values, const std::vector<double>& weights, int k);

/// Deterministic k-means of `n` vectors of `dim` doubles (row-major): k-means++ seeding (fixed
/// seed, greedy with 2 + log(k) candidates per step) and Lloyd iterations until the assignment is
/// stable (at most 300). Returns the centroids (k x dim, k = min(k, n)) and fills `labels`.
std::vector<double> kmeans_vectors(const double* data, int64_t n, int dim, int k,
                                   std::vector<uint8_t>* labels);

}  // namespace milkit::compress
