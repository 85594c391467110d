// common::noop_elimination: removes ops that return their input unchanged, as coremltools does:
//   identity; add/sub of 0, mul/real_div/floor_div/pow by 1 (the constant side known, or made by a
//   fill of that value; add and mul on either side) when the other input has the output's type;
//   reshape, split (one output), slice_by_size, pad, tile, upsample_nearest_neighbor,
//   upsample_bilinear, resize_bilinear, crop whose output type equals the input type;
//   slice_by_index likewise unless a stride is negative; transpose with an identity permutation;
//   linear_activation with alpha 1 and beta 0.
// Ops whose output is an output of their block are kept. Ops with nested blocks are not matched;
// their blocks are rewritten until stable first. Repeated until nothing changes.
#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "milkit/ops/registry.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

enum class Kind : uint8_t {
  None,
  Identity,
  Add,
  Mul,
  Sub,
  DivLike,
  SameShape,
  SliceByIndex,
  Transpose,
  LinearActivation
};

// What noop_input looks at, by op type id.
Kind kind_of(const Operation* op) {
  static const std::vector<Kind> table = [] {
    std::vector<Kind> t(OpRegistry::instance().num_types(), Kind::None);
    auto set = [&](const char* n, Kind k) { t[op_type_id(n)] = k; };
    set("identity", Kind::Identity);
    set("add", Kind::Add);
    set("mul", Kind::Mul);
    set("sub", Kind::Sub);
    for (const char* n : {"real_div", "floor_div", "pow"}) set(n, Kind::DivLike);
    for (const char* n :
         {"reshape", "split", "slice_by_size", "pad", "tile", "upsample_nearest_neighbor",
          "upsample_bilinear", "resize_bilinear", "crop"})
      set(n, Kind::SameShape);
    set("slice_by_index", Kind::SliceByIndex);
    set("transpose", Kind::Transpose);
    set("linear_activation", Kind::LinearActivation);
    return t;
  }();
  return op->type_id() < table.size() ? table[op->type_id()] : Kind::None;
}

bool all_equal(const Var* v, double value) {
  static const uint16_t kFill = op_type_id("fill");
  const Value* val = nullptr;
  if (v->has_value()) {
    val = v->value().get();
  } else if (v->op() && v->op()->type_id() == kFill) {
    Var* fv = v->op()->input1("value");
    if (!fv || !fv->has_value() || fv->value()->numel() != 1) return false;
    val = fv->value().get();
  } else {
    return false;
  }
  if (val->dtype() == DataType::String) return false;
  for (int64_t i = 0; i < val->numel(); ++i)
    if (val->as_double(i) != value) return false;
  return true;
}

// The var that replaces the op's output, or nullptr.
Var* noop_input(Operation* op) {
  const Kind k = kind_of(op);
  if (k == Kind::None) return nullptr;
  Var* out = op->output(0);
  if (k == Kind::Identity) return op->input1("x");
  if (k == Kind::Add || k == Kind::Mul || k == Kind::Sub || k == Kind::DivLike) {
    std::optional<double> xv, yv;
    if (k == Kind::Add) xv = yv = 0.0;
    if (k == Kind::Mul) xv = yv = 1.0;
    if (k == Kind::Sub) yv = 0.0;
    if (k == Kind::DivLike) yv = 1.0;
    Var* in = nullptr;
    if (xv && all_equal(op->input1("x"), *xv))
      in = op->input1("y");
    else if (all_equal(op->input1("y"), *yv))
      in = op->input1("x");
    return in && in->type() == out->type() ? in : nullptr;
  }
  if (k == Kind::SameShape || k == Kind::SliceByIndex) {
    Var* x = op->input1("x");
    if (x->type() != out->type()) return nullptr;
    if (k == Kind::SliceByIndex) {
      Var* stride = op->input1("stride");
      if (stride && stride->has_value())
        for (int64_t s : stride->value()->to_ints())
          if (s < 0) return nullptr;
    }
    return x;
  }
  if (k == Kind::Transpose) {
    std::vector<int64_t> perm = op->input1("perm")->value()->to_ints();
    int64_t n = static_cast<int64_t>(perm.size());
    for (auto& p : perm) p = p < 0 ? p + n : p;
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    return perm == sorted ? op->input1("x") : nullptr;
  }
  if (k == Kind::LinearActivation) {
    Var* a = op->input1("alpha");
    Var* b = op->input1("beta");
    if (!a->has_value() || !b->has_value()) return nullptr;
    if (a->value()->as_double(0) != 1.0 || b->value()->as_double(0) != 0.0) return nullptr;
    return op->input1("x");
  }
  return nullptr;
}

bool eliminate_block(Block& blk, bool& nested) {
  bool changed = false;
  // along the links: only `op` is erased (its successor, read first, stays valid) and no op is
  // inserted
  for (Operation *op = blk.front(), *next; op; op = next) {
    next = op->next();
    for (Block* nb : op->blocks())
      while (eliminate_block(*nb, nested)) nested = true;
    if (kind_of(op) == Kind::None || !op->blocks().empty() || op->num_outputs() != 1) continue;
    Var* out = op->output(0);
    if (std::find(blk.outputs().begin(), blk.outputs().end(), out) != blk.outputs().end()) continue;
    Var* in = noop_input(op);
    if (!in) continue;
    pass_util::replace_var(out, in);
    blk.erase(op);
    changed = true;
  }
  return changed;
}

class NoopElimination : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::noop_elimination", {});
    bool changed = false;
    bool nested = false;  // a change in a nested block
    for (auto& [name, f] : p.functions())
      while (eliminate_block(f->body(), nested)) changed = true;
    return changed || nested;
  }
};

}  // namespace

/// Registers common::noop_elimination.
void register_noop_elimination(PassRegistry& r) {
  r.add(
      "common::noop_elimination", [] { return std::make_unique<NoopElimination>(); },
      PassTraits{/*skip_rerun_when_unchanged=*/true});
}

}  // namespace milkit
