// ONNX Attention (opset 23+): 3-D or 4-D Q/K/V, past key/value, grouped heads, boolean or
// additive masks, causal masks aligned bottom-right, softcap, and the qk output modes.
#include <cmath>
#include <limits>

#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

// (B, S, heads * H) -> (B, heads, S, H)
Var* split_heads(C& cv, const NodeProto& n, Var* x, int64_t heads) {
  if (heads <= 0) cv.fail(n, "3-D inputs need q_num_heads and kv_num_heads");
  auto s = C::static_shape(x);
  Var* r;
  if (s) {
    r = cv.op("reshape", {C::arg("x", x), C::arg_ints32("shape", {(*s)[0], (*s)[1], heads, (*s)[2] / heads})});
  } else {
    Var* sh = cv.op("shape", {C::arg("x", x)});
    Var* bs = cv.op("slice_by_index", {C::arg("x", sh), C::arg_ints32("begin", {0}), C::arg_ints32("end", {2})});
    Arg v{"values", {ArgItem{bs, nullptr}, ArgItem{cv.ci({heads, -1}), nullptr}}, true};
    r = cv.op("reshape", {C::arg("x", x), C::arg("shape", cv.op("concat", {v, C::arg_i32("axis", 0)}))});
  }
  return cv.op("transpose", {C::arg("x", r), C::arg_ints32("perm", {0, 2, 1, 3})});
}

// (B, heads, S, H) -> (B, S, heads * H)
Var* merge_heads(C& cv, Var* y) {
  y = cv.op("transpose", {C::arg("x", y), C::arg_ints32("perm", {0, 2, 1, 3})});
  if (auto s = C::static_shape(y))
    return cv.op("reshape", {C::arg("x", y), C::arg_ints32("shape", {(*s)[0], (*s)[1], (*s)[2] * (*s)[3]})});
  Var* sh = cv.op("shape", {C::arg("x", y)});
  Var* bs = cv.op("slice_by_index", {C::arg("x", sh), C::arg_ints32("begin", {0}), C::arg_ints32("end", {2})});
  Arg v{"values", {ArgItem{bs, nullptr}, ArgItem{cv.ci({-1}), nullptr}}, true};
  return cv.op("reshape", {C::arg("x", y), C::arg("shape", cv.op("concat", {v, C::arg_i32("axis", 0)}))});
}

void attention(C& cv, const NodeProto& n) {
  Var* q = cv.in(n, 0);
  Var* k = cv.in(n, 1);
  Var* v = cv.in(n, 2);
  int r = cv.rank(n, q);
  if (r != 3 && r != 4) cv.fail(n, "Q must be 3-D or 4-D");
  int64_t left = C::attr_int(n, "left_window_size", -1), right = C::attr_int(n, "right_window_size", -1);
  bool window = left >= 0 || right >= 0;
  bool nonpad = C::has(n, 6);
  if (nonpad && C::has(n, 4)) cv.fail(n, "nonpad_kv_seqlen cannot be combined with past_key");
  int64_t qh = C::attr_int(n, "q_num_heads", 0), kvh = C::attr_int(n, "kv_num_heads", 0);
  if (r == 3) {
    q = split_heads(cv, n, q, qh);
    k = split_heads(cv, n, k, kvh);
    v = split_heads(cv, n, v, kvh);
  }
  DataType dt = C::dtype(q);
  Dim hd = C::shape(q)[3];
  double scale = 0;
  if (C::find_attr(n, "scale")) scale = C::attr_float(n, "scale", 1.0f);
  else if (hd->is_const()) scale = 1.0 / std::sqrt(static_cast<double>(hd->value()));
  else cv.fail(n, "the head size must be known when no scale is given");
  if (C::has(n, 4)) k = cv.op("concat", {Arg{"values", {ArgItem{cv.in(n, 4), nullptr}, ArgItem{k, nullptr}}, true}, C::arg_i32("axis", 2)});
  if (C::has(n, 5)) v = cv.op("concat", {Arg{"values", {ArgItem{cv.in(n, 5), nullptr}, ArgItem{v, nullptr}}, true}, C::arg_i32("axis", 2)});
  cv.out(n, 1, k);
  cv.out(n, 2, v);
  Dim qhd = C::shape(q)[1], khd = C::shape(k)[1];
  if (qhd->is_const() && khd->is_const() && qhd->value() != khd->value()) {
    int64_t g = qhd->value() / khd->value();
    if (g * khd->value() != qhd->value()) cv.fail(n, "q heads must be a multiple of kv heads");
    auto rep4 = [&](Var* x) {
      auto s = C::static_shape(x);
      if (!s) cv.fail(n, "grouped heads need the key and value shapes to be known");
      Var* e = cv.op("expand_dims", {C::arg("x", x), C::arg_ints32("axes", {2})});
      Var* t = cv.op("tile", {C::arg("x", e), C::arg_ints32("reps", {1, 1, g, 1, 1})});
      return cv.op("reshape", {C::arg("x", t), C::arg_ints32("shape", {(*s)[0], qhd->value(), (*s)[2], (*s)[3]})});
    };
    k = rep4(k);
    v = rep4(v);
  }
  double s = std::sqrt(scale);
  Var* qs = binary(cv, "mul", q, cv.cs(s, dt));
  Var* ks = binary(cv, "mul", k, cv.cs(s, dt));
  Var* qk = cv.op("matmul", {C::arg("x", qs), C::arg("y", ks), C::arg_bool("transpose_y", true)});
  float softcap = C::attr_float(n, "softcap", 0.0f);
  if (softcap > 0) {
    Var* t = cv.op("tanh", {C::arg("x", binary(cv, "real_div", qk, cv.cs(softcap, dt)))});
    qk = binary(cv, "mul", t, cv.cs(softcap, dt));
  }
  Var* qk_raw = qk;
  // the additive bias: mask (bool: -inf where false; padded with -inf up to the kv length) + causal
  Var* bias = nullptr;
  double ninf = -std::numeric_limits<double>::infinity();
  auto qs_shape = C::static_shape(q);
  auto ks_shape = C::static_shape(k);
  if (C::has(n, 3)) {
    Var* m = cv.in(n, 3);
    if (C::dtype(m) == DataType::Bool)
      m = cv.op("select", {C::arg("cond", m), C::arg("a", cv.cs(0, dt)), C::arg("b", cv.cs(ninf, dt))});
    auto ms = C::static_shape(m);
    if (ms && ks_shape && ms->back() < (*ks_shape)[2]) {
      std::vector<int64_t> pad(2 * ms->size(), 0);
      pad.back() = (*ks_shape)[2] - ms->back();
      m = cv.op("pad", {C::arg("x", m), C::arg_ints32("pad", pad), C::arg("constant_val", Value::scalar_float(dt, ninf))});
    }
    bias = m;
  }
  bool causal = C::attr_int(n, "is_causal", 0) != 0;
  if (causal || window) {
    // query i (of this block) may see key j when i + offset - j >= 0 (causal) and, with windows,
    // i + offset - j <= left and j - (i + offset) <= right. The offset is past_key's length, or
    // per batch nonpad_kv_seqlen[b] - q_len (an external cache), or 0.
    if (!qs_shape || !ks_shape) cv.fail(n, "a causal or windowed mask needs the sequence lengths to be known");
    int64_t sq = (*qs_shape)[2], sk = (*ks_shape)[2];
    auto allowed = [&](int64_t diff) {
      bool ok = !causal || diff >= 0;
      if (left >= 0) ok = ok && diff <= left;
      if (right >= 0) ok = ok && -diff <= right;
      return ok;
    };
    Var* cm;
    if (!nonpad) {
      int64_t off = 0;
      if (C::has(n, 4)) {
        auto ps = C::static_shape(cv.in(n, 4));
        off = ps ? (*ps)[2] : sk - sq;
      }
      std::vector<double> c(static_cast<size_t>(sq * sk));
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t j = 0; j < sk; ++j) c[static_cast<size_t>(i * sk + j)] = allowed(i + off - j) ? 0.0 : ninf;
      cm = cv.c(Value::from_doubles(dt, {sq, sk}, c));
    } else {
      // diff[b, i, j] = i - q_len - j (a constant) + nonpad[b]
      std::vector<int64_t> d(static_cast<size_t>(sq * sk));
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t j = 0; j < sk; ++j) d[static_cast<size_t>(i * sk + j)] = i - sq - j;
      Var* base = cv.c(Value::from_ints(DataType::Int32, {1, 1, sq, sk}, d));
      Var* len = cv.op("reshape", {C::arg("x", cv.cast(cv.in(n, 6), DataType::Int32)), C::arg_ints32("shape", {-1, 1, 1, 1})});
      Var* diff = binary(cv, "add", base, len);
      Var* ok = nullptr;
      auto both = [&](Var* x) { ok = ok ? binary(cv, "logical_and", ok, x) : x; };
      if (causal) both(binary(cv, "greater_equal", diff, cv.cs(0, DataType::Int32)));
      if (left >= 0) both(binary(cv, "less_equal", diff, cv.cs(static_cast<double>(left), DataType::Int32)));
      if (right >= 0) both(binary(cv, "greater_equal", diff, cv.cs(static_cast<double>(-right), DataType::Int32)));
      cm = cv.op("select", {C::arg("cond", ok), C::arg("a", cv.cs(0, dt)), C::arg("b", cv.cs(ninf, dt))});
    }
    bias = bias ? binary(cv, "add", bias, cm) : cm;
  }
  if (nonpad) {
    // keys at or past nonpad_kv_seqlen[b] are padding
    if (!ks_shape) cv.fail(n, "nonpad_kv_seqlen needs the kv sequence length to be known");
    int64_t sk = (*ks_shape)[2];
    std::vector<int64_t> j(static_cast<size_t>(sk));
    for (int64_t i = 0; i < sk; ++i) j[static_cast<size_t>(i)] = i;
    Var* len = cv.op("reshape", {C::arg("x", cv.cast(cv.in(n, 6), DataType::Int32)), C::arg_ints32("shape", {-1, 1, 1, 1})});
    Var* ok = binary(cv, "less", cv.c(Value::from_ints(DataType::Int32, {1, 1, 1, sk}, j)), len);
    Var* pm = cv.op("select", {C::arg("cond", ok), C::arg("a", cv.cs(0, dt)), C::arg("b", cv.cs(ninf, dt))});
    bias = bias ? binary(cv, "add", bias, pm) : pm;
  }
  Var* with_bias = bias ? binary(cv, "add", qk, bias) : qk;
  Var* sm = cv.op("softmax", {C::arg("x", with_bias), C::arg_i32("axis", -1)});
  if (bias) {
    // rows masked everywhere give 0 (the reference's guard), not NaN
    Var* mx = cv.op("reduce_max", {C::arg("x", bias), C::arg_ints32("axes", {-1}), C::arg_bool("keep_dims", true)});
    Var* dead = binary(cv, "equal", mx, cv.cs(ninf, dt));
    sm = cv.op("select", {C::arg("cond", dead), C::arg("a", cv.cs(0, dt)), C::arg("b", sm)});
  }
  Var* y = cv.op("matmul", {C::arg("x", sm), C::arg("y", v)});
  if (r == 3) y = merge_heads(cv, y);
  cv.out(n, 0, y);
  if (C::wants(n, 3)) {
    int64_t mode = C::attr_int(n, "qk_matmul_output_mode", 0);
    Var* o = mode == 0 || mode == 1 ? qk_raw : mode == 2 ? with_bias : sm;
    cv.out(n, 3, o);
  }
}

}  // namespace

void register_attention(OpTable& t) { t.on("Attention", 1, attention); }

}  // namespace onnx_detail
}  // namespace milkit
