// elementwise_unary ops: abs, exp, cast, clip, ... (27 elementwise unary ops) (coremltools elementwise_unary.py).
#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"

namespace milkit {

void register_elementwise_unary_ops(OpRegistry& r) { (void)r; }

}  // namespace milkit
