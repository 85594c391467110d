// ATen random ops as MIL's random_uniform / random_normal / random_bernoulli /
// random_categorical, each drawing afresh on every prediction (seed -1). torch's generator is not
// reproduced: the values follow the same distributions, not the same draws.
#include <cstdint>
#include <string>
#include <vector>

#include "ops_common.h"

namespace milkit {
namespace torch_detail {

namespace {

Var* uniform(C& cv, Var* shape, double lo, double hi, DataType dt) {
  return cv.op("random_uniform", {C::a("shape", shape), C::a("low", Value::scalar_float(dt, lo)),
                                  C::a("high", Value::scalar_float(dt, hi)), C::ai32("seed", -1)});
}

Var* normal(C& cv, Var* shape, double mean, double std, DataType dt) {
  return cv.op("random_normal",
               {C::a("shape", shape), C::a("mean", Value::scalar_float(dt, mean)),
                C::a("stddev", Value::scalar_float(dt, std)), C::ai32("seed", -1)});
}

// the compute dtype of a random float tensor (ints draw in fp32 and are cast)
DataType draw_dtype(DataType dt) { return is_float(dt) ? dt : DataType::Float32; }

// the output shape: of `self` (the *_like and in-place forms) or the `size` argument
Var* out_shape(C& cv, const json& n) {
  if (Var* x = cv.opt_tensor(n, "self")) return shape_of_var(cv, x);
  return size_shape(cv, cv.dims(n, "size"));
}

Var* like_self(C& cv, const json& n) { return cv.opt_tensor(n, "self"); }

void rand_op(C& cv, const json& n) {
  DataType dt = factory_dtype(cv, n, like_self(cv, n), DataType::Float32);
  cv.out(n, cv.cast(uniform(cv, out_shape(cv, n), 0, 1, draw_dtype(dt)), dt));
}

void randn_op(C& cv, const json& n) {
  DataType dt = factory_dtype(cv, n, like_self(cv, n), DataType::Float32);
  cv.out(n, cv.cast(normal(cv, out_shape(cv, n), 0, 1, draw_dtype(dt)), dt));
}

// uniform integers in [low, high): floor of a uniform draw in fp32 (below high)
void randint_op(C& cv, const json& n) {
  DataType dt = factory_dtype(cv, n, like_self(cv, n), DataType::Int32);
  double lo = cv.number(n, "low", 0), hi = cv.number(n, "high", 0);
  if (hi <= lo)
    cv.fail(n, "randint needs low < high, got [" + std::to_string(lo) + ", " + std::to_string(hi) +
                   ")");
  if (hi - lo > 16777216.0)
    cv.fail(n, "randint over more than 2^24 values: Core ML draws them in fp32");
  Var* u = cv.op("floor", {C::a("x", uniform(cv, out_shape(cv, n), lo, hi, DataType::Float32))});
  cv.out(n, cv.cast(u, dt));
}

// bernoulli(self) draws with the probabilities in self; bernoulli(self, p) with p (a float or a
// tensor) in self's shape and dtype
void bernoulli_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  DataType dt = factory_dtype(cv, n, x, DataType::Float32);
  DataType fd = draw_dtype(dt);
  Var* shape = shape_of_var(cv, x);
  if (C::is_number(n, "p")) {
    Var* r =
        cv.op("random_bernoulli", {C::a("shape", shape), C::ai32("seed", -1),
                                   C::a("prob", Value::scalar_float(fd, cv.number(n, "p", 0.5)))});
    return cv.out(n, cv.cast(r, dt));
  }
  Var* p = cv.cast(C::has(n, "p") ? cv.tensor(n, "p") : x, fd);
  Var* u = uniform(cv, shape, 0, 1, fd);
  cv.out(n, cv.cast(bin(cv, "less", u, p), dt));
}

// normal(mean, std) with each a float or a tensor, normal(mean, std, size), normal_(self, mean,
// std)
void normal_op(C& cv, const json& n) {
  Var* x = like_self(cv, n);
  DataType dt = factory_dtype(cv, n, x, DataType::Float32);
  bool num = C::is_number(n, "mean") || !C::has(n, "mean"),
       snum = C::is_number(n, "std") || !C::has(n, "std");
  if (x || C::has(n, "size") || (num && snum))
    return cv.out(n, normal(cv, out_shape(cv, n), cv.number(n, "mean", 0), cv.number(n, "std", 1),
                            draw_dtype(dt)));
  Var* mean = num ? cv.cs(cv.number(n, "mean", 0), dt) : cv.cast(cv.tensor(n, "mean"), dt);
  Var* std = snum ? cv.cs(cv.number(n, "std", 1), dt) : cv.cast(cv.tensor(n, "std"), dt);
  Var* z = normal(cv, shape_of_var(cv, bin(cv, "add", mean, std)), 0, 1, dt);
  cv.out(n, bin(cv, "add", mean, bin(cv, "mul", z, std)));
}

// uniform_(self, from, to): self's shape and dtype
void uniform_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  DataType dt = factory_dtype(cv, n, x, DataType::Float32);
  Var* u = uniform(cv, shape_of_var(cv, x), cv.number(n, "from", 0), cv.number(n, "to", 1),
                   draw_dtype(dt));
  cv.out(n, cv.cast(u, dt));
}

// multinomial(self, num_samples, replacement): random_categorical over self's last axis (weights,
// normalized); without replacement only one sample per row is the same draw
void multinomial_op(C& cv, const json& n) {
  Var* x = self(cv, n);
  int64_t k = cv.i(n, "num_samples", 1);
  if (!cv.bo(n, "replacement", false) && k > 1)
    cv.fail(n, "multinomial without replacement of " + std::to_string(k) +
                   " samples: Core ML's random_categorical draws with replacement (pass "
                   "replacement=True)");
  Var* p = cv.cast(x, DataType::Float32);
  Var* r = cv.op("random_categorical",
                 {C::a("x", p), C::astr("mode", "probs"), C::ai32("size", k), C::ai32("seed", -1)});
  cv.out(n, cv.cast(r, factory_dtype(cv, n, nullptr, DataType::Int32)));
}

// randperm(n): the order that sorts n uniform draws, a uniformly random permutation
void randperm_op(C& cv, const json& n) {
  Dim d = cv.sym_dim(*C::arg(n, "n"));
  Var* u = uniform(cv, size_shape(cv, {d}), 0, 1, DataType::Float32);
  Var* r = cv.op("argsort", {C::a("x", u), C::ai32("axis", 0)});
  cv.out(n, cv.cast(r, factory_dtype(cv, n, nullptr, DataType::Int32)));
}

}  // namespace

void register_random(OpTable& t) {
  t.on({"aten.rand", "aten.rand_like"}, rand_op);
  t.on({"aten.randn", "aten.randn_like"}, randn_op);
  t.on({"aten.randint", "aten.randint_like"}, randint_op);
  t.on("aten.bernoulli", bernoulli_op);
  t.on({"aten.normal", "aten.normal_functional"}, normal_op);
  t.on("aten.uniform", uniform_op);
  t.on("aten.multinomial", multinomial_op);
  t.on("aten.randperm", randperm_op);
}

}  // namespace torch_detail
}  // namespace milkit
