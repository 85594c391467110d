// ATen linear algebra: linear, matmul family, addmm / baddbmm, dot, bilinear, einsum, outer / kron, cross, distances, cosine similarity.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "milkit/compose/einsum.h"
#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

// ---- distances -------------------------------------------------------------------------------
// the p-norm distances between the rows of x1 [..., P, M] and x2 [..., R, M]: [..., P, R]. p = 2
// with `use_mm`: torch's _euclidean_dist, |a|^2 + |b|^2 - 2 a.b clamped at 1e-30 before the sqrt;
// otherwise from the differences (p = 0 counts the nonzero ones)
Var* pair_dist(C& cv, const json& n, Var* x1, Var* x2, double p, bool use_mm) {
  if (p < 0) cv.fail(n, "p must be >= 0");
  if (!is_float(C::dtype(x1))) x1 = cv.cast(x1, DataType::Float32);
  DataType dt = C::dtype(x1);
  x2 = cv.cast(x2, dt);
  int r1 = cv.rank(n, x1), r2 = cv.rank(n, x2);
  if (r1 < 2 || r2 < 2) cv.fail(n, "inputs must have rank >= 2");
  if (p == 2 && use_mm) {
    Var* n1 = reduce_op(cv, "reduce_sum", bin(cv, "mul", x1, x1), {r1 - 1}, true);    // [..., P, 1]
    Var* n2 = reduce_op(cv, "reduce_sum", bin(cv, "mul", x2, x2), {r2 - 1}, false);   // [..., R]
    n2 = cv.op("expand_dims", {C::a("x", n2), C::aints32("axes", {r2 - 2})});          // [..., 1, R]
    Var* mm = matmul(cv, x1, x2, true);
    Var* d = bin(cv, "sub", bin(cv, "add", n1, n2), bin(cv, "mul", mm, cv.cs(2, dt)));
    d = bin(cv, "maximum", d, cv.cs(1e-30, dt));
    return cv.op("sqrt", {C::a("x", d)});
  }
  Var* a = cv.op("expand_dims", {C::a("x", x1), C::aints32("axes", {r1 - 1})});  // [..., P, 1, M]
  Var* b = cv.op("expand_dims", {C::a("x", x2), C::aints32("axes", {r2 - 2})});  // [..., 1, R, M]
  Var* d = cv.op("abs", {C::a("x", bin(cv, "sub", a, b))});
  int ax = std::max(r1, r2);  // the last axis of the difference
  if (p == 0) return reduce_op(cv, "reduce_sum", cv.cast(bin(cv, "not_equal", d, cv.cs(0, dt)), dt), {ax}, false);
  if (p == 1) return reduce_op(cv, "reduce_sum", d, {ax}, false);
  if (p == 2) return cv.op("sqrt", {C::a("x", reduce_op(cv, "reduce_sum", bin(cv, "mul", d, d), {ax}, false))});
  if (std::isinf(p)) return reduce_op(cv, "reduce_max", d, {ax}, false);
  Var* s = reduce_op(cv, "reduce_sum", bin(cv, "pow", d, cv.cs(p, dt)), {ax}, false);
  return bin(cv, "pow", s, cv.cs(1.0 / p, dt));
}

// torch.cdist / _cdist_forward: compute_mode None / 0 uses the matmul form for p = 2 when either
// side has more than 25 rows, 1 always, 2 never
void cdist(C& cv, const json& n) {
  Var* x1 = cv.tensor(n, "x1");
  Var* x2 = cv.tensor(n, "x2");
  double p = cv.f(n, "p", 2);
  int64_t mode = cv.opt_i(n, "compute_mode").value_or(0);
  bool mm = mode == 1;
  if (mode == 0) {
    Dim P = C::shape(x1)[static_cast<size_t>(cv.rank(n, x1) - 2)], R = C::shape(x2)[static_cast<size_t>(cv.rank(n, x2) - 2)];
    // symbolic counts: torch guarded the export on one side of 25 (their range tells which)
    mm = cv.ctx().range(P).hi > 25 || cv.ctx().range(R).hi > 25;
  }
  cv.out(n, pair_dist(cv, n, x1, x2, p, mm));
}

// F.pdist: the distances of the row pairs i < j of [N, M], row-major ([N (N - 1) / 2])
void pdist(C& cv, const json& n) {
  Var* x = cv.tensor(n, "self");
  if (cv.rank(n, x) != 2) cv.fail(n, "input must have rank 2");
  int64_t N = known_dim(cv, n, x, 0, "the number of rows");
  if (N < 2) cv.fail(n, "pdist of fewer than 2 rows (an empty result) is not supported");
  Var* d = pair_dist(cv, n, x, x, cv.f(n, "p", 2), false);
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = i + 1; j < N; ++j) idx.push_back(i * N + j);
  Var* flat = cv.op("reshape", {C::a("x", d), C::aints32("shape", {N * N})});
  cv.out(n, cv.op("gather", {C::a("x", flat), C::a("indices", cv.ci(idx)), C::ai32("axis", 0)}));
}

// ---- cosine_similarity, bilinear, _trilinear ---------------------------------------------------
// torch's cosine_similarity: both broadcast, each divided by its norm along `dim` (clamped at
// eps), the products summed along `dim`
void cosine_similarity(C& cv, const json& n) {
  Var* x1 = cv.tensor(n, "x1");
  Var* x2 = cv.tensor(n, "x2");
  DataType dt = C::promote(x1, x2);
  if (!is_float(dt)) dt = DataType::Float32;
  x1 = cv.cast(x1, dt);
  x2 = cv.cast(x2, dt);
  // broadcast each to the common shape (a norm over a broadcast axis counts the repeats)
  Var* b1 = bin(cv, "mul", x1, cv.op("fill_like", {C::a("ref_tensor", x2), C::a("value", Value::scalar_float(dt, 1))}));
  Var* b2 = bin(cv, "mul", x2, cv.op("fill_like", {C::a("ref_tensor", x1), C::a("value", Value::scalar_float(dt, 1))}));
  int r = cv.rank(n, b1);
  int64_t d = cv.axis(n, cv.i(n, "dim", 1), r);
  Var* eps = cv.cs(cv.f(n, "eps", 1e-8), dt);
  Var* n1 = bin(cv, "maximum", reduce_op(cv, "reduce_l2_norm", b1, {d}, true), eps);
  Var* n2 = bin(cv, "maximum", reduce_op(cv, "reduce_l2_norm", b2, {d}, true), eps);
  Var* pr = bin(cv, "mul", bin(cv, "real_div", b1, n1), bin(cv, "real_div", b2, n2));
  cv.out(n, reduce_op(cv, "reduce_sum", pr, {d}, false));
}

// F.bilinear: y[..., o] = sum_ij x1[..., i] W[o, i, j] x2[..., j] + b[o], as
// (x1 @ W') reshaped [..., O, J] times x2 [..., 1, J] summed over J (W' = W as [I, O * J])
Var* bilinear_form(C& cv, const json& n, Var* x1, Var* x2, Var* w) {
  DataType dt = C::dtype(x1);
  x2 = cv.cast(x2, dt);
  w = cv.cast(w, dt);
  if (cv.rank(n, w) != 3) cv.fail(n, "weight must be [out, in1, in2]");
  int64_t O = known_dim(cv, n, w, 0, "the output features"), I = known_dim(cv, n, w, 1, "in1"), J = known_dim(cv, n, w, 2, "in2");
  int r = cv.rank(n, x1);
  Var* wt = cv.op("reshape", {C::a("x", cv.op("transpose", {C::a("x", w), C::aints32("perm", {1, 0, 2})})), C::aints32("shape", {I, O * J})});
  Var* t = matmul(cv, x1, wt);  // [..., O * J]
  std::vector<std::pair<bool, int64_t>> pieces;
  for (int k = 0; k + 1 < r; ++k) pieces.push_back({true, k});
  pieces.push_back({false, O});
  pieces.push_back({false, J});
  t = cv.op("reshape", {C::a("x", t), C::a("shape", cv.shape_of_pieces(x1, pieces))});
  Var* e = cv.op("expand_dims", {C::a("x", x2), C::aints32("axes", {cv.rank(n, x2) - 1})});
  return reduce_op(cv, "reduce_sum", bin(cv, "mul", t, e), {r}, false);
}

void bilinear(C& cv, const json& n) {
  Var* x1 = cv.tensor(n, "input1");
  Var* bias = cv.opt_tensor(n, "bias");
  if (!is_float(C::dtype(x1))) x1 = cv.cast(x1, DataType::Float32);
  Var* y = bilinear_form(cv, n, x1, cv.tensor(n, "input2"), cv.tensor(n, "weight"));
  if (bias) y = bin(cv, "add", y, cv.cast(bias, C::dtype(x1)));
  cv.out(n, y);
}

// _trilinear: i1, i2, i3 each unsqueezed at their expand dims (in order), multiplied
// (broadcasting) and summed over sumdim. F.bilinear's decomposition (x1 [B, I], W [O, I, J],
// x2 [B, J], expands [1, 3], [0], [1, 2], sum [2, 3]) goes through a matmul instead of the
// [B, O, I, J] product
void trilinear(C& cv, const json& n) {
  std::vector<Var*> in{cv.tensor(n, "i1"), cv.tensor(n, "i2"), cv.tensor(n, "i3")};
  const char* ex[] = {"expand1", "expand2", "expand3"};
  DataType dt = C::dtype(in[0]);
  if (!is_float(dt)) dt = DataType::Float32;
  if (cv.ints(n, "expand1", {}) == std::vector<int64_t>{1, 3} && cv.ints(n, "expand2", {}) == std::vector<int64_t>{0} &&
      cv.ints(n, "expand3", {}) == std::vector<int64_t>{1, 2} && cv.ints(n, "sumdim", {}) == std::vector<int64_t>{2, 3} &&
      cv.rank(n, in[0]) == 2 && cv.rank(n, in[1]) == 3 && cv.rank(n, in[2]) == 2) {
    cv.out(n, bilinear_form(cv, n, cv.cast(in[0], dt), in[2], in[1]));
    return;
  }
  Var* prod = nullptr;
  for (size_t q = 0; q < 3; ++q) {
    Var* v = cv.cast(in[q], dt);
    for (int64_t a : cv.ints(n, ex[q], {})) {
      int rr = cv.rank(n, v) + 1;
      v = cv.op("expand_dims", {C::a("x", v), C::aints32("axes", {cv.axis(n, a, rr)})});
    }
    prod = prod ? bin(cv, "mul", prod, v) : v;
  }
  auto sd = cv.ints(n, "sumdim", {});
  int r = cv.rank(n, prod);
  for (auto& a : sd) a = cv.axis(n, a, r);
  cv.out(n, sd.empty() ? prod : reduce_op(cv, "reduce_sum", prod, sd, false));
}

// ---- einsum ---------------------------------------------------------------------------------
// torch.einsum: the operands cast to the output dtype, then compose::einsum
void einsum(C& cv, const json& n) {
  DataType dt = cv.out_dtype(n).value_or(DataType::Float32);
  std::vector<Var*> ops;
  for (Var* v : cv.tensors(n, "tensors")) ops.push_back(cv.cast(v, dt));
  cv.out(n, compose::einsum(cv.e, cv.s(n, "equation", ""), ops));
}

void linear_op(C& cv, const json& n) {
  Var* x = input(cv, n);
  Var* w = cv.tensor(n, "weight");
  Var* b = cv.opt_tensor(n, "bias");
  DataType dt = C::dtype(x);
  if (is_const(w) && (!b || is_const(b)) && cv.rank(n, w) == 2) {
    std::vector<Arg> args{C::a("x", x), C::a("weight", cv.cast(w, dt))};
    if (b) args.push_back(C::a("bias", cv.cast(b, dt)));
    cv.out(n, cv.op("linear", std::move(args)));
    return;
  }
  Var* y = matmul(cv, x, cv.cast(w, dt), true);
  if (b) y = bin(cv, "add", y, cv.cast(b, dt));
  cv.out(n, y);
}

// beta * bias + alpha * y (addmm / baddbmm; beta 0 ignores the bias)
Var* add_scaled_bias(C& cv, const json& n, Var* y, Var* bias, DataType dt) {
  double beta = cv.f(n, "beta", 1), alpha = cv.f(n, "alpha", 1);
  if (alpha != 1) y = bin(cv, "mul", y, cv.cs(alpha, dt));
  if (beta != 0) {
    Var* bb = cv.cast(bias, dt);
    if (beta != 1) bb = bin(cv, "mul", bb, cv.cs(beta, dt));
    y = bin(cv, "add", y, bb);
  }
  return y;
}

void addmm(C& cv, const json& n) {
  Var* bias = cv.tensor(n, "self");
  Var* m1 = cv.tensor(n, "mat1");
  Var* m2 = cv.tensor(n, "mat2");
  DataType dt = C::dtype(m1);
  cv.out(n, add_scaled_bias(cv, n, matmul(cv, m1, cv.cast(m2, dt)), bias, dt));
}

void mm(C& cv, const json& n) {
  Var* x = cv.tensor(n, "self");
  cv.out(n, matmul(cv, x, cv.cast(cv.tensor(n, "mat2"), C::dtype(x))));
}

void matmul_op(C& cv, const json& n) {
  Var* x = cv.tensor(n, "self");
  cv.out(n, matmul(cv, x, cv.cast(cv.tensor(n, "other"), C::dtype(x))));
}

void baddbmm(C& cv, const json& n) {
  Var* bias = cv.tensor(n, "self");
  Var* b1 = cv.tensor(n, "batch1");
  DataType dt = C::dtype(b1);
  cv.out(n, add_scaled_bias(cv, n, matmul(cv, b1, cv.cast(cv.tensor(n, "batch2"), dt)), bias, dt));
}

void dot_op(C& cv, const json& n) {
  Var* x = cv.tensor(n, "self");
  Var* y = cv.cast(cv.tensor(n, "tensor"), C::dtype(x));
  cv.out(n, cv.op("reduce_sum", {C::a("x", bin(cv, "mul", x, y)), C::aints32("axes", {0}), C::abool("keep_dims", false)}));
}

// matrix @ vector
void mv_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  Var* v = cv.tensor(n, "vec");
  if (cv.rank(n, x) != 2 || cv.rank(n, v) != 1)
    cv.fail(n, "mv takes a 2-d matrix and a 1-d vector");
  cv.out(n, matmul(cv, x, cv.cast(v, C::dtype(x))));
}

// sum over `dim` of x * y (broadcast; real tensors, so no conjugate)
void linalg_vecdot(C& cv, const json& n) {
  auto [x, y] = cv.promoted(n, cv.tensor(n, "x"), cv.tensor(n, "y"));
  int r = std::max(cv.rank(n, x), cv.rank(n, y));
  if (r == 0) cv.fail(n, "linalg_vecdot needs tensors of at least 1 dim");
  int64_t d = cv.axis(n, cv.i(n, "dim", -1), r);
  cv.out(n, reduce_op(cv, "reduce_sum", bin(cv, "mul", x, y), {d}, false));
}

void outer_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  Var* y = cv.tensor(n, "vec2");
  if (cv.rank(n, x) != 1 || cv.rank(n, y) != 1) cv.fail(n, "outer takes two 1-d tensors");
  x = cv.op("expand_dims", {C::a("x", x), C::aints32("axes", {1})});
  y = cv.op("expand_dims", {C::a("x", y), C::aints32("axes", {0})});
  cv.out(n, times(cv, n, x, y));
}

void kron_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  Var* y = cv.tensor(n, "other");
  auto xs = C::static_shape(x), ys = C::static_shape(y);
  if (!xs || !ys) cv.fail(n, "kron of tensors with symbolic sizes is not supported");
  size_t R = std::max(xs->size(), ys->size());
  xs->insert(xs->begin(), R - xs->size(), 1);
  ys->insert(ys->begin(), R - ys->size(), 1);
  std::vector<int64_t> xi, yi, out;
  for (size_t k = 0; k < R; ++k) {
    xi.push_back((*xs)[k]), xi.push_back(1);
    yi.push_back(1), yi.push_back((*ys)[k]);
    out.push_back((*xs)[k] * (*ys)[k]);
  }
  Var* p = times(cv, n, reshape(cv, x, cv.ci(xi)), reshape(cv, y, cv.ci(yi)));
  cv.out(n, reshape(cv, p, cv.ci(out)));
}

// cross(a, b, dim): a[i+1] b[i+2] - a[i+2] b[i+1] along the size-3 dim (a and b broadcast);
// aten.cross without dim takes the first dim of size 3
void linalg_cross(C& cv, const json& n) {
  Var* a = self(cv, n);
  Var* b = cv.tensor(n, "other");
  int r = cv.rank(n, a);
  if (cv.rank(n, b) != r) cv.fail(n, "cross: the inputs must have the same number of dims");
  int64_t d;
  if (C::has(n, "dim")) {
    d = cv.axis(n, cv.i(n, "dim", -1), r);
  } else if (n.value("target", std::string()).find("linalg_cross") != std::string::npos) {
    d = r - 1;
  } else {
    d = -1;
    for (int k = 0; k < r && d < 0; ++k) {
      Dim s = C::shape(a)[static_cast<size_t>(k)];
      if (s->is_const() && s->value() == 3) d = k;
    }
    if (d < 0) cv.fail(n, "cross: no dim of size 3");
  }
  std::tie(a, b) = cv.promoted(n, a, b);
  auto rot = [&](Var* v, std::vector<int64_t> order) {
    return gather_any(cv, "gather", v, {C::a("indices", Value::int_list(order)), C::ai32("axis", d)});
  };
  Var* p = bin(cv, "mul", rot(a, {1, 2, 0}), rot(b, {2, 0, 1}));
  Var* q = bin(cv, "mul", rot(a, {2, 0, 1}), rot(b, {1, 2, 0}));
  cv.out(n, bin(cv, "sub", p, q));
}

}  // namespace

void register_linear(OpTable& t) {
  t.on("aten.linear", linear_op);
  t.on("aten.addmm", addmm);
  t.on({"aten.mm", "aten.bmm"}, mm);
  t.on("aten.matmul", matmul_op);
  t.on("aten.baddbmm", baddbmm);
  t.on("aten.dot", dot_op);
  t.on("aten.mv", mv_op);
  t.on("aten.linalg_vecdot", linalg_vecdot);
  t.on("aten.cdist", cdist);
  t.on("aten._cdist_forward", cdist);
  t.on("aten.pdist", pdist);
  t.on("aten._pdist_forward", pdist);
  t.on("aten.cosine_similarity", cosine_similarity);
  t.on("aten.bilinear", bilinear);
  t.on("aten._trilinear", trilinear);
  t.on("aten.outer", outer_op);
  t.on("aten.kron", kron_op);
  t.on({"aten.linalg_cross", "aten.cross"}, linalg_cross);
  t.on("aten.einsum", einsum);
}

}  // namespace torch_detail
}  // namespace milkit
