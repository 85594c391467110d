// Resizing by constant taps (gather + weighted sum per axis) or by a weight matrix per axis.
#include "milkit/compose/resize.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>

namespace milkit {
namespace compose {

namespace {

using Idx = std::vector<std::vector<int64_t>>;
using Wts = std::vector<std::vector<double>>;

// The taps of one axis: idx[k][i] / w[k][i] for tap k of output i; `outside` marks outputs
// taking the extrapolation value; `lerp` asks for a + (b - a) * w of two taps (Torch linear).
struct Taps {
  Idx idx;
  Wts w;
  std::vector<int64_t> outside;
  bool lerp = false;
};

size_t z(int64_t v) { return static_cast<size_t>(v); }

// ---- the ONNX reference's arithmetic (double) ----

double source_coord(ResizeCoord c, int64_t i, const ResizeAxis& a) {
  double x = static_cast<double>(i), scale = a.scale;
  int64_t in = a.in, out = a.out;
  if (c == ResizeCoord::HalfPixel) return (x + 0.5) / scale - 0.5;
  if (c == ResizeCoord::PytorchHalfPixel) return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  double len = static_cast<double>(in) * scale;  // ONNX's length_resized is not rounded
  if (c == ResizeCoord::AlignCorners)
    return len == 1 ? 0.0 : x * static_cast<double>(in - 1) / (len - 1);
  if (c == ResizeCoord::Asymmetric) return x / scale;
  if (c == ResizeCoord::HalfPixelSymmetric) {
    double adj = static_cast<double>(out) / (scale * static_cast<double>(in));
    double center = static_cast<double>(in) / 2.0;
    return center * (1 - adj) + (x + 0.5) / scale - 0.5;
  }
  double span = static_cast<double>(in - 1);
  if (out > 1)
    return a.roi_lo * span + x * (a.roi_hi - a.roi_lo) * span / static_cast<double>(out - 1);
  return 0.5 * (a.roi_lo + a.roi_hi) * span;
}

int64_t nearest_index(NearestRound m, double x) {
  double f = std::floor(x);
  if (m == NearestRound::Floor) return static_cast<int64_t>(f);
  if (m == NearestRound::Ceil) return static_cast<int64_t>(std::ceil(x));
  if (x - f == 0.5) return static_cast<int64_t>(m == NearestRound::RoundPreferCeil ? f + 1 : f);
  return static_cast<int64_t>(std::round(x));
}

// cubic convolution weight for distance t
double cubic(double t, double a) {
  t = std::fabs(t);
  if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
  if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
  return 0;
}

// The taps of output i with source xo (linear / cubic, plain or antialiased): `taps` entries
// starting `first` after floor(xo) (antialiased: after the pixel left of xo).
void onnx_interp(const ResizeSpec& s, const ResizeAxis& a, Taps& t, int64_t i, double xo, int taps,
                 bool aa) {
  bool lin = s.mode == ResizeMode::Linear;
  double f = std::floor(xo), frac = xo - f;
  int64_t i0 = static_cast<int64_t>(f);
  double ratio = aa && frac == 0 ? 1.0 : frac;
  int64_t left = aa && frac == 0 ? i0 - 1 : i0;
  int64_t first = aa ? 1 - taps / 2 : lin ? 0 : -1;
  double sum = 0;
  for (int k = 0; k < taps; ++k) {
    int64_t off = first + k, j = left + off;
    double d = (aa ? a.scale : 1.0) * (static_cast<double>(off) - ratio), wk;
    if (lin)
      wk = aa ? std::clamp(1 - std::fabs(d), 0.0, 1.0) : (k == 0 ? 1 - frac : frac);
    else
      wk = cubic(d, s.cubic_a);
    if (!lin || aa)
      if (s.exclude_outside && (j < 0 || j >= a.in)) wk = 0;
    t.idx[z(k)][z(i)] = std::clamp<int64_t>(j, 0, a.in - 1);
    t.w[z(k)][z(i)] = wk;
    sum += wk;
  }
  if ((aa || (!lin && s.exclude_outside)) && sum != 0)
    for (int k = 0; k < taps; ++k) t.w[z(k)][z(i)] /= sum;
}

Taps onnx_taps(const ResizeSpec& s, const ResizeAxis& a) {
  int taps = s.mode == ResizeMode::Nearest ? 1 : s.mode == ResizeMode::Linear ? 2 : 4;
  bool aa = s.antialias && s.mode != ResizeMode::Nearest && a.scale < 1.0;
  if (aa)
    taps = static_cast<int>(
        2 - 2 * (std::floor((s.mode == ResizeMode::Linear ? -1.0 : -2.0) / a.scale) + 1));
  Taps t;
  t.idx.assign(z(taps), std::vector<int64_t>(z(a.out)));
  t.w.assign(z(taps), std::vector<double>(z(a.out), 0.0));
  t.outside.assign(z(a.out), 0);
  for (int64_t i = 0; i < a.out; ++i) {
    double xo = source_coord(s.coord, i, a);
    if (s.coord == ResizeCoord::TfCropAndResize && (xo < 0 || xo > a.in - 1)) t.outside[z(i)] = 1;
    if (s.mode == ResizeMode::Nearest) {
      t.idx[0][z(i)] = std::clamp<int64_t>(nearest_index(s.nearest, xo), 0, a.in - 1);
      t.w[0][z(i)] = 1;
    } else {
      onnx_interp(s, a, t, i, xo, taps, aa);
    }
  }
  return t;
}

// ---- ATen's arithmetic (float) ----

float torch_scale(const ResizeAxis& a, bool ac) {
  const int64_t X = a.in, N = a.out;
  if (ac) return N > 1 ? static_cast<float>(X - 1) / static_cast<float>(N - 1) : 0.0f;
  if (a.scale > 0) return static_cast<float>(1.0 / a.scale);
  return static_cast<float>(X) / static_cast<float>(N);
}

Taps torch_cubic_taps(const ResizeAxis& a, bool ac) {
  const int64_t X = a.in, N = a.out;
  const float sc = torch_scale(a, ac), A = -0.75f;
  auto cc1 = [A](float x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };
  auto cc2 = [A](float x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };
  Taps t;
  t.idx.assign(4, {});
  t.w.assign(4, {});
  for (int64_t i = 0; i < N; ++i) {
    float src = ac ? sc * static_cast<float>(i) : sc * (static_cast<float>(i) + 0.5f) - 0.5f;
    if (N == X) src = static_cast<float>(i);
    const float fl = std::floor(src);
    const int64_t i0 = static_cast<int64_t>(fl);
    const float f = src - fl;
    const float c[4] = {cc2(f + 1.0f), cc1(f), cc1(1.0f - f), cc2(2.0f - f)};
    for (size_t k = 0; k < 4; ++k) {
      t.idx[k].push_back(std::min(std::max<int64_t>(i0 - 1 + static_cast<int64_t>(k), 0), X - 1));
      t.w[k].push_back(c[k]);
    }
  }
  return t;
}

Taps torch_taps(const ResizeSpec& s, const ResizeAxis& a) {
  const int64_t X = a.in, N = a.out;
  if (s.mode == ResizeMode::Cubic) return torch_cubic_taps(a, s.coord == ResizeCoord::AlignCorners);
  bool nearest = s.mode == ResizeMode::Nearest;
  bool exact = nearest && s.coord != ResizeCoord::Asymmetric;
  bool ac = !nearest && s.coord == ResizeCoord::AlignCorners;
  const float sc = torch_scale(a, ac);
  Taps t;
  t.idx.assign(nearest ? 1 : 2, {});
  t.w.assign(nearest ? 1 : 2, {});
  t.lerp = !nearest;
  for (int64_t i = 0; i < N; ++i) {
    const float fi = static_cast<float>(i);
    if (nearest) {
      float src = exact ? (fi + 0.5f) * sc : fi * sc;
      int64_t k = N == X ? i
                  : !exact && N == 2 * X
                      ? i >> 1
                      : std::min<int64_t>(static_cast<int64_t>(std::floor(src)), X - 1);
      t.idx[0].push_back(k);
      t.w[0].push_back(1);
      continue;
    }
    float src = N == X ? fi : ac ? sc * fi : std::max(0.0f, sc * (fi + 0.5f) - 0.5f);
    int64_t i0 = static_cast<int64_t>(src);
    int64_t i1 = i0 + (i0 < X - 1 ? 1 : 0);
    float l1 = N == X ? 0.0f : std::min(std::max(src - static_cast<float>(i0), 0.0f), 1.0f);
    t.idx[0].push_back(i0);
    t.idx[1].push_back(i1);
    t.w[1].push_back(l1);
  }
  return t;
}

// Torch's antialiased weights of one axis, [out][in].
Wts torch_aa_weights(const ResizeAxis& a, bool ac, bool cub) {
  const int64_t X = a.in, N = a.out;
  const float scale = torch_scale(a, ac);
  const float half = cub ? 2.0f : 1.0f;  // interp_size / 2
  const float support = scale >= 1.0f ? half * scale : half;
  const float invscale = scale >= 1.0f ? 1.0f / scale : 1.0f;
  const int64_t max_size = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  auto filter = [cub](float x) -> float {
    x = std::abs(x);
    if (!cub) return x < 1.0f ? 1.0f - x : 0.0f;
    const float A = -0.5f;
    if (x < 1.0f) return ((A + 2) * x - (A + 3)) * x * x + 1;
    if (x < 2.0f) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
    return 0.0f;
  };
  Wts w(z(N), std::vector<double>(z(X), 0.0));
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
      w[z(i)][z(xmin + j)] = total != 0 ? ws[z(j)] / total : ws[z(j)];
  }
  return w;
}

// x weighted by taps t along `ax` (rank r).
Var* apply_taps(Emitter& e, Var* x, int64_t ax, const Taps& t, const ResizeSpec& s) {
  int r = Emitter::rank(x);
  DataType ft = Emitter::dtype(x);
  size_t n = t.idx.size(), m = t.idx[0].size();
  // weights broadcast along the axis: [M] then ones (Torch), or ones except M (Onnx)
  std::vector<int64_t> ws;
  for (int64_t d = s.convention == ResizeConvention::Onnx ? 0 : ax; d < r; ++d)
    ws.push_back(d == ax ? static_cast<int64_t>(m) : 1);
  auto gather = [&](size_t k) {
    return e.op("gather", {Builder::arg("x", x), Builder::arg("indices", Value::int_list(t.idx[k])),
                           Builder::arg("axis", Value::scalar_int(DataType::Int32, ax))});
  };
  auto wv = [&](const std::vector<double>& w) { return e.c(Value::from_doubles(ft, ws, w)); };
  Var* acc = nullptr;
  if (t.lerp) {
    if (std::all_of(t.w[1].begin(), t.w[1].end(), [](double v) { return v == 0; }))
      return gather(0);
    Var* a = gather(0);
    return e.bin("add", a, e.bin("mul", e.bin("sub", gather(1), a), wv(t.w[1])));
  }
  for (size_t k = 0; k < n; ++k) {
    Var* g = gather(k);
    if (n > 1) g = e.bin("mul", g, wv(t.w[k]));
    acc = acc ? e.bin("add", acc, g) : g;
  }
  if (std::any_of(t.outside.begin(), t.outside.end(), [](int64_t v) { return v != 0; })) {
    std::vector<int64_t> ms(z(r), 1);
    ms[z(ax)] = static_cast<int64_t>(m);
    Var* mask = e.c(Value::from_ints(DataType::Bool, ms, t.outside));
    acc = e.sel(mask, e.cs(s.extrapolation, Emitter::dtype(acc)), acc);
  }
  return acc;
}

}  // namespace

Var* resize_by_taps(Emitter& e, Var* x, const ResizeSpec& s) {
  bool onnx = s.convention == ResizeConvention::Onnx;
  DataType dt = Emitter::dtype(x);
  bool interp = s.mode != ResizeMode::Nearest;
  Var* y = onnx && interp && !is_float(dt) ? e.cast(x, DataType::Float32) : x;
  int r = Emitter::rank(y);
  for (const ResizeAxis& a : s.axes) {
    int64_t ax = Emitter::axis(a.axis, r);
    if (onnx && a.in == a.out && a.scale == 1.0 && s.coord != ResizeCoord::TfCropAndResize)
      continue;
    if (!onnx && a.in == a.out && !interp) continue;
    y = apply_taps(e, y, ax, onnx ? onnx_taps(s, a) : torch_taps(s, a), s);
  }
  if (y == x) y = e.un("identity", x);
  if (Emitter::dtype(y) != dt) {
    if (!is_float(dt)) y = e.un("round", y);
    y = e.cast(y, dt);
  }
  return y;
}

Var* resize_by_matrix(Emitter& e, Var* x, const ResizeSpec& s) {
  int64_t r = Emitter::rank(x);
  DataType dt = Emitter::dtype(x);
  if (s.mode == ResizeMode::Nearest) fail("a resize by matrix needs linear or cubic interpolation");
  for (const ResizeAxis& a : s.axes) {
    int64_t ax = Emitter::axis(a.axis, r);
    Wts w = torch_aa_weights(a, s.coord == ResizeCoord::AlignCorners, s.mode == ResizeMode::Cubic);
    std::vector<double> wt;  // [in, out]
    for (int64_t j = 0; j < a.in; ++j)
      for (int64_t i = 0; i < a.out; ++i) wt.push_back(w[z(i)][z(j)]);
    std::vector<int64_t> perm;
    for (int64_t d = 0; d < r; ++d) perm.push_back(d);
    std::swap(perm[z(ax)], perm[z(r - 1)]);
    Var* t = ax == r - 1 ? x : e.transpose(x, perm);
    Var* y = e.op("matmul", {Builder::arg("x", t),
                             Builder::arg("y", e.c(Value::from_doubles(dt, {a.in, a.out}, wt))),
                             Builder::arg("transpose_x", Value::scalar_bool(false)),
                             Builder::arg("transpose_y", Value::scalar_bool(false))});
    x = ax == r - 1 ? y : e.transpose(y, perm);
  }
  return x;
}

Var* resize(Emitter& e, Var* x, const ResizeSpec& s) {
  if (s.antialias && s.convention == ResizeConvention::Torch) return resize_by_matrix(e, x, s);
  return resize_by_taps(e, x, s);
}

}  // namespace compose
}  // namespace milkit
