// common::fuse_conv_bias: folds a constant add/sub after conv / conv_transpose into the bias, as
// coremltools does, with its two patterns:
//  1. conv -> add/sub(const): the const must be a scalar or squeeze to at most one dim, with
//     size-1 spatial dims (and batch dim when of full rank); for sub only y is looked at (a const
//     x is not fused). The new bias (old bias + c, or c broadcast to Cout when there was none)
//     becomes a fresh "const_<n>" before the conv; the new conv is named after the add/sub
//     output. coremltools negates the sub's constant in place (its const op keeps the negated
//     value), and milkit does the same.
//  2. conv -> transpose -> add/sub(const), tried when 1 does not match: the const is a scalar or
//     has Cout elements on the transposed channel dim; c - transpose negates weight and bias.
//     A new conv (fresh weight and bias consts) and a transpose named after the add/sub output
//     replace the three ops.
// The conv (and transpose) output must not be a block output. Arithmetic is per element in the
// bias dtype (fp16 through fp32, like numpy). Nested blocks are rewritten until stable before
// their op; the whole function is repeated until nothing changes.
#include <algorithm>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

using pass_util::is_block_output;

using pass_util::floats;

Value make(DataType dt, std::vector<int64_t> shape, const std::vector<float>& f) {
  return pass_util::from_floats(dt, std::move(shape), f);
}

bool is_conv(const Operation* op) {
  return op->op_type() == "conv" || op->op_type() == "conv_transpose";
}

Operation* single_child(const Operation* op) {
  if (op->outputs().size() != 1 || op->output(0)->uses().size() != 1) return nullptr;
  return op->output(0)->uses()[0].op;
}

Operation* match_pattern(Operation* op) {
  if (!is_conv(op) || is_block_output(op->output(0), op->parent())) return nullptr;
  Operation* c = single_child(op);
  return c && (c->op_type() == "add" || c->op_type() == "sub") ? c : nullptr;
}

int rank_of(const Var* v) { return static_cast<int>(v->type()->shape().size()); }

bool try_add(Builder& b, Operation* conv, Operation* arith) {
  bool is_sub = arith->op_type() == "sub";
  Var* bias_var = is_sub
                      ? arith->input1("y")
                      : (arith->input1("x")->has_value() ? arith->input1("x") : arith->input1("y"));
  if (!bias_var->has_value()) return false;
  const Value bv = *bias_var->value();
  int rank = rank_of(conv->input1("x"));
  if (rank < 3 || rank > 5) return false;
  bool scalar = bv.rank() == 0;
  std::vector<int64_t> shape;
  if (scalar) {
    shape = {1};
  } else {
    for (int64_t d : bv.shape())
      if (d != 1) shape.push_back(d);
    if (shape.size() > 1) return false;
    if (bv.rank() == rank && bv.shape()[0] != 1) return false;
    int64_t prod = 1;
    for (int i = std::max(0, bv.rank() - (rank - 2)); i < bv.rank(); ++i) prod *= bv.shape()[i];
    if (prod != 1) return false;
  }
  std::vector<float> c = floats(bv);
  if (is_sub) {
    for (float& e : c) e = -e;
    if (!scalar)
      bias_var->set_value(std::make_shared<const Value>(make(bv.dtype(), bv.shape(), c)));
  }
  int64_t n = static_cast<int64_t>(c.size());
  Var* old_bias = conv->input1("bias");
  DataType dt = bv.dtype();
  std::vector<float> nb;
  if (!old_bias) {
    if (n == 1) {
      Var* w = conv->input1("weight");
      if (!w->has_value()) return false;
      int64_t cout = w->value()->shape()[conv->op_type() == "conv" ? 0 : 1];
      nb.assign(static_cast<size_t>(cout), c[0]);
    } else {
      nb = c;
    }
  } else {
    if (!old_bias->has_value() || old_bias->value()->rank() != 1) return false;
    std::vector<float> ob = floats(*old_bias->value());
    int64_t m = static_cast<int64_t>(ob.size());
    if (m != n && m != 1 && n != 1) return false;
    int64_t len = std::max(m, n);
    for (int64_t i = 0; i < len; ++i) nb.push_back(ob[m == 1 ? 0 : i] + c[n == 1 ? 0 : i]);
    DataType odt = old_bias->value()->dtype();
    dt = odt == dt ? odt : DataType::Float32;
  }
  Value nbv = make(dt, {static_cast<int64_t>(nb.size())}, nb);
  if (dt != DataType::Float32 && dt != DataType::Float16)
    nbv = nbv.cast(conv->input1("weight")->type()->dtype());
  b.set_insertion_point(conv->parent(), conv);
  b.set_location(conv->location());
  Var* nbias = b.add_const(std::make_shared<const Value>(std::move(nbv)));
  std::vector<Arg> args = {Builder::arg("bias", nbias)};
  for (Arg& a : pass_util::inputs_except(*conv, {"bias"})) args.push_back(std::move(a));
  Var* out = b.create(conv->op_type(), args, arith->output(0)->name()).at(0);
  pass_util::replace_var(arith->output(0), out);
  arith->parent()->erase(arith);
  conv->parent()->erase(conv);
  return true;
}

bool try_transpose(Builder& b, Operation* conv) {
  if (!is_conv(conv)) return false;
  Operation* tr = single_child(conv);
  if (!tr || tr->op_type() != "transpose") return false;
  Operation* arith = single_child(tr);
  if (!arith || (arith->op_type() != "add" && arith->op_type() != "sub")) return false;
  Var* ax = arith->input1("x");
  Var* ay = arith->input1("y");
  if (!ax->has_value() && !ay->has_value()) return false;
  const Value bv = ax->has_value() ? *ax->value() : *ay->value();
  bool first = ay->has_value();
  bool is_sub = arith->op_type() == "sub";
  const auto& oshape = conv->output(0)->type()->shape();
  if (oshape.size() < 2 || !oshape[1]->is_const()) return false;
  int64_t cout = oshape[1]->value();
  Var* w = conv->input1("weight");
  if (!w->has_value()) return false;
  const Value& wv = *w->value();
  Var* ob = conv->input1("bias");
  std::vector<float> cb;
  DataType bdt = wv.dtype();
  if (!ob) {
    cb.assign(static_cast<size_t>(cout), 0.0f);
  } else {
    if (!ob->has_value()) return false;
    cb = floats(*ob->value());
    bdt = ob->value()->dtype();
  }
  std::vector<float> c = floats(bv);
  if (bv.numel() != 1) {
    if (bv.numel() != cout) return false;
    int rank = rank_of(tr->output(0));
    std::vector<int64_t> perm = tr->input1("perm")->value()->to_ints();
    auto it = std::find(perm.begin(), perm.end(), 1);
    if (it == perm.end()) return false;
    int64_t cout_dim = (it - perm.begin()) - rank;
    if (bv.rank() + cout_dim < 0 || bv.shape()[static_cast<size_t>(bv.rank() + cout_dim)] != cout)
      return false;
  }
  if (is_sub) {
    auto& neg = first ? c : cb;
    for (float& e : neg) e = -e;
  }
  if (c.size() != 1 && c.size() != cb.size()) return false;
  for (size_t i = 0; i < cb.size(); ++i) cb[i] = cb[i] + c[c.size() == 1 ? 0 : i];
  Value nw = wv;
  if (is_sub && !first) {
    std::vector<float> wf = floats(wv);
    for (float& e : wf) e = -e;
    nw = make(wv.dtype(), wv.shape(), wf);
  }
  if (is_block_output(conv->output(0), conv->parent()) ||
      is_block_output(tr->output(0), tr->parent()))
    return false;
  b.set_insertion_point(conv->parent(), conv);
  b.set_location(conv->location());
  std::vector<Arg> cargs = {Builder::arg("weight", std::move(nw)),
                            Builder::arg("bias", make(bdt, {static_cast<int64_t>(cb.size())}, cb))};
  for (Arg& a : pass_util::inputs_except(*conv, {"weight", "bias"})) cargs.push_back(std::move(a));
  Var* nconv = b.create(conv->op_type(), cargs).at(0);
  b.set_insertion_point(tr->parent(), tr);
  b.set_location(tr->location());
  std::vector<Arg> targs = {Builder::arg("x", nconv)};
  for (Arg& a : pass_util::inputs_except(*tr, {"x"})) targs.push_back(std::move(a));
  Var* out = b.create("transpose", targs, arith->output(0)->name()).at(0);
  pass_util::replace_var(arith->output(0), out);
  arith->parent()->erase(arith);
  tr->parent()->erase(tr);
  conv->parent()->erase(conv);
  return true;
}

// One rewrite attempt at `op` (driven by pass_util::rewrite_ops).
bool step(Builder& b, Block& /*blk*/, Operation* op) {
  if (Operation* arith = match_pattern(op)) return try_add(b, op, arith);
  return try_transpose(b, op);
}

}  // namespace

/// Registers common::fuse_conv_bias.
void register_fuse_conv_bias(PassRegistry& r) {
  r.add("common::fuse_conv_bias",
        pass_util::rewrite_pass("common::fuse_conv_bias", {"conv", "conv_transpose"}, step));
}

}  // namespace milkit
