// Elementwise ops the plan runs inside the step of the conv whose output they read. Private to
// cpp/src/exec.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "milkit/exec/tensor.h"
#include "milkit/ir/ir.h"

namespace milkit {

struct BlockPlan;

/// A chain of elementwise ops over one conv's output: each reads the previous one's result (the
/// first reads the conv's output, the head) and, besides, the head or a scalar constant. The
/// conv kernel applies the chain to its output in place while it is in cache; the step then
/// writes the last op's output. Results are those of the ops' own kernels, bit for bit: each
/// link computes as its kernel does, and in an fp16 program the head and each result are rounded
/// to fp16 (where the op's kernel output would be). A chain of no links in an fp16 program
/// only rounds: a conv kernel rounds its fp16 output with it, tile by tile.
struct FusedChain {
  /// What a link computes.
  enum class Kind : uint8_t {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
    Relu,
    Relu6,
    Silu,
    Sigmoid,
    HardSigmoid
  };
  /// One op of the chain.
  struct Link {
    Kind kind = Kind::Relu;  ///< the op
    bool head = false;       ///< the other operand is the head (else the scalar `c`)
    bool swap = false;       ///< the chain value is the op's second operand
    bool round = true;       ///< fp16 program: the result needs rounding to fp16
    float c = 0, c2 = 0;     ///< the scalar operand; sigmoid_hard's alpha and beta
  };
  std::vector<const Operation*> ops;  ///< the fused ops in order
  std::vector<Link> links;            ///< one per op
  bool half = false;                  ///< fp16 program: round the head and the results
  bool reads_head = false;            ///< some link reads the head as its other operand

  /// Applies the chain in place to the n values at `p` (the conv's output), across threads.
  void apply(float* p, int64_t n) const;
  /// Applies the chain in place to the n values at `p` on the calling thread (a kernel's tile).
  void apply_here(float* p, int64_t n) const;
  /// The fused op types joined by '+' (for the profile).
  std::string describe() const;
};

/// Fuses into each conv step of `bp` the longest chain of elementwise ops that directly follow it
/// and read only its output, the previous op's and scalar constants of `consts` (relu, relu6,
/// silu, sigmoid, sigmoid_hard; add, sub, mul, real_div, maximum, minimum of the chain value and
/// the head or a scalar), when no other op reads the head or the intermediate results and all
/// have the head's type. The chain's ops lose their steps.
void fuse_chains(BlockPlan& bp, const std::vector<Tensor>& consts);

}  // namespace milkit
