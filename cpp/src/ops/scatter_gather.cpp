// scatter_gather ops: gather, gather_along_axis, ... (coremltools scatter_gather.py).
#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"

namespace milkit {

void register_scatter_gather_ops(OpRegistry& r) { (void)r; }

}  // namespace milkit
