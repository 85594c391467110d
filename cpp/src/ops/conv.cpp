// conv ops: conv, conv_transpose (coremltools conv.py).
#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"

namespace milkit {

void register_conv_ops(OpRegistry& r) { (void)r; }

}  // namespace milkit
