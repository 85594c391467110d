// conv / conv_transpose / pools: type inference, exact symbolic spatial sizes, defaults, errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>

#include "milkit/builder/builder.h"
#include "milkit/ops/conv_util.h"
#include "milkit/types/error.h"

using namespace milkit;

namespace {

/// Evaluates a dim with symbol values (Python semantics for // and %).
int64_t eval(Dim d, const std::map<const Symbol*, int64_t>& env) {
  auto fdiv = [](int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  };
  switch (d->kind()) {
    case Expr::Kind::Const: return d->value();
    case Expr::Kind::Symbol: return env.at(d->symbol());
    case Expr::Kind::FloorDiv: return fdiv(eval(d->args()[0], env), eval(d->args()[1], env));
    case Expr::Kind::Mod: {
      int64_t a = eval(d->args()[0], env), b = eval(d->args()[1], env);
      return a - b * fdiv(a, b);
    }
    case Expr::Kind::Min:
    case Expr::Kind::Max: {
      int64_t r = eval(d->args()[0], env);
      for (size_t i = 1; i < d->args().size(); ++i) {
        int64_t v = eval(d->args()[i], env);
        r = d->kind() == Expr::Kind::Min ? std::min(r, v) : std::max(r, v);
      }
      return r;
    }
    case Expr::Kind::Poly: {
      int64_t r = d->value();
      for (const Term& t : d->terms()) {
        int64_t m = t.coef;
        for (const Expr* a : t.atoms) m *= eval(a, env);
        r += m;
      }
      return r;
    }
  }
  return 0;
}

/// coremltools' spatial_dimensions_out_shape for one known dim, in floating point as it does.
int64_t ct_out(int64_t n, int64_t k, int64_t s, const std::string& pt, int64_t p0, int64_t p1,
               bool ceil_mode, int64_t dil = 1) {
  int64_t ek = (k - 1) * dil + 1;
  double pad = 0;
  if (pt == "same" || pt == "same_lower")
    pad = std::max(0.0, s * std::ceil(double(n) / s) - n + ek - s);
  else if (pt == "custom")
    pad = double(p0 + p1);
  double out;
  if (!ceil_mode) {
    out = std::floor((n + pad - ek) / s + 1);
  } else {
    out = std::floor((n + pad - ek + s - 1) / s + 1);
    if ((out - 1) * s >= n + pad / 2 && pad > 0) out -= 1;
  }
  return static_cast<int64_t>(out);
}

struct Env {
  std::shared_ptr<Function> f;
  std::unique_ptr<Builder> b;
  std::shared_ptr<Symbol> B = Symbol::create("B"), H = Symbol::create("H"), W = Symbol::create("W");
  Context& c() { return f->ctx(); }
  Dim dB() { return c().symbol(B); }
  Dim dH() { return c().symbol(H); }
  Dim dW() { return c().symbol(W); }
  explicit Env(Target t = Target::iOS17) : f(std::make_shared<Function>(t)), b(std::make_unique<Builder>(*f)) {}
  Var* input(std::vector<Dim> shape, DataType dt = DataType::Float32, const std::string& name = "x") {
    return f->add_input(name, c().tensor(dt, shape));
  }
  Var* op(const std::string& type, Var* x, std::vector<Arg> extra) {
    std::vector<Arg> args{Builder::arg("x", x)};
    for (auto& a : extra) args.push_back(std::move(a));
    return b->create(type, args).at(0);
  }
};

Value weights(std::vector<int64_t> shape, DataType dt = DataType::Float32) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return Value::from_doubles(dt, shape, std::vector<double>(static_cast<size_t>(n), 0.25));
}

Arg ints(const std::string& n, std::vector<int64_t> v) { return Builder::arg(n, Value::int_list(v)); }
Arg str(const std::string& n, const std::string& s) { return Builder::arg(n, Value::scalar_string(s)); }
Arg boolean(const std::string& n, bool v) { return Builder::arg(n, Value::scalar_bool(v)); }

}  // namespace

TEST_CASE("conv: concrete shapes, defaults materialized in coremltools' order", "[conv]") {
  Env e;
  Var* x = e.input({e.c().constant(2), e.c().constant(3), e.c().constant(17), e.c().constant(16)});
  Var* y = e.op("conv", x, {Builder::arg("weight", weights({8, 3, 3, 3}))});
  CHECK(y->type()->str() == "(2, 8, 15, 14, fp32)");
  Operation* op = y->op();
  CHECK(op->input1("strides")->name() == "conv_0_strides_0");
  CHECK(op->input1("strides")->value()->to_ints() == std::vector<int64_t>{1, 1});
  CHECK(op->input1("pad")->value()->to_ints() == std::vector<int64_t>{0, 0, 0, 0});
  CHECK(op->input1("dilations")->value()->to_ints() == std::vector<int64_t>{1, 1});
  CHECK(op->input1("pad_type")->value()->string_values()[0] == "valid");
  CHECK(op->input1("groups")->value()->as_int(0) == 1);
  CHECK(op->input1("bias") == nullptr);
  std::vector<std::string> names;
  for (Operation* o : e.f->body().ops()) names.push_back(o->name());
  CHECK(names == std::vector<std::string>{"conv_0_weight_0", "conv_0_strides_0", "conv_0_pad_type_0",
                                          "conv_0_pad_0", "conv_0_dilations_0", "conv_0_groups_0", "conv_0"});
  // same with strides, dilations and a custom pad, against coremltools' arithmetic
  for (int64_t n : {5, 9, 16, 17}) {
    Env g;
    Var* xi = g.input({g.c().constant(1), g.c().constant(3), g.c().constant(n), g.c().constant(n + 1)});
    Var* o = g.op("conv", xi, {Builder::arg("weight", weights({4, 3, 3, 2})), ints("strides", {2, 3}),
                               str("pad_type", "custom"), ints("pad", {1, 2, 0, 1}), ints("dilations", {2, 1})});
    CHECK(o->type()->shape()[2]->value() == ct_out(n, 3, 2, "custom", 1, 2, false, 2));
    CHECK(o->type()->shape()[3]->value() == ct_out(n + 1, 2, 3, "custom", 0, 1, false));
  }
}

TEST_CASE("conv: symbolic spatial dims are exact floor expressions", "[conv][symbolic]") {
  Env e;
  Context& c = e.c();
  Var* x = e.input({e.dB(), c.constant(3), e.dH(), e.dW()});
  Var* y = e.op("conv", x, {Builder::arg("weight", weights({8, 3, 3, 3})), ints("strides", {2, 2})});
  const auto& s = y->type()->shape();
  REQUIRE(s.size() == 4);
  CHECK(s[0] == e.dB());  // batch passes through
  CHECK(s[1] == c.constant(8));
  Dim H = e.dH();
  // (H - 3)//2 + 1, which canonicalizes to (H - 1)//2
  CHECK(s[2] == c.add(c.floordiv(c.sub(H, c.constant(3)), c.constant(2)), c.constant(1)));
  CHECK(s[2] == c.floordiv(c.sub(H, c.constant(1)), c.constant(2)));
  for (int64_t h = 3; h < 60; ++h) CHECK(eval(s[2], {{e.H.get(), h}}) == (h - 3) / 2 + 1);

  // same: ceil(H / s) = (H + s - 1)//s
  Var* z = e.op("conv", x, {Builder::arg("weight", weights({8, 3, 3, 3})), ints("strides", {3, 2}),
                            str("pad_type", "same")});
  const auto& t = z->type()->shape();
  CHECK(t[2] == c.ceildiv(H, c.constant(3)));
  CHECK(t[2] == c.floordiv(c.add(H, c.constant(2)), c.constant(3)));
  CHECK(t[3] == c.floordiv(c.add(e.dW(), c.constant(1)), c.constant(2)));
  for (int64_t h = 1; h < 60; ++h) {
    CHECK(eval(t[2], {{e.H.get(), h}}) == ct_out(h, 3, 3, "same", 0, 0, false));
    CHECK(eval(t[3], {{e.W.get(), h}}) == ct_out(h, 3, 2, "same", 0, 0, false));
  }

  // custom pad and dilation: (H + 3 - 5)//2 + 1
  Var* u = e.op("conv", x, {Builder::arg("weight", weights({8, 3, 3, 3})), ints("strides", {2, 1}),
                            str("pad_type", "custom"), ints("pad", {1, 2, 0, 0}), ints("dilations", {2, 1})});
  Dim expect = c.add(c.floordiv(c.sub(c.add(H, c.constant(3)), c.constant(5)), c.constant(2)), c.constant(1));
  CHECK(u->type()->shape()[2] == expect);
  for (int64_t h = 2; h < 60; ++h)
    CHECK(eval(u->type()->shape()[2], {{e.H.get(), h}}) == ct_out(h, 3, 2, "custom", 1, 2, false, 2));

  // same_lower at iOS16+
  Var* v = e.op("conv", x, {Builder::arg("weight", weights({8, 3, 2, 2})), ints("strides", {2, 2}),
                            str("pad_type", "same_lower")});
  CHECK(v->type()->shape()[2] == c.ceildiv(H, c.constant(2)));
}

TEST_CASE("conv: mixed precision from iOS17, domains before", "[conv]") {
  for (Target t : {Target::iOS15, Target::iOS16, Target::iOS17, Target::iOS18}) {
    Env e(t);
    Var* x = e.input({e.c().constant(1), e.c().constant(3), e.c().constant(8), e.c().constant(8)},
                     DataType::Float16);
    auto build = [&] {
      return e.op("conv", x, {Builder::arg("weight", weights({4, 3, 3, 3})),
                              Builder::arg("bias", weights({4}))});
    };
    if (t < Target::iOS17) {
      CHECK_THROWS_AS(build(), TypeError);
    } else {
      Var* y = build();
      CHECK(y->type()->str() == "(1, 4, 6, 6, fp16)");
    }
  }
}

TEST_CASE("conv: errors name the op and the problem", "[conv][errors]") {
  Env e;
  Context& c = e.c();
  Var* x = e.input({c.constant(1), c.constant(4), c.constant(8), c.constant(8)});
  CHECK_THROWS_WITH(e.op("conv", x, {Builder::arg("weight", weights({6, 2, 3, 3})), Builder::arg("groups", Value::scalar_int(DataType::Int32, 3))}),
                    Catch::Contains("conv 'conv_0'") && Catch::Contains("not divisible by groups 3"));
  CHECK_THROWS_WITH(e.op("conv", x, {Builder::arg("weight", weights({6, 3, 3, 3}))}),
                    Catch::Contains("conv 'conv_1'") && Catch::Contains("C_in / groups = 4/1 != weight[1] (3)"));
  CHECK_THROWS_WITH(e.op("conv", x, {Builder::arg("weight", weights({6, 4, 3, 3})), Builder::arg("bias", weights({5}))}),
                    Catch::Contains("'bias'") && Catch::Contains("bias values 5 not equal to # output channels 6"));
  CHECK_THROWS_WITH(e.op("conv", x, {Builder::arg("weight", weights({6, 4, 3, 3})), str("pad_type", "custom"),
                                     ints("pad", {1, 1, 1})}),
                    Catch::Contains("pad (length 3)"));
  CHECK_THROWS_WITH(e.op("conv", x, {Builder::arg("weight", weights({6, 4, 3, 3})), str("pad_type", "full")}),
                    Catch::Contains("pad_type") && Catch::Contains("\"full\""));
  CHECK_THROWS_WITH(e.op("conv", x, {Builder::arg("weight", weights({6, 4, 3, 9}))}),
                    Catch::Contains("conv 'conv_5'") && Catch::Contains("spatial dimension 1 has invalid output size 0"));
  try {
    e.op("conv", x, {Builder::arg("weight", weights({6, 4, 3, 10}))});
    FAIL("expected an error");
  } catch (const ValueError& err) {
    std::string m = err.what();
    CHECK(m.find("conv 'conv_6'") != std::string::npos);
    CHECK(m.find("spatial dimension 1 has invalid output size -1") != std::string::npos);
    CHECK(m.find("effective kernel size 10") != std::string::npos);
  }
  // dynamic weight with dilations
  Var* w = e.input({c.constant(6), c.constant(4), c.constant(3), c.constant(3)}, DataType::Float32, "w");
  CHECK_THROWS_WITH(e.op("conv", x, {Builder::arg("weight", w), ints("dilations", {2, 1})}),
                    Catch::Contains("dynamic") && Catch::Contains("dilations"));
  CHECK(e.op("conv", x, {Builder::arg("weight", w)})->type()->str() == "(1, 6, 6, 6, fp32)");
  // same_lower is not in iOS15
  Env g(Target::iOS15);
  Var* x15 = g.input({g.c().constant(1), g.c().constant(4), g.c().constant(8), g.c().constant(8)});
  CHECK_THROWS_WITH(g.op("conv", x15, {Builder::arg("weight", weights({6, 4, 3, 3})), str("pad_type", "same_lower")}),
                    Catch::Contains("same_lower") && Catch::Contains("iOS15"));
}

TEST_CASE("conv_transpose: exact sizes and output_shape", "[conv]") {
  Env e;
  Context& c = e.c();
  Dim H = e.dH();
  Var* x = e.input({e.dB(), c.constant(3), H, c.constant(5)});
  Var* y = e.op("conv_transpose", x, {Builder::arg("weight", weights({3, 4, 3, 3})), ints("strides", {2, 3}),
                                      str("pad_type", "custom"), ints("pad", {1, 0, 2, 2}), ints("dilations", {2, 1})});
  const auto& s = y->type()->shape();
  CHECK(s[0] == e.dB());
  CHECK(s[1] == c.constant(4));
  // 2*(H - 1) + 5 - 1
  CHECK(s[2] == c.add(c.mul(c.constant(2), H), c.constant(2)));
  CHECK(s[3] == c.constant(3 * 4 + 3 - 4));
  Var* z = e.op("conv_transpose", x, {Builder::arg("weight", weights({3, 2, 3, 3})), ints("strides", {3, 2}),
                                      str("pad_type", "same"), Builder::arg("groups", Value::scalar_int(DataType::Int32, 2))});
  CHECK(z->type()->shape()[1] == c.constant(4));
  CHECK(z->type()->shape()[2] == c.mul(c.constant(3), H));
  CHECK(z->type()->shape()[3] == c.constant(10));

  Env g;
  Var* xc = g.input({g.c().constant(1), g.c().constant(3), g.c().constant(5), g.c().constant(5)});
  Var* o = g.op("conv_transpose", xc, {Builder::arg("weight", weights({3, 4, 3, 3})), ints("output_shape", {1, 4, 12, 11}),
                                       ints("strides", {2, 2})});
  CHECK(o->type()->str() == "(1, 4, 12, 11, fp32)");
  CHECK_THROWS_WITH(g.op("conv_transpose", xc, {Builder::arg("weight", weights({3, 4, 3, 3})), ints("output_shape", {1, 5, 12, 11})}),
                    Catch::Contains("conv_transpose 'conv_transpose_1'") && Catch::Contains("C_out = 4"));
  // symbolic batch vs a given output_shape: rejected like coremltools
  CHECK_THROWS_WITH(e.op("conv_transpose", x, {Builder::arg("weight", weights({3, 4, 3, 3})), ints("output_shape", {1, 4, 12, 11})}),
                    Catch::Contains("batch dim"));
  CHECK_THROWS_WITH(g.op("conv_transpose", xc, {Builder::arg("weight", weights({3, 4, 3, 3})), str("pad_type", "same_lower")}),
                    Catch::Contains("pad_type") && Catch::Contains("same_lower"));
  CHECK_THROWS_WITH(g.op("conv_transpose", xc, {Builder::arg("weight", weights({3, 4, 3, 3})), Builder::arg("bias", weights({3}))}),
                    Catch::Contains("bias values 3 not equal to # output channels 4"));
  // the weight must be const before iOS17
  Env old(Target::iOS16);
  Var* xo = old.input({old.c().constant(1), old.c().constant(3), old.c().constant(5), old.c().constant(5)});
  Var* wo = old.input({old.c().constant(3), old.c().constant(4), old.c().constant(3), old.c().constant(3)}, DataType::Float32, "w");
  CHECK_THROWS_WITH(old.op("conv_transpose", xo, {Builder::arg("weight", wo)}), Catch::Contains("compile-time constant"));
  Var* wn = g.input({g.c().constant(3), g.c().constant(4), g.c().constant(3), g.c().constant(3)}, DataType::Float32, "w");
  CHECK(g.op("conv_transpose", xc, {Builder::arg("weight", wn)})->type()->str() == "(1, 4, 7, 7, fp32)");
}

TEST_CASE("pools: concrete sizes match coremltools' arithmetic", "[pool]") {
  for (const char* op : {"avg_pool", "max_pool", "l2_pool"}) {
    for (int64_t n = 3; n < 14; ++n) {
      for (bool ceil : {false, true}) {
        Env e;
        Var* x = e.input({e.c().constant(1), e.c().constant(2), e.c().constant(n), e.c().constant(n + 2)});
        Var* y = e.op(op, x, {ints("kernel_sizes", {3, 2}), ints("strides", {2, 3}), str("pad_type", "custom"),
                              ints("pad", {1, 1, 0, 0}), boolean("ceil_mode", ceil)});
        CHECK(y->type()->shape()[2]->value() == ct_out(n, 3, 2, "custom", 1, 1, ceil));
        CHECK(y->type()->shape()[3]->value() == ct_out(n + 2, 2, 3, "custom", 0, 0, ceil));
      }
    }
  }
  Env e;
  Var* x = e.input({e.c().constant(1), e.c().constant(2), e.c().constant(8), e.c().constant(8)});
  Var* y = e.op("avg_pool", x, {ints("kernel_sizes", {2, 2}), str("pad_type", "SAME")});
  CHECK(y->type()->str() == "(1, 2, 8, 8, fp32)");
  std::vector<std::string> names;
  for (Operation* o : e.f->body().ops()) names.push_back(o->name());
  CHECK(names == std::vector<std::string>{"avg_pool_0_kernel_sizes_0", "avg_pool_0_pad_type_0", "avg_pool_0_strides_0",
                                          "avg_pool_0_pad_0", "avg_pool_0_ceil_mode_0",
                                          "avg_pool_0_exclude_padding_from_average_0", "avg_pool_0"});
}

TEST_CASE("pools: symbolic sizes, ceil_mode included, are exact", "[pool][symbolic]") {
  struct Case {
    int64_t k, s;
    const char* pt;
    int64_t p;
    bool ceil;
  };
  const Case cases[] = {{3, 2, "valid", 0, false}, {3, 2, "same", 0, false},     {2, 3, "same_lower", 0, false},
                        {3, 2, "custom", 1, false}, {3, 2, "valid", 0, true},    {3, 2, "custom", 1, true},
                        {2, 3, "custom", 1, true},  {2, 2, "custom", 3, true},   {2, 2, "same_lower", 0, true},
                        {4, 3, "same_lower", 0, true}, {1, 1, "custom", 2, true}, {5, 4, "custom", 2, true}};
  for (const Case& k : cases) {
    Env e;
    Context& c = e.c();
    Var* x = e.input({e.dB(), c.constant(2), e.dH(), c.constant(9)});
    Var* y = e.op("max_pool", x, {ints("kernel_sizes", {k.k, 1}), ints("strides", {k.s, 1}), str("pad_type", k.pt),
                                  ints("pad", {k.p, k.p, 0, 0}), boolean("ceil_mode", k.ceil)});
    Dim d = y->type()->shape()[2];
    CHECK(y->type()->shape()[0] == e.dB());
    CHECK(y->type()->shape()[3] == c.constant(9));
    INFO(k.pt << " k=" << k.k << " s=" << k.s << " p=" << k.p << " ceil=" << k.ceil << ": " << d->str());
    for (int64_t h = 1; h < 80; ++h) {
      int64_t want = ct_out(h, k.k, k.s, k.pt, k.p, k.p, k.ceil);
      if (want <= 0) {
        CHECK(eval(d, {{e.H.get(), h}}) <= 0);
      } else {
        CHECK(eval(d, {{e.H.get(), h}}) == want);
      }
    }
  }
  // the simple forms
  Env e;
  Context& c = e.c();
  Dim H = e.dH();
  Var* x = e.input({c.constant(1), c.constant(2), H, c.constant(9)});
  Var* y = e.op("avg_pool", x, {ints("kernel_sizes", {3, 3}), ints("strides", {2, 2}), str("pad_type", "valid")});
  CHECK(y->type()->shape()[2] == c.add(c.floordiv(c.sub(H, c.constant(3)), c.constant(2)), c.constant(1)));
  Var* z = e.op("avg_pool", x, {ints("kernel_sizes", {3, 3}), ints("strides", {4, 2}), str("pad_type", "same")});
  CHECK(z->type()->shape()[2] == c.floordiv(c.add(H, c.constant(3)), c.constant(4)));
  // ceil_mode with pad <= kernel: min((H + 2 - 3 + 1)//2 + 1, ceil((H + 1)/2))
  Var* u = e.op("max_pool", x, {ints("kernel_sizes", {3, 3}), ints("strides", {2, 2}), str("pad_type", "custom"),
                                ints("pad", {1, 1, 1, 1}), boolean("ceil_mode", true)});
  Dim A1 = c.add(c.floordiv(H, c.constant(2)), c.constant(1));
  CHECK(u->type()->shape()[2] == c.min(A1, c.ceildiv(c.add(H, c.constant(1)), c.constant(2))));
}

TEST_CASE("pools: errors", "[pool][errors]") {
  Env e;
  Context& c = e.c();
  Var* x = e.input({c.constant(1), c.constant(2), c.constant(8), c.constant(8)});
  CHECK_THROWS_WITH(e.op("max_pool", x, {ints("kernel_sizes", {2, 2}), str("pad_type", "full")}),
                    Catch::Contains("max_pool 'max_pool_0'") && Catch::Contains("\"full\""));
  CHECK_THROWS_WITH(e.op("max_pool", x, {ints("kernel_sizes", {2, 2})}), Catch::Contains("missing required input 'pad_type'"));
  CHECK_THROWS_WITH(e.op("avg_pool", x, {ints("kernel_sizes", {2, 2}), str("pad_type", "same"), boolean("ceil_mode", true)}),
                    Catch::Contains("ceil_mode") && Catch::Contains("same"));
  CHECK_THROWS_WITH(e.op("avg_pool", x, {ints("kernel_sizes", {2, 2}), str("pad_type", "custom"), ints("pad", {1, 0, 0, 0}),
                                         boolean("ceil_mode", true)}),
                    Catch::Contains("symmetric"));
  CHECK_THROWS_WITH(e.op("avg_pool", x, {ints("kernel_sizes", {2, 9}), str("pad_type", "valid")}),
                    Catch::Contains("spatial dimension 1 has invalid output size 0"));
  CHECK_THROWS_WITH(e.op("avg_pool", x, {ints("kernel_sizes", {2, 2}), str("pad_type", "valid"), ints("pad", {0, 0})}),
                    Catch::Contains("pad (length 2)"));
  CHECK_THROWS_WITH(e.op("avg_pool", x, {ints("kernel_sizes", {2, 2}), str("pad_type", "valid"), ints("strides", {0, 1})}),
                    Catch::Contains("'strides'") && Catch::Contains("positive"));
  Var* x3 = e.input({c.constant(1), c.constant(2), c.constant(8), c.constant(8), c.constant(8)}, DataType::Float32, "x3");
  CHECK_THROWS_WITH(e.op("l2_pool", x3, {ints("kernel_sizes", {2, 2, 2}), str("pad_type", "valid")}),
                    Catch::Contains("l2_pool") && Catch::Contains("1 or 2 spatial dims, got 3"));
  CHECK_THROWS_WITH(e.op("max_pool", x3, {ints("kernel_sizes", {2, 2, 2}), str("pad_type", "valid"), boolean("ceil_mode", true)}),
                    Catch::Contains("1D or 2D"));
  CHECK(e.op("max_pool", x3, {ints("kernel_sizes", {2, 2, 2}), str("pad_type", "valid")})->type()->str() ==
        "(1, 2, 7, 7, 7, fp32)");
  Env g(Target::iOS15);
  Var* x15 = g.input({g.c().constant(1), g.c().constant(2), g.c().constant(8), g.c().constant(8)});
  CHECK_THROWS_WITH(g.op("avg_pool", x15, {ints("kernel_sizes", {2, 2}), str("pad_type", "same_lower")}),
                    Catch::Contains("same_lower") && Catch::Contains("iOS15"));
}

TEST_CASE("conv_util: helpers", "[conv][symbolic]") {
  Context c;
  auto S = Symbol::create("N");
  Dim n = c.symbol(S);
  CHECK(ops::effective_kernel(c, c.constant(3), 2) == c.constant(5));
  Dim p = ops::same_total_pad(c, n, c.constant(3), 2);
  for (int64_t v = 1; v < 30; ++v) {
    int64_t want = std::max<int64_t>(0, 2 * ((v + 1) / 2) - v + 3 - 2);
    CHECK(eval(p, {{S.get(), v}}) == want);
  }
  CHECK(ops::same_total_pad(c, c.constant(7), c.constant(3), 2) == c.constant(2));
  CHECK(ops::ints_str({1, -2}) == "[1, -2]");
}
