// common::fuse_gelu_exact: 0.5 * x * (1 + erf(x / sqrt(2))) -> gelu(x, mode="EXACT"), as
// coremltools does. The chain starts at real_div(x, ~sqrt(2)) or mul(x, ~1/sqrt(2)) (scalars within
// 1e-3), then erf, add(~1), then either mul(~0.5) -> mul(x), mul(x) -> mul(~0.5), or mul(with
// mul(x, ~0.5)); every intermediate output has exactly one consuming op and is not a block output.
// The gelu takes the last mul's output name and goes before the second-to-last matched op
// (coremltools' order). Nested blocks first; repeated until nothing changes.
#include <cmath>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

bool scalar_is(const Var* v, double val) {
  if (!v || !v->has_value() || v->value()->numel() != 1) return false;
  if (v->value()->dtype() == DataType::String) return false;
  return std::fabs(v->value()->as_double(0) - val) < 1e-3;
}

// The only consuming op of the single output of `op` when it has type `t` (coremltools'
// _check_child_op_type), else nullptr.
using pass_util::only_child;

bool has_input(const Operation* op, const Var* v) {
  return op->input1("x") == v || op->input1("y") == v;
}

bool try_fuse(Builder& b, Block& blk, Operation* op) {
  Var* ox = op->input1("x");
  Var* oy = op->input1("y");
  if (!ox->has_value() && !oy->has_value()) return false;
  Var* root = oy->has_value() ? ox : oy;
  if (op->op_type() == "real_div") {
    if (!scalar_is(oy, std::sqrt(2.0))) return false;
  } else if (!scalar_is(ox, std::pow(2.0, -0.5)) && !scalar_is(oy, std::pow(2.0, -0.5))) {
    return false;
  }
  std::vector<Operation*> chain = {op};
  Operation* erf = only_child(op, "erf");
  if (!erf) return false;
  chain.push_back(erf);
  Operation* add = only_child(erf, "add");
  if (!add) return false;
  if (!scalar_is(add->input1("x"), 1.0) && !scalar_is(add->input1("y"), 1.0)) return false;
  chain.push_back(add);
  Operation* mul = only_child(add, "mul");
  if (!mul) return false;
  Operation* last = nullptr;
  if (scalar_is(mul->input1("x"), 0.5) || scalar_is(mul->input1("y"), 0.5)) {
    chain.push_back(mul);
    last = only_child(mul, "mul");
    if (!last || !has_input(last, root)) return false;
    chain.push_back(last);
  } else if (has_input(mul, root)) {
    chain.push_back(mul);
    last = only_child(mul, "mul");
    if (!last || !(scalar_is(last->input1("x"), 0.5) || scalar_is(last->input1("y"), 0.5)))
      return false;
    chain.push_back(last);
  } else {
    Var* other = mul->input1("y") == add->output(0) ? mul->input1("x") : mul->input1("y");
    Operation* half = other->op();
    // coremltools fails on a missing producer or a half-mul with other consumers; skip instead.
    if (!half || half->op_type() != "mul") return false;
    if (!scalar_is(half->input1("x"), 0.5) && !scalar_is(half->input1("y"), 0.5)) return false;
    if (!has_input(half, root)) return false;
    if (half->output(0)->uses().size() != 1 || half->parent() != &blk) return false;
    chain.push_back(half);
    chain.push_back(mul);
    last = mul;
  }
  for (Operation* o : chain)
    if (o->parent() != &blk) return false;
  for (size_t i = 0; i + 1 < chain.size(); ++i)
    if (!chain[i]->output(0)->block_uses().empty()) return false;
  b.set_insertion_point(&blk, chain[chain.size() - 2]);
  b.set_location(op->location());
  std::vector<Arg> args = {Builder::arg("x", root),
                           Builder::arg("mode", Value::scalar_string("EXACT"))};
  Var* gelu = b.create("gelu", args, last->output(0)->name())[0];
  pass_util::replace_var(last->output(0), gelu);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    if (!(*it)->erased()) blk.erase(*it);
  }
  return true;
}

// One rewrite attempt at `op` (driven by pass_util::rewrite_ops).
bool step(Builder& b, Block& blk, Operation* op) {
  return (op->op_type() == "mul" || op->op_type() == "real_div") && try_fuse(b, blk, op);
}

}  // namespace

/// Registers common::fuse_gelu_exact.
void register_fuse_gelu_exact(PassRegistry& r) {
  r.add("common::fuse_gelu_exact",
        pass_util::rewrite_pass("common::fuse_gelu_exact", {"erf"}, step));
}

}  // namespace milkit
