// The torch.export importer's conversion context: argument access by schema name, dtypes and
// promotion, SymInts as milkit dims, writes through views, and node dispatch.
#include "converter.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "milkit/types/error.h"

namespace milkit {
namespace torch_detail {

namespace {

const json* find_input(const json& n, std::string_view name) {
  auto it = n.find("inputs");
  if (it == n.end() || !it->is_array()) return nullptr;
  for (auto& in : *it) {
    auto nm = in.find("name");
    if (nm != in.end() && nm->is_string() && nm->get_ref<const std::string&>() == name) {
      auto a = in.find("arg");
      return a == in.end() ? nullptr : &*a;
    }
  }
  return nullptr;
}

// The single key of a tagged-union object.
const std::string& tag(const json& a) {
  static const std::string none = "as_none";
  if (!a.is_object() || a.empty()) return none;
  return a.begin().key();
}

double json_number(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s == "Infinity" || s == "inf") return INFINITY;
    if (s == "-Infinity" || s == "-inf") return -INFINITY;
    if (s == "NaN" || s == "nan") return NAN;
  }
  throw FormatError("expected a number, got " + v.dump());
}

}  // namespace

std::string user_frame(const json& n) {
  auto md = n.find("metadata");
  if (md == n.end() || !md->is_object()) return "";
  auto st = md->find("stack_trace");
  if (st == md->end() || !st->is_string()) return "";
  // frames: 'File "path", line N, in fn\n    code'; the user's is the innermost outside torch
  std::istringstream in(st->get<std::string>());
  std::string line, best, fallback;
  std::string cur;
  while (std::getline(in, line)) {
    auto p = line.find("File \"");
    if (p != std::string::npos) {
      auto q = line.find('"', p + 6);
      if (q == std::string::npos) continue;
      std::string file = line.substr(p + 6, q - p - 6);
      auto l = line.find("line ", q);
      std::string ln = l == std::string::npos ? "?" : line.substr(l + 5, line.find(',', l) - l - 5);
      cur = file + ":" + ln;
      bool library = file.find("site-packages/torch/") != std::string::npos ||
                     file.find("dist-packages/torch/") != std::string::npos ||
                     file.rfind("torch/", 0) == 0 || file.rfind("<", 0) == 0;  // <eval_with_key>: fx code
      fallback = cur;
      if (!library) best = cur;
    } else if (!cur.empty()) {
      auto b = line.find_first_not_of(' ');
      if (b != std::string::npos) {
        std::string code = line.substr(b);
        if (!best.empty() && best.rfind(cur, 0) == 0 && best.size() == cur.size()) best += ": " + code;
        if (fallback == cur) fallback += ": " + code;
      }
      cur.clear();
    }
  }
  return best.empty() ? fallback : best;
}

std::string Converter::label(const json& n) {
  std::string target = n.value("target", std::string("?"));
  if (target.rfind("torch.ops.", 0) == 0) target = target.substr(10);
  std::string r = "node '" + n.value("name", std::string("?")) + "' (" + target + ")";
  std::string f = user_frame(n);
  if (!f.empty()) r += " at " + f;
  return r;
}

Converter::Converter(Builder& b_, const json& graph_, const std::string& source_)
    : b(b_), e(b_), graph(graph_), source(source_) {}

void Converter::fail(const json& n, const std::string& msg) const {
  throw ValueError(source + ": " + label(n) + ": " + msg);
}

Var* Converter::var(const std::string& name) {
  auto it = vars.find(name);
  if (it != vars.end()) return it->second;
  auto ct = consts.find(name);
  if (ct != consts.end()) {
    Value v = narrow(*ct->second, "tensor '" + name + "'");
    auto nm = const_names.find(name);
    Var* out = b.add_const(std::make_shared<const Value>(std::move(v)),
                           nm == const_names.end() ? "" : ctx().free_name(nm->second));
    vars[name] = out;
    bound_.insert(out);
    return out;
  }
  throw FormatError(source + ": tensor '" + name + "' is used but never defined");
}

const Value* Converter::known(const std::string& name) {
  auto ct = consts.find(name);
  if (ct != consts.end()) return ct->second.get();
  auto it = vars.find(name);
  if (it != vars.end()) {
    auto& v = it->second->value();
    return v && !v->is_symbolic() ? v.get() : nullptr;
  }
  return nullptr;
}

const json* Converter::arg(const json& n, std::string_view name) {
  const json* a = find_input(n, name);
  if (!a || tag(*a) == "as_none") return nullptr;
  return a;
}

std::string Converter::tensor_name(const json& n, std::string_view name) {
  const json* a = arg(n, name);
  if (!a) return "";
  const auto& t = tag(*a);
  if (t == "as_tensor") return (*a)["as_tensor"].value("name", std::string());
  if (t == "as_optional_tensor") {
    auto& o = (*a)["as_optional_tensor"];
    if (o.contains("as_tensor")) return o["as_tensor"].value("name", std::string());
  }
  return "";
}

Var* Converter::opt_tensor(const json& n, std::string_view name) {
  const json* a = arg(n, name);
  if (!a) return nullptr;
  std::string t = tensor_name(n, name);
  if (t.empty()) fail(n, "argument '" + std::string(name) + "' is not a tensor (" + a->dump() + ")");
  return var(t);
}

Var* Converter::tensor(const json& n, std::string_view name) {
  Var* v = opt_tensor(n, name);
  if (!v) fail(n, "argument '" + std::string(name) + "' is required");
  return v;
}

std::vector<Var*> Converter::tensors(const json& n, std::string_view name) {
  const json* a = arg(n, name);
  std::vector<Var*> r;
  if (!a) return r;
  const auto& t = tag(*a);
  if (t == "as_tensors") {
    for (auto& e : (*a)["as_tensors"]) r.push_back(var(e.at("name").get<std::string>()));
  } else if (t == "as_optional_tensors") {
    for (auto& e : (*a)["as_optional_tensors"]) {
      if (e.contains("as_tensor")) r.push_back(var(e["as_tensor"].at("name").get<std::string>()));
      else r.push_back(nullptr);
    }
  } else if (t == "as_tensor") {
    r.push_back(var((*a)["as_tensor"].at("name").get<std::string>()));
  } else {
    fail(n, "argument '" + std::string(name) + "' is not a list of tensors");
  }
  return r;
}

Dim Converter::sym_dim(const json& a) {
  const auto& t = tag(a);
  if (t == "as_int") return ctx().constant(a["as_int"].get<int64_t>());
  if (t == "as_sym_int") {
    auto& s = a["as_sym_int"];
    if (s.contains("as_int")) return ctx().constant(s["as_int"].get<int64_t>());
    std::string name = s.at("as_name").get<std::string>();
    const json* v = lookup("sym_int_values", name);
    if (!v) throw FormatError(source + ": SymInt '" + name + "' has no value in sym_int_values");
    if (v->contains("as_int")) return ctx().constant((*v)["as_int"].get<int64_t>());
    return parse_sym_expr(v->at("as_expr").at("expr_str").get<std::string>(), ctx());
  }
  throw FormatError(source + ": expected an int or SymInt, got " + a.dump());
}

std::optional<std::pair<Dim, Dim>> Converter::sym_ratio(const json& a) {
  if (tag(a) != "as_sym_float") return std::nullopt;
  const auto& s = a["as_sym_float"];
  if (!s.contains("as_name")) return std::nullopt;
  const json* v = lookup("sym_float_values", s["as_name"].get<std::string>());
  if (!v || !v->contains("as_expr")) return std::nullopt;
  std::string e = v->at("as_expr").at("expr_str").get<std::string>();
  // a / b of two sizes: IntTrueDiv, or FloatTrueDiv of sizes made floats (whole numbers only)
  std::string head = "IntTrueDiv(";
  if (e.rfind("FloatTrueDiv(", 0) == 0) head = "FloatTrueDiv(";
  if (e.rfind(head, 0) != 0 || e.back() != ')') return std::nullopt;
  // split the two arguments at the top-level comma
  std::string body = e.substr(head.size(), e.size() - head.size() - 1);
  int depth = 0;
  for (size_t k = 0; k < body.size(); ++k) {
    char ch = body[k];
    if (ch == '(') ++depth;
    else if (ch == ')') --depth;
    else if (ch == ',' && depth == 0) {
      try {
        return std::make_pair(parse_sym_expr(body.substr(0, k), ctx()), parse_sym_expr(body.substr(k + 1), ctx()));
      } catch (const FormatError&) {
        return std::nullopt;  // a fractional number in it: not a ratio of sizes
      }
    }
  }
  return std::nullopt;
}

int64_t Converter::i(const json& n, std::string_view name, int64_t def) {
  auto v = opt_i(n, name);
  return v ? *v : def;
}

std::optional<int64_t> Converter::opt_i(const json& n, std::string_view name) {
  const json* a = arg(n, name);
  if (!a) return std::nullopt;
  const auto& t = tag(*a);
  if (t == "as_bool") return (*a)["as_bool"].get<bool>() ? 1 : 0;
  if (item_value(*a)) fail_item(n, name);
  if (t == "as_int" || t == "as_sym_int") {
    Dim d = sym_dim(*a);
    if (!d->is_const()) fail(n, "argument '" + std::string(name) + "' is the symbolic size " + d->str() + ", which must be known here");
    return d->value();
  }
  if (t == "as_float") return static_cast<int64_t>(json_number((*a)["as_float"]));
  fail(n, "argument '" + std::string(name) + "' is not an int (" + a->dump() + ")");
}

double Converter::f(const json& n, std::string_view name, double def) {
  const json* a = arg(n, name);
  if (!a) return def;
  const auto& t = tag(*a);
  if (t == "as_float") return json_number((*a)["as_float"]);
  if (t == "as_int") return static_cast<double>((*a)["as_int"].get<int64_t>());
  if (t == "as_bool") return (*a)["as_bool"].get<bool>() ? 1.0 : 0.0;
  if (item_value(*a)) fail_item(n, name);
  if (t == "as_sym_int") {
    Dim d = sym_dim(*a);
    if (d->is_const()) return static_cast<double>(d->value());
  }
  if (auto q = sym_ratio(*a)) {
    // a ratio that does not depend on the symbols' values: b == k * a or a == k * b
    auto [num, den] = *q;
    if (num->is_const() && den->is_const() && den->value() != 0)
      return static_cast<double>(num->value()) / static_cast<double>(den->value());
    for (int64_t k = 1; k <= 64; ++k) {
      if (ctx().mul(ctx().constant(k), num) == den) return 1.0 / static_cast<double>(k);
      if (ctx().mul(ctx().constant(k), den) == num) return static_cast<double>(k);
    }
  }
  fail(n, "argument '" + std::string(name) + "' is not a known number (" + a->dump() + ")");
}

bool Converter::bo(const json& n, std::string_view name, bool def) {
  const json* a = arg(n, name);
  if (!a) return def;
  const auto& t = tag(*a);
  if (t == "as_bool") return (*a)["as_bool"].get<bool>();
  if (t == "as_int") return (*a)["as_int"].get<int64_t>() != 0;
  fail(n, "argument '" + std::string(name) + "' is not a bool (" + a->dump() + ")");
}

std::string Converter::s(const json& n, std::string_view name, const std::string& def) {
  const json* a = arg(n, name);
  if (!a) return def;
  if (tag(*a) == "as_string") return (*a)["as_string"].get<std::string>();
  fail(n, "argument '" + std::string(name) + "' is not a string (" + a->dump() + ")");
}

std::vector<int64_t> Converter::ints(const json& n, std::string_view name, std::vector<int64_t> def) {
  const json* a = arg(n, name);
  if (!a) return def;
  const auto& t = tag(*a);
  if (t == "as_ints") return (*a)["as_ints"].get<std::vector<int64_t>>();
  if (t == "as_int") return {(*a)["as_int"].get<int64_t>()};
  if (t == "as_sym_ints" || t == "as_sym_int") {
    std::vector<int64_t> r;
    for (Dim d : dims(n, name)) {
      if (!d->is_const()) fail(n, "argument '" + std::string(name) + "' holds the symbolic size " + d->str() + ", which must be known here");
      r.push_back(d->value());
    }
    return r;
  }
  fail(n, "argument '" + std::string(name) + "' is not a list of ints (" + a->dump() + ")");
}

std::vector<double> Converter::floats(const json& n, std::string_view name, std::vector<double> def) {
  const json* a = arg(n, name);
  if (!a) return def;
  const auto& t = tag(*a);
  std::vector<double> r;
  if (t == "as_floats") {
    for (auto& v : (*a)["as_floats"]) r.push_back(json_number(v));
  } else if (t == "as_ints") {
    for (auto& v : (*a)["as_ints"]) r.push_back(static_cast<double>(v.get<int64_t>()));
  } else if (t == "as_float") {
    r.push_back(json_number((*a)["as_float"]));
  } else {
    fail(n, "argument '" + std::string(name) + "' is not a list of floats (" + a->dump() + ")");
  }
  return r;
}

std::vector<Dim> Converter::dims(const json& n, std::string_view name) {
  const json* a = arg(n, name);
  std::vector<Dim> r;
  if (!a) return r;
  const auto& t = tag(*a);
  if (t == "as_ints") {
    for (auto& v : (*a)["as_ints"]) r.push_back(ctx().constant(v.get<int64_t>()));
  } else if (t == "as_sym_ints") {
    for (auto& v : (*a)["as_sym_ints"]) {
      if (v.contains("as_int")) r.push_back(ctx().constant(v["as_int"].get<int64_t>()));
      else r.push_back(sym_dim(json{{"as_sym_int", v}}));
    }
  } else if (t == "as_int" || t == "as_sym_int") {
    r.push_back(sym_dim(*a));
  } else {
    fail(n, "argument '" + std::string(name) + "' is not a list of sizes (" + a->dump() + ")");
  }
  return r;
}

Var* Converter::shape_of(Var* in) {
  auto sh = shape_of_.find(in->name());
  if (sh != shape_of_.end()) return sh->second;
  Var* s = op("shape", {a("x", in)});
  shape_of_[in->name()] = s;
  return s;
}

Var* Converter::scaled_symbol(const ScaledSource& q) {
  Var* r = op("gather", {a("x", shape_of(q.var)), ai32("indices", q.axis), ai32("axis", 0)});
  if (q.offset != 0)
    r = op("sub", {a("x", r), a("y", Value::scalar_int(DataType::Int32, q.offset))});
  if (q.scale == 1) return r;
  // read as the rows of [dim] reshaped to [-1, scale]: a dim that is not a multiple stops the
  // program there (on device too) instead of computing with a wrong size
  Var* v = op("fill", {a("shape", op("expand_dims", {a("x", r), aints32("axes", {0})})),
                       a("value", Value::scalar_int(DataType::Int32, 0))});
  Var* rows = op("reshape", {a("x", v), aints32("shape", {-1, q.scale})});
  rows->op()->set_name(ctx().free_name(q.var->name() + "_dim" + std::to_string(q.axis) +
                                       "_must_be_a_multiple_of_" + std::to_string(q.scale)));
  return op("gather", {a("x", op("shape", {a("x", rows)})), ai32("indices", 0), ai32("axis", 0)});
}

void Converter::note_sources(Var* v) {
  if (!v->type()->is_tensor() || !v->type()->has_rank()) return;
  for (size_t k = 0; k < shape(v).size(); ++k) {
    Dim d = shape(v)[k];
    if (d->kind() == Expr::Kind::Symbol) {
      if (!sym_sources.count(d->symbol())) sym_sources[d->symbol()] = {v, static_cast<int>(k)};
      continue;
    }
    // scale * s + offset
    if (d->kind() != Expr::Kind::Poly || d->terms().size() != 1 || d->terms()[0].atoms.size() != 1)
      continue;
    Dim s = d->terms()[0].atoms[0];
    if (s->kind() != Expr::Kind::Symbol || sym_sources.count(s->symbol()) ||
        sym_scaled.count(s->symbol()))
      continue;
    if (d->terms()[0].coef <= 0) continue;
    sym_scaled[s->symbol()] = ScaledSource{v, static_cast<int>(k), d->terms()[0].coef, d->value()};
  }
}

Var* Converter::dim_var(Dim d) {
  if (d->is_const()) return cs(static_cast<double>(d->value()), DataType::Int32);
  auto it = dim_vars_.find(d);
  if (it != dim_vars_.end()) return it->second;
  Var* r = nullptr;
  switch (d->kind()) {
    case Expr::Kind::Symbol: {
      auto src = sym_sources.find(d->symbol());
      auto sc = sym_scaled.find(d->symbol());
      if (src == sym_sources.end() && sc != sym_scaled.end()) {
        r = scaled_symbol(sc->second);
        break;
      }
      if (src == sym_sources.end())
        throw ValueError("the size " + d->str() + " is not the size of any input (data-dependent sizes are not supported)");
      r = op("gather", {a("x", shape_of(src->second.first)), ai32("indices", src->second.second),
                        ai32("axis", 0)});
      break;
    }
    case Expr::Kind::Poly: {
      for (auto& t : d->terms()) {
        Var* p = nullptr;
        for (Dim atom : t.atoms) p = p ? op("mul", {a("x", p), a("y", dim_var(atom))}) : dim_var(atom);
        if (t.coef != 1) p = op("mul", {a("x", p), a("y", Value::scalar_int(DataType::Int32, t.coef))});
        r = r ? op("add", {a("x", r), a("y", p)}) : p;
      }
      if (d->value() != 0) r = op("add", {a("x", r), a("y", Value::scalar_int(DataType::Int32, d->value()))});
      break;
    }
    case Expr::Kind::FloorDiv:
      r = op("floor_div", {a("x", dim_var(d->args()[0])), a("y", dim_var(d->args()[1]))});
      break;
    case Expr::Kind::Mod:
      r = op("mod", {a("x", dim_var(d->args()[0])), a("y", dim_var(d->args()[1]))});
      break;
    case Expr::Kind::Min:
    case Expr::Kind::Max: {
      const char* t = d->kind() == Expr::Kind::Min ? "minimum" : "maximum";
      for (Dim x : d->args()) r = r ? op(t, {a("x", r), a("y", dim_var(x))}) : dim_var(x);
      break;
    }
    default:
      throw ValueError("cannot compute the size " + d->str());
  }
  dim_vars_[d] = r;
  return r;
}

bool Converter::can_compute(Dim d) const {
  switch (d->kind()) {
    case Expr::Kind::Const:
      return true;
    case Expr::Kind::Symbol:
      return sym_sources.count(d->symbol()) > 0 || sym_scaled.count(d->symbol()) > 0;
    case Expr::Kind::Poly:
      for (auto& t : d->terms())
        for (Dim atom : t.atoms)
          if (!can_compute(atom)) return false;
      return true;
    case Expr::Kind::FloorDiv:
    case Expr::Kind::Mod:
    case Expr::Kind::Min:
    case Expr::Kind::Max:
      for (Dim x : d->args())
        if (!can_compute(x)) return false;
      return true;
    default:
      return false;
  }
}

Var* Converter::shape_var(const std::vector<Dim>& ds) {
  bool all_const = std::all_of(ds.begin(), ds.end(), [](Dim d) { return d->is_const(); });
  if (all_const) {
    std::vector<int64_t> v;
    for (Dim d : ds) v.push_back(d->value());
    return ci(v);
  }
  std::vector<Arg> args;
  Arg values{"values", {}, true};
  for (Dim d : ds) {
    Var* s = d->is_const() ? ci({d->value()}) : op("expand_dims", {a("x", dim_var(d)), aints32("axes", {0})});
    values.items.push_back(ArgItem{s, nullptr});
  }
  args.push_back(std::move(values));
  args.push_back(ai32("axis", 0));
  return op("concat", std::move(args));
}

bool Converter::is_number(const json& n, std::string_view name) {
  const json* a = arg(n, name);
  if (!a) return false;
  const auto& t = tag(*a);
  return t == "as_int" || t == "as_float" || t == "as_bool" || t == "as_sym_int" || t == "as_sym_float";
}

double Converter::number(const json& n, std::string_view name, double def) { return f(n, name, def); }

void Converter::fail_item(const json& n, std::string_view name) const {
  fail(n, "argument '" + std::string(name) +
              "' is a tensor's value (.item()), which this operator needs as a number known when converting");
}

Var* Converter::item_value(const json& a) const {
  const auto& t = tag(a);
  if (t != "as_sym_int" && t != "as_sym_float" && t != "as_sym_bool") return nullptr;
  const json& v = a[t];
  if (!v.is_object() || !v.contains("as_name")) return nullptr;
  auto it = scalar_values.find(v["as_name"].get<std::string>());
  return it == scalar_values.end() ? nullptr : it->second;
}

Var* Converter::scalar_or_tensor(const json& n, std::string_view name, DataType dt) {
  const json* a = arg(n, name);
  if (!a) fail(n, "argument '" + std::string(name) + "' is required");
  const auto& t = tag(*a);
  if (t == "as_tensor" || t == "as_optional_tensor") return cast(tensor(n, name), dt);
  if (auto v = item_value(*a)) return cast(v, dt);
  if (t == "as_sym_int") {
    Dim d = sym_dim(*a);
    if (!d->is_const()) return cast(dim_var(d), dt);
    return cs(static_cast<double>(d->value()), dt);
  }
  if (auto q = sym_ratio(*a)) {
    auto [num, den] = *q;
    bool known = (num->is_const() && den->is_const());
    for (int64_t k = 1; k <= 64 && !known; ++k)
      known = ctx().mul(ctx().constant(k), num) == den || ctx().mul(ctx().constant(k), den) == num;
    if (!known && can_compute(num) && can_compute(den)) {
      // computed from the input shapes at run time, in fp32 as torch's float division
      Var* r = op("real_div", {Converter::a("x", cast(dim_var(num), DataType::Float32)),
                               Converter::a("y", cast(dim_var(den), DataType::Float32))});
      return cast(r, dt);
    }
  }
  return cs(f(n, name, 0), dt);
}

std::optional<DataType> Converter::dtype_arg(const json& n, std::string_view name) {
  const json* a = arg(n, name);
  if (!a) return std::nullopt;
  if (tag(*a) != "as_scalar_type") fail(n, "argument '" + std::string(name) + "' is not a dtype");
  int st = (*a)["as_scalar_type"].get<int>();
  auto dt = mil_dtype(st);
  if (!dt) fail(n, "dtype " + scalar_type_name(st) + " is not supported by Core ML");
  return dt;
}

std::vector<std::string> Converter::output_names(const json& n) {
  std::vector<std::string> r;
  auto it = n.find("outputs");
  if (it == n.end()) return r;
  for (auto& o : *it) {
    const auto& t = tag(o);
    if (t == "as_tensor") {
      r.push_back(o["as_tensor"].value("name", std::string()));
    } else if (t == "as_tensors") {
      for (auto& e : o["as_tensors"]) r.push_back(e.value("name", std::string()));
    } else if (t == "as_optional_tensors") {
      for (auto& e : o["as_optional_tensors"])
        r.push_back(e.contains("as_tensor") ? e["as_tensor"].value("name", std::string()) : std::string());
    } else if (t == "as_optional_tensor") {
      auto& e = o["as_optional_tensor"];
      r.push_back(e.contains("as_tensor") ? e["as_tensor"].value("name", std::string()) : std::string());
    } else {
      r.push_back("");
    }
  }
  return r;
}

void Converter::out(const json& n, Var* v, size_t idx) {
  auto names = output_names(n);
  if (idx >= names.size() || names[idx].empty()) return;
  const std::string& name = names[idx];
  if (!bound_.count(v) && v->op() && !v->input_of() && v->op()->op_type() != "const")
    v->set_name(name_prefix.empty() ? name : ctx().free_name(name_prefix + name));
  bound_.insert(v);
  vars[name] = v;
  // a size milkit could not express (a fresh symbol) can still be read from the tensor that has it
  note_sources(v);
  // so can torch's symbol for it (an unbacked size such as the count of a mask's true elements)
  if (!v->type()->is_tensor() || !v->type()->has_rank()) return;
  std::optional<std::vector<Dim>> ms;
  try {
    ms = meta_shape(name);
  } catch (const FormatError&) {
    return;
  }
  if (!ms || ms->size() != shape(v).size()) return;
  for (size_t k = 0; k < ms->size(); ++k) {
    Dim d = (*ms)[k];
    if (d->kind() == Expr::Kind::Symbol && !shape(v)[k]->is_const() && !can_compute(d))
      sym_sources[d->symbol()] = {v, static_cast<int>(k)};
  }
}

void Converter::outs(const json& n, const std::vector<Var*>& vs) {
  for (size_t k = 0; k < vs.size(); ++k)
    if (vs[k]) out(n, vs[k], k);
}

const json* Converter::lookup(const char* table, const std::string& name) const {
  auto find_in = [&](const json& g) -> const json* {
    auto t = g.find(table);
    if (t == g.end() || !t->is_object()) return nullptr;
    auto it = t->find(name);
    return it == t->end() ? nullptr : &*it;
  };
  for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s)
    if (const json* v = find_in(**s)) return v;
  return find_in(graph);
}

std::optional<DataType> Converter::meta_dtype(const std::string& name) const {
  const json* v = lookup("tensor_values", name);
  if (!v) return std::nullopt;
  return mil_dtype(v->value("dtype", 0));
}

std::optional<DataType> Converter::out_dtype(const json& n, size_t k) const {
  auto names = output_names(n);
  if (k >= names.size() || names[k].empty()) return std::nullopt;
  return meta_dtype(names[k]);
}

std::optional<std::vector<Dim>> Converter::meta_shape(const std::string& name) {
  const json* v = lookup("tensor_values", name);
  if (!v || !v->contains("sizes")) return std::nullopt;
  std::vector<Dim> r;
  for (auto& sz : (*v)["sizes"]) {
    if (sz.contains("as_int")) r.push_back(ctx().constant(sz["as_int"].get<int64_t>()));
    else r.push_back(parse_sym_expr(sz.at("as_expr").at("expr_str").get<std::string>(), ctx()));
  }
  return r;
}

std::optional<int> Converter::meta_rank(const std::string& name) const {
  const json* v = lookup("tensor_values", name);
  if (!v || !v->contains("sizes")) return std::nullopt;
  return static_cast<int>((*v)["sizes"].size());
}

int Converter::rank(const json& n, Var* v) const {
  if (!v->type()->has_rank()) fail(n, "the rank of '" + v->name() + "' is not known");
  return v->type()->rank();
}

int64_t Converter::axis(const json& n, int64_t ax, int64_t r) const {
  int64_t rr = std::max<int64_t>(r, 1);  // torch allows dim 0 / -1 on a 0-d tensor
  if (ax < -rr || ax >= rr) fail(n, "dim " + std::to_string(ax) + " is out of range for rank " + std::to_string(r));
  return ax < 0 ? ax + rr : ax;
}

namespace {
int category(DataType t) { return t == DataType::Bool ? 0 : is_float(t) ? 2 : 1; }
int width(DataType t) { return dtype_bits(t); }
}  // namespace

DataType Converter::promote(Var* x, Var* y) {
  DataType a = dtype(x), b = dtype(y);
  if (a == b) return a;
  bool xs = x->type()->has_rank() && x->type()->rank() == 0;
  bool ys = y->type()->has_rank() && y->type()->rank() == 0;
  int ca = category(a), cb = category(b);
  if (ca != cb) {
    // the higher category wins; a 0-d float with a non-0-d int gives the default float
    if (ca > cb) return (xs && !ys && ca == 2) ? DataType::Float32 : a;
    return (ys && !xs && cb == 2) ? DataType::Float32 : b;
  }
  if (xs != ys) return xs ? b : a;
  return width(a) >= width(b) ? a : b;
}

std::pair<Var*, Var*> Converter::promoted(const json& n, Var* x, Var* y) {
  DataType dt = promote(x, y);
  if (auto od = out_dtype(n); od && *od != DataType::Bool) dt = *od;
  return {cast(x, dt), cast(y, dt)};
}

Var* Converter::vector_with(const std::vector<int64_t>& base, size_t d, Var* v) {
  Arg vals{"values", {}, true};
  if (d > 0) vals.items.push_back(ArgItem{ci(std::vector<int64_t>(base.begin(), base.begin() + static_cast<long>(d))), nullptr});
  vals.items.push_back(ArgItem{op("expand_dims", {a("x", cast(v, DataType::Int32)), aints32("axes", {0})}), nullptr});
  if (d + 1 < base.size())
    vals.items.push_back(ArgItem{ci(std::vector<int64_t>(base.begin() + static_cast<long>(d) + 1, base.end())), nullptr});
  return op("concat", {vals, ai32("axis", 0)});
}

Var* Converter::slice_update_axis(Var* x, Var* update, int64_t dim, std::optional<int64_t> start, Dim sym_start,
                                  std::optional<int64_t> end, Dim sym_end, int64_t step) {
  int r = x->type()->rank();
  size_t d = static_cast<size_t>(dim);
  std::vector<int64_t> begin(static_cast<size_t>(r), 0), stop(static_cast<size_t>(r), 0), stride(static_cast<size_t>(r), 1);
  std::vector<int64_t> bm(static_cast<size_t>(r), 1), em(static_cast<size_t>(r), 1);
  if (start) {
    begin[d] = *start;
    bm[d] = 0;
  }
  if (end) {
    stop[d] = *end;
    em[d] = 0;
  }
  if (sym_start) bm[d] = 0;
  if (sym_end) em[d] = 0;
  stride[d] = step;
  if (dtype(update) != dtype(x)) update = cast(update, dtype(x));
  if (target() < Target::iOS18) {
    // no slice_update before iOS18: the update padded to x's size along `dim`, picked by a mask
    Dim sz = x->type()->shape()[d];
    auto why = [&](const std::string& m) {
      throw ValueError(source + ": writing into a slice " + m + " needs minimum_deployment_target iOS18 (slice_update)");
    };
    if (step != 1) why("with a step");
    if (sym_start || sym_end) why("at a symbolic position");
    if (!sz->is_const()) why("of a symbolic dim");
    int64_t L = sz->value();
    int64_t s = start.value_or(0), e = end.value_or(L);
    if (s < 0) s += L;
    if (e < 0) e += L;
    s = std::clamp<int64_t>(s, 0, L);
    e = std::clamp<int64_t>(e, s, L);
    std::vector<int64_t> pads(static_cast<size_t>(2 * r), 0);
    pads[2 * d] = s;
    pads[2 * d + 1] = L - e;
    Var* padded = update;
    if (s || L - e)
      padded = op("pad", {a("x", update), aints32("pad", pads), astr("mode", "constant"),
                          a("constant_val", is_float(dtype(update)) ? Value::scalar_float(dtype(update), 0)
                                                                    : Value::scalar_int(dtype(update), 0))});
    std::vector<int64_t> m(static_cast<size_t>(L));
    for (int64_t k = 0; k < L; ++k) m[static_cast<size_t>(k)] = k >= s && k < e;
    std::vector<int64_t> mshape(static_cast<size_t>(r), 1);
    mshape[d] = L;
    Var* mask = c(Value::from_ints(DataType::Bool, mshape, m));
    return op("select", {a("cond", mask), a("a", padded), a("b", x)});
  }
  Var* bv = sym_start ? vector_with(begin, d, dim_var(sym_start)) : ci(begin);
  Var* ev = sym_end ? vector_with(stop, d, dim_var(sym_end)) : ci(stop);
  return op("slice_update", {a("x", x), a("update", update), a("begin", bv), a("end", ev), aints32("stride", stride),
                             a("begin_mask", Value::from_ints(DataType::Bool, {r}, bm)),
                             a("end_mask", Value::from_ints(DataType::Bool, {r}, em))});
}

Var* Converter::shape_of_pieces(Var* x, const std::vector<std::pair<bool, int64_t>>& ps) {
  std::vector<int64_t> lit;
  bool all_const = true;
  for (auto& p : ps) {
    if (p.first) {
      Dim d = x->type()->shape()[static_cast<size_t>(p.second)];
      if (!d->is_const()) {
        all_const = false;
        break;
      }
      lit.push_back(d->value());
    } else {
      lit.push_back(p.second);
    }
  }
  if (all_const) return ci(lit);
  Var* s = op("shape", {a("x", x)});
  Arg vals{"values", {}, true};
  for (auto& p : ps) {
    Var* piece;
    if (p.first && !x->type()->shape()[static_cast<size_t>(p.second)]->is_const())
      piece = op("slice_by_index", {a("x", s), aints32("begin", {p.second}), aints32("end", {p.second + 1})});
    else
      piece = ci({p.first ? x->type()->shape()[static_cast<size_t>(p.second)]->value() : p.second});
    vals.items.push_back(ArgItem{piece, nullptr});
  }
  return op("concat", {vals, ai32("axis", 0)});
}

void Converter::assign(const std::string& name, Var* value) {
  if (auto al = aliases.find(name); al != aliases.end()) {
    std::string outer = al->second;
    assign(outer, value);
    vars[name] = vars[outer];
    return;
  }
  auto vw = views.find(name);
  if (vw != views.end()) {
    ViewInfo info = vw->second;
    Var* base = var(info.base);
    Var* nb;
    if (info.kind == ViewInfo::Select) {
      Var* upd = op("expand_dims", {a("x", value), aints32("axes", {info.dim})});
      std::optional<int64_t> stop;
      if (*info.start != -1) stop = *info.start + 1;
      nb = slice_update_axis(base, upd, info.dim, info.start, nullptr, stop, nullptr, 1);
    } else {
      nb = slice_update_axis(base, value, info.dim, info.start, info.sym_start, info.end, info.sym_end, info.step);
    }
    assign(info.base, nb);
    vars[name] = value;
    return;
  }
  auto st = state_inputs.find(name);
  if (st != state_inputs.end()) {
    // the state stores fp16 between predictions; later reads in this prediction see the value
    // written (in the buffer's compute dtype), as they do in the functional dialect where the
    // state is written at the end
    Var* v = value;
    DataType sdt = st->second->type()->elem()->dtype();
    DataType vdt = meta_dtype(name).value_or(dtype(value));
    if (dtype(v) != sdt) v = cast(v, sdt);
    op("coreml_update_state", {a("state", st->second), a("value", v)});
    vars[name] = cast(value, vdt);
    return;
  }
  vars[name] = value;
}

std::vector<Var*> Converter::convert_subgraph(const json& n, const json& g,
                                              const std::vector<const json*>& args) {
  const json& ins = g.at("inputs");
  if (ins.size() != args.size())
    fail(n, "the subgraph takes " + std::to_string(ins.size()) + " inputs, " +
                std::to_string(args.size()) + " were given");
  // names are unique across a program's graphs; bindings the subgraph shadows come back after it
  std::vector<std::pair<std::string, Var*>> saved;
  auto bind = [&](const std::string& name, Var* v) {
    auto it = vars.find(name);
    saved.push_back({name, it == vars.end() ? nullptr : it->second});
    vars[name] = v;
  };
  for (size_t k = 0; k < ins.size(); ++k) {
    const json& formal = ins[k];
    const json& actual = *args[k];
    if (formal.contains("as_tensor")) {
      if (!actual.contains("as_tensor"))
        fail(n, "subgraph input " + std::to_string(k) + " is a tensor, the argument is " +
                    actual.dump());
      std::string inner = formal["as_tensor"].at("name").get<std::string>();
      std::string outer = actual["as_tensor"].at("name").get<std::string>();
      if (inner != outer) {
        bind(inner, var(outer));
        aliases[inner] = outer;
      }
    } else if (formal.contains("as_sym_int") || formal.contains("as_int") ||
               formal.contains("as_bool") || formal.contains("as_float") ||
               formal.contains("as_none")) {
      continue;  // SymInts are read through their expressions; constants are inlined in the nodes
    } else {
      fail(n, "subgraph input " + formal.dump() + " is not supported");
    }
  }
  scopes_.push_back(&g);
  struct Pop {
    std::vector<const json*>& s;
    ~Pop() { s.pop_back(); }
  } pop{scopes_};
  for (auto& inner : g.at("nodes")) {
    std::string target = inner.value("target", std::string());
    if (ignorable_target(target) || sym_only_node(inner)) continue;
    convert_node(inner);
  }
  std::vector<Var*> r;
  for (auto& o : g.at("outputs")) {
    if (!o.contains("as_tensor")) fail(n, "subgraph output " + o.dump() + " is not a tensor");
    r.push_back(var(o["as_tensor"].at("name").get<std::string>()));
  }
  for (auto& kv : saved) aliases.erase(kv.first);
  for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
    if (it->second)
      vars[it->first] = it->second;
    else
      vars.erase(it->first);
  }
  return r;
}

void Converter::convert_node(const json& n) {
  std::string target = n.value("target", std::string());
  bool inplace = false;
  const ConvertFn* fn = find_op(target, &inplace);
  const bool cx = complex_node(*this, n);
  if (!fn && !cx) {
    std::string why = torch_unsupported_reason(target);
    fail(n, "operator '" + target + "' is not supported" + (why.empty() ? "" : ": " + why));
  }
  try {
    if (cx) {
      convert_complex(*this, n, fn);
      return;
    }
    (*fn)(*this, n);
  } catch (const FormatError&) {
    throw;
  } catch (const TypeError& e) {
    std::string m = e.what();
    if (m.rfind(source + ": ", 0) == 0) throw;
    throw TypeError(source + ": " + label(n) + ": " + m);
  } catch (const IndexError& e) {
    std::string m = e.what();
    if (m.rfind(source + ": ", 0) == 0) throw;
    throw IndexError(source + ": " + label(n) + ": " + m);
  } catch (const ValueError& e) {
    std::string m = e.what();
    if (m.rfind(source + ": ", 0) == 0) throw;
    throw ValueError(source + ": " + label(n) + ": " + m);
  }
  if (inplace) {
    // the functional result is written into `self` (and through it into what it views)
    auto names = output_names(n);
    std::string self = tensor_name(n, "self");
    if (self.empty()) self = tensor_name(n, "input");
    if (!self.empty() && !names.empty() && !names[0].empty() && vars.count(names[0])) {
      Var* result = vars[names[0]];
      assign(self, result);
      // later reads of the output name see the state's updated value too
      vars[names[0]] = vars[self];
    }
  }
}

}  // namespace torch_detail
}  // namespace milkit
