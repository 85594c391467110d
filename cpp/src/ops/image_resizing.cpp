// image resizing ops (coremltools iOS15/16/17 image_resizing.py): upsample_nearest_neighbor,
// upsample_bilinear, resize_nearest_neighbor, resize_bilinear, resize (iOS17), crop, crop_resize,
// resample, affine. coremltools has no value inference for any of them, so neither has milkit.
//
// Where milkit is stricter than coremltools (each pinned in tests/python/test_image_resizing.py):
// negative output sizes (a negative scale, target size or crop amount, a negative `shape` element
// of resize) are rejected instead of typed as negative dims; resample's mode strings are checked
// at build time (coremltools checks none); affine's transform_matrix must have 1 or B rows; a
// crop_resize roi must be [N, 1, 4 | 5, 1, 1], and with 5 coordinates (a batch index per box) the
// output is [N, 1, C, h, w] as the op's documentation and Core ML's CropResize layer define it
// (coremltools types it [N, B, C, h, w], which only agrees when B is 1).
#include <algorithm>
#include <cctype>
#include <cmath>

#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"
#include "milkit/ops/conv_util.h"

namespace milkit {

namespace {

const char* const kSamplingModes[] = {"STRICT_ALIGN_CORNERS", "ALIGN_CORNERS", "UNALIGN_CORNERS",
                                      "DEFAULT", "OFFSET_CORNERS"};
const char* const kBoxModes[] = {"CORNERS_HEIGHT_FIRST", "CORNERS_WIDTH_FIRST",
                                 "CENTER_SIZE_HEIGHT_FIRST", "CENTER_SIZE_WIDTH_FIRST"};

template <size_t N>
bool one_of(const std::string& s, const char* const (&opts)[N]) {
  return std::any_of(std::begin(opts), std::end(opts), [&](const char* o) { return s == o; });
}

template <size_t N>
std::string options(const char* const (&opts)[N]) {
  std::string r;
  for (size_t i = 0; i < N; ++i) r += (i ? ", \"" : "\"") + std::string(opts[i]) + "\"";
  return r;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

/// x's shape, which must have rank >= 3 (the spatial ops on the last two dims).
const std::vector<Dim>& spatial_x(InferCtx& ic) {
  const std::vector<Dim>& xs = ops::ranked_shape(ic, "x");
  if (xs.size() < 3)
    ic.fail_input("x", "must have rank at least 3 (input to the \"" + ic.schema.name +
                           "\" op must have rank at least 3), got " + ic.type("x")->str());
  return xs;
}

/// A known rank-4 input ([B, C, H, W] images, resample's coordinates).
const std::vector<Dim>& rank4(InferCtx& ic, const char* in) {
  const std::vector<Dim>& s = ops::ranked_shape(ic, in);
  if (s.size() != 4)
    ic.fail_input(in, "must be a rank 4 tensor, got rank " + std::to_string(s.size()) +
                          " tensor of shape " + ops::shape_str(s));
  return s;
}

/// A const int32 output size (target / output height or width): must not be negative.
int64_t out_size(InferCtx& ic, const char* in) {
  int64_t v = ic.int_(in);
  if (v < 0) ic.fail_input(in, "must be non-negative, got " + std::to_string(v));
  return v;
}

/// floor(scale * n) as coremltools computes it: in float32 for an fp32 scale (numpy float32 times
/// a Python int), exactly for an int32 one. Symbolic n: exact for integral scales (coremltools
/// makes a fresh symbol), a fresh symbol otherwise.
Dim scaled_dim(InferCtx& ic, const char* in, Dim n) {
  const Value* v = ic.val(in);
  double s = ic.float_(in);
  bool is_f32 = v->dtype() == DataType::Float32 || v->dtype() == DataType::Float16;
  if (!(s > 0))
    ic.fail_input(in, "must be positive, got " + v->str() + " (the output size would be " +
                          (s == 0 ? "0" : "negative") + ")");
  if (!n->is_const()) {
    if (s == std::floor(s) && s < 1e9) return ic.ctx.mul(ic.ctx.constant(static_cast<int64_t>(s)), n);
    return ic.ctx.fresh();
  }
  double p = is_f32 ? static_cast<double>(static_cast<float>(s) * static_cast<float>(n->value()))
                    : s * static_cast<double>(n->value());
  return ic.ctx.constant(static_cast<int64_t>(std::floor(p)));
}

// ---------------------------------------------------------------------------------------------
// upsample_nearest_neighbor, upsample_bilinear

std::vector<const Type*> upsample_infer(InferCtx& ic) {
  std::vector<Dim> out = spatial_x(ic);
  const size_t r = out.size();
  out[r - 1] = scaled_dim(ic, "scale_factor_width", out[r - 1]);
  out[r - 2] = scaled_dim(ic, "scale_factor_height", out[r - 2]);
  return {ic.ctx.tensor(ic.type("x")->dtype(), out)};
}

DTypeSet scale_dtypes() { return {DataType::Float32, DataType::Int32}; }

void add_upsample_nearest_neighbor(OpRegistry& r) {
  OpSchema s;
  s.name = "upsample_nearest_neighbor";
  s.inputs = {in("x", dt::floats(), "T"),
              in_opt_const("scale_factor_height", scale_dtypes(), def_int(1), "U"),
              in_opt_const("scale_factor_width", scale_dtypes(), def_int(1), "U")};
  s.infer = upsample_infer;
  r.add(std::move(s));
}

void add_upsample_bilinear(OpRegistry& r, bool ios16) {
  OpSchema s;
  s.name = "upsample_bilinear";
  s.since = ios16 ? Target::iOS16 : Target::iOS13;
  s.inputs = {in("x", dt::floats(), "T"),
              in_opt_const("scale_factor_height", scale_dtypes(), def_int(1), "U"),
              in_opt_const("scale_factor_width", scale_dtypes(), def_int(1), "U"),
              in_opt_const("align_corners", dt::boolean(), def_bool(true))};
  // iOS16: half_pixel_centers, no default (the kernel uses !align_corners when it is absent)
  if (ios16) s.inputs.push_back(in_opt_const("half_pixel_centers", dt::boolean()));
  s.infer = upsample_infer;
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------------------------
// resize_nearest_neighbor, resize_bilinear

std::vector<const Type*> resize_target_infer(InferCtx& ic) {
  std::vector<Dim> out = spatial_x(ic);
  if (ic.schema.input_index("sampling_mode") >= 0) {
    std::string m = ic.str("sampling_mode");
    if (!one_of(m, kSamplingModes))
      ic.fail_input("sampling_mode", "has unrecognized value \"" + m + "\" (\"resize_bilinear\" op: "
                                     "unrecognized sampling mode); expected one of " +
                                         options(kSamplingModes));
  }
  const size_t r = out.size();
  out[r - 1] = ic.ctx.constant(out_size(ic, "target_size_width"));
  out[r - 2] = ic.ctx.constant(out_size(ic, "target_size_height"));
  return {ic.ctx.tensor(ic.type("x")->dtype(), out)};
}

void add_resize_nearest_neighbor(OpRegistry& r) {
  OpSchema s;
  s.name = "resize_nearest_neighbor";
  s.inputs = {in("x", dt::floats(), "T"), in_const("target_size_height", dt::int32()),
              in_const("target_size_width", dt::int32())};
  s.infer = resize_target_infer;
  r.add(std::move(s));
}

void add_resize_bilinear(OpRegistry& r) {
  OpSchema s;
  s.name = "resize_bilinear";
  s.inputs = {in("x", dt::floats(), "T"),
              in_opt_const("target_size_height", dt::int32(), def_int(1)),
              in_opt_const("target_size_width", dt::int32(), def_int(1)),
              in_opt_const("sampling_mode", dt::string(), def_str("DEFAULT"))};
  s.infer = resize_target_infer;
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------------------------
// resize (iOS17)

const char* const kInterpolationModes[] = {"LINEAR", "NEAREST_NEIGHBOR"};

std::vector<const Type*> resize_infer(InferCtx& ic) {
  Context& c = ic.ctx;
  const std::vector<Dim>& xs = ops::ranked_shape(ic, "x");
  const std::vector<Dim>& ss = ops::ranked_shape(ic, "shape");
  const int64_t rank = static_cast<int64_t>(xs.size());
  const int64_t rd = ic.int_("resized_dims");
  std::optional<std::vector<Dim>> vals = ic.dims("shape");
  if (vals && ss.size() == 1) {
    const int64_t k = static_cast<int64_t>(vals->size());
    if (rd > k)
      ic.fail_input("resized_dims", "= " + std::to_string(rd) + " must be <= the size of 'shape' (" +
                                        std::to_string(k) + ") (The resized_dims (" +
                                        std::to_string(rd) + ") must <= shape's size (" +
                                        std::to_string(k) + "))");
    if (k > rank)
      ic.fail_input("shape", "has " + std::to_string(k) + " elements, more than the rank of x (" +
                                 std::to_string(rank) + ") (The shape's size (" + std::to_string(k) +
                                 ") must <= x's rank (" + std::to_string(rank) + "))");
  }
  if (ss.size() != 1)
    ic.fail_input("shape", "must have rank 1 (The shape's rank must be 1, but got " +
                               std::to_string(ss.size()) + ")");
  std::string im = ic.str("interpolation_mode");
  if (!one_of(im, kInterpolationModes))
    ic.fail_input("interpolation_mode", "has invalid value \"" + im + "\"; supported modes are " +
                                            options(kInterpolationModes));
  std::string sm = ic.str("sampling_mode");
  if (!one_of(sm, kSamplingModes))
    ic.fail_input("sampling_mode", "has invalid value \"" + sm + "\"; supported modes are " +
                                       options(kSamplingModes));
  // documented restrictions coremltools checks only for a known `shape`
  if (rd > rank)
    ic.fail_input("resized_dims", "= " + std::to_string(rd) + " exceeds the rank of x (" +
                                      std::to_string(rank) + ")");
  if (ss[0]->is_const()) {
    if (rd > ss[0]->value())
      ic.fail_input("resized_dims", "= " + std::to_string(rd) + " must be <= the size of 'shape' (" +
                                        ss[0]->str() + ")");
    if (ss[0]->value() > rank)
      ic.fail_input("shape", "has " + ss[0]->str() + " elements, more than the rank of x (" +
                                 std::to_string(rank) + ")");
  }
  std::vector<Dim> out = xs;
  for (int64_t i = 0; i < rd; ++i) {
    const int64_t o = rank - rd + i;
    Dim t = nullptr;
    if (vals) {
      Dim v = (*vals)[vals->size() - rd + i];
      if (v->is_const() && v->value() < 0)
        ic.fail_input("shape", "has a negative element " + v->str() + " (" +
                                   ops::shape_str(*vals) + ")");
      if (v->is_const() && v->value() == 0) t = xs[o];             // 0: keep x's dim
      else if (v->is_const() || c.range(v).lo >= 1) t = v;           // never 0 at run time
    }
    out[o] = t ? t : c.fresh();
  }
  return {c.tensor(ic.type("x")->dtype(), out)};
}

void add_resize(OpRegistry& r) {
  OpSchema s;
  s.name = "resize";
  s.since = Target::iOS17;
  s.inputs = {in("x", dt::numeric(), "T"),
              in("shape", {DataType::Int32, DataType::Int16, DataType::UInt16, DataType::UInt32}, "U"),
              in_const("resized_dims", {DataType::UInt32}),
              in_opt_const("interpolation_mode", dt::string(), def_str("LINEAR")),
              in_opt_const("sampling_mode", dt::string(), def_str("DEFAULT"))};
  s.infer = resize_infer;
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------------------------
// crop

std::vector<const Type*> crop_infer(InferCtx& ic) {
  const std::vector<Dim>& xs = ops::ranked_shape(ic, "x");
  if (xs.size() < 3)
    ic.fail_input("x", "must at least be of rank 3 (input to the \"crop\" op must at least be of "
                       "rank 3. Provided " + std::to_string(xs.size()) + ")");
  std::vector<Dim> out = xs;
  const size_t r = xs.size();
  const char* names[2] = {"crop_height", "crop_width"};
  for (int k = 0; k < 2; ++k) {
    std::vector<int64_t> v = ic.ints(names[k]);
    if (ic.val(names[k])->rank() > 1)
      ic.fail_input(names[k], "must be a list of 2 integers, got shape " +
                                  ops::ints_str(ic.val(names[k])->shape()));
    if (v.size() != 2)
      ic.fail_input(names[k], "must have 2 elements (" + std::string(names[k]) +
                                  " must have 2 elements. Provided " + std::to_string(v.size()) + ")");
    if (v[0] < 0 || v[1] < 0)
      ic.fail_input(names[k], "= " + ops::ints_str(v) + " must not be negative");
    Dim& d = out[r - 2 + k];
    d = ic.ctx.sub(d, ic.ctx.constant(v[0] + v[1]));
    if (d->is_const() && d->value() < 0)
      ic.fail_input(names[k], "= " + ops::ints_str(v) + " crops more than the dim " +
                                  xs[r - 2 + k]->str() + " of x " + ic.type("x")->str());
  }
  return {ic.ctx.tensor(ic.type("x")->dtype(), out)};
}

void add_crop(OpRegistry& r) {
  OpSchema s;
  s.name = "crop";
  s.inputs = {in("x", dt::floats(), "T"), in_const("crop_height", dt::int32()),
              in_const("crop_width", dt::int32())};
  s.infer = crop_infer;
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------------------------
// crop_resize

void crop_resize_modes(InferCtx& ic) {
  std::string bm = ic.str("box_coordinate_mode");
  if (!one_of(bm, kBoxModes))
    ic.fail_input("box_coordinate_mode", "has unrecognized value \"" + bm +
                                             "\" (\"crop_resize\" op: unrecognized "
                                             "box_coordinate_mode); expected one of " +
                                             options(kBoxModes));
  std::string sm = ic.str("sampling_mode");
  if (!one_of(sm, kSamplingModes))
    ic.fail_input("sampling_mode", "has unrecognized value \"" + sm +
                                       "\" (\"crop_resize\" op: unrecognized sampling mode); "
                                       "expected one of " + options(kSamplingModes));
}

/// iOS15 / iOS16: roi [N, 1, 4 | 5, 1, 1].
std::vector<const Type*> crop_resize_roi_infer(InferCtx& ic) {
  const std::vector<Dim>& xs = ops::ranked_shape(ic, "x");
  if (xs.size() != 4)
    ic.fail_input("x", "must be of rank 4 (input to the \"crop_resize\" op must be of rank 4. "
                       "Provided " + std::to_string(xs.size()) + ")");
  const std::vector<Dim>& rs = ops::ranked_shape(ic, "roi");
  if (rs.size() != 5)
    ic.fail_input("roi", "must be of rank 5 (ROI input to the \"crop_resize\" op must be of rank 5, "
                         "provided " + std::to_string(rs.size()) + ")");
  crop_resize_modes(ic);
  Context& c = ic.ctx;
  const Dim one = c.constant(1);
  bool bad = c.eq(rs[1], one) == Tri::False || c.eq(rs[3], one) == Tri::False ||
             c.eq(rs[4], one) == Tri::False ||
             (rs[2]->is_const() && rs[2]->value() != 4 && rs[2]->value() != 5);
  if (bad)
    ic.fail_input("roi", "must have shape [N, 1, 4, 1, 1] or [N, 1, 5, 1, 1], got " +
                             ops::shape_str(rs));
  // 5 coordinates: the first is the batch index of the box, one crop per box
  Dim b = rs[2]->is_const() && rs[2]->value() == 5 ? one : xs[0];
  std::vector<Dim> out{rs[0], b, xs[1], c.constant(out_size(ic, "target_height")),
                       c.constant(out_size(ic, "target_width"))};
  return {c.tensor(ic.type("x")->dtype(), out)};
}

/// iOS17: boxes [N, 4], box_indices [N].
std::vector<const Type*> crop_resize_boxes_infer(InferCtx& ic) {
  Context& c = ic.ctx;
  const std::vector<Dim>& xs = ops::ranked_shape(ic, "x");
  if (xs.size() != 4)
    ic.fail_input("x", "must be of rank 4 (input to the \"crop_resize\" op must be of rank 4, but "
                       "got " + std::to_string(xs.size()) + ")");
  const std::vector<Dim>& bs = ops::ranked_shape(ic, "boxes");
  if (bs.size() != 2 || c.eq(bs[1], c.constant(4)) != Tri::True)
    ic.fail_input("boxes", "must have shape [N, 4], but got " + ops::shape_str(bs));
  if (ic.has("box_indices")) {
    const std::vector<Dim>& is = ops::ranked_shape(ic, "box_indices");
    if (is.size() != 1 || c.eq(is[0], bs[0]) == Tri::False)
      ic.fail_input("box_indices", "must have shape [" + bs[0]->str() + "], but got " +
                                       ops::shape_str(is));
    if (ic.known("box_indices")) {
      for (int64_t k : ic.ints("box_indices"))
        if (k < 0 || c.lt(c.constant(k), xs[0]) == Tri::False)
          ic.fail_input("box_indices", "should not have values >= B dimension of x (" +
                                           xs[0]->str() + "), but got " +
                                           ops::ints_str(ic.ints("box_indices")));
    }
  }
  crop_resize_modes(ic);
  if (ic.bool_("normalized_coordinates")) {
    DataType bt = ic.type("boxes")->dtype();
    if (bt != DataType::Float16 && bt != DataType::Float32)
      ic.fail_input("boxes", "must have fp16 or fp32 dtype when normalized_coordinates is set, but "
                             "got " + std::string(dtype_name(bt)));
  }
  std::vector<Dim> out{bs[0], xs[1], c.constant(out_size(ic, "target_height")),
                       c.constant(out_size(ic, "target_width"))};
  return {c.tensor(ic.type("x")->dtype(), out)};
}

void add_crop_resize(OpRegistry& r, int version) {  // 0: iOS13, 1: iOS16, 2: iOS17
  OpSchema s;
  s.name = "crop_resize";
  s.since = version == 0 ? Target::iOS13 : version == 1 ? Target::iOS16 : Target::iOS17;
  s.inputs = {in("x", dt::floats(), "T")};
  if (version < 2) {
    s.inputs.push_back(in("roi", dt::floats(), "T"));
  } else {
    s.inputs.push_back(in("boxes", {DataType::Float16, DataType::Float32, DataType::UInt16}, "BOX_T"));
    s.inputs.push_back(in_opt("box_indices", {DataType::UInt16, DataType::Int32}, nullptr, false,
                              "BOX_INDEX_T"));
  }
  for (InputDef d : {in_opt_const("target_height", dt::int32(), def_int(1)),
                     in_opt_const("target_width", dt::int32(), def_int(1)),
                     in_opt_const("normalized_coordinates", dt::boolean(), def_bool(false)),
                     in_opt_const("spatial_scale", {DataType::Float32}, def_float(1.0)),
                     in_opt_const("box_coordinate_mode", dt::string(), def_str("CORNERS_HEIGHT_FIRST")),
                     in_opt_const("sampling_mode", dt::string(), def_str("DEFAULT"))})
    s.inputs.push_back(std::move(d));
  if (version >= 1) s.inputs.push_back(in_opt_const("pad_value", dt::floats(), def_float(0.0), "T"));
  if (version == 2) {
    // box_indices defaults to arange(N); N > B would point outside x (coremltools raises)
    s.defaults = [](InferCtx& ic) {
      std::vector<std::pair<std::string, Value>> d;
      if (ic.has("box_indices")) return d;
      const Type* bt = ic.type("boxes");
      const Type* xt = ic.type("x");
      if (!bt->has_rank() || bt->rank() < 1 || !bt->shape()[0]->is_const()) return d;
      const int64_t n = bt->shape()[0]->value();
      if (xt->has_rank() && xt->rank() >= 1 &&
          ic.ctx.lt(xt->shape()[0], ic.ctx.constant(n)) == Tri::True)
        ic.fail("N dimension of \"boxes\" (" + std::to_string(n) +
                ") should not be greater than the B dimension of \"x\" (" + xt->shape()[0]->str() +
                ") when \"box_indices\" is not specified, otherwise \"box_indices\" would point "
                "outside of \"x\" bounds.");
      std::vector<int64_t> idx(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) idx[i] = i;
      d.emplace_back("box_indices", Value::int_list(idx));
      return d;
    };
    s.infer = crop_resize_boxes_infer;
  } else {
    s.infer = crop_resize_roi_infer;
  }
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------------------------
// resample, affine

const char* const kResampleSampling[] = {"bilinear", "nearest"};
const char* const kResamplePadding[] = {"constant", "border", "reflection", "symmetric"};
const char* const kResampleCoords[] = {"unnormalized", "normalized_minus_one_to_one",
                                       "normalized_zero_to_one"};

std::vector<const Type*> resample_infer(InferCtx& ic) {
  Context& c = ic.ctx;
  const std::vector<Dim>& xs = rank4(ic, "x");
  const std::vector<Dim>& cs = rank4(ic, "coordinates");
  if (c.eq(xs[0], cs[0]) == Tri::False)
    ic.fail("input \"x\" and \"coordinates\" must agree on the batch size: " + xs[0]->str() +
            " vs. " + cs[0]->str());
  if (cs[3]->is_const() && cs[3]->value() != 2)
    ic.fail_input("coordinates", "last dimension must be 2 (x, y), got " + cs[3]->str());
  // checked by milkit only (coremltools accepts any string here)
  struct {
    const char* in;
    const char* const* opts;
    size_t n;
  } checks[] = {{"sampling_mode", kResampleSampling, 2},
                {"padding_mode", kResamplePadding, 4},
                {"coordinates_mode", kResampleCoords, 3}};
  for (auto& ch : checks) {
    std::string v = lower(ic.str(ch.in));
    if (std::none_of(ch.opts, ch.opts + ch.n, [&](const char* o) { return v == o; })) {
      std::string all;
      for (size_t i = 0; i < ch.n; ++i) all += (i ? ", \"" : "\"") + std::string(ch.opts[i]) + "\"";
      ic.fail_input(ch.in, "has unsupported value \"" + ic.str(ch.in) + "\"; expected one of " + all);
    }
  }
  return {c.tensor(ic.type("x")->dtype(), std::vector<Dim>{xs[0], xs[1], cs[1], cs[2]})};
}

void add_resample(OpRegistry& r, int version) {  // 0: iOS15, 1: iOS16, 2: iOS17
  OpSchema s;
  s.name = "resample";
  s.since = version == 0 ? Target::iOS15 : version == 1 ? Target::iOS16 : Target::iOS17;
  DTypeSet u = {DataType::Int32, DataType::Float32};
  if (version >= 1) u = u | DTypeSet{DataType::Float16};
  if (version >= 2)
    u = u | DTypeSet{DataType::Int8, DataType::UInt8, DataType::Int16, DataType::UInt16};
  s.inputs = {in("x", dt::floats(), "T"),
              in("coordinates", u, "U"),
              in_const("sampling_mode", dt::string()),
              in_const("padding_mode", dt::string()),
              in_const("padding_value", dt::floats(), "T"),
              in_const("coordinates_mode", dt::string()),
              in_const("align_corners", dt::boolean())};
  s.infer = resample_infer;
  r.add(std::move(s));
}

std::vector<const Type*> affine_infer(InferCtx& ic) {
  Context& c = ic.ctx;
  const std::vector<Dim>& xs = rank4(ic, "x");
  const std::vector<Dim>& ts = ops::ranked_shape(ic, "transform_matrix");
  if (ts.size() != 2)
    ic.fail_input("transform_matrix", "must be a rank 2 tensor, got rank " +
                                          std::to_string(ts.size()) + " tensor of shape " +
                                          ops::shape_str(ts));
  // coremltools raises NotImplementedError for these
  if (lower(ic.str("sampling_mode")) != "bilinear")
    ic.fail_input("sampling_mode", "= \"" + ic.str("sampling_mode") +
                                       "\" is not implemented (only \"bilinear\")");
  if (lower(ic.str("coordinates_mode")) != "normalized_minus_one_to_one")
    ic.fail_input("coordinates_mode", "= \"" + ic.str("coordinates_mode") +
                                          "\" is not implemented (only "
                                          "\"normalized_minus_one_to_one\")");
  if (lower(ic.str("padding_mode")) != "constant" || ic.float_("padding_value") != 0.0)
    ic.fail_input("padding_mode", "= \"" + ic.str("padding_mode") + "\" with padding_value " +
                                      ic.val("padding_value")->str() +
                                      " is not implemented (only \"constant\" with 0)");
  if (ts[1]->is_const() && ts[1]->value() != 6)
    ic.fail_input("transform_matrix", "last dimension must be 6 [a0, a1, a2, b0, b1, b2], got " +
                                          ts[1]->str());
  if (c.eq(ts[0], c.constant(1)) == Tri::False && c.eq(ts[0], xs[0]) == Tri::False)
    ic.fail_input("transform_matrix", "must have 1 or B (" + xs[0]->str() + ") rows, got " +
                                          ops::shape_str(ts));
  std::vector<Dim> out{xs[0], xs[1], c.constant(out_size(ic, "output_height")),
                       c.constant(out_size(ic, "output_width"))};
  return {c.tensor(ic.type("x")->dtype(), out)};
}

void add_affine(OpRegistry& r) {
  OpSchema s;
  s.name = "affine";
  s.since = Target::iOS15;
  s.inputs = {in("x", dt::floats(), "T"),
              in("transform_matrix", dt::floats(), "T"),
              in_const("output_height", dt::int32()),
              in_const("output_width", dt::int32()),
              in_const("sampling_mode", dt::string()),
              in_const("padding_mode", dt::string()),
              in_const("padding_value", dt::floats(), "T"),
              in_const("coordinates_mode", dt::string()),
              in_const("align_corners", dt::boolean())};
  s.infer = affine_infer;
  r.add(std::move(s));
}

}  // namespace

void register_image_resizing_ops(OpRegistry& r) {
  add_upsample_nearest_neighbor(r);
  add_upsample_bilinear(r, false);
  add_upsample_bilinear(r, true);
  add_resize_nearest_neighbor(r);
  add_resize_bilinear(r);
  add_resize(r);
  add_crop(r);
  add_crop_resize(r, 0);
  add_crop_resize(r, 1);
  add_crop_resize(r, 2);
  add_resample(r, 0);
  add_resample(r, 1);
  add_resample(r, 2);
  add_affine(r);
}

}  // namespace milkit
