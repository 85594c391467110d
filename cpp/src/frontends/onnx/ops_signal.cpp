// ONNX operators: signal processing (DFT, STFT, window functions, MelWeightMatrix).
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "milkit/compose/norms.h"
#include "milkit/compose/sampling.h"
#include "milkit/compose/scan.h"
#include "milkit/compose/windows.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

void window(OpTable& t, const char* name, double a0, double a1, double a2) {
  t.on(name, 1, [a0, a1, a2](C& cv, const NodeProto& n) {
    int64_t size = cv.ints(n, 0, "size").at(0);
    bool periodic = C::attr_int(n, "periodic", 1) != 0;
    auto dt = mil_dtype(static_cast<int>(C::attr_int(n, "output_datatype", 1)));
    if (!dt) cv.fail(n, "output_datatype is not supported");
    double N = periodic ? static_cast<double>(size) : static_cast<double>(size - 1);
    std::vector<double> v(static_cast<size_t>(std::max<int64_t>(size, 0)));
    for (int64_t i = 0; i < size; ++i) {
      double x = 2 * M_PI * static_cast<double>(i) / N;
      v[static_cast<size_t>(i)] = a0 - a1 * std::cos(x) + a2 * std::cos(2 * x);
    }
    cv.out_const(n, 0, Value::from_doubles(*dt, {size}, v));
  });
}

// ---- DFT / STFT ------------------------------------------------------------------------------

// y = x @ M (M a constant [k, m] of dtype dt).
Var* matconst(C& cv, Var* x, int64_t k, int64_t m, const std::vector<double>& v, DataType dt) {
  return cv.op("matmul", {C::arg("x", x), C::arg("y", cv.c(Value::from_doubles(dt, {k, m}, v)))});
}

// The DFT of (re, im) (im may be null) along the last axis of length `len`: n points (the
// input zero-padded or cut to n), `out` bins; inverse scales by 1/n; `real_out` (an inverse of a
// one-sided spectrum) returns only the real signal of length n from the `len` given bins.
std::pair<Var*, Var*> dft_last(C& cv, Var* re, Var* im, int64_t len, int64_t npts, int64_t out,
                               bool inverse, bool real_out, DataType dt) {
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

// DFT along axis `ax` (before normalization).
void dft(C& cv, const NodeProto& n, int64_t ax) {
  Var* x = cv.in(n, 0);
  auto xs = C::static_shape(x);
  if (!xs || xs->size() < 2) cv.fail(n, "needs the input's shape to be known");
  int r = static_cast<int>(xs->size());
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
    Var* s = cv.op("squeeze", {C::arg("x", cv.em.slice_axis(x, r - 1, c, c + 1)),
                               C::arg_ints32("axes", {r - 1})});
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
  for (size_t i = 0; i < perm.size(); ++i)
    inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  auto back = [&](Var* v) {
    v = cv.op("transpose", {C::arg("x", v), C::arg_ints32("perm", inv)});
    return cv.op("expand_dims", {C::arg("x", v), C::arg_ints32("axes", {-1})});
  };
  if (!yi) {
    cv.out(n, 0, back(yr));
    return;
  }
  cv.out(n, 0,
         cv.op("concat",
               {Arg{"values", {ArgItem{back(yr), nullptr}, ArgItem{back(yi), nullptr}}, true},
                C::arg_i32("axis", -1)}));
}

void stft(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  auto xs = C::static_shape(x);
  if (!xs || xs->size() != 3) cv.fail(n, "needs a [batch, length, 1 or 2] signal of known shape");
  int64_t step = cv.ints(n, 1, "frame_step").at(0);
  Var* window = C::has(n, 2) ? cv.in(n, 2) : nullptr;
  int64_t flen = 0;
  if (C::has(n, 3))
    flen = cv.ints(n, 3, "frame_length").at(0);
  else if (window) {
    auto ws = C::static_shape(window);
    if (!ws) cv.fail(n, "the window's length must be known");
    flen = ws->at(0);
  } else
    cv.fail(n, "needs a window or a frame_length");
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
    Var* s = cv.op("reshape",
                   {C::arg("x", cv.em.slice_axis(x, 2, c, c + 1)), C::arg_ints32("shape", {B, L})});
    Var* f = cv.op("gather", {C::arg("x", s), C::arg("indices", ids),
                              C::arg_i32("axis", 1)});  // [B, frames, flen]
    return window ? binary(cv, "mul", f, cv.cast(window, dt)) : f;
  };
  Var* re = framed(0);
  Var* im = comp == 2 ? framed(1) : nullptr;
  int64_t out = onesided ? flen / 2 + 1 : flen;
  auto [yr, yi] = dft_last(cv, re, im, flen, flen, out, false, false, dt);
  Var* a = cv.op("expand_dims", {C::arg("x", yr), C::arg_ints32("axes", {-1})});
  Var* b = cv.op("expand_dims", {C::arg("x", yi), C::arg_ints32("axes", {-1})});
  cv.out(n, 0,
         cv.op("concat", {Arg{"values", {ArgItem{a, nullptr}, ArgItem{b, nullptr}}, true},
                          C::arg_i32("axis", -1)}));
}

void mel_weight_matrix(C& cv, const NodeProto& n) {
  // a constant: triangular filters between mel-spaced bins (ONNX's reference arithmetic: the mel
  // edges in fp32, the bins in double)
  int64_t mels = cv.ints(n, 0, "num_mel_bins").at(0), dft = cv.ints(n, 1, "dft_length").at(0);
  int64_t rate = cv.ints(n, 2, "sample_rate").at(0);
  float lo = static_cast<float>(cv.doubles(n, 3, "lower_edge_hertz").at(0)),
        hi = static_cast<float>(cv.doubles(n, 4, "upper_edge_hertz").at(0));
  if (mels <= 0 || dft <= 0 || rate <= 0)
    cv.fail(n, "num_mel_bins, dft_length and sample_rate must be positive");
  auto mel = [](float hz) {
    return static_cast<float>(2595.0f * std::log1p(hz / 700.0f) /
                              static_cast<float>(std::log(10.0)));
  };
  float lm = mel(lo), hm = mel(hi);
  float step = (hm - lm) / static_cast<float>(mels + 2);
  std::vector<int64_t> bins(static_cast<size_t>(mels + 2));
  for (int64_t i = 0; i < mels + 2; ++i) {
    double f = static_cast<double>(i) * static_cast<double>(step) + static_cast<double>(lm);
    f = 700.0 * std::expm1(f / 2595.0 * std::log(10.0));
    bins[static_cast<size_t>(i)] = static_cast<int64_t>(
        std::floor(static_cast<double>(dft + 1) * f / static_cast<double>(rate)));
  }
  int64_t nb = dft / 2 + 1;
  std::vector<double> w(static_cast<size_t>(nb * mels), 0.0);
  auto at = [&](int64_t j, int64_t i) -> double& {
    if (j < 0 || j >= nb) cv.fail(n, "a mel bin falls outside the spectrogram bins");
    return w[static_cast<size_t>(j * mels + i)];
  };
  for (int64_t i = 0; i < mels; ++i) {
    int64_t l = bins[static_cast<size_t>(i)], c = bins[static_cast<size_t>(i + 1)],
            h = bins[static_cast<size_t>(i + 2)];
    if (c == l)
      at(c, i) = 1;
    else
      for (int64_t j = l; j <= c; ++j)
        at(j, i) = static_cast<double>(j - l) / static_cast<double>(c - l);
    if (h > c)
      for (int64_t j = c; j < h; ++j)
        at(j, i) = static_cast<double>(h - j) / static_cast<double>(h - c);
  }
  auto dt =
      mil_dtype(static_cast<int>(C::attr_int(n, "output_datatype", onnx::TensorProto::FLOAT)));
  if (!dt) cv.fail(n, "output_datatype is not supported");
  cv.out_const(n, 0, Value::from_doubles(*dt, {nb, mels}, w));
}

}  // namespace

void register_signal(OpTable& t) {
  window(t, "HannWindow", 0.5, 0.5, 0.0);
  window(t, "HammingWindow", 25.0 / 46.0, 21.0 / 46.0, 0.0);
  window(t, "BlackmanWindow", 0.42, 0.5, 0.08);
  t.on("MelWeightMatrix", 1, mel_weight_matrix);
  // the axis is an attribute (default 1) before opset 20, an optional input (default -2) from it
  t.on("DFT", 17, [](C& cv, const NodeProto& n) { dft(cv, n, C::attr_int(n, "axis", 1)); });
  t.on("DFT", 20, [](C& cv, const NodeProto& n) {
    dft(cv, n, C::has(n, 2) ? cv.ints(n, 2, "axis").at(0) : -2);
  });
  t.on("STFT", 1, stft);
}

}  // namespace onnx_detail
}  // namespace milkit
