// normalization ops: batch_norm, instance_norm, layer_norm, l2_norm, local_response_norm
// (coremltools iOS15/normalization.py, iOS17/normalization.py).
//
// Every op returns x's type. x is in T = {fp16, fp32}; the parameters share T up to iOS16 and
// a separate domain U = {fp16, fp32} from iOS17 (mixed precision). Optional parameters without a
// fixed default (gamma, beta) are left out; epsilon & co. are materialized. layer_norm and
// l2_norm fold when x is known (the others have no value inference in coremltools).
#include <algorithm>
#include <cmath>

#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"

namespace milkit {

namespace {

bool dims_differ(Context& ctx, Dim a, Dim b) {
  if (a->is_const() && b->is_const()) return a->value() != b->value();
  return ctx.eq(a, b) == Tri::False;
}

// The output of every normalization: x's type.
std::vector<const Type*> same_as_x(InferCtx& ic) { return {ic.type("x")}; }

// batch_norm / instance_norm: per-channel parameters must be rank 1 of length C = x.shape[1].
// coremltools does not check this; a provable mismatch is a program the runtime rejects, so
// milkit reports it when both sizes are known.
void check_channel_params(InferCtx& ic, std::initializer_list<const char*> names) {
  const Type* tx = ic.type("x");
  for (const char* n : names) {
    if (!ic.has(n)) continue;
    const Type* t = ic.type(n);
    if (!t->has_rank()) continue;
    if (t->rank() != 1)
      ic.fail_input(n, "must have rank 1 ([C]), got shape " + ops::shape_str(t->shape()));
    if (tx->has_rank() && tx->rank() >= 2 && dims_differ(ic.ctx, t->shape()[0], tx->shape()[1]))
      ic.fail_input(n, "has length " + t->shape()[0]->str() + " but x (shape " +
                           ops::shape_str(tx->shape()) + ") has C = " + tx->shape()[1]->str());
  }
}

OpSchema base(const std::string& name, Target since) {
  OpSchema s;
  s.name = name;
  s.since = since;
  s.inputs = {in("x", dt::floats(), "T")};
  return s;
}

std::string pdom(Target since) { return since >= Target::iOS17 ? "U" : "T"; }

void add_batch_norm(OpRegistry& r, Target since) {
  OpSchema s = base("batch_norm", since);
  std::string u = pdom(since);
  s.inputs.push_back(in_const("mean", dt::floats(), u));
  s.inputs.push_back(in_const("variance", dt::floats(), u));
  s.inputs.push_back(in_opt_const("gamma", dt::floats(), nullptr, u));
  s.inputs.push_back(in_opt_const("beta", dt::floats(), nullptr, u));
  s.inputs.push_back(in_opt_const("epsilon", dt::floats(), def_float(1e-5), u));
  s.infer = [](InferCtx& ic) {
    check_channel_params(ic, {"mean", "variance", "gamma", "beta"});
    return same_as_x(ic);
  };
  r.add(std::move(s));
}

void add_instance_norm(OpRegistry& r, Target since) {
  OpSchema s = base("instance_norm", since);
  std::string u = pdom(since);
  s.inputs.push_back(in_opt_const("gamma", dt::floats(), nullptr, u));
  s.inputs.push_back(in_opt_const("beta", dt::floats(), nullptr, u));
  s.inputs.push_back(in_opt_const("epsilon", dt::floats(), def_float(1e-5), u));
  s.infer = [](InferCtx& ic) {
    check_channel_params(ic, {"gamma", "beta"});
    return same_as_x(ic);
  };
  r.add(std::move(s));
}

void add_l2_norm(OpRegistry& r, Target since) {
  OpSchema s = base("l2_norm", since);
  s.inputs.push_back(in_opt_const("epsilon", dt::floats(), def_float(1e-6), pdom(since)));
  s.infer = [](InferCtx& ic) {
    const Type* tx = ic.type("x");
    if (tx->has_rank() && tx->rank() < 3)
      ic.fail_input("x", "must have rank >= 3, got rank " + std::to_string(tx->rank()) +
                             " (shape " + ops::shape_str(tx->shape()) + ")");
    return same_as_x(ic);
  };
  // Each batch (the dims before the last 3) is divided by sqrt(sum of its squares + epsilon).
  s.value = [](InferCtx& ic, std::vector<std::shared_ptr<const Value>>& out) {
    if (!ic.known("x") || !ic.known("epsilon")) return false;
    const Value& x = *ic.val("x");
    double eps = ic.float_("epsilon");
    int64_t rows = 1;
    for (int i = 0; i < x.rank() - 3; ++i) rows *= x.shape()[i];
    int64_t n = x.numel(), cols = rows ? n / rows : 0;
    std::vector<double> res(static_cast<size_t>(n));
    for (int64_t rw = 0; rw < rows; ++rw) {
      double ss = 0;
      for (int64_t c = 0; c < cols; ++c) ss += x.as_double(rw * cols + c) * x.as_double(rw * cols + c);
      double d = std::sqrt(ss + eps);
      for (int64_t c = 0; c < cols; ++c) res[rw * cols + c] = x.as_double(rw * cols + c) / d;
    }
    out.push_back(ops::share(Value::from_doubles(x.dtype(), x.shape(), res)));
    return true;
  };
  r.add(std::move(s));
}

// layer_norm's axes, made non-negative and range-checked; duplicates are kept out (coremltools
// treats axes as a set: normalized_shape lists x's dims "if i in axes").
std::vector<int64_t> norm_axes(const InferCtx& ic, int64_t rank) {
  const Value* v = ic.val("axes");
  if (v && v->rank() != 1)
    ic.fail_input("axes", "must be a rank-1 list of axes, got a value of rank " +
                              std::to_string(v->rank()));
  std::vector<int64_t> r;
  for (int64_t a : ic.ints("axes")) {
    if (a < -rank || a >= rank)
      ic.fail_input("axes", "= " + std::to_string(a) + " is out of range for x of rank " +
                                std::to_string(rank) + " (valid: [" + std::to_string(-rank) +
                                ", " + std::to_string(rank - 1) + "])");
    int64_t p = a < 0 ? a + rank : a;
    if (std::find(r.begin(), r.end(), p) == r.end()) r.push_back(p);
  }
  std::sort(r.begin(), r.end());
  return r;
}

void add_layer_norm(OpRegistry& r, Target since) {
  OpSchema s = base("layer_norm", since);
  std::string u = pdom(since);
  s.inputs.push_back(in_opt_const("axes", dt::int32()));
  s.inputs.push_back(in_opt_const("gamma", dt::floats(), nullptr, u));
  s.inputs.push_back(in_opt_const("beta", dt::floats(), nullptr, u));
  s.inputs.push_back(in_opt_const("epsilon", dt::floats(), def_float(1e-5), u));
  // axes default: every axis, range(rank). coremltools 9.0 fails to materialize its
  // `range(x.rank)` default ("Cannot add const range(0, 3)"); milkit implements the documented
  // default as an int32 const `<op>_axes_0`.
  s.defaults = [](InferCtx& ic) {
    std::vector<std::pair<std::string, Value>> d;
    const Type* tx = ic.type("x");
    if (tx->has_rank()) {
      std::vector<int64_t> a;
      for (int i = 0; i < tx->rank(); ++i) a.push_back(i);
      d.emplace_back("axes", Value::int_list(a));
    }
    return d;
  };
  s.infer = [](InferCtx& ic) {
    const Type* tx = ic.type("x");
    if (!tx->has_rank() || !ic.has("axes")) return same_as_x(ic);
    std::vector<int64_t> axes = norm_axes(ic, tx->rank());
    std::vector<Dim> ns;
    for (int64_t a : axes) ns.push_back(tx->shape()[a]);
    // gamma and beta must have shape x.shape[axes] (coremltools checks beta against gamma's
    // shape, and crashes when only beta is given; milkit checks each against x.shape[axes])
    for (const char* n : {"gamma", "beta"}) {
      if (!ic.has(n) || !ic.type(n)->has_rank()) continue;
      const auto& gs = ic.type(n)->shape();
      bool ok = gs.size() == ns.size();
      for (size_t i = 0; ok && i < gs.size(); ++i) ok = !dims_differ(ic.ctx, gs[i], ns[i]);
      if (!ok)
        ic.fail_input(n, "has shape " + ops::shape_str(gs) + " but x.shape[axes] is " +
                             ops::shape_str(ns) + " (x has shape " + ops::shape_str(tx->shape()) +
                             ")");
    }
    return same_as_x(ic);
  };
  s.value = [](InferCtx& ic, std::vector<std::shared_ptr<const Value>>& out) {
    if (!ic.known("x") || !ic.known("axes") || !ic.known("epsilon")) return false;
    if ((ic.has("gamma") && !ic.known("gamma")) || (ic.has("beta") && !ic.known("beta")))
      return false;
    const Value& x = *ic.val("x");
    const Value* g = ic.has("gamma") ? ic.val("gamma") : nullptr;
    const Value* b = ic.has("beta") ? ic.val("beta") : nullptr;
    double eps = ic.float_("epsilon");
    int rank = x.rank();
    std::vector<int64_t> axes = norm_axes(ic, rank);
    std::vector<bool> red(static_cast<size_t>(rank), false);
    for (int64_t a : axes) red[a] = true;
    const auto& sh = x.shape();
    // group (over the kept dims) and parameter (over the normalized dims) index of each element
    std::vector<int64_t> kshape, pshape;
    for (int i = 0; i < rank; ++i) (red[i] ? pshape : kshape).push_back(sh[i]);
    std::vector<int64_t> kst = ops::strides_of(kshape), pst = ops::strides_of(pshape);
    int64_t n = x.numel(), ng = shape_numel(kshape), gn = shape_numel(pshape);
    std::vector<int64_t> gi(static_cast<size_t>(n)), pi(static_cast<size_t>(n));
    std::vector<int64_t> ctr(static_cast<size_t>(rank), 0);
    for (int64_t k = 0; k < n; ++k) {
      int64_t a = 0, p = 0;
      size_t kk = 0, pp = 0;
      for (int d = 0; d < rank; ++d) {
        if (red[d]) p += ctr[d] * pst[pp++];
        else a += ctr[d] * kst[kk++];
      }
      gi[k] = a;
      pi[k] = p;
      for (int d = rank - 1; d >= 0; --d) {
        if (++ctr[d] < sh[d]) break;
        ctr[d] = 0;
      }
    }
    // numpy computes mean(x) and x - mean in x's dtype; for fp16 that rounding dominates the
    // result (cancellation), so it is reproduced; the rest is computed in double
    bool half = x.dtype() == DataType::Float16;
    auto rnd = [half](double v) {
      return half ? static_cast<double>(half_to_float(float_to_half(static_cast<float>(v)))) : v;
    };
    std::vector<double> mean(static_cast<size_t>(ng), 0), var(static_cast<size_t>(ng), 0);
    for (int64_t k = 0; k < n; ++k) mean[gi[k]] += x.as_double(k);
    for (auto& m : mean) m = rnd(m / static_cast<double>(gn));
    std::vector<double> num(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      num[k] = rnd(x.as_double(k) - mean[gi[k]]);
      var[gi[k]] += num[k] * num[k];
    }
    std::vector<double> res(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      double v = num[k] / std::sqrt(var[gi[k]] / static_cast<double>(gn) + eps);
      if (g) v *= g->numel() == 1 ? g->as_double(0) : g->as_double(pi[k]);
      if (b) v += b->numel() == 1 ? b->as_double(0) : b->as_double(pi[k]);
      res[k] = v;
    }
    out.push_back(ops::share(Value::from_doubles(x.dtype(), sh, res)));
    return true;
  };
  r.add(std::move(s));
}

void add_lrn(OpRegistry& r, Target since) {
  OpSchema s = base("local_response_norm", since);
  std::string u = pdom(since);
  s.inputs.push_back(in_const("size", dt::int32()));
  s.inputs.push_back(in_opt_const("alpha", dt::floats(), def_float(1e-4), u));
  s.inputs.push_back(in_opt_const("beta", dt::floats(), def_float(0.75), u));
  s.inputs.push_back(in_opt_const("k", dt::floats(), def_float(1.0), u));
  s.infer = same_as_x;
  r.add(std::move(s));
}

}  // namespace

void register_normalization_ops(OpRegistry& r) {
  for (Target t : {Target::iOS13, Target::iOS17}) {
    add_batch_norm(r, t);
    add_instance_norm(r, t);
    add_l2_norm(r, t);
    add_layer_norm(r, t);
    add_lrn(r, t);
  }
}

}  // namespace milkit
