// constexpr (compression) ops, following coremltools 9.0 iOS16/constexpr_ops.py and
// iOS18/compression.py:
//   iOS16: constexpr_affine_dequantize, constexpr_cast, constexpr_lut_to_dense,
//          constexpr_sparse_to_dense;
//   iOS18: constexpr_blockwise_shift_scale, constexpr_lut_to_sparse,
//          constexpr_sparse_blockwise_shift_scale, and new versions of constexpr_lut_to_dense
//          (no `shape`, n-d lut), constexpr_sparse_to_dense (uint1 mask, no `shape`) and
//          constexpr_cast.
//
// Every input is const-only (a const or the output of another constexpr op). The outputs are
// const-like for validation but have no value: like coremltools (which only offers
// materialized_val_inference), these ops are never folded, so the compressed weights stay
// compressed. The writer serializes the classes registered at <= iOS17 with attributes and the
// iOS18 ones with inline input values (see serde/proto_writer.cpp).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "milkit/ops/all_ops.h"
#include "milkit/ops/common.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

using Types = std::vector<const Type*>;

/// The static shape of a const-only input (consts and constexpr outputs always have one).
std::vector<int64_t> shape_of(InferCtx& ic, std::string_view input) {
  auto s = ops::static_shape(ic.type(input));
  if (!s) ic.fail_input(input, "needs a static shape");
  return *s;
}

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

/// Shape "(a, b)" in Python tuple style, for messages.
std::string tuple_str(const std::vector<int64_t>& s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += std::to_string(s[i]);
  }
  if (s.size() == 1) r += ",";
  return r + ")";
}

DTypeSet sub_byte_and_byte_and_float() {
  return {DataType::Int4,  DataType::UInt4,   DataType::Int8,
          DataType::UInt8, DataType::Float16, DataType::Float32};
}

DTypeSet lut_indices() {
  return {DataType::UInt1, DataType::UInt2, DataType::UInt3,
          DataType::UInt4, DataType::UInt6, DataType::UInt8};
}

DTypeSet lut_values() {
  return {DataType::Int8, DataType::UInt8, DataType::Float16, DataType::Float32};
}

OpSchema constexpr_schema(std::string name, Target since) {
  OpSchema s;
  s.name = std::move(name);
  s.since = since;
  s.is_constexpr = true;
  return s;
}

/// Number of non-zero elements of a known value.
int64_t count_nonzero(const Value& v) {
  int64_t n = 0;
  const Buffer* packed = v.buffer() ? v.buffer()->bit_source() : nullptr;
  if (packed && v.buffer()->bit_width() == 1) {  // a uint1 mask held packed: its set bits
    const uint8_t* p = packed->data();
    const auto bytes = static_cast<size_t>(v.numel() / 8),
               rest = static_cast<size_t>(v.numel() % 8);
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {  // 64 bits at a time, counted in place (no popcnt call)
      uint64_t x;
      std::memcpy(&x, p + i, 8);
      x -= (x >> 1) & 0x5555555555555555ull;
      x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
      x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
      n += static_cast<int64_t>((x * 0x0101010101010101ull) >> 56);
    }
    for (; i < bytes; ++i) n += __builtin_popcount(p[i]);
    if (rest) n += __builtin_popcount(p[bytes] & ((1u << rest) - 1));
    return n;
  }
  if (v.raw() && dtype_storage_bytes(v.dtype()) == 1) {  // bool, uint1 masks, 8-bit: the bytes
    const uint8_t* p = v.raw();
    for (int64_t i = 0; i < v.numel(); ++i) n += p[i] != 0;
    return n;
  }
  for (int64_t x : v.to_ints()) n += x != 0;
  return n;
}

// ---- iOS18 shared validation (coremltools' _validate_* static methods) -----------------------

/// constexpr_sparse_to_dense._validate_sparse_inputs.
void validate_sparse(InferCtx& ic, std::string_view nonzero, std::string_view mask) {
  const auto nz = shape_of(ic, nonzero);
  if (nz.size() != 1)
    ic.fail("Parameter nonzero_data needs to have rank 1, but got " + std::to_string(nz.size()));
  if (ic.known(mask) && count_nonzero(*ic.val(mask)) != nz[0])
    ic.fail("Number of 1s in mask not match number of elements in parameter nonzero_data");
}

/// constexpr_blockwise_shift_scale._validate_shift_scale_inputs.
void validate_shift_scale(InferCtx& ic, const std::vector<int64_t>& data_shape,
                          DataType data_dtype) {
  const auto sc = shape_of(ic, "scale");
  const size_t rank = data_shape.size();
  if (rank != sc.size())
    ic.fail("Parameter 'data' and 'scale' need to have the same rank, but got " +
            std::to_string(rank) + " vs " + std::to_string(sc.size()) + ".");
  if (rank < 1) ic.fail("Parameter 'data' needs to have at least rank 1, but got scalar.");
  for (size_t i = 0; i < rank; ++i) {
    if (sc[i] == 0 || data_shape[i] % sc[i] != 0)
      ic.fail(
          "Number of scales along each dimension should be a factor of corresponding dimension "
          "size of "
          "'data'. However, at dim " +
          std::to_string(i) + ", the 'data' has " + std::to_string(data_shape[i]) +
          " while 'scale' has " + std::to_string(sc[i]) + ".");
  }
  if (ic.has("offset")) {
    const auto off = shape_of(ic, "offset");
    if (off != sc)
      ic.fail(
          "Invalid parameter 'offset'; the shape of 'offset' should match the shape of 'scale', "
          "but got (" +
          tuple_str(off) + ") vs (" + tuple_str(sc) + ").");
    const DataType odt = ic.type("offset")->dtype();
    if (!is_float(odt) && odt != data_dtype)
      ic.fail(
          "Invalid parameter 'offset'; the dtype of 'offset' should match the dtype of 'data', but "
          "got (" +
          std::string(dtype_name(odt)) + ") vs (" + std::string(dtype_name(data_dtype)) + ").");
  }
}

/// constexpr_lut_to_dense._validate_lut_inputs (iOS18).
void validate_lut(InferCtx& ic, const std::vector<int64_t>& indices_shape, DataType indices_dtype) {
  const auto lut = shape_of(ic, "lut");
  const size_t irank = indices_shape.size();
  if (irank < 1) ic.fail("Parameter 'indices' needs to have at least rank 1, but got scalar.");
  if (lut.size() != irank + 2)
    ic.fail("Parameter 'lut' need to have 2 more dim than 'indices', but got " +
            std::to_string(lut.size()) + "-rank 'lut' and " + std::to_string(irank) +
            "-rank 'indices'.");
  for (size_t i = 0; i < irank; ++i) {
    if (lut[i] == 0 || indices_shape[i] % lut[i] != 0)
      ic.fail(
          "Each dimension of 'indices' should be divisible by each corresponding dimension of the "
          "'lut'. "
          "However, at dim " +
          std::to_string(i) + ", the 'indices' has " + std::to_string(indices_shape[i]) +
          " while 'lut' has " + std::to_string(lut[i]) + ".");
  }
  const int64_t palettes = lut[lut.size() - 2];
  const int nbits = palettes > 0 ? static_cast<int>(std::log2(static_cast<double>(palettes))) : 0;
  if (palettes <= 0 || palettes != (int64_t{1} << nbits))
    ic.fail("Invalid parameter 'lut'; the second last dim should have size 2^nbits, but got " +
            std::to_string(palettes) + ".");
  if (nbits != dtype_bits(indices_dtype))
    ic.fail("Invalid parameter 'indices'; the second last dim indicate number of palettes (" +
            std::to_string(palettes) + "), which means nbits is " + std::to_string(nbits) +
            ", so the dtype of indices should be uint" + std::to_string(nbits) + ", but got " +
            std::string(dtype_name(indices_dtype)) + ".");
  if (ic.has("vector_axis")) {
    if (ic.type("vector_axis")->rank() > 0)
      ic.fail("Invalid parameter 'vector_axis'; It should be a scalar, but got a tensor.");
    const int64_t ax = ic.int_("vector_axis");
    const auto r = static_cast<int64_t>(irank);
    if (ax < -r || ax >= r)
      ic.fail("Invalid parameter 'vector_axis'; The valid range is between " + std::to_string(-r) +
              " and " + std::to_string(r) + ", but got " + std::to_string(ax) + ".");
  } else if (lut.back() > 1) {
    ic.fail(
        "When lut's last dim (VECTOR_SIZE) > 1, the parameter 'vector_axis' need to be provided.");
  }
}

/// `shape` with the vector_axis dim multiplied by the lut's vector size (when > 1).
std::vector<int64_t> expand_vector_axis(InferCtx& ic, std::vector<int64_t> shape) {
  const int64_t vs = shape_of(ic, "lut").back();
  if (vs > 1) {
    int64_t ax = ic.int_("vector_axis");
    if (ax < 0) ax += static_cast<int64_t>(shape.size());
    shape[static_cast<size_t>(ax)] *= vs;
  }
  return shape;
}

/// constexpr_cast (both versions): fp16 -> fp32 only.
void add_cast(OpRegistry& r, Target since) {
  OpSchema s = constexpr_schema("constexpr_cast", since);
  s.inputs = {in_const("source_val", {DataType::Float16}), in_const("output_dtype", dt::string())};
  s.infer = [](InferCtx& ic) -> Types {
    const std::string name = ic.str("output_dtype");
    const auto dt = dtype_from_name(name);
    if (!dt || *dt != DataType::Float32) ic.fail("Only output_dtype = fp32 is supported");
    return {ops::with_dtype(ic.ctx, ic.type("source_val"), DataType::Float32)};
  };
  r.add(std::move(s));
}

}  // namespace

void register_constexpr_ops(OpRegistry& r) {
  // ---- iOS16 -----------------------------------------------------------------------------------
  {
    // constexpr_affine_dequantize(quantized_data, zero_point, scale, axis) -> scale.dtype with
    // quantized_data's shape; scale / zero_point are scalars or vectors along `axis`.
    OpSchema s = constexpr_schema("constexpr_affine_dequantize", Target::iOS16);
    s.inputs = {
        in_const("quantized_data", {DataType::UInt8, DataType::Int8}, "SrcT"),
        in_const("zero_point", {DataType::UInt8, DataType::Int8, DataType::Float32}, "ZeroPointT"),
        in_const("scale", dt::floats(), "DstT"), in_const("axis", dt::int32())};
    s.infer = [](InferCtx& ic) -> Types {
      const auto data = shape_of(ic, "quantized_data");
      const auto rank = static_cast<int64_t>(data.size());
      const int64_t axis = ic.int_("axis");
      if (axis < -rank || axis >= rank)
        ic.fail(
            "Parameter axis needs to be in the range -quantized_data.rank <= axis < "
            "quantized_data.rank");
      for (const char* p : {"scale", "zero_point"}) {
        const int pr = ic.type(p)->rank();
        if (pr != 0 && pr != 1)
          ic.fail(std::string("Parameter ") + p + " needs to be either a scalar or vector");
      }
      const int64_t axis_dim = data[static_cast<size_t>(axis < 0 ? axis + rank : axis)];
      for (const char* p : {"scale", "zero_point"}) {
        const auto ps = shape_of(ic, p);
        if (ps.size() == 1 && ps[0] != axis_dim)
          ic.fail(std::string("Parameter ") + p +
                  ", if vector, needs to have same size as the dimension size along the parameter "
                  "quantized_data");
      }
      return {ic.ctx.tensor(ic.type("scale")->dtype(), data)};
    };
    r.add(std::move(s));
  }
  add_cast(r, Target::iOS16);
  {
    // constexpr_lut_to_dense(indices: packed uint8, lut: vector of 2^nbits, shape: uint32).
    OpSchema s = constexpr_schema("constexpr_lut_to_dense", Target::iOS16);
    s.inputs = {in_const("indices", {DataType::UInt8}), in_const("lut", lut_values(), "T"),
                in_const("shape", {DataType::UInt32})};
    s.infer = [](InferCtx& ic) -> Types {
      const auto idx = shape_of(ic, "indices");
      const auto lut = shape_of(ic, "lut");
      if (idx.size() != 1) ic.fail("Parameter indices needs to have rank == 1");
      if (lut.size() != 1) ic.fail("Parameter lut needs to have rank == 1");
      const int64_t n = lut[0];
      if (n != 2 && n != 4 && n != 16 && n != 64 && n != 256)
        ic.fail("Parameter lut should be a vector of size from one of {2, 4, 16, 64, 256}");
      const int nbits = static_cast<int>(std::log2(static_cast<double>(n)));
      const auto shape = ic.ints("shape");
      const int64_t size = product(shape);
      if (idx[0] != static_cast<int64_t>(std::ceil(nbits * (static_cast<double>(size) / 8.0))))
        ic.fail(
            "Constraint violated, M = ceil(n_bits * product(shape) / 8) where M = indices.size");
      return {ic.ctx.tensor(ic.type("lut")->dtype(), shape)};
    };
    r.add(std::move(s));
  }
  {
    // constexpr_sparse_to_dense(nonzero_data, mask: uint8 bitmask (LSB first), shape: uint32).
    OpSchema s = constexpr_schema("constexpr_sparse_to_dense", Target::iOS16);
    s.inputs = {in_const("nonzero_data", lut_values(), "T"), in_const("mask", {DataType::UInt8}),
                in_const("shape", {DataType::UInt32})};
    s.infer = [](InferCtx& ic) -> Types {
      const auto nz = shape_of(ic, "nonzero_data");
      const auto mask_shape = shape_of(ic, "mask");
      if (nz.size() != 1) ic.fail("Parameter nonzero_data needs to have rank == 1");
      if (mask_shape.size() != 1) ic.fail("Parameter mask needs to have rank == 1");
      const auto mask = ic.ints("mask");
      int64_t bits = 0;
      for (int64_t m : mask) bits += __builtin_popcountll(static_cast<uint64_t>(m) & 0xff);
      if (bits != nz[0])
        ic.fail(
            "Number of set bits in mask needs to be equal to number of elements in parameter "
            "nonzero_data");
      const auto shape = ic.ints("shape");
      const int64_t size = product(shape);
      if (mask_shape[0] != static_cast<int64_t>(std::ceil(static_cast<double>(size) / 8.0)))
        ic.fail("Constraint Violated: M = ceil( product(shape) / 8) where M = mask.size");
      for (int64_t i = size; i < static_cast<int64_t>(mask.size()) * 8; ++i)
        if ((mask[static_cast<size_t>(i / 8)] >> (i % 8)) & 1)
          ic.fail("Padded bits in mask should be unset or equals to zero");
      return {ic.ctx.tensor(ic.type("nonzero_data")->dtype(), shape)};
    };
    r.add(std::move(s));
  }

  // ---- iOS18 -----------------------------------------------------------------------------------
  {
    // constexpr_blockwise_shift_scale(data, scale, offset?) -> scale.dtype with data's shape:
    // scale * (data - offset), scale / offset repeated in blocks along every dim.
    OpSchema s = constexpr_schema("constexpr_blockwise_shift_scale", Target::iOS18);
    s.inputs = {in_const("data", sub_byte_and_byte_and_float(), "SrcT"),
                in_const("scale", dt::floats(), "DstT"),
                in_opt_const("offset", sub_byte_and_byte_and_float(), nullptr, "OffsetT")};
    s.infer = [](InferCtx& ic) -> Types {
      const auto data = shape_of(ic, "data");
      validate_shift_scale(ic, data, ic.type("data")->dtype());
      return {ic.ctx.tensor(ic.type("scale")->dtype(), data)};
    };
    r.add(std::move(s));
  }
  {
    // constexpr_lut_to_dense (iOS18): indices[uint1..uint8] of any rank, lut of rank + 2
    // (per-block palettes; last dim = vector size along vector_axis).
    OpSchema s = constexpr_schema("constexpr_lut_to_dense", Target::iOS18);
    s.inputs = {in_const("indices", lut_indices(), "IndicesT"), in_const("lut", lut_values(), "T"),
                in_opt_const("vector_axis", dt::int32())};
    s.infer = [](InferCtx& ic) -> Types {
      const auto idx = shape_of(ic, "indices");
      validate_lut(ic, idx, ic.type("indices")->dtype());
      return {ic.ctx.tensor(ic.type("lut")->dtype(), expand_vector_axis(ic, idx))};
    };
    r.add(std::move(s));
  }
  {
    // constexpr_sparse_to_dense (iOS18): mask[uint1] has the output shape.
    OpSchema s = constexpr_schema("constexpr_sparse_to_dense", Target::iOS18);
    s.inputs = {in_const("nonzero_data", sub_byte_and_byte_and_float(), "T"),
                in_const("mask", {DataType::UInt1})};
    s.infer = [](InferCtx& ic) -> Types {
      validate_sparse(ic, "nonzero_data", "mask");
      return {ic.ctx.tensor(ic.type("nonzero_data")->dtype(), shape_of(ic, "mask"))};
    };
    r.add(std::move(s));
  }
  {
    // constexpr_lut_to_sparse(indices_mask, indices_nonzero_data, lut, vector_axis?) ->
    // (output_mask, output_nonzero_data): palettizes the non-zero data of a sparse tensor.
    OpSchema s = constexpr_schema("constexpr_lut_to_sparse", Target::iOS18);
    s.inputs = {in_const("indices_mask", {DataType::UInt1}),
                in_const("indices_nonzero_data", lut_indices(), "IndicesT"),
                in_const("lut", lut_values(), "T"), in_opt_const("vector_axis", dt::int32())};
    s.num_outputs = 2;
    s.infer = [](InferCtx& ic) -> Types {
      validate_sparse(ic, "indices_nonzero_data", "indices_mask");
      const auto mask = shape_of(ic, "indices_mask");
      validate_lut(ic, mask, ic.type("indices_nonzero_data")->dtype());
      auto nz = shape_of(ic, "indices_nonzero_data");
      const int64_t vs = shape_of(ic, "lut").back();
      if (vs > 1)
        for (int64_t& d : nz) d *= vs;
      return {ic.ctx.tensor(ic.type("indices_mask")->dtype(), expand_vector_axis(ic, mask)),
              ic.ctx.tensor(ic.type("lut")->dtype(), nz)};
    };
    r.add(std::move(s));
  }
  {
    // constexpr_sparse_blockwise_shift_scale(data_mask, nonzero_data, scale, offset?) ->
    // (data_mask, dequantized nonzero_data).
    OpSchema s = constexpr_schema("constexpr_sparse_blockwise_shift_scale", Target::iOS18);
    s.inputs = {in_const("data_mask", {DataType::UInt1}),
                in_const("nonzero_data", sub_byte_and_byte_and_float(), "SrcT"),
                in_const("scale", dt::floats(), "DstT"),
                in_opt_const("offset", sub_byte_and_byte_and_float(), nullptr, "OffsetT")};
    s.num_outputs = 2;
    s.infer = [](InferCtx& ic) -> Types {
      validate_sparse(ic, "nonzero_data", "data_mask");
      const auto mask = shape_of(ic, "data_mask");
      validate_shift_scale(ic, mask, ic.type("nonzero_data")->dtype());
      return {ic.ctx.tensor(ic.type("data_mask")->dtype(), mask),
              ic.ctx.tensor(ic.type("scale")->dtype(), shape_of(ic, "nonzero_data"))};
    };
    r.add(std::move(s));
  }
  add_cast(r, Target::iOS18);
}

}  // namespace milkit
