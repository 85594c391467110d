// ONNX operators: attention (Attention, ai.onnx.preview FlexAttention).
#include <cmath>
#include <limits>

#include "milkit/compose/attention.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// nonpad_kv_seqlen (input 6) as an additive bias [B, 1, Lq, Lk]: keys at or past the batch's
// length hidden, and the causal / windowed mask aligned to that length (an external cache).
Var* nonpad_bias(C& cv, const NodeProto& n, Var* q, Var* k, bool causal, int64_t left,
                 int64_t right) {
  auto qs = C::static_shape(q), ks = C::static_shape(k);
  if (!ks) cv.fail(n, "nonpad_kv_seqlen needs the kv sequence length to be known");
  DataType dt = C::dtype(q), i32 = DataType::Int32;
  int64_t sk = (*ks)[2];
  Var* len = cv.em.reshape(cv.cast(cv.in(n, 6), i32), {-1, 1, 1, 1});
  Var* bias = nullptr;
  if (causal || left >= 0 || right >= 0) {
    // query i may see key j when diff = i - q_len - j + nonpad[b] passes the causal / window tests
    if (!qs) cv.fail(n, "a causal or windowed mask needs the sequence lengths to be known");
    int64_t sq = (*qs)[2];
    std::vector<int64_t> d(static_cast<size_t>(sq * sk));
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t j = 0; j < sk; ++j) d[static_cast<size_t>(i * sk + j)] = i - sq - j;
    Var* diff = binary(cv, "add", cv.c(Value::from_ints(i32, {1, 1, sq, sk}, d)), len);
    Var* ok = nullptr;
    auto both = [&](Var* x) { ok = ok ? binary(cv, "logical_and", ok, x) : x; };
    if (causal) both(binary(cv, "greater_equal", diff, cv.cs(0, i32)));
    if (left >= 0) both(binary(cv, "less_equal", diff, cv.cs(static_cast<double>(left), i32)));
    if (right >= 0)
      both(binary(cv, "greater_equal", diff, cv.cs(static_cast<double>(-right), i32)));
    bias = cv.em.sel(ok, cv.cs(0, dt), cv.cs(kNegInf, dt));
  }
  std::vector<int64_t> j(static_cast<size_t>(sk));
  for (int64_t i = 0; i < sk; ++i) j[static_cast<size_t>(i)] = i;
  Var* ok = binary(cv, "less", cv.c(Value::from_ints(i32, {1, 1, 1, sk}, j)), len);
  Var* pm = cv.em.sel(ok, cv.cs(0, dt), cv.cs(kNegInf, dt));
  return bias ? binary(cv, "add", bias, pm) : pm;
}

void attention(C& cv, const NodeProto& n) {
  Var* q = cv.in(n, 0);
  Var* k = cv.in(n, 1);
  Var* v = cv.in(n, 2);
  int r = cv.rank(n, q);
  if (r != 3 && r != 4) cv.fail(n, "Q must be 3-D or 4-D");
  bool nonpad = C::has(n, 6);
  if (nonpad && C::has(n, 4)) cv.fail(n, "nonpad_kv_seqlen cannot be combined with past_key");
  if (r == 3) {
    int64_t qh = C::attr_int(n, "q_num_heads", 0), kvh = C::attr_int(n, "kv_num_heads", 0);
    if (qh <= 0 || kvh <= 0) cv.fail(n, "3-D inputs need q_num_heads and kv_num_heads");
    q = compose::split_heads(cv.em, q, qh);
    k = compose::split_heads(cv.em, k, kvh);
    v = compose::split_heads(cv.em, v, kvh);
  }
  compose::AttentionSpec s;
  if (C::has_attr(n, "scale")) s.scale = C::attr_float(n, "scale", 1.0f);
  s.split_scale = true;
  s.softcap = C::attr_float(n, "softcap", 0.0f);
  if (C::has(n, 3)) s.mask = cv.in(n, 3);
  s.pad_mask = true;
  bool causal = C::attr_int(n, "is_causal", 0) != 0;
  int64_t left = C::attr_int(n, "left_window_size", -1),
          right = C::attr_int(n, "right_window_size", -1);
  if (C::has(n, 4)) s.past_key = cv.in(n, 4);
  if (C::has(n, 5)) s.past_value = cv.in(n, 5);
  if (nonpad) {
    Var* kk = s.past_key ? cv.em.concat({s.past_key, k}, 2) : k;
    s.bias = nonpad_bias(cv, n, q, kk, causal, left, right);
  } else {
    // bottom-right: the offset is past_key's length, without a past 0
    s.causal = causal;
    s.left_window = left;
    s.right_window = right;
    s.align = compose::CausalAlign::BottomRight;
    if (!s.past_key)
      s.offset = 0;
    else if (auto ps = C::static_shape(s.past_key))
      s.offset = (*ps)[2];
  }
  compose::AttentionResult a = compose::attention(cv.em, q, k, v, s);
  cv.out(n, 0, r == 3 ? compose::merge_heads(cv.em, a.y) : a.y);
  cv.out(n, 1, a.key);
  cv.out(n, 2, a.value);
  if (C::wants(n, 3)) {
    int64_t mode = C::attr_int(n, "qk_matmul_output_mode", 0);
    cv.out(n, 3, mode == 0 || mode == 1 ? a.scores : mode == 2 ? a.masked : a.probs);
  }
}

// ---- ai.onnx.preview ----------------------------------------------------------------------------

void flex_attention(C& cv, const NodeProto& n) {
  Var* q = cv.in(n, 0);
  Var* k = cv.in(n, 1);
  Var* v = cv.in(n, 2);
  auto qs = C::static_shape(q), ks = C::static_shape(k);
  if (!qs || !ks || qs->size() != 4 || ks->size() != 4)
    cv.fail(n, "needs 4-D Q, K and V of known shapes");
  DataType dt = C::dtype(q), f32 = DataType::Float32;
  int64_t hq = (*qs)[1], hkv = (*ks)[1], E = (*qs)[3];
  if (hq != hkv) {
    if (hkv <= 0 || hq % hkv) cv.fail(n, "q heads must be a multiple of kv heads");
    k = compose::repeat_heads(cv.em, k, hq / hkv);
    v = compose::repeat_heads(cv.em, v, hq / hkv);
  }
  double scale = C::has_attr(n, "scale") ? C::attr_float(n, "scale", 1.0f)
                                         : 1.0 / std::sqrt(static_cast<double>(E));
  Var* sq = cv.cs(std::sqrt(static_cast<float>(scale)), dt);
  Var* scores =
      cv.op("matmul", {C::arg("x", binary(cv, "mul", q, sq)), C::arg("y", binary(cv, "mul", k, sq)),
                       C::arg_bool("transpose_y", true)});
  // the softmax in fp32 (fp16 / bf16 promoted, as the reference does) unless softmax_precision says
  int sp = static_cast<int>(C::attr_int(n, "softmax_precision", 0));
  DataType ct = sp == onnx::TensorProto::FLOAT16 ? DataType::Float16 : f32;
  scores = cv.cast(scores, ct);
  auto mod = [&](const char* name, Var* x) {
    const GraphProto* g = C::attr_graph(n, name);
    if (!g) return x;
    auto outs = convert_subgraph(cv, *g, {x});
    if (outs.size() != 1) cv.fail(n, std::string(name) + " must return one value");
    return cv.cast(outs[0], ct);
  };
  scores = mod("score_mod", scores);
  Var* probs = cv.op("softmax", {C::arg("x", scores), C::arg_i32("axis", -1)});
  probs = mod("prob_mod", probs);
  Var* y = cv.op("matmul", {C::arg("x", probs), C::arg("y", cv.cast(v, ct))});
  cv.out(n, 0, cv.cast(y, C::dtype(v)));
}

}  // namespace

void register_attention(OpTable& t) {
  t.on("Attention", 1, attention);
  t.on("ai.onnx.preview", "FlexAttention", 1, flex_attention);
}

}  // namespace onnx_detail
}  // namespace milkit
