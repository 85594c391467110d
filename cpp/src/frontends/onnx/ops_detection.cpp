// ONNX operators: detection (NonMaxSuppression, RoiAlign).
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "milkit/compose/sampling.h"
#include "milkit/compose/scan.h"
#include "milkit/compose/windows.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

// NonMaxSuppression as ONNX's reference runs it: per (batch, class) the boxes by descending score
// (ties: lower index first), greedily kept unless one kept before overlaps it by more than
// iou_threshold, up to max_output_boxes_per_class; the steps are unrolled over the boxes.
void nms(C& cv, const NodeProto& n) {
  Var* boxes = cv.cast(cv.in(n, 0), DataType::Float32);
  Var* scores = cv.cast(cv.in(n, 1), DataType::Float32);
  auto bs = C::static_shape(boxes), ss = C::static_shape(scores);
  if (!bs || !ss || bs->size() != 3 || ss->size() != 3 || (*bs)[2] != 4)
    cv.fail(n, "needs boxes [B, N, 4] and scores [B, C, N] of known shapes");
  int64_t B = (*bs)[0], N = (*bs)[1], Cc = (*ss)[1];
  if (N > 256)
    cv.fail(n, "more than 256 boxes per batch are not supported (the greedy steps are unrolled)");
  DataType f32 = DataType::Float32, i32 = DataType::Int32;
  Var* maxout =
      C::has(n, 2)
          ? cv.cast(cv.op("reshape", {C::arg("x", cv.in(n, 2)), C::arg_ints32("shape", {})}), f32)
          : fconst(cv, 0);
  Var* iou_t =
      C::has(n, 3)
          ? cv.op("reshape", {C::arg("x", cv.cast(cv.in(n, 3), f32)), C::arg_ints32("shape", {})})
          : fconst(cv, 0);
  // corners: [y1, x1, y2, x2] in either order, or [xc, yc, w, h]
  auto coord = [&](int64_t i) {
    return cv.op("squeeze",
                 {C::arg("x", cv.em.slice_axis(boxes, 2, i, i + 1)), C::arg_ints32("axes", {2})});
  };
  Var *x0, *x1, *y0, *y1;
  if (C::attr_int(n, "center_point_box", 0) == 0) {
    Var *a = coord(0), *b = coord(1), *c = coord(2), *d = coord(3);
    y0 = binary(cv, "minimum", a, c), y1 = binary(cv, "maximum", a, c);
    x0 = binary(cv, "minimum", b, d), x1 = binary(cv, "maximum", b, d);
  } else {
    Var *xc = coord(0), *yc = coord(1), *hw = binary(cv, "mul", coord(2), fconst(cv, 0.5)),
        *hh = binary(cv, "mul", coord(3), fconst(cv, 0.5));
    x0 = binary(cv, "sub", xc, hw), x1 = binary(cv, "add", xc, hw), y0 = binary(cv, "sub", yc, hh),
    y1 = binary(cv, "add", yc, hh);
  }
  // [B, N, N]: whether box j is suppressed by a kept box i
  auto col = [&](Var* v) {
    return cv.op("expand_dims", {C::arg("x", v), C::arg_ints32("axes", {2})});
  };
  auto row = [&](Var* v) {
    return cv.op("expand_dims", {C::arg("x", v), C::arg_ints32("axes", {1})});
  };
  Var* iw = binary(cv, "sub", binary(cv, "minimum", col(x1), row(x1)),
                   binary(cv, "maximum", col(x0), row(x0)));
  Var* ih = binary(cv, "sub", binary(cv, "minimum", col(y1), row(y1)),
                   binary(cv, "maximum", col(y0), row(y0)));
  Var* area = binary(cv, "mul", binary(cv, "sub", x1, x0), binary(cv, "sub", y1, y0));
  Var* inter = binary(cv, "mul", iw, ih);
  Var* uni = binary(cv, "sub", binary(cv, "add", col(area), row(area)), inter);
  Var* ok = binary(cv, "logical_and", binary(cv, "greater", iw, fconst(cv, 0)),
                   binary(cv, "greater", ih, fconst(cv, 0)));
  ok = binary(cv, "logical_and", ok,
              binary(cv, "logical_and", binary(cv, "greater", col(area), fconst(cv, 0)),
                     binary(cv, "greater", row(area), fconst(cv, 0))));
  ok = binary(cv, "logical_and", ok, binary(cv, "greater", uni, fconst(cv, 0)));
  Var* iou = binary(cv, "real_div", inter, cv.em.sel(ok, uni, fconst(cv, 1)));
  Var* sup = cv.cast(binary(cv, "logical_and", ok, binary(cv, "greater", iou, iou_t)), f32);
  sup = cv.op("expand_dims", {C::arg("x", sup), C::arg_ints32("axes", {1})});  // [B, 1, N, N]
  // the rank of each box by score: how many come before it
  Var* sc = cv.op("expand_dims",
                  {C::arg("x", scores), C::arg_ints32("axes", {3})});  // [B, C, N, 1] (box j)
  Var* sr = cv.op("expand_dims",
                  {C::arg("x", scores), C::arg_ints32("axes", {2})});  // [B, C, 1, N] (box k)
  std::vector<double> lower(static_cast<size_t>(N * N));
  for (int64_t j = 0; j < N; ++j)
    for (int64_t k = 0; k < N; ++k) lower[static_cast<size_t>(j * N + k)] = k < j ? 1 : 0;
  Var* before =
      binary(cv, "logical_or", binary(cv, "greater", sr, sc),
             binary(cv, "logical_and", binary(cv, "equal", sr, sc),
                    cv.cast(cv.c(Value::from_doubles(f32, {N, N}, lower)), DataType::Bool)));
  Var* rank = cv.op("reduce_sum", {C::arg("x", cv.cast(before, f32)), C::arg_ints32("axes", {3}),
                                   C::arg_bool("keep_dims", false)});  // [B, C, N]
  Var* valid = C::has(n, 4) ? binary(cv, "greater", scores,
                                     cv.op("reshape", {C::arg("x", cv.cast(cv.in(n, 4), f32)),
                                                       C::arg_ints32("shape", {})}))
                            : binary(cv, "equal", scores, scores);
  Var* validf = cv.cast(valid, f32);
  Var* supd = nullptr;  // [B, C, N]: suppressed so far
  Var* count = nullptr;
  std::vector<ArgItem> kept;
  for (int64_t r = 0; r < N; ++r) {
    Var* pick = cv.cast(binary(cv, "equal", rank, fconst(cv, static_cast<double>(r))),
                        f32);  // one-hot [B, C, N]
    Var* cand = binary(cv, "mul", pick, validf);
    if (supd) cand = binary(cv, "mul", cand, binary(cv, "sub", fconst(cv, 1), supd));
    Var* k = cv.op("reduce_sum", {C::arg("x", cand), C::arg_ints32("axes", {2}),
                                  C::arg_bool("keep_dims", false)});  // [B, C]
    k = binary(cv, "mul", k,
               cv.cast(binary(cv, "less", count ? count : fconst(cv, 0), maxout), f32));
    kept.push_back(
        ArgItem{cv.op("expand_dims", {C::arg("x", k), C::arg_ints32("axes", {2})}), nullptr});
    count = count ? binary(cv, "add", count, k) : k;
    // the boxes the kept one overlaps: its row of the suppression matrix
    Var* rowsel = cv.op(
        "matmul",
        {C::arg("x", cv.op("expand_dims",
                           {C::arg("x", binary(cv, "mul", pick,
                                               cv.op("expand_dims", {C::arg("x", k),
                                                                     C::arg_ints32("axes", {2})}))),
                            C::arg_ints32("axes", {2})})),
         C::arg("y", sup)});  // [B, C, 1, N]
    Var* s2 = cv.op("squeeze", {C::arg("x", rowsel), C::arg_ints32("axes", {2})});
    supd = supd ? binary(cv, "maximum", supd, s2) : s2;
  }
  Var* keep =
      N == 1 ? kept[0].var
             : cv.op("concat", {Arg{"values", kept, true}, C::arg_i32("axis", 2)});  // [B, C, rank]
  // the box of each rank
  std::vector<double> idx(static_cast<size_t>(N));
  for (int64_t j = 0; j < N; ++j) idx[static_cast<size_t>(j)] = static_cast<double>(j);
  std::vector<double> rr(static_cast<size_t>(N));
  for (int64_t j = 0; j < N; ++j) rr[static_cast<size_t>(j)] = static_cast<double>(j);
  Var* at = cv.cast(
      binary(cv, "equal", cv.op("expand_dims", {C::arg("x", rank), C::arg_ints32("axes", {3})}),
             cv.c(Value::from_doubles(f32, {1, 1, 1, N}, rr))),
      f32);  // [B, C, box, rank]
  Var* order =
      cv.op("reduce_sum",
            {C::arg("x", binary(cv, "mul", at, cv.c(Value::from_doubles(f32, {1, 1, N, 1}, idx)))),
             C::arg_ints32("axes", {2}), C::arg_bool("keep_dims", false)});
  Var* nz = cv.op("non_zero", {C::arg("x", keep)});  // [K, 3]: batch, class, rank
  Var* box = cv.cast(cv.op("gather_nd", {C::arg("x", order), C::arg("indices", nz)}), i32);
  Var* bc = cv.em.slice_axis(nz, 1, 0, 2);
  Var* y = cv.op(
      "concat",
      {Arg{"values",
           {ArgItem{bc, nullptr},
            ArgItem{cv.op("expand_dims", {C::arg("x", box), C::arg_ints32("axes", {1})}), nullptr}},
           true},
       C::arg_i32("axis", 1)});
  (void)B, (void)Cc;
  cv.out(n, 0, y);
}

// Bilinear taps along one axis of size D at run-time coordinates c ([R, S]), as RoiAlign's
// reference takes them: a sample outside [-1, D] contributes nothing (valid), below 0 it is 0, at
// or past D - 1 both taps are the last pixel.
struct Taps2 {
  Var *lo, *hi, *wlo, *whi, *valid;
};

Taps2 roi_taps(C& cv, Var* c, int64_t D) {
  DataType f32 = DataType::Float32;
  Var* valid = cv.cast(binary(cv, "logical_and", binary(cv, "greater_equal", c, fconst(cv, -1)),
                              binary(cv, "less_equal", c, fconst(cv, static_cast<double>(D)))),
                       f32);
  Var* y = binary(cv, "maximum", c, fconst(cv, 0));
  Var* lo = cv.op("floor", {C::arg("x", y)});
  Var* last = binary(cv, "greater_equal", lo, fconst(cv, static_cast<double>(D - 1)));
  lo = cv.em.sel(last, fconst(cv, static_cast<double>(D - 1)), lo);
  Var* hi = cv.em.sel(last, lo, binary(cv, "add", lo, fconst(cv, 1)));
  y = cv.em.sel(last, lo, y);
  Var* l = binary(cv, "sub", y, lo);
  return {cv.cast(lo, DataType::Int32), cv.cast(hi, DataType::Int32),
          binary(cv, "sub", fconst(cv, 1), l), l, valid};
}

void roi_align(C& cv, const NodeProto& n, const char* default_mode) {
  Var* x = cv.in(n, 0);
  Var* rois = cv.cast(cv.in(n, 1), DataType::Float32);
  auto xs = C::static_shape(x), rs = C::static_shape(rois);
  if (!xs || !rs || xs->size() != 4 || rs->size() != 2 || (*rs)[1] != 4)
    cv.fail(n, "needs X [N, C, H, W] and rois [R, 4] of known shapes");
  int64_t R = (*rs)[0], Cc = (*xs)[1], H = (*xs)[2], W = (*xs)[3];
  int64_t oh = C::attr_int(n, "output_height", 1), ow = C::attr_int(n, "output_width", 1),
          g = C::attr_int(n, "sampling_ratio", 0);
  if (g <= 0)
    cv.fail(n, "an adaptive sampling_ratio (0) depends on the boxes' values; give a positive one");
  double scale = C::attr_float(n, "spatial_scale", 1.0f);
  bool half = C::attr_string(n, "coordinate_transformation_mode", default_mode) == "half_pixel";
  std::string mode = C::attr_string(n, "mode", "avg");
  DataType f32 = DataType::Float32, i32 = DataType::Int32;
  auto col = [&](int64_t i) { return cv.em.slice_axis(rois, 1, i, i + 1); };  // [R, 1]
  auto start_of = [&](int64_t i) {
    return binary(cv, "sub", binary(cv, "mul", col(i), fconst(cv, scale)),
                  fconst(cv, half ? 0.5 : 0.0));
  };
  Var *sw = start_of(0), *shh = start_of(1), *ew = start_of(2), *eh = start_of(3);
  Var* rw = binary(cv, "sub", ew, sw);
  Var* rh = binary(cv, "sub", eh, shh);
  if (!half)
    rw = binary(cv, "maximum", rw, fconst(cv, 1)), rh = binary(cv, "maximum", rh, fconst(cv, 1));
  auto samples = [&](Var* start, Var* len, int64_t out) {
    std::vector<double> k(static_cast<size_t>(out * g));
    for (int64_t i = 0; i < out * g; ++i)
      k[static_cast<size_t>(i)] =
          static_cast<double>(i / g) + (static_cast<double>(i % g) + 0.5) / static_cast<double>(g);
    Var* bin = binary(cv, "real_div", len, fconst(cv, static_cast<double>(out)));
    return binary(
        cv, "add", start,
        binary(cv, "mul", bin, cv.c(Value::from_doubles(f32, {1, out * g}, k))));  // [R, S]
  };
  Taps2 ty = roi_taps(cv, samples(shh, rh, oh), H), tx = roi_taps(cv, samples(sw, rw, ow), W);
  Var* xb =
      cv.op("gather", {C::arg("x", cv.cast(x, f32)), C::arg("indices", cv.cast(cv.in(n, 2), i32)),
                       C::arg_i32("axis", 0)});  // [R, C, H, W]
  int64_t Sy = oh * g, Sx = ow * g;
  auto rows = [&](Var* idx) {  // [R, C, Sy, W]
    Var* i4 = cv.op("reshape", {C::arg("x", idx), C::arg_ints32("shape", {R, 1, Sy, 1})});
    i4 = cv.op("tile", {C::arg("x", i4), C::arg_ints32("reps", {1, Cc, 1, W})});
    return cv.op("gather_along_axis",
                 {C::arg("x", xb), C::arg("indices", i4), C::arg_i32("axis", 2)});
  };
  auto cols = [&](Var* v, Var* idx) {  // [R, C, Sy, Sx]
    Var* i4 = cv.op("reshape", {C::arg("x", idx), C::arg_ints32("shape", {R, 1, 1, Sx})});
    i4 = cv.op("tile", {C::arg("x", i4), C::arg_ints32("reps", {1, Cc, Sy, 1})});
    return cv.op("gather_along_axis",
                 {C::arg("x", v), C::arg("indices", i4), C::arg_i32("axis", 3)});
  };
  auto wy = [&](Var* w) {
    return cv.op("reshape", {C::arg("x", binary(cv, "mul", w, ty.valid)),
                             C::arg_ints32("shape", {R, 1, Sy, 1})});
  };
  auto wx = [&](Var* w) {
    return cv.op("reshape", {C::arg("x", binary(cv, "mul", w, tx.valid)),
                             C::arg_ints32("shape", {R, 1, 1, Sx})});
  };
  Var *rlo = rows(ty.lo), *rhi = rows(ty.hi);
  Var* corner[4] = {binary(cv, "mul", cols(rlo, tx.lo), binary(cv, "mul", wy(ty.wlo), wx(tx.wlo))),
                    binary(cv, "mul", cols(rlo, tx.hi), binary(cv, "mul", wy(ty.wlo), wx(tx.whi))),
                    binary(cv, "mul", cols(rhi, tx.lo), binary(cv, "mul", wy(ty.whi), wx(tx.wlo))),
                    binary(cv, "mul", cols(rhi, tx.hi), binary(cv, "mul", wy(ty.whi), wx(tx.whi)))};
  Var* v;
  if (mode == "avg") {
    v = binary(cv, "add", binary(cv, "add", corner[0], corner[1]),
               binary(cv, "add", corner[2], corner[3]));
  } else if (mode == "max") {
    v = binary(cv, "maximum", binary(cv, "maximum", corner[0], corner[1]),
               binary(cv, "maximum", corner[2], corner[3]));
  } else {
    cv.fail(n, "mode must be avg or max");
  }
  v = cv.op("reshape", {C::arg("x", v), C::arg_ints32("shape", {R, Cc, oh, g, ow, g})});
  Var* y = mode == "avg"
               ? binary(cv, "real_div",
                        cv.op("reduce_sum", {C::arg("x", v), C::arg_ints32("axes", {3, 5}),
                                             C::arg_bool("keep_dims", false)}),
                        fconst(cv, static_cast<double>(g * g)))
               : cv.op("reduce_max", {C::arg("x", v), C::arg_ints32("axes", {3, 5}),
                                      C::arg_bool("keep_dims", false)});
  cv.out(n, 0, cv.cast(y, C::dtype(x)));
}

}  // namespace

void register_detection(OpTable& t) {
  // coordinate_transformation_mode defaults to output_half_pixel before opset 16
  t.on("RoiAlign", 1, [](C& cv, const NodeProto& n) { roi_align(cv, n, "output_half_pixel"); });
  t.on("RoiAlign", 16, [](C& cv, const NodeProto& n) { roi_align(cv, n, "half_pixel"); });
  t.on("NonMaxSuppression", 1, nms);
}

}  // namespace onnx_detail
}  // namespace milkit
