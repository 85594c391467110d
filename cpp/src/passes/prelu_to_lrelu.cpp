// common::prelu_to_lrelu: a prelu whose alpha has one value for every channel becomes
// leaky_relu(x, alpha[0]), as coremltools does. The leaky_relu takes the prelu's output name and
// goes before it; the prelu is removed. Nested blocks first; one sweep.
#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

bool rewrite_block(Builder& b, Block& blk) {
  bool changed = false;
  for (Operation* op : blk.ops()) {
    for (Block* nb : op->blocks()) changed = rewrite_block(b, *nb) || changed;
    if (!op->blocks().empty() || op->op_type() != "prelu") continue;
    Var* alpha = op->input1("alpha");
    if (!alpha || !alpha->has_value() || alpha->value()->numel() < 1) continue;
    const Value& av = *alpha->value();
    bool common = true;
    for (int64_t c = 1; c < av.numel() && common; ++c) common = av.as_double(c) == av.as_double(0);
    if (!common) continue;
    b.set_insertion_point(&blk, op);
    b.set_location(op->location());
    std::vector<Arg> args = {
        Builder::arg("x", op->input1("x")),
        Builder::arg("alpha", Value::from_doubles(av.dtype(), {}, {av.as_double(0)}))};
    Var* lr = b.create("leaky_relu", args, op->output(0)->name())[0];
    pass_util::replace_var(op->output(0), lr);
    blk.erase(op);
    changed = true;
  }
  return changed;
}

}  // namespace

/// Registers common::prelu_to_lrelu.
void register_prelu_to_lrelu(PassRegistry& r) {
  r.add("common::prelu_to_lrelu",
        pass_util::block_pass("common::prelu_to_lrelu", {"prelu"}, rewrite_block));
}

}  // namespace milkit
