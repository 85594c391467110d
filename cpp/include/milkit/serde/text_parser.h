// milkit/serde/text_parser.h - reads MIL text (coremltools' print format) back into a Program.
//
// The grammar is the one program_to_text prints:
//
//   program  := function*
//   function := NAME '[' 'CoreML<N>' ']' '(' [vardecl {',' vardecl}] ')' '{' block '}'
//   block    := 'block<k>' '(' ')' '{' op* '}' '->' '(' [%var {',' %var}] ')'
//   op       := vardecl {',' vardecl} '=' OPTYPE '(' [arg {',' arg}] ')'
//   arg      := NAME '=' (%var | '(' %var {',' %var} ')' | literal | '<elided N elems>')
//   vardecl  := %var ':' type ['*' | '^'] '(' ('Tensor' | 'Scalar' | 'List' | 'State') ')'
//   type     := '(' dim {',' dim} ',' DTYPE ')' | '(' '*' ',' DTYPE ')' | DTYPE
//             | 'list' '[' type ',' (dim | '?') ']'
//   dim      := a Python integer expression over symbol names: + - * // % ** min() max()
//
// Every op is rebuilt through milkit::Builder (validation and type / value inference run again)
// under its printed op name and output names; each declared output type must equal the inferred
// one. Symbols are looked up by name: one Symbol per distinct name in a program, with the
// default range [1, inf) (ranges are not printed). A symbol name first seen in an op's declared
// output type that inference produces under another name (a fresh symbol such as `is12`) is
// bound to the inferred dim, so later uses of the name refer to it.
//
// Typing of inline values. coremltools' format prints small consts inline without their dtype
// (`y=2.0` may be fp16 or fp32). The parser picks, in order: the dtype of another input of the
// op in the same type domain (schema "T"); then coremltools' Python rules (bool -> bool,
// int -> int32, float -> fp32, str -> string) followed by the other dtypes the input accepts;
// the first choice for which the op validates and infers the declared output types wins. So
// inline values may come back with another dtype than the original (for instance int16 gather
// indices come back as int32). Text printed with ProgramTextOptions::consts is exact: every const
// is a line of its own with its dtype and shape in its declared type.
//
// An elided const value (`val=<elided N elems>`) is read back as zeros of its declared dtype and
// shape (empty strings for string consts), at most 2^31 bytes.
//
// In coremltools' default format, consts with more than 10 elements and consts passed in tuple
// inputs (concat's `values=(...)`) are printed only as `%name` references to a hidden const: such
// text cannot be parsed back (FormatError: undefined var) - print it with consts=true.
// Ops with nested blocks (control flow) are rejected: no milkit op takes blocks yet.
//
// Errors are milkit::FormatError with the line and column and what was expected or what went
// wrong ("line 3, column 17: expected ')' but found ','"); garbage never crashes or hangs.
#pragma once

#include <memory>
#include <string>

#include "milkit/ir/ir.h"

namespace milkit {

/// Parses a whole program printed by program_to_text (or coremltools' `print(prog)`).
/// Throws FormatError (with line and column) on malformed or inconsistent text.
std::shared_ptr<Program> parse_program(const std::string& text);

/// Parses text holding exactly one function and returns it; `name` (when not null) receives
/// the function's name. Throws FormatError like parse_program.
std::shared_ptr<Function> parse_function(const std::string& text, std::string* name = nullptr);

}  // namespace milkit
