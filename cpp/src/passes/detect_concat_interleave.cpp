// common::detect_concat_interleave: concat(axis=-3) -> reshape(B, n, C, H, W) ->
// transpose([0, 2, 1, 3, 4]) -> reshape(B, *, H, W) becomes one concat with interleave=True, as
// coremltools does (the channel shuffle of shufflenet). The concat must not interleave already,
// read n rank-4 values of one fully known shape (B, C, H, W), along axis -3 (or 1), and feed only
// the first reshape, whose constant shape is exactly [B, n, C, H, W]; each following op must be
// the only consumer of the previous one, the perm and the last reshape's shape must be constants
// (the latter of rank 4 with [0], [2], [3] == B, H, W), and only the last reshape's output may be
// a block output. The new concat, named after the last reshape's output (fresh axis / interleave
// consts), goes before the old concat and takes the last reshape output's uses; the four old ops
// are removed. Nested blocks are repeated until stable first (ops owning blocks are not matched);
// every block is swept until nothing changes.
#include <algorithm>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

using pass_util::is_block_output;

Operation* only_child(Operation* op) {
  const auto& uses = op->output(0)->uses();
  return uses.size() == 1 ? uses[0].op : nullptr;
}

bool const_ints(const Var* v, std::vector<int64_t>& out) {
  if (!v || !v->has_value()) return false;
  out = v->value()->to_ints();
  return true;
}

bool try_fuse(Builder& b, Block& blk, Operation* concat) {
  if (concat->op_type() != "concat" || is_block_output(concat->output(0), &blk)) return false;
  Var* il = concat->input1("interleave");
  if (il && (!il->has_value() || il->value()->to_ints().at(0) != 0)) return false;
  const auto span = concat->input(0);
  std::vector<Var*> values(span.begin(), span.end());
  if (values.empty() || values[0]->type()->rank() != 4) return false;
  std::vector<int64_t> axis_v;
  if (!const_ints(concat->input1("axis"), axis_v)) return false;
  int64_t axis = axis_v.at(0);
  if (axis > 0) axis -= 4;
  if (axis != -3) return false;
  std::vector<int64_t> shape;
  for (Var* v : values) {
    if (!v->type()->has_rank()) return false;
    for (Dim d : v->type()->shape())
      if (!d->is_const()) return false;
  }
  for (Dim d : values[0]->type()->shape()) shape.push_back(d->value());
  for (Var* v : values) {
    if (v->type()->rank() < 4) return false;
    for (size_t i = 0; i < 4; ++i)
      if (v->type()->shape()[i]->value() != shape[i]) return false;
  }
  Operation* r1 = only_child(concat);
  if (!r1 || r1->op_type() != "reshape") return false;
  const int64_t B = shape[0], C = shape[1], H = shape[2], W = shape[3];
  const auto n = static_cast<int64_t>(values.size());
  std::vector<int64_t> s1;
  if (!const_ints(r1->input1("shape"), s1) || s1 != std::vector<int64_t>{B, n, C, H, W})
    return false;
  Operation* tr = only_child(r1);
  if (!tr || tr->op_type() != "transpose") return false;
  std::vector<int64_t> perm;
  if (!const_ints(tr->input1("perm"), perm) || perm != std::vector<int64_t>{0, 2, 1, 3, 4})
    return false;
  Operation* r2 = only_child(tr);
  if (!r2 || r2->op_type() != "reshape") return false;
  std::vector<int64_t> s2;
  if (!const_ints(r2->input1("shape"), s2) || s2.size() != 4) return false;
  if (s2[0] != B || s2[2] != H || s2[3] != W) return false;
  if (is_block_output(r1->output(0), &blk) || is_block_output(tr->output(0), &blk)) return false;
  b.set_insertion_point(&blk, concat);
  b.set_location(concat->location());
  Arg vals;
  vals.name = "values";
  vals.is_sequence = true;
  for (Var* v : values) vals.items.push_back(ArgItem{v, nullptr});
  std::vector<Arg> args = {vals,
                           Builder::arg("axis", Value::scalar_int(DataType::Int32, axis_v.at(0))),
                           Builder::arg("interleave", Value::scalar_bool(true))};
  Var* out = b.create("concat", args, r2->output(0)->name()).at(0);
  pass_util::replace_var(r2->output(0), out);
  blk.erase(r2);
  blk.erase(tr);
  blk.erase(r1);
  blk.erase(concat);
  return true;
}

// One rewrite attempt at `op` (driven by pass_util::rewrite_ops).
bool step(Builder& b, Block& blk, Operation* op) { return try_fuse(b, blk, op); }

}  // namespace

/// Registers common::detect_concat_interleave.
void register_detect_concat_interleave(PassRegistry& r) {
  r.add("common::detect_concat_interleave",
        pass_util::rewrite_pass("common::detect_concat_interleave", {"concat"}, step));
}

}  // namespace milkit
