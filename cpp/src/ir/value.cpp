#include "milkit/ir/value.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>

#include "milkit/types/error.h"

namespace milkit {

std::shared_ptr<const Buffer> Buffer::take(std::vector<uint8_t>&& bytes) {
  auto b = make();
  b->own_ = std::move(bytes);
  b->data_ = b->own_.data();
  b->size_ = b->own_.size();
  return b;
}

std::shared_ptr<const Buffer> Buffer::copy(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (size <= sizeof small_) {
    auto b = make();
    if (size) std::memcpy(b->small_, p, size);
    b->data_ = b->small_;
    b->size_ = size;
    return b;
  }
  return take(std::vector<uint8_t>(p, p + size));
}

std::shared_ptr<const Buffer> Buffer::borrow(const void* data, size_t size,
                                             std::shared_ptr<const void> owner) {
  auto b = make();
  b->owner_ = std::move(owner);
  b->data_ = static_cast<const uint8_t*>(data);
  b->size_ = size;
  return b;
}

std::shared_ptr<const Buffer> Buffer::lazy_map(std::shared_ptr<const Buffer> src, size_t in_elem,
                                               size_t out_elem, ElementMap map) {
  if (!src || !in_elem || !out_elem || !map) throw ValueError("lazy buffer: bad arguments");
  if (src->size() % in_elem)
    throw ValueError("lazy buffer: source is not a whole number of elements");
  auto b = make();
  b->size_ = src->size() / in_elem * out_elem;
  b->lazy_src_ = std::move(src);
  b->map_ = std::move(map);
  b->in_elem_ = in_elem;
  b->out_elem_ = out_elem;
  return b;
}

std::shared_ptr<const Buffer> Buffer::lazy_fp32_to_fp16(std::shared_ptr<const Buffer> src) {
  if (src->size() % 4) throw ValueError("lazy fp16 cast: source is not a whole number of floats");
  return lazy_map(std::move(src), 4, 2, [](size_t, size_t n, const uint8_t* in, uint8_t* out) {
    // the chunks are aligned scratch (see read), so the casts are safe
    floats_to_halves(reinterpret_cast<const float*>(in), reinterpret_cast<uint16_t*>(out), n);
  });
}

std::shared_ptr<const Buffer> Buffer::packed_bits(std::shared_ptr<const Buffer> packed, int bits,
                                                  bool is_signed, size_t n) {
  if (!packed || bits < 1 || bits > 8) throw ValueError("packed buffer: bad arguments");
  if (packed->size() < (n * static_cast<size_t>(bits) + 7) / 8)
    throw ValueError("packed buffer: " + std::to_string(packed->size()) + " bytes cannot hold " +
                     std::to_string(n) + " elements of " + std::to_string(bits) + " bits");
  auto b = make();
  b->size_ = n;
  b->lazy_src_ = std::move(packed);
  b->bits_ = bits;
  b->bits_signed_ = is_signed;
  return b;
}

void Buffer::materialize() const {
  std::call_once(once_, [this] {
    own_.resize(size_);
    read(0, size_, own_.data());
    data_ = own_.data();
  });
}

void Buffer::read(size_t offset, size_t len, uint8_t* dst) const {
  if (offset > size_ || len > size_ - offset) throw ValueError("buffer read past the end");
  if (data_ || !lazy_src_) {
    if (len) std::memcpy(dst, data_ + offset, len);
    return;
  }
  if (bits_) {
    read_bits(offset, len, dst);
    return;
  }
  if (offset % out_elem_ || len % out_elem_)
    throw ValueError("lazy buffer: read of a partial element");
  // convert through small aligned scratch buffers, reading the source the same way (so a lazy
  // source streams too, and any source alignment works)
  constexpr size_t kScratch = 16384;
  alignas(16) uint8_t in[kScratch];
  alignas(16) uint8_t out[kScratch];
  const size_t per = kScratch / std::max(in_elem_, out_elem_);
  const size_t first = offset / out_elem_, count = len / out_elem_;
  for (size_t done = 0; done < count;) {
    size_t m = std::min(per, count - done);
    lazy_src_->read((first + done) * in_elem_, m * in_elem_, in);
    map_(first + done, m, in, out);
    std::memcpy(dst + done * out_elem_, out, m * out_elem_);
    done += m;
  }
}

namespace {
// Elements [0, n) of a packed stream whose first element starts at bit `bit` of `in`.
void unpack_from_bit(const uint8_t* in, size_t bit, size_t n, int bits, bool is_signed,
                     uint8_t* out) {
  const unsigned mask = (1u << bits) - 1;
  for (size_t i = 0; i < n; ++i, bit += static_cast<size_t>(bits)) {
    size_t byte = bit / 8, off = bit % 8;
    unsigned v = in[byte] >> off;
    if (off + static_cast<size_t>(bits) > 8) v |= static_cast<unsigned>(in[byte + 1]) << (8 - off);
    v &= mask;
    if (is_signed && (v & (1u << (bits - 1)))) v |= ~mask;  // sign-extend into the byte
    out[i] = static_cast<uint8_t>(v);
  }
}

}  // namespace

void Buffer::read_bits(size_t first, size_t n, uint8_t* dst) const {
  // whole source bytes through scratch: elements [e, e + m) start at bit e * bits
  constexpr size_t kElems = 8 * 2048;  // a multiple of 8: every chunk but the first is aligned
  uint8_t in[kElems + 8];
  const auto bits = static_cast<size_t>(bits_);
  for (size_t done = 0; done < n;) {
    size_t e = first + done, m = std::min(kElems, n - done);
    size_t lo = e * bits / 8, hi = ((e + m) * bits + 7) / 8;
    lazy_src_->read(lo, hi - lo, in);
    unpack_from_bit(in, e * bits - lo * 8, m, bits_, bits_signed_, dst + done);
    done += m;
  }
}

namespace {
// The whole bytes of a packing whose width divides 8: each byte from 8 / B elements (fixed B,
// so the compiler unrolls it); returns the elements packed.
template <int B>
size_t pack_whole_bytes(const uint8_t* in, size_t n, uint8_t* out) {
  constexpr size_t per = 8 / B;
  constexpr unsigned mask = (1u << B) - 1;
  const size_t bytes = n / per;
  for (size_t b = 0; b < bytes; ++b) {
    unsigned acc = 0;
    for (size_t k = 0; k < per; ++k) acc |= (in[b * per + k] & mask) << (k * B);
    out[b] = static_cast<uint8_t>(acc);
  }
  return bytes * per;
}
}  // namespace

void pack_bits(const uint8_t* in, size_t n, int bits, uint8_t* out) {
  const size_t nbytes = (n * static_cast<size_t>(bits) + 7) / 8;
  std::memset(out, 0, nbytes);
  const unsigned mask = (1u << bits) - 1;
  size_t i0 = 0;  // elements already packed, a whole number of bytes
  if (bits == 1) i0 = pack_whole_bytes<1>(in, n, out);
  if (bits == 2) i0 = pack_whole_bytes<2>(in, n, out);
  if (bits == 4) i0 = pack_whole_bytes<4>(in, n, out);
  size_t bit = i0 * static_cast<size_t>(bits);
  for (size_t i = i0; i < n; ++i, bit += static_cast<size_t>(bits)) {
    unsigned v = in[i] & mask;
    size_t byte = bit / 8, off = bit % 8;
    out[byte] |= static_cast<uint8_t>(v << off);
    if (off + static_cast<size_t>(bits) > 8) out[byte + 1] |= static_cast<uint8_t>(v >> (8 - off));
  }
}

void unpack_bits(const uint8_t* in, size_t first, size_t n, int bits, bool is_signed,
                 uint8_t* out) {
  unpack_from_bit(in, first * static_cast<size_t>(bits), n, bits, is_signed, out);
}

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw ValueError("negative dimension in a value shape");
    if (__builtin_mul_overflow(n, d, &n)) throw ValueError("value shape overflows int64");
  }
  return n;
}

Value::Value(DataType dt, std::vector<int64_t> shape, std::shared_ptr<const Buffer> buffer)
    : dtype_(dt), shape_(std::move(shape)), buffer_(std::move(buffer)) {
  numel_ = shape_numel(shape_);
  size_t need = static_cast<size_t>(numel_) * dtype_storage_bytes(dt);
  if (!buffer_ || buffer_->size() != need)
    throw ValueError("value of dtype " + std::string(dtype_name(dt)) + " needs " +
                     std::to_string(need) + " bytes, buffer has " +
                     std::to_string(buffer_ ? buffer_->size() : 0));
}

Value Value::strings(std::vector<int64_t> shape, std::vector<std::string> s) {
  Value v;
  v.dtype_ = DataType::String;
  v.shape_ = std::move(shape);
  v.numel_ = shape_numel(v.shape_);
  if (static_cast<int64_t>(s.size()) != v.numel_)
    throw ValueError("string count does not match shape");
  v.strings_ = std::move(s);
  return v;
}

Value Value::from_dims(DataType dt, std::vector<int64_t> shape, std::vector<Dim> dims) {
  bool all_const = true;
  for (Dim d : dims) all_const &= d->is_const();
  if (all_const) {
    std::vector<int64_t> ints;
    ints.reserve(dims.size());
    for (Dim d : dims) ints.push_back(d->value());
    return from_ints(dt, std::move(shape), ints);
  }
  Value v;
  v.dtype_ = dt;
  v.shape_ = std::move(shape);
  v.numel_ = shape_numel(v.shape_);
  if (static_cast<int64_t>(dims.size()) != v.numel_)
    throw ValueError("dim count does not match shape");
  v.dims_ = std::move(dims);
  return v;
}

namespace {
template <class T>
void put(uint8_t* p, int64_t i, T v) {
  std::memcpy(p + i * sizeof(T), &v, sizeof(T));
}
template <class T>
T get(const uint8_t* p, int64_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}

// fp8 conversions (E4M3FN: bias 7, no inf, 0x7f/0xff nan; E5M2: bias 15, IEEE-like).
float fp8_to_float(uint8_t b, bool e4m3) {
  int sign = (b & 0x80) ? -1 : 1;
  int ebits = e4m3 ? 4 : 5, mbits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  int e = (b >> mbits) & ((1 << ebits) - 1);
  int m = b & ((1 << mbits) - 1);
  if (e4m3 && e == 15 && m == 7) return NAN;
  if (!e4m3 && e == 31) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), 1 - bias - mbits);
  return sign * std::ldexp(1.0f + static_cast<float>(m) / (1 << mbits), e - bias);
}
uint8_t float_to_fp8(float f, bool e4m3) {
  if (std::isnan(f)) return e4m3 ? 0x7f : 0x7e;
  // exhaustive nearest search over the 256 codes (exact, round-half-even by code parity)
  uint8_t best = 0;
  double bestd = INFINITY;
  for (int c = 0; c < 256; ++c) {
    float v = fp8_to_float(static_cast<uint8_t>(c), e4m3);
    if (std::isnan(v)) continue;
    if (std::signbit(v) != std::signbit(f) && !(v == 0 && f == 0)) continue;
    double d = std::fabs(static_cast<double>(v) - f);
    if (d < bestd || (d == bestd && (c & 1) == 0)) bestd = d, best = static_cast<uint8_t>(c);
  }
  return best;
}
}  // namespace

Value Value::from_ints(DataType dt, std::vector<int64_t> shape, const std::vector<int64_t>& v) {
  if (is_float(dt)) {
    std::vector<double> d(v.begin(), v.end());
    return from_doubles(dt, std::move(shape), d);
  }
  int64_t n = shape_numel(shape);
  if (static_cast<int64_t>(v.size()) != n) throw ValueError("element count does not match shape");
  int w = dtype_storage_bytes(dt);
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * w);
  uint8_t* p = bytes.data();
  for (int64_t i = 0; i < n; ++i) {
    int64_t x = v[i];
    switch (dt) {
      case DataType::Bool:
        p[i] = x != 0;
        break;
      case DataType::Int8:
      case DataType::Int4:
        put<int8_t>(p, i, static_cast<int8_t>(x));
        break;
      case DataType::UInt8:
      case DataType::UInt1:
      case DataType::UInt2:
      case DataType::UInt3:
      case DataType::UInt4:
      case DataType::UInt6:
        put<uint8_t>(p, i, static_cast<uint8_t>(x));
        break;
      case DataType::Int16:
        put<int16_t>(p, i, static_cast<int16_t>(x));
        break;
      case DataType::UInt16:
        put<uint16_t>(p, i, static_cast<uint16_t>(x));
        break;
      case DataType::Int32:
        put<int32_t>(p, i, static_cast<int32_t>(x));
        break;
      case DataType::UInt32:
        put<uint32_t>(p, i, static_cast<uint32_t>(x));
        break;
      case DataType::Int64:
        put<int64_t>(p, i, x);
        break;
      case DataType::UInt64:
        put<uint64_t>(p, i, static_cast<uint64_t>(x));
        break;
      default:
        throw TypeError("cannot make an integer value of dtype " + std::string(dtype_name(dt)));
    }
  }
  return Value(dt, std::move(shape), Buffer::take(std::move(bytes)));
}

Value Value::scalar_float(DataType dt, double v) {
  if (dt != DataType::Float32) return from_doubles(dt, {}, {v});
  // the builder's most common const: its four bytes, without a list of elements
  const float f = static_cast<float>(v);
  return Value(dt, {}, Buffer::copy(&f, sizeof f));
}

Value Value::from_doubles(DataType dt, std::vector<int64_t> shape, const std::vector<double>& v) {
  int64_t n = shape_numel(shape);
  if (static_cast<int64_t>(v.size()) != n) throw ValueError("element count does not match shape");
  if (!is_float(dt)) {
    std::vector<int64_t> ints(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      double x = v[i];
      if (dt == DataType::Bool) {
        ints[i] = x != 0;
      } else if (std::isnan(x) || std::isinf(x)) {
        ints[i] = int_min(dt);
      } else {
        ints[i] = static_cast<int64_t>(std::trunc(std::max(-9.2e18, std::min(9.2e18, x))));
      }
    }
    return from_ints(dt, std::move(shape), ints);
  }
  int w = dtype_storage_bytes(dt);
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * w);
  uint8_t* p = bytes.data();
  for (int64_t i = 0; i < n; ++i) {
    double x = v[i];
    switch (dt) {
      case DataType::Float16:
        put<uint16_t>(p, i, float_to_half(static_cast<float>(x)));
        break;
      case DataType::BFloat16:
        put<uint16_t>(p, i, float_to_bf16(static_cast<float>(x)));
        break;
      case DataType::Float32:
        put<float>(p, i, static_cast<float>(x));
        break;
      case DataType::Float64:
        put<double>(p, i, x);
        break;
      case DataType::Float8E4M3FN:
        p[i] = float_to_fp8(static_cast<float>(x), true);
        break;
      case DataType::Float8E5M2:
        p[i] = float_to_fp8(static_cast<float>(x), false);
        break;
      default:
        break;
    }
  }
  return Value(dt, std::move(shape), Buffer::take(std::move(bytes)));
}

double Value::as_double(int64_t i) const {
  if (is_symbolic()) {
    if (!dims_[i]->is_const()) throw ValueError("value element is symbolic");
    return static_cast<double>(dims_[i]->value());
  }
  const uint8_t* p = raw();
  if (!p) throw TypeError("value has no numeric elements");
  switch (dtype_) {
    case DataType::Bool:
      return p[i] ? 1.0 : 0.0;
    case DataType::Float16:
      return half_to_float(get<uint16_t>(p, i));
    case DataType::BFloat16:
      return bf16_to_float(get<uint16_t>(p, i));
    case DataType::Float32:
      return get<float>(p, i);
    case DataType::Float64:
      return get<double>(p, i);
    case DataType::Float8E4M3FN:
      return fp8_to_float(p[i], true);
    case DataType::Float8E5M2:
      return fp8_to_float(p[i], false);
    case DataType::UInt64:
      return static_cast<double>(get<uint64_t>(p, i));
    default:
      return static_cast<double>(as_int(i));
  }
}

int64_t Value::as_int(int64_t i) const {
  if (is_symbolic()) {
    if (!dims_[i]->is_const()) throw ValueError("value element is symbolic");
    return dims_[i]->value();
  }
  const uint8_t* p = raw();
  if (!p) throw TypeError("value has no numeric elements");
  switch (dtype_) {
    case DataType::Bool:
      return p[i] != 0;
    case DataType::Int8:
    case DataType::Int4:
      return get<int8_t>(p, i);
    case DataType::UInt8:
    case DataType::UInt1:
    case DataType::UInt2:
    case DataType::UInt3:
    case DataType::UInt4:
    case DataType::UInt6:
      return p[i];
    case DataType::Int16:
      return get<int16_t>(p, i);
    case DataType::UInt16:
      return get<uint16_t>(p, i);
    case DataType::Int32:
      return get<int32_t>(p, i);
    case DataType::UInt32:
      return get<uint32_t>(p, i);
    case DataType::Int64:
      return get<int64_t>(p, i);
    case DataType::UInt64:
      return static_cast<int64_t>(get<uint64_t>(p, i));
    default: {
      double d = as_double(i);
      if (std::isnan(d) || std::isinf(d)) return INT64_MIN;
      return static_cast<int64_t>(d);
    }
  }
}

Dim Value::as_dim(SymbolContext& ctx, int64_t i) const {
  if (is_symbolic()) return dims_[i];
  return ctx.constant(as_int(i));
}

std::vector<int64_t> Value::to_ints() const {
  std::vector<int64_t> r(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) r[i] = as_int(i);
  return r;
}

std::vector<double> Value::to_doubles() const {
  std::vector<double> r(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) r[i] = as_double(i);
  return r;
}

std::vector<Dim> Value::to_dims(SymbolContext& ctx) const {
  if (is_symbolic()) return dims_;
  std::vector<Dim> r;
  r.reserve(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) r.push_back(ctx.constant(as_int(i)));
  return r;
}

Value Value::list_of(Value elems) {
  if (elems.rank() != 1)
    throw ValueError("a list value takes rank-1 elements, got rank " +
                     std::to_string(elems.rank()));
  if (elems.is_symbolic()) throw ValueError("a list value cannot hold symbolic elements");
  elems.list_ = true;
  return elems;
}

bool Value::equals(const Value& o) const {
  if (dtype_ != o.dtype_ || shape_ != o.shape_ || list_ != o.list_) return false;
  if (dtype_ == DataType::String) return strings_ == o.strings_;
  if (is_symbolic() || o.is_symbolic()) return dims_ == o.dims_;
  if (nbytes() != o.nbytes()) return false;
  return nbytes() == 0 || std::memcmp(raw(), o.raw(), nbytes()) == 0;
}

namespace {
// Casts of at least this many fp32 elements to fp16 are lazy (weights): see Buffer.
constexpr int64_t kLazyCastElems = 4096;
}  // namespace

Value Value::cast(DataType to) const {
  if (to == dtype_) return *this;
  if (dtype_ == DataType::String || to == DataType::String)
    throw TypeError("cannot cast between string and " +
                    std::string(dtype_name(to == DataType::String ? dtype_ : to)));
  if (is_symbolic()) {
    if (is_float(to)) throw ValueError("cannot cast a symbolic value to a float type");
    Value v = *this;
    v.dtype_ = to;
    return v;
  }
  // fast paths for the casts weights go through (fp32 <-> fp16)
  if (dtype_ == DataType::Float32 && to == DataType::Float16 && numel_ >= kLazyCastElems)
    return Value(to, shape_, Buffer::lazy_fp32_to_fp16(buffer_));
  // bf16 widens exactly (its bits are fp32's top half), lazily for weights: a bf16 checkpoint
  // cast to fp32 and then to fp16 streams through both casts when it is written
  if (dtype_ == DataType::BFloat16 && to == DataType::Float32 && numel_ >= kLazyCastElems)
    return Value(
        to, shape_,
        Buffer::lazy_map(buffer_, 2, 4, [](size_t, size_t n, const uint8_t* in, uint8_t* out) {
          for (size_t i = 0; i < n; ++i) {
            uint32_t bits = static_cast<uint32_t>(in[2 * i] | (in[2 * i + 1] << 8)) << 16;
            std::memcpy(out + 4 * i, &bits, 4);
          }
        }));
  if (dtype_ == DataType::Float32 && to == DataType::Float16) {
    std::vector<uint8_t> bytes(static_cast<size_t>(numel_) * 2);
    floats_to_halves(reinterpret_cast<const float*>(raw()),
                     reinterpret_cast<uint16_t*>(bytes.data()), static_cast<size_t>(numel_));
    return Value(to, shape_, Buffer::take(std::move(bytes)));
  }
  if (dtype_ == DataType::Float16 && to == DataType::Float32) {
    std::vector<uint8_t> bytes(static_cast<size_t>(numel_) * 4);
    halves_to_floats(reinterpret_cast<const uint16_t*>(raw()),
                     reinterpret_cast<float*>(bytes.data()), static_cast<size_t>(numel_));
    return Value(to, shape_, Buffer::take(std::move(bytes)));
  }
  if (is_float(dtype_) || is_float(to)) return from_doubles(to, shape_, to_doubles());
  return from_ints(to, shape_, to_ints());
}

Value Value::reshaped(std::vector<int64_t> shape) const {
  if (shape_numel(shape) != numel_) throw ValueError("reshape of a value changes its size");
  Value v = *this;
  v.shape_ = std::move(shape);
  return v;
}

namespace {
std::string fmt_double(double d, DataType dt) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  std::ostringstream os;
  os.precision(dt == DataType::Float64 ? 17 : 8);
  os << d;
  std::string s = os.str();
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}
}  // namespace

std::string Value::str(size_t max_elems) const {
  auto elem = [&](int64_t i) -> std::string {
    if (dtype_ == DataType::String) return "\"" + strings_[i] + "\"";
    if (is_symbolic()) return dims_[i]->str();
    if (dtype_ == DataType::Bool) return as_int(i) ? "true" : "false";
    if (is_float(dtype_)) return fmt_double(as_double(i), dtype_);
    return std::to_string(as_int(i));
  };
  if (shape_.empty()) return elem(0);
  if (static_cast<size_t>(numel_) > max_elems) {
    std::string s = "tensor<" + std::string(dtype_name(dtype_)) + ", [";
    for (size_t i = 0; i < shape_.size(); ++i) s += (i ? ", " : "") + std::to_string(shape_[i]);
    return s + "]>";
  }
  // nested lists by shape
  std::string s;
  std::vector<int64_t> strides(shape_.size(), 1);
  for (int i = static_cast<int>(shape_.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape_[i + 1];
  std::function<void(size_t, int64_t)> rec = [&](size_t d, int64_t off) {
    s += "[";
    for (int64_t i = 0; i < shape_[d]; ++i) {
      if (i) s += ", ";
      if (d + 1 == shape_.size())
        s += elem(off + i);
      else
        rec(d + 1, off + i * strides[d]);
    }
    s += "]";
  };
  rec(0, 0);
  return s;
}

}  // namespace milkit
