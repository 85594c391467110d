// milkit/exec/tensor.h - run-time tensors of the interpreter.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "milkit/ir/value.h"
#include "milkit/types/datatype.h"

namespace milkit {

/// A dense, row-major tensor at run time. The storage is shared: a tensor made by a kernel owns
/// aligned memory; a tensor over a weight, a const or a caller's array borrows it (zero-copy) and
/// keeps its owner alive. Tensors are immutable once the kernel that made them returns, so views
/// (reshape, identity) share storage freely. Elements use milkit's unpacked layout: one byte per
/// bool and sub-byte element, fp16 / bf16 as raw uint16 bits.
class Tensor;
/// The elements of a run-time MIL list; an element never written is an undefined Tensor.
using TensorList = std::vector<Tensor>;

class Tensor {
 public:
  Tensor() = default;
  /// A run-time MIL list value (list ops); lists are immutable like tensors: list_write makes a
  /// new list sharing the untouched elements.
  static Tensor list(std::shared_ptr<const TensorList> items);
  /// Whether this is a list value.
  bool is_list() const { return list_ != nullptr && !dict_; }
  /// A string tensor (classify's predicted label); strings have no raw bytes.
  static Tensor strings(std::vector<int64_t> shape, std::vector<std::string> s);
  /// The elements of a string tensor (empty otherwise).
  const std::vector<std::string>& string_values() const;
  /// A run-time dictionary (classify's probabilities): entry i maps keys[i] to values[i]; both
  /// are rank-1 tensors of one length, keys distinct.
  static Tensor dict(Tensor keys, Tensor values);
  /// Whether this is a dictionary value.
  bool is_dict() const { return dict_; }
  /// The keys of a dictionary (throws for anything else).
  const Tensor& dict_keys() const;
  /// The values of a dictionary (throws for anything else).
  const Tensor& dict_values() const;
  /// The elements of a list value (empty for a tensor).
  const TensorList& items() const;
  /// Allocates an uninitialized tensor (64-byte aligned).
  static Tensor empty(DataType dt, std::vector<int64_t> shape);
  /// Allocates a zero-filled tensor.
  static Tensor zeros(DataType dt, std::vector<int64_t> shape);
  /// Wraps foreign memory without copying; `owner` keeps it alive.
  static Tensor borrow(DataType dt, std::vector<int64_t> shape, const void* data,
                       std::shared_ptr<const void> owner);
  /// A tensor over a compile-time value's buffer (no copy). Strings and symbolic values throw.
  static Tensor from_value(const Value& v);
  /// A scalar of `dt` holding `v` (rounded / wrapped to the dtype).
  static Tensor scalar(DataType dt, double v);

  /// Whether the tensor holds anything.
  bool defined() const { return dtype_ != DataType::Unused || list_ != nullptr; }
  /// Element type.
  DataType dtype() const { return dtype_; }
  /// Shape (empty for a scalar).
  const std::vector<int64_t>& shape() const { return shape_; }
  /// Dim i (negative counts from the end).
  int64_t dim(int i) const { return shape_[i < 0 ? i + rank() : i]; }
  /// Rank.
  int rank() const { return static_cast<int>(shape_.size()); }
  /// Number of elements.
  int64_t numel() const { return numel_; }
  /// Bytes per element.
  int itemsize() const { return dtype_storage_bytes(dtype_); }
  /// Bytes of storage.
  size_t nbytes() const { return static_cast<size_t>(numel_) * itemsize(); }
  /// Raw bytes.
  const uint8_t* bytes() const { return data_; }
  /// Raw bytes to write (only for a tensor the caller just allocated).
  uint8_t* mutable_bytes() const { return data_; }
  /// Typed elements.
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(data_);
  }
  /// Typed elements to write (only for a tensor the caller just allocated).
  template <typename T>
  T* mutable_data() const {
    return reinterpret_cast<T*>(data_);
  }
  /// The same storage with another shape of the same element count.
  Tensor reshaped(std::vector<int64_t> shape) const;
  /// Whether the memory is someone else's (a weight, a const, a caller's array).
  bool borrowed() const { return borrowed_; }
  /// The storage owner (to keep the memory alive elsewhere, e.g. a numpy array).
  const std::shared_ptr<const void>& owner() const { return holder_; }
  /// A copy as a compile-time Value (for tests and constant folding).
  Value to_value() const;
  /// Element i as a double (any numeric dtype).
  double get(int64_t i) const;
  /// "(2, 3) fp32" for messages.
  std::string describe() const;

 private:
  DataType dtype_ = DataType::Unused;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  uint8_t* data_ = nullptr;
  std::shared_ptr<const void> holder_;
  bool borrowed_ = false;
  std::shared_ptr<const TensorList> list_;  // list items; for a dict: {keys, values}
  std::shared_ptr<const std::vector<std::string>> strings_;
  bool dict_ = false;
};

/// "(1, 2, 3)".
std::string shape_str(const std::vector<int64_t>& shape);

/// Converts a tensor to another dtype with numpy's rules (float -> int truncates toward zero,
/// ints wrap, anything -> bool is != 0). Returns the input itself when the dtype already matches.
Tensor cast_tensor(const Tensor& t, DataType to);

/// Bytes of freed tensor buffers the process keeps for reuse. Buffers of 64 KB or more go back
/// to a cache when freed and are handed out again for the same (page-rounded) size, so a model's
/// activations do not fault in fresh pages on every run; MILKIT_BUFFER_CACHE_MB (read once;
/// default 256, 0 keeps none) and the largest live set of any run so far bound it, the least
/// recently freed going first.
size_t buffer_cache_bytes();

/// Tells the buffer cache a run's largest live set (bytes of tensors alive at once): it keeps no
/// more than the largest it has been told of.
void buffer_cache_bound(size_t live_peak);

}  // namespace milkit
