// common::fuse_transpose_matmul: a matmul operand produced by a transpose that only swaps the
// last two dims (rank >= 2; negative perm entries allowed) is read directly and the matmul's
// transpose_x / transpose_y flag flipped, as coremltools does. The new matmul takes the old op's
// name and goes before it; the old matmul is removed, the transposes are left in place. Nested
// blocks are rewritten before their op; one sweep. The perm consts of the transposes examined
// are rewritten to coremltools' canonical form (see swaps_last_two).
#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

// Like coremltools, checking a transpose rewrites its perm const in place: negative entries are
// made positive, then the last two entries get rank subtracted ([0, 2, 1] -> [0, -1, -2]).
bool swaps_last_two(const Var* v) {
  Operation* t = v->op();
  if (!t || t->op_type() != "transpose") return false;
  int64_t rank = static_cast<int64_t>(v->type()->shape().size());
  if (rank < 2) return false;
  Var* perm = t->input1("perm");
  if (!perm || !perm->has_value() || perm->value()->numel() != rank) return false;
  std::vector<int64_t> p = perm->value()->to_ints();
  bool ok = true;
  for (int64_t i = 0; i < rank; ++i) {
    int64_t& e = p[static_cast<size_t>(i)];
    if (e < 0) e += rank;
    int64_t want = i < rank - 2 ? i : (i == rank - 2 ? rank - 1 : rank - 2);
    if (e != want) ok = false;
    if (i >= rank - 2) e -= rank;
  }
  perm->set_value(std::make_shared<const Value>(
      Value::from_ints(perm->value()->dtype(), perm->value()->shape(), p)));
  return ok;
}

bool flag(const Operation* op, const char* name) {
  Var* v = op->input1(name);
  return v && v->has_value() && v->value()->as_int(0) != 0;
}

bool fuse_block(Builder& b, Block& blk) {
  bool changed = false;
  for (Operation* op : blk.ops()) {
    if (op->erased()) continue;
    for (Block* nb : op->blocks()) changed = fuse_block(b, *nb) || changed;
    if (op->op_type() != "matmul") continue;
    Var* x = op->input1("x");
    Var* y = op->input1("y");
    bool tx = flag(op, "transpose_x"), ty = flag(op, "transpose_y");
    bool fx = swaps_last_two(x), fy = swaps_last_two(y);
    if (!fx && !fy) continue;
    if (fx) {
      x = x->op()->input1("x");
      tx = !tx;
    }
    if (fy) {
      y = y->op()->input1("x");
      ty = !ty;
    }
    b.set_insertion_point(&blk, op);
    b.set_location(op->location());
    std::vector<Arg> args = {Builder::arg("x", x), Builder::arg("y", y),
                             Builder::arg("transpose_x", Value::scalar_bool(tx)),
                             Builder::arg("transpose_y", Value::scalar_bool(ty))};
    Var* nv = b.create("matmul", args, op->name()).at(0);
    pass_util::replace_var(op->output(0), nv);
    blk.erase(op);
    changed = true;
  }
  return changed;
}

}  // namespace

/// Registers common::fuse_transpose_matmul.
void register_fuse_transpose_matmul(PassRegistry& r) {
  r.add("common::fuse_transpose_matmul",
        pass_util::block_pass("common::fuse_transpose_matmul", {"matmul"}, fuse_block));
}

}  // namespace milkit
