// compression::palettize_weights, as coremltools.optimize.coreml does it: each const weight its
// OpPalettizerConfig selects (see passes/compression.h) becomes indices into look-up tables of
// 2^nbits entries (kmeans, uniform, unique or a custom function; one table per tensor or per group
// of channels; scalar or vector entries), written as "<const>_palettized":
// - before iOS18: constexpr_lut_to_dense(lut: [2^nbits], indices packed nbits per element, shape)
//   (per_grouped_channel, vector entries and a per-channel scale are errors there);
// - from iOS18: constexpr_lut_to_dense(indices: uint<nbits>, lut: [groups..., 2^nbits,
//   cluster_dim], vector_axis?), and with enable_per_channel_scale a
//   constexpr_blockwise_shift_scale "<const>_palettized_pcs" after it.
// Options: "config" (JSON, see Config::parse) and "joint_compression" ("0" / "1").
#include <algorithm>
#include <cmath>

#include "milkit/builder/builder.h"
#include "milkit/compress/palettize.h"
#include "milkit/passes/compression.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

using compression::Granularity;
using compression::OpConfig;

constexpr const char* kName = "compression::palettize_weights";

DataType uint_of(int nbits) {
  switch (nbits) {
    case 1:
      return DataType::UInt1;
    case 2:
      return DataType::UInt2;
    case 3:
      return DataType::UInt3;
    case 4:
      return DataType::UInt4;
    case 6:
      return DataType::UInt6;
    default:
      return DataType::UInt8;
  }
}

// coremltools' is_cluster_dim_valid: the channel dim of each conv group divides by cluster_dim.
bool cluster_dim_valid(const Operation* op, int64_t cluster_dim, int64_t axis) {
  const Var* v = op->output(0);
  std::vector<int64_t> shape = v->value()->shape();
  if (axis < 0) axis += static_cast<int64_t>(shape.size());
  for (const Use& u : v->uses()) {
    const std::string& t = u.op->op_type();
    if (t != "conv" && t != "conv_transpose") continue;
    std::vector<int64_t> eff = shape;
    const Var* g = u.op->input1("groups");
    if (g && g->has_value() && g->value()->as_int(0) > 1) eff[0] /= g->value()->as_int(0);
    if (eff[static_cast<size_t>(axis)] % cluster_dim != 0) return false;
  }
  return true;
}

// The channel axis and group size coremltools' blockwise_compress infers from block sizes.
std::pair<int64_t, int64_t> grouping(const std::vector<int64_t>& bs,
                                     const std::vector<int64_t>& shape,
                                     std::optional<int64_t> channel_axis, const Operation* op) {
  int64_t group = 0;
  for (size_t a = 0; a < bs.size(); ++a) {
    if (bs[a] != 0 && bs[a] != shape[a]) {
      if (channel_axis && *channel_axis != static_cast<int64_t>(a))
        throw ValueError("palettize_weights (op " + op->name() +
                         "): General block-wise palettization is not supported. Please use "
                         "'per_grouped_channel' or 'per_tensor' for the 'granularity' in config.");
      channel_axis = static_cast<int64_t>(a);
      group = bs[a];
    }
  }
  return {channel_axis.value_or(0), group};
}

// The LUT as a value of the weight's dtype (integer LUTs truncate, as numpy's astype).
Value lut_value(DataType dt, const compress::Palette& pal) {
  if (is_int(dt)) {
    std::vector<int64_t> v;
    for (float x : pal.lut) v.push_back(static_cast<int64_t>(std::trunc(x)));
    return Value::from_ints(dt, pal.lut_shape, v);
  }
  return Value::from_doubles(dt, pal.lut_shape,
                             std::vector<double>(pal.lut.begin(), pal.lut.end()));
}

Var* emit(Function& f, Operation* op, const compress::Palette& pal, DataType dt) {
  Builder b(f);
  b.set_insertion_point(op->parent(), op);
  b.set_location(op->location());
  const std::string name = op->name() + "_palettized";
  if (f.opset() < Target::iOS18) {
    for (size_t d = 0; d + 2 < pal.lut_shape.size(); ++d)
      if (pal.lut_shape[d] > 1)
        throw ValueError(
            "palettize_weights (op " + op->name() +
            "): The pre-iOS18 palettization only supports per-tensor lut. Please set the "
            "minimum_deployment_target to iOS18 or later.");
    const int64_t entries = int64_t{1} << pal.nbits;
    std::vector<uint8_t> packed = compress::pack_bits(pal.indices, pal.nbits);
    const auto npacked = static_cast<int64_t>(packed.size());
    std::vector<Arg> args = {
        Builder::arg("lut",
                     Value::from_doubles(dt, {entries},
                                         std::vector<double>(pal.lut.begin(), pal.lut.end()))),
        Builder::arg("indices", Value::from_bytes(DataType::UInt8, {npacked}, std::move(packed))),
        Builder::arg("shape", Value::int_list(pal.indices_shape, DataType::UInt32))};
    return b.create("constexpr_lut_to_dense", args, name).at(0);
  }
  std::vector<Arg> args = {
      Builder::arg("indices", Value::from_bytes(uint_of(pal.nbits), pal.indices_shape,
                                                std::vector<uint8_t>(pal.indices))),
      Builder::arg("lut", lut_value(dt, pal))};
  if (pal.vector_axis >= 0)
    args.push_back(
        Builder::arg("vector_axis", Value::scalar_int(DataType::Int32, pal.vector_axis)));
  return b.create("constexpr_lut_to_dense", args, name).at(0);
}

compress::PaletteMode mode_of(const std::string& m) {
  if (m == "KMEANS") return compress::PaletteMode::KMeans;
  if (m == "UNIFORM") return compress::PaletteMode::Uniform;
  if (m == "UNIQUE") return compress::PaletteMode::Unique;
  throw ValueError("palettize_weights: mode " + m + " is not supported here");
}

// Divides the weight by its per-channel scale (max |w| reduced over the channel axis, 0 -> 1), in
// the weight's dtype; returns the scale.
Value per_channel_scale(std::vector<float>& data, const std::vector<int64_t>& shape, int64_t axis,
                        DataType dt) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (axis < 0) axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t a = 0; a < axis; ++a) outer *= shape[a];
  for (int64_t a = axis + 1; a < rank; ++a) inner *= shape[a];
  const int64_t n = shape[axis];
  std::vector<double> scale(static_cast<size_t>(outer * inner), 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < n; ++c)
      for (int64_t i = 0; i < inner; ++i)
        scale[o * inner + i] =
            std::max<double>(scale[o * inner + i], std::fabs(data[(o * n + c) * inner + i]));
  for (double& s : scale)
    if (s == 0) s = 1;
  const bool half = dt == DataType::Float16;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < n; ++c)
      for (int64_t i = 0; i < inner; ++i) {
        float& v = data[(o * n + c) * inner + i];
        v = v / static_cast<float>(scale[o * inner + i]);
        if (half) v = half_to_float(float_to_half(v));
      }
  std::vector<int64_t> sshape = shape;
  sshape[axis] = 1;
  return Value::from_doubles(dt, sshape, scale);
}

// A custom LUT function's palette (run by the hook the Python bindings install).
compress::Palette custom(const OpConfig& cfg, const std::vector<float>& data,
                         const std::vector<int64_t>& shape, DataType dt, int64_t axis,
                         int64_t group, const Operation* op) {
  const auto& hook = compression::lut_function_hook();
  if (!hook || cfg.lut_function < 0)
    throw ValueError("palettize_weights (op " + op->name() +
                     "): mode custom needs a Python lut_function");
  compression::CustomLut r = hook(cfg.lut_function, data, shape, dt, axis, group, cfg.cluster_dim);
  compress::Palette p;
  p.nbits = r.nbits;
  p.lut = std::move(r.lut);
  p.lut_shape = std::move(r.lut_shape);
  p.indices = std::move(r.indices);
  p.indices_shape = std::move(r.indices_shape);
  p.vector_axis = r.vector_axis;
  return p;
}

// The joint-compression patterns coremltools palettizes further (iOS18): a const that is the only
// input `nonzero_data` of constexpr_sparse_to_dense or `data` of constexpr_blockwise_shift_scale.
Operation* joint_child(const Function& f, const Operation* op, bool joint) {
  if (!joint || f.opset() < Target::iOS18) return nullptr;
  Operation* c = compression::single_child(op);
  if (!c) return nullptr;
  const Var* v = op->output(0);
  if (c->op_type() == "constexpr_sparse_to_dense" && c->input1("nonzero_data") == v) return c;
  if (c->op_type() == "constexpr_blockwise_shift_scale" && c->input1("data") == v) return c;
  return nullptr;
}

void check_target(const Function& f, const Operation* op, const OpConfig& cfg) {
  if (f.opset() >= Target::iOS18) return;
  auto err = [&](const char* what) {
    throw ValueError(std::string("The ") + what +
                     " palettization is supported since iOS18. Please re-convert your model with "
                     "minimum_deployment_target set to at least ct.target.iOS18. (op " +
                     op->name() + ")");
  };
  if (cfg.granularity == Granularity::PerGroupedChannel) err("per_grouped_channel");
  if (cfg.cluster_dim > 1) err("vector");
}

// A palettized sparse weight: constexpr_lut_to_sparse over the child's mask, and a new
// constexpr_sparse_to_dense (the child's name) in place of the child.
void emit_sparse(Function& f, Operation* op, Operation* child, const compress::Palette& pal,
                 DataType dt) {
  if (pal.vector_axis >= 0)
    throw ValueError(
        "palettize_weights (op " + op->name() +
        "): vector palettization of a pruned weight is not supported (cluster_dim must be 1)");
  Var* mask = child->input1("mask");
  const uint8_t* m = mask->value()->raw();  // one byte per uint1 / bool element
  std::vector<uint8_t> nz;
  for (size_t i = 0; i < pal.indices.size(); ++i)
    if (m[i] != 0) nz.push_back(pal.indices[i]);
  const auto nnz = static_cast<int64_t>(nz.size());
  Builder b(f);
  b.set_insertion_point(child->parent(), child);
  b.set_location(op->location());
  std::vector<Arg> args = {
      Builder::arg("indices_mask", mask),
      Builder::arg("indices_nonzero_data",
                   Value::from_bytes(uint_of(pal.nbits), {nnz}, std::move(nz))),
      Builder::arg("lut", lut_value(dt, pal))};
  auto outs = b.create("constexpr_lut_to_sparse", args, op->name() + "_palettized");
  const std::string name = child->name();
  child->set_name(name + "__replaced");
  child->output(0)->set_name(child->output(0)->name() + "__replaced");
  std::vector<Arg> dense = {Builder::arg("nonzero_data", outs.at(1)),
                            Builder::arg("mask", outs.at(0))};
  Var* nv = b.create("constexpr_sparse_to_dense", dense, name).at(0);
  pass_util::replace_var(child->output(0), nv);
  child->parent()->erase(child);
  op->parent()->erase(op);
}

// The values to palettize and their arithmetic dtype: a pruned weight's dense values (over
// `mask`), int8 data widened to int32 as coremltools does.
std::pair<std::vector<float>, DataType> values_of(const Value& w, const Value* mask,
                                                  bool joint_child) {
  std::vector<float> data = mask ? compression::sparse_to_dense(w, *mask) : compression::floats(w);
  const bool widen = joint_child && is_int(w.dtype()) && dtype_bits(w.dtype()) <= 8;
  return {std::move(data), widen ? DataType::Int32 : w.dtype()};
}

// Writes a palette (and the per-channel scale after it) in place of the const.
bool apply(Function& f, Operation* op, Operation* child, const compress::Palette& pal,
           const std::optional<Value>& pcs, DataType dt) {
  if (child && child->op_type() == "constexpr_sparse_to_dense") {
    emit_sparse(f, op, child, pal, dt);
    return true;
  }
  Var* nv = emit(f, op, pal, dt);
  if (pcs) {
    if (f.opset() < Target::iOS18)
      throw ValueError(
          "Palettization with per-channel-scale is only supported since iOS18. Please set "
          "minimum_deployment_target accordingly. (op " +
          op->name() + ")");
    Builder b(f);
    b.set_insertion_point(op->parent(), op);
    b.set_location(op->location());
    std::vector<Arg> args = {Builder::arg("data", nv), Builder::arg("scale", *pcs)};
    nv = b.create("constexpr_blockwise_shift_scale", args, op->name() + "_palettized_pcs").at(0);
  }
  compression::replace_const(op, nv);
  return true;
}

// The job of a weight its config palettizes (nullopt: left alone).
std::optional<compression::Job> prepare(Function& f, Operation* op,
                                        const compression::Config& config, bool joint) {
  const OpConfig* cfg = config.for_const(op);
  if (!cfg || cfg->type != "OpPalettizerConfig") return std::nullopt;
  Operation* child = joint_child(f, op, joint);
  if (!compression::needs_compression(op, *cfg, joint, child != nullptr)) return std::nullopt;
  check_target(f, op, *cfg);
  std::shared_ptr<const Value> w = op->output(0)->value();
  std::shared_ptr<const Value> mask;
  if (child && child->op_type() == "constexpr_sparse_to_dense")
    mask = child->input1("mask")->value();
  const std::vector<int64_t> shape = mask ? mask->shape() : w->shape();
  auto [bs, axis] = compression::block_sizes(op, *cfg, shape);
  if (!bs) {
    compression::warn("Cannot perform palettization on " + op->name() +
                      " as block_sizes is None. Skipped this op.");
    return std::nullopt;
  }
  if (cfg->cluster_dim > 1 && !cluster_dim_valid(op, cfg->cluster_dim, axis.value_or(0))) {
    compression::warn("The `cluster_dim` is invalid for " + op->name() + ". Skipped this op.");
    return std::nullopt;
  }
  const auto [channel_axis, group] = grouping(*bs, shape, axis, op);
  const int64_t scale_axis = axis.value_or(0);
  compression::Job job;
  auto pal = std::make_shared<std::optional<compress::Palette>>();
  auto pcs = std::make_shared<std::optional<Value>>();
  auto warnings = job.warnings;
  const OpConfig c = *cfg;
  const bool in_chain = child != nullptr;
  job.compute = [w, mask, shape, c, channel_axis = channel_axis, group = group, scale_axis, pal,
                 pcs, warnings, in_chain, op] {
    auto [data, arith] = values_of(*w, mask.get(), in_chain);
    if (c.enable_per_channel_scale) *pcs = per_channel_scale(data, shape, scale_axis, w->dtype());
    std::string why;
    if (c.mode == "CUSTOM") {
      *pal = custom(c, data, shape, arith, channel_axis, group, op);
    } else {
      compress::PaletteSpec spec{mode_of(c.mode), c.nbits, static_cast<int>(channel_axis), group,
                                 static_cast<int>(c.cluster_dim)};
      *pal = compress::palettize({data.data(), shape, arith}, spec, &why);
    }
    if (!*pal) {
      if (!why.empty()) warnings->push_back(why);
      warnings->push_back("Cannot perform palettization on " + op->name() + ". Skipped this op.");
    }
  };
  // channel groups run in parallel inside the job (custom functions run in Python, one at a time)
  job.splits =
      c.mode != "CUSTOM" && group > 0 && shape[static_cast<size_t>(channel_axis)] / group > 1;
  job.apply = [&f, op, child, pal, pcs, dt = w->dtype()] {
    return *pal && apply(f, op, child, **pal, *pcs, dt);
  };
  return job;
}

class PalettizeWeights : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, kName, {"config", "joint_compression"});
    const compression::Config config = compression::config_option(opts, kName);
    const bool joint = compression::joint_option(p, opts);
    return compression::for_each_const_parallel(
        p, [&](Function& f, Operation* op) -> std::optional<compression::Job> {
          if (compression::before_ios16(f, op)) return std::nullopt;
          return prepare(f, op, config, joint);
        });
  }
};

}  // namespace

/// Registers compression::palettize_weights.
void register_compression_palettize_weights(PassRegistry& r) {
  r.add(kName, [] { return std::make_unique<PalettizeWeights>(); });
}

}  // namespace milkit
