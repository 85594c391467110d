// Per-op-type kernel times for the interpreter (MILKIT_PROFILE). Private to cpp/src/exec.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "milkit/ir/ir.h"

namespace milkit {

/// Per-op-type kernel times, printed to stderr at exit when MILKIT_PROFILE is set.
class Profile {
 public:
  /// The process-wide profile, or nullptr when MILKIT_PROFILE is not set.
  static Profile* get();
  /// Adds `us` microseconds to the op's type.
  void add(const Operation& op, double us);
  ~Profile() = default;

 private:
  Profile();
  std::mutex m_;
  std::map<std::string, std::pair<double, int64_t>> by_type_;
};

}  // namespace milkit
