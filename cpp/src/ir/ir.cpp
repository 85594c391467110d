#include "milkit/ir/ir.h"

#include <stdlib.h>  // posix_memalign

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <new>
#include <unordered_set>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "milkit/ops/registry.h"
#include "milkit/types/error.h"

namespace milkit {

namespace detail {

void* arena_chunk_alloc(size_t bytes, size_t align) {
  if (align < kHugeChunk) return ::operator new(bytes, std::align_val_t(align));
  // whole huge pages (the advice must cover the whole page for the kernel to back it with one).
  // posix_memalign rather than std::aligned_alloc: macOS's libc++ declares the latter only when
  // targeting macOS 10.15 or later.
  const size_t whole = (bytes + align - 1) / align * align;
  void* p = nullptr;
  if (::posix_memalign(&p, align, whole) != 0) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  madvise(p, whole, MADV_HUGEPAGE);  // advice only: without transparent huge pages nothing changes
#endif
  return p;
}

void arena_chunk_free(void* p, size_t, size_t align) {
  if (align < kHugeChunk)
    ::operator delete(p, std::align_val_t(align));
  else
    std::free(p);
}

}  // namespace detail

std::string Location::str() const {
  if (!file || line <= 0) return "";
  return *file + ":" + std::to_string(line);
}

bool is_descendant_of_const(const Var* v) {
  // iterative (deep chains must not exhaust the stack): the var is a constant unless a block or
  // function input is reachable through ops that are neither valued nor constexpr
  auto terminal = [](const Var* x) {
    return x->has_value() || (x->op() && x->op()->schema().is_constexpr);
  };
  if (terminal(v)) return true;
  std::vector<const Var*> todo{v};
  std::unordered_set<const Var*> seen{v};
  while (!todo.empty()) {
    const Var* x = todo.back();
    todo.pop_back();
    const Operation* op = x->op();
    if (!op) return false;
    for (const Var* a : op->args())
      if (!terminal(a) && seen.insert(a).second) todo.push_back(a);
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Var

void Var::touch() {
  Function* f = op_ ? op_->function_ : (input_of_ ? input_of_->function() : nullptr);
  if (f) ++f->epoch_;
}

void Var::set_name(std::string n) {
  if (n == name_) return;
  name_ = std::move(n);
  touch();
}

void Var::set_type(const Type* t) {
  if (t == type_) return;
  type_ = t;
  touch();
}

void Var::set_value(std::shared_ptr<const Value> v) {
  if (v == value_) return;
  value_ = std::move(v);
  touch();
}

void Var::replace_all_uses_with(Var* other) {
  if (other == this) return;
  // set_arg edits uses_: walk a copy, in order (on the stack for a few uses)
  const size_t n = uses_.size();
  if (n <= 4) {
    Use buf[4];
    std::copy(uses_.begin(), uses_.end(), buf);
    for (size_t i = 0; i < n; ++i) buf[i].op->set_arg(buf[i].slot, other);
  } else {
    auto uses = uses_;
    for (const Use& u : uses) u.op->set_arg(u.slot, other);
  }
  if (block_uses_.empty()) return;
  auto blocks = block_uses_;
  for (Block* b : blocks) {
    std::vector<Var*> outs = b->outputs();
    for (auto& o : outs)
      if (o == this) o = other;
    b->set_outputs(outs);
  }
}

// ---------------------------------------------------------------------------------------------
// Operation

const std::string& Operation::op_type() const { return schema_->name; }

void Operation::set_name(std::string n) {
  if (n == name_) return;
  name_ = std::move(n);
  ++function_->epoch_;
}

std::map<std::string, std::shared_ptr<const Value>>& Operation::attributes() {
  ++function_->epoch_;  // the caller may change them
  if (!attrs_) attrs_ = std::make_unique<std::map<std::string, std::shared_ptr<const Value>>>();
  return *attrs_;
}

const std::map<std::string, std::shared_ptr<const Value>>& Operation::attributes() const {
  static const std::map<std::string, std::shared_ptr<const Value>> kNone;
  return attrs_ ? *attrs_ : kNone;
}

int Operation::input_index(std::string_view name) const { return schema_->input_index(name); }

VarSpan Operation::input(std::string_view name) const {
  int i = input_index(name);
  if (i < 0) return {};
  return input(static_cast<size_t>(i));
}

Var* Operation::input1(std::string_view name) const {
  VarSpan s = input(name);
  return s.empty() ? nullptr : s[0];
}

namespace {
void remove_use(Var* v, Operation* op, uint32_t slot) {
  auto& u = v->uses();
  auto& uses = const_cast<std::vector<Use>&>(u);
  for (size_t i = 0; i < uses.size(); ++i)
    if (uses[i].op == op && uses[i].slot == slot) {
      uses[i] = uses.back();
      uses.pop_back();
      return;
    }
}
}  // namespace

void Operation::set_arg(size_t slot, Var* v) {
  Var* old = args_.at(slot);
  if (old == v) return;
  ++function_->epoch_;
  if (!erased_) {
    remove_use(old, this, static_cast<uint32_t>(slot));
    v->uses_.push_back(Use{this, static_cast<uint32_t>(slot)});
  }
  args_[slot] = v;
}

std::string Operation::describe() const {
  std::string s = op_type() + " '" + name_ + "'";
  std::string l = loc_.str();
  if (!l.empty()) s += " (at " + l + ")";
  return s;
}

// ---------------------------------------------------------------------------------------------
// Block

std::vector<Operation*> Block::ops() const {
  std::vector<Operation*> r;
  r.reserve(size_);
  for (Operation* op = first_; op; op = op->next_) r.push_back(op);
  return r;
}

void Block::set_outputs(const std::vector<Var*>& outs) {
  if (outs == outputs_) return;  // unchanged (use lists included)
  ++function_->epoch_;
  for (Var* v : outputs_) {
    auto& bu = v->block_uses_;
    auto it = std::find(bu.begin(), bu.end(), this);
    if (it != bu.end()) bu.erase(it);
  }
  outputs_ = outs;
  for (Var* v : outputs_) v->block_uses_.push_back(this);
}

void Block::set_output(size_t i, Var* v) {
  std::vector<Var*> outs = outputs_;
  outs.at(i) = v;
  set_outputs(outs);
}

void Block::link_before(Operation* op, Operation* before) {
  ++function_->epoch_;
  op->parent_ = this;
  if (!before) {
    op->prev_ = last_;
    op->next_ = nullptr;
    if (last_) last_->next_ = op;
    else first_ = op;
    last_ = op;
  } else {
    if (before->parent_ != this) throw ValueError("insertion point is not in this block");
    op->next_ = before;
    op->prev_ = before->prev_;
    if (before->prev_) before->prev_->next_ = op;
    else first_ = op;
    before->prev_ = op;
  }
  ++size_;
}

void Block::unlink(Operation* op) {
  ++function_->epoch_;
  if (op->prev_) op->prev_->next_ = op->next_;
  else first_ = op->next_;
  if (op->next_) op->next_->prev_ = op->prev_;
  else last_ = op->prev_;
  op->prev_ = op->next_ = nullptr;
  --size_;
}

void Block::clear() {
  set_outputs({});
  for (Operation* o = last_; o;) {
    Operation* p = o->prev_;
    for (Var* out : o->outputs_) {
      out->uses_.clear();
      out->block_uses_.clear();
    }
    erase(o);
    o = p;
  }
}

void Block::erase(Operation* op) {
  if (op->parent_ != this || op->erased_) throw ValueError("erase: op is not in this block");
  for (Var* out : op->outputs_)
    if (out->used())
      throw ValueError("cannot erase " + op->describe() + ": output '" + out->name() +
                       "' is still used");
  // erase nested blocks' ops, last first
  for (Block* b : op->blocks_) b->clear();
  for (size_t s = 0; s < op->args_.size(); ++s) remove_use(op->args_[s], op, static_cast<uint32_t>(s));
  unlink(op);
  op->erased_ = true;
  op->parent_ = nullptr;
  --op->function_->type_counts_[op->type_id_];
  --op->function_->live_ops_;
  if (op->schema_->num_blocks > 0) --op->function_->block_ops_;
  for (Var* out : op->outputs_) out->value_.reset();  // release weights held by dead consts
}

void Block::move_before(Operation* op, Operation* before) {
  if (op == before) return;
  if (op->parent_ == this && (before ? op->next_ == before : op == last_)) return;  // in place
  unlink(op);
  link_before(op, before);
}

// ---------------------------------------------------------------------------------------------
// Function

Function::Function(Target opset, std::shared_ptr<Context> ctx)
    : ctx_(ctx ? std::move(ctx) : std::make_shared<Context>()), opset_(opset) {
  body_ = blocks_.make();
  body_->function_ = this;
}

Function::~Function() = default;

Var* Function::add_input(const std::string& name, const Type* type) {
  return add_block_input(body_, name, type);
}

Var* Function::add_block_input(Block* b, const std::string& name, const Type* type) {
  ++epoch_;
  Var* v = vars_.make();
  v->name_ = name;
  v->type_ = type;
  v->input_of_ = b;
  b->inputs_.push_back(v);
  return v;
}

Operation* Function::new_op(const OpSchema& schema, std::string name, std::vector<Var*> args,
                            std::vector<uint32_t> starts) {
  Operation* op = ops_.make();
  op->schema_ = &schema;
  op->type_id_ = schema.type_id;
  op->name_ = std::move(name);
  op->args_ = std::move(args);
  op->starts_ = std::move(starts);
  op->function_ = this;
  op->erased_ = true;  // detached until inserted
  return op;
}

Var* Function::add_output(Operation* op, std::string name, const Type* type) {
  ++epoch_;
  Var* v = vars_.make();
  v->name_ = std::move(name);
  v->type_ = type;
  v->op_ = op;
  v->index_ = static_cast<int>(op->outputs_.size());
  op->outputs_.push_back(v);
  op->out0_ = op->outputs_.front();
  return v;
}

Block* Function::add_block(Operation* op) {
  ++epoch_;
  Block* b = blocks_.make();
  b->function_ = this;
  b->parent_op_ = op;
  op->blocks_.push_back(b);
  return b;
}

void Function::share_block_input(Block* b, Var* v) {
  ++epoch_;
  b->inputs_.push_back(v);
}

void Function::remove_blocks(Operation* op) {
  ++epoch_;
  for (Block* b : op->blocks_) {
    b->clear();
    b->parent_op_ = nullptr;
  }
  op->blocks_.clear();
}

void Function::remove_args(Operation* op, size_t input, const std::vector<size_t>& elems) {
  ++epoch_;
  std::vector<bool> drop(op->args_.size(), false);
  uint32_t lo = op->starts_.at(input), hi = op->starts_.at(input + 1);
  for (size_t e : elems) {
    if (lo + e >= hi) throw ValueError("remove_args: element " + std::to_string(e) + " out of range");
    drop[lo + e] = true;
  }
  if (!op->erased_)
    for (size_t sl = 0; sl < op->args_.size(); ++sl) remove_use(op->args_[sl], op, static_cast<uint32_t>(sl));
  std::vector<Var*> args;
  std::vector<uint32_t> starts(1, 0);
  for (size_t i = 0; i + 1 < op->starts_.size(); ++i) {
    for (uint32_t k = op->starts_[i]; k < op->starts_[i + 1]; ++k)
      if (!drop[k]) args.push_back(op->args_[k]);
    starts.push_back(static_cast<uint32_t>(args.size()));
  }
  op->args_ = std::move(args);
  op->starts_ = std::move(starts);
  if (!op->erased_)
    for (size_t sl = 0; sl < op->args_.size(); ++sl)
      op->args_[sl]->uses_.push_back(Use{op, static_cast<uint32_t>(sl)});
}

void Function::remove_outputs(Operation* op, const std::vector<size_t>& idx) {
  ++epoch_;
  std::vector<bool> drop(op->outputs_.size(), false);
  for (size_t i : idx) {
    Var* v = op->outputs_.at(i);
    if (v->used()) throw ValueError("remove_outputs: output '" + v->name() + "' of " + op->describe() + " is still used");
    drop[i] = true;
  }
  std::vector<Var*> outs;
  for (size_t i = 0; i < op->outputs_.size(); ++i)
    if (!drop[i]) {
      op->outputs_[i]->index_ = static_cast<int>(outs.size());
      outs.push_back(op->outputs_[i]);
    }
  op->outputs_ = std::move(outs);  // dropped vars keep op_ (Python handles may still ask)
  op->out0_ = op->outputs_.empty() ? nullptr : op->outputs_.front();
}

void Function::remove_block_inputs(Block* b, const std::vector<size_t>& idx) {
  ++epoch_;
  std::vector<bool> drop(b->inputs_.size(), false);
  for (size_t i : idx) drop.at(i) = true;
  std::vector<Var*> ins;
  for (size_t i = 0; i < b->inputs_.size(); ++i)
    if (!drop[i]) ins.push_back(b->inputs_[i]);
  b->inputs_ = std::move(ins);
}

void Function::insert(Operation* op, Block* b, Operation* before) {
  if (!op->erased_) throw ValueError("insert: op is already in a block");
  b->link_before(op, before);
  op->erased_ = false;
  uint16_t id = op->type_id_;
  if (id >= type_counts_.size()) type_counts_.resize(std::max<size_t>(OpRegistry::instance().num_types(), id + 1));
  ++type_counts_[id];
  ++live_ops_;
  if (op->schema_->num_blocks > 0) ++block_ops_;
  for (size_t s = 0; s < op->args_.size(); ++s)
    op->args_[s]->uses_.push_back(Use{op, static_cast<uint32_t>(s)});
}

size_t Function::count_ops(std::string_view op_type) const {
  int id = OpRegistry::instance().type_id(op_type);
  return id < 0 ? 0 : count_ops(static_cast<uint16_t>(id));
}

bool Function::has_op_type(std::initializer_list<std::string_view> op_types) const {
  for (std::string_view t : op_types)
    if (count_ops(t)) return true;
  return false;
}

std::vector<Operation*> Function::all_ops() const {
  std::vector<Operation*> r;
  std::function<void(const Block*)> walk = [&](const Block* b) {
    for (Operation* op = b->front(); op; op = op->next()) {
      r.push_back(op);
      for (Block* nb : op->blocks()) walk(nb);
    }
  };
  walk(body_);
  return r;
}

void Function::mark_clean(const std::string& key, const Program* p) {
  for (CleanMark& m : clean_)
    if (m.key == key) {
      m.program = p;
      m.epoch = epoch_;
      return;
    }
  clean_.push_back(CleanMark{key, p, epoch_});
}

bool Function::is_clean(const std::string& key, const Program* p) const {
  for (const CleanMark& m : clean_)
    if (m.key == key) return m.program == p && m.epoch == epoch_;
  return false;
}

Var* Function::find_var(const std::string& name) const {
  for (Var* v : body_->inputs())
    if (v->name() == name) return v;
  for (Operation* op : all_ops())
    for (Var* v : op->outputs())
      if (v->name() == name) return v;
  return nullptr;
}

const ImageInput* Function::image_input(size_t index) const {
  for (const ImageInput& im : image_inputs_)
    if (im.input == index) return &im;
  return nullptr;
}

const ImageOutput* Function::image_output(size_t index) const {
  for (const ImageOutput& im : image_outputs_)
    if (im.output == index) return &im;
  return nullptr;
}

const char* color_layout_name(ColorLayout c) {
  switch (c) {
    case ColorLayout::RGB:
      return "RGB";
    case ColorLayout::BGR:
      return "BGR";
    case ColorLayout::Grayscale:
      return "G";
    case ColorLayout::GrayscaleFloat16:
      return "G_FLOAT16";
  }
  return "?";
}

ColorLayout parse_color_layout(const std::string& s) {
  if (s == "RGB") return ColorLayout::RGB;
  if (s == "BGR") return ColorLayout::BGR;
  if (s == "G" || s == "GRAYSCALE") return ColorLayout::Grayscale;
  if (s == "G_FLOAT16" || s == "GRAYSCALE_FLOAT16") return ColorLayout::GrayscaleFloat16;
  throw ValueError("unknown color layout '" + s +
                   "'; expected RGB, BGR, GRAYSCALE or GRAYSCALE_FLOAT16");
}

int color_channels(ColorLayout c) { return c == ColorLayout::RGB || c == ColorLayout::BGR ? 3 : 1; }

// ---------------------------------------------------------------------------------------------
// Program

void Program::add_function(const std::string& name, std::shared_ptr<Function> f) {
  if (function(name)) throw ValueError("program already has a function named '" + name + "'");
  if (!functions_.empty() && functions_.front().second->opset() != f->opset())
    throw ValueError("function '" + name + "' has opset " + target_name(f->opset()) +
                     " but the program's functions use " +
                     target_name(functions_.front().second->opset()));
  functions_.emplace_back(name, std::move(f));
}

Function* Program::function(const std::string& name) const {
  for (auto& [n, f] : functions_)
    if (n == name) return f.get();
  return nullptr;
}

}  // namespace milkit
