// common::add_fp16_cast (coremltools' FP16ComputePrecision): runs ops in fp16.
//
// For each op, nested blocks first, skipping cast, while_loop, cond, make_list, list_*,
// read_state, coreml_update_state, the op types in the option `skip_ops_by_type` (comma
// separated), and ops with an fp32 const input holding a finite value beyond fp16's range
// (|v| > 65504; |v| >= 1e38 counts as infinity and is allowed):
//   1. each fp32 input that may be fp16 (its dtype set allows fp16; from iOS17 not the alpha/beta
//   of
//      activations nor the epsilon of inverse/log/rsqrt) gets cast(x, "fp16") named
//      "<var>_to_fp16", inserted before the op; a var with several uses is cast once per block and
//      the cast reused. A const cast whose fp16 value flushes a non-zero to zero keeps the smallest
//      fp16 subnormal with the sign of the original instead (arrays under 400 elements, as
//      coremltools);
//   2. the op is rebuilt as "<op>_cast_fp16" on the new inputs, before the old op;
//   3. each output that was fp32 and no longer is gets cast(out, "fp32") named "<out>_to_fp32";
//      users (and function outputs, which keep their names) read it instead; the old op goes.
// With the option `_cast_optimization_follows` (convert sets it when cast_optimization runs later
// with only passes that leave such casts alone in between), an input that is one of step 3's
// casts of a non-constant fp16 var in the same block is read as that fp16 var: cast_optimization
// would remove the cast back to fp16 step 1 makes (its input is the fp16 var's own dtype) and
// dead_code_elimination the cast to fp32 it leaves unused, so the program comes out the same
// without making either. When every op reading such an output is in the op's block (and no block
// returns it), step 3 waits: the old op stays until the block is done, the ops made fp16 read the
// fp16 var, and the cast to fp32 is made (where step 3 would have put it) only if an op still
// reads the fp32 output then.
// First (milkit's own step, not coremltools'), each p-norm written as pow / reduce_sum / pow is
// rescaled by the largest |x| so its powers stay within fp16's range (scale_power_sum).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/passes/pass.h"
#include "milkit/passes/rewrite.h"

namespace milkit {

namespace {

// The dtype argument of a cast; the two string values are shared by every cast the pass makes.
Arg dtype_arg(DataType t) {
  static const auto fp16 = std::make_shared<const Value>(Value::scalar_string("fp16"));
  static const auto fp32 = std::make_shared<const Value>(Value::scalar_string("fp32"));
  Arg a;
  a.name = "dtype";
  a.items.push_back(ArgItem{nullptr, t == DataType::Float16 ? fp16 : fp32});
  return a;
}

const std::initializer_list<const char*> kUnsupported = {
    "cast",      "while_loop", "cond",        "make_list",  "list_gather",        "list_scatter",
    "list_read", "list_write", "list_length", "read_state", "coreml_update_state"};
const std::initializer_list<const char*> kAlphaOps = {"elu", "leaky_relu", "prelu",
                                                      "thresholded_relu"};
const std::initializer_list<const char*> kAlphaBetaOps = {
    "clamped_relu", "linear_activation", "scaled_tanh", "sigmoid_hard", "softplus_parametric"};
const std::initializer_list<const char*> kEpsilonOps = {"inverse", "log", "rsqrt"};

constexpr double kHalfMinSubnormal = 5.9604644775390625e-08;  // 2^-24
constexpr double kFloatMinSubnormal = 1.401298464324817e-45;  // 2^-149

bool is_fp32(const Var* v) {
  return v->type()->is_tensor() && v->type()->dtype() == DataType::Float32;
}

// Type ids of a set of op names (names no op has are left out).
std::vector<bool> id_set(std::initializer_list<const char*> names) {
  std::vector<bool> r(OpRegistry::instance().num_types(), false);
  for (const char* n : names)
    if (int id = OpRegistry::instance().type_id(n); id >= 0) r[static_cast<size_t>(id)] = true;
  return r;
}

bool in_set(const std::vector<bool>& set, const Operation* op) {
  return op->type_id() < set.size() && set[op->type_id()];
}

bool fp16_overflow(const Operation* op) {
  static const uint16_t kConst = op_type_id("const");
  for (Var* v : op->args()) {
    if (!v || !v->op() || v->op()->type_id() != kConst || !is_fp32(v) || !v->has_value()) continue;
    const Value& val = *v->value();
    // a tight loop over the fp32 elements (weights can be large); numpy compares the fp32
    // array with 1e38 rounded to fp32
    // On the bit patterns, 65504 < |f| < 1e38 is one unsigned range test (NaNs lie above 1e38),
    // which vectorizes.
    const float flo = 65504.0f, fhi = 1e38f;
    uint32_t lo, hi;
    std::memcpy(&lo, &flo, 4);
    std::memcpy(&hi, &fhi, 4);
    const uint32_t base = lo + 1, span = hi - lo - 1;
    uint32_t bad = 0;
    auto scan = [&](const uint8_t* p, size_t n) {
      for (size_t i = 0; i < n; ++i) {
        uint32_t u;
        std::memcpy(&u, p + 4 * i, 4);
        bad |= static_cast<uint32_t>(((u & 0x7fffffffu) - base) < span);
      }
    };
    const auto n = static_cast<size_t>(val.numel());
    if (val.buffer()->lazy()) {
      // a weight computed on demand (a folded batch norm) is scanned chunk by chunk, so it
      // stays lazy
      std::vector<uint8_t> chunk(std::min<size_t>(n, 1 << 16) * 4);
      for (size_t i = 0; i < n; i += chunk.size() / 4) {
        size_t m = std::min(chunk.size() / 4, n - i);
        val.buffer()->read(i * 4, m * 4, chunk.data());
        scan(chunk.data(), m);
      }
    } else {
      scan(val.raw(), n);
    }
    if (bad) return true;
  }
  return false;
}

// A one-element float const's value.
std::optional<double> scalar_of(const Var* v) {
  if (!v || !v->has_value() || v->value()->numel() != 1 || !is_float(v->value()->dtype()))
    return std::nullopt;
  return v->value()->as_double(0);
}

// The op making `v` when it is `type` and `v` is read by one op and is no block output.
Operation* sole_producer(Var* v, const char* type) {
  Operation* op = v->op();
  if (!op || op->op_type() != type || v->uses().size() != 1 || !v->block_uses().empty())
    return nullptr;
  return op;
}

// A p-norm written as pow(reduce_sum(pow(|x|, p)), 1 / p) (or sqrt of a sum of squares, x * x
// for the square), as core ATen decomposes vector norms: its powers overflow fp16 where the norm
// does not. It becomes pow(reduce_sum(pow(|x| / m, p)), 1 / p) * max|x|, with m = max(max|x|,
// 2^-14) over the same axes, before the ops are cast. p must be an even integer, or the base an
// abs; a base that is a real_div (this rewrite's own result) is left alone.
bool scale_power_sum(Builder& b, Block& blk, Operation* outer) {
  std::optional<double> e = outer->op_type() == "sqrt"  ? std::optional<double>(0.5)
                            : outer->op_type() == "pow" ? scalar_of(outer->input1("y"))
                                                        : std::nullopt;
  if (!e || !is_fp32(outer->input1("x"))) return false;
  Operation* sum = sole_producer(outer->input1("x"), "reduce_sum");
  Operation* inner = sum ? sole_producer(sum->input1("x"), "pow") : nullptr;
  std::optional<double> p = inner ? scalar_of(inner->input1("y")) : std::nullopt;
  if (Operation* sq = sum && !inner ? sole_producer(sum->input1("x"), "mul") : nullptr;
      sq && sq->input1("x") == sq->input1("y")) {  // x * x: the square
    inner = sq;
    p = 2.0;
  }
  if (!p || !(*p > 0) || std::isinf(*p) || std::fabs(*p * *e - 1) > 1e-6) return false;
  Var* x = inner->input1("x");
  // its own result (pow of |x| / m) is not rewritten again
  if (x->op() && x->op()->op_type() == "real_div") return false;
  bool is_abs = x->op() && x->op()->op_type() == "abs";
  if (!is_abs && !(std::fmod(*p, 2.0) == 0)) return false;
  if (!is_fp32(x) || sum->parent() != &blk || inner->parent() != &blk) return false;
  b.set_insertion_point(&blk, outer);
  b.set_location(outer->location());
  const std::string name = outer->output(0)->name();
  auto one = [&](std::string_view type, std::vector<Arg> args, const std::string& suffix) {
    return b.create(type, args, name + suffix)[0];
  };
  Var* ax = is_abs ? x : one("abs", {Builder::arg("x", x)}, "_abs");
  auto reduce_args = [&](Var* v, std::optional<bool> keep) {
    std::vector<Arg> a = pass_util::inputs_except(*sum, {"x", "keep_dims"});
    a.insert(a.begin(), Builder::arg("x", v));
    if (keep)
      a.push_back(Builder::arg("keep_dims", Value::scalar_bool(*keep)));
    else if (Var* k = sum->input1("keep_dims"))
      a.push_back(Builder::arg("keep_dims", k));
    return a;
  };
  Var* m = one("reduce_max", reduce_args(ax, true), "_max");
  m = one("maximum",
          {Builder::arg("x", m),
           Builder::arg("y", Value::scalar_float(DataType::Float32, 6.103515625e-05))},
          "_scale");
  Var* q = one("real_div", {Builder::arg("x", ax), Builder::arg("y", m)}, "_scaled");
  q = one("pow",
          {Builder::arg("x", q), Builder::arg("y", Value::scalar_float(DataType::Float32, *p))},
          "_pow");
  Var* s = one("reduce_sum", reduce_args(q, std::nullopt), "_sum");
  s = one("pow",
          {Builder::arg("x", s), Builder::arg("y", Value::scalar_float(DataType::Float32, *e))},
          "_root");
  Var* y = one("mul",
               {Builder::arg("x", s),
                Builder::arg("y", one("reduce_max", reduce_args(ax, std::nullopt), "_outer_max"))},
               "");
  pass_util::replace_var(outer->output(0), y);
  blk.erase(outer);
  blk.erase(sum);
  blk.erase(inner);
  return true;
}

class AddFp16Cast : public Pass {
 public:
  bool run(Program& p, const PassOptions& opts) override {
    pass_util::check_options(opts, "common::add_fp16_cast",
                             {"skip_ops_by_type", "_cast_optimization_follows"});
    changed_ = false;
    skip_.clear();
    auto follows = opts.find("_cast_optimization_follows");
    skip_round_trips_ = follows != opts.end() && follows->second == "1";
    auto it = opts.find("skip_ops_by_type");
    if (it != opts.end()) {
      std::stringstream ss(it->second);
      std::string t;
      while (std::getline(ss, t, ',')) skip_.insert(t);
    }
    for (auto& [name, f] : p.functions()) {
      changed_ = pass_util::rewrite_ops(*f, scale_power_sum) || changed_;
      Builder b(*f);
      builder_ = &b;
      apply_block(f->body());
      fp16_source_.clear();
    }
    return changed_;
  }

 private:
  using Cache = std::unordered_map<std::string, Var*>;

  void apply_block(Block& blk) {
    static const std::vector<bool> unsupported = id_set(kUnsupported);
    Cache cache;
    std::vector<Operation*> deferred;
    for (Operation* op : blk.ops()) {
      for (Block* nb : op->blocks()) apply_block(*nb);
      if (in_set(unsupported, op) || fp16_overflow(op) ||
          (!skip_.empty() && skip_.count(op->op_type())))
        continue;
      transform(op, cache, deferred);
    }
    // the old ops whose fp32 outputs were left in place, last first (an old op that reads one is
    // gone by then): an output still read (by an op that reads it as fp32) gets its cast to fp32
    // now, where step 3 would have made it
    for (auto it = deferred.rbegin(); it != deferred.rend(); ++it) {
      Operation* op = *it;
      for (Var* old_out : op->outputs()) {
        auto src = fp16_source_.find(old_out);
        if (src == fp16_source_.end()) continue;
        Var* fp16 = src->second;
        fp16_source_.erase(src);  // (the var goes with its op; its memory is reused)
        if (!old_out->used()) continue;
        builder_->set_insertion_point(&blk, op);
        builder_->set_location(op->location());
        pass_util::replace_var(old_out,
                               make_cast(fp16, DataType::Float32, fp16->name() + "_to_fp32"));
      }
      blk.erase(op);
    }
  }

  static bool should_cast(const Operation* op, const InputDef& d) {
    static const std::vector<bool> alpha = id_set(kAlphaOps), alpha_beta = id_set(kAlphaBetaOps),
                                   epsilon = id_set(kEpsilonOps);
    if (!d.dtypes.contains(DataType::Float16)) return false;
    if (op->function()->opset() >= Target::iOS17) {
      if (in_set(alpha, op) && d.name == "alpha") return false;
      if (in_set(alpha_beta, op) && (d.name == "alpha" || d.name == "beta")) return false;
      if (in_set(epsilon, op) && d.name == "epsilon") return false;
    }
    return true;
  }

  // coremltools' _check_underflow_to_zero
  static void keep_tiny_values(Var* casted, const Var* orig) {
    if (!casted->has_value() || !orig->has_value()) return;
    const Value& nv = *casted->value();
    const Value& ov = *orig->value();
    if (ov.numel() >= 400) return;
    auto near0_16 = [](double x) { return std::fabs(x) <= kHalfMinSubnormal; };
    bool any = false;
    for (int64_t i = 0; i < nv.numel() && !any; ++i) any = near0_16(nv.as_double(i));
    if (!any) return;
    std::vector<double> nd = nv.to_doubles();
    bool modified = false;
    for (int64_t i = 0; i < ov.numel(); ++i) {
      double o = ov.as_double(i);
      if (!(std::fabs(o) <= kFloatMinSubnormal) && near0_16(nd[i])) {
        nd[i] = o > 0 ? kHalfMinSubnormal : -kHalfMinSubnormal;
        modified = true;
      }
    }
    if (modified)
      casted->set_value(
          std::make_shared<const Value>(Value::from_doubles(DataType::Float16, nv.shape(), nd)));
  }

  // cast(v, dtype) named `name`, through argument vectors kept between calls (create only reads
  // them)
  Var* make_cast(Var* v, DataType dt, std::string name) {
    std::vector<Arg>& ca = dt == DataType::Float16 ? cast16_args_ : cast32_args_;
    if (ca.empty()) {
      ca.push_back(Builder::arg("x", v));
      ca.push_back(dtype_arg(dt));
    }
    ca[0].items[0].var = v;
    return builder_->create("cast", ca, std::move(name)).at(0);
  }

  // Whether step 3's cast of `out` can wait: every op reading it is in `blk` (where each one
  // that is made fp16 reads the fp16 var instead, see fp16_source_), and no block returns it.
  static bool only_read_in(const Var* out, const Block* blk) {
    if (!out->block_uses().empty()) return false;
    for (const Use& u : out->uses())
      if (u.op->parent() != blk) return false;
    return true;
  }

  void transform(Operation* op, Cache& cache, std::vector<Operation*>& deferred) {
    const OpSchema& s = op->schema();
    size_t n_args = 0;
    bool modified = false;
    builder_->set_location(op->location());
    for (size_t i = 0; i < op->num_inputs(); ++i) {
      VarSpan in = op->input(i);
      if (in.empty()) continue;
      const InputDef& d = s.inputs[i];
      if (args_.size() <= n_args) args_.emplace_back();
      Arg& a = args_[n_args++];
      a.name = d.name;
      a.is_sequence = d.kind == InputKind::Tuple;
      a.items.clear();
      for (Var* v : in) a.items.push_back(ArgItem{v, nullptr});
      if (should_cast(op, d)) {
        for (ArgItem& item : a.items) {
          Var* v = item.var;
          if (!is_fp32(v)) continue;
          modified = true;
          if (!fp16_source_.empty()) {
            auto src = fp16_source_.find(v);
            if (src != fp16_source_.end() && v->op()->parent() == op->parent()) {
              item.var = src->second;
              continue;
            }
          }
          std::string cname = v->name() + "_to_fp16";
          const bool shared = v->uses().size() > 1;
          if (shared) {
            auto hit = cache.find(cname);
            if (hit != cache.end()) {
              item.var = hit->second;
              continue;
            }
          }
          builder_->set_insertion_point(op->parent(), op);
          Var* c = shared ? make_cast(v, DataType::Float16, cname)
                          : make_cast(v, DataType::Float16, std::move(cname));
          keep_tiny_values(c, v);
          item.var = c;
          if (shared) cache[std::move(cname)] = c;
        }
      }
    }
    if (!modified) return;
    changed_ = true;
    args_.resize(n_args);
    builder_->set_insertion_point(op->parent(), op);
    std::vector<Var*> outs = builder_->create(op->op_type(), args_, op->name() + "_cast_fp16");
    bool keep_old = false;
    for (size_t k = 0; k < op->outputs().size() && k < outs.size(); ++k) {
      Var* old_out = op->output(k);
      Var* nv = outs[k];
      if (is_fp32(old_out) && !is_fp32(nv)) {
        const bool round_trip = skip_round_trips_ && !nv->has_value() && nv->type()->is_tensor() &&
                                nv->type()->dtype() == DataType::Float16;
        if (round_trip && only_read_in(old_out, op->parent())) {
          // the fp32 cast is made at the block's end, if an op still reads the fp32 value then
          // (the ops made fp16 read `nv`; cast_optimization would remove the casts otherwise)
          fp16_source_[old_out] = nv;
          keep_old = true;
          continue;
        }
        builder_->set_insertion_point(op->parent(), op);
        Var* fp16 = nv;
        nv = make_cast(nv, DataType::Float32, nv->name() + "_to_fp32");
        if (round_trip) fp16_source_[nv] = fp16;
      }
      pass_util::replace_var(old_out, nv);
    }
    if (keep_old)
      deferred.push_back(op);
    else
      op->parent()->erase(op);
  }

  std::vector<Arg> args_, cast16_args_, cast32_args_;
  // step 3's fp32 casts of non-constant fp16 vars -> those vars (with _cast_optimization_follows)
  std::unordered_map<const Var*, Var*> fp16_source_;
  bool skip_round_trips_ = false;
  std::set<std::string> skip_;
  Builder* builder_ = nullptr;
  bool changed_ = false;  // whether this run changed the program
};

}  // namespace

/// Registers common::add_fp16_cast.
void register_add_fp16_cast(PassRegistry& r) {
  r.add("common::add_fp16_cast", [] { return std::make_unique<AddFp16Cast>(); });
}

}  // namespace milkit
