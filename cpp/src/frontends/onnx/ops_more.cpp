// More ONNX operators built from MIL ops: GridSample (resample), CumProd (a log-step scan),
// the Bitwise ops (bit planes by integer division), Compress, ReverseSequence, MaxUnpool and
// Col2Im (scatters), Det (closed forms up to 3x3), TensorScatter, DFT and STFT (products with
// constant DFT matrices), and the integer / quantized-linear matrix products and convolutions.
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "milkit/compose/sampling.h"
#include "milkit/compose/scan.h"
#include "milkit/compose/windows.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

using onnx::TensorProto;

Var* fconst(C& cv, double v) { return cv.em.f32(v); }

void grid_sample(C& cv, const NodeProto& n) {
  std::string mode = C::attr_string(n, "mode", cv.opset >= 20 ? "linear" : "bilinear");
  compose::GridSampleSpec s;
  s.convention = compose::GridConvention::Onnx;
  if (mode == "bilinear" || mode == "linear") s.mode = compose::SampleMode::Linear;
  else if (mode == "bicubic" || mode == "cubic") s.mode = compose::SampleMode::Cubic;
  else if (mode == "nearest") s.mode = compose::SampleMode::Nearest;
  else cv.fail(n, "mode '" + mode + "' is not supported");
  std::string pm = C::attr_string(n, "padding_mode", "zeros");
  if (pm == "zeros") s.padding = compose::SamplePadding::Zeros;
  else if (pm == "border") s.padding = compose::SamplePadding::Border;
  else if (pm == "reflection") s.padding = compose::SamplePadding::Reflection;
  else cv.fail(n, "padding_mode '" + pm + "' is not supported");
  s.align_corners = C::attr_int(n, "align_corners", 0) != 0;
  cv.out(n, 0, compose::grid_sample(cv.em, cv.in(n, 0), cv.in(n, 1), s));
}

void cum_prod(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  compose::ScanSpec s;
  s.axis = cv.axis(n, cv.ints(n, 1, "axis").at(0), cv.rank(n, x));
  s.exclusive = C::attr_int(n, "exclusive", 0) != 0;
  s.reverse = C::attr_int(n, "reverse", 0) != 0;
  cv.out(n, 0, compose::cumprod(cv.em, x, s));
}

// The width and signedness of an integer ONNX type (values held in int32, sign-extended).
std::pair<int, bool> int_width(int t) {
  switch (t) {
    case TensorProto::INT8: return {8, true};
    case TensorProto::UINT8: return {8, false};
    case TensorProto::INT16: return {16, true};
    case TensorProto::UINT16: return {16, false};
    case TensorProto::UINT32:
    case TensorProto::UINT64: return {31, false};  // held in int32: below 2^31
    default: return {32, true};
  }
}

// The bit planes 0..w-1 of x (int32, >= 0 or sign-extended) on a new last axis, as 0/1 int32.
Var* bit_planes(C& cv, Var* x, int w) {
  std::vector<int64_t> p;
  for (int k = 0; k < w; ++k) p.push_back(int64_t(1) << k);
  Var* e = cv.op("expand_dims", {C::arg("x", x), C::arg_ints32("axes", {-1})});
  Var* q = binary(cv, "floor_div", e, cv.c(Value::from_ints(DataType::Int32, {w}, p)));
  return binary(cv, "sub", q, binary(cv, "mul", binary(cv, "floor_div", q, cv.cs(2, DataType::Int32)), cv.cs(2, DataType::Int32)));
}

void bitwise(C& cv, const NodeProto& n, char op) {
  auto [w, sgn] = int_width(cv.elem_type(n, 0));
  DataType i32 = DataType::Int32;
  Var* x = cv.cast(cv.in(n, 0), i32);
  if (op == '~') {
    // two's complement: ~x = -x - 1; unsigned of width w: 2^w - 1 - x
    if (!sgn && w > 30) cv.fail(n, "BitwiseNot of a 32- or 64-bit unsigned type does not fit int32");
    Var* y = sgn ? binary(cv, "sub", binary(cv, "mul", x, cv.cs(-1, i32)), cv.cs(1, i32))
                 : binary(cv, "sub", cv.cs(static_cast<double>((int64_t(1) << w) - 1), i32), x);
    cv.out(n, 0, y);
    return;
  }
  Var* y = cv.cast(cv.in(n, 1), i32);
  // bits below the sign bit from the planes; the sign bit (signed types) from the signs
  int low = sgn ? w - 1 : w;
  Var* bx = bit_planes(cv, x, low);
  Var* by = bit_planes(cv, y, low);
  Var* both = binary(cv, "mul", bx, by);
  Var* b = op == '&' ? both : op == '|' ? binary(cv, "sub", binary(cv, "add", bx, by), both)
                                        : binary(cv, "sub", binary(cv, "add", bx, by), binary(cv, "mul", both, cv.cs(2, i32)));
  std::vector<int64_t> p;
  for (int k = 0; k < low; ++k) p.push_back(int64_t(1) << k);
  Var* v = cv.op("reduce_sum", {C::arg("x", binary(cv, "mul", b, cv.c(Value::from_ints(DataType::Int32, {low}, p)))),
                                C::arg_ints32("axes", {-1}), C::arg_bool("keep_dims", false)});
  if (sgn) {
    Var* sx = binary(cv, "less", x, cv.cs(0, i32));
    Var* sy = binary(cv, "less", y, cv.cs(0, i32));
    Var* s = op == '&' ? binary(cv, "logical_and", sx, sy) : op == '|' ? binary(cv, "logical_or", sx, sy) : binary(cv, "logical_xor", sx, sy);
    double top = -std::ldexp(1.0, w - 1);
    v = binary(cv, "add", v, cv.em.sel(s, cv.cs(top, i32), cv.cs(0, i32)));
  }
  cv.out(n, 0, v);
}

void compress(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  Var* cond = cv.in(n, 1);
  int64_t ax = 0;
  if (C::find_attr(n, "axis")) ax = cv.axis(n, C::attr_int(n, "axis", 0), cv.rank(n, x));
  else x = cv.op("reshape", {C::arg("x", x), C::arg_ints32("shape", {-1})});
  Var* idx = cv.op("reshape", {C::arg("x", cv.op("non_zero", {C::arg("x", cond)})), C::arg_ints32("shape", {-1})});
  cv.out(n, 0, cv.op("gather", {C::arg("x", x), C::arg("indices", idx), C::arg_i32("axis", ax)}));
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

void det(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  auto xs = C::static_shape(x);
  if (!xs || xs->size() < 2) cv.fail(n, "needs the input's shape to be known");
  int r = static_cast<int>(xs->size());
  int64_t m = xs->back();
  if ((*xs)[static_cast<size_t>(r - 2)] != m) cv.fail(n, "the matrices must be square");
  if (m > 3) cv.fail(n, "determinants of matrices larger than 3x3 are not supported");
  std::vector<int64_t> out(xs->begin(), xs->end() - 2);
  auto e = [&](int64_t i, int64_t j) {
    Var* s = cv.em.slice_axis(cv.em.slice_axis(x, r - 2, i, i + 1), r - 1, j, j + 1);
    return cv.op("reshape", {C::arg("x", s), C::arg_ints32("shape", out)});
  };
  auto mul = [&](Var* a, Var* b) { return binary(cv, "mul", a, b); };
  Var* y;
  if (m == 1) y = e(0, 0);
  else if (m == 2) y = binary(cv, "sub", mul(e(0, 0), e(1, 1)), mul(e(0, 1), e(1, 0)));
  else {
    auto minor = [&](int64_t a, int64_t b, int64_t c, int64_t d) {
      return binary(cv, "sub", mul(e(1, a), e(2, b)), mul(e(1, c), e(2, d)));
    };
    y = binary(cv, "add", binary(cv, "sub", mul(e(0, 0), minor(1, 2, 2, 1)), mul(e(0, 1), minor(0, 2, 2, 0))),
               mul(e(0, 2), minor(0, 1, 1, 0)));
  }
  cv.out(n, 0, y);
}

void tensor_scatter(C& cv, const NodeProto& n) {
  Var* past = cv.in(n, 0);
  Var* upd = cv.in(n, 1);
  auto ps = C::static_shape(past);
  auto us = C::static_shape(upd);
  if (!ps || !us) cv.fail(n, "needs the shapes of the cache and the update to be known");
  int r = static_cast<int>(ps->size());
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", -2), r);
  if (ax == 0) cv.fail(n, "axis must not be the batch axis");
  int64_t S = (*ps)[static_cast<size_t>(ax)], T = (*us)[static_cast<size_t>(ax)];
  std::string mode = C::attr_string(n, "mode", "linear");
  DataType i32 = DataType::Int32;
  std::vector<int64_t> tshape(static_cast<size_t>(r), 1), t(static_cast<size_t>(T)), bshape(static_cast<size_t>(r), 1);
  tshape[static_cast<size_t>(ax)] = T;
  std::iota(t.begin(), t.end(), 0);
  Var* pos = cv.c(Value::from_ints(i32, tshape, t));
  if (C::has(n, 2)) {
    bshape[0] = -1;
    pos = binary(cv, "add", pos, cv.op("reshape", {C::arg("x", cv.cast(cv.in(n, 2), i32)), C::arg_ints32("shape", bshape)}));
  }
  if (mode == "circular") pos = binary(cv, "sub", pos, binary(cv, "mul", binary(cv, "floor_div", pos, cv.cs(static_cast<double>(S), i32)), cv.cs(static_cast<double>(S), i32)));
  else if (mode != "linear") cv.fail(n, "mode must be linear or circular");
  Var* full = binary(cv, "add", pos, cv.c(Value::from_ints(i32, *us, std::vector<int64_t>(static_cast<size_t>(std::accumulate(us->begin(), us->end(), int64_t(1), std::multiplies<int64_t>())), 0))));
  cv.out(n, 0, cv.op("scatter_along_axis", {C::arg("data", past), C::arg("indices", full), C::arg("updates", upd), C::arg_i32("axis", ax),
                                           C::arg_str("mode", "update")}));
}

// ---- DFT / STFT ------------------------------------------------------------------------------

// y = x @ M (M a constant [k, m] of dtype dt).
Var* matconst(C& cv, Var* x, int64_t k, int64_t m, const std::vector<double>& v, DataType dt) {
  return cv.op("matmul", {C::arg("x", x), C::arg("y", cv.c(Value::from_doubles(dt, {k, m}, v)))});
}

// The DFT of (re, im) (im may be null) along the last axis of length `len`: n points (the
// input zero-padded or cut to n), `out` bins; inverse scales by 1/n; `real_out` (an inverse of a
// one-sided spectrum) returns only the real signal of length n from the `len` given bins.
std::pair<Var*, Var*> dft_last(C& cv, Var* re, Var* im, int64_t len, int64_t npts, int64_t out, bool inverse, bool real_out,
                               DataType dt) {
  double s = inverse ? 1.0 : -1.0, scale = inverse ? 1.0 / static_cast<double>(npts) : 1.0;
  int64_t k = std::min(len, npts);
  if (real_out) {
    // y_j = 1/n sum_k w_k (Xr_k cos - Xi_k sin)(2 pi j k / n): the Hermitian half counted twice
    std::vector<double> ar(static_cast<size_t>(k * npts)), ai(static_cast<size_t>(k * npts));
    for (int64_t b = 0; b < k; ++b) {
      double w = (b == 0 || (npts % 2 == 0 && b == npts / 2)) ? 1.0 : 2.0;
      for (int64_t j = 0; j < npts; ++j) {
        double t = 2 * M_PI * static_cast<double>((j * b) % npts) / static_cast<double>(npts);
        ar[static_cast<size_t>(b * npts + j)] = w * std::cos(t) * scale;
        ai[static_cast<size_t>(b * npts + j)] = -w * std::sin(t) * scale;
      }
    }
    Var* y = matconst(cv, re, k, npts, ar, dt);
    if (im) y = binary(cv, "add", y, matconst(cv, im, k, npts, ai, dt));
    return {y, nullptr};
  }
  std::vector<double> cr(static_cast<size_t>(k * out)), si(static_cast<size_t>(k * out));
  for (int64_t j = 0; j < k; ++j)
    for (int64_t b = 0; b < out; ++b) {
      double t = 2 * M_PI * static_cast<double>((j * b) % npts) / static_cast<double>(npts);
      cr[static_cast<size_t>(j * out + b)] = std::cos(t) * scale;
      si[static_cast<size_t>(j * out + b)] = s * std::sin(t) * scale;
    }
  Var* yr = matconst(cv, re, k, out, cr, dt);
  Var* yi = matconst(cv, re, k, out, si, dt);
  if (im) {
    yr = binary(cv, "sub", yr, matconst(cv, im, k, out, si, dt));
    yi = binary(cv, "add", yi, matconst(cv, im, k, out, cr, dt));
  }
  return {yr, yi};
}

void dft(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  auto xs = C::static_shape(x);
  if (!xs || xs->size() < 2) cv.fail(n, "needs the input's shape to be known");
  int r = static_cast<int>(xs->size());
  int64_t ax = cv.opset >= 20 ? (C::has(n, 2) ? cv.ints(n, 2, "axis").at(0) : -2) : C::attr_int(n, "axis", 1);
  ax = cv.axis(n, ax, r);
  if (ax == r - 1) cv.fail(n, "axis must not be the last (real / imaginary) axis");
  bool inverse = C::attr_int(n, "inverse", 0) != 0, onesided = C::attr_int(n, "onesided", 0) != 0;
  int64_t comp = xs->back();
  if (comp != 1 && comp != 2) cv.fail(n, "the last dim must be 1 (real) or 2 (complex)");
  int64_t len = (*xs)[static_cast<size_t>(ax)];
  bool real_out = inverse && onesided;
  int64_t npts = C::has(n, 1) ? cv.ints(n, 1, "dft_length").at(0) : real_out ? 2 * (len - 1) : len;
  int64_t out = real_out ? npts : onesided ? npts / 2 + 1 : npts;
  DataType dt = C::dtype(x);
  // the signal axis last: [..., signal] per component
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < r - 1; ++i)
    if (i != ax) perm.push_back(i);
  perm.push_back(ax);
  auto comp_of = [&](int64_t c) {
    Var* s = cv.op("squeeze", {C::arg("x", cv.em.slice_axis(x, r - 1, c, c + 1)), C::arg_ints32("axes", {r - 1})});
    return cv.op("transpose", {C::arg("x", s), C::arg_ints32("perm", perm)});
  };
  Var* re = comp_of(0);
  Var* im = comp == 2 ? comp_of(1) : nullptr;
  if (npts > len) {  // zero-padded to n
    std::vector<int64_t> pad(static_cast<size_t>(2 * (r - 1)), 0);
    pad.back() = npts - len;
    re = cv.op("pad", {C::arg("x", re), C::arg_ints32("pad", pad)});
    if (im) im = cv.op("pad", {C::arg("x", im), C::arg_ints32("pad", pad)});
    len = npts;
  } else if (npts < len && !real_out) {
    re = cv.em.slice_axis(re, r - 2, 0, npts);
    if (im) im = cv.em.slice_axis(im, r - 2, 0, npts);
    len = npts;
  }
  auto [yr, yi] = dft_last(cv, re, im, len, npts, out, inverse, real_out, dt);
  // back to the input's layout, components on a last axis
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  auto back = [&](Var* v) {
    v = cv.op("transpose", {C::arg("x", v), C::arg_ints32("perm", inv)});
    return cv.op("expand_dims", {C::arg("x", v), C::arg_ints32("axes", {-1})});
  };
  if (!yi) {
    cv.out(n, 0, back(yr));
    return;
  }
  cv.out(n, 0, cv.op("concat", {Arg{"values", {ArgItem{back(yr), nullptr}, ArgItem{back(yi), nullptr}}, true}, C::arg_i32("axis", -1)}));
}

void stft(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  auto xs = C::static_shape(x);
  if (!xs || xs->size() != 3) cv.fail(n, "needs a [batch, length, 1 or 2] signal of known shape");
  int64_t step = cv.ints(n, 1, "frame_step").at(0);
  Var* window = C::has(n, 2) ? cv.in(n, 2) : nullptr;
  int64_t flen = 0;
  if (C::has(n, 3)) flen = cv.ints(n, 3, "frame_length").at(0);
  else if (window) {
    auto ws = C::static_shape(window);
    if (!ws) cv.fail(n, "the window's length must be known");
    flen = ws->at(0);
  } else cv.fail(n, "needs a window or a frame_length");
  bool onesided = C::attr_int(n, "onesided", 1) != 0;
  int64_t B = (*xs)[0], L = (*xs)[1], comp = (*xs)[2];
  int64_t frames = (L - flen) / step + 1;
  if (frames < 1) cv.fail(n, "the signal is shorter than one frame");
  std::vector<int64_t> idx(static_cast<size_t>(frames * flen));
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t t = 0; t < flen; ++t) idx[static_cast<size_t>(f * flen + t)] = f * step + t;
  Var* ids = cv.c(Value::from_ints(DataType::Int32, {frames, flen}, idx));
  DataType dt = C::dtype(x);
  auto framed = [&](int64_t c) {
    Var* s = cv.op("reshape", {C::arg("x", cv.em.slice_axis(x, 2, c, c + 1)), C::arg_ints32("shape", {B, L})});
    Var* f = cv.op("gather", {C::arg("x", s), C::arg("indices", ids), C::arg_i32("axis", 1)});  // [B, frames, flen]
    return window ? binary(cv, "mul", f, cv.cast(window, dt)) : f;
  };
  Var* re = framed(0);
  Var* im = comp == 2 ? framed(1) : nullptr;
  int64_t out = onesided ? flen / 2 + 1 : flen;
  auto [yr, yi] = dft_last(cv, re, im, flen, flen, out, false, false, dt);
  Var* a = cv.op("expand_dims", {C::arg("x", yr), C::arg_ints32("axes", {-1})});
  Var* b = cv.op("expand_dims", {C::arg("x", yi), C::arg_ints32("axes", {-1})});
  cv.out(n, 0, cv.op("concat", {Arg{"values", {ArgItem{a, nullptr}, ArgItem{b, nullptr}}, true}, C::arg_i32("axis", -1)}));
}

// ---- integer and quantized-linear products -----------------------------------------------------

// x - zero point, in fp32 (exact for 8-bit values); a per-row zero point of A ([M]) is made [M, 1].
Var* centered(C& cv, const NodeProto& n, int xi, int zi, bool per_row) {
  Var* x = cv.cast(cv.in(n, xi), DataType::Float32);
  if (!C::has(n, zi)) return x;
  Var* z = cv.cast(cv.in(n, zi), DataType::Float32);
  if (per_row && z->type()->has_rank() && z->type()->rank() == 1) {
    auto zs = C::static_shape(z);
    if (zs && (*zs)[0] > 1) z = cv.op("expand_dims", {C::arg("x", z), C::arg_ints32("axes", {-1})});
  }
  return binary(cv, "sub", x, z);
}

// A per-output-channel weight zero point or scale ([M]) made [M, 1, ..., 1] for a rank-r weight.
Var* per_out_channel(C& cv, Var* v, int r) {
  auto s = C::static_shape(v);
  if (!s || s->size() != 1 || (*s)[0] == 1) return v;
  std::vector<int64_t> axes;
  for (int i = 1; i < r; ++i) axes.push_back(i);
  return cv.op("expand_dims", {C::arg("x", v), C::arg_ints32("axes", axes)});
}

std::vector<Arg> conv_args(C& cv, const NodeProto& n, Var* x, Var* w, size_t sp) {
  std::string ap = C::attr_string(n, "auto_pad", "NOTSET");
  std::string pt = ap == "SAME_UPPER" ? "same" : ap == "SAME_LOWER" ? "same_lower" : ap == "VALID" ? "valid" : "custom";
  auto pads = C::attr_ints(n, "pads", std::vector<int64_t>(2 * sp, 0));
  std::vector<int64_t> mp(2 * sp, 0);
  if (pt == "custom")
    for (size_t i = 0; i < sp; ++i) mp[2 * i] = pads[i], mp[2 * i + 1] = pads[i + sp];
  return {C::arg("x", x), C::arg("weight", w), C::arg_ints32("strides", C::attr_ints(n, "strides", std::vector<int64_t>(sp, 1))),
          C::arg_str("pad_type", pt), C::arg_ints32("pad", mp), C::arg_ints32("dilations", C::attr_ints(n, "dilations", std::vector<int64_t>(sp, 1))),
          C::arg_i32("groups", C::attr_int(n, "group", 1))};
}

// round half to even, clipped to the quantized type of zero point input `zi` (uint8 without one)
Var* requantize(C& cv, const NodeProto& n, Var* v, int zi) {
  int et = C::has(n, zi) ? cv.elem_type(n, zi) : TensorProto::UINT8;
  double lo = 0, hi = 255;
  if (et == TensorProto::INT8) lo = -128, hi = 127;
  else if (et != TensorProto::UINT8) cv.fail(n, "the output zero point must be int8 or uint8");
  if (C::has(n, zi)) v = binary(cv, "add", cv.op("round", {C::arg("x", v)}), cv.cast(cv.in(n, zi), DataType::Float32));
  else v = cv.op("round", {C::arg("x", v)});
  v = cv.op("clip", {C::arg("x", v), C::arg_f32("alpha", lo), C::arg_f32("beta", hi)});
  return cv.cast(v, DataType::Int32);
}

// The IEEE layouts BitCast reinterprets (fp32, fp16): exponent bias and mantissa bits.
struct Ieee {
  int bias, man, width;
};
std::optional<Ieee> ieee(int t) {
  if (t == TensorProto::FLOAT) return Ieee{127, 23, 32};
  if (t == TensorProto::FLOAT16) return Ieee{15, 10, 16};
  return std::nullopt;
}

// The bit pattern of x (a float of layout f) as a signed integer of f's width, by arithmetic:
// sign, binade (log2, corrected) and significand.
Var* float_bits(C& cv, Var* x, const Ieee& f) {
  DataType f32 = DataType::Float32, i32 = DataType::Int32;
  Var* xf = cv.cast(x, f32);
  Var* a = cv.op("abs", {C::arg("x", xf)});
  double inf = std::numeric_limits<double>::infinity();
  Var* nan = binary(cv, "not_equal", xf, xf);
  Var* isinf = binary(cv, "equal", a, fconst(cv, inf));
  Var* ac = cv.em.sel(binary(cv, "logical_or", nan, isinf), fconst(cv, 1), a);
  Var* e = cv.op("floor", {C::arg("x", binary(cv, "mul", cv.op("log", {C::arg("x", ac)}), fconst(cv, 1.0 / std::log(2.0))))});
  Var* p = cv.op("exp2", {C::arg("x", e)});
  e = binary(cv, "sub", e, cv.cast(binary(cv, "less", ac, p), f32));
  e = binary(cv, "add", e, cv.cast(binary(cv, "greater_equal", ac, binary(cv, "mul", p, fconst(cv, 2))), f32));
  Var* sub = binary(cv, "less", ac, fconst(cv, std::ldexp(1.0, 1 - f.bias)));
  Var* E = cv.em.sel(sub, fconst(cv, 0), binary(cv, "add", e, fconst(cv, f.bias)));
  // subnormals: ac / 2^(1 - bias - man), in two exact steps (2^149 is past fp32's range)
  Var* M = cv.em.sel(sub, binary(cv, "mul", binary(cv, "mul", ac, fconst(cv, std::ldexp(1.0, f.bias - 1))), fconst(cv, std::ldexp(1.0, f.man))),
               binary(cv, "mul", binary(cv, "sub", binary(cv, "real_div", ac, cv.op("exp2", {C::arg("x", e)})), fconst(cv, 1)), fconst(cv, std::ldexp(1.0, f.man))));
  double emax = std::ldexp(1.0, f.width - 1 - f.man) - 1;  // all-ones exponent
  E = cv.em.sel(binary(cv, "logical_or", nan, isinf), fconst(cv, emax), E);
  M = cv.em.sel(isinf, fconst(cv, 0), cv.em.sel(nan, fconst(cv, std::ldexp(1.0, f.man - 1)), M));
  Var* bits = binary(cv, "add", binary(cv, "mul", cv.cast(E, i32), cv.cs(std::ldexp(1.0, f.man), i32)), cv.cast(M, i32));
  // the sign bit: the top bit of the signed integer
  Var* neg = binary(cv, "logical_or", binary(cv, "less", xf, fconst(cv, 0)),
                    binary(cv, "logical_and", binary(cv, "equal", xf, fconst(cv, 0)), binary(cv, "less", binary(cv, "real_div", fconst(cv, 1), xf), fconst(cv, 0))));
  return binary(cv, "add", bits, cv.em.sel(neg, cv.cs(-std::ldexp(1.0, f.width - 1), i32), cv.cs(0, i32)));
}

// The float of layout f whose bit pattern is the integer x (of f's width, signed or not).
Var* bits_float(C& cv, Var* x, const Ieee& f) {
  DataType f32 = DataType::Float32, i32 = DataType::Int32;
  Var* xi = cv.cast(x, i32);
  Var* neg = binary(cv, "less", xi, cv.cs(0, i32));
  double top = std::ldexp(1.0, f.width - 1);
  // the bits below the sign: x + 2^(w-1) for a negative (signed) x, x - 2^(w-1) for a large unsigned one
  Var* u = cv.em.sel(neg, binary(cv, "sub", xi, cv.cs(-top, i32)), xi);
  if (f.width < 32) {  // an unsigned pattern past the sign bit (int32 cannot hold one)
    Var* big = binary(cv, "greater_equal", u, cv.cs(top, i32));
    u = cv.em.sel(big, binary(cv, "sub", u, cv.cs(top, i32)), u);
    neg = binary(cv, "logical_or", neg, big);
  }
  Var* E = binary(cv, "floor_div", u, cv.cs(std::ldexp(1.0, f.man), i32));
  Var* M = cv.cast(binary(cv, "sub", u, binary(cv, "mul", E, cv.cs(std::ldexp(1.0, f.man), i32))), f32);
  Var* Ef = cv.cast(E, f32);
  double emax = std::ldexp(1.0, f.width - 1 - f.man) - 1;
  Var* normal = binary(cv, "mul", binary(cv, "add", fconst(cv, 1), binary(cv, "mul", M, fconst(cv, std::ldexp(1.0, -f.man)))),
                       cv.op("exp2", {C::arg("x", binary(cv, "sub", Ef, fconst(cv, f.bias)))}));
  Var* subn = binary(cv, "mul", M, fconst(cv, std::ldexp(1.0, 1 - f.bias - f.man)));
  Var* v = cv.em.sel(binary(cv, "equal", Ef, fconst(cv, 0)), subn, normal);
  Var* special = cv.em.sel(binary(cv, "equal", M, fconst(cv, 0)), fconst(cv, std::numeric_limits<double>::infinity()),
                     fconst(cv, std::numeric_limits<double>::quiet_NaN()));
  v = cv.em.sel(binary(cv, "equal", Ef, fconst(cv, emax)), special, v);
  return cv.em.sel(neg, binary(cv, "mul", v, fconst(cv, -1)), v);
}

void bit_cast(C& cv, const NodeProto& n) {
  int from = cv.elem_type(n, 0), to = static_cast<int>(C::attr_int(n, "to", 0));
  Var* x = cv.in(n, 0);
  auto width = [](int t) -> int {
    switch (t) {
      case TensorProto::BOOL:
      case TensorProto::INT8:
      case TensorProto::UINT8: return 8;
      case TensorProto::INT16:
      case TensorProto::UINT16:
      case TensorProto::FLOAT16:
      case TensorProto::BFLOAT16: return 16;
      case TensorProto::INT32:
      case TensorProto::UINT32:
      case TensorProto::FLOAT: return 32;
      default: return 64;
    }
  };
  if (!from) cv.fail(n, "the input's element type must be known");
  if (width(from) != width(to)) cv.fail(n, "the element types must have the same width");
  if (width(from) == 64) cv.fail(n, "64-bit types are held in 32 bits: their bit patterns cannot be reinterpreted");
  auto fi = ieee(from), ti = ieee(to);
  if (is_narrow_type(from) || is_narrow_type(to)) cv.fail(n, "bfloat16 bit patterns are not supported");
  DataType i32 = DataType::Int32;
  if (fi && ti) return cv.out(n, 0, x);
  if (fi) x = float_bits(cv, x, *fi);
  if (ti) return cv.out(n, 0, cv.cast(bits_float(cv, x, *ti), *mil_dtype(to)));
  // integer to integer of one width: wrapped to the target's signedness
  int w = width(to);
  bool to_signed = to == TensorProto::INT8 || to == TensorProto::INT16 || to == TensorProto::INT32;
  Var* xi = cv.cast(x, i32);
  double span = std::ldexp(1.0, w);
  if (to == TensorProto::BOOL) return cv.out(n, 0, binary(cv, "not_equal", xi, cv.cs(0, i32)));
  if (to_signed && w < 32) xi = cv.em.sel(binary(cv, "greater_equal", xi, cv.cs(span / 2, i32)), binary(cv, "sub", xi, cv.cs(span, i32)), xi);
  if (!to_signed) {
    if (w == 32) cv.fail(n, "uint32 values past 2^31 - 1 cannot be held in int32");
    xi = cv.em.sel(binary(cv, "less", xi, cv.cs(0, i32)), binary(cv, "add", xi, cv.cs(span, i32)), xi);
  }
  cv.out(n, 0, xi);
}

// NonMaxSuppression as ONNX's reference runs it: per (batch, class) the boxes by descending score
// (ties: lower index first), greedily kept unless one kept before overlaps it by more than
// iou_threshold, up to max_output_boxes_per_class; the steps are unrolled over the boxes.
void nms(C& cv, const NodeProto& n) {
  Var* boxes = cv.cast(cv.in(n, 0), DataType::Float32);
  Var* scores = cv.cast(cv.in(n, 1), DataType::Float32);
  auto bs = C::static_shape(boxes), ss = C::static_shape(scores);
  if (!bs || !ss || bs->size() != 3 || ss->size() != 3 || (*bs)[2] != 4) cv.fail(n, "needs boxes [B, N, 4] and scores [B, C, N] of known shapes");
  int64_t B = (*bs)[0], N = (*bs)[1], Cc = (*ss)[1];
  if (N > 256) cv.fail(n, "more than 256 boxes per batch are not supported (the greedy steps are unrolled)");
  DataType f32 = DataType::Float32, i32 = DataType::Int32;
  Var* maxout = C::has(n, 2) ? cv.cast(cv.op("reshape", {C::arg("x", cv.in(n, 2)), C::arg_ints32("shape", {})}), f32) : fconst(cv, 0);
  Var* iou_t = C::has(n, 3) ? cv.op("reshape", {C::arg("x", cv.cast(cv.in(n, 3), f32)), C::arg_ints32("shape", {})}) : fconst(cv, 0);
  // corners: [y1, x1, y2, x2] in either order, or [xc, yc, w, h]
  auto coord = [&](int64_t i) { return cv.op("squeeze", {C::arg("x", cv.em.slice_axis(boxes, 2, i, i + 1)), C::arg_ints32("axes", {2})}); };
  Var *x0, *x1, *y0, *y1;
  if (C::attr_int(n, "center_point_box", 0) == 0) {
    Var *a = coord(0), *b = coord(1), *c = coord(2), *d = coord(3);
    y0 = binary(cv, "minimum", a, c), y1 = binary(cv, "maximum", a, c);
    x0 = binary(cv, "minimum", b, d), x1 = binary(cv, "maximum", b, d);
  } else {
    Var *xc = coord(0), *yc = coord(1), *hw = binary(cv, "mul", coord(2), fconst(cv, 0.5)), *hh = binary(cv, "mul", coord(3), fconst(cv, 0.5));
    x0 = binary(cv, "sub", xc, hw), x1 = binary(cv, "add", xc, hw), y0 = binary(cv, "sub", yc, hh), y1 = binary(cv, "add", yc, hh);
  }
  // [B, N, N]: whether box j is suppressed by a kept box i
  auto col = [&](Var* v) { return cv.op("expand_dims", {C::arg("x", v), C::arg_ints32("axes", {2})}); };
  auto row = [&](Var* v) { return cv.op("expand_dims", {C::arg("x", v), C::arg_ints32("axes", {1})}); };
  Var* iw = binary(cv, "sub", binary(cv, "minimum", col(x1), row(x1)), binary(cv, "maximum", col(x0), row(x0)));
  Var* ih = binary(cv, "sub", binary(cv, "minimum", col(y1), row(y1)), binary(cv, "maximum", col(y0), row(y0)));
  Var* area = binary(cv, "mul", binary(cv, "sub", x1, x0), binary(cv, "sub", y1, y0));
  Var* inter = binary(cv, "mul", iw, ih);
  Var* uni = binary(cv, "sub", binary(cv, "add", col(area), row(area)), inter);
  Var* ok = binary(cv, "logical_and", binary(cv, "greater", iw, fconst(cv, 0)), binary(cv, "greater", ih, fconst(cv, 0)));
  ok = binary(cv, "logical_and", ok, binary(cv, "logical_and", binary(cv, "greater", col(area), fconst(cv, 0)), binary(cv, "greater", row(area), fconst(cv, 0))));
  ok = binary(cv, "logical_and", ok, binary(cv, "greater", uni, fconst(cv, 0)));
  Var* iou = binary(cv, "real_div", inter, cv.em.sel(ok, uni, fconst(cv, 1)));
  Var* sup = cv.cast(binary(cv, "logical_and", ok, binary(cv, "greater", iou, iou_t)), f32);
  sup = cv.op("expand_dims", {C::arg("x", sup), C::arg_ints32("axes", {1})});  // [B, 1, N, N]
  // the rank of each box by score: how many come before it
  Var* sc = cv.op("expand_dims", {C::arg("x", scores), C::arg_ints32("axes", {3})});  // [B, C, N, 1] (box j)
  Var* sr = cv.op("expand_dims", {C::arg("x", scores), C::arg_ints32("axes", {2})});  // [B, C, 1, N] (box k)
  std::vector<double> lower(static_cast<size_t>(N * N));
  for (int64_t j = 0; j < N; ++j)
    for (int64_t k = 0; k < N; ++k) lower[static_cast<size_t>(j * N + k)] = k < j ? 1 : 0;
  Var* before = binary(cv, "logical_or", binary(cv, "greater", sr, sc),
                       binary(cv, "logical_and", binary(cv, "equal", sr, sc), cv.cast(cv.c(Value::from_doubles(f32, {N, N}, lower)), DataType::Bool)));
  Var* rank = cv.op("reduce_sum", {C::arg("x", cv.cast(before, f32)), C::arg_ints32("axes", {3}), C::arg_bool("keep_dims", false)});  // [B, C, N]
  Var* valid = C::has(n, 4) ? binary(cv, "greater", scores, cv.op("reshape", {C::arg("x", cv.cast(cv.in(n, 4), f32)), C::arg_ints32("shape", {})}))
                            : binary(cv, "equal", scores, scores);
  Var* validf = cv.cast(valid, f32);
  Var* supd = nullptr;  // [B, C, N]: suppressed so far
  Var* count = nullptr;
  std::vector<ArgItem> kept;
  for (int64_t r = 0; r < N; ++r) {
    Var* pick = cv.cast(binary(cv, "equal", rank, fconst(cv, static_cast<double>(r))), f32);  // one-hot [B, C, N]
    Var* cand = binary(cv, "mul", pick, validf);
    if (supd) cand = binary(cv, "mul", cand, binary(cv, "sub", fconst(cv, 1), supd));
    Var* k = cv.op("reduce_sum", {C::arg("x", cand), C::arg_ints32("axes", {2}), C::arg_bool("keep_dims", false)});  // [B, C]
    k = binary(cv, "mul", k, cv.cast(binary(cv, "less", count ? count : fconst(cv, 0), maxout), f32));
    kept.push_back(ArgItem{cv.op("expand_dims", {C::arg("x", k), C::arg_ints32("axes", {2})}), nullptr});
    count = count ? binary(cv, "add", count, k) : k;
    // the boxes the kept one overlaps: its row of the suppression matrix
    Var* rowsel = cv.op("matmul", {C::arg("x", cv.op("expand_dims", {C::arg("x", binary(cv, "mul", pick, cv.op("expand_dims", {C::arg("x", k), C::arg_ints32("axes", {2})}))), C::arg_ints32("axes", {2})})),
                                   C::arg("y", sup)});  // [B, C, 1, N]
    Var* s2 = cv.op("squeeze", {C::arg("x", rowsel), C::arg_ints32("axes", {2})});
    supd = supd ? binary(cv, "maximum", supd, s2) : s2;
  }
  Var* keep = N == 1 ? kept[0].var : cv.op("concat", {Arg{"values", kept, true}, C::arg_i32("axis", 2)});  // [B, C, rank]
  // the box of each rank
  std::vector<double> idx(static_cast<size_t>(N));
  for (int64_t j = 0; j < N; ++j) idx[static_cast<size_t>(j)] = static_cast<double>(j);
  std::vector<double> rr(static_cast<size_t>(N));
  for (int64_t j = 0; j < N; ++j) rr[static_cast<size_t>(j)] = static_cast<double>(j);
  Var* at = cv.cast(binary(cv, "equal", cv.op("expand_dims", {C::arg("x", rank), C::arg_ints32("axes", {3})}), cv.c(Value::from_doubles(f32, {1, 1, 1, N}, rr))), f32);  // [B, C, box, rank]
  Var* order = cv.op("reduce_sum", {C::arg("x", binary(cv, "mul", at, cv.c(Value::from_doubles(f32, {1, 1, N, 1}, idx)))), C::arg_ints32("axes", {2}), C::arg_bool("keep_dims", false)});
  Var* nz = cv.op("non_zero", {C::arg("x", keep)});  // [K, 3]: batch, class, rank
  Var* box = cv.cast(cv.op("gather_nd", {C::arg("x", order), C::arg("indices", nz)}), i32);
  Var* bc = cv.em.slice_axis(nz, 1, 0, 2);
  Var* y = cv.op("concat", {Arg{"values", {ArgItem{bc, nullptr}, ArgItem{cv.op("expand_dims", {C::arg("x", box), C::arg_ints32("axes", {1})}), nullptr}}, true}, C::arg_i32("axis", 1)});
  (void)B, (void)Cc;
  cv.out(n, 0, y);
}

// Unique: the slices along axis (elements when no axis) compared pairwise; first occurrences
// picked with non_zero (a run-time count), ordered by first occurrence or (sorted)
// lexicographically; inverse indices and counts from the equality with the picked slices.
void unique(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  auto xs = C::static_shape(x);
  if (!xs) cv.fail(n, "needs the input's shape to be known");
  int r = static_cast<int>(xs->size());
  bool has_axis = C::find_attr(n, "axis") != nullptr;
  int64_t ax = has_axis ? cv.axis(n, C::attr_int(n, "axis", 0), r) : 0;
  DataType i32 = DataType::Int32, f32 = DataType::Float32;
  // rows: [L, R] with the slices along axis as rows
  Var* rows;
  int64_t L, R = 1;
  std::vector<int64_t> perm;
  if (!has_axis) {
    L = 1;
    for (auto d : *xs) L *= d;
    rows = cv.op("reshape", {C::arg("x", x), C::arg_ints32("shape", {L, 1})});
  } else {
    L = (*xs)[static_cast<size_t>(ax)];
    perm.push_back(ax);
    for (int i = 0; i < r; ++i)
      if (i != ax) perm.push_back(i), R *= (*xs)[static_cast<size_t>(i)];
    rows = cv.op("reshape", {C::arg("x", cv.op("transpose", {C::arg("x", x), C::arg_ints32("perm", perm)})), C::arg_ints32("shape", {L, R})});
  }
  Var* a = cv.op("expand_dims", {C::arg("x", rows), C::arg_ints32("axes", {1})});  // [L, 1, R]
  Var* b = cv.op("expand_dims", {C::arg("x", rows), C::arg_ints32("axes", {0})});  // [1, L, R]
  Var* neq = cv.cast(binary(cv, "not_equal", a, b), f32);                       // [L, L, R]
  Var* same = binary(cv, "equal", cv.op("reduce_sum", {C::arg("x", neq), C::arg_ints32("axes", {2}), C::arg_bool("keep_dims", false)}), fconst(cv, 0));
  std::vector<double> strict(static_cast<size_t>(L * L));
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < L; ++j) strict[static_cast<size_t>(i * L + j)] = j < i ? 1 : 0;
  Var* earlier = cv.op("reduce_sum", {C::arg("x", binary(cv, "mul", cv.cast(same, f32), cv.c(Value::from_doubles(f32, {L, L}, strict)))),
                                      C::arg_ints32("axes", {1}), C::arg_bool("keep_dims", false)});
  Var* first = binary(cv, "equal", earlier, fconst(cv, 0));  // [L]
  Var* idx = cv.op("reshape", {C::arg("x", cv.op("non_zero", {C::arg("x", first)})), C::arg_ints32("shape", {-1})});  // [K], ascending
  Var* order = idx;
  if (C::attr_int(n, "sorted", 1) != 0) {
    // row i before row j (lexicographically): at the first differing position, i's is smaller
    Var* before_diff = binary(cv, "equal", cv.op("cumsum", {C::arg("x", neq), C::arg_i32("axis", 2), C::arg_bool("exclusive", true)}), fconst(cv, 0));
    Var* lt = binary(cv, "logical_and", binary(cv, "less", a, b), before_diff);
    Var* less = binary(cv, "greater", cv.op("reduce_sum", {C::arg("x", cv.cast(lt, f32)), C::arg_ints32("axes", {2}), C::arg_bool("keep_dims", false)}), fconst(cv, 0));
    // rank of row i among the first occurrences: first rows j with row j < row i
    Var* rank = cv.op("reduce_sum", {C::arg("x", binary(cv, "mul", cv.cast(cv.op("transpose", {C::arg("x", less), C::arg_ints32("perm", {1, 0})}), f32),
                                                        cv.op("expand_dims", {C::arg("x", cv.cast(first, f32)), C::arg_ints32("axes", {0})}))),
                                     C::arg_ints32("axes", {1}), C::arg_bool("keep_dims", false)});
    Var* rk = cv.op("gather", {C::arg("x", rank), C::arg("indices", idx), C::arg_i32("axis", 0)});
    Var* p = cv.op("argsort", {C::arg("x", rk), C::arg_i32("axis", 0), C::arg_bool("ascending", true)});
    order = cv.op("gather", {C::arg("x", idx), C::arg("indices", p), C::arg_i32("axis", 0)});
  }
  // Y: the picked slices
  Var* y = cv.op("gather", {C::arg("x", x), C::arg("indices", order), C::arg_i32("axis", ax)});
  if (!has_axis) y = cv.op("reshape", {C::arg("x", y), C::arg_ints32("shape", {-1})});
  cv.out(n, 0, y);
  cv.out(n, 1, order);
  // [L, K]: whether row j equals picked row k
  Var* eqk = cv.op("gather", {C::arg("x", cv.cast(same, f32)), C::arg("indices", order), C::arg_i32("axis", 1)});
  Var* K = cv.op("gather", {C::arg("x", cv.op("shape", {C::arg("x", order)})), C::arg("indices", Value::scalar_int(i32, 0))});
  Var* kk = cv.cast(cv.op("range_1d", {C::arg("start", Value::scalar_int(i32, 0)), C::arg("end", K), C::arg("step", Value::scalar_int(i32, 1))}), f32);
  Var* inv = cv.op("reduce_sum", {C::arg("x", binary(cv, "mul", eqk, cv.op("expand_dims", {C::arg("x", kk), C::arg_ints32("axes", {0})}))),
                                  C::arg_ints32("axes", {1}), C::arg_bool("keep_dims", false)});
  cv.out(n, 2, cv.cast(inv, i32));
  cv.out(n, 3, cv.cast(cv.op("reduce_sum", {C::arg("x", eqk), C::arg_ints32("axes", {0}), C::arg_bool("keep_dims", false)}), i32));
  (void)R;
}

// TfIdfVectorizer over integer tokens: each pool n-gram of length k counted at every start
// whose k tokens, skip_distance apart (1 .. max_skip_count + 1; unigrams once), match it.
void tfidf(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  auto xs = C::static_shape(x);
  if (!xs || xs->empty() || xs->size() > 2) cv.fail(n, "needs a 1-D or 2-D input of known shape");
  if (!C::find_attr(n, "pool_int64s")) cv.fail(n, "string pools are not supported (Core ML has no string tensors)");
  auto pool = C::attr_ints(n, "pool_int64s");
  auto counts = C::attr_ints(n, "ngram_counts");
  auto indexes = C::attr_ints(n, "ngram_indexes");
  auto weights = C::attr_floats(n, "weights");
  int64_t minl = C::attr_int(n, "min_gram_length", 1), maxl = C::attr_int(n, "max_gram_length", 1), skips = C::attr_int(n, "max_skip_count", 0);
  std::string mode = C::attr_string(n, "mode", "TF");
  int64_t out = 0;
  for (auto v : indexes) out = std::max(out, v + 1);
  int r = static_cast<int>(xs->size());
  int64_t L = xs->back();
  DataType f32 = DataType::Float32;
  Var* xf = cv.cast(x, f32);
  Var* y = nullptr;
  int64_t id = 0;  // n-gram number (into ngram_indexes)
  for (size_t lvl = 0; lvl < counts.size(); ++lvl) {
    int64_t k = static_cast<int64_t>(lvl) + 1;
    int64_t begin = counts[lvl], end = lvl + 1 < counts.size() ? counts[lvl + 1] : static_cast<int64_t>(pool.size());
    int64_t grams = (end - begin) / k;
    if (grams <= 0) continue;
    int64_t first_id = id;
    id += grams;
    if (k < minl || k > maxl) continue;
    // [grams, out]: where each n-gram's count goes
    std::vector<double> to(static_cast<size_t>(grams * out), 0.0);
    for (int64_t g = 0; g < grams; ++g) {
      if (first_id + g >= static_cast<int64_t>(indexes.size())) cv.fail(n, "ngram_indexes is shorter than the pool");
      to[static_cast<size_t>(g * out + indexes[static_cast<size_t>(first_id + g)])] = 1.0;
    }
    Var* tom = cv.c(Value::from_doubles(f32, {grams, out}, to));
    for (int64_t d = 1; d <= (k == 1 ? 1 : skips + 1); ++d) {
      int64_t span = d * (k - 1), len = L - span;
      if (len <= 0) break;
      Var* match = nullptr;
      for (int64_t j = 0; j < k; ++j) {
        std::vector<double> tok(static_cast<size_t>(grams));
        for (int64_t g = 0; g < grams; ++g) tok[static_cast<size_t>(g)] = static_cast<double>(pool[static_cast<size_t>(begin + g * k + j)]);
        Var* sl = cv.op("expand_dims", {C::arg("x", cv.em.slice_axis(xf, r - 1, d * j, d * j + len)), C::arg_ints32("axes", {-1})});
        Var* eq = cv.cast(binary(cv, "equal", sl, cv.c(Value::from_doubles(f32, {grams}, tok))), f32);
        match = match ? binary(cv, "mul", match, eq) : eq;
      }
      Var* c = cv.op("reduce_sum", {C::arg("x", match), C::arg_ints32("axes", {r - 1}), C::arg_bool("keep_dims", false)});  // [.., grams]
      Var* part = cv.op("matmul", {C::arg("x", r == 1 ? cv.op("expand_dims", {C::arg("x", c), C::arg_ints32("axes", {0})}) : c), C::arg("y", tom)});
      if (r == 1) part = cv.op("squeeze", {C::arg("x", part), C::arg_ints32("axes", {0})});
      y = y ? binary(cv, "add", y, part) : part;
    }
  }
  std::vector<int64_t> oshape = r == 1 ? std::vector<int64_t>{out} : std::vector<int64_t>{(*xs)[0], out};
  if (!y) y = cv.c(Value::from_doubles(f32, oshape, std::vector<double>(static_cast<size_t>(r == 1 ? out : (*xs)[0] * out), 0.0)));
  if (mode == "IDF" || mode == "TFIDF") {
    Var* w = weights.empty() ? fconst(cv, 1) : cv.c(Value::from_doubles(f32, {out}, std::vector<double>(weights.begin(), weights.end())));
    if (mode == "IDF") y = binary(cv, "mul", cv.cast(binary(cv, "greater", y, fconst(cv, 0)), f32), w);
    else y = binary(cv, "mul", y, w);
  } else if (mode != "TF") {
    cv.fail(n, "mode must be TF, IDF or TFIDF");
  }
  cv.out(n, 0, y);
}

// Bilinear taps along one axis of size D at run-time coordinates c ([R, S]), as RoiAlign's
// reference takes them: a sample outside [-1, D] contributes nothing (valid), below 0 it is 0, at
// or past D - 1 both taps are the last pixel.
struct Taps2 {
  Var *lo, *hi, *wlo, *whi, *valid;
};
Taps2 roi_taps(C& cv, Var* c, int64_t D) {
  DataType f32 = DataType::Float32;
  Var* valid = cv.cast(binary(cv, "logical_and", binary(cv, "greater_equal", c, fconst(cv, -1)), binary(cv, "less_equal", c, fconst(cv, static_cast<double>(D)))), f32);
  Var* y = binary(cv, "maximum", c, fconst(cv, 0));
  Var* lo = cv.op("floor", {C::arg("x", y)});
  Var* last = binary(cv, "greater_equal", lo, fconst(cv, static_cast<double>(D - 1)));
  lo = cv.em.sel(last, fconst(cv, static_cast<double>(D - 1)), lo);
  Var* hi = cv.em.sel(last, lo, binary(cv, "add", lo, fconst(cv, 1)));
  y = cv.em.sel(last, lo, y);
  Var* l = binary(cv, "sub", y, lo);
  return {cv.cast(lo, DataType::Int32), cv.cast(hi, DataType::Int32), binary(cv, "sub", fconst(cv, 1), l), l, valid};
}

void roi_align(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  Var* rois = cv.cast(cv.in(n, 1), DataType::Float32);
  auto xs = C::static_shape(x), rs = C::static_shape(rois);
  if (!xs || !rs || xs->size() != 4 || rs->size() != 2 || (*rs)[1] != 4) cv.fail(n, "needs X [N, C, H, W] and rois [R, 4] of known shapes");
  int64_t R = (*rs)[0], Cc = (*xs)[1], H = (*xs)[2], W = (*xs)[3];
  int64_t oh = C::attr_int(n, "output_height", 1), ow = C::attr_int(n, "output_width", 1), g = C::attr_int(n, "sampling_ratio", 0);
  if (g <= 0) cv.fail(n, "an adaptive sampling_ratio (0) depends on the boxes' values; give a positive one");
  double scale = C::attr_float(n, "spatial_scale", 1.0f);
  bool half = C::attr_string(n, "coordinate_transformation_mode", cv.opset >= 16 ? "half_pixel" : "output_half_pixel") == "half_pixel";
  std::string mode = C::attr_string(n, "mode", "avg");
  DataType f32 = DataType::Float32, i32 = DataType::Int32;
  auto col = [&](int64_t i) { return cv.em.slice_axis(rois, 1, i, i + 1); };  // [R, 1]
  auto start_of = [&](int64_t i) { return binary(cv, "sub", binary(cv, "mul", col(i), fconst(cv, scale)), fconst(cv, half ? 0.5 : 0.0)); };
  Var *sw = start_of(0), *shh = start_of(1), *ew = start_of(2), *eh = start_of(3);
  Var* rw = binary(cv, "sub", ew, sw);
  Var* rh = binary(cv, "sub", eh, shh);
  if (!half) rw = binary(cv, "maximum", rw, fconst(cv, 1)), rh = binary(cv, "maximum", rh, fconst(cv, 1));
  auto samples = [&](Var* start, Var* len, int64_t out) {
    std::vector<double> k(static_cast<size_t>(out * g));
    for (int64_t i = 0; i < out * g; ++i) k[static_cast<size_t>(i)] = static_cast<double>(i / g) + (static_cast<double>(i % g) + 0.5) / static_cast<double>(g);
    Var* bin = binary(cv, "real_div", len, fconst(cv, static_cast<double>(out)));
    return binary(cv, "add", start, binary(cv, "mul", bin, cv.c(Value::from_doubles(f32, {1, out * g}, k))));  // [R, S]
  };
  Taps2 ty = roi_taps(cv, samples(shh, rh, oh), H), tx = roi_taps(cv, samples(sw, rw, ow), W);
  Var* xb = cv.op("gather", {C::arg("x", cv.cast(x, f32)), C::arg("indices", cv.cast(cv.in(n, 2), i32)), C::arg_i32("axis", 0)});  // [R, C, H, W]
  int64_t Sy = oh * g, Sx = ow * g;
  auto rows = [&](Var* idx) {  // [R, C, Sy, W]
    Var* i4 = cv.op("reshape", {C::arg("x", idx), C::arg_ints32("shape", {R, 1, Sy, 1})});
    i4 = cv.op("tile", {C::arg("x", i4), C::arg_ints32("reps", {1, Cc, 1, W})});
    return cv.op("gather_along_axis", {C::arg("x", xb), C::arg("indices", i4), C::arg_i32("axis", 2)});
  };
  auto cols = [&](Var* v, Var* idx) {  // [R, C, Sy, Sx]
    Var* i4 = cv.op("reshape", {C::arg("x", idx), C::arg_ints32("shape", {R, 1, 1, Sx})});
    i4 = cv.op("tile", {C::arg("x", i4), C::arg_ints32("reps", {1, Cc, Sy, 1})});
    return cv.op("gather_along_axis", {C::arg("x", v), C::arg("indices", i4), C::arg_i32("axis", 3)});
  };
  auto wy = [&](Var* w) { return cv.op("reshape", {C::arg("x", binary(cv, "mul", w, ty.valid)), C::arg_ints32("shape", {R, 1, Sy, 1})}); };
  auto wx = [&](Var* w) { return cv.op("reshape", {C::arg("x", binary(cv, "mul", w, tx.valid)), C::arg_ints32("shape", {R, 1, 1, Sx})}); };
  Var *rlo = rows(ty.lo), *rhi = rows(ty.hi);
  Var* corner[4] = {binary(cv, "mul", cols(rlo, tx.lo), binary(cv, "mul", wy(ty.wlo), wx(tx.wlo))),
                    binary(cv, "mul", cols(rlo, tx.hi), binary(cv, "mul", wy(ty.wlo), wx(tx.whi))),
                    binary(cv, "mul", cols(rhi, tx.lo), binary(cv, "mul", wy(ty.whi), wx(tx.wlo))),
                    binary(cv, "mul", cols(rhi, tx.hi), binary(cv, "mul", wy(ty.whi), wx(tx.whi)))};
  Var* v;
  if (mode == "avg") {
    v = binary(cv, "add", binary(cv, "add", corner[0], corner[1]), binary(cv, "add", corner[2], corner[3]));
  } else if (mode == "max") {
    v = binary(cv, "maximum", binary(cv, "maximum", corner[0], corner[1]), binary(cv, "maximum", corner[2], corner[3]));
  } else {
    cv.fail(n, "mode must be avg or max");
  }
  v = cv.op("reshape", {C::arg("x", v), C::arg_ints32("shape", {R, Cc, oh, g, ow, g})});
  Var* y = mode == "avg" ? binary(cv, "real_div", cv.op("reduce_sum", {C::arg("x", v), C::arg_ints32("axes", {3, 5}), C::arg_bool("keep_dims", false)}),
                                  fconst(cv, static_cast<double>(g * g)))
                         : cv.op("reduce_max", {C::arg("x", v), C::arg_ints32("axes", {3, 5}), C::arg_bool("keep_dims", false)});
  cv.out(n, 0, cv.cast(y, C::dtype(x)));
}

// DeformConv (2-D): every kernel tap sampled bilinearly at its offset position (taps outside the
// image are 0, as ONNX's reference samples with GridSample), times the mask, then a grouped
// convolution as a matrix product over the sampled columns.
void deform_conv(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  Var* w = cv.in(n, 1);
  Var* off = cv.cast(cv.in(n, 2), DataType::Float32);
  auto xs = C::static_shape(x), ws = C::static_shape(w), os = C::static_shape(off);
  if (!xs || !ws || !os || xs->size() != 4) cv.fail(n, "needs a 4-D input and the shapes of X, W and offset to be known");
  int64_t N = (*xs)[0], Ci = (*xs)[1], H = (*xs)[2], Wd = (*xs)[3], Co = (*ws)[0];
  auto ks = C::attr_ints(n, "kernel_shape", {(*ws)[2], (*ws)[3]});
  auto st = C::attr_ints(n, "strides", {1, 1}), dl = C::attr_ints(n, "dilations", {1, 1}), pads = C::attr_ints(n, "pads", {0, 0, 0, 0});
  int64_t grp = C::attr_int(n, "group", 1), og = C::attr_int(n, "offset_group", 1);
  int64_t kh = ks[0], kw = ks[1], oh = (*os)[2], ow = (*os)[3];
  if (Ci % og || Ci % grp || Co % grp || (*os)[1] != og * kh * kw * 2) cv.fail(n, "the channel, group and offset shapes do not match");
  int64_t K = kh * kw * oh * ow, Cg = Ci / og;
  DataType f32 = DataType::Float32, i32 = DataType::Int32;
  Var* o7 = cv.op("reshape", {C::arg("x", off), C::arg_ints32("shape", {N, og, kh, kw, 2, oh, ow})});
  auto comp = [&](int64_t c, int64_t dim) {
    // base position of each tap and output: -pad + stride * o + dilation * k
    std::vector<double> base(static_cast<size_t>(K));
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j)
        for (int64_t a = 0; a < oh; ++a)
          for (int64_t b = 0; b < ow; ++b)
            base[static_cast<size_t>(((i * kw + j) * oh + a) * ow + b)] =
                dim == 0 ? static_cast<double>(-pads[0] + st[0] * a + dl[0] * i) : static_cast<double>(-pads[1] + st[1] * b + dl[1] * j);
    Var* o = cv.op("reshape", {C::arg("x", cv.em.slice_axis(o7, 4, c, c + 1)), C::arg_ints32("shape", {N, og, 1, K})});
    return binary(cv, "add", o, cv.c(Value::from_doubles(f32, {1, 1, 1, K}, base)));
  };
  Var* py = comp(0, 0);
  Var* px = comp(1, 1);
  Var* fy = cv.op("floor", {C::arg("x", py)});
  Var* fx = cv.op("floor", {C::arg("x", px)});
  Var* ly = binary(cv, "sub", py, fy);
  Var* lx = binary(cv, "sub", px, fx);
  Var* mask = C::has(n, 4) ? cv.op("reshape", {C::arg("x", cv.cast(cv.in(n, 4), f32)), C::arg_ints32("shape", {N, og, 1, K})}) : nullptr;
  Var* xg = cv.op("reshape", {C::arg("x", cv.cast(x, f32)), C::arg_ints32("shape", {N, og, Cg, H * Wd})});
  Var* acc = nullptr;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b) {
      Var* iy = binary(cv, "add", fy, fconst(cv, a));
      Var* ix = binary(cv, "add", fx, fconst(cv, b));
      Var* wgt = binary(cv, "mul", a ? ly : binary(cv, "sub", fconst(cv, 1), ly), b ? lx : binary(cv, "sub", fconst(cv, 1), lx));
      Var* ok = binary(cv, "logical_and", binary(cv, "logical_and", binary(cv, "greater_equal", iy, fconst(cv, 0)), binary(cv, "less", iy, fconst(cv, static_cast<double>(H)))),
                       binary(cv, "logical_and", binary(cv, "greater_equal", ix, fconst(cv, 0)), binary(cv, "less", ix, fconst(cv, static_cast<double>(Wd)))));
      wgt = binary(cv, "mul", wgt, cv.cast(ok, f32));
      if (mask) wgt = binary(cv, "mul", wgt, mask);
      Var* flat = binary(cv, "add", binary(cv, "mul", cv.op("clip", {C::arg("x", iy), C::arg_f32("alpha", 0), C::arg_f32("beta", static_cast<double>(H - 1))}), fconst(cv, static_cast<double>(Wd))),
                         cv.op("clip", {C::arg("x", ix), C::arg_f32("alpha", 0), C::arg_f32("beta", static_cast<double>(Wd - 1))}));
      Var* idx = cv.op("tile", {C::arg("x", cv.cast(flat, i32)), C::arg_ints32("reps", {1, 1, Cg, 1})});
      Var* v = binary(cv, "mul", cv.op("gather_along_axis", {C::arg("x", xg), C::arg("indices", idx), C::arg_i32("axis", 3)}), wgt);  // [N, og, Cg, K]
      acc = acc ? binary(cv, "add", acc, v) : v;
    }
  // columns [N, group, (Ci / group) * kh * kw, oh * ow] against W [group, Co / group, (Ci / group) * kh * kw]
  Var* cols = cv.op("reshape", {C::arg("x", acc), C::arg_ints32("shape", {N, grp, (Ci / grp) * kh * kw, oh * ow})});
  Var* wm = cv.op("reshape", {C::arg("x", cv.cast(w, f32)), C::arg_ints32("shape", {grp, Co / grp, (Ci / grp) * kh * kw})});
  Var* y = cv.op("matmul", {C::arg("x", wm), C::arg("y", cols)});  // [N, group, Co / group, oh * ow]
  y = cv.op("reshape", {C::arg("x", y), C::arg_ints32("shape", {N, Co, oh, ow})});
  if (C::has(n, 3)) y = binary(cv, "add", y, cv.op("reshape", {C::arg("x", cv.cast(cv.in(n, 3), f32)), C::arg_ints32("shape", {1, Co, 1, 1})}));
  cv.out(n, 0, cv.cast(y, C::dtype(x)));
}

}  // namespace

namespace {

void mel_weight_matrix(C& cv, const NodeProto& n) {
  // a constant: triangular filters between mel-spaced bins (ONNX's reference arithmetic: the mel
  // edges in fp32, the bins in double)
  int64_t mels = cv.ints(n, 0, "num_mel_bins").at(0), dft = cv.ints(n, 1, "dft_length").at(0);
  int64_t rate = cv.ints(n, 2, "sample_rate").at(0);
  float lo = static_cast<float>(cv.doubles(n, 3, "lower_edge_hertz").at(0)), hi = static_cast<float>(cv.doubles(n, 4, "upper_edge_hertz").at(0));
  if (mels <= 0 || dft <= 0 || rate <= 0) cv.fail(n, "num_mel_bins, dft_length and sample_rate must be positive");
  auto mel = [](float hz) { return static_cast<float>(2595.0f * std::log1p(hz / 700.0f) / static_cast<float>(std::log(10.0))); };
  float lm = mel(lo), hm = mel(hi);
  float step = (hm - lm) / static_cast<float>(mels + 2);
  std::vector<int64_t> bins(static_cast<size_t>(mels + 2));
  for (int64_t i = 0; i < mels + 2; ++i) {
    double f = static_cast<double>(i) * static_cast<double>(step) + static_cast<double>(lm);
    f = 700.0 * std::expm1(f / 2595.0 * std::log(10.0));
    bins[static_cast<size_t>(i)] = static_cast<int64_t>(std::floor(static_cast<double>(dft + 1) * f / static_cast<double>(rate)));
  }
  int64_t nb = dft / 2 + 1;
  std::vector<double> w(static_cast<size_t>(nb * mels), 0.0);
  auto at = [&](int64_t j, int64_t i) -> double& {
    if (j < 0 || j >= nb) cv.fail(n, "a mel bin falls outside the spectrogram bins");
    return w[static_cast<size_t>(j * mels + i)];
  };
  for (int64_t i = 0; i < mels; ++i) {
    int64_t l = bins[static_cast<size_t>(i)], c = bins[static_cast<size_t>(i + 1)], h = bins[static_cast<size_t>(i + 2)];
    if (c == l) at(c, i) = 1;
    else
      for (int64_t j = l; j <= c; ++j) at(j, i) = static_cast<double>(j - l) / static_cast<double>(c - l);
    if (h > c)
      for (int64_t j = c; j < h; ++j) at(j, i) = static_cast<double>(h - j) / static_cast<double>(h - c);
  }
  auto dt = mil_dtype(static_cast<int>(C::attr_int(n, "output_datatype", onnx::TensorProto::FLOAT)));
  if (!dt) cv.fail(n, "output_datatype is not supported");
  cv.out_const(n, 0, Value::from_doubles(*dt, {nb, mels}, w));
}

// optional tensors: a present one is its tensor, an empty one a name without a value
void optional(C& cv, const NodeProto& n) {
  if (C::has(n, 0)) return cv.out(n, 0, cv.in(n, 0));
  if (C::wants(n, 0)) cv.empty_optionals.insert(n.output(0));
  // bound to nothing: reading it as a tensor fails below, OptionalHasElement gives false
  cv.out_const(n, 0, Value::scalar_bool(false));
}

void optional_has_element(C& cv, const NodeProto& n) {
  bool has = C::has(n, 0) && !cv.empty_optionals.count(n.input(0));
  cv.out_const(n, 0, Value::scalar_bool(has));
}

void optional_get_element(C& cv, const NodeProto& n) {
  if (!C::has(n, 0) || cv.empty_optionals.count(n.input(0))) cv.fail(n, "the optional is empty");
  Var* x = cv.in(n, 0);
  cv.out(n, 0, x);
}

void bitwise_and(C& cv, const NodeProto& n) { bitwise(cv, n, '&'); }

void bitwise_or(C& cv, const NodeProto& n) { bitwise(cv, n, '|'); }

void bitwise_xor(C& cv, const NodeProto& n) { bitwise(cv, n, '^'); }

void bitwise_not(C& cv, const NodeProto& n) { bitwise(cv, n, '~'); }

void reverse_sequence(C& cv, const NodeProto& n) {
  cv.out(n, 0, cv.op("reverse_sequence", {C::arg("x", cv.in(n, 0)), C::arg("lengths", cv.cast(cv.in(n, 1), DataType::Int32)),
                                          C::arg_i32("seq_axis", C::attr_int(n, "time_axis", 0)),
                                          C::arg_i32("batch_axis", C::attr_int(n, "batch_axis", 1))}));
}

void mat_mul_integer(C& cv, const NodeProto& n) {
  Var* y = cv.op("matmul", {C::arg("x", centered(cv, n, 0, 2, true)), C::arg("y", centered(cv, n, 1, 3, false))});
  cv.out(n, 0, cv.cast(y, DataType::Int32));
}

void conv_integer(C& cv, const NodeProto& n) {
  Var* x = centered(cv, n, 0, 2, false);
  Var* w = cv.cast(cv.in(n, 1), DataType::Float32);
  int r = cv.rank(n, w);
  if (C::has(n, 3)) w = binary(cv, "sub", w, per_out_channel(cv, cv.cast(cv.in(n, 3), DataType::Float32), r));
  cv.out(n, 0, cv.cast(cv.op("conv", conv_args(cv, n, x, w, static_cast<size_t>(r - 2))), DataType::Int32));
}

void q_linear_mat_mul(C& cv, const NodeProto& n) {
  // the integer product exactly (fp32 holds it for 8-bit operands), scaled, rounded, clipped
  Var* a = centered(cv, n, 0, 2, true);
  Var* b = centered(cv, n, 3, 5, false);
  Var* c = cv.op("matmul", {C::arg("x", a), C::arg("y", b)});
  Var* s = binary(cv, "real_div", binary(cv, "mul", cv.cast(cv.in(n, 1), DataType::Float32), cv.cast(cv.in(n, 4), DataType::Float32)),
                  cv.cast(cv.in(n, 6), DataType::Float32));
  cv.out(n, 0, requantize(cv, n, binary(cv, "mul", c, s), 7));
}

void q_linear_conv(C& cv, const NodeProto& n) {
  Var* x = centered(cv, n, 0, 2, false);
  Var* w = cv.cast(cv.in(n, 3), DataType::Float32);
  int r = cv.rank(n, w);
  if (C::has(n, 5)) w = binary(cv, "sub", w, per_out_channel(cv, cv.cast(cv.in(n, 5), DataType::Float32), r));
  Var* acc = cv.op("conv", conv_args(cv, n, x, w, static_cast<size_t>(r - 2)));
  std::vector<int64_t> axes;
  for (int i = 2; i < r; ++i) axes.push_back(i - 1);
  if (C::has(n, 8)) acc = binary(cv, "add", acc, cv.op("expand_dims", {C::arg("x", cv.cast(cv.in(n, 8), DataType::Float32)), C::arg_ints32("axes", axes)}));
  Var* ws = cv.cast(cv.in(n, 4), DataType::Float32);
  auto wss = C::static_shape(ws);
  if (wss && wss->size() == 1 && (*wss)[0] > 1) ws = cv.op("expand_dims", {C::arg("x", ws), C::arg_ints32("axes", axes)});
  Var* s = binary(cv, "real_div", binary(cv, "mul", cv.cast(cv.in(n, 1), DataType::Float32), ws), cv.cast(cv.in(n, 6), DataType::Float32));
  cv.out(n, 0, requantize(cv, n, binary(cv, "mul", acc, s), 7));
}

void dynamic_quantize_linear(C& cv, const NodeProto& n) {
  Var* x = cv.cast(cv.in(n, 0), DataType::Float32);
  int r = cv.rank(n, x);
  std::vector<int64_t> all(static_cast<size_t>(r));
  std::iota(all.begin(), all.end(), 0);
  DataType f32 = DataType::Float32;
  Var* mx = binary(cv, "maximum", cv.op("reduce_max", {C::arg("x", x), C::arg_ints32("axes", all), C::arg_bool("keep_dims", false)}), cv.cs(0, f32));
  Var* mn = binary(cv, "minimum", cv.op("reduce_min", {C::arg("x", x), C::arg_ints32("axes", all), C::arg_bool("keep_dims", false)}), cv.cs(0, f32));
  Var* range = binary(cv, "sub", mx, mn);
  Var* scale = binary(cv, "real_div", cv.em.sel(binary(cv, "equal", range, cv.cs(0, f32)), cv.cs(1, f32), range), cv.cs(255, f32));
  Var* zp = cv.op("round", {C::arg("x", cv.op("clip", {C::arg("x", binary(cv, "sub", cv.cs(0, f32), binary(cv, "real_div", mn, scale))),
                                                     C::arg_f32("alpha", 0), C::arg_f32("beta", 255)}))});
  Var* y = binary(cv, "add", cv.op("round", {C::arg("x", binary(cv, "real_div", x, scale))}), zp);
  y = cv.op("clip", {C::arg("x", y), C::arg_f32("alpha", 0), C::arg_f32("beta", 255)});
  cv.out(n, 0, cv.cast(y, DataType::Int32));
  cv.out(n, 1, scale);
  cv.out(n, 2, cv.cast(zp, DataType::Int32));
}

}  // namespace

void register_more(OpTable& t) {
  t.on("DeformConv", 1, deform_conv);
  t.on("RoiAlign", 1, roi_align);
  t.on("MelWeightMatrix", 1, mel_weight_matrix);
  t.on("TfIdfVectorizer", 1, tfidf);
  t.on("Unique", 1, unique);
  t.on("Optional", 1, optional);
  t.on("OptionalHasElement", 1, optional_has_element);
  t.on("OptionalGetElement", 1, optional_get_element);
  t.on("NonMaxSuppression", 1, nms);
  t.on("BitCast", 1, bit_cast);
  t.on("GridSample", 1, grid_sample);
  t.on("CumProd", 1, cum_prod);
  t.on("BitwiseAnd", 1, bitwise_and);
  t.on("BitwiseOr", 1, bitwise_or);
  t.on("BitwiseXor", 1, bitwise_xor);
  t.on("BitwiseNot", 1, bitwise_not);
  t.on("Compress", 1, compress);
  t.on("ReverseSequence", 1, reverse_sequence);
  t.on("MaxUnpool", 1, max_unpool);
  t.on("Col2Im", 1, col2im);
  t.on("Det", 1, det);
  t.on("TensorScatter", 1, tensor_scatter);
  t.on("DFT", 1, dft);
  t.on("STFT", 1, stft);
  t.on("MatMulInteger", 1, mat_mul_integer);
  t.on("ConvInteger", 1, conv_integer);
  t.on("QLinearMatMul", 1, q_linear_mat_mul);
  t.on("QLinearConv", 1, q_linear_conv);
  t.on("DynamicQuantizeLinear", 1, dynamic_quantize_linear);
}

}  // namespace onnx_detail
}  // namespace milkit
