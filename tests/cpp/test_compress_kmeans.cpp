// The optimal weighted 1-D k-means solver and the palettization / pruning numerics.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "milkit/compress/kmeans.h"
#include "milkit/compress/palettize.h"
#include "milkit/compress/prune.h"
#include "milkit/exec/threads.h"
#include "milkit/types/error.h"

using namespace milkit;
using namespace milkit::compress;

namespace {

double sse(const std::vector<double>& x, const std::vector<double>& w,
           const std::vector<uint8_t>& cl) {
  // cost of a labelling with each cluster at its weighted mean
  std::vector<double> sw(256, 0), swx(256, 0);
  for (size_t i = 0; i < x.size(); ++i) {
    sw[cl[i]] += w[i];
    swx[cl[i]] += w[i] * x[i];
  }
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double mu = swx[cl[i]] / sw[cl[i]];
    s += w[i] * (x[i] - mu) * (x[i] - mu);
  }
  return s;
}

// the best cost over every split of n sorted values into k contiguous non-empty clusters
double brute(const std::vector<double>& x, const std::vector<double>& w, int k) {
  const int n = static_cast<int>(x.size());
  double best = std::numeric_limits<double>::infinity();
  std::vector<uint8_t> cl(n);
  // cut masks: n - 1 gaps, choose k - 1 of them
  for (uint32_t mask = 0; mask < (1u << (n - 1)); ++mask) {
    if (__builtin_popcount(mask) != k - 1) continue;
    uint8_t c = 0;
    for (int i = 0; i < n; ++i) {
      cl[i] = c;
      if (i < n - 1 && (mask >> i & 1)) ++c;
    }
    best = std::min(best, sse(x, w, cl));
  }
  return best;
}

}  // namespace

TEST_CASE("kmeans1d is optimal against every partition of small inputs", "[compress]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> val(-3, 3);
  std::uniform_int_distribution<int> cnt(1, 9);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 2 + trial % 11;
    std::vector<double> x(n), w(n);
    for (auto& v : x) v = val(rng);
    std::sort(x.begin(), x.end());
    x.erase(std::unique(x.begin(), x.end()), x.end());
    w.resize(x.size());
    for (auto& v : w) v = cnt(rng);
    for (int k = 1; k <= static_cast<int>(x.size()); ++k) {
      KMeans1D r = kmeans1d(x, w, k);
      REQUIRE(r.centroids.size() == static_cast<size_t>(k));
      REQUIRE(std::is_sorted(r.cluster.begin(), r.cluster.end()));
      const double got = sse(x, w, r.cluster), want = brute(x, w, k);
      REQUIRE(got <= want * (1 + 1e-12) + 1e-12);
      for (int c = 0; c < k; ++c)  // every cluster is used and its centroid is its mean
        REQUIRE(std::count(r.cluster.begin(), r.cluster.end(), c) > 0);
    }
  }
}

TEST_CASE("kmeans1d weights act as repeated values", "[compress]") {
  std::vector<double> x{0, 1, 10, 11};
  // heavy weight on 1 pulls its centroid: {0,1} mean 0.75 with weights 1,3
  KMeans1D r = kmeans1d(x, {1, 3, 1, 1}, 2);
  REQUIRE(r.cluster == std::vector<uint8_t>{0, 0, 1, 1});
  REQUIRE(r.centroids[0] == 0.75);
  REQUIRE(r.centroids[1] == 10.5);
  // a weight can move a boundary: 5 with weight 100 forms its own cluster
  KMeans1D s = kmeans1d({0, 1, 5, 100}, {1, 1, 100, 1}, 3);
  REQUIRE(s.cluster == std::vector<uint8_t>{0, 0, 1, 2});
}

TEST_CASE("kmeans1d with k >= the distinct count gives one cluster per value", "[compress]") {
  std::vector<double> x{-2, -0.5, 0.25, 4};
  KMeans1D r = kmeans1d(x, {2, 1, 5, 1}, 16);
  REQUIRE(r.centroids == x);
  REQUIRE(r.cluster == std::vector<uint8_t>{0, 1, 2, 3});
  KMeans1D one = kmeans1d({3.5}, {10}, 4);
  REQUIRE(one.centroids == std::vector<double>{3.5});
  REQUIRE(one.cluster == std::vector<uint8_t>{0});
}

TEST_CASE("kmeans1d rejects NaN, infinity, unsorted input and bad k", "[compress]") {
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const ValueError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  REQUIRE(message([] { kmeans1d({0, NAN, 1}, {1, 1, 1}, 2); }).find("NaN") != std::string::npos);
  REQUIRE(message([] {
            kmeans1d({0, INFINITY}, {1, 1}, 2);
          }).find("NaN or infinite") != std::string::npos);
  REQUIRE(message([] { kmeans1d({1, 0}, {1, 1}, 2); }).find("ascending") != std::string::npos);
  REQUIRE(message([] { kmeans1d({0, 1}, {1, 1}, 0); }).find("k must be") != std::string::npos);
  std::vector<float> v{1, NAN, 2, 3};
  WeightView w{v.data(), {4}, DataType::Float32};
  REQUIRE_THROWS_AS(palettize(w, {PaletteMode::KMeans, 2}, nullptr), ValueError);
}

TEST_CASE("palettize gives the same bytes on one thread and on two", "[compress]") {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0, 0.05f);
  std::vector<float> v(64 * 300);
  for (auto& x : v) x = half_to_float(float_to_half(nd(rng)));
  WeightView w{v.data(), {64, 300}, DataType::Float16};
  for (PaletteSpec s :
       {PaletteSpec{PaletteMode::KMeans, 4, 0, 8}, PaletteSpec{PaletteMode::KMeans, 3, 1, 30},
        PaletteSpec{PaletteMode::KMeans, 2, 0, 16, 2},
        PaletteSpec{PaletteMode::Uniform, 6, 0, 4}}) {
    set_num_threads(1);
    auto a = palettize(w, s, nullptr);
    set_num_threads(2);
    auto b = palettize(w, s, nullptr);
    set_num_threads(0);
    REQUIRE(a);
    REQUIRE(b);
    REQUIRE(a->lut == b->lut);
    REQUIRE(a->indices == b->indices);
  }
}

TEST_CASE("palettize skips groups that do not divide the channels", "[compress]") {
  std::vector<float> v(6 * 4, 1.0f);
  WeightView w{v.data(), {6, 4}, DataType::Float32};
  std::string why;
  REQUIRE_FALSE(palettize(w, {PaletteMode::KMeans, 2, 0, 4}, &why));
  REQUIRE(why.find("not divisible by the group size") != std::string::npos);
  REQUIRE_FALSE(palettize(w, {PaletteMode::KMeans, 2, 0, 3, 2}, &why));
  REQUIRE(why.find("cluster_dim") != std::string::npos);
  auto p = palettize(w, {PaletteMode::Unique, 0, 1, 2}, &why);
  REQUIRE(p);
  REQUIRE(p->nbits == 1);
  REQUIRE(p->lut_shape == std::vector<int64_t>{1, 2, 2, 1});
}

TEST_CASE("pack_bits packs least significant bit first", "[compress]") {
  REQUIRE(pack_bits({1, 2, 3}, 2) == std::vector<uint8_t>{0b111001});
  REQUIRE(pack_bits({5, 7, 1}, 3) == std::vector<uint8_t>{0b01111101, 0b0});
  REQUIRE_THROWS_AS(pack_bits({4}, 2), ValueError);
}

TEST_CASE("n:m pruning zeroes the n smallest of every run, earlier first on ties", "[compress]") {
  std::vector<float> v{0.5f, -0.5f, 0.5f, 2.0f, 1, 1, 1, 1, 3, -1, 2, 1, 9, 9, 9, 9};
  WeightView w{v.data(), {2, 8}, DataType::Float32};
  PruneSpec s;
  s.kind = PruneSpec::NM;
  s.n = 2;
  s.m = 4;
  s.dim = 1;
  auto out = prune(w, s, nullptr);
  REQUIRE(out);
  std::vector<float> want{0, -0.0f, 0.5f, 2, 0, 0, 1, 1, 3, -0.0f, 2, 0, 0, 0, 9, 9};
  REQUIRE(*out == want);
  REQUIRE(std::signbit((*out)[1]));
}

TEST_CASE("fp16 magnitude pruning from bit patterns keeps exactly prune's non-zeros",
          "[compress]") {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0, 0.1f);
  const uint16_t special[] = {0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x0001, 0x8001, 0x3C00};
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 3000);
    std::vector<uint16_t> h(static_cast<size_t>(n));
    const int kind = trial % 4;  // plain, few magnitudes (ties), with zeros / inf, with NaN
    for (auto& x : h) {
      x = kind == 1 ? float_to_half(static_cast<float>(static_cast<int>(rng() % 9) - 4) * 0.25f)
                    : float_to_half(normal(rng));
      if (kind >= 2 && rng() % 10 == 0) x = special[rng() % (kind == 2 ? 4 : 8)];
    }
    std::vector<float> f(h.size());
    for (size_t i = 0; i < h.size(); ++i) f[i] = half_to_float(h[i]);
    for (double sparsity : {0.0, 0.1, 0.25, 0.5, 0.77, 0.99, 1.0}) {
      PruneSpec s;
      s.kind = PruneSpec::Magnitude;
      s.target_sparsity = sparsity;
      auto out = prune({f.data(), {n}, DataType::Float16}, s, nullptr);
      REQUIRE(out);
      std::vector<uint8_t> want(h.size());
      for (size_t i = 0; i < h.size(); ++i) want[i] = (*out)[i] != 0.0f;
      INFO("trial " << trial << " sparsity " << sparsity);
      REQUIRE(magnitude_keep_half(h.data(), n, sparsity) == want);
    }
  }
}

TEST_CASE("magnitude_sparse_half: the kept values and packed flags of magnitude_keep_half",
          "[compress]") {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const uint16_t special[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x7C00, 0xFC00, 0x7E00, 0x3C00};
  for (int trial = 0; trial < 24; ++trial) {
    // lengths around whole groups of 16 and bytes of 8, and a longer one
    const int64_t n = trial < 20 ? trial * 3 + 1 : 1000 + trial;
    std::vector<uint16_t> h(static_cast<size_t>(n));
    for (auto& x : h) {
      x = float_to_half(normal(rng));
      if (trial % 3 == 1 && rng() % 7 == 0) x = special[rng() % 4];   // zeros and subnormals
      if (trial % 3 == 2 && rng() % 13 == 0) x = special[rng() % 8];  // inf and NaN too
    }
    for (double sparsity : {0.0, 0.1, 0.5, 0.77, 1.0}) {
      INFO("trial " << trial << " sparsity " << sparsity);
      const std::vector<uint8_t> keep = magnitude_keep_half(h.data(), n, sparsity);
      std::vector<uint8_t> mask((keep.size() + 7) / 8, 0), nonzero;
      for (size_t i = 0; i < keep.size(); ++i) {
        if (!keep[i]) continue;
        mask[i / 8] = static_cast<uint8_t>(mask[i / 8] | (1u << (i % 8)));
        nonzero.push_back(static_cast<uint8_t>(h[i] & 0xFF));
        nonzero.push_back(static_cast<uint8_t>(h[i] >> 8));
      }
      for (bool vec : {true, false}) {
        const SparseHalves sp = magnitude_sparse_half(h.data(), n, sparsity, vec);
        REQUIRE(sp.count == static_cast<int64_t>(nonzero.size() / 2));
        REQUIRE(sp.mask == mask);
        REQUIRE(std::vector<uint8_t>(sp.nonzero.begin(), sp.nonzero.end()) == nonzero);
      }
    }
  }
}
