// Symbolic dimension algebra: canonical forms, simplification, ranges, comparisons.
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <unordered_map>

#include "milkit/symbolic/eval.h"
#include "milkit/symbolic/expr.h"
#include "milkit/types/error.h"

using namespace milkit;

namespace {

struct Env {
  SymbolContext c;
  std::shared_ptr<Symbol> S_ = Symbol::create("S");
  std::shared_ptr<Symbol> T_ = Symbol::create("T");
  std::shared_ptr<Symbol> H_ = Symbol::create("H");
  std::shared_ptr<Symbol> N_ = Symbol::create("N", 0, kPosInf);  // may be zero
  Dim S = c.symbol(S_), T = c.symbol(T_), H = c.symbol(H_), N = c.symbol(N_);
  Dim k(int64_t v) { return c.constant(v); }
};

// Evaluates a dim for given symbol values, as a cross-check of every simplification.
int64_t eval(Dim d, const std::map<std::string, int64_t>& env) {
  auto fdiv = [](int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  };
  switch (d->kind()) {
    case Expr::Kind::Const: return d->value();
    case Expr::Kind::Symbol: return env.at(d->symbol()->name());
    case Expr::Kind::FloorDiv: return fdiv(eval(d->args()[0], env), eval(d->args()[1], env));
    case Expr::Kind::Mod: {
      int64_t a = eval(d->args()[0], env), b = eval(d->args()[1], env);
      return a - b * fdiv(a, b);
    }
    case Expr::Kind::Min:
    case Expr::Kind::Max: {
      int64_t r = eval(d->args()[0], env);
      for (size_t i = 1; i < d->args().size(); ++i) {
        int64_t x = eval(d->args()[i], env);
        r = d->kind() == Expr::Kind::Min ? std::min(r, x) : std::max(r, x);
      }
      return r;
    }
    case Expr::Kind::Poly: {
      int64_t r = d->value();
      for (auto& t : d->terms()) {
        int64_t m = t.coef;
        for (auto* a : t.atoms) m *= eval(a, env);
        r += m;
      }
      return r;
    }
  }
  return 0;
}

}  // namespace

TEST_CASE("symbolic: table of simplifications", "[symbolic]") {
  Env e;
  auto& c = e.c;
  Dim S = e.S, T = e.T, H = e.H;
  struct Case {
    std::string name;
    Dim got;
    Dim want;
    std::string text;
  };
  std::vector<Case> cases = {
      {"2S+S", c.add(c.mul(e.k(2), S), S), c.mul(e.k(3), S), "3*S"},
      {"S-S", c.sub(S, S), e.k(0), "0"},
      {"(4S)//4", c.floordiv(c.mul(e.k(4), S), e.k(4)), S, "S"},
      {"S+T commutes", c.add(S, T), c.add(T, S), "S + T"},
      {"S*T commutes", c.mul(S, T), c.mul(T, S), "S*T"},
      {"4*S", c.mul(S, e.k(4)), c.mul(e.k(4), S), "4*S"},
      {"S*1", c.mul(S, e.k(1)), S, "S"},
      {"S*0", c.mul(S, e.k(0)), e.k(0), "0"},
      {"S+0", c.add(S, e.k(0)), S, "S"},
      {"neg neg", c.neg(c.neg(S)), S, "S"},
      {"S-T+T", c.add(c.sub(S, T), T), S, "S"},
      {"distribute", c.mul(e.k(2), c.add(S, e.k(3))), c.add(c.mul(e.k(2), S), e.k(6)), "2*S + 6"},
      {"square", c.mul(S, S), c.mul(S, S), "S**2"},
      {"expand (S+1)^2", c.mul(c.add(S, e.k(1)), c.add(S, e.k(1))),
       c.add(c.add(c.mul(S, S), c.mul(e.k(2), S)), e.k(1)), "S**2 + 2*S + 1"},
      {"(S*T)//S", c.floordiv(c.mul(S, T), S), T, "T"},
      {"(4*S*T)//(2*S)", c.floordiv(c.mul(e.k(4), c.mul(S, T)), c.mul(e.k(2), S)), c.mul(e.k(2), T), "2*T"},
      {"S//S", c.floordiv(S, S), e.k(1), "1"},
      {"S//1", c.floordiv(S, e.k(1)), S, "S"},
      {"(2S+1)//2", c.floordiv(c.add(c.mul(e.k(2), S), e.k(1)), e.k(2)), S, "S"},
      {"(2S+3)//2", c.floordiv(c.add(c.mul(e.k(2), S), e.k(3)), e.k(2)), c.add(S, e.k(1)), "S + 1"},
      {"(S//2)//3", c.floordiv(c.floordiv(S, e.k(2)), e.k(3)), c.floordiv(S, e.k(6)), "S//6"},
      {"(2S)//4", c.floordiv(c.mul(e.k(2), S), e.k(4)), c.floordiv(S, e.k(2)), "S//2"},
      {"(H-1)//2+1 canonical", c.add(c.floordiv(c.sub(H, e.k(1)), e.k(2)), e.k(1)),
       c.floordiv(c.add(H, e.k(1)), e.k(2)), "(H + 1)//2"},
      {"(4S)%4", c.mod(c.mul(e.k(4), S), e.k(4)), e.k(0), "0"},
      {"(4S+3)%4", c.mod(c.add(c.mul(e.k(4), S), e.k(3)), e.k(4)), e.k(3), "3"},
      {"(S*T)%S", c.mod(c.mul(S, T), S), e.k(0), "0"},
      {"S%S", c.mod(S, S), e.k(0), "0"},
      {"S%1", c.mod(S, e.k(1)), e.k(0), "0"},
      {"7//2", c.floordiv(e.k(7), e.k(2)), e.k(3), "3"},
      {"-7//2", c.floordiv(e.k(-7), e.k(2)), e.k(-4), "-4"},
      {"-7%3", c.mod(e.k(-7), e.k(3)), e.k(2), "2"},
      {"7%-3", c.mod(e.k(7), e.k(-3)), e.k(-2), "-2"},
      {"ceil(S/1)", c.ceildiv(S, e.k(1)), S, "S"},
      {"ceil(4S/4)", c.ceildiv(c.mul(e.k(4), S), e.k(4)), S, "S"},
      {"ceil(7/2)", c.ceildiv(e.k(7), e.k(2)), e.k(4), "4"},
      {"min(S,S)", c.min(S, S), S, "S"},
      {"min(S,S+1)", c.min(S, c.add(S, e.k(1))), S, "S"},
      {"max(S,S+1)", c.max(S, c.add(S, e.k(1))), c.add(S, e.k(1)), "S + 1"},
      {"min(S,0) (S>=1)", c.min(S, e.k(0)), e.k(0), "0"},
      {"max(S,1) (S>=1)", c.max(S, e.k(1)), S, "S"},
      {"max(S,T) commutes", c.max(S, c.max(T, S)), c.max(T, S), "max(S, T)"},
      {"min(3,5)", c.min(e.k(3), e.k(5)), e.k(3), "3"},
      {"product", c.product({S, e.k(2), T}), c.mul(c.mul(e.k(2), S), T), "2*S*T"},
      {"product empty", c.product({}), e.k(1), "1"},
      {"(S+T)-(T+S)", c.sub(c.add(S, T), c.add(T, S)), e.k(0), "0"},
      {"(S+1)*(S-1)", c.mul(c.add(S, e.k(1)), c.sub(S, e.k(1))), c.sub(c.mul(S, S), e.k(1)), "S**2 - 1"},
      {"-S", c.neg(S), c.mul(e.k(-1), S), "-S"},
      {"T-2S", c.sub(T, c.mul(e.k(2), S)), c.add(T, c.mul(e.k(-2), S)), "-2*S + T"},
      {"2*(S//2)", c.mul(e.k(2), c.floordiv(S, e.k(2))), c.mul(c.floordiv(S, e.k(2)), e.k(2)), "2*(S//2)"},
      {"S//2 + S%2 ", c.add(c.mul(e.k(2), c.floordiv(S, e.k(2))), c.mod(S, e.k(2))),
       c.add(c.mul(e.k(2), c.floordiv(S, e.k(2))), c.mod(S, e.k(2))), "2*(S//2) + S % 2"},
      {"(3S)//2", c.floordiv(c.mul(e.k(3), S), e.k(2)), c.add(S, c.floordiv(S, e.k(2))), "S + S//2"},
      {"S//-2", c.floordiv(S, e.k(-2)), c.add(c.neg(S), c.floordiv(S, e.k(2))), "-S + S//2"},
      {"import roundtrip", c.import(c.add(S, T)), c.add(S, T), "S + T"},
      {"S//T stays", c.floordiv(S, T), c.floordiv(S, T), "S//T"},
      {"S%T stays", c.mod(S, T), c.mod(S, T), "S % T"},
  };
  REQUIRE(cases.size() >= 50);
  for (auto& cs : cases) {
    INFO(cs.name << ": got " << cs.got->str() << ", want " << cs.want->str());
    CHECK(cs.got == cs.want);
    CHECK(cs.got->str() == cs.text);
  }
  // every case evaluates to the same number as its expected form
  for (int64_t s : {1, 2, 3, 7, 10}) {
    for (int64_t t : {1, 4, 5}) {
      std::map<std::string, int64_t> env{{"S", s}, {"T", t}, {"H", s + t}, {"N", s - 1}};
      for (auto& cs : cases) {
        INFO(cs.name << " at S=" << s << " T=" << t);
        CHECK(eval(cs.got, env) == eval(cs.want, env));
      }
    }
  }
}

TEST_CASE("symbolic: floor_div matches integer semantics by evaluation", "[symbolic]") {
  Env e;
  auto& c = e.c;
  // (a*S + b) // k for many a, b, k evaluates like Python's //
  for (int64_t a : {-3, -1, 1, 2, 3, 4, 6}) {
    for (int64_t b : {-5, -1, 0, 1, 2, 7}) {
      for (int64_t k : {1, 2, 3, 4}) {
        Dim d = c.floordiv(c.add(c.mul(e.k(a), e.S), e.k(b)), e.k(k));
        Dim m = c.mod(c.add(c.mul(e.k(a), e.S), e.k(b)), e.k(k));
        for (int64_t s : {1, 2, 3, 5, 8, 13}) {
          int64_t x = a * s + b;
          int64_t q = x / k;
          if ((x % k != 0) && ((x < 0) != (k < 0))) --q;
          INFO("(" << a << "*S + " << b << ")//" << k << " = " << d->str() << " at S=" << s);
          CHECK(eval(d, {{"S", s}}) == q);
          CHECK(eval(m, {{"S", s}}) == x - k * q);
        }
      }
    }
  }
}

TEST_CASE("symbolic: ranges and three-valued comparisons", "[symbolic]") {
  Env e;
  auto& c = e.c;
  CHECK(c.range(e.S).lo == 1);
  CHECK(c.range(e.S).hi == kPosInf);
  CHECK(c.range(c.mul(e.k(-2), e.S)).hi == -2);
  CHECK(c.range(c.mod(e.S, e.k(4))).hi == 3);
  CHECK(c.range(c.floordiv(e.S, e.k(4))).lo == 0);
  CHECK(c.eq(e.S, e.S) == Tri::True);
  CHECK(c.eq(e.S, e.T) == Tri::Unknown);
  CHECK(c.eq(e.S, c.add(e.S, e.k(1))) == Tri::False);
  CHECK(c.eq(e.S, e.k(0)) == Tri::False);  // S >= 1
  CHECK(c.eq(e.N, e.k(0)) == Tri::Unknown);  // N >= 0
  CHECK(c.le(e.S, c.mul(e.k(2), e.S)) == Tri::True);
  CHECK(c.lt(e.S, c.mul(e.k(2), e.S)) == Tri::True);  // 2S - S = S >= 1
  CHECK(c.lt(c.mul(e.k(2), e.S), e.S) == Tri::False);
  CHECK(c.le(e.S, e.T) == Tri::Unknown);
  CHECK(c.le(e.k(3), e.k(4)) == Tri::True);
  e.S_->set_range(2, 8);
  CHECK(c.range(c.add(e.S, e.k(1))).hi == 9);
  CHECK(c.eq(e.S, e.k(1)) == Tri::False);
  CHECK(c.le(e.S, e.k(8)) == Tri::True);
  CHECK(c.floordiv(e.S, e.k(16)) == e.k(0));  // 2..8 // 16 is 0
  CHECK_THROWS_AS(e.T_->set_range(5, 4), ValueError);
}

TEST_CASE("symbolic: errors", "[symbolic]") {
  Env e;
  CHECK_THROWS_AS(e.c.floordiv(e.S, e.k(0)), ValueError);
  CHECK_THROWS_AS(e.c.mod(e.S, e.k(0)), ValueError);
  CHECK_THROWS_AS(e.c.mul(e.k(INT64_MAX), e.k(2)), ValueError);
  CHECK_THROWS_AS(e.c.add(e.k(INT64_MAX), e.k(1)), ValueError);
}

TEST_CASE("symbolic: contexts are independent, symbols shared", "[symbolic]") {
  auto s = Symbol::create("S");
  SymbolContext a, b;
  Dim da = a.mul(a.constant(3), a.symbol(s));
  Dim db = b.import(da);
  CHECK(db->str() == "3*S");
  CHECK(db == b.mul(b.symbol(s), b.constant(3)));
  auto other = Symbol::create("S");  // same name, different symbol
  CHECK(a.symbol(other) != a.symbol(s));
  auto f1 = Symbol::fresh(), f2 = Symbol::fresh();
  CHECK(f1->name() != f2->name());
  CHECK(f1->name().rfind("is", 0) == 0);
}

TEST_CASE("symbolic: eval_dim evaluates expressions with Python's floor semantics", "[symbolic]") {
  SymbolContext c;
  auto s = Symbol::create("S");
  Dim S = c.symbol(s);
  std::unordered_map<const Symbol*, int64_t> env{{s.get(), 7}};
  int64_t v = 0;
  REQUIRE(eval_dim(c.add(c.mul(c.constant(2), S), c.constant(1)), env, v));
  REQUIRE(v == 15);
  REQUIRE(eval_dim(c.floordiv(c.sub(S, c.constant(10)), c.constant(2)), env, v));
  REQUIRE(v == -2);
  REQUIRE(eval_dim(c.mod(c.sub(S, c.constant(10)), c.constant(4)), env, v));
  REQUIRE(v == 1);
  REQUIRE(eval_dim(c.max(S, c.constant(9)), env, v));
  REQUIRE(v == 9);
  REQUIRE_FALSE(eval_dim(c.symbol(Symbol::create("T")), env, v));
}

TEST_CASE("symbolic: eval_dim on min, products of symbols, and a zero divisor", "[symbolic]") {
  SymbolContext c;
  auto s = Symbol::create("S");
  auto t = Symbol::create("T");
  Dim S = c.symbol(s), T = c.symbol(t);
  std::unordered_map<const Symbol*, int64_t> env{{s.get(), 3}, {t.get(), 5}};
  int64_t v = 0;
  REQUIRE(eval_dim(c.min(S, T), env, v));
  CHECK(v == 3);
  REQUIRE(eval_dim(c.add(c.mul(S, T), c.constant(-4)), env, v));
  CHECK(v == 11);
  REQUIRE(eval_dim(c.constant(42), {}, v));
  CHECK(v == 42);
  CHECK_FALSE(eval_dim(c.floordiv(S, c.sub(T, c.constant(5))), env, v));
  CHECK_FALSE(eval_dim(c.mod(S, c.sub(T, c.constant(5))), env, v));
}
