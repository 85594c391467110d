// Blob storage v2: streaming writer and memory-mapped, validating reader.
#include "milkit/serde/blob.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>

#include "full_fsync.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

constexpr uint32_t kSentinel = 0xDEADBEEF;
constexpr uint32_t kVersion = 2;
constexpr uint64_t kAlign = 64;
constexpr size_t kStage = 1 << 20;  // staging buffer bound

uint64_t align_up(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

uint32_t blob_dtype_code(DataType t) {
  switch (t) {
    case DataType::Float16:
      return 1;
    case DataType::Float32:
      return 2;
    case DataType::UInt8:
      return 3;
    case DataType::Int8:
      return 4;
    case DataType::BFloat16:
      return 5;
    case DataType::Int16:
      return 6;
    case DataType::UInt16:
      return 7;
    case DataType::Int4:
      return 8;
    case DataType::UInt1:
      return 9;
    case DataType::UInt2:
      return 10;
    case DataType::UInt4:
      return 11;
    case DataType::UInt3:
      return 12;
    case DataType::UInt6:
      return 13;
    case DataType::Int32:
      return 14;
    case DataType::UInt32:
      return 15;
    case DataType::Float8E4M3FN:
      return 16;
    case DataType::Float8E5M2:
      return 17;
    default:
      return 0;
  }
}

DataType dtype_from_blob_code(uint32_t code) {
  static const DataType table[] = {DataType::Unused, DataType::Float16,      DataType::Float32,
                                   DataType::UInt8,  DataType::Int8,         DataType::BFloat16,
                                   DataType::Int16,  DataType::UInt16,       DataType::Int4,
                                   DataType::UInt1,  DataType::UInt2,        DataType::UInt4,
                                   DataType::UInt3,  DataType::UInt6,        DataType::Int32,
                                   DataType::UInt32, DataType::Float8E4M3FN, DataType::Float8E5M2};
  return code < sizeof(table) / sizeof(table[0]) ? table[code] : DataType::Unused;
}

void pack_sub_byte(const uint8_t* in, size_t n, int bits, uint8_t* out) {
  pack_bits(in, n, bits, out);
}

void unpack_sub_byte(const uint8_t* in, size_t n, int bits, bool is_signed, uint8_t* out) {
  unpack_bits(in, 0, n, bits, is_signed, out);
}

// ---- BlobWriter -------------------------------------------------------------------------------

BlobWriter::BlobWriter(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw IOError("cannot create weight file '" + path_ + "': " + errno_text());
  uint8_t header[64] = {};
  put_u32(header + 4, kVersion);
  put(header, sizeof header);
}

BlobWriter::~BlobWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void BlobWriter::flush() {
  size_t done = 0;
  while (done < buf_.size()) {
    ssize_t w = ::write(fd_, buf_.data() + done, buf_.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw IOError("cannot write weight file '" + path_ + "': " + errno_text());
    }
    done += static_cast<size_t>(w);
  }
  buf_.clear();
}

void BlobWriter::put(const void* data, size_t n) {
  if (fd_ < 0) throw IOError("weight file '" + path_ + "' is closed");
  if (buf_.size() + n <= kStage) {
    buf_.append(static_cast<const char*>(data), n);
  } else {
    flush();
    const char* p = static_cast<const char*>(data);
    size_t done = 0;
    while (done < n) {  // large payloads go straight from the value's memory to the file
      ssize_t w = ::write(fd_, p + done, n - done);
      if (w < 0) {
        if (errno == EINTR) continue;
        throw IOError("cannot write weight file '" + path_ + "': " + errno_text());
      }
      done += static_cast<size_t>(w);
    }
  }
  end_ += n;
}

void BlobWriter::write_at(uint64_t off, const void* data, size_t n) {
  flush();
  if (::pwrite(fd_, data, n, static_cast<off_t>(off)) != static_cast<ssize_t>(n))
    throw IOError("cannot write weight file '" + path_ + "': " + errno_text());
}

uint64_t BlobWriter::write(const Value& v) {
  const DataType dt = v.dtype();
  const uint32_t code = blob_dtype_code(dt);
  if (code == 0 || v.is_symbolic() || !v.buffer())
    throw ValueError("cannot store a value of dtype " + std::string(dtype_name(dt)) +
                     " in a weight file");
  auto key = std::make_tuple(v.buffer().get(), dt, v.numel());
  if (auto it = written_.find(key); it != written_.end()) return it->second.second;

  const int bits = dtype_bits(dt);
  const size_t n = static_cast<size_t>(v.numel());
  const bool sub = is_sub_byte(dt);
  const uint64_t nbytes = sub ? (static_cast<uint64_t>(n) * bits + 7) / 8 : v.nbytes();
  const uint64_t padding = sub ? (8 - (static_cast<uint64_t>(n) * bits) % 8) % 8 : 0;

  const uint64_t meta = align_up(end_);
  static const uint8_t zeros[kAlign] = {};
  put(zeros, meta - end_);
  uint8_t rec[64] = {};
  put_u32(rec, kSentinel);
  put_u32(rec + 4, code);
  put_u64(rec + 8, nbytes);
  put_u64(rec + 16, meta + 64);
  put_u64(rec + 24, padding);
  put(rec, sizeof rec);

  if (!sub && v.buffer()->lazy()) {
    // stream the conversion: the converted weight never exists whole in memory
    constexpr size_t kChunk = 1 << 20;
    std::vector<uint8_t> chunk(std::min<size_t>(kChunk, v.nbytes()));
    for (size_t off = 0; off < v.nbytes(); off += chunk.size()) {
      size_t m = std::min(chunk.size(), v.nbytes() - off);
      v.buffer()->read(off, m, chunk.data());
      put(chunk.data(), m);
    }
  } else if (!sub) {
    put(v.raw(), v.nbytes());  // little-endian host: fp16 and ints are stored raw
  } else if (const Buffer* src = v.buffer()->bit_source();
             src && v.buffer()->bit_width() == bits && !src->lazy() && nbytes > 0) {
    // held packed already in memory or a mapping (loaded or compressed): the packed bytes as
    // they are, straight from there, the last byte's bits after the last element cleared
    put(src->data(), static_cast<size_t>(nbytes - 1));
    uint8_t last = src->data()[nbytes - 1];
    if (padding) last &= static_cast<uint8_t>(0xFF >> padding);
    put(&last, 1);
  } else if (const Buffer* src = v.buffer()->bit_source(); src && v.buffer()->bit_width() == bits) {
    // held packed already (loaded or compressed): the packed bytes as they are, in chunks
    constexpr size_t kChunk = 1 << 20;
    std::vector<uint8_t> chunk(std::min<size_t>(kChunk, nbytes));
    for (uint64_t off = 0; off < nbytes; off += chunk.size()) {
      size_t m = static_cast<size_t>(std::min<uint64_t>(chunk.size(), nbytes - off));
      src->read(static_cast<size_t>(off), m, chunk.data());
      if (padding && off + m == nbytes) chunk[m - 1] &= static_cast<uint8_t>(0xFF >> padding);
      put(chunk.data(), m);
    }
  } else {
    // pack in chunks whose element count is a multiple of 8, so every chunk ends on a byte
    constexpr size_t kChunk = 8 * 4096;
    uint8_t elems[kChunk];
    uint8_t packed[kChunk];  // at most kChunk * 6 / 8 bytes are used
    for (size_t i = 0; i < n; i += kChunk) {
      size_t m = std::min(kChunk, n - i);
      v.buffer()->read(i, m, elems);
      pack_sub_byte(elems, m, bits, packed);
      put(packed, (m * bits + 7) / 8);
    }
  }
  ++count_;
  written_.emplace(key, std::make_pair(v.buffer(), meta));
  return meta;
}

void BlobWriter::close(bool sync) {
  if (fd_ < 0) return;
  uint8_t c[4];
  put_u32(c, count_);
  write_at(0, c, 4);
  if (sync && detail::full_fsync(fd_) != 0)
    throw IOError("cannot sync weight file '" + path_ + "': " + errno_text());
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw IOError("cannot close weight file '" + path_ + "': " + errno_text());
}

// ---- BlobReader -------------------------------------------------------------------------------

namespace {
struct Mapping {
  void* addr = nullptr;
  size_t len = 0;
  ~Mapping() {
    if (addr && len) ::munmap(addr, len);
  }
};
}  // namespace

namespace {
// A blob's bytes in the mapping, borrowed by a value. When the last value over them goes (a weight
// a pass replaced, a const removed), the whole pages inside the blob are given back to the system
// (madvise DONTNEED): the mapping is private and read-only, so a later read just faults the same
// bytes in again from the file, while a compressor walking a model weight by weight never holds
// more than a few of its weights in memory at once.
struct MappedRange {
  std::shared_ptr<BlobReader> keep;
  const uint8_t* p;
  size_t n;
  MappedRange(std::shared_ptr<BlobReader> k, const uint8_t* q, size_t len)
      : keep(std::move(k)), p(q), n(len) {}
  MappedRange(const MappedRange&) = delete;
  MappedRange& operator=(const MappedRange&) = delete;
  ~MappedRange() {
    static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t a = reinterpret_cast<uintptr_t>(p), e = a + n;
    const uintptr_t first = (a + page - 1) / page * page, last = e / page * page;
    if (page > 0 && last > first)
      ::madvise(reinterpret_cast<void*>(first), last - first,
                MADV_DONTNEED);  // a hint: errors are harmless
  }
};
}  // namespace

BlobReader::~BlobReader() = default;

void BlobReader::fail(uint64_t offset, const std::string& what) const {
  throw FormatError("weight file '" + path_ + "', offset " + std::to_string(offset) + ": " + what);
}

std::shared_ptr<BlobReader> BlobReader::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IOError("cannot open weight file '" + path + "': " + errno_text());
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw IOError("cannot stat weight file '" + path + "': " + errno_text());
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw FormatError("weight file '" + path + "' is not a regular file");
  }
  auto map = std::make_shared<Mapping>();
  map->len = static_cast<size_t>(st.st_size);
  if (map->len > 0) {
    void* a = ::mmap(nullptr, map->len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (a == MAP_FAILED) {
      ::close(fd);
      throw IOError("cannot map weight file '" + path + "': " + errno_text());
    }
    map->addr = a;
  }
  ::close(fd);
  // The reader and the mapping share one lifetime: the reader's control block owns both.
  struct Holder {
    std::shared_ptr<Mapping> map;
    BlobReader reader;
  };
  auto h = std::shared_ptr<Holder>(new Holder{map, BlobReader()});
  std::shared_ptr<BlobReader> r(h, &h->reader);
  r->path_ = path;
  r->data_ = static_cast<const uint8_t*>(map->addr);
  r->size_ = map->len;
  r->self_ = r;
  if (r->size_ < 64)
    r->fail(0, "file is " + std::to_string(r->size_) + " bytes, shorter than the 64-byte header");
  uint32_t version = get_u32(r->data_ + 4);
  if (version != kVersion)
    r->fail(4, "unsupported storage version " + std::to_string(version) + " (expected 2)");
  r->count_ = get_u32(r->data_);
  return r;
}

Value BlobReader::read(uint64_t offset, DataType dt, const std::vector<int64_t>& shape) const {
  if (offset < 64 || offset % kAlign != 0)
    fail(offset, "not a metadata record offset (must be a multiple of 64 after the header)");
  if (offset > size_ || size_ - offset < 64)
    fail(offset, "metadata record past the end of the file (size " + std::to_string(size_) + ")");
  const uint8_t* rec = data_ + offset;
  uint32_t sentinel = get_u32(rec);
  if (sentinel != kSentinel) fail(offset, "bad metadata sentinel (no blob record here)");
  uint32_t code = get_u32(rec + 4);
  DataType stored = dtype_from_blob_code(code);
  if (stored == DataType::Unused)
    fail(offset + 4, "unknown blob dtype code " + std::to_string(code));
  if (stored != dt)
    fail(offset + 4, "blob dtype " + std::string(dtype_name(stored)) +
                         " does not match the declared " + std::string(dtype_name(dt)));
  uint64_t nbytes = get_u64(rec + 8);
  uint64_t data_off = get_u64(rec + 16);
  uint64_t padding = get_u64(rec + 24);
  if (data_off < offset + 64)
    fail(offset + 16, "data offset " + std::to_string(data_off) + " overlaps its metadata record");
  if (data_off > size_ || nbytes > size_ - data_off)
    fail(offset + 8, "data [" + std::to_string(data_off) + ", +" + std::to_string(nbytes) +
                         ") past the end of the file (size " + std::to_string(size_) + ")");
  int64_t numel;
  try {
    numel = shape_numel(shape);
  } catch (const ValueError& e) {
    fail(offset, std::string("bad declared shape: ") + e.what());
  }
  const int bits = dtype_bits(dt);
  const bool sub = is_sub_byte(dt);
  if (padding >= 8) fail(offset + 24, "padding " + std::to_string(padding) + " bits (must be < 8)");
  if (!sub && padding != 0) fail(offset + 24, "padding bits set for a byte-sized dtype");
  if (sub && (bits == 1 || bits == 2 || bits == 4) && padding % bits != 0)
    fail(offset + 24, "padding " + std::to_string(padding) +
                          " bits is not a multiple of the element width " + std::to_string(bits));
  // element count check (overflow-safe: numel <= bytes in the file)
  const uint64_t have_bits = nbytes * 8 - padding;  // nbytes <= size_, no overflow
  if (nbytes == 0 && padding != 0) fail(offset + 24, "padding on an empty blob");
  if (static_cast<uint64_t>(numel) > nbytes * 8 ||
      have_bits != static_cast<uint64_t>(numel) * static_cast<uint64_t>(bits))
    fail(offset + 8, "blob holds " + std::to_string(nbytes) + " bytes (" + std::to_string(padding) +
                         " padding bits), but the declared shape needs " + std::to_string(numel) +
                         " elements of " + std::string(dtype_name(dt)));
  const uint8_t* p = data_ + data_off;
  auto self = self_.lock();
  if (!sub) {
    auto owner = std::make_shared<MappedRange>(self, p, static_cast<size_t>(nbytes));
    auto buf = Buffer::borrow(p, static_cast<size_t>(nbytes), std::shared_ptr<const void>(owner));
    return Value(dt, shape, buf);
  }
  // kept packed in the mapping, unpacked on demand
  auto owner = std::make_shared<MappedRange>(self, p, static_cast<size_t>(nbytes));
  auto packed = Buffer::borrow(p, static_cast<size_t>(nbytes), std::shared_ptr<const void>(owner));
  return Value(dt, shape,
               Buffer::packed_bits(std::move(packed), bits, dt == DataType::Int4,
                                   static_cast<size_t>(numel)));
}

}  // namespace milkit
