// Helpers shared by the torch.export importer's operator families.
#include "ops_common.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <set>

#include "milkit/compose/arith.h"

namespace milkit {
namespace torch_detail {

Var* self(C& cv, const json& n) {
  if (C::has(n, "self")) return cv.tensor(n, "self");
  return cv.tensor(n, "input");
}

// The float dtype a float-valued op computes in: the node's output dtype, else fp32.
DataType float_out(C& cv, const json& n, Var* x) {
  auto od = cv.out_dtype(n);
  if (od && is_float(*od)) return *od;
  return is_float(C::dtype(x)) ? C::dtype(x) : DataType::Float32;
}

Var* bin(C& cv, const char* op, Var* x, Var* y) { return cv.e.bin(op, x, y); }

// A float op of one input (ints promote to the default float).
void unary(OpTable& t, const char* name, const char* mil) {
  t.on(name, [mil](C& cv, const json& n) {
    Var* x = self(cv, n);
    x = cv.cast(x, float_out(cv, n, x));
    cv.out(n, cv.op(mil, {C::a("x", x)}));
  });
}

// An op that keeps the input dtype (abs, neg of ints are fine in MIL).
void unary_keep(OpTable& t, const char* name, const char* mil) {
  t.on(name, [mil](C& cv, const json& n) { cv.out(n, cv.op(mil, {C::a("x", self(cv, n))})); });
}

Var* clip(C& cv, Var* x, std::optional<double> lo, std::optional<double> hi) {
  DataType dt = C::dtype(x);
  if (is_float(dt) && lo && hi) return cv.op("clip", {C::a("x", x), C::a("alpha", Value::scalar_float(dt, *lo)),
                                                     C::a("beta", Value::scalar_float(dt, *hi))});
  if (lo) x = bin(cv, "maximum", x, cv.cs(*lo, dt));
  if (hi) x = bin(cv, "minimum", x, cv.cs(*hi, dt));
  return x;
}

Var* sel(C& cv, Var* cond, Var* a, Var* b) { return cv.e.sel(cond, a, b); }

// `x` with a trailing axis of one element (for comparisons against every element of a list).
Var* trailing_axis(C& cv, Var* x) { return cv.op("expand_dims", {C::a("x", x), C::aints32("axes", {-1})}); }

// How many elements along the last axis of `cmp` (a bool tensor) are true, as int32.
Var* count_true(C& cv, Var* cmp) {
  return cv.op("reduce_sum", {C::a("x", cv.cast(cmp, DataType::Int32)), C::aints32("axes", {-1}),
                              C::abool("keep_dims", false)});
}

Var* input(C& cv, const json& n) { return C::has(n, "input") ? cv.tensor(n, "input") : cv.tensor(n, "self"); }

bool is_const(Var* v) { return v->value() && !v->value()->is_symbolic(); }

std::vector<int64_t> expand_list(C& cv, const json& n, std::vector<int64_t> v, size_t k, const char* what) {
  if (v.size() == 1 && k > 1) v.assign(k, v[0]);
  if (v.size() != k) cv.fail(n, std::string(what) + " has " + std::to_string(v.size()) + " values for " + std::to_string(k) + " spatial dims");
  return v;
}

Var* matmul(C& cv, Var* x, Var* y, bool ty) {
  return cv.op("matmul", {C::a("x", x), C::a("y", y), C::abool("transpose_x", false), C::abool("transpose_y", ty)});
}

// softmax(x) along `axis` with rows that are -inf throughout giving 0, not NaN (torch's
// _safe_softmax, which scaled_dot_product_attention uses for fully masked query rows)
Var* safe_softmax(C& cv, Var* x, int64_t axis) {
  Var* p = cv.op("softmax", {C::a("x", x), C::ai32("axis", axis)});
  DataType dt = C::dtype(x);
  Var* top = cv.op("reduce_max", {C::a("x", x), C::aints32("axes", {axis}), C::abool("keep_dims", true)});
  Var* dead = bin(cv, "equal", top, cv.cs(-std::numeric_limits<double>::infinity(), dt));
  return cv.op("select", {C::a("cond", dead), C::a("a", cv.cs(0, dt)), C::a("b", p)});
}

// whether `j` (node inputs or graph outputs, subgraphs included) reads tensor `name`
bool json_reads(const json& j, const std::string& name) {
  if (j.is_object()) {
    auto t = j.find("as_tensor");
    if (t != j.end() && t->is_object() && t->value("name", std::string()) == name) return true;
    auto ts = j.find("as_tensors");
    if (ts != j.end() && ts->is_array())
      for (auto& e : *ts)
        if (e.is_object() && e.value("name", std::string()) == name) return true;
    for (auto it = j.begin(); it != j.end(); ++it)
      if ((it->is_object() || it->is_array()) && json_reads(*it, name)) return true;
  } else if (j.is_array()) {
    for (auto& e : j)
      if (json_reads(e, name)) return true;
  }
  return false;
}

// whether output `k` of node `n` is read by any node or is a program output (torch names every
// output of a multi-output op, used or not)
bool output_used(C& cv, const json& n, size_t k) {
  auto names = C::output_names(n);
  if (k >= names.size() || names[k].empty()) return false;
  if (auto it = cv.graph.find("nodes"); it != cv.graph.end())
    for (auto& nd : *it)
      if (nd.contains("inputs") && json_reads(nd["inputs"], names[k])) return true;
  if (auto it = cv.graph.find("outputs"); it != cv.graph.end()) return json_reads(*it, names[k]);
  return false;
}

int64_t known_dim(C& cv, const json& n, Var* x, int64_t ax, const char* what) {
  Dim d = C::shape(x)[static_cast<size_t>(ax)];
  if (!d->is_const()) cv.fail(n, std::string(what) + " must be known (it is " + d->str() + ")");
  return d->value();
}

Var* reduce_op(C& cv, const char* op, Var* x, const std::vector<int64_t>& axes, bool keep) {
  return cv.op(op, {C::a("x", x), C::aints32("axes", axes), C::abool("keep_dims", keep)});
}

// A gather-family op on x of any dtype: MIL's gathers do not take bool, so a bool x goes
// through int32 and back.
Var* gather_any(C& cv, const char* type, Var* x, std::vector<Arg> rest) {
  bool b = C::dtype(x) == DataType::Bool;
  rest.insert(rest.begin(), C::a("x", b ? cv.cast(x, DataType::Int32) : x));
  Var* y = cv.op(type, std::move(rest));
  return b ? cv.cast(y, DataType::Bool) : y;
}

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
Var* size_shape(C& cv, const std::vector<Dim>& ds, Var* like) {
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

Var* slice_axis(C& cv, const json& n, Var* x, int64_t dim, const SliceSpec& s, Var* start_var,
                Var* end_var) {
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

// [0, 1, ..., d - 1] as int32
Var* range_of(C& cv, Dim d) { return compose::iota(cv.e, cv.dim_var(d)); }

// x as rank 1
Var* flat(C& cv, Var* x) { return reshape(cv, x, cv.ci({-1})); }

// outer(x, y) = x[:, None] * y[None, :]; kron: x's and y's dims interleaved, multiplied, merged
Var* times(C& cv, const json& n, Var* x, Var* y) {
  if (C::dtype(x) == DataType::Bool && C::dtype(y) == DataType::Bool) return bin(cv, "logical_and", x, y);
  auto [a, b] = cv.promoted(n, x, y);
  return bin(cv, "mul", a, b);
}

void like(C& cv, const json& n, double v) {
  Var* x = self(cv, n);
  DataType dt = factory_dtype(cv, n, x, C::dtype(x));
  cv.out(n, fill(cv, shape_of_var(cv, x), v, dt));
}

Var* reshape(C& cv, Var* v, const std::vector<Dim>& dims) {
  if (C::shape(v) == dims) return v;
  return cv.op("reshape", {C::a("x", v), C::a("shape", cv.shape_var(dims))});
}

// A list element dim: a constant, or the symbol itself (so the gathered sequence keeps it).
ArgItem elem_dim(C& cv, Dim d) {
  if (d->is_const())
    return ArgItem{nullptr,
                   std::make_shared<const Value>(Value::scalar_int(DataType::Int32, d->value()))};
  std::string name =
      d->kind() == Expr::Kind::Symbol ? d->symbol()->name() : cv.ctx().free_name("rnn_d");
  return ArgItem{nullptr, std::make_shared<const Value>(Value::scalar_string(name))};
}

}  // namespace torch_detail
}  // namespace milkit
