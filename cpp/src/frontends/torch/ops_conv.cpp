// ATen convolutions and transposed convolutions.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

// conv / conv_transpose with torch's arguments
Var* convolution(C& cv, const json& n, Var* x, Var* w, Var* bias, bool transposed) {
  int r = cv.rank(n, x);
  bool unbatched = false;
  int wr = cv.rank(n, w);
  if (r == wr - 1) {  // torch accepts unbatched inputs
    x = cv.op("expand_dims", {C::a("x", x), C::aints32("axes", {0})});
    unbatched = true;
    r += 1;
  }
  if (r < 3) cv.fail(n, "input has rank " + std::to_string(r) + "; expected N, C and spatial dims");
  size_t sp = static_cast<size_t>(r - 2);
  auto stride = expand_list(cv, n, cv.ints(n, "stride", {1}), sp, "stride");
  auto dil = expand_list(cv, n, cv.ints(n, "dilation", {1}), sp, "dilation");
  int64_t groups = cv.i(n, "groups", 1);
  DataType dt = C::dtype(x);
  w = cv.cast(w, dt);
  std::vector<Arg> args{C::a("x", x), C::a("weight", w)};
  if (bias) args.push_back(C::a("bias", cv.cast(bias, dt)));
  args.push_back(C::aints32("strides", stride));
  args.push_back(C::aints32("dilations", dil));
  args.push_back(C::ai32("groups", groups));
  Var* out;
  if (!transposed) {
    const json* pa = C::arg(n, "padding");
    if (pa && pa->contains("as_string")) {
      std::string p = (*pa)["as_string"].get<std::string>();
      if (p != "same" && p != "valid") cv.fail(n, "padding '" + p + "' is not 'same' or 'valid'");
      args.push_back(C::astr("pad_type", p));
    } else {
      auto pad = expand_list(cv, n, cv.ints(n, "padding", {0}), sp, "padding");
      std::vector<int64_t> p2;
      for (auto p : pad) {
        p2.push_back(p);
        p2.push_back(p);
      }
      args.push_back(C::astr("pad_type", "custom"));
      args.push_back(C::aints32("pad", p2));
    }
    out = cv.op("conv", std::move(args));
  } else {
    auto pad = expand_list(cv, n, cv.ints(n, "padding", {0}), sp, "padding");
    auto opad = expand_list(cv, n, cv.ints(n, "output_padding", {0}), sp, "output_padding");
    std::vector<int64_t> p2, extra(sp, 0);
    for (size_t k = 0; k < sp; ++k) {
      p2.push_back(pad[k]);
      int64_t e = pad[k] - opad[k];
      if (e < 0) {
        extra[k] = -e;
        e = 0;
      }
      p2.push_back(e);
    }
    args.push_back(C::astr("pad_type", "custom"));
    args.push_back(C::aints32("pad", p2));
    if (bias && std::any_of(extra.begin(), extra.end(), [](int64_t e) { return e > 0; })) args.erase(args.begin() + 2);
    out = cv.op("conv_transpose", std::move(args));
    if (std::any_of(extra.begin(), extra.end(), [](int64_t e) { return e > 0; })) {
      std::vector<int64_t> pads(4, 0);
      for (size_t k = 0; k < sp; ++k) {
        pads.push_back(0);
        pads.push_back(extra[k]);
      }
      out = cv.op("pad", {C::a("x", out), C::aints32("pad", pads), C::astr("mode", "constant"),
                          C::a("constant_val", Value::scalar_float(dt, 0))});
      // the added border holds only the bias
      if (bias)
        out = cv.op("add", {C::a("x", out), C::a("y", cv.e.per_channel(cv.cast(bias, dt), r))});
    }
  }
  if (unbatched) out = cv.op("squeeze", {C::a("x", out), C::aints32("axes", {0})});
  return out;
}

void conv_fn(C& cv, const json& n, bool transposed) {
  Var* x = input(cv, n);
  Var* w = cv.tensor(n, "weight");
  Var* bias = cv.opt_tensor(n, "bias");
  cv.out(n, convolution(cv, n, x, w, bias, transposed));
}

void conv1d_op(C& cv, const json& n) { conv_fn(cv, n, false); }

void conv_transpose1d(C& cv, const json& n) { conv_fn(cv, n, true); }

void convolution_op(C& cv, const json& n) { conv_fn(cv, n, cv.bo(n, "transposed", false)); }

}  // namespace

void register_conv(OpTable& t) {
  t.on({"aten.conv1d", "aten.conv2d", "aten.conv3d"}, conv1d_op);
  t.on({"aten.conv_transpose1d", "aten.conv_transpose2d", "aten.conv_transpose3d"}, conv_transpose1d);
  t.on({"aten.convolution", "aten._convolution"}, convolution_op);
}

}  // namespace torch_detail
}  // namespace milkit
