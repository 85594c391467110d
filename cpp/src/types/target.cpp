#include "milkit/types/target.h"

namespace milkit {

std::string target_name(Target t) {
  switch (t) {
    case Target::iOS13: return "iOS13";
    case Target::iOS14: return "iOS14";
    case Target::iOS15: return "iOS15";
    case Target::iOS16: return "iOS16";
    case Target::iOS17: return "iOS17";
    case Target::iOS18: return "iOS18";
    case Target::iOS26: return "iOS26";
  }
  return "unknown";
}

std::string opset_name(Target t) { return "CoreML" + std::to_string(static_cast<int>(t) - 1); }

std::optional<Target> target_from_spec(int spec) {
  if (spec < 4 || spec > 10) return std::nullopt;
  return static_cast<Target>(spec);
}

std::optional<Target> target_from_opset(std::string_view opset) {
  if (opset.substr(0, 6) != "CoreML" || opset.size() < 7) return std::nullopt;
  int n = 0;
  for (char c : opset.substr(6)) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
    if (n > 100) return std::nullopt;
  }
  return target_from_spec(n + 1);
}

}  // namespace milkit
