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

// GCC 12's AVX-512 intrinsics (masked loads, fp16 conversions) start from an undefined vector,
// which it reports as maybe uninitialized where they inline
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace milkit {

namespace {

using Kind = FusedChain::Kind;
using Link = FusedChain::Link;

/// The binary link of `l` over m values: q = f(q, other) (f(other, q) when swapped), `other` the
/// head's values h, the external tensor's values e or the scalar l.c.
template <typename F>
void binary(const Link& l, float* q, const float* h, const float* e, int64_t m, F f) {
  if (l.head || l.ext) {
    const float* o = l.head ? h : e;
    if (l.swap)
      vmath::map2(o, q, q, m, f);
    else
      vmath::map2(q, o, q, m, f);
  } else {
    const float c = l.c;
    if (l.swap)
      vmath::map(q, q, m, [c, f](float v) { return f(c, v); });
    else
      vmath::map(q, q, m, [c, f](float v) { return f(v, c); });
  }
}

/// One link over m values in place; the lambdas are those of the ops' kernels.
void run_link(const Link& l, float* q, const float* h, const float* e, int64_t m) {
  switch (l.kind) {
    case Kind::Add:
      binary(l, q, h, e, m, [](float a, float b) { return a + b; });
      break;
    case Kind::Sub:
      binary(l, q, h, e, m, [](float a, float b) { return a - b; });
      break;
    case Kind::Mul:
      binary(l, q, h, e, m, [](float a, float b) { return a * b; });
      break;
    case Kind::Div:
      binary(l, q, h, e, m, [](float a, float b) { return a / b; });
      break;
    case Kind::Max:
      binary(l, q, h, e, m, [](float a, float b) { return vmath::np_max(a, b); });
      break;
    case Kind::Min:
      binary(l, q, h, e, m, [](float a, float b) { return vmath::np_min(a, b); });
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

/// Whether link `l` is one that `basic_run` computes in registers: IEEE operations and selects,
/// whose results do not depend on how the compiler arranges them (an external operand is read by
/// run_link).
bool basic(const Link& l) {
  if (l.ext) return false;
  switch (l.kind) {
    case Kind::Add:
    case Kind::Sub:
    case Kind::Mul:
    case Kind::Div:
    case Kind::Max:
    case Kind::Min:
    case Kind::Relu:
    case Kind::Relu6:
      return true;
    default:
      return false;
  }
}

#ifdef MILKIT_VMATH_AVX2
#define MILKIT_AVX512_TARGET \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512vl"), always_inline))
#define MILKIT_AVX2_TARGET __attribute__((target("avx2,fma,f16c"), always_inline))

/// The vector operations of basic_run, 16 lanes.
struct Avx512 {
  typedef __m512 V;
  static constexpr int L = 16;
  MILKIT_AVX512_TARGET static V set1(float c) { return _mm512_set1_ps(c); }
  MILKIT_AVX512_TARGET static V load(const float* p, int64_t n) {
    return n >= L ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(mask(n), p);
  }
  MILKIT_AVX512_TARGET static void store(float* p, V v, int64_t n) {
    if (n >= L)
      _mm512_storeu_ps(p, v);
    else
      _mm512_mask_storeu_ps(p, mask(n), v);
  }
  static __mmask16 mask(int64_t n) { return static_cast<__mmask16>((1u << n) - 1); }
  MILKIT_AVX512_TARGET static V add(V a, V b) { return _mm512_add_ps(a, b); }
  MILKIT_AVX512_TARGET static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  MILKIT_AVX512_TARGET static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  MILKIT_AVX512_TARGET static V div(V a, V b) { return _mm512_div_ps(a, b); }
  /// vmath::np_max / np_min: a where a > b (a < b) or a is NaN, else b
  MILKIT_AVX512_TARGET static V max(V a, V b) {
    return _mm512_mask_blend_ps(
        _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ) | _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), b, a);
  }
  MILKIT_AVX512_TARGET static V min(V a, V b) {
    return _mm512_mask_blend_ps(
        _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ) | _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), b, a);
  }
  /// fp16's value of each lane (the instructions of round_to_half)
  MILKIT_AVX512_TARGET static V round(V a) {
    return _mm512_cvtph_ps(_mm512_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT));
  }
};

/// The vector operations of basic_run, 8 lanes.
struct Avx2 {
  typedef __m256 V;
  static constexpr int L = 8;
  MILKIT_AVX2_TARGET static V set1(float c) { return _mm256_set1_ps(c); }
  MILKIT_AVX2_TARGET static V load(const float* p, int64_t n) {
    if (n >= L) return _mm256_loadu_ps(p);
    alignas(32) float t[L] = {};
    std::memcpy(t, p, static_cast<size_t>(n) * sizeof(float));
    return _mm256_load_ps(t);
  }
  MILKIT_AVX2_TARGET static void store(float* p, V v, int64_t n) {
    if (n >= L) return _mm256_storeu_ps(p, v);
    alignas(32) float t[L];
    _mm256_store_ps(t, v);
    std::memcpy(p, t, static_cast<size_t>(n) * sizeof(float));
  }
  MILKIT_AVX2_TARGET static V add(V a, V b) { return _mm256_add_ps(a, b); }
  MILKIT_AVX2_TARGET static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  MILKIT_AVX2_TARGET static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  MILKIT_AVX2_TARGET static V div(V a, V b) { return _mm256_div_ps(a, b); }
  MILKIT_AVX2_TARGET static V max(V a, V b) {
    return _mm256_blendv_ps(
        b, a, _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q)));
  }
  MILKIT_AVX2_TARGET static V min(V a, V b) {
    return _mm256_blendv_ps(
        b, a, _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q)));
  }
  MILKIT_AVX2_TARGET static V round(V a) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT));
  }
};

// NAME##_link: one link over U vectors held in registers, its kind and operands looked at once
// per U vectors, not per vector (a switch per link and vector cost more than the passes over
// memory it saves: MobileNetV3's fp32 hard swish 15% slower). NAME##_binary: a binary link,
// the other operand the head's vector or the scalar, in the op's order (NAME##_op: its
// operation).
#define MILKIT_DEFINE_BASIC_RUN(NAME, I, TARGET)                                                   \
  template <Kind K>                                                                                \
  __attribute__((target(TARGET), always_inline)) inline I::V NAME##_op(I::V a, I::V b) {           \
    if constexpr (K == Kind::Add) return I::add(a, b);                                             \
    if constexpr (K == Kind::Sub) return I::sub(a, b);                                             \
    if constexpr (K == Kind::Mul) return I::mul(a, b);                                             \
    if constexpr (K == Kind::Div) return I::div(a, b);                                             \
    if constexpr (K == Kind::Max) return I::max(a, b);                                             \
    if constexpr (K == Kind::Min) return I::min(a, b);                                             \
  }                                                                                                \
  template <Kind K, int U>                                                                         \
  __attribute__((target(TARGET), always_inline)) inline void NAME##_binary(const Link& k, I::V* x, \
                                                                           const I::V* hv) {       \
    const I::V c = I::set1(k.c);                                                                   \
    if (k.swap)                                                                                    \
      for (int u = 0; u < U; ++u) x[u] = NAME##_op<K>(k.head ? hv[u] : c, x[u]);                   \
    else                                                                                           \
      for (int u = 0; u < U; ++u) x[u] = NAME##_op<K>(x[u], k.head ? hv[u] : c);                   \
  }                                                                                                \
  template <int U>                                                                                 \
  __attribute__((target(TARGET), always_inline)) inline void NAME##_link(                          \
      const Link& k, bool half, I::V* x, const I::V* hv) {                                         \
    const I::V zero = I::set1(0.0f), six = I::set1(6.0f);                                          \
    switch (k.kind) {                                                                              \
      case Kind::Add:                                                                              \
        NAME##_binary<Kind::Add, U>(k, x, hv);                                                     \
        break;                                                                                     \
      case Kind::Sub:                                                                              \
        NAME##_binary<Kind::Sub, U>(k, x, hv);                                                     \
        break;                                                                                     \
      case Kind::Mul:                                                                              \
        NAME##_binary<Kind::Mul, U>(k, x, hv);                                                     \
        break;                                                                                     \
      case Kind::Div:                                                                              \
        NAME##_binary<Kind::Div, U>(k, x, hv);                                                     \
        break;                                                                                     \
      case Kind::Max:                                                                              \
        NAME##_binary<Kind::Max, U>(k, x, hv);                                                     \
        break;                                                                                     \
      case Kind::Min:                                                                              \
        NAME##_binary<Kind::Min, U>(k, x, hv);                                                     \
        break;                                                                                     \
      case Kind::Relu:                                                                             \
        for (int u = 0; u < U; ++u) x[u] = I::max(x[u], zero);                                     \
        break;                                                                                     \
      case Kind::Relu6:                                                                            \
        for (int u = 0; u < U; ++u) x[u] = I::min(I::max(x[u], zero), six);                        \
        break;                                                                                     \
      default:                                                                                     \
        break;                                                                                     \
    }                                                                                              \
    if (half && k.round)                                                                           \
      for (int u = 0; u < U; ++u) x[u] = I::round(x[u]);                                           \
  }                                                                                                \
  __attribute__((target(TARGET))) void NAME(const Link* l, size_t nl, bool half, bool round_first, \
                                            float* q, const float* h, int64_t m) {                 \
    typedef I::V V;                                                                                \
    constexpr int U = 8;                                                                           \
    int64_t i = 0;                                                                                 \
    for (; i + U * I::L <= m; i += U * I::L) {                                                     \
      V x[U], hv[U];                                                                               \
      for (int u = 0; u < U; ++u) {                                                                \
        x[u] = I::load(q + i + u * I::L, I::L);                                                    \
        if (round_first) x[u] = I::round(x[u]);                                                    \
        hv[u] = h ? I::load(h + i + u * I::L, I::L) : x[u];                                        \
      }                                                                                            \
      for (size_t j = 0; j < nl; ++j) NAME##_link<U>(l[j], half, x, hv);                           \
      for (int u = 0; u < U; ++u) I::store(q + i + u * I::L, x[u], I::L);                          \
    }                                                                                              \
    for (; i < m; i += I::L) {                                                                     \
      const int64_t n = std::min<int64_t>(I::L, m - i);                                            \
      V x = I::load(q + i, n);                                                                     \
      if (round_first) x = I::round(x);                                                            \
      const V hv = h ? I::load(h + i, n) : x;                                                      \
      for (size_t j = 0; j < nl; ++j) NAME##_link<1>(l[j], half, &x, &hv);                         \
      I::store(q + i, x, n);                                                                       \
    }                                                                                              \
  }

/// Links l[0, nl) (all basic) over the m values at q in place, 8 vectors at a time in registers
/// instead of a pass over q per link: the head from h, or (h null) q's values after rounding them
/// to fp16 when `round_first`; in an fp16 program (`half`) each result rounded where its link
/// says. The bits are those of the links run one by one (operands in the op's order: x86 returns
/// the first of two NaNs): each link's operation is chosen at run time from `l`, so a product and
/// a following sum never meet in one expression the compiler could contract into an FMA. (An
/// empty asm statement on each result, once used to make sure, kept the U vectors in memory
/// between links: MobileNetV3's hard swish over 672x14x14 took 64 us of a depthwise conv's
/// 129, now 20 of 84.)
MILKIT_DEFINE_BASIC_RUN(basic_run_avx512, Avx512, "avx2,fma,f16c,avx512f,avx512vl")
MILKIT_DEFINE_BASIC_RUN(basic_run_avx2, Avx2, "avx2,fma,f16c")
#undef MILKIT_DEFINE_BASIC_RUN
#endif

/// basic_run_avx512 or basic_run_avx2 on this CPU; false (nothing done) without AVX2 and F16C.
bool basic_run(const Link* l, size_t nl, bool half, bool round_first, float* q, const float* h,
               int64_t m) {
#ifdef MILKIT_VMATH_AVX2
  if (vmath::cpu_avx512()) {
    basic_run_avx512(l, nl, half, round_first, q, h, m);
    return true;
  }
  if (vmath::cpu_avx2_fma() && cpu_has_f16c()) {
    basic_run_avx2(l, nl, half, round_first, q, h, m);
    return true;
  }
#endif
  (void)l, (void)nl, (void)half, (void)round_first, (void)q, (void)h, (void)m;
  return false;
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
             bool half, const Var*& ext, int32_t& ext_ref, Link& l) {
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
    } else if (scalar_const(st.args[other], consts, l.c)) {
    } else if ((!ext || ext == args[other]) && args[other]->type() == head->type() &&
               st.args[other] != kAbsent) {
      // a tensor of the head's shape and dtype (a residual branch), one per chain
      l.ext = true;
      ext = args[other];
      ext_ref = st.args[other];
    } else {
      return false;
    }
    // maximum / minimum of fp16 values give fp16 values
    l.round = !((l.kind == Kind::Max || l.kind == Kind::Min) &&
                (l.head || l.ext || !half || half_exact(l.c)));
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
                                        const std::vector<Tensor>& consts, int32_t& ext_ref) {
  const Var* head = steps[i].op->output(0);
  if (!head->type()->is_tensor()) return nullptr;
  const DataType dt = head->type()->dtype();
  if (dt != DataType::Float32 && dt != DataType::Float16) return nullptr;
  auto ch = std::make_unique<FusedChain>();
  ch->half = dt == DataType::Float16;
  const Var* cur = head;
  const Var* ext = nullptr;
  for (size_t j = i + 1; j < steps.size(); ++j) {
    Link l;
    const Var* ext_was = ext;
    const int32_t ref_was = ext_ref;
    if (!link_of(steps[j], cur, head, consts, ch->half, ext, ext_ref, l)) break;
    // the other tensor must be one the frame holds: not a result of the chain, never stored
    if (l.ext && std::find(ch->ops.begin(), ch->ops.end(), ext->op()) != ch->ops.end()) {
      ext = ext_was;
      ext_ref = ref_was;
      break;
    }
    ch->ops.push_back(steps[j].op);
    ch->links.push_back(l);
    cur = steps[j].op->output(0);
  }
  size_t len = ch->ops.size();
  while (len > 0 && !closed(head, ch->ops, len)) --len;
  if (len == 0) return nullptr;
  ch->ops.resize(len);
  ch->links.resize(len);
  for (const Link& l : ch->links) {
    ch->reads_head = ch->reads_head || l.head;
    if (l.ext) ch->ext_var = ext;
  }
  return ch;
}

}  // namespace

void FusedChain::apply(float* p, int64_t n, const float* e) const {
  parallel_for(n, 8192,
               [&](int64_t b, int64_t f) { apply_here(p + b, f - b, e ? e + b : nullptr); });
}

void FusedChain::apply_here(float* p, int64_t n, const float* e) const {
  // one link over fp32 values needs no blocks; else blocks that stay in L1 across the links
  if (links.size() == 1 && !half && !reads_head) {
    run_link(links[0], p, nullptr, e, n);
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
  // every link basic (MobileNetV3's hard swish as add, max, min, mul, mul): one pass, the links
  // in registers, the head the first value
  if (std::all_of(links.begin(), links.end(), basic) &&
      basic_run(links.data(), links.size(), half, half, p, nullptr, n))
    return;
  constexpr int64_t kBlock = 2048;
  float h[kBlock];
  for (int64_t s = 0; s < n; s += kBlock) {
    const int64_t m = std::min(kBlock, n - s);
    float* q = p + s;
    if (half) round_to_half(q, m);
    if (reads_head) std::memcpy(h, q, static_cast<size_t>(m) * sizeof(float));
    for (size_t i = 0; i < links.size(); ++i) {
      // a run of basic links in registers, else one link over the block
      size_t j = i;
      while (j < links.size() && basic(links[j])) ++j;
      if (j > i + 1 && basic_run(&links[i], j - i, half, false, q, h, m)) {
        i = j - 1;
        continue;
      }
      run_link(links[i], q, h, e ? e + s : nullptr, m);
      if (half && links[i].round) round_to_half(q, m);
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
    int32_t ext_ref = kAbsent;
    if (st.op->op_type() == "conv" && st.outs.size() == 1 && !st.fused)
      ch = chain_after(bp.steps, i, consts, ext_ref);
    if (ch) {
      const size_t len = ch->ops.size();
      if (ch->ext_var) {  // the conv's step reads the residual too
        ch->ext_arg = st.args.size();
        st.args.push_back(ext_ref);
      }
      st.outs[0] = bp.steps[i + len].outs[0];
      st.fused = std::move(ch);
      i += len;
    }
    steps.push_back(std::move(st));
  }
  bp.steps = std::move(steps);
}

}  // namespace milkit
