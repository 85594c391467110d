// Kernel-side helpers shared by the interpreter's kernels: dtype dispatch, element conversion
// with numpy's rules, broadcasting, axis handling. Private to cpp/src/exec.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "milkit/types/datatype.h"
#include "milkit/types/error.h"

namespace milkit::exec {

/// fp16 storage with arithmetic through float (so templates can tell it from uint16).
struct half {
  uint16_t bits;
  half() = default;
  explicit half(float f) : bits(float_to_half(f)) {}
  operator float() const { return half_to_float(bits); }
};
static_assert(sizeof(half) == 2, "half is 2 bytes");

template <typename T>
struct Tag {
  using type = T;
};

template <typename T>
inline constexpr bool is_floating_v = std::is_floating_point_v<T> || std::is_same_v<T, half>;

/// Converts one element with numpy's astype rules (float -> int truncates toward zero; NaN and
/// out-of-range floats give the type's minimum, as numpy does on x86; ints wrap; -> bool is != 0).
template <typename D, typename S>
inline D convert(S s) {
  if constexpr (std::is_same_v<D, S>) {
    return s;
  } else if constexpr (std::is_same_v<D, bool>) {
    if constexpr (std::is_same_v<S, half>) return static_cast<float>(s) != 0.0f;
    else return s != 0;
  } else if constexpr (std::is_same_v<S, half>) {
    return convert<D>(static_cast<float>(s));
  } else if constexpr (std::is_same_v<D, half>) {
    return half(static_cast<float>(s));
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>) {
    // numpy on x86: types narrower than 64 bits convert through int32 (NaN and out-of-range give
    // INT32_MIN, then wrap to the narrow type); 64-bit types give INT64_MIN
    double d = static_cast<double>(s);
    if constexpr (sizeof(D) < 8 && !std::is_same_v<D, uint32_t>) {
      if (std::isnan(d) || d >= 2147483648.0 || d <= -2147483649.0)
        return static_cast<D>(std::numeric_limits<int32_t>::min());
      return static_cast<D>(static_cast<int32_t>(d));
    } else {
      if (std::isnan(d) || d >= 9.2233720368547758e18 || d < -9.2233720368547758e18)
        return static_cast<D>(std::numeric_limits<int64_t>::min());
      if constexpr (std::is_same_v<D, uint64_t>)
        return d >= 0 ? static_cast<uint64_t>(d) : static_cast<uint64_t>(static_cast<int64_t>(d));
      else
        return static_cast<D>(static_cast<int64_t>(d));
    }
  } else {
    return static_cast<D>(s);
  }
}

/// Calls f(Tag<T>{}) with the C++ type that stores `dt` (bool, half, float, double, int8..uint64;
/// sub-byte types as int8 / uint8). Throws TypeError for string, bf16 and fp8.
template <typename F>
inline void dispatch_all(DataType dt, F&& f) {
  switch (dt) {
    case DataType::Bool: f(Tag<bool>{}); return;
    case DataType::Float16: f(Tag<half>{}); return;
    case DataType::Float32: f(Tag<float>{}); return;
    case DataType::Float64: f(Tag<double>{}); return;
    case DataType::Int4:
    case DataType::Int8: f(Tag<int8_t>{}); return;
    case DataType::UInt1:
    case DataType::UInt2:
    case DataType::UInt3:
    case DataType::UInt4:
    case DataType::UInt6:
    case DataType::UInt8: f(Tag<uint8_t>{}); return;
    case DataType::Int16: f(Tag<int16_t>{}); return;
    case DataType::UInt16: f(Tag<uint16_t>{}); return;
    case DataType::Int32: f(Tag<int32_t>{}); return;
    case DataType::UInt32: f(Tag<uint32_t>{}); return;
    case DataType::Int64: f(Tag<int64_t>{}); return;
    case DataType::UInt64: f(Tag<uint64_t>{}); return;
    default:
      throw TypeError("the interpreter has no kernels for dtype " + std::string(dtype_name(dt)));
  }
}

/// Like dispatch_all, for the dtypes float-compute kernels see: fp32 and the integer types
/// (fp16 arrives as fp32), plus bool and fp64.
template <typename F>
inline void dispatch_compute(DataType dt, F&& f) {
  dispatch_all(dt, std::forward<F>(f));
}

/// Element i of raw storage as a double.
inline double load_double(DataType dt, const uint8_t* p, int64_t i) {
  double r = 0;
  dispatch_all(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    if constexpr (std::is_same_v<T, half>) r = static_cast<float>(v);
    else r = static_cast<double>(v);
  });
  return r;
}

/// Stores a double as element i of raw storage (converted with numpy's rules).
inline void store_double(DataType dt, uint8_t* p, int64_t i, double v) {
  dispatch_all(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T x = convert<T>(v);
    std::memcpy(p + i * sizeof(T), &x, sizeof(T));
  });
}

/// numpy's broadcast of two concrete shapes; throws ValueError naming both.
std::vector<int64_t> broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

/// Element strides of `in` broadcast to `out` (0 on broadcast dims), aligned to out's rank.
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in, const std::vector<int64_t>& out);

/// Row-major strides of a shape.
std::vector<int64_t> strides_of(const std::vector<int64_t>& shape);

/// Iterates an output of `shape` with up to 3 broadcast operands: calls f(out_i, off0, off1, off2)
/// for every output element, in order, over [begin, end). Dims are merged where possible.
struct BroadcastIndexer {
  std::vector<int64_t> dims;        ///< Merged output dims.
  std::vector<int64_t> st[3];       ///< Merged element strides of each operand.
  int nops = 0;                     ///< Number of operands.
  BroadcastIndexer(const std::vector<int64_t>& out, const std::vector<std::vector<int64_t>>& ins);
  /// Element offsets of each operand at output index i.
  void offsets(int64_t i, int64_t* off) const;
  /// Walks [begin, end), calling f(i, off0, off1, off2).
  template <typename F>
  void run(int64_t begin, int64_t end, F&& f) const {
    run_rows(begin, end,
             [&f](int64_t i, int64_t cnt, int64_t o0, int64_t o1, int64_t o2, int64_t s0,
                  int64_t s1, int64_t s2) {
               for (int64_t j = 0; j < cnt; ++j) f(i + j, o0 + j * s0, o1 + j * s1, o2 + j * s2);
             });
  }
  /// Walks [begin, end) by runs along the last merged dim: f(i, cnt, off0, off1, off2, s0, s1,
  /// s2) for output elements i .. i + cnt - 1, operand k's at off_k + j * s_k (s_k 0 or its
  /// stride), so a kernel can take each run whole (a copy, a fill).
  template <typename F>
  void run_rows(int64_t begin, int64_t end, F&& f) const {
    if (begin >= end) return;
    int r = static_cast<int>(dims.size());
    std::vector<int64_t> idx(r, 0);
    int64_t rem = begin;
    int64_t off[3] = {0, 0, 0};
    for (int d = r - 1; d >= 0; --d) {
      idx[d] = rem % dims[d];
      rem /= dims[d];
      for (int k = 0; k < nops; ++k) off[k] += idx[d] * st[k][d];
    }
    int64_t inner = r ? dims[r - 1] : 1;
    int64_t s0 = r ? st[0][r - 1] : 0, s1 = (r && nops > 1) ? st[1][r - 1] : 0,
            s2 = (r && nops > 2) ? st[2][r - 1] : 0;
    int64_t i = begin;
    while (i < end) {
      int64_t j0 = r ? idx[r - 1] : 0;
      int64_t cnt = std::min<int64_t>(inner - j0, end - i);
      f(i, cnt, off[0], off[1], off[2], s0, s1, s2);
      i += cnt;
      if (i >= end || r == 0) break;
      // advance to the next row
      off[0] += cnt * s0;
      if (nops > 1) off[1] += cnt * s1;
      if (nops > 2) off[2] += cnt * s2;
      idx[r - 1] = inner;
      for (int d = r - 1; d > 0 && idx[d] == dims[d]; --d) {
        for (int k = 0; k < nops; ++k) off[k] -= idx[d] * st[k][d];
        idx[d] = 0;
        ++idx[d - 1];
        for (int k = 0; k < nops; ++k) off[k] += st[k][d - 1];
      }
    }
  }
};

/// Python's floor division of integers (b != 0).
inline int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

/// Normalizes axis `a` into [0, rank); throws ValueError with `what` when out of range.
int64_t norm_axis(int64_t a, int64_t rank, const std::string& what);

}  // namespace milkit::exec
