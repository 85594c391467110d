#include "milkit/builder/builder.h"

#include <algorithm>
#include <map>

#include "milkit/types/error.h"

namespace milkit {

const OpSchema& schema_for(std::string_view op_type, Target opset, const std::string& op_name) {
  const OpRegistry& reg = OpRegistry::instance();
  if (const OpSchema* s = reg.find(op_type, opset)) return *s;
  std::string who = std::string(op_type) + (op_name.empty() ? "" : " '" + op_name + "'");
  if (auto since = reg.introduced(op_type))
    throw TypeError(who + ": op '" + std::string(op_type) + "' needs opset " + target_name(*since) +
                    " or later, the function's opset is " + target_name(opset));
  throw TypeError("unknown op type '" + std::string(op_type) + "'");
}

Builder::Builder(Function& f) : fn_(&f), block_(&f.body()) {}

void Builder::set_insertion_point(Block* b, Operation* before) {
  block_ = b;
  before_ = before;
}

Arg Builder::arg(std::string name, Var* v) {
  Arg a;
  a.name = std::move(name);
  a.items.push_back(ArgItem{v, nullptr});
  return a;
}

Arg Builder::arg(std::string name, Value v) {
  Arg a;
  a.name = std::move(name);
  a.items.push_back(ArgItem{nullptr, std::make_shared<const Value>(std::move(v))});
  return a;
}

Var* Builder::add_const(std::shared_ptr<const Value> v, std::string name) {
  static const OpSchema* const_schema = OpRegistry::instance().find("const", Target::iOS13);
  Context& ctx = fn_->ctx();
  std::string n = name.empty() ? ctx.free_name("const") : std::move(name);
  Operation* op = fn_->new_op(*const_schema, std::string(), {}, {0});
  const Type* t;
  if (v->is_list()) {
    // coremltools' const of a mil_list: list[<element>, n], fixed length
    t = ctx.list(ctx.scalar(v->dtype()), ctx.constant(v->numel()), false);
  } else {
    std::vector<Dim> dims;
    dims.reserve(v->shape().size());
    for (int64_t d : v->shape()) dims.push_back(ctx.constant(d));
    t = ctx.tensor(v->dtype(), dims);
  }
  Var* out = fn_->add_output(op, n, t);
  op->set_name(std::move(n));
  out->set_value(std::move(v));
  op->set_location(loc_);
  fn_->insert(op, block_, before_);
  return out;
}

Var* Builder::op(std::string_view op_type, std::vector<std::pair<std::string, Var*>> inputs,
                 const std::string& name) {
  std::vector<Arg> args;
  for (auto& [n, v] : inputs) args.push_back(arg(n, v));
  auto outs = create(op_type, args, name);
  return outs.at(0);
}

namespace {

// coremltools' rule (Var.is_descendant_of_const): a value, a constexpr output, or an op over such
// constants (a dequantize of a const, a cast of a constexpr output that add_fp16_cast puts
// between the constexpr op and its reader; the serializer still requires a const or a constexpr
// output in the file, which const_elimination and cast_optimization leave)
bool is_const_like(const Var* v) { return is_descendant_of_const(v); }

std::string kind_name(InputKind k) {
  switch (k) {
    case InputKind::Tensor: return "a tensor";
    case InputKind::Tuple: return "a list of tensors";
    case InputKind::List: return "a list";
    case InputKind::ListOrTensor: return "a list or tensor";
    case InputKind::State: return "a state";
    case InputKind::Any: return "any value";
  }
  return "?";
}

bool kind_ok(InputKind k, const Type* t) {
  switch (k) {
    case InputKind::Tensor:
    case InputKind::Tuple: return t->is_tensor();
    case InputKind::List: return t->kind() == TypeKind::List;
    case InputKind::ListOrTensor:
      return t->is_tensor() || t->kind() == TypeKind::List || t->kind() == TypeKind::Dict;
    case InputKind::State: return t->kind() == TypeKind::State;
    case InputKind::Any: return true;
  }
  return false;
}

// Validates inputs in coremltools' order: shared domains, const-ness, dtype domain.
void validate(const InferCtx& ic, const OpSchema& s, const std::vector<Var*>& args,
              const std::vector<uint32_t>& starts) {
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    const InputDef& d = s.inputs[i];
    if (d.any_kind) continue;
    for (uint32_t k = starts[i]; k < starts[i + 1]; ++k) {
      if (!kind_ok(d.kind, args[k]->type()))
        ic.type_error(d.name, "must be " + kind_name(d.kind) + ", got " + args[k]->type()->str() +
                                  " ('" + args[k]->name() + "')");
    }
  }
  // 1. inputs sharing a domain id share a dtype
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    const InputDef& d = s.inputs[i];
    if (d.domain.empty() || d.any_kind || starts[i] == starts[i + 1]) continue;
    DataType first = args[starts[i]]->type()->dtype();
    for (uint32_t k = starts[i] + 1; k < starts[i + 1]; ++k)
      if (args[k]->type()->dtype() != first)
        ic.type_error(d.name, "elements must share one dtype, got " + std::string(dtype_name(first)) +
                                  " and " + std::string(dtype_name(args[k]->type()->dtype())));
    for (size_t j = 0; j < i; ++j) {
      const InputDef& e = s.inputs[j];
      if (e.domain != d.domain || starts[j] == starts[j + 1]) continue;
      DataType other = args[starts[j]]->type()->dtype();
      if (other != first)
        ic.type_error(d.name, "has dtype " + std::string(dtype_name(first)) + " whereas '" + e.name + "' has dtype " +
                                  std::string(dtype_name(other)) + " (both must share type domain " + d.domain +
                                  "). In op, of type " + s.name + ", named " + ic.op_name + ", the named input `" + d.name +
                                  "` must have the same data type as the named input `" + e.name + "`. However, " +
                                  d.name + " has dtype " + std::string(dtype_name(first)) + " whereas " + e.name +
                                  " has dtype " + std::string(dtype_name(other)) + ".");
    }
  }
  // 2. const inputs
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    const InputDef& d = s.inputs[i];
    if (!d.is_const) continue;
    for (uint32_t k = starts[i]; k < starts[i + 1]; ++k)
      if (!is_const_like(args[k]))
        ic.fail_input(d.name, "must be a compile-time constant, got non-const var '" +
                                  args[k]->name() + "'");
  }
  // 3. dtype domains
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    const InputDef& d = s.inputs[i];
    if ((d.kind != InputKind::Tensor && d.kind != InputKind::Tuple) || d.any_kind) continue;
    for (uint32_t k = starts[i]; k < starts[i + 1]; ++k) {
      DataType t = args[k]->type()->dtype();
      if (!d.dtypes.contains(t))
        ic.type_error(d.name, "has dtype " + std::string(dtype_name(t)) + ", expected one of {" +
                                  d.dtypes.str() + "}");
    }
  }
}

// Constant folding is skipped for outputs past this many elements, so a program like
// fill(shape=[2000000, 1000000]) is built (and typed) without allocating its value.
constexpr int64_t kMaxFoldElements = int64_t{1} << 24;

bool fold_allowed(const std::vector<const Type*>& outs) {
  for (const Type* t : outs) {
    if (!t->is_tensor() || !t->has_rank()) continue;
    int64_t n = 1;
    for (Dim d : t->shape()) {
      if (!d->is_const()) break;
      if (d->value() < 0 || __builtin_mul_overflow(n, d->value(), &n) || n > kMaxFoldElements)
        return false;
    }
  }
  return true;
}

/// Whether `s` casts a constant the way Value::cast does lazily (a weight's fp32 to fp16, bf16 to
/// fp32): such a cast folds at any size, since its value allocates nothing until it is read.
bool lazy_cast(const OpSchema& s, InferCtx& ic, const std::vector<const Type*>& outs) {
  if (s.name != "cast" || outs.size() != 1 || !outs[0]->is_tensor()) return false;
  const Value* x = ic.val("x");
  if (!x || x->is_symbolic()) return false;
  const DataType from = x->dtype(), to = outs[0]->dtype();
  return (from == DataType::Float32 && to == DataType::Float16) ||
         (from == DataType::BFloat16 && to == DataType::Float32);
}

}  // namespace

namespace {

// A small array on the stack, on the heap past N elements (per-call scratch of Builder::create).
template <class T, size_t N>
class Scratch {
 public:
  explicit Scratch(size_t n, T init) {
    if (n > N) heap_.assign(n, init);
    else std::fill(buf_, buf_ + n, init);
    ptr_ = n > N ? heap_.data() : buf_;
  }
  T& operator[](size_t i) { return ptr_[i]; }

 private:
  T buf_[N];
  std::vector<T> heap_;
  T* ptr_;
};

}  // namespace

std::vector<Var*> Builder::create(std::string_view op_type, std::vector<Arg>& args,
                                  std::string given_name, const BlockBuildFn& build_blocks) {
  const OpSchema* sp = nullptr;
  if (fn_->opset_auto()) {
    auto versions = OpRegistry::instance().versions(op_type);
    if (!versions.empty()) sp = versions.front();
  }
  const OpSchema& s = sp ? *sp : schema_for(op_type, fn_->opset(), given_name);
  return create(s, args, std::move(given_name), build_blocks);
}

std::vector<Var*> Builder::create(const OpSchema& s, std::vector<Arg>& args, std::string given_name,
                                  const BlockBuildFn& build_blocks) {
  Context& ctx = fn_->ctx();
  std::string name = given_name.empty() ? ctx.free_name(s.name) : std::move(given_name);
  const size_t n_in = s.inputs.size();
  const size_t n_args = args.size();

  // map args to slots
  Scratch<int, 16> slot_of(n_args, -1);
  Scratch<int, 16> given(n_in, -1);
  size_t n_items = 0;
  for (size_t a = 0; a < n_args; ++a) {
    const int slot = args[a].slot;
    int i = slot >= 0 && static_cast<size_t>(slot) < n_in && s.inputs[slot].name == args[a].name
                ? slot
                : s.input_index(args[a].name);
    if (i < 0)
      throw TypeError(s.name + " '" + name + "': Unknown input '" + args[a].name + "' for op '" + s.name +
                      "'; its inputs are: " + s.input_names());
    if (given[i] >= 0)
      throw TypeError(s.name + " '" + name + "': argument '" + args[a].name + "' given twice");
    const InputDef& d = s.inputs[i];
    if (d.kind != InputKind::Tuple && args[a].items.size() != 1)
      throw TypeError(s.name + " '" + name + "': input '" + d.name +
                      "' takes a single value, got a sequence of vars");
    slot_of[a] = i;
    given[i] = static_cast<int>(a);
    n_items += args[a].items.size();
  }

  // implicit consts, in the order the arguments were given
  // (most ops make at most a few: kept on the stack)
  Operation* created_buf[8];
  std::vector<Operation*> created_more;
  size_t n_created = 0;
  auto note_created = [&](Operation* op) {
    if (n_created < 8)
      created_buf[n_created] = op;
    else
      created_more.push_back(op);
    ++n_created;
  };
  auto rollback = [&] {
    for (size_t i = n_created; i-- > 0;) {
      Operation* op = i < 8 ? created_buf[i] : created_more[i - 8];
      if (!op->erased() && !op->output(0)->used()) op->parent()->erase(op);
    }
  };
  // the vars of argument a are item_vars[arg_start[a] ...] (items in order)
  Scratch<Var*, 16> item_vars(n_items, nullptr);
  size_t n_item_vars = 0;
  Scratch<uint32_t, 16> arg_start(n_args, 0);
  Scratch<Var*, 16> default_var(n_in, nullptr);
  try {
    for (size_t a = 0; a < n_args; ++a) {
      const InputDef& d = s.inputs[slot_of[a]];
      arg_start[a] = static_cast<uint32_t>(n_item_vars);
      for (size_t k = 0; k < args[a].items.size(); ++k) {
        ArgItem& it = args[a].items[k];
        if (it.var) {
          if (it.var->op() && it.var->op()->function() != fn_)
            throw ValueError(s.name + " '" + name + "': input '" + d.name + "' var '" +
                             it.var->name() + "' belongs to another function");
          item_vars[n_item_vars++] = it.var;
          continue;
        }
        std::string base;
        base.reserve(name.size() + d.name.size() + 4);
        base.append(name).append("_").append(d.name);
        if (d.kind == InputKind::Tuple) base += std::to_string(k);
        Var* c = add_const(it.value, ctx.free_name(std::move(base)));
        note_created(c->op());
        item_vars[n_item_vars++] = c;
      }
    }
    for (size_t i = 0; i < n_in; ++i)
      if (!s.inputs[i].optional && given[i] < 0 && s.inputs[i].kind != InputKind::Tuple)
        throw TypeError(s.name + " '" + name + "': missing required input '" + s.inputs[i].name +
                        "'; its inputs are: " + s.input_names());

    // the flat argument list in schema order
    std::vector<Var*> flat;
    std::vector<uint32_t> starts;
    auto flatten = [&] {
      flat.clear();
      flat.reserve(n_items + n_in);
      starts.clear();
      starts.reserve(n_in + 1);
      starts.push_back(0);
      for (size_t i = 0; i < n_in; ++i) {
        if (int a = given[i]; a >= 0)
          for (size_t k = 0; k < args[a].items.size(); ++k) flat.push_back(item_vars[arg_start[a] + k]);
        if (default_var[i]) flat.push_back(default_var[i]);  // only for an absent (or empty) input
        starts.push_back(static_cast<uint32_t>(flat.size()));
      }
    };
    flatten();
    {
      InferCtx ic(ctx, s, name, fn_->opset(), flat, starts, &loc_);
      validate(ic, s, flat, starts);
      // defaults
      std::vector<std::pair<std::string, Value>> dep;
      if (s.defaults) dep = s.defaults(ic);
      bool any_default = false;
      for (size_t i = 0; i < n_in; ++i) {
        if ((given[i] >= 0 && !args[given[i]].items.empty()) || !s.inputs[i].optional) continue;
        std::shared_ptr<const Value> v;
        for (auto& [dn, dv] : dep)
          if (dn == s.inputs[i].name) v = std::make_shared<const Value>(dv);
        if (!v) v = s.inputs[i].default_value;
        if (!v) continue;
        Var* c = add_const(v, ctx.free_name(name + "_" + s.inputs[i].name));
        note_created(c->op());
        default_var[i] = c;
        any_default = true;
      }
      if (any_default) flatten();
    }

    if (s.num_blocks > 0) return create_with_blocks(s, name, std::move(flat), std::move(starts), build_blocks);
    if (build_blocks) throw TypeError(s.name + " '" + name + "': takes no blocks");

    InferCtx ic(ctx, s, name, fn_->opset(), flat, starts, &loc_);
    std::vector<const Type*> out_types = s.infer(ic);
    if (s.num_outputs >= 0 && static_cast<int>(out_types.size()) != s.num_outputs)
      throw Error("internal: " + ic.where() + " inferred " + std::to_string(out_types.size()) +
                  " outputs, expected " + std::to_string(s.num_outputs));
    std::vector<std::shared_ptr<const Value>> out_vals;
    if (s.value && (fold_allowed(out_types) || lazy_cast(s, ic, out_types))) {
      if (!s.value(ic, out_vals)) out_vals.clear();
    }

    Operation* op = fn_->new_op(s, std::string(), std::move(flat), std::move(starts));
    op->set_location(loc_);
    for (size_t k = 0; k < out_types.size(); ++k) {
      std::string oname = name;
      if (out_types.size() > 1)
        oname += "_" + (k < s.output_names.size() ? s.output_names[k] : std::to_string(k));
      Var* out = fn_->add_output(op, std::move(oname), out_types[k]);
      if (k < out_vals.size()) out->set_value(std::move(out_vals[k]));
    }
    op->set_name(std::move(name));
    fn_->insert(op, block_, before_);
    if (fn_->opset_auto() && static_cast<int>(s.since) > static_cast<int>(fn_->opset()))
      fn_->set_opset(s.since);
    return op->outputs();
  } catch (...) {
    rollback();
    throw;
  }
}

std::vector<Var*> Builder::create_with_blocks(const OpSchema& s, const std::string& name,
                                              std::vector<Var*> flat, std::vector<uint32_t> starts,
                                              const BlockBuildFn& build_blocks) {
  Context& ctx = fn_->ctx();
  if (!build_blocks)
    throw TypeError(s.name + " '" + name + "': needs the functions that build its " +
                    std::to_string(s.num_blocks) + " blocks");
  Operation* op = fn_->new_op(s, name, std::move(flat), std::move(starts));
  op->set_location(loc_);
  fn_->insert(op, block_, before_);
  Block* saved_block = block_;
  Operation* saved_before = before_;
  Location saved_loc = loc_;
  try {
    build_blocks(*this, op);
    set_insertion_point(saved_block, saved_before);
    loc_ = saved_loc;
    if (static_cast<int>(op->blocks().size()) != s.num_blocks)
      throw Error("internal: " + op->describe() + " built " + std::to_string(op->blocks().size()) +
                  " blocks, expected " + std::to_string(s.num_blocks));
    InferCtx ic(ctx, s, name, fn_->opset(), op->args(), op->starts(), &loc_);
    ic.blocks = &op->blocks();
    std::vector<const Type*> out_types = s.infer(ic);
    std::vector<std::shared_ptr<const Value>> out_vals;
    if (s.value && fold_allowed(out_types) && !s.value(ic, out_vals)) out_vals.clear();
    for (size_t k = 0; k < out_types.size(); ++k) {
      std::string oname = name;
      if (out_types.size() > 1)
        oname += "_" + (k < s.output_names.size() ? s.output_names[k] : std::to_string(k));
      Var* out = fn_->add_output(op, oname, out_types[k]);
      if (k < out_vals.size() && out_vals[k]) out->set_value(std::move(out_vals[k]));
    }
  } catch (...) {
    set_insertion_point(saved_block, saved_before);
    loc_ = saved_loc;
    fn_->remove_blocks(op);
    if (!op->erased()) op->parent()->erase(op);
    throw;
  }
  if (fn_->opset_auto() && static_cast<int>(s.since) > static_cast<int>(fn_->opset())) fn_->set_opset(s.since);
  return op->outputs();
}

namespace {

// Whether `v` may be used in block `b`: defined in `b` or in a block enclosing it.
bool visible_in(const Var* v, const Block* b) {
  for (const Block* x = b; x; x = x->parent_op() ? x->parent_op()->parent() : nullptr) {
    if (v->op() ? v->op()->parent() == x : std::find(x->inputs().begin(), x->inputs().end(), v) != x->inputs().end())
      return true;
  }
  return false;
}

}  // namespace

Block* Builder::build_block(Operation* op, const std::vector<Var*>& inputs, const BlockFn& fn) {
  Block* blk = fn_->add_block(op);
  for (Var* v : inputs) {
    if (!v->input_of()) throw Error("internal: block input '" + v->name() + "' is not a block input var");
    fn_->share_block_input(blk, v);
  }
  fill_block(blk, fn);
  return blk;
}

void Builder::fill_block(Block* blk, const BlockFn& fn) {
  Operation* op = blk->parent_op();
  Block* saved_block = block_;
  Operation* saved_before = before_;
  set_insertion_point(blk, nullptr);
  std::vector<Var*> outs;
  try {
    outs = fn(blk->inputs());
  } catch (...) {
    set_insertion_point(saved_block, saved_before);
    throw;
  }
  set_insertion_point(saved_block, saved_before);
  for (Var* v : outs) {
    if (!v) throw ValueError(op->describe() + ": a block returned no var");
    const Function* owner = v->op() ? v->op()->function() : v->input_of()->function();
    if (owner != fn_)
      throw ValueError(op->describe() + ": block output '" + v->name() + "' belongs to another function");
    if (!visible_in(v, blk))
      throw ValueError(op->describe() + ": block output '" + v->name() +
                       "' is not visible in the block (it is defined in another block)");
  }
  blk->set_outputs(outs);
}

BlockBuildFn cond_blocks(BlockFn true_fn, BlockFn false_fn) {
  return [t = std::move(true_fn), f = std::move(false_fn)](Builder& b, Operation* op) {
    b.build_block(op, {}, t);
    b.build_block(op, {}, f);
  };
}

namespace {

bool same_value(const std::shared_ptr<const Value>& a, const std::shared_ptr<const Value>& b) {
  if (!a && !b) return true;
  if (!a || !b) return false;
  return a == b || a->equals(*b);
}

}  // namespace

BlockBuildFn while_loop_blocks(BlockFn cond_fn, BlockFn body_fn) {
  return [c = std::move(cond_fn), bd = std::move(body_fn)](Builder& b, Operation* op) {
    Function& fn = b.function();
    Context& ctx = fn.ctx();
    VarSpan lv = op->input("loop_vars");
    if (lv.empty()) throw ValueError(op->describe() + ": loop_vars must hold at least one var");
    std::vector<std::string> names;
    std::map<std::string, int> count;
    for (Var* v : lv) names.push_back(v->name() + "_x" + std::to_string(count[v->name()]++));
    std::vector<const Type*> types;
    std::vector<std::shared_ptr<const Value>> values;
    for (Var* v : lv) {
      types.push_back(v->type());
      values.push_back(v->value());
    }
    std::vector<Var*> exits;
    auto build = [&] {
      // the cond block's inputs, shared by the body block
      Block* cb = fn.add_block(op);
      for (size_t i = 0; i < lv.size(); ++i) {
        Var* x = fn.add_block_input(cb, names[i], types[i]);
        if (values[i]) x->set_value(values[i]);
      }
      b.fill_block(cb, [&](const std::vector<Var*>& xs) {
        std::vector<Var*> r = c(xs);
        if (r.size() != 1 || !r[0]->type()->is_tensor() || r[0]->type()->dtype() != DataType::Bool)
          throw ValueError(op->describe() + ": _cond must return one bool var" +
                           (r.size() == 1 ? ", got " + r[0]->type()->str() + " ('" + r[0]->name() + "')"
                                          : ", got " + std::to_string(r.size()) + " vars"));
        return r;
      });
      b.build_block(op, cb->inputs(), [&](const std::vector<Var*>& xs) {
        std::vector<Var*> r = bd(xs);
        if (r.size() != xs.size())
          throw ValueError(op->describe() + ": _body must return " + std::to_string(xs.size()) +
                           " vars (one per loop var), got " + std::to_string(r.size()));
        return r;
      });
      exits = op->blocks()[1]->outputs();
    };
    build();
    // generalize the loop vars whose type or value the body changes, and rebuild until the
    // body's outputs fit (a dim made fresh in one round can make another dim fresh in the next)
    for (int round = 0;; ++round) {
      bool changed = false;
      for (size_t i = 0; i < lv.size(); ++i) {
        const Type* tin = types[i];
        const Type* tout = exits[i]->type();
        if (!is_subtype(tout, tin)) {
          if (!tin->is_tensor() || !tout->is_tensor() || tin->dtype() != tout->dtype() || !tin->has_rank() ||
              !tout->has_rank() || tin->rank() != tout->rank()) {
            if (round == 0)
              throw ValueError("loop_vars '" + names[i] + "' changes in the body of while_loop '" + op->name() +
                               "':\n " + tin->str() + " -> " + tout->str());
            throw ValueError("Block output " + exits[i]->name() + ": " + tout->str() +
                             " is not a subtype of block input " + names[i] + ": " + tin->str() +
                             " after factoring shape changes");
          }
          std::vector<Dim> shape;
          for (int k = 0; k < tin->rank(); ++k) {
            Dim x = tin->shape()[k], y = tout->shape()[k];
            shape.push_back(x == y ? x : ctx.fresh());
          }
          types[i] = ctx.tensor(tin->dtype(), shape);
          changed = true;
        }
        if (values[i] && !same_value(exits[i]->value(), values[i])) {  // an unknown value admits any
          values[i] = nullptr;
          changed = true;
        }
      }
      if (!changed) return;
      if (round == 3)
        throw ValueError("while_loop '" + op->name() + "': the loop vars' types do not settle after 4 rebuilds");
      fn.remove_blocks(op);
      build();
    }
  };
}

std::vector<const Type*> infer_types(Operation* op) {
  Function* fn = op->function();
  InferCtx ic(fn->ctx(), op->schema(), op->name(), fn->opset(), op->args(), op->starts(),
              &op->location());
  ic.blocks = &op->blocks();
  if (static_cast<int>(op->blocks().size()) != op->schema().num_blocks)
    throw ValueError(op->describe() + " has " + std::to_string(op->blocks().size()) + " blocks, " + op->op_type() +
                     " takes " + std::to_string(op->schema().num_blocks));
  return op->schema().infer(ic);
}

}  // namespace milkit
