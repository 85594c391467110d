// ATen sorting and searching: sort, argsort, topk, kthvalue, median, bucketize, searchsorted.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

// kthvalue / median: the k-th smallest along a dim (median: the lower middle one, k =
// (n - 1) / 2 + 1, as torch), from an ascending topk; values and their indices
std::pair<Var*, Var*> kth(C& cv, const json& n, Var* x, int64_t d, int64_t k, bool keep) {
  Dim len = C::shape(x)[static_cast<size_t>(d)];
  if (len->is_const() && (k < 1 || k > len->value()))
    cv.fail(n, "k = " + std::to_string(k) + " is out of range for a dim of size " + std::to_string(len->value()));
  auto outs = cv.ops("topk", {C::a("x", x), C::ai32("k", k), C::ai32("axis", d), C::abool("ascending", true)});
  SliceSpec last;
  last.start = k - 1;
  last.end = k;
  Var* v = slice_axis(cv, n, outs[0], d, last);
  Var* i = slice_axis(cv, n, outs[1], d, last);
  if (!keep) {
    v = cv.op("squeeze", {C::a("x", v), C::aints32("axes", {d})});
    i = cv.op("squeeze", {C::a("x", i), C::aints32("axes", {d})});
  }
  return {v, i};
}

// bucketize(x, boundaries): the number of boundaries below x (right=False: b < x; right=True:
// b <= x), which is the index torch returns for sorted boundaries
void bucketize(C& cv, const json& n) {
  Var* b = cv.tensor(n, "boundaries");
  Var* x = C::is_number(n, "self") ? cv.scalar_or_tensor(n, "self", C::dtype(b)) : cv.tensor(n, "self");
  DataType dt = C::promote(x, b);
  Var* xe = trailing_axis(cv, cv.cast(x, dt));
  Var* bb = cv.cast(b, dt);
  bool right = cv.bo(n, "right", false);
  cv.out(n, count_true(cv, bin(cv, right ? "less_equal" : "less", bb, xe)));
}

// searchsorted(sorted_sequence, values): per row of the sequence's leading dims, the number of
// sequence elements below each value (side "right" / right=True counts equal ones too)
void searchsorted(C& cv, const json& n) {
  if (C::has(n, "sorter")) cv.fail(n, "searchsorted with a sorter is not supported");
  Var* s = cv.tensor(n, "sorted_sequence");
  Var* v = C::is_number(n, "self") ? cv.scalar_or_tensor(n, "self", C::dtype(s)) : cv.tensor(n, "self");
  DataType dt = C::promote(s, v);
  s = cv.cast(s, dt);
  v = cv.cast(v, dt);
  bool right = cv.bo(n, "right", false) || cv.s(n, "side", "left") == "right";
  int rs = cv.rank(n, s);
  Var* se = rs > 1 ? cv.op("expand_dims", {C::a("x", s), C::aints32("axes", {-2})}) : s;  // (..., 1, N)
  Var* cmp = bin(cv, right ? "less_equal" : "less", se, trailing_axis(cv, v));           // (..., M, N)
  cv.out(n, count_true(cv, cmp));
}

void topk_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  int64_t d = cv.axis(n, cv.i(n, "dim", -1), cv.rank(n, x));
  const json* ka = C::arg(n, "k");
  Dim k = ka ? cv.sym_dim(*ka) : cv.ctx().constant(1);
  bool asc = !cv.bo(n, "largest", true);
  if (k->is_const()) {
    cv.outs(n, cv.ops("topk", {C::a("x", x), C::ai32("k", k->value()), C::ai32("axis", d),
                               C::abool("ascending", asc)}));
    return;
  }
  // a k known at run time only: the whole axis sorted (MIL's k is a const), then its first k
  Dim len = C::shape(x)[static_cast<size_t>(d)];
  std::vector<Var*> outs;
  if (len->is_const() || cv.target() >= Target::iOS17) {
    outs = cv.ops("topk", {C::a("x", x), C::ai32("k", len->is_const() ? len->value() : -1),
                           C::ai32("axis", d), C::abool("ascending", asc)});
  } else {
    Var* idx = cv.op("argsort", {C::a("x", x), C::ai32("axis", d), C::abool("ascending", asc)});
    outs = {gather_any(cv, "gather_along_axis", x, {C::a("indices", idx), C::ai32("axis", d)}),
            idx};
  }
  Var* kv = cv.dim_var(k);
  for (Var*& o : outs) o = slice_axis(cv, n, o, d, SliceSpec{}, nullptr, kv);
  cv.outs(n, outs);
}

void kthvalue(C& cv, const json& n) {
  Var* x = self(cv, n);
  int r = cv.rank(n, x);
  if (r == 0) x = cv.op("reshape", {C::a("x", x), C::aints32("shape", {1})});
  int64_t d = cv.axis(n, cv.i(n, "dim", -1), std::max(r, 1));
  auto [v, i] = kth(cv, n, x, d, cv.i(n, "k", 1), cv.bo(n, "keepdim", false) || r == 0);
  if (r == 0) {
    v = cv.op("reshape", {C::a("x", v), C::aints32("shape", {})});
    i = cv.op("reshape", {C::a("x", i), C::aints32("shape", {})});
  }
  cv.outs(n, {v, i});
}

void median_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  if (!C::has(n, "dim")) {
    // median.default: of every element, a 0-d result
    auto sh = C::static_shape(x);
    if (!sh) cv.fail(n, "median of all elements needs a known shape");
    int64_t total = 1;
    for (int64_t v : *sh) total *= v;
    if (total == 0) cv.fail(n, "median of an empty tensor");
    Var* flat = cv.op("reshape", {C::a("x", x), C::aints32("shape", {-1})});
    auto [v, i] = kth(cv, n, flat, 0, (total - 1) / 2 + 1, false);
    (void)i;
    cv.out(n, v);
    return;
  }
  int r = cv.rank(n, x);
  if (r == 0) x = cv.op("reshape", {C::a("x", x), C::aints32("shape", {1})});
  int64_t d = cv.axis(n, cv.i(n, "dim", 0), std::max(r, 1));
  Dim len = C::shape(x)[static_cast<size_t>(d)];
  if (!len->is_const()) cv.fail(n, "median along a symbolic dim is not supported");
  auto [v, i] = kth(cv, n, x, d, (len->value() - 1) / 2 + 1, cv.bo(n, "keepdim", false) || r == 0);
  if (r == 0) {
    v = cv.op("reshape", {C::a("x", v), C::aints32("shape", {})});
    i = cv.op("reshape", {C::a("x", i), C::aints32("shape", {})});
  }
  cv.outs(n, {v, i});
}

void sort_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  int64_t d = cv.axis(n, cv.i(n, "dim", -1), cv.rank(n, x));
  Var* idx = cv.op("argsort", {C::a("x", x), C::ai32("axis", d), C::abool("ascending", !cv.bo(n, "descending", false))});
  Var* v = gather_any(cv, "gather_along_axis", x, {C::a("indices", idx), C::ai32("axis", d)});
  cv.outs(n, {v, idx});
}

void argsort(C& cv, const json& n) {
  Var* x = self(cv, n);
  int64_t d = cv.axis(n, cv.i(n, "dim", -1), cv.rank(n, x));
  cv.out(n, cv.op("argsort", {C::a("x", x), C::ai32("axis", d), C::abool("ascending", !cv.bo(n, "descending", false))}));
}

}  // namespace

void register_sorting(OpTable& t) {
  t.on("aten.bucketize", bucketize);
  t.on("aten.searchsorted", searchsorted);
  t.on("aten.topk", topk_op);
  t.on("aten.kthvalue", kthvalue);
  t.on("aten.median", median_op);
  t.on("aten.sort", sort_op);
  t.on("aten.argsort", argsort);
}

}  // namespace torch_detail
}  // namespace milkit
