// Graph passes from C++: cast_optimization, add_fp16_cast (+ cleanup), const_deduplication,
// sanitize_name_strings, noop_elimination.
#include <catch2/catch.hpp>
#include <cmath>

#include "milkit/builder/builder.h"
#include "milkit/ir/verify.h"
#include "milkit/passes/names.h"
#include "milkit/passes/pass.h"
#include "milkit/types/error.h"

using namespace milkit;

namespace {

struct Prog {
  Program p;
  Function* f;
  Builder b;
  explicit Prog(DataType dt = DataType::Float32, Target t = Target::iOS17)
      : p(), f(nullptr), b(*[&] {
          auto fn = std::make_shared<Function>(t);
          fn->add_input("x", fn->ctx().tensor(dt, std::vector<int64_t>{2, 3}));
          p.add_function("main", fn);
          return fn.get();
        }()) {
    f = p.function("main");
  }
  Var* x() const { return f->inputs()[0]; }
  Var* cast(Var* v, const char* dt, const std::string& name = "") {
    std::vector<Arg> a{Builder::arg("x", v), Builder::arg("dtype", Value::scalar_string(dt))};
    return b.create("cast", a, name).at(0);
  }
  std::vector<std::string> ops() const {
    std::vector<std::string> r;
    for (Operation* op : f->body().ops()) r.push_back(op->op_type() + ":" + op->name());
    return r;
  }
  void run(std::initializer_list<const char*> names, PassOptions opts = {}) {
    PassManager pm;
    for (const char* n : names) pm.add(n, opts);
    pm.run(p, true);
  }
};

}  // namespace

TEST_CASE("cast_optimization: same-dtype removal, cancellation and fused naming", "[passes]") {
  Prog g(DataType::Float16);
  Var* a = g.cast(g.x(), "fp32");    // fp16 -> fp32
  Var* back = g.cast(a, "fp16");     // cancels: reads x
  Var* i = g.cast(a, "int32");       // fuses into cast(x, int32) "x_to_int32"
  Var* same = g.cast(back, "fp16");  // same dtype: removed
  Var* r = g.b.op("add", {{"x", same}, {"y", same}});
  g.f->body().set_outputs({r, i});
  g.run({"common::cast_optimization", "common::dead_code_elimination"});
  // the fused cast shares the dtype const of the cast it replaced
  CHECK(g.ops() ==
        std::vector<std::string>{"const:cast_2_dtype_0", "cast:x_to_int32", "add:add_0"});
  CHECK(g.f->body().outputs()[1]->name() == "cast_2");  // the function output keeps its name
  CHECK(r->op()->input1("x") == g.x());
  CHECK_NOTHROW(verify(*g.f, "main"));
}

TEST_CASE("add_fp16_cast + cleanup gives fp16 consts and fp32 outputs", "[passes]") {
  Prog g;
  auto w = std::make_shared<const Value>(
      Value::from_doubles(DataType::Float32, {2, 3}, {1e-9, -2, 3, 70000.0 / 1e5, 0.5, 1e38}));
  Var* k = g.b.add_const(w, "w");
  Var* m = g.b.op("mul", {{"x", g.x()}, {"y", k}});
  Var* s = g.b.op("add", {{"x", m}, {"y", m}});
  g.f->body().set_outputs({s});
  g.run({"common::add_fp16_cast"});
  CHECK(g.ops() == std::vector<std::string>{
                       "const:w", "const:x_to_fp16_dtype_0", "cast:x_to_fp16",
                       "const:w_to_fp16_dtype_0", "cast:w_to_fp16", "mul:mul_0_cast_fp16",
                       "const:mul_0_cast_fp16_to_fp32_dtype_0", "cast:mul_0_cast_fp16_to_fp32",
                       "const:mul_0_cast_fp16_to_fp32_to_fp16_dtype_0",
                       "cast:mul_0_cast_fp16_to_fp32_to_fp16", "add:add_0_cast_fp16",
                       "const:add_0_cast_fp16_to_fp32_dtype_0", "cast:add_0_cast_fp16_to_fp32"});
  Var* out = g.f->body().outputs()[0];
  CHECK(out->name() == "add_0");
  CHECK(out->type()->dtype() == DataType::Float32);
  // 1e-9 flushes to zero in fp16: the smallest subnormal is kept instead
  Var* wc = g.f->find_var("w_to_fp16");
  REQUIRE(wc->has_value());
  CHECK(wc->value()->as_double(0) == Approx(5.960464477539063e-08));
  g.run({"common::const_elimination", "common::dead_code_elimination", "common::cast_optimization",
         "common::dead_code_elimination"});
  CHECK(g.ops() == std::vector<std::string>{
                       "const:x_to_fp16_dtype_0", "cast:x_to_fp16", "const:w_to_fp16",
                       "mul:mul_0_cast_fp16", "add:add_0_cast_fp16",
                       "const:add_0_cast_fp16_to_fp32_dtype_0", "cast:add_0_cast_fp16_to_fp32"});
  CHECK(g.f->find_var("w_to_fp16")->type()->dtype() == DataType::Float16);
}

TEST_CASE("add_fp16_cast leaves overflowing ops and skipped types alone", "[passes]") {
  Prog g;
  Var* a = g.b.op("add", {{"x", g.x()},
                          {"y", g.b.add_const(std::make_shared<const Value>(
                                    Value::scalar_float(DataType::Float32, 1e5)))}});
  Var* r = g.b.op("relu", {{"x", a}});
  g.f->body().set_outputs({r});
  g.run({"common::add_fp16_cast"}, {{"skip_ops_by_type", "relu"}});
  CHECK(g.ops() == std::vector<std::string>{"const:const_0", "add:add_0", "relu:relu_0"});
  PassManager bad;
  bad.add("common::add_fp16_cast", {{"nope", "1"}});
  CHECK_THROWS_AS(bad.run(g.p), ValueError);
}

TEST_CASE("const_deduplication keeps the first const; threshold option", "[passes]") {
  Prog g;
  std::vector<double> vals(6, 0.25);
  auto v1 = std::make_shared<const Value>(Value::from_doubles(DataType::Float32, {2, 3}, vals));
  auto v2 = std::make_shared<const Value>(Value::from_doubles(DataType::Float32, {2, 3}, vals));
  Var* a = g.b.op("add", {{"x", g.x()}, {"y", g.b.add_const(v1, "first")}});
  Var* m = g.b.op("mul", {{"x", a}, {"y", g.b.add_const(v2, "second")}});
  g.f->body().set_outputs({m});
  g.run({"common::const_deduplication"});  // 6 < 100 elements: nothing
  CHECK(g.ops().size() == 4);
  g.run({"common::const_deduplication"}, {{"const_threshold", "6"}});
  CHECK(g.ops() == std::vector<std::string>{"const:first", "add:add_0", "mul:mul_0"});
  CHECK(m->op()->input1("y")->name() == "first");
}

TEST_CASE("sanitize_name_strings and noop_elimination", "[passes]") {
  Prog g;
  Var* a = g.b.op(
      "add",
      {{"x", g.x()},
       {"y",
        g.b.add_const(std::make_shared<const Value>(Value::scalar_float(DataType::Float32, 0)))}},
      "0/add");
  Var* r = g.b.op("relu", {{"x", a}}, "fp16");
  g.f->body().set_outputs({r});
  g.run({"common::noop_elimination", "common::dead_code_elimination",
         "mil_backend::sanitize_name_strings"});
  CHECK(g.ops() == std::vector<std::string>{"relu:fp16_workaround"});
  CHECK(r->name() == "fp16_workaround");
  CHECK(r->op()->input1("x") == g.x());
  pass_util::NameSanitizer s("var_");
  CHECK(s.sanitize("a.b") == "a_b");
  CHECK(s.sanitize("a-b") == "a_b_0");
  CHECK(s.sanitize("a:b") == "a_b_0_1");
  CHECK(s.sanitize("9x") == "var_9x");
  // kept names are remembered (a later changed name avoids them), without copies
  std::string out = "untouched";
  CHECK_FALSE(s.sanitize_changed("ok_name", out));
  CHECK(out == "untouched");
  CHECK(s.sanitize_changed("ok.name", out));
  CHECK(out == "ok_name_0");
  CHECK(s.sanitize("") == "");
  CHECK(s.sanitize("bool") == "bool_workaround");
  CHECK(s.sanitize("caf\xc3\xa9") == "caf_");
}

TEST_CASE("pass_util::NameSet: copies of the names, growth, empty names", "[passes]") {
  pass_util::NameSet set;
  std::vector<std::string> names;
  for (int i = 0; i < 5000; ++i)
    names.push_back("name_" + std::to_string(i) + std::string(i % 40, 'x'));
  for (auto& n : names) CHECK(set.insert(n));
  for (auto& n : names) CHECK_FALSE(set.insert(n));
  std::string tmp = names[7];
  names.clear();  // the set keeps its own copies
  CHECK(set.contains(tmp));
  CHECK_FALSE(set.contains("name_7"));
  CHECK_FALSE(set.contains(""));
  CHECK(set.insert(""));
  CHECK(set.contains(""));
  CHECK_FALSE(set.insert(""));
  // views of the caller's strings, mixed with copies, across growth
  std::vector<std::string> kept;
  for (int i = 0; i < 3000; ++i) kept.push_back("kept_name_number_" + std::to_string(i));
  for (auto& n : kept) CHECK(set.insert_view(n));
  CHECK_FALSE(set.insert("kept_name_number_17"));
  CHECK_FALSE(set.insert_view(tmp));
  CHECK(set.contains("kept_name_number_2999"));
  CHECK_FALSE(set.contains("kept_name_number_3000"));
}

TEST_CASE("lower_complex_dialect_ops: complex64 stays internal, abs(fft) lowers to core ops only",
          "[passes][complex]") {
  CHECK(dtype_name(DataType::Complex64) == "complex64");
  CHECK(dtype_from_name("complex64") == DataType::Complex64);
  CHECK_FALSE(
      is_valid_dtype_code(static_cast<int>(DataType::Complex64)));  // never a MIL.proto code
  CHECK_THROWS_AS(promote_dtypes(DataType::Complex64, DataType::Float32), TypeError);
  const auto dialect = OpRegistry::instance().dialect_names();
  CHECK(dialect.size() == 14);
  for (const auto& n : OpRegistry::instance().names(Target::iOS18))
    CHECK(n.rfind("complex", 0) != 0);

  Prog g;
  Var* c = g.b.op("complex_fft", {{"data", g.x()}});
  CHECK(c->type()->dtype() == DataType::Complex64);
  Var* a = g.b.op("complex_abs", {{"x", c}});
  g.f->body().set_outputs({a});
  g.run({"common::lower_complex_dialect_ops", "common::dead_code_elimination"});
  for (Operation* op : g.f->body().ops()) CHECK(op->schema().dialect.empty());
  CHECK(g.f->body().outputs()[0]->name() == "complex_abs_0");
  CHECK(g.f->body().outputs()[0]->op()->op_type() == "sqrt");
  CHECK_NOTHROW(verify(*g.f, "main"));
}

TEST_CASE("lower_complex_dialect_ops: a complex function output is refused before any change",
          "[passes][complex]") {
  Prog g;
  Var* c = g.b.op("complex", {{"real_data", g.x()}, {"imag_data", g.x()}});
  g.f->body().set_outputs({c});
  try {
    g.run({"common::lower_complex_dialect_ops"});
    FAIL("complex output accepted");
  } catch (const ValueError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("complex data as model's output"));
  }
  CHECK(g.f->body().outputs()[0] == c);
}

#include "Model.pb.h"
#include "milkit/serde/proto_reader.h"
#include "milkit/serde/proto_writer.h"

TEST_CASE("image inputs: NHWC preprocess, scale and bias ops, description, read back",
          "[passes][serde]") {
  Program p;
  auto fn = std::make_shared<Function>(Target::iOS17);
  Context& ctx = fn->ctx();
  auto hs = Symbol::fresh();
  hs->set_range(4, 16);
  Dim h = ctx.symbol(hs);
  Var* x = fn->add_input(
      "x", ctx.tensor(DataType::Float32, {ctx.constant(1), h, ctx.constant(5), ctx.constant(3)}));
  p.add_function("main", fn);
  Builder b(*fn);
  Var* r = b.op("relu", {{"x", x}});
  fn->body().set_outputs({r, x});
  ImageInput im;
  im.input = 0;
  im.color_layout = ColorLayout::BGR;
  im.scale = 0.5;
  im.bias = {1, 2, 3};
  im.channel_first = false;
  im.default_shape = {1, 8, 5, 3};
  fn->image_inputs().push_back(im);
  fn->image_outputs().push_back(ImageOutput{0, ColorLayout::RGB});
  PassManager pm;
  pm.add("common::image_input_preprocess");
  pm.add("mil_backend::insert_image_preprocessing_ops");
  pm.run(p, true);
  std::vector<std::string> ops;
  for (Operation* op : fn->body().ops()) ops.push_back(op->op_type() + ":" + op->name());
  CHECK(ops == std::vector<std::string>{"const:x__scaled___y_0", "mul:x__scaled__",
                                        "const:x__biased___y_0", "add:x__biased__",
                                        "const:x__transpose_from_nchw___perm_0",
                                        "transpose:x__transpose_from_nchw__", "relu:relu_0"});
  CHECK(x->type()->shape()[1]->value() == 3);  // NCHW now
  CHECK(fn->body().outputs()[1]->name() == "x__transpose_from_nchw__");
  const ImageInput& done = fn->image_inputs()[0];
  CHECK(done.channel_first);
  CHECK(done.scale == 1);
  CHECK(done.bias.empty());
  CHECK(done.default_shape == std::vector<int64_t>{1, 3, 8, 5});
  CHECK_NOTHROW(verify(*fn, "main"));

  // the RGB output is NHWC (1, H, 5, 3): not an image shape
  ProtoWriteOptions o;
  o.target = Target::iOS17;
  CHECK_THROWS_AS(write_model_proto(p, o), ValueError);
  fn->image_outputs().clear();
  std::string bytes = write_model_proto(p, o);
  CoreML::Specification::Model m;
  REQUIRE(m.ParseFromString(bytes));
  const auto& it = m.description().input(0).type().imagetype();
  CHECK(it.colorspace() == CoreML::Specification::ImageFeatureType::BGR);
  CHECK(it.height() == 8);
  CHECK(it.width() == 5);
  CHECK(it.imagesizerange().heightrange().lowerbound() == 4);
  CHECK(it.imagesizerange().heightrange().upperbound() == 16);
  CHECK(it.imagesizerange().widthrange().lowerbound() == 5);
  CHECK(it.imagesizerange().widthrange().upperbound() == 5);
  auto back = read_model_proto(bytes, nullptr, "t");
  const Function* g = back->function("main");
  REQUIRE(g->image_inputs().size() == 1);
  CHECK(g->image_inputs()[0].color_layout == ColorLayout::BGR);
  CHECK(g->image_inputs()[0].default_shape == std::vector<int64_t>{1, 3, 8, 5});
  Dim gh = g->inputs()[0]->type()->shape()[2];
  CHECK(gh->symbol()->lo() == 4);
  CHECK(gh->symbol()->hi() == 16);
  CoreML::Specification::Model m2;
  REQUIRE(m2.ParseFromString(write_model_proto(*back, o)));
  REQUIRE(m2.description().input_size() == 1);
  CHECK(m2.description().input(0).SerializeAsString() ==
        m.description().input(0).SerializeAsString());
  CHECK(m2.description().output(1).SerializeAsString() ==
        m.description().output(1).SerializeAsString());
}

#include <unistd.h>

#include <cstdio>

#include "milkit/serde/blob.h"

TEST_CASE(
    "fuse_conv_batchnorm: the folded weight stays lazy through fp16 casting and is streamed "
    "to the weight file",
    "[passes][serde]") {
  // 64 x 32 x 3 x 3 = 18,432 fp32 weights (above the lazy fp16 cast threshold)
  const int64_t co = 64, ci = 32;
  Program p;
  auto fn = std::make_shared<Function>(Target::iOS17);
  Context& ctx = fn->ctx();
  Var* x = fn->add_input("x", ctx.tensor(DataType::Float32, std::vector<int64_t>{1, ci, 5, 5}));
  p.add_function("main", fn);
  Builder b(*fn);
  auto wkeep = std::make_shared<std::vector<float>>(static_cast<size_t>(co * ci * 9));
  for (size_t i = 0; i < wkeep->size(); ++i) (*wkeep)[i] = std::sin(static_cast<float>(i)) * 0.5f;
  auto wval =
      std::make_shared<const Value>(DataType::Float32, std::vector<int64_t>{co, ci, 3, 3},
                                    Buffer::borrow(wkeep->data(), wkeep->size() * 4, wkeep));
  std::vector<double> gamma, beta, mean, var;
  for (int64_t c = 0; c < co; ++c) {
    gamma.push_back(0.5 + 0.01 * static_cast<double>(c));
    beta.push_back(-0.1 * static_cast<double>(c % 5));
    mean.push_back(0.02 * static_cast<double>(c));
    var.push_back(1.0 + 0.03 * static_cast<double>(c));
  }
  auto vec = [&](const std::vector<double>& d) {
    return b.add_const(
        std::make_shared<const Value>(Value::from_doubles(DataType::Float32, {co}, d)));
  };
  Var* conv = b.op("conv", {{"x", x}, {"weight", b.add_const(wval, "w")}});
  Var* bn = b.op("batch_norm", {{"x", conv},
                                {"mean", vec(mean)},
                                {"variance", vec(var)},
                                {"gamma", vec(gamma)},
                                {"beta", vec(beta)}});
  fn->body().set_outputs({bn});
  PassManager pm;
  for (const char* n :
       {"common::fuse_conv_batchnorm", "common::add_fp16_cast", "common::const_elimination",
        "common::dead_code_elimination", "common::const_deduplication"})
    pm.add(n);
  pm.run(p, true);
  Operation* c = nullptr;
  for (Operation* op : fn->body().ops())
    if (op->op_type() == "conv") c = op;
  REQUIRE(c);
  Var* fw = c->input1("weight");
  REQUIRE(fw->has_value());
  const Value& fv = *fw->value();
  CHECK(fv.dtype() == DataType::Float16);
  CHECK(fv.buffer()->lazy());  // neither the fold nor the fp16 passes made a copy of the weights
  // the weight writer streams it: the stored bytes are the folded weights rounded to fp16
  std::string path = "/tmp/milkit_lazy_fold_" + std::to_string(::getpid()) + ".bin";
  uint64_t off;
  {
    BlobWriter w(path);
    off = w.write(fv);
    w.close(false);
  }
  CHECK(fv.buffer()->lazy());
  Value back = BlobReader::open(path)->read(off, DataType::Float16, {co, ci, 3, 3});
  const auto* h = reinterpret_cast<const uint16_t*>(back.raw());
  for (int64_t oc = 0; oc < co; ++oc) {
    auto s = static_cast<float>(gamma[oc]) / std::sqrt(static_cast<float>(var[oc]) + 1e-5f);
    for (int64_t k = 0; k < ci * 9; ++k) {
      size_t f = static_cast<size_t>(oc * ci * 9 + k);
      REQUIRE(h[f] == float_to_half((*wkeep)[f] * s));
    }
  }
  std::remove(path.c_str());
}

// ---- what Pass::run reports
// ----------------------------------------------------------------------

#include <functional>

#include "milkit/serde/text.h"

namespace {

// The whole program as text, consts and their values included.
std::string full_text(const Program& p) {
  ProgramTextOptions o;
  o.consts = true;
  return program_to_text(p, o);
}

Var* const_f32(Builder& b, std::vector<int64_t> shape, std::vector<double> v) {
  return b.add_const(
      std::make_shared<const Value>(Value::from_doubles(DataType::Float32, std::move(shape), v)));
}

// relu(relu(x)) * 0.5, max'ed with x (a leaky relu), plus an unused op and a foldable add
void build_activations(Prog& g) {
  Var* r1 = g.b.op("relu", {{"x", g.x()}});
  Var* r2 = g.b.op("relu", {{"x", r1}});
  Var* half = const_f32(g.b, {}, {0.5});
  Var* m = g.b.op("mul", {{"x", g.x()}, {"y", half}});
  Var* mx = g.b.op("maximum", {{"x", g.x()}, {"y", m}});
  g.b.op("sigmoid", {{"x", g.x()}});  // unused
  Var* c1 = const_f32(g.b, {3}, {1, 2, 3});
  Var* c2 = const_f32(g.b, {3}, {1, 1, 1});
  Var* folded = g.b.op("add", {{"x", c1}, {"y", c2}});
  Var* y = g.b.op("add", {{"x", r2}, {"y", folded}});
  g.f->body().set_outputs({y, mx});
}

// sigmoid(x) * x (silu), two transposes that cancel, a divide by a const, a cast to the same dtype
void build_shapes(Prog& g) {
  Var* s = g.b.op("sigmoid", {{"x", g.x()}});
  Var* silu = g.b.op("mul", {{"x", g.x()}, {"y", s}});
  std::vector<Arg> t1{Builder::arg("x", silu), Builder::arg("perm", Value::int_list({1, 0}))};
  Var* a = g.b.create("transpose", t1).at(0);
  std::vector<Arg> t2{Builder::arg("x", a), Builder::arg("perm", Value::int_list({1, 0}))};
  Var* back = g.b.create("transpose", t2).at(0);
  Var* d = g.b.op("real_div", {{"x", back}, {"y", const_f32(g.b, {}, {4.0})}});
  g.f->body().set_outputs({g.cast(d, "fp32")});
}

// relu(x): nothing for most passes to do
void build_clean(Prog& g) { g.f->body().set_outputs({g.b.op("relu", {{"x", g.x()}})}); }

bool run_one(Program& p, const std::string& name) {
  return PassRegistry::instance().create(name)->run(p, {});
}

}  // namespace

TEST_CASE("Pass::run reports whether it changed the program", "[passes]") {
  struct Case {
    const char* pass;
    std::function<void(Prog&)> build;
  };
  const std::vector<Case> cases = {
      {"common::dead_code_elimination", build_activations},
      {"common::const_elimination", build_activations},
      {"common::merge_consecutive_relus", build_activations},
      {"common::fuse_leaky_relu", build_activations},
      {"mil_backend::fuse_activation_silu", build_shapes},
      {"common::merge_consecutive_transposes", build_shapes},
      {"common::divide_to_multiply", build_shapes},
      {"common::cast_optimization", build_shapes},
  };
  for (const Case& c : cases) {
    INFO(c.pass);
    Prog g;
    c.build(g);
    const std::string before = full_text(g.p);
    CHECK(run_one(g.p, c.pass));
    CHECK(full_text(g.p) != before);
    CHECK_NOTHROW(verify(*g.f, "main"));
    // run again to a fixed point: nothing left to do
    while (run_one(g.p, c.pass)) {
    }
    const std::string settled = full_text(g.p);
    CHECK_FALSE(run_one(g.p, c.pass));
    CHECK(full_text(g.p) == settled);

    Prog clean;
    build_clean(clean);
    const std::string clean_before = full_text(clean.p);
    CHECK_FALSE(run_one(clean.p, c.pass));
    CHECK(full_text(clean.p) == clean_before);
  }
}

TEST_CASE("every registered pass that reports no change leaves the printed program as it was",
          "[passes]") {
  const std::vector<std::function<void(Prog&)>> builders = {build_activations, build_shapes,
                                                            build_clean};
  const std::vector<Target> targets = {Target::iOS16, Target::iOS18};
  size_t runs = 0, unchanged = 0;
  for (const std::string& name : PassRegistry::instance().names()) {
    for (Target target : targets)
      for (const auto& build : builders) {
        INFO(name);
        Prog g(DataType::Float32, target);
        build(g);
        // twice: the second run sees the first one's result, often a fixed point
        for (int round = 0; round < 2; ++round) {
          const std::string before = full_text(g.p);
          bool changed = false;
          try {
            changed = run_one(g.p, name);
          } catch (const Error&) {
            break;  // a pass that refuses this program (and says why) is not under test here
          }
          ++runs;
          if (changed) continue;
          ++unchanged;
          CHECK(full_text(g.p) == before);
        }
      }
  }
  CHECK(runs >= PassRegistry::instance().names().size() * 6);
  CHECK(unchanged > 0);
}

TEST_CASE("PassManager lists the passes that changed the program and skips clean reruns",
          "[passes]") {
  Prog g;
  build_activations(g);
  PassManager pm;
  pm.add("common::dead_code_elimination");
  pm.add("common::merge_consecutive_relus");
  std::vector<std::string> changed;
  pm.run(g.p, true, false, &changed);
  CHECK(changed == std::vector<std::string>{"common::dead_code_elimination",
                                            "common::merge_consecutive_relus"});
  PassManager cleanup;
  cleanup.add("common::dead_code_elimination");
  cleanup.add("common::dead_code_elimination");
  changed.clear();
  cleanup.run(g.p, true, false, &changed);
  CHECK(changed.size() <= 1);  // the relu the merge left unused, if any
  CHECK(PassRegistry::instance().traits("common::dead_code_elimination").skip_rerun_when_unchanged);
  CHECK_FALSE(PassRegistry::instance().traits("common::fuse_leaky_relu").skip_rerun_when_unchanged);
  // the last run changed nothing: the function is marked clean for it until something changes
  for (auto& [name, f] : g.p.functions()) CHECK(f->is_clean("common::dead_code_elimination", &g.p));
}
