// pool ops: avg_pool, max_pool, l2_pool (coremltools pool.py).
#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"

namespace milkit {

void register_pool_ops(OpRegistry& r) { (void)r; }

}  // namespace milkit
