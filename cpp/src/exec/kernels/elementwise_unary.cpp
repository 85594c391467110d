// Kernels of the elementwise unary ops: abs .. tanh, inverse / log / rsqrt (with epsilon), clip,
// threshold, logical_not, cast, and select (the control-flow family's op).
//
// Semantics follow numpy, as coremltools' value inference does:
//  - float ops compute in fp32 (fp16 arrives as fp32 and is rounded back by the executor); exp,
//    tanh and erf use the vectorizable math of vec_math.h (<= 3 ulp), the others libm;
//  - int32 abs / square wrap on overflow, sign gives -1 / 0 / 1, exp2 of an int32 is computed in
//    float64 and converted back like numpy's astype on x86 (truncation; out of range -> INT32_MIN);
//  - round is round-half-to-even (np.round), maximum / minimum in clip and threshold propagate NaN;
//  - cast is numpy's astype: float -> int truncates through int32 (NaN and out-of-range values
//    give INT32_MIN, which the narrower types then wrap), ints wrap, anything -> bool is != 0.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "../dispatch.h"
#include "kernels.h"
#include "params.h"
#include "milkit/exec/threads.h"
#include "vec_math.h"

namespace milkit {

namespace {

using exec::BroadcastIndexer;
using exec::half;

constexpr int64_t kGrain = 16384;

/// Runs out[i] = f(x[i]) over x (output `R`, x's shape), in parallel.
template <typename T, typename R, typename F>
void map_unary(KernelCtx& k, const Tensor& x, F f) {
  Tensor& out = k.alloc(0, x.shape());
  const T* a = x.data<T>();
  R* o = out.mutable_data<R>();
  parallel_for(x.numel(), kGrain, [&](int64_t s, int64_t e) {
    // the pointers in locals: a store of a 1-byte R (bool, int8) may alias any object, so with
    // them read through the closure the compiler reloads both after every element and does not
    // vectorize (logical_not over 465K elements: 0.30 ms)
    const T* src = a;
    R* dst = o;
    for (int64_t i = s; i < e; ++i) dst[i] = f(src[i]);
  });
}

using vmath::select;

/// numpy's maximum / minimum: NaN in either operand gives NaN; ties give the second operand.
template <typename T>
inline T np_max(T a, T b) {
  if constexpr (std::is_same_v<T, float>)
    return vmath::np_max(a, b);
  else
    return a > b ? a : b;
}
template <typename T>
inline T np_min(T a, T b) {
  if constexpr (std::is_same_v<T, float>)
    return vmath::np_min(a, b);
  else
    return a < b ? a : b;
}

/// Round half to even for floats (np.round / rint in the default rounding mode), written so the
/// compiler vectorizes it: adding and subtracting 2^23 rounds |x| < 2^23 in round-to-nearest-even;
/// larger values, inf and NaN are integral already (or NaN) and pass through.
inline float round_even(float x) {
  float ax = std::fabs(x);
  float r = (ax + 8388608.0f) - 8388608.0f;
  return select(ax < 8388608.0f, std::copysign(r, x), x);
}
inline float floor_f(float x) {
  float r = round_even(x);
  return select(r > x, r - 1.0f, r);
}
inline float ceil_f(float x) {
  float r = round_even(x);
  return select(r < x, r + 1.0f, r);
}

/// Wrapping |x| and x*x for integers (numpy: abs(INT32_MIN) == INT32_MIN, square wraps).
template <typename T>
inline T wrap_abs(T x) {
  using U = std::make_unsigned_t<T>;
  if constexpr (std::is_signed_v<T>)
    return x < 0 ? static_cast<T>(U(0) - static_cast<U>(x)) : x;
  else
    return x;
}
template <typename T>
inline T wrap_square(T x) {
  using U = std::make_unsigned_t<T>;
  if constexpr (sizeof(T) < sizeof(unsigned))
    return static_cast<T>(static_cast<unsigned>(x) * static_cast<unsigned>(x));
  else
    return static_cast<T>(static_cast<U>(x) * static_cast<U>(x));
}

/// numpy's float -> int32 conversion on x86 (cvttsd2si): truncation; NaN and values outside int32
/// give INT32_MIN.
inline int32_t np_to_int32(double d) {
  if (!(d > -2147483649.0 && d < 2147483648.0)) return std::numeric_limits<int32_t>::min();
  return static_cast<int32_t>(d);
}

// ---- the plain unary ops ------------------------------------------------------------------------

/// Unary ops: `f` on floats, `i` on integers when `kInt` (abs, exp2, sign, square).
struct Abs {
  static constexpr bool kInt = true;
  static float f(float x) { return std::fabs(x); }
  template <typename T>
  static T i(T x) {
    return wrap_abs(x);
  }
};
struct Sign {
  static constexpr bool kInt = true;
  // np.sign: NaN stays NaN, +-0 gives +0
  static float f(float x) { return select(x > 0, 1.0f, select(x < 0, -1.0f, select(x == 0, 0.0f, x))); }
  template <typename T>
  static T i(T x) {
    return static_cast<T>((x > 0) - (x < 0));
  }
};
struct Square {
  static constexpr bool kInt = true;
  static float f(float x) { return x * x; }
  template <typename T>
  static T i(T x) {
    return wrap_square(x);
  }
};
struct Exp2 {
  static constexpr bool kInt = true;
  static float f(float x) { return std::exp2(x); }
  // np.exp2 of an int32 is float64; coremltools stores it back in int32
  template <typename T>
  static T i(T x) {
    return static_cast<T>(np_to_int32(std::exp2(static_cast<double>(x))));
  }
};

#define MILKIT_FLOAT_UNARY(Name, expr)       \
  struct Name {                              \
    static constexpr bool kInt = false;      \
    static float f(float x) { return expr; } \
    template <typename T>                    \
    static T i(T x) {                        \
      return x;                              \
    }                                        \
  };
MILKIT_FLOAT_UNARY(Acos, std::acos(x))
MILKIT_FLOAT_UNARY(Asin, std::asin(x))
MILKIT_FLOAT_UNARY(Atan, std::atan(x))
MILKIT_FLOAT_UNARY(Atanh, std::atanh(x))
MILKIT_FLOAT_UNARY(Ceil, ceil_f(x))
MILKIT_FLOAT_UNARY(Cos, std::cos(x))
MILKIT_FLOAT_UNARY(Cosh, std::cosh(x))
MILKIT_FLOAT_UNARY(Erf, vmath::verf(x))
MILKIT_FLOAT_UNARY(Exp, vmath::vexp(x))
MILKIT_FLOAT_UNARY(Floor, floor_f(x))
MILKIT_FLOAT_UNARY(Round, round_even(x))
MILKIT_FLOAT_UNARY(Sin, std::sin(x))
MILKIT_FLOAT_UNARY(Sinh, std::sinh(x))
MILKIT_FLOAT_UNARY(Sqrt, std::sqrt(x))
MILKIT_FLOAT_UNARY(Tan, std::tan(x))
MILKIT_FLOAT_UNARY(Tanh, vmath::vtanh(x))
#undef MILKIT_FLOAT_UNARY

template <typename Op>
void unary_kernel(KernelCtx& k) {
  const Tensor& x = k.in("x");
  bool done = false;
  exec::dispatch_compute(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float>) {
      Tensor& out = k.alloc(0, x.shape());
      const float* a = x.data<float>();
      float* o = out.mutable_data<float>();
      parallel_for(x.numel(), kGrain, [&](int64_t s, int64_t e) {
        if constexpr (std::is_same_v<Op, Sqrt>)
          vmath::sqrt_array(a + s, o + s, e - s);
        else
          vmath::map(a + s, o + s, e - s, [](float v) { return Op::f(v); });
      });
      done = true;
    } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if constexpr (Op::kInt) {
        map_unary<T, T>(k, x, [](T v) { return Op::template i<T>(v); });
        done = true;
      }
    }
  });
  if (!done) k.fail("x has unsupported dtype " + std::string(dtype_name(x.dtype())));
}

// ---- ops with parameters ------------------------------------------------------------------------

/// inverse: 1 / (x + epsilon); log: log(x + epsilon); rsqrt: 1 / sqrt(x + epsilon).
enum class Eps { Inverse, Log, Rsqrt };

template <Eps op>
void epsilon_kernel(KernelCtx& k) {
  const Tensor& x = k.in("x");
  if (x.dtype() != DataType::Float32) k.fail("x has unsupported dtype " + std::string(dtype_name(x.dtype())));
  Tensor eps = k.has("epsilon") ? exec::broadcast_param(k, "epsilon", x, x.dtype()) : Tensor::scalar(DataType::Float32, 0.0);
  if constexpr (op == Eps::Rsqrt) {
    if (eps.numel() == 1) {
      // three vectorized passes over blocks that stay in L1: x + eps, sqrt, 1 / s
      float ev = eps.data<float>()[0];
      Tensor& out = k.alloc(0, x.shape());
      const float* a = x.data<float>();
      float* o = out.mutable_data<float>();
      parallel_for(x.numel(), kGrain, [&](int64_t s, int64_t e) {
        for (int64_t b = s; b < e; b += 2048) {
          int64_t m = std::min<int64_t>(2048, e - b);
          vmath::map(a + b, o + b, m, [ev](float v) { return v + ev; });
          vmath::sqrt_array(o + b, o + b, m);
          vmath::map(o + b, o + b, m, [](float v) { return 1.0f / v; });
        }
      });
      return;
    }
  }
  exec::map_params<float>(k, x, eps, Tensor(), [](float v, float e, float) {
    float s = v + e;
    if constexpr (op == Eps::Inverse)
      return 1.0f / s;
    else if constexpr (op == Eps::Log)
      return std::log(s);
    else
      return 1.0f / std::sqrt(s);
  }, kGrain);
}

/// clip: minimum(maximum(x, alpha), beta).
void clip_kernel(KernelCtx& k) {
  const Tensor& x = k.in("x");
  if (x.dtype() != DataType::Float32) k.fail("x has unsupported dtype " + std::string(dtype_name(x.dtype())));
  exec::map_params<float>(k, x, exec::broadcast_param(k, "alpha", x, x.dtype()),
                          exec::broadcast_param(k, "beta", x, x.dtype()),
                          [](float v, float a, float b) { return np_min(np_max(v, a), b); }, kGrain);
}

/// threshold: maximum(x, alpha).
void threshold_kernel(KernelCtx& k) {
  const Tensor& x = k.in("x");
  bool done = false;
  exec::dispatch_compute(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || (std::is_integral_v<T> && !std::is_same_v<T, bool>)) {
      exec::map_params<T>(k, x, exec::broadcast_param(k, "alpha", x, x.dtype()), Tensor(),
                          [](T v, T a, T) { return np_max(v, a); }, kGrain);
      done = true;
    }
  });
  if (!done) k.fail("x has unsupported dtype " + std::string(dtype_name(x.dtype())));
}

void logical_not_kernel(KernelCtx& k) {
  const Tensor& x = k.in("x");
  if (x.dtype() != DataType::Bool) k.fail("x must be bool, got " + std::string(dtype_name(x.dtype())));
  map_unary<uint8_t, uint8_t>(k, x, [](uint8_t v) { return static_cast<uint8_t>(v == 0); });
}

// ---- cast ---------------------------------------------------------------------------------------

/// Calls f(Tag<T>{}) for the dtypes cast accepts (bool, fp16, fp32, int8, uint8, int16, uint16,
/// int32); returns false for any other.
template <typename F>
bool dispatch_cast(DataType dt, F&& f) {
  switch (dt) {
    case DataType::Bool:
      f(exec::Tag<bool>{});
      return true;
    case DataType::Float16:
      f(exec::Tag<half>{});
      return true;
    case DataType::Float32:
      f(exec::Tag<float>{});
      return true;
    case DataType::Int8:
      f(exec::Tag<int8_t>{});
      return true;
    case DataType::UInt8:
      f(exec::Tag<uint8_t>{});
      return true;
    case DataType::Int16:
      f(exec::Tag<int16_t>{});
      return true;
    case DataType::UInt16:
      f(exec::Tag<uint16_t>{});
      return true;
    case DataType::Int32:
      f(exec::Tag<int32_t>{});
      return true;
    default:
      return false;
  }
}

/// One element of numpy's astype(D) on x86.
template <typename D, typename S>
inline D cast_elem(S s) {
  if constexpr (exec::is_floating_v<S> && std::is_integral_v<D> && !std::is_same_v<D, bool>) {
    // through int32, then wrapped to the narrower type (what numpy does on x86)
    return static_cast<D>(np_to_int32(static_cast<double>(static_cast<float>(s))));
  } else {
    return exec::convert<D>(s);
  }
}

void cast_kernel(KernelCtx& k) {
  const Tensor& x = k.in("x");
  DataType to = k.out_dtype(0);
  if (x.dtype() == to) {
    k.set(0, x);  // tensors are immutable: the input is the output
    return;
  }
  Tensor& out = k.alloc(0, x.shape());
  int64_t n = x.numel();
  if (x.dtype() == DataType::Float16 && to == DataType::Float32) {
    const uint16_t* a = x.data<uint16_t>();
    float* o = out.mutable_data<float>();
    parallel_for(n, kGrain,
                 [&](int64_t s, int64_t e) { halves_to_floats(a + s, o + s, static_cast<size_t>(e - s)); });
    return;
  }
  if (x.dtype() == DataType::Float32 && to == DataType::Float16) {
    const float* a = x.data<float>();
    uint16_t* o = out.mutable_data<uint16_t>();
    parallel_for(n, kGrain,
                 [&](int64_t s, int64_t e) { floats_to_halves(a + s, o + s, static_cast<size_t>(e - s)); });
    return;
  }
  bool to_ok = false;
  bool from_ok = dispatch_cast(x.dtype(), [&](auto stag) {
    using S = typename decltype(stag)::type;
    to_ok = dispatch_cast(to, [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      const S* a = x.data<S>();
      D* o = out.mutable_data<D>();
      parallel_for(n, kGrain, [&](int64_t s, int64_t e) {
        D* dst = o;  // in a local, as map_unary's (1-byte stores alias anything)
        if constexpr (std::is_same_v<S, bool>) {
          // bytes read as bytes: GCC does not vectorize loads of bool (0 or 1 either way)
          const uint8_t* src = reinterpret_cast<const uint8_t*>(a);
          for (int64_t i = s; i < e; ++i) dst[i] = cast_elem<D>(src[i] != 0);
        } else {
          const S* src = a;
          for (int64_t i = s; i < e; ++i) dst[i] = cast_elem<D>(src[i]);
        }
      });
    });
  });
  if (!from_ok || !to_ok)
    k.fail("cannot cast " + std::string(dtype_name(x.dtype())) + " to " + std::string(dtype_name(to)));
}

// ---- select -------------------------------------------------------------------------------------

/// select(cond, a, b): a where cond else b, numpy broadcasting of all three. Pure data movement:
/// elements are copied by their size, so every dtype (fp16 included) is exact.
template <typename T>
void select_loop(KernelCtx& k, const Tensor& c, const Tensor& a, const Tensor& b,
                 const std::vector<int64_t>& shape) {
  Tensor& out = k.alloc(0, shape);
  const uint8_t* cp = c.data<uint8_t>();
  const T* ap = a.data<T>();
  const T* bp = b.data<T>();
  T* o = out.mutable_data<T>();
  int64_t n = out.numel();
  if (c.numel() == n && a.numel() == n && b.numel() == n) {
    parallel_for(n, kGrain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) o[i] = cp[i] ? ap[i] : bp[i];
    });
    return;
  }
  BroadcastIndexer bi(shape, {c.shape(), a.shape(), b.shape()});
  parallel_for(n, kGrain, [&](int64_t s, int64_t e) {
    bi.run_rows(s, e,
                [&](int64_t i, int64_t cnt, int64_t ic, int64_t ia, int64_t ib, int64_t sc,
                    int64_t sa, int64_t sb) {
                  if (sc == 0) {  // one condition for the run (a mask per row): a copy or a fill
                    const T* src = cp[ic] ? ap + ia : bp + ib;
                    const int64_t ss = cp[ic] ? sa : sb;
                    if (ss == 1)
                      std::copy(src, src + cnt, o + i);
                    else
                      for (int64_t j = 0; j < cnt; ++j) o[i + j] = src[j * ss];
                    return;
                  }
                  for (int64_t j = 0; j < cnt; ++j)
                    o[i + j] = cp[ic + j * sc] ? ap[ia + j * sa] : bp[ib + j * sb];
                });
  });
}

void select_kernel(KernelCtx& k) {
  const Tensor& c = k.in("cond");
  const Tensor& a = k.in("a");
  const Tensor& b = k.in("b");
  if (c.dtype() != DataType::Bool) k.fail("cond must be bool, got " + std::string(dtype_name(c.dtype())));
  if (a.dtype() != b.dtype()) k.fail("a and b have different dtypes");
  if (a.dtype() != k.out_dtype(0)) k.fail("a's dtype differs from the output's");
  std::vector<int64_t> shape;
  try {
    shape = exec::broadcast_shape(c.shape(), exec::broadcast_shape(a.shape(), b.shape()));
  } catch (const ValueError& e) {
    k.fail(e.what());
  }
  switch (a.itemsize()) {
    case 1:
      select_loop<uint8_t>(k, c, a, b, shape);
      break;
    case 2:
      select_loop<uint16_t>(k, c, a, b, shape);
      break;
    case 4:
      select_loop<uint32_t>(k, c, a, b, shape);
      break;
    case 8:
      select_loop<uint64_t>(k, c, a, b, shape);
      break;
    default:
      k.fail("unsupported dtype " + std::string(dtype_name(a.dtype())));
  }
}

}  // namespace

void register_elementwise_unary_kernels(KernelRegistry& r) {
  r.add("abs", {unary_kernel<Abs>});
  r.add("acos", {unary_kernel<Acos>});
  r.add("asin", {unary_kernel<Asin>});
  r.add("atan", {unary_kernel<Atan>});
  r.add("atanh", {unary_kernel<Atanh>});
  r.add("ceil", {unary_kernel<Ceil>});
  r.add("cos", {unary_kernel<Cos>});
  r.add("cosh", {unary_kernel<Cosh>});
  r.add("erf", {unary_kernel<Erf>});
  r.add("exp", {unary_kernel<Exp>});
  r.add("exp2", {unary_kernel<Exp2>});
  r.add("floor", {unary_kernel<Floor>});
  r.add("round", {unary_kernel<Round>});
  r.add("sign", {unary_kernel<Sign>});
  r.add("sin", {unary_kernel<Sin>});
  r.add("sinh", {unary_kernel<Sinh>});
  r.add("sqrt", {unary_kernel<Sqrt>});
  r.add("square", {unary_kernel<Square>});
  r.add("tan", {unary_kernel<Tan>});
  r.add("tanh", {unary_kernel<Tanh>});
  r.add("inverse", {epsilon_kernel<Eps::Inverse>});
  r.add("log", {epsilon_kernel<Eps::Log>});
  r.add("rsqrt", {epsilon_kernel<Eps::Rsqrt>});
  r.add("clip", {clip_kernel});
  r.add("threshold", {threshold_kernel});
  r.add("logical_not", {logical_not_kernel, false});
  r.add("cast", {cast_kernel, false});
  r.add("select", {select_kernel, false});
}

}  // namespace milkit
