// common::guard_negative_gather_indices: from iOS17 on, gather / gather_nd no longer accept
// negative indices, so, as coremltools does, every gather / gather_nd of a function whose opset is
// iOS17 or later with signed integer indices gets its indices rewritten to
// select(indices >= 0, indices, indices + dim): for gather `dim` is shape(x)[axis] (a squeezing
// slice_by_index), for gather_nd it is the leading indices.shape[-1] dims of shape(x)
// (shape -> slice_by_index -> expand_dims -> slice_by_size). Indices that are not int32 are cast
// to int32 first and x whose dtype is not fp16 / fp32 / int32 / bool is cast to bool before shape.
// A new gather (same name, x, batch_dims and validate_indices vars, axis as a fresh const) takes
// the old one's uses and the old one is removed. Ops created by the pass are not revisited; nested
// blocks are handled before the op that owns them.
#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

bool is_unsigned(DataType dt) {
  switch (dt) {
    case DataType::UInt1:
    case DataType::UInt2:
    case DataType::UInt3:
    case DataType::UInt4:
    case DataType::UInt6:
    case DataType::UInt8:
    case DataType::UInt16:
    case DataType::UInt32:
    case DataType::UInt64:
      return true;
    default:
      return false;
  }
}

// x[idx] of a rank-1 var, the way coremltools' pymil_value_at builds it.
Var* value_at(Builder& b, Var* x, int64_t idx) {
  std::vector<Arg> args = {
      Builder::arg("x", x), Builder::arg("begin", Value::int_list({idx})),
      Builder::arg("end", Value::int_list({0})),
      Builder::arg("squeeze_mask", Value::from_ints(DataType::Bool, {1}, {1}))};
  return b.create("slice_by_index", args).at(0);
}

bool transform(Builder& b, Operation* op) {
  Var* indices = op->input1("indices");
  Var* x = op->input1("x");
  if (!indices || !x || !indices->type()->is_tensor()) return false;
  if (is_unsigned(indices->type()->dtype())) return false;
  const bool is_gather = op->op_type() == "gather";
  int64_t axis = 0;
  if (is_gather) {
    Var* av = op->input1("axis");
    if (!av || !av->has_value()) return false;
    axis = av->value()->to_ints().at(0);
  }
  b.set_insertion_point(op->parent(), op);
  b.set_location(op->location());
  Var* idx32 = indices;
  if (indices->type()->dtype() != DataType::Int32) {
    std::vector<Arg> a = {Builder::arg("x", indices),
                          Builder::arg("dtype", Value::scalar_string("int32"))};
    idx32 = b.create("cast", a).at(0);
  }
  Var* x_for_shape = x;
  DataType xdt = x->type()->dtype();
  if (xdt != DataType::Float16 && xdt != DataType::Float32 && xdt != DataType::Int32 &&
      xdt != DataType::Bool) {
    std::vector<Arg> a = {Builder::arg("x", x),
                          Builder::arg("dtype", Value::scalar_string("bool"))};
    x_for_shape = b.create("cast", a).at(0);
  }
  std::vector<Arg> ge = {Builder::arg("x", idx32),
                         Builder::arg("y", Value::scalar_int(DataType::Int32, 0))};
  Var* cond = b.create("greater_equal", ge).at(0);
  Var* x_shape = b.op("shape", {{"x", x_for_shape}});
  Var* plus = nullptr;
  if (is_gather) {
    Var* size = value_at(b, x_shape, axis);
    plus = b.op("add", {{"x", idx32}, {"y", size}});
  } else {
    Var* ishape = b.op("shape", {{"x", idx32}});
    Var* last = value_at(b, ishape, indices->type()->rank() - 1);
    std::vector<Arg> ed = {Builder::arg("x", last), Builder::arg("axes", Value::int_list({0}))};
    Var* last_exp = b.create("expand_dims", ed).at(0);
    std::vector<Arg> ss = {Builder::arg("x", x_shape), Builder::arg("begin", Value::int_list({0})),
                           Builder::arg("size", last_exp)};
    Var* slice_shape = b.create("slice_by_size", ss).at(0);
    plus = b.op("add", {{"x", idx32}, {"y", slice_shape}});
  }
  Var* nonneg = b.op("select", {{"cond", cond}, {"a", idx32}, {"b", plus}});
  std::vector<Arg> ga = {Builder::arg("x", x), Builder::arg("indices", nonneg)};
  if (is_gather) ga.push_back(Builder::arg("axis", Value::scalar_int(DataType::Int32, axis)));
  for (const char* n : {"batch_dims", "validate_indices"}) {
    Var* v = op->input1(n);
    if (v) ga.push_back(Builder::arg(n, v));
  }
  Var* old_out = op->output(0);
  Var* ng = b.create(op->op_type(), ga, old_out->name()).at(0);
  pass_util::replace_var(old_out, ng);
  op->parent()->erase(op);
  return true;
}

bool guard_block(Builder& b, Block& blk) {
  bool changed = false;
  std::vector<Operation*> ops = blk.ops();
  for (Operation* op : ops) {
    if (op->erased()) continue;
    for (Block* nb : op->blocks()) changed = guard_block(b, *nb) || changed;
    if ((op->op_type() == "gather" || op->op_type() == "gather_nd") && transform(b, op))
      changed = true;
  }
  return changed;
}

class GuardNegativeGatherIndices : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::guard_negative_gather_indices", {});
    bool changed = false;
    if (!pass_util::has_op_type(p, {"gather", "gather_nd"})) return false;  // nothing to match
    for (auto& [name, f] : p.functions()) {
      if (f->opset() < Target::iOS17) continue;
      Builder b(*f);
      changed = guard_block(b, f->body()) || changed;
    }
    return changed;
  }
};

}  // namespace

/// Registers common::guard_negative_gather_indices.
void register_guard_negative_gather_indices(PassRegistry& r) {
  r.add("common::guard_negative_gather_indices",
        [] { return std::make_unique<GuardNegativeGatherIndices>(); });
}

}  // namespace milkit
