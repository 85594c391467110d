// milkit/types/type.h - interned MIL value types and the per-function Context.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "milkit/symbolic/expr.h"
#include "milkit/types/datatype.h"

namespace milkit {

/// The kinds of MIL value types.
enum class TypeKind : uint8_t { Tensor, List, Tuple, Dict, State };

/// An immutable, interned type. Two types in one Context are equal exactly when they are the
/// same pointer. A scalar is a rank-0 tensor.
class Type {
 public:
  /// The kind of type.
  TypeKind kind() const { return kind_; }
  /// Whether this is a tensor type (including scalars).
  bool is_tensor() const { return kind_ == TypeKind::Tensor; }
  /// Whether this is a rank-0 tensor.
  bool is_scalar() const { return kind_ == TypeKind::Tensor && has_rank_ && shape_.empty(); }
  /// Element type of a tensor (or of the tensor wrapped by a state).
  DataType dtype() const { return dtype_; }
  /// Whether the rank is known (tensors only).
  bool has_rank() const { return has_rank_; }
  /// Rank of a tensor; -1 when unknown.
  int rank() const { return has_rank_ ? static_cast<int>(shape_.size()) : -1; }
  /// Dims of a tensor with known rank.
  const std::vector<Dim>& shape() const { return shape_; }
  /// Whether every dim is a known integer (and the rank is known).
  bool is_static() const;
  /// Element type of a list; wrapped type of a state.
  const Type* elem() const { return elem_; }
  /// Length of a list (nullptr when unknown).
  Dim length() const { return length_; }
  /// Whether a list may change length.
  bool dynamic_length() const { return dynamic_; }
  /// Members of a tuple.
  const std::vector<const Type*>& elems() const { return elems_; }
  /// Key type of a dict.
  const Type* key() const { return key_; }
  /// Value type of a dict.
  const Type* value() const { return value_; }
  /// coremltools' text: "(1, S, 64, fp32)" for tensors, "fp32" for scalars, "list[...]", ...
  std::string str() const;

 private:
  friend class Context;
  TypeKind kind_ = TypeKind::Tensor;
  DataType dtype_ = DataType::Unused;
  bool has_rank_ = true;
  bool dynamic_ = true;
  std::vector<Dim> shape_;
  const Type* elem_ = nullptr;
  Dim length_ = nullptr;
  std::vector<const Type*> elems_;
  const Type* key_ = nullptr;
  const Type* value_ = nullptr;
  size_t hash_ = 0;
};

/// Owns the symbolic expressions, the interned types and the name counters of one function (or
/// of a group of functions built together). Shared by everything that refers to them.
class Context : public SymbolContext {
 public:
  Context() = default;
  /// A tensor type; an empty shape is a scalar.
  const Type* tensor(DataType dt, const std::vector<Dim>& shape);
  /// A tensor type from integer dims.
  const Type* tensor(DataType dt, const std::vector<int64_t>& shape);
  /// A scalar (rank-0 tensor) type.
  const Type* scalar(DataType dt);
  /// A tensor of unknown rank.
  const Type* tensor_unknown_rank(DataType dt);
  /// Tensor `t` (ranked or not) with dtype `dt` (remembered per type: casts ask often).
  const Type* with_dtype(const Type* t, DataType dt);
  /// A list type; `length` may be nullptr (unknown).
  const Type* list(const Type* elem, Dim length, bool dynamic_length);
  /// A tuple type.
  const Type* tuple(const std::vector<const Type*>& elems);
  /// A dictionary type.
  const Type* dict(const Type* key, const Type* value);
  /// A state type wrapping a tensor type.
  const Type* state(const Type* wrapped);
  /// Copies a type from another context.
  const Type* import(const Type* t);
  using SymbolContext::import;

  /// Returns "<base>_<n>" with n counted per base name (coremltools' naming: add_0, add_1).
  std::string free_name(std::string base);
  /// Whether a complex tensor type was ever made in this context (when not, no var of its
  /// functions holds complex data).
  bool has_complex_types() const { return has_complex_; }
  /// Marks a name as used so free_name never returns it.
  void reserve_name(const std::string& name) { used_names_.insert(name); }

 private:
  struct TypeHash {
    size_t operator()(const Type* t) const { return t->hash_; }
  };
  struct TypeEq {
    bool operator()(const Type* a, const Type* b) const;
  };
  const Type* intern(Type&& t);
  std::deque<Type> types_;
  std::unordered_set<const Type*, TypeHash, TypeEq> table_;
  // free_name's counters per base name: open addressing over copies kept in large chunks (one
  // hash and no allocation per base; most bases are new, e.g. "<cast>_dtype")
  struct NameCount {
    const char* data = nullptr;  // nullptr: empty slot
    uint32_t size = 0;
    uint32_t hash = 0;
    int64_t next = 0;  // the next suffix to try
  };
  size_t name_slot(std::string_view base, uint32_t hash) const;
  std::vector<NameCount> name_slots_;
  size_t name_count_ = 0;
  std::vector<std::unique_ptr<char[]>> name_chunks_;
  size_t name_chunk_used_ = 0, name_chunk_cap_ = 0;
  bool has_complex_ = false;
  std::unordered_set<std::string> used_names_;
  const Type* scalars_[64] = {};
  std::unordered_map<uint64_t, const Type*> with_dtype_;  // (type index << 8 | dtype) -> type
};

/// coremltools' is_compatible_type: equal types, or tensors of the same dtype and rank whose
/// dims agree wherever both are known integers (symbols match anything).
bool is_compatible_type(const Type* a, const Type* b);

/// coremltools' is_subtype: `a` can stand where `b` is expected. Tensors: same dtype and rank,
/// and each dim equal, or symbolic in `b`; lists: subtype element types; otherwise equal.
bool is_subtype(const Type* a, const Type* b);

}  // namespace milkit
