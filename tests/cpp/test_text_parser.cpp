// MIL text parser: exact round trips with consts, coremltools' format, symbols, opsets, errors,
// and a fuzz test on mutated text.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "milkit/builder/builder.h"
#include "milkit/serde/text.h"
#include "milkit/serde/text_parser.h"
#include "milkit/types/error.h"

using namespace milkit;

namespace {

ProgramTextOptions with_consts(size_t max_elems = SIZE_MAX) {
  ProgramTextOptions o;
  o.consts = true;
  o.max_const_elems = max_elems;
  return o;
}

struct Call {
  explicit Call(Builder& b) : b(b) {}
  Builder& b;
  std::vector<Arg> args;
  Call& v(const std::string& n, Var* x) {
    args.push_back(Builder::arg(n, x));
    return *this;
  }
  Call& val(const std::string& n, Value x) {
    args.push_back(Builder::arg(n, std::move(x)));
    return *this;
  }
  Call& tuple(const std::string& n, std::vector<Var*> xs) {
    Arg a;
    a.name = n;
    a.is_sequence = true;
    for (Var* x : xs) a.items.push_back(ArgItem{x, nullptr});
    args.push_back(std::move(a));
    return *this;
  }
  std::vector<Var*> make(const std::string& type) { return b.create(type, args); }
  Var* one(const std::string& type) { return make(type).at(0); }
};

Value f32(std::vector<int64_t> shape, std::vector<double> v) {
  return Value::from_doubles(DataType::Float32, std::move(shape), v);
}
Value ints(std::vector<int64_t> v) { return Value::int_list(v); }
Value i32(int64_t v) { return Value::scalar_int(DataType::Int32, v); }

// Every const value of `a` equals the one at the same place in `b`.
void check_same_values(const Function& a, const Function& b) {
  auto oa = a.all_ops(), ob = b.all_ops();
  REQUIRE(oa.size() == ob.size());
  for (size_t i = 0; i < oa.size(); ++i) {
    REQUIRE(oa[i]->op_type() == ob[i]->op_type());
    CHECK(oa[i]->name() == ob[i]->name());
    REQUIRE(oa[i]->outputs().size() == ob[i]->outputs().size());
    for (size_t k = 0; k < oa[i]->outputs().size(); ++k) {
      const Var* va = oa[i]->output(k);
      const Var* vb = ob[i]->output(k);
      CHECK(va->name() == vb->name());
      CHECK(va->type()->str() == vb->type()->str());
      REQUIRE(va->has_value() == vb->has_value());
      if (va->has_value()) {
        INFO(va->name());
        CHECK(va->value()->equals(*vb->value()));
      }
    }
  }
}

// parse(to_text(p, consts)) prints identically (both formats) and has equal values.
std::shared_ptr<Program> check_round_trip(const Program& p) {
  std::string text = program_to_text(p, with_consts());
  INFO(text);
  auto q = parse_program(text);
  CHECK(program_to_text(*q, with_consts()) == text);
  CHECK(program_to_text(*q) == program_to_text(p));
  REQUIRE(q->functions().size() == p.functions().size());
  for (size_t i = 0; i < p.functions().size(); ++i) {
    CHECK(q->functions()[i].first == p.functions()[i].first);
    CHECK(q->functions()[i].second->opset() == p.functions()[i].second->opset());
    check_same_values(*p.functions()[i].second, *q->functions()[i].second);
  }
  return q;
}

std::shared_ptr<Program> program_of(std::shared_ptr<Function> f, const std::string& name = "main") {
  auto p = std::make_shared<Program>();
  p->add_function(name, std::move(f));
  return p;
}

std::string format_error(const std::string& text) {
  try {
    parse_program(text);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "<no error>";
}

// A program touching many op families, with a symbolic sequence length.
std::shared_ptr<Program> many_ops_program(Target t) {
  auto f = std::make_shared<Function>(t);
  Context& c = f->ctx();
  Dim s = c.symbol(Symbol::create("S"));
  Var* x = f->add_input("x", c.tensor(DataType::Float32, std::vector<Dim>{c.constant(1), c.constant(3), s, c.constant(8)}));
  Builder b(*f);
  Var* w = b.add_const(std::make_shared<const Value>(f32({4, 3, 3, 3}, std::vector<double>(108, 0.125))), "conv_w");
  Var* conv = Call{b}.v("x", x).v("weight", w).val("pad_type", Value::scalar_string("same")).one("conv");
  Var* pool = Call{b}.v("x", conv).val("kernel_sizes", ints({2, 2})).val("strides", ints({2, 2}))
                  .val("pad_type", Value::scalar_string("valid")).one("max_pool");
  Var* act = Call{b}.v("x", pool).one("relu");
  Var* sg = Call{b}.v("x", act).one("sigmoid");
  Var* ge = Call{b}.v("x", sg).val("mode", Value::scalar_string("TANH_APPROXIMATION")).one("gelu");
  Var* add = Call{b}.v("x", ge).val("y", Value::scalar_float(DataType::Float32, 0.1)).one("add");
  Var* mul = Call{b}.v("x", add).val("y", f32({4}, {1.5, -2.0, 1e-7, 3.25})).one("mul");
  Var* lw = b.add_const(std::make_shared<const Value>(f32({5, 4}, std::vector<double>(20, -0.5))), "lin_w");
  Var* lin = Call{b}.v("x", mul).v("weight", lw).val("bias", f32({5}, {1, 2, 3, 4, 5})).one("linear");
  Var* tr = Call{b}.v("x", lin).val("perm", ints({0, 2, 1, 3})).one("transpose");
  Var* mm = Call{b}.v("x", tr).v("y", tr).val("transpose_y", Value::scalar_bool(true)).one("matmul");
  Var* rs = Call{b}.v("x", mm).val("shape", ints({1, -1})).one("reshape");
  Var* sm = Call{b}.v("x", lin).val("axis", i32(-1)).one("softmax");
  auto parts = Call{b}.v("x", sm).val("num_splits", i32(5)).val("axis", i32(-1)).make("split");
  Var* cat = Call{b}.tuple("values", {parts[4], parts[0], parts[2]}).val("axis", i32(-1)).one("concat");
  Var* red = Call{b}.v("x", cat).val("axes", ints({-1})).val("keep_dims", Value::scalar_bool(true)).one("reduce_mean");
  Var* sh = Call{b}.v("x", red).one("shape");
  Var* g = Call{b}.v("x", sh).val("indices", ints({2})).val("axis", i32(0)).one("gather");
  Var* fl = Call{b}.v("shape", sh).val("value", Value::scalar_float(DataType::Float32, 0.0)).one("fill");
  Var* ca = Call{b}.v("x", red).val("dtype", Value::scalar_string("fp16")).one("cast");
  f->body().set_outputs({rs, parts[1], parts[3], g, fl, ca});
  return program_of(f);
}

}  // namespace

TEST_CASE("text: default printing is unchanged by the consts option", "[text]") {
  auto p = many_ops_program(Target::iOS17);
  std::string dflt = program_to_text(*p);
  CHECK(program_to_text(*p, ProgramTextOptions{}) == dflt);
  CHECK(dflt.find("= const(") == std::string::npos);
  std::string full = program_to_text(*p, with_consts());
  CHECK(full.find("%conv_w: (4, 3, 3, 3, fp32)*(Tensor) = const(val=[[[[0.125, ") != std::string::npos);
  CHECK(full.find("= conv(x=%x, weight=%conv_w,") != std::string::npos);
  // arguments refer to consts by name when consts are printed
  CHECK(full.find("y=%add_0_y_0") != std::string::npos);
  CHECK(full.find("%add_0_y_0: (fp32)*(Scalar) = const(val=0.1, name=\"add_0_y_0\")") != std::string::npos);
}

TEST_CASE("text: exact round trip of many op families at every opset", "[text]") {
  for (Target t : {Target::iOS15, Target::iOS16, Target::iOS17, Target::iOS18}) {
    INFO(target_name(t));
    auto p = many_ops_program(t);
    auto q = check_round_trip(*p);
    const Function& f = *q->functions()[0].second;
    CHECK(f.opset() == t);
    auto outs = f.body().outputs();
    REQUIRE(outs.size() == 6);
    CHECK(outs[1]->name() == "split_0_1");
    CHECK(outs[1]->op()->op_type() == "split");
    CHECK(outs[1]->op()->outputs().size() == 5);
    CHECK(outs[3]->value() != nullptr);  // gather of a shape: symbolic value re-inferred
    CHECK(outs[5]->type()->dtype() == DataType::Float16);
  }
}

TEST_CASE("text: every const dtype round trips bit-exactly", "[text]") {
  auto f = std::make_shared<Function>(Target::iOS18);
  Context& c = f->ctx();
  f->add_input("x", c.tensor(DataType::Float32, std::vector<int64_t>{2}));
  Builder b(*f);
  std::vector<Var*> outs;
  auto add = [&](Value v, const std::string& n) {
    outs.push_back(b.add_const(std::make_shared<const Value>(std::move(v)), n));
  };
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  std::vector<double> tricky = {0.1, -0.0, 1e-45, 3.4028234663852886e38, 1.0 / 3, inf, -inf, nan, 65504, 6e-8, 1e-5, 123456789.0};
  add(Value::from_doubles(DataType::Float32, {3, 4}, tricky), "f32");
  add(Value::from_doubles(DataType::Float16, {12}, tricky), "f16");
  add(Value::from_doubles(DataType::Float64, {12}, tricky), "f64");
  add(Value::from_doubles(DataType::BFloat16, {12}, tricky), "bf16");
  add(Value::from_doubles(DataType::Float32, {}, {0.1}), "f32_scalar");
  add(Value::from_doubles(DataType::Float16, {}, {0.1}), "f16_scalar");
  add(Value::from_doubles(DataType::Float32, {0, 3}, {}), "f32_empty");
  add(Value::from_ints(DataType::Int8, {4}, {-128, 127, 0, -1}), "i8");
  add(Value::from_ints(DataType::UInt8, {3}, {0, 255, 7}), "u8");
  add(Value::from_ints(DataType::Int16, {3}, {-32768, 32767, 5}), "i16");
  add(Value::from_ints(DataType::UInt16, {2}, {0, 65535}), "u16");
  add(Value::from_ints(DataType::Int32, {2, 2}, {INT32_MIN, INT32_MAX, 0, -7}), "i32");
  add(Value::from_ints(DataType::UInt32, {2}, {0, 4294967295LL}), "u32");
  add(Value::from_ints(DataType::Int64, {2}, {INT64_MIN, INT64_MAX}), "i64");
  add(Value::from_ints(DataType::UInt64, {2}, {0, -1}), "u64");  // 2^64 - 1
  add(Value::from_ints(DataType::Int4, {5}, {-8, 7, 0, -1, 3}), "i4");
  add(Value::from_ints(DataType::UInt1, {3}, {0, 1, 1}), "u1");
  add(Value::from_ints(DataType::UInt2, {2}, {3, 1}), "u2");
  add(Value::from_ints(DataType::UInt3, {2}, {7, 0}), "u3");
  add(Value::from_ints(DataType::UInt4, {2}, {15, 9}), "u4");
  add(Value::from_ints(DataType::UInt6, {2}, {63, 32}), "u6");
  add(Value::from_ints(DataType::Bool, {2, 1}, {1, 0}), "b");
  add(Value::scalar_bool(true), "b_scalar");
  add(Value::strings({3}, {"plain", "quote \" back\\slash", "tab\tnew\nline\x01"}), "s");
  add(Value::scalar_string("EXACT"), "s_scalar");
  f->body().set_outputs(outs);
  auto p = program_of(f);
  std::string text = program_to_text(*p, with_consts());
  CHECK(text.find("%f16_scalar: (fp16)*(Scalar) = const(val=0.099975586, name=\"f16_scalar\")") != std::string::npos);
  CHECK(text.find("%b_scalar: (bool)*(Scalar) = const(val=True, name=\"b_scalar\")") != std::string::npos);
  CHECK(text.find("val=[\"plain\", \"quote \\\" back\\\\slash\", \"tab\\tnew\\nline\\x01\"]") != std::string::npos);
  CHECK(text.find("%u64: (2,uint64)*(Tensor) = const(val=[0, 18446744073709551615]") != std::string::npos);
  CHECK(text.find("%f32_empty: (0, 3, fp32)*(Tensor) = const(val=[], ") != std::string::npos);
  auto q = check_round_trip(*p);
  const Function& g = *q->functions()[0].second;
  for (size_t i = 0; i < outs.size(); ++i) {
    INFO(outs[i]->name());
    CHECK(g.body().outputs()[i]->type()->dtype() == outs[i]->type()->dtype());
    CHECK(g.body().outputs()[i]->value()->equals(*outs[i]->value()));
  }
}

TEST_CASE("text: elided consts come back as zeros of their dtype and shape", "[text]") {
  auto f = std::make_shared<Function>(Target::iOS17);
  Context& c = f->ctx();
  Var* x = f->add_input("x", c.tensor(DataType::Float16, std::vector<int64_t>{6, 4}));
  Builder b(*f);
  Var* w = b.add_const(std::make_shared<const Value>(Value::from_doubles(DataType::Float16, {6, 4}, std::vector<double>(24, 0.5))), "w");
  Var* y = Call{b}.v("x", x).v("y", w).one("add");
  Var* s = b.add_const(std::make_shared<const Value>(Value::strings({5}, {"a", "b", "c", "d", "e"})), "labels");
  f->body().set_outputs({y, s});
  auto p = program_of(f);
  std::string text = program_to_text(*p, with_consts(4));
  CHECK(text.find("%w: (6, 4, fp16)*(Tensor) = const(val=<elided 24 elems>, name=\"w\")") != std::string::npos);
  CHECK(text.find("%y_0_y_0") == std::string::npos);
  auto q = parse_program(text);
  CHECK(program_to_text(*q, with_consts(4)) == text);
  const Function& g = *q->functions()[0].second;
  Var* w2 = g.find_var("w");
  REQUIRE(w2);
  CHECK(w2->value()->dtype() == DataType::Float16);
  CHECK(w2->value()->shape() == std::vector<int64_t>{6, 4});
  for (double d : w2->value()->to_doubles()) CHECK(d == 0.0);
  Var* s2 = g.find_var("labels");
  REQUIRE(s2);
  CHECK(s2->value()->string_values() == std::vector<std::string>(5, ""));
  // a count that does not match the declared type
  std::string bad = text;
  bad.replace(bad.find("<elided 24 elems>"), 17, "<elided 25 elems>");
  CHECK_THAT(format_error(bad), Catch::Contains("elided value of 25 elements") && Catch::Contains("line 4"));
}

TEST_CASE("text: symbolic shapes and expressions", "[text]") {
  auto f = std::make_shared<Function>(Target::iOS17);
  Context& c = f->ctx();
  Dim s = c.symbol(Symbol::create("S"));
  Dim t = c.symbol(Symbol::create("T"));
  Dim half = c.floordiv(c.add(s, c.constant(1)), c.constant(2));
  Dim lin = c.add(c.mul(c.constant(2), s), t);
  Var* x = f->add_input("x", c.tensor(DataType::Float32, std::vector<Dim>{half, lin}));
  Var* z = f->add_input("z", c.tensor(DataType::Int32, std::vector<Dim>{c.mul(s, s), c.mod(t, c.constant(3)), c.min(s, t)}));
  Builder b(*f);
  Var* sh = Call{b}.v("x", x).one("shape");
  Var* r = Call{b}.v("x", x).v("shape", sh).one("reshape");
  Var* tr = Call{b}.v("x", r).val("perm", ints({1, 0})).one("transpose");
  Var* fl = Call{b}.v("x", tr).val("axes", ints({0})).one("expand_dims");
  Var* zz = Call{b}.v("x", z).val("y", i32(2)).one("mul");
  f->body().set_outputs({fl, zz, sh});
  auto p = program_of(f);
  std::string text = program_to_text(*p, with_consts());
  CHECK(text.find("%x: ((S + 1)//2, 2*S + T, fp32)(Tensor)") != std::string::npos);
  CHECK(text.find("%z: (S**2, T % 3, min(S, T), int32)(Tensor)") != std::string::npos);
  auto q = check_round_trip(*p);
  // one Symbol per name: both inputs share S
  const Function& g = *q->functions()[0].second;
  const Type* tx = g.inputs()[0]->type();
  const Type* tz = g.inputs()[1]->type();
  Dim s_in_x = tx->shape()[0]->args()[0]->terms()[0].atoms[0];
  CHECK(s_in_x->kind() == Expr::Kind::Symbol);
  CHECK((tz->shape()[2]->args()[0] == s_in_x || tz->shape()[2]->args()[1] == s_in_x));
  CHECK(g.body().outputs()[2]->value()->is_symbolic());
}

TEST_CASE("text: multiple functions share symbols by name", "[text]") {
  std::string text =
      "\nmain[CoreML8](%x: (B, 4, fp32)(Tensor)) {\n"
      "  block0() {\n"
      "    %y: (B, 4, fp32)(Tensor) = relu(x=%x, name=\"y\")\n"
      "  } -> (%y)\n"
      "}\n"
      "\nsecond[CoreML8](%a: (B, 2, fp16)(Tensor)) {\n"
      "  block0() {\n"
      "    %b: (B, 2, fp16)(Tensor) = mul(x=%a, y=0.5, name=\"b\")\n"
      "  } -> (%b)\n"
      "}\n";
  auto p = parse_program(text);
  REQUIRE(p->functions().size() == 2);
  CHECK(program_to_text(*p) == text);
  Dim b1 = p->functions()[0].second->inputs()[0]->type()->shape()[0];
  Dim b2 = p->functions()[1].second->inputs()[0]->type()->shape()[0];
  CHECK(b1->symbol() == b2->symbol());
  // the inline 0.5 takes the dtype of x (type domain T): fp16
  Var* b = p->functions()[1].second->body().outputs()[0];
  CHECK(b->op()->input1("y")->type()->dtype() == DataType::Float16);
  std::string name;
  auto f = parse_function(text.substr(0, text.find("\nsecond")), &name);
  CHECK(name == "main");
  CHECK(f->num_ops() == 1);
}

TEST_CASE("text: coremltools' default format parses back for small programs", "[text]") {
  for (Target t : {Target::iOS15, Target::iOS16, Target::iOS17, Target::iOS18}) {
    INFO(target_name(t));
    auto f = std::make_shared<Function>(t);
    Context& c = f->ctx();
    Dim s = c.symbol(Symbol::create("S"));
    Var* x = f->add_input("x", c.tensor(DataType::Float16, std::vector<Dim>{c.constant(2), s}));
    Var* i = f->add_input("i", c.tensor(DataType::Int32, std::vector<Dim>{c.constant(3)}));
    Builder b(*f);
    Var* a = Call{b}.v("x", x).val("y", Value::scalar_float(DataType::Float16, 0.1)).one("add");
    Var* cl = Call{b}.v("x", a).val("alpha", Value::scalar_float(DataType::Float16, -1))
                  .val("beta", Value::scalar_float(DataType::Float16, 6)).one("clip");
    Var* fl = Call{b}.val("shape", ints({2, 3})).val("value", Value::scalar_float(DataType::Float16, 1.5)).one("fill");
    Var* g = Call{b}.v("x", cl).val("indices", ints({1, 0})).val("axis", i32(0)).one("gather");
    Var* ii = Call{b}.v("x", i).val("y", i32(4)).one("floor_div");
    auto sp = Call{b}.v("x", g).val("split_sizes", ints({1, 1})).val("axis", i32(0)).make("split");
    Var* st = Call{b}.v("x", g).val("begin", ints({0, 0})).val("end", ints({1, 1}))
                  .val("end_mask", Value::from_ints(DataType::Bool, {2}, {0, 1})).one("slice_by_index");
    f->body().set_outputs({fl, ii, sp[0], sp[1], st});
    auto p = program_of(f);
    std::string text = program_to_text(*p);
    INFO(text);
    auto q = parse_program(text);
    CHECK(program_to_text(*q) == text);
    const Function& g2 = *q->functions()[0].second;
    // inline values: fp16 from the type domain and from the declared output, int32 and bool
    CHECK(g2.body().outputs()[0]->op()->input1("value")->type()->dtype() == DataType::Float16);
    CHECK(g2.find_var("add_0")->op()->input1("y")->type()->dtype() == DataType::Float16);
    CHECK(g2.find_var("clip_0")->op()->input1("beta")->type()->dtype() == DataType::Float16);
    CHECK(g2.body().outputs()[4]->op()->input1("end_mask")->type()->dtype() == DataType::Bool);
    check_same_values(*f, g2);
  }
}

TEST_CASE("text: names of inferred fresh symbols are bound to the inferred dims", "[text]") {
  auto f = std::make_shared<Function>(Target::iOS17);
  Context& c = f->ctx();
  Var* x = f->add_input("x", c.tensor(DataType::Float32, std::vector<int64_t>{4, 3}));
  Builder b(*f);
  Var* nz = Call{b}.v("x", x).one("non_zero");
  Var* sh = Call{b}.v("x", nz).one("shape");
  Var* r = Call{b}.v("x", nz).val("y", i32(1)).one("add");
  f->body().set_outputs({r, sh});
  auto p = program_of(f);
  std::string text = program_to_text(*p, with_consts());
  INFO(text);
  REQUIRE(nz->type()->shape()[0]->kind() == Expr::Kind::Symbol);
  auto q = parse_program(text);
  const Function& g = *q->functions()[0].second;
  Var* nz2 = g.find_var(nz->name());
  Var* r2 = g.body().outputs()[0];
  CHECK(r2->type()->shape()[0] == nz2->type()->shape()[0]);
  CHECK(r2->type()->shape()[1]->value() == 2);
}

TEST_CASE("text: errors carry line, column and what was expected", "[text]") {
  const std::string head = "\nmain[CoreML7](%x: (2, fp32)(Tensor)) {\n  block0() {\n";
  const std::string tail = "  } -> (%y)\n}\n";
  auto body = [&](const std::string& line) { return head + "    " + line + "\n" + tail; };
  struct Case {
    std::string text;
    std::vector<std::string> expect;
  };
  std::vector<Case> cases = {
      {body("%y: (2, fp32)(Tensor) = relu(x=%x name=\"y\")"), {"line 4, column 39", "expected ',' or ')'"}},
      {body("%y: (2, fp32)(Tensor) = relu(x=%q, name=\"y\")"), {"line 4, column 36", "undefined var '%q'"}},
      {body("%y: (3, fp32)(Tensor) = relu(x=%x, name=\"y\")"), {"line 4, column 5", "relu 'y'", "declared (3, fp32)", "infers (2, fp32)"}},
      {body("%y: (2, fp16)(Tensor) = relu(x=%x, name=\"y\")"), {"line 4", "declared (2, fp16)"}},
      {body("%y: (2, fp32)(Tensor) = frobnicate(x=%x, name=\"y\")"), {"line 4, column 29", "unknown op type 'frobnicate'"}},
      {body("%y: (2, fp32)(Tensor) = relu(x=%x, alpha=1.0, name=\"y\")"), {"line 4, column 40", "unknown argument 'alpha'"}},
      {body("%y: (2, fp32)(Tensor) = relu(name=\"y\")"), {"line 4", "missing required input 'x'"}},
      {body("%y: (2, fp32)*(Tensor) = relu(x=%x, name=\"y\")"), {"line 4, column 5", "known value (*)", "infers no value"}},
      {body("%y: (2, fp32)(Tensor) = add(x=%x, y=\"s\", name=\"y\")"), {"line 4", "add 'y'"}},
      {body("%y: (2, fp32)(Tensor) = relu(x=%x, name=\"y)"), {"line 4, column 45", "unterminated string"}},
      {body("%y: (2, fp32)(Tensor) = relu(x=%x, name=\"y\") $"), {"line 4, column 50", "unexpected character '$'"}},
      {body("%y: (2, fp99)(Tensor) = relu(x=%x, name=\"y\")"), {"line 4, column 17", "expected ',' after a dimension"}},
      {body("%y: (2, fp32)(Tensr) = relu(x=%x, name=\"y\")"), {"line 4, column 19", "Tensor, Scalar, List or State"}},
      {body("%y: (2, fp32)(Tensor) = const(val=[1.0, 2.0, 3.0], name=\"y\")"), {"line 4, column 39", "value of shape (3,)"}},
      {body("%y: (2, fp32)(Tensor) = const(val=[1.0, [2.0]], name=\"y\")"), {"line 4, column 45", "ragged list"}},
      {body("%y: (2, int8)(Tensor) = const(val=[1, 300], name=\"y\")"), {"line 4, column 43", "300 is out of range for dtype int8"}},
      {body("%x: (2, fp32)(Tensor) = relu(x=%x, name=\"y\")"), {"line 4, column 5", "var '%x' defined twice"}},
      {body("%y: (2, fp32)(Tensor) = relu(x=%x, x=%x, name=\"y\")"), {"line 4, column 40", "given twice"}},
      {body("%y: (2, fp32)(Tensor) = relu(x=%x, name=\"y\")\n      block0() {"), {"line 5, column 7", "nested blocks"}},
      {"\nmain[CoreML99](%x: (2, fp32)(Tensor)) {", {"line 2, column 6", "unknown opset 'CoreML99'"}},
      {"\nmain[CoreML7](%x: (2, fp32)(Tensor)) {\n  block0() {\n", {"line 4, column 1", "expected an op", "the end of the text"}},
      {head + "  } -> (%nope)\n}\n", {"line 4, column 9", "undefined var '%nope'"}},
      {body("%y: (2, fp32)(Tensor) = relu(x=%z, name=\"y\")\n    %z: (2, fp32)(Tensor) = relu(x=%x, name=\"z\")"), {"line 4, column 36", "used before it is defined"}},
      {body("%y: ((S + , fp32)(Tensor) = relu(x=%x, name=\"y\")"), {"line 4, column 15", "expected a dimension"}},
      {body("%y: (2, fp32)(Tensor) = relu(x=%x, name=\"\\q\")"), {"line 4, column 46", "unknown escape"}},
      {"\nmain[CoreML7](%x: (S//0, fp32)(Tensor)) {", {"line 2, column 21", "division by zero"}},
      {"\nmain[CoreML7](%x: (" + std::string(200, '(') + "1" + std::string(200, ')') + ", fp32)(Tensor)) {", {"line 2", "nesting deeper than 64"}},
  };
  for (const auto& k : cases) {
    std::string msg = format_error(k.text);
    INFO(k.text);
    INFO(msg);
    for (const auto& e : k.expect) CHECK_THAT(msg, Catch::Contains(e));
  }
  // milkit::FormatError is a ValueError
  CHECK_THROWS_AS(parse_program("garbage"), ValueError);
  CHECK(parse_program("")->functions().empty());
}

TEST_CASE("text: mutated text raises FormatError or parses, never anything else", "[text][fuzz]") {
  std::vector<std::string> seeds = {program_to_text(*many_ops_program(Target::iOS17), with_consts()),
                                    program_to_text(*many_ops_program(Target::iOS18))};
  std::mt19937 rng(1234);
  const std::string alphabet = "()[]{},:=*^%+-/<>\"'\\ \n0123456789.eSxTfp_-?abclist";
  int parsed = 0, errors = 0;
  for (int it = 0; it < 1500; ++it) {
    std::string t = seeds[it % seeds.size()];
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !t.empty(); ++e) {
      size_t at = rng() % t.size();
      switch (rng() % 5) {
        case 0: t.erase(at, 1 + rng() % 8); break;
        case 1: t.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
        case 2: t[at] = alphabet[rng() % alphabet.size()]; break;
        case 3: {
          size_t from = rng() % t.size();
          t.insert(at, t.substr(from, 1 + rng() % 30));
          break;
        }
        default: t = t.substr(0, at); break;
      }
    }
    try {
      auto p = parse_program(t);
      ++parsed;
      // what parses prints and parses again
      std::string again = program_to_text(*p, with_consts());
      CHECK_NOTHROW(parse_program(again));
    } catch (const FormatError&) {
      ++errors;
    } catch (const std::exception& e) {
      INFO(t);
      FAIL(std::string("not a FormatError: ") + e.what());
    }
  }
  CHECK(errors > 1000);
  CHECK(parsed + errors == 1500);
}
