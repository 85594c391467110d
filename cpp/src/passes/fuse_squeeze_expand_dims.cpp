// common::fuse_squeeze_expand_dims: expand_dims(squeeze(x)) whose output type has x's shape (dims
// structurally equal, symbols included) becomes identity(x), as coremltools does. The squeeze's
// output must have exactly one consuming op, the expand_dims, and must not be an output of the
// block. The identity takes a fresh "identity_<n>" name, goes before the squeeze and replaces the
// expand_dims output (taking its name when that is a function output); both ops are removed.
// Ops with nested blocks are not matched; their blocks are rewritten until stable first; every
// block is repeated until nothing changes.
#include <algorithm>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

bool same_shape(const Type* a, const Type* b) {
  if (a->has_rank() != b->has_rank()) return false;
  return a->shape() == b->shape();
}

bool fuse_in(Builder& b, Block& blk, bool& nested) {
  bool changed = false;
  for (Operation* op : blk.ops()) {
    if (op->erased()) continue;
    for (Block* nb : op->blocks())
      while (fuse_in(b, *nb, nested)) nested = true;
    if (!op->blocks().empty() || op->op_type() != "squeeze" || op->outputs().size() != 1) continue;
    Var* sq = op->output(0);
    if (sq->uses().size() != 1) continue;
    Operation* ed = sq->uses()[0].op;
    if (ed->op_type() != "expand_dims") continue;
    Var* x = op->input1("x");
    Var* out = ed->output(0);
    if (!same_shape(x->type(), out->type())) continue;
    if (std::find(blk.outputs().begin(), blk.outputs().end(), sq) != blk.outputs().end()) continue;
    b.set_insertion_point(&blk, op);
    b.set_location(op->location());
    Var* id = b.op("identity", {{"x", x}});
    pass_util::replace_var(out, id);
    ed->parent()->erase(ed);
    blk.erase(op);
    changed = true;
  }
  return changed;
}

class FuseSqueezeExpandDims : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::fuse_squeeze_expand_dims", {});
    bool changed = false;
    bool nested = false;                                        // a change in a nested block
    if (!pass_util::has_op_type(p, {"squeeze"})) return false;  // nothing to match
    for (auto& [name, f] : p.functions()) {
      Builder b(*f);
      while (fuse_in(b, f->body(), nested)) changed = true;
    }
    return changed || nested;
  }
};

}  // namespace

/// Registers common::fuse_squeeze_expand_dims.
void register_fuse_squeeze_expand_dims(PassRegistry& r) {
  r.add("common::fuse_squeeze_expand_dims",
        [] { return std::make_unique<FuseSqueezeExpandDims>(); });
}

}  // namespace milkit
