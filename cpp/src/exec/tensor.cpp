// Run-time tensors.
#include "milkit/exec/tensor.h"

#include <stdlib.h>  // posix_memalign

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <vector>

#include "dispatch.h"
#include "milkit/exec/threads.h"
#include "milkit/types/error.h"
#include "weight_cache.h"

namespace milkit {

namespace {

/// Buffers of at least this many bytes are kept for reuse when freed (glibc hands out blocks
/// of 128 KB or more as fresh pages from mmap, each page faulted in again on first touch).
constexpr size_t kCachedMin = 64 * 1024;

/// Large tensor buffers freed by one op or run, kept for the next allocation of their size or a
/// little less: a model's activations recur at the same sizes run after run. Within
/// MILKIT_BUFFER_CACHE_MB (read once; default 256, 0 keeps none) and the largest live set of a
/// run so far, the least recently freed go first. Off under AddressSanitizer, which would then miss
/// uses after free.
class BufferCache {
 public:
  static BufferCache& instance() {
    static BufferCache* c = new BufferCache();  // never destroyed: tensors may outlive statics
    return *c;
  }
  /// The smallest cached block of `n` bytes or more (and at most 2n), or nullptr; `*got` its
  /// size. Taking larger blocks too keeps the cache near the largest live set when a model's
  /// activations come in many sizes (an exact-size cache held one block of every size).
  void* take(size_t n, size_t* got) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t best = blocks_.size();
    for (size_t i = 0; i < blocks_.size(); ++i) {
      const size_t b = blocks_[i].bytes;
      if (b >= n && b <= 2 * n && (best == blocks_.size() || b < blocks_[best].bytes)) best = i;
    }
    if (best == blocks_.size()) return nullptr;
    void* p = blocks_[best].p;
    *got = blocks_[best].bytes;
    blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(best));
    held_ -= *got;
    return p;
  }
  /// Keeps at most `bytes` (the largest live set of a run so far) from now on.
  void bound(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    run_peak_ = std::max(run_peak_, bytes);
  }
  /// Bytes of the blocks kept now.
  size_t held() {
    std::lock_guard<std::mutex> lock(mu_);
    return held_;
  }
  /// Keeps block `p` of `n` bytes, freeing the oldest kept ones beyond the limit (or `p`).
  void give(void* p, size_t n) {
    std::vector<void*> drop;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const size_t limit = std::min(limit_, run_peak_);
      if (n > limit) {
        drop.push_back(p);
      } else {
        blocks_.push_back({p, n});
        held_ += n;
        size_t k = 0;
        while (held_ > limit) {
          held_ -= blocks_[k].bytes;
          drop.push_back(blocks_[k++].p);
        }
        blocks_.erase(blocks_.begin(), blocks_.begin() + static_cast<std::ptrdiff_t>(k));
      }
    }
    for (void* q : drop) std::free(q);
  }

 private:
  BufferCache() : limit_(exec::env_megabytes("MILKIT_BUFFER_CACHE_MB", size_t{256} << 20)) {}
  struct Block {
    void* p;
    size_t bytes;
  };
  std::mutex mu_;
  std::vector<Block> blocks_;  // oldest first
  size_t held_ = 0;
  size_t limit_ = 0;
  // the largest live set of any run so far: the cache holds no more than that, so a run's peak
  // memory stays within twice its activations (an unbounded cache held a block of every size)
  size_t run_peak_ = 0;
};

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCacheBuffers = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kCacheBuffers = false;
#else
constexpr bool kCacheBuffers = true;
#endif
#else
constexpr bool kCacheBuffers = true;
#endif

std::shared_ptr<const void> aligned_storage(size_t bytes, uint8_t** out) {
  size_t n = (bytes + 63) / 64 * 64;
  if (n == 0) n = 64;
  const bool cached = kCacheBuffers && n >= kCachedMin;
  if (cached) n = (n + 4095) / 4096 * 4096;
  void* p = cached ? BufferCache::instance().take(n, &n) : nullptr;
  // posix_memalign rather than std::aligned_alloc: macOS's libc++ declares the latter only when
  // targeting macOS 10.15 or later
  if (!p && ::posix_memalign(&p, 64, n) != 0)
    throw ValueError("out of memory allocating a tensor of " + std::to_string(bytes) + " bytes");
  *out = static_cast<uint8_t*>(p);
  if (cached)
    return std::shared_ptr<const void>(
        p, [n](const void* q) { BufferCache::instance().give(const_cast<void*>(q), n); });
  return std::shared_ptr<const void>(p, [](const void* q) { std::free(const_cast<void*>(q)); });
}

}  // namespace

size_t buffer_cache_bytes() { return kCacheBuffers ? BufferCache::instance().held() : 0; }

void buffer_cache_bound(size_t live_peak) {
  if (kCacheBuffers) BufferCache::instance().bound(live_peak);
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) s += ",";
  return s + ")";
}

Tensor Tensor::empty(DataType dt, std::vector<int64_t> shape) {
  if (dt == DataType::String || dt == DataType::Unused)
    throw TypeError("cannot make a run-time tensor of dtype " + std::string(dtype_name(dt)));
  Tensor t;
  t.dtype_ = dt;
  t.numel_ = shape_numel(shape);
  t.shape_ = std::move(shape);
  t.holder_ = aligned_storage(t.nbytes(), &t.data_);
  return t;
}

Tensor Tensor::list(std::shared_ptr<const TensorList> items) {
  Tensor t;
  t.list_ = items ? std::move(items) : std::make_shared<const TensorList>();
  return t;
}

Tensor Tensor::strings(std::vector<int64_t> shape, std::vector<std::string> s) {
  Tensor t;
  t.dtype_ = DataType::String;
  t.numel_ = shape_numel(shape);
  if (static_cast<size_t>(t.numel_) != s.size())
    throw ValueError("a string tensor of shape " + shape_str(shape) + " needs " + std::to_string(t.numel_) +
                     " strings, got " + std::to_string(s.size()));
  t.shape_ = std::move(shape);
  t.strings_ = std::make_shared<const std::vector<std::string>>(std::move(s));
  return t;
}

const std::vector<std::string>& Tensor::string_values() const {
  static const std::vector<std::string> kNone;
  return strings_ ? *strings_ : kNone;
}

Tensor Tensor::dict(Tensor keys, Tensor values) {
  if (keys.rank() != 1 || values.rank() != 1 || keys.numel() != values.numel())
    throw ValueError("a dictionary needs rank-1 keys and values of one length, got " + keys.describe() + " and " +
                     values.describe());
  Tensor t;
  t.list_ = std::make_shared<const TensorList>(TensorList{std::move(keys), std::move(values)});
  t.dict_ = true;
  return t;
}

const Tensor& Tensor::dict_keys() const {
  if (!dict_) throw TypeError("not a dictionary value");
  return (*list_)[0];
}

const Tensor& Tensor::dict_values() const {
  if (!dict_) throw TypeError("not a dictionary value");
  return (*list_)[1];
}

const TensorList& Tensor::items() const {
  static const TensorList kEmpty;
  return list_ ? *list_ : kEmpty;
}

Tensor Tensor::zeros(DataType dt, std::vector<int64_t> shape) {
  Tensor t = empty(dt, std::move(shape));
  std::memset(t.data_, 0, t.nbytes());
  return t;
}

Tensor Tensor::borrow(DataType dt, std::vector<int64_t> shape, const void* data,
                      std::shared_ptr<const void> owner) {
  Tensor t;
  t.dtype_ = dt;
  t.numel_ = shape_numel(shape);
  t.shape_ = std::move(shape);
  t.data_ = static_cast<uint8_t*>(const_cast<void*>(data));
  t.holder_ = std::move(owner);
  t.borrowed_ = true;
  return t;
}

Tensor Tensor::from_value(const Value& v) {
  if (v.dtype() == DataType::String) return strings(v.shape(), v.string_values());
  if (v.is_symbolic()) throw ValueError("a symbolic value is not a run-time tensor");
  auto buf = v.buffer();
  const uint8_t* p = buf ? buf->data() : nullptr;
  static const uint8_t kEmpty[64] = {};
  if (!p) p = kEmpty;
  return borrow(v.dtype(), v.shape(), p, buf);
}

Tensor Tensor::scalar(DataType dt, double v) {
  Tensor t = empty(dt, {});
  exec::store_double(dt, t.data_, 0, v);
  return t;
}

Tensor Tensor::reshaped(std::vector<int64_t> shape) const {
  if (shape_numel(shape) != numel_)
    throw ValueError("cannot view a tensor of shape " + shape_str(shape_) + " as " + shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Value Tensor::to_value() const {
  if (dict_) throw TypeError("a dictionary is not a compile-time value");
  if (dtype_ == DataType::String) return Value::strings(shape_, string_values());
  return Value(dtype_, shape_, Buffer::copy(data_, nbytes()));
}

double Tensor::get(int64_t i) const { return exec::load_double(dtype_, data_, i); }

std::string Tensor::describe() const {
  return shape_str(shape_) + " " + std::string(dtype_name(dtype_));
}

/// Elements per part of a parallel fp16 <-> fp32 conversion.
constexpr int64_t kCastGrain = 32768;

Tensor cast_tensor(const Tensor& t, DataType to) {
  if (t.dtype() == to) return t;
  Tensor out = Tensor::empty(to, t.shape());
  int64_t n = t.numel();
  // fp16 <-> fp32 across the pool: an fp16 program converts tensors between steps, and one
  // thread doing it alone was a serial part of each run (ViT-B/16's attention products read
  // 2.8 ms of converted arguments per run)
  if (t.dtype() == DataType::Float16 && to == DataType::Float32) {
    const uint16_t* src = t.data<uint16_t>();
    float* dst = out.mutable_data<float>();
    parallel_for(n, kCastGrain, [&](int64_t b, int64_t e) {
      halves_to_floats(src + b, dst + b, static_cast<size_t>(e - b));
    });
    return out;
  }
  if (t.dtype() == DataType::Float32 && to == DataType::Float16) {
    const float* src = t.data<float>();
    uint16_t* dst = out.mutable_data<uint16_t>();
    parallel_for(n, kCastGrain, [&](int64_t b, int64_t e) {
      floats_to_halves(src + b, dst + b, static_cast<size_t>(e - b));
    });
    return out;
  }
  exec::dispatch_all(t.dtype(), [&](auto src_tag) {
    using S = typename decltype(src_tag)::type;
    exec::dispatch_all(to, [&](auto dst_tag) {
      using D = typename decltype(dst_tag)::type;
      const S* s = reinterpret_cast<const S*>(t.bytes());
      D* d = reinterpret_cast<D*>(out.mutable_bytes());
      for (int64_t i = 0; i < n; ++i) d[i] = exec::convert<D>(s[i]);
    });
  });
  return out;
}

}  // namespace milkit
