// Compressed weights kept packed by the interpreter: a plan that decompresses a constexpr chain
// inside the linear kernel gives the bits of a plan that decompresses it when it is made, and
// holds the packed bytes only.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/exec/plan.h"

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
