// common::remove_redundant_ops: ops that compute the same thing from the same inputs are merged,
// as coremltools does. For a var read by more than one op (block inputs, then the first output of
// every non-const op in block order), its consuming ops are grouped by op type; a group of two or
// more ops, all in one block, without nested blocks and not random_*, is ordered by block position.
// For each op of the group in turn, the later ops identical to it are replaced by it and removed,
// unless their output is an output of the block; ops with several outputs are never merged.
// Two ops are identical when the same inputs are present and each pair of vars is identical: the
// same var, or both with known values of one dtype, the same shape and equal elements (NaN never
// equal) with fewer than 100 elements unless scalar. A replacement is skipped when the removed op
// depends on a constexpr_* output that the kept op does not (coremltools'
// nonreplaceable_vars_upstream; shape outputs stop the propagation). Nested blocks are handled
// until stable when their op is reached; the whole function is repeated until nothing changes
// (removals found from block inputs alone do not trigger a repeat, as in coremltools).
#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

bool values_identical(const Value& a, const Value& b) {
  if (a.shape() != b.shape()) return false;
  if (a.rank() != 0 && a.numel() >= 100) return false;
  if (a.dtype() == DataType::String || b.dtype() == DataType::String)
    return a.dtype() == b.dtype() && a.string_values() == b.string_values();
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (is_float(a.dtype()) || is_float(b.dtype())) {
      if (!(a.as_double(i) == b.as_double(i))) return false;
    } else if (a.as_int(i) != b.as_int(i)) {
      return false;
    }
  }
  return true;
}

bool vars_identical(const Var* a, const Var* b) {
  if (a == b) return true;
  if (!a->has_value() || !b->has_value()) return false;
  if (a->type()->dtype() != b->type()->dtype()) return false;
  return values_identical(*a->value(), *b->value());
}

bool ops_identical(const Operation* a, const Operation* b) {
  if (a == b) return true;
  if (a->type_id() != b->type_id() || a->num_inputs() != b->num_inputs()) return false;
  for (size_t i = 0; i < a->num_inputs(); ++i) {
    VarSpan x = a->input(i), y = b->input(i);
    if (x.size() != y.size()) return false;
    for (size_t k = 0; k < x.size(); ++k)
      if (!vars_identical(x[k], y[k])) return false;
  }
  return true;
}

class RemoveRedundantOps : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::remove_redundant_ops", {});
    bool changed = false;
    bool nested = false;  // a change in a nested block
    for (auto& [name, f] : p.functions()) {
      bool again = true;
      while (again) {
        order_.clear();
        upstream_.clear();
        again = remove_in(f->body(), nested);
        changed = changed || again;
      }
    }
    return changed || nested;
  }

 private:
  std::unordered_map<const Block*, std::unordered_map<const Operation*, size_t>> order_;
  std::unordered_map<const Var*, std::set<const Var*>> upstream_;

  // Positions of the ops of `b`, made when first needed (this pass only removes ops, so the
  // order of the ops left never changes).
  const std::unordered_map<const Operation*, size_t>& order_of(const Block& b) {
    auto it = order_.find(&b);
    if (it != order_.end()) return it->second;
    auto& m = order_[&b];
    m.reserve(b.size());
    size_t i = 0;
    for (Operation* op = b.front(); op; op = op->next(), ++i) m[op] = i;
    return m;
  }

  // constexpr_* outputs that `v` depends on (iterative, memoized).
  const std::set<const Var*>& upstream(const Var* v) {
    std::vector<const Var*> stack = {v};
    while (!stack.empty()) {
      const Var* cur = stack.back();
      if (upstream_.count(cur)) {
        stack.pop_back();
        continue;
      }
      const Operation* op = cur->op();
      if (!op || op->op_type() == "shape") {
        upstream_[cur];
        stack.pop_back();
        continue;
      }
      if (op->op_type().rfind("constexpr_", 0) == 0) {
        upstream_[cur] = {cur};
        stack.pop_back();
        continue;
      }
      bool ready = true;
      for (const Var* a : op->args())
        if (!upstream_.count(a)) {
          stack.push_back(a);
          ready = false;
        }
      if (!ready) continue;
      std::set<const Var*> s;
      for (const Var* a : op->args()) {
        const auto& u = upstream_[a];
        s.insert(u.begin(), u.end());
      }
      upstream_[cur] = std::move(s);
      stack.pop_back();
    }
    return upstream_[v];
  }

  bool can_replace(const Var* old_var, const Var* new_var) {
    const std::set<const Var*> o = upstream(old_var);
    const std::set<const Var*>& n = upstream(new_var);
    return std::includes(n.begin(), n.end(), o.begin(), o.end());
  }

  std::vector<Operation*> candidates(const std::vector<Operation*>& ops) {
    const Block* blk = ops.front()->parent();
    for (Operation* op : ops)
      if (op->parent() != blk) return {};
    std::vector<Operation*> r;
    for (Operation* op : ops) {
      if (!op->blocks().empty() || op->op_type().rfind("random", 0) == 0) continue;
      if (std::find(r.begin(), r.end(), op) == r.end()) r.push_back(op);
    }
    const auto& pos = order_of(*blk);
    std::sort(r.begin(), r.end(),
              [&](Operation* a, Operation* b) { return pos.at(a) < pos.at(b); });
    return r;
  }

  bool try_remove(const std::vector<Operation*>& ops, size_t start) {
    Operation* first = ops[start];
    if (first->erased() || first->outputs().size() > 1) return false;
    Block* blk = first->parent();
    std::vector<Operation*> removed;
    for (size_t i = start + 1; i < ops.size(); ++i) {
      Operation* op = ops[i];
      if (op->erased()) continue;
      Var* out = op->output(0);
      if (std::find(blk->outputs().begin(), blk->outputs().end(), out) != blk->outputs().end())
        continue;
      if (!ops_identical(first, op)) continue;
      if (!can_replace(out, first->output(0))) continue;
      pass_util::replace_var(out, first->output(0));
      removed.push_back(op);
    }
    for (Operation* op : removed) blk->erase(op);
    return !removed.empty();
  }

  bool transform(const Var* v) {
    std::vector<std::pair<uint16_t, std::vector<Operation*>>> by_type;
    for (const Use& u : v->uses()) {
      auto it = std::find_if(by_type.begin(), by_type.end(),
                             [&](const auto& e) { return e.first == u.op->type_id(); });
      if (it == by_type.end())
        by_type.push_back({u.op->type_id(), {u.op}});
      else
        it->second.push_back(u.op);
    }
    std::vector<std::vector<Operation*>> lists;
    for (auto& [t, ops] : by_type) {
      if (ops.size() < 2) continue;
      std::vector<Operation*> c = candidates(ops);
      if (c.size() > 1) lists.push_back(std::move(c));
    }
    bool changed = false;
    for (const auto& l : lists)
      for (size_t i = 0; i < l.size(); ++i)
        if (try_remove(l, i)) changed = true;
    return changed;
  }

  bool remove_in(Block& b, bool& nested) {
    static const uint16_t kConst = op_type_id("const");
    for (Var* in : b.inputs())
      if (in->uses().size() > 1 && transform(in)) nested = true;  // reported, not swept again
    bool updated = false;
    for (Operation* op : b.ops()) {
      if (op->erased() || op->type_id() == kConst) continue;
      for (Block* nb : op->blocks())
        while (remove_in(*nb, nested)) nested = true;
      if (!op->outputs().empty() && op->output(0)->uses().size() > 1 && transform(op->output(0)))
        updated = true;
    }
    return updated;
  }
};

}  // namespace

/// Registers common::remove_redundant_ops.
void register_remove_redundant_ops(PassRegistry& r) {
  r.add(
      "common::remove_redundant_ops", [] { return std::make_unique<RemoveRedundantOps>(); },
      PassTraits{/*skip_rerun_when_unchanged=*/true});
}

}  // namespace milkit
