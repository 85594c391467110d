// milkit/types/datatype.h - MIL element data types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace milkit {

/// A MIL element type. The numeric values are MIL.proto's DataType codes.
enum class DataType : uint8_t {
  Unused = 0,
  Bool = 1,
  String = 2,
  Float16 = 10,
  Float32 = 11,
  Float64 = 12,
  BFloat16 = 13,
  Int8 = 21,
  Int16 = 22,
  Int32 = 23,
  Int64 = 24,
  Int4 = 25,
  UInt8 = 31,
  UInt16 = 32,
  UInt32 = 33,
  UInt64 = 34,
  UInt4 = 35,
  UInt2 = 36,
  UInt1 = 37,
  UInt6 = 38,
  UInt3 = 39,
  Float8E4M3FN = 40,
  Float8E5M2 = 41,
  /// milkit-internal, not a MIL.proto code: complex dialect ops only (coremltools' complex64). It
  /// is never serialized; common::lower_complex_dialect_ops replaces it by fp32 real and imaginary
  /// parts.
  Complex64 = 63,
};

/// Every valid (non-Unused) MIL.proto data type, in proto-code order (Complex64 is not one).
inline constexpr DataType kAllDataTypes[] = {
    DataType::Bool,     DataType::String,       DataType::Float16,    DataType::Float32,
    DataType::Float64,  DataType::BFloat16,     DataType::Int8,       DataType::Int16,
    DataType::Int32,    DataType::Int64,        DataType::Int4,       DataType::UInt8,
    DataType::UInt16,   DataType::UInt32,       DataType::UInt64,     DataType::UInt4,
    DataType::UInt2,    DataType::UInt1,        DataType::UInt6,      DataType::UInt3,
    DataType::Float8E4M3FN, DataType::Float8E5M2};

/// coremltools' short name of a data type ("fp32", "int32", "bool", "string", "uint4", ...).
std::string_view dtype_name(DataType t);
/// Parses a short name (also accepts "fp8e4m3fn", "fp8e5m2", "bf16", "str"); nullopt if unknown.
std::optional<DataType> dtype_from_name(std::string_view name);
/// Whether `code` is a valid MIL.proto DataType code.
bool is_valid_dtype_code(int code);

/// Bits per element (1 for bool as stored in MIL, 0 for string).
int dtype_bits(DataType t);
/// Bytes per element in milkit's unpacked in-memory layout (sub-byte types take one byte).
int dtype_storage_bytes(DataType t);
/// Floating-point types: fp16, fp32, fp64, bf16, fp8.
bool is_float(DataType t);
/// complex64 (the complex dialect's type).
bool is_complex(DataType t);
/// Integer types, signed or unsigned, including sub-byte ones (not bool).
bool is_int(DataType t);
/// Signed integer types (int4..int64).
bool is_signed_int(DataType t);
/// Unsigned integer types (uint1..uint64).
bool is_unsigned_int(DataType t);
/// Sub-byte types: int4, uint1, uint2, uint3, uint4, uint6.
bool is_sub_byte(DataType t);
/// Smallest and largest value of an integer type.
int64_t int_min(DataType t);
/// Largest value of an integer type (uint64 saturates to INT64_MAX).
int64_t int_max(DataType t);

/// coremltools' promotion rule: numpy's promote_types, except a float with a signed or
/// unsigned int always gives the float. Throws milkit::TypeError for incompatible types.
DataType promote_dtypes(DataType a, DataType b);

/// IEEE half <-> float conversions (round to nearest even).
uint16_t float_to_half(float f);
/// Half to float.
float half_to_float(uint16_t h);
/// bfloat16 <-> float (round to nearest even).
uint16_t float_to_bf16(float f);
/// bfloat16 to float.
float bf16_to_float(uint16_t h);
/// Converts n floats to IEEE halves (round to nearest even; uses F16C when the CPU has it).
void floats_to_halves(const float* in, uint16_t* out, size_t n);
/// Converts n IEEE halves to floats (uses F16C when the CPU has it).
void halves_to_floats(const uint16_t* in, float* out, size_t n);
/// Whether the CPU converts between fp16 and fp32 in hardware (x86 F16C, with AVX enabled by
/// the OS); kernels with their own F16C loops check it once.
bool cpu_has_f16c();
/// Rounds n floats to the nearest fp16 values in place (round to nearest even).
void round_to_half(float* p, int64_t n);

}  // namespace milkit
