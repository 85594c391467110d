#include "milkit/serde/text.h"

#include <cmath>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "milkit/ops/registry.h"

namespace milkit {

namespace {
std::string python_float_style(std::string s) {
  // printf %g -> Python repr: "1e-05" stays, "1" -> "1.0", "1e+20" -> "1e+20"
  if (s == "nan" || s == "-nan") return "nan";
  if (s == "inf") return "inf";
  if (s == "-inf") return "-inf";
  auto e = s.find('e');
  if (e == std::string::npos) {
    if (s.find('.') == std::string::npos) s += ".0";
    return s;
  }
  // normalize exponent to at least two digits like Python ("1e-05")
  std::string mant = s.substr(0, e), ex = s.substr(e + 1);
  char sign = '+';
  if (!ex.empty() && (ex[0] == '+' || ex[0] == '-')) sign = ex[0], ex = ex.substr(1);
  while (ex.size() > 2 && ex[0] == '0') ex = ex.substr(1);
  if (ex.size() < 2) ex = "0" + ex;
  return mant + "e" + sign + ex;
}

std::string fixed_or_sci(double d, int prec) {
  char buf[64];
  // Python repr uses scientific notation when exp < -4 or exp >= 16
  int exp10 = d == 0 ? 0 : static_cast<int>(std::floor(std::log10(std::fabs(d))));
  if (exp10 < -4 || exp10 >= 16) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, d);
    std::string s = buf;
    // strip trailing zeros in mantissa
    auto e = s.find('e');
    std::string m = s.substr(0, e), x = s.substr(e);
    if (m.find('.') != std::string::npos) {
      while (!m.empty() && m.back() == '0') m.pop_back();
      if (!m.empty() && m.back() == '.') m.pop_back();
    }
    return python_float_style(m + x);
  }
  std::snprintf(buf, sizeof buf, "%.*g", prec, d);
  std::string s = buf;
  if (s.find('e') != std::string::npos) {
    int decimals = std::max(0, prec - 1 - exp10);
    std::snprintf(buf, sizeof buf, "%.*f", decimals, d);
    s = buf;
    if (s.find('.') != std::string::npos) {
      while (s.back() == '0') s.pop_back();
      if (s.back() == '.') s.pop_back();
    }
  }
  return python_float_style(s);
}
}  // namespace

std::string float_repr(float f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  for (int p = 1; p <= 9; ++p) {
    std::string s = fixed_or_sci(f, p);
    if (std::strtof(s.c_str(), nullptr) == f) return s;
  }
  return fixed_or_sci(f, 9);
}

std::string double_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  for (int p = 1; p <= 17; ++p) {
    std::string s = fixed_or_sci(d, p);
    if (std::strtod(s.c_str(), nullptr) == d) return s;
  }
  return fixed_or_sci(d, 17);
}

std::string var_to_text(const Var& v) {
  const Type* t = v.type();
  std::string s = "%" + v.name() + ": ";
  std::string ann = v.has_value() ? "*" : (v.value() ? "^" : "");
  switch (t->kind()) {
    case TypeKind::Tensor: {
      if (!t->has_rank()) {
        s += "(*, " + std::string(dtype_name(t->dtype())) + ")" + ann;
      } else {
        std::string sh = "(";
        for (size_t i = 0; i < t->shape().size(); ++i)
          sh += (i ? ", " : "") + t->shape()[i]->str();
        if (t->rank() == 1) sh += ",";
        if (t->rank() > 1) sh += ", ";
        s += sh + std::string(dtype_name(t->dtype())) + ")" + ann;
      }
      s += t->is_scalar() ? "(Scalar)" : "(Tensor)";
      break;
    }
    case TypeKind::List: {
      // coremltools' ListVar: List[<length or ?>, (dims, dtype)]
      std::string len = "?";
      if (!t->dynamic_length() && t->length()) len = t->length()->str();
      const Type* e = t->elem();
      std::string es = "unknown";
      if (e && e->is_tensor() && e->has_rank()) {
        // Python's str(shape) without its ")" then the dtype: "(2, 3, fp32)", "(3,fp32)", "(fp32)"
        const auto& sh = e->shape();
        es = "(";
        for (size_t i = 0; i < sh.size(); ++i) es += (i ? ", " : "") + sh[i]->str();
        if (sh.size() == 1) es += ",";
        if (sh.size() > 1) es += ", ";
        es += std::string(dtype_name(e->dtype())) + ")";
      } else if (e) {
        es = e->str();
      }
      s += "List[" + len + ", " + es + "]" + ann + "(List)";
      break;
    }
    case TypeKind::State: s += t->elem()->str() + ann + "(State)"; break;
    default: s += t->str() + ann + "(Scalar)"; break;
  }
  return s;
}

namespace {
std::string elem_text(const Value& v, int64_t i, bool scalar) {
  DataType dt = v.dtype();
  if (dt == DataType::String) return "\"" + v.string_values()[i] + "\"";
  if (v.is_symbolic()) return v.dims()[i]->str();
  if (dt == DataType::Bool) return v.as_int(i) ? "True" : "False";
  if (is_float(dt)) {
    double d = v.as_double(i);
    if (scalar && dt != DataType::Float64) return float_repr(static_cast<float>(d));
    return double_repr(d);
  }
  return std::to_string(v.as_int(i));
}

std::string value_text(const Value& v) {
  if (v.rank() == 0) return elem_text(v, 0, true);
  std::string s;
  std::vector<int64_t> st(v.shape().size(), 1);
  for (int i = static_cast<int>(v.shape().size()) - 2; i >= 0; --i) st[i] = st[i + 1] * v.shape()[i + 1];
  std::function<void(size_t, int64_t)> rec = [&](size_t d, int64_t off) {
    s += "[";
    for (int64_t i = 0; i < v.shape()[d]; ++i) {
      if (i) s += ", ";
      if (d + 1 == v.shape().size())
        s += v.dtype() == DataType::String ? "'" + v.string_values()[off + i] + "'"
                                           : elem_text(v, off + i, false);
      else
        rec(d + 1, off + i * st[d]);
    }
    s += "]";
  };
  rec(0, 0);
  return s;
}

std::string arg_text(const Var* v, const ProgramTextOptions& opts) {
  if (!opts.consts && v->op() && v->op()->op_type() == "const" && v->value() &&
      v->value()->numel() <= 10)
    return value_text(*v->value());
  return "%" + v->name();
}

std::string exact_elem(const Value& v, int64_t i) {
  DataType dt = v.dtype();
  if (dt == DataType::String) return quote_string(v.string_values()[static_cast<size_t>(i)]);
  if (v.is_symbolic()) return v.dims()[static_cast<size_t>(i)]->str();
  const uint8_t* p = v.raw();
  switch (dt) {
    case DataType::Bool: return v.as_int(i) ? "True" : "False";
    case DataType::Float32: {
      float f;
      std::memcpy(&f, p + i * 4, 4);
      return float_repr(f);
    }
    case DataType::Float16: {
      uint16_t h;
      std::memcpy(&h, p + i * 2, 2);
      return float_repr(half_to_float(h));
    }
    case DataType::BFloat16: {
      uint16_t h;
      std::memcpy(&h, p + i * 2, 2);
      return float_repr(bf16_to_float(h));
    }
    case DataType::Float64: return double_repr(v.as_double(i));
    case DataType::Float8E4M3FN:
    case DataType::Float8E5M2: return float_repr(static_cast<float>(v.as_double(i)));
    case DataType::UInt64: {
      uint64_t u;
      std::memcpy(&u, p + i * 8, 8);
      return std::to_string(u);
    }
    default: return std::to_string(v.as_int(i));
  }
}
}  // namespace

std::string quote_string(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '\\': o += "\\\\"; break;
      case '"': o += "\\\""; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      case '\r': o += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          o += buf;
        } else {
          o += static_cast<char>(c);
        }
    }
  }
  return o + "\"";
}

std::string value_to_exact_text(const Value& v) {
  if (v.rank() == 0) return exact_elem(v, 0);
  std::string s;
  const auto& shape = v.shape();
  std::vector<int64_t> st(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * shape[i + 1];
  std::function<void(size_t, int64_t)> rec = [&](size_t d, int64_t off) {
    s += "[";
    for (int64_t i = 0; i < shape[d]; ++i) {
      if (i) s += ", ";
      if (d + 1 == shape.size())
        s += exact_elem(v, off + i);
      else
        rec(d + 1, off + i * st[d]);
    }
    s += "]";
  };
  rec(0, 0);
  return s;
}

std::string op_to_text(const Operation& op, const std::string& indent) {
  return op_to_text(op, indent, ProgramTextOptions{});
}

std::string op_to_text(const Operation& op, const std::string& indent, const ProgramTextOptions& opts) {
  if (op.op_type() == "const") {
    if (!opts.consts) return "";
    std::string s = indent + var_to_text(*op.output(0)) + " = const(val=";
    const auto& v = op.output(0)->value();
    if (!v)
      s += "<no value>";
    else if (static_cast<uint64_t>(v->numel()) > opts.max_const_elems)
      s += "<elided " + std::to_string(v->numel()) + " elems>";
    else
      s += value_to_exact_text(*v);
    return s + ", name=" + quote_string(op.name()) + ")\n";
  }
  std::string s = indent;
  for (size_t i = 0; i < op.outputs().size(); ++i) s += (i ? ", " : "") + var_to_text(*op.outputs()[i]);
  s += " = " + op.op_type() + "(";
  bool first = true;
  for (size_t i = 0; i < op.num_inputs(); ++i) {
    VarSpan vs = op.input(i);
    if (vs.empty()) continue;
    s += (first ? "" : ", ") + op.schema().inputs[i].name + "=";
    first = false;
    if (op.schema().inputs[i].kind == InputKind::Tuple) {
      s += "(";
      for (size_t k = 0; k < vs.size(); ++k) s += (k ? ", " : "") + ("%" + vs[k]->name());
      s += ")";
    } else {
      s += arg_text(vs[0], opts);
    }
  }
  s += std::string(first ? "" : ", ") + "name=\"" + op.name() + "\")\n";
  int counter = 0;
  for (const Block* b : op.blocks()) s += block_to_text(*b, indent + "  ", counter, opts);
  return s;
}

std::string block_to_text(const Block& b, const std::string& indent, int& block_counter) {
  return block_to_text(b, indent, block_counter, ProgramTextOptions{});
}

std::string block_to_text(const Block& b, const std::string& indent, int& block_counter,
                          const ProgramTextOptions& opts) {
  // nested blocks are named as coremltools names them: <op>_true / <op>_false (cond),
  // <op>_cond_block / <op>_body_block (while_loop)
  std::string bname = "block" + std::to_string(block_counter++);
  if (const Operation* p = b.parent_op()) {
    size_t idx = 0;
    while (idx < p->blocks().size() && p->blocks()[idx] != &b) ++idx;
    if (p->op_type() == "cond" && idx < 2) bname = p->name() + (idx == 0 ? "_true" : "_false");
    if (p->op_type() == "while_loop" && idx < 2) bname = p->name() + (idx == 0 ? "_cond_block" : "_body_block");
  }
  std::string s = indent + bname + "(";
  if (b.parent_op())
    for (size_t i = 0; i < b.inputs().size(); ++i) s += (i ? ", " : "") + var_to_text(*b.inputs()[i]);
  s += ") {\n";
  for (const Operation* op = b.front(); op; op = op->next()) s += op_to_text(*op, indent + "  ", opts);
  s += indent + "} -> (";
  for (size_t i = 0; i < b.outputs().size(); ++i) s += (i ? ", " : "") + ("%" + b.outputs()[i]->name());
  s += ")\n";
  return s;
}

std::string function_to_text(const Function& f, const std::string& name) {
  return function_to_text(f, name, ProgramTextOptions{});
}

std::string function_to_text(const Function& f, const std::string& name, const ProgramTextOptions& opts) {
  std::string head = name + "[" + opset_name(f.opset()) + "]";
  std::string s = head + "(";
  for (size_t i = 0; i < f.inputs().size(); ++i) {
    if (i) s += ",\n" + std::string(head.size() + 1, ' ');
    s += var_to_text(*f.inputs()[i]);
  }
  s += ") {\n";
  int counter = 0;
  s += block_to_text(f.body(), "  ", counter, opts);
  s += "}\n";
  return s;
}

std::string program_to_text(const Program& p) { return program_to_text(p, ProgramTextOptions{}); }

std::string program_to_text(const Program& p, const ProgramTextOptions& opts) {
  std::string s;
  for (auto& [name, f] : p.functions()) s += "\n" + function_to_text(*f, name, opts);
  return s;
}

}  // namespace milkit
