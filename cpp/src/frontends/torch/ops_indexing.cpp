// ATen indexing: slice / select / narrow, advanced indexing and index_put, gather / scatter and their reductions, index_select / index_add / index_copy / index_fill, masked_scatter, slice / select scatters, nonzero, one_hot.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

const int64_t kBig = std::numeric_limits<int64_t>::max() / 2;

// a slice argument: a known int (clamped later by MIL), None, or a symbolic size
struct Bound {
  std::optional<int64_t> v;
  Var* var = nullptr;
  Dim dim = nullptr;  // the symbolic bound (with var)
};

Bound bound(C& cv, const json& n, const char* name, Var* x, int64_t dim) {
  Bound b;
  const json* a = C::arg(n, name);
  if (!a) return b;
  Dim d = cv.sym_dim(*a);
  if (d->is_const()) {
    b.v = d->value();
    return b;
  }
  if (d == C::shape(x)[static_cast<size_t>(dim)]) {
    b.v = kBig;  // the whole axis
    return b;
  }
  b.var = cv.dim_var(d);
  b.dim = d;
  return b;
}

void slice(C& cv, const json& n) {
  Var* x = self(cv, n);
  int r = cv.rank(n, x);
  int64_t dim = cv.axis(n, cv.i(n, "dim", 0), r);
  SliceSpec s;
  Bound st = bound(cv, n, "start", x, dim), en = bound(cv, n, "end", x, dim);
  s.step = cv.i(n, "step", 1);
  if (s.step <= 0) cv.fail(n, "slice step must be positive");
  if (st.v) s.start = *st.v;
  if (en.v && *en.v < kBig) s.end = *en.v;
  Dim sz = C::shape(x)[static_cast<size_t>(dim)];
  // clamp known bounds as torch does
  if (sz->is_const()) {
    int64_t L = sz->value();
    auto clampv = [&](int64_t v) { return v < 0 ? std::max<int64_t>(v + L, 0) : std::min(v, L); };
    s.start = clampv(s.start);
    if (s.end) s.end = clampv(*s.end);
    if (s.end && *s.end == L) s.end.reset();
    if (s.start == 0 && !s.end && s.step == 1 && !st.var && !en.var) {
      Var* idv = cv.op("identity", {C::a("x", x)});
      cv.out(n, idv);
      auto names = C::output_names(n);
      if (!names.empty()) cv.views[names[0]] = ViewInfo{C::tensor_name(n, "self"), ViewInfo::Slice, dim, 0, std::nullopt, 1};
      return;
    }
  }
  auto names = C::output_names(n);
  Var* y = nullptr;
  if (st.var && s.step == 1 && !names.empty()) {
    // a symbolic start: torch assumes 0 <= start <= end (it does not guard it), which MIL's
    // slice_by_index cannot know; slice_by_size with torch's size of the result keeps it exact
    auto ms = cv.meta_shape(names[0]);
    if (ms && ms->size() == static_cast<size_t>(r) && cv.can_compute((*ms)[static_cast<size_t>(dim)])) {
      std::vector<int64_t> zeros(static_cast<size_t>(r), 0), sizes(static_cast<size_t>(r), -1);
      Var* begin = cv.vector_with(zeros, static_cast<size_t>(dim), st.var);
      Var* size = cv.vector_with(sizes, static_cast<size_t>(dim), cv.dim_var((*ms)[static_cast<size_t>(dim)]));
      y = cv.op("slice_by_size", {C::a("x", x), C::a("begin", begin), C::a("size", size)});
    }
  }
  if (!y) y = slice_axis(cv, n, x, dim, s, st.var, en.var);
  cv.out(n, y);
  if (!names.empty()) {
    ViewInfo vi{C::tensor_name(n, "self"), ViewInfo::Slice, dim, s.start, s.end, s.step};
    if (st.var) vi.start.reset(), vi.sym_start = st.dim;
    if (en.var) vi.end.reset(), vi.sym_end = en.dim;
    cv.views[names[0]] = vi;
  }
}

void select(C& cv, const json& n) {
  Var* x = self(cv, n);
  int r = cv.rank(n, x);
  int64_t dim = cv.axis(n, cv.i(n, "dim", 0), r);
  const json* ia = C::arg(n, "index");
  Dim id = ia ? cv.sym_dim(*ia) : cv.ctx().constant(0);
  Var* y;
  if (id->is_const()) {
    int64_t idx = id->value();
    Dim sz = C::shape(x)[static_cast<size_t>(dim)];
    if (idx < 0 && sz->is_const()) idx += sz->value();
    y = gather_any(cv, "gather", x, {C::a("indices", Value::scalar_int(DataType::Int32, idx)), C::ai32("axis", dim)});
    auto names = C::output_names(n);
    if (!names.empty()) cv.views[names[0]] = ViewInfo{C::tensor_name(n, "self"), ViewInfo::Select, dim, idx, std::nullopt, 1};
  } else {
    y = gather_any(cv, "gather", x, {C::a("indices", cv.dim_var(id)), C::ai32("axis", dim)});
  }
  cv.out(n, y);
}

// Advanced indexing's common step: x with the indexed dims `pos` moved to the front (`perm`,
// `ident` when nothing moved), and the index tensors broadcast to one shape and stacked on a new
// last axis (gather_nd / scatter_nd's indices; `ir` is the broadcast rank).
struct Stacked {
  std::vector<int64_t> perm;
  bool ident = true;
  Var* xt = nullptr;
  std::vector<Var*> is;
  int ir = 0;
  Var* st = nullptr;
};

// A computed index into an axis of size `len` wrapped into [0, len) (i < 0 -> i + len): the fp16
// pipeline may run a gather on uint16 indices (common::add_int16_cast), where -1 would read 65535.
Var* nonneg_index(C& cv, Var* i, Dim len) {
  if (is_const(i)) return i;
  Var* neg = bin(cv, "less", i, cv.cs(0, DataType::Int32));
  return cv.op("select",
               {C::a("cond", neg), C::a("a", bin(cv, "add", i, cv.dim_var(len))), C::a("b", i)});
}

Stacked stack_indices(C& cv, const json& n, Var* x, const std::vector<Var*>& idx, const std::vector<int64_t>& pos) {
  Stacked r;
  int rank = cv.rank(n, x);
  for (auto p : pos) r.perm.push_back(p);
  for (int k = 0; k < rank; ++k)
    if (std::find(pos.begin(), pos.end(), k) == pos.end()) r.perm.push_back(k);
  for (size_t k = 0; k < r.perm.size(); ++k) r.ident = r.ident && r.perm[k] == static_cast<int64_t>(k);
  r.xt = r.ident ? x : cv.op("transpose", {C::a("x", x), C::aints32("perm", r.perm)});
  for (auto p : pos)
    r.is.push_back(nonneg_index(cv, cv.cast(idx[static_cast<size_t>(p)], DataType::Int32),
                                C::shape(x)[static_cast<size_t>(p)]));
  Var* acc = r.is[0];
  for (size_t k = 1; k < r.is.size(); ++k) acc = bin(cv, "add", acc, bin(cv, "mul", r.is[k], cv.cs(0, DataType::Int32)));
  for (auto& v : r.is) v = bin(cv, "add", v, bin(cv, "mul", acc, cv.cs(0, DataType::Int32)));
  r.ir = cv.rank(n, r.is[0]);
  r.st = cv.op("stack", {values_arg(r.is), C::ai32("axis", r.ir)});
  return r;
}

// x[mask] with the mask over dims [p, p + rank(mask)): the true positions (non_zero, a count
// known at run time only) gathered, the count dim in place of the mask's dims
Var* mask_index(C& cv, const json& n, Var* x, Var* m, int64_t p) {
  int xr = cv.rank(n, x), mr = cv.rank(n, m);
  if (mr == 0) cv.fail(n, "indexing with a 0-d bool mask is not supported");
  if (p + mr > xr)
    cv.fail(n, "the bool mask has more dims than the indexed tensor has from its position");
  std::vector<int64_t> perm;
  for (int64_t k = 0; k < mr; ++k) perm.push_back(p + k);
  for (int64_t k = 0; k < xr; ++k)
    if (k < p || k >= p + mr) perm.push_back(k);
  Var* xt = p == 0 ? x : cv.op("transpose", {C::a("x", x), C::aints32("perm", perm)});
  Var* nz = cv.op("non_zero", {C::a("x", m)});
  Var* g = gather_any(cv, "gather_nd", xt, {C::a("indices", nz)});
  if (p == 0) return g;
  std::vector<int64_t> back;
  for (int64_t k = 1; k <= p; ++k) back.push_back(k);
  back.push_back(0);
  for (int64_t k = p + 1; k < xr - mr + 1; ++k) back.push_back(k);
  return cv.op("transpose", {C::a("x", g), C::aints32("perm", back)});
}

// advanced indexing x[i0, i1, ...] (None entries are full slices)
Var* index(C& cv, const json& n, Var* x, const std::vector<Var*>& idx) {
  (void)cv.rank(n, x);  // fails clearly when the rank is unknown
  std::vector<int64_t> pos;
  for (size_t k = 0; k < idx.size(); ++k)
    if (idx[k]) {
      if (C::dtype(idx[k]) == DataType::Bool) {
        if (std::count(idx.begin(), idx.end(), nullptr) + 1 !=
            static_cast<std::ptrdiff_t>(idx.size()))
          cv.fail(n,
                  "indexing with a bool mask together with other index tensors is not supported");
        return mask_index(cv, n, x, idx[k], static_cast<int64_t>(k));
      }
      pos.push_back(static_cast<int64_t>(k));
    }
  if (pos.empty()) return cv.op("identity", {C::a("x", x)});
  if (pos.size() == 1) {
    Var* i = nonneg_index(cv, cv.cast(idx[static_cast<size_t>(pos[0])], DataType::Int32),
                          C::shape(x)[static_cast<size_t>(pos[0])]);
    return gather_any(cv, "gather", x, {C::a("indices", i), C::ai32("axis", pos[0])});
  }
  bool adjacent = pos.back() - pos.front() + 1 == static_cast<int64_t>(pos.size());
  Stacked sk = stack_indices(cv, n, x, idx, pos);
  int ir = sk.ir;
  Var* g = gather_any(cv, "gather_nd", sk.xt, {C::a("indices", sk.st)});
  if (!adjacent || pos.front() == 0) return g;
  // adjacent at pos.front(): the index dims go there
  int gr = cv.rank(n, g);
  std::vector<int64_t> back;
  int64_t k0 = pos.front();
  for (int64_t k = 0; k < k0; ++k) back.push_back(ir + k);
  for (int64_t k = 0; k < ir; ++k) back.push_back(k);
  for (int64_t k = ir + k0; k < gr; ++k) back.push_back(k);
  return cv.op("transpose", {C::a("x", g), C::aints32("perm", back)});
}

// whether values for x[mask] hold one row per true mask element ([count, rest...], count not 1)
// rather than one broadcast over them
bool compact_values(C& cv, const json& n, Var* v, int rows_rank) {
  if (cv.rank(n, v) != rows_rank) return false;
  Dim c = C::shape(v)[0];
  return !(c->is_const() && c->value() == 1);
}

// rows [count, rest...] of x[mask] = rows laid out at the mask's positions ([mask dims, rest...]):
// the running count of true elements picks each position's row (others get row 0, unused; a
// zero row is appended so that there is a row 0 when the mask selects nothing)
Var* spread_values(C& cv, Var* m, Var* rows) {
  Var* mf = flat(cv, cv.cast(m, DataType::Int32));
  Var* at = bin(cv, "sub", cv.op("cumsum", {C::a("x", mf), C::ai32("axis", 0)}),
                cv.cs(1, DataType::Int32));
  at = bin(cv, "maximum", at, cv.cs(0, DataType::Int32));
  int rr = static_cast<int>(C::shape(rows).size());
  Var* rest = rr == 1
                  ? nullptr
                  : cv.op("slice_by_index", {C::a("x", shape_of_var(cv, rows)),
                                             C::aints32("begin", {1}), C::aints32("end", {rr})});
  Var* one =
      rest ? cv.op("concat", {values_arg({cv.ci({1}), rest}), C::ai32("axis", 0)}) : cv.ci({1});
  Var* padded =
      cv.op("concat", {values_arg({rows, fill(cv, one, 0, C::dtype(rows))}), C::ai32("axis", 0)});
  Var* g = gather_any(cv, "gather", padded, {C::a("indices", at), C::ai32("axis", 0)});
  if (rr == 1) return reshape(cv, g, shape_of_var(cv, m));
  return reshape(cv, g,
                 cv.op("concat", {values_arg({shape_of_var(cv, m), rest}), C::ai32("axis", 0)}));
}

// x with x[i0, i1, ...] = values (accumulate: +=); index tensors must lead
Var* index_put(C& cv, const json& n, Var* x, const std::vector<Var*>& idx, Var* values, bool accumulate) {
  std::vector<int64_t> pos;
  for (size_t k = 0; k < idx.size(); ++k)
    if (idx[k]) pos.push_back(static_cast<int64_t>(k));
  if (pos.empty()) cv.fail(n, "index_put without index tensors");
  for (auto p : pos)
    if (C::dtype(idx[static_cast<size_t>(p)]) == DataType::Bool) {
      if (pos.size() != 1) cv.fail(n, "index_put with several bool masks is not supported");
      // x[mask] = v: where(mask, v, x), mask broadcast over trailing dims
      Var* m = idx[static_cast<size_t>(p)];
      int xr = cv.rank(n, x), mr = cv.rank(n, m);
      if (p != 0) cv.fail(n, "index_put with a bool mask after other dims is not supported");
      std::vector<int64_t> axes;
      for (int k = mr; k < xr; ++k) axes.push_back(k);
      if (!axes.empty()) m = cv.op("expand_dims", {C::a("x", m), C::aints32("axes", axes)});
      Var* v = cv.cast(values, C::dtype(x));
      if (compact_values(cv, n, v, xr - mr + 1))
        v = spread_values(cv, idx[static_cast<size_t>(p)], v);
      if (accumulate) v = bin(cv, "add", x, v);
      return cv.op("select", {C::a("cond", m), C::a("a", v), C::a("b", x)});
    }
  int r = cv.rank(n, x);
  Stacked sk = stack_indices(cv, n, x, idx, pos);
  const auto& perm = sk.perm;
  bool ident = sk.ident;
  Var* xt = sk.xt;
  const auto& is = sk.is;
  Var* st = sk.st;
  // updates: values broadcast to index shape + the un-indexed dims of xt. torch lays x[idx] out
  // with adjacent index tensors in place (x[:, :, i] is [A, B, len(i), ...]), so values are
  // broadcast to that layout first and the index dims moved to the front.
  std::vector<Dim> ushape(C::shape(is[0]).begin(), C::shape(is[0]).end());
  for (size_t k = pos.size(); k < static_cast<size_t>(r); ++k) ushape.push_back(C::shape(xt)[k]);
  Var* v = cv.cast(values, C::dtype(x));
  bool adjacent = pos.back() - pos.front() + 1 == static_cast<int64_t>(pos.size());
  int64_t k0 = adjacent ? pos.front() : 0;
  if (k0 > 0) {
    int64_t ir = static_cast<int64_t>(C::shape(is[0]).size());
    std::vector<Dim> tshape;
    for (int64_t k = 0; k < k0; ++k) tshape.push_back(ushape[static_cast<size_t>(ir + k)]);
    for (int64_t k = 0; k < ir; ++k) tshape.push_back(ushape[static_cast<size_t>(k)]);
    for (size_t k = static_cast<size_t>(ir + k0); k < ushape.size(); ++k) tshape.push_back(ushape[k]);
    if (!(v->type()->has_rank() && C::shape(v) == tshape)) v = expand_to(cv, n, v, tshape);
    std::vector<int64_t> front;
    for (int64_t k = 0; k < ir; ++k) front.push_back(k0 + k);
    for (int64_t k = 0; k < k0; ++k) front.push_back(k);
    for (int64_t k = ir + k0; k < static_cast<int64_t>(tshape.size()); ++k) front.push_back(k);
    v = cv.op("transpose", {C::a("x", v), C::aints32("perm", front)});
  }
  bool same = v->type()->has_rank() && C::shape(v) == ushape;
  if (!same) v = expand_to(cv, n, v, ushape);
  Var* sc = cv.op("scatter_nd", {C::a("data", xt), C::a("indices", st), C::a("updates", v),
                                 C::astr("mode", accumulate ? "add" : "update")});
  if (ident) return sc;
  std::vector<int64_t> inv(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) inv[static_cast<size_t>(perm[k])] = static_cast<int64_t>(k);
  return cv.op("transpose", {C::a("x", sc), C::aints32("perm", inv)});
}

// a rank-1 int32 vector [d]
Var* vec1(C& cv, Dim d) {
  if (d->is_const()) return cv.ci({d->value()});
  return cv.op("expand_dims", {C::a("x", cv.dim_var(d)), C::aints32("axes", {0})});
}

// negative indices into an axis of size `len` wrapped (i < 0 -> i + len)
Var* wrap_index(C& cv, Var* idx, Dim len) {
  Var* neg = bin(cv, "less", idx, cv.cs(0, DataType::Int32));
  return cv.op("select", {C::a("cond", neg), C::a("a", bin(cv, "add", idx, cv.dim_var(len))), C::a("b", idx)});
}

// torch reads src[:index.size(0), :index.size(1), ...] when src is larger than index
Var* leading_block(C& cv, const json& n, Var* src, Var* idx) {
  if (C::shape(src) == C::shape(idx)) return src;
  auto is = C::static_shape(idx), ss = C::static_shape(src);
  if (!is || !ss) cv.fail(n, "scatter with an index smaller than src needs known shapes");
  return cv.op("slice_by_size", {C::a("x", src), C::aints32("begin", std::vector<int64_t>(is->size(), 0)),
                                 C::aints32("size", *is)});
}

// torch's scatter of updates (index's shape) into self along `d`. MIL's scatter_along_axis needs
// index's sizes off `d` equal to self's; torch allows them smaller: then every element's full
// coordinates (aranges off `d`, the index on it) go to scatter_nd.
struct TorchScatter {
  C& cv;
  Var* idx;
  int64_t d;
  Var* coords = nullptr;
  TorchScatter(C& c, const json& n, Var* x, int64_t dim, Var* index) : cv(c), idx(index), d(dim) {
    int r = cv.rank(n, x);
    if (cv.rank(n, idx) != r) cv.fail(n, "scatter: index must have the rank of self");
    bool along = true;
    for (int k = 0; k < r; ++k)
      if (k != d && C::shape(idx)[static_cast<size_t>(k)] != C::shape(x)[static_cast<size_t>(k)]) along = false;
    if (along) return;
    Arg vals{"values", {}, true};
    for (int k = 0; k < r; ++k) {
      Var* c = idx;
      if (k != d) {
        std::vector<int64_t> axes;
        for (int q = 0; q < r; ++q)
          if (q != k) axes.push_back(q);
        c = range_of(cv, C::shape(idx)[static_cast<size_t>(k)]);
        if (!axes.empty()) c = cv.op("expand_dims", {C::a("x", c), C::aints32("axes", axes)});
        c = expand_to(cv, n, c, C::shape(idx));
      }
      vals.items.push_back(ArgItem{c, nullptr});
    }
    coords = cv.op("stack", {vals, C::ai32("axis", r)});
  }
  Var* operator()(Var* data, Var* upd, const char* m) const {
    if (coords)
      return cv.op("scatter_nd", {C::a("data", data), C::a("indices", coords), C::a("updates", upd), C::astr("mode", m)});
    return cv.op("scatter_along_axis", {C::a("data", data), C::a("indices", idx), C::a("updates", upd),
                                        C::ai32("axis", d), C::astr("mode", m)});
  }
};

// torch's scatter_reduce(self, dim, index, src, reduce, include_self): src's leading block of
// index's shape scattered into self, combined by `reduce`; with include_self=False the scattered
// positions start from the reduction's identity (mean counts only the scattered values)
void scatter_reduce(C& cv, const json& n) {
  Var* x = self(cv, n);
  DataType dt = C::dtype(x);
  if (dt == DataType::Bool) cv.fail(n, "scatter_reduce of a bool tensor is not supported");
  int r = cv.rank(n, x);
  int64_t d = cv.axis(n, cv.i(n, "dim", 0), r);
  Var* idx = cv.cast(cv.tensor(n, "index"), DataType::Int32);
  Var* src = cv.cast(cv.tensor(n, "src"), dt);
  std::string red = cv.s(n, "reduce", "");
  bool inc = cv.bo(n, "include_self", true);
  std::string mode = red == "sum" || red == "mean" ? "add" : red == "prod" ? "mul" : red == "amax" ? "max" : red == "amin" ? "min" : "";
  if (mode.empty()) cv.fail(n, "scatter_reduce '" + red + "' is not supported");
  if (cv.rank(n, idx) != r || cv.rank(n, src) != r) cv.fail(n, "scatter_reduce: index and src must have the rank of self");
  src = leading_block(cv, n, src, idx);
  TorchScatter sc(cv, n, x, d, idx);
  auto scatter = [&](Var* data, Var* upd, const char* m) { return sc(data, upd, m); };
  Var* base = x;
  if (!inc) {
    double inf = std::numeric_limits<double>::infinity();
    double lo = is_float(dt) ? -inf : static_cast<double>(std::numeric_limits<int32_t>::min());
    double hi = is_float(dt) ? inf : static_cast<double>(std::numeric_limits<int32_t>::max());
    double ident = mode == "add" ? 0 : mode == "mul" ? 1 : mode == "max" ? lo : hi;
    base = scatter(x, fill(cv, shape_of_var(cv, idx), ident, dt), "update");
  }
  Var* y = scatter(base, src, mode.c_str());
  if (red == "mean") {
    // the count of values combined at each position (self counts once when included); positions
    // nothing was scattered to keep self (count 1). Integer means round down, as torch's floor div
    Var* cnt = scatter(fill(cv, shape_of_var(cv, x), inc ? 1 : 0, dt), fill(cv, shape_of_var(cv, idx), 1, dt), "add");
    cnt = bin(cv, "maximum", cnt, cv.cs(1, dt));
    y = bin(cv, is_float(dt) ? "real_div" : "floor_div", y, cnt);
  }
  cv.out(n, y);
}

// masked_scatter(self, mask, source): where mask is true, the next element of source (in
// row-major order of the broadcast shape): the running count of true mask elements indexes source
void masked_scatter(C& cv, const json& n) {
  Var* x = self(cv, n);
  Var* m = cv.tensor(n, "mask");
  if (C::dtype(m) != DataType::Bool) m = cv.cast(m, DataType::Bool);
  Var* src = cv.cast(cv.tensor(n, "source"), C::dtype(x));
  (void)cv.rank(n, x);
  (void)cv.rank(n, m);
  if (C::shape(m) != C::shape(x)) {
    x = cv.op("select", {C::a("cond", m), C::a("a", x), C::a("b", x)});  // x broadcast with the mask
    m = expand_to(cv, n, m, C::shape(x));
  }
  Var* mf = flat(cv, cv.cast(m, DataType::Int32));
  Var* pos = bin(cv, "sub", cv.op("cumsum", {C::a("x", mf), C::ai32("axis", 0)}), cv.cs(1, DataType::Int32));
  pos = bin(cv, "maximum", pos, cv.cs(0, DataType::Int32));
  Var* g = gather_any(cv, "gather", flat(cv, src), {C::a("indices", pos), C::ai32("axis", 0)});
  g = reshape(cv, g, shape_of_var(cv, x));
  cv.out(n, cv.op("select", {C::a("cond", m), C::a("a", g), C::a("b", x)}));
}

// nonzero: MIL's non_zero has torch's layout ([count, rank] int indices, row-major order)
void nonzero(C& cv, const json& n) {
  Var* x = self(cv, n);
  if (cv.rank(n, x) == 0) cv.fail(n, "nonzero of a 0-d tensor is not supported");
  cv.out(n, cv.op("non_zero", {C::a("x", x)}));
}

// where(condition) with one argument: the coordinates of the true elements, one [count] tensor
// per dim
void where_nonzero(C& cv, const json& n) {
  Var* c = cv.tensor(n, "condition");
  int r = cv.rank(n, c);
  if (r == 0) cv.fail(n, "where(condition) of a 0-d tensor is not supported");
  Var* nz = cv.op("non_zero", {C::a("x", c)});
  std::vector<Var*> outs;
  for (int k = 0; k < r; ++k)
    outs.push_back(cv.op("gather", {C::a("x", nz), C::ai32("indices", k), C::ai32("axis", 1)}));
  cv.outs(n, outs);
}

// masked_select(x, mask): x and mask broadcast together, the elements at true positions in
// row-major order
void masked_select(C& cv, const json& n) {
  Var* x = self(cv, n);
  Var* m = cv.cast(cv.tensor(n, "mask"), DataType::Bool);
  if (C::shape(m) != C::shape(x)) {
    x = cv.op("select",
              {C::a("cond", m), C::a("a", x), C::a("b", x)});  // x broadcast with the mask
    m = expand_to(cv, n, m, C::shape(x));
  }
  if (cv.rank(n, x) == 0) {
    x = cv.e.expand_dims(x, {0});
    m = cv.e.expand_dims(m, {0});
  }
  cv.out(n, mask_index(cv, n, x, m, 0));
}

// take_along_dim(x, idx, dim): x and idx broadcast against each other except along dim, then
// gathered there (negative indices wrap); without dim, both flattened
void take_along_dim(C& cv, const json& n) {
  Var* x = self(cv, n);
  Var* idx = cv.cast(cv.tensor(n, "indices"), DataType::Int32);
  if (!C::has(n, "dim")) {
    x = flat(cv, x);
    idx = flat(cv, idx);
    idx = wrap_index(cv, idx, C::shape(x)[0]);
    cv.out(n, gather_any(cv, "gather_along_axis", x, {C::a("indices", idx), C::ai32("axis", 0)}));
    return;
  }
  int r = cv.rank(n, x);
  if (cv.rank(n, idx) != r) cv.fail(n, "take_along_dim: indices must have the rank of the input");
  int64_t d = cv.axis(n, cv.i(n, "dim", 0), r);
  std::vector<Dim> xs = C::shape(x), is = C::shape(idx);
  for (int k = 0; k < r; ++k) {
    if (k == d) continue;
    size_t u = static_cast<size_t>(k);
    auto one = [](Dim q) { return q->is_const() && q->value() == 1; };
    if (xs[u] == is[u]) continue;
    if (one(xs[u])) xs[u] = is[u];
    else if (one(is[u])) is[u] = xs[u];
    else cv.fail(n, "take_along_dim: sizes " + xs[u]->str() + " and " + is[u]->str() + " do not broadcast");
  }
  if (xs != C::shape(x)) x = expand_to(cv, n, x, xs);
  if (is != C::shape(idx)) idx = expand_to(cv, n, idx, is);
  idx = wrap_index(cv, idx, xs[static_cast<size_t>(d)]);
  cv.out(n, gather_any(cv, "gather_along_axis", x, {C::a("indices", idx), C::ai32("axis", d)}));
}

// index_add(x, dim, index, source, alpha): x with alpha * source's slices added at index along
// dim (repeated indices accumulate)
void index_add(C& cv, const json& n) {
  Var* x = self(cv, n);
  if (C::dtype(x) == DataType::Bool) cv.fail(n, "index_add of a bool tensor is not supported");
  int r = cv.rank(n, x);
  int64_t d = cv.axis(n, cv.i(n, "dim", 0), r);
  Var* idx = cv.cast(cv.tensor(n, "index"), DataType::Int32);
  if (cv.rank(n, idx) == 0) idx = flat(cv, idx);
  Var* src = cv.cast(cv.tensor(n, "source"), C::dtype(x));
  if (r > 0 && cv.rank(n, src) == r - 1) src = cv.op("expand_dims", {C::a("x", src), C::aints32("axes", {d})});
  double alpha = cv.f(n, "alpha", 1);
  if (alpha != 1) src = bin(cv, "mul", src, cv.cs(alpha, C::dtype(x)));
  idx = wrap_index(cv, idx, C::shape(x)[static_cast<size_t>(d)]);
  cv.out(n, cv.op("scatter", {C::a("data", x), C::a("indices", idx), C::a("updates", src), C::ai32("axis", d),
                              C::astr("mode", "add")}));
}

// index_fill(x, dim, index, value): the slices at index along dim set to value (a mask along
// dim, scattered from the indices)
void index_fill(C& cv, const json& n) {
  Var* x = self(cv, n);
  int r = cv.rank(n, x);
  if (r == 0) cv.fail(n, "index_fill of a 0-d tensor is not supported");
  int64_t d = cv.axis(n, cv.i(n, "dim", 0), r);
  Dim L = C::shape(x)[static_cast<size_t>(d)];
  Var* idx = flat(cv, cv.cast(cv.tensor(n, "index"), DataType::Int32));
  idx = wrap_index(cv, idx, L);
  Var* zeros = fill(cv, vec1(cv, L), 0, DataType::Int32);
  Var* ones = fill(cv, shape_of_var(cv, idx), 1, DataType::Int32);
  Var* m = cv.op("scatter", {C::a("data", zeros), C::a("indices", idx), C::a("updates", ones), C::ai32("axis", 0),
                             C::astr("mode", "update")});
  m = cv.cast(m, DataType::Bool);
  std::vector<int64_t> axes;
  for (int k = 0; k < r; ++k)
    if (k != d) axes.push_back(k);
  if (!axes.empty()) m = cv.op("expand_dims", {C::a("x", m), C::aints32("axes", axes)});
  Var* v = C::is_number(n, "value") ? cv.scalar_or_tensor(n, "value", C::dtype(x)) : cv.cast(cv.tensor(n, "value"), C::dtype(x));
  cv.out(n, cv.op("select", {C::a("cond", m), C::a("a", v), C::a("b", x)}));
}

void narrow(C& cv, const json& n) {
  Var* x = self(cv, n);
  int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
  SliceSpec s;
  s.start = cv.i(n, "start", 0);
  s.end = s.start + cv.i(n, "length", 0);
  cv.out(n, slice_axis(cv, n, x, d, s));
}

void index_select(C& cv, const json& n) {
  Var* x = self(cv, n);
  int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
  cv.out(n, gather_any(cv, "gather", x, {C::a("indices", cv.cast(cv.tensor(n, "index"), DataType::Int32)), C::ai32("axis", d)}));
}

void gather_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
  cv.out(n, gather_any(cv, "gather_along_axis", x, {C::a("indices", cv.cast(cv.tensor(n, "index"), DataType::Int32)),
                                        C::ai32("axis", d)}));
}

void index_op(C& cv, const json& n) { cv.out(n, index(cv, n, self(cv, n), cv.tensors(n, "indices"))); }

void index_put_op(C& cv, const json& n) {
  cv.out(n, index_put(cv, n, self(cv, n), cv.tensors(n, "indices"), cv.tensor(n, "values"), cv.bo(n, "accumulate", false)));
}

void index_copy(C& cv, const json& n) {
  Var* x = self(cv, n);
  int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
  Var* src = cv.cast(cv.tensor(n, "source"), C::dtype(x));
  Var* idx = cv.cast(cv.tensor(n, "index"), DataType::Int32);
  cv.out(n, cv.op("scatter", {C::a("data", x), C::a("indices", idx), C::a("updates", src), C::ai32("axis", d),
                              C::astr("mode", "update")}));
}

void scatter_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
  Var* idx = cv.cast(cv.tensor(n, "index"), DataType::Int32);
  Var* src;
  if (C::is_number(n, "value")) {
    src = cv.op("fill", {C::a("shape", shape_of_var(cv, idx)), C::a("value", is_float(C::dtype(x))
                                                                        ? Value::scalar_float(C::dtype(x), cv.f(n, "value", 0))
                                                                        : Value::scalar_int(C::dtype(x), cv.i(n, "value", 0)))});
  } else {
    src = cv.cast(cv.tensor(n, "src"), C::dtype(x));
  }
  std::string reduce = cv.s(n, "reduce", "");
  std::string mode = reduce.empty() ? "update" : reduce == "add" ? "add" : reduce == "multiply" ? "mul" : "";
  if (mode.empty()) cv.fail(n, "scatter reduce '" + reduce + "' is not supported");
  src = leading_block(cv, n, src, idx);
  cv.out(n, TorchScatter(cv, n, x, d, idx)(x, src, mode.c_str()));
}

void scatter_add(C& cv, const json& n) {
  Var* x = self(cv, n);
  int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
  Var* idx = cv.cast(cv.tensor(n, "index"), DataType::Int32);
  Var* src = leading_block(cv, n, cv.cast(cv.tensor(n, "src"), C::dtype(x)), idx);
  cv.out(n, TorchScatter(cv, n, x, d, idx)(x, src, "add"));
}

void slice_scatter(C& cv, const json& n) {
  Var* x = self(cv, n);
  Var* src = cv.cast(cv.tensor(n, "src"), C::dtype(x));
  int r = cv.rank(n, x);
  int64_t d = cv.axis(n, cv.i(n, "dim", 0), r);
  Bound st = bound(cv, n, "start", x, d), en = bound(cv, n, "end", x, d);
  std::optional<int64_t> start, end;
  if (st.v && *st.v != 0) start = *st.v;
  if (en.v && *en.v < kBig) end = *en.v;
  cv.out(n, cv.slice_update_axis(x, src, d, start, st.dim, end, en.dim, cv.i(n, "step", 1)));
}

void select_scatter(C& cv, const json& n) {
  Var* x = self(cv, n);
  int r = cv.rank(n, x);
  int64_t d = cv.axis(n, cv.i(n, "dim", 0), r);
  int64_t idx = cv.i(n, "index", 0);
  Var* src = cv.op("expand_dims", {C::a("x", cv.cast(cv.tensor(n, "src"), C::dtype(x))), C::aints32("axes", {d})});
  std::optional<int64_t> stop;
  if (idx != -1) stop = idx + 1;
  cv.out(n, cv.slice_update_axis(x, src, d, idx, nullptr, stop, nullptr, 1));
}

void one_hot(C& cv, const json& n) {
  Var* x = cv.cast(self(cv, n), DataType::Int32);
  int64_t k = cv.i(n, "num_classes", -1);
  if (k < 0) cv.fail(n, "one_hot needs num_classes (the count from the data is data-dependent)");
  cv.out(n, cv.op("one_hot", {C::a("indices", x), C::ai32("one_hot_vector_size", k), C::ai32("axis", -1),
                              C::a("on_value", Value::scalar_int(DataType::Int32, 1)),
                              C::a("off_value", Value::scalar_int(DataType::Int32, 0))}));
}

}  // namespace

void register_indexing(OpTable& t) {
  t.on("aten.scatter_reduce.two", scatter_reduce);
  t.on("aten.masked_scatter", masked_scatter);
  t.on({"aten.nonzero", "aten.argwhere"}, nonzero);
  t.on("aten.where.default", where_nonzero);
  t.on("aten.masked_select", masked_select);
  t.on("aten.take_along_dim", take_along_dim);
  t.on("aten.index_add", index_add);
  t.on("aten.index_fill", index_fill);
  t.on("aten.slice", slice);
  t.on("aten.slice_copy", slice);
  t.on("aten.select", select);
  t.on("aten.select_copy", select);
  t.on({"aten.narrow", "aten.narrow_copy"}, narrow);
  t.on("aten.index_select", index_select);
  t.on("aten.gather", gather_op);
  t.on({"aten.index.Tensor", "aten._unsafe_index.Tensor"}, index_op);
  t.on({"aten.index_put", "aten._unsafe_index_put"}, index_put_op);
  t.on("aten.index_copy", index_copy);
  t.on("aten.scatter", scatter_op);
  t.on("aten.scatter_add", scatter_add);
  t.on("aten.slice_scatter", slice_scatter);
  t.on("aten.select_scatter", select_scatter);
  t.on("aten.one_hot", one_hot);
}

}  // namespace torch_detail
}  // namespace milkit
