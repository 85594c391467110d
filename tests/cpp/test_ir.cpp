// IR, builder and verifier: naming, use lists, erasure, printing, located errors.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>

#include "milkit/builder/builder.h"
#include "milkit/ir/verify.h"
#include "milkit/serde/text.h"
#include "milkit/types/error.h"

using namespace milkit;

namespace {
std::shared_ptr<Function> make_fn(Target t = Target::iOS17) {
  auto f = std::make_shared<Function>(t);
  Context& c = f->ctx();
  f->add_input("x", c.tensor(DataType::Float32,
                             std::vector<Dim>{c.constant(2), c.symbol(Symbol::create("S"))}));
  return f;
}
}  // namespace

TEST_CASE("builder: coremltools naming and implicit consts", "[ir]") {
  auto f = make_fn();
  Builder b(*f);
  Var* x = f->inputs()[0];
  std::vector<Arg> args{Builder::arg("x", x),
                        Builder::arg("y", Value::scalar_float(DataType::Float32, 2.0))};
  Var* a = b.create("add", args).at(0);
  CHECK(a->name() == "add_0");
  REQUIRE(a->op()->input1("y")->name() == "add_0_y_0");
  CHECK(a->op()->input1("y")->op()->op_type() == "const");
  Var* a2 = b.op("add", {{"x", a}, {"y", x}});
  CHECK(a2->name() == "add_1");
  Var* m = b.op("mul", {{"x", a2}, {"y", a}}, "scaled");
  CHECK(m->name() == "scaled");
  CHECK(a->uses().size() == 2);
  CHECK(x->uses().size() == 2);
  f->body().set_outputs({m});
  CHECK_NOTHROW(verify(*f, "main"));
  std::string text = function_to_text(*f, "main");
  CHECK(text.find("%add_0: (2, S, fp32)(Tensor) = add(x=%x, y=2.0, name=\"add_0\")") !=
        std::string::npos);
  CHECK(text.find("} -> (%scaled)") != std::string::npos);
}

TEST_CASE("builder: binary ops type a scalar, same-type or broadcast operand alike", "[ir]") {
  // the inference short-cuts (result is an operand's interned type) against full broadcasting
  auto f = make_fn();
  Context& c = f->ctx();
  Builder b(*f);
  Var* x = f->inputs()[0];  // (2, S) fp32
  auto scalar = [&](double v) {
    return b.add_const(std::make_shared<const Value>(Value::scalar_float(DataType::Float32, v)));
  };
  Var* row = b.add_const(
      std::make_shared<const Value>(Value::from_doubles(DataType::Float32, {1, 1}, {3.0})));
  Var* s1 = scalar(1.0);
  Var* s2 = scalar(2.0);
  CHECK(b.op("add", {{"x", x}, {"y", s1}})->type() == x->type());
  CHECK(b.op("mul", {{"x", s1}, {"y", x}})->type() == x->type());
  CHECK(b.op("sub", {{"x", x}, {"y", x}})->type() == x->type());
  Var* ss = b.op("add", {{"x", s1}, {"y", s2}});
  CHECK(ss->type() == c.scalar(DataType::Float32));
  CHECK(ss->value());                                               // folded
  CHECK(b.op("add", {{"x", row}, {"y", x}})->type() == x->type());  // (1, 1) with (2, S)
  Var* three = b.add_const(std::make_shared<const Value>(
      Value::from_doubles(DataType::Float32, {3, 1, 1}, {1.0, 2.0, 3.0})));
  CHECK(b.op("add", {{"x", x}, {"y", three}})->type()->str() == "(3, 2, S, fp32)");
  // comparisons give bool of the broadcast shape, never an operand's type
  CHECK(b.op("less", {{"x", x}, {"y", s1}})->type()->str() == "(2, S, bool)");
  CHECK(b.op("equal", {{"x", x}, {"y", x}})->type()->str() == "(2, S, bool)");
  CHECK(b.op("greater", {{"x", s1}, {"y", s2}})->type() == c.scalar(DataType::Bool));
  // a slot given by the caller is used only when it names the same input
  std::vector<Arg> args{Builder::arg("y", s1), Builder::arg("x", x)};
  args[0].slot = 0;  // wrong: input 0 is x
  args[1].slot = 7;  // out of range
  Var* r = b.create("add", args).at(0);
  CHECK(r->op()->input1("x") == x);
  CHECK(r->op()->input1("y") == s1);
}

TEST_CASE("values: small copies keep their bytes in the buffer, at every size", "[types]") {
  for (size_t n :
       {size_t(0), size_t(1), size_t(4), size_t(15), size_t(16), size_t(17), size_t(64)}) {
    std::vector<uint8_t> src(n);
    for (size_t i = 0; i < n; ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
    auto buf = Buffer::copy(src.data(), n);
    REQUIRE(buf->size() == n);
    CHECK_FALSE(buf->lazy());
    CHECK_FALSE(buf->borrowed());
    if (n) {
      CHECK(std::memcmp(buf->data(), src.data(), n) == 0);
      CHECK(buf->data() != src.data());
      src[0] ^= 0xff;  // a copy: the source changing leaves it alone
      CHECK(buf->data()[0] == static_cast<uint8_t>(1));
    }
    auto keep = buf->data();
    auto other = buf;  // shared, not copied
    buf.reset();
    CHECK(other->data() == keep);
  }
  Value v = Value::scalar_float(DataType::Float32, 0.1);
  CHECK(v.as_double(0) == static_cast<double>(0.1f));
  CHECK(Value::scalar_float(DataType::Float16, 0.5).as_double(0) == 0.5);
}

TEST_CASE("builder: errors name op type, op name and input", "[ir]") {
  auto f = make_fn();
  Builder b(*f);
  Var* x = f->inputs()[0];
  std::vector<Arg> args{Builder::arg("x", x),
                        Builder::arg("y", Value::scalar_float(DataType::Float16, 2.0))};
  try {
    b.create("add", args);
    FAIL("expected a TypeError");
  } catch (const TypeError& e) {
    std::string m = e.what();
    CHECK(m.find("add 'add_0'") != std::string::npos);
    CHECK(m.find("'y'") != std::string::npos);
  }
  // the failed op's implicit const was rolled back, its name number was consumed
  CHECK(f->body().size() == 0);
  std::vector<Arg> unknown{Builder::arg("x", x), Builder::arg("z", x)};
  CHECK_THROWS_WITH(b.create("add", unknown),
                    Catch::Contains("Unknown input 'z'") && Catch::Contains("x, y"));
  std::vector<Arg> missing{Builder::arg("x", x)};
  CHECK_THROWS_WITH(b.create("add", missing), Catch::Contains("missing required input 'y'"));
  std::vector<Arg> none;
  CHECK_THROWS_WITH(b.create("no_such_op", none), Catch::Contains("unknown op type 'no_such_op'"));
}

TEST_CASE("ir: replace_all_uses_with, erase, verifier", "[ir]") {
  auto f = make_fn();
  Builder b(*f);
  Var* x = f->inputs()[0];
  Var* a = b.op("add", {{"x", x}, {"y", x}});
  Var* m = b.op("mul", {{"x", a}, {"y", a}});
  f->body().set_outputs({m});
  CHECK_THROWS_AS(f->body().erase(a->op()), ValueError);  // still used
  Var* s = b.op("sub", {{"x", x}, {"y", x}});
  a->replace_all_uses_with(s);
  CHECK(a->uses().empty());
  CHECK(s->uses().size() == 2);
  // sub is after mul now: use before definition
  CHECK_THROWS_WITH(verify(*f, "main"), Catch::Contains("not defined before use"));
  f->body().move_before(s->op(), m->op());
  CHECK_NOTHROW(verify(*f, "main"));
  f->body().erase(a->op());
  CHECK(a->op()->erased());
  CHECK(f->num_ops() == 2);
  CHECK(f->body().size() == 2);
  CHECK_NOTHROW(verify(*f, "main"));
  // a declared type that disagrees with inference is caught
  m->set_type(f->ctx().tensor(DataType::Float32, std::vector<int64_t>{3, 3}));
  CHECK_THROWS_WITH(verify(*f, "main"),
                    Catch::Contains("mul 'mul_0'") && Catch::Contains("inference gives"));
}

TEST_CASE("ir: per-type op counts follow insert and erase, nested blocks included", "[ir]") {
  auto f = make_fn();
  Builder b(*f);
  Var* x = f->inputs()[0];
  Var* a = b.op("add", {{"x", x}, {"y", x}});
  CHECK(f->count_ops("add") == 1);
  CHECK(f->count_ops(op_type_id("add")) == 1);
  CHECK(f->count_ops("mul") == 0);
  CHECK(f->count_ops("no_such_op") == 0);
  CHECK(a->op()->type_id() == op_type_id("add"));
  CHECK_FALSE(f->has_block_ops());
  std::vector<Arg> pa{Builder::arg("x", Value::scalar_bool(true))};
  Var* pred = b.create("identity", pa).at(0);  // a const (implicit) and an identity
  CHECK(f->count_ops("const") == 1);
  std::vector<Arg> ca{Builder::arg("pred", pred)};
  auto branch = [&](const char* t) {
    return [&, t](const std::vector<Var*>&) {
      return std::vector<Var*>{b.op(t, {{"x", a}, {"y", x}})};
    };
  };
  Var* c = b.create("cond", ca, "", cond_blocks(branch("mul"), branch("sub"))).at(0);
  CHECK(f->has_block_ops());
  CHECK(f->has_op_type({"mul"}));
  CHECK(f->has_op_type({"real_div", "sub"}));
  CHECK_FALSE(f->has_op_type({"real_div", "conv"}));
  CHECK(f->num_ops() == 6);
  f->body().erase(c->op());  // its blocks' ops go with it
  CHECK_FALSE(f->has_block_ops());
  CHECK(f->count_ops("mul") == 0);
  CHECK(f->count_ops("sub") == 0);
  CHECK(f->count_ops("cond") == 0);
  CHECK(f->num_ops() == 3);
  f->body().erase(pred->op());
  f->body().erase(a->op());
  CHECK(f->count_ops("add") == 0);
  CHECK(f->count_ops("const") == 1);
  CHECK(f->num_ops() == 1);
  CHECK_THROWS_AS(op_type_id("no_such_op"), Error);
}

TEST_CASE("ir: invalid identifiers are rejected by the verifier", "[ir]") {
  auto f = make_fn();
  Builder b(*f);
  Var* x = f->inputs()[0];
  Var* a = b.op("add", {{"x", x}, {"y", x}}, "bad name");
  f->body().set_outputs({a});
  CHECK_NOTHROW(verify(*f, "main"));
  CHECK_THROWS_WITH(verify(*f, "main", true), Catch::Contains("not a valid MIL identifier"));
  Var* d1 = b.op("add", {{"x", x}, {"y", x}}, "dup");
  Var* d2 = b.op("add", {{"x", d1}, {"y", x}}, "dup");
  f->body().set_outputs({d2});
  a->op()->set_name("good_name");
  a->set_name("good_name");
  CHECK_THROWS_WITH(verify(*f, "main", true), Catch::Contains("used by two vars"));
  CHECK(is_valid_identifier("a_b1@x"));
  CHECK_FALSE(is_valid_identifier("1a"));
  CHECK_FALSE(is_valid_identifier(""));
}

TEST_CASE("types: interning, promotion, compatibility", "[types]") {
  Context c;
  auto s = Symbol::create("S");
  const Type* t1 = c.tensor(DataType::Float32, std::vector<Dim>{c.constant(1), c.symbol(s)});
  const Type* t2 = c.tensor(DataType::Float32, std::vector<Dim>{c.constant(1), c.symbol(s)});
  CHECK(t1 == t2);
  CHECK(c.scalar(DataType::Int32) == c.tensor(DataType::Int32, std::vector<Dim>{}));
  CHECK(c.scalar(DataType::Int32)->is_scalar());
  CHECK(t1->str() == "(1, S, fp32)");
  CHECK(c.list(t1, nullptr, true) == c.list(t1, nullptr, true));
  CHECK(c.state(t1)->elem() == t1);
  CHECK_THROWS_AS(c.state(c.list(t1, nullptr, true)), TypeError);
  CHECK(promote_dtypes(DataType::Float16, DataType::Int32) == DataType::Float16);
  CHECK(promote_dtypes(DataType::Int8, DataType::UInt8) == DataType::Int16);
  CHECK(promote_dtypes(DataType::Int32, DataType::Int64) == DataType::Int64);
  CHECK(promote_dtypes(DataType::Bool, DataType::Int8) == DataType::Int8);
  CHECK_THROWS_AS(promote_dtypes(DataType::String, DataType::Int8), TypeError);
  CHECK(is_compatible_type(t1, c.tensor(DataType::Float32, std::vector<int64_t>{1, 7})));
  CHECK_FALSE(is_compatible_type(t1, c.tensor(DataType::Float32, std::vector<int64_t>{2, 7})));
  CHECK_FALSE(is_compatible_type(t1, c.tensor(DataType::Float16, std::vector<int64_t>{1, 7})));
  CHECK(half_to_float(float_to_half(1.5f)) == 1.5f);
  CHECK(float_to_half(65520.f) == 0x7c00);  // rounds to inf
  CHECK(half_to_float(0x0001) > 0);         // subnormal
  CHECK(dtype_from_name("uint6") == DataType::UInt6);
  CHECK(dtype_bits(DataType::UInt3) == 3);
}

TEST_CASE("values: conversion, symbolic values, printing", "[types]") {
  Value v = Value::from_doubles(DataType::Float16, {2}, {1.0, 2.5});
  CHECK(v.as_double(1) == 2.5);
  CHECK(v.nbytes() == 4);
  CHECK(v.cast(DataType::Int32).as_int(1) == 2);
  CHECK(Value::from_ints(DataType::Int8, {1}, {300}).as_int(0) == 44);  // wraps like numpy
  Context c;
  auto s = Symbol::create("S");
  Value sv = Value::from_dims(DataType::Int32, {2}, {c.symbol(s), c.constant(4)});
  CHECK(sv.is_symbolic());
  Value kv = Value::from_dims(DataType::Int32, {2}, {c.constant(3), c.constant(4)});
  CHECK_FALSE(kv.is_symbolic());
  CHECK(kv.as_int(0) == 3);
  CHECK_THROWS_AS(Value(DataType::Float32, {3}, Buffer::copy("abcd", 4)), ValueError);
  CHECK(float_repr(1e-5f) == "1e-05");
  CHECK(float_repr(0.1f) == "0.1");
  CHECK(double_repr(static_cast<double>(0.1f)) == "0.10000000149011612");
  CHECK(float_repr(2.0f) == "2.0");
  CHECK(double_repr(1e20) == "1e+20");
}

TEST_CASE("types: bulk fp32 <-> fp16 conversion equals the scalar one", "[types]") {
  std::vector<float> in;
  for (int e = -30; e <= 20; ++e)
    for (float m : {1.0f, 1.1f, 1.5f, 1.999f, 1.00048828125f, 1.0009765625f})
      for (float sgn : {1.0f, -1.0f}) in.push_back(sgn * std::ldexp(m, e));
  in.push_back(0.0f);
  in.push_back(-0.0f);
  in.push_back(65504.0f);
  in.push_back(65520.0f);
  in.push_back(1e-8f);
  in.push_back(std::numeric_limits<float>::infinity());
  std::vector<uint16_t> out(in.size());
  floats_to_halves(in.data(), out.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    INFO("value " << in[i]);
    CHECK(out[i] == float_to_half(in[i]));
  }
  std::vector<float> back(in.size());
  halves_to_floats(out.data(), back.data(), out.size());
  for (size_t i = 0; i < in.size(); ++i) CHECK(back[i] == half_to_float(out[i]));
  // all 65536 halves round-trip exactly through float
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> f(all.size());
  halves_to_floats(all.data(), f.data(), all.size());
  std::vector<uint16_t> again(all.size());
  floats_to_halves(f.data(), again.data(), f.size());
  size_t mismatches = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    bool nan = (all[i] & 0x7c00) == 0x7c00 && (all[i] & 0x3ff);
    if (!nan && again[i] != all[i]) ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("types: round_to_half gives fp16's value of each float, at every length and offset",
          "[types]") {
  // the vector bodies (16 or 8 lanes) with their masked / padded tails against the scalar
  // conversion, over every length up to 40 and each start in the buffer; values that round up,
  // down, to even, to inf and to subnormals, NaN kept a NaN, and the floats past the end untouched
  std::vector<float> vals;
  for (int e = -26; e <= 16; e += 3)
    for (float m : {1.0f, 1.00048828125f, 1.000732421875f, 1.0009765625f, 1.333f, 1.999f})
      for (float sgn : {1.0f, -1.0f}) vals.push_back(sgn * std::ldexp(m, e));
  vals.insert(vals.end(),
              {0.0f, -0.0f, 65504.0f, 65519.0f, 65520.0f, 1e-8f, 3e-5f,
               std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()});
  for (int64_t start = 0; start < 17; ++start)
    for (int64_t n = 0; n <= 40; ++n) {
      std::vector<float> buf(static_cast<size_t>(start + n + 8), 7.25e-3f);
      for (int64_t i = 0; i < n; ++i)
        buf[static_cast<size_t>(start + i)] =
            vals[static_cast<size_t>((start * 7 + i) % vals.size())];
      const std::vector<float> before = buf;
      round_to_half(buf.data() + start, n);
      for (size_t i = 0; i < buf.size(); ++i) {
        const bool inside = static_cast<int64_t>(i) >= start && static_cast<int64_t>(i) < start + n;
        const float want = inside ? half_to_float(float_to_half(before[i])) : before[i];
        INFO("start " << start << " n " << n << " at " << i << " value " << before[i]);
        CHECK(std::memcmp(&buf[i], &want, sizeof want) == 0);
      }
    }
  float nan = std::numeric_limits<float>::quiet_NaN();
  round_to_half(&nan, 1);
  CHECK(std::isnan(nan));
}

TEST_CASE("ir: big functions keep their objects in huge chunks; erased ops and names stay valid",
          "[ir]") {
  // 12000 adds with their consts pass the 256 KiB chunk size of ops and vars, so the later ones
  // live in 2 MiB chunks; every object stays where it was made until the function dies
  auto f = make_fn();
  Builder b(*f);
  Var* x = f->inputs()[0];
  std::vector<Var*> made;
  std::vector<Arg> args{Builder::arg("x", x),
                        Builder::arg("y", Value::scalar_float(DataType::Float32, 1.0))};
  for (int i = 0; i < 12000; ++i) {
    args[0].items[0].var = x;
    x = b.create("add", args).at(0);
    made.push_back(x);
  }
  f->body().set_outputs({x});
  CHECK(f->num_ops() == 24000);
  CHECK(made[0]->name() == "add_0");
  CHECK(made[11999]->name() == "add_11999");
  CHECK(made[11999]->op()->output(0) == made[11999]);
  CHECK(made[11999]->op()->num_outputs() == 1);
  CHECK(made[11999]->op()->input1("y")->name() == "add_11999_y_0");
  // distinct objects, none overlapping
  std::set<const void*> ops;
  for (Var* v : made) ops.insert(v->op());
  CHECK(ops.size() == made.size());
  // erase the tail; the erased ops keep names and outputs readable
  f->body().set_outputs({made[5999]});
  for (int i = 11999; i >= 6000; --i) {
    Operation* op = made[static_cast<size_t>(i)]->op();
    Var* y = op->input1("y");
    f->body().erase(op);
    f->body().erase(y->op());
  }
  CHECK(f->num_ops() == 12000);
  CHECK(made[11000]->op()->erased());
  CHECK(made[11000]->name() == "add_11000");
  CHECK_NOTHROW(verify(*f, "main"));
}

TEST_CASE("values: lazy buffers compose, stream partial reads and materialize once", "[types]") {
  // 10,000 floats: more than one scratch chunk of a lazy read
  const size_t n = 10000;
  std::vector<float> src(n);
  for (size_t i = 0; i < n; ++i) src[i] = static_cast<float>(i) * 0.37f - 1000.0f;
  auto keep = std::make_shared<std::vector<float>>(src);
  auto base = Buffer::borrow(keep->data(), n * 4, keep);
  int calls = 0;
  auto scaled = Buffer::lazy_map(
      base, 4, 4, [&calls](size_t first, size_t m, const uint8_t* in, uint8_t* out) {
        ++calls;
        for (size_t i = 0; i < m; ++i) {
          float f;
          std::memcpy(&f, in + 4 * i, 4);
          f *= static_cast<float>((first + i) % 3 + 1);  // depends on the element index
          std::memcpy(out + 4 * i, &f, 4);
        }
      });
  auto half = Buffer::lazy_fp32_to_fp16(scaled);  // a lazy buffer over a lazy one
  CHECK(scaled->lazy());
  CHECK(half->lazy());
  CHECK(half->size() == n * 2);
  auto expect = [&](size_t i) { return float_to_half(src[i] * static_cast<float>(i % 3 + 1)); };
  // a read in the middle, across chunk boundaries, does not materialize either buffer
  std::vector<uint16_t> part(7001);
  half->read(2 * 1234, part.size() * 2, reinterpret_cast<uint8_t*>(part.data()));
  for (size_t i = 0; i < part.size(); ++i) REQUIRE(part[i] == expect(1234 + i));
  CHECK(scaled->lazy());
  CHECK(half->lazy());
  CHECK(calls > 0);
  CHECK_THROWS_AS(half->read(1, 2, reinterpret_cast<uint8_t*>(part.data())),
                  ValueError);  // half an element
  CHECK_THROWS_AS(half->read(2 * n - 2, 4, reinterpret_cast<uint8_t*>(part.data())),
                  ValueError);  // past the end
  CHECK_THROWS_AS(Buffer::lazy_map(Buffer::copy("abcde", 5), 4, 2,
                                   [](size_t, size_t, const uint8_t*, uint8_t*) {}),
                  ValueError);
  // data() converts everything once; the values agree with the streamed ones
  const auto* all = reinterpret_cast<const uint16_t*>(half->data());
  CHECK_FALSE(half->lazy());
  for (size_t i = 0; i < n; ++i) REQUIRE(all[i] == expect(i));
  CHECK(half->data() == reinterpret_cast<const uint8_t*>(all));
  // a Value over a lazy fp32 buffer casts to a lazy fp16 one with the same numbers
  Value v(DataType::Float32, {100, 100}, scaled);
  Value h = v.cast(DataType::Float16);
  CHECK(h.buffer()->lazy());
  CHECK(h.as_double(5) == Approx(static_cast<double>(half_to_float(expect(5)))));
}

TEST_CASE("values: pack_bits keeps the low bits of each element, least significant first",
          "[types]") {
  std::mt19937 rng(11);
  for (int bits : {1, 2, 3, 4, 6, 8}) {
    for (size_t n : {size_t(1), size_t(3), size_t(8), size_t(9), size_t(1001)}) {
      std::vector<uint8_t> elems(n);
      for (auto& e : elems) e = static_cast<uint8_t>(rng());  // high bits set too: ignored
      std::vector<uint8_t> want((n * bits + 7) / 8, 0);
      for (size_t i = 0; i < n; ++i)
        for (int b = 0; b < bits; ++b)
          if ((elems[i] >> b) & 1) want[(i * bits + b) / 8] |= uint8_t(1u << ((i * bits + b) % 8));
      std::vector<uint8_t> got(want.size(), 0xAB);
      pack_bits(elems.data(), n, bits, got.data());
      INFO("bits " << bits << " n " << n);
      REQUIRE(got == want);
    }
  }
}

TEST_CASE("values: packed sub-byte buffers read any run and round-trip every width", "[types]") {
  std::mt19937 rng(7);
  for (int bits : {1, 2, 3, 4, 6, 8}) {
    for (size_t n : {size_t(1), size_t(7), size_t(13), size_t(40001)}) {
      std::vector<uint8_t> elems(n);
      for (auto& e : elems) e = static_cast<uint8_t>(rng() & ((1u << bits) - 1));
      std::vector<uint8_t> packed((n * bits + 7) / 8);
      pack_bits(elems.data(), n, bits, packed.data());
      auto buf = Buffer::packed_bits(Buffer::copy(packed.data(), packed.size()), bits, false, n);
      REQUIRE(buf->size() == n);
      REQUIRE(buf->bit_width() == bits);
      REQUIRE(buf->lazy());
      // partial runs from any element, across the scratch chunk boundary
      for (size_t first : {size_t(0), size_t(1), size_t(5), n / 2, n - 1}) {
        if (first >= n) continue;
        size_t len = std::min<size_t>(n - first, 20000);
        std::vector<uint8_t> got(len);
        buf->read(first, len, got.data());
        INFO("bits " << bits << " n " << n << " first " << first);
        REQUIRE(std::equal(got.begin(), got.end(), elems.begin() + static_cast<long>(first)));
      }
      REQUIRE(std::memcmp(buf->data(), elems.data(), n) == 0);
    }
  }
  // int4 sign-extends; a source too small for the count is refused
  uint8_t two[1] = {0xF7};  // elements 7 and -1
  auto s = Buffer::packed_bits(Buffer::copy(two, 1), 4, true, 2);
  REQUIRE(static_cast<int8_t>(s->data()[0]) == 7);
  REQUIRE(static_cast<int8_t>(s->data()[1]) == -1);
  REQUIRE_THROWS_AS(Buffer::packed_bits(Buffer::copy(two, 1), 4, false, 3), ValueError);
  REQUIRE_THROWS_AS(Buffer::packed_bits(Buffer::copy(two, 1), 9, false, 1), ValueError);
}

TEST_CASE("values: from_bytes keeps sub-byte values packed and spills large results", "[types]") {
  std::vector<uint8_t> idx(3 << 20);  // 3M uint4 elements: 1.5 MiB packed, over the spill size
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<uint8_t>((i * 7) & 15);
  std::vector<uint8_t> copy = idx;
  Value v = Value::from_bytes(DataType::UInt4, {3, 1 << 20}, std::move(idx));
  const Buffer* src = v.buffer()->bit_source();
  REQUIRE(src != nullptr);
  REQUIRE(src->size() == copy.size() / 2);
  REQUIRE(src->borrowed());  // mapped from the spill file, not owned memory
  REQUIRE(v.as_int(12345) == copy[12345]);
  REQUIRE(std::memcmp(v.raw(), copy.data(), copy.size()) == 0);
  // byte-sized dtypes are spilled as they are; small values stay in memory
  std::vector<uint8_t> big(2 << 20, 3);
  Value b = Value::from_bytes(DataType::Int8, {2 << 20}, std::move(big));
  REQUIRE(b.buffer()->borrowed());
  REQUIRE(b.as_int((2 << 20) - 1) == 3);
  Value small = Value::from_bytes(DataType::Int8, {4}, std::vector<uint8_t>{1, 2, 3, 4});
  REQUIRE_FALSE(small.buffer()->borrowed());
  REQUIRE_THROWS_AS(Value::from_bytes(DataType::UInt4, {5}, std::vector<uint8_t>(4)), ValueError);
}
