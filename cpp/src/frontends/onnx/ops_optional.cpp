// ONNX operators: optional values (Optional, OptionalHasElement, OptionalGetElement).
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "milkit/compose/sampling.h"
#include "milkit/compose/scan.h"
#include "milkit/compose/windows.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

// optional tensors: a present one is its tensor, an empty one a name without a value
void optional(C& cv, const NodeProto& n) {
  if (C::has(n, 0)) return cv.out(n, 0, cv.in(n, 0));
  if (C::wants(n, 0)) cv.empty_optionals.insert(n.output(0));
  // bound to nothing: reading it as a tensor fails below, OptionalHasElement gives false
  cv.out_const(n, 0, Value::scalar_bool(false));
}

void optional_has_element(C& cv, const NodeProto& n) {
  bool has = C::has(n, 0) && !cv.empty_optionals.count(n.input(0));
  cv.out_const(n, 0, Value::scalar_bool(has));
}

void optional_get_element(C& cv, const NodeProto& n) {
  if (!C::has(n, 0) || cv.empty_optionals.count(n.input(0))) cv.fail(n, "the optional is empty");
  Var* x = cv.in(n, 0);
  cv.out(n, 0, x);
}

}  // namespace

void register_optional(OpTable& t) {
  t.on("Optional", 1, optional);
  t.on("OptionalHasElement", 1, optional_has_element);
  t.on("OptionalGetElement", 1, optional_get_element);
}

}  // namespace onnx_detail
}  // namespace milkit
