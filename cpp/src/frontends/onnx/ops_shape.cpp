// ONNX operators: reshaping, transposing, joining, splitting, padding and tiling tensors.
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

using Axes = std::optional<std::vector<int64_t>>;

// Axes given as an attribute (Squeeze / Unsqueeze before opset 13).
Axes axes_attr(const NodeProto& n) {
  if (!C::has_attr(n, "axes")) return std::nullopt;
  return C::attr_ints(n, "axes");
}

// Axes given as input 1 (from opset 13).
Axes axes_input(C& cv, const NodeProto& n) {
  if (!C::has(n, 1)) return std::nullopt;
  return cv.ints(n, 1, "axes");
}

void reshape_to(C& cv, const NodeProto& n, Var* x, const std::vector<int64_t>& shape);

// Reshape before opset 5: the shape is an attribute.
void reshape_v1(C& cv, const NodeProto& n) {
  reshape_to(cv, n, cv.in(n, 0), C::attr_ints(n, "shape"));
}

// Reshape from opset 5: the shape is input 1, known at conversion time or computed.
void reshape_v5(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  if (const Value* sv = cv.value(n, 1)) return reshape_to(cv, n, x, sv->to_ints());
  // MIL's reshape reads a 0 as "copy the dim": an allowzero 0 (an empty output) needs the shape
  if (C::attr_int(n, "allowzero", 0) != 0)
    cv.ints(n, 1, "shape (with allowzero)");  // throws: not known
  // a computed shape (often symbolic): MIL's reshape takes it, with ONNX's 0 ("copy the
  // input's dim") made explicit unless allowzero
  Var* s = cv.cast(cv.in(n, 1), DataType::Int32);
  auto ss = C::static_shape(s);
  bool maybe_zero = !(s->value() && !s->value()->is_symbolic());
  if (maybe_zero && C::attr_int(n, "allowzero", 0) == 0 && ss && ss->size() == 1 &&
      x->type()->has_rank() && !s->value()) {
    int64_t len = (*ss)[0], xr = x->type()->rank();
    Var* xs = cv.op("shape", {C::arg("x", x)});
    if (len < xr) {
      xs = cv.op("slice_by_index",
                 {C::arg("x", xs), C::arg_ints32("begin", {0}), C::arg_ints32("end", {len})});
    } else if (len > xr) {  // a 0 past the input's rank stays 0
      Arg v{"values",
            {ArgItem{xs, nullptr},
             ArgItem{cv.ci(std::vector<int64_t>(static_cast<size_t>(len - xr), 0)), nullptr}},
            true};
      xs = cv.op("concat", {v, C::arg_i32("axis", 0)});
    }
    Var* zero =
        cv.op("equal", {C::arg("x", s), C::arg("y", Value::scalar_int(DataType::Int32, 0))});
    s = cv.op("select", {C::arg("cond", zero), C::arg("a", xs), C::arg("b", s)});
  }
  cv.out(n, 0, cv.op("reshape", {C::arg("x", x), C::arg("shape", s)}));
}

// Reshape of `x` to a shape known at conversion time (0 copies the input's dim unless allowzero).
void reshape_to(C& cv, const NodeProto& n, Var* x, const std::vector<int64_t>& shape) {
  bool allowzero = C::attr_int(n, "allowzero", 0) != 0;
  const auto& xs = C::shape(x);
  std::vector<Var*> pieces;
  bool dynamic = false;
  std::vector<int64_t> run;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t d = shape[i];
    if (d == 0 && !allowzero) {
      if (!x->type()->has_rank() || i >= xs.size())
        cv.fail(n, "shape has a 0 at " + std::to_string(i) + " beyond the input's rank");
      if (xs[i]->is_const()) {
        run.push_back(xs[i]->value());
      } else {
        if (!run.empty()) pieces.push_back(cv.ci(run)), run.clear();
        Var* s = cv.op("shape", {C::arg("x", x)});
        pieces.push_back(cv.op("slice_by_index",
                               {C::arg("x", s), C::arg_ints32("begin", {static_cast<int64_t>(i)}),
                                C::arg_ints32("end", {static_cast<int64_t>(i + 1)})}));
        dynamic = true;
      }
    } else {
      if (d < -1 || d > INT32_MAX)
        cv.fail(n, "shape value " + std::to_string(d) + " is not a valid dimension");
      run.push_back(d);
    }
  }
  if (!dynamic) {
    auto xss = C::static_shape(x);
    bool empty = xss && std::find(xss->begin(), xss->end(), 0) != xss->end();
    if (empty && std::find(run.begin(), run.end(), -1) == run.end() &&
        std::find(run.begin(), run.end(), 0) != run.end()) {
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
  if (ax < 0 || ax > r)
    cv.fail(n, "axis " + std::to_string(C::attr_int(n, "axis", 1)) + " is out of range for rank " +
                   std::to_string(r));
  if (auto s = C::static_shape(x)) {
    int64_t lead = 1, rest = 1;
    for (int i = 0; i < r; ++i) (i < ax ? lead : rest) *= (*s)[static_cast<size_t>(i)];
    return cv.out(n, 0, cv.op("reshape", {C::arg("x", x), C::arg_ints32("shape", {lead, rest})}));
  }
  if (ax == 0)
    return cv.out(n, 0, cv.op("reshape", {C::arg("x", x), C::arg_ints32("shape", {1, -1})}));
  Var* s = cv.op("shape", {C::arg("x", x)});
  Var* lead =
      cv.op("reduce_prod",
            {C::arg("x", cv.op("slice_by_index", {C::arg("x", s), C::arg_ints32("begin", {0}),
                                                  C::arg_ints32("end", {ax})})),
             C::arg_ints32("axes", {0}), C::arg_bool("keep_dims", true)});
  cv.out(n, 0,
         cv.op("reshape", {C::arg("x", x), C::arg("shape", concat_ints(cv, {lead, cv.ci({-1})}))}));
}

// Split into `sizes` (equal parts when empty: the last one smaller when they do not divide).
void split_into(C& cv, const NodeProto& n, std::vector<int64_t> sizes) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", 0), r);
  int outs = n.output_size();
  std::vector<Var*> res;
  if (!sizes.empty()) {
    if (static_cast<int>(sizes.size()) != outs)
      cv.fail(n, "split has " + std::to_string(sizes.size()) + " sizes for " +
                     std::to_string(outs) + " outputs");
    res = cv.ops("split",
                 {C::arg("x", x), C::arg_ints32("split_sizes", sizes), C::arg_i32("axis", ax)});
  } else {
    Dim d = C::shape(x)[ax];
    if (d->is_const() && d->value() % outs != 0) {
      // opset 18: the last chunk is smaller (ceil(dim / n) each)
      int64_t each = (d->value() + outs - 1) / outs;
      for (int i = 0; i < outs; ++i) sizes.push_back(std::min(each, d->value() - each * i));
      res = cv.ops("split",
                   {C::arg("x", x), C::arg_ints32("split_sizes", sizes), C::arg_i32("axis", ax)});
    } else {
      res =
          cv.ops("split", {C::arg("x", x), C::arg_i32("num_splits", outs), C::arg_i32("axis", ax)});
    }
  }
  for (int i = 0; i < outs; ++i) cv.out(n, i, res[static_cast<size_t>(i)]);
}

// Split before opset 13: the sizes are an attribute.
void split_v2(C& cv, const NodeProto& n) { split_into(cv, n, C::attr_ints(n, "split")); }

// Split from opset 13: the sizes are input 1.
void split_v13(C& cv, const NodeProto& n) {
  split_into(cv, n, C::has(n, 1) ? cv.ints(n, 1, "split") : std::vector<int64_t>{});
}

void transpose(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  std::vector<int64_t> perm(static_cast<size_t>(r));
  std::iota(perm.rbegin(), perm.rend(), 0);
  perm = C::attr_ints(n, "perm", perm);
  cv.out(n, 0, cv.op("transpose", {C::arg("x", x), C::arg_ints32("perm", perm)}));
}

void squeeze(C& cv, const NodeProto& n, Axes axes) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  if (!axes) {
    auto s = C::static_shape(x);
    if (!s)
      cv.fail(n, "squeezing every dim of size 1 needs the shape to be known at conversion time");
    axes.emplace();
    for (int i = 0; i < r; ++i)
      if ((*s)[static_cast<size_t>(i)] == 1) axes->push_back(i);
  }
  if (axes->empty()) return cv.out(n, 0, x);
  for (auto& a : *axes) a = cv.axis(n, a, r);
  cv.out(n, 0, cv.op("squeeze", {C::arg("x", x), C::arg_ints32("axes", *axes)}));
}

void unsqueeze(C& cv, const NodeProto& n, Axes axes) {
  Var* x = cv.in(n, 0);
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

void expand(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  Var* shape = cv.cast(cv.in(n, 1), DataType::Int32);
  DataType dt = C::dtype(x);
  if (dt == DataType::Bool) {
    Var* ones = cv.op(
        "fill", {C::arg("shape", shape), C::arg("value", Value::scalar_int(DataType::Int32, 1))});
    Var* y = binary(cv, "mul", cv.cast(x, DataType::Int32), ones);
    return cv.out(n, 0, cv.cast(y, DataType::Bool));
  }
  Var* ones = cv.op(
      "fill", {C::arg("shape", shape), C::arg("value", is_float(dt) ? Value::scalar_float(dt, 1)
                                                                    : Value::scalar_int(dt, 1))});
  cv.out(n, 0, binary(cv, "mul", x, ones));
}

void tile(C& cv, const NodeProto& n) {
  cv.out(n, 0,
         cv.op("tile",
               {C::arg("x", cv.in(n, 0)), C::arg("reps", cv.cast(cv.in(n, 1), DataType::Int32))}));
}

// Pads input 0 by `pads` (begin values then end values) over `axes` (empty: every axis).
void pad_with(C& cv, const NodeProto& n, std::vector<int64_t> pads, double value,
              std::vector<int64_t> axes) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  std::string mode = C::attr_string(n, "mode", "constant");
  if (axes.empty())
    for (int i = 0; i < r; ++i) axes.push_back(i);
  if (pads.size() != 2 * axes.size())
    cv.fail(n, "pads has " + std::to_string(pads.size()) + " values for " +
                   std::to_string(axes.size()) + " axes");
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
    if (std::all_of(mil.begin(), mil.end(), [](int64_t p) { return p == 0; }))
      return cv.out(n, 0, x);
  }
  std::string m = mode == "edge" ? "replicate" : mode;
  if (m == "wrap") {
    // circular: the last p entries before, the first q after (concat of slices per axis)
    for (int i = 0; i < r; ++i) {
      int64_t b = mil[2 * i], e = mil[2 * i + 1];
      if (!b && !e) continue;
      const Dim& d = C::shape(x)[static_cast<size_t>(i)];
      if (!d->is_const() || b > d->value() || e > d->value())
        cv.fail(n, "wrap padding needs the padded dims to be known and at least the pads");
      int64_t len = d->value();
      auto part = [&](int64_t from, int64_t to) {
        std::vector<int64_t> bb(static_cast<size_t>(r), 0), ee(static_cast<size_t>(r), 0);
        std::vector<int64_t> bm(static_cast<size_t>(r), 1), em(static_cast<size_t>(r), 1);
        bb[static_cast<size_t>(i)] = from, ee[static_cast<size_t>(i)] = to,
        bm[static_cast<size_t>(i)] = 0, em[static_cast<size_t>(i)] = 0;
        return cv.op("slice_by_index",
                     {C::arg("x", x), C::arg_ints32("begin", bb), C::arg_ints32("end", ee),
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
  if (m != "constant" && m != "reflect" && m != "replicate")
    cv.fail(n, "mode '" + mode + "' is not supported");
  DataType dt = C::dtype(x);
  Var* xf = is_float(dt) ? x : cv.cast(x, DataType::Float32);  // MIL pads floats only
  DataType ft = C::dtype(xf);
  std::vector<Arg> args = {C::arg("x", xf), C::arg_ints32("pad", mil), C::arg_str("mode", m)};
  if (m == "constant") args.push_back(C::arg("constant_val", Value::scalar_float(ft, value)));
  Var* y = cv.op("pad", std::move(args));
  cv.out(n, 0, xf == x ? y : cv.cast(y, dt));
}

// Pad before opset 11: pads and value are attributes.
void pad_v2(C& cv, const NodeProto& n) {
  pad_with(cv, n, C::attr_ints(n, "pads"), C::attr_float(n, "value", 0), {});
}

// Pad from opset 11: pads, the constant value and (from 18) axes are inputs.
void pad_v11(C& cv, const NodeProto& n) {
  double value = 0;
  if (C::has(n, 2)) {
    auto cvv = cv.doubles(n, 2, "constant_value");
    if (!cvv.empty()) value = cvv[0];
  }
  pad_with(cv, n, cv.ints(n, 1, "pads"), value,
           C::has(n, 3) ? cv.ints(n, 3, "axes") : std::vector<int64_t>{});
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
    return cv.out_const(n, 0,
                        Value::from_ints(DataType::Int64, {static_cast<int64_t>(v.size())}, v));
  }
  Var* s = cv.op("shape", {C::arg("x", x)});
  if (start != 0 || end != r)
    s = cv.op("slice_by_index", {C::arg("x", s), C::arg_ints32("begin", {start}),
                                 C::arg_ints32("end", {std::max(start, end)})});
  cv.out(n, 0, s);
}

void size_op(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  if (auto s = C::static_shape(x)) {
    int64_t p = 1;
    for (auto d : *s) p *= d;
    return cv.out_const(n, 0, Value::scalar_int(DataType::Int64, p));
  }
  cv.out(n, 0,
         cv.op("reduce_prod",
               {C::arg("x", cv.op("shape", {C::arg("x", x)})), C::arg_bool("keep_dims", false)}));
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
    Var* y =
        cv.op("reshape", {C::arg("x", x), C::arg_ints32("shape", {N, Cc, H / bs, bs, W / bs, bs})});
    y = cv.op("transpose", {C::arg("x", y), C::arg_ints32("perm", {0, 1, 3, 5, 2, 4})});
    return cv.out(n, 0,
                  cv.op("reshape", {C::arg("x", y),
                                    C::arg_ints32("shape", {N, Cc * bs * bs, H / bs, W / bs})}));
  }
  cv.out(n, 0, cv.op("space_to_depth", {C::arg("x", x), C::arg_i32("block_size", bs)}));
}

}  // namespace

void register_shape(OpTable& t) {
  t.on("Reshape", 1, reshape_v1);
  t.on("Reshape", 5, reshape_v5);
  t.on("Flatten", 1, flatten);
  t.on("Transpose", 1, transpose);
  t.on("Squeeze", 1, [](C& cv, const NodeProto& n) { squeeze(cv, n, axes_attr(n)); });
  t.on("Squeeze", 13, [](C& cv, const NodeProto& n) { squeeze(cv, n, axes_input(cv, n)); });
  t.on("Unsqueeze", 1, [](C& cv, const NodeProto& n) { unsqueeze(cv, n, axes_attr(n)); });
  t.on("Unsqueeze", 13, [](C& cv, const NodeProto& n) { unsqueeze(cv, n, axes_input(cv, n)); });
  t.on("Concat", 1, concat);
  t.on("Split", 1, split_v2);
  t.on("Split", 13, split_v13);
  t.on("Expand", 1, expand);
  t.on("Tile", 1, tile);
  t.on("Pad", 1, pad_v2);
  t.on("Pad", 11, pad_v11);
  t.on("Shape", 1, shape_op);
  t.on("Size", 1, size_op);
  t.on("DepthToSpace", 1, depth_to_space);
  t.on("SpaceToDepth", 1, space_to_depth);
}

}  // namespace onnx_detail
}  // namespace milkit
