// ATen recurrent layers and cells (LSTM, GRU, RNN) as MIL ops or loops.
#include <cmath>

#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

enum class Kind { Lstm, Gru, RnnTanh, RnnRelu };

int gates(Kind k) { return k == Kind::Lstm ? 4 : k == Kind::Gru ? 3 : 1; }

// Row blocks of size rows / (order.size()) of `w` (rank 1 or 2), in `order`.
Value reorder_rows(const Value& w, const std::vector<int>& order) {
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

Value add_values(const Value& a, const Value& b) {
  std::vector<double> x = a.to_doubles(), y = b.to_doubles();
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
  return Value::from_doubles(a.dtype(), a.shape(), x);
}

// The weights of one layer and direction (values narrowed to what MIL computes in).
struct Weights {
  Value w_ih, w_hh;
  std::optional<Value> b_ih, b_hh, w_hr;
};

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
      Weights w{ps[k], ps[k + 1], std::nullopt, std::nullopt, std::nullopt};
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

Var* concat(C& cv, const std::vector<Var*>& vs, int64_t axis) {
  if (vs.size() == 1) return vs[0];
  Arg values{"values", {}, true};
  for (Var* v : vs) values.items.push_back(ArgItem{v, nullptr});
  return cv.op("concat", {std::move(values), C::ai32("axis", axis)});
}

// [B, H] states stacked into [N, B, H].
Var* stack0(C& cv, const std::vector<Var*>& vs) {
  std::vector<Var*> e;
  for (Var* v : vs) e.push_back(cv.op("expand_dims", {C::a("x", v), C::aints32("axes", {0})}));
  return concat(cv, e, 0);
}

Var* reverse0(C& cv, Var* x) { return cv.op("reverse", {C::a("x", x), C::aints32("axes", {0})}); }

// x W^T (+ b): linear for constant weights, else matmul.
Var* project(C& cv, Var* x, Var* w, Var* b) {
  if (w->has_value()) {
    std::vector<Arg> args = {C::a("x", x), C::a("weight", w)};
    if (b) args.push_back(C::a("bias", b));
    return cv.op("linear", std::move(args));
  }
  Var* y = cv.op("matmul", {C::a("x", x), C::a("y", w), C::abool("transpose_x", false),
                            C::abool("transpose_y", true)});
  return b ? cv.op("add", {C::a("x", y), C::a("y", b)}) : y;
}

// One step of a cell from the input projection xp = x W_ih^T + b_ih and the hidden projection
// hp = h W_hh^T + b_hh (gates in torch's order): (h', c').
std::pair<Var*, Var*> cell_math(C& cv, Kind kind, Var* xp, Var* hp, Var* h, Var* c) {
  auto sig = [&](Var* v) { return cv.op("sigmoid", {C::a("x", v)}); };
  auto tanh = [&](Var* v) { return cv.op("tanh", {C::a("x", v)}); };
  auto add = [&](Var* a, Var* b) { return cv.op("add", {C::a("x", a), C::a("y", b)}); };
  auto mul = [&](Var* a, Var* b) { return cv.op("mul", {C::a("x", a), C::a("y", b)}); };
  auto sub = [&](Var* a, Var* b) { return cv.op("sub", {C::a("x", a), C::a("y", b)}); };
  int64_t ax = C::shape(xp).size() - 1;
  if (kind == Kind::Gru) {
    auto xg = cv.ops("split", {C::a("x", xp), C::ai32("num_splits", 3), C::ai32("axis", ax)});
    auto hg = cv.ops("split", {C::a("x", hp), C::ai32("num_splits", 3), C::ai32("axis", ax)});
    Var* r = sig(add(xg[0], hg[0]));
    Var* z = sig(add(xg[1], hg[1]));
    Var* nn = tanh(add(xg[2], mul(r, hg[2])));
    return {add(nn, mul(z, sub(h, nn))), nullptr};  // (1 - z) * n + z * h
  }
  if (kind == Kind::Lstm) {
    auto g =
        cv.ops("split", {C::a("x", add(xp, hp)), C::ai32("num_splits", 4), C::ai32("axis", ax)});
    Var* cn = add(mul(sig(g[1]), c), mul(sig(g[0]), tanh(g[2])));
    return {mul(sig(g[3]), tanh(cn)), cn};
  }
  Var* s = add(xp, hp);
  return {kind == Kind::RnnTanh ? tanh(s) : cv.op("relu", {C::a("x", s)}), nullptr};
}

// One direction of one layer as a while_loop over xs [S, B, I] (reversed when `reverse`): the
// cell built from linear and activations. Returns (y [S, B, Hout], h_n [B, Hout], c_n or null).
std::vector<Var*> loop_layer(C& cv, Kind kind, const Weights& w, Var* xs, Var* h0, Var* c0,
                             bool reverse) {
  DataType dt = C::dtype(xs);
  const int64_t H = w.w_hh.shape()[1];
  const int64_t Hout = w.w_hr ? w.w_hr->shape()[0] : H;
  Var* wih = cv.c(w.w_ih);
  Var* whh = cv.c(w.w_hh);
  Var* bih = w.b_ih ? cv.c(*w.b_ih) : nullptr;
  Var* bhh = w.b_hh ? cv.c(*w.b_hh) : nullptr;
  Var* whr = w.w_hr ? cv.c(*w.w_hr) : nullptr;
  // the input projections of every step at once
  Var* xp = project(cv, xs, wih, bih);
  if (reverse) xp = reverse0(cv, xp);
  const auto& xsh = C::shape(xs);
  Var* len = cv.op("gather", {C::a("x", cv.op("shape", {C::a("x", xp)})), C::ai32("indices", 0),
                              C::ai32("axis", 0)});
  Dim B = xsh[1];
  Var* ls =
      cv.op("make_list",
            {C::a("init_length", Value::scalar_int(DataType::Int32, 0)),
             Arg{"elem_shape", {elem_dim(cv, B), elem_dim(cv, cv.ctx().constant(Hout))}, true},
             C::astr("dtype", std::string(dtype_name(dt)))});
  std::vector<Var*> init = {cv.cs(0, DataType::Int32), h0};
  if (kind == Kind::Lstm) init.push_back(c0);
  init.push_back(ls);
  Arg lv{"loop_vars", {}, true};
  for (Var* v : init) lv.items.push_back(ArgItem{v, nullptr});
  const bool lstm = kind == Kind::Lstm;
  BlockFn cond_fn = [&cv, len](const std::vector<Var*>& vs) -> std::vector<Var*> {
    return {cv.op("less", {C::a("x", vs[0]), C::a("y", len)})};
  };
  BlockFn body_fn = [&](const std::vector<Var*>& vs) -> std::vector<Var*> {
    Var* t = vs[0];
    Var* h = vs[1];
    Var* c = lstm ? vs[2] : nullptr;
    Var* list = vs[lstm ? 3 : 2];
    Var* xt = cv.op("gather", {C::a("x", xp), C::a("indices", t), C::ai32("axis", 0)});
    Var* hp = project(cv, h, whh, bhh);
    auto [hn, cn] = cell_math(cv, kind, xt, hp, h, c);
    if (whr) hn = cv.op("linear", {C::a("x", hn), C::a("weight", whr)});
    std::vector<Var*> next = {
        cv.op("add", {C::a("x", t), C::a("y", Value::scalar_int(DataType::Int32, 1))}), hn};
    if (lstm) next.push_back(cn);
    next.push_back(cv.op("list_write", {C::a("ls", list), C::a("index", t), C::a("value", hn)}));
    for (auto& v : next)
      if (!v->op() || v->input_of()) v = cv.op("identity", {C::a("x", v)});
    return next;
  };
  std::vector<Arg> args = {lv};
  auto outs = cv.b.create("while_loop", args, "", while_loop_blocks(cond_fn, body_fn));
  Var* lsout = outs.back();
  Var* idx = cv.op("range_1d", {C::a("start", Value::scalar_int(DataType::Int32, 0)),
                                C::a("end", cv.op("list_length", {C::a("ls", lsout)})),
                                C::a("step", Value::scalar_int(DataType::Int32, 1))});
  Var* y = cv.op("list_gather", {C::a("ls", lsout), C::a("indices", idx)});
  if (reverse) y = reverse0(cv, y);
  // the sequence keeps its known length (the list's length is a run-time value)
  if (xsh[0]->is_const())
    y = cv.op("reshape",
              {C::a("x", y),
               C::aints32("shape", {xsh[0]->value(), B->is_const() ? B->value() : -1, Hout})});
  return {y, outs[1], lstm ? outs[2] : nullptr};
}

// MIL's op for one direction of an RNN / GRU layer (forward; reversed input for the backward
// direction). Returns (y [S, B, H], h_n [B, H]).
std::vector<Var*> mil_layer(C& cv, Kind kind, const Weights& w, Var* xs, Var* h0, bool reverse) {
  Var* x = reverse ? reverse0(cv, xs) : xs;
  std::vector<Arg> args = {C::a("x", x), C::a("initial_h", h0)};
  if (kind == Kind::Gru) {
    const std::vector<int> order = {0, 2, 1};  // torch [r, z, n] -> MIL [r, o, z]
    args.push_back(C::a("weight_ih", cv.c(reorder_rows(w.w_ih, order))));
    args.push_back(C::a("weight_hh", cv.c(reorder_rows(w.w_hh, order))));
    if (w.b_hh) args.push_back(C::a("bias", cv.c(reorder_rows(*w.b_hh, order))));
    if (w.b_ih) args.push_back(C::a("input_bias", cv.c(reorder_rows(*w.b_ih, order))));
    args.push_back(C::abool("reset_after", true));
  } else {
    args.push_back(C::a("weight_ih", cv.c(w.w_ih)));
    args.push_back(C::a("weight_hh", cv.c(w.w_hh)));
    if (w.b_ih) args.push_back(C::a("bias", cv.c(add_values(*w.b_ih, *w.b_hh))));
    args.push_back(C::astr("activation", kind == Kind::RnnTanh ? "tanh" : "relu"));
  }
  args.push_back(C::abool("output_sequence", true));
  auto outs = cv.ops(kind == Kind::Gru ? "gru" : "rnn", std::move(args));
  Var* y = outs[0];
  if (reverse) y = reverse0(cv, y);
  return {y, outs[1]};
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
    if (kind == Kind::Lstm && !use_loop) {
      const std::vector<int> order = {0, 1, 3, 2};  // torch [i, f, g, o] -> MIL [i, f, o, z]
      std::vector<Arg> args = {C::a("x", seq), C::a("initial_h", concat(cv, h0s, 1)),
                               C::a("initial_c", concat(cv, c0s, 1)),
                               C::a("weight_ih", cv.c(reorder_rows(wl[0].w_ih, order))),
                               C::a("weight_hh", cv.c(reorder_rows(wl[0].w_hh, order)))};
      if (has_b)
        args.push_back(
            C::a("bias", cv.c(reorder_rows(add_values(*wl[0].b_ih, *wl[0].b_hh), order))));
      if (bidir) {
        args.push_back(C::a("weight_ih_back", cv.c(reorder_rows(wl[1].w_ih, order))));
        args.push_back(C::a("weight_hh_back", cv.c(reorder_rows(wl[1].w_hh, order))));
        if (has_b)
          args.push_back(
              C::a("bias_back", cv.c(reorder_rows(add_values(*wl[1].b_ih, *wl[1].b_hh), order))));
      }
      args.push_back(C::astr("direction", bidir ? "bidirectional" : "forward"));
      args.push_back(C::abool("output_sequence", true));
      auto outs = cv.ops("lstm", std::move(args));
      seq = outs[0];
      if (bidir) {
        auto hs =
            cv.ops("split", {C::a("x", outs[1]), C::ai32("num_splits", 2), C::ai32("axis", 1)});
        auto cs =
            cv.ops("split", {C::a("x", outs[2]), C::ai32("num_splits", 2), C::ai32("axis", 1)});
        hn.insert(hn.end(), hs.begin(), hs.end());
        cn.insert(cn.end(), cs.begin(), cs.end());
      } else {
        hn.push_back(outs[1]);
        cn.push_back(outs[2]);
      }
      continue;
    }
    for (int d = 0; d < dirs; ++d) {
      auto r =
          use_loop
              ? loop_layer(cv, kind, wl[static_cast<size_t>(d)], seq, h0s[static_cast<size_t>(d)],
                           kind == Kind::Lstm ? c0s[static_cast<size_t>(d)] : nullptr, d == 1)
              : mil_layer(cv, kind, wl[static_cast<size_t>(d)], seq, h0s[static_cast<size_t>(d)],
                          d == 1);
      ys.push_back(r[0]);
      hn.push_back(r[1]);
      if (kind == Kind::Lstm) cn.push_back(r[2]);
    }
    seq = concat(cv, ys, 2);
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
  Var* xp = project(cv, x, fl(cv.tensor(n, "w_ih")), fl(cv.opt_tensor(n, "b_ih")));
  Var* hp = project(cv, fl(hx[0]), fl(cv.tensor(n, "w_hh")), fl(cv.opt_tensor(n, "b_hh")));
  auto [h, c] = cell_math(cv, kind, xp, hp, fl(hx[0]), kind == Kind::Lstm ? fl(hx[1]) : nullptr);
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
