// fp32 math for the elementwise kernels, written so that a loop over it vectorizes: inline, no
// calls, no branches. Plain `c ? a : b` on floats is not enough for GCC (it threads constant
// paths through the rest of the computation and then gives up on "control flow in loop"), so
// choices go through `select`, a bit mask. Accuracy: a few ulp (see each function).
// `map` runs such a loop with AVX2 + FMA when the CPU has them (the build targets plain x86-64).
// Private to cpp/src/exec/kernels.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define MILKIT_VMATH_AVX2 1
#endif

namespace milkit::vmath {

// ---- loops --------------------------------------------------------------------------------------

/// L floats and L int32s as GCC vector extensions (member typedefs: GCC drops vector_size from a
/// dependent local typedef). The kernels' one definition of their vector types.
template <int L>
struct Lanes {
  typedef float f __attribute__((vector_size(4 * L)));
  typedef int32_t i __attribute__((vector_size(4 * L)));
};

/// v = `*p` in every lane, by one broadcast load. GCC 12 compiles `V{} + x` to a scalar add of 0
/// (-0 + 0 is +0) and a register broadcast, two more operations per element, which bounded the
/// narrow GEMM kernels (8 rows x 8 columns took 0.92 ms over k = 4608 and 64 row blocks instead of
/// 0.62), and builds `x - V{}` from sixteen masked broadcasts; so for 256- and 512-bit vectors it
/// gets AVX's vbroadcastss (only in code that runs where AVX does). Clang folds `x - V{}` into the
/// FMA's broadcast operand.
template <typename V>
inline __attribute__((always_inline)) void splat(V& v, const float* p) {
#if !defined(__clang__) && (defined(__x86_64__) || defined(__i386__))
  if constexpr (sizeof(V) == 64) {
    __asm__("vbroadcastss %1, %g0" : "=v"(v) : "m"(*p));
    return;
  } else if constexpr (sizeof(V) == 32) {
    __asm__("vbroadcastss %1, %t0" : "=v"(v) : "m"(*p));
    return;
  }
#endif
  v = *p - V{};  // x - 0 is x (-0 included): Clang folds it into the FMA's broadcast operand
}

namespace detail {

template <typename V, int... J>
__attribute__((always_inline)) inline void even_lanes(const V& a, const V& b, V& out,
                                                      std::integer_sequence<int, J...>) {
  out = __builtin_shufflevector(a, b, (2 * J)...);
}

template <typename V, int... J>
__attribute__((always_inline)) inline void odd_lanes(const V& a, const V& b, V& out,
                                                     std::integer_sequence<int, J...>) {
  out = __builtin_shufflevector(a, b, (2 * J + 1)...);
}
}  // namespace detail

/// out = src[0], src[2], ..., src[2 L - 2] for a GCC vector type V of L floats (two loads and a
/// shuffle: GCC's __builtin_shuffle, clang's __builtin_shufflevector): the columns of a stride-2
/// window. References, not values: a vector passed by value changes the ABI by target.
template <int L, typename V>
__attribute__((always_inline)) inline void load_even_lanes(const float* src, V& out) {
  V a, b;
  std::memcpy(&a, src, sizeof a);
  std::memcpy(&b, src + L, sizeof b);
#if defined(__clang__)
  detail::even_lanes(a, b, out, std::make_integer_sequence<int, L>{});
#else
  typename Lanes<L>::i even;
  for (int j = 0; j < L; ++j) even[j] = 2 * j;
  out = __builtin_shuffle(a, b, even);
#endif
}

/// The even lanes of the 2L floats at `src` into `even` and the odd ones into `odd` (two loads,
/// two permutes: a row split into its two stride-2 phases in one pass).
template <int L, typename V>
__attribute__((always_inline)) inline void load_even_odd_lanes(const float* src, V& even, V& odd) {
  V a, b;
  std::memcpy(&a, src, sizeof a);
  std::memcpy(&b, src + L, sizeof b);
#if defined(__clang__)
  detail::even_lanes(a, b, even, std::make_integer_sequence<int, L>{});
  detail::odd_lanes(a, b, odd, std::make_integer_sequence<int, L>{});
#else
  typename Lanes<L>::i ev, od;
  for (int j = 0; j < L; ++j) {
    ev[j] = 2 * j;
    od[j] = 2 * j + 1;
  }
  even = __builtin_shuffle(a, b, ev);
  odd = __builtin_shuffle(a, b, od);
#endif
}

/// Whether the CPU has AVX2 and FMA.
inline bool cpu_avx2_fma() {
#ifdef MILKIT_VMATH_AVX2
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
#else
  return false;
#endif
}

/// Whether the CPU has AVX-512F and AVX-512VL besides AVX2 and FMA; MILKIT_NO_AVX512=1 says no
/// (the AVX2 kernels then run, e.g. to test them on a machine that has both).
inline bool cpu_avx512() {
#ifdef MILKIT_VMATH_AVX2
  static const bool yes =
      cpu_avx2_fma() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      !(std::getenv("MILKIT_NO_AVX512") && std::strcmp(std::getenv("MILKIT_NO_AVX512"), "1") == 0);
  return yes;
#else
  return false;
#endif
}

namespace detail {
template <typename F>
void map_base(const float* a, float* o, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
}
template <typename F>
void map2_base(const float* a, const float* b, float* o, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
}
#ifdef MILKIT_VMATH_AVX2
template <typename F>
__attribute__((target("avx2,fma"))) void map_avx2(const float* a, float* o, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
}
template <typename F>
__attribute__((target("avx2,fma"))) void map2_avx2(const float* a, const float* b, float* o, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
}
// 16 lanes: the same operations as 8 (FMA in both), so the same bits; on Zen 4 the long
// polynomial chains of exp / erf run 1.3x faster (gelu 0.99 against 1.28 ns per element)
template <typename F>
__attribute__((target("avx2,fma,avx512f,avx512vl"))) void map_avx512(const float* a, float* o,
                                                                     int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
}
template <typename F>
__attribute__((target("avx2,fma,avx512f,avx512vl"))) void map2_avx512(const float* a,
                                                                      const float* b, float* o,
                                                                      int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
}
#endif
}  // namespace detail

/// o[i] = f(a[i]) for i in [0, n) (o == a allowed): 16 lanes with FMA on CPUs with AVX-512, 8
/// with AVX2, else 4.
/// `f` must be a lambda, so that it inlines into the loop.
template <typename F>
inline void map(const float* a, float* o, int64_t n, F f) {
#ifdef MILKIT_VMATH_AVX2
  if (cpu_avx512()) {
    detail::map_avx512(a, o, n, f);
    return;
  }
  if (cpu_avx2_fma()) {
    detail::map_avx2(a, o, n, f);
    return;
  }
#endif
  detail::map_base(a, o, n, f);
}

/// o[i] = f(a[i], b[i]) for i in [0, n) (o may be a or b), like `map`.
template <typename F>
inline void map2(const float* a, const float* b, float* o, int64_t n, F f) {
#ifdef MILKIT_VMATH_AVX2
  if (cpu_avx512()) {
    detail::map2_avx512(a, b, o, n, f);
    return;
  }
  if (cpu_avx2_fma()) {
    detail::map2_avx2(a, b, o, n, f);
    return;
  }
#endif
  detail::map2_base(a, b, o, n, f);
}

#ifdef MILKIT_VMATH_AVX2
namespace detail {
__attribute__((target("avx2"))) inline void sqrt_avx2(const float* a, float* o, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, _mm256_sqrt_ps(_mm256_loadu_ps(a + i)));
  for (; i < n; ++i) o[i] = _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(a[i])));
}
}  // namespace detail
#endif

/// o[i] = sqrt(a[i]) (IEEE, correctly rounded; o == a allowed). std::sqrt does not vectorize
/// without -fno-math-errno, and calls libm for every NaN result (negative input).
inline void sqrt_array(const float* a, float* o, int64_t n) {
#ifdef MILKIT_VMATH_AVX2
  if (cpu_avx2_fma()) {
    detail::sqrt_avx2(a, o, n);
    return;
  }
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(o + i, _mm_sqrt_ps(_mm_loadu_ps(a + i)));
  for (; i < n; ++i) o[i] = _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(a[i])));
#else
  for (int64_t i = 0; i < n; ++i) o[i] = std::sqrt(a[i]);
#endif
}

// ---- functions ----------------------------------------------------------------------------------

inline float bits_float(int32_t i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
inline int32_t float_bits(float f) {
  int32_t i;
  std::memcpy(&i, &f, 4);
  return i;
}

/// c ? a : b, as a bit mask (vectorizes where the ternary does not).
inline float select(bool c, float a, float b) {
  int32_t m = -static_cast<int32_t>(c);
  return bits_float((float_bits(a) & m) | (float_bits(b) & ~m));
}

/// numpy's maximum / minimum: NaN in either operand gives NaN; ties give b.
inline float np_max(float a, float b) { return select(a > b || a != a, a, b); }
inline float np_min(float a, float b) { return select(a < b || a != a, a, b); }

/// 2^e for an integer e in [-126, 127].
inline float pow2i(int32_t e) {
  return bits_float(static_cast<int32_t>(static_cast<uint32_t>(e + 127) << 23));
}

namespace detail {

/// The range reduction vexp and vexp_for_sum share, for xc already held in range: t, whose low
/// mantissa bits hold n = round(xc / ln 2) (adding and subtracting 1.5 * 2^23 rounds to an
/// integer), and the returned r = xc - n ln 2 (ln 2 = hi + lo with hi exact in 15 bits, so n * hi
/// and xc - n * hi are exact).
inline float exp_reduce(float xc, float& t) {
  t = xc * 1.44269504088896341f + 12582912.0f;
  float n = t - 12582912.0f;
  float r = xc - n * 0.693145751953125f;
  return r - n * 1.42860682030941723212e-6f;
}

/// S times e^r's Taylor polynomial of degree 7 (truncation < 6e-9 relative for |r| <~ ln(2) / 2),
/// S a power of two: every coefficient, so every partial sum, is exactly S times S = 1's.
template <int S>
inline float exp_poly(float r) {
  constexpr float s = S;
  float p = s / 5040.0f;
  p = p * r + s / 720.0f;
  p = p * r + s / 120.0f;
  p = p * r + s / 24.0f;
  p = p * r + s / 6.0f;
  p = p * r + s * 0.5f;
  p = p * r + s;
  p = p * r + s;
  return p;
}

}  // namespace detail

/// exp(x + lo) for a small correction lo (|lo| << 1; 0 for plain exp), ~1 ulp:
/// exp = 2^n e^r with n = round(x / ln 2), r = x - n ln 2 + lo (|r| <~ ln(2) / 2), e^r by its
/// Taylor polynomial of degree 7. 2^n is applied as two factors, so results that underflow to
/// subnormals / 0 or overflow to inf come out right. NaN gives NaN.
inline float vexp(float x, float lo = 0.0f) {
  float xc = select(x < -104.0f, -104.0f, x);  // exp(-104) rounds to 0, exp(89) to inf
  xc = select(xc > 89.0f, 89.0f, xc);
  float t;
  float p = detail::exp_poly<1>(detail::exp_reduce(xc, t) + lo);
  // (NaN lands here with a garbage n; p is NaN then, and so the product)
  int32_t ni = float_bits(t) - 0x4B400000;
  int32_t n1 = ni >> 1;
  return p * pow2i(n1) * pow2i(ni - n1);
}

/// vexp(x) where only 1 + exp(x) is wanted (sigmoid, silu, gelu's sigmoid forms), in fewer
/// operations: the same bits as vexp(x) down to exp(x) = 2^-125 (below, where 1 + exp(x) rounds to
/// 1 all the same, the argument is held at -86.5). With n >= -125, 2^n is one factor (2^(n - 1)
/// against the polynomial times 2), and no correction term is added. All 2^32 inputs of sigmoid
/// and silu give vexp's bits (checked when written); silu over 2048 values on Zen 4: 0.316 ns
/// each against 0.364.
inline float vexp_for_sum(float x) {
  float xc = select(x < -86.5f, -86.5f, x);
  xc = select(xc > 89.0f, 89.0f, xc);
  float t;
  float p = detail::exp_poly<2>(detail::exp_reduce(xc, t));
  // t's low bits hold n; (n - 1 + 127) << 23 is 2^(n - 1), n - 1 in [-126, 127]
  int32_t e = float_bits(t) - (0x4B400000 + 1 - 127);
  return p * bits_float(static_cast<int32_t>(static_cast<uint32_t>(e) << 23));
}

/// exp(x) - 1 without cancellation near 0 (~2 ulp): the Taylor polynomial of degree 11 for
/// |x| < ln 2 (truncation < 4e-11 relative), exp(x) - 1 elsewhere.
inline float vexpm1(float x) {
  float p = 1.0f / 39916800.0f;
  p = p * x + 1.0f / 3628800.0f;
  p = p * x + 1.0f / 362880.0f;
  p = p * x + 1.0f / 40320.0f;
  p = p * x + 1.0f / 5040.0f;
  p = p * x + 1.0f / 720.0f;
  p = p * x + 1.0f / 120.0f;
  p = p * x + 1.0f / 24.0f;
  p = p * x + 1.0f / 6.0f;
  p = p * x + 0.5f;
  p = p * x + 1.0f;
  p = p * x;
  return select(std::fabs(x) < 0.69314718f, p, vexp(x) - 1.0f);
}

/// tanh(x) = -expm1(-2|x|) / (2 + expm1(-2|x|)) with x's sign (~3 ulp).
inline float vtanh(float x) {
  float em = vexpm1(-2.0f * std::fabs(x));
  return std::copysign(-em / (2.0f + em), x);
}

/// 1 / (1 + exp(-x)).
inline float vsigmoid(float x) { return 1.0f / (1.0f + vexp_for_sum(-x)); }

/// relu, as the relu kernel (and a conv with a fused relu) computes it.
inline float vrelu(float x) { return np_max(x, 0.0f); }
/// relu6, as the relu6 kernel (and a conv with a fused relu6) computes it.
inline float vrelu6(float x) { return np_min(np_max(x, 0.0f), 6.0f); }
/// silu, as the silu kernel (and a conv with a fused silu) computes it.
inline float vsilu(float x) { return x / (1.0f + vexp_for_sum(-x)); }
/// sigmoid_hard min(max(alpha x + beta, 0), 1), as its kernel (and a fused chain) computes it.
inline float vhard_sigmoid(float x, float alpha, float beta) {
  return np_min(np_max(alpha * x + beta, 0.0f), 1.0f);
}

/// log1p(y) for y in [0, 1] (~2 ulp): log(u) of u = 1 + y, corrected by (y - (u - 1)) / u for the
/// rounding of u; log(u) = e ln 2 + 2 atanh(s), u = m 2^e with m in [sqrt(1/2), sqrt(2)),
/// s = (m - 1) / (m + 1), |s| < 0.172, atanh by its series up to s^9.
inline float vlog1p_unit(float y) {
  float u = 1.0f + y;
  float c = (y - (u - 1.0f)) / u;
  bool big = u > 1.41421356f;
  float m = select(big, u * 0.5f, u);
  float s = (m - 1.0f) / (m + 1.0f);
  float s2 = s * s;
  float p = 1.0f / 9.0f;
  p = p * s2 + 1.0f / 7.0f;
  p = p * s2 + 1.0f / 5.0f;
  p = p * s2 + 1.0f / 3.0f;
  p = p * s2 + 1.0f;
  return select(big, 0.693147180559945f, 0.0f) + 2.0f * s * p + c;
}

/// log(1 + exp(x)) without overflow: log1p(exp(-|x|)) + max(x, 0).
inline float vsoftplus(float x) { return vlog1p_unit(vexp(-std::fabs(x))) + np_max(x, 0.0f); }

/// erf(z) for |z| < 1: z times the Taylor polynomial of erf(z) / z in z^2, up to z^20
/// (truncation < 1.3e-9 relative).
inline float erf_small(float z) {
  float z2 = z * z;
  // 2 / sqrt(pi) * (-1)^n / (n! (2n + 1)), n = 10 .. 0
  float p = 1.4807192805221803e-08f;
  p = p * z2 - 1.6365844146548625e-07f;
  p = p * z2 + 1.6462114444948384e-06f;
  p = p * z2 - 1.4925650248187594e-05f;
  p = p * z2 + 0.00012055332626914605f;
  p = p * z2 - 0.0008548327023163438f;
  p = p * z2 + 0.005223977845162153f;
  p = p * z2 - 0.02686617150902748f;
  p = p * z2 + 0.11283791810274124f;
  p = p * z2 - 0.37612637877464294f;
  p = p * z2 + 1.128379225730896f;
  return z * p;
}

/// erfc(z) e^(z^2) for z >= 1/2: a polynomial in t = 1 / (1 + z / 2), least-squares fitted to
/// it on [1/2, 10.5] (relative error 3e-8 with fp32 coefficients). Beyond 10.5, erfc(z)
/// underflows in fp32.
inline float erfcx_large(float z) {
  float t = 1.0f / (1.0f + 0.5f * z);
  float p = -0.07602596282958984f;
  p = p * t + 0.35788294672966003f;
  p = p * t - 0.622778058052063f;
  p = p * t + 0.41828033328056335f;
  p = p * t - 0.11560490727424622f;
  p = p * t + 0.23846487700939178f;
  p = p * t + 0.23402541875839233f;
  p = p * t + 0.28377214074134827f;
  p = p * t + 0.28196847438812256f;
  p = p * t + 4.157667717663571e-06f;
  return p;
}

/// exp(-v * v * k) for k = 1 or 1/2 with v * v computed exactly: v = vh + vl with vh holding 12
/// bits, so vh^2 is exact and v^2 = vh^2 + vl (v + vh) (the fp32 rounding of v^2 alone would
/// cost 2 v^2 ulp far in the tail).
inline float exp_neg_square(float v, float k) {
  float vh = bits_float(float_bits(v) & static_cast<int32_t>(0xFFFFF000u));
  float vl = v - vh;
  return vexp(-(vh * vh) * k, -(vl * (v + vh)) * k);
}

/// erf(z) (~3 ulp): the series below 1/2, 1 - erfc above.
inline float verf(float z) {
  float a = std::fabs(z);
  float ac = select(a > 16.0f, 16.0f, a);  // erfc(16) is 0 in fp32; keeps inf out of the exponent
  float big = 1.0f - exp_neg_square(ac, 1.0f) * erfcx_large(ac);
  return select(a < 0.5f, erf_small(z), std::copysign(big, z));
}

/// The standard normal CDF Phi(x) = (1 + erf(x / sqrt 2)) / 2, accurate relative to its value
/// for negative x too: Phi(-|x|) = erfc(|x| / sqrt 2) / 2 with the exponent x^2 / 2 computed from
/// x exactly.
inline float vnormal_cdf(float x) {
  float ax = std::fabs(x);
  ax = select(ax > 32.0f, 32.0f, ax);  // Phi(-32) is 0 in fp32; keeps inf out of the exponent
  float z = ax * 0.70710678118654752f;
  float tail = 0.5f * exp_neg_square(ax, 0.5f) * erfcx_large(z);  // Phi(-|x|)
  float mid = 0.5f + 0.5f * erf_small(x * 0.70710678118654752f);
  return select(z < 0.5f, mid, select(x < 0, tail, 1.0f - tail));
}

}  // namespace milkit::vmath
