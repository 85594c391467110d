// milkit/passes/names.h - name sets and coremltools' name sanitizer, for the passes that see or
// rename every name of a function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace milkit {
namespace pass_util {

/// A set of names for passes that see every name of a function: open addressing over 8-byte
/// slots (hash, index of the name), names kept as views of their own copies in large chunks (no
/// allocation per name), or of the caller's strings (insert_view).
class NameSet {
 public:
  NameSet();
  NameSet(const NameSet&) = delete;
  NameSet& operator=(const NameSet&) = delete;
  /// Room for about `n` names without rehashing.
  void reserve(size_t n);
  /// Adds a copy of `s`; false when it was already there.
  bool insert(std::string_view s);
  /// Adds `s` itself, whose characters must stay put while the set lives (an IR object's name
  /// that nothing renames meanwhile); false when it was already there.
  bool insert_view(std::string_view s);
  /// Whether `s` is in the set.
  bool contains(std::string_view s) const;

 private:
  struct Slot {
    uint32_t hash = 0;
    uint32_t index = 0;  // 1 + position in names_; 0: empty
  };
  size_t find(std::string_view s, uint32_t h) const;
  bool add(std::string_view s, bool copy);
  void grow();
  std::vector<Slot> slots_;
  std::vector<std::string_view> names_;
  std::vector<std::unique_ptr<char[]>> chunks_;
  size_t chunk_used_ = 0, chunk_cap_ = 0;
};

/// coremltools' NameSanitizer: makes names match [A-Za-z_][A-Za-z0-9_]*, unique among the names
/// it has seen.
class NameSanitizer {
 public:
  /// `prefix` goes in front of names that do not start with a letter or '_'.
  explicit NameSanitizer(std::string prefix) : prefix_(std::move(prefix)) {}
  /// Every character (UTF-8 code point) outside [A-Za-z0-9_] becomes '_', the prefix is added when
  /// needed, reserved MIL words get "_workaround"; a changed name that was seen before gets
  /// "_0", "_0_1", "_0_1_2", ... (coremltools' accumulating suffix) until unique.
  std::string sanitize(const std::string& name);
  /// sanitize() without copying a name that stays: returns false when `name` is kept, else true
  /// with the new name in `out`. With `name_stays`, a kept name is remembered as a view of
  /// `name` (which must then stay put while the sanitizer lives).
  bool sanitize_changed(const std::string& name, std::string& out, bool name_stays = false);
  /// Room for about `n` names.
  void reserve(size_t n) { seen_.reserve(n); }

 private:
  std::string prefix_;
  NameSet seen_;
};

}  // namespace pass_util
}  // namespace milkit
