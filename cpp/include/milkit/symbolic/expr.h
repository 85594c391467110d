// milkit/symbolic/expr.h - symbolic dimension expressions.
//
// A dimension is an interned, immutable expression node (`Dim`) owned by a SymbolContext.
// Nodes are hash-consed in a canonical form, so two dims are structurally equal exactly when
// they are the same pointer:
//   - a constant;
//   - an atom: a symbol, floor_div(a, b), mod(a, b), min(...), max(...);
//   - a polynomial c0 + sum(coef_i * monomial_i) over atoms (monomials sorted, like terms merged).
// Simplification happens at construction: 2*S + S -> 3*S, (4*S)//4 -> S, S - S -> 0,
// (2*S + 1)//2 -> S when S is an integer, min(S, S + 1) -> S, ...
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace milkit {

/// Sentinel for +infinity in symbol ranges and intervals.
inline constexpr int64_t kPosInf = INT64_MAX;
/// Sentinel for -infinity in intervals.
inline constexpr int64_t kNegInf = INT64_MIN;

/// Three-valued answer of a symbolic comparison.
enum class Tri : uint8_t { False = 0, True = 1, Unknown = 2 };

/// An integer interval [lo, hi]; kNegInf / kPosInf stand for unbounded ends.
struct Interval {
  int64_t lo = kNegInf;  ///< Lower bound (inclusive).
  int64_t hi = kPosInf;  ///< Upper bound (inclusive).
  /// Whether v lies in the interval.
  bool contains(int64_t v) const { return lo <= v && v <= hi; }
};

/// A named integer unknown with a range (default [1, inf)). Symbols are shared objects, so a
/// named symbol can be used by several programs; identity (not the name) makes two symbols equal.
class Symbol {
 public:
  /// Creates a symbol. `variadic` marks a symbol standing for an unknown number of dims.
  static std::shared_ptr<Symbol> create(std::string name, int64_t lo = 1, int64_t hi = kPosInf,
                                        bool variadic = false);
  /// Creates a symbol with a fresh name "is<N>" from a process-wide counter.
  static std::shared_ptr<Symbol> fresh(bool variadic = false);
  /// The symbol's name (variadic symbols start with '*').
  const std::string& name() const { return name_; }
  /// Lower bound of the values the symbol may take.
  int64_t lo() const { return lo_; }
  /// Upper bound (kPosInf when unbounded).
  int64_t hi() const { return hi_; }
  /// Sets the range; throws ValueError when lo > hi.
  void set_range(int64_t lo, int64_t hi);
  /// Whether this symbol stands for a variadic list of dims.
  bool variadic() const { return variadic_; }
  /// A process-unique id, used for canonical ordering.
  uint64_t id() const { return id_; }

 private:
  Symbol(std::string name, int64_t lo, int64_t hi, bool variadic, uint64_t id)
      : name_(std::move(name)), lo_(lo), hi_(hi), variadic_(variadic), id_(id) {}
  std::string name_;
  int64_t lo_, hi_;
  bool variadic_;
  uint64_t id_;
};

class Expr;
/// A dimension: a pointer to an interned expression node. Never null.
using Dim = const Expr*;

/// One term of a polynomial: coef * product(atoms) (atoms sorted, repeats for powers).
struct Term {
  int64_t coef;                    ///< Non-zero integer coefficient.
  std::vector<const Expr*> atoms;  ///< Sorted by Expr::id(), at least one.
};

/// An interned expression node. Create nodes only through a SymbolContext.
class Expr {
 public:
  /// Node kinds.
  enum class Kind : uint8_t { Const, Symbol, FloorDiv, Mod, Min, Max, Poly };
  /// The kind of node.
  Kind kind() const { return kind_; }
  /// Whether the dim is a known integer.
  bool is_const() const { return kind_ == Kind::Const; }
  /// The integer value (constant) or the constant term (polynomial).
  int64_t value() const { return c_; }
  /// The symbol of a Symbol node.
  const Symbol* symbol() const { return sym_.get(); }
  /// The shared symbol of a Symbol node.
  const std::shared_ptr<Symbol>& symbol_ptr() const { return sym_; }
  /// Arguments of FloorDiv / Mod (2) and Min / Max (2 or more).
  const std::vector<const Expr*>& args() const { return args_; }
  /// Terms of a polynomial.
  const std::vector<Term>& terms() const { return terms_; }
  /// Creation index inside its context (canonical ordering key).
  uint64_t id() const { return id_; }
  /// Whether this node is an atom (symbol, floor_div, mod, min, max).
  bool is_atom() const { return kind_ != Kind::Const && kind_ != Kind::Poly; }
  /// Python-expression text: "4*S", "S + T", "(H - 1)//2 + 1".
  std::string str() const;

 private:
  friend class SymbolContext;
  Kind kind_ = Kind::Const;
  int64_t c_ = 0;
  std::shared_ptr<Symbol> sym_;
  std::vector<const Expr*> args_;
  std::vector<Term> terms_;
  uint64_t id_ = 0;
  size_t hash_ = 0;
};

/// Owns and interns expression nodes. One lives in every milkit Context (one per function
/// being built or loaded); nothing is global.
class SymbolContext {
 public:
  SymbolContext();
  SymbolContext(const SymbolContext&) = delete;
  SymbolContext& operator=(const SymbolContext&) = delete;
  ~SymbolContext();

  /// The constant `v`.
  Dim constant(int64_t v);
  /// The dim for symbol `s` (the symbol is kept alive by the context).
  Dim symbol(const std::shared_ptr<Symbol>& s);
  /// A fresh symbol "is<N>"; used only where nothing better is provable.
  Dim fresh();
  /// The symbol of that name already used in this context, else a new one of that name
  /// (make_list's string elem_shape entries).
  Dim symbol_named(const std::string& name);
  /// a + b.
  Dim add(Dim a, Dim b);
  /// a - b.
  Dim sub(Dim a, Dim b);
  /// a * b (polynomials are expanded).
  Dim mul(Dim a, Dim b);
  /// -a.
  Dim neg(Dim a);
  /// Python's a // b (floor); throws ValueError when b is provably 0.
  Dim floordiv(Dim a, Dim b);
  /// ceil(a / b) for b > 0: (a + b - 1) // b for a known b, else -((-a) // b).
  Dim ceildiv(Dim a, Dim b);
  /// Python's a % b; throws ValueError when b is provably 0.
  Dim mod(Dim a, Dim b);
  /// min(a, b).
  Dim min(Dim a, Dim b);
  /// max(a, b).
  Dim max(Dim a, Dim b);
  /// The product of several dims (1 for none).
  Dim product(const std::vector<Dim>& dims);
  /// Copies a dim from another context into this one (same structure, same symbols).
  Dim import(Dim d);

  /// The range of values `d` can take given its symbols' ranges.
  Interval range(Dim d) const;
  /// a == b: True when structurally equal, False when provably different.
  Tri eq(Dim a, Dim b);
  /// a <= b.
  Tri le(Dim a, Dim b);
  /// a < b.
  Tri lt(Dim a, Dim b);
  /// Number of interned nodes (for tests and diagnostics).
  size_t size() const { return nodes_.size(); }

 private:
  struct LinForm;
  struct NodeHash {
    size_t operator()(const Expr* e) const { return e->hash_; }
  };
  struct NodeEq {
    bool operator()(const Expr* a, const Expr* b) const;
  };
  const Expr* intern(Expr&& e);
  LinForm linform(Dim d) const;
  Dim from_linform(LinForm&& f);
  Dim make_atom(Expr::Kind k, std::vector<const Expr*> args);
  Dim minmax(bool is_max, Dim a, Dim b);

  std::deque<Expr> nodes_;
  std::unordered_set<const Expr*, NodeHash, NodeEq> table_;
  std::vector<const Expr*> small_consts_;
  std::unordered_map<int64_t, const Expr*> consts_;
  std::unordered_map<const Symbol*, const Expr*> symbols_;
};

/// Saturating interval helpers used by range inference.
namespace interval {
/// a + b with infinities.
Interval add(Interval a, Interval b);
/// a * b with infinities (0 * inf = 0).
Interval mul(Interval a, Interval b);
}  // namespace interval

}  // namespace milkit
