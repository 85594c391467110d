// ATen reductions: sum, mean, prod, amax / amin, max / min (values and indices), argmax / argmin,
// var / std (with correction), any / all, logsumexp, vector norms.
#include <algorithm>
#include <cmath>

#include "converter.h"

namespace milkit {
namespace torch_detail {

namespace {

using C = Converter;

Var* self(C& cv, const json& n) { return C::has(n, "self") ? cv.tensor(n, "self") : cv.tensor(n, "input"); }

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
  t[name] = [mil, float_only](C& cv, const json& n) {
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
  };
}

Var* as_int_for_bool(C& cv, Var* x) { return C::dtype(x) == DataType::Bool ? cv.cast(x, DataType::Int32) : x; }

void minmax(OpTable& t, const char* name, const char* mil, const char* arg) {
  // max.dim / min.dim: (values, indices); max / min: over everything; max.other: elementwise
  t[name] = [mil, arg](C& cv, const json& n) {
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
  };
}

void arg(OpTable& t, const char* name, const char* mil) {
  t[name] = [mil](C& cv, const json& n) {
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
  };
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

}  // namespace

void register_reduction(OpTable& t) {
  sum_like(t, "aten.sum", "reduce_sum", false);
  sum_like(t, "aten.mean", "reduce_mean", true);
  sum_like(t, "aten.prod", "reduce_prod", false);
  sum_like(t, "aten.logsumexp", "reduce_log_sum_exp", true);
  t["aten.amax"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    bool b = C::dtype(x) == DataType::Bool;
    Var* v = reduce(cv, "reduce_max", as_int_for_bool(cv, x), axes_of(cv, n, x), cv.bo(n, "keepdim", false));
    cv.out(n, b ? cv.cast(v, DataType::Bool) : v);
  };
  t["aten.amin"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    bool b = C::dtype(x) == DataType::Bool;
    Var* v = reduce(cv, "reduce_min", as_int_for_bool(cv, x), axes_of(cv, n, x), cv.bo(n, "keepdim", false));
    cv.out(n, b ? cv.cast(v, DataType::Bool) : v);
  };
  // aminmax: (amin, amax) along `dim`, or over everything (keepdim: every axis kept as 1)
  t["aten.aminmax"] = [](C& cv, const json& n) {
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
  };
  minmax(t, "aten.max", "reduce_max", "reduce_argmax");
  minmax(t, "aten.min", "reduce_min", "reduce_argmin");
  arg(t, "aten.argmax", "reduce_argmax");
  arg(t, "aten.argmin", "reduce_argmin");
  t["aten.var"] = [](C& cv, const json& n) { cv.out(n, variance(cv, n, self(cv, n)).first); };
  t["aten.std"] = [](C& cv, const json& n) { cv.out(n, cv.op("sqrt", {C::a("x", variance(cv, n, self(cv, n)).first)})); };
  t["aten.var_mean"] = [](C& cv, const json& n) {
    auto [v, m] = variance(cv, n, self(cv, n));
    cv.outs(n, {v, m});
  };
  t["aten.std_mean"] = [](C& cv, const json& n) {
    auto [v, m] = variance(cv, n, self(cv, n));
    cv.outs(n, {cv.op("sqrt", {C::a("x", v)}), m});
  };
  auto anyall = [](bool any) {
    return [any](C& cv, const json& n) {
      Var* x = self(cv, n);
      Var* b = C::dtype(x) == DataType::Bool ? x : cv.op("not_equal", {C::a("x", x), C::a("y", cv.cs(0, C::dtype(x)))});
      Var* i = cv.cast(b, DataType::Int32);
      std::vector<int64_t> axes = axes_of(cv, n, x);
      Var* r = reduce(cv, any ? "reduce_max" : "reduce_min", i, axes, cv.bo(n, "keepdim", false));
      cv.out(n, cv.cast(r, DataType::Bool));
    };
  };
  t["aten.any"] = anyall(true);
  t["aten.all"] = anyall(false);
  t["aten.linalg_vector_norm"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    if (!is_float(C::dtype(x))) x = cv.cast(x, DataType::Float32);
    double ord = cv.f(n, "ord", 2);
    auto axes = axes_of(cv, n, x);
    bool keep = cv.bo(n, "keepdim", false);
    if (ord == 2) cv.out(n, reduce(cv, "reduce_l2_norm", x, axes, keep));
    else if (ord == 1) cv.out(n, reduce(cv, "reduce_l1_norm", x, axes, keep));
    else if (std::isinf(ord)) cv.out(n, reduce(cv, ord > 0 ? "reduce_max" : "reduce_min", cv.op("abs", {C::a("x", x)}), axes, keep));
    else {
      Var* p = cv.op("pow", {C::a("x", cv.op("abs", {C::a("x", x)})), C::a("y", cv.cs(ord, C::dtype(x)))});
      Var* s = reduce(cv, "reduce_sum", p, axes, keep);
      cv.out(n, cv.op("pow", {C::a("x", s), C::a("y", cv.cs(1.0 / ord, C::dtype(x)))}));
    }
  };
  t["aten.norm"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    if (!is_float(C::dtype(x))) x = cv.cast(x, DataType::Float32);
    double p = cv.f(n, "p", 2);
    auto axes = axes_of(cv, n, x);
    bool keep = cv.bo(n, "keepdim", false);
    if (p == 2) cv.out(n, reduce(cv, "reduce_l2_norm", x, axes, keep));
    else if (p == 1) cv.out(n, reduce(cv, "reduce_l1_norm", x, axes, keep));
    else cv.fail(n, "norm with p=" + std::to_string(p) + " is not supported");
  };
}

}  // namespace torch_detail
}  // namespace milkit
