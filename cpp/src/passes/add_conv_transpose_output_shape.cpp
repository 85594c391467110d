// common::add_conv_transpose_output_shape: a conv_transpose without output_shape whose output
// shape is fully known gets it, as coremltools does: a new conv_transpose named
// "<op>_has_output_shape" with the same inputs plus output_shape (a new int32 const, created last)
// goes before the old one, takes its uses, and the old one goes. Nested blocks are handled when
// their op is reached (one sweep).
#include <string>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

bool handle_block(Builder& b, Block& blk) {
  bool changed = false;
  for (Operation* op : blk.ops()) {
    for (Block* nb : op->blocks()) changed = handle_block(b, *nb) || changed;
    if (op->op_type() != "conv_transpose" || op->input1("output_shape")) continue;
    const Type* t = op->output(0)->type();
    if (!t->has_rank()) continue;
    std::vector<int64_t> shape;
    bool known = true;
    for (Dim d : t->shape()) {
      known = known && d->is_const();
      if (known) shape.push_back(d->value());
    }
    if (!known) continue;
    std::vector<Arg> args = pass_util::inputs_except(*op, {});
    args.push_back(Builder::arg("output_shape", Value::int_list(shape)));
    b.set_insertion_point(&blk, op);
    b.set_location(op->location());
    Var* out = b.create("conv_transpose", args, op->name() + "_has_output_shape").at(0);
    pass_util::replace_var(op->output(0), out);
    blk.erase(op);
    changed = true;
  }
  return changed;
}

}  // namespace

/// Registers common::add_conv_transpose_output_shape.
void register_add_conv_transpose_output_shape(PassRegistry& r) {
  r.add("common::add_conv_transpose_output_shape",
        pass_util::block_pass("common::add_conv_transpose_output_shape", {"conv_transpose"},
                              handle_block, pass_util::OpScan::Function));
}

}  // namespace milkit
