// linear ops: linear, matmul, einsum (coremltools linear.py).
#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"

namespace milkit {

void register_linear_ops(OpRegistry& r) { (void)r; }

}  // namespace milkit
