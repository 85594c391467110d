// common::fuse_prelu: y = a * relu(-1 * x) + relu(x) becomes prelu(x, alpha=-a), as coremltools
// does with its generic pattern matcher:
//   pattern 1: x (rank 4, BCHW) -> {mul(-1) -> relu -> mul(a), relu} -> add, with a const a of
//     shape (C,1,1) or (1,C,1,1): prelu(x, -a.flatten()) named after the add output;
//   pattern 2: x -> transpose(perm=[0,2,3,1]) -> the same graph with a of shape (C,), (1,C),
//     (1,1,C) or (1,1,1,C): prelu(x, -a.flatten()) (automatic name) -> transpose(perm) named
//     after the add output.
// Matching follows the consumers of a candidate root var (each input of the op being visited, in
// order; the first whose consumers match decides): every var must have exactly as many consuming
// input slots as in the pattern, of the same op types in some order, until the add (which may have
// any consumers and must be reached from both branches). No matched op but the add may output a
// block output. Then the constants are checked: -1 within 1e-3 on either side of the first mul,
// a (either side of the second mul, x first) as above, the add's output of rank 4. New ops go
// before the add; the matched ops are removed; after each fusion the block is scanned again from
// its start. Pattern 1 runs to a fixed point over each function, then pattern 2.
// coremltools raises when a's length differs from x's (known) channel count; milkit leaves
// those alone.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/pattern.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

using pass_util::PNode;
using pass_util::scalar_is;
using Match = pass_util::PatternMatch;

// Index 0 is the root var (no op); its children are the ops reading it.
const std::vector<PNode> kPattern1 = {{"", "", {1, 4}},       {"neg", "mul", {2}},
                                      {"relu1", "relu", {3}}, {"alpha_mul", "mul", {5}},
                                      {"relu2", "relu", {5}}, {"out_op", "add", {}}};
const std::vector<PNode> kPattern2 = {
    {"", "", {1}},          {"transpose", "transpose", {2, 5}}, {"neg", "mul", {3}},
    {"relu1", "relu", {4}}, {"alpha_mul", "mul", {6}},          {"relu2", "relu", {6}},
    {"out_op", "add", {}}};

const Value* alpha_of(const Operation* mul) {
  for (const char* n : {"x", "y"}) {
    Var* v = mul->input1(n);
    if (v && v->has_value()) return v->value().get();
  }
  return nullptr;
}

bool rank_is(const Var* v, int r) { return v->type()->has_rank() && v->type()->rank() == r; }

bool constraints_ok(const Match& m, int pattern, const Var* root) {
  if (pattern == 1 && !rank_is(root, 4)) return false;
  if (pattern == 2) {
    Var* perm = m.at("transpose")->input1("perm");
    if (!perm || !perm->has_value() || perm->value()->to_ints() != std::vector<int64_t>{0, 2, 3, 1})
      return false;
  }
  if (!rank_is(m.at("out_op")->output(0), 4)) return false;
  const Operation* neg = m.at("neg");
  if (!scalar_is(neg->input1("y"), -1) && !scalar_is(neg->input1("x"), -1)) return false;
  const Value* a = alpha_of(m.at("alpha_mul"));
  if (!a || a->dtype() == DataType::String) return false;
  const auto& sh = a->shape();
  if (pattern == 1) {
    if (sh.size() != 3 && sh.size() != 4) return false;
    if (a->numel() != sh[sh.size() - 3]) return false;
  } else {
    if (sh.empty() || a->numel() != sh.back()) return false;
  }
  // milkit only: coremltools' prelu raises unless alpha's length is x's channel count
  const Type* xt = root->type();
  if (!xt->has_rank() || xt->rank() < 2) return false;
  Dim c = xt->shape()[1];
  return c->is_const() && c->value() == a->numel();
}

void erase_matched(Block& blk, const Match& m) {
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
}

void transform(Builder& b, Block& blk, const Match& m, int pattern, Var* root) {
  Operation* last = m.final_op;
  const Value* a = alpha_of(m.at("alpha_mul"));
  std::vector<double> neg = a->to_doubles();
  for (double& v : neg) v = -v;
  Value alpha = Value::from_doubles(a->dtype(), {a->numel()}, neg);
  b.set_insertion_point(&blk, last);
  b.set_location(last->location());
  const std::string out_name = last->output(0)->name();
  std::vector<Arg> args = {Builder::arg("x", root), Builder::arg("alpha", alpha)};
  Var* out = b.create("prelu", args, pattern == 1 ? out_name : "").at(0);
  if (pattern == 2) {
    std::vector<Arg> targs = {
        Builder::arg("x", out),
        Builder::arg("perm", Value(*m.at("transpose")->input1("perm")->value()))};
    out = b.create("transpose", targs, out_name).at(0);
  }
  pass_util::replace_var(last->output(0), out);
  erase_matched(blk, m);
}

bool is_root_child_type(const std::vector<PNode>& pat, const std::string& t) {
  for (int c : pat[0].children)
    if (t == pat[static_cast<size_t>(c)].type) return true;
  return false;
}

bool fuse_one(Builder& b, Block& blk, const std::vector<PNode>& pat, int pattern, bool& nested) {
  for (Operation* op : blk.ops()) {
    if (op->erased()) continue;
    for (Block* nb : op->blocks())
      while (fuse_one(b, *nb, pat, pattern, nested)) nested = true;
    // the root var is an input of `op`, so `op` is one of its consumers
    if (!is_root_child_type(pat, op->op_type())) continue;
    Match m;
    Var* root = nullptr;
    if (pass_util::detect_pattern_at(pat, op, blk, m, root) != 1 ||
        !constraints_ok(m, pattern, root))
      continue;
    bool ok = true;  // coremltools would fail on matched ops of other blocks
    for (Operation* o : m.ops) ok = ok && o->parent() == &blk;
    if (!ok) continue;
    transform(b, blk, m, pattern, root);
    return true;
  }
  return false;
}

class FusePrelu : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::fuse_prelu", {});
    bool changed = false;
    bool nested = false;         // a change in a nested block
    std::vector<Function*> fns;  // both patterns need relu
    for (auto& [name, f] : p.functions())
      if (pass_util::has_op_type(*f, {"relu"})) fns.push_back(f.get());
    int pattern = 1;
    for (const auto* pat : {&kPattern1, &kPattern2}) {
      for (Function* f : fns) {
        Builder b(*f);
        while (fuse_one(b, f->body(), *pat, pattern, nested)) changed = true;
      }
      ++pattern;
    }
    return changed || nested;
  }
};

}  // namespace

/// Registers common::fuse_prelu.
void register_fuse_prelu(PassRegistry& r) {
  r.add("common::fuse_prelu", [] { return std::make_unique<FusePrelu>(); });
}

}  // namespace milkit
