// Recurrent layers by MIL's ops or by a counted while_loop, and the loop helper itself.
#include "milkit/compose/rnn.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace milkit {
namespace compose {

namespace {

Value add_values(const Value& a, const Value& b) {
  std::vector<double> x = a.to_doubles(), y = b.to_doubles();
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
  return Value::from_doubles(a.dtype(), a.shape(), x);
}

Var* reverse0(Emitter& e, Var* x) {
  return e.op("reverse", {Builder::arg("x", x), Builder::arg("axes", Value::int_list({0}))});
}

// A list element dim: a constant, or a symbol's name (so the gathered sequence keeps it).
ArgItem elem_dim(Emitter& e, const Dim& d) {
  if (d->is_const())
    return ArgItem{nullptr,
                   std::make_shared<const Value>(Value::scalar_int(DataType::Int32, d->value()))};
  std::string name = d->kind() == Expr::Kind::Symbol
                         ? d->symbol()->name()
                         : e.builder().function().ctx().free_name("rnn_d");
  return ArgItem{nullptr, std::make_shared<const Value>(Value::scalar_string(name))};
}

RnnLayerResult mil_layer(Emitter& e, Var* xs, Var* h0, Var* c0, const RnnWeights& w,
                         const RnnLayerSpec& s) {
  bool lstm = s.kind == RnnKind::Lstm, gru = s.kind == RnnKind::Gru;
  std::vector<int> order = lstm  ? std::vector<int>{0, 1, 3, 2}
                           : gru ? std::vector<int>{0, 2, 1}
                                 : std::vector<int>{0};
  auto cv = [&](const Value& v) { return e.c(reorder_gates(v, order)); };
  std::vector<Arg> args = {Builder::arg("x", s.reverse ? reverse0(e, xs) : xs),
                           Builder::arg("initial_h", h0)};
  if (lstm) args.push_back(Builder::arg("initial_c", c0));
  args.push_back(Builder::arg("weight_ih", cv(w.w_ih)));
  args.push_back(Builder::arg("weight_hh", cv(w.w_hh)));
  bool after = gru && s.linear_before_reset;
  if (after) {
    if (w.b_hh) args.push_back(Builder::arg("bias", cv(*w.b_hh)));
    if (w.b_ih) args.push_back(Builder::arg("input_bias", cv(*w.b_ih)));
    args.push_back(Builder::arg("reset_after", Value::scalar_bool(true)));
  } else if (w.b_ih || w.b_hh) {
    Value b = w.b_ih && w.b_hh ? add_values(*w.b_ih, *w.b_hh) : w.b_ih ? *w.b_ih : *w.b_hh;
    args.push_back(Builder::arg("bias", cv(b)));
  }
  if (lstm && w.peephole) args.push_back(Builder::arg("peephole", e.c(*w.peephole)));
  auto str = [](const std::string& v) { return Value::scalar_string(v); };
  const auto& a = s.activations;
  if (lstm && a.size() == 3) {
    args.push_back(Builder::arg("recurrent_activation", str(a[0])));
    args.push_back(Builder::arg("cell_activation", str(a[1])));
    args.push_back(Builder::arg("activation", str(a[2])));
  } else if (gru && a.size() == 2) {
    args.push_back(Builder::arg("recurrent_activation", str(a[0])));
    args.push_back(Builder::arg("activation", str(a[1])));
  } else if (!lstm && !gru) {
    std::string act = a.size() == 1 ? a[0] : s.kind == RnnKind::RnnTanh ? "tanh" : "relu";
    args.push_back(Builder::arg("activation", str(act)));
  } else if (!a.empty()) {
    fail("wrong number of activations for this cell");
  }
  if (lstm && s.clip)
    args.push_back(Builder::arg("clip", Value::scalar_float(Emitter::dtype(xs), *s.clip)));
  args.push_back(Builder::arg("direction", str("forward")));
  args.push_back(Builder::arg("output_sequence", Value::scalar_bool(true)));
  auto outs = e.ops(lstm ? "lstm" : gru ? "gru" : "rnn", std::move(args));
  return {s.reverse ? reverse0(e, outs[0]) : outs[0], outs[1], lstm ? outs[2] : nullptr};
}

RnnLayerResult loop_layer(Emitter& e, Var* xs, Var* h0, Var* c0, const RnnWeights& w,
                          const RnnLayerSpec& s) {
  if (!s.activations.empty() || s.clip || w.peephole ||
      (s.kind == RnnKind::Gru && !s.linear_before_reset))
    fail(
        "a recurrent layer by loop takes default activations, no clip or peepholes, and a GRU "
        "resetting after the projection");
  DataType dt = Emitter::dtype(xs);
  const int64_t Hout = w.w_hr ? w.w_hr->shape()[0] : w.w_hh.shape()[1];
  bool lstm = s.kind == RnnKind::Lstm;
  Var* whh = e.c(w.w_hh);
  Var* bhh = w.b_hh ? e.c(*w.b_hh) : nullptr;
  Var* whr = w.w_hr ? e.c(*w.w_hr) : nullptr;
  // the input projections of every step at once
  Var* xp = linear(e, xs, e.c(w.w_ih), w.b_ih ? e.c(*w.b_ih) : nullptr);
  if (s.reverse) xp = reverse0(e, xp);
  const auto& xsh = xs->type()->shape();
  Var* len = e.op("gather", {Builder::arg("x", e.op("shape", {Builder::arg("x", xp)})),
                             Builder::arg("indices", Value::scalar_int(DataType::Int32, 0)),
                             Builder::arg("axis", Value::scalar_int(DataType::Int32, 0))});
  Dim B = xsh[1];
  Var* ls = e.op("make_list",
                 {Builder::arg("init_length", Value::scalar_int(DataType::Int32, 0)),
                  Arg{"elem_shape",
                      {elem_dim(e, B), elem_dim(e, e.builder().function().ctx().constant(Hout))},
                      true},
                  Builder::arg("dtype", Value::scalar_string(std::string(dtype_name(dt))))});
  std::vector<Var*> init = {h0};
  if (lstm) init.push_back(c0);
  init.push_back(ls);
  auto outs = counted_loop(e, len, init, [&](Var* t, const std::vector<Var*>& vs) {
    Var* xt = e.op("gather", {Builder::arg("x", xp), Builder::arg("indices", t),
                              Builder::arg("axis", Value::scalar_int(DataType::Int32, 0))});
    auto [hn, cn] =
        rnn_cell(e, s.kind, xt, linear(e, vs[0], whh, bhh), vs[0], lstm ? vs[1] : nullptr);
    if (whr) hn = linear(e, hn, whr, nullptr);
    std::vector<Var*> next = {hn};
    if (lstm) next.push_back(cn);
    next.push_back(e.op("list_write", {Builder::arg("ls", vs.back()), Builder::arg("index", t),
                                       Builder::arg("value", hn)}));
    return next;
  });
  Var* idx =
      e.op("range_1d", {Builder::arg("start", Value::scalar_int(DataType::Int32, 0)),
                        Builder::arg("end", e.op("list_length", {Builder::arg("ls", outs.back())})),
                        Builder::arg("step", Value::scalar_int(DataType::Int32, 1))});
  Var* y = e.op("list_gather", {Builder::arg("ls", outs.back()), Builder::arg("indices", idx)});
  if (s.reverse) y = reverse0(e, y);
  // the sequence keeps its known length (the list's length is a run-time value)
  if (xsh[0]->is_const())
    y = e.reshape(y, {xsh[0]->value(), B->is_const() ? B->value() : -1, Hout});
  return {y, outs[0], lstm ? outs[1] : nullptr};
}

}  // namespace

Value reorder_gates(const Value& w, const std::vector<int>& order) {
  const int64_t rows = w.shape().at(0);
  const int64_t g = static_cast<int64_t>(order.size());
  const int64_t h = rows / g;
  const int64_t cols = rows ? w.numel() / rows : 0;
  std::vector<double> src = w.to_doubles(), dst;
  dst.reserve(src.size());
  for (int b : order)
    dst.insert(dst.end(), src.begin() + b * h * cols, src.begin() + (b + 1) * h * cols);
  return Value::from_doubles(w.dtype(), w.shape(), dst);
}

std::vector<int> onnx_gate_order(RnnKind k) {
  if (k == RnnKind::Lstm) return {0, 2, 3, 1};
  if (k == RnnKind::Gru) return {1, 0, 2};
  return {0};
}

Var* linear(Emitter& e, Var* x, Var* w, Var* b) {
  if (w->has_value()) {
    std::vector<Arg> args = {Builder::arg("x", x), Builder::arg("weight", w)};
    if (b) args.push_back(Builder::arg("bias", b));
    return e.op("linear", std::move(args));
  }
  Var* y = e.op("matmul", {Builder::arg("x", x), Builder::arg("y", w),
                           Builder::arg("transpose_x", Value::scalar_bool(false)),
                           Builder::arg("transpose_y", Value::scalar_bool(true))});
  return b ? e.bin("add", y, b) : y;
}

std::pair<Var*, Var*> rnn_cell(Emitter& e, RnnKind kind, Var* xp, Var* hp, Var* h, Var* c) {
  auto sig = [&](Var* v) { return e.un("sigmoid", v); };
  auto tanh = [&](Var* v) { return e.un("tanh", v); };
  int64_t ax = Emitter::rank(xp) - 1;
  auto split = [&](Var* v, int n) {
    return e.ops("split", {Builder::arg("x", v),
                           Builder::arg("num_splits", Value::scalar_int(DataType::Int32, n)),
                           Builder::arg("axis", Value::scalar_int(DataType::Int32, ax))});
  };
  if (kind == RnnKind::Gru) {
    auto xg = split(xp, 3), hg = split(hp, 3);
    Var* r = sig(e.bin("add", xg[0], hg[0]));
    Var* z = sig(e.bin("add", xg[1], hg[1]));
    Var* n = tanh(e.bin("add", xg[2], e.bin("mul", r, hg[2])));
    return {e.bin("add", n, e.bin("mul", z, e.bin("sub", h, n))), nullptr};  // (1 - z) n + z h
  }
  if (kind == RnnKind::Lstm) {
    auto g = split(e.bin("add", xp, hp), 4);
    Var* cn = e.bin("add", e.bin("mul", sig(g[1]), c), e.bin("mul", sig(g[0]), tanh(g[2])));
    return {e.bin("mul", sig(g[3]), tanh(cn)), cn};
  }
  Var* s = e.bin("add", xp, hp);
  return {kind == RnnKind::RnnTanh ? tanh(s) : e.un("relu", s), nullptr};
}

RnnLayerResult rnn_layer(Emitter& e, Var* xs, Var* h0, Var* c0, const RnnWeights& w,
                         const RnnLayerSpec& s) {
  if (Emitter::rank(xs) != 3) fail("a recurrent layer needs a [S, B, I] sequence");
  if (s.kind == RnnKind::Lstm && !c0) fail("an LSTM layer needs an initial cell state");
  if (s.by_loop || w.w_hr) return loop_layer(e, xs, h0, c0, w, s);
  return mil_layer(e, xs, h0, c0, w, s);
}

RnnLayerResult lstm_bidirectional(Emitter& e, Var* xs, Var* h0, Var* c0, const RnnWeights& fw,
                                  const RnnWeights& bw) {
  if (Emitter::rank(xs) != 3) fail("a recurrent layer needs a [S, B, I] sequence");
  if (fw.w_hr || bw.w_hr || fw.peephole || bw.peephole)
    fail("a bidirectional lstm op takes no projection or peepholes");
  const std::vector<int> order = {0, 1, 3, 2};  // [i, f, g, o] -> MIL's [i, f, o, g]
  auto cv = [&](const Value& v) { return e.c(reorder_gates(v, order)); };
  auto bias = [&](const RnnWeights& w) -> std::optional<Value> {
    if (!w.b_ih && !w.b_hh) return std::nullopt;
    return w.b_ih && w.b_hh ? add_values(*w.b_ih, *w.b_hh) : w.b_ih ? *w.b_ih : *w.b_hh;
  };
  std::vector<Arg> args = {Builder::arg("x", xs), Builder::arg("initial_h", h0),
                           Builder::arg("initial_c", c0), Builder::arg("weight_ih", cv(fw.w_ih)),
                           Builder::arg("weight_hh", cv(fw.w_hh))};
  if (auto b = bias(fw)) args.push_back(Builder::arg("bias", cv(*b)));
  args.push_back(Builder::arg("weight_ih_back", cv(bw.w_ih)));
  args.push_back(Builder::arg("weight_hh_back", cv(bw.w_hh)));
  if (auto b = bias(bw)) args.push_back(Builder::arg("bias_back", cv(*b)));
  args.push_back(Builder::arg("direction", Value::scalar_string("bidirectional")));
  args.push_back(Builder::arg("output_sequence", Value::scalar_bool(true)));
  auto outs = e.ops("lstm", std::move(args));
  return {outs[0], outs[1], outs[2]};
}

std::vector<Var*> counted_loop(Emitter& e, Var* count, const std::vector<Var*>& init,
                               const LoopBody& body) {
  Arg lv{"loop_vars", {}, true};
  lv.items.push_back(ArgItem{e.cs(0, DataType::Int32), nullptr});
  for (Var* v : init) lv.items.push_back(ArgItem{v, nullptr});
  BlockFn cond_fn = [&e, count](const std::vector<Var*>& vs) -> std::vector<Var*> {
    return {e.bin("less", vs[0], count)};
  };
  BlockFn body_fn = [&](const std::vector<Var*>& vs) -> std::vector<Var*> {
    std::vector<Var*> carried(vs.begin() + 1, vs.end());
    std::vector<Var*> next = {e.bin("add", vs[0], e.cs(1, DataType::Int32))};
    for (Var* v : body(vs[0], carried)) next.push_back(v);
    // a block output must be made by an op of the block: inputs, consts and outer values are
    // passed through an identity
    for (auto& v : next)
      if (!v->op() || v->input_of() || v->op()->op_type() == "const" ||
          v->op()->parent() != e.builder().block())
        v = e.un("identity", v);
    return next;
  };
  std::vector<Arg> args = {lv};
  auto outs = e.builder().create("while_loop", args, "", while_loop_blocks(cond_fn, body_fn));
  return std::vector<Var*>(outs.begin() + 1, outs.end());
}

}  // namespace compose
}  // namespace milkit
