// milkit/ops/all_ops.h - registration entry points, one per op family file.
#pragma once

#include "milkit/ops/registry.h"

namespace milkit {

/// Registers every op family (called once by OpRegistry::instance()).
void register_all_ops(OpRegistry& r);

/// const.
void register_const_ops(OpRegistry& r);
/// add, sub, mul, ... (18 elementwise binary ops).
void register_elementwise_binary_ops(OpRegistry& r);
/// abs, exp, cast, clip, ... (27 elementwise unary ops).
void register_elementwise_unary_ops(OpRegistry& r);
/// relu, gelu, softmax, ... (17 activations).
void register_activation_ops(OpRegistry& r);
/// linear, matmul, einsum.
void register_linear_ops(OpRegistry& r);
/// conv, conv_transpose.
void register_conv_ops(OpRegistry& r);
/// avg_pool, max_pool, l2_pool.
void register_pool_ops(OpRegistry& r);
/// batch_norm, instance_norm, layer_norm, l2_norm, local_response_norm.
void register_normalization_ops(OpRegistry& r);
/// The 12 reductions.
void register_reduction_ops(OpRegistry& r);
/// concat, split, stack, tile, pad, fill, shape, range_1d, identity, ...
void register_tensor_operation_ops(OpRegistry& r);
/// reshape, transpose, squeeze, expand_dims, slice_by_index, slice_by_size, ...
void register_tensor_transformation_ops(OpRegistry& r);
/// gather, gather_along_axis, ...
void register_scatter_gather_ops(OpRegistry& r);
/// select and other control-flow-family ops.
void register_control_flow_ops(OpRegistry& r);
/// read_state, coreml_update_state (coreml dialect), write_state.
void register_state_ops(OpRegistry& r);
/// constexpr_* compression ops (iOS16 and iOS18 versions).
void register_constexpr_ops(OpRegistry& r);
/// upsample_*, resize_*, resize, crop, crop_resize, resample, affine.
void register_image_resizing_ops(OpRegistry& r);
/// gru, lstm, rnn.
void register_recurrent_ops(OpRegistry& r);
/// random_bernoulli, random_categorical, random_normal, random_uniform.
void register_random_ops(OpRegistry& r);
/// scaled_dot_product_attention (iOS18).
void register_transformers_ops(OpRegistry& r);
/// quantize, dequantize (iOS17).
void register_quantization_ops(OpRegistry& r);
/// classify (the classifier output op).
void register_classify_ops(OpRegistry& r);
/// The complex dialect (complex, complex_real, complex_fft, ..., complex_stft): lowered to core
/// ops by common::lower_complex_dialect_ops.
void register_complex_dialect_ops(OpRegistry& r);

}  // namespace milkit
