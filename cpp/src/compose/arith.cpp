// Division, remainders, rounding, index ranges and triangle masks from MIL ops.
#include "milkit/compose/arith.h"

namespace milkit {
namespace compose {

Var* trunc(Emitter& e, Var* x) {
  return e.bin("mul", e.un("sign", x), e.un("floor", e.un("abs", x)));
}

Var* trunc_div(Emitter& e, Var* x, Var* y) {
  DataType dt = Emitter::dtype(x);
  Var* q = e.bin("real_div", e.cast(x, DataType::Float32), e.cast(y, DataType::Float32));
  return e.cast(trunc(e, q), dt);
}

Var* fmod(Emitter& e, Var* x, Var* y) {
  Var* r = e.bin("mod", x, y);
  Var* zero = e.cs(0, Emitter::dtype(x));
  Var* differ = e.bin("logical_xor", e.bin("less", x, zero), e.bin("less", y, zero));
  Var* fix = e.bin("logical_and", differ, e.bin("not_equal", r, zero));
  return e.sel(fix, e.bin("sub", r, y), r);
}

Var* python_mod(Emitter& e, Var* x, Var* y) {
  Var* q = is_float(Emitter::dtype(x)) ? e.un("floor", e.bin("real_div", x, y))
                                       : e.bin("floor_div", x, y);
  return e.bin("sub", x, e.bin("mul", q, y));
}

Var* round_half_even(Emitter& e, Var* x) {
  Var* f = e.un("floor", x);
  Var* d = e.bin("sub", x, f);
  Var* odd = e.bin("sub", f, e.bin("mul", e.un("floor", e.bin("mul", f, e.f32(0.5))), e.f32(2)));
  Var* up =
      e.bin("logical_or", e.bin("greater", d, e.f32(0.5)),
            e.bin("logical_and", e.bin("equal", d, e.f32(0.5)), e.bin("equal", odd, e.f32(1))));
  return e.bin("add", f, e.cast(up, DataType::Float32));
}

Var* iota(Emitter& e, Var* n) {
  return e.op("range_1d",
              {Builder::arg("start", Value::scalar_int(DataType::Int32, 0)), Builder::arg("end", n),
               Builder::arg("step", Value::scalar_int(DataType::Int32, 1))});
}

Var* tri_mask(Emitter& e, Var* rows, Var* cols, Var* k, bool lower) {
  Var* i = e.expand_dims(iota(e, rows), {1});
  Var* j = e.expand_dims(iota(e, cols), {0});
  return e.bin(lower ? "less_equal" : "greater_equal", e.bin("sub", j, i), k);
}

}  // namespace compose
}  // namespace milkit
