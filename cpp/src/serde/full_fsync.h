// fsync that also reaches the disk on macOS. Private to cpp/src/serde.
#pragma once

#include <fcntl.h>
#include <unistd.h>

namespace milkit::detail {

/// fsync(fd), with fsync's return convention. On macOS fsync hands the data to the drive, whose
/// write cache may still lose it on power loss; fcntl(F_FULLFSYNC) flushes that cache too. File
/// systems without F_FULLFSYNC fail it, and then plain fsync is used. Linux has no F_FULLFSYNC
/// (its fsync flushes the drive cache).
inline int full_fsync(int fd) {
#ifdef F_FULLFSYNC
  if (::fcntl(fd, F_FULLFSYNC) == 0) return 0;
#endif
  return ::fsync(fd);
}

}  // namespace milkit::detail
