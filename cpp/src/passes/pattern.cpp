// coremltools' pattern detection over op graphs, shared by the fuse_gelu / fuse_prelu passes.
#include "milkit/passes/pattern.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>

namespace milkit {
namespace pass_util {

namespace {

std::vector<Operation*> consumers(const Var* v) {
  std::vector<Operation*> r;
  for (const Use& u : v->uses()) r.push_back(u.op);
  return r;
}

}  // namespace

void PatternMatch::add(const std::string& n, Operation* op) {
  by_name[n] = op;
  if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
}

bool detect_pattern(const std::vector<PNode>& pat, PatternMatch& m, Operation* op, int node,
                    Var* root) {
  const PNode& pn = pat[static_cast<size_t>(node < 0 ? 0 : node)];
  if (node >= 0 && (op->op_type() != pn.type || op->outputs().size() != 1)) return false;
  if (pn.children.empty()) {
    if (m.final_op && m.final_op != op) return false;
    m.add(pn.name, op);
    m.final_op = op;
    return true;
  }
  std::vector<Operation*> prog = consumers(node >= 0 ? op->output(0) : root);
  if (prog.size() != pn.children.size()) return false;
  std::vector<size_t> idx(pn.children.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  bool same = false;
  do {  // itertools.permutations order
    bool types_ok = true;
    for (size_t i = 0; i < idx.size() && types_ok; ++i)
      types_ok = prog[i]->op_type() == pat[static_cast<size_t>(pn.children[idx[i]])].type;
    if (!types_ok) continue;
    bool all = true;
    for (size_t i = 0; i < idx.size(); ++i)
      all = all && detect_pattern(pat, m, prog[i], pn.children[idx[i]], root);
    if (all) {
      same = true;
      break;
    }
  } while (std::next_permutation(idx.begin(), idx.end()));
  if (!same) return false;
  if (node >= 0) m.add(pn.name, op);
  return true;
}

int detect_pattern_at(const std::vector<PNode>& pat, Operation* op, Block& blk, PatternMatch& out,
                      Var*& root) {
  for (Var* in : op->args()) {
    if (!in) continue;
    PatternMatch m;
    if (!detect_pattern(pat, m, op, -1, in)) continue;
    for (Operation* o : m.ops) {
      if (o == m.final_op) continue;
      for (Var* v : o->outputs())
        for (Var* bo : blk.outputs())
          if (bo == v) return -1;
    }
    out = std::move(m);
    root = in;
    return 1;
  }
  return 0;
}

bool scalar_is(const Var* v, double val) {
  if (!v || !v->has_value() || v->value()->numel() != 1) return false;
  if (v->value()->dtype() == DataType::String) return false;
  return std::fabs(v->value()->as_double(0) - val) < 1e-3;
}

}  // namespace pass_util
}  // namespace milkit
