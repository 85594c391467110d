// Kernels of the image resizing ops: upsample_nearest_neighbor, upsample_bilinear,
// resize_nearest_neighbor, resize_bilinear, resize, crop, crop_resize, resample, affine. fp16
// arrives as fp32 (float_compute) except for crop, which moves elements as they are.
//
// Sampling grids (coremltools' resize_bilinear documentation; Core ML's SamplingMode): over an
// input of size X sampled at N points, grid point i is
//   STRICT_ALIGN_CORNERS  i * (X - 1) / (N - 1)           (0 when N == 1)
//   ALIGN_CORNERS         the same, (X - 1) / 2 when N == 1
//   DEFAULT               i * X / N
//   OFFSET_CORNERS        (i + 0.5) * max(1, X - 1) / N
//   UNALIGN_CORNERS       (i + 0.5) * X / N - 0.5
// clamped to [0, X - 1]; linear interpolation between floor(g) and floor(g) + 1. crop_resize
// uses the same grids on each box: a box from s to e stands for [0, X - 1] with X - 1 = e - s
// (so an integer box resizes exactly the pixels s..e, and OFFSET_CORNERS is RoI Align's sampling),
// a reversed box (e < s) samples the mirrored grid, and points outside the image take pad_value
// (tf.image.crop_and_resize's extrapolation, which coremltools' TensorFlow frontend maps to it).
//
// Nearest neighbor, which the MIL documentation does not pin down:
//   upsample_nearest_neighbor: floor(i / scale) (torch's interpolate with a scale factor, the
//     op coremltools lowers it to), the identity when the size is unchanged;
//   resize_nearest_neighbor and resize(NEAREST_NEIGHBOR) with DEFAULT or UNALIGN_CORNERS:
//     floor((i + 0.5) * X / N), half-pixel centers (tf's resize_nearest_neighbor with
//     half_pixel_centers, which coremltools' TensorFlow frontend lowers to these ops; torch's
//     "nearest-exact");
//   resize(NEAREST_NEIGHBOR) with the other modes: the grid point rounded half away from zero.
// upsample_bilinear: align_corners -> STRICT_ALIGN_CORNERS; else half_pixel_centers (default
// !align_corners) -> UNALIGN_CORNERS, or DEFAULT without; both True is rejected (no such grid).
// resize on int32 x interpolates in double and rounds to nearest (ties to even).
//
// resample / affine sample x at pixel coordinates from `coordinates` (or the affine map of the
// output grid) as torch's grid_sample does: normalized coordinates map to pixels by
// align_corners; "constant" pads with padding_value, "border" clamps, "reflection" reflects about
// the first and last pixel centers (|1 2 3| -> 2 3 2 1 2 3 2 1), "symmetric" about the image
// edges (3 2 1 1 2 3 3 2 1); "nearest" rounds half to even. A NaN coordinate gives padding_value
// with "constant" padding, 0 with the others.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>

#include "../dispatch.h"
#include "kernels.h"
#include "milkit/exec/threads.h"

namespace milkit {

namespace {

enum class Grid { Strict, Align, Default, Offset, Unalign };

Grid parse_grid(const KernelCtx& k, const std::string& s) {
  if (s == "STRICT_ALIGN_CORNERS") return Grid::Strict;
  if (s == "ALIGN_CORNERS") return Grid::Align;
  if (s == "DEFAULT") return Grid::Default;
  if (s == "OFFSET_CORNERS") return Grid::Offset;
  if (s == "UNALIGN_CORNERS") return Grid::Unalign;
  k.fail("unknown sampling_mode \"" + s + "\"");
}

/// Grid point i of n over [0, len] (an input of len + 1 pixels, len >= 0), clamped to it.
double grid_point(Grid m, int64_t i, int64_t n, double len) {
  const double x = len + 1.0, di = static_cast<double>(i), dn = static_cast<double>(n);
  double g = 0;
  switch (m) {
    case Grid::Strict: g = n == 1 ? 0.0 : di * len / (dn - 1); break;
    case Grid::Align: g = n == 1 ? len / 2 : di * len / (dn - 1); break;
    case Grid::Default: g = di * x / dn; break;
    case Grid::Offset: {
      const double delta = std::max(1.0, len) / dn;
      g = 0.5 * delta + di * delta;
      break;
    }
    case Grid::Unalign: g = (di + 0.5) * x / dn - 0.5; break;
  }
  return std::min(len, std::max(0.0, g));
}

/// One axis of a separable resize: output i = src[lo[i]] * (1 - w[i]) + src[hi[i]] * w[i].
struct Taps {
  std::vector<int64_t> lo, hi;
  std::vector<double> w;
  size_t size() const { return lo.size(); }
};

Taps linear_taps(Grid m, int64_t in, int64_t out) {
  Taps t;
  for (int64_t i = 0; i < out; ++i) {
    const double g = grid_point(m, i, out, static_cast<double>(in - 1));
    const int64_t l = std::min<int64_t>(static_cast<int64_t>(std::floor(g)), in - 1);
    t.lo.push_back(l);
    t.hi.push_back(std::min(l + 1, in - 1));
    t.w.push_back(g - static_cast<double>(l));
  }
  return t;
}

Taps nearest_taps(const std::vector<int64_t>& idx) {
  Taps t;
  t.lo = idx;
  t.hi = idx;
  t.w.assign(idx.size(), 0.0);
  return t;
}

/// floor((i + 0.5) * in / out) in float arithmetic (torch's nearest-exact).
std::vector<int64_t> half_pixel_nearest(int64_t in, int64_t out) {
  std::vector<int64_t> r(out);
  const float s = static_cast<float>(in) / static_cast<float>(out);
  for (int64_t i = 0; i < out; ++i)
    r[i] = std::min<int64_t>(static_cast<int64_t>(std::floor((static_cast<float>(i) + 0.5f) * s)), in - 1);
  return r;
}

/// Nearest index for a sampling mode of `resize`.
std::vector<int64_t> mode_nearest(Grid m, int64_t in, int64_t out) {
  if (m == Grid::Default || m == Grid::Unalign) return half_pixel_nearest(in, out);
  std::vector<int64_t> r(out);
  for (int64_t i = 0; i < out; ++i) {
    const float g = static_cast<float>(grid_point(m, i, out, static_cast<double>(in - 1)));
    r[i] = std::clamp<int64_t>(static_cast<int64_t>(std::round(g)), 0, in - 1);
  }
  return r;
}

/// torch's nearest index for an upsample by `scale`: floorf(i * (float)(1 / scale)), the
/// identity for an unchanged size and i >> 1 for twice the size.
std::vector<int64_t> scale_nearest(int64_t in, int64_t out, double scale) {
  std::vector<int64_t> r(out);
  const float inv = static_cast<float>(1.0 / scale);
  for (int64_t i = 0; i < out; ++i) {
    if (out == in) r[i] = i;
    else if (out == 2 * in) r[i] = i >> 1;
    else r[i] = std::min<int64_t>(static_cast<int64_t>(std::floor(static_cast<float>(i) * inv)), in - 1);
  }
  return r;
}

/// Resizes axis `axis` of `src` (shape `shape`) with taps `t` into `dst`.
template <typename T>
void resize_axis(const T* src, T* dst, const std::vector<int64_t>& shape, size_t axis, const Taps& t) {
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t n_in = shape[axis], n_out = static_cast<int64_t>(t.size());
  const int64_t rows = outer * n_out;
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t o = r / n_out, j = r % n_out;
      const T* a = src + (o * n_in + t.lo[j]) * inner;
      const T* c = src + (o * n_in + t.hi[j]) * inner;
      T* d = dst + r * inner;
      const T w1 = static_cast<T>(t.w[j]);
      if (w1 == T(0)) {
        std::copy(a, a + inner, d);
      } else {
        const T w0 = T(1) - w1;
        for (int64_t i = 0; i < inner; ++i) d[i] = w0 * a[i] + w1 * c[i];
      }
    }
  });
}

/// Applies the per-axis resizes in order (each pass changes one axis of the running shape).
template <typename T>
std::vector<T> resize_passes(const T* src, std::vector<int64_t> shape,
                             const std::vector<std::pair<size_t, Taps>>& passes) {
  std::vector<T> cur(src, src + shape_numel(shape));
  for (const auto& [axis, taps] : passes) {
    std::vector<int64_t> ns = shape;
    ns[axis] = static_cast<int64_t>(taps.size());
    std::vector<T> next(static_cast<size_t>(shape_numel(ns)));
    if (!next.empty()) resize_axis(cur.data(), next.data(), shape, axis, taps);
    cur.swap(next);
    shape = ns;
  }
  return cur;
}

/// Output 0 = x resized by `passes` (x fp32 or int32).
void run_resize(KernelCtx& k, const Tensor& x, const std::vector<std::pair<size_t, Taps>>& passes) {
  std::vector<int64_t> oshape = x.shape();
  for (const auto& [axis, taps] : passes) oshape[axis] = static_cast<int64_t>(taps.size());
  Tensor& y = k.alloc(0, oshape);
  if (y.numel() == 0) return;
  if (x.dtype() == DataType::Float32) {
    std::vector<float> r = resize_passes(x.data<float>(), x.shape(), passes);
    std::memcpy(y.mutable_data<float>(), r.data(), r.size() * sizeof(float));
  } else if (x.dtype() == DataType::Int32) {
    const int32_t* xi = x.data<int32_t>();
    std::vector<double> xd(xi, xi + x.numel());
    std::vector<double> r = resize_passes(xd.data(), x.shape(), passes);
    int32_t* yo = y.mutable_data<int32_t>();
    for (size_t i = 0; i < r.size(); ++i) yo[i] = static_cast<int32_t>(std::nearbyint(r[i]));
  } else {
    k.fail("x must be fp16, fp32 or int32, got " + x.describe());
  }
}

const Tensor& spatial_input(KernelCtx& k) {
  const Tensor& x = k.in("x");
  if (x.rank() < 3) k.fail("x must have rank at least 3, got " + x.describe());
  return x;
}

/// floor(scale * n) as the op's type inference computes it.
int64_t scaled_size(KernelCtx& k, const char* name, int64_t n) {
  const Value* v = k.value(name);
  double s = k.float_or(name, 1.0);
  bool f32 = v && (v->dtype() == DataType::Float32 || v->dtype() == DataType::Float16);
  if (!(s > 0)) k.fail(std::string(name) + " must be positive, got " + std::to_string(s));
  double p = f32 ? static_cast<double>(static_cast<float>(s) * static_cast<float>(n)) : s * static_cast<double>(n);
  return static_cast<int64_t>(std::floor(p));
}

void upsample_nearest_neighbor_kernel(KernelCtx& k) {
  const Tensor& x = spatial_input(k);
  const size_t r = static_cast<size_t>(x.rank());
  const int64_t h = x.dim(-2), w = x.dim(-1);
  const int64_t oh = scaled_size(k, "scale_factor_height", h), ow = scaled_size(k, "scale_factor_width", w);
  if ((h == 0 && oh > 0) || (w == 0 && ow > 0)) k.fail("cannot upsample an empty x " + x.describe());
  run_resize(k, x, {{r - 1, nearest_taps(scale_nearest(w, ow, k.float_or("scale_factor_width", 1)))},
                    {r - 2, nearest_taps(scale_nearest(h, oh, k.float_or("scale_factor_height", 1)))}});
}

void upsample_bilinear_kernel(KernelCtx& k) {
  const Tensor& x = spatial_input(k);
  const size_t r = static_cast<size_t>(x.rank());
  const int64_t h = x.dim(-2), w = x.dim(-1);
  const int64_t oh = scaled_size(k, "scale_factor_height", h), ow = scaled_size(k, "scale_factor_width", w);
  const bool ac = k.bool_or("align_corners", true);
  const bool hpc = k.bool_or("half_pixel_centers", !ac);
  if (ac && hpc) k.fail("align_corners and half_pixel_centers cannot both be True");
  const Grid g = ac ? Grid::Strict : hpc ? Grid::Unalign : Grid::Default;
  if ((h == 0 && oh > 0) || (w == 0 && ow > 0)) k.fail("cannot upsample an empty x " + x.describe());
  run_resize(k, x, {{r - 1, linear_taps(g, w, ow)}, {r - 2, linear_taps(g, h, oh)}});
}

int64_t target(KernelCtx& k, const char* name) {
  int64_t v = k.int_or(name, 1);
  if (v < 0) k.fail(std::string(name) + " must be non-negative, got " + std::to_string(v));
  return v;
}

void resize_nearest_neighbor_kernel(KernelCtx& k) {
  const Tensor& x = spatial_input(k);
  const size_t r = static_cast<size_t>(x.rank());
  const int64_t oh = target(k, "target_size_height"), ow = target(k, "target_size_width");
  if ((x.dim(-2) == 0 && oh > 0) || (x.dim(-1) == 0 && ow > 0)) k.fail("cannot resize an empty x " + x.describe());
  run_resize(k, x, {{r - 1, nearest_taps(half_pixel_nearest(x.dim(-1), ow))},
                    {r - 2, nearest_taps(half_pixel_nearest(x.dim(-2), oh))}});
}

void resize_bilinear_kernel(KernelCtx& k) {
  const Tensor& x = spatial_input(k);
  const size_t r = static_cast<size_t>(x.rank());
  const int64_t oh = target(k, "target_size_height"), ow = target(k, "target_size_width");
  const Grid g = parse_grid(k, k.str_or("sampling_mode", "DEFAULT"));
  if ((x.dim(-2) == 0 && oh > 0) || (x.dim(-1) == 0 && ow > 0)) k.fail("cannot resize an empty x " + x.describe());
  run_resize(k, x, {{r - 1, linear_taps(g, x.dim(-1), ow)}, {r - 2, linear_taps(g, x.dim(-2), oh)}});
}

void resize_kernel(KernelCtx& k) {
  const Tensor& x = k.in("x");
  const Tensor& st = k.in("shape");
  if (st.rank() != 1) k.fail("shape must have rank 1, got " + st.describe());
  const int64_t rank = x.rank(), n = st.numel();
  const int64_t rd = k.int_("resized_dims");
  if (rd > n) k.fail("resized_dims (" + std::to_string(rd) + ") must be <= the size of shape (" + std::to_string(n) + ")");
  if (n > rank) k.fail("the size of shape (" + std::to_string(n) + ") must be <= the rank of x " + x.describe());
  std::string im = k.str_or("interpolation_mode", "LINEAR");
  if (im != "LINEAR" && im != "NEAREST_NEIGHBOR") k.fail("unknown interpolation_mode \"" + im + "\"");
  const Grid g = parse_grid(k, k.str_or("sampling_mode", "DEFAULT"));
  std::vector<std::pair<size_t, Taps>> passes;
  for (int64_t i = rd - 1; i >= 0; --i) {
    const int64_t axis = rank - rd + i;
    int64_t v = static_cast<int64_t>(st.get(n - rd + i));
    if (v < 0) k.fail("shape has a negative element " + std::to_string(v));
    const int64_t in = x.dim(static_cast<int>(axis));
    if (v == 0) v = in;
    if (in == 0 && v > 0) k.fail("cannot resize the empty dim " + std::to_string(axis) + " of x " + x.describe());
    passes.emplace_back(static_cast<size_t>(axis),
                        im == "LINEAR" ? linear_taps(g, in, v) : nearest_taps(mode_nearest(g, in, v)));
  }
  run_resize(k, x, passes);
}

// ---------------------------------------------------------------------------------------------
// crop

void crop_kernel(KernelCtx& k) {
  const Tensor& x = k.in("x");
  if (x.rank() < 3) k.fail("x must have rank at least 3, got " + x.describe());
  std::vector<int64_t> ch = k.ints("crop_height"), cw = k.ints("crop_width");
  if (ch.size() != 2 || cw.size() != 2) k.fail("crop_height and crop_width must have 2 elements each");
  const int64_t h = x.dim(-2), w = x.dim(-1);
  const int64_t oh = h - ch[0] - ch[1], ow = w - cw[0] - cw[1];
  if (ch[0] < 0 || ch[1] < 0 || cw[0] < 0 || cw[1] < 0 || oh < 0 || ow < 0)
    k.fail("crop_height " + shape_str(ch) + " and crop_width " + shape_str(cw) + " do not fit x " + x.describe());
  std::vector<int64_t> os = x.shape();
  os[os.size() - 2] = oh;
  os[os.size() - 1] = ow;
  Tensor& y = k.alloc(0, os);
  if (y.numel() == 0) return;
  const int64_t planes = x.numel() / (h * w);
  const size_t isz = static_cast<size_t>(x.itemsize());
  const uint8_t* src = x.bytes();
  uint8_t* dst = y.mutable_bytes();
  parallel_for(planes * oh, std::max<int64_t>(1, 65536 / std::max<int64_t>(ow, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t p = r / oh, i = r % oh;
      std::memcpy(dst + static_cast<size_t>(r * ow) * isz,
                  src + static_cast<size_t>((p * h + i + ch[0]) * w + cw[0]) * isz, static_cast<size_t>(ow) * isz);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// crop_resize

/// Grid point i of n over the box from `start` with signed extent `len` (end - start).
double box_point(Grid m, int64_t i, int64_t n, double start, double len) {
  return len >= 0 ? start + grid_point(m, i, n, len) : start - grid_point(m, i, n, -len);
}

/// Per output index of one axis: the two input rows / columns, the weight of the second, and
/// whether the point lies inside the image.
struct AxisSample {
  std::vector<int64_t> lo, hi;
  std::vector<float> w;
  std::vector<char> inside;
};

AxisSample box_axis(Grid m, int64_t n, double start, double len, int64_t size) {
  AxisSample a;
  for (int64_t i = 0; i < n; ++i) {
    const double g = box_point(m, i, n, start, len);
    const bool in = g >= 0 && g <= static_cast<double>(size - 1);
    int64_t l = 0;
    double w = 0;
    if (in) {
      l = std::min<int64_t>(static_cast<int64_t>(std::floor(g)), size - 1);
      w = g - static_cast<double>(l);
    }
    a.lo.push_back(l);
    a.hi.push_back(std::min(l + 1, size - 1));
    a.w.push_back(static_cast<float>(w));
    a.inside.push_back(in ? 1 : 0);
  }
  return a;
}

void crop_resize_kernel(KernelCtx& k) {
  const Tensor& x = k.in("x");
  if (x.dtype() != DataType::Float32) k.fail("x must be fp16 or fp32, got " + x.describe());
  if (x.rank() != 4) k.fail("x must have rank 4, got " + x.describe());
  const int64_t B = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  const int64_t th = target(k, "target_height"), tw = target(k, "target_width");
  const bool normalized = k.bool_or("normalized_coordinates", false);
  const double scale = k.float_or("spatial_scale", 1.0);
  const std::string bm = k.str_or("box_coordinate_mode", "CORNERS_HEIGHT_FIRST");
  const Grid g = parse_grid(k, k.str_or("sampling_mode", "DEFAULT"));
  const float pad = static_cast<float>(k.float_or("pad_value", 0.0));

  // boxes as [N, 4] doubles, batch index per box (-1: every batch, iOS15 / iOS16 4-coord roi)
  std::vector<double> box;
  std::vector<int64_t> bidx;
  int64_t N = 0;
  bool per_batch = false;
  if (k.has("roi")) {
    const Tensor& roi = k.in("roi");
    if (roi.rank() != 5 || roi.dim(1) != 1 || roi.dim(3) != 1 || roi.dim(4) != 1 ||
        (roi.dim(2) != 4 && roi.dim(2) != 5))
      k.fail("roi must have shape [N, 1, 4, 1, 1] or [N, 1, 5, 1, 1], got " + roi.describe());
    N = roi.dim(0);
    const int64_t nc = roi.dim(2);
    per_batch = nc == 4;
    for (int64_t n = 0; n < N; ++n) {
      if (nc == 5) {
        const double bi = roi.get(n * 5);
        if (!(bi >= 0 && bi < static_cast<double>(B)))
          k.index_error("roi batch index " + std::to_string(bi) + " (box " + std::to_string(n) +
                        ") is out of range for x with batch " + std::to_string(B));
        bidx.push_back(static_cast<int64_t>(bi));
      }
      for (int64_t c = nc - 4; c < nc; ++c) box.push_back(roi.get(n * nc + c));
    }
  } else {
    const Tensor& bx = k.in("boxes");
    if (bx.rank() != 2 || bx.dim(1) != 4) k.fail("boxes must have shape [N, 4], got " + bx.describe());
    N = bx.dim(0);
    for (int64_t i = 0; i < bx.numel(); ++i) box.push_back(bx.get(i));
    if (k.has("box_indices")) {
      const Tensor& bi = k.in("box_indices");
      if (bi.numel() != N) k.fail("box_indices must have " + std::to_string(N) + " elements, got " + bi.describe());
      for (int64_t n = 0; n < N; ++n) bidx.push_back(static_cast<int64_t>(bi.get(n)));
    } else {
      for (int64_t n = 0; n < N; ++n) bidx.push_back(n);
    }
    for (int64_t n = 0; n < N; ++n)
      if (bidx[n] < 0 || bidx[n] >= B)
        k.index_error("box_indices[" + std::to_string(n) + "] = " + std::to_string(bidx[n]) +
                      " is out of range for x with batch " + std::to_string(B));
  }
  std::vector<int64_t> oshape;
  if (k.has("roi")) oshape = {N, per_batch ? B : 1, C, th, tw};
  else oshape = {N, C, th, tw};
  Tensor& y = k.alloc(0, oshape);
  if (y.numel() == 0) return;
  const float* xd = x.data<float>();
  float* yd = y.mutable_data<float>();
  const int64_t crops_per_box = per_batch ? B : 1;
  const double sh = normalized ? static_cast<double>(H - 1) : 1.0, sw = normalized ? static_cast<double>(W - 1) : 1.0;
  std::vector<AxisSample> ys(N), xs(N);
  for (int64_t n = 0; n < N; ++n) {
    const double* b = &box[n * 4];
    double h0, w0, h1, w1;
    if (bm == "CORNERS_HEIGHT_FIRST") {
      h0 = b[0], w0 = b[1], h1 = b[2], w1 = b[3];
    } else if (bm == "CORNERS_WIDTH_FIRST") {
      w0 = b[0], h0 = b[1], w1 = b[2], h1 = b[3];
    } else if (bm == "CENTER_SIZE_HEIGHT_FIRST") {
      h0 = b[0] - b[2] / 2, w0 = b[1] - b[3] / 2, h1 = b[0] + b[2] / 2, w1 = b[1] + b[3] / 2;
    } else if (bm == "CENTER_SIZE_WIDTH_FIRST") {
      w0 = b[0] - b[2] / 2, h0 = b[1] - b[3] / 2, w1 = b[0] + b[2] / 2, h1 = b[1] + b[3] / 2;
    } else {
      k.fail("unknown box_coordinate_mode \"" + bm + "\"");
    }
    h0 *= scale * sh, h1 *= scale * sh, w0 *= scale * sw, w1 *= scale * sw;
    ys[n] = box_axis(g, th, h0, h1 - h0, H);
    xs[n] = box_axis(g, tw, w0, w1 - w0, W);
  }
  const int64_t planes = N * crops_per_box * C;
  parallel_for(planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(th * tw, 1)), [&](int64_t s, int64_t e) {
    for (int64_t p = s; p < e; ++p) {
      const int64_t n = p / (crops_per_box * C), rem = p % (crops_per_box * C);
      const int64_t bb = per_batch ? rem / C : bidx[n], c = rem % C;
      const float* img = xd + (bb * C + c) * H * W;
      float* out = yd + p * th * tw;
      const AxisSample &ay = ys[n], &ax = xs[n];
      for (int64_t i = 0; i < th; ++i) {
        const float* r0 = img + ay.lo[i] * W;
        const float* r1 = img + ay.hi[i] * W;
        const float wy = ay.w[i];
        for (int64_t j = 0; j < tw; ++j) {
          if (!ay.inside[i] || !ax.inside[j]) {
            out[i * tw + j] = pad;
            continue;
          }
          const float wx = ax.w[j];
          const int64_t l = ax.lo[j], h = ax.hi[j];
          const float top = (1 - wx) * r0[l] + wx * r0[h];
          const float bot = (1 - wx) * r1[l] + wx * r1[h];
          out[i * tw + j] = (1 - wy) * top + wy * bot;
        }
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------
// resample, affine

enum class Pad { Constant, Border, Reflection, Symmetric };
enum class Coords { Unnormalized, MinusOneToOne, ZeroToOne };

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

struct Sampler {
  bool nearest = false;
  Pad pad = Pad::Constant;
  Coords coords = Coords::Unnormalized;
  bool align_corners = true;
  float pad_value = 0;
};

Sampler parse_sampler(KernelCtx& k) {
  Sampler s;
  const std::string sm = lower(k.str("sampling_mode")), pm = lower(k.str("padding_mode")),
                    cm = lower(k.str("coordinates_mode"));
  if (sm == "nearest") s.nearest = true;
  else if (sm != "bilinear") k.fail("unknown sampling_mode \"" + k.str("sampling_mode") + "\"");
  if (pm == "constant") s.pad = Pad::Constant;
  else if (pm == "border") s.pad = Pad::Border;
  else if (pm == "reflection") s.pad = Pad::Reflection;
  else if (pm == "symmetric") s.pad = Pad::Symmetric;
  else k.fail("unknown padding_mode \"" + k.str("padding_mode") + "\"");
  if (cm == "unnormalized") s.coords = Coords::Unnormalized;
  else if (cm == "normalized_minus_one_to_one") s.coords = Coords::MinusOneToOne;
  else if (cm == "normalized_zero_to_one") s.coords = Coords::ZeroToOne;
  else k.fail("unknown coordinates_mode \"" + k.str("coordinates_mode") + "\"");
  s.align_corners = k.bool_("align_corners");
  s.pad_value = static_cast<float>(k.float_("padding_value"));
  return s;
}

/// torch's reflect_coordinates: reflects `in` into [twice_low / 2, twice_high / 2].
float reflect(float in, float twice_low, float twice_high) {
  if (twice_low == twice_high) return 0.0f;
  const float mn = twice_low / 2, span = (twice_high - twice_low) / 2;
  in = std::fabs(in - mn);
  const float extra = std::fmod(in, span);
  const float flips = std::floor(in / span);
  return std::fmod(flips, 2.0f) == 0.0f ? extra + mn : span - extra + mn;
}

/// A coordinate (x or y) to a pixel position along an axis of `size`, padding applied.
float to_pixel(const Sampler& s, float c, int64_t size) {
  const float n = static_cast<float>(size);
  float p = c;
  if (s.coords == Coords::MinusOneToOne) p = s.align_corners ? (c + 1) / 2 * (n - 1) : ((c + 1) * n - 1) / 2;
  else if (s.coords == Coords::ZeroToOne) p = s.align_corners ? c * (n - 1) : c * n - 0.5f;
  if (std::isnan(p)) return p;
  auto clip = [&](float v) { return std::min(n - 1, std::max(0.0f, v)); };
  switch (s.pad) {
    case Pad::Constant: break;
    case Pad::Border: p = clip(p); break;
    case Pad::Reflection: p = clip(reflect(p, 0, 2 * (n - 1))); break;
    case Pad::Symmetric: p = clip(reflect(p, -1, 2 * n - 1)); break;
  }
  return p;
}

/// Up to 4 taps (flat index into an H x W plane, -1 for padding) and their weights.
struct Taps4 {
  int64_t idx[4];
  float w[4];
  int n;
};

Taps4 taps_at(const Sampler& s, float px, float py, int64_t H, int64_t W) {
  Taps4 t{{-1, -1, -1, -1}, {0, 0, 0, 0}, 0};
  if (std::isnan(px) || std::isnan(py)) {
    t.n = 1;
    t.w[0] = 1;
    return t;
  }
  // far outside (constant padding): every tap is padding; keeps the int conversion in range
  const float lim = 4.0f + static_cast<float>(std::max(H, W));
  if (px < -lim || px > lim || py < -lim || py > lim) {
    t.n = 1;
    t.w[0] = 1;
    return t;
  }
  auto at = [&](int64_t yy, int64_t xx) -> int64_t {
    return yy >= 0 && yy < H && xx >= 0 && xx < W ? yy * W + xx : -1;
  };
  if (s.nearest) {
    t.n = 1;
    t.w[0] = 1;
    t.idx[0] = at(static_cast<int64_t>(std::nearbyint(py)), static_cast<int64_t>(std::nearbyint(px)));
    return t;
  }
  const float fx = std::floor(px), fy = std::floor(py);
  const int64_t x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
  const float wx = px - fx, wy = py - fy;
  t.n = 4;
  t.idx[0] = at(y0, x0), t.w[0] = (1 - wx) * (1 - wy);
  t.idx[1] = at(y0, x0 + 1), t.w[1] = wx * (1 - wy);
  t.idx[2] = at(y0 + 1, x0), t.w[2] = (1 - wx) * wy;
  t.idx[3] = at(y0 + 1, x0 + 1), t.w[3] = wx * wy;
  return t;
}

/// y[b, c, i, j] = x[b, c] sampled at the pixel position (px, py) = pos(b, i, j).
template <typename Pos>
void sample_grid(KernelCtx& k, const Sampler& s, const Tensor& x, int64_t Ho, int64_t Wo, Pos pos) {
  const int64_t B = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  Tensor& y = k.alloc(0, {B, C, Ho, Wo});
  if (y.numel() == 0) return;
  if (H == 0 || W == 0) k.fail("cannot sample an empty x " + x.describe());
  const float* xd = x.data<float>();
  float* yd = y.mutable_data<float>();
  const bool zero_oob = s.pad != Pad::Constant;  // other modes clip: out-of-image taps weigh 0
  const float padv = zero_oob ? 0.0f : s.pad_value;
  parallel_for(B * Ho, std::max<int64_t>(1, 4096 / std::max<int64_t>(Wo * C, 1)), [&](int64_t b0, int64_t e0) {
    std::vector<Taps4> taps(static_cast<size_t>(Wo));
    for (int64_t r = b0; r < e0; ++r) {
      const int64_t b = r / Ho, i = r % Ho;
      for (int64_t j = 0; j < Wo; ++j) {
        float px, py;
        pos(b, i, j, px, py);
        taps[j] = taps_at(s, to_pixel(s, px, W), to_pixel(s, py, H), H, W);
      }
      for (int64_t c = 0; c < C; ++c) {
        const float* img = xd + (b * C + c) * H * W;
        float* out = yd + ((b * C + c) * Ho + i) * Wo;
        for (int64_t j = 0; j < Wo; ++j) {
          const Taps4& t = taps[j];
          float v = 0;
          for (int q = 0; q < t.n; ++q) v += t.w[q] * (t.idx[q] >= 0 ? img[t.idx[q]] : padv);
          out[j] = v;
        }
      }
    }
  });
}

void resample_kernel(KernelCtx& k) {
  const Tensor& x = k.in("x");
  if (x.dtype() != DataType::Float32) k.fail("x must be fp16 or fp32, got " + x.describe());
  if (x.rank() != 4) k.fail("x must have rank 4, got " + x.describe());
  const Tensor& c = k.in("coordinates");
  if (c.rank() != 4 || c.dim(3) != 2) k.fail("coordinates must have shape [B, H, W, 2], got " + c.describe());
  if (c.dim(0) != x.dim(0)) k.fail("x " + x.describe() + " and coordinates " + c.describe() + " differ in batch");
  const Sampler s = parse_sampler(k);
  const Tensor cf = cast_tensor(c, DataType::Float32);
  const float* cd = cf.data<float>();
  const int64_t Ho = c.dim(1), Wo = c.dim(2);
  sample_grid(k, s, x, Ho, Wo, [&](int64_t b, int64_t i, int64_t j, float& px, float& py) {
    const float* p = cd + ((b * Ho + i) * Wo + j) * 2;
    px = p[0];
    py = p[1];
  });
}

void affine_kernel(KernelCtx& k) {
  const Tensor& x = k.in("x");
  if (x.dtype() != DataType::Float32) k.fail("x must be fp16 or fp32, got " + x.describe());
  if (x.rank() != 4) k.fail("x must have rank 4, got " + x.describe());
  const Tensor& t = k.in("transform_matrix");
  if (t.rank() != 2 || t.dim(1) != 6 || (t.dim(0) != 1 && t.dim(0) != x.dim(0)))
    k.fail("transform_matrix must have shape [1, 6] or [B, 6] for x " + x.describe() + ", got " + t.describe());
  Sampler s = parse_sampler(k);
  const int64_t Ho = target(k, "output_height"), Wo = target(k, "output_width");
  const float* td = t.data<float>();
  const bool shared = t.dim(0) == 1;
  // torch's affine_grid base grid: linspace(-1, 1, n) (0 for n = 1), scaled by (n - 1) / n without
  // align_corners
  auto base = [&](int64_t i, int64_t n) -> float {
    if (n == 1) return 0.0f;
    const float lin = -1.0f + 2.0f * static_cast<float>(i) / static_cast<float>(n - 1);
    return s.align_corners ? lin : lin * static_cast<float>(n - 1) / static_cast<float>(n);
  };
  sample_grid(k, s, x, Ho, Wo, [&](int64_t b, int64_t i, int64_t j, float& px, float& py) {
    const float* m = td + (shared ? 0 : b) * 6;
    const float xn = base(j, Wo), yn = base(i, Ho);
    px = m[0] * xn + m[1] * yn + m[2];
    py = m[3] * xn + m[4] * yn + m[5];
  });
}

}  // namespace

void register_image_resizing_kernels(KernelRegistry& r) {
  r.add("upsample_nearest_neighbor", {upsample_nearest_neighbor_kernel, true});
  r.add("upsample_bilinear", {upsample_bilinear_kernel, true});
  r.add("resize_nearest_neighbor", {resize_nearest_neighbor_kernel, true});
  r.add("resize_bilinear", {resize_bilinear_kernel, true});
  r.add("resize", {resize_kernel, true});
  r.add("crop", {crop_kernel, false});
  r.add("crop_resize", {crop_resize_kernel, true});
  r.add("resample", {resample_kernel, true});
  r.add("affine", {affine_kernel, true});
}

}  // namespace milkit
