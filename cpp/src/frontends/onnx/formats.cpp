// ONNX's narrow element types that Core ML has no tensors of (bfloat16, the float8 family,
// float4 e2m1, float8 e8m0, int4 / uint4, int2 / uint2): their values are held exactly in fp32
// (floats) or int32 (integers). Tensors of these types are decoded into the holder, and every
// conversion into one of them rounds, saturates and wraps in the program itself (MIL ops), so the
// holder only ever holds values of the narrow type.
#include <cmath>
#include <cstring>
#include <limits>

#include "converter.h"
#include "milkit/types/error.h"

namespace milkit {
namespace onnx_detail {

using onnx::NodeProto;
using onnx::TensorProto;
using C = Converter;

namespace {

struct FloatFormat {
  int exp_bits, man_bits, bias;
  bool fnuz;     // no negative zero, NaN is 0x80, no infinities
  bool has_inf;  // IEEE-like infinities (e5m2, bf16)
  bool e4m3fn;   // S.1111.111 is NaN, no infinities
  double max;
};

// The narrow float format of ONNX element type `t`, or nullptr.
const FloatFormat* float_format(int t) {
  struct Entry {
    int type;
    FloatFormat format;
  };
  static const Entry formats[] = {
      {TensorProto::BFLOAT16, {8, 7, 127, false, true, false, 3.38953139e38}},
      {TensorProto::FLOAT8E4M3FN, {4, 3, 7, false, false, true, 448.0}},
      {TensorProto::FLOAT8E4M3FNUZ, {4, 3, 8, true, false, false, 240.0}},
      {TensorProto::FLOAT8E5M2, {5, 2, 15, false, true, false, 57344.0}},
      {TensorProto::FLOAT8E5M2FNUZ, {5, 2, 16, true, false, false, 57344.0}},
      {TensorProto::FLOAT4E2M1, {2, 1, 1, false, false, false, 6.0}},
  };
  for (const Entry& e : formats)
    if (e.type == t) return &e.format;
  return nullptr;
}

double decode_float(const FloatFormat& f, uint32_t bits) {
  int total = 1 + f.exp_bits + f.man_bits;
  uint32_t sign = (bits >> (total - 1)) & 1u;
  uint32_t e = (bits >> f.man_bits) & ((1u << f.exp_bits) - 1);
  uint32_t m = bits & ((1u << f.man_bits) - 1);
  double nan = std::numeric_limits<double>::quiet_NaN();
  if (f.fnuz && bits == (1u << (total - 1))) return nan;
  if (f.e4m3fn && e == 15 && m == 7) return nan;
  if (f.has_inf && e == (1u << f.exp_bits) - 1)
    return m ? nan
             : (sign ? -std::numeric_limits<double>::infinity()
                     : std::numeric_limits<double>::infinity());
  double v = e == 0 ? std::ldexp(static_cast<double>(m), 1 - f.bias - f.man_bits)
                    : std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -f.man_bits),
                                 static_cast<int>(e) - f.bias);
  return sign ? -v : v;
}

int int_bits(int t, bool* is_signed) {
  switch (t) {
    case TensorProto::INT4:
      *is_signed = true;
      return 4;
    case TensorProto::UINT4:
      *is_signed = false;
      return 4;
    case kInt2:
      *is_signed = true;
      return 2;
    case kUInt2:
      *is_signed = false;
      return 2;
    default:
      return 0;
  }
}

Var* binary(C& cv, const char* type, Var* x, Var* y) {
  return cv.op(type, {C::arg("x", x), C::arg("y", y)});
}
Var* sel(C& cv, Var* c, Var* a, Var* b) {
  return cv.op("select", {C::arg("cond", c), C::arg("a", a), C::arg("b", b)});
}

// floor(log2(a)) for positive finite fp32 `a`, exactly: log's rounding can miss the binade by
// one, so the estimate is corrected against 2^e.
Var* binade(C& cv, Var* a) {
  const DataType f32 = DataType::Float32;
  Var* e = cv.op("floor", {C::arg("x", binary(cv, "mul", cv.op("log", {C::arg("x", a)}),
                                              cv.cs(1.0 / std::log(2.0), f32)))});
  Var* p = cv.op("exp2", {C::arg("x", e)});
  e = binary(cv, "sub", e, cv.cast(binary(cv, "less", a, p), f32));
  return binary(cv, "add", e,
                cv.cast(binary(cv, "greater_equal", a, binary(cv, "mul", p, cv.cs(2, f32))), f32));
}

// float8 e8m0 (2^(E - 127), E in [0, 254], 255 is NaN) from |x|'s binade, rounded by
// round_mode as ONNX's reference does on fp32's bits: up when any fraction bit is set, down never,
// nearest on the guard bit (for subnormals: guard and a further bit).
Var* to_e8m0(C& cv, const NodeProto& n, Var* x, bool saturate) {
  DataType f32 = DataType::Float32;
  std::string mode = C::attr_string(n, "round_mode", "up");
  if (mode != "up" && mode != "down" && mode != "nearest")
    cv.fail(n, "round_mode must be up, down or nearest");
  Var* xf = cv.cast(x, f32);
  double inf = std::numeric_limits<double>::infinity(),
         nan = std::numeric_limits<double>::quiet_NaN();
  Var* a = cv.op("abs", {C::arg("x", xf)});
  Var* special = binary(cv, "logical_or", binary(cv, "not_equal", xf, xf),
                        binary(cv, "equal", a, cv.cs(inf, f32)));
  Var* ac = sel(cv, special, cv.cs(1, f32), a);
  Var* e = binade(cv, ac);
  Var* sub = binary(cv, "less", ac, cv.cs(std::ldexp(1.0, -126), f32));  // fp32 subnormal (or zero)
  Var* E = sel(cv, sub, cv.cs(0, f32), binary(cv, "add", e, cv.cs(127, f32)));
  // the fraction of the significand: normals a / 2^e - 1; subnormals a / 2^-126
  Var* frac = sel(cv, sub, binary(cv, "mul", ac, cv.cs(std::ldexp(1.0, 126), f32)),
                  binary(cv, "sub", binary(cv, "real_div", ac, cv.op("exp2", {C::arg("x", e)})),
                         cv.cs(1, f32)));
  Var* inc = nullptr;
  if (mode == "up")
    inc = binary(cv, "greater", frac, cv.cs(0, f32));
  else if (mode == "nearest")
    inc = sel(cv, sub, binary(cv, "greater", frac, cv.cs(0.5, f32)),
              binary(cv, "greater_equal", frac, cv.cs(0.5, f32)));
  if (inc) {
    if (saturate) inc = binary(cv, "logical_and", inc, binary(cv, "less", E, cv.cs(254, f32)));
    E = binary(cv, "add", E, cv.cast(inc, f32));
  }
  Var* r = cv.op("exp2", {C::arg("x", binary(cv, "sub", E, cv.cs(127, f32)))});
  r = sel(cv, binary(cv, "logical_or", special, binary(cv, "greater", E, cv.cs(254, f32))),
          cv.cs(nan, f32), r);
  cv.narrow_vars[r] = kFloat8E8M0;
  return r;
}

}  // namespace

bool is_narrow_type(int t) {
  bool s;
  return float_format(t) || int_bits(t, &s) || t == kFloat8E8M0;
}

std::optional<Value> decode_narrow(const TensorProto& t, const std::vector<int64_t>& shape,
                                   int64_t n, const std::string& what) {
  int et = t.data_type();
  if (!is_narrow_type(et) || et == TensorProto::BFLOAT16) return std::nullopt;
  bool sgn = false;
  int ib = int_bits(et, &sgn);
  int bits = ib ? ib : et == TensorProto::FLOAT4E2M1 ? 4 : 8;
  size_t nbytes = static_cast<size_t>((n * bits + 7) / 8);
  std::vector<uint8_t> bytes;
  if (t.data_location() == TensorProto::EXTERNAL)
    throw ValueError(what + ": external data of type " + onnx_type_name(et) + " is not supported");
  if (t.has_raw_data()) {
    if (t.raw_data().size() != nbytes)
      throw FormatError(what + ": raw_data holds " + std::to_string(t.raw_data().size()) +
                        " bytes, its shape (" + std::to_string(n) + " x " + onnx_type_name(et) +
                        ") needs " + std::to_string(nbytes));
    bytes.assign(t.raw_data().begin(), t.raw_data().end());
  } else {
    // int32_data: one byte (8-bit types: one value; packed types: the packed byte) per entry
    if (static_cast<size_t>(t.int32_data_size()) != nbytes)
      throw FormatError(what + ": int32_data holds " + std::to_string(t.int32_data_size()) +
                        " values, its shape needs " + std::to_string(nbytes));
    for (auto v : t.int32_data()) bytes.push_back(static_cast<uint8_t>(v));
  }
  auto field = [&](int64_t i) -> uint32_t {
    int64_t bit = i * bits;
    return (bytes[static_cast<size_t>(bit / 8)] >> (bit % 8)) & ((1u << bits) - 1);
  };
  if (ib) {
    std::vector<int64_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      int64_t x = field(i);
      if (sgn && x >= (int64_t(1) << (ib - 1))) x -= int64_t(1) << ib;
      v[static_cast<size_t>(i)] = x;
    }
    return Value::from_ints(DataType::Int32, shape, v);
  }
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b = field(i);
    if (et == kFloat8E8M0)
      v[static_cast<size_t>(i)] =
          b == 0xFF ? std::nan("") : std::ldexp(1.0, static_cast<int>(b) - 127);
    else
      v[static_cast<size_t>(i)] = decode_float(*float_format(et), b);
  }
  return Value::from_doubles(DataType::Float32, shape, v);
}

Var* to_narrow(C& cv, const NodeProto& n, Var* x, int t, bool saturate) {
  DataType f32 = DataType::Float32;
  bool sgn = false;
  if (int ib = int_bits(t, &sgn)) {
    // truncated toward zero and wrapped to the width (as a C cast through the wider integer)
    Var* xf = cv.cast(x, f32);
    Var* tr = is_float(C::dtype(x))
                  ? binary(cv, "mul", cv.op("sign", {C::arg("x", xf)}),
                           cv.op("floor", {C::arg("x", cv.op("abs", {C::arg("x", xf)}))}))
                  : xf;
    double span = std::ldexp(1.0, ib), off = sgn ? span / 2 : 0.0;
    Var* k =
        cv.op("floor", {C::arg("x", binary(cv, "real_div", binary(cv, "add", tr, cv.cs(off, f32)),
                                           cv.cs(span, f32)))});
    Var* r =
        cv.cast(binary(cv, "sub", tr, binary(cv, "mul", k, cv.cs(span, f32))), DataType::Int32);
    cv.narrow_vars[r] = t;
    return r;
  }
  if (t == kFloat8E8M0) return to_e8m0(cv, n, x, saturate);
  const FloatFormat* f = float_format(t);
  if (!f) cv.fail(n, "element type " + onnx_type_name(t) + " is not a narrow type");
  // the nearest value of the format (ties to even), in fp32: |x| scaled by the quantum of its
  // binade (the subnormal quantum below the smallest normal), rounded, scaled back
  Var* xf = cv.cast(x, f32);
  double inf = std::numeric_limits<double>::infinity(),
         nan = std::numeric_limits<double>::quiet_NaN();
  Var* a = cv.op("abs", {C::arg("x", xf)});
  Var* is_nan = binary(cv, "not_equal", xf, xf);
  Var* is_inf = binary(cv, "equal", a, cv.cs(inf, f32));
  Var* ac = sel(cv, is_inf, cv.cs(f->max, f32), a);
  bool sat = saturate && t != TensorProto::BFLOAT16;
  if (sat || t == TensorProto::FLOAT4E2M1)
    ac = binary(cv, "minimum", ac, cv.cs(f->max, f32));  // e2m1 always saturates
  Var* e = binade(cv, ac);
  e = binary(cv, "maximum", e, cv.cs(1 - f->bias, f32));
  Var* q = cv.op("exp2", {C::arg("x", binary(cv, "sub", e, cv.cs(f->man_bits, f32)))});
  Var* y = binary(cv, "real_div", ac, q);
  Var* fl = cv.op("floor", {C::arg("x", y)});
  Var* d = binary(cv, "sub", y, fl);
  Var* odd = binary(
      cv, "sub", fl,
      binary(cv, "mul", cv.op("floor", {C::arg("x", binary(cv, "mul", fl, cv.cs(0.5, f32)))}),
             cv.cs(2, f32)));
  Var* up = binary(cv, "logical_or", binary(cv, "greater", d, cv.cs(0.5, f32)),
                   binary(cv, "logical_and", binary(cv, "equal", d, cv.cs(0.5, f32)),
                          binary(cv, "equal", odd, cv.cs(1, f32))));
  Var* r = binary(cv, "mul", binary(cv, "add", fl, cv.cast(up, f32)), q);
  // past the largest finite value: saturated, infinite, or NaN as the format has it
  double over = sat || t == TensorProto::FLOAT4E2M1 ? f->max : f->has_inf ? inf : nan;
  Var* big = binary(cv, "logical_or", is_inf, binary(cv, "greater", r, cv.cs(f->max, f32)));
  if (t == TensorProto::BFLOAT16)
    big = binary(cv, "logical_or", is_inf, binary(cv, "equal", r, cv.cs(inf, f32)));
  r = sel(cv, big, cv.cs(over, f32), r);
  Var* neg = binary(cv, "less", xf, cv.cs(0, f32));
  if (f->fnuz) neg = binary(cv, "logical_and", neg, binary(cv, "not_equal", r, cv.cs(0, f32)));
  r = sel(cv, neg, cv.op("mul", {C::arg("x", r), C::arg("y", cv.cs(-1, f32))}), r);
  // NaN stays NaN (e2m1 has none: ml_dtypes, which ONNX's reference uses, gives -0)
  r = sel(cv, is_nan, cv.cs(t == TensorProto::FLOAT4E2M1 ? -0.0 : nan, f32), r);
  cv.narrow_vars[r] = t;
  return r;
}

}  // namespace onnx_detail
}  // namespace milkit
