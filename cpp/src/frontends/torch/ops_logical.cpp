// ATen comparisons, logical and bitwise (bool) operators, isin.
#include <cmath>
#include <limits>
#include <string>

#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

void compare(OpTable& t, const char* name, const char* mil) {
  t.on(name, [mil](C& cv, const json& n) {
    Var* x = self(cv, n);
    Var* y;
    if (C::is_number(n, "other")) {
      DataType dt = C::dtype(x);
      // a SymInt (a size, maybe symbolic) is an integer
      bool integral = C::arg(n, "other")->contains("as_sym_int");
      if (!is_float(dt) && !integral && cv.number(n, "other", 0) != std::floor(cv.number(n, "other", 0))) {
        dt = DataType::Float32;
        x = cv.cast(x, dt);
      }
      y = cv.scalar_or_tensor(n, "other", dt);
    } else {
      y = cv.tensor(n, "other");
      DataType dt = C::promote(x, y);
      x = cv.cast(x, dt);
      y = cv.cast(y, dt);
    }
    if (C::dtype(x) == DataType::Bool) {  // MIL compares numbers only
      x = cv.cast(x, DataType::Int32);
      y = cv.cast(y, DataType::Int32);
    }
    cv.out(n, bin(cv, mil, x, y));
  });
}

void logical(OpTable& t, const char* name, const char* mil) {
  t.on(name, [mil](C& cv, const json& n) {
    Var* x = cv.cast(self(cv, n), DataType::Bool);
    Var* y = C::is_number(n, "other") ? cv.cs(cv.number(n, "other", 0), DataType::Bool)
                                       : cv.cast(cv.tensor(n, "other"), DataType::Bool);
    cv.out(n, bin(cv, mil, x, y));
  });
}

// A bitwise op of bool tensors (or a bool tensor and a number) as the logical op `mil`.
void bitwise(C& cv, const json& n, const char* mil) {
  Var* x = self(cv, n);
  if (C::dtype(x) != DataType::Bool) cv.fail(n, "bitwise ops are supported on bool tensors only");
  Var* y = C::is_number(n, "other") ? cv.cs(cv.number(n, "other", 0), DataType::Bool) : cv.cast(cv.tensor(n, "other"), DataType::Bool);
  cv.out(n, bin(cv, mil, x, y));
}

void bitwise_and(C& cv, const json& n) { bitwise(cv, n, "logical_and"); }

void bitwise_or(C& cv, const json& n) { bitwise(cv, n, "logical_or"); }

void bitwise_xor(C& cv, const json& n) { bitwise(cv, n, "logical_xor"); }

void logical_not(C& cv, const json& n) {
  cv.out(n, cv.op("logical_not", {C::a("x", cv.cast(self(cv, n), DataType::Bool))}));
}

// ~x: logical_not of a bool; of an integer, all bits flipped (-1 - x in two's complement, the
// type's maximum - x for an unsigned type), computed in int32 and cast back to a narrower type
void bitwise_not(C& cv, const json& n) {
  Var* x = self(cv, n);
  DataType dt = C::dtype(x);
  if (dt == DataType::Bool) {
    cv.out(n, cv.op("logical_not", {C::a("x", x)}));
    return;
  }
  double all_ones = 0;
  switch (dt) {
    case DataType::Int8:
    case DataType::Int16:
    case DataType::Int32:
    case DataType::Int64:
      all_ones = -1;
      break;
    case DataType::UInt8:
      all_ones = 255;
      break;
    case DataType::UInt16:
      all_ones = 65535;
      break;
    default:
      cv.fail(n, "bitwise_not needs a bool or integer tensor, got " + std::string(dtype_name(dt)));
  }
  Var* r = bin(cv, "sub", cv.cs(all_ones, DataType::Int32), cv.cast(x, DataType::Int32));
  if (dt != DataType::Int32 && dt != DataType::Int64) r = cv.cast(r, dt);
  cv.out(n, r);
}

// isin(elements, test_elements): compare every element with every test element
void isin_op(C& cv, const json& n) {
  Var* e;
  Var* te;
  if (C::has(n, "element")) {  // isin.Scalar_Tensor
    te = cv.tensor(n, "test_elements");
    e = cv.scalar_or_tensor(n, "element", C::dtype(te));
  } else {
    e = cv.tensor(n, "elements");
    te = C::is_number(n, "test_element") ? cv.scalar_or_tensor(n, "test_element", C::dtype(e))
                                          : cv.tensor(n, "test_elements");
  }
  DataType dt = C::promote(e, te);
  e = cv.cast(e, dt);
  te = cv.op("reshape", {C::a("x", cv.cast(te, dt)), C::aints32("shape", {-1})});
  Var* hits = count_true(cv, bin(cv, "equal", trailing_axis(cv, e), te));
  Var* r = bin(cv, "greater", hits, cv.cs(0, DataType::Int32));
  if (cv.bo(n, "invert", false)) r = cv.op("logical_not", {C::a("x", r)});
  cv.out(n, r);
}

}  // namespace

void register_logical(OpTable& t) {
  t.on({"aten.bitwise_and", "aten.__and__"}, bitwise_and);
  t.on({"aten.bitwise_or", "aten.__or__"}, bitwise_or);
  t.on({"aten.bitwise_xor", "aten.__xor__"}, bitwise_xor);
  t.on("aten.logical_not", logical_not);
  t.on("aten.bitwise_not", bitwise_not);
  t.on("aten.isin", isin_op);
  compare(t, "aten.eq", "equal");
  compare(t, "aten.ne", "not_equal");
  compare(t, "aten.lt", "less");
  compare(t, "aten.le", "less_equal");
  compare(t, "aten.gt", "greater");
  compare(t, "aten.ge", "greater_equal");
  logical(t, "aten.logical_and", "logical_and");
  logical(t, "aten.logical_or", "logical_or");
  logical(t, "aten.logical_xor", "logical_xor");
}

}  // namespace torch_detail
}  // namespace milkit
