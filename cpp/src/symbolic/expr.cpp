#include "milkit/symbolic/expr.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <sstream>

#include "milkit/types/error.h"

namespace milkit {

namespace {

std::atomic<uint64_t> g_symbol_ids{0};
std::atomic<uint64_t> g_fresh_names{0};

[[noreturn]] void overflow() {
  throw ValueError("symbolic dimension arithmetic overflows int64");
}

int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}

int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}

int64_t py_floordiv(int64_t a, int64_t b) {
  if (b == -1) return checked_mul(a, -1);
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t py_mod(int64_t a, int64_t b) {
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

int64_t clamp128(__int128 v) {
  if (v >= static_cast<__int128>(kPosInf)) return kPosInf;
  if (v <= static_cast<__int128>(kNegInf)) return kNegInf;
  return static_cast<int64_t>(v);
}

// floor(a / b) on the extended integers, b > 0.
int64_t ext_floordiv(int64_t a, int64_t b) {
  if (a == kPosInf) return b == kPosInf ? kPosInf : kPosInf;
  if (a == kNegInf) return kNegInf;
  if (b == kPosInf) return a >= 0 ? 0 : -1;
  return py_floordiv(a, b);
}

bool monomial_less(const std::vector<const Expr*>& a, const std::vector<const Expr*>& b) {
  return std::lexicographical_compare(
      a.begin(), a.end(), b.begin(), b.end(),
      [](const Expr* x, const Expr* y) { return x->id() < y->id(); });
}

struct MonoLess {
  bool operator()(const std::vector<const Expr*>& a, const std::vector<const Expr*>& b) const {
    return monomial_less(a, b);
  }
};

size_t hash_combine(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }

}  // namespace

namespace interval {

Interval add(Interval a, Interval b) {
  Interval r;
  r.lo = (a.lo == kNegInf || b.lo == kNegInf) ? kNegInf
                                                : clamp128(static_cast<__int128>(a.lo) + b.lo);
  r.hi = (a.hi == kPosInf || b.hi == kPosInf) ? kPosInf
                                                : clamp128(static_cast<__int128>(a.hi) + b.hi);
  return r;
}

static int64_t ext_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  bool inf = a == kPosInf || a == kNegInf || b == kPosInf || b == kNegInf;
  bool neg = (a < 0) != (b < 0);
  if (inf) return neg ? kNegInf : kPosInf;
  return clamp128(static_cast<__int128>(a) * b);
}

Interval mul(Interval a, Interval b) {
  int64_t c[4] = {ext_mul(a.lo, b.lo), ext_mul(a.lo, b.hi), ext_mul(a.hi, b.lo),
                  ext_mul(a.hi, b.hi)};
  return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}

}  // namespace interval

// ----------------------------------------------------------------------------------------------
// Symbol

std::shared_ptr<Symbol> Symbol::create(std::string name, int64_t lo, int64_t hi, bool variadic) {
  if (lo > hi) throw ValueError("symbol '" + name + "': empty range");
  return std::shared_ptr<Symbol>(new Symbol(std::move(name), lo, hi, variadic, g_symbol_ids++));
}

std::shared_ptr<Symbol> Symbol::fresh(bool variadic) {
  std::string n = (variadic ? "*is" : "is") + std::to_string(g_fresh_names++);
  return create(std::move(n), 1, kPosInf, variadic);
}

void Symbol::set_range(int64_t lo, int64_t hi) {
  if (lo > hi) throw ValueError("symbol '" + name_ + "': lower bound exceeds upper bound");
  lo_ = lo;
  hi_ = hi;
}

// ----------------------------------------------------------------------------------------------
// Printing

namespace {

std::string atom_str(const Expr* e, bool in_product);

int degree(const Term& t) { return static_cast<int>(t.atoms.size()); }

std::string monomial_str(const std::vector<const Expr*>& atoms, bool with_coef) {
  // group repeated atoms into powers
  std::vector<std::pair<std::string, int>> parts;
  bool in_product = with_coef || atoms.size() > 1;
  for (size_t i = 0; i < atoms.size();) {
    size_t j = i;
    while (j < atoms.size() && atoms[j] == atoms[i]) ++j;
    parts.emplace_back(atom_str(atoms[i], in_product || (j - i) > 1), static_cast<int>(j - i));
    i = j;
  }
  std::sort(parts.begin(), parts.end());
  std::string s;
  for (auto& [a, p] : parts) {
    if (!s.empty()) s += "*";
    s += a;
    if (p > 1) s += "**" + std::to_string(p);
  }
  return s;
}

std::string operand_str(const Expr* e) {
  // operand of // or %: parenthesize anything but a symbol or non-negative constant
  if (e->kind() == Expr::Kind::Symbol) return e->str();
  if (e->is_const() && e->value() >= 0) return e->str();
  if (e->kind() == Expr::Kind::Min || e->kind() == Expr::Kind::Max) return e->str();
  return "(" + e->str() + ")";
}

std::string atom_str(const Expr* e, bool in_product) {
  switch (e->kind()) {
    case Expr::Kind::Symbol: return e->symbol()->name();
    case Expr::Kind::FloorDiv:
    case Expr::Kind::Mod: {
      std::string s = operand_str(e->args()[0]) +
                      (e->kind() == Expr::Kind::FloorDiv ? "//" : " % ") +
                      operand_str(e->args()[1]);
      return in_product ? "(" + s + ")" : s;
    }
    case Expr::Kind::Min:
    case Expr::Kind::Max: {
      std::vector<std::string> a;
      for (auto* x : e->args()) a.push_back(x->str());
      std::sort(a.begin(), a.end());
      std::string s = e->kind() == Expr::Kind::Min ? "min(" : "max(";
      for (size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + a[i];
      return s + ")";
    }
    default: return e->str();
  }
}

}  // namespace

std::string Expr::str() const {
  switch (kind_) {
    case Kind::Const: return std::to_string(c_);
    case Kind::Poly: {
      struct P {
        int deg;
        std::string mono;
        int64_t coef;
      };
      std::vector<P> ps;
      for (auto& t : terms_)
        ps.push_back({degree(t), monomial_str(t.atoms, t.coef != 1 && t.coef != -1), t.coef});
      std::sort(ps.begin(), ps.end(), [](const P& a, const P& b) {
        if (a.deg != b.deg) return a.deg > b.deg;
        return a.mono < b.mono;
      });
      std::string s;
      for (size_t i = 0; i < ps.size(); ++i) {
        int64_t c = ps[i].coef;
        bool negative = c < 0;
        std::string mag = (c == 1 || c == -1) ? ps[i].mono
                                              : std::to_string(negative ? -(__int128)c > INT64_MAX
                                                                              ? c
                                                                              : -c
                                                                        : c) +
                                                    "*" + ps[i].mono;
        if (i == 0)
          s += negative ? "-" + mag : mag;
        else
          s += negative ? " - " + mag : " + " + mag;
      }
      if (c_ > 0) s += " + " + std::to_string(c_);
      if (c_ < 0) s += " - " + std::to_string(-(__int128)c_ > INT64_MAX ? c_ : -c_);
      return s;
    }
    default: return atom_str(this, false);
  }
}

// ----------------------------------------------------------------------------------------------
// SymbolContext

struct SymbolContext::LinForm {
  int64_t c0 = 0;
  std::map<std::vector<const Expr*>, int64_t, MonoLess> terms;
  void add_term(const std::vector<const Expr*>& mono, int64_t coef) {
    if (coef == 0) return;
    auto it = terms.find(mono);
    if (it == terms.end()) {
      terms.emplace(mono, coef);
    } else {
      it->second = checked_add(it->second, coef);
      if (it->second == 0) terms.erase(it);
    }
  }
};

SymbolContext::SymbolContext() {
  small_consts_.reserve(1024);
  for (int64_t v = 0; v < 1024; ++v) {
    Expr e;
    e.kind_ = Expr::Kind::Const;
    e.c_ = v;
    small_consts_.push_back(intern(std::move(e)));
  }
}

SymbolContext::~SymbolContext() = default;

bool SymbolContext::NodeEq::operator()(const Expr* a, const Expr* b) const {
  if (a->kind_ != b->kind_ || a->c_ != b->c_ || a->sym_ != b->sym_ || a->args_ != b->args_)
    return false;
  if (a->terms_.size() != b->terms_.size()) return false;
  for (size_t i = 0; i < a->terms_.size(); ++i)
    if (a->terms_[i].coef != b->terms_[i].coef || a->terms_[i].atoms != b->terms_[i].atoms)
      return false;
  return true;
}

const Expr* SymbolContext::intern(Expr&& e) {
  size_t h = std::hash<int>()(static_cast<int>(e.kind_));
  h = hash_combine(h, std::hash<int64_t>()(e.c_));
  h = hash_combine(h, std::hash<const void*>()(e.sym_.get()));
  for (auto* a : e.args_) h = hash_combine(h, std::hash<const void*>()(a));
  for (auto& t : e.terms_) {
    h = hash_combine(h, std::hash<int64_t>()(t.coef));
    for (auto* a : t.atoms) h = hash_combine(h, std::hash<const void*>()(a));
  }
  e.hash_ = h;
  e.id_ = nodes_.size();
  nodes_.push_back(std::move(e));
  const Expr* node = &nodes_.back();
  auto [it, inserted] = table_.insert(node);
  if (!inserted) {
    nodes_.pop_back();
    return *it;
  }
  return node;
}

Dim SymbolContext::constant(int64_t v) {
  if (v >= 0 && v < static_cast<int64_t>(small_consts_.size())) return small_consts_[v];
  auto it = consts_.find(v);
  if (it != consts_.end()) return it->second;
  Expr e;
  e.kind_ = Expr::Kind::Const;
  e.c_ = v;
  const Expr* n = intern(std::move(e));
  consts_.emplace(v, n);
  return n;
}

Dim SymbolContext::symbol_named(const std::string& name) {
  const Expr* best = nullptr;
  for (auto& [sym, e] : symbols_)
    if (sym->name() == name && (!best || sym->id() < best->symbol()->id())) best = e;
  return best ? best : symbol(Symbol::create(name));
}

Dim SymbolContext::symbol(const std::shared_ptr<Symbol>& s) {
  auto it = symbols_.find(s.get());
  if (it != symbols_.end()) return it->second;
  Expr e;
  e.kind_ = Expr::Kind::Symbol;
  e.sym_ = s;
  const Expr* n = intern(std::move(e));
  symbols_.emplace(s.get(), n);
  return n;
}

Dim SymbolContext::fresh() { return symbol(Symbol::fresh()); }

SymbolContext::LinForm SymbolContext::linform(Dim d) const {
  LinForm f;
  if (d->is_const()) {
    f.c0 = d->value();
  } else if (d->kind() == Expr::Kind::Poly) {
    f.c0 = d->value();
    for (auto& t : d->terms()) f.terms.emplace(t.atoms, t.coef);
  } else {
    f.terms.emplace(std::vector<const Expr*>{d}, 1);
  }
  return f;
}

Dim SymbolContext::from_linform(LinForm&& f) {
  if (f.terms.empty()) return constant(f.c0);
  if (f.c0 == 0 && f.terms.size() == 1) {
    auto& [mono, coef] = *f.terms.begin();
    if (coef == 1 && mono.size() == 1) return mono[0];
  }
  Expr e;
  e.kind_ = Expr::Kind::Poly;
  e.c_ = f.c0;
  e.terms_.reserve(f.terms.size());
  for (auto& [mono, coef] : f.terms) e.terms_.push_back(Term{coef, mono});
  return intern(std::move(e));
}

Dim SymbolContext::make_atom(Expr::Kind k, std::vector<const Expr*> args) {
  Expr e;
  e.kind_ = k;
  e.args_ = std::move(args);
  return intern(std::move(e));
}

Dim SymbolContext::add(Dim a, Dim b) {
  if (a->is_const() && b->is_const()) return constant(checked_add(a->value(), b->value()));
  if (b->is_const() && b->value() == 0) return a;
  if (a->is_const() && a->value() == 0) return b;
  LinForm f = linform(a);
  LinForm g = linform(b);
  f.c0 = checked_add(f.c0, g.c0);
  for (auto& [m, c] : g.terms) f.add_term(m, c);
  return from_linform(std::move(f));
}

Dim SymbolContext::neg(Dim a) {
  if (a->is_const()) return constant(checked_mul(a->value(), -1));
  LinForm f = linform(a);
  f.c0 = checked_mul(f.c0, -1);
  for (auto& [m, c] : f.terms) c = checked_mul(c, -1);
  return from_linform(std::move(f));
}

Dim SymbolContext::sub(Dim a, Dim b) {
  if (a == b) return constant(0);
  return add(a, neg(b));
}

Dim SymbolContext::mul(Dim a, Dim b) {
  if (a->is_const() && b->is_const()) return constant(checked_mul(a->value(), b->value()));
  if (a->is_const() && a->value() == 1) return b;
  if (b->is_const() && b->value() == 1) return a;
  if ((a->is_const() && a->value() == 0) || (b->is_const() && b->value() == 0)) return constant(0);
  LinForm f = linform(a), g = linform(b), r;
  r.c0 = checked_mul(f.c0, g.c0);
  for (auto& [m, c] : f.terms) r.add_term(m, checked_mul(c, g.c0));
  for (auto& [m, c] : g.terms) r.add_term(m, checked_mul(c, f.c0));
  for (auto& [m1, c1] : f.terms)
    for (auto& [m2, c2] : g.terms) {
      std::vector<const Expr*> m(m1);
      m.insert(m.end(), m2.begin(), m2.end());
      std::sort(m.begin(), m.end(), [](const Expr* x, const Expr* y) { return x->id() < y->id(); });
      r.add_term(m, checked_mul(c1, c2));
    }
  return from_linform(std::move(r));
}

Dim SymbolContext::product(const std::vector<Dim>& dims) {
  Dim r = constant(1);
  for (Dim d : dims) r = mul(r, d);
  return r;
}

namespace {
// If every term of `f` (and its constant) is divisible by the monomial `m`, divides in place.
bool divide_by_monomial(std::map<std::vector<const Expr*>, int64_t, MonoLess>& terms,
                        int64_t c0, const std::vector<const Expr*>& m, int64_t mcoef,
                        std::map<std::vector<const Expr*>, int64_t, MonoLess>& out) {
  if (c0 != 0) return false;
  for (auto& [mono, coef] : terms) {
    if (coef % mcoef != 0) return false;
    std::vector<const Expr*> rest;
    auto it = mono.begin();
    for (auto* atom : m) {
      while (it != mono.end() && (*it)->id() < atom->id()) rest.push_back(*it++);
      if (it == mono.end() || *it != atom) return false;
      ++it;
    }
    rest.insert(rest.end(), it, mono.end());
    out.emplace(std::move(rest), coef / mcoef);
  }
  return true;
}
}  // namespace

Dim SymbolContext::floordiv(Dim a, Dim b) {
  if (b->is_const()) {
    int64_t k = b->value();
    if (k == 0) throw ValueError("symbolic floor division by zero: " + a->str() + " // 0");
    if (a->is_const()) return constant(py_floordiv(a->value(), k));
    if (k == 1) return a;
    if (k < 0) return floordiv(neg(a), constant(checked_mul(k, -1)));
    // nested: (x // k1) // k  ->  x // (k1*k)
    if (a->kind() == Expr::Kind::FloorDiv && a->args()[1]->is_const() && a->args()[1]->value() > 0)
      return floordiv(a->args()[0], constant(checked_mul(a->args()[1]->value(), k)));
    LinForm f = linform(a), q, r;
    q.c0 = py_floordiv(f.c0, k);
    r.c0 = py_mod(f.c0, k);
    for (auto& [m, c] : f.terms) {
      q.add_term(m, py_floordiv(c, k));
      r.add_term(m, py_mod(c, k));
    }
    Dim qd = from_linform(std::move(q));
    if (r.terms.empty()) return qd;  // r.c0 < k, so it floors to 0
    int64_t g = k;
    g = std::gcd(g, r.c0);
    for (auto& [m, c] : r.terms) g = std::gcd(g, c);
    if (g > 1) {
      r.c0 /= g;
      for (auto& [m, c] : r.terms) c /= g;
      k /= g;
    }
    Dim rd = from_linform(std::move(r));
    if (k == 1) return add(qd, rd);
    Interval ri = range(rd);
    if (ri.lo != kNegInf && ri.hi != kPosInf && py_floordiv(ri.lo, k) == py_floordiv(ri.hi, k))
      return add(qd, constant(py_floordiv(ri.lo, k)));
    return add(qd, make_atom(Expr::Kind::FloorDiv, {rd, constant(k)}));
  }
  if (a == b) return constant(1);
  if (a->is_const() && a->value() == 0) return constant(0);
  // exact division by a monomial: (S*T)//S -> T, (4*S*T)//(2*S) -> 2*T
  LinForm fb = linform(b);
  if (fb.c0 == 0 && fb.terms.size() == 1 && fb.terms.begin()->second > 0) {
    LinForm fa = linform(a), out;
    if (divide_by_monomial(fa.terms, fa.c0, fb.terms.begin()->first, fb.terms.begin()->second,
                           out.terms)) {
      // drop terms that became constants (empty monomial)
      LinForm res;
      for (auto& [m, c] : out.terms) {
        if (m.empty())
          res.c0 = checked_add(res.c0, c);
        else
          res.add_term(m, c);
      }
      return from_linform(std::move(res));
    }
  }
  return make_atom(Expr::Kind::FloorDiv, {a, b});
}

Dim SymbolContext::ceildiv(Dim a, Dim b) {
  // For a known positive divisor use (a + b - 1) // b: the same number, and the same node as
  // the floor-division form users write, e.g. ceildiv(H, 2) is (H + 1)//2 (-((-H)//2) would
  // canonicalize to H - H//2, a different node).
  if (b->is_const() && b->value() > 0) return floordiv(add(a, constant(b->value() - 1)), b);
  return neg(floordiv(neg(a), b));
}

Dim SymbolContext::mod(Dim a, Dim b) {
  if (b->is_const()) {
    int64_t k = b->value();
    if (k == 0) throw ValueError("symbolic modulo by zero: " + a->str() + " % 0");
    if (a->is_const()) return constant(py_mod(a->value(), k));
    if (k == 1 || k == -1) return constant(0);
    if (k < 0) return neg(mod(neg(a), constant(checked_mul(k, -1))));
    LinForm f = linform(a), r;
    r.c0 = py_mod(f.c0, k);
    for (auto& [m, c] : f.terms) r.add_term(m, py_mod(c, k));
    if (r.terms.empty()) return constant(r.c0);
    Dim rd = from_linform(std::move(r));
    Interval ri = range(rd);
    if (ri.lo >= 0 && ri.hi < k) return rd;
    return make_atom(Expr::Kind::Mod, {rd, constant(k)});
  }
  if (a == b) return constant(0);
  if (a->is_const() && a->value() == 0) return constant(0);
  LinForm fb = linform(b);
  if (fb.c0 == 0 && fb.terms.size() == 1 && fb.terms.begin()->second > 0) {
    LinForm fa = linform(a), out;
    if (divide_by_monomial(fa.terms, fa.c0, fb.terms.begin()->first, fb.terms.begin()->second,
                           out.terms))
      return constant(0);
  }
  return make_atom(Expr::Kind::Mod, {a, b});
}

Dim SymbolContext::minmax(bool is_max, Dim a, Dim b) {
  if (a == b) return a;
  Tri ab = le(a, b);
  if (ab == Tri::True) return is_max ? b : a;
  if (ab == Tri::False) return is_max ? a : b;
  Expr::Kind k = is_max ? Expr::Kind::Max : Expr::Kind::Min;
  std::vector<const Expr*> args;
  for (Dim d : {a, b}) {
    if (d->kind() == k)
      args.insert(args.end(), d->args().begin(), d->args().end());
    else
      args.push_back(d);
  }
  // drop duplicates, then every arg that another arg provably dominates
  std::sort(args.begin(), args.end(), [](const Expr* x, const Expr* y) { return x->id() < y->id(); });
  args.erase(std::unique(args.begin(), args.end()), args.end());
  std::vector<const Expr*> kept;
  for (size_t i = 0; i < args.size(); ++i) {
    bool dominated = false;
    for (size_t j = 0; j < args.size() && !dominated; ++j) {
      if (i == j) continue;
      // for min, args[i] is redundant when args[j] <= args[i]; for max, when args[i] <= args[j]
      Tri t = is_max ? le(args[i], args[j]) : le(args[j], args[i]);
      if (t != Tri::True) continue;
      // provably equal pair: keep the first one only
      Tri back = is_max ? le(args[j], args[i]) : le(args[i], args[j]);
      dominated = back != Tri::True || j < i;
    }
    if (!dominated) kept.push_back(args[i]);
  }
  if (kept.size() == 1) return kept[0];
  return make_atom(k, std::move(kept));
}

Dim SymbolContext::min(Dim a, Dim b) { return minmax(false, a, b); }
Dim SymbolContext::max(Dim a, Dim b) { return minmax(true, a, b); }

Dim SymbolContext::import(Dim d) {
  switch (d->kind()) {
    case Expr::Kind::Const: return constant(d->value());
    case Expr::Kind::Symbol: return symbol(d->symbol_ptr());
    case Expr::Kind::FloorDiv: return floordiv(import(d->args()[0]), import(d->args()[1]));
    case Expr::Kind::Mod: return mod(import(d->args()[0]), import(d->args()[1]));
    case Expr::Kind::Min:
    case Expr::Kind::Max: {
      Dim r = import(d->args()[0]);
      for (size_t i = 1; i < d->args().size(); ++i)
        r = d->kind() == Expr::Kind::Min ? min(r, import(d->args()[i]))
                                         : max(r, import(d->args()[i]));
      return r;
    }
    case Expr::Kind::Poly: {
      Dim r = constant(d->value());
      for (auto& t : d->terms()) {
        Dim m = constant(t.coef);
        for (auto* atom : t.atoms) m = mul(m, import(atom));
        r = add(r, m);
      }
      return r;
    }
  }
  return d;
}

Interval SymbolContext::range(Dim d) const {
  switch (d->kind()) {
    case Expr::Kind::Const: return {d->value(), d->value()};
    case Expr::Kind::Symbol: return {d->symbol()->lo(), d->symbol()->hi()};
    case Expr::Kind::Poly: {
      Interval r{d->value(), d->value()};
      for (auto& t : d->terms()) {
        Interval m{t.coef, t.coef};
        for (auto* atom : t.atoms) m = interval::mul(m, range(atom));
        r = interval::add(r, m);
      }
      return r;
    }
    case Expr::Kind::FloorDiv: {
      Interval a = range(d->args()[0]), b = range(d->args()[1]);
      if (b.lo <= 0) return {};
      int64_t lo = a.lo >= 0 ? ext_floordiv(a.lo, b.hi) : ext_floordiv(a.lo, b.lo);
      int64_t hi = a.hi >= 0 ? ext_floordiv(a.hi, b.lo) : ext_floordiv(a.hi, b.hi);
      return {lo, hi};
    }
    case Expr::Kind::Mod: {
      Interval a = range(d->args()[0]), b = range(d->args()[1]);
      if (b.lo <= 0) return {};
      int64_t hi = b.hi == kPosInf ? kPosInf : b.hi - 1;
      if (a.lo >= 0) hi = std::min(hi, a.hi);
      return {0, hi};
    }
    case Expr::Kind::Min:
    case Expr::Kind::Max: {
      bool is_min = d->kind() == Expr::Kind::Min;
      Interval r = range(d->args()[0]);
      for (size_t i = 1; i < d->args().size(); ++i) {
        Interval x = range(d->args()[i]);
        r.lo = is_min ? std::min(r.lo, x.lo) : std::max(r.lo, x.lo);
        r.hi = is_min ? std::min(r.hi, x.hi) : std::max(r.hi, x.hi);
      }
      return r;
    }
  }
  return {};
}

Tri SymbolContext::eq(Dim a, Dim b) {
  if (a == b) return Tri::True;
  if (a->is_const() && b->is_const()) return Tri::False;
  Interval r = range(sub(a, b));
  return r.contains(0) ? Tri::Unknown : Tri::False;
}

Tri SymbolContext::le(Dim a, Dim b) {
  if (a == b) return Tri::True;
  if (a->is_const() && b->is_const()) return a->value() <= b->value() ? Tri::True : Tri::False;
  Interval r = range(sub(b, a));
  if (r.lo >= 0) return Tri::True;
  if (r.hi < 0) return Tri::False;
  return Tri::Unknown;
}

Tri SymbolContext::lt(Dim a, Dim b) {
  if (a == b) return Tri::False;
  if (a->is_const() && b->is_const()) return a->value() < b->value() ? Tri::True : Tri::False;
  Interval r = range(sub(b, a));
  if (r.lo > 0) return Tri::True;
  if (r.hi <= 0) return Tri::False;
  return Tri::Unknown;
}

}  // namespace milkit
