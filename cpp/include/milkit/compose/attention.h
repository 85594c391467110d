// milkit/compose/attention.h - scaled dot-product attention and head split / merge.
#pragma once

#include <cstdint>
#include <optional>

#include "milkit/compose/emitter.h"

namespace milkit {
namespace compose {

/// Where a causal mask puts the diagonal when the query and key lengths differ.
enum class CausalAlign {
  TopLeft,      ///< Query i sees keys j <= i (torch's scaled_dot_product_attention is_causal).
  BottomRight,  ///< Query i sees keys j <= i + offset, offset = Lk - Lq or the past length (ONNX).
};

/// scaled_dot_product_attention's parameters. Q is [..., heads, Lq, E], K / V [..., kv_heads,
/// Lk, E / Ev] (rank >= 2; heads at rank - 3). Dropout has no inference meaning and is absent.
struct AttentionSpec {
  std::optional<double> scale;  ///< Scores are q.k * scale; unset: 1 / sqrt(E) (E known).
  bool split_scale = false;     ///< Scale q and k by sqrt(scale) each (ONNX) instead of q by it.
  Var* mask = nullptr;          ///< Bool (true: attend) or additive, broadcast to the scores.
  bool pad_mask = false;        ///< A mask shorter than Lk is padded with -inf (ONNX).
  bool causal = false;          ///< Query i sees no later key (see align).
  CausalAlign align = CausalAlign::TopLeft;  ///< Causal alignment for Lq != Lk.
  std::optional<int64_t> offset;  ///< BottomRight's offset (e.g. the past length); unset Lk - Lq.
  int64_t left_window = -1;       ///< Keys more than this before the query's position are hidden.
  int64_t right_window = -1;      ///< Keys more than this after the query's position are hidden.
  double softcap = 0;             ///< > 0: scores become softcap * tanh(scores / softcap).
  Var* bias = nullptr;  ///< An additive bias (0 / -inf, or any values) after the mask and causal.
  bool group_heads = true;    ///< Fewer K / V heads are repeated (interleaved) to Q's count.
  Var* past_key = nullptr;    ///< Concatenated in front of K along the sequence axis.
  Var* past_value = nullptr;  ///< Concatenated in front of V along the sequence axis.
};

/// attention()'s values: the output and the intermediates some frameworks also return.
struct AttentionResult {
  Var* y = nullptr;       ///< softmax(scores + bias) @ V: [..., heads, Lq, Ev].
  Var* key = nullptr;     ///< K after past_key (before head grouping).
  Var* value = nullptr;   ///< V after past_value (before head grouping).
  Var* scores = nullptr;  ///< Scaled (and soft-capped) q.k, before any mask.
  Var* masked = nullptr;  ///< scores with the mask and causal bias (== scores without them).
  Var* probs = nullptr;   ///< The softmax.
};

/// Scaled dot-product attention by its definition: scores = (q * scale) @ k^T (or q and k each
/// by sqrt(scale)), soft-capped, plus a bias (a bool mask as 0 / -inf, an additive mask as is, a
/// causal / windowed mask as 0 / -inf), softmax over the keys, @ v. When any mask applies, a
/// query row whose bias is -inf throughout gives 0 (not NaN), as both frameworks guard it. The
/// causal mask is a const for known lengths; TopLeft with symbolic lengths uses band_part.
AttentionResult attention(Emitter& e, Var* q, Var* k, Var* v, const AttentionSpec& s);
/// Repeats each of the `groups`-fold fewer heads of x (heads at rank - 3) `groups` times in place
/// ([h0, h0, h1, h1] for groups 2): repeat_interleave by expand_dims, tile and reshape.
Var* repeat_heads(Emitter& e, Var* x, int64_t groups);
/// [B, S, heads * H] -> [B, heads, S, H] (B and S may be symbolic).
Var* split_heads(Emitter& e, Var* x, int64_t heads);
/// [B, heads, S, H] -> [B, S, heads * H].
Var* merge_heads(Emitter& e, Var* x);

}  // namespace compose
}  // namespace milkit
