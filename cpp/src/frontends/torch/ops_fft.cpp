// ATen FFTs (_fft_r2c / _fft_c2r / _fft_c2c of core ATen, the torch.fft functions and stft of the
// TRAINING dialect, istft) as DFT products on the (real, imaginary) pairs of complex tensors (see
// ops_complex.cpp): along each transformed axis, moved last, the parts are multiplied by
// constant cos / sin matrices. Transform lengths must be known at conversion time (other dims may
// be symbolic); a signal shorter or longer than the transform length (torch's n / s arguments) is
// zero-padded or truncated by the matrix rows.
//
// Not through MIL's complex dialect (complex_fft, ...): common::lower_complex_dialect_ops writes
// coremltools' lowering op for op, which computes the DFT angles in fp32 inside the program
// (relative errors near 1e-3 at 2048 points), needs every dim known, and gives real bins a -0
// imaginary part (torch.angle then reads -pi for pi). Here the matrices are computed in double,
// with exact zeros, and rounded once.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

enum class Kind { C2C, R2C, C2R };  // R2C: the onesided half; C2R: from the onesided half

// argument `name` as a pair; a real tensor of an integer dtype computes in fp32
Cx in_cx(C& cv, const json& n, const char* name) {
  Cx x = complex_arg(cv, n, name);
  if (!x.im && !is_float(C::dtype(x.re))) x.re = cv.cast(x.re, DataType::Float32);
  return x;
}

// the scale of torch's normalization code (0: none, 1: 1/sqrt(n), 2: 1/n) for length n
double norm_scale(int64_t code, int64_t len) {
  if (code == 1) return 1.0 / std::sqrt(static_cast<double>(len));
  if (code == 2) return 1.0 / static_cast<double>(len);
  return 1.0;
}

// x with axes `ax` and the last swapped (its own inverse)
Var* swap_last(C& cv, Var* x, int64_t ax, int64_t rank) {
  if (ax == rank - 1) return x;
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[static_cast<size_t>(ax)], perm.back());
  return cv.op("transpose", {C::a("x", x), C::aints32("perm", perm)});
}

Var* const_matrix(C& cv, DataType dt, int64_t rows, int64_t cols, const std::vector<double>& v) {
  return cv.c(Value::from_doubles(dt, {rows, cols}, v));
}

Var* add_opt(C& cv, Var* a, Var* b) { return a ? (b ? bin(cv, "add", a, b) : a) : b; }

// One DFT along axis `ax` of length `len` (the signal's for C2C / R2C, the output's for C2R),
// scaled by `scale`. The input holds `rows` entries along the axis (signal or half spectrum);
// rows past the transform's are dropped and missing ones count as zeros.
Cx dft_axis(C& cv, const json& n, Cx x, int64_t ax, int64_t len, bool forward, double scale,
            Kind kind) {
  const int64_t rank = cv.rank(n, x.re);
  ax = cv.axis(n, ax, rank);
  const int64_t rows =
      known_dim(cv, n, x.re, ax, ("the FFT input length along dim " + std::to_string(ax)).c_str());
  if (len < 1) cv.fail(n, "FFT length " + std::to_string(len) + " along dim " + std::to_string(ax));
  const int64_t cols = kind == Kind::R2C ? len / 2 + 1 : len;
  const int64_t used = std::min(rows, kind == Kind::C2R ? len / 2 + 1 : len);
  std::vector<double> cm(static_cast<size_t>(rows * cols), 0.0), sm(cm.size(), 0.0);
  const double sign = forward ? 1.0 : -1.0;  // sm multiplies im (+), re (-)
  for (int64_t j = 0; j < used; ++j) {
    double w = scale;
    if (kind == Kind::C2R && j != 0 && !(len % 2 == 0 && j == len / 2)) w *= 2;
    for (int64_t k = 0; k < cols; ++k) {
      const int64_t m = (j * k) % len;  // the angle 2 pi m / len, with exact zeros
      const double th = 2 * M_PI * static_cast<double>(m) / static_cast<double>(len);
      const bool zero_sin = m == 0 || 2 * m == len, zero_cos = 4 * m == len || 4 * m == 3 * len;
      cm[static_cast<size_t>(j * cols + k)] = zero_cos ? 0.0 : w * std::cos(th);
      sm[static_cast<size_t>(j * cols + k)] = zero_sin ? 0.0 : sign * w * std::sin(th);
    }
  }
  const DataType dt = C::dtype(x.re);
  Var* cmat = const_matrix(cv, dt, rows, cols, cm);
  Var* smat = const_matrix(cv, dt, rows, cols, sm);
  Var* xr = swap_last(cv, x.re, ax, rank);
  Var* xi = x.im ? swap_last(cv, cv.cast(x.im, dt), ax, rank) : nullptr;
  // forward: (xr + i xi)(c - i s) = (xr c + xi s) + i (xi c - xr s); inverse: s -> -s.
  // C2R: the real part of that, each bin but DC / Nyquist counted twice (irfft inverse, hfft
  // forward).
  Var* yr = add_opt(cv, matmul(cv, xr, cmat), xi ? matmul(cv, xi, smat) : nullptr);
  if (kind == Kind::C2R) return {swap_last(cv, yr, ax, rank), nullptr};
  // (subtracting keeps zero imaginary parts +0, as torch's, for angle's sake)
  Var* yi = bin(cv, "sub", xi ? matmul(cv, xi, cmat) : cv.cs(0, dt), matmul(cv, xr, smat));
  return {swap_last(cv, yr, ax, rank), swap_last(cv, yi, ax, rank)};
}

int64_t axis_len(C& cv, const json& n, Var* x, int64_t ax) {
  ax = cv.axis(n, ax, cv.rank(n, x));
  return known_dim(cv, n, x, ax, ("the FFT length along dim " + std::to_string(ax)).c_str());
}

// A transform over `dims` with lengths `lens` (-1: the input's; for C2R the last one is the
// output length): C2C over every dim but the last, which is `last` (R2C first, C2R last).
Cx fftn(C& cv, const json& n, Cx x, std::vector<int64_t> dims, std::vector<int64_t> lens, Kind last,
        bool forward, int64_t norm) {
  const int64_t rank = cv.rank(n, x.re);
  for (auto& d : dims) d = cv.axis(n, d, rank);
  for (size_t i = 0; i < dims.size(); ++i)
    if (lens[i] < 0) lens[i] = axis_len(cv, n, x.re, dims[i]);
  auto step = [&](size_t i, Kind k) {
    x = dft_axis(cv, n, x, dims[i], lens[i], forward, norm_scale(norm, lens[i]), k);
  };
  if (dims.empty()) return x;
  if (last == Kind::R2C) step(dims.size() - 1, Kind::R2C);
  for (size_t i = 0; i + 1 < dims.size(); ++i) step(i, Kind::C2C);
  if (last != Kind::R2C) step(dims.size() - 1, last);
  return x;
}

// ---- core ATen ---------------------------------------------------------------------------------

void fft_r2c(C& cv, const json& n) {
  Cx x = in_cx(cv, n, "self");
  auto dims = cv.ints(n, "dim");
  Kind k = cv.bo(n, "onesided", true) ? Kind::R2C : Kind::C2C;
  out_complex(cv, n,
              fftn(cv, n, x, dims, std::vector<int64_t>(dims.size(), -1), k, true,
                   cv.i(n, "normalization", 0)));
}

void fft_c2r(C& cv, const json& n) {
  Cx x = in_cx(cv, n, "self");
  auto dims = cv.ints(n, "dim");
  std::vector<int64_t> lens(dims.size(), -1);
  if (!lens.empty()) lens.back() = cv.i(n, "last_dim_size", 0);
  out_complex(cv, n, fftn(cv, n, x, dims, lens, Kind::C2R, false, cv.i(n, "normalization", 0)));
}

void fft_c2c(C& cv, const json& n) {
  Cx x = in_cx(cv, n, "self");
  auto dims = cv.ints(n, "dim");
  out_complex(cv, n,
              fftn(cv, n, x, dims, std::vector<int64_t>(dims.size(), -1), Kind::C2C,
                   cv.bo(n, "forward", true), cv.i(n, "normalization", 0)));
}

// ---- torch.fft functions (TRAINING dialect) --------------------------------------------------

struct FftSpec {
  Kind kind;
  bool forward;
  int rank;  // 1: n / dim; 2: s / dim = [-2, -1]; 0: s / dim of any length
};

const std::unordered_map<std::string, FftSpec>& fft_specs() {
  static const std::unordered_map<std::string, FftSpec> m = {
      {"fft_fft", {Kind::C2C, true, 1}},
      {"fft_ifft", {Kind::C2C, false, 1}},
      {"fft_rfft", {Kind::R2C, true, 1}},
      {"fft_irfft", {Kind::C2R, false, 1}},
      {"fft_fft2", {Kind::C2C, true, 2}},
      {"fft_ifft2", {Kind::C2C, false, 2}},
      {"fft_rfft2", {Kind::R2C, true, 2}},
      {"fft_irfft2", {Kind::C2R, false, 2}},
      {"fft_fftn", {Kind::C2C, true, 0}},
      {"fft_ifftn", {Kind::C2C, false, 0}},
      {"fft_rfftn", {Kind::R2C, true, 0}},
      {"fft_irfftn", {Kind::C2R, false, 0}},
      // hfft(x) = irfft(conj(x)) with forward scaling: the real part of the forward transform;
      // ihfft(x) = conj(rfft(x)) with inverse scaling: the onesided inverse transform
      {"fft_hfft", {Kind::C2R, true, 1}},
      {"fft_ihfft", {Kind::R2C, false, 1}},
      {"fft_hfft2", {Kind::C2R, true, 2}},
      {"fft_ihfft2", {Kind::R2C, false, 2}},
      {"fft_hfftn", {Kind::C2R, true, 0}},
      {"fft_ihfftn", {Kind::R2C, false, 0}}};
  return m;
}

// "torch.ops.aten.fft_rfft.default" -> "fft_rfft"
std::string fft_name(const json& n) {
  std::string t = n.value("target", std::string());
  auto p = t.find("aten.");
  if (p == std::string::npos) return "";
  t = t.substr(p + 5);
  return t.substr(0, t.find('.'));
}

void torch_fft(C& cv, const json& n) {
  const FftSpec& sp = fft_specs().at(fft_name(n));
  Cx x = in_cx(cv, n, "self");
  const int64_t rank = cv.rank(n, x.re);
  std::vector<int64_t> dims, lens;
  if (sp.rank == 1) {
    dims = {cv.i(n, "dim", -1)};
    lens = {cv.opt_i(n, "n").value_or(-1)};
  } else {
    lens = cv.ints(n, "s", {});
    if (C::has(n, "dim")) {
      dims = cv.ints(n, "dim");
    } else if (sp.rank == 2) {
      dims = {-2, -1};
    } else {
      const int64_t k = lens.empty() ? rank : static_cast<int64_t>(lens.size());
      for (int64_t d = rank - k; d < rank; ++d) dims.push_back(d);
    }
    if (lens.empty()) lens.assign(dims.size(), -1);
    if (lens.size() != dims.size()) cv.fail(n, "FFT sizes 's' and 'dim' differ in length");
  }
  if (sp.kind == Kind::C2R && lens.back() < 0)
    lens.back() = 2 * (axis_len(cv, n, x.re, dims.back()) - 1);
  std::string norm = cv.s(n, "norm", "backward");
  int64_t code = norm == "ortho" ? 1 : (norm == "forward") == sp.forward ? 2 : 0;
  if (norm != "ortho" && norm != "forward" && norm != "backward")
    cv.fail(n, "FFT norm '" + norm + "'");
  out_complex(cv, n, fftn(cv, n, x, dims, lens, sp.kind, sp.forward, code));
}

// stft's window as n_fft values: the given one (or ones) centered in zeros when shorter
Var* padded_window(C& cv, const json& n, int64_t nfft, int64_t win, DataType dt) {
  const int64_t left = (nfft - win) / 2;
  if (Var* w = cv.opt_tensor(n, "window")) {
    w = cv.cast(w, dt);
    return win < nfft ? pad(cv, n, w, {left, nfft - win - left}, "constant", 0) : w;
  }
  std::vector<double> box(static_cast<size_t>(nfft), 0.0);
  for (int64_t j = left; j < left + win; ++j) box[static_cast<size_t>(j)] = 1;
  return cv.c(Value::from_doubles(dt, {nfft}, box));
}

// stft(x, n_fft, hop_length, win_length, window, normalized, onesided, return_complex) of a
// signal of known length (centering pads come before it in the program): frames gathered by a
// constant index matrix, windowed, and transformed along their last axis.
void stft(C& cv, const json& n) {
  Var* x = self(cv, n);
  if (!is_float(C::dtype(x))) x = cv.cast(x, DataType::Float32);
  const int64_t rank = cv.rank(n, x);
  const int64_t len = known_dim(cv, n, x, rank - 1, "the stft signal length");
  const int64_t nfft = cv.i(n, "n_fft", 0);
  const int64_t hop = cv.opt_i(n, "hop_length").value_or(nfft / 4);
  const int64_t win = cv.opt_i(n, "win_length").value_or(nfft);
  if (nfft < 1 || nfft > len || hop < 1 || win > nfft)
    cv.fail(n, "stft sizes do not fit the signal");
  const int64_t frames = 1 + (len - nfft) / hop;
  std::vector<int64_t> idx;
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t j = 0; j < nfft; ++j) idx.push_back(f * hop + j);
  Var* fr =
      cv.op("gather",
            {C::a("x", x), C::a("indices", Value::from_ints(DataType::Int32, {frames, nfft}, idx)),
             C::ai32("axis", -1)});
  if (C::has(n, "window") || win < nfft)
    fr = bin(cv, "mul", fr, padded_window(cv, n, nfft, win, C::dtype(x)));
  Kind k = cv.bo(n, "onesided", true) ? Kind::R2C : Kind::C2C;
  Cx y = dft_axis(cv, n, {fr, nullptr}, rank, nfft, true,
                  cv.bo(n, "normalized", false) ? norm_scale(1, nfft) : 1, k);
  y = {swap_last(cv, y.re, rank - 1, rank + 1),
       swap_last(cv, y.im, rank - 1, rank + 1)};  // (..., bins, frames)
  if (cv.bo(n, "return_complex", true)) return out_complex(cv, n, y);
  cv.out(n, cv.op("stack", {values_arg({y.re, y.im}), C::ai32("axis", -1)}));
}

// frames (..., F, n_fft) overlap-added at multiples of hop into (..., T)
Var* overlap_add(C& cv, Var* frames, int64_t count, int64_t nfft, int64_t hop) {
  const int64_t total = nfft + hop * (count - 1);
  const int64_t rank = static_cast<int64_t>(C::shape(frames).size());
  std::vector<int64_t> idx;
  for (int64_t f = 0; f < count; ++f)
    for (int64_t j = 0; j < nfft; ++j) idx.push_back(f * hop + j);
  std::vector<Piece> flat_shape, out_shape;
  for (int64_t d = 0; d + 2 < rank; ++d) flat_shape.push_back({true, d});
  out_shape = flat_shape;
  flat_shape.push_back({false, count * nfft});
  out_shape.push_back({false, total});
  Var* upd = reshape(cv, frames, build_shape(cv, frames, flat_shape));
  Var* zeros = fill(cv, build_shape(cv, frames, out_shape), 0, C::dtype(frames));
  return cv.op("scatter", {C::a("data", zeros), C::a("indices", cv.ci(idx)), C::a("updates", upd),
                           C::ai32("axis", rank - 2), C::astr("mode", "add")});
}

// istft(x, n_fft, hop_length, win_length, window, center, normalized, onesided, length,
// return_complex) of a onesided spectrum (..., n_fft / 2 + 1, F) with a real result: frames by
// irfft, windowed, overlap-added and divided by the overlap-added squared window.
void istft(C& cv, const json& n) {
  Cx x = in_cx(cv, n, "self");
  const int64_t rank = cv.rank(n, x.re);
  if (cv.bo(n, "return_complex", false) || !cv.bo(n, "onesided", true))
    cv.fail(n, "istft with a complex (twosided) result is not supported");
  const int64_t nfft = cv.i(n, "n_fft", 0);
  const int64_t hop = cv.opt_i(n, "hop_length").value_or(nfft / 4);
  const int64_t win = cv.opt_i(n, "win_length").value_or(nfft);
  const int64_t count = known_dim(cv, n, x.re, rank - 1, "the istft frame count");
  if (nfft < 1 || hop < 1 || win > nfft) cv.fail(n, "istft sizes do not fit");
  x = {swap_last(cv, x.re, rank - 2, rank), x.im ? swap_last(cv, x.im, rank - 2, rank) : nullptr};
  const double norm = cv.bo(n, "normalized", false) ? std::sqrt(static_cast<double>(nfft)) : 1.0;
  Var* fr =
      dft_axis(cv, n, x, rank - 1, nfft, false, norm / static_cast<double>(nfft), Kind::C2R).re;
  Var* w = padded_window(cv, n, nfft, win, C::dtype(fr));
  Var* y = overlap_add(cv, bin(cv, "mul", fr, w), count, nfft, hop);
  Var* w2 = cv.op("expand_dims", {C::a("x", bin(cv, "mul", w, w)), C::aints32("axes", {0})});
  Var* env = overlap_add(cv, cv.op("tile", {C::a("x", w2), C::aints32("reps", {count, 1})}), count,
                         nfft, hop);
  const int64_t total = nfft + hop * (count - 1);
  const int64_t start = cv.bo(n, "center", true) ? nfft / 2 : 0;
  const auto length = cv.opt_i(n, "length");
  const int64_t end = length ? start + *length : total - start;
  if (end > total) {
    y = pad(cv, n, y, {0, end - total}, "constant", 0);
    env = pad(cv, n, env, {0, end - total}, "constant", 1);
  }
  y = slice_axis(cv, n, y, static_cast<int64_t>(C::shape(y).size()) - 1, SliceSpec{start, end, 1});
  env = slice_axis(cv, n, env, 0, SliceSpec{start, end, 1});
  cv.out(n, bin(cv, "real_div", y, env));
}

using Fn = void (*)(C&, const json&);

const std::unordered_map<std::string, Fn>& fft_ops() {
  static const std::unordered_map<std::string, Fn> m = [] {
    std::unordered_map<std::string, Fn> r = {{"_fft_r2c", fft_r2c},
                                             {"_fft_c2r", fft_c2r},
                                             {"_fft_c2c", fft_c2c},
                                             {"stft", stft},
                                             {"istft", istft}};
    for (const auto& kv : fft_specs()) r[kv.first] = torch_fft;
    return r;
  }();
  return m;
}

}  // namespace

bool convert_fft(C& cv, const json& n) {
  auto it = fft_ops().find(fft_name(n));
  if (it == fft_ops().end()) return false;
  it->second(cv, n);
  return true;
}

void register_fft(OpTable& t) {
  for (const auto& kv : fft_ops()) t.on("aten." + kv.first, kv.second);
}

}  // namespace torch_detail
}  // namespace milkit
