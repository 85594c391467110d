// common::fuse_linear_bias: linear(x, W, b) followed by its only user add/sub with a const
// operand c (c holds Dout elements, last dim Dout) becomes one linear, as coremltools does:
//   linear + c, c + linear -> linear(x, W, b + c);   linear - c -> linear(x, W, b - c);
//   c - linear -> linear(x, -W, c - b).
// The new linear, named after the add/sub's output, goes before the old linear and gets fresh
// weight and bias consts; both old ops are removed. The linear's output must not be a block
// output; weight and bias must be known. Arithmetic is done per element in the bias' dtype (fp16
// through fp32, like numpy). Nested blocks are rewritten until stable before their op; the whole
// function is repeated until nothing changes.
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

Operation* candidate(Operation* op) {
  if (op->op_type() != "linear") return nullptr;
  Var* out = op->output(0);
  if (is_block_output(out, op->parent()) || out->uses().size() != 1) return nullptr;
  Operation* child = out->uses()[0].op;
  return child->op_type() == "add" || child->op_type() == "sub" ? child : nullptr;
}

bool try_transform(Builder& b, Operation* lin, Operation* arith) {
  Var* ax = arith->input1("x");
  Var* ay = arith->input1("y");
  if (!ax->has_value() && !ay->has_value()) return false;
  bool is_sub = arith->op_type() == "sub";
  bool first = ax == lin->output(0);
  Var* w = lin->input1("weight");
  Var* lb = lin->input1("bias");
  if (!w || !lb || !w->has_value() || !lb->has_value()) return false;
  Var* other = first ? ay : ax;
  if (!other->has_value()) return false;
  const Value& lbv = *lb->value();
  const Value& cv = *other->value();
  if (lbv.rank() != 1 || lbv.numel() != cv.numel() || cv.rank() == 0) return false;
  int64_t dout = lbv.shape()[0];
  if (cv.shape().back() != dout) return false;
  std::vector<float> lbias = floats(lbv), c = floats(cv);
  if (is_sub) {
    auto& neg = first ? c : lbias;
    for (float& e : neg) e = -e;
  }
  for (size_t i = 0; i < lbias.size(); ++i) lbias[i] = lbias[i] + c[i];
  Value new_bias = make(lbv.dtype(), {dout}, lbias);
  Value new_w = *w->value();
  if (is_sub && !first) {
    std::vector<float> wf = floats(new_w);
    for (float& e : wf) e = -e;
    new_w = make(new_w.dtype(), new_w.shape(), wf);
  }
  b.set_insertion_point(lin->parent(), lin);
  b.set_location(lin->location());
  std::vector<Arg> args;
  args.push_back(Builder::arg("weight", std::move(new_w)));
  args.push_back(Builder::arg("bias", std::move(new_bias)));
  for (Arg& a : pass_util::inputs_except(*lin, {"weight", "bias"})) args.push_back(std::move(a));
  Var* nv = b.create("linear", args, arith->output(0)->name()).at(0);
  pass_util::replace_var(arith->output(0), nv);
  arith->parent()->erase(arith);
  lin->parent()->erase(lin);
  return true;
}

// One rewrite attempt at `op` (driven by pass_util::rewrite_ops).
bool step(Builder& b, Block& /*blk*/, Operation* op) {
  Operation* arith = candidate(op);
  return arith && try_transform(b, op, arith);
}

}  // namespace

/// Registers common::fuse_linear_bias.
void register_fuse_linear_bias(PassRegistry& r) {
  r.add("common::fuse_linear_bias",
        pass_util::rewrite_pass("common::fuse_linear_bias", {"linear"}, step));
}

}  // namespace milkit
