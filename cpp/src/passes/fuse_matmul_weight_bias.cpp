// common::fuse_matmul_weight_bias: matmul with one known rank-2 operand (the weight, used only by
// this matmul) followed by its only user add/sub with a known operand c becomes a linear, as
// coremltools does, except where coremltools' rewrite changes the numbers (see try_transform: the
// weight as matmul's x, and c - matmul). c must squeeze to (Dout,) (leading dims all 1); sub
// negates c (whatever side the matmul is on, as coremltools does). With the weight as y:
//   linear(x', W', c) named after the add/sub output, x' = x transposed when transpose_x,
//   W' = W when transpose_y else transpose(W);
// with the weight as x: transpose(linear(y', W', c)) where the final transpose takes the output
// name. Everything goes before the matmul; the matmul and add/sub are removed. The matmul's
// other operand must have rank >= 2. coremltools fails when the matmul output is also a block
// output; milkit leaves it alone. Nested blocks are rewritten until stable before their op;
// the whole function is repeated until nothing changes.
#include <numeric>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

int rank_of(const Var* v) { return static_cast<int>(v->type()->shape().size()); }

Operation* candidate(Operation* op) {
  if (op->op_type() != "matmul") return nullptr;
  Var* out = op->output(0);
  if (out->uses().size() != 1 || !out->block_uses().empty()) return nullptr;
  Operation* child = out->uses()[0].op;
  return child->op_type() == "add" || child->op_type() == "sub" ? child : nullptr;
}

bool flag(const Operation* op, const char* name) {
  Var* v = op->input1(name);
  return v && v->has_value() && v->value()->as_int(0) != 0;
}

Var* transpose_last2(Builder& b, Var* v, const std::string& name = "") {
  std::vector<int64_t> perm(static_cast<size_t>(rank_of(v)));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[perm.size() - 2], perm[perm.size() - 1]);
  std::vector<Arg> args = {Builder::arg("x", v), Builder::arg("perm", Value::int_list(perm))};
  return b.create("transpose", args, name).at(0);
}

bool try_transform(Builder& b, Operation* mm, Operation* arith) {
  Var* mx = mm->input1("x");
  Var* my = mm->input1("y");
  if (!mx->has_value() && !my->has_value()) return false;
  Var* ax = arith->input1("x");
  Var* ay = arith->input1("y");
  if (!ax->has_value() && !ay->has_value()) return false;
  bool x_is_weight = mx->has_value();
  // Deliberate differences from coremltools (which fuses these and changes the numbers, found by
  // running programs before and after the pass): with the weight as matmul's x, coremltools'
  // transpose(linear(y', W', c)) adds c along the rows instead of the last dim; and c - matmul
  // becomes matmul - c. milkit leaves both unfused.
  if (x_is_weight) return false;
  if (arith->op_type() == "sub" && arith->input1("y") == mm->output(0)) return false;
  Var* weight = x_is_weight ? mx : my;
  Var* lin_x = x_is_weight ? my : mx;
  bool t_weight = flag(mm, x_is_weight ? "transpose_x" : "transpose_y");
  bool t_x = flag(mm, x_is_weight ? "transpose_y" : "transpose_x");
  if (rank_of(lin_x) < 2 || rank_of(weight) != 2) return false;
  if (weight->uses().size() > 1) return false;
  const auto& wshape = weight->value()->shape();
  int64_t d_out = t_weight ? wshape[0] : wshape[1];
  const Value& bias = ax->has_value() ? *ax->value() : *ay->value();
  std::vector<int64_t> bshape = bias.shape();
  if (bshape.size() > 1) {
    for (size_t i = 0; i + 1 < bshape.size(); ++i)
      if (bshape[i] != 1) return false;
    std::vector<int64_t> sq;
    for (int64_t d : bshape)
      if (d != 1) sq.push_back(d);
    bshape = sq;
  }
  if (bshape.size() != 1 || bshape[0] != d_out) return false;
  Value bias_v = bias.reshaped(bshape);
  if (arith->op_type() == "sub") {
    std::vector<double> f = bias_v.to_doubles();
    for (double& e : f) e = -e;
    bias_v = Value::from_doubles(bias_v.dtype(), bshape, f);
  }
  std::string out_name = arith->output(0)->name();
  b.set_insertion_point(mm->parent(), mm);
  b.set_location(mm->location());
  Var* result;
  if (x_is_weight) {
    Var* xt = t_x ? lin_x : transpose_last2(b, lin_x);
    Var* w = t_weight ? transpose_last2(b, weight) : weight;
    std::vector<Arg> args = {Builder::arg("x", xt), Builder::arg("weight", w),
                             Builder::arg("bias", std::move(bias_v))};
    Var* l = b.create("linear", args).at(0);
    result = transpose_last2(b, l, out_name);
  } else {
    Var* xn = t_x ? transpose_last2(b, lin_x) : lin_x;
    Var* w = t_weight ? weight : transpose_last2(b, weight);
    std::vector<Arg> args = {Builder::arg("x", xn), Builder::arg("weight", w),
                             Builder::arg("bias", std::move(bias_v))};
    result = b.create("linear", args, out_name).at(0);
  }
  pass_util::replace_var(arith->output(0), result);
  arith->parent()->erase(arith);
  mm->parent()->erase(mm);
  return true;
}

// One rewrite attempt at `op` (driven by pass_util::rewrite_ops).
bool step(Builder& b, Block& /*blk*/, Operation* op) {
  Operation* arith = candidate(op);
  return arith && try_transform(b, op, arith);
}

}  // namespace

/// Registers common::fuse_matmul_weight_bias.
void register_fuse_matmul_weight_bias(PassRegistry& r) {
  r.add("common::fuse_matmul_weight_bias",
        pass_util::rewrite_pass("common::fuse_matmul_weight_bias", {"matmul"}, step));
}

}  // namespace milkit
