// ATen recurrent layers and cells (LSTM, GRU, RNN) as MIL ops or loops.
#include <cmath>

#include "milkit/compose/rnn.h"
#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

using Kind = compose::RnnKind;
using Weights = compose::RnnWeights;

int gates(Kind k) { return k == Kind::Lstm ? 4 : k == Kind::Gru ? 3 : 1; }

// All weights, [layer][direction].
std::vector<std::vector<Weights>> read_params(C& cv, const json& n, Kind kind, bool has_b,
                                              int64_t layers, int dirs, bool* proj) {
  const json* a = C::arg(n, "params");
  if (!a || !a->contains("as_tensors")) cv.fail(n, "argument 'params' must be a list of tensors");
  std::vector<Value> ps;
  for (auto& e : (*a)["as_tensors"]) {
    std::string name = e.at("name").get<std::string>();
    const Value* v = cv.known(name);
    if (!v)
      cv.fail(n, "the weight '" + name +
                     "' is not a constant; Core ML's recurrent layers need constant weights");
    ps.push_back(narrow(*v, "weight '" + name + "'"));
  }
  const size_t per = has_b ? 4 : 2;
  const size_t cells = static_cast<size_t>(layers * dirs);
  *proj = false;
  if (ps.size() == cells * (per + 1) && kind == Kind::Lstm) {
    *proj = true;
  } else if (ps.size() != cells * per) {
    cv.fail(n, "expected " + std::to_string(cells * per) + " weights for " +
                   std::to_string(layers) + " layer(s) x " + std::to_string(dirs) +
                   " direction(s)" + (has_b ? " with biases" : "") + ", got " +
                   std::to_string(ps.size()));
  }
  const size_t stride = per + (*proj ? 1 : 0);
  std::vector<std::vector<Weights>> r(static_cast<size_t>(layers));
  for (size_t l = 0; l < static_cast<size_t>(layers); ++l)
    for (size_t d = 0; d < static_cast<size_t>(dirs); ++d) {
      size_t k = (l * static_cast<size_t>(dirs) + d) * stride;
      Weights w{ps[k], ps[k + 1], std::nullopt, std::nullopt, std::nullopt, std::nullopt};
      if (has_b) {
        w.b_ih = ps[k + 2];
        w.b_hh = ps[k + 3];
      }
      if (*proj) w.w_hr = ps[k + per];
      if (w.w_ih.rank() != 2 || w.w_hh.rank() != 2 || w.w_hh.shape()[0] % gates(kind) != 0)
        cv.fail(n, "weights of layer " + std::to_string(l) + " have unexpected shapes");
      r[l].push_back(std::move(w));
    }
  return r;
}

// x[k] of a [L*D, B, H] state tensor.
Var* state_at(C& cv, Var* h0, int64_t k) {
  return cv.op("gather", {C::a("x", h0), C::ai32("indices", k), C::ai32("axis", 0)});
}

// [B, H] states stacked into [N, B, H].
Var* stack0(C& cv, const std::vector<Var*>& vs) {
  std::vector<Var*> e;
  for (Var* v : vs) e.push_back(cv.op("expand_dims", {C::a("x", v), C::aints32("axes", {0})}));
  return cv.e.concat(e, 0);
}

void convert_rnn(C& cv, const json& n, Kind kind) {
  Var* x = cv.tensor(n, "input");
  if (cv.rank(n, x) != 3) cv.fail(n, "input must have rank 3, got " + x->type()->str());
  if (!is_float(C::dtype(x))) cv.fail(n, "input must be a float tensor, got " + x->type()->str());
  std::vector<Var*> hx =
      kind == Kind::Lstm ? cv.tensors(n, "hx") : std::vector<Var*>{cv.tensor(n, "hx")};
  if (kind == Kind::Lstm && hx.size() != 2) cv.fail(n, "hx must hold (h_0, c_0)");
  const bool has_b = cv.bo(n, "has_biases", true);
  const int64_t layers = cv.i(n, "num_layers", 1);
  const bool train = cv.bo(n, "train", false);
  const double dropout = cv.f(n, "dropout", 0.0);
  const bool bidir = cv.bo(n, "bidirectional", false);
  const bool batch_first = cv.bo(n, "batch_first", false);
  if (train && dropout > 0 && layers > 1)
    cv.fail(
        n,
        "dropout between layers in training mode is not supported (export the model in eval mode)");
  const int dirs = bidir ? 2 : 1;
  bool proj = false;
  auto W = read_params(cv, n, kind, has_b, layers, dirs, &proj);
  DataType dt = C::dtype(x);
  for (auto& h : hx) h = cv.cast(h, dt);
  Var* seq = batch_first ? cv.op("transpose", {C::a("x", x), C::aints32("perm", {1, 0, 2})}) : x;
  const bool use_loop = proj || (kind == Kind::Gru && cv.target() < Target::iOS18);
  std::vector<Var*> hn, cn;
  for (int64_t l = 0; l < layers; ++l) {
    auto& wl = W[static_cast<size_t>(l)];
    for (auto& w : wl) {
      w.w_ih = w.w_ih.cast(dt);
      w.w_hh = w.w_hh.cast(dt);
      if (w.b_ih) w.b_ih = w.b_ih->cast(dt);
      if (w.b_hh) w.b_hh = w.b_hh->cast(dt);
      if (w.w_hr) w.w_hr = w.w_hr->cast(dt);
    }
    std::vector<Var*> h0s, c0s;
    for (int d = 0; d < dirs; ++d) {
      h0s.push_back(state_at(cv, hx[0], l * dirs + d));
      if (kind == Kind::Lstm) c0s.push_back(state_at(cv, hx[1], l * dirs + d));
    }
    std::vector<Var*> ys;
    if (kind == Kind::Lstm && !use_loop && bidir) {
      // MIL's one bidirectional lstm op
      auto r = compose::lstm_bidirectional(cv.e, seq, cv.e.concat(h0s, 1), cv.e.concat(c0s, 1),
                                           wl[0], wl[1]);
      seq = r.y;
      auto hs = cv.ops("split", {C::a("x", r.h), C::ai32("num_splits", 2), C::ai32("axis", 1)});
      auto cs = cv.ops("split", {C::a("x", r.c), C::ai32("num_splits", 2), C::ai32("axis", 1)});
      hn.insert(hn.end(), hs.begin(), hs.end());
      cn.insert(cn.end(), cs.begin(), cs.end());
      continue;
    }
    for (int d = 0; d < dirs; ++d) {
      compose::RnnLayerSpec spec;
      spec.kind = kind;
      spec.reverse = d == 1;
      spec.by_loop = use_loop;
      size_t u = static_cast<size_t>(d);
      auto r =
          compose::rnn_layer(cv.e, seq, h0s[u], kind == Kind::Lstm ? c0s[u] : nullptr, wl[u], spec);
      ys.push_back(r.y);
      hn.push_back(r.h);
      if (kind == Kind::Lstm) cn.push_back(r.c);
    }
    seq = cv.e.concat(ys, 2);
  }
  Var* y = batch_first ? cv.op("transpose", {C::a("x", seq), C::aints32("perm", {1, 0, 2})}) : seq;
  std::vector<Var*> outs = {y, stack0(cv, hn)};
  if (kind == Kind::Lstm) outs.push_back(stack0(cv, cn));
  cv.outs(n, outs);
}

// aten.lstm_cell / gru_cell / rnn_tanh_cell / rnn_relu_cell: one step (weights may be run-time
// values, e.g. a scan body's inputs).
void convert_cell(C& cv, const json& n, Kind kind) {
  Var* x = cv.tensor(n, "input");
  std::vector<Var*> hx =
      kind == Kind::Lstm ? cv.tensors(n, "hx") : std::vector<Var*>{cv.tensor(n, "hx")};
  if (kind == Kind::Lstm && hx.size() != 2) cv.fail(n, "hx must hold (h, c)");
  DataType dt = C::dtype(x);
  if (!is_float(dt)) cv.fail(n, "input must be a float tensor, got " + x->type()->str());
  auto fl = [&](Var* v) { return v ? cv.cast(v, dt) : nullptr; };
  Var* xp = compose::linear(cv.e, x, fl(cv.tensor(n, "w_ih")), fl(cv.opt_tensor(n, "b_ih")));
  Var* hp =
      compose::linear(cv.e, fl(hx[0]), fl(cv.tensor(n, "w_hh")), fl(cv.opt_tensor(n, "b_hh")));
  auto [h, c] =
      compose::rnn_cell(cv.e, kind, xp, hp, fl(hx[0]), kind == Kind::Lstm ? fl(hx[1]) : nullptr);
  if (kind == Kind::Lstm)
    cv.outs(n, {h, c});
  else
    cv.out(n, h);
}

void lstm(C& cv, const json& n) { convert_rnn(cv, n, Kind::Lstm); }

void gru(C& cv, const json& n) { convert_rnn(cv, n, Kind::Gru); }

void rnn_tanh(C& cv, const json& n) { convert_rnn(cv, n, Kind::RnnTanh); }

void rnn_relu(C& cv, const json& n) { convert_rnn(cv, n, Kind::RnnRelu); }

void lstm_cell(C& cv, const json& n) { convert_cell(cv, n, Kind::Lstm); }

void gru_cell(C& cv, const json& n) { convert_cell(cv, n, Kind::Gru); }

void rnn_tanh_cell(C& cv, const json& n) { convert_cell(cv, n, Kind::RnnTanh); }

void rnn_relu_cell(C& cv, const json& n) { convert_cell(cv, n, Kind::RnnRelu); }

}  // namespace

void register_rnn(OpTable& t) {
  t.on("aten.lstm.input", lstm);
  t.on("aten.gru.input", gru);
  t.on("aten.rnn_tanh.input", rnn_tanh);
  t.on("aten.rnn_relu.input", rnn_relu);
  t.on("aten.lstm_cell", lstm_cell);
  t.on("aten.gru_cell", gru_cell);
  t.on("aten.rnn_tanh_cell", rnn_tanh_cell);
  t.on("aten.rnn_relu_cell", rnn_relu_cell);
}

}  // namespace torch_detail
}  // namespace milkit
