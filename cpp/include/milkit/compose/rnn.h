// milkit/compose/rnn.h - recurrent layers (LSTM, GRU, RNN) and counted loops.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "milkit/compose/emitter.h"

namespace milkit {
namespace compose {

/// The recurrent cell.
enum class RnnKind { Lstm, Gru, RnnTanh, RnnRelu };

/// One direction of one layer's weights, gates in the canonical (torch) order: LSTM [i, f, g, o],
/// GRU [r, z, n]; values in the dtype the layer computes in.
struct RnnWeights {
  Value w_ih;                     ///< [gates * H, I].
  Value w_hh;                     ///< [gates * H, H].
  std::optional<Value> b_ih;      ///< [gates * H], or none.
  std::optional<Value> b_hh;      ///< [gates * H], or none.
  std::optional<Value> w_hr;      ///< LSTM projection [P, H] (torch proj_size; loop only).
  std::optional<Value> peephole;  ///< LSTM peepholes [3 * H] in the order [i, f, o].
};

/// Row blocks of `w` (rank 1 or 2, rows split into order.size() equal blocks) taken in `order`:
/// block k of the result is block order[k] of w.
Value reorder_gates(const Value& w, const std::vector<int>& order);
/// The order taking ONNX's gate blocks to the canonical ones: LSTM [i, o, f, c] -> [i, f, g, o],
/// GRU [z, r, h] -> [r, z, n]; RNN the identity.
std::vector<int> onnx_gate_order(RnnKind k);

/// One direction of one layer.
struct RnnLayerSpec {
  RnnKind kind = RnnKind::Lstm;  ///< The cell.
  bool reverse = false;          ///< Runs from the last step; outputs stay aligned with the input.
  bool linear_before_reset = true;  ///< GRU: r * (h W_hn^T + b_hn) (torch; ONNX's attribute).
  /// MIL activation names replacing the defaults (ONNX): LSTM (recurrent, cell, output), GRU
  /// (recurrent, output), RNN (the one); empty: sigmoid / tanh, or RnnRelu's relu.
  std::vector<std::string> activations;
  std::optional<double> clip;  ///< LSTM: cell state clipped to [-clip, clip] (MIL op only).
  bool by_loop = false;        ///< A while_loop over the steps with the cell built from linear ops
                         ///< (projections, GRU before iOS18), instead of MIL's lstm / gru / rnn.
};

/// rnn_layer()'s values.
struct RnnLayerResult {
  Var* y = nullptr;  ///< [S, B, Hout], step t at index t.
  Var* h = nullptr;  ///< Final hidden state [B, Hout].
  Var* c = nullptr;  ///< LSTM final cell state [B, H], else null.
};

/// One direction of a recurrent layer over xs [S, B, I] from h0 [B, H] (c0 for LSTM): MIL's
/// lstm / gru / rnn (gates reordered to MIL's [i, f, o, g] / [r, n, z], biases summed or, for a
/// GRU resetting after the projection, passed as bias = b_hh and input_bias = b_ih; reverse by
/// reversing the input and the output), or a counted loop (see RnnLayerSpec::by_loop).
RnnLayerResult rnn_layer(Emitter& e, Var* xs, Var* h0, Var* c0, const RnnWeights& w,
                         const RnnLayerSpec& s);
/// Both directions of an LSTM layer as MIL's one bidirectional lstm op (MIL's default
/// activations; no loop): y [S, B, 2 * H] with the forward features first, h / c [B, 2 * H] the
/// final forward and backward states side by side. h0 / c0 are [B, 2 * H] the same way.
RnnLayerResult lstm_bidirectional(Emitter& e, Var* xs, Var* h0, Var* c0, const RnnWeights& fw,
                                  const RnnWeights& bw);
/// One step of a cell from xp = x W_ih^T + b_ih and hp = h W_hh^T + b_hh (canonical gates, on the
/// last axis): (h', c') with c' null except for LSTM. GRU resets after the projection.
std::pair<Var*, Var*> rnn_cell(Emitter& e, RnnKind kind, Var* xp, Var* hp, Var* h, Var* c);
/// x W^T (+ b): MIL's linear for a const w, else matmul (and add).
Var* linear(Emitter& e, Var* x, Var* w, Var* b);

/// The body of a counted loop: step t (int32 scalar) and the carried values -> the next values.
using LoopBody = std::function<std::vector<Var*>(Var* t, const std::vector<Var*>& carried)>;
/// A MIL while_loop running `body` for t = 0 .. count - 1 (count an int32 scalar var) with
/// `init` carried; returns the final carried values. Values the body returns that are not made
/// by an op of its block (loop inputs, consts, outer values) are wrapped in identity ops.
std::vector<Var*> counted_loop(Emitter& e, Var* count, const std::vector<Var*>& init,
                               const LoopBody& body);

}  // namespace compose
}  // namespace milkit
