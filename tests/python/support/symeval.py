"""Exactness checks of milkit's symbolic output sizes against coremltools' concrete ones.

coremltools gives up (fresh symbol) on symbolic spatial dims of conv / pool; milkit returns an
exact expression. `assert_exact` builds the program once with symbolic dims (parity-checked), then
for many concrete values builds both again with those values substituted (parity-checked too) and
asserts that milkit's symbolic expression evaluates to coremltools' concrete size. Where
coremltools rejects a value (the kernel does not fit), the expression must be <= 0 there.
"""

from __future__ import annotations

from typing import Callable, Sequence

from support.parity import check


def _op_shape(prog, op_type: str):
    ops = [o for o in prog.functions["main"].operations if o.op_type == op_type]
    assert ops, f"no {op_type} op"
    return ops[-1].outputs[0].shape


def assert_exact(build: Callable, shape: Sequence, op_type: str, dtype: str = "fp32",
                 opset: str = "iOS17", values: Sequence[int] = range(1, 41), expect_improved: bool = True,
                 min_checked: int = 10) -> list:
    """Returns milkit's symbolic output shape (as sympy expressions / ints)."""
    import sympy
    from milkit.symbolic import is_symbolic, to_sympy

    res = check(build, [(tuple(shape), dtype)], [opset])[0]
    assert res is not None, "the symbolic build failed"
    if expect_improved:
        assert res.improved, "coremltools was expected to give up on a symbolic dim"
    mk_in = res.mk_prog.functions["main"].inputs["x"].shape
    label_of = {}
    for d, lab in zip(mk_in, shape):
        if isinstance(lab, str):
            label_of[d.name] = lab
    out = [to_sympy(d) if is_symbolic(d) else sympy.Integer(d) for d in _op_shape(res.mk_prog, op_type)]
    labels = sorted(set(label_of.values()))
    checked = 0
    for v in values:
        assign = {lab: v + 3 * i for i, lab in enumerate(labels)}
        concrete = tuple(assign[d] if isinstance(d, str) else d for d in shape)
        subs_out = []
        for e in out:
            subs = {s: assign[label_of[s.name]] for s in e.free_symbols}
            subs_out.append(int(e.subs(subs)))
        r = check(build, [(concrete, dtype)], [opset])[0]
        if r is None:  # both raised: the window does not fit at this size
            assert min(subs_out) <= 0, f"{assign}: coremltools rejects the size, milkit gives {subs_out}"
            continue
        ct_shape = [int(d) for d in _op_shape(r.ct_prog, op_type)]
        assert subs_out == ct_shape, f"{assign}: milkit {out} -> {subs_out}, coremltools {ct_shape}"
        checked += 1
    assert checked >= min_checked, f"only {checked} values checked"
    return out
