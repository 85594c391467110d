// common::fuse_leaky_relu: maximum(mul(x, alpha), x) with a const scalar alpha in [0, 1] ->
// leaky_relu(x, alpha), as coremltools does. The mul's output must not be a block output and must
// have exactly one consuming op, the maximum, whose other input is x. The leaky_relu takes the
// maximum's output name and goes before it. Nested blocks first; repeated until nothing changes.
#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

bool scalar_in_unit(const Var* v) {
  if (!v || !v->has_value() || v->value()->numel() != 1) return false;
  DataType dt = v->value()->dtype();
  if (dt == DataType::String || dt == DataType::Bool) return false;
  double a = v->value()->as_double(0);
  return a >= 0.0 && a <= 1.0;
}

bool try_fuse(Builder& b, Block& blk, Operation* mul) {
  Var* alpha = nullptr;
  Var* x = nullptr;
  if (scalar_in_unit(mul->input1("x"))) {
    alpha = mul->input1("x");
    x = mul->input1("y");
  } else if (scalar_in_unit(mul->input1("y"))) {
    alpha = mul->input1("y");
    x = mul->input1("x");
  } else {
    return false;
  }
  Var* m = mul->output(0);
  for (Var* o : blk.outputs())
    if (o == m) return false;
  if (m->uses().size() != 1 || m->uses()[0].op->op_type() != "maximum") return false;
  Operation* mx = m->uses()[0].op;
  bool pair = (mx->input1("x") == m && mx->input1("y") == x) ||
              (mx->input1("y") == m && mx->input1("x") == x);
  // A maximum in a nested block, or a mul output returned by a nested block, makes coremltools
  // fail; those are skipped.
  if (!pair || mx->parent() != &blk || !m->block_uses().empty()) return false;
  b.set_insertion_point(&blk, mx);
  b.set_location(mx->location());
  std::vector<Arg> args = {Builder::arg("x", x), Builder::arg("alpha", Value(*alpha->value()))};
  Var* lr = b.create("leaky_relu", args, mx->output(0)->name())[0];
  pass_util::replace_var(mx->output(0), lr);
  blk.erase(mx);
  blk.erase(mul);
  return true;
}

// One rewrite attempt at `op` (driven by pass_util::rewrite_ops).
bool step(Builder& b, Block& blk, Operation* op) {
  return op->op_type() == "mul" && try_fuse(b, blk, op);
}

}  // namespace

/// Registers common::fuse_leaky_relu.
void register_fuse_leaky_relu(PassRegistry& r) {
  r.add("common::fuse_leaky_relu",
        pass_util::rewrite_pass("common::fuse_leaky_relu", {"maximum"}, step));
}

}  // namespace milkit
