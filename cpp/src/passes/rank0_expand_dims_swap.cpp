// common::rank0_expand_dims_swap: for a rank-0 add / sub / mul / real_div / floor_div with exactly
// one input of known value, whose output feeds exactly one expand_dims with axes [0] (and possibly
// other ops) and is not an output of the block, the expand_dims moves to the inputs, as
// coremltools does: two new expand_dims(axes=[0]) ops (fresh "expand_dims_<n>" names) on x and y,
// and a new binary op of the same type on them named after the expand_dims output, all before the
// binary op; the new op replaces the expand_dims output. When other ops read the old output, a
// squeeze ("squeeze_<n>", no axes) of the new op's output goes before the binary op too, and each
// such op is rebuilt with its same inputs except the squeeze, with its name, just before itself;
// its first output is replaced. The old binary op, the expand_dims and the rebuilt ops are
// removed. An op that reads the output several times is rebuilt once (coremltools rebuilds it once
// per read and leaves the extra copies unused). Ops with nested blocks are not matched; their
// blocks are rewritten until stable first; every block is repeated until nothing changes.
#include <algorithm>
#include <set>

#include "milkit/builder/builder.h"
#include "milkit/ops/registry.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

const std::set<std::string> kBinary = {"add", "sub", "mul", "real_div", "floor_div"};

int rank_of(const Var* v) { return v->type()->is_tensor() ? v->type()->rank() : -1; }

bool try_swap(Builder& b, Block& blk, Operation* op) {
  Var* x = op->input1("x");
  Var* y = op->input1("y");
  if (rank_of(x) != 0 || rank_of(y) != 0) return false;
  if (x->has_value() == y->has_value()) return false;
  Var* out = op->output(0);
  Operation* ed = nullptr;
  int n_ed = 0;
  std::vector<Operation*> others;
  for (const Use& u : out->uses()) {
    if (u.op->op_type() == "expand_dims") {
      ed = u.op;
      ++n_ed;
    } else if (std::find(others.begin(), others.end(), u.op) == others.end()) {
      others.push_back(u.op);
    }
  }
  if (n_ed != 1) return false;
  Var* axes = ed->input1("axes");
  if (!axes || !axes->has_value() || axes->value()->rank() != 1 || axes->value()->numel() != 1 ||
      axes->value()->as_int(0) != 0)
    return false;
  for (Var* o : op->outputs())
    if (std::find(blk.outputs().begin(), blk.outputs().end(), o) != blk.outputs().end())
      return false;
  for (Operation* o : others)
    if (!o->blocks().empty()) return false;  // cannot be rebuilt from its inputs

  b.set_insertion_point(&blk, op);
  b.set_location(op->location());
  std::vector<Arg> ax = {Builder::arg("x", x), Builder::arg("axes", Value::int_list({0}))};
  Var* xe = b.create("expand_dims", ax)[0];
  std::vector<Arg> ay = {Builder::arg("x", y), Builder::arg("axes", Value::int_list({0}))};
  Var* ye = b.create("expand_dims", ay)[0];
  Var* elem = b.op(op->op_type(), {{"x", xe}, {"y", ye}}, ed->output(0)->name());
  pass_util::replace_var(ed->output(0), elem);
  if (!others.empty()) {
    Var* sq = b.op("squeeze", {{"x", elem}});
    for (Operation* o : others) {
      std::vector<Arg> args;
      const OpSchema& s = o->schema();
      for (size_t i = 0; i < o->num_inputs(); ++i) {
        VarSpan in = o->input(i);
        if (in.empty()) continue;
        Arg a;
        a.name = s.inputs[i].name;
        a.is_sequence = s.inputs[i].kind == InputKind::Tuple;
        for (Var* v : in) a.items.push_back(ArgItem{v == out ? sq : v, nullptr});
        args.push_back(std::move(a));
      }
      b.set_insertion_point(o->parent(), o);
      b.set_location(o->location());
      Var* nv = b.create(o->op_type(), args, o->name())[0];
      pass_util::replace_var(o->output(0), nv);
    }
  }
  for (Operation* o : others) o->parent()->erase(o);
  ed->parent()->erase(ed);
  blk.erase(op);
  return true;
}

bool swap_in(Builder& b, Block& blk, bool& nested) {
  bool changed = false;
  for (Operation* op : blk.ops()) {
    if (op->erased()) continue;
    for (Block* nb : op->blocks())
      while (swap_in(b, *nb, nested)) nested = true;
    if (!op->blocks().empty() || !kBinary.count(op->op_type())) continue;
    if (try_swap(b, blk, op)) changed = true;
  }
  return changed;
}

class Rank0ExpandDimsSwap : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::rank0_expand_dims_swap", {});
    bool changed = false;
    bool nested = false;                                            // a change in a nested block
    if (!pass_util::has_op_type(p, {"expand_dims"})) return false;  // nothing to match
    for (auto& [name, f] : p.functions()) {
      Builder b(*f);
      while (swap_in(b, f->body(), nested)) changed = true;
    }
    return changed || nested;
  }
};

}  // namespace

/// Registers common::rank0_expand_dims_swap.
void register_rank0_expand_dims_swap(PassRegistry& r) {
  r.add("common::rank0_expand_dims_swap", [] { return std::make_unique<Rank0ExpandDimsSwap>(); });
}

}  // namespace milkit
