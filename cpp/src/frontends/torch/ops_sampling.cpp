// ATen resampling: grid_sampler, upsampling (nearest, linear, cubic, antialiased), im2col / col2im, max_unpool.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "milkit/types/error.h"
#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

// ---- grid sampling ---------------------------------------------------------------------------
// torch's reflect_coordinates: `c` reflected into [twice_low / 2, twice_high / 2]
Var* reflect_coords(C& cv, Var* c, double twice_low, double twice_high) {
  DataType dt = C::dtype(c);
  if (twice_low == twice_high) return bin(cv, "mul", c, cv.cs(0, dt));
  double mn = twice_low / 2, span = (twice_high - twice_low) / 2;
  Var* in = cv.op("abs", {C::a("x", bin(cv, "sub", c, cv.cs(mn, dt)))});
  Var* flips = cv.op("floor", {C::a("x", bin(cv, "real_div", in, cv.cs(span, dt)))});
  Var* extra = bin(cv, "sub", in, bin(cv, "mul", flips, cv.cs(span, dt)));
  Var* half = cv.op("floor", {C::a("x", bin(cv, "mul", flips, cv.cs(0.5, dt)))});
  Var* even = bin(cv, "equal", bin(cv, "sub", flips, bin(cv, "mul", half, cv.cs(2, dt))), cv.cs(0, dt));
  return cv.op("select", {C::a("cond", even), C::a("a", bin(cv, "add", extra, cv.cs(mn, dt))),
                          C::a("b", bin(cv, "add", bin(cv, "sub", cv.cs(span, dt), extra), cv.cs(mn, dt)))});
}

// grid sampling as torch computes it (GridSampler.h), for what resample does not do (bicubic,
// 3-D): per spatial axis the unnormalized coordinate, its taps and weights (nearest: 1 tap at
// the coordinate rounded half to even; linear: 2; bicubic: 4 around its floor with Keys' weights,
// A = -0.75); the padding mode applies to the coordinate (nearest, linear) or to each tap
// (bicubic): border clamps, reflection reflects then clamps; taps outside the input weigh 0. Every
// combination of taps is gathered from x as [N * prod(spatial), C]. Known shapes only.
Var* grid_gather(C& cv, const json& n, Var* x, Var* grid, int64_t mode, int64_t pad, bool align) {
  auto xs = C::static_shape(x);
  auto gsz = C::static_shape(grid);
  if (!xs || !gsz) cv.fail(n, std::string(mode == 2 ? "bicubic" : "3-D") + " grid sampling needs the shapes of the input and the grid to be known");
  size_t sp = xs->size() - 2;
  int gr = static_cast<int>(sp) + 2;
  int64_t N = (*xs)[0], Cc = (*xs)[1], P = 1;
  for (size_t a = 0; a < sp; ++a) P *= (*xs)[2 + a];
  DataType dt = DataType::Float32;
  grid = cv.cast(grid, dt);
  Var* flat = cv.op("transpose", {C::a("x", cv.op("reshape", {C::a("x", cv.cast(x, dt)), C::aints32("shape", {N, Cc, P})})),
                                  C::aints32("perm", {0, 2, 1})});
  flat = cv.op("reshape", {C::a("x", flat), C::aints32("shape", {N * P, Cc})});
  std::vector<double> base(static_cast<size_t>(N));
  for (int64_t b = 0; b < N; ++b) base[static_cast<size_t>(b)] = static_cast<double>(b * P);
  std::vector<int64_t> bshape(static_cast<size_t>(gr - 1), 1);
  bshape[0] = N;
  Var* pos0 = cv.c(Value::from_doubles(dt, bshape, base));
  const double A = -0.75;
  int taps = mode == 1 ? 1 : mode == 0 ? 2 : 4;
  std::vector<std::vector<Var*>> pos(sp), wt(sp);  // per spatial axis: flat offsets, weights
  int64_t stride = 1;
  for (int64_t a = static_cast<int64_t>(sp) - 1; a >= 0; --a) {
    size_t u = static_cast<size_t>(a);
    double D = static_cast<double>((*xs)[2 + u]);
    // the grid's last axis holds (x, y[, z]): the last spatial axis first
    int64_t comp = static_cast<int64_t>(sp) - 1 - a;
    std::vector<int64_t> b(static_cast<size_t>(gr), 0), e(static_cast<size_t>(gr), 0), m(static_cast<size_t>(gr), 1), sq(static_cast<size_t>(gr), 0);
    b.back() = comp;
    e.back() = comp + 1;
    m.back() = 0;
    sq.back() = 1;
    Var* g = cv.op("slice_by_index", {C::a("x", grid), C::aints32("begin", b), C::aints32("end", e),
                                      C::a("begin_mask", Value::from_ints(DataType::Bool, {gr}, m)),
                                      C::a("end_mask", Value::from_ints(DataType::Bool, {gr}, m)),
                                      C::a("squeeze_mask", Value::from_ints(DataType::Bool, {gr}, sq))});
    Var* c = align ? bin(cv, "mul", bin(cv, "add", g, cv.cs(1, dt)), cv.cs((D - 1) / 2, dt))
                   : bin(cv, "mul", bin(cv, "sub", bin(cv, "mul", bin(cv, "add", g, cv.cs(1, dt)), cv.cs(D, dt)), cv.cs(1, dt)), cv.cs(0.5, dt));
    auto clip = [&](Var* v) { return cv.op("clip", {C::a("x", v), C::af32("alpha", 0), C::af32("beta", D - 1)}); };
    auto padded = [&](Var* v) {
      if (pad == 1) return clip(v);
      if (pad == 2) return clip(align ? reflect_coords(cv, v, 0, 2 * (D - 1)) : reflect_coords(cv, v, -1, 2 * D - 1));
      return v;
    };
    if (mode != 2) c = padded(c);
    Var* f;
    Var* t = nullptr;
    if (mode == 1) {
      // round half to even (torch's nearbyint): floor, plus one above the half or at an odd half
      Var* fl = cv.op("floor", {C::a("x", c)});
      Var* d = bin(cv, "sub", c, fl);
      Var* odd = bin(cv, "not_equal", bin(cv, "sub", fl, bin(cv, "mul", cv.op("floor", {C::a("x", bin(cv, "mul", fl, cv.cs(0.5, dt)))}), cv.cs(2, dt))),
                     cv.cs(0, dt));
      Var* up = cv.op("logical_or", {C::a("x", bin(cv, "greater", d, cv.cs(0.5, dt))),
                                     C::a("y", cv.op("logical_and", {C::a("x", bin(cv, "equal", d, cv.cs(0.5, dt))), C::a("y", odd)}))});
      f = bin(cv, "add", fl, cv.cast(up, dt));
    } else {
      f = cv.op("floor", {C::a("x", c)});
      t = bin(cv, "sub", c, f);
    }
    for (int j = 0; j < taps; ++j) {
      double off = mode == 2 ? j - 1 : j;
      Var* q = bin(cv, "add", f, cv.cs(off, dt));
      Var* w;
      if (mode == 1) {
        w = bin(cv, "add", bin(cv, "mul", q, cv.cs(0, dt)), cv.cs(1, dt));
      } else if (mode == 0) {
        w = j == 0 ? bin(cv, "sub", cv.cs(1, dt), t) : t;
      } else {
        Var* d = cv.op("abs", {C::a("x", bin(cv, "sub", t, cv.cs(off, dt)))});
        Var* d2 = bin(cv, "mul", d, d);
        Var* d3 = bin(cv, "mul", d2, d);
        Var* near = bin(cv, "add", bin(cv, "sub", bin(cv, "mul", d3, cv.cs(A + 2, dt)), bin(cv, "mul", d2, cv.cs(A + 3, dt))), cv.cs(1, dt));
        Var* far = bin(cv, "sub", bin(cv, "add", bin(cv, "sub", bin(cv, "mul", d3, cv.cs(A, dt)), bin(cv, "mul", d2, cv.cs(5 * A, dt))),
                                      bin(cv, "mul", d, cv.cs(8 * A, dt))),
                       cv.cs(4 * A, dt));
        w = cv.op("select", {C::a("cond", bin(cv, "less_equal", d, cv.cs(1, dt))), C::a("a", near), C::a("b", far)});
        q = padded(q);
      }
      Var* ok = cv.op("logical_and", {C::a("x", bin(cv, "greater_equal", q, cv.cs(0, dt))), C::a("y", bin(cv, "less_equal", q, cv.cs(D - 1, dt)))});
      w = cv.op("select", {C::a("cond", ok), C::a("a", w), C::a("b", cv.cs(0, dt))});
      pos[u].push_back(bin(cv, "mul", clip(q), cv.cs(static_cast<double>(stride), dt)));
      wt[u].push_back(w);
    }
    stride *= (*xs)[2 + u];
  }
  Var* y = nullptr;
  int64_t combos = 1;
  for (size_t a = 0; a < sp; ++a) combos *= taps;
  for (int64_t cmb = 0; cmb < combos; ++cmb) {
    Var* id = pos0;
    Var* w = nullptr;
    for (int64_t rem = cmb, a = static_cast<int64_t>(sp) - 1; a >= 0; --a, rem /= taps) {
      size_t u = static_cast<size_t>(a), j = static_cast<size_t>(rem % taps);
      id = bin(cv, "add", id, pos[u][j]);
      w = w ? bin(cv, "mul", w, wt[u][j]) : wt[u][j];
    }
    Var* v = cv.op("gather", {C::a("x", flat), C::a("indices", cv.cast(id, DataType::Int32)), C::ai32("axis", 0)});  // [N, out..., C]
    v = bin(cv, "mul", v, cv.op("expand_dims", {C::a("x", w), C::aints32("axes", {gr - 1})}));
    y = y ? bin(cv, "add", y, v) : v;
  }
  std::vector<int64_t> perm{0, gr - 1};
  for (int k = 1; k < gr - 1; ++k) perm.push_back(k);
  return cv.cast(cv.op("transpose", {C::a("x", y), C::aints32("perm", perm)}), C::dtype(x));
}

// F.grid_sample (grid_sampler / grid_sampler_2d / _3d): MIL's resample samples as torch does (see the
// interpreter's kernel); torch's reflection without align_corners reflects about the image edges,
// which is resample's "symmetric"
void grid_sampler(C& cv, const json& n) {
  Var* x = cv.tensor(n, "input");
  Var* grid = cv.tensor(n, "grid");
  int64_t mode = cv.i(n, "interpolation_mode", 0), pad = cv.i(n, "padding_mode", 0);
  bool align = cv.bo(n, "align_corners", false);
  int r = cv.rank(n, x);
  if (r != 4 && r != 5) cv.fail(n, "input must be 4-D or 5-D, not rank " + std::to_string(r));
  if (mode == 2 && r == 5) cv.fail(n, "bicubic grid sampling of 5-D input is not supported (torch has none)");
  if (mode != 0 && mode != 1 && mode != 2) cv.fail(n, "interpolation_mode " + std::to_string(mode) + " is not supported");
  const char* pm = pad == 0 ? "constant" : pad == 1 ? "border" : pad == 2 ? (align ? "reflection" : "symmetric") : nullptr;
  if (!pm) cv.fail(n, "padding_mode " + std::to_string(pad) + " is not supported");
  if (!is_float(C::dtype(x))) x = cv.cast(x, DataType::Float32);
  if (mode == 2 || r == 5) {
    cv.out(n, grid_gather(cv, n, x, grid, mode, pad, align));
    return;
  }
  DataType dt = C::dtype(x);
  cv.out(n, cv.op("resample", {C::a("x", x), C::a("coordinates", cv.cast(grid, dt)), C::astr("sampling_mode", mode == 0 ? "bilinear" : "nearest"),
                               C::astr("padding_mode", pm), C::a("padding_value", Value::scalar_float(dt, 0.0)),
                               C::astr("coordinates_mode", "normalized_minus_one_to_one"), C::abool("align_corners", align)}));
}

// ---- im2col / col2im -------------------------------------------------------------------------
struct Im2Col {
  std::vector<int64_t> k, d, p, s;
};

Im2Col im2col_args(C& cv, const json& n) {
  Im2Col a;
  a.k = expand_list(cv, n, cv.ints(n, "kernel_size"), 2, "kernel_size");
  a.d = expand_list(cv, n, cv.ints(n, "dilation"), 2, "dilation");
  a.p = expand_list(cv, n, cv.ints(n, "padding"), 2, "padding");
  a.s = expand_list(cv, n, cv.ints(n, "stride"), 2, "stride");
  return a;
}

// F.unfold: [N, C, H, W] -> [N, C * kh * kw, L], channel c * kh * kw + i * kw + j holding tap
// (i, j) of every block: one strided slice of the zero-padded input per tap (exact)
void im2col(C& cv, const json& n) {
  Var* x = cv.tensor(n, "self");
  int r = cv.rank(n, x);
  if (r != 3 && r != 4) cv.fail(n, "input must be [N, C, H, W] or [C, H, W]");
  bool unb = r == 3;
  if (unb) x = cv.op("expand_dims", {C::a("x", x), C::aints32("axes", {0})});
  auto a = im2col_args(cv, n);
  std::vector<int64_t> o(2);
  for (size_t q = 0; q < 2; ++q) {
    int64_t in = known_dim(cv, n, x, 2 + static_cast<int64_t>(q), "the spatial sizes");
    o[q] = (in + 2 * a.p[q] - a.d[q] * (a.k[q] - 1) - 1) / a.s[q] + 1;
    if (o[q] <= 0) cv.fail(n, "the kernel does not fit the padded input");
  }
  x = pad_spatial(cv, x, 4, a.p, a.p, 0);
  Arg vals{"values", {}, true};
  for (int64_t i = 0; i < a.k[0]; ++i)
    for (int64_t j = 0; j < a.k[1]; ++j)
      vals.items.push_back(ArgItem{strided(cv, x, 4, {2, 3}, {i * a.d[0], j * a.d[1]}, o, a.s), nullptr});
  Var* y = vals.items.size() == 1 ? cv.op("expand_dims", {C::a("x", vals.items[0].var), C::aints32("axes", {2})})
                                  : cv.op("stack", {vals, C::ai32("axis", 2)});  // [N, C, K, oh, ow]
  y = cv.op("reshape", {C::a("x", y), C::a("shape", cv.shape_of_pieces(x, {{true, 0}, {false, -1}, {false, o[0] * o[1]}}))});
  if (unb) y = cv.op("squeeze", {C::a("x", y), C::aints32("axes", {0})});
  cv.out(n, y);
}

// F.fold: [N, C * kh * kw, L] -> [N, C, H, W], overlapping blocks summed: a grouped
// conv_transpose with one-hot kernels puts tap (i, j) of each block in place; then the padding is
// cropped (and rows / columns no block reaches are zeros)
void col2im(C& cv, const json& n) {
  Var* x = cv.tensor(n, "self");
  int r = cv.rank(n, x);
  if (r != 2 && r != 3) cv.fail(n, "input must be [N, C * kh * kw, L] or [C * kh * kw, L]");
  bool unb = r == 2;
  if (unb) x = cv.op("expand_dims", {C::a("x", x), C::aints32("axes", {0})});
  auto a = im2col_args(cv, n);
  auto out = expand_list(cv, n, cv.ints(n, "output_size"), 2, "output_size");
  int64_t K = a.k[0] * a.k[1];
  int64_t CK = known_dim(cv, n, x, 1, "the channel count");
  if (CK % K) cv.fail(n, "the channel count " + std::to_string(CK) + " is not a multiple of the kernel size " + std::to_string(K));
  int64_t Cn = CK / K;
  std::vector<int64_t> o(2);
  for (size_t q = 0; q < 2; ++q) {
    o[q] = (out[q] + 2 * a.p[q] - a.d[q] * (a.k[q] - 1) - 1) / a.s[q] + 1;
    if (o[q] <= 0) cv.fail(n, "the kernel does not fit the padded output");
  }
  Dim L = C::shape(x)[2];
  if (L->is_const() && L->value() != o[0] * o[1])
    cv.fail(n, "the input has " + std::to_string(L->value()) + " blocks; the output size needs " + std::to_string(o[0] * o[1]));
  DataType odt = C::dtype(x);
  if (!is_float(odt)) x = cv.cast(x, DataType::Float32);
  DataType dt = C::dtype(x);
  x = cv.op("reshape", {C::a("x", x), C::a("shape", cv.shape_of_pieces(x, {{true, 0}, {false, CK}, {false, o[0]}, {false, o[1]}}))});
  std::vector<double> wv(static_cast<size_t>(CK * K), 0.0);
  for (int64_t c = 0; c < CK; ++c) wv[static_cast<size_t>(c * K + c % K)] = 1.0;
  Var* w = cv.c(Value::from_doubles(dt, {CK, 1, a.k[0], a.k[1]}, wv));
  Var* y = cv.op("conv_transpose", {C::a("x", x), C::a("weight", w), C::astr("pad_type", "valid"), C::aints32("strides", a.s),
                                    C::aints32("dilations", a.d), C::ai32("groups", Cn)});
  // full size (o - 1) * s + d * (k - 1) + 1; the output is rows p .. p + H of it
  std::vector<int64_t> lo(2, 0), hi(2, 0), begin(2), cnt(2), one(2, 1);
  for (size_t q = 0; q < 2; ++q) {
    int64_t full = (o[q] - 1) * a.s[q] + a.d[q] * (a.k[q] - 1) + 1;
    hi[q] = std::max<int64_t>(0, a.p[q] + out[q] - full);
    begin[q] = a.p[q];
    cnt[q] = out[q];
  }
  y = pad_spatial(cv, y, 4, lo, hi, 0);
  y = strided(cv, y, 4, {2, 3}, begin, cnt, one);
  if (unb) y = cv.op("squeeze", {C::a("x", y), C::aints32("axes", {0})});
  cv.out(n, cv.cast(y, odt));
}

// F.max_unpool2d / 3d: zeros [N, C, out...] with each input value written at its index (a flat
// position in its plane); stride and padding (max_unpool3d's) only shaped the indices
void max_unpool(C& cv, const json& n, size_t sp) {
  Var* x = cv.tensor(n, "self");
  Var* idx = cv.cast(cv.tensor(n, "indices"), DataType::Int32);
  auto size = expand_list(cv, n, cv.ints(n, "output_size"), sp, "output_size");
  int r = cv.rank(n, x);
  if (r != static_cast<int>(sp) + 1 && r != static_cast<int>(sp) + 2) cv.fail(n, "input must be [N, C, spatial...] or [C, spatial...]");
  bool unb = r == static_cast<int>(sp) + 1;
  if (unb) {
    x = cv.op("expand_dims", {C::a("x", x), C::aints32("axes", {0})});
    idx = cv.op("expand_dims", {C::a("x", idx), C::aints32("axes", {0})});
  }
  int64_t plane = 1;
  std::vector<std::pair<bool, int64_t>> out_shape{{true, 0}, {true, 1}};
  for (auto v : size) {
    plane *= v;
    out_shape.push_back({false, v});
  }
  Var* flat = cv.op("reshape", {C::a("x", x), C::a("shape", cv.shape_of_pieces(x, {{true, 0}, {true, 1}, {false, -1}}))});
  Var* fi = cv.op("reshape", {C::a("x", idx), C::a("shape", cv.shape_of_pieces(x, {{true, 0}, {true, 1}, {false, -1}}))});
  Var* zeros = cv.op("fill", {C::a("shape", cv.shape_of_pieces(x, {{true, 0}, {true, 1}, {false, plane}})),
                              C::a("value", C::dtype(x) == DataType::Int32 ? Value::scalar_int(DataType::Int32, 0) : Value::scalar_float(C::dtype(x), 0))});
  Var* y = cv.op("scatter_along_axis", {C::a("data", zeros), C::a("indices", fi), C::a("updates", flat), C::ai32("axis", 2), C::astr("mode", "update")});
  y = cv.op("reshape", {C::a("x", y), C::a("shape", cv.shape_of_pieces(x, out_shape))});
  if (unb) y = cv.op("squeeze", {C::a("x", y), C::aints32("axes", {0})});
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

void max_unpool2d(C& cv, const json& n) { max_unpool(cv, n, 2); }

void max_unpool3d(C& cv, const json& n) { max_unpool(cv, n, 3); }

void upsample_nearest1d(C& cv, const json& n) { upsample(cv, n, 1, Mode::Nearest); }

void upsample_nearest2d(C& cv, const json& n) { upsample(cv, n, 2, Mode::Nearest); }

void upsample_nearest_exact1d(C& cv, const json& n) {
  upsample(cv, n, 1, Mode::NearestExact);
}

void upsample_nearest_exact2d(C& cv, const json& n) {
  upsample(cv, n, 2, Mode::NearestExact);
}

void upsample_linear1d(C& cv, const json& n) { upsample(cv, n, 1, Mode::Linear); }

void upsample_bilinear2d(C& cv, const json& n) { upsample(cv, n, 2, Mode::Linear); }

void upsample_bicubic2d(C& cv, const json& n) { upsample(cv, n, 2, Mode::Cubic); }

void upsample_bilinear2d_aa(C& cv, const json& n) {
  upsample(cv, n, 2, Mode::LinearAA);
}

void upsample_bicubic2d_aa(C& cv, const json& n) {
  upsample(cv, n, 2, Mode::CubicAA);
}

void upsample_nearest3d(C& cv, const json& n) { upsample(cv, n, 3, Mode::Nearest); }

void upsample_nearest_exact3d(C& cv, const json& n) {
  upsample(cv, n, 3, Mode::NearestExact);
}

void upsample_trilinear3d(C& cv, const json& n) { upsample(cv, n, 3, Mode::Linear); }

}  // namespace

void register_sampling(OpTable& t) {
  t.on("aten.grid_sampler", grid_sampler);
  t.on("aten.grid_sampler_2d", grid_sampler);
  t.on("aten.grid_sampler_3d", grid_sampler);
  t.on("aten.im2col", im2col);
  t.on("aten.col2im", col2im);
  t.on("aten.max_unpool2d", max_unpool2d);
  t.on("aten.max_unpool3d", max_unpool3d);
  t.on("aten.upsample_nearest1d", upsample_nearest1d);
  t.on("aten.upsample_nearest2d", upsample_nearest2d);
  t.on("aten._upsample_nearest_exact1d", upsample_nearest_exact1d);
  t.on("aten._upsample_nearest_exact2d", upsample_nearest_exact2d);
  t.on("aten.upsample_linear1d", upsample_linear1d);
  t.on("aten.upsample_bilinear2d", upsample_bilinear2d);
  t.on("aten.upsample_bicubic2d", upsample_bicubic2d);
  t.on("aten._upsample_bilinear2d_aa", upsample_bilinear2d_aa);
  t.on("aten._upsample_bicubic2d_aa", upsample_bicubic2d_aa);
  t.on("aten.upsample_nearest3d", upsample_nearest3d);
  t.on("aten._upsample_nearest_exact3d", upsample_nearest_exact3d);
  t.on("aten.upsample_trilinear3d", upsample_trilinear3d);
}

}  // namespace torch_detail
}  // namespace milkit
