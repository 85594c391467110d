// common::compose_conv1d: a 1-D convolution written as a 2-D one on a dummy height (TensorFlow's
// and some PyTorch backends' lowering) becomes one 1-D conv again, as coremltools does.
//   pattern 1: expand_dims(x, axes=[-2] or [2]) -> conv -> squeeze(axes=[-2] or [2]), the
//     squeezed dim known to be 1, becomes conv(x) named after the squeeze output;
//   pattern 2: expand_dims(x, axes=[-3] or [1]) -> transpose(perm=(0,3,1,2)) -> conv ->
//     transpose(perm=(0,2,3,1)) -> squeeze(axes=[-3] or [1]) becomes transpose(x, (0,2,1)) ->
//     conv -> transpose(., (0,2,1)), named after the first transpose, the conv and the squeeze.
// x has rank 3, each op of the chain feeds exactly one input of the next, and no output but the
// last is a block output. The new conv reads the old conv's pad_type, groups and bias, the weight
// squeezed on axis -2 (a new squeeze before the conv), and the last element of strides and
// dilations and the last two of pad (new consts, created in coremltools' order). When the
// replacement would drop a constexpr dependency the new ops stay unused, as in coremltools.
// milkit also requires the chain to start at the conv's x and the weight's height to be 1 (the
// squeeze of the weight fails in coremltools otherwise), and, in pattern 2, the squeezed dim to be
// 1 (coremltools does not check it there).
// Nested blocks are rewritten until stable before their op; the function is swept until nothing
// changes.
#include <algorithm>
#include <string>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

using pass_util::only_child;

// The single axis of an expand_dims / squeeze given as a one-element list, if it is a or b.
bool one_axis_in(const Operation* op, int64_t a, int64_t b, int64_t& axis) {
  Var* ax = op->input1("axes");
  if (!ax || !ax->has_value() || ax->value()->rank() != 1 || ax->value()->numel() != 1)
    return false;
  axis = ax->value()->as_int(0);
  return axis == a || axis == b;
}

bool perm_is(const Operation* t, const std::vector<int64_t>& want) {
  Var* p = t->input1("perm");
  if (!p || !p->has_value()) return false;
  std::vector<int64_t> perm = p->value()->to_ints();
  if (perm.size() != want.size()) return false;
  for (size_t i = 0; i < perm.size(); ++i)
    if ((perm[i] < 0 ? perm[i] + 4 : perm[i]) != want[i]) return false;
  return true;
}

bool dim_is_one(const Type* t, int64_t axis) {
  if (!t->has_rank()) return false;
  int64_t r = t->rank();
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return false;
  Dim d = t->shape()[static_cast<size_t>(axis)];
  return d->is_const() && d->value() == 1;
}

bool is_block_output(const Operation* op, const Block& blk) {
  return std::any_of(op->outputs().begin(), op->outputs().end(),
                     [&](const Var* v) { return pass_util::is_block_output(v, &blk); });
}

// The conv pieces shared by both patterns: the weight squeeze and the new 1-D conv.
Var* make_conv1d(Builder& b, Block& blk, Operation* conv, Var* x, const std::string& name) {
  b.set_insertion_point(&blk, conv);
  b.set_location(conv->location());
  std::vector<Arg> sargs = {Builder::arg("x", conv->input1("weight")),
                            Builder::arg("axes", Value::int_list({-2}))};
  Var* w = b.create("squeeze", sargs).at(0);
  std::vector<int64_t> strides = conv->input1("strides")->value()->to_ints();
  std::vector<int64_t> pad = conv->input1("pad")->value()->to_ints();
  std::vector<int64_t> dil = conv->input1("dilations")->value()->to_ints();
  std::vector<Arg> args = {Builder::arg("x", x),
                           Builder::arg("pad_type", Value(*conv->input1("pad_type")->value())),
                           Builder::arg("groups", Value(*conv->input1("groups")->value()))};
  if (Var* bias = conv->input1("bias")) args.push_back(Builder::arg("bias", bias));
  args.push_back(Builder::arg("weight", w));
  args.push_back(Builder::arg("strides", Value::int_list({strides.back()})));
  args.push_back(Builder::arg("pad", Value::int_list({pad[pad.size() - 2], pad.back()})));
  args.push_back(Builder::arg("dilations", Value::int_list({dil.back()})));
  return b.create("conv", args, name).at(0);
}

bool conv_ok(const Operation* conv, const Var* in) {
  if (conv->input1("x") != in) return false;
  for (const char* n : {"strides", "pad", "dilations", "pad_type", "groups"}) {
    Var* v = conv->input1(n);
    if (!v || !v->has_value()) return false;
  }
  if (conv->input1("strides")->value()->numel() < 1 || conv->input1("pad")->value()->numel() < 2 ||
      conv->input1("dilations")->value()->numel() < 1)
    return false;
  return dim_is_one(conv->input1("weight")->type(), -2);
}

bool try_pattern1(Builder& b, Block& blk, Operation* ex) {
  int64_t axis = 0;
  if (!one_axis_in(ex, -2, 2, axis)) return false;
  Operation* conv = only_child(ex, "conv");
  if (!conv || conv->parent() != &blk || !conv_ok(conv, ex->output(0))) return false;
  Operation* sq = only_child(conv, "squeeze");
  if (!sq || sq->parent() != &blk || !one_axis_in(sq, -2, 2, axis)) return false;
  if (!dim_is_one(sq->input1("x")->type(), axis)) return false;
  if (is_block_output(ex, blk) || is_block_output(conv, blk)) return false;
  Var* out = make_conv1d(b, blk, conv, ex->input1("x"), sq->output(0)->name());
  if (!pass_util::can_be_replaced(sq->output(0), out)) return false;
  pass_util::replace_var(sq->output(0), out);
  for (Operation* op : {sq, conv, ex}) blk.erase(op);
  return true;
}

bool try_pattern2(Builder& b, Block& blk, Operation* ex) {
  int64_t axis = 0;
  if (!one_axis_in(ex, -3, 1, axis)) return false;
  Operation* t1 = only_child(ex, "transpose");
  if (!t1 || t1->parent() != &blk || !perm_is(t1, {0, 3, 1, 2})) return false;
  Operation* conv = only_child(t1, "conv");
  if (!conv || conv->parent() != &blk || !conv_ok(conv, t1->output(0))) return false;
  Operation* t2 = only_child(conv, "transpose");
  if (!t2 || t2->parent() != &blk || !perm_is(t2, {0, 2, 3, 1})) return false;
  Operation* sq = only_child(t2, "squeeze");
  if (!sq || sq->parent() != &blk || !one_axis_in(sq, -3, 1, axis)) return false;
  if (!dim_is_one(sq->input1("x")->type(), axis)) return false;
  for (Operation* op : {ex, t1, conv, t2})
    if (is_block_output(op, blk)) return false;
  b.set_insertion_point(&blk, ex);
  b.set_location(ex->location());
  std::vector<Arg> targs = {Builder::arg("x", ex->input1("x")),
                            Builder::arg("perm", Value::int_list({0, 2, 1}))};
  Var* nt1 = b.create("transpose", targs, t1->output(0)->name()).at(0);
  Var* nconv = make_conv1d(b, blk, conv, nt1, conv->output(0)->name());
  b.set_insertion_point(&blk, t2);
  b.set_location(t2->location());
  std::vector<Arg> t2args = {Builder::arg("x", nconv),
                             Builder::arg("perm", Value::int_list({0, 2, 1}))};
  Var* out = b.create("transpose", t2args, sq->output(0)->name()).at(0);
  if (!pass_util::can_be_replaced(sq->output(0), out)) return false;
  pass_util::replace_var(sq->output(0), out);
  for (Operation* op : {sq, t2, conv, t1, ex}) blk.erase(op);
  return true;
}

bool step(Builder& b, Block& blk, Operation* op) {
  if (op->op_type() != "expand_dims") return false;
  const Type* xt = op->input1("x")->type();
  if (!xt->has_rank() || xt->rank() != 3) return false;
  return try_pattern1(b, blk, op) || try_pattern2(b, blk, op);
}

}  // namespace

/// Registers common::compose_conv1d.
void register_compose_conv1d(PassRegistry& r) {
  r.add("common::compose_conv1d", pass_util::rewrite_pass("common::compose_conv1d", {"conv"}, step,
                                                          pass_util::OpScan::Function));
}

}  // namespace milkit
