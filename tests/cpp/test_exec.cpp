// The interpreter's core: planning, symbol binding, input checks, buffer lifetimes, states,
// nested-block plumbing, concurrency, and the kernel registry covering every op.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <set>
#include <thread>

#include "milkit/builder/builder.h"
#include "milkit/exec/plan.h"
#include "milkit/exec/threads.h"
#include "milkit/ops/registry.h"
#include "milkit/types/error.h"

using namespace milkit;

namespace {

Tensor filled(std::vector<int64_t> shape, float v) {
  Tensor t = Tensor::empty(DataType::Float32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.mutable_data<float>()[i] = v + static_cast<float>(i);
  return t;
}

struct Chain {
  std::shared_ptr<Function> f;
  std::shared_ptr<Symbol> s = Symbol::create("S", 1, 64);
  explicit Chain(int n, DataType dt = DataType::Float32) {
    f = std::make_shared<Function>(Target::iOS17);
    auto& c = f->ctx();
    Var* x = f->add_input("x", c.tensor(dt, std::vector<Dim>{c.constant(2), c.symbol(s)}));
    Builder b(*f);
    Var* h = x;
    for (int i = 0; i < n; ++i) h = b.op("add", {{"x", h}, {"y", x}});
    f->body().set_outputs({h});
  }
};

}  // namespace

TEST_CASE("exec: a chain of adds runs, binds symbols and frees buffers after their last use") {
  Chain ch(10);
  Plan p(ch.f);
  for (int64_t n : {1, 7, 64}) {
    auto out = p.run({{"x", filled({2, n}, 1.0f)}});
    REQUIRE(out.size() == 1);
    const Tensor& y = out[0].second;
    REQUIRE(y.shape() == std::vector<int64_t>{2, n});
    for (int64_t i = 0; i < y.numel(); ++i) REQUIRE(y.data<float>()[i] == Approx(11.0f * (1.0f + i)));
    // at most two intermediates live at once (the newest and the one it reads)
    REQUIRE(p.last_peak_bytes() <= 2 * static_cast<size_t>(2 * n * 4));
  }
}

TEST_CASE("exec: bad inputs name the input and what was expected") {
  Chain ch(1);
  Plan p(ch.f);
  auto msg = [&](std::map<std::string, Tensor> in) {
    try {
      p.run(in);
    } catch (const ValueError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  REQUIRE_THAT(msg({}), Catch::Contains("missing input 'x'"));
  REQUIRE_THAT(msg({{"x", filled({2, 3}, 0)}, {"z", filled({1}, 0)}}), Catch::Contains("unknown input 'z'"));
  REQUIRE_THAT(msg({{"x", filled({2, 3, 1}, 0)}}), Catch::Contains("rank 3"));
  REQUIRE_THAT(msg({{"x", filled({3, 3}, 0)}}), Catch::Contains("dim 0"));
  REQUIRE_THAT(msg({{"x", filled({2, 65}, 0)}}), Catch::Contains("outside the range of S [1, 64]"));
  REQUIRE_THAT(msg({{"x", Tensor::zeros(DataType::Int32, {2, 3})}}), Catch::Contains("dtype int32, expected fp32"));
}

TEST_CASE("exec: an op without a kernel is refused when the plan is made, naming every such op") {
  Chain ch(3);
  KernelRegistry empty;
  try {
    Plan p(ch.f, &empty);
    FAIL("planned without kernels");
  } catch (const ValueError& e) {
    std::string m = e.what();
    REQUIRE_THAT(m, Catch::Contains("no kernel for 3 op(s)"));
    REQUIRE_THAT(m, Catch::Contains("add 'add_0'"));
    REQUIRE_THAT(m, Catch::Contains("add 'add_2'"));
  }
}

TEST_CASE("exec: fp16 programs compute in fp32 and round each result to fp16") {
  Chain ch(2, DataType::Float16);
  Plan p(ch.f);
  Tensor x = Tensor::empty(DataType::Float16, {2, 1});
  x.mutable_data<uint16_t>()[0] = float_to_half(1000.5f);
  x.mutable_data<uint16_t>()[1] = float_to_half(0.1f);
  auto out = p.run({{"x", x}});
  const Tensor& y = out[0].second;
  REQUIRE(y.dtype() == DataType::Float16);
  float x0 = half_to_float(float_to_half(1000.5f)), x1 = half_to_float(float_to_half(0.1f));
  float r0 = half_to_float(float_to_half(half_to_float(float_to_half(x0 + x0)) + x0));
  float r1 = half_to_float(float_to_half(half_to_float(float_to_half(x1 + x1)) + x1));
  REQUIRE(half_to_float(y.data<uint16_t>()[0]) == r0);
  REQUIRE(half_to_float(y.data<uint16_t>()[1]) == r1);
}

TEST_CASE("exec: states are read and written through the state object") {
  auto f = std::make_shared<Function>(Target::iOS18);
  auto& c = f->ctx();
  const Type* tt = c.tensor(DataType::Float32, std::vector<int64_t>{2, 2});
  Var* st = f->add_input("cache", c.state(tt));
  Var* x = f->add_input("x", tt);
  Builder b(*f);
  Var* r = b.op("read_state", {{"input", st}});
  Var* s = b.op("add", {{"x", r}, {"y", x}});
  Var* u = b.op("coreml_update_state", {{"state", st}, {"value", s}});
  f->body().set_outputs({u});
  Plan p(f);
  REQUIRE(p.has_states());
  REQUIRE(p.input_names() == std::vector<std::string>{"x"});
  REQUIRE_THROWS_WITH(p.run({{"x", filled({2, 2}, 1)}}), Catch::Contains("make_state"));
  auto state = p.make_state();
  for (int k = 1; k <= 3; ++k) {
    auto out = p.run({{"x", filled({2, 2}, 1)}}, state.get());
    REQUIRE(out[0].second.data<float>()[3] == Approx(4.0f * k));
    REQUIRE(state->get("cache").data<float>()[3] == Approx(4.0f * k));
  }
  auto fresh = p.make_state();
  REQUIRE(fresh->get("cache").data<float>()[3] == 0.0f);
}

TEST_CASE("exec: one plan runs from several threads at once with the same results") {
  Chain ch(20);
  Plan p(ch.f);
  Tensor x = filled({2, 64}, 0.5f);
  auto want = p.run({{"x", x}})[0].second;
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        auto got = p.run({{"x", x}})[0].second;
        if (std::memcmp(got.bytes(), want.bytes(), want.nbytes()) != 0) ++bad;
      }
    });
  for (auto& t : ts) t.join();
  REQUIRE(bad == 0);
}

TEST_CASE("exec: parallel_for covers the range once and rethrows errors") {
  std::vector<std::atomic<int>> hits(100000);
  parallel_for(100000, 1000, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) ++hits[i];
  });
  for (auto& h : hits) REQUIRE(h == 1);
  REQUIRE_THROWS_WITH(parallel_for(100000, 10, [](int64_t b, int64_t) {
                        if (b > 0) throw ValueError("boom");
                      }),
                      "boom");
}

TEST_CASE("exec: parallel_for back to back: late workers take no chunk of a later job") {
  // more threads than cores, so workers wake late and find newer jobs or none; every job must
  // still run each item exactly once, including the jobs right after one that threw
  set_num_threads(4);
  std::vector<std::atomic<int>> hits(64);
  for (int job = 0; job < 20000; ++job) {
    const int64_t n = 8 + job % 57;
    if (job % 1000 == 999) {
      REQUIRE_THROWS_WITH(parallel_for(n, 1,
                                       [](int64_t b, int64_t) {
                                         if (b > 3) throw ValueError("late");
                                       }),
                          "late");
      continue;
    }
    parallel_for(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
    });
    for (int64_t i = 0; i < n; ++i) REQUIRE(hits[i].exchange(0) == 1);
  }
  set_num_threads(0);
}

TEST_CASE("exec: every op in the registry, at every opset, has a kernel") {
  std::set<std::string> missing;
  for (int t = static_cast<int>(Target::iOS13); t <= static_cast<int>(Target::iOS26); ++t)
    for (const auto& name : OpRegistry::instance().names(static_cast<Target>(t)))
      if (name != "const" && !KernelRegistry::instance().find(name)) missing.insert(name);
  std::string list;
  for (const auto& m : missing) list += m + " ";
  INFO("ops without a kernel: " << list);
  REQUIRE(missing.empty());
}

TEST_CASE("exec: classify gives the label and the dictionary label -> probability") {
  for (bool ints : {false, true}) {
    auto f = std::make_shared<Function>(Target::iOS15);
    Context& c = f->ctx();
    Var* x = f->add_input("x", c.tensor(DataType::Float32, std::vector<int64_t>{3}));
    Builder b(*f);
    Value labels = ints ? Value::from_ints(DataType::Int64, {3}, {7, 3, 11}) : Value::strings({3}, {"a", "b", "c"});
    std::vector<Arg> args{Builder::arg("probabilities", x), Builder::arg("classes", Value::list_of(labels))};
    f->body().set_outputs(b.create("classify", args));
    Plan p(f);
    Tensor in = Tensor::empty(DataType::Float32, {3});
    in.mutable_data<float>()[0] = 0.25f;
    in.mutable_data<float>()[1] = 0.5f;
    in.mutable_data<float>()[2] = 0.5f;
    auto out = p.run({{"x", in}});
    REQUIRE(out.size() == 2);
    const Tensor& label = out[0].second;
    REQUIRE(label.rank() == 0);
    if (ints)
      CHECK(label.data<int64_t>()[0] == 3);  // the first of the equal maxima
    else
      CHECK(label.string_values() == std::vector<std::string>{"b"});
    const Tensor& d = out[1].second;
    REQUIRE(d.is_dict());
    CHECK_FALSE(d.is_list());
    CHECK(d.dict_values().dtype() == DataType::Float64);
    CHECK(d.dict_values().get(0) == 0.25);
    CHECK(d.dict_keys().numel() == 3);
    CHECK_THROWS_WITH(p.run({{"x", filled({2}, 1.0f)}}), Catch::Contains("input 'x'"));
  }
}
