// Kernels of the scatter / gather ops: gather, gather_along_axis, gather_nd, scatter,
// scatter_along_axis, scatter_nd.
//
// Indices (int32 / int16 / uint16 / int8 / uint8 by opset) are checked before anything is read or
// written: an index i of a dim of size n must lie in [-n, n); negative ones count from the end
// (numpy / the iOS15-16 definition). With validate_indices = true (iOS17) the valid range is
// [0, n), as coremltools' compile-time check. An index out of range raises IndexError naming the
// op, the index, its position and the dim; nothing is read or written outside a buffer. (iOS17
// leaves out-of-range indices undefined without validate_indices; the interpreter reports them.)
//
// The gathers move raw elements (every dtype exact, fp16 kept as is). The scatters compute in
// fp32 (fp16 data is converted) or int32; updates are applied in the order of the indices, so a
// repeated index sees every update in turn (mode "update": the last one wins). Modes: update, add,
// sub (data - update), mul, div (data / update; int32: truncating, division by 0 gives 0), max,
// min (NaN propagates, as np.maximum / np.minimum). int32 arithmetic wraps.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>

#include "../dispatch.h"
#include "../packed_weight.h"
#include "kernels.h"
#include "milkit/exec/threads.h"

namespace milkit {

namespace {

constexpr int64_t kGrainElems = 32768;  // elements of work per parallel chunk

int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, work_per_item));
}

int64_t prod(const std::vector<int64_t>& s, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e; ++i) p *= s[i];
  return p;
}

/// The indices as int64, each checked against the size of its dim and made non-negative.
/// `dim_of(i)` is the index of x's dim that indices element i addresses.
template <typename DimOf>
std::vector<int64_t> load_indices(KernelCtx& k, const Tensor& idx, const std::vector<int64_t>& xs,
                                  const char* x_name, DimOf dim_of) {
  bool validate = k.bool_or("validate_indices", false);
  std::vector<int64_t> out(static_cast<size_t>(idx.numel()));
  std::atomic<int64_t> first_bad{std::numeric_limits<int64_t>::max()};
  exec::dispatch_all(idx.dtype(), [&](auto tag) {
    using I = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<I> && !std::is_same_v<I, bool>) {
      const I* p = idx.data<I>();
      parallel_for(idx.numel(), kGrainElems, [&](int64_t s, int64_t e) {
        for (int64_t i = s; i < e; ++i) {
          int64_t v = static_cast<int64_t>(p[i]), n = xs[dim_of(i)];
          if (v < 0 && !validate) v += n;
          if (v < 0 || v >= n) {
            int64_t cur = first_bad.load();
            while (i < cur && !first_bad.compare_exchange_weak(cur, i)) {
            }
            break;
          }
          out[i] = v;
        }
      });
    } else {
      k.fail("indices must be an integer tensor, got " + std::string(dtype_name(idx.dtype())));
    }
  });
  int64_t bad = first_bad.load();
  if (bad != std::numeric_limits<int64_t>::max()) {
    int64_t v = static_cast<int64_t>(idx.get(bad)), d = dim_of(bad), n = xs[static_cast<size_t>(d)];
    std::string range = validate ? "[0, " + std::to_string(n) + ")"
                                 : "[" + std::to_string(-n) + ", " + std::to_string(n) + ")";
    k.index_error("index " + std::to_string(v) + " (indices element " + std::to_string(bad) +
                  ") is out of range for dim " + std::to_string(d) + " of " + x_name + " (shape " +
                  shape_str(xs) + "): valid indices are in " + range);
  }
  return out;
}

/// Copies n elements of `size` bytes.
inline void copy_elems(uint8_t* dst, const uint8_t* src, int64_t n, int size) {
  std::memcpy(dst, src, static_cast<size_t>(n) * static_cast<size_t>(size));
}

/// Calls f(E{}) with the unsigned type of `size` bytes (raw element moves).
template <typename F>
void by_itemsize(KernelCtx& k, int size, F&& f) {
  switch (size) {
    case 1: f(uint8_t{}); return;
    case 2: f(uint16_t{}); return;
    case 4: f(uint32_t{}); return;
    case 8: f(uint64_t{}); return;
    default: k.fail("unsupported element size " + std::to_string(size));
  }
}

void check_batch_dims(KernelCtx& k, const std::vector<int64_t>& xs, const Tensor& idx, int64_t bd) {
  if (bd < 0 || bd > idx.rank() || bd >= std::max<int64_t>(static_cast<int64_t>(xs.size()), 1))
    k.fail("batch_dims " + std::to_string(bd) + " is out of range for x of shape " + shape_str(xs) +
           " and indices of shape " + shape_str(idx.shape()));
  for (int d = 0; d < bd; ++d)
    if (xs[static_cast<size_t>(d)] != idx.dim(d))
      k.fail("batch dim " + std::to_string(d) + " differs: x has shape " + shape_str(xs) +
             ", indices " + shape_str(idx.shape()));
}

// ---- gather -------------------------------------------------------------------------------------

/// A checked gather over x of shape `xs`: the indices made non-negative, the output allocated,
/// and output row r (of `rows`, each I elements) copying x's run at element (from(r)) * I.
struct GatherRows {
  std::vector<int64_t> ind;
  Tensor* out = nullptr;
  int64_t P = 0, N = 0, I = 0, M = 0, rows = 0;
  /// The run of x that output row r copies (in units of I elements).
  int64_t from(int64_t r) const {
    const int64_t m = r % M, bp = r / M, b = bp / P;
    return bp * N + ind[b * M + m];
  }
};

/// Checks gather's inputs against x (shape `xs`, dtype `dt`: a tensor's or a packed weight's),
/// loads the indices and allocates the output.
GatherRows gather_rows(KernelCtx& k, const std::vector<int64_t>& xs, DataType dt) {
  const Tensor& idx = k.in("indices");
  const int rank = static_cast<int>(xs.size());
  if (rank == 0) k.fail("x must have rank >= 1");
  int64_t axis = k.axis(k.int_or("axis", 0), rank);
  int64_t bd = k.int_or("batch_dims", 0);
  check_batch_dims(k, xs, idx, bd);
  if (axis < bd)
    k.fail("axis " + std::to_string(axis) + " must be >= batch_dims " + std::to_string(bd));
  const auto& is = idx.shape();
  std::vector<int64_t> oshape(xs.begin(), xs.begin() + axis);
  oshape.insert(oshape.end(), is.begin() + bd, is.end());
  oshape.insert(oshape.end(), xs.begin() + axis + 1, xs.end());
  GatherRows g;
  g.ind = load_indices(k, idx, xs, "x", [axis](int64_t) { return axis; });
  g.out = &k.alloc(0, oshape);
  if (g.out->dtype() != dt) k.fail("output dtype differs from x's");
  g.P = prod(xs, bd, axis);
  g.N = xs[axis];
  g.I = prod(xs, axis + 1, xs.size());
  g.M = prod(is, bd, is.size());
  g.rows = g.out->numel() == 0 ? 0 : prod(xs, 0, bd) * g.P * g.M;
  return g;
}

/// gather from x held packed (a compressed embedding table): only the gathered runs of x are
/// decoded, straight into the output (fp16 or fp32, x's own dtype).
void gather_packed(KernelCtx& k, const PackedWeight& pw) {
  const GatherRows g = gather_rows(k, pw.shape(), pw.dtype());
  const int64_t I = g.I;
  const bool half = g.out->dtype() == DataType::Float16;
  parallel_for(g.rows, grain_for(I), [&](int64_t s, int64_t e) {
    std::vector<float> tmp(half ? static_cast<size_t>(std::min<int64_t>(I, 4096)) : 0);
    for (int64_t r = s; r < e; ++r) {
      const int64_t from = g.from(r) * I;
      if (!half) {
        pw.decode(from, I, g.out->mutable_data<float>() + r * I);
        continue;
      }
      uint16_t* o = g.out->mutable_data<uint16_t>() + r * I;
      for (int64_t c = 0; c < I; c += 4096) {  // fp16 values widened exactly: narrowed exactly
        const int64_t n = std::min<int64_t>(4096, I - c);
        pw.decode(from + c, n, tmp.data());
        floats_to_halves(tmp.data(), o + c, static_cast<size_t>(n));
      }
    }
  });
}

void gather(KernelCtx& k) {
  if (const PackedWeight* pw = k.packed("x")) {
    gather_packed(k, *pw);
    return;
  }
  const Tensor& x = k.in("x");
  const GatherRows g = gather_rows(k, x.shape(), x.dtype());
  if (g.rows == 0) return;
  const int64_t I = g.I;
  const int sz = x.itemsize();
  const uint8_t* xp = x.bytes();
  uint8_t* op = g.out->mutable_bytes();
  if (I == 1) {  // element gather (e.g. a 1-D table): typed loop over rows
    by_itemsize(k, sz, [&](auto e) {
      using E = decltype(e);
      const E* src = reinterpret_cast<const E*>(xp);
      E* dst = reinterpret_cast<E*>(op);
      parallel_for(g.rows, kGrainElems, [&](int64_t s, int64_t en) {
        for (int64_t r = s; r < en; ++r) dst[r] = src[g.from(r)];
      });
    });
    return;
  }
  // row gather (embedding lookup): one contiguous copy of I elements per output row
  parallel_for(g.rows, grain_for(I), [&](int64_t s, int64_t e) {
    for (int64_t r = s; r < e; ++r) copy_elems(op + r * I * sz, xp + g.from(r) * I * sz, I, sz);
  });
}

// ---- gather_along_axis --------------------------------------------------------------------------

/// Checks that indices (and updates) match data off the axis; returns P, N, M, I.
void along_axis_dims(KernelCtx& k, const Tensor& x, const Tensor& idx, int64_t axis, const char* x_name,
                     int64_t& P, int64_t& N, int64_t& M, int64_t& I) {
  if (idx.rank() != x.rank())
    k.fail(std::string("indices (shape ") + shape_str(idx.shape()) + ") must have the rank of " + x_name +
           " (shape " + shape_str(x.shape()) + ")");
  for (int d = 0; d < x.rank(); ++d)
    if (d != axis && idx.dim(d) != x.dim(d))
      k.fail(std::string("indices (shape ") + shape_str(idx.shape()) + ") and " + x_name + " (shape " +
             shape_str(x.shape()) + ") differ at dim " + std::to_string(d) + " (off the axis)");
  P = prod(x.shape(), 0, axis);
  N = x.dim(static_cast<int>(axis));
  M = idx.dim(static_cast<int>(axis));
  I = prod(x.shape(), axis + 1, x.shape().size());
}

void gather_along_axis(KernelCtx& k) {
  const Tensor& x = k.in("x");
  const Tensor& idx = k.in("indices");
  int rank = x.rank();
  if (rank == 0) k.fail("x must have rank >= 1");
  int64_t axis = k.axis(k.int_or("axis", 0), rank);
  int64_t P, N, M, I;
  along_axis_dims(k, x, idx, axis, "x", P, N, M, I);
  std::vector<int64_t> ind = load_indices(k, idx, x.shape(), "x", [axis](int64_t) { return axis; });
  Tensor& out = k.alloc(0, idx.shape());
  if (out.dtype() != x.dtype()) k.fail("output dtype differs from x's");
  if (out.numel() == 0) return;
  by_itemsize(k, x.itemsize(), [&](auto e) {
    using E = decltype(e);
    parallel_for(P * M, grain_for(I), [&](int64_t s, int64_t en) {
      for (int64_t r = s; r < en; ++r) {
        int64_t p = r / M;
        // out[p, m, j] = x[p, ind[p, m, j], j]
        E* d = out.mutable_data<E>() + r * I;
        const E* b = x.data<E>() + p * N * I;
        const int64_t* o = ind.data() + r * I;
        for (int64_t j = 0; j < I; ++j) d[j] = b[o[j] * I + j];
      }
    });
  });
}

// ---- gather_nd ----------------------------------------------------------------------------------

void gather_nd(KernelCtx& k) {
  const Tensor& x = k.in("x");
  const Tensor& idx = k.in("indices");
  if (idx.rank() < 1) k.fail("indices must have rank >= 1");
  int64_t bd = k.int_or("batch_dims", 0);
  if (bd < 0 || bd >= idx.rank() || bd > x.rank())
    k.fail("batch_dims " + std::to_string(bd) + " is out of range for x of shape " + shape_str(x.shape()) +
           " and indices of shape " + shape_str(idx.shape()));
  for (int d = 0; d < bd; ++d)
    if (x.dim(d) != idx.dim(d))
      k.fail("batch dim " + std::to_string(d) + " differs: x has shape " + shape_str(x.shape()) +
             ", indices " + shape_str(idx.shape()));
  int64_t depth = idx.dim(-1);
  if (bd + depth > x.rank())
    k.fail("indices.shape[-1] (" + std::to_string(depth) + ") + batch_dims (" + std::to_string(bd) +
           ") exceeds the rank of x (shape " + shape_str(x.shape()) + ")");
  const auto& xs = x.shape();
  const auto& is = idx.shape();
  std::vector<int64_t> oshape(is.begin(), is.end() - 1);
  oshape.insert(oshape.end(), xs.begin() + bd + depth, xs.end());
  std::vector<int64_t> ind = load_indices(k, idx, x.shape(), "x", [bd, depth](int64_t i) { return bd + i % depth; });
  Tensor& out = k.alloc(0, oshape);
  if (out.dtype() != x.dtype()) k.fail("output dtype differs from x's");
  if (out.numel() == 0) return;
  int64_t nb = prod(xs, 0, bd), M = prod(is, bd, is.size() - 1), S = prod(xs, bd + depth, xs.size());
  int64_t bstride = prod(xs, bd, xs.size());
  std::vector<int64_t> st(static_cast<size_t>(depth));
  for (int64_t j = 0; j < depth; ++j) st[j] = prod(xs, bd + j + 1, xs.size());
  int sz = x.itemsize();
  const uint8_t* xp = x.bytes();
  uint8_t* op = out.mutable_bytes();
  parallel_for(nb * M, grain_for(S + depth), [&](int64_t s, int64_t e) {
    for (int64_t r = s; r < e; ++r) {
      int64_t off = (r / M) * bstride;
      const int64_t* iv = ind.data() + r * depth;
      for (int64_t j = 0; j < depth; ++j) off += iv[j] * st[j];
      copy_elems(op + r * S * sz, xp + off * sz, S, sz);
    }
  });
}

// ---- scatter family -----------------------------------------------------------------------------

enum class Mode { Update, Add, Sub, Mul, Div, Max, Min };

Mode parse_mode(KernelCtx& k) {
  std::string m = k.str_or("mode", "add");
  if (m == "update") return Mode::Update;
  if (m == "add") return Mode::Add;
  if (m == "sub") return Mode::Sub;
  if (m == "mul") return Mode::Mul;
  if (m == "div") return Mode::Div;
  if (m == "max") return Mode::Max;
  if (m == "min") return Mode::Min;
  k.fail("mode must be one of update, add, sub, mul, div, max, min; got \"" + m + "\"");
}

/// a (the current element) combined with the update b.
template <Mode mode, typename T>
inline T combine(T a, T b) {
  if constexpr (mode == Mode::Update) {
    return b;
  } else if constexpr (std::is_floating_point_v<T>) {
    if constexpr (mode == Mode::Add) return a + b;
    if constexpr (mode == Mode::Sub) return a - b;
    if constexpr (mode == Mode::Mul) return a * b;
    if constexpr (mode == Mode::Div) return a / b;
    if constexpr (mode == Mode::Max) return (a != a || a > b) ? a : (b != b ? b : (a == b ? a : b));
    if constexpr (mode == Mode::Min) return (a != a || a < b) ? a : (b != b ? b : (a == b ? a : b));
  } else {
    using U = std::make_unsigned_t<T>;
    if constexpr (mode == Mode::Add) return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    if constexpr (mode == Mode::Sub) return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
    if constexpr (mode == Mode::Mul) return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    if constexpr (mode == Mode::Div) {
      if (b == 0) return T(0);
      if constexpr (std::is_signed_v<T>)
        if (a == std::numeric_limits<T>::min() && b == T(-1)) return a;  // wraps
      return static_cast<T>(a / b);
    }
    if constexpr (mode == Mode::Max) return a > b ? a : b;
    if constexpr (mode == Mode::Min) return a < b ? a : b;
  }
}

/// Calls f(Tag<T>, std::integral_constant<Mode, m>) for the data dtype and mode.
template <typename F>
void dispatch_scatter(KernelCtx& k, const Tensor& data, const Tensor& updates, F&& f) {
  if (updates.dtype() != data.dtype()) k.fail("updates and data have different dtypes");
  Mode mode = parse_mode(k);
  exec::dispatch_compute(data.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int32_t> ||
                  std::is_same_v<T, int16_t> || std::is_same_v<T, uint16_t> || std::is_same_v<T, int8_t> ||
                  std::is_same_v<T, uint8_t>) {
      switch (mode) {
        case Mode::Update: f(tag, std::integral_constant<Mode, Mode::Update>{}); break;
        case Mode::Add: f(tag, std::integral_constant<Mode, Mode::Add>{}); break;
        case Mode::Sub: f(tag, std::integral_constant<Mode, Mode::Sub>{}); break;
        case Mode::Mul: f(tag, std::integral_constant<Mode, Mode::Mul>{}); break;
        case Mode::Div: f(tag, std::integral_constant<Mode, Mode::Div>{}); break;
        case Mode::Max: f(tag, std::integral_constant<Mode, Mode::Max>{}); break;
        case Mode::Min: f(tag, std::integral_constant<Mode, Mode::Min>{}); break;
      }
    } else {
      k.fail("unsupported data dtype " + std::string(dtype_name(data.dtype())));
    }
  });
}

/// The output: a copy of data.
Tensor& copy_data(KernelCtx& k, const Tensor& data) {
  Tensor& out = k.alloc(0, data.shape());
  if (out.dtype() != data.dtype()) k.fail("output dtype differs from data's");
  if (data.nbytes()) std::memcpy(out.mutable_bytes(), data.bytes(), data.nbytes());
  return out;
}

void scatter(KernelCtx& k) {
  const Tensor& data = k.in("data");
  const Tensor& idx = k.in("indices");
  const Tensor& upd = k.in("updates");
  int rank = data.rank();
  if (rank == 0) k.fail("data must have rank >= 1");
  int64_t axis = k.axis(k.int_or("axis", 0), rank);
  const auto& ds = data.shape();
  std::vector<int64_t> want(ds.begin(), ds.begin() + axis);
  want.insert(want.end(), idx.shape().begin(), idx.shape().end());
  want.insert(want.end(), ds.begin() + axis + 1, ds.end());
  if (upd.shape() != want)
    k.fail("updates has shape " + shape_str(upd.shape()) + ", expected " + shape_str(want) +
           " (data.shape[:axis] + indices.shape + data.shape[axis+1:])");
  std::vector<int64_t> ind = load_indices(k, idx, data.shape(), "data", [axis](int64_t) { return axis; });
  Tensor& out = copy_data(k, data);
  int64_t P = prod(ds, 0, axis), N = ds[axis], I = prod(ds, axis + 1, ds.size()), M = idx.numel();
  if (P * M * I == 0) return;
  dispatch_scatter(k, data, upd, [&](auto tag, auto mc) {
    using T = typename decltype(tag)::type;
    constexpr Mode mode = decltype(mc)::value;
    T* o = out.mutable_data<T>();
    const T* u = upd.data<T>();
    // rows p are independent; within a row the updates go in index order
    parallel_for(P, grain_for(M * I), [&](int64_t s, int64_t e) {
      for (int64_t p = s; p < e; ++p)
        for (int64_t m = 0; m < M; ++m) {
          T* dst = o + (p * N + ind[m]) * I;
          const T* src = u + (p * M + m) * I;
          for (int64_t j = 0; j < I; ++j) dst[j] = combine<mode>(dst[j], src[j]);
        }
    });
  });
}

void scatter_along_axis(KernelCtx& k) {
  const Tensor& data = k.in("data");
  const Tensor& idx = k.in("indices");
  const Tensor& upd = k.in("updates");
  int rank = data.rank();
  if (rank == 0) k.fail("data must have rank >= 1");
  int64_t axis = k.axis(k.int_or("axis", 0), rank);
  int64_t P, N, M, I;
  along_axis_dims(k, data, idx, axis, "data", P, N, M, I);
  if (upd.shape() != idx.shape())
    k.fail("updates has shape " + shape_str(upd.shape()) + ", expected the shape of indices " +
           shape_str(idx.shape()));
  std::vector<int64_t> ind = load_indices(k, idx, data.shape(), "data", [axis](int64_t) { return axis; });
  Tensor& out = copy_data(k, data);
  if (P * M * I == 0) return;
  constexpr int64_t kBlock = 1024;  // columns j are independent: split them too
  int64_t nblk = (I + kBlock - 1) / kBlock;
  dispatch_scatter(k, data, upd, [&](auto tag, auto mc) {
    using T = typename decltype(tag)::type;
    constexpr Mode mode = decltype(mc)::value;
    T* o = out.mutable_data<T>();
    const T* u = upd.data<T>();
    parallel_for(P * nblk, grain_for(M * std::min(I, kBlock)), [&](int64_t s, int64_t e) {
      for (int64_t w = s; w < e; ++w) {
        int64_t p = w / nblk, j0 = (w % nblk) * kBlock, j1 = std::min(I, j0 + kBlock);
        T* base = o + p * N * I;
        for (int64_t m = 0; m < M; ++m) {
          int64_t r = (p * M + m) * I;
          for (int64_t j = j0; j < j1; ++j) {
            T& d = base[ind[r + j] * I + j];
            d = combine<mode>(d, u[r + j]);
          }
        }
      }
    });
  });
}

void scatter_nd(KernelCtx& k) {
  const Tensor& data = k.in("data");
  const Tensor& idx = k.in("indices");
  const Tensor& upd = k.in("updates");
  if (idx.rank() < 1) k.fail("indices must have rank >= 1");
  int64_t depth = idx.dim(-1);
  if (depth > data.rank())
    k.fail("indices.shape[-1] (" + std::to_string(depth) + ") exceeds the rank of data (shape " +
           shape_str(data.shape()) + ")");
  const auto& ds = data.shape();
  std::vector<int64_t> want(idx.shape().begin(), idx.shape().end() - 1);
  want.insert(want.end(), ds.begin() + depth, ds.end());
  if (upd.shape() != want)
    k.fail("updates has shape " + shape_str(upd.shape()) + ", expected " + shape_str(want) +
           " (indices.shape[:-1] + data.shape[indices.shape[-1]:])");
  std::vector<int64_t> ind;
  if (depth) ind = load_indices(k, idx, data.shape(), "data", [depth](int64_t i) { return i % depth; });
  Tensor& out = copy_data(k, data);
  int64_t K = prod(idx.shape(), 0, idx.shape().size() - 1), S = prod(ds, depth, ds.size());
  if (K * S == 0) return;
  std::vector<int64_t> st(static_cast<size_t>(depth));
  for (int64_t j = 0; j < depth; ++j) st[j] = prod(ds, j + 1, ds.size());
  std::vector<int64_t> offs(static_cast<size_t>(K), 0);
  for (int64_t r = 0; r < K; ++r)
    for (int64_t j = 0; j < depth; ++j) offs[r] += ind[r * depth + j] * st[j];
  constexpr int64_t kBlock = 1024;  // slice columns are independent: split them
  int64_t nblk = (S + kBlock - 1) / kBlock;
  dispatch_scatter(k, data, upd, [&](auto tag, auto mc) {
    using T = typename decltype(tag)::type;
    constexpr Mode mode = decltype(mc)::value;
    T* o = out.mutable_data<T>();
    const T* u = upd.data<T>();
    parallel_for(nblk, grain_for(K * std::min(S, kBlock)), [&](int64_t s, int64_t e) {
      for (int64_t b = s; b < e; ++b) {
        int64_t j0 = b * kBlock, j1 = std::min(S, j0 + kBlock);
        for (int64_t r = 0; r < K; ++r) {  // in index order: repeated indices see every update
          T* dst = o + offs[r];
          const T* src = u + r * S;
          for (int64_t j = j0; j < j1; ++j) dst[j] = combine<mode>(dst[j], src[j]);
        }
      }
    });
  });
}

}  // namespace

void register_scatter_gather_kernels(KernelRegistry& r) {
  r.add("gather", {gather, false});
  r.add("gather_along_axis", {gather_along_axis, false});
  r.add("gather_nd", {gather_nd, false});
  r.add("scatter", {scatter});
  r.add("scatter_along_axis", {scatter_along_axis});
  r.add("scatter_nd", {scatter_nd});
}

}  // namespace milkit
