// ONNX operators: quantization and integer / quantized-linear products and convolutions.
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "milkit/compose/norms.h"
#include "milkit/compose/sampling.h"
#include "milkit/compose/scan.h"
#include "milkit/compose/windows.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

// Quantized dtype bounds from the zero point's ONNX type (uint8 default).
std::pair<double, double> qrange(C& cv, const NodeProto& n, int zp_input) {
  int et = static_cast<int>(C::attr_int(n, "output_dtype", 2));  // UINT8 by default
  if (C::has(n, zp_input) && cv.elem_type(n, zp_input)) et = cv.elem_type(n, zp_input);
  switch (et) {
    case 3:
      return {-128, 127};
    case 2:
      return {0, 255};
    case 5:
      return {-32768, 32767};
    case 4:
      return {0, 65535};
    case 6:
      return {-2147483648.0, 2147483647.0};
    case onnx::TensorProto::INT4:
      return {-8, 7};
    case onnx::TensorProto::UINT4:
      return {0, 15};
    case kInt2:
      return {-2, 1};
    case kUInt2:
      return {0, 3};
    default:
      cv.fail(n, "quantized type " + onnx_type_name(et) + " is not supported");
  }
}

// Reshapes a per-axis (1-D) scale or zero point to broadcast along `axis` of a rank-r input.
Var* along(C& cv, Var* v, int64_t axis, int r) {
  if (!v->type()->has_rank() || v->type()->rank() != 1 || r <= 1) return v;
  std::vector<int64_t> axes;
  for (int i = 0; i < r; ++i)
    if (i != axis) axes.push_back(i);
  return cv.op("expand_dims", {C::arg("x", v), C::arg_ints32("axes", axes)});
}

// A blocked scale or zero point (the quantized input's shape with ceil(dim / block) along axis)
// repeated block times along axis and cut to x's size; others reshaped by along().
Var* scale_for(C& cv, const NodeProto& n, Var* v, Var* x, int64_t axis, int r) {
  int64_t block = C::attr_int(n, "block_size", 0);
  if (block <= 0) return along(cv, v, axis, r);
  auto vs = C::static_shape(v);
  auto xs = C::static_shape(x);
  if (!vs || !xs || static_cast<int>(vs->size()) != r)
    cv.fail(n,
            "blocked quantization needs the shapes of x and its scale (of x's rank) to be known");
  size_t a = static_cast<size_t>(axis);
  std::vector<int64_t> reps(static_cast<size_t>(r) + 1, 1), merged = *vs;
  reps[a + 1] = block;
  merged[a] *= block;
  Var* e = cv.op("expand_dims", {C::arg("x", v), C::arg_ints32("axes", {axis + 1})});
  Var* t =
      cv.op("reshape", {C::arg("x", cv.op("tile", {C::arg("x", e), C::arg_ints32("reps", reps)})),
                        C::arg_ints32("shape", merged)});
  if (merged[a] == (*xs)[a]) return t;
  std::vector<int64_t> begin(static_cast<size_t>(r), 0), end = merged;
  end[a] = (*xs)[a];
  return cv.op("slice_by_index",
               {C::arg("x", t), C::arg_ints32("begin", begin), C::arg_ints32("end", end)});
}

// Input `i` (a scale or zero point) cast to `dt` and laid out against input 0 along the node's
// axis (used only for a per-axis (1-D) or blocked parameter).
Var* quant_param(C& cv, const NodeProto& n, int i, DataType dt) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  int64_t ax = C::attr_int(n, "axis", 1);
  ax = ax < 0 ? ax + r : ax;
  if (ax < 0 || ax >= std::max(r, 1)) ax = 0;
  return scale_for(cv, n, cv.cast(cv.in(n, i), dt), x, ax, r);
}

void quantize_linear(C& cv, const NodeProto& n) {
  const DataType f32 = DataType::Float32;
  int qt = static_cast<int>(C::attr_int(n, "output_dtype", 0));
  if (!qt && C::has(n, 2)) qt = cv.elem_type(n, 2);
  bool narrow = is_narrow_type(qt) && mil_dtype(qt) == f32;
  // x / scale, rounded to an integer unless the format is float8 / float4, + zero point
  Var* xf = cv.cast(cv.in(n, 0), f32);
  Var* q = binary(cv, "real_div", xf, quant_param(cv, n, 1, f32));
  if (!narrow) q = cv.op("round", {C::arg("x", q)});
  if (C::has(n, 2)) q = binary(cv, "add", q, quant_param(cv, n, 2, f32));
  if (narrow) return cv.out(n, 0, to_narrow(cv, n, q, qt, C::attr_int(n, "saturate", 1) != 0));
  auto [lo, hi] = qrange(cv, n, 2);
  q = cv.op("clip", {C::arg("x", q), C::arg_f32("alpha", lo), C::arg_f32("beta", hi)});
  cv.out(n, 0, cv.cast(q, DataType::Int32));
}

void dequantize_linear(C& cv, const NodeProto& n) {
  DataType dt = C::dtype(cv.in(n, 1));
  Var* xf = cv.cast(cv.in(n, 0), dt);
  if (C::has(n, 2)) xf = binary(cv, "sub", xf, quant_param(cv, n, 2, dt));
  cv.out(n, 0, binary(cv, "mul", xf, quant_param(cv, n, 1, dt)));
}

// ---- integer and quantized-linear products -----------------------------------------------------

// x - zero point, in fp32 (exact for 8-bit values); a per-row zero point of A ([M]) is made [M, 1].
Var* centered(C& cv, const NodeProto& n, int xi, int zi, bool per_row) {
  Var* x = cv.cast(cv.in(n, xi), DataType::Float32);
  if (!C::has(n, zi)) return x;
  Var* z = cv.cast(cv.in(n, zi), DataType::Float32);
  if (per_row && z->type()->has_rank() && z->type()->rank() == 1) {
    auto zs = C::static_shape(z);
    if (zs && (*zs)[0] > 1) z = cv.op("expand_dims", {C::arg("x", z), C::arg_ints32("axes", {-1})});
  }
  return binary(cv, "sub", x, z);
}

// A per-output-channel weight zero point or scale ([M]) made [M, 1, ..., 1] for a rank-r weight.
Var* per_out_channel(C& cv, Var* v, int r) {
  auto s = C::static_shape(v);
  if (!s || s->size() != 1 || (*s)[0] == 1) return v;
  std::vector<int64_t> axes;
  for (int i = 1; i < r; ++i) axes.push_back(i);
  return cv.op("expand_dims", {C::arg("x", v), C::arg_ints32("axes", axes)});
}

std::vector<Arg> conv_args(C& cv, const NodeProto& n, Var* x, Var* w, size_t sp) {
  std::string ap = C::attr_string(n, "auto_pad", "NOTSET");
  std::string pt = ap == "SAME_UPPER"   ? "same"
                   : ap == "SAME_LOWER" ? "same_lower"
                   : ap == "VALID"      ? "valid"
                                        : "custom";
  auto pads = C::attr_ints(n, "pads", std::vector<int64_t>(2 * sp, 0));
  std::vector<int64_t> mp(2 * sp, 0);
  if (pt == "custom")
    for (size_t i = 0; i < sp; ++i) mp[2 * i] = pads[i], mp[2 * i + 1] = pads[i + sp];
  return {C::arg("x", x),
          C::arg("weight", w),
          C::arg_ints32("strides", C::attr_ints(n, "strides", std::vector<int64_t>(sp, 1))),
          C::arg_str("pad_type", pt),
          C::arg_ints32("pad", mp),
          C::arg_ints32("dilations", C::attr_ints(n, "dilations", std::vector<int64_t>(sp, 1))),
          C::arg_i32("groups", C::attr_int(n, "group", 1))};
}

// round half to even, clipped to the quantized type of zero point input `zi` (uint8 without one)
Var* requantize(C& cv, const NodeProto& n, Var* v, int zi) {
  int et = C::has(n, zi) ? cv.elem_type(n, zi) : TensorProto::UINT8;
  double lo = 0, hi = 255;
  if (et == TensorProto::INT8)
    lo = -128, hi = 127;
  else if (et != TensorProto::UINT8)
    cv.fail(n, "the output zero point must be int8 or uint8");
  if (C::has(n, zi))
    v = binary(cv, "add", cv.op("round", {C::arg("x", v)}),
               cv.cast(cv.in(n, zi), DataType::Float32));
  else
    v = cv.op("round", {C::arg("x", v)});
  v = cv.op("clip", {C::arg("x", v), C::arg_f32("alpha", lo), C::arg_f32("beta", hi)});
  return cv.cast(v, DataType::Int32);
}

void mat_mul_integer(C& cv, const NodeProto& n) {
  Var* y = cv.op("matmul", {C::arg("x", centered(cv, n, 0, 2, true)),
                            C::arg("y", centered(cv, n, 1, 3, false))});
  cv.out(n, 0, cv.cast(y, DataType::Int32));
}

void conv_integer(C& cv, const NodeProto& n) {
  Var* x = centered(cv, n, 0, 2, false);
  Var* w = cv.cast(cv.in(n, 1), DataType::Float32);
  int r = cv.rank(n, w);
  if (C::has(n, 3))
    w = binary(cv, "sub", w, per_out_channel(cv, cv.cast(cv.in(n, 3), DataType::Float32), r));
  cv.out(
      n, 0,
      cv.cast(cv.op("conv", conv_args(cv, n, x, w, static_cast<size_t>(r - 2))), DataType::Int32));
}

void q_linear_mat_mul(C& cv, const NodeProto& n) {
  // the integer product exactly (fp32 holds it for 8-bit operands), scaled, rounded, clipped
  Var* a = centered(cv, n, 0, 2, true);
  Var* b = centered(cv, n, 3, 5, false);
  Var* c = cv.op("matmul", {C::arg("x", a), C::arg("y", b)});
  Var* s = binary(cv, "real_div",
                  binary(cv, "mul", cv.cast(cv.in(n, 1), DataType::Float32),
                         cv.cast(cv.in(n, 4), DataType::Float32)),
                  cv.cast(cv.in(n, 6), DataType::Float32));
  cv.out(n, 0, requantize(cv, n, binary(cv, "mul", c, s), 7));
}

void q_linear_conv(C& cv, const NodeProto& n) {
  Var* x = centered(cv, n, 0, 2, false);
  Var* w = cv.cast(cv.in(n, 3), DataType::Float32);
  int r = cv.rank(n, w);
  if (C::has(n, 5))
    w = binary(cv, "sub", w, per_out_channel(cv, cv.cast(cv.in(n, 5), DataType::Float32), r));
  Var* acc = cv.op("conv", conv_args(cv, n, x, w, static_cast<size_t>(r - 2)));
  std::vector<int64_t> axes;
  for (int i = 2; i < r; ++i) axes.push_back(i - 1);
  if (C::has(n, 8))
    acc = binary(cv, "add", acc,
                 cv.op("expand_dims", {C::arg("x", cv.cast(cv.in(n, 8), DataType::Float32)),
                                       C::arg_ints32("axes", axes)}));
  Var* ws = cv.cast(cv.in(n, 4), DataType::Float32);
  auto wss = C::static_shape(ws);
  if (wss && wss->size() == 1 && (*wss)[0] > 1)
    ws = cv.op("expand_dims", {C::arg("x", ws), C::arg_ints32("axes", axes)});
  Var* s = binary(cv, "real_div", binary(cv, "mul", cv.cast(cv.in(n, 1), DataType::Float32), ws),
                  cv.cast(cv.in(n, 6), DataType::Float32));
  cv.out(n, 0, requantize(cv, n, binary(cv, "mul", acc, s), 7));
}

void dynamic_quantize_linear(C& cv, const NodeProto& n) {
  Var* x = cv.cast(cv.in(n, 0), DataType::Float32);
  int r = cv.rank(n, x);
  std::vector<int64_t> all(static_cast<size_t>(r));
  std::iota(all.begin(), all.end(), 0);
  DataType f32 = DataType::Float32;
  Var* mx = binary(cv, "maximum",
                   cv.op("reduce_max", {C::arg("x", x), C::arg_ints32("axes", all),
                                        C::arg_bool("keep_dims", false)}),
                   cv.cs(0, f32));
  Var* mn = binary(cv, "minimum",
                   cv.op("reduce_min", {C::arg("x", x), C::arg_ints32("axes", all),
                                        C::arg_bool("keep_dims", false)}),
                   cv.cs(0, f32));
  Var* range = binary(cv, "sub", mx, mn);
  Var* scale = binary(cv, "real_div",
                      cv.em.sel(binary(cv, "equal", range, cv.cs(0, f32)), cv.cs(1, f32), range),
                      cv.cs(255, f32));
  Var* zp = cv.op(
      "round", {C::arg("x", cv.op("clip", {C::arg("x", binary(cv, "sub", cv.cs(0, f32),
                                                              binary(cv, "real_div", mn, scale))),
                                           C::arg_f32("alpha", 0), C::arg_f32("beta", 255)}))});
  Var* y = binary(cv, "add", cv.op("round", {C::arg("x", binary(cv, "real_div", x, scale))}), zp);
  y = cv.op("clip", {C::arg("x", y), C::arg_f32("alpha", 0), C::arg_f32("beta", 255)});
  cv.out(n, 0, cv.cast(y, DataType::Int32));
  cv.out(n, 1, scale);
  cv.out(n, 2, cv.cast(zp, DataType::Int32));
}

}  // namespace

void register_quantization(OpTable& t) {
  t.on("QuantizeLinear", 1, quantize_linear);
  t.on("DequantizeLinear", 1, dequantize_linear);
  t.on("MatMulInteger", 1, mat_mul_integer);
  t.on("ConvInteger", 1, conv_integer);
  t.on("QLinearMatMul", 1, q_linear_mat_mul);
  t.on("QLinearConv", 1, q_linear_conv);
  t.on("DynamicQuantizeLinear", 1, dynamic_quantize_linear);
}

}  // namespace onnx_detail
}  // namespace milkit
