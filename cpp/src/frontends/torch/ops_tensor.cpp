// ATen tensor operators: views and reshapes, concatenation and splitting, slicing and indexing
// (select, index, gather, scatter, index_put, index_copy, slice/select_scatter), copies and
// casts, factories (zeros, full, arange, *_like), padding, flips, triangles, top-k and sorting.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "converter.h"

namespace milkit {
namespace torch_detail {

namespace {

using C = Converter;

Var* bin(C& cv, const char* op, Var* x, Var* y) { return cv.op(op, {C::a("x", x), C::a("y", y)}); }

Var* self(C& cv, const json& n) { return C::has(n, "self") ? cv.tensor(n, "self") : cv.tensor(n, "input"); }

const int64_t kBig = std::numeric_limits<int64_t>::max() / 2;

// A gather-family op on x of any dtype: MIL's gathers do not take bool, so a bool x goes
// through int32 and back.
Var* gather_any(C& cv, const char* type, Var* x, std::vector<Arg> rest) {
  bool b = C::dtype(x) == DataType::Bool;
  rest.insert(rest.begin(), C::a("x", b ? cv.cast(x, DataType::Int32) : x));
  Var* y = cv.op(type, std::move(rest));
  return b ? cv.cast(y, DataType::Bool) : y;
}

// A shape built from pieces: literal ints or dims of `x` (by index).
struct Piece {
  bool from_x;
  int64_t v;
};
Var* build_shape(C& cv, Var* x, const std::vector<Piece>& ps) {
  bool all_const = true;
  std::vector<int64_t> lit;
  for (auto& p : ps) {
    if (p.from_x) {
      Dim d = C::shape(x)[static_cast<size_t>(p.v)];
      if (!d->is_const()) {
        all_const = false;
        break;
      }
      lit.push_back(d->value());
    } else {
      lit.push_back(p.v);
    }
  }
  if (all_const) return cv.ci(lit);
  Var* s = cv.op("shape", {C::a("x", x)});
  Arg vals{"values", {}, true};
  for (auto& p : ps) {
    Var* piece;
    if (p.from_x && !C::shape(x)[static_cast<size_t>(p.v)]->is_const())
      piece = cv.op("slice_by_index", {C::a("x", s), C::aints32("begin", {p.v}), C::aints32("end", {p.v + 1})});
    else
      piece = cv.ci({p.from_x ? C::shape(x)[static_cast<size_t>(p.v)]->value() : p.v});
    vals.items.push_back(ArgItem{piece, nullptr});
  }
  return cv.op("concat", {vals, C::ai32("axis", 0)});
}

// A torch size list (ints and SymInts) as a MIL shape; sizes equal to x's dims are read from x.
Var* size_shape(C& cv, const std::vector<Dim>& ds, Var* like = nullptr) {
  bool all_const = std::all_of(ds.begin(), ds.end(), [](Dim d) { return d->is_const(); });
  if (all_const || !like) return cv.shape_var(ds);
  std::vector<Piece> ps;
  bool ok = true;
  for (Dim d : ds) {
    if (d->is_const()) {
      ps.push_back({false, d->value()});
      continue;
    }
    bool found = false;
    for (size_t k = 0; k < C::shape(like).size(); ++k)
      if (C::shape(like)[k] == d) {
        ps.push_back({true, static_cast<int64_t>(k)});
        found = true;
        break;
      }
    if (!found) {
      ok = false;
      break;
    }
  }
  if (ok) return build_shape(cv, like, ps);
  return cv.shape_var(ds);
}

Var* reshape(C& cv, Var* x, Var* shape) { return cv.op("reshape", {C::a("x", x), C::a("shape", shape)}); }

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

// Broadcasts `x` to `ds` (torch's expand: -1 keeps the dim).
Var* expand_to(C& cv, const json& n, Var* x, std::vector<Dim> ds) {
  int r = cv.rank(n, x);
  int nr = static_cast<int>(ds.size());
  if (nr < r) cv.fail(n, "expand to fewer dims than the tensor has");
  for (int k = 0; k < nr; ++k) {
    if (ds[static_cast<size_t>(k)]->is_const() && ds[static_cast<size_t>(k)]->value() == -1) {
      if (k < nr - r) cv.fail(n, "expand: -1 is not allowed for a new leading dim");
      ds[static_cast<size_t>(k)] = C::shape(x)[static_cast<size_t>(k - (nr - r))];
    }
  }
  if (nr > r) {
    std::vector<int64_t> axes;
    for (int k = 0; k < nr - r; ++k) axes.push_back(k);
    x = cv.op("expand_dims", {C::a("x", x), C::aints32("axes", axes)});
  }
  std::vector<int64_t> reps(static_cast<size_t>(nr), 1);
  bool static_ok = true;
  for (int k = 0; k < nr; ++k) {
    Dim src = C::shape(x)[static_cast<size_t>(k)], dst = ds[static_cast<size_t>(k)];
    if (src == dst) continue;
    if (src->is_const() && src->value() == 1 && dst->is_const()) {
      reps[static_cast<size_t>(k)] = dst->value();
      continue;
    }
    static_ok = false;
  }
  if (static_ok) {
    if (std::all_of(reps.begin(), reps.end(), [](int64_t v) { return v == 1; })) return cv.op("identity", {C::a("x", x)});
    return cv.op("tile", {C::a("x", x), C::aints32("reps", reps)});
  }
  // symbolic: broadcast through select against a filled tensor of the target shape
  Var* shp = size_shape(cv, ds, x);
  Var* t = cv.op("fill", {C::a("shape", shp), C::a("value", Value::scalar_bool(true))});
  return cv.op("select", {C::a("cond", t), C::a("a", x), C::a("b", x)});
}

// begin/end of a torch slice on an axis of size `size` (nullopt end: to the end)
struct SliceSpec {
  int64_t start = 0;
  std::optional<int64_t> end;
  int64_t step = 1;
};

Var* slice_axis(C& cv, const json& n, Var* x, int64_t dim, const SliceSpec& s, Var* start_var = nullptr,
                Var* end_var = nullptr) {
  int r = cv.rank(n, x);
  std::vector<int64_t> begin(static_cast<size_t>(r), 0), end(static_cast<size_t>(r), 0), stride(static_cast<size_t>(r), 1);
  std::vector<int64_t> bm(static_cast<size_t>(r), 1), em(static_cast<size_t>(r), 1);
  size_t d = static_cast<size_t>(dim);
  begin[d] = s.start;
  bm[d] = s.start == 0 ? 1 : 0;
  if (s.end) {
    end[d] = *s.end;
    em[d] = 0;
  }
  stride[d] = s.step;
  std::vector<Arg> args{C::a("x", x)};
  auto vec_with = [&](const std::vector<int64_t>& base, Var* v) -> Var* {
    // base with element d replaced by the scalar var v
    Arg vals{"values", {}, true};
    if (d > 0) vals.items.push_back(ArgItem{cv.ci(std::vector<int64_t>(base.begin(), base.begin() + static_cast<long>(d))), nullptr});
    vals.items.push_back(ArgItem{cv.op("expand_dims", {C::a("x", cv.cast(v, DataType::Int32)), C::aints32("axes", {0})}), nullptr});
    if (d + 1 < base.size())
      vals.items.push_back(ArgItem{cv.ci(std::vector<int64_t>(base.begin() + static_cast<long>(d) + 1, base.end())), nullptr});
    return cv.op("concat", {vals, C::ai32("axis", 0)});
  };
  if (start_var) {
    bm[d] = 0;
    args.push_back(C::a("begin", vec_with(begin, start_var)));
  } else {
    args.push_back(C::aints32("begin", begin));
  }
  if (end_var) {
    em[d] = 0;
    args.push_back(C::a("end", vec_with(end, end_var)));
  } else {
    args.push_back(C::aints32("end", end));
  }
  args.push_back(C::aints32("stride", stride));
  args.push_back(C::a("begin_mask", Value::from_ints(DataType::Bool, {r}, bm)));
  args.push_back(C::a("end_mask", Value::from_ints(DataType::Bool, {r}, em)));
  return cv.op("slice_by_index", std::move(args));
}

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

// [x, y, ...] cast to one dtype (torch's promotion over the list; empty 1-d tensors dropped)
std::vector<Var*> promote_all(C& cv, std::vector<Var*> vs, std::optional<DataType> want) {
  std::vector<Var*> kept;
  for (Var* v : vs) {
    if (v->type()->has_rank() && v->type()->rank() == 1 && C::shape(v)[0]->is_const() && C::shape(v)[0]->value() == 0 && vs.size() > 1)
      continue;
    kept.push_back(v);
  }
  if (kept.empty()) kept.push_back(vs[0]);
  DataType dt = want ? *want : C::dtype(kept[0]);
  if (!want)
    for (Var* v : kept) dt = C::promote(kept[0], v) == C::dtype(v) ? C::dtype(v) : dt;
  for (auto& v : kept) v = cv.cast(v, dt);
  return kept;
}

Arg values_arg(const std::vector<Var*>& vs) {
  Arg a{"values", {}, true};
  for (Var* v : vs) a.items.push_back(ArgItem{v, nullptr});
  return a;
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

Var* fill(C& cv, Var* shape, double v, DataType dt) {
  if (auto& sv = shape->value(); sv && !sv->is_symbolic()) {
    auto s = sv->to_ints();
    int64_t numel = 1;
    for (auto d : s) numel *= d;
    if (numel <= 64) return cv.c(Value::from_doubles(dt, s, std::vector<double>(static_cast<size_t>(numel), v)));
  }
  return cv.op("fill", {C::a("shape", shape), C::a("value", is_float(dt) ? Value::scalar_float(dt, v)
                                                             : dt == DataType::Bool ? Value::scalar_bool(v != 0)
                                                                                    : Value::scalar_int(dt, static_cast<int64_t>(v)))});
}

DataType factory_dtype(C& cv, const json& n, Var* like, DataType def) {
  if (auto d = cv.dtype_arg(n, "dtype")) return *d;
  if (auto od = cv.out_dtype(n)) return *od;
  return like ? C::dtype(like) : def;
}

Var* shape_of_var(C& cv, Var* x) {
  if (auto s = C::static_shape(x)) return cv.ci(*s);
  return cv.op("shape", {C::a("x", x)});
}

// the mask (j - i <= k) over the last two dims of x (tril) or (j - i >= k) (triu)
Var* tri_mask(C& cv, const json& n, Var* x, int64_t k, bool lower) {
  int r = cv.rank(n, x);
  if (r < 2) cv.fail(n, "tril/triu need rank >= 2");
  Dim H = C::shape(x)[static_cast<size_t>(r - 2)], W = C::shape(x)[static_cast<size_t>(r - 1)];
  auto range = [&](Dim d) {
    return cv.op("range_1d", {C::a("end", cv.dim_var(d)), C::a("start", Value::scalar_int(DataType::Int32, 0)),
                              C::a("step", Value::scalar_int(DataType::Int32, 1))});
  };
  Var* i = cv.op("expand_dims", {C::a("x", range(H)), C::aints32("axes", {1})});
  Var* j = cv.op("expand_dims", {C::a("x", range(W)), C::aints32("axes", {0})});
  Var* diff = bin(cv, "sub", j, i);
  return bin(cv, lower ? "less_equal" : "greater_equal", diff, cv.cs(static_cast<double>(k), DataType::Int32));
}

// torch's pad list (last dim first, pairs) as MIL's (first dim first) for rank r
std::vector<int64_t> mil_pad(const std::vector<int64_t>& p, int r) {
  std::vector<int64_t> out(static_cast<size_t>(2 * r), 0);
  for (size_t k = 0; 2 * k < p.size(); ++k) {
    size_t axis = static_cast<size_t>(r) - 1 - k;
    out[2 * axis] = p[2 * k];
    out[2 * axis + 1] = 2 * k + 1 < p.size() ? p[2 * k + 1] : 0;
  }
  return out;
}

Var* pad(C& cv, const json& n, Var* x, const std::vector<int64_t>& tp, const std::string& mode, double value) {
  int r = cv.rank(n, x);
  if (tp.size() % 2 || tp.size() / 2 > static_cast<size_t>(r)) cv.fail(n, "pad has " + std::to_string(tp.size()) + " values for rank " + std::to_string(r));
  auto p = mil_pad(tp, r);
  // negative pads crop
  bool neg = std::any_of(p.begin(), p.end(), [](int64_t v) { return v < 0; });
  if (neg) {
    for (int k = 0; k < r; ++k) {
      int64_t b = p[static_cast<size_t>(2 * k)], e = p[static_cast<size_t>(2 * k + 1)];
      if (b >= 0 && e >= 0) continue;
      SliceSpec s;
      s.start = b < 0 ? -b : 0;
      if (e < 0) s.end = e;
      x = slice_axis(cv, n, x, k, s);
      if (b < 0) p[static_cast<size_t>(2 * k)] = 0;
      if (e < 0) p[static_cast<size_t>(2 * k + 1)] = 0;
    }
  }
  if (std::all_of(p.begin(), p.end(), [](int64_t v) { return v == 0; })) return cv.op("identity", {C::a("x", x)});
  std::vector<Arg> args{C::a("x", x), C::aints32("pad", p), C::astr("mode", mode)};
  if (mode == "constant") args.push_back(C::a("constant_val", is_float(C::dtype(x)) ? Value::scalar_float(C::dtype(x), value)
                                                                                    : Value::scalar_int(C::dtype(x), static_cast<int64_t>(value))));
  return cv.op("pad", std::move(args));
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
Stacked stack_indices(C& cv, const json& n, Var* x, const std::vector<Var*>& idx, const std::vector<int64_t>& pos) {
  Stacked r;
  int rank = cv.rank(n, x);
  for (auto p : pos) r.perm.push_back(p);
  for (int k = 0; k < rank; ++k)
    if (std::find(pos.begin(), pos.end(), k) == pos.end()) r.perm.push_back(k);
  for (size_t k = 0; k < r.perm.size(); ++k) r.ident = r.ident && r.perm[k] == static_cast<int64_t>(k);
  r.xt = r.ident ? x : cv.op("transpose", {C::a("x", x), C::aints32("perm", r.perm)});
  for (auto p : pos) r.is.push_back(cv.cast(idx[static_cast<size_t>(p)], DataType::Int32));
  Var* acc = r.is[0];
  for (size_t k = 1; k < r.is.size(); ++k) acc = bin(cv, "add", acc, bin(cv, "mul", r.is[k], cv.cs(0, DataType::Int32)));
  for (auto& v : r.is) v = bin(cv, "add", v, bin(cv, "mul", acc, cv.cs(0, DataType::Int32)));
  r.ir = cv.rank(n, r.is[0]);
  r.st = cv.op("stack", {values_arg(r.is), C::ai32("axis", r.ir)});
  return r;
}

// advanced indexing x[i0, i1, ...] (None entries are full slices)
Var* index(C& cv, const json& n, Var* x, const std::vector<Var*>& idx) {
  (void)cv.rank(n, x);  // fails clearly when the rank is unknown
  std::vector<int64_t> pos;
  for (size_t k = 0; k < idx.size(); ++k)
    if (idx[k]) {
      if (C::dtype(idx[k]) == DataType::Bool) cv.fail(n, "indexing with a bool mask gives a data-dependent shape, which Core ML cannot express");
      pos.push_back(static_cast<int64_t>(k));
    }
  if (pos.empty()) return cv.op("identity", {C::a("x", x)});
  if (pos.size() == 1) {
    Var* i = cv.cast(idx[static_cast<size_t>(pos[0])], DataType::Int32);
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

// ---- more tensor operators ----------------------------------------------------------------------

// [0, 1, ..., d - 1] as int32
Var* range_of(C& cv, Dim d) {
  return cv.op("range_1d", {C::a("end", cv.dim_var(d)), C::a("start", Value::scalar_int(DataType::Int32, 0)),
                            C::a("step", Value::scalar_int(DataType::Int32, 1))});
}

// a rank-1 int32 vector [d]
Var* vec1(C& cv, Dim d) {
  if (d->is_const()) return cv.ci({d->value()});
  return cv.op("expand_dims", {C::a("x", cv.dim_var(d)), C::aints32("axes", {0})});
}

// x as rank 1
Var* flat(C& cv, Var* x) { return reshape(cv, x, cv.ci({-1})); }

Var* transpose2(C& cv, Var* x, int r, int64_t a, int64_t b) {
  std::vector<int64_t> p(static_cast<size_t>(r));
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[static_cast<size_t>(a)], p[static_cast<size_t>(b)]);
  return cv.op("transpose", {C::a("x", x), C::aints32("perm", p)});
}

// negative indices into an axis of size `len` wrapped (i < 0 -> i + len)
Var* wrap_index(C& cv, Var* idx, Dim len) {
  Var* neg = bin(cv, "less", idx, cv.cs(0, DataType::Int32));
  return cv.op("select", {C::a("cond", neg), C::a("a", bin(cv, "add", idx, cv.dim_var(len))), C::a("b", idx)});
}

// A scan along `dim` of a tensor whose length there is known (see aten.cumprod).
struct Scan {
  C& cv;
  const json& n;
  int64_t dim = 0, len = 0;
  int r = 0;
  Scan(C& c, const json& node, Var* x, int64_t d) : cv(c), n(node) {
    r = cv.rank(n, x);
    if (r == 0) cv.fail(n, "a cumulative op needs at least one dim");
    dim = cv.axis(n, d, r);
    Dim L = C::shape(x)[static_cast<size_t>(dim)];
    if (!L->is_const()) cv.fail(n, "a cumulative product / max / min / logsumexp along a symbolic dim is not supported");
    len = L->value();
  }
  // x moved k places later along the dim, the first k entries `fill`
  Var* shift(Var* x, int64_t k, double fill) const {
    SliceSpec head;
    head.end = len - k;
    Var* h = slice_axis(cv, n, x, dim, head);
    DataType dt = C::dtype(x);
    if (!is_float(dt)) {
      // MIL pads floats only: ints get x[:k] * 0 + fill in front
      SliceSpec front;
      front.end = k;
      Var* f = bin(cv, "add", bin(cv, "mul", slice_axis(cv, n, x, dim, front), cv.cs(0, dt)),
                   cv.cs(fill, dt));
      return cv.op("concat", {values_arg({f, h}), C::ai32("axis", dim)});
    }
    std::vector<int64_t> pad(2 * static_cast<size_t>(r), 0);
    pad[2 * static_cast<size_t>(dim)] = k;
    return cv.op("pad", {C::a("x", h), C::aints32("pad", pad), C::astr("mode", "constant"),
                         C::a("constant_val", Value::scalar_float(dt, fill))});
  }
};

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

// meshgrid(tensors, indexing): each 0-d / 1-d input laid along its own axis and broadcast to the
// grid; "xy" swaps the first two axes of the grid
void meshgrid(C& cv, const json& n) {
  auto vs = cv.tensors(n, "tensors");
  std::string ix = cv.s(n, "indexing", "ij");
  if (ix != "ij" && ix != "xy") cv.fail(n, "meshgrid indexing '" + ix + "' is not supported");
  size_t N = vs.size();
  std::vector<Dim> lens;
  for (auto& v : vs) {
    int r = cv.rank(n, v);
    if (r > 1) cv.fail(n, "meshgrid takes 0-d or 1-d tensors");
    if (r == 0) v = cv.op("expand_dims", {C::a("x", v), C::aints32("axes", {0})});
    lens.push_back(C::shape(v)[0]);
  }
  std::vector<size_t> ax(N);
  std::iota(ax.begin(), ax.end(), 0);
  if (ix == "xy" && N >= 2) std::swap(ax[0], ax[1]);
  std::vector<Dim> grid(N);
  for (size_t k = 0; k < N; ++k) grid[ax[k]] = lens[k];
  std::vector<Var*> outs;
  for (size_t k = 0; k < N; ++k) {
    std::vector<int64_t> axes;
    for (size_t a = 0; a < N; ++a)
      if (a != ax[k]) axes.push_back(static_cast<int64_t>(a));
    Var* v = axes.empty() ? vs[k] : cv.op("expand_dims", {C::a("x", vs[k]), C::aints32("axes", axes)});
    outs.push_back(expand_to(cv, n, v, grid));
  }
  cv.outs(n, outs);
}

// pad(x, p, "circular"): per padded axis, negative pads crop first, then the axis wraps around
// ([x[L-b:], x, x[:e]]); torch requires pads no larger than the (cropped) size
Var* circular_pad(C& cv, const json& n, Var* x, const std::vector<int64_t>& tp) {
  int r = cv.rank(n, x);
  if (tp.size() % 2 || tp.size() / 2 > static_cast<size_t>(r)) cv.fail(n, "pad has " + std::to_string(tp.size()) + " values for rank " + std::to_string(r));
  auto p = mil_pad(tp, r);
  for (int k = 0; k < r; ++k) {
    int64_t b = p[static_cast<size_t>(2 * k)], e = p[static_cast<size_t>(2 * k + 1)];
    if (b == 0 && e == 0) continue;
    Dim sz = C::shape(x)[static_cast<size_t>(k)];
    if (!sz->is_const()) cv.fail(n, "circular padding of a symbolic dim (" + sz->str() + ") is not supported");
    int64_t L = sz->value();
    if (b < 0 || e < 0) {
      SliceSpec s;
      s.start = std::max<int64_t>(-b, 0);
      s.end = L - std::max<int64_t>(-e, 0);
      if (*s.end <= s.start) cv.fail(n, "circular pad crops the whole dim");
      x = slice_axis(cv, n, x, k, s);
      L = *s.end - s.start;
    }
    if (b > L || e > L) cv.fail(n, "circular padding larger than the dim (" + std::to_string(L) + ")");
    std::vector<Var*> parts;
    if (b > 0) {
      SliceSpec s;
      s.start = L - b;
      parts.push_back(slice_axis(cv, n, x, k, s));
    }
    parts.push_back(x);
    if (e > 0) {
      SliceSpec s;
      s.end = e;
      parts.push_back(slice_axis(cv, n, x, k, s));
    }
    if (parts.size() > 1) x = cv.op("concat", {values_arg(parts), C::ai32("axis", k)});
  }
  return x;
}

// a linspace end point: a number, or a tensor of known value
double known_number(C& cv, const json& n, const char* name) {
  if (C::is_number(n, name)) return cv.f(n, name, 0);
  const Value* v = cv.known(C::tensor_name(n, name));
  if (!v || v->numel() != 1) cv.fail(n, std::string("linspace with a computed '") + name + "' is not supported");
  return v->as_double(0);
}

void register_more(OpTable& t) {
  t["aten.scatter_reduce.two"] = scatter_reduce;
  t["aten.masked_scatter"] = masked_scatter;
  t["aten.empty_strided"] = [](C& cv, const json& n) {
    DataType dt = factory_dtype(cv, n, nullptr, DataType::Float32);
    cv.out(n, fill(cv, cv.shape_var(cv.dims(n, "size")), 0, dt));
  };
  t["aten.new_empty_strided"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    DataType dt = factory_dtype(cv, n, x, C::dtype(x));
    cv.out(n, fill(cv, size_shape(cv, cv.dims(n, "size"), x), 0, dt));
  };
  // nonzero: MIL's non_zero has torch's layout ([count, rank] int indices, row-major order)
  t["aten.nonzero"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    if (cv.rank(n, x) == 0) cv.fail(n, "nonzero of a 0-d tensor is not supported");
    cv.out(n, cv.op("non_zero", {C::a("x", x)}));
  };
  t["aten.argwhere"] = t["aten.nonzero"];
  t["aten.tensor_split"] = tensor_split;
  t["aten.meshgrid"] = meshgrid;
  t["aten.diag"] = diag;
  t["aten.trace"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    if (cv.rank(n, x) != 2) cv.fail(n, "trace takes a matrix");
    Var* dg = diag_of(cv, n, x, 0);
    // ints and bools sum as int64 (int32 here)
    dg = cv.cast(dg, cv.out_dtype(n).value_or(C::dtype(dg) == DataType::Bool ? DataType::Int32 : C::dtype(dg)));
    cv.out(n, cv.op("reduce_sum", {C::a("x", dg), C::aints32("axes", {0}), C::abool("keep_dims", false)}));
  };
  // rot90(x, k, dims): k = 1 flips dims[1] then swaps the dims, k = 2 flips both, k = 3 flips
  // dims[0] then swaps
  t["aten.rot90"] = [](C& cv, const json& n) {
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
  };
  // linspace(start, end, steps): torch's kernel: step = (end - start) / (steps - 1), the first
  // half start + i * step, the second half end - (steps - 1 - i) * step (integers truncated)
  t["aten.linspace"] = [](C& cv, const json& n) {
    double s = known_number(cv, n, "start"), e = known_number(cv, n, "end");
    int64_t steps = cv.i(n, "steps", 0);
    if (steps <= 0) cv.fail(n, "linspace with " + std::to_string(steps) + " steps is empty, which Core ML cannot hold");
    DataType dt = factory_dtype(cv, n, nullptr, DataType::Float32);
    bool ints = !is_float(dt);
    if (ints) s = std::trunc(s), e = std::trunc(e);
    std::vector<double> v(static_cast<size_t>(steps));
    double step = steps > 1 ? (e - s) / static_cast<double>(steps - 1) : 0;
    for (int64_t i = 0; i < steps; ++i) {
      double y = i < steps / 2 ? s + step * static_cast<double>(i) : e - step * static_cast<double>(steps - 1 - i);
      v[static_cast<size_t>(i)] = ints ? std::trunc(y) : y;
    }
    if (steps == 1) v[0] = s;
    cv.out(n, cv.c(Value::from_doubles(dt, {steps}, v)));
  };
  // tri*_indices(row, col, offset): the (row, col) pairs of the triangle in row-major order
  auto tri_indices = [](bool lower) {
    return [lower](C& cv, const json& n) {
      int64_t rows = cv.i(n, "row", 0), cols = cv.i(n, "col", 0), off = cv.i(n, "offset", 0);
      std::vector<int64_t> is, js;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          if (lower ? j - i <= off : j - i >= off) is.push_back(i), js.push_back(j);
      if (is.empty()) cv.fail(n, "the triangle has no indices (an empty tensor, which Core ML cannot hold)");
      int64_t cnt = static_cast<int64_t>(is.size());
      is.insert(is.end(), js.begin(), js.end());
      DataType dt = factory_dtype(cv, n, nullptr, DataType::Int32);
      cv.out(n, cv.c(Value::from_ints(dt, {2, cnt}, is)));
    };
  };
  t["aten.triu_indices"] = tri_indices(false);
  t["aten.tril_indices"] = tri_indices(true);
  // take_along_dim(x, idx, dim): x and idx broadcast against each other except along dim, then
  // gathered there (negative indices wrap); without dim, both flattened
  t["aten.take_along_dim"] = [](C& cv, const json& n) {
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
  };
  // index_add(x, dim, index, source, alpha): x with alpha * source's slices added at index along
  // dim (repeated indices accumulate)
  t["aten.index_add"] = [](C& cv, const json& n) {
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
  };
  // index_fill(x, dim, index, value): the slices at index along dim set to value (a mask along
  // dim, scattered from the indices)
  t["aten.index_fill"] = [](C& cv, const json& n) {
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
  };
  t["aten.mT"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    int r = cv.rank(n, x);
    if (r < 2) cv.fail(n, "mT needs at least 2 dims");
    cv.out(n, transpose2(cv, x, r, r - 2, r - 1));
  };
  // eye(n, m): i == j over an n x m grid
  t["aten.eye"] = [](C& cv, const json& n) {
    DataType dt = factory_dtype(cv, n, nullptr, DataType::Float32);
    const json* na = C::arg(n, "n");
    const json* ma = C::arg(n, "m");
    Dim N = na ? cv.sym_dim(*na) : cv.ctx().constant(0);
    Dim M = ma ? cv.sym_dim(*ma) : N;
    Var* i = cv.op("expand_dims", {C::a("x", range_of(cv, N)), C::aints32("axes", {1})});
    Var* j = cv.op("expand_dims", {C::a("x", range_of(cv, M)), C::aints32("axes", {0})});
    cv.out(n, cv.cast(bin(cv, "equal", i, j), dt));
  };
  // outer(x, y) = x[:, None] * y[None, :]; kron: x's and y's dims interleaved, multiplied, merged
  auto times = [](C& cv, const json& n, Var* x, Var* y) {
    if (C::dtype(x) == DataType::Bool && C::dtype(y) == DataType::Bool) return bin(cv, "logical_and", x, y);
    auto [a, b] = cv.promoted(n, x, y);
    return bin(cv, "mul", a, b);
  };
  t["aten.outer"] = [times](C& cv, const json& n) {
    Var* x = self(cv, n);
    Var* y = cv.tensor(n, "vec2");
    if (cv.rank(n, x) != 1 || cv.rank(n, y) != 1) cv.fail(n, "outer takes two 1-d tensors");
    x = cv.op("expand_dims", {C::a("x", x), C::aints32("axes", {1})});
    y = cv.op("expand_dims", {C::a("x", y), C::aints32("axes", {0})});
    cv.out(n, times(cv, n, x, y));
  };
  t["aten.kron"] = [times](C& cv, const json& n) {
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
  };
  // cross(a, b, dim): a[i+1] b[i+2] - a[i+2] b[i+1] along the size-3 dim (a and b broadcast);
  // aten.cross without dim takes the first dim of size 3
  t["aten.linalg_cross"] = [](C& cv, const json& n) {
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
  };
  t["aten.cross"] = t["aten.linalg_cross"];
  // channel_shuffle(x, g): channels viewed as [g, C / g], transposed to [C / g, g], flattened
  t["aten.channel_shuffle"] = [](C& cv, const json& n) {
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
  };
  t["aten.native_channel_shuffle"] = t["aten.channel_shuffle"];
}

}  // namespace

void register_tensor(OpTable& t) {
  register_more(t);
  t["aten.view"] = view;
  t["aten._unsafe_view"] = view;
  t["aten.reshape"] = view;
  t["aten.view_copy"] = view;
  t["aten._reshape_alias"] = view;
  t["aten.view_as"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    cv.out(n, reshape(cv, x, shape_of_var(cv, cv.tensor(n, "other"))));
  };
  t["aten.reshape_as"] = t["aten.view_as"];
  t["aten.flatten"] = [](C& cv, const json& n) {
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
  };
  t["aten.unflatten"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    int r = cv.rank(n, x);
    int64_t d = cv.axis(n, cv.i(n, "dim", 0), r);
    auto sizes = cv.ints(n, "sizes");
    std::vector<Piece> ps;
    for (int64_t k = 0; k < d; ++k) ps.push_back({true, k});
    for (auto s : sizes) ps.push_back({false, s});
    for (int64_t k = d + 1; k < r; ++k) ps.push_back({true, k});
    cv.out(n, reshape(cv, x, build_shape(cv, x, ps)));
  };
  t["aten.permute"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    int r = cv.rank(n, x);
    auto p = cv.ints(n, "dims");
    for (auto& v : p) v = cv.axis(n, v, r);
    cv.out(n, cv.op("transpose", {C::a("x", x), C::aints32("perm", p)}));
  };
  t["aten.permute_copy"] = t["aten.permute"];
  t["aten.transpose"] = [](C& cv, const json& n) {
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
  };
  t["aten.swapaxes"] = t["aten.transpose"];
  t["aten.swapdims"] = t["aten.transpose"];
  t["aten.t"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    if (cv.rank(n, x) < 2) cv.out(n, cv.op("identity", {C::a("x", x)}));
    else cv.out(n, cv.op("transpose", {C::a("x", x), C::aints32("perm", {1, 0})}));
  };
  t["aten.numpy_T"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    int r = cv.rank(n, x);
    std::vector<int64_t> p;
    for (int k = r - 1; k >= 0; --k) p.push_back(k);
    cv.out(n, cv.op("transpose", {C::a("x", x), C::aints32("perm", p)}));
  };
  t["aten.movedim"] = [](C& cv, const json& n) {
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
  };
  t["aten.unsqueeze"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x) + 1);
    cv.out(n, cv.op("expand_dims", {C::a("x", x), C::aints32("axes", {d})}));
  };
  t["aten.unsqueeze_copy"] = t["aten.unsqueeze"];
  t["aten.squeeze"] = [](C& cv, const json& n) {
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
  };
  t["aten.squeeze_copy"] = t["aten.squeeze"];
  t["aten.expand"] = [](C& cv, const json& n) { cv.out(n, expand_to(cv, n, self(cv, n), cv.dims(n, "size"))); };
  t["aten.expand_copy"] = t["aten.expand"];
  t["aten.expand_as"] = [](C& cv, const json& n) {
    Var* o = cv.tensor(n, "other");
    cv.out(n, expand_to(cv, n, self(cv, n), C::shape(o)));
  };
  t["aten.broadcast_to"] = t["aten.expand"];
  t["aten.repeat"] = [](C& cv, const json& n) {
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
  };
  t["aten.tile"] = [](C& cv, const json& n) {
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
  };
  t["aten.repeat_interleave.self_int"] = [](C& cv, const json& n) {
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
  };

  t["aten.cat"] = [](C& cv, const json& n) {
    auto vs = promote_all(cv, cv.tensors(n, "tensors"), cv.out_dtype(n));
    if (vs.empty()) cv.fail(n, "cat of no tensors");
    int r = cv.rank(n, vs[0]);
    int64_t d = cv.axis(n, cv.i(n, "dim", 0), r);
    if (vs.size() == 1) cv.out(n, cv.op("identity", {C::a("x", vs[0])}));
    else cv.out(n, cv.op("concat", {values_arg(vs), C::ai32("axis", d)}));
  };
  t["aten.concat"] = t["aten.cat"];
  t["aten.concatenate"] = t["aten.cat"];
  t["aten.stack"] = [](C& cv, const json& n) {
    auto vs = promote_all(cv, cv.tensors(n, "tensors"), cv.out_dtype(n));
    int r = cv.rank(n, vs[0]);
    int64_t d = cv.axis(n, cv.i(n, "dim", 0), r + 1);
    if (vs.size() == 1) cv.out(n, cv.op("expand_dims", {C::a("x", vs[0]), C::aints32("axes", {d})}));
    else cv.out(n, cv.op("stack", {values_arg(vs), C::ai32("axis", d)}));
  };
  t["aten.split.Tensor"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
    split_out(cv, n, x, d, split_sizes(cv, n, x, d, cv.i(n, "split_size", 1)));
  };
  t["aten.split_with_sizes"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
    split_out(cv, n, x, d, cv.ints(n, "split_sizes"));
  };
  t["aten.split_with_sizes_copy"] = t["aten.split_with_sizes"];
  t["aten.split.sizes"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
    split_out(cv, n, x, d, cv.ints(n, "split_size"));
  };
  t["aten.chunk"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
    int64_t chunks = cv.i(n, "chunks", 1);
    Dim sz = C::shape(x)[static_cast<size_t>(d)];
    if (!sz->is_const()) cv.fail(n, "chunk of a symbolic dim is not supported");
    int64_t each = (sz->value() + chunks - 1) / chunks;
    split_out(cv, n, x, d, split_sizes(cv, n, x, d, std::max<int64_t>(each, 1)));
  };
  t["aten.unbind"] = [](C& cv, const json& n) {
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
  };
  t["aten.unbind_copy"] = t["aten.unbind"];

  t["aten.slice"] = slice;
  t["aten.slice_copy"] = slice;
  t["aten.select"] = select;
  t["aten.select_copy"] = select;
  t["aten.narrow"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
    SliceSpec s;
    s.start = cv.i(n, "start", 0);
    s.end = s.start + cv.i(n, "length", 0);
    cv.out(n, slice_axis(cv, n, x, d, s));
  };
  t["aten.index_select"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
    cv.out(n, gather_any(cv, "gather", x, {C::a("indices", cv.cast(cv.tensor(n, "index"), DataType::Int32)), C::ai32("axis", d)}));
  };
  t["aten.gather"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
    cv.out(n, gather_any(cv, "gather_along_axis", x, {C::a("indices", cv.cast(cv.tensor(n, "index"), DataType::Int32)),
                                          C::ai32("axis", d)}));
  };
  t["aten.index.Tensor"] = [](C& cv, const json& n) { cv.out(n, index(cv, n, self(cv, n), cv.tensors(n, "indices"))); };
  t["aten.index_put"] = [](C& cv, const json& n) {
    cv.out(n, index_put(cv, n, self(cv, n), cv.tensors(n, "indices"), cv.tensor(n, "values"), cv.bo(n, "accumulate", false)));
  };
  t["aten._unsafe_index_put"] = t["aten.index_put"];
  t["aten._unsafe_index.Tensor"] = t["aten.index.Tensor"];
  t["aten.index_copy"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
    Var* src = cv.cast(cv.tensor(n, "source"), C::dtype(x));
    Var* idx = cv.cast(cv.tensor(n, "index"), DataType::Int32);
    cv.out(n, cv.op("scatter", {C::a("data", x), C::a("indices", idx), C::a("updates", src), C::ai32("axis", d),
                                C::astr("mode", "update")}));
  };
  t["aten.scatter"] = [](C& cv, const json& n) {
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
  };
  t["aten.scatter_add"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
    Var* idx = cv.cast(cv.tensor(n, "index"), DataType::Int32);
    Var* src = leading_block(cv, n, cv.cast(cv.tensor(n, "src"), C::dtype(x)), idx);
    cv.out(n, TorchScatter(cv, n, x, d, idx)(x, src, "add"));
  };
  t["aten.slice_scatter"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    Var* src = cv.cast(cv.tensor(n, "src"), C::dtype(x));
    int r = cv.rank(n, x);
    int64_t d = cv.axis(n, cv.i(n, "dim", 0), r);
    Bound st = bound(cv, n, "start", x, d), en = bound(cv, n, "end", x, d);
    std::optional<int64_t> start, end;
    if (st.v && *st.v != 0) start = *st.v;
    if (en.v && *en.v < kBig) end = *en.v;
    cv.out(n, cv.slice_update_axis(x, src, d, start, st.dim, end, en.dim, cv.i(n, "step", 1)));
  };
  t["aten.select_scatter"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    int r = cv.rank(n, x);
    int64_t d = cv.axis(n, cv.i(n, "dim", 0), r);
    int64_t idx = cv.i(n, "index", 0);
    Var* src = cv.op("expand_dims", {C::a("x", cv.cast(cv.tensor(n, "src"), C::dtype(x))), C::aints32("axes", {d})});
    std::optional<int64_t> stop;
    if (idx != -1) stop = idx + 1;
    cv.out(n, cv.slice_update_axis(x, src, d, idx, nullptr, stop, nullptr, 1));
  };

  // copies and casts
  auto ident = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    if (auto od = cv.out_dtype(n)) x = cv.cast(x, *od);
    cv.out(n, cv.op("identity", {C::a("x", x)}));
  };
  for (const char* name : {"aten.clone", "aten.contiguous", "aten.alias", "aten.detach", "aten.lift_fresh_copy",
                           "aten.lift_fresh", "aten._to_copy", "aten.to", "aten.type_as", "aten.alias_copy",
                           "aten.detach_copy", "aten.resolve_conj", "aten.resolve_neg", "aten.positive",
                           "aten._to_dim_order_copy", "aten.clone_dim_order"})
    t[name] = ident;
  t["aten.copy"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    Var* src = cv.cast(cv.tensor(n, "src"), C::dtype(x));
    if (src->type() == x->type()) cv.out(n, cv.op("identity", {C::a("x", src)}));
    else cv.out(n, expand_to(cv, n, src, C::shape(x)));
  };
  t["aten.fill.Scalar"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    cv.out(n, fill(cv, shape_of_var(cv, x), cv.f(n, "value", 0), C::dtype(x)));
  };
  t["aten.fill.Tensor"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    Var* v = cv.cast(cv.tensor(n, "value"), C::dtype(x));
    cv.out(n, expand_to(cv, n, v, C::shape(x)));
  };
  t["aten.zero"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    cv.out(n, fill(cv, shape_of_var(cv, x), 0, C::dtype(x)));
  };

  // factories
  auto filled = [](double v) {
    return [v](C& cv, const json& n) {
      DataType dt = factory_dtype(cv, n, nullptr, DataType::Float32);
      cv.out(n, fill(cv, cv.shape_var(cv.dims(n, "size")), v, dt));
    };
  };
  t["aten.zeros"] = filled(0);
  t["aten.ones"] = filled(1);
  t["aten.empty.memory_format"] = filled(0);
  t["aten.empty"] = filled(0);
  t["aten.full"] = [](C& cv, const json& n) {
    DataType dt = factory_dtype(cv, n, nullptr, DataType::Float32);
    Var* shp = cv.shape_var(cv.dims(n, "size"));
    if (C::is_number(n, "fill_value") && !(C::arg(n, "fill_value")->contains("as_sym_int"))) {
      cv.out(n, fill(cv, shp, cv.f(n, "fill_value", 0), dt));
      return;
    }
    Var* v = cv.scalar_or_tensor(n, "fill_value", dt);
    cv.out(n, cv.op("fill", {C::a("shape", shp), C::a("value", v)}));
  };
  auto new_filled = [](double v) {
    return [v](C& cv, const json& n) {
      Var* x = self(cv, n);
      DataType dt = factory_dtype(cv, n, x, C::dtype(x));
      cv.out(n, fill(cv, size_shape(cv, cv.dims(n, "size"), x), v, dt));
    };
  };
  t["aten.new_zeros"] = new_filled(0);
  t["aten.new_ones"] = new_filled(1);
  t["aten.new_empty"] = new_filled(0);
  t["aten.new_full"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    DataType dt = factory_dtype(cv, n, x, C::dtype(x));
    cv.out(n, fill(cv, size_shape(cv, cv.dims(n, "size"), x), cv.f(n, "fill_value", 0), dt));
  };
  auto like = [](double v) {
    return [v](C& cv, const json& n) {
      Var* x = self(cv, n);
      DataType dt = factory_dtype(cv, n, x, C::dtype(x));
      cv.out(n, fill(cv, shape_of_var(cv, x), v, dt));
    };
  };
  t["aten.zeros_like"] = like(0);
  t["aten.ones_like"] = like(1);
  t["aten.empty_like"] = like(0);
  t["aten.full_like"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    DataType dt = factory_dtype(cv, n, x, C::dtype(x));
    cv.out(n, fill(cv, shape_of_var(cv, x), cv.f(n, "fill_value", 0), dt));
  };
  t["aten.scalar_tensor"] = [](C& cv, const json& n) {
    DataType dt = factory_dtype(cv, n, nullptr, DataType::Float32);
    cv.out(n, cv.op("identity", {C::a("x", cv.scalar_or_tensor(n, "s", dt))}));
  };
  t["aten.arange"] = [](C& cv, const json& n) {
    DataType dt = factory_dtype(cv, n, nullptr, DataType::Int32);
    // a float range over integer (possibly symbolic) bounds is computed in int32 and cast, so
    // its length stays an expression of the sizes (arange(2 * n, dtype=float) has 2*s0 elements)
    bool ints = true;
    for (const char* name : {"start", "end", "step"}) {
      const json* a = C::arg(n, name);
      if (a && !a->contains("as_int") && !a->contains("as_sym_int")) ints = false;
    }
    DataType rdt = is_float(dt) && ints ? DataType::Int32 : dt;
    auto num = [&](const char* name, double def) -> Var* {
      if (!C::has(n, name)) return cv.cs(def, rdt);
      return cv.scalar_or_tensor(n, name, rdt);
    };
    Var* start = C::has(n, "start") ? num("start", 0) : cv.cs(0, rdt);
    Var* end = num("end", 0);
    Var* step = num("step", 1);
    Var* r = cv.op("range_1d", {C::a("end", end), C::a("start", start), C::a("step", step)});
    cv.out(n, rdt == dt ? r : cv.cast(r, dt));
  };

  // padding
  t["aten.constant_pad_nd"] = [](C& cv, const json& n) {
    cv.out(n, pad(cv, n, self(cv, n), cv.ints(n, "pad"), "constant", cv.f(n, "value", 0)));
  };
  t["aten.pad"] = [](C& cv, const json& n) {
    std::string mode = cv.s(n, "mode", "constant");
    std::string m = mode == "reflect" ? "reflect" : mode == "replicate" ? "replicate" : mode == "constant" ? "constant" : "";
    if (mode == "circular") {
      cv.out(n, circular_pad(cv, n, self(cv, n), cv.ints(n, "pad")));
      return;
    }
    if (m.empty()) cv.fail(n, "pad mode '" + mode + "' is not supported");
    cv.out(n, pad(cv, n, self(cv, n), cv.ints(n, "pad"), m, cv.f(n, "value", 0)));
  };
  for (const char* name : {"aten.reflection_pad1d", "aten.reflection_pad2d", "aten.reflection_pad3d"})
    t[name] = [](C& cv, const json& n) { cv.out(n, pad(cv, n, self(cv, n), cv.ints(n, "padding"), "reflect", 0)); };
  for (const char* name : {"aten.replication_pad1d", "aten.replication_pad2d", "aten.replication_pad3d"})
    t[name] = [](C& cv, const json& n) { cv.out(n, pad(cv, n, self(cv, n), cv.ints(n, "padding"), "replicate", 0)); };

  // reordering
  t["aten.flip"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    auto dims = cv.ints(n, "dims");
    for (auto& d : dims) d = cv.axis(n, d, cv.rank(n, x));
    cv.out(n, cv.op("reverse", {C::a("x", x), C::aints32("axes", dims)}));
  };
  t["aten.roll"] = [](C& cv, const json& n) {
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
  };
  t["aten.tril"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    Var* m = tri_mask(cv, n, x, cv.i(n, "diagonal", 0), true);
    cv.out(n, cv.op("select", {C::a("cond", m), C::a("a", x), C::a("b", cv.cs(0, C::dtype(x)))}));
  };
  t["aten.triu"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    Var* m = tri_mask(cv, n, x, cv.i(n, "diagonal", 0), false);
    cv.out(n, cv.op("select", {C::a("cond", m), C::a("a", x), C::a("b", cv.cs(0, C::dtype(x)))}));
  };
  t["aten.topk"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    int64_t d = cv.axis(n, cv.i(n, "dim", -1), cv.rank(n, x));
    auto outs = cv.ops("topk", {C::a("x", x), C::ai32("k", cv.i(n, "k", 1)), C::ai32("axis", d),
                                C::abool("ascending", !cv.bo(n, "largest", true))});
    cv.outs(n, outs);
  };
  // kthvalue / median: the k-th smallest along a dim (median: the lower middle one, k =
  // (n - 1) / 2 + 1, as torch), from an ascending topk; values and their indices
  auto kth = [](C& cv, const json& n, Var* x, int64_t d, int64_t k, bool keep) -> std::pair<Var*, Var*> {
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
  };
  t["aten.kthvalue"] = [kth](C& cv, const json& n) {
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
  };
  t["aten.median"] = [kth](C& cv, const json& n) {
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
  };
  // x.unfold(dim, size, step): windows of `size` every `step` along dim (which becomes the window
  // count), each window on a new last axis: one gather with a (windows, size) index
  t["aten.unfold"] = [](C& cv, const json& n) {
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
  };
  // window functions as constants: 0.5 - 0.5 cos(2 pi k / N) (hann), 0.54 - 0.46 cos (hamming),
  // N = length (periodic) or length - 1
  auto window = [](double a0, double a1, double a2) {
    return [a0, a1, a2](C& cv, const json& n) {
      int64_t len = cv.i(n, "window_length", 0);
      if (len < 0) cv.fail(n, "window_length must be non-negative");
      bool periodic = cv.bo(n, "periodic", true);
      DataType dt = DataType::Float32;
      if (auto od = cv.dtype_arg(n, "dtype")) dt = *od;
      std::vector<double> w;
      double N = static_cast<double>(periodic ? len : len - 1);
      for (int64_t k = 0; k < len; ++k) {
        if (len == 1) {
          w.push_back(1.0);
          continue;
        }
        double t = 2.0 * M_PI * static_cast<double>(k) / N;
        w.push_back(a0 - a1 * std::cos(t) + a2 * std::cos(2 * t));
      }
      cv.out(n, cv.c(Value::from_doubles(dt, {len}, w)));
    };
  };
  t["aten.hann_window"] = window(0.5, 0.5, 0.0);
  t["aten.hamming_window.default"] = window(0.54, 0.46, 0.0);
  t["aten.hamming_window.periodic"] = window(0.54, 0.46, 0.0);
  t["aten.blackman_window"] = window(0.42, 0.5, 0.08);
  t["aten.sort"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    int64_t d = cv.axis(n, cv.i(n, "dim", -1), cv.rank(n, x));
    Var* idx = cv.op("argsort", {C::a("x", x), C::ai32("axis", d), C::abool("ascending", !cv.bo(n, "descending", false))});
    Var* v = gather_any(cv, "gather_along_axis", x, {C::a("indices", idx), C::ai32("axis", d)});
    cv.outs(n, {v, idx});
  };
  t["aten.argsort"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    int64_t d = cv.axis(n, cv.i(n, "dim", -1), cv.rank(n, x));
    cv.out(n, cv.op("argsort", {C::a("x", x), C::ai32("axis", d), C::abool("ascending", !cv.bo(n, "descending", false))}));
  };
  t["aten.one_hot"] = [](C& cv, const json& n) {
    Var* x = cv.cast(self(cv, n), DataType::Int32);
    int64_t k = cv.i(n, "num_classes", -1);
    if (k < 0) cv.fail(n, "one_hot needs num_classes (the count from the data is data-dependent)");
    cv.out(n, cv.op("one_hot", {C::a("indices", x), C::ai32("one_hot_vector_size", k), C::ai32("axis", -1),
                                C::a("on_value", Value::scalar_int(DataType::Int32, 1)),
                                C::a("off_value", Value::scalar_int(DataType::Int32, 0))}));
  };
  t["aten.as_strided"] = [](C& cv, const json& n) {
    // a view of x's storage; expressible when x is contiguous and the view is a permutation of a
    // contiguous layout (what decompositions emit for permute / expand-free reshapes)
    Var* x = self(cv, n);
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
  };
  t["aten.as_strided_copy"] = t["aten.as_strided"];
  t["aten.cumsum"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    if (auto dt = cv.dtype_arg(n, "dtype")) x = cv.cast(x, *dt);
    else if (auto od = cv.out_dtype(n)) x = cv.cast(x, *od);
    int64_t d = cv.axis(n, cv.i(n, "dim", 0), cv.rank(n, x));
    cv.out(n, cv.op("cumsum", {C::a("x", x), C::ai32("axis", d)}));
  };
  // Running products, maxima / minima (with their indices) and log-sum-exps along a dim of known
  // length L: a Hillis-Steele scan, log2(L) steps each combining every entry with the one k
  // before it (shifted in by padding with the operation's identity). Products then group
  // differently from torch's left-to-right loop (last-bit differences in float); maxima and
  // indices are exact, and later entries win ties as in torch's cummax / cummin.
  t["aten.cumprod"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    if (auto dt = cv.dtype_arg(n, "dtype")) x = cv.cast(x, *dt);
    else if (auto od = cv.out_dtype(n)) x = cv.cast(x, *od);
    if (C::dtype(x) == DataType::Bool) x = cv.cast(x, DataType::Int32);
    Scan sc(cv, n, x, cv.i(n, "dim", 0));
    for (int64_t k = 1; k < sc.len; k *= 2) x = bin(cv, "mul", x, sc.shift(x, k, 1.0));
    cv.out(n, x);
  };
  t["aten.logcumsumexp"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    if (!is_float(C::dtype(x))) x = cv.cast(x, DataType::Float32);
    DataType dt = C::dtype(x);
    Scan sc(cv, n, x, cv.i(n, "dim", 0));
    for (int64_t k = 1; k < sc.len; k *= 2) {
      // logaddexp(a, b) = max + log1p(exp(-|a - b|)); two -inf give -inf
      Var* a = sc.shift(x, k, -INFINITY);
      Var* hi = bin(cv, "maximum", a, x);
      Var* lo = bin(cv, "minimum", a, x);
      Var* e = cv.op("exp", {C::a("x", bin(cv, "sub", lo, hi))});
      Var* sum = bin(cv, "add", hi, cv.op("log", {C::a("x", bin(cv, "add", e, cv.cs(1, dt)))}));
      Var* ninf = bin(cv, "equal", hi, cv.cs(-INFINITY, dt));
      x = cv.op("select", {C::a("cond", ninf), C::a("a", hi), C::a("b", sum)});
    }
    cv.out(n, x);
  };
  auto cum_extreme = [](bool is_max) {
    return [is_max](C& cv, const json& n) {
      Var* x = self(cv, n);
      if (C::dtype(x) == DataType::Bool) x = cv.cast(x, DataType::Int32);
      DataType dt = C::dtype(x);
      Scan sc(cv, n, x, cv.i(n, "dim", 0));
      double worst = is_float(dt) ? (is_max ? -INFINITY : INFINITY)
                                  : static_cast<double>(is_max ? std::numeric_limits<int32_t>::min()
                                                               : std::numeric_limits<int32_t>::max());
      // the index along the dim, broadcast to x's shape
      int r = cv.rank(n, x);
      std::vector<int64_t> axes;
      for (int q = 0; q < r; ++q)
        if (q != sc.dim) axes.push_back(q);
      Var* idx = range_of(cv, C::shape(x)[static_cast<size_t>(sc.dim)]);
      if (!axes.empty()) idx = cv.op("expand_dims", {C::a("x", idx), C::aints32("axes", axes)});
      idx = expand_to(cv, n, idx, C::shape(x));
      for (int64_t k = 1; k < sc.len; k *= 2) {
        Var* pv = sc.shift(x, k, worst);
        Var* pi = sc.shift(idx, k, 0);
        Var* keep = bin(cv, is_max ? "greater_equal" : "less_equal", x, pv);  // later wins ties
        x = cv.op("select", {C::a("cond", keep), C::a("a", x), C::a("b", pv)});
        idx = cv.op("select", {C::a("cond", keep), C::a("a", idx), C::a("b", pi)});
      }
      if (auto od = cv.out_dtype(n)) x = cv.cast(x, *od);
      cv.out(n, x, 0);
      cv.out(n, idx, 1);
    };
  };
  t["aten.cummax"] = cum_extreme(true);
  t["aten.cummin"] = cum_extreme(false);
  // diff(x, n, dim, prepend, append): [prepend, x, append] along dim, then n times x[1:] - x[:-1]
  // (bool: logical_xor, as torch)
  t["aten.diff"] = [](C& cv, const json& n) {
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
  };
}

}  // namespace torch_detail
}  // namespace milkit
