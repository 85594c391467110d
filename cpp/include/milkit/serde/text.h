// milkit/serde/text.h - MIL text in coremltools' print format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "milkit/ir/ir.h"

namespace milkit {

/// Options of the MIL text printer. The defaults give exactly coremltools' `print(prog)`.
///
/// With `consts = true` every const op is printed as its own line,
/// `%w: (2, fp32)*(Tensor) = const(val=[1.5, -2.0], name="w")`, with its exact value (floats in
/// the shortest text that reads back to the same bits, fp16 / bf16 / fp8 through their exact
/// float value, strings quoted and escaped, bools as True / False, sub-byte ints as ints), and
/// op arguments always refer to consts by name (`y=%w`) instead of inlining small values. Such
/// text parses back (parse_program) to an equal program. A const with more than
/// `max_const_elems` elements is printed elided, `val=<elided 4096 elems>`; its dtype and shape
/// are still in the printed type, and the parser reads it back as zeros of that dtype and shape.
struct ProgramTextOptions {
  bool consts = false;                 ///< Print const ops (with values) as their own lines.
  size_t max_const_elems = SIZE_MAX;   ///< Consts with more elements are printed elided.
};

/// "%x: (1, S, 64, fp32)(Tensor)" - a var as coremltools prints it.
std::string var_to_text(const Var& v);
/// One op line (nested blocks included), indented.
std::string op_to_text(const Operation& op, const std::string& indent);
/// One op line with printer options (consts printed when `opts.consts`).
std::string op_to_text(const Operation& op, const std::string& indent, const ProgramTextOptions& opts);
/// A block: "block0() { ... } -> (%out)".
std::string block_to_text(const Block& b, const std::string& indent, int& block_counter);
/// A block with printer options.
std::string block_to_text(const Block& b, const std::string& indent, int& block_counter,
                          const ProgramTextOptions& opts);
/// A function: "main[CoreML7](%x: ...) { block0() {...} }".
std::string function_to_text(const Function& f, const std::string& name);
/// A function with printer options.
std::string function_to_text(const Function& f, const std::string& name, const ProgramTextOptions& opts);
/// A whole program, as `print(prog)` in coremltools.
std::string program_to_text(const Program& p);
/// A whole program with printer options (see ProgramTextOptions).
std::string program_to_text(const Program& p, const ProgramTextOptions& opts);
/// The exact text of a value as the `val=` of a printed const: nested lists (a bare element for
/// a scalar) whose elements read back to the same bits (see ProgramTextOptions).
std::string value_to_exact_text(const Value& v);
/// A string as a double-quoted literal with backslash escapes (\\, \", \n, \t, \r, \xNN).
std::string quote_string(const std::string& s);
/// Shortest decimal text that reads back to the same float (numpy's float32 repr style).
std::string float_repr(float f);
/// Shortest decimal text that reads back to the same double (Python's repr).
std::string double_repr(double d);

}  // namespace milkit
