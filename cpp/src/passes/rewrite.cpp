// The rewrite driver most passes use, and the var / op helpers of their rewrites.
#include "milkit/passes/rewrite.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>

#include "milkit/types/error.h"

namespace milkit {
namespace pass_util {

void for_each_block(Function& f, const std::function<void(Block&)>& fn) {
  if (!f.has_block_ops()) {  // the body is the only block: no walk over its ops
    fn(f.body());
    return;
  }
  std::function<void(Block&)> rec = [&](Block& b) {
    for (Operation* op : b.ops())
      for (Block* nb : op->blocks()) rec(*nb);
    fn(b);
  };
  rec(f.body());
}

namespace {
// One sweep of `blk`: returns whether a `step` call on one of its own ops reported a change (what
// the caller repeats on); a change in a nested block, run to its fixed point here, only sets
// `nested_changed`.
bool sweep(Builder& b, Block& blk, const std::function<bool(Builder&, Block&, Operation*)>& step,
           bool& nested_changed) {
  bool changed = false;
  for (Operation* op : blk.ops()) {
    if (op->erased()) continue;
    for (Block* nb : op->blocks())
      while (sweep(b, *nb, step, nested_changed)) nested_changed = true;
    if (!op->blocks().empty()) continue;
    if (step(b, blk, op)) changed = true;
  }
  return changed;
}
}  // namespace

namespace {

// A pass that runs one function rewrite on the functions that may match.
class FunctionPass : public Pass {
 public:
  FunctionPass(const std::string& name, const std::vector<std::string>& types,
               const std::function<bool(Function&)>& rewrite, OpScan scan)
      : name_(name), types_(types), rewrite_(rewrite), scan_(scan) {}

  bool run(Program& p, const PassOptions& opts) override {
    check_options(opts, name_, {});
    if (scan_ == OpScan::Program) {
      bool any = false;
      for (auto& [fname, f] : p.functions()) any = any || may_match(*f);
      if (!any) return false;  // nothing to match
    }
    bool changed = false;
    for (auto& [fname, f] : p.functions())
      if (scan_ == OpScan::Program || may_match(*f)) changed = rewrite_(*f) || changed;
    return changed;
  }

 private:
  bool may_match(const Function& f) const {
    if (types_.empty()) return true;
    for (const std::string& t : types_)
      if (f.count_ops(std::string_view(t))) return true;
    return false;
  }

  std::string name_;
  std::vector<std::string> types_;
  std::function<bool(Function&)> rewrite_;
  OpScan scan_;
};

PassFactory function_pass(std::string name, std::vector<std::string> types,
                          std::function<bool(Function&)> rewrite, OpScan scan) {
  return [name = std::move(name), types = std::move(types), rewrite = std::move(rewrite), scan] {
    return std::make_unique<FunctionPass>(name, types, rewrite, scan);
  };
}

}  // namespace

PassFactory rewrite_pass(std::string name, std::vector<std::string> types, RewriteStep step,
                         OpScan scan) {
  return function_pass(
      std::move(name), std::move(types),
      [step = std::move(step)](Function& f) { return rewrite_ops(f, step); }, scan);
}

PassFactory block_pass(std::string name, std::vector<std::string> types, BlockRewrite rewrite,
                       OpScan scan) {
  return function_pass(
      std::move(name), std::move(types),
      [rewrite = std::move(rewrite)](Function& f) {
        Builder b(f);
        return rewrite(b, f.body());
      },
      scan);
}

bool rewrite_ops(Function& f, const std::function<bool(Builder&, Block&, Operation*)>& step) {
  Builder b(f);
  bool changed = false;
  while (sweep(b, f.body(), step, changed)) changed = true;
  return changed;
}

std::vector<Arg> inputs_except(const Operation& op, std::initializer_list<std::string_view> skip) {
  std::vector<Arg> args;
  for (size_t i = 0; i < op.num_inputs(); ++i) {
    const std::string& n = op.schema().inputs[i].name;
    if (op.input(i).empty() || std::find(skip.begin(), skip.end(), n) != skip.end()) continue;
    Arg a;
    a.name = n;
    for (Var* v : op.input(i)) a.items.push_back(ArgItem{v, nullptr});
    a.is_sequence = op.schema().inputs[i].kind == InputKind::Tuple;
    args.push_back(std::move(a));
  }
  return args;
}

bool fuse_unary_chains(Function& f, const std::function<Operation*(Operation*)>& match,
                       const std::string& op_type) {
  return rewrite_ops(f, [&](Builder& b, Block& blk, Operation* op) {
    Operation* second = match(op);
    if (!second) return false;
    b.set_insertion_point(&blk, op);
    b.set_location(op->location());
    Var* fused_out = b.op(op_type, {{"x", op->input1("x")}}, second->output(0)->name());
    replace_var(second->output(0), fused_out);
    second->parent()->erase(second);
    blk.erase(op);
    return true;
  });
}

bool has_side_effects(const Operation& op) {
  static const uint16_t kUpdate = op_type_id("coreml_update_state");
  static const uint16_t kWrite = op_type_id("write_state");
  return op.type_id() == kUpdate || op.type_id() == kWrite;
}

bool is_function_output(const Var* v) {
  for (const Block* b : v->block_uses())
    if (!b->parent_op()) return true;
  return false;
}

bool is_function_input(const Var* v) { return v->input_of() && !v->input_of()->parent_op(); }

void replace_var(Var* old_var, Var* new_var) {
  if (old_var == new_var) return;
  bool out = is_function_output(old_var);
  if (out && is_function_input(new_var) && new_var->name() != old_var->name())
    throw ValueError("cannot rename function input '" + new_var->name() + "' to '" +
                     old_var->name() + "'");
  old_var->replace_all_uses_with(new_var);
  if (out) new_var->set_name(old_var->name());
}

}  // namespace pass_util
}  // namespace milkit
