// milkit/ir/value.h - compile-time values (const tensors) over shared, immutable buffers.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "milkit/symbolic/expr.h"
#include "milkit/types/datatype.h"

namespace milkit {

/// Immutable bytes shared by values: owned, or borrowed from a foreign owner (a numpy array, a
/// memory-mapped file) that is kept alive as long as the buffer.
class Buffer {
 public:
  /// Takes ownership of `bytes`.
  static std::shared_ptr<const Buffer> take(std::vector<uint8_t>&& bytes);
  /// Copies `size` bytes.
  static std::shared_ptr<const Buffer> copy(const void* data, size_t size);
  /// Wraps foreign memory without copying; `owner` keeps it alive.
  static std::shared_ptr<const Buffer> borrow(const void* data, size_t size,
                                              std::shared_ptr<const void> owner);
  /// Converts `n` elements starting at element index `first`: `in` holds them in the source's
  /// element size, `out` receives them in the lazy buffer's.
  using ElementMap = std::function<void(size_t first, size_t n, const uint8_t* in, uint8_t* out)>;
  /// A buffer computed from `src` element by element, on demand: element i (of `out_elem`
  /// bytes) is `map` of source element i (of `in_elem` bytes). read() streams the conversion in
  /// small chunks (reading `src` the same way, so lazy buffers compose: the weight writer never
  /// holds a whole converted weight); data() converts everything once and keeps it.
  static std::shared_ptr<const Buffer> lazy_map(std::shared_ptr<const Buffer> src, size_t in_elem,
                                                size_t out_elem, ElementMap map);
  /// fp32 elements of `src` seen as fp16, converted on demand (a lazy_map). This is what keeps
  /// fp16 weights from being held twice in memory during convert.
  static std::shared_ptr<const Buffer> lazy_fp32_to_fp16(std::shared_ptr<const Buffer> src);
  /// `n` sub-byte elements of `bits` bits (1..8) held packed in `packed` (LSB first, as Core ML
  /// stores them), seen one byte per element (sign-extended when `is_signed`), unpacked on
  /// demand: read() unpacks the requested run only, data() unpacks everything once. `packed`
  /// must hold at least ceil(n * bits / 8) bytes. Keeps large palettized and 4-bit weights
  /// packed in memory (or in their file mapping) until someone asks for the unpacked bytes.
  static std::shared_ptr<const Buffer> packed_bits(std::shared_ptr<const Buffer> packed, int bits,
                                                   bool is_signed, size_t n);
  /// `bytes` as a buffer; when they are many (MILKIT_SPILL_MB, default 1 MiB; 0 turns it off)
  /// they are written to an unlinked temporary file (MILKIT_SPILL_DIR, else /var/tmp, else
  /// TMPDIR) and mapped back, so results a pass computes for large weights (compressed data)
  /// live in the page cache rather than in the process's anonymous memory.
  static std::shared_ptr<const Buffer> spill(std::vector<uint8_t>&& bytes);
  /// The packed source of a packed_bits buffer (nullptr for other buffers).
  const Buffer* bit_source() const { return bits_ ? lazy_src_.get() : nullptr; }
  /// The element width of a packed_bits buffer (0 for other buffers).
  int bit_width() const { return bits_; }
  /// The bytes (a lazy buffer is converted the first time).
  const uint8_t* data() const {
    if (!data_ && size_ && lazy_src_) materialize();
    return data_;
  }
  /// Number of bytes.
  size_t size() const { return size_; }
  /// Whether the memory belongs to someone else (zero-copy).
  bool borrowed() const { return owner_ != nullptr; }
  /// Whether the bytes are not computed yet.
  bool lazy() const { return lazy_src_ && !data_; }
  /// Copies bytes [offset, offset + len) into `dst` without materializing a lazy buffer
  /// (for a lazy buffer, offset and len must be whole elements).
  void read(size_t offset, size_t len, uint8_t* dst) const;

 private:
  // (a key only the factories can make: the constructor below is public for std::make_shared,
  // which allocates the buffer and its count together, yet only they can call it)
  struct Made {
    explicit Made() = default;
  };

 public:
  /// An empty buffer; construction goes through the factories above.
  explicit Buffer(Made) {}

 private:
  static std::shared_ptr<Buffer> make() { return std::make_shared<Buffer>(Made{}); }
  void materialize() const;
  void read_bits(size_t first, size_t n, uint8_t* dst) const;
  mutable std::vector<uint8_t> own_;
  std::shared_ptr<const void> owner_;
  std::shared_ptr<const Buffer> lazy_src_;
  ElementMap map_;
  size_t in_elem_ = 1, out_elem_ = 1;
  int bits_ = 0;  // packed_bits: the element width
  bool bits_signed_ = false;
  mutable std::once_flag once_;
  mutable const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  // copy()'s bytes when they fit (scalars: no allocation of their own)
  alignas(8) uint8_t small_[16];
};

/// Packs `n` elements (the low `bits` bits of each byte of `in`) into ceil(n * bits / 8) bytes
/// at `out`, LSB first (Core ML's sub-byte layout).
void pack_bits(const uint8_t* in, size_t n, int bits, uint8_t* out);
/// Unpacks elements [first, first + n) of a packed stream starting at `in` into one byte each
/// (sign-extended when `is_signed`).
void unpack_bits(const uint8_t* in, size_t first, size_t n, int bits, bool is_signed, uint8_t* out);

/// A compile-time tensor value: dtype, concrete shape, and either raw elements in milkit's
/// unpacked layout (little-endian, one byte per bool or sub-byte element, fp16/bf16 as raw
/// uint16 bits), strings, or symbolic integer elements (Dims) for shape computations.
class Value {
 public:
  Value() = default;
  /// A value over `buffer` (which must hold numel * storage bytes).
  Value(DataType dt, std::vector<int64_t> shape, std::shared_ptr<const Buffer> buffer);
  /// A string tensor.
  static Value strings(std::vector<int64_t> shape, std::vector<std::string> s);
  /// A symbolic integer tensor; becomes a plain value when every dim is a constant.
  static Value from_dims(DataType dt, std::vector<int64_t> shape, std::vector<Dim> dims);
  /// An integer tensor of dtype `dt` (values are wrapped to the dtype).
  static Value from_ints(DataType dt, std::vector<int64_t> shape, const std::vector<int64_t>& v);
  /// A tensor of dtype `dt` over `bytes` in milkit's unpacked layout (one byte per sub-byte
  /// element). Large results go through Buffer::spill, and sub-byte ones are kept packed
  /// (Buffer::packed_bits): what a pass creates for big weights leaves anonymous memory.
  static Value from_bytes(DataType dt, std::vector<int64_t> shape, std::vector<uint8_t>&& bytes);
  /// A float / bool tensor of dtype `dt` from doubles (rounded to the dtype).
  static Value from_doubles(DataType dt, std::vector<int64_t> shape, const std::vector<double>& v);
  /// Scalar helpers.
  static Value scalar_int(DataType dt, int64_t v) { return from_ints(dt, {}, {v}); }
  /// A float scalar (rounded to the dtype).
  static Value scalar_float(DataType dt, double v);
  /// A bool scalar.
  static Value scalar_bool(bool v) { return from_ints(DataType::Bool, {}, {v ? 1 : 0}); }
  /// A string scalar.
  static Value scalar_string(std::string s) { return strings({}, {std::move(s)}); }
  /// A rank-1 int32 tensor.
  static Value int_list(const std::vector<int64_t>& v, DataType dt = DataType::Int32) {
    return from_ints(dt, {static_cast<int64_t>(v.size())}, v);
  }
  /// A MIL list of scalars (coremltools' `mil_list`, e.g. classify's classes): the elements of
  /// the rank-1 value `elems`, typed list[<dtype>, n] rather than a tensor. Throws ValueError
  /// when `elems` is not rank 1 or is symbolic.
  static Value list_of(Value elems);

  /// Element type.
  DataType dtype() const { return dtype_; }
  /// Shape (empty for a scalar).
  const std::vector<int64_t>& shape() const { return shape_; }
  /// Rank.
  int rank() const { return static_cast<int>(shape_.size()); }
  /// Number of elements.
  int64_t numel() const { return numel_; }
  /// Whether some elements are symbolic.
  bool is_symbolic() const { return !dims_.empty(); }
  /// Whether this is a list of scalars (list_of) rather than a tensor; its elements are those
  /// of a rank-1 value (shape {n}).
  bool is_list() const { return list_; }
  /// The raw element storage (nullptr for strings and symbolic values).
  const uint8_t* raw() const { return buffer_ ? buffer_->data() : nullptr; }
  /// The shared buffer.
  const std::shared_ptr<const Buffer>& buffer() const { return buffer_; }
  /// Number of bytes of raw storage.
  size_t nbytes() const { return buffer_ ? buffer_->size() : 0; }
  /// String elements.
  const std::vector<std::string>& string_values() const { return strings_; }
  /// Symbolic elements (only when is_symbolic()).
  const std::vector<Dim>& dims() const { return dims_; }
  /// Element i as a double (floats, ints, bool).
  double as_double(int64_t i) const;
  /// Element i as an integer (ints, bool; floats are truncated).
  int64_t as_int(int64_t i) const;
  /// Element i as a Dim (symbolic or constant).
  Dim as_dim(SymbolContext& ctx, int64_t i) const;
  /// All elements as integers.
  std::vector<int64_t> to_ints() const;
  /// All elements as doubles.
  std::vector<double> to_doubles() const;
  /// All elements as dims.
  std::vector<Dim> to_dims(SymbolContext& ctx) const;
  /// Same dtype, shape, list-ness and bits (or strings, or dims).
  bool equals(const Value& o) const;
  /// The value cast to another dtype, with numpy's conversion rules.
  Value cast(DataType to) const;
  /// The same elements with another shape (no copy).
  Value reshaped(std::vector<int64_t> shape) const;
  /// coremltools' short text: 1.5, [1, 2], "s", or a summary for big values.
  std::string str(size_t max_elems = 10) const;

 private:
  DataType dtype_ = DataType::Unused;
  std::vector<int64_t> shape_;
  int64_t numel_ = 1;
  std::shared_ptr<const Buffer> buffer_;
  std::vector<std::string> strings_;
  std::vector<Dim> dims_;
  bool list_ = false;
};

/// Product of a shape; throws ValueError on negative dims or overflow.
int64_t shape_numel(const std::vector<int64_t>& shape);

}  // namespace milkit
