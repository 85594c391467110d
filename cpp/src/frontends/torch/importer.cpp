// The torch.export importer: the serialized ExportedProgram (schema 8.x) checked and read, the
// graph signature (parameters, buffers, constants, user inputs, outputs, mutated buffers as
// states), symbolic input dims with their ranges, and the unsupported-op report.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>

#include "converter.h"
#include "milkit/frontends/pt2.h"
#include "milkit/types/error.h"

namespace milkit {
namespace torch_detail {

// ---- dtypes --------------------------------------------------------------------------------------

std::optional<DataType> storage_dtype(int st) {
  switch (st) {
    case 1: return DataType::UInt8;
    case 2: return DataType::Int8;
    case 3: return DataType::Int16;
    case 4: return DataType::Int32;
    case 5: return DataType::Int64;
    case 6: return DataType::Float16;
    case 7: return DataType::Float32;
    case 8: return DataType::Float64;
    case 12: return DataType::Bool;
    case 13: return DataType::BFloat16;
    case 28: return DataType::UInt16;
    case 34: return DataType::UInt32;
    case 35: return DataType::UInt64;
    default: return std::nullopt;
  }
}

std::optional<DataType> mil_dtype(int st) {
  auto dt = storage_dtype(st);
  if (!dt) return std::nullopt;
  if (*dt == DataType::Float64 || *dt == DataType::BFloat16) return DataType::Float32;
  if (*dt == DataType::Float16 || *dt == DataType::Float32 || *dt == DataType::Bool) return dt;
  return DataType::Int32;
}

std::string scalar_type_name(int st) {
  static const std::pair<int, const char*> names[] = {
      {1, "uint8"},          {2, "int8"},           {3, "int16"},          {4, "int32"},
      {5, "int64"},          {6, "float16"},        {7, "float32"},        {8, "float64"},
      {9, "complex32"},      {10, "complex64"},     {11, "complex128"},    {12, "bool"},
      {13, "bfloat16"},      {28, "uint16"},        {29, "float8_e4m3fn"}, {30, "float8_e5m2"},
      {31, "float8_e4m3fnuz"}, {32, "float8_e5m2fnuz"}, {33, "float8_e8m0fnu"}, {34, "uint32"},
      {35, "uint64"}};
  for (auto& p : names)
    if (p.first == st) return std::string("torch.") + p.second;
  return "ScalarType " + std::to_string(st);
}

Value narrow(const Value& v, const std::string& what) {
  DataType dt = v.dtype();
  if (dt == DataType::Float64 || dt == DataType::BFloat16) return v.cast(DataType::Float32);
  if (dt == DataType::Bool || dt == DataType::Int32 || dt == DataType::Float16 || dt == DataType::Float32)
    return v;
  if (is_int(dt)) {
    if (dt == DataType::Int64 || dt == DataType::UInt32 || dt == DataType::UInt64) {
      for (int64_t i = 0; i < v.numel(); ++i) {
        int64_t x = v.as_int(i);
        bool too_big = dt == DataType::UInt64 ? static_cast<uint64_t>(x) > static_cast<uint64_t>(INT32_MAX)
                                              : (x > INT32_MAX || x < INT32_MIN);
        if (too_big)
          throw ValueError(what + " holds " + std::to_string(x) + " at element " + std::to_string(i) +
                           ", outside int32, the widest integer Core ML computes in");
      }
    }
    return v.cast(DataType::Int32);
  }
  throw ValueError(what + " has dtype " + std::string(dtype_name(dt)) + ", which Core ML cannot compute in");
}

// ---- sympy srepr ---------------------------------------------------------------------------------

namespace {

struct SymParser {
  const std::string& s;
  size_t p = 0;
  SymbolContext& ctx;

  [[noreturn]] void bad(const std::string& why) const {
    throw FormatError("cannot read the symbolic size '" + s + "': " + why + " at offset " + std::to_string(p));
  }
  void ws() {
    while (p < s.size() && std::isspace(static_cast<unsigned char>(s[p]))) ++p;
  }
  bool eat(char c) {
    ws();
    if (p < s.size() && s[p] == c) {
      ++p;
      return true;
    }
    return false;
  }
  std::string ident() {
    ws();
    size_t b = p;
    while (p < s.size() && (std::isalnum(static_cast<unsigned char>(s[p])) || s[p] == '_')) ++p;
    if (b == p) bad("expected a name");
    return s.substr(b, p - b);
  }
  int64_t integer() {
    ws();
    size_t b = p;
    if (p < s.size() && (s[p] == '-' || s[p] == '+')) ++p;
    while (p < s.size() && std::isdigit(static_cast<unsigned char>(s[p]))) ++p;
    if (b == p) bad("expected an integer");
    try {
      return std::stoll(s.substr(b, p - b));
    } catch (...) {
      bad("integer out of range");
    }
  }
  std::string quoted() {
    ws();
    if (p >= s.size() || (s[p] != '\'' && s[p] != '"')) bad("expected a quoted name");
    char q = s[p++];
    size_t b = p;
    while (p < s.size() && s[p] != q) ++p;
    if (p >= s.size()) bad("unterminated name");
    return s.substr(b, p++ - b);
  }
  // skips keyword arguments (positive=True, integer=True)
  bool keyword() {
    ws();
    size_t save = p;
    if (p < s.size() && std::isalpha(static_cast<unsigned char>(s[p]))) {
      std::string k = ident();
      if (eat('=')) {
        ident();
        return true;
      }
      (void)k;
    }
    p = save;
    return false;
  }
  Dim expr() {
    ws();
    if (p < s.size() && (std::isdigit(static_cast<unsigned char>(s[p])) || s[p] == '-')) return ctx.constant(integer());
    std::string f = ident();
    if (!eat('(')) {
      if (f == "oo" || f == "int_oo") bad("an infinite size");
      return ctx.symbol_named(f);  // plain str() form: a bare symbol name
    }
    if (f == "Symbol") {
      std::string name = quoted();
      while (eat(',')) keyword();
      if (!eat(')')) bad("expected ')'");
      return ctx.symbol_named(name);
    }
    if (f == "Integer") {
      int64_t v = integer();
      if (!eat(')')) bad("expected ')'");
      return ctx.constant(v);
    }
    if (f == "Float") {
      // a float of a size computation (scale_factor=2.0): read only when it is a whole number, so
      // the expression stays an integer and the ToFloat / TruncToInt around it are identities
      std::string text = quoted();
      while (eat(',')) keyword();
      if (!eat(')')) bad("expected ')'");
      double v = 0;
      try {
        v = std::stod(text);
      } catch (...) {
        bad("bad float '" + text + "'");
      }
      if (!(std::fabs(v) < 9.0e15) || v != std::floor(v)) bad("a size computed with the fractional number " + text);
      return ctx.constant(static_cast<int64_t>(v));
    }
    std::vector<Dim> args;
    if (!eat(')')) {
      do {
        if (keyword()) continue;
        args.push_back(expr());
      } while (eat(','));
      if (!eat(')')) bad("expected ')'");
    }
    auto need = [&](size_t k) {
      if (args.size() < k) bad(f + " needs " + std::to_string(k) + " arguments");
    };
    if (f == "ToFloat" || f == "TruncToInt" || f == "FloorToInt" || f == "CeilToInt" || f == "RoundToInt") {
      // every number read is whole (see Float), so these conversions do not change the value
      need(1);
      return args[0];
    }
    if (f == "Add") {
      need(1);
      Dim r = args[0];
      for (size_t i = 1; i < args.size(); ++i) r = ctx.add(r, args[i]);
      return r;
    }
    if (f == "Mul") {
      need(1);
      Dim r = args[0];
      for (size_t i = 1; i < args.size(); ++i) r = ctx.mul(r, args[i]);
      return r;
    }
    if (f == "FloorDiv" || f == "IntTrueDiv") {
      need(2);
      return ctx.floordiv(args[0], args[1]);
    }
    if (f == "CeilDiv" || f == "CleanDiv") {
      need(2);
      return f == "CeilDiv" ? ctx.ceildiv(args[0], args[1]) : ctx.floordiv(args[0], args[1]);
    }
    if (f == "Mod" || f == "PythonMod") {
      need(2);
      return ctx.mod(args[0], args[1]);
    }
    if (f == "Max") {
      need(1);
      Dim r = args[0];
      for (size_t i = 1; i < args.size(); ++i) r = ctx.max(r, args[i]);
      return r;
    }
    if (f == "Min") {
      need(1);
      Dim r = args[0];
      for (size_t i = 1; i < args.size(); ++i) r = ctx.min(r, args[i]);
      return r;
    }
    if (f == "Pow") {
      need(2);
      if (!args[1]->is_const() || args[1]->value() < 0) bad("Pow with a non-constant or negative exponent");
      Dim r = ctx.constant(1);
      for (int64_t i = 0; i < args[1]->value(); ++i) r = ctx.mul(r, args[0]);
      return r;
    }
    bad("unknown function '" + f + "'");
  }
};

}  // namespace

Dim parse_sym_expr(const std::string& s, SymbolContext& ctx) {
  SymParser ps{s, 0, ctx};
  Dim d = ps.expr();
  ps.ws();
  if (ps.p != s.size()) ps.bad("unexpected text");
  return d;
}

// ---- nodes --------------------------------------------------------------------------------------

namespace {
const std::string& tag_of_arg(const json& a) {
  static const std::string none = "as_none";
  if (!a.is_object() || a.empty()) return none;
  return a.begin().key();
}
}  // namespace

// Targets with no effect on the program's values (runtime asserts, metadata checks).
bool ignorable_target(const std::string& target) {
  static const char* const names[] = {
      "torch.ops.aten._assert_scalar.default",
      "torch.ops.aten._assert_tensor_metadata.default",
      "torch.ops.aten.sym_constrain_range_for_size.default",
      "torch.ops.aten.sym_constrain_range.default",
      "torch.ops.aten._assert_async.msg",
      "torch.ops.aten._assert_async.default",
      "torch.ops.aten._functional_assert_async.msg",
      "torch.ops.aten._functional_sym_constrain_range_for_size.default",
      "torch.ops.aten._functional_sym_constrain_range.default",
      "torch.ops.aten._print.default"};
  for (auto* n : names)
    if (target == n) return true;
  return false;
}

// A node whose only outputs are SymInts / SymBools / SymFloats: its value is in sym_*_values.
bool sym_only_node(const json& n) {
  // .item() reads a tensor: its SymInt / SymFloat is computed, not taken from the symbolic sizes
  const std::string target = n.value("target", std::string());
  if (target == "torch.ops.aten.item.default" || target == "torch.ops.aten._local_scalar_dense.default") return false;
  auto it = n.find("outputs");
  if (it == n.end() || it->empty()) return false;
  for (auto& o : *it) {
    const auto& t = tag_of_arg(o);
    if (t != "as_sym_int" && t != "as_sym_bool" && t != "as_sym_float" && t != "as_int" &&
        t != "as_bool" && t != "as_float")
      return false;
  }
  return true;
}

std::pair<const json*, size_t> subgraph_of(const json& n) {
  auto it = n.find("inputs");
  if (it == n.end() || !it->is_array()) return {nullptr, 0};
  for (size_t k = 0; k < it->size(); ++k) {
    const json& in = (*it)[k];
    auto a = in.find("arg");
    if (a == in.end() || !a->is_object()) continue;
    auto g = a->find("as_graph");
    if (g != a->end()) return {&g->at("graph"), k};
  }
  return {nullptr, 0};
}

// ---- op table ------------------------------------------------------------------------------------

void OpTable::on(const std::string& key, ConvertFn fn) {
  if (!fns_.emplace(key, std::move(fn)).second) throw std::logic_error("operator '" + key + "' is registered twice");
}

void OpTable::on(std::initializer_list<const char*> keys, const ConvertFn& fn) {
  for (const char* k : keys) on(k, fn);
}

const ConvertFn* OpTable::find(const std::string& key) const {
  auto it = fns_.find(key);
  return it == fns_.end() ? nullptr : &it->second;
}

const OpTable& op_table() {
  static const OpTable t = [] {
    OpTable t;
    register_elementwise(t);
    register_math(t);
    register_activation(t);
    register_logical(t);
    register_sorting(t);
    register_copy(t);
    register_creation(t);
    register_shape(t);
    register_indexing(t);
    register_padding(t);
    register_reduction(t);
    register_linear(t);
    register_conv(t);
    register_pooling(t);
    register_normalization(t);
    register_sampling(t);
    register_attention(t);
    register_embedding(t);
    register_dropout(t);
    register_signal(t);
    register_rnn(t);
    register_control_flow(t);
    register_complex(t);
    register_random(t);
    return t;
  }();
  return t;
}

std::pair<std::string, std::string> split_target(const std::string& target) {
  std::string t = target.rfind("torch.ops.", 0) == 0 ? target.substr(10) : target;
  if (t.rfind("aten.", 0) != 0) return {t, ""};
  auto dot = t.find('.', 5);
  if (dot == std::string::npos) return {t, ""};
  return {t.substr(0, dot), t.substr(dot + 1)};
}

std::string functional_of(const std::string& packet) {
  if (packet.size() > 6 && packet.back() == '_' && packet[packet.size() - 2] != '_')
    return packet.substr(0, packet.size() - 1);
  return "";
}

const ConvertFn* find_op(const std::string& target, bool* inplace) {
  auto& t = op_table();
  // named references, not a structured binding: C++17 lambdas cannot capture those (GCC allows it)
  const auto parts = split_target(target);
  const std::string& packet = parts.first;
  const std::string& overload = parts.second;
  if (inplace) *inplace = false;
  auto look = [&](const std::string& p) -> const ConvertFn* {
    if (!overload.empty())
      if (const ConvertFn* f = t.find(p + "." + overload)) return f;
    return t.find(p);
  };
  if (auto* f = look(packet)) return f;
  // in-place: aten.add_ -> aten.add
  std::string functional = functional_of(packet);
  if (!functional.empty())
    if (auto* f = look(functional)) {
      if (inplace) *inplace = true;
      return f;
    }
  return nullptr;
}

}  // namespace torch_detail

using namespace torch_detail;

namespace {

std::string sanitize(const std::string& s) {
  std::string r;
  for (char ch : s) r += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') ? ch : '_';
  if (r.empty() || std::isdigit(static_cast<unsigned char>(r[0]))) r = "_" + r;
  return r;
}

// View targets: their output aliases their `self`.
bool is_view_target(const std::string& t) {
  static const char* const names[] = {"aten.slice.", "aten.select.", "aten.view.", "aten.alias.", "aten.narrow.",
                                      "aten.unsqueeze.", "aten.squeeze.", "aten.permute.", "aten.transpose.",
                                      "aten.t.", "aten.expand.", "aten.as_strided.", "aten.reshape.",
                                      "aten.flatten.", "aten.unflatten.", "aten.diagonal.", "aten.detach."};
  std::string s = t.rfind("torch.ops.", 0) == 0 ? t.substr(10) : t;
  for (auto* n : names)
    if (s.rfind(n, 0) == 0) return true;
  return false;
}

}  // namespace

bool torch_detail::skip_node(const json& n) {
  return ignorable_target(n.value("target", std::string())) || sym_only_node(n);
}

namespace {

// One conversion of a serialized ExportedProgram, in steps: the header read, the graph checked,
// names reserved, symbol ranges set, the signature's inputs bound, the nodes converted, the
// outputs bound.
class TorchImport {
 public:
  TorchImport(const json& j, const TorchTensors& weights, const TorchTensors& constants,
              const TorchImportOptions& options)
      : src(options.source), options(options), weights(weights), constants(constants), j(j) {}

  std::shared_ptr<Program> run(TorchImportInfo* info);

 private:
  const std::string& src;
  const TorchImportOptions& options;
  const TorchTensors& weights;
  const TorchTensors& constants;
  const json& j;
  const json* g = nullptr;
  const json* sig = nullptr;
  const json* nodes = nullptr;
  TorchImportInfo inf;
  std::shared_ptr<Function> fn;
  std::unique_ptr<Builder> b;
  std::unique_ptr<Converter> cv;
  std::map<std::string, std::string> buffer_of;  // placeholder -> buffer fqn
  std::set<std::string> mutated;                 // placeholders of the buffers the program mutates
  std::set<std::string> taken;                   // torch's value names: generated names never take one
  std::vector<std::pair<std::string, Var*>> user_inputs;

  Context& ctx() { return fn->ctx(); }
  void read_header();
  void check_supported() const;
  void check_eval_mode() const;
  void find_mutated_buffers();
  void reserve_names();
  void apply_range_constraints();
  const Type* type_of(const std::string& name, const std::string& what, bool as_state);
  std::shared_ptr<const Value> weight(const std::string& fqn, const std::string& placeholder) const;
  void bind_inputs();
  void bind_weight(const json& spec);
  void bind_user_input(const json& spec);
  void apply_input_dims();
  void convert_nodes();
  std::vector<Var*> bind_outputs();
};

// the schema version, dialect and torch version; the graph and its signature
void TorchImport::read_header() {
  if (!j.is_object() || !j.contains("graph_module"))
    throw FormatError(src + ": not a serialized ExportedProgram (no 'graph_module')");
  if (j.contains("schema_version")) {
    inf.schema_major = j["schema_version"].value("major", 0);
    inf.schema_minor = j["schema_version"].value("minor", 0);
    if (inf.schema_major != 8)
      throw FormatError(src + ": schema version " + std::to_string(inf.schema_major) + "." +
                        std::to_string(inf.schema_minor) + " is not supported (milkit reads 8.x)");
  }
  if (j.contains("verifiers") && j["verifiers"].is_array())
    for (auto& v : j["verifiers"]) inf.dialect.push_back(v.get<std::string>());
  else if (j.contains("dialect") && j["dialect"].is_string())
    inf.dialect.push_back(j["dialect"].get<std::string>());
  inf.torch_version = j.value("torch_version", std::string());
  g = &j.at("graph_module").at("graph");
  sig = &j.at("graph_module").at("signature");
  nodes = &g->at("nodes");
}

// every node milkit cannot convert, before any work
void TorchImport::check_supported() const {
  {
    std::vector<std::string> bad, why;
    std::function<void(const json&)> scan = [&](const json& ns) {
      for (auto& n : ns) {
        std::string target = n.value("target", std::string());
        if (auto sg = subgraph_of(n); sg.first) scan(sg.first->at("nodes"));
        if (ignorable_target(target) || sym_only_node(n) || find_op(target)) continue;
        bad.push_back(Converter::label(n));
        why.push_back(torch_unsupported_reason(target));
      }
    };
    scan(*nodes);
    if (!bad.empty()) {
      std::ostringstream m;
      m << src << ": milkit cannot convert " << bad.size() << " node" << (bad.size() > 1 ? "s" : "")
        << " of this program:";
      for (size_t k = 0; k < bad.size(); ++k) m << "\n  " << bad[k] << (why[k].empty() ? "" : ": " + why[k]);
      throw UnsupportedOpsError(m.str(), bad);
    }
  }
}

// a program exported in training mode computes what Core ML cannot (batch statistics); dropout
// in training mode converts to identity, as coremltools converts it
void TorchImport::check_eval_mode() const {
  for (auto& n : *nodes) {
    std::string target = n.value("target", std::string());
    bool bn = target.find("aten.batch_norm.") != std::string::npos ||
              target.find("aten._native_batch_norm_legit_functional.") != std::string::npos ||
              target.find("aten.native_batch_norm.") != std::string::npos ||
              target.find("aten._native_batch_norm_legit.default") != std::string::npos;
    // (batch statistics without running ones, as weight standardization computes, convert)
    if (bn && Converter::has(n, "training") && Converter::arg(n, "training")->value("as_bool", false) &&
        (Converter::has(n, "running_mean") || Converter::has(n, "running_var")))
      throw ValueError(src + ": " + Converter::label(n) + " runs in training mode; call model.eval() before torch.export");
  }
}

// buffers the program mutates: in place (through views) or as buffer_mutation outputs
void TorchImport::find_mutated_buffers() {
  for (auto& spec : sig->at("input_specs")) {
    if (spec.contains("buffer"))
      buffer_of[spec["buffer"].at("arg").at("name").get<std::string>()] = spec["buffer"].at("buffer_name").get<std::string>();
  }
  {
    std::map<std::string, std::string> root;
    auto root_of = [&](const std::string& s) {
      auto it = root.find(s);
      return it == root.end() ? s : it->second;
    };
    std::function<void(const json&)> scan = [&](const json& ns) {
      for (auto& n : ns) {
        std::string target = n.value("target", std::string());
        auto outs = Converter::output_names(n);
        if (auto [sg, pos] = subgraph_of(n); sg) {
          // a subgraph's inputs are the node's operands after it: in-place writes inside it
          // (torch.no_grad regions) mutate what they alias outside
          const json& formals = sg->at("inputs");
          const json& ins = n.at("inputs");
          for (size_t k = 0; k < formals.size() && pos + 1 + k < ins.size(); ++k) {
            const json& f = formals[k];
            const json& a = ins[pos + 1 + k].value("arg", json::object());
            if (f.contains("as_tensor") && a.contains("as_tensor"))
              root[f["as_tensor"].at("name").get<std::string>()] = root_of(a["as_tensor"].at("name").get<std::string>());
          }
          scan(sg->at("nodes"));
          continue;
        }
        std::string self = Converter::tensor_name(n, "self");
        if (self.empty()) self = Converter::tensor_name(n, "input");
        if (self.empty()) continue;
        if (is_view_target(target) && !outs.empty() && !outs[0].empty()) root[outs[0]] = root_of(self);
        bool inplace = false;
        if (find_op(target, &inplace) && inplace) {
          mutated.insert(root_of(self));
          if (!outs.empty() && !outs[0].empty()) root[outs[0]] = root_of(self);
        }
      }
    };
    scan(*nodes);
  }
  for (auto& spec : sig->at("output_specs"))
    if (spec.contains("buffer_mutation")) {
      std::string bname = spec["buffer_mutation"].at("buffer_name").get<std::string>();
      for (auto& kv : buffer_of)
        if (kv.second == bname) mutated.insert(kv.first);
    }
}

// torch's value names are reserved: generated names never take one
void TorchImport::reserve_names() {
  for (auto& spec : sig->at("input_specs"))
    if (spec.contains("user_input") && spec["user_input"].at("arg").contains("as_tensor")) {
      std::string un = spec["user_input"]["arg"]["as_tensor"].value("name", std::string());
      taken.insert(un);
      ctx().reserve_name(un);
    }
  std::function<void(const json&)> reserve = [&](const json& ns) {
    for (auto& n : ns) {
      for (auto& o : Converter::output_names(n))
        if (!o.empty()) {
          ctx().reserve_name(o);
          taken.insert(o);
        }
      if (auto sg = subgraph_of(n); sg.first) reserve(sg.first->at("nodes"));
    }
  };
  reserve(*nodes);
}

// range constraints -> symbol ranges
void TorchImport::apply_range_constraints() {
  if (j.contains("range_constraints") && j["range_constraints"].is_object()) {
    for (auto& [name, rc] : j["range_constraints"].items()) {
      Dim d;
      try {
        d = parse_sym_expr(name, ctx());
      } catch (const FormatError&) {
        continue;
      }
      if (d->kind() != Expr::Kind::Symbol) continue;
      auto big = [](const json& v, int64_t def) -> int64_t {
        if (v.is_number_integer()) return v.get<int64_t>();
        return def;  // "int_oo" / huge
      };
      int64_t lo = std::max<int64_t>(1, big(rc.value("min_val", json(1)), 1));
      int64_t hi = big(rc.value("max_val", json(nullptr)), kPosInf);
      if (hi >= static_cast<int64_t>(1) << 62) hi = kPosInf;
      if (hi < lo) hi = lo;
      d->symbol_ptr()->set_range(lo, hi);
    }
  }
}

const Type* TorchImport::type_of(const std::string& name, const std::string& what, bool as_state) {
  const json& tvals = g->at("tensor_values");
  auto it = tvals.find(name);
  if (it == tvals.end()) throw FormatError(src + ": " + what + " '" + name + "' has no entry in tensor_values");
  int st = it->value("dtype", 0);
  auto dt = mil_dtype(st);
  if (!dt) throw ValueError(src + ": " + what + " '" + name + "' has dtype " + scalar_type_name(st) + ", which Core ML cannot hold");
  if (as_state && !is_float(*dt)) throw ValueError(src + ": buffer '" + name + "' is mutated but is not a float tensor; Core ML states are fp16");
  std::vector<Dim> dims;
  for (auto& sz : it->at("sizes")) {
    if (sz.contains("as_int")) dims.push_back(ctx().constant(sz["as_int"].get<int64_t>()));
    else dims.push_back(parse_sym_expr(sz.at("as_expr").at("expr_str").get<std::string>(), ctx()));
  }
  return ctx().tensor(*dt, dims);
}

std::shared_ptr<const Value> TorchImport::weight(const std::string& fqn, const std::string& placeholder) const {
  auto it = weights.find(fqn);
  if (it != weights.end()) return it->second;
  it = constants.find(fqn);
  if (it != constants.end()) return it->second;
  throw FormatError(src + ": the weight '" + fqn + "' (input '" + placeholder + "') is missing from the program's weights");
}

// the signature's inputs: user inputs first (the function's inputs in the user's order), then
// weights and states
void TorchImport::bind_inputs() {
  std::vector<const json*> specs;
  for (auto& spec : sig->at("input_specs"))
    if (spec.contains("user_input")) specs.push_back(&spec);
  for (auto& spec : sig->at("input_specs"))
    if (!spec.contains("user_input")) specs.push_back(&spec);
  for (const json* sp : specs) {
    const json& spec = *sp;
    if (spec.contains("parameter") || spec.contains("buffer") || spec.contains("tensor_constant")) {
      bind_weight(spec);
    } else if (spec.contains("user_input")) {
      bind_user_input(spec);
    } else if (spec.contains("token")) {
      continue;
    } else if (spec.contains("constant_input")) {
      continue;  // a non-tensor argument torch specialized (use_cache=False): its value is in the graph
    } else {
      throw ValueError(src + ": input kind " + spec.begin().key() + " is not supported (custom objects cannot be converted)");
    }
  }
}

// a parameter, buffer or tensor constant: a const, or a state when the program mutates it
void TorchImport::bind_weight(const json& spec) {
  std::string kind = spec.contains("parameter") ? "parameter" : spec.contains("buffer") ? "buffer" : "tensor_constant";
  const json& s = spec[kind];
  std::string ph = s.at("arg").at("name").get<std::string>();
  std::string fqn = s.at(kind == "parameter" ? "parameter_name" : kind == "buffer" ? "buffer_name" : "tensor_constant_name").get<std::string>();
  auto val = weight(fqn, ph);
  const json& tv = g->at("tensor_values");
  if (tv.contains(ph) && is_complex_type(tv[ph].value("dtype", 0))) {
    if (mutated.count(ph))
      throw ValueError(src + ": the program mutates complex buffer '" + fqn + "'; Core ML states hold real tensors");
    bind_complex_const(*cv, ph, *val);
    return;
  }
  if (mutated.count(ph)) {
    if (options.target < Target::iOS18)
      throw ValueError(src + ": the program mutates buffer '" + fqn +
                       "'; mutated buffers become Core ML states, which need minimum_deployment_target iOS18 or later");
    // Core ML states are fp16 (iOS18): an fp32 / bf16 buffer is stored as fp16, read through a
    // cast to its compute dtype and written through a cast to fp16, as coremltools does; under
    // FLOAT16 the fp16 passes remove the casts.
    const Type* t = type_of(ph, "buffer", true);
    std::string sname = sanitize(fqn);  // named after the buffer, as coremltools does
    if (taken.count(sname)) sname = ctx().free_name(sname);
    taken.insert(sname);
    ctx().reserve_name(sname);
    Var* st = fn->add_input(sname, ctx().state(ctx().tensor(DataType::Float16, t->shape())));
    cv->state_inputs[ph] = st;
    Var* r = cv->op("read_state", {Converter::a("input", st)});
    if (t->dtype() != DataType::Float16) r = cv->cast(r, t->dtype());
    cv->vars[ph] = r;
    inf.state_names.push_back(fqn);
  } else {
    cv->consts[ph] = val;
    cv->const_names[ph] = sanitize(fqn);
  }
}

void TorchImport::bind_user_input(const json& spec) {
  const json& a = spec["user_input"].at("arg");
  if (!a.contains("as_tensor"))
    throw ValueError(src + ": user input " + a.dump() + " is not a tensor; Core ML inputs are tensors");
  std::string name = a["as_tensor"].at("name").get<std::string>();
  const Type* t = type_of(name, "input", false);
  auto fix = options.input_dims.find(name);
  if (fix == options.input_dims.end()) fix = options.input_dims.find("#" + std::to_string(user_inputs.size()));
  if (fix != options.input_dims.end()) {
    if (t->rank() != static_cast<int>(fix->second.size()))
      throw ValueError(src + ": input '" + name + "' has rank " + std::to_string(t->rank()) + ", the shape given for it has " +
                       std::to_string(fix->second.size()) + " dims");
    std::vector<Dim> ds = t->shape();
    for (size_t i = 0; i < ds.size(); ++i) {
      int64_t d = fix->second[i];
      if (d < 0) continue;
      if (ds[i]->is_const() && ds[i]->value() != d)
        throw ValueError(src + ": input '" + name + "' dim " + std::to_string(i) + " is " + std::to_string(ds[i]->value()) +
                         " in the program, " + std::to_string(d) + " was given");
      if (ds[i]->kind() == Expr::Kind::Symbol) {
        auto* sym = ds[i]->symbol();
        if (d < sym->lo() || d > sym->hi())
          throw ValueError(src + ": input '" + name + "' dim " + std::to_string(i) + " is " + std::to_string(d) +
                           ", outside the range [" + std::to_string(sym->lo()) + ", " +
                           (sym->hi() == kPosInf ? std::string("inf") : std::to_string(sym->hi())) + "] the program was exported for");
      }
      ds[i] = ctx().constant(d);
    }
    t = ctx().tensor(t->dtype(), ds);
  }
  Var* in = fn->add_input(name, t);
  cv->vars[name] = in;
  user_inputs.push_back({name, in});
  inf.input_names.push_back(name);
  cv->note_sources(in);
}

// the shapes given for inputs name inputs of the program; a fixed dim's symbol gets its value
void TorchImport::apply_input_dims() {
  const json& tvals = g->at("tensor_values");
  for (auto& kv : options.input_dims) {
    bool positional = !kv.first.empty() && kv.first[0] == '#';
    if (positional ? std::stoul(kv.first.substr(1)) >= user_inputs.size()
                   : std::none_of(user_inputs.begin(), user_inputs.end(), [&](auto& p) { return p.first == kv.first; }))
      throw ValueError(src + ": a shape is given for " + (positional ? "input " + kv.first : "'" + kv.first + "'") +
                       ", which is not an input of the program (it has " + std::to_string(user_inputs.size()) + ")");
  }
  // a fixed dim's symbol may still be read by sym_size nodes: its value is the constant now
  for (auto& kv : options.input_dims) {
    std::string iname = kv.first;
    if (!iname.empty() && iname[0] == '#') iname = user_inputs[std::stoul(iname.substr(1))].first;
    auto it = tvals.find(iname);
    if (it == tvals.end()) continue;
    size_t k = 0;
    for (auto& sz : it->at("sizes")) {
      if (k < kv.second.size() && kv.second[k] >= 0 && sz.contains("as_expr")) {
        Dim d = parse_sym_expr(sz["as_expr"].at("expr_str").get<std::string>(), ctx());
        if (d->kind() == Expr::Kind::Symbol) d->symbol_ptr()->set_range(kv.second[k], kv.second[k]);
      }
      ++k;
    }
  }
}

// the nodes, in the graph's (topological) order
void TorchImport::convert_nodes() {
  for (auto& n : *nodes) {
    std::string target = n.value("target", std::string());
    if (ignorable_target(target) || sym_only_node(n)) continue;
    cv->convert_node(n);
  }
}

// outputs: user outputs; buffer mutations update their states
std::vector<Var*> TorchImport::bind_outputs() {
  std::vector<Var*> outs;
  for (auto& spec : sig->at("output_specs")) {
    if (spec.contains("user_output")) {
      const json& a = spec["user_output"].at("arg");
      if (!a.contains("as_tensor"))
        throw ValueError(src + ": output " + a.dump() + " is not a tensor; Core ML outputs are tensors");
      std::string name = a["as_tensor"].at("name").get<std::string>();
      if (cv->complex_vars.count(name))
        throw ValueError(src + ": output '" + name +
                         "' is a complex tensor; Core ML has no complex multiarrays (return torch.view_as_real of it, "
                         "its real and imaginary parts on a last axis of 2)");
      Var* v = cv->var(name);
      bool dup = std::find(outs.begin(), outs.end(), v) != outs.end();
      if (!v->op() || dup || v->op()->op_type() == "const" || v->op()->op_type() == "read_state" ||
          v->op()->op_type() == "coreml_update_state") {
        v = cv->op("identity", {Converter::a("x", v)});
        v->set_name(ctx().free_name(name));
      }
      outs.push_back(v);
      inf.output_names.push_back(name);
    } else if (spec.contains("buffer_mutation")) {
      const json& s = spec["buffer_mutation"];
      std::string bname = s.at("buffer_name").get<std::string>();
      std::string value = s.at("arg").at("name").get<std::string>();
      for (auto& kv : buffer_of)
        if (kv.second == bname) cv->assign(kv.first, cv->var(value));
    } else if (spec.contains("user_input_mutation") || spec.contains("token")) {
      continue;  // Core ML inputs are immutable; the mutation is not visible to the caller
    } else {
      throw ValueError(src + ": output kind " + spec.begin().key() + " is not supported");
    }
  }
  return outs;
}

std::shared_ptr<Program> TorchImport::run(TorchImportInfo* info) {
  read_header();
  check_supported();
  check_eval_mode();
  find_mutated_buffers();
  fn = std::make_shared<Function>(options.target);
  reserve_names();
  b = std::make_unique<Builder>(*fn);
  cv = std::make_unique<Converter>(*b, *g, src);
  apply_range_constraints();
  bind_inputs();
  apply_input_dims();
  convert_nodes();
  std::vector<Var*> outs = bind_outputs();
  if (outs.empty()) throw ValueError(src + ": the program has no tensor outputs");
  fn->body().set_outputs(outs);
  auto prog = std::make_shared<Program>();
  prog->add_function("main", fn);
  if (info) *info = std::move(inf);
  return prog;
}

}  // namespace

std::shared_ptr<Program> import_torch_export(std::string_view text, const TorchTensors& weights,
                                             const TorchTensors& constants, const TorchImportOptions& options,
                                             TorchImportInfo* info) {
  const std::string& src = options.source;
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw FormatError(src + ": the serialized program is not valid JSON (" + e.what() + ")");
  }
  try {
    return TorchImport(j, weights, constants, options).run(info);
  } catch (const json::exception& e) {
    throw FormatError(src + ": the serialized program is malformed (" + e.what() + ")");
  }
}
std::shared_ptr<Program> import_pt2_file(const std::string& path, TorchImportOptions options, TorchImportInfo* info) {
  Pt2Archive ar = read_pt2(path);
  if (options.source == "<ExportedProgram>") options.source = path;
  TorchTensors w, c;
  for (auto& kv : ar.weights) w[kv.first] = kv.second.value;
  for (auto& kv : ar.constants) c[kv.first] = kv.second.value;
  return import_torch_export(ar.model_json, w, c, options, info);
}

std::vector<std::string> torch_supported_ops() {
  std::vector<std::string> r;
  for (auto& kv : op_table()) r.push_back(kv.first);
  // nodes whose outputs are only SymInts take their values from the program's symbolic sizes
  for (const char* sym : {"aten.sym_size", "aten.sym_numel", "aten.sym_stride", "aten.sym_storage_offset",
                          "aten.sym_is_contiguous"})
    if (!op_table().find(sym)) r.push_back(sym);
  std::sort(r.begin(), r.end());
  return r;
}

}  // namespace milkit
