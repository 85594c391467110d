// Helpers for pattern passes: a quick op-type scan, and guarded var replacement (coremltools'
// Var.can_be_replaced_by_var and Block.replace_uses_of_var_after_op).
#include "milkit/passes/match_util.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"
#include "milkit/types/error.h"

namespace milkit {
namespace pass_util {

namespace {

// constexpr_* outputs `v` depends on, memoized in `memo` (iterative: chains can be long).
const std::set<const Var*>& upstream(const Var* v,
                                     std::unordered_map<const Var*, std::set<const Var*>>& memo) {
  std::vector<const Var*> stack = {v};
  while (!stack.empty()) {
    const Var* cur = stack.back();
    if (memo.count(cur)) {
      stack.pop_back();
      continue;
    }
    const Operation* op = cur->op();
    if (!op || op->op_type() == "shape") {
      memo[cur];
      stack.pop_back();
      continue;
    }
    if (op->schema().is_constexpr || op->op_type().rfind("constexpr_", 0) == 0) {
      memo[cur] = {cur};
      stack.pop_back();
      continue;
    }
    bool ready = true;
    for (const Var* a : op->args())
      if (!memo.count(a)) {
        stack.push_back(a);
        ready = false;
      }
    if (!ready) continue;
    std::set<const Var*> s;
    for (const Var* a : op->args()) {
      const auto& u = memo[a];
      s.insert(u.begin(), u.end());
    }
    memo[cur] = std::move(s);
    stack.pop_back();
  }
  return memo[v];
}

// The op of `anchor_block` that is or contains `op`, or nullptr when `op` is elsewhere.
Operation* ancestor_in(Operation* op, const Block* anchor_block) {
  while (op) {
    if (op->parent() == anchor_block) return op;
    op = op->parent() ? op->parent()->parent_op() : nullptr;
  }
  return nullptr;
}

bool is_after(const Operation* anchor, const Operation* op) {
  for (const Operation* o = anchor->next(); o; o = o->next())
    if (o == op) return true;
  return false;
}

}  // namespace

bool has_op_type(const Function& f, std::initializer_list<std::string_view> types) {
  return f.has_op_type(types);
}

bool has_op_type(const Program& p, std::initializer_list<std::string_view> types) {
  for (auto& [name, f] : p.functions())
    if (f->has_op_type(types)) return true;
  return false;
}

bool can_be_replaced(const Var* old_var, const Var* new_var) {
  std::unordered_map<const Var*, std::set<const Var*>> memo;
  const std::set<const Var*> o = upstream(old_var, memo);
  if (o.empty()) return true;
  const std::set<const Var*>& n = upstream(new_var, memo);
  return std::includes(n.begin(), n.end(), o.begin(), o.end());
}

bool replace_uses_after(Operation* anchor, Var* old_var, Var* new_var) {
  if (old_var == new_var) return false;
  bool changed = false;
  const Block* blk = anchor->parent();
  auto later = [&](Operation* op) {
    Operation* a = ancestor_in(op, blk);
    return a && is_after(anchor, a);
  };
  std::vector<Use> uses = old_var->uses();
  for (const Use& u : uses)
    if (later(u.op)) {
      u.op->set_arg(u.slot, new_var);
      changed = true;
    }
  std::vector<Block*> blocks = old_var->block_uses();
  for (Block* b : blocks) {
    if (b != blk && !(b->parent_op() && later(b->parent_op()))) continue;
    bool is_fn = !b->parent_op();
    if (is_fn && is_function_input(new_var) && new_var->name() != old_var->name())
      throw ValueError("cannot rename function input '" + new_var->name() + "' to '" +
                       old_var->name() + "'");
    for (size_t i = 0; i < b->outputs().size(); ++i)
      if (b->outputs()[i] == old_var) {
        b->set_output(i, new_var);
        changed = true;
      }
    if (is_fn && new_var->name() != old_var->name()) {
      new_var->set_name(old_var->name());
      changed = true;
    }
  }
  return changed;
}

bool is_block_output(const Var* v, const Block* b) {
  const auto& outs = b->outputs();
  return std::find(outs.begin(), outs.end(), v) != outs.end();
}

Operation* only_child(const Operation* op, std::string_view type) {
  if (op->outputs().size() != 1) return nullptr;
  const auto& uses = op->output(0)->uses();
  if (uses.size() != 1 || uses[0].op->op_type() != type) return nullptr;
  return uses[0].op;
}

std::vector<float> floats(const Value& v) {
  std::vector<float> r;
  r.reserve(static_cast<size_t>(v.numel()));
  for (int64_t i = 0; i < v.numel(); ++i) r.push_back(static_cast<float>(v.as_double(i)));
  return r;
}

Value from_floats(DataType dt, std::vector<int64_t> shape, const std::vector<float>& f) {
  return Value::from_doubles(dt, std::move(shape), std::vector<double>(f.begin(), f.end()));
}

}  // namespace pass_util
}  // namespace milkit
