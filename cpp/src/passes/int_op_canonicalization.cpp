// common::int_op_canonicalization: dequantize -> reshape (its iOS17 version) -> quantize becomes a
// reshape of the quantized input, as coremltools does: the reshape must read the dequantize's
// output as x and feed only the quantize; the new reshape (dequantize's input, the old shape var)
// takes the quantize output's name and uses unless that would drop a constexpr dependency; the
// reshape and the quantize go (the dequantize stays for its other users). After each rewrite the
// block is scanned again from its start; nested blocks are handled when their op is reached.
// coremltools does not compare the two quantizations; milkit rewrites only when the rewrite keeps
// the numbers: both per-tensor (one scale element), equal scales and zero points, and the
// quantize's output dtype equal to the dequantize's input dtype.
#include <string>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

// One known element, or nullptr.
const Value* single(const Var* v) {
  if (!v || !v->has_value() || v->value()->numel() != 1) return nullptr;
  return v->value().get();
}

bool same_quantization(const Operation* dq, const Operation* q) {
  const Value* s1 = single(dq->input1("scale"));
  const Value* s2 = single(q->input1("scale"));
  if (!s1 || !s2 || s1->as_double(0) != s2->as_double(0)) return false;
  Var* z1 = dq->input1("zero_point");
  Var* z2 = q->input1("zero_point");
  double zv1 = 0, zv2 = 0;
  if (z1) {
    const Value* v = single(z1);
    if (!v) return false;
    zv1 = v->as_double(0);
  }
  if (z2) {
    const Value* v = single(z2);
    if (!v) return false;
    zv2 = v->as_double(0);
  }
  if (zv1 != zv2) return false;
  return q->output(0)->type()->dtype() == dq->input1("input")->type()->dtype();
}

// One rewrite at `op`: returns whether it replaced the pattern; sets `changed` whenever it added an
// op (a new reshape stays even when the quantize it would replace cannot go).
bool transform_one(Builder& b, Block& blk, Operation* op, bool& changed) {
  if (op->op_type() != "reshape" || op->schema().since != Target::iOS17) return false;
  Var* x = op->input1("x");
  Operation* dq = x->op();
  if (!dq || dq->op_type() != "dequantize") return false;
  const auto& uses = op->output(0)->uses();
  if (op->outputs().size() != 1 || uses.size() != 1 || uses[0].op->op_type() != "quantize")
    return false;
  Operation* q = uses[0].op;
  if (q->parent() != &blk || !same_quantization(dq, q)) return false;
  b.set_insertion_point(&blk, op);
  b.set_location(op->location());
  std::vector<Arg> args = {Builder::arg("x", dq->input1("input")),
                           Builder::arg("shape", op->input1("shape"))};
  Var* out = b.create("reshape", args, q->output(0)->name()).at(0);
  changed = true;
  if (!pass_util::can_be_replaced(q->output(0), out)) return false;  // the new reshape stays
  pass_util::replace_var(q->output(0), out);
  blk.erase(q);
  blk.erase(op);
  return true;
}

void canonicalize_block(Builder& b, Block& blk, bool& changed) {
  bool again = true;
  while (again) {
    again = false;
    for (Operation* op : blk.ops()) {
      if (op->erased()) continue;
      for (Block* nb : op->blocks()) canonicalize_block(b, *nb, changed);
      if (transform_one(b, blk, op, changed)) {
        again = true;
        break;
      }
    }
  }
}

class IntOpCanonicalization : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::int_op_canonicalization", {});
    bool changed = false;
    for (auto& [name, f] : p.functions()) {
      if (!pass_util::has_op_type(*f, {"dequantize"})) continue;
      Builder b(*f);
      canonicalize_block(b, f->body(), changed);
    }
    return changed;
  }
};

}  // namespace

/// Registers common::int_op_canonicalization.
void register_int_op_canonicalization(PassRegistry& r) {
  r.add("common::int_op_canonicalization",
        [] { return std::make_unique<IntOpCanonicalization>(); });
}

}  // namespace milkit
