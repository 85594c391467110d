// common::fuse_layernorm_or_instancenorm: the five normalization patterns coremltools detects
// (mean / variance chains ending in a scale and shift) -> layer_norm or instance_norm (with
// transposes around it for channel-last [-3, -2] reductions), as coremltools does.
//   1. reduce_mean, sub, square, reduce_mean, add(eps), rsqrt, mul(gamma), mul(x), mul(mean),
//      sub(beta, .), add
//   2. reduce_mean, sub, sub, square, reduce_mean, add(eps), pow(0.5), real_div, mul(gamma),
//      add(beta)
//   3. reduce_mean, sub, square, reduce_mean, add(eps), rsqrt, mul(x), mul(mean), mul(-1), add
//      (gamma ones / beta zeros of shape (1, C, 1, 1))
//   4. reduce_sum, mul(1/n), mul(x, x), reduce_sum, mul(1/n), sub(mean^2), add(eps), rsqrt,
//      mul(gamma), mul(x), mul(mean), sub(beta, .), add
//   5. reduce_mean(axes=[1]), sub, mul(d, d), reduce_mean(axes=[1]), add(eps), rsqrt, mul(d),
//      optionally add(beta), mul(gamma) (gamma squeezed, beta = squeeze(beta) * gamma)
// Child-op checks follow coremltools' use order (an op reading a var twice counts twice). The
// new op takes the last matched op's output name (or "<name>_layernorm" / "_instancenorm"
// between "<name>_transpose_nhwc_nchw" and "<name>_transpose_nchw_nhwc") and goes before it.
// Consts patterns 3 and 5 make are appended at the end of the block, as in coremltools (and stay
// there, unused, when the fusion then fails). Where coremltools would raise (a removed op still
// used elsewhere or returned by a block, an op in another block) the pattern is skipped. Nested
// blocks first; repeated until nothing changes.
#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/passes/match_util.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

// The consuming ops of an op's single output, in use order (empty when it has several outputs).
std::vector<Operation*> children(const Operation* op) {
  std::vector<Operation*> r;
  if (!op || op->outputs().size() != 1) return r;
  for (const Use& u : op->output(0)->uses()) r.push_back(u.op);
  return r;
}

// coremltools' _check_child_op_types.
bool child_types(const Operation* op, std::vector<std::string> want, bool ordered = true) {
  if (!op || op->outputs().size() != 1) return false;
  std::vector<std::string> got;
  for (Operation* c : children(op)) got.push_back(c->op_type());
  if (got.size() != want.size()) return false;
  if (!ordered) {
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
  }
  return got == want;
}

// coremltools' _try_get_child_op_type: child `index` when it has type `t`.
Operation* child_of(const Operation* op, const char* t, size_t index = 0) {
  std::vector<Operation*> c = children(op);
  if (index >= c.size() || c[index]->op_type() != t) return nullptr;
  return c[index];
}

// coremltools' _check_reduce_op: the mode, keep_dims const true, const axes.
bool reduce_ok(const Operation* op, const char* mode = "reduce_mean") {
  if (!op || op->op_type() != mode) return false;
  Var* k = op->input1("keep_dims");
  Var* a = op->input1("axes");
  if (!k || !k->has_value() || k->value()->as_int(0) == 0) return false;
  return a && a->has_value();
}

Var* other_input(const Operation* op, const Var* v) {
  return op->input1("x") == v ? op->input1("y") : op->input1("x");
}

bool known_scalar(const Var* v) { return v->has_value() && v->value()->rank() == 0; }

// Whether the root var has a known rank.
bool ranked(const Var* v) { return v->type()->is_tensor() && v->type()->has_rank(); }

// gamma / beta: a var (possibly absent); `made` marks the consts patterns 3 and 5 create.
struct Param {
  Var* var = nullptr;
  bool made = false;
  bool present() const { return var != nullptr; }
  int rank() const { return var && var->type()->is_tensor() ? var->type()->rank() : -1; }
  const Value& value() const { return *var->value(); }
};

// coremltools' mb.const(name=...) inside the pass: a const appended at the end of the block
// (left there, unused, when the fusion then fails).
Param made_const(Builder& b, Block& blk, Value v, const std::string& name) {
  b.set_insertion_point(&blk, nullptr);
  Param p;
  p.var = b.add_const(std::make_shared<Value>(std::move(v)), name);
  p.made = true;
  return p;
}

Param of_var(Var* v) {
  Param p;
  p.var = v;
  return p;
}

// np.squeeze of a value.
Value squeezed(const Value& v) {
  std::vector<int64_t> s;
  for (int64_t d : v.shape())
    if (d != 1) s.push_back(d);
  return v.reshaped(s);
}

bool contains(const std::vector<Operation*>& ops, const Operation* op) {
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

// coremltools' _try_apply_transform.
bool apply(Builder& b, Block& blk, Operation* reduce, Param gamma, Param beta, Var* eps,
           Operation* end, std::vector<Operation*> remove) {
  for (size_t i = 0; i + 1 < remove.size(); ++i)
    for (Var* o : remove[i]->outputs())
      for (Var* bo : blk.outputs())
        if (o == bo) return false;
  Var* x = reduce->input1("x");
  if (!ranked(x)) return false;
  std::vector<int64_t> axes = reduce->input1("axes")->value()->to_ints();
  int64_t rank = x->type()->rank();
  std::vector<int64_t> neg;
  for (int64_t a : axes) neg.push_back(a >= 0 ? a - rank : a);
  std::sort(neg.begin(), neg.end());
  int64_t n = static_cast<int64_t>(axes.size());
  bool layer = false, inst = false, transpose = false;
  int gr = gamma.present() ? gamma.rank() : -1;
  int br = beta.present() ? beta.rank() : -1;
  if (gr == n && br == n) {
    layer = true;
    for (int64_t i = 0; i < n; ++i)
      if (neg[i] != i - n) layer = false;
  }
  bool values_only = false;  // gamma / beta become fresh consts of their values
  if (rank == 4 && neg == std::vector<int64_t>{-3}) {
    layer = (!gamma.present() && !beta.present()) || (gr == 1 && br == 1);
    if (gamma.var && gamma.var->op()) remove.push_back(gamma.var->op());
    if (beta.var && beta.var->op()) remove.push_back(beta.var->op());
    values_only = true;
  }
  if (rank == 4 && (neg == std::vector<int64_t>{-2, -1} || neg == std::vector<int64_t>{-3, -2})) {
    if (!gamma.present() || !beta.present()) return false;  // coremltools fails
    if (squeezed(gamma.value()).rank() == 1 && squeezed(beta.value()).rank() == 1) inst = true;
    if (neg == std::vector<int64_t>{-3, -2}) transpose = true;
  }
  if (!inst && !layer) return false;
  if (inst) {
    // coremltools does not check gamma against the channel count; milkit's instance_norm does.
    const Dim ch = x->type()->shape()[transpose ? 3 : 1];
    if (ch->is_const() && (squeezed(gamma.value()).numel() != ch->value() ||
                           squeezed(beta.value()).numel() != ch->value()))
      return false;
  }
  if (inst) {
    if (gamma.var && gamma.var->op()) remove.push_back(gamma.var->op());
    if (beta.var && beta.var->op()) remove.push_back(beta.var->op());
  }
  // Where coremltools' remove_ops would raise, skip.
  for (Operation* op : remove) {
    if (op->parent() != &blk) return false;
    for (Var* o : op->outputs()) {
      if (!o->block_uses().empty() && op != end) return false;
      for (const Use& u : o->uses())
        if (!contains(remove, u.op) && op != end) return false;
    }
  }
  const std::string out = end->output(0)->name();
  b.set_insertion_point(&blk, end);
  b.set_location(end->location());
  Var* cur = x;
  if (transpose) {
    std::vector<Arg> a = {Builder::arg("x", x),
                          Builder::arg("perm", Value::int_list({0, 3, 1, 2}))};
    cur = b.create("transpose", a, out + "_transpose_nhwc_nchw")[0];
  }
  if (inst) {
    std::vector<Arg> a = {Builder::arg("x", cur), Builder::arg("gamma", squeezed(gamma.value())),
                          Builder::arg("beta", squeezed(beta.value())),
                          Builder::arg("epsilon", eps)};
    cur = b.create("instance_norm", a, transpose ? out + "_instancenorm" : out)[0];
  } else {
    std::vector<Arg> a = {Builder::arg("x", cur),
                          Builder::arg("axes", Value(*reduce->input1("axes")->value()))};
    for (auto* p : {&gamma, &beta}) {
      const char* key = p == &gamma ? "gamma" : "beta";
      if (!p->present()) continue;
      if (values_only) {
        a.push_back(Builder::arg(key, Value(p->value())));
      } else {
        // coremltools leaves a made const after its use at the end of the block; milkit moves
        // it before the new op so the program stays in order.
        if (p->made) blk.move_before(p->var->op(), end);
        a.push_back(Builder::arg(key, p->var));
      }
    }
    a.push_back(Builder::arg("epsilon", eps));
    cur = b.create("layer_norm", a, transpose ? out + "_layernorm" : out)[0];
  }
  if (transpose) {
    std::vector<Arg> a = {Builder::arg("x", cur),
                          Builder::arg("perm", Value::int_list({0, 2, 3, 1}))};
    cur = b.create("transpose", a, out + "_transpose_nchw_nhwc")[0];
  }
  pass_util::replace_var(end->output(0), cur);
  std::set<Operation*> done;
  // Consumers first, so every erased op's outputs are already unused.
  std::vector<Operation*> order;
  for (Operation* op = blk.back(); op; op = op->prev())
    if (contains(remove, op) && done.insert(op).second) order.push_back(op);
  for (Operation* op : order) blk.erase(op);
  return true;
}

// Root var checks shared by patterns 1 to 4.
bool root_ok(const Var* root, size_t uses, const std::vector<std::vector<std::string>>& kinds) {
  if (!ranked(root) || root->uses().size() != uses) return false;
  if (!root->op()) return true;
  for (const auto& k : kinds)
    if (child_types(root->op(), k)) return true;
  return false;
}

bool pattern_1(Builder& b, Block& blk, Operation* rm) {
  Var* root = rm->input1("x");
  if (!root_ok(root, 3, {{"reduce_mean", "sub", "mul"}}) || !reduce_ok(rm)) return false;
  std::vector<Operation*> rem = {rm};
  if (!child_types(rm, {"sub", "mul"}, false)) return false;
  auto c = children(rm);
  Operation* sub1 = c[0]->op_type() == "sub" ? c[0] : c[1];
  Var* mean = rm->output(0);
  if (sub1->input1("x") != root || sub1->input1("y") != mean) return false;
  rem.push_back(sub1);
  Operation* sq = child_of(sub1, "square");
  if (!sq) return false;
  rem.push_back(sq);
  Operation* rm2 = child_of(sq, "reduce_mean");
  if (!reduce_ok(rm2)) return false;
  rem.push_back(rm2);
  Operation* add1 = child_of(rm2, "add");
  if (!add1) return false;
  Var* eps = other_input(add1, rm2->output(0));
  if (!known_scalar(eps)) return false;
  rem.push_back(add1);
  Operation* rs = child_of(add1, "rsqrt");
  if (!rs) return false;
  rem.push_back(rs);
  Operation* mg = child_of(rs, "mul");
  if (!mg) return false;
  Var* gamma = other_input(mg, rs->output(0));
  if (!gamma->has_value()) return false;
  rem.push_back(mg);
  if (!child_types(mg, {"mul", "mul"})) return false;
  auto mc = children(mg);
  Var* o2 = other_input(mc[0], mg->output(0));
  Var* o3 = other_input(mc[1], mg->output(0));
  if (!((o2 == root && o3 == mean) || (o2 == mean && o3 == root))) return false;
  Operation* mul_root = o2 == root ? mc[0] : mc[1];
  Operation* mul_mean = o2 == root ? mc[1] : mc[0];
  rem.push_back(mul_mean);
  rem.push_back(mul_root);
  Operation* sub2 = child_of(mul_mean, "sub");
  if (!sub2 || sub2->input1("y") != mul_mean->output(0)) return false;
  Var* beta = sub2->input1("x");
  if (!beta->has_value()) return false;
  rem.push_back(sub2);
  Operation* add2 = child_of(sub2, "add");
  if (!add2) return false;
  if (add2->input1("x") != mul_root->output(0) && add2->input1("y") != mul_root->output(0))
    return false;
  rem.push_back(add2);
  return apply(b, blk, rm, of_var(gamma), of_var(beta), eps, add2, rem);
}

bool pattern_2(Builder& b, Block& blk, Operation* rm) {
  Var* root = rm->input1("x");
  if (!root_ok(root, 3, {{"reduce_mean", "sub", "sub"}}) || !reduce_ok(rm)) return false;
  std::vector<Operation*> rem = {rm};
  if (!child_types(rm, {"sub", "sub"})) return false;
  auto c = children(rm);
  auto first = children(c[0]);
  if (first.empty()) return false;  // coremltools fails
  Operation* sub0 = first[0]->op_type() == "square" ? c[0] : c[1];
  Operation* sub1 = sub0 == c[0] ? c[1] : c[0];
  Var* mean = rm->output(0);
  for (Operation* s : {sub0, sub1})
    if (s->input1("x") != root || s->input1("y") != mean) return false;
  rem.push_back(sub0);
  rem.push_back(sub1);
  Operation* sq = child_of(sub0, "square");
  if (!sq) return false;
  rem.push_back(sq);
  Operation* rm2 = child_of(sq, "reduce_mean");
  if (!reduce_ok(rm2)) return false;
  rem.push_back(rm2);
  Operation* add1 = child_of(rm2, "add");
  if (!add1) return false;
  Var* eps = other_input(add1, rm2->output(0));
  if (!known_scalar(eps)) return false;
  rem.push_back(add1);
  Operation* pw = child_of(add1, "pow");
  if (!pw) return false;
  Var* py = pw->input1("y");
  if (!py->has_value() || py->value()->numel() != 1) return false;
  if (std::fabs(py->value()->as_double(0) - 0.5) > 1e-8 + 1e-5 * 0.5) return false;
  rem.push_back(pw);
  Operation* dv = child_of(pw, "real_div");
  if (!dv || dv->input1("x") != sub1->output(0) || dv->input1("y") != pw->output(0)) return false;
  rem.push_back(dv);
  Operation* mg = child_of(dv, "mul");
  if (!mg) return false;
  Var* gamma = other_input(mg, dv->output(0));
  if (!gamma->has_value()) return false;
  rem.push_back(mg);
  Operation* ab = child_of(mg, "add");
  if (!ab) return false;
  Var* beta = other_input(ab, mg->output(0));
  if (!beta->has_value()) return false;
  rem.push_back(ab);
  return apply(b, blk, rm, of_var(gamma), of_var(beta), eps, ab, rem);
}

bool pattern_3(Builder& b, Block& blk, Operation* rm) {
  Var* root = rm->input1("x");
  if (!root_ok(root, 3, {{"sub", "mul", "reduce_mean"}}) || !reduce_ok(rm)) return false;
  std::vector<Operation*> rem = {rm};
  if (!child_types(rm, {"sub", "mul"}, false)) return false;
  auto c = children(rm);
  Operation* sub1 = c[0]->op_type() == "sub" ? c[0] : c[1];
  Var* mean = rm->output(0);
  if (sub1->input1("x") != root || sub1->input1("y") != mean) return false;
  rem.push_back(sub1);
  Operation* sq = child_of(sub1, "square");
  if (!sq) return false;
  rem.push_back(sq);
  Operation* rm2 = child_of(sq, "reduce_mean");
  if (!reduce_ok(rm2)) return false;
  rem.push_back(rm2);
  Operation* add1 = child_of(rm2, "add");
  if (!add1) return false;
  Var* eps = other_input(add1, rm2->output(0));
  if (!known_scalar(eps)) return false;
  rem.push_back(add1);
  Operation* rs = child_of(add1, "rsqrt");
  if (!rs) return false;
  rem.push_back(rs);
  Var* r = rs->output(0);
  Operation* m1 = child_of(rs, "mul");
  if (!m1) return false;
  if (!((m1->input1("x") == root && m1->input1("y") == r) ||
        (m1->input1("x") == r && m1->input1("y") == root)))
    return false;
  rem.push_back(m1);
  Operation* m2 = child_of(rs, "mul", 1);
  if (!m2) return false;
  if (!((m2->input1("x") == mean && m2->input1("y") == r) ||
        (m2->input1("x") == r && m2->input1("y") == mean)))
    return false;
  rem.push_back(m2);
  Operation* neg = child_of(m2, "mul");
  if (!neg) return false;
  Var* ny = neg->input1("y");
  if (!ny->has_value() || ny->value()->numel() != 1 || ny->value()->as_double(0) != -1.0)
    return false;
  rem.push_back(neg);
  Operation* add = child_of(neg, "add");
  if (!add) return false;
  Var* a = m1->output(0);
  Var* n = neg->output(0);
  if (!((add->input1("x") == a && add->input1("y") == n) ||
        (add->input1("x") == n && add->input1("y") == a)))
    return false;
  rem.push_back(add);
  const auto& shape = root->type()->shape();
  if (shape.size() < 2 || !shape[1]->is_const()) return false;  // coremltools fails
  int64_t ch = shape[1]->value();
  Param g = made_const(
      b, blk, Value::from_doubles(DataType::Float32, {1, ch, 1, 1}, std::vector<double>(ch, 1.0)),
      "_fuse_layernorm_or_instancenorm_gamma");
  Param be = made_const(
      b, blk, Value::from_doubles(DataType::Float32, {1, ch, 1, 1}, std::vector<double>(ch, 0.0)),
      "_fuse_layernorm_or_instancenorm_beta");
  return apply(b, blk, rm, g, be, eps, add, rem);
}

bool pattern_4(Builder& b, Block& blk, Operation* rs0) {
  Var* root = rs0->input1("x");
  if (!root_ok(root, 4, {{"mul", "mul", "reduce_sum", "mul"}, {"mul", "mul", "mul", "reduce_sum"}}))
    return false;
  if (!reduce_ok(rs0, "reduce_sum")) return false;
  std::vector<Operation*> rem = {rs0};
  Operation* mm = child_of(rs0, "mul");
  if (!mm || !mm->input1("y")->type()->is_scalar()) return false;
  rem.push_back(mm);
  if (!child_types(mm, {"mul", "mul", "mul"})) return false;
  Operation* msq = child_of(mm, "mul");
  rem.push_back(msq);
  Operation* msq2 = root->uses()[0].op;
  rem.push_back(msq2);
  Operation* rs2 = child_of(msq2, "reduce_sum");
  if (!reduce_ok(rs2, "reduce_sum")) return false;
  rem.push_back(rs2);
  Operation* mm2 = child_of(rs2, "mul");
  if (!mm2 || !mm2->input1("y")->type()->is_scalar()) return false;
  rem.push_back(mm2);
  Operation* sv = child_of(mm2, "sub");
  if (!sv || sv->input1("y") != msq->output(0)) return false;
  rem.push_back(sv);
  Operation* add1 = child_of(sv, "add");
  if (!add1) return false;
  Var* eps = other_input(add1, sv->output(0));
  if (!known_scalar(eps)) return false;
  rem.push_back(add1);
  Operation* rq = child_of(add1, "rsqrt");
  if (!rq) return false;
  rem.push_back(rq);
  Operation* mg = child_of(rq, "mul");
  if (!mg) return false;
  Var* gamma = other_input(mg, rq->output(0));
  if (!gamma->has_value()) return false;
  rem.push_back(mg);
  if (!child_types(mg, {"mul", "mul"})) return false;
  auto mc = children(mg);
  Var* o1 = other_input(mc[0], mg->output(0));
  Var* o2 = other_input(mc[1], mg->output(0));
  Var* mean = msq->input1("x");
  if (!((o1 == root && o2 == mean) || (o1 == mean && o2 == root))) return false;
  Operation* m1 = o1 == root ? mc[0] : mc[1];
  Operation* m2 = o1 == root ? mc[1] : mc[0];
  rem.push_back(m1);
  rem.push_back(m2);
  Operation* sb = child_of(m2, "sub");
  if (!sb || sb->input1("y") != m2->output(0)) return false;
  Var* beta = sb->input1("x");
  if (!beta->has_value()) return false;
  rem.push_back(sb);
  Operation* add = child_of(sb, "add");
  if (!add) return false;
  Var* a = m1->output(0);
  Var* s = sb->output(0);
  if (!((add->input1("x") == a && add->input1("y") == s) ||
        (add->input1("y") == a && add->input1("x") == s)))
    return false;
  rem.push_back(add);
  return apply(b, blk, rs0, of_var(gamma), of_var(beta), eps, add, rem);
}

bool axes_is_1(const Operation* op) {
  const Value& v = *op->input1("axes")->value();
  return v.numel() == 1 && v.as_int(0) == 1;
}

bool pattern_5(Builder& b, Block& blk, Operation* rm) {
  Var* root = rm->input1("x");
  if (root->uses().size() < 2 || !reduce_ok(rm) || !axes_is_1(rm)) return false;
  std::vector<Operation*> rem = {rm};
  if (!child_types(rm, {"sub"})) return false;
  Operation* sub1 = children(rm)[0];
  if (!child_types(sub1, {"mul", "mul", "mul"})) return false;
  if (sub1->input1("x") != root || sub1->input1("y") != rm->output(0)) return false;
  rem.push_back(sub1);
  Operation* sq = child_of(sub1, "mul");
  if (!sq || !child_types(sq, {"reduce_mean"}) || sq->input1("x") != sq->input1("y")) return false;
  rem.push_back(sq);
  Operation* rm2 = child_of(sq, "reduce_mean");
  if (!reduce_ok(rm2) || !child_types(rm2, {"add"}) || !axes_is_1(rm2)) return false;
  rem.push_back(rm2);
  Operation* add1 = child_of(rm2, "add");
  if (!add1 || !child_types(add1, {"rsqrt"})) return false;
  Var* eps = other_input(add1, rm2->output(0));
  if (!known_scalar(eps)) return false;
  rem.push_back(add1);
  Operation* rs = child_of(add1, "rsqrt");
  if (!rs || !child_types(rs, {"mul"})) return false;
  rem.push_back(rs);
  Operation* mul = child_of(rs, "mul");
  if (!mul) return false;
  if (mul->input1("y") != sub1->output(0) && mul->input1("x") != sub1->output(0)) return false;
  rem.push_back(mul);
  Operation* end = mul;
  Param gamma, beta;
  Operation* ab = child_of(mul, "add");
  Operation* mg = ab ? child_of(ab, "mul") : nullptr;
  if (ab && !mg) return false;
  if (ab) {
    if (!child_types(mul, {"add"}) || !child_types(ab, {"mul"})) return false;
    Var* bv = other_input(ab, mul->output(0));
    Var* gv = other_input(mg, ab->output(0));
    if (!bv->has_value() || !gv->has_value()) return false;
    Value g = squeezed(*gv->value());
    Value bs = squeezed(*bv->value());
    if (g.dtype() != bs.dtype() || (g.numel() != 1 && bs.numel() != 1 && g.shape() != bs.shape()))
      return false;  // mixed dtypes or real broadcasting: not mirrored
    std::vector<double> gd = g.to_doubles(), bd = bs.to_doubles(), prod;
    size_t nn = std::max(gd.size(), bd.size());
    for (size_t i = 0; i < nn; ++i) {
      double p = gd[gd.size() == 1 ? 0 : i] * bd[bd.size() == 1 ? 0 : i];
      prod.push_back(g.dtype() == DataType::Float32 ? static_cast<double>(static_cast<float>(p))
                                                    : p);
    }
    std::vector<int64_t> pshape = g.numel() == 1 && bs.numel() != 1 ? bs.shape() : g.shape();
    if (g.numel() == 1 && bs.numel() == 1) pshape = bs.rank() > g.rank() ? bs.shape() : g.shape();
    gamma = made_const(b, blk, g, "_fuse_layernorm_gamma");
    beta = made_const(b, blk, Value::from_doubles(g.dtype(), pshape, prod), "_fuse_layernorm_beta");
    rem.push_back(ab);
    rem.push_back(mg);
    end = mg;
  }
  return apply(b, blk, rm, gamma, beta, eps, end, rem);
}

// One rewrite attempt at `op` (driven by pass_util::rewrite_ops).
bool step(Builder& b, Block& blk, Operation* op) {
  if (op->op_type() == "reduce_mean")
    return pattern_1(b, blk, op) || pattern_2(b, blk, op) || pattern_3(b, blk, op) ||
           pattern_5(b, blk, op);
  if (op->op_type() == "reduce_sum") return pattern_4(b, blk, op);
  return false;
}

}  // namespace

/// Registers common::fuse_layernorm_or_instancenorm.
void register_fuse_layernorm_or_instancenorm(PassRegistry& r) {
  r.add("common::fuse_layernorm_or_instancenorm",
        pass_util::rewrite_pass("common::fuse_layernorm_or_instancenorm",
                                {"reduce_mean", "reduce_sum"}, step));
}

}  // namespace milkit
