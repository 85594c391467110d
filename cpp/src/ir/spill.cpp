// Buffer::spill and Value::from_bytes: large results of passes (compressed weights) written to an
// unlinked temporary file and mapped back, so they live in the page cache (which the kernel can
// write back and drop) rather than in the process's anonymous memory.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "milkit/ir/value.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

struct SpillMapping {
  void* addr = nullptr;
  size_t len = 0;
  ~SpillMapping() {
    if (addr) ::munmap(addr, len);
  }
};

// Bytes at least this large are spilled (MILKIT_SPILL_MB; 0 turns spilling off).
size_t spill_threshold() {
  static const size_t t = [] {
    const char* e = std::getenv("MILKIT_SPILL_MB");
    if (!e || !*e) return size_t(1) << 20;
    char* end = nullptr;
    unsigned long long mb = std::strtoull(e, &end, 10);
    if (end == e || *end) return size_t(1) << 20;
    return mb == 0 ? SIZE_MAX : static_cast<size_t>(mb) << 20;
  }();
  return t;
}

// An unlinked file open for writing in the first usable spill directory, or -1.
int spill_fd() {
  std::vector<std::string> dirs;
  if (const char* d = std::getenv("MILKIT_SPILL_DIR"); d && *d) dirs.emplace_back(d);
  dirs.emplace_back("/var/tmp");  // disk-backed by convention; /tmp is often tmpfs (memory)
  if (const char* d = std::getenv("TMPDIR"); d && *d) dirs.emplace_back(d);
  dirs.emplace_back("/tmp");
  // mkostemp then unlink works on every file system (O_TMPFILE does not), so this one path is
  // the one every spill takes
  for (const auto& d : dirs) {
    std::string path = d + "/milkit-spill-XXXXXX";
    int fd = ::mkostemp(path.data(), O_CLOEXEC);
    if (fd >= 0) {
      ::unlink(path.c_str());
      return fd;
    }
  }
  return -1;
}

bool write_all(int fd, const uint8_t* p, size_t n) {
  while (n) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

std::shared_ptr<const Buffer> Buffer::spill(std::vector<uint8_t>&& bytes) {
  if (bytes.size() < spill_threshold()) return take(std::move(bytes));
  // a full disk or no writable directory keeps the bytes in memory: spilling only saves memory
  int fd = spill_fd();
  if (fd < 0) return take(std::move(bytes));
  const size_t n = bytes.size();
  void* addr = MAP_FAILED;
  if (write_all(fd, bytes.data(), n)) addr = ::mmap(nullptr, n, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (addr == MAP_FAILED) return take(std::move(bytes));
  std::vector<uint8_t>().swap(bytes);
  auto m = std::make_shared<SpillMapping>();
  m->addr = addr;
  m->len = n;
  return borrow(addr, n, std::shared_ptr<const void>(m, m->addr));
}

Value Value::from_bytes(DataType dt, std::vector<int64_t> shape, std::vector<uint8_t>&& bytes) {
  if (!is_sub_byte(dt)) return Value(dt, std::move(shape), Buffer::spill(std::move(bytes)));
  const int64_t n = shape_numel(shape);
  if (static_cast<int64_t>(bytes.size()) != n)
    throw ValueError("value of dtype " + std::string(dtype_name(dt)) + " needs " +
                     std::to_string(n) + " bytes, got " + std::to_string(bytes.size()));
  const int bits = dtype_bits(dt);
  std::vector<uint8_t> packed((bytes.size() * static_cast<size_t>(bits) + 7) / 8);
  pack_bits(bytes.data(), bytes.size(), bits, packed.data());
  std::vector<uint8_t>().swap(bytes);
  auto buf = Buffer::packed_bits(Buffer::spill(std::move(packed)), bits, dt == DataType::Int4,
                                 static_cast<size_t>(n));
  return Value(dt, std::move(shape), std::move(buf));
}

}  // namespace milkit
