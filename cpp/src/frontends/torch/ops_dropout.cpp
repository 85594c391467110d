// ATen dropout (identity).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

// identity in training mode too, as coremltools converts it (an inference model keeps every
// activation); native_dropout's mask is then all true
void dropout_op(C& cv, const json& n) {
  Var* x = input(cv, n);
  cv.out(n, cv.op("identity", {C::a("x", x)}));
  if (C::output_names(n).size() > 1 && output_used(cv, n, 1))
    cv.out(n, fill(cv, shape_of_var(cv, x), 1, DataType::Bool), 1);
}

}  // namespace

void register_dropout(OpTable& t) {
  t.on({"aten.dropout", "aten.native_dropout", "aten.feature_dropout", "aten.alpha_dropout"}, dropout_op);
}

}  // namespace torch_detail
}  // namespace milkit
