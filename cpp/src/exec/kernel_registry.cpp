// The kernel registry: a kernel per op type.
#include <string>
#include <string_view>
#include <vector>

#include "milkit/exec/kernel.h"

namespace milkit {

void register_all_kernels(KernelRegistry& r);

const KernelRegistry& KernelRegistry::instance() {
  static const KernelRegistry reg = [] {
    KernelRegistry r;
    register_all_kernels(r);
    return r;
  }();
  return reg;
}

void KernelRegistry::add(const std::string& op_type, KernelDef def) { kernels_[op_type] = def; }

const KernelDef* KernelRegistry::find(std::string_view op_type) const {
  auto it = kernels_.find(op_type);
  return it == kernels_.end() ? nullptr : &it->second;
}

std::vector<std::string> KernelRegistry::names() const {
  std::vector<std::string> r;
  for (auto& kv : kernels_) r.push_back(kv.first);
  return r;
}

}  // namespace milkit
