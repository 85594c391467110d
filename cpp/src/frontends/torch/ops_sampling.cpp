// ATen resampling: grid_sampler, upsampling (nearest, linear, cubic, antialiased), im2col / col2im, max_unpool.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "milkit/compose/resize.h"
#include "milkit/compose/sampling.h"
#include "milkit/compose/windows.h"
#include "milkit/types/error.h"
#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

// F.grid_sample (grid_sampler / grid_sampler_2d / _3d): compose::grid_sample in torch's convention
// (2-D linear / nearest by MIL's resample, bicubic and 3-D by gathered taps)
void grid_sampler(C& cv, const json& n) {
  Var* x = cv.tensor(n, "input");
  Var* grid = cv.tensor(n, "grid");
  int64_t mode = cv.i(n, "interpolation_mode", 0), pad = cv.i(n, "padding_mode", 0);
  int r = cv.rank(n, x);
  if (r != 4 && r != 5) cv.fail(n, "input must be 4-D or 5-D, not rank " + std::to_string(r));
  if (mode == 2 && r == 5) cv.fail(n, "bicubic grid sampling of 5-D input is not supported (torch has none)");
  if (mode != 0 && mode != 1 && mode != 2) cv.fail(n, "interpolation_mode " + std::to_string(mode) + " is not supported");
  if (pad != 0 && pad != 1 && pad != 2)
    cv.fail(n, "padding_mode " + std::to_string(pad) + " is not supported");
  if ((mode == 2 || r == 5) && (!C::static_shape(x) || !C::static_shape(grid)))
    cv.fail(n, std::string(mode == 2 ? "bicubic" : "3-D") +
                   " grid sampling needs the shapes of the input and the grid to be known");
  compose::GridSampleSpec s;
  s.mode = mode == 0   ? compose::SampleMode::Linear
           : mode == 1 ? compose::SampleMode::Nearest
                       : compose::SampleMode::Cubic;
  s.padding = pad == 0   ? compose::SamplePadding::Zeros
              : pad == 1 ? compose::SamplePadding::Border
                         : compose::SamplePadding::Reflection;
  s.align_corners = cv.bo(n, "align_corners", false);
  s.convention = compose::GridConvention::Torch;
  cv.out(n, compose::grid_sample(cv.e, x, grid, s));
}

// F.affine_grid (affine_grid_generator): the base grid of the output size (x, y[, z], 1 per
// position, torch's linspace of [-1, 1]) times theta^T; [N, H, W, 2] or [N, D, H, W, 3]
void affine_grid(C& cv, const json& n) {
  Var* theta = cv.tensor(n, "theta");
  auto size = cv.ints(n, "size");
  bool ac = cv.bo(n, "align_corners", false);
  if (size.size() != 4 && size.size() != 5)
    cv.fail(n, "size must be [N, C, H, W] or [N, C, D, H, W]");
  if (!is_float(C::dtype(theta))) cv.fail(n, "theta must be a float tensor");
  const size_t sp = size.size() - 2;
  auto coords = [&](int64_t steps) {
    std::vector<double> v(static_cast<size_t>(steps), 0.0);
    if (steps <= 1) return v;
    for (int64_t i = 0; i < steps; ++i) {
      double t = -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(steps - 1);
      v[static_cast<size_t>(i)] =
          ac ? t : t * static_cast<double>(steps - 1) / static_cast<double>(steps);
    }
    return v;
  };
  // spatial sizes in torch's order (D,) H, W; the grid's components are x (W), y (H), z (D), 1
  std::vector<int64_t> dims(size.begin() + 2, size.end());
  int64_t count = 1;
  for (int64_t s : dims) count *= s;
  std::vector<std::vector<double>> axis;
  for (int64_t s : dims) axis.push_back(coords(s));
  const int64_t comps = static_cast<int64_t>(sp) + 1;
  std::vector<double> base(static_cast<size_t>(count * comps));
  for (int64_t p = 0; p < count; ++p) {
    int64_t rem = p;
    std::vector<int64_t> at(sp);
    for (size_t q = sp; q-- > 0;) {
      at[q] = rem % dims[q];
      rem /= dims[q];
    }
    for (size_t c = 0; c < sp; ++c)
      base[static_cast<size_t>(p * comps) + c] =
          axis[sp - 1 - c][static_cast<size_t>(at[sp - 1 - c])];
    base[static_cast<size_t>(p * comps + comps - 1)] = 1.0;
  }
  Var* b = cv.c(Value::from_doubles(C::dtype(theta), {1, count, comps}, base));
  Var* g = cv.op("matmul", {C::a("x", b), C::a("y", theta), C::abool("transpose_x", false),
                            C::abool("transpose_y", true)});
  std::vector<int64_t> out{size[0]};
  out.insert(out.end(), dims.begin(), dims.end());
  out.push_back(static_cast<int64_t>(sp));
  cv.out(n, cv.e.reshape(g, out));
}

// ---- im2col / col2im -------------------------------------------------------------------------
// kernel_size, dilation, padding (both sides) and stride of im2col / col2im as a 2-D window
compose::Window window_args(C& cv, const json& n) {
  compose::Window w;
  w.kernel = expand_list(cv, n, cv.ints(n, "kernel_size"), 2, "kernel_size");
  w.dilation = expand_list(cv, n, cv.ints(n, "dilation"), 2, "dilation");
  w.pad_begin = w.pad_end = expand_list(cv, n, cv.ints(n, "padding"), 2, "padding");
  w.stride = expand_list(cv, n, cv.ints(n, "stride"), 2, "stride");
  return w;
}

// im2col of symbolic spatial sizes: each plane [N * C, 1, H, W] convolved with a one-hot kernel
// of kh * kw output channels (one per tap) is [N * C, kh * kw, oh, ow], which reshapes to
// [N, C * kh * kw, oh * ow]; no size is needed before run time
Var* im2col_by_conv(C& cv, const json& n, Var* x, const compose::Window& w) {
  if (!is_float(C::dtype(x))) cv.fail(n, "unfolding a symbolic size needs a float input");
  const auto& sh = C::shape(x);
  Context& ctx = cv.ctx();
  const int64_t K = w.kernel[0] * w.kernel[1];
  Var* planes =
      reshape(cv, x, std::vector<Dim>{ctx.mul(sh[0], sh[1]), ctx.constant(1), sh[2], sh[3]});
  std::vector<double> one_hot(static_cast<size_t>(K * K), 0.0);
  for (int64_t t = 0; t < K; ++t) one_hot[static_cast<size_t>(t * K + t)] = 1.0;
  Var* kernel = cv.c(Value::from_doubles(C::dtype(x), {K, 1, w.kernel[0], w.kernel[1]}, one_hot));
  Var* taps = cv.op(
      "conv", {C::a("x", planes), C::a("weight", kernel), C::aints32("strides", w.stride),
               C::aints32("dilations", w.dilation), C::astr("pad_type", "custom"),
               C::aints32("pad", {w.pad_begin[0], w.pad_end[0], w.pad_begin[1], w.pad_end[1]})});
  const auto& th = C::shape(taps);
  return reshape(cv, taps,
                 std::vector<Dim>{sh[0], ctx.mul(sh[1], ctx.constant(K)), ctx.mul(th[2], th[3])});
}

// F.unfold: [N, C, H, W] (or unbatched [C, H, W]) -> [N, C * kh * kw, L] by compose::im2col
void im2col(C& cv, const json& n) {
  Var* x = cv.tensor(n, "self");
  int r = cv.rank(n, x);
  if (r != 3 && r != 4) cv.fail(n, "input must be [N, C, H, W] or [C, H, W]");
  bool unb = r == 3;
  if (unb) x = cv.e.expand_dims(x, {0});
  const auto& sh = C::shape(x);
  Var* y = sh[2]->is_const() && sh[3]->is_const() ? compose::im2col(cv.e, x, window_args(cv, n))
                                                  : im2col_by_conv(cv, n, x, window_args(cv, n));
  if (unb) y = cv.e.squeeze(y, {0});
  cv.out(n, y);
}

// F.fold: [N, C * kh * kw, L] (or unbatched) -> [N, C, H, W], overlapping blocks summed, by
// compose::col2im (integers summed in fp32)
void col2im(C& cv, const json& n) {
  Var* x = cv.tensor(n, "self");
  int r = cv.rank(n, x);
  if (r != 2 && r != 3) cv.fail(n, "input must be [N, C * kh * kw, L] or [C * kh * kw, L]");
  bool unb = r == 2;
  if (unb) x = cv.e.expand_dims(x, {0});
  compose::Window w = window_args(cv, n);
  auto out = expand_list(cv, n, cv.ints(n, "output_size"), 2, "output_size");
  int64_t K = w.kernel[0] * w.kernel[1];
  int64_t CK = known_dim(cv, n, x, 1, "the channel count");
  if (CK % K) cv.fail(n, "the channel count " + std::to_string(CK) + " is not a multiple of the kernel size " + std::to_string(K));
  int64_t L = 1;
  for (size_t q = 0; q < 2; ++q) {
    int64_t o = w.out_size(q, out[q], false);
    if (o <= 0) cv.fail(n, "the kernel does not fit the padded output");
    L *= o;
  }
  Dim l = C::shape(x)[2];
  if (l->is_const() && l->value() != L)
    cv.fail(n, "the input has " + std::to_string(l->value()) + " blocks; the output size needs " +
                   std::to_string(L));
  DataType odt = C::dtype(x);
  Var* y = compose::col2im(cv.e, is_float(odt) ? x : cv.cast(x, DataType::Float32), out, w);
  if (unb) y = cv.e.squeeze(y, {0});
  cv.out(n, cv.cast(y, odt));
}

// F.max_unpool2d / 3d: zeros [N, C, out...] with each input value written at its index (a flat
// position in its plane), by compose::max_unpool; stride and padding only shaped the indices
void max_unpool(C& cv, const json& n, size_t sp) {
  Var* x = cv.tensor(n, "self");
  Var* idx = cv.tensor(n, "indices");
  auto size = expand_list(cv, n, cv.ints(n, "output_size"), sp, "output_size");
  int r = cv.rank(n, x);
  if (r != static_cast<int>(sp) + 1 && r != static_cast<int>(sp) + 2) cv.fail(n, "input must be [N, C, spatial...] or [C, spatial...]");
  bool unb = r == static_cast<int>(sp) + 1;
  if (unb) {
    x = cv.e.expand_dims(x, {0});
    idx = cv.e.expand_dims(cv.cast(idx, DataType::Int32), {0});
  }
  Var* y = compose::max_unpool(cv.e, x, idx, size, compose::UnpoolIndices::Plane);
  if (unb) y = cv.e.squeeze(y, {0});
  cv.out(n, y);
}

// The sizes of output `k` from the graph's tensor_values (empty when absent).
std::vector<Dim> meta_sizes(C& cv, const json& n, size_t k = 0) {
  auto names = C::output_names(n);
  if (k >= names.size() || names[k].empty()) return {};
  auto& tv = cv.graph.at("tensor_values");
  auto it = tv.find(names[k]);
  if (it == tv.end() || !it->contains("sizes")) return {};
  std::vector<Dim> r;
  for (auto& sz : it->at("sizes")) {
    if (sz.contains("as_int")) {
      r.push_back(cv.ctx().constant(sz["as_int"].get<int64_t>()));
      continue;
    }
    try {
      r.push_back(parse_sym_expr(sz.at("as_expr").at("expr_str").get<std::string>(), cv.ctx()));
    } catch (const FormatError&) {
      return {};  // float arithmetic on sizes (TruncToInt(1.5 * s)): not a milkit dim
    }
  }
  return r;
}

enum class Mode { Nearest, NearestExact, Linear, Cubic, LinearAA, CubicAA };

// One resized axis: input and output sizes, torch's scale factor (if the node has one).
struct Axis {
  Dim in, out;
  std::optional<double> scale;
  int64_t factor = 0;  // out == factor * in for an integer factor matching torch's scale, else 0
  bool in_over_out = false;  // torch's source scale is in / out (no scale factor, or an exact one)
};

// A resize in torch's convention for mode m (no axes yet).
compose::ResizeSpec torch_resize(Mode m, bool ac) {
  compose::ResizeSpec s;
  s.convention = compose::ResizeConvention::Torch;
  bool nearest = m == Mode::Nearest || m == Mode::NearestExact;
  s.mode = nearest                                    ? compose::ResizeMode::Nearest
           : m == Mode::Linear || m == Mode::LinearAA ? compose::ResizeMode::Linear
                                                      : compose::ResizeMode::Cubic;
  s.coord = m == Mode::Nearest ? compose::ResizeCoord::Asymmetric
            : ac               ? compose::ResizeCoord::AlignCorners
                               : compose::ResizeCoord::HalfPixel;
  s.antialias = m == Mode::LinearAA || m == Mode::CubicAA;
  return s;
}

// The resize of the last axes of x (rank r) by compose in torch's convention.
compose::ResizeSpec resize_spec(const std::vector<Axis>& axes, Mode m, bool ac, int r) {
  compose::ResizeSpec s = torch_resize(m, ac);
  for (size_t k = 0; k < axes.size(); ++k) {
    compose::ResizeAxis a;
    a.axis = r - static_cast<int64_t>(axes.size()) + static_cast<int64_t>(k);
    a.in = axes[k].in->value();
    a.out = axes[k].out->value();
    a.scale = axes[k].scale.value_or(0);
    s.axes.push_back(a);
  }
  return s;
}

void upsample(C& cv, const json& n, size_t sp, Mode mode) {
  Var* x = self(cv, n);
  const int r = cv.rank(n, x);
  if (r != static_cast<int>(sp) + 2)
    cv.fail(n, "input must have rank " + std::to_string(sp + 2) + ", got " + x->type()->str());
  if (!is_float(C::dtype(x))) cv.fail(n, "input must be a float tensor, got " + x->type()->str());
  const bool aa = mode == Mode::LinearAA || mode == Mode::CubicAA;
  const bool ac =
      mode != Mode::Nearest && mode != Mode::NearestExact && cv.bo(n, "align_corners", false);
  std::vector<std::optional<double>> scales(sp);
  if (C::has(n, "scale_factors")) {
    auto s = cv.floats(n, "scale_factors");
    if (s.size() != sp) cv.fail(n, "scale_factors must have " + std::to_string(sp) + " entries");
    for (size_t k = 0; k < sp; ++k) scales[k] = s[k];
  } else if (sp >= 2) {
    if (sp == 3 && C::has(n, "scales_d")) scales[0] = cv.f(n, "scales_d", 0);
    if (C::has(n, "scales_h")) scales[sp - 2] = cv.f(n, "scales_h", 0);
    if (C::has(n, "scales_w")) scales[sp - 1] = cv.f(n, "scales_w", 0);
  } else if (C::has(n, "scales")) {
    scales[0] = cv.f(n, "scales", 0);
  }
  // output sizes: what torch computed (tensor_values), else output_size
  std::vector<Dim> out = meta_sizes(cv, n);
  if (out.size() == static_cast<size_t>(r)) {
    out.erase(out.begin(), out.begin() + (r - static_cast<int>(sp)));
  } else {
    out = cv.dims(n, "output_size");
    if (out.empty() &&
        std::all_of(scales.begin(), scales.end(), [](auto& s) { return s && *s > 0; })) {
      // floor(in * scale), as torch computes it
      for (size_t k = 0; k < sp; ++k) {
        Dim in = C::shape(x)[static_cast<size_t>(r) - sp + k];
        double s = *scales[k];
        if (in->is_const())
          out.push_back(cv.ctx().constant(
              static_cast<int64_t>(std::floor(static_cast<double>(in->value()) * s))));
        else if (s == std::floor(s))
          out.push_back(cv.ctx().mul(cv.ctx().constant(static_cast<int64_t>(s)), in));
        else
          cv.fail(n, "upsampling a symbolic size is supported for integer scale factors only");
      }
    }
    if (out.size() != sp)
      cv.fail(n, "needs output_size or scale_factors for " + std::to_string(sp) + " dims");
  }
  std::vector<Axis> axes(sp);
  bool all_static = true, all_factor = true, all_in_over_out = true;
  for (size_t k = 0; k < sp; ++k) {
    Axis& a = axes[k];
    a.in = C::shape(x)[static_cast<size_t>(r) - sp + k];
    a.out = out[k];
    a.scale = scales[k] && *scales[k] > 0 ? scales[k] : std::nullopt;
    bool st = a.in->is_const() && a.out->is_const();
    all_static = all_static && st;
    // an integer factor torch's arithmetic agrees with: no scale factor, or exactly that one
    if (st) {
      int64_t X = a.in->value(), N = a.out->value();
      if (X > 0 && N % X == 0 && (!a.scale || *a.scale == static_cast<double>(N / X)))
        a.factor = N / X;
      a.in_over_out = !a.scale || static_cast<float>(1.0 / *a.scale) ==
                                      static_cast<float>(X) / static_cast<float>(N);
    } else if (a.scale && *a.scale == std::floor(*a.scale) && *a.scale >= 1) {
      int64_t f = static_cast<int64_t>(*a.scale);
      if (cv.ctx().mul(cv.ctx().constant(f), a.in) == a.out) a.factor = f;
      a.in_over_out = a.factor > 0;
    } else if (!a.scale) {
      // an output size that is an integer multiple of a symbolic input size (size=2 * x.shape[-1]):
      // torch's source scale in / out is then 1 / f, which is what an integer factor computes
      for (int64_t f = 1; f <= 64 && a.factor == 0; ++f)
        if (cv.ctx().mul(cv.ctx().constant(f), a.in) == a.out) a.factor = f;
      a.in_over_out = a.factor > 0;
    }
    all_factor = all_factor && a.factor > 0;
    all_in_over_out = all_in_over_out && a.in_over_out;
  }
  if (aa || sp == 3) {
    // MIL's resize ops are 2-d and do not antialias: a matrix or taps per axis
    if (!all_static) cv.fail(n, "this upsampling mode of a symbolic size is not supported");
    cv.out(n, compose::resize(cv.e, x, resize_spec(axes, mode, ac, r)));
    return;
  }
  // 1-d: a height of 1 in front of the width
  Var* x4 = x;
  auto x2d = [&]() {
    if (sp == 1 && x4 == x) x4 = cv.op("expand_dims", {C::a("x", x), C::aints32("axes", {-2})});
    return x4;
  };
  auto fac = [&](size_t k) -> int64_t {
    return sp == 1 ? (k == 0 ? 1 : axes[0].factor) : axes[k].factor;
  };
  auto size = [&](size_t k) -> int64_t {
    return sp == 1 ? (k == 0 ? 1 : axes[0].out->value()) : axes[k].out->value();
  };
  auto done = [&](Var* y) {
    if (sp == 1) y = cv.op("squeeze", {C::a("x", y), C::aints32("axes", {-2})});
    cv.out(n, y);
  };
  auto ints = [](int64_t v) { return Value::scalar_int(DataType::Int32, v); };
  if ((mode == Mode::Nearest || mode == Mode::NearestExact) && all_factor) {
    done(cv.op("upsample_nearest_neighbor",
               {C::a("x", x2d()), C::a("scale_factor_height", ints(fac(0))),
                C::a("scale_factor_width", ints(fac(1)))}));
    return;
  }
  if (mode == Mode::NearestExact && all_static && all_in_over_out) {
    done(cv.op("resize_nearest_neighbor",
               {C::a("x", x2d()), C::a("target_size_height", ints(size(0))),
                C::a("target_size_width", ints(size(1)))}));
    return;
  }
  if (mode == Mode::Linear && all_static && (ac || all_in_over_out)) {
    done(cv.op("resize_bilinear",
               {C::a("x", x2d()), C::a("target_size_height", ints(size(0))),
                C::a("target_size_width", ints(size(1))),
                C::astr("sampling_mode", ac ? "STRICT_ALIGN_CORNERS" : "UNALIGN_CORNERS")}));
    return;
  }
  if (mode == Mode::Linear && all_factor && (ac || cv.target() >= Target::iOS16)) {
    std::vector<Arg> args = {C::a("x", x2d()), C::a("scale_factor_height", ints(fac(0))),
                             C::a("scale_factor_width", ints(fac(1))),
                             C::abool("align_corners", ac)};
    if (!ac) args.push_back(C::abool("half_pixel_centers", true));
    done(cv.op("upsample_bilinear", std::move(args)));
    return;
  }
  bool computable = std::all_of(axes.begin(), axes.end(), [&](const Axis& a) {
    return cv.can_compute(a.in) && cv.can_compute(a.out);
  });
  // (linear by an integer factor without align_corners stays refused before iOS16, as it was)
  bool refused = mode == Mode::Linear && all_factor && !ac && cv.target() < Target::iOS16;
  if (!all_static && computable && !aa && sp <= 2 && !refused) {
    // sizes known at run time only: each axis's taps computed by the program
    std::vector<compose::RunTimeAxis> rt;
    for (size_t k = 0; k < sp; ++k)
      rt.push_back({r - static_cast<int64_t>(sp) + static_cast<int64_t>(k), cv.dim_var(axes[k].in),
                    cv.dim_var(axes[k].out), axes[k].scale.value_or(0)});
    cv.out(n, compose::resize_at_run_time(cv.e, x, torch_resize(mode, ac), rt));
    return;
  }
  if (!all_static) {
    std::string why =
        mode == Mode::Linear && all_factor
            ? "linear upsampling of a symbolic size without align_corners needs iOS16 or later"
        : mode == Mode::Cubic
            ? "bicubic upsampling of a symbolic size is not supported"
            : "upsampling a symbolic size is supported for integer scale factors only";
    cv.fail(n, why);
  }
  cv.out(n, compose::resize_by_taps(cv.e, x, resize_spec(axes, mode, ac, r)));
}

}  // namespace

void register_sampling(OpTable& t) {
  t.on("aten.grid_sampler", grid_sampler);
  t.on("aten.grid_sampler_2d", grid_sampler);
  t.on("aten.grid_sampler_3d", grid_sampler);
  t.on("aten.im2col", im2col);
  t.on("aten.affine_grid_generator", affine_grid);
  t.on("aten.col2im", col2im);
  t.on("aten.max_unpool2d", +[](C& cv, const json& n) { max_unpool(cv, n, 2); });
  t.on("aten.max_unpool3d", +[](C& cv, const json& n) { max_unpool(cv, n, 3); });
  // the upsampling family: one converter, by spatial rank and mode
  struct Upsampling {
    const char* op;
    size_t spatial;
    Mode mode;
  };
  static const Upsampling upsamplings[] = {
      {"aten.upsample_nearest1d", 1, Mode::Nearest},
      {"aten.upsample_nearest2d", 2, Mode::Nearest},
      {"aten.upsample_nearest3d", 3, Mode::Nearest},
      {"aten._upsample_nearest_exact1d", 1, Mode::NearestExact},
      {"aten._upsample_nearest_exact2d", 2, Mode::NearestExact},
      {"aten._upsample_nearest_exact3d", 3, Mode::NearestExact},
      {"aten.upsample_linear1d", 1, Mode::Linear},
      {"aten.upsample_bilinear2d", 2, Mode::Linear},
      {"aten.upsample_trilinear3d", 3, Mode::Linear},
      {"aten.upsample_bicubic2d", 2, Mode::Cubic},
      {"aten._upsample_bilinear2d_aa", 2, Mode::LinearAA},
      {"aten._upsample_bicubic2d_aa", 2, Mode::CubicAA},
  };
  for (const Upsampling& u : upsamplings)
    t.on(u.op, [u](C& cv, const json& n) { upsample(cv, n, u.spatial, u.mode); });
}

}  // namespace torch_detail
}  // namespace milkit
