// tensor_operation ops: concat, split, stack, tile, pad, fill, shape, range_1d, identity, ... (coremltools tensor_operation.py).
#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"

namespace milkit {

void register_tensor_operation_ops(OpRegistry& r) { (void)r; }

}  // namespace milkit
