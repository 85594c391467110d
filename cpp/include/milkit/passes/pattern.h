// milkit/passes/pattern.h - coremltools' pattern detection over op graphs (the fuse_gelu and
// fuse_prelu style: a tree of op types hanging off a root var, children matched in any order).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "milkit/ir/ir.h"

namespace milkit {
namespace pass_util {

/// A pattern op: its name in the match, its op type, and the pattern ops consuming its output
/// (coremltools' child order). Index 0 of a pattern is the root var (no op); its children are the
/// ops reading it.
struct PNode {
  const char* name;           ///< Name of the op in the match ("" for the root).
  const char* type;           ///< Op type ("" for the root).
  std::vector<int> children;  ///< Indices of the pattern ops reading the output.
};

/// The ops a pattern matched.
struct PatternMatch {
  std::map<std::string, Operation*> by_name;  ///< Matched op of each pattern name.
  std::vector<Operation*> ops;                ///< The matched ops, each once, in match order.
  Operation* final_op = nullptr;              ///< The op of the pattern's leaf.
  /// Records `op` under pattern name `n`.
  void add(const std::string& n, Operation* op);
  /// The op matched under pattern name `n` (std::out_of_range when absent).
  Operation* at(const char* n) const { return by_name.at(n); }
};

/// coremltools' _pattern_detected: whether `op` (pattern node `node`; `node` < 0 stands for the
/// root var `root`) and the ops reading its output match the pattern, trying the readers in
/// itertools.permutations order. A failed branch leaves what it recorded in `m` (as coremltools).
bool detect_pattern(const std::vector<PNode>& pat, PatternMatch& m, Operation* op, int node,
                    Var* root);

/// coremltools' _detect_pattern at one op: tries each input of `op` as the root var; 1 when one
/// matches (the match in `out`, the root in `root`), 0 when none does, -1 when the first match is
/// rejected because a matched op other than the last outputs a block output of `blk` (which ends
/// the search at this op).
int detect_pattern_at(const std::vector<PNode>& pat, Operation* op, Block& blk, PatternMatch& out,
                      Var*& root);

/// coremltools' _check_var_scalar_value(v, val) with tolerance 1e-3: `v` is a known non-string
/// scalar within 1e-3 of `val`.
bool scalar_is(const Var* v, double val);

}  // namespace pass_util
}  // namespace milkit
