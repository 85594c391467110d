// The frame of one plan run: binds symbols, runs the steps, frees buffers after their last use.
#include "frame.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "milkit/exec/threads.h"
#include "milkit/symbolic/eval.h"
#include "milkit/types/error.h"
#include "weight_cache.h"

namespace milkit {

namespace {

/// `t` (fp32) with its values rounded to fp16's: in place when the frame holds its only
/// reference, else in a copy (a kernel may pass an input or a constant through).
Tensor rounded_to_half(Tensor t) {
  const bool own = !t.borrowed() && t.owner().use_count() == 1;
  Tensor r = own ? t : Tensor::empty(DataType::Float32, t.shape());
  const float* src = t.data<float>();
  float* dst = r.mutable_data<float>();
  parallel_for(t.numel(), 16384, [&](int64_t b, int64_t e) {
    if (dst != src) std::copy(src + b, src + e, dst + b);
    round_to_half(dst + b, e - b);
  });
  return r;
}

}  // namespace

Frame::Frame(const Plan& p, State* st)
    : plan_(p), state_(st), slots_(p.num_slots_), profile_(Profile::get()) {}

const Tensor& Frame::get(int32_t r) const {
  static const Tensor kNone;
  if (r == kAbsent) return kNone;
  return is_const_ref(r) ? plan_.consts_[const_index(r)] : slots_[r];
}

void Frame::bind_symbol(const Var* v, size_t dim_i, Dim d, int64_t actual, const char* what) {
  int64_t want;
  if (eval_dim(d, env_, want)) {
    if (want != actual)
      throw ValueError(std::string(what) + " '" + v->name() + "': dim " + std::to_string(dim_i) +
                       " is " + std::to_string(actual) + ", expected " + d->str() + " = " +
                       std::to_string(want));
    return;
  }
  if (d->kind() == Expr::Kind::Symbol) {
    const Symbol* s = d->symbol();
    if (actual < s->lo() || actual > s->hi())
      throw ValueError(std::string(what) + " '" + v->name() + "': dim " + std::to_string(dim_i) +
                       " is " + std::to_string(actual) + ", outside the range of " + s->name() +
                       " [" + std::to_string(s->lo()) + ", " +
                       (s->hi() == kPosInf ? std::string("inf") : std::to_string(s->hi())) + "]");
    set_sym(s, actual);
  }
}

void Frame::set_sym(const Symbol* s, int64_t v) {
  auto r = env_.emplace(s, v);
  if (r.second)
    bound_log_.push_back(s);
  else
    r.first->second = v;
}

void Frame::check_output(const Step& st, size_t i, const Tensor& t) {
  const Var* v = st.op->outputs()[i];
  const Type* ty = v->type();
  if (!ty->is_tensor()) return;
  const bool wide = i < st.wide.size() && st.wide[i] && t.dtype() == DataType::Float32;
  if (t.dtype() != ty->dtype() && !wide)
    throw ValueError("internal error: the kernel of " + st.op->describe() + " made output " +
                     std::to_string(i) + " of dtype " + std::string(dtype_name(t.dtype())) +
                     ", its type is " + ty->str());
  if (!ty->has_rank()) return;
  if (static_cast<size_t>(t.rank()) != ty->shape().size())
    throw ValueError("internal error: the kernel of " + st.op->describe() + " made output " +
                     std::to_string(i) + " of shape " + shape_str(t.shape()) + ", its type is " +
                     ty->str());
  for (size_t k = 0; k < ty->shape().size(); ++k) {
    Dim d = ty->shape()[k];
    int64_t want;
    if (eval_dim(d, env_, want)) {
      if (want != t.shape()[k])
        throw ValueError("internal error: the kernel of " + st.op->describe() + " made output " +
                         std::to_string(i) + " of shape " + shape_str(t.shape()) +
                         ", its type is " + ty->str());
    } else if (d->kind() == Expr::Kind::Symbol) {
      set_sym(d->symbol(), t.shape()[k]);
    }
  }
}

void Frame::run_block(const BlockPlan& bp) {
  std::vector<const Tensor*> args;
  std::vector<Tensor> temps;
  std::vector<Tensor> outs;
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  };
  for (const Step& st : bp.steps) {
    const Operation& op = *st.op;
    Clock::time_point t0;
    if (profile_) t0 = Clock::now();
    args.assign(st.args.size(), nullptr);
    temps.clear();
    temps.reserve(st.args.size());
    for (size_t a = 0; a < st.args.size(); ++a) {
      const Tensor* t = &get(st.args[a]);
      const bool packed = a < st.packed.size() && st.packed[a];
      if (a < st.widen.size() && st.widen[a]) {
        temps.push_back(exec::widened(*st.widen[a]));  // a large weight from the cache
        t = &temps.back();
      } else if (st.kd->float_compute && t->dtype() == DataType::Float16 && !packed) {
        temps.push_back(cast_tensor(*t, DataType::Float32));
        t = &temps.back();
      }
      args[a] = t;
    }
    outs.assign(st.outs.size(), Tensor());
    KernelCtx kc;
    kc.op_ = &op;
    kc.args_ = &args;
    kc.outs_ = &outs;
    kc.out_dtypes_ = &st.out_dtypes;
    kc.state_ = state_;
    kc.frame_ = this;
    kc.step_ = &st;
    if (profile_) {
      if (!temps.empty())
        profile_->add("(frame: args of " + op.op_type() + " converted)", since(t0));
      t0 = Clock::now();
      st.kd->fn(kc);
      profile_->add(op, st.fused ? st.fused->describe() : std::string(), since(t0));
      t0 = Clock::now();
    } else {
      st.kd->fn(kc);
    }
    bool cast_out = false;
    for (size_t i = 0; i < outs.size(); ++i) {
      Tensor& t = outs[i];
      const Type* ty = op.outputs()[i]->type();
      if (!t.defined()) {
        if (ty->is_tensor())
          throw ValueError("internal error: the kernel of " + op.describe() + " set no output " +
                           std::to_string(i));
        continue;
      }
      if (ty->is_tensor() && t.dtype() != ty->dtype() && st.kd->float_compute &&
          ty->dtype() == DataType::Float16 && t.dtype() == DataType::Float32) {
        if (!(i < st.wide.size() && st.wide[i]))
          t = cast_tensor(t, DataType::Float16);
        else if (!kc.rounded_ && !(st.fused && st.fused->half))  // rounded by the kernel
          t = rounded_to_half(std::move(t));
        cast_out = true;
      }
      check_output(st, i, t);
      if (!t.borrowed()) live_ += t.nbytes();
      slots_[st.outs[i]] = std::move(t);
    }
    if (profile_ && cast_out)
      profile_->add("(frame: outputs of " + op.op_type() + " rounded)", since(t0));
    peak_ = std::max(peak_, live_);
    for (int32_t s : st.frees) {
      Tensor& t = slots_[s];
      if (t.defined() && !t.borrowed()) live_ -= std::min(live_, t.nbytes());
      t = Tensor();
    }
  }
}

std::vector<Tensor> Frame::run_nested(const Step& st, size_t b, const std::vector<Tensor>& inputs) {
  if (b >= st.blocks.size())
    throw ValueError("internal error: " + st.op->describe() + " has no block " + std::to_string(b));
  const BlockPlan& bp = *st.blocks[b];
  if (inputs.size() != bp.inputs.size())
    throw ValueError("internal error: block " + std::to_string(b) + " of " + st.op->describe() +
                     " takes " + std::to_string(bp.inputs.size()) + " inputs, got " +
                     std::to_string(inputs.size()));
  const size_t mark = bound_log_.size();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Var* v = bp.block->inputs()[i];
    const Type* t = v->type();
    const Tensor& x = inputs[i];
    if (t->is_tensor() && t->has_rank() && !x.is_list()) {
      if (!x.defined() || x.dtype() != t->dtype() ||
          static_cast<size_t>(x.rank()) != t->shape().size())
        throw ValueError("internal error: block input '" + v->name() + "' of " + st.op->describe() +
                         " is " + (x.defined() ? x.describe() : std::string("undefined")) +
                         ", its type is " + t->str());
      for (size_t k = 0; k < t->shape().size(); ++k)
        if (!t->shape()[k]->is_const())
          bind_symbol(v, k, t->shape()[k], x.shape()[k], "block input");
    }
    slots_[bp.inputs[i]] = inputs[i];
  }
  run_block(bp);
  std::vector<Tensor> r;
  for (int32_t o : bp.outputs) r.push_back(get(o));
  // symbols bound inside the block are the block's own (a loop rebinds them each iteration)
  while (bound_log_.size() > mark) {
    env_.erase(bound_log_.back());
    bound_log_.pop_back();
  }
  return r;
}

}  // namespace milkit
