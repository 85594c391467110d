// recurrent ops: gru, lstm, rnn (coremltools iOS15/recurrent.py, iOS17/recurrent.py,
// iOS18/recurrent.py).
//
// x is [s, b, I] (sequence first); the first output is the hidden state of every step
// ([s, b, D*H], output_sequence) or of the last step ([1, b, D*H]); then the final hidden state
// [b, D*H] (and lstm's final cell state). D = 2 for a bidirectional lstm. Every version computes in
// T: fp32 only up to iOS16, fp16 or fp32 from iOS17. iOS18's gru adds reset_after and input_bias
// (optional, no materialized default). Validation follows coremltools' checks and messages: the
// weight shapes are checked as coremltools does (rows // H), the kernel checks them exactly.
#include <algorithm>
#include <cctype>

#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"

namespace milkit {

namespace {

DTypeSet domain_t(Target since) {
  return since >= Target::iOS17 ? dt::floats() : DTypeSet{DataType::Float32};
}

/// x must be rank 3. coremltools' check formats its message with len(rank) and so raises a
/// TypeError; milkit's error is both a TypeError and a ValueError.
const std::vector<Dim>& rank3_x(InferCtx& ic) {
  const Type* t = ic.type("x");
  if (!t->has_rank() || t->rank() != 3)
    ic.type_error("x", "must have rank 3 ([seq_len, batch, input_size]), got " + t->str());
  return t->shape();
}

const std::vector<Dim>& weight_shape(InferCtx& ic, std::string_view name) {
  const Type* t = ic.type(name);
  if (!t->has_rank() || t->rank() != 2)
    ic.fail_input(name, "must have rank 2, got " + t->str());
  return t->shape();
}

std::vector<const Type*> outputs(InferCtx& ic, const std::vector<Dim>& xs, Dim hidden, int n_states) {
  Context& c = ic.ctx;
  DataType dt = ic.type("x")->dtype();
  Dim seq = ic.bool_("output_sequence") ? xs[0] : c.constant(1);
  std::vector<const Type*> r{c.tensor(dt, std::vector<Dim>{seq, xs[1], hidden})};
  for (int i = 0; i < n_states; ++i) r.push_back(c.tensor(dt, std::vector<Dim>{xs[1], hidden}));
  return r;
}

/// floor(a / b) for known dims; nullopt otherwise (then coremltools' comparisons cannot be made).
std::optional<int64_t> known_floordiv(Dim a, Dim b) {
  if (!a->is_const() || !b->is_const() || b->value() == 0) return std::nullopt;
  int64_t q = a->value() / b->value();
  if ((a->value() % b->value() != 0) && ((a->value() < 0) != (b->value() < 0))) --q;
  return q;
}

void check_direction(InferCtx& ic, bool bidirectional_ok) {
  std::string d = ic.str("direction");
  bool ok = d == "forward" || d == "reverse" || (bidirectional_ok && d == "bidirectional");
  if (!ok)
    ic.fail_input("direction", "= \"" + d + "\" is not supported; supported directions: " +
                                   (bidirectional_ok ? "\"forward\", \"reverse\", \"bidirectional\""
                                                     : "\"forward\", \"reverse\""));
}

// ---- gru ---------------------------------------------------------------------------------------

void add_gru(OpRegistry& r, Target since) {
  OpSchema s;
  s.name = "gru";
  s.since = since;
  s.num_outputs = 2;
  DTypeSet t = domain_t(since);
  s.inputs = {in("x", t, "T"),
              in("initial_h", t, "T"),
              in_const("weight_ih", t, "T"),
              in_const("weight_hh", t, "T"),
              in_opt_const("bias", t, nullptr, "T"),
              in_opt_const("direction", dt::string(), def_str("forward")),
              in_opt_const("output_sequence", dt::boolean(), def_bool(false)),
              in_opt_const("recurrent_activation", dt::string(), def_str("sigmoid")),
              in_opt_const("activation", dt::string(), def_str("tanh"))};
  if (since >= Target::iOS18) {
    // no materialized defaults (coremltools' default_inputs leaves them out)
    s.inputs.push_back(in_opt_const("reset_after", dt::boolean()));
    s.inputs.push_back(in_opt_const("input_bias", t, nullptr, "T"));
  }
  s.infer = [](InferCtx& ic) {
    const std::vector<Dim>& xs = rank3_x(ic);
    weight_shape(ic, "weight_ih");
    const std::vector<Dim>& wh = weight_shape(ic, "weight_hh");
    check_direction(ic, false);
    Dim hidden = wh[1];
    std::optional<int64_t> q = known_floordiv(wh[0], ic.ctx.constant(3));
    if (q && hidden->is_const() && hidden->value() != *q)
      ic.fail_input("weight_hh", "has shape " + ic.type("weight_hh")->str() +
                                     " (weight_ih " + ic.type("weight_ih")->str() +
                                     "): hidden dim size mismatch, expecting <3*H, H>");
    return outputs(ic, xs, hidden, 1);
  };
  r.add(std::move(s));
}

// ---- lstm --------------------------------------------------------------------------------------

void check_lstm_weights(InferCtx& ic, std::string_view ih, std::string_view hh) {
  const Type* ti = ic.type(ih);
  const Type* th = ic.type(hh);
  if (!ti->has_rank() || !th->has_rank() || ti->rank() != 2 || th->rank() != 2)
    ic.fail("expecting rank 2 weights, got " + std::string(ih) + " " + ti->str() + ", " +
            std::string(hh) + " " + th->str());
  Dim h = th->shape()[1];
  std::optional<int64_t> qh = known_floordiv(th->shape()[0], h);
  std::optional<int64_t> qi = known_floordiv(ti->shape()[0], h);
  if ((qh && *qh != 4) || (qi && *qi != 4))
    ic.fail("incorrect weight matrix: hidden dim size mismatch; provided " + std::string(ih) + " " +
            ti->str() + ", " + std::string(hh) + " " + th->str() + "; expecting <4*H, H>");
}

bool lstm_activation_ok(std::string a) {
  std::transform(a.begin(), a.end(), a.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return a == "tanh" || a == "scaled_tanh" || a == "sigmoid" || a == "hard_sigmoid" || a == "relu" ||
         a == "linear";
}

void add_lstm(OpRegistry& r, Target since) {
  OpSchema s;
  s.name = "lstm";
  s.since = since;
  s.num_outputs = 3;
  DTypeSet t = domain_t(since);
  s.inputs = {in("x", t, "T"),
              in("initial_h", t, "T"),
              in("initial_c", t, "T"),
              in_const("weight_ih", t, "T"),
              in_const("weight_hh", t, "T"),
              in_opt_const("bias", t, nullptr, "T"),
              in_opt_const("peephole", t, nullptr, "T"),
              in_opt_const("weight_ih_back", t, nullptr, "T"),
              in_opt_const("weight_hh_back", t, nullptr, "T"),
              in_opt_const("bias_back", t, nullptr, "T"),
              in_opt_const("peephole_back", t, nullptr, "T"),
              in_opt_const("direction", dt::string(), def_str("forward")),
              in_opt_const("output_sequence", dt::boolean(), def_bool(false)),
              in_opt_const("recurrent_activation", dt::string(), def_str("sigmoid")),
              in_opt_const("cell_activation", dt::string(), def_str("tanh")),
              in_opt_const("activation", dt::string(), def_str("tanh")),
              in_opt_const("clip", t, nullptr, "T")};
  s.infer = [](InferCtx& ic) {
    const std::vector<Dim>& xs = rank3_x(ic);
    check_direction(ic, true);
    check_lstm_weights(ic, "weight_ih", "weight_hh");
    bool bidir = ic.str("direction") == "bidirectional";
    if (bidir) {
      if (!ic.has("weight_ih_back") || !ic.has("weight_hh_back"))
        ic.fail("for a bidirectional LSTM, the `weight_ih_back` and `weight_hh_back` must be provided");
      check_lstm_weights(ic, "weight_ih_back", "weight_hh_back");
    }
    for (const char* a : {"recurrent_activation", "cell_activation", "activation"}) {
      std::string v = ic.str(a);
      if (!lstm_activation_ok(v))
        ic.fail_input(a, "= \"" + v + "\": activation `" + v +
                             "` not supported; supported activations: tanh, scaled_tanh, sigmoid, "
                             "hard_sigmoid, relu, linear");
    }
    Dim h = ic.type("weight_hh")->shape()[1];
    if (bidir) h = ic.ctx.mul(ic.ctx.constant(2), h);
    return outputs(ic, xs, h, 2);
  };
  r.add(std::move(s));
}

// ---- rnn ---------------------------------------------------------------------------------------

void add_rnn(OpRegistry& r, Target since) {
  OpSchema s;
  s.name = "rnn";
  s.since = since;
  s.num_outputs = 2;
  DTypeSet t = domain_t(since);
  s.inputs = {in("x", t, "T"),
              in("initial_h", t, "T"),
              in_const("weight_ih", t, "T"),
              in_const("weight_hh", t, "T"),
              in_opt_const("bias", t, nullptr, "T"),
              in_opt_const("direction", dt::string(), def_str("forward")),
              in_opt_const("output_sequence", dt::boolean(), def_bool(false)),
              in_opt_const("activation", dt::string(), def_str("tanh"))};
  s.infer = [](InferCtx& ic) {
    const std::vector<Dim>& xs = rank3_x(ic);
    const Type* ti = ic.type("weight_ih");
    const Type* th = ic.type("weight_hh");
    if (!ti->has_rank() || !th->has_rank() || ti->rank() != 2 || th->rank() != 2)
      ic.fail("invalid weight shape: expecting rank 2, got weight_ih " + ti->str() + ", weight_hh " +
              th->str());
    check_direction(ic, false);
    return outputs(ic, xs, ti->shape()[0], 1);
  };
  r.add(std::move(s));
}

}  // namespace

void register_recurrent_ops(OpRegistry& r) {
  add_gru(r, Target::iOS13);
  add_gru(r, Target::iOS17);
  add_gru(r, Target::iOS18);
  add_lstm(r, Target::iOS13);
  add_lstm(r, Target::iOS17);
  add_rnn(r, Target::iOS13);
  add_rnn(r, Target::iOS17);
}

}  // namespace milkit
