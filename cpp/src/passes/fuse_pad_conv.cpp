// common::fuse_pad_conv: pad -> transpose -> conv becomes transpose -> pad -> conv, as coremltools
// does, so that later passes can meld the pad into the conv. Every distinct user of the pad must
// be a transpose with some user whose op type contains "conv", and the pad output must not be a
// block output. Per transpose, a new transpose of the pad's input (fresh perm const) and a new pad
// with the amounts permuted the same way (the pad's other inputs kept) go before the old
// transpose, and its uses move to the new pad; the old transposes and the pad are removed.
// Transposes are handled in the order the pad's uses list them (coremltools uses a set, whose
// order decides the new ops' numbering). coremltools fails when the perm would move a padded axis
// into the leading, unpadded dims, or the pad amounts are unknown; milkit leaves those alone.
// Nested blocks are rewritten until stable before their op; the whole function is repeated until
// nothing changes.
#include <algorithm>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

using pass_util::is_block_output;

std::vector<Operation*> match_pattern(Operation* pad) {
  std::vector<Operation*> ret;
  for (const Use& u : pad->output(0)->uses()) {
    Operation* t = u.op;
    if (t->op_type() != "transpose" || std::find(ret.begin(), ret.end(), t) != ret.end()) continue;
    for (const Use& u2 : t->output(0)->uses())
      if (u2.op->op_type().find("conv") != std::string::npos) {
        ret.push_back(t);
        break;
      }
  }
  return ret;
}

// The pad amounts permuted by the transpose's perm, or false when that is not possible.
bool new_pad_values(const Value& pad, const Operation* t, std::vector<int64_t>& out) {
  Var* pv = t->input1("perm");
  if (!pv || !pv->has_value()) return false;
  std::vector<int64_t> perm = pv->value()->to_ints();
  std::vector<int64_t> amounts = pad.to_ints();
  auto rank = static_cast<int64_t>(perm.size());
  auto pairs = static_cast<int64_t>(amounts.size() / 2);
  int64_t diff = rank - pairs;
  if (amounts.size() % 2 != 0 || diff < 0) return false;
  std::vector<int64_t> padded(static_cast<size_t>(2 * diff), 0);
  padded.insert(padded.end(), amounts.begin(), amounts.end());
  std::vector<int64_t> res(static_cast<size_t>(2 * rank));
  for (int64_t i = 0; i < rank; ++i) {
    int64_t axis = perm[static_cast<size_t>(i)];
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return false;
    res[static_cast<size_t>(2 * i)] = padded[static_cast<size_t>(2 * axis)];
    res[static_cast<size_t>(2 * i + 1)] = padded[static_cast<size_t>(2 * axis + 1)];
  }
  for (int64_t i = 0; i < 2 * diff; ++i)
    if (res[static_cast<size_t>(i)] != 0) return false;
  out.assign(res.begin() + 2 * diff, res.end());
  return true;
}

bool try_transform(Builder& b, Operation* pad, const std::vector<Operation*>& transposes) {
  Var* out = pad->output(0);
  if (is_block_output(out, pad->parent())) return false;
  std::vector<Operation*> users;
  for (const Use& u : out->uses())
    if (std::find(users.begin(), users.end(), u.op) == users.end()) users.push_back(u.op);
  if (users.size() != transposes.size()) return false;
  Var* amounts = pad->input1("pad");
  if (!amounts || !amounts->has_value()) return false;
  std::vector<std::vector<int64_t>> vals(transposes.size());
  for (size_t i = 0; i < transposes.size(); ++i)
    if (!new_pad_values(*amounts->value(), transposes[i], vals[i])) return false;
  for (size_t i = 0; i < transposes.size(); ++i) {
    Operation* t = transposes[i];
    b.set_insertion_point(t->parent(), t);
    b.set_location(t->location());
    std::vector<Arg> targs = {Builder::arg("x", pad->input1("x")),
                              Builder::arg("perm", Value(*t->input1("perm")->value()))};
    Var* nt = b.create("transpose", targs).at(0);
    std::vector<Arg> pargs = {
        Builder::arg("x", nt),
        Builder::arg("pad", Value::from_ints(amounts->value()->dtype(),
                                             {static_cast<int64_t>(vals[i].size())}, vals[i]))};
    for (size_t k = 0; k < pad->num_inputs(); ++k) {
      const std::string& n = pad->schema().inputs[k].name;
      if (n == "x" || n == "pad" || pad->input(k).empty()) continue;
      pargs.push_back(Builder::arg(n, pad->input(k)[0]));
    }
    Var* np = b.create("pad", pargs).at(0);
    pass_util::replace_var(t->output(0), np);
  }
  for (Operation* t : transposes) t->parent()->erase(t);
  pad->parent()->erase(pad);
  return true;
}

// One rewrite attempt at `op` (driven by pass_util::rewrite_ops).
bool step(Builder& b, Block& /*blk*/, Operation* op) {
  if (op->op_type() != "pad") return false;
  std::vector<Operation*> ts = match_pattern(op);
  return !ts.empty() && try_transform(b, op, ts);
}

}  // namespace

/// Registers common::fuse_pad_conv.
void register_fuse_pad_conv(PassRegistry& r) {
  r.add("common::fuse_pad_conv", pass_util::rewrite_pass("common::fuse_pad_conv", {"pad"}, step));
}

}  // namespace milkit
