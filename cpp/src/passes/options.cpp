// Option parsing shared by passes.
#include <cstdlib>

#include "milkit/passes/pass.h"
#include "milkit/types/error.h"

namespace milkit {
namespace pass_util {

int64_t int_option(const PassOptions& opts, const std::string& pass, const std::string& name,
                   int64_t dflt) {
  auto it = opts.find(name);
  if (it == opts.end()) return dflt;
  const std::string& s = it->second;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0')
    throw ValueError(pass + ": option '" + name + "' must be an int, got '" + s + "'");
  return v;
}

void check_options(const PassOptions& opts, const std::string& pass,
                   const std::vector<std::string>& known) {
  for (auto& [k, v] : opts) {
    bool ok = false;
    for (auto& n : known) ok = ok || n == k;
    if (!ok) throw ValueError(pass + ": unknown option '" + k + "'");
  }
}

}  // namespace pass_util
}  // namespace milkit
