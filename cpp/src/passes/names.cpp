// Name sets and coremltools' name sanitizer.
#include "milkit/passes/names.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_set>

namespace milkit {
namespace pass_util {

NameSet::NameSet() : slots_(64) {}

void NameSet::reserve(size_t n) {
  while (slots_.size() < 2 * n) grow();
  names_.reserve(n);
}

size_t NameSet::find(std::string_view s, uint32_t h) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& sl = slots_[i];
    if (!sl.index) return i;
    if (sl.hash == h) {
      std::string_view n = names_[sl.index - 1];
      if (n.size() == s.size() && std::memcmp(n.data(), s.data(), s.size()) == 0) return i;
    }
  }
}

void NameSet::grow() {
  std::vector<Slot> old(slots_.size() * 2);
  old.swap(slots_);
  const size_t mask = slots_.size() - 1;
  for (const Slot& sl : old) {
    if (!sl.index) continue;
    size_t i = sl.hash & mask;
    while (slots_[i].index) i = (i + 1) & mask;
    slots_[i] = sl;
  }
}

bool NameSet::add(std::string_view s, bool copy) {
  const uint32_t h = static_cast<uint32_t>(std::hash<std::string_view>()(s));
  size_t i = find(s, h);
  if (slots_[i].index) return false;
  if (copy) {
    if (chunk_used_ + s.size() + 1 > chunk_cap_) {
      chunk_cap_ = std::max<size_t>(s.size() + 1, 64 * 1024);
      chunks_.emplace_back(new char[chunk_cap_]);
      chunk_used_ = 0;
    }
    char* d = chunks_.back().get() + chunk_used_;
    if (!s.empty()) std::memcpy(d, s.data(), s.size());
    d[s.size()] = '\0';
    chunk_used_ += s.size() + 1;
    s = std::string_view(d, s.size());
  }
  names_.push_back(s);
  slots_[i] = Slot{h, static_cast<uint32_t>(names_.size())};
  if (names_.size() * 2 > slots_.size()) grow();
  return true;
}

bool NameSet::insert(std::string_view s) { return add(s, true); }

bool NameSet::insert_view(std::string_view s) { return add(s, false); }

bool NameSet::contains(std::string_view s) const {
  const uint32_t h = static_cast<uint32_t>(std::hash<std::string_view>()(s));
  return slots_[find(s, h)].index != 0;
}

namespace {

// [A-Za-z0-9_]
struct IdentChars {
  bool t[256] = {};
  IdentChars() {
    for (int c = 'a'; c <= 'z'; ++c) t[c] = true;
    for (int c = 'A'; c <= 'Z'; ++c) t[c] = true;
    for (int c = '0'; c <= '9'; ++c) t[c] = true;
    t[static_cast<unsigned char>('_')] = true;
  }
};

bool is_reserved_mil_word(std::string_view n) {
  static const std::unordered_set<std::string_view> reserved = {
      "any",   "bool",  "program", "func",  "tensor", "list",   "dict",   "tuple",
      "true",  "false", "string",  "bf16",  "fp16",   "fp32",   "fp64",   "int8",
      "int16", "int32", "int64",   "uint8", "uint16", "uint32", "uint64", "state"};
  return n.size() <= 7 && reserved.count(n);
}

// Whether NameSanitizer keeps `name` as it is: [A-Za-z_][A-Za-z0-9_]* (or empty), not reserved.
bool kept_as_is(const std::string& name) {
  static const IdentChars ident;
  for (unsigned char c : name)
    if (!ident.t[c]) return false;
  if (!name.empty() && name[0] >= '0' && name[0] <= '9') return false;
  return !is_reserved_mil_word(name);
}

}  // namespace

bool NameSanitizer::sanitize_changed(const std::string& name, std::string& out, bool name_stays) {
  if (kept_as_is(name)) {
    if (name_stays)
      seen_.insert_view(name);
    else
      seen_.insert(name);
    return false;
  }
  std::string n;
  n.reserve(name.size());
  for (unsigned char c : name) {
    if ((c & 0xC0) == 0x80) continue;  // UTF-8 continuation byte: part of the previous code point
    n.push_back((std::isalnum(c) && c < 0x80) || c == '_' ? static_cast<char>(c) : '_');
  }
  if (!n.empty() && !(std::isalpha(static_cast<unsigned char>(n[0])) || n[0] == '_'))
    n = prefix_ + n;
  if (is_reserved_mil_word(n)) n += "_workaround";
  if (n == name) {
    if (name_stays)
      seen_.insert_view(name);
    else
      seen_.insert(name);
    return false;
  }
  if (seen_.contains(n)) {
    int idx = 0;
    n += "_" + std::to_string(idx);
    while (seen_.contains(n)) {
      ++idx;
      n += "_" + std::to_string(idx);
    }
  }
  seen_.insert(n);
  out = std::move(n);
  return true;
}

std::string NameSanitizer::sanitize(const std::string& name) {
  std::string out;
  return sanitize_changed(name, out) ? out : name;
}

}  // namespace pass_util
}  // namespace milkit
