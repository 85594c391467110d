// common::fuse_gelu_tanh_approximation: the tanh approximation of gelu -> gelu(x,
// mode="TANH_APPROXIMATION"), as coremltools does with its generic pattern matcher:
//   pattern 1: x * (0.5 * (tanh((0.044715 * x^3 + x) * 0.79788) + 1))
//   pattern 2: (0.5 * x) * (tanh((0.044715 * x^3 + x) * 0.79788) + 1)
// Matching follows the consumers of a candidate root var (an input of the op being visited): each
// var must have exactly as many consuming ops as in the pattern, of the same types (in some
// order); the pattern's last op may have any consumers. Constants are checked afterwards (scalars
// within 1e-3). No matched op but the last may output a block output. The gelu takes the last mul's
// output name and goes before the 0.5 mul. Pattern 1 runs to a fixed point, then pattern 2.
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"

namespace milkit {

namespace {

// A pattern op: name, type, and the pattern ops consuming its output (coremltools' child order).
struct PNode {
  const char* name;
  const char* type;
  std::vector<int> children;
};

// Index 0 is the root var (no op); its children are the ops reading it.
const std::vector<PNode> kPattern1 = {
    {"", "", {1, 3, 8}},          {"pow", "pow", {2}},     {"mul_1", "mul", {3}},
    {"add", "add", {4}},          {"mul_2", "mul", {5}},   {"tanh", "tanh", {6}},
    {"add_1", "add", {7}},        {"mul", "mul", {8}},     {"mul_3", "mul", {}}};
const std::vector<PNode> kPattern2 = {
    {"", "", {1, 3, 7}},          {"pow", "pow", {2}},     {"mul_1", "mul", {3}},
    {"add", "add", {4}},          {"mul_2", "mul", {5}},   {"tanh", "tanh", {6}},
    {"add_1", "add", {8}},        {"mul", "mul", {8}},     {"mul_3", "mul", {}}};

struct Match {
  std::map<std::string, Operation*> by_name;
  std::vector<Operation*> ops;  // the matched ops, each once
  Operation* final_op = nullptr;
  void add(const std::string& n, Operation* op) {
    by_name[n] = op;
    for (Operation* o : ops)
      if (o == op) return;
    ops.push_back(op);
  }
};

std::vector<Operation*> consumers(const Var* v) {
  std::vector<Operation*> r;
  for (const Use& u : v->uses()) r.push_back(u.op);
  return r;
}

// coremltools' _pattern_detected: `node` < 0 stands for the root var `root`.
bool detect(const std::vector<PNode>& pat, Match& m, Operation* op, int node, Var* root) {
  const PNode* pn = node >= 0 ? &pat[static_cast<size_t>(node)] : &pat[0];
  if (node >= 0) {
    if (op->op_type() != pn->type || op->outputs().size() != 1) return false;
  }
  std::vector<Operation*> prog_children = consumers(node >= 0 ? op->output(0) : root);
  if (pn->children.empty()) {
    if (m.final_op && m.final_op != op) return false;
    m.add(pn->name, op);
    m.final_op = op;
    return true;
  }
  if (prog_children.size() != pn->children.size()) return false;
  std::vector<int> combo = pn->children;  // permutations in itertools order (sorted indices)
  std::vector<size_t> idx(combo.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  bool same = false;
  do {
    bool types_ok = true;
    for (size_t i = 0; i < idx.size() && types_ok; ++i)
      types_ok = prog_children[i]->op_type() == pat[static_cast<size_t>(combo[idx[i]])].type;
    if (!types_ok) continue;
    bool all = true;
    for (size_t i = 0; i < idx.size(); ++i)
      all = all && detect(pat, m, prog_children[i], combo[idx[i]], root);
    if (all) {
      same = true;
      break;
    }
  } while (std::next_permutation(idx.begin(), idx.end()));
  if (!same) return false;
  if (node >= 0) m.add(pn->name, op);
  return true;
}

bool scalar_is(const Var* v, double val) {
  if (!v || !v->has_value() || v->value()->numel() != 1) return false;
  if (v->value()->dtype() == DataType::String) return false;
  return std::fabs(v->value()->as_double(0) - val) < 1e-3;
}

bool either_is(const Operation* op, double val) {
  return scalar_is(op->input1("y"), val) || scalar_is(op->input1("x"), val);
}

bool constraints_ok(const Match& m) {
  return either_is(m.by_name.at("mul"), 0.5) && scalar_is(m.by_name.at("pow")->input1("y"), 3.0) &&
         either_is(m.by_name.at("mul_1"), 0.044715) && either_is(m.by_name.at("mul_2"), 0.79788) &&
         either_is(m.by_name.at("add_1"), 1.0);
}

// coremltools' _detect_pattern on one op: tries each input as the root var; the first one whose
// consumers match decides (a block-output violation rejects the op).
bool detect_at(const std::vector<PNode>& pat, Operation* op, Block& blk, Match& out, Var*& root) {
  for (Var* in : op->args()) {
    if (!in) continue;
    Match m;
    if (!detect(pat, m, op, -1, in)) continue;
    for (Operation* o : m.ops) {
      if (o == m.final_op) continue;
      for (Var* v : o->outputs())
        for (Var* bo : blk.outputs())
          if (bo == v) return false;
    }
    out = std::move(m);
    root = in;
    return true;
  }
  return false;
}

bool fuse_one(Builder& b, Block& blk, const std::vector<PNode>& pat) {
  for (Operation* op : blk.ops()) {
    for (Block* nb : op->blocks())
      while (fuse_one(b, *nb, pat)) {
      }
    Match m;
    Var* root = nullptr;
    if (!detect_at(pat, op, blk, m, root) || !constraints_ok(m)) continue;
    // coremltools would fail on matched ops outside this block or with other consumers; skip.
    bool ok = true;
    for (Operation* o : m.ops) {
      ok = ok && o->parent() == &blk;
      if (o != m.final_op) ok = ok && o->output(0)->block_uses().empty();
    }
    if (!ok) continue;
    Operation* last = m.final_op;
    b.set_insertion_point(&blk, m.by_name.at("mul"));
    b.set_location(last->location());
    std::vector<Arg> args = {Builder::arg("x", root),
                             Builder::arg("mode", Value::scalar_string("TANH_APPROXIMATION"))};
    Var* gelu = b.create("gelu", args, last->output(0)->name())[0];
    pass_util::replace_var(last->output(0), gelu);
    std::set<Operation*> left(m.ops.begin(), m.ops.end());
    while (!left.empty()) {  // erase ops whose outputs no longer have users
      bool progress = false;
      for (auto it = left.begin(); it != left.end();) {
        if (!(*it)->output(0)->used()) {
          blk.erase(*it);
          it = left.erase(it);
          progress = true;
        } else {
          ++it;
        }
      }
      if (!progress) break;
    }
    return true;
  }
  return false;
}

class FuseGeluTanh : public Pass {
 public:
  void run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::fuse_gelu_tanh_approximation", {});
    if (!pass_util::has_op_type(p, {"tanh"})) return;  // nothing to match
    for (const auto* pat : {&kPattern1, &kPattern2})
      for (auto& [name, f] : p.functions()) {
        Builder b(*f);
        while (fuse_one(b, f->body(), *pat)) {
        }
      }
  }
};

}  // namespace

/// Registers common::fuse_gelu_tanh_approximation.
void register_fuse_gelu_tanh_approximation(PassRegistry& r) {
  r.add("common::fuse_gelu_tanh_approximation", [] { return std::make_unique<FuseGeluTanh>(); });
}

}  // namespace milkit
