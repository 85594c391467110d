// Weight palettization numerics (coremltools' palettize_weights.grouped_channelwise_compress).
#include "milkit/compress/palettize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "milkit/compress/kmeans.h"
#include "milkit/exec/threads.h"
#include "milkit/types/error.h"
#include "numerics.h"

namespace milkit::compress {

using detail::cast_to;
using detail::fix;

namespace {

constexpr int kNbits[] = {1, 2, 3, 4, 6, 8};

// Calls fn(i, off) for every element of `shape` with axes 0 and `axis` swapped: i its row-major
// index in that swapped shape, off the row-major offset of the same element in `shape`.
template <class Fn>
void for_swapped(const std::vector<int64_t>& shape, int axis, Fn fn) {
  const size_t rank = shape.size();
  std::vector<int64_t> stride(rank, 1);
  for (size_t d = rank; d-- > 1;) stride[d - 1] = stride[d] * shape[d];
  std::vector<int64_t> sh = shape, st = stride;
  std::swap(sh[0], sh[axis]);
  std::swap(st[0], st[axis]);
  int64_t total = 1;
  for (int64_t s : shape) total *= s;
  std::vector<int64_t> pos(rank, 0);
  int64_t off = 0;
  for (int64_t i = 0; i < total; ++i) {
    fn(i, off);
    for (size_t d = rank; d-- > 0;) {
      if (++pos[d] < sh[d]) {
        off += st[d];
        break;
      }
      off -= st[d] * (sh[d] - 1);
      pos[d] = 0;
    }
  }
}

// One channel group: `n` values (`rows` rows of `inner` values in the swapped layout).
struct Group {
  const float* v;
  int64_t rows, inner;
  int64_t size() const { return rows * inner; }
};

// The group's vectors (cluster_dim consecutive rows at each inner position), as doubles:
// vector (r, p) holds rows r*cd .. r*cd+cd-1 at position p.
std::vector<double> vectors_of(const Group& g, int cd) {
  const int64_t nv = g.rows / cd * g.inner;
  std::vector<double> out(static_cast<size_t>(nv) * cd);
  for (int64_t r = 0; r < g.rows / cd; ++r)
    for (int64_t p = 0; p < g.inner; ++p)
      for (int c = 0; c < cd; ++c)
        out[((r * g.inner + p) * cd) + c] = g.v[(r * cd + c) * g.inner + p];
  return out;
}

bool less_nan_last(double a, double b) { return a < b || (std::isnan(b) && !std::isnan(a)); }
bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// np.unique(rows of `cd`, axis=0): lexicographically sorted distinct vectors and each vector's
// index among them.
std::vector<double> unique_vectors(const std::vector<double>& x, int cd,
                                   std::vector<uint8_t>* inverse, int64_t* count) {
  const int64_t n = static_cast<int64_t>(x.size()) / cd;
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  auto lex = [&](int64_t a, int64_t b) {
    for (int c = 0; c < cd; ++c) {
      double u = x[a * cd + c], v = x[b * cd + c];
      if (less_nan_last(u, v)) return true;
      if (less_nan_last(v, u)) return false;
    }
    return false;
  };
  auto eq = [&](int64_t a, int64_t b) {
    for (int c = 0; c < cd; ++c)
      if (!same(x[a * cd + c], x[b * cd + c])) return false;
    return true;
  };
  std::stable_sort(order.begin(), order.end(), lex);
  std::vector<double> uniq;
  std::vector<int64_t> inv(n);
  int64_t k = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (i == 0 || !eq(order[i], order[i - 1])) {
      ++k;
      uniq.insert(uniq.end(), x.begin() + order[i] * cd, x.begin() + (order[i] + 1) * cd);
    }
    inv[order[i]] = k;
  }
  *count = k + 1;
  if (inverse) {
    inverse->resize(n);
    for (int64_t i = 0; i < n; ++i) (*inverse)[i] = static_cast<uint8_t>(inv[i]);
  }
  return uniq;
}

int nbits_for(int64_t distinct) {
  for (int b : kNbits)
    if (distinct <= (int64_t{1} << b)) return b;
  return 0;
}

void uniform(const Group& g, DataType dt, int nbits, double* lut, uint8_t* idx) {
  const int64_t n = g.size();
  const int levels = (1 << nbits) - 1;
  float mn = g.v[0], mx = g.v[0];
  for (int64_t i = 1; i < n; ++i) {
    mn = std::min(mn, g.v[i]);
    mx = std::max(mx, g.v[i]);
  }
  double scale = 0;
  if (dt == DataType::Int32) {
    const double range = static_cast<double>(static_cast<int32_t>(mx) - static_cast<int32_t>(mn));
    scale = range / levels;
    for (int64_t i = 0; i < n; ++i) {
      double t = (static_cast<double>(g.v[i] - mn) / range) * levels;
      idx[i] = std::isnan(t) ? 0 : static_cast<uint8_t>(detail::round_even(t));
    }
  } else {
    const float range = fix(dt, mx - mn);
    scale = fix(dt, range / static_cast<float>(levels));
    for (int64_t i = 0; i < n; ++i) {
      float t = fix(dt, fix(dt, fix(dt, g.v[i] - mn) / range) * static_cast<float>(levels));
      idx[i] = std::isnan(t) ? 0 : static_cast<uint8_t>(detail::round_even(t));
    }
  }
  for (int j = 0; j <= levels; ++j)
    lut[j] = cast_to(dt, static_cast<double>(j) * scale + static_cast<double>(mn));
}

// Calls fn(i, h) for every value of a group with h its fp16 bit pattern (-0 as +0), converted a
// block at a time.
template <class Fn>
void for_halves(const Group& g, Fn fn) {
  const int64_t n = g.size();
  uint16_t h[1024];
  for (int64_t i0 = 0; i0 < n; i0 += 1024) {
    const size_t m = static_cast<size_t>(std::min<int64_t>(1024, n - i0));
    floats_to_halves(g.v + i0, h, m);
    for (size_t k = 0; k < m; ++k) fn(i0 + static_cast<int64_t>(k), h[k] == 0x8000 ? 0 : h[k]);
  }
}

// Per-thread tables by fp16 bit pattern, kept between groups: the counts are all zero between
// uses (each use clears the entries it counted), the clusters are read only where just written.
struct HalfTables {
  std::vector<uint32_t> count = std::vector<uint32_t>(65536, 0);
  std::vector<uint8_t> cluster = std::vector<uint8_t>(65536, 0);
};

// k-means of an fp16 group: distinct values and their counts from a count over the 65536 half
// bit patterns (visited in value order), each element's cluster through a table by pattern.
void kmeans_half(const Group& g, int nbits, double* lut, uint8_t* idx) {
  thread_local HalfTables t;
  std::vector<uint32_t>& hist = t.count;
  for_halves(g, [&](int64_t, uint16_t h) { ++hist[h]; });
  std::vector<double> values, counts;
  std::vector<uint16_t> patterns;  // of each distinct value
  auto visit = [&](uint32_t h) {
    if (hist[h] == 0) return;
    patterns.push_back(static_cast<uint16_t>(h));
    values.push_back(half_to_float(static_cast<uint16_t>(h)));
    counts.push_back(hist[h]);
    hist[h] = 0;  // cleared for the next group before anything can throw
  };
  for (uint32_t h = 0xFFFF; h > 0x8000; --h) visit(h);
  for (uint32_t h = 0; h < 0x8000; ++h) visit(h);
  KMeans1D km = kmeans1d(values, counts, 1 << nbits);
  for (size_t j = 0; j < km.centroids.size(); ++j)
    lut[j] = cast_to(DataType::Float16, km.centroids[j]);
  for (size_t v = 0; v < patterns.size(); ++v) t.cluster[patterns[v]] = km.cluster[v];
  for_halves(g, [&](int64_t i, uint16_t h) { idx[i] = t.cluster[h]; });
}

// Distinct values of a group (ascending) with their counts, and each element's index among them.
void distinct_values(const Group& g, std::vector<double>* values, std::vector<double>* counts,
                     std::vector<uint32_t>* which) {
  const int64_t n = g.size();
  which->resize(n);
  values->clear();
  counts->clear();
  std::vector<float> s(g.v, g.v + n);
  std::sort(s.begin(), s.end(), less_nan_last);
  for (int64_t i = 0; i < n; ++i) {
    if (values->empty() || !same(values->back(), s[i])) {
      values->push_back(s[i]);
      counts->push_back(0);
    }
    counts->back() += 1;
  }
  for (int64_t i = 0; i < n; ++i) {
    auto it = std::lower_bound(values->begin(), values->end(), static_cast<double>(g.v[i]),
                               less_nan_last);
    (*which)[i] = static_cast<uint32_t>(it - values->begin());
  }
}

void kmeans_scalar(const Group& g, DataType dt, int nbits, double* lut, uint8_t* idx) {
  if (dt == DataType::Float16) return kmeans_half(g, nbits, lut, idx);
  std::vector<double> values, counts;
  std::vector<uint32_t> which;
  distinct_values(g, &values, &counts, &which);
  KMeans1D km = kmeans1d(values, counts, 1 << nbits);
  for (size_t j = 0; j < km.centroids.size(); ++j) lut[j] = cast_to(dt, km.centroids[j]);
  for (int64_t i = 0; i < g.size(); ++i) idx[i] = km.cluster[which[i]];
}

void kmeans_vector(const Group& g, DataType dt, int nbits, int cd, double* lut, uint8_t* idx) {
  std::vector<double> x = vectors_of(g, cd);
  std::vector<uint8_t> labels;
  std::vector<double> c =
      kmeans_vectors(x.data(), static_cast<int64_t>(x.size()) / cd, cd, 1 << nbits, &labels);
  for (size_t j = 0; j < c.size(); ++j) lut[j] = cast_to(dt, c[j]);
  std::copy(labels.begin(), labels.end(), idx);
}

void unique(const Group& g, int cd, double* lut, uint8_t* idx) {
  std::vector<uint8_t> inv;
  int64_t count = 0;
  std::vector<double> u = unique_vectors(vectors_of(g, cd), cd, &inv, &count);
  std::copy(u.begin(), u.end(), lut);
  std::copy(inv.begin(), inv.end(), idx);
}

void check_spec(const WeightView& w, const PaletteSpec& s, int* axis) {
  if (w.dtype != DataType::Float16 && w.dtype != DataType::Float32 && w.dtype != DataType::Int32)
    throw ValueError("palettize: weights must be fp16, fp32 or int32");
  const int rank = static_cast<int>(w.shape.size());
  if (rank == 0) throw ValueError("palettize: weight must have rank >= 1");
  if (s.channel_axis < -rank || s.channel_axis >= rank)
    throw ValueError("palettize: invalid channel_axis " + std::to_string(s.channel_axis) +
                     " for rank " + std::to_string(rank));
  *axis = s.channel_axis < 0 ? s.channel_axis + rank : s.channel_axis;
  if (s.nbits != 0 && std::find(std::begin(kNbits), std::end(kNbits), s.nbits) == std::end(kNbits))
    throw ValueError("palettize: nbits must be one of 1, 2, 3, 4, 6, 8, got " +
                     std::to_string(s.nbits));
  if (s.nbits == 0 && s.mode != PaletteMode::Unique)
    throw ValueError("palettize: nbits is required for kmeans and uniform modes");
  if (s.cluster_dim < 1) throw ValueError("palettize: cluster_dim must be >= 1");
  if (s.cluster_dim > 1 && s.mode == PaletteMode::Uniform)
    throw ValueError("palettize: uniform mode does not support cluster_dim > 1");
  if (s.group_size < 0) throw ValueError("palettize: group_size must be >= 0");
}

}  // namespace

std::optional<Palette> palettize(const WeightView& w, const PaletteSpec& s,
                                 std::string* skip_reason) {
  int axis = 0;
  check_spec(w, s, &axis);
  const int64_t channels = w.shape[axis];
  const int64_t gs = s.group_size == 0 ? channels : s.group_size;
  const int cd = s.cluster_dim;
  auto skip = [&](const std::string& why) {
    if (skip_reason) *skip_reason = why;
    return std::nullopt;
  };
  if (gs == 0 || channels % gs != 0)
    return skip("the number of channels at axis " + std::to_string(axis) + " (" +
                std::to_string(channels) + ") is not divisible by the group size (" +
                std::to_string(gs) + ")");
  if (gs % cd != 0)
    return skip("the group size at axis " + std::to_string(axis) + " (" + std::to_string(gs) +
                ") is not divisible by cluster_dim (" + std::to_string(cd) + ")");
  int64_t total = 1;
  for (int64_t d : w.shape) total *= d;
  if (total == 0) return skip("the weight is empty");
  const int64_t groups = channels / gs, inner = total / channels;
  // the channel axis first: the weight itself when it is already (no copy), else a copy
  std::vector<float> sw;
  if (axis != 0) {
    sw.resize(static_cast<size_t>(total));
    for_swapped(w.shape, axis, [&](int64_t i, int64_t off) { sw[i] = w.data[off]; });
  }
  const float* base = axis != 0 ? sw.data() : w.data;
  auto group = [&](int64_t gi) { return Group{base + gi * gs * inner, gs, inner}; };

  int nbits = s.nbits;
  if (s.mode == PaletteMode::Unique) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      int64_t count = 0;
      unique_vectors(vectors_of(group(gi), cd), cd, nullptr, &count);
      int b = nbits_for(count);
      if (b == 0)
        return skip("unique values in weight cannot be represented by 8 bits palettization");
      nbits = std::max(nbits, b);
    }
  }
  const int64_t palette = int64_t{1} << nbits;
  const int64_t per_group = gs / cd * inner;
  std::vector<double> lut(static_cast<size_t>(groups * palette * cd), 0.0);
  Palette p;
  // indices in the swapped layout: straight into the result when that is the weight's own
  std::vector<uint8_t> swapped_idx;
  std::vector<uint8_t>& idx = axis != 0 ? swapped_idx : p.indices;
  idx.assign(static_cast<size_t>(groups * per_group), 0);
  parallel_for(groups, 1, [&](int64_t b, int64_t e) {
    for (int64_t gi = b; gi < e; ++gi) {
      double* l = lut.data() + gi * palette * cd;
      uint8_t* x = idx.data() + gi * per_group;
      if (s.mode == PaletteMode::Uniform)
        uniform(group(gi), w.dtype, nbits, l, x);
      else if (s.mode == PaletteMode::Unique)
        unique(group(gi), cd, l, x);
      else if (cd == 1)
        kmeans_scalar(group(gi), w.dtype, nbits, l, x);
      else
        kmeans_vector(group(gi), w.dtype, nbits, cd, l, x);
    }
  });

  std::vector<float>().swap(sw);
  p.nbits = nbits;
  p.vector_axis = cd > 1 ? axis : -1;
  p.lut.assign(lut.begin(), lut.end());
  p.lut_shape.assign(w.shape.size() + 2, 1);
  p.lut_shape[axis] = groups;
  p.lut_shape[w.shape.size()] = palette;
  p.lut_shape[w.shape.size() + 1] = cd;
  p.indices_shape = w.shape;
  p.indices_shape[axis] = channels / cd;
  if (axis != 0) {
    p.indices.resize(idx.size());
    for_swapped(p.indices_shape, axis, [&](int64_t i, int64_t off) { p.indices[off] = idx[i]; });
  }
  return p;
}

std::vector<uint8_t> pack_bits(const std::vector<uint8_t>& v, int nbits) {
  if (nbits < 1 || nbits > 8) throw ValueError("pack_bits: nbits must be in [1, 8]");
  std::vector<uint8_t> out((v.size() * nbits + 7) / 8, 0);
  size_t bit = 0;
  for (uint8_t x : v) {
    if (nbits < 8 && (x >> nbits) != 0)
      throw ValueError("pack_bits: value " + std::to_string(x) + " does not fit in " +
                       std::to_string(nbits) + " bits");
    for (int b = 0; b < nbits; ++b, ++bit)
      if ((x >> b) & 1) out[bit / 8] |= static_cast<uint8_t>(1u << (bit % 8));
  }
  return out;
}

}  // namespace milkit::compress
