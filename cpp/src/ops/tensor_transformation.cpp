// tensor_transformation ops (coremltools iOS15/16/17/18 tensor_transformation.py): reshape,
// transpose, squeeze, expand_dims, slice_by_index, slice_by_size, reverse, reshape_like,
// depth_to_space, space_to_depth, pixel_shuffle, pixel_unshuffle, sliding_windows,
// batch_to_space, space_to_batch, reverse_sequence, slice_update.
//
// Shapes follow coremltools, except that milkit keeps exact symbolic expressions where
// coremltools makes a fresh symbol (reshape with -1, slices over symbolic dims, ...), and
// proven shape conflicts are errors.
#include <algorithm>
#include <numeric>

#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"

namespace milkit {

namespace {

using ValPtr = std::shared_ptr<const Value>;
using Outs = std::vector<ValPtr>;

DTypeSet t15() { return dt::numeric_bool(); }
DTypeSet t17() {
  return {DataType::Float16, DataType::Float32, DataType::Int8,  DataType::UInt8,
          DataType::Int16,   DataType::UInt16,  DataType::Int32, DataType::Bool};
}
DTypeSet u17() { return {DataType::Int8, DataType::Int16, DataType::Int32}; }

std::string ints_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string dims_str(const std::vector<Dim>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i]->str();
  return s + "]";
}

/// Concrete dims of a type whose shape is static (values always have static shapes).
std::vector<int64_t> concrete(const std::vector<Dim>& s) {
  std::vector<int64_t> r;
  r.reserve(s.size());
  for (Dim d : s) r.push_back(d->value());
  return r;
}

bool all_const(const std::vector<Dim>& s) {
  for (Dim d : s)
    if (!d->is_const()) return false;
  return true;
}

/// The value of x with the output shape (pure reshape of the same elements, symbolic or not).
bool reshape_value(InferCtx& ic, const Type* out, Outs& o) {
  const Value* xv = ic.val("x");
  if (!xv || !out->has_rank() || !all_const(out->shape())) return false;
  std::vector<int64_t> shape = concrete(out->shape());
  if (shape_numel(shape) != xv->numel()) return false;
  o.push_back(ops::share(xv->reshaped(shape)));
  return true;
}

/// The optional const int vector input `name` of length `rank`, or `def` repeated.
std::vector<int64_t> opt_ints(InferCtx& ic, const char* name, int64_t rank, int64_t def) {
  if (!ic.has(name)) return std::vector<int64_t>(static_cast<size_t>(rank), def);
  std::vector<int64_t> v = ic.ints(name);
  if (static_cast<int64_t>(v.size()) != rank)
    ic.fail_input(name, "must have one entry per dim of x (" + std::to_string(rank) + "), got " +
                            ints_str(v));
  return v;
}

// ---------------------------------------------------------------------------------------------
// reshape

/// Whether a == b is impossible: provably different (ranges), or a - b = c0 + sum(ci * m_i)
/// with c0 not a multiple of gcd(ci) (e.g. 4*S can never be 15).
bool provably_ne(Context& c, Dim a, Dim b) {
  if (c.eq(a, b) == Tri::False) return true;
  Dim d = c.sub(a, b);
  if (d->is_const()) return d->value() != 0;
  if (d->kind() != Expr::Kind::Poly) return false;
  int64_t g = 0;
  for (const Term& t : d->terms()) g = std::gcd(g, t.coef < 0 ? -t.coef : t.coef);
  return g > 1 && d->value() % g != 0;
}

std::vector<const Type*> reshape_infer(InferCtx& ic, bool ios17) {
  Context& c = ic.ctx;
  const Type* xt = ic.type("x");
  const Type* st = ic.type("shape");
  DataType dt = xt->dtype();
  if (st->rank() != 1) ic.fail_input("shape", "must be a rank-1 tensor, got " + st->str());
  Dim k = st->shape()[0];
  if (!k->is_const()) return {c.tensor_unknown_rank(dt)};  // unknown output rank
  size_t K = static_cast<size_t>(k->value());
  auto sd = ic.dims("shape");
  if (!sd) {
    std::vector<Dim> out(K);
    // a single output dim holds every element: exact, where coremltools makes a fresh symbol
    if (K == 1 && xt->has_rank())
      out[0] = c.product(xt->shape());
    else
      for (auto& d : out) d = c.fresh();
    return {c.tensor(dt, out)};
  }
  std::vector<Dim> out = *sd;
  const std::string req = dims_str(out);
  int neg = -1, n_neg = 0;
  for (size_t i = 0; i < K; ++i) {
    if (!out[i]->is_const()) continue;
    int64_t v = out[i]->value();
    if (v == -1) {
      ++n_neg;
      neg = static_cast<int>(i);
    } else if (v < -1) {
      ic.fail_input("shape", "has a negative dim " + std::to_string(v) + " in " + req);
    }
  }
  if (n_neg > 1)
    ic.fail_input("shape", "may have only one dimension equal to -1, got " +
                               std::to_string(n_neg) + " in " + req);
  if (!xt->has_rank()) {
    for (auto& d : out)
      if (d->is_const() && d->value() <= 0) d = c.fresh();
    return {c.tensor(dt, out)};
  }
  const std::vector<Dim>& xs = xt->shape();
  const std::string from = ops::shape_str(xs);
  // 0 copies a dim of x: iOS15 position-wise (same rank required), iOS17 right-aligned (1 when
  // out of range)
  bool zero = false;
  for (Dim d : out) zero |= d->is_const() && d->value() == 0;
  if (zero) {
    if (!ios17) {
      if (K != xs.size())
        ic.fail_input("shape", "has a 0, so its length (" + std::to_string(K) +
                                   ") must equal the rank of x " + from);
      for (size_t i = 0; i < K; ++i)
        if (out[i]->is_const() && out[i]->value() == 0) out[i] = xs[i];
    } else {
      for (size_t j = 0; j < K; ++j) {
        Dim& d = out[K - 1 - j];
        if (d->is_const() && d->value() == 0) d = j < xs.size() ? xs[xs.size() - 1 - j] : c.constant(1);
      }
    }
  }
  Dim total = c.product(xs);
  if (neg >= 0) {
    std::vector<Dim> others;
    for (size_t i = 0; i < K; ++i)
      if (static_cast<int>(i) != neg) others.push_back(out[i]);
    Dim rest = c.product(others);
    if (rest->is_const() && rest->value() == 0)
      ic.fail("cannot infer the -1 of shape " + req + ": the other dims have 0 elements");
    out[neg] = c.floordiv(total, rest);
  }
  Dim vol = c.product(out);
  if (provably_ne(c, total, vol))
    ic.fail("Invalid target shape in `reshape` op (" + from + " to " + req + "): cannot reshape x of " +
            total->str() + " elements to " + vol->str() + " elements");
  return {c.tensor(dt, out)};
}

void add_reshape(OpRegistry& r) {
  for (bool ios17 : {false, true}) {
    OpSchema s;
    s.name = "reshape";
    s.since = ios17 ? Target::iOS17 : Target::iOS13;
    s.inputs = {in("x", ios17 ? t17() : t15(), "T"),
                ios17 ? in("shape", u17(), "U") : in("shape", dt::int32())};
    s.infer = [ios17](InferCtx& ic) { return reshape_infer(ic, ios17); };
    s.value = [ios17](InferCtx& ic, Outs& o) {
      // x has a value, so a static shape: inference makes no fresh symbols
      if (!ic.val("x") || !ic.dims("shape")) return false;
      return reshape_value(ic, reshape_infer(ic, ios17)[0], o);
    };
    r.add(std::move(s));
  }
}

// ---------------------------------------------------------------------------------------------
// transpose

std::vector<int64_t> checked_perm(InferCtx& ic, int64_t rank) {
  std::vector<int64_t> perm = ic.ints("perm");
  if (static_cast<int64_t>(perm.size()) != rank)
    ic.fail_input("perm", "should have the same length as rank(x): " + std::to_string(perm.size()) +
                              " != " + std::to_string(rank));
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (auto& p : perm) {
    if (p < -rank || p >= rank)
      ic.fail_input("perm", "= " + ints_str(perm) + " has an entry out of range for rank " +
                                std::to_string(rank));
    if (p < 0) p += rank;
    if (seen[p]) ic.fail_input("perm", "= " + ints_str(perm) + " is not a permutation");
    seen[p] = true;
  }
  return perm;
}


// The elements of `x` read in the order of an output of `shape` whose dim i steps `ost[i]`
// elements of x (a transpose's value).
template <class T>
void permute_copy(const T* in, T* out, const std::vector<int64_t>& shape, const std::vector<int64_t>& ost, int64_t n) {
  int rank = static_cast<int>(shape.size());
  std::vector<int64_t> c(static_cast<size_t>(rank), 0);
  int64_t src = 0;
  for (int64_t k = 0; k < n; ++k) {
    out[k] = in[src];
    for (int d = rank - 1; d >= 0; --d) {
      if (++c[static_cast<size_t>(d)] < shape[static_cast<size_t>(d)]) {
        src += ost[static_cast<size_t>(d)];
        break;
      }
      src -= ost[static_cast<size_t>(d)] * (shape[static_cast<size_t>(d)] - 1);
      c[static_cast<size_t>(d)] = 0;
    }
  }
}

std::shared_ptr<const Buffer> permute_raw(const Value& x, const std::vector<int64_t>& shape, const std::vector<int64_t>& ost) {
  int64_t n = x.numel();
  size_t es = static_cast<size_t>(dtype_storage_bytes(x.dtype()));
  std::vector<uint8_t> out(static_cast<size_t>(n) * es);
  switch (es) {
    case 1: permute_copy(x.raw(), out.data(), shape, ost, n); break;
    case 2: permute_copy(reinterpret_cast<const uint16_t*>(x.raw()), reinterpret_cast<uint16_t*>(out.data()), shape, ost, n); break;
    case 4: permute_copy(reinterpret_cast<const uint32_t*>(x.raw()), reinterpret_cast<uint32_t*>(out.data()), shape, ost, n); break;
    default: permute_copy(reinterpret_cast<const uint64_t*>(x.raw()), reinterpret_cast<uint64_t*>(out.data()), shape, ost, n); break;
  }
  return Buffer::take(std::move(out));
}

void add_transpose(OpRegistry& r) {
  for (bool ios17 : {false, true}) {
    OpSchema s;
    s.name = "transpose";
    s.since = ios17 ? Target::iOS17 : Target::iOS13;
    s.inputs = {in("x", ios17 ? t17() : t15(), "T"), in_const("perm", dt::int32())};
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
      const Type* xt = ic.type("x");
      if (!xt->has_rank()) return {xt};
      int64_t rank = xt->rank();
      std::vector<int64_t> perm = checked_perm(ic, rank);
      std::vector<Dim> out;
      for (int64_t p : perm) out.push_back(xt->shape()[p]);
      return {ic.ctx.tensor(xt->dtype(), out)};
    };
    s.value = [](InferCtx& ic, Outs& o) {
      const Value* xv = ic.val("x");
      if (!xv) return false;
      int64_t rank = xv->rank();
      std::vector<int64_t> perm = checked_perm(ic, rank);
      std::vector<int64_t> shape;
      for (int64_t p : perm) shape.push_back(xv->shape()[p]);
      std::vector<int64_t> st = ops::strides_of(xv->shape());
      if (xv->raw() && !xv->is_symbolic() && xv->numel() > 0) {
        // plain elements (weights): one pass with running offsets, no per-element index vector
        std::vector<int64_t> ost(static_cast<size_t>(rank));
        for (int64_t i = 0; i < rank; ++i) ost[static_cast<size_t>(i)] = st[static_cast<size_t>(perm[static_cast<size_t>(i)])];
        o.push_back(ops::share(Value(xv->dtype(), shape, permute_raw(*xv, shape, ost))));
        return true;
      }
      auto idx = ops::index_map(shape, [&](const std::vector<int64_t>& c) {
        int64_t f = 0;
        for (size_t i = 0; i < c.size(); ++i) f += c[i] * st[perm[i]];
        return f;
      });
      o.push_back(ops::share(ops::take_elements(*xv, idx, shape)));
      return true;
    };
    r.add(std::move(s));
  }
}

// ---------------------------------------------------------------------------------------------
// squeeze / expand_dims

std::vector<const Type*> squeeze_infer(InferCtx& ic) {
  const Type* xt = ic.type("x");
  if (!xt->has_rank()) return {xt};
  std::vector<Dim> out = xt->shape();
  int64_t rank = xt->rank();
  if (!ic.has("axes")) {
    // every dim known to be 1 (symbolic dims are assumed != 1, as in coremltools)
    out.erase(std::remove_if(out.begin(), out.end(),
                             [](Dim d) { return d->is_const() && d->value() == 1; }),
              out.end());
  } else {
    std::vector<int64_t> axes = ic.ints("axes");
    for (auto& a : axes) {
      if (a < -rank)
        ic.fail_input("axes", "has axis " + std::to_string(a) + ", out of range for rank " +
                                  std::to_string(rank));
      if (a < 0) a += rank;
    }
    std::sort(axes.rbegin(), axes.rend());
    for (int64_t a : axes) {
      if (static_cast<int64_t>(out.size()) <= a)
        ic.fail_input("axes", "has invalid axis " + std::to_string(a) +
                                  "; the axis should be smaller than " + std::to_string(out.size()));
      // only size-1 dims are removed (PyTorch semantics)
      if (out[a]->is_const() && out[a]->value() == 1) out.erase(out.begin() + a);
    }
  }
  return {ic.ctx.tensor(xt->dtype(), out)};
}

std::vector<const Type*> expand_dims_infer(InferCtx& ic) {
  const Type* xt = ic.type("x");
  std::vector<int64_t> axes = ic.ints("axes");
  if (!xt->has_rank()) return {xt};
  std::vector<Dim> out = xt->shape();
  int64_t out_rank = xt->rank() + static_cast<int64_t>(axes.size());
  for (auto& a : axes) {
    if (a <= -out_rank - 1 || a >= out_rank)
      ic.fail_input("axes", "value " + std::to_string(a) + " is out of bounds for x of shape " +
                                ops::shape_str(xt->shape()) + " (output rank " +
                                std::to_string(out_rank) + ")");
    if (a < 0) a += out_rank;
  }
  std::sort(axes.begin(), axes.end());
  for (int64_t a : axes) out.insert(out.begin() + a, ic.ctx.constant(1));
  return {ic.ctx.tensor(xt->dtype(), out)};
}

void add_squeeze_expand(OpRegistry& r) {
  for (bool ios17 : {false, true}) {
    OpSchema s;
    s.name = "squeeze";
    s.since = ios17 ? Target::iOS17 : Target::iOS13;
    s.inputs = {in("x", ios17 ? t17() : t15(), "T"), in_opt_const("axes", dt::int32())};
    s.infer = squeeze_infer;
    s.value = [](InferCtx& ic, Outs& o) { return reshape_value(ic, squeeze_infer(ic)[0], o); };
    r.add(std::move(s));
  }
  for (bool ios17 : {false, true}) {
    OpSchema s;
    s.name = "expand_dims";
    s.since = ios17 ? Target::iOS17 : Target::iOS13;
    s.inputs = {in("x", ios17 ? t17() : t15(), "T"), in_const("axes", dt::int32())};
    s.infer = expand_dims_infer;
    s.value = [](InferCtx& ic, Outs& o) { return reshape_value(ic, expand_dims_infer(ic)[0], o); };
    r.add(std::move(s));
  }
}

// ---------------------------------------------------------------------------------------------
// slice_by_index (and slice_update)

struct SliceSpec {
  std::optional<std::vector<Dim>> begin, end;  // nullopt: unknown
  std::vector<int64_t> stride, bmask, emask, smask;
};

SliceSpec slice_spec(InferCtx& ic, int64_t rank) {
  SliceSpec sp;
  for (const char* n : {"begin", "end"}) {
    const Type* t = ic.type(n);
    if (t->rank() != 1) ic.fail_input(n, "must be a rank-1 tensor, got " + t->str());
    Dim len = t->shape()[0];
    if (len->is_const() && len->value() != rank)
      ic.fail_input(n, "has length " + len->str() + ", which is not equal to the rank of x (" +
                           std::to_string(rank) + ")");
  }
  sp.begin = ic.dims("begin");
  sp.end = ic.dims("end");
  sp.stride = opt_ints(ic, "stride", rank, 1);
  sp.bmask = opt_ints(ic, "begin_mask", rank, 0);
  sp.emask = opt_ints(ic, "end_mask", rank, 0);
  sp.smask = opt_ints(ic, "squeeze_mask", rank, 0);
  for (int64_t s : sp.stride)
    if (s == 0) ic.fail_input("stride", "= " + ints_str(sp.stride) + " has a zero stride");
  return sp;
}

int64_t py_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t ceil_div_pos(int64_t a, int64_t b) { return -py_floordiv(-a, b); }  // b > 0

/// Sign of a dim: 1 when provably >= 0, -1 when provably < 0, 0 when unknown.
int sign_of(Context& c, Dim d) {
  Interval r = c.range(d);
  if (r.lo >= 0) return 1;
  if (r.hi < 0) return -1;
  return 0;
}

/// a - b, distributing over min/max so clamped bounds cancel: a - max(x, y) = min(a - x, a - y)
/// and min(x, y) - b = min(x - b, y - b) (e.g. S - max(0, S - 3) = min(S, 3)).
Dim dsub(Context& c, Dim a, Dim b) {
  if (b->kind() == Expr::Kind::Max) {
    Dim r = nullptr;
    for (Dim x : b->args()) r = r ? c.min(r, c.sub(a, x)) : c.sub(a, x);
    return r;
  }
  if (a->kind() == Expr::Kind::Min) {
    Dim r = nullptr;
    for (Dim x : a->args()) r = r ? c.min(r, dsub(c, x, b)) : dsub(c, x, b);
    return r;
  }
  return c.sub(a, b);
}

/// The output shape of a slice (coremltools' solve_slice_by_index_shape, with numpy's clamping
/// made symbolic: exact expressions over symbolic dims and symbolic begin/end values).
std::vector<Dim> slice_shape(InferCtx& ic, const std::vector<Dim>& xs, const SliceSpec& sp) {
  Context& c = ic.ctx;
  Dim zero = c.constant(0);
  std::vector<Dim> out;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (sp.smask[i]) continue;
    Dim n = xs[i];
    int64_t s = sp.stride[i];
    int64_t as = s > 0 ? s : -s;
    bool bm = sp.bmask[i] != 0, em = sp.emask[i] != 0;
    Dim b = sp.begin ? (*sp.begin)[i] : nullptr;
    Dim e = sp.end ? (*sp.end)[i] : nullptr;
    if (bm && em) {  // x[::s]
      out.push_back(c.ceildiv(n, c.constant(as)));
      continue;
    }
    // coremltools' deterministic cases (also errors), which hold whatever the dim is
    if (!bm && !em && b && e && b->is_const() && e->is_const()) {
      int64_t bv = b->value(), ev = e->value();
      std::optional<int64_t> o;
      if (bv >= 0 && ev >= 0 && s > 0) {
        if (ev < bv)
          ic.fail("unsupported values for dimension " + std::to_string(i) +
                  ", (begin, end, stride) : (" + std::to_string(bv) + ", " + std::to_string(ev) +
                  ", " + std::to_string(s) + ")");
        o = std::max<int64_t>(0, ceil_div_pos(ev - bv, s));
      }
      if (bv < 0 && ev < 0 && s < 0) {
        if (bv < ev)
          ic.fail("unsupported values for dimension " + std::to_string(i) +
                  ", (begin, end, stride) : (" + std::to_string(bv) + ", " + std::to_string(ev) +
                  ", " + std::to_string(s) + ")");
        o = std::max<int64_t>(0, py_floordiv(-(bv - ev - s - 1), s));
      }
      if (o && (*o == 0 || *o == 1)) {
        out.push_back(c.constant(*o));
        continue;
      }
    }
    if (!bm && em && b && b->is_const() &&
        ((b->value() == 0 && s < 0) || (b->value() == -1 && s > 0))) {
      out.push_back(c.constant(1));
      continue;
    }
    if (n->is_const() && n->value() == 1) {
      out.push_back(c.constant(1));
      continue;
    }
    // the general case: numpy's clamped begin and end
    int bs = b ? sign_of(c, b) : 0, es = e ? sign_of(c, e) : 0;
    if ((!bm && (!b || bs == 0)) || (!em && (!e || es == 0))) {
      out.push_back(c.fresh());  // nothing provable
      continue;
    }
    Dim diff;
    if (s > 0) {
      Dim lo = bm ? zero : bs > 0 ? c.min(b, n) : c.max(zero, c.add(b, n));
      Dim hi = em ? n : es > 0 ? c.min(e, n) : c.max(zero, c.add(e, n));
      diff = dsub(c, hi, lo);
    } else {
      Dim m1 = c.constant(-1);
      Dim last = c.sub(n, c.constant(1));
      Dim hi = bm ? last : bs > 0 ? c.min(b, last) : c.max(m1, c.add(b, n));
      Dim lo = em ? m1 : es > 0 ? c.min(e, last) : c.max(m1, c.add(e, n));
      diff = dsub(c, hi, lo);
    }
    Interval rd = c.range(diff);
    if (rd.hi <= 0)
      out.push_back(zero);
    else if (rd.lo >= 0)
      out.push_back(c.ceildiv(diff, c.constant(as)));
    else
      out.push_back(c.max(zero, c.ceildiv(diff, c.constant(as))));
  }
  return out;
}

/// Per-dim source indices of a slice over a concrete shape (numpy semantics; squeezed dims
/// take the single element at begin). nullopt when an index is out of range.
std::optional<std::vector<std::vector<int64_t>>> slice_indices(const std::vector<int64_t>& xs,
                                                               const std::vector<int64_t>& b,
                                                               const std::vector<int64_t>& e,
                                                               const SliceSpec& sp) {
  std::vector<std::vector<int64_t>> r(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    int64_t n = xs[i], s = sp.stride[i];
    if (sp.smask[i]) {
      int64_t k = sp.bmask[i] ? 0 : b[i];
      if (k < 0) k += n;
      if (k < 0 || k >= n) return std::nullopt;
      r[i] = {k};
      continue;
    }
    int64_t lo, hi;
    if (s > 0) {
      lo = sp.bmask[i] ? 0 : b[i] < 0 ? std::max<int64_t>(0, b[i] + n) : std::min(b[i], n);
      hi = sp.emask[i] ? n : e[i] < 0 ? std::max<int64_t>(0, e[i] + n) : std::min(e[i], n);
      for (int64_t k = lo; k < hi; k += s) r[i].push_back(k);
    } else {
      lo = sp.bmask[i] ? n - 1 : b[i] < 0 ? std::max<int64_t>(-1, b[i] + n) : std::min(b[i], n - 1);
      hi = sp.emask[i] ? -1 : e[i] < 0 ? std::max<int64_t>(-1, e[i] + n) : std::min(e[i], n - 1);
      for (int64_t k = lo; k > hi; k += s) r[i].push_back(k);
    }
  }
  return r;
}

/// Flat indices of the sliced elements, and the sliced shape (squeezed dims removed).
bool slice_flat(InferCtx& ic, const Value& xv, const SliceSpec& sp, const Type* out_t,
                std::vector<int64_t>& idx, std::vector<int64_t>& shape,
                std::vector<int64_t>& full_shape) {
  if (!ic.known("begin") || !ic.known("end")) return false;
  std::vector<int64_t> b = ic.ints("begin"), e = ic.ints("end");
  auto per = slice_indices(xv.shape(), b, e, sp);
  if (!per) return false;
  full_shape.clear();
  shape.clear();
  for (size_t i = 0; i < per->size(); ++i) {
    full_shape.push_back(static_cast<int64_t>((*per)[i].size()));
    if (!sp.smask[i]) shape.push_back(full_shape.back());
  }
  // a slice whose size disagrees with the inferred type (coremltools' shortcuts) is not folded
  if (!out_t->has_rank() || !all_const(out_t->shape()) || concrete(out_t->shape()) != shape)
    return false;
  std::vector<int64_t> st = ops::strides_of(xv.shape());
  idx = ops::index_map(full_shape, [&](const std::vector<int64_t>& c) {
    int64_t f = 0;
    for (size_t i = 0; i < c.size(); ++i) f += (*per)[i][c[i]] * st[i];
    return f;
  });
  return true;
}

std::vector<const Type*> slice_by_index_infer(InferCtx& ic) {
  const Type* xt = ic.type("x");
  if (!xt->has_rank()) return {xt};
  SliceSpec sp = slice_spec(ic, xt->rank());
  return {ic.ctx.tensor(xt->dtype(), slice_shape(ic, xt->shape(), sp))};
}

void add_slice_by_index(OpRegistry& r) {
  for (bool ios17 : {false, true}) {
    OpSchema s;
    s.name = "slice_by_index";
    s.since = ios17 ? Target::iOS17 : Target::iOS13;
    if (ios17)
      s.inputs = {in("x", t17(), "T"), in("begin", u17(), "U"), in("end", u17(), "U"),
                  in_opt_const("stride", u17(), nullptr, "U")};
    else
      s.inputs = {in("x", t15(), "T"), in("begin", dt::int32()), in("end", dt::int32()),
                  in_opt_const("stride", dt::int32())};
    s.inputs.push_back(in_opt_const("begin_mask", dt::boolean()));
    s.inputs.push_back(in_opt_const("end_mask", dt::boolean()));
    s.inputs.push_back(in_opt_const("squeeze_mask", dt::boolean()));
    s.infer = slice_by_index_infer;
    s.value = [](InferCtx& ic, Outs& o) {
      const Value* xv = ic.val("x");
      if (!xv || !ic.known("begin") || !ic.known("end")) return false;
      const Type* out_t = slice_by_index_infer(ic)[0];
      SliceSpec sp = slice_spec(ic, xv->rank());
      std::vector<int64_t> idx, shape, full;
      if (!slice_flat(ic, *xv, sp, out_t, idx, shape, full)) return false;
      o.push_back(ops::share(ops::take_elements(*xv, idx, shape)));
      return true;
    };
    r.add(std::move(s));
  }
}

// ---------------------------------------------------------------------------------------------
// slice_by_size

std::vector<const Type*> slice_by_size_infer(InferCtx& ic) {
  Context& c = ic.ctx;
  const Type* xt = ic.type("x");
  const Type* bt = ic.type("begin");
  const Type* st = ic.type("size");
  if (bt->rank() != 1)
    ic.fail_input("begin", "should be a 1-D tensor, got a " + std::to_string(bt->rank()) + "-D tensor");
  if (st->rank() != 1)
    ic.fail_input("size", "should be a 1-D tensor, got a " + std::to_string(st->rank()) + "-D tensor");
  if (!xt->has_rank()) return {xt};
  int64_t rank = xt->rank();
  for (const Type* t : {bt, st}) {
    Dim len = t->shape()[0];
    if (!(len->is_const() && len->value() == rank))
      ic.fail_input(t == bt ? "begin" : "size", "has length " + len->str() +
                                                    ", which doesn't equal the input rank " +
                                                    std::to_string(rank));
  }
  auto size = ic.dims("size");
  std::vector<Dim> out;
  if (!size) {
    for (int64_t i = 0; i < rank; ++i) out.push_back(c.fresh());
    return {c.tensor(xt->dtype(), out)};
  }
  auto begin = ic.dims("begin");
  for (int64_t i = 0; i < rank; ++i) {
    Dim s = (*size)[i];
    if (!s->is_const() || s->value() != -1) {
      out.push_back(s);
      continue;
    }
    // size -1: everything from begin on
    if (!begin) {
      out.push_back(c.fresh());
      continue;
    }
    Dim b = (*begin)[i];
    int sg = sign_of(c, b);
    if (sg > 0)
      out.push_back(c.sub(xt->shape()[i], b));
    else if (sg < 0)
      out.push_back(c.min(c.neg(b), xt->shape()[i]));  // a negative begin counts from the end
    else
      out.push_back(c.fresh());
  }
  return {c.tensor(xt->dtype(), out)};
}

void add_slice_by_size(OpRegistry& r) {
  for (bool ios17 : {false, true}) {
    OpSchema s;
    s.name = "slice_by_size";
    s.since = ios17 ? Target::iOS17 : Target::iOS13;
    if (ios17)
      s.inputs = {in("x", t17(), "T"), in("begin", u17(), "U"), in("size", u17(), "U")};
    else
      s.inputs = {in("x", t15(), "T"), in("begin", dt::int32()), in("size", dt::int32())};
    s.infer = slice_by_size_infer;
    s.value = [](InferCtx& ic, Outs& o) {
      const Value* xv = ic.val("x");
      if (!xv || !ic.known("begin") || !ic.known("size")) return false;
      const Type* out_t = slice_by_size_infer(ic)[0];
      std::vector<int64_t> b = ic.ints("begin"), sz = ic.ints("size");
      const auto& xs = xv->shape();
      std::vector<std::vector<int64_t>> per(xs.size());
      std::vector<int64_t> shape;
      for (size_t i = 0; i < xs.size(); ++i) {
        int64_t n = xs[i], lo = b[i] < 0 ? b[i] + n : b[i];
        int64_t hi = sz[i] > 0 ? lo + sz[i] : n;  // python slice(lo, lo + size) / slice(lo, None)
        lo = std::clamp<int64_t>(lo, 0, n);
        hi = std::clamp<int64_t>(hi, 0, n);
        for (int64_t k = lo; k < hi; ++k) per[i].push_back(k);
        shape.push_back(static_cast<int64_t>(per[i].size()));
      }
      if (!out_t->has_rank() || !all_const(out_t->shape()) || concrete(out_t->shape()) != shape)
        return false;
      std::vector<int64_t> st = ops::strides_of(xs);
      auto idx = ops::index_map(shape, [&](const std::vector<int64_t>& c) {
        int64_t f = 0;
        for (size_t i = 0; i < c.size(); ++i) f += per[i][c[i]] * st[i];
        return f;
      });
      o.push_back(ops::share(ops::take_elements(*xv, idx, shape)));
      return true;
    };
    r.add(std::move(s));
  }
}

// ---------------------------------------------------------------------------------------------
// reverse / reverse_sequence

void add_reverse(OpRegistry& r) {
  for (bool ios17 : {false, true}) {
    OpSchema s;
    s.name = "reverse";
    s.since = ios17 ? Target::iOS17 : Target::iOS13;
    s.inputs = {in("x", ios17 ? t17() : t15(), "T"), in_opt_const("axes", dt::int32())};
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
      const Type* xt = ic.type("x");
      if (ic.has("axes") && xt->has_rank())
        for (int64_t a : ic.ints("axes")) ic.axis("axes", a, xt->rank());
      return {xt};
    };
    s.value = [](InferCtx& ic, Outs& o) {
      const Value* xv = ic.val("x");
      if (!xv || xv->is_symbolic()) return false;
      int64_t rank = xv->rank();
      std::vector<bool> flip(static_cast<size_t>(rank), !ic.has("axes"));
      if (ic.has("axes"))
        for (int64_t a : ic.ints("axes")) flip[ic.axis("axes", a, rank)] = !flip[ic.axis("axes", a, rank)];
      const auto& xs = xv->shape();
      std::vector<int64_t> st = ops::strides_of(xs);
      auto idx = ops::index_map(xs, [&](const std::vector<int64_t>& c) {
        int64_t f = 0;
        for (size_t i = 0; i < c.size(); ++i) f += (flip[i] ? xs[i] - 1 - c[i] : c[i]) * st[i];
        return f;
      });
      o.push_back(ops::share(ops::take_elements(*xv, idx, xs)));
      return true;
    };
    r.add(std::move(s));
  }
  for (bool ios17 : {false, true}) {
    OpSchema s;
    s.name = "reverse_sequence";
    s.since = ios17 ? Target::iOS17 : Target::iOS13;
    s.inputs = {in("x", ios17 ? t17() : t15(), "T"),
                ios17 ? in("lengths", u17(), "U") : in("lengths", dt::int32()),
                in_opt_const("seq_axis", dt::int32(), def_int(0)),
                in_opt_const("batch_axis", dt::int32(), def_int(0))};
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> { return {ic.type("x")}; };
    r.add(std::move(s));
  }
}

// ---------------------------------------------------------------------------------------------
// reshape_like (iOS16)

void add_reshape_like(OpRegistry& r) {
  for (bool ios17 : {false, true}) {
    OpSchema s;
    s.name = "reshape_like";
    s.since = ios17 ? Target::iOS17 : Target::iOS16;
    auto tup = [](const char* n) {
      InputDef d = in(n, DTypeSet::any());
      d.kind = InputKind::Tuple;
      return d;
    };
    s.inputs = {in("x", ios17 ? t17() : t15(), "T"), tup("ref_tensors"), tup("begins"),
                tup("ends"), tup("end_masks")};
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
      Context& c = ic.ctx;
      VarSpan refs = ic.vars("ref_tensors"), begins = ic.vars("begins"), ends = ic.vars("ends"),
              masks = ic.vars("end_masks");
      auto check = [&](VarSpan vs, DataType want, const char* n) {
        for (Var* v : vs) {
          const Type* t = v->type();
          if (t->dtype() != want || !t->is_scalar() || !v->has_value())
            ic.fail_input(n, "must be a tuple of const scalar " + std::string(dtype_name(want)) +
                                 ", got " + t->str());
        }
      };
      if (begins.size() != refs.size() || ends.size() != refs.size() || masks.size() != refs.size())
        ic.fail("ref_tensors, begins, ends and end_masks must have the same length, got " +
                std::to_string(refs.size()) + ", " + std::to_string(begins.size()) + ", " +
                std::to_string(ends.size()) + " and " + std::to_string(masks.size()));
      check(begins, DataType::Int32, "begins");
      check(ends, DataType::Int32, "ends");
      check(masks, DataType::Bool, "end_masks");
      std::vector<Dim> out;
      for (size_t k = 0; k < refs.size(); ++k) {
        const Type* rt = refs[k]->type();
        if (!rt->has_rank()) ic.fail_input("ref_tensors", "must have known ranks");
        int64_t rank = rt->rank();
        int64_t b = begins[k]->value()->as_int(0), e = ends[k]->value()->as_int(0);
        bool m = masks[k]->value()->as_int(0) != 0;
        // python slicing of the shape tuple
        auto norm = [rank](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + rank : i, 0, rank); };
        int64_t lo = norm(b), hi = m ? rank : norm(e);
        for (int64_t i = lo; i < hi; ++i) out.push_back(rt->shape()[i]);
      }
      if (!all_const(out))
        ic.fail("the output shape " + ops::shape_str(out) + " must not be symbolic");
      const Type* xt = ic.type("x");
      if (xt->has_rank() && all_const(xt->shape()) &&
          c.product(xt->shape()) != c.product(out))
        ic.fail("input shape " + ops::shape_str(xt->shape()) +
                " is not consistent with the output shape " + ops::shape_str(out));
      return {c.tensor(xt->dtype(), out)};
    };
    r.add(std::move(s));
  }
}

// ---------------------------------------------------------------------------------------------
// depth_to_space, space_to_depth, pixel_shuffle, pixel_unshuffle

const std::vector<Dim>& rank4(InferCtx& ic) {
  const std::vector<Dim>& xs = ops::ranked_shape(ic, "x");
  if (xs.size() != 4)
    ic.fail_input("x", "must be a rank-4 tensor (n, C, H, W), got shape " + ops::shape_str(xs));
  return xs;
}

/// Requires `d` divisible by `f` when both are known; returns d // f.
Dim exact_div(InferCtx& ic, Dim d, int64_t f, const char* what) {
  if (f <= 0) ic.fail(std::string(what) + " must be positive, got " + std::to_string(f));
  if (d->is_const() && d->value() % f != 0)
    ic.fail("dim " + d->str() + " is not divisible by " + what + " " + std::to_string(f));
  return ic.ctx.floordiv(d, ic.ctx.constant(f));
}

void add_depth_space(OpRegistry& r) {
  struct Spec {
    const char* name;
    const char* input;
    bool to_depth;  // true: spatial -> channels
    Target since;
    DataType fdt;
  };
  for (Spec sp : {Spec{"depth_to_space", "block_size", false, Target::iOS13, DataType::Int32},
                  Spec{"space_to_depth", "block_size", true, Target::iOS13, DataType::Int32},
                  Spec{"pixel_shuffle", "upscale_factor", false, Target::iOS13, DataType::Int32},
                  Spec{"pixel_unshuffle", "downscale_factor", true, Target::iOS16, DataType::UInt32}}) {
    OpSchema s;
    s.name = sp.name;
    s.since = sp.since;
    s.inputs = {in("x", dt::floats(), "T"), in_const(sp.input, DTypeSet{sp.fdt})};
    s.infer = [sp](InferCtx& ic) -> std::vector<const Type*> {
      Context& c = ic.ctx;
      const std::vector<Dim>& xs = rank4(ic);
      int64_t f = ic.int_(sp.input);
      if (f <= 0) ic.fail_input(sp.input, "must be positive, got " + std::to_string(f));
      Dim fd = c.constant(f);
      std::vector<Dim> out = {xs[0]};
      if (sp.to_depth) {
        out.push_back(c.mul(xs[1], c.constant(f * f)));
        out.push_back(exact_div(ic, xs[2], f, sp.input));
        out.push_back(exact_div(ic, xs[3], f, sp.input));
      } else {
        out.push_back(exact_div(ic, xs[1], f * f, "the square of"));
        out.push_back(c.mul(xs[2], fd));
        out.push_back(c.mul(xs[3], fd));
      }
      return {c.tensor(ic.type("x")->dtype(), out)};
    };
    r.add(std::move(s));
  }
}

// ---------------------------------------------------------------------------------------------
// space_to_batch / batch_to_space

void add_space_batch(OpRegistry& r) {
  for (bool to_batch : {true, false}) {
    OpSchema s;
    s.name = to_batch ? "space_to_batch" : "batch_to_space";
    const char* pad_name = to_batch ? "paddings" : "crops";
    s.inputs = {in("x", dt::floats(), "T"), in_const("block_shape", dt::int32()),
                in_const(pad_name, dt::int32())};
    s.infer = [to_batch, pad_name](InferCtx& ic) -> std::vector<const Type*> {
      Context& c = ic.ctx;
      const std::vector<Dim>& xs = ops::ranked_shape(ic, "x");
      if (xs.size() != 4)
        ic.fail_input("x", "must be rank 4, got an input with rank " + std::to_string(xs.size()));
      const Value* bv = ic.val("block_shape");
      const Value* pv = ic.val(pad_name);
      std::vector<int64_t> bsh = bv->shape(), psh = pv->shape();
      if (bsh.size() != 1 || psh != std::vector<int64_t>{bsh[0], 2})
        ic.fail("block_shape and " + std::string(pad_name) +
                " must have shape [2] and [2, 2], got " + ints_str(bsh) + " and " + ints_str(psh));
      if (bsh[0] != 2)
        ic.fail("only 2 spatial dimensions are supported, got " + std::to_string(bsh[0]));
      std::vector<int64_t> blk = ic.ints("block_shape"), pad = ic.ints(pad_name);
      for (int64_t b : blk)
        if (b <= 0) ic.fail_input("block_shape", "must be positive, got " + ints_str(blk));
      int64_t prod = blk[0] * blk[1];
      std::vector<Dim> out;
      if (to_batch) {
        out.push_back(c.mul(xs[0], c.constant(prod)));
        out.push_back(xs[1]);
        for (int i = 0; i < 2; ++i) {
          Dim padded = c.add(xs[2 + i], c.constant(pad[2 * i] + pad[2 * i + 1]));
          out.push_back(exact_div(ic, padded, blk[i], "block_shape"));
        }
      } else {
        if (xs[0]->is_const() && xs[0]->value() % prod != 0)
          ic.fail("batch size must be divisible by the product of block_shape, got batch size " +
                  xs[0]->str() + " and block_shape " + ints_str(blk));
        out.push_back(c.floordiv(xs[0], c.constant(prod)));
        out.push_back(xs[1]);
        for (int i = 0; i < 2; ++i)
          out.push_back(c.sub(c.mul(xs[2 + i], c.constant(blk[i])),
                              c.constant(pad[2 * i] + pad[2 * i + 1])));
      }
      return {c.tensor(ic.type("x")->dtype(), out)};
    };
    r.add(std::move(s));
  }
}

// ---------------------------------------------------------------------------------------------
// sliding_windows

void add_sliding_windows(OpRegistry& r) {
  for (bool ios17 : {false, true}) {
    OpSchema s;
    s.name = "sliding_windows";
    s.since = ios17 ? Target::iOS17 : Target::iOS13;
    s.inputs = {in("x", ios17 ? t17() : dt::numeric(), "T"), in_const("axis", dt::int32()),
                in_const("size", dt::int32()), in_opt_const("stride", dt::int32(), def_int(1))};
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
      Context& c = ic.ctx;
      std::vector<Dim> out = ops::ranked_shape(ic, "x");
      int64_t axis = ic.axis("axis", ic.int_("axis"), static_cast<int64_t>(out.size()));
      int64_t size = ic.int_("size"), stride = ic.int_("stride");
      if (size <= 0) ic.fail_input("size", "must be positive, got " + std::to_string(size));
      if (stride <= 0) ic.fail_input("stride", "must be positive, got " + std::to_string(stride));
      Dim n = out[axis];
      if (n->is_const() && n->value() < size)
        ic.fail("window size " + std::to_string(size) + " is larger than dim " +
                std::to_string(axis) + " of x (" + n->str() + ")");
      out[axis] = c.add(c.floordiv(c.sub(n, c.constant(size)), c.constant(stride)), c.constant(1));
      out.insert(out.begin() + axis + 1, c.constant(size));
      return {c.tensor(ic.type("x")->dtype(), out)};
    };
    r.add(std::move(s));
  }
}

// ---------------------------------------------------------------------------------------------
// slice_update (iOS18)

void add_slice_update(OpRegistry& r) {
  OpSchema s;
  s.name = "slice_update";
  s.since = Target::iOS18;
  s.inputs = {in("x", t17(), "T"),
              in("update", t17(), "T"),
              in("begin", u17(), "U"),
              in("end", u17(), "U"),
              in_opt_const("stride", u17(), nullptr, "U"),
              in_opt_const("begin_mask", dt::boolean()),
              in_opt_const("end_mask", dt::boolean()),
              in_opt_const("squeeze_mask", dt::boolean())};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
    const Type* xt = ic.type("x");
    const Type* ut = ic.type("update");
    if (!xt->has_rank()) return {xt};
    SliceSpec sp = slice_spec(ic, xt->rank());
    std::vector<Dim> want = slice_shape(ic, xt->shape(), sp);
    bool ok = ut->has_rank() && ut->shape().size() == want.size();
    for (size_t i = 0; ok && i < want.size(); ++i)
      if (ic.ctx.eq(want[i], ut->shape()[i]) == Tri::False) ok = false;
    if (!ok)
      ic.fail_input("update", "should have shape " + ops::shape_str(want) + ", got " + ut->str());
    if (ut->rank() == 0) ic.fail_input("update", "of rank 0 is not supported");
    return {xt};
  };
  s.value = [](InferCtx& ic, Outs& o) {
    const Value* xv = ic.val("x");
    const Value* uv = ic.val("update");
    if (!xv || !uv || !ic.known("begin") || !ic.known("end")) return false;
    SliceSpec sp = slice_spec(ic, xv->rank());
    const Type* sliced = ic.ctx.tensor(xv->dtype(), slice_shape(ic, ic.type("x")->shape(), sp));
    std::vector<int64_t> idx, shape, full;
    if (!slice_flat(ic, *xv, sp, sliced, idx, shape, full)) return false;
    if (uv->numel() != static_cast<int64_t>(idx.size())) return false;
    int64_t n = xv->numel();
    if (xv->is_symbolic() || uv->is_symbolic()) {
      std::vector<Dim> d = xv->to_dims(ic.ctx);
      std::vector<Dim> u = uv->to_dims(ic.ctx);
      for (size_t k = 0; k < idx.size(); ++k) d[idx[k]] = u[k];
      o.push_back(ops::share(Value::from_dims(xv->dtype(), xv->shape(), std::move(d))));
      return true;
    }
    // positions 0..n-1 from x, then n+k from update
    std::vector<int64_t> src(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) src[k] = k;
    for (size_t k = 0; k < idx.size(); ++k) src[idx[k]] = n + static_cast<int64_t>(k);
    size_t w = static_cast<size_t>(dtype_storage_bytes(xv->dtype()));
    std::vector<uint8_t> bytes(static_cast<size_t>(n) * w);
    for (int64_t k = 0; k < n; ++k) {
      const uint8_t* p = src[k] < n ? xv->raw() + src[k] * w : uv->raw() + (src[k] - n) * w;
      std::memcpy(bytes.data() + k * w, p, w);
    }
    o.push_back(ops::share(Value(xv->dtype(), xv->shape(), Buffer::take(std::move(bytes)))));
    return true;
  };
  r.add(std::move(s));
}

}  // namespace

void register_tensor_transformation_ops(OpRegistry& r) {
  add_reshape(r);
  add_transpose(r);
  add_squeeze_expand(r);
  add_slice_by_index(r);
  add_slice_by_size(r);
  add_reverse(r);
  add_reshape_like(r);
  add_depth_space(r);
  add_space_batch(r);
  add_sliding_windows(r);
  add_slice_update(r);
}

}  // namespace milkit
