// ONNX neural-network operators: MatMul, Gemm, Conv, ConvTranspose, pooling, normalization,
// Dropout, LRN.
#include <cmath>
#include <limits>
#include <numeric>

#include "milkit/compose/norms.h"
#include "milkit/compose/windows.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

// The pads of a conv or pool in MIL's layout ([b0, e0, b1, e1, ...]) and its pad_type.
struct Padding {
  std::string type = "custom";
  std::vector<int64_t> pad;
};

Padding padding(C& cv, const NodeProto& n, size_t spatial) {
  Padding p;
  std::string ap = C::attr_string(n, "auto_pad", "NOTSET");
  if (ap == "SAME_UPPER") p.type = "same";
  else if (ap == "SAME_LOWER") p.type = "same_lower";
  else if (ap == "VALID") p.type = "valid";
  else if (ap != "NOTSET") cv.fail(n, "auto_pad '" + ap + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  auto pads = C::attr_ints(n, "pads", std::vector<int64_t>(2 * spatial, 0));
  if (pads.size() != 2 * spatial)
    cv.fail(n, "pads has " + std::to_string(pads.size()) + " values, expected " + std::to_string(2 * spatial));
  p.pad.resize(2 * spatial);
  for (size_t i = 0; i < spatial; ++i) {
    p.pad[2 * i] = pads[i];
    p.pad[2 * i + 1] = pads[i + spatial];
  }
  if (p.type != "custom") std::fill(p.pad.begin(), p.pad.end(), 0);
  return p;
}

size_t spatial_rank(C& cv, const NodeProto& n, Var* x) {
  int r = cv.rank(n, x);
  if (r < 3) cv.fail(n, "input '" + x->name() + "' has rank " + std::to_string(r) + "; expected N, C and spatial dims");
  return static_cast<size_t>(r - 2);
}

Var* per_channel(C& cv, Var* v, int rank) { return cv.em.per_channel(v, rank); }

void conv(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  size_t sp = spatial_rank(cv, n, x);
  auto strides = C::attr_ints(n, "strides", std::vector<int64_t>(sp, 1));
  auto dil = C::attr_ints(n, "dilations", std::vector<int64_t>(sp, 1));
  Padding p = padding(cv, n, sp);
  std::vector<Arg> args = {C::arg("x", x), C::arg("weight", cv.in(n, 1))};
  if (C::has(n, 2)) args.push_back(C::arg("bias", cv.in(n, 2)));
  args.push_back(C::arg_ints32("strides", strides));
  args.push_back(C::arg_str("pad_type", p.type));
  args.push_back(C::arg_ints32("pad", p.pad));
  args.push_back(C::arg_ints32("dilations", dil));
  args.push_back(C::arg_i32("groups", C::attr_int(n, "group", 1)));
  cv.out(n, 0, cv.op("conv", std::move(args)));
}

void conv_transpose(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  Var* w = cv.in(n, 1);
  size_t sp = spatial_rank(cv, n, x);
  auto strides = C::attr_ints(n, "strides", std::vector<int64_t>(sp, 1));
  auto dil = C::attr_ints(n, "dilations", std::vector<int64_t>(sp, 1));
  auto outpad = C::attr_ints(n, "output_padding", std::vector<int64_t>(sp, 0));
  auto out_shape = C::attr_ints(n, "output_shape");
  std::string ap = C::attr_string(n, "auto_pad", "NOTSET");
  Padding p = padding(cv, n, sp);
  auto xs = C::static_shape(x);
  auto ws = C::static_shape(w);
  if (!ws) cv.fail(n, "the weight's shape must be known");
  std::vector<int64_t> kernel = C::attr_ints(n, "kernel_shape", std::vector<int64_t>(ws->begin() + 2, ws->end()));
  if (strides.size() != sp || dil.size() != sp || outpad.size() != sp || kernel.size() != sp)
    cv.fail(n, "strides, dilations, output_padding and kernel_shape need one value per spatial dim");
  bool explicit_pads = !out_shape.empty() || ap == "SAME_UPPER" || ap == "SAME_LOWER";
  if (explicit_pads) {
    if (!xs) cv.fail(n, "output_shape / auto_pad need the input's spatial size to be known");
    if (!out_shape.empty() && out_shape.size() > sp) out_shape.erase(out_shape.begin(), out_shape.end() - static_cast<long>(sp));
    p.type = "custom";
    for (size_t i = 0; i < sp; ++i) {
      int64_t in = (*xs)[2 + i];
      int64_t want = out_shape.empty() ? in * strides[i] : out_shape[i];
      int64_t total = strides[i] * (in - 1) + outpad[i] + ((kernel[i] - 1) * dil[i] + 1) - want;
      bool upper = ap == "SAME_UPPER";
      int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor, as ONNX computes it
      int64_t b = upper ? half : total - half;
      p.pad[2 * i] = b;
      p.pad[2 * i + 1] = total - b;
    }
  }
  bool has_outpad = std::any_of(outpad.begin(), outpad.end(), [](int64_t v) { return v != 0; });
  // output_padding adds zeros at the end before the bias; MIL has no such input, so the end pads
  // shrink by output_padding (negative pads are not allowed: pad afterwards instead)
  std::vector<int64_t> extra(sp, 0);
  if (has_outpad) {
    for (size_t i = 0; i < sp; ++i) {
      int64_t e = p.pad[2 * i + 1] - outpad[i];
      if (e >= 0) p.pad[2 * i + 1] = e;
      else {
        p.pad[2 * i + 1] = 0;
        extra[i] = -e;
      }
    }
  }
  // an output larger than the transposed conv's (output_shape past it): zeros at the ends
  std::vector<int64_t> extra_b(sp, 0);
  for (size_t i = 0; i < sp; ++i) {
    if (p.pad[2 * i] < 0) {
      extra_b[i] = -p.pad[2 * i];
      p.pad[2 * i] = 0;
    }
    if (p.pad[2 * i + 1] < 0) {
      extra[i] += -p.pad[2 * i + 1];
      p.pad[2 * i + 1] = 0;
    }
  }
  std::vector<Arg> args = {C::arg("x", x), C::arg("weight", w)};
  bool any_extra = std::any_of(extra.begin(), extra.end(), [](int64_t v) { return v != 0; }) ||
                   std::any_of(extra_b.begin(), extra_b.end(), [](int64_t v) { return v != 0; });
  if (C::has(n, 2) && !any_extra) args.push_back(C::arg("bias", cv.in(n, 2)));
  args.push_back(C::arg_str("pad_type", p.type));
  args.push_back(C::arg_ints32("pad", p.pad));
  args.push_back(C::arg_ints32("strides", strides));
  args.push_back(C::arg_ints32("dilations", dil));
  args.push_back(C::arg_i32("groups", C::attr_int(n, "group", 1)));
  Var* y = cv.op("conv_transpose", std::move(args));
  if (any_extra) {
    std::vector<int64_t> pads(2 * (sp + 2), 0);
    for (size_t i = 0; i < sp; ++i) pads[2 * (i + 2)] = extra_b[i], pads[2 * (i + 2) + 1] = extra[i];
    y = cv.op("pad", {C::arg("x", y), C::arg_ints32("pad", pads)});
    if (C::has(n, 2)) y = binary(cv, "add", y, per_channel(cv, cv.in(n, 2), static_cast<int>(sp + 2)));
  }
  cv.out(n, 0, y);
}

// ONNX's pool geometry for one node: the window (auto_pad resolved into begin / end pads), the
// input and output size per spatial dim (-1 where the input size is not known), and whether
// ceil_mode applies (explicit pads only).
struct PoolGeom {
  compose::Window w;
  std::vector<int64_t> in, out;
  bool ceil = false;
};

PoolGeom pool_geom(C& cv, const NodeProto& n, Var* x) {
  size_t sp = spatial_rank(cv, n, x);
  PoolGeom g;
  compose::Window& w = g.w;
  w.kernel = C::attr_ints(n, "kernel_shape");
  if (w.kernel.size() != sp) cv.fail(n, "kernel_shape needs " + std::to_string(sp) + " values");
  w.stride = C::attr_ints(n, "strides", std::vector<int64_t>(sp, 1));
  w.dilation = C::attr_ints(n, "dilations", std::vector<int64_t>(sp, 1));
  if (w.stride.size() != sp || w.dilation.size() != sp) cv.fail(n, "strides and dilations need one value per spatial dim");
  auto pads = C::attr_ints(n, "pads", std::vector<int64_t>(2 * sp, 0));
  if (pads.size() != 2 * sp) cv.fail(n, "pads needs two values per spatial dim");
  std::string ap = C::attr_string(n, "auto_pad", "NOTSET");
  g.ceil = ap == "NOTSET" && C::attr_int(n, "ceil_mode", 0) != 0;
  for (size_t i = 0; i < sp; ++i) {
    const Dim& d = C::shape(x)[2 + i];
    int64_t in = d->is_const() ? d->value() : -1;
    int64_t s = w.stride[i], ek = (w.kernel[i] - 1) * w.dilation[i] + 1;
    int64_t b = pads[i], e = pads[i + sp];
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      b = e = 0;
      if (in >= 0) {
        int64_t total = std::max<int64_t>(0, ((in + s - 1) / s - 1) * s + ek - in);
        b = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
        e = total - b;
      }
    } else if (ap == "VALID") {
      b = e = 0;
    }
    g.in.push_back(in);
    w.pad_begin.push_back(b);
    w.pad_end.push_back(e);
  }
  for (size_t i = 0; i < sp; ++i) g.out.push_back(g.in[i] >= 0 ? w.out_size(i, g.in[i], g.ceil) : -1);
  return g;
}

}  // namespace

bool pool_needs_windows(C& cv, const NodeProto& n, Var* x) {
  PoolGeom g = pool_geom(cv, n, x);
  for (size_t i = 0; i < g.in.size(); ++i) {
    if (g.w.dilation[i] != 1) return true;
    if (g.ceil && g.in[i] >= 0) {
      // MIL keeps a last window that starts in the end padding; ONNX drops it
      int64_t span = g.in[i] + g.w.pad_begin[i] + g.w.pad_end[i] - g.w.kernel[i];
      if ((span + g.w.stride[i] - 1) / g.w.stride[i] + 1 != g.out[i]) return true;
    }
  }
  return false;
}

Var* pool_by_windows(C& cv, const NodeProto& n, Var* x, PoolKind kind, bool count_include_pad, Var** indices) {
  PoolGeom g = pool_geom(cv, n, x);
  for (size_t i = 0; i < g.in.size(); ++i)
    if (g.in[i] < 0 || g.out[i] < 1) cv.fail(n, "pooling with dilations, ceil_mode or indices needs the spatial size to be known");
  compose::PoolSpec s;
  s.window = g.w;
  s.kind = kind;
  s.ceil_mode = g.ceil;
  s.count_include_pad = count_include_pad;
  s.index_order = C::attr_int(n, "storage_order", 0) != 0 ? compose::IndexOrder::ColumnMajor : compose::IndexOrder::RowMajor;
  return compose::pool_by_taps(cv.em, x, s, indices);
}

namespace {

void pool(C& cv, const NodeProto& n, bool is_max) {
  Var* x = cv.in(n, 0);
  size_t sp = spatial_rank(cv, n, x);
  auto kernel = C::attr_ints(n, "kernel_shape");
  if (kernel.size() != sp) cv.fail(n, "kernel_shape needs " + std::to_string(sp) + " values");
  auto strides = C::attr_ints(n, "strides", std::vector<int64_t>(sp, 1));
  Padding p = padding(cv, n, sp);
  DataType dt = C::dtype(x);
  if (!is_float(dt)) x = cv.cast(x, DataType::Float32);  // MIL pools floats only
  if (C::wants(n, 1) || pool_needs_windows(cv, n, x)) {
    Var* idx = nullptr;
    Var* y = pool_by_windows(cv, n, x, is_max ? PoolKind::Max : PoolKind::Avg, C::attr_int(n, "count_include_pad", 0) != 0,
                             C::wants(n, 1) ? &idx : nullptr);
    cv.out(n, 0, is_float(dt) ? y : cv.cast(y, dt));
    if (idx) cv.out(n, 1, idx);
    return;
  }
  std::vector<Arg> args = {C::arg("x", x), C::arg_ints32("kernel_sizes", kernel), C::arg_ints32("strides", strides),
                           C::arg_str("pad_type", p.type), C::arg_ints32("pad", p.pad),
                           C::arg_bool("ceil_mode", C::attr_int(n, "ceil_mode", 0) != 0)};
  if (!is_max) args.push_back(C::arg_bool("exclude_padding_from_average", C::attr_int(n, "count_include_pad", 0) == 0));
  Var* y = cv.op(is_max ? "max_pool" : "avg_pool", std::move(args));
  cv.out(n, 0, is_float(dt) ? y : cv.cast(y, dt));
}

void global_pool(C& cv, const NodeProto& n, const char* reduce) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  std::vector<int64_t> axes;
  for (int i = 2; i < r; ++i) axes.push_back(i);
  cv.out(n, 0, cv.op(reduce, {C::arg("x", x), C::arg_ints32("axes", axes), C::arg_bool("keep_dims", true)}));
}

// (x - mean) / sqrt(var + eps) * scale + bias, every parameter broadcast per channel.
Var* norm_composite(C& cv, Var* x, Var* mean, Var* var, Var* scale, Var* bias, double eps) {
  return compose::norm_by_stats(cv.em, x, {mean, var, scale, bias, eps});
}

}  // namespace

namespace {

void mat_mul(C& cv, const NodeProto& n) {
  cv.out(n, 0, cv.op("matmul", {C::arg("x", cv.in(n, 0)), C::arg("y", cv.in(n, 1))}));
}

void gemm(C& cv, const NodeProto& n) {
  Var* a = cv.in(n, 0);
  Var* b = cv.in(n, 1);
  float alpha = C::attr_float(n, "alpha", 1.0f), beta = C::attr_float(n, "beta", 1.0f);
  Var* y = cv.op("matmul", {C::arg("x", a), C::arg("y", b), C::arg_bool("transpose_x", C::attr_int(n, "transA", 0) != 0),
                            C::arg_bool("transpose_y", C::attr_int(n, "transB", 0) != 0)});
  if (alpha != 1.0f) y = binary(cv, "mul", y, cv.cs(alpha, C::dtype(y)));
  if (C::has(n, 2) && beta != 0.0f) {
    Var* c = cv.in(n, 2);
    if (beta != 1.0f) c = binary(cv, "mul", c, cv.cs(beta, C::dtype(c)));
    y = binary(cv, "add", y, c);
  }
  cv.out(n, 0, y);
}

void max_pool(C& cv, const NodeProto& n) { pool(cv, n, true); }

void average_pool(C& cv, const NodeProto& n) { pool(cv, n, false); }

void global_average_pool(C& cv, const NodeProto& n) { global_pool(cv, n, "reduce_mean"); }

void global_max_pool(C& cv, const NodeProto& n) { global_pool(cv, n, "reduce_max"); }

void batch_normalization(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  double eps = C::attr_float(n, "epsilon", 1e-5f);
  bool training = cv.opset >= 14 ? C::attr_int(n, "training_mode", 0) != 0 : C::wants(n, 1) || C::wants(n, 2);
  if (training) {
    // normalized with the batch's statistics (population variance over N and the spatial
    // dims); the running statistics are updated by momentum
    if (cv.opset < 14 && (C::wants(n, 3) || C::wants(n, 4)))
      cv.fail(n, "the saved mean / variance outputs of opset < 14 are not supported");
    std::vector<int64_t> axes = {0};
    for (int i = 2; i < r; ++i) axes.push_back(i);
    DataType dt = C::dtype(x);
    Var* mean = cv.op("reduce_mean", {C::arg("x", x), C::arg_ints32("axes", axes), C::arg_bool("keep_dims", false)});
    Var* d = binary(cv, "sub", x, per_channel(cv, mean, r));
    Var* var = cv.op("reduce_mean", {C::arg("x", binary(cv, "mul", d, d)), C::arg_ints32("axes", axes), C::arg_bool("keep_dims", false)});
    cv.out(n, 0, norm_composite(cv, x, mean, var, cv.in(n, 1), cv.in(n, 2), eps));
    double mom = C::attr_float(n, "momentum", 0.9f);
    auto running = [&](Var* old, Var* now) {
      return binary(cv, "add", binary(cv, "mul", old, cv.cs(mom, dt)), binary(cv, "mul", now, cv.cs(1 - mom, dt)));
    };
    if (C::wants(n, 1)) cv.out(n, 1, running(cv.in(n, 3), mean));
    if (C::wants(n, 2)) cv.out(n, 2, running(cv.in(n, 4), var));
    return;
  }
  bool consts = cv.value(n, 1) && cv.value(n, 2) && cv.value(n, 3) && cv.value(n, 4);
  if (consts && r >= 3 && r <= 5) {
    cv.out(n, 0, cv.op("batch_norm", {C::arg("x", x), C::arg("mean", cv.in(n, 3)), C::arg("variance", cv.in(n, 4)),
                                      C::arg("gamma", cv.in(n, 1)), C::arg("beta", cv.in(n, 2)),
                                      C::arg_f32("epsilon", eps)}));
    return;
  }
  cv.out(n, 0, norm_composite(cv, x, cv.in(n, 3), cv.in(n, 4), cv.in(n, 1), cv.in(n, 2), eps));
}

void instance_normalization(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  double eps = C::attr_float(n, "epsilon", 1e-5f);
  std::vector<int64_t> axes;
  for (int i = 2; i < r; ++i) axes.push_back(i);
  Var* mean = cv.op("reduce_mean", {C::arg("x", x), C::arg_ints32("axes", axes), C::arg_bool("keep_dims", true)});
  Var* d = binary(cv, "sub", x, mean);
  Var* var = cv.op("reduce_mean", {C::arg("x", binary(cv, "mul", d, d)), C::arg_ints32("axes", axes),
                                   C::arg_bool("keep_dims", true)});
  Var* s = cv.op("sqrt", {C::arg("x", binary(cv, "add", var, cv.cs(eps, C::dtype(x))))});
  Var* y = binary(cv, "real_div", d, s);
  y = binary(cv, "mul", y, per_channel(cv, cv.in(n, 1), r));
  cv.out(n, 0, binary(cv, "add", y, per_channel(cv, cv.in(n, 2), r)));
}

void layer_normalization(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", -1), r);
  double eps = C::attr_float(n, "epsilon", 1e-5f);
  std::vector<int64_t> axes;
  for (int64_t i = ax; i < r; ++i) axes.push_back(i);
  if (C::wants(n, 1) || C::wants(n, 2)) {
    // the statistics are outputs too: compute them, then normalize with them
    Var* mean = cv.op("reduce_mean", {C::arg("x", x), C::arg_ints32("axes", axes), C::arg_bool("keep_dims", true)});
    Var* d = binary(cv, "sub", x, mean);
    Var* var = cv.op("reduce_mean", {C::arg("x", binary(cv, "mul", d, d)), C::arg_ints32("axes", axes), C::arg_bool("keep_dims", true)});
    Var* inv = cv.op("rsqrt", {C::arg("x", binary(cv, "add", var, cv.cs(eps, C::dtype(x))))});
    Var* y = binary(cv, "mul", binary(cv, "mul", d, inv), cv.in(n, 1));
    if (C::has(n, 2)) y = binary(cv, "add", y, cv.in(n, 2));
    cv.out(n, 0, y);
    cv.out(n, 1, mean);
    cv.out(n, 2, inv);
    return;
  }
  auto xs = C::static_shape(x);
  const Value* sv = cv.value(n, 1);
  const Value* bv = C::has(n, 2) ? cv.value(n, 2) : nullptr;
  std::vector<int64_t> norm_shape;
  if (xs) norm_shape.assign(xs->begin() + ax, xs->end());
  bool direct = sv && xs && sv->shape() == norm_shape && (!C::has(n, 2) || (bv && bv->shape() == norm_shape));
  if (direct) {
    std::vector<Arg> args = {C::arg("x", x), C::arg_ints32("axes", axes), C::arg("gamma", cv.in(n, 1))};
    if (C::has(n, 2)) args.push_back(C::arg("beta", cv.in(n, 2)));
    args.push_back(C::arg_f32("epsilon", eps));
    return cv.out(n, 0, cv.op("layer_norm", std::move(args)));
  }
  Var* y = cv.op("layer_norm", {C::arg("x", x), C::arg_ints32("axes", axes), C::arg_f32("epsilon", eps)});
  y = binary(cv, "mul", y, cv.in(n, 1));
  if (C::has(n, 2)) y = binary(cv, "add", y, cv.in(n, 2));
  cv.out(n, 0, y);
}

void lrn(C& cv, const NodeProto& n) {
  cv.out(n, 0, cv.op("local_response_norm", {C::arg("x", cv.in(n, 0)), C::arg_i32("size", C::attr_int(n, "size", 1)),
                                             C::arg_f32("alpha", C::attr_float(n, "alpha", 1e-4f)),
                                             C::arg_f32("beta", C::attr_float(n, "beta", 0.75f)),
                                             C::arg_f32("k", C::attr_float(n, "bias", 1.0f))}));
}

void dropout(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  if (cv.opset >= 12 && C::has(n, 2) && cv.ints(n, 2, "training_mode").at(0) != 0) {
    double ratio = C::has(n, 1) ? cv.doubles(n, 1, "ratio").at(0) : 0.5;
    if (ratio < 0 || ratio >= 1) cv.fail(n, "ratio must be in [0, 1)");
    if (ratio > 0) {
      // a random keep mask (Core ML's generator: not the numbers of any other runtime)
      DataType dt = C::dtype(x);
      Var* keep = cv.op("random_bernoulli", {C::arg("shape", cv.op("shape", {C::arg("x", x)})),
                                             C::arg_i32("seed", C::find_attr(n, "seed") ? C::attr_int(n, "seed", 0) : -1),
                                             C::arg("prob", Value::scalar_float(dt, 1.0 - ratio))});
      cv.out(n, 0, binary(cv, "mul", binary(cv, "mul", x, keep), cv.cs(1.0 / (1.0 - ratio), dt)));
      if (C::wants(n, 1)) cv.out(n, 1, cv.cast(keep, DataType::Bool));
      return;
    }
  }
  cv.out(n, 0, x);
  if (C::wants(n, 1)) {
    Var* shp = cv.op("shape", {C::arg("x", x)});
    cv.out(n, 1, cv.op("fill", {C::arg("shape", shp), C::arg("value", Value::scalar_bool(true))}));
  }
}

}  // namespace

void register_nn(OpTable& t) {
  t.on("MatMul", 1, mat_mul);
  t.on("Gemm", 1, gemm);
  t.on("Conv", 1, conv);
  t.on("ConvTranspose", 1, conv_transpose);
  t.on("MaxPool", 1, max_pool);
  t.on("AveragePool", 1, average_pool);
  t.on("GlobalAveragePool", 1, global_average_pool);
  t.on("GlobalMaxPool", 1, global_max_pool);
  t.on("BatchNormalization", 1, batch_normalization);
  t.on("InstanceNormalization", 1, instance_normalization);
  t.on("LayerNormalization", 1, layer_normalization);
  t.on("LRN", 1, lrn);
  t.on("Dropout", 1, dropout);
}

}  // namespace onnx_detail
}  // namespace milkit
