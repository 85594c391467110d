// Evaluating symbolic dimensions with bound symbols.
#include "milkit/symbolic/eval.h"

namespace milkit {

bool eval_dim(Dim d, const std::unordered_map<const Symbol*, int64_t>& env, int64_t& out) {
  auto floordiv = [](int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  };
  switch (d->kind()) {
    case Expr::Kind::Const:
      out = d->value();
      return true;
    case Expr::Kind::Symbol: {
      auto it = env.find(d->symbol());
      if (it == env.end()) return false;
      out = it->second;
      return true;
    }
    case Expr::Kind::FloorDiv:
    case Expr::Kind::Mod: {
      int64_t a, b;
      if (!eval_dim(d->args()[0], env, a) || !eval_dim(d->args()[1], env, b) || b == 0)
        return false;
      int64_t q = floordiv(a, b);
      out = d->kind() == Expr::Kind::FloorDiv ? q : a - q * b;
      return true;
    }
    case Expr::Kind::Min:
    case Expr::Kind::Max: {
      bool first = true;
      for (Dim x : d->args()) {
        int64_t v;
        if (!eval_dim(x, env, v)) return false;
        if (first || (d->kind() == Expr::Kind::Min ? v < out : v > out)) out = v;
        first = false;
      }
      return true;
    }
    case Expr::Kind::Poly: {
      int64_t s = d->value();
      for (const Term& t : d->terms()) {
        int64_t p = t.coef;
        for (Dim a : t.atoms) {
          int64_t v;
          if (!eval_dim(a, env, v)) return false;
          p *= v;
        }
        s += p;
      }
      out = s;
      return true;
    }
  }
  return false;
}

}  // namespace milkit
