// What the activation quantization passes share: the calibrated ranges option, coremltools'
// scale / zero point of a range (fp16 bounds, numpy's fp16 arithmetic), and pymil's rewiring of
// uses, whose effect on reader order decides which reader coremltools' suffix pass looks at.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "milkit/compress/quantize.h"
#include "milkit/passes/activation_quantization.h"
#include "milkit/passes/rewrite.h"
#include "milkit/types/error.h"

namespace milkit::compression {

namespace {

using json = nlohmann::json;

double bound(const json& j, const std::string& pass, const std::string& name) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  }
  throw ValueError(pass + ": activation_stats of '" + name + "' must be numbers, got " + j.dump());
}

/// A double rounded once to fp16 (round to nearest even): rounded to float to odd first, which
/// keeps enough bits for the second rounding to be exact.
float to_half(double d) {
  float f = static_cast<float>(d);
  if (std::isfinite(f) && static_cast<double>(f) != d) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    if (std::fabs(static_cast<double>(f)) > std::fabs(d)) --bits;  // truncate toward zero
    bits |= 1u;
    std::memcpy(&f, &bits, sizeof bits);
  }
  return half_to_float(float_to_half(f));
}

/// Moves `op` to the end of the reader list of its input in `slot` (pymil's set_inputs detaches
/// and re-attaches every input of an op it rewires).
void touch(Operation* op, size_t slot, Var* other) {
  Var* v = op->args()[slot];
  op->set_arg(slot, other);
  op->set_arg(slot, v);
}

/// Rewires `op` from `old_var` to `new_var` if it reads it; true when it did.
bool rewire(Operation* op, Var* old_var, Var* new_var) {
  const auto& args = op->args();
  if (std::find(args.begin(), args.end(), old_var) == args.end()) return false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == old_var)
      op->set_arg(i, new_var);
    else
      touch(op, i, args[i] == new_var ? old_var : new_var);
  }
  return true;
}

void replace_in_block(Block& b, Operation* from, Var* old_var, Var* new_var, bool outputs) {
  for (Operation* op = from; op; op = op->next()) {
    rewire(op, old_var, new_var);
    for (Block* nb : op->blocks()) replace_in_block(*nb, nb->front(), old_var, new_var, true);
  }
  if (!outputs) return;
  const auto& outs = b.outputs();
  if (std::find(outs.begin(), outs.end(), old_var) == outs.end()) return;
  if (b.parent_op() == nullptr) {
    pass_util::replace_var(old_var, new_var);  // only the outputs read it now; keeps the name
    return;
  }
  std::vector<Var*> v = outs;
  std::replace(v.begin(), v.end(), old_var, new_var);
  b.set_outputs(v);
}

}  // namespace

ActivationStats activation_stats_option(const PassOptions& opts, const std::string& pass) {
  auto s = opts.find("activation_stats");
  if (s == opts.end())
    throw ValueError("'activation_stats' is required for calibration in activation quantization.");
  return parse_activation_stats(s->second, pass);
}

ActivationStats parse_activation_stats(const std::string& text, const std::string& pass) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw ValueError(pass + ": activation_stats is not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw ValueError(pass + ": activation_stats must be a JSON object");
  ActivationStats r;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const json& v = it.value();
    if (v.is_array() && v.size() == 2) {
      r[it.key()] = {bound(v[0], pass, it.key()), bound(v[1], pass, it.key())};
    } else if (v.is_object() && v.contains("rmin") && v.contains("rmax")) {
      r[it.key()] = {bound(v["rmin"], pass, it.key()), bound(v["rmax"], pass, it.key())};
    } else {
      throw ValueError(pass + ": activation_stats of '" + it.key() +
                       "' must be [rmin, rmax], got " + v.dump());
    }
  }
  return r;
}

ActivationQParams activation_qparams(double rmin, double rmax, DataType qdtype, bool symmetric) {
  const float pair[2] = {to_half(rmin), to_half(rmax)};
  compress::QuantSpec spec{symmetric, qdtype, {0}};
  auto q = compress::quantize(pair, {2}, DataType::Float16, spec, nullptr);
  ActivationQParams r;
  r.scale = q->scale.at(0);
  r.has_zero_point = !q->zero_point.empty();
  if (r.has_zero_point) r.zero_point = q->zero_point[0];
  return r;
}

void replace_uses_after(Operation* anchor, Var* old_var, Var* new_var, bool block_outputs) {
  replace_in_block(*anchor->parent(), anchor->next(), old_var, new_var, block_outputs);
}

Var* rebuild_op(Builder& b, Operation* op,
                const std::vector<std::pair<std::string, Var*>>& replaced) {
  std::vector<Arg> args;
  for (size_t i = 0; i < op->num_inputs(); ++i) {
    const std::string& n = op->schema().inputs[i].name;
    if (op->input(i).empty()) continue;
    Arg a;
    a.name = n;
    auto it =
        std::find_if(replaced.begin(), replaced.end(), [&](const auto& r) { return r.first == n; });
    if (it != replaced.end()) {
      a.items.push_back(ArgItem{it->second, nullptr});
    } else {
      for (Var* v : op->input(i)) a.items.push_back(ArgItem{v, nullptr});
      a.is_sequence = op->schema().inputs[i].kind == InputKind::Tuple;
    }
    args.push_back(std::move(a));
  }
  b.set_insertion_point(op->parent(), op);
  b.set_location(op->location());
  Var* out = b.create(op->op_type(), args, op->name()).at(0);
  out->set_name(op->output(0)->name());
  return out;
}

std::pair<Var*, Var*> quantize_dequantize(Builder& b, Var* input, const ActivationQParams& q,
                                          DataType scale_dtype, DataType qdtype) {
  const Value scale = Value::scalar_float(scale_dtype, q.scale);
  // pymil makes the implicit consts in the order of the call's keywords
  std::vector<Arg> qa = {Builder::arg("input", input), Builder::arg("scale", scale)};
  if (q.has_zero_point)
    qa.push_back(Builder::arg("zero_point", Value::scalar_int(qdtype, q.zero_point)));
  qa.push_back(Builder::arg("output_dtype", Value::scalar_string(std::string(dtype_name(qdtype)))));
  Var* qv = b.create("quantize", qa).at(0);
  std::vector<Arg> da = {Builder::arg("input", qv), Builder::arg("scale", scale)};
  if (q.has_zero_point)
    da.push_back(Builder::arg("zero_point", Value::scalar_int(qdtype, q.zero_point)));
  Var* dv = b.create("dequantize", da).at(0);
  return {qv, dv};
}

bool single_child_of_type(const Operation* op, const char* type) {
  if (op->num_outputs() != 1) return false;
  const auto& uses = op->output(0)->uses();
  return uses.size() == 1 && uses[0].op->op_type() == type;
}

}  // namespace milkit::compression
