// The .pt2 archive of torch.export.save: a zip (walked with minizip over a memory mapping of the
// file) holding the program JSON, two payload configs and the raw bytes of every tensor.
#include <fcntl.h>
#include <minizip/unzip.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "milkit/frontends/pt2.h"
#include "milkit/ir/value.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

using json = nlohmann::json;

// ---- the file, mapped once --------------------------------------------------------------------

struct Mapping {
  void* addr = nullptr;
  size_t len = 0;
  ~Mapping() {
    if (addr) ::munmap(addr, len);
  }
};

// minizip reads the mapping through these callbacks: no second descriptor, and a read past the
// end of the file returns short instead of touching memory outside the mapping.
struct MemFile {
  const uint8_t* data;
  uint64_t size;
};
struct MemStream {
  const MemFile* file;
  uint64_t pos;
};

voidpf ZCALLBACK mem_open(voidpf opaque, const void*, int mode) {
  if (!(mode & ZLIB_FILEFUNC_MODE_READ) || (mode & ZLIB_FILEFUNC_MODE_WRITE)) return nullptr;
  return new (std::nothrow) MemStream{static_cast<const MemFile*>(opaque), 0};
}
uLong ZCALLBACK mem_read(voidpf, voidpf stream, void* buf, uLong size) {
  auto* s = static_cast<MemStream*>(stream);
  uint64_t avail = s->pos < s->file->size ? s->file->size - s->pos : 0;
  uint64_t n = size < avail ? size : avail;
  if (n) std::memcpy(buf, s->file->data + s->pos, n);
  s->pos += n;
  return static_cast<uLong>(n);
}
uLong ZCALLBACK mem_write(voidpf, voidpf, const void*, uLong) { return 0; }
ZPOS64_T ZCALLBACK mem_tell(voidpf, voidpf stream) { return static_cast<MemStream*>(stream)->pos; }
long ZCALLBACK mem_seek(voidpf, voidpf stream, ZPOS64_T offset, int origin) {
  auto* s = static_cast<MemStream*>(stream);
  uint64_t base = 0;
  switch (origin) {
    case ZLIB_FILEFUNC_SEEK_SET:
      base = 0;
      break;
    case ZLIB_FILEFUNC_SEEK_CUR:
      base = s->pos;
      break;
    case ZLIB_FILEFUNC_SEEK_END:
      base = s->file->size;
      break;
    default:
      return -1;
  }
  // minizip seeks back with a negative offset from the current position (after reading a
  // central record's extra field): the offset is two's complement
  auto delta = static_cast<int64_t>(offset);
  if (base > s->file->size) return -1;
  if (delta < 0 ? uint64_t(-(delta + 1)) + 1 > base : uint64_t(delta) > s->file->size - base)
    return -1;
  s->pos = base + static_cast<uint64_t>(delta);
  return 0;
}
int ZCALLBACK mem_close(voidpf, voidpf stream) {
  delete static_cast<MemStream*>(stream);
  return 0;
}
int ZCALLBACK mem_error(voidpf, voidpf) { return 0; }

// ---- torch's ScalarType (torch/_export/serde/schema.py) ---------------------------------------

const char* torch_dtype_name(int64_t t) {
  switch (t) {
    case 0:
      return "UNKNOWN";
    case 1:
      return "BYTE (uint8)";
    case 2:
      return "CHAR (int8)";
    case 3:
      return "SHORT (int16)";
    case 4:
      return "INT (int32)";
    case 5:
      return "LONG (int64)";
    case 6:
      return "HALF (float16)";
    case 7:
      return "FLOAT (float32)";
    case 8:
      return "DOUBLE (float64)";
    case 9:
      return "COMPLEXHALF";
    case 10:
      return "COMPLEXFLOAT";
    case 11:
      return "COMPLEXDOUBLE";
    case 12:
      return "BOOL";
    case 13:
      return "BFLOAT16";
    case 28:
      return "UINT16";
    case 29:
      return "FLOAT8E4M3FN";
    case 30:
      return "FLOAT8E5M2";
    case 31:
      return "FLOAT8E4M3FNUZ";
    case 32:
      return "FLOAT8E5M2FNUZ";
    case 33:
      return "FLOAT8E8M0FNU";
    case 34:
      return "UINT32";
    case 35:
      return "UINT64";
    default:
      return nullptr;
  }
}

// The milkit dtype storing a torch ScalarType exactly (little-endian, one byte per bool).
std::optional<DataType> stored_dtype(int64_t t) {
  switch (t) {
    case 1:
      return DataType::UInt8;
    case 2:
      return DataType::Int8;
    case 3:
      return DataType::Int16;
    case 4:
      return DataType::Int32;
    case 5:
      return DataType::Int64;
    case 6:
      return DataType::Float16;
    case 7:
      return DataType::Float32;
    case 8:
      return DataType::Float64;
    case 12:
      return DataType::Bool;
    case 13:
      return DataType::BFloat16;
    case 28:
      return DataType::UInt16;
    case 29:
      return DataType::Float8E4M3FN;
    case 30:
      return DataType::Float8E5M2;
    case 34:
      return DataType::UInt32;
    case 35:
      return DataType::UInt64;
    default:
      return std::nullopt;
  }
}

constexpr int64_t kStridedLayout = 7;  // schema.Layout.Strided

// The message as valid UTF-8 (Python decodes it): a byte that starts no valid sequence becomes
// \xNN. Entry names and JSON parse errors quote bytes of the file.
std::string clean_utf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 0x2;
    if (ok && n == 1 && c < 0x20 && c != '\n' && c != '\t') ok = false;
    if (ok) {
      out.append(s, i, n);
      i += n;
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
      ++i;
    }
  }
  return out;
}

// ---- the archive ------------------------------------------------------------------------------

struct Entry {
  std::string name;
  uint64_t local = 0;  // offset of the local header
  uint64_t csize = 0, usize = 0;
  unsigned long method = 0, flag = 0, crc = 0;
};

uint16_t le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t le32(const uint8_t* p) { return le16(p) | (static_cast<uint32_t>(le16(p + 2)) << 16); }
uint64_t le64(const uint8_t* p) { return le32(p) | (static_cast<uint64_t>(le32(p + 4)) << 32); }

// Bytes of one entry: in the mapping (stored) or owned (inflated).
struct Bytes {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> owner;
};

// A tensor's metadata (TensorMeta) with concrete ints.
struct Meta {
  DataType dtype = DataType::Float32;
  size_t esize = 4;
  std::vector<int64_t> shape, strides;
  int64_t offset = 0;
};

class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path) {}
  ~Reader() {
    if (zip_) unzClose(zip_);
  }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  Pt2Archive read();

 private:
  [[noreturn]] void fail(const std::string& msg) const {
    throw FormatError(clean_utf8("pt2 archive '" + path_ + "': " + msg));
  }
  [[noreturn]] void unsupported(const std::string& msg) const {
    throw ValueError(clean_utf8("pt2 archive '" + path_ + "': " + msg));
  }
  void map_file();
  void open_zip();
  void list_entries();
  void central_sizes(Entry& e, uint64_t record, const uint8_t* extra, size_t extra_len) const;
  uint64_t data_offset(const Entry& e) const;
  Bytes inflate_entry(const Entry& e, const std::string& what) const;
  const Entry* find(const std::string& rel) const;
  const Bytes& bytes(const Entry& e);
  std::string text(const Entry& e) {
    auto& b = bytes(e);
    return std::string(reinterpret_cast<const char*>(b.data), b.size);
  }
  json parse(const Entry& e, const char* skip_key = nullptr);
  std::string pick_model();
  void check_schema(const json& program, const Entry& e);
  void read_payloads(const std::string& config_rel, const std::string& dir, const char* kind,
                     std::unordered_map<std::string, Pt2Tensor>& out);
  Meta parse_meta(const json& tm, const std::string& what) const;
  std::shared_ptr<const Value> make_value(const Meta& m, const Bytes& b, const std::string& what,
                                          const std::string& entry) const;

  std::string path_;
  std::shared_ptr<Mapping> map_;
  MemFile mem_{nullptr, 0};
  unzFile zip_ = nullptr;
  std::vector<Entry> entries_;
  std::unordered_map<std::string, size_t> by_name_;
  std::string root_;  // the archive's folder, e.g. "m/" (every record is under it)
  std::unordered_map<std::string, Bytes> cache_;
};

void Reader::map_file() {
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IOError("cannot open pt2 archive '" + path_ + "': " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw IOError("cannot stat pt2 archive '" + path_ + "': " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw IOError("pt2 archive '" + path_ + "' is not a regular file");
  }
  map_ = std::make_shared<Mapping>();
  map_->len = static_cast<size_t>(st.st_size);
  if (map_->len) {
    void* a = ::mmap(nullptr, map_->len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (a == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      throw IOError("cannot map pt2 archive '" + path_ + "': " + std::strerror(e));
    }
    map_->addr = a;
  }
  ::close(fd);
  mem_ = {static_cast<const uint8_t*>(map_->addr), map_->len};
}

void Reader::open_zip() {
  if (mem_.size == 0) fail("not a zip archive (the file is empty)");
  // The end of central directory record (22 bytes and its comment) must end the file. minizip
  // is laxer (it takes a zip64 record whose plain one was cut off, or the record of a zip nested
  // in an entry), so a cut file could pass it.
  bool eocd = false;
  if (mem_.size >= 22) {
    uint64_t lo = mem_.size - 22 > 65535 ? mem_.size - 22 - 65535 : 0;
    for (uint64_t p = mem_.size - 22 + 1; p-- > lo;) {
      const uint8_t* q = mem_.data + p;
      if (q[0] == 'P' && q[1] == 'K' && q[2] == 5 && q[3] == 6 &&
          p + 22 + (q[20] | (q[21] << 8)) == mem_.size) {
        eocd = true;
        break;
      }
    }
  }
  if (!eocd)
    fail("not a zip archive, or a truncated one (its " + std::to_string(mem_.size) +
         " bytes do not end with a zip's end of central directory record)");
  zlib_filefunc64_def io{};
  io.zopen64_file = mem_open;
  io.zread_file = mem_read;
  io.zwrite_file = mem_write;
  io.ztell64_file = mem_tell;
  io.zseek64_file = mem_seek;
  io.zclose_file = mem_close;
  io.zerror_file = mem_error;
  io.opaque = &mem_;
  zip_ = unzOpen2_64(path_.c_str(), &io);
  if (!zip_)
    fail("not a zip archive, or a truncated one (no readable end of central directory in its " +
         std::to_string(mem_.size) + " bytes)");
}

void Reader::list_entries() {
  unz_global_info64 gi;
  if (unzGetGlobalInfo64(zip_, &gi) != UNZ_OK) fail("cannot read the zip's central directory");
  if (gi.number_entry == 0) fail("the zip archive has no entries");
  // each central directory record takes at least 46 bytes: a larger count is a lie
  if (gi.number_entry > mem_.size / 46)
    fail("the zip's central directory claims " + std::to_string(gi.number_entry) +
         " entries, more than the file can hold");
  std::vector<char> name(65536 + 1);
  std::vector<uint8_t> extra(65536);
  int err = unzGoToFirstFile(zip_);
  for (uint64_t i = 0;; ++i) {
    if (err == UNZ_END_OF_LIST_OF_FILE) break;
    if (err != UNZ_OK)
      fail("the zip's central directory is damaged (at entry " + std::to_string(i) +
           (entries_.empty() ? std::string() : ", after '" + entries_.back().name + "'") + ")");
    unz_file_info64 fi;
    if (unzGetCurrentFileInfo64(zip_, &fi, name.data(), name.size() - 1, extra.data(), extra.size(),
                                nullptr, 0) != UNZ_OK)
      fail("the zip's central directory is damaged (at entry " + std::to_string(i) + ")");
    Entry e;
    e.name.assign(name.data(), std::min<size_t>(fi.size_filename, name.size() - 1));
    e.method = fi.compression_method;
    e.flag = fi.flag;
    e.crc = fi.crc;
    unz64_file_pos pos;
    if (unzGetFilePos64(zip_, &pos) != UNZ_OK) fail("cannot locate entry '" + e.name + "'");
    central_sizes(e, pos.pos_in_zip_directory, extra.data(),
                  std::min<size_t>(fi.size_file_extra, extra.size()));
    if (!by_name_.emplace(e.name, entries_.size()).second)
      fail("entry '" + e.name + "' appears twice in the zip");
    entries_.push_back(std::move(e));
    err = unzGoToNextFile(zip_);
  }
  // torch's writer puts every record under one folder named after the archive ("m/", "archive/")
  const std::string& first = entries_.front().name;
  size_t slash = first.find('/');
  if (slash == std::string::npos || slash == 0)
    fail("entry '" + first +
         "' is not inside a folder (a .pt2 archive keeps its records under one)");
  root_ = first.substr(0, slash + 1);
}

// The sizes and local header offset of an entry, from its central directory record at `record`
// and that record's extra field. minizip 1.1 compares the 32-bit fields with a 64-bit -1, so on
// LP64 systems it never applies the zip64 extra field: in an archive past 4 GiB (torch writes
// zip64 offsets for every entry after its first big tensor) it would read at the wrong place.
// The fields are read here as APPNOTE 4.5.3 gives them: the zip64 extra field (id 1) holds, in
// this order, each of the uncompressed size, compressed size and local header offset whose
// 32-bit field is 0xFFFFFFFF.
void Reader::central_sizes(Entry& e, uint64_t record, const uint8_t* extra,
                           size_t extra_len) const {
  if (record > mem_.size || mem_.size - record < 46 || le32(mem_.data + record) != 0x02014b50)
    fail("the central directory record of entry '" + e.name + "' is damaged");
  const uint8_t* r = mem_.data + record;
  e.csize = le32(r + 20);
  e.usize = le32(r + 24);
  e.local = le32(r + 42);
  constexpr uint32_t kFull = 0xFFFFFFFFu;
  bool need_u = e.usize == kFull, need_c = e.csize == kFull, need_o = e.local == kFull;
  for (size_t p = 0; p + 4 <= extra_len && (need_u || need_c || need_o);) {
    uint16_t id = le16(extra + p), len = le16(extra + p + 2);
    if (len > extra_len - p - 4)
      fail("entry '" + e.name + "': its central extra field runs past its end");
    if (id == 1) {
      const uint8_t* f = extra + p + 4;
      size_t need = 8 * (size_t(need_u) + size_t(need_c) + size_t(need_o));
      if (len < need)
        fail("entry '" + e.name + "': its zip64 extra field holds " + std::to_string(len) +
             " bytes, its record needs " + std::to_string(need));
      if (need_u) e.usize = le64(f), f += 8;
      if (need_c) e.csize = le64(f), f += 8;
      if (need_o) e.local = le64(f);
      need_u = need_c = need_o = false;
    }
    p += 4 + size_t(len);
  }
  // a 0xFFFFFFFF field without a zip64 extra field is taken as its value, as zip readers do
}

// Where an entry's data starts: after its local header, whose name and extra field lengths are
// its own (the sizes there may be zero, with a data descriptor after the data, as torch writes).
uint64_t Reader::data_offset(const Entry& e) const {
  const std::string what = "entry '" + e.name + "'";
  if (e.local > mem_.size || mem_.size - e.local < 30 || le32(mem_.data + e.local) != 0x04034b50)
    fail(what + ": its local header (at offset " + std::to_string(e.local) +
         ") is missing or damaged");
  const uint8_t* h = mem_.data + e.local;
  if (le16(h + 8) != e.method)
    fail(what + ": its local header names compression method " + std::to_string(le16(h + 8)) +
         ", the central directory " + std::to_string(e.method));
  uint64_t pos = e.local + 30 + le16(h + 26) + le16(h + 28);
  if (pos > mem_.size || e.csize > mem_.size - pos)
    fail(what + " (" + std::to_string(e.csize) + " bytes at offset " + std::to_string(pos) +
         ") runs past the end of the file (" + std::to_string(mem_.size) + " bytes): truncated?");
  return pos;
}

// A deflated entry, inflated with zlib straight from the mapping into a buffer that grows as the
// output comes (a declared size is not trusted for an allocation), its CRC checked.
Bytes Reader::inflate_entry(const Entry& e, const std::string& what) const {
  uint64_t pos = data_offset(e);
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) fail(what + ": cannot start inflating");
  auto out = std::make_shared<std::vector<uint8_t>>();
  // the declared size up front (no regrowth copies for weights, which barely compress), but never
  // more than a few times the compressed bytes: a small damaged entry declaring a huge size gets
  // no huge allocation, and a highly compressible one grows as its output comes
  out->reserve(static_cast<size_t>(std::min<uint64_t>(e.usize, e.csize * 4 + (1u << 20))));
  constexpr size_t kChunk = size_t(1) << 20;
  const uint8_t* in = mem_.data + pos;
  uint64_t left = e.csize;
  int rc = Z_OK;
  while (rc == Z_OK) {
    if (z.avail_in == 0 && left) {
      auto n = static_cast<uInt>(std::min<uint64_t>(left, kChunk));
      z.next_in = const_cast<Bytef*>(in);
      z.avail_in = n;
      in += n;
      left -= n;
    }
    size_t have = out->size();
    size_t room = out->capacity() > have ? std::min(kChunk, out->capacity() - have) : kChunk;
    out->resize(have + room);
    z.next_out = out->data() + have;
    z.avail_out = static_cast<uInt>(room);
    rc = inflate(&z, Z_NO_FLUSH);
    out->resize(have + room - z.avail_out);
    if (rc == Z_BUF_ERROR && (z.avail_in || left)) rc = Z_OK;  // no progress this round only
    if (out->size() > e.usize) break;                          // more than declared: damaged
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END)
    fail(what + ": its compressed data is damaged or cut short (zlib: " +
         (z.msg ? std::string(z.msg) : std::to_string(rc)) + ")");
  if (out->size() != e.usize)
    fail(what + " inflates to " + std::to_string(out->size()) + " bytes, the zip says " +
         std::to_string(e.usize));
  uLong crc = crc32(0L, Z_NULL, 0);
  for (size_t off = 0; off < out->size(); off += kChunk)
    crc = crc32(crc, out->data() + off, static_cast<uInt>(std::min(kChunk, out->size() - off)));
  if (crc != e.crc) fail(what + ": CRC mismatch (damaged data)");
  // a large inflated weight goes to the page cache (Buffer::spill), not anonymous memory
  auto buf = Buffer::spill(std::move(*out));
  Bytes b;
  b.data = buf->data();
  b.size = buf->size();
  b.owner = buf;
  return b;
}

const Entry* Reader::find(const std::string& rel) const {
  auto it = by_name_.find(root_ + rel);
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

const Bytes& Reader::bytes(const Entry& e) {
  auto hit = cache_.find(e.name);
  if (hit != cache_.end()) return hit->second;
  const std::string what = "entry '" + e.name + "'";
  if (e.flag & 1) fail(what + " is encrypted");
  Bytes b;
  if (e.method == 0) {
    if (e.csize != e.usize)
      fail(what + " is stored uncompressed with two sizes (" + std::to_string(e.csize) + " and " +
           std::to_string(e.usize) + " bytes)");
    b.data = mem_.data + data_offset(e);
    b.size = static_cast<size_t>(e.usize);
    b.owner = map_;
  } else if (e.method == Z_DEFLATED) {
    b = inflate_entry(e, what);
  } else {
    fail(what + " uses zip compression method " + std::to_string(e.method) +
         " (only stored and deflate are read)");
  }
  return cache_.emplace(e.name, std::move(b)).first->second;
}

// `skip_key`: a top-level key whose value is checked for syntax but not built (the program's
// graph_module, which only the importer needs).
json Reader::parse(const Entry& e, const char* skip_key) {
  const Bytes& b = bytes(e);
  json j;
  try {
    json::parser_callback_t skip = [skip_key](int depth, json::parse_event_t ev, json& parsed) {
      return !(skip_key && ev == json::parse_event_t::key && depth == 1 && parsed == skip_key);
    };
    j = json::parse(b.data, b.data + b.size, skip);
  } catch (const json::exception& ex) {
    fail("entry '" + e.name + "' is not valid JSON: " + ex.what());
  }
  if (!j.is_object()) fail("entry '" + e.name + "' is not a JSON object");
  return j;
}

std::string Reader::pick_model() {
  const std::string prefix = root_ + "models/";
  std::vector<std::string> names;
  for (auto& e : entries_) {
    if (e.name.size() <= prefix.size() + 5 || e.name.compare(0, prefix.size(), prefix) != 0)
      continue;
    if (e.name.compare(e.name.size() - 5, 5, ".json") != 0) continue;
    std::string n = e.name.substr(prefix.size(), e.name.size() - prefix.size() - 5);
    if (n.find('/') == std::string::npos) names.push_back(n);
  }
  if (names.empty())
    fail("no models/<name>.json entry (the serialized program) under '" + root_ + "'");
  for (auto& n : names)
    if (n == "model") return n;
  if (names.size() == 1) return names[0];
  std::string list;
  for (auto& n : names) list += (list.empty() ? "" : ", ") + n;
  unsupported("holds several programs (" + list + ") and none is named 'model'");
}

void Reader::check_schema(const json& program, const Entry& e) {
  auto it = program.find("schema_version");
  if (it == program.end() || !it->is_object()) fail("entry '" + e.name + "' has no schema_version");
  auto major = it->find("major"), minor = it->find("minor");
  if (major == it->end() || !major->is_number_integer())
    fail("entry '" + e.name + "': schema_version has no integer 'major'");
  std::string minor_s = minor != it->end() && minor->is_number_integer()
                            ? std::to_string(minor->get<int64_t>())
                            : "?";
  int64_t maj = major->get<int64_t>();
  if (maj != 8)
    fail("schema version " + std::to_string(maj) + "." + minor_s +
         " is not supported (milkit reads 8.x)");
}

Meta Reader::parse_meta(const json& tm, const std::string& what) const {
  if (!tm.is_object()) fail(what + ": tensor_meta is not an object");
  auto field = [&](const char* name) -> const json& {
    auto it = tm.find(name);
    if (it == tm.end()) fail(what + ": tensor_meta has no '" + name + "'");
    return *it;
  };
  auto symint = [&](const json& j, const std::string& where) -> int64_t {
    if (j.is_object()) {
      auto i = j.find("as_int");
      if (i != j.end() && i->is_number_integer()) return i->get<int64_t>();
      auto x = j.find("as_expr");
      if (x != j.end()) {
        std::string expr = x->is_object() && x->contains("expr_str") && (*x)["expr_str"].is_string()
                               ? (*x)["expr_str"].get<std::string>()
                               : x->dump();
        fail(what + ": " + where + " is symbolic (" + expr +
             "); a stored tensor needs concrete sizes");
      }
    }
    fail(what + ": " + where + " is not an integer ({\"as_int\": n})");
  };
  Meta m;
  const json& dt = field("dtype");
  if (!dt.is_number_integer()) fail(what + ": tensor_meta dtype is not an integer");
  int64_t code = dt.get<int64_t>();
  auto stored = stored_dtype(code);
  if (!stored) {
    const char* n = torch_dtype_name(code);
    unsupported(what + ": dtype " + (n ? std::string(n) : "number " + std::to_string(code)) +
                " is not supported");
  }
  m.dtype = *stored;
  m.esize = static_cast<size_t>(dtype_storage_bytes(m.dtype));
  auto layout = tm.find("layout");
  if (layout != tm.end()) {
    if (!layout->is_number_integer()) fail(what + ": tensor_meta layout is not an integer");
    if (layout->get<int64_t>() != kStridedLayout)
      unsupported(what + ": layout " + std::to_string(layout->get<int64_t>()) +
                  " is not supported (only strided tensors are read)");
  }
  const json& sizes = field("sizes");
  const json& strides = field("strides");
  if (!sizes.is_array() || !strides.is_array())
    fail(what + ": tensor_meta sizes and strides must be lists");
  if (sizes.size() != strides.size())
    fail(what + ": " + std::to_string(sizes.size()) + " sizes but " +
         std::to_string(strides.size()) + " strides");
  for (size_t d = 0; d < sizes.size(); ++d) {
    int64_t s = symint(sizes[d], "size " + std::to_string(d));
    int64_t st = symint(strides[d], "stride " + std::to_string(d));
    if (s < 0)
      fail(what + ": negative size " + std::to_string(s) + " (dim " + std::to_string(d) + ")");
    if (st < 0)
      fail(what + ": negative stride " + std::to_string(st) + " (dim " + std::to_string(d) + ")");
    m.shape.push_back(s);
    m.strides.push_back(st);
  }
  auto off = tm.find("storage_offset");
  if (off != tm.end() && !off->is_null()) m.offset = symint(*off, "storage_offset");
  if (m.offset < 0) fail(what + ": negative storage_offset " + std::to_string(m.offset));
  return m;
}

std::shared_ptr<const Value> Reader::make_value(const Meta& m, const Bytes& b,
                                                const std::string& what,
                                                const std::string& entry) const {
  const uint64_t kMax = uint64_t(1) << 62;
  uint64_t numel = 1;
  for (int64_t s : m.shape)
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(s), &numel) || numel > kMax)
      fail(what + ": its shape has too many elements");
  if (numel == 0) return std::make_shared<const Value>(m.dtype, m.shape, Buffer::take({}));
  // the last element read, in elements from the start of the entry
  uint64_t last = static_cast<uint64_t>(m.offset), need = 0;
  bool overflow = false;
  for (size_t d = 0; d < m.shape.size(); ++d) {
    uint64_t step = 0;
    overflow |= __builtin_mul_overflow(static_cast<uint64_t>(m.shape[d] - 1),
                                       static_cast<uint64_t>(m.strides[d]), &step);
    overflow |= __builtin_add_overflow(last, step, &last);
  }
  overflow |= __builtin_add_overflow(last, uint64_t(1), &need);
  overflow |= __builtin_mul_overflow(need, static_cast<uint64_t>(m.esize), &need);
  if (overflow || need > b.size)
    fail(what + " (entry '" + entry + "') is " + std::to_string(b.size) +
         " bytes, its shape needs " +
         (overflow ? std::string("more than 2^64") : std::to_string(need)));
  const size_t esize = m.esize;
  const uint8_t* base = b.data + static_cast<size_t>(m.offset) * esize;
  // row-major contiguous? (the stride of a size-1 dim does not matter)
  bool contiguous = true;
  int64_t expect = 1;
  for (size_t d = m.shape.size(); d-- > 0;) {
    if (m.shape[d] != 1 && m.strides[d] != expect) contiguous = false;
    expect *= m.shape[d];
  }
  const size_t nbytes = static_cast<size_t>(numel) * esize;
  std::shared_ptr<const Buffer> buf;
  if (contiguous) {
    if (reinterpret_cast<uintptr_t>(base) % esize == 0)
      buf = Buffer::borrow(base, nbytes,
                           b.owner);  // zero-copy: the mapping (or inflated entry) stays alive
    else
      buf = Buffer::copy(base,
                         nbytes);  // misaligned (not written by torch): typed reads need alignment
  } else {
    std::vector<uint8_t> out(nbytes);
    const size_t rank = m.shape.size();
    std::vector<int64_t> idx(rank, 0);
    uint64_t src = 0;  // element offset from base
    for (uint64_t i = 0; i < numel; ++i) {
      std::memcpy(out.data() + i * esize, base + src * esize, esize);
      for (size_t d = rank; d-- > 0;) {
        if (++idx[d] < m.shape[d]) {
          src += static_cast<uint64_t>(m.strides[d]);
          break;
        }
        src -= static_cast<uint64_t>(m.strides[d]) * static_cast<uint64_t>(m.shape[d] - 1);
        idx[d] = 0;
      }
    }
    buf = Buffer::take(std::move(out));
  }
  Value v(m.dtype, m.shape, std::move(buf));
  if (m.dtype == DataType::Float64) v = v.cast(DataType::Float32);
  return std::make_shared<const Value>(std::move(v));
}

void Reader::read_payloads(const std::string& config_rel, const std::string& dir, const char* kind,
                           std::unordered_map<std::string, Pt2Tensor>& out) {
  const Entry* ce = find(config_rel);
  if (!ce) fail("no '" + root_ + config_rel + "' entry (the " + kind + "s' config)");
  json cfg = parse(*ce);
  auto c = cfg.find("config");
  if (c == cfg.end() || !c->is_object()) fail("entry '" + ce->name + "' has no 'config' object");
  for (auto& item : c->items()) {
    // named references, not a structured binding: C++17 lambdas cannot capture those (`flag` below)
    const std::string& fqn = item.key();
    const json& meta = item.value();
    std::string what = std::string(kind) + " '" + fqn + "'";
    if (!meta.is_object())
      fail("entry '" + ce->name + "': the config of " + what + " is not an object");
    auto pn = meta.find("path_name");
    if (pn == meta.end() || !pn->is_string())
      fail("entry '" + ce->name + "': " + what + " has no path_name");
    auto flag = [&](const char* name) {
      auto it = meta.find(name);
      if (it == meta.end() || it->is_null()) return false;
      if (!it->is_boolean())
        fail("entry '" + ce->name + "': " + what + "'s " + name + " is not a boolean");
      return it->get<bool>();
    };
    bool is_param = flag("is_param"), pickled = flag("use_pickle");
    std::string entry = root_ + dir + pn->get<std::string>();
    if (pickled)
      unsupported(what + " (entry '" + entry +
                  "') is saved with torch's pickler (a tensor subclass or a script object), which "
                  "milkit does not read");
    auto tm = meta.find("tensor_meta");
    if (tm == meta.end() || tm->is_null())
      fail("entry '" + ce->name + "': " + what + " has no tensor_meta");
    Meta m = parse_meta(*tm, what);
    const Entry* e = find(dir + pn->get<std::string>());
    if (!e) fail(what + ": its entry '" + entry + "' is not in the archive");
    out[fqn] = Pt2Tensor{make_value(m, bytes(*e), what, entry), is_param};
  }
}

Pt2Archive Reader::read() {
  map_file();
  open_zip();
  list_entries();

  const Entry* fmt = find("archive_format");
  if (!fmt) fail("no '" + root_ + "archive_format' entry: not a torch.export (.pt2) archive");
  std::string format = text(*fmt);
  if (format != "pt2")
    fail("entry '" + fmt->name + "' says '" + format.substr(0, 64) +
         "', not 'pt2': not a torch.export archive");
  if (const Entry* bo = find("byteorder")) {
    std::string order = text(*bo);
    if (order != "little")
      unsupported("byteorder is '" + order.substr(0, 64) +
                  "' (milkit reads little-endian archives)");
  }

  Pt2Archive a;
  a.source = path_;
  a.model_name = pick_model();
  const Entry* me = find("models/" + a.model_name + ".json");
  check_schema(parse(*me, "graph_module"), *me);
  a.model_json = text(*me);

  const std::string wdir = "data/weights/", cdir = "data/constants/";
  if (!find(wdir + a.model_name + "_weights_config.json") && find(wdir + a.model_name + ".pt"))
    unsupported("weights are in the legacy pickled form ('" + root_ + wdir + a.model_name +
                ".pt'); re-save the program with a recent torch.export.save");
  read_payloads(wdir + a.model_name + "_weights_config.json", wdir, "weight", a.weights);
  if (!find(cdir + a.model_name + "_constants_config.json") && find(cdir + a.model_name + ".pt"))
    unsupported("constants are in the legacy pickled form ('" + root_ + cdir + a.model_name +
                ".pt'); re-save the program with a recent torch.export.save");
  read_payloads(cdir + a.model_name + "_constants_config.json", cdir, "constant", a.constants);
  return a;
}

}  // namespace

Pt2Archive read_pt2(const std::string& path) {
  Reader r(path);
  return r.read();
}

}  // namespace milkit
