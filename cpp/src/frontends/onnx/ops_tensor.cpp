// ONNX tensor operators: shape manipulation, slicing, gather/scatter, constants, padding, tiling.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <numeric>

#include "milkit/compose/einsum.h"
#include "milkit/compose/scan.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

// A rank-1 int32 var from pieces: known ints or (dynamic) rank-1 int32 vars.
Var* concat_ints(C& cv, const std::vector<Var*>& pieces) {
  if (pieces.size() == 1) return pieces[0];
  Arg values{"values", {}, true};
  for (Var* p : pieces) values.items.push_back(ArgItem{p, nullptr});
  return cv.op("concat", {values, C::arg_i32("axis", 0)});
}

// Axes given as an attribute (before `input_since`) or as input `idx`.
std::optional<std::vector<int64_t>> axes_of(C& cv, const NodeProto& n, int64_t input_since, int idx) {
  if (cv.opset < input_since) {
    if (!C::find_attr(n, "axes")) return std::nullopt;
    return C::attr_ints(n, "axes");
  }
  if (!C::has(n, idx)) return std::nullopt;
  return cv.ints(n, idx, "axes");
}

void reshape(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  std::vector<int64_t> shape;
  if (cv.opset < 5) {
    shape = C::attr_ints(n, "shape");
  } else {
    const Value* sv = cv.value(n, 1);
    // MIL's reshape reads a 0 as "copy the dim": an allowzero 0 (an empty output) needs the shape
    if (!sv && C::attr_int(n, "allowzero", 0) != 0) cv.ints(n, 1, "shape (with allowzero)");  // throws: not known
    if (!sv) {
      // a computed shape (often symbolic): MIL's reshape takes it, with ONNX's 0 ("copy the
      // input's dim") made explicit unless allowzero
      Var* s = cv.cast(cv.in(n, 1), DataType::Int32);
      auto ss = C::static_shape(s);
      bool maybe_zero = !(s->value() && !s->value()->is_symbolic());
      if (maybe_zero && C::attr_int(n, "allowzero", 0) == 0 && ss && ss->size() == 1 && x->type()->has_rank() &&
          !s->value()) {
        int64_t len = (*ss)[0], xr = x->type()->rank();
        Var* xs = cv.op("shape", {C::arg("x", x)});
        if (len < xr) {
          xs = cv.op("slice_by_index", {C::arg("x", xs), C::arg_ints32("begin", {0}), C::arg_ints32("end", {len})});
        } else if (len > xr) {  // a 0 past the input's rank stays 0
          Arg v{"values", {ArgItem{xs, nullptr}, ArgItem{cv.ci(std::vector<int64_t>(static_cast<size_t>(len - xr), 0)), nullptr}}, true};
          xs = cv.op("concat", {v, C::arg_i32("axis", 0)});
        }
        Var* zero = cv.op("equal", {C::arg("x", s), C::arg("y", Value::scalar_int(DataType::Int32, 0))});
        s = cv.op("select", {C::arg("cond", zero), C::arg("a", xs), C::arg("b", s)});
      }
      cv.out(n, 0, cv.op("reshape", {C::arg("x", x), C::arg("shape", s)}));
      return;
    }
    shape = sv->to_ints();
  }
  bool allowzero = C::attr_int(n, "allowzero", 0) != 0;
  const auto& xs = C::shape(x);
  std::vector<Var*> pieces;
  bool dynamic = false;
  std::vector<int64_t> run;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t d = shape[i];
    if (d == 0 && !allowzero) {
      if (!x->type()->has_rank() || i >= xs.size()) cv.fail(n, "shape has a 0 at " + std::to_string(i) + " beyond the input's rank");
      if (xs[i]->is_const()) {
        run.push_back(xs[i]->value());
      } else {
        if (!run.empty()) pieces.push_back(cv.ci(run)), run.clear();
        Var* s = cv.op("shape", {C::arg("x", x)});
        pieces.push_back(cv.op("slice_by_index", {C::arg("x", s), C::arg_ints32("begin", {static_cast<int64_t>(i)}),
                                                   C::arg_ints32("end", {static_cast<int64_t>(i + 1)})}));
        dynamic = true;
      }
    } else {
      if (d < -1 || d > INT32_MAX) cv.fail(n, "shape value " + std::to_string(d) + " is not a valid dimension");
      run.push_back(d);
    }
  }
  if (!dynamic) {
    auto xss = C::static_shape(x);
    bool empty = xss && std::find(xss->begin(), xss->end(), 0) != xss->end();
    if (empty && std::find(run.begin(), run.end(), -1) == run.end() && std::find(run.begin(), run.end(), 0) != run.end()) {
      // no elements either way (MIL's reshape cannot produce a 0 dim): an empty const
      cv.out(n, 0, cv.c(Value::from_doubles(C::dtype(x), run, {})));
      return;
    }
    cv.out(n, 0, cv.op("reshape", {C::arg("x", x), C::arg_ints32("shape", run)}));
    return;
  }
  if (!run.empty()) pieces.push_back(cv.ci(run));
  cv.out(n, 0, cv.op("reshape", {C::arg("x", x), C::arg("shape", concat_ints(cv, pieces))}));
}

void flatten(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  int64_t ax = C::attr_int(n, "axis", 1);
  if (ax < 0) ax += r;
  if (ax < 0 || ax > r) cv.fail(n, "axis " + std::to_string(C::attr_int(n, "axis", 1)) + " is out of range for rank " + std::to_string(r));
  if (auto s = C::static_shape(x)) {
    int64_t lead = 1, rest = 1;
    for (int i = 0; i < r; ++i) (i < ax ? lead : rest) *= (*s)[static_cast<size_t>(i)];
    return cv.out(n, 0, cv.op("reshape", {C::arg("x", x), C::arg_ints32("shape", {lead, rest})}));
  }
  if (ax == 0) return cv.out(n, 0, cv.op("reshape", {C::arg("x", x), C::arg_ints32("shape", {1, -1})}));
  Var* s = cv.op("shape", {C::arg("x", x)});
  Var* lead = cv.op("reduce_prod", {C::arg("x", cv.op("slice_by_index", {C::arg("x", s), C::arg_ints32("begin", {0}),
                                                                        C::arg_ints32("end", {ax})})),
                                    C::arg_ints32("axes", {0}), C::arg_bool("keep_dims", true)});
  cv.out(n, 0, cv.op("reshape", {C::arg("x", x), C::arg("shape", concat_ints(cv, {lead, cv.ci({-1})}))}));
}

void slice(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  std::vector<int64_t> starts, ends, axes, steps;
  bool dyn = false;
  if (cv.opset < 10) {
    starts = C::attr_ints(n, "starts");
    ends = C::attr_ints(n, "ends");
    axes = C::attr_ints(n, "axes");
  } else {
    dyn = !cv.value(n, 1) || !cv.value(n, 2);
    if (!dyn) {
      starts = cv.ints(n, 1, "starts");
      ends = cv.ints(n, 2, "ends");
    }
    if (C::has(n, 3)) axes = cv.ints(n, 3, "axes");
    if (C::has(n, 4)) steps = cv.ints(n, 4, "steps");
  }
  size_t k = dyn ? static_cast<size_t>(C::static_shape(cv.in(n, 1)).value_or(std::vector<int64_t>{-1})[0]) : starts.size();
  if (dyn && (k > static_cast<size_t>(r))) cv.fail(n, "the number of starts must be known");
  if (axes.empty())
    for (size_t i = 0; i < k; ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(k, 1);
  if (axes.size() != k || steps.size() != k || (!dyn && ends.size() != k))
    cv.fail(n, "starts, ends, axes and steps must have the same length");
  std::vector<int64_t> begin(r, 0), end(r, 0), stride(r, 1);
  std::vector<bool> bmask(r, true), emask(r, true);
  const auto& xs = C::shape(x);
  std::vector<int> slot(r, -1);
  for (size_t i = 0; i < k; ++i) {
    int64_t a = cv.axis(n, axes[i], r);
    if (slot[a] >= 0) cv.fail(n, "axis " + std::to_string(axes[i]) + " is sliced twice");
    slot[a] = static_cast<int>(i);
    int64_t st = steps[i];
    if (st == 0) cv.fail(n, "a step of 0");
    stride[a] = st;
    if (dyn) {
      bmask[a] = emask[a] = false;
      continue;
    }
    int64_t s = starts[i], e = ends[i];
    bool known = xs[a]->is_const();
    int64_t dim = known ? xs[a]->value() : -1;
    if (known) {
      // ONNX clamps: [0, dim] for positive steps, [-1, dim - 1] for negative ones
      if (s < 0) s += dim;
      if (e < 0 && e > INT64_MIN) e += dim;
      if (st > 0) {
        s = std::clamp<int64_t>(s, 0, dim);
        e = std::clamp<int64_t>(e, 0, dim);
        begin[a] = s, bmask[a] = false;
        if (e >= dim) emask[a] = true;
        else end[a] = e, emask[a] = false;
      } else {
        s = std::clamp<int64_t>(s, -1, dim - 1);
        e = std::clamp<int64_t>(e, -1, dim - 1);
        begin[a] = s, bmask[a] = s < 0;
        if (s < 0) begin[a] = 0, bmask[a] = false, end[a] = 0, emask[a] = false;  // empty
        else if (e < 0) emask[a] = true;
        else end[a] = e, emask[a] = false;
      }
    } else {
      // an unknown dim: MIL's slice takes negative indices as numpy does; huge ends mean "to the end"
      if (st > 0) {
        bmask[a] = false;
        begin[a] = std::clamp<int64_t>(s, INT32_MIN, INT32_MAX);
        if (e >= INT32_MAX) emask[a] = true;
        else end[a] = std::max<int64_t>(e, INT32_MIN), emask[a] = false;
      } else {
        if (s >= INT32_MAX) bmask[a] = true;
        else begin[a] = std::max<int64_t>(s, INT32_MIN), bmask[a] = false;
        if (e <= INT32_MIN) emask[a] = true;
        else end[a] = e, emask[a] = false;
      }
    }
  }
  auto bools = [](const std::vector<bool>& v) {
    std::vector<int64_t> i(v.begin(), v.end());
    return Value::from_ints(DataType::Bool, {static_cast<int64_t>(i.size())}, i);
  };
  Var* bvar;
  Var* evar;
  if (dyn) {
    Var* sv = cv.cast(cv.in(n, 1), DataType::Int32);
    Var* ev = cv.cast(cv.in(n, 2), DataType::Int32);
    std::vector<Var*> bp, ep;
    for (int a = 0; a < r; ++a) {
      if (slot[a] < 0) {
        bp.push_back(cv.ci({0}));
        ep.push_back(cv.ci({0}));
        continue;
      }
      auto pick = [&](Var* v) {
        return cv.op("slice_by_index", {C::arg("x", v), C::arg_ints32("begin", {slot[a]}), C::arg_ints32("end", {slot[a] + 1})});
      };
      bp.push_back(pick(sv));
      ep.push_back(pick(ev));
    }
    bvar = concat_ints(cv, bp);
    evar = concat_ints(cv, ep);
  } else {
    bvar = cv.ci(begin);
    evar = cv.ci(end);
  }
  cv.out(n, 0, cv.op("slice_by_index", {C::arg("x", x), C::arg("begin", bvar), C::arg("end", evar), C::arg_ints32("stride", stride),
                                        C::arg("begin_mask", bools(bmask)), C::arg("end_mask", bools(emask))}));
}

void split(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", 0), r);
  std::vector<int64_t> sizes;
  if (cv.opset < 13) sizes = C::attr_ints(n, "split");
  else if (C::has(n, 1)) sizes = cv.ints(n, 1, "split");
  int outs = n.output_size();
  std::vector<Var*> res;
  if (!sizes.empty()) {
    if (static_cast<int>(sizes.size()) != outs) cv.fail(n, "split has " + std::to_string(sizes.size()) + " sizes for " + std::to_string(outs) + " outputs");
    res = cv.ops("split", {C::arg("x", x), C::arg_ints32("split_sizes", sizes), C::arg_i32("axis", ax)});
  } else {
    Dim d = C::shape(x)[ax];
    if (d->is_const() && d->value() % outs != 0) {
      // opset 18: the last chunk is smaller (ceil(dim / n) each)
      int64_t each = (d->value() + outs - 1) / outs;
      for (int i = 0; i < outs; ++i) sizes.push_back(std::min(each, d->value() - each * i));
      res = cv.ops("split", {C::arg("x", x), C::arg_ints32("split_sizes", sizes), C::arg_i32("axis", ax)});
    } else {
      res = cv.ops("split", {C::arg("x", x), C::arg_i32("num_splits", outs), C::arg_i32("axis", ax)});
    }
  }
  for (int i = 0; i < outs; ++i) cv.out(n, i, res[static_cast<size_t>(i)]);
}

// Runs `f` on a bool tensor as int32 (MIL's gathers take numbers only) and casts back.
template <class F>
Var* bool_via_int(C& cv, Var* x, F f) {
  if (C::dtype(x) != DataType::Bool) return f(x);
  return cv.cast(f(cv.cast(x, DataType::Int32)), DataType::Bool);
}

// Normalizes known negative gather indices against the dim (MIL wants them in range).
Var* gather_indices(C& cv, const NodeProto& n, int idx, Var* x, int64_t axis) {
  const Value* iv = cv.value(n, idx);
  Dim d = C::shape(x)[axis];
  if (iv && d->is_const()) {
    auto ints = iv->to_ints();
    bool neg = false;
    for (auto& v : ints) {
      if (v < -d->value() || v >= d->value())
        cv.fail(n, "index " + std::to_string(v) + " is out of range for a dimension of " + std::to_string(d->value()));
      if (v < 0) v += d->value(), neg = true;
    }
    if (neg) return cv.c(Value::from_ints(DataType::Int32, iv->shape(), ints));
  }
  return cv.cast(cv.in(n, idx), DataType::Int32);
}

Value filled(DataType dt, const std::vector<int64_t>& shape, const Value& scalar) {
  int64_t num = 1;
  for (auto d : shape) num *= d;
  if (is_float(dt)) return Value::from_doubles(dt, shape, std::vector<double>(static_cast<size_t>(num), scalar.as_double(0)));
  return Value::from_ints(dt, shape, std::vector<int64_t>(static_cast<size_t>(num), scalar.as_int(0)));
}

void einsum(C& cv, const NodeProto& n) {
  std::vector<Var*> ins;
  for (int i = 0; i < n.input_size(); ++i) ins.push_back(cv.in(n, i));
  Var* y = compose::einsum(cv.em, C::attr_string(n, "equation", ""), ins);
  if (std::find(ins.begin(), ins.end(), y) != ins.end()) y = cv.em.un("identity", y);
  cv.out(n, 0, y);
}

}  // namespace

namespace {

void transpose(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  std::vector<int64_t> perm(static_cast<size_t>(r));
  std::iota(perm.rbegin(), perm.rend(), 0);
  perm = C::attr_ints(n, "perm", perm);
  cv.out(n, 0, cv.op("transpose", {C::arg("x", x), C::arg_ints32("perm", perm)}));
}

void squeeze(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  auto axes = axes_of(cv, n, 13, 1);
  if (!axes) {
    auto s = C::static_shape(x);
    if (!s) cv.fail(n, "squeezing every dim of size 1 needs the shape to be known at conversion time");
    axes.emplace();
    for (int i = 0; i < r; ++i)
      if ((*s)[static_cast<size_t>(i)] == 1) axes->push_back(i);
  }
  if (axes->empty()) return cv.out(n, 0, x);
  for (auto& a : *axes) a = cv.axis(n, a, r);
  cv.out(n, 0, cv.op("squeeze", {C::arg("x", x), C::arg_ints32("axes", *axes)}));
}

void unsqueeze(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  auto axes = axes_of(cv, n, 13, 1);
  if (!axes || axes->empty()) cv.fail(n, "axes are required");
  int64_t out_rank = cv.rank(n, x) + static_cast<int64_t>(axes->size());
  for (auto& a : *axes) a = cv.axis(n, a, out_rank);
  std::sort(axes->begin(), axes->end());
  cv.out(n, 0, cv.op("expand_dims", {C::arg("x", x), C::arg_ints32("axes", *axes)}));
}

void concat(C& cv, const NodeProto& n) {
  Arg values{"values", {}, true};
  int r = -1;
  for (int i = 0; i < n.input_size(); ++i) {
    Var* v = cv.in(n, i);
    r = cv.rank(n, v);
    values.items.push_back(ArgItem{v, nullptr});
  }
  if (values.items.empty()) cv.fail(n, "needs at least one input");
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", 0), r);
  if (values.items.size() == 1) return cv.out(n, 0, values.items[0].var);
  cv.out(n, 0, cv.op("concat", {values, C::arg_i32("axis", ax)}));
}

void gather(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", 0), cv.rank(n, x));
  Var* idx = gather_indices(cv, n, 1, x, ax);
  cv.out(n, 0, bool_via_int(cv, x, [&](Var* xi) { return cv.op("gather", {C::arg("x", xi), C::arg("indices", idx), C::arg_i32("axis", ax)}); }));
}

void gather_elements(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", 0), cv.rank(n, x));
  Var* idx = gather_indices(cv, n, 1, x, ax);
  cv.out(n, 0, bool_via_int(cv, x, [&](Var* xi) { return cv.op("gather_along_axis", {C::arg("x", xi), C::arg("indices", idx), C::arg_i32("axis", ax)}); }));
}

void gather_nd(C& cv, const NodeProto& n) {
  Var* idx = cv.cast(cv.in(n, 1), DataType::Int32);
  int64_t bd = C::attr_int(n, "batch_dims", 0);
  cv.out(n, 0, bool_via_int(cv, cv.in(n, 0), [&](Var* xi) {
    std::vector<Arg> args = {C::arg("x", xi), C::arg("indices", idx)};
    if (bd != 0) args.push_back(C::arg_i32("batch_dims", bd));
    return cv.op("gather_nd", std::move(args));
  }));
}

void expand(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  Var* shape = cv.cast(cv.in(n, 1), DataType::Int32);
  DataType dt = C::dtype(x);
  if (dt == DataType::Bool) {
    Var* ones = cv.op("fill", {C::arg("shape", shape), C::arg("value", Value::scalar_int(DataType::Int32, 1))});
    Var* y = binary(cv, "mul", cv.cast(x, DataType::Int32), ones);
    return cv.out(n, 0, cv.cast(y, DataType::Bool));
  }
  Var* ones = cv.op("fill", {C::arg("shape", shape), C::arg("value", is_float(dt) ? Value::scalar_float(dt, 1) : Value::scalar_int(dt, 1))});
  cv.out(n, 0, binary(cv, "mul", x, ones));
}

void tile(C& cv, const NodeProto& n) {
  cv.out(n, 0, cv.op("tile", {C::arg("x", cv.in(n, 0)), C::arg("reps", cv.cast(cv.in(n, 1), DataType::Int32))}));
}

void pad(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  std::string mode = C::attr_string(n, "mode", "constant");
  std::vector<int64_t> pads;
  double value = 0;
  std::vector<int64_t> axes;
  if (cv.opset < 11) {
    pads = C::attr_ints(n, "pads");
    value = C::attr_float(n, "value", 0);
  } else {
    pads = cv.ints(n, 1, "pads");
    if (C::has(n, 2)) {
      auto cvv = cv.doubles(n, 2, "constant_value");
      if (!cvv.empty()) value = cvv[0];
    }
    if (C::has(n, 3)) axes = cv.ints(n, 3, "axes");
  }
  if (axes.empty())
    for (int i = 0; i < r; ++i) axes.push_back(i);
  if (pads.size() != 2 * axes.size()) cv.fail(n, "pads has " + std::to_string(pads.size()) + " values for " + std::to_string(axes.size()) + " axes");
  std::vector<int64_t> mil(2 * static_cast<size_t>(r), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = cv.axis(n, axes[i], r);
    mil[2 * a] = pads[i];
    mil[2 * a + 1] = pads[i + axes.size()];
  }
  // negative pads crop: slice those first, then pad the rest
  bool crop = std::any_of(mil.begin(), mil.end(), [](int64_t p) { return p < 0; });
  if (crop) {
    std::vector<int64_t> b(static_cast<size_t>(r), 0), e(static_cast<size_t>(r), 0);
    std::vector<int64_t> bm(static_cast<size_t>(r), 1), em(static_cast<size_t>(r), 1);
    for (int i = 0; i < r; ++i) {
      if (mil[2 * i] < 0) b[i] = -mil[2 * i], bm[i] = 0, mil[2 * i] = 0;
      if (mil[2 * i + 1] < 0) e[i] = mil[2 * i + 1], em[i] = 0, mil[2 * i + 1] = 0;
    }
    x = cv.op("slice_by_index", {C::arg("x", x), C::arg_ints32("begin", b), C::arg_ints32("end", e),
                                 C::arg("begin_mask", Value::from_ints(DataType::Bool, {r}, bm)),
                                 C::arg("end_mask", Value::from_ints(DataType::Bool, {r}, em))});
    if (std::all_of(mil.begin(), mil.end(), [](int64_t p) { return p == 0; })) return cv.out(n, 0, x);
  }
  std::string m = mode == "edge" ? "replicate" : mode;
  if (m == "wrap") {
    // circular: the last p entries before, the first q after (concat of slices per axis)
    for (int i = 0; i < r; ++i) {
      int64_t b = mil[2 * i], e = mil[2 * i + 1];
      if (!b && !e) continue;
      const Dim& d = C::shape(x)[static_cast<size_t>(i)];
      if (!d->is_const() || b > d->value() || e > d->value()) cv.fail(n, "wrap padding needs the padded dims to be known and at least the pads");
      int64_t len = d->value();
      auto part = [&](int64_t from, int64_t to) {
        std::vector<int64_t> bb(static_cast<size_t>(r), 0), ee(static_cast<size_t>(r), 0);
        std::vector<int64_t> bm(static_cast<size_t>(r), 1), em(static_cast<size_t>(r), 1);
        bb[static_cast<size_t>(i)] = from, ee[static_cast<size_t>(i)] = to, bm[static_cast<size_t>(i)] = 0, em[static_cast<size_t>(i)] = 0;
        return cv.op("slice_by_index", {C::arg("x", x), C::arg_ints32("begin", bb), C::arg_ints32("end", ee),
                                        C::arg("begin_mask", Value::from_ints(DataType::Bool, {r}, bm)),
                                        C::arg("end_mask", Value::from_ints(DataType::Bool, {r}, em))});
      };
      Arg v{"values", {}, true};
      if (b) v.items.push_back(ArgItem{part(len - b, len), nullptr});
      v.items.push_back(ArgItem{x, nullptr});
      if (e) v.items.push_back(ArgItem{part(0, e), nullptr});
      x = cv.op("concat", {v, C::arg_i32("axis", i)});
    }
    return cv.out(n, 0, x);
  }
  if (m != "constant" && m != "reflect" && m != "replicate") cv.fail(n, "mode '" + mode + "' is not supported");
  DataType dt = C::dtype(x);
  Var* xf = is_float(dt) ? x : cv.cast(x, DataType::Float32);  // MIL pads floats only
  DataType ft = C::dtype(xf);
  std::vector<Arg> args = {C::arg("x", xf), C::arg_ints32("pad", mil), C::arg_str("mode", m)};
  if (m == "constant") args.push_back(C::arg("constant_val", Value::scalar_float(ft, value)));
  Var* y = cv.op("pad", std::move(args));
  cv.out(n, 0, xf == x ? y : cv.cast(y, dt));
}

void shape_op(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  int64_t start = C::attr_int(n, "start", 0), end = C::attr_int(n, "end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  if (auto s = C::static_shape(x)) {
    std::vector<int64_t> v(s->begin() + start, s->begin() + std::max(start, end));
    return cv.out_const(n, 0, Value::from_ints(DataType::Int64, {static_cast<int64_t>(v.size())}, v));
  }
  Var* s = cv.op("shape", {C::arg("x", x)});
  if (start != 0 || end != r)
    s = cv.op("slice_by_index", {C::arg("x", s), C::arg_ints32("begin", {start}), C::arg_ints32("end", {std::max(start, end)})});
  cv.out(n, 0, s);
}

void size_op(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  if (auto s = C::static_shape(x)) {
    int64_t p = 1;
    for (auto d : *s) p *= d;
    return cv.out_const(n, 0, Value::scalar_int(DataType::Int64, p));
  }
  cv.out(n, 0, cv.op("reduce_prod", {C::arg("x", cv.op("shape", {C::arg("x", x)})), C::arg_bool("keep_dims", false)}));
}

void constant_of_shape(C& cv, const NodeProto& n) {
  Value scalar = Value::scalar_float(DataType::Float32, 0);
  if (auto* a = C::find_attr(n, "value")) {
    scalar = decode_tensor(a->t(), cv.ext, cv.keep, "ConstantOfShape value");
    if (scalar.numel() != 1) cv.fail(n, "value must hold one element");
    scalar = scalar.reshaped({});
  }
  Value nv = narrow(scalar, "ConstantOfShape value");
  if (const Value* sv = cv.value(n, 0)) {
    auto shape = sv->to_ints();
    Value full = filled(nv.dtype(), shape, nv);
    if (scalar.dtype() != nv.dtype()) full = filled(scalar.dtype(), shape, scalar);
    return cv.out_const(n, 0, std::move(full));
  }
  cv.out(n, 0, cv.op("fill", {C::arg("shape", cv.cast(cv.in(n, 0), DataType::Int32)), C::arg("value", nv)}));
}

void constant(C& cv, const NodeProto& n) {
  if (n.attribute_size() != 1) cv.fail(n, "needs exactly one attribute");
  auto& a = n.attribute(0);
  const std::string& k = a.name();
  if (k == "value") return cv.out_const(n, 0, decode_tensor(a.t(), cv.ext, cv.keep, "Constant '" + n.output(0) + "'"));
  if (k == "value_float") return cv.out_const(n, 0, Value::scalar_float(DataType::Float32, a.f()));
  if (k == "value_int") return cv.out_const(n, 0, Value::scalar_int(DataType::Int64, a.i()));
  if (k == "value_floats") {
    std::vector<double> v(a.floats().begin(), a.floats().end());
    return cv.out_const(n, 0, Value::from_doubles(DataType::Float32, {static_cast<int64_t>(v.size())}, v));
  }
  if (k == "value_ints") {
    std::vector<int64_t> v(a.ints().begin(), a.ints().end());
    return cv.out_const(n, 0, Value::from_ints(DataType::Int64, {static_cast<int64_t>(v.size())}, v));
  }
  if (k == "value_string") return cv.out_const(n, 0, Value::scalar_string(a.s()));
  if (k == "value_strings")
    return cv.out_const(n, 0, Value::strings({a.strings_size()}, std::vector<std::string>(a.strings().begin(), a.strings().end())));
  cv.fail(n, "attribute '" + k + "' is not supported");
}

void range_op(C& cv, const NodeProto& n) {
  const Value* s = cv.value(n, 0);
  const Value* l = cv.value(n, 1);
  const Value* d = cv.value(n, 2);
  if (s && l && d) {
    DataType dt = s->dtype();
    if (is_float(dt)) {
      double a = s->as_double(0), b = l->as_double(0), st = d->as_double(0);
      if (st == 0) cv.fail(n, "delta is 0");
      int64_t cnt = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((b - a) / st)));
      std::vector<double> v(static_cast<size_t>(cnt));
      for (int64_t i = 0; i < cnt; ++i) v[static_cast<size_t>(i)] = a + static_cast<double>(i) * st;
      return cv.out_const(n, 0, Value::from_doubles(dt, {cnt}, v));
    }
    int64_t a = s->as_int(0), b = l->as_int(0), st = d->as_int(0);
    if (st == 0) cv.fail(n, "delta is 0");
    int64_t cnt = std::max<int64_t>(0, (b - a + st + (st > 0 ? -1 : 1)) / st);
    std::vector<int64_t> v(static_cast<size_t>(cnt));
    for (int64_t i = 0; i < cnt; ++i) v[static_cast<size_t>(i)] = a + i * st;
    return cv.out_const(n, 0, Value::from_ints(dt, {cnt}, v));
  }
  Var* start = cv.in(n, 0);
  cv.out(n, 0, cv.op("range_1d", {C::arg("start", start), C::arg("end", cv.cast(cv.in(n, 1), C::dtype(start))),
                                  C::arg("step", cv.cast(cv.in(n, 2), C::dtype(start)))}));
}

void top_k(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", -1), cv.rank(n, x));
  int64_t k = cv.opset < 10 ? C::attr_int(n, "k", 1) : cv.ints(n, 1, "K").at(0);
  auto outs = cv.ops("topk", {C::arg("x", x), C::arg_i32("k", k), C::arg_i32("axis", ax),
                              C::arg_bool("ascending", C::attr_int(n, "largest", 1) == 0)});
  cv.out(n, 0, outs[0]);
  cv.out(n, 1, outs[1]);
}

void cum_sum(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  compose::ScanSpec s;
  s.axis = cv.axis(n, cv.ints(n, 1, "axis").at(0), cv.rank(n, x));
  s.exclusive = C::attr_int(n, "exclusive", 0) != 0;
  s.reverse = C::attr_int(n, "reverse", 0) != 0;
  cv.out(n, 0, compose::cumsum(cv.em, x, s));
}

void one_hot(C& cv, const NodeProto& n) {
  Var* idx = cv.cast(cv.in(n, 0), DataType::Int32);
  int64_t depth = static_cast<int64_t>(cv.doubles(n, 1, "depth").at(0));
  Var* vals = cv.in(n, 2);
  DataType dt = C::dtype(vals);
  auto vv = cv.doubles(n, 2, "values");
  if (vv.size() != 2) cv.fail(n, "values must hold [off, on]");
  auto mk = [&](size_t i) {
    return is_float(dt) ? Value::scalar_float(dt, vv[i]) : Value::scalar_int(dt, static_cast<int64_t>(vv[i]));
  };
  int64_t r = cv.rank(n, idx) + 1;
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", -1), r);
  // negative indices count from the end of the depth
  Var* wrapped = cv.op("select", {C::arg("cond", binary(cv, "less", idx, cv.cs(0, DataType::Int32))),
                                  C::arg("a", binary(cv, "add", idx, cv.cs(static_cast<double>(depth), DataType::Int32))),
                                  C::arg("b", idx)});
  cv.out(n, 0, cv.op("one_hot", {C::arg("indices", wrapped), C::arg_i32("one_hot_vector_size", depth), C::arg_i32("axis", ax),
                                 C::arg("on_value", mk(1)), C::arg("off_value", mk(0))}));
}

void non_zero(C& cv, const NodeProto& n) {
  Var* nz = cv.op("non_zero", {C::arg("x", cv.in(n, 0))});
  cv.out(n, 0, cv.op("transpose", {C::arg("x", nz), C::arg_ints32("perm", {1, 0})}));
}

void depth_to_space(C& cv, const NodeProto& n) {
  int64_t bs = C::attr_int(n, "blocksize", 1);
  Var* x = cv.in(n, 0);
  if (C::attr_string(n, "mode", "DCR") == "CRD")
    return cv.out(n, 0, cv.op("pixel_shuffle", {C::arg("x", x), C::arg_i32("upscale_factor", bs)}));
  cv.out(n, 0, cv.op("depth_to_space", {C::arg("x", x), C::arg_i32("block_size", bs)}));
}

void space_to_depth(C& cv, const NodeProto& n) {
  int64_t bs = C::attr_int(n, "blocksize", 1);
  Var* x = cv.in(n, 0);
  if (C::attr_string(n, "mode", "DCR") == "CRD") {
    // channel c * bs^2 + (i * bs + j): [N, C, H/bs, bs, W/bs, bs] -> [N, C, bs, bs, H/bs, W/bs]
    auto s = C::static_shape(x);
    if (!s || s->size() != 4) cv.fail(n, "mode CRD needs a 4-D input of known shape");
    int64_t N = (*s)[0], Cc = (*s)[1], H = (*s)[2], W = (*s)[3];
    Var* y = cv.op("reshape", {C::arg("x", x), C::arg_ints32("shape", {N, Cc, H / bs, bs, W / bs, bs})});
    y = cv.op("transpose", {C::arg("x", y), C::arg_ints32("perm", {0, 1, 3, 5, 2, 4})});
    return cv.out(n, 0, cv.op("reshape", {C::arg("x", y), C::arg_ints32("shape", {N, Cc * bs * bs, H / bs, W / bs})}));
  }
  cv.out(n, 0, cv.op("space_to_depth", {C::arg("x", x), C::arg_i32("block_size", bs)}));
}

void trilu(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  auto s = C::static_shape(x);
  if (!s || r < 2) cv.fail(n, "needs a known shape of rank 2 or more");
  int64_t k = C::has(n, 1) ? cv.ints(n, 1, "k").at(0) : 0;
  bool upper = C::attr_int(n, "upper", 1) != 0;
  int64_t h = (*s)[r - 2], w = (*s)[r - 1];
  std::vector<int64_t> m(static_cast<size_t>(h * w));
  for (int64_t i = 0; i < h; ++i)
    for (int64_t j = 0; j < w; ++j) m[static_cast<size_t>(i * w + j)] = upper ? (j - i >= k) : (j - i <= k);
  Var* mask = cv.c(Value::from_ints(DataType::Bool, {h, w}, m));
  Var* zero = cv.cs(0, C::dtype(x));
  cv.out(n, 0, cv.op("select", {C::arg("cond", mask), C::arg("a", x), C::arg("b", zero)}));
}

void eye_like(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  auto s = C::static_shape(x);
  if (!s || s->size() != 2) cv.fail(n, "needs a known 2-D shape");
  int64_t k = C::attr_int(n, "k", 0);
  DataType dt = C::dtype(x);
  if (auto* a = C::find_attr(n, "dtype")) {
    auto d = mil_dtype(static_cast<int>(a->i()));
    if (!d) cv.fail(n, "dtype " + onnx_type_name(static_cast<int>(a->i())) + " is not supported");
    dt = *d;
  }
  std::vector<double> v(static_cast<size_t>((*s)[0] * (*s)[1]), 0.0);
  for (int64_t i = 0; i < (*s)[0]; ++i)
    if (i + k >= 0 && i + k < (*s)[1]) v[static_cast<size_t>(i * (*s)[1] + i + k)] = 1;
  cv.out_const(n, 0, Value::from_doubles(dt, *s, v));
}

}  // namespace

void register_tensor(OpTable& t) {
  t.on("Reshape", 1, reshape);
  t.on("Flatten", 1, flatten);
  t.on("Transpose", 1, transpose);
  t.on("Squeeze", 1, squeeze);
  t.on("Unsqueeze", 1, unsqueeze);
  t.on("Concat", 1, concat);
  t.on("Split", 1, split);
  t.on("Slice", 1, slice);
  t.on("Gather", 1, gather);
  t.on("GatherElements", 1, gather_elements);
  t.on("GatherND", 1, gather_nd);
  auto scatter_mode = [](C& cv, const NodeProto& n) {
    std::string red = C::attr_string(n, "reduction", "none");
    if (red == "none") return std::string("update");
    if (red == "add" || red == "mul" || red == "max" || red == "min") return red;
    cv.fail(n, "reduction '" + red + "' is not supported");
  };
  t.on("ScatterND", 1, [scatter_mode](C& cv, const NodeProto& n) {
    cv.out(n, 0, cv.op("scatter_nd", {C::arg("data", cv.in(n, 0)), C::arg("indices", cv.cast(cv.in(n, 1), DataType::Int32)),
                                      C::arg("updates", cv.in(n, 2)), C::arg_str("mode", scatter_mode(cv, n))}));
  });
  auto scatter_elements = [scatter_mode](C& cv, const NodeProto& n) {
    Var* x = cv.in(n, 0);
    int64_t ax = cv.axis(n, C::attr_int(n, "axis", 0), cv.rank(n, x));
    Var* idx = gather_indices(cv, n, 1, x, ax);
    cv.out(n, 0, cv.op("scatter_along_axis", {C::arg("data", x), C::arg("indices", idx), C::arg("updates", cv.in(n, 2)),
                                              C::arg_i32("axis", ax), C::arg_str("mode", scatter_mode(cv, n))}));
  };
  t.on("ScatterElements", 1, scatter_elements);
  t.on("Scatter", 1, scatter_elements);
  t.on("Expand", 1, expand);
  t.on("Tile", 1, tile);
  t.on("Pad", 1, pad);
  t.on("Shape", 1, shape_op);
  t.on("Size", 1, size_op);
  t.on("ConstantOfShape", 1, constant_of_shape);
  t.on("Constant", 1, constant);
  t.on("Range", 1, range_op);
  t.on("TopK", 1, top_k);
  t.on("CumSum", 1, cum_sum);
  t.on("OneHot", 1, one_hot);
  t.on("NonZero", 1, non_zero);
  t.on("Einsum", 1, einsum);
  t.on("DepthToSpace", 1, depth_to_space);
  t.on("SpaceToDepth", 1, space_to_depth);
  t.on("Trilu", 1, trilu);
  t.on("EyeLike", 1, eye_like);
}

}  // namespace onnx_detail
}  // namespace milkit
