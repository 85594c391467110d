// Registration of the interpreter's kernels, one function per op family (one file each).
#pragma once

#include "milkit/exec/kernel.h"

namespace milkit {

/// elementwise_binary.cpp: add, sub, mul, real_div, floor_div, mod, pow, maximum, minimum,
/// comparisons, logical_and / or / xor.
void register_elementwise_binary_kernels(KernelRegistry& r);
/// elementwise_unary.cpp: abs .. tanh, cast, clip, threshold, logical_not, select.
void register_elementwise_unary_kernels(KernelRegistry& r);
/// activation.cpp: relu, gelu, softmax, ...
void register_activation_kernels(KernelRegistry& r);
/// linear.cpp: linear, matmul, einsum.
void register_linear_kernels(KernelRegistry& r);
/// conv.cpp: conv, conv_transpose, conv_quantized.
void register_conv_kernels(KernelRegistry& r);
/// pool.cpp: avg_pool, max_pool, l2_pool.
void register_pool_kernels(KernelRegistry& r);
/// normalization.cpp: batch_norm, instance_norm, layer_norm, l2_norm, local_response_norm.
void register_normalization_kernels(KernelRegistry& r);
/// reduction.cpp: reduce_* ops.
void register_reduction_kernels(KernelRegistry& r);
/// tensor_operation.cpp: concat, split, pad, topk, ...
void register_tensor_operation_kernels(KernelRegistry& r);
/// tensor_transformation.cpp: reshape, transpose, slices, ...
void register_tensor_transformation_kernels(KernelRegistry& r);
/// scatter_gather.cpp: gather*, scatter*.
void register_scatter_gather_kernels(KernelRegistry& r);
/// constexpr.cpp: constexpr_* decompression (run when a plan is made).
void register_constexpr_kernels(KernelRegistry& r);
/// state.cpp: read_state, write_state, coreml_update_state.
void register_state_kernels(KernelRegistry& r);
/// cond, while_loop and the list ops.
void register_control_flow_kernels(KernelRegistry& r);
/// image_resizing.cpp: upsample_*, resize_*, resize, crop, crop_resize, resample, affine.
void register_image_resizing_kernels(KernelRegistry& r);
/// recurrent.cpp: gru, lstm, rnn.
void register_recurrent_kernels(KernelRegistry& r);
/// random.cpp: random_bernoulli, random_categorical, random_normal, random_uniform.
void register_random_kernels(KernelRegistry& r);
/// transformers.cpp: scaled_dot_product_attention.
void register_transformers_kernels(KernelRegistry& r);
/// quantization.cpp: quantize, dequantize.
void register_quantization_kernels(KernelRegistry& r);
/// classify.
void register_classify_kernels(KernelRegistry& r);

}  // namespace milkit
