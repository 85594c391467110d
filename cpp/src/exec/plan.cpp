// The interpreter's planner: a plan per function (a kernel per op, constants folded, buffer
// lifetimes), the State object, and Plan::run.
#include "milkit/exec/plan.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "frame.h"
#include "milkit/ops/registry.h"
#include "milkit/types/error.h"
#include "packed_weight.h"
#include "plan_steps.h"
#include "weight_cache.h"

namespace milkit {

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

Plan::~Plan() = default;

namespace {

/// fp16 constants of at least this many bytes read by fp32-computing kernels are read in place
/// (smaller ones get an fp32 copy when the plan is made).
constexpr size_t kInPlaceBytes = 64 * 1024;

/// Whether flat arg `slot` of `op` is the weight of a kernel that reads packed weights.
bool weight_slot(const Operation* op, size_t slot) {
  static const char* const kSlots[][2] = {
      {"linear", "weight"},
      {"matmul", "y"},
      {"conv", "weight"},
      {"conv_transpose", "weight"},
      {"gather", "x"}};  // an embedding table: the gathered rows are decoded
  for (const auto& ts : kSlots) {
    if (op->op_type() != ts[0]) continue;
    int i = op->input_index(ts[1]);
    return i >= 0 && op->starts()[i] == slot && op->starts()[i + 1] == slot + 1;
  }
  return false;
}

/// Whether flat arg `slot` of `op` is the input a packed stage decompresses on the fly (the data
/// of blockwise_shift_scale, the source of a cast).
bool chain_slot(const Operation* op, size_t slot) {
  const std::string& t = op->op_type();
  const char* name = t == "cast"                              ? "x"
                     : t == "constexpr_cast"                  ? "source_val"
                     : t == "constexpr_blockwise_shift_scale" ? "data"
                                                              : nullptr;
  if (!name) return false;
  int i = op->input_index(name);
  return i >= 0 && op->starts()[i] == slot;
}

void collect_packable_ops(const Block& b, std::vector<const Operation*>& out) {
  for (const Operation* op : b.ops()) {
    if (packable_op_type(op->op_type()) && op->outputs().size() == 1) out.push_back(op);
    for (const Block* nb : op->blocks()) collect_packable_ops(*nb, out);
  }
}

/// Outputs of constexpr ops (and casts) read only as packed-kernel weights or by further stages
/// of such a chain: the plan keeps them packed.
std::unordered_set<const Var*> packable_vars(const Function& fn) {
  std::vector<const Operation*> ops;
  collect_packable_ops(fn.body(), ops);
  std::unordered_set<const Var*> r;
  for (const Operation* op : ops) r.insert(op->output(0));
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = r.begin(); it != r.end();) {
      const Var* v = *it;
      bool ok = !v->uses().empty() && v->block_uses().empty();
      for (const Use& u : v->uses())
        ok = ok &&
             (weight_slot(u.op, u.slot) || (chain_slot(u.op, u.slot) && r.count(u.op->output(0))));
      if (ok) {
        ++it;
      } else {
        it = r.erase(it);
        changed = true;
      }
    }
  }
  return r;
}

struct Planner {
  Plan& plan;
  std::vector<Tensor>& consts;
  size_t& const_bytes;
  const KernelRegistry& reg;
  std::vector<std::shared_ptr<const PackedWeight>>& packed_list;
  Planner(Plan& p, std::vector<Tensor>& c, size_t& cb, const KernelRegistry& r,
          std::vector<std::shared_ptr<const PackedWeight>>& pl)
      : plan(p), consts(c), const_bytes(cb), reg(r), packed_list(pl) {}
  // vars kept packed, the packed stage of their placeholder const refs, their dense copies
  std::unordered_set<const Var*> packable;
  std::unordered_map<int32_t, std::shared_ptr<const PackedWeight>> packed_of;
  std::unordered_map<int32_t, int32_t> dense_of;
  std::unordered_set<const PackedWeight*> listed;
  std::unordered_map<const Var*, int32_t> refs;  // var -> ref
  std::unordered_map<int32_t, int32_t> fp32_of;  // const index -> fp32 copy index
  // large fp16 consts read in place (when weights may stay packed), by const ref
  bool in_place = false;
  std::unordered_map<int32_t, std::shared_ptr<const PackedWeight>> in_place_of;
  std::vector<std::shared_ptr<const PackedWeight>> in_place_list;
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

  // The ref of `v`, looked at without reading it (a packed const stays packed).
  int32_t peek(const Var* v) const {
    auto it = refs.find(v);
    if (it == refs.end())
      throw VerifyError("the interpreter found var '" + v->name() + "' used before it is defined");
    return it->second;
  }
  // The ref of `v` read as a tensor: a sub-byte const still packed is unpacked now.
  int32_t ref(const Var* v) {
    const int32_t r = peek(v);
    auto lz = lazy_bits.find(r);
    if (lz != lazy_bits.end()) {
      consts[const_index(r)] = Tensor::from_value(*lz->second);
      lazy_bits.erase(lz);
    }
    return r;
  }
  // Sub-byte consts held packed (Buffer::packed_bits) whose dense tensor is made only when
  // something reads them as a tensor (ref()): a LUT stage reads the packed bytes instead.
  std::unordered_map<int32_t, std::shared_ptr<const Value>> lazy_bits;

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

  // Makes the output of `op` (in `packable`) a packed stage; false when its form is not supported.
  bool try_pack(const Operation* op);
  // Replaces packed inputs of `op` by their decompressed tensors, except the weight it reads
  // packed when `keep_weight`.
  void densify_args(const Operation* op, bool keep_weight);
  // Adds the step's args, reading packed weights through st.packed.
  void add_args(const Operation* op, const KernelDef* kd, Step& st);
  // Reads the fp16 const `r` in place at arg `a`: a packed weight of a product or convolution,
  // else widened through the weight cache at run time.
  void read_in_place(const Operation* op, size_t a, int32_t r, Step& st);

  std::unique_ptr<BlockPlan> plan_block(const Block& b, bool is_function_body);
};

}  // namespace

namespace {

void Planner::fold_constexpr(const Operation* op, const KernelDef* kd) {
  for (Var* v : op->args()) {
    int32_t r = ref(v);
    if (r != kAbsent && !is_const_ref(r))
      throw ValueError(op->describe() + ": input '" + v->name() +
                       "' is not a compile-time constant");
  }
  fold(op, kd, true);
}

bool Planner::over_constexpr(const Operation* op) const {
  if (!op->blocks().empty() || op->op_type().rfind("random_", 0) == 0) return false;
  for (Var* v : op->outputs())
    if (!v->type()->is_tensor()) return false;
  bool derived = false;
  for (Var* v : op->args()) {
    const int32_t r = peek(v);
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

bool Planner::try_pack(const Operation* op) {
  auto input = [&](std::string_view name) -> PackedInput {
    PackedInput in;
    int i = op->input_index(name);
    if (i < 0 || op->input(static_cast<size_t>(i)).empty()) return in;
    auto it = refs.find(op->input(static_cast<size_t>(i))[0]);
    if (it == refs.end() || it->second == kAbsent || !is_const_ref(it->second)) return in;
    auto pk = packed_of.find(it->second);
    auto lz = lazy_bits.find(it->second);
    if (pk != packed_of.end())
      in.packed = pk->second;
    else if (lz != lazy_bits.end())
      in.bits = lz->second;  // only the stages that read packed bytes take it
    else
      in.tensor = &consts[const_index(it->second)];
    return in;
  };
  std::shared_ptr<const PackedWeight> pw = pack_op(*op, input);
  if (!pw) return false;
  if (pw->dtype() != DataType::Float16 && pw->dtype() != DataType::Float32)
    for (const Use& u : op->output(0)->uses())
      if (weight_slot(u.op, u.slot)) return false;  // the packed kernels read float weights
  int32_t r = add_const(Tensor(), false);           // a placeholder: kernels read st.packed
  refs[op->output(0)] = r;
  packed_of[r] = std::move(pw);
  from_constexpr.insert(r);
  return true;
}

void Planner::densify_args(const Operation* op, bool keep_weight) {
  const auto& args = op->args();
  for (size_t a = 0; a < args.size(); ++a) {
    auto it = refs.find(args[a]);
    if (it == refs.end() || !packed_of.count(it->second)) continue;
    if (keep_weight && weight_slot(op, a)) continue;
    auto d = dense_of.find(it->second);
    if (d == dense_of.end()) {
      const PackedWeight& pw = *packed_of[it->second];
      int32_t c = add_const(pw.materialize(pw.dtype()), true);
      from_constexpr.insert(c);
      d = dense_of.emplace(it->second, c).first;
    }
    it->second = d->second;  // later readers get the decompressed tensor too
  }
}

void Planner::add_args(const Operation* op, const KernelDef* kd, Step& st) {
  const auto& args = op->args();
  for (size_t a = 0; a < args.size(); ++a) {
    int32_t r = ref(args[a]);
    auto pk = r == kAbsent ? packed_of.end() : packed_of.find(r);
    if (pk != packed_of.end()) {
      st.packed.resize(args.size(), nullptr);
      st.packed[a] = pk->second.get();
      if (listed.insert(pk->second.get()).second) packed_list.push_back(pk->second);
    } else if (r != kAbsent && is_const_ref(r) && kd->float_compute &&
               consts[const_index(r)].dtype() == DataType::Float16 && in_place &&
               consts[const_index(r)].nbytes() >= kInPlaceBytes) {
      read_in_place(op, a, r, st);
    } else if (r != kAbsent && is_const_ref(r) && kd->float_compute &&
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
}

void Planner::read_in_place(const Operation* op, size_t a, int32_t r, Step& st) {
  auto it = in_place_of.find(r);
  if (it == in_place_of.end()) {
    it = in_place_of.emplace(r, in_place_weight(consts[const_index(r)])).first;
    in_place_list.push_back(it->second);
  }
  std::vector<const PackedWeight*>& v = weight_slot(op, a) ? st.packed : st.widen;
  v.resize(op->args().size(), nullptr);
  v[a] = it->second.get();
}

/// The flat arg slot of input x when `op` only moves the elements of x (any dtype; other inputs
/// are shapes, bounds or integer indices): an fp32 tensor holding fp16 values passes through it
/// as it is. -1 otherwise. (gather: ViT's attention takes q, k and v by gathers, whose fp16
/// outputs were converted back to fp32 for the products, 2.8 ms a run.)
int64_t moved_slot(const Operation& op) {
  static const char* const kTypes[] = {"reshape",       "transpose",       "squeeze",
                                       "expand_dims",   "slice_by_index",  "slice_by_size",
                                       "reverse",       "depth_to_space",  "space_to_depth",
                                       "pixel_shuffle", "pixel_unshuffle", "gather"};
  // split: every output a run of x's elements (its kernel copies bytes, whatever the dtype)
  if (op.op_type() != "split" &&
      (op.outputs().size() != 1 || std::none_of(std::begin(kTypes), std::end(kTypes),
                                                [&](const char* t) { return op.op_type() == t; })))
    return -1;
  const int i = op.input_index("x");
  return i < 0 ? -1 : static_cast<int64_t>(op.starts()[i]);
}

/// Sets Step::wide: the fp16 outputs of fp32-computing steps that only fp32-computing steps of
/// this block read (not block outputs, not nested blocks), directly, through casts to fp32 (which
/// then give their input as it is: its values are fp16's), or through element moves (reshape,
/// transpose, split, ...) whose outputs then stay fp32 too (all of a split's or none).
void keep_wide(BlockPlan& bp) {
  std::unordered_map<const Operation*, const Step*> step_of;
  for (const Step& st : bp.steps)
    if (st.blocks.empty()) {
      step_of[st.op] = &st;
      if (st.fused)  // a fused op's operands are read by the step it is fused into
        for (const Operation* f : st.fused->ops) step_of[f] = &st;
    }
  const auto& outs = bp.block->outputs();
  // whether each output may stay fp32, from the last step back (readers follow writers)
  std::unordered_map<const Var*, bool> may;
  auto all_may = [&may](const Operation& op) {
    return std::all_of(op.outputs().begin(), op.outputs().end(),
                       [&may](const Var* o) { return may[o]; });
  };
  auto to_fp32 = [](const Operation& op) {
    return op.op_type() == "cast" && op.outputs().size() == 1 &&
           op.output(0)->type()->is_tensor() && op.output(0)->type()->dtype() == DataType::Float32;
  };
  for (auto it = bp.steps.rbegin(); it != bp.steps.rend(); ++it)
    for (const Var* v : it->last_op()->outputs()) {
      bool ok = v->type()->is_tensor() && v->type()->dtype() == DataType::Float16 &&
                !v->uses().empty() && v->block_uses().empty() &&
                std::find(outs.begin(), outs.end(), v) == outs.end();
      for (const Use& u : v->uses()) {
        auto s = step_of.find(u.op);
        ok = ok && s != step_of.end() &&
             (s->second->kd->float_compute || to_fp32(*u.op) ||
              (moved_slot(*u.op) == static_cast<int64_t>(u.slot) && all_may(*u.op)));
      }
      may[v] = ok;
    }
  // fp32-computing writers hold them fp32; a move's outputs are fp32 when its input is
  std::unordered_set<const Var*> wide;
  for (Step& st : bp.steps) {
    const Operation* last = st.last_op();
    st.wide.assign(st.outs.size(), false);
    for (size_t i = 0; i < st.outs.size(); ++i) {
      const Var* v = last->outputs()[i];
      const int64_t m = st.kd->float_compute ? -1 : moved_slot(*st.op);
      if (!may[v] ||
          (!st.kd->float_compute && (m < 0 || !wide.count(st.op->args()[m]) || !all_may(*st.op))))
        continue;
      st.wide[i] = true;
      wide.insert(v);
      if (!st.kd->float_compute) st.out_dtypes[i] = DataType::Float32;
    }
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
      if (v->value()->dtype() == DataType::String || v->value()->is_symbolic() ||
          v->value()->is_list()) {
        refs[v] = kAbsent;  // a parameter that kernels read from the var's value
        continue;
      }
      const auto& buf = v->value()->buffer();
      if (!packable.empty() && buf && buf->bit_source() && buf->lazy()) {
        refs[v] = add_const(Tensor(), false);
        lazy_bits[refs[v]] = v->value();
        continue;
      }
      refs[v] = add_const(Tensor::from_value(*v->value()), false);
      continue;
    }
    const KernelDef* kd = reg.find(type);
    if (!op->outputs().empty() && packable.count(op->output(0)) && try_pack(op)) continue;
    densify_args(op, !op->schema().is_constexpr && !over_constexpr(op));
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
      if (!v->has_value() || v->value()->dtype() == DataType::String || !v->type()->is_tensor())
        all_known = false;
    if (all_known) {
      for (Var* v : op->outputs()) refs[v] = add_const(Tensor::from_value(*v->value()), false);
      continue;
    }
    Step st;
    st.op = op;
    st.kd = kd;
    add_args(op, kd, st);
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
  fuse_chains(*bp, consts);
  keep_wide(*bp);

  // last uses: a var defined in this block (input or op output) is freed after the last step of
  // this block that reads it (reads inside nested blocks count for the op owning them); block
  // outputs are kept.
  std::unordered_set<const Var*> keep(b.outputs().begin(), b.outputs().end());
  std::unordered_map<const Var*, size_t> last;
  for (size_t i = 0; i < bp->steps.size(); ++i) {
    std::unordered_set<const Var*> rd;
    reads(bp->steps[i].op, rd);
    if (bp->steps[i].fused && bp->steps[i].fused->ext_var) rd.insert(bp->steps[i].fused->ext_var);
    for (const Var* v : rd) last[v] = i;
  }
  auto defined_here = [&](const Var* v) {
    if (v->op()) return v->op()->parent() == &b;
    return std::find(b.inputs().begin(), b.inputs().end(), v) !=
           b.inputs().end();  // shared inputs too
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
      const Var* v = st.last_op()->outputs()[i];
      if (!last.count(v) && !keep.count(v)) st.frees.push_back(st.outs[i]);
    }
  return bp;
}

}  // namespace

Plan::Plan(std::shared_ptr<const Function> fn, const KernelRegistry* kernels, bool packed_weights)
    : fn_(std::move(fn)) {
  Planner pl(*this, consts_, const_bytes_, kernels ? *kernels : KernelRegistry::instance(),
             packed_);
  const char* dense = std::getenv("MILKIT_DENSE_WEIGHTS");
  if (packed_weights && !(dense && std::strcmp(dense, "1") == 0)) {
    pl.packable = packable_vars(*fn_);
    pl.in_place = true;
  }
  pl.collect_missing(fn_->body());
  if (!pl.missing.empty()) {
    std::string msg =
        "the interpreter has no kernel for " + std::to_string(pl.missing.size()) + " op(s): ";
    for (size_t i = 0; i < pl.missing.size(); ++i) msg += (i ? ", " : "") + pl.missing[i];
    if (pl.has_complex)
      msg +=
          ". Complex dialect ops are not run: lower them first with "
          "common::lower_complex_dialect_ops "
          "(PassPipeline.DEFAULT does)";
    throw ValueError(msg);
  }
  for (Var* v : fn_->inputs()) pl.new_slot(v);
  body_ = pl.plan_block(fn_->body(), true);
  num_slots_ = static_cast<size_t>(pl.next_slot);
  for (const auto& pw : packed_) {
    packed_bytes_ += pw->packed_bytes();
    packed_dense_bytes_ += pw->dense_bytes();
  }
  in_place_ = std::move(pl.in_place_list);
  for (const auto& pw : in_place_) in_place_bytes_ += pw->packed_bytes();
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
      if (!d->is_const())
        throw ValueError("state '" + v->name() + "' has a symbolic shape " + w->str());
      shape.push_back(d->value());
    }
    s->values_[v->name()] = Tensor::zeros(w->dtype(), shape);
  }
  return s;
}

std::vector<std::pair<std::string, Tensor>> Plan::run(const std::map<std::string, Tensor>& inputs,
                                                      State* state) const {
  Frame fr(*this, state);
  // "(the inputs are: a, b)", for the errors of a feed
  auto inputs_are = [this] {
    std::string names;
    for (const auto& n : input_names()) names += (names.empty() ? "" : ", ") + n;
    return "(the inputs are: " + names + ")";
  };
  std::set<std::string> known;
  for (size_t i = 0; i < fn_->inputs().size(); ++i) {
    const Var* v = fn_->inputs()[i];
    const Type* t = v->type();
    if (t->kind() == TypeKind::State) {
      if (!state)
        throw ValueError("the model has state '" + v->name() + "': pass state=model.make_state()");
      if (!state->contains(v->name()))
        throw ValueError("the state object has no state named '" + v->name() +
                         "' (made for another model?)");
      continue;
    }
    known.insert(v->name());
    auto it = inputs.find(v->name());
    if (it == inputs.end()) {
      // the names given that are no input (a misspelt or renamed one, most likely)
      const std::vector<std::string> all = input_names();
      std::string unknown;
      size_t n_unknown = 0;
      for (const auto& kv : inputs)
        if (std::find(all.begin(), all.end(), kv.first) == all.end())
          unknown += (n_unknown++ ? ", '" : "'") + kv.first + "'";
      throw ValueError("missing input '" + v->name() + "' " + inputs_are() +
                       (n_unknown == 0   ? ""
                        : n_unknown == 1 ? "; the feed has " + unknown + ", which is not an input"
                                         : "; the feed has " + unknown + ", which are not inputs"));
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
            throw ValueError("input '" + v->name() + "' has shape " + shape_str(x.shape()) +
                             ", expected " + t->str() + " (dim " + std::to_string(k) + ")");
        } else if (d->kind() == Expr::Kind::Symbol) {
          fr.bind_symbol(v, k, d, x.shape()[k], "input");
        }
      }
    }
    fr.slots_[i] = x;
  }
  for (auto& kv : inputs)
    if (!known.count(kv.first))
      throw ValueError("unknown input '" + kv.first + "' " + inputs_are());
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
  buffer_cache_bound(fr.peak_);
  std::vector<std::pair<std::string, Tensor>> out;
  const Block& b = fn_->body();
  for (size_t i = 0; i < b.outputs().size(); ++i)
    out.emplace_back(b.outputs()[i]->name(), fr.get(body_->outputs[i]));
  return out;
}

}  // namespace milkit
