// Pattern-pass helpers: has_op_type, can_be_replaced (constexpr dependencies) and
// replace_uses_after (coremltools' replace_uses_of_var_after_op with a later anchor).
#include <catch2/catch.hpp>

#include "milkit/builder/builder.h"
#include "milkit/ir/verify.h"
#include "milkit/passes/match_util.h"
#include "milkit/types/error.h"

using namespace milkit;

namespace {

std::shared_ptr<Function> make_fn(Target t) {
  auto fn = std::make_shared<Function>(t);
  fn->add_input("x", fn->ctx().tensor(DataType::Float32, std::vector<int64_t>{4}));
  return fn;
}

Var* affine(Builder& b, const std::string& name) {
  std::vector<Arg> a = {
      Builder::arg("quantized_data", Value::from_ints(DataType::UInt8, {4}, {1, 2, 3, 4})),
      Builder::arg("zero_point", Value::scalar_int(DataType::UInt8, 1)),
      Builder::arg("scale", Value::scalar_float(DataType::Float32, 0.5)),
      Builder::arg("axis", Value::scalar_int(DataType::Int32, 0))};
  return b.create("constexpr_affine_dequantize", a, name).at(0);
}

}  // namespace

TEST_CASE("has_op_type finds an op type anywhere in the function", "[passes]") {
  auto fn = make_fn(Target::iOS17);
  Builder b(*fn);
  Var* r = b.op("relu", {{"x", fn->inputs()[0]}});
  fn->body().set_outputs({b.op("sigmoid", {{"x", r}})});
  CHECK(pass_util::has_op_type(*fn, {"relu"}));
  CHECK(pass_util::has_op_type(*fn, {"conv", "sigmoid"}));
  CHECK_FALSE(pass_util::has_op_type(*fn, {"conv", "gather"}));
  CHECK_FALSE(pass_util::has_op_type(*fn, {"rel"}));  // whole names only
}

TEST_CASE("can_be_replaced keeps constexpr dependencies", "[passes]") {
  auto fn = make_fn(Target::iOS16);
  Builder b(*fn);
  Var* x = fn->inputs()[0];
  Var* w = affine(b, "w");
  Var* with_w = b.op("add", {{"x", x}, {"y", w}});
  Var* plain = b.op("relu", {{"x", x}});
  Var* shape = b.op("shape", {{"x", with_w}});  // shape outputs depend on nothing
  Var* both = b.op("mul", {{"x", with_w}, {"y", plain}});
  CHECK(pass_util::can_be_replaced(plain, with_w));
  CHECK_FALSE(pass_util::can_be_replaced(with_w, plain));
  CHECK(pass_util::can_be_replaced(with_w, both));
  CHECK(pass_util::can_be_replaced(shape, plain));
  CHECK_FALSE(pass_util::can_be_replaced(w, affine(b, "w2")));  // another constexpr
}

TEST_CASE("replace_uses_after moves only later uses and renames a function output", "[passes]") {
  auto fn = make_fn(Target::iOS17);
  Builder b(*fn);
  Var* x = fn->inputs()[0];
  Var* a = b.op("relu", {{"x", x}}, "a");
  Var* early = b.op("exp", {{"x", a}}, "early");
  Var* anchor = b.op("sigmoid", {{"x", a}}, "anchor");
  Var* late = b.op("add", {{"x", a}, {"y", a}}, "late");
  fn->body().set_outputs({early, late, a});
  pass_util::replace_uses_after(anchor->op(), a, anchor);
  CHECK(early->op()->input1("x") == a);
  CHECK(anchor->op()->input1("x") == a);
  CHECK(late->op()->input1("x") == anchor);
  CHECK(late->op()->input1("y") == anchor);
  CHECK(fn->body().outputs()[2] == anchor);
  CHECK(anchor->name() == "a");  // as coremltools: the output keeps its name (a shares it)
  CHECK_THROWS_AS(pass_util::replace_uses_after(anchor->op(), late, x),
                  ValueError);  // input rename
}
