// compose/: each composition built with the Builder, run by the interpreter, checked against
// hand-computed numbers.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/compose/arith.h"
#include "milkit/compose/attention.h"
#include "milkit/compose/einsum.h"
#include "milkit/compose/emitter.h"
#include "milkit/compose/norms.h"
#include "milkit/compose/resize.h"
#include "milkit/compose/rnn.h"
#include "milkit/compose/sampling.h"
#include "milkit/compose/scan.h"
#include "milkit/compose/windows.h"
#include "milkit/exec/plan.h"
#include "milkit/types/error.h"

using namespace milkit;
using namespace milkit::compose;

namespace {

// A function under construction: inputs of static shape, an Emitter, and a run of its outputs.
struct Prog {
  explicit Prog(Target t = Target::iOS17) : f(std::make_shared<Function>(t)) {}
  std::shared_ptr<Function> f;
  Builder b{*f};
  Emitter e{b};
  std::map<std::string, Tensor> feeds;

  Var* input(const std::string& name, std::vector<int64_t> shape, const std::vector<double>& v,
             DataType dt = DataType::Float32) {
    std::vector<Dim> dims;
    for (int64_t d : shape) dims.push_back(f->ctx().constant(d));
    Var* x = f->add_input(name, f->ctx().tensor(dt, dims));
    Tensor t = Tensor::empty(dt, shape);
    for (size_t i = 0; i < v.size(); ++i) {
      if (dt == DataType::Float32)
        t.mutable_data<float>()[i] = static_cast<float>(v[i]);
      else
        t.mutable_data<int32_t>()[i] = static_cast<int32_t>(v[i]);
    }
    feeds[name] = t;
    return x;
  }
  // Runs with the given outputs; returns their elements as doubles (and checks each shape).
  std::vector<std::vector<double>> run(const std::vector<Var*>& outs,
                                       const std::vector<std::vector<int64_t>>& shapes = {}) {
    f->body().set_outputs(outs);
    Plan p(f);
    auto r = p.run(feeds);
    std::vector<std::vector<double>> vals;
    for (size_t k = 0; k < r.size(); ++k) {
      const Tensor& t = r[k].second;
      if (k < shapes.size()) REQUIRE(t.shape() == shapes[k]);
      std::vector<double> v;
      for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get(i));
      vals.push_back(v);
    }
    return vals;
  }
  std::vector<double> run1(Var* out, std::vector<int64_t> shape) { return run({out}, {shape})[0]; }
};

void near(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-5) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    REQUIRE(got[i] == Approx(want[i]).margin(tol));
  }
}

}  // namespace

// ---- emitter ------------------------------------------------------------------------------------

TEST_CASE("compose: the emitter folds small known casts, normalizes axes and shifts", "[compose]") {
  Prog p;
  Var* k = p.e.ci({1, 2, 3});
  Var* kf = p.e.cast(k, DataType::Float32);
  REQUIRE(kf->op()->op_type() == "const");  // folded, no cast op
  REQUIRE(p.e.cast(kf, DataType::Float32) == kf);
  REQUIRE(Emitter::axis(-1, 3) == 2);
  REQUIRE_THROWS_WITH(Emitter::axis(3, 3), Catch::Contains("axis 3 is out of range for rank 3"));
  Var* x = p.input("x", {4}, {1, 2, 3, 4});
  Var* xi = p.input("xi", {4}, {1, 2, 3, 4}, DataType::Int32);
  Var* c = p.e.cast(x, DataType::Int32);
  REQUIRE(c->op()->op_type() == "cast");
  auto r =
      p.run({p.e.shift(x, 0, 1, 9), p.e.shift(xi, 0, 2, -1), p.e.per_channel(p.e.ci({5, 6}), 4)});
  near(r[0], {9, 1, 2, 3});
  near(r[1], {-1, -1, 1, 2});
  REQUIRE(r[2].size() == 2);
  REQUIRE(p.f->body().outputs()[2]->type()->rank() == 3);  // [C, 1, 1] broadcasts over [N, C, H, W]
}

// ---- arithmetic ---------------------------------------------------------------------------------

TEST_CASE("compose: trunc_div, fmod and python_mod take the sign each language gives",
          "[compose]") {
  Prog p;
  Var* x = p.input("x", {4}, {7, -7, 7, -7}, DataType::Int32);
  Var* y = p.input("y", {4}, {2, 2, -2, -2}, DataType::Int32);
  Var* xf = p.input("xf", {4}, {5.5, -5.5, 5.5, -6}, DataType::Float32);
  Var* yf = p.input("yf", {4}, {2, 2, -2, 3}, DataType::Float32);
  Var* td = trunc_div(p.e, x, y);
  REQUIRE(Emitter::dtype(td) == DataType::Int32);
  auto r = p.run({td, fmod(p.e, x, y), python_mod(p.e, x, y), fmod(p.e, xf, yf),
                  python_mod(p.e, xf, yf), trunc(p.e, xf)});
  near(r[0], {3, -3, -3, 3});
  near(r[1], {1, -1, 1, -1});
  near(r[2], {1, 1, -1, -1});
  near(r[3], {1.5, -1.5, 1.5, 0});
  near(r[4], {1.5, 0.5, -0.5, 0});
  near(r[5], {5, -5, 5, -6});
}

TEST_CASE("compose: round_half_even sends ties to the even neighbour", "[compose]") {
  Prog p;
  Var* x = p.input("x", {9}, {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, 2.6, -2.6});
  near(p.run1(round_half_even(p.e, x), {9}), {0, 2, 2, 0, -2, -2, 2, 3, -3});
}

TEST_CASE("compose: iota and triangle masks of lengths and diagonals known at run time",
          "[compose]") {
  Prog p;
  // the lengths and k arrive as int32 inputs: nothing is known when the ops are built
  Var* rows = p.input("rows", {}, {3}, DataType::Int32);
  Var* cols = p.input("cols", {}, {4}, DataType::Int32);
  Var* k = p.input("k", {}, {1}, DataType::Int32);
  Var* lower = p.e.cast(tri_mask(p.e, rows, cols, k, true), DataType::Int32);
  Var* upper =
      p.e.cast(tri_mask(p.e, rows, cols, p.e.cs(-1, DataType::Int32), false), DataType::Int32);
  auto r = p.run({iota(p.e, cols), lower, upper}, {{4}, {3, 4}, {3, 4}});
  near(r[0], {0, 1, 2, 3});
  near(r[1], {1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1});  // col - row <= 1
  near(r[2], {1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1});  // col - row >= -1
}

// ---- scans --------------------------------------------------------------------------------------

TEST_CASE("compose: cumsum and cumprod, inclusive / exclusive, forward / reverse", "[compose]") {
  Prog p;
  Var* x = p.input("x", {2, 4}, {1, 2, 3, 4, 2, 1, 2, 3});
  Var* xi = p.input("xi", {5}, {1, -2, 3, 1, 2}, DataType::Int32);
  std::vector<Var*> outs;
  for (bool ex : {false, true})
    for (bool rev : {false, true}) {
      outs.push_back(cumsum(p.e, x, {-1, ex, rev}));
      outs.push_back(cumprod(p.e, x, {1, ex, rev}));
    }
  outs.push_back(cumprod(p.e, xi, {0, false, false}));
  outs.push_back(cumprod(p.e, x, {0, true, false}));
  auto r = p.run(outs);
  near(r[0], {1, 3, 6, 10, 2, 3, 5, 8});
  near(r[1], {1, 2, 6, 24, 2, 2, 4, 12});
  near(r[2], {10, 9, 7, 4, 8, 6, 5, 3});
  near(r[3], {24, 24, 12, 4, 12, 6, 6, 3});
  near(r[4], {0, 1, 3, 6, 0, 2, 3, 5});
  near(r[5], {1, 1, 2, 6, 1, 2, 2, 4});
  near(r[6], {9, 7, 4, 0, 6, 5, 3, 0});
  near(r[7], {24, 12, 4, 1, 6, 6, 3, 1});
  near(r[8], {1, -2, -6, -6, -12});
  REQUIRE(Emitter::dtype(outs[8]) == DataType::Int32);
  near(r[9], {1, 1, 1, 1, 1, 2, 3, 4});
}

TEST_CASE("compose: logcumsumexp matches log(cumsum(exp)) and keeps -inf", "[compose]") {
  Prog p;
  Var* x = p.input("x", {5}, {0.5, -1, 2, 3, -INFINITY});
  Var* z = p.input("z", {3}, {-INFINITY, -INFINITY, 1});
  auto r = p.run({logcumsumexp(p.e, x, {0, false, false}), logcumsumexp(p.e, z, {0, false, true})});
  std::vector<double> v = {0.5, -1, 2, 3}, want;
  double s = 0;
  for (double a : v) want.push_back(std::log(s += std::exp(a)));
  want.push_back(want.back());
  near(r[0], want);
  REQUIRE(r[1][0] == Approx(1.0));
  REQUIRE(r[1][2] == Approx(1.0));
  Prog q;
  Var* sym = q.f->add_input(
      "s", q.f->ctx().tensor(DataType::Float32,
                             std::vector<Dim>{q.f->ctx().symbol(Symbol::create("L", 1, 8))}));
  REQUIRE_THROWS_WITH(cumprod(q.e, sym, {0, false, false}), Catch::Contains("symbolic dim"));
}

// ---- grid sampling ------------------------------------------------------------------------------

namespace {

// x [1, 1, 2, 2, 2] = 0..7 sampled at one 3-D grid point (x, y, z)
double sample3(const GridSampleSpec& s, double gx, double gy, double gz) {
  Prog p;
  Var* x = p.input("x", {1, 1, 2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  Var* g = p.input("g", {1, 1, 1, 1, 3}, {gx, gy, gz});
  return p.run1(grid_sample(p.e, x, g, s), {1, 1, 1, 1, 1})[0];
}

// x [1, 1, 2, 4], both rows 0, 1, 4, 9, sampled at (gx, the first row's center)
double sample_row(const GridSampleSpec& s, double gx) {
  Prog p;
  Var* x = p.input("x", {1, 1, 2, 4}, {0, 1, 4, 9, 0, 1, 4, 9});
  Var* g = p.input("g", {1, 1, 1, 2}, {gx, s.align_corners ? -1.0 : -0.5});
  return p.run1(grid_sample(p.e, x, g, s), {1, 1, 1, 1})[0];
}

}  // namespace

TEST_CASE("compose: 3-D grid sampling, linear and nearest, every padding mode, both conventions",
          "[compose]") {
  for (GridConvention conv : {GridConvention::Torch, GridConvention::Onnx}) {
    INFO("convention " << (conv == GridConvention::Torch ? "torch" : "onnx"));
    GridSampleSpec s;
    s.convention = conv;
    s.align_corners = true;
    REQUIRE(sample3(s, 0, 0, 0) == Approx(3.5));  // the mean of the 8 corners
    REQUIRE(sample3(s, 1, -1, -1) == Approx(1));  // x = 1, y = 0, z = 0
    REQUIRE(sample3(s, 1, 1, 1) == Approx(7));
    s.align_corners = false;  // the corner centers at +-0.5: (1, 1, 1) is the outer corner
    REQUIRE(sample3(s, 1, 1, 1) == Approx(0.875));  // half a tap per axis inside: 7 / 8
    REQUIRE(sample3(s, 0, 0, 0) == Approx(3.5));
    s.padding = SamplePadding::Border;
    REQUIRE(sample3(s, 1, 1, 1) == Approx(7));
    REQUIRE(sample3(s, -3, -3, -3) == Approx(0));
    s.padding = SamplePadding::Reflection;
    REQUIRE(sample3(s, 1, 1, 1) == Approx(7));
    REQUIRE(sample3(s, 0.75, -1, -1) == Approx(1));  // x 1.25 reflects into 1: 1
    s.padding = SamplePadding::Zeros;
    s.mode = SampleMode::Nearest;
    REQUIRE(sample3(s, 0.2, -0.2, 0.6) == Approx(5));  // (1, 0, 1)
    REQUIRE(sample3(s, 0, 0, 0) == Approx(0));         // 0.5 rounds to even 0 on each axis
    s.align_corners = true;
    REQUIRE(sample3(s, 0.1, 0.1, -0.1) == Approx(3));  // (1, 1, 0)
  }
}

TEST_CASE("compose: bicubic grid sampling reproduces Keys' weights, zeros / border / reflection",
          "[compose]") {
  for (GridConvention conv : {GridConvention::Torch, GridConvention::Onnx}) {
    INFO("convention " << (conv == GridConvention::Torch ? "torch" : "onnx"));
    GridSampleSpec s;
    s.mode = SampleMode::Cubic;
    s.convention = conv;
    s.align_corners = true;
    // between pixels 1 and 2: weights -3/32, 19/32, 19/32, -3/32 over 0, 1, 4, 9
    REQUIRE(sample_row(s, 0) == Approx(2.125));
    REQUIRE(sample_row(s, 1) == Approx(9));  // on a pixel: exact
    REQUIRE(sample_row(s, -1.0 / 3) == Approx(1));
    s.align_corners = false;
    // x = -0.5: taps -2, -1, 0, 1
    REQUIRE(sample_row(s, -1) == Approx(-3.0 / 32));  // zeros: only the tap at 1 reads a pixel
    s.padding = SamplePadding::Border;
    REQUIRE(sample_row(s, -1) == Approx(-3.0 / 32));  // taps clamp to 0, 0, 0, 1
    s.padding = SamplePadding::Reflection;
    REQUIRE(sample_row(s, -1) == Approx(-6.0 / 32));  // taps reflect to 1, 0, 0, 1
  }
}

TEST_CASE("compose: 2-D linear grid sampling becomes resample, zeros / border / reflection",
          "[compose]") {
  auto run = [](SamplePadding pad, bool align, double gx, double gy) {
    Prog p;
    Var* x = p.input("x", {1, 1, 2, 2}, {1, 2, 3, 4});
    Var* g = p.input("g", {1, 1, 1, 2}, {gx, gy});
    GridSampleSpec s;
    s.padding = pad;
    s.align_corners = align;
    Var* y = grid_sample(p.e, x, g, s);
    REQUIRE(y->op()->op_type() == "resample");
    return p.run1(y, {1, 1, 1, 1})[0];
  };
  REQUIRE(run(SamplePadding::Zeros, true, 0, 0) == Approx(2.5));
  REQUIRE(run(SamplePadding::Zeros, true, -1, -1) == Approx(1));
  REQUIRE(run(SamplePadding::Zeros, false, -1, -1) == Approx(0.25));
  REQUIRE(run(SamplePadding::Border, false, -1, -1) == Approx(1));
  REQUIRE(run(SamplePadding::Reflection, false, -1, -1) == Approx(1));
  REQUIRE(run(SamplePadding::Reflection, true, 3, -1) == Approx(1));    // x 2 reflects about 1 to 0
  REQUIRE(run(SamplePadding::Reflection, true, 2, -1) == Approx(1.5));  // x 1.5 reflects to 0.5
}

// ---- windows ------------------------------------------------------------------------------------

TEST_CASE("compose: im2col takes every window's taps; col2im sums them back", "[compose]") {
  Prog p;
  Var* x = p.input("x", {1, 1, 3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8});
  Window w;
  w.kernel = {2, 2};
  Var* cols = im2col(p.e, x, w);
  Var* ones = p.input("ones", {1, 4, 4}, std::vector<double>(16, 1.0));
  Var* img = col2im(p.e, ones, {3, 3}, w);
  auto r = p.run({cols, img}, {{1, 4, 4}, {1, 1, 3, 3}});
  near(r[0], {0, 1, 3, 4, 1, 2, 4, 5, 3, 4, 6, 7, 4, 5, 7, 8});
  near(r[1], {1, 2, 1, 2, 4, 2, 1, 2, 1});  // how many windows cover each pixel
}

TEST_CASE("compose: im2col / col2im with padding and stride round-trip, pads dropped",
          "[compose]") {
  Prog p;
  Var* x = p.input("x", {1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Window w;
  w.kernel = {2, 2};
  w.stride = {2, 2};
  w.pad_begin = {1, 1};
  w.pad_end = {1, 1};
  Var* cols = im2col(p.e, x, w);
  auto r = p.run({cols, col2im(p.e, cols, {2, 2}, w)}, {{1, 8, 4}, {1, 2, 2, 2}});
  near(std::vector<double>(r[0].begin(), r[0].begin() + 8), {0, 0, 0, 4, 0, 0, 3, 0});
  near(r[1], {1, 2, 3, 4, 5, 6, 7, 8});
  REQUIRE_THROWS_WITH(col2im(p.e, cols, {5, 5}, w), Catch::Contains("does not match"));
}

TEST_CASE("compose: Window::out_size, ceil_mode dropping a window that starts in the end padding",
          "[compose]") {
  Window w;
  w.kernel = {2};
  w = w.filled(1);
  w.stride = {2};
  REQUIRE(w.out_size(0, 5, false) == 2);
  REQUIRE(w.out_size(0, 5, true) == 3);
  w.stride = {3};
  w.pad_begin = w.pad_end = {1};
  REQUIRE(w.out_size(0, 4, false) == 2);
  REQUIRE(w.out_size(0, 4, true) == 2);  // a third window would start at 6, in the end padding
  Window bad;
  bad.kernel = {2, 2};
  bad.stride = {1};
  REQUIRE_THROWS_WITH(bad.filled(2), Catch::Contains("stride needs 2 values"));
}

TEST_CASE("compose: ceil_mode max pooling with indices in every numbering, and averages",
          "[compose]") {
  std::vector<double> v = {1, 5, 2, 4, 3, 9, 7, 8, 6};
  std::vector<double> v2;
  for (double a : v) v2.push_back(a);
  for (double a : v) v2.push_back(a + 10);
  for (IndexOrder order : {IndexOrder::RowMajor, IndexOrder::ColumnMajor, IndexOrder::Plane}) {
    Prog p;
    Var* x = p.input("x", {1, 2, 3, 3}, v2);
    PoolSpec s;
    s.window.kernel = {2, 2};
    s.window.stride = {2, 2};
    s.ceil_mode = true;
    s.index_order = order;
    Var* idx = nullptr;
    Var* y = pool_by_taps(p.e, x, s, &idx);
    auto r = p.run({y, idx}, {{1, 2, 2, 2}, {1, 2, 2, 2}});
    near(r[0], {5, 9, 8, 6, 15, 19, 18, 16});
    if (order == IndexOrder::RowMajor) near(r[1], {1, 5, 7, 8, 10, 14, 16, 17});
    if (order == IndexOrder::ColumnMajor) near(r[1], {3, 7, 5, 8, 12, 16, 14, 17});
    if (order == IndexOrder::Plane) near(r[1], {1, 5, 7, 8, 1, 5, 7, 8});
  }
  Prog p;
  Var* x = p.input("x", {1, 1, 3, 3}, v);
  Var* t = p.input("t", {1, 1, 1, 3}, {2, 2, 2});
  PoolSpec s;
  s.window.kernel = {2, 2};
  s.window.stride = {2, 2};
  s.ceil_mode = true;
  s.kind = PoolKind::Avg;
  PoolSpec inc = s;
  inc.window.pad_begin = inc.window.pad_end = {1, 1};
  inc.ceil_mode = false;
  inc.count_include_pad = true;
  PoolSpec ties;
  ties.window.kernel = {1, 3};
  Var* ti = nullptr;
  Var* tied = pool_by_taps(p.e, t, ties, &ti);
  auto r = p.run({pool_by_taps(p.e, x, s), pool_by_taps(p.e, x, inc), tied, ti});
  near(r[0], {13.0 / 4, 11.0 / 2, 15.0 / 2, 6});
  near(r[1], {1.0 / 4, 7.0 / 4, 11.0 / 4, 26.0 / 4});  // pads counted: 4 taps each
  near(r[2], {2});
  near(r[3], {0});  // the first maximum wins
}

TEST_CASE("compose: pooling with dilation", "[compose]") {
  Prog p;
  Var* x = p.input("x", {1, 1, 1, 5}, {3, 1, 4, 1, 5});
  PoolSpec s;
  s.window.kernel = {1, 2};
  s.window.dilation = {1, 2};
  PoolSpec sum = s;
  sum.kind = PoolKind::Sum;
  auto r =
      p.run({pool_by_taps(p.e, x, s), pool_by_taps(p.e, x, sum)}, {{1, 1, 1, 3}, {1, 1, 1, 3}});
  near(r[0], {4, 1, 5});
  near(r[1], {7, 2, 9});
}

TEST_CASE("compose: max_unpool scatters by whole-tensor or per-plane indices", "[compose]") {
  Prog p;
  Var* x = p.input("x", {1, 2, 2}, {5, 7, 6, 8});
  Var* it = p.input("it", {1, 2, 2}, {1, 3, 4, 7}, DataType::Int32);
  Var* ip = p.input("ip", {1, 2, 2}, {1, 3, 0, 3}, DataType::Int32);
  Var* xi = p.input("xi", {1, 1, 2}, {5, 7}, DataType::Int32);
  Var* ii = p.input("ii", {1, 1, 2}, {2, 0}, DataType::Int32);
  Var* yi = max_unpool(p.e, xi, ii, {3}, UnpoolIndices::Tensor);
  REQUIRE(Emitter::dtype(yi) == DataType::Int32);
  auto r = p.run({max_unpool(p.e, x, it, {4}, UnpoolIndices::Tensor),
                  max_unpool(p.e, x, ip, {4}, UnpoolIndices::Plane), yi},
                 {{1, 2, 4}, {1, 2, 4}, {1, 1, 3}});
  near(r[0], {0, 5, 0, 7, 6, 0, 0, 8});
  near(r[1], {0, 5, 0, 7, 6, 0, 0, 8});
  near(r[2], {7, 0, 5});
}

TEST_CASE("compose: col2im and per-plane max_unpool with a batch known only at run time",
          "[compose]") {
  Prog p;
  auto& cx = p.f->ctx();
  Dim n = cx.symbol(Symbol::create("N", 1, 8)), c = cx.symbol(Symbol::create("C", 1, 8));
  Dim l = cx.symbol(Symbol::create("L", 1, 8));
  Var* cols =
      p.f->add_input("cols", cx.tensor(DataType::Float32, std::vector<Dim>{n, cx.constant(4), l}));
  Var* x =
      p.f->add_input("x", cx.tensor(DataType::Float32, std::vector<Dim>{n, c, cx.constant(2)}));
  Var* ix =
      p.f->add_input("ix", cx.tensor(DataType::Int32, std::vector<Dim>{n, c, cx.constant(2)}));
  Tensor tc = Tensor::empty(DataType::Float32, {2, 4, 4});
  for (int i = 0; i < 32; ++i) tc.mutable_data<float>()[i] = 1.0f;
  Tensor tx = Tensor::empty(DataType::Float32, {2, 1, 2});
  Tensor ti = Tensor::empty(DataType::Int32, {2, 1, 2});
  const float xv[] = {5, 7, 6, 8};
  const int32_t iv[] = {1, 3, 0, 2};
  for (int i = 0; i < 4; ++i)
    tx.mutable_data<float>()[i] = xv[i], ti.mutable_data<int32_t>()[i] = iv[i];
  p.feeds = {{"cols", tc}, {"x", tx}, {"ix", ti}};
  Window w;
  w.kernel = {2, 2};
  auto r = p.run({col2im(p.e, cols, {3, 3}, w), max_unpool(p.e, x, ix, {4}, UnpoolIndices::Plane)},
                 {{2, 1, 3, 3}, {2, 1, 4}});
  near(r[0], {1, 2, 1, 2, 4, 2, 1, 2, 1, 1, 2, 1, 2, 4, 2, 1, 2, 1});
  near(r[1], {0, 5, 0, 7, 6, 0, 8, 0});
  Var* cc = p.f->add_input("cc", cx.tensor(DataType::Float32, std::vector<Dim>{n, c, l}));
  REQUIRE_THROWS_WITH(col2im(p.e, cc, {3, 3}, w), Catch::Contains("channel count"));
}

// ---- norms --------------------------------------------------------------------------------------

TEST_CASE("compose: batch norm as one op with const statistics, else composed; both agree",
          "[compose]") {
  Prog p;
  std::vector<double> xv = {1, 2, 3, 4, 5, 6, 7, 8};
  Var* x = p.input("x", {1, 2, 2, 2}, xv);
  Var* vmean = p.input("m", {2}, {1, 2});
  Var* vvar = p.input("v", {2}, {4, 16});
  ChannelNormSpec cs{p.e.c(Value::from_doubles(DataType::Float32, {2}, {1, 2})),
                     p.e.c(Value::from_doubles(DataType::Float32, {2}, {4, 16})),
                     p.e.c(Value::from_doubles(DataType::Float32, {2}, {2, 1})),
                     p.e.c(Value::from_doubles(DataType::Float32, {2}, {0, 10})), 0.0};
  Var* one = batch_norm(p.e, x, cs);
  REQUIRE(one->op()->op_type() == "batch_norm");
  ChannelNormSpec vs = cs;
  vs.mean = vmean;
  vs.variance = vvar;
  Var* comp = batch_norm(p.e, x, vs);
  REQUIRE(comp->op()->op_type() != "batch_norm");
  auto r = p.run({one, comp, norm_by_stats(p.e, x, vs)});
  std::vector<double> want = {0, 1, 2, 3, 10.75, 11, 11.25, 11.5};  // (x - m) / sd * g + b
  near(r[0], want);
  near(r[1], want);
  near(r[2], want);
  ChannelNormSpec none;
  REQUIRE_THROWS_WITH(batch_norm(p.e, x, none), Catch::Contains("training mode"));
}

TEST_CASE("compose: layer, group and RMS norms", "[compose]") {
  Prog p;
  Var* x = p.input("x", {1, 4, 1}, {1, 3, 10, 14});
  Var* w = p.input("w", {4}, {1, 2, 1, 2});
  Var* y = p.input("y", {2, 2}, {3, 4, 1, 1});
  Var* ln = layer_norm(p.e, y, 1, nullptr, p.input("b", {2}, {1, 0}), 1e-6);
  auto r =
      p.run({group_norm(p.e, x, 2, w, nullptr, 0.0), ln, rms_norm(p.e, y, -1, nullptr, 0.0),
             rms_norm(p.e, y, 0, p.e.c(Value::from_doubles(DataType::Float32, {2}, {1, 2})), 0.0)});
  near(r[0], {-1, 2, -1, 2});      // groups (1, 3) and (10, 14): +-1 standardized, then scaled
  near(r[1], {0, 1, 1, 0}, 1e-4);  // a constant row normalizes to 0, then the shift
  double a = std::sqrt(12.5), b = 1.0;
  near(r[2], {3 / a, 4 / a, 1 / b, 1 / b});
  double all = std::sqrt((9 + 16 + 1 + 1) / 4.0);
  near(r[3], {3 / all, 8 / all, 1 / all, 2 / all});
  REQUIRE_THROWS_WITH(group_norm(p.e, x, 3, nullptr, nullptr, 1e-5),
                      Catch::Contains("not a multiple"));
}

TEST_CASE("compose: cummax / cummin with indices, later entries winning ties", "[compose]") {
  Prog p;
  Var* x = p.input("x", {2, 5}, {1, 3, 2, 3, 5, 4, 1, 1, 2, 0});
  Var* xi = p.input("xi", {5}, {2, -1, 2, 7, -3}, DataType::Int32);
  auto [mx, ix] = cumextreme(p.e, x, {1, false, false}, true);
  auto [mn, in] = cumextreme(p.e, x, {-1, false, false}, false);
  auto [mi, ii] = cumextreme(p.e, xi, {0, false, false}, false);
  REQUIRE(Emitter::dtype(ix) == DataType::Int32);
  auto r = p.run({mx, ix, mn, in, mi, ii});
  near(r[0], {1, 3, 3, 3, 5, 4, 4, 4, 4, 4});
  near(r[1], {0, 1, 1, 3, 4, 0, 0, 0, 0, 0});
  near(r[2], {1, 1, 1, 1, 1, 4, 1, 1, 1, 0});
  near(r[3], {0, 0, 0, 0, 0, 0, 1, 2, 2, 4});
  near(r[4], {2, -1, -1, -1, -3});
  near(r[5], {0, 1, 1, 1, 4});
  REQUIRE_THROWS_WITH(cumextreme(p.e, x, {0, true, false}, true), Catch::Contains("forward"));
  Prog q(Target::iOS15);  // no op newer than the oldest target
  Var* y = q.input("y", {4}, {2, 5, 1, 5});
  auto [qm, qi] = cumextreme(q.e, y, {0, false, false}, true);
  auto rq = q.run({qm, qi});
  near(rq[0], {2, 5, 5, 5});
  near(rq[1], {0, 1, 1, 3});
}

// ---- resize -------------------------------------------------------------------------------------

namespace {

ResizeSpec resize_1d(int64_t in, int64_t out, double scale, ResizeMode m, ResizeCoord c,
                     ResizeConvention conv) {
  ResizeSpec s;
  s.axes = {ResizeAxis{-1, in, out, scale}};
  s.mode = m;
  s.coord = c;
  s.convention = conv;
  return s;
}

}  // namespace

TEST_CASE("compose: linear resize, align_corners and half-pixel, both conventions", "[compose]") {
  Prog p;
  Var* x3 = p.input("x3", {1, 3}, {1, 3, 7});
  Var* x4 = p.input("x4", {1, 4}, {1, 2, 4, 8});
  Var* x2 = p.input("x2", {1, 2}, {0, 4});
  using RC = ResizeConvention;
  auto lin = [](int64_t in, int64_t out, double sc, ResizeCoord c, RC v) {
    return resize_1d(in, out, sc, ResizeMode::Linear, c, v);
  };
  auto r = p.run({resize(p.e, x3, lin(3, 5, 5.0 / 3, ResizeCoord::AlignCorners, RC::Onnx)),
                  resize(p.e, x3, lin(3, 5, 0, ResizeCoord::AlignCorners, RC::Torch)),
                  resize(p.e, x4, lin(4, 2, 0.5, ResizeCoord::HalfPixel, RC::Onnx)),
                  resize(p.e, x4, lin(4, 2, 0.5, ResizeCoord::HalfPixel, RC::Torch)),
                  resize(p.e, x2, lin(2, 4, 2, ResizeCoord::HalfPixel, RC::Onnx)),
                  resize(p.e, x2, lin(2, 4, 2, ResizeCoord::HalfPixel, RC::Torch)),
                  resize(p.e, x2, lin(2, 4, 2, ResizeCoord::AlignCorners, RC::Torch))});
  near(r[0], {1, 2, 3, 5, 7});
  near(r[1], {1, 2, 3, 5, 7});
  near(r[2], {1.5, 6});  // sources 0.5 and 2.5
  near(r[3], {1.5, 6});
  near(r[4], {0, 1, 3, 4});  // sources -0.25 (clamped), 0.25, 0.75, 1.25 (clamped)
  near(r[5], {0, 1, 3, 4});
  near(r[6], {0, 4.0 / 3, 8.0 / 3, 4});
}

TEST_CASE("compose: resizing to lengths known at run time gives the constant taps' numbers",
          "[compose]") {
  using RC = ResizeConvention;
  using C = ResizeCoord;
  struct Case {
    ResizeMode m;
    C c;
    RC v;
    NearestRound round;
  };
  std::vector<Case> cases;
  for (ResizeMode m : {ResizeMode::Nearest, ResizeMode::Linear, ResizeMode::Cubic}) {
    for (C c : {C::Asymmetric, C::HalfPixel, C::AlignCorners})
      cases.push_back({m, c, RC::Torch, {}});
    for (C c :
         {C::HalfPixel, C::Asymmetric, C::PytorchHalfPixel, C::AlignCorners, C::HalfPixelSymmetric})
      cases.push_back({m, c, RC::Onnx, NearestRound::RoundPreferFloor});
  }
  cases.push_back({ResizeMode::Nearest, C::HalfPixel, RC::Onnx, NearestRound::RoundPreferCeil});
  cases.push_back({ResizeMode::Nearest, C::HalfPixel, RC::Onnx, NearestRound::Floor});
  cases.push_back({ResizeMode::Nearest, C::Asymmetric, RC::Onnx, NearestRound::Ceil});
  // axis 0 grows 3 -> 7, axis 1 shrinks 5 -> 3; the run-time lengths are int32 inputs
  const std::vector<double> xv = {1, -2, 3, 5, 0, 4, 4, -1, 2, 7, 0, 1, 9, -3, 2};
  for (const Case& k : cases) {
    INFO("mode " << static_cast<int>(k.m) << " coord " << static_cast<int>(k.c) << " convention "
                 << static_cast<int>(k.v) << " rounding " << static_cast<int>(k.round));
    Prog p;
    Var* x = p.input("x", {3, 5}, xv);
    std::vector<Var*> len;
    for (auto [name, v] :
         {std::pair<const char*, double>{"in0", 3}, {"out0", 7}, {"in1", 5}, {"out1", 3}})
      len.push_back(p.input(name, {}, {v}, DataType::Int32));
    ResizeSpec s;
    s.mode = k.m;
    s.coord = k.c;
    s.convention = k.v;
    s.nearest = k.round;
    bool onnx = k.v == RC::Onnx;
    // the static taps take ONNX's stated scale (out / in), torch's in / out from the lengths
    s.axes = {ResizeAxis{0, 3, 7, onnx ? 7.0 / 3 : 0}, ResizeAxis{1, 5, 3, onnx ? 3.0 / 5 : 0}};
    Var* fixed = resize(p.e, x, s);
    Var* run = resize_at_run_time(p.e, x, s, {{0, len[0], len[1], 0}, {1, len[2], len[3], 0}});
    auto r = p.run({fixed, run}, {{7, 3}, {7, 3}});
    near(r[1], r[0], 1e-4);
  }
}

TEST_CASE("compose: cubic resize with A = -0.75 and -0.5, exclude_outside", "[compose]") {
  Prog p;
  Var* x = p.input("x", {1, 4}, {1, 2, 4, 8});
  auto cub = [](int64_t out, double sc, ResizeCoord c, ResizeConvention v, double a) {
    ResizeSpec s = resize_1d(4, out, sc, ResizeMode::Cubic, c, v);
    s.cubic_a = a;
    return s;
  };
  ResizeSpec ex = cub(8, 2, ResizeCoord::Asymmetric, ResizeConvention::Onnx, -0.75);
  ex.exclude_outside = true;
  auto r =
      p.run({resize(p.e, x, cub(8, 2, ResizeCoord::Asymmetric, ResizeConvention::Onnx, -0.75)),
             resize(p.e, x, cub(8, 2, ResizeCoord::Asymmetric, ResizeConvention::Onnx, -0.5)),
             resize(p.e, x, cub(7, 0, ResizeCoord::AlignCorners, ResizeConvention::Torch, -0.75)),
             resize(p.e, x, ex)});
  // odd outputs sit halfway: weights w(1.5), w(0.5), w(0.5), w(1.5) on clamped neighbours;
  // A = -0.75: w(0.5) = 0.59375, w(1.5) = -0.09375; A = -0.5: 0.5625, -0.0625
  near(r[0], {1, 1.3125, 2, 2.71875, 4, 6.1875, 8, 8.375});
  near(r[1], {1, 1.375, 2, 2.8125, 4, 6.125, 8, 8.25});
  near(r[2], {1, 1.3125, 2, 2.71875, 4, 6.1875, 8});
  // outside taps dropped and the rest renormalized: output 1 uses 1, 2, 4 with weights
  // 0.59375, 0.59375, -0.09375 (sum 1.09375); output 7 uses 4, 8
  near(r[3],
       {1, (0.59375 + 2 * 0.59375 - 4 * 0.09375) / 1.09375, 2, 2.71875, 4,
        (-0.1875 + 4 * 0.59375 + 8 * 0.59375) / 1.09375, 8, (-4 * 0.09375 + 8 * 0.59375) / 0.5});
}

TEST_CASE("compose: nearest resize rounding modes, torch nearest and nearest-exact", "[compose]") {
  Prog p;
  Var* x = p.input("x", {1, 4}, {10, 20, 30, 40});
  auto nn = [](int64_t out, double sc, ResizeCoord c, NearestRound m, ResizeConvention v) {
    ResizeSpec s = resize_1d(4, out, sc, ResizeMode::Nearest, c, v);
    s.nearest = m;
    return s;
  };
  using NR = NearestRound;
  using RC = ResizeCoord;
  std::vector<Var*> outs;
  for (NR m : {NR::RoundPreferFloor, NR::RoundPreferCeil, NR::Floor, NR::Ceil}) {
    outs.push_back(resize(p.e, x, nn(2, 0.5, RC::HalfPixel, m, ResizeConvention::Onnx)));
    outs.push_back(resize(p.e, x, nn(6, 1.5, RC::Asymmetric, m, ResizeConvention::Onnx)));
  }
  outs.push_back(resize(p.e, x, nn(6, 0, RC::Asymmetric, NR::Floor, ResizeConvention::Torch)));
  outs.push_back(resize(p.e, x, nn(6, 0, RC::HalfPixel, NR::Floor, ResizeConvention::Torch)));
  auto r = p.run(outs);
  near(r[0], {10, 30});                  // sources 0.5 and 2.5 (ties)
  near(r[1], {10, 20, 20, 30, 40, 40});  // sources 0, 2/3, 4/3, 2, 8/3, 10/3
  near(r[2], {20, 40});
  near(r[3], {10, 20, 20, 30, 40, 40});
  near(r[4], {10, 30});
  near(r[5], {10, 10, 20, 30, 30, 40});
  near(r[6], {20, 40});
  near(r[7], {10, 20, 30, 30, 40, 40});
  near(r[8], {10, 10, 20, 30, 30, 40});  // floor(i * 4 / 6)
  near(r[9], {10, 20, 20, 30, 40, 40});  // floor((i + 0.5) * 4 / 6)
}

TEST_CASE("compose: antialiased downscale by matrix (torch) and by widened taps (onnx)",
          "[compose]") {
  Prog p;
  Var* x = p.input("x", {1, 4}, {1, 2, 4, 8});
  Var* xi = p.input("xi", {1, 4}, {1, 2, 4, 8}, DataType::Int32);
  ResizeSpec t =
      resize_1d(4, 2, 0.5, ResizeMode::Linear, ResizeCoord::HalfPixel, ResizeConvention::Torch);
  t.antialias = true;
  ResizeSpec o = t;
  o.convention = ResizeConvention::Onnx;
  Var* yt = resize(p.e, x, t);
  REQUIRE(yt->op()->op_type() == "matmul");
  Var* yi = resize(p.e, xi, o);
  REQUIRE(Emitter::dtype(yi) == DataType::Int32);
  auto r = p.run({yt, resize(p.e, x, o), yi});
  // torch: a triangle of half-width 2 around centres 1 and 3, weights (3, 3, 1) / 7 and (1, 3, 3) /
  // 7
  near(r[0], {13.0 / 7, 9.5 / 1.75});
  // onnx: four taps (0.125, 0.375, 0.375, 0.125) around 0.5 and 2.5, edges clamped
  near(r[1], {1.75, 5.75});
  near(r[2], {2, 6});  // rounded back to integers
}

// ---- einsum -------------------------------------------------------------------------------------

namespace {

// out[i][k] = sum_j a[i][j] * b[j][k] for row-major a [n, m] and b [m, q]
std::vector<double> matmul_ref(const std::vector<double>& a, const std::vector<double>& b, size_t n,
                               size_t m, size_t q) {
  std::vector<double> r(n * q, 0.0);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < m; ++j)
      for (size_t k = 0; k < q; ++k) r[i * q + k] += a[i * m + j] * b[j * q + k];
  return r;
}

}  // namespace

TEST_CASE("compose: einsum matmul, batch matmul, transpose, outer product, chains", "[compose]") {
  Prog p;
  std::vector<double> av = {1, 2, 3, 4, 5, 6}, bv = {1, 0, 2, -1, 3, 1, 0, 2, -2, 1, 1, 1};
  Var* a = p.input("a", {2, 3}, av);
  Var* b = p.input("b", {3, 4}, bv);
  Var* ba = p.input("ba", {2, 1, 3}, av);  // two batches of one row
  Var* bb = p.input("bb", {2, 3, 2}, bv);
  Var* u = p.input("u", {2}, {1, 2});
  Var* w = p.input("w", {3}, {1, 10, 100});
  Var* c = p.input("c", {4, 1}, {1, 1, 1, 1});
  auto r = p.run({einsum(p.e, "ij,jk->ik", {a, b}), einsum(p.e, "bij,bjk->bik", {ba, bb}),
                  einsum(p.e, "ij->ji", {a}), einsum(p.e, "i,j->ij", {u, w}),
                  einsum(p.e, "ij, jk, kl -> il", {a, b, c}), einsum(p.e, "ij,jk", {a, b}),
                  einsum(p.e, "ij->", {a}), einsum(p.e, "ij,j->i", {a, w})},
                 {{2, 4}, {2, 1, 2}, {3, 2}, {2, 3}, {2, 1}, {2, 4}, {}, {2}});
  near(r[0], matmul_ref(av, bv, 2, 3, 4));
  std::vector<double> b0(bv.begin(), bv.begin() + 6), b1(bv.begin() + 6, bv.end());
  auto r0 = matmul_ref({1, 2, 3}, b0, 1, 3, 2), r1 = matmul_ref({4, 5, 6}, b1, 1, 3, 2);
  near(r[1], {r0[0], r0[1], r1[0], r1[1]});
  near(r[2], {1, 4, 2, 5, 3, 6});
  near(r[3], {1, 10, 100, 2, 20, 200});
  auto ab = matmul_ref(av, bv, 2, 3, 4);
  near(r[4], {ab[0] + ab[1] + ab[2] + ab[3], ab[4] + ab[5] + ab[6] + ab[7]});
  near(r[5], ab);  // implicit output: the letters used once, in order
  near(r[6], {21});
  near(r[7], {321, 654});
}

TEST_CASE("compose: einsum broadcasts ellipsis batch dims of size 1; contracts several letters",
          "[compose]") {
  Prog p;
  std::vector<double> av, bv;
  for (int i = 0; i < 12; ++i) av.push_back(i * 0.5 - 2);
  for (int i = 0; i < 18; ++i) bv.push_back((i % 5) - 1.5);
  Var* a = p.input("a", {2, 1, 2, 3}, av);
  Var* b = p.input("b", {3, 3, 2}, bv);
  Var* c = p.input("c", {2, 2, 3}, std::vector<double>(av.begin(), av.end()));
  auto rr = p.run({einsum(p.e, "...ij,...jk", {a, b}), einsum(p.e, "abc,abc->a", {c, c})},
                  {{2, 3, 2, 2}, {2}});
  auto& r = rr[0];
  double s0 = 0, s1 = 0;
  for (size_t i = 0; i < 6; ++i) s0 += av[i] * av[i], s1 += av[i + 6] * av[i + 6];
  near(rr[1], {s0, s1});  // two contracted letters and no free one on either side
  std::vector<double> want;
  for (size_t q = 0; q < 2; ++q)
    for (size_t c = 0; c < 3; ++c) {
      auto m = matmul_ref(std::vector<double>(av.begin() + static_cast<long>(q * 6),
                                              av.begin() + static_cast<long>(q * 6 + 6)),
                          std::vector<double>(bv.begin() + static_cast<long>(c * 6),
                                              bv.begin() + static_cast<long>(c * 6 + 6)),
                          2, 3, 2);
      want.insert(want.end(), m.begin(), m.end());
    }
  near(r, want);
}

TEST_CASE("compose: einsum diagonals, traces and ellipses; bad equations", "[compose]") {
  Prog p;
  Var* m = p.input("m", {3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Var* x = p.input("x", {2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Var* y = p.input("y", {3, 2}, {1, 0, 0, 1, 1, 1});
  auto r = p.run({einsum(p.e, "ii->i", {m}), einsum(p.e, "ii", {m}), einsum(p.e, "ii->", {m}),
                  einsum(p.e, "...ij,jk->...ik", {x, y}), einsum(p.e, "...ij,jk", {x, y}),
                  einsum(p.e, "b...->...b", {x})},
                 {{3}, {}, {}, {2, 2, 2}, {2, 2, 2}, {2, 3, 2}});
  near(r[0], {1, 5, 9});
  near(r[1], {15});
  near(r[2], {15});
  std::vector<double> want = {4, 5, 10, 11, 16, 17, 22, 23};  // [a + c, b + c] per row (a, b, c)
  near(r[3], want);
  near(r[4], want);
  near(r[5], {1, 7, 2, 8, 3, 9, 4, 10, 5, 11, 6, 12});
  REQUIRE_THROWS_WITH(einsum(p.e, "ij,jk->ik", {m}), Catch::Contains("has 2 operands"));
  REQUIRE_THROWS_WITH(einsum(p.e, "ijk->i", {m}), Catch::Contains("need 3"));
  REQUIRE_THROWS_WITH(einsum(p.e, "ij->q", {m}), Catch::Contains("'q' is not in any input"));
}

// ---- attention ----------------------------------------------------------------------------------

namespace {

// softmax(q k^T * scale + bias) v for one head: q [L, E], k [S, E], v [S, F], bias [L, S]
// (-inf hides); a row hidden everywhere gives 0.
std::vector<double> attend(const std::vector<double>& q, const std::vector<double>& k,
                           const std::vector<double>& v, size_t L, size_t S, size_t E, size_t F,
                           double scale, const std::vector<double>& bias) {
  std::vector<double> out(L * F, 0.0);
  for (size_t i = 0; i < L; ++i) {
    std::vector<double> s(S);
    double top = -INFINITY;
    for (size_t j = 0; j < S; ++j) {
      double d = 0;
      for (size_t c = 0; c < E; ++c) d += q[i * E + c] * k[j * E + c];
      s[j] = d * scale + (bias.empty() ? 0.0 : bias[i * S + j]);
      top = std::max(top, s[j]);
    }
    if (top == -INFINITY) continue;
    double sum = 0;
    for (double& t : s) sum += (t = std::exp(t - top));
    for (size_t j = 0; j < S; ++j)
      for (size_t f = 0; f < F; ++f) out[i * F + f] += s[j] / sum * v[j * F + f];
  }
  return out;
}

}  // namespace

TEST_CASE("compose: attention with causal masks aligned top-left and bottom-right", "[compose]") {
  Prog p;
  std::vector<double> qv = {1, 0, 0.5, 1}, kv = {1, 1, 0, 2, -1, 0.5}, vv = {1, 10, 100};
  Var* q = p.input("q", {1, 1, 2, 2}, qv);
  Var* k = p.input("k", {1, 1, 3, 2}, kv);
  Var* v = p.input("v", {1, 1, 3, 1}, vv);
  AttentionSpec plain, tl, br, split;
  tl.causal = true;
  br = tl;
  br.align = CausalAlign::BottomRight;
  split.split_scale = true;
  auto r = p.run({attention(p.e, q, k, v, plain).y, attention(p.e, q, k, v, tl).y,
                  attention(p.e, q, k, v, br).y, attention(p.e, q, k, v, split).y},
                 {{1, 1, 2, 1}});
  double sc = 1 / std::sqrt(2.0), ninf = -INFINITY;
  near(r[0], attend(qv, kv, vv, 2, 3, 2, 1, sc, {}));
  near(r[1], attend(qv, kv, vv, 2, 3, 2, 1, sc, {0, ninf, ninf, 0, 0, ninf}));
  near(r[2], attend(qv, kv, vv, 2, 3, 2, 1, sc, {0, 0, ninf, 0, 0, 0}));
  near(r[3], r[0]);
}

TEST_CASE("compose: attention with bool and additive masks, hidden rows, grouped heads, past",
          "[compose]") {
  Prog p;
  std::vector<double> qv = {1, 0, 0.5, 1, -1, 2, 0, 1}, kv = {1, 1, 0, 2, -1, 0.5},
                      vv = {1, 10, 100};
  Var* q = p.input("q", {1, 2, 2, 2}, qv);  // two query heads share one key / value head
  Var* k = p.input("k", {1, 1, 3, 2}, kv);
  Var* v = p.input("v", {1, 1, 3, 1}, vv);
  Var* bm = p.input("bm", {2, 3}, {1, 0, 1, 0, 0, 0}, DataType::Int32);
  Var* add = p.input("add", {2, 3}, {0.5, -1, 0, 0, 2, -INFINITY});
  AttentionSpec bs, as, ps;
  bs.mask = p.e.cast(bm, DataType::Bool);
  bs.scale = 0.5;
  as.mask = add;
  ps.past_key = p.e.slice_axis(k, 2, 0, 1);
  ps.past_value = p.e.slice_axis(v, 2, 0, 1);
  AttentionResult pr =
      attention(p.e, q, p.e.slice_axis(k, 2, 1, 3), p.e.slice_axis(v, 2, 1, 3), ps);
  auto r = p.run({attention(p.e, q, k, v, bs).y, attention(p.e, q, k, v, as).y, pr.y, pr.key},
                 {{1, 2, 2, 1}, {1, 2, 2, 1}, {1, 2, 2, 1}, {1, 1, 3, 2}});
  double ninf = -INFINITY, sc = 1 / std::sqrt(2.0);
  std::vector<double> q0(qv.begin(), qv.begin() + 4), q1(qv.begin() + 4, qv.end());
  auto both = [&](double s, const std::vector<double>& bias) {
    auto h0 = attend(q0, kv, vv, 2, 3, 2, 1, s, bias), h1 = attend(q1, kv, vv, 2, 3, 2, 1, s, bias);
    h0.insert(h0.end(), h1.begin(), h1.end());
    return h0;
  };
  near(r[0], both(0.5, {0, ninf, 0, ninf, ninf, ninf}));  // the second row is hidden: 0
  REQUIRE(r[0][1] == 0);
  near(r[1], both(sc, {0.5, -1, 0, 0, 2, ninf}));
  near(r[2], both(sc, {}));
  near(r[3], kv);
  Var* k3 = p.input("k3", {1, 3, 3, 2}, std::vector<double>(18, 0));
  REQUIRE_THROWS_WITH(attention(p.e, q, k3, k3, AttentionSpec{}), Catch::Contains("multiple"));
}

TEST_CASE("compose: attention with an extra additive bias after the mask and the causal bias",
          "[compose]") {
  Prog p;
  std::vector<double> qv = {1, 0, 0.5, 1}, kv = {1, 1, 0, 2, -1, 0.5}, vv = {1, 10, 100};
  Var* q = p.input("q", {1, 1, 2, 2}, qv);
  Var* k = p.input("k", {1, 1, 3, 2}, kv);
  Var* v = p.input("v", {1, 1, 3, 1}, vv);
  Var* add = p.input("add", {2, 3}, {0.5, -1, 0, 0, 2, 1});
  Var* pad = p.input("pad", {1, 3}, {0, 0, -INFINITY});  // the last key is padding
  AttentionSpec bs, all;
  bs.bias = pad;
  all.mask = add;
  all.causal = true;
  all.bias = pad;
  AttentionSpec hidden;
  hidden.bias = p.input("hid", {2, 3}, {0, 0, 0, -INFINITY, -INFINITY, -INFINITY});
  auto r = p.run({attention(p.e, q, k, v, bs).y, attention(p.e, q, k, v, all).y,
                  attention(p.e, q, k, v, hidden).y},
                 {{1, 1, 2, 1}, {1, 1, 2, 1}, {1, 1, 2, 1}});
  double sc = 1 / std::sqrt(2.0), ninf = -INFINITY;
  near(r[0], attend(qv, kv, vv, 2, 3, 2, 1, sc, {0, 0, ninf, 0, 0, ninf}));
  near(r[1], attend(qv, kv, vv, 2, 3, 2, 1, sc, {0.5, ninf, ninf, 0, 2, ninf}));
  near(r[2], attend(qv, kv, vv, 2, 3, 2, 1, sc, {0, 0, 0, ninf, ninf, ninf}));
  REQUIRE(r[2][1] == 0);  // a row the bias hides everywhere gives 0
}

// ---- recurrent layers and counted loops ---------------------------------------------------------

namespace {

std::vector<double> wave(size_t n, double phase) {
  std::vector<double> v;
  for (size_t i = 0; i < n; ++i) v.push_back(0.5 * std::sin(0.7 * static_cast<double>(i) + phase));
  return v;
}

double sigm(double v) { return 1 / (1 + std::exp(-v)); }

// A cell's canonical weights ([gates * H, I], [gates * H, H], biases) and a plain-loop reference.
struct Ref {
  RnnKind kind;
  size_t H, I, G;
  std::vector<double> wih, whh, bih, bhh;
  Ref(RnnKind k, size_t h, size_t in, double phase)
      : kind(k),
        H(h),
        I(in),
        G(k == RnnKind::Lstm  ? 4
          : k == RnnKind::Gru ? 3
                              : 1) {
    wih = wave(G * H * I, phase);
    whh = wave(G * H * H, phase + 1);
    bih = wave(G * H, phase + 2);
    bhh = wave(G * H, phase + 3);
  }
  RnnWeights weights() const {
    auto v = [](std::vector<int64_t> sh, const std::vector<double>& d) {
      return Value::from_doubles(DataType::Float32, std::move(sh), d);
    };
    int64_t gh = static_cast<int64_t>(G * H);
    return {v({gh, static_cast<int64_t>(I)}, wih),
            v({gh, static_cast<int64_t>(H)}, whh),
            v({gh}, bih),
            v({gh}, bhh),
            std::nullopt,
            std::nullopt};
  }
  // row r of W x
  static double dot(const std::vector<double>& w, size_t r, const std::vector<double>& x) {
    double s = 0;
    for (size_t j = 0; j < x.size(); ++j) s += w[r * x.size() + j] * x[j];
    return s;
  }
  // Runs xs [S][I] (batch 1) from (h, c); returns y [S][H] flattened (aligned with the input)
  // and leaves the final states in h, c. `after`: GRU resets after the projection.
  std::vector<double> run(const std::vector<std::vector<double>>& xs, std::vector<double>& h,
                          std::vector<double>& c, bool reverse, bool after = true) const {
    size_t S = xs.size();
    std::vector<double> y(S * H);
    for (size_t step = 0; step < S; ++step) {
      size_t t = reverse ? S - 1 - step : step;
      std::vector<double> xi(G * H), hh(G * H), nh(H), nc(H);
      for (size_t r = 0; r < G * H; ++r) {
        xi[r] = dot(wih, r, xs[t]) + bih[r];
        hh[r] = dot(whh, r, h) + bhh[r];
      }
      for (size_t u = 0; u < H; ++u) {
        if (kind == RnnKind::Lstm) {
          double gi = sigm(xi[u] + hh[u]), gf = sigm(xi[H + u] + hh[H + u]);
          double gg = std::tanh(xi[2 * H + u] + hh[2 * H + u]);
          double go = sigm(xi[3 * H + u] + hh[3 * H + u]);
          nc[u] = gf * c[u] + gi * gg;
          nh[u] = go * std::tanh(nc[u]);
        } else if (kind == RnnKind::Gru) {
          double r = sigm(xi[u] + hh[u]), z = sigm(xi[H + u] + hh[H + u]);
          double hn = hh[2 * H + u];
          if (!after) {  // W_hn (r * h) + b_hn
            std::vector<double> rh(H);
            for (size_t k = 0; k < H; ++k) rh[k] = sigm(xi[k] + hh[k]) * h[k];
            hn = dot(whh, 2 * H + u, rh) + bhh[2 * H + u];
          }
          double n = std::tanh(xi[2 * H + u] + (after ? r * hn : hn));
          nh[u] = (1 - z) * n + z * h[u];
        } else {
          nh[u] = std::tanh(xi[u] + hh[u]);
        }
      }
      h = nh;
      if (kind == RnnKind::Lstm) c = nc;
      for (size_t u = 0; u < H; ++u) y[t * H + u] = h[u];
    }
    return y;
  }
};

// a sequence [S, 1, I] as rows and flattened
const std::vector<std::vector<double>> kSeq = {{0.5, -1}, {1, 0.25}, {-0.5, 0.75}};
const std::vector<double> kSeqFlat = {0.5, -1, 1, 0.25, -0.5, 0.75};

}  // namespace

TEST_CASE("compose: LSTM both directions with initial states, by MIL's op and by loop",
          "[compose]") {
  Prog p;
  Var* x = p.input("x", {3, 1, 2}, kSeqFlat);
  Var* h0 = p.input("h0", {1, 2}, {0.1, -0.2});
  Var* c0 = p.input("c0", {1, 2}, {0.3, 0.05});
  Ref fw(RnnKind::Lstm, 2, 2, 0.0), bw(RnnKind::Lstm, 2, 2, 0.4);
  std::vector<Var*> outs;
  for (bool loop : {false, true}) {
    RnnLayerSpec s;
    s.by_loop = loop;
    auto f = rnn_layer(p.e, x, h0, c0, fw.weights(), s);
    s.reverse = true;
    auto b = rnn_layer(p.e, x, h0, c0, bw.weights(), s);
    outs.insert(outs.end(), {f.y, f.h, f.c, b.y, b.h, b.c});
  }
  auto r = p.run(outs);
  std::vector<double> hf = {0.1, -0.2}, cf = {0.3, 0.05}, hb = hf, cb = cf;
  auto yf = fw.run(kSeq, hf, cf, false), yb = bw.run(kSeq, hb, cb, true);
  for (size_t k : {0, 6}) {
    near(r[k], yf);
    near(r[k + 1], hf);
    near(r[k + 2], cf);
    near(r[k + 3], yb);
    near(r[k + 4], hb);
    near(r[k + 5], cb);
  }
}

TEST_CASE("compose: a bidirectional LSTM as one op matches the two directions", "[compose]") {
  Prog p;
  Var* x = p.input("x", {3, 1, 2}, kSeqFlat);
  Var* h0 = p.input("h0", {1, 4}, {0.1, -0.2, 0.2, 0.1});
  Var* c0 = p.input("c0", {1, 4}, {0.3, 0.05, -0.1, 0.4});
  Ref fw(RnnKind::Lstm, 2, 2, 0.0), bw(RnnKind::Lstm, 2, 2, 0.4);
  auto r = lstm_bidirectional(p.e, x, h0, c0, fw.weights(), bw.weights());
  auto v = p.run({r.y, r.h, r.c}, {{3, 1, 4}, {1, 4}, {1, 4}});
  std::vector<double> hf = {0.1, -0.2}, cf = {0.3, 0.05}, hb = {0.2, 0.1}, cb = {-0.1, 0.4};
  auto yf = fw.run(kSeq, hf, cf, false), yb = bw.run(kSeq, hb, cb, true);
  std::vector<double> y;
  for (size_t t = 0; t < 3; ++t) {
    y.insert(y.end(), yf.begin() + static_cast<long>(2 * t),
             yf.begin() + static_cast<long>(2 * t + 2));
    y.insert(y.end(), yb.begin() + static_cast<long>(2 * t),
             yb.begin() + static_cast<long>(2 * t + 2));
  }
  near(v[0], y);
  near(v[1], {hf[0], hf[1], hb[0], hb[1]});
  near(v[2], {cf[0], cf[1], cb[0], cb[1]});
}

TEST_CASE("compose: GRU resetting after (MIL op, loop) and before the projection, RNN",
          "[compose]") {
  Prog p(Target::iOS18);
  Var* x = p.input("x", {3, 1, 2}, kSeqFlat);
  Var* h0 = p.input("h0", {1, 2}, {0.1, -0.2});
  Ref g(RnnKind::Gru, 2, 2, 0.2), rn(RnnKind::RnnTanh, 2, 2, 0.9);
  RnnLayerSpec after, loop, before, rs;
  after.kind = loop.kind = before.kind = RnnKind::Gru;
  after.reverse = true;
  loop.by_loop = true;
  before.linear_before_reset = false;
  rs.kind = RnnKind::RnnTanh;
  rs.reverse = true;
  auto a = rnn_layer(p.e, x, h0, nullptr, g.weights(), after);
  auto l = rnn_layer(p.e, x, h0, nullptr, g.weights(), loop);
  auto b = rnn_layer(p.e, x, h0, nullptr, g.weights(), before);
  auto t = rnn_layer(p.e, x, h0, nullptr, rn.weights(), rs);
  REQUIRE(a.c == nullptr);
  auto r = p.run({a.y, a.h, l.y, l.h, b.y, t.y, t.h});
  std::vector<double> c, ha = {0.1, -0.2}, hl = ha, hb = ha, ht = ha;
  near(r[0], g.run(kSeq, ha, c, true));
  near(r[1], ha);
  near(r[2], g.run(kSeq, hl, c, false));
  near(r[3], hl);
  near(r[4], g.run(kSeq, hb, c, false, false));
  near(r[5], rn.run(kSeq, ht, c, true));
  near(r[6], ht);
  RnnLayerSpec bad = before;
  bad.by_loop = true;
  REQUIRE_THROWS_WITH(rnn_layer(p.e, x, h0, nullptr, g.weights(), bad),
                      Catch::Contains("resetting after"));
}

TEST_CASE("compose: gate orders and a counted loop carrying state", "[compose]") {
  Value w = Value::from_doubles(DataType::Float32, {4, 1}, {10, 20, 30, 40});  // ONNX [i, o, f, c]
  REQUIRE(reorder_gates(w, onnx_gate_order(RnnKind::Lstm)).to_doubles() ==
          std::vector<double>{10, 30, 40, 20});                      // [i, f, g, o]
  Value g = Value::from_doubles(DataType::Float32, {3}, {1, 2, 3});  // ONNX [z, r, h]
  REQUIRE(reorder_gates(g, onnx_gate_order(RnnKind::Gru)).to_doubles() ==
          std::vector<double>{2, 1, 3});  // [r, z, n]
  Prog p;
  Var* x = p.input("x", {2}, {1, 1});
  Var* n = p.e.cs(4, DataType::Int32);
  // x_{t+1} = x_t * 2 + t; a second value passes through unchanged
  auto outs = counted_loop(p.e, n, {x, p.e.f32(7)}, [&](Var* t, const std::vector<Var*>& v) {
    return std::vector<Var*>{
        p.e.bin("add", p.e.bin("mul", v[0], p.e.f32(2)), p.e.cast(t, DataType::Float32)), v[1]};
  });
  REQUIRE(outs.size() == 2);
  // a body returning a value made outside the loop, and a const
  Var* outer = p.e.bin("add", x, p.e.f32(3));
  auto more = counted_loop(p.e, n, {x, x}, [&](Var*, const std::vector<Var*>&) {
    return std::vector<Var*>{outer, p.e.c(Value::from_doubles(DataType::Float32, {2}, {5, 6}))};
  });
  auto r = p.run({outs[0], outs[1], more[0], more[1]});
  near(r[0], {27, 27});  // 1 -> 2 -> 5 -> 12 -> 27
  near(r[1], {7});
  near(r[2], {4, 4});
  near(r[3], {5, 6});
}
