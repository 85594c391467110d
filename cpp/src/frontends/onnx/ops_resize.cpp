// ONNX Resize and Upsample on NCHW images -> MIL's upsample_* / resize_* ops.
#include <algorithm>
#include <cmath>

#include "milkit/compose/resize.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

// Resizes a known-shape input one axis at a time by compose's taps, ONNX's arithmetic: every
// coordinate mode, rounding rule, cubic coefficient, exclude_outside and antialias exactly.
Var* resize_general(C& cv, const NodeProto& n, Var* x, const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                    const std::vector<double>& scales, const std::string& mode, const std::string& coord,
                    const std::string& nearest_mode, const std::vector<double>& roi) {
  using namespace compose;
  ResizeSpec s;
  s.convention = ResizeConvention::Onnx;
  s.mode = mode == "nearest" ? ResizeMode::Nearest : mode == "linear" ? ResizeMode::Linear : ResizeMode::Cubic;
  if (coord == "half_pixel") s.coord = ResizeCoord::HalfPixel;
  else if (coord == "pytorch_half_pixel") s.coord = ResizeCoord::PytorchHalfPixel;
  else if (coord == "align_corners") s.coord = ResizeCoord::AlignCorners;
  else if (coord == "asymmetric") s.coord = ResizeCoord::Asymmetric;
  else if (coord == "half_pixel_symmetric") s.coord = ResizeCoord::HalfPixelSymmetric;
  else s.coord = ResizeCoord::TfCropAndResize;
  s.nearest = nearest_mode == "floor" ? NearestRound::Floor
              : nearest_mode == "ceil" ? NearestRound::Ceil
              : nearest_mode == "round_prefer_ceil" ? NearestRound::RoundPreferCeil
                                                    : NearestRound::RoundPreferFloor;
  s.cubic_a = C::attr_float(n, "cubic_coeff_a", -0.75f);
  s.exclude_outside = C::attr_int(n, "exclude_outside", 0) != 0;
  s.antialias = C::attr_int(n, "antialias", 0) != 0;
  s.extrapolation = C::attr_float(n, "extrapolation_value", 0.0f);
  size_t r = in.size();
  for (size_t ax = 0; ax < r; ++ax)
    s.axes.push_back({static_cast<int64_t>(ax), in[ax], out[ax], scales[ax], roi.empty() ? 0.0 : roi[ax],
                      roi.empty() ? 1.0 : roi[ax + r]});
  return compose::resize(cv.em, x, s);
}

void resize(C& cv, const NodeProto& n, Var* x, std::vector<double> scales, std::vector<int64_t> sizes,
            const std::string& mode, std::string coord, const std::string& nearest_mode, std::vector<double> roi) {
  int r = cv.rank(n, x);
  auto xs = C::static_shape(x);
  auto axes = C::attr_ints(n, "axes");
  for (auto& a : axes) a = cv.axis(n, a, r);
  // scales / sizes / roi given for `axes` only: spread them over every dim
  auto spread = [&](auto v, auto fill) {
    if (axes.empty() || v.empty()) return v;
    decltype(v) full(static_cast<size_t>(r), fill);
    for (size_t i = 0; i < axes.size() && i < v.size(); ++i) full[static_cast<size_t>(axes[i])] = v[i];
    return full;
  };
  if (!axes.empty()) {
    if (!sizes.empty() && xs) {
      std::vector<int64_t> full = *xs;
      for (size_t i = 0; i < axes.size(); ++i) full[static_cast<size_t>(axes[i])] = sizes[i];
      sizes = full;
    }
    scales = spread(scales, 1.0);
    if (!roi.empty()) {
      std::vector<double> full(2 * static_cast<size_t>(r), 0.0);
      for (int i = 0; i < r; ++i) full[static_cast<size_t>(r + i)] = 1.0;
      for (size_t i = 0; i < axes.size(); ++i) {
        full[static_cast<size_t>(axes[i])] = roi[i];
        full[static_cast<size_t>(r + axes[i])] = roi[i + axes.size()];
      }
      roi = full;
    }
  }
  if (!scales.empty() && scales.size() != static_cast<size_t>(r)) cv.fail(n, "scales must have one value per dim");
  if (!sizes.empty() && sizes.size() != static_cast<size_t>(r)) cv.fail(n, "sizes must have one value per dim");
  if (!xs) {
    // unknown input size: the integer-scale nearest upsampling Core ML has an op for
    if (mode == "nearest" && r == 4 && !scales.empty() && scales[0] == 1 && scales[1] == 1 &&
        scales[2] == std::floor(scales[2]) && scales[3] == std::floor(scales[3]) &&
        (coord == "asymmetric" || nearest_mode == "floor"))
      return cv.out(n, 0, cv.op("upsample_nearest_neighbor", {C::arg("x", x), C::arg_i32("scale_factor_height", static_cast<int64_t>(scales[2])),
                                                                C::arg_i32("scale_factor_width", static_cast<int64_t>(scales[3]))}));
    cv.fail(n, "resizing needs the input's shape to be known");
  }
  std::vector<int64_t> out(static_cast<size_t>(r));
  if (!sizes.empty()) {
    std::string policy = C::attr_string(n, "keep_aspect_ratio_policy", "stretch");
    scales.assign(static_cast<size_t>(r), 1.0);
    if (policy == "stretch") {
      for (int i = 0; i < r; ++i) scales[static_cast<size_t>(i)] = static_cast<double>(sizes[static_cast<size_t>(i)]) / (*xs)[static_cast<size_t>(i)];
      out = sizes;
    } else {
      double sc = policy == "not_larger" ? 1e300 : 0;
      for (int i = 0; i < r; ++i) {
        if (!axes.empty() && std::find(axes.begin(), axes.end(), i) == axes.end()) continue;
        double v = static_cast<double>(sizes[static_cast<size_t>(i)]) / (*xs)[static_cast<size_t>(i)];
        sc = policy == "not_larger" ? std::min(sc, v) : std::max(sc, v);
      }
      for (int i = 0; i < r; ++i) {
        bool resized = axes.empty() || std::find(axes.begin(), axes.end(), i) != axes.end();
        scales[static_cast<size_t>(i)] = resized ? sc : 1.0;
        out[static_cast<size_t>(i)] = resized ? static_cast<int64_t>(std::round(sc * (*xs)[static_cast<size_t>(i)])) : (*xs)[static_cast<size_t>(i)];
      }
    }
  } else {
    for (int i = 0; i < r; ++i) out[static_cast<size_t>(i)] = static_cast<int64_t>(std::floor((*xs)[static_cast<size_t>(i)] * scales[static_cast<size_t>(i)]));
  }
  // Core ML's own op where it is exactly the same: nearest, asymmetric + floor, integer scales
  bool int_up = r == 4 && scales[0] == 1 && scales[1] == 1 && scales[2] >= 1 && scales[3] >= 1 &&
                scales[2] == std::floor(scales[2]) && scales[3] == std::floor(scales[3]) &&
                out[2] == (*xs)[2] * static_cast<int64_t>(scales[2]) && out[3] == (*xs)[3] * static_cast<int64_t>(scales[3]);
  if (mode == "nearest" && int_up && is_float(C::dtype(x)) &&
      (coord == "asymmetric" && (nearest_mode == "floor" || scales[2] == 1)))
    return cv.out(n, 0, cv.op("upsample_nearest_neighbor", {C::arg("x", x), C::arg_i32("scale_factor_height", static_cast<int64_t>(scales[2])),
                                                              C::arg_i32("scale_factor_width", static_cast<int64_t>(scales[3]))}));
  if (mode != "nearest" && mode != "linear" && mode != "cubic") cv.fail(n, "mode '" + mode + "' is not supported");
  cv.out(n, 0, resize_general(cv, n, x, *xs, out, scales, mode, coord, nearest_mode, roi));
}

}  // namespace

namespace {

void resize_op(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  std::string mode = C::attr_string(n, "mode", "nearest");
  std::string coord = C::attr_string(n, "coordinate_transformation_mode", "half_pixel");
  std::string nm = C::attr_string(n, "nearest_mode", "round_prefer_floor");
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes;
  if (cv.opset < 11) {
    scales = cv.doubles(n, 1, "scales");
    coord = "asymmetric";
    nm = "floor";
  } else {
    if (coord == "tf_crop_and_resize") roi = cv.doubles(n, 1, "roi");
    if (C::has(n, 3)) sizes = cv.ints(n, 3, "sizes");
    else if (C::has(n, 2)) scales = cv.doubles(n, 2, "scales");
    if (scales.empty() && sizes.empty()) cv.fail(n, "needs scales or sizes");
  }
  resize(cv, n, x, scales, sizes, mode, coord, nm, roi);
}

void upsample(C& cv, const NodeProto& n) {
  std::vector<double> scales;
  if (cv.opset < 9) {
    for (float f : C::attr_floats(n, "scales")) scales.push_back(f);
  } else {
    scales = cv.doubles(n, 1, "scales");
  }
  resize(cv, n, cv.in(n, 0), scales, {}, C::attr_string(n, "mode", "nearest"), "asymmetric", "floor", {});
}

}  // namespace

void register_resize(OpTable& t) {
  t.on("Resize", 1, resize_op);
  t.on("Upsample", 1, upsample);
}

}  // namespace onnx_detail
}  // namespace milkit
