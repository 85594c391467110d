// tensor_transformation ops: reshape, transpose, squeeze, expand_dims, slice_by_index, slice_by_size, ... (coremltools tensor_transformation.py).
#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"

namespace milkit {

void register_tensor_transformation_ops(OpRegistry& r) { (void)r; }

}  // namespace milkit
