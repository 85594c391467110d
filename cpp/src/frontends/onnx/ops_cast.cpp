// ONNX operators: Identity, Cast, CastLike, BitCast.
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "milkit/compose/arith.h"
#include "milkit/compose/sampling.h"
#include "milkit/compose/scan.h"
#include "milkit/compose/windows.h"
#include "ops_common.h"

namespace milkit {
namespace onnx_detail {

namespace {

void identity(C& cv, const NodeProto& n) { cv.out(n, 0, cv.in(n, 0)); }

void cast(C& cv, const NodeProto& n) {
  int to = static_cast<int>(C::attr_int(n, "to", 0));
  auto dt = mil_dtype(to);
  if (!dt) cv.fail(n, "cast to " + onnx_type_name(to) + " is not supported");
  Var* x = cv.in(n, 0);
  if (is_narrow_type(to) && cv.elem_type(n, 0) != to) {
    cv.out(n, 0, to_narrow(cv, n, x, to, C::attr_int(n, "saturate", 1) != 0));
    return;
  }
  cv.out(n, 0, C::dtype(x) == *dt ? x : cv.cast(x, *dt));
}

void cast_like(C& cv, const NodeProto& n) {
  Var* x = cv.in(n, 0);
  int to = cv.elem_type(n, 1);
  if (is_narrow_type(to) && cv.elem_type(n, 0) != to) {
    cv.out(n, 0, to_narrow(cv, n, x, to, C::attr_int(n, "saturate", 1) != 0));
    return;
  }
  DataType dt = C::dtype(cv.in(n, 1));
  cv.out(n, 0, C::dtype(x) == dt ? x : cv.cast(x, dt));
}

// The IEEE layouts BitCast reinterprets (fp32, fp16): exponent bias and mantissa bits.
struct Ieee {
  int bias, man, width;
};

std::optional<Ieee> ieee(int t) {
  if (t == TensorProto::FLOAT) return Ieee{127, 23, 32};
  if (t == TensorProto::FLOAT16) return Ieee{15, 10, 16};
  return std::nullopt;
}

// The bit pattern of x (a float of layout f) as a signed integer of f's width, by arithmetic:
// sign, binade (log2, corrected) and significand.
Var* float_bits(C& cv, Var* x, const Ieee& f) {
  DataType f32 = DataType::Float32, i32 = DataType::Int32;
  Var* xf = cv.cast(x, f32);
  Var* a = cv.op("abs", {C::arg("x", xf)});
  double inf = std::numeric_limits<double>::infinity();
  Var* nan = binary(cv, "not_equal", xf, xf);
  Var* isinf = binary(cv, "equal", a, fconst(cv, inf));
  Var* ac = cv.em.sel(binary(cv, "logical_or", nan, isinf), fconst(cv, 1), a);
  Var* e = cv.op("floor", {C::arg("x", binary(cv, "mul", cv.op("log", {C::arg("x", ac)}),
                                              fconst(cv, 1.0 / std::log(2.0))))});
  Var* p = cv.op("exp2", {C::arg("x", e)});
  e = binary(cv, "sub", e, cv.cast(binary(cv, "less", ac, p), f32));
  e = binary(cv, "add", e,
             cv.cast(binary(cv, "greater_equal", ac, binary(cv, "mul", p, fconst(cv, 2))), f32));
  Var* sub = binary(cv, "less", ac, fconst(cv, std::ldexp(1.0, 1 - f.bias)));
  Var* E = cv.em.sel(sub, fconst(cv, 0), binary(cv, "add", e, fconst(cv, f.bias)));
  // subnormals: ac / 2^(1 - bias - man), in two exact steps (2^149 is past fp32's range)
  Var* M = cv.em.sel(
      sub,
      binary(cv, "mul", binary(cv, "mul", ac, fconst(cv, std::ldexp(1.0, f.bias - 1))),
             fconst(cv, std::ldexp(1.0, f.man))),
      binary(cv, "mul",
             binary(cv, "sub", binary(cv, "real_div", ac, cv.op("exp2", {C::arg("x", e)})),
                    fconst(cv, 1)),
             fconst(cv, std::ldexp(1.0, f.man))));
  double emax = std::ldexp(1.0, f.width - 1 - f.man) - 1;  // all-ones exponent
  E = cv.em.sel(binary(cv, "logical_or", nan, isinf), fconst(cv, emax), E);
  M = cv.em.sel(isinf, fconst(cv, 0), cv.em.sel(nan, fconst(cv, std::ldexp(1.0, f.man - 1)), M));
  Var* bits =
      binary(cv, "add", binary(cv, "mul", cv.cast(E, i32), cv.cs(std::ldexp(1.0, f.man), i32)),
             cv.cast(M, i32));
  // the sign bit: the top bit of the signed integer
  Var* neg =
      binary(cv, "logical_or", binary(cv, "less", xf, fconst(cv, 0)),
             binary(cv, "logical_and", binary(cv, "equal", xf, fconst(cv, 0)),
                    binary(cv, "less", binary(cv, "real_div", fconst(cv, 1), xf), fconst(cv, 0))));
  return binary(cv, "add", bits,
                cv.em.sel(neg, cv.cs(-std::ldexp(1.0, f.width - 1), i32), cv.cs(0, i32)));
}

// The float of layout f whose bit pattern is the integer x (of f's width, signed or not).
Var* bits_float(C& cv, Var* x, const Ieee& f) {
  DataType f32 = DataType::Float32, i32 = DataType::Int32;
  Var* xi = cv.cast(x, i32);
  Var* neg = binary(cv, "less", xi, cv.cs(0, i32));
  double top = std::ldexp(1.0, f.width - 1);
  // the bits below the sign: x + 2^(w-1) for a negative (signed) x, x - 2^(w-1) for a large
  // unsigned one
  Var* u = cv.em.sel(neg, binary(cv, "sub", xi, cv.cs(-top, i32)), xi);
  if (f.width < 32) {  // an unsigned pattern past the sign bit (int32 cannot hold one)
    Var* big = binary(cv, "greater_equal", u, cv.cs(top, i32));
    u = cv.em.sel(big, binary(cv, "sub", u, cv.cs(top, i32)), u);
    neg = binary(cv, "logical_or", neg, big);
  }
  Var* E = binary(cv, "floor_div", u, cv.cs(std::ldexp(1.0, f.man), i32));
  Var* M =
      cv.cast(binary(cv, "sub", u, binary(cv, "mul", E, cv.cs(std::ldexp(1.0, f.man), i32))), f32);
  Var* Ef = cv.cast(E, f32);
  double emax = std::ldexp(1.0, f.width - 1 - f.man) - 1;
  Var* normal = binary(
      cv, "mul",
      binary(cv, "add", fconst(cv, 1), binary(cv, "mul", M, fconst(cv, std::ldexp(1.0, -f.man)))),
      cv.op("exp2", {C::arg("x", binary(cv, "sub", Ef, fconst(cv, f.bias)))}));
  Var* subn = binary(cv, "mul", M, fconst(cv, std::ldexp(1.0, 1 - f.bias - f.man)));
  Var* v = cv.em.sel(binary(cv, "equal", Ef, fconst(cv, 0)), subn, normal);
  Var* special = cv.em.sel(binary(cv, "equal", M, fconst(cv, 0)),
                           fconst(cv, std::numeric_limits<double>::infinity()),
                           fconst(cv, std::numeric_limits<double>::quiet_NaN()));
  v = cv.em.sel(binary(cv, "equal", Ef, fconst(cv, emax)), special, v);
  return cv.em.sel(neg, binary(cv, "mul", v, fconst(cv, -1)), v);
}

void bit_cast(C& cv, const NodeProto& n) {
  int from = cv.elem_type(n, 0), to = static_cast<int>(C::attr_int(n, "to", 0));
  Var* x = cv.in(n, 0);
  auto width = [](int t) -> int {
    switch (t) {
      case TensorProto::BOOL:
      case TensorProto::INT8:
      case TensorProto::UINT8:
        return 8;
      case TensorProto::INT16:
      case TensorProto::UINT16:
      case TensorProto::FLOAT16:
      case TensorProto::BFLOAT16:
        return 16;
      case TensorProto::INT32:
      case TensorProto::UINT32:
      case TensorProto::FLOAT:
        return 32;
      default:
        return 64;
    }
  };
  if (!from) cv.fail(n, "the input's element type must be known");
  if (width(from) != width(to)) cv.fail(n, "the element types must have the same width");
  if (width(from) == 64)
    cv.fail(n, "64-bit types are held in 32 bits: their bit patterns cannot be reinterpreted");
  auto fi = ieee(from), ti = ieee(to);
  if (is_narrow_type(from) || is_narrow_type(to))
    cv.fail(n, "bfloat16 bit patterns are not supported");
  DataType i32 = DataType::Int32;
  if (fi && ti) return cv.out(n, 0, x);
  if (fi) x = float_bits(cv, x, *fi);
  if (ti) return cv.out(n, 0, cv.cast(bits_float(cv, x, *ti), *mil_dtype(to)));
  // integer to integer of one width: wrapped to the target's signedness
  int w = width(to);
  bool to_signed = to == TensorProto::INT8 || to == TensorProto::INT16 || to == TensorProto::INT32;
  Var* xi = cv.cast(x, i32);
  double span = std::ldexp(1.0, w);
  if (to == TensorProto::BOOL) return cv.out(n, 0, binary(cv, "not_equal", xi, cv.cs(0, i32)));
  if (to_signed && w < 32)
    xi = cv.em.sel(binary(cv, "greater_equal", xi, cv.cs(span / 2, i32)),
                   binary(cv, "sub", xi, cv.cs(span, i32)), xi);
  if (!to_signed) {
    if (w == 32) cv.fail(n, "uint32 values past 2^31 - 1 cannot be held in int32");
    xi = cv.em.sel(binary(cv, "less", xi, cv.cs(0, i32)), binary(cv, "add", xi, cv.cs(span, i32)),
                   xi);
  }
  cv.out(n, 0, xi);
}

}  // namespace

void register_cast(OpTable& t) {
  t.on("Identity", 1, identity);
  t.on("Cast", 1, cast);
  t.on("CastLike", 1, cast_like);
  t.on("BitCast", 1, bit_cast);
}

}  // namespace onnx_detail
}  // namespace milkit
