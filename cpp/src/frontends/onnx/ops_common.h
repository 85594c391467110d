// What every operator family file of the ONNX importer shares: the converter, the short names
// the op tables use, and the small op-building helpers more than one family needs.
#pragma once

#include <string>
#include <vector>

#include "converter.h"
#include "milkit/types/error.h"

namespace milkit {
namespace onnx_detail {

using onnx::NodeProto;
/// The converter, as the op tables and converters name it.
using C = Converter;

/// A binary MIL op (`x`, `y`) of type `type`.
inline Var* binary(C& cv, const char* type, Var* x, Var* y) {
  return cv.op(type, {C::arg("x", x), C::arg("y", y)});
}

}  // namespace onnx_detail
}  // namespace milkit
