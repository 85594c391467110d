// normalization ops: batch_norm, instance_norm, layer_norm, l2_norm, local_response_norm (coremltools normalization.py).
#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"

namespace milkit {

void register_normalization_ops(OpRegistry& r) { (void)r; }

}  // namespace milkit
