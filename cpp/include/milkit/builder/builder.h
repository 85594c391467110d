// milkit/builder/builder.h - creates typed ops: validation, implicit consts, defaults, inference.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "milkit/ir/ir.h"
#include "milkit/ops/registry.h"

namespace milkit {

/// One element of an argument: an existing var, or a value to wrap in an implicit const.
struct ArgItem {
  Var* var = nullptr;                   ///< An existing var.
  std::shared_ptr<const Value> value;   ///< Or a compile-time value.
};

/// A named argument of an op call. Tuple inputs take several items.
struct Arg {
  std::string name;            ///< Input name.
  std::vector<ArgItem> items;  ///< One item, or several for a tuple input.
  bool is_sequence = false;    ///< Given as a Python list/tuple of vars (tuple inputs).
  /// The input's index in the schema passed to Builder::create, when the caller already looked it
  /// up (-1: create looks `name` up).
  int slot = -1;
};

class Builder;

/// Builds the nested blocks of a control-flow op (OpSchema::num_blocks > 0). Called by
/// Builder::create once the op is in place (inputs bound, no outputs yet), before its type
/// inference; adds the blocks with Function::add_block.
using BlockBuildFn = std::function<void(Builder& b, Operation* op)>;

/// The body of one block: receives the block's inputs, creates ops with the builder (its
/// insertion point is the block), returns the block's outputs.
using BlockFn = std::function<std::vector<Var*>(const std::vector<Var*>& inputs)>;

/// Creates ops in a function at an insertion point, the way coremltools' Builder does:
/// op names "<type>_<n>", implicit consts "<op>_<input>_<n>", defaults materialized as consts,
/// validation against the schema, then type and value inference. Errors name the op type, the op
/// name, the input and the location.
class Builder {
 public:
  /// A builder appending to the body of `f`.
  explicit Builder(Function& f);
  /// The function being built.
  Function& function() const { return *fn_; }
  /// Sets where new ops go: before `before` in `b` (nullptr: the end of `b`).
  void set_insertion_point(Block* b, Operation* before = nullptr);
  /// The current block.
  Block* block() const { return block_; }
  /// The op new ops are inserted before (nullptr: the end).
  Operation* before() const { return before_; }
  /// Location stamped on the ops created next.
  void set_location(Location loc) { loc_ = std::move(loc); }
  /// Creates a const op named exactly `name` (a free name is made when empty).
  Var* add_const(std::shared_ptr<const Value> v, std::string name = {});
  /// Creates an op; returns its outputs. `name` empty: "<op_type>_<n>".
  std::vector<Var*> create(std::string_view op_type, std::vector<Arg>& args, std::string name = {},
                           const BlockBuildFn& blocks = nullptr);
  /// Creates an op of the schema `s` (already resolved for this function's opset); as above.
  std::vector<Var*> create(const OpSchema& s, std::vector<Arg>& args, std::string name = {},
                           const BlockBuildFn& blocks = nullptr);
  /// Adds a block to `op` with `inputs` as its inputs (vars already made by
  /// Function::add_block_input, or shared), runs `fn` with the insertion point at the block's end
  /// and sets the block's outputs; each output must be visible in the block.
  Block* build_block(Operation* op, const std::vector<Var*>& inputs, const BlockFn& fn);
  /// Runs `fn` on an existing (empty) block of an op and sets the block's outputs.
  void fill_block(Block* blk, const BlockFn& fn);
  /// Convenience: single-output op from (input name, var) pairs.
  Var* op(std::string_view op_type, std::vector<std::pair<std::string, Var*>> inputs,
          const std::string& name = "");
  /// Convenience: wraps values into args.
  static Arg arg(std::string name, Var* v);
  /// An argument holding a value (implicit const).
  static Arg arg(std::string name, Value v);

 private:
  std::vector<Var*> create_with_blocks(const OpSchema& s, const std::string& name, std::vector<Var*> flat,
                                       std::vector<uint32_t> starts, const BlockBuildFn& build_blocks);
  Function* fn_;
  Block* block_;
  Operation* before_ = nullptr;
  Location loc_;
};

/// cond's blocks from two bodies (no block inputs), as coremltools' cond builds them.
BlockBuildFn cond_blocks(BlockFn true_fn, BlockFn false_fn);

/// while_loop's cond and body blocks, as coremltools builds them: both blocks share inputs
/// typed (and valued) as the loop vars and named "<var>_x<n>"; when the body changes a loop var's
/// shape (same rank) or value, the blocks are built again with those dims made symbolic and
/// the value dropped.
BlockBuildFn while_loop_blocks(BlockFn cond_fn, BlockFn body_fn);

/// Re-runs type (and value) inference of an existing op, e.g. after a pass changed its inputs;
/// returns the inferred output types without changing the op.
std::vector<const Type*> infer_types(Operation* op);

/// The schema of `op_type` at `opset`, or throws TypeError naming the op and opset.
const OpSchema& schema_for(std::string_view op_type, Target opset, const std::string& op_name);

}  // namespace milkit
