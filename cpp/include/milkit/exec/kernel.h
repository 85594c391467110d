// milkit/exec/kernel.h - kernels: the run-time implementation of each op, and their registry.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "milkit/exec/tensor.h"
#include "milkit/ir/ir.h"
#include "milkit/types/error.h"

namespace milkit {

class State;
class KernelCtx;
class PackedWeight;
struct FusedChain;

/// A kernel computes an op's outputs from its input tensors.
using KernelFn = void (*)(KernelCtx&);

/// How the executor hands a kernel its tensors.
struct KernelDef {
  KernelFn fn = nullptr;  ///< The kernel.
  /// When true the op computes in fp32: fp16 inputs arrive converted to fp32, outputs the op
  /// declares fp16 are allocated as fp32 and rounded to fp16 after the kernel (the reference
  /// behaviour for fp16 programs). When false the kernel sees the dtypes as they are (data
  /// movement ops, cast, comparisons that must be exact).
  bool float_compute = true;
};

/// What a kernel sees: the op, its input tensors by schema input, output allocation, the
/// state object, and nested-block execution for control flow.
class KernelCtx {
 public:
  /// The op being run.
  const Operation& op() const { return *op_; }
  /// Whether the named input is present.
  bool has(std::string_view name) const;
  /// The single tensor of a named input; throws if absent.
  const Tensor& in(std::string_view name) const;
  /// Tensor of schema input i (first element).
  const Tensor& in(size_t i) const;
  /// The packed weight the plan keeps for a named input (a constexpr chain read by a kernel
  /// that decompresses it while computing), or nullptr when the input is a tensor.
  const PackedWeight* packed(std::string_view name) const;
  /// The elementwise ops the plan fused into this op (a chain reading only this op's output):
  /// the kernel applies them to output 0, which stands for the last one's output (in an fp16
  /// program rounded to fp16 values). nullptr when there are none.
  const FusedChain* fused() const;
  /// The tensor the fused chain reads besides output 0 (a residual added to it, in the frame's
  /// compute dtype), or nullptr when it reads none.
  const Tensor* fused_operand() const;
  /// All tensors of a tuple input.
  std::vector<const Tensor*> tuple(std::string_view name) const;
  /// The compile-time value of a named input, or nullptr (for string and const parameters).
  const Value* value(std::string_view name) const;
  /// A parameter as integers (from the compile-time value or the run-time tensor).
  std::vector<int64_t> ints(std::string_view name) const;
  /// A scalar integer parameter.
  int64_t int_(std::string_view name) const;
  /// An integer parameter with a default when absent.
  int64_t int_or(std::string_view name, int64_t def) const;
  /// A scalar float parameter.
  double float_(std::string_view name) const;
  /// A float parameter with a default when absent.
  double float_or(std::string_view name, double def) const;
  /// A scalar bool parameter.
  bool bool_(std::string_view name) const;
  /// A bool parameter with a default when absent.
  bool bool_or(std::string_view name, bool def) const;
  /// A string parameter (compile-time).
  std::string str(std::string_view name) const;
  /// A string parameter with a default when absent.
  std::string str_or(std::string_view name, const std::string& def) const;
  /// Number of outputs of the op.
  size_t num_outputs() const { return outs_->size(); }
  /// The dtype output i is computed in (fp32 for fp16 outputs of float-compute ops).
  DataType out_dtype(size_t i = 0) const;
  /// The dtype output i has in the program.
  DataType declared_dtype(size_t i = 0) const;
  /// Allocates output i with the compute dtype and `shape`.
  Tensor& alloc(size_t i, std::vector<int64_t> shape);
  /// Sets output i to an existing tensor (a view, an input passed through).
  void set(size_t i, Tensor t);
  /// Whether output 0 is computed in fp32 for an fp16 output: a kernel may then round its values
  /// to fp16 itself (round_to_half) where it computes them, and say so with set_rounded().
  bool rounds_output() const;
  /// Tells the executor that the kernel rounded its fp32 outputs declared fp16 to fp16 values
  /// itself: they are not rounded again.
  void set_rounded() { rounded_ = true; }
  /// The state object of this run; throws when the run has none.
  State& state() const;
  /// Runs nested block `b` of the op with `inputs` bound to its block inputs; returns its outputs.
  std::vector<Tensor> run_block(size_t b, const std::vector<Tensor>& inputs);
  /// Throws ValueError naming the op.
  [[noreturn]] void fail(const std::string& msg) const;
  /// Throws IndexError naming the op.
  [[noreturn]] void index_error(const std::string& msg) const;
  /// Normalizes an axis into [0, rank); fails naming the op.
  int64_t axis(int64_t a, int64_t rank) const;

 private:
  friend class Frame;
  const Operation* op_ = nullptr;
  const std::vector<const Tensor*>* args_ = nullptr;  // flat, op->starts() indexing
  std::vector<Tensor>* outs_ = nullptr;
  const std::vector<DataType>* out_dtypes_ = nullptr;
  State* state_ = nullptr;
  void* frame_ = nullptr;
  const void* step_ = nullptr;
  bool rounded_ = false;
};

/// The kernels of every op, by op type.
class KernelRegistry {
 public:
  /// The process-wide registry (filled on first use).
  static const KernelRegistry& instance();
  /// Registers the kernel of an op type (every opset version shares it).
  void add(const std::string& op_type, KernelDef def);
  /// The kernel of an op type, or nullptr.
  const KernelDef* find(std::string_view op_type) const;
  /// Registered op types, sorted.
  std::vector<std::string> names() const;

 private:
  std::map<std::string, KernelDef, std::less<>> kernels_;
};

}  // namespace milkit
