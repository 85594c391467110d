// common::reduce_transposes: moves transposes through the ops that let them pass and removes a
// transpose together with the transposes downstream that undo it, when that lowers the number of
// transposes, as coremltools 9's pass does.
//
// What coremltools does, and so milkit:
// - Only function bodies are rewritten, and only flat ones: a body with a control-flow op is left
//   alone (nested blocks are never visited).
// - Every function output gets an identity "sink" op for the time of the pass (their
//   "identity_<n>" names are used up, the sinks are removed at the end).
// - Ops are visited in order; each var gets a hypothetical value: plain, or "lazy": a transpose
//   (or several with the same perm) that has not been applied yet. A transpose of a plain var is
//   lazy (unless its output is a function output); a transpose of a lazy var with the inverse perm
//   cancels it (its output is plain); unary-like ops (relu, exp, clip, ...) pass the lazy value on;
//   axis-update ops let it pass by changing a parameter: concat / split (axis; const inputs of
//   concat are transposed), pad (const pad amounts, non-constant modes only on the last two dims),
//   the reduce ops with keep_dims=True and const axes, and add / mul / sub / real_div / maximum /
//   minimum whose other input is lazy too, known (a const of rank <= the input's, transposed),
//   or of a static shape that a reshape can permute (a reshape is inserted). Any other op (and a
//   sink) "materializes" the lazy values it reads.
// - Starting transposes, the transposes that cancel them and the materializing ops form a
//   bipartite graph; in each connected component, the transposes are removed when the
//   materializing ops are fewer than the transposes removed. Then the axis-update ops are updated
//   (new consts "const_<n>" just before them), the transposes short-circuited (a cancelling
//   transpose that is a function output gives its name to its input, or to an identity of it),
//   and a transpose "transpose_<n>" is inserted before each materializing op (before a sink, it
//   takes the output's name and its input becomes "_before_transpose_op_<name>"). Types and values
//   are inferred again. Perm consts of removed transposes are left for dead code elimination.
//
// Where milkit deliberately differs (coremltools' rewrite computes something else or crashes):
// - pow is unary-like only when its y is a plain size-1 tensor of rank <= x's (coremltools
//   ignores y, so a broadcast y ends up on the wrong axis), softplus_parametric only when the
//   transpose keeps the channel axis (-3) in place;
// - a materialized transpose replaces only the inputs of the op that read the lazy value
//   (coremltools replaces every use of that var in the op, also inputs that read the
//   un-transposed var, e.g. matmul(x=a, y=transpose(a)));
// - a cancelling transpose whose output is a function output gets an identity instead of
//   renaming its input when that input is itself a function output that keeps no materialized
//   transpose, or already took another output's name while an earlier transpose was removed
//   (coremltools renames it, forgetting renames made for other transposes, and an output loses
//   its name);
// - a reduce op without axes stops the transpose (coremltools raises KeyError);
// - transposes that meet at an axis-update op whose result is unused are decided together when
//   coremltools would remove one and keep the other (leaving that op with mismatched inputs:
//   it raises or computes something else): removed when, all counted together, fewer
//   transposes get materialized than are removed;
// - an add / mul / ... remembers which input was the "other" one when it was visited
//   (coremltools looks again when updating, after earlier rewrites may have changed it).
#include <algorithm>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "milkit/builder/builder.h"
#include "milkit/ops/common.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

using Perm = std::vector<int64_t>;

/// Splits a space-separated list of names.
std::unordered_set<std::string> name_set(const std::string& names) {
  std::unordered_set<std::string> s;
  size_t i = 0;
  while (i < names.size()) {
    size_t j = names.find(' ', i);
    if (j == std::string::npos) j = names.size();
    if (j > i) s.insert(names.substr(i, j - i));
    i = j + 1;
  }
  return s;
}

/// coremltools' _UNARY_LIKE_OP_TYPES: one non-const input "x", one output, rank kept.
const std::unordered_set<std::string>& unary_like_ops() {
  static const std::unordered_set<std::string> s = name_set(
      "relu log relu6 abs acos asin atan atanh ceil clip cos cosh erf exp exp2 floor identity "
      "logical_not round rsqrt sign sin sinh sqrt square pow tan tanh threshold clamped_relu elu "
      "gelu leaky_relu linear_activation scaled_tanh sigmoid sigmoid_hard softplus "
      "softplus_parametric softsign thresholded_relu");
  return s;
}

enum class AxisKind { None, Concat, Split, Pad, Reduce, Binary };

AxisKind axis_kind(const std::string& t) {
  if (t == "concat") return AxisKind::Concat;
  if (t == "split") return AxisKind::Split;
  if (t == "pad") return AxisKind::Pad;
  if (t == "add" || t == "mul" || t == "sub" || t == "real_div" || t == "maximum" || t == "minimum")
    return AxisKind::Binary;
  if (t.compare(0, 7, "reduce_") == 0) {
    static const std::unordered_set<std::string> r = name_set(
        "reduce_l1_norm reduce_l2_norm reduce_max reduce_log_sum reduce_log_sum_exp reduce_mean "
        "reduce_min reduce_prod reduce_sum reduce_sum_square");
    if (r.count(t)) return AxisKind::Reduce;
  }
  return AxisKind::None;
}

/// Python indexing of a perm entry (negative counts from the end).
int64_t norm(int64_t p, int64_t rank) { return p < 0 ? p + rank : p; }

/// The permutation that undoes `perm` (coremltools' _find_transpose_compliment).
Perm inverse(const Perm& perm) {
  const int64_t r = static_cast<int64_t>(perm.size());
  Perm inv(perm.size(), 0);
  for (int64_t i = 0; i < r; ++i) inv[static_cast<size_t>(norm(perm[i], r))] = i;
  return inv;
}

bool valid_perm(const Perm& p) {
  const int64_t r = static_cast<int64_t>(p.size());
  std::vector<bool> seen(p.size(), false);
  for (int64_t e : p) {
    int64_t q = norm(e, r);
    if (q < 0 || q >= r || seen[static_cast<size_t>(q)]) return false;
    seen[static_cast<size_t>(q)] = true;
  }
  return true;
}

/// Whether transposing by p1 then by p2 is the identity.
bool cancels(const Perm& p1, const Perm& p2) {
  if (p1.size() != p2.size()) return false;
  const int64_t r = static_cast<int64_t>(p1.size());
  for (int64_t i = 0; i < r; ++i)
    if (norm(p1[static_cast<size_t>(norm(p2[i], r))], r) != i) return false;
  return true;
}

/// np.transpose(v, perm) for a value of rank perm.size().
Value transpose_value(const Value& v, const Perm& perm) {
  const int64_t r = static_cast<int64_t>(perm.size());
  std::vector<int64_t> shape;
  for (int64_t p : perm) shape.push_back(v.shape()[static_cast<size_t>(norm(p, r))]);
  std::vector<int64_t> st = ops::strides_of(v.shape());
  auto idx = ops::index_map(shape, [&](const std::vector<int64_t>& c) {
    int64_t f = 0;
    for (size_t i = 0; i < c.size(); ++i) f += c[i] * st[static_cast<size_t>(norm(perm[i], r))];
    return f;
  });
  return ops::take_elements(v, idx, shape);
}

const std::string kTranspose = "transpose";

bool is_const_op(const Var* v) { return v->op() && v->op()->op_type() == "const"; }

/// Ordering key of an op: (position, 0) for ops there before the pass; ops inserted before an
/// op at position p get (p, k) with k < 0 growing with each insertion.
using Key = std::pair<int64_t, int64_t>;

/// A transpose not applied yet: its perm and the starting transposes it stands for (sorted by
/// position).
struct Lazy {
  Perm perm;
  std::vector<Operation*> starts;
};
using LazyP = std::shared_ptr<const Lazy>;

/// An op input that must see the transposed value: the op, the var it read and its slots.
struct Edge {
  Operation* op;
  Var* var;
  std::vector<uint32_t> slots;
  bool handled = false;
};

struct StartInfo {
  std::vector<Operation*> cancels;
  std::vector<size_t> edges;
  std::vector<Operation*> axis_ops;
  bool key = false;  ///< In the list of transposes to process (coremltools' dict keys).
  bool removed = false;
};

struct AxisInfo {
  Perm perm;
  int other_slot = -1;  ///< Binary ops: the slot of the input that is not lazy (-1: both are).
  int other_rank = 0;   ///< Its rank when visited.
  std::vector<int64_t> other_shape;          ///< Its shape broadcast to the rank of the op.
  std::shared_ptr<const Value> other_value;  ///< Its value when known.
  bool updated = false;
};

constexpr int64_t kMaxFoldElements = int64_t{1} << 24;

bool fold_allowed(const std::vector<const Type*>& outs) {
  for (const Type* t : outs) {
    if (!t->is_tensor() || !t->has_rank()) continue;
    int64_t n = 1;
    for (Dim d : t->shape()) {
      if (!d->is_const()) break;
      if (d->value() < 0 || __builtin_mul_overflow(n, d->value(), &n) || n > kMaxFoldElements)
        return false;
    }
  }
  return true;
}

bool value_changed(const std::shared_ptr<const Value>& a, const std::shared_ptr<const Value>& b) {
  if (!a || !b) return static_cast<bool>(a) != static_cast<bool>(b);
  return a != b && !a->equals(*b);
}

/// Infers the op's output types and values again (coremltools' type_value_inference with
/// overwrite_output); returns whether something changed.
bool reinfer(Operation* op) {
  Function* fn = op->function();
  InferCtx ic(fn->ctx(), op->schema(), op->name(), fn->opset(), op->args(), op->starts(),
              &op->location());
  std::vector<const Type*> types = op->schema().infer(ic);
  std::vector<std::shared_ptr<const Value>> vals;
  if (op->schema().value && fold_allowed(types) && !op->schema().value(ic, vals)) vals.clear();
  bool changed = false;
  for (size_t k = 0; k < op->outputs().size() && k < types.size(); ++k) {
    Var* out = op->output(k);
    std::shared_ptr<const Value> v = k < vals.size() ? vals[k] : nullptr;
    if (out->type() != types[k]) changed = true;
    if (value_changed(out->value(), v)) changed = true;
    out->set_type(types[k]);
    out->set_value(std::move(v));
  }
  return changed;
}

class Optimizer {
 public:
  Optimizer(Function& f, Block& blk) : f_(f), blk_(blk), b_(f) {}

  // Returns whether it removed any transpose.
  bool run() {
    // sinks for the outputs (coremltools adds identity ops; their names are used up)
    std::vector<Var*> outs = blk_.outputs();
    std::vector<Var*> uniq;
    for (Var* v : outs)
      if (std::find(uniq.begin(), uniq.end(), v) == uniq.end()) uniq.push_back(v);
    if (!f_.has_block_ops() && !f_.count_ops(std::string_view("transpose"))) {
      // flat and nothing to move (the walk below would find the same): only the sinks' names
      for (size_t i = 0; i < uniq.size(); ++i) f_.ctx().free_name("identity");
      return false;
    }
    std::vector<Operation*> transposes;
    int64_t n = 0;
    for (Operation* op = blk_.front(); op; op = op->next()) {
      if (!op->blocks().empty()) return false;  // only flat blocks
      if (op->op_type() == kTranspose) transposes.push_back(op);
      ++n;
    }
    if (transposes.empty()) {  // nothing can change: only the sinks' names are used up
      for (size_t i = 0; i < uniq.size(); ++i) f_.ctx().free_name("identity");
      return false;
    }
    for (Var* v : outs) old_outputs_.emplace(v, v->name());
    b_.set_insertion_point(&blk_, nullptr);
    for (Var* v : uniq) {
      Var* s = b_.op("identity", {{"x", v}});
      sink_of_.emplace(v, s->op());
      sinks_.push_back(s->op());
      sink_set_.insert(s->op());
    }
    order_.reserve(static_cast<size_t>(n) + sinks_.size());
    pos_.reserve(static_cast<size_t>(n) + sinks_.size());
    for (Operation* op = blk_.front(); op; op = op->next()) {
      pos_.emplace(op, static_cast<int64_t>(order_.size()));
      order_.push_back(op);
    }
    pending_.assign(order_.size(), 0);
    for (Operation* t : transposes) pending_[static_cast<size_t>(pos_[t])] = 1;
    for (size_t i = static_cast<size_t>(pos_[transposes.front()]); i < order_.size(); ++i)
      if (pending_[i]) visit(order_[i]);
    decide();
    apply();
    return !to_remove_.empty();
  }

 private:
  // ---- traversal --------------------------------------------------------------------------

  LazyP lazy(Var* v) const {
    auto it = hyp_.find(v);
    return it == hyp_.end() ? nullptr : it->second;
  }

  void set_lazy(Var* v, LazyP l) {
    if (!l) return;
    hyp_[v] = std::move(l);
    for (const Use& u : v->uses()) {
      auto it = pos_.find(u.op);
      if (it != pos_.end()) pending_[static_cast<size_t>(it->second)] = 1;
    }
  }

  StartInfo& info(Operation* start) { return starts_[start]; }

  void visit(Operation* op) {
    const std::string& t = op->op_type();
    if (sink_set_.count(op)) {
      materialize(op);
    } else if (t == kTranspose) {
      visit_transpose(op);
    } else if (t == "const") {
      // plain
    } else if (unary_like_ops().count(t)) {
      visit_unary(op);
    } else if (axis_kind(t) != AxisKind::None) {
      visit_axis_update(op);
    } else {
      materialize(op);
    }
  }

  void materialize(Operation* op) {
    const std::vector<Var*>& args = op->args();
    std::vector<size_t> mine;
    for (uint32_t s = 0; s < args.size(); ++s) {
      LazyP l = lazy(args[s]);
      if (!l) continue;
      size_t e = 0;
      for (; e < mine.size(); ++e)
        if (edges_[mine[e]].var == args[s]) break;
      if (e < mine.size()) {
        edges_[mine[e]].slots.push_back(s);
        continue;
      }
      edges_.push_back(Edge{op, args[s], {s}});
      mine.push_back(edges_.size() - 1);
      for (Operation* st : l->starts) {
        StartInfo& si = info(st);
        if (in_mat_keys_.insert(st).second) mat_keys_.push_back(st);
        si.edges.push_back(edges_.size() - 1);
      }
    }
  }

  void visit_unary(Operation* op) {
    Var* x = op->input1("x");
    if (!x || op->outputs().size() != 1) return materialize(op);
    LazyP l = lazy(x);
    if (!l) return materialize(op);  // plain in, plain out (materializes any lazy y)
    const std::string& t = op->op_type();
    const Type* xt = x->type();
    if (t == "pow") {
      Var* y = op->input1("y");
      const Type* yt = y ? y->type() : nullptr;
      bool ok = y && !lazy(y) && yt->is_tensor() && yt->has_rank() && xt->has_rank() &&
                yt->rank() <= xt->rank();
      if (ok)
        for (Dim d : yt->shape()) ok = ok && d->is_const() && d->value() == 1;
      if (!ok) return materialize(op);
    } else if (t == "softplus_parametric") {
      const int64_t r = static_cast<int64_t>(l->perm.size());
      if (r < 3 || norm(l->perm[static_cast<size_t>(r - 3)], r) != r - 3) return materialize(op);
    }
    set_lazy(op->output(0), l);
  }

  void visit_transpose(Operation* op) {
    Var* x = op->input1("x");
    Var* pv = op->input1("perm");
    if (!pv || !pv->has_value()) return materialize(op);
    Perm perm = pv->value()->to_ints();
    if (!valid_perm(perm)) return materialize(op);
    LazyP l = lazy(x);
    if (!l) {
      if (old_outputs_.count(op->output(0))) return;  // a function output: stays
      set_lazy(op->output(0), std::make_shared<const Lazy>(Lazy{perm, {op}}));
      return;
    }
    if (!cancels(l->perm, perm)) return materialize(op);
    for (Operation* st : l->starts) {
      StartInfo& si = info(st);
      if (!si.key) {
        si.key = true;
        keys_.push_back(st);
      }
      si.cancels.push_back(op);
    }
  }

  void visit_axis_update(Operation* op) {
    const Perm* perm = nullptr;
    int num_lazy = 0;
    std::vector<Operation*> all;
    for (Var* v : op->args()) {
      if (is_const_op(v)) continue;
      LazyP l = lazy(v);
      if (!l) continue;
      ++num_lazy;
      if (!perm) {
        perm = &l->perm;
      } else if (*perm != l->perm) {
        return materialize(op);
      }
      all.insert(all.end(), l->starts.begin(), l->starts.end());
    }
    if (num_lazy == 0) return materialize(op);
    AxisInfo ai;
    ai.perm = *perm;
    if (!can_pass(op, ai)) return materialize(op);
    std::sort(all.begin(), all.end(),
              [&](Operation* a, Operation* b) { return pos_[a] < pos_[b]; });
    all.erase(std::unique(all.begin(), all.end()), all.end());
    for (Operation* st : all) info(st).axis_ops.push_back(op);
    auto nl = std::make_shared<const Lazy>(Lazy{ai.perm, all});
    axis_.emplace(op, std::move(ai));
    for (Var* out : op->outputs()) set_lazy(out, nl);
  }

  // ---- the axis-update ops ------------------------------------------------------------------

  bool can_pass(Operation* op, AxisInfo& ai) {
    const Perm& perm = ai.perm;
    const int64_t rank = static_cast<int64_t>(perm.size());
    switch (axis_kind(op->op_type())) {
      case AxisKind::Concat:
      case AxisKind::Split: {
        for (Var* v : op->args())
          if (!is_const_op(v) && !lazy(v)) return false;
        Var* axis = op->input1("axis");
        if (!axis || !axis->has_value()) return false;
        int64_t a = axis->value()->as_int(0);
        return a >= -rank && a < rank;
      }
      case AxisKind::Pad: {
        int nonconst = 0;
        for (Var* v : op->args()) nonconst += is_const_op(v) ? 0 : 1;
        Var* pad = op->input1("pad");
        if (nonconst != 1 || !pad || !is_const_op(pad)) return false;
        if (rank < 2) return false;
        std::vector<int64_t> np;
        if (!new_pads(op, perm, np)) return false;
        Var* mode = op->input1("mode");
        std::string m = mode && mode->has_value() && !mode->value()->string_values().empty()
                            ? mode->value()->string_values()[0]
                            : "constant";
        if (m != "constant")
          for (size_t i = 0; i + 4 < np.size(); ++i)
            if (np[i] != 0) return false;
        return true;
      }
      case AxisKind::Reduce: {
        Var* kd = op->input1("keep_dims");
        if (!kd || !kd->has_value() || kd->value()->as_int(0) == 0) return false;
        Var* axes = op->input1("axes");
        if (!axes || !is_const_op(axes)) return false;  // coremltools: KeyError without axes
        for (int64_t a : axes->value()->to_ints())
          if (a < -rank || a >= rank) return false;
        return true;
      }
      case AxisKind::Binary: {
        Var* x = op->input1("x");
        Var* y = op->input1("y");
        bool lx = static_cast<bool>(lazy(x)), ly = static_cast<bool>(lazy(y));
        if (lx && ly) return true;  // both transposed the same way
        Var* tin = lx ? x : y;
        Var* other = lx ? y : x;
        ai.other_slot =
            static_cast<int>(op->starts()[static_cast<size_t>(op->input_index(lx ? "y" : "x"))]);
        const Type* tt = tin->type();
        const Type* ot = other->type();
        if (!tt->has_rank() || !ot->is_tensor() || !ot->has_rank()) return false;
        if (rank != tt->rank()) return false;
        for (Dim d : ot->shape())
          if (!d->is_const()) return false;
        if (ot->rank() > rank) return false;
        std::vector<int64_t> os(static_cast<size_t>(rank - ot->rank()), 1);
        for (Dim d : ot->shape()) os.push_back(d->value());
        ai.other_rank = ot->rank();
        ai.other_shape = os;
        if (other->has_value()) {  // a known value: transposed
          ai.other_value = other->value();
          return true;
        }
        int64_t ones = std::count(os.begin(), os.end(), int64_t{1});
        if (ones == rank || ones == rank - 1) return true;  // a reshape does it
        Perm inv = inverse(perm);
        for (int64_t i = 0; i < rank; ++i)
          if (inv[static_cast<size_t>(i)] != i &&
              os[static_cast<size_t>(inv[static_cast<size_t>(i)])] != 1)
            return false;
        return true;
      }
      case AxisKind::None:
        break;
    }
    return false;
  }

  /// coremltools' _TransformPad._compute_new_pad_values.
  static bool new_pads(Operation* op, const Perm& perm, std::vector<int64_t>& out) {
    Var* pad = op->input1("pad");
    std::vector<int64_t> p = pad->value()->to_ints();
    if (p.size() % 2) return false;
    const int64_t rank = static_cast<int64_t>(perm.size());
    const int64_t rows = static_cast<int64_t>(p.size() / 2);
    const int64_t diff = rank - rows;
    if (diff < 0) return false;
    std::vector<int64_t> old(static_cast<size_t>(2 * rank), 0);
    std::copy(p.begin(), p.end(), old.begin() + 2 * diff);
    std::vector<int64_t> nw = old;
    for (int64_t i = 0; i < rank; ++i) {
      size_t a = static_cast<size_t>(norm(perm[static_cast<size_t>(i)], rank));
      nw[2 * a] = old[static_cast<size_t>(2 * i)];
      nw[2 * a + 1] = old[static_cast<size_t>(2 * i + 1)];
    }
    for (int64_t i = 0; i < 2 * diff; ++i)
      if (nw[static_cast<size_t>(i)] != 0) return false;
    out.assign(nw.begin() + 2 * diff, nw.end());
    return true;
  }

  /// A const `v` inserted just before `op`; replaces `old` in the op's inputs.
  Var* new_const_for(Operation* op, Var* old, Value v) {
    Var* c = insert_const(op, std::move(v));
    replace_in_op(op, old, c);
    return c;
  }

  Var* insert_const(Operation* before, Value v) {
    b_.set_insertion_point(&blk_, before);
    b_.set_location(before->location());
    Var* c = b_.add_const(std::make_shared<const Value>(std::move(v)));
    key_new(c->op(), before);
    return c;
  }

  void replace_in_op(Operation* op, Var* old, Var* nv) {
    const std::vector<Var*>& args = op->args();
    for (size_t s = 0; s < args.size(); ++s)
      if (args[s] == old) op->set_arg(s, nv);
    touched_.push_back(op);
  }

  void update(Operation* op, AxisInfo& ai) {
    const Perm& perm = ai.perm;
    const int64_t rank = static_cast<int64_t>(perm.size());
    switch (axis_kind(op->op_type())) {
      case AxisKind::Concat:
      case AxisKind::Split: {
        Var* axis = op->input1("axis");
        int64_t a = axis->value()->as_int(0);
        int64_t na = perm[static_cast<size_t>(norm(a, rank))];
        if (axis_kind(op->op_type()) == AxisKind::Concat) {
          Perm inv = inverse(perm);
          std::vector<Var*> vals(op->input("values").begin(), op->input("values").end());
          for (Var* v : vals)
            if (is_const_op(v)) new_const_for(op, v, transpose_value(*v->value(), inv));
        }
        new_const_for(op, axis, Value::scalar_int(DataType::Int32, na));
        break;
      }
      case AxisKind::Pad: {
        std::vector<int64_t> np;
        new_pads(op, perm, np);
        Var* pad = op->input1("pad");
        new_const_for(
            op, pad,
            Value::from_ints(pad->value()->dtype(), {static_cast<int64_t>(np.size())}, np));
        break;
      }
      case AxisKind::Reduce: {
        Var* axes = op->input1("axes");
        std::vector<int64_t> na;
        for (int64_t a : axes->value()->to_ints())
          na.push_back(perm[static_cast<size_t>(norm(a, rank))]);
        new_const_for(op, axes, Value::int_list(na));
        break;
      }
      case AxisKind::Binary: {
        if (ai.other_slot < 0) break;
        // what the other input was when visited (an earlier rewrite may have rewired it to a var
        // whose type is not inferred again yet)
        Var* other = op->args()[static_cast<size_t>(ai.other_slot)];
        if (ai.other_rank == 0) break;
        const std::vector<int64_t>& os = ai.other_shape;
        Perm inv = inverse(perm);
        std::vector<int64_t> ns;
        for (int64_t i : inv) ns.push_back(os[static_cast<size_t>(i)]);
        if (ai.other_value) {
          Var* c = insert_const(op, transpose_value(ai.other_value->reshaped(os), inv));
          op->set_arg(static_cast<size_t>(ai.other_slot), c);
          touched_.push_back(op);
        } else {
          b_.set_insertion_point(&blk_, op);
          b_.set_location(op->location());
          std::vector<Arg> args = {Builder::arg("x", other),
                                   Builder::arg("shape", Value::int_list(ns))};
          Var* r = b_.create("reshape", args)[0];
          key_new(r->op(), op);
          op->set_arg(static_cast<size_t>(ai.other_slot), r);
          touched_.push_back(op);
        }
        break;
      }
      case AxisKind::None:
        break;
    }
  }

  // ---- decision ----------------------------------------------------------------------------

  Operation* find(std::unordered_map<Operation*, Operation*>& parent, Operation* a) {
    while (parent[a] != a) a = parent[a] = parent[parent[a]];
    return a;
  }

  /// Connected components of the starts through their cancelling transposes and materializing
  /// ops (and the axis-update ops they pass when `with_axis_ops`).
  using Parent = std::unordered_map<Operation*, Operation*>;
  void join_all(Parent& parent, bool with_axis_ops) {
    for (auto& [st, si] : starts_) parent[st] = st;
    std::unordered_map<Operation*, Operation*> first_start;  // a neighbour op -> one of its starts
    auto join = [&](Operation* st, Operation* o) {
      auto [it, fresh] = first_start.emplace(o, st);
      if (!fresh) parent[find(parent, it->second)] = find(parent, st);
    };
    for (auto& [st, si] : starts_) {
      for (Operation* c : si.cancels) join(st, c);
      for (size_t e : si.edges) join(st, edges_[e].op);
      if (with_axis_ops)
        for (Operation* a : si.axis_ops) join(st, a);
    }
  }

  /// Starts, cancelling transposes and materializing ops of a component; its transposes are
  /// removed when fewer get materialized than are removed.
  struct Counts {
    int64_t starts = 0, cancels = 0, mats = 0;
    bool remove() const { return mats < starts + cancels; }
  };
  std::unordered_map<Operation*, Counts> count(Parent& parent, const std::vector<Operation*>& sts) {
    std::unordered_map<Operation*, Counts> n;
    std::unordered_set<Operation*> seen_c, seen_m;
    for (Operation* st : sts) {
      Counts& c = n[find(parent, st)];
      ++c.starts;
      StartInfo& si = info(st);
      for (Operation* o : si.cancels)
        if (seen_c.insert(o).second) ++c.cancels;
      for (size_t e : si.edges)
        if (seen_m.insert(edges_[e].op).second) ++c.mats;
    }
    return n;
  }

  void decide() {
    for (Operation* st : mat_keys_) {
      StartInfo& si = info(st);
      if (!si.key) {
        si.key = true;
        keys_.push_back(st);
      }
    }
    // coremltools: connected components of the starts with cancelling or materializing ops
    // (keys), their cancelling transposes and materializing ops; each removed or kept whole
    Parent p1;
    join_all(p1, false);
    std::unordered_map<Operation*, Counts> n1 = count(p1, keys_);
    // milkit: starts that also meet at axis-update ops (their results unused) must be decided
    // together; when coremltools' decisions disagree there, decide the group by the same count
    Parent p2;
    join_all(p2, true);
    std::unordered_map<Operation*, int> verdict;  // group root -> 1 remove, 0 keep, -1 mixed
    for (Operation* st : keys_) {
      Operation* r = find(p2, st);
      int v = n1[find(p1, st)].remove() ? 1 : 0;
      auto [it, fresh] = verdict.emplace(r, v);
      if (!fresh && it->second != v) it->second = -1;
    }
    std::vector<Operation*> all = keys_, extra;
    for (auto& [st, si] : starts_)
      if (!si.key && verdict.count(find(p2, st))) extra.push_back(st);
    std::sort(extra.begin(), extra.end(),
              [&](Operation* a, Operation* b) { return pos_[a] < pos_[b]; });
    all.insert(all.end(), extra.begin(), extra.end());
    std::unordered_map<Operation*, Counts> n2 = count(p2, all);
    for (Operation* st : all) {
      Operation* r = find(p2, st);
      int v = verdict[r];
      if (v == 1 || (v == -1 && n2[r].remove())) to_remove_.insert(st);
    }
    keys_ = std::move(all);
  }

  // ---- rewrite -----------------------------------------------------------------------------

  void key_new(Operation* op, Operation* before) {
    keys_of_new_.emplace(op, Key{key(before).first, kNewBase + new_seq_++});
  }

  Key key(Operation* op) const {
    auto it = pos_.find(op);
    if (it != pos_.end()) return {it->second, 0};
    auto jt = keys_of_new_.find(op);
    if (jt != keys_of_new_.end()) return jt->second;
    return {std::numeric_limits<int64_t>::max(), 0};
  }

  void rewire(Var* from, Var* to) {
    std::vector<Use> uses = from->uses();
    for (const Use& u : uses) {
      u.op->set_arg(u.slot, to);
      touched_.push_back(u.op);
    }
  }

  Var* add_identity(Var* x, Operation* before, const std::string& name) {
    b_.set_insertion_point(&blk_, before);
    b_.set_location(before->location());
    Var* id = b_.op("identity", {{"x", x}}, name);
    key_new(id->op(), before);
    return id;
  }

  void remove_start(Operation* start) {
    StartInfo& si = info(start);
    const Perm perm = start->input1("perm")->value()->to_ints();
    Var* start_out = start->output(0);
    Var* start_in = start->input1("x");
    for (Operation* op : si.axis_ops) {
      AxisInfo& ai = axis_[op];
      if (ai.updated) continue;
      ai.updated = true;
      update(op, ai);
    }
    std::vector<Operation*> todo = {start};
    todo.insert(todo.end(), si.cancels.begin(), si.cancels.end());
    for (Operation* op : todo) {
      if (!removed_.insert(op).second) continue;
      removed_list_.push_back(op);
      Var* in = op->input1("x");
      Var* out = op->output(0);
      if (old_outputs_.count(out)) {
        bool keeps_name = old_outputs_.count(in) && !lazy(in);  // milkit: see the header
        if (!in->op()) {
          in = add_identity(in, op, out->name());
        } else if (!renamed_.count(in) && !keeps_name) {
          in->set_name(out->name());
          in->op()->set_name(op->name());
          renamed_.insert(in);
        } else {
          in = add_identity(in, op, out->name());
        }
      }
      rewire(out, in);
    }
    for (size_t e : si.edges) {
      Edge& ed = edges_[e];
      if (ed.handled) continue;
      ed.handled = true;
      Var* i1 = ed.var;
      bool sink = sink_set_.count(ed.op) != 0;
      if (ed.var == start_out) {
        if (sink) continue;
        i1 = start_in;
      }
      b_.set_insertion_point(&blk_, ed.op);
      b_.set_location(ed.op->location());
      std::vector<Arg> args = {Builder::arg("x", i1), Builder::arg("perm", Value::int_list(perm))};
      Var* t;
      if (sink) {
        if (!renamed_.count(i1)) {
          t = b_.create("transpose", args, i1->name())[0];
          std::string nn = "_before_transpose_op_" + t->op()->name();
          i1->set_name(nn);
          i1->op()->set_name(nn);
        } else {
          t = b_.create("transpose", args, old_outputs_.at(i1))[0];
        }
      } else {
        t = b_.create("transpose", args)[0];
      }
      key_new(t->op(), ed.op);
      for (uint32_t s : ed.slots) ed.op->set_arg(s, t);
      touched_.push_back(ed.op);
      touched_.push_back(t->op());
    }
  }

  void apply() {
    for (Operation* st : keys_)
      if (to_remove_.count(st)) remove_start(st);
    std::vector<Var*> outs;
    for (Var* v : blk_.outputs()) outs.push_back(sink_of_.at(v)->input1("x"));
    blk_.set_outputs(outs);
    for (Operation* s : sinks_) blk_.erase(s);
    for (Operation* op : removed_list_) blk_.erase(op);
    // infer again, in program order, from the ops whose inputs changed
    std::vector<std::pair<Key, Operation*>> heap;
    std::unordered_set<Operation*> queued;
    auto cmp = [](const std::pair<Key, Operation*>& a, const std::pair<Key, Operation*>& b) {
      return a.first > b.first;
    };
    auto push = [&](Operation* op) {
      if (op->erased() || !queued.insert(op).second) return;
      heap.emplace_back(key(op), op);
      std::push_heap(heap.begin(), heap.end(), cmp);
    };
    for (Operation* op : touched_) push(op);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), cmp);
      Operation* op = heap.back().second;
      heap.pop_back();
      queued.erase(op);
      if (op->op_type() == "const" || !reinfer(op)) continue;
      for (Var* out : op->outputs())
        for (const Use& u : out->uses()) push(u.op);
    }
  }

  Function& f_;
  Block& blk_;
  Builder b_;
  std::vector<Operation*> order_;
  std::unordered_map<Operation*, int64_t> pos_;
  std::vector<char> pending_;
  std::unordered_map<Var*, LazyP> hyp_;
  std::unordered_map<Var*, std::string> old_outputs_;
  std::unordered_map<Var*, Operation*> sink_of_;
  std::vector<Operation*> sinks_;
  std::unordered_set<Operation*> sink_set_;
  std::unordered_map<Operation*, StartInfo> starts_;
  std::unordered_map<Operation*, AxisInfo> axis_;
  std::vector<Edge> edges_;
  std::vector<Operation*> keys_;      // starts with cancels, in the order they were met
  std::vector<Operation*> mat_keys_;  // starts with materializing ops, in the order they were met
  std::unordered_set<Operation*> in_mat_keys_;
  std::unordered_set<Operation*> to_remove_;
  std::unordered_set<Operation*> removed_;
  std::vector<Operation*> removed_list_;
  std::unordered_set<Var*> renamed_;
  std::unordered_map<Operation*, Key> keys_of_new_;
  static constexpr int64_t kNewBase = -(int64_t{1} << 60);
  int64_t new_seq_ = 0;
  std::vector<Operation*> touched_;
};

class ReduceTransposes : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::reduce_transposes", {});
    bool changed = false;
    for (auto& [name, f] : p.functions()) changed = Optimizer(*f, f->body()).run() || changed;
    return changed;
  }
};

}  // namespace

/// Registers common::reduce_transposes.
void register_reduce_transposes(PassRegistry& r) {
  r.add("common::reduce_transposes", [] { return std::make_unique<ReduceTransposes>(); });
}

}  // namespace milkit
