// Per-op-type kernel times for the interpreter, printed at exit when MILKIT_PROFILE is set.
#include "profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace milkit {

Profile* Profile::get() {
  static Profile* p = std::getenv("MILKIT_PROFILE") ? new Profile() : nullptr;
  return p;
}

void Profile::add(const Operation& op, const std::string& fused, double us) {
  if (!per_op_) {
    add(op.op_type(), us);
    return;
  }
  std::string key = op.op_type();
  if (!fused.empty()) key += "+" + fused;
  if (!op.outputs().empty()) key += " " + op.output(0)->type()->str();
  key += " " + op.output(0)->name();
  add(key, us);
}

void Profile::add(const std::string& what, double us) {
  std::lock_guard<std::mutex> lk(m_);
  auto& e = by_type_[what];
  e.first += us;
  e.second += 1;
}

Profile::Profile() {
  const char* e = std::getenv("MILKIT_PROFILE");
  per_op_ = e && std::strcmp(e, "ops") == 0;
  std::atexit([] {
    Profile* p = get();
    std::vector<std::pair<double, std::string>> rows;
    double total = 0;
    for (auto& kv : p->by_type_) {
      rows.emplace_back(kv.second.first, kv.first);
      total += kv.second.first;
    }
    std::sort(rows.rbegin(), rows.rend());
    std::fprintf(stderr, "milkit profile: %.1f ms in kernels\n", total / 1e3);
    for (auto& r : rows)
      std::fprintf(stderr, "  %-28s %10.1f ms %5.1f%%  (%lld calls)\n", r.second.c_str(),
                   r.first / 1e3, total > 0 ? 100.0 * r.first / total : 0.0,
                   static_cast<long long>(p->by_type_[r.second].second));
  });
}

}  // namespace milkit
