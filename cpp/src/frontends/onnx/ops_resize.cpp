// ONNX Resize and Upsample on NCHW images -> MIL's upsample_* / resize_* ops.
#include <cmath>

#include "converter.h"

namespace milkit {
namespace onnx_detail {

namespace {

using onnx::NodeProto;
using C = Converter;

// Resizes the last two dims of a rank-4 input. `scales` (4 values) or `sizes` (4 values) given.
void resize2d(C& cv, const NodeProto& n, Var* x, std::vector<double> scales, std::vector<int64_t> sizes,
              const std::string& mode, const std::string& coord, const std::string& nearest_mode) {
  auto xs = C::static_shape(x);
  if (cv.rank(n, x) != 4) cv.fail(n, "only 4-D (N, C, H, W) inputs are supported");
  if (!scales.empty() && scales.size() != 4) cv.fail(n, "scales must have one value per dim");
  if (!sizes.empty() && sizes.size() != 4) cv.fail(n, "sizes must have one value per dim");
  if (!scales.empty() && (scales[0] != 1 || scales[1] != 1)) cv.fail(n, "resizing N or C is not supported");
  if (!sizes.empty() && xs && (sizes[0] != (*xs)[0] || sizes[1] != (*xs)[1])) cv.fail(n, "resizing N or C is not supported");
  if (sizes.empty() && xs) sizes = {(*xs)[0], (*xs)[1], static_cast<int64_t>(std::floor((*xs)[2] * scales[2])),
                                    static_cast<int64_t>(std::floor((*xs)[3] * scales[3]))};
  if (scales.empty() && xs)
    scales = {1, 1, static_cast<double>(sizes[2]) / (*xs)[2], static_cast<double>(sizes[3]) / (*xs)[3]};
  bool int_scales = !scales.empty() && scales[2] == std::floor(scales[2]) && scales[3] == std::floor(scales[3]) &&
                    scales[2] >= 1 && scales[3] >= 1;
  if (mode == "nearest") {
    if (coord == "asymmetric" && nearest_mode == "floor" && int_scales)
      return cv.out(n, 0, cv.op("upsample_nearest_neighbor",
                                {C::a("x", x), C::ai32("scale_factor_height", static_cast<int64_t>(scales[2])),
                                 C::ai32("scale_factor_width", static_cast<int64_t>(scales[3]))}));
    if (coord == "asymmetric" && nearest_mode == "floor" && !scales.empty())
      return cv.out(n, 0, cv.op("upsample_nearest_neighbor",
                                {C::a("x", x), C::af32("scale_factor_height", scales[2]),
                                 C::af32("scale_factor_width", scales[3])}));
    cv.fail(n, "nearest resizing with coordinate_transformation_mode '" + coord + "' and nearest_mode '" +
                   nearest_mode + "' is not supported (asymmetric + floor is)");
  }
  if (mode != "linear") cv.fail(n, "mode '" + mode + "' is not supported (nearest and linear are)");
  if (sizes.empty()) cv.fail(n, "linear resizing needs the input's H and W to be known");
  std::string sm;
  if (coord == "half_pixel" || coord == "pytorch_half_pixel") sm = "UNALIGN_CORNERS";
  else if (coord == "align_corners") sm = "STRICT_ALIGN_CORNERS";
  else if (coord == "asymmetric") sm = "DEFAULT";
  else cv.fail(n, "linear resizing with coordinate_transformation_mode '" + coord + "' is not supported");
  if (coord == "pytorch_half_pixel" && (sizes[2] == 1 || sizes[3] == 1))
    cv.fail(n, "pytorch_half_pixel to an output size of 1 is not supported");
  cv.out(n, 0, cv.op("resize_bilinear", {C::a("x", x), C::ai32("target_size_height", sizes[2]),
                                         C::ai32("target_size_width", sizes[3]), C::astr("sampling_mode", sm)}));
}

}  // namespace

void register_resize(OpTable& t) {
  t["Resize"] = [](C& cv, const NodeProto& n) {
    Var* x = cv.in(n, 0);
    std::string mode = C::as(n, "mode", "nearest");
    std::string coord = C::as(n, "coordinate_transformation_mode", "half_pixel");
    std::string nm = C::as(n, "nearest_mode", "round_prefer_floor");
    if (C::ai(n, "antialias", 0) != 0) cv.fail(n, "antialias is not supported");
    if (C::attr(n, "axes")) cv.fail(n, "the axes attribute is not supported");
    std::vector<double> scales;
    std::vector<int64_t> sizes;
    if (cv.opset < 11) {
      scales = cv.doubles(n, 1, "scales");
      coord = "asymmetric";
      nm = "floor";
    } else {
      if (C::has(n, 3)) sizes = cv.ints(n, 3, "sizes");
      else if (C::has(n, 2)) scales = cv.doubles(n, 2, "scales");
      if (scales.empty() && sizes.empty()) cv.fail(n, "needs scales or sizes");
      if (!sizes.empty() && C::as(n, "keep_aspect_ratio_policy", "stretch") != "stretch")
        cv.fail(n, "keep_aspect_ratio_policy other than 'stretch' is not supported");
    }
    resize2d(cv, n, x, scales, sizes, mode, coord, nm);
  };
  t["Upsample"] = [](C& cv, const NodeProto& n) {
    std::vector<double> scales;
    if (cv.opset < 9) {
      for (float f : C::afloats(n, "scales")) scales.push_back(f);
    } else {
      scales = cv.doubles(n, 1, "scales");
    }
    resize2d(cv, n, cv.in(n, 0), scales, {}, C::as(n, "mode", "nearest"), "asymmetric", "floor");
  };
}

}  // namespace onnx_detail
}  // namespace milkit
