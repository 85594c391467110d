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

// The float input of a norm: the node's `dtype` argument, else an integer input as fp32
Var* norm_input(C& cv, const json& n) {
  Var* x = self(cv, n);
  if (auto dt = cv.dtype_arg(n, "dtype")) x = cv.cast(x, *dt);
  if (!is_float(C::dtype(x))) x = cv.cast(x, DataType::Float32);
  return x;
}

// (sum |x|^p)^(1/p) over `axes`, as torch computes it (under FLOAT16 the fp16 pass rescales the
// powers by the largest |x|: common::add_fp16_cast's scale_power_sum)
Var* p_norm(C& cv, Var* x, double p, const std::vector<int64_t>& axes, bool keep) {
  DataType dt = C::dtype(x);
  Var* q = cv.op("pow", {C::a("x", cv.op("abs", {C::a("x", x)})), C::a("y", cv.cs(p, dt))});
  return cv.op("pow",
               {C::a("x", reduce(cv, "reduce_sum", q, axes, keep)), C::a("y", cv.cs(1.0 / p, dt))});
}

// The vector `ord`-norm of x over `axes` (torch.linalg.vector_norm): 2 and 1 by reduce_l2_norm /
// reduce_l1_norm, +-inf by the largest / smallest |x|, 0 by the count of non-zeros, others by p_norm
Var* vector_norm_of(C& cv, Var* x, double ord, const std::vector<int64_t>& axes, bool keep) {
  if (axes.empty()) return cv.op("abs", {C::a("x", x)});
  if (ord == 2) return reduce(cv, "reduce_l2_norm", x, axes, keep);
  if (ord == 1) return reduce(cv, "reduce_l1_norm", x, axes, keep);
  if (std::isinf(ord))
    return reduce(cv, ord > 0 ? "reduce_max" : "reduce_min", cv.op("abs", {C::a("x", x)}), axes,
                  keep);
  if (ord == 0) {
    Var* nz =
        cv.cast(cv.op("not_equal", {C::a("x", x), C::a("y", cv.cs(0, C::dtype(x)))}), C::dtype(x));
    return reduce(cv, "reduce_sum", nz, axes, keep);
  }
  return p_norm(cv, x, ord, axes, keep);
}

// The matrix `ord`-norm of x over the two `axes` (torch.linalg.matrix_norm): "fro", 1 / -1 (the
// largest / smallest column sum of |x|), inf / -inf (row sums); 2, -2 and "nuc" need singular
// values
Var* matrix_norm_of(C& cv, const json& n, Var* x, const std::string& ord,
                    const std::vector<int64_t>& axes, bool keep) {
  if (axes.size() != 2 || axes[0] == axes[1]) cv.fail(n, "a matrix norm needs two different dims");
  if (ord == "fro") return reduce(cv, "reduce_l2_norm", x, axes, keep);
  if (ord == "2" || ord == "-2" || ord == "nuc")
    cv.fail(n, "matrix norm with ord=" + ord +
                   " needs singular values, and MIL has no singular value decomposition (ords "
                   "'fro', 1, -1, inf and -inf convert)");
  bool cols = ord == "1" || ord == "-1";
  bool largest = ord == "1" || ord == "inf";
  if (!cols && ord != "inf" && ord != "-inf")
    cv.fail(n, "matrix norm with ord=" + ord + " is not defined");
  Var* sums = reduce(cv, "reduce_sum", cv.op("abs", {C::a("x", x)}), {axes[cols ? 0 : 1]}, true);
  return reduce(cv, largest ? "reduce_max" : "reduce_min", sums, axes, keep);
}

// A numeric matrix ord as matrix_norm_of names it ("1", "-1", "inf", "-inf", "2", "-2", or the
// number)
std::string matrix_ord_name(double ord) {
  if (std::isinf(ord)) return ord > 0 ? "inf" : "-inf";
  if (ord == std::floor(ord) && std::fabs(ord) < 1e9)
    return std::to_string(static_cast<int64_t>(ord));
  return std::to_string(ord);
}

void linalg_vector_norm(C& cv, const json& n) {
  Var* x = norm_input(cv, n);
  cv.out(n,
         vector_norm_of(cv, x, cv.f(n, "ord", 2), axes_of(cv, n, x), cv.bo(n, "keepdim", false)));
}

// aten.norm: p (a number, default 2) over `dim` (default every axis); p "fro" is the 2-norm
void norm_op(C& cv, const json& n) {
  Var* x = norm_input(cv, n);
  const json* p = C::arg(n, "p");
  double ord = 2;
  if (p && p->contains("as_string")) {
    std::string s = cv.s(n, "p", "fro");
    if (s != "fro")
      cv.fail(n, "norm with p='" + s +
                     "' needs singular values, and MIL has no singular value decomposition");
  } else {
    ord = cv.f(n, "p", 2);
  }
  cv.out(n, vector_norm_of(cv, x, ord, axes_of(cv, n, x), cv.bo(n, "keepdim", false)));
}

// torch.linalg.norm (both overloads): no ord: the 2-norm over `dim` (every axis when absent);
// else a vector norm for one dim, a matrix norm for two (no dim: the input's one or two dims)
void linalg_norm(C& cv, const json& n) {
  Var* x = norm_input(cv, n);
  int r = cv.rank(n, x);
  bool keep = cv.bo(n, "keepdim", false);
  const json* o = C::arg(n, "ord");
  auto axes = axes_of(cv, n, x);
  if (!o) return cv.out(n, reduce(cv, "reduce_l2_norm", x, axes, keep));
  bool is_str = o->contains("as_string");
  if (!C::has(n, "dim") && r != 1 && r != 2)
    cv.fail(n, "linalg.norm with an ord and no dim needs a 1-D or 2-D input, got rank " +
                   std::to_string(r));
  if (axes.size() == 2)
    return cv.out(
        n, matrix_norm_of(cv, n, x,
                          is_str ? cv.s(n, "ord", "fro") : matrix_ord_name(cv.f(n, "ord", 2)), axes,
                          keep));
  if (axes.size() != 1) cv.fail(n, "linalg.norm with an ord needs one or two dims");
  if (is_str) cv.fail(n, "linalg.norm with ord '" + cv.s(n, "ord", "") + "' needs two dims");
  cv.out(n, vector_norm_of(cv, x, cv.f(n, "ord", 2), axes, keep));
}

// torch.linalg.matrix_norm (numeric and string ord; dims default to the last two)
void linalg_matrix_norm(C& cv, const json& n) {
  Var* x = norm_input(cv, n);
  int r = cv.rank(n, x);
  if (r < 2) cv.fail(n, "linalg.matrix_norm needs at least two dims");
  std::vector<int64_t> axes = cv.ints(n, "dim", {-2, -1});
  for (auto& a : axes) a = cv.axis(n, a, r);
  const json* o = C::arg(n, "ord");
  std::string ord = !o                         ? "fro"
                    : o->contains("as_string") ? cv.s(n, "ord", "fro")
                                               : matrix_ord_name(cv.f(n, "ord", 2));
  cv.out(n, matrix_norm_of(cv, n, x, ord, axes, cv.bo(n, "keepdim", false)));
}

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
  t.on("aten.linalg_norm", linalg_norm);
  t.on("aten.linalg_matrix_norm", linalg_matrix_norm);
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
