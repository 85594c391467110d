// common::fuse_reduce_mean: reduce_sum(x, axes) followed by mul(1/count) or real_div(count) ->
// reduce_mean(x, axes, keep_dims), as coremltools does. count is the product of the reduced dims
// of x, which must all be known integers; the reduce_sum needs const axes, must not be a block
// output and must have exactly one consuming op: a mul whose other input is a scalar within 1e-6
// of 1/count, or a real_div with it as `x` and a scalar within 1e-2 of count as `y` (compared in
// the constant's dtype, like numpy). The reduce_mean takes the mul/real_div output name and goes
// before it. Nested blocks first; repeated until nothing changes.
#include <cmath>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

// `x` rounded to the floating dtype `dt` (numpy's weak python-scalar promotion), else unchanged.
double in_dtype(DataType dt, double x) {
  if (dt == DataType::Float16) return Value::scalar_float(DataType::Float16, x).as_double(0);
  if (dt == DataType::Float32) return static_cast<double>(static_cast<float>(x));
  return x;
}

// coremltools' _check_var_scalar_value: a const of one element within `tol` of `val`.
bool scalar_close(const Var* v, double val, double tol) {
  if (!v || !v->has_value() || v->value()->numel() != 1) return false;
  DataType dt = v->value()->dtype();
  if (dt == DataType::String) return false;
  bool fl = dt == DataType::Float16 || dt == DataType::Float32;
  double diff = v->value()->as_double(0) - (fl ? in_dtype(dt, val) : val);
  diff = std::fabs(in_dtype(dt, diff));
  return diff < (fl ? in_dtype(dt, tol) : tol);
}

bool try_fuse(Builder& b, Block& blk, Operation* rs) {
  Var* x = rs->input1("x");
  Var* axes = rs->input1("axes");
  Var* keep = rs->input1("keep_dims");
  if (!x->type()->is_tensor() || !x->type()->has_rank()) return false;
  if (!axes || !axes->has_value() || !keep || !keep->has_value()) return false;
  const auto& shape = x->type()->shape();
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t count = 1;
  for (int64_t a : axes->value()->to_ints()) {
    int64_t d = a < 0 ? a + rank : a;
    if (d < 0 || d >= rank || !shape[d]->is_const()) return false;
    count *= shape[d]->value();
  }
  Var* out = rs->output(0);
  for (Var* o : blk.outputs())
    if (o == out) return false;
  if (out->uses().size() != 1) return false;
  Operation* child = out->uses()[0].op;
  if (child->op_type() == "mul") {
    Var* other = child->input1("y") == out ? child->input1("x") : child->input1("y");
    if (!scalar_close(other, 1.0 / static_cast<double>(count), 1e-6)) return false;
  } else if (child->op_type() == "real_div") {
    if (child->input1("x") != out) return false;
    if (!scalar_close(child->input1("y"), static_cast<double>(count), 1e-2)) return false;
  } else {
    return false;
  }
  // A consumer in a nested block, or a reduce_sum returned by a nested block, makes coremltools
  // fail; those are skipped.
  if (child->parent() != &blk || !out->block_uses().empty()) return false;
  b.set_insertion_point(&blk, child);
  b.set_location(child->location());
  std::vector<Arg> args = {Builder::arg("x", x), Builder::arg("axes", Value(*axes->value())),
                           Builder::arg("keep_dims", Value(*keep->value()))};
  Var* rm = b.create("reduce_mean", args, child->output(0)->name())[0];
  pass_util::replace_var(child->output(0), rm);
  blk.erase(child);
  blk.erase(rs);
  return true;
}

// One rewrite attempt at `op` (driven by pass_util::rewrite_ops).
bool step(Builder& b, Block& blk, Operation* op) {
  return op->op_type() == "reduce_sum" && try_fuse(b, blk, op);
}

}  // namespace

/// Registers common::fuse_reduce_mean.
void register_fuse_reduce_mean(PassRegistry& r) {
  r.add("common::fuse_reduce_mean",
        pass_util::rewrite_pass("common::fuse_reduce_mean", {"reduce_sum"}, step));
}

}  // namespace milkit
