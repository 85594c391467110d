// Serialization: blob storage v2 byte layout and validation.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "milkit/serde/blob.h"
#include "milkit/types/error.h"

using namespace milkit;

namespace {

std::string temp_path(const std::string& tag) {
  static int counter = 0;
  return "/tmp/milkit_serde_test_" + std::to_string(::getpid()) + "_" + tag + "_" +
         std::to_string(counter++);
}

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void spit(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

uint64_t u64_at(const std::vector<uint8_t>& b, size_t off) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b.at(off + i);
  return v;
}
uint32_t u32_at(const std::vector<uint8_t>& b, size_t off) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | b.at(off + i);
  return v;
}
void set_u64(std::vector<uint8_t>& b, size_t off, uint64_t v) {
  for (int i = 0; i < 8; ++i) b.at(off + i) = static_cast<uint8_t>(v >> (8 * i));
}
void set_u32(std::vector<uint8_t>& b, size_t off, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.at(off + i) = static_cast<uint8_t>(v >> (8 * i));
}

Value int4_example() {
  return Value::from_ints(DataType::Int4, {11}, {-8, -1, 0, 1, 2, 3, 4, 5, 6, 7, -3});
}

// The reference's two-blob file: int4 (11 elements) then int32 (20 elements).
std::string write_two_blobs(uint64_t* off1 = nullptr, uint64_t* off2 = nullptr) {
  std::string p = temp_path("two");
  BlobWriter w(p);
  std::vector<int64_t> ints(20);
  for (int i = 0; i < 20; ++i) ints[i] = i * 1000 - 7;
  uint64_t a = w.write(int4_example());
  uint64_t b = w.write(Value::from_ints(DataType::Int32, {4, 5}, ints));
  w.close();
  if (off1) *off1 = a;
  if (off2) *off2 = b;
  return p;
}

}  // namespace

TEST_CASE("blob: int4 layout matches the reference hex", "[serde][blob]") {
  std::string p = temp_path("int4");
  uint64_t off;
  {
    BlobWriter w(p);
    off = w.write(int4_example());
    w.close();
  }
  auto b = slurp(p);
  CHECK(off == 64);
  REQUIRE(b.size() == 128 + 6);
  CHECK(u32_at(b, 0) == 1);  // count
  CHECK(u32_at(b, 4) == 2);  // version
  for (size_t i = 8; i < 64; ++i) CHECK(b[i] == 0);
  CHECK(b[64] == 0xef);
  CHECK(b[65] == 0xbe);
  CHECK(b[66] == 0xad);
  CHECK(b[67] == 0xde);
  CHECK(u32_at(b, 68) == 8);    // int4
  CHECK(u64_at(b, 72) == 6);    // sizeInBytes
  CHECK(u64_at(b, 80) == 128);  // absolute data offset
  CHECK(u64_at(b, 88) == 4);    // padding bits
  for (size_t i = 96; i < 128; ++i) CHECK(b[i] == 0);
  std::vector<uint8_t> data(b.begin() + 128, b.end());
  CHECK(data == std::vector<uint8_t>{0xf8, 0x10, 0x32, 0x54, 0x76, 0x0d});

  auto r = BlobReader::open(p);
  Value v = r->read(64, DataType::Int4, {11});
  CHECK(v.to_ints() == std::vector<int64_t>{-8, -1, 0, 1, 2, 3, 4, 5, 6, 7, -3});
  std::remove(p.c_str());
}

TEST_CASE("blob: two blobs at 64 and 192, file size 336, borrowed reads", "[serde][blob]") {
  uint64_t a, b;
  std::string p = write_two_blobs(&a, &b);
  auto bytes = slurp(p);
  CHECK(a == 64);
  CHECK(b == 192);
  CHECK(bytes.size() == 336);
  CHECK(u32_at(bytes, 0) == 2);
  CHECK(u32_at(bytes, 196) == 14);
  CHECK(u64_at(bytes, 200) == 80);
  CHECK(u64_at(bytes, 208) == 256);
  for (size_t i = 134; i < 192; ++i) CHECK(bytes[i] == 0);  // zero gap
  Value v;
  {
    auto r = BlobReader::open(p);
    CHECK(r->count() == 2);
    v = r->read(192, DataType::Int32, {4, 5});
  }
  // the reader is gone, the value keeps the mapping alive
  REQUIRE(v.buffer()->borrowed());
  CHECK(v.as_int(0) == -7);
  CHECK(v.as_int(19) == 18993);
  std::remove(p.c_str());
}

TEST_CASE("blob: every storable dtype round-trips; sub-byte packing", "[serde][blob]") {
  struct Case {
    DataType dt;
    std::vector<int64_t> v;
  };
  std::vector<Case> cases = {
      {DataType::UInt1, {1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1}},
      {DataType::UInt2, {0, 1, 2, 3, 3, 2, 1, 0, 1, 2, 3}},
      {DataType::UInt3, {0, 1, 2, 3, 4, 5, 6, 7, 7, 6, 5}},
      {DataType::UInt4, {0, 15, 3, 12, 7, 8, 1, 14, 2, 13, 5}},
      {DataType::UInt6, {0, 63, 17, 42, 5, 60, 33, 1, 2, 3, 4}},
      {DataType::Int4, {-8, 7, -1, 0, 3, -3, 5, -5, 1, 2, 6}},
      {DataType::Int8, {-128, 127, -1, 0, 3, -3, 5, -5, 1, 2, 6}},
      {DataType::UInt8, {0, 255, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
      {DataType::Int16, {-32768, 32767, 0, 1, 2, 3, 4, 5, 6, 7, 8}},
      {DataType::UInt16, {65535, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
      {DataType::Int32, {-2147483648LL, 2147483647, 0, 1, 2, 3, 4, 5, 6, 7, 8}},
      {DataType::UInt32, {4294967295LL, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
  };
  std::string p = temp_path("all");
  std::vector<uint64_t> offs;
  {
    BlobWriter w(p);
    for (auto& c : cases) offs.push_back(w.write(Value::from_ints(c.dt, {11}, c.v)));
    offs.push_back(w.write(
        Value::from_doubles(DataType::Float16, {2, 5}, {0.5, -1, 2, 3, 4, 5, 6, 7, 8, 65504})));
    offs.push_back(w.write(
        Value::from_doubles(DataType::Float32, {10}, {0.25, -1, 2, 3, 4, 5, 6, 7, 8, 1e30})));
    w.close();
  }
  auto bytes = slurp(p);
  // uint2 [0,1,2,3] packs to 0b11100100 = 0xe4 (LSB first)
  CHECK(bytes[offs[1] + 64] == 0xe4);
  // uint1 11 elements: 2 bytes, 5 padding bits
  CHECK(u64_at(bytes, offs[0] + 8) == 2);
  CHECK(u64_at(bytes, offs[0] + 24) == 5);
  // uint3 11 elements: 33 bits -> 5 bytes, 7 padding bits; uint6: 66 bits -> 9 bytes, 6 padding
  CHECK(u64_at(bytes, offs[2] + 8) == 5);
  CHECK(u64_at(bytes, offs[2] + 24) == 7);
  CHECK(u64_at(bytes, offs[4] + 8) == 9);
  CHECK(u64_at(bytes, offs[4] + 24) == 6);
  auto r = BlobReader::open(p);
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO(dtype_name(cases[i].dt));
    CHECK(r->read(offs[i], cases[i].dt, {11}).to_ints() == cases[i].v);
  }
  Value h = r->read(offs[12], DataType::Float16, {2, 5});
  CHECK(h.as_double(0) == 0.5);
  CHECK(h.as_double(9) == 65504.0);
  CHECK(r->read(offs[13], DataType::Float32, {10}).as_double(0) == 0.25);
  // fp16 is stored raw: 0.5 = 0x3800
  CHECK(bytes[offs[12] + 64] == 0x00);
  CHECK(bytes[offs[12] + 65] == 0x38);
  std::remove(p.c_str());
}

TEST_CASE("blob: sub-byte weights stay packed from the file and are written back as they are",
          "[serde][blob]") {
  std::string p = temp_path("packed"), q = temp_path("packed2");
  std::vector<int64_t> v(1001);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>((i * 5) % 8) - 4;
  uint64_t off;
  {
    BlobWriter w(p);
    off = w.write(Value::from_ints(DataType::Int4, {7, 143}, v));
    w.close();
  }
  auto r = BlobReader::open(p);
  Value got = r->read(off, DataType::Int4, {7, 143});
  REQUIRE(got.buffer()->bit_source() != nullptr);  // the mapping's packed bytes, unpacked on use
  REQUIRE(got.buffer()->bit_source()->borrowed());
  REQUIRE(got.buffer()->lazy());
  CHECK(got.as_int(1000) == v[1000]);  // unpacked on demand
  // a packed source with stray bits past the last element: written with the padding cleared
  std::vector<uint8_t> packed(501, 0xFF);
  Value dirty(DataType::UInt4, {1001},
              Buffer::packed_bits(Buffer::copy(packed.data(), packed.size()), 4, false, 1001));
  uint64_t a, b;
  {
    BlobWriter w(q);
    a = w.write(got);
    b = w.write(dirty);
    w.close();
  }
  auto bytes = slurp(q), orig = slurp(p);
  CHECK(std::equal(bytes.begin() + static_cast<long>(a),
                   bytes.begin() + static_cast<long>(a) + 64 + 501,
                   orig.begin() + static_cast<long>(off)));
  CHECK(bytes[b + 64 + 500] == 0x0F);
  CHECK(bytes[b + 64 + 499] == 0xFF);
  std::remove(p.c_str());
  std::remove(q.c_str());
}

TEST_CASE("blob: identical buffers are written once", "[serde][blob]") {
  std::string p = temp_path("dedup");
  auto v = std::make_shared<Value>(
      Value::from_doubles(DataType::Float32, {16}, std::vector<double>(16, 1.5)));
  Value same_buffer = v->reshaped({4, 4});
  Value other = Value::from_doubles(DataType::Float32, {16}, std::vector<double>(16, 1.5));
  BlobWriter w(p);
  uint64_t a = w.write(*v);
  uint64_t b = w.write(same_buffer);
  uint64_t c = w.write(other);
  w.close();
  CHECK(a == b);
  CHECK(c != a);
  CHECK(w.count() == 2);
  CHECK(u32_at(slurp(p), 0) == 2);
  std::remove(p.c_str());
}

TEST_CASE("blob: values that cannot be stored are rejected", "[serde][blob]") {
  std::string p = temp_path("bad_dtype");
  BlobWriter w(p);
  CHECK_THROWS_AS(w.write(Value::from_ints(DataType::Bool, {12}, std::vector<int64_t>(12, 1))),
                  ValueError);
  CHECK_THROWS_AS(w.write(Value::from_ints(DataType::Int64, {12}, std::vector<int64_t>(12, 1))),
                  ValueError);
  CHECK_THROWS_AS(w.write(Value::strings({1}, {"a"})), ValueError);
  w.close();
  std::remove(p.c_str());
}

TEST_CASE("blob: malformed files raise FormatError", "[serde][blob]") {
  uint64_t a, b;
  std::string good = write_two_blobs(&a, &b);
  const auto orig = slurp(good);
  std::string p = temp_path("bad");
  auto expect_open_fails = [&](const std::vector<uint8_t>& bytes, const std::string& what) {
    spit(p, bytes);
    try {
      auto r = BlobReader::open(p);
      FAIL("no error for " << what);
    } catch (const FormatError& e) {
      CHECK(std::string(e.what()).find(p) != std::string::npos);
    }
  };
  auto expect_read_fails = [&](const std::vector<uint8_t>& bytes, uint64_t off, DataType dt,
                               std::vector<int64_t> shape, const std::string& needle) {
    spit(p, bytes);
    auto r = BlobReader::open(p);
    try {
      r->read(off, dt, shape);
      FAIL("no error, expected: " << needle);
    } catch (const FormatError& e) {
      std::string msg = e.what();
      INFO(msg);
      CHECK(msg.find(p) != std::string::npos);
      CHECK(msg.find("offset") != std::string::npos);
      CHECK(msg.find(needle) != std::string::npos);
    }
  };

  SECTION("truncated header") {
    expect_open_fails(std::vector<uint8_t>(orig.begin(), orig.begin() + 40), "truncated");
    expect_open_fails({}, "empty");
  }
  SECTION("wrong version") {
    auto v = orig;
    set_u32(v, 4, 1);
    expect_open_fails(v, "version 1");
    set_u32(v, 4, 3);
    expect_open_fails(v, "version 3");
  }
  SECTION("truncated data") {
    expect_read_fails(std::vector<uint8_t>(orig.begin(), orig.end() - 1), 192, DataType::Int32,
                      {4, 5}, "past the end");
    expect_read_fails(std::vector<uint8_t>(orig.begin(), orig.begin() + 200), 192, DataType::Int32,
                      {4, 5}, "past the end");
  }
  SECTION("bad sentinel") {
    auto v = orig;
    v[192] = 0xee;
    expect_read_fails(v, 192, DataType::Int32, {4, 5}, "sentinel");
  }
  SECTION("unknown dtype code") {
    auto v = orig;
    set_u32(v, 196, 99);
    expect_read_fails(v, 192, DataType::Int32, {4, 5}, "unknown blob dtype");
    set_u32(v, 196, 0);
    expect_read_fails(v, 192, DataType::Int32, {4, 5}, "unknown blob dtype");
  }
  SECTION("dtype differs from the declared one") {
    expect_read_fails(orig, 192, DataType::Float32, {4, 5}, "does not match");
  }
  SECTION("size past the end") {
    auto v = orig;
    set_u64(v, 200, 81);
    expect_read_fails(v, 192, DataType::Int32, {4, 5}, "past the end");
    set_u64(v, 200, ~0ull);
    expect_read_fails(v, 192, DataType::Int32, {4, 5}, "past the end");
  }
  SECTION("offset past the end or overlapping") {
    auto v = orig;
    set_u64(v, 208, 1ull << 62);
    expect_read_fails(v, 192, DataType::Int32, {4, 5}, "past the end");
    set_u64(v, 208, 200);
    expect_read_fails(v, 192, DataType::Int32, {4, 5}, "overlaps");
  }
  SECTION("offset is not a record") {
    expect_read_fails(orig, 128, DataType::Int4, {11}, "sentinel");  // data, not metadata
    expect_read_fails(orig, 100, DataType::Int4, {11}, "not a metadata record");
    expect_read_fails(orig, 0, DataType::Int4, {11}, "not a metadata record");
    expect_read_fails(orig, 384, DataType::Int4, {11}, "past the end");
    expect_read_fails(orig, ~0ull - 63, DataType::Int4, {11}, "past the end");
  }
  SECTION("padding bits") {
    auto v = orig;
    set_u64(v, 88, 8);
    expect_read_fails(v, 64, DataType::Int4, {11}, "must be < 8");
    set_u64(v, 88, 2);
    expect_read_fails(v, 64, DataType::Int4, {11}, "multiple of the element width");
    set_u64(v, 88, 0);
    expect_read_fails(v, 64, DataType::Int4, {11}, "declared shape needs");
    set_u64(v, 216, 1);  // padding on int32
    expect_read_fails(v, 192, DataType::Int32, {4, 5}, "padding");
  }
  SECTION("element count mismatch") {
    expect_read_fails(orig, 192, DataType::Int32, {4, 4}, "declared shape needs");
    expect_read_fails(orig, 192, DataType::Int32, {1ll << 40, 1ll << 40}, "declared shape");
    expect_read_fails(orig, 64, DataType::Int4, {12}, "declared shape needs");
  }
  std::remove(p.c_str());
  std::remove(good.c_str());
}

TEST_CASE("blob: missing file is an IOError", "[serde][blob]") {
  CHECK_THROWS_AS(BlobReader::open("/nonexistent/dir/weight.bin"), IOError);
}

// ---- proto + package ---------------------------------------------------------------------------
#include <filesystem>
#include <regex>

#include "milkit/builder/builder.h"
#include "milkit/serde/mlpackage.h"
#include "milkit/serde/proto_reader.h"
#include "milkit/serde/proto_writer.h"
#include "milkit/serde/text.h"

namespace {

namespace fs = std::filesystem;

std::shared_ptr<Function> small_fn(Target t, bool bad_const = false) {
  auto f = std::make_shared<Function>(t);
  Context& c = f->ctx();
  Var* x = f->add_input(
      "x", c.tensor(DataType::Float32,
                    std::vector<Dim>{c.symbol(Symbol::create("S", 2, 8)), c.constant(12)}));
  Builder b(*f);
  std::vector<double> w(12);
  for (int i = 0; i < 12; ++i) w[i] = i * 0.5;
  Var* wv =
      b.add_const(std::make_shared<Value>(Value::from_doubles(DataType::Float32, {12}, w)), "w");
  b.add_const(std::make_shared<Value>(int4_example()), "q");
  if (bad_const)
    b.add_const(std::make_shared<Value>(Value::from_doubles(DataType::BFloat16, {2}, {1, 2})),
                "bf");
  Var* y = b.op("add", {{"x", x}, {"y", wv}});
  std::vector<Arg> args{Builder::arg("x", y),
                        Builder::arg("y", Value::scalar_float(DataType::Float32, 2.0))};
  Var* z = b.create("mul", args).at(0);
  f->body().set_outputs({z});
  return f;
}

Program small_program(Target t, bool bad_const = false) {
  Program p;
  p.add_function("main", small_fn(t, bad_const));
  return p;
}

std::map<std::string, std::vector<uint8_t>> snapshot(const fs::path& dir) {
  std::map<std::string, std::vector<uint8_t>> out;
  for (auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = slurp(e.path().string());
  return out;
}

}  // namespace

TEST_CASE("package: manifest text and uuids", "[serde][package]") {
  std::string m = manifest_json("aaaa", "bbbb");
  CHECK(m ==
        "{\n"
        "    \"fileFormatVersion\": \"1.0.0\",\n"
        "    \"itemInfoEntries\": {\n"
        "        \"aaaa\": {\n"
        "            \"author\": \"com.apple.CoreML\",\n"
        "            \"description\": \"CoreML Model Specification\",\n"
        "            \"name\": \"model.mlmodel\",\n"
        "            \"path\": \"com.apple.CoreML/model.mlmodel\"\n"
        "        },\n"
        "        \"bbbb\": {\n"
        "            \"author\": \"com.apple.CoreML\",\n"
        "            \"description\": \"CoreML Model Weights\",\n"
        "            \"name\": \"weights\",\n"
        "            \"path\": \"com.apple.CoreML/weights\"\n"
        "        }\n"
        "    },\n"
        "    \"rootModelIdentifier\": \"aaaa\"\n"
        "}\n");
  std::regex re("^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$");
  std::string a = random_uuid(), b = random_uuid();
  CHECK(std::regex_match(a, re));
  CHECK(std::regex_match(b, re));
  CHECK(a != b);
}

TEST_CASE("package: coremltools' blob rule", "[serde][package]") {
  auto n = [](DataType dt, int64_t count) {
    return Value::from_ints(dt, {count}, std::vector<int64_t>(count, 1));
  };
  CHECK_FALSE(uses_weight_file(
      Value::from_doubles(DataType::Float16, {9}, std::vector<double>(9, 1)), Target::iOS15));
  CHECK(uses_weight_file(Value::from_doubles(DataType::Float16, {10}, std::vector<double>(10, 1)),
                         Target::iOS15));
  CHECK(uses_weight_file(n(DataType::Int4, 11), Target::iOS15));
  CHECK_FALSE(uses_weight_file(n(DataType::UInt2, 9), Target::iOS15));
  CHECK_FALSE(uses_weight_file(n(DataType::Int32, 20), Target::iOS17));
  CHECK(uses_weight_file(n(DataType::Int32, 20), Target::iOS18));
  CHECK(uses_weight_file(n(DataType::UInt16, 10), Target::iOS18));
  CHECK_FALSE(uses_weight_file(n(DataType::UInt16, 10), Target::iOS17));
  CHECK_FALSE(uses_weight_file(n(DataType::Int64, 100), Target::iOS18));
  CHECK_FALSE(uses_weight_file(n(DataType::Bool, 100), Target::iOS18));
}

TEST_CASE("package: write then read rebuilds the program", "[serde][package]") {
  fs::path dir = temp_path("pkg");
  fs::create_directories(dir);
  fs::path pkg = dir / "m.mlpackage";
  Program p = small_program(Target::iOS17);
  p.attributes()["origin"] = "test";
  write_mlpackage(p, {}, pkg.string());
  CHECK(fs::exists(pkg / "Manifest.json"));
  auto wb = slurp((pkg / "Data/com.apple.CoreML/weights/weight.bin").string());
  CHECK(wb.size() == 192 + 64 + 6);  // fp32 (48 bytes) at 64, int4 at 192
  auto q = read_mlpackage(pkg.string());
  Function* f = q->function("main");
  REQUIRE(f);
  CHECK(f->opset() == Target::iOS17);
  CHECK(q->attributes().at("origin") == "test");
  CHECK(q->attributes().count("milkit-version") == 1);
  std::vector<std::string> names;
  for (Operation* o : f->all_ops()) names.push_back(o->op_type() + ":" + o->name());
  CHECK(names == std::vector<std::string>{"const:w", "const:q", "add:add_0", "const:mul_0_y_0",
                                          "mul:mul_0"});
  Var* x = f->inputs().at(0);
  REQUIRE(x->type()->rank() == 2);
  Dim s = x->type()->shape()[0];
  REQUIRE(s->kind() == Expr::Kind::Symbol);
  CHECK(s->symbol()->lo() == 2);  // shapeRange carried the symbol's range
  CHECK(s->symbol()->hi() == 8);
  Var* w = f->find_var("w");
  REQUIRE(w);
  CHECK(w->value()->buffer()->borrowed());  // zero-copy from the mapping
  CHECK(w->value()->as_double(11) == 5.5);
  CHECK(f->find_var("q")->value()->to_ints() == int4_example().to_ints());
  CHECK(f->body().outputs().at(0)->name() == "mul_0");
  // a bare model.mlmodel path works too
  auto q2 = read_mlpackage((pkg / "Data/com.apple.CoreML/model.mlmodel").string());
  CHECK(q2->function("main")->num_ops() == 5);
  fs::remove_all(dir);
}

TEST_CASE("package: a failed save leaves the old package intact", "[serde][package]") {
  fs::path dir = temp_path("atomic");
  fs::create_directories(dir);
  fs::path pkg = dir / "m.mlpackage";
  write_mlpackage(small_program(Target::iOS17), {}, pkg.string());
  auto before = snapshot(pkg);
  // the bf16 const comes after two blobs were already streamed into the new weight.bin
  CHECK_THROWS_AS(write_mlpackage(small_program(Target::iOS17, true), {}, pkg.string()),
                  ValueError);
  CHECK(snapshot(pkg) == before);
  size_t entries = 0;
  for (auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++entries;
  }
  CHECK(entries == 1);
  // opset newer than the target
  PackageOptions o;
  o.target = Target::iOS16;
  CHECK_THROWS_AS(write_mlpackage(small_program(Target::iOS17), o, pkg.string()), ValueError);
  CHECK(snapshot(pkg) == before);
  fs::remove_all(dir);
}

TEST_CASE("package: multifunction programs need iOS18", "[serde][package]") {
  fs::path dir = temp_path("multi");
  fs::create_directories(dir);
  Program p;
  p.add_function("main", small_fn(Target::iOS18));
  p.add_function("second", small_fn(Target::iOS18));
  p.set_default_function_name("second");
  PackageOptions o;
  o.target = Target::iOS17;
  CHECK_THROWS_AS(write_mlpackage(p, o, (dir / "m.mlpackage").string()), ValueError);
  write_mlpackage(p, {}, (dir / "m.mlpackage").string());
  auto q = read_mlpackage((dir / "m.mlpackage").string());
  REQUIRE(q->functions().size() == 2);
  CHECK(q->functions()[0].first == "main");
  CHECK(q->functions()[1].first == "second");
  CHECK(q->default_function_name() == "second");
  fs::remove_all(dir);
}

TEST_CASE("package: classify's classes are written inline and read back as a list const",
          "[serde][package]") {
  auto f = std::make_shared<Function>(Target::iOS15);
  Context& c = f->ctx();
  Var* x = f->add_input("x", c.tensor(DataType::Float32, std::vector<int64_t>{1, 3}));
  Builder b(*f);
  Var* classes = b.add_const(
      std::make_shared<Value>(Value::list_of(Value::strings({3}, {"cat", "dog", "bird"}))));
  CHECK(classes->type()->str() == "list[string, 3]");
  CHECK_FALSE(classes->type()->dynamic_length());
  std::vector<Arg> args{Builder::arg("probabilities", x), Builder::arg("classes", classes)};
  auto outs = b.create("classify", args);
  REQUIRE(outs.size() == 2);
  CHECK(outs[0]->type() == c.scalar(DataType::String));
  CHECK(outs[1]->type() == c.dict(c.scalar(DataType::String), c.scalar(DataType::Float64)));
  f->body().set_outputs(outs);
  Program p;
  p.add_function("main", f);
  ProtoWriteOptions opt;
  opt.target = Target::iOS15;
  std::string bytes = write_model_proto(p, opt);
  auto q = read_model_proto(bytes, nullptr, "mem");
  Function* g = q->function("main");
  REQUIRE(g);
  std::vector<std::string> names;
  for (Operation* o : g->all_ops()) names.push_back(o->op_type() + ":" + o->name());
  // the const is not written: the reader makes one for the inline literal
  CHECK(names == std::vector<std::string>{"const:classify_0_classes_0", "classify:classify_0"});
  Var* back = g->all_ops()[0]->output(0);
  REQUIRE(back->value());
  CHECK(back->value()->is_list());
  CHECK(back->value()->string_values() == std::vector<std::string>{"cat", "dog", "bird"});
  CHECK(back->value()->equals(*classes->value()));
  CHECK_FALSE(back->value()->equals(
      Value::strings({3}, {"cat", "dog", "bird"})));  // a tensor is not a list
  // writing it again and reading it back gives the same program (the proto's maps have no
  // fixed byte order, so compare the programs)
  ProgramTextOptions exact;
  exact.consts = true;
  auto r = read_model_proto(write_model_proto(*q, opt), nullptr, "mem2");
  CHECK(program_to_text(*r, exact) == program_to_text(*q, exact));
  CHECK(program_to_text(*q, exact).find(
            "List[3, (string)]*(List) = const(val=[\"cat\", \"dog\", \"bird\"]") !=
        std::string::npos);
  // a list of int32 is not a classifier label list coremltools can write
  auto h = std::make_shared<Function>(Target::iOS15);
  Builder hb(*h);
  Var* l = hb.add_const(
      std::make_shared<Value>(Value::list_of(Value::from_ints(DataType::Int32, {2}, {1, 2}))), "l");
  h->body().set_outputs({l});
  Program hp;
  hp.add_function("main", h);
  CHECK_THROWS_WITH(write_model_proto(hp, opt),
                    Catch::Contains("List element type, int32, not supported"));
  CHECK_THROWS_AS(Value::list_of(Value::from_ints(DataType::Int64, {2, 1}, {1, 2})), ValueError);
}

#include "Model.pb.h"

TEST_CASE("package: the MIL wire encoding parses back field for field", "[serde][package]") {
  namespace mil = CoreML::Specification::MILSpec;
  auto f = std::make_shared<Function>(Target::iOS17);
  Context& c = f->ctx();
  Var* x = f->add_input("x", c.tensor(DataType::Float32, std::vector<int64_t>{2, 3}));
  Builder b(*f);
  auto cst = [&](Value v, const std::string& name) {
    return b.add_const(std::make_shared<Value>(std::move(v)), name);
  };
  cst(Value::from_ints(DataType::Int32, {2}, {-5, 7}), "i32");
  cst(Value::from_ints(DataType::Int64, {2}, {-1, int64_t{1} << 40}), "i64");
  cst(Value::from_ints(DataType::Bool, {3}, {1, 0, 1}), "flags");
  cst(Value::scalar_string(""), "empty");
  cst(Value::from_doubles(DataType::Float16, {2}, {0.5, -2}), "half");
  std::vector<int64_t> big(5000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<int64_t>(i) - 2500;
  cst(Value::from_ints(DataType::Int32, {5000}, big), "big");  // a length that needs 3 varint bytes
  const std::string long_name(300, 'n');
  Var* y = b.op("relu", {{"x", x}}, long_name);
  f->body().set_outputs({y});
  Program p;
  p.add_function("main", f);
  ProtoWriteOptions opt;
  opt.target = Target::iOS17;
  const std::string bytes = write_model_proto(p, opt);

  CoreML::Specification::Model m;
  REQUIRE(m.ParseFromString(bytes));
  CHECK(m.specificationversion() == static_cast<int>(Target::iOS17));
  REQUIRE(m.has_mlprogram());
  const mil::Program& prog = m.mlprogram();
  CHECK(prog.version() == 1);
  REQUIRE(prog.functions().count("main"));
  const mil::Function& fn = prog.functions().at("main");
  CHECK(fn.opset() == "CoreML7");
  REQUIRE(fn.inputs_size() == 1);
  const mil::TensorType& xt = fn.inputs(0).type().tensortype();
  CHECK(xt.datatype() == mil::FLOAT32);
  CHECK(xt.rank() == 2);
  CHECK(xt.dimensions(0).constant().size() == 2);
  CHECK(xt.dimensions(1).constant().size() == 3);
  const mil::Block& blk = fn.block_specializations().at("CoreML7");
  REQUIRE(blk.operations_size() == 7);
  REQUIRE(blk.outputs_size() == 1);
  CHECK(blk.outputs(0) == long_name);
  auto val = [&](int i) -> const mil::Value& { return blk.operations(i).attributes().at("val"); };
  CHECK(blk.operations(0).attributes().at("name").immediatevalue().tensor().strings().values(0) ==
        "i32");
  const auto& i32 = val(0).immediatevalue().tensor().ints().values();
  CHECK(std::vector<int32_t>(i32.begin(), i32.end()) == std::vector<int32_t>{-5, 7});
  CHECK(val(0).type().tensortype().datatype() == mil::INT32);
  CHECK(val(0).type().tensortype().dimensions(0).constant().size() == 2);
  const auto& i64 = val(1).immediatevalue().tensor().longints().values();
  CHECK(std::vector<int64_t>(i64.begin(), i64.end()) == std::vector<int64_t>{-1, int64_t{1} << 40});
  const auto& bools = val(2).immediatevalue().tensor().bools().values();
  CHECK(std::vector<bool>(bools.begin(), bools.end()) == std::vector<bool>{true, false, true});
  CHECK(val(3).immediatevalue().tensor().strings().values_size() == 1);
  CHECK(val(3).immediatevalue().tensor().strings().values(0).empty());
  CHECK(val(3).type().tensortype().rank() == 0);
  CHECK(val(4).immediatevalue().tensor().bytes().values().size() == 4);  // fp16 as bytes
  CHECK(val(5).immediatevalue().tensor().ints().values_size() == 5000);
  CHECK(val(5).immediatevalue().tensor().ints().values(0) == -2500);
  const mil::Operation& relu = blk.operations(6);
  CHECK(relu.type() == "relu");
  CHECK(relu.inputs().at("x").arguments(0).name() == "x");
  CHECK(relu.outputs(0).name() == long_name);
  CHECK(relu.attributes().at("name").immediatevalue().tensor().strings().values(0) == long_name);
  CHECK(prog.attributes().at("buildInfo").immediatevalue().dictionary().values_size() >= 1);
  // the reader rebuilds the program
  auto q = read_model_proto(bytes, nullptr, "mem");
  ProgramTextOptions exact;
  exact.consts = true;
  CHECK(program_to_text(*q, exact) == program_to_text(p, exact));
}
