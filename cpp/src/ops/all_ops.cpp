#include "milkit/ops/all_ops.h"

namespace milkit {

void register_all_ops(OpRegistry& r) {
  register_control_flow_ops(r);
  register_elementwise_binary_ops(r);
}

}  // namespace milkit
