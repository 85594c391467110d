// ONNX operators: convolutions (Conv, ConvTranspose, DeformConv).
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
  std::vector<int64_t> kernel =
      C::attr_ints(n, "kernel_shape", std::vector<int64_t>(ws->begin() + 2, ws->end()));
  if (strides.size() != sp || dil.size() != sp || outpad.size() != sp || kernel.size() != sp)
    cv.fail(n,
            "strides, dilations, output_padding and kernel_shape need one value per spatial dim");
  bool explicit_pads = !out_shape.empty() || ap == "SAME_UPPER" || ap == "SAME_LOWER";
  if (explicit_pads) {
    if (!xs) cv.fail(n, "output_shape / auto_pad need the input's spatial size to be known");
    if (!out_shape.empty() && out_shape.size() > sp)
      out_shape.erase(out_shape.begin(), out_shape.end() - static_cast<long>(sp));
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
      if (e >= 0)
        p.pad[2 * i + 1] = e;
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
    for (size_t i = 0; i < sp; ++i)
      pads[2 * (i + 2)] = extra_b[i], pads[2 * (i + 2) + 1] = extra[i];
    y = cv.op("pad", {C::arg("x", y), C::arg_ints32("pad", pads)});
    if (C::has(n, 2))
      y = binary(cv, "add", y, per_channel(cv, cv.in(n, 2), static_cast<int>(sp + 2)));
  }
  cv.out(n, 0, y);
}

// DeformConv (2-D): every kernel tap sampled bilinearly at its offset position (taps outside the
// image are 0, as ONNX's reference samples with GridSample), times the mask, then a grouped
// convolution as a matrix product over the sampled columns.
void deform_conv(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  Var* w = cv.in(n, 1);
  Var* off = cv.cast(cv.in(n, 2), DataType::Float32);
  auto xs = C::static_shape(x), ws = C::static_shape(w), os = C::static_shape(off);
  if (!xs || !ws || !os || xs->size() != 4)
    cv.fail(n, "needs a 4-D input and the shapes of X, W and offset to be known");
  int64_t N = (*xs)[0], Ci = (*xs)[1], H = (*xs)[2], Wd = (*xs)[3], Co = (*ws)[0];
  auto ks = C::attr_ints(n, "kernel_shape", {(*ws)[2], (*ws)[3]});
  auto st = C::attr_ints(n, "strides", {1, 1}), dl = C::attr_ints(n, "dilations", {1, 1}),
       pads = C::attr_ints(n, "pads", {0, 0, 0, 0});
  int64_t grp = C::attr_int(n, "group", 1), og = C::attr_int(n, "offset_group", 1);
  int64_t kh = ks[0], kw = ks[1], oh = (*os)[2], ow = (*os)[3];
  if (Ci % og || Ci % grp || Co % grp || (*os)[1] != og * kh * kw * 2)
    cv.fail(n, "the channel, group and offset shapes do not match");
  int64_t K = kh * kw * oh * ow, Cg = Ci / og;
  DataType f32 = DataType::Float32, i32 = DataType::Int32;
  Var* o7 =
      cv.op("reshape", {C::arg("x", off), C::arg_ints32("shape", {N, og, kh, kw, 2, oh, ow})});
  auto comp = [&](int64_t c, int64_t dim) {
    // base position of each tap and output: -pad + stride * o + dilation * k
    std::vector<double> base(static_cast<size_t>(K));
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j)
        for (int64_t a = 0; a < oh; ++a)
          for (int64_t b = 0; b < ow; ++b)
            base[static_cast<size_t>(((i * kw + j) * oh + a) * ow + b)] =
                dim == 0 ? static_cast<double>(-pads[0] + st[0] * a + dl[0] * i)
                         : static_cast<double>(-pads[1] + st[1] * b + dl[1] * j);
    Var* o = cv.op("reshape", {C::arg("x", cv.em.slice_axis(o7, 4, c, c + 1)),
                               C::arg_ints32("shape", {N, og, 1, K})});
    return binary(cv, "add", o, cv.c(Value::from_doubles(f32, {1, 1, 1, K}, base)));
  };
  Var* py = comp(0, 0);
  Var* px = comp(1, 1);
  Var* fy = cv.op("floor", {C::arg("x", py)});
  Var* fx = cv.op("floor", {C::arg("x", px)});
  Var* ly = binary(cv, "sub", py, fy);
  Var* lx = binary(cv, "sub", px, fx);
  Var* mask = C::has(n, 4) ? cv.op("reshape", {C::arg("x", cv.cast(cv.in(n, 4), f32)),
                                               C::arg_ints32("shape", {N, og, 1, K})})
                           : nullptr;
  Var* xg =
      cv.op("reshape", {C::arg("x", cv.cast(x, f32)), C::arg_ints32("shape", {N, og, Cg, H * Wd})});
  Var* acc = nullptr;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b) {
      Var* iy = binary(cv, "add", fy, fconst(cv, a));
      Var* ix = binary(cv, "add", fx, fconst(cv, b));
      Var* wgt = binary(cv, "mul", a ? ly : binary(cv, "sub", fconst(cv, 1), ly),
                        b ? lx : binary(cv, "sub", fconst(cv, 1), lx));
      Var* ok = binary(cv, "logical_and",
                       binary(cv, "logical_and", binary(cv, "greater_equal", iy, fconst(cv, 0)),
                              binary(cv, "less", iy, fconst(cv, static_cast<double>(H)))),
                       binary(cv, "logical_and", binary(cv, "greater_equal", ix, fconst(cv, 0)),
                              binary(cv, "less", ix, fconst(cv, static_cast<double>(Wd)))));
      wgt = binary(cv, "mul", wgt, cv.cast(ok, f32));
      if (mask) wgt = binary(cv, "mul", wgt, mask);
      Var* flat = binary(cv, "add",
                         binary(cv, "mul",
                                cv.op("clip", {C::arg("x", iy), C::arg_f32("alpha", 0),
                                               C::arg_f32("beta", static_cast<double>(H - 1))}),
                                fconst(cv, static_cast<double>(Wd))),
                         cv.op("clip", {C::arg("x", ix), C::arg_f32("alpha", 0),
                                        C::arg_f32("beta", static_cast<double>(Wd - 1))}));
      Var* idx =
          cv.op("tile", {C::arg("x", cv.cast(flat, i32)), C::arg_ints32("reps", {1, 1, Cg, 1})});
      Var* v = binary(cv, "mul",
                      cv.op("gather_along_axis",
                            {C::arg("x", xg), C::arg("indices", idx), C::arg_i32("axis", 3)}),
                      wgt);  // [N, og, Cg, K]
      acc = acc ? binary(cv, "add", acc, v) : v;
    }
  // columns [N, group, (Ci / group) * kh * kw, oh * ow] against W [group, Co / group, (Ci / group)
  // * kh * kw]
  Var* cols = cv.op("reshape", {C::arg("x", acc),
                                C::arg_ints32("shape", {N, grp, (Ci / grp) * kh * kw, oh * ow})});
  Var* wm = cv.op("reshape", {C::arg("x", cv.cast(w, f32)),
                              C::arg_ints32("shape", {grp, Co / grp, (Ci / grp) * kh * kw})});
  Var* y =
      cv.op("matmul", {C::arg("x", wm), C::arg("y", cols)});  // [N, group, Co / group, oh * ow]
  y = cv.op("reshape", {C::arg("x", y), C::arg_ints32("shape", {N, Co, oh, ow})});
  if (C::has(n, 3))
    y = binary(cv, "add", y,
               cv.op("reshape", {C::arg("x", cv.cast(cv.in(n, 3), f32)),
                                 C::arg_ints32("shape", {1, Co, 1, 1})}));
  cv.out(n, 0, cv.cast(y, C::dtype(x)));
}

}  // namespace

void register_conv(OpTable& t) {
  t.on("Conv", 1, conv);
  t.on("ConvTranspose", 1, conv_transpose);
  t.on("DeformConv", 1, deform_conv);
}

}  // namespace onnx_detail
}  // namespace milkit
