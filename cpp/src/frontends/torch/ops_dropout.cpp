// ATen dropout in eval mode (identity).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

void dropout_op(C& cv, const json& n) {
  if (cv.bo(n, "train", false) && cv.f(n, "p", 0) > 0) cv.fail(n, "dropout in training mode is not supported (export the model in eval mode)");
  cv.out(n, cv.op("identity", {C::a("x", input(cv, n))}));
}

}  // namespace

void register_dropout(OpTable& t) {
  t.on({"aten.dropout", "aten.native_dropout", "aten.feature_dropout", "aten.alpha_dropout"}, dropout_op);
}

}  // namespace torch_detail
}  // namespace milkit
