// common::remove_symbolic_reshape: a reshape whose shape input has a symbolic compile-time value
// (no known value, but symbolic elements) gets an integer shape, as coremltools does. The shape var
// must have at most one consuming op and the reshape's output at most one symbolic dim; the new
// shape is the output shape with that dim as -1. A const named "<shape var name>x" and a reshape
// named after the old reshape go before it, the new reshape replaces the old output, and the old
// reshape and the op that made the shape are removed. Every block is visited once, nested blocks
// first for each op. An output of unknown rank raises ValueError (coremltools' variadic check).
#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

bool remove_in(Builder& b, Block& blk) {
  bool changed = false;
  for (Operation* op : blk.ops()) {
    if (op->erased()) continue;
    for (Block* nb : op->blocks()) changed = remove_in(b, *nb) || changed;
    if (op->op_type() != "reshape") continue;
    Var* shape = op->input1("shape");
    if (!shape || !shape->value() || !shape->value()->is_symbolic()) continue;
    if (shape->uses().size() > 1) continue;
    const Type* t = op->output(0)->type();
    if (!t->has_rank())
      throw ValueError(
          "Cannot reshape to variadic from a compile time shape argument. Variadic "
          "shape can only be achieved via runtime shape argument. op: " +
          op->describe());
    std::vector<int64_t> ints;
    int symbols = 0;
    for (Dim d : t->shape()) {
      if (d->is_const()) {
        ints.push_back(d->value());
      } else {
        ++symbols;
        ints.push_back(-1);
      }
    }
    if (symbols > 1) continue;
    b.set_insertion_point(&blk, op);
    b.set_location(op->location());
    Var* c = b.add_const(std::make_shared<const Value>(Value::int_list(ints)), shape->name() + "x");
    Var* reshaped = b.op("reshape", {{"x", op->input1("x")}, {"shape", c}}, op->name());
    pass_util::replace_var(op->output(0), reshaped);
    Operation* shape_op = shape->op();
    blk.erase(op);
    if (shape_op && !shape_op->erased()) shape_op->parent()->erase(shape_op);
    changed = true;
  }
  return changed;
}

}  // namespace

/// Registers common::remove_symbolic_reshape.
void register_remove_symbolic_reshape(PassRegistry& r) {
  r.add("common::remove_symbolic_reshape",
        pass_util::block_pass("common::remove_symbolic_reshape", {"reshape"}, remove_in));
}

}  // namespace milkit
