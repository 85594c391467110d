// milkit/serde/blob.h - Core ML "blob storage v2" weight files (weight.bin).
//
// Layout: a 64-byte header {u32 count, u32 version = 2, 56 zero bytes}, then per blob a
// 64-aligned 64-byte metadata record {u32 0xDEADBEEF, u32 dtype code, u64 sizeInBytes,
// u64 absolute data offset, u64 padding bits, 32 zero bytes} immediately followed by the data.
// Gaps between blobs are zero bytes; there is no padding after the last blob.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "milkit/ir/value.h"

namespace milkit {

/// Blob storage dtype code of a MIL dtype (BlobDataType), or 0 when it cannot be stored.
uint32_t blob_dtype_code(DataType t);
/// MIL dtype of a blob storage dtype code, or DataType::Unused when unknown.
DataType dtype_from_blob_code(uint32_t code);

/// Writes a weight file, streaming each value's bytes straight to disk. Identical buffers
/// (the same Buffer object with the same dtype and element count) are written once.
class BlobWriter {
 public:
  /// Creates (truncates) `path` and writes the header. Throws IOError.
  explicit BlobWriter(std::string path);
  BlobWriter(const BlobWriter&) = delete;
  BlobWriter& operator=(const BlobWriter&) = delete;
  /// Closes the file (without fsync) if close() was not called.
  ~BlobWriter();
  /// Appends a value (or reuses an identical buffer already written); returns the metadata
  /// offset to store in BlobFileValue.offset. Throws ValueError for dtypes that cannot be
  /// stored and IOError on write failures.
  uint64_t write(const Value& v);
  /// Number of distinct blobs written.
  uint32_t count() const { return count_; }
  /// Current file size.
  uint64_t size() const { return end_; }
  /// Flushes, optionally fsyncs, and closes the file. Throws IOError.
  void close(bool sync = true);
  /// The file name.
  const std::string& path() const { return path_; }

 private:
  void put(const void* data, size_t n);
  void flush();
  void write_at(uint64_t off, const void* data, size_t n);
  std::string path_;
  int fd_ = -1;
  uint64_t end_ = 0;    // logical end of file (after buffered bytes)
  uint32_t count_ = 0;
  std::string buf_;     // small staging buffer (bounded, flushed when full)
  std::map<std::tuple<const Buffer*, DataType, int64_t>,
           std::pair<std::shared_ptr<const Buffer>, uint64_t>>
      written_;
};

/// A read-only memory-mapped weight file. Values it returns borrow the mapping (except sub-byte
/// values, which are unpacked into one byte per element), keeping it alive.
class BlobReader {
 public:
  /// Maps `path` and validates the header. Throws IOError / FormatError.
  static std::shared_ptr<BlobReader> open(const std::string& path);
  ~BlobReader();
  BlobReader(const BlobReader&) = delete;
  BlobReader& operator=(const BlobReader&) = delete;
  /// Reads the blob whose metadata record is at `offset`, expecting dtype `dt` and `shape`.
  /// Throws FormatError (file name, offset, problem) on any inconsistency.
  Value read(uint64_t offset, DataType dt, const std::vector<int64_t>& shape) const;
  /// Blob count from the header.
  uint32_t count() const { return count_; }
  /// File size.
  uint64_t size() const { return size_; }
  /// The file name.
  const std::string& path() const { return path_; }

 private:
  BlobReader() = default;
  [[noreturn]] void fail(uint64_t offset, const std::string& what) const;
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  uint32_t count_ = 0;
  std::weak_ptr<BlobReader> self_;
};

/// Packs milkit's one-byte-per-element sub-byte values LSB-first into `out` (which must hold
/// ceil(n * bits / 8) bytes).
void pack_sub_byte(const uint8_t* in, size_t n, int bits, uint8_t* out);
/// Unpacks LSB-first packed sub-byte values into one byte per element (sign-extended for int4).
void unpack_sub_byte(const uint8_t* in, size_t n, int bits, bool is_signed, uint8_t* out);

}  // namespace milkit
