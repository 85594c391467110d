// milkit/ir/ir.h - Program, Function, Block, Operation, Var.
//
// Ownership: a Function owns everything in it (its Context, blocks, ops, vars). Ops in a block
// form an intrusive doubly linked list; erasing an op unlinks it and drops its uses but keeps the
// object alive until the Function dies, so handles held elsewhere (Python) never dangle.
#pragma once

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "milkit/ir/image_type.h"
#include "milkit/ir/value.h"
#include "milkit/types/target.h"
#include "milkit/types/type.h"

namespace milkit {

class Operation;
class Block;
class Function;
class Program;
struct OpSchema;

/// Where an op was created: the user's source file and line.
struct Location {
  std::shared_ptr<const std::string> file;  ///< Shared file name (may be null).
  int line = 0;                             ///< 1-based line, 0 when unknown.
  /// "file.py:12" or "" when unknown.
  std::string str() const;
};

/// One use of a var: op input `input`, element `elem` (for tuple inputs).
struct Use {
  Operation* op;  ///< The consuming op.
  uint32_t slot;  ///< Index into the op's flat argument list.
};

/// An SSA value: an op output, a function input or a block input.
class Var {
 public:
  /// The var's name (unique in its function).
  const std::string& name() const { return name_; }
  /// Renames the var.
  void set_name(std::string n);
  /// The var's type.
  const Type* type() const { return type_; }
  /// Changes the type (used by passes and re-inference).
  void set_type(const Type* t);
  /// The producing op, or nullptr for function and block inputs.
  Operation* op() const { return op_; }
  /// Output index in the producing op.
  int index() const { return index_; }
  /// The block whose input this is (for block / function inputs).
  Block* input_of() const { return input_of_; }
  /// Op inputs that read this var.
  const std::vector<Use>& uses() const { return uses_; }
  /// Blocks that return this var.
  const std::vector<Block*>& block_uses() const { return block_uses_; }
  /// Whether anything uses the var.
  bool used() const { return !uses_.empty() || !block_uses_.empty(); }
  /// The compile-time value (known or symbolic), or nullptr.
  const std::shared_ptr<const Value>& value() const { return value_; }
  /// Whether a fully known value is attached.
  bool has_value() const { return value_ && !value_->is_symbolic(); }
  /// Sets the compile-time value.
  void set_value(std::shared_ptr<const Value> v);
  /// Makes every use of this var (ops and block outputs) use `other` instead.
  void replace_all_uses_with(Var* other);

 private:
  friend class Operation;
  friend class Block;
  friend class Function;
  void touch();  // raises the owning function's epoch
  // hot fields first (passes read the producer, type, value and uses of many vars)
  Operation* op_ = nullptr;
  const Type* type_ = nullptr;
  std::shared_ptr<const Value> value_;
  std::vector<Use> uses_;
  std::vector<Block*> block_uses_;
  Block* input_of_ = nullptr;
  int index_ = 0;
  std::string name_;
};

/// coremltools' Var.is_descendant_of_const: whether `v` is a compile-time constant, i.e. it has a
/// known value, is the output of a constexpr_* op, or comes from an op whose inputs are all such
/// constants (cast(constexpr_affine_dequantize(...)) is one). Function and block inputs are not.
bool is_descendant_of_const(const Var* v);

/// A contiguous view of vars (one op input: one var, or several for a tuple input).
struct VarSpan {
  Var* const* ptr = nullptr;  ///< First element.
  size_t n = 0;               ///< Element count.
  /// Iteration.
  Var* const* begin() const { return ptr; }
  /// End of iteration.
  Var* const* end() const { return ptr + n; }
  /// Number of vars.
  size_t size() const { return n; }
  /// Whether absent.
  bool empty() const { return n == 0; }
  /// Element i.
  Var* operator[](size_t i) const { return ptr[i]; }
};

/// An operation: an instance of a registered op schema.
class Operation {
 public:
  /// The schema this op was built from.
  const OpSchema& schema() const { return *schema_; }
  /// The op type name ("add").
  const std::string& op_type() const;
  /// The op type's dense id (OpSchema::type_id): compare with a cached op_type_id("add") instead
  /// of comparing op_type() strings on hot paths.
  uint16_t type_id() const { return type_id_; }
  /// The op's name (unique in its function).
  const std::string& name() const { return name_; }
  /// Renames the op.
  void set_name(std::string n);
  /// Number of schema inputs (present or not).
  size_t num_inputs() const { return starts_.empty() ? 0 : starts_.size() - 1; }
  /// Vars bound to schema input i (empty when absent).
  VarSpan input(size_t i) const { return {args_.data() + starts_[i], starts_[i + 1] - starts_[i]}; }
  /// Vars bound to the named input (empty when absent or unknown).
  VarSpan input(std::string_view name) const;
  /// The first var of the named input, or nullptr.
  Var* input1(std::string_view name) const;
  /// Index of a schema input by name, -1 when unknown.
  int input_index(std::string_view name) const;
  /// The flat argument list.
  const std::vector<Var*>& args() const { return args_; }
  /// Offsets of each schema input in args() (size num_inputs() + 1).
  const std::vector<uint32_t>& starts() const { return starts_; }
  /// Replaces the var in flat argument slot `slot`, keeping use lists right.
  void set_arg(size_t slot, Var* v);
  /// Output vars.
  const std::vector<Var*>& outputs() const { return outputs_; }
  /// Output i.
  Var* output(size_t i = 0) const { return i == 0 && out0_ ? out0_ : outputs_.at(i); }
  /// Number of outputs.
  size_t num_outputs() const { return outputs_.size(); }
  /// Nested blocks (control flow).
  const std::vector<Block*>& blocks() const { return blocks_; }
  /// The enclosing block.
  Block* parent() const { return parent_; }
  /// Next op in the block, or nullptr.
  Operation* next() const { return next_; }
  /// Previous op in the block, or nullptr.
  Operation* prev() const { return prev_; }
  /// Where the op was created.
  const Location& location() const { return loc_; }
  /// Sets the location.
  void set_location(Location l) { loc_ = std::move(l); }
  /// Extra attributes (constexpr parameters before iOS18, etc.), by name.
  std::map<std::string, std::shared_ptr<const Value>>& attributes();
  /// Extra attributes, read-only.
  const std::map<std::string, std::shared_ptr<const Value>>& attributes() const;
  /// Whether the op was erased from its block.
  bool erased() const { return erased_; }
  /// The function that owns the op.
  Function* function() const { return function_; }
  /// "op_type 'name'" plus the location, for messages.
  std::string describe() const;

 private:
  friend class Block;
  friend class Function;
  friend class Var;
  // hot fields first: a walk over a block reads the links, the type and the outputs of each op
  Operation* next_ = nullptr;
  Operation* prev_ = nullptr;
  Block* parent_ = nullptr;
  uint16_t type_id_ = 0;
  bool erased_ = false;
  Var* out0_ = nullptr;  // outputs_[0] beside the links (walks read it without another miss)
  std::vector<Var*> outputs_;
  std::vector<Block*> blocks_;
  const OpSchema* schema_ = nullptr;
  std::vector<Var*> args_;
  std::vector<uint32_t> starts_;
  Function* function_ = nullptr;
  std::string name_;
  std::unique_ptr<std::map<std::string, std::shared_ptr<const Value>>> attrs_;  // made when first set
  Location loc_;
};

/// A block: inputs, a list of ops, outputs.
class Block {
 public:
  /// First op or nullptr.
  Operation* front() const { return first_; }
  /// Last op or nullptr.
  Operation* back() const { return last_; }
  /// Number of ops.
  size_t size() const { return size_; }
  /// Block inputs (function inputs for the body of a function).
  const std::vector<Var*>& inputs() const { return inputs_; }
  /// Block outputs.
  const std::vector<Var*>& outputs() const { return outputs_; }
  /// Sets the outputs, keeping use lists right.
  void set_outputs(const std::vector<Var*>& outs);
  /// Replaces output i.
  void set_output(size_t i, Var* v);
  /// The op owning this block (nullptr for a function body).
  Operation* parent_op() const { return parent_op_; }
  /// The owning function.
  Function* function() const { return function_; }
  /// Ops in order (a snapshot, safe to mutate the block while iterating it).
  std::vector<Operation*> ops() const;
  /// Unlinks `op`, drops its uses; its outputs must be unused. The object stays alive.
  void erase(Operation* op);
  /// Erases every op (last first, with the uses among them) and the outputs.
  void clear();
  /// Moves `op` to just before `before` (nullptr: the end).
  void move_before(Operation* op, Operation* before);

 private:
  friend class Function;
  friend class Operation;
  void link_before(Operation* op, Operation* before);
  void unlink(Operation* op);
  Operation* first_ = nullptr;
  Operation* last_ = nullptr;
  size_t size_ = 0;
  std::vector<Var*> inputs_;
  std::vector<Var*> outputs_;
  Operation* parent_op_ = nullptr;
  Function* function_ = nullptr;
};

namespace detail {
/// Raw chunk memory for ObjectArena: `bytes` at `align`; a chunk of kHugeChunk bytes is
/// aligned to it and advised for transparent huge pages (on Linux), so big functions take one
/// page fault, and one TLB entry, per 2 MiB of IR objects instead of 512.
void* arena_chunk_alloc(size_t bytes, size_t align);
/// Frees memory from arena_chunk_alloc.
void arena_chunk_free(void* p, size_t bytes, size_t align);
/// The size of the large chunks (one huge page).
constexpr size_t kHugeChunk = size_t{2} << 20;

/// Stable storage for IR objects: chunks of objects, constructed as they are handed out in order
/// (one allocation per chunk instead of one per object, and neighbours in memory). Chunks double
/// from 8 objects; past 256 KiB they are one huge page each.
template <class T>
class ObjectArena {
 public:
  ObjectArena() = default;
  ObjectArena(const ObjectArena&) = delete;
  ObjectArena& operator=(const ObjectArena&) = delete;
  ~ObjectArena() {
    for (Chunk& c : chunks_) {
      for (size_t i = c.used; i-- > 0;) c.mem[i].~T();
      arena_chunk_free(c.mem, c.cap * sizeof(T), c.align);
    }
  }
  /// A fresh object owned by the arena.
  T* make() {
    if (chunks_.empty() || chunks_.back().used == chunks_.back().cap) grow();
    Chunk& c = chunks_.back();
    T* p = new (c.mem + c.used) T();
    ++c.used;
    return p;
  }

 private:
  struct Chunk {
    T* mem;
    size_t cap, used, align;
  };
  void grow() {
    size_t cap = chunks_.empty() ? 8 : chunks_.back().cap * 2;
    size_t align = alignof(T);
    if (cap * sizeof(T) > kHugeChunk / 8) {
      cap = kHugeChunk / sizeof(T);
      align = kHugeChunk;
    }
    chunks_.reserve(chunks_.size() + 1);  // no throw between the allocation and the push
    T* mem = static_cast<T*>(arena_chunk_alloc(cap * sizeof(T), align));
    chunks_.push_back(Chunk{mem, cap, 0, align});
  }
  std::vector<Chunk> chunks_;
};
}  // namespace detail

/// A function: typed inputs, an opset, a body block. Owns all its IR objects.
class Function : public std::enable_shared_from_this<Function> {
 public:
  /// Creates an empty function with its own context (or a shared one).
  explicit Function(Target opset, std::shared_ptr<Context> ctx = nullptr);
  Function(const Function&) = delete;
  Function& operator=(const Function&) = delete;
  ~Function();

  /// The context of types, dims and names.
  Context& ctx() const { return *ctx_; }
  /// The shared context.
  const std::shared_ptr<Context>& ctx_ptr() const { return ctx_; }
  /// The opset the function is written in.
  Target opset() const { return opset_; }
  /// Changes the opset.
  void set_opset(Target t) {
    if (t != opset_) ++epoch_;
    opset_ = t;
  }
  /// Whether the opset follows the ops used (coremltools' behaviour when no opset is given):
  /// each op takes its oldest version and the function's opset rises to the newest op's.
  bool opset_auto() const { return opset_auto_; }
  /// Sets opset_auto().
  void set_opset_auto(bool a) {
    if (a != opset_auto_) ++epoch_;
    opset_auto_ = a;
  }
  /// The function body.
  Block& body() { return *body_; }
  /// The function body, read-only.
  const Block& body() const { return *body_; }
  /// Inputs, in declaration order.
  const std::vector<Var*>& inputs() const { return body_->inputs_; }
  /// Adds a function input.
  Var* add_input(const std::string& name, const Type* type);
  /// Adds a block input to a nested block.
  Var* add_block_input(Block* b, const std::string& name, const Type* type);
  /// Creates a detached op (not yet in a block) with its flat args and output types.
  Operation* new_op(const OpSchema& schema, std::string name, std::vector<Var*> args,
                    std::vector<uint32_t> starts);
  /// Adds an output var to an op under construction.
  Var* add_output(Operation* op, std::string name, const Type* type);
  /// Adds a nested block to an op.
  Block* add_block(Operation* op);
  /// Makes an existing block input also an input of block `b` (while_loop's cond and body
  /// blocks share their inputs, as in coremltools).
  void share_block_input(Block* b, Var* v);
  /// Erases every op of the op's nested blocks and removes the blocks (to rebuild them).
  void remove_blocks(Operation* op);
  /// Removes elements `elems` (indices, any order) of the tuple input `input` of an op.
  void remove_args(Operation* op, size_t input, const std::vector<size_t>& elems);
  /// Removes outputs `idx` of an op (they must be unused); later outputs are renumbered.
  void remove_outputs(Operation* op, const std::vector<size_t>& idx);
  /// Removes inputs `idx` of a nested block (they must be unused by the block's ops and outputs).
  void remove_block_inputs(Block* b, const std::vector<size_t>& idx);
  /// Inserts a detached op before `before` (nullptr: end of block `b`).
  void insert(Operation* op, Block* b, Operation* before);
  /// Number of live ops over all blocks.
  size_t num_ops() const { return live_ops_; }
  /// Number of live ops (nested blocks included) whose schema has type id `type_id`
  /// (OpSchema::type_id); kept up to date by insert and erase, so it costs one load.
  size_t count_ops(uint16_t type_id) const {
    return type_id < type_counts_.size() ? type_counts_[type_id] : 0;
  }
  /// Number of live ops of the named type (0 for names no op has).
  size_t count_ops(std::string_view op_type) const;
  /// Whether any live op (nested blocks included) has one of the given types.
  bool has_op_type(std::initializer_list<std::string_view> op_types) const;
  /// Whether any live op is of a type that owns nested blocks (cond, while_loop, ...); when false
  /// every block of the function is its body.
  bool has_block_ops() const { return block_ops_ != 0; }
  /// Ops of every block, depth first.
  std::vector<Operation*> all_ops() const;
  /// Finds a var by name in the whole function (linear search).
  Var* find_var(const std::string& name) const;
  /// A counter that every change of the function's IR raises (ops inserted, erased, moved or
  /// rewired; names, types, values, block inputs and outputs, the opset); equal counts mean the
  /// same IR.
  uint64_t epoch() const { return epoch_; }
  /// Notes that pass `key` found nothing to change in this function at the current epoch (of
  /// program `p`); see PassManager.
  void mark_clean(const std::string& key, const Program* p);
  /// Whether mark_clean(key, p) was called and nothing changed since.
  bool is_clean(const std::string& key, const Program* p) const;
  /// Image inputs (coremltools' ImageType inputs), in the order the user gave them.
  std::vector<ImageInput>& image_inputs() { return image_inputs_; }
  /// Image inputs, read-only.
  const std::vector<ImageInput>& image_inputs() const { return image_inputs_; }
  /// The image description of input `index`, or nullptr.
  const ImageInput* image_input(size_t index) const;
  /// Image outputs (coremltools' ImageType outputs).
  std::vector<ImageOutput>& image_outputs() { return image_outputs_; }
  /// Image outputs, read-only.
  const std::vector<ImageOutput>& image_outputs() const { return image_outputs_; }
  /// The image description of output `index`, or nullptr.
  const ImageOutput* image_output(size_t index) const;

 private:
  std::shared_ptr<Context> ctx_;
  Target opset_;
  bool opset_auto_ = false;
  std::vector<ImageInput> image_inputs_;
  std::vector<ImageOutput> image_outputs_;
  Block* body_;
  detail::ObjectArena<Operation> ops_;
  detail::ObjectArena<Var> vars_;
  detail::ObjectArena<Block> blocks_;
  std::vector<uint32_t> type_counts_;  // live ops per OpSchema::type_id
  size_t live_ops_ = 0;
  size_t block_ops_ = 0;  // live ops whose schema has nested blocks
  uint64_t epoch_ = 0;
  struct CleanMark {
    std::string key;
    const Program* program;
    uint64_t epoch;
  };
  std::vector<CleanMark> clean_;
  friend class Block;
  friend class Var;
  friend class Operation;
};

/// A program: named functions (one is the default), and program attributes.
class Program {
 public:
  /// Functions in insertion order.
  const std::vector<std::pair<std::string, std::shared_ptr<Function>>>& functions() const {
    return functions_;
  }
  /// Adds a function; throws ValueError if the name exists or opsets differ.
  void add_function(const std::string& name, std::shared_ptr<Function> f);
  /// The function with that name, or nullptr.
  Function* function(const std::string& name) const;
  /// The default function name ("main").
  const std::string& default_function_name() const { return default_name_; }
  /// Sets the default function name.
  void set_default_function_name(std::string n) { default_name_ = std::move(n); }
  /// String attributes (buildInfo and friends).
  std::map<std::string, std::string>& attributes() { return attrs_; }
  /// String attributes, read-only.
  const std::map<std::string, std::string>& attributes() const { return attrs_; }

 private:
  std::vector<std::pair<std::string, std::shared_ptr<Function>>> functions_;
  std::string default_name_ = "main";
  std::map<std::string, std::string> attrs_;
};

}  // namespace milkit
