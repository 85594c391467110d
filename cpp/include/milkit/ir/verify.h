// milkit/ir/verify.h - structural and type checks of a function.
#pragma once

#include <string>

#include "milkit/ir/ir.h"

namespace milkit {

/// Checks a function: SSA (every var defined once, before use, in scope), use lists, block
/// outputs defined, and each op's declared output types equal to what inference gives. With
/// `strict_names` (what serialization needs) op and var names must also be unique valid MIL
/// identifiers; user-given duplicate names are otherwise legal until dedup_op_and_var_names.
/// Throws VerifyError naming the function, op and var.
void verify(const Function& f, const std::string& name, bool strict_names = false);

/// Whether `s` is a MIL identifier: [A-Za-z_][A-Za-z0-9_@]*.
bool is_valid_identifier(const std::string& s);

}  // namespace milkit
