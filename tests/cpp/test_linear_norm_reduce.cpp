// Type inference of linear, matmul, the normalizations and the reductions, incl. symbolic dims
// and errors.
#include <catch2/catch.hpp>

#include <memory>

#include "milkit/builder/builder.h"
#include "milkit/ir/ir.h"
#include "milkit/types/error.h"

using namespace milkit;

namespace {

struct Fx {
  std::shared_ptr<Function> fn;
  Context& c;
  Builder b;
  std::shared_ptr<Symbol> S = Symbol::create("S");
  std::shared_ptr<Symbol> T = Symbol::create("T");
  explicit Fx(Target t = Target::iOS17)
      : fn(std::make_shared<Function>(t)), c(fn->ctx()), b(*fn) {}
  Dim s() { return c.symbol(S); }
  Dim t() { return c.symbol(T); }
  Dim k(int64_t v) { return c.constant(v); }
  Var* input(const std::string& n, std::vector<Dim> shape, DataType dt = DataType::Float32) {
    return fn->add_input(n, c.tensor(dt, shape));
  }
  const Type* ty(std::vector<Dim> shape, DataType dt = DataType::Float32) { return c.tensor(dt, shape); }
  Var* call(const std::string& op, std::vector<Arg> args) { return b.create(op, args).at(0); }
};

Value ones(DataType dt, std::vector<int64_t> shape) {
  return Value::from_doubles(dt, shape, std::vector<double>(static_cast<size_t>(shape_numel(shape)), 1.0));
}

}  // namespace

TEST_CASE("linear: shapes, default bias, symbolic", "[linear]") {
  Fx f;
  Var* x = f.input("x", {f.k(1), f.s(), f.k(4)});
  Var* y = f.call("linear", {Builder::arg("x", x), Builder::arg("weight", ones(DataType::Float32, {5, 4}))});
  CHECK(y->type() == f.ty({f.k(1), f.s(), f.k(5)}));
  Var* bias = f.fn->find_var("linear_0_bias_0");
  REQUIRE(bias != nullptr);
  CHECK(bias->type() == f.ty({f.k(5)}));
  CHECK(bias->value()->to_doubles() == std::vector<double>(5, 0.0));
  // a symbolic D_in is accepted
  Var* x2 = f.input("x2", {f.k(2), f.t()});
  CHECK(f.call("linear", {Builder::arg("x", x2), Builder::arg("weight", ones(DataType::Float32, {3, 7}))})
            ->type() == f.ty({f.k(2), f.k(3)}));
}

TEST_CASE("linear: iOS17 mixed precision, default bias takes weight dtype", "[linear]") {
  Fx f;
  Var* x = f.input("x", {f.k(2), f.k(4)});
  Var* y = f.call("linear", {Builder::arg("x", x), Builder::arg("weight", ones(DataType::Float16, {5, 4}))});
  CHECK(y->type() == f.ty({f.k(2), f.k(5)}, DataType::Float32));
  CHECK(f.fn->find_var("linear_0_bias_0")->type()->dtype() == DataType::Float16);
  Fx g(Target::iOS16);
  Var* gx = g.input("x", {g.k(2), g.k(4)});
  CHECK_THROWS_AS(g.call("linear", {Builder::arg("x", gx), Builder::arg("weight", ones(DataType::Float16, {5, 4}))}),
                  TypeError);
}

TEST_CASE("linear: errors", "[linear]") {
  Fx f;
  Var* x = f.input("x", {f.k(2), f.k(3)});
  CHECK_THROWS_WITH(
      f.call("linear", {Builder::arg("x", x), Builder::arg("weight", ones(DataType::Float32, {5, 4}))}),
      Catch::Contains("linear 'linear_0'") && Catch::Contains("(2, 3)") && Catch::Contains("(5, 4)") &&
          Catch::Contains("is 3") && Catch::Contains("is 4"));
  Var* x4 = f.input("x4", {f.k(2), f.k(4)});
  CHECK_THROWS_AS(f.call("linear", {Builder::arg("x", x4), Builder::arg("weight", ones(DataType::Float32, {5, 4})),
                                    Builder::arg("bias", ones(DataType::Float32, {3}))}),
                  ValueError);
  CHECK_THROWS_WITH(f.call("linear", {Builder::arg("x", x4), Builder::arg("weight", ones(DataType::Float32, {4}))}),
                    Catch::Contains("'weight' must have rank 2"));
}

TEST_CASE("linear: folds", "[linear]") {
  Fx f;
  Value x = Value::from_doubles(DataType::Float32, {1, 2}, {1.0, 2.0});
  Value w = Value::from_doubles(DataType::Float32, {3, 2}, {1, 0, 0, 1, 1, 1});
  Value b = Value::from_doubles(DataType::Float32, {3}, {10, 20, 30});
  Var* y = f.call("linear", {Builder::arg("x", x), Builder::arg("weight", w), Builder::arg("bias", b)});
  REQUIRE(y->has_value());
  CHECK(y->value()->to_doubles() == std::vector<double>{11, 22, 33});
  CHECK(y->value()->shape() == std::vector<int64_t>{1, 3});
}

TEST_CASE("matmul: batch broadcast with symbolic dims", "[matmul]") {
  Fx f;
  Var* a = f.input("a", {f.s(), f.k(3), f.k(4)});
  Var* b1 = f.input("b1", {f.k(1), f.k(4), f.k(5)});
  CHECK(f.call("matmul", {Builder::arg("x", a), Builder::arg("y", b1)})->type() ==
        f.ty({f.s(), f.k(3), f.k(5)}));
  Var* b2 = f.input("b2", {f.k(7), f.k(4), f.k(5)});
  // S against 7: broadcasting gives 7
  CHECK(f.call("matmul", {Builder::arg("x", a), Builder::arg("y", b2)})->type() ==
        f.ty({f.k(7), f.k(3), f.k(5)}));
  Var* b3 = f.input("b3", {f.k(2), f.s(), f.k(4), f.k(5)});
  CHECK(f.call("matmul", {Builder::arg("x", a), Builder::arg("y", b3)})->type() ==
        f.ty({f.k(2), f.s(), f.k(3), f.k(5)}));
  // transposes
  Var* c = f.input("c", {f.k(4), f.t()});
  Var* d = f.input("d", {f.k(6), f.k(4)});
  CHECK(f.call("matmul", {Builder::arg("x", c), Builder::arg("y", d), Builder::arg("transpose_x", Value::scalar_bool(true)),
                          Builder::arg("transpose_y", Value::scalar_bool(true))})
            ->type() == f.ty({f.t(), f.k(6)}));
}

TEST_CASE("matmul: rank-1 operands follow numpy", "[matmul]") {
  Fx f;
  Var* v = f.input("v", {f.k(4)});
  Var* m = f.input("m", {f.k(2), f.k(4), f.k(3)});
  Var* n = f.input("n", {f.s(), f.k(3), f.k(4)});
  CHECK(f.call("matmul", {Builder::arg("x", v), Builder::arg("y", m)})->type() == f.ty({f.k(2), f.k(3)}));
  CHECK(f.call("matmul", {Builder::arg("x", n), Builder::arg("y", v)})->type() == f.ty({f.s(), f.k(3)}));
  CHECK(f.call("matmul", {Builder::arg("x", v), Builder::arg("y", v)})->type()->is_scalar());
  CHECK_THROWS_WITH(f.call("matmul", {Builder::arg("x", v), Builder::arg("y", m),
                                      Builder::arg("transpose_x", Value::scalar_bool(true))}),
                    Catch::Contains("x is rank 1"));
}

TEST_CASE("matmul: inner dims", "[matmul]") {
  Fx f;
  // two unrelated symbols: not provably different, accepted
  Var* a = f.input("a", {f.k(3), f.s()});
  Var* b = f.input("b", {f.t(), f.k(5)});
  CHECK(f.call("matmul", {Builder::arg("x", a), Builder::arg("y", b)})->type() == f.ty({f.k(3), f.k(5)}));
  // S against S + 1: provably different
  Var* c = f.input("c", {f.c.add(f.s(), f.k(1)), f.k(5)});
  CHECK_THROWS_AS(f.call("matmul", {Builder::arg("x", a), Builder::arg("y", c)}), ValueError);
  // known ints
  Var* d = f.input("d", {f.k(3), f.k(4)});
  Var* e = f.input("e", {f.k(5), f.k(6)});
  CHECK_THROWS_WITH(f.call("matmul", {Builder::arg("x", d), Builder::arg("y", e)}),
                    Catch::Contains("matmul 'matmul_") && Catch::Contains("(3, 4)") && Catch::Contains("(5, 6)") &&
                        Catch::Contains("x: 4, y: 5"));
  // batch mismatch
  Var* g = f.input("g", {f.k(2), f.k(3), f.k(4)});
  Var* h = f.input("h", {f.k(3), f.k(4), f.k(4)});
  CHECK_THROWS_AS(f.call("matmul", {Builder::arg("x", g), Builder::arg("y", h)}), ValueError);
}

TEST_CASE("matmul: iOS17 dtypes", "[matmul]") {
  Fx f;
  Var* x = f.input("x", {f.k(2), f.k(4)});
  Var* y = f.call("matmul", {Builder::arg("x", x), Builder::arg("y", ones(DataType::Float16, {4, 3}))});
  CHECK(y->type() == f.ty({f.k(2), f.k(3)}, DataType::Float32));
  Var* z = f.call("matmul", {Builder::arg("x", ones(DataType::Float16, {3, 2})), Builder::arg("y", x)});
  CHECK(z->type() == f.ty({f.k(3), f.k(4)}, DataType::Float32));
  Var* w = f.input("w", {f.k(4), f.k(3)}, DataType::Float16);
  CHECK_THROWS_WITH(f.call("matmul", {Builder::arg("x", x), Builder::arg("y", w)}), Catch::Contains("non-const"));
}

TEST_CASE("matmul: folds with broadcasting and transposes", "[matmul]") {
  Fx f;
  Value a = Value::from_ints(DataType::Int32, {2, 1, 2}, {1, 2, 3, 4});
  Value b = Value::from_ints(DataType::Int32, {2, 2}, {1, 0, 1, 1});
  Var* y = f.call("matmul", {Builder::arg("x", a), Builder::arg("y", b), Builder::arg("transpose_y", Value::scalar_bool(true))});
  REQUIRE(y->has_value());
  CHECK(y->type() == f.ty({f.k(2), f.k(1), f.k(2)}, DataType::Int32));
  // [1,2]·[[1,0],[1,1]]^T = [1, 3]; [3,4] -> [3, 7]
  CHECK(y->value()->to_ints() == std::vector<int64_t>{1, 3, 3, 7});
}

TEST_CASE("reductions: shapes", "[reduction]") {
  Fx f;
  Var* x = f.input("x", {f.k(2), f.s(), f.k(4)});
  auto red = [&](const std::string& op, std::vector<int64_t> axes, bool keep, bool give_axes = true) {
    std::vector<Arg> args{Builder::arg("x", x), Builder::arg("keep_dims", Value::scalar_bool(keep))};
    if (give_axes) args.push_back(Builder::arg("axes", Value::int_list(axes)));
    return f.b.create(op, args).at(0)->type();
  };
  CHECK(red("reduce_sum", {1}, false) == f.ty({f.k(2), f.k(4)}));
  CHECK(red("reduce_mean", {-1}, true) == f.ty({f.k(2), f.s(), f.k(1)}));
  CHECK(red("reduce_max", {0, -1}, false) == f.ty({f.s()}));
  CHECK(red("reduce_prod", {}, false, false)->is_scalar());
  CHECK(red("reduce_l2_norm", {}, true, false) == f.ty({f.k(1), f.k(1), f.k(1)}));
  CHECK(red("reduce_log_sum_exp", {}, false) == f.ty({f.k(2), f.s(), f.k(4)}));
  CHECK_THROWS_WITH(red("reduce_sum", {3}, false), Catch::Contains("'axes' = 3 is out of range"));
  CHECK_THROWS_WITH(red("reduce_sum", {-4}, true), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(red("reduce_min", {1, -2}, false), Catch::Contains("more than once"));
  Var* b = f.input("b", {f.k(2)}, DataType::Bool);
  CHECK_THROWS_AS(f.call("reduce_sum", {Builder::arg("x", b)}), TypeError);
}

TEST_CASE("reductions: folding", "[reduction]") {
  Fx f;
  Value v = Value::from_ints(DataType::Int32, {2, 2}, {1, 2, 4, 4});
  Var* m = f.call("reduce_mean", {Builder::arg("x", v), Builder::arg("axes", Value::int_list({1}))});
  REQUIRE(m->has_value());
  CHECK(m->value()->to_ints() == std::vector<int64_t>{1, 4});  // 1.5 truncates
  Var* s = f.call("reduce_sum_square", {Builder::arg("x", v)});
  CHECK(s->type()->is_scalar());
  CHECK(s->value()->to_ints() == std::vector<int64_t>{37});
  Value fv = Value::from_doubles(DataType::Float32, {2, 2}, {1, 2, 4, 4});
  Var* l = f.call("reduce_log_sum_exp", {Builder::arg("x", fv), Builder::arg("axes", Value::int_list({0})),
                                         Builder::arg("keep_dims", Value::scalar_bool(true))});
  CHECK(l->value()->shape() == std::vector<int64_t>{1, 2});
  CHECK(l->value()->as_double(0) == Approx(4.0485873));
}

TEST_CASE("reduce_argmax / argmin: shapes, output_dtype, folding", "[reduction]") {
  Fx f;
  Var* x = f.input("x", {f.k(2), f.s(), f.k(4)});
  CHECK(f.call("reduce_argmax", {Builder::arg("x", x)})->type() == f.ty({f.k(2), f.s()}, DataType::Int32));
  CHECK(f.call("reduce_argmin", {Builder::arg("x", x), Builder::arg("axis", Value::scalar_int(DataType::Int32, 1)),
                                 Builder::arg("keep_dims", Value::scalar_bool(true)),
                                 Builder::arg("output_dtype", Value::scalar_string("uint16"))})
            ->type() == f.ty({f.k(2), f.k(1), f.k(4)}, DataType::UInt16));
  CHECK_THROWS_WITH(f.call("reduce_argmax", {Builder::arg("x", x), Builder::arg("output_dtype", Value::scalar_string("int8"))}),
                    Catch::Contains("output_dtype"));
  CHECK_THROWS_WITH(f.call("reduce_argmax", {Builder::arg("x", x), Builder::arg("axis", Value::scalar_int(DataType::Int32, -4))}),
                    Catch::Contains("out of range"));
  Value v = Value::from_doubles(DataType::Float32, {2, 3}, {1, 5, 5, 9, 0, 9});
  Var* a = f.call("reduce_argmax", {Builder::arg("x", v)});
  CHECK(a->value()->to_ints() == std::vector<int64_t>{1, 0});
  Var* b = f.call("reduce_argmin", {Builder::arg("x", v), Builder::arg("axis", Value::scalar_int(DataType::Int32, 0))});
  CHECK(b->value()->to_ints() == std::vector<int64_t>{0, 1, 0});
  // before iOS17 there is no output_dtype
  Fx g(Target::iOS16);
  Var* gx = g.input("x", {g.k(3)});
  CHECK_THROWS_AS(g.call("reduce_argmax", {Builder::arg("x", gx), Builder::arg("output_dtype", Value::scalar_string("int32"))}),
                  TypeError);
}

TEST_CASE("normalizations: types, defaults, errors", "[normalization]") {
  Fx f;
  Var* x = f.input("x", {f.s(), f.k(3), f.k(4)}, DataType::Float16);
  Var* bn = f.call("batch_norm", {Builder::arg("x", x), Builder::arg("mean", ones(DataType::Float32, {3})),
                                  Builder::arg("variance", ones(DataType::Float32, {3}))});
  CHECK(bn->type() == x->type());
  CHECK(f.fn->find_var("batch_norm_0_epsilon_0") != nullptr);
  CHECK(f.fn->find_var("batch_norm_0_gamma_0") == nullptr);
  CHECK_THROWS_WITH(f.call("batch_norm", {Builder::arg("x", x), Builder::arg("mean", ones(DataType::Float32, {4})),
                                          Builder::arg("variance", ones(DataType::Float32, {3}))}),
                    Catch::Contains("'mean' has length 4"));
  CHECK(f.call("instance_norm", {Builder::arg("x", x)})->type() == x->type());
  CHECK(f.call("local_response_norm", {Builder::arg("x", x), Builder::arg("size", Value::scalar_int(DataType::Int32, 3))})
            ->type() == x->type());
  CHECK(f.call("l2_norm", {Builder::arg("x", x)})->type() == x->type());
  Var* x2 = f.input("x2", {f.k(3), f.k(4)});
  CHECK_THROWS_WITH(f.call("l2_norm", {Builder::arg("x", x2)}), Catch::Contains("rank >= 3"));

  // layer_norm: default axes = every axis, gamma checked against x.shape[axes]
  Var* ln = f.call("layer_norm", {Builder::arg("x", x)});
  CHECK(ln->type() == x->type());
  Var* axes = f.fn->find_var("layer_norm_0_axes_0");
  REQUIRE(axes != nullptr);
  CHECK(axes->value()->to_ints() == std::vector<int64_t>{0, 1, 2});
  CHECK(f.call("layer_norm", {Builder::arg("x", x), Builder::arg("axes", Value::int_list({2, 1})),
                              Builder::arg("gamma", ones(DataType::Float32, {3, 4}))})
            ->type() == x->type());
  CHECK_THROWS_WITH(f.call("layer_norm", {Builder::arg("x", x), Builder::arg("axes", Value::int_list({-1})),
                                          Builder::arg("beta", ones(DataType::Float32, {3}))}),
                    Catch::Contains("'beta' has shape (3,)"));
  CHECK_THROWS_WITH(f.call("layer_norm", {Builder::arg("x", x), Builder::arg("axes", Value::int_list({3}))}),
                    Catch::Contains("out of range"));
  // a symbolic normalized dim accepts any size
  CHECK_NOTHROW(f.call("layer_norm", {Builder::arg("x", x), Builder::arg("axes", Value::int_list({0})),
                                      Builder::arg("gamma", ones(DataType::Float32, {9}))}));
}

TEST_CASE("normalizations: iOS16 params share x's dtype", "[normalization]") {
  Fx f(Target::iOS16);
  Var* x = f.input("x", {f.k(1), f.k(3), f.k(4)}, DataType::Float16);
  CHECK_THROWS_AS(f.call("batch_norm", {Builder::arg("x", x), Builder::arg("mean", ones(DataType::Float32, {3})),
                                        Builder::arg("variance", ones(DataType::Float32, {3}))}),
                  TypeError);
  Var* i = f.input("i", {f.k(1), f.k(3), f.k(4)}, DataType::Int32);
  CHECK_THROWS_AS(f.call("instance_norm", {Builder::arg("x", i)}), TypeError);
}

TEST_CASE("l2_norm and layer_norm fold", "[normalization]") {
  Fx f;
  Value v = Value::from_doubles(DataType::Float32, {1, 1, 2}, {3, 4});
  Var* l2 = f.call("l2_norm", {Builder::arg("x", v), Builder::arg("epsilon", Value::scalar_float(DataType::Float32, 0.0))});
  REQUIRE(l2->has_value());
  CHECK(l2->value()->as_double(0) == Approx(0.6));
  CHECK(l2->value()->as_double(1) == Approx(0.8));
  Var* ln = f.call("layer_norm", {Builder::arg("x", v), Builder::arg("axes", Value::int_list({-1})),
                                  Builder::arg("epsilon", Value::scalar_float(DataType::Float32, 0.0))});
  REQUIRE(ln->has_value());
  CHECK(ln->value()->as_double(0) == Approx(-1.0));
  CHECK(ln->value()->as_double(1) == Approx(1.0));
}

TEST_CASE("einsum: shapes and errors", "[linear]") {
  Fx f;
  Var* x = f.input("x", {f.k(1), f.k(3), f.s(), f.k(5)});
  Var* y = f.input("y", {f.t(), f.k(5), f.k(1), f.k(6)});
  Arg vals;
  vals.name = "values";
  vals.items = {ArgItem{x, nullptr}, ArgItem{y, nullptr}};
  std::vector<Arg> args{vals, Builder::arg("equation", Value::scalar_string("abcd,adce->abce"))};
  CHECK(f.b.create("einsum", args).at(0)->type() == f.ty({f.t(), f.k(3), f.s(), f.k(6)}));
  std::vector<Arg> bad{vals, Builder::arg("equation", Value::scalar_string("chw,whr->chr"))};
  CHECK_THROWS_WITH(f.b.create("einsum", bad), Catch::Contains("not supported for rank 4"));
  Var* z = f.input("z", {f.k(1), f.k(4), f.k(1), f.k(6)});
  Arg vals2;
  vals2.name = "values";
  vals2.items = {ArgItem{x, nullptr}, ArgItem{z, nullptr}};
  std::vector<Arg> mism{vals2, Builder::arg("equation", Value::scalar_string("nchw,nwhu->nchu"))};
  CHECK_THROWS_WITH(f.b.create("einsum", mism), Catch::Contains("contracted dims differ"));
}
