// The plan's steps, shared by the planner (plan.cpp) and the frame that runs them (frame.cpp).
// Private to cpp/src/exec.
#pragma once

#include <climits>
#include <cstdint>
#include <memory>
#include <vector>

#include "fused_chain.h"
#include "milkit/exec/kernel.h"
#include "milkit/ir/ir.h"

namespace milkit {

class PackedWeight;

/// The ref of an absent optional input.
inline constexpr int32_t kAbsent = INT32_MIN;
/// Whether a ref names a constant of the plan (< 0) rather than a frame slot (>= 0).
inline bool is_const_ref(int32_t r) { return r < 0; }
/// The index in the plan's constants of a const ref.
inline int32_t const_index(int32_t r) { return ~r; }

/// One op of a block, resolved to its kernel, with the refs it reads and the slots it writes.
struct Step {
  const Operation* op = nullptr;
  const KernelDef* kd = nullptr;
  std::vector<int32_t> args;                // per flat arg: >= 0 frame slot, < 0 const (~index)
  std::vector<int32_t> outs;                // frame slots
  std::vector<DataType> out_dtypes;         // compute dtypes
  std::vector<int32_t> frees;               // frame slots released after the step
  std::vector<const PackedWeight*> packed;  // per flat arg: the packed weight it reads, or null
  std::vector<const PackedWeight*> widen;   // per flat arg: an in-place weight given widened
  std::vector<std::unique_ptr<BlockPlan>> blocks;
  /// Elementwise ops (reading only this op's output and each other's) that the kernel applies
  /// to its output: the step writes the last one's output slot, and they have no steps.
  std::unique_ptr<const FusedChain> fused;
  /// The op whose outputs the step writes: the last fused op, else the step's op.
  const Operation* last_op() const { return fused ? fused->ops.back() : op; }
  /// Per output: an fp16 output of an fp32-computing step that only fp32-computing steps of the
  /// same block read. The frame keeps it as an fp32 tensor holding fp16 values (rounded in place
  /// after the kernel), so neither a cast to fp16 after the step nor casts back before its
  /// readers run; the values are those of the fp16 tensor.
  std::vector<bool> wide;
};

/// A block's steps, with the slots of its inputs and the refs of its outputs.
struct BlockPlan {
  const Block* block = nullptr;
  std::vector<int32_t> inputs;  // frame slots of block inputs
  std::vector<Step> steps;
  std::vector<int32_t> outputs;  // refs
};

}  // namespace milkit
