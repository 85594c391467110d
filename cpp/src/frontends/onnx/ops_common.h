// What every operator family file of the ONNX importer shares: the converter, the short names
// the op tables use, and the small op-building helpers more than one family needs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "converter.h"
#include "milkit/types/error.h"

namespace milkit {
namespace onnx_detail {

using onnx::GraphProto;
using onnx::NodeProto;
using onnx::TensorProto;
/// The converter, as the op tables and converters name it.
using C = Converter;

/// A binary MIL op (`x`, `y`) of type `type`.
inline Var* binary(C& cv, const char* type, Var* x, Var* y) {
  return cv.op(type, {C::arg("x", x), C::arg("y", y)});
}

/// Registers ONNX `onnx` as the binary MIL op `mil` of its two inputs.
inline void simple_binary(OpTable& t, const char* onnx, const char* mil) {
  t.on(onnx, 1, [mil](C& cv, const NodeProto& n) {
    cv.out(n, 0, binary(cv, mil, cv.in(n, 0), cv.in(n, 1)));
  });
}

/// Registers ONNX `onnx` as the unary MIL op `mil` of its input.
inline void simple_unary(OpTable& t, const char* onnx, const char* mil) {
  t.on(onnx, 1,
       [mil](C& cv, const NodeProto& n) { cv.out(n, 0, cv.op(mil, {C::arg("x", cv.in(n, 0))})); });
}

/// The pads of a conv or pool in MIL's layout ([b0, e0, b1, e1, ...]) and its pad_type.
struct Padding {
  std::string type = "custom";  ///< MIL pad_type.
  std::vector<int64_t> pad;     ///< MIL pad (zeros unless custom).
};

/// The node's auto_pad / pads as MIL's pad_type and pad.
inline Padding padding(C& cv, const NodeProto& n, size_t spatial) {
  Padding p;
  std::string ap = C::attr_string(n, "auto_pad", "NOTSET");
  if (ap == "SAME_UPPER")
    p.type = "same";
  else if (ap == "SAME_LOWER")
    p.type = "same_lower";
  else if (ap == "VALID")
    p.type = "valid";
  else if (ap != "NOTSET")
    cv.fail(n, "auto_pad '" + ap + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  auto pads = C::attr_ints(n, "pads", std::vector<int64_t>(2 * spatial, 0));
  if (pads.size() != 2 * spatial)
    cv.fail(n, "pads has " + std::to_string(pads.size()) + " values, expected " +
                   std::to_string(2 * spatial));
  p.pad.resize(2 * spatial);
  for (size_t i = 0; i < spatial; ++i) {
    p.pad[2 * i] = pads[i];
    p.pad[2 * i + 1] = pads[i + spatial];
  }
  if (p.type != "custom") std::fill(p.pad.begin(), p.pad.end(), 0);
  return p;
}

/// The number of spatial dims of x [N, C, spatial...]; ValueError below rank 3.
inline size_t spatial_rank(C& cv, const NodeProto& n, Var* x) {
  int r = cv.rank(n, x);
  if (r < 3)
    cv.fail(n, "input '" + x->name() + "' has rank " + std::to_string(r) +
                   "; expected N, C and spatial dims");
  return static_cast<size_t>(r - 2);
}

/// A per-channel vector reshaped to broadcast over [N, C, spatial...] of rank `rank`.
inline Var* per_channel(C& cv, Var* v, int rank) { return cv.em.per_channel(v, rank); }

/// A rank-1 int32 var from pieces: known ints or (dynamic) rank-1 int32 vars.
inline Var* concat_ints(C& cv, const std::vector<Var*>& pieces) {
  if (pieces.size() == 1) return pieces[0];
  Arg values{"values", {}, true};
  for (Var* p : pieces) values.items.push_back(ArgItem{p, nullptr});
  return cv.op("concat", {values, C::arg_i32("axis", 0)});
}

/// A scalar fp32 const.
inline Var* fconst(C& cv, double v) { return cv.em.f32(v); }

}  // namespace onnx_detail
}  // namespace milkit
