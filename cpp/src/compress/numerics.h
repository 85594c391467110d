// Internal: numpy's dtype arithmetic (fp16 rounds after every operation) for the compression
// numerics.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "milkit/types/datatype.h"

namespace milkit::compress::detail {

/// Rounds a float to the nearest fp16 value (ties to even), as a float: the significand is
/// rounded to 11 bits in place (a carry moves into the exponent), below 2^-14 to multiples of
/// 2^-24, from 65520 up to infinity.
inline float r16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint32_t mag = u & 0x7FFFFFFFu;
  if (mag >= 0x7F800000u) return x;  // inf, NaN
  if (mag < 0x38800000u) {           // below 2^-14: fp16 subnormals
    return std::nearbyint(x * 16777216.0f) * (1.0f / 16777216.0f);
  }
  uint32_t r = (mag + 0x0FFFu + ((mag >> 13) & 1u)) & ~0x1FFFu;
  if (r >= 0x47800000u) r = 0x7F800000u;  // 65520 and up round to infinity
  r |= u & 0x80000000u;
  float y;
  std::memcpy(&y, &r, 4);
  return y;
}

/// Rounds a double straight to the nearest fp16 value (ties to even; numpy's float64 -> float16
/// cast), as a double. No detour through float, whose double rounding could differ.
inline double d2h(double x) {
  if (std::isnan(x) || x == 0) return x;
  double a = std::fabs(x);
  if (a >= 65520.0) return std::copysign(INFINITY, x);
  int e = 0;
  std::frexp(a, &e);     // a = f * 2^e, f in [0.5, 1)
  int q = e - 11;        // quantum exponent of an 11-bit significand
  if (q < -24) q = -24;  // subnormal quantum
  double r = std::nearbyint(std::ldexp(a, -q));
  return std::copysign(std::ldexp(r, q), x);
}

/// Rounds a double to `dt`'s values the way numpy's astype does (Int32 truncates toward zero).
inline double cast_to(DataType dt, double x) {
  if (dt == DataType::Float16) return d2h(x);
  if (dt == DataType::Float32) return static_cast<float>(x);
  return std::trunc(x);
}

/// Rounds a float result of an fp16 / fp32 operation to the dtype (identity for fp32).
inline float fix(DataType dt, float x) { return dt == DataType::Float16 ? r16(x) : x; }

/// numpy's np.round: half to even.
inline double round_even(double x) { return std::nearbyint(x); }

}  // namespace milkit::compress::detail
