// constexpr ops: type inference and validation, no folding, and their serialization (attributes
// for the iOS16 classes, inline input values / names for the iOS18 ones) and reading back.
#include <catch2/catch.hpp>

#include <map>

#include "MIL.pb.h"
#include "Model.pb.h"
#include "milkit/builder/builder.h"
#include "milkit/serde/proto_reader.h"
#include "milkit/serde/proto_writer.h"
#include "milkit/types/error.h"

using namespace milkit;
namespace spec = CoreML::Specification;

namespace {

struct Prog {
  std::shared_ptr<Program> p = std::make_shared<Program>();
  Function* f = nullptr;
  std::unique_ptr<Builder> b;
  Prog(Target t, DataType dt, std::vector<int64_t> shape) {
    auto fn = std::make_shared<Function>(t);
    fn->add_input("x", fn->ctx().tensor(dt, shape));
    p->add_function("main", fn);
    f = fn.get();
    b = std::make_unique<Builder>(*f);
  }
  Var* x() const { return f->inputs()[0]; }
  Var* c(Value v) { return b->add_const(std::make_shared<const Value>(std::move(v))); }
};

std::shared_ptr<const Value> sv(Value v) { return std::make_shared<const Value>(std::move(v)); }

Value u8(std::vector<int64_t> shape, std::vector<int64_t> v) { return Value::from_ints(DataType::UInt8, shape, v); }

spec::Model parse(const std::string& bytes) {
  spec::Model m;
  REQUIRE(m.ParseFromString(bytes));
  return m;
}

const spec::MILSpec::Block& body(const spec::Model& m, const std::string& opset) {
  return m.mlprogram().functions().at("main").block_specializations().at(opset);
}

/// Each op of a block as one comparable string (map fields in key order).
std::vector<std::string> rows(const spec::MILSpec::Block& blk) {
  std::vector<std::string> r;
  for (const auto& op : blk.operations()) {
    std::string row = op.type();
    std::map<std::string, std::string> attrs, inputs;
    for (const auto& [k, v] : op.attributes()) attrs[k] = v.SerializeAsString();
    for (const auto& [k, v] : op.inputs()) inputs[k] = v.SerializeAsString();
    for (const auto& [k, v] : attrs) row += "|a:" + k + "=" + v;
    for (const auto& [k, v] : inputs) row += "|i:" + k + "=" + v;
    for (const auto& o : op.outputs()) row += "|o:" + o.SerializeAsString();
    r.push_back(row);
  }
  return r;
}

std::vector<std::string> op_types(const Function& f) {
  std::vector<std::string> r;
  for (Operation* op : f.body().ops()) r.push_back(op->op_type());
  return r;
}

}  // namespace

TEST_CASE("constexpr_affine_dequantize infers scale's dtype and data's shape, never folds", "[constexpr]") {
  Prog g(Target::iOS16, DataType::Float16, {4, 3});
  Var* d = g.b->op("constexpr_affine_dequantize",
                   {{"quantized_data", g.c(u8({4, 3}, std::vector<int64_t>(12, 7)))},
                    {"zero_point", g.c(Value::scalar_int(DataType::UInt8, 1))},
                    {"scale", g.c(Value::from_doubles(DataType::Float16, {3}, {0.5, 1, 2}))},
                    {"axis", g.c(Value::scalar_int(DataType::Int32, -1))}});
  CHECK(d->type()->str() == g.f->ctx().tensor(DataType::Float16, std::vector<int64_t>{4, 3})->str());
  CHECK_FALSE(d->has_value());
  // a constexpr output counts as const for another op's const-only input
  Var* sum = g.b->op("add", {{"x", g.x()}, {"y", d}});
  CHECK_FALSE(sum->has_value());

  auto deq = [&](Value scale, int64_t axis) {
    return g.b->op("constexpr_affine_dequantize", {{"quantized_data", g.c(u8({4, 3}, std::vector<int64_t>(12, 0)))},
                                                   {"zero_point", g.c(Value::scalar_int(DataType::UInt8, 0))},
                                                   {"scale", g.c(std::move(scale))},
                                                   {"axis", g.c(Value::scalar_int(DataType::Int32, axis))}});
  };
  CHECK_THROWS_WITH(deq(Value::scalar_float(DataType::Float32, 1), 2), Catch::Contains("axis needs to be in the range"));
  CHECK_THROWS_WITH(deq(Value::from_doubles(DataType::Float32, {4}, {1, 1, 1, 1}), 1),
                    Catch::Contains("scale, if vector"));
  // inputs must be const
  CHECK_THROWS_AS(g.b->op("constexpr_cast", {{"source_val", g.x()}, {"output_dtype", g.c(Value::scalar_string("fp32"))}}),
                  Error);
  // iOS16 op, not at iOS15
  Prog old(Target::iOS15, DataType::Float32, {2});
  CHECK_THROWS_AS(old.b->op("constexpr_cast", {{"source_val", old.c(Value::from_doubles(DataType::Float16, {2}, {1, 2}))},
                                               {"output_dtype", old.c(Value::scalar_string("fp32"))}}),
                  Error);
}

TEST_CASE("iOS16 lut_to_dense and sparse_to_dense check the packed sizes", "[constexpr]") {
  Prog g(Target::iOS16, DataType::Float32, {2, 4});
  auto shape = [&](std::vector<int64_t> s) {
    return g.c(Value::from_ints(DataType::UInt32, {static_cast<int64_t>(s.size())}, s));
  };
  Var* lut = g.c(Value::from_doubles(DataType::Float32, {4}, {0, 1, 2, 3}));
  Var* w = g.b->op("constexpr_lut_to_dense", {{"indices", g.c(u8({2}, {0xE4, 0x1B}))}, {"lut", lut}, {"shape", shape({2, 4})}});
  CHECK(w->type()->shape().size() == 2);
  CHECK(w->type()->dtype() == DataType::Float32);
  CHECK_THROWS_WITH(g.b->op("constexpr_lut_to_dense", {{"indices", g.c(u8({3}, {0, 0, 0}))}, {"lut", lut}, {"shape", shape({2, 4})}}),
                    Catch::Contains("M = ceil(n_bits"));
  Var* nz = g.c(Value::from_doubles(DataType::Float32, {5}, {1, 2, 3, 4, 5}));
  Var* s = g.b->op("constexpr_sparse_to_dense", {{"nonzero_data", nz}, {"mask", g.c(u8({2}, {0xA5, 0x01}))}, {"shape", shape({2, 5})}});
  CHECK(s->type()->shape()[1]->value() == 5);
  Var* nz6 = g.c(Value::from_doubles(DataType::Float32, {6}, {1, 2, 3, 4, 5, 6}));
  CHECK_THROWS_WITH(g.b->op("constexpr_sparse_to_dense", {{"nonzero_data", nz6}, {"mask", g.c(u8({2}, {0xA5, 0x05}))}, {"shape", shape({2, 5})}}),
                    Catch::Contains("Padded bits"));
}

TEST_CASE("iOS18 lut ops: vector axis and the two outputs of lut_to_sparse", "[constexpr]") {
  Prog g(Target::iOS18, DataType::Float16, {4, 6});
  Var* idx = g.c(Value::from_ints(DataType::UInt2, {4, 6}, std::vector<int64_t>(24, 3)));
  std::vector<double> lv(2 * 3 * 4 * 2, 0.5);
  Var* lut = g.c(Value::from_doubles(DataType::Float16, {2, 3, 4, 2}, lv));
  Var* w = g.b->op("constexpr_lut_to_dense", {{"indices", idx}, {"lut", lut}, {"vector_axis", g.c(Value::scalar_int(DataType::Int32, 0))}});
  CHECK(w->type()->shape()[0]->value() == 8);
  CHECK(w->type()->shape()[1]->value() == 6);
  CHECK_THROWS_WITH(g.b->op("constexpr_lut_to_dense", {{"indices", idx}, {"lut", lut}}), Catch::Contains("vector_axis' need"));

  std::vector<int64_t> mask(24, 0);
  for (int i = 0; i < 24; i += 3) mask[static_cast<size_t>(i)] = 1;
  Var* m = g.c(Value::from_ints(DataType::UInt1, {4, 6}, mask));
  Var* nzi = g.c(Value::from_ints(DataType::UInt2, {8}, std::vector<int64_t>(8, 1)));
  std::vector<Arg> args(4);
  args[0].name = "indices_mask";
  args[0].items.emplace_back();
  args[0].items.back().var = m;
  args[1].name = "indices_nonzero_data";
  args[1].items.emplace_back();
  args[1].items.back().var = nzi;
  args[2].name = "lut";
  args[2].items.emplace_back();
  args[2].items.back().var = lut;
  args[3].name = "vector_axis";
  args[3].items.emplace_back();
  args[3].items.back().value = sv(Value::scalar_int(DataType::Int32, 1));
  auto outs = g.b->create("constexpr_lut_to_sparse", args);
  REQUIRE(outs.size() == 2);
  CHECK(outs[0]->type()->dtype() == DataType::UInt1);
  CHECK(outs[0]->type()->shape()[1]->value() == 12);
  CHECK(outs[1]->type()->shape()[0]->value() == 16);
  Var* dense = g.b->op("constexpr_sparse_to_dense", {{"nonzero_data", outs[1]}, {"mask", outs[0]}});
  CHECK(dense->type()->shape()[1]->value() == 12);
  CHECK_FALSE(dense->has_value());
}

TEST_CASE("iOS16 constexpr classes serialize their parameters as attributes", "[constexpr][serde]") {
  for (Target t : {Target::iOS16, Target::iOS17}) {
    Prog g(t, DataType::Float32, {2, 3});
    Var* c = g.b->op("constexpr_cast", {{"source_val", g.c(Value::from_doubles(DataType::Float16, {2, 3}, {1, 2, 3, 4, 5, 6}))},
                                        {"output_dtype", g.c(Value::scalar_string("fp32"))}},
                     "cast16");
    g.f->body().set_outputs({g.b->op("add", {{"x", g.x()}, {"y", c}})});
    ProtoWriteOptions o;
    o.target = t;
    const std::string bytes = write_model_proto(*g.p, o);
    spec::Model m = parse(bytes);
    const auto& blk = body(m, t == Target::iOS16 ? "CoreML6" : "CoreML7");
    REQUIRE(blk.operations_size() == 2);  // the consts feeding only the constexpr op are inlined
    const auto& op = blk.operations(0);
    CHECK(op.type() == "constexpr_cast");
    CHECK(op.inputs().empty());
    CHECK(op.attributes().count("source_val") == 1);
    CHECK(op.attributes().at("output_dtype").immediatevalue().tensor().strings().values(0) == "fp32");
    CHECK(op.attributes().at("source_val").type().tensortype().datatype() == spec::MILSpec::FLOAT16);
    auto back = read_model_proto(bytes, nullptr, "t");
    const Function& bf = *back->function("main");
    CHECK(op_types(bf) == std::vector<std::string>{"const", "const", "constexpr_cast", "add"});
    const std::string opset = t == Target::iOS16 ? "CoreML6" : "CoreML7";
    CHECK(rows(body(parse(write_model_proto(*back, o)), opset)) == rows(blk));
  }
}

TEST_CASE("iOS18 constexpr classes bind inline values, or names for constexpr outputs", "[constexpr][serde]") {
  Prog g(Target::iOS18, DataType::Float16, {2, 3});
  Var* data = g.c(Value::from_ints(DataType::Int4, {2, 3}, {-8, -1, 0, 1, 2, 7}));
  Var* scale = g.c(Value::from_doubles(DataType::Float16, {1, 3}, {0.5, 1, 2}));
  Var* w = g.b->op("constexpr_blockwise_shift_scale", {{"data", data}, {"scale", scale}}, "bss");
  std::vector<int64_t> mask{1, 0, 1, 0, 1, 1};
  Var* m = g.c(Value::from_ints(DataType::UInt1, {2, 3}, mask));
  Var* nz = g.c(Value::from_doubles(DataType::Float16, {4}, {1, 2, 3, 4}));
  std::vector<Arg> args(4);
  const char* names[] = {"data_mask", "nonzero_data", "scale", "offset"};
  Var* vars[] = {m, g.c(Value::from_ints(DataType::Int8, {4}, {1, 2, 3, 4})), scale, nullptr};
  for (size_t i = 0; i < 3; ++i) {
    args[i].name = names[i];
    args[i].items.emplace_back();
    args[i].items.back().var = vars[i];
  }
  args.resize(3);
  auto sparse = g.b->create("constexpr_sparse_blockwise_shift_scale", args, "sbss");
  Var* s2d = g.b->op("constexpr_sparse_to_dense", {{"nonzero_data", sparse[1]}, {"mask", sparse[0]}}, "s2d");
  Var* s2 = g.b->op("constexpr_sparse_to_dense", {{"nonzero_data", nz}, {"mask", m}}, "s2d_b");
  g.f->body().set_outputs({g.b->op("add", {{"x", g.b->op("add", {{"x", g.x()}, {"y", w}})}, {"y", g.b->op("add", {{"x", s2d}, {"y", s2}})}})});
  ProtoWriteOptions o;
  o.target = Target::iOS18;
  const std::string bytes = write_model_proto(*g.p, o);
  spec::Model pm = parse(bytes);
  const auto& blk = body(pm, "CoreML8");
  std::vector<std::string> types;
  for (const auto& op : blk.operations()) types.push_back(op.type());
  CHECK(types == std::vector<std::string>{"constexpr_blockwise_shift_scale", "constexpr_sparse_blockwise_shift_scale",
                                          "constexpr_sparse_to_dense", "constexpr_sparse_to_dense", "add", "add", "add"});
  const auto& bss = blk.operations(0);
  CHECK(bss.attributes().size() == 1);
  CHECK(bss.inputs().at("data").arguments(0).value().immediatevalue().tensor().bytes().values().size() == 3);
  const auto& dense = blk.operations(2);
  CHECK(dense.inputs().at("mask").arguments(0).name() == sparse[0]->name());
  CHECK(dense.inputs().at("nonzero_data").arguments(0).name() == sparse[1]->name());
  CHECK(blk.operations(3).inputs().at("mask").arguments(0).has_value());

  auto back = read_model_proto(bytes, nullptr, "t");
  std::vector<std::string> bt;
  for (Operation* op : back->function("main")->body().ops())
    if (op->op_type() != "const") bt.push_back(op->op_type() + ":" + op->name());
  CHECK(bt[0] == "constexpr_blockwise_shift_scale:bss");
  CHECK(bt[1] == "constexpr_sparse_blockwise_shift_scale:sbss");
  CHECK(bt[2] == "constexpr_sparse_to_dense:s2d");
  CHECK(rows(body(parse(write_model_proto(*back, o)), "CoreML8")) == rows(blk));
}

TEST_CASE("an iOS16 constexpr parameter without a value cannot be written", "[constexpr][serde]") {
  Prog g(Target::iOS17, DataType::Float32, {2, 4});
  Var* lut = g.b->op("constexpr_cast", {{"source_val", g.c(Value::from_doubles(DataType::Float16, {4}, {0, 1, 2, 3}))},
                                        {"output_dtype", g.c(Value::scalar_string("fp32"))}});
  Var* w = g.b->op("constexpr_lut_to_dense", {{"indices", g.c(u8({2}, {0xE4, 0x1B}))}, {"lut", lut},
                                              {"shape", g.c(Value::from_ints(DataType::UInt32, {2}, {2, 4}))}});
  g.f->body().set_outputs({g.b->op("add", {{"x", g.x()}, {"y", w}})});
  ProtoWriteOptions o;
  o.target = Target::iOS17;
  CHECK_THROWS_WITH(write_model_proto(*g.p, o), Catch::Contains("parameter 'lut' must be a const value"));
}

TEST_CASE("iOS18 sparse_to_dense counts the set bits of a packed uint1 mask of any length",
          "[constexpr]") {
  for (int64_t cols : {5, 8, 13}) {
    Prog g(Target::iOS18, DataType::Float16, {3, cols});
    std::vector<uint8_t> flags(static_cast<size_t>(3 * cols));
    int64_t ones = 0;
    for (size_t i = 0; i < flags.size(); ++i) ones += flags[i] = (i * 7 + 3) % 5 < 3;
    Var* mask = g.c(Value::from_bytes(DataType::UInt1, {3, cols}, std::move(flags)));
    REQUIRE(mask->value()->buffer()->bit_width() == 1);  // held packed
    auto nz = [&](int64_t n) {
      return g.c(Value::from_doubles(DataType::Float16, {n}, std::vector<double>(n, 1.0)));
    };
    Var* ok = g.b->op("constexpr_sparse_to_dense", {{"nonzero_data", nz(ones)}, {"mask", mask}});
    CHECK(ok->type()->shape()[1]->value() == cols);
    for (int64_t wrong : {ones - 1, ones + 1})
      CHECK_THROWS_WITH(
          g.b->op("constexpr_sparse_to_dense", {{"nonzero_data", nz(wrong)}, {"mask", mask}}),
          Catch::Contains("Number of 1s in mask"));
  }
}
