// The frame of one plan run. Private to cpp/src/exec.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "milkit/exec/plan.h"
#include "milkit/exec/tensor.h"
#include "plan_steps.h"
#include "profile.h"

namespace milkit {

/// The tensors of one run of a plan: a slot per value, the symbol bindings, live and peak bytes.
/// Runs the plan's steps; kernels reach it through KernelCtx to run nested blocks.
class Frame {
 public:
  /// A frame for one run of `p`, with the state object (or nullptr).
  Frame(const Plan& p, State* st);

  /// The tensor of a ref (a slot or a constant); an undefined tensor for kAbsent.
  const Tensor& get(int32_t r) const;

  /// Binds (or checks) dim `dim_i` of `v`, whose type says `d`, against its actual size; `what`
  /// names the var in errors ("input", "block input").
  void bind_symbol(const Var* v, size_t dim_i, Dim d, int64_t actual, const char* what);

  // Binds a symbol, logging new bindings so a nested block's run can drop the ones made inside it
  // (a loop's shapes may change from one iteration to the next).
  void set_sym(const Symbol* s, int64_t v);

  /// Checks output `i` of a step against its declared type, binding new symbols.
  void check_output(const Step& st, size_t i, const Tensor& t);

  /// Runs a block's steps in order.
  void run_block(const BlockPlan& bp);

  /// Runs nested block `b` of a step on `inputs`; returns its outputs.
  std::vector<Tensor> run_nested(const Step& st, size_t b, const std::vector<Tensor>& inputs);

  const Plan& plan_;
  State* state_;
  std::vector<Tensor> slots_;
  std::unordered_map<const Symbol*, int64_t> env_;
  std::vector<const Symbol*> bound_log_;
  size_t live_ = 0, peak_ = 0;
  Profile* profile_ = nullptr;
};

}  // namespace milkit
