// common::cast_optimization: removes casts to the dtype their input already has and fuses chains
// of two casts when the second alone keeps the chain's range and resolution, as coremltools does:
//   - x -> cast(same dtype)                 : uses of the cast read x
//   - x -> cast(d1) -> cast(d2), x is d2    : uses of the second cast read x
//   - x -> cast(d1) -> cast(d2), fusable    : a new cast(x, d2) named "<x>_to_<d2>", inserted
//   before
//     the second cast and sharing its dtype const, replaces it
// When a function input would replace a function output, an identity op ("identity_<n>", before the
// first cast) keeps the output's name. Only the second cast is removed; dead_code_elimination
// takes care of the first. Blocks are swept until nothing changes; a fusion whose second cast
// sits in a nested block is done once at the end of the outer block's sweeps.
#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>

#include "milkit/builder/builder.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

using LD = long double;
struct Range {
  LD low, high;
  LD res;
};

// coremltools' _TYPES_TO_RANGE / _TYPES_TO_RESOLUTION (nullopt: not in its tables).
std::optional<Range> range_of(DataType t) {
  switch (t) {
    case DataType::Bool:
      return Range{0, 1, 1};
    case DataType::Int4:
      return Range{-8, 7, 1};
    case DataType::Int8:
      return Range{-128, 127, 1};
    case DataType::UInt1:
      return Range{0, 1, 1};
    case DataType::UInt2:
      return Range{0, 3, 1};
    case DataType::UInt3:
      return Range{0, 7, 1};
    case DataType::UInt4:
      return Range{0, 15, 1};
    case DataType::UInt6:
      return Range{0, 63, 1};
    case DataType::UInt8:
      return Range{0, 255, 1};
    case DataType::Int16:
      return Range{-32768, 32767, 1};
    case DataType::UInt16:
      return Range{0, 65535, 1};
    case DataType::Int32:
      return Range{-2147483648.0L, 2147483647.0L, 1};
    case DataType::Int64:
      return Range{static_cast<LD>(std::numeric_limits<int64_t>::min()),
                   static_cast<LD>(std::numeric_limits<int64_t>::max()), 1};
    case DataType::Float16:
      return Range{-65504.0L, 65504.0L, 1e-3L};
    case DataType::Float32:
      return Range{static_cast<LD>(-std::numeric_limits<float>::max()),
                   static_cast<LD>(std::numeric_limits<float>::max()), 1e-6L};
    case DataType::Float64:
      return Range{static_cast<LD>(-std::numeric_limits<double>::max()),
                   static_cast<LD>(std::numeric_limits<double>::max()), 1e-15L};
    default:
      return std::nullopt;
  }
}

std::optional<Range> propagate(DataType in, std::initializer_list<DataType> chain) {
  auto cur = range_of(in);
  if (!cur) return std::nullopt;
  for (DataType t : chain) {
    auto r = range_of(t);
    if (!r) return std::nullopt;
    cur->low = std::max(cur->low, r->low);
    cur->high = std::min(cur->high, r->high);
    cur->res = std::max(cur->res, r->res);
  }
  return cur;
}

const std::string& dtype_str(const Operation* cast) {
  return cast->input1("dtype")->value()->string_values().at(0);
}

DataType cast_dtype(const Operation* cast) {
  auto t = dtype_from_name(dtype_str(cast));
  return t ? *t : DataType::Unused;
}

bool is_tensor_of(const Var* v, DataType t) {
  return v->type()->is_tensor() && v->type()->dtype() == t;
}

class CastOptimization : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::cast_optimization", {});
    changed_ = false;
    for (auto& [name, f] : p.functions()) {
      Builder b(*f);
      builder_ = &b;
      if (f->has_block_ops())
        wrapper(f->body());
      else
        sweep_body(f->body());
    }
    return changed_;
  }

 private:
  using Pair = std::pair<Operation*, Operation*>;

  void wrapper(Block& blk) {
    std::vector<std::pair<Block*, std::vector<Pair>>> across;
    while (sweep(blk, across)) {
    }
    for (auto& [b, pairs] : across) fuse(pairs, false);
  }

  // wrapper() for a block without nested blocks, walking the block once: the sweeps go over its
  // casts only, in block order as wrapper's sweeps see them (a sweep sees the ops there were when
  // it began; a new cast from a fusion stands where the cast it replaces stood).
  void sweep_body(Block& blk) {
    static const uint16_t kCast = op_type_id("cast");
    std::vector<Operation*> casts;
    for (Operation* op = blk.front(); op; op = op->next())
      if (op->type_id() == kCast) casts.push_back(op);
    std::vector<std::pair<Block*, std::vector<Pair>>> across;  // stays empty: one block
    std::vector<std::pair<Operation*, Operation*>> replaced;
    replaced_ = &replaced;
    for (;;) {
      bool changed = false;
      replaced.clear();
      for (size_t i = 0; i < casts.size(); ++i)
        if (!casts[i]->erased() && transform(casts[i], across)) changed = true;
      if (!changed) break;
      std::unordered_map<Operation*, Operation*> by_old(replaced.begin(), replaced.end());
      size_t n = 0;
      for (Operation* op : casts) {
        if (!by_old.empty()) {
          auto it = by_old.find(op);
          if (it != by_old.end()) op = it->second;
        }
        if (!op->erased()) casts[n++] = op;
      }
      casts.resize(n);
    }
    replaced_ = nullptr;
  }

  bool sweep(Block& blk, std::vector<std::pair<Block*, std::vector<Pair>>>& across) {
    for (Operation* op : blk.ops())
      for (Block* nb : op->blocks()) wrapper(*nb);
    static const uint16_t kCast = op_type_id("cast");
    bool changed = false;
    for (Operation* op : blk.ops())
      if (!op->erased() && op->type_id() == kCast && transform(op, across)) changed = true;
    return changed;
  }

  static bool fusable(const Operation* c1, const Operation* c2) {
    DataType x = c1->input1("x")->type()->dtype();
    auto ref = propagate(x, {cast_dtype(c1), cast_dtype(c2)});
    auto out = propagate(x, {cast_dtype(c2)});
    if (!ref || !out) return false;
    return ref->low == out->low && ref->high == out->high && ref->res == out->res;
  }

  // coremltools' _dup_if_affect_io
  Var* dup_if_affect_io(Var* new_var, Var* old_var, Operation* before) {
    if (!before->parent()->parent_op() && pass_util::is_function_input(new_var) &&
        pass_util::is_function_output(old_var) && !old_var->op()->parent()->parent_op()) {
      builder_->set_insertion_point(before->parent(), before);
      builder_->set_location(before->location());
      return builder_->op("identity", {{"x", new_var}});
    }
    return new_var;
  }

  void fuse(const std::vector<Pair>& pairs, bool reuse_input) {
    for (auto& [c1, c2] : pairs) {
      if (c2->erased()) continue;
      Var* x = c1->input1("x");
      Var* new_var;
      if (reuse_input) {
        new_var = dup_if_affect_io(x, c2->output(0), c1);
      } else {
        builder_->set_insertion_point(c2->parent(), c2);
        builder_->set_location(c2->location());
        new_var = builder_->op("cast", {{"x", x}, {"dtype", c2->input1("dtype")}},
                               x->name() + "_to_" + dtype_str(c2));
      }
      pass_util::replace_var(c2->output(0), new_var);
      if (replaced_ && !reuse_input) replaced_->push_back({c2, new_var->op()});
      c2->parent()->erase(c2);
      changed_ = true;
    }
  }

  bool transform(Operation* root, std::vector<std::pair<Block*, std::vector<Pair>>>& across) {
    Var* x = root->input1("x");
    Var* out = root->output(0);
    if (is_tensor_of(x, cast_dtype(root))) {
      Var* nv = dup_if_affect_io(x, out, root);
      pass_util::replace_var(out, nv);
      root->parent()->erase(root);
      changed_ = true;
      return true;
    }
    std::vector<Operation*> children;
    static const uint16_t kCast = op_type_id("cast");
    for (const Use& u : out->uses())
      if (u.op->type_id() == kCast) children.push_back(u.op);
    bool fused = false;
    for (Operation* child : children) {
      if (child->erased() || !fusable(root, child)) continue;
      if (is_tensor_of(x, cast_dtype(child))) {
        fuse({{root, child}}, true);
        fused = true;
      } else if (child->parent() != root->parent()) {
        auto it = std::find_if(across.begin(), across.end(),
                               [&](auto& e) { return e.first == child->parent(); });
        if (it == across.end()) {
          across.push_back({child->parent(), {}});
          it = across.end() - 1;
        }
        if (std::find(it->second.begin(), it->second.end(), Pair{root, child}) == it->second.end())
          it->second.push_back({root, child});
      } else {
        fuse({{root, child}}, false);
        fused = true;
      }
    }
    return fused;
  }

  Builder* builder_ = nullptr;
  // sweep_body's record of fusions: (second cast, the new cast standing in its place)
  std::vector<std::pair<Operation*, Operation*>>* replaced_ = nullptr;
  bool changed_ = false;  // whether this run changed the program
};

}  // namespace

/// Registers common::cast_optimization.
void register_cast_optimization(PassRegistry& r) {
  r.add(
      "common::cast_optimization", [] { return std::make_unique<CastOptimization>(); },
      PassTraits{/*skip_rerun_when_unchanged=*/true});
}

}  // namespace milkit
