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
#include "milkit/passes/pattern.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

using pass_util::PNode;
using pass_util::scalar_is;
using Match = pass_util::PatternMatch;

// Index 0 is the root var (no op); its children are the ops reading it.
const std::vector<PNode> kPattern1 = {
    {"", "", {1, 3, 8}},   {"pow", "pow", {2}},   {"mul_1", "mul", {3}},
    {"add", "add", {4}},   {"mul_2", "mul", {5}}, {"tanh", "tanh", {6}},
    {"add_1", "add", {7}}, {"mul", "mul", {8}},   {"mul_3", "mul", {}}};
const std::vector<PNode> kPattern2 = {
    {"", "", {1, 3, 7}},   {"pow", "pow", {2}},   {"mul_1", "mul", {3}},
    {"add", "add", {4}},   {"mul_2", "mul", {5}}, {"tanh", "tanh", {6}},
    {"add_1", "add", {8}}, {"mul", "mul", {8}},   {"mul_3", "mul", {}}};

bool either_is(const Operation* op, double val) {
  return scalar_is(op->input1("y"), val) || scalar_is(op->input1("x"), val);
}

bool constraints_ok(const Match& m) {
  return either_is(m.by_name.at("mul"), 0.5) && scalar_is(m.by_name.at("pow")->input1("y"), 3.0) &&
         either_is(m.by_name.at("mul_1"), 0.044715) && either_is(m.by_name.at("mul_2"), 0.79788) &&
         either_is(m.by_name.at("add_1"), 1.0);
}

bool fuse_one(Builder& b, Block& blk, const std::vector<PNode>& pat, bool& nested) {
  for (Operation* op : blk.ops()) {
    for (Block* nb : op->blocks())
      while (fuse_one(b, *nb, pat, nested)) nested = true;
    Match m;
    Var* root = nullptr;
    if (pass_util::detect_pattern_at(pat, op, blk, m, root) != 1 || !constraints_ok(m)) continue;
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
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::fuse_gelu_tanh_approximation", {});
    bool changed = false;
    bool nested = false;                                     // a change in a nested block
    if (!pass_util::has_op_type(p, {"tanh"})) return false;  // nothing to match
    for (const auto* pat : {&kPattern1, &kPattern2})
      for (auto& [name, f] : p.functions()) {
        Builder b(*f);
        while (fuse_one(b, f->body(), *pat, nested)) changed = true;
      }
    return changed || nested;
  }
};

}  // namespace

/// Registers common::fuse_gelu_tanh_approximation.
void register_fuse_gelu_tanh_approximation(PassRegistry& r) {
  r.add("common::fuse_gelu_tanh_approximation", [] { return std::make_unique<FuseGeluTanh>(); });
}

}  // namespace milkit
