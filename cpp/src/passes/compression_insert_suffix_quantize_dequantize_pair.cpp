// compression::insert_suffix_quantize_dequantize_pair, as coremltools does it after the prefix
// pass: a dequantize whose only reader is a conv, add, avg_pool, max_pool or linear op (an add
// must read two dequantize outputs) that the config selects and that is not already followed by
// a lone quantize gets a quantize -> dequantize pair after it - after the activation that is its
// first reader when that is leaky_relu, tanh, scaled_tanh, sigmoid, hard_sigmoid, relu or relu6
// and is itself read and not by a lone quantize - provided the op quantized after has a reader.
// The pair is int8 (uint8 for an unsigned config dtype) with a zero point always (0 for signed
// symmetric), from the calibrated range of the op's output; the op is rebuilt with its name and
// its output's name, the dequantize output is named "<dequantize>__post__dequant".
// Options: "config" (JSON, see Config::parse) and "activation_stats" (JSON {var: [rmin, rmax]}).
// Beyond coremltools, which raises in these cases: the scale has the var's float type (coremltools
// writes an fp16 scale, refused for an fp32 var), nested blocks are rewritten too, a pattern whose
// last output is an output of its block or has no calibrated range is left alone (with a warning
// for the range), and an add reading a function input is not a pattern.
#include <set>
#include <string>

#include "milkit/builder/builder.h"
#include "milkit/passes/activation_quantization.h"
#include "milkit/passes/compression.h"
#include "milkit/passes/pass.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

using compression::ActivationStats;

constexpr const char* kName = "compression::insert_suffix_quantize_dequantize_pair";

const std::set<std::string> kActivations = {"leaky_relu",   "tanh", "scaled_tanh", "sigmoid",
                                            "hard_sigmoid", "relu", "relu6"};

bool from_dequantize(const Var* v) { return v && v->op() && v->op()->op_type() == "dequantize"; }

Operation* first_reader(const Operation* op) {
  const auto& uses = op->output(0)->uses();
  return uses.empty() ? nullptr : uses[0].op;
}

struct Suffix {
  const compression::Config& config;
  const ActivationStats& stats;
  std::set<const Operation*> visited;

  bool apply(Builder& b, Operation* last, const compression::OpConfig& cfg) {
    Var* old_out = last->output(0);
    if (!old_out->block_uses().empty()) return false;
    auto it = stats.find(old_out->name());
    if (it == stats.end()) {
      compression::warn("No calibrated range for var " + old_out->name() + " (output of " +
                        last->describe() + "); no quantize / dequantize pair after it.");
      return false;
    }
    const bool is_signed = !is_unsigned_int(cfg.dtype);
    const DataType qdt = is_signed ? DataType::Int8 : DataType::UInt8;
    compression::ActivationQParams q = compression::activation_qparams(
        it->second.first, it->second.second, qdt, cfg.mode == "LINEAR_SYMMETRIC");
    q.has_zero_point = true;  // coremltools writes a zero point 0 where there is none
    const DataType sdt =
        old_out->type()->dtype() == DataType::Float16 ? DataType::Float16 : DataType::Float32;
    const std::string var_name = old_out->name();
    Var* rebuilt = compression::rebuild_op(b, last, {});
    b.set_insertion_point(last->parent(), last);
    auto [qv, dv] = compression::quantize_dequantize(b, rebuilt, q, sdt, qdt);
    compression::replace_uses_after(last, old_out, dv, false);
    last->parent()->erase(last);
    visited.insert(qv->op());
    visited.insert(dv->op());
    dv->set_name(dv->name() + "__post__dequant");
    rebuilt->set_name(var_name);
    return true;
  }

  bool match(Builder& b, Operation* dq) {
    if (dq->num_outputs() != 1 || dq->output(0)->uses().size() != 1) return false;
    Operation* core = dq->output(0)->uses()[0].op;
    const std::string& t = core->op_type();
    if (t != "conv" && t != "add" && t != "avg_pool" && t != "max_pool" && t != "linear")
      return false;
    if (t == "add" && !(from_dequantize(core->input1("x")) && from_dequantize(core->input1("y"))))
      return false;
    const compression::OpConfig* cfg = config.for_op(core);
    if (!cfg) return false;
    if (compression::single_child_of_type(core, "quantize")) return false;
    Operation* last = core;
    Operation* child = first_reader(core);
    if (child && kActivations.count(child->op_type()) && first_reader(child)) {
      if (compression::single_child_of_type(child, "quantize")) return false;
      last = child;
      child = first_reader(child);
    }
    if (!child) return false;
    return apply(b, last, *cfg);
  }

  bool sweep(Builder& b, Block& blk) {
    bool changed = false;
    for (Operation* op : blk.ops()) {
      if (op->erased() || !visited.insert(op).second) continue;
      for (Block* nb : op->blocks()) block(b, *nb);
      if (op->op_type() == "dequantize" && match(b, op)) changed = true;
    }
    return changed;
  }

  bool block(Builder& b, Block& blk) {
    bool any = false;
    while (sweep(b, blk)) any = true;
    return any;
  }
};

class InsertSuffixPair : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, kName, {"config", "activation_stats"});
    const compression::Config config = compression::config_option(opts, kName);
    const ActivationStats stats = compression::activation_stats_option(opts, kName);
    Suffix suffix{config, stats, {}};
    bool changed = false;
    for (auto& [name, f] : p.functions()) {
      Builder b(*f);
      changed = suffix.block(b, f->body()) || changed;
    }
    return changed;
  }
};

}  // namespace

/// Registers compression::insert_suffix_quantize_dequantize_pair.
void register_compression_insert_suffix_quantize_dequantize_pair(PassRegistry& r) {
  r.add(kName, [] { return std::make_unique<InsertSuffixPair>(); });
}

}  // namespace milkit
