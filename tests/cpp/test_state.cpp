// States: read_state / coreml_update_state / write_state, their serialization (coreml_update_state
// -> write_state + read_state, state inputs, ModelDescription.state) and reading back, plus
// enumerated input shapes in the ModelDescription.
#include <catch2/catch.hpp>

#include "MIL.pb.h"
#include "Model.pb.h"
#include "milkit/builder/builder.h"
#include "milkit/passes/pass.h"
#include "milkit/serde/proto_reader.h"
#include "milkit/serde/proto_writer.h"
#include "milkit/types/error.h"

using namespace milkit;
namespace spec = CoreML::Specification;

namespace {

struct StateProg {
  std::shared_ptr<Program> p = std::make_shared<Program>();
  Function* f = nullptr;
  std::unique_ptr<Builder> b;
  explicit StateProg(DataType dt = DataType::Float16, Target t = Target::iOS18) {
    auto fn = std::make_shared<Function>(t);
    fn->add_input("cache", fn->ctx().state(fn->ctx().tensor(dt, std::vector<int64_t>{2, 3})));
    fn->add_input("x", fn->ctx().tensor(dt, std::vector<int64_t>{2, 3}));
    p->add_function("main", fn);
    f = fn.get();
    b = std::make_unique<Builder>(*f);
  }
  Var* cache() const { return f->inputs()[0]; }
  Var* x() const { return f->inputs()[1]; }
  Var* update(Var* value, const std::string& name = "") {
    return b->op("coreml_update_state", {{"state", cache()}, {"value", value}}, name);
  }
  Var* read(const std::string& name = "") { return b->op("read_state", {{"input", cache()}}, name); }
};

spec::Model parse(const std::string& bytes) {
  spec::Model m;
  REQUIRE(m.ParseFromString(bytes));
  return m;
}

std::vector<std::string> op_list(const Function& f) {
  std::vector<std::string> r;
  for (Operation* op : f.body().ops()) r.push_back(op->op_type() + ":" + op->name());
  return r;
}

std::vector<std::string> proto_ops(const spec::Model& m) {
  std::vector<std::string> r;
  const auto& blk = m.mlprogram().functions().at("main").block_specializations().at("CoreML8");
  for (const auto& op : blk.operations())
    r.push_back(op.type() + ":" + op.attributes().at("name").immediatevalue().tensor().strings().values(0));
  return r;
}

}  // namespace

TEST_CASE("state ops: types, domains and availability", "[state]") {
  StateProg g;
  Var* u = g.update(g.x());
  CHECK(u->type() == g.x()->type());
  CHECK(u->name() == "coreml_update_state_0");
  Var* r = g.read();
  CHECK(r->type() == g.cache()->type()->elem());
  CHECK(r->type()->str() == "(2, 3, fp16)");
  // the value must have the wrapped type exactly
  Var* y = g.b->op("reshape", {{"x", g.x()}, {"shape", g.b->add_const(std::make_shared<Value>(Value::from_ints(DataType::Int32, {2}, {3, 2})), "s")}});
  CHECK_THROWS_AS(g.update(y), ValueError);
  // read_state needs a state
  CHECK_THROWS_AS(g.b->op("read_state", {{"input", g.x()}}), TypeError);
  // read_state and write_state are iOS18 ops; coreml_update_state (dialect) exists at every opset
  const auto& reg = OpRegistry::instance();
  CHECK(reg.find("read_state", Target::iOS17) == nullptr);
  CHECK(reg.find("read_state", Target::iOS18) != nullptr);
  CHECK(reg.find("write_state", Target::iOS17) == nullptr);
  CHECK(reg.find("coreml_update_state", Target::iOS15) != nullptr);
  // write_state has no outputs
  std::vector<Arg> wa{Builder::arg("input", g.cache()), Builder::arg("data", g.x())};
  CHECK(g.b->create("write_state", wa).empty());
}

TEST_CASE("state ops: value dtype domain", "[state]") {
  StateProg g(DataType::Float32);
  CHECK(g.update(g.x())->type()->dtype() == DataType::Float32);
  auto fn = std::make_shared<Function>(Target::iOS18);
  fn->add_input("s", fn->ctx().state(fn->ctx().tensor(DataType::Int64, std::vector<int64_t>{2})));
  fn->add_input("v", fn->ctx().tensor(DataType::Int64, std::vector<int64_t>{2}));
  Builder b(*fn);
  CHECK_THROWS_AS(b.op("coreml_update_state", {{"state", fn->inputs()[0]}, {"value", fn->inputs()[1]}}), TypeError);
}

TEST_CASE("dead code elimination keeps state updates", "[state]") {
  StateProg g;
  g.update(g.x());
  Var* r = g.b->op("relu", {{"x", g.x()}});
  Var* unused = g.b->op("relu", {{"x", g.x()}});
  (void)unused;
  g.f->body().set_outputs({r});
  PassManager pm;
  pm.add("common::dead_code_elimination", {});
  pm.run(*g.p, true);
  CHECK(op_list(*g.f) == std::vector<std::string>{"coreml_update_state:coreml_update_state_0", "relu:relu_0"});
}

TEST_CASE("writer: coreml_update_state -> write_state (+ read_state when used)", "[state][serde]") {
  StateProg g;
  Var* k = g.update(g.x(), "upd_k");                      // used: write_state + read_state
  g.update(g.b->op("relu", {{"x", g.x()}}), "upd_v");     // unused: write_state only
  Var* r = g.read("rd");
  Var* out = g.b->op("add", {{"x", k}, {"y", r}}, "out");
  g.f->body().set_outputs({out});
  ProtoWriteOptions o;
  o.target = Target::iOS18;
  spec::Model m = parse(write_model_proto(*g.p, o));
  CHECK(proto_ops(m) == std::vector<std::string>{"write_state:upd_k_write_state", "read_state:upd_k",
                                                 "relu:relu_0", "write_state:upd_v_write_state", "read_state:rd",
                                                 "add:out"});
  const auto& blk = m.mlprogram().functions().at("main").block_specializations().at("CoreML8");
  const auto& ws = blk.operations(0);
  CHECK(ws.outputs_size() == 0);
  CHECK(ws.inputs().at("input").arguments(0).name() == "cache");
  CHECK(ws.inputs().at("data").arguments(0).name() == "x");
  const auto& rs = blk.operations(1);
  REQUIRE(rs.outputs_size() == 1);
  CHECK(rs.outputs(0).name() == "upd_k");
  CHECK(rs.inputs().at("input").arguments(0).name() == "cache");
  CHECK(rs.inputs().size() == 1);
  // the state input: a stateType wrapping the tensor type
  const auto& in0 = m.mlprogram().functions().at("main").inputs(0);
  CHECK(in0.name() == "cache");
  REQUIRE(in0.type().has_statetype());
  CHECK(in0.type().statetype().wrappedtype().tensortype().dimensions_size() == 2);
  // ModelDescription: the state is in `state`, not in `input`
  const auto& d = m.description();
  REQUIRE(d.input_size() == 1);
  CHECK(d.input(0).name() == "x");
  REQUIRE(d.state_size() == 1);
  CHECK(d.state(0).name() == "cache");
  REQUIRE(d.state(0).type().has_statetype());
  const auto& at = d.state(0).type().statetype().arraytype();
  CHECK(at.datatype() == spec::ArrayFeatureType_ArrayDataType_FLOAT16);
  CHECK(std::vector<int64_t>(at.shape().begin(), at.shape().end()) == std::vector<int64_t>{2, 3});

  SECTION("reading merges write_state + read_state back into coreml_update_state") {
    auto back = read_model_proto(write_model_proto(*g.p, o), nullptr, "t");
    const Function& f = *back->function("main");
    // like coremltools' loader, a read_state of the same state right after a write_state is
    // merged into it (upd_v's write + the separate read "rd" become one update named "rd")
    CHECK(op_list(f) == std::vector<std::string>{"coreml_update_state:upd_k", "relu:relu_0",
                                                 "coreml_update_state:rd", "add:out"});
    CHECK(f.inputs()[0]->type()->kind() == TypeKind::State);
    Operation* add = f.body().outputs()[0]->op();
    CHECK(add->input1("x")->name() == "upd_k");
    CHECK(add->input1("x")->op()->op_type() == "coreml_update_state");
    spec::Model again = parse(write_model_proto(*back, o));
    CHECK(proto_ops(again) == std::vector<std::string>{"write_state:upd_k_write_state", "read_state:upd_k",
                                                       "relu:relu_0", "write_state:rd_write_state",
                                                       "read_state:rd", "add:out"});
    CHECK(again.description().state_size() == 1);
    CHECK(again.description().input_size() == 1);
  }
}

TEST_CASE("writer: state errors like coremltools", "[state][serde]") {
  SECTION("fp16 only") {
    StateProg g(DataType::Float32);
    g.f->body().set_outputs({g.update(g.x())});
    ProtoWriteOptions o;
    o.target = Target::iOS18;
    CHECK_THROWS_WITH(write_model_proto(*g.p, o), Catch::Contains("State only support fp16 dtype. Got input var cache with dtype fp32"));
  }
  SECTION("iOS18 or later") {
    StateProg g(DataType::Float16, Target::iOS17);
    g.f->body().set_outputs({g.update(g.x())});
    ProtoWriteOptions o;
    o.target = Target::iOS17;
    CHECK_THROWS_WITH(write_model_proto(*g.p, o), Catch::Contains("iOS18"));
  }
}

TEST_CASE("writer: enumerated shapes", "[serde][enumerated]") {
  auto make = [](bool symbolic) {
    auto p = std::make_shared<Program>();
    auto fn = std::make_shared<Function>(Target::iOS17);
    Context& c = fn->ctx();
    Dim s = symbolic ? c.symbol(Symbol::fresh()) : c.constant(4);
    Var* x = fn->add_input("x", c.tensor(DataType::Float32, std::vector<Dim>{c.constant(1), s, c.constant(8)}));
    p->add_function("main", fn);
    Builder b(*fn);
    fn->body().set_outputs({b.op("relu", {{"x", x}})});
    return p;
  };
  ProtoWriteOptions o;
  o.enumerated_shapes["x"] = EnumeratedShapesSpec{{{1, 4, 8}, {1, 6, 8}, {1, 4, 8}}, {1, 6, 8}};
  auto shapes = [](const spec::Model& m) {
    std::vector<std::vector<int64_t>> r;
    for (const auto& s : m.description().input(0).type().multiarraytype().enumeratedshapes().shapes())
      r.emplace_back(s.shape().begin(), s.shape().end());
    return r;
  };
  auto shape = [](const spec::Model& m) {
    const auto& s = m.description().input(0).type().multiarraytype().shape();
    return std::vector<int64_t>(s.begin(), s.end());
  };
  o.target = Target::iOS17;
  spec::Model m17 = parse(write_model_proto(*make(true), o));
  CHECK(shape(m17) == std::vector<int64_t>{1, 6, 8});
  CHECK(shapes(m17) == std::vector<std::vector<int64_t>>{{1, 6, 8}, {1, 4, 8}});
  CHECK_FALSE(m17.description().input(0).type().multiarraytype().has_shaperange());
  o.target = Target::iOS18;  // duplicates are kept from iOS18
  spec::Model m18 = parse(write_model_proto(*make(true), o));
  CHECK(shapes(m18) == std::vector<std::vector<int64_t>>{{1, 6, 8}, {1, 4, 8}, {1, 4, 8}});
  // a default that is not listed goes first
  o.enumerated_shapes["x"].default_shape = {1, 2, 8};
  CHECK(shapes(parse(write_model_proto(*make(true), o))) ==
        std::vector<std::vector<int64_t>>{{1, 2, 8}, {1, 4, 8}, {1, 6, 8}, {1, 4, 8}});
  // a static input keeps its program shape (coremltools ignores the enumeration)
  spec::Model st = parse(write_model_proto(*make(false), o));
  CHECK(shape(st) == std::vector<int64_t>{1, 4, 8});
  CHECK_FALSE(st.description().input(0).type().multiarraytype().has_enumeratedshapes());
  // wrong rank, unknown input
  o.enumerated_shapes["x"] = EnumeratedShapesSpec{{{1, 4}, {1, 6}}, {1, 4}};
  CHECK_THROWS_AS(write_model_proto(*make(true), o), ValueError);
  o.enumerated_shapes.clear();
  o.enumerated_shapes["y"] = EnumeratedShapesSpec{{{1, 4, 8}, {1, 6, 8}}, {1, 4, 8}};
  CHECK_THROWS_WITH(write_model_proto(*make(true), o), Catch::Contains("not an input"));
}
