// The pass registry: every pass by name, with what it declares about itself.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "milkit/passes/pass.h"
#include "milkit/types/error.h"

namespace milkit {

const PassRegistry& PassRegistry::instance() {
  static const PassRegistry* reg = [] {
    auto* r = new PassRegistry();
    register_all_passes(*r);
    return r;
  }();
  return *reg;
}

void PassRegistry::add(const std::string& name, PassFactory f, PassTraits traits) {
  passes_[name] = Entry{std::move(f), traits};
}

const PassRegistry::Entry& PassRegistry::entry(const std::string& name) const {
  auto it = passes_.find(name);
  if (it == passes_.end()) throw ValueError("unknown graph pass '" + name + "'");
  return it->second;
}

std::unique_ptr<Pass> PassRegistry::create(const std::string& name) const {
  return entry(name).factory();
}

const PassTraits& PassRegistry::traits(const std::string& name) const { return entry(name).traits; }

std::vector<std::string> PassRegistry::names() const {
  std::vector<std::string> r;
  for (auto& [n, e] : passes_) r.push_back(n);
  return r;
}

}  // namespace milkit
