// Grid sampling: MIL's resample where it matches, else taps gathered from the flattened input.
#include "milkit/compose/sampling.h"

#include <cstddef>
#include <string>
#include <vector>

#include "milkit/compose/arith.h"

namespace milkit {
namespace compose {

namespace {

// torch's reflect_coordinates: c reflected into [twice_low / 2, twice_high / 2]
Var* reflect_torch(Emitter& e, Var* c, double twice_low, double twice_high) {
  DataType dt = Emitter::dtype(c);
  if (twice_low == twice_high) return e.bin("mul", c, e.cs(0, dt));
  double mn = twice_low / 2, span = (twice_high - twice_low) / 2;
  Var* in = e.un("abs", e.bin("sub", c, e.cs(mn, dt)));
  Var* flips = e.un("floor", e.bin("real_div", in, e.cs(span, dt)));
  Var* extra = e.bin("sub", in, e.bin("mul", flips, e.cs(span, dt)));
  Var* half = e.un("floor", e.bin("mul", flips, e.cs(0.5, dt)));
  Var* even = e.bin("equal", e.bin("sub", flips, e.bin("mul", half, e.cs(2, dt))), e.cs(0, dt));
  return e.sel(even, e.bin("add", extra, e.cs(mn, dt)),
               e.bin("add", e.bin("sub", e.cs(span, dt), extra), e.cs(mn, dt)));
}

// x reflected into [lo, hi] by its nearer border, repeatedly (ONNX's reference)
Var* reflect_onnx(Emitter& e, Var* x, double lo, double hi) {
  double rng = hi - lo;
  Var* below = e.bin("less", x, e.f32(lo));
  Var* dx = e.sel(below, e.bin("sub", e.f32(lo), x), e.bin("sub", x, e.f32(hi)));
  Var* k = e.un("floor", e.bin("real_div", dx, e.f32(rng)));
  Var* r = e.bin("sub", dx, e.bin("mul", k, e.f32(rng)));
  Var* even = e.bin(
      "equal", e.bin("sub", k, e.bin("mul", e.un("floor", e.bin("mul", k, e.f32(0.5))), e.f32(2))),
      e.f32(0));
  Var *from_lo = e.bin("add", e.f32(lo), r), *from_hi = e.bin("sub", e.f32(hi), r);
  Var* in = e.sel(below, e.sel(even, from_lo, from_hi), e.sel(even, from_hi, from_lo));
  Var* out = e.bin("logical_or", below, e.bin("greater", x, e.f32(hi)));
  return e.sel(out, in, x);
}

// Keys' cubic weight (A = -0.75) at distance |t - off|
Var* cubic_weight(Emitter& e, Var* t, double off) {
  const double A = -0.75;
  Var* d = e.un("abs", e.bin("sub", t, e.f32(off)));
  Var *d2 = e.bin("mul", d, d), *d3 = e.bin("mul", d2, d);
  Var* near =
      e.bin("add", e.bin("sub", e.bin("mul", d3, e.f32(A + 2)), e.bin("mul", d2, e.f32(A + 3))),
            e.f32(1));
  Var* far =
      e.bin("sub",
            e.bin("add", e.bin("sub", e.bin("mul", d3, e.f32(A)), e.bin("mul", d2, e.f32(5 * A))),
                  e.bin("mul", d, e.f32(8 * A))),
            e.f32(4 * A));
  return e.sel(e.bin("less_equal", d, e.f32(1)), near, far);
}

int tap_count(SampleMode m) {
  return m == SampleMode::Nearest ? 1 : m == SampleMode::Cubic ? 4 : 2;
}

// The taps of one spatial axis of size D: flat offsets (tap index * stride) and weights.
struct AxisTaps {
  std::vector<Var*> pos, w;
};

AxisTaps taps_torch(Emitter& e, Var* g, double D, int64_t stride, const GridSampleSpec& s) {
  bool align = s.align_corners;
  Var* c = align ? e.bin("mul", e.bin("add", g, e.f32(1)), e.f32((D - 1) / 2))
                 : e.bin("mul",
                         e.bin("sub", e.bin("mul", e.bin("add", g, e.f32(1)), e.f32(D)), e.f32(1)),
                         e.f32(0.5));
  auto clip = [&](Var* v) {
    return e.op("clip", {Builder::arg("x", v),
                         Builder::arg("alpha", Value::scalar_float(DataType::Float32, 0)),
                         Builder::arg("beta", Value::scalar_float(DataType::Float32, D - 1))});
  };
  auto padded = [&](Var* v) {
    if (s.padding == SamplePadding::Border) return clip(v);
    if (s.padding == SamplePadding::Reflection)
      return clip(align ? reflect_torch(e, v, 0, 2 * (D - 1)) : reflect_torch(e, v, -1, 2 * D - 1));
    return v;
  };
  if (s.mode != SampleMode::Cubic) c = padded(c);
  Var* f;
  Var* t = nullptr;
  if (s.mode == SampleMode::Nearest) {
    f = round_half_even(e, c);
  } else {
    f = e.un("floor", c);
    t = e.bin("sub", c, f);
  }
  AxisTaps r;
  for (int j = 0; j < tap_count(s.mode); ++j) {
    double off = s.mode == SampleMode::Cubic ? j - 1 : j;
    Var* q = e.bin("add", f, e.f32(off));
    Var* w;
    if (s.mode == SampleMode::Nearest) {
      w = e.bin("add", e.bin("mul", q, e.f32(0)), e.f32(1));
    } else if (s.mode == SampleMode::Linear) {
      w = j == 0 ? e.bin("sub", e.f32(1), t) : t;
    } else {
      w = cubic_weight(e, t, off);
      q = padded(q);
    }
    Var* ok = e.bin("logical_and", e.bin("greater_equal", q, e.f32(0)),
                    e.bin("less_equal", q, e.f32(D - 1)));
    r.w.push_back(e.sel(ok, w, e.f32(0)));
    r.pos.push_back(e.bin("mul", clip(q), e.f32(static_cast<double>(stride))));
  }
  return r;
}

AxisTaps taps_onnx(Emitter& e, Var* g, double D, int64_t stride, const GridSampleSpec& s) {
  bool align = s.align_corners;
  Var* c = align ? e.bin("mul", e.bin("add", g, e.f32(1)), e.f32((D - 1) / 2))
                 : e.bin("mul",
                         e.bin("sub", e.bin("mul", e.bin("add", g, e.f32(1)), e.f32(D)), e.f32(1)),
                         e.f32(0.5));
  if (s.mode == SampleMode::Nearest) c = round_half_even(e, c);
  double lo = align ? 0.0 : -0.5, hi = align ? D - 1 : D - 0.5;
  auto clip = [&](Var* v) {
    return e.op("clip", {Builder::arg("x", v),
                         Builder::arg("alpha", Value::scalar_float(DataType::Float32, 0)),
                         Builder::arg("beta", Value::scalar_float(DataType::Float32, D - 1))});
  };
  if (s.padding == SamplePadding::Border) {
    Var* out = e.bin("logical_or", e.bin("less", c, e.f32(lo)), e.bin("greater", c, e.f32(hi)));
    c = e.sel(out, clip(c), c);
  } else if (s.padding == SamplePadding::Reflection) {
    c = reflect_onnx(e, c, lo, hi);
  }
  Var* f = s.mode == SampleMode::Nearest ? c : e.un("floor", c);
  Var* t = e.bin("sub", c, f);
  AxisTaps r;
  for (int j = 0; j < tap_count(s.mode); ++j) {
    double off = s.mode == SampleMode::Cubic ? j - 1 : j;
    Var* id = e.bin("add", f, e.f32(off));
    Var* w;
    if (s.mode == SampleMode::Nearest)
      w = e.f32(1);
    else if (s.mode == SampleMode::Linear)
      w = j == 0 ? e.bin("sub", e.f32(1), t) : t;
    else
      w = cubic_weight(e, t, off);
    if (s.padding == SamplePadding::Zeros) {
      Var* ok =
          e.bin("logical_and", e.bin("greater_equal", id, e.f32(0)), e.bin("less", id, e.f32(D)));
      w = e.bin("mul", w, e.cast(ok, DataType::Float32));
    } else if (s.padding == SamplePadding::Reflection) {
      id = trunc(e, reflect_onnx(e, id, lo, hi));
    }
    r.pos.push_back(e.bin("mul", clip(id), e.f32(static_cast<double>(stride))));
    r.w.push_back(w);
  }
  return r;
}

Var* grid_gather(Emitter& e, Var* x, Var* grid, const GridSampleSpec& s) {
  auto xs = Emitter::static_shape(x), gs = Emitter::static_shape(grid);
  if (!xs || !gs)
    fail("grid sampling by taps needs the shapes of the input and the grid to be known");
  size_t k = xs->size() - 2;
  int gr = static_cast<int>(gs->size());
  if (gs->size() != k + 2 || gs->back() != static_cast<int64_t>(k))
    fail("the grid must be [N, out..., " + std::to_string(k) + "]");
  int64_t N = (*xs)[0], Cc = (*xs)[1], P = 1;
  for (size_t i = 0; i < k; ++i) P *= (*xs)[2 + i];
  DataType f32 = DataType::Float32;
  grid = e.cast(grid, f32);
  Var* flat = e.reshape(e.transpose(e.reshape(e.cast(x, f32), {N, Cc, P}), {0, 2, 1}), {N * P, Cc});
  std::vector<int64_t> bshape(static_cast<size_t>(gr - 1), 1);
  bshape[0] = N;
  std::vector<double> base(static_cast<size_t>(N));
  for (int64_t b = 0; b < N; ++b) base[static_cast<size_t>(b)] = static_cast<double>(b * P);
  Var* pos0 = e.c(Value::from_doubles(f32, bshape, base));
  std::vector<AxisTaps> taps(k);
  int64_t stride = 1;
  for (int64_t a = static_cast<int64_t>(k) - 1; a >= 0; --a) {
    size_t u = static_cast<size_t>(a);
    // the grid's last axis holds (x, y[, z]): the last spatial axis first
    int64_t comp = static_cast<int64_t>(k) - 1 - a;
    Var* g = e.squeeze(e.slice_axis(grid, gr - 1, comp, comp + 1), {gr - 1});
    double D = static_cast<double>((*xs)[2 + u]);
    taps[u] = s.convention == GridConvention::Torch ? taps_torch(e, g, D, stride, s)
                                                    : taps_onnx(e, g, D, stride, s);
    stride *= (*xs)[2 + u];
  }
  int nt = tap_count(s.mode);
  int64_t combos = 1;
  for (size_t i = 0; i < k; ++i) combos *= nt;
  Var* y = nullptr;
  for (int64_t cmb = 0; cmb < combos; ++cmb) {
    Var* id = pos0;
    Var* w = nullptr;
    for (int64_t rem = cmb, a = static_cast<int64_t>(k) - 1; a >= 0; --a, rem /= nt) {
      size_t u = static_cast<size_t>(a), j = static_cast<size_t>(rem % nt);
      id = e.bin("add", id, taps[u].pos[j]);
      w = w ? e.bin("mul", w, taps[u].w[j]) : taps[u].w[j];
    }
    Var* v = e.op("gather",
                  {Builder::arg("x", flat), Builder::arg("indices", e.cast(id, DataType::Int32)),
                   Builder::arg("axis", Value::scalar_int(DataType::Int32, 0))});  // [N, out..., C]
    v = e.bin("mul", v, e.expand_dims(w, {s.convention == GridConvention::Torch ? gr - 1 : -1}));
    y = y ? e.bin("add", y, v) : v;
  }
  std::vector<int64_t> perm{0, gr - 1};
  for (int i = 1; i < gr - 1; ++i) perm.push_back(i);
  return e.cast(e.transpose(y, perm), Emitter::dtype(x));
}

}  // namespace

Var* grid_sample(Emitter& e, Var* x, Var* grid, const GridSampleSpec& s) {
  int r = Emitter::rank(x);
  if (r < 3) fail("grid sampling needs an input [N, C, spatial...], not rank " + std::to_string(r));
  if (s.convention == GridConvention::Torch && !is_float(Emitter::dtype(x)))
    x = e.cast(x, DataType::Float32);
  if (r != 4 || s.mode == SampleMode::Cubic) return grid_gather(e, x, grid, s);
  const char* pm = s.padding == SamplePadding::Zeros    ? "constant"
                   : s.padding == SamplePadding::Border ? "border"
                   : s.align_corners                    ? "reflection"
                                                        : "symmetric";
  DataType dt = Emitter::dtype(x);
  return e.op(
      "resample",
      {Builder::arg("x", x), Builder::arg("coordinates", e.cast(grid, dt)),
       Builder::arg("sampling_mode",
                    Value::scalar_string(s.mode == SampleMode::Linear ? "bilinear" : "nearest")),
       Builder::arg("padding_mode", Value::scalar_string(pm)),
       Builder::arg("padding_value", Value::scalar_float(dt, 0.0)),
       Builder::arg("coordinates_mode", Value::scalar_string("normalized_minus_one_to_one")),
       Builder::arg("align_corners", Value::scalar_bool(s.align_corners))});
}

}  // namespace compose
}  // namespace milkit
