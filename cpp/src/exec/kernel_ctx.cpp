// KernelCtx: what a kernel sees of the op it runs (inputs, attributes, outputs, state, blocks).
#include <string>
#include <string_view>
#include <vector>

#include "frame.h"
#include "milkit/exec/kernel.h"
#include "milkit/ops/registry.h"
#include "milkit/types/error.h"
#include "plan_steps.h"

namespace milkit {

bool KernelCtx::has(std::string_view name) const {
  int i = op_->input_index(name);
  return i >= 0 && !op_->input(static_cast<size_t>(i)).empty();
}

const Tensor& KernelCtx::in(size_t i) const {
  const auto& st = op_->starts();
  if (i + 1 >= st.size() || st[i] == st[i + 1]) fail("input " + std::to_string(i) + " is absent");
  const Tensor* t = (*args_)[st[i]];
  if (!t || !t->defined())
    fail("input '" + op_->schema().inputs[i].name + "' has no run-time tensor");
  return *t;
}

const Tensor& KernelCtx::in(std::string_view name) const {
  int i = op_->input_index(name);
  if (i < 0) fail("has no input named '" + std::string(name) + "'");
  if (op_->input(static_cast<size_t>(i)).empty())
    fail("input '" + std::string(name) + "' is absent");
  return in(static_cast<size_t>(i));
}

const FusedChain* KernelCtx::fused() const {
  return step_ ? static_cast<const Step*>(step_)->fused.get() : nullptr;
}

const Tensor* KernelCtx::fused_operand() const {
  const FusedChain* ch = fused();
  if (!ch || !ch->ext_var || !args_ || ch->ext_arg >= args_->size()) return nullptr;
  return (*args_)[ch->ext_arg];
}

const PackedWeight* KernelCtx::packed(std::string_view name) const {
  int i = op_->input_index(name);
  if (i < 0 || !step_) return nullptr;
  const auto& st = op_->starts();
  const Step& step = *static_cast<const Step*>(step_);
  if (st[i] == st[i + 1] || step.packed.size() <= st[i]) return nullptr;
  return step.packed[st[i]];
}

std::vector<const Tensor*> KernelCtx::tuple(std::string_view name) const {
  int i = op_->input_index(name);
  if (i < 0) fail("has no input named '" + std::string(name) + "'");
  const auto& st = op_->starts();
  std::vector<const Tensor*> r;
  for (uint32_t k = st[i]; k < st[i + 1]; ++k) r.push_back((*args_)[k]);
  return r;
}

const Value* KernelCtx::value(std::string_view name) const {
  Var* v = op_->input1(name);
  return v && v->value() && !v->value()->is_symbolic() ? v->value().get() : nullptr;
}

std::vector<int64_t> KernelCtx::ints(std::string_view name) const {
  if (const Value* v = value(name)) return v->to_ints();
  const Tensor& t = in(name);
  std::vector<int64_t> r(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) r[i] = static_cast<int64_t>(t.get(i));
  return r;
}

int64_t KernelCtx::int_(std::string_view name) const {
  auto v = ints(name);
  if (v.size() != 1) fail("input '" + std::string(name) + "' must be a scalar");
  return v[0];
}

int64_t KernelCtx::int_or(std::string_view name, int64_t def) const {
  return has(name) ? int_(name) : def;
}

double KernelCtx::float_(std::string_view name) const {
  if (const Value* v = value(name)) {
    if (v->numel() != 1) fail("input '" + std::string(name) + "' must be a scalar");
    return v->as_double(0);
  }
  const Tensor& t = in(name);
  if (t.numel() != 1) fail("input '" + std::string(name) + "' must be a scalar");
  return t.get(0);
}

double KernelCtx::float_or(std::string_view name, double def) const {
  return has(name) ? float_(name) : def;
}

bool KernelCtx::bool_(std::string_view name) const { return float_(name) != 0.0; }

bool KernelCtx::bool_or(std::string_view name, bool def) const {
  return has(name) ? bool_(name) : def;
}

std::string KernelCtx::str(std::string_view name) const {
  Var* v = op_->input1(name);
  if (!v || !v->value() || v->value()->dtype() != DataType::String || v->value()->numel() != 1)
    fail("input '" + std::string(name) + "' must be a known string");
  return v->value()->string_values()[0];
}

std::string KernelCtx::str_or(std::string_view name, const std::string& def) const {
  return has(name) ? str(name) : def;
}

DataType KernelCtx::out_dtype(size_t i) const { return (*out_dtypes_)[i]; }

bool KernelCtx::rounds_output() const {
  return !outs_->empty() && out_dtype(0) == DataType::Float32 &&
         declared_dtype(0) == DataType::Float16;
}

DataType KernelCtx::declared_dtype(size_t i) const { return op_->outputs()[i]->type()->dtype(); }

Tensor& KernelCtx::alloc(size_t i, std::vector<int64_t> shape) {
  (*outs_)[i] = Tensor::empty(out_dtype(i), std::move(shape));
  return (*outs_)[i];
}

void KernelCtx::set(size_t i, Tensor t) { (*outs_)[i] = std::move(t); }

State& KernelCtx::state() const {
  if (!state_) fail("needs a state object: pass state=model.make_state()");
  return *state_;
}

std::vector<Tensor> KernelCtx::run_block(size_t b, const std::vector<Tensor>& inputs) {
  return static_cast<Frame*>(frame_)->run_nested(*static_cast<const Step*>(step_), b, inputs);
}

void KernelCtx::fail(const std::string& msg) const {
  throw ValueError(op_->describe() + ": " + msg);
}

void KernelCtx::index_error(const std::string& msg) const {
  throw IndexError(op_->describe() + ": " + msg);
}

int64_t KernelCtx::axis(int64_t a, int64_t rank) const {
  int64_t r = a < 0 ? a + rank : a;
  if (r < 0 || r >= std::max<int64_t>(rank, 1))
    fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
  return r;
}

}  // namespace milkit
