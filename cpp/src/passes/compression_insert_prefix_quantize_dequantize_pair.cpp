// compression::insert_prefix_quantize_dequantize_pair, as coremltools.optimize.coreml does it for
// linear_quantize_activations: each conv, avg_pool, max_pool and linear op (and each add whose x
// and y are both non-const) that the config selects reads its x (and y) through a new
// quantize -> dequantize pair, whose scale and zero point come from the var's calibrated range
// ([rmin, rmax] rounded to fp16, numpy's fp16 arithmetic of OpLinearQuantizerConfig's mode and
// dtype); the scale is fp16 for an fp16 var, fp32 otherwise, and a zero point is written except
// for signed symmetric quantization. The op is rebuilt with its name and its output's name. Ops
// are taken block by block (nested blocks first), in program order. A function whose opset is
// older than iOS17 is skipped with a warning.
// Options: "config" (JSON, see Config::parse) and "activation_stats" (JSON {var: [rmin, rmax]}).
// Beyond coremltools: a var without calibrated range leaves its op alone with a warning
// (coremltools raises KeyError).
#include <string>

#include "milkit/builder/builder.h"
#include "milkit/passes/activation_quantization.h"
#include "milkit/passes/compression.h"
#include "milkit/passes/pass.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

using compression::ActivationStats;

constexpr const char* kName = "compression::insert_prefix_quantize_dequantize_pair";

bool is_const(const Var* v) { return v->op() && v->op()->op_type() == "const"; }

bool supported(const Operation* op) {
  const std::string& t = op->op_type();
  return t == "conv" || t == "avg_pool" || t == "max_pool" || t == "linear" || t == "add";
}

struct Prefix {
  const compression::Config& config;
  const ActivationStats& stats;

  // The quantize -> dequantize pair of `v` before `op`; nullptr (and a warning) without a range.
  Var* pair(Builder& b, Var* v, Operation* op, const compression::OpConfig& cfg) const {
    auto it = stats.find(v->name());
    if (it == stats.end()) {
      compression::warn("No calibrated range for var " + v->name() + " (read by " + op->describe() +
                        "); its activations are not quantized.");
      return nullptr;
    }
    const bool symmetric = cfg.mode == "LINEAR_SYMMETRIC";
    compression::ActivationQParams q =
        compression::activation_qparams(it->second.first, it->second.second, cfg.dtype, symmetric);
    if (q.scale == 0.0f && !q.has_zero_point) q.scale = 1.0f;  // coremltools: a no-op scale
    const DataType sdt =
        v->type()->dtype() == DataType::Float16 ? DataType::Float16 : DataType::Float32;
    b.set_insertion_point(op->parent(), op);
    b.set_location(op->location());
    return compression::quantize_dequantize(b, v, q, sdt, cfg.dtype).second;
  }

  static void drop_pair(Var* dq) {
    Operation* d = dq->op();
    Operation* q = d->input1("input")->op();
    std::vector<Operation*> made = {d, q};
    for (Operation* o : {d, q})
      for (Var* in : o->args())
        if (in->op() && in->op()->op_type() == "const" && in->uses().size() == 1)
          made.push_back(in->op());
    for (Operation* o : made) o->parent()->erase(o);
  }

  bool transform(Builder& b, Operation* op) const {
    if (!supported(op)) return false;
    const compression::OpConfig* cfg = config.for_op(op);
    if (!cfg) return false;
    if (cfg->type != "OpLinearQuantizerConfig")
      throw ValueError(std::string(kName) +
                       " only accept OpLinearQuantizerConfig type config. Got " + cfg->type + ".");
    if (cfg->dtype != DataType::Int8 && cfg->dtype != DataType::UInt8)
      throw ValueError("\"quantize\" op: unrecognized output dtype \"" +
                       std::string(dtype_name(cfg->dtype)) +
                       "\" (activations are quantized to int8 or uint8)");
    Var* x = op->input1("x");
    if (is_const(x)) return false;
    std::vector<std::pair<std::string, Var*>> repl;
    Var* qx = pair(b, x, op, *cfg);
    if (!qx) return false;
    repl.emplace_back("x", qx);
    if (op->op_type() == "add") {
      Var* y = op->input1("y");
      // coremltools made x's pair before looking at y: its names are taken
      Var* qy = is_const(y) ? nullptr : pair(b, y, op, *cfg);
      if (!qy) {
        drop_pair(qx);
        return false;
      }
      repl.emplace_back("y", qy);
    }
    Var* old_out = op->output(0);
    Var* out = compression::rebuild_op(b, op, repl);
    compression::replace_uses_after(out->op(), old_out, out, true);
    op->parent()->erase(op);
    return true;
  }

  bool block(Builder& b, Block& blk) const {
    if (blk.function()->opset() < Target::iOS17) {
      compression::warn(
          "The program's opset is not compatible with iOS17. Skipped the compression pass "
          "insert_prefix_quantize_dequantize_pair.");
      return false;
    }
    bool changed = false;
    std::vector<Operation*> ops;
    for (Operation* op : blk.ops()) {
      for (Block* nb : op->blocks()) changed = block(b, *nb) || changed;
      ops.push_back(op);
    }
    for (Operation* op : ops) changed = transform(b, op) || changed;
    return changed;
  }
};

class InsertPrefixPair : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, kName, {"config", "activation_stats"});
    const compression::Config config = compression::config_option(opts, kName);
    const ActivationStats stats = compression::activation_stats_option(opts, kName);
    Prefix prefix{config, stats};
    bool changed = false;
    for (auto& [name, f] : p.functions()) {
      Builder b(*f);
      changed = prefix.block(b, f->body()) || changed;
    }
    return changed;
  }
};

}  // namespace

/// Registers compression::insert_prefix_quantize_dequantize_pair.
void register_compression_insert_prefix_quantize_dequantize_pair(PassRegistry& r) {
  r.add(kName, [] { return std::make_unique<InsertPrefixPair>(); });
}

}  // namespace milkit
