// milkit/passes/replace_util.h - coremltools' guarded var replacement, for passes.
#pragma once

#include "milkit/ir/ir.h"

namespace milkit {
namespace pass_util {

/// coremltools' Var.can_be_replaced_by_var: every constexpr_* output that `old_var` depends on
/// (its nonreplaceable_vars_upstream; the outputs of shape ops stop the walk) is also a dependency
/// of `new_var`. Walks only the ancestors of the two vars.
bool can_be_replaced(const Var* old_var, const Var* new_var);

/// coremltools' Block.replace_uses_of_var_after_op with an anchor op that does not produce
/// `old_var`: the ops after `anchor` in its block (and the ops of their nested blocks) read
/// `new_var` instead of `old_var`, and so do the outputs of the anchor's block and of the nested
/// blocks of those later ops; a function output keeps its name (see replace_var).
void replace_uses_after(Operation* anchor, Var* old_var, Var* new_var);

}  // namespace pass_util
}  // namespace milkit
