// The 27 elementwise unary ops (coremltools iOS15/elementwise_unary.py, re-registered in
// iOS17/elementwise_unary.py): the output has x's type (cast: the requested dtype; logical_not:
// bool). Value inference follows numpy as coremltools does: each numpy step rounds to the dtype
// it computes in, and the result is stored in the output dtype.
#include <algorithm>
#include <cmath>
#include <limits>

#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"

namespace milkit {

namespace {

using FF = std::function<double(double)>;
using FI = std::function<int64_t(int64_t)>;
using ValueOut = std::vector<std::shared_ptr<const Value>>;

using ops::np_max;
using ops::np_min;
using ops::rnd;

/// numpy's sign: NaN stays NaN.
double np_sign(double a) { return std::isnan(a) ? NAN : (a > 0) - (a < 0); }

/// numpy's float -> int32 conversion on x86: NaN and out-of-range values give INT32_MIN.
int64_t np_float_to_int32(double d) {
  if (std::isnan(d) || d >= 2147483648.0 || d <= -2147483649.0)
    return std::numeric_limits<int32_t>::min();
  return static_cast<int64_t>(std::trunc(d));
}

/// The x dtypes of the shared domains.
DTypeSet floats() { return dt::floats(); }
DTypeSet floats_int() { return dt::numeric(); }

/// An op with the single input x of domain T whose output has x's type, folded by `ff` (floats)
/// or `fi` (int32, when the domain has it).
void add_unary(OpRegistry& r, const std::string& name, DTypeSet domain, FF ff, FI fi = nullptr) {
  OpSchema s;
  s.name = name;
  s.inputs = {in("x", domain, "T")};
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> { return {ic.type("x")}; };
  s.value = [ff, fi](InferCtx& ic, ValueOut& out) {
    if (!ic.known("x")) return false;
    const Value& x = *ic.val("x");
    DataType dt = ic.type("x")->dtype();
    out.push_back(ops::share(ops::fold_unary(x, dt, [&](double v) { return ff(v); }, fi)));
    return true;
  };
  r.add(std::move(s));
}

/// inverse / log / rsqrt: x plus an optional const epsilon whose default is x's dtype.
/// `eps_domain` is "T" (shared with x, iOS13) or "U" (its own float dtype, iOS17).
/// `f(x, eps, q)` computes with `q` rounding to the dtype numpy computes in.
void add_with_epsilon(OpRegistry& r, const std::string& name, Target since,
                      const std::string& eps_domain, double eps_default,
                      std::function<double(double, double, const FF&)> f) {
  OpSchema s;
  s.name = name;
  s.since = since;
  s.inputs = {in("x", floats(), "T"), in_opt_const("epsilon", floats(), nullptr, eps_domain)};
  s.defaults = [eps_default](InferCtx& ic) -> std::vector<std::pair<std::string, Value>> {
    return {{"epsilon", Value::scalar_float(ic.type("x")->dtype(), eps_default)}};
  };
  s.infer = [](InferCtx& ic) -> std::vector<const Type*> { return {ic.type("x")}; };
  s.value = [f](InferCtx& ic, ValueOut& out) {
    if (!ic.known("x") || !ic.known("epsilon")) return false;
    DataType xt = ic.type("x")->dtype();
    DataType ct = promote_dtypes(xt, ic.type("epsilon")->dtype());
    FF q = [ct](double v) { return rnd(ct, v); };
    out.push_back(ops::share(ops::fold_binary(
        *ic.val("x"), *ic.val("epsilon"), xt,
        [&](double a, double e) { return f(a, e, q); }, nullptr)));
    return true;
  };
  r.add(std::move(s));
}

/// clip at iOS13 (no check) or iOS17 (alpha < beta enforced).
void add_clip(OpRegistry& r, Target since) {
  OpSchema s;
  s.name = "clip";
  s.since = since;
  s.inputs = {in("x", floats(), "T"), in_const("alpha", floats(), "T"),
              in_const("beta", floats(), "T")};
  bool strict = since >= Target::iOS17;
  s.infer = [strict](InferCtx& ic) -> std::vector<const Type*> {
    if (strict) {
      const Value* a = ic.val("alpha");
      const Value* b = ic.val("beta");
      if (a && b && !a->is_symbolic() && !b->is_symbolic()) {
        Value ge = ops::fold_binary(*a, *b, DataType::Bool,
                                    [](double x, double y) { return double(x >= y); }, nullptr);
        if (ge.numel() > 1)
          ic.fail("alpha " + a->str() + " and beta " + b->str() +
                  " must be scalars: the truth value of their comparison is ambiguous");
        if (ge.numel() == 1 && ge.as_int(0))
          ic.fail("The `alpha` value (" + a->str() + ") should be smaller than `beta` value (" +
                  b->str() + ") in `clip` op.");
      }
    }
    return {ic.type("x")};
  };
  s.value = [](InferCtx& ic, ValueOut& out) {
    if (!ic.known("x") || !ic.known("alpha") || !ic.known("beta")) return false;
    DataType dt = ic.type("x")->dtype();
    Value lo = ops::fold_binary(*ic.val("x"), *ic.val("alpha"), dt, np_max, nullptr);
    out.push_back(ops::share(ops::fold_binary(lo, *ic.val("beta"), dt, np_min, nullptr)));
    return true;
  };
  r.add(std::move(s));
}

/// numpy's astype(to) as coremltools applies it: float -> integer goes through int32 (NaN and
/// overflow give INT32_MIN) and wraps; a rank-1 symbolic value keeps its symbols and casts its
/// known elements.
Value numpy_cast(SymbolContext& ctx, const Value& v, DataType to) {
  if (v.is_symbolic()) {
    // coremltools casts the known elements of a rank-1 symbolic value and keeps the symbols
    std::vector<Dim> dims;
    dims.reserve(static_cast<size_t>(v.numel()));
    for (int64_t k = 0; k < v.numel(); ++k) {
      Dim d = v.as_dim(ctx, k);
      if (!d->is_const()) {
        dims.push_back(d);
        continue;
      }
      Value one = numpy_cast(ctx, Value::scalar_int(v.dtype(), d->value()), to);
      dims.push_back(ctx.constant(is_float(to) ? static_cast<int64_t>(one.as_double(0))
                                               : one.as_int(0)));
    }
    return Value::from_dims(to, v.shape(), std::move(dims));
  }
  if (v.dtype() == to) return v;
  if (is_float(v.dtype()) && is_int(to)) {
    std::vector<int64_t> r(static_cast<size_t>(v.numel()));
    for (int64_t k = 0; k < v.numel(); ++k) r[k] = np_float_to_int32(v.as_double(k));
    return Value::from_ints(to, v.shape(), r);  // wraps to the narrower types like numpy
  }
  return v.cast(to);
}


/// The dtype names cast accepts at iOS13 (`extended` false) or iOS17.
std::vector<std::string> cast_dtypes(bool extended) {
  if (!extended) return {"fp16", "fp32", "int32", "bool"};
  return {"fp16", "fp32", "int8", "uint8", "int16", "uint16", "int32", "bool"};
}

std::string join(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", '" : "'") + v[i] + "'";
  return s + "]";
}

/// The dtype cast converts to, or fails naming the op and the supported names.
DataType cast_target(const InferCtx& ic, bool extended) {
  static const std::vector<std::string> kBasic = cast_dtypes(false), kExtended = cast_dtypes(true);
  const Value* v = ic.val("dtype");
  if (v && !v->is_symbolic() && v->dtype() == DataType::String && v->numel() == 1) {
    // the common case without copies: a known string scalar naming a supported dtype
    const std::string& n = v->string_values().at(0);
    const auto& ok = extended ? kExtended : kBasic;
    if (std::find(ok.begin(), ok.end(), n) != ok.end()) return *dtype_from_name(n);
  }
  std::string name = ic.str("dtype");
  const auto& ok = extended ? kExtended : kBasic;
  if (std::find(ok.begin(), ok.end(), name) == ok.end())
    ic.fail_input("dtype", "Parameter dtype of the cast operation can be one of the " + join(ok) +
                               ". Provided '" + name + "'");
  return *dtype_from_name(name);
}

void add_cast(OpRegistry& r, Target since) {
  bool ext = since >= Target::iOS17;
  DTypeSet domain = ext ? DTypeSet{DataType::Float16, DataType::Float32, DataType::Int8,
                                   DataType::UInt8,   DataType::Int16,   DataType::UInt16,
                                   DataType::Int32,   DataType::Bool}
                        : dt::numeric_bool();
  OpSchema s;
  s.name = "cast";
  s.since = since;
  s.inputs = {in("x", domain, "T"), in_const("dtype", dt::string())};
  s.infer = [ext](InferCtx& ic) -> std::vector<const Type*> {
    DataType to = cast_target(ic, ext);
    return {ops::with_dtype(ic.ctx, ic.type("x"), to)};
  };
  s.value = [ext](InferCtx& ic, ValueOut& out) {
    const Value* x = ic.val("x");
    if (!x) return false;
    DataType to = cast_target(ic, ext);
    if (x->is_symbolic() && x->rank() != 1) return false;
    out.push_back(ops::share(numpy_cast(ic.ctx, *x, to)));
    return true;
  };
  r.add(std::move(s));
}

}  // namespace


void register_elementwise_unary_ops(OpRegistry& r) {
  DTypeSet fl = floats();
  DTypeSet fi = floats_int();
  add_unary(r, "abs", fi, [](double x) { return std::fabs(x); },
            [](int64_t x) { return x < 0 ? -x : x; });
  add_unary(r, "acos", fl, [](double x) { return std::acos(x); });
  add_unary(r, "asin", fl, [](double x) { return std::asin(x); });
  add_unary(r, "atan", fl, [](double x) { return std::atan(x); });
  add_unary(r, "atanh", fl, [](double x) { return std::atanh(x); });
  add_cast(r, Target::iOS13);
  add_cast(r, Target::iOS17);
  add_unary(r, "ceil", fl, [](double x) { return std::ceil(x); });
  add_clip(r, Target::iOS13);
  add_clip(r, Target::iOS17);
  add_unary(r, "cos", fl, [](double x) { return std::cos(x); });
  add_unary(r, "cosh", fl, [](double x) { return std::cosh(x); });
  // np.vectorize(math.erf): computed in float64, stored in x's dtype
  add_unary(r, "erf", fl, [](double x) { return std::erf(x); });
  add_unary(r, "exp", fl, [](double x) { return std::exp(x); });
  // np.exp2 of int32 gives float64, stored back as int32 (truncated; overflow -> INT32_MIN)
  add_unary(r, "exp2", fi, [](double x) { return std::exp2(x); },
            [](int64_t x) { return np_float_to_int32(std::exp2(static_cast<double>(x))); });
  add_unary(r, "floor", fl, [](double x) { return std::floor(x); });
  add_with_epsilon(r, "inverse", Target::iOS13, "T", 1e-4,
                   [](double x, double e, const FF& q) { return q(1.0 / q(x + e)); });
  add_with_epsilon(r, "inverse", Target::iOS17, "U", 1e-4,
                   [](double x, double e, const FF& q) { return q(1.0 / q(x + e)); });
  add_with_epsilon(r, "log", Target::iOS13, "T", 1e-45,
                   [](double x, double e, const FF& q) { return q(std::log(q(x + e))); });
  add_with_epsilon(r, "log", Target::iOS17, "U", 1e-45,
                   [](double x, double e, const FF& q) { return q(std::log(q(x + e))); });
  {
    OpSchema s;
    s.name = "logical_not";
    s.inputs = {in("x", dt::boolean())};
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> { return {ic.type("x")}; };
    s.value = [](InferCtx& ic, ValueOut& out) {
      if (!ic.known("x")) return false;
      out.push_back(ops::share(ops::fold_unary(
          *ic.val("x"), DataType::Bool, [](double x) { return double(x == 0); },
          [](int64_t x) { return int64_t(x == 0); })));
      return true;
    };
    r.add(std::move(s));
  }
  // np.round: half to even (the default rounding mode of nearbyint)
  add_unary(r, "round", fl, [](double x) { return std::nearbyint(x); });
  add_with_epsilon(r, "rsqrt", Target::iOS13, "T", 1e-12,
                   [](double x, double e, const FF& q) { return q(1.0 / q(std::sqrt(q(x + e)))); });
  add_with_epsilon(r, "rsqrt", Target::iOS17, "U", 1e-12,
                   [](double x, double e, const FF& q) { return q(1.0 / q(std::sqrt(q(x + e)))); });
  add_unary(r, "sign", fi, np_sign, [](int64_t x) { return int64_t((x > 0) - (x < 0)); });
  add_unary(r, "sin", fl, [](double x) { return std::sin(x); });
  add_unary(r, "sinh", fl, [](double x) { return std::sinh(x); });
  add_unary(r, "sqrt", fl, [](double x) { return std::sqrt(x); });
  add_unary(r, "square", fi, [](double x) { return x * x; }, [](int64_t x) { return x * x; });
  add_unary(r, "tan", fl, [](double x) { return std::tan(x); });
  add_unary(r, "tanh", fl, [](double x) { return std::tanh(x); });
  {
    OpSchema s;
    s.name = "threshold";
    s.inputs = {in("x", fi, "T"), in_const("alpha", fi, "T")};
    s.infer = [](InferCtx& ic) -> std::vector<const Type*> { return {ic.type("x")}; };
    s.value = [](InferCtx& ic, ValueOut& out) {
      if (!ic.known("x") || !ic.known("alpha")) return false;
      out.push_back(ops::share(ops::fold_binary(*ic.val("x"), *ic.val("alpha"),
                                                ic.type("x")->dtype(), np_max,
                                                [](int64_t a, int64_t b) { return std::max(a, b); })));
      return true;
    };
    r.add(std::move(s));
  }
}

}  // namespace milkit
