// ONNX operators: slicing, gathering, scattering, selecting (TopK, NonZero, Unique, Compress).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>

#include "milkit/compose/einsum.h"
#include "milkit/compose/sampling.h"
#include "milkit/compose/scan.h"
#include "milkit/compose/windows.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

// Slices input 0: `starts` / `ends` per entry of `axes` (empty: the first axes) with `steps`
// (empty: 1); with `dyn`, starts and ends are the run-time inputs 1 and 2.
void slice_with(C& cv, const NodeProto& n, std::vector<int64_t> starts, std::vector<int64_t> ends,
                std::vector<int64_t> axes, std::vector<int64_t> steps, bool dyn) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  size_t k =
      dyn ? static_cast<size_t>(C::static_shape(cv.in(n, 1)).value_or(std::vector<int64_t>{-1})[0])
          : starts.size();
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
      // onnxruntime reads an INT_MAX end as "to the end" whatever the step
      if (st < 0 && (e == INT64_MAX || e == INT32_MAX)) e = -1;
      if (st > 0) {
        s = std::clamp<int64_t>(s, 0, dim);
        e = std::clamp<int64_t>(e, 0, dim);
        begin[a] = s, bmask[a] = false;
        if (e >= dim)
          emask[a] = true;
        else
          end[a] = e, emask[a] = false;
      } else {
        // starts clamp to [0, dim - 1] (INT64_MIN: the first element), ends to [-1, dim - 1]
        s = dim == 0 ? -1 : std::clamp<int64_t>(s, 0, dim - 1);
        e = std::clamp<int64_t>(e, -1, dim - 1);
        begin[a] = s, bmask[a] = s < 0;
        if (s < 0)
          begin[a] = 0, bmask[a] = false, end[a] = 0, emask[a] = false;  // empty
        else if (e < 0)
          emask[a] = true;
        else
          end[a] = e, emask[a] = false;
      }
    } else {
      // an unknown dim: MIL's slice takes negative indices as numpy does; bounds beyond int32
      // (INT64_MAX / INT64_MIN included) are beyond any dim: the ends of the dim
      bmask[a] = emask[a] = false;
      if (st > 0) {
        begin[a] = s <= INT32_MIN ? 0 : std::min<int64_t>(s, INT32_MAX);
        if (e >= INT32_MAX)
          emask[a] = true;
        else
          end[a] = e <= INT32_MIN ? 0 : e;
      } else {
        if (s >= INT32_MAX)
          bmask[a] = true;
        else
          begin[a] = s <= INT32_MIN ? 0 : s;
        if (e <= INT32_MIN)
          emask[a] = true;
        else if (e == INT64_MAX || e == INT32_MAX)
          emask[a] = true;  // onnxruntime's "to the end" whatever the step
        else if (e > INT32_MAX)
          begin[a] = 0, bmask[a] = false, end[a] = 0;  // empty
        else
          end[a] = e;
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
        return cv.op("slice_by_index", {C::arg("x", v), C::arg_ints32("begin", {slot[a]}),
                                        C::arg_ints32("end", {slot[a] + 1})});
      };
      bp.push_back(pick(sv));
      Var* e = pick(ev);
      if (stride[a] < 0) {
        // onnxruntime reads an INT_MAX end as "to the end" whatever the step: for a negative
        // step, past the first element
        Var* top = cv.op("equal", {C::arg("x", e), C::arg("y", cv.ci({INT32_MAX}))});
        e = cv.op("select", {C::arg("cond", top), C::arg("a", cv.ci({INT32_MIN})), C::arg("b", e)});
      }
      ep.push_back(e);
    }
    bvar = concat_ints(cv, bp);
    evar = concat_ints(cv, ep);
  } else {
    bvar = cv.ci(begin);
    evar = cv.ci(end);
  }
  cv.out(
      n, 0,
      cv.op("slice_by_index", {C::arg("x", x), C::arg("begin", bvar), C::arg("end", evar),
                               C::arg_ints32("stride", stride), C::arg("begin_mask", bools(bmask)),
                               C::arg("end_mask", bools(emask))}));
}

// Slice before opset 10: starts, ends and axes are attributes.
void slice_v1(C& cv, const NodeProto& n) {
  slice_with(cv, n, C::attr_ints(n, "starts"), C::attr_ints(n, "ends"), C::attr_ints(n, "axes"), {},
             false);
}

// Slice from opset 10: starts, ends, axes and steps are inputs (starts / ends may be run-time).
void slice_v10(C& cv, const NodeProto& n) {
  std::vector<int64_t> starts, ends, axes, steps;
  bool dyn = !cv.value(n, 1) || !cv.value(n, 2);
  if (!dyn) {
    starts = cv.ints(n, 1, "starts");
    ends = cv.ints(n, 2, "ends");
  }
  if (C::has(n, 3)) axes = cv.ints(n, 3, "axes");
  if (C::has(n, 4)) steps = cv.ints(n, 4, "steps");
  slice_with(cv, n, starts, ends, axes, steps, dyn);
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
        cv.fail(n, "index " + std::to_string(v) + " is out of range for a dimension of " +
                       std::to_string(d->value()));
      if (v < 0) v += d->value(), neg = true;
    }
    if (neg) return cv.c(Value::from_ints(DataType::Int32, iv->shape(), ints));
  }
  return cv.cast(cv.in(n, idx), DataType::Int32);
}

void gather(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", 0), cv.rank(n, x));
  Var* idx = gather_indices(cv, n, 1, x, ax);
  cv.out(
      n, 0, bool_via_int(cv, x, [&](Var* xi) {
        return cv.op("gather", {C::arg("x", xi), C::arg("indices", idx), C::arg_i32("axis", ax)});
      }));
}

void gather_elements(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", 0), cv.rank(n, x));
  Var* idx = gather_indices(cv, n, 1, x, ax);
  cv.out(n, 0, bool_via_int(cv, x, [&](Var* xi) {
           return cv.op("gather_along_axis",
                        {C::arg("x", xi), C::arg("indices", idx), C::arg_i32("axis", ax)});
         }));
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

void top_k(C& cv, const NodeProto& n, int64_t k) {
  Var* x = cv.in(n, 0);
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", -1), cv.rank(n, x));
  auto outs = cv.ops("topk", {C::arg("x", x), C::arg_i32("k", k), C::arg_i32("axis", ax),
                              C::arg_bool("ascending", C::attr_int(n, "largest", 1) == 0)});
  cv.out(n, 0, outs[0]);
  cv.out(n, 1, outs[1]);
}

// TopK before opset 10: k is an attribute; from 10, the input K.
void top_k_v1(C& cv, const NodeProto& n) { top_k(cv, n, C::attr_int(n, "k", 1)); }
void top_k_v10(C& cv, const NodeProto& n) { top_k(cv, n, cv.ints(n, 1, "K").at(0)); }

void non_zero(C& cv, const NodeProto& n) {
  Var* nz = cv.op("non_zero", {C::arg("x", cv.in(n, 0))});
  cv.out(n, 0, cv.op("transpose", {C::arg("x", nz), C::arg_ints32("perm", {1, 0})}));
}

std::string scatter_mode(C& cv, const NodeProto& n) {
  std::string red = C::attr_string(n, "reduction", "none");
  if (red == "none") return std::string("update");
  if (red == "add" || red == "mul" || red == "max" || red == "min") return red;
  cv.fail(n, "reduction '" + red + "' is not supported");
}

void scatter_nd(C& cv, const NodeProto& n) {
  cv.out(
      n, 0,
      cv.op("scatter_nd",
            {C::arg("data", cv.in(n, 0)), C::arg("indices", cv.cast(cv.in(n, 1), DataType::Int32)),
             C::arg("updates", cv.in(n, 2)), C::arg_str("mode", scatter_mode(cv, n))}));
}

void scatter_elements(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", 0), cv.rank(n, x));
  Var* idx = gather_indices(cv, n, 1, x, ax);
  cv.out(n, 0,
         cv.op("scatter_along_axis",
               {C::arg("data", x), C::arg("indices", idx), C::arg("updates", cv.in(n, 2)),
                C::arg_i32("axis", ax), C::arg_str("mode", scatter_mode(cv, n))}));
}

void compress(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  Var* cond = cv.in(n, 1);
  int64_t ax = 0;
  if (C::has_attr(n, "axis"))
    ax = cv.axis(n, C::attr_int(n, "axis", 0), cv.rank(n, x));
  else
    x = cv.op("reshape", {C::arg("x", x), C::arg_ints32("shape", {-1})});
  Var* idx = cv.op("reshape", {C::arg("x", cv.op("non_zero", {C::arg("x", cond)})),
                               C::arg_ints32("shape", {-1})});
  cv.out(n, 0, cv.op("gather", {C::arg("x", x), C::arg("indices", idx), C::arg_i32("axis", ax)}));
}

void tensor_scatter(C& cv, const NodeProto& n) {
  Var* past = cv.in(n, 0);
  Var* upd = cv.in(n, 1);
  auto ps = C::static_shape(past);
  auto us = C::static_shape(upd);
  if (!ps || !us) cv.fail(n, "needs the shapes of the cache and the update to be known");
  int r = static_cast<int>(ps->size());
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", -2), r);
  if (ax == 0) cv.fail(n, "axis must not be the batch axis");
  int64_t S = (*ps)[static_cast<size_t>(ax)], T = (*us)[static_cast<size_t>(ax)];
  std::string mode = C::attr_string(n, "mode", "linear");
  DataType i32 = DataType::Int32;
  std::vector<int64_t> tshape(static_cast<size_t>(r), 1), t(static_cast<size_t>(T)),
      bshape(static_cast<size_t>(r), 1);
  tshape[static_cast<size_t>(ax)] = T;
  std::iota(t.begin(), t.end(), 0);
  Var* pos = cv.c(Value::from_ints(i32, tshape, t));
  if (C::has(n, 2)) {
    bshape[0] = -1;
    pos = binary(
        cv, "add", pos,
        cv.op("reshape", {C::arg("x", cv.cast(cv.in(n, 2), i32)), C::arg_ints32("shape", bshape)}));
  }
  if (mode == "circular")
    pos = binary(cv, "sub", pos,
                 binary(cv, "mul", binary(cv, "floor_div", pos, cv.cs(static_cast<double>(S), i32)),
                        cv.cs(static_cast<double>(S), i32)));
  else if (mode != "linear")
    cv.fail(n, "mode must be linear or circular");
  Var* full = binary(
      cv, "add", pos,
      cv.c(Value::from_ints(
          i32, *us,
          std::vector<int64_t>(static_cast<size_t>(std::accumulate(
                                   us->begin(), us->end(), int64_t(1), std::multiplies<int64_t>())),
                               0))));
  cv.out(n, 0,
         cv.op("scatter_along_axis",
               {C::arg("data", past), C::arg("indices", full), C::arg("updates", upd),
                C::arg_i32("axis", ax), C::arg_str("mode", "update")}));
}

// Unique: the slices along axis (elements when no axis) compared pairwise; first occurrences
// picked with non_zero (a run-time count), ordered by first occurrence or (sorted)
// lexicographically; inverse indices and counts from the equality with the picked slices.
void unique(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  auto xs = C::static_shape(x);
  if (!xs) cv.fail(n, "needs the input's shape to be known");
  int r = static_cast<int>(xs->size());
  bool has_axis = C::has_attr(n, "axis");
  int64_t ax = has_axis ? cv.axis(n, C::attr_int(n, "axis", 0), r) : 0;
  DataType i32 = DataType::Int32, f32 = DataType::Float32;
  // rows: [L, R] with the slices along axis as rows
  Var* rows;
  int64_t L, R = 1;
  std::vector<int64_t> perm;
  if (!has_axis) {
    L = 1;
    for (auto d : *xs) L *= d;
    rows = cv.op("reshape", {C::arg("x", x), C::arg_ints32("shape", {L, 1})});
  } else {
    L = (*xs)[static_cast<size_t>(ax)];
    perm.push_back(ax);
    for (int i = 0; i < r; ++i)
      if (i != ax) perm.push_back(i), R *= (*xs)[static_cast<size_t>(i)];
    rows = cv.op("reshape",
                 {C::arg("x", cv.op("transpose", {C::arg("x", x), C::arg_ints32("perm", perm)})),
                  C::arg_ints32("shape", {L, R})});
  }
  Var* a = cv.op("expand_dims", {C::arg("x", rows), C::arg_ints32("axes", {1})});  // [L, 1, R]
  Var* b = cv.op("expand_dims", {C::arg("x", rows), C::arg_ints32("axes", {0})});  // [1, L, R]
  Var* neq = cv.cast(binary(cv, "not_equal", a, b), f32);                          // [L, L, R]
  Var* same = binary(cv, "equal",
                     cv.op("reduce_sum", {C::arg("x", neq), C::arg_ints32("axes", {2}),
                                          C::arg_bool("keep_dims", false)}),
                     fconst(cv, 0));
  std::vector<double> strict(static_cast<size_t>(L * L));
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < L; ++j) strict[static_cast<size_t>(i * L + j)] = j < i ? 1 : 0;
  Var* earlier =
      cv.op("reduce_sum", {C::arg("x", binary(cv, "mul", cv.cast(same, f32),
                                              cv.c(Value::from_doubles(f32, {L, L}, strict)))),
                           C::arg_ints32("axes", {1}), C::arg_bool("keep_dims", false)});
  Var* first = binary(cv, "equal", earlier, fconst(cv, 0));  // [L]
  Var* idx = cv.op("reshape", {C::arg("x", cv.op("non_zero", {C::arg("x", first)})),
                               C::arg_ints32("shape", {-1})});  // [K], ascending
  Var* order = idx;
  if (C::attr_int(n, "sorted", 1) != 0) {
    // row i before row j (lexicographically): at the first differing position, i's is smaller
    Var* before_diff = binary(
        cv, "equal",
        cv.op("cumsum", {C::arg("x", neq), C::arg_i32("axis", 2), C::arg_bool("exclusive", true)}),
        fconst(cv, 0));
    Var* lt = binary(cv, "logical_and", binary(cv, "less", a, b), before_diff);
    Var* less =
        binary(cv, "greater",
               cv.op("reduce_sum", {C::arg("x", cv.cast(lt, f32)), C::arg_ints32("axes", {2}),
                                    C::arg_bool("keep_dims", false)}),
               fconst(cv, 0));
    // rank of row i among the first occurrences: first rows j with row j < row i
    Var* rank = cv.op(
        "reduce_sum",
        {C::arg("x", binary(cv, "mul",
                            cv.cast(cv.op("transpose",
                                          {C::arg("x", less), C::arg_ints32("perm", {1, 0})}),
                                    f32),
                            cv.op("expand_dims",
                                  {C::arg("x", cv.cast(first, f32)), C::arg_ints32("axes", {0})}))),
         C::arg_ints32("axes", {1}), C::arg_bool("keep_dims", false)});
    Var* rk = cv.op("gather", {C::arg("x", rank), C::arg("indices", idx), C::arg_i32("axis", 0)});
    Var* p =
        cv.op("argsort", {C::arg("x", rk), C::arg_i32("axis", 0), C::arg_bool("ascending", true)});
    order = cv.op("gather", {C::arg("x", idx), C::arg("indices", p), C::arg_i32("axis", 0)});
  }
  // Y: the picked slices
  Var* y = cv.op("gather", {C::arg("x", x), C::arg("indices", order), C::arg_i32("axis", ax)});
  if (!has_axis) y = cv.op("reshape", {C::arg("x", y), C::arg_ints32("shape", {-1})});
  cv.out(n, 0, y);
  cv.out(n, 1, order);
  // [L, K]: whether row j equals picked row k
  Var* eqk = cv.op(
      "gather", {C::arg("x", cv.cast(same, f32)), C::arg("indices", order), C::arg_i32("axis", 1)});
  Var* K = cv.op("gather", {C::arg("x", cv.op("shape", {C::arg("x", order)})),
                            C::arg("indices", Value::scalar_int(i32, 0))});
  Var* kk = cv.cast(cv.op("range_1d", {C::arg("start", Value::scalar_int(i32, 0)), C::arg("end", K),
                                       C::arg("step", Value::scalar_int(i32, 1))}),
                    f32);
  Var* inv = cv.op(
      "reduce_sum",
      {C::arg("x", binary(cv, "mul", eqk,
                          cv.op("expand_dims", {C::arg("x", kk), C::arg_ints32("axes", {0})}))),
       C::arg_ints32("axes", {1}), C::arg_bool("keep_dims", false)});
  cv.out(n, 2, cv.cast(inv, i32));
  cv.out(n, 3,
         cv.cast(cv.op("reduce_sum", {C::arg("x", eqk), C::arg_ints32("axes", {0}),
                                      C::arg_bool("keep_dims", false)}),
                 i32));
  (void)R;
}

void reverse_sequence(C& cv, const NodeProto& n) {
  cv.out(n, 0,
         cv.op("reverse_sequence",
               {C::arg("x", cv.in(n, 0)), C::arg("lengths", cv.cast(cv.in(n, 1), DataType::Int32)),
                C::arg_i32("seq_axis", C::attr_int(n, "time_axis", 0)),
                C::arg_i32("batch_axis", C::attr_int(n, "batch_axis", 1))}));
}

}  // namespace

void register_indexing(OpTable& t) {
  t.on("Slice", 1, slice_v1);
  t.on("Slice", 10, slice_v10);
  t.on("Gather", 1, gather);
  t.on("GatherElements", 1, gather_elements);
  t.on("GatherND", 1, gather_nd);
  t.on("ScatterND", 1, scatter_nd);
  t.on("ScatterElements", 1, scatter_elements);
  t.on("Scatter", 1, scatter_elements);
  t.on("TopK", 1, top_k_v1);
  t.on("TopK", 10, top_k_v10);
  t.on("NonZero", 1, non_zero);
  t.on("Unique", 1, unique);
  t.on("Compress", 1, compress);
  t.on("ReverseSequence", 1, reverse_sequence);
  t.on("TensorScatter", 1, tensor_scatter);
}

}  // namespace onnx_detail
}  // namespace milkit
