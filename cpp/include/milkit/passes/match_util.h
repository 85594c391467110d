// milkit/passes/match_util.h - helpers for pattern passes: a quick op-type scan and coremltools'
// guarded var replacement.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <vector>

#include "milkit/ir/ir.h"

namespace milkit {
namespace pass_util {

/// Whether any op of the function (nested blocks included) has one of the given types. Reads the
/// function's per-type op counts (no walk): passes whose patterns start at (or contain) an op of
/// these types return early on programs without one.
bool has_op_type(const Function& f, std::initializer_list<std::string_view> types);
/// Whether any function of the program has an op of one of the given types (see above).
bool has_op_type(const Program& p, std::initializer_list<std::string_view> types);

/// Whether `v` is one of the outputs of block `b` (such a var keeps its name and its producer: a
/// pattern that would remove or rename it does not apply).
bool is_block_output(const Var* v, const Block* b);

/// coremltools' _check_child_op_type: the op reading `op`'s only output when `op` has one output
/// read by exactly one input slot of an op of type `type`; else nullptr.
Operation* only_child(const Operation* op, std::string_view type);

/// The elements of a value as floats (a weight's elements, rounded as coremltools' fp32 math).
std::vector<float> floats(const Value& v);
/// A value of dtype `dt` and shape `shape` holding `f`.
Value from_floats(DataType dt, std::vector<int64_t> shape, const std::vector<float>& f);

/// coremltools' Var.can_be_replaced_by_var: every constexpr_* output that `old_var` depends on
/// (its nonreplaceable_vars_upstream; the outputs of shape ops stop the walk) is also a dependency
/// of `new_var`. Walks only the ancestors of the two vars.
bool can_be_replaced(const Var* old_var, const Var* new_var);

/// coremltools' Block.replace_uses_of_var_after_op with an anchor op that does not produce
/// `old_var`: the ops after `anchor` in its block (and the ops of their nested blocks) read
/// `new_var` instead of `old_var`, and so do the outputs of the anchor's block and of the nested
/// blocks of those later ops; a function output keeps its name (see replace_var). Returns whether
/// it changed anything.
bool replace_uses_after(Operation* anchor, Var* old_var, Var* new_var);

}  // namespace pass_util
}  // namespace milkit
