// Resizing to lengths known only at run time: each axis's source coordinates, taps and weights
// are computed by MIL ops in fp32, in either reference's arithmetic (ResizeConvention), one axis
// after another.
#include <cstdint>
#include <string>
#include <vector>

#include "milkit/compose/arith.h"
#include "milkit/compose/resize.h"
#include "milkit/types/error.h"

namespace milkit {
namespace compose {

namespace {

constexpr DataType kF32 = DataType::Float32;
constexpr DataType kI32 = DataType::Int32;

// ATen's source coordinate of each output index o (fp32 [out]): a step of (in - 1) / (out - 1)
// for align_corners, else 1 / scale_factor (as a float) or in / out; nearest floors o * step,
// nearest-exact (o + 0.5) * step, the rest take (o + 0.5) * step - 0.5 (linear clamped at 0).
Var* torch_coord(Emitter& e, const ResizeSpec& s, const RunTimeAxis& a, Var* o) {
  Var* in = e.cast(a.in, kF32);
  bool nearest = s.mode == ResizeMode::Nearest;
  Var* step;
  if (!nearest && s.coord == ResizeCoord::AlignCorners)
    step = e.bin("real_div", e.bin("sub", in, e.f32(1)),
                 e.cast(e.bin("maximum", e.bin("sub", a.out, e.cs(1, kI32)), e.cs(1, kI32)), kF32));
  else if (a.scale > 0)
    step = e.f32(static_cast<double>(static_cast<float>(1.0 / a.scale)));
  else
    step = e.bin("real_div", in, e.cast(a.out, kF32));
  Var* half = e.bin("add", o, e.f32(0.5));
  if (nearest) return e.bin("mul", s.coord == ResizeCoord::Asymmetric ? o : half, step);
  if (s.coord == ResizeCoord::AlignCorners) return e.bin("mul", o, step);
  Var* src = e.bin("sub", e.bin("mul", half, step), e.f32(0.5));
  return s.mode == ResizeMode::Linear ? e.bin("maximum", src, e.f32(0)) : src;
}

// The ONNX reference's source coordinate of each output index i (fp32 [out]) for s.coord, with
// the stated scale (or out / in) and the unrounded output length in * scale.
Var* onnx_coord(Emitter& e, const ResizeSpec& s, const RunTimeAxis& a, Var* i) {
  Var* in = e.cast(a.in, kF32);
  Var* out = e.cast(a.out, kF32);
  Var* scale = a.scale > 0 ? e.f32(a.scale) : e.bin("real_div", out, in);
  Var* width = a.scale > 0 ? e.bin("mul", in, scale) : out;
  Var* one = e.f32(1);
  Var* hp = e.bin("sub", e.bin("real_div", e.bin("add", i, e.f32(0.5)), scale), e.f32(0.5));
  switch (s.coord) {
    case ResizeCoord::HalfPixel:
      return hp;
    case ResizeCoord::Asymmetric:
      return e.bin("real_div", i, scale);
    case ResizeCoord::PytorchHalfPixel:
      return e.sel(e.bin("greater", out, one), hp, e.f32(0));
    case ResizeCoord::HalfPixelSymmetric: {
      Var* adj = e.bin("real_div", out, width);
      return e.bin("add", e.bin("mul", e.bin("mul", in, e.f32(0.5)), e.bin("sub", one, adj)), hp);
    }
    case ResizeCoord::AlignCorners: {
      Var* den = e.bin("maximum", e.bin("sub", out, one), one);
      Var* v = e.bin("real_div", e.bin("mul", i, e.bin("sub", in, one)), den);
      return e.sel(e.bin("equal", out, one), e.f32(0), v);
    }
    case ResizeCoord::TfCropAndResize:
      break;
  }
  throw ValueError("resize: tf_crop_and_resize needs the lengths known when converting");
}

// The nearest source index of coordinate c (before clamping), by the convention's rule
Var* nearest_of(Emitter& e, const ResizeSpec& s, Var* c) {
  if (s.convention == ResizeConvention::Torch) return e.un("floor", c);
  switch (s.nearest) {
    case NearestRound::Floor:
      return e.un("floor", c);
    case NearestRound::Ceil:
      return e.un("ceil", c);
    case NearestRound::RoundPreferCeil:
      return e.un("floor", e.bin("add", c, e.f32(0.5)));
    case NearestRound::RoundPreferFloor:
      break;
  }
  return e.un("ceil", e.bin("sub", c, e.f32(0.5)));
}

// Keys' cubic convolution weights (coefficient a) for a distance d <= 1 and for 1 < d < 2
Var* cubic_near(Emitter& e, Var* d, double a) {  // ((a + 2) d - (a + 3)) d^2 + 1
  Var* p = e.bin("sub", e.bin("mul", d, e.f32(a + 2)), e.f32(a + 3));
  return e.bin("add", e.bin("mul", p, e.bin("mul", d, d)), e.f32(1));
}

Var* cubic_far(Emitter& e, Var* d, double a) {  // ((a d - 5a) d + 8a) d - 4a
  Var* p = e.bin("sub", e.bin("mul", d, e.f32(a)), e.f32(5 * a));
  p = e.bin("add", e.bin("mul", p, d), e.f32(8 * a));
  return e.bin("sub", e.bin("mul", p, d), e.f32(4 * a));
}

// x resized along one axis
Var* resize_axis(Emitter& e, Var* x, const ResizeSpec& s, const RunTimeAxis& a) {
  const int r = Emitter::rank(x);
  const bool torch = s.convention == ResizeConvention::Torch;
  Var* idx = e.cast(iota(e, a.out), kF32);
  Var* src = torch ? torch_coord(e, s, a, idx) : onnx_coord(e, s, a, idx);
  Var* last = e.bin("sub", a.in, e.cs(1, kI32));
  auto tap = [&](Var* i0, int64_t j) {
    Var* i = j == 0 ? i0 : e.bin("add", i0, e.cs(static_cast<double>(j), kI32));
    i = e.bin("minimum", e.bin("maximum", i, e.cs(0, kI32)), last);
    return e.op("gather", {Builder::arg("x", x), Builder::arg("indices", i),
                           Builder::arg("axis", Value::scalar_int(kI32, a.axis))});
  };
  if (s.mode == ResizeMode::Nearest) return tap(e.cast(nearest_of(e, s, src), kI32), 0);
  // ONNX interpolates linearly inside [0, in - 1]
  if (!torch && s.mode == ResizeMode::Linear)
    src = e.bin("maximum", e.bin("minimum", src, e.cast(last, kF32)), e.f32(0));
  Var* fl = e.un("floor", src);
  Var* i0 = e.cast(fl, kI32);
  Var* t = e.bin("sub", src, fl);
  // a weight per output index, along the axis
  std::vector<int64_t> wshape(static_cast<size_t>(r), 1);
  wshape[static_cast<size_t>(a.axis)] = -1;
  auto along = [&](Var* w) { return e.cast(e.reshape(w, wshape), Emitter::dtype(x)); };
  if (s.mode == ResizeMode::Linear) {
    Var* x0 = tap(i0, 0);
    Var* x1 = tap(i0, 1);
    if (torch) return e.bin("add", x0, e.bin("mul", e.bin("sub", x1, x0), along(t)));
    Var* w = along(t);
    return e.bin("add", e.bin("mul", x0, e.bin("sub", e.cs(1, Emitter::dtype(x)), w)),
                 e.bin("mul", x1, w));
  }
  // taps floor - 1 .. floor + 2, at distances t + 1, t, 1 - t and 2 - t from the source
  Var* one = e.f32(1);
  Var* w[4] = {cubic_far(e, e.bin("add", t, one), s.cubic_a), cubic_near(e, t, s.cubic_a),
               cubic_near(e, e.bin("sub", one, t), s.cubic_a),
               cubic_far(e, e.bin("sub", e.f32(2), t), s.cubic_a)};
  Var* y = nullptr;
  for (int64_t j = 0; j < 4; ++j) {
    Var* term = e.bin("mul", tap(i0, j - 1), along(w[j]));
    y = y ? e.bin("add", y, term) : term;
  }
  return y;
}

}  // namespace

Var* resize_at_run_time(Emitter& e, Var* x, const ResizeSpec& s,
                        const std::vector<RunTimeAxis>& axes) {
  if (s.antialias || s.exclude_outside)
    throw ValueError(
        "resize: antialias and exclude_outside need the lengths known when converting");
  DataType dt = Emitter::dtype(x);
  if (s.mode != ResizeMode::Nearest && !is_float(dt))
    throw ValueError("resize: interpolating a " + std::string(dtype_name(dt)) +
                     " tensor needs the lengths known when converting");
  const bool b = dt == DataType::Bool;
  Var* y = b ? e.cast(x, kI32) : x;
  for (const RunTimeAxis& a : axes) y = resize_axis(e, y, s, a);
  return b ? e.cast(y, DataType::Bool) : y;
}

}  // namespace compose
}  // namespace milkit
