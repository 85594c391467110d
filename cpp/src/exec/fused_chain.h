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
    bool ext = false;        ///< the other operand is the chain's tensor `ext_var` (a residual)
    bool swap = false;       ///< the chain value is the op's second operand
    bool round = true;       ///< fp16 program: the result needs rounding to fp16
    float c = 0, c2 = 0;     ///< the scalar operand; sigmoid_hard's alpha and beta
  };
  std::vector<const Operation*> ops;  ///< the fused ops in order
  std::vector<Link> links;            ///< one per op
  bool half = false;                  ///< fp16 program: round the head and the results
  bool reads_head = false;            ///< some link reads the head as its other operand
  /// A tensor of the head's type that links read as their other operand (a residual branch
  /// added to the conv's output), element for element; null when none does. The step reads it
  /// as its argument `ext_arg`, after the op's own.
  const Var* ext_var = nullptr;
  size_t ext_arg = 0;

  /// Applies the chain in place to the n values at `p` (the conv's output), across threads; `e`:
  /// the n values of ext_var at the same offsets (null when the chain reads none).
  void apply(float* p, int64_t n, const float* e = nullptr) const;
  /// Applies the chain in place to the n values at `p` on the calling thread (a kernel's tile).
  void apply_here(float* p, int64_t n, const float* e = nullptr) const;
  /// The fused op types joined by '+' (for the profile).
  std::string describe() const;
};

/// A chain bound to one run of its conv: where the conv's output starts and where the values of
/// the chain's ext_var start (or null), so that a tile of the output finds its operands.
struct ChainCall {
  const FusedChain* ch = nullptr;
  const float* out = nullptr;
  const float* ext = nullptr;
  /// The chain over the n values at p (within the output), on the calling thread.
  void here(float* p, int64_t n) const { ch->apply_here(p, n, ext ? ext + (p - out) : nullptr); }
  /// The chain over the n values at p (within the output), across threads.
  void all(float* p, int64_t n) const { ch->apply(p, n, ext ? ext + (p - out) : nullptr); }
};

/// Fuses into each conv step of `bp` the longest chain of elementwise ops that directly follow it
/// and read only its output, the previous op's and scalar constants of `consts` (relu, relu6,
/// silu, sigmoid, sigmoid_hard; add, sub, mul, real_div, maximum, minimum of the chain value and
/// the head, a scalar, or one other tensor of the head's type: a residual), when no other op
/// reads the head or the intermediate results and all have the head's type. The chain's ops
/// lose their steps; the conv's step reads the other tensor as an argument after its own.
void fuse_chains(BlockPlan& bp, const std::vector<Tensor>& consts);

}  // namespace milkit
