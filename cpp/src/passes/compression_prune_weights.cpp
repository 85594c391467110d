// compression::prune_weights, as coremltools.optimize.coreml does it: each const weight its
// OpThresholdPrunerConfig / OpMagnitudePrunerConfig selects (see passes/compression.h) has its
// smallest values zeroed (by threshold; by magnitude to a target sparsity, optionally in blocks
// along a dim; or n of every m along a dim) and is replaced by "<const>_sparsified":
// - before iOS18: constexpr_sparse_to_dense(nonzero_data, mask: the non-zero flags packed 8 per
//   byte little-endian, shape: uint32);
// - from iOS18: constexpr_sparse_to_dense(nonzero_data, mask: uint1 of the weight's shape).
// Block and n:m sparsity apply to conv and linear weights only: another const is skipped with a
// warning unless its name is in op_name_configs. Where coremltools warns and skips (sparsity
// under minimum_sparsity_percentile, block or m too large), so does this pass.
// Options: "config" (JSON, see Config::parse) and "joint_compression" ("0" / "1").
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/compress/prune.h"
#include "milkit/ir/value.h"
#include "milkit/passes/compression.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

using compression::OpConfig;

constexpr const char* kName = "compression::prune_weights";

// Structural sparsity only applies to conv / linear weights.
bool structural_target(const Operation* op) {
  const Var* v = op->output(0);
  for (const Use& u : v->uses()) {
    const std::string& t = u.op->op_type();
    if (t != "conv" && t != "linear") return false;
    if (u.op->input1("weight") != v) return false;
  }
  return true;
}

compress::PruneSpec spec_of(const OpConfig& cfg) {
  compress::PruneSpec s;
  if (cfg.type == "OpThresholdPrunerConfig") {
    s.kind = compress::PruneSpec::Threshold;
    s.threshold = cfg.threshold;
    s.minimum_sparsity = cfg.minimum_sparsity_percentile;
  } else if (cfg.n_m_ratio) {
    s.kind = compress::PruneSpec::NM;
    s.n = static_cast<int>(cfg.n_m_ratio->first);
    s.m = static_cast<int>(cfg.n_m_ratio->second);
    s.dim = static_cast<int>(cfg.dim.value_or(1));
  } else {
    s.kind = compress::PruneSpec::Magnitude;
    s.target_sparsity = cfg.target_sparsity.value_or(0.0);
    s.block_size = cfg.prune_block_size.value_or(0);
    s.dim = static_cast<int>(cfg.dim.value_or(0));
  }
  return s;
}

// The operands of constexpr_sparse_to_dense for pruned values: the non-zero values and the mask
// (iOS18: uint1 of the weight's shape; before: the flags packed 8 per byte, little-endian).
std::vector<Arg> sparse_args(const Value& w, const std::vector<float>& pruned, bool ios18) {
  const size_t n = pruned.size();
  size_t nnz = 0;
  for (float v : pruned) nnz += v != 0.0f;
  std::vector<float> nonzero;
  nonzero.reserve(nnz);
  std::vector<uint8_t> flags(ios18 ? n : (n + 7) / 8, 0);
  for (size_t i = 0; i < n; ++i) {
    if (pruned[i] == 0.0f) continue;
    nonzero.push_back(pruned[i]);
    if (ios18)
      flags[i] = 1;
    else
      flags[i / 8] = static_cast<uint8_t>(flags[i / 8] | (1u << (i % 8)));
  }
  std::vector<Arg> args = {Builder::arg(
      "nonzero_data",
      compression::value_from_floats(w.dtype(), {static_cast<int64_t>(nnz)}, nonzero.data(), nnz))};
  if (ios18) {
    args.push_back(Builder::arg(
        "mask", compression::value_from_bytes(DataType::UInt1, w.shape(), std::move(flags))));
  } else {
    const auto len = static_cast<int64_t>(flags.size());
    args.push_back(Builder::arg(
        "mask", compression::value_from_bytes(DataType::UInt8, {len}, std::move(flags))));
    args.push_back(Builder::arg("shape", Value::int_list(w.shape(), DataType::UInt32)));
  }
  return args;
}

// sparse_args of an fp16 weight pruned element-wise by magnitude, straight from its half bit
// patterns to the kept values and the packed mask (no fp32 copy, no byte per element).
std::vector<Arg> sparse_args_half(const Value& w, double target_sparsity, bool ios18) {
  const auto* h = reinterpret_cast<const uint16_t*>(w.raw());
  const int64_t n = w.numel();
  compress::SparseHalves sp = compress::magnitude_sparse_half(h, n, target_sparsity);
  // kept in memory within the budget for results (else spilled), written once by the save
  auto buf = compression::result_buffer(std::move(sp.nonzero));
  std::vector<Arg> args = {
      Builder::arg("nonzero_data", Value(DataType::Float16, {sp.count}, std::move(buf)))};
  if (ios18) {
    args.push_back(Builder::arg(
        "mask", compression::packed_in_memory(DataType::UInt1, w.shape(), std::move(sp.mask))));
  } else {
    const auto len = static_cast<int64_t>(sp.mask.size());
    args.push_back(Builder::arg(
        "mask", compression::value_in_memory(DataType::UInt8, {len}, std::move(sp.mask))));
    args.push_back(Builder::arg("shape", Value::int_list(w.shape(), DataType::UInt32)));
  }
  return args;
}

Var* emit(Function& f, Operation* op, std::vector<Arg>& args) {
  Builder b(f);
  b.set_insertion_point(op->parent(), op);
  b.set_location(op->location());
  return b.create("constexpr_sparse_to_dense", args, op->name() + "_sparsified").at(0);
}

// The sparse form of an already compressed weight (joint compression): the op's own data kept
// where the pruned weight is non-zero, then constexpr_sparse_to_dense "<op>_sparsified".
Var* emit_joint(Function& f, Operation* op, const std::vector<int64_t>& shape,
                const std::vector<float>& pruned) {
  std::vector<int64_t> flags(pruned.size());
  for (size_t i = 0; i < pruned.size(); ++i) flags[i] = pruned[i] != 0.0f;
  const bool quant = op->op_type() == "constexpr_blockwise_shift_scale";
  const Value& data = *op->input1(quant ? "data" : "indices")->value();
  std::vector<int64_t> all = data.to_ints(), kept;
  if (all.size() != flags.size())
    throw ValueError("prune_weights (op " + op->name() +
                     "): joint pruning of a vector palettized weight is not supported");
  for (size_t i = 0; i < flags.size(); ++i)
    if (flags[i]) kept.push_back(all[i]);
  Builder b(f);
  b.set_insertion_point(op->parent(), op);
  b.set_location(op->location());
  Value mask = Value::from_ints(DataType::UInt1, shape, flags);
  Value nz = Value::from_ints(data.dtype(), {static_cast<int64_t>(kept.size())}, kept);
  std::vector<Arg> args;
  if (quant) {
    args = {Builder::arg("data_mask", mask), Builder::arg("nonzero_data", nz),
            Builder::arg("scale", op->input1("scale"))};
    if (Var* off = op->input1("offset")) args.push_back(Builder::arg("offset", off));
  } else {
    args = {Builder::arg("indices_mask", mask), Builder::arg("indices_nonzero_data", nz),
            Builder::arg("lut", op->input1("lut"))};
    if (Var* va = op->input1("vector_axis")) args.push_back(Builder::arg("vector_axis", va));
  }
  auto outs = b.create(quant ? "constexpr_sparse_blockwise_shift_scale" : "constexpr_lut_to_sparse",
                       args, "");
  std::vector<Arg> dense = {Builder::arg("nonzero_data", outs.at(1)),
                            Builder::arg("mask", outs.at(0))};
  return b.create("constexpr_sparse_to_dense", dense, op->name() + "_sparsified").at(0);
}

// The job of a weight its config prunes (nullopt: left alone). `joint_value` is the dense value of
// an already compressed weight (joint compression), else the const's own value is pruned.
std::optional<compression::Job> prepare(Function& f, Operation* op,
                                        const compression::Config& config,
                                        std::shared_ptr<const Value> joint_value) {
  const OpConfig* cfg = config.for_const(op);
  if (!cfg) return std::nullopt;
  if (cfg->type != "OpThresholdPrunerConfig" && cfg->type != "OpMagnitudePrunerConfig")
    return std::nullopt;
  if (!compression::needs_compression(op, *cfg, joint_value != nullptr)) return std::nullopt;
  std::shared_ptr<const Value> w = joint_value ? joint_value : op->output(0)->value();
  const std::string skip =
      "op named " + op->name() + " not applicable for " + cfg->text + " configuration. Skipped.";
  const bool structural =
      cfg->type == "OpMagnitudePrunerConfig" && (cfg->n_m_ratio || cfg->prune_block_size);
  if (structural && !structural_target(op) && !config.op_name.count(op->name())) {
    compression::warn(skip);
    return std::nullopt;
  }
  compression::Job job;
  auto result = std::make_shared<std::optional<std::vector<float>>>();
  auto warnings = job.warnings;
  const compress::PruneSpec spec = spec_of(*cfg);
  const bool joint = joint_value != nullptr, ios18 = f.opset() >= Target::iOS18;
  auto args = std::make_shared<std::vector<Arg>>();
  const bool half = !joint && spec.kind == compress::PruneSpec::Magnitude && spec.block_size == 0 &&
                    w->dtype() == DataType::Float16 && w->numel() > 0;
  job.compute = [w, spec, result, warnings, skip, joint, ios18, args, half] {
    if (half) {
      *args = sparse_args_half(*w, spec.target_sparsity, ios18);
      result->emplace();  // applied from `args`
      return;
    }
    std::vector<float> data = compression::floats(*w);
    std::string why;
    *result = compress::prune({data.data(), w->shape(), w->dtype()}, spec, &why);
    if (!*result) {
      if (!why.empty()) warnings->push_back(why);
      warnings->push_back(skip);
    } else if (!joint) {
      *args = sparse_args(*w, **result, ios18);
    }
  };
  job.apply = [&f, op, w, result, joint, args] {
    if (!*result) return false;
    if (!joint) {
      compression::replace_const(op, emit(f, op, *args));
      return true;
    }
    Var* nv = emit_joint(f, op, w->shape(), **result);
    pass_util::replace_var(op->output(0), nv);
    op->parent()->erase(op);
    return true;
  };
  return job;
}

// Joint compression: the quantized and palettized weights (nested blocks first), with their
// dense values.
bool joint_block(Function& f, Block& blk, const compression::Config& config) {
  bool changed = false;
  std::vector<Operation*> ops;
  for (Operation* op : blk.ops()) {
    for (Block* nb : op->blocks()) changed = joint_block(f, *nb, config) || changed;
    const std::string& t = op->op_type();
    if (t == "constexpr_blockwise_shift_scale" || t == "constexpr_lut_to_dense") ops.push_back(op);
  }
  if (ops.empty()) return changed;
  auto values = compression::materialize_all(f, ops);
  for (Operation* op : ops) {
    auto v = values.at(op->output(0));
    if (!compression::uses_weight_file(*v)) continue;
    auto job = prepare(f, op, config, v);
    if (!job) continue;
    job->compute();
    for (const std::string& w : *job->warnings) compression::warn(w);
    changed = job->apply() || changed;
  }
  return changed;
}

class PruneWeights : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, kName, {"config", "joint_compression"});
    const compression::Config config = compression::config_option(opts, kName);
    bool changed = false;
    if (compression::joint_option(p, opts)) {
      for (auto& [name, f] : p.functions()) changed = joint_block(*f, f->body(), config) || changed;
      return changed;
    }
    return compression::for_each_const_parallel(
        p, [&](Function& f, Operation* op) -> std::optional<compression::Job> {
          if (compression::before_ios16(f, op)) return std::nullopt;
          return prepare(f, op, config, nullptr);
        });
  }
};

}  // namespace

/// Registers compression::prune_weights.
void register_compression_prune_weights(PassRegistry& r) {
  r.add(kName, [] { return std::make_unique<PruneWeights>(); });
}

}  // namespace milkit
