#include "milkit/ops/registry.h"

#include <algorithm>

#include "milkit/ops/all_ops.h"
#include "milkit/types/error.h"

namespace milkit {

std::string DTypeSet::str() const {
  std::string s;
  for (DataType t : kAllDataTypes)
    if (contains(t)) s += (s.empty() ? "" : ", ") + std::string(dtype_name(t));
  // complex64 (not a MIL.proto type) is listed where it is named, not for "any dtype" inputs
  if (contains(DataType::Complex64) && bits_ != ~uint64_t{0})
    s += (s.empty() ? "" : ", ") + std::string("complex64");
  return s;
}

int OpSchema::input_index(std::string_view n) const {
  // (called several times per op built: lengths and first bytes first, no library call)
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string& m = inputs[i].name;
    if (m.size() != n.size() || (!n.empty() && m[0] != n[0])) continue;
    size_t k = 1;
    while (k < n.size() && m[k] == n[k]) ++k;
    if (k >= n.size()) return static_cast<int>(i);
  }
  return -1;
}

std::string OpSchema::input_names() const {
  std::string s;
  for (auto& i : inputs) s += (s.empty() ? "" : ", ") + i.name;
  return s;
}

// ---------------------------------------------------------------------------------------------
// InferCtx

VarSpan InferCtx::vars(std::string_view name) const {
  int i = schema.input_index(name);
  if (i < 0) throw Error("internal: op '" + schema.name + "' has no input '" + std::string(name) + "'");
  return {args_.data() + starts_[i], starts_[i + 1] - starts_[i]};
}

Var* InferCtx::var(std::string_view name) const {
  VarSpan s = vars(name);
  if (s.empty()) type_error(name, "required input is missing");
  return s[0];
}

const Value* InferCtx::val(std::string_view name) const {
  VarSpan s = vars(name);
  if (s.empty()) return nullptr;
  return s[0]->value().get();
}

bool InferCtx::known(std::string_view name) const {
  const Value* v = val(name);
  return v && !v->is_symbolic();
}

std::vector<int64_t> InferCtx::ints(std::string_view name) const {
  const Value* v = val(name);
  if (!v || v->is_symbolic()) fail_input(name, "must be a known constant");
  if (v->dtype() == DataType::String) type_error(name, "must be integers, got a string");
  return v->to_ints();
}

int64_t InferCtx::int_(std::string_view name) const {
  const Value* v = val(name);
  if (!v || v->is_symbolic()) fail_input(name, "must be a known constant");
  if (v->numel() != 1) fail_input(name, "must be a scalar");
  return v->as_int(0);
}

double InferCtx::float_(std::string_view name) const {
  const Value* v = val(name);
  if (!v || v->is_symbolic()) fail_input(name, "must be a known constant");
  if (v->numel() != 1) fail_input(name, "must be a scalar");
  return v->as_double(0);
}

bool InferCtx::bool_(std::string_view name) const {
  const Value* v = val(name);
  if (!v || v->is_symbolic()) fail_input(name, "must be a known constant");
  if (v->numel() != 1) fail_input(name, "must be a scalar");
  return v->as_int(0) != 0;
}

std::string InferCtx::str(std::string_view name) const {
  const Value* v = val(name);
  if (!v || v->dtype() != DataType::String || v->numel() != 1)
    fail_input(name, "must be a known string");
  return v->string_values()[0];
}

std::optional<std::vector<Dim>> InferCtx::dims(std::string_view name) const {
  const Value* v = val(name);
  if (!v || v->dtype() == DataType::String || is_float(v->dtype())) return std::nullopt;
  return v->to_dims(ctx);
}

std::string InferCtx::where() const {
  std::string s = schema.name + " '" + op_name + "'";
  if (loc_) {
    std::string l = loc_->str();
    if (!l.empty()) s += " (at " + l + ")";
  }
  return s;
}

void InferCtx::fail(const std::string& msg) const { throw ValueError(where() + ": " + msg); }

void InferCtx::fail_input(std::string_view input, const std::string& msg) const {
  throw ValueError(where() + ": input '" + std::string(input) + "' " + msg);
}

void InferCtx::type_error(std::string_view input, const std::string& msg) const {
  throw TypeError(where() + ": input '" + std::string(input) + "' " + msg);
}

int64_t InferCtx::axis(std::string_view input, int64_t a, int64_t rank) const {
  if (a < -rank || a >= std::max<int64_t>(rank, 1) || (rank == 0 && a != 0 && a != -1))
    fail_input(input, "= " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
  return a < 0 ? a + rank : a;
}

// ---------------------------------------------------------------------------------------------
// OpRegistry

const OpRegistry& OpRegistry::instance() {
  static const OpRegistry* reg = [] {
    auto* r = new OpRegistry();
    register_all_ops(*r);
    return r;
  }();
  return *reg;
}

void OpRegistry::add(OpSchema schema) {
  const size_t id = ops_.size();
  auto& versions = ops_[schema.name];
  if (!versions.empty() && versions.back()->since >= schema.since)
    throw Error("internal: op '" + schema.name + "' versions must be registered oldest first");
  if (id > 0xffff) throw Error("internal: too many op types");
  schema.type_id = versions.empty() ? static_cast<uint16_t>(id) : versions.front()->type_id;
  if (versions.empty()) index_.emplace(ops_.find(schema.name)->first, &versions);
  versions.push_back(std::make_unique<OpSchema>(std::move(schema)));
}

const OpRegistry::Versions* OpRegistry::lookup(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

const OpSchema* OpRegistry::find(std::string_view name, Target opset) const {
  const Versions* vs = lookup(name);
  if (!vs) return nullptr;
  const OpSchema* best = nullptr;
  for (auto& s : *vs)
    if (static_cast<int>(s->since) <= static_cast<int>(opset)) best = s.get();
  return best;
}

bool OpRegistry::exists(std::string_view name) const { return lookup(name) != nullptr; }

uint16_t op_type_id(std::string_view name) {
  int id = OpRegistry::instance().type_id(name);
  if (id < 0) throw Error("internal: no op named '" + std::string(name) + "'");
  return static_cast<uint16_t>(id);
}

int OpRegistry::type_id(std::string_view name) const {
  const Versions* vs = lookup(name);
  return vs ? vs->front()->type_id : -1;
}

std::optional<Target> OpRegistry::introduced(std::string_view name) const {
  auto it = ops_.find(name);
  if (it == ops_.end()) return std::nullopt;
  return it->second.front()->since;
}

std::vector<std::string> OpRegistry::names(Target opset) const {
  std::vector<std::string> r;
  for (auto& [n, v] : ops_)
    if (v.front()->dialect.empty() && static_cast<int>(v.front()->since) <= static_cast<int>(opset))
      r.push_back(n);
  return r;
}

std::vector<std::string> OpRegistry::dialect_names() const {
  std::vector<std::string> r;
  for (auto& [n, v] : ops_)
    if (!v.front()->dialect.empty()) r.push_back(n);
  return r;
}

std::vector<const OpSchema*> OpRegistry::versions(std::string_view name) const {
  std::vector<const OpSchema*> r;
  if (const Versions* vs = lookup(name))
    for (auto& s : *vs) r.push_back(s.get());
  return r;
}

// ---------------------------------------------------------------------------------------------
// helpers

namespace dt {
DTypeSet floats() { return {DataType::Float16, DataType::Float32}; }
DTypeSet numeric() { return {DataType::Float16, DataType::Float32, DataType::Int32}; }
DTypeSet numeric_bool() {
  return {DataType::Float16, DataType::Float32, DataType::Int32, DataType::Bool};
}
DTypeSet int32() { return {DataType::Int32}; }
DTypeSet boolean() { return {DataType::Bool}; }
DTypeSet string() { return {DataType::String}; }
}  // namespace dt

InputDef in(std::string name, DTypeSet dtypes, std::string domain) {
  InputDef d;
  d.name = std::move(name);
  d.dtypes = dtypes;
  d.domain = std::move(domain);
  return d;
}

InputDef in_const(std::string name, DTypeSet dtypes, std::string domain) {
  InputDef d = in(std::move(name), dtypes, std::move(domain));
  d.is_const = true;
  return d;
}

InputDef in_opt(std::string name, DTypeSet dtypes, std::shared_ptr<const Value> def, bool is_const,
                std::string domain) {
  InputDef d = in(std::move(name), dtypes, std::move(domain));
  d.optional = true;
  d.is_const = is_const;
  d.default_value = std::move(def);
  return d;
}

InputDef in_opt_const(std::string name, DTypeSet dtypes, std::shared_ptr<const Value> def,
                      std::string domain) {
  return in_opt(std::move(name), dtypes, std::move(def), true, std::move(domain));
}

std::shared_ptr<const Value> def_int(int64_t v) {
  return std::make_shared<const Value>(Value::scalar_int(DataType::Int32, v));
}
std::shared_ptr<const Value> def_float(double v) {
  return std::make_shared<const Value>(Value::scalar_float(DataType::Float32, v));
}
std::shared_ptr<const Value> def_bool(bool v) {
  return std::make_shared<const Value>(Value::scalar_bool(v));
}
std::shared_ptr<const Value> def_str(std::string v) {
  return std::make_shared<const Value>(Value::scalar_string(std::move(v)));
}
std::shared_ptr<const Value> def_ints(std::vector<int64_t> v) {
  return std::make_shared<const Value>(Value::int_list(v));
}

}  // namespace milkit
