// Kernels of the 18 elementwise binary ops: numpy broadcasting, fp16 computed in fp32, int32
// arithmetic wrapping on overflow, Python's floor semantics for floor_div / mod, NaN propagated
// by maximum / minimum (np.maximum), integer floor_div / mod by zero giving 0 (numpy's result).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "../dispatch.h"
#include "kernels.h"
#include "milkit/exec/threads.h"
#include "milkit/types/datatype.h"
#include "vec_math.h"

namespace milkit {

namespace {

using exec::BroadcastIndexer;

/// Runs out[i] = f(x[ix], y[iy]) over the broadcast shape `shape` into `o`, in parallel; then
/// done(s, e) on each finished range of outputs (in the thread that made it).
template <typename T, typename R, typename F, typename D>
void binary_ranges(const std::vector<int64_t>& shape, const Tensor& x, const Tensor& y, R* o, F f,
                   D done) {
  const T* a = x.data<T>();
  const T* b = y.data<T>();
  const int64_t n = shape_numel(shape);
  constexpr int64_t kGrain = 16384;
  if (x.numel() == n && y.numel() == n) {
    parallel_for(n, kGrain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) o[i] = f(a[i], b[i]);
      done(s, e);
    });
  } else if (y.numel() == 1 && x.numel() == n) {
    T bv = b[0];
    parallel_for(n, kGrain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) o[i] = f(a[i], bv);
      done(s, e);
    });
  } else if (x.numel() == 1 && y.numel() == n) {
    T av = a[0];
    parallel_for(n, kGrain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) o[i] = f(av, b[i]);
      done(s, e);
    });
  } else {
    BroadcastIndexer bi(shape, {x.shape(), y.shape()});
    int64_t r = static_cast<int64_t>(bi.dims.size());
    int64_t inner = bi.dims[r - 1], sx = bi.st[0][r - 1], sy = bi.st[1][r - 1];
    if (inner < 16) {
      parallel_for(n, kGrain, [&](int64_t s, int64_t e) {
        bi.run(s, e, [&](int64_t i, int64_t ia, int64_t ib, int64_t) { o[i] = f(a[ia], b[ib]); });
        done(s, e);
      });
      return;
    }
    // rows of the merged inner dim: a contiguous loop per row, specialized on the strides
    parallel_for(n, kGrain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e;) {
        int64_t j0 = i % inner, cnt = std::min(inner - j0, e - i);
        int64_t off[3];
        bi.offsets(i - j0, off);
        const T* ap = a + off[0] + j0 * sx;
        const T* bp = b + off[1] + j0 * sy;
        R* op = o + i;
        if (sx == 1 && sy == 1) {
          for (int64_t j = 0; j < cnt; ++j) op[j] = f(ap[j], bp[j]);
        } else if (sx == 1 && sy == 0) {
          T bv = *bp;
          for (int64_t j = 0; j < cnt; ++j) op[j] = f(ap[j], bv);
        } else if (sx == 0 && sy == 1) {
          T av = *ap;
          for (int64_t j = 0; j < cnt; ++j) op[j] = f(av, bp[j]);
        } else {
          for (int64_t j = 0; j < cnt; ++j) op[j] = f(ap[j * sx], bp[j * sy]);
        }
        i += cnt;
      }
      done(s, e);
    });
  }
}

/// Runs out[i] = f(x[ix], y[iy]) over the broadcast shape, in parallel; fp32 results of an fp16
/// op are rounded to fp16 values range by range, while in cache.
template <typename T, typename R, typename F>
void binary_loop(KernelCtx& k, const Tensor& x, const Tensor& y, F f) {
  std::vector<int64_t> shape;
  try {
    shape = exec::broadcast_shape(x.shape(), y.shape());
  } catch (const ValueError& e) {
    k.fail(e.what());
  }
  Tensor& out = k.alloc(0, shape);
  R* o = out.mutable_data<R>();
  if constexpr (std::is_same_v<R, float>) {
    if (k.rounds_output()) {
      binary_ranges<T>(shape, x, y, o, f,
                       [o](int64_t s, int64_t e) { round_to_half(o + s, e - s); });
      k.set_rounded();
      return;
    }
  }
  binary_ranges<T>(shape, x, y, o, f, [](int64_t, int64_t) {});
}

/// Wrapping integer arithmetic (no signed-overflow UB).
template <typename T>
T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <typename T>
T wrap_sub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
}
template <typename T>
T wrap_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}

template <typename T>
T int_floordiv(T a, T b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<T>) {
    if (a == std::numeric_limits<T>::min() && b == -1) return a;  // wraps, as numpy
    T q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  } else {
    return a / b;
  }
}

template <typename T>
T int_mod(T a, T b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return 0;
    T r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  } else {
    return a % b;
  }
}

template <typename T>
T int_pow(T a, T b) {
  if constexpr (std::is_signed_v<T>) {
    if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
  }
  using U = std::make_unsigned_t<T>;
  U r = 1, base = static_cast<U>(a);
  auto e = static_cast<std::make_unsigned_t<T>>(b);
  while (e) {
    if (e & 1) r *= base;
    base *= base;
    e >>= 1;
  }
  return static_cast<T>(r);
}

/// np.maximum / np.minimum of floats (mask selects for fp32, so that the loops vectorize).
template <typename T>
T np_max(T a, T b) {
  if constexpr (std::is_same_v<T, float>) return vmath::np_max(a, b);
  return (a > b || a != a) ? a : b;
}
template <typename T>
T np_min(T a, T b) {
  if constexpr (std::is_same_v<T, float>) return vmath::np_min(a, b);
  return (a < b || a != a) ? a : b;
}

/// floor(q) for |q| < 2^51 without a libm call or a branch: round by adding 1.5 * 2^52, then
/// subtract 1 (through a bit mask) where that rounded up.
inline double floor_small(double q) {
  double r = (q + 6755399441055744.0) - 6755399441055744.0;
  int64_t one;
  double d = 1.0;
  std::memcpy(&one, &d, 8);
  one &= -static_cast<int64_t>(r > q);
  std::memcpy(&d, &one, 8);
  return r - d;
}

/// np.floor_divide for floats: the quotient of divmod, consistent with np.mod (floor_div(1, 0.1)
/// is 9, though 1.0f / 0.1f rounds to 10; floor_div(-5, inf) is -1 as mod(-5, inf) is inf);
/// division by zero gives a / b (inf or NaN). Quotients below 2^23 (and a finite b) take the
/// floor of the double quotient, which is exact: the double quotient of two floats is never
/// rounded across an integer. The others follow numpy's computation from fmod.
template <typename T>
T float_floordiv(T a, T b) {
  if constexpr (std::is_same_v<T, float>) {
    double q = static_cast<double>(a) / static_cast<double>(b);
    if (std::fabs(q) < 8388608.0 && std::isfinite(b)) return static_cast<T>(floor_small(q));
  }
  if (b == 0) return a / b;
  T m = std::fmod(a, b);
  T d = (a - m) / b;  // (nearly) an integer
  if (m != 0 && ((b < 0) != (m < 0))) d -= 1;
  if (d == 0) return std::copysign(T(0), a / b);
  T f = std::floor(d);
  return d - f > T(0.5) ? f + 1 : f;
}

/// np.mod for floats: the remainder takes b's sign (a zero too). For quotients below 2^23 it is
/// a - floor(a / b) b computed exactly in double (n b has at most 47 bits), rounded once like
/// numpy's fmod(a, b) + b.
template <typename T>
T float_mod(T a, T b) {
  if constexpr (std::is_same_v<T, float>) {
    double q = static_cast<double>(a) / static_cast<double>(b);
    if (std::fabs(q) < 8388608.0 && std::isfinite(b)) {
      T m = static_cast<T>(static_cast<double>(a) - floor_small(q) * static_cast<double>(b));
      return m != 0 ? m : std::copysign(T(0), b);
    }
  }
  T m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m != 0 ? m : std::copysign(T(0), b);
}

enum class Op { Add, Sub, Mul, RealDiv, FloorDiv, Mod, Pow, Max, Min, Eq, Ne, Gt, Ge, Lt, Le, And, Or, Xor };

template <Op op>
void binary_kernel(KernelCtx& k) {
  const Tensor& x = k.in("x");
  const Tensor& y = k.in("y");
  if (x.dtype() != y.dtype()) k.fail("x and y have different dtypes");
  exec::dispatch_compute(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, exec::half>) {
      k.fail("fp16 reaches the kernel unconverted");
    } else if constexpr (op == Op::Eq) {
      binary_loop<T, bool>(k, x, y, [](T a, T b) { return a == b; });
    } else if constexpr (op == Op::Ne) {
      binary_loop<T, bool>(k, x, y, [](T a, T b) { return a != b; });
    } else if constexpr (op == Op::Gt) {
      binary_loop<T, bool>(k, x, y, [](T a, T b) { return a > b; });
    } else if constexpr (op == Op::Ge) {
      binary_loop<T, bool>(k, x, y, [](T a, T b) { return a >= b; });
    } else if constexpr (op == Op::Lt) {
      binary_loop<T, bool>(k, x, y, [](T a, T b) { return a < b; });
    } else if constexpr (op == Op::Le) {
      binary_loop<T, bool>(k, x, y, [](T a, T b) { return a <= b; });
    } else if constexpr (op == Op::And) {
      binary_loop<T, bool>(k, x, y, [](T a, T b) { return a && b; });
    } else if constexpr (op == Op::Or) {
      binary_loop<T, bool>(k, x, y, [](T a, T b) { return a || b; });
    } else if constexpr (op == Op::Xor) {
      binary_loop<T, bool>(k, x, y, [](T a, T b) { return bool(a) != bool(b); });
    } else if constexpr (std::is_same_v<T, bool>) {
      k.fail("arithmetic on bool tensors");
    } else if constexpr (std::is_floating_point_v<T>) {
      if constexpr (op == Op::Add) binary_loop<T, T>(k, x, y, [](T a, T b) { return a + b; });
      if constexpr (op == Op::Sub) binary_loop<T, T>(k, x, y, [](T a, T b) { return a - b; });
      if constexpr (op == Op::Mul) binary_loop<T, T>(k, x, y, [](T a, T b) { return a * b; });
      if constexpr (op == Op::RealDiv) binary_loop<T, T>(k, x, y, [](T a, T b) { return a / b; });
      if constexpr (op == Op::FloorDiv)
        binary_loop<T, T>(k, x, y, [](T a, T b) { return float_floordiv(a, b); });
      if constexpr (op == Op::Mod) binary_loop<T, T>(k, x, y, [](T a, T b) { return float_mod(a, b); });
      if constexpr (op == Op::Pow) binary_loop<T, T>(k, x, y, [](T a, T b) { return std::pow(a, b); });
      // np.maximum / np.minimum: NaN in either operand gives NaN, ties give y
      if constexpr (op == Op::Max) binary_loop<T, T>(k, x, y, [](T a, T b) { return np_max(a, b); });
      if constexpr (op == Op::Min) binary_loop<T, T>(k, x, y, [](T a, T b) { return np_min(a, b); });
    } else {
      if constexpr (op == Op::Add) binary_loop<T, T>(k, x, y, [](T a, T b) { return wrap_add(a, b); });
      if constexpr (op == Op::Sub) binary_loop<T, T>(k, x, y, [](T a, T b) { return wrap_sub(a, b); });
      if constexpr (op == Op::Mul) binary_loop<T, T>(k, x, y, [](T a, T b) { return wrap_mul(a, b); });
      if constexpr (op == Op::RealDiv)
        // coremltools folds integer real_div as numpy's float64 division cast back to the int
        // dtype (x86 astype: truncation; inf, NaN and out-of-range quotients give INT32_MIN)
        binary_loop<T, T>(k, x, y, [](T a, T b) {
          double q = static_cast<double>(a) / static_cast<double>(b);
          if (!(q > -2147483649.0 && q < 2147483648.0))
            return static_cast<T>(std::numeric_limits<int32_t>::min());
          return static_cast<T>(static_cast<int32_t>(q));
        });
      if constexpr (op == Op::FloorDiv)
        binary_loop<T, T>(k, x, y, [](T a, T b) { return int_floordiv(a, b); });
      if constexpr (op == Op::Mod) binary_loop<T, T>(k, x, y, [](T a, T b) { return int_mod(a, b); });
      if constexpr (op == Op::Pow) binary_loop<T, T>(k, x, y, [](T a, T b) { return int_pow(a, b); });
      if constexpr (op == Op::Max) binary_loop<T, T>(k, x, y, [](T a, T b) { return a > b ? a : b; });
      if constexpr (op == Op::Min) binary_loop<T, T>(k, x, y, [](T a, T b) { return a < b ? a : b; });
    }
  });
}

}  // namespace

void register_elementwise_binary_kernels(KernelRegistry& r) {
  r.add("add", {binary_kernel<Op::Add>});
  r.add("sub", {binary_kernel<Op::Sub>});
  r.add("mul", {binary_kernel<Op::Mul>});
  r.add("real_div", {binary_kernel<Op::RealDiv>});
  r.add("floor_div", {binary_kernel<Op::FloorDiv>});
  r.add("mod", {binary_kernel<Op::Mod>});
  r.add("pow", {binary_kernel<Op::Pow>});
  r.add("maximum", {binary_kernel<Op::Max>});
  r.add("minimum", {binary_kernel<Op::Min>});
  r.add("equal", {binary_kernel<Op::Eq>});
  r.add("not_equal", {binary_kernel<Op::Ne>});
  r.add("greater", {binary_kernel<Op::Gt>});
  r.add("greater_equal", {binary_kernel<Op::Ge>});
  r.add("less", {binary_kernel<Op::Lt>});
  r.add("less_equal", {binary_kernel<Op::Le>});
  r.add("logical_and", {binary_kernel<Op::And>});
  r.add("logical_or", {binary_kernel<Op::Or>});
  r.add("logical_xor", {binary_kernel<Op::Xor>});
}

}  // namespace milkit
