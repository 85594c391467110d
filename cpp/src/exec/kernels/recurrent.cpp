// Kernels of the recurrent ops: gru, lstm, rnn. fp32 compute (fp16 programs are converted by the
// executor). The input projections of every step are one GEMM ([s*b, I] x W_ih^T); each step adds
// h_{t-1} x W_hh^T (one GEMM per step) and applies the cell.
//
// Semantics (coremltools' op docs and the numpy / torch references of its backend tests):
// - x [s, b, I]; initial states [b, D*H] ([:, :H] forward, [:, H:] backward for a bidirectional
//   lstm). Outputs: y [s, b, D*H] with output_sequence, else [1, b, D*H]; h_n [b, D*H]; c_n.
// - direction "reverse": the steps run from x[s-1] to x[0] and y lists the hidden states in that
//   processing order (y[k] follows x[s-1-k]; torch's output on the flipped sequence). A
//   bidirectional lstm's backward half is aligned with the input instead (y[t, :, H:] follows
//   x[t], as torch's bidirectional output); without output_sequence y holds the final states.
// - rnn: h = act(W_ih x + W_hh h + b).
// - lstm, gates in [i, f, o, z] order, peephole [i, f, o]:
//   i = ra(W_i x + R_i h + b_i + p_i * c), f = ra(... + p_f * c), z = ca(W_z x + R_z h + b_z),
//   c' = f * c + i * z, clipped to [-clip, clip] when clip is given, o = ra(... + p_o * c'),
//   h' = o * act(c').
// - gru, gates in [r, o, z] order: z = ra(W_z x + R_z h + b_z), r = ra(W_r x + R_r h + b_r),
//   o = act(W_o x + R_o (r * h) + b_o), h' = (1 - z) * o + z * h. iOS18: input_bias is added to
//   the input projections; reset_after=True gives o = act(W_o x + b_io + r * (R_o h + b_o))
//   (torch's GRU).
// - activations (case-insensitive): sigmoid, tanh, relu, linear (identity), scaled_tanh (tanh:
//   the defaults alpha = beta = 1), hard_sigmoid / sigmoid_hard (min(max(0.2 x + 0.5, 0), 1)).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

#include "gemm.h"
#include "kernels.h"

namespace milkit {

namespace {

using Act = float (*)(float);

float act_sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float act_tanh(float x) { return std::tanh(x); }
float act_relu(float x) { return x > 0.0f ? x : (x == x ? 0.0f : x); }
float act_linear(float x) { return x; }
float act_hard_sigmoid(float x) { return std::min(std::max(0.2f * x + 0.5f, 0.0f), 1.0f); }

Act activation(KernelCtx& k, const char* input, const char* def) {
  std::string name = k.str_or(input, def);
  std::string l = name;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (l == "sigmoid") return act_sigmoid;
  if (l == "tanh" || l == "scaled_tanh") return act_tanh;
  if (l == "relu") return act_relu;
  if (l == "linear") return act_linear;
  if (l == "hard_sigmoid" || l == "sigmoid_hard") return act_hard_sigmoid;
  k.fail("input '" + std::string(input) + "' = \"" + name +
         "\" is not a supported activation (sigmoid, tanh, relu, linear, scaled_tanh, hard_sigmoid)");
}

/// C[M, N] = A[M, K] x B[N, K]^T + beta * C (row-major, dense).
void gemm_nt(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float beta, float* C) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (beta == 0.0f) std::fill(C, C + M * N, 0.0f);
    return;
  }
  exec::parallel_sgemm(false, true, M, N, K, A, K, B, K, beta, C, N);
}

const Tensor& float_in(KernelCtx& k, const char* name) {
  const Tensor& t = k.in(name);
  if (t.dtype() != DataType::Float32)
    k.fail("input '" + std::string(name) + "' must be fp16 or fp32, got " + std::string(dtype_name(t.dtype())));
  return t;
}

/// A weight of shape exactly `want` (or nullptr when the optional input is absent).
const float* param(KernelCtx& k, const char* name, const std::vector<int64_t>& want, bool required = false) {
  if (!k.has(name)) {
    if (required) k.fail("input '" + std::string(name) + "' is required");
    return nullptr;
  }
  const Tensor& t = float_in(k, name);
  if (t.shape() != want)
    k.fail("input '" + std::string(name) + "' has shape " + shape_str(t.shape()) + ", expected " + shape_str(want));
  return t.data<float>();
}

/// The problem sizes: x [s, b, I], hidden size H from weight_hh [G*H, H].
struct Dims {
  int64_t S = 0, B = 0, I = 0, H = 0;
};

Dims read_dims(KernelCtx& k, int64_t gates) {
  const Tensor& x = float_in(k, "x");
  if (x.rank() != 3) k.fail("input 'x' must have rank 3 ([seq_len, batch, input_size]), got shape " + shape_str(x.shape()));
  const Tensor& wh = float_in(k, "weight_hh");
  if (wh.rank() != 2 || wh.dim(0) != gates * wh.dim(1))
    k.fail("input 'weight_hh' has shape " + shape_str(wh.shape()) + ", expected (" + std::to_string(gates) +
           "*H, H)");
  return {x.dim(0), x.dim(1), x.dim(2), wh.dim(1)};
}

/// Copies a [B, D*H] state's columns [off, off + H) into a dense [B, H] buffer.
std::vector<float> state_slice(const Tensor& t, int64_t B, int64_t DH, int64_t off, int64_t H) {
  std::vector<float> r(static_cast<size_t>(B * H));
  const float* p = t.data<float>();
  for (int64_t b = 0; b < B; ++b) std::memcpy(r.data() + b * H, p + b * DH + off, sizeof(float) * H);
  return r;
}

const Tensor& state_in(KernelCtx& k, const char* name, int64_t B, int64_t DH) {
  const Tensor& t = float_in(k, name);
  if (t.shape() != std::vector<int64_t>{B, DH})
    k.fail("input '" + std::string(name) + "' has shape " + shape_str(t.shape()) + ", expected " +
           shape_str({B, DH}) + " ([batch, hidden])");
  return t;
}

/// The input projections of every step: [S*B, G*H] = x W_ih^T + bias (+ extra bias).
std::vector<float> input_proj(const Tensor& x, const float* wih, int64_t GH, const float* b1, const float* b2) {
  int64_t rows = x.dim(0) * x.dim(1), I = x.dim(2);
  std::vector<float> xw(static_cast<size_t>(rows * GH));
  gemm_nt(rows, GH, I, x.data<float>(), wih, 0.0f, xw.data());
  if (b1 || b2)
    for (int64_t r = 0; r < rows; ++r) {
      float* p = xw.data() + r * GH;
      for (int64_t j = 0; j < GH; ++j) p[j] += (b1 ? b1[j] : 0.0f) + (b2 ? b2[j] : 0.0f);
    }
  return xw;
}

/// Where each step's hidden state goes in y: rows of [B, D*H] at column offset `off`.
struct Sink {
  float* y;           // y data
  int64_t DH, off;    // row stride and column offset
  bool seq;           // output_sequence
  bool aligned;       // y index = input index (else processing order)
};

void emit(const Sink& s, int64_t step, int64_t t, const float* h, int64_t B, int64_t H) {
  if (!s.seq) return;
  int64_t row = s.aligned ? t : step;
  for (int64_t b = 0; b < B; ++b) std::memcpy(s.y + (row * B + b) * s.DH + s.off, h + b * H, sizeof(float) * H);
}

void final_out(const Sink& s, const float* h, int64_t B, int64_t H) {
  if (s.seq) return;
  for (int64_t b = 0; b < B; ++b) std::memcpy(s.y + b * s.DH + s.off, h + b * H, sizeof(float) * H);
}

void put_state(Tensor& out, const std::vector<float>& st, int64_t B, int64_t DH, int64_t off, int64_t H) {
  float* p = out.mutable_data<float>();
  for (int64_t b = 0; b < B; ++b) std::memcpy(p + b * DH + off, st.data() + b * H, sizeof(float) * H);
}

// ---- rnn -----------------------------------------------------------------------------------------

void rnn(KernelCtx& k) {
  Dims d = read_dims(k, 1);
  const int64_t S = d.S, B = d.B, H = d.H;
  const float* wih = param(k, "weight_ih", {H, d.I}, true);
  const float* whh = param(k, "weight_hh", {H, H}, true);
  const float* bias = param(k, "bias", {H});
  const std::string dir = k.str_or("direction", "forward");
  if (dir != "forward" && dir != "reverse") k.fail("direction \"" + dir + "\" is not supported (forward, reverse)");
  const bool seq = k.bool_or("output_sequence", false);
  Act act = activation(k, "activation", "tanh");
  std::vector<float> h = state_slice(state_in(k, "initial_h", B, H), B, H, 0, H);
  std::vector<float> xw = input_proj(k.in("x"), wih, H, bias, nullptr);
  Tensor& y = k.alloc(0, {seq ? S : 1, B, H});
  Sink sink{y.mutable_data<float>(), H, 0, seq, false};
  std::vector<float> g(static_cast<size_t>(B * H));
  for (int64_t step = 0; step < S; ++step) {
    int64_t t = dir == "reverse" ? S - 1 - step : step;
    std::memcpy(g.data(), xw.data() + t * B * H, sizeof(float) * B * H);
    gemm_nt(B, H, H, h.data(), whh, 1.0f, g.data());
    for (int64_t i = 0; i < B * H; ++i) h[i] = act(g[i]);
    emit(sink, step, t, h.data(), B, H);
  }
  final_out(sink, h.data(), B, H);
  Tensor& hn = k.alloc(1, {B, H});
  put_state(hn, h, B, H, 0, H);
}

// ---- gru -----------------------------------------------------------------------------------------

void gru(KernelCtx& k) {
  Dims d = read_dims(k, 3);
  const int64_t S = d.S, B = d.B, H = d.H, G = 3 * H;
  const float* wih = param(k, "weight_ih", {G, d.I}, true);
  const float* whh = param(k, "weight_hh", {G, H}, true);
  const float* bias = param(k, "bias", {G});
  const float* ibias = param(k, "input_bias", {G});
  const bool reset_after = k.bool_or("reset_after", false);
  const std::string dir = k.str_or("direction", "forward");
  if (dir != "forward" && dir != "reverse") k.fail("direction \"" + dir + "\" is not supported (forward, reverse)");
  const bool seq = k.bool_or("output_sequence", false);
  Act ra = activation(k, "recurrent_activation", "sigmoid");
  Act act = activation(k, "activation", "tanh");
  std::vector<float> h = state_slice(state_in(k, "initial_h", B, H), B, H, 0, H);
  // input projections with input_bias, and bias for the gates it is added outside the reset to
  std::vector<float> bin;
  if (bias) {
    bin.assign(bias, bias + G);
    if (reset_after) std::fill(bin.begin() + H, bin.begin() + 2 * H, 0.0f);
  }
  std::vector<float> xw = input_proj(k.in("x"), wih, G, bias ? bin.data() : nullptr, ibias);
  Tensor& y = k.alloc(0, {seq ? S : 1, B, H});
  Sink sink{y.mutable_data<float>(), H, 0, seq, false};
  std::vector<float> hh(static_cast<size_t>(B * G)), rh(static_cast<size_t>(B * H)), ho(static_cast<size_t>(B * H));
  std::vector<float> r(static_cast<size_t>(B * H)), z(static_cast<size_t>(B * H));
  const float* ro = whh + H * H;  // R_o rows [H, 2H)
  for (int64_t step = 0; step < S; ++step) {
    int64_t t = dir == "reverse" ? S - 1 - step : step;
    const float* xt = xw.data() + t * B * G;
    gemm_nt(B, G, H, h.data(), whh, 0.0f, hh.data());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < H; ++j) {
        r[b * H + j] = ra(xt[b * G + j] + hh[b * G + j]);
        z[b * H + j] = ra(xt[b * G + 2 * H + j] + hh[b * G + 2 * H + j]);
      }
    if (reset_after) {
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j < H; ++j)
          ho[b * H + j] = r[b * H + j] * (hh[b * G + H + j] + (bias ? bias[H + j] : 0.0f));
    } else {
      for (int64_t i = 0; i < B * H; ++i) rh[i] = r[i] * h[i];
      gemm_nt(B, H, H, rh.data(), ro, 0.0f, ho.data());
    }
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < H; ++j) {
        float o = act(xt[b * G + H + j] + ho[b * H + j]);
        float zz = z[b * H + j];
        h[b * H + j] = (1.0f - zz) * o + zz * h[b * H + j];
      }
    emit(sink, step, t, h.data(), B, H);
  }
  final_out(sink, h.data(), B, H);
  Tensor& hn = k.alloc(1, {B, H});
  put_state(hn, h, B, H, 0, H);
}

// ---- lstm ----------------------------------------------------------------------------------------

struct LstmDir {
  const float* wih;
  const float* whh;
  const float* bias;
  const float* peep;
};

/// Runs one direction of an lstm over the sequence; h and c hold the initial state and get the
/// final one.
void lstm_dir(const Tensor& x, const LstmDir& w, int64_t H, bool reverse, float clip, bool has_clip, Act ra, Act ca,
              Act act, std::vector<float>& h, std::vector<float>& c, const Sink& sink) {
  const int64_t S = x.dim(0), B = x.dim(1), G = 4 * H;
  std::vector<float> xw = input_proj(x, w.wih, G, w.bias, nullptr);
  std::vector<float> g(static_cast<size_t>(B * G));
  const float* p = w.peep;
  for (int64_t step = 0; step < S; ++step) {
    int64_t t = reverse ? S - 1 - step : step;
    std::memcpy(g.data(), xw.data() + t * B * G, sizeof(float) * B * G);
    gemm_nt(B, G, H, h.data(), w.whh, 1.0f, g.data());
    for (int64_t b = 0; b < B; ++b) {
      const float* gb = g.data() + b * G;
      for (int64_t j = 0; j < H; ++j) {
        float cp = c[b * H + j];
        float i = ra(gb[j] + (p ? p[j] * cp : 0.0f));
        float f = ra(gb[H + j] + (p ? p[H + j] * cp : 0.0f));
        float zz = ca(gb[3 * H + j]);
        float cn = f * cp + i * zz;
        if (has_clip) cn = std::min(std::max(cn, -clip), clip);
        float o = ra(gb[2 * H + j] + (p ? p[2 * H + j] * cn : 0.0f));
        c[b * H + j] = cn;
        h[b * H + j] = o * act(cn);
      }
    }
    emit(sink, step, t, h.data(), B, H);
  }
  final_out(sink, h.data(), B, H);
}

void lstm(KernelCtx& k) {
  Dims d = read_dims(k, 4);
  const int64_t S = d.S, B = d.B, H = d.H, G = 4 * H;
  const std::string dir = k.str_or("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    k.fail("direction \"" + dir + "\" is not supported (forward, reverse, bidirectional)");
  const bool bidir = dir == "bidirectional";
  const int64_t D = bidir ? 2 : 1, DH = D * H;
  const bool seq = k.bool_or("output_sequence", false);
  Act ra = activation(k, "recurrent_activation", "sigmoid");
  Act ca = activation(k, "cell_activation", "tanh");
  Act act = activation(k, "activation", "tanh");
  bool has_clip = k.has("clip");
  float clip = 0.0f;
  if (has_clip) {
    const Tensor& ct = float_in(k, "clip");
    if (ct.numel() != 1) k.fail("input 'clip' must be a scalar, got shape " + shape_str(ct.shape()));
    clip = ct.data<float>()[0];
  }
  LstmDir fw{param(k, "weight_ih", {G, d.I}, true), param(k, "weight_hh", {G, H}, true), param(k, "bias", {G}),
             param(k, "peephole", {3 * H})};
  const Tensor& h0 = state_in(k, "initial_h", B, DH);
  const Tensor& c0 = state_in(k, "initial_c", B, DH);
  const Tensor& x = k.in("x");
  Tensor& y = k.alloc(0, {seq ? S : 1, B, DH});
  Tensor& hn = k.alloc(1, {B, DH});
  Tensor& cn = k.alloc(2, {B, DH});
  float* yp = y.mutable_data<float>();
  std::vector<float> h = state_slice(h0, B, DH, 0, H), c = state_slice(c0, B, DH, 0, H);
  lstm_dir(x, fw, H, dir == "reverse", clip, has_clip, ra, ca, act, h, c, Sink{yp, DH, 0, seq, bidir});
  put_state(hn, h, B, DH, 0, H);
  put_state(cn, c, B, DH, 0, H);
  if (bidir) {
    LstmDir bw{param(k, "weight_ih_back", {G, d.I}, true), param(k, "weight_hh_back", {G, H}, true),
               param(k, "bias_back", {G}), param(k, "peephole_back", {3 * H})};
    h = state_slice(h0, B, DH, H, H);
    c = state_slice(c0, B, DH, H, H);
    lstm_dir(x, bw, H, true, clip, has_clip, ra, ca, act, h, c, Sink{yp, DH, H, seq, true});
    put_state(hn, h, B, DH, H, H);
    put_state(cn, c, B, DH, H, H);
  }
}

}  // namespace

void register_recurrent_kernels(KernelRegistry& r) {
  r.add("gru", {gru});
  r.add("lstm", {lstm});
  r.add("rnn", {rnn});
}

}  // namespace milkit
