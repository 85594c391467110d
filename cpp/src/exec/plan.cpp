// The interpreter: planning a function and running it.
#include "milkit/exec/plan.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <atomic>
#include <functional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "milkit/ops/registry.h"
#include "milkit/types/error.h"

namespace milkit {

// ---- symbols ------------------------------------------------------------------------------------

bool eval_dim(Dim d, const std::unordered_map<const Symbol*, int64_t>& env, int64_t& out) {
  auto floordiv = [](int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  };
  switch (d->kind()) {
    case Expr::Kind::Const: out = d->value(); return true;
    case Expr::Kind::Symbol: {
      auto it = env.find(d->symbol());
      if (it == env.end()) return false;
      out = it->second;
      return true;
    }
    case Expr::Kind::FloorDiv:
    case Expr::Kind::Mod: {
      int64_t a, b;
      if (!eval_dim(d->args()[0], env, a) || !eval_dim(d->args()[1], env, b) || b == 0) return false;
      int64_t q = floordiv(a, b);
      out = d->kind() == Expr::Kind::FloorDiv ? q : a - q * b;
      return true;
    }
    case Expr::Kind::Min:
    case Expr::Kind::Max: {
      bool first = true;
      for (Dim x : d->args()) {
        int64_t v;
        if (!eval_dim(x, env, v)) return false;
        if (first || (d->kind() == Expr::Kind::Min ? v < out : v > out)) out = v;
        first = false;
      }
      return true;
    }
    case Expr::Kind::Poly: {
      int64_t s = d->value();
      for (const Term& t : d->terms()) {
        int64_t p = t.coef;
        for (Dim a : t.atoms) {
          int64_t v;
          if (!eval_dim(a, env, v)) return false;
          p *= v;
        }
        s += p;
      }
      out = s;
      return true;
    }
  }
  return false;
}

// ---- states -------------------------------------------------------------------------------------

const Tensor& State::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw ValueError("the state object has no state named '" + name + "'");
  return it->second;
}

void State::set(const std::string& name, const Tensor& t) {
  auto it = values_.find(name);
  if (it == values_.end()) throw ValueError("the state object has no state named '" + name + "'");
  if (it->second.dtype() != t.dtype() || it->second.shape() != t.shape())
    throw ValueError("state '" + name + "' is " + it->second.describe() + ", cannot set it to " +
                     t.describe());
  // copy: the state owns its memory, a caller's array may change later
  Tensor c = Tensor::empty(t.dtype(), t.shape());
  std::memcpy(c.mutable_bytes(), t.bytes(), t.nbytes());
  it->second = std::move(c);
}

std::vector<std::string> State::names() const {
  std::vector<std::string> r;
  for (auto& kv : values_) r.push_back(kv.first);
  return r;
}

// ---- plan structure -----------------------------------------------------------------------------

namespace {
constexpr int32_t kAbsent = INT32_MIN;
inline bool is_const_ref(int32_t r) { return r < 0; }
inline int32_t const_index(int32_t r) { return ~r; }
}  // namespace

struct Step {
  const Operation* op = nullptr;
  const KernelDef* kd = nullptr;
  std::vector<int32_t> args;         // per flat arg: >= 0 frame slot, < 0 const (~index)
  std::vector<int32_t> outs;         // frame slots
  std::vector<DataType> out_dtypes;  // compute dtypes
  std::vector<int32_t> frees;        // frame slots released after the step
  std::vector<std::unique_ptr<BlockPlan>> blocks;
};

struct BlockPlan {
  const Block* block = nullptr;
  std::vector<int32_t> inputs;   // frame slots of block inputs
  std::vector<Step> steps;
  std::vector<int32_t> outputs;  // refs
};

Plan::~Plan() = default;

namespace {

struct Planner {
  Plan& plan;
  std::vector<Tensor>& consts;
  size_t& const_bytes;
  const KernelRegistry& reg;
  Planner(Plan& p, std::vector<Tensor>& c, size_t& cb, const KernelRegistry& r)
      : plan(p), consts(c), const_bytes(cb), reg(r) {}
  std::unordered_map<const Var*, int32_t> refs;   // var -> ref
  std::unordered_map<int32_t, int32_t> fp32_of;  // const index -> fp32 copy index
  int32_t next_slot = 0;
  std::vector<std::string> missing;
  bool has_complex = false;  // a complex dialect op is among the missing

  int32_t add_const(Tensor t, bool made) {
    if (made) const_bytes += t.nbytes();
    consts.push_back(std::move(t));
    return ~static_cast<int32_t>(consts.size() - 1);
  }

  int32_t new_slot(const Var* v) {
    int32_t s = next_slot++;
    refs[v] = s;
    return s;
  }

  int32_t ref(const Var* v) const {
    auto it = refs.find(v);
    if (it == refs.end()) throw VerifyError("the interpreter found var '" + v->name() + "' used before it is defined");
    return it->second;
  }

  // Vars read by `op` and by ops nested in it that are defined outside it.
  static void reads(const Operation* op, std::unordered_set<const Var*>& out) {
    for (Var* v : op->args()) out.insert(v);
    for (Block* b : op->blocks()) {
      for (Operation* o : b->ops()) reads(o, out);
      for (Var* v : b->outputs()) out.insert(v);
    }
  }

  void collect_missing(const Block& b) {
    for (Operation* op : b.ops()) {
      if (op->op_type() == "const") continue;
      if (!reg.find(op->op_type())) {
        missing.push_back(op->describe());
        if (op->schema().dialect == "complex") has_complex = true;
      }
      for (Block* nb : op->blocks()) collect_missing(*nb);
    }
  }

  // Const refs computed from constexpr ops (their results, and ops folded over them).
  std::unordered_set<int32_t> from_constexpr;

  // Runs a constexpr op at plan time (its inputs are consts or other constexpr outputs).
  void fold_constexpr(const Operation* op, const KernelDef* kd);
  // Whether `op` reads only compile-time constants, one at least computed from a constexpr op, and
  // can run once now: coremltools counts such a result as a constant (Var.is_descendant_of_const;
  // add_fp16_cast puts a cast between a constexpr op and the op reading it), so a constexpr op may
  // read it. Ops with blocks, random ops and ops making lists are left to run.
  bool over_constexpr(const Operation* op) const;
  // Runs `op` in a throwaway frame and makes its outputs consts; `own_dtypes`: compute in the
  // op's dtypes (constexpr ops), else as the kernel computes at run time.
  void fold(const Operation* op, const KernelDef* kd, bool own_dtypes);

  std::unique_ptr<BlockPlan> plan_block(const Block& b, bool is_function_body);
};

}  // namespace

/// Per-op-type kernel times, printed to stderr at exit when MILKIT_PROFILE is set.
class Profile {
 public:
  static Profile* get() {
    static Profile* p = std::getenv("MILKIT_PROFILE") ? new Profile() : nullptr;
    return p;
  }
  void add(const Operation& op, double us) {
    std::lock_guard<std::mutex> lk(m_);
    auto& e = by_type_[op.op_type()];
    e.first += us;
    e.second += 1;
  }
  ~Profile() = default;

 private:
  Profile() {
    std::atexit([] {
      Profile* p = get();
      std::vector<std::pair<double, std::string>> rows;
      double total = 0;
      for (auto& kv : p->by_type_) {
        rows.emplace_back(kv.second.first, kv.first);
        total += kv.second.first;
      }
      std::sort(rows.rbegin(), rows.rend());
      std::fprintf(stderr, "milkit profile: %.1f ms in kernels\n", total / 1e3);
      for (auto& r : rows)
        std::fprintf(stderr, "  %-28s %10.1f ms %5.1f%%  (%lld calls)\n", r.second.c_str(), r.first / 1e3,
                     total > 0 ? 100.0 * r.first / total : 0.0, static_cast<long long>(p->by_type_[r.second].second));
    });
  }
  std::mutex m_;
  std::map<std::string, std::pair<double, int64_t>> by_type_;
};

class Frame {
 public:
  Frame(const Plan& p, State* st) : plan_(p), state_(st), slots_(p.num_slots_), profile_(Profile::get()) {}

  const Tensor& get(int32_t r) const {
    static const Tensor kNone;
    if (r == kAbsent) return kNone;
    return is_const_ref(r) ? plan_.consts_[const_index(r)] : slots_[r];
  }

  void bind_symbol(const Var* v, size_t dim_i, Dim d, int64_t actual, const char* what) {
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
        throw ValueError(std::string(what) + " '" + v->name() + "': dim " + std::to_string(dim_i) + " is " +
                         std::to_string(actual) + ", outside the range of " + s->name() + " [" +
                         std::to_string(s->lo()) + ", " +
                         (s->hi() == kPosInf ? std::string("inf") : std::to_string(s->hi())) + "]");
      set_sym(s, actual);
    }
  }

  // Binds a symbol, logging new bindings so a nested block's run can drop the ones made inside it
  // (a loop's shapes may change from one iteration to the next).
  void set_sym(const Symbol* s, int64_t v) {
    auto r = env_.emplace(s, v);
    if (r.second) bound_log_.push_back(s);
    else r.first->second = v;
  }

  void check_output(const Step& st, size_t i, const Tensor& t) {
    const Var* v = st.op->outputs()[i];
    const Type* ty = v->type();
    if (!ty->is_tensor()) return;
    if (t.dtype() != ty->dtype())
      throw ValueError("internal error: the kernel of " + st.op->describe() + " made output " +
                       std::to_string(i) + " of dtype " + std::string(dtype_name(t.dtype())) +
                       ", its type is " + ty->str());
    if (!ty->has_rank()) return;
    if (static_cast<size_t>(t.rank()) != ty->shape().size())
      throw ValueError("internal error: the kernel of " + st.op->describe() + " made output " +
                       std::to_string(i) + " of shape " + shape_str(t.shape()) + ", its type is " + ty->str());
    for (size_t k = 0; k < ty->shape().size(); ++k) {
      Dim d = ty->shape()[k];
      int64_t want;
      if (eval_dim(d, env_, want)) {
        if (want != t.shape()[k])
          throw ValueError("internal error: the kernel of " + st.op->describe() + " made output " +
                           std::to_string(i) + " of shape " + shape_str(t.shape()) + ", its type is " +
                           ty->str());
      } else if (d->kind() == Expr::Kind::Symbol) {
        set_sym(d->symbol(), t.shape()[k]);
      }
    }
  }

  void run_block(const BlockPlan& bp) {
    std::vector<const Tensor*> args;
    std::vector<Tensor> temps;
    std::vector<Tensor> outs;
    for (const Step& st : bp.steps) {
      const Operation& op = *st.op;
      args.assign(st.args.size(), nullptr);
      temps.clear();
      temps.reserve(st.args.size());
      for (size_t a = 0; a < st.args.size(); ++a) {
        const Tensor* t = &get(st.args[a]);
        if (st.kd->float_compute && t->dtype() == DataType::Float16) {
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
        auto t0 = std::chrono::steady_clock::now();
        st.kd->fn(kc);
        double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        profile_->add(op, us);
      } else {
        st.kd->fn(kc);
      }
      for (size_t i = 0; i < outs.size(); ++i) {
        Tensor& t = outs[i];
        const Type* ty = op.outputs()[i]->type();
        if (!t.defined()) {
          if (ty->is_tensor())
            throw ValueError("internal error: the kernel of " + op.describe() + " set no output " + std::to_string(i));
          continue;
        }
        if (ty->is_tensor() && t.dtype() != ty->dtype() && st.kd->float_compute &&
            ty->dtype() == DataType::Float16 && t.dtype() == DataType::Float32)
          t = cast_tensor(t, DataType::Float16);
        check_output(st, i, t);
        if (!t.borrowed()) live_ += t.nbytes();
        slots_[st.outs[i]] = std::move(t);
      }
      peak_ = std::max(peak_, live_);
      for (int32_t s : st.frees) {
        Tensor& t = slots_[s];
        if (t.defined() && !t.borrowed()) live_ -= std::min(live_, t.nbytes());
        t = Tensor();
      }
    }
  }

  std::vector<Tensor> run_nested(const Step& st, size_t b, const std::vector<Tensor>& inputs) {
    if (b >= st.blocks.size()) throw ValueError("internal error: " + st.op->describe() + " has no block " + std::to_string(b));
    const BlockPlan& bp = *st.blocks[b];
    if (inputs.size() != bp.inputs.size())
      throw ValueError("internal error: block " + std::to_string(b) + " of " + st.op->describe() + " takes " +
                       std::to_string(bp.inputs.size()) + " inputs, got " + std::to_string(inputs.size()));
    const size_t mark = bound_log_.size();
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Var* v = bp.block->inputs()[i];
      const Type* t = v->type();
      const Tensor& x = inputs[i];
      if (t->is_tensor() && t->has_rank() && !x.is_list()) {
        if (!x.defined() || x.dtype() != t->dtype() || static_cast<size_t>(x.rank()) != t->shape().size())
          throw ValueError("internal error: block input '" + v->name() + "' of " + st.op->describe() + " is " +
                           (x.defined() ? x.describe() : std::string("undefined")) + ", its type is " + t->str());
        for (size_t k = 0; k < t->shape().size(); ++k)
          if (!t->shape()[k]->is_const()) bind_symbol(v, k, t->shape()[k], x.shape()[k], "block input");
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

  const Plan& plan_;
  State* state_;
  std::vector<Tensor> slots_;
  std::unordered_map<const Symbol*, int64_t> env_;
  std::vector<const Symbol*> bound_log_;
  size_t live_ = 0, peak_ = 0;
  Profile* profile_ = nullptr;
};

namespace {

void Planner::fold_constexpr(const Operation* op, const KernelDef* kd) {
  for (Var* v : op->args()) {
    int32_t r = ref(v);
    if (r != kAbsent && !is_const_ref(r))
      throw ValueError(op->describe() + ": input '" + v->name() + "' is not a compile-time constant");
  }
  fold(op, kd, true);
}

bool Planner::over_constexpr(const Operation* op) const {
  if (!op->blocks().empty() || op->op_type().rfind("random_", 0) == 0) return false;
  for (Var* v : op->outputs())
    if (!v->type()->is_tensor()) return false;
  bool derived = false;
  for (Var* v : op->args()) {
    int32_t r = ref(v);
    if (r == kAbsent) continue;
    if (!is_const_ref(r)) return false;
    derived = derived || from_constexpr.count(r);
  }
  return derived;
}

void Planner::fold(const Operation* op, const KernelDef* kd, bool own_dtypes) {
  std::vector<DataType> dts;
  for (Var* v : op->outputs()) {
    DataType dt = v->type()->dtype();
    if (!own_dtypes && kd->float_compute && dt == DataType::Float16) dt = DataType::Float32;
    dts.push_back(dt);
  }
  // a throwaway frame runs the one step
  Frame fr(plan, nullptr);
  Step st;
  st.op = op;
  st.kd = kd;
  for (Var* v : op->args()) st.args.push_back(ref(v));
  for (size_t i = 0; i < op->outputs().size(); ++i) st.outs.push_back(static_cast<int32_t>(i));
  st.out_dtypes = dts;
  BlockPlan bp;
  fr.slots_.assign(op->outputs().size(), Tensor());
  bp.steps.push_back(std::move(st));
  // a constexpr op computes in its own dtypes (no fp32 detour)
  KernelDef k = *kd;
  if (own_dtypes) k.float_compute = false;
  bp.steps[0].kd = &k;
  fr.run_block(bp);
  for (size_t i = 0; i < op->outputs().size(); ++i) {
    int32_t r = add_const(fr.slots_[i], true);
    refs[op->outputs()[i]] = r;
    from_constexpr.insert(r);
  }
}

std::unique_ptr<BlockPlan> Planner::plan_block(const Block& b, bool is_function_body) {
  auto bp = std::make_unique<BlockPlan>();
  bp->block = &b;
  if (!is_function_body)
    for (Var* v : b.inputs()) bp->inputs.push_back(new_slot(v));
  for (Operation* op : b.ops()) {
    const std::string& type = op->op_type();
    if (type == "const") {
      Var* v = op->output(0);
      if (!v->value()) throw ValueError(op->describe() + " has no value");
      if (v->value()->dtype() == DataType::String || v->value()->is_symbolic() || v->value()->is_list()) {
        refs[v] = kAbsent;  // a parameter that kernels read from the var's value
        continue;
      }
      refs[v] = add_const(Tensor::from_value(*v->value()), false);
      continue;
    }
    const KernelDef* kd = reg.find(type);
    if (op->schema().is_constexpr) {
      fold_constexpr(op, kd);
      continue;
    }
    if (over_constexpr(op)) {
      fold(op, kd, false);
      continue;
    }
    // outputs known at compile time (value inference) are constants
    bool all_known = !op->outputs().empty() && op->blocks().empty();
    for (Var* v : op->outputs())
      if (!v->has_value() || v->value()->dtype() == DataType::String || !v->type()->is_tensor()) all_known = false;
    if (all_known) {
      for (Var* v : op->outputs()) refs[v] = add_const(Tensor::from_value(*v->value()), false);
      continue;
    }
    Step st;
    st.op = op;
    st.kd = kd;
    for (Var* v : op->args()) {
      int32_t r = ref(v);
      if (r != kAbsent && is_const_ref(r) && kd->float_compute &&
          consts[const_index(r)].dtype() == DataType::Float16) {
        // a weight in fp16 read by an fp32-computing kernel: convert once now
        auto it = fp32_of.find(r);
        if (it == fp32_of.end()) {
          int32_t c = add_const(cast_tensor(consts[const_index(r)], DataType::Float32), true);
          it = fp32_of.emplace(r, c).first;
        }
        r = it->second;
      }
      st.args.push_back(r);
    }
    for (Var* v : op->outputs()) {
      st.outs.push_back(new_slot(v));
      DataType dt = v->type()->is_tensor() ? v->type()->dtype() : DataType::Unused;
      if (kd->float_compute && dt == DataType::Float16) dt = DataType::Float32;
      st.out_dtypes.push_back(dt);
    }
    for (Block* nb : op->blocks()) st.blocks.push_back(plan_block(*nb, false));
    bp->steps.push_back(std::move(st));
  }
  for (Var* v : b.outputs()) bp->outputs.push_back(ref(v));

  // last uses: a var defined in this block (input or op output) is freed after the last step of
  // this block that reads it (reads inside nested blocks count for the op owning them); block
  // outputs are kept.
  std::unordered_set<const Var*> keep(b.outputs().begin(), b.outputs().end());
  std::unordered_map<const Var*, size_t> last;
  for (size_t i = 0; i < bp->steps.size(); ++i) {
    std::unordered_set<const Var*> rd;
    reads(bp->steps[i].op, rd);
    for (const Var* v : rd) last[v] = i;
  }
  auto defined_here = [&](const Var* v) {
    if (v->op()) return v->op()->parent() == &b;
    return std::find(b.inputs().begin(), b.inputs().end(), v) != b.inputs().end();  // shared inputs too
  };
  for (auto& kv : last) {
    const Var* v = kv.first;
    if (keep.count(v) || !defined_here(v)) continue;
    int32_t r = refs.count(v) ? refs[v] : kAbsent;
    if (r == kAbsent || is_const_ref(r)) continue;
    if (!v->op() && is_function_body) continue;  // function inputs are the caller's
    bp->steps[kv.second].frees.push_back(r);
  }
  // outputs nobody reads are freed right after they are made
  for (Step& st : bp->steps)
    for (size_t i = 0; i < st.outs.size(); ++i) {
      const Var* v = st.op->outputs()[i];
      if (!last.count(v) && !keep.count(v)) st.frees.push_back(st.outs[i]);
    }
  return bp;
}

}  // namespace

Plan::Plan(std::shared_ptr<const Function> fn, const KernelRegistry* kernels) : fn_(std::move(fn)) {
  Planner pl(*this, consts_, const_bytes_, kernels ? *kernels : KernelRegistry::instance());
  pl.collect_missing(fn_->body());
  if (!pl.missing.empty()) {
    std::string msg = "the interpreter has no kernel for " + std::to_string(pl.missing.size()) + " op(s): ";
    for (size_t i = 0; i < pl.missing.size(); ++i) msg += (i ? ", " : "") + pl.missing[i];
    if (pl.has_complex)
      msg += ". Complex dialect ops are not run: lower them first with common::lower_complex_dialect_ops "
             "(PassPipeline.DEFAULT does)";
    throw ValueError(msg);
  }
  for (Var* v : fn_->inputs()) pl.new_slot(v);
  body_ = pl.plan_block(fn_->body(), true);
  num_slots_ = static_cast<size_t>(pl.next_slot);
}

std::vector<std::string> Plan::input_names() const {
  std::vector<std::string> r;
  for (Var* v : fn_->inputs())
    if (v->type()->kind() != TypeKind::State) r.push_back(v->name());
  return r;
}

bool Plan::has_states() const {
  for (Var* v : fn_->inputs())
    if (v->type()->kind() == TypeKind::State) return true;
  return false;
}

std::shared_ptr<State> Plan::make_state() const {
  auto s = std::make_shared<State>();
  for (Var* v : fn_->inputs()) {
    const Type* t = v->type();
    if (t->kind() != TypeKind::State) continue;
    const Type* w = t->elem();
    std::vector<int64_t> shape;
    for (Dim d : w->shape()) {
      if (!d->is_const()) throw ValueError("state '" + v->name() + "' has a symbolic shape " + w->str());
      shape.push_back(d->value());
    }
    s->values_[v->name()] = Tensor::zeros(w->dtype(), shape);
  }
  return s;
}

std::vector<std::pair<std::string, Tensor>> Plan::run(const std::map<std::string, Tensor>& inputs,
                                                      State* state) const {
  Frame fr(*this, state);
  std::set<std::string> known;
  for (size_t i = 0; i < fn_->inputs().size(); ++i) {
    const Var* v = fn_->inputs()[i];
    const Type* t = v->type();
    if (t->kind() == TypeKind::State) {
      if (!state) throw ValueError("the model has state '" + v->name() + "': pass state=model.make_state()");
      if (!state->contains(v->name()))
        throw ValueError("the state object has no state named '" + v->name() + "' (made for another model?)");
      continue;
    }
    known.insert(v->name());
    auto it = inputs.find(v->name());
    if (it == inputs.end()) {
      std::string names;
      for (const auto& n : input_names()) names += (names.empty() ? "" : ", ") + n;
      throw ValueError("missing input '" + v->name() + "' (the inputs are: " + names + ")");
    }
    const Tensor& x = it->second;
    if (x.dtype() != t->dtype())
      throw ValueError("input '" + v->name() + "' has dtype " + std::string(dtype_name(x.dtype())) +
                       ", expected " + std::string(dtype_name(t->dtype())));
    if (t->has_rank()) {
      if (static_cast<size_t>(x.rank()) != t->shape().size())
        throw ValueError("input '" + v->name() + "' has shape " + shape_str(x.shape()) + " (rank " +
                         std::to_string(x.rank()) + "), expected " + t->str());
      for (size_t k = 0; k < t->shape().size(); ++k) {
        Dim d = t->shape()[k];
        if (d->is_const()) {
          if (d->value() != x.shape()[k])
            throw ValueError("input '" + v->name() + "' has shape " + shape_str(x.shape()) + ", expected " + t->str() +
                             " (dim " + std::to_string(k) + ")");
        } else if (d->kind() == Expr::Kind::Symbol) {
          fr.bind_symbol(v, k, d, x.shape()[k], "input");
        }
      }
    }
    fr.slots_[i] = x;
  }
  for (auto& kv : inputs)
    if (!known.count(kv.first)) {
      std::string names;
      for (const auto& n : input_names()) names += (names.empty() ? "" : ", ") + n;
      throw ValueError("unknown input '" + kv.first + "' (the inputs are: " + names + ")");
    }
  // inputs with derived dims (2*S): checked once every plain symbol is bound
  for (size_t i = 0; i < fn_->inputs().size(); ++i) {
    const Var* v = fn_->inputs()[i];
    const Type* t = v->type();
    if (t->kind() == TypeKind::State || !t->has_rank()) continue;
    for (size_t k = 0; k < t->shape().size(); ++k)
      if (!t->shape()[k]->is_const() && t->shape()[k]->kind() != Expr::Kind::Symbol)
        fr.bind_symbol(v, k, t->shape()[k], fr.slots_[i].shape()[k], "input");
  }
  fr.run_block(*body_);
  last_peak_ = fr.peak_;
  std::vector<std::pair<std::string, Tensor>> out;
  const Block& b = fn_->body();
  for (size_t i = 0; i < b.outputs().size(); ++i) out.emplace_back(b.outputs()[i]->name(), fr.get(body_->outputs[i]));
  return out;
}

// ---- KernelCtx ----------------------------------------------------------------------------------

bool KernelCtx::has(std::string_view name) const {
  int i = op_->input_index(name);
  return i >= 0 && !op_->input(static_cast<size_t>(i)).empty();
}

const Tensor& KernelCtx::in(size_t i) const {
  const auto& st = op_->starts();
  if (i + 1 >= st.size() || st[i] == st[i + 1])
    fail("input " + std::to_string(i) + " is absent");
  const Tensor* t = (*args_)[st[i]];
  if (!t || !t->defined()) fail("input '" + op_->schema().inputs[i].name + "' has no run-time tensor");
  return *t;
}

const Tensor& KernelCtx::in(std::string_view name) const {
  int i = op_->input_index(name);
  if (i < 0) fail("has no input named '" + std::string(name) + "'");
  if (op_->input(static_cast<size_t>(i)).empty()) fail("input '" + std::string(name) + "' is absent");
  return in(static_cast<size_t>(i));
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

int64_t KernelCtx::int_or(std::string_view name, int64_t def) const { return has(name) ? int_(name) : def; }

double KernelCtx::float_(std::string_view name) const {
  if (const Value* v = value(name)) {
    if (v->numel() != 1) fail("input '" + std::string(name) + "' must be a scalar");
    return v->as_double(0);
  }
  const Tensor& t = in(name);
  if (t.numel() != 1) fail("input '" + std::string(name) + "' must be a scalar");
  return t.get(0);
}

double KernelCtx::float_or(std::string_view name, double def) const { return has(name) ? float_(name) : def; }

bool KernelCtx::bool_(std::string_view name) const { return float_(name) != 0.0; }

bool KernelCtx::bool_or(std::string_view name, bool def) const { return has(name) ? bool_(name) : def; }

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

void KernelCtx::fail(const std::string& msg) const { throw ValueError(op_->describe() + ": " + msg); }

void KernelCtx::index_error(const std::string& msg) const { throw IndexError(op_->describe() + ": " + msg); }

int64_t KernelCtx::axis(int64_t a, int64_t rank) const {
  int64_t r = a < 0 ? a + rank : a;
  if (r < 0 || r >= std::max<int64_t>(rank, 1))
    fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
  return r;
}

// ---- registry -----------------------------------------------------------------------------------

void register_all_kernels(KernelRegistry& r);

const KernelRegistry& KernelRegistry::instance() {
  static const KernelRegistry reg = [] {
    KernelRegistry r;
    register_all_kernels(r);
    return r;
  }();
  return reg;
}

void KernelRegistry::add(const std::string& op_type, KernelDef def) { kernels_[op_type] = def; }

const KernelDef* KernelRegistry::find(std::string_view op_type) const {
  auto it = kernels_.find(op_type);
  return it == kernels_.end() ? nullptr : &it->second;
}

std::vector<std::string> KernelRegistry::names() const {
  std::vector<std::string> r;
  for (auto& kv : kernels_) r.push_back(kv.first);
  return r;
}

}  // namespace milkit
