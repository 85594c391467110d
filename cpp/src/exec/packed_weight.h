// Weights kept compressed in a plan: the output of a chain of constexpr ops (and casts over
// them) read by a kernel that decompresses it range by range while packing its GEMM panels.
// Private to cpp/src/exec.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "milkit/exec/kernel.h"
#include "milkit/exec/tensor.h"
#include "milkit/ir/ir.h"

namespace milkit {

/// A packed weight [N, ...] seen as N rows of K = numel / N elements in a form the fused
/// matrix-vector kernels read directly (kernels/gemv.cpp), instead of decoding panels.
struct RowForm {
  /// The storage of the rows.
  enum class Kind {
    None,  ///< no direct form: decode()
    Half,  ///< fp16 elements, row-major
    Lut4,  ///< 4-bit indices (two per byte, low nibble first, rows byte-aligned) into fp32 tables
    Int8,  ///< 8-bit integers, one per byte, then scaled per block (quantized weights)
    Int4,  ///< 4-bit integers (two per byte, low nibble first, rows byte-aligned), then scaled
  };
  Kind kind = Kind::None;
  const uint16_t* half = nullptr;    ///< Half: the elements
  const uint8_t* nibbles = nullptr;  ///< Lut4: the indices of row 0 (row n at n * K / 2 bytes)
  const float* tables = nullptr;     ///< Lut4: the first table (16 entries are read)
  int64_t table_stride = 0;          ///< Lut4: floats from one table to the next
  int64_t rows_per_table = 0;        ///< Lut4: consecutive rows sharing one table
  const uint8_t* ints = nullptr;     ///< Int8 / Int4: the integers of row 0
  bool is_signed = false;            ///< Int8 / Int4: two's complement integers
  /// Int8 / Int4: w = round_out((round_diff(q - offset)) * scale), with scale and offset of block
  /// (n / rows_per_scale, k >> cols_shift), row-major with scale_stride per block row; without
  /// scales (a bare integer source) the integers themselves.
  const float* scales = nullptr;
  const float* offsets = nullptr;  ///< Int8 / Int4: already rounded to the scale's dtype, or null
  int64_t rows_per_scale = 1;      ///< Int8 / Int4: consecutive rows sharing a block of scales
  int cols_shift = 0;              ///< Int8 / Int4: log2 of the columns sharing a scale
  int64_t scale_stride = 0;        ///< Int8 / Int4: scales per block row
  bool round_diff = false;         ///< Int8 / Int4: q - offset rounded to fp16
  bool round_out = false;          ///< Int8 / Int4: the product rounded to fp16
};

/// A tensor held compressed (packed indices, quantized data, sparse masks and their small
/// tables). decode() gives any run of flat elements as fp32: the values the constexpr kernels
/// would have computed in the tensor's dtype, widened to fp32 (exactly what a plan made before
/// with the decompressed tensor and its fp32 copy). Immutable, so runs share it across threads.
class PackedWeight {
 public:
  /// A packed tensor of `dt` (the dtype of the op output it stands for) and `shape`.
  PackedWeight(DataType dt, std::vector<int64_t> shape);
  virtual ~PackedWeight();
  PackedWeight(const PackedWeight&) = delete;
  PackedWeight& operator=(const PackedWeight&) = delete;

  /// The dtype of the decompressed tensor.
  DataType dtype() const { return dtype_; }
  /// The shape of the decompressed tensor.
  const std::vector<int64_t>& shape() const { return shape_; }
  /// Number of elements.
  int64_t numel() const { return numel_; }
  /// Writes elements [first, first + n) (flat, row-major) to `out` as fp32.
  virtual void decode(int64_t first, int64_t n, float* out) const = 0;
  /// The rows in a form a fused kernel reads directly: the values decode() gives, exactly
  /// (Kind::None when there is none).
  virtual RowForm row_form() const { return {}; }
  /// Bytes the packed form holds (its own and borrowed weight bytes, tables, upstream stages).
  virtual size_t packed_bytes() const = 0;
  /// Bytes of the decompressed tensor in its dtype.
  size_t dense_bytes() const;
  /// The whole tensor decompressed, in `dt` (its own dtype or fp32).
  Tensor materialize(DataType dt) const;

 private:
  DataType dtype_;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
};

/// An input of a constexpr op as the packer sees it: a plan constant, or the packed output of an
/// earlier op of the chain; both empty when the input is absent.
struct PackedInput {
  const Tensor* tensor = nullptr;              ///< A plan constant (a weight, a folded table).
  std::shared_ptr<const PackedWeight> packed;  ///< An upstream packed stage.
  /// A sub-byte constant still packed (its Buffer::bit_source()); the caller makes the dense
  /// tensor only when the stage cannot read this form.
  std::shared_ptr<const Value> bits;
};

/// The packed form of output 0 of `op` (a constexpr op, or a float cast over a packed tensor),
/// or nullptr when this form is not supported (vector LUTs, integer outputs, inputs that do not
/// match: the caller then decompresses the op at plan time as before, raising its errors).
/// `input` gives each schema input by name.
std::shared_ptr<const PackedWeight> pack_op(
    const Operation& op, const std::function<PackedInput(std::string_view)>& input);

/// A kernel's weight input as a tensor: the input itself, or, when the plan keeps it packed, the
/// whole weight decompressed to fp32 into `keep` (for kernels or shapes without a panel path),
/// from the process's weight cache (weight_cache.h).
const Tensor& weight_tensor(const KernelCtx& k, std::string_view name, Tensor& keep);

/// A plain fp16 or fp32 tensor (a weight mapped from the weight file) as a packed weight read
/// in place: decode widens the range asked for. Nullptr for other dtypes.
std::shared_ptr<const PackedWeight> in_place_weight(const Tensor& t);

/// Whether pack_op handles ops of this type at all (the planner keeps such chains packed).
bool packable_op_type(const std::string& op_type);

}  // namespace milkit
