"""Symbolic dimensions: ``get_new_symbol``, and conversion to and from sympy (optional)."""

from __future__ import annotations

from typing import Any

from . import _core

__all__ = [
    "SymExpr",
    "get_new_symbol",
    "get_new_variadic_symbol",
    "is_symbolic",
    "any_symbolic",
    "to_sympy",
    "from_sympy",
    "smin",
    "smax",
]

SymExpr = _core.SymExpr


def get_new_symbol(name: str | None = None, lo: int = 1, hi: int | None = None) -> SymExpr:
    """A new symbolic dimension. Unnamed symbols get fresh names ``is0``, ``is1``, ...

    Unlike coremltools, a name may be used again: two symbols are the same only when they are the
    same object, and nothing is kept in global tables. ``lo``/``hi`` bound the values (default
    ``[1, inf)``) and let comparisons and simplification use them.
    """
    return _core.new_symbol(name or "", lo, 2**63 - 1 if hi is None else hi)


def get_new_variadic_symbol() -> SymExpr:
    """A symbol standing for an unknown number of dims (``*is<N>``)."""
    return _core.new_symbol("", 1, 2**63 - 1, True)


def is_symbolic(x: Any) -> bool:
    """Whether ``x`` is a symbolic dim (an int or an int-valued constant is not)."""
    return isinstance(x, SymExpr)


def any_symbolic(xs: Any) -> bool:
    """Whether any element of a sequence (or the value itself) is symbolic."""
    if isinstance(xs, SymExpr):
        return True
    try:
        return any(isinstance(x, SymExpr) for x in xs)
    except TypeError:
        return False


def smin(a: Any, b: Any) -> Any:
    """Symbolic min."""
    if isinstance(a, SymExpr):
        return a.min(b)
    if isinstance(b, SymExpr):
        return b.min(a)
    return min(a, b)


def smax(a: Any, b: Any) -> Any:
    """Symbolic max."""
    if isinstance(a, SymExpr):
        return a.max(b)
    if isinstance(b, SymExpr):
        return b.max(a)
    return max(a, b)


def to_sympy(d: Any) -> Any:
    """A sympy expression equal to dim ``d`` (imports sympy lazily)."""
    import sympy

    if isinstance(d, int):
        return sympy.Integer(d)
    kind = d.kind
    if kind == "symbol":
        return sympy.Symbol(d.name, integer=True, positive=d.range[0] is not None and d.range[0] >= 1)
    if kind == "floordiv":
        a, b = d.args
        return sympy.floor(to_sympy(a) / to_sympy(b))
    if kind == "mod":
        a, b = d.args
        return sympy.Mod(to_sympy(a), to_sympy(b))
    if kind in ("min", "max"):
        f = sympy.Min if kind == "min" else sympy.Max
        return f(*[to_sympy(x) for x in d.args])
    terms, const = d.terms
    out = sympy.Integer(const)
    for coef, atoms in terms:
        m = sympy.Integer(coef)
        for a in atoms:
            m = m * to_sympy(a)
        out = out + m
    return out


def from_sympy(expr: Any, symbols: dict[str, SymExpr] | None = None) -> Any:
    """A milkit dim from a sympy expression; symbols are matched by name in ``symbols`` or
    created (sympy's ``floor``, ``Mod``, ``Min``, ``Max``, ``+``, ``*`` and integer powers are
    supported)."""
    import sympy

    symbols = {} if symbols is None else symbols

    def conv(e: Any) -> Any:
        if e.is_Integer:
            return int(e)
        if e.is_Symbol:
            if e.name not in symbols:
                symbols[e.name] = get_new_symbol(e.name)
            return symbols[e.name]
        if e.is_Add:
            r: Any = 0
            for a in e.args:
                r = r + conv(a)
            return r
        if e.is_Mul:
            num, den = e.as_numer_denom()
            if den != 1:
                return conv(num) // conv(den)
            r = 1
            for a in e.args:
                r = r * conv(a)
            return r
        if e.is_Pow and e.exp.is_Integer and int(e.exp) >= 0:
            r = 1
            b = conv(e.base)
            for _ in range(int(e.exp)):
                r = r * b
            return r
        if isinstance(e, sympy.floor):
            num, den = e.args[0].as_numer_denom()
            return conv(num) // conv(den)
        if isinstance(e, sympy.Mod):
            return conv(e.args[0]) % conv(e.args[1])
        if isinstance(e, (sympy.Min, sympy.Max)):
            vals = [conv(a) for a in e.args]
            r = vals[0]
            for v in vals[1:]:
                r = smin(r, v) if isinstance(e, sympy.Min) else smax(r, v)
            return r
        raise ValueError(f"cannot convert sympy expression {e} to a milkit dim")

    return conv(sympy.sympify(expr))

