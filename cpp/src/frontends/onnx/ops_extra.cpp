// More ONNX operators built from several MIL ops: RMS / group / mean-variance / Lp
// normalization, Hardmax, Swish, Shrink, bit shifts and bitwise logic on integers, LpPool,
// QuantizeLinear / DequantizeLinear, and the window functions.
#include <cmath>

#include "milkit/compose/norms.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

// Integer ops MIL lacks, done exactly in int32 with powers of two / arithmetic.
Var* pow2(C& cv, Var* y) {
  Var* f = cv.op("pow", {C::arg("x", cv.cs(2, DataType::Float32)), C::arg("y", cv.cast(y, DataType::Float32))});
  return cv.cast(f, DataType::Int32);
}

// Quantized dtype bounds from the zero point's ONNX type (uint8 default).
std::pair<double, double> qrange(C& cv, const NodeProto& n, int zp_input) {
  int et = 2;  // UINT8
  if (auto* a = C::find_attr(n, "output_dtype")) et = static_cast<int>(a->i());
  if (C::has(n, zp_input) && cv.elem_type(n, zp_input)) et = cv.elem_type(n, zp_input);
  switch (et) {
    case 3: return {-128, 127};
    case 2: return {0, 255};
    case 5: return {-32768, 32767};
    case 4: return {0, 65535};
    case 6: return {-2147483648.0, 2147483647.0};
    case onnx::TensorProto::INT4: return {-8, 7};
    case onnx::TensorProto::UINT4: return {0, 15};
    case kInt2: return {-2, 1};
    case kUInt2: return {0, 3};
    default: cv.fail(n, "quantized type " + onnx_type_name(et) + " is not supported");
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
    cv.fail(n, "blocked quantization needs the shapes of x and its scale (of x's rank) to be known");
  size_t a = static_cast<size_t>(axis);
  std::vector<int64_t> reps(static_cast<size_t>(r) + 1, 1), merged = *vs;
  reps[a + 1] = block;
  merged[a] *= block;
  Var* e = cv.op("expand_dims", {C::arg("x", v), C::arg_ints32("axes", {axis + 1})});
  Var* t = cv.op("reshape", {C::arg("x", cv.op("tile", {C::arg("x", e), C::arg_ints32("reps", reps)})), C::arg_ints32("shape", merged)});
  if (merged[a] == (*xs)[a]) return t;
  std::vector<int64_t> begin(static_cast<size_t>(r), 0), end = merged;
  end[a] = (*xs)[a];
  return cv.op("slice_by_index", {C::arg("x", t), C::arg_ints32("begin", begin), C::arg_ints32("end", end)});
}

void window(OpTable& t, const char* name, double a0, double a1, double a2) {
  t.on(name, 1, [a0, a1, a2](C& cv, const NodeProto& n) {
    int64_t size = cv.ints(n, 0, "size").at(0);
    bool periodic = C::attr_int(n, "periodic", 1) != 0;
    auto dt = mil_dtype(static_cast<int>(C::attr_int(n, "output_datatype", 1)));
    if (!dt) cv.fail(n, "output_datatype is not supported");
    double N = periodic ? static_cast<double>(size) : static_cast<double>(size - 1);
    std::vector<double> v(static_cast<size_t>(std::max<int64_t>(size, 0)));
    for (int64_t i = 0; i < size; ++i) {
      double x = 2 * M_PI * static_cast<double>(i) / N;
      v[static_cast<size_t>(i)] = a0 - a1 * std::cos(x) + a2 * std::cos(2 * x);
    }
    cv.out_const(n, 0, Value::from_doubles(*dt, {size}, v));
  });
}

}  // namespace

namespace {

void rms_normalization(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", -1), cv.rank(n, x));
  cv.out(n, 0, compose::rms_norm(cv.em, x, ax, cv.in(n, 1), C::attr_float(n, "epsilon", 1e-5f)));
}

void mean_variance_normalization(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  auto axes = C::attr_ints(n, "axes", {0, 2, 3});
  for (auto& a : axes) a = cv.axis(n, a, r);
  Var* mean = cv.op("reduce_mean", {C::arg("x", x), C::arg_ints32("axes", axes), C::arg_bool("keep_dims", true)});
  Var* d = binary(cv, "sub", x, mean);
  Var* var = cv.op("reduce_mean", {C::arg("x", binary(cv, "mul", d, d)), C::arg_ints32("axes", axes), C::arg_bool("keep_dims", true)});
  Var* sd = cv.op("sqrt", {C::arg("x", var)});
  cv.out(n, 0, binary(cv, "real_div", d, binary(cv, "add", sd, cv.cs(1e-9, C::dtype(x)))));
}

void group_normalization(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  auto s = C::static_shape(x);
  if (!s) cv.fail(n, "needs the input's shape to be known");
  int64_t g = C::attr_int(n, "num_groups", 1), ch = (*s)[1];
  if (g <= 0 || ch % g) cv.fail(n, "num_groups must divide the channels");
  Var* scale = cv.in(n, 1);
  Var* bias = cv.in(n, 2);
  auto ss = C::static_shape(scale);
  if (ss && ss->size() == 1 && (*ss)[0] == g && g != ch) {
    // opset 18: one scale per group
    auto rep = [&](Var* v) {
      Var* e = cv.em.expand_dims(v, {1});
      return cv.em.reshape(cv.op("tile", {C::arg("x", e), C::arg_ints32("reps", {1, ch / g})}), {ch});
    };
    scale = rep(scale);
    bias = rep(bias);
  }
  cv.out(n, 0, compose::group_norm(cv.em, x, g, scale, bias, C::attr_float(n, "epsilon", 1e-5f)));
}

void lp_normalization(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", -1), cv.rank(n, x));
  int64_t p = C::attr_int(n, "p", 2);
  if (p != 1 && p != 2) cv.fail(n, "p must be 1 or 2");
  Var* norm = cv.op(p == 1 ? "reduce_l1_norm" : "reduce_l2_norm", {C::arg("x", x), C::arg_ints32("axes", {ax}), C::arg_bool("keep_dims", true)});
  Var* safe = cv.op("select", {C::arg("cond", binary(cv, "equal", norm, cv.cs(0, C::dtype(x)))), C::arg("a", cv.cs(1, C::dtype(x))), C::arg("b", norm)});
  cv.out(n, 0, binary(cv, "real_div", x, safe));
}

// One-hot of the argmax along axis `ax`.
void hardmax_along(C& cv, const NodeProto& n, Var* x, int64_t ax) {
  Dim d = C::shape(x)[ax];
  if (!d->is_const()) cv.fail(n, "the axis' size must be known");
  Var* am = cv.op("reduce_argmax",
                  {C::arg("x", x), C::arg_i32("axis", ax), C::arg_bool("keep_dims", false)});
  DataType dt = C::dtype(x);
  cv.out(n, 0,
         cv.op("one_hot", {C::arg("indices", am), C::arg_i32("one_hot_vector_size", d->value()),
                           C::arg_i32("axis", ax), C::arg("on_value", Value::scalar_float(dt, 1)),
                           C::arg("off_value", Value::scalar_float(dt, 0))}));
}

// Hardmax from opset 13: along one axis (default the last).
void hardmax_v13(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  hardmax_along(cv, n, x, cv.axis(n, C::attr_int(n, "axis", -1), cv.rank(n, x)));
}

// Hardmax before opset 13: over the flattened trailing dims [axis, rank) (default axis 1); only
// the last axis alone is supported.
void hardmax_v1(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", 1), r);
  if (ax != r - 1) cv.fail(n, "Hardmax before opset 13 over several axes is not supported");
  hardmax_along(cv, n, x, ax);
}

void swish(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  float alpha = C::attr_float(n, "alpha", 1.0f);
  Var* s = cv.op("sigmoid", {C::arg("x", alpha == 1.0f ? x : binary(cv, "mul", x, cv.cs(alpha, C::dtype(x))))});
  cv.out(n, 0, binary(cv, "mul", x, s));
}

void shrink(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  DataType dt = C::dtype(x);
  Var* xf = is_float(dt) ? x : cv.cast(x, DataType::Float32);
  DataType ft = C::dtype(xf);
  double bias = C::attr_float(n, "bias", 0.0f), lambd = C::attr_float(n, "lambd", 0.5f);
  Var* lo = binary(cv, "less", xf, cv.cs(-lambd, ft));
  Var* hi = binary(cv, "greater", xf, cv.cs(lambd, ft));
  Var* y = cv.op("select", {C::arg("cond", lo), C::arg("a", binary(cv, "add", xf, cv.cs(bias, ft))), C::arg("b", cv.cs(0, ft))});
  y = cv.op("select", {C::arg("cond", hi), C::arg("a", binary(cv, "sub", xf, cv.cs(bias, ft))), C::arg("b", y)});
  cv.out(n, 0, xf == x ? y : cv.cast(y, dt));
}

void bit_shift(C& cv, const NodeProto& n) {
  // in int32 (the narrow types' results keep their low bits); a shift by a negative amount or
  // by 32 or more gives 0 (LEFT) or the sign fill (RIGHT), as in ONNX's reference; shifts are
  // split in two halves so 2^31 never has to be held
  Var* x = cv.in(n, 0);
  Var* y = cv.cast(cv.in(n, 1), DataType::Int32);
  DataType i32 = DataType::Int32;
  Var* valid = binary(cv, "logical_and", binary(cv, "greater_equal", y, cv.cs(0, i32)), binary(cv, "less", y, cv.cs(32, i32)));
  Var* ys = cv.op("select", {C::arg("cond", valid), C::arg("a", y), C::arg("b", cv.cs(0, i32))});
  Var* h1 = binary(cv, "floor_div", ys, cv.cs(2, i32));
  Var* h2 = binary(cv, "sub", ys, h1);
  std::string dir = C::attr_string(n, "direction", "");
  Var* xi = cv.cast(x, i32);
  Var *r, *fill;
  if (dir == "LEFT") {
    r = binary(cv, "mul", binary(cv, "mul", xi, pow2(cv, h1)), pow2(cv, h2));
    fill = cv.cs(0, i32);
  } else if (dir == "RIGHT") {
    r = binary(cv, "floor_div", binary(cv, "floor_div", xi, pow2(cv, h1)), pow2(cv, h2));
    fill = cv.op("select", {C::arg("cond", binary(cv, "less", xi, cv.cs(0, i32))), C::arg("a", cv.cs(-1, i32)), C::arg("b", cv.cs(0, i32))});
  } else {
    cv.fail(n, "direction must be LEFT or RIGHT");
  }
  cv.out(n, 0, cv.cast(cv.op("select", {C::arg("cond", valid), C::arg("a", r), C::arg("b", fill)}), C::dtype(x)));
}

void lp_pool(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  auto kernel = C::attr_ints(n, "kernel_shape");
  size_t sp = static_cast<size_t>(r - 2);
  if (kernel.size() != sp) cv.fail(n, "kernel_shape needs one value per spatial dim");
  double p = static_cast<double>(C::attr_int(n, "p", 2));
  if (pool_needs_windows(cv, n, x)) {
    DataType dt = C::dtype(x);
    Var* xp = cv.op("pow", {C::arg("x", cv.op("abs", {C::arg("x", x)})), C::arg("y", cv.cs(p, dt))});
    Var* sum = pool_by_windows(cv, n, xp, PoolKind::Sum, false);
    cv.out(n, 0, cv.op("pow", {C::arg("x", sum), C::arg("y", cv.cs(1.0 / p, dt))}));
    return;
  }
  auto pads = C::attr_ints(n, "pads", std::vector<int64_t>(2 * sp, 0));
  std::vector<int64_t> mp(2 * sp);
  for (size_t i = 0; i < sp; ++i) mp[2 * i] = pads[i], mp[2 * i + 1] = pads[i + sp];
  std::string ap = C::attr_string(n, "auto_pad", "NOTSET");
  std::string pt = ap == "SAME_UPPER" ? "same" : ap == "SAME_LOWER" ? "same_lower" : ap == "VALID" ? "valid" : "custom";
  if (pt != "custom") std::fill(mp.begin(), mp.end(), 0);
  DataType dt = C::dtype(x);
  Var* xp = cv.op("pow", {C::arg("x", cv.op("abs", {C::arg("x", x)})), C::arg("y", cv.cs(p, dt))});
  int64_t ksize = 1;
  for (auto k : kernel) ksize *= k;
  Var* avg = cv.op("avg_pool", {C::arg("x", xp), C::arg_ints32("kernel_sizes", kernel),
                                C::arg_ints32("strides", C::attr_ints(n, "strides", std::vector<int64_t>(sp, 1))),
                                C::arg_str("pad_type", pt), C::arg_ints32("pad", mp),
                                C::arg_bool("exclude_padding_from_average", false),
                                C::arg_bool("ceil_mode", C::attr_int(n, "ceil_mode", 0) != 0)});
  Var* sum = binary(cv, "mul", avg, cv.cs(static_cast<double>(ksize), dt));
  cv.out(n, 0, cv.op("pow", {C::arg("x", sum), C::arg("y", cv.cs(1.0 / p, dt))}));
}

void quantize_linear(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  int64_t ax = C::attr_int(n, "axis", 1);
  ax = ax < 0 ? ax + r : ax;  // used only for a per-axis (1-D) or blocked scale
  if (ax < 0 || ax >= std::max(r, 1)) ax = 0;
  int qt = static_cast<int>(C::attr_int(n, "output_dtype", 0));
  if (!qt && C::has(n, 2)) qt = cv.elem_type(n, 2);
  if (is_narrow_type(qt) && mil_dtype(qt) == DataType::Float32) {
    // float8 / float4: x / scale (+ zero point) converted to the format, saturated by default
    Var* xf = cv.cast(x, DataType::Float32);
    Var* q = binary(cv, "real_div", xf, scale_for(cv, n, cv.cast(cv.in(n, 1), DataType::Float32), x, ax, r));
    if (C::has(n, 2)) q = binary(cv, "add", q, scale_for(cv, n, cv.cast(cv.in(n, 2), DataType::Float32), x, ax, r));
    cv.out(n, 0, to_narrow(cv, n, q, qt, C::attr_int(n, "saturate", 1) != 0));
    return;
  }
  auto [lo, hi] = qrange(cv, n, 2);
  Var* xf = cv.cast(x, DataType::Float32);
  Var* q = cv.op("round", {C::arg("x", binary(cv, "real_div", xf, scale_for(cv, n, cv.cast(cv.in(n, 1), DataType::Float32), x, ax, r)))});
  if (C::has(n, 2)) q = binary(cv, "add", q, scale_for(cv, n, cv.cast(cv.in(n, 2), DataType::Float32), x, ax, r));
  q = cv.op("clip", {C::arg("x", q), C::arg_f32("alpha", lo), C::arg_f32("beta", hi)});
  cv.out(n, 0, cv.cast(q, DataType::Int32));
}

void dequantize_linear(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  int64_t ax = C::attr_int(n, "axis", 1);
  ax = ax < 0 ? ax + r : ax;  // used only for a per-axis (1-D) or blocked scale
  if (ax < 0 || ax >= std::max(r, 1)) ax = 0;
  Var* scale = cv.in(n, 1);
  DataType dt = C::dtype(scale);
  Var* xf = cv.cast(x, dt);
  if (C::has(n, 2)) xf = binary(cv, "sub", xf, scale_for(cv, n, cv.cast(cv.in(n, 2), dt), x, ax, r));
  cv.out(n, 0, binary(cv, "mul", xf, scale_for(cv, n, scale, x, ax, r)));
}

}  // namespace

void register_extra(OpTable& t) {
  t.on("RMSNormalization", 1, rms_normalization);
  t.on("MeanVarianceNormalization", 1, mean_variance_normalization);
  t.on("GroupNormalization", 1, group_normalization);
  t.on("LpNormalization", 1, lp_normalization);
  t.on("Hardmax", 1, hardmax_v1);
  t.on("Hardmax", 13, hardmax_v13);
  t.on("Swish", 1, swish);
  t.on("Shrink", 1, shrink);
  t.on("BitShift", 1, bit_shift);
  t.on("LpPool", 1, lp_pool);
  t.on("QuantizeLinear", 1, quantize_linear);
  t.on("DequantizeLinear", 1, dequantize_linear);
  window(t, "HannWindow", 0.5, 0.5, 0.0);
  window(t, "HammingWindow", 25.0 / 46.0, 21.0 / 46.0, 0.0);
  window(t, "BlackmanWindow", 0.42, 0.5, 0.08);
}

}  // namespace onnx_detail
}  // namespace milkit
