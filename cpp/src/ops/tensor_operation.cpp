// tensor_operation ops (coremltools iOS15/tensor_operation.py, iOS16/iOS17 re-definitions):
// concat, split, stack, tile, pad, fill, shape, range_1d, identity, band_part, cumsum,
// flatten2d, one_hot, topk, argsort, non_zero, non_maximum_suppression, fill_like.
//
// Shapes follow coremltools, except that milkit keeps exact symbolic expressions where
// coremltools makes a fresh symbol (concat sums, tile products, pad sums, split floor-divs,
// range_1d lengths), and proven shape conflicts are errors naming the dimension and shapes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

using Outs = std::vector<std::shared_ptr<const Value>>;
using ops::shape_str;
using ops::share;

/// coremltools' MAX_SIZE_CONSTANT_FOLDING (1 MB of fp32).
constexpr int64_t kMaxFold = 1024 * 1024 / 4;

std::string dims_str(const std::vector<Dim>& d) { return shape_str(d); }

/// One element of an assembled value: element `idx` of source `src`.
struct Ref {
  int src;
  int64_t idx;
};

/// Builds a value of dtype `dt` and `shape` by picking elements of `srcs` (which all have dtype
/// `dt`, or are symbolic integer values). Handles raw, string and symbolic elements.
Value assemble(Context& ctx, DataType dt, std::vector<int64_t> shape,
               const std::vector<const Value*>& srcs, const std::vector<Ref>& refs) {
  bool sym = false, str = false;
  for (const Value* s : srcs) {
    sym |= s->is_symbolic();
    str |= s->dtype() == DataType::String;
  }
  if (str) {
    std::vector<std::string> v;
    v.reserve(refs.size());
    for (const Ref& r : refs) v.push_back(srcs[r.src]->string_values()[r.idx]);
    return Value::strings(std::move(shape), std::move(v));
  }
  if (sym) {
    std::vector<Dim> d;
    d.reserve(refs.size());
    for (const Ref& r : refs) d.push_back(srcs[r.src]->as_dim(ctx, r.idx));
    return Value::from_dims(dt, std::move(shape), std::move(d));
  }
  size_t w = static_cast<size_t>(dtype_storage_bytes(dt));
  std::vector<uint8_t> bytes(refs.size() * w);
  for (size_t k = 0; k < refs.size(); ++k)
    std::memcpy(bytes.data() + k * w, srcs[refs[k].src]->raw() + refs[k].idx * w, w);
  return Value(dt, std::move(shape), Buffer::take(std::move(bytes)));
}

/// Iterates over every multi-index of `shape` in row-major order.
template <class F>
void for_each_index(const std::vector<int64_t>& shape, F&& f) {
  int64_t n = shape_numel(shape);
  std::vector<int64_t> ctr(shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    f(ctr);
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (++ctr[d] < shape[d]) break;
      ctr[d] = 0;
    }
  }
}

int64_t prod(const std::vector<int64_t>& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

/// A value of `shape` whose elements are all fresh symbols (coremltools' stand-in for
/// unknown small tensors in concat's value inference).
std::shared_ptr<const Value> fresh_value(Context& ctx, DataType dt, std::vector<int64_t> shape) {
  int64_t n = shape_numel(shape);
  std::vector<Dim> d;
  for (int64_t i = 0; i < n; ++i) d.push_back(ctx.fresh());
  return share(Value::from_dims(dt, std::move(shape), std::move(d)));
}

/// The static shape of a var's type, or nullopt.
std::optional<std::vector<int64_t>> static_shape_of(const Var* v) {
  return ops::static_shape(v->type());
}

/// The dtype shared by all vars of a tuple input; ValueError (as coremltools) otherwise.
DataType tuple_dtype(const InferCtx& ic, VarSpan vs) {
  DataType dt = vs[0]->type()->dtype();
  for (size_t i = 1; i < vs.size(); ++i)
    if (vs[i]->type()->dtype() != dt) {
      std::string got;
      for (size_t k = 0; k < vs.size(); ++k)
        got += (k ? ", " : "") + std::string(dtype_name(vs[k]->type()->dtype()));
      ic.fail("tensors in 'values' must share one data type, got [" + got + "]");
    }
  return dt;
}

/// Requires a non-negative, non-provably-negative integer dim list; returns it.
void check_nonneg(const InferCtx& ic, std::string_view input, const std::vector<Dim>& d) {
  for (size_t i = 0; i < d.size(); ++i)
    if (ic.ctx.range(d[i]).hi < 0)
      ic.fail_input(input, "must be non-negative, got " + d[i]->str() + " at index " +
                               std::to_string(i));
}

// ---------------------------------------------------------------------------------------------
// concat

void add_concat(OpRegistry& r) {
  OpSchema s;
  s.name = "concat";
  InputDef values;
  values.name = "values";
  values.kind = InputKind::Tuple;
  s.inputs = {values, in_const("axis", dt::int32()),
              in_opt_const("interleave", dt::boolean(), def_bool(false))};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
    VarSpan vs = ic.vars("values");
    if (vs.empty()) ic.fail("got 0 values");
    for (Var* v : vs)
      if (!v->type()->has_rank()) ic.fail_input("values", "'" + v->name() + "' has unknown rank");
    int64_t rank = vs[0]->type()->rank();
    for (Var* v : vs)
      if (v->type()->rank() != rank)
        ic.fail_input("values", "'" + v->name() + "' has rank " +
                                    std::to_string(v->type()->rank()) + " != other inputs rank " +
                                    std::to_string(rank));
    int64_t axis = ic.int_("axis");
    if (rank > 0) {
      axis = ic.axis("axis", axis, rank);
    } else if (axis != 0 && axis != -1) {
      ic.fail_input("axis", "= " + std::to_string(axis) + " is out of range for rank-0 values");
    }
    DataType dt = tuple_dtype(ic, vs);
    bool interleave = ic.bool_("interleave");
    Context& c = ic.ctx;
    const std::vector<Dim>& s0 = vs[0]->type()->shape();
    std::vector<Dim> out = s0;
    for (size_t k = 1; k < vs.size(); ++k) {
      const std::vector<Dim>& sk = vs[k]->type()->shape();
      for (int64_t i = 0; i < rank; ++i) {
        if ((i == axis && !interleave) || c.eq(s0[i], sk[i]) != Tri::False) continue;
        ic.fail("dimension mismatch at dim " + std::to_string(i) + ": " + s0[i]->str() + " vs " +
                sk[i]->str() + ", shapes " + dims_str(s0) + " ('" + vs[0]->name() + "') vs " +
                dims_str(sk) + " ('" + vs[k]->name() + "')" +
                (i == axis ? "; all inputs must have the same shape when interleave is True" : ""));
      }
    }
    Dim len = c.constant(0);
    for (Var* v : vs) len = c.add(len, rank == 0 ? c.constant(1) : v->type()->shape()[axis]);
    if (rank == 0) out = {len};
    else out[axis] = len;
    return {c.tensor(dt, out)};
  };
  s.value = [](InferCtx& ic, Outs& out) {
    VarSpan vs = ic.vars("values");
    Context& c = ic.ctx;
    DataType dt = vs[0]->type()->dtype();
    int64_t rank = vs[0]->type()->rank();
    // coremltools (VALUE | SYMBOL | NONE): a missing scalar becomes a fresh symbol, a missing
    // static tensor of at most 10 elements a tensor of fresh symbols.
    std::vector<std::shared_ptr<const Value>> keep;
    std::vector<const Value*> srcs;
    bool any_sym = false;
    for (Var* v : vs) {
      std::shared_ptr<const Value> val = v->value();
      if (!val) {
        auto ss = static_shape_of(v);
        if (!ss || dt == DataType::String || shape_numel(*ss) > 10) return false;
        val = fresh_value(c, dt, *ss);
      }
      if (val->is_symbolic()) any_sym = true;
      keep.push_back(val);
      srcs.push_back(val.get());
    }
    if (any_sym)
      for (const Value* v : srcs)
        if (!v->is_symbolic() && is_float(v->dtype()))
          for (double d : v->to_doubles())
            if (d != std::floor(d)) return false;  // cannot mix fractions with symbols
    bool interleave = ic.bool_("interleave");
    std::vector<Ref> refs;
    std::vector<int64_t> shape;
    if (rank == 0) {
      for (size_t k = 0; k < srcs.size(); ++k) refs.push_back({static_cast<int>(k), 0});
      shape = {static_cast<int64_t>(srcs.size())};
    } else {
      int64_t axis = ic.axis("axis", ic.int_("axis"), rank);
      shape = srcs[0]->shape();
      shape[axis] = 0;
      for (const Value* v : srcs) shape[axis] += v->shape()[axis];
      int64_t outer = prod(srcs[0]->shape(), 0, axis);
      int64_t inner = prod(srcs[0]->shape(), axis + 1, rank);
      for (int64_t o = 0; o < outer; ++o) {
        if (interleave) {
          int64_t a = srcs[0]->shape()[axis];
          for (int64_t j = 0; j < a; ++j)
            for (size_t k = 0; k < srcs.size(); ++k)
              for (int64_t i = 0; i < inner; ++i)
                refs.push_back({static_cast<int>(k), (o * a + j) * inner + i});
        } else {
          for (size_t k = 0; k < srcs.size(); ++k) {
            int64_t blk = srcs[k]->shape()[axis] * inner;
            for (int64_t j = 0; j < blk; ++j) refs.push_back({static_cast<int>(k), o * blk + j});
          }
        }
      }
    }
    out.push_back(share(assemble(c, dt, shape, srcs, refs)));
    return true;
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------------------------
// split

/// Output sizes along the split axis.
std::vector<Dim> split_sizes(InferCtx& ic, int64_t& axis) {
  const std::vector<Dim>& xs = ops::ranked_shape(ic, "x");
  int64_t rank = static_cast<int64_t>(xs.size());
  axis = ic.axis("axis", ic.int_("axis"), rank);
  bool has_n = ic.has("num_splits"), has_sizes = ic.has("split_sizes");
  if (!has_n && !has_sizes) ic.fail("at least one of num_splits and split_sizes must be given");
  Context& c = ic.ctx;
  Dim d = xs[axis];
  if (has_sizes) {
    const Value* sv = ic.val("split_sizes");
    if (!sv) ic.fail_input("split_sizes", "must be a known constant");
    if (sv->rank() != 1) ic.fail_input("split_sizes", "must be a 1-D tensor");
    std::vector<Dim> sizes = sv->to_dims(c);
    if (has_n && ic.int_("num_splits") != static_cast<int64_t>(sizes.size()))
      ic.fail("num_splits = " + std::to_string(ic.int_("num_splits")) +
              " does not match the length of split_sizes (" + std::to_string(sizes.size()) + ")");
    if (sizes.empty()) ic.fail_input("split_sizes", "must not be empty");
    check_nonneg(ic, "split_sizes", sizes);
    Dim total = c.constant(0);
    for (Dim s : sizes) total = c.add(total, s);
    if (c.eq(total, d) == Tri::False)
      ic.fail("split_sizes " + dims_str(sizes) + " sum to " + total->str() + ", but dim " +
              std::to_string(axis) + " of x " + dims_str(xs) + " is " + d->str());
    return sizes;
  }
  int64_t n = ic.int_("num_splits");
  if (n <= 0) ic.fail_input("num_splits", "must be positive, got " + std::to_string(n));
  Dim nd = c.constant(n);
  if (c.eq(c.mod(d, nd), c.constant(0)) == Tri::False)
    ic.fail("num_splits " + std::to_string(n) + " does not divide dim " + std::to_string(axis) +
            " (length " + d->str() + ") of x " + dims_str(xs));
  return std::vector<Dim>(static_cast<size_t>(n), c.floordiv(d, nd));
}

void add_split(OpRegistry& r) {
  OpSchema s;
  s.name = "split";
  s.num_outputs = -1;
  s.inputs = {in("x", dt::numeric_bool(), "T"), in_opt_const("num_splits", dt::int32()),
              in_opt_const("split_sizes", dt::int32()), in_const("axis", dt::int32())};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
    int64_t axis = 0;
    std::vector<Dim> sizes = split_sizes(ic, axis);
    std::vector<const Type*> out;
    for (Dim d : sizes) {
      std::vector<Dim> sh = ic.type("x")->shape();
      sh[axis] = d;
      out.push_back(ic.ctx.tensor(ic.type("x")->dtype(), sh));
    }
    return out;
  };
  s.value = [](InferCtx& ic, Outs& out) {
    int64_t axis = 0;
    std::vector<Dim> sizes = split_sizes(ic, axis);
    const std::shared_ptr<const Value>& x = ic.var("x")->value();
    if (!x) return false;
    for (Dim d : sizes)
      if (!d->is_const()) return false;
    if (sizes.size() == 1) {
      out.push_back(x);
      return true;
    }
    const std::vector<int64_t>& xs = x->shape();
    int64_t outer = prod(xs, 0, axis), inner = prod(xs, axis + 1, xs.size());
    int64_t begin = 0;
    for (Dim d : sizes) {
      int64_t len = d->value();
      std::vector<Ref> refs;
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < len * inner; ++j)
          refs.push_back({0, (o * xs[axis] + begin) * inner + j});
      std::vector<int64_t> sh = xs;
      sh[axis] = len;
      out.push_back(share(assemble(ic.ctx, x->dtype(), sh, {x.get()}, refs)));
      begin += len;
    }
    return true;
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------------------------
// stack

void add_stack(OpRegistry& r) {
  OpSchema s;
  s.name = "stack";
  InputDef values;
  values.name = "values";
  values.kind = InputKind::Tuple;
  s.inputs = {values, in_const("axis", dt::int32())};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
    VarSpan vs = ic.vars("values");
    if (vs.empty()) ic.fail("cannot stack 0 tensors");
    for (Var* v : vs)
      if (!v->type()->has_rank()) ic.fail_input("values", "'" + v->name() + "' has unknown rank");
    // coremltools' reference shape: the first fully static one, else the first
    const Var* ref = vs[0];
    for (Var* v : vs)
      if (v->type()->is_static()) {
        ref = v;
        break;
      }
    const std::vector<Dim>& rs = ref->type()->shape();
    for (Var* v : vs) {
      const std::vector<Dim>& sh = v->type()->shape();
      if (sh.size() != rs.size())
        ic.fail_input("values", "'" + v->name() + "' has shape " + dims_str(sh) + ", others have " +
                                    dims_str(rs));
      for (size_t i = 0; i < sh.size(); ++i)
        if (ic.ctx.eq(sh[i], rs[i]) == Tri::False)
          ic.fail_input("values", "'" + v->name() + "' has shape " + dims_str(sh) +
                                      ", others have " + dims_str(rs) + " (dim " +
                                      std::to_string(i) + ": " + sh[i]->str() + " vs " +
                                      rs[i]->str() + ")");
    }
    DataType dt = tuple_dtype(ic, vs);
    int64_t rank = static_cast<int64_t>(rs.size());
    int64_t axis = ic.axis("axis", ic.int_("axis"), rank + 1);
    std::vector<Dim> out = rs;
    out.insert(out.begin() + axis, ic.ctx.constant(static_cast<int64_t>(vs.size())));
    return {ic.ctx.tensor(dt, out)};
  };
  s.value = [](InferCtx& ic, Outs& out) {
    VarSpan vs = ic.vars("values");
    Context& c = ic.ctx;
    DataType dt = vs[0]->type()->dtype();
    bool all_scalar = true;
    for (Var* v : vs) all_scalar &= v->type()->rank() == 0;
    std::vector<std::shared_ptr<const Value>> keep;
    std::vector<const Value*> srcs;
    for (Var* v : vs) {
      std::shared_ptr<const Value> val = v->value();
      if (!val) {
        // coremltools: a missing value is a fresh symbol, usable only when stacking scalars
        if (!all_scalar || dt == DataType::String) return false;
        val = fresh_value(c, dt, {});
      }
      keep.push_back(val);
      srcs.push_back(val.get());
    }
    bool any_sym = false;
    for (const Value* v : srcs) any_sym |= v->is_symbolic();
    if (any_sym)
      for (const Value* v : srcs)
        if (!v->is_symbolic() && is_float(v->dtype()))
          for (double d : v->to_doubles())
            if (d != std::floor(d)) return false;
    const std::vector<int64_t>& es = srcs[0]->shape();
    int64_t rank = static_cast<int64_t>(es.size());
    int64_t axis = ic.axis("axis", ic.int_("axis"), rank + 1);
    int64_t outer = prod(es, 0, axis), inner = prod(es, axis, es.size());
    std::vector<Ref> refs;
    for (int64_t o = 0; o < outer; ++o)
      for (size_t k = 0; k < srcs.size(); ++k)
        for (int64_t i = 0; i < inner; ++i) refs.push_back({static_cast<int>(k), o * inner + i});
    std::vector<int64_t> sh = es;
    sh.insert(sh.begin() + axis, static_cast<int64_t>(srcs.size()));
    out.push_back(share(assemble(c, dt, sh, srcs, refs)));
    return true;
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------------------------
// tile

void add_tile(OpRegistry& r) {
  OpSchema s;
  s.name = "tile";
  s.inputs = {in("x", dt::numeric_bool(), "T"), in("reps", dt::int32())};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
    const std::vector<Dim>& xs = ops::ranked_shape(ic, "x");
    DataType dt = ic.type("x")->dtype();
    Context& c = ic.ctx;
    const Type* rt = ic.type("reps");
    if (rt->rank() != 1) ic.fail_input("reps", "must be a 1-D tensor, got " + rt->str());
    auto reps = ic.dims("reps");
    if (!reps) {
      Dim n = rt->shape()[0];
      if (n->is_const() && n->value() != static_cast<int64_t>(xs.size()))
        ic.fail("length of reps (" + n->str() + ") must equal the rank of x " + dims_str(xs));
      std::vector<Dim> out;
      for (size_t i = 0; i < xs.size(); ++i) out.push_back(c.fresh());
      return {c.tensor(dt, out)};
    }
    if (reps->empty() || reps->size() != xs.size())
      ic.fail("length of reps (" + std::to_string(reps->size()) +
              ") must be at least 1 and equal to the rank of x " + dims_str(xs));
    std::vector<Dim> out;
    for (size_t i = 0; i < xs.size(); ++i) {
      Dim rep = (*reps)[i];
      if (c.range(rep).hi <= 0)
        ic.fail_input("reps", "entries must be greater than 0, got " + rep->str() + " at index " +
                                  std::to_string(i));
      out.push_back(c.mul(xs[i], rep));
    }
    return {c.tensor(dt, out)};
  };
  s.value = [](InferCtx& ic, Outs& out) {
    const std::shared_ptr<const Value>& x = ic.var("x")->value();
    if (!x || !ic.known("reps")) return false;
    std::vector<int64_t> reps = ic.ints("reps");
    const std::vector<int64_t>& xs = x->shape();
    std::vector<int64_t> sh(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) sh[i] = xs[i] * reps[i];
    if (shape_numel(sh) > kMaxFold * 4) return false;
    std::vector<int64_t> st = ops::strides_of(xs);
    std::vector<Ref> refs;
    for_each_index(sh, [&](const std::vector<int64_t>& ix) {
      int64_t f = 0;
      for (size_t d = 0; d < ix.size(); ++d) f += (ix[d] % xs[d]) * st[d];
      refs.push_back({0, f});
    });
    out.push_back(share(assemble(ic.ctx, x->dtype(), sh, {x.get()}, refs)));
    return true;
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------------------------
// pad

void add_pad(OpRegistry& r) {
  OpSchema s;
  s.name = "pad";
  s.inputs = {in("x", dt::floats(), "T"), in("pad", dt::int32()),
              in_opt_const("mode", dt::string(), def_str("constant")),
              in_opt_const("constant_val", dt::floats(), def_float(0.0), "T")};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
    const std::vector<Dim>& xs = ops::ranked_shape(ic, "x");
    int64_t rank = static_cast<int64_t>(xs.size());
    Context& c = ic.ctx;
    const Type* pt = ic.type("pad");
    if (pt->rank() != 1) ic.fail_input("pad", "must be a 1-D tensor, got " + pt->str());
    std::string mode = ic.str("mode");
    if (mode != "constant" && mode != "reflect" && mode != "replicate")
      ic.fail_input("mode", "must be one of 'constant', 'reflect', 'replicate', got '" + mode + "'");
    Dim plen = pt->shape()[0];
    if (!ic.known("pad") && !(plen->is_const() && plen->value() == 2 * rank))
      ic.fail_input("pad", "is not constant, so it must have shape (" + std::to_string(2 * rank) +
                               ",), got " + pt->str());
    std::vector<Dim> out = xs;
    auto pad = ic.dims("pad");
    if (!pad) {
      for (int64_t i = 0; i < rank; ++i) out[i] = c.fresh();
      return {c.tensor(ic.type("x")->dtype(), out)};
    }
    if (pad->size() % 2 != 0)
      ic.fail_input("pad", "must have an even number of elements, got " +
                               std::to_string(pad->size()));
    check_nonneg(ic, "pad", *pad);
    int64_t n = static_cast<int64_t>(pad->size() / 2);
    if (n > rank)
      ic.fail_input("pad", "pads " + std::to_string(n) + " dims, more than the rank of x " +
                               dims_str(xs));
    for (int64_t i = 0; i < n; ++i) {
      int64_t d = rank - n + i;
      out[d] = c.add(c.add(xs[d], (*pad)[2 * i]), (*pad)[2 * i + 1]);
    }
    return {c.tensor(ic.type("x")->dtype(), out)};
  };
  s.value = [](InferCtx& ic, Outs& out) {
    if (!ic.known("x") || !ic.known("pad") || !ic.known("constant_val")) return false;
    const Value& x = *ic.val("x");
    std::vector<int64_t> pad = ic.ints("pad");
    std::string mode = ic.str("mode");
    const std::vector<int64_t>& xs = x.shape();
    size_t rank = xs.size();
    std::vector<int64_t> full(2 * rank, 0);
    std::copy(pad.begin(), pad.end(), full.end() - static_cast<long>(pad.size()));
    std::vector<int64_t> sh(rank);
    for (size_t d = 0; d < rank; ++d) sh[d] = xs[d] + full[2 * d] + full[2 * d + 1];
    if (mode == "reflect")
      for (size_t d = 0; d < rank; ++d)
        if (xs[d] == 0 || (xs[d] == 1 && sh[d] > 1)) return false;
    Value cv = ic.val("constant_val")->cast(x.dtype());
    std::vector<int64_t> st = ops::strides_of(xs);
    std::vector<Ref> refs;
    for_each_index(sh, [&](const std::vector<int64_t>& ix) {
      int64_t f = 0;
      bool fill = false;
      for (size_t d = 0; d < rank; ++d) {
        int64_t i = ix[d] - full[2 * d], n = xs[d];
        if (i < 0 || i >= n) {
          if (mode == "constant") {
            fill = true;
            break;
          }
          if (mode == "replicate") {
            i = std::clamp<int64_t>(i, 0, n - 1);
          } else {  // reflect (numpy): period 2 * (n - 1)
            int64_t p = 2 * (n - 1);
            i = ((i % p) + p) % p;
            if (i >= n) i = p - i;
          }
        }
        f += i * st[d];
      }
      refs.push_back(fill ? Ref{1, 0} : Ref{0, f});
    });
    out.push_back(share(assemble(ic.ctx, x.dtype(), sh, {&x, &cv}, refs)));
    return true;
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------------------------
// fill, fill_like

/// A value of `shape` with every element equal to the scalar `v`.
Value full_value(const Value& v, const std::vector<int64_t>& shape) {
  std::vector<Ref> refs(static_cast<size_t>(shape_numel(shape)), Ref{0, 0});
  Context scratch;
  return assemble(scratch, v.dtype(), shape, {&v}, refs);
}

void add_fill(OpRegistry& r) {
  OpSchema s;
  s.name = "fill";
  s.inputs = {in("shape", dt::int32()),
              in_opt_const("value", dt::numeric_bool(), def_float(0.0), "T")};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
    DataType dt = ic.type("value")->dtype();
    const Type* st = ic.type("shape");
    if (st->rank() != 1) ic.fail_input("shape", "must be a 1-D tensor, got " + st->str());
    Context& c = ic.ctx;
    Dim n = st->shape()[0];
    // A shape of unknown length gives a tensor of unknown rank (coremltools: a variadic symbol).
    if (!n->is_const()) return {c.tensor_unknown_rank(dt)};
    auto d = ic.dims("shape");
    if (!d) {
      std::vector<Dim> out;
      for (int64_t i = 0; i < n->value(); ++i) out.push_back(c.fresh());
      return {c.tensor(dt, out)};
    }
    check_nonneg(ic, "shape", *d);
    return {c.tensor(dt, *d)};
  };
  s.value = [](InferCtx& ic, Outs& out) {
    if (!ic.known("shape") || !ic.known("value")) return false;
    out.push_back(share(full_value(*ic.val("value"), ic.ints("shape"))));
    return true;
  };
  r.add(std::move(s));
}

void add_fill_like(OpRegistry& r) {
  OpSchema s;
  s.name = "fill_like";
  s.since = Target::iOS16;
  s.inputs = {in("ref_tensor", dt::numeric_bool(), "T"),
              in_opt_const("value", dt::numeric_bool(), def_float(0.0), "U")};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
    return {ops::with_dtype(ic.ctx, ic.type("ref_tensor"), ic.type("value")->dtype())};
  };
  s.value = [](InferCtx& ic, Outs& out) {
    // coremltools' precondition is VALUE: ref_tensor's value must be known too
    if (!ic.known("ref_tensor") || !ic.known("value")) return false;
    out.push_back(share(full_value(*ic.val("value"), ic.val("ref_tensor")->shape())));
    return true;
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------------------------
// shape, identity

void add_shape(OpRegistry& r) {
  OpSchema s;
  s.name = "shape";
  s.inputs = {in("x", dt::numeric_bool(), "T")};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
    const Type* t = ic.type("x");
    Dim n = t->has_rank() ? ic.ctx.constant(t->rank()) : ic.ctx.fresh();
    return {ic.ctx.tensor(DataType::Int32, std::vector<Dim>{n})};
  };
  s.value = [](InferCtx& ic, Outs& out) {
    const Type* t = ic.type("x");
    if (!t->has_rank()) return false;
    out.push_back(share(
        Value::from_dims(DataType::Int32, {static_cast<int64_t>(t->rank())}, t->shape())));
    return true;
  };
  r.add(std::move(s));
}

void add_identity(OpRegistry& r) {
  OpSchema s;
  s.name = "identity";
  InputDef x;
  x.name = "x";
  x.kind = InputKind::ListOrTensor;
  s.inputs = {x};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> { return {ic.type("x")}; };
  s.value = [](InferCtx& ic, Outs& out) {
    const std::shared_ptr<const Value>& v = ic.var("x")->value();
    if (!v) return false;
    out.push_back(v);
    return true;
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------------------------
// range_1d

/// Rounds a double to the float dtype `dt` (numpy does range arithmetic in the input dtype).
double round_to(DataType dt, double v) {
  if (dt == DataType::Float16) return half_to_float(float_to_half(static_cast<float>(v)));
  if (dt == DataType::Float32) return static_cast<float>(v);
  return v;
}

void add_range_1d(OpRegistry& r) {
  OpSchema s;
  s.name = "range_1d";
  s.inputs = {in("end", dt::numeric(), "T"), in("start", dt::numeric(), "T"),
              in("step", dt::numeric(), "T")};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
    DataType dt = ic.type("start")->dtype();
    Context& c = ic.ctx;
    for (const char* n : {"end", "start", "step"})
      if (ic.type(n)->rank() > 1 || (ic.type(n)->rank() == 1 && !(ic.type(n)->shape()[0] == c.constant(1))))
        ic.fail_input(n, "must be a scalar, got " + ic.type(n)->str());
    if (is_float(dt)) {
      if (!ic.known("start") || !ic.known("end") || !ic.known("step"))
        return {c.tensor(dt, std::vector<Dim>{c.fresh()})};
      double st = ic.val("start")->as_double(0), en = ic.val("end")->as_double(0),
             sp = ic.val("step")->as_double(0);
      if (sp == 0) ic.fail_input("step", "must not be 0");
      double q = round_to(dt, round_to(dt, en - st) / sp);
      int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil(q)));
      return {c.tensor(dt, std::vector<Dim>{c.constant(n)})};
    }
    auto st = ic.dims("start"), en = ic.dims("end"), sp = ic.dims("step");
    if (!st || !en || !sp) return {c.tensor(dt, std::vector<Dim>{c.fresh()})};
    Dim a = (*st)[0], b = (*en)[0], k = (*sp)[0];
    if (k->is_const() && k->value() == 0) ic.fail_input("step", "must not be 0");
    Interval kr = c.range(k);
    Dim dist, stride;  // length = ceil(dist / stride) with stride > 0, or 0 when dist <= 0
    if (kr.lo > 0) dist = c.sub(b, a), stride = k;
    else if (kr.hi < 0) dist = c.sub(a, b), stride = c.neg(k);
    else return {c.tensor(dt, std::vector<Dim>{c.fresh()})};
    // an empty range has length 0 (coremltools gives a negative length)
    Interval dr = c.range(dist);
    Dim n;
    if (dr.hi <= 0) n = c.constant(0);
    else if (dr.lo >= 0) n = c.ceildiv(dist, stride);
    else n = c.max(c.constant(0), c.ceildiv(dist, stride));
    return {c.tensor(dt, std::vector<Dim>{n})};
  };
  s.value = [](InferCtx& ic, Outs& out) {
    if (!ic.known("start") || !ic.known("end") || !ic.known("step")) return false;
    DataType dt = ic.type("start")->dtype();
    if (is_float(dt)) {
      double st = ic.val("start")->as_double(0), en = ic.val("end")->as_double(0),
             sp = ic.val("step")->as_double(0);
      double q = round_to(dt, round_to(dt, en - st) / sp);
      if (q > kMaxFold) return false;
      int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil(q)));
      // numpy fills a[i] = start + i * (a[1] - a[0]) in the output dtype
      double delta = round_to(dt, round_to(dt, st + sp) - st);
      std::vector<double> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        v[i] = i == 0 ? st : round_to(dt, st + round_to(dt, static_cast<double>(i) * delta));
      out.push_back(share(Value::from_doubles(dt, {n}, v)));
      return true;
    }
    int64_t st = ic.val("start")->as_int(0), en = ic.val("end")->as_int(0),
            sp = ic.val("step")->as_int(0);
    int64_t num = en - st;
    int64_t n = sp > 0 ? (num > 0 ? (num + sp - 1) / sp : 0) : (num < 0 ? (-num + -sp - 1) / -sp : 0);
    if (static_cast<double>(num) / static_cast<double>(sp) > kMaxFold) return false;
    std::vector<int64_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = st + i * sp;
    out.push_back(share(Value::from_ints(dt, {n}, v)));
    return true;
  };
  r.add(std::move(s));
}


// ---------------------------------------------------------------------------------------------
// band_part, cumsum, flatten2d

void add_band_part(OpRegistry& r) {
  OpSchema s;
  s.name = "band_part";
  s.inputs = {in("x", dt::numeric_bool(), "T"), in_opt_const("lower", dt::int32(), def_int(-1)),
              in_opt_const("upper", dt::int32(), def_int(-1))};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> { return {ic.type("x")}; };
  s.value = [](InferCtx& ic, Outs& out) {
    if (!ic.known("x")) return false;
    const Value& x = *ic.val("x");
    if (x.rank() < 2) ic.fail_input("x", "must have rank >= 2 to take a band part");
    int64_t lo = ic.int_("lower"), up = ic.int_("upper");
    int64_t M = x.shape()[x.rank() - 2], N = x.shape()[x.rank() - 1];
    Value zero = Value::scalar_int(x.dtype(), 0);
    std::vector<Ref> refs(static_cast<size_t>(x.numel()));
    for (int64_t k = 0; k < x.numel(); ++k) {
      int64_t m = (k / N) % M, n = k % N;
      bool keep = (lo < 0 || m - n <= lo) && (up < 0 || n - m <= up);
      refs[k] = keep ? Ref{0, k} : Ref{1, 0};
    }
    out.push_back(share(assemble(ic.ctx, x.dtype(), x.shape(), {&x, &zero}, refs)));
    return true;
  };
  r.add(std::move(s));
}

void add_cumsum(OpRegistry& r) {
  OpSchema s;
  s.name = "cumsum";
  s.inputs = {in("x", dt::numeric(), "T"), in_opt_const("axis", dt::int32(), def_int(0)),
              in_opt_const("exclusive", dt::boolean(), def_bool(false)),
              in_opt_const("reverse", dt::boolean(), def_bool(false))};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
    int64_t rank = static_cast<int64_t>(ops::ranked_shape(ic, "x").size());
    int64_t axis = ic.int_("axis");
    // coremltools accepts [-1, rank - 1] only
    if (axis < -1 || axis > rank - 1)
      ic.fail_input("axis", "should be in the range [-1, " + std::to_string(rank - 1) + "], got " +
                                std::to_string(axis));
    return {ic.type("x")};
  };
  s.value = [](InferCtx& ic, Outs& out) {
    if (!ic.known("x")) return false;
    const Value& x = *ic.val("x");
    if (x.rank() == 0) return false;
    int64_t axis = ic.int_("axis");
    if (axis < 0) axis += x.rank();
    bool excl = ic.bool_("exclusive"), rev = ic.bool_("reverse");
    const std::vector<int64_t>& xs = x.shape();
    int64_t outer = prod(xs, 0, axis), inner = prod(xs, axis + 1, xs.size()), n = xs[axis];
    bool fl = is_float(x.dtype());
    std::vector<double> vd = fl ? x.to_doubles() : std::vector<double>();
    std::vector<int64_t> vi = fl ? std::vector<int64_t>() : x.to_ints();
    std::vector<double> od(vd.size());
    std::vector<int64_t> oi(vi.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        double accd = 0;
        int64_t acci = 0;
        for (int64_t j0 = 0; j0 < n; ++j0) {
          int64_t j = rev ? n - 1 - j0 : j0;
          int64_t k = (o * n + j) * inner + i;
          if (excl) {
            if (fl) od[k] = accd; else oi[k] = acci;
          }
          if (fl) accd = static_cast<double>(static_cast<float>(accd + vd[k]));
          else acci += vi[k];
          if (!excl) {
            if (fl) od[k] = accd; else oi[k] = acci;
          }
        }
      }
    out.push_back(share(fl ? Value::from_doubles(x.dtype(), xs, od) : Value::from_ints(x.dtype(), xs, oi)));
    return true;
  };
  r.add(std::move(s));
}

void add_flatten2d(OpRegistry& r) {
  OpSchema s;
  s.name = "flatten2d";
  s.inputs = {in("x", dt::numeric_bool(), "T"), in_opt_const("axis", dt::int32(), def_int(1))};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
    const std::vector<Dim>& xs = ops::ranked_shape(ic, "x");
    int64_t rank = static_cast<int64_t>(xs.size());
    int64_t axis = ic.int_("axis");
    if (axis < -rank || axis > rank)
      ic.fail_input("axis", "= " + std::to_string(axis) + " is out of range [" +
                                std::to_string(-rank) + ", " + std::to_string(rank) + "]");
    if (axis < 0) axis += rank;
    std::vector<Dim> pre(xs.begin(), xs.begin() + axis), post(xs.begin() + axis, xs.end());
    return {ic.ctx.tensor(ic.type("x")->dtype(),
                          std::vector<Dim>{ic.ctx.product(pre), ic.ctx.product(post)})};
  };
  s.value = [](InferCtx& ic, Outs& out) {
    // VALUE | SYMBOL: a symbolic value is reshaped too
    const std::shared_ptr<const Value>& x = ic.var("x")->value();
    if (!x) return false;
    int64_t rank = x->rank(), axis = ic.int_("axis");
    if (axis < 0) axis += rank;
    out.push_back(share(x->reshaped({prod(x->shape(), 0, axis), prod(x->shape(), axis, rank)})));
    return true;
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------------------------
// one_hot, non_zero

void add_one_hot(OpRegistry& r) {
  OpSchema s;
  s.name = "one_hot";
  s.inputs = {in("indices", dt::int32()), in("one_hot_vector_size", dt::int32()),
              in_opt_const("axis", dt::int32(), def_int(-1)),
              in_opt_const("on_value", dt::numeric_bool(), def_int(1), "T"),
              in_opt_const("off_value", dt::numeric_bool(), def_int(0), "T")};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
    if (ic.type("on_value")->dtype() != ic.type("off_value")->dtype())
      ic.type_error("off_value", "must have the dtype of on_value (" +
                                     std::string(dtype_name(ic.type("on_value")->dtype())) +
                                     "), got " + std::string(dtype_name(ic.type("off_value")->dtype())));
    const std::vector<Dim>& is = ops::ranked_shape(ic, "indices");
    int64_t rank = static_cast<int64_t>(is.size());
    int64_t axis = ic.int_("axis");
    if (axis < -rank - 1 || axis > rank)
      ic.fail_input("axis", "= " + std::to_string(axis) + " is out of bounds for indices of rank " +
                                std::to_string(rank));
    Context& c = ic.ctx;
    Dim depth;
    auto d = ic.dims("one_hot_vector_size");
    if (d && d->size() == 1) {
      depth = (*d)[0];
      if (c.range(depth).hi < 0)
        ic.fail_input("one_hot_vector_size", "must be non-negative, got " + depth->str());
    } else {
      depth = c.fresh();
    }
    int64_t cut = axis < 0 ? rank + axis + 1 : axis;
    std::vector<Dim> out = is;
    out.insert(out.begin() + cut, depth);
    return {c.tensor(ic.type("on_value")->dtype(), out)};
  };
  r.add(std::move(s));
}

void add_non_zero(OpRegistry& r) {
  OpSchema s;
  s.name = "non_zero";
  s.inputs = {in("x", dt::numeric_bool(), "T")};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
    const std::vector<Dim>& xs = ops::ranked_shape(ic, "x");
    Context& c = ic.ctx;
    Dim rank = c.constant(static_cast<int64_t>(xs.size()));
    if (ic.known("x")) {
      const Value& x = *ic.val("x");
      int64_t n = 0;
      for (int64_t k = 0; k < x.numel(); ++k) n += x.as_double(k) != 0;
      return {c.tensor(DataType::Int32, std::vector<Dim>{c.constant(n), rank})};
    }
    return {c.tensor(DataType::Int32, std::vector<Dim>{c.fresh(), rank})};
  };
  s.value = [](InferCtx& ic, Outs& out) {
    if (!ic.known("x")) return false;
    const Value& x = *ic.val("x");
    std::vector<int64_t> idx;
    int64_t n = 0;
    for_each_index(x.shape(), [&](const std::vector<int64_t>& ix) {
      int64_t k = 0;
      std::vector<int64_t> st = ops::strides_of(x.shape());
      for (size_t d = 0; d < ix.size(); ++d) k += ix[d] * st[d];
      if (x.as_double(k) != 0) {
        idx.insert(idx.end(), ix.begin(), ix.end());
        ++n;
      }
    });
    out.push_back(share(Value::from_ints(DataType::Int32, {n, static_cast<int64_t>(x.rank())}, idx)));
    return true;
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------------------------
// argsort, topk

/// Sort permutations along `axis`: for each line, indices in sorted order (numpy argsort of x,
/// or of -x when descending; stable).
std::vector<int64_t> sort_perm(const Value& x, int64_t axis, bool ascending) {
  const std::vector<int64_t>& xs = x.shape();
  int64_t outer = prod(xs, 0, axis), inner = prod(xs, axis + 1, xs.size()), n = xs[axis];
  std::vector<double> v = x.to_doubles();
  std::vector<int64_t> perm(v.size());
  std::vector<int64_t> line(static_cast<size_t>(n));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::iota(line.begin(), line.end(), 0);
      auto at = [&](int64_t j) { return v[(o * n + j) * inner + i]; };
      std::stable_sort(line.begin(), line.end(), [&](int64_t a, int64_t b) {
        return ascending ? at(a) < at(b) : -at(a) < -at(b);
      });
      for (int64_t j = 0; j < n; ++j) perm[(o * n + j) * inner + i] = line[j];
    }
  return perm;
}

void add_argsort(OpRegistry& r) {
  OpSchema s;
  s.name = "argsort";
  s.inputs = {in("x", dt::numeric(), "T"), in_opt_const("axis", dt::int32(), def_int(-1)),
              in_opt_const("ascending", dt::boolean(), def_bool(false))};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
    const std::vector<Dim>& xs = ops::ranked_shape(ic, "x");
    ic.axis("axis", ic.int_("axis"), static_cast<int64_t>(xs.size()));
    return {ic.ctx.tensor(DataType::Int32, xs)};
  };
  s.value = [](InferCtx& ic, Outs& out) {
    if (!ic.known("x")) return false;
    const Value& x = *ic.val("x");
    if (x.rank() == 0) return false;
    int64_t axis = ic.axis("axis", ic.int_("axis"), x.rank());
    out.push_back(share(Value::from_ints(DataType::Int32, x.shape(), sort_perm(x, axis, ic.bool_("ascending")))));
    return true;
  };
  r.add(std::move(s));
}

/// topk's k along the axis (iOS17: -1 selects the whole axis).
Dim topk_k(InferCtx& ic, const std::vector<Dim>& xs, int64_t axis) {
  int64_t k = ic.int_("k");
  Context& c = ic.ctx;
  if (k == -1 && ic.opset >= Target::iOS17) return xs[axis];
  if (k <= 0) ic.fail_input("k", "must be positive, got " + std::to_string(k));
  if (xs[axis]->is_const() && k > xs[axis]->value())
    ic.fail("K=" + std::to_string(k) + " is greater than size of the given axis=" +
            std::to_string(axis) + " (" + xs[axis]->str() + ") of x " + dims_str(xs));
  return c.constant(k);
}

void add_topk(OpRegistry& r, Target since) {
  OpSchema s;
  s.name = "topk";
  s.since = since;
  s.num_outputs = since >= Target::iOS16 ? -1 : 2;
  if (since >= Target::iOS17) {
    DTypeSet t = {DataType::Float16, DataType::Float32, DataType::Int8, DataType::Int16,
                  DataType::Int32, DataType::UInt8, DataType::UInt16};
    s.inputs = {in("x", t, "T"), in_opt_const("k", {DataType::Int8, DataType::Int16, DataType::Int32}, def_int(1), "K")};
  } else {
    s.inputs = {in("x", dt::numeric(), "T"), in_opt_const("k", dt::int32(), def_int(1))};
  }
  s.inputs.push_back(in_opt_const("axis", dt::int32(), def_int(-1)));
  s.inputs.push_back(in_opt_const("ascending", dt::boolean(), def_bool(false)));
  if (since >= Target::iOS16) {
    s.inputs.push_back(in_opt_const("sort", dt::boolean(), def_bool(true)));
    s.inputs.push_back(in_opt_const("return_indices", dt::boolean(), def_bool(true)));
  }
  if (since >= Target::iOS17) {
    s.inputs.push_back(in_opt_const("output_indices_dtype", dt::string()));
    // output_indices_dtype defaults to "int32" only when indices are returned
    s.defaults = [](InferCtx& ic) {
      std::vector<std::pair<std::string, Value>> d;
      if (!ic.has("return_indices") || ic.bool_("return_indices"))
        d.emplace_back("output_indices_dtype", Value::scalar_string("int32"));
      return d;
    };
  }
  s.infer = [since](InferCtx& ic) -> std::vector<const Type*> {
    const std::vector<Dim>& xs = ops::ranked_shape(ic, "x");
    int64_t axis = ic.axis("axis", ic.int_("axis"), static_cast<int64_t>(xs.size()));
    bool ret_idx = since < Target::iOS16 || ic.bool_("return_indices");
    DataType idt = DataType::Int32;
    if (since >= Target::iOS17) {
      if (!ret_idx && ic.has("output_indices_dtype"))
        ic.fail("output_indices_dtype can only be set when return_indices=True");
      if (ret_idx) {
        std::string o = ic.str("output_indices_dtype");
        if (o != "int32" && o != "uint16")
          ic.fail_input("output_indices_dtype", "must be \"int32\" or \"uint16\", got \"" + o + "\"");
        idt = o == "int32" ? DataType::Int32 : DataType::UInt16;
      }
    }
    std::vector<Dim> out = xs;
    out[axis] = topk_k(ic, xs, axis);
    std::vector<const Type*> r = {ic.ctx.tensor(ic.type("x")->dtype(), out)};
    if (ret_idx) r.push_back(ic.ctx.tensor(idt, out));
    return r;
  };
  s.value = [since](InferCtx& ic, Outs& out) {
    if (!ic.known("x")) return false;
    const Value& x = *ic.val("x");
    if (x.rank() == 0) return false;
    int64_t axis = ic.axis("axis", ic.int_("axis"), x.rank());
    int64_t k = ic.int_("k");
    if (k == -1) k = x.shape()[axis];
    std::vector<int64_t> perm = sort_perm(x, axis, ic.bool_("ascending"));
    const std::vector<int64_t>& xs = x.shape();
    int64_t outer = prod(xs, 0, axis), inner = prod(xs, axis + 1, xs.size()), n = xs[axis];
    std::vector<int64_t> sh = xs;
    sh[axis] = k;
    std::vector<Ref> refs;
    std::vector<int64_t> idx;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < k; ++j)
        for (int64_t i = 0; i < inner; ++i) {
          int64_t p = perm[(o * n + j) * inner + i];
          idx.push_back(p);
          refs.push_back({0, (o * n + p) * inner + i});
        }
    out.push_back(share(assemble(ic.ctx, x.dtype(), sh, {&x}, refs)));
    bool ret_idx = since < Target::iOS16 || ic.bool_("return_indices");
    if (ret_idx) {
      DataType idt = since >= Target::iOS17 && ic.str("output_indices_dtype") == "uint16"
                         ? DataType::UInt16 : DataType::Int32;
      out.push_back(share(Value::from_ints(idt, sh, idx)));
    }
    return true;
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------------------------
// non_maximum_suppression

void add_nms(OpRegistry& r, Target since) {
  OpSchema s;
  s.name = "non_maximum_suppression";
  s.since = since;
  bool v17 = since >= Target::iOS17;
  s.num_outputs = v17 ? 3 : 4;
  s.inputs = {in("boxes", dt::floats(), "T"), in("scores", dt::floats(), "T"),
              in_const("iou_threshold", dt::floats(), "T")};
  if (!v17) s.inputs.push_back(in_const("score_threshold", dt::floats(), "T"));
  s.inputs.push_back(in_const("max_boxes", dt::int32()));
  s.inputs.push_back(in_opt_const("per_class_suppression", dt::boolean(), def_bool(false)));
  s.infer = [v17](InferCtx& ic) -> std::vector<const Type*> {
    const std::vector<Dim>& bs = ops::ranked_shape(ic, "boxes");
    const std::vector<Dim>& ss = ops::ranked_shape(ic, "scores");
    if (bs.size() != 3) ic.fail_input("boxes", "must have rank 3, got " + dims_str(bs));
    if (ss.size() != 3) ic.fail_input("scores", "must have rank 3, got " + dims_str(ss));
    Context& c = ic.ctx;
    Dim four = c.constant(4);
    // boxes (n, B, 4) / scores (n, B, K); iOS17: boxes (n, 4, B) / scores (n, K, B)
    Dim bdim = v17 ? bs[1] : bs[2];
    if (c.eq(bdim, four) == Tri::False)
      ic.fail_input("boxes", "must have 4 coordinates in dim " + std::string(v17 ? "1" : "2") +
                                 ", got " + dims_str(bs));
    int64_t m = ic.int_("max_boxes");
    if (m <= 0) ic.fail_input("max_boxes", "must be positive, got " + std::to_string(m));
    Dim M = c.constant(m);
    DataType bt = ic.type("boxes")->dtype(), st = ic.type("scores")->dtype();
    if (v17)
      return {c.tensor(bt, std::vector<Dim>{ss[0], four, M}),
              c.tensor(st, std::vector<Dim>{ss[0], ss[1], M}),
              c.tensor(DataType::Int32, std::vector<Dim>{ss[0], M})};
    return {c.tensor(bt, std::vector<Dim>{ss[0], M, four}),
            c.tensor(st, std::vector<Dim>{ss[0], M, ss[2]}),
            c.tensor(DataType::Int32, std::vector<Dim>{ss[0], M}),
            c.tensor(DataType::Int32, std::vector<Dim>{ss[0]})};
  };
  r.add(std::move(s));
}

}  // namespace

void register_tensor_operation_ops(OpRegistry& r) {
  add_concat(r);
  add_split(r);
  add_stack(r);
  add_tile(r);
  add_pad(r);
  add_fill(r);
  add_shape(r);
  add_range_1d(r);
  add_identity(r);
  add_band_part(r);
  add_cumsum(r);
  add_flatten2d(r);
  add_one_hot(r);
  add_non_zero(r);
  add_argsort(r);
  add_topk(r, Target::iOS13);
  add_nms(r, Target::iOS13);
  add_fill_like(r);
  add_topk(r, Target::iOS16);
  add_topk(r, Target::iOS17);
  add_nms(r, Target::iOS17);
}

}  // namespace milkit
