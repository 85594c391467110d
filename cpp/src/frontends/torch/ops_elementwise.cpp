// ATen elementwise operators: arithmetic with torch's type promotion and alpha, comparisons,
// logical ops, unary math, activations, where / masked_fill, clamp.
#include <cmath>
#include <limits>

#include "converter.h"

namespace milkit {
namespace torch_detail {

namespace {

using C = Converter;

Var* self(C& cv, const json& n) {
  if (C::has(n, "self")) return cv.tensor(n, "self");
  return cv.tensor(n, "input");
}

// The float dtype a float-valued op computes in: the node's output dtype, else fp32.
DataType float_out(C& cv, const json& n, Var* x) {
  auto od = cv.out_dtype(n);
  if (od && is_float(*od)) return *od;
  return is_float(C::dtype(x)) ? C::dtype(x) : DataType::Float32;
}

Var* bin(C& cv, const char* op, Var* x, Var* y) { return cv.op(op, {C::a("x", x), C::a("y", y)}); }

// self <op> other, with other a tensor or a number (torch's promotion)
std::pair<Var*, Var*> operands(C& cv, const json& n) {
  if (C::is_number(n, "self") && !C::is_number(n, "other")) {
    // number <op> tensor (decompositions write rsub so)
    Var* y = cv.tensor(n, "other");
    DataType dt = C::dtype(y);
    auto od = cv.out_dtype(n);
    if (od && *od != DataType::Bool) dt = *od;
    return {cv.scalar_or_tensor(n, "self", dt), cv.cast(y, dt)};
  }
  Var* x = self(cv, n);
  if (C::is_number(n, "other")) {
    DataType dt = C::dtype(x);
    auto od = cv.out_dtype(n);
    if (od && *od != DataType::Bool) dt = *od;
    else if (!is_float(dt) && cv.number(n, "other", 0) != std::floor(cv.number(n, "other", 0))) dt = DataType::Float32;
    return {cv.cast(x, dt), cv.scalar_or_tensor(n, "other", dt)};
  }
  Var* y = cv.tensor(n, "other");
  return cv.promoted(n, x, y);
}

void arith(OpTable& t, const char* name, const char* mil) {
  t[name] = [mil](C& cv, const json& n) {
    auto [x, y] = operands(cv, n);
    if (C::has(n, "alpha") && cv.f(n, "alpha", 1) != 1)
      y = bin(cv, "mul", y, cv.cs(cv.f(n, "alpha", 1), C::dtype(y)));
    cv.out(n, bin(cv, mil, x, y));
  };
}

void compare(OpTable& t, const char* name, const char* mil) {
  t[name] = [mil](C& cv, const json& n) {
    Var* x = self(cv, n);
    Var* y;
    if (C::is_number(n, "other")) {
      DataType dt = C::dtype(x);
      // a SymInt (a size, maybe symbolic) is an integer
      bool integral = C::arg(n, "other")->contains("as_sym_int");
      if (!is_float(dt) && !integral && cv.number(n, "other", 0) != std::floor(cv.number(n, "other", 0))) {
        dt = DataType::Float32;
        x = cv.cast(x, dt);
      }
      y = cv.scalar_or_tensor(n, "other", dt);
    } else {
      y = cv.tensor(n, "other");
      DataType dt = C::promote(x, y);
      x = cv.cast(x, dt);
      y = cv.cast(y, dt);
    }
    if (C::dtype(x) == DataType::Bool && std::string(mil) != "equal" && std::string(mil) != "not_equal") {
      x = cv.cast(x, DataType::Int32);
      y = cv.cast(y, DataType::Int32);
    }
    cv.out(n, bin(cv, mil, x, y));
  };
}

void logical(OpTable& t, const char* name, const char* mil) {
  t[name] = [mil](C& cv, const json& n) {
    Var* x = cv.cast(self(cv, n), DataType::Bool);
    Var* y = C::is_number(n, "other") ? cv.cs(cv.number(n, "other", 0), DataType::Bool)
                                       : cv.cast(cv.tensor(n, "other"), DataType::Bool);
    cv.out(n, bin(cv, mil, x, y));
  };
}

// A float op of one input (ints promote to the default float).
void unary(OpTable& t, const char* name, const char* mil) {
  t[name] = [mil](C& cv, const json& n) {
    Var* x = self(cv, n);
    x = cv.cast(x, float_out(cv, n, x));
    cv.out(n, cv.op(mil, {C::a("x", x)}));
  };
}

// An op that keeps the input dtype (abs, neg of ints are fine in MIL).
void unary_keep(OpTable& t, const char* name, const char* mil) {
  t[name] = [mil](C& cv, const json& n) { cv.out(n, cv.op(mil, {C::a("x", self(cv, n))})); };
}

Var* clip(C& cv, Var* x, std::optional<double> lo, std::optional<double> hi) {
  DataType dt = C::dtype(x);
  if (is_float(dt) && lo && hi) return cv.op("clip", {C::a("x", x), C::a("alpha", Value::scalar_float(dt, *lo)),
                                                     C::a("beta", Value::scalar_float(dt, *hi))});
  if (lo) x = bin(cv, "maximum", x, cv.cs(*lo, dt));
  if (hi) x = bin(cv, "minimum", x, cv.cs(*hi, dt));
  return x;
}

Var* sel(C& cv, Var* cond, Var* a, Var* b) {
  return cv.op("select", {C::a("cond", cond), C::a("a", a), C::a("b", b)});
}

// `x` with a trailing axis of one element (for comparisons against every element of a list).
Var* trailing_axis(C& cv, Var* x) { return cv.op("expand_dims", {C::a("x", x), C::aints32("axes", {-1})}); }

// How many elements along the last axis of `cmp` (a bool tensor) are true, as int32.
Var* count_true(C& cv, Var* cmp) {
  return cv.op("reduce_sum", {C::a("x", cv.cast(cmp, DataType::Int32)), C::aints32("axes", {-1}),
                              C::abool("keep_dims", false)});
}

}  // namespace

void register_elementwise(OpTable& t) {
  arith(t, "aten.add", "add");
  arith(t, "aten.sub", "sub");
  arith(t, "aten.mul", "mul");
  arith(t, "aten.maximum", "maximum");
  arith(t, "aten.minimum", "minimum");
  arith(t, "aten.fmax", "maximum");
  arith(t, "aten.fmin", "minimum");
  t["aten.rsub"] = [](C& cv, const json& n) {
    auto [x, y] = operands(cv, n);
    if (cv.f(n, "alpha", 1) != 1) x = bin(cv, "mul", x, cv.cs(cv.f(n, "alpha", 1), C::dtype(x)));
    cv.out(n, bin(cv, "sub", y, x));
  };
  t["aten.div"] = [](C& cv, const json& n) {
    auto [x, y] = operands(cv, n);
    std::string mode = cv.s(n, "rounding_mode", "");
    if (mode.empty()) {
      DataType dt = float_out(cv, n, x);
      cv.out(n, bin(cv, "real_div", cv.cast(x, dt), cv.cast(y, dt)));
    } else if (mode == "floor") {
      if (is_float(C::dtype(x))) cv.out(n, cv.op("floor", {C::a("x", bin(cv, "real_div", x, y))}));
      else cv.out(n, bin(cv, "floor_div", x, y));
    } else if (mode == "trunc") {
      DataType dt = C::dtype(x);
      Var* q = bin(cv, "real_div", cv.cast(x, DataType::Float32), cv.cast(y, DataType::Float32));
      Var* tr = cv.op("mul", {C::a("x", cv.op("sign", {C::a("x", q)})),
                             C::a("y", cv.op("floor", {C::a("x", cv.op("abs", {C::a("x", q)}))}))});
      cv.out(n, cv.cast(tr, dt));
    } else {
      cv.fail(n, "rounding_mode '" + mode + "' is not one of None, 'trunc', 'floor'");
    }
  };
  t["aten.true_divide"] = t["aten.div"];
  t["aten.floor_divide"] = [](C& cv, const json& n) {
    auto [x, y] = operands(cv, n);
    if (is_float(C::dtype(x))) cv.out(n, cv.op("floor", {C::a("x", bin(cv, "real_div", x, y))}));
    else cv.out(n, bin(cv, "floor_div", x, y));
  };
  t["aten.remainder"] = [](C& cv, const json& n) {
    auto [x, y] = operands(cv, n);
    // Python's modulo: x - floor(x / y) * y (sign of the divisor)
    Var* q = is_float(C::dtype(x)) ? cv.op("floor", {C::a("x", bin(cv, "real_div", x, y))}) : bin(cv, "floor_div", x, y);
    cv.out(n, bin(cv, "sub", x, bin(cv, "mul", q, y)));
  };
  t["aten.fmod"] = [](C& cv, const json& n) {
    auto [x, y] = operands(cv, n);
    DataType dt = C::dtype(x);
    Var* xf = cv.cast(x, DataType::Float32);
    Var* yf = cv.cast(y, DataType::Float32);
    Var* q = bin(cv, "real_div", xf, yf);
    Var* tq = cv.op("mul", {C::a("x", cv.op("sign", {C::a("x", q)})),
                           C::a("y", cv.op("floor", {C::a("x", cv.op("abs", {C::a("x", q)}))}))});
    cv.out(n, cv.cast(bin(cv, "sub", xf, bin(cv, "mul", tq, yf)), dt));
  };
  t["aten.pow"] = [](C& cv, const json& n) {
    if (!C::has(n, "self") && C::is_number(n, "self")) {
      // pow.Scalar: number ** tensor
      Var* e = cv.tensor(n, "exponent");
      DataType dt = float_out(cv, n, e);
      cv.out(n, bin(cv, "pow", cv.scalar_or_tensor(n, "self", dt), cv.cast(e, dt)));
      return;
    }
    if (C::is_number(n, "self")) {
      Var* e = cv.tensor(n, "exponent");
      DataType dt = float_out(cv, n, e);
      cv.out(n, bin(cv, "pow", cv.scalar_or_tensor(n, "self", dt), cv.cast(e, dt)));
      return;
    }
    Var* x = self(cv, n);
    if (C::is_number(n, "exponent")) {
      double e = cv.number(n, "exponent", 1);
      DataType dt = C::dtype(x);
      if (auto od = cv.out_dtype(n)) dt = *od;
      x = cv.cast(x, dt);
      if (e == 2) {
        cv.out(n, bin(cv, "mul", x, x));
        return;
      }
      if (e == 0.5 && is_float(dt)) {
        cv.out(n, cv.op("sqrt", {C::a("x", x)}));
        return;
      }
      cv.out(n, bin(cv, "pow", x, cv.cs(e, dt)));
      return;
    }
    Var* e = cv.tensor(n, "exponent");
    auto [a, b] = cv.promoted(n, x, e);
    cv.out(n, bin(cv, "pow", a, b));
  };
  compare(t, "aten.eq", "equal");
  compare(t, "aten.ne", "not_equal");
  compare(t, "aten.lt", "less");
  compare(t, "aten.le", "less_equal");
  compare(t, "aten.gt", "greater");
  compare(t, "aten.ge", "greater_equal");
  logical(t, "aten.logical_and", "logical_and");
  logical(t, "aten.logical_or", "logical_or");
  logical(t, "aten.logical_xor", "logical_xor");
  t["aten.bitwise_and"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    if (C::dtype(x) != DataType::Bool) cv.fail(n, "bitwise ops are supported on bool tensors only");
    Var* y = C::is_number(n, "other") ? cv.cs(cv.number(n, "other", 0), DataType::Bool) : cv.cast(cv.tensor(n, "other"), DataType::Bool);
    cv.out(n, bin(cv, "logical_and", x, y));
  };
  t["aten.bitwise_or"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    if (C::dtype(x) != DataType::Bool) cv.fail(n, "bitwise ops are supported on bool tensors only");
    Var* y = C::is_number(n, "other") ? cv.cs(cv.number(n, "other", 0), DataType::Bool) : cv.cast(cv.tensor(n, "other"), DataType::Bool);
    cv.out(n, bin(cv, "logical_or", x, y));
  };
  t["aten.bitwise_xor"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    if (C::dtype(x) != DataType::Bool) cv.fail(n, "bitwise ops are supported on bool tensors only");
    Var* y = C::is_number(n, "other") ? cv.cs(cv.number(n, "other", 0), DataType::Bool) : cv.cast(cv.tensor(n, "other"), DataType::Bool);
    cv.out(n, bin(cv, "logical_xor", x, y));
  };
  t["aten.__and__"] = t["aten.bitwise_and"];
  t["aten.__or__"] = t["aten.bitwise_or"];
  t["aten.__xor__"] = t["aten.bitwise_xor"];
  t["aten.logical_not"] = [](C& cv, const json& n) {
    cv.out(n, cv.op("logical_not", {C::a("x", cv.cast(self(cv, n), DataType::Bool))}));
  };
  t["aten.bitwise_not"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    if (C::dtype(x) != DataType::Bool) cv.fail(n, "bitwise_not is supported on bool tensors only");
    cv.out(n, cv.op("logical_not", {C::a("x", x)}));
  };

  unary(t, "aten.sigmoid", "sigmoid");
  unary(t, "aten.tanh", "tanh");
  unary(t, "aten.exp", "exp");
  unary(t, "aten.exp2", "exp2");
  unary(t, "aten.log", "log");
  unary(t, "aten.sqrt", "sqrt");
  unary(t, "aten.rsqrt", "rsqrt");
  unary(t, "aten.sin", "sin");
  unary(t, "aten.cos", "cos");
  unary(t, "aten.tan", "tan");
  unary(t, "aten.asin", "asin");
  unary(t, "aten.acos", "acos");
  unary(t, "aten.atan", "atan");
  unary(t, "aten.sinh", "sinh");
  unary(t, "aten.cosh", "cosh");
  unary(t, "aten.atanh", "atanh");
  unary(t, "aten.erf", "erf");
  unary(t, "aten.softsign", "softsign");
  unary_keep(t, "aten.abs", "abs");
  unary_keep(t, "aten.relu", "relu");
  t["aten.floor"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    cv.out(n, is_float(C::dtype(x)) ? cv.op("floor", {C::a("x", x)}) : cv.op("identity", {C::a("x", x)}));
  };
  t["aten.ceil"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    cv.out(n, is_float(C::dtype(x)) ? cv.op("ceil", {C::a("x", x)}) : cv.op("identity", {C::a("x", x)}));
  };
  t["aten.trunc"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    cv.out(n, cv.op("mul", {C::a("x", cv.op("sign", {C::a("x", x)})),
                           C::a("y", cv.op("floor", {C::a("x", cv.op("abs", {C::a("x", x)}))}))}));
  };
  t["aten.round"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    int64_t dec = cv.i(n, "decimals", 0);
    if (dec == 0) {
      cv.out(n, cv.op("round", {C::a("x", x)}));
      return;
    }
    double s = std::pow(10.0, static_cast<double>(dec));
    Var* r = cv.op("round", {C::a("x", bin(cv, "mul", x, cv.cs(s, C::dtype(x))))});
    cv.out(n, bin(cv, "real_div", r, cv.cs(s, C::dtype(x))));
  };
  t["aten.sign"] = [](C& cv, const json& n) { cv.out(n, cv.op("sign", {C::a("x", self(cv, n))})); };
  t["aten.neg"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    cv.out(n, bin(cv, "mul", x, cv.cs(-1, C::dtype(x))));
  };
  t["aten.reciprocal"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    DataType dt = float_out(cv, n, x);
    cv.out(n, bin(cv, "real_div", cv.cs(1, dt), cv.cast(x, dt)));
  };
  t["aten.square"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    cv.out(n, bin(cv, "mul", x, x));
  };
  t["aten.log2"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    DataType dt = float_out(cv, n, x);
    cv.out(n, bin(cv, "mul", cv.op("log", {C::a("x", cv.cast(x, dt))}), cv.cs(1.0 / std::log(2.0), dt)));
  };
  t["aten.log10"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    DataType dt = float_out(cv, n, x);
    cv.out(n, bin(cv, "mul", cv.op("log", {C::a("x", cv.cast(x, dt))}), cv.cs(1.0 / std::log(10.0), dt)));
  };
  t["aten.log1p"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    DataType dt = float_out(cv, n, x);
    cv.out(n, cv.op("log", {C::a("x", bin(cv, "add", cv.cast(x, dt), cv.cs(1, dt)))}));
  };
  t["aten.expm1"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    DataType dt = float_out(cv, n, x);
    cv.out(n, bin(cv, "sub", cv.op("exp", {C::a("x", cv.cast(x, dt))}), cv.cs(1, dt)));
  };
  t["aten.isnan"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    cv.out(n, bin(cv, "not_equal", x, x));
  };
  t["aten.isinf"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    cv.out(n, bin(cv, "equal", cv.op("abs", {C::a("x", x)}), cv.cs(INFINITY, C::dtype(x))));
  };

  // activations
  t["aten.gelu"] = [](C& cv, const json& n) {
    std::string ap = cv.s(n, "approximate", "none");
    cv.out(n, cv.op("gelu", {C::a("x", self(cv, n)), C::astr("mode", ap == "tanh" ? "TANH_APPROXIMATION" : "EXACT")}));
  };
  unary(t, "aten.silu", "silu");
  t["aten.relu6"] = [](C& cv, const json& n) { cv.out(n, cv.op("relu6", {C::a("x", self(cv, n))})); };
  t["aten.hardtanh"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    double lo = cv.f(n, "min_val", -1), hi = cv.f(n, "max_val", 1);
    if (lo == 0 && hi == 6) cv.out(n, cv.op("relu6", {C::a("x", x)}));
    else cv.out(n, clip(cv, x, lo, hi));
  };
  t["aten.hardsigmoid"] = [](C& cv, const json& n) {
    cv.out(n, cv.op("sigmoid_hard", {C::a("x", self(cv, n)), C::af32("alpha", 1.0 / 6), C::af32("beta", 0.5)}));
  };
  t["aten.hardswish"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    Var* h = cv.op("sigmoid_hard", {C::a("x", x), C::a("alpha", Value::scalar_float(C::dtype(x), 1.0 / 6)),
                                    C::a("beta", Value::scalar_float(C::dtype(x), 0.5))});
    cv.out(n, bin(cv, "mul", x, h));
  };
  t["aten.elu"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    double alpha = cv.f(n, "alpha", 1), scale = cv.f(n, "scale", 1), in_scale = cv.f(n, "input_scale", 1);
    if (in_scale != 1) x = bin(cv, "mul", x, cv.cs(in_scale, C::dtype(x)));
    Var* r = cv.op("elu", {C::a("x", x), C::a("alpha", Value::scalar_float(C::dtype(x), alpha))});
    if (scale != 1) r = bin(cv, "mul", r, cv.cs(scale, C::dtype(x)));
    cv.out(n, r);
  };
  t["aten.selu"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    const double alpha = 1.6732632423543772848170429916717, scale = 1.0507009873554804934193349852946;
    Var* r = cv.op("elu", {C::a("x", x), C::a("alpha", Value::scalar_float(C::dtype(x), alpha))});
    cv.out(n, bin(cv, "mul", r, cv.cs(scale, C::dtype(x))));
  };
  t["aten.celu"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    double alpha = cv.f(n, "alpha", 1);
    Var* xs = bin(cv, "real_div", x, cv.cs(alpha, C::dtype(x)));
    Var* e = cv.op("elu", {C::a("x", xs), C::a("alpha", Value::scalar_float(C::dtype(x), 1.0))});
    cv.out(n, bin(cv, "mul", e, cv.cs(alpha, C::dtype(x))));
  };
  t["aten.leaky_relu"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    cv.out(n, cv.op("leaky_relu", {C::a("x", x), C::a("alpha", Value::scalar_float(C::dtype(x), cv.f(n, "negative_slope", 0.01)))}));
  };
  t["aten.softplus"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    double beta = cv.f(n, "beta", 1), thr = cv.f(n, "threshold", 20);
    DataType dt = C::dtype(x);
    Var* bx = beta == 1 ? x : bin(cv, "mul", x, cv.cs(beta, dt));
    Var* sp = cv.op("softplus", {C::a("x", bx)});
    if (beta != 1) sp = bin(cv, "real_div", sp, cv.cs(beta, dt));
    // torch returns x where beta * x > threshold
    Var* lin = bin(cv, "greater", bx, cv.cs(thr, dt));
    cv.out(n, cv.op("select", {C::a("cond", lin), C::a("a", x), C::a("b", sp)}));
  };
  t["aten.mish"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    cv.out(n, bin(cv, "mul", x, cv.op("tanh", {C::a("x", cv.op("softplus", {C::a("x", x)}))})));
  };
  t["aten.log_sigmoid"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    Var* nx = bin(cv, "mul", x, cv.cs(-1, C::dtype(x)));
    cv.out(n, bin(cv, "mul", cv.op("softplus", {C::a("x", nx)}), cv.cs(-1, C::dtype(x))));
  };
  t["aten.log_sigmoid_forward"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    Var* nx = bin(cv, "mul", x, cv.cs(-1, C::dtype(x)));
    cv.out(n, bin(cv, "mul", cv.op("softplus", {C::a("x", nx)}), cv.cs(-1, C::dtype(x))), 0);
  };
  t["aten.prelu"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    Var* w = cv.tensor(n, "weight");
    // x >= 0 ? x : w * x, w per channel (axis 1) or a single value
    int r = cv.rank(n, x);
    Var* wb = w;
    if (r >= 2 && w->type()->has_rank() && w->type()->rank() == 1) {
      std::vector<int64_t> axes;
      for (int k = 2; k < r; ++k) axes.push_back(k - 1);
      if (!axes.empty()) wb = cv.op("expand_dims", {C::a("x", w), C::aints32("axes", axes)});
    }
    Var* neg = bin(cv, "mul", x, cv.cast(wb, C::dtype(x)));
    Var* pos = bin(cv, "greater_equal", x, cv.cs(0, C::dtype(x)));
    cv.out(n, cv.op("select", {C::a("cond", pos), C::a("a", x), C::a("b", neg)}));
  };
  t["aten._prelu_kernel"] = t["aten.prelu"];
  t["aten.glu"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    int64_t d = cv.axis(n, cv.i(n, "dim", -1), cv.rank(n, x));
    auto parts = cv.ops("split", {C::a("x", x), C::ai32("num_splits", 2), C::ai32("axis", d)});
    cv.out(n, bin(cv, "mul", parts[0], cv.op("sigmoid", {C::a("x", parts[1])})));
  };
  t["aten.threshold"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    DataType dt = C::dtype(x);
    Var* keep = bin(cv, "greater", x, cv.cs(cv.f(n, "threshold", 0), dt));
    cv.out(n, cv.op("select", {C::a("cond", keep), C::a("a", x), C::a("b", cv.cs(cv.f(n, "value", 0), dt))}));
  };


  // ---- more unary math and activations -------------------------------------------------------
  // atan2(y, x): atan(y / x) moved to the right half-plane's quadrant; y / x is +-inf for x == 0
  // (atan gives +-pi/2), and atan2(0, 0) is 0 as in torch.
  t["aten.atan2.default"] = [](C& cv, const json& n) {
    Var* y = self(cv, n);
    Var* x = cv.tensor(n, "other");
    DataType dt = float_out(cv, n, y);
    y = cv.cast(y, dt);
    x = cv.cast(x, dt);
    Var* q = cv.op("atan", {C::a("x", bin(cv, "real_div", y, x))});
    Var* zero = cv.cs(0, dt);
    Var* adj = sel(cv, bin(cv, "less", x, zero),
                   sel(cv, bin(cv, "greater_equal", y, zero), cv.cs(M_PI, dt), cv.cs(-M_PI, dt)), zero);
    Var* r = bin(cv, "add", q, adj);
    Var* both0 = bin(cv, "logical_and", bin(cv, "equal", x, zero), bin(cv, "equal", y, zero));
    cv.out(n, sel(cv, both0, zero, r));
  };
  t["aten.arctan2.default"] = t["aten.atan2.default"];
  t["aten.hypot.default"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    DataType dt = float_out(cv, n, x);
    x = cv.cast(x, dt);
    Var* y = cv.cast(cv.tensor(n, "other"), dt);
    cv.out(n, cv.op("sqrt", {C::a("x", bin(cv, "add", bin(cv, "mul", x, x), bin(cv, "mul", y, y)))}));
  };
  // acosh(x) = log(x + sqrt(x^2 - 1)); asinh(x) = sign(x) log(|x| + sqrt(x^2 + 1)) (odd, so
  // large negative x does not cancel)
  t["aten.acosh"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    DataType dt = float_out(cv, n, x);
    x = cv.cast(x, dt);
    Var* r = cv.op("sqrt", {C::a("x", bin(cv, "sub", bin(cv, "mul", x, x), cv.cs(1, dt)))});
    cv.out(n, cv.op("log", {C::a("x", bin(cv, "add", x, r))}));
  };
  t["aten.asinh"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    DataType dt = float_out(cv, n, x);
    x = cv.cast(x, dt);
    Var* ax = cv.op("abs", {C::a("x", x)});
    Var* r = cv.op("sqrt", {C::a("x", bin(cv, "add", bin(cv, "mul", x, x), cv.cs(1, dt)))});
    Var* l = cv.op("log", {C::a("x", bin(cv, "add", ax, r))});
    cv.out(n, bin(cv, "mul", cv.op("sign", {C::a("x", x)}), l));
  };
  t["aten.arccosh"] = t["aten.acosh"];
  t["aten.arcsinh"] = t["aten.asinh"];
  t["aten.erfc"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    DataType dt = float_out(cv, n, x);
    cv.out(n, bin(cv, "sub", cv.cs(1, dt), cv.op("erf", {C::a("x", cv.cast(x, dt))})));
  };
  t["aten.special_erfc"] = t["aten.erfc"];
  // erfinv: M. Giles' single-precision approximation ("Approximating the erfinv function", GPU
  // Computing Gems, 2011; relative error below 3e-7 against torch over (-1, 1)), a polynomial in
  // w = -log(1 - x^2) - 2.5 for w < 5, else in sqrt(w) - 3. +-1 give +-inf and |x| > 1 NaN, as
  // torch (MIL's log would keep log(0) finite).
  t["aten.erfinv"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    DataType dt = float_out(cv, n, x);
    x = cv.cast(x, dt);
    Var* one_m = bin(cv, "sub", cv.cs(1, dt), x);
    Var* one_p = bin(cv, "add", cv.cs(1, dt), x);
    Var* w = bin(cv, "mul", cv.op("log", {C::a("x", bin(cv, "mul", one_m, one_p))}), cv.cs(-1, dt));
    auto horner = [&](Var* t, std::initializer_list<double> cs) {
      auto it = cs.begin();
      Var* p = cv.cs(*it++, dt);
      for (; it != cs.end(); ++it) p = bin(cv, "add", bin(cv, "mul", p, t), cv.cs(*it, dt));
      return p;
    };
    Var* central = horner(bin(cv, "sub", w, cv.cs(2.5, dt)),
                          {2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                           -0.00125372503, -0.00417768164, 0.246640727, 1.50140941});
    Var* tail = horner(bin(cv, "sub", cv.op("sqrt", {C::a("x", w)}), cv.cs(3, dt)),
                       {-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                        -0.0076224613, 0.00943887047, 1.00167406, 2.83297682});
    Var* r = bin(cv, "mul", sel(cv, bin(cv, "less", w, cv.cs(5, dt)), central, tail), x);
    Var* ax = cv.op("abs", {C::a("x", x)});
    r = sel(cv, bin(cv, "equal", ax, cv.cs(1, dt)), bin(cv, "mul", x, cv.cs(INFINITY, dt)), r);
    cv.out(n, sel(cv, bin(cv, "greater", ax, cv.cs(1, dt)), cv.cs(NAN, dt), r));
  };
  t["aten.special_erfinv"] = t["aten.erfinv"];
  t["aten.sgn"] = t["aten.sign"];  // real tensors: sgn is sign
  // signbit: x < 0, or a negative zero (1 / -0 is -inf)
  t["aten.signbit"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    DataType dt = C::dtype(x);
    if (dt == DataType::Bool) {
      cv.out(n, bin(cv, "not_equal", x, x));  // all false
      return;
    }
    Var* neg = bin(cv, "less", x, cv.cs(0, dt));
    if (is_float(dt)) {
      Var* negzero = bin(cv, "logical_and", bin(cv, "equal", x, cv.cs(0, dt)),
                         bin(cv, "less", bin(cv, "real_div", cv.cs(1, dt), x), cv.cs(0, dt)));
      neg = bin(cv, "logical_or", neg, negzero);
    }
    cv.out(n, neg);
  };
  t["aten.frac"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    Var* tr = bin(cv, "mul", cv.op("sign", {C::a("x", x)}), cv.op("floor", {C::a("x", cv.op("abs", {C::a("x", x)}))}));
    cv.out(n, bin(cv, "sub", x, tr));
  };
  t["aten.hardshrink"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    DataType dt = C::dtype(x);
    Var* keep = bin(cv, "greater", cv.op("abs", {C::a("x", x)}), cv.cs(cv.f(n, "lambd", 0.5), dt));
    cv.out(n, sel(cv, keep, x, cv.cs(0, dt)));
  };
  t["aten.softshrink"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    DataType dt = C::dtype(x);
    double l = cv.f(n, "lambd", 0.5);
    Var* hi = bin(cv, "greater", x, cv.cs(l, dt));
    Var* lo = bin(cv, "less", x, cv.cs(-l, dt));
    cv.out(n, sel(cv, hi, bin(cv, "sub", x, cv.cs(l, dt)),
                  sel(cv, lo, bin(cv, "add", x, cv.cs(l, dt)), cv.cs(0, dt))));
  };
  // rrelu in eval mode is leaky_relu with the mean slope; in training it draws random slopes
  t["aten.rrelu"] = [](C& cv, const json& n) {
    if (cv.bo(n, "training", false)) cv.fail(n, "rrelu in training mode draws random slopes; export the model in eval()");
    Var* x = self(cv, n);
    double slope = (cv.f(n, "lower", 1.0 / 8) + cv.f(n, "upper", 1.0 / 3)) / 2;
    cv.out(n, cv.op("leaky_relu", {C::a("x", x), C::a("alpha", Value::scalar_float(C::dtype(x), slope))}));
  };
  t["aten.rrelu_with_noise"] = t["aten.rrelu"];
  // the functional form (core ATen) returns (out, noise); in eval the noise is left as it was
  t["aten.rrelu_with_noise_functional"] = [](C& cv, const json& n) {
    if (cv.bo(n, "training", false)) cv.fail(n, "rrelu in training mode draws random slopes; export the model in eval()");
    Var* x = self(cv, n);
    double slope = (cv.f(n, "lower", 1.0 / 8) + cv.f(n, "upper", 1.0 / 3)) / 2;
    cv.out(n, cv.op("leaky_relu", {C::a("x", x), C::a("alpha", Value::scalar_float(C::dtype(x), slope))}), 0);
    if (C::output_names(n).size() > 1) cv.out(n, cv.op("identity", {C::a("x", cv.tensor(n, "noise"))}), 1);
  };
  // nan_to_num: NaN -> nan (0), +inf -> posinf (the dtype's max), -inf -> neginf (its lowest)
  t["aten.nan_to_num"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    DataType dt = C::dtype(x);
    if (!is_float(dt)) {
      cv.out(n, cv.op("identity", {C::a("x", x)}));
      return;
    }
    double big = dt == DataType::Float16 ? 65504.0 : static_cast<double>(std::numeric_limits<float>::max());
    double nan = cv.has(n, "nan") ? cv.f(n, "nan", 0) : 0.0;
    double pinf = cv.has(n, "posinf") ? cv.f(n, "posinf", big) : big;
    double ninf = cv.has(n, "neginf") ? cv.f(n, "neginf", -big) : -big;
    Var* r = sel(cv, bin(cv, "equal", x, cv.cs(INFINITY, dt)), cv.cs(pinf, dt), x);
    r = sel(cv, bin(cv, "equal", x, cv.cs(-INFINITY, dt)), cv.cs(ninf, dt), r);
    cv.out(n, sel(cv, bin(cv, "not_equal", x, x), cv.cs(nan, dt), r));
  };
  // isin(elements, test_elements): compare every element with every test element
  t["aten.isin"] = [](C& cv, const json& n) {
    Var* e;
    Var* te;
    if (C::has(n, "element")) {  // isin.Scalar_Tensor
      te = cv.tensor(n, "test_elements");
      e = cv.scalar_or_tensor(n, "element", C::dtype(te));
    } else {
      e = cv.tensor(n, "elements");
      te = C::is_number(n, "test_element") ? cv.scalar_or_tensor(n, "test_element", C::dtype(e))
                                            : cv.tensor(n, "test_elements");
    }
    DataType dt = C::promote(e, te);
    e = cv.cast(e, dt);
    te = cv.op("reshape", {C::a("x", cv.cast(te, dt)), C::aints32("shape", {-1})});
    Var* hits = count_true(cv, bin(cv, "equal", trailing_axis(cv, e), te));
    Var* r = bin(cv, "greater", hits, cv.cs(0, DataType::Int32));
    if (cv.bo(n, "invert", false)) r = cv.op("logical_not", {C::a("x", r)});
    cv.out(n, r);
  };
  // bucketize(x, boundaries): the number of boundaries below x (right=False: b < x; right=True:
  // b <= x), which is the index torch returns for sorted boundaries
  t["aten.bucketize"] = [](C& cv, const json& n) {
    Var* b = cv.tensor(n, "boundaries");
    Var* x = C::is_number(n, "self") ? cv.scalar_or_tensor(n, "self", C::dtype(b)) : cv.tensor(n, "self");
    DataType dt = C::promote(x, b);
    Var* xe = trailing_axis(cv, cv.cast(x, dt));
    Var* bb = cv.cast(b, dt);
    bool right = cv.bo(n, "right", false);
    cv.out(n, count_true(cv, bin(cv, right ? "less_equal" : "less", bb, xe)));
  };
  // searchsorted(sorted_sequence, values): per row of the sequence's leading dims, the number of
  // sequence elements below each value (side "right" / right=True counts equal ones too)
  t["aten.searchsorted"] = [](C& cv, const json& n) {
    if (C::has(n, "sorter")) cv.fail(n, "searchsorted with a sorter is not supported");
    Var* s = cv.tensor(n, "sorted_sequence");
    Var* v = C::is_number(n, "self") ? cv.scalar_or_tensor(n, "self", C::dtype(s)) : cv.tensor(n, "self");
    DataType dt = C::promote(s, v);
    s = cv.cast(s, dt);
    v = cv.cast(v, dt);
    bool right = cv.bo(n, "right", false) || cv.s(n, "side", "left") == "right";
    int rs = cv.rank(n, s);
    Var* se = rs > 1 ? cv.op("expand_dims", {C::a("x", s), C::aints32("axes", {-2})}) : s;  // (..., 1, N)
    Var* cmp = bin(cv, right ? "less_equal" : "less", se, trailing_axis(cv, v));           // (..., M, N)
    cv.out(n, count_true(cv, cmp));
  };

  // clamp family
  t["aten.clamp"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    if (auto od = cv.out_dtype(n)) x = cv.cast(x, *od);
    if (C::has(n, "min") && !C::is_number(n, "min")) {
      // clamp.Tensor
      Var* r = x;
      if (Var* lo = cv.opt_tensor(n, "min")) r = bin(cv, "maximum", r, cv.cast(lo, C::dtype(x)));
      if (Var* hi = cv.opt_tensor(n, "max")) r = bin(cv, "minimum", r, cv.cast(hi, C::dtype(x)));
      cv.out(n, r == x ? cv.op("identity", {C::a("x", x)}) : r);
      return;
    }
    // a bound may be a symbolic size (decomposed upsampling clamps indices to s - 1)
    auto symbolic = [&](const char* k) {
      const json* a = C::arg(n, k);
      return a && a->contains("as_sym_int") && !cv.sym_dim(*a)->is_const();
    };
    if (symbolic("min") || symbolic("max")) {
      Var* r = x;
      if (C::has(n, "min")) r = bin(cv, "maximum", r, cv.scalar_or_tensor(n, "min", C::dtype(x)));
      if (C::has(n, "max")) r = bin(cv, "minimum", r, cv.scalar_or_tensor(n, "max", C::dtype(x)));
      cv.out(n, r);
      return;
    }
    std::optional<double> lo, hi;
    if (C::has(n, "min")) lo = cv.f(n, "min", 0);
    if (C::has(n, "max")) hi = cv.f(n, "max", 0);
    Var* r = clip(cv, x, lo, hi);
    cv.out(n, r == x ? cv.op("identity", {C::a("x", x)}) : r);
  };
  t["aten.clip"] = t["aten.clamp"];
  t["aten.clamp_min"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    if (C::is_number(n, "min") && !C::arg(n, "min")->contains("as_sym_int")) cv.out(n, clip(cv, x, cv.f(n, "min", 0), std::nullopt));
    else cv.out(n, bin(cv, "maximum", x, cv.scalar_or_tensor(n, "min", C::dtype(x))));
  };
  t["aten.clamp_max"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    if (C::is_number(n, "max") && !C::arg(n, "max")->contains("as_sym_int")) cv.out(n, clip(cv, x, std::nullopt, cv.f(n, "max", 0)));
    else cv.out(n, bin(cv, "minimum", x, cv.scalar_or_tensor(n, "max", C::dtype(x))));
  };

  // where / masked_fill
  t["aten.where"] = [](C& cv, const json& n) {
    Var* cond = cv.cast(cv.tensor(n, "condition"), DataType::Bool);
    if (!C::has(n, "self") && !C::has(n, "other")) cv.fail(n, "where(condition) (nonzero) is not supported");
    DataType dt = DataType::Float32;
    if (auto od = cv.out_dtype(n)) dt = *od;
    Var* a = cv.scalar_or_tensor(n, "self", dt);
    Var* b2 = cv.scalar_or_tensor(n, "other", dt);
    cv.out(n, cv.op("select", {C::a("cond", cond), C::a("a", a), C::a("b", b2)}));
  };
  t["aten.masked_fill"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    Var* mask = cv.cast(cv.tensor(n, "mask"), DataType::Bool);
    Var* v = cv.scalar_or_tensor(n, "value", C::dtype(x));
    cv.out(n, cv.op("select", {C::a("cond", mask), C::a("a", v), C::a("b", x)}));
  };
  t["aten.lerp"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    Var* e = cv.cast(cv.tensor(n, "end"), C::dtype(x));
    Var* w = cv.scalar_or_tensor(n, "weight", C::dtype(x));
    cv.out(n, bin(cv, "add", x, bin(cv, "mul", w, bin(cv, "sub", e, x))));
  };
  t["aten.addcmul"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    Var* p = bin(cv, "mul", cv.cast(cv.tensor(n, "tensor1"), C::dtype(x)), cv.cast(cv.tensor(n, "tensor2"), C::dtype(x)));
    double v = cv.f(n, "value", 1);
    if (v != 1) p = bin(cv, "mul", p, cv.cs(v, C::dtype(x)));
    cv.out(n, bin(cv, "add", x, p));
  };
  t["aten.addcdiv"] = [](C& cv, const json& n) {
    Var* x = self(cv, n);
    Var* p = bin(cv, "real_div", cv.cast(cv.tensor(n, "tensor1"), C::dtype(x)), cv.cast(cv.tensor(n, "tensor2"), C::dtype(x)));
    double v = cv.f(n, "value", 1);
    if (v != 1) p = bin(cv, "mul", p, cv.cs(v, C::dtype(x)));
    cv.out(n, bin(cv, "add", x, p));
  };
}

}  // namespace torch_detail
}  // namespace milkit
