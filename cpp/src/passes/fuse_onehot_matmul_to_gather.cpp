// common::fuse_onehot_matmul_to_gather: one_hot(indices, axis=-1, on_value=1, off_value=0)
// feeding only matmul(x=one_hot, y=W) with a known rank-2 W and no transposes becomes
// gather(W, indices, axis=0), as coremltools does. The one_hot output must not be a block output
// and its vector size must be known. From iOS17 (whose gather rejects negative indices) the
// indices first go through select(indices >= 0, indices, indices + shape(W)[0]), built like
// coremltools (greater_equal, shape, slice_by_index, add, select, before the matmul). The gather
// takes the matmul output's name; both ops go.
// coremltools accepts on/off values within 1e-3 of 1 and 0, and a non-negative axis equal to the
// indices' rank - 1 (not the last axis of the one_hot output); those fusions change the numbers,
// so milkit requires on_value == 1, off_value == 0 exactly and axis == -1.
// Nested blocks are rewritten until stable before their op; the function is swept until nothing
// changes.
#include <string>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

bool scalar_exactly(const Var* v, double x) {
  if (!v || !v->has_value() || v->value()->numel() != 1) return false;
  if (v->value()->dtype() == DataType::String) return false;
  return v->value()->as_double(0) == x;
}

bool is_true(const Var* v) { return v && v->has_value() && v->value()->as_int(0) != 0; }

bool step(Builder& b, Block& blk, Operation* oh) {
  if (oh->op_type() != "one_hot") return false;
  Var* out = oh->output(0);
  for (Var* o : blk.outputs())
    if (o == out) return false;
  Var* axis = oh->input1("axis");
  Var* indices = oh->input1("indices");
  if (!axis || !axis->has_value() || !indices->type()->has_rank()) return false;
  if (axis->value()->as_int(0) != -1) return false;
  if (!scalar_exactly(oh->input1("on_value"), 1) || !scalar_exactly(oh->input1("off_value"), 0))
    return false;
  Var* size = oh->input1("one_hot_vector_size");
  if (!size || !size->has_value()) return false;
  const auto& uses = out->uses();
  if (uses.size() != 1 || uses[0].op->op_type() != "matmul") return false;
  Operation* mm = uses[0].op;
  if (mm->parent() != &blk || mm->input1("x") != out) return false;
  if (is_true(mm->input1("transpose_x")) || is_true(mm->input1("transpose_y"))) return false;
  Var* w = mm->input1("y");
  if (!w->has_value() || w->value()->rank() != 2) return false;

  b.set_insertion_point(&blk, mm);
  b.set_location(mm->location());
  Var* idx = indices;
  if (blk.function()->opset() >= Target::iOS17) {
    std::vector<Arg> ge = {Builder::arg("x", idx),
                           Builder::arg("y", Value::scalar_int(DataType::Int32, 0))};
    Var* cond = b.create("greater_equal", ge).at(0);
    Var* shape = b.op("shape", {{"x", w}});
    std::vector<Arg> sl = {
        Builder::arg("x", shape), Builder::arg("begin", Value::int_list({0})),
        Builder::arg("end", Value::int_list({0})),
        Builder::arg("squeeze_mask", Value::from_ints(DataType::Bool, {1}, {1}))};
    Var* rows = b.create("slice_by_index", sl).at(0);
    Var* plus = b.op("add", {{"x", idx}, {"y", rows}});
    idx = b.op("select", {{"cond", cond}, {"a", idx}, {"b", plus}});
  }
  std::vector<Arg> ga = {Builder::arg("x", w), Builder::arg("indices", idx),
                         Builder::arg("axis", Value::scalar_int(DataType::Int32, 0))};
  Var* g = b.create("gather", ga, mm->output(0)->name()).at(0);
  pass_util::replace_var(mm->output(0), g);
  blk.erase(mm);
  blk.erase(oh);
  return true;
}

}  // namespace

/// Registers common::fuse_onehot_matmul_to_gather.
void register_fuse_onehot_matmul_to_gather(PassRegistry& r) {
  r.add("common::fuse_onehot_matmul_to_gather",
        pass_util::rewrite_pass("common::fuse_onehot_matmul_to_gather", {"one_hot"}, step,
                                pass_util::OpScan::Function));
}

}  // namespace milkit
