// The compression passes from C++: each rewrites a const weight into its constexpr form per the
// JSON config, the decompressed weight is close to the original, and the program still runs;
// decompress_weights turns it back into a const.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/exec/plan.h"
#include "milkit/exec/threads.h"
#include "milkit/passes/compression.h"
#include "milkit/passes/pass.h"
#include "milkit/types/error.h"

using namespace milkit;

namespace {

/// x [1, 64] -> linear with a [96, 64] fp32 weight.
std::shared_ptr<Program> linear_program(Target t) {
  auto p = std::make_shared<Program>();
  auto f = std::make_shared<Function>(t);
  Var* x = f->add_input("x", f->ctx().tensor(DataType::Float32, std::vector<int64_t>{1, 64}));
  Builder b(*f);
  std::vector<double> w(96 * 64);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.37 * static_cast<double>(i)) * 0.5;
  Var* wv = b.add_const(
      std::make_shared<const Value>(Value::from_doubles(DataType::Float32, {96, 64}, w)), "w");
  f->body().set_outputs({b.op("linear", {{"x", x}, {"weight", wv}})});
  p->add_function("main", f);
  return p;
}

std::vector<std::string> op_types(Program& p) {
  std::vector<std::string> r;
  for (Operation* op : p.function("main")->body().ops()) r.push_back(op->op_type());
  return r;
}

float run_first(Program& p) {
  std::shared_ptr<Function> main;
  for (const auto& [name, f] : p.functions())
    if (name == "main") main = f;
  Plan plan(main);
  Tensor x = Tensor::zeros(DataType::Float32, {1, 64});
  for (int i = 0; i < 64; ++i) x.mutable_data<float>()[i] = 0.01f * static_cast<float>(i);
  auto out = plan.run({{"x", x}});
  return out.at(0).second.data<float>()[0];
}

void run_pass(Program& p, const std::string& name, const std::string& config) {
  PassManager pm;
  pm.add(name, config.empty() ? PassOptions{} : PassOptions{{"config", config}});
  pm.run(p, true);
}

}  // namespace

TEST_CASE("compression passes rewrite weights per the config", "[compression]") {
  struct Case {
    const char* pass;
    const char* config;
    const char* op;
  };
  const Case cases[] = {
      {"compression::linear_quantize_weights",
       R"({"global": {"type": "OpLinearQuantizerConfig", "mode": "LINEAR", "dtype": "int4",
           "granularity": "per_block", "block_size": 16, "weight_threshold": 100}})",
       "constexpr_blockwise_shift_scale"},
      {"compression::palettize_weights",
       R"({"global": {"type": "OpPalettizerConfig", "mode": "KMEANS", "nbits": 4,
           "granularity": "per_grouped_channel", "group_size": 16, "weight_threshold": 100}})",
       "constexpr_lut_to_dense"},
      {"compression::prune_weights",
       R"({"global": {"type": "OpMagnitudePrunerConfig", "target_sparsity": 0.5, "weight_threshold": 100}})",
       "constexpr_sparse_to_dense"},
  };
  for (const Case& c : cases) {
    auto p = linear_program(Target::iOS18);
    const float ref = run_first(*p);
    run_pass(*p, c.pass, c.config);
    auto types = op_types(*p);
    CHECK(std::find(types.begin(), types.end(), c.op) != types.end());
    CHECK(std::fabs(run_first(*p) - ref) < 0.5f);
    run_pass(*p, "compression::decompress_weights", "");
    types = op_types(*p);
    CHECK(std::none_of(types.begin(), types.end(),
                       [](const std::string& t) { return t.rfind("constexpr_", 0) == 0; }));
  }
}

TEST_CASE("compression passes refuse malformed configs and old targets", "[compression]") {
  auto p = linear_program(Target::iOS18);
  CHECK_THROWS_AS(run_pass(*p, "compression::palettize_weights", "{not json"), ValueError);
  CHECK_THROWS_AS(run_pass(*p, "compression::palettize_weights", R"({"global": {"type": "Nope"}})"),
                  ValueError);
  auto old = linear_program(Target::iOS17);
  CHECK_THROWS_WITH(
      run_pass(*old, "compression::linear_quantize_weights",
               R"({"global": {"type": "OpLinearQuantizerConfig", "mode": "LINEAR_SYMMETRIC",
                                 "dtype": "int4", "granularity": "per_channel", "block_size": 32,
                                 "weight_threshold": 100}})"),
      Catch::Contains("4-bit quantization is supported since iOS18"));
  (void)compression::take_warnings();
}

TEST_CASE("parallel weight jobs raise the first failing weight's error after the ones before it",
          "[compression]") {
  // four consts; job 0 warns, jobs 1 and 2 fail, job 3 succeeds: on any thread count the result
  // is job 0 applied, its warning and job 1's, then job 1's error
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    auto p = std::make_shared<Program>();
    auto f = std::make_shared<Function>(Target::iOS18);
    Builder b(*f);
    std::vector<Var*> outs;
    for (int i = 0; i < 4; ++i)
      outs.push_back(b.add_const(std::make_shared<const Value>(Value::from_doubles(
                                     DataType::Float32, {2, 2}, {1, 2, 3, static_cast<double>(i)})),
                                 "c" + std::to_string(i)));
    f->body().set_outputs(outs);
    p->add_function("main", f);
    compression::take_warnings();
    std::vector<int> applied;
    auto run = [&] {
      compression::for_each_const_parallel(*p, [&](Function&, Operation* op) {
        const int i = op->name().back() - '0';
        compression::Job job;
        auto warnings = job.warnings;
        job.compute = [i, warnings] {
          if (i == 0 || i == 1) warnings->push_back("warning " + std::to_string(i));
          if (i == 1 || i == 2) throw ValueError("error " + std::to_string(i));
        };
        job.apply = [i, &applied] {
          applied.push_back(i);
          return true;
        };
        return std::optional<compression::Job>(std::move(job));
      });
    };
    INFO("threads " << threads);
    CHECK_THROWS_WITH(run(), "error 1");
    CHECK(applied == std::vector<int>{0});
    CHECK(compression::take_warnings() == std::vector<std::string>{"warning 0", "warning 1"});
  }
  set_num_threads(0);
}
