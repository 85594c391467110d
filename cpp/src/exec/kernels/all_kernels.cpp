// Every kernel family, registered once.
#include "kernels.h"

namespace milkit {

void register_all_kernels(KernelRegistry& r) {
  register_elementwise_binary_kernels(r);
  register_elementwise_unary_kernels(r);
  register_activation_kernels(r);
  register_linear_kernels(r);
  register_conv_kernels(r);
  register_pool_kernels(r);
  register_normalization_kernels(r);
  register_reduction_kernels(r);
  register_tensor_operation_kernels(r);
  register_tensor_transformation_kernels(r);
  register_scatter_gather_kernels(r);
  register_constexpr_kernels(r);
  register_state_kernels(r);
  register_control_flow_kernels(r);
  register_image_resizing_kernels(r);
  register_recurrent_kernels(r);
  register_random_kernels(r);
  register_transformers_kernels(r);
  register_quantization_kernels(r);
  register_classify_kernels(r);
}

}  // namespace milkit
