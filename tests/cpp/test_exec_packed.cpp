// Compressed weights kept packed by the interpreter: a plan that decompresses a constexpr chain
// inside the linear kernel gives the bits of a plan that decompresses it when it is made, and
// holds the packed bytes only.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/exec/plan.h"
#include "milkit/exec/threads.h"

using namespace milkit;

namespace {

/// x [rows, 64] -> linear with a weight of int4 data [600, 64] shifted and scaled per block of 8
/// inputs (600 outputs: several panels of a matrix-vector product).
std::shared_ptr<Function> int4_linear(int64_t rows) {
  auto f = std::make_shared<Function>(Target::iOS18);
  Var* x = f->add_input("x", f->ctx().tensor(DataType::Float32, std::vector<int64_t>{rows, 64}));
  Builder b(*f);
  auto c = [&](Value v) { return b.add_const(std::make_shared<const Value>(std::move(v))); };
  std::vector<int64_t> q(600 * 64), off(600 * 8);
  std::vector<double> scale(600 * 8);
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<int64_t>((i * 7919) % 16) - 8;
  for (size_t i = 0; i < scale.size(); ++i) {
    scale[i] = 0.001 + 0.0007 * static_cast<double>(i % 13);
    off[i] = static_cast<int64_t>(i % 5) - 2;
  }
  Var* w = b.op("constexpr_blockwise_shift_scale",
                {{"data", c(Value::from_ints(DataType::Int4, {600, 64}, q))},
                 {"scale", c(Value::from_doubles(DataType::Float32, {600, 8}, scale))},
                 {"offset", c(Value::from_ints(DataType::Int4, {600, 8}, off))}});
  f->body().set_outputs({b.op("linear", {{"x", x}, {"weight", w}})});
  return f;
}

Tensor input(int64_t rows) {
  Tensor t = Tensor::empty(DataType::Float32, {rows, 64});
  for (int64_t i = 0; i < t.numel(); ++i)
    t.mutable_data<float>()[i] = static_cast<float>((i * 37) % 101) / 50.0f - 1;
  return t;
}

}  // namespace

TEST_CASE("exec: an int4 blockwise-quantized linear weight stays packed and gives the same bits") {
  for (int64_t rows : {1, 3}) {
    auto f = int4_linear(rows);
    Plan packed(f), dense(f, nullptr, false);
    REQUIRE(packed.packed_weight_count() == 1);
    REQUIRE(dense.packed_weight_count() == 0);
    // int4 data packed two per byte, the fp32 scale and int4 offset tables held as floats
    CHECK(packed.packed_weight_bytes() == 600 * 64 / 2 + 2 * 600 * 8 * 4);
    CHECK(packed.packed_weight_dense_bytes() == 600 * 64 * 4);
    CHECK(packed.const_bytes() == 0);
    CHECK(dense.const_bytes() == 600 * 64 * 4);
    Tensor a = packed.run({{"x", input(rows)}})[0].second,
           b = dense.run({{"x", input(rows)}})[0].second;
    REQUIRE(a.shape() == b.shape());
    CHECK(std::memcmp(a.bytes(), b.bytes(), a.nbytes()) == 0);
  }
}

namespace {

/// A constant of `dt` and `shape` with values in [-1, 1) from a fixed sequence.
Var* pseudo_const(Builder& b, DataType dt, std::vector<int64_t> shape, int64_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = static_cast<double>((i * 7919 + seed * 104729) % 2003) / 1001.5 - 1;
  return b.add_const(std::make_shared<const Value>(Value::from_doubles(dt, std::move(shape), v)));
}

Tensor pseudo_input(DataType dt, std::vector<int64_t> shape) {
  Tensor t = Tensor::empty(DataType::Float32, shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.mutable_data<float>()[i] = static_cast<float>((i * 37) % 101) / 50.0f - 1;
  return cast_tensor(t, dt);
}

/// x [rows, K] fp16 -> linear with an fp16 weight [N, K], then matmul with an fp16 y [N, N2]
/// (stored [K, N]: the layout of an imported MatMul).
std::shared_ptr<Function> fp16_products(int64_t rows, int64_t K, int64_t N, int64_t N2) {
  auto f = std::make_shared<Function>(Target::iOS17);
  Var* x = f->add_input("x", f->ctx().tensor(DataType::Float16, std::vector<int64_t>{rows, K}));
  Builder b(*f);
  Var* h = b.op("linear", {{"x", x}, {"weight", pseudo_const(b, DataType::Float16, {N, K}, 1)}});
  Var* y = b.op("matmul", {{"x", h}, {"y", pseudo_const(b, DataType::Float16, {N, N2}, 2)}});
  f->body().set_outputs({y});
  return f;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.bytes(), b.bytes(), a.nbytes()) == 0;
}

}  // namespace

TEST_CASE("exec: large fp16 weights are read in place and give the bits of their fp32 copies") {
  // odd sizes: tails of the 32- and 8-wide sums, panels and column blocks that do not divide
  for (int64_t rows : {1, 3, 4, 7}) {
    auto f = fp16_products(rows, 1027, 301, 259);
    Plan fast(f), ref(f, nullptr, false);
    REQUIRE(fast.in_place_weight_count() == 2);
    REQUIRE(ref.in_place_weight_count() == 0);
    CHECK(fast.in_place_weight_bytes() == (301 * 1027 + 301 * 259) * 2);
    // fp32 copies only of the small constants (the linear's zero bias)
    CHECK(fast.const_bytes() <= 301 * 4);
    CHECK(ref.const_bytes() >= (301 * 1027 + 301 * 259) * 4);
    Tensor x = pseudo_input(DataType::Float16, {rows, 1027});
    Tensor a = fast.run({{"x", x}})[0].second, b = ref.run({{"x", x}})[0].second;
    CHECK(same_bits(a, b));
  }
}

TEST_CASE("exec: matrix-vector products give the same bits on any number of threads") {
  auto f = fp16_products(2, 4099, 1031, 517);
  Plan fast(f);
  Tensor x = pseudo_input(DataType::Float16, {2, 4099});
  set_num_threads(1);
  Tensor one = fast.run({{"x", x}})[0].second;
  set_num_threads(2);
  Tensor two = fast.run({{"x", x}})[0].second;
  set_num_threads(0);
  CHECK(same_bits(one, two));
}

TEST_CASE("exec: the weight cache keeps widened weights within MILKIT_WEIGHT_CACHE_MB") {
  const char* old = std::getenv("MILKIT_WEIGHT_CACHE_MB");
  const std::string saved = old ? old : "";
  const size_t before = weight_cache_bytes();
  // two adds reading large fp16 constants in place: each is widened for its kernel
  auto f = std::make_shared<Function>(Target::iOS17);
  Var* x = f->add_input("x", f->ctx().tensor(DataType::Float16, std::vector<int64_t>{300, 512}));
  Var* y = f->add_input("y", f->ctx().tensor(DataType::Float16, std::vector<int64_t>{300, 128}));
  Builder b(*f);
  Var* s1 = b.op("add", {{"x", x}, {"y", pseudo_const(b, DataType::Float16, {300, 512}, 1)}});
  Var* s2 = b.op("add", {{"x", y}, {"y", pseudo_const(b, DataType::Float16, {300, 128}, 2)}});
  f->body().set_outputs({s1, s2});
  const std::map<std::string, Tensor> in = {{"x", pseudo_input(DataType::Float16, {300, 512})},
                                            {"y", pseudo_input(DataType::Float16, {300, 128})}};
  auto same = [&](const std::vector<std::pair<std::string, Tensor>>& a,
                  const std::vector<std::pair<std::string, Tensor>>& w) {
    return same_bits(a[0].second, w[0].second) && same_bits(a[1].second, w[1].second);
  };
  const auto want = Plan(f, nullptr, false).run(in);
  {
    Plan fast(f);
    REQUIRE(fast.in_place_weight_count() == 2);
    setenv("MILKIT_WEIGHT_CACHE_MB", "0", 1);
    CHECK(same(fast.run(in), want));
    CHECK(weight_cache_bytes() == 0);
    setenv("MILKIT_WEIGHT_CACHE_MB", "100", 1);
    CHECK(same(fast.run(in), want));
    CHECK(weight_cache_bytes() == (300 * 512 + 300 * 128) * 4);
    CHECK(same(fast.run(in), want));  // from the cache
    // a limit between the two weights keeps the one used last (the second add's)
    setenv("MILKIT_WEIGHT_CACHE_MB", "0.3", 1);
    CHECK(same(fast.run(in), want));
    CHECK(weight_cache_bytes() == 300 * 128 * 4);
  }
  CHECK(weight_cache_bytes() == 0);  // a plan's weights leave the cache with it
  if (old)
    setenv("MILKIT_WEIGHT_CACHE_MB", saved.c_str(), 1);
  else
    unsetenv("MILKIT_WEIGHT_CACHE_MB");
  CHECK(weight_cache_bytes() <= before);
}

TEST_CASE("exec: other readers of a large fp16 constant, and gathers from an fp16 table") {
  auto f = std::make_shared<Function>(Target::iOS17);
  Var* x = f->add_input("x", f->ctx().tensor(DataType::Float16, std::vector<int64_t>{300, 257}));
  Var* i = f->add_input("i", f->ctx().tensor(DataType::Int32, std::vector<int64_t>{5}));
  Builder b(*f);
  Var* table = pseudo_const(b, DataType::Float16, {1000, 257}, 3);
  Var* sum = b.op("add", {{"x", x}, {"y", pseudo_const(b, DataType::Float16, {300, 257}, 4)}});
  Var* rows = b.op("gather", {{"x", table}, {"indices", i}});
  f->body().set_outputs({sum, rows});
  Plan fast(f), ref(f, nullptr, false);
  CHECK(fast.in_place_weight_count() == 1);  // the add's operand; the gather moves fp16 as is
  CHECK(fast.const_bytes() == 0);
  Tensor idx = Tensor::empty(DataType::Int32, {5});
  for (int k = 0; k < 5; ++k) idx.mutable_data<int32_t>()[k] = (k * 397) % 1000;
  std::map<std::string, Tensor> in = {{"x", pseudo_input(DataType::Float16, {300, 257})},
                                      {"i", idx}};
  auto a = fast.run(in), r = ref.run(in);
  CHECK(same_bits(a[0].second, r[0].second));
  CHECK(same_bits(a[1].second, r[1].second));
}
