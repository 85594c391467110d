// compression::linear_quantize_weights, as coremltools.optimize.coreml does it: each const weight
// its config selects (see passes/compression.h) is quantized linearly to int8 / uint8 / int4 /
// uint4 per tensor, per channel or per block, and replaced by
// - before iOS18: constexpr_affine_dequantize(quantized_data, zero_point, scale, axis), scale and
//   zero point squeezed to rank <= 1, axis the first dim with more than one block (per-block and
//   4-bit settings are errors there, as in coremltools);
// - from iOS18: constexpr_blockwise_shift_scale(data, scale, offset?), scale of the weight's
//   rank, offset only where there is a zero point (not for signed symmetric).
// The new op is named "<const>_quantized". Weights with inf are skipped with a warning; int8 /
// uint8 consts holding only two adjacent values (masks) are left alone.
// Options: "config" (JSON, see Config::parse) and "joint_compression" ("0" / "1": a const feeding
// constexpr_lut_to_dense's lut, constexpr_lut_to_sparse's lut or constexpr_sparse_to_dense's
// nonzero_data is quantized too, iOS18 only).
#include <algorithm>
#include <cmath>
#include <memory>

#include "milkit/builder/builder.h"
#include "milkit/compress/quantize.h"
#include "milkit/ir/value.h"
#include "milkit/passes/compression.h"
#include "milkit/passes/pass.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

using compression::Granularity;
using compression::OpConfig;

constexpr const char* kName = "compression::linear_quantize_weights";

// The quantized data (milkit's unpacked layout of the dtype, or 4-bit values packed) as a value,
// kept in memory within the process budget for results (else spilled): smaller than the weight
// it replaces, it is then written once, by the save.
Value byte_value(DataType dt, const std::vector<int64_t>& shape, compress::Quantized& q) {
  if (q.packed || !is_sub_byte(dt)) {
    auto buf = compression::result_buffer(std::move(q.data));
    if (!q.packed) return Value(dt, shape, std::move(buf));
    auto bits = Buffer::packed_bits(std::move(buf), dtype_bits(dt), dt == DataType::Int4,
                                    static_cast<size_t>(shape_numel(shape)));
    return Value(dt, shape, std::move(bits));
  }
  std::vector<uint8_t> packed((q.data.size() * static_cast<size_t>(dtype_bits(dt)) + 7) / 8);
  pack_bits(q.data.data(), q.data.size(), dtype_bits(dt), packed.data());
  return compression::packed_in_memory(dt, shape, std::move(packed));
}

// A quantized byte as the integer it holds.
int64_t int_of(DataType dt, uint8_t b) { return is_signed_int(dt) ? static_cast<int8_t>(b) : b; }

Value int_value(DataType dt, const std::vector<int64_t>& shape, const std::vector<int32_t>& v) {
  return Value::from_ints(dt, shape, std::vector<int64_t>(v.begin(), v.end()));
}

// Scales (exact values of the weight's dtype, fp16 or fp32) as a value of that dtype.
Value float_value(DataType dt, const std::vector<int64_t>& shape, const std::vector<float>& v) {
  return compression::value_from_floats(dt, shape, v.data(), v.size());
}

// numpy's squeeze of a parameter: size-1 dims dropped.
std::vector<int64_t> squeezed(const std::vector<int64_t>& s) {
  std::vector<int64_t> r;
  for (int64_t d : s)
    if (d != 1) r.push_back(d);
  return r;
}

// The data dtype written: int4 / uint4 data is stored as 4-bit elements (one per byte in milkit's
// unpacked layout) from iOS18, int8 / uint8 otherwise.
Var* emit(Function& f, Operation* op, compress::Quantized& q, const OpConfig& cfg, const Value& w) {
  Builder b(f);
  b.set_insertion_point(op->parent(), op);
  b.set_location(op->location());
  const std::string name = op->name() + "_quantized";
  if (f.opset() < Target::iOS18) {
    std::vector<int64_t> ps = squeezed(q.param_shape);
    int64_t axis = 0;
    for (size_t a = 0; a < q.param_shape.size(); ++a)
      if (q.param_shape[a] > 1) {
        axis = static_cast<int64_t>(a);
        break;
      }
    std::vector<int32_t> zp = q.zero_point;
    if (zp.empty()) zp.assign(q.scale.size(), 0);
    std::vector<Arg> args = {Builder::arg("quantized_data", byte_value(cfg.dtype, w.shape(), q)),
                             Builder::arg("zero_point", int_value(cfg.dtype, ps, zp)),
                             Builder::arg("scale", float_value(w.dtype(), ps, q.scale)),
                             Builder::arg("axis", Value::scalar_int(DataType::Int32, axis))};
    return b.create("constexpr_affine_dequantize", args, name).at(0);
  }
  std::vector<Arg> args = {Builder::arg("data", byte_value(cfg.dtype, w.shape(), q)),
                           Builder::arg("scale", float_value(w.dtype(), q.param_shape, q.scale))};
  if (!q.zero_point.empty())
    args.push_back(Builder::arg("offset", int_value(cfg.dtype, q.param_shape, q.zero_point)));
  return b.create("constexpr_blockwise_shift_scale", args, name).at(0);
}

bool small_int_range(const Value& w) {
  if (!is_int(w.dtype()) || dtype_storage_bytes(w.dtype()) > 1) return false;
  auto v = w.to_ints();
  if (v.empty()) return false;
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return *hi - *lo < 2;
}

// The joint-compression patterns coremltools quantizes further (iOS18): a const that is the only
// input `lut` of constexpr_lut_to_dense / constexpr_lut_to_sparse, or `nonzero_data` of
// constexpr_sparse_to_dense, read by nothing else.
Operation* joint_child(const Function& f, const Operation* op, bool joint) {
  if (!joint || f.opset() < Target::iOS18) return nullptr;
  Operation* c = compression::single_child(op);
  if (!c) return nullptr;
  const Var* v = op->output(0);
  const std::string& t = c->op_type();
  if ((t == "constexpr_lut_to_dense" || t == "constexpr_lut_to_sparse") && c->input1("lut") == v)
    return c;
  if (t == "constexpr_sparse_to_dense" && c->input1("nonzero_data") == v) return c;
  return nullptr;
}

void check_target(const Function& f, const Operation* op, const OpConfig& cfg) {
  if (f.opset() >= Target::iOS18) return;
  const char* what = cfg.granularity == Granularity::PerBlock                        ? "per_block"
                     : (cfg.dtype == DataType::Int4 || cfg.dtype == DataType::UInt4) ? "4-bit"
                                                                                     : nullptr;
  if (what)
    throw ValueError(std::string("The ") + what +
                     " quantization is supported since iOS18. Please re-convert your model with "
                     "minimum_deployment_target set to at least ct.target.iOS18. (op " +
                     op->name() + ")");
}

// The quantized non-zero values of a sparse weight replace the const feeding `child`
// (constexpr_sparse_blockwise_shift_scale over the child's mask).
Var* emit_sparse(Function& f, Operation* op, Operation* child, const compress::Quantized& q,
                 const OpConfig& cfg, DataType wdt) {
  const Var* mask = child->input1("mask");
  std::vector<int64_t> m = mask->value()->to_ints();
  std::vector<int64_t> nz;
  for (size_t i = 0; i < m.size(); ++i)
    if (m[i] != 0) nz.push_back(int_of(cfg.dtype, q.data[i]));
  Builder b(f);
  b.set_insertion_point(child->parent(), child);
  b.set_location(op->location());
  std::vector<Arg> args = {
      Builder::arg("data_mask", const_cast<Var*>(mask)),
      Builder::arg("nonzero_data",
                   Value::from_ints(cfg.dtype, {static_cast<int64_t>(nz.size())}, nz)),
      Builder::arg("scale", float_value(wdt, q.param_shape, q.scale))};
  if (!q.zero_point.empty())
    args.push_back(Builder::arg("offset", int_value(cfg.dtype, q.param_shape, q.zero_point)));
  return b.create("constexpr_sparse_blockwise_shift_scale", args, op->name() + "_quantized").at(1);
}

void warn_inf(const Operation* op) {
  compression::warn("The const " + op->name() +
                    " has inf/-inf, which is not supported by quantization. Skipped.");
}

bool holds_inf(const std::vector<float>& data) {
  return std::any_of(data.begin(), data.end(), [](float v) { return std::isinf(v); });
}

// coremltools' checks on the values it would quantize: false (left alone) for bool consts, small
// integer masks and weights with inf.
bool quantizable(const Operation* op, const Value& w, const std::vector<float>& data) {
  if (w.dtype() == DataType::Bool) return false;
  if (is_int(w.dtype())) {
    if (small_int_range(w)) return false;
    throw ValueError("linear_quantize_weights: const " + op->name() + " holds " +
                     std::string(dtype_name(w.dtype())) +
                     " values; only floating weights can be quantized (Only floating numpy arrays "
                     "are supported.)");
  }
  if (holds_inf(data)) {
    warn_inf(op);
    return false;
  }
  return true;
}

// Whether a weight read in place (whose inf check comes with quantize's reading of it) holds an
// inf after all, for a weight skipped before that: coremltools warns about the inf first.
bool skipped_for_inf(const Operation* op, const Value& w, bool in_place) {
  if (!in_place || !holds_inf(compression::floats(w))) return false;
  warn_inf(op);
  return true;
}

bool transform(Function& f, Operation* op, const compression::Config& config, bool joint) {
  const OpConfig* cfg = config.for_const(op);
  if (!cfg) return false;
  if (cfg->type != "OpLinearQuantizerConfig") return false;
  Operation* child = joint_child(f, op, joint);
  if (!compression::needs_compression(op, *cfg, joint, child != nullptr)) return false;
  check_target(f, op, *cfg);
  const Value& w = *op->output(0)->value();
  // a plain fp16 / fp32 weight is quantized where it is, without a float copy
  const bool half = w.dtype() == DataType::Float16;
  const bool in_place = !child && (half || w.dtype() == DataType::Float32);
  std::vector<float> data;
  if (!in_place) {
    if (!is_int(w.dtype()) && w.dtype() != DataType::Bool) data = compression::floats(w);
    if (!quantizable(op, w, data)) return false;
  }
  std::vector<int64_t> shape = w.shape();
  const bool sparse = child && child->op_type() == "constexpr_sparse_to_dense";
  if (sparse) {
    const Value& mask = *child->input1("mask")->value();
    data = compression::sparse_to_dense(w, mask);
    shape = mask.shape();
  } else if (child && cfg->granularity != Granularity::PerTensor) {
    throw ValueError(
        "When use joint compression for palettization-quantization, please make sure to use "
        "per-tensor quantization, because the axis for the data to be quantized (palettization's "
        "lut) is different from the original weight. (op " +
        op->name() + ")");
  }
  auto [bs, axis] = compression::block_sizes(op, *cfg, shape);
  (void)axis;
  if (!bs) {
    if (skipped_for_inf(op, w, in_place)) return false;
    compression::warn("Cannot perform quantization on " + op->name() +
                      " as block_sizes is None. Skipped this op.");
    return false;
  }
  compress::QuantSpec spec{cfg->mode == "LINEAR_SYMMETRIC", cfg->dtype, *bs};
  spec.allow_packed = !sparse;  // emit_sparse reads a byte per element
  std::string why;
  bool inf = false;
  auto q = !in_place ? compress::quantize(data.data(), shape, w.dtype(), spec, &why)
           : half    ? compress::quantize(reinterpret_cast<const uint16_t*>(w.raw()), shape, spec,
                                          &why, &inf)
                     : compress::quantize(reinterpret_cast<const float*>(w.raw()), shape,
                                          DataType::Float32, spec, &why, &inf);
  if (inf) {
    warn_inf(op);
    return false;
  }
  if (!q) {
    if (skipped_for_inf(op, w, in_place)) return false;
    compression::warn(why);
    compression::warn("Cannot perform quantization on " + op->name() + ". Skipped this op.");
    return false;
  }
  Var* nv = sparse ? emit_sparse(f, op, child, *q, *cfg, w.dtype()) : emit(f, op, *q, *cfg, w);
  compression::replace_const(op, nv);
  return true;
}

class LinearQuantizeWeights : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, kName, {"config", "joint_compression"});
    const compression::Config config = compression::config_option(opts, kName);
    const bool joint = compression::joint_option(p, opts);
    bool changed = false;
    compression::for_each_const(p, [&](Function& f, Operation* op) {
      if (compression::before_ios16(f, op)) return;
      changed = transform(f, op, config, joint) || changed;
    });
    return changed;
  }
};

}  // namespace

/// Registers compression::linear_quantize_weights.
void register_compression_linear_quantize_weights(PassRegistry& r) {
  r.add(kName, [] { return std::make_unique<LinearQuantizeWeights>(); });
}

}  // namespace milkit
