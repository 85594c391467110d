"""Parity harness: build the same program with coremltools and with milkit and compare every op.

    from support.parity import check
    check(lambda mb, x: mb.add(x=x, y=1.0), [((2, "S", 4), "fp32")], opsets=ALL_OPSETS)
    check(lambda mb, s, x: mb.coreml_update_state(state=s, value=x), [((2, 3), "fp16", "state"), ((2, 3), "fp16")])

The build function receives the builder module (`mb`) and one var per input spec; numpy values it
uses are shared by both builds. A spec with a third item "state" is a state input
(mb.StateTensorSpec). Shapes may name symbols by strings ("S"): the harness makes a
coremltools symbol and a milkit symbol with the same name.

For each op, in creation order (consts included), it compares: op type, op name, output names,
dtypes, ranks, and dims; and const / folded values (`val`) and symbolic values (`sym_val`).
Dims: an int must equal; a coremltools expression over input symbols must be equal (checked
with sympy); where coremltools made a fresh symbol (it gave up), milkit may have anything and
the case is recorded in `Result.improved`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

warnings.filterwarnings("ignore")

ALL_OPSETS = ("iOS15", "iOS16", "iOS17", "iOS18")


def _ct():
    import logging

    logging.disable(logging.WARNING)
    import coremltools as ct
    from coremltools.converters.mil import Builder as cmb
    from coremltools.converters.mil.mil import get_new_symbol as c_sym
    from coremltools.converters.mil.mil import types as ctypes

    return ct, cmb, ctypes, c_sym


@dataclass
class Result:
    mk_prog: Any
    ct_prog: Any
    improved: list = field(default_factory=list)


class BuildError(Exception):
    pass


def _build(kind: str, build: Callable, specs: Sequence, opset: str | None, symtab: dict):
    if kind == "ct":
        ct, mb, types, _ = _ct()
    else:
        import milkit as ct
        from milkit import Builder as mb
        from milkit import types
    in_specs = []
    for spec in specs:
        shape, dtype = spec[0], spec[1]
        dims = []
        for d in shape:
            dims.append(symtab[d][0 if kind == "ct" else 1] if isinstance(d, str) else d)
        make = mb.StateTensorSpec if len(spec) > 2 and spec[2] == "state" else mb.TensorSpec
        in_specs.append(make(shape=tuple(dims), dtype=getattr(types, dtype)))
    names = [f"x{i}" if i else "x" for i in range(len(specs))]
    ns: dict = {"build": build, "mb": mb}
    params = ", ".join(names)
    src = f"def main({params}):\n    return build(mb, {params})\n"
    exec(src, ns)
    target = None if opset is None else getattr(ct.target, opset)
    return mb.program(input_specs=in_specs, opset_version=target)(ns["main"])


def _make_symbols(specs: Sequence) -> dict:
    _, _, _, c_sym = _ct()
    import milkit

    symtab = {}
    for spec in specs:
        for d in spec[0]:
            if isinstance(d, str) and d not in symtab:
                cs = c_sym()
                symtab[d] = (cs, milkit.get_new_symbol(cs.name))
    return symtab


def _dim_equal(cd: Any, md: Any, input_syms: set, where: str, res: Result) -> None:
    import sympy

    if isinstance(cd, (int, np.integer)):
        assert isinstance(md, int) and md == int(cd), f"{where}: dim {md} != coremltools {cd}"
        return
    free = {s.name for s in cd.free_symbols}
    if not free <= input_syms:
        res.improved.append((where, str(cd), str(md)))
        return
    from milkit.symbolic import to_sympy

    ms = to_sympy(md) if not isinstance(md, int) else sympy.Integer(md)
    # coremltools' symbols are plain sympy symbols; compare by name
    subs = {s: sympy.Symbol(s.name, integer=True, positive=True) for s in cd.free_symbols}
    cexpr = cd.subs(subs)
    msubs = {s: sympy.Symbol(s.name, integer=True, positive=True) for s in ms.free_symbols}
    mexpr = ms.subs(msubs)
    diff = sympy.simplify(cexpr - mexpr)
    assert diff == 0, f"{where}: dim {md} != coremltools {cd}"


def _compare_values(cv: Any, mv: Any, where: str, input_syms: set, res: Result, rtol: float) -> None:
    if cv is None:
        return
    assert mv is not None, f"{where}: coremltools knows the value {cv!r}, milkit does not"
    ca = np.asarray(cv)
    ma = np.asarray(mv)
    assert ca.shape == ma.shape, f"{where}: value shape {ma.shape} != coremltools {ca.shape}"
    if ca.dtype == object or ma.dtype == object:
        for i, (c, m) in enumerate(zip(ca.ravel(), ma.ravel())):
            if isinstance(c, (int, np.integer)) and isinstance(m, (int, np.integer)):
                assert int(c) == int(m), f"{where}[{i}]: {m} != {c}"
            else:
                _dim_equal(c, m, input_syms, f"{where}[{i}]", res)
        return
    if ca.dtype.kind in "US":
        assert ca.tolist() == ma.tolist(), f"{where}: {ma} != {ca}"
        return
    if ca.dtype.kind == "f" or ma.dtype.kind == "f":
        np.testing.assert_allclose(ma.astype(np.float64), ca.astype(np.float64), rtol=rtol, atol=1e-6,
                                   err_msg=where, equal_nan=True)
    else:
        np.testing.assert_array_equal(ma, ca, err_msg=where)


def _type_str(t: Any) -> str:
    return type(t).__name__ if not hasattr(t, "__name__") else t.__name__


def compare_programs(cp: Any, mp: Any, input_syms: set, rtol: float = 1e-5) -> Result:
    res = Result(mp, cp)
    cf = cp.functions["main"]
    mf = mp.functions["main"]
    cops = list(cf.operations)
    mops = list(mf.operations)
    c_list = [(o.op_type, o.name) for o in cops]
    m_list = [(o.op_type, o.name) for o in mops]
    assert c_list == m_list, f"op lists differ:\n coremltools {c_list}\n milkit      {m_list}"
    for co, mo in zip(cops, mops):
        where = f"{co.op_type} '{co.name}'"
        assert sorted(co.inputs.keys()) == sorted(mo.inputs.keys()), (
            f"{where}: inputs {sorted(mo.inputs)} != coremltools {sorted(co.inputs)}")
        for k, cin in co.inputs.items():
            min_ = mo.inputs[k]
            cn = [v.name for v in cin] if isinstance(cin, (list, tuple)) else cin.name
            mn = [v.name for v in min_] if isinstance(min_, (list, tuple)) else min_.name
            assert cn == mn, f"{where}: input {k} binds {mn}, coremltools {cn}"
        assert len(co.outputs) == len(mo.outputs), f"{where}: output count"
        for cv, mv in zip(co.outputs, mo.outputs):
            w = f"{where} output '{cv.name}'"
            assert cv.name == mv.name, f"{w}: name {mv.name}"
            from coremltools.converters.mil.mil import types as ctypes

            cd = ctypes.builtin_to_string(cv.dtype)
            md = mv.dtype.__name__
            assert cd == md, f"{w}: dtype {md} != coremltools {cd}"
            assert tuple(np.shape(cv.shape)) is not None
            assert len(cv.shape) == len(mv.shape), f"{w}: rank {len(mv.shape)} != {len(cv.shape)} ({mv.shape} vs {cv.shape})"
            for i, (a, b) in enumerate(zip(cv.shape, mv.shape)):
                _dim_equal(a, b, input_syms, f"{w} dim {i}", res)
            _compare_values(cv.val, mv.val, f"{w} val", input_syms, res, rtol)
            if cv.val is None and cv.sym_val is not None:
                _compare_values(cv.sym_val, mv.sym_val, f"{w} sym_val", input_syms, res, rtol)
    co_out = [v.name for v in cf.outputs]
    mo_out = [v.name for v in mf.outputs]
    assert co_out == mo_out, f"outputs {mo_out} != {co_out}"
    assert int(cf.opset_version) == int(mf.opset_version), "function opset differs"
    return res


def reset_ct_names() -> None:
    _, cmb, _, _ = _ct()
    cmb.name_count.clear()


def check(build: Callable, specs: Sequence, opsets: Sequence[str | None] = ("iOS17",), rtol: float = 1e-5) -> list:
    """Builds with both at each opset and compares. Returns the Results.

    When coremltools raises, milkit must raise too (any milkit error), and vice versa.
    """
    results = []
    for opset in opsets:
        symtab = _make_symbols(specs)
        input_syms = {v[0].name for v in symtab.values()}
        reset_ct_names()
        c_err = m_err = None
        try:
            cp = _build("ct", build, specs, opset, symtab)
        except Exception as e:
            c_err = e
        try:
            mp = _build("mk", build, specs, opset, symtab)
        except Exception as e:
            m_err = e
        if c_err is not None or m_err is not None:
            assert c_err is not None, f"[{opset}] milkit raised but coremltools did not: {m_err!r}"
            assert m_err is not None, f"[{opset}] coremltools raised but milkit did not: {c_err!r}"
            results.append(None)
            continue
        try:
            results.append(compare_programs(cp, mp, input_syms, rtol))
        except AssertionError as e:
            raise AssertionError(f"[{opset}] {e}\n--- coremltools:{cp}\n--- milkit:{mp}") from None
    return results


def check_error(build: Callable, specs: Sequence, opset: str = "iOS17", match: str | None = None) -> Exception:
    """Both must raise; milkit's message must name the op (and contain `match`)."""
    import re

    symtab = _make_symbols(specs)
    reset_ct_names()
    try:
        _build("ct", build, specs, opset, symtab)
        ct_raised = False
    except Exception:
        ct_raised = True
    try:
        _build("mk", build, specs, opset, symtab)
    except Exception as e:
        if match:
            assert re.search(match, str(e)), f"milkit error {e!r} does not match {match!r}"
        assert ct_raised, f"milkit raised {e!r} but coremltools accepted the program"
        return e
    raise AssertionError("milkit did not raise" + (" (coremltools did)" if ct_raised else ""))
