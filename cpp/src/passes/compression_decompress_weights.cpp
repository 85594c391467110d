// compression::decompress_weights, coremltools' WeightDecompressor: every constexpr_* op (affine
// dequantize, blockwise shift-scale, LUT, sparse, cast; chained ones included) is computed with the
// interpreter's kernels and replaced by a const of the same name holding the decompressed weight;
// the compressed inputs left unused are removed. Nested blocks included.
#include <algorithm>
#include <unordered_map>

#include "milkit/builder/builder.h"
#include "milkit/exec/plan.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

constexpr const char* kName = "compression::decompress_weights";

bool is_constexpr(const Operation* op) { return op->schema().is_constexpr; }

void collect(Block& b, std::vector<Operation*>& out) {
  for (Operation* op : b.ops()) {
    for (Block* nb : op->blocks()) collect(*nb, out);
    if (is_constexpr(op)) out.push_back(op);
  }
}

// The constexpr ops of `ops` rebuilt in a function of their own whose outputs are every constexpr
// output, then run once: returns the values by var.
std::unordered_map<const Var*, std::shared_ptr<const Value>> evaluate(
    const Function& f, const std::vector<Operation*>& ops) {
  auto g = std::make_shared<Function>(f.opset());
  Builder b(*g);
  std::unordered_map<const Var*, Var*> map;
  std::vector<const Var*> outs;
  std::vector<Var*> new_outs;
  for (Operation* op : ops) {
    std::vector<Arg> args;
    const auto& schema = op->schema();
    for (size_t i = 0; i < op->num_inputs(); ++i) {
      VarSpan in = op->input(i);
      if (in.size() == 0) continue;
      Var* v = in[0];
      auto it = map.find(v);
      if (it != map.end())
        args.push_back(Builder::arg(schema.inputs[i].name, it->second));
      else
        args.push_back(Builder::arg(schema.inputs[i].name, *v->value()));
    }
    auto results = b.create(op->op_type(), args, op->name());
    for (size_t k = 0; k < op->num_outputs(); ++k) {
      map[op->output(k)] = results.at(k);
      outs.push_back(op->output(k));
      new_outs.push_back(results.at(k));
    }
  }
  g->body().set_outputs(new_outs);
  Plan plan(g);
  auto res = plan.run({});
  std::unordered_map<const Var*, std::shared_ptr<const Value>> values;
  for (size_t k = 0; k < outs.size(); ++k)
    values[outs[k]] = std::make_shared<const Value>(res.at(k).second.to_value());
  return values;
}

bool decompress(Function& f) {
  std::vector<Operation*> ops;
  collect(f.body(), ops);
  if (ops.empty()) return false;
  auto values = evaluate(f, ops);
  for (Operation* op : ops) {
    Builder b(f);
    b.set_insertion_point(op->parent(), op);
    const std::string op_name = op->name();
    op->set_name(op_name + "__compressed");
    for (size_t k = 0; k < op->num_outputs(); ++k) {
      Var* v = op->output(k);
      std::string name = op->num_outputs() == 1 ? op_name : v->name();
      v->set_name(v->name() + "__compressed");
      Var* c = b.add_const(values.at(v), std::move(name));
      pass_util::replace_var(v, c);
    }
  }
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) (*it)->parent()->erase(*it);
  return true;
}

class DecompressWeights : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, kName, {});
    bool changed = false;
    for (auto& [name, f] : p.functions()) changed = decompress(*f) || changed;
    if (changed) {
      PassManager pm;
      pm.add("common::dead_code_elimination");
      pm.run(p);
    }
    return changed;
  }
};

}  // namespace

/// Registers compression::decompress_weights.
void register_compression_decompress_weights(PassRegistry& r) {
  r.add(kName, [] { return std::make_unique<DecompressWeights>(); });
}

}  // namespace milkit
