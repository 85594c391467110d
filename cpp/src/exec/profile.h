// Per-op-type kernel times for the interpreter (MILKIT_PROFILE). Private to cpp/src/exec.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "milkit/ir/ir.h"

namespace milkit {

/// Per-op-type kernel times, printed to stderr at exit when MILKIT_PROFILE is set
/// (MILKIT_PROFILE=ops: one row per op, named with its output type and any fused op).
class Profile {
 public:
  /// The process-wide profile, or nullptr when MILKIT_PROFILE is not set.
  static Profile* get();
  /// Adds `us` microseconds to the op's row; `fused`: the ops the step ran with it ("" if none).
  void add(const Operation& op, const std::string& fused, double us);
  /// Adds `us` microseconds to the row named `what` (work the frame does around kernels).
  void add(const std::string& what, double us);
  ~Profile() = default;

 private:
  Profile();
  bool per_op_ = false;
  std::mutex m_;
  std::map<std::string, std::pair<double, int64_t>> by_type_;
};

}  // namespace milkit
