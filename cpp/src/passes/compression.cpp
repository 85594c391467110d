// What the weight compression passes share: coremltools' OptimizationConfig parsed from the JSON
// the Python API writes and resolved per const op (_get_const_op_config), and the rules of
// coremltools.optimize.coreml for which consts compress and along which axes.
#include "milkit/passes/compression.h"

#include <algorithm>
#include <atomic>
#include <exception>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <type_traits>
#include <unordered_map>

#include "milkit/builder/builder.h"
#include "milkit/exec/plan.h"
#include "milkit/exec/threads.h"
#include "milkit/ir/value.h"
#include "milkit/passes/rewrite.h"
#include "milkit/types/error.h"

namespace milkit::compression {

namespace {

using json = nlohmann::json;

Granularity granularity_of(const std::string& s) {
  if (s == "per_tensor") return Granularity::PerTensor;
  if (s == "per_grouped_channel") return Granularity::PerGroupedChannel;
  if (s == "per_channel") return Granularity::PerChannel;
  if (s == "per_block") return Granularity::PerBlock;
  throw ValueError("Invalid granularity=" + s);
}

template <class T>
std::optional<T> opt(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return it->get<T>();
}

std::shared_ptr<const OpConfig> parse_op(const json& j) {
  if (j.is_null()) return nullptr;
  if (!j.is_object() || !j.contains("type"))
    throw ValueError("compression config: an op config must be an object with a \"type\"");
  auto c = std::make_shared<OpConfig>();
  c->type = j.at("type").get<std::string>();
  c->text = j.dump();
  c->weight_threshold = opt<int64_t>(j, "weight_threshold");
  if (c->type == "OpLinearQuantizerConfig") {
    c->mode = j.at("mode").get<std::string>();
    auto dt = dtype_from_name(j.at("dtype").get<std::string>());
    if (!dt) throw ValueError("compression config: unknown dtype " + j.at("dtype").dump());
    c->dtype = *dt;
    c->granularity = granularity_of(j.at("granularity").get<std::string>());
    const json& bs = j.at("block_size");
    if (bs.is_array())
      c->block_sizes = bs.get<std::vector<int64_t>>();
    else
      c->block_size = bs.get<int64_t>();
  } else if (c->type == "OpPalettizerConfig") {
    c->mode = j.at("mode").get<std::string>();
    c->nbits = opt<int>(j, "nbits").value_or(0);
    c->granularity = granularity_of(j.at("granularity").get<std::string>());
    c->group_size = j.value("group_size", int64_t{32});
    c->channel_axis = opt<int64_t>(j, "channel_axis");
    c->cluster_dim = j.value("cluster_dim", int64_t{1});
    c->enable_per_channel_scale = j.value("enable_per_channel_scale", false);
    c->lut_function = opt<int64_t>(j, "lut_function").value_or(-1);
  } else if (c->type == "OpThresholdPrunerConfig") {
    c->threshold = j.value("threshold", 1e-12);
    c->minimum_sparsity_percentile = j.value("minimum_sparsity_percentile", 0.5);
  } else if (c->type == "OpMagnitudePrunerConfig") {
    c->target_sparsity = opt<double>(j, "target_sparsity");
    c->prune_block_size = opt<int64_t>(j, "block_size");
    if (auto nm = opt<std::vector<int64_t>>(j, "n_m_ratio")) {
      if (nm->size() != 2) throw ValueError("compression config: n_m_ratio must have two entries");
      c->n_m_ratio = std::make_pair((*nm)[0], (*nm)[1]);
    }
    c->dim = opt<int64_t>(j, "dim");
  } else {
    throw ValueError("compression config: unknown config type " + c->type);
  }
  return c;
}

std::vector<Operation*> child_ops(const Operation* op) {
  std::vector<Operation*> r;
  for (size_t i = 0; i < op->num_outputs(); ++i)
    for (const Use& u : op->output(i)->uses()) r.push_back(u.op);
  return r;
}

bool is_constexpr(const Operation* op) { return op->op_type().rfind("constexpr_", 0) == 0; }

std::mutex warn_mutex;
std::vector<std::string>& warn_queue() {
  static std::vector<std::string> q;
  return q;
}

bool flag(const Operation* op, const char* name) {
  const Var* v = op->input1(name);
  return v && v->has_value() && v->value()->as_int(0) != 0;
}

}  // namespace

Config Config::parse(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw ValueError(std::string("compression config: not valid JSON: ") + e.what());
  }
  try {
    Config c;
    if (j.contains("global")) c.global = parse_op(j["global"]);
    for (const char* key : {"op_type", "op_name"}) {
      if (!j.contains(key) || j[key].is_null()) continue;
      auto& m = std::string(key) == "op_type" ? c.op_type : c.op_name;
      for (auto it = j[key].begin(); it != j[key].end(); ++it) m[it.key()] = parse_op(it.value());
    }
    return c;
  } catch (const json::exception& e) {
    throw ValueError(std::string("compression config: ") + e.what());
  }
}

const OpConfig* Config::for_op(const Operation* op) const {
  if (auto it = op_name.find(op->name()); it != op_name.end()) return it->second.get();
  if (auto it = op_type.find(op->op_type()); it != op_type.end()) return it->second.get();
  return global.get();
}

const OpConfig* Config::for_const(const Operation* op) const {
  if (auto it = op_name.find(op->name()); it != op_name.end()) return it->second.get();
  if (op_type.count(op->op_type()))
    throw ValueError(
        "const ops cannot be set by the `set_op_type` function. Please use `set_global`");
  auto children = child_ops(op);
  if (children.empty()) return nullptr;  // only a block output reads it
  if (std::all_of(children.begin(), children.end(), is_constexpr)) return for_const(children[0]);
  const OpConfig* first = for_op(children[0]);
  for (size_t i = 1; i < children.size(); ++i) {
    const OpConfig* c = for_op(children[i]);
    const bool same = (c == nullptr) == (first == nullptr) && (!c || c->text == first->text);
    if (!same)
      throw ValueError("compression config conflict detected between ops " +
                       children[0]->describe() + " and " + children[i]->describe() + ": " +
                       (first ? first->text : "None") + " vs " + (c ? c->text : "None"));
  }
  return first;
}

bool uses_weight_file(const Value& v) {
  const DataType d = v.dtype();
  if (v.is_symbolic() || v.is_list()) return false;
  return v.numel() >= 10 && (d == DataType::Float16 || d == DataType::Float32 ||
                             d == DataType::UInt8 || d == DataType::Int8);
}

namespace {
// coremltools' _get_weight_to_compress_size.
int64_t compress_size(const Operation* op, bool joint) {
  if (joint) {
    for (const Use& u : op->output(0)->uses()) {
      if (is_constexpr(u.op)) return compress_size(u.op, joint);
      break;
    }
  }
  const Type* t = op->output(0)->type();
  if (!t->is_tensor() || !t->is_static()) return 0;
  int64_t n = 1;
  for (Dim d : t->shape()) n *= d->value();
  return n;
}
}  // namespace

bool needs_compression(const Operation* op, const OpConfig& cfg, bool joint,
                       bool constexpr_child_ok) {
  auto children = child_ops(op);
  if (!constexpr_child_ok && std::any_of(children.begin(), children.end(), is_constexpr))
    return false;
  if (!cfg.weight_threshold) throw ValueError("weight_threshold cannot be None");
  const Var* out = op->output(0);
  if (!out->type()->is_tensor()) return false;
  if (!children.empty() && !is_constexpr(children[0]) && out->type()->rank() <= 1) return false;
  if (op->op_type() == "const") {
    if (!out->has_value() || !uses_weight_file(*out->value())) return false;
  }
  return compress_size(op, joint) > *cfg.weight_threshold;
}

Config config_option(const PassOptions& opts, const std::string& pass) {
  auto it = opts.find("config");
  if (it == opts.end()) throw ValueError(pass + ": the \"config\" option is required");
  return Config::parse(it->second);
}

bool before_ios16(const Function& f, const Operation* op) {
  if (f.opset() >= Target::iOS16) return false;
  warn("The program's opset is not compatible with iOS16. Skipped the compression of " +
       op->name() + ".");
  return true;
}

bool joint_option(const Program& p, const PassOptions& opts) {
  auto it = opts.find("joint_compression");
  if (it == opts.end() || it->second == "0" || it->second == "false" || it->second == "False")
    return false;
  if (it->second != "1" && it->second != "true" && it->second != "True")
    throw ValueError("joint_compression only supports bool, but got " + it->second);
  for (const auto& [name, f] : p.functions())
    if (f->opset() < Target::iOS18)
      throw ValueError(
          "Joint compression is only supported since iOS18. Please re-convert your model with "
          "minimum_deployment_target set to at least ct.target.iOS18.");
  return true;
}

Operation* single_child(const Operation* op) {
  const auto& uses = op->output(0)->uses();
  return uses.size() == 1 && op->output(0)->block_uses().empty() ? uses[0].op : nullptr;
}

std::vector<float> sparse_to_dense(const Value& nonzero, const Value& mask) {
  std::vector<float> nz = floats(nonzero);
  std::vector<int64_t> m = mask.to_ints();
  std::vector<float> out(m.size(), 0.0f);
  size_t k = 0;
  for (size_t i = 0; i < m.size(); ++i)
    if (m[i] != 0) {
      if (k >= nz.size())
        throw ValueError("sparse weight: the mask has more ones than non-zero values");
      out[i] = nz[k++];
    }
  return out;
}

std::pair<std::optional<int64_t>, std::optional<int64_t>> channel_axes(const Operation* const_op) {
  const Var* var = const_op->output(0);
  const int64_t rank = var->has_value() ? var->value()->rank() : 0;
  std::set<std::optional<int64_t>> outs, ins;
  for (const Use& u : var->uses()) {
    const Operation* c = u.op;
    std::optional<int64_t> o = 0, i = 1;
    if (c->op_type() == "conv_transpose") {
      o = 1;
      i = 0;
    } else if (c->op_type() == "matmul") {
      if (c->input1("y") == var) {
        const bool t = flag(c, "transpose_y");
        o = t ? -2 : -1;
        i = t ? -1 : -2;
      } else {
        const bool t = flag(c, "transpose_x");
        o = t ? -1 : -2;
        i = t ? -2 : -1;
      }
    } else if (is_constexpr(c)) {
      std::tie(i, o) = channel_axes(c);
    }
    if (o && *o < 0) *o += rank;
    if (i && *i < 0) *i += rank;
    outs.insert(o);
    ins.insert(i);
  }
  std::optional<int64_t> o = 0, i = 1;
  if (outs.size() > 1) {
    warn("Can't decide output axis for op " + const_op->name() +
         ", because it's fed into multiple downstream ops which require different output axes.");
    o = std::nullopt;
  } else if (outs.size() == 1) {
    o = *outs.begin();
  }
  if (ins.size() > 1) {
    warn("Can't decide input axis for op " + const_op->name() +
         ", because it's fed into multiple downstream ops which require different input axes.");
    i = std::nullopt;
  } else if (ins.size() == 1) {
    i = *ins.begin();
  }
  return {i, o};
}

std::pair<std::optional<std::vector<int64_t>>, std::optional<int64_t>> block_sizes(
    const Operation* const_op, const OpConfig& cfg, const std::vector<int64_t>& shape) {
  const int rank = static_cast<int>(shape.size());
  auto [in, out] = channel_axes(const_op);
  if (cfg.granularity == Granularity::PerBlock && cfg.block_sizes) {
    const auto& bs = *cfg.block_sizes;
    if (static_cast<int>(bs.size()) != rank)
      throw ValueError(
          "The block_size in config must has one element for each axis. However, for op " +
          const_op->name() + ", there are " + std::to_string(bs.size()) +
          " elements in block_size, but there are " + std::to_string(rank) +
          " axes in the weight.");
    std::vector<int64_t> cand;
    for (int a = 0; a < rank; ++a)
      if (bs[a] != 0 && bs[a] != shape[a]) cand.push_back(a);
    if (cand.size() == 1) out = cand[0];
    return {bs, out};
  }
  if (!in || !out) return {std::nullopt, out};
  if (cfg.granularity == Granularity::PerGroupedChannel && cfg.channel_axis)
    out = *cfg.channel_axis;
  int64_t in_bs = 0, out_bs = 0;
  switch (cfg.granularity) {
    case Granularity::PerTensor:
      break;
    case Granularity::PerChannel:
      out_bs = 1;
      break;
    case Granularity::PerGroupedChannel:
      out_bs = cfg.group_size;
      break;
    case Granularity::PerBlock:
      in_bs = cfg.block_size;
      out_bs = 1;
      break;
  }
  std::vector<int64_t> bs(static_cast<size_t>(rank), 0);
  auto set = [&](int64_t axis, int64_t v) {
    if (axis < rank && axis >= -rank) bs[static_cast<size_t>(axis < 0 ? axis + rank : axis)] = v;
  };
  set(*in, in_bs);
  set(*out, out_bs);
  return {bs, out};
}

void replace_const(Operation* const_op, Var* v) {
  pass_util::replace_var(const_op->output(0), v);
  const_op->parent()->erase(const_op);
}

Value value_from_floats(DataType dt, std::vector<int64_t> shape, const float* data, size_t n) {
  if (dt == DataType::Float16) {
    std::vector<uint8_t> b(n * 2);
    floats_to_halves(data, reinterpret_cast<uint16_t*>(b.data()), n);
    return Value::from_bytes(dt, std::move(shape), std::move(b));
  }
  if (dt == DataType::Float32) {
    const auto* p = reinterpret_cast<const uint8_t*>(data);
    return Value::from_bytes(dt, std::move(shape), std::vector<uint8_t>(p, p + n * sizeof(float)));
  }
  return Value::from_doubles(dt, std::move(shape), std::vector<double>(data, data + n));
}

Value value_from_bytes(DataType dt, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  return Value::from_bytes(dt, std::move(shape), std::move(bytes));
}

namespace {

std::atomic<size_t> result_bytes_kept{0};

// Reserves n bytes of the in-memory budget; false when they do not fit.
bool reserve_result_bytes(size_t n) {
  size_t cur = result_bytes_kept.load();
  while (cur + n <= kResultBytesInMemory)
    if (result_bytes_kept.compare_exchange_weak(cur, cur + n)) return true;
  return false;
}

// Owns kept result bytes and gives their share of the budget back when the buffer goes.
template <class Bytes>
struct KeptResult {
  Bytes bytes;
  explicit KeptResult(Bytes b) : bytes(std::move(b)) {}
  ~KeptResult() { result_bytes_kept -= bytes.size(); }
  KeptResult(const KeptResult&) = delete;
  KeptResult& operator=(const KeptResult&) = delete;
};

template <class Bytes>
std::shared_ptr<const Buffer> kept_or_spilled(Bytes bytes) {
  if (reserve_result_bytes(bytes.size())) {
    auto owner = std::make_shared<KeptResult<Bytes>>(std::move(bytes));
    return Buffer::borrow(owner->bytes.data(), owner->bytes.size(), owner);
  }
  if constexpr (std::is_same_v<Bytes, std::vector<uint8_t>>) {
    return Buffer::spill(std::move(bytes));
  } else {
    std::vector<uint8_t> plain(bytes.begin(), bytes.end());
    Bytes().swap(bytes);
    return Buffer::spill(std::move(plain));
  }
}

}  // namespace

std::shared_ptr<const Buffer> result_buffer(std::vector<uint8_t> bytes) {
  return kept_or_spilled(std::move(bytes));
}

std::shared_ptr<const Buffer> result_buffer(
    std::vector<uint8_t, compress::UninitAllocator<uint8_t>> bytes) {
  return kept_or_spilled(std::move(bytes));
}

Value packed_in_memory(DataType dt, std::vector<int64_t> shape, std::vector<uint8_t> packed) {
  const int64_t n = shape_numel(shape);
  const int bits = dtype_bits(dt);
  if (!is_sub_byte(dt) || static_cast<int64_t>(packed.size()) * 8 < n * bits)
    throw ValueError("packed_in_memory: " + std::to_string(packed.size()) + " bytes for " +
                     std::to_string(n) + " elements of " + std::string(dtype_name(dt)));
  auto buf = Buffer::packed_bits(result_buffer(std::move(packed)), bits, dt == DataType::Int4,
                                 static_cast<size_t>(n));
  return Value(dt, std::move(shape), std::move(buf));
}

Value value_in_memory(DataType dt, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  if (!is_sub_byte(dt)) return Value(dt, std::move(shape), result_buffer(std::move(bytes)));
  if (static_cast<int64_t>(bytes.size()) != shape_numel(shape))
    throw ValueError("value_in_memory: " + std::to_string(bytes.size()) + " bytes for a " +
                     std::string(dtype_name(dt)) + " value of " +
                     std::to_string(shape_numel(shape)) + " elements");
  const int bits = dtype_bits(dt);
  std::vector<uint8_t> packed((bytes.size() * static_cast<size_t>(bits) + 7) / 8);
  pack_bits(bytes.data(), bytes.size(), bits, packed.data());
  std::vector<uint8_t>().swap(bytes);
  return packed_in_memory(dt, std::move(shape), std::move(packed));
}

std::vector<float> floats(const Value& v) {
  std::vector<float> r(static_cast<size_t>(v.numel()));
  if (v.dtype() == DataType::Float16) {
    halves_to_floats(reinterpret_cast<const uint16_t*>(v.raw()), r.data(), r.size());
  } else if (v.dtype() == DataType::Float32) {
    std::copy_n(reinterpret_cast<const float*>(v.raw()), r.size(), r.begin());
  } else {
    for (int64_t i = 0; i < v.numel(); ++i)
      r[static_cast<size_t>(i)] = static_cast<float>(v.as_double(i));
  }
  return r;
}

namespace {

// The ops (a dependency-closed list in program order) computed by one plan: every output.
void materialize_group(const Function& f, const std::vector<Operation*>& ops,
                       std::map<const Var*, std::shared_ptr<const Value>>& values) {
  // the ops rebuilt in a function of their own whose outputs are every constexpr output
  auto g = std::make_shared<Function>(f.opset());
  Builder b(*g);
  std::unordered_map<const Var*, Var*> map;
  std::vector<const Var*> outs;
  std::vector<Var*> new_outs;
  for (Operation* op : ops) {
    std::vector<Arg> args;
    const auto& schema = op->schema();
    for (size_t i = 0; i < op->num_inputs(); ++i) {
      VarSpan in = op->input(i);
      if (in.size() == 0) continue;
      Var* v = in[0];
      auto it = map.find(v);
      if (it != map.end())
        args.push_back(Builder::arg(schema.inputs[i].name, it->second));
      else
        args.push_back(Builder::arg(schema.inputs[i].name, *v->value()));
    }
    auto results = b.create(op->op_type(), args, op->name());
    for (size_t k = 0; k < op->num_outputs(); ++k) {
      map[op->output(k)] = results.at(k);
      outs.push_back(op->output(k));
      new_outs.push_back(results.at(k));
    }
  }
  g->body().set_outputs(new_outs);
  Plan plan(g);
  auto res = plan.run({});
  for (size_t k = 0; k < outs.size(); ++k) {
    const Tensor& t = res.at(k).second;
    if (t.dtype() == DataType::String || t.is_dict() || t.is_list()) {
      values[outs[k]] = std::make_shared<const Value>(t.to_value());
      continue;
    }
    // a decompressed weight goes to the page cache (Value::from_bytes spills large ones)
    const uint8_t* p = t.bytes();
    values[outs[k]] = std::make_shared<const Value>(
        Value::from_bytes(t.dtype(), t.shape(), std::vector<uint8_t>(p, p + t.nbytes())));
    res.at(k).second = Tensor();
  }
}

}  // namespace

std::map<const Var*, std::shared_ptr<const Value>> materialize_all(
    const Function& f, const std::vector<Operation*>& ops) {
  // one plan per chain (ops joined by the values they pass), so one weight's intermediates at a
  // time are in memory rather than every decompressed weight at once
  std::unordered_map<const Operation*, size_t> group_of;
  std::vector<size_t> parent(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) parent[i] = i;
  auto find = [&](size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    group_of[ops[i]] = i;
    for (size_t k = 0; k < ops[i]->num_inputs(); ++k)
      for (Var* v : ops[i]->input(k)) {
        auto it = v->op() ? group_of.find(v->op()) : group_of.end();
        if (it != group_of.end()) parent[find(i)] = find(it->second);
      }
  }
  std::map<size_t, std::vector<Operation*>> groups;  // in program order within each
  for (size_t i = 0; i < ops.size(); ++i) groups[find(i)].push_back(ops[i]);
  std::map<const Var*, std::shared_ptr<const Value>> values;
  for (auto& [root, members] : groups) {
    materialize_group(f, members, values);
    release_free_memory();  // each chain's scratch leaves before the next one's
  }
  return values;
}

namespace {
void ancestors(const Operation* op, std::vector<Operation*>& out,
               std::set<const Operation*>& seen) {
  if (!seen.insert(op).second) return;
  for (Var* v : op->args())
    if (v && v->op() && is_constexpr(v->op())) ancestors(v->op(), out, seen);
  out.push_back(const_cast<Operation*>(op));
}
}  // namespace

std::vector<std::shared_ptr<const Value>> materialize(const Function& f, const Operation* op) {
  std::vector<Operation*> ops;
  std::set<const Operation*> seen;
  ancestors(op, ops, seen);
  auto all = materialize_all(f, ops);
  std::vector<std::shared_ptr<const Value>> r;
  for (size_t k = 0; k < op->num_outputs(); ++k) r.push_back(all.at(op->output(k)));
  return r;
}

namespace {
void collect(Block& b, std::vector<Operation*>& out) {
  for (Operation* op : b.ops()) {
    for (Block* nb : op->blocks()) collect(*nb, out);
  }
  for (Operation* op : b.ops())
    if (op->op_type() == "const") out.push_back(op);
}
}  // namespace

void for_each_const(Program& p, const std::function<void(Function&, Operation*)>& fn) {
  for (auto& [name, f] : p.functions()) {
    std::vector<Operation*> consts;
    collect(f->body(), consts);
    for (Operation* op : consts)
      if (!op->erased()) fn(*f, op);
  }
}

namespace {
LutFunctionHook& hook_slot() {
  static LutFunctionHook h;
  return h;
}
}  // namespace

void set_lut_function_hook(LutFunctionHook hook) { hook_slot() = std::move(hook); }

const LutFunctionHook& lut_function_hook() { return hook_slot(); }

void release_free_memory() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

namespace {
/// Jobs per thread in a window: weights differ in size by 100x or more, so a window of one job per
/// thread would leave threads idle at its barrier; the pool hands a larger window's jobs out as
/// threads come free. The window also closes once its weights hold as many elements as
/// kWindowHalfWeights / 2 per thread of its largest would, which bounds its weight-sized scratch.
constexpr size_t kWindowPerThread = 4;
constexpr int64_t kWindowHalfWeights = 3;

/// Elements of a const's value (0 when it has none).
int64_t const_numel(const Operation* op) {
  const Var* out = op->outputs().empty() ? nullptr : op->outputs()[0];
  return out && out->has_value() ? out->value()->numel() : 0;
}
}  // namespace

bool for_each_const_parallel(
    Program& p, const std::function<std::optional<Job>(Function&, Operation*)>& prepare) {
  const size_t window = static_cast<size_t>(std::max(1, num_threads())) * kWindowPerThread;
  bool changed = false;
  std::vector<Job> jobs;
  // an error is raised when its job's turn to apply comes (after the jobs before it), whatever
  // the thread that met it
  std::vector<std::exception_ptr> errors;
  auto compute = [&](size_t i) {
    try {
      jobs[i].compute();
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  int64_t elems = 0, largest = 0;  // of the window's weights
  auto flush = [&] {
    elems = largest = 0;
    errors.assign(jobs.size(), nullptr);
    std::vector<size_t> beside;
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (jobs[i].splits)
        compute(i);
      else
        beside.push_back(i);
    }
    parallel_for(static_cast<int64_t>(beside.size()), 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) compute(beside[static_cast<size_t>(i)]);
    });
    for (size_t i = 0; i < jobs.size(); ++i) {
      for (const std::string& w : *jobs[i].warnings) warn(w);
      if (errors[i]) {
        jobs.clear();
        std::rethrow_exception(errors[i]);
      }
      changed = jobs[i].apply() || changed;
    }
    jobs.clear();
    release_free_memory();  // the window's weight-sized scratch leaves before the next window
  };
  const int64_t threads = std::max(1, num_threads());
  for (auto& [name, f] : p.functions()) {
    std::vector<Operation*> consts;
    collect(f->body(), consts);
    for (Operation* op : consts) {
      if (op->erased()) continue;
      const int64_t n = const_numel(op);
      if (auto j = prepare(*f, op)) {
        jobs.push_back(std::move(*j));
        elems += n;
        largest = std::max(largest, n);
      }
      if (jobs.size() >= window || (jobs.size() >= static_cast<size_t>(threads) &&
                                    2 * elems >= kWindowHalfWeights * threads * largest)) {
        flush();
      }
    }
    flush();  // also gives the last window's scratch back
  }
  return changed;
}

void warn(const std::string& message) {
  std::lock_guard<std::mutex> g(warn_mutex);
  warn_queue().push_back(message);
}

std::vector<std::string> take_warnings() {
  std::lock_guard<std::mutex> g(warn_mutex);
  std::vector<std::string> r;
  r.swap(warn_queue());
  return r;
}

}  // namespace milkit::compression
