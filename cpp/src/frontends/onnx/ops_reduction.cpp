// ONNX operators: reductions and ArgMax / ArgMin.
#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <numeric>

#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

// The reduction `m` of input 0 over `axes` (every axis when empty, unless noop_with_empty_axes).
void reduce_over(C& cv, const NodeProto& n, const std::string& m, std::vector<int64_t> axes) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  bool keep = C::attr_int(n, "keepdims", 1) != 0;
  if (axes.empty()) {
    if (C::attr_int(n, "noop_with_empty_axes", 0) != 0) return cv.out(n, 0, x);
    axes.resize(static_cast<size_t>(r));
    std::iota(axes.begin(), axes.end(), 0);
  }
  for (auto& a : axes) a = cv.axis(n, a, r);
  if (auto s = C::static_shape(x)) {
    bool empty = false;
    for (auto a : axes) empty |= (*s)[static_cast<size_t>(a)] == 0;
    if (empty) {
      // a reduction over nothing: ONNX gives the identity of the reduction
      double inf = std::numeric_limits<double>::infinity();
      double id = m == "reduce_max" || m == "reduce_log_sum" || m == "reduce_log_sum_exp" ? -inf
                  : m == "reduce_min"                                                     ? inf
                  : m == "reduce_prod"                                                    ? 1.0
                                                                                          : 0.0;
      std::vector<int64_t> shape;
      for (int i = 0; i < r; ++i) {
        bool red = std::find(axes.begin(), axes.end(), i) != axes.end();
        if (!red)
          shape.push_back((*s)[static_cast<size_t>(i)]);
        else if (keep)
          shape.push_back(1);
      }
      int64_t num = 1;
      for (auto d : shape) num *= d;
      DataType dt = C::dtype(x);
      if (dt == DataType::Bool)
        id = m == "reduce_min" ? 1 : 0;
      else if (!is_float(dt))
        id = std::isinf(id) ? (id > 0 ? INT32_MAX : INT32_MIN) : id;
      Var* c = cv.c(
          is_float(dt)
              ? Value::from_doubles(dt, shape, std::vector<double>(static_cast<size_t>(num), id))
              : Value::from_ints(
                    dt, shape,
                    std::vector<int64_t>(static_cast<size_t>(num), static_cast<int64_t>(id))));
      return cv.out(n, 0, cv.op("identity", {C::arg("x", c)}));
    }
  }
  Var* in = x;
  if (C::dtype(x) == DataType::Bool) in = cv.cast(x, DataType::Int32);
  bool is_int = !is_float(C::dtype(x));
  if (is_int && (m == "reduce_mean" || m == "reduce_l2_norm" || m == "reduce_log_sum" ||
                 m == "reduce_log_sum_exp")) {
    in = cv.cast(x, DataType::Float32);
  }
  Var* y = cv.op(m, {C::arg("x", in), C::arg_ints32("axes", axes), C::arg_bool("keep_dims", keep)});
  if (in != x) y = cv.cast(y, C::dtype(x));
  cv.out(n, 0, y);
}

// Axes are an attribute before `axes_input_since` (13 for ReduceSum, 18 for the rest) and an
// optional input from it.
void reduce(OpTable& t, const char* onnx, const char* mil, int axes_input_since) {
  t.on(onnx, 1,
       [mil](C& cv, const NodeProto& n) { reduce_over(cv, n, mil, C::attr_ints(n, "axes")); });
  t.on(onnx, axes_input_since, [mil](C& cv, const NodeProto& n) {
    reduce_over(cv, n, mil, C::has(n, 1) ? cv.ints(n, 1, "axes") : std::vector<int64_t>{});
  });
}

void arg(OpTable& t, const char* onnx, const char* mil) {
  t.on(onnx, 1, [mil](C& cv, const NodeProto& n) {
    Var* x = cv.in(n, 0);
    int r = cv.rank(n, x);
    int64_t ax = cv.axis(n, C::attr_int(n, "axis", 0), r);
    bool keep = C::attr_int(n, "keepdims", 1) != 0;
    if (C::attr_int(n, "select_last_index", 0) != 0) {
      // the last index of the extreme: reverse the axis, take the first, map back
      Var* rev = cv.op("reverse", {C::arg("x", x), C::arg_ints32("axes", {ax})});
      Var* i =
          cv.op(mil, {C::arg("x", rev), C::arg_i32("axis", ax), C::arg_bool("keep_dims", keep)});
      Var* dim = cv.op("gather", {C::arg("x", cv.op("shape", {C::arg("x", x)})),
                                  C::arg("indices", Value::scalar_int(DataType::Int32, ax))});
      Var* last =
          cv.op("sub", {C::arg("x", dim), C::arg("y", Value::scalar_int(DataType::Int32, 1))});
      return cv.out(n, 0, cv.op("sub", {C::arg("x", last), C::arg("y", i)}));
    }
    cv.out(n, 0,
           cv.op(mil, {C::arg("x", x), C::arg_i32("axis", ax), C::arg_bool("keep_dims", keep)}));
  });
}

}  // namespace

void register_reduction(OpTable& t) {
  reduce(t, "ReduceSum", "reduce_sum", 13);
  reduce(t, "ReduceMean", "reduce_mean", 18);
  reduce(t, "ReduceMax", "reduce_max", 18);
  reduce(t, "ReduceMin", "reduce_min", 18);
  reduce(t, "ReduceProd", "reduce_prod", 18);
  reduce(t, "ReduceL1", "reduce_l1_norm", 18);
  reduce(t, "ReduceL2", "reduce_l2_norm", 18);
  reduce(t, "ReduceLogSum", "reduce_log_sum", 18);
  reduce(t, "ReduceLogSumExp", "reduce_log_sum_exp", 18);
  reduce(t, "ReduceSumSquare", "reduce_sum_square", 18);
  arg(t, "ArgMax", "reduce_argmax");
  arg(t, "ArgMin", "reduce_argmin");
}

}  // namespace onnx_detail
}  // namespace milkit
