// milkit/symbolic/eval.h - evaluating symbolic dimensions with bound symbols.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "milkit/symbolic/expr.h"

namespace milkit {

/// Evaluates a dim with the given symbol bindings (floor division and modulo as Python's); false
/// when a symbol is unbound or a divisor is zero.
bool eval_dim(Dim d, const std::unordered_map<const Symbol*, int64_t>& env, int64_t& out);

}  // namespace milkit
