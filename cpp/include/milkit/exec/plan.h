// milkit/exec/plan.h - the interpreter: a plan per function, made once and run many times.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "milkit/exec/kernel.h"
#include "milkit/exec/tensor.h"
#include "milkit/ir/ir.h"
#include "milkit/symbolic/eval.h"  // eval_dim, which plans use to bind symbols

namespace milkit {

/// The states of a stateful (iOS18) model: one tensor per state input, by input name. Made by
/// Plan::make_state (zero-filled), read and written by read_state / write_state /
/// coreml_update_state. A state is not safe to share between concurrent runs.
class State {
 public:
  /// The tensor of a state input; throws ValueError naming it when unknown.
  const Tensor& get(const std::string& name) const;
  /// Replaces a state's tensor (dtype and shape must match the state's).
  void set(const std::string& name, const Tensor& t);
  /// State names, sorted.
  std::vector<std::string> names() const;
  /// Whether a state of that name exists.
  bool contains(const std::string& name) const { return values_.count(name) != 0; }

 private:
  friend class Plan;
  std::map<std::string, Tensor> values_;
};

struct BlockPlan;
class PackedWeight;

/// A function compiled for execution: every op resolved to a kernel, constants turned into
/// tensors that read weights in place, each value's last use computed so its buffer is freed
/// right after it (peak memory is the largest live set). Compressed weights (constexpr ops, and
/// casts over them) read only as the weight of linear, matmul (y), conv or conv_transpose stay
/// packed and are decompressed tile by tile inside those kernels; other constexpr outputs are
/// decompressed once, when the plan is made.
/// Symbolic dims are bound from the input shapes at each run. A plan is immutable: several
/// threads may run it at once.
class Plan {
 public:
  /// Plans `fn` with the kernels of `kernels` (default: every registered kernel); throws
  /// ValueError listing every op that has no kernel. With `packed_weights` false (or the
  /// environment variable MILKIT_DENSE_WEIGHTS=1) every constexpr op is decompressed when the
  /// plan is made, as a reference for the packed path (same numbers, more memory).
  explicit Plan(std::shared_ptr<const Function> fn, const KernelRegistry* kernels = nullptr,
                bool packed_weights = true);
  ~Plan();
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  /// Runs the function. `inputs` maps input names to tensors of the declared dtypes; a missing or
  /// unknown name, a wrong rank, dtype or dim (outside its symbol's range, or inconsistent with
  /// another input binding the same symbol) raises ValueError naming the input. Returns the
  /// outputs by name, in order.
  std::vector<std::pair<std::string, Tensor>> run(const std::map<std::string, Tensor>& inputs,
                                                  State* state = nullptr) const;
  /// A fresh, zero-filled state object for the function's state inputs.
  std::shared_ptr<State> make_state() const;
  /// The function planned.
  const Function& function() const { return *fn_; }
  /// Names of the non-state inputs.
  std::vector<std::string> input_names() const;
  /// Whether the function has state inputs.
  bool has_states() const;
  /// Peak bytes of live tensors (excluding constants) over the last run, for diagnostics.
  size_t last_peak_bytes() const { return last_peak_.load(); }
  /// Bytes of constants the plan made (decompressed constexpr ops, fp32 copies of fp16
  /// weights read by fp32-computing kernels); weights read in place are not counted.
  size_t const_bytes() const { return const_bytes_; }
  /// Bytes of the weights the plan keeps packed (packed indices, quantized data, sparse masks and
  /// values, their tables), whether borrowed from the weight file or packed by the plan.
  size_t packed_weight_bytes() const { return packed_bytes_; }
  /// Bytes the weights kept packed would take decompressed, in their dtypes.
  size_t packed_weight_dense_bytes() const { return packed_dense_bytes_; }
  /// Number of weights kept packed.
  size_t packed_weight_count() const { return packed_.size(); }
  /// Number of large fp16 weights read in place (from the weight file) by fp32-computing
  /// kernels: products and convolutions widen them panel by panel, other kernels get a widened
  /// copy from the process's weight cache (see weight_cache_bytes).
  size_t in_place_weight_count() const { return in_place_.size(); }
  /// Bytes of the weights read in place, in their dtype.
  size_t in_place_weight_bytes() const { return in_place_bytes_; }

 private:
  friend class Frame;
  std::shared_ptr<const Function> fn_;
  std::unique_ptr<BlockPlan> body_;
  std::vector<Tensor> consts_;
  size_t num_slots_ = 0;
  size_t const_bytes_ = 0;
  std::vector<std::shared_ptr<const PackedWeight>> packed_;
  size_t packed_bytes_ = 0, packed_dense_bytes_ = 0;
  std::vector<std::shared_ptr<const PackedWeight>> in_place_;
  size_t in_place_bytes_ = 0;
  mutable std::atomic<size_t> last_peak_{0};
};

/// Bytes of fp32 weight copies the process's weight cache holds now. Kernels that need a whole
/// packed or in-place weight in fp32 (convolutions, other readers of a large constant, products
/// of 5 rows or more when gemm_kernel() is "blas") widen it once and keep it while the cache's
/// total stays within MILKIT_WEIGHT_CACHE_MB (read at each use; default a quarter of the machine's
/// memory, 0 keeps nothing), dropping the least recently used first.
size_t weight_cache_bytes();

/// The kernel of products by a weight (linear, matmul) of 5 rows or more: "panels" (milkit's
/// own, packing the weight per call 48 columns at a time, fp16 and compressed weights decoded
/// while packing) or "blas" (OpenBLAS over an fp32 weight: a CPU without AVX2 and FMA, or
/// MILKIT_GEMM=blas).
std::string gemm_kernel();

}  // namespace milkit
