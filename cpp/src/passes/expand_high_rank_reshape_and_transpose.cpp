// common::expand_high_rank_reshape_and_transpose: reshape (rank >= 6, fully known shape) ->
// transpose -> reshape (rank <= 5) is rewritten with tensors of rank < 6, as coremltools does.
// Each link must be the only consumer of the previous output, and neither the first reshape's nor
// the transpose's output may be a block output. Runs of consecutive perm axes are merged into
// groups; with fewer than 6 groups the result is reshape(x, group dims) -> transpose(group perm),
// otherwise, per group in perm order, a rank-4 reshape [leading, dims before, dim, dims after]
// (dims already moved left out) -> transpose([0, 2, 1, 3]). A final reshape to the last reshape's
// shape constant takes the last reshape output's uses (its name too when a function output). New
// ops ("reshape_<n>", "transpose_<n>") go before the first reshape; the three old ops are removed.
// Nested blocks are repeated until stable first; every block is swept until nothing changes. When
// the last reshape's shape is not a constant (coremltools fails) milkit leaves the pattern alone.
#include <algorithm>
#include <numeric>
#include <set>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

using pass_util::is_block_output;

using pass_util::only_child;

bool match(Operation* op, std::vector<Operation*>& ops) {
  if (op->op_type() != "reshape") return false;
  const Type* t = op->output(0)->type();
  if (!t->has_rank() || t->rank() <= 5) return false;
  for (Dim d : t->shape())
    if (!d->is_const()) return false;
  Operation* tr = only_child(op, "transpose");
  if (!tr) return false;
  Operation* last = only_child(tr, "reshape");
  if (!last) return false;
  const Type* lt = last->output(0)->type();
  if (!lt->has_rank() || lt->rank() >= 6) return false;
  if (is_block_output(op->output(0), op->parent()) || is_block_output(tr->output(0), op->parent()))
    return false;
  ops = {op, tr, last};
  return true;
}

int64_t prod(int64_t start, int64_t end, const std::vector<int64_t>& arr,
             const std::set<int64_t>& skip) {
  int64_t r = 1;
  for (int64_t i = start; i < end; ++i)
    if (!skip.count(i)) r *= arr[static_cast<size_t>(i)];
  return r;
}

Var* add_reshape(Builder& b, Var* x, const std::vector<int64_t>& shape) {
  std::vector<Arg> a = {Builder::arg("x", x), Builder::arg("shape", Value::int_list(shape))};
  return b.create("reshape", a).at(0);
}

Var* add_transpose(Builder& b, Var* x, const std::vector<int64_t>& perm) {
  std::vector<Arg> a = {Builder::arg("x", x), Builder::arg("perm", Value::int_list(perm))};
  return b.create("transpose", a).at(0);
}

bool transform(Builder& b, const std::vector<Operation*>& ops) {
  Operation* reshape = ops[0];
  Operation* tr = ops[1];
  Operation* last = ops[2];
  Var* pv = tr->input1("perm");
  Var* last_shape = last->input1("shape");
  if (!pv || !pv->has_value() || !last_shape || !last_shape->has_value()) return false;
  std::vector<int64_t> orig_shape;
  for (Dim d : reshape->output(0)->type()->shape()) orig_shape.push_back(d->value());
  const std::vector<int64_t> orig_perm = pv->value()->to_ints();
  const auto n = static_cast<int64_t>(orig_shape.size());
  for (int64_t p : orig_perm)
    if (p < 0 || p >= n) return false;
  std::vector<std::vector<int64_t>> groups;
  for (size_t i = 0; i < orig_perm.size(); ++i) {
    if (i > 0 && orig_perm[i] == orig_perm[i - 1] + 1)
      groups.back().push_back(orig_perm[i]);
    else
      groups.push_back({orig_perm[i]});
  }
  std::vector<int64_t> group_shape;
  std::vector<int64_t> starts;
  for (const auto& g : groups) {
    group_shape.push_back(prod(g.front(), g.back() + 1, orig_shape, {}));
    starts.push_back(g.front());
  }
  std::vector<size_t> order(groups.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t c) { return starts[a] < starts[c]; });
  std::vector<int64_t> shape;
  for (size_t i : order) shape.push_back(group_shape[i]);
  std::vector<int64_t> sorted = starts;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> perm;
  for (int64_t s : starts)
    perm.push_back(std::find(sorted.begin(), sorted.end(), s) - sorted.begin());
  const auto rank = static_cast<int64_t>(perm.size());

  b.set_insertion_point(reshape->parent(), reshape);
  b.set_location(reshape->location());
  Var* x = reshape->input1("x");
  if (rank < 6) {
    x = add_reshape(b, x, shape);
    x = add_transpose(b, x, perm);
  } else {
    int64_t leading = 1;
    std::set<int64_t> memo;
    for (int64_t i = 0; i < rank; ++i) {
      const int64_t axis = perm[static_cast<size_t>(i)];
      const int64_t dim = shape[static_cast<size_t>(axis)];
      memo.insert(axis);
      x = add_reshape(
          b, x, {leading, prod(0, axis, shape, memo), dim, prod(axis + 1, rank, shape, memo)});
      x = add_transpose(b, x, {0, 2, 1, 3});
      leading *= dim;
    }
  }
  std::vector<Arg> a = {Builder::arg("x", x), Builder::arg("shape", Value(*last_shape->value()))};
  Var* out = b.create("reshape", a).at(0);
  pass_util::replace_var(last->output(0), out);
  Block* blk = reshape->parent();
  blk->erase(last);
  blk->erase(tr);
  blk->erase(reshape);
  return true;
}

bool expand_block(Builder& b, Block& blk, bool& nested) {
  bool changed = false;
  for (Operation* op : blk.ops()) {
    if (op->erased()) continue;
    for (Block* nb : op->blocks())
      while (expand_block(b, *nb, nested)) nested = true;
    if (!op->blocks().empty()) continue;
    std::vector<Operation*> ops;
    if (match(op, ops) && transform(b, ops)) changed = true;
  }
  return changed;
}

class ExpandHighRankReshapeAndTranspose : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::expand_high_rank_reshape_and_transpose", {});
    bool changed = false;
    bool nested = false;                                        // a change in a nested block
    if (!pass_util::has_op_type(p, {"reshape"})) return false;  // nothing to match
    for (auto& [name, f] : p.functions()) {
      Builder b(*f);
      while (expand_block(b, f->body(), nested)) changed = true;
    }
    return changed || nested;
  }
};

}  // namespace

/// Registers common::expand_high_rank_reshape_and_transpose.
void register_expand_high_rank_reshape_and_transpose(PassRegistry& r) {
  r.add("common::expand_high_rank_reshape_and_transpose",
        [] { return std::make_unique<ExpandHighRankReshapeAndTranspose>(); });
}

}  // namespace milkit
