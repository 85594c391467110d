// milkit/passes/rewrite.h - the rewrite driver most passes use, and the var / op helpers of
// their rewrites.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/ir/ir.h"
#include "milkit/passes/pass.h"

namespace milkit {
namespace pass_util {

/// Applies `fn` to every block of a function, innermost blocks first.
void for_each_block(Function& f, const std::function<void(Block&)>& fn);
/// Whether an op must be kept even when its outputs are unused (state writes).
bool has_side_effects(const Operation& op);
/// The driver of most rewrites: sweeps every block (an op's nested blocks first, each to a fixed
/// point), calling `step` on each live op that has no nested blocks; repeats the sweep of the
/// function body until no `step` call reports a change. Returns whether any `step` call reported
/// a change.
bool rewrite_ops(Function& f, const std::function<bool(Builder&, Block&, Operation*)>& step);
/// The op's present inputs as builder arguments, except the named ones (for rebuilding an op with
/// some inputs replaced).
std::vector<Arg> inputs_except(const Operation& op, std::initializer_list<std::string_view> skip);
/// Replaces every two-op chain that `match` finds (it maps a first op to the second op of the
/// chain, or nullptr) with one new `op_type` op on the first op's input `x`, taking the second
/// op's output name and uses; repeats until nothing matches, nested blocks included. Returns
/// whether it replaced any chain.
bool fuse_unary_chains(Function& f, const std::function<Operation*(Operation*)>& match,
                       const std::string& op_type);
/// Whether `v` is an output of a function body.
bool is_function_output(const Var* v);
/// Whether `v` is an input of a function.
bool is_function_input(const Var* v);
/// coremltools' Block.replace_uses_of_var_after_op(anchor_op=old_var.op, ...): every use of
/// `old_var` (ops and block outputs) reads `new_var` instead, and when `old_var` is an output of a
/// function body `new_var` takes its name (ValueError if `new_var` is a function input with
/// another name).
void replace_var(Var* old_var, Var* new_var);

/// A step of rewrite_ops: one rewrite attempt at an op; true when it changed the program.
using RewriteStep = std::function<bool(Builder&, Block&, Operation*)>;

/// Where a pass made by rewrite_pass looks for the op types its patterns need.
enum class OpScan {
  Program,   ///< rewrite every function when any function has such an op
  Function,  ///< rewrite each function that has such an op
};

/// The factory of a pass that takes no options and drives `step` with rewrite_ops over the
/// functions that may match (see OpScan; every function when `types` is empty); the pass reports
/// whether any step changed the program. Options given to it raise ValueError naming `name`.
PassFactory rewrite_pass(std::string name, std::vector<std::string> types, RewriteStep step,
                         OpScan scan = OpScan::Program);

/// A rewrite of a function body (its nested blocks are the rewrite's business); true when it
/// changed the program.
using BlockRewrite = std::function<bool(Builder&, Block&)>;

/// Like rewrite_pass, for a pass that calls `rewrite` once on each function body it looks at,
/// with a builder of the function.
PassFactory block_pass(std::string name, std::vector<std::string> types, BlockRewrite rewrite,
                       OpScan scan = OpScan::Program);

}  // namespace pass_util
}  // namespace milkit
