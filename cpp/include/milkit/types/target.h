// milkit/types/target.h - deployment targets and opsets.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace milkit {

/// A deployment target; the value is Core ML's specification version.
enum class Target : int {
  iOS13 = 4,
  iOS14 = 5,
  iOS15 = 6,
  iOS16 = 7,
  iOS17 = 8,
  iOS18 = 9,
  iOS26 = 10,
};

/// "iOS17".
std::string target_name(Target t);
/// The MIL opset string written for a specification version: iOS17 -> "CoreML7".
std::string opset_name(Target t);
/// Parses "CoreML7" back to a target.
std::optional<Target> target_from_opset(std::string_view opset);
/// Target from a specification version number (4..10).
std::optional<Target> target_from_spec(int spec);

}  // namespace milkit
