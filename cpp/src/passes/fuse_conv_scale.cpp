// common::fuse_conv_scale: conv / conv_transpose followed by its only user mul / real_div with a
// known operand s is folded into the weight and bias, as coremltools does. s is a scalar (rank 0
// or shape (1,)), or holds Cout elements in the shape (1, Cout, 1...) (weight's rank) or
// (Cout, 1...) (one less). conv / s uses 1/s; s / conv is left alone (coremltools folds it as conv
// * (1/s), which changes the numbers). The new conv, named after the mul/div output, takes fresh
// weight and bias consts (a missing bias becomes zeros) and goes before the old conv; both old ops
// are removed. For conv_transpose the per-channel scale goes to output channel (ci / (Cin /
// groups)) * (Cout / groups) + co of weight element (ci, co, ...). coremltools uses its (Cout, Cin
// / groups) view of the transposed weight, which puts the scales on the wrong channels when groups
// > 1 (found by running the program before and after the pass); milkit differs there on purpose and
// matches it for groups == 1. Numbers: s (or 1/s) is rounded to the weight dtype, then each product
// is rounded to it, which is what numpy does in fp32 and fp16. The conv output must not be a block
// output. Nested blocks are rewritten until stable before their op; the whole function is repeated
// until nothing changes.
#include <algorithm>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

using pass_util::is_block_output;

// x rounded to the float dtype `dt`.
double round_to(DataType dt, double x) { return Value::from_doubles(dt, {}, {x}).as_double(0); }

Operation* match_pattern(Operation* op) {
  if (op->op_type() != "conv" && op->op_type() != "conv_transpose") return nullptr;
  Var* out = op->output(0);
  if (is_block_output(out, op->parent()) || out->uses().size() != 1) return nullptr;
  Operation* c = out->uses()[0].op;
  return c->op_type() == "mul" || c->op_type() == "real_div" ? c : nullptr;
}

bool try_transform(Builder& b, Operation* conv, Operation* sop) {
  Var* sx = sop->input1("x");
  Var* sy = sop->input1("y");
  if (!sx->has_value() && !sy->has_value()) return false;
  const Value sv = sx->has_value() ? *sx->value() : *sy->value();
  bool scalar = sv.rank() == 0 || (sv.rank() == 1 && sv.shape()[0] == 1);
  Var* w = conv->input1("weight");
  if (!w->has_value()) return false;
  const Value& wv = *w->value();
  DataType dt = wv.dtype();
  if (dt != DataType::Float32 && dt != DataType::Float16) return false;
  Var* g = conv->input1("groups");
  int64_t groups = g && g->has_value() ? g->value()->as_int(0) : 1;
  bool deconv = conv->op_type() == "conv_transpose";
  const auto& ws = wv.shape();
  if (ws.size() < 3 || groups <= 0) return false;
  int64_t cout = deconv ? ws[1] * groups : ws[0];
  int64_t cin = deconv ? ws[0] : ws[1] * groups;
  if (!scalar) {
    if (sv.numel() != cout) return false;
    if (sv.shape().size() == ws.size()) {
      if (sv.shape()[1] != cout) return false;
    } else if (sv.shape().size() + 1 == ws.size()) {
      if (sv.shape()[0] != cout) return false;
    } else {
      return false;
    }
  }
  bool div = sop->op_type() == "real_div";
  // s / conv(x) is not conv(x) * (1/s): coremltools fuses it so, milkit leaves it alone
  if (div && sop->input1("y") == conv->output(0)) return false;
  std::vector<double> s = sv.to_doubles();
  for (double& e : s) e = round_to(dt, div ? 1.0 / e : e);
  Var* bias = conv->input1("bias");
  std::vector<double> bv;
  if (!bias) {
    bv.assign(static_cast<size_t>(cout), 0.0);
  } else {
    if (!bias->has_value()) return false;
    bv = bias->value()->cast(dt).to_doubles();
    if (static_cast<int64_t>(bv.size()) != cout) return false;
  }
  for (size_t i = 0; i < bv.size(); ++i) bv[i] *= s[scalar ? 0 : i];
  int64_t k = 1;
  for (size_t i = 2; i < ws.size(); ++i) k *= ws[i];
  if (dt == DataType::Float32 && !deconv && wv.raw()) {
    // fp32 conv weights straight from the buffer: a float product rounds exactly like the
    // double product rounded to fp32 below (and like numpy)
    const int64_t n = wv.numel();
    const int64_t per = n / cout;
    std::vector<uint8_t> bytes(static_cast<size_t>(n) * sizeof(float));
    const float* src = reinterpret_cast<const float*>(wv.raw());
    float* dst = reinterpret_cast<float*>(bytes.data());
    for (int64_t c = 0; c < cout; ++c) {
      const float sc = static_cast<float>(s[scalar ? 0 : static_cast<size_t>(c)]);
      for (int64_t i = c * per; i < (c + 1) * per; ++i) dst[i] = src[i] * sc;
    }
    b.set_insertion_point(conv->parent(), conv);
    b.set_location(conv->location());
    std::vector<Arg> args = {Builder::arg("weight", Value(dt, ws, Buffer::take(std::move(bytes)))),
                             Builder::arg("bias", Value::from_doubles(dt, {cout}, bv))};
    for (Arg& a : pass_util::inputs_except(*conv, {"weight", "bias"})) args.push_back(std::move(a));
    Var* out = b.create(conv->op_type(), args, sop->output(0)->name()).at(0);
    pass_util::replace_var(sop->output(0), out);
    sop->parent()->erase(sop);
    conv->parent()->erase(conv);
    return true;
  }
  std::vector<double> nw = wv.to_doubles();
  if (scalar) {
    for (double& e : nw) e *= s[0];
  } else if (!deconv) {
    int64_t per = static_cast<int64_t>(nw.size()) / cout;
    for (size_t f = 0; f < nw.size(); ++f) nw[f] *= s[static_cast<int64_t>(f) / per];
  } else {
    // weight (Cin, Cout / groups, K...): element (ci, co) feeds output channel
    // (ci / (Cin / groups)) * (Cout / groups) + co
    int64_t cog = ws[1];
    int64_t cig = cin / groups;
    if (cig == 0) return false;
    for (int64_t ci = 0; ci < cin; ++ci)
      for (int64_t co = 0; co < cog; ++co)
        for (int64_t kk = 0; kk < k; ++kk)
          nw[static_cast<size_t>((ci * cog + co) * k + kk)] *=
              s[static_cast<size_t>((ci / cig) * cog + co)];
  }
  b.set_insertion_point(conv->parent(), conv);
  b.set_location(conv->location());
  std::vector<Arg> args = {Builder::arg("weight", Value::from_doubles(dt, ws, nw)),
                           Builder::arg("bias", Value::from_doubles(dt, {cout}, bv))};
  for (Arg& a : pass_util::inputs_except(*conv, {"weight", "bias"})) args.push_back(std::move(a));
  Var* out = b.create(conv->op_type(), args, sop->output(0)->name()).at(0);
  pass_util::replace_var(sop->output(0), out);
  sop->parent()->erase(sop);
  conv->parent()->erase(conv);
  return true;
}

// One rewrite attempt at `op` (driven by pass_util::rewrite_ops).
bool step(Builder& b, Block& /*blk*/, Operation* op) {
  Operation* sop = match_pattern(op);
  return sop && try_transform(b, op, sop);
}

}  // namespace

/// Registers common::fuse_conv_scale.
void register_fuse_conv_scale(PassRegistry& r) {
  r.add("common::fuse_conv_scale",
        pass_util::rewrite_pass("common::fuse_conv_scale", {"conv", "conv_transpose"}, step));
}

}  // namespace milkit
