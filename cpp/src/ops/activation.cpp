// The 17 activation ops (coremltools iOS15/activation.py, re-registered in iOS17/activation.py
// where alpha/beta get their own float domain "U"): the output has x's type. Value inference
// follows coremltools' numpy code step by step: each step rounds to the dtype numpy computes it
// in (x's dtype, or the promotion of x's and alpha's), and the result is stored in x's dtype.
#include <cmath>

#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"

namespace milkit {

namespace {

using FF = std::function<double(double)>;
using ValueOut = std::vector<std::shared_ptr<const Value>>;
using Check = std::function<void(InferCtx&)>;
using Fold = std::function<bool(InferCtx&, ValueOut&)>;

using ops::np_max;
using ops::np_min;
using ops::rnd;

double mul(double a, double b) { return a * b; }
double add(double a, double b) { return a + b; }

/// Element-wise map of a value into `dt` (one numpy step).
Value map(const Value& v, DataType dt, const FF& f) { return ops::fold_unary(v, dt, f); }
/// Element-wise binary numpy step with broadcasting, computed in `dt`.
Value zip(const Value& a, const Value& b, DataType dt, double (*f)(double, double)) {
  return ops::fold_binary(a, b, dt, f, nullptr);
}

/// Which const parameters an activation takes.
enum class Params { None, Alpha, AlphaBeta };

/// Registers an activation: x of domain T (fp16, fp32) plus const alpha (and beta) in domain
/// `pdom` ("T" at iOS13, "U" from iOS17). `check` validates beyond the schema; `fold` computes
/// the value when every input is known (nullptr: no value inference).
void add_act(OpRegistry& r, const std::string& name, Target since, Params p, Check check,
             Fold fold) {
  OpSchema s;
  s.name = name;
  s.since = since;
  std::string pdom = since >= Target::iOS17 ? "U" : "T";
  s.inputs = {in("x", dt::floats(), "T")};
  if (p != Params::None) s.inputs.push_back(in_const("alpha", dt::floats(), pdom));
  if (p == Params::AlphaBeta) s.inputs.push_back(in_const("beta", dt::floats(), pdom));
  s.infer = [check](InferCtx& ic) -> std::vector<const Type*> {
    if (check) check(ic);
    return {ic.type("x")};
  };
  if (fold) {
    std::vector<std::string> names;
    for (auto& d : s.inputs) names.push_back(d.name);
    s.value = [fold, names](InferCtx& ic, ValueOut& out) {
      for (auto& n : names)
        if (!ic.known(n)) return false;
      return fold(ic, out);
    };
  }
  r.add(std::move(s));
}

/// Registers the iOS13 version and the iOS17 one (alpha/beta in their own domain).
void add_act2(OpRegistry& r, const std::string& name, Params p, Check check, Fold fold) {
  add_act(r, name, Target::iOS13, p, check, fold);
  add_act(r, name, Target::iOS17, p, check, fold);
}

DataType xdt(const InferCtx& ic) { return ic.type("x")->dtype(); }

/// The dtype numpy computes x with alpha (and beta) in.
DataType cdt(const InferCtx& ic) {
  DataType t = xdt(ic);
  for (const char* p : {"alpha", "beta"})
    if (ic.schema.input_index(p) >= 0 && ic.has(p)) t = promote_dtypes(t, ic.type(p)->dtype());
  return t;
}

/// Stores the result in x's dtype.
bool emit(InferCtx& ic, ValueOut& out, const Value& v) {
  out.push_back(ops::share(v.cast(xdt(ic))));
  return true;
}

/// A fold of x alone, computed element-wise with `f(x, q)` where q rounds to x's dtype.
Fold unary_fold(std::function<double(double, const FF&)> f) {
  return [f](InferCtx& ic, ValueOut& out) {
    DataType t = xdt(ic);
    FF q = [t](double v) { return rnd(t, v); };
    return emit(ic, out, map(*ic.val("x"), t, [&](double v) { return f(v, q); }));
  };
}

/// alpha as one number, for the ops whose numpy code assigns through a mask (b[b < 0] = ...).
double scalar_alpha(const InferCtx& ic) {
  const Value& a = *ic.val("alpha");
  if (a.numel() != 1 || a.rank() > 1)
    ic.fail_input("alpha", "must be a single value to compute the op on a constant x, got shape " +
                               ops::shape_str(ic.type("alpha")->shape()));
  return a.as_double(0);
}

/// Whether a dim is the known integer n.
bool dim_is(Dim d, int64_t n) { return d->is_const() && d->value() == n; }

/// `name` reshaped to broadcast along dim 1 of x (all other dims 1), as coremltools'
/// np.expand_dims loop does.
Value channel_broadcast(const InferCtx& ic, const std::string& name) {
  const Value& a = *ic.val(name);
  std::vector<int64_t> shape(static_cast<size_t>(ic.type("x")->rank()), 1);
  shape[1] = a.numel();
  return a.reshaped(shape);
}

/// Requires `name` to be rank 1 with x.shape[1] elements (prelu, softplus_parametric).
void check_channel_param(InferCtx& ic, const std::string& name, const std::string& size_msg) {
  const Type* t = ic.type(name);
  if (t->rank() != 1) ic.fail_input(name, name + " should be rank 1");
  Dim c = ic.type("x")->shape()[1];
  if (!dim_is(c, t->shape()[0]->value())) ic.fail_input(name, size_msg);
}

}  // namespace

void register_activation_ops(OpRegistry& r) {
  // clamped_relu: min(max(x, 0), beta) + min(min(x, 0) * alpha, beta)
  add_act2(r, "clamped_relu", Params::AlphaBeta, nullptr, [](InferCtx& ic, ValueOut& out) {
    DataType t = xdt(ic), c = cdt(ic);
    const Value& x = *ic.val("x");
    Value pos = zip(map(x, t, [](double v) { return np_max(v, 0); }), *ic.val("beta"), c, np_min);
    Value neg = zip(map(x, t, [](double v) { return np_min(v, 0); }), *ic.val("alpha"), c, mul);
    neg = zip(neg, *ic.val("beta"), c, np_min);
    return emit(ic, out, zip(pos, neg, c, add));
  });

  // elu: b[b < 0] = alpha * (exp(b[b < 0]) - 1)
  add_act2(r, "elu", Params::Alpha, nullptr, [](InferCtx& ic, ValueOut& out) {
    DataType t = xdt(ic), c = cdt(ic);
    double a = scalar_alpha(ic);
    return emit(ic, out, map(*ic.val("x"), t, [&](double v) {
      if (!(v < 0)) return v;
      return rnd(c, a * rnd(t, rnd(t, std::exp(v)) - 1));
    }));
  });

  // gelu: mode EXACT (default), TANH_APPROXIMATION or SIGMOID_APPROXIMATION
  {
    OpSchema s;
    s.name = "gelu";
    s.inputs = {in("x", dt::floats(), "T"), in_opt_const("mode", dt::string(), def_str("EXACT"))};
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> {
      std::string m = ic.str("mode");
      if (m != "EXACT" && m != "TANH_APPROXIMATION" && m != "SIGMOID_APPROXIMATION")
        ic.fail_input("mode", "unrecognized value of mode: \"" + m +
                                  "\". Allowed values are {'EXACT', 'TANH_APPROXIMATION', "
                                  "'SIGMOID_APPROXIMATION'}");
      return {ic.type("x")};
    };
    s.value = [](InferCtx& ic, ValueOut& out) {
      if (!ic.known("x")) return false;
      std::string m = ic.str("mode");
      DataType t = xdt(ic);
      auto q = [t](double v) { return rnd(t, v); };
      FF f;
      if (m == "TANH_APPROXIMATION") {
        // np.sqrt(2 / np.pi) is float64, so a and the rest are computed in float64
        f = [q](double x) {
          double a = 0.7978845608028654 /* np.sqrt(2 / np.pi) */ * q(x + q(0.044715 * q(x * x * x)));
          return q(0.5 * x) * (1 + std::tanh(a));
        };
      } else if (m == "SIGMOID_APPROXIMATION") {
        f = [q](double x) { return q(x * q(1 / q(1 + q(std::exp(-q(1.702 * x)))))); };
      } else {
        // np.vectorize over math.erf: float64
        f = [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); };
      }
      return emit(ic, out, map(*ic.val("x"), t, f));
    };
    r.add(std::move(s));
  }

  // leaky_relu: b[b < 0] *= alpha
  add_act2(r, "leaky_relu", Params::Alpha, nullptr, [](InferCtx& ic, ValueOut& out) {
    DataType c = cdt(ic);
    double a = scalar_alpha(ic);
    return emit(ic, out, map(*ic.val("x"), xdt(ic), [&](double v) {
      return v < 0 ? rnd(c, v * a) : v;
    }));
  });

  // linear_activation: alpha * x + beta
  add_act2(r, "linear_activation", Params::AlphaBeta, nullptr, [](InferCtx& ic, ValueOut& out) {
    DataType c = cdt(ic);
    Value v = zip(*ic.val("alpha"), *ic.val("x"), c, mul);
    return emit(ic, out, zip(v, *ic.val("beta"), c, add));
  });

  // prelu: max(x, 0) + min(x, 0) * alpha (alpha along dim 1)
  add_act2(
      r, "prelu", Params::Alpha,
      [](InferCtx& ic) {
        int rank = ic.type("x")->rank();
        if (rank != 3 && rank != 4 && rank != 5)
          ic.fail_input("x", "prelu op: x must be rank 3 or 4 or 5, instead it is of rank " +
                                 std::to_string(rank));
        const Type* ta = ic.type("alpha");
        if (ta->rank() != 1) ic.fail_input("alpha", "alpha should be rank 1");
        Dim c = ic.type("x")->shape()[1];
        int64_t n = ta->shape()[0]->value();
        if (!dim_is(c, n))
          ic.fail_input("alpha", "Size of dimension 0 of alpha (" + std::to_string(n) +
                                     ") should be the same as the size of dimension 1 of x (" +
                                     c->str() + ").");
        if (rank == 3 || rank == 5) {
          const Value& a = *ic.val("alpha");
          for (int64_t k = 0; k < a.numel(); ++k)
            if (std::fabs(a.as_double(k) - a.as_double(0)) > 1e-5)
              ic.fail_input("alpha",
                            "prelu op: rank 3 or rank 5 input is only supported when all the "
                            "values of alpha are same,which is not the case here");
        }
      },
      [](InferCtx& ic, ValueOut& out) {
        DataType t = xdt(ic), c = cdt(ic);
        const Value& x = *ic.val("x");
        Value pos = map(x, t, [](double v) { return np_max(v, 0); });
        Value neg = zip(map(x, t, [](double v) { return np_min(v, 0); }),
                        channel_broadcast(ic, "alpha"), c, mul);
        return emit(ic, out, zip(pos, neg, c, add));
      });

  add_act(r, "relu", Target::iOS13, Params::None, nullptr,
          unary_fold([](double x, const FF&) { return np_max(x, 0); }));
  add_act(r, "relu6", Target::iOS13, Params::None, nullptr,
          unary_fold([](double x, const FF&) { return np_min(np_max(x, 0), 6); }));

  // scaled_tanh: alpha * tanh(x * beta)
  add_act2(r, "scaled_tanh", Params::AlphaBeta, nullptr, [](InferCtx& ic, ValueOut& out) {
    DataType c = cdt(ic);
    Value v = zip(*ic.val("x"), *ic.val("beta"), c, mul);
    v = map(v, c, [](double a) { return std::tanh(a); });
    return emit(ic, out, zip(*ic.val("alpha"), v, c, mul));
  });

  add_act(r, "sigmoid", Target::iOS13, Params::None, nullptr,
          unary_fold([](double x, const FF& q) { return q(1 / q(1 + q(std::exp(-x)))); }));

  // sigmoid_hard: min(max(alpha * x + beta, 0), 1)
  add_act2(r, "sigmoid_hard", Params::AlphaBeta, nullptr, [](InferCtx& ic, ValueOut& out) {
    DataType c = cdt(ic);
    Value v = zip(*ic.val("alpha"), *ic.val("x"), c, mul);
    v = zip(v, *ic.val("beta"), c, add);
    return emit(ic, out, map(v, c, [](double a) { return np_min(np_max(a, 0), 1); }));
  });

  // silu has no value inference in coremltools
  add_act(r, "silu", Target::iOS13, Params::None, nullptr, nullptr);

  // softplus: log(1 + exp(-|x|)) + max(x, 0)
  add_act(r, "softplus", Target::iOS13, Params::None, nullptr,
          unary_fold([](double x, const FF& q) {
            return q(q(std::log(q(1 + q(std::exp(-std::fabs(x)))))) + np_max(x, 0));
          }));

  // softplus_parametric: alpha * log(1 + exp(x * beta)), alpha and beta along dim 1
  add_act2(
      r, "softplus_parametric", Params::AlphaBeta,
      [](InferCtx& ic) {
        if (ic.type("x")->rank() < 3) ic.fail_input("x", "x should be at least rank 3");
        check_channel_param(ic, "alpha",
                            "Size of dimension 0 of alpha should be the same as the size of "
                            "dimension 1 of x.");
        check_channel_param(ic, "beta",
                            "Size of dimension 0 of beta should be the same as the size of "
                            "dimension 1 of x.");
      },
      [](InferCtx& ic, ValueOut& out) {
        DataType c = cdt(ic);
        Value v = zip(*ic.val("x"), channel_broadcast(ic, "beta"), c, mul);
        v = map(v, c, [c](double a) { return rnd(c, std::log(rnd(c, 1 + rnd(c, std::exp(a))))); });
        return emit(ic, out, zip(channel_broadcast(ic, "alpha"), v, c, mul));
      });

  // softmax: exp(x - max) / sum(exp(x - max)) along axis (default -1)
  {
    OpSchema s;
    s.name = "softmax";
    s.inputs = {in("x", dt::floats(), "T"), in_opt_const("axis", dt::int32(), def_int(-1))};
    // like coremltools, the axis is only checked when the value is computed
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> { return {ic.type("x")}; };
    s.value = [](InferCtx& ic, ValueOut& out) {
      if (!ic.known("x")) return false;
      const Value& x = *ic.val("x");
      DataType t = xdt(ic);
      int64_t axis = ic.axis("axis", ic.int_("axis"), x.rank());
      const auto& shape = x.shape();
      int64_t n = shape[axis], inner = 1;
      for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
      int64_t outer = n * inner != 0 ? x.numel() / (n * inner) : 0;
      std::vector<double> r(static_cast<size_t>(x.numel()));
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          int64_t base = o * n * inner + i;
          double m = -INFINITY;
          for (int64_t k = 0; k < n; ++k) m = np_max(m, x.as_double(base + k * inner));
          double sum = 0;
          for (int64_t k = 0; k < n; ++k) {
            double e = rnd(t, std::exp(rnd(t, x.as_double(base + k * inner) - m)));
            r[base + k * inner] = e;
            sum += e;
          }
          sum = rnd(t, sum);
          for (int64_t k = 0; k < n; ++k) r[base + k * inner] = rnd(t, r[base + k * inner] / sum);
        }
      return emit(ic, out, Value::from_doubles(t, shape, r));
    };
    r.add(std::move(s));
  }

  add_act(r, "softsign", Target::iOS13, Params::None, nullptr,
          unary_fold([](double x, const FF& q) { return q(x / q(1 + std::fabs(x))); }));

  // thresholded_relu: y[y < alpha] = 0. coremltools writes into x's value in place (and fails on
  // a scalar x); milkit computes a new value and folds scalars too.
  add_act2(r, "thresholded_relu", Params::Alpha, nullptr, [](InferCtx& ic, ValueOut& out) {
    const Value& x = *ic.val("x");
    Value mask = ops::fold_binary(x, *ic.val("alpha"), DataType::Bool,
                                  [](double a, double b) { return double(a < b); }, nullptr);
    if (mask.shape() != x.shape())
      ic.fail_input("alpha", "cannot be broadcast to the shape of x to compute the op on a "
                             "constant x");
    std::vector<double> r = x.to_doubles();
    for (int64_t k = 0; k < mask.numel(); ++k)
      if (mask.as_int(k)) r[k] = 0;
    return emit(ic, out, Value::from_doubles(xdt(ic), x.shape(), r));
  });
}

}  // namespace milkit
