// common::topological_reorder: moves every cast and transpose to just before its first user (or to
// the end of the block when nothing reads it), as coremltools does. Ops are visited last to first;
// a moved op is recreated with the same inputs under a fresh name ("cast_<n>", "transpose_<n>")
// while its outputs keep their names, and the old op is removed at the end. Nested blocks are
// reordered while visiting their op; what they read counts as read by that op.
#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "milkit/builder/builder.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

class TopologicalReorder : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::topological_reorder", {});
    changed_ = false;
    for (auto& [name, f] : p.functions()) {
      Builder b(*f);
      builder_ = &b;
      reorder(f->body(), false);
    }
    return changed_;
  }

 private:
  // Reorders `blk`; returns the vars it reads (its ops' inputs, nested blocks included, and its
  // outputs) when `want_reads`.
  std::unordered_set<Var*> reorder(Block& blk, bool want_reads) {
    static const uint16_t kCast = op_type_id("cast"), kTranspose = op_type_id("transpose");
    std::vector<Operation*> order = blk.ops();  // mirrors the block as ops are inserted
    auto index = [&](Operation* op) {
      return std::find(order.begin(), order.end(), op) - order.begin();
    };
    std::unordered_map<Var*, Operation*> first_use;
    first_use.reserve(2 * order.size());
    std::vector<Var*> first_use_keys;
    std::vector<Operation*> to_remove;
    std::vector<Operation*> snapshot = order;
    for (auto it = snapshot.rbegin(); it != snapshot.rend(); ++it) {
      Operation* op = *it;
      Operation* current = op;
      bool recreated = false;
      if (op->type_id() == kCast || op->type_id() == kTranspose) {
        recreated = true;
        to_remove.push_back(op);
        Operation* before = nullptr;
        std::ptrdiff_t best = -1;
        for (Var* v : op->outputs()) {
          auto f = first_use.find(v);
          if (f == first_use.end()) continue;
          std::ptrdiff_t i = index(f->second);
          if (best < 0 || i < best) {
            best = i;
            before = f->second;
          }
        }
        std::vector<Arg> args;
        const OpSchema& s = op->schema();
        for (size_t i = 0; i < op->num_inputs(); ++i) {
          VarSpan in = op->input(i);
          if (in.empty()) continue;
          Arg a;
          a.name = s.inputs[i].name;
          a.is_sequence = s.inputs[i].kind == InputKind::Tuple;
          for (Var* v : in) a.items.push_back(ArgItem{v, nullptr});
          args.push_back(std::move(a));
        }
        builder_->set_insertion_point(&blk, before);
        builder_->set_location(op->location());
        std::vector<Var*> outs = builder_->create(op->op_type(), args);
        current = outs.at(0)->op();
        if (before)
          order.insert(order.begin() + best, current);
        else
          order.push_back(current);
        for (size_t k = 0; k < outs.size(); ++k) outs[k]->set_name(op->output(k)->name());
        for (size_t k = 0; k < outs.size(); ++k) pass_util::replace_var(op->output(k), outs[k]);
      }
      std::vector<Var*> relevant;
      for (Block* nb : current->blocks())
        for (Var* v : reorder(*nb, true)) relevant.push_back(v);
      if (want_reads) {
        for (Var* v : current->args()) relevant.push_back(v);
      } else {
        // only first uses of cast and transpose outputs are looked up (the block's reads are
        // not wanted): other vars stay out of the map
        for (Var* v : current->args())
          if (v->op() && (v->op()->type_id() == kCast || v->op()->type_id() == kTranspose))
            relevant.push_back(v);
      }
      for (Var* v : relevant) {
        auto f = first_use.find(v);
        if (f == first_use.end()) {
          first_use[v] = current;
          first_use_keys.push_back(v);
        } else if (!recreated || index(f->second) > index(current)) {
          // an op of the snapshot, visited last to first, comes before every op visited (or
          // inserted before one) so far
          f->second = current;
        }
      }
    }
    for (Operation* op : to_remove) blk.erase(op);
    if (!to_remove.empty()) changed_ = true;  // each was recreated under a fresh name
    if (!want_reads) return {};
    std::unordered_set<Var*> consumed(first_use_keys.begin(), first_use_keys.end());
    for (Var* v : blk.outputs()) consumed.insert(v);
    return consumed;
  }

  Builder* builder_ = nullptr;
  bool changed_ = false;  // whether this run changed the program
};

}  // namespace

/// Registers common::topological_reorder.
void register_topological_reorder(PassRegistry& r) {
  r.add("common::topological_reorder", [] { return std::make_unique<TopologicalReorder>(); });
}

}  // namespace milkit
