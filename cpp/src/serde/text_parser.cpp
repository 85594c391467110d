// MIL text -> Program: a hand-written lexer and recursive-descent parser (see text_parser.h).
#include "milkit/serde/text_parser.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "milkit/builder/builder.h"
#include "milkit/ops/registry.h"
#include "milkit/types/error.h"

namespace milkit {

namespace {

// ---------------------------------------------------------------------------------------------
// Lexer

enum class Tok : uint8_t {
  End, Ident, Int, Float, Str, VarRef, LParen, RParen, LBrack, RBrack, LBrace, RBrace, Comma,
  Colon, Eq, Star, StarStar, Caret, Plus, Minus, SlashSlash, Percent, Arrow, Lt, Gt, Question,
};

struct Token {
  Tok kind = Tok::End;
  std::string text;  // identifier, number text, unescaped string, var name (without '%')
  int line = 1;
  int col = 1;
};

constexpr int kMaxDepth = 64;
constexpr uint64_t kMaxElidedBytes = uint64_t{1} << 31;

std::string where(int line, int col) {
  return "line " + std::to_string(line) + ", column " + std::to_string(col) + ": ";
}

[[noreturn]] void fail_at(const Token& t, const std::string& msg) {
  throw FormatError(where(t.line, t.col) + msg);
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::End: return "the end of the text";
    case Tok::Str: return "string \"" + t.text.substr(0, 40) + "\"";
    case Tok::VarRef: return "'%" + t.text.substr(0, 40) + "'";
    default: return "'" + t.text.substr(0, 40) + "'";
  }
}

bool is_name_char(char c) {
  if (static_cast<unsigned char>(c) <= ' ') return false;
  return !std::strchr(",()[]{}:=\"'", c);
}

std::vector<Token> lex(const std::string& s) {
  std::vector<Token> out;
  size_t i = 0;
  int line = 1, col = 1;
  auto adv = [&](size_t n) {
    for (size_t k = 0; k < n && i < s.size(); ++k, ++i) {
      if (s[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
  };
  auto isdig = [](char c) { return c >= '0' && c <= '9'; };
  auto isalpha_ = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  while (true) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) adv(1);
    Token t;
    t.line = line;
    t.col = col;
    if (i >= s.size()) {
      t.kind = Tok::End;
      out.push_back(t);
      return out;
    }
    char c = s[i];
    char n1 = i + 1 < s.size() ? s[i + 1] : '\0';
    if (isalpha_(c)) {
      size_t j = i;
      while (j < s.size() && (isalpha_(s[j]) || isdig(s[j]))) ++j;
      t.kind = Tok::Ident;
      t.text = s.substr(i, j - i);
      adv(j - i);
    } else if (isdig(c)) {
      size_t j = i;
      bool is_float = false;
      while (j < s.size() && isdig(s[j])) ++j;
      if (j < s.size() && s[j] == '.') {
        is_float = true;
        ++j;
        while (j < s.size() && isdig(s[j])) ++j;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && isdig(s[k])) {
          is_float = true;
          j = k;
          while (j < s.size() && isdig(s[j])) ++j;
        }
      }
      t.kind = is_float ? Tok::Float : Tok::Int;
      t.text = s.substr(i, j - i);
      adv(j - i);
    } else if (c == '"' || c == '\'') {
      adv(1);
      std::string v;
      while (true) {
        if (i >= s.size() || s[i] == '\n') {
          Token e = t;
          fail_at(e, "unterminated string");
        }
        char d = s[i];
        if (d == c) {
          adv(1);
          break;
        }
        if (d == '\\') {
          if (i + 1 >= s.size()) fail_at(t, "unterminated string");
          char e = s[i + 1];
          int el = line, ec = col;
          adv(2);
          switch (e) {
            case '\\': v += '\\'; break;
            case '"': v += '"'; break;
            case '\'': v += '\''; break;
            case 'n': v += '\n'; break;
            case 't': v += '\t'; break;
            case 'r': v += '\r'; break;
            case 'x': {
              auto hex = [](char h) -> int {
                if (h >= '0' && h <= '9') return h - '0';
                if (h >= 'a' && h <= 'f') return h - 'a' + 10;
                if (h >= 'A' && h <= 'F') return h - 'A' + 10;
                return -1;
              };
              int a = i < s.size() ? hex(s[i]) : -1;
              int b = i + 1 < s.size() ? hex(s[i + 1]) : -1;
              if (a < 0 || b < 0) throw FormatError(where(el, ec) + "expected two hex digits after \\x");
              v += static_cast<char>(a * 16 + b);
              adv(2);
              break;
            }
            default: throw FormatError(where(el, ec) + "unknown escape sequence '\\" + std::string(1, e) + "'");
          }
          continue;
        }
        v += d;
        adv(1);
      }
      t.kind = Tok::Str;
      t.text = std::move(v);
    } else if (c == '%' && i + 1 < s.size() && is_name_char(n1)) {
      size_t j = i + 1;
      while (j < s.size() && is_name_char(s[j])) ++j;
      t.kind = Tok::VarRef;
      t.text = s.substr(i + 1, j - i - 1);
      adv(j - i);
    } else {
      size_t len = 1;
      switch (c) {
        case '(': t.kind = Tok::LParen; break;
        case ')': t.kind = Tok::RParen; break;
        case '[': t.kind = Tok::LBrack; break;
        case ']': t.kind = Tok::RBrack; break;
        case '{': t.kind = Tok::LBrace; break;
        case '}': t.kind = Tok::RBrace; break;
        case ',': t.kind = Tok::Comma; break;
        case ':': t.kind = Tok::Colon; break;
        case '=': t.kind = Tok::Eq; break;
        case '^': t.kind = Tok::Caret; break;
        case '+': t.kind = Tok::Plus; break;
        case '<': t.kind = Tok::Lt; break;
        case '>': t.kind = Tok::Gt; break;
        case '%': t.kind = Tok::Percent; break;
        case '?': t.kind = Tok::Question; break;
        case '*':
          if (n1 == '*') t.kind = Tok::StarStar, len = 2;
          else t.kind = Tok::Star;
          break;
        case '-':
          if (n1 == '>') t.kind = Tok::Arrow, len = 2;
          else t.kind = Tok::Minus;
          break;
        case '/':
          if (n1 != '/') fail_at(t, "unexpected character '/' (expected '//')");
          t.kind = Tok::SlashSlash;
          len = 2;
          break;
        default: {
          char buf[16];
          if (static_cast<unsigned char>(c) >= 0x21 && static_cast<unsigned char>(c) < 0x7f)
            std::snprintf(buf, sizeof buf, "'%c'", c);
          else
            std::snprintf(buf, sizeof buf, "0x%02x", static_cast<unsigned char>(c));
          fail_at(t, std::string("unexpected character ") + buf);
        }
      }
      t.text = s.substr(i, len);
      adv(len);
    }
    out.push_back(std::move(t));
  }
}

// ---------------------------------------------------------------------------------------------
// Literals

enum class LitKind : uint8_t { Int, Float, Bool, Str, Sym };

struct Lit {
  LitKind kind = LitKind::Int;
  std::string text;  // number text (with a leading '-'), string, "True"/"False"
  Dim dim = nullptr;  // symbolic element
  Token tok;
};

struct LitTensor {
  std::vector<int64_t> shape;
  std::vector<Lit> elems;
  Token tok;
};

// What kind of dtype a literal asks for.
enum class LitClass : uint8_t { Empty, Bool, Str, Int, Float, Sym, Mixed };

LitClass classify(const LitTensor& l) {
  if (l.elems.empty()) return LitClass::Empty;
  bool b = false, s = false, i = false, f = false, y = false;
  for (const Lit& e : l.elems) {
    b |= e.kind == LitKind::Bool;
    s |= e.kind == LitKind::Str;
    i |= e.kind == LitKind::Int;
    f |= e.kind == LitKind::Float;
    y |= e.kind == LitKind::Sym;
  }
  int kinds = b + s + (i || f || y);
  if (kinds > 1) return LitClass::Mixed;
  if (b) return LitClass::Bool;
  if (s) return LitClass::Str;
  if (y) return f ? LitClass::Mixed : LitClass::Sym;
  return f ? LitClass::Float : LitClass::Int;
}

double lit_double(const Lit& e) {
  const std::string& t = e.text;
  bool neg = !t.empty() && t[0] == '-';
  std::string m = neg ? t.substr(1) : t;
  double d;
  if (m == "inf") d = std::numeric_limits<double>::infinity();
  else if (m == "nan") d = std::numeric_limits<double>::quiet_NaN();
  else d = std::strtod(m.c_str(), nullptr);
  return neg ? -d : d;
}

float lit_float(const Lit& e) {
  const std::string& t = e.text;
  bool neg = !t.empty() && t[0] == '-';
  std::string m = neg ? t.substr(1) : t;
  float f;
  if (m == "inf") f = std::numeric_limits<float>::infinity();
  else if (m == "nan") f = std::numeric_limits<float>::quiet_NaN();
  else f = std::strtof(m.c_str(), nullptr);
  return neg ? -f : f;
}

// Builds a value of dtype `dt` from a literal; returns nullptr and sets `err` when it does not fit.
std::shared_ptr<const Value> lit_value(const LitTensor& l, DataType dt, SymbolContext& sctx,
                                       std::string& err) {
  const size_t n = l.elems.size();
  auto bad = [&](const Lit& e, const std::string& what) {
    err = where(e.tok.line, e.tok.col) + what;
    return nullptr;
  };
  if (dt == DataType::String) {
    std::vector<std::string> v;
    for (const Lit& e : l.elems) {
      if (e.kind != LitKind::Str) return bad(e, "expected a string element for dtype string");
      v.push_back(e.text);
    }
    return std::make_shared<const Value>(Value::strings(l.shape, std::move(v)));
  }
  if (dt == DataType::Bool) {
    std::vector<int64_t> v;
    for (const Lit& e : l.elems) {
      if (e.kind != LitKind::Bool) return bad(e, "expected True or False for dtype bool");
      v.push_back(e.text == "True");
    }
    return std::make_shared<const Value>(Value::from_ints(dt, l.shape, v));
  }
  if (is_int(dt)) {
    bool symbolic = false;
    std::vector<int64_t> v;
    v.reserve(n);
    for (const Lit& e : l.elems) {
      if (e.kind == LitKind::Sym) {
        symbolic = true;
        v.push_back(0);
        continue;
      }
      if (e.kind != LitKind::Int)
        return bad(e, "expected an integer element for dtype " + std::string(dtype_name(dt)));
      errno = 0;
      char* end = nullptr;
      int64_t x;
      if (!e.text.empty() && e.text[0] == '-') {
        long long s = std::strtoll(e.text.c_str(), &end, 10);
        if (errno == ERANGE || s < int_min(dt))
          return bad(e, e.text + " is out of range for dtype " + std::string(dtype_name(dt)));
        x = s;
      } else {
        unsigned long long u = std::strtoull(e.text.c_str(), &end, 10);
        uint64_t hi = dt == DataType::UInt64 ? UINT64_MAX : static_cast<uint64_t>(int_max(dt));
        if (errno == ERANGE || u > hi)
          return bad(e, e.text + " is out of range for dtype " + std::string(dtype_name(dt)));
        x = static_cast<int64_t>(u);
      }
      v.push_back(x);
    }
    if (symbolic) {
      if (dt != DataType::Int32 && dt != DataType::Int64) {
        err = where(l.tok.line, l.tok.col) + "symbolic elements need dtype int32 or int64";
        return nullptr;
      }
      std::vector<Dim> dims;
      for (size_t k = 0; k < n; ++k)
        dims.push_back(l.elems[k].kind == LitKind::Sym ? l.elems[k].dim : sctx.constant(v[k]));
      return std::make_shared<const Value>(Value::from_dims(dt, l.shape, std::move(dims)));
    }
    return std::make_shared<const Value>(Value::from_ints(dt, l.shape, v));
  }
  if (is_float(dt)) {
    for (const Lit& e : l.elems)
      if (e.kind != LitKind::Float && e.kind != LitKind::Int)
        return bad(e, "expected a number for dtype " + std::string(dtype_name(dt)));
    if (dt == DataType::Float32) {
      std::vector<uint8_t> bytes(n * 4);
      for (size_t k = 0; k < n; ++k) {
        float f = lit_float(l.elems[k]);
        std::memcpy(bytes.data() + k * 4, &f, 4);
      }
      return std::make_shared<const Value>(dt, l.shape, Buffer::take(std::move(bytes)));
    }
    std::vector<double> v;
    v.reserve(n);
    for (const Lit& e : l.elems)
      v.push_back(dt == DataType::Float64 ? lit_double(e) : static_cast<double>(lit_float(e)));
    return std::make_shared<const Value>(Value::from_doubles(dt, l.shape, v));
  }
  err = where(l.tok.line, l.tok.col) + "cannot make a value of dtype " + std::string(dtype_name(dt));
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Parser

struct Decl {
  std::string name;
  const Type* type = nullptr;
  char marker = 0;  // '*', '^' or 0
  Token tok;
};

struct ArgVal {
  enum Kind : uint8_t { Ref, Tuple, Literal, Elided } kind = Ref;
  Token tok;               // first token of the value
  std::vector<Token> refs;  // Ref (one) / Tuple
  LitTensor lit;
  uint64_t elided = 0;
};

struct ParsedArg {
  Token name;
  ArgVal val;
};

class Parser {
 public:
  explicit Parser(const std::string& text) : toks_(lex(text)) {
    // every name the text defines or uses: builder-made names must never take one of them
    for (size_t i = 0; i < toks_.size(); ++i) {
      if (toks_[i].kind == Tok::VarRef) names_.insert(toks_[i].text);
      if (toks_[i].kind == Tok::Str && i >= 2 && toks_[i - 1].kind == Tok::Eq &&
          toks_[i - 2].kind == Tok::Ident && toks_[i - 2].text == "name")
        names_.insert(toks_[i].text);
    }
  }

  std::shared_ptr<Program> program() {
    auto prog = std::make_shared<Program>();
    while (peek().kind != Tok::End) {
      Token at = peek();
      std::string name;
      auto f = function(&name);
      try {
        prog->add_function(name, f);
      } catch (const Error& e) {
        fail_at(at, e.what());
      }
    }
    return prog;
  }

  std::shared_ptr<Function> single_function(std::string* name) {
    if (peek().kind == Tok::End) fail_at(peek(), "expected a function but found " + describe(peek()));
    auto f = function(name);
    if (peek().kind != Tok::End) fail_at(peek(), "expected the end of the text after the function but found " + describe(peek()));
    return f;
  }

  // The token that was being looked at (for errors that do not carry a position).
  const Token& current() const { return toks_[std::min(pos_, toks_.size() - 1)]; }

 private:
  const Token& peek(size_t k = 0) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  Token next() {
    Token t = peek();
    if (pos_ < toks_.size() - 1) ++pos_;
    return t;
  }
  bool accept(Tok k) {
    if (peek().kind != k) return false;
    next();
    return true;
  }
  Token expect(Tok k, const std::string& what) {
    if (peek().kind != k) fail_at(peek(), "expected " + what + " but found " + describe(peek()));
    return next();
  }
  Token expect_ident(const std::string& text) {
    if (peek().kind != Tok::Ident || peek().text != text)
      fail_at(peek(), "expected '" + text + "' but found " + describe(peek()));
    return next();
  }

  struct DepthGuard {
    int& d;
    DepthGuard(int& d, const Token& t) : d(d) {
      if (++d > kMaxDepth) {
        --d;
        fail_at(t, "nesting deeper than " + std::to_string(kMaxDepth) + " levels");
      }
    }
    ~DepthGuard() { --d; }
  };

  // ---- symbols and dims -------------------------------------------------------------------
  Dim symbol_dim(const Token& t) {
    auto b = bound_.find(t.text);
    if (b != bound_.end()) return b->second;
    auto it = syms_.find(t.text);
    if (it == syms_.end()) {
      it = syms_.emplace(t.text, Symbol::create(t.text)).first;
      if (decl_mode_) provisional_.insert(t.text);
    }
    return ctx_->symbol(it->second);
  }

  template <class F>
  Dim dim_op(const Token& t, F&& f) {
    try {
      return f();
    } catch (const Error& e) {
      fail_at(t, e.what());
    }
  }

  Dim expr_sum() {
    DepthGuard g(depth_, peek());
    Dim a = expr_term();
    while (peek().kind == Tok::Plus || peek().kind == Tok::Minus) {
      Token op = next();
      Dim b = expr_term();
      a = dim_op(op, [&] { return op.kind == Tok::Plus ? ctx_->add(a, b) : ctx_->sub(a, b); });
    }
    return a;
  }

  Dim expr_term() {
    Dim a = expr_unary();
    while (peek().kind == Tok::Star || peek().kind == Tok::SlashSlash || peek().kind == Tok::Percent) {
      Token op = next();
      Dim b = expr_unary();
      a = dim_op(op, [&] {
        if (op.kind == Tok::Star) return ctx_->mul(a, b);
        if (op.kind == Tok::SlashSlash) return ctx_->floordiv(a, b);
        return ctx_->mod(a, b);
      });
    }
    return a;
  }

  Dim expr_unary() {
    DepthGuard g(depth_, peek());
    if (peek().kind == Tok::Minus) {
      Token op = next();
      Dim a = expr_unary();
      return dim_op(op, [&] { return ctx_->neg(a); });
    }
    Dim a = expr_atom();
    if (peek().kind == Tok::StarStar) {
      Token op = next();
      Dim e = expr_unary();
      if (!e->is_const() || e->value() < 0 || e->value() > 64)
        fail_at(op, "an exponent must be an integer in [0, 64]");
      Dim r = ctx_->constant(1);
      for (int64_t k = 0; k < e->value(); ++k) r = dim_op(op, [&] { return ctx_->mul(r, a); });
      return r;
    }
    return a;
  }

  Dim expr_atom() {
    const Token& t = peek();
    if (t.kind == Tok::Int) {
      Token n = next();
      errno = 0;
      long long v = std::strtoll(n.text.c_str(), nullptr, 10);
      if (errno == ERANGE) fail_at(n, "integer " + n.text + " is too large");
      return ctx_->constant(v);
    }
    if (t.kind == Tok::LParen) {
      next();
      Dim d = expr_sum();
      expect(Tok::RParen, "')'");
      return d;
    }
    if (t.kind == Tok::Ident) {
      Token n = next();
      if ((n.text == "min" || n.text == "max") && peek().kind == Tok::LParen) {
        next();
        Dim d = expr_sum();
        int count = 1;
        while (accept(Tok::Comma)) {
          Dim e = expr_sum();
          d = dim_op(n, [&] { return n.text == "min" ? ctx_->min(d, e) : ctx_->max(d, e); });
          ++count;
        }
        expect(Tok::RParen, "')' or ','");
        if (count < 2) fail_at(n, n.text + "() needs at least two arguments");
        return d;
      }
      return symbol_dim(n);
    }
    fail_at(t, "expected a dimension (an integer, a symbol or an expression) but found " + describe(t));
  }

  // ---- types ------------------------------------------------------------------------------
  std::optional<DataType> dtype_at(size_t k) const {
    const Token& t = peek(k);
    if (t.kind != Tok::Ident) return std::nullopt;
    auto d = dtype_from_name(t.text);
    if (!d || *d == DataType::Unused) return std::nullopt;
    return d;
  }

  DataType expect_dtype() {
    auto d = dtype_at(0);
    if (!d) fail_at(peek(), "expected a data type (fp32, int32, ...) but found " + describe(peek()));
    next();
    return *d;
  }

  const Type* type() {
    DepthGuard g(depth_, peek());
    const Token t = peek();
    if (t.kind == Tok::Ident && t.text == "list" && peek(1).kind == Tok::LBrack) {
      next();
      next();
      const Type* e = type();
      expect(Tok::Comma, "','");
      Dim len = accept(Tok::Question) ? nullptr : expr_sum();
      expect(Tok::RBrack, "']'");
      return ctx_->list(e, len, true);
    }
    if (t.kind == Tok::Ident && t.text == "List" && peek(1).kind == Tok::LBrack) {
      // coremltools' list type: List[<length or ?>, <element type or unknown>]
      next();
      next();
      Dim len = accept(Tok::Question) ? nullptr : expr_sum();
      expect(Tok::Comma, "','");
      const Type* e = nullptr;
      if (peek().kind == Tok::Ident && peek().text == "unknown") next();
      else e = type();
      expect(Tok::RBrack, "']'");
      return ctx_->list(e, len, len == nullptr);
    }
    if (t.kind == Tok::Ident && t.text == "state" && peek(1).kind == Tok::LParen) {
      next();
      const Type* w = type();
      if (!w->is_tensor()) fail_at(t, "a state must wrap a tensor type");
      return ctx_->state(w);
    }
    if (t.kind == Tok::Ident && t.text == "dict" && peek(1).kind == Tok::LBrack) {
      // dict[<key type>, <value type>] (classify's probabilities)
      next();
      next();
      const Type* k = type();
      expect(Tok::Comma, "','");
      const Type* v = type();
      expect(Tok::RBrack, "']'");
      return ctx_->dict(k, v);
    }
    if (t.kind == Tok::Ident && (t.text == "tuple" || t.text == "dict"))
      fail_at(t, t.text + " types are not supported");
    if (t.kind == Tok::Ident) return ctx_->scalar(expect_dtype());
    expect(Tok::LParen, "a type such as (1, 3, fp32) or fp32");
    if (accept(Tok::Star)) {
      expect(Tok::Comma, "','");
      DataType dt = expect_dtype();
      expect(Tok::RParen, "')'");
      return ctx_->tensor_unknown_rank(dt);
    }
    std::vector<Dim> dims;
    while (true) {
      if (dtype_at(0) && peek(1).kind == Tok::RParen) {
        DataType dt = expect_dtype();
        next();
        return dims.empty() ? ctx_->scalar(dt) : ctx_->tensor(dt, dims);
      }
      Token dt = peek();
      Dim d = expr_sum();
      if (d->is_const() && d->value() < 0) fail_at(dt, "negative dimension " + d->str());
      dims.push_back(d);
      if (dims.size() > 64) fail_at(dt, "too many dimensions");
      expect(Tok::Comma, "',' after a dimension");
    }
  }

  Decl decl() {
    Decl d;
    d.tok = expect(Tok::VarRef, "a var such as '%x'");
    d.name = d.tok.text;
    expect(Tok::Colon, "':' after the var name");
    d.type = type();
    if (accept(Tok::Star)) d.marker = '*';
    else if (accept(Tok::Caret)) d.marker = '^';
    expect(Tok::LParen, "'(' before the kind (Tensor, Scalar, List or State)");
    Token k = expect(Tok::Ident, "Tensor, Scalar, List or State");
    expect(Tok::RParen, "')'");
    const Type* t = d.type;
    if (k.text == "Tensor") {
      if (!t->is_tensor() || t->is_scalar()) fail_at(k, "a (Tensor) needs a tensor type, got " + t->str());
    } else if (k.text == "Scalar") {
      if (!t->is_scalar() && t->kind() != TypeKind::Dict)
        fail_at(k, "a (Scalar) needs a scalar or dict type, got " + t->str());
    } else if (k.text == "List") {
      if (t->kind() != TypeKind::List) fail_at(k, "a (List) needs a list type, got " + t->str());
    } else if (k.text == "State") {
      if (t->kind() == TypeKind::State) {
      } else if (t->is_tensor()) {
        d.type = ctx_->state(t);
      } else {
        fail_at(k, "a (State) needs a tensor type, got " + t->str());
      }
    } else {
      fail_at(k, "expected Tensor, Scalar, List or State but found " + describe(k));
    }
    return d;
  }

  // ---- literals ---------------------------------------------------------------------------
  bool op_follows(size_t k) const {
    Tok n = peek(k).kind;
    return n == Tok::Plus || n == Tok::Minus || n == Tok::Star || n == Tok::SlashSlash ||
           n == Tok::Percent || n == Tok::StarStar;
  }

  Lit lit_elem() {
    Lit e;
    e.tok = peek();
    const Token& t = peek();
    if (t.kind == Tok::Str) {
      e.kind = LitKind::Str;
      e.text = next().text;
      return e;
    }
    if (t.kind == Tok::Ident && (t.text == "True" || t.text == "False")) {
      e.kind = LitKind::Bool;
      e.text = next().text;
      return e;
    }
    if (t.kind == Tok::Float || (t.kind == Tok::Ident && (t.text == "inf" || t.text == "nan"))) {
      e.kind = LitKind::Float;
      e.text = next().text;
      return e;
    }
    if (t.kind == Tok::Minus) {
      const Token& u = peek(1);
      if (u.kind == Tok::Float || (u.kind == Tok::Ident && (u.text == "inf" || u.text == "nan"))) {
        next();
        e.kind = LitKind::Float;
        e.text = "-" + next().text;
        return e;
      }
      if (u.kind == Tok::Int && !op_follows(2)) {
        next();
        e.kind = LitKind::Int;
        e.text = "-" + next().text;
        return e;
      }
    }
    if (t.kind == Tok::Int && !op_follows(1)) {
      e.kind = LitKind::Int;
      e.text = next().text;
      return e;
    }
    if (t.kind == Tok::Int || t.kind == Tok::Minus || t.kind == Tok::Ident || t.kind == Tok::LParen) {
      Dim d = expr_sum();
      if (d->is_const()) {
        e.kind = LitKind::Int;
        e.text = std::to_string(d->value());
      } else {
        e.kind = LitKind::Sym;
        e.dim = d;
      }
      return e;
    }
    fail_at(t, "expected a value (a number, True, False, a string or a list) but found " + describe(t));
  }

  // Parses a (nested) list; returns the shape of this level.
  std::vector<int64_t> lit_list(LitTensor& out) {
    DepthGuard g(depth_, peek());
    expect(Tok::LBrack, "'['");
    if (accept(Tok::RBrack)) return {0};
    std::vector<int64_t> child;
    int64_t n = 0;
    while (true) {
      Token at = peek();
      std::vector<int64_t> c;
      if (peek().kind == Tok::LBrack) c = lit_list(out);
      else out.elems.push_back(lit_elem());
      if (n == 0) child = c;
      else if (c != child) fail_at(at, "ragged list: elements of different shapes");
      ++n;
      if (accept(Tok::RBrack)) break;
      expect(Tok::Comma, "',' or ']'");
    }
    std::vector<int64_t> shape{n};
    shape.insert(shape.end(), child.begin(), child.end());
    return shape;
  }

  LitTensor literal() {
    LitTensor l;
    l.tok = peek();
    if (peek().kind == Tok::LBrack) {
      l.shape = lit_list(l);
      if (l.shape.size() > 1 && l.elems.empty()) {
        // [[], []]: an empty tensor of that shape
      }
    } else {
      l.elems.push_back(lit_elem());
    }
    return l;
  }

  ArgVal arg_value() {
    ArgVal v;
    v.tok = peek();
    if (peek().kind == Tok::VarRef) {
      v.kind = ArgVal::Ref;
      v.refs.push_back(next());
      return v;
    }
    if (peek().kind == Tok::LParen && (peek(1).kind == Tok::VarRef || peek(1).kind == Tok::RParen)) {
      next();
      v.kind = ArgVal::Tuple;
      if (!accept(Tok::RParen)) {
        while (true) {
          v.refs.push_back(expect(Tok::VarRef, "a var such as '%x'"));
          if (accept(Tok::RParen)) break;
          expect(Tok::Comma, "',' or ')'");
        }
      }
      return v;
    }
    if (peek().kind == Tok::Lt) {
      next();
      expect_ident("elided");
      Token n = expect(Tok::Int, "the element count");
      errno = 0;
      v.elided = std::strtoull(n.text.c_str(), nullptr, 10);
      if (errno == ERANGE) fail_at(n, "element count too large");
      expect_ident("elems");
      expect(Tok::Gt, "'>'");
      v.kind = ArgVal::Elided;
      return v;
    }
    v.kind = ArgVal::Literal;
    v.lit = literal();
    return v;
  }

  // ---- structure --------------------------------------------------------------------------
  std::shared_ptr<Function> function(std::string* out_name) {
    Token nt = expect(Tok::Ident, "a function name");
    expect(Tok::LBrack, "'[' and the opset (main[CoreML7])");
    Token ot = expect(Tok::Ident, "an opset such as CoreML7");
    auto target = target_from_opset(ot.text);
    if (!target) fail_at(ot, "unknown opset '" + ot.text + "' (expected CoreML<N>, e.g. CoreML7 for iOS17)");
    expect(Tok::RBrack, "']'");
    auto f = std::make_shared<Function>(*target);
    ctx_ = &f->ctx();
    fn_ = f.get();
    scope_.clear();
    scope_log_.clear();
    bound_.clear();
    for (const auto& n : names_) ctx_->reserve_name(n);
    expect(Tok::LParen, "'(' before the function inputs");
    if (!accept(Tok::RParen)) {
      while (true) {
        Decl d = decl();
        if (d.marker) fail_at(d.tok, "a function input cannot have a known value");
        if (d.type->kind() != TypeKind::Tensor && d.type->kind() != TypeKind::State)
          fail_at(d.tok, "function inputs must be tensors or states");
        if (scope_.count(d.name)) fail_at(d.tok, "var '%" + d.name + "' defined twice");
        scope_[d.name] = f->add_input(d.name, d.type);
        if (accept(Tok::RParen)) break;
        expect(Tok::Comma, "',' or ')'");
      }
    }
    expect(Tok::LBrace, "'{'");
    Builder b(*f);
    block(b, f->body());
    expect(Tok::RBrace, "'}' closing the function");
    if (out_name) *out_name = nt.text;
    return f;
  }

  void block(Builder& b, Block& blk) {
    Token bt = expect(Tok::Ident, "a block such as block0");
    if (bt.text.rfind("block", 0) != 0) fail_at(bt, "expected a block such as block0 but found " + describe(bt));
    expect(Tok::LParen, "'('");
    if (peek().kind != Tok::RParen) fail_at(peek(), "a function body block cannot have inputs");
    next();
    expect(Tok::LBrace, "'{'");
    while (peek().kind == Tok::VarRef) operation(b);
    blk.set_outputs(block_end());
  }

  // "} -> (%a, %b)": the end of a block and its outputs.
  std::vector<Var*> block_end() {
    expect(Tok::RBrace, "an op (starting with a var such as '%x') or '}'");
    expect(Tok::Arrow, "'->' and the block outputs");
    expect(Tok::LParen, "'('");
    std::vector<Var*> outs;
    if (!accept(Tok::RParen)) {
      while (true) {
        Token r = expect(Tok::VarRef, "a var such as '%x'");
        outs.push_back(lookup(r));
        if (accept(Tok::RParen)) break;
        expect(Tok::Comma, "',' or ')'");
      }
    }
    return outs;
  }

  Var* lookup(const Token& t) {
    auto it = scope_.find(t.text);
    if (it != scope_.end()) return it->second;
    bool later = false;
    for (size_t k = pos_; k < toks_.size(); ++k)
      if (toks_[k].kind == Tok::VarRef && toks_[k].text == t.text && k + 1 < toks_.size() &&
          toks_[k + 1].kind == Tok::Colon)
        later = true;
    if (later) fail_at(t, "var '%" + t.text + "' is used before it is defined");
    fail_at(t, "undefined var '%" + t.text +
                   "' (coremltools' format does not print consts with more than 10 elements or "
                   "consts in tuple inputs; print the program with consts=True to parse it back)");
  }

  void define(const Decl& d, Var* v) {
    if (scope_.count(d.name)) fail_at(d.tok, "var '%" + d.name + "' defined twice");
    v->set_name(d.name);
    scope_[d.name] = v;
    scope_log_.push_back(d.name);
  }

  // A nested block of `op`: "name(inputs) { ops } -> (outputs)". Its inputs are shared with the
  // op's previous block when they have the same names and types (while_loop's cond and body
  // blocks); names defined inside leave the scope at its end.
  void nested_block(Builder& b, Operation* op) {
    DepthGuard g(depth_, peek());
    expect(Tok::Ident, "a nested block such as cond_0_true");
    expect(Tok::LParen, "'('");
    std::vector<Decl> ins;
    if (!accept(Tok::RParen)) {
      while (true) {
        ins.push_back(decl());
        if (ins.back().marker) fail_at(ins.back().tok, "a block input cannot have a known value");
        if (accept(Tok::RParen)) break;
        expect(Tok::Comma, "',' or ')'");
      }
    }
    Block* prev = op->blocks().empty() ? nullptr : op->blocks().back();
    bool share = prev && prev->inputs().size() == ins.size() && !ins.empty();
    for (size_t i = 0; share && i < ins.size(); ++i)
      share = prev->inputs()[i]->name() == ins[i].name && prev->inputs()[i]->type() == ins[i].type;
    Block* blk = fn_->add_block(op);
    size_t mark = scope_log_.size();
    for (size_t i = 0; i < ins.size(); ++i) {
      if (share) {
        fn_->share_block_input(blk, prev->inputs()[i]);
        define(ins[i], prev->inputs()[i]);
      } else {
        if (scope_.count(ins[i].name)) fail_at(ins[i].tok, "var '%" + ins[i].name + "' defined twice");
        define(ins[i], fn_->add_block_input(blk, ins[i].name, ins[i].type));
      }
    }
    expect(Tok::LBrace, "'{'");
    b.fill_block(blk, [&](const std::vector<Var*>&) {
      while (peek().kind == Tok::VarRef) operation(b);
      return block_end();
    });
    while (scope_log_.size() > mark) {
      scope_.erase(scope_log_.back());
      scope_log_.pop_back();
    }
  }

  void operation(Builder& b) {
    Token start = peek();
    std::vector<Decl> decls;
    decl_mode_ = true;
    provisional_.clear();
    while (true) {
      decls.push_back(decl());
      if (!accept(Tok::Comma)) break;
    }
    decl_mode_ = false;
    expect(Tok::Eq, "'=' or ','");
    Token ot = expect(Tok::Ident, "an op type");
    expect(Tok::LParen, "'('");
    std::vector<ParsedArg> args;
    if (!accept(Tok::RParen)) {
      while (true) {
        ParsedArg a;
        a.name = expect(Tok::Ident, "an argument name");
        expect(Tok::Eq, "'='");
        a.val = arg_value();
        args.push_back(std::move(a));
        if (accept(Tok::RParen)) break;
        expect(Tok::Comma, "',' or ')'");
      }
    }
    blocks_pos_ = pos_;  // nested blocks (control flow) follow the op
    for (size_t i = 0; i < args.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (args[i].name.text == args[j].name.text)
          fail_at(args[i].name, "argument '" + args[i].name.text + "' given twice");
    if (ot.text == "const") const_op(b, decls, args, ot);
    else regular_op(b, decls, args, ot);
  }

  void const_op(Builder& b, const std::vector<Decl>& decls, const std::vector<ParsedArg>& args,
                const Token& ot) {
    if (decls.size() != 1) fail_at(ot, "a const has exactly one output");
    const Decl& d = decls[0];
    const ParsedArg* val = nullptr;
    std::string name;
    for (const auto& a : args) {
      if (a.name.text == "val") {
        val = &a;
      } else if (a.name.text == "name") {
        if (a.val.kind != ArgVal::Literal || a.val.lit.elems.size() != 1 || !a.val.lit.shape.empty() ||
            a.val.lit.elems[0].kind != LitKind::Str)
          fail_at(a.val.tok, "expected the op name as a string");
        name = a.val.lit.elems[0].text;
      } else {
        fail_at(a.name, "const takes only 'val' and 'name', got '" + a.name.text + "'");
      }
    }
    if (!val) fail_at(ot, "const without 'val'");
    const Type* t = d.type;
    if (t->kind() == TypeKind::List) {
      define(d, list_const(b, d, *val, name, ot));
      return;
    }
    if (!t->is_tensor() || !t->is_static())
      fail_at(d.tok, "a const needs a tensor type with a static shape, got " + t->str());
    std::vector<int64_t> shape;
    for (Dim x : t->shape()) shape.push_back(x->value());
    int64_t numel;
    try {
      numel = shape_numel(shape);
    } catch (const Error& e) {
      fail_at(d.tok, e.what());
    }
    DataType dt = t->dtype();
    std::shared_ptr<const Value> v;
    if (val->val.kind == ArgVal::Elided) {
      if (val->val.elided != static_cast<uint64_t>(numel))
        fail_at(val->val.tok, "elided value of " + std::to_string(val->val.elided) +
                                  " elements, the declared type " + t->str() + " has " +
                                  std::to_string(numel));
      uint64_t bytes = static_cast<uint64_t>(numel) * static_cast<uint64_t>(std::max(1, dtype_storage_bytes(dt)));
      if (bytes > kMaxElidedBytes) fail_at(val->val.tok, "elided value too large to materialize as zeros");
      if (dt == DataType::String)
        v = std::make_shared<const Value>(Value::strings(shape, std::vector<std::string>(static_cast<size_t>(numel))));
      else
        v = std::make_shared<const Value>(dt, shape, Buffer::take(std::vector<uint8_t>(bytes)));
    } else if (val->val.kind == ArgVal::Literal) {
      const LitTensor& l = val->val.lit;
      if (l.shape != shape && !(numel == 0 && l.elems.empty()))
        fail_at(val->val.tok, "value of shape " + shape_str(l.shape) + " for declared type " + t->str());
      LitTensor fixed = l;
      fixed.shape = shape;
      std::string err;
      v = lit_value(fixed, dt, *ctx_, err);
      if (!v) throw FormatError(err);
      if (v->is_symbolic()) fail_at(val->val.tok, "a const value must be fully known");
    } else {
      fail_at(val->val.tok, "expected the const value");
    }
    Var* out;
    try {
      out = b.add_const(v, name.empty() ? d.name : name);
    } catch (const Error& e) {
      fail_at(ot, e.what());
    }
    if (out->type() != t) fail_at(d.tok, "declared type " + t->str() + " but the value has type " + out->type()->str());
    define(d, out);
  }

  // A const list of scalars (coremltools' mil_list): "List[3, (string)]" with a rank-1 literal.
  Var* list_const(Builder& b, const Decl& d, const ParsedArg& val, const std::string& name, const Token& ot) {
    const Type* t = d.type;
    const Type* e = t->elem();
    if (!e || !e->is_scalar() || t->dynamic_length() || !t->length() || !t->length()->is_const())
      fail_at(d.tok, "a const list needs a fixed length and scalar elements, got " + t->str());
    const int64_t n = t->length()->value();
    const DataType dt = e->dtype();
    std::shared_ptr<const Value> v;
    if (val.val.kind == ArgVal::Elided) {
      if (val.val.elided != static_cast<uint64_t>(n))
        fail_at(val.val.tok, "elided value of " + std::to_string(val.val.elided) + " elements, the declared type " +
                                 t->str() + " has " + std::to_string(n));
      if (static_cast<uint64_t>(n) * 8 > kMaxElidedBytes) fail_at(val.val.tok, "elided value too large");
      if (dt == DataType::String)
        v = std::make_shared<const Value>(Value::strings({n}, std::vector<std::string>(static_cast<size_t>(n))));
      else
        v = std::make_shared<const Value>(Value::from_ints(dt, {n}, std::vector<int64_t>(static_cast<size_t>(n))));
    } else if (val.val.kind == ArgVal::Literal) {
      const LitTensor& l = val.val.lit;
      if (l.shape != std::vector<int64_t>{n})
        fail_at(val.val.tok, "value of shape " + shape_str(l.shape) + " for declared type " + t->str());
      std::string err;
      v = lit_value(l, dt, *ctx_, err);
      if (!v) throw FormatError(err);
      if (v->is_symbolic()) fail_at(val.val.tok, "a const value must be fully known");
    } else {
      fail_at(val.val.tok, "expected the const value");
    }
    Var* out;
    try {
      out = b.add_const(std::make_shared<const Value>(Value::list_of(*v)), name.empty() ? d.name : name);
    } catch (const Error& ex) {
      fail_at(ot, ex.what());
    }
    if (out->type() != t) fail_at(d.tok, "declared type " + t->str() + " but the value has type " + out->type()->str());
    return out;
  }

  static std::string shape_str(const std::vector<int64_t>& s) {
    std::string r = "(";
    for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + (s.size() == 1 ? ",)" : ")");
  }

  // Structural match of a declared type against the inferred one; names first seen in this
  // op's declared outputs may stand for any inferred dim (recorded in `bind`).
  bool unify(const Type* decl, const Type* inf, std::unordered_map<std::string, Dim>& bind) {
    if (decl == inf) return true;
    if (decl->kind() != inf->kind() || decl->dtype() != inf->dtype()) return false;
    switch (decl->kind()) {
      case TypeKind::Tensor:
        if (decl->has_rank() != inf->has_rank() || decl->rank() != inf->rank()) return false;
        for (size_t i = 0; i < decl->shape().size(); ++i)
          if (!unify_dim(decl->shape()[i], inf->shape()[i], bind)) return false;
        return true;
      case TypeKind::State: return unify(decl->elem(), inf->elem(), bind);
      case TypeKind::List:
        if (decl->dynamic_length() != inf->dynamic_length()) return false;
        if (!decl->elem() || !inf->elem()) {
          if (decl->elem() != inf->elem()) return false;
        } else if (!unify(decl->elem(), inf->elem(), bind)) {
          return false;
        }
        if (decl->dynamic_length() && !decl->length()) return true;  // printed as '?'
        if (!decl->length() || !inf->length()) return decl->length() == inf->length();
        return unify_dim(decl->length(), inf->length(), bind);
      default: return false;
    }
  }

  bool unify_dim(Dim d, Dim i, std::unordered_map<std::string, Dim>& bind) {
    if (d == i) return true;
    if (d->kind() != Expr::Kind::Symbol) return false;
    const std::string& n = d->symbol()->name();
    if (!provisional_.count(n)) return false;
    auto it = bind.find(n);
    if (it != bind.end()) return it->second == i;
    bind[n] = i;
    return true;
  }

  std::vector<DataType> candidates(const ParsedArg& a, const InputDef& d, const OpSchema& s,
                                   const std::vector<ParsedArg>& args) {
    LitClass c = classify(a.val.lit);
    std::vector<DataType> out;
    if (d.kind == InputKind::List) {
      // a literal list for a list input (classify's classes): str, or ints as int64 (the label
      // types classify takes) before int32
      switch (c) {
        case LitClass::Str: return {DataType::String};
        case LitClass::Int: case LitClass::Empty: return {DataType::Int64, DataType::Int32};
        case LitClass::Float: return {DataType::Float32};
        case LitClass::Bool: return {DataType::Bool};
        default: return {DataType::String};
      }
    }
    auto add = [&](DataType t) {
      for (DataType x : out)
        if (x == t) return;
      out.push_back(t);
    };
    auto fits = [&](DataType t) {
      switch (c) {
        case LitClass::Bool: return t == DataType::Bool;
        case LitClass::Str: return t == DataType::String;
        case LitClass::Int: return is_int(t) || is_float(t);
        case LitClass::Sym: return t == DataType::Int32 || t == DataType::Int64;
        case LitClass::Float: return is_float(t);
        case LitClass::Empty: return true;
        case LitClass::Mixed: return false;
      }
      return false;
    };
    // 1. the dtype of a var input sharing the type domain
    if (!d.domain.empty()) {
      for (const auto& o : args) {
        if (&o == &a || (o.val.kind != ArgVal::Ref && o.val.kind != ArgVal::Tuple) || o.val.refs.empty()) continue;
        int j = s.input_index(o.name.text);
        if (j < 0 || s.inputs[j].domain != d.domain) continue;
        auto it = scope_.find(o.val.refs[0].text);
        if (it == scope_.end()) continue;
        const Type* t = it->second->type();
        if (t->kind() == TypeKind::Tensor && fits(t->dtype())) add(t->dtype());
        break;
      }
    }
    // 2. coremltools' Python typing, then what the input accepts
    DataType first = DataType::Int32;
    switch (c) {
      case LitClass::Bool: first = DataType::Bool; break;
      case LitClass::Str: first = DataType::String; break;
      case LitClass::Float: case LitClass::Mixed: first = DataType::Float32; break;
      default: break;
    }
    const DataType pref[] = {first, DataType::Int32, DataType::Float32, DataType::Float16};
    for (DataType t : pref)
      if (fits(t) && d.dtypes.contains(t)) add(t);
    for (bool want_int : {true, false})
      for (DataType t : kAllDataTypes)
        if (fits(t) && d.dtypes.contains(t) && is_int(t) == want_int) add(t);
    if (out.empty()) add(first);  // let validation explain what is wrong
    return out;
  }

  void regular_op(Builder& b, const std::vector<Decl>& decls, const std::vector<ParsedArg>& args,
                  const Token& ot) {
    const OpSchema* s;
    std::string name;
    for (const auto& a : args)
      if (a.name.text == "name") {
        if (a.val.kind != ArgVal::Literal || a.val.lit.elems.size() != 1 || !a.val.lit.shape.empty() ||
            a.val.lit.elems[0].kind != LitKind::Str)
          fail_at(a.val.tok, "expected the op name as a string");
        name = a.val.lit.elems[0].text;
      }
    try {
      s = &schema_for(ot.text, fn_->opset(), name);
    } catch (const Error& e) {
      fail_at(ot, e.what());
    }
    if (s->input_index("name") >= 0) fail_at(ot, "internal: op with an input called 'name'");
    const size_t blocks_pos = blocks_pos_;
    if (s->num_blocks == 0 && peek().kind == Tok::Ident && peek(1).kind == Tok::LParen)
      fail_at(peek(), ot.text + " takes no nested blocks");
    std::string who = ot.text + (name.empty() ? "" : " '" + name + "'");

    // arguments: vars now, literals per dtype choice
    std::vector<Arg> base;
    std::vector<size_t> lit_slots;             // index into base
    std::vector<const ParsedArg*> lit_args;
    std::vector<std::vector<DataType>> cands;
    for (const auto& a : args) {
      if (a.name.text == "name") continue;
      int i = s->input_index(a.name.text);
      if (i < 0)
        fail_at(a.name, who + ": unknown argument '" + a.name.text + "'; its inputs are: " + s->input_names());
      Arg g;
      g.name = a.name.text;
      switch (a.val.kind) {
        case ArgVal::Ref: g.items.push_back(ArgItem{lookup(a.val.refs[0]), nullptr}); break;
        case ArgVal::Tuple:
          g.is_sequence = true;
          for (const Token& r : a.val.refs) g.items.push_back(ArgItem{lookup(r), nullptr});
          break;
        case ArgVal::Literal:
          lit_slots.push_back(base.size());
          lit_args.push_back(&a);
          cands.push_back(candidates(a, s->inputs[static_cast<size_t>(i)], *s, args));
          g.items.push_back(ArgItem{});
          break;
        case ArgVal::Elided: fail_at(a.val.tok, "an elided value is allowed only in a const");
      }
      base.push_back(std::move(g));
    }

    // try dtype choices in order of preference; the consts made for literals keep the names
    // the builder would give them ("<op>_<input>_<n>") across attempts
    if (name.empty() && !lit_args.empty()) name = ctx_->free_name(s->name);
    std::vector<std::string> const_names;
    for (const ParsedArg* a : lit_args) const_names.push_back(ctx_->free_name(name + "_" + a->name.text));
    std::vector<size_t> choice(lit_args.size(), 0);
    std::string first_err;
    Block* blk = b.block();
    for (int attempt = 0; attempt < 64; ++attempt) {
      std::vector<Arg> cur = base;
      std::string err;
      Operation* mark = blk->back();
      for (size_t k = 0; k < lit_args.size() && err.empty(); ++k) {
        auto v = lit_value(lit_args[k]->val.lit, cands[k][choice[k]], *ctx_, err);
        if (!v) break;
        if (s->inputs[static_cast<size_t>(s->input_index(lit_args[k]->name.text))].kind == InputKind::List) {
          if (v->rank() != 1 || v->is_symbolic()) {
            err = where(lit_args[k]->val.tok.line, lit_args[k]->val.tok.col) +
                  "a list input takes a one-dimensional list of known values";
            break;
          }
          v = std::make_shared<const Value>(Value::list_of(*v));
        }
        try {
          cur[lit_slots[k]].items[0] = ArgItem{b.add_const(v, const_names[k]), nullptr};
        } catch (const Error& e) {
          err = where(lit_args[k]->val.tok.line, lit_args[k]->val.tok.col) + e.what();
        }
      }
      if (err.empty()) {
        std::vector<Var*> outs;
        BlockBuildFn blocks;
        const size_t bpos = blocks_pos;
        if (s->num_blocks > 0)
          blocks = [&, bpos](Builder& bb, Operation* op) {
            pos_ = bpos;
            for (int k = 0; k < s->num_blocks; ++k) nested_block(bb, op);
          };
        try {
          outs = b.create(ot.text, cur, name, blocks);
        } catch (const FormatError&) {
          throw;  // an error inside a nested block, already placed
        } catch (const std::exception& e) {  // milkit errors, and bad_alloc from value inference
          err = where(ot.line, ot.col) + e.what();
        }
        if (err.empty()) {
          std::unordered_map<std::string, Dim> bind;
          err = check_outputs(decls, outs, who, bind);
          if (err.empty()) {
            for (auto& [n, dim] : bind) {
              bound_[n] = dim;
              syms_.erase(n);
            }
            for (size_t k = 0; k < decls.size(); ++k) define(decls[k], outs[k]);
            return;
          }
        }
      }
      // undo: the op and the consts made for it
      std::vector<Operation*> made;
      for (Operation* o = mark ? mark->next() : blk->front(); o; o = o->next()) made.push_back(o);
      for (auto it = made.rbegin(); it != made.rend(); ++it) blk->erase(*it);
      if (first_err.empty()) first_err = err;
      // next combination
      size_t k = 0;
      for (; k < choice.size(); ++k) {
        if (++choice[k] < cands[k].size()) break;
        choice[k] = 0;
      }
      if (k == choice.size()) break;
    }
    throw FormatError(first_err);
  }

  std::string check_outputs(const std::vector<Decl>& decls, const std::vector<Var*>& outs,
                            const std::string& who, std::unordered_map<std::string, Dim>& bind) {
    if (outs.size() != decls.size())
      return where(decls[0].tok.line, decls[0].tok.col) + who + ": declares " +
             std::to_string(decls.size()) + " outputs, milkit infers " + std::to_string(outs.size());
    for (size_t k = 0; k < decls.size(); ++k) {
      const Decl& d = decls[k];
      Var* v = outs[k];
      if (!unify(d.type, v->type(), bind))
        return where(d.tok.line, d.tok.col) + who + ": output '%" + d.name + "' is declared " +
               d.type->str() + " but milkit infers " + v->type()->str();
      char actual = v->has_value() ? '*' : (v->value() ? '^' : 0);
      if (actual != d.marker) {
        auto m = [](char c) {
          return c == '*' ? std::string("a known value (*)")
                          : c == '^' ? std::string("a symbolic value (^)") : std::string("no value");
        };
        return where(d.tok.line, d.tok.col) + who + ": output '%" + d.name + "' is declared with " +
               m(d.marker) + " but milkit infers " + m(actual);
      }
    }
    return "";
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::unordered_set<std::string> names_;
  std::unordered_map<std::string, std::shared_ptr<Symbol>> syms_;  // program-wide
  std::unordered_map<std::string, Dim> bound_;                     // per function
  std::unordered_set<std::string> provisional_;                    // per op
  bool decl_mode_ = false;
  Context* ctx_ = nullptr;
  Function* fn_ = nullptr;
  std::unordered_map<std::string, Var*> scope_;
  std::vector<std::string> scope_log_;  // names in definition order (nested blocks pop theirs)
  size_t blocks_pos_ = 0;               // token where the current op's nested blocks start
};

template <class F>
auto guarded(const std::string& text, F&& f) {
  std::unique_ptr<Parser> p;
  try {
    p = std::make_unique<Parser>(text);
    return f(*p);
  } catch (const FormatError&) {
    throw;
  } catch (const std::exception& e) {
    std::string at = p ? where(p->current().line, p->current().col) : std::string();
    throw FormatError(at + e.what());
  }
}

}  // namespace

std::shared_ptr<Program> parse_program(const std::string& text) {
  return guarded(text, [](Parser& p) { return p.program(); });
}

std::shared_ptr<Function> parse_function(const std::string& text, std::string* name) {
  return guarded(text, [&](Parser& p) { return p.single_function(name); });
}

}  // namespace milkit
