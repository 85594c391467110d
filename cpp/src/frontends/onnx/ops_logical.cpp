// ONNX operators: comparisons, logic, Where, IsNaN / IsInf, bit shifts and bitwise logic on
// integers.
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "milkit/compose/arith.h"
#include "milkit/compose/norms.h"
#include "milkit/compose/sampling.h"
#include "milkit/compose/scan.h"
#include "milkit/compose/windows.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

void where_op(C& cv, const NodeProto& n) {
  cv.out(n, 0,
         cv.op("select",
               {C::arg("cond", cv.in(n, 0)), C::arg("a", cv.in(n, 1)), C::arg("b", cv.in(n, 2))}));
}

// Equal: MIL's equal takes numbers; of two bools it is not(a xor b)
void equal_op(C& cv, const NodeProto& n) {
  Var* a = cv.in(n, 0);
  Var* b = cv.in(n, 1);
  if (C::dtype(a) == DataType::Bool || C::dtype(b) == DataType::Bool) {
    if (C::dtype(a) != C::dtype(b)) cv.fail(n, "Equal of a bool and a non-bool tensor");
    cv.out(n, 0, cv.op("logical_not", {C::arg("x", binary(cv, "logical_xor", a, b))}));
    return;
  }
  cv.out(n, 0, binary(cv, "equal", a, b));
}

void is_na_n(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  cv.out(n, 0, binary(cv, "not_equal", x, x));
}

void is_inf(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  double inf = std::numeric_limits<double>::infinity();
  bool neg_ = C::attr_int(n, "detect_negative", 1) != 0,
       pos = C::attr_int(n, "detect_positive", 1) != 0;
  Var* r;
  if (neg_ && pos)
    r = binary(cv, "equal", cv.op("abs", {C::arg("x", x)}), cv.cs(inf, C::dtype(x)));
  else if (pos)
    r = binary(cv, "equal", x, cv.cs(inf, C::dtype(x)));
  else if (neg_)
    r = binary(cv, "equal", x, cv.cs(-inf, C::dtype(x)));
  else
    r = binary(cv, "not_equal", x, x), r = binary(cv, "logical_and", r, binary(cv, "equal", x, x));
  cv.out(n, 0, r);
}

// Integer ops MIL lacks, done exactly in int32 with powers of two / arithmetic.
Var* pow2(C& cv, Var* y) {
  Var* f = cv.op("pow", {C::arg("x", cv.cs(2, DataType::Float32)),
                         C::arg("y", cv.cast(y, DataType::Float32))});
  return cv.cast(f, DataType::Int32);
}

void bit_shift(C& cv, const NodeProto& n) {
  // in int32 (the narrow types' results keep their low bits); a shift by a negative amount or
  // by 32 or more gives 0 (LEFT) or the sign fill (RIGHT), as in ONNX's reference; shifts are
  // split in two halves so 2^31 never has to be held
  Var* x = cv.in(n, 0);
  Var* y = cv.cast(cv.in(n, 1), DataType::Int32);
  DataType i32 = DataType::Int32;
  Var* valid = binary(cv, "logical_and", binary(cv, "greater_equal", y, cv.cs(0, i32)),
                      binary(cv, "less", y, cv.cs(32, i32)));
  Var* ys = cv.op("select", {C::arg("cond", valid), C::arg("a", y), C::arg("b", cv.cs(0, i32))});
  Var* h1 = binary(cv, "floor_div", ys, cv.cs(2, i32));
  Var* h2 = binary(cv, "sub", ys, h1);
  std::string dir = C::attr_string(n, "direction", "");
  Var* xi = cv.cast(x, i32);
  Var *r, *fill;
  if (dir == "LEFT") {
    r = binary(cv, "mul", binary(cv, "mul", xi, pow2(cv, h1)), pow2(cv, h2));
    fill = cv.cs(0, i32);
  } else if (dir == "RIGHT") {
    r = binary(cv, "floor_div", binary(cv, "floor_div", xi, pow2(cv, h1)), pow2(cv, h2));
    fill = cv.op("select", {C::arg("cond", binary(cv, "less", xi, cv.cs(0, i32))),
                            C::arg("a", cv.cs(-1, i32)), C::arg("b", cv.cs(0, i32))});
  } else {
    cv.fail(n, "direction must be LEFT or RIGHT");
  }
  cv.out(n, 0,
         cv.cast(cv.op("select", {C::arg("cond", valid), C::arg("a", r), C::arg("b", fill)}),
                 C::dtype(x)));
}

// The width and signedness of an integer ONNX type (values held in int32, sign-extended).
std::pair<int, bool> int_width(int t) {
  switch (t) {
    case TensorProto::INT8:
      return {8, true};
    case TensorProto::UINT8:
      return {8, false};
    case TensorProto::INT16:
      return {16, true};
    case TensorProto::UINT16:
      return {16, false};
    case TensorProto::UINT32:
    case TensorProto::UINT64:
      return {31, false};  // held in int32: below 2^31
    default:
      return {32, true};
  }
}

// The bit planes 0..w-1 of x (int32, >= 0 or sign-extended) on a new last axis, as 0/1 int32.
Var* bit_planes(C& cv, Var* x, int w) {
  std::vector<int64_t> p;
  for (int k = 0; k < w; ++k) p.push_back(int64_t(1) << k);
  Var* e = cv.op("expand_dims", {C::arg("x", x), C::arg_ints32("axes", {-1})});
  Var* q = binary(cv, "floor_div", e, cv.c(Value::from_ints(DataType::Int32, {w}, p)));
  return binary(cv, "sub", q,
                binary(cv, "mul", binary(cv, "floor_div", q, cv.cs(2, DataType::Int32)),
                       cv.cs(2, DataType::Int32)));
}

void bitwise(C& cv, const NodeProto& n, char op) {
  auto [w, sgn] = int_width(cv.elem_type(n, 0));
  DataType i32 = DataType::Int32;
  Var* x = cv.cast(cv.in(n, 0), i32);
  if (op == '~') {
    // two's complement: ~x = -x - 1; unsigned of width w: 2^w - 1 - x
    if (!sgn && w > 30)
      cv.fail(n, "BitwiseNot of a 32- or 64-bit unsigned type does not fit int32");
    Var* y = sgn ? binary(cv, "sub", binary(cv, "mul", x, cv.cs(-1, i32)), cv.cs(1, i32))
                 : binary(cv, "sub", cv.cs(static_cast<double>((int64_t(1) << w) - 1), i32), x);
    cv.out(n, 0, y);
    return;
  }
  Var* y = cv.cast(cv.in(n, 1), i32);
  // bits below the sign bit from the planes; the sign bit (signed types) from the signs
  int low = sgn ? w - 1 : w;
  Var* bx = bit_planes(cv, x, low);
  Var* by = bit_planes(cv, y, low);
  Var* both = binary(cv, "mul", bx, by);
  Var* b = op == '&'   ? both
           : op == '|' ? binary(cv, "sub", binary(cv, "add", bx, by), both)
                       : binary(cv, "sub", binary(cv, "add", bx, by),
                                binary(cv, "mul", both, cv.cs(2, i32)));
  std::vector<int64_t> p;
  for (int k = 0; k < low; ++k) p.push_back(int64_t(1) << k);
  Var* v =
      cv.op("reduce_sum",
            {C::arg("x", binary(cv, "mul", b, cv.c(Value::from_ints(DataType::Int32, {low}, p)))),
             C::arg_ints32("axes", {-1}), C::arg_bool("keep_dims", false)});
  if (sgn) {
    Var* sx = binary(cv, "less", x, cv.cs(0, i32));
    Var* sy = binary(cv, "less", y, cv.cs(0, i32));
    Var* s = op == '&'   ? binary(cv, "logical_and", sx, sy)
             : op == '|' ? binary(cv, "logical_or", sx, sy)
                         : binary(cv, "logical_xor", sx, sy);
    double top = -std::ldexp(1.0, w - 1);
    v = binary(cv, "add", v, cv.em.sel(s, cv.cs(top, i32), cv.cs(0, i32)));
  }
  cv.out(n, 0, v);
}

void bitwise_and(C& cv, const NodeProto& n) { bitwise(cv, n, '&'); }

void bitwise_or(C& cv, const NodeProto& n) { bitwise(cv, n, '|'); }

void bitwise_xor(C& cv, const NodeProto& n) { bitwise(cv, n, '^'); }

void bitwise_not(C& cv, const NodeProto& n) { bitwise(cv, n, '~'); }

}  // namespace

void register_logical(OpTable& t) {
  t.on("Equal", 1, equal_op);
  simple_binary(t, "Greater", "greater");
  simple_binary(t, "GreaterOrEqual", "greater_equal");
  simple_binary(t, "Less", "less");
  simple_binary(t, "LessOrEqual", "less_equal");
  simple_binary(t, "And", "logical_and");
  simple_binary(t, "Or", "logical_or");
  simple_binary(t, "Xor", "logical_xor");
  simple_unary(t, "Not", "logical_not");
  t.on("Where", 1, where_op);
  t.on("IsNaN", 1, is_na_n);
  t.on("IsInf", 1, is_inf);
  t.on("BitShift", 1, bit_shift);
  t.on("BitwiseAnd", 1, bitwise_and);
  t.on("BitwiseOr", 1, bitwise_or);
  t.on("BitwiseXor", 1, bitwise_xor);
  t.on("BitwiseNot", 1, bitwise_not);
}

}  // namespace onnx_detail
}  // namespace milkit
