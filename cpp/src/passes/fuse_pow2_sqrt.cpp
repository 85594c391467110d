// mil_backend::fuse_pow2_sqrt: sqrt(pow(x, 2)) -> abs(x). coremltools rewrites both
// sqrt(pow(x, 2)) and pow(sqrt(x), 2) into identity(x), which changes the numbers: sqrt(x^2) is
// |x|, and pow(sqrt(x), 2) is NaN for x < 0. milkit deliberately differs (found by running programs
// before and after the pass): the first pattern becomes abs(x), the second is left alone.
// Matching is otherwise coremltools' (including its name-based check): the pow's output must not
// be a block output and must have exactly one user, the sqrt; pow's y must be a known value equal
// to 2 everywhere. The abs, named after the sqrt's output, goes before the pow; both are removed.
// Ops with nested blocks are not matched; their blocks are rewritten until stable first.
#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

bool is_pow2(const Operation* op) {
  if (op->op_type() != "pow") return false;
  Var* y = op->input1("y");
  if (!y || !y->has_value()) return false;
  const Value& v = *y->value();
  for (int64_t i = 0; i < v.numel(); ++i)
    if (v.as_double(i) != 2.0) return false;
  return true;
}

Operation* match(Operation* op) {
  Operation* pow_op = is_pow2(op) ? op : nullptr;
  Operation* sqrt_op = nullptr;
  if (!pow_op || op->outputs().empty()) return nullptr;
  Var* out = op->output(0);
  for (Var* o : op->parent()->outputs())
    if (o == out) return nullptr;
  if (out->uses().size() != 1) return nullptr;
  Operation* child = out->uses()[0].op;
  if (child->op_type() == "sqrt") sqrt_op = child;
  if (!sqrt_op) return nullptr;
  if (pow_op->output(0)->name() != sqrt_op->input1("x")->name()) return nullptr;
  return sqrt_op;
}

class FusePow2Sqrt : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "mil_backend::fuse_pow2_sqrt", {});
    bool changed = false;
    if (!pass_util::has_op_type(p, {"pow"})) return false;  // nothing to match
    for (auto& [name, f] : p.functions()) {
      changed = pass_util::fuse_unary_chains(*f, match, "abs") || changed;
    }
    return changed;
  }
};

}  // namespace

/// Registers mil_backend::fuse_pow2_sqrt.
void register_fuse_pow2_sqrt(PassRegistry& r) {
  r.add("mil_backend::fuse_pow2_sqrt", [] { return std::make_unique<FusePow2Sqrt>(); });
}

}  // namespace milkit
