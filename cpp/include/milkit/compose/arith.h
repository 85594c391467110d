// milkit/compose/arith.h - integer-style division, remainders, rounding, index ranges and
// triangle masks built from MIL ops.
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
/// [0, 1, ..., n - 1] (int32) for an int32 scalar n (a const or a value known at run time).
Var* iota(Emitter& e, Var* n);
/// The [rows, cols] bool mask of a matrix triangle: col - row <= k (lower, tril) or >= k (upper,
/// triu); rows, cols and k are int32 scalars, consts or values known at run time.
Var* tri_mask(Emitter& e, Var* rows, Var* cols, Var* k, bool lower);

}  // namespace compose
}  // namespace milkit
