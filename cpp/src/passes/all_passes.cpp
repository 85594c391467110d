#include "milkit/passes/pass.h"

namespace milkit {

void register_dead_code_elimination(PassRegistry& r);
void register_const_elimination(PassRegistry& r);
void register_dedup_op_and_var_names(PassRegistry& r);
void register_add_fp16_cast(PassRegistry& r);
void register_cast_optimization(PassRegistry& r);
void register_const_deduplication(PassRegistry& r);
void register_sanitize_name_strings(PassRegistry& r);
void register_sanitize_input_output_names(PassRegistry& r);
void register_adjust_io_to_supported_types(PassRegistry& r);
void register_fuse_activation_silu(PassRegistry& r);
void register_fuse_pow2_sqrt(PassRegistry& r);
void register_handle_unused_inputs(PassRegistry& r);
void register_noop_elimination(PassRegistry& r);
void register_topological_reorder(PassRegistry& r);
void register_divide_to_multiply(PassRegistry& r);
void register_fuse_gelu_exact(PassRegistry& r);
void register_fuse_gelu_tanh_approximation(PassRegistry& r);
void register_fuse_leaky_relu(PassRegistry& r);
void register_merge_consecutive_relus(PassRegistry& r);
void register_prelu_to_lrelu(PassRegistry& r);
void register_select_optimization(PassRegistry& r);

void register_merge_consecutive_reshapes(PassRegistry& r);
void register_merge_consecutive_transposes(PassRegistry& r);
void register_remove_symbolic_reshape(PassRegistry& r);
void register_fuse_squeeze_expand_dims(PassRegistry& r);
void register_rank0_expand_dims_swap(PassRegistry& r);
void register_remove_redundant_ops(PassRegistry& r);
void register_update_output_dtypes(PassRegistry& r);
void register_loop_invariant_elimination(PassRegistry& r);
void register_fuse_linear_bias(PassRegistry& r);
void register_fuse_matmul_weight_bias(PassRegistry& r);
void register_fuse_transpose_matmul(PassRegistry& r);
void register_fuse_conv_bias(PassRegistry& r);
void register_fuse_conv_scale(PassRegistry& r);
void register_fuse_conv_batchnorm(PassRegistry& r);
void register_merge_consecutive_paddings(PassRegistry& r);
void register_fuse_pad_conv(PassRegistry& r);
void register_fuse_reduce_mean(PassRegistry& r);
void register_fuse_elementwise_to_batchnorm(PassRegistry& r);
void register_fuse_layernorm_or_instancenorm(PassRegistry& r);
void register_guard_negative_gather_indices(PassRegistry& r);
void register_replace_stack_reshape(PassRegistry& r);
void register_fuse_stack_split(PassRegistry& r);
void register_use_reflection_padding(PassRegistry& r);
void register_expand_high_rank_reshape_and_transpose(PassRegistry& r);
void register_detect_concat_interleave(PassRegistry& r);
void register_concat_to_pixel_shuffle(PassRegistry& r);
void register_reduce_transposes(PassRegistry& r);

void register_all_passes(PassRegistry& r) {
  register_dead_code_elimination(r);
  register_const_elimination(r);
  register_dedup_op_and_var_names(r);
  register_add_fp16_cast(r);
  register_cast_optimization(r);
  register_const_deduplication(r);
  register_sanitize_input_output_names(r);
  register_adjust_io_to_supported_types(r);
  register_handle_unused_inputs(r);
  register_noop_elimination(r);
  register_topological_reorder(r);
  register_fuse_pow2_sqrt(r);
  register_fuse_activation_silu(r);
  register_sanitize_name_strings(r);
  register_divide_to_multiply(r);
  register_fuse_gelu_exact(r);
  register_fuse_gelu_tanh_approximation(r);
  register_fuse_leaky_relu(r);
  register_merge_consecutive_relus(r);
  register_prelu_to_lrelu(r);
  register_select_optimization(r);
  register_merge_consecutive_reshapes(r);
  register_merge_consecutive_transposes(r);
  register_remove_symbolic_reshape(r);
  register_fuse_squeeze_expand_dims(r);
  register_rank0_expand_dims_swap(r);
  register_remove_redundant_ops(r);
  register_update_output_dtypes(r);
  register_loop_invariant_elimination(r);
  register_fuse_linear_bias(r);
  register_fuse_matmul_weight_bias(r);
  register_fuse_transpose_matmul(r);
  register_fuse_conv_bias(r);
  register_fuse_conv_scale(r);
  register_fuse_conv_batchnorm(r);
  register_merge_consecutive_paddings(r);
  register_fuse_pad_conv(r);
  register_fuse_reduce_mean(r);
  register_fuse_elementwise_to_batchnorm(r);
  register_fuse_layernorm_or_instancenorm(r);
  register_guard_negative_gather_indices(r);
  register_replace_stack_reshape(r);
  register_fuse_stack_split(r);
  register_use_reflection_padding(r);
  register_expand_high_rank_reshape_and_transpose(r);
  register_detect_concat_interleave(r);
  register_concat_to_pixel_shuffle(r);
  register_reduce_transposes(r);
}

}  // namespace milkit
