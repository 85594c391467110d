// common::fuse_elementwise_to_batchnorm: mul(x, gamma) -> add(beta) with x of rank 4 and const
// gamma / beta of shape (1, C, 1, 1) or (C, 1, 1) (same C), C > 1 -> batch_norm(x, mean=zeros(C)
// fp32, variance=ones(C) fp32, gamma, beta squeezed to (C,)), as coremltools does. The mul's output
// must not be a block output and must have exactly one consuming op, the add. The batch_norm takes
// the add's output name and goes before the mul. Nested blocks first; repeated until nothing
// changes.
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

// The value of the first const input (x, then y), or nullptr.
const Value* const_input(const Operation* op) {
  if (op->input1("x")->has_value()) return op->input1("x")->value().get();
  if (op->input1("y")->has_value()) return op->input1("y")->value().get();
  return nullptr;
}

// Shape (1, C, 1, 1) or (C, 1, 1).
bool per_channel(const Value* v) {
  const auto& s = v->shape();
  if (s.size() == 4) return s[0] == 1 && s[2] == 1 && s[3] == 1;
  if (s.size() == 3) return s[1] == 1 && s[2] == 1;
  return false;
}

bool try_fuse(Builder& b, Block& blk, Operation* mul) {
  Var* m = mul->output(0);
  for (Var* o : blk.outputs())
    if (o == m) return false;
  if (m->uses().size() != 1 || m->uses()[0].op->op_type() != "add") return false;
  Operation* add = m->uses()[0].op;
  Var* x = mul->input1("x")->has_value() ? mul->input1("y") : mul->input1("x");
  if (!x->type()->is_tensor() || x->type()->rank() != 4) return false;
  const Value* gamma = const_input(mul);
  const Value* beta = const_input(add);
  if (!gamma || !beta || !per_channel(gamma) || !per_channel(beta)) return false;
  int64_t c = gamma->shape()[gamma->rank() - 3];
  if (c == 1) return false;
  // coremltools also fuses a beta with another channel count (np.squeeze can make it a scalar),
  // giving a batch_norm that milkit's op validation rejects; those are skipped.
  if (beta->shape()[beta->rank() - 3] != c) return false;
  // An add in a nested block, or a mul output returned by a nested block, makes coremltools
  // fail; those are skipped.
  if (add->parent() != &blk || !m->block_uses().empty()) return false;
  b.set_insertion_point(&blk, mul);
  b.set_location(add->location());
  std::vector<Arg> args = {
      Builder::arg("x", x),
      Builder::arg("mean",
                   Value::from_doubles(DataType::Float32, {c}, std::vector<double>(c, 0.0))),
      Builder::arg("variance",
                   Value::from_doubles(DataType::Float32, {c}, std::vector<double>(c, 1.0))),
      Builder::arg("gamma", gamma->reshaped({c})), Builder::arg("beta", beta->reshaped({c}))};
  Var* bn = b.create("batch_norm", args, add->output(0)->name())[0];
  pass_util::replace_var(add->output(0), bn);
  blk.erase(add);
  blk.erase(mul);
  return true;
}

// One rewrite attempt at `op` (driven by pass_util::rewrite_ops).
bool step(Builder& b, Block& blk, Operation* op) {
  return op->op_type() == "mul" && try_fuse(b, blk, op);
}

}  // namespace

/// Registers common::fuse_elementwise_to_batchnorm.
void register_fuse_elementwise_to_batchnorm(PassRegistry& r) {
  r.add("common::fuse_elementwise_to_batchnorm",
        pass_util::rewrite_pass("common::fuse_elementwise_to_batchnorm", {"mul"}, step));
}

}  // namespace milkit
