// The pass manager: runs passes in order, skipping a rerun that would change nothing.
#include <string>
#include <utility>
#include <vector>

#include "milkit/ir/verify.h"
#include "milkit/passes/pass.h"
#include "milkit/types/error.h"

namespace milkit {

void PassManager::add(const std::string& name, PassOptions options) {
  passes_.emplace_back(name, std::move(options));
}

namespace {

// Whether every function of `p` is marked clean for pass `name` (Function::mark_clean) and no
// change has touched it since.
bool all_clean(const Program& p, const std::string& name) {
  for (auto& [fname, f] : p.functions())
    if (!f->is_clean(name, &p)) return false;
  return true;
}

}  // namespace

std::vector<std::string> PassManager::run(Program& p, bool verify_each, bool skip_unknown,
                                          std::vector<std::string>* changed) const {
  const PassRegistry& reg = PassRegistry::instance();
  std::vector<std::string> skipped;
  for (auto& [name, opts] : passes_) {
    if (!reg.has(name)) {
      if (!skip_unknown) throw ValueError("unknown graph pass '" + name + "'");
      skipped.push_back(name);
      continue;
    }
    // The clean marks are per function and read Function::epoch, which every IR change raises:
    // a mark stays valid only while no pass (or other code) has touched the function since.
    const bool skippable =
        reg.traits(name).skip_rerun_when_unchanged && opts.empty() && !p.functions().empty();
    if (skippable && all_clean(p, name)) continue;
    const bool did_change = reg.create(name)->run(p, opts);
    if (did_change && changed) changed->push_back(name);
    if (skippable && !did_change)
      for (auto& [fname, f] : p.functions()) f->mark_clean(name, &p);
    if (verify_each)
      for (auto& [fname, f] : p.functions()) verify(*f, fname);
  }
  return skipped;
}

}  // namespace milkit
