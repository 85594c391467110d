// Kernels of the pool ops: avg_pool, max_pool, l2_pool over 1 to 3 spatial dims (computed as 3-d
// with leading unit dims), fp16 arriving as fp32 (float_compute).
//
// Windows start at o * stride - pad_before. Padding: "same" pads total =
// max(0, (ceil(n / s) - 1) * s + k - n) with total / 2 before (the extra element after,
// coremltools' BOTTOM_RIGHT_HEAVY), "same_lower" puts the extra one before, "custom" reads
// pad[2 i], pad[2 i + 1]. Output sizes are coremltools' (ceil_mode drops a last window that
// would start in the right padding). Padding never wins a max (as -inf) and adds 0 to an l2 sum;
// avg_pool divides by the window clipped to the padded input (padding counted, torch's
// count_include_pad) or, with exclude_padding_from_average, by the input elements it covers.
// A window with no input element gives -inf (max), 0 (avg, l2). A NaN in a window makes its max
// NaN (np.max; torch's CPU max_pool lets a later larger value replace it).
//
// Work is split over planes (N * C), and over bands of output rows when there are fewer planes
// than about four per thread. Output columns whose every tap lies in the input row are computed
// in vector blocks (16 lanes with AVX-512, 8 with AVX2, 4 otherwise, chosen at run time): one
// load per tap at stride 1, two loads and a permute keeping the even lanes at stride 2, lane by
// lane beyond; the other columns window by window. Both combine a window's taps in the same
// order (depth, row, column), so every output has the same bits whichever way it was computed and
// whatever the thread split. The vector max does not propagate NaN: a band whose input rows hold
// a NaN (one scan of them first) is computed window by window.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>

#include "../dispatch.h"
#include "kernels.h"
#include "milkit/exec/threads.h"
#include "milkit/ops/conv_util.h"
#include "vec_math.h"

namespace milkit {

namespace {

using exec::floor_div;

enum class Pool { Avg, Max, L2 };

/// Per output index of one dim: the input range [lo, hi) a window covers and its size clipped to
/// the padded input (the avg divisor with padding counted).
struct Span {
  std::vector<int64_t> lo, hi, padded;
};

/// A pool as 3-d (leading unit dims): sizes, kernel, strides, padding before, the spans of each
/// dim's windows.
struct PoolGeom {
  int64_t planes = 0;  // N * C
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1},
          pb[3] = {0, 0, 0};
  const Span* sp = nullptr;
  bool exclude = false;  // avg: divide by the input elements covered
  /// Output columns [vlo, vhi) that a vector block may cover: every tap's load in the row.
  int64_t vlo = 0, vhi = 0;
  /// avg: per output column, the columns its divisor counts (as floats: counts are far below 2^24).
  const float* wcount = nullptr;
};

/// The value a window starts from: -inf for max, 0 for sums.
template <Pool P>
constexpr float pool_init() {
  return P == Pool::Max ? -std::numeric_limits<float>::infinity() : 0.0f;
}

/// m combined with v: max with NaN propagating as np.max (the first NaN met wins), or the sums.
template <Pool P>
inline __attribute__((always_inline)) float pool_step(float m, float v) {
  if constexpr (P == Pool::Max)
    return (v > m || v != v) && !(m != m) ? v : m;
  else if constexpr (P == Pool::L2)
    return m + v * v;
  else
    return m + v;
}

/// src[0], src[S], ..., src[(L - 1) * S] into v: one load for S = 1, two loads and a permute
/// that keeps the even lanes for S = 2 (reads src[2 L - 1] too), lane by lane for others (S = 0,
/// stride sw).
template <int L, int S>
inline __attribute__((always_inline)) void load_strided(const float* src, int64_t sw,
                                                        typename vmath::Lanes<L>::f& v) {
  if constexpr (S == 1) {
    std::memcpy(&v, src, sizeof v);
  } else if constexpr (S == 2) {
    vmath::load_even_lanes<L>(src, v);
  } else {
    for (int j = 0; j < L; ++j) v[j] = src[j * sw];
  }
}

/// The rows [r0, r1) (od * OH + oh) of one plane: vector blocks of L output columns (two at a
/// time) in [g.vlo, g.vhi), every other column window by window; then the avg divisors or the l2
/// root. A max over input holding a NaN is computed window by window throughout (the vector
/// max does not propagate NaN); both ways combine the taps in the same order (depth, row,
/// column), so every output has the same bits whichever way, and whatever the split.
template <Pool P, int L, int S>
inline __attribute__((always_inline)) void pool_rows_body(const PoolGeom& g, const float* xp,
                                                          float* yp, int64_t r0, int64_t r1) {
  typedef typename vmath::Lanes<L>::f V;
  const Span &sd = g.sp[0], &sh = g.sp[1], &sw = g.sp[2];
  const int64_t OH = g.out[1], OW = g.out[2], IH = g.in[1], IW = g.in[2], KW = g.k[2], SW = g.s[2];
  const int64_t pw = g.pb[2];
  const int64_t vlo = g.vlo;
  int64_t vhi = g.vhi;
  bool nan_in = false;
  if constexpr (P == Pool::Max) {
    // the input rows these outputs read, scanned for NaN
    const int64_t od0 = r0 / OH, od1 = (r1 - 1) / OH;
    const int64_t b = od0 == od1 ? sd.lo[od0] * IH + sh.lo[r0 % OH] : sd.lo[od0] * IH;
    const int64_t e = od0 == od1 ? (sd.hi[od0] - 1) * IH + sh.hi[(r1 - 1) % OH] : sd.hi[od1] * IH;
    const float* p = xp + b * IW;
    const int64_t n = std::max<int64_t>(0, e - b) * IW;
    typename vmath::Lanes<L>::i nan{};
    int64_t i = 0;
    for (; i + L <= n; i += L) {
      V v;
      std::memcpy(&v, p + i, sizeof v);
      nan |= v != v;
    }
    bool any = false;
    for (int j = 0; j < L; ++j) any |= nan[j] != 0;
    for (; i < n; ++i) any |= p[i] != p[i];
    if (any) {
      nan_in = true;
      vhi = vlo;
    }
  }
  const V init = V{} + pool_init<P>();
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t od = r / OH, oh = r % OH;
    const int64_t d0 = sd.lo[od], d1 = sd.hi[od], h0 = sh.lo[oh], h1 = sh.hi[oh];
    float* dst = yp + r * OW;
    auto window = [&](int64_t ow) {
      float m = pool_init<P>();
      for (int64_t id = d0; id < d1; ++id)
        for (int64_t ih = h0; ih < h1; ++ih) {
          const float* src = xp + (id * IH + ih) * IW;
          for (int64_t iw = sw.lo[ow]; iw < sw.hi[ow]; ++iw) {
            if (P == Pool::Max && !nan_in)
              m = src[iw] > m ? src[iw] : m;  // no NaN: a branch-free max, the same result
            else
              m = pool_step<P>(m, src[iw]);
          }
        }
      dst[ow] = m;
    };
    int64_t ow = 0;
    for (; ow < std::min(vlo, OW); ++ow) window(ow);
    for (; ow + 2 * L <= vhi; ow += 2 * L) {
      V a0 = init, a1 = init;
      for (int64_t id = d0; id < d1; ++id)
        for (int64_t ih = h0; ih < h1; ++ih) {
          const float* src = xp + (id * IH + ih) * IW + ow * SW - pw;
          for (int64_t kw = 0; kw < KW; ++kw) {
            V v0, v1;
            load_strided<L, S>(src + kw, SW, v0);
            load_strided<L, S>(src + kw + L * SW, SW, v1);
            if constexpr (P == Pool::Max) {
              a0 = v0 > a0 ? v0 : a0;
              a1 = v1 > a1 ? v1 : a1;
            } else if constexpr (P == Pool::L2) {
              a0 = a0 + v0 * v0;
              a1 = a1 + v1 * v1;
            } else {
              a0 = a0 + v0;
              a1 = a1 + v1;
            }
          }
        }
      std::memcpy(dst + ow, &a0, sizeof a0);
      std::memcpy(dst + ow + L, &a1, sizeof a1);
    }
    auto block = [&](int64_t o) {
      V a0 = init;
      for (int64_t id = d0; id < d1; ++id)
        for (int64_t ih = h0; ih < h1; ++ih) {
          const float* src = xp + (id * IH + ih) * IW + o * SW - pw;
          for (int64_t kw = 0; kw < KW; ++kw) {
            V v0;
            load_strided<L, S>(src + kw, SW, v0);
            if constexpr (P == Pool::Max)
              a0 = v0 > a0 ? v0 : a0;
            else if constexpr (P == Pool::L2)
              a0 = a0 + v0 * v0;
            else
              a0 = a0 + v0;
          }
        }
      std::memcpy(dst + o, &a0, sizeof a0);
    };
    for (; ow + L <= vhi; ow += L) block(ow);
    // the last columns as a block overlapping the previous one (the same values again)
    if (ow < vhi && vhi - vlo >= L) {
      block(vhi - L);
      ow = vhi;
    }
    for (; ow < OW; ++ow) window(ow);
    if constexpr (P == Pool::L2) {
      for (int64_t o = 0; o < OW; ++o) dst[o] = std::sqrt(dst[o]);
    } else if constexpr (P == Pool::Avg) {
      // the divisor: the window's rows (float, exact) times its columns
      const float c =
          static_cast<float>(g.exclude ? (d1 - d0) * (h1 - h0) : sd.padded[od] * sh.padded[oh]);
      const float* wc = g.wcount;
      for (int64_t o = 0; o < OW; ++o) {
        const float cnt = c * wc[o];
        dst[o] = cnt > 0.0f ? dst[o] / cnt : 0.0f;
      }
    }
  }
}

template <Pool P, int S>
void pool_rows_base(const PoolGeom& g, const float* xp, float* yp, int64_t r0, int64_t r1) {
  pool_rows_body<P, 4, S>(g, xp, yp, r0, r1);
}

#ifdef MILKIT_VMATH_AVX2
template <Pool P, int S>
__attribute__((target("avx2,fma"))) void pool_rows_avx2(const PoolGeom& g, const float* xp,
                                                        float* yp, int64_t r0, int64_t r1) {
  pool_rows_body<P, 8, S>(g, xp, yp, r0, r1);
}

template <Pool P, int S>
__attribute__((target("avx2,fma,avx512f,avx512vl"))) void pool_rows_avx512(const PoolGeom& g,
                                                                           const float* xp,
                                                                           float* yp, int64_t r0,
                                                                           int64_t r1) {
  pool_rows_body<P, 16, S>(g, xp, yp, r0, r1);
}
#endif

typedef void (*PoolRows)(const PoolGeom&, const float*, float*, int64_t, int64_t);

/// The rows kernel for this CPU and column stride.
template <Pool P, int S>
PoolRows pool_rows_for() {
#ifdef MILKIT_VMATH_AVX2
  if (vmath::cpu_avx512()) return pool_rows_avx512<P, S>;
  if (vmath::cpu_avx2_fma()) return pool_rows_avx2<P, S>;
#endif
  return pool_rows_base<P, S>;
}

/// Runs the pool over planes (N * C), each cut in bands of output rows when there are fewer
/// planes than about four per thread.
template <Pool P>
void run_pool(PoolGeom g, const float* x, float* y) {
  const int64_t IW = g.in[2], OW = g.out[2], KW = g.k[2], SW = g.s[2], pw = g.pb[2];
  const int S = SW == 1 ? 1 : SW == 2 ? 2 : 0;
  const PoolRows fn = S == 1   ? pool_rows_for<P, 1>()
                      : S == 2 ? pool_rows_for<P, 2>()
                               : pool_rows_for<P, 0>();
  // vector blocks: every tap's first load at column >= 0, its last (ow + L - 1) * SW + KW - 1 -
  // pw (+ 1 for the stride-2 permute's second load) within the row
  const int64_t extra = S == 2 ? 1 : 0;
  g.vlo = std::min<int64_t>(OW, (pw + SW - 1) / SW);
  g.vhi = std::clamp<int64_t>(floor_div(IW - KW - extra + pw, SW) + 1, g.vlo, OW);
  std::vector<float> wcount;
  if (P == Pool::Avg) {
    const Span& sw = g.sp[2];
    wcount.resize(static_cast<size_t>(OW));
    for (int64_t o = 0; o < OW; ++o)
      wcount[o] = static_cast<float>(g.exclude ? sw.hi[o] - sw.lo[o] : sw.padded[o]);
    g.wcount = wcount.data();
  }
  const int64_t rows = g.out[0] * g.out[1], ip = g.in[0] * g.in[1] * IW, op = rows * OW;
  const int64_t t = num_threads();
  int64_t nb = g.planes >= 4 * t ? 1 : std::min<int64_t>(rows, (4 * t + g.planes - 1) / g.planes);
  const int64_t band = (rows + nb - 1) / nb;
  nb = (rows + band - 1) / band;
  const int64_t work = std::max<int64_t>(1, band * OW * g.k[0] * g.k[1] * KW);
  parallel_for(g.planes * nb, std::max<int64_t>(1, 32768 / work), [&](int64_t b, int64_t e) {
    for (int64_t task = b; task < e; ++task) {
      const int64_t p = task / nb, r0 = task % nb * band, r1 = std::min(rows, r0 + band);
      fn(g, x + p * ip, y + p * op, r0, r1);
    }
  });
}

template <Pool P>
void pool_kernel(KernelCtx& k) {
  const Tensor& x = k.in("x");
  if (x.dtype() != DataType::Float32) k.fail("x must be fp16 or fp32, got " + x.describe());
  if (x.rank() < 3 || x.rank() > 5) k.fail("x must have rank 3 to 5, got " + x.describe());
  const int nd = x.rank() - 2;
  if (P == Pool::L2 && nd > 2) k.fail("l2_pool supports 1 or 2 spatial dims, got " + std::to_string(nd));
  std::vector<int64_t> ks = k.ints("kernel_sizes");
  std::vector<int64_t> st = k.has("strides") ? k.ints("strides") : std::vector<int64_t>(nd, 1);
  if (static_cast<int>(ks.size()) != nd || static_cast<int>(st.size()) != nd)
    k.fail("kernel_sizes " + shape_str(ks) + " and strides " + shape_str(st) +
           " need one value per spatial dim (" + std::to_string(nd) + ")");
  std::string pad_type = k.str_or("pad_type", "valid");
  std::transform(pad_type.begin(), pad_type.end(), pad_type.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::vector<int64_t> pad;
  if (pad_type == "custom") {
    pad = k.has("pad") ? k.ints("pad") : std::vector<int64_t>(2 * static_cast<size_t>(nd), 0);
    if (static_cast<int>(pad.size()) != 2 * nd)
      k.fail("pad " + shape_str(pad) + " needs two values per spatial dim");
    for (int64_t p : pad)
      if (p < 0) k.fail("pad values must be non-negative, got " + shape_str(pad));
  } else if (pad_type != "valid" && pad_type != "same" && pad_type != "same_lower") {
    k.fail("unknown pad_type \"" + pad_type + "\"");
  }
  const bool ceil_mode = k.bool_or("ceil_mode", false);
  const bool exclude = P == Pool::Avg && k.bool_or("exclude_padding_from_average", false);

  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kv[3] = {1, 1, 1}, sv[3] = {1, 1, 1}, pbv[3] = {0, 0, 0};
  Span sp[3];
  std::vector<int64_t> oshape{x.dim(0), x.dim(1)};
  for (int i = 0; i < nd; ++i) {
    const int j = 3 - nd + i;
    const int64_t n = x.dim(2 + i), kk = ks[i], s = st[i];
    if (kk <= 0 || s <= 0)
      k.fail("kernel_sizes and strides must be positive, got " + shape_str(ks) + " and " + shape_str(st));
    int64_t before = 0, total = 0;
    if (pad_type == "custom") {
      before = pad[2 * i];
      total = pad[2 * i] + pad[2 * i + 1];
    } else if (pad_type != "valid") {
      total = ops::same_total_pad(n, kk, s);
      before = ops::same_pad_before(pad_type, total);
    }
    int64_t o = ops::spatial_out_size(n, total, kk, s, ceil_mode);
    if (o <= 0)
      k.fail("spatial dim " + std::to_string(i) + " has invalid output size " + std::to_string(o) +
             ": kernel size " + std::to_string(kk) + " exceeds the padded input size " +
             std::to_string(n + total));
    in[j] = n;
    out[j] = o;
    kv[j] = kk;
    sv[j] = s;
    pbv[j] = before;
    oshape.push_back(o);
    Span& p = sp[j];
    p.lo.resize(o);
    p.hi.resize(o);
    p.padded.resize(o);
    for (int64_t t = 0; t < o; ++t) {
      const int64_t start = t * s - before, end = start + kk;
      p.lo[t] = std::clamp<int64_t>(start, 0, n);
      p.hi[t] = std::clamp<int64_t>(end, p.lo[t], n);
      p.padded[t] = std::max<int64_t>(0, std::min(end, n + total - before) - start);
    }
  }
  for (int j = 0; j < 3 - nd; ++j) sp[j] = Span{{0}, {1}, {1}};

  Tensor& y = k.alloc(0, oshape);
  if (y.numel() == 0) return;
  PoolGeom g;
  g.planes = x.dim(0) * x.dim(1);
  for (int j = 0; j < 3; ++j) {
    g.in[j] = in[j];
    g.out[j] = out[j];
    g.k[j] = kv[j];
    g.s[j] = sv[j];
    g.pb[j] = pbv[j];
  }
  g.sp = sp;
  g.exclude = exclude;
  run_pool<P>(g, x.data<float>(), y.mutable_data<float>());
}

}  // namespace

void register_pool_kernels(KernelRegistry& r) {
  r.add("avg_pool", {pool_kernel<Pool::Avg>, true});
  r.add("max_pool", {pool_kernel<Pool::Max>, true});
  r.add("l2_pool", {pool_kernel<Pool::L2>, true});
}

}  // namespace milkit
