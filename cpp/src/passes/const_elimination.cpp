// common::const_elimination: replaces outputs with known values by const ops (coremltools'
// semantics: the const takes the output's name, the old var is renamed "<name>_ignored", and the
// op is removed once every output is replaced). constexpr ops are never folded.
#include <cstdlib>

#include "milkit/builder/builder.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

class ConstElimination : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    bool changed = false;
    int64_t skip_by_size = -1;
    auto it = opts.find("skip_const_by_size");
    if (it != opts.end() && !it->second.empty()) skip_by_size = std::atoll(it->second.c_str());
    for (auto& [name, f] : p.functions()) {
      Builder b(*f);
      pass_util::for_each_block(
          *f, [&](Block& blk) { changed = fold_block(b, blk, skip_by_size) || changed; });
    }
    return changed;
  }

 private:
  // Returns whether it folded anything.
  static bool fold_block(Builder& b, Block& blk, int64_t skip_by_size) {
    bool changed = false;
    static const uint16_t kConst = op_type_id("const");
    // along the links (no snapshot: one pass over the ops' memory); only `op` is erased and the
    // consts go before it, so its successor, read first, stays valid
    for (Operation *op = blk.front(), *next; op; op = next) {
      next = op->next();
      if (op->type_id() == kConst || op->schema().is_constexpr) continue;
      bool all = true;
      for (Var* out : op->outputs()) {
        if (!out->has_value()) {
          all = false;
          continue;
        }
        if (skip_by_size >= 0 && out->value()->rank() > 0 && out->value()->numel() > skip_by_size) {
          all = false;
          continue;
        }
        b.set_insertion_point(&blk, op);
        b.set_location(op->location());
        std::string name = out->name();
        out->set_name(name + "_ignored");
        Var* c = b.add_const(out->value(), name);
        out->replace_all_uses_with(c);
        changed = true;
      }
      if (all) {
        blk.erase(op);
        changed = true;
      }
    }
    return changed;
  }
};

}  // namespace

/// Registers common::const_elimination.
void register_const_elimination(PassRegistry& r) {
  r.add(
      "common::const_elimination", [] { return std::make_unique<ConstElimination>(); },
      PassTraits{/*skip_rerun_when_unchanged=*/true});
}

}  // namespace milkit
