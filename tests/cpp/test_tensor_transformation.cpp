// Type and value inference of the tensor_transformation and scatter_gather ops, with symbolic
// dims and symbolic values (shape vectors), and error cases.
#include <catch2/catch.hpp>

#include <memory>

#include "milkit/builder/builder.h"
#include "milkit/types/error.h"

using namespace milkit;

namespace {

struct Env {
  std::shared_ptr<Function> f;
  Builder b;
  Context& c;
  explicit Env(Target t = Target::iOS17)
      : f(std::make_shared<Function>(t)), b(*f), c(f->ctx()) {}
  Dim sym(const std::string& name) { return c.symbol(Symbol::create(name)); }
  Var* input(const std::string& name, DataType dt, std::vector<Dim> shape) {
    return f->add_input(name, c.tensor(dt, shape));
  }
  Var* konst(Value v) { return b.add_const(std::make_shared<const Value>(std::move(v))); }
  /// A const whose value is a symbolic int32 vector (what mb.shape produces).
  Var* shape_of(const std::vector<Dim>& dims) {
    return konst(Value::from_dims(DataType::Int32, {static_cast<int64_t>(dims.size())}, dims));
  }
  Var* op(const std::string& type, std::vector<Arg> args) { return b.create(type, args).at(0); }
};

std::string shape_str(const Var* v) {
  std::string s;
  for (Dim d : v->type()->shape()) s += (s.empty() ? "" : ",") + d->str();
  return s;
}

Arg ints(const std::string& n, std::vector<int64_t> v) { return Builder::arg(n, Value::int_list(v)); }
Arg bools(const std::string& n, std::vector<int64_t> v) {
  return Builder::arg(n, Value::from_ints(DataType::Bool, {static_cast<int64_t>(v.size())}, v));
}
Arg var(const std::string& n, Var* v) { return Builder::arg(n, v); }

}  // namespace

TEST_CASE("reshape with -1 over a symbolic dim is exact", "[tensor_transformation]") {
  Env e;
  Dim S = e.sym("S");
  Var* x = e.input("x", DataType::Float32, {S, e.c.constant(4)});
  CHECK(shape_str(e.op("reshape", {var("x", x), ints("shape", {-1})})) == "4*S");
  CHECK(shape_str(e.op("reshape", {var("x", x), ints("shape", {2, -1})})) == "2,2*S");
  CHECK(shape_str(e.op("reshape", {var("x", x), ints("shape", {-1, 2, 2})})) == "S,2,2");
  // iOS17: a 0 copies the dim of x aligned from the right
  CHECK(shape_str(e.op("reshape", {var("x", x), ints("shape", {0, -1})})) == "S,4");
}

TEST_CASE("reshape by a symbolic shape value (shape + gather + concat) is exact",
          "[tensor_transformation]") {
  Env e;
  Dim S = e.sym("S");
  Var* x = e.input("x", DataType::Float32, {S, e.c.constant(4)});
  // the value mb.concat([mb.gather(mb.shape(x), [0]), [2, 2]]) would have
  Var* shp = e.shape_of({S, e.c.constant(2), e.c.constant(2)});
  CHECK(shape_str(e.op("reshape", {var("x", x), var("shape", shp)})) == "S,2,2");
  // and with a -1 among symbolic entries: [S, -1] of (S, 4) -> (S, 4)
  Var* shp2 = e.shape_of({S, e.c.constant(-1)});
  CHECK(shape_str(e.op("reshape", {var("x", x), var("shape", shp2)})) == "S,4");
  // gather of the symbolic shape value propagates the symbols
  Var* full = e.shape_of({S, e.c.constant(4)});
  Var* g = e.op("gather", {var("x", full), ints("indices", {0})});
  REQUIRE(g->value());
  REQUIRE(g->value()->is_symbolic());
  CHECK(g->value()->dims().at(0) == S);
}

TEST_CASE("reshape: unknown shape value gives fresh dims, except a single dim",
          "[tensor_transformation]") {
  Env e;
  Dim S = e.sym("S");
  Var* x = e.input("x", DataType::Float32, {S, e.c.constant(4)});
  Var* s3 = e.input("s3", DataType::Int32, {e.c.constant(3)});
  Var* s1 = e.input("s1", DataType::Int32, {e.c.constant(1)});
  Var* r3 = e.op("reshape", {var("x", x), var("shape", s3)});
  REQUIRE(r3->type()->rank() == 3);
  for (Dim d : r3->type()->shape()) CHECK(d->kind() == Expr::Kind::Symbol);
  CHECK(shape_str(e.op("reshape", {var("x", x), var("shape", s1)})) == "4*S");
  Var* sk = e.input("sk", DataType::Int32, {e.sym("K")});
  CHECK_FALSE(e.op("reshape", {var("x", x), var("shape", sk)})->type()->has_rank());
}

TEST_CASE("reshape propagates symbolic values", "[tensor_transformation]") {
  Env e;
  Dim S = e.sym("S");
  Var* v = e.shape_of({S, e.c.constant(3)});
  Var* r = e.op("reshape", {var("x", v), ints("shape", {2, 1})});
  REQUIRE(r->value());
  CHECK(r->value()->shape() == std::vector<int64_t>{2, 1});
  CHECK(r->value()->dims().at(0) == S);
}

TEST_CASE("reshape errors name the op and the dims", "[tensor_transformation]") {
  Env e;
  Var* x = e.input("x", DataType::Float32, {e.c.constant(2), e.c.constant(3)});
  REQUIRE_THROWS_WITH(e.op("reshape", {var("x", x), ints("shape", {4, -1})}),
                      Catch::Contains("reshape 'reshape_0'") && Catch::Contains("(2, 3)") &&
                          Catch::Contains("[4, -1]"));
  REQUIRE_THROWS_AS(e.op("reshape", {var("x", x), ints("shape", {-1, -1})}), ValueError);
  Dim S = e.sym("S");
  Var* y = e.input("y", DataType::Float32, {S, e.c.constant(4)});
  REQUIRE_THROWS_WITH(e.op("reshape", {var("x", y), ints("shape", {3, 5})}),
                      Catch::Contains("4*S") && Catch::Contains("15"));
}

TEST_CASE("reshape zero rule differs between iOS15 and iOS17", "[tensor_transformation]") {
  Env e17(Target::iOS17);
  Var* x = e17.input("x", DataType::Float32, {e17.c.constant(2), e17.c.constant(50)});
  CHECK(shape_str(e17.op("reshape", {var("x", x), ints("shape", {1, 0, -1, 0})})) == "1,1,2,50");
  Env e15(Target::iOS15);
  Var* x15 = e15.input("x", DataType::Float32, {e15.c.constant(2), e15.c.constant(50)});
  REQUIRE_THROWS_AS(e15.op("reshape", {var("x", x15), ints("shape", {1, 0, -1, 0})}), ValueError);
}

TEST_CASE("slice_by_index over symbolic dims is exact", "[tensor_transformation]") {
  Env e;
  Dim S = e.sym("S");
  Var* x = e.input("x", DataType::Float32, {S});
  auto sl = [&](std::vector<int64_t> b, std::vector<int64_t> en, std::vector<int64_t> st,
                std::vector<int64_t> bm, std::vector<int64_t> em) {
    return shape_str(e.op("slice_by_index", {var("x", x), ints("begin", b), ints("end", en),
                                             ints("stride", st), bools("begin_mask", bm),
                                             bools("end_mask", em)}));
  };
  CHECK(sl({1}, {0}, {1}, {0}, {1}) == "S - 1");
  CHECK(sl({0}, {-1}, {1}, {1}, {0}) == "S - 1");
  CHECK(sl({0}, {3}, {1}, {0}, {0}) == "min(3, S)");
  CHECK(sl({-3}, {0}, {1}, {0}, {1}) == "min(3, S)");
  CHECK(sl({0}, {0}, {1}, {1}, {1}) == "S");
  CHECK(sl({0}, {0}, {-1}, {1}, {1}) == "S");
  // x[::2] is ceil(S / 2)
  Dim half = e.c.ceildiv(S, e.c.constant(2));
  CHECK(sl({0}, {0}, {2}, {1}, {1}) == half->str());
  // x[2:3] is 1 as in coremltools (in-range assumption of its deterministic cases)
  CHECK(sl({2}, {3}, {1}, {0}, {0}) == "1");
}

TEST_CASE("slice_by_index on concrete dims follows numpy; squeeze and fold", "[tensor_transformation]") {
  Env e;
  std::vector<double> data(20);
  for (int i = 0; i < 20; ++i) data[i] = i;
  Var* a = e.konst(Value::from_doubles(DataType::Float32, {4, 5}, data));
  Var* r = e.op("slice_by_index", {var("x", a), ints("begin", {-1, 1}), ints("end", {-5, 5}),
                                   ints("stride", {-1, 2})});
  CHECK(shape_str(r) == "4,2");
  REQUIRE(r->has_value());
  CHECK(r->value()->to_ints() == std::vector<int64_t>{16, 18, 11, 13, 6, 8, 1, 3});
  Var* q = e.op("slice_by_index", {var("x", a), ints("begin", {2, 3}), ints("end", {0, 0}),
                                   bools("squeeze_mask", {1, 1})});
  CHECK(q->type()->is_scalar());
  CHECK(q->value()->to_ints() == std::vector<int64_t>{13});
  REQUIRE_THROWS_WITH(e.op("slice_by_index", {var("x", a), ints("begin", {3, 0}), ints("end", {1, 2})}),
                      Catch::Contains("slice_by_index") && Catch::Contains("(3, 1, 1)"));
  REQUIRE_THROWS_AS(e.op("slice_by_index", {var("x", a), ints("begin", {0, 0}), ints("end", {1, 2}),
                                            ints("stride", {0, 1})}),
                    ValueError);
}

TEST_CASE("slice_by_index of a symbolic value keeps symbols", "[tensor_transformation]") {
  Env e;
  Dim S = e.sym("S"), T = e.sym("T");
  Var* v = e.shape_of({S, T, e.c.constant(3)});
  Var* r = e.op("slice_by_index", {var("x", v), ints("begin", {1}), ints("end", {3})});
  REQUIRE(r->value());
  REQUIRE(r->value()->is_symbolic());
  CHECK(r->value()->dims().at(0) == T);
  CHECK(r->value()->dims().at(1)->value() == 3);
}

TEST_CASE("slice_by_size: size -1 gives dim - begin; symbolic values", "[tensor_transformation]") {
  Env e;
  Dim S = e.sym("S");
  Var* x = e.input("x", DataType::Float32, {S, e.c.constant(5)});
  CHECK(shape_str(e.op("slice_by_size", {var("x", x), ints("begin", {1, 2}), ints("size", {-1, 2})})) ==
        "S - 1,2");
  // a symbolic begin (from a shape) with size -1
  Dim T = e.sym("T");
  Var* b = e.shape_of({T, e.c.constant(0)});
  CHECK(shape_str(e.op("slice_by_size", {var("x", x), var("begin", b), ints("size", {-1, -1})})) ==
        (e.c.sub(S, T)->str() + ",5"));
  Var* v = e.shape_of({S, T, e.c.constant(3)});
  Var* r = e.op("slice_by_size", {var("x", v), ints("begin", {1}), ints("size", {2})});
  REQUIRE(r->value());
  CHECK(r->value()->dims().at(0) == T);
  REQUIRE_THROWS_AS(e.op("slice_by_size", {var("x", x), ints("begin", {0}), ints("size", {1, 1})}),
                    ValueError);
}

TEST_CASE("transpose, squeeze, expand_dims shapes and errors", "[tensor_transformation]") {
  Env e;
  Dim S = e.sym("S");
  Var* x = e.input("x", DataType::Float32, {e.c.constant(1), S, e.c.constant(3)});
  CHECK(shape_str(e.op("transpose", {var("x", x), ints("perm", {2, 0, 1})})) == "3,1,S");
  CHECK(shape_str(e.op("squeeze", {var("x", x)})) == "S,3");
  CHECK(shape_str(e.op("squeeze", {var("x", x), ints("axes", {1})})) == "1,S,3");
  CHECK(shape_str(e.op("expand_dims", {var("x", x), ints("axes", {0, -1})})) == "1,1,S,3,1");
  REQUIRE_THROWS_AS(e.op("transpose", {var("x", x), ints("perm", {0, 0, 1})}), ValueError);
  REQUIRE_THROWS_AS(e.op("transpose", {var("x", x), ints("perm", {0, 1})}), ValueError);
  REQUIRE_THROWS_AS(e.op("expand_dims", {var("x", x), ints("axes", {5})}), ValueError);
  REQUIRE_THROWS_AS(e.op("squeeze", {var("x", x), ints("axes", {3})}), ValueError);
  Var* v = e.shape_of({S, e.c.constant(3)});
  Var* t = e.op("expand_dims", {var("x", v), ints("axes", {0})});
  REQUIRE(t->value());
  CHECK(t->value()->shape() == std::vector<int64_t>{1, 2});
}

TEST_CASE("gather: shapes, batch_dims, symbolic values and errors", "[scatter_gather]") {
  Env e;
  Dim S = e.sym("S");
  Var* x = e.input("x", DataType::Float32, {S, e.c.constant(4), e.c.constant(5)});
  Var* i = e.input("i", DataType::Int32, {e.c.constant(2), e.c.constant(3)});
  CHECK(shape_str(e.op("gather", {var("x", x), var("indices", i), Builder::arg("axis", Value::scalar_int(DataType::Int32, 1))})) ==
        "S,2,3,5");
  Var* xb = e.input("xb", DataType::Float32, {e.c.constant(2), e.c.constant(4), e.c.constant(5)});
  CHECK(shape_str(e.op("gather", {var("x", xb), var("indices", i),
                                  Builder::arg("axis", Value::scalar_int(DataType::Int32, 1)),
                                  Builder::arg("batch_dims", Value::scalar_int(DataType::Int32, 1))})) ==
        "2,3,5");
  Var* v = e.shape_of({S, e.c.constant(4), e.c.constant(5)});
  Var* g = e.op("gather", {var("x", v), ints("indices", {2, 0})});
  REQUIRE(g->value());
  CHECK(g->value()->dims().at(0)->value() == 5);
  CHECK(g->value()->dims().at(1) == S);
  Var* gs = e.op("gather", {var("x", v), Builder::arg("indices", Value::scalar_int(DataType::Int32, 0))});
  CHECK(gs->type()->is_scalar());
  CHECK(gs->value()->dims().at(0) == S);
  REQUIRE_THROWS_AS(e.op("gather", {var("x", x), var("indices", i),
                                    Builder::arg("axis", Value::scalar_int(DataType::Int32, 3))}),
                    ValueError);
  REQUIRE_THROWS_WITH(e.op("gather", {var("x", v), ints("indices", {3})}),
                      Catch::Contains("gather") && Catch::Contains("out of bounds"));
  REQUIRE_THROWS_WITH(e.op("gather", {var("x", x), ints("indices", {9}),
                                      Builder::arg("axis", Value::scalar_int(DataType::Int32, 1)),
                                      Builder::arg("validate_indices", Value::scalar_bool(true))}),
                      Catch::Contains("[0, 4)"));
}

TEST_CASE("gather_along_axis and gather_nd shapes", "[scatter_gather]") {
  Env e;
  Dim S = e.sym("S");
  Var* x = e.input("x", DataType::Float32, {S, e.c.constant(4)});
  Var* i = e.input("i", DataType::Int32, {S, e.c.constant(7)});
  CHECK(shape_str(e.op("gather_along_axis", {var("x", x), var("indices", i),
                                             Builder::arg("axis", Value::scalar_int(DataType::Int32, 1))})) ==
        "S,7");
  Var* bad = e.input("bad", DataType::Int32, {e.c.constant(3), e.c.constant(5)});
  Var* x2 = e.input("x2", DataType::Float32, {e.c.constant(2), e.c.constant(4)});
  REQUIRE_THROWS_AS(e.op("gather_along_axis", {var("x", x2), var("indices", bad),
                                               Builder::arg("axis", Value::scalar_int(DataType::Int32, 1))}),
                    ValueError);
  Var* nd = e.input("nd", DataType::Int32, {e.c.constant(6), e.c.constant(1)});
  CHECK(shape_str(e.op("gather_nd", {var("x", x), var("indices", nd)})) == "6,4");
}

TEST_CASE("scatter family shape checks", "[scatter_gather]") {
  Env e;
  Var* d = e.input("d", DataType::Float32, {e.c.constant(3), e.c.constant(4)});
  Var* i = e.input("i", DataType::Int32, {e.c.constant(2)});
  Var* u = e.input("u", DataType::Float32, {e.c.constant(2), e.c.constant(4)});
  Var* s = e.op("scatter", {var("data", d), var("indices", i), var("updates", u)});
  CHECK(shape_str(s) == "3,4");
  REQUIRE_THROWS_WITH(e.op("scatter", {var("data", d), var("indices", i), var("updates", d)}),
                      Catch::Contains("'updates'") && Catch::Contains("(2, 4)"));
}
