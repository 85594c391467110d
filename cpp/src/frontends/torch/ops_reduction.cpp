// ATen reductions: sum / mean / prod / logsumexp, max / min and their indices, any / all, variance and standard deviation, norms, cumulative scans, diff.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "milkit/compose/scan.h"
#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

// torch's cumulative op along `dim` as a compose scan (a 0-d tensor takes dim 0 / -1)
compose::ScanSpec scan_spec(C& cv, const json& n, Var* x) {
  compose::ScanSpec s;
  s.axis = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
  return s;
}

// cummax / cummin: values and indices by compose::cumextreme (later entries win ties)
void cum_extreme(C& cv, const json& n, bool is_max) {
  Var* x = self(cv, n);
  auto [y, idx] = compose::cumextreme(cv.e, x, scan_spec(cv, n, x), is_max);
  if (auto od = cv.out_dtype(n)) y = cv.cast(y, *od);
  cv.out(n, y, 0);
  cv.out(n, idx, 1);
}

// the reduced axes: `dim` (an int or a list; absent / empty: every axis)
std::vector<int64_t> axes_of(C& cv, const json& n, Var* x, const char* name = "dim") {
  int r = cv.rank(n, x);
  std::vector<int64_t> d = C::has(n, name) ? cv.ints(n, name) : std::vector<int64_t>{};
  if (d.empty())
    for (int k = 0; k < r; ++k) d.push_back(k);
  for (auto& v : d) v = cv.axis(n, v, r);
  return d;
}

Var* reduce(C& cv, const char* op, Var* x, const std::vector<int64_t>& axes, bool keep) {
  if (axes.empty()) return cv.op("identity", {C::a("x", x)});
  return cv.op(op, {C::a("x", x), C::aints32("axes", axes), C::abool("keep_dims", keep)});
}

void sum_like(OpTable& t, const char* name, const char* mil, bool float_only) {
  t.on(name, [mil, float_only](C& cv, const json& n) {
    Var* x = self(cv, n);
    if (auto dt = cv.dtype_arg(n, "dtype")) x = cv.cast(x, *dt);
    else if (auto od = cv.out_dtype(n)) x = cv.cast(x, *od);
    if (C::dtype(x) == DataType::Bool) x = cv.cast(x, DataType::Int32);
    if (float_only && !is_float(C::dtype(x))) x = cv.cast(x, DataType::Float32);
    if (cv.rank(n, x) == 0) {
      cv.out(n, cv.op("identity", {C::a("x", x)}));
      return;
    }
    cv.out(n, reduce(cv, mil, x, axes_of(cv, n, x), cv.bo(n, "keepdim", false)));
  });
}

Var* as_int_for_bool(C& cv, Var* x) { return C::dtype(x) == DataType::Bool ? cv.cast(x, DataType::Int32) : x; }

void minmax(OpTable& t, const char* name, const char* mil, const char* arg) {
  // max.dim / min.dim: (values, indices); max / min: over everything; max.other: elementwise
  t.on(name, [mil, arg](C& cv, const json& n) {
    Var* x = self(cv, n);
    if (C::has(n, "other")) {
      Var* y = cv.tensor(n, "other");
      DataType dt = C::promote(x, y);
      cv.out(n, cv.op(std::string(mil) == "reduce_max" ? "maximum" : "minimum", {C::a("x", cv.cast(x, dt)), C::a("y", cv.cast(y, dt))}));
      return;
    }
    bool is_bool = C::dtype(x) == DataType::Bool;
    Var* xi = as_int_for_bool(cv, x);
    if (!C::has(n, "dim")) {
      Var* v = reduce(cv, mil, xi, axes_of(cv, n, xi), false);
      cv.out(n, is_bool ? cv.cast(v, DataType::Bool) : v);
      return;
    }
    int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
    bool keep = cv.bo(n, "keepdim", false);
    Var* v = reduce(cv, mil, xi, {d}, keep);
    if (is_bool) v = cv.cast(v, DataType::Bool);
    Var* idx = cv.op(arg, {C::a("x", xi), C::ai32("axis", d), C::abool("keep_dims", keep)});
    cv.outs(n, {v, idx});
  });
}

void arg(OpTable& t, const char* name, const char* mil) {
  t.on(name, [mil](C& cv, const json& n) {
    Var* x = as_int_for_bool(cv, self(cv, n));
    bool keep = cv.bo(n, "keepdim", false);
    if (!C::has(n, "dim")) {
      Var* flat = cv.op("reshape", {C::a("x", x), C::aints32("shape", {-1})});
      Var* r = cv.op(mil, {C::a("x", flat), C::ai32("axis", 0), C::abool("keep_dims", false)});
      if (keep) {
        std::vector<int64_t> ones(static_cast<size_t>(cv.rank(n, x)), 1);
        r = cv.op("reshape", {C::a("x", r), C::aints32("shape", ones)});
      }
      cv.out(n, r);
      return;
    }
    int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
    cv.out(n, cv.op(mil, {C::a("x", x), C::ai32("axis", d), C::abool("keep_dims", keep)}));
  });
}

// var with torch's correction (unbiased=True is correction 1); returns (var, mean)
std::pair<Var*, Var*> variance(C& cv, const json& n, Var* x) {
  if (!is_float(C::dtype(x))) x = cv.cast(x, DataType::Float32);
  auto axes = axes_of(cv, n, x);
  bool keep = cv.bo(n, "keepdim", false);
  double corr = 1;
  if (C::has(n, "correction")) corr = cv.f(n, "correction", 1);
  else if (C::has(n, "unbiased")) corr = cv.bo(n, "unbiased", true) ? 1 : 0;
  DataType dt = C::dtype(x);
  Var* mean = reduce(cv, "reduce_mean", x, axes, true);
  Var* d = cv.op("sub", {C::a("x", x), C::a("y", mean)});
  Var* ss = reduce(cv, "reduce_sum", cv.op("mul", {C::a("x", d), C::a("y", d)}), axes, keep);
  // N: the product of the reduced dims
  Var* cnt;
  bool known = true;
  int64_t N = 1;
  for (auto a : axes) {
    Dim s = C::shape(x)[static_cast<size_t>(a)];
    if (!s->is_const()) known = false;
    else N *= s->value();
  }
  if (known) {
    cnt = cv.cs(std::max<double>(static_cast<double>(N) - corr, 0), dt);
  } else {
    std::vector<Dim> ds;
    for (auto a : axes) ds.push_back(C::shape(x)[static_cast<size_t>(a)]);
    Var* nn = cv.cast(cv.dim_var(cv.ctx().product(ds)), dt);
    cnt = cv.op("sub", {C::a("x", nn), C::a("y", cv.cs(corr, dt))});
  }
  Var* var = cv.op("real_div", {C::a("x", ss), C::a("y", cnt)});
  if (!keep) mean = cv.op("squeeze", {C::a("x", mean), C::aints32("axes", axes)});
  return {var, mean};
}

void anyall(C& cv, const json& n, bool any) {
  Var* x = self(cv, n);
  Var* b = C::dtype(x) == DataType::Bool ? x : cv.op("not_equal", {C::a("x", x), C::a("y", cv.cs(0, C::dtype(x)))});
  Var* i = cv.cast(b, DataType::Int32);
  std::vector<int64_t> axes = axes_of(cv, n, x);
  Var* r = reduce(cv, any ? "reduce_max" : "reduce_min", i, axes, cv.bo(n, "keepdim", false));
  cv.out(n, cv.cast(r, DataType::Bool));
}

void cumsum(C& cv, const json& n) {
  Var* x = self(cv, n);
  if (auto dt = cv.dtype_arg(n, "dtype")) x = cv.cast(x, *dt);
  else if (auto od = cv.out_dtype(n)) x = cv.cast(x, *od);
  cv.out(n, compose::cumsum(cv.e, x, scan_spec(cv, n, x)));
}

// Running products and log-sum-exps along a dim of known length: compose's log-step scans
// (products group differently from torch's left-to-right loop: last-bit differences in float)
void cumprod(C& cv, const json& n) {
  Var* x = self(cv, n);
  if (auto dt = cv.dtype_arg(n, "dtype")) x = cv.cast(x, *dt);
  else if (auto od = cv.out_dtype(n)) x = cv.cast(x, *od);
  if (C::dtype(x) == DataType::Bool) x = cv.cast(x, DataType::Int32);
  cv.out(n, compose::cumprod(cv.e, x, scan_spec(cv, n, x)));
}

void logcumsumexp(C& cv, const json& n) {
  Var* x = self(cv, n);
  if (!is_float(C::dtype(x))) x = cv.cast(x, DataType::Float32);
  cv.out(n, compose::logcumsumexp(cv.e, x, scan_spec(cv, n, x)));
}

void cummax(C& cv, const json& n) { cum_extreme(cv, n, true); }

void cummin(C& cv, const json& n) { cum_extreme(cv, n, false); }

// diff(x, n, dim, prepend, append): [prepend, x, append] along dim, then n times x[1:] - x[:-1]
// (bool: logical_xor, as torch)
void diff(C& cv, const json& n) {
  Var* x = self(cv, n);
  int r = cv.rank(n, x);
  if (r == 0) cv.fail(n, "diff needs at least one dim");
  int64_t d = cv.axis(n, cv.i(n, "dim", -1), r);
  int64_t times = cv.i(n, "n", 1);
  if (times < 0) cv.fail(n, "diff order n must be non-negative, got " + std::to_string(times));
  std::vector<Var*> parts;
  for (const char* side : {"prepend", "self", "append"}) {
    Var* p = std::string(side) == "self" ? x : cv.opt_tensor(n, side);
    if (!p) continue;
    if (cv.rank(n, p) != r) cv.fail(n, std::string("diff: '") + side + "' must have the rank of the input");
    parts.push_back(p);
  }
  if (parts.size() > 1) {
    parts = promote_all(cv, parts, C::dtype(x));
    x = cv.op("concat", {values_arg(parts), C::ai32("axis", d)});
  }
  bool is_bool = C::dtype(x) == DataType::Bool;
  for (int64_t k = 0; k < times; ++k) {
    SliceSpec hi, lo;
    hi.start = 1;
    lo.end = -1;
    Var* a = slice_axis(cv, n, x, d, hi);
    Var* b = slice_axis(cv, n, x, d, lo);
    x = bin(cv, is_bool ? "logical_xor" : "sub", a, b);
  }
  cv.out(n, times == 0 ? cv.op("identity", {C::a("x", x)}) : x);
}

void amax(C& cv, const json& n) {
  Var* x = self(cv, n);
  bool b = C::dtype(x) == DataType::Bool;
  Var* v = reduce(cv, "reduce_max", as_int_for_bool(cv, x), axes_of(cv, n, x), cv.bo(n, "keepdim", false));
  cv.out(n, b ? cv.cast(v, DataType::Bool) : v);
}

void amin(C& cv, const json& n) {
  Var* x = self(cv, n);
  bool b = C::dtype(x) == DataType::Bool;
  Var* v = reduce(cv, "reduce_min", as_int_for_bool(cv, x), axes_of(cv, n, x), cv.bo(n, "keepdim", false));
  cv.out(n, b ? cv.cast(v, DataType::Bool) : v);
}

// aminmax: (amin, amax) along `dim`, or over everything (keepdim: every axis kept as 1)
void aminmax(C& cv, const json& n) {
  Var* x = self(cv, n);
  bool b = C::dtype(x) == DataType::Bool;
  Var* xi = as_int_for_bool(cv, x);
  int r = cv.rank(n, x);
  bool keep = cv.bo(n, "keepdim", false);
  std::vector<int64_t> axes;
  if (auto d = cv.opt_i(n, "dim")) axes.push_back(cv.axis(n, *d, std::max(r, 1)));
  else
    for (int k = 0; k < r; ++k) axes.push_back(k);
  if (r == 0) axes.clear();  // a 0-d tensor is its own min and max
  Var* lo = reduce(cv, "reduce_min", xi, axes, keep);
  Var* hi = reduce(cv, "reduce_max", xi, axes, keep);
  if (b) {
    lo = cv.cast(lo, DataType::Bool);
    hi = cv.cast(hi, DataType::Bool);
  }
  cv.outs(n, {lo, hi});
}

void var_op(C& cv, const json& n) { cv.out(n, variance(cv, n, self(cv, n)).first); }

void std_op(C& cv, const json& n) { cv.out(n, cv.op("sqrt", {C::a("x", variance(cv, n, self(cv, n)).first)})); }

void var_mean(C& cv, const json& n) {
  auto [v, m] = variance(cv, n, self(cv, n));
  cv.outs(n, {v, m});
}

void std_mean(C& cv, const json& n) {
  auto [v, m] = variance(cv, n, self(cv, n));
  cv.outs(n, {cv.op("sqrt", {C::a("x", v)}), m});
}

void any_op(C& cv, const json& n) { anyall(cv, n, true); }

void all_op(C& cv, const json& n) { anyall(cv, n, false); }

// The `ord`-norm of self over the node's dims (float; an integer input is cast to fp32). Orders
// other than 1, 2 and +-inf are computed by pow / sum / pow only where `any_order` is set.
void vector_norm(C& cv, const json& n, double ord, bool any_order) {
  Var* x = self(cv, n);
  if (!is_float(C::dtype(x))) x = cv.cast(x, DataType::Float32);
  auto axes = axes_of(cv, n, x);
  bool keep = cv.bo(n, "keepdim", false);
  if (ord == 2) return cv.out(n, reduce(cv, "reduce_l2_norm", x, axes, keep));
  if (ord == 1) return cv.out(n, reduce(cv, "reduce_l1_norm", x, axes, keep));
  if (!any_order) cv.fail(n, "norm with p=" + std::to_string(ord) + " is not supported");
  Var* ax = cv.op("abs", {C::a("x", x)});
  if (std::isinf(ord)) return cv.out(n, reduce(cv, ord > 0 ? "reduce_max" : "reduce_min", ax, axes, keep));
  Var* p = cv.op("pow", {C::a("x", ax), C::a("y", cv.cs(ord, C::dtype(x)))});
  Var* s = reduce(cv, "reduce_sum", p, axes, keep);
  cv.out(n, cv.op("pow", {C::a("x", s), C::a("y", cv.cs(1.0 / ord, C::dtype(x)))}));
}

void linalg_vector_norm(C& cv, const json& n) { vector_norm(cv, n, cv.f(n, "ord", 2), true); }

void norm_op(C& cv, const json& n) { vector_norm(cv, n, cv.f(n, "p", 2), false); }

}  // namespace

void register_reduction(OpTable& t) {
  t.on("aten.cumsum", cumsum);
  t.on("aten.cumprod", cumprod);
  t.on("aten.logcumsumexp", logcumsumexp);
  t.on("aten.cummax", cummax);
  t.on("aten.cummin", cummin);
  t.on("aten.diff", diff);
  t.on("aten.amax", amax);
  t.on("aten.amin", amin);
  t.on("aten.aminmax", aminmax);
  t.on("aten.var", var_op);
  t.on("aten.std", std_op);
  t.on("aten.var_mean", var_mean);
  t.on("aten.std_mean", std_mean);
  t.on("aten.any", any_op);
  t.on("aten.all", all_op);
  t.on("aten.linalg_vector_norm", linalg_vector_norm);
  t.on("aten.norm", norm_op);
  sum_like(t, "aten.sum", "reduce_sum", false);
  sum_like(t, "aten.mean", "reduce_mean", true);
  sum_like(t, "aten.prod", "reduce_prod", false);
  sum_like(t, "aten.logsumexp", "reduce_log_sum_exp", true);
  minmax(t, "aten.max", "reduce_max", "reduce_argmax");
  minmax(t, "aten.min", "reduce_min", "reduce_argmin");
  arg(t, "aten.argmax", "reduce_argmax");
  arg(t, "aten.argmin", "reduce_argmin");
}

}  // namespace torch_detail
}  // namespace milkit
