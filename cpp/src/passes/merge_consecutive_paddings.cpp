// common::merge_consecutive_paddings: pad -> pad (the first pad's only user) with the same mode
// becomes one pad whose amounts are the element-wise sum (the shorter list left-filled with
// zeros), as coremltools does. Constant mode needs equal constant_val; other modes need that no
// amount is non-zero in both. The new pad ("pad_<n>", with fresh pad and constant_val consts,
// the first pad's constant_val) goes before the first pad; both old pads are removed. Like
// coremltools only the function body is looked at (not nested blocks), repeated until nothing
// changes. coremltools fails when the first pad's output is also a block output (milkit leaves
// that pair alone) and when an fp16 pad has the default fp32 constant_val (milkit casts it).
#include <algorithm>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

using pass_util::is_block_output;

bool try_merge(Builder& b, Block& blk, Operation* p1) {
  if (p1->op_type() != "pad" || p1->outputs().size() != 1) return false;
  Var* o1 = p1->output(0);
  if (o1->uses().size() != 1) return false;
  Operation* p2 = o1->uses()[0].op;
  if (p2->op_type() != "pad" || is_block_output(o1, &blk)) return false;
  Var* m1 = p1->input1("mode");
  Var* m2 = p2->input1("mode");
  if (!m1 || !m2 || !m1->has_value() || !m2->has_value()) return false;
  const std::string mode = m1->value()->string_values().at(0);
  if (mode != m2->value()->string_values().at(0)) return false;
  Var* a1 = p1->input1("pad");
  Var* a2 = p2->input1("pad");
  if (!a1->has_value() || !a2->has_value()) return false;
  std::vector<int64_t> first = a1->value()->to_ints(), child = a2->value()->to_ints();
  if (first.size() > child.size()) child.insert(child.begin(), first.size() - child.size(), 0);
  if (child.size() > first.size()) first.insert(first.begin(), child.size() - first.size(), 0);
  std::vector<int64_t> final_pad(first.size());
  for (size_t i = 0; i < first.size(); ++i) final_pad[i] = child[i] + first[i];
  Var* c1 = p1->input1("constant_val");
  Var* c2 = p2->input1("constant_val");
  if (mode == "constant") {
    if (!c1 || !c2 || !c1->has_value() || !c2->has_value()) return false;
    if (!(c1->value()->as_double(0) == c2->value()->as_double(0))) return false;
  } else {
    for (size_t i = 0; i < first.size(); ++i)
      if (first[i] != 0 && child[i] != 0) return false;
  }
  b.set_insertion_point(&blk, p1);
  b.set_location(p1->location());
  std::vector<Arg> args = {
      Builder::arg("x", p1->input1("x")),
      Builder::arg("pad", Value::from_ints(a1->value()->dtype(),
                                           {static_cast<int64_t>(final_pad.size())}, final_pad)),
      Builder::arg("mode", Value::scalar_string(mode))};
  if (c1 && c1->value()) {
    // coremltools re-creates the default (fp32) constant_val of an fp16 pad as fp32 and fails;
    // milkit casts it to the input's dtype instead.
    Value cv = *c1->value();
    DataType xdt = p1->input1("x")->type()->dtype();
    bool floats = (cv.dtype() == DataType::Float32 || cv.dtype() == DataType::Float16) &&
                  (xdt == DataType::Float32 || xdt == DataType::Float16);
    if (floats && cv.dtype() != xdt) cv = cv.cast(xdt);
    args.push_back(Builder::arg("constant_val", std::move(cv)));
  }
  Var* out = b.create("pad", args).at(0);
  pass_util::replace_var(p2->output(0), out);
  p2->parent()->erase(p2);
  blk.erase(p1);
  return true;
}

bool merge_block(Builder& b, Block& blk) {
  bool merged = false;
  for (Operation* op : blk.ops()) {
    if (op->erased()) continue;
    if (try_merge(b, blk, op)) merged = true;
  }
  return merged;
}

class MergeConsecutivePaddings : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::merge_consecutive_paddings", {});
    bool changed = false;
    if (!pass_util::has_op_type(p, {"pad"})) return false;  // nothing to match
    for (auto& [name, f] : p.functions()) {
      Builder b(*f);
      while (merge_block(b, f->body())) changed = true;
    }
    return changed;
  }
};

}  // namespace

/// Registers common::merge_consecutive_paddings.
void register_merge_consecutive_paddings(PassRegistry& r) {
  r.add("common::merge_consecutive_paddings",
        [] { return std::make_unique<MergeConsecutivePaddings>(); });
}

}  // namespace milkit
