// reduction ops: the 12 reductions (coremltools reduction.py).
#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"

namespace milkit {

void register_reduction_ops(OpRegistry& r) { (void)r; }

}  // namespace milkit
