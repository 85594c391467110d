// milkit/compose/einsum.h - Einstein summation by transposes, reductions and matmuls.
#pragma once

#include <string>
#include <vector>

#include "milkit/compose/emitter.h"

namespace milkit {
namespace compose {

/// Einstein summation of `operands` by `equation` ("ij,jk->ik"; spaces ignored): letters of
/// either case, one "..." per term (right-aligned across operands, as broadcasting is), a letter
/// repeated within one term (that operand's diagonal: times an identity, summed; known equal
/// sizes), and an implicit output when there is no "->" (the ellipsis dims, then the letters used
/// once, in ASCII order). Each operand first sums out the letters no one else needs; the operands
/// are then contracted left to right, each pair by one batched matmul over [batch, M, K] x
/// [batch, K, N] (shapes known or read at run time), or by a broadcast multiply when they share
/// no summed letter. Operands are expected in one dtype (the caller casts).
Var* einsum(Emitter& e, const std::string& equation, const std::vector<Var*>& operands);

}  // namespace compose
}  // namespace milkit
