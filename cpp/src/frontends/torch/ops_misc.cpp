// ATen operators of other families: upsampling (nearest, nearest-exact, linear / bilinear /
// trilinear, bicubic, antialiased; 1-d, 2-d and 3-d), einsum, diagonal.
//
// Upsampling follows torch's index arithmetic (aten/src/ATen/native/UpSample.h), in float as torch
// computes it for float inputs: the source scale of an axis is 1 / scale_factor when the node
// carries one, else in / out (align_corners: (in - 1) / (out - 1)).
// - nearest: src = min(floor(i * scale), in - 1); nearest-exact: min(floor((i + 0.5) * scale), in -
// 1);
// - linear: src = max(0, scale * (i + 0.5) - 0.5) (align_corners: scale * i), between floor(src)
//   and the next pixel (clamped).
// MIL ops where they compute the same: upsample_nearest_neighbor for integer factors (floor(i /
// k)), resize_nearest_neighbor (floor((i + 0.5) * in / out)) and resize_bilinear (UNALIGN_CORNERS,
// STRICT_ALIGN_CORNERS) when the scale is in / out; upsample_bilinear for integer factors of
// symbolic sizes. Otherwise (a scale factor that is not out / in, e.g. 1.7 on 5 pixels, or a
// downsampling nearest) the taps are computed here and applied with gather (and a lerp); bicubic
// always (torch's cubic convolution, A = -0.75, four clamped taps per output), and 3-d modes.
// Antialiased bilinear / bicubic (antialias=True): a dense [out, in] matrix per axis with torch's
// filter weights (a triangle or Keys cubic with a = -0.5, stretched by the scale when shrinking).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "converter.h"
#include "milkit/types/error.h"

namespace milkit {
namespace torch_detail {

namespace {

using C = Converter;

Var* self(C& cv, const json& n) {
  return C::has(n, "self") ? cv.tensor(n, "self") : cv.tensor(n, "input");
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

// torch's float source scale of an axis.
float source_scale(const Axis& a, bool align_corners) {
  const int64_t X = a.in->value(), N = a.out->value();
  if (align_corners) return N > 1 ? static_cast<float>(X - 1) / static_cast<float>(N - 1) : 0.0f;
  if (a.scale && *a.scale > 0) return static_cast<float>(1.0 / *a.scale);
  return static_cast<float>(X) / static_cast<float>(N);
}

// The taps of one static axis (torch's arithmetic): sources lo / hi and the weight of hi.
void taps(const Axis& a, Mode m, bool ac, std::vector<int64_t>& lo, std::vector<int64_t>& hi,
          std::vector<double>& w) {
  const int64_t X = a.in->value(), N = a.out->value();
  const float s = source_scale(a, ac);
  for (int64_t i = 0; i < N; ++i) {
    if (m == Mode::Nearest) {
      int64_t k = N == X ? i
                  : N == 2 * X
                      ? i >> 1
                      : std::min<int64_t>(
                            static_cast<int64_t>(std::floor(static_cast<float>(i) * s)), X - 1);
      lo.push_back(k);
    } else if (m == Mode::NearestExact) {
      int64_t k =
          N == X ? i
                 : std::min<int64_t>(
                       static_cast<int64_t>(std::floor((static_cast<float>(i) + 0.5f) * s)), X - 1);
      lo.push_back(k);
    } else if (N == X) {
      lo.push_back(i);
      hi.push_back(i);
      w.push_back(0);
    } else {
      float src = ac ? s * static_cast<float>(i)
                     : std::max(0.0f, s * (static_cast<float>(i) + 0.5f) - 0.5f);
      int64_t i0 = static_cast<int64_t>(src);
      int64_t i1 = i0 + (i0 < X - 1 ? 1 : 0);
      float l1 = std::min(std::max(src - static_cast<float>(i0), 0.0f), 1.0f);
      lo.push_back(i0);
      hi.push_back(i1);
      w.push_back(l1);
    }
  }
}

// torch's bicubic taps of one static axis (A = -0.75; indices clamped to the image): four
// sources per output and their weights.
void cubic_taps(const Axis& a, bool ac, std::vector<std::vector<int64_t>>& idx,
                std::vector<std::vector<double>>& w) {
  const int64_t X = a.in->value(), N = a.out->value();
  const float s = source_scale(a, ac);
  const float A = -0.75f;
  auto cc1 = [A](float x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };
  auto cc2 = [A](float x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };
  idx.assign(4, {});
  w.assign(4, {});
  for (int64_t i = 0; i < N; ++i) {
    float src = ac ? s * static_cast<float>(i) : s * (static_cast<float>(i) + 0.5f) - 0.5f;
    if (N == X) src = static_cast<float>(i);
    const float fl = std::floor(src);
    const int64_t i0 = static_cast<int64_t>(fl);
    const float t = src - fl;
    const float c[4] = {cc2(t + 1.0f), cc1(t), cc1(1.0f - t), cc2(2.0f - t)};
    for (int k = 0; k < 4; ++k) {
      idx[static_cast<size_t>(k)].push_back(std::min(std::max<int64_t>(i0 - 1 + k, 0), X - 1));
      w[static_cast<size_t>(k)].push_back(c[k]);
    }
  }
}

// torch's antialiased weights of one static axis ([N][X]): a triangle (linear) or Keys cubic
// (a = -0.5) filter stretched by the scale when downsampling, normalized per output.
std::vector<std::vector<double>> aa_weights(const Axis& a, bool ac, bool cubic) {
  const int64_t X = a.in->value(), N = a.out->value();
  const float scale = source_scale(a, ac);
  const float half = cubic ? 2.0f : 1.0f;  // interp_size / 2
  const float support = scale >= 1.0f ? half * scale : half;
  const float invscale = scale >= 1.0f ? 1.0f / scale : 1.0f;
  const int64_t max_size = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  auto filter = [cubic](float x) -> float {
    x = std::abs(x);
    if (!cubic) return x < 1.0f ? 1.0f - x : 0.0f;
    const float A = -0.5f;
    if (x < 1.0f) return ((A + 2) * x - (A + 3)) * x * x + 1;
    if (x < 2.0f) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
    return 0.0f;
  };
  std::vector<std::vector<double>> w(static_cast<size_t>(N),
                                     std::vector<double>(static_cast<size_t>(X), 0.0));
  for (int64_t i = 0; i < N; ++i) {
    const float center = scale * (static_cast<float>(i) + 0.5f);
    const int64_t xmin = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5f), 0);
    const int64_t xsize = std::clamp<int64_t>(
        std::min<int64_t>(static_cast<int64_t>(center + support + 0.5f), X) - xmin, 0, max_size);
    std::vector<float> ws;
    float total = 0;
    for (int64_t j = 0; j < xsize; ++j) {
      ws.push_back(filter((static_cast<float>(j + xmin) - center + 0.5f) * invscale));
      total += ws.back();
    }
    for (int64_t j = 0; j < xsize; ++j)
      w[static_cast<size_t>(i)][static_cast<size_t>(xmin + j)] =
          total != 0 ? ws[static_cast<size_t>(j)] / total : ws[static_cast<size_t>(j)];
  }
  return w;
}

// Resizes the last axes of x by a dense [N, X] matrix per axis (antialiased modes).
Var* resize_by_matrix(C& cv, Var* x, const std::vector<Axis>& axes, bool ac, bool cubic) {
  const int64_t r = static_cast<int64_t>(C::shape(x).size());
  const size_t sp = axes.size();
  DataType dt = C::dtype(x);
  for (size_t k = 0; k < sp; ++k) {
    const int64_t axis = r - static_cast<int64_t>(sp) + static_cast<int64_t>(k);
    auto w = aa_weights(axes[k], ac, cubic);
    const int64_t N = axes[k].out->value(), X = axes[k].in->value();
    std::vector<double> wt;  // [X, N]
    for (int64_t j = 0; j < X; ++j)
      for (int64_t i = 0; i < N; ++i)
        wt.push_back(w[static_cast<size_t>(i)][static_cast<size_t>(j)]);
    std::vector<int64_t> perm;
    for (int64_t d = 0; d < r; ++d) perm.push_back(d);
    std::swap(perm[static_cast<size_t>(axis)], perm[static_cast<size_t>(r - 1)]);
    Var* t = axis == r - 1 ? x : cv.op("transpose", {C::a("x", x), C::aints32("perm", perm)});
    Var* y = cv.op("matmul", {C::a("x", t), C::a("y", cv.c(Value::from_doubles(dt, {X, N}, wt))),
                              C::abool("transpose_x", false), C::abool("transpose_y", false)});
    x = axis == r - 1 ? y : cv.op("transpose", {C::a("x", y), C::aints32("perm", perm)});
  }
  return x;
}

// Resizes the last axes of x (rank r) by explicit taps.
Var* resize_by_taps(C& cv, Var* x, const std::vector<Axis>& axes, Mode m, bool ac) {
  const int r = static_cast<int>(C::shape(x).size());
  const size_t sp = axes.size();
  DataType dt = C::dtype(x);
  for (size_t k = 0; k < sp; ++k) {
    const int64_t axis = r - static_cast<int64_t>(sp) + static_cast<int64_t>(k);
    if (axes[k].in == axes[k].out && (m == Mode::Nearest || m == Mode::NearestExact)) continue;
    auto gather = [&](const std::vector<int64_t>& idx) {
      return cv.op("gather",
                   {C::a("x", x), C::a("indices", Value::int_list(idx)), C::ai32("axis", axis)});
    };
    std::vector<int64_t> wshape = {axes[k].out->value()};
    for (int64_t d = axis + 1; d < r; ++d) wshape.push_back(1);
    if (m == Mode::Cubic) {
      // sum of the four taps, each weighted along the axis
      std::vector<std::vector<int64_t>> idx;
      std::vector<std::vector<double>> cw;
      cubic_taps(axes[k], ac, idx, cw);
      Var* acc = nullptr;
      for (size_t j = 0; j < 4; ++j) {
        Var* term = cv.op("mul", {C::a("x", gather(idx[j])),
                                  C::a("y", cv.c(Value::from_doubles(dt, wshape, cw[j])))});
        acc = acc ? cv.op("add", {C::a("x", acc), C::a("y", term)}) : term;
      }
      x = acc;
      continue;
    }
    std::vector<int64_t> lo, hi;
    std::vector<double> w;
    taps(axes[k], m, ac, lo, hi, w);
    if (m != Mode::Linear) {
      x = gather(lo);
      continue;
    }
    if (std::all_of(w.begin(), w.end(), [](double v) { return v == 0; })) {
      x = gather(lo);
      continue;
    }
    // x[lo] + (x[hi] - x[lo]) * w, w broadcast along the axis
    Var* a = gather(lo);
    Var* b = gather(hi);
    Var* wv = cv.c(Value::from_doubles(dt, wshape, w));
    Var* diff = cv.op("sub", {C::a("x", b), C::a("y", a)});
    x = cv.op("add", {C::a("x", a), C::a("y", cv.op("mul", {C::a("x", diff), C::a("y", wv)}))});
  }
  return x;
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
    cv.out(n, aa ? resize_by_matrix(cv, x, axes, ac, mode == Mode::CubicAA)
                 : resize_by_taps(cv, x, axes, mode, ac));
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
  if (!all_static) {
    std::string why =
        mode == Mode::Linear && all_factor
            ? "linear upsampling of a symbolic size without align_corners needs iOS16 or later"
        : mode == Mode::Cubic
            ? "bicubic upsampling of a symbolic size is not supported"
            : "upsampling a symbolic size is supported for integer scale factors only";
    cv.fail(n, why);
  }
  cv.out(n, resize_by_taps(cv, x, axes, mode, ac));
}

// ---- einsum
// --------------------------------------------------------------------------------------

// Labels: letters as their codes; the dims of an ellipsis as 0..E-1 (right-aligned).
using Labels = std::vector<int>;

struct Operand {
  Var* v;
  Labels l;
};

Var* transpose_to(C& cv, Var* v, const Labels& from, const Labels& to) {
  std::vector<int64_t> perm;
  for (int lab : to) perm.push_back(std::find(from.begin(), from.end(), lab) - from.begin());
  bool id = true;
  for (size_t i = 0; i < perm.size(); ++i) id = id && perm[i] == static_cast<int64_t>(i);
  return id ? v : cv.op("transpose", {C::a("x", v), C::aints32("perm", perm)});
}

Var* reduce_sum(C& cv, Var* v, const std::vector<int64_t>& axes) {
  return cv.op("reduce_sum",
               {C::a("x", v), C::aints32("axes", axes), C::abool("keep_dims", false)});
}

// Sums out the labels of `o` not in `keep`.
void sum_out(C& cv, Operand& o, const std::set<int>& keep) {
  std::vector<int64_t> axes;
  Labels rest;
  for (size_t i = 0; i < o.l.size(); ++i) {
    if (keep.count(o.l[i]))
      rest.push_back(o.l[i]);
    else
      axes.push_back(static_cast<int64_t>(i));
  }
  if (axes.empty()) return;
  o.v = reduce_sum(cv, o.v, axes);
  o.l = rest;
}

// Takes the diagonal of repeated labels in one operand (x * eye summed over the second axis).
void diagonals(C& cv, const json& n, Operand& o) {
  for (;;) {
    size_t a = 0, b = 0;
    bool found = false;
    for (size_t i = 0; i < o.l.size() && !found; ++i)
      for (size_t j = i + 1; j < o.l.size() && !found; ++j)
        if (o.l[i] == o.l[j]) {
          a = i;
          b = j;
          found = true;
        }
    if (!found) return;
    auto& sh = C::shape(o.v);
    if (!sh[a]->is_const() || sh[a] != sh[b])
      cv.fail(n, "a repeated subscript needs equal known sizes, got " + o.v->type()->str());
    const int64_t d = sh[a]->value();
    std::vector<int64_t> es(sh.size(), 1);
    es[a] = es[b] = d;
    std::vector<double> eye(static_cast<size_t>(d * d), 0.0);
    for (int64_t i = 0; i < d; ++i) eye[static_cast<size_t>(i * d + i)] = 1.0;
    Var* m = cv.op("mul",
                   {C::a("x", o.v), C::a("y", cv.c(Value::from_doubles(C::dtype(o.v), es, eye)))});
    o.v = reduce_sum(cv, m, {static_cast<int64_t>(b)});
    o.l.erase(o.l.begin() + static_cast<int64_t>(b));
  }
}

Dim prod(C& cv, const std::vector<Dim>& ds) {
  Dim p = cv.ctx().constant(1);
  for (Dim d : ds) p = cv.ctx().mul(p, d);
  return p;
}

Var* reshape(C& cv, Var* v, const std::vector<Dim>& dims) {
  if (C::shape(v) == dims) return v;
  return cv.op("reshape", {C::a("x", v), C::a("shape", cv.shape_var(dims))});
}

// Contracts two operands; `needed` are the labels used after them.
Operand contract(C& cv, Operand A, Operand B, const std::set<int>& needed) {
  std::set<int> la(A.l.begin(), A.l.end()), lb(B.l.begin(), B.l.end());
  std::set<int> keep_a = needed, keep_b = needed;
  keep_a.insert(lb.begin(), lb.end());
  keep_b.insert(la.begin(), la.end());
  sum_out(cv, A, keep_a);
  sum_out(cv, B, keep_b);
  Labels batch, aonly, bonly, con;
  for (int l : A.l) {
    bool inb = std::find(B.l.begin(), B.l.end(), l) != B.l.end();
    if (inb && needed.count(l))
      batch.push_back(l);
    else if (inb)
      con.push_back(l);
    else
      aonly.push_back(l);
  }
  for (int l : B.l)
    if (std::find(A.l.begin(), A.l.end(), l) == A.l.end()) bonly.push_back(l);
  Labels outl = batch;
  outl.insert(outl.end(), aonly.begin(), aonly.end());
  outl.insert(outl.end(), bonly.begin(), bonly.end());
  auto dims_of = [](const Operand& o, const Labels& ls) {
    std::vector<Dim> r;
    for (int l : ls)
      r.push_back(
          C::shape(o.v)[static_cast<size_t>(std::find(o.l.begin(), o.l.end(), l) - o.l.begin())]);
    return r;
  };
  if (con.empty()) {
    // an outer product over the batch labels: broadcast both to the output order and multiply
    auto place = [&](const Operand& o) {
      Labels have;
      for (int l : outl)
        if (std::find(o.l.begin(), o.l.end(), l) != o.l.end()) have.push_back(l);
      Var* v = transpose_to(cv, o.v, o.l, have);
      std::vector<int64_t> axes;
      for (size_t i = 0; i < outl.size(); ++i)
        if (std::find(have.begin(), have.end(), outl[i]) == have.end())
          axes.push_back(static_cast<int64_t>(i));
      return axes.empty() ? v : cv.op("expand_dims", {C::a("x", v), C::aints32("axes", axes)});
    };
    return {cv.op("mul", {C::a("x", place(A)), C::a("y", place(B))}), outl};
  }
  // [batch..., M, K] x [batch..., K, N]
  Labels ta = batch, tb = batch;
  ta.insert(ta.end(), aonly.begin(), aonly.end());
  ta.insert(ta.end(), con.begin(), con.end());
  tb.insert(tb.end(), con.begin(), con.end());
  tb.insert(tb.end(), bonly.begin(), bonly.end());
  Var* a = transpose_to(cv, A.v, A.l, ta);
  Var* b = transpose_to(cv, B.v, B.l, tb);
  std::vector<Dim> bd_a = dims_of(A, batch), bd_b = dims_of(B, batch);
  std::vector<Dim> ad = dims_of(A, aonly), bd = dims_of(B, bonly), kd = dims_of(A, con);
  std::vector<Dim> sa = bd_a, sb = bd_b;
  sa.push_back(prod(cv, ad));
  sa.push_back(prod(cv, kd));
  sb.push_back(prod(cv, kd));
  sb.push_back(prod(cv, bd));
  a = reshape(cv, a, sa);
  b = reshape(cv, b, sb);
  Var* y = cv.op("matmul", {C::a("x", a), C::a("y", b), C::abool("transpose_x", false),
                            C::abool("transpose_y", false)});
  std::vector<Dim> so(C::shape(y).begin(),
                      C::shape(y).begin() + static_cast<int64_t>(batch.size()));
  so.insert(so.end(), ad.begin(), ad.end());
  so.insert(so.end(), bd.begin(), bd.end());
  return {reshape(cv, y, so), outl};
}

void einsum(C& cv, const json& n) {
  std::string eq = cv.s(n, "equation", "");
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  auto ops = cv.tensors(n, "tensors");
  auto arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t p = 0;;) {
    size_t q = lhs.find(',', p);
    terms.push_back(lhs.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  if (terms.size() != ops.size())
    cv.fail(n, "the equation '" + eq + "' has " + std::to_string(terms.size()) + " operands, " +
                   std::to_string(ops.size()) + " tensors are given");
  DataType dt = cv.out_dtype(n).value_or(DataType::Float32);
  // ellipsis ranks
  auto letters = [&](const std::string& t, bool* ell) {
    Labels r;
    *ell = false;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t.compare(i, 3, "...") == 0) {
        if (*ell) cv.fail(n, "more than one ellipsis in '" + t + "'");
        *ell = true;
        r.push_back(-1);
        i += 2;
      } else if (std::isalpha(static_cast<unsigned char>(t[i]))) {
        r.push_back(static_cast<unsigned char>(t[i]) + 256);
      } else {
        cv.fail(n, "invalid subscript '" + std::string(1, t[i]) + "' in the equation '" + eq + "'");
      }
    }
    return r;
  };
  std::vector<Operand> os;
  int E = 0;
  std::vector<Labels> raw;
  for (size_t k = 0; k < ops.size(); ++k) {
    bool ell = false;
    Labels l = letters(terms[k], &ell);
    int r = cv.rank(n, ops[k]);
    int named = static_cast<int>(l.size()) - (ell ? 1 : 0);
    if ((ell && r < named) || (!ell && r != named))
      cv.fail(n, "operand " + std::to_string(k) + " has rank " + std::to_string(r) +
                     ", the subscripts '" + terms[k] + "' need " + std::to_string(named));
    if (ell) E = std::max(E, r - named);
    raw.push_back(l);
  }
  std::map<int, int> count;
  for (size_t k = 0; k < ops.size(); ++k) {
    int r = cv.rank(n, ops[k]);
    Labels l;
    for (int lab : raw[k]) {
      if (lab == -1) {
        int e = r - (static_cast<int>(raw[k].size()) - 1);
        for (int i = E - e; i < E; ++i) l.push_back(i);
      } else {
        l.push_back(lab);
      }
    }
    for (int lab : l) ++count[lab];
    os.push_back({cv.cast(ops[k], dt), l});
  }
  Labels outl;
  if (arrow != std::string::npos) {
    bool ell = false;
    Labels l = letters(eq.substr(arrow + 2), &ell);
    for (int lab : l) {
      if (lab == -1) {
        for (int i = 0; i < E; ++i) outl.push_back(i);
      } else {
        if (!count.count(lab))
          cv.fail(n, "output subscript '" + std::string(1, static_cast<char>(lab - 256)) +
                         "' is not in any input");
        if (std::find(outl.begin(), outl.end(), lab) != outl.end())
          cv.fail(n, "output subscript '" + std::string(1, static_cast<char>(lab - 256)) +
                         "' appears more than once");
        outl.push_back(lab);
      }
    }
  } else {
    for (int i = 0; i < E; ++i) outl.push_back(i);
    for (auto& [lab, c] : count)
      if (lab >= 256 && c == 1) outl.push_back(lab);
  }
  std::set<int> outs(outl.begin(), outl.end());
  for (auto& o : os) diagonals(cv, n, o);
  // left to right
  Operand cur = os[0];
  for (size_t k = 1; k < os.size(); ++k) {
    std::set<int> needed = outs;
    for (size_t j = k + 1; j < os.size(); ++j) needed.insert(os[j].l.begin(), os[j].l.end());
    cur = contract(cv, cur, os[k], needed);
  }
  sum_out(cv, cur, outs);
  // labels of ellipsis dims absent from a single operand broadcast: none here (E from the inputs)
  cv.out(n, transpose_to(cv, cur.v, cur.l, outl));
}

// diagonal(self, offset, dim1, dim2): the two dims moved last, flattened, sliced with stride n2
// + 1.
void diagonal(C& cv, const json& n) {
  Var* x = self(cv, n);
  const int r = cv.rank(n, x);
  int64_t off = cv.i(n, "offset", 0);
  int64_t d1 = cv.axis(n, cv.i(n, "dim1", 0), r), d2 = cv.axis(n, cv.i(n, "dim2", 1), r);
  if (d1 == d2) cv.fail(n, "dim1 and dim2 cannot be the same dim");
  auto& sh = C::shape(x);
  if (!sh[static_cast<size_t>(d1)]->is_const() || !sh[static_cast<size_t>(d2)]->is_const())
    cv.fail(n, "the diagonal of symbolic sizes is not supported");
  const int64_t n1 = sh[static_cast<size_t>(d1)]->value(),
                n2 = sh[static_cast<size_t>(d2)]->value();
  const int64_t len =
      std::max<int64_t>(0, off >= 0 ? std::min(n1, n2 - off) : std::min(n1 + off, n2));
  std::vector<int64_t> perm;
  std::vector<Dim> dims;
  for (int64_t i = 0; i < r; ++i)
    if (i != d1 && i != d2) {
      perm.push_back(i);
      dims.push_back(sh[static_cast<size_t>(i)]);
    }
  perm.push_back(d1);
  perm.push_back(d2);
  Var* t = cv.op("transpose", {C::a("x", x), C::aints32("perm", perm)});
  std::vector<Dim> flat = dims;
  flat.push_back(cv.ctx().constant(n1 * n2));
  Var* f = reshape(cv, t, flat);
  const int64_t start = off >= 0 ? off : -off * n2;
  const size_t rr = dims.size() + 1;
  std::vector<int64_t> begin(rr, 0), end(rr, 0), stride(rr, 1);
  std::vector<int64_t> bm(rr, 1), em(rr, 1);
  begin[rr - 1] = start;
  end[rr - 1] = start + (len > 0 ? (len - 1) * (n2 + 1) + 1 : 0);
  stride[rr - 1] = n2 + 1;
  bm[rr - 1] = em[rr - 1] = 0;
  const int64_t rk = static_cast<int64_t>(rr);
  cv.out(n,
         cv.op("slice_by_index", {C::a("x", f), C::aints32("begin", begin), C::aints32("end", end),
                                  C::aints32("stride", stride),
                                  C::a("begin_mask", Value::from_ints(DataType::Bool, {rk}, bm)),
                                  C::a("end_mask", Value::from_ints(DataType::Bool, {rk}, em))}));
}

}  // namespace

void register_misc(OpTable& t) {
  t["aten.upsample_nearest1d"] = [](C& cv, const json& n) { upsample(cv, n, 1, Mode::Nearest); };
  t["aten.upsample_nearest2d"] = [](C& cv, const json& n) { upsample(cv, n, 2, Mode::Nearest); };
  t["aten._upsample_nearest_exact1d"] = [](C& cv, const json& n) {
    upsample(cv, n, 1, Mode::NearestExact);
  };
  t["aten._upsample_nearest_exact2d"] = [](C& cv, const json& n) {
    upsample(cv, n, 2, Mode::NearestExact);
  };
  t["aten.upsample_linear1d"] = [](C& cv, const json& n) { upsample(cv, n, 1, Mode::Linear); };
  t["aten.upsample_bilinear2d"] = [](C& cv, const json& n) { upsample(cv, n, 2, Mode::Linear); };
  t["aten.upsample_bicubic2d"] = [](C& cv, const json& n) { upsample(cv, n, 2, Mode::Cubic); };
  t["aten._upsample_bilinear2d_aa"] = [](C& cv, const json& n) {
    upsample(cv, n, 2, Mode::LinearAA);
  };
  t["aten._upsample_bicubic2d_aa"] = [](C& cv, const json& n) {
    upsample(cv, n, 2, Mode::CubicAA);
  };
  t["aten.upsample_nearest3d"] = [](C& cv, const json& n) { upsample(cv, n, 3, Mode::Nearest); };
  t["aten._upsample_nearest_exact3d"] = [](C& cv, const json& n) {
    upsample(cv, n, 3, Mode::NearestExact);
  };
  t["aten.upsample_trilinear3d"] = [](C& cv, const json& n) { upsample(cv, n, 3, Mode::Linear); };
  t["aten.einsum"] = einsum;
  t["aten.diagonal"] = diagonal;
}

}  // namespace torch_detail
}  // namespace milkit
