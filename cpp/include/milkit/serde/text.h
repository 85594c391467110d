// milkit/serde/text.h - MIL text in coremltools' print format.
#pragma once

#include <string>

#include "milkit/ir/ir.h"

namespace milkit {

/// "%x: (1, S, 64, fp32)(Tensor)" - a var as coremltools prints it.
std::string var_to_text(const Var& v);
/// One op line (nested blocks included), indented.
std::string op_to_text(const Operation& op, const std::string& indent);
/// A block: "block0() { ... } -> (%out)".
std::string block_to_text(const Block& b, const std::string& indent, int& block_counter);
/// A function: "main[CoreML7](%x: ...) { block0() {...} }".
std::string function_to_text(const Function& f, const std::string& name);
/// A whole program, as `print(prog)` in coremltools.
std::string program_to_text(const Program& p);
/// Shortest decimal text that reads back to the same float (numpy's float32 repr style).
std::string float_repr(float f);
/// Shortest decimal text that reads back to the same double (Python's repr).
std::string double_repr(double d);

}  // namespace milkit
