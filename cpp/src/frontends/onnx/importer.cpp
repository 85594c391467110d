// The ONNX importer: ModelProto parsing and checks, graph inputs and outputs with symbolic dims,
// topological order, the conversion context, local functions, and the unsupported-op report.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "converter.h"
#include "milkit/types/error.h"

namespace milkit {
namespace onnx_detail {

using onnx::AttributeProto;
using onnx::NodeProto;

std::string node_label(const NodeProto& n) {
  std::string op =
      n.domain().empty() || n.domain() == "ai.onnx" ? n.op_type() : n.domain() + "." + n.op_type();
  if (!n.name().empty()) return "node '" + n.name() + "' (" + op + ")";
  if (n.output_size() && !n.output(0).empty())
    return op + " node with output '" + n.output(0) + "'";
  return op + " node";
}

std::optional<int64_t> newest_known_opset(const std::string& domain) {
  static const std::unordered_map<std::string, int64_t> newest = {
      {"", 28}, {"ai.onnx.ml", 5}, {"ai.onnx.preview", 1}, {"ai.onnx.preview.training", 1}};
  auto it = newest.find(canonical_domain(domain));
  if (it == newest.end()) return std::nullopt;
  return it->second;
}

std::string OpTable::key(const std::string& domain, const std::string& op) {
  std::string d = canonical_domain(domain);
  return d.empty() ? op : d + ":" + op;
}

void OpTable::on(const std::string& domain, const std::string& op, int since, ConvertFn fn) {
  auto& v = entries_[key(domain, op)];
  auto at = std::find_if(v.begin(), v.end(), [&](const Entry& e) { return e.since >= since; });
  if (at != v.end() && at->since == since)
    throw Error("ONNX operator table: " + key(domain, op) + " is registered twice at opset " +
                std::to_string(since));
  v.insert(at, Entry{since, std::move(fn)});
}

const ConvertFn* OpTable::find(const std::string& domain, const std::string& op,
                               int64_t opset) const {
  auto it = entries_.find(key(domain, op));
  if (it == entries_.end()) return nullptr;
  const ConvertFn* r = nullptr;
  for (auto& e : it->second)
    if (e.since <= opset) r = &e.fn;
  return r;
}

bool OpTable::has(const std::string& domain, const std::string& op) const {
  return entries_.count(key(domain, op)) > 0;
}

std::vector<std::string> OpTable::default_domain_ops() const {
  std::vector<std::string> r;
  for (auto& kv : entries_)
    if (kv.first.find(':') == std::string::npos) r.push_back(kv.first);
  std::sort(r.begin(), r.end());
  return r;
}

const OpTable& op_table() {
  static const OpTable t = [] {
    OpTable t;
    register_activation(t);
    register_attention(t);
    register_cast(t);
    register_control_flow(t);
    register_conv(t);
    register_creation(t);
    register_detection(t);
    register_indexing(t);
    register_logical(t);
    register_loss(t);
    register_math(t);
    register_ml(t);
    register_normalization(t);
    register_optional(t);
    register_pooling(t);
    register_quantization(t);
    register_reduction(t);
    register_rnn(t);
    register_sampling(t);
    register_shape(t);
    register_signal(t);
    register_text(t);
    register_training(t);
    return t;
  }();
  return t;
}

namespace {

// An integer constant with its values clamped to int32's range.
Value saturate_int32(const Value& v) {
  if (v.dtype() != DataType::Int64 && v.dtype() != DataType::UInt64 &&
      v.dtype() != DataType::UInt32)
    return narrow(v, "");
  auto ints = v.to_ints();
  for (auto& i : ints) {
    if (v.dtype() == DataType::UInt64 && i < 0) i = INT32_MAX;  // beyond int64's range
    i = std::clamp<int64_t>(i, INT32_MIN, INT32_MAX);
  }
  return Value::from_ints(DataType::Int32, v.shape(), ints);
}

// Adds to `out` the values of `g` that every reader (in `g` or in its subgraphs: ONNX names are
// unique across them) takes as Slice starts or ends, directly or through ops that only move
// integers around.
void collect_slice_bounds(const onnx::GraphProto& g, std::unordered_set<std::string>& out) {
  std::unordered_map<std::string, std::vector<std::pair<const NodeProto*, int>>> readers;
  std::unordered_set<std::string> outputs;  // of the graph and of subgraphs: read elsewhere
  std::function<void(const onnx::GraphProto&)> walk = [&](const onnx::GraphProto& gr) {
    for (auto& o : gr.output()) outputs.insert(o.name());
    for (auto& nd : gr.node()) {
      for (int i = 0; i < nd.input_size(); ++i) readers[nd.input(i)].push_back({&nd, i});
      for (auto& a : nd.attribute()) {
        if (a.has_g()) walk(a.g());
        for (auto& sg : a.graphs()) walk(sg);
      }
    }
  };
  walk(g);
  std::unordered_map<std::string, bool> memo;
  std::function<bool(const std::string&)> bound = [&](const std::string& name) -> bool {
    auto m = memo.find(name);
    if (m != memo.end()) return m->second;
    memo[name] = false;  // a cycle (malformed) is not a bound
    auto it = readers.find(name);
    bool ok = !outputs.count(name) && it != readers.end();
    for (size_t k = 0; ok && it != readers.end() && k < it->second.size(); ++k) {
      const NodeProto& nd = *it->second[k].first;
      int i = it->second[k].second;
      std::string op = nd.domain().empty() || nd.domain() == "ai.onnx" ? nd.op_type() : "";
      if (op == "Slice") {
        ok = i == 1 || i == 2;
        continue;
      }
      bool moves = op == "Concat" || op == "Identity" ||
                   ((op == "Unsqueeze" || op == "Squeeze" || op == "Reshape") && i == 0);
      ok = moves;
      for (int o = 0; ok && o < nd.output_size(); ++o) ok = bound(nd.output(o));
    }
    memo[name] = ok;
    if (ok) out.insert(name);
    return ok;
  };
  for (auto& r : readers) bound(r.first);
}

}  // namespace

Converter::Converter(Builder& b_, int64_t opset_, ExternalData& ext_,
                     std::shared_ptr<const void> keep_,
                     const std::unordered_map<std::string, const onnx::FunctionProto*>& fns)
    : b(b_), em(b_), opset(opset_), ext(ext_), keep(std::move(keep_)), functions(fns) {}

int64_t Converter::opset_of(const std::string& domain) const {
  auto it = opsets.find(canonical_domain(domain));
  return it != opsets.end() ? it->second : INT64_MAX;
}

void Converter::fail(const NodeProto& n, const std::string& msg) const {
  throw ValueError("ONNX " + node_label(n) + ": " + msg);
}

bool Converter::defined(const std::string& name) const {
  for (Scope* s = scope; s; s = s->parent)
    if (s->vars.count(name) || s->consts.count(name)) return true;
  return false;
}

Var* Converter::var(const std::string& name) {
  for (Scope* s = scope; s; s = s->parent) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
    auto ct = s->consts.find(name);
    if (ct != s->consts.end()) {
      // materialize in the outermost block that can see it: consts are hoisted by passes anyway
      Value v = slice_bounds.count(name) ? saturate_int32(*ct->second)
                                         : narrow(*ct->second, "tensor '" + name + "'");
      Var* out = b.add_const(std::make_shared<const Value>(std::move(v)), "");
      scope->vars[name] = out;
      bound_.insert(out);
      return out;
    }
  }
  throw FormatError("ONNX value '" + name + "' is used but never defined");
}

Var* Converter::in(const NodeProto& n, int i) {
  if (!has(n, i)) fail(n, "input " + std::to_string(i) + " is required");
  return var(n.input(i));
}

const Value* Converter::value(const NodeProto& n, int i) {
  if (!has(n, i)) return nullptr;
  const std::string& name = n.input(i);
  for (Scope* s = scope; s; s = s->parent) {
    auto ct = s->consts.find(name);
    if (ct != s->consts.end()) return ct->second.get();
    auto it = s->vars.find(name);
    if (it != s->vars.end()) {
      auto& v = it->second->value();
      return v && !v->is_symbolic() ? v.get() : nullptr;
    }
  }
  return nullptr;
}

int Converter::elem_type(const NodeProto& n, int i) {
  if (!has(n, i)) return 0;
  auto it = declared_types.find(n.input(i));
  if (it != declared_types.end()) return it->second;
  for (Scope* s = scope; s; s = s->parent) {
    auto ct = s->consts.find(n.input(i));
    if (ct == s->consts.end()) continue;
    switch (ct->second->dtype()) {
      case DataType::Float32:
        return onnx::TensorProto::FLOAT;
      case DataType::Float16:
        return onnx::TensorProto::FLOAT16;
      case DataType::Float64:
        return onnx::TensorProto::DOUBLE;
      case DataType::Int8:
        return onnx::TensorProto::INT8;
      case DataType::UInt8:
        return onnx::TensorProto::UINT8;
      case DataType::Int16:
        return onnx::TensorProto::INT16;
      case DataType::UInt16:
        return onnx::TensorProto::UINT16;
      case DataType::Int32:
        return onnx::TensorProto::INT32;
      case DataType::UInt32:
        return onnx::TensorProto::UINT32;
      case DataType::Int64:
        return onnx::TensorProto::INT64;
      case DataType::Bool:
        return onnx::TensorProto::BOOL;
      default:
        return 0;
    }
  }
  return 0;
}

std::vector<int64_t> Converter::ints(const NodeProto& n, int i, const char* what) {
  const Value* v = value(n, i);
  if (!v)
    fail(n, std::string(what) + " (input '" + (has(n, i) ? n.input(i) : "") +
                "') must be known at conversion time");
  return v->to_ints();
}

std::vector<double> Converter::doubles(const NodeProto& n, int i, const char* what) {
  const Value* v = value(n, i);
  if (!v)
    fail(n, std::string(what) + " (input '" + (has(n, i) ? n.input(i) : "") +
                "') must be known at conversion time");
  return v->to_doubles();
}

const AttributeProto* Converter::find_attr(const NodeProto& n, const std::string& name) {
  for (auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

const AttributeProto* Converter::typed_attr(const NodeProto& n, const std::string& name,
                                            AttributeProto::AttributeType t) {
  auto* a = find_attr(n, name);
  if (!a || a->type() == t || a->type() == AttributeProto::UNDEFINED) return a;
  throw FormatError("ONNX " + node_label(n) + ": attribute '" + name + "' is of type " +
                    AttributeProto::AttributeType_Name(a->type()) + ", " +
                    AttributeProto::AttributeType_Name(t) + " expected");
}

int64_t Converter::attr_int(const NodeProto& n, const std::string& name, int64_t def) {
  auto* a = typed_attr(n, name, AttributeProto::INT);
  return a ? a->i() : def;
}

float Converter::attr_float(const NodeProto& n, const std::string& name, float def) {
  auto* a = typed_attr(n, name, AttributeProto::FLOAT);
  return a ? a->f() : def;
}

std::string Converter::attr_string(const NodeProto& n, const std::string& name,
                                   const std::string& def) {
  auto* a = typed_attr(n, name, AttributeProto::STRING);
  return a ? a->s() : def;
}

std::vector<int64_t> Converter::attr_ints(const NodeProto& n, const std::string& name,
                                          std::vector<int64_t> def) {
  auto* a = typed_attr(n, name, AttributeProto::INTS);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : def;
}

std::vector<float> Converter::attr_floats(const NodeProto& n, const std::string& name,
                                          std::vector<float> def) {
  auto* a = typed_attr(n, name, AttributeProto::FLOATS);
  return a ? std::vector<float>(a->floats().begin(), a->floats().end()) : def;
}

std::vector<std::string> Converter::attr_strings(const NodeProto& n, const std::string& name) {
  auto* a = typed_attr(n, name, AttributeProto::STRINGS);
  return a ? std::vector<std::string>(a->strings().begin(), a->strings().end())
           : std::vector<std::string>{};
}

const onnx::TensorProto* Converter::attr_tensor(const NodeProto& n, const std::string& name) {
  auto* a = typed_attr(n, name, AttributeProto::TENSOR);
  return a && a->has_t() ? &a->t() : nullptr;
}

const onnx::GraphProto* Converter::attr_graph(const NodeProto& n, const std::string& name) {
  auto* a = typed_attr(n, name, AttributeProto::GRAPH);
  return a && a->has_g() ? &a->g() : nullptr;
}

void Converter::out(const NodeProto& n, int i, Var* v) {
  if (!wants(n, i)) return;
  // name the var after the ONNX value when this node made it
  if (!bound_.count(v) && v->op() && !v->input_of()) v->set_name(n.output(i));
  bound_.insert(v);
  scope->vars[n.output(i)] = v;
}

void Converter::out_const(const NodeProto& n, int i, Value v) {
  if (!wants(n, i)) return;
  scope->consts[n.output(i)] = std::make_shared<const Value>(std::move(v));
}

void Converter::add_initializers(const onnx::GraphProto& g) {
  for (auto& t : g.initializer()) {
    if (t.name().empty())
      throw FormatError("ONNX graph '" + g.name() + "' has an initializer without a name");
    scope->consts[t.name()] = std::make_shared<const Value>(
        decode_tensor(t, ext, keep, "initializer '" + t.name() + "'"));
  }
  if (g.sparse_initializer_size())
    throw ValueError("ONNX graph '" + g.name() +
                     "': sparse initializers are not supported (first: '" +
                     g.sparse_initializer(0).values().name() + "')");
}

void Converter::convert_nodes(const google::protobuf::RepeatedPtrField<NodeProto>& nodes,
                              const std::string& where) {
  // topological order (ONNX requires it; exporters sometimes don't): Kahn over names produced here
  size_t n = static_cast<size_t>(nodes.size());
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < n; ++i)
    for (auto& o : nodes[static_cast<int>(i)].output())
      if (!o.empty()) {
        if (producer.count(o) || defined(o))
          throw FormatError("ONNX " + where + ": value '" + o + "' is produced twice (by " +
                            node_label(nodes[static_cast<int>(i)]) + ")");
        producer[o] = i;
      }
  // names a node reads, including those its subgraphs read from the outer scope
  auto reads = [&](const NodeProto& nd) {
    std::vector<std::string> r(nd.input().begin(), nd.input().end());
    std::function<void(const onnx::GraphProto&)> walk = [&](const onnx::GraphProto& g) {
      for (auto& sn : g.node()) {
        for (auto& s : sn.input()) r.push_back(s);
        for (auto& a : sn.attribute()) {
          if (a.has_g()) walk(a.g());
          for (auto& sg : a.graphs()) walk(sg);
        }
      }
    };
    for (auto& a : nd.attribute()) {
      if (a.has_g()) walk(a.g());
      for (auto& sg : a.graphs()) walk(sg);
    }
    return r;
  };
  std::vector<std::vector<size_t>> users(n);
  std::vector<size_t> pending(n, 0);
  for (size_t i = 0; i < n; ++i) {
    std::set<size_t> deps;
    auto& nd = nodes[static_cast<int>(i)];
    size_t direct = static_cast<size_t>(nd.input_size());
    auto r = reads(nd);
    for (size_t k = 0; k < r.size(); ++k) {
      auto& s = r[k];
      if (s.empty()) continue;
      auto it = producer.find(s);
      if (it != producer.end()) {
        if (it->second != i) deps.insert(it->second);
      } else if (k < direct && !defined(s)) {
        throw FormatError("ONNX " + where + ": " + node_label(nd) + " reads '" + s +
                          "', which is not defined");
      }
    }
    pending[i] = deps.size();
    for (size_t d : deps) users[d].push_back(i);
  }
  std::vector<size_t> ready, order;
  for (size_t i = 0; i < n; ++i)
    if (!pending[i]) ready.push_back(i);
  std::reverse(ready.begin(), ready.end());
  while (!ready.empty()) {
    size_t i = ready.back();
    ready.pop_back();
    order.push_back(i);
    std::vector<size_t> next;
    for (size_t u : users[i])
      if (--pending[u] == 0) next.push_back(u);
    std::sort(next.rbegin(), next.rend());
    ready.insert(ready.end(), next.begin(), next.end());
    std::sort(ready.rbegin(), ready.rend());
  }
  if (order.size() != n) {
    for (size_t i = 0; i < n; ++i)
      if (pending[i])
        throw FormatError("ONNX " + where + ": the graph has a cycle through " +
                          node_label(nodes[static_cast<int>(i)]));
  }
  for (size_t i : order) convert_node(nodes[static_cast<int>(i)]);
}

namespace {

// Inlines a call of a model-local function: its inputs, attributes and outputs renamed.
void inline_function(Converter& cv, const NodeProto& call, const onnx::FunctionProto& f) {
  Scope inner;
  inner.parent = nullptr;
  // the function body sees only its own inputs (functions have no outer scope)
  for (int i = 0; i < f.input_size(); ++i) {
    if (i < call.input_size() && !call.input(i).empty()) inner.vars[f.input(i)] = cv.in(call, i);
  }
  std::map<std::string, const AttributeProto*> attrs;
  for (auto& a : call.attribute()) attrs[a.name()] = &a;
  for (auto& a : f.attribute_proto())
    if (!attrs.count(a.name())) attrs[a.name()] = &a;
  // resolve ref_attr_name attributes in a copy of the body
  onnx::FunctionProto body = f;
  for (auto& nd : *body.mutable_node()) {
    auto* as = nd.mutable_attribute();
    for (int k = as->size() - 1; k >= 0; --k) {
      auto& at = (*as)[k];
      if (at.ref_attr_name().empty()) continue;
      auto it = attrs.find(at.ref_attr_name());
      if (it == attrs.end()) {
        as->DeleteSubrange(k, 1);
      } else {
        std::string name = at.name();
        at = *it->second;
        at.set_name(name);
      }
    }
  }
  Scope* saved = cv.scope;
  cv.scope = &inner;
  cv.convert_nodes(body.node(), "function '" + f.name() + "'");
  std::vector<Var*> outs;
  for (int i = 0; i < f.output_size(); ++i) outs.push_back(cv.var(f.output(i)));
  cv.scope = saved;
  for (int i = 0; i < call.output_size() && i < static_cast<int>(outs.size()); ++i)
    cv.out(call, i, outs[static_cast<size_t>(i)]);
}

}  // namespace

void Converter::convert_node(const NodeProto& n) {
  const std::string dom = canonical_domain(n.domain());
  auto& t = op_table();
  // a model-local function of another domain takes precedence; of the default domain, an operator
  auto fit = functions.find(dom + "\n" + n.op_type());
  bool local = fit != functions.end() && (!dom.empty() || !t.has(dom, n.op_type()));
  if (local) return inline_function(*this, n, *fit->second);
  if (!dom.empty() && !t.has(dom, n.op_type())) fail(n, "domain '" + dom + "' is not supported");
  const ConvertFn* fn = t.find(dom, n.op_type(), opset_of(dom));
  if (!fn && t.has(dom, n.op_type()))
    fail(n, "operator '" + n.op_type() + "' is not supported at opset " +
                std::to_string(opset_of(dom)) + " (milkit converts it from a later opset)");
  if (!fn) fail(n, "operator '" + n.op_type() + "' is not supported");
  try {
    (*fn)(*this, n);
  } catch (const FormatError&) {
    throw;
  } catch (const TypeError& e) {
    std::string m = e.what();
    if (m.rfind("ONNX ", 0) == 0) throw;
    throw TypeError("ONNX " + node_label(n) + ": " + m);
  } catch (const IndexError& e) {
    std::string m = e.what();
    if (m.rfind("ONNX ", 0) == 0) throw;
    throw IndexError("ONNX " + node_label(n) + ": " + m);
  } catch (const ValueError& e) {
    std::string m = e.what();
    if (m.rfind("ONNX ", 0) == 0) throw;
    throw ValueError("ONNX " + node_label(n) + ": " + m);
  }
  for (int i = 0; i < n.output_size(); ++i)
    if (!n.output(i).empty() && !defined(n.output(i)))
      fail(n, "output " + std::to_string(i) + " ('" + n.output(i) +
                  "') is not produced by milkit's conversion");
}

namespace {

using FnMap = std::unordered_map<std::string, const onnx::FunctionProto*>;

using Opsets = std::unordered_map<std::string, int64_t>;

// Every node (subgraphs and local functions included) whose operator milkit cannot express.
void collect_unsupported(const google::protobuf::RepeatedPtrField<NodeProto>& nodes,
                         const FnMap& fns, const Converter& cv, std::vector<std::string>& bad,
                         std::set<const onnx::FunctionProto*>& seen) {
  auto& t = op_table();
  for (auto& n : nodes) {
    std::string dom = canonical_domain(n.domain());
    // a node of the default domain needs the model's opset of it to pick its semantics (a model
    // whose nodes are all of other domains may import none, as ONNX's own test models do)
    if (dom.empty() && !cv.opsets.count(""))
      throw FormatError("ONNX " + node_label(n) +
                        ": the model imports no opset of the default domain ('' / 'ai.onnx')");
    auto ft = fns.find(dom + "\n" + n.op_type());
    if (ft != fns.end() && !(dom.empty() && t.has(dom, n.op_type()))) {
      if (seen.insert(ft->second).second)
        collect_unsupported(ft->second->node(), fns, cv, bad, seen);
    } else if (!t.find(dom, n.op_type(), cv.opset_of(dom))) {
      bad.push_back(node_label(n) + (dom.empty() ? "" : " in domain '" + n.domain() + "'") +
                    (t.has(dom, n.op_type()) ? " (converted from a later opset)" : ""));
    }
    for (auto& a : n.attribute()) {
      if (a.has_g()) collect_unsupported(a.g().node(), fns, cv, bad, seen);
      for (auto& g : a.graphs()) collect_unsupported(g.node(), fns, cv, bad, seen);
    }
  }
}

// UnsupportedOpsError listing every node milkit cannot convert, if any.
void refuse_unsupported(const onnx::GraphProto& g, const FnMap& fns, const Converter& cv,
                        const std::string& src) {
  std::vector<std::string> bad;
  std::set<const onnx::FunctionProto*> seen;
  collect_unsupported(g.node(), fns, cv, bad, seen);
  if (bad.empty()) return;
  std::ostringstream m;
  m << src << ": milkit cannot convert " << bad.size() << " node" << (bad.size() > 1 ? "s" : "")
    << " of this model (opset " << cv.opset << "):";
  for (auto& b : bad) m << "\n  " << b;
  throw UnsupportedOpsError(m.str(), bad);
}

// The model's opset of each domain it imports. FormatError, as onnxruntime refuses such models,
// when it imports a newer opset of a domain than milkit knows.
Opsets read_opsets(const onnx::ModelProto& model, const std::string& src) {
  Opsets r;
  for (auto& o : model.opset_import()) {
    std::string d = canonical_domain(o.domain());
    auto newest = newest_known_opset(d);
    if (newest && o.version() > *newest)
      throw FormatError(src + ": the model imports opset " + std::to_string(o.version()) +
                        " of domain '" + (d.empty() ? "ai.onnx" : d) +
                        "'; milkit knows opsets up to " + std::to_string(*newest));
    r[d] = o.version();
  }
  return r;
}

const Type* value_info_type(Context& ctx, const onnx::ValueInfoProto& vi, const std::string& what) {
  if (!vi.has_type() || !vi.type().has_tensor_type())
    throw ValueError(what + " '" + vi.name() +
                     "' is not a tensor (sequences, maps and optionals are not supported)");
  auto& tt = vi.type().tensor_type();
  auto dt = mil_dtype(tt.elem_type());
  if (!dt)
    throw ValueError(what + " '" + vi.name() + "' has element type " +
                     onnx_type_name(tt.elem_type()) + ", which Core ML cannot hold");
  if (!tt.has_shape()) return ctx.tensor_unknown_rank(*dt);
  std::vector<Dim> dims;
  for (auto& d : tt.shape().dim()) {
    if (d.has_dim_value()) {
      if (d.dim_value() < 0)
        throw FormatError(what + " '" + vi.name() + "' has a negative dimension " +
                          std::to_string(d.dim_value()));
      dims.push_back(ctx.constant(d.dim_value()));
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      dims.push_back(ctx.symbol_named(d.dim_param()));
    } else {
      dims.push_back(ctx.fresh());
    }
  }
  return ctx.tensor(*dt, dims);
}

}  // namespace

}  // namespace onnx_detail

using namespace onnx_detail;

std::shared_ptr<Program> import_onnx(const void* data, size_t size,
                                     const OnnxImportOptions& options, OnnxImportInfo* info) {
  const std::string& src = options.source;
  if (size > static_cast<size_t>(INT32_MAX))
    throw FormatError(src + ": a ModelProto over 2 GB must keep its weights as external data");
  auto model = std::make_shared<onnx::ModelProto>();
  if (!model->ParseFromArray(data, static_cast<int>(size)))
    throw FormatError(
        src + ": not an ONNX model (the protobuf does not parse; truncated or another format)");
  if (!model->has_graph()) throw FormatError(src + ": the ONNX model has no graph");
  Opsets opsets = read_opsets(*model, src);
  int64_t opset = opsets.count("") ? opsets.at("") : 0;
  FnMap fns;
  for (auto& f : model->functions()) fns[f.domain() + "\n" + f.name()] = &f;
  const auto& g = model->graph();
  auto fn = std::make_shared<Function>(options.target);
  Context& ctx = fn->ctx();
  // reserve every ONNX value name so generated names never take one
  std::function<void(const onnx::GraphProto&)> reserve = [&](const onnx::GraphProto& gr) {
    for (auto& n : gr.node()) {
      for (auto& o : n.output()) ctx.reserve_name(o);
      for (auto& a : n.attribute()) {
        if (a.has_g()) reserve(a.g());
        for (auto& sg : a.graphs()) reserve(sg);
      }
    }
    for (auto& i : gr.input()) ctx.reserve_name(i.name());
  };
  reserve(g);
  Builder b(*fn);
  ExternalData ext;
  ext.base_dir = options.base_dir;
  Converter cv(b, opset, ext, model, fns);
  cv.opsets = std::move(opsets);
  refuse_unsupported(g, fns, cv, src);
  // declared element types (graph inputs, outputs, value_info, subgraphs' too)
  std::function<void(const onnx::GraphProto&)> declare = [&](const onnx::GraphProto& gr) {
    auto add = [&](const onnx::ValueInfoProto& vi) {
      if (vi.has_type() && vi.type().has_tensor_type() && vi.type().tensor_type().elem_type())
        cv.declared_types[vi.name()] = vi.type().tensor_type().elem_type();
    };
    for (auto& vi : gr.input()) add(vi);
    for (auto& vi : gr.output()) add(vi);
    for (auto& vi : gr.value_info()) add(vi);
    for (auto& nd : gr.node())
      for (auto& a : nd.attribute()) {
        if (a.has_g()) declare(a.g());
        for (auto& sg : a.graphs()) declare(sg);
      }
  };
  declare(g);
  Scope top;
  cv.scope = &top;
  collect_slice_bounds(g, cv.slice_bounds);
  cv.add_initializers(g);
  OnnxImportInfo inf;
  inf.ir_version = model->ir_version();
  inf.opset = opset;
  for (auto& vi : g.input()) {
    if (top.consts.count(vi.name()))
      continue;  // an initializer listed as an input (IR < 4): a weight
    if (vi.name().empty()) throw FormatError(src + ": a graph input has no name");
    const Type* t = value_info_type(ctx, vi, "graph input");
    auto fix = options.input_dims.find(vi.name());
    if (fix != options.input_dims.end()) {
      if (!t->has_rank() || t->rank() != static_cast<int>(fix->second.size()))
        throw ValueError(src + ": input '" + vi.name() + "' has rank " +
                         (t->has_rank() ? std::to_string(t->rank()) : "?") +
                         ", the shape given for it has " + std::to_string(fix->second.size()) +
                         " dims");
      std::vector<Dim> dims = t->shape();
      for (size_t i = 0; i < dims.size(); ++i) {
        int64_t d = fix->second[i];
        if (d < 0) continue;
        if (dims[i]->is_const() && dims[i]->value() != d)
          throw ValueError(src + ": input '" + vi.name() + "' dim " + std::to_string(i) + " is " +
                           std::to_string(dims[i]->value()) + " in the model, " +
                           std::to_string(d) + " was given");
        dims[i] = ctx.constant(d);
      }
      t = ctx.tensor(t->dtype(), dims);
    }
    top.vars[vi.name()] = fn->add_input(vi.name(), t);
    inf.input_names.push_back(vi.name());
    inf.input_types.push_back(vi.type().tensor_type().elem_type());
  }
  for (auto& kv : options.input_dims)
    if (!top.vars.count(kv.first))
      throw ValueError(src + ": a shape is given for '" + kv.first +
                       "', which is not an input of the graph");
  cv.convert_nodes(g.node(), "graph '" + g.name() + "'");
  std::vector<Var*> outs;
  for (auto& vo : g.output()) {
    if (!cv.defined(vo.name()))
      throw FormatError(src + ": graph output '" + vo.name() + "' is never produced");
    Var* v = cv.var(vo.name());
    // a narrow type's output (computed in its fp32 / int32 holder) is rounded to the type
    int et = vo.has_type() && vo.type().has_tensor_type() ? vo.type().tensor_type().elem_type() : 0;
    if (is_narrow_type(et) && !v->input_of()) {
      auto it = cv.narrow_vars.find(v);
      if (it == cv.narrow_vars.end() || it->second != et) {
        onnx::NodeProto where;
        where.set_op_type("graph output");
        where.add_output(vo.name());
        v = to_narrow(cv, where, v, et,
                      et != onnx::TensorProto::BFLOAT16 && et != onnx::TensorProto::FLOAT4E2M1);
      }
    }
    // a program output must be an op's output, once
    bool dup = std::find(outs.begin(), outs.end(), v) != outs.end();
    if (!v->op() || dup) {
      v = cv.op("identity", {Converter::arg("x", v)});
      v->set_name(dup || !v->op() ? ctx.free_name(vo.name()) : vo.name());
    }
    outs.push_back(v);
    inf.output_names.push_back(vo.name());
    inf.output_types.push_back(
        vo.has_type() && vo.type().has_tensor_type() ? vo.type().tensor_type().elem_type() : 0);
  }
  fn->body().set_outputs(outs);
  if (!model->producer_name().empty()) inf.metadata["producer"] = model->producer_name();
  if (!model->producer_version().empty())
    inf.metadata["producer_version"] = model->producer_version();
  for (auto& kv : model->metadata_props()) inf.metadata[kv.key()] = kv.value();
  auto prog = std::make_shared<Program>();
  prog->add_function("main", fn);
  if (info) *info = std::move(inf);
  return prog;
}

std::shared_ptr<Program> import_onnx_file(const std::string& path, OnnxImportOptions options,
                                          OnnxImportInfo* info) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) throw IOError("cannot open ONNX model '" + path + "'");
  auto len = f.tellg();
  if (len < 0) throw IOError("cannot read ONNX model '" + path + "'");
  std::string bytes(static_cast<size_t>(len), '\0');
  f.seekg(0);
  if (!f.read(bytes.data(), len)) throw IOError("cannot read ONNX model '" + path + "'");
  if (options.base_dir.empty()) {
    auto slash = path.find_last_of('/');
    options.base_dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  }
  if (options.source == "<ModelProto>") options.source = path;
  return import_onnx(bytes.data(), bytes.size(), options, info);
}

std::vector<std::string> onnx_supported_ops() { return op_table().default_domain_ops(); }

}  // namespace milkit
