#include "milkit/types/type.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "milkit/types/error.h"

namespace milkit {

namespace {
size_t mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }
}  // namespace

bool Type::is_static() const {
  if (kind_ != TypeKind::Tensor || !has_rank_) return false;
  for (Dim d : shape_)
    if (!d->is_const()) return false;
  return true;
}

std::string Type::str() const {
  switch (kind_) {
    case TypeKind::Tensor: {
      if (!has_rank_) return "(*, " + std::string(dtype_name(dtype_)) + ")";
      if (shape_.empty()) return std::string(dtype_name(dtype_));
      std::string s = "(";
      for (Dim d : shape_) s += d->str() + ", ";
      return s + std::string(dtype_name(dtype_)) + ")";
    }
    case TypeKind::List: {
      std::string s = "list[" + elem_->str() + ", ";
      s += length_ ? length_->str() : std::string("?");
      return s + "]";
    }
    case TypeKind::Tuple: {
      std::string s = "tuple(";
      for (size_t i = 0; i < elems_.size(); ++i) s += (i ? ", " : "") + elems_[i]->str();
      return s + ")";
    }
    case TypeKind::Dict: return "dict[" + key_->str() + ", " + value_->str() + "]";
    case TypeKind::State: return "state" + elem_->str();
  }
  return "?";
}

bool Context::TypeEq::operator()(const Type* a, const Type* b) const {
  return a->kind_ == b->kind_ && a->dtype_ == b->dtype_ && a->has_rank_ == b->has_rank_ &&
         a->dynamic_ == b->dynamic_ && a->shape_ == b->shape_ && a->elem_ == b->elem_ &&
         a->length_ == b->length_ && a->elems_ == b->elems_ && a->key_ == b->key_ &&
         a->value_ == b->value_;
}

const Type* Context::intern(Type&& t) {
  if (t.kind_ == TypeKind::Tensor && is_complex(t.dtype_)) has_complex_ = true;
  size_t h = static_cast<size_t>(t.kind_) * 31 + static_cast<size_t>(t.dtype_);
  h = mix(h, t.has_rank_ ? 1 : 2);
  h = mix(h, t.dynamic_ ? 3 : 4);
  for (Dim d : t.shape_) h = mix(h, std::hash<const void*>()(d));
  h = mix(h, std::hash<const void*>()(t.elem_));
  h = mix(h, std::hash<const void*>()(t.length_));
  for (auto* e : t.elems_) h = mix(h, std::hash<const void*>()(e));
  h = mix(h, std::hash<const void*>()(t.key_));
  h = mix(h, std::hash<const void*>()(t.value_));
  t.hash_ = h;
  types_.push_back(std::move(t));
  const Type* node = &types_.back();
  auto [it, inserted] = table_.insert(node);
  if (!inserted) {
    types_.pop_back();
    return *it;
  }
  return node;
}

const Type* Context::tensor(DataType dt, const std::vector<Dim>& shape) {
  if (shape.empty()) return scalar(dt);
  Type t;
  t.kind_ = TypeKind::Tensor;
  t.dtype_ = dt;
  t.shape_ = shape;
  return intern(std::move(t));
}

const Type* Context::tensor(DataType dt, const std::vector<int64_t>& shape) {
  std::vector<Dim> dims;
  dims.reserve(shape.size());
  for (int64_t v : shape) dims.push_back(constant(v));
  return tensor(dt, dims);
}

const Type* Context::scalar(DataType dt) {
  size_t i = static_cast<size_t>(dt) % 64;
  if (scalars_[i]) return scalars_[i];
  Type t;
  t.kind_ = TypeKind::Tensor;
  t.dtype_ = dt;
  return scalars_[i] = intern(std::move(t));
}

const Type* Context::with_dtype(const Type* t, DataType dt) {
  const uint64_t key = (reinterpret_cast<uintptr_t>(t) << 8) ^ static_cast<uint8_t>(dt);
  auto it = with_dtype_.find(key);
  if (it != with_dtype_.end()) {
    const Type* c = it->second;  // checked, so a type from elsewhere at a reused address is no hit
    if (c->dtype() == dt && c->has_rank() == t->has_rank() && (!t->has_rank() || c->shape() == t->shape()))
      return c;
  }
  const Type* r = t->has_rank() ? tensor(dt, t->shape()) : tensor_unknown_rank(dt);
  with_dtype_[key] = r;
  return r;
}

const Type* Context::tensor_unknown_rank(DataType dt) {
  Type t;
  t.kind_ = TypeKind::Tensor;
  t.dtype_ = dt;
  t.has_rank_ = false;
  return intern(std::move(t));
}

const Type* Context::list(const Type* elem, Dim length, bool dynamic_length) {
  Type t;
  t.kind_ = TypeKind::List;
  t.elem_ = elem;
  t.length_ = length;
  t.dynamic_ = dynamic_length;
  return intern(std::move(t));
}

const Type* Context::tuple(const std::vector<const Type*>& elems) {
  Type t;
  t.kind_ = TypeKind::Tuple;
  t.elems_ = elems;
  return intern(std::move(t));
}

const Type* Context::dict(const Type* key, const Type* value) {
  Type t;
  t.kind_ = TypeKind::Dict;
  t.key_ = key;
  t.value_ = value;
  return intern(std::move(t));
}

const Type* Context::state(const Type* wrapped) {
  if (!wrapped->is_tensor()) throw TypeError("a state must wrap a tensor type, got " + wrapped->str());
  Type t;
  t.kind_ = TypeKind::State;
  t.elem_ = wrapped;
  t.dtype_ = wrapped->dtype();
  return intern(std::move(t));
}

const Type* Context::import(const Type* t) {
  switch (t->kind()) {
    case TypeKind::Tensor: {
      if (!t->has_rank()) return tensor_unknown_rank(t->dtype());
      std::vector<Dim> dims;
      for (Dim d : t->shape()) dims.push_back(import(d));
      return tensor(t->dtype(), dims);
    }
    case TypeKind::List:
      return list(import(t->elem()), t->length() ? import(t->length()) : nullptr,
                  t->dynamic_length());
    case TypeKind::Tuple: {
      std::vector<const Type*> e;
      for (auto* x : t->elems()) e.push_back(import(x));
      return tuple(e);
    }
    case TypeKind::Dict: return dict(import(t->key()), import(t->value()));
    case TypeKind::State: return state(import(t->elem()));
  }
  return t;
}

size_t Context::name_slot(std::string_view base, uint32_t hash) const {
  const size_t mask = name_slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const NameCount& sl = name_slots_[i];
    if (!sl.data || (sl.hash == hash && sl.size == base.size() &&
                     std::memcmp(sl.data, base.data(), base.size()) == 0))
      return i;
  }
}

std::string Context::free_name(std::string base) {
  if (name_slots_.empty()) name_slots_.resize(1024);
  const uint32_t h = static_cast<uint32_t>(std::hash<std::string_view>()(base));
  size_t i = name_slot(base, h);
  if (!name_slots_[i].data) {
    if (name_chunk_used_ + base.size() + 1 > name_chunk_cap_) {
      name_chunk_cap_ = std::max<size_t>(base.size() + 1, 64 * 1024);
      name_chunks_.emplace_back(new char[name_chunk_cap_]);
      name_chunk_used_ = 0;
    }
    char* d = name_chunks_.back().get() + name_chunk_used_;
    if (!base.empty()) std::memcpy(d, base.data(), base.size());
    d[base.size()] = '\0';
    name_chunk_used_ += base.size() + 1;
    name_slots_[i] = NameCount{d, static_cast<uint32_t>(base.size()), h, 0};
    if (++name_count_ * 2 > name_slots_.size()) {  // grow: at most half full
      std::vector<NameCount> old(name_slots_.size() * 2);
      old.swap(name_slots_);
      const size_t mask = name_slots_.size() - 1;
      for (const NameCount& sl : old) {
        if (!sl.data) continue;
        size_t j = sl.hash & mask;
        while (name_slots_[j].data) j = (j + 1) & mask;
        name_slots_[j] = sl;
      }
      i = name_slot(base, h);
    }
  }
  NameCount& sl = name_slots_[i];
  for (;;) {
    char digits[24];
    char* end = digits + sizeof digits;
    char* p = end;
    uint64_t v = static_cast<uint64_t>(sl.next++);  // counts start at 0
    do {
      *--p = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v);
    // the base's own buffer becomes the name
    base.push_back('_');
    base.append(p, static_cast<size_t>(end - p));
    if (used_names_.empty() || used_names_.find(base) == used_names_.end()) return base;
    base.resize(sl.size);
  }
}

bool is_compatible_type(const Type* a, const Type* b) {
  if (a == b) return true;
  if (a->kind() != b->kind()) return false;
  switch (a->kind()) {
    case TypeKind::Tensor: {
      if (a->dtype() != b->dtype()) return false;
      if (!a->has_rank() || !b->has_rank()) return true;
      if (a->rank() != b->rank()) return false;
      for (int i = 0; i < a->rank(); ++i) {
        Dim x = a->shape()[i], y = b->shape()[i];
        if (x->is_const() && y->is_const() && x->value() != y->value()) return false;
      }
      return true;
    }
    case TypeKind::List:
      if (!a->elem() || !b->elem()) return true;
      return is_compatible_type(a->elem(), b->elem());
    case TypeKind::State: return is_compatible_type(a->elem(), b->elem());
    case TypeKind::Tuple: {
      if (a->elems().size() != b->elems().size()) return false;
      for (size_t i = 0; i < a->elems().size(); ++i)
        if (!is_compatible_type(a->elems()[i], b->elems()[i])) return false;
      return true;
    }
    case TypeKind::Dict:
      return is_compatible_type(a->key(), b->key()) && is_compatible_type(a->value(), b->value());
  }
  return false;
}

bool is_subtype(const Type* a, const Type* b) {
  if (a == b) return true;
  if (b->kind() == TypeKind::List) {
    if (a->kind() != TypeKind::List) return false;
    if (!b->elem()) return true;
    return a->elem() && is_subtype(a->elem(), b->elem());
  }
  if (a->is_tensor() && b->is_tensor()) {
    if (a->dtype() != b->dtype()) return false;
    if (!b->has_rank()) return true;
    if (!a->has_rank() || a->rank() != b->rank()) return false;
    for (int i = 0; i < a->rank(); ++i) {
      Dim x = a->shape()[i], y = b->shape()[i];
      if (x == y || !y->is_const()) continue;  // anything fits a symbolic dim
      return false;
    }
    return true;
  }
  return false;
}

}  // namespace milkit
