// The cache of widened weights (see weight_cache.h): an LRU list under one mutex; weights are
// decoded outside the lock.
#include "weight_cache.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "milkit/exec/plan.h"
#include "packed_weight.h"

namespace milkit {

namespace {

struct Cache {
  std::mutex mu;
  std::list<std::pair<const PackedWeight*, Tensor>> lru;  // most recent first
  std::unordered_map<const PackedWeight*, decltype(lru)::iterator> index;
  size_t bytes = 0;

  void drop_to(size_t limit) {
    while (bytes > limit && !lru.empty()) {
      bytes -= lru.back().second.nbytes();
      index.erase(lru.back().first);
      lru.pop_back();
    }
  }
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: weights may outlive static destruction
  return *c;
}

size_t mem_total() {
  static const size_t total = [] {
    std::ifstream f("/proc/meminfo");
    std::string key;
    size_t kb = 0;
    while (f >> key >> kb) {
      if (key == "MemTotal:") return kb * 1024;
      f.ignore(256, '\n');
    }
    return size_t{8} << 30;
  }();
  return total;
}

}  // namespace

namespace exec {

size_t env_megabytes(const char* name, size_t fallback) {
  const char* env = std::getenv(name);
  if (!env || !*env) return fallback;
  char* end = nullptr;
  const double mb = std::strtod(env, &end);
  if (end == env || !(mb >= 0)) return fallback;  // NaN fails mb >= 0 too
  return static_cast<size_t>(std::min(mb, 1024.0 * 1024 * 1024) * 1024 * 1024);
}

size_t weight_cache_limit() { return env_megabytes("MILKIT_WEIGHT_CACHE_MB", mem_total() / 4); }

Tensor widened(const PackedWeight& w) {
  Cache& c = cache();
  const size_t limit = weight_cache_limit();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.drop_to(limit);
    auto it = c.index.find(&w);
    if (it != c.index.end()) {
      c.lru.splice(c.lru.begin(), c.lru, it->second);
      return it->second->second;
    }
  }
  Tensor t = w.materialize(DataType::Float32);
  if (t.nbytes() > limit) return t;
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.index.count(&w)) return t;  // another thread widened it meanwhile
  c.bytes += t.nbytes();
  c.lru.emplace_front(&w, t);
  c.index[&w] = c.lru.begin();
  c.drop_to(limit);
  return t;
}

void forget_widened(const PackedWeight* w) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.index.find(w);
  if (it == c.index.end()) return;
  c.bytes -= it->second->second.nbytes();
  c.lru.erase(it->second);
  c.index.erase(it);
}

}  // namespace exec

size_t weight_cache_bytes() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.bytes;
}

}  // namespace milkit
