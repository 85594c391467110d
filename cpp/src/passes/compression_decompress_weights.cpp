// compression::decompress_weights, coremltools' WeightDecompressor: every constexpr_* op (affine
// dequantize, blockwise shift-scale, LUT, sparse, cast; chained ones included) is computed with the
// interpreter's kernels and replaced by a const of the same name holding the decompressed weight;
// the compressed inputs left unused are removed. Nested blocks included.
#include <algorithm>
#include <unordered_map>

#include "milkit/builder/builder.h"
#include "milkit/passes/compression.h"
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

bool decompress(Function& f) {
  std::vector<Operation*> ops;
  collect(f.body(), ops);
  if (ops.empty()) return false;
  auto values = compression::materialize_all(f, ops);
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
    compression::release_free_memory();
    return changed;
  }
};

}  // namespace

/// Registers compression::decompress_weights.
void register_compression_decompress_weights(PassRegistry& r) {
  r.add(kName, [] { return std::make_unique<DecompressWeights>(); });
}

}  // namespace milkit
