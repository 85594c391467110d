// Packed weights: constexpr chains kept compressed and decompressed range by range. Each stage
// computes exactly what its constexpr kernel (kernels/constexpr.cpp) computes per element, with
// the same fp32 arithmetic and the same rounding to the op's dtype.
#include "packed_weight.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "dispatch.h"
#include "kernels/vec_math.h"
#include "milkit/types/error.h"
#include "weight_cache.h"

namespace milkit {

PackedWeight::PackedWeight(DataType dt, std::vector<int64_t> shape)
    : dtype_(dt), shape_(std::move(shape)) {
  numel_ = 1;
  for (int64_t d : shape_) numel_ *= d;
}

PackedWeight::~PackedWeight() { exec::forget_widened(this); }

size_t PackedWeight::dense_bytes() const {
  return static_cast<size_t>(numel_) * static_cast<size_t>(dtype_storage_bytes(dtype_));
}

Tensor PackedWeight::materialize(DataType dt) const {
  Tensor out = Tensor::empty(dt, shape_);
  if (dt == DataType::Float32) {
    decode(0, numel_, out.mutable_data<float>());
    return out;
  }
  constexpr int64_t kChunk = 4096;
  std::vector<float> tmp(static_cast<size_t>(std::min(numel_, kChunk)));
  exec::dispatch_all(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.mutable_data<T>();
    for (int64_t s = 0; s < numel_; s += kChunk) {
      int64_t n = std::min(kChunk, numel_ - s);
      decode(s, n, tmp.data());
      for (int64_t i = 0; i < n; ++i) p[s + i] = exec::convert<T>(tmp[static_cast<size_t>(i)]);
    }
  });
  return out;
}

namespace {

/// A float rounded to `dt` (fp16 to nearest even, as the constexpr kernels store it).
inline float round_to(DataType dt, float v) {
  return dt == DataType::Float16 ? half_to_float(float_to_half(v)) : v;
}

bool float_dtype(DataType dt) { return dt == DataType::Float16 || dt == DataType::Float32; }

#ifdef MILKIT_VMATH_AVX2
/// Looks up 8 4-bit indices at a time (LSB first from byte b[0]) in a table of 16 floats; returns
/// how many elements it wrote (n rounded down to 8).
__attribute__((target("avx2"))) int64_t lookup4_avx2(const uint8_t* b, int64_t n,
                                                     const float* table, float* out) {
  const __m256 lo = _mm256_loadu_ps(table), hi = _mm256_loadu_ps(table + 8);
  const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const __m256i m15 = _mm256_set1_epi32(15);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    uint32_t u;
    std::memcpy(&u, b + j / 2, 4);
    const __m256i idx =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(u)), shifts), m15);
    const __m256 sel = _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28));  // bit 3 to the sign
    _mm256_storeu_ps(out + j, _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, idx),
                                               _mm256_permutevar8x32_ps(hi, idx), sel));
  }
  return j;
}
#endif

/// Integers of 1 to 8 bits stored bit-packed LSB first: borrowed from an already packed tensor
/// (an iOS16 index or mask blob, any 8-bit tensor) or packed from milkit's one-byte-per-element
/// layout.
class Bits {
 public:
  Bits() = default;
  /// Borrows the bytes of `t` as the packing of elements of `nbits`.
  static Bits borrow(const Tensor& t, int nbits, bool is_signed) {
    Bits b;
    b.keep_ = t;
    b.p_ = t.bytes();
    b.nbytes_ = t.nbytes();
    b.nbits_ = nbits;
    b.signed_ = is_signed;
    return b;
  }
  /// Borrows the packed bytes of a sub-byte constant held packed (Buffer::bit_source).
  static Bits borrow(std::shared_ptr<const Value> v) {
    Bits b;
    const Buffer* src = v->buffer()->bit_source();
    b.p_ = src->data();
    b.nbytes_ = src->size();
    b.nbits_ = v->buffer()->bit_width();
    b.signed_ = v->dtype() == DataType::Int4;
    b.value_ = std::move(v);
    return b;
  }
  /// Packs the elements of `t` (one per byte) with the width of its dtype.
  static Bits pack(const Tensor& t) {
    const int nbits = dtype_bits(t.dtype());
    const bool sgn = t.dtype() == DataType::Int4 || t.dtype() == DataType::Int8;
    if (nbits == 8) return borrow(t, 8, sgn);
    Bits b;
    b.nbits_ = nbits;
    b.signed_ = sgn;
    const int64_t n = t.numel();
    b.own_ = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>((n * nbits + 7) / 8), 0);
    uint8_t* o = b.own_->data();
    const unsigned mask = (1u << nbits) - 1;
    for (int64_t i = 0; i < n; ++i) {
      const unsigned v = t.bytes()[i] & mask;
      const int64_t bit = i * nbits;
      o[bit >> 3] = static_cast<uint8_t>(o[bit >> 3] | (v << (bit & 7)));
      if ((bit & 7) + nbits > 8)
        o[(bit >> 3) + 1] = static_cast<uint8_t>(o[(bit >> 3) + 1] | (v >> (8 - (bit & 7))));
    }
    b.p_ = o;
    b.nbytes_ = b.own_->size();
    return b;
  }
  /// Element i.
  int32_t get(int64_t i) const {
    unsigned v;
    if (nbits_ == 8) {
      v = p_[i];
    } else if (nbits_ == 4) {
      v = (p_[i >> 1] >> ((i & 1) * 4)) & 15u;
    } else {
      const int64_t bit = i * nbits_;
      const int off = static_cast<int>(bit & 7);
      v = p_[bit >> 3] >> off;
      if (off + nbits_ > 8) v |= static_cast<unsigned>(p_[(bit >> 3) + 1]) << (8 - off);
      v &= (1u << nbits_) - 1;
    }
    int32_t r = static_cast<int32_t>(v);
    if (signed_ && (v >> (nbits_ - 1)) & 1u) r -= 1 << nbits_;
    return r;
  }
  /// Unsigned elements [first, first + n) looked up in `table` of `size` entries (a fast path
  /// for 4-bit indices).
  void lookup(int64_t first, int64_t n, const float* table, int64_t size, float* out) const {
    int64_t j = 0;
    if (nbits_ == 4 && !signed_ && size >= 16) j = nibbles(first, n, table, out);
    for (; j < n; ++j) out[j] = table[get(first + j)];
  }
  /// Elements [first, first + n) as floats.
  void to_floats(int64_t first, int64_t n, float* out) const {
    int64_t j = 0;
    if (nbits_ == 8) {
      if (signed_)
        for (; j < n; ++j) out[j] = static_cast<float>(static_cast<int8_t>(p_[first + j]));
      else
        for (; j < n; ++j) out[j] = static_cast<float>(p_[first + j]);
    } else if (nbits_ == 4) {
      static const float kU4[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
      static const float kS4[16] = {0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1};
      j = nibbles(first, n, signed_ ? kS4 : kU4, out);
    }
    for (; j < n; ++j) out[j] = static_cast<float>(get(first + j));
  }
  /// 4-bit elements [first, first + n) looked up in a table of 16 floats.
  int64_t nibbles(int64_t first, int64_t n, const float* table, float* out) const {
    int64_t j = 0;
    if (first & 1 && n > 0) out[j++] = table[p_[first >> 1] >> 4];
    const uint8_t* b = p_ + ((first + j) >> 1);
#ifdef MILKIT_VMATH_AVX2
    if (vmath::cpu_avx2_fma()) {
      const int64_t done = lookup4_avx2(b, n - j, table, out + j);
      j += done;
      b += done / 2;
    }
#endif
    for (; j + 2 <= n; j += 2, ++b) {
      out[j] = table[*b & 15u];
      out[j + 1] = table[*b >> 4];
    }
    return j;
  }
  /// The packed bytes (element 0 at bit 0).
  const uint8_t* data() const { return p_; }
  /// Bits per element.
  int nbits() const { return nbits_; }
  /// Whether elements are signed.
  bool is_signed() const { return signed_; }
  /// Elements the bytes hold.
  int64_t capacity() const { return static_cast<int64_t>(nbytes_) * 8 / nbits_; }
  /// Bytes held.
  size_t bytes() const { return nbytes_; }
  /// Whether the bytes are the plan's own (not a weight's).
  bool owned() const { return own_ != nullptr; }

 private:
  Tensor keep_;
  std::shared_ptr<const Value> value_;  // a packed constant whose bytes are borrowed
  std::shared_ptr<std::vector<uint8_t>> own_;
  const uint8_t* p_ = nullptr;
  size_t nbytes_ = 0;
  int nbits_ = 8;
  bool signed_ = false;
};

/// Every element of `t` as float (tables: LUTs, scales, offsets, zero points).
std::vector<float> floats_of(const Tensor& t) {
  std::vector<float> r(static_cast<size_t>(t.numel()));
  exec::dispatch_all(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) r[static_cast<size_t>(i)] = static_cast<float>(p[i]);
  });
  return r;
}

/// Walks flat positions of `shape` in order, tracking the element of a blockwise parameter of
/// `pshape` (each dim of shape a multiple of the param's: np.repeat semantics) they read.
class Cursor {
 public:
  Cursor() = default;
  Cursor(std::vector<int64_t> shape, std::vector<int64_t> pshape)
      : shape_(std::move(shape)), pshape_(std::move(pshape)) {
    if (shape_.empty()) shape_ = pshape_ = {1};
    ok_ = pshape_.size() == shape_.size();
    bool empty = false;
    for (size_t d = 0; ok_ && d < shape_.size(); ++d) {
      empty = empty || shape_[d] == 0;
      if (pshape_[d] <= 0 || shape_[d] % pshape_[d] != 0) ok_ = shape_[d] == 0;
    }
    if (ok_ && !empty) merge_dims();
    const size_t r = shape_.size();
    pstride_.assign(r, 1);
    block_.assign(r, 1);
    c_.assign(r, 0);
    rem_.assign(r, 0);
    for (size_t d = r; ok_ && d-- > 0;) {
      if (d + 1 < r) pstride_[d] = pstride_[d + 1] * pshape_[d + 1];
      if (pshape_[d] > 0 && shape_[d] % pshape_[d] == 0) block_[d] = shape_[d] / pshape_[d];
    }
  }
  /// Whether the param's shape divides the tensor's.
  bool ok() const { return ok_; }
  /// Moves to flat position i.
  void seek(int64_t i) {
    off_ = 0;
    for (size_t d = shape_.size(); d-- > 0;) {
      c_[d] = i % shape_[d];
      i /= shape_[d];
      rem_[d] = c_[d] % block_[d];
      off_ += (c_[d] / block_[d]) * pstride_[d];
    }
  }
  /// The param element of the current position.
  int64_t off() const { return off_; }
  /// Positions from here that read the same param element along the last dim.
  int64_t run() const { return block_.back() - rem_.back(); }
  /// Moves on by k <= run() positions.
  void advance(int64_t k) {
    size_t d = shape_.size() - 1;
    c_[d] += k;
    rem_[d] += k;
    for (;;) {
      if (rem_[d] == block_[d]) {
        rem_[d] = 0;
        off_ += pstride_[d];
      }
      if (c_[d] < shape_[d] || d == 0) return;
      c_[d] = 0;
      off_ -= pshape_[d] * pstride_[d];
      --d;
      ++c_[d];
      ++rem_[d];
    }
  }

 private:
  /// Drops dims of size 1 and merges neighbours the param reads alike (both repeated whole, or
  /// both read element by element), so that a run spans them: a conv weight [C_out, C_in, 1, 1]
  /// with a scale per output channel decodes in runs of C_in, not of 1. Flat positions and the
  /// param element of each are unchanged.
  void merge_dims() {
    std::vector<int64_t> s, p;
    for (size_t d = 0; d < shape_.size(); ++d) {
      if (shape_[d] == 1) continue;
      const bool whole = !s.empty() && p.back() == 1 && pshape_[d] == 1;
      const bool each = !s.empty() && s.back() == p.back() && shape_[d] == pshape_[d];
      if (whole || each) {
        s.back() *= shape_[d];
        p.back() *= pshape_[d];
      } else {
        s.push_back(shape_[d]);
        p.push_back(pshape_[d]);
      }
    }
    if (s.empty()) s = p = {1};
    shape_ = std::move(s);
    pshape_ = std::move(p);
  }

  std::vector<int64_t> shape_, pshape_, pstride_, block_, c_, rem_;
  int64_t off_ = 0;
  bool ok_ = true;
};

/// A blockwise parameter: its values and the cursor over the tensor it scales.
struct Param {
  std::vector<float> v;
  std::vector<int64_t> shape;
  bool present = false;
  size_t bytes() const { return v.size() * sizeof(float); }
};

Param param_of(const Tensor& t, std::vector<int64_t> pshape) {
  Param p;
  p.v = floats_of(t);
  p.shape = std::move(pshape);
  p.present = true;
  return p;
}

/// Decodes [first, first + n) in runs over which every param's element stays the same:
/// body(position, count, offsets) fills out[position - first, + count).
template <size_t N, typename Body>
void for_runs(const std::vector<int64_t>& shape, const Param* const (&ps)[N], int64_t first,
              int64_t n, Body body) {
  if (n <= 0) return;
  Cursor cs[N];
  for (size_t j = 0; j < N; ++j) {
    cs[j] = ps[j] && ps[j]->present ? Cursor(shape, ps[j]->shape)
                                    : Cursor(shape, std::vector<int64_t>(shape.size(), 1));
    cs[j].seek(first);
  }
  int64_t i = first;
  const int64_t end = first + n;
  while (i < end) {
    int64_t run = end - i;
    int64_t offs[N];
    for (size_t j = 0; j < N; ++j) {
      run = std::min(run, cs[j].run());
      offs[j] = cs[j].off();
    }
    body(i, run, offs);
    for (size_t j = 0; j < N; ++j) cs[j].advance(run);
    i += run;
  }
}

bool cursor_ok(const std::vector<int64_t>& shape, const Param& p) {
  return !p.present || Cursor(shape, p.shape).ok();
}

/// A plan constant read element by element: bit-packed integers or a float tensor.
class RawData {
 public:
  /// Nullptr-like (ok() false) for dtypes other than fp16 / fp32 and integers of 1-8 bits.
  explicit RawData(const Tensor& t) : dtype_(t.dtype()), n_(t.numel()) {
    if (float_dtype(t.dtype())) {
      t_ = t;
      ok_ = true;
    } else if (is_int(t.dtype()) && dtype_bits(t.dtype()) <= 8) {
      bits_ = Bits::pack(t);
      ok_ = true;
    }
  }
  /// A sub-byte constant held packed, read in place.
  explicit RawData(std::shared_ptr<const Value> v)
      : dtype_(v->dtype()), n_(v->numel()), bits_(Bits::borrow(std::move(v))), ok_(true) {}
  bool ok() const { return ok_; }
  DataType dtype() const { return dtype_; }
  int64_t numel() const { return n_; }
  float at(int64_t i) const {
    if (dtype_ == DataType::Float32) return t_.data<float>()[i];
    if (dtype_ == DataType::Float16) return half_to_float(t_.data<uint16_t>()[i]);
    return static_cast<float>(bits_.get(i));
  }
  /// Elements [first, first + n) as floats.
  void decode(int64_t first, int64_t n, float* out) const {
    if (dtype_ == DataType::Float32)
      std::memcpy(out, t_.data<float>() + first, static_cast<size_t>(n) * sizeof(float));
    else if (dtype_ == DataType::Float16)
      halves_to_floats(t_.data<uint16_t>() + first, out, static_cast<size_t>(n));
    else
      bits_.to_floats(first, n, out);
  }
  size_t bytes() const { return t_.defined() ? t_.nbytes() : bits_.bytes(); }
  /// The row form of the elements as they decode: fp16 rows, or integers of 8 or 4 bits.
  RowForm row_form(const std::vector<int64_t>& shape) const {
    RowForm f;
    if (dtype_ == DataType::Float16) {
      f.kind = RowForm::Kind::Half;
      f.half = t_.data<uint16_t>();
    } else if (!t_.defined() && (bits_.nbits() == 8 || bits_.nbits() == 4) && !shape.empty()) {
      int64_t k = 1;
      for (size_t d = 1; d < shape.size(); ++d) k *= shape[d];
      if (bits_.nbits() == 4 && k % 2 != 0) return f;
      f.kind = bits_.nbits() == 8 ? RowForm::Kind::Int8 : RowForm::Kind::Int4;
      f.ints = bits_.data();
      f.is_signed = bits_.is_signed();
    }
    return f;
  }

 private:
  DataType dtype_;
  int64_t n_;
  Tensor t_;
  Bits bits_;
  bool ok_ = false;
};

/// A plain constant read in place: the data of a blockwise_shift_scale, the source of a
/// constexpr_cast, or a float weight mapped from the weight file (in_place_weight).
class RawNode : public PackedWeight {
 public:
  explicit RawNode(const Tensor& t) : PackedWeight(t.dtype(), t.shape()), d_(t) {}
  /// A sub-byte constant held packed.
  explicit RawNode(const std::shared_ptr<const Value>& v)
      : PackedWeight(v->dtype(), v->shape()), d_(v) {}
  bool ok() const { return d_.ok(); }
  void decode(int64_t first, int64_t n, float* out) const override { d_.decode(first, n, out); }
  RowForm row_form() const override { return d_.row_form(shape()); }
  size_t packed_bytes() const override { return d_.bytes(); }

 private:
  RawData d_;
};

/// The Lut4 row form of 4-bit unsigned indices `idx` over a tensor of `shape` whose tables vary
/// only along axis 0 (`tables_along_0` of them, `stride` floats apart); None when rows are not
/// byte-aligned.
RowForm lut4_rows(const std::vector<int64_t>& shape, const Bits& idx, const float* tables,
                  int64_t stride, int64_t tables_along_0) {
  RowForm f;
  if (shape.empty() || idx.nbits() != 4 || idx.is_signed() || shape[0] <= 0 ||
      tables_along_0 <= 0 || shape[0] % tables_along_0 != 0)
    return f;
  int64_t k = 1;
  for (size_t d = 1; d < shape.size(); ++d) k *= shape[d];
  if (k % 2 != 0) return f;
  f.kind = RowForm::Kind::Lut4;
  f.nibbles = idx.data();
  f.tables = tables;
  f.table_stride = stride;
  f.rows_per_table = shape[0] / tables_along_0;
  return f;
}

/// iOS16 constexpr_lut_to_dense: a flat table of 2^nbits entries, indices packed in bytes.
class Lut16Node : public PackedWeight {
 public:
  Lut16Node(DataType dt, std::vector<int64_t> shape, Bits idx, std::vector<float> lut)
      : PackedWeight(dt, std::move(shape)), idx_(std::move(idx)), lut_(std::move(lut)) {}
  void decode(int64_t first, int64_t n, float* out) const override {
    for (int64_t i = 0; i < n; ++i) out[i] = lut_[static_cast<size_t>(idx_.get(first + i))];
  }
  RowForm row_form() const override {
    if (lut_.size() < 16 || shape().empty()) return {};
    return lut4_rows(shape(), idx_, lut_.data(), 0, 1);
  }
  size_t packed_bytes() const override { return idx_.bytes() + lut_.size() * sizeof(float); }

 private:
  Bits idx_;
  std::vector<float> lut_;
};

/// iOS18 constexpr_lut_to_dense with scalar entries: a table of `palettes` values per block.
class Lut18Node : public PackedWeight {
 public:
  Lut18Node(DataType dt, std::vector<int64_t> shape, Bits idx, Param lut, int64_t palettes)
      : PackedWeight(dt, std::move(shape)),
        idx_(std::move(idx)),
        lut_(std::move(lut)),
        palettes_(palettes) {}
  void decode(int64_t first, int64_t n, float* out) const override {
    const Param* ps[1] = {&lut_};
    for_runs<1>(shape(), ps, first, n, [&](int64_t i, int64_t run, const int64_t* offs) {
      const float* table = lut_.v.data() + offs[0] * palettes_;
      float* o = out + (i - first);
      idx_.lookup(i, run, table, palettes_, o);
    });
  }
  RowForm row_form() const override {
    // one table per group of rows: the table's blocks vary along axis 0 only
    const std::vector<int64_t>& b = lut_.shape;
    if (palettes_ < 16 || b.size() != shape().size() || b.empty()) return {};
    for (size_t d = 1; d < b.size(); ++d)
      if (b[d] != 1) return {};
    return lut4_rows(shape(), idx_, lut_.v.data(), palettes_, b[0]);
  }
  size_t packed_bytes() const override { return idx_.bytes() + lut_.bytes(); }

 private:
  Bits idx_;
  Param lut_;  // values [blocks..., palettes] flattened; cursor over the blocks
  int64_t palettes_;
};

/// iOS16 constexpr_affine_dequantize: (q - zero_point) * scale in fp32, rounded to the dtype.
class AffineNode : public PackedWeight {
 public:
  AffineNode(DataType dt, std::vector<int64_t> shape, Bits q, Param zp, Param sc)
      : PackedWeight(dt, std::move(shape)),
        q_(std::move(q)),
        zp_(std::move(zp)),
        sc_(std::move(sc)) {}
  void decode(int64_t first, int64_t n, float* out) const override {
    const Param* ps[2] = {&zp_, &sc_};
    const DataType dt = dtype();
    for_runs<2>(shape(), ps, first, n, [&](int64_t i, int64_t run, const int64_t* offs) {
      const float z = zp_.v[static_cast<size_t>(offs[0])], s = sc_.v[static_cast<size_t>(offs[1])];
      float* o = out + (i - first);
      for (int64_t j = 0; j < run; ++j)
        o[j] = round_to(dt, (static_cast<float>(q_.get(i + j)) - z) * s);
    });
  }
  size_t packed_bytes() const override { return q_.bytes() + zp_.bytes() + sc_.bytes(); }

 private:
  Bits q_;
  Param zp_, sc_;
};

/// iOS18 constexpr_blockwise_shift_scale: (data - offset) * scale, in the scale's dtype with
/// numpy's fp16 rounding after each step.
class ShiftScaleNode : public PackedWeight {
 public:
  ShiftScaleNode(DataType dt, std::shared_ptr<const PackedWeight> src, DataType sdt, Param sc,
                 Param off)
      : PackedWeight(dt, src->shape()),
        src_(std::move(src)),
        sdt_(sdt),
        sc_(std::move(sc)),
        off_(std::move(off)) {
    for (float v : off_.v) off_rounded_.push_back(round_to(sdt_, v));
  }
  RowForm row_form() const override {
    RowForm f = src_->row_form();
    const bool ints = f.kind == RowForm::Kind::Int8 || f.kind == RowForm::Kind::Int4;
    // rows of axis 0, K = the other dims' product (a conv weight [C_out, C_in, kh, kw]): scales
    // in blocks of axis 0 and axis 1 only, so that a block of axis 1 is a run of each row
    const std::vector<int64_t>& sh = shape();
    if (!ints || f.scales || sh.size() < 2 || sc_.shape.size() != sh.size()) return {};
    for (size_t d = 2; d < sh.size(); ++d)
      if (sc_.shape[d] != 1) return {};
    if (off_.present && off_.shape != sc_.shape) return {};
    int64_t K = 1;
    for (size_t d = 1; d < sh.size(); ++d) K *= sh[d];
    const int64_t N = sh[0], Ns = sc_.shape[0], Ks = sc_.shape[1];
    if (N <= 0 || K <= 0 || Ns <= 0 || Ks <= 0 || N % Ns != 0 || K % Ks != 0) return {};
    const int64_t cols = K / Ks;
    int shift = 62;  // one scale per row: every column's block is 0
    if (Ks > 1) {
      if (cols % 8 != 0 || (cols & (cols - 1)) != 0) return {};  // 8 lanes share a scale
      shift = 0;
      while ((int64_t{1} << shift) < cols) ++shift;
    }
    const bool half = sdt_ == DataType::Float16;
    f.scales = sc_.v.data();
    f.offsets = off_.present ? off_rounded_.data() : nullptr;
    f.rows_per_scale = N / Ns;
    f.cols_shift = shift;
    f.scale_stride = Ks;
    f.round_diff = half && off_.present;
    f.round_out = half || dtype() == DataType::Float16;
    return f;
  }
  // Each step rounds to the scale's dtype (then the output's): whole passes over the range.
  void decode(int64_t first, int64_t n, float* out) const override {
    src_->decode(first, n, out);
    const Param* ps[2] = {&sc_, &off_};
    const bool half = sdt_ == DataType::Float16, has_off = off_.present;
    // integers of 8 bits or fewer are fp16 values already
    if (half && !(is_int(src_->dtype()) && dtype_bits(src_->dtype()) <= 8)) round_to_half(out, n);
    if (has_off) {
      for_runs<2>(shape(), ps, first, n, [&](int64_t i, int64_t run, const int64_t* offs) {
        const float o = round_to(sdt_, off_.v[static_cast<size_t>(offs[1])]);
        float* p = out + (i - first);
        for (int64_t j = 0; j < run; ++j) p[j] -= o;
      });
      if (half) round_to_half(out, n);
    }
    for_runs<2>(shape(), ps, first, n, [&](int64_t i, int64_t run, const int64_t* offs) {
      const float s = sc_.v[static_cast<size_t>(offs[0])];
      float* p = out + (i - first);
      for (int64_t j = 0; j < run; ++j) p[j] *= s;
    });
    if (half || dtype() == DataType::Float16) round_to_half(out, n);
  }
  size_t packed_bytes() const override { return src_->packed_bytes() + sc_.bytes() + off_.bytes(); }

 private:
  std::shared_ptr<const PackedWeight> src_;
  DataType sdt_;
  Param sc_, off_;
  std::vector<float> off_rounded_;  // the offsets in the scale's dtype
};

/// constexpr_sparse_to_dense: a bit mask and the values of its set bits, with a running count
/// of set bits every kChunk positions to start decoding anywhere.
class SparseNode : public PackedWeight {
 public:
  static constexpr int64_t kChunk = 256;
  SparseNode(DataType dt, std::vector<int64_t> shape, Bits mask, RawData nz)
      : PackedWeight(dt, std::move(shape)), mask_(std::move(mask)), nz_(std::move(nz)) {
    int64_t j = 0;
    for (int64_t i = 0; i < numel(); ++i) {
      if (i % kChunk == 0) before_.push_back(j);
      j += mask_.get(i) != 0;
    }
    set_ = j;
  }
  /// Set bits of the mask.
  int64_t set_bits() const { return set_; }
  void decode(int64_t first, int64_t n, float* out) const override {
    if (n <= 0) return;
    const int64_t c = first / kChunk;
    int64_t j = before_[static_cast<size_t>(c)];
    for (int64_t i = c * kChunk; i < first; ++i) j += mask_.get(i) != 0;
    for (int64_t i = 0; i < n; ++i) out[i] = mask_.get(first + i) ? nz_.at(j++) : 0.0f;
  }
  size_t packed_bytes() const override {
    return mask_.bytes() + nz_.bytes() + before_.size() * sizeof(int64_t);
  }

 private:
  Bits mask_;
  RawData nz_;
  std::vector<int64_t> before_;
  int64_t set_ = 0;
};

/// A float cast of a packed tensor (constexpr_cast, or the cast add_fp16_cast puts after a
/// constexpr op): each value rounded to the new dtype.
class CastNode : public PackedWeight {
 public:
  CastNode(DataType dt, std::shared_ptr<const PackedWeight> src)
      : PackedWeight(dt, src->shape()), src_(std::move(src)) {}
  void decode(int64_t first, int64_t n, float* out) const override {
    src_->decode(first, n, out);
    if (dtype() == DataType::Float16) round_to_half(out, n);
  }
  RowForm row_form() const override {
    // widening, or fp16 to fp16: every value stays what the source decodes
    if (dtype() == DataType::Float32 || src_->dtype() == DataType::Float16) return src_->row_form();
    return {};
  }
  size_t packed_bytes() const override { return src_->packed_bytes(); }

 private:
  std::shared_ptr<const PackedWeight> src_;
};

}  // namespace

// ---- building the stages from the ops
// ------------------------------------------------------------

namespace {

using Input = std::function<PackedInput(std::string_view)>;
using Packed = std::shared_ptr<const PackedWeight>;

/// A packed source from an input: its upstream stage, or the constant read as is.
Packed source_of(const PackedInput& in) {
  if (in.packed) return in.packed;
  if (in.bits) return std::make_shared<RawNode>(in.bits);
  if (!in.tensor || !in.tensor->defined()) return nullptr;
  auto raw = std::make_shared<RawNode>(*in.tensor);
  return raw->ok() ? raw : nullptr;
}

/// Integers of a small constant input (shape, axis).
bool ints_of(const PackedInput& in, std::vector<int64_t>& out) {
  if (!in.tensor || !in.tensor->defined() || !is_int(in.tensor->dtype())) return false;
  out.clear();
  for (int64_t i = 0; i < in.tensor->numel(); ++i)
    out.push_back(static_cast<int64_t>(in.tensor->get(i)));
  return true;
}

/// iOS18 constexpr_lut_to_dense over indices still packed in their buffer (a loaded or compressed
/// weight): read in place, never unpacked.
Packed pack_lut_packed(DataType dt, const Tensor& L, const std::shared_ptr<const Value>& idx) {
  const int K = idx->rank();
  if (L.rank() != K + 2 || L.shape()[K + 1] != 1) return nullptr;
  const int64_t palettes = L.shape()[K];
  // every index of this width is in the table (else the plan-time kernel reports the bad ones)
  if (idx->dtype() == DataType::Int4 || (int64_t{1} << idx->buffer()->bit_width()) > palettes)
    return nullptr;
  Param p = param_of(L, std::vector<int64_t>(L.shape().begin(), L.shape().begin() + K));
  if (!cursor_ok(idx->shape(), p)) return nullptr;
  return std::make_shared<Lut18Node>(dt, idx->shape(), Bits::borrow(idx), std::move(p), palettes);
}

Packed pack_lut(DataType dt, const Input& input) {
  PackedInput lut = input("lut"), idx = input("indices"), shape_in = input("shape");
  if (!lut.tensor || lut.packed || idx.packed) return nullptr;
  const Tensor& L = *lut.tensor;
  if (L.dtype() != dt) return nullptr;
  if (idx.bits && !shape_in.tensor) return pack_lut_packed(dt, L, idx.bits);
  if (!idx.tensor) return nullptr;
  const Tensor& I = *idx.tensor;
  if (shape_in.tensor) {  // iOS16: a flat table, indices packed in uint8 bytes
    std::vector<int64_t> shape;
    if (!ints_of(shape_in, shape) || I.dtype() != DataType::UInt8) return nullptr;
    int64_t n = 1;
    for (int64_t d : shape) n = d < 0 ? -1 : n * d;
    int nbits = 0;
    while ((int64_t{1} << nbits) < L.numel()) ++nbits;
    if (n < 0 || nbits < 1 || nbits > 8 || (int64_t{1} << nbits) != L.numel()) return nullptr;
    Bits bits = Bits::borrow(I, nbits, false);
    if (bits.capacity() < n) return nullptr;
    return std::make_shared<Lut16Node>(dt, shape, std::move(bits), floats_of(L));
  }
  const int K = I.rank();
  if (L.rank() != K + 2 || L.shape()[K + 1] != 1 || !is_int(I.dtype()) || dtype_bits(I.dtype()) > 8)
    return nullptr;
  const int64_t palettes = L.shape()[K];
  for (int64_t i = 0; i < I.numel(); ++i)
    if (I.bytes()[i] >= palettes) return nullptr;  // the plan-time kernel reports it
  Param p = param_of(L, std::vector<int64_t>(L.shape().begin(), L.shape().begin() + K));
  if (!cursor_ok(I.shape(), p)) return nullptr;
  return std::make_shared<Lut18Node>(dt, I.shape(), Bits::pack(I), std::move(p), palettes);
}

/// coremltools' promote_rank_to_same_as_data for an affine_dequantize param.
std::vector<int64_t> promoted_shape(const Tensor& p, int64_t rank, int64_t axis) {
  if (p.rank() == rank) return p.shape();
  std::vector<int64_t> s(static_cast<size_t>(rank), 1);
  if (p.rank() == 1) s[static_cast<size_t>(axis)] = p.shape()[0];
  return s;
}

Packed pack_affine(DataType dt, const Input& input) {
  PackedInput q = input("quantized_data"), zp = input("zero_point"), sc = input("scale"),
              ax = input("axis");
  std::vector<int64_t> axv;
  if (!q.tensor || !zp.tensor || !sc.tensor || q.packed || zp.packed || sc.packed ||
      !ints_of(ax, axv) || axv.size() != 1)
    return nullptr;
  const Tensor& Q = *q.tensor;
  const int64_t rank = Q.rank();
  int64_t axis = axv[0] < 0 ? axv[0] + rank : axv[0];
  if (axis < 0 || axis >= rank || dtype_bits(Q.dtype()) != 8 || !is_int(Q.dtype())) return nullptr;
  for (const Tensor* t : {zp.tensor, sc.tensor})
    if (t->numel() != 1 && t->rank() == 1 && t->shape()[0] != Q.shape()[static_cast<size_t>(axis)])
      return nullptr;
  Param z = param_of(*zp.tensor, promoted_shape(*zp.tensor, rank, axis));
  Param s = param_of(*sc.tensor, promoted_shape(*sc.tensor, rank, axis));
  if (!cursor_ok(Q.shape(), z) || !cursor_ok(Q.shape(), s)) return nullptr;
  return std::make_shared<AffineNode>(
      dt, Q.shape(), Bits::borrow(Q, 8, Q.dtype() == DataType::Int8), std::move(z), std::move(s));
}

Packed pack_shift_scale(DataType dt, const Input& input) {
  Packed src = source_of(input("data"));
  PackedInput sc = input("scale"), off = input("offset");
  if (!src || !sc.tensor || sc.packed || off.packed || !float_dtype(sc.tensor->dtype()))
    return nullptr;
  if (static_cast<size_t>(sc.tensor->rank()) != src->shape().size()) return nullptr;
  Param s = param_of(*sc.tensor, sc.tensor->shape()), o;
  if (off.tensor) o = param_of(*off.tensor, off.tensor->shape());
  if (!cursor_ok(src->shape(), s) || !cursor_ok(src->shape(), o)) return nullptr;
  return std::make_shared<ShiftScaleNode>(dt, std::move(src), sc.tensor->dtype(), std::move(s),
                                          std::move(o));
}

Packed pack_sparse(DataType dt, const Input& input) {
  PackedInput nz = input("nonzero_data"), mask = input("mask"), shape_in = input("shape");
  if (!nz.tensor || !mask.tensor || nz.packed || mask.packed || nz.tensor->dtype() != dt)
    return nullptr;
  RawData values(*nz.tensor);
  if (!values.ok()) return nullptr;
  std::vector<int64_t> shape;
  Bits bits;
  if (shape_in.tensor) {  // iOS16: the mask packed LSB first in uint8 bytes
    if (!ints_of(shape_in, shape) || mask.tensor->dtype() != DataType::UInt8) return nullptr;
    bits = Bits::borrow(*mask.tensor, 1, false);
  } else {
    if (mask.tensor->dtype() != DataType::UInt1) return nullptr;
    shape = mask.tensor->shape();
    bits = Bits::pack(*mask.tensor);
  }
  int64_t n = 1;
  for (int64_t d : shape) n = d < 0 ? -1 : n * d;
  if (n < 0 || bits.capacity() < n) return nullptr;
  auto node = std::make_shared<SparseNode>(dt, shape, std::move(bits), std::move(values));
  return node->set_bits() == nz.tensor->numel() ? node : nullptr;
}

Packed pack_cast(DataType dt, const PackedInput& src_in, bool need_packed) {
  if (need_packed && !src_in.packed) return nullptr;
  Packed src = source_of(src_in);
  if (!src) return nullptr;
  const DataType from = src->dtype();
  if (!float_dtype(from) && !(is_int(from) && dtype_bits(from) <= 8)) return nullptr;
  return std::make_shared<CastNode>(dt, std::move(src));
}

}  // namespace

const Tensor& weight_tensor(const KernelCtx& k, std::string_view name, Tensor& keep) {
  const PackedWeight* pw = k.packed(name);
  if (!pw) return k.in(name);
  keep = exec::widened(*pw);
  return keep;
}

std::shared_ptr<const PackedWeight> in_place_weight(const Tensor& t) {
  if (!t.defined() || !float_dtype(t.dtype())) return nullptr;
  return std::make_shared<RawNode>(t);  // a float constant, read (and widened) in place
}

bool packable_op_type(const std::string& t) {
  return t == "constexpr_lut_to_dense" || t == "constexpr_affine_dequantize" ||
         t == "constexpr_blockwise_shift_scale" || t == "constexpr_sparse_to_dense" ||
         t == "constexpr_cast" || t == "cast";
}

std::shared_ptr<const PackedWeight> pack_op(const Operation& op, const Input& input) {
  if (op.outputs().size() != 1) return nullptr;
  const Type* ty = op.output(0)->type();
  if (!ty->is_tensor() || !ty->has_rank()) return nullptr;
  const DataType dt = ty->dtype();
  if (!float_dtype(dt) && !(is_int(dt) && dtype_bits(dt) <= 8)) return nullptr;
  std::vector<int64_t> shape;
  for (Dim d : ty->shape()) {
    if (!d->is_const()) return nullptr;
    shape.push_back(d->value());
  }
  const std::string& t = op.op_type();
  Packed r;
  if (t == "constexpr_lut_to_dense")
    r = pack_lut(dt, input);
  else if (t == "constexpr_affine_dequantize")
    r = pack_affine(dt, input);
  else if (t == "constexpr_blockwise_shift_scale")
    r = pack_shift_scale(dt, input);
  else if (t == "constexpr_sparse_to_dense")
    r = pack_sparse(dt, input);
  else if (t == "constexpr_cast")
    r = float_dtype(dt) ? pack_cast(dt, input("source_val"), false) : nullptr;
  else if (t == "cast")
    r = float_dtype(dt) ? pack_cast(dt, input("x"), true) : nullptr;
  if (!r || r->shape() != shape || r->dtype() != dt) return nullptr;
  return r;
}

}  // namespace milkit
