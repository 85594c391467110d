// C++-level type and value inference of the elementwise unary and activation ops.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>

#include "milkit/builder/builder.h"
#include "milkit/types/error.h"

using namespace milkit;

namespace {

struct Fixture {
  explicit Fixture(Target t = Target::iOS17) : fn(std::make_shared<Function>(t)), b(*fn) {}
  Context& ctx() { return fn->ctx(); }
  std::shared_ptr<Function> fn;
  Builder b;
};

std::vector<Arg> args(std::vector<Arg> a) { return a; }

}  // namespace

TEST_CASE("unary ops keep the type of x, cast and logical_not change the dtype", "[unary]") {
  Fixture f;
  Dim s = f.ctx().symbol(Symbol::create("S"));
  const Type* t = f.ctx().tensor(DataType::Float16, std::vector<Dim>{f.ctx().constant(2), s});
  Var* x = f.fn->add_input("x", t);

  CHECK(f.b.op("exp", {{"x", x}})->type() == t);
  CHECK(f.b.op("sqrt", {{"x", x}})->type() == t);

  auto a = args({Builder::arg("x", x), Builder::arg("dtype", Value::scalar_string("int16"))});
  Var* c = f.b.create("cast", a).at(0);
  CHECK(c->type() == f.ctx().tensor(DataType::Int16, std::vector<Dim>{f.ctx().constant(2), s}));
  CHECK(c->type()->str() == "(2, S, int16)");

  Var* xb = f.fn->add_input("xb", f.ctx().tensor(DataType::Bool, std::vector<int64_t>{3}));
  CHECK(f.b.op("logical_not", {{"x", xb}})->type()->dtype() == DataType::Bool);
}

TEST_CASE("log materializes a default epsilon of x's dtype", "[unary]") {
  Fixture f;
  Var* x = f.fn->add_input("x", f.ctx().tensor(DataType::Float16, std::vector<int64_t>{4}));
  Var* y = f.b.op("log", {{"x", x}});
  Operation* op = y->op();
  REQUIRE(op->args().size() == 2);
  Var* eps = op->args()[1];
  CHECK(eps->name() == "log_0_epsilon_0");
  CHECK(eps->type() == f.ctx().scalar(DataType::Float16));
  CHECK(eps->value()->as_double(0) == 0.0);  // 1e-45 underflows in fp16, as np.float16(1e-45)
}

TEST_CASE("cast folds with numpy semantics and keeps symbols of a rank-1 value", "[unary]") {
  Fixture f;
  auto a = args({Builder::arg("x", Value::from_doubles(DataType::Float32, {4}, {3e9, -2.7, 300, NAN})),
                 Builder::arg("dtype", Value::scalar_string("int8"))});
  Var* y = f.b.create("cast", a).at(0);
  REQUIRE(y->has_value());
  CHECK(y->value()->to_ints() == std::vector<int64_t>{0, -2, 44, 0});

  Dim s = f.ctx().symbol(Symbol::create("S"));
  Var* shp = f.b.add_const(std::make_shared<const Value>(
      Value::from_dims(DataType::Int32, {2}, {s, f.ctx().constant(4)})));
  auto a2 = args({Builder::arg("x", shp), Builder::arg("dtype", Value::scalar_string("fp32"))});
  Var* z = f.b.create("cast", a2).at(0);
  REQUIRE(z->value());
  CHECK(z->value()->is_symbolic());
  CHECK(z->value()->dtype() == DataType::Float32);
  CHECK(z->value()->dims()[0] == s);
  CHECK(z->value()->dims()[1]->value() == 4);
}

TEST_CASE("cast rejects unsupported dtype names, per opset", "[unary][error]") {
  Fixture f15(Target::iOS15);
  Var* x = f15.fn->add_input("x", f15.ctx().tensor(DataType::Float32, std::vector<int64_t>{2}));
  auto a = args({Builder::arg("x", x), Builder::arg("dtype", Value::scalar_string("int8"))});
  CHECK_THROWS_WITH(f15.b.create("cast", a),
                    Catch::Contains("cast 'cast_0'") && Catch::Contains("dtype") &&
                        Catch::Contains("Provided 'int8'"));
  Fixture f17(Target::iOS17);
  Var* x17 = f17.fn->add_input("x", f17.ctx().tensor(DataType::Float32, std::vector<int64_t>{2}));
  auto b = args({Builder::arg("x", x17), Builder::arg("dtype", Value::scalar_string("int8"))});
  CHECK(f17.b.create("cast", b).at(0)->type()->dtype() == DataType::Int8);
}

TEST_CASE("iOS17 activations accept alpha of another float dtype", "[activation]") {
  for (Target t : {Target::iOS16, Target::iOS17}) {
    Fixture f(t);
    Var* x = f.fn->add_input("x", f.ctx().tensor(DataType::Float16, std::vector<int64_t>{2, 3}));
    auto a = args({Builder::arg("x", x), Builder::arg("alpha", Value::scalar_float(DataType::Float32, 0.1))});
    if (t == Target::iOS16) {
      CHECK_THROWS_AS(f.b.create("leaky_relu", a), TypeError);
    } else {
      CHECK(f.b.create("leaky_relu", a).at(0)->type() == x->type());
    }
  }
}

TEST_CASE("activation folding and the silu exception", "[activation]") {
  Fixture f;
  auto a = args({Builder::arg("x", Value::from_doubles(DataType::Float32, {3}, {-2, 0, 3}))});
  Var* r = f.b.create("relu", a).at(0);
  REQUIRE(r->has_value());
  CHECK(r->value()->to_doubles() == std::vector<double>{0, 0, 3});

  auto s = args({Builder::arg("x", Value::from_doubles(DataType::Float32, {3}, {-2, 0, 3}))});
  CHECK_FALSE(f.b.create("silu", s).at(0)->value());

  auto sm = args({Builder::arg("x", Value::from_doubles(DataType::Float32, {2, 2}, {0, 0, 1, 1}))});
  Var* y = f.b.create("softmax", sm).at(0);
  REQUIRE(y->has_value());
  for (double v : y->value()->to_doubles()) CHECK(v == Approx(0.5));
  CHECK(y->op()->args()[1]->name() == "softmax_0_axis_0");
}

TEST_CASE("prelu checks rank and channel dim, symbolic channels fail", "[activation][error]") {
  Fixture f;
  Dim c = f.ctx().symbol(Symbol::create("C"));
  Var* x = f.fn->add_input("x", f.ctx().tensor(DataType::Float32, std::vector<Dim>{f.ctx().constant(1), c,
                                                                    f.ctx().constant(4), f.ctx().constant(4)}));
  auto a = args({Builder::arg("x", x), Builder::arg("alpha", Value::from_doubles(DataType::Float32, {3}, {1, 2, 3}))});
  CHECK_THROWS_WITH(f.b.create("prelu", a),
                    Catch::Contains("prelu 'prelu_0'") && Catch::Contains("dimension 1 of x (C)"));
  Var* x2 = f.fn->add_input("x2", f.ctx().tensor(DataType::Float32, std::vector<int64_t>{2, 3}));
  auto b = args({Builder::arg("x", x2), Builder::arg("alpha", Value::from_doubles(DataType::Float32, {3}, {1, 2, 3}))});
  CHECK_THROWS_AS(f.b.create("prelu", b), ValueError);
  Var* x3 = f.fn->add_input("x3", f.ctx().tensor(DataType::Float32, std::vector<Dim>{f.ctx().constant(1), f.ctx().constant(3), c}));
  auto d = args({Builder::arg("x", x3), Builder::arg("alpha", Value::from_doubles(DataType::Float32, {3}, {.5, .5, .5}))});
  CHECK(f.b.create("prelu", d).at(0)->type() == x3->type());
}

TEST_CASE("clip validates alpha < beta from iOS17 only", "[unary][error]") {
  for (Target t : {Target::iOS15, Target::iOS17}) {
    Fixture f(t);
    Var* x = f.fn->add_input("x", f.ctx().tensor(DataType::Float32, std::vector<int64_t>{2}));
    auto a = args({Builder::arg("x", x), Builder::arg("alpha", Value::scalar_float(DataType::Float32, 2)),
                   Builder::arg("beta", Value::scalar_float(DataType::Float32, 1))});
    if (t == Target::iOS15)
      CHECK_NOTHROW(f.b.create("clip", a));
    else
      CHECK_THROWS_WITH(f.b.create("clip", a), Catch::Contains("clip 'clip_0'") &&
                                                   Catch::Contains("should be smaller than `beta`"));
  }
}
