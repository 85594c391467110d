// milkit/compose/arith.h - integer-style division, remainders and rounding built from MIL ops.
#pragma once

#include "milkit/compose/emitter.h"

namespace milkit {
namespace compose {

/// sign(x) * floor(|x|): rounds toward zero (x's dtype).
Var* trunc(Emitter& e, Var* x);
/// x / y rounded toward zero (C's integer division), in x's dtype: the quotient is computed in
/// fp32 (exact for integers below 2^24) and truncated.
Var* trunc_div(Emitter& e, Var* x, Var* y);
/// C's fmod: the remainder with the sign of the dividend, from MIL's mod (which has the sign of
/// the divisor) corrected where the signs of x and y differ and the remainder is not zero.
Var* fmod(Emitter& e, Var* x, Var* y);
/// Python's modulo (sign of the divisor): x - floor(x / y) * y (integers by floor_div).
Var* python_mod(Emitter& e, Var* x, Var* y);
/// x (fp32) rounded to the nearest integer, ties to even, from floor and comparisons (does not
/// rely on the rounding mode of MIL's round).
Var* round_half_even(Emitter& e, Var* x);

}  // namespace compose
}  // namespace milkit
