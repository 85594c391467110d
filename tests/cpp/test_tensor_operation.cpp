// Type and value inference of the tensor_operation ops and select, through the C++ Builder.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/ir/ir.h"
#include "milkit/types/error.h"

using namespace milkit;

namespace {

/// A function at `opset` with a builder and helpers to make args.
struct TB {
  std::shared_ptr<Function> fn;
  std::unique_ptr<Builder> b;
  Context* c;
  explicit TB(Target opset = Target::iOS17) {
    fn = std::make_shared<Function>(opset);
    b = std::make_unique<Builder>(*fn);
    c = &fn->ctx();
  }
  Dim sym(const std::string& n) { return c->symbol(Symbol::create(n)); }
  Var* input(const std::string& n, std::vector<Dim> shape, DataType dt = DataType::Float32) {
    return fn->add_input(n, c->tensor(dt, shape));
  }
  static Arg v(const std::string& n, Var* x) { return Builder::arg(n, x); }
  static Arg val(const std::string& n, Value x) { return Builder::arg(n, std::move(x)); }
  static Arg ints(const std::string& n, std::vector<int64_t> x) { return val(n, Value::int_list(x)); }
  static Arg i(const std::string& n, int64_t x) { return val(n, Value::scalar_int(DataType::Int32, x)); }
  static Arg tuple(const std::string& n, std::vector<Var*> xs) {
    Arg a;
    a.name = n;
    a.is_sequence = true;
    for (Var* x : xs) a.items.push_back(ArgItem{x, nullptr});
    return a;
  }
  std::vector<Var*> op(const std::string& t, std::vector<Arg> args) { return b->create(t, args, ""); }
  Var* op1(const std::string& t, std::vector<Arg> args) { return op(t, std::move(args)).at(0); }
  /// A const var holding a symbolic int32 value.
  Var* sym_const(std::vector<int64_t> shape, std::vector<Dim> d) {
    return b->add_const(std::make_shared<const Value>(Value::from_dims(DataType::Int32, shape, d)));
  }
};

std::string shp(const Var* v) { return v->type()->str(); }

}  // namespace

TEST_CASE("concat keeps exact symbolic sums", "[tensor_operation]") {
  TB t;
  Dim S = t.sym("S"), T = t.sym("T");
  Var* a = t.input("a", {S, t.c->constant(8)});
  Var* b = t.input("b", {T, t.c->constant(8)});
  Var* y = t.op1("concat", {TB::tuple("values", {a, b, a}), TB::i("axis", 0)});
  CHECK(shp(y) == "(2*S + T, 8, fp32)");
  CHECK(y->name() == "concat_0");
  // the default interleave const is materialized
  REQUIRE(y->op()->input("interleave").size() == 1);
  CHECK(y->op()->input("interleave")[0]->name() == "concat_0_interleave_0");
  // negative axis and static dims
  Var* z = t.op1("concat", {TB::tuple("values", {a, a}), TB::i("axis", -1)});
  CHECK(shp(z) == "(S, 16, fp32)");
}

TEST_CASE("concat errors name the dimension and both shapes", "[tensor_operation]") {
  TB t;
  Dim S = t.sym("S");
  Var* a = t.input("a", {S, t.c->constant(8)});
  Var* b = t.input("b", {t.c->add(S, t.c->constant(1)), t.c->constant(8)});
  Var* c = t.input("c", {S, t.c->constant(4)});
  // a proven symbolic conflict on a non-axis dim
  CHECK_THROWS_WITH(t.op("concat", {TB::tuple("values", {a, b}), TB::i("axis", 1)}),
                    Catch::Contains("dim 0") && Catch::Contains("S vs S + 1") &&
                        Catch::Contains("(S, 8)") && Catch::Contains("(S + 1, 8)"));
  CHECK_THROWS_WITH(t.op("concat", {TB::tuple("values", {a, c}), TB::i("axis", 0)}),
                    Catch::Contains("dim 1") && Catch::Contains("8 vs 4"));
  CHECK_THROWS_AS(t.op("concat", {TB::tuple("values", {}), TB::i("axis", 0)}), ValueError);
  CHECK_THROWS_WITH(t.op("concat", {TB::tuple("values", {a, c}), TB::i("axis", 2)}),
                    Catch::Contains("axis"));
  Var* h = t.input("h", {S, t.c->constant(8)}, DataType::Float16);
  CHECK_THROWS_AS(t.op("concat", {TB::tuple("values", {a, h}), TB::i("axis", 0)}), ValueError);
}

TEST_CASE("shape gives a symbolic value and concat propagates it", "[tensor_operation]") {
  TB t;
  Dim S = t.sym("S");
  Var* x = t.input("x", {S, t.c->constant(4)});
  Var* s = t.op1("shape", {TB::v("x", x)});
  CHECK(shp(s) == "(2, int32)");
  REQUIRE(s->value());
  CHECK(s->value()->is_symbolic());
  CHECK(!s->has_value());
  CHECK(s->value()->dims()[0] == S);
  CHECK(s->value()->dims()[1] == t.c->constant(4));

  auto parts = t.op("split", {TB::v("x", s), TB::i("num_splits", 2), TB::i("axis", 0)});
  REQUIRE(parts.size() == 2);
  CHECK(parts[0]->name() == "split_0_0");
  CHECK(parts[1]->name() == "split_0_1");
  Var* shape = t.op1("concat", {Arg{"values", {ArgItem{parts[0], nullptr},
                                              ArgItem{nullptr, std::make_shared<const Value>(
                                                                   Value::int_list({2, 2}))}},
                                    true},
                               TB::i("axis", 0)});
  CHECK(shape->op()->input("values")[1]->name() == "concat_0_values1_0");
  REQUIRE(shape->value());
  CHECK(shape->value()->to_dims(*t.c) == std::vector<Dim>{S, t.c->constant(2), t.c->constant(2)});
  // a consumer of the value gets exact dims
  Var* f = t.op1("fill", {TB::v("shape", shape)});
  CHECK(shp(f) == "(S, 2, 2, fp32)");
}

TEST_CASE("concat of small unknown tensors uses fresh symbols", "[tensor_operation]") {
  TB t;
  Var* x = t.input("x", {t.c->constant(2)}, DataType::Int32);
  Var* big = t.input("big", {t.c->constant(11)}, DataType::Int32);
  Var* y = t.op1("concat", {TB::tuple("values", {x, x}), TB::i("axis", 0)});
  REQUIRE(y->value());
  CHECK(y->value()->is_symbolic());
  CHECK(y->value()->dims()[0] != y->value()->dims()[2]);  // each element its own symbol
  Var* z = t.op1("concat", {TB::tuple("values", {big, x}), TB::i("axis", 0)});
  CHECK(!z->value());
  CHECK(shp(z) == "(13, int32)");
}

TEST_CASE("concat folds known values, with interleave", "[tensor_operation]") {
  TB t;
  Var* a = t.b->add_const(std::make_shared<const Value>(Value::from_ints(DataType::Int32, {2, 2}, {1, 2, 3, 4})));
  Var* b = t.b->add_const(std::make_shared<const Value>(Value::from_ints(DataType::Int32, {2, 2}, {5, 6, 7, 8})));
  Var* y = t.op1("concat", {TB::tuple("values", {a, b}), TB::i("axis", 1)});
  REQUIRE(y->has_value());
  CHECK(y->value()->to_ints() == std::vector<int64_t>{1, 2, 5, 6, 3, 4, 7, 8});
  Var* z = t.op1("concat", {TB::tuple("values", {a, b}), TB::i("axis", 0),
                            TB::val("interleave", Value::scalar_bool(true))});
  CHECK(z->value()->to_ints() == std::vector<int64_t>{1, 2, 5, 6, 3, 4, 7, 8});
  Var* w = t.op1("concat", {TB::tuple("values", {a, b}), TB::i("axis", 1),
                            TB::val("interleave", Value::scalar_bool(true))});
  CHECK(w->value()->to_ints() == std::vector<int64_t>{1, 5, 2, 6, 3, 7, 4, 8});
}

TEST_CASE("split by num_splits gives exact floor-divs", "[tensor_operation]") {
  TB t;
  Dim S = t.sym("S");
  Var* x = t.input("x", {S, t.c->constant(6)});
  auto o = t.op("split", {TB::v("x", x), TB::i("num_splits", 2), TB::i("axis", 0)});
  REQUIRE(o.size() == 2);
  CHECK(shp(o[0]) == "(S//2, 6, fp32)");
  auto p = t.op("split", {TB::v("x", x), TB::i("num_splits", 3), TB::i("axis", 1)});
  REQUIRE(p.size() == 3);
  CHECK(shp(p[2]) == "(S, 2, fp32)");
  auto q = t.op("split", {TB::v("x", x), TB::ints("split_sizes", {1, 5}), TB::i("axis", -1)});
  CHECK(shp(q[1]) == "(S, 5, fp32)");
  // a dim that is provably a multiple
  Var* x4 = t.input("x4", {t.c->mul(S, t.c->constant(4))});
  auto r = t.op("split", {TB::v("x", x4), TB::i("num_splits", 2), TB::i("axis", 0)});
  CHECK(shp(r[0]) == "(2*S, fp32)");
}

TEST_CASE("split errors", "[tensor_operation]") {
  TB t;
  Dim S = t.sym("S");
  Var* x = t.input("x", {t.c->constant(6), S});
  CHECK_THROWS_WITH(t.op("split", {TB::v("x", x), TB::i("num_splits", 4), TB::i("axis", 0)}),
                    Catch::Contains("does not divide dim 0") && Catch::Contains("(6, S)"));
  CHECK_THROWS_WITH(t.op("split", {TB::v("x", x), TB::ints("split_sizes", {2, 2}), TB::i("axis", 0)}),
                    Catch::Contains("sum to 4"));
  CHECK_THROWS_AS(t.op("split", {TB::v("x", x), TB::i("axis", 0)}), ValueError);
  CHECK_THROWS_AS(t.op("split", {TB::v("x", x), TB::ints("split_sizes", {2, 2}), TB::i("num_splits", 3),
                                 TB::i("axis", 1)}),
                  ValueError);
  // 2*S + 1 is never even
  Var* odd = t.input("odd", {t.c->add(t.c->mul(S, t.c->constant(2)), t.c->constant(1))});
  CHECK_THROWS_WITH(t.op("split", {TB::v("x", odd), TB::i("num_splits", 2), TB::i("axis", 0)}),
                    Catch::Contains("2*S + 1"));
}

TEST_CASE("stack, tile and pad over symbolic dims", "[tensor_operation]") {
  TB t;
  Dim S = t.sym("S"), T = t.sym("T");
  Var* x = t.input("x", {S, T});
  Var* st = t.op1("stack", {TB::tuple("values", {x, x, x}), TB::i("axis", 1)});
  CHECK(shp(st) == "(S, 3, T, fp32)");
  Var* st2 = t.op1("stack", {TB::tuple("values", {x}), TB::i("axis", -1)});
  CHECK(shp(st2) == "(S, T, 1, fp32)");
  Var* ti = t.op1("tile", {TB::v("x", x), TB::ints("reps", {2, 1})});
  CHECK(shp(ti) == "(2*S, T, fp32)");
  Var* pd = t.op1("pad", {TB::v("x", x), TB::ints("pad", {1, 2, 0, 3})});
  CHECK(shp(pd) == "(S + 3, T + 3, fp32)");
  CHECK(pd->op()->input("mode")[0]->name() == "pad_0_mode_0");
  CHECK(pd->op()->input("constant_val")[0]->name() == "pad_0_constant_val_0");
  Var* pd1 = t.op1("pad", {TB::v("x", x), TB::ints("pad", {4, 0})});
  CHECK(shp(pd1) == "(S, T + 4, fp32)");
  // symbolic reps and pads from a shape value
  Var* y = t.input("y", {t.c->constant(3), t.c->constant(5)});
  Var* sx = t.op1("shape", {TB::v("x", x)});
  CHECK(shp(t.op1("tile", {TB::v("x", y), TB::v("reps", sx)})) == "(3*S, 5*T, fp32)");
  Var* v4 = t.sym_const({4}, {S, T, t.c->constant(1), S});
  CHECK(shp(t.op1("pad", {TB::v("x", y), TB::v("pad", v4)})) == "(S + T + 3, S + 6, fp32)");
}

TEST_CASE("stack, tile and pad errors", "[tensor_operation]") {
  TB t;
  Dim S = t.sym("S");
  Var* x = t.input("x", {S, t.c->constant(3)});
  Var* y = t.input("y", {t.c->add(S, t.c->constant(2)), t.c->constant(3)});
  CHECK_THROWS_WITH(t.op("stack", {TB::tuple("values", {x, y}), TB::i("axis", 0)}),
                    Catch::Contains("dim 0") && Catch::Contains("S + 2"));
  CHECK_THROWS_AS(t.op("stack", {TB::tuple("values", {x, x}), TB::i("axis", 3)}), ValueError);
  CHECK_THROWS_WITH(t.op("tile", {TB::v("x", x), TB::ints("reps", {1, 2, 3})}), Catch::Contains("reps"));
  CHECK_THROWS_WITH(t.op("tile", {TB::v("x", x), TB::ints("reps", {1, -2})}),
                    Catch::Contains("greater than 0"));
  CHECK_THROWS_WITH(t.op("pad", {TB::v("x", x), TB::ints("pad", {1, 1, 1})}), Catch::Contains("even"));
  CHECK_THROWS_WITH(t.op("pad", {TB::v("x", x), TB::ints("pad", {0, -1})}), Catch::Contains("non-negative"));
  CHECK_THROWS_WITH(t.op("pad", {TB::v("x", x), TB::ints("pad", {1, 1}),
                                 TB::val("mode", Value::scalar_string("wrap"))}),
                    Catch::Contains("mode"));
  Var* xi = t.input("xi", {S}, DataType::Int32);
  CHECK_THROWS_AS(t.op("pad", {TB::v("x", xi), TB::ints("pad", {1, 1})}), TypeError);
}

TEST_CASE("tile and pad fold values", "[tensor_operation]") {
  TB t;
  Var* a = t.b->add_const(std::make_shared<const Value>(Value::from_ints(DataType::Int32, {2}, {1, 2})));
  Var* ti = t.op1("tile", {TB::v("x", a), TB::ints("reps", {3})});
  CHECK(ti->value()->to_ints() == std::vector<int64_t>{1, 2, 1, 2, 1, 2});
  Var* f = t.b->add_const(std::make_shared<const Value>(
      Value::from_doubles(DataType::Float32, {3}, {1.0, 2.0, 3.0})));
  Var* p = t.op1("pad", {TB::v("x", f), TB::ints("pad", {2, 1}),
                         TB::val("mode", Value::scalar_string("reflect"))});
  CHECK(p->value()->to_doubles() == std::vector<double>{3, 2, 1, 2, 3, 2});
  Var* q = t.op1("pad", {TB::v("x", f), TB::ints("pad", {1, 2}),
                         TB::val("mode", Value::scalar_string("replicate"))});
  CHECK(q->value()->to_doubles() == std::vector<double>{1, 1, 2, 3, 3, 3});
  Var* r = t.op1("pad", {TB::v("x", f), TB::ints("pad", {1, 0}),
                         TB::val("constant_val", Value::scalar_float(DataType::Float32, 9.0))});
  CHECK(r->value()->to_doubles() == std::vector<double>{9, 1, 2, 3});
}

TEST_CASE("fill, fill_like, identity", "[tensor_operation]") {
  TB t;
  Dim S = t.sym("S");
  Var* x = t.input("x", {S, t.c->constant(4)}, DataType::Int32);
  Var* f = t.op1("fill", {TB::v("shape", t.op1("shape", {TB::v("x", x)}))});
  CHECK(shp(f) == "(S, 4, fp32)");
  CHECK(f->op()->input("value")[0]->name() == "fill_0_value_0");
  Var* k = t.op1("fill", {TB::ints("shape", {2, 2}), TB::val("value", Value::scalar_int(DataType::Int32, 7))});
  CHECK(shp(k) == "(2, 2, int32)");
  CHECK(k->value()->to_ints() == std::vector<int64_t>{7, 7, 7, 7});
  Var* sh = t.input("sh", {t.c->constant(3)}, DataType::Int32);
  Var* u = t.op1("fill", {TB::v("shape", sh)});
  CHECK(u->type()->rank() == 3);
  CHECK_THROWS_AS(t.op("fill", {TB::ints("shape", {2, -3})}), ValueError);
  Var* fl = t.op1("fill_like", {TB::v("ref_tensor", x), TB::val("value", Value::scalar_bool(true))});
  CHECK(shp(fl) == "(S, 4, bool)");
  Var* id = t.op1("identity", {TB::v("x", t.op1("shape", {TB::v("x", x)}))});
  CHECK(id->value()->dims()[0] == S);
  // fill_like is an iOS16 op
  TB old(Target::iOS15);
  Var* ox = old.input("x", {old.c->constant(2)});
  CHECK_THROWS_AS(old.op("fill_like", {TB::v("ref_tensor", ox)}), TypeError);
}

TEST_CASE("range_1d lengths", "[tensor_operation]") {
  TB t;
  Dim S = t.sym("S"), T = t.sym("T");
  Var* s = t.sym_const({}, {S});
  Var* tt = t.sym_const({}, {T});
  auto len = [&](std::vector<Arg> a) { return shp(t.op1("range_1d", std::move(a))); };
  CHECK(len({TB::v("end", s), TB::i("start", 0), TB::i("step", 1)}) == "(S, int32)");
  CHECK(len({TB::v("end", s), TB::i("start", 0), TB::i("step", 2)}) == "((S + 1)//2, int32)");
  CHECK(len({TB::v("end", s), TB::v("start", tt), TB::i("step", 1)}) == "(max(0, S - T), int32)");
  CHECK(len({TB::i("end", 0), TB::v("start", s), TB::i("step", -1)}) == "(S, int32)");
  CHECK(len({TB::i("end", 10), TB::i("start", 0), TB::i("step", 3)}) == "(4, int32)");
  CHECK(len({TB::i("end", 0), TB::i("start", 5), TB::i("step", 1)}) == "(0, int32)");
  // unknown end: a fresh symbol
  Var* e = t.input("e", {}, DataType::Int32);
  Var* r = t.op1("range_1d", {TB::v("end", e), TB::i("start", 0), TB::i("step", 1)});
  CHECK(r->type()->shape()[0]->kind() == Expr::Kind::Symbol);
  Var* v = t.op1("range_1d", {TB::i("end", 10), TB::i("start", 0), TB::i("step", 3)});
  CHECK(v->value()->to_ints() == std::vector<int64_t>{0, 3, 6, 9});
  CHECK_THROWS_AS(t.op("range_1d", {TB::i("end", 1), TB::i("start", 0), TB::i("step", 0)}), ValueError);
  CHECK_THROWS_AS(t.op("range_1d", {TB::i("end", 1), TB::i("start", 0),
                                    TB::val("step", Value::scalar_float(DataType::Float32, 1))}),
                  TypeError);
}

TEST_CASE("select broadcasts cond, a and b", "[select]") {
  TB t;
  Dim S = t.sym("S");
  Var* c = t.input("c", {t.c->constant(2), t.c->constant(1), t.c->constant(4)}, DataType::Bool);
  Var* a = t.input("a", {S, t.c->constant(1)});
  Var* b = t.input("b", {t.c->constant(4)});
  Var* y = t.op1("select", {TB::v("cond", c), TB::v("a", a), TB::v("b", b)});
  CHECK(shp(y) == "(2, S, 4, fp32)");
  Var* bad = t.input("bad", {t.c->constant(3)});
  CHECK_THROWS_WITH(t.op("select", {TB::v("cond", c), TB::v("a", a), TB::v("b", bad)}),
                    Catch::Contains("select") && Catch::Contains("(2, 1, 4)") && Catch::Contains("(S, 3)") && Catch::Contains("dim 2") && Catch::Contains("4 vs 3"));
  Var* fc = t.input("fc", {t.c->constant(4)});
  CHECK_THROWS_AS(t.op("select", {TB::v("cond", fc), TB::v("a", a), TB::v("b", b)}), TypeError);
  Var* bi = t.input("bi", {t.c->constant(4)}, DataType::Int32);
  CHECK_THROWS_AS(t.op("select", {TB::v("cond", c), TB::v("a", a), TB::v("b", bi)}), TypeError);
  // values, including symbolic ones
  Var* kc = t.b->add_const(std::make_shared<const Value>(Value::from_ints(DataType::Bool, {2}, {0, 1})));
  Var* sx = t.op1("shape", {TB::v("x", a)});
  Var* z = t.op1("select", {TB::v("cond", kc), TB::v("a", sx), TB::ints("b", {7, 8})});
  CHECK(z->value()->to_dims(*t.c) == std::vector<Dim>{t.c->constant(7), t.c->constant(1)});
  Var* w = t.op1("select", {TB::v("cond", kc), TB::ints("a", {1, 2}), TB::i("b", 5)});
  CHECK(w->value()->to_ints() == std::vector<int64_t>{5, 2});
}

TEST_CASE("flatten2d, one_hot, topk, argsort, non_zero, nms types", "[tensor_operation]") {
  TB t;
  Dim S = t.sym("S");
  Var* x = t.input("x", {S, t.c->constant(3), t.c->constant(4)});
  CHECK(shp(t.op1("flatten2d", {TB::v("x", x)})) == "(S, 12, fp32)");
  CHECK(shp(t.op1("flatten2d", {TB::v("x", x), TB::i("axis", -1)})) == "(3*S, 4, fp32)");
  CHECK(shp(t.op1("flatten2d", {TB::v("x", x), TB::i("axis", 0)})) == "(1, 12*S, fp32)");
  CHECK_THROWS_AS(t.op("flatten2d", {TB::v("x", x), TB::i("axis", 4)}), ValueError);
  CHECK(shp(t.op1("band_part", {TB::v("x", x)})) == "(S, 3, 4, fp32)");
  CHECK(shp(t.op1("cumsum", {TB::v("x", x), TB::i("axis", -1)})) == "(S, 3, 4, fp32)");
  CHECK_THROWS_WITH(t.op("cumsum", {TB::v("x", x), TB::i("axis", -2)}), Catch::Contains("[-1, 2]"));

  Var* idx = t.input("idx", {S, t.c->constant(2)}, DataType::Int32);
  Var* s = t.op1("shape", {TB::v("x", x)});
  auto parts = t.op("split", {TB::v("x", s), TB::i("num_splits", 3), TB::i("axis", 0)});
  CHECK(shp(t.op1("one_hot", {TB::v("indices", idx), TB::v("one_hot_vector_size", parts[0]),
                              TB::i("axis", 1)})) == "(S, S, 2, int32)");
  CHECK(shp(t.op1("one_hot", {TB::v("indices", idx), TB::i("one_hot_vector_size", 5),
                              TB::val("on_value", Value::scalar_float(DataType::Float32, 1)),
                              TB::val("off_value", Value::scalar_float(DataType::Float32, 0))})) ==
        "(S, 2, 5, fp32)");
  CHECK_THROWS_AS(t.op("one_hot", {TB::v("indices", idx), TB::i("one_hot_vector_size", 5),
                                   TB::val("on_value", Value::scalar_float(DataType::Float32, 1))}),
                  TypeError);

  auto tk = t.op("topk", {TB::v("x", x), TB::i("k", 2)});
  REQUIRE(tk.size() == 2);
  CHECK(shp(tk[0]) == "(S, 3, 2, fp32)");
  CHECK(shp(tk[1]) == "(S, 3, 2, int32)");
  CHECK(tk[1]->name() == "topk_0_1");
  CHECK(tk[0]->op()->input("output_indices_dtype")[0]->name() == "topk_0_output_indices_dtype_0");
  auto tk1 = t.op("topk", {TB::v("x", x), TB::i("k", 2), TB::i("axis", 0),
                           TB::val("return_indices", Value::scalar_bool(false))});
  REQUIRE(tk1.size() == 1);
  CHECK(shp(tk1[0]) == "(2, 3, 4, fp32)");
  CHECK(tk1[0]->op()->input("output_indices_dtype").empty());
  CHECK_THROWS_WITH(t.op("topk", {TB::v("x", x), TB::i("k", 5)}), Catch::Contains("K=5"));
  CHECK(shp(t.op1("argsort", {TB::v("x", x)})) == "(S, 3, 4, int32)");
  CHECK(shp(t.op1("non_zero", {TB::v("x", x)})).find(", 3, int32)") != std::string::npos);

  Var* kx = t.b->add_const(std::make_shared<const Value>(
      Value::from_doubles(DataType::Float32, {4}, {3.0, 1.0, 4.0, 2.0})));
  auto kv = t.op("topk", {TB::v("x", kx), TB::i("k", 2)});
  CHECK(kv[0]->value()->to_doubles() == std::vector<double>{4.0, 3.0});
  CHECK(kv[1]->value()->to_ints() == std::vector<int64_t>{2, 0});
  Var* as = t.op1("argsort", {TB::v("x", kx), TB::val("ascending", Value::scalar_bool(true))});
  CHECK(as->value()->to_ints() == std::vector<int64_t>{1, 3, 0, 2});
  Var* nz = t.op1("non_zero", {TB::v("x", kx)});
  CHECK(shp(nz) == "(4, 1, int32)");

  Var* boxes = t.input("boxes", {S, t.c->constant(4), t.c->constant(20)});
  Var* scores = t.input("scores", {S, t.c->constant(3), t.c->constant(20)});
  auto nms = t.op("non_maximum_suppression",
                  {TB::v("boxes", boxes), TB::v("scores", scores),
                   TB::val("iou_threshold", Value::scalar_float(DataType::Float32, 0.5)), TB::i("max_boxes", 7)});
  REQUIRE(nms.size() == 3);
  CHECK(shp(nms[0]) == "(S, 4, 7, fp32)");
  CHECK(shp(nms[1]) == "(S, 3, 7, fp32)");
  CHECK(shp(nms[2]) == "(S, 7, int32)");
}
