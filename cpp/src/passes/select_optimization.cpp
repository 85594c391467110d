// common::select_optimization: simplifies select(cond, a, b) with a const cond, as coremltools
// does (when a and b are not both const):
//   1. every cond element true (false): an identity of a (b) replaces the select, provided a's
//      (b's) shape equals the broadcast shape of a and b; otherwise the identity is created and
//      removed again (its name is still used up, as in coremltools).
//   2. else, when a (or else b, with cond negated) is const and nowhere finite: the select becomes
//      add(c, other) where c is that const broadcast with cond, zero where cond is false; the add
//      takes the select's output name.
// Nested blocks first; one sweep.
#include <cmath>

#include "milkit/builder/builder.h"
#include "milkit/ops/common.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

// Whether broadcasting `a` with `b` (coremltools' broadcast_shapes) gives exactly a's shape.
bool keeps_shape(const Type* a, const Type* b) {
  const auto& sa = a->shape();
  const auto& sb = b->shape();
  if (sb.size() > sa.size()) return false;
  size_t off = sa.size() - sb.size();
  for (size_t i = 0; i < sb.size(); ++i) {
    Dim x = sa[off + i];
    Dim y = sb[i];
    if (x == y) continue;
    if (y->is_const() && y->value() == 1) continue;
    if (x->is_const() && x->value() > 1 && !y->is_const()) continue;
    return false;
  }
  return true;
}

bool all_nonfinite(const Value& v) {
  if (!is_float(v.dtype())) return false;
  for (int64_t i = 0; i < v.numel(); ++i)
    if (std::isfinite(v.as_double(i))) return false;
  return true;
}

bool try_select(Builder& b, Block& blk, Operation* op) {
  Var* cond = op->input1("cond");
  Var* a = op->input1("a");
  Var* bb = op->input1("b");
  if (!cond->has_value()) return false;
  if (a->has_value() && bb->has_value()) return false;
  const Value& cv = *cond->value();
  bool all_true = true;
  bool all_false = true;
  for (int64_t i = 0; i < cv.numel(); ++i) {
    bool t = cv.as_double(i) != 0.0;
    all_true = all_true && t;
    all_false = all_false && !t;
  }
  b.set_insertion_point(&blk, op);
  b.set_location(op->location());
  Var* out = op->output(0);
  if (all_true || all_false) {
    Var* pick = all_true ? a : bb;
    Var* id = b.op("identity", {{"x", pick}});
    if (keeps_shape(pick->type(), all_true ? bb->type() : a->type())) {
      pass_util::replace_var(out, id);
      blk.erase(op);
      return true;
    }
    blk.erase(id->op());
  }
  const Value* inf = nullptr;
  Var* other = nullptr;
  bool negate = false;
  if (a->has_value() && all_nonfinite(*a->value())) {
    inf = a->value().get();
    other = bb;
  } else if (bb->has_value() && all_nonfinite(*bb->value())) {
    inf = bb->value().get();
    other = a;
    negate = true;
  } else {
    return false;
  }
  std::vector<int64_t> shape = ops::broadcast_concrete(cv.shape(), inf->shape());
  std::vector<int64_t> ci = ops::broadcast_index(cv.shape(), shape);
  std::vector<int64_t> ii = ops::broadcast_index(inf->shape(), shape);
  std::vector<double> vals(ci.size());
  for (size_t i = 0; i < ci.size(); ++i) {
    bool keep = (cv.as_double(ci[i]) != 0.0) != negate;
    vals[i] = keep ? inf->as_double(ii[i]) : 0.0;
  }
  std::vector<Arg> args = {Builder::arg("x", Value::from_doubles(inf->dtype(), shape, vals)),
                           Builder::arg("y", other)};
  Var* add = b.create("add", args, out->name())[0];
  pass_util::replace_var(out, add);
  blk.erase(op);
  return true;
}

bool rewrite_block(Builder& b, Block& blk) {
  bool changed = false;
  for (Operation* op : blk.ops()) {
    if (op->erased()) continue;
    for (Block* nb : op->blocks()) changed = rewrite_block(b, *nb) || changed;
    if (op->op_type() == "select" && try_select(b, blk, op)) changed = true;
  }
  return changed;
}

}  // namespace

/// Registers common::select_optimization.
void register_select_optimization(PassRegistry& r) {
  r.add("common::select_optimization",
        pass_util::block_pass("common::select_optimization", {"select"}, rewrite_block));
}

}  // namespace milkit
