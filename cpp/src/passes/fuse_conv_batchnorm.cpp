// common::fuse_conv_batchnorm: conv / conv_transpose followed by its only user batch_norm is
// folded into the weight and bias, as coremltools does: per output channel i,
//   scale = gamma[i] / sqrt(variance[i] + epsilon),
//   weight[i] *= scale,  bias[i] = scale * (bias[i] - mean[i]) + beta[i]
// (a missing conv bias is zeros). Each step is rounded like numpy: to fp16 when both operands are
// fp16, else to fp32, and the results to the weight dtype. For conv_transpose, weight element (ci,
// co, ...) belongs to output channel (ci / (Cin / groups)) * (Cout / groups) + co; coremltools'
// (Cout, Cin / groups) view of the transposed weight scales the wrong channels when groups > 1
// (milkit differs there on purpose). The new weight and bias are fresh "const_<n>" ops before the
// conv; the new conv, named after the batch_norm output, replaces both ops. The conv output must
// not be a block output and its weight must be known. coremltools fails on a batch_norm without
// gamma or beta; milkit leaves those unfused. Nested blocks are rewritten until stable before their
// op; the whole function is repeated until nothing changes.
#include <algorithm>
#include <cmath>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

using pass_util::is_block_output;

// A float scalar carrying the numpy dtype it would have (fp16 or fp32).
struct Num {
  float v;
  bool half;
};

Num rounded(float v, bool half) { return {half ? half_to_float(float_to_half(v)) : v, half}; }
Num operator+(Num a, Num b) { return rounded(a.v + b.v, a.half && b.half); }
Num operator-(Num a, Num b) { return rounded(a.v - b.v, a.half && b.half); }
Num operator*(Num a, Num b) { return rounded(a.v * b.v, a.half && b.half); }
Num operator/(Num a, Num b) { return rounded(a.v / b.v, a.half && b.half); }
Num sqrt_of(Num a) { return rounded(std::sqrt(a.v), a.half); }

struct Vec {
  std::vector<float> v;
  bool half;
  Num at(size_t i) const { return {v.at(i), half}; }
};

bool float_vec(const Var* var, Vec& out) {
  if (!var || !var->has_value()) return false;
  const Value& val = *var->value();
  if (val.dtype() != DataType::Float16 && val.dtype() != DataType::Float32) return false;
  out.half = val.dtype() == DataType::Float16;
  out.v.clear();
  for (int64_t i = 0; i < val.numel(); ++i) out.v.push_back(static_cast<float>(val.as_double(i)));
  return true;
}

Operation* match_pattern(Operation* op) {
  if (op->op_type() != "conv" && op->op_type() != "conv_transpose") return nullptr;
  Var* out = op->output(0);
  if (is_block_output(out, op->parent()) || out->uses().size() != 1) return nullptr;
  Operation* c = out->uses()[0].op;
  return c->op_type() == "batch_norm" ? c : nullptr;
}

bool try_transform(Builder& b, Operation* conv, Operation* bn) {
  Vec gamma, beta, mean, var, eps, w;
  if (!float_vec(bn->input1("gamma"), gamma) || !float_vec(bn->input1("beta"), beta) ||
      !float_vec(bn->input1("mean"), mean) || !float_vec(bn->input1("variance"), var) ||
      !float_vec(bn->input1("epsilon"), eps) || eps.v.size() != 1)
    return false;
  Var* wvar = conv->input1("weight");
  if (!wvar || !wvar->has_value()) return false;
  const Value& wv = *wvar->value();
  if ((wv.dtype() != DataType::Float16 && wv.dtype() != DataType::Float32) || wv.is_symbolic() ||
      !wv.buffer())
    return false;
  w.half = wv.dtype() == DataType::Float16;
  size_t wn = static_cast<size_t>(wv.numel());
  const auto& ws = wv.shape();
  if (ws.size() < 3 || ws.size() > 5) return false;
  Var* g = conv->input1("groups");
  int64_t groups = g && g->has_value() ? g->value()->as_int(0) : 1;
  if (groups <= 0) return false;
  bool deconv = conv->op_type() == "conv_transpose";
  int64_t cout = deconv ? ws[1] * groups : ws[0];
  int64_t cin = deconv ? ws[0] : ws[1] * groups;
  Vec bias{std::vector<float>(static_cast<size_t>(cout), 0.0f), w.half};
  if (Var* bv = conv->input1("bias")) {
    if (!bv->has_value()) return false;
    bias.v.clear();
    Value c = bv->value()->cast(wv.dtype());
    for (int64_t i = 0; i < c.numel(); ++i) bias.v.push_back(static_cast<float>(c.as_double(i)));
  }
  auto n = static_cast<size_t>(cout);
  if (bias.v.size() != n || gamma.v.size() < n || beta.v.size() < n || mean.v.size() < n ||
      var.v.size() < n)
    return false;
  int64_t k = 1;
  for (size_t i = 2; i < ws.size(); ++i) k *= ws[i];
  int64_t row = deconv ? (cin / groups) * k : static_cast<int64_t>(wn) / cout;
  if (row <= 0) return false;
  std::vector<Num> scale(n);
  std::vector<double> nb(n);
  for (size_t i = 0; i < n; ++i) {
    scale[i] = gamma.at(i) / sqrt_of(var.at(i) + eps.at(0));
    Num r = scale[i] * (bias.at(i) - mean.at(i)) + beta.at(i);
    nb[i] = r.v;
  }
  // The new weight is lazy: computed from the old one chunk by chunk when it is read (the
  // weight writer streams it, composed with a lazy fp16 cast when there is one), so folding
  // never holds a second copy of the weights. Element f of the (row-major) weight belongs to
  // output channel row_of(f).
  struct Fold {
    std::vector<float> scale;
    bool half, scale_half, deconv;
    int64_t row, k, cog, cin_g;
    size_t row_of(size_t f) const {
      if (!deconv) return f / static_cast<size_t>(row);
      auto rest = static_cast<int64_t>(f) / k;
      int64_t co = rest % cog, ci = rest / cog;
      return static_cast<size_t>((ci / cin_g) * cog + co);
    }
  };
  auto fold = std::make_shared<Fold>();
  fold->half = w.half;
  fold->scale_half = !scale.empty() && scale[0].half;
  fold->deconv = deconv;
  fold->row = row;
  fold->k = k;
  fold->cog = ws[1];
  fold->cin_g = deconv ? cin / groups : 1;
  for (const Num& sc : scale) fold->scale.push_back(sc.v);
  size_t esz = w.half ? 2 : 4;
  auto map = [fold](size_t first, size_t m, const uint8_t* in, uint8_t* out) {
    const Fold& fd = *fold;
    if (!fd.half) {
      const auto* src = reinterpret_cast<const float*>(in);
      auto* dst = reinterpret_cast<float*>(out);
      if (!fd.deconv) {
        // runs of one channel
        auto r = static_cast<size_t>(fd.row);
        for (size_t i = 0; i < m;) {
          size_t f = first + i, c = f / r, run = std::min(m - i, (c + 1) * r - f);
          float sc = fd.scale[c];
          for (size_t j = 0; j < run; ++j) dst[i + j] = src[i + j] * sc;
          i += run;
        }
      } else {
        for (size_t i = 0; i < m; ++i) dst[i] = src[i] * fd.scale[fd.row_of(first + i)];
      }
    } else {
      const auto* src = reinterpret_cast<const uint16_t*>(in);
      auto* dst = reinterpret_cast<uint16_t*>(out);
      for (size_t i = 0; i < m; ++i) {
        Num x{half_to_float(src[i]), true};
        dst[i] = float_to_half((x * Num{fd.scale[fd.row_of(first + i)], fd.scale_half}).v);
      }
    }
  };
  b.set_insertion_point(conv->parent(), conv);
  b.set_location(conv->location());
  Var* new_w = b.add_const(
      std::make_shared<const Value>(wv.dtype(), ws, Buffer::lazy_map(wv.buffer(), esz, esz, map)));
  Var* new_b =
      b.add_const(std::make_shared<const Value>(Value::from_doubles(wv.dtype(), {cout}, nb)));
  std::vector<Arg> args = {Builder::arg("weight", new_w), Builder::arg("bias", new_b)};
  for (Arg& a : pass_util::inputs_except(*conv, {"weight", "bias"})) args.push_back(std::move(a));
  Var* out = b.create(conv->op_type(), args, bn->output(0)->name()).at(0);
  pass_util::replace_var(bn->output(0), out);
  bn->parent()->erase(bn);
  conv->parent()->erase(conv);
  return true;
}

// One rewrite attempt at `op` (driven by pass_util::rewrite_ops).
bool step(Builder& b, Block& /*blk*/, Operation* op) {
  Operation* bn = match_pattern(op);
  return bn && try_transform(b, op, bn);
}

}  // namespace

/// Registers common::fuse_conv_batchnorm.
void register_fuse_conv_batchnorm(PassRegistry& r) {
  r.add("common::fuse_conv_batchnorm",
        pass_util::rewrite_pass("common::fuse_conv_batchnorm", {"batch_norm"}, step));
}

}  // namespace milkit
