// Linear quantization's loops: the vector code gives the scalar code's bytes (edge values, tails),
// and fp16 weights read as raw bits quantize as their float values do.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "milkit/compress/quantize.h"
#include "milkit/types/datatype.h"

using namespace milkit;
using namespace milkit::compress;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Values that exercise the rounding and clipping: signed zeros, fp16 and fp32 subnormals, ties
// at .5 of the scales below, the ends of the quantized ranges, inf and NaN, random values.
std::vector<float> edge_values() {
  std::vector<float> v = {
      0.0f,       -0.0f,      5.96e-8f, -5.96e-8f, 6.1e-5f, -6.1e-5f, 1e-40f,    -1e-40f, 0.5f,
      -0.5f,      1.5f,       -1.5f,    2.5f,      -2.5f,   0.25f,    -0.75f,    127.5f,  -128.5f,
      255.5f,     -127.5f,    7.5f,     -8.5f,     15.5f,   65504.0f, -65504.0f, 1e6f,    -1e6f,
      4194305.0f, 8388609.0f, kInf,     -kInf,     NAN,     -NAN,     3.0e-3f,   0.1f,    -0.1f};
  v.push_back(bits_to_float(0x7FC00001u));  // a NaN with a payload
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int i = 0; i < 64; ++i) v.push_back(nd(rng));
  return v;
}

std::vector<QuantStep> steps() {
  std::vector<QuantStep> r;
  const float scales[] = {1.0f, 0.5f,     0.25f, 1.0f / 3.0f, 0.0078125f,
                          0.0f, 5.96e-8f, 3.0f,  kInf,        NAN};
  for (float sc : scales)
    for (int mode = 0; mode < 4; ++mode) {
      QuantStep s;
      s.scale = sc;
      s.half = mode % 2 == 1;
      if (mode >= 2) {  // unsigned with a zero point
        s.has_zero = true;
        s.zero = 131.0f;
        s.qmin = 0.0f;
        s.qmax = 255.0f;
      }
      r.push_back(s);
      if (mode == 3) {  // 4-bit with a zero point
        s.zero = 8.0f;
        s.qmax = 15.0f;
        r.push_back(s);
      }
    }
  return r;
}

}  // namespace

TEST_CASE("quantize_run: the vector loop gives the scalar loop's bytes", "[compress]") {
  const std::vector<float> vals = edge_values();
  std::vector<uint16_t> halves(vals.size());
  floats_to_halves(vals.data(), halves.data(), vals.size());
  for (const QuantStep& s : steps()) {
    // every length up to 24 from every start covers tails shorter than a vector
    for (size_t start = 0; start < 8; ++start)
      for (size_t n = 0; n <= 24 && start + n <= vals.size(); ++n) {
        std::vector<uint8_t> a(n + 1, 0xAB), b(n + 1, 0xAB);
        quantize_run(vals.data() + start, static_cast<int64_t>(n), s, a.data(), true);
        quantize_run(vals.data() + start, static_cast<int64_t>(n), s, b.data(), false);
        REQUIRE(a == b);  // including the byte after the run, left alone
        quantize_run(halves.data() + start, static_cast<int64_t>(n), s, a.data(), true);
        quantize_run(halves.data() + start, static_cast<int64_t>(n), s, b.data(), false);
        REQUIRE(a == b);
      }
    std::vector<uint8_t> a(vals.size()), b(vals.size());
    quantize_run(vals.data(), static_cast<int64_t>(vals.size()), s, a.data(), true);
    quantize_run(vals.data(), static_cast<int64_t>(vals.size()), s, b.data(), false);
    REQUIRE(a == b);
  }
}

TEST_CASE("quantize_run: rounding, clipping and NaN", "[compress]") {
  QuantStep s;  // int8, symmetric, scale 1
  const std::vector<float> w = {0.5f,   1.5f,    2.5f, -0.5f, -2.5f,
                                300.0f, -300.0f, NAN,  -0.0f, 126.6f};
  const std::vector<uint8_t> want = {
      0, 2, 2, 0, static_cast<uint8_t>(-2), 127, static_cast<uint8_t>(-128), 0, 0, 127};
  for (bool vec : {true, false}) {
    std::vector<uint8_t> out(w.size());
    quantize_run(w.data(), static_cast<int64_t>(w.size()), s, out.data(), vec);
    CHECK(out == want);
  }
  // the division rounded to fp16 first: 4098 / 2 = 2049 is a tie between the fp16 values 2048
  // and 2050 and goes to 2048; in fp32 it stays 2049 (the zero point brings it into range)
  QuantStep h;
  h.scale = 2.0f;
  h.has_zero = true;
  h.zero = -1930.0f;
  const float x[] = {4098.0f, 4099.0f};  // 2049 and 2049.5
  for (bool vec : {true, false}) {
    uint8_t out[2];
    h.half = true;
    quantize_run(x, 2, h, out, vec);
    CHECK(static_cast<int8_t>(out[0]) == 118);  // 2048 - 1930
    CHECK(static_cast<int8_t>(out[1]) == 120);  // 2050 - 1930
    h.half = false;
    quantize_run(x, 2, h, out, vec);
    CHECK(static_cast<int8_t>(out[0]) == 119);  // 2049 - 1930
    CHECK(static_cast<int8_t>(out[1]) == 120);  // 2049.5 ties to 2050
  }
}

TEST_CASE("min_max_run: the vector loop gives the scalar loop's minimum and maximum",
          "[compress]") {
  const std::vector<float> vals = edge_values();
  std::vector<uint16_t> halves(vals.size());
  floats_to_halves(vals.data(), halves.data(), vals.size());
  for (size_t start = 0; start < vals.size(); ++start)
    for (size_t n : {size_t(0), size_t(1), size_t(3), size_t(7), size_t(8), size_t(9), size_t(17),
                     size_t(40)}) {
      if (start + n > vals.size()) continue;
      const int64_t m = static_cast<int64_t>(n);
      float lo1 = kInf, hi1 = -kInf, lo2 = kInf, hi2 = -kInf;
      const bool n1 = min_max_run(vals.data() + start, m, lo1, hi1, true);
      const bool n2 = min_max_run(vals.data() + start, m, lo2, hi2, false);
      REQUIRE(n1 == n2);
      REQUIRE(lo1 == lo2);  // +-0 compare equal: the sign of a zero extreme is not kept
      REQUIRE(hi1 == hi2);
      float hl1 = 1.0f, hh1 = -1.0f, hl2 = 1.0f, hh2 = -1.0f;  // running values from before
      REQUIRE(min_max_run(halves.data() + start, m, hl1, hh1, true) ==
              min_max_run(halves.data() + start, m, hl2, hh2, false));
      REQUIRE(hl1 == hl2);
      REQUIRE(hh1 == hh2);
    }
  float lo = kInf, hi = -kInf;
  const float w[] = {NAN, 2.0f, -3.0f, NAN, 1.0f, 0.0f, 4.0f, -1.0f, 9.0f, NAN};
  CHECK(min_max_run(w, 10, lo, hi));
  CHECK(lo == -3.0f);
  CHECK(hi == 9.0f);
}

TEST_CASE("quantize: fp16 raw bits quantize as their float values", "[compress]") {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const std::vector<int64_t> shape = {12, 48};
  std::vector<float> w(12 * 48);
  for (float& x : w) x = nd(rng);
  w[5] = NAN;  // row 0 holds a NaN
  w[100] = 0.0f;
  for (int64_t i = 48 * 3; i < 48 * 4; ++i) w[static_cast<size_t>(i)] = 0.0f;  // a zero row
  std::vector<uint16_t> h(w.size());
  floats_to_halves(w.data(), h.data(), w.size());
  halves_to_floats(h.data(), w.data(), w.size());  // the fp16 values as floats
  struct Case {
    bool symmetric;
    DataType dt;
    std::vector<int64_t> bs;
  };
  const std::vector<Case> cases = {
      {true, DataType::Int8, {1, 0}},   {false, DataType::UInt8, {1, 0}},
      {true, DataType::Int4, {1, 16}},  {false, DataType::UInt4, {1, 8}},
      {true, DataType::Int8, {0, 0}},   {false, DataType::Int8, {0, 1}},
      {true, DataType::UInt8, {4, 16}}, {false, DataType::Int4, {3, 0}}};
  for (const Case& c : cases) {
    QuantSpec spec{c.symmetric, c.dt, c.bs};
    bool inf = true;
    auto a = quantize(w.data(), shape, DataType::Float16, spec, nullptr);
    auto b = quantize(h.data(), shape, spec, nullptr, &inf);
    REQUIRE(a);
    REQUIRE(b);
    CHECK_FALSE(inf);
    CHECK(a->data == b->data);
    CHECK(a->param_shape == b->param_shape);
    CHECK(a->zero_point == b->zero_point);
    REQUIRE(a->scale.size() == b->scale.size());
    for (size_t i = 0; i < a->scale.size(); ++i)
      CHECK((a->scale[i] == b->scale[i] || (std::isnan(a->scale[i]) && std::isnan(b->scale[i]))));
  }
}

TEST_CASE("quantize: a weight with inf is reported and not quantized", "[compress]") {
  std::vector<float> w(8 * 32, 0.5f);
  const std::vector<int64_t> shape = {8, 32};
  for (const std::vector<int64_t>& bs :
       {std::vector<int64_t>{1, 0}, std::vector<int64_t>{0, 0}, std::vector<int64_t>{1, 8}}) {
    QuantSpec spec{true, DataType::Int8, bs};
    for (float bad : {kInf, -kInf}) {
      std::vector<float> x = w;
      x[37] = bad;
      x[38] = NAN;
      std::vector<uint16_t> h(x.size());
      floats_to_halves(x.data(), h.data(), x.size());
      bool inf = false;
      std::string why;
      CHECK_FALSE(quantize(h.data(), shape, spec, &why, &inf));
      CHECK(inf);
      CHECK(why.empty());
      inf = false;
      CHECK_FALSE(quantize(x.data(), shape, DataType::Float32, spec, &why, &inf));
      CHECK(inf);
      // without the flag, the weight is quantized as before (inf clips, NaN becomes 0)
      auto q = quantize(x.data(), shape, DataType::Float32, spec, &why);
      REQUIRE(q);
    }
    // NaN alone is no inf, and a row of NaNs is not mistaken for one
    std::vector<float> x = w;
    for (int i = 0; i < 32; ++i) x[static_cast<size_t>(i)] = NAN;
    bool inf = true;
    CHECK(quantize(x.data(), shape, DataType::Float32, spec, nullptr, &inf));
    CHECK_FALSE(inf);
  }
  // a block size that does not divide: skipped for it, `has_inf` left alone
  QuantSpec spec{true, DataType::Int8, {1, 5}};
  std::vector<float> x = w;
  x[3] = kInf;
  bool inf = false;
  std::string why;
  CHECK_FALSE(quantize(x.data(), shape, DataType::Float32, spec, &why, &inf));
  CHECK_FALSE(inf);
  CHECK(why.find("not divisible") != std::string::npos);
}

TEST_CASE("quantize: 4-bit data packed row by row is the unpacked data packed", "[compress]") {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  struct Case {
    std::vector<int64_t> shape, bs;
    DataType dt;
    bool symmetric, packs;
  };
  const std::vector<Case> cases = {
      {{6, 64}, {1, 16}, DataType::Int4, true, true},      // per block
      {{6, 64}, {1, 0}, DataType::UInt4, false, true},     // per channel
      {{4, 3, 2}, {1, 0, 0}, DataType::Int4, true, true},  // rows of 6
      {{5, 7}, {1, 0}, DataType::Int4, true, false},       // odd rows: unpacked
      {{6, 64}, {0, 0}, DataType::Int4, true, false},      // per tensor: unpacked
      {{6, 64}, {1, 0}, DataType::Int8, true, false}};     // 8-bit: unpacked
  for (const Case& c : cases) {
    int64_t n = 1;
    for (int64_t d : c.shape) n *= d;
    std::vector<float> w(static_cast<size_t>(n));
    for (float& x : w) x = nd(rng);
    std::vector<uint16_t> h(w.size());
    floats_to_halves(w.data(), h.data(), w.size());
    QuantSpec spec{c.symmetric, c.dt, c.bs};
    auto plain = quantize(h.data(), c.shape, spec, nullptr);
    spec.allow_packed = true;
    auto packed = quantize(h.data(), c.shape, spec, nullptr);
    REQUIRE(plain);
    REQUIRE(packed);
    CHECK_FALSE(plain->packed);
    CHECK(packed->packed == c.packs);
    CHECK(packed->scale == plain->scale);
    CHECK(packed->zero_point == plain->zero_point);
    if (!c.packs) {
      CHECK(packed->data == plain->data);
      continue;
    }
    std::vector<uint8_t> want(plain->data.size() / 2);
    for (size_t i = 0; i < plain->data.size(); ++i)
      want[i / 2] = static_cast<uint8_t>(want[i / 2] | ((plain->data[i] & 0x0F) << (4 * (i % 2))));
    CHECK(std::vector<uint8_t>(packed->data.begin(), packed->data.end()) == want);
  }
}

TEST_CASE("quantize: per channel over long rows equals each row quantized alone", "[compress]") {
  // 64 x 2048 per channel: one run of 131072 elements cut into pieces of whole rows on the
  // threads; each row alone is quantized per tensor (the other path)
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t rows = 64, cols = 2048;
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (float& x : w) x = nd(rng) * 0.05f;
  w[7 * cols + 3] = NAN;
  std::vector<uint16_t> h(w.size());
  floats_to_halves(w.data(), h.data(), w.size());
  for (DataType dt : {DataType::Int8, DataType::UInt4}) {
    for (bool sym : {true, false}) {
      QuantSpec spec{sym, dt, {1, 0}};
      auto all = quantize(h.data(), {rows, cols}, spec, nullptr);
      REQUIRE(all);
      QuantSpec one{sym, dt, {0, 0}};
      for (int64_t r = 0; r < rows; ++r) {
        auto q = quantize(h.data() + r * cols, {1, cols}, one, nullptr);
        REQUIRE(q);
        INFO("row " << r);
        CHECK(std::equal(q->data.begin(), q->data.end(), all->data.begin() + r * cols));
        const float a = q->scale[0], b = all->scale[static_cast<size_t>(r)];
        CHECK((a == b || (std::isnan(a) && std::isnan(b))));
        if (!q->zero_point.empty())
          CHECK(q->zero_point[0] == all->zero_point[static_cast<size_t>(r)]);
      }
    }
  }
}

TEST_CASE("min_max_blocks / quantize_blocks: the vector loops give the scalar loops' results",
          "[compress]") {
  std::vector<float> vals = edge_values();
  while (vals.size() < 8 * 48) vals.insert(vals.end(), vals.begin(), vals.begin() + 40);
  std::vector<uint16_t> halves(vals.size());
  floats_to_halves(vals.data(), halves.data(), vals.size());
  const std::vector<QuantStep> all = steps();
  for (int64_t lb : {8, 16, 24, 32, 40, 5, 1}) {
    const int64_t blocks = static_cast<int64_t>(vals.size()) / lb;
    std::vector<QuantStep> st(static_cast<size_t>(blocks));
    for (int64_t b = 0; b < blocks; ++b)
      st[static_cast<size_t>(b)] = all[static_cast<size_t>(b) % all.size()];
    auto check = [&](auto* w) {
      std::vector<float> lo1(blocks), hi1(blocks), lo2(blocks), hi2(blocks);
      std::vector<uint8_t> n1(blocks), n2(blocks), q1(blocks * lb), q2(blocks * lb);
      min_max_blocks(w, blocks, lb, lo1.data(), hi1.data(), n1.data(), true);
      min_max_blocks(w, blocks, lb, lo2.data(), hi2.data(), n2.data(), false);
      CHECK(lo1 == lo2);
      CHECK(hi1 == hi2);
      CHECK(n1 == n2);
      quantize_blocks(w, blocks, lb, st.data(), q1.data(), true);
      quantize_blocks(w, blocks, lb, st.data(), q2.data(), false);
      CHECK(q1 == q2);
      // and block by block with the run loops
      for (int64_t b = 0; b < blocks; ++b) {
        float lo = kInf, hi = -kInf;
        CHECK(min_max_run(w + b * lb, lb, lo, hi, false) == (n1[b] != 0));
        CHECK(lo == lo1[b]);
        CHECK(hi == hi1[b]);
      }
    };
    INFO("block " << lb);
    check(vals.data());
    check(halves.data());
  }
}
