// ONNX Resize and Upsample on NCHW images -> MIL's upsample_* / resize_* ops.
#include <algorithm>
#include <cmath>

#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

// The source coordinate of output index i along one axis (ONNX's coordinate_transformation_mode).
double source_coord(const std::string& mode, int64_t i, int64_t in, int64_t out, double scale, double roi_lo,
                    double roi_hi) {
  double x = static_cast<double>(i);
  if (mode == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (mode == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  // ONNX's length_resized is in * scale, not rounded
  double len = static_cast<double>(in) * scale;
  if (mode == "align_corners") return len == 1 ? 0.0 : x * static_cast<double>(in - 1) / (len - 1);
  if (mode == "asymmetric") return x / scale;
  if (mode == "half_pixel_symmetric") {
    double adj = static_cast<double>(out) / (scale * static_cast<double>(in));
    double center = static_cast<double>(in) / 2.0;
    return center * (1 - adj) + (x + 0.5) / scale - 0.5;
  }
  // tf_crop_and_resize
  if (out > 1) return roi_lo * (in - 1) + x * (roi_hi - roi_lo) * (in - 1) / static_cast<double>(out - 1);
  return 0.5 * (roi_lo + roi_hi) * (in - 1);
}

int64_t nearest_index(const std::string& mode, double x) {
  double f = std::floor(x);
  if (mode == "floor") return static_cast<int64_t>(f);
  if (mode == "ceil") return static_cast<int64_t>(std::ceil(x));
  if (x - f == 0.5) return static_cast<int64_t>(mode == "round_prefer_ceil" ? f + 1 : f);
  return static_cast<int64_t>(std::round(x));
}

// ONNX's cubic convolution weights for distance t (|t| < 2).
double cubic(double t, double a) {
  t = std::fabs(t);
  if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
  if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
  return 0;
}

// Resizes a known-shape input one axis at a time: each output element is a weighted sum of
// gathered input elements (1 tap nearest, 2 linear, 4 cubic), with indices and weights computed
// here from ONNX's formulas, so every coordinate mode and rounding rule is exact.
Var* resize_general(C& cv, const NodeProto& n, Var* x, const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                    const std::vector<double>& scales, const std::string& mode, const std::string& coord,
                    const std::string& nearest_mode, const std::vector<double>& roi) {
  DataType dt = C::dtype(x);
  bool interp = mode != "nearest";
  Var* y = interp && !is_float(dt) ? cv.cast(x, DataType::Float32) : x;
  DataType ft = C::dtype(y);
  double a = C::attr_float(n, "cubic_coeff_a", -0.75f);
  bool exclude = C::attr_int(n, "exclude_outside", 0) != 0;
  double extrapolation = C::attr_float(n, "extrapolation_value", 0.0f);
  int r = static_cast<int>(in.size());
  for (int ax = 0; ax < r; ++ax) {
    int64_t L = in[ax], M = out[ax];
    double s = scales[ax];
    double lo = roi.empty() ? 0 : roi[ax], hi = roi.empty() ? 1 : roi[ax + r];
    if (L == M && s == 1.0 && coord != "tf_crop_and_resize") continue;
    int taps = mode == "nearest" ? 1 : mode == "linear" ? 2 : 4;
    // antialiased downsampling: the kernel stretched by 1 / scale (more taps, ONNX's reference)
    bool aa = C::attr_int(n, "antialias", 0) != 0 && mode != "nearest" && s < 1.0;
    if (aa) taps = static_cast<int>(2 - 2 * (std::floor((mode == "linear" ? -1.0 : -2.0) / s) + 1));
    std::vector<std::vector<int64_t>> idx(static_cast<size_t>(taps), std::vector<int64_t>(static_cast<size_t>(M)));
    std::vector<std::vector<double>> w(static_cast<size_t>(taps), std::vector<double>(static_cast<size_t>(M), 0.0));
    std::vector<int64_t> outside(static_cast<size_t>(M), 0);
    for (int64_t i = 0; i < M; ++i) {
      double xo = source_coord(coord, i, L, M, s, lo, hi);
      if (coord == "tf_crop_and_resize" && (xo < 0 || xo > L - 1)) outside[static_cast<size_t>(i)] = 1;
      if (mode == "nearest") {
        idx[0][static_cast<size_t>(i)] = std::clamp<int64_t>(nearest_index(nearest_mode, xo), 0, L - 1);
        w[0][static_cast<size_t>(i)] = 1;
        continue;
      }
      double f = std::floor(xo), t = xo - f;
      int64_t i0 = static_cast<int64_t>(f);
      if (aa) {
        // taps i0 + off (off from 1 - taps / 2), i0 the pixel left of xo (xo - 1 when xo is whole)
        double ratio = t == 0 ? 1.0 : t;
        int64_t left = t == 0 ? i0 - 1 : i0;
        double sum = 0;
        for (int k = 0; k < taps; ++k) {
          int64_t off = 1 - taps / 2 + k, j = left + off;
          double d = s * (static_cast<double>(off) - ratio);
          double wk = mode == "linear" ? std::clamp(1 - std::fabs(d), 0.0, 1.0) : cubic(d, a);
          if (exclude && (j < 0 || j >= L)) wk = 0;
          idx[static_cast<size_t>(k)][static_cast<size_t>(i)] = std::clamp<int64_t>(j, 0, L - 1);
          w[static_cast<size_t>(k)][static_cast<size_t>(i)] = wk;
          sum += wk;
        }
        if (sum != 0)
          for (int k = 0; k < taps; ++k) w[static_cast<size_t>(k)][static_cast<size_t>(i)] /= sum;
        continue;
      }
      if (mode == "linear") {
        idx[0][static_cast<size_t>(i)] = std::clamp<int64_t>(i0, 0, L - 1);
        idx[1][static_cast<size_t>(i)] = std::clamp<int64_t>(i0 + 1, 0, L - 1);
        w[0][static_cast<size_t>(i)] = 1 - t;
        w[1][static_cast<size_t>(i)] = t;
        continue;
      }
      double sum = 0;
      for (int k = 0; k < 4; ++k) {
        int64_t j = i0 - 1 + k;
        double wk = cubic(t - (k - 1), a);
        if (exclude && (j < 0 || j >= L)) wk = 0;
        idx[static_cast<size_t>(k)][static_cast<size_t>(i)] = std::clamp<int64_t>(j, 0, L - 1);
        w[static_cast<size_t>(k)][static_cast<size_t>(i)] = wk;
        sum += wk;
      }
      if (exclude && sum != 0)
        for (int k = 0; k < 4; ++k) w[static_cast<size_t>(k)][static_cast<size_t>(i)] /= sum;
    }
    std::vector<int64_t> wshape(static_cast<size_t>(r), 1);
    wshape[static_cast<size_t>(ax)] = M;
    Var* acc = nullptr;
    for (int k = 0; k < taps; ++k) {
      Var* g = cv.op("gather", {C::arg("x", y), C::arg("indices", Value::int_list(idx[static_cast<size_t>(k)])), C::arg_i32("axis", ax)});
      if (taps > 1) g = cv.op("mul", {C::arg("x", g), C::arg("y", Value::from_doubles(ft, wshape, w[static_cast<size_t>(k)]))});
      acc = acc ? cv.op("add", {C::arg("x", acc), C::arg("y", g)}) : g;
    }
    if (std::any_of(outside.begin(), outside.end(), [](int64_t v) { return v != 0; })) {
      Var* mask = cv.c(Value::from_ints(DataType::Bool, wshape, outside));
      Value ev = is_float(C::dtype(acc)) ? Value::scalar_float(C::dtype(acc), extrapolation) : Value::scalar_int(C::dtype(acc), static_cast<int64_t>(extrapolation));
      acc = cv.op("select", {C::arg("cond", mask), C::arg("a", ev), C::arg("b", acc)});
    }
    y = acc;
  }
  if (y == x) y = cv.op("identity", {C::arg("x", x)});
  if (C::dtype(y) != dt) {
    if (!is_float(dt)) y = cv.op("round", {C::arg("x", y)});
    y = cv.cast(y, dt);
  }
  return y;
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
