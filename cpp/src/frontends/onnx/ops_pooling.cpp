// ONNX operators: pooling (MaxPool, AveragePool, LpPool, global pooling).
#include <cmath>
#include <limits>
#include <numeric>

#include "milkit/compose/norms.h"
#include "milkit/compose/windows.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

// ONNX's pool geometry for one node: the window (auto_pad resolved into begin / end pads), the
// input and output size per spatial dim (-1 where the input size is not known), and whether
// ceil_mode applies (explicit pads only).
struct PoolGeom {
  compose::Window w;
  std::vector<int64_t> in, out;
  bool ceil = false;
};

PoolGeom pool_geom(C& cv, const NodeProto& n, Var* x) {
  size_t sp = spatial_rank(cv, n, x);
  PoolGeom g;
  compose::Window& w = g.w;
  w.kernel = C::attr_ints(n, "kernel_shape");
  if (w.kernel.size() != sp) cv.fail(n, "kernel_shape needs " + std::to_string(sp) + " values");
  w.stride = C::attr_ints(n, "strides", std::vector<int64_t>(sp, 1));
  w.dilation = C::attr_ints(n, "dilations", std::vector<int64_t>(sp, 1));
  if (w.stride.size() != sp || w.dilation.size() != sp)
    cv.fail(n, "strides and dilations need one value per spatial dim");
  auto pads = C::attr_ints(n, "pads", std::vector<int64_t>(2 * sp, 0));
  if (pads.size() != 2 * sp) cv.fail(n, "pads needs two values per spatial dim");
  std::string ap = C::attr_string(n, "auto_pad", "NOTSET");
  g.ceil = ap == "NOTSET" && C::attr_int(n, "ceil_mode", 0) != 0;
  for (size_t i = 0; i < sp; ++i) {
    const Dim& d = C::shape(x)[2 + i];
    int64_t in = d->is_const() ? d->value() : -1;
    int64_t s = w.stride[i], ek = (w.kernel[i] - 1) * w.dilation[i] + 1;
    int64_t b = pads[i], e = pads[i + sp];
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      b = e = 0;
      if (in >= 0) {
        int64_t total = std::max<int64_t>(0, ((in + s - 1) / s - 1) * s + ek - in);
        b = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
        e = total - b;
      }
    } else if (ap == "VALID") {
      b = e = 0;
    }
    g.in.push_back(in);
    w.pad_begin.push_back(b);
    w.pad_end.push_back(e);
  }
  for (size_t i = 0; i < sp; ++i)
    g.out.push_back(g.in[i] >= 0 ? w.out_size(i, g.in[i], g.ceil) : -1);
  return g;
}

void pool(C& cv, const NodeProto& n, bool is_max) {
  Var* x = cv.in(n, 0);
  size_t sp = spatial_rank(cv, n, x);
  auto kernel = C::attr_ints(n, "kernel_shape");
  if (kernel.size() != sp) cv.fail(n, "kernel_shape needs " + std::to_string(sp) + " values");
  auto strides = C::attr_ints(n, "strides", std::vector<int64_t>(sp, 1));
  Padding p = padding(cv, n, sp);
  DataType dt = C::dtype(x);
  if (!is_float(dt)) x = cv.cast(x, DataType::Float32);  // MIL pools floats only
  if (C::wants(n, 1) || pool_needs_windows(cv, n, x)) {
    Var* idx = nullptr;
    Var* y = pool_by_windows(cv, n, x, is_max ? PoolKind::Max : PoolKind::Avg,
                             C::attr_int(n, "count_include_pad", 0) != 0,
                             C::wants(n, 1) ? &idx : nullptr);
    cv.out(n, 0, is_float(dt) ? y : cv.cast(y, dt));
    if (idx) cv.out(n, 1, idx);
    return;
  }
  std::vector<Arg> args = {C::arg("x", x),
                           C::arg_ints32("kernel_sizes", kernel),
                           C::arg_ints32("strides", strides),
                           C::arg_str("pad_type", p.type),
                           C::arg_ints32("pad", p.pad),
                           C::arg_bool("ceil_mode", C::attr_int(n, "ceil_mode", 0) != 0)};
  if (!is_max)
    args.push_back(
        C::arg_bool("exclude_padding_from_average", C::attr_int(n, "count_include_pad", 0) == 0));
  Var* y = cv.op(is_max ? "max_pool" : "avg_pool", std::move(args));
  cv.out(n, 0, is_float(dt) ? y : cv.cast(y, dt));
}

void global_pool(C& cv, const NodeProto& n, const char* reduce) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  std::vector<int64_t> axes;
  for (int i = 2; i < r; ++i) axes.push_back(i);
  cv.out(
      n, 0,
      cv.op(reduce, {C::arg("x", x), C::arg_ints32("axes", axes), C::arg_bool("keep_dims", true)}));
}

void max_pool(C& cv, const NodeProto& n) { pool(cv, n, true); }

void average_pool(C& cv, const NodeProto& n) { pool(cv, n, false); }

void global_average_pool(C& cv, const NodeProto& n) { global_pool(cv, n, "reduce_mean"); }

void global_max_pool(C& cv, const NodeProto& n) { global_pool(cv, n, "reduce_max"); }

void lp_pool(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  auto kernel = C::attr_ints(n, "kernel_shape");
  size_t sp = static_cast<size_t>(r - 2);
  if (kernel.size() != sp) cv.fail(n, "kernel_shape needs one value per spatial dim");
  double p = static_cast<double>(C::attr_int(n, "p", 2));
  if (pool_needs_windows(cv, n, x)) {
    DataType dt = C::dtype(x);
    Var* xp =
        cv.op("pow", {C::arg("x", cv.op("abs", {C::arg("x", x)})), C::arg("y", cv.cs(p, dt))});
    Var* sum = pool_by_windows(cv, n, xp, PoolKind::Sum, false);
    cv.out(n, 0, cv.op("pow", {C::arg("x", sum), C::arg("y", cv.cs(1.0 / p, dt))}));
    return;
  }
  auto pads = C::attr_ints(n, "pads", std::vector<int64_t>(2 * sp, 0));
  std::vector<int64_t> mp(2 * sp);
  for (size_t i = 0; i < sp; ++i) mp[2 * i] = pads[i], mp[2 * i + 1] = pads[i + sp];
  std::string ap = C::attr_string(n, "auto_pad", "NOTSET");
  std::string pt = ap == "SAME_UPPER"   ? "same"
                   : ap == "SAME_LOWER" ? "same_lower"
                   : ap == "VALID"      ? "valid"
                                        : "custom";
  if (pt != "custom") std::fill(mp.begin(), mp.end(), 0);
  DataType dt = C::dtype(x);
  Var* xp = cv.op("pow", {C::arg("x", cv.op("abs", {C::arg("x", x)})), C::arg("y", cv.cs(p, dt))});
  int64_t ksize = 1;
  for (auto k : kernel) ksize *= k;
  Var* avg =
      cv.op("avg_pool",
            {C::arg("x", xp), C::arg_ints32("kernel_sizes", kernel),
             C::arg_ints32("strides", C::attr_ints(n, "strides", std::vector<int64_t>(sp, 1))),
             C::arg_str("pad_type", pt), C::arg_ints32("pad", mp),
             C::arg_bool("exclude_padding_from_average", false),
             C::arg_bool("ceil_mode", C::attr_int(n, "ceil_mode", 0) != 0)});
  Var* sum = binary(cv, "mul", avg, cv.cs(static_cast<double>(ksize), dt));
  cv.out(n, 0, cv.op("pow", {C::arg("x", sum), C::arg("y", cv.cs(1.0 / p, dt))}));
}

}  // namespace

bool pool_needs_windows(C& cv, const NodeProto& n, Var* x) {
  PoolGeom g = pool_geom(cv, n, x);
  for (size_t i = 0; i < g.in.size(); ++i) {
    if (g.w.dilation[i] != 1) return true;
    if (g.ceil && g.in[i] >= 0) {
      // MIL keeps a last window that starts in the end padding; ONNX drops it
      int64_t span = g.in[i] + g.w.pad_begin[i] + g.w.pad_end[i] - g.w.kernel[i];
      if ((span + g.w.stride[i] - 1) / g.w.stride[i] + 1 != g.out[i]) return true;
    }
  }
  return false;
}

Var* pool_by_windows(C& cv, const NodeProto& n, Var* x, PoolKind kind, bool count_include_pad,
                     Var** indices) {
  PoolGeom g = pool_geom(cv, n, x);
  for (size_t i = 0; i < g.in.size(); ++i)
    if (g.in[i] < 0 || g.out[i] < 1)
      cv.fail(n, "pooling with dilations, ceil_mode or indices needs the spatial size to be known");
  compose::PoolSpec s;
  s.window = g.w;
  s.kind = kind;
  s.ceil_mode = g.ceil;
  s.count_include_pad = count_include_pad;
  s.index_order = C::attr_int(n, "storage_order", 0) != 0 ? compose::IndexOrder::ColumnMajor
                                                          : compose::IndexOrder::RowMajor;
  return compose::pool_by_taps(cv.em, x, s, indices);
}

void register_pooling(OpTable& t) {
  t.on("MaxPool", 1, max_pool);
  t.on("AveragePool", 1, average_pool);
  t.on("GlobalAveragePool", 1, global_average_pool);
  t.on("GlobalMaxPool", 1, global_max_pool);
  t.on("LpPool", 1, lp_pool);
}

}  // namespace onnx_detail
}  // namespace milkit
