// common::divide_to_multiply: real_div(x, const y) with a float x becomes mul(x, 1 / y), as
// coremltools does. The reciprocal is computed in y's dtype and must be finite everywhere. The mul
// is named "_inversed_<real_div name>" and goes before the real_div, which is removed. Nested
// blocks are rewritten first; ops with blocks are not matched. One sweep.
#include <cmath>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

bool rewrite_block(Builder& b, Block& blk) {
  bool changed = false;
  for (Operation* op : blk.ops()) {
    if (op->erased()) continue;
    for (Block* nb : op->blocks()) changed = rewrite_block(b, *nb) || changed;
    if (!op->blocks().empty() || op->op_type() != "real_div") continue;
    Var* x = op->input1("x");
    Var* y = op->input1("y");
    if (!y->has_value() || !is_float(x->type()->dtype())) continue;
    const Value& yv = *y->value();
    if (!is_float(yv.dtype())) continue;  // numpy would keep an integer reciprocal: not finite-safe
    std::vector<double> inv(static_cast<size_t>(yv.numel()));
    bool finite = true;
    for (int64_t i = 0; i < yv.numel(); ++i) {
      // Rounded to y's dtype below; double then fp16/fp32 equals numpy's rounding for 1 / y.
      inv[static_cast<size_t>(i)] = 1.0 / yv.as_double(i);
      Value one = Value::from_doubles(yv.dtype(), {}, {inv[static_cast<size_t>(i)]});
      finite = finite && std::isfinite(one.as_double(0));
    }
    if (!finite) continue;
    b.set_insertion_point(&blk, op);
    b.set_location(op->location());
    std::vector<Arg> args = {Builder::arg("x", x),
                             Builder::arg("y", Value::from_doubles(yv.dtype(), yv.shape(), inv))};
    Var* mul = b.create("mul", args, "_inversed_" + op->name())[0];
    pass_util::replace_var(op->output(0), mul);
    blk.erase(op);
    changed = true;
  }
  return changed;
}

}  // namespace

/// Registers common::divide_to_multiply.
void register_divide_to_multiply(PassRegistry& r) {
  r.add("common::divide_to_multiply",
        pass_util::block_pass("common::divide_to_multiply", {"real_div"}, rewrite_block));
}

}  // namespace milkit
