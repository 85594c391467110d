// ATen shape operators: view / reshape, permute / transpose, squeeze / unsqueeze, flatten, expand, concatenation, splitting, repeat / tile, flip / roll / rot90, pixel and channel shuffles, unfold, as_strided, triangles, diagonals.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>

#include "milkit/compose/arith.h"
#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

void view(C& cv, const json& n) {
  Var* x = self(cv, n);
  std::vector<Dim> ds = cv.dims(n, C::has(n, "size") ? "size" : "shape");
  // torch's result shape with at most one symbolic size: that size is the -1 (a const shape, no
  // shape ops; MIL infers the size, and consecutive reshapes can merge)
  auto names = C::output_names(n);
  if (auto ms = names.empty() ? std::nullopt : cv.meta_shape(names[0]); ms && ms->size() == ds.size()) {
    size_t nsym = 0, at = 0;
    for (size_t k = 0; k < ms->size(); ++k)
      if (!(*ms)[k]->is_const()) nsym++, at = k;
    if (nsym <= 1) {
      ds = *ms;
      if (nsym == 1) ds[at] = cv.ctx().constant(-1);
    } else if (x->type()->has_rank()) {
      // several symbolic sizes, the same as x's apart from unit dims: squeeze / expand_dims
      auto non_unit = [](const std::vector<Dim>& v, std::vector<int64_t>& units) {
        std::vector<Dim> r;
        for (size_t k = 0; k < v.size(); ++k) {
          if (v[k]->is_const() && v[k]->value() == 1) units.push_back(static_cast<int64_t>(k));
          else r.push_back(v[k]);
        }
        return r;
      };
      std::vector<int64_t> in_units, out_units;
      if (non_unit(C::shape(x), in_units) == non_unit(*ms, out_units)) {
        Var* y = x;
        if (!in_units.empty()) y = cv.op("squeeze", {C::a("x", y), C::aints32("axes", in_units)});
        if (!out_units.empty()) y = cv.op("expand_dims", {C::a("x", y), C::aints32("axes", out_units)});
        cv.out(n, y == x ? cv.op("identity", {C::a("x", x)}) : y);
        return;
      }
    }
  }
  // a single -1 stays -1 (MIL infers it); symbolic sizes are read from x or computed
  cv.out(n, reshape(cv, x, size_shape(cv, ds, x)));
}

// split sizes along `dim` of x for torch's split(split_size)
std::vector<int64_t> split_sizes(C& cv, const json& n, Var* x, int64_t dim, int64_t each) {
  Dim d = C::shape(x)[static_cast<size_t>(dim)];
  if (!d->is_const()) cv.fail(n, "splitting a symbolic dim (" + d->str() + ") into chunks of " + std::to_string(each) + " is not supported");
  int64_t L = d->value();
  if (each <= 0) cv.fail(n, "split size must be positive");
  std::vector<int64_t> r;
  for (int64_t s = 0; s < L; s += each) r.push_back(std::min(each, L - s));
  if (r.empty()) r.push_back(0);
  return r;
}

void split_out(C& cv, const json& n, Var* x, int64_t dim, const std::vector<int64_t>& sizes) {
  if (sizes.size() == 1) {
    cv.out(n, cv.op("identity", {C::a("x", x)}), 0);
    return;
  }
  auto parts = cv.ops("split", {C::a("x", x), C::aints32("split_sizes", sizes), C::ai32("axis", dim)});
  cv.outs(n, parts);
}

// the mask (j - i <= k) over the last two dims of x (tril) or (j - i >= k) (triu)
Var* tri_mask(C& cv, const json& n, Var* x, int64_t k, bool lower) {
  int r = cv.rank(n, x);
  if (r < 2) cv.fail(n, "tril/triu need rank >= 2");
  Dim H = C::shape(x)[static_cast<size_t>(r - 2)], W = C::shape(x)[static_cast<size_t>(r - 1)];
  return compose::tri_mask(cv.e, cv.dim_var(H), cv.dim_var(W),
                           cv.cs(static_cast<double>(k), DataType::Int32), lower);
}

Var* transpose2(C& cv, Var* x, int r, int64_t a, int64_t b) {
  std::vector<int64_t> p(static_cast<size_t>(r));
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[static_cast<size_t>(a)], p[static_cast<size_t>(b)]);
  return cv.op("transpose", {C::a("x", x), C::aints32("perm", p)});
}

// the 2-d x's diagonal `k` (static sizes): gather_nd at (i, i + k) / (i - k, i)
Var* diag_of(C& cv, const json& n, Var* x, int64_t k) {
  auto s = C::static_shape(x);
  if (!s || s->size() != 2) cv.fail(n, "the diagonal of a matrix with symbolic sizes is not supported");
  int64_t r0 = k >= 0 ? 0 : -k, c0 = k >= 0 ? k : 0;
  std::vector<int64_t> ij;
  for (int64_t i = r0, j = c0; i < (*s)[0] && j < (*s)[1]; ++i, ++j) ij.push_back(i), ij.push_back(j);
  if (ij.empty()) cv.fail(n, "diagonal " + std::to_string(k) + " of a " + std::to_string((*s)[0]) + "x" + std::to_string((*s)[1]) +
                             " matrix is empty, which Core ML cannot hold");
  int64_t len = static_cast<int64_t>(ij.size() / 2);
  return gather_any(cv, "gather_nd", x, {C::a("indices", Value::from_ints(DataType::Int32, {len, 2}, ij))});
}

// diag(x, k): a 1-d x placed on diagonal k of an (n + |k|) square matrix; a 2-d x's diagonal k
void diag(C& cv, const json& n) {
  Var* x = self(cv, n);
  int64_t k = cv.i(n, "diagonal", 0);
  int r = cv.rank(n, x);
  if (r == 2) {
    cv.out(n, diag_of(cv, n, x, k));
    return;
  }
  if (r != 1) cv.fail(n, "diag takes a 1-d or 2-d tensor");
  Dim len = C::shape(x)[0];
  Var* rng;
  if (len->is_const()) {
    rng = range_of(cv, cv.ctx().constant(len->value() + std::abs(k)));
  } else {
    Var* end = bin(cv, "add", cv.dim_var(len), cv.cs(static_cast<double>(std::abs(k)), DataType::Int32));
    rng = cv.op("range_1d", {C::a("end", end), C::a("start", Value::scalar_int(DataType::Int32, 0)),
                             C::a("step", Value::scalar_int(DataType::Int32, 1))});
  }
  Var* i = cv.op("expand_dims", {C::a("x", rng), C::aints32("axes", {1})});
  Var* j = cv.op("expand_dims", {C::a("x", rng), C::aints32("axes", {0})});
  Var* on = bin(cv, "equal", bin(cv, "sub", j, i), cv.cs(static_cast<double>(k), DataType::Int32));
  // the value of row i (k >= 0) or column j (k < 0): x at that index (clamped: off the diagonal
  // it is not used)
  Var* at = bin(cv, "minimum", rng, bin(cv, "sub", cv.dim_var(len), cv.cs(1, DataType::Int32)));
  Var* v = gather_any(cv, "gather", x, {C::a("indices", at), C::ai32("axis", 0)});
  v = cv.op("expand_dims", {C::a("x", v), C::aints32("axes", {k >= 0 ? 1 : 0})});
  cv.out(n, cv.op("select", {C::a("cond", on), C::a("a", v), C::a("b", cv.cs(0, C::dtype(x)))}));
}

// tensor_split's pieces as [start, end) along an axis of known size L
void split_bounds_out(C& cv, const json& n, Var* x, int64_t d, const std::vector<std::pair<int64_t, int64_t>>& b) {
  std::vector<Var*> outs;
  int64_t L = C::shape(x)[static_cast<size_t>(d)]->value();
  for (auto [s, e] : b) {
    if (e <= s && L > 0) cv.fail(n, "tensor_split gives an empty piece, which Core ML cannot hold");
    if (s == 0 && e == L) {
      outs.push_back(cv.op("identity", {C::a("x", x)}));
      continue;
    }
    SliceSpec sp;
    sp.start = s;
    sp.end = e;
    outs.push_back(slice_axis(cv, n, x, d, sp));
  }
  cv.outs(n, outs);
}

void tensor_split(C& cv, const json& n) {
  Var* x = self(cv, n);
  int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
  Dim sz = C::shape(x)[static_cast<size_t>(d)];
  if (!sz->is_const()) cv.fail(n, "tensor_split of a symbolic dim (" + sz->str() + ") is not supported");
  int64_t L = sz->value();
  std::optional<int64_t> sections;
  std::vector<int64_t> indices;
  if (C::has(n, "sections")) {
    sections = cv.i(n, "sections", 1);
  } else if (C::has(n, "indices")) {
    indices = cv.ints(n, "indices");
  } else {
    const Value* v = cv.known(C::tensor_name(n, "tensor_indices_or_sections"));
    if (!v) cv.fail(n, "tensor_split by a computed tensor is not supported");
    if (v->rank() == 0) sections = v->to_ints()[0];
    else indices = v->to_ints();
  }
  std::vector<std::pair<int64_t, int64_t>> b;
  if (sections) {
    // the first L % n sections hold one more element
    int64_t s = *sections;
    if (s <= 0) cv.fail(n, "tensor_split needs a positive number of sections");
    int64_t q = L / s, rem = L % s, at = 0;
    for (int64_t k = 0; k < s; ++k) {
      int64_t len = q + (k < rem ? 1 : 0);
      b.push_back({at, at + len});
      at += len;
    }
  } else {
    // pieces [0, i0), [i0, i1), ..., [ik, L) with Python slice bounds
    auto clampv = [&](int64_t v) { return v < 0 ? std::max<int64_t>(v + L, 0) : std::min(v, L); };
    int64_t prev = 0;
    for (auto i : indices) {
      int64_t e = clampv(i);
      b.push_back({prev, std::max(prev, e)});
      prev = e;
    }
    b.push_back({prev, std::max(prev, L)});
  }
  split_bounds_out(cv, n, x, d, b);
}

// diagonal(self, offset, dim1, dim2): the two dims moved last, flattened, sliced with stride n2
// + 1.
void diagonal(C& cv, const json& n) {
  Var* x = self(cv, n);
  const int r = cv.rank(n, x);
  int64_t off = cv.i(n, "offset", 0);
  int64_t d1 = cv.axis(n, cv.i(n, "dim1", 0), r), d2 = cv.axis(n, cv.i(n, "dim2", 1), r);
  if (d1 == d2) cv.fail(n, "dim1 and dim2 cannot be the same dim");
  auto& sh = C::shape(x);
  if (!sh[static_cast<size_t>(d1)]->is_const() || !sh[static_cast<size_t>(d2)]->is_const())
    cv.fail(n, "the diagonal of symbolic sizes is not supported");
  const int64_t n1 = sh[static_cast<size_t>(d1)]->value(),
                n2 = sh[static_cast<size_t>(d2)]->value();
  const int64_t len =
      std::max<int64_t>(0, off >= 0 ? std::min(n1, n2 - off) : std::min(n1 + off, n2));
  std::vector<int64_t> perm;
  std::vector<Dim> dims;
  for (int64_t i = 0; i < r; ++i)
    if (i != d1 && i != d2) {
      perm.push_back(i);
      dims.push_back(sh[static_cast<size_t>(i)]);
    }
  perm.push_back(d1);
  perm.push_back(d2);
  Var* t = cv.op("transpose", {C::a("x", x), C::aints32("perm", perm)});
  std::vector<Dim> flat = dims;
  flat.push_back(cv.ctx().constant(n1 * n2));
  Var* f = reshape(cv, t, flat);
  const int64_t start = off >= 0 ? off : -off * n2;
  const size_t rr = dims.size() + 1;
  std::vector<int64_t> begin(rr, 0), end(rr, 0), stride(rr, 1);
  std::vector<int64_t> bm(rr, 1), em(rr, 1);
  begin[rr - 1] = start;
  end[rr - 1] = start + (len > 0 ? (len - 1) * (n2 + 1) + 1 : 0);
  stride[rr - 1] = n2 + 1;
  bm[rr - 1] = em[rr - 1] = 0;
  const int64_t rk = static_cast<int64_t>(rr);
  cv.out(n,
         cv.op("slice_by_index", {C::a("x", f), C::aints32("begin", begin), C::aints32("end", end),
                                  C::aints32("stride", stride),
                                  C::a("begin_mask", Value::from_ints(DataType::Bool, {rk}, bm)),
                                  C::a("end_mask", Value::from_ints(DataType::Bool, {rk}, em))}));
}

void pixel_shuffle(C& cv, const json& n) {
  cv.out(n, cv.op("pixel_shuffle", {C::a("x", cv.tensor(n, "self")), C::ai32("upscale_factor", cv.i(n, "upscale_factor", 1))}));
}

void pixel_unshuffle(C& cv, const json& n) {
  cv.out(n, cv.op("pixel_unshuffle", {C::a("x", cv.tensor(n, "self")),
                                      C::a("downscale_factor", Value::scalar_int(DataType::UInt32, cv.i(n, "downscale_factor", 1)))}));
}

void trace_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  if (cv.rank(n, x) != 2) cv.fail(n, "trace takes a matrix");
  Var* dg = diag_of(cv, n, x, 0);
  // ints and bools sum as int64 (int32 here)
  dg = cv.cast(dg, cv.out_dtype(n).value_or(C::dtype(dg) == DataType::Bool ? DataType::Int32 : C::dtype(dg)));
  cv.out(n, cv.op("reduce_sum", {C::a("x", dg), C::aints32("axes", {0}), C::abool("keep_dims", false)}));
}

// rot90(x, k, dims): k = 1 flips dims[1] then swaps the dims, k = 2 flips both, k = 3 flips
// dims[0] then swaps
void rot90(C& cv, const json& n) {
  Var* x = self(cv, n);
  int r = cv.rank(n, x);
  int64_t k = ((cv.i(n, "k", 1) % 4) + 4) % 4;
  auto dims = cv.ints(n, "dims", {0, 1});
  if (dims.size() != 2) cv.fail(n, "rot90 needs two dims");
  int64_t a = cv.axis(n, dims[0], r), b = cv.axis(n, dims[1], r);
  if (a == b) cv.fail(n, "rot90 needs two different dims");
  Var* y;
  if (k == 0) y = cv.op("identity", {C::a("x", x)});
  else if (k == 2) y = cv.op("reverse", {C::a("x", x), C::aints32("axes", {a, b})});
  else y = transpose2(cv, cv.op("reverse", {C::a("x", x), C::aints32("axes", {k == 1 ? b : a})}), r, a, b);
  cv.out(n, y);
}

void mT(C& cv, const json& n) {
  Var* x = self(cv, n);
  int r = cv.rank(n, x);
  if (r < 2) cv.fail(n, "mT needs at least 2 dims");
  cv.out(n, transpose2(cv, x, r, r - 2, r - 1));
}

// channel_shuffle(x, g): channels viewed as [g, C / g], transposed to [C / g, g], flattened
void channel_shuffle(C& cv, const json& n) {
  Var* x = self(cv, n);
  int r = cv.rank(n, x);
  int64_t g = cv.i(n, "groups", 1);
  if (r < 3) cv.fail(n, "channel_shuffle needs at least 3 dims");
  Dim c = C::shape(x)[1];
  if (!c->is_const()) cv.fail(n, "channel_shuffle of a symbolic channel count is not supported");
  if (g <= 0 || c->value() % g) cv.fail(n, "channel_shuffle: " + c->str() + " channels do not split into " + std::to_string(g) + " groups");
  std::vector<Piece> ps{{true, 0}, {false, g}, {false, c->value() / g}};
  for (int64_t k = 2; k < r; ++k) ps.push_back({true, k});
  Var* y = reshape(cv, x, build_shape(cv, x, ps));
  y = transpose2(cv, y, r + 1, 1, 2);
  cv.out(n, reshape(cv, y, shape_of_var(cv, x)));
}

void view_as(C& cv, const json& n) {
  Var* x = self(cv, n);
  cv.out(n, reshape(cv, x, shape_of_var(cv, cv.tensor(n, "other"))));
}

void flatten_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  int r = cv.rank(n, x);
  if (r == 0) {
    cv.out(n, reshape(cv, x, cv.ci({1})));
    return;
  }
  int64_t s = cv.axis(n, cv.i(n, "start_dim", 0), r), e = cv.axis(n, cv.i(n, "end_dim", -1), r);
  std::vector<Piece> ps;
  for (int64_t k = 0; k < s; ++k) ps.push_back({true, k});
  ps.push_back({false, -1});
  for (int64_t k = e + 1; k < r; ++k) ps.push_back({true, k});
  if (s == e) {
    cv.out(n, cv.op("identity", {C::a("x", x)}));
    return;
  }
  cv.out(n, reshape(cv, x, build_shape(cv, x, ps)));
}

void unflatten(C& cv, const json& n) {
  Var* x = self(cv, n);
  int r = cv.rank(n, x);
  int64_t d = cv.axis(n, cv.i(n, "dim", 0), r);
  auto sizes = cv.ints(n, "sizes");
  std::vector<Piece> ps;
  for (int64_t k = 0; k < d; ++k) ps.push_back({true, k});
  for (auto s : sizes) ps.push_back({false, s});
  for (int64_t k = d + 1; k < r; ++k) ps.push_back({true, k});
  cv.out(n, reshape(cv, x, build_shape(cv, x, ps)));
}

void permute_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  int r = cv.rank(n, x);
  auto p = cv.ints(n, "dims");
  for (auto& v : p) v = cv.axis(n, v, r);
  cv.out(n, cv.op("transpose", {C::a("x", x), C::aints32("perm", p)}));
}

void transpose_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  int r = cv.rank(n, x);
  if (r < 2) {
    cv.out(n, cv.op("identity", {C::a("x", x)}));
    return;
  }
  // transpose / swapdims name the dims dim0, dim1; swapaxes names them axis0, axis1
  const bool ax = C::has(n, "axis0");
  int64_t a = cv.axis(n, cv.i(n, ax ? "axis0" : "dim0", 0), r),
          b = cv.axis(n, cv.i(n, ax ? "axis1" : "dim1", 1), r);
  std::vector<int64_t> p(static_cast<size_t>(r));
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[static_cast<size_t>(a)], p[static_cast<size_t>(b)]);
  cv.out(n, cv.op("transpose", {C::a("x", x), C::aints32("perm", p)}));
}

void t_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  if (cv.rank(n, x) < 2) cv.out(n, cv.op("identity", {C::a("x", x)}));
  else cv.out(n, cv.op("transpose", {C::a("x", x), C::aints32("perm", {1, 0})}));
}

void numpy_T(C& cv, const json& n) {
  Var* x = self(cv, n);
  int r = cv.rank(n, x);
  std::vector<int64_t> p;
  for (int k = r - 1; k >= 0; --k) p.push_back(k);
  cv.out(n, cv.op("transpose", {C::a("x", x), C::aints32("perm", p)}));
}

void movedim(C& cv, const json& n) {
  Var* x = self(cv, n);
  int r = cv.rank(n, x);
  auto src = cv.ints(n, "source"), dst = cv.ints(n, "destination");
  for (auto& v : src) v = cv.axis(n, v, r);
  for (auto& v : dst) v = cv.axis(n, v, r);
  std::vector<int64_t> p(static_cast<size_t>(r), -1);
  std::vector<bool> used(static_cast<size_t>(r), false);
  for (size_t k = 0; k < src.size(); ++k) {
    p[static_cast<size_t>(dst[k])] = src[k];
    used[static_cast<size_t>(src[k])] = true;
  }
  int64_t next = 0;
  for (auto& v : p)
    if (v < 0) {
      while (used[static_cast<size_t>(next)]) ++next;
      v = next++;
    }
  cv.out(n, cv.op("transpose", {C::a("x", x), C::aints32("perm", p)}));
}

void unsqueeze_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x) + 1);
  cv.out(n, cv.op("expand_dims", {C::a("x", x), C::aints32("axes", {d})}));
}

void squeeze_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  int r = cv.rank(n, x);
  std::vector<int64_t> dims;
  if (C::has(n, "dim") || C::has(n, "dims")) {
    dims = cv.ints(n, C::has(n, "dims") ? "dims" : "dim");
  } else {
    for (int k = 0; k < r; ++k) dims.push_back(k);
  }
  std::vector<int64_t> axes;
  for (auto d : dims) {
    if (r == 0) break;
    int64_t a = cv.axis(n, d, r);
    Dim sz = C::shape(x)[static_cast<size_t>(a)];
    if (sz->is_const() && sz->value() == 1) axes.push_back(a);
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  if (axes.empty()) cv.out(n, cv.op("identity", {C::a("x", x)}));
  else cv.out(n, cv.op("squeeze", {C::a("x", x), C::aints32("axes", axes)}));
}

void expand_op(C& cv, const json& n) { cv.out(n, expand_to(cv, n, self(cv, n), cv.dims(n, "size"))); }

// every tensor expanded to their common broadcast shape (right-aligned; a non-1 size wins)
void broadcast_tensors(C& cv, const json& n) {
  auto vs = cv.tensors(n, "tensors");
  if (vs.empty()) cv.fail(n, "broadcast_tensors of no tensors");
  std::vector<Dim> ds;
  for (Var* v : vs) {
    const auto& sh = C::shape(v);
    if (sh.size() > ds.size())
      ds.insert(ds.begin(), sh.begin(),
                sh.begin() + static_cast<std::ptrdiff_t>(sh.size() - ds.size()));
    for (size_t k = 0; k < sh.size(); ++k) {
      Dim& d = ds[ds.size() - sh.size() + k];
      if (d->is_const() && d->value() == 1)
        d = sh[k];
      else if (d->is_const() && sh[k]->is_const() && sh[k]->value() != 1 && sh[k] != d)
        cv.fail(n, "broadcast_tensors: sizes " + d->str() + " and " + sh[k]->str() +
                       " do not broadcast");
    }
  }
  std::vector<Var*> outs;
  for (Var* v : vs) outs.push_back(expand_to(cv, n, v, ds));
  cv.outs(n, outs);
}

void expand_as(C& cv, const json& n) {
  Var* o = cv.tensor(n, "other");
  cv.out(n, expand_to(cv, n, self(cv, n), C::shape(o)));
}

void repeat_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  auto reps = cv.ints(n, "repeats");
  int r = cv.rank(n, x);
  if (static_cast<int>(reps.size()) < r) cv.fail(n, "repeat needs at least as many repeats as dims");
  if (static_cast<int>(reps.size()) > r) {
    std::vector<int64_t> axes;
    for (int k = 0; k < static_cast<int>(reps.size()) - r; ++k) axes.push_back(k);
    x = cv.op("expand_dims", {C::a("x", x), C::aints32("axes", axes)});
  }
  cv.out(n, cv.op("tile", {C::a("x", x), C::aints32("reps", reps)}));
}

void tile_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  auto reps = cv.ints(n, "dims");
  int r = cv.rank(n, x);
  while (static_cast<int>(reps.size()) < r) reps.insert(reps.begin(), 1);
  if (static_cast<int>(reps.size()) > r) {
    std::vector<int64_t> axes;
    for (int k = 0; k < static_cast<int>(reps.size()) - r; ++k) axes.push_back(k);
    x = cv.op("expand_dims", {C::a("x", x), C::aints32("axes", axes)});
  }
  cv.out(n, cv.op("tile", {C::a("x", x), C::aints32("reps", reps)}));
}

void repeat_interleave(C& cv, const json& n) {
  Var* x = self(cv, n);
  int64_t rep = cv.i(n, "repeats", 1);
  int r = cv.rank(n, x);
  if (!C::has(n, "dim")) {
    x = reshape(cv, x, cv.ci({-1}));
    r = 1;
  }
  int64_t d = C::has(n, "dim") ? cv.axis(n, cv.i(n, "dim", 0), r) : 0;
  Var* e = cv.op("expand_dims", {C::a("x", x), C::aints32("axes", {d + 1})});
  std::vector<int64_t> reps(static_cast<size_t>(r + 1), 1);
  reps[static_cast<size_t>(d + 1)] = rep;
  Var* tl = cv.op("tile", {C::a("x", e), C::aints32("reps", reps)});
  std::vector<Piece> ps;
  for (int64_t k = 0; k < r; ++k) ps.push_back(k == d ? Piece{false, -1} : Piece{true, k});
  cv.out(n, reshape(cv, tl, build_shape(cv, x, ps)));
}

void cat_op(C& cv, const json& n) {
  auto vs = promote_all(cv, cv.tensors(n, "tensors"), cv.out_dtype(n));
  if (vs.empty()) cv.fail(n, "cat of no tensors");
  int r = cv.rank(n, vs[0]);
  int64_t d = cv.axis(n, cv.i(n, "dim", 0), r);
  if (vs.size() == 1) cv.out(n, cv.op("identity", {C::a("x", vs[0])}));
  else cv.out(n, cv.op("concat", {values_arg(vs), C::ai32("axis", d)}));
}

void stack_op(C& cv, const json& n) {
  auto vs = promote_all(cv, cv.tensors(n, "tensors"), cv.out_dtype(n));
  int r = cv.rank(n, vs[0]);
  int64_t d = cv.axis(n, cv.i(n, "dim", 0), r + 1);
  if (vs.size() == 1) cv.out(n, cv.op("expand_dims", {C::a("x", vs[0]), C::aints32("axes", {d})}));
  else cv.out(n, cv.op("stack", {values_arg(vs), C::ai32("axis", d)}));
}

void split_tensor(C& cv, const json& n) {
  Var* x = self(cv, n);
  int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
  split_out(cv, n, x, d, split_sizes(cv, n, x, d, cv.i(n, "split_size", 1)));
}

void split_with_sizes(C& cv, const json& n) {
  Var* x = self(cv, n);
  int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
  split_out(cv, n, x, d, cv.ints(n, "split_sizes"));
}

void split_sizes_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
  split_out(cv, n, x, d, cv.ints(n, "split_size"));
}

void chunk_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
  int64_t chunks = cv.i(n, "chunks", 1);
  Dim sz = C::shape(x)[static_cast<size_t>(d)];
  if (!sz->is_const()) cv.fail(n, "chunk of a symbolic dim is not supported");
  int64_t each = (sz->value() + chunks - 1) / chunks;
  split_out(cv, n, x, d, split_sizes(cv, n, x, d, std::max<int64_t>(each, 1)));
}

void unbind(C& cv, const json& n) {
  Var* x = self(cv, n);
  int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
  Dim sz = C::shape(x)[static_cast<size_t>(d)];
  if (!sz->is_const()) cv.fail(n, "unbind of a symbolic dim is not supported");
  std::vector<Var*> outs;
  if (sz->value() == 1) {
    outs.push_back(cv.op("squeeze", {C::a("x", x), C::aints32("axes", {d})}));
  } else {
    auto parts = cv.ops("split", {C::a("x", x), C::ai32("num_splits", sz->value()), C::ai32("axis", d)});
    for (Var* p : parts) outs.push_back(cv.op("squeeze", {C::a("x", p), C::aints32("axes", {d})}));
  }
  cv.outs(n, outs);
}

// torch.atleast_{k}d of one tensor: 0-d -> [1]*k; 1-d [N] -> [1, N] (k=2) or [1, N, 1] (k=3);
// 2-d [M, N] -> [M, N, 1] (k=3); otherwise unchanged
Var* atleast(C& cv, const json& n, Var* x, int k) {
  int r = cv.rank(n, x);
  std::vector<int64_t> axes;
  if (r == 0) {
    for (int j = 0; j < k; ++j) axes.push_back(j);
  } else if (r == 1 && k >= 2) {
    axes = k == 2 ? std::vector<int64_t>{0} : std::vector<int64_t>{0, 2};
  } else if (r == 2 && k == 3) {
    axes = {2};
  }
  if (axes.empty()) return cv.op("identity", {C::a("x", x)});
  return cv.op("expand_dims", {C::a("x", x), C::aints32("axes", axes)});
}

void atleast_op(OpTable& t, const char* name, int k) {
  t.on(name, [k](C& cv, const json& n) {
    if (!C::has(n, "tensors")) {  // the .default overload: one tensor
      cv.out(n, atleast(cv, n, self(cv, n), k));
      return;
    }
    std::vector<Var*> outs;
    for (Var* v : cv.tensors(n, "tensors")) outs.push_back(atleast(cv, n, v, k));
    cv.outs(n, outs);
  });
}

// hstack: cat along dim 1, or dim 0 when the tensors are (at most) 1-d
void hstack(C& cv, const json& n) {
  auto vs = promote_all(cv, cv.tensors(n, "tensors"), cv.out_dtype(n));
  if (vs.empty()) cv.fail(n, "hstack of no tensors");
  for (auto& v : vs) v = atleast(cv, n, v, 1);
  int64_t d = cv.rank(n, vs[0]) == 1 ? 0 : 1;
  if (vs.size() == 1)
    cv.out(n, cv.op("identity", {C::a("x", vs[0])}));
  else
    cv.out(n, cv.op("concat", {values_arg(vs), C::ai32("axis", d)}));
}

// reordering
void flip_dim(C& cv, const json& n, int64_t d, int min_rank, const char* what) {
  Var* x = self(cv, n);
  if (cv.rank(n, x) < min_rank)
    cv.fail(
        n, std::string(what) + " needs a tensor of at least " + std::to_string(min_rank) + " dims");
  cv.out(n, cv.op("reverse", {C::a("x", x), C::aints32("axes", {d})}));
}

void fliplr(C& cv, const json& n) { flip_dim(cv, n, 1, 2, "fliplr"); }

void flipud(C& cv, const json& n) { flip_dim(cv, n, 0, 1, "flipud"); }

void flip_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  auto dims = cv.ints(n, "dims");
  for (auto& d : dims) d = cv.axis(n, d, cv.rank(n, x));
  cv.out(n, cv.op("reverse", {C::a("x", x), C::aints32("axes", dims)}));
}

void roll_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  auto shifts = cv.ints(n, "shifts");
  auto dims = cv.ints(n, "dims");
  int r = cv.rank(n, x);
  Var* y = x;
  if (dims.empty()) {
    auto sh = C::static_shape(x);
    if (!sh) cv.fail(n, "roll without dims needs a known shape");
    y = reshape(cv, x, cv.ci({-1}));
    dims = {0};
  }
  for (size_t k = 0; k < dims.size(); ++k) {
    int64_t d = cv.axis(n, dims[k], cv.rank(n, y));
    Dim sz = C::shape(y)[static_cast<size_t>(d)];
    if (!sz->is_const()) {
      // a symbolic length L: gather at (i - shift) mod L, with the mod computed at run time on
      // non-negative operands (L - shift mod L for a negative shift)
      Var* len = cv.dim_var(sz);
      int64_t sh = shifts[k];
      auto mod = [&](Var* a) { return bin(cv, "mod", a, len); };
      Var* sm = sh >= 0 ? mod(cv.cs(static_cast<double>(sh), DataType::Int32))
                        : mod(bin(cv, "sub", len, mod(cv.cs(static_cast<double>(-sh), DataType::Int32))));
      Var* idx = bin(cv, "add", range_of(cv, sz), bin(cv, "sub", len, sm));
      Var* wrap = bin(cv, "greater_equal", idx, len);
      idx = cv.op("select", {C::a("cond", wrap), C::a("a", bin(cv, "sub", idx, len)), C::a("b", idx)});
      y = cv.op("gather", {C::a("x", y), C::a("indices", idx), C::ai32("axis", d)});
      continue;
    }
    int64_t L = sz->value();
    if (L == 0) continue;
    int64_t s = ((shifts[k] % L) + L) % L;
    if (s == 0) continue;
    SliceSpec a, b;
    a.start = L - s;
    b.start = 0;
    b.end = L - s;
    Var* pa = slice_axis(cv, n, y, d, a);
    Var* pb = slice_axis(cv, n, y, d, b);
    y = cv.op("concat", {values_arg({pa, pb}), C::ai32("axis", d)});
  }
  if (cv.ints(n, "dims").empty()) y = reshape(cv, y, shape_of_var(cv, x));
  (void)r;
  cv.out(n, y == x ? cv.op("identity", {C::a("x", x)}) : y);
}

void tril(C& cv, const json& n) {
  Var* x = self(cv, n);
  Var* m = tri_mask(cv, n, x, cv.i(n, "diagonal", 0), true);
  cv.out(n, cv.op("select", {C::a("cond", m), C::a("a", x), C::a("b", cv.cs(0, C::dtype(x)))}));
}

void triu(C& cv, const json& n) {
  Var* x = self(cv, n);
  Var* m = tri_mask(cv, n, x, cv.i(n, "diagonal", 0), false);
  cv.out(n, cv.op("select", {C::a("cond", m), C::a("a", x), C::a("b", cv.cs(0, C::dtype(x)))}));
}

// x.unfold(dim, size, step): windows of `size` every `step` along dim (which becomes the window
// count), each window on a new last axis: one gather with a (windows, size) index
void unfold_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  int r = cv.rank(n, x);
  int64_t size = cv.i(n, "size", 1), step = cv.i(n, "step", 1);
  if (size < 0 || step <= 0) cv.fail(n, "unfold needs size >= 0 and step > 0");
  if (r == 0) {
    if (size > 1) cv.fail(n, "unfold of a 0-d tensor takes size 0 or 1");
    cv.out(n, cv.op("reshape", {C::a("x", x), C::aints32("shape", {1})}));
    return;
  }
  int64_t d = cv.axis(n, cv.i(n, "dimension", 0), r);
  Dim L = C::shape(x)[static_cast<size_t>(d)];
  if (!L->is_const()) cv.fail(n, "unfold along a symbolic dim is not supported");
  if (size > L->value()) cv.fail(n, "unfold: size " + std::to_string(size) + " is larger than the dim (" + std::to_string(L->value()) + ")");
  int64_t wins = (L->value() - size) / step + 1;
  if (size == 0) cv.fail(n, "unfold with size 0 gives an empty result");
  std::vector<int64_t> idx;
  for (int64_t w = 0; w < wins; ++w)
    for (int64_t k = 0; k < size; ++k) idx.push_back(w * step + k);
  Var* iv = cv.c(Value::from_ints(DataType::Int32, {wins, size}, idx));
  Var* g = cv.op("gather", {C::a("x", x), C::a("indices", iv), C::ai32("axis", d)});  // (..., wins, size, rest)
  if (d + 1 == r) {
    cv.out(n, g);
    return;
  }
  std::vector<int64_t> perm;
  for (int64_t q = 0; q <= r; ++q)
    if (q != d + 1) perm.push_back(q);
  perm.push_back(d + 1);
  cv.out(n, cv.op("transpose", {C::a("x", g), C::aints32("perm", perm)}));
}

/// as_strided of an x with symbolic sizes: only the view that is x itself (x's own sizes and
/// x's own strides wherever a dim is not 1, no offset), which decompositions emit after
/// reductions that keep dims of size 1. x's strides are its recorded ones, else contiguous ones.
void as_strided_identity(C& cv, const json& n, Var* x) {
  const std::vector<Dim> size = cv.dims(n, "size");
  const auto stride = cv.ints(n, "stride");
  const std::vector<Dim>& xs = C::shape(x);
  const auto no = [&](const std::string& why) {
    cv.fail(n,
            "as_strided of a tensor with symbolic sizes is supported only as the tensor itself (" +
                why + ")");
  };
  if (cv.i(n, "storage_offset", 0) != 0) no("it has a storage offset");
  if (size.size() != xs.size() || stride.size() != xs.size())
    no("its rank differs from the tensor's");
  const json* xmeta = cv.lookup("tensor_values", C::tensor_name(n, "self"));
  const json* xst = xmeta && xmeta->contains("strides") ? &(*xmeta)["strides"] : nullptr;
  std::optional<int64_t> contiguous = 1;  // the product of the dims after k, while known
  for (size_t k = xs.size(); k-- > 0;) {
    if (size[k] != xs[k]) no("its size differs from the tensor's in dim " + std::to_string(k));
    const bool one = xs[k]->is_const() && xs[k]->value() == 1;
    std::optional<int64_t> own = contiguous;
    if (xst && xst->size() == xs.size() && (*xst)[k].contains("as_int"))
      own = (*xst)[k]["as_int"].get<int64_t>();
    if (!one && (!own || stride[k] != *own))
      no("its strides are not the tensor's in dim " + std::to_string(k));
    if (contiguous && xs[k]->is_const())
      *contiguous *= xs[k]->value();
    else if (!one)
      contiguous.reset();
  }
  cv.out(n, x);
}

void as_strided(C& cv, const json& n) {
  // a view of x's storage; expressible when x is contiguous and the view is a permutation of a
  // contiguous layout (what decompositions emit for permute / expand-free reshapes)
  Var* x = self(cv, n);
  if (!C::static_shape(x)) return as_strided_identity(cv, n, x);
  auto size = cv.ints(n, "size");
  auto stride = cv.ints(n, "stride");
  int64_t off = cv.i(n, "storage_offset", 0);
  if (size.size() != stride.size()) cv.fail(n, "as_strided: size and stride differ in length");
  std::string xn = C::tensor_name(n, "self");
  const json* xmeta = cv.lookup("tensor_values", xn);
  auto xs = C::static_shape(x);
  if (!xs) cv.fail(n, "as_strided of a tensor with symbolic sizes is not supported");
  int64_t numel = 1, xnumel = 1;
  for (auto s : size) numel *= s;
  for (auto s : *xs) xnumel *= s;
  // x must be contiguous in its storage
  if (xmeta && xmeta->contains("strides")) {
    auto& st = (*xmeta)["strides"];
    int64_t expect = 1;
    for (size_t k = xs->size(); k-- > 0;) {
      if ((*xs)[k] != 1 && st[k].contains("as_int") && st[k]["as_int"].get<int64_t>() != expect)
        cv.fail(n, "as_strided of a non-contiguous tensor is not supported");
      expect *= (*xs)[k];
    }
  }
  if (off != 0 || numel != xnumel) cv.fail(n, "as_strided with an offset or a different element count is not supported");
  // order the view's dims by decreasing stride: they must form a contiguous layout
  std::vector<size_t> order;
  for (size_t k = 0; k < size.size(); ++k)
    if (size[k] != 1) order.push_back(k);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return stride[a] > stride[b]; });
  int64_t expect = 1;
  for (size_t k = order.size(); k-- > 0;) {
    if (stride[order[k]] != expect) cv.fail(n, "as_strided with overlapping or gapped strides is not supported");
    expect *= size[order[k]];
  }
  std::vector<int64_t> psize;
  for (size_t k : order) psize.push_back(size[k]);
  Var* y = reshape(cv, x, cv.ci(psize));
  // back to the view's dim order (size-1 dims reinserted)
  std::vector<int64_t> perm(order.size());
  std::vector<size_t> rank_of(size.size(), 0);
  for (size_t k = 0; k < order.size(); ++k) rank_of[order[k]] = k;
  size_t j = 0;
  for (size_t k = 0; k < size.size(); ++k)
    if (size[k] != 1) perm[j++] = static_cast<int64_t>(rank_of[k]);
  bool ident = true;
  for (size_t k = 0; k < perm.size(); ++k) ident = ident && perm[k] == static_cast<int64_t>(k);
  if (!ident) y = cv.op("transpose", {C::a("x", y), C::aints32("perm", perm)});
  cv.out(n, reshape(cv, y, cv.ci(size)));
}

}  // namespace

void register_shape(OpTable& t) {
  t.on("aten.pixel_shuffle", pixel_shuffle);
  t.on("aten.pixel_unshuffle", pixel_unshuffle);
  t.on("aten.tensor_split", tensor_split);
  t.on("aten.diag", diag);
  t.on("aten.trace", trace_op);
  t.on("aten.rot90", rot90);
  t.on("aten.mT", mT);
  t.on({"aten.channel_shuffle", "aten.native_channel_shuffle"}, channel_shuffle);
  t.on("aten.view", view);
  t.on("aten._unsafe_view", view);
  t.on("aten.reshape", view);
  t.on("aten.view_copy", view);
  t.on("aten._reshape_alias", view);
  t.on({"aten.view_as", "aten.reshape_as"}, view_as);
  t.on("aten.flatten", flatten_op);
  t.on("aten.unflatten", unflatten);
  t.on({"aten.permute", "aten.permute_copy"}, permute_op);
  t.on({"aten.transpose", "aten.transpose_copy", "aten.swapaxes", "aten.swapdims"}, transpose_op);
  t.on({"aten.t", "aten.t_copy"}, t_op);
  t.on("aten.numpy_T", numpy_T);
  t.on("aten.movedim", movedim);
  t.on({"aten.unsqueeze", "aten.unsqueeze_copy"}, unsqueeze_op);
  t.on({"aten.squeeze", "aten.squeeze_copy"}, squeeze_op);
  t.on({"aten.expand", "aten.expand_copy", "aten.broadcast_to"}, expand_op);
  t.on("aten.expand_as", expand_as);
  t.on("aten.broadcast_tensors", broadcast_tensors);
  t.on("aten.repeat", repeat_op);
  t.on("aten.tile", tile_op);
  t.on("aten.repeat_interleave.self_int", repeat_interleave);
  t.on({"aten.cat", "aten.concat", "aten.concatenate"}, cat_op);
  t.on("aten.stack", stack_op);
  t.on({"aten.split.Tensor", "aten.split_copy.Tensor"}, split_tensor);
  t.on({"aten.split_with_sizes", "aten.split_with_sizes_copy"}, split_with_sizes);
  t.on("aten.split.sizes", split_sizes_op);
  t.on("aten.chunk", chunk_op);
  t.on({"aten.unbind", "aten.unbind_copy"}, unbind);
  t.on("aten.flip", flip_op);
  t.on("aten.fliplr", fliplr);
  t.on("aten.flipud", flipud);
  t.on("aten.hstack", hstack);
  atleast_op(t, "aten.atleast_1d", 1);
  atleast_op(t, "aten.atleast_2d", 2);
  atleast_op(t, "aten.atleast_3d", 3);
  t.on("aten.roll", roll_op);
  t.on("aten.tril", tril);
  t.on("aten.triu", triu);
  t.on({"aten.unfold", "aten.unfold_copy"}, unfold_op);
  t.on({"aten.as_strided", "aten.as_strided_copy"}, as_strided);
  t.on({"aten.diagonal", "aten.diagonal_copy"}, diagonal);
}

}  // namespace torch_detail
}  // namespace milkit
