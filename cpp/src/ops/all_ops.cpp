#include "milkit/ops/all_ops.h"

namespace milkit {

void register_all_ops(OpRegistry& r) {
  register_control_flow_ops(r);
  register_elementwise_binary_ops(r);
  register_elementwise_unary_ops(r);
  register_activation_ops(r);
  register_linear_ops(r);
  register_conv_ops(r);
  register_pool_ops(r);
  register_normalization_ops(r);
  register_reduction_ops(r);
  register_tensor_operation_ops(r);
  register_tensor_transformation_ops(r);
  register_scatter_gather_ops(r);
  register_state_ops(r);
  register_constexpr_ops(r);
  register_image_resizing_ops(r);
  register_recurrent_ops(r);
  register_random_ops(r);
  register_transformers_ops(r);
  register_quantization_ops(r);
  register_classify_ops(r);
  register_complex_dialect_ops(r);
}

}  // namespace milkit
