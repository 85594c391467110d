// Elementwise chains fused into conv steps: finding them in a block plan, applying them.
#include "fused_chain.h"

#include <algorithm>
#include <cstring>
#include <unordered_set>
#include <utility>

#include "kernels/vec_math.h"
#include "milkit/exec/threads.h"
#include "milkit/types/datatype.h"
#include "plan_steps.h"

namespace milkit {

namespace {

using Kind = FusedChain::Kind;
using Link = FusedChain::Link;

/// The binary link of `l` over m values: q = f(q, other) (f(other, q) when swapped), `other` the
/// head's values h or the scalar l.c.
template <typename F>
void binary(const Link& l, float* q, const float* h, int64_t m, F f) {
  if (l.head) {
    if (l.swap)
      vmath::map2(h, q, q, m, f);
    else
      vmath::map2(q, h, q, m, f);
  } else {
    const float c = l.c;
    if (l.swap)
      vmath::map(q, q, m, [c, f](float v) { return f(c, v); });
    else
      vmath::map(q, q, m, [c, f](float v) { return f(v, c); });
  }
}

/// One link over m values in place; the lambdas are those of the ops' kernels.
void run_link(const Link& l, float* q, const float* h, int64_t m) {
  switch (l.kind) {
    case Kind::Add:
      binary(l, q, h, m, [](float a, float b) { return a + b; });
      break;
    case Kind::Sub:
      binary(l, q, h, m, [](float a, float b) { return a - b; });
      break;
    case Kind::Mul:
      binary(l, q, h, m, [](float a, float b) { return a * b; });
      break;
    case Kind::Div:
      binary(l, q, h, m, [](float a, float b) { return a / b; });
      break;
    case Kind::Max:
      binary(l, q, h, m, [](float a, float b) { return vmath::np_max(a, b); });
      break;
    case Kind::Min:
      binary(l, q, h, m, [](float a, float b) { return vmath::np_min(a, b); });
      break;
    case Kind::Relu:
      vmath::map(q, q, m, [](float x) { return vmath::vrelu(x); });
      break;
    case Kind::Relu6:
      vmath::map(q, q, m, [](float x) { return vmath::vrelu6(x); });
      break;
    case Kind::Silu:
      vmath::map(q, q, m, [](float x) { return vmath::vsilu(x); });
      break;
    case Kind::Sigmoid:
      vmath::map(q, q, m, [](float x) { return vmath::vsigmoid(x); });
      break;
    case Kind::HardSigmoid: {
      const float a = l.c, b = l.c2;
      vmath::map(q, q, m, [a, b](float x) { return vmath::vhard_sigmoid(x, a, b); });
      break;
    }
  }
}

/// Whether `v` is fp16's value of itself.
bool half_exact(float v) {
  float r = v;
  round_to_half(&r, 1);
  return std::memcmp(&r, &v, sizeof v) == 0;
}

/// The scalar fp32 constant of ref `r`, if it is one.
bool scalar_const(int32_t r, const std::vector<Tensor>& consts, float& out) {
  if (r == kAbsent || !is_const_ref(r)) return false;
  const Tensor& t = consts[const_index(r)];
  if (!t.defined() || t.dtype() != DataType::Float32 || t.numel() != 1) return false;
  out = t.data<float>()[0];
  return true;
}

/// The link `st` (an op of the chain) makes reading the chain value `cur`, the head `head`
/// besides; false when the op is not one a chain takes in this form.
bool link_of(const Step& st, const Var* cur, const Var* head, const std::vector<Tensor>& consts,
             bool half, Link& l) {
  static const std::pair<const char*, Kind> kUnary[] = {{"relu", Kind::Relu},
                                                        {"relu6", Kind::Relu6},
                                                        {"silu", Kind::Silu},
                                                        {"sigmoid", Kind::Sigmoid}};
  static const std::pair<const char*, Kind> kBinary[] = {
      {"add", Kind::Add},      {"sub", Kind::Sub},     {"mul", Kind::Mul},
      {"real_div", Kind::Div}, {"maximum", Kind::Max}, {"minimum", Kind::Min}};
  const Operation& op = *st.op;
  const auto& args = op.args();
  if (op.outputs().size() != 1 || !op.blocks().empty() || op.output(0)->type() != head->type())
    return false;
  const std::string& t = op.op_type();
  for (const auto& u : kUnary)
    if (t == u.first) {
      l.kind = u.second;
      l.round = u.second != Kind::Relu && u.second != Kind::Relu6;  // exact on fp16 values
      return args.size() == 1 && args[0] == cur;
    }
  if (t == "sigmoid_hard") {
    l.kind = Kind::HardSigmoid;
    return args.size() == 3 && args[0] == cur && scalar_const(st.args[1], consts, l.c) &&
           scalar_const(st.args[2], consts, l.c2);
  }
  for (const auto& b : kBinary) {
    if (t != b.first) continue;
    if (args.size() != 2 || (args[0] == cur) == (args[1] == cur)) return false;
    l.kind = b.second;
    l.swap = args[1] == cur;
    const size_t other = l.swap ? 0 : 1;
    if (args[other] == head) {
      l.head = true;
    } else if (!scalar_const(st.args[other], consts, l.c)) {
      return false;
    }
    // maximum / minimum of fp16 values give fp16 values
    l.round =
        !((l.kind == Kind::Max || l.kind == Kind::Min) && (l.head || !half || half_exact(l.c)));
    return true;
  }
  return false;
}

/// Whether the first `len` ops of `ops` can fuse: the head and every result before the last are
/// read only by these ops, and are neither block outputs nor read by nested blocks.
bool closed(const Var* head, const std::vector<const Operation*>& ops, size_t len) {
  std::unordered_set<const Operation*> in(ops.begin(),
                                          ops.begin() + static_cast<std::ptrdiff_t>(len));
  auto inside = [&](const Var* v) {
    if (!v->block_uses().empty()) return false;
    for (const Use& u : v->uses())
      if (!in.count(u.op)) return false;
    return true;
  };
  if (!inside(head)) return false;
  for (size_t i = 0; i + 1 < len; ++i)
    if (!inside(ops[i]->output(0))) return false;
  return true;
}

/// The chain of the steps after steps[i] (a conv), or null.
std::unique_ptr<FusedChain> chain_after(const std::vector<Step>& steps, size_t i,
                                        const std::vector<Tensor>& consts) {
  const Var* head = steps[i].op->output(0);
  if (!head->type()->is_tensor()) return nullptr;
  const DataType dt = head->type()->dtype();
  if (dt != DataType::Float32 && dt != DataType::Float16) return nullptr;
  auto ch = std::make_unique<FusedChain>();
  ch->half = dt == DataType::Float16;
  const Var* cur = head;
  for (size_t j = i + 1; j < steps.size(); ++j) {
    Link l;
    if (!link_of(steps[j], cur, head, consts, ch->half, l)) break;
    ch->ops.push_back(steps[j].op);
    ch->links.push_back(l);
    cur = steps[j].op->output(0);
  }
  size_t len = ch->ops.size();
  while (len > 0 && !closed(head, ch->ops, len)) --len;
  if (len == 0) return nullptr;
  ch->ops.resize(len);
  ch->links.resize(len);
  for (const Link& l : ch->links) ch->reads_head = ch->reads_head || l.head;
  return ch;
}

}  // namespace

void FusedChain::apply(float* p, int64_t n) const {
  parallel_for(n, 8192, [&](int64_t b, int64_t e) { apply_here(p + b, e - b); });
}

void FusedChain::apply_here(float* p, int64_t n) const {
  // one link over fp32 values needs no blocks; else blocks that stay in L1 across the links
  if (links.size() == 1 && !half && !reads_head) {
    run_link(links[0], p, nullptr, n);
    return;
  }
  if (links.size() == 2 && !half && links[0].kind == Kind::HardSigmoid &&
      links[1].kind == Kind::Mul && links[1].head) {
    // hard swish, x * sigmoid_hard(x), in one pass (fp32 products commute: the same bits as
    // the two links, which cost 3 passes over a block: MobileNetV3's 1x1 convs 5-10% slower)
    const float a = links[0].c, b = links[0].c2;
    vmath::map(p, p, n, [a, b](float x) { return x * vmath::vhard_sigmoid(x, a, b); });
    return;
  }
  constexpr int64_t kBlock = 2048;
  float h[kBlock];
  for (int64_t s = 0; s < n; s += kBlock) {
    const int64_t m = std::min(kBlock, n - s);
    float* q = p + s;
    if (half) round_to_half(q, m);
    if (reads_head) std::memcpy(h, q, static_cast<size_t>(m) * sizeof(float));
    for (const Link& l : links) {
      run_link(l, q, h, m);
      if (half && l.round) round_to_half(q, m);
    }
  }
}

std::string FusedChain::describe() const {
  std::string s;
  for (const Operation* op : ops) s += (s.empty() ? "" : "+") + op->op_type();
  return s;
}

void fuse_chains(BlockPlan& bp, const std::vector<Tensor>& consts) {
  std::vector<Step> steps;
  steps.reserve(bp.steps.size());
  for (size_t i = 0; i < bp.steps.size(); ++i) {
    Step& st = bp.steps[i];
    std::unique_ptr<FusedChain> ch;
    if (st.op->op_type() == "conv" && st.outs.size() == 1 && !st.fused)
      ch = chain_after(bp.steps, i, consts);
    if (ch) {
      const size_t len = ch->ops.size();
      st.outs[0] = bp.steps[i + len].outs[0];
      st.fused = std::move(ch);
      i += len;
    }
    steps.push_back(std::move(st));
  }
  bp.steps = std::move(steps);
}

}  // namespace milkit
