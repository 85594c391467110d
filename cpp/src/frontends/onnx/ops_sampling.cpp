// ONNX operators: resampling (GridSample, Resize, Upsample, Col2Im, MaxUnpool).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>

#include "milkit/compose/resize.h"
#include "milkit/compose/sampling.h"
#include "milkit/compose/scan.h"
#include "milkit/compose/windows.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

// The value named `value` of the string attribute `attr`, or a FormatError naming the node, the
// attribute and the values it takes.
template <typename T>
T pick(const NodeProto& n, const char* attr, const std::map<std::string, T>& values,
       const std::string& value) {
  auto it = values.find(value);
  if (it != values.end()) return it->second;
  std::string known;
  for (const auto& kv : values) known += (known.empty() ? "'" : ", '") + kv.first + "'";
  throw FormatError("ONNX " + node_label(n) + ": attribute '" + attr + "' is '" + value +
                    "', not one of " + known);
}

// Resize's string attributes: every value ONNX defines, by name; any other is refused (as
// onnxruntime refuses it), never guessed.
const std::map<std::string, compose::ResizeMode> modes = {{"nearest", compose::ResizeMode::Nearest},
                                                          {"linear", compose::ResizeMode::Linear},
                                                          {"cubic", compose::ResizeMode::Cubic}};
const std::map<std::string, compose::ResizeCoord> coords = {
    {"half_pixel", compose::ResizeCoord::HalfPixel},
    {"pytorch_half_pixel", compose::ResizeCoord::PytorchHalfPixel},
    {"align_corners", compose::ResizeCoord::AlignCorners},
    {"asymmetric", compose::ResizeCoord::Asymmetric},
    {"half_pixel_symmetric", compose::ResizeCoord::HalfPixelSymmetric},
    {"tf_crop_and_resize", compose::ResizeCoord::TfCropAndResize}};
const std::map<std::string, compose::NearestRound> roundings = {
    {"floor", compose::NearestRound::Floor},
    {"ceil", compose::NearestRound::Ceil},
    {"round_prefer_ceil", compose::NearestRound::RoundPreferCeil},
    {"round_prefer_floor", compose::NearestRound::RoundPreferFloor}};
const std::map<std::string, int> aspect_policies = {
    {"stretch", 0}, {"not_larger", 1}, {"not_smaller", 2}};

// Resizes a known-shape input one axis at a time by compose's taps, ONNX's arithmetic: every
// coordinate mode, rounding rule, cubic coefficient, exclude_outside and antialias exactly.
Var* resize_general(C& cv, const NodeProto& n, Var* x, const std::vector<int64_t>& in,
                    const std::vector<int64_t>& out, const std::vector<double>& scales,
                    const std::string& mode, const std::string& coord,
                    const std::string& nearest_mode, const std::vector<double>& roi) {
  using namespace compose;
  ResizeSpec s;
  s.convention = ResizeConvention::Onnx;
  s.mode = pick(n, "mode", modes, mode);
  s.coord = pick(n, "coordinate_transformation_mode", coords, coord);
  s.nearest = pick(n, "nearest_mode", roundings, nearest_mode);
  s.cubic_a = C::attr_float(n, "cubic_coeff_a", -0.75f);
  s.exclude_outside = C::attr_int(n, "exclude_outside", 0) != 0;
  s.antialias = C::attr_int(n, "antialias", 0) != 0;
  s.extrapolation = C::attr_float(n, "extrapolation_value", 0.0f);
  size_t r = in.size();
  for (size_t ax = 0; ax < r; ++ax)
    s.axes.push_back({static_cast<int64_t>(ax), in[ax], out[ax], scales[ax],
                      roi.empty() ? 0.0 : roi[ax], roi.empty() ? 1.0 : roi[ax + r]});
  return compose::resize(cv.em, x, s);
}

// ---- Resize whose output size is known only at run time ----
// compose::resize_at_run_time in ONNX's arithmetic: the source coordinates computed in fp32 as
// onnxruntime does, then the nearest source (nearest) or the two neighbours blended (linear).

// Whether resize_runtime takes this Resize (else its sizes must be known at conversion time).
bool runtime_sizes_ok(const NodeProto& n, Var* x, const std::string& mode,
                      const std::string& coord) {
  if (mode != "nearest" && mode != "linear") return false;
  if (mode == "linear" && (!is_float(C::dtype(x)) || C::attr_int(n, "antialias", 0) != 0))
    return false;
  return coord != "tf_crop_and_resize" &&
         C::attr_string(n, "keep_aspect_ratio_policy", "stretch") == "stretch";
}

// Resize to `sizes` (an int32 var, one value per entry of `axes` or per dim) or by `scales`
// known at conversion time, on an input whose size or output size is known only at run time.
void resize_runtime(C& cv, const NodeProto& n, Var* x, const std::vector<double>& scales,
                    Var* sizes, std::vector<int64_t> axes, const std::string& mode,
                    const std::string& coord, const std::string& nearest_mode) {
  int r = cv.rank(n, x);
  if (mode != "nearest" && mode != "linear")
    cv.fail(n, "mode '" + mode + "' needs the output size to be known at conversion time");
  if (mode == "linear" && !is_float(C::dtype(x)))
    cv.fail(n, "linear resizing of a non-float input needs the output size at conversion time");
  if (C::attr_int(n, "antialias", 0) != 0 && mode == "linear")
    cv.fail(n, "antialias needs the output size to be known at conversion time");
  if (C::attr_string(n, "keep_aspect_ratio_policy", "stretch") != "stretch")
    cv.fail(n, "keep_aspect_ratio_policy needs the output size to be known at conversion time");
  if (axes.empty())
    for (int a = 0; a < r; ++a) axes.push_back(a);
  size_t count = scales.size();
  if (sizes) {
    auto ss = C::static_shape(sizes);
    if (!ss || ss->size() != 1) cv.fail(n, "sizes must be a 1-D tensor of known length");
    count = static_cast<size_t>((*ss)[0]);
  }
  if (count != axes.size()) cv.fail(n, "sizes / scales must have one value per resized dim");
  compose::ResizeSpec s;
  s.convention = compose::ResizeConvention::Onnx;
  s.mode = pick(n, "mode", modes, mode);
  s.coord = pick(n, "coordinate_transformation_mode", coords, coord);
  s.nearest = pick(n, "nearest_mode", roundings, nearest_mode);
  Var* shape = cv.op("shape", {C::arg("x", x)});
  std::vector<compose::RunTimeAxis> rt;
  // sizes whose elements are the input's own dims (Shape -> Slice -> Concat) leave those as is
  const Value* known = sizes && sizes->value() && sizes->value()->is_symbolic() &&
                               sizes->value()->dims().size() == count
                           ? sizes->value().get()
                           : nullptr;
  const auto& xs = C::shape(x);
  auto element = [&](Var* v, int64_t k) {
    return cv.op("gather",
                 {C::arg("x", v), C::arg("indices", Value::scalar_int(DataType::Int32, k))});
  };
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t a = axes[k];
    Var* in = element(shape, a);
    if (sizes) {
      if (known && known->dims()[k] == xs[static_cast<size_t>(a)]) continue;  // same size: as is
      rt.push_back({a, in, element(sizes, static_cast<int64_t>(k)), 0});
    } else {
      if (scales[k] == 1.0) continue;
      Var* o = binary(cv, "mul", cv.cast(in, DataType::Float32), fconst(cv, scales[k]));
      rt.push_back({a, in, cv.cast(cv.em.un("floor", o), DataType::Int32), scales[k]});
    }
  }
  cv.out(n, 0, cv.op("identity", {C::arg("x", compose::resize_at_run_time(cv.em, x, s, rt))}));
}

void resize(C& cv, const NodeProto& n, Var* x, std::vector<double> scales,
            std::vector<int64_t> sizes, const std::string& mode, std::string coord,
            const std::string& nearest_mode, std::vector<double> roi) {
  pick(n, "mode", modes, mode);
  pick(n, "coordinate_transformation_mode", coords, coord);
  pick(n, "nearest_mode", roundings, nearest_mode);
  pick(n, "keep_aspect_ratio_policy", aspect_policies,
       C::attr_string(n, "keep_aspect_ratio_policy", "stretch"));
  int r = cv.rank(n, x);
  auto xs = C::static_shape(x);
  auto axes = C::attr_ints(n, "axes");
  for (auto& a : axes) a = cv.axis(n, a, r);
  // scales / sizes / roi given for `axes` only: spread them over every dim
  auto spread = [&](auto v, auto fill) {
    if (axes.empty() || v.empty()) return v;
    decltype(v) full(static_cast<size_t>(r), fill);
    for (size_t i = 0; i < axes.size() && i < v.size(); ++i)
      full[static_cast<size_t>(axes[i])] = v[i];
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
  if (!scales.empty() && scales.size() != static_cast<size_t>(r))
    cv.fail(n, "scales must have one value per dim");
  if (!sizes.empty() && sizes.size() != static_cast<size_t>(r))
    cv.fail(n, "sizes must have one value per dim");
  if (!xs) {
    // unknown input size: the integer-scale nearest upsampling Core ML has an op for
    if (mode == "nearest" && r == 4 && !scales.empty() && scales[0] == 1 && scales[1] == 1 &&
        scales[2] == std::floor(scales[2]) && scales[3] == std::floor(scales[3]) &&
        (coord == "asymmetric" || nearest_mode == "floor"))
      return cv.out(
          n, 0,
          cv.op("upsample_nearest_neighbor",
                {C::arg("x", x), C::arg_i32("scale_factor_height", static_cast<int64_t>(scales[2])),
                 C::arg_i32("scale_factor_width", static_cast<int64_t>(scales[3]))}));
    Var* sz =
        sizes.empty()
            ? nullptr
            : cv.c(Value::from_ints(DataType::Int32, {static_cast<int64_t>(sizes.size())}, sizes));
    return resize_runtime(cv, n, x, scales, sz, sizes.empty() ? std::vector<int64_t>{} : axes, mode,
                          coord, nearest_mode);
  }
  std::vector<int64_t> out(static_cast<size_t>(r));
  if (!sizes.empty()) {
    std::string policy = C::attr_string(n, "keep_aspect_ratio_policy", "stretch");
    scales.assign(static_cast<size_t>(r), 1.0);
    if (policy == "stretch") {
      for (int i = 0; i < r; ++i)
        scales[static_cast<size_t>(i)] =
            static_cast<double>(sizes[static_cast<size_t>(i)]) / (*xs)[static_cast<size_t>(i)];
      out = sizes;
    } else {
      double sc = policy == "not_larger" ? 1e300 : 0;
      for (int i = 0; i < r; ++i) {
        if (!axes.empty() && std::find(axes.begin(), axes.end(), i) == axes.end()) continue;
        double v =
            static_cast<double>(sizes[static_cast<size_t>(i)]) / (*xs)[static_cast<size_t>(i)];
        sc = policy == "not_larger" ? std::min(sc, v) : std::max(sc, v);
      }
      for (int i = 0; i < r; ++i) {
        bool resized = axes.empty() || std::find(axes.begin(), axes.end(), i) != axes.end();
        scales[static_cast<size_t>(i)] = resized ? sc : 1.0;
        out[static_cast<size_t>(i)] =
            resized ? static_cast<int64_t>(std::round(sc * (*xs)[static_cast<size_t>(i)]))
                    : (*xs)[static_cast<size_t>(i)];
      }
    }
  } else {
    for (int i = 0; i < r; ++i)
      out[static_cast<size_t>(i)] = static_cast<int64_t>(
          std::floor((*xs)[static_cast<size_t>(i)] * scales[static_cast<size_t>(i)]));
  }
  // Core ML's own op where it is exactly the same: nearest, asymmetric + floor, integer scales
  bool int_up = r == 4 && scales[0] == 1 && scales[1] == 1 && scales[2] >= 1 && scales[3] >= 1 &&
                scales[2] == std::floor(scales[2]) && scales[3] == std::floor(scales[3]) &&
                out[2] == (*xs)[2] * static_cast<int64_t>(scales[2]) &&
                out[3] == (*xs)[3] * static_cast<int64_t>(scales[3]);
  if (mode == "nearest" && int_up && is_float(C::dtype(x)) &&
      (coord == "asymmetric" && (nearest_mode == "floor" || scales[2] == 1)))
    return cv.out(
        n, 0,
        cv.op("upsample_nearest_neighbor",
              {C::arg("x", x), C::arg_i32("scale_factor_height", static_cast<int64_t>(scales[2])),
               C::arg_i32("scale_factor_width", static_cast<int64_t>(scales[3]))}));
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    cv.fail(n, "mode '" + mode + "' is not supported");
  cv.out(n, 0, resize_general(cv, n, x, *xs, out, scales, mode, coord, nearest_mode, roi));
}

// Resize-10: scales as input 1, asymmetric coordinates, nearest rounds down.
void resize_v10(C& cv, const NodeProto& n) {
  resize(cv, n, cv.in(n, 0), cv.doubles(n, 1, "scales"), {}, C::attr_string(n, "mode", "nearest"),
         "asymmetric", "floor", {});
}

// Resize from opset 11: roi, scales and sizes as inputs (sizes possibly known only at run time).
void resize_v11(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  std::string mode = C::attr_string(n, "mode", "nearest");
  std::string coord = C::attr_string(n, "coordinate_transformation_mode", "half_pixel");
  std::string nm = C::attr_string(n, "nearest_mode", "round_prefer_floor");
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes;
  if (coord == "tf_crop_and_resize") roi = cv.doubles(n, 1, "roi");
  if (C::has(n, 3) && !cv.value(n, 3) && runtime_sizes_ok(n, x, mode, coord)) {
    Var* sz = cv.in(n, 3);
    if (C::dtype(sz) != DataType::Int32) sz = cv.cast(sz, DataType::Int32);
    pick(n, "mode", modes, mode);
    pick(n, "coordinate_transformation_mode", coords, coord);
    pick(n, "nearest_mode", roundings, nm);
    std::vector<int64_t> axes = C::attr_ints(n, "axes");
    int r = cv.rank(n, x);
    for (auto& a : axes) a = cv.axis(n, a, r);
    return resize_runtime(cv, n, x, {}, sz, axes, mode, coord, nm);
  }
  if (C::has(n, 3))
    sizes = cv.ints(n, 3, "sizes");
  else if (C::has(n, 2))
    scales = cv.doubles(n, 2, "scales");
  if (scales.empty() && sizes.empty()) cv.fail(n, "needs scales or sizes");
  resize(cv, n, x, scales, sizes, mode, coord, nm, roi);
}

// Upsample: scales as an attribute (before opset 9) or input 1, asymmetric, nearest rounds down.
void upsample(C& cv, const NodeProto& n, std::vector<double> scales) {
  resize(cv, n, cv.in(n, 0), scales, {}, C::attr_string(n, "mode", "nearest"), "asymmetric",
         "floor", {});
}

void upsample_v7(C& cv, const NodeProto& n) {
  std::vector<double> scales;
  for (float f : C::attr_floats(n, "scales")) scales.push_back(f);
  upsample(cv, n, scales);
}

void upsample_v9(C& cv, const NodeProto& n) { upsample(cv, n, cv.doubles(n, 1, "scales")); }

// GridSample; `default_mode` is the mode's default: "bilinear" before opset 20, "linear" from it.
void grid_sample(C& cv, const NodeProto& n, const char* default_mode) {
  std::string mode = C::attr_string(n, "mode", default_mode);
  compose::GridSampleSpec s;
  s.convention = compose::GridConvention::Onnx;
  if (mode == "bilinear" || mode == "linear")
    s.mode = compose::SampleMode::Linear;
  else if (mode == "bicubic" || mode == "cubic")
    s.mode = compose::SampleMode::Cubic;
  else if (mode == "nearest")
    s.mode = compose::SampleMode::Nearest;
  else
    cv.fail(n, "mode '" + mode + "' is not supported");
  std::string pm = C::attr_string(n, "padding_mode", "zeros");
  if (pm == "zeros")
    s.padding = compose::SamplePadding::Zeros;
  else if (pm == "border")
    s.padding = compose::SamplePadding::Border;
  else if (pm == "reflection")
    s.padding = compose::SamplePadding::Reflection;
  else
    cv.fail(n, "padding_mode '" + pm + "' is not supported");
  s.align_corners = C::attr_int(n, "align_corners", 0) != 0;
  cv.out(n, 0, compose::grid_sample(cv.em, cv.in(n, 0), cv.in(n, 1), s));
}

void max_unpool(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  auto xs = C::static_shape(x);
  if (!xs || xs->size() < 3) cv.fail(n, "needs the input's shape to be known");
  size_t sp = xs->size() - 2;
  auto kernel = C::attr_ints(n, "kernel_shape");
  auto strides = C::attr_ints(n, "strides", std::vector<int64_t>(sp, 1));
  auto pads = C::attr_ints(n, "pads", std::vector<int64_t>(2 * sp, 0));
  if (kernel.size() != sp || strides.size() != sp || pads.size() != 2 * sp)
    cv.fail(n, "kernel_shape, strides and pads need one value (pads two) per spatial dim");
  std::vector<int64_t> out_sp;
  for (size_t i = 0; i < sp; ++i)
    out_sp.push_back(((*xs)[2 + i] - 1) * strides[i] - (pads[i] + pads[i + sp]) + kernel[i]);
  Var* y = compose::max_unpool(cv.em, x, cv.in(n, 1), out_sp, compose::UnpoolIndices::Tensor);
  if (!C::has(n, 2)) return cv.out(n, 0, y);
  // output_shape: zeros after the unpooled values along each dim
  auto shape = *C::static_shape(y);
  auto os = cv.ints(n, 2, "output_shape");
  if (os.size() != shape.size()) cv.fail(n, "output_shape needs one value per dim");
  std::vector<int64_t> lo(shape.size(), 0), hi(shape.size(), 0);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (os[i] < shape[i]) cv.fail(n, "output_shape is smaller than the unpooled shape");
    hi[i] = os[i] - shape[i];
  }
  DataType dt = C::dtype(y);
  Var* f = is_float(dt) ? y : cv.cast(y, DataType::Float32);  // MIL pads floats only
  cv.out(n, 0, cv.cast(cv.em.pad_trailing(f, lo, hi, 0.0), dt));
}

void col2im(C& cv, const NodeProto& n) {
  auto img = cv.ints(n, 1, "image_shape");
  auto blk = cv.ints(n, 2, "block_shape");
  size_t sp = img.size();
  if (blk.size() != sp) cv.fail(n, "image_shape and block_shape need the same length");
  compose::Window w;
  w.kernel = blk;
  w.dilation = C::attr_ints(n, "dilations", std::vector<int64_t>(sp, 1));
  w.stride = C::attr_ints(n, "strides", std::vector<int64_t>(sp, 1));
  auto pads = C::attr_ints(n, "pads", std::vector<int64_t>(2 * sp, 0));
  if (pads.size() != 2 * sp) cv.fail(n, "pads needs two values per spatial dim");
  w.pad_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(sp));
  w.pad_end.assign(pads.begin() + static_cast<std::ptrdiff_t>(sp), pads.end());
  cv.out(n, 0, compose::col2im(cv.em, cv.in(n, 0), img, w));
}

}  // namespace

void register_sampling(OpTable& t) {
  t.on("Resize", 10, resize_v10);
  t.on("Resize", 11, resize_v11);
  t.on("Upsample", 7, upsample_v7);
  t.on("Upsample", 9, upsample_v9);
  t.on("GridSample", 16, [](C& cv, const NodeProto& n) { grid_sample(cv, n, "bilinear"); });
  t.on("GridSample", 20, [](C& cv, const NodeProto& n) { grid_sample(cv, n, "linear"); });
  t.on("MaxUnpool", 1, max_unpool);
  t.on("Col2Im", 1, col2im);
}

}  // namespace onnx_detail
}  // namespace milkit
