// ONNX neural-network operators: MatMul, Gemm, Conv, ConvTranspose, pooling, normalization,
// Dropout, LRN.
#include <cmath>
#include <numeric>

#include "converter.h"

namespace milkit {
namespace onnx_detail {

namespace {

using onnx::NodeProto;
using C = Converter;

Var* binary(C& cv, const char* type, Var* x, Var* y) { return cv.op(type, {C::a("x", x), C::a("y", y)}); }

// The pads of a conv or pool in MIL's layout ([b0, e0, b1, e1, ...]) and its pad_type.
struct Padding {
  std::string type = "custom";
  std::vector<int64_t> pad;
};

Padding padding(C& cv, const NodeProto& n, size_t spatial) {
  Padding p;
  std::string ap = C::as(n, "auto_pad", "NOTSET");
  if (ap == "SAME_UPPER") p.type = "same";
  else if (ap == "SAME_LOWER") p.type = "same_lower";
  else if (ap == "VALID") p.type = "valid";
  else if (ap != "NOTSET") cv.fail(n, "auto_pad '" + ap + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  auto pads = C::aints(n, "pads", std::vector<int64_t>(2 * spatial, 0));
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

// Reshapes a per-channel vector to broadcast over [N, C, spatial...].
Var* per_channel(C& cv, Var* v, int rank) {
  std::vector<int64_t> axes;
  for (int i = 2; i < rank; ++i) axes.push_back(i - 1);
  if (axes.empty()) return v;
  return cv.op("expand_dims", {C::a("x", v), C::aints32("axes", axes)});
}

void conv(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  size_t sp = spatial_rank(cv, n, x);
  auto strides = C::aints(n, "strides", std::vector<int64_t>(sp, 1));
  auto dil = C::aints(n, "dilations", std::vector<int64_t>(sp, 1));
  Padding p = padding(cv, n, sp);
  std::vector<Arg> args = {C::a("x", x), C::a("weight", cv.in(n, 1))};
  if (C::has(n, 2)) args.push_back(C::a("bias", cv.in(n, 2)));
  args.push_back(C::aints32("strides", strides));
  args.push_back(C::astr("pad_type", p.type));
  args.push_back(C::aints32("pad", p.pad));
  args.push_back(C::aints32("dilations", dil));
  args.push_back(C::ai32("groups", C::ai(n, "group", 1)));
  cv.out(n, 0, cv.op("conv", std::move(args)));
}

void conv_transpose(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  Var* w = cv.in(n, 1);
  size_t sp = spatial_rank(cv, n, x);
  auto strides = C::aints(n, "strides", std::vector<int64_t>(sp, 1));
  auto dil = C::aints(n, "dilations", std::vector<int64_t>(sp, 1));
  auto outpad = C::aints(n, "output_padding", std::vector<int64_t>(sp, 0));
  auto out_shape = C::aints(n, "output_shape");
  std::string ap = C::as(n, "auto_pad", "NOTSET");
  Padding p = padding(cv, n, sp);
  auto xs = C::static_shape(x);
  auto ws = C::static_shape(w);
  if (!ws) cv.fail(n, "the weight's shape must be known");
  std::vector<int64_t> kernel = C::aints(n, "kernel_shape", std::vector<int64_t>(ws->begin() + 2, ws->end()));
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
      int64_t b = upper ? total / 2 : total - total / 2;
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
  std::vector<Arg> args = {C::a("x", x), C::a("weight", w)};
  bool any_extra = std::any_of(extra.begin(), extra.end(), [](int64_t v) { return v != 0; });
  if (C::has(n, 2) && !any_extra) args.push_back(C::a("bias", cv.in(n, 2)));
  args.push_back(C::astr("pad_type", p.type));
  args.push_back(C::aints32("pad", p.pad));
  args.push_back(C::aints32("strides", strides));
  args.push_back(C::aints32("dilations", dil));
  args.push_back(C::ai32("groups", C::ai(n, "group", 1)));
  Var* y = cv.op("conv_transpose", std::move(args));
  if (any_extra) {
    std::vector<int64_t> pads(2 * (sp + 2), 0);
    for (size_t i = 0; i < sp; ++i) pads[2 * (i + 2) + 1] = extra[i];
    y = cv.op("pad", {C::a("x", y), C::aints32("pad", pads)});
    if (C::has(n, 2)) y = binary(cv, "add", y, per_channel(cv, cv.in(n, 2), static_cast<int>(sp + 2)));
  }
  cv.out(n, 0, y);
}

void pool(C& cv, const NodeProto& n, bool is_max) {
  Var* x = cv.in(n, 0);
  size_t sp = spatial_rank(cv, n, x);
  auto kernel = C::aints(n, "kernel_shape");
  if (kernel.size() != sp) cv.fail(n, "kernel_shape needs " + std::to_string(sp) + " values");
  auto strides = C::aints(n, "strides", std::vector<int64_t>(sp, 1));
  auto dil = C::aints(n, "dilations", std::vector<int64_t>(sp, 1));
  for (auto d : dil)
    if (d != 1) cv.fail(n, "dilated pooling is not supported by Core ML");
  if (C::wants(n, 1)) cv.fail(n, "the Indices output is not supported");
  Padding p = padding(cv, n, sp);
  DataType dt = C::dtype(x);
  if (!is_float(dt)) x = cv.cast(x, DataType::Float32);  // MIL pools floats only
  std::vector<Arg> args = {C::a("x", x), C::aints32("kernel_sizes", kernel), C::aints32("strides", strides),
                           C::astr("pad_type", p.type), C::aints32("pad", p.pad),
                           C::abool("ceil_mode", C::ai(n, "ceil_mode", 0) != 0)};
  if (!is_max) args.push_back(C::abool("exclude_padding_from_average", C::ai(n, "count_include_pad", 0) == 0));
  Var* y = cv.op(is_max ? "max_pool" : "avg_pool", std::move(args));
  cv.out(n, 0, is_float(dt) ? y : cv.cast(y, dt));
}

void global_pool(C& cv, const NodeProto& n, const char* reduce) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  std::vector<int64_t> axes;
  for (int i = 2; i < r; ++i) axes.push_back(i);
  cv.out(n, 0, cv.op(reduce, {C::a("x", x), C::aints32("axes", axes), C::abool("keep_dims", true)}));
}

// (x - mean) / sqrt(var + eps) * scale + bias, every parameter broadcast per channel.
Var* norm_composite(C& cv, Var* x, Var* mean, Var* var, Var* scale, Var* bias, double eps, int rank) {
  DataType dt = C::dtype(x);
  Var* d = binary(cv, "sub", x, per_channel(cv, mean, rank));
  Var* s = cv.op("sqrt", {C::a("x", binary(cv, "add", per_channel(cv, var, rank), cv.cs(eps, dt)))});
  Var* y = binary(cv, "real_div", d, s);
  y = binary(cv, "mul", y, per_channel(cv, scale, rank));
  return binary(cv, "add", y, per_channel(cv, bias, rank));
}

}  // namespace

void register_nn(OpTable& t) {
  t["MatMul"] = [](C& cv, const NodeProto& n) {
    cv.out(n, 0, cv.op("matmul", {C::a("x", cv.in(n, 0)), C::a("y", cv.in(n, 1))}));
  };
  t["Gemm"] = [](C& cv, const NodeProto& n) {
    Var* a = cv.in(n, 0);
    Var* b = cv.in(n, 1);
    float alpha = C::af(n, "alpha", 1.0f), beta = C::af(n, "beta", 1.0f);
    Var* y = cv.op("matmul", {C::a("x", a), C::a("y", b), C::abool("transpose_x", C::ai(n, "transA", 0) != 0),
                              C::abool("transpose_y", C::ai(n, "transB", 0) != 0)});
    if (alpha != 1.0f) y = binary(cv, "mul", y, cv.cs(alpha, C::dtype(y)));
    if (C::has(n, 2) && beta != 0.0f) {
      Var* c = cv.in(n, 2);
      if (beta != 1.0f) c = binary(cv, "mul", c, cv.cs(beta, C::dtype(c)));
      y = binary(cv, "add", y, c);
    }
    cv.out(n, 0, y);
  };
  t["Conv"] = conv;
  t["ConvTranspose"] = conv_transpose;
  t["MaxPool"] = [](C& cv, const NodeProto& n) { pool(cv, n, true); };
  t["AveragePool"] = [](C& cv, const NodeProto& n) { pool(cv, n, false); };
  t["GlobalAveragePool"] = [](C& cv, const NodeProto& n) { global_pool(cv, n, "reduce_mean"); };
  t["GlobalMaxPool"] = [](C& cv, const NodeProto& n) { global_pool(cv, n, "reduce_max"); };
  t["BatchNormalization"] = [](C& cv, const NodeProto& n) {
    if (C::ai(n, "training_mode", 0) != 0 || C::wants(n, 1) || C::wants(n, 2))
      cv.fail(n, "training mode (running statistics outputs) is not supported");
    Var* x = cv.in(n, 0);
    int r = cv.rank(n, x);
    double eps = C::af(n, "epsilon", 1e-5f);
    bool consts = cv.value(n, 1) && cv.value(n, 2) && cv.value(n, 3) && cv.value(n, 4);
    if (consts && r >= 3 && r <= 5) {
      cv.out(n, 0, cv.op("batch_norm", {C::a("x", x), C::a("mean", cv.in(n, 3)), C::a("variance", cv.in(n, 4)),
                                        C::a("gamma", cv.in(n, 1)), C::a("beta", cv.in(n, 2)),
                                        C::af32("epsilon", eps)}));
      return;
    }
    cv.out(n, 0, norm_composite(cv, x, cv.in(n, 3), cv.in(n, 4), cv.in(n, 1), cv.in(n, 2), eps, r));
  };
  t["InstanceNormalization"] = [](C& cv, const NodeProto& n) {
    Var* x = cv.in(n, 0);
    int r = cv.rank(n, x);
    double eps = C::af(n, "epsilon", 1e-5f);
    std::vector<int64_t> axes;
    for (int i = 2; i < r; ++i) axes.push_back(i);
    Var* mean = cv.op("reduce_mean", {C::a("x", x), C::aints32("axes", axes), C::abool("keep_dims", true)});
    Var* d = binary(cv, "sub", x, mean);
    Var* var = cv.op("reduce_mean", {C::a("x", binary(cv, "mul", d, d)), C::aints32("axes", axes),
                                     C::abool("keep_dims", true)});
    Var* s = cv.op("sqrt", {C::a("x", binary(cv, "add", var, cv.cs(eps, C::dtype(x))))});
    Var* y = binary(cv, "real_div", d, s);
    y = binary(cv, "mul", y, per_channel(cv, cv.in(n, 1), r));
    cv.out(n, 0, binary(cv, "add", y, per_channel(cv, cv.in(n, 2), r)));
  };
  t["LayerNormalization"] = [](C& cv, const NodeProto& n) {
    Var* x = cv.in(n, 0);
    int r = cv.rank(n, x);
    int64_t ax = cv.axis(n, C::ai(n, "axis", -1), r);
    double eps = C::af(n, "epsilon", 1e-5f);
    std::vector<int64_t> axes;
    for (int64_t i = ax; i < r; ++i) axes.push_back(i);
    if (C::wants(n, 1) || C::wants(n, 2)) {
      // the statistics are outputs too: compute them, then normalize with them
      Var* mean = cv.op("reduce_mean", {C::a("x", x), C::aints32("axes", axes), C::abool("keep_dims", true)});
      Var* d = binary(cv, "sub", x, mean);
      Var* var = cv.op("reduce_mean", {C::a("x", binary(cv, "mul", d, d)), C::aints32("axes", axes), C::abool("keep_dims", true)});
      Var* inv = cv.op("rsqrt", {C::a("x", binary(cv, "add", var, cv.cs(eps, C::dtype(x))))});
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
      std::vector<Arg> args = {C::a("x", x), C::aints32("axes", axes), C::a("gamma", cv.in(n, 1))};
      if (C::has(n, 2)) args.push_back(C::a("beta", cv.in(n, 2)));
      args.push_back(C::af32("epsilon", eps));
      return cv.out(n, 0, cv.op("layer_norm", std::move(args)));
    }
    Var* y = cv.op("layer_norm", {C::a("x", x), C::aints32("axes", axes), C::af32("epsilon", eps)});
    y = binary(cv, "mul", y, cv.in(n, 1));
    if (C::has(n, 2)) y = binary(cv, "add", y, cv.in(n, 2));
    cv.out(n, 0, y);
  };
  t["LRN"] = [](C& cv, const NodeProto& n) {
    cv.out(n, 0, cv.op("local_response_norm", {C::a("x", cv.in(n, 0)), C::ai32("size", C::ai(n, "size", 1)),
                                               C::af32("alpha", C::af(n, "alpha", 1e-4f)),
                                               C::af32("beta", C::af(n, "beta", 0.75f)),
                                               C::af32("k", C::af(n, "bias", 1.0f))}));
  };
  t["Dropout"] = [](C& cv, const NodeProto& n) {
    if (cv.opset >= 12 && C::has(n, 2)) {
      const Value* tm = cv.value(n, 2);
      if (!tm || tm->as_int(0) != 0) cv.fail(n, "training mode is not supported");
    }
    Var* x = cv.in(n, 0);
    cv.out(n, 0, x);
    if (C::wants(n, 1)) {
      Var* shp = cv.op("shape", {C::a("x", x)});
      cv.out(n, 1, cv.op("fill", {C::a("shape", shp), C::a("value", Value::scalar_bool(true))}));
    }
  };
}

}  // namespace onnx_detail
}  // namespace milkit
