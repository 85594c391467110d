// ONNX operators: recurrent layers (LSTM, GRU, RNN).
#include <algorithm>
#include <cctype>
#include <cstddef>

#include "milkit/compose/rnn.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

// Direction `d` of a [dirs, ...] value.
Value slice0(const Value& v, int64_t d) {
  std::vector<int64_t> shape(v.shape().begin() + 1, v.shape().end());
  int64_t n = v.numel() / v.shape()[0];
  auto all = v.to_doubles();
  return Value::from_doubles(v.dtype() == DataType::Float64 ? DataType::Float32 : v.dtype(), shape,
                             std::vector<double>(all.begin() + d * n, all.begin() + (d + 1) * n));
}

Value part(const Value& v, int64_t from, int64_t len) {
  auto d = v.to_doubles();
  return Value::from_doubles(v.dtype(), {len},
                             std::vector<double>(d.begin() + from, d.begin() + from + len));
}

std::string act_name(C& cv, const NodeProto& n, const std::string& a) {
  std::string l = a;
  std::transform(l.begin(), l.end(), l.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (l == "sigmoid" || l == "tanh" || l == "relu") return l;
  if (l == "hardsigmoid") return "sigmoid_hard";
  cv.fail(n, "activation '" + a + "' is not supported");
}

struct Common {
  Var* x;
  int64_t dirs;
  std::string direction;
  int64_t hidden;
  bool batch_first;
};

Common common(C& cv, const NodeProto& n) {
  Common c;
  c.direction = C::attr_string(n, "direction", "forward");
  c.dirs = c.direction == "bidirectional" ? 2 : 1;
  c.hidden = C::attr_int(n, "hidden_size", 0);
  c.batch_first = C::attr_int(n, "layout", 0) != 0;
  c.x = cv.in(n, 0);
  if (c.batch_first) c.x = cv.op("transpose", {C::arg("x", c.x), C::arg_ints32("perm", {1, 0, 2})});
  if (C::has(n, 4)) {
    // sequence_lens: only when every sequence has the full length
    const Value* sl = cv.value(n, 4);
    auto xs = C::static_shape(c.x);
    if (!sl || !xs)
      cv.fail(n, "sequence_lens (input '" + n.input(4) + "') must be known at conversion time");
    for (auto v : sl->to_ints())
      if (v != (*xs)[0])
        cv.fail(n, "sequences of different lengths (sequence_lens) are not supported");
  }
  if (C::attr_int(n, "input_forget", 0) != 0) cv.fail(n, "input_forget is not supported");
  return c;
}

// ONNX initial state [dirs, B, H] (or [B, dirs, H] with layout 1) for direction d, or zeros.
Var* initial(C& cv, const NodeProto& n, int idx, const Common& c, int64_t d) {
  if (!C::has(n, idx)) {
    // zeros of [B, H]: B from x at run time
    Var* xs = cv.op("shape", {C::arg("x", c.x)});
    Var* b = cv.op("slice_by_index",
                   {C::arg("x", xs), C::arg_ints32("begin", {1}), C::arg_ints32("end", {2})});
    Arg v{"values", {ArgItem{b, nullptr}, ArgItem{cv.ci({c.hidden}), nullptr}}, true};
    return cv.op("fill", {C::arg("shape", cv.op("concat", {v, C::arg_i32("axis", 0)})),
                          C::arg("value", Value::scalar_float(C::dtype(c.x), 0))});
  }
  Var* h = cv.in(n, idx);
  int axis = c.batch_first ? 1 : 0;
  Var* s =
      cv.op("slice_by_index",
            {C::arg("x", h), C::arg_ints32("begin", {axis == 0 ? d : 0, axis == 1 ? d : 0, 0}),
             C::arg_ints32("end", {axis == 0 ? d + 1 : 0, axis == 1 ? d + 1 : 0, 0}),
             C::arg("end_mask", Value::from_ints(DataType::Bool, {3}, {axis != 0, axis != 1, 1}))});
  return cv.op("squeeze", {C::arg("x", s), C::arg_ints32("axes", {axis})});
}

// MIL [s, B, H] per direction -> ONNX Y [s, dirs, B, H] (or [B, s, dirs, H]).
void outputs(C& cv, const NodeProto& n, const Common& c, const std::vector<Var*>& ys,
             const std::vector<Var*>& hs, const std::vector<Var*>& cs) {
  auto stack = [&](const std::vector<Var*>& v, int64_t axis) {
    if (v.size() == 1)
      return cv.op("expand_dims", {C::arg("x", v[0]), C::arg_ints32("axes", {axis})});
    Arg a{"values", {}, true};
    for (Var* x : v)
      a.items.push_back(
          ArgItem{cv.op("expand_dims", {C::arg("x", x), C::arg_ints32("axes", {axis})}), nullptr});
    return cv.op("concat", {a, C::arg_i32("axis", axis)});
  };
  if (C::wants(n, 0)) {
    Var* y = stack(ys, 1);  // [s, dirs, B, H]
    if (c.batch_first)
      y = cv.op("transpose", {C::arg("x", y), C::arg_ints32("perm", {2, 0, 1, 3})});
    cv.out(n, 0, y);
  }
  if (C::wants(n, 1)) {
    Var* h = stack(hs, 0);
    if (c.batch_first) h = cv.op("transpose", {C::arg("x", h), C::arg_ints32("perm", {1, 0, 2})});
    cv.out(n, 1, h);
  }
  if (!cs.empty() && C::wants(n, 2)) {
    Var* cc = stack(cs, 0);
    if (c.batch_first) cc = cv.op("transpose", {C::arg("x", cc), C::arg_ints32("perm", {1, 0, 2})});
    cv.out(n, 2, cc);
  }
}

const Value& need(C& cv, const NodeProto& n, int i, const char* what) {
  const Value* v = cv.value(n, i);
  if (!v)
    cv.fail(n, std::string(what) + " (input '" + (C::has(n, i) ? n.input(i) : "") +
                   "') must be known at conversion time");
  return *v;
}

void rnn_like(C& cv, const NodeProto& n, compose::RnnKind kind) {
  using compose::RnnKind;
  bool lstm = kind == RnnKind::Lstm, gru = kind == RnnKind::Gru;
  Common c = common(cv, n);
  int64_t gates = lstm ? 4 : gru ? 3 : 1;
  const Value& W = need(cv, n, 1, "W");
  const Value& R = need(cv, n, 2, "R");
  if (c.hidden <= 0) c.hidden = R.shape().back();
  std::vector<std::string> acts;
  for (auto& s : C::attr_strings(n, "activations")) acts.push_back(act_name(cv, n, s));
  std::vector<int> order = compose::onnx_gate_order(kind);
  auto canon = [&](const Value& v) { return compose::reorder_gates(v, order).cast(C::dtype(c.x)); };
  std::vector<Var*> ys, hs, cs;
  DataType dt = C::dtype(c.x);
  for (int64_t d = 0; d < c.dirs; ++d) {
    compose::RnnWeights w{canon(slice0(W, d)), canon(slice0(R, d)), std::nullopt,
                          std::nullopt,        std::nullopt,        std::nullopt};
    // MIL's op always gets a bias (zeros without B)
    Value zeros = Value::from_doubles(
        dt, {gates * c.hidden}, std::vector<double>(static_cast<size_t>(gates * c.hidden), 0.0));
    w.b_ih = w.b_hh = zeros;
    if (C::has(n, 3)) {
      Value b = slice0(need(cv, n, 3, "B"), d);
      w.b_ih = canon(part(b, 0, gates * c.hidden));
      w.b_hh = canon(part(b, gates * c.hidden, gates * c.hidden));
    }
    // peepholes: ONNX's [i, o, f] -> [i, f, o]
    if (lstm && C::has(n, 7))
      w.peephole = compose::reorder_gates(slice0(need(cv, n, 7, "P"), d), {0, 2, 1}).cast(dt);
    compose::RnnLayerSpec s;
    s.kind = kind;
    s.reverse = c.dirs == 2 ? d == 1 : c.direction == "reverse";
    s.linear_before_reset = gru && C::attr_int(n, "linear_before_reset", 0) != 0;
    size_t nacts = lstm ? 3 : gru ? 2 : 1;
    s.activations.assign(acts.begin() + static_cast<std::ptrdiff_t>(
                                            std::min(acts.size(), static_cast<size_t>(d) * nacts)),
                         acts.begin() + static_cast<std::ptrdiff_t>(std::min(
                                            acts.size(), static_cast<size_t>(d + 1) * nacts)));
    if (lstm && C::has_attr(n, "clip")) s.clip = C::attr_float(n, "clip", 0);
    compose::RnnLayerResult r = compose::rnn_layer(cv.em, c.x, initial(cv, n, 5, c, d),
                                                   lstm ? initial(cv, n, 6, c, d) : nullptr, w, s);
    ys.push_back(r.y);
    hs.push_back(r.h);
    if (lstm) cs.push_back(r.c);
  }
  outputs(cv, n, c, ys, hs, cs);
}

void lstm(C& cv, const NodeProto& n) { rnn_like(cv, n, compose::RnnKind::Lstm); }

void gru(C& cv, const NodeProto& n) { rnn_like(cv, n, compose::RnnKind::Gru); }

void rnn(C& cv, const NodeProto& n) { rnn_like(cv, n, compose::RnnKind::RnnTanh); }

}  // namespace

void register_rnn(OpTable& t) {
  t.on("LSTM", 1, lstm);
  t.on("GRU", 1, gru);
  t.on("RNN", 1, rnn);
}

}  // namespace onnx_detail
}  // namespace milkit
