// milkit/compose/norms.h - normalizations built from MIL ops (per channel, per group, RMS).
#pragma once

#include <cstdint>
#include <vector>

#include "milkit/compose/emitter.h"

namespace milkit {
namespace compose {

/// Per-channel statistics and affine parameters (rank-1 [C] vars; gamma / beta may be null).
struct ChannelNormSpec {
  Var* mean = nullptr;      ///< Running mean [C].
  Var* variance = nullptr;  ///< Running variance [C].
  Var* gamma = nullptr;     ///< Scale [C], or null.
  Var* beta = nullptr;      ///< Shift [C], or null.
  double eps = 1e-5;        ///< Added to the variance.
};

/// Inference batch norm of x [N, C, ...] over axis 1: MIL's batch_norm when the statistics and
/// affine are consts and x is rank 3..5, else (x - mean) * rsqrt(var + eps) * gamma + beta per
/// channel (parameters cast to x's dtype). ValueError without mean or variance.
Var* batch_norm(Emitter& e, Var* x, const ChannelNormSpec& s);
/// (x - mean) / sqrt(var + eps) * gamma + beta per channel of x [N, C, ...] (rank `rank`), the
/// statistics not folded into one op (gamma and beta required).
Var* norm_by_stats(Emitter& e, Var* x, const ChannelNormSpec& s);
/// Layer norm over the last `normalized` axes: one layer_norm op carrying const gamma / beta,
/// else layer_norm followed by mul / add with the (non-const) affine.
Var* layer_norm(Emitter& e, Var* x, int64_t normalized, Var* gamma, Var* beta, double eps);
/// Group norm of x [N, C, ...]: reshaped to [N, groups, -1], normalized over the last axis
/// (population variance, rsqrt), reshaped back, then a per-channel affine (gamma / beta may be
/// null).
Var* group_norm(Emitter& e, Var* x, int64_t groups, Var* gamma, Var* beta, double eps);
/// RMS norm: x * rsqrt(mean(x^2 over axes axis..rank-1) + eps) * scale (scale may be null).
Var* rms_norm(Emitter& e, Var* x, int64_t axis, Var* scale, double eps);

}  // namespace compose
}  // namespace milkit
