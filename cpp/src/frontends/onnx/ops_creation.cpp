// ONNX operators: constants and generated tensors (Constant, ConstantOfShape, Range, EyeLike,
// OneHot, Trilu).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <numeric>

#include "milkit/compose/arith.h"
#include "milkit/compose/einsum.h"
#include "milkit/compose/scan.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

Value filled(DataType dt, const std::vector<int64_t>& shape, const Value& scalar) {
  int64_t num = 1;
  for (auto d : shape) num *= d;
  if (is_float(dt))
    return Value::from_doubles(dt, shape,
                               std::vector<double>(static_cast<size_t>(num), scalar.as_double(0)));
  return Value::from_ints(dt, shape,
                          std::vector<int64_t>(static_cast<size_t>(num), scalar.as_int(0)));
}

void constant_of_shape(C& cv, const NodeProto& n) {
  Value scalar = Value::scalar_float(DataType::Float32, 0);
  if (auto* t = C::attr_tensor(n, "value")) {
    scalar = decode_tensor(*t, cv.ext, cv.keep, "ConstantOfShape value");
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
  cv.out(
      n, 0,
      cv.op("fill", {C::arg("shape", cv.cast(cv.in(n, 0), DataType::Int32)), C::arg("value", nv)}));
}

void constant(C& cv, const NodeProto& n) {
  if (n.attribute_size() != 1) cv.fail(n, "needs exactly one attribute");
  auto& a = n.attribute(0);
  const std::string& k = a.name();
  if (k == "value")
    return cv.out_const(n, 0,
                        decode_tensor(a.t(), cv.ext, cv.keep, "Constant '" + n.output(0) + "'"));
  if (k == "value_float") return cv.out_const(n, 0, Value::scalar_float(DataType::Float32, a.f()));
  if (k == "value_int") return cv.out_const(n, 0, Value::scalar_int(DataType::Int64, a.i()));
  if (k == "value_floats") {
    std::vector<double> v(a.floats().begin(), a.floats().end());
    return cv.out_const(
        n, 0, Value::from_doubles(DataType::Float32, {static_cast<int64_t>(v.size())}, v));
  }
  if (k == "value_ints") {
    std::vector<int64_t> v(a.ints().begin(), a.ints().end());
    return cv.out_const(n, 0,
                        Value::from_ints(DataType::Int64, {static_cast<int64_t>(v.size())}, v));
  }
  if (k == "value_string") return cv.out_const(n, 0, Value::scalar_string(a.s()));
  if (k == "value_strings")
    return cv.out_const(
        n, 0,
        Value::strings({a.strings_size()},
                       std::vector<std::string>(a.strings().begin(), a.strings().end())));
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
  cv.out(n, 0,
         cv.op("range_1d",
               {C::arg("start", start), C::arg("end", cv.cast(cv.in(n, 1), C::dtype(start))),
                C::arg("step", cv.cast(cv.in(n, 2), C::dtype(start)))}));
}

void one_hot(C& cv, const NodeProto& n) {
  Var* idx = cv.cast(cv.in(n, 0), DataType::Int32);
  int64_t depth = static_cast<int64_t>(cv.doubles(n, 1, "depth").at(0));
  Var* vals = cv.in(n, 2);
  DataType dt = C::dtype(vals);
  auto vv = cv.doubles(n, 2, "values");
  if (vv.size() != 2) cv.fail(n, "values must hold [off, on]");
  auto mk = [&](size_t i) {
    return is_float(dt) ? Value::scalar_float(dt, vv[i])
                        : Value::scalar_int(dt, static_cast<int64_t>(vv[i]));
  };
  int64_t r = cv.rank(n, idx) + 1;
  int64_t ax = cv.axis(n, C::attr_int(n, "axis", -1), r);
  // negative indices count from the end of the depth
  Var* wrapped = cv.op(
      "select",
      {C::arg("cond", binary(cv, "less", idx, cv.cs(0, DataType::Int32))),
       C::arg("a", binary(cv, "add", idx, cv.cs(static_cast<double>(depth), DataType::Int32))),
       C::arg("b", idx)});
  cv.out(n, 0,
         cv.op("one_hot",
               {C::arg("indices", wrapped), C::arg_i32("one_hot_vector_size", depth),
                C::arg_i32("axis", ax), C::arg("on_value", mk(1)), C::arg("off_value", mk(0))}));
}

// Trilu's mask built at run time over the last two dims of `x`'s run-time shape, `k` an int32 var.
Var* trilu_mask_runtime(C& cv, Var* x, int r, Var* k, bool upper) {
  Var* shp = cv.op("shape", {C::arg("x", x)});
  auto dim = [&](int axis) {
    return cv.op("gather",
                 {C::arg("x", shp), C::arg("indices", Value::scalar_int(DataType::Int32, axis))});
  };
  return compose::tri_mask(cv.em, dim(r - 2), dim(r - 1), k, !upper);
}

void trilu(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int r = cv.rank(n, x);
  if (r < 2) cv.fail(n, "needs an input of rank 2 or more");
  auto s = C::static_shape(x);
  bool upper = C::attr_int(n, "upper", 1) != 0;
  if (!s || (C::has(n, 1) && !cv.value(n, 1))) {
    Var* k = C::has(n, 1) ? cv.in(n, 1) : cv.c(Value::scalar_int(DataType::Int32, 0));
    if (C::dtype(k) != DataType::Int32) k = cv.cast(k, DataType::Int32);
    Var* mask = trilu_mask_runtime(cv, x, r, k, upper);
    Var* zero = cv.cs(0, C::dtype(x));
    return cv.out(n, 0, cv.op("select", {C::arg("cond", mask), C::arg("a", x), C::arg("b", zero)}));
  }
  int64_t k = C::has(n, 1) ? cv.ints(n, 1, "k").at(0) : 0;
  int64_t h = (*s)[r - 2], w = (*s)[r - 1];
  std::vector<int64_t> m(static_cast<size_t>(h * w));
  for (int64_t i = 0; i < h; ++i)
    for (int64_t j = 0; j < w; ++j)
      m[static_cast<size_t>(i * w + j)] = upper ? (j - i >= k) : (j - i <= k);
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
  if (C::has_attr(n, "dtype")) {
    int et = static_cast<int>(C::attr_int(n, "dtype", 0));
    auto d = mil_dtype(et);
    if (!d) cv.fail(n, "dtype " + onnx_type_name(et) + " is not supported");
    dt = *d;
  }
  std::vector<double> v(static_cast<size_t>((*s)[0] * (*s)[1]), 0.0);
  for (int64_t i = 0; i < (*s)[0]; ++i)
    if (i + k >= 0 && i + k < (*s)[1]) v[static_cast<size_t>(i * (*s)[1] + i + k)] = 1;
  cv.out_const(n, 0, Value::from_doubles(dt, *s, v));
}

}  // namespace

void register_creation(OpTable& t) {
  t.on("ConstantOfShape", 1, constant_of_shape);
  t.on("Constant", 1, constant);
  t.on("Range", 1, range_op);
  t.on("OneHot", 1, one_hot);
  t.on("Trilu", 1, trilu);
  t.on("EyeLike", 1, eye_like);
}

}  // namespace onnx_detail
}  // namespace milkit
