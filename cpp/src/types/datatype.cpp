#include "milkit/types/datatype.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "milkit/types/error.h"

namespace milkit {

std::string_view dtype_name(DataType t) {
  switch (t) {
    case DataType::Unused: return "unused";
    case DataType::Bool: return "bool";
    case DataType::String: return "string";
    case DataType::Float16: return "fp16";
    case DataType::Float32: return "fp32";
    case DataType::Float64: return "fp64";
    case DataType::BFloat16: return "bf16";
    case DataType::Int8: return "int8";
    case DataType::Int16: return "int16";
    case DataType::Int32: return "int32";
    case DataType::Int64: return "int64";
    case DataType::Int4: return "int4";
    case DataType::UInt8: return "uint8";
    case DataType::UInt16: return "uint16";
    case DataType::UInt32: return "uint32";
    case DataType::UInt64: return "uint64";
    case DataType::UInt4: return "uint4";
    case DataType::UInt2: return "uint2";
    case DataType::UInt1: return "uint1";
    case DataType::UInt6: return "uint6";
    case DataType::UInt3: return "uint3";
    case DataType::Float8E4M3FN: return "fp8e4m3fn";
    case DataType::Float8E5M2: return "fp8e5m2";
    case DataType::Complex64: return "complex64";
  }
  return "unknown";
}

std::optional<DataType> dtype_from_name(std::string_view name) {
  // the names casts use most, first
  if (name.size() == 4 && name[0] == 'f' && name[1] == 'p') {
    if (name == "fp16") return DataType::Float16;
    if (name == "fp32") return DataType::Float32;
  }
  if (name == "str") return DataType::String;
  if (name == "float") return DataType::Float32;
  if (name == "double") return DataType::Float64;
  if (name == "int") return DataType::Int32;
  if (name == "complex64") return DataType::Complex64;
  for (DataType t : kAllDataTypes)
    if (dtype_name(t) == name) return t;
  return std::nullopt;
}

bool is_valid_dtype_code(int code) {
  for (DataType t : kAllDataTypes)
    if (static_cast<int>(t) == code) return true;
  return false;
}

int dtype_bits(DataType t) {
  switch (t) {
    case DataType::Unused:
    case DataType::String: return 0;
    case DataType::UInt1: return 1;
    case DataType::UInt2: return 2;
    case DataType::UInt3: return 3;
    case DataType::Int4:
    case DataType::UInt4: return 4;
    case DataType::UInt6: return 6;
    case DataType::Bool:
    case DataType::Int8:
    case DataType::UInt8:
    case DataType::Float8E4M3FN:
    case DataType::Float8E5M2: return 8;
    case DataType::Float16:
    case DataType::BFloat16:
    case DataType::Int16:
    case DataType::UInt16: return 16;
    case DataType::Float32:
    case DataType::Int32:
    case DataType::UInt32: return 32;
    case DataType::Float64:
    case DataType::Int64:
    case DataType::UInt64:
    case DataType::Complex64: return 64;
  }
  return 0;
}

int dtype_storage_bytes(DataType t) {
  int b = dtype_bits(t);
  return b <= 8 ? 1 : b / 8;
}

bool is_float(DataType t) {
  switch (t) {
    case DataType::Float16:
    case DataType::Float32:
    case DataType::Float64:
    case DataType::BFloat16:
    case DataType::Float8E4M3FN:
    case DataType::Float8E5M2: return true;
    default: return false;
  }
}

bool is_complex(DataType t) { return t == DataType::Complex64; }

bool is_signed_int(DataType t) {
  switch (t) {
    case DataType::Int4:
    case DataType::Int8:
    case DataType::Int16:
    case DataType::Int32:
    case DataType::Int64: return true;
    default: return false;
  }
}

bool is_unsigned_int(DataType t) {
  switch (t) {
    case DataType::UInt1:
    case DataType::UInt2:
    case DataType::UInt3:
    case DataType::UInt4:
    case DataType::UInt6:
    case DataType::UInt8:
    case DataType::UInt16:
    case DataType::UInt32:
    case DataType::UInt64: return true;
    default: return false;
  }
}

bool is_int(DataType t) { return is_signed_int(t) || is_unsigned_int(t); }

bool is_sub_byte(DataType t) { return is_int(t) && dtype_bits(t) < 8; }

int64_t int_min(DataType t) {
  if (is_unsigned_int(t) || t == DataType::Bool) return 0;
  int b = dtype_bits(t);
  if (b >= 64) return std::numeric_limits<int64_t>::min();
  return -(int64_t{1} << (b - 1));
}

int64_t int_max(DataType t) {
  if (t == DataType::Bool) return 1;
  int b = dtype_bits(t);
  if (is_unsigned_int(t)) return b >= 63 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << b) - 1;
  if (b >= 64) return std::numeric_limits<int64_t>::max();
  return (int64_t{1} << (b - 1)) - 1;
}

namespace {
// Rank of a type in numpy's promotion lattice, by category.
int float_rank(DataType t) {
  switch (t) {
    case DataType::Float8E4M3FN:
    case DataType::Float8E5M2: return 0;
    case DataType::Float16:
    case DataType::BFloat16: return 1;
    case DataType::Float32: return 2;
    default: return 3;
  }
}
DataType signed_of_bits(int bits) {
  if (bits <= 8) return DataType::Int8;
  if (bits <= 16) return DataType::Int16;
  if (bits <= 32) return DataType::Int32;
  return DataType::Int64;
}
DataType unsigned_of_bits(int bits) {
  if (bits <= 8) return DataType::UInt8;
  if (bits <= 16) return DataType::UInt16;
  if (bits <= 32) return DataType::UInt32;
  return DataType::UInt64;
}
}  // namespace

DataType promote_dtypes(DataType a, DataType b) {
  if (a == b) return a;
  if (a == DataType::String || b == DataType::String || is_complex(a) || is_complex(b))
    throw TypeError("cannot promote " + std::string(dtype_name(a)) + " with " +
                    std::string(dtype_name(b)));
  if (a == DataType::Bool) return b;
  if (b == DataType::Bool) return a;
  bool fa = is_float(a), fb = is_float(b);
  if (fa && fb) {
    if (float_rank(a) == float_rank(b)) return DataType::Float32;  // fp16 with bf16
    return float_rank(a) > float_rank(b) ? a : b;
  }
  if (fa) return a;
  if (fb) return b;
  // both integers (sub-byte types promote like their byte containers)
  int ba = std::max(8, dtype_bits(a)), bb = std::max(8, dtype_bits(b));
  bool sa = is_signed_int(a), sb = is_signed_int(b);
  if (sa == sb) return sa ? signed_of_bits(std::max(ba, bb)) : unsigned_of_bits(std::max(ba, bb));
  int sbits = sa ? ba : bb, ubits = sa ? bb : ba;
  if (sbits > ubits) return signed_of_bits(sbits);
  if (ubits >= 64) return DataType::Float64;  // numpy: int64 with uint64 -> float64
  return signed_of_bits(ubits * 2);
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mant = x & 0x7fffffu;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff);
  if (exp == 0xff) {  // inf / nan (payload kept like numpy; never turned into inf)
    if (!mant) return static_cast<uint16_t>(sign | 0x7c00u);
    uint32_t h = sign | 0x7c00u | (mant >> 13);
    if ((h & 0x3ffu) == 0) ++h;
    return static_cast<uint16_t>(h);
  }
  int32_t e = exp - 127 + 15;
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);  // underflow -> 0
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into exp: fine
  return static_cast<uint16_t>(sign | half);
}

float half_to_float(uint16_t h) {
  uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      mant &= 0x3ffu;
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // nan
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

float bf16_to_float(uint16_t h) {
  uint32_t x = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

#if defined(__x86_64__)
namespace {
__attribute__((target("avx,f16c"))) void f2h_f16c(const float* in, uint16_t* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = float_to_half(in[i]);
}
__attribute__((target("avx,f16c"))) void h2f_f16c(const uint16_t* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  for (; i < n; ++i) out[i] = half_to_float(in[i]);
}
}  // namespace
#endif

bool cpu_has_f16c() {
#if defined(__x86_64__)
  // F16C from CPUID leaf 1 (ECX bit 29): clang before 18 has no "f16c" for __builtin_cpu_supports.
  // "avx" also checks that the OS saves the YMM registers.
  static const bool yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
  }();
  return yes;
#else
  return false;
#endif
}

void floats_to_halves(const float* in, uint16_t* out, size_t n) {
#if defined(__x86_64__)
  if (cpu_has_f16c()) {
    // F16C turns NaNs into quiet NaNs keeping the payload's top bits; numpy does the same
    f2h_f16c(in, out, n);
    return;
  }
#endif
  for (size_t i = 0; i < n; ++i) out[i] = float_to_half(in[i]);
}

#if defined(__x86_64__)
namespace {
// fp16's value of each float, in registers: the instructions of floats_to_halves and
// halves_to_floats, so the same bits; a tail in a masked (AVX-512) or zero-padded vector
__attribute__((target("avx,f16c,avx512f"))) void round_half_avx512(float* p, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(
        p + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(p + i), _MM_FROUND_TO_NEAREST_INT)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, p + i);
    _mm512_mask_storeu_ps(p + i, m, _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)));
  }
}
__attribute__((target("avx,f16c"))) void round_half_f16c(float* p, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(
        p + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(p + i), _MM_FROUND_TO_NEAREST_INT)));
  if (i < n) {
    alignas(32) float t[8] = {};
    std::copy(p + i, p + n, t);
    _mm256_store_ps(t,
                    _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_load_ps(t), _MM_FROUND_TO_NEAREST_INT)));
    std::copy(t, t + (n - i), p + i);
  }
}
}  // namespace
#endif

void round_to_half(float* p, int64_t n) {
#if defined(__x86_64__)
  static const int path = [] {
    if (!cpu_has_f16c()) return 0;
    const char* e = std::getenv("MILKIT_NO_AVX512");
    const bool no512 = e && std::strcmp(e, "1") == 0;
    return __builtin_cpu_supports("avx512f") && !no512 ? 2 : 1;
  }();
  if (path == 2) return round_half_avx512(p, n);
  if (path == 1) return round_half_f16c(p, n);
#endif
  uint16_t h[256];
  for (int64_t i = 0; i < n; i += 256) {
    const size_t m = static_cast<size_t>(std::min<int64_t>(256, n - i));
    floats_to_halves(p + i, h, m);
    halves_to_floats(h, p + i, m);
  }
}

void halves_to_floats(const uint16_t* in, float* out, size_t n) {
#if defined(__x86_64__)
  if (cpu_has_f16c()) {
    h2f_f16c(in, out, n);
    return;
  }
#endif
  for (size_t i = 0; i < n; ++i) out[i] = half_to_float(in[i]);
}

}  // namespace milkit
