// scatter_gather ops (coremltools iOS15/16/17 scatter_gather.py): gather, gather_along_axis,
// gather_nd, scatter, scatter_along_axis, scatter_nd.
#include <algorithm>
#include <cmath>

#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

using Outs = std::vector<std::shared_ptr<const Value>>;

/// The three versions of the gather ops: iOS13 (int32 indices), iOS16 (domain I, batch_dims),
/// iOS17 (more dtypes, validate_indices).
DTypeSet t15() { return dt::numeric(); }
DTypeSet t17() {
  return {DataType::Float16, DataType::Float32, DataType::Int32, DataType::Int16,
          DataType::UInt16,  DataType::Int8,    DataType::UInt8};
}
DTypeSet i16() { return {DataType::Int32, DataType::UInt16, DataType::Int16}; }
DTypeSet i17() {
  return {DataType::Int32, DataType::Int16, DataType::UInt16, DataType::Int8, DataType::UInt8};
}
DTypeSet indices_dtypes(int version) { return version == 0 ? dt::int32() : version == 1 ? i16() : i17(); }
Target since_of(int version) {
  return version == 0 ? Target::iOS13 : version == 1 ? Target::iOS16 : Target::iOS17;
}

std::string ints_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

/// Normalizes an axis like coremltools (IndexError there): -rank <= axis < rank.
int64_t checked_axis(InferCtx& ic, int64_t rank, const char* in = "axis") {
  int64_t a = ic.int_(in);
  if (a < -rank || a >= rank)
    ic.fail_input(in, "value " + std::to_string(a) + " is out of bounds for rank " +
                          std::to_string(rank));
  return a < 0 ? a + rank : a;
}

/// validate_indices: every known index must lie in [0, bound).
void validate_range(InferCtx& ic, const char* in, const std::vector<int64_t>& idx, Dim bound) {
  for (int64_t k : idx) {
    bool bad = k < 0 || ic.ctx.lt(ic.ctx.constant(k), bound) == Tri::False;
    if (bad)  // coremltools raises IndexError with this wording
      throw IndexError(ic.where() + ": input '" + in + "': Indices is out of bounds for `" + ic.schema.name +
                       "` node " + ic.op_name + ". Expected indices between [0, " + bound->str() +
                       "), but got " + ints_str(idx) + ".");
  }
}

/// Whether this op version declares the input and it is present.
bool present(const InferCtx& ic, const char* name) {
  return ic.schema.input_index(name) >= 0 && ic.has(name);
}

bool validating(InferCtx& ic) {
  return present(ic, "validate_indices") && ic.bool_("validate_indices");
}

/// Whether two shapes may be equal (same rank; no pair of dims provably different).
bool compatible(Context& c, const std::vector<Dim>& a, const std::vector<Dim>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (c.eq(a[i], b[i]) == Tri::False) return false;
  return true;
}

std::vector<Dim> concat3(const std::vector<Dim>& a, size_t a_end, const std::vector<Dim>& b,
                         size_t b_begin, const std::vector<Dim>& c, size_t c_begin) {
  std::vector<Dim> r(a.begin(), a.begin() + a_end);
  r.insert(r.end(), b.begin() + b_begin, b.end());
  r.insert(r.end(), c.begin() + c_begin, c.end());
  return r;
}

// ---------------------------------------------------------------------------------------------
// gather

std::vector<const Type*> gather_infer(InferCtx& ic) {
  const std::vector<Dim>& xs = ops::ranked_shape(ic, "x");
  const std::vector<Dim>& is = ops::ranked_shape(ic, "indices");
  int64_t rank = static_cast<int64_t>(xs.size()), irank = static_cast<int64_t>(is.size());
  int64_t axis = checked_axis(ic, rank);
  int64_t bd = present(ic, "batch_dims") ? ic.int_("batch_dims") : 0;
  if (bd < 0) ic.fail_input("batch_dims", "must be non-negative, got " + std::to_string(bd));
  if (bd >= rank)
    ic.fail_input("batch_dims", std::to_string(bd) + " must be less than x.rank " + std::to_string(rank));
  if (bd > irank)
    ic.fail_input("batch_dims", std::to_string(bd) + " must be less than or equal to indices.rank " +
                                    std::to_string(irank));
  if (validating(ic) && ic.known("indices"))
    validate_range(ic, "indices", ic.ints("indices"), xs[axis]);
  return {ic.ctx.tensor(ic.type("x")->dtype(),
                        concat3(xs, axis, is, static_cast<size_t>(bd), xs, axis + 1))};
}

/// gather of a known or symbolic x by known indices (numpy take, negative indices wrap).
bool gather_value(InferCtx& ic, Outs& o) {
  const Value* xv = ic.val("x");
  if (!xv || !ic.known("indices")) return false;
  const Value* iv = ic.val("indices");
  std::vector<int64_t> ind = iv->to_ints();
  const auto& xs = xv->shape();
  const auto& is = iv->shape();
  int64_t rank = xv->rank();
  int64_t axis = checked_axis(ic, rank);
  int64_t bd = present(ic, "batch_dims") ? ic.int_("batch_dims") : 0;
  if (bd > axis) return false;
  for (int64_t d = 0; d < bd; ++d)
    if (xs[d] != is[d]) ic.fail("batch dims of x and indices differ");
  std::vector<int64_t> shape(xs.begin(), xs.begin() + axis);
  shape.insert(shape.end(), is.begin() + bd, is.end());
  shape.insert(shape.end(), xs.begin() + axis + 1, xs.end());
  std::vector<int64_t> xst = ops::strides_of(xs), ist = ops::strides_of(is);
  int64_t nidx = static_cast<int64_t>(is.size()) - bd, n = xs[axis];
  auto idx = ops::index_map(shape, [&](const std::vector<int64_t>& c) {
    int64_t fi = 0;
    for (int64_t d = 0; d < bd; ++d) fi += c[d] * ist[d];
    for (int64_t d = 0; d < nidx; ++d) fi += c[axis + d] * ist[bd + d];
    int64_t k = ind[fi];
    if (k < -n || k >= n)
      ic.fail_input("indices", "value " + std::to_string(k) + " is out of bounds for axis " +
                                   std::to_string(axis) + " with size " + std::to_string(n));
    if (k < 0) k += n;
    int64_t f = k * xst[axis];
    for (int64_t d = 0; d < axis; ++d) f += c[d] * xst[d];
    for (int64_t d = axis + 1; d < rank; ++d) f += c[d - 1 + nidx] * xst[d];
    return f;
  });
  o.push_back(ops::share(ops::take_elements(*xv, idx, shape)));
  return true;
}

// ---------------------------------------------------------------------------------------------
// gather_along_axis

std::vector<const Type*> gather_along_axis_infer(InferCtx& ic) {
  const std::vector<Dim>& xs = ops::ranked_shape(ic, "x");
  const std::vector<Dim>& is = ops::ranked_shape(ic, "indices");
  if (xs.size() != is.size())
    ic.fail("rank mismatch between input and indices: input rank " + std::to_string(xs.size()) +
            ", indices rank " + std::to_string(is.size()));
  int64_t rank = static_cast<int64_t>(xs.size());
  int64_t axis = checked_axis(ic, rank);
  for (int64_t i = 0; i < rank; ++i)
    if (i != axis && xs[i]->is_const() && is[i]->is_const() && xs[i] != is[i])
      ic.fail("the input data and indices should have the same size at axis " +
              std::to_string(i) + ", but got " + xs[i]->str() + " vs " + is[i]->str());
  if (validating(ic) && ic.known("indices"))
    validate_range(ic, "indices", ic.ints("indices"), xs[axis]);
  return {ic.ctx.tensor(ic.type("x")->dtype(), is)};
}

bool gather_along_axis_value(InferCtx& ic, Outs& o) {
  const Value* xv = ic.val("x");
  if (!xv || !ic.known("indices")) return false;
  const Value* iv = ic.val("indices");
  std::vector<int64_t> ind = iv->to_ints();
  const auto& xs = xv->shape();
  int64_t axis = checked_axis(ic, xv->rank());
  int64_t n = xs[axis];
  std::vector<int64_t> xst = ops::strides_of(xs), ist = ops::strides_of(iv->shape());
  auto idx = ops::index_map(iv->shape(), [&](const std::vector<int64_t>& c) {
    int64_t fi = 0;
    for (size_t d = 0; d < c.size(); ++d) fi += c[d] * ist[d];
    int64_t k = ind[fi];
    if (k < -n || k >= n)
      ic.fail_input("indices", "value " + std::to_string(k) + " is out of bounds for axis " +
                                   std::to_string(axis) + " with size " + std::to_string(n));
    if (k < 0) k += n;
    int64_t f = 0;
    for (size_t d = 0; d < c.size(); ++d) f += (static_cast<int64_t>(d) == axis ? k : c[d]) * xst[d];
    return f;
  });
  o.push_back(ops::share(ops::take_elements(*xv, idx, iv->shape())));
  return true;
}

// ---------------------------------------------------------------------------------------------
// gather_nd

std::vector<const Type*> gather_nd_infer(InferCtx& ic) {
  const std::vector<Dim>& xs = ops::ranked_shape(ic, "x");
  const std::vector<Dim>& is = ops::ranked_shape(ic, "indices");
  if (is.empty()) ic.fail_input("indices", "must have rank >= 1");
  Dim depth = is.back();
  if (!depth->is_const())
    ic.fail_input("indices", "must have a known last dim, got shape " + ops::shape_str(is));
  int64_t bd = present(ic, "batch_dims") ? ic.int_("batch_dims") : 0;
  if (bd < 0) ic.fail_input("batch_dims", "must be non-negative, got " + std::to_string(bd));
  int64_t rank = static_cast<int64_t>(xs.size());
  if (depth->value() > rank - bd)
    ic.fail("indices.shape[-1] (" + depth->str() + ") + batch_dims (" + std::to_string(bd) +
            ") must be smaller or equal to the input rank " + std::to_string(rank));
  if (validating(ic) && ic.known("indices")) {
    std::vector<int64_t> ind = ic.ints("indices");
    int64_t dd = depth->value();
    for (size_t k = 0; k < ind.size(); ++k)
      validate_range(ic, "indices", {ind[k]}, xs[bd + static_cast<int64_t>(k) % dd]);
  }
  std::vector<Dim> out(is.begin(), is.end() - 1);
  out.insert(out.end(), xs.begin() + bd + depth->value(), xs.end());
  return {ic.ctx.tensor(ic.type("x")->dtype(), out)};
}

// ---------------------------------------------------------------------------------------------
// scatter family

std::vector<const Type*> scatter_infer(InferCtx& ic) {
  const std::vector<Dim>& ds = ops::ranked_shape(ic, "data");
  const std::vector<Dim>& is = ops::ranked_shape(ic, "indices");
  const std::vector<Dim>& us = ops::ranked_shape(ic, "updates");
  int64_t axis = checked_axis(ic, static_cast<int64_t>(ds.size()));
  std::vector<Dim> want = concat3(ds, axis, is, 0, ds, axis + 1);
  if (!compatible(ic.ctx, us, want))
    ic.fail_input("updates", "shape " + ops::shape_str(us) + " is incorrect. It should be " +
                                 ops::shape_str(want));
  if (validating(ic) && ic.known("indices"))
    validate_range(ic, "indices", ic.ints("indices"), ds[axis]);
  return {ic.type("data")};
}

std::vector<const Type*> scatter_along_axis_infer(InferCtx& ic) {
  const std::vector<Dim>& ds = ops::ranked_shape(ic, "data");
  const std::vector<Dim>& is = ops::ranked_shape(ic, "indices");
  const std::vector<Dim>& us = ops::ranked_shape(ic, "updates");
  int64_t rank = static_cast<int64_t>(ds.size());
  int64_t axis = checked_axis(ic, rank);
  if (!compatible(ic.ctx, is, us))
    ic.fail("indices shape " + ops::shape_str(is) + " and updates shape " + ops::shape_str(us) +
            " must match");
  if (static_cast<int64_t>(is.size()) != rank)
    ic.fail("data rank " + std::to_string(rank) + " and indices rank " +
            std::to_string(is.size()) + " must match");
  for (int64_t i = 0; i < rank; ++i)
    if (i != axis && ds[i] != is[i])  // as coremltools: equal dims required off the axis
      ic.fail("data and indices must have the same size at axis " + std::to_string(i) +
              ", got " + ds[i]->str() + " vs " + is[i]->str());
  if (validating(ic) && ic.known("indices"))
    validate_range(ic, "indices", ic.ints("indices"), ds[axis]);
  return {ic.type("data")};
}

/// Combines an existing element with an update by scatter mode.
double combine(const std::string& mode, double a, double b, bool is_int) {
  if (mode == "update") return b;
  if (mode == "add") return a + b;
  if (mode == "sub") return a - b;
  if (mode == "mul") return a * b;
  if (mode == "div") return is_int ? std::trunc(a / b) : a / b;
  if (mode == "max") return std::max(a, b);
  if (mode == "min") return std::min(a, b);
  return NAN;
}

bool scatter_along_axis_value(InferCtx& ic, Outs& o) {
  if (!ic.known("data") || !ic.known("indices") || !ic.known("updates")) return false;
  const Value* dv = ic.val("data");
  const Value* iv = ic.val("indices");
  const Value* uv = ic.val("updates");
  std::string mode = ic.str("mode");
  if (std::isnan(combine(mode, 0, 0, false)))
    ic.fail_input("mode", "must be one of update, add, sub, mul, div, max, min; got \"" + mode + "\"");
  const auto& ds = dv->shape();
  int64_t axis = checked_axis(ic, dv->rank()), n = ds[axis];
  bool is_int = !is_float(dv->dtype());
  std::vector<double> out = dv->to_doubles();
  std::vector<int64_t> ind = iv->to_ints();
  std::vector<double> upd = uv->to_doubles();
  std::vector<int64_t> dst = ops::strides_of(ds);
  int64_t k = 0;
  ops::index_map(iv->shape(), [&](const std::vector<int64_t>& c) {
    int64_t j = ind[k];
    if (j < -n || j >= n)
      ic.fail_input("indices", "value " + std::to_string(j) + " is out of bounds for axis " +
                                   std::to_string(axis) + " with size " + std::to_string(n));
    if (j < 0) j += n;
    int64_t f = 0;
    for (size_t d = 0; d < c.size(); ++d) f += (static_cast<int64_t>(d) == axis ? j : c[d]) * dst[d];
    out[f] = combine(mode, out[f], upd[k], is_int);
    ++k;
    return f;
  });
  o.push_back(ops::share(Value::from_doubles(dv->dtype(), ds, out)));
  return true;
}

std::vector<const Type*> scatter_nd_infer(InferCtx& ic) {
  const std::vector<Dim>& ds = ops::ranked_shape(ic, "data");
  const std::vector<Dim>& is = ops::ranked_shape(ic, "indices");
  const std::vector<Dim>& us = ops::ranked_shape(ic, "updates");
  if (is.empty()) ic.fail_input("indices", "must have rank >= 1");
  Dim depth = is.back();
  if (!depth->is_const() || depth->value() > static_cast<int64_t>(ds.size()))
    ic.fail("indices.shape[-1] (" + depth->str() + ") must be a known value <= the data rank " +
            std::to_string(ds.size()));
  std::vector<Dim> want(is.begin(), is.end() - 1);
  want.insert(want.end(), ds.begin() + depth->value(), ds.end());
  if (!compatible(ic.ctx, us, want))
    ic.fail_input("updates", "shape " + ops::shape_str(us) + " is incorrect. It should be " +
                                 ops::shape_str(want));
  if (validating(ic) && ic.known("indices")) {
    std::vector<int64_t> ind = ic.ints("indices");
    int64_t dd = depth->value();
    for (size_t k = 0; dd > 0 && k < ind.size(); ++k)
      validate_range(ic, "indices", {ind[k]}, ds[static_cast<int64_t>(k) % dd]);
  }
  return {ic.type("data")};
}

}  // namespace

void register_scatter_gather_ops(OpRegistry& r) {
  // gather: iOS13, iOS16 (+batch_dims, int16/uint16 indices), iOS17 (+validate_indices)
  for (int v = 0; v < 3; ++v) {
    OpSchema s;
    s.name = "gather";
    s.since = since_of(v);
    s.inputs = {in("x", v == 2 ? t17() : t15(), "T"),
                v == 0 ? in("indices", dt::int32()) : in("indices", indices_dtypes(v), "I"),
                in_opt_const("axis", dt::int32(), def_int(0))};
    if (v >= 1) s.inputs.push_back(in_opt_const("batch_dims", dt::int32(), def_int(0)));
    if (v >= 2) s.inputs.push_back(in_opt_const("validate_indices", dt::boolean(), def_bool(false)));
    s.infer = gather_infer;
    s.value = gather_value;
    r.add(std::move(s));
  }
  for (int v = 0; v < 3; ++v) {
    OpSchema s;
    s.name = "gather_along_axis";
    s.since = since_of(v);
    s.inputs = {in("x", v == 2 ? t17() : t15(), "T"),
                v == 0 ? in("indices", dt::int32()) : in("indices", indices_dtypes(v), "I"),
                in_opt_const("axis", dt::int32(), def_int(0))};
    if (v >= 2) s.inputs.push_back(in_opt_const("validate_indices", dt::boolean(), def_bool(false)));
    s.infer = gather_along_axis_infer;
    s.value = gather_along_axis_value;
    r.add(std::move(s));
  }
  for (int v = 0; v < 3; ++v) {
    OpSchema s;
    s.name = "gather_nd";
    s.since = since_of(v);
    s.inputs = {in("x", v == 2 ? t17() : t15(), "T"),
                v == 0 ? in("indices", dt::int32()) : in("indices", indices_dtypes(v), "I")};
    if (v >= 1) s.inputs.push_back(in_opt_const("batch_dims", dt::int32(), def_int(0)));
    if (v >= 2) s.inputs.push_back(in_opt_const("validate_indices", dt::boolean(), def_bool(false)));
    s.infer = gather_nd_infer;
    r.add(std::move(s));
  }
  // scatter ops: iOS13, iOS17 (+validate_indices)
  struct Sc {
    const char* name;
    bool axis;
    InferFn infer;
    ValueFn value;
  };
  for (const Sc& sc : {Sc{"scatter", true, scatter_infer, nullptr},
                       Sc{"scatter_along_axis", true, scatter_along_axis_infer, scatter_along_axis_value},
                       Sc{"scatter_nd", false, scatter_nd_infer, nullptr}}) {
    for (bool ios17 : {false, true}) {
      OpSchema s;
      s.name = sc.name;
      s.since = ios17 ? Target::iOS17 : Target::iOS13;
      s.inputs = {in("data", t15(), "T"), in("indices", dt::int32()), in("updates", t15(), "T")};
      if (sc.axis) s.inputs.push_back(in_opt_const("axis", dt::int32(), def_int(0)));
      s.inputs.push_back(in_opt_const("mode", dt::string(), def_str("add")));
      if (ios17) s.inputs.push_back(in_opt_const("validate_indices", dt::boolean(), def_bool(false)));
      s.infer = sc.infer;
      s.value = sc.value;
      r.add(std::move(s));
    }
  }
}

}  // namespace milkit
