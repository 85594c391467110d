"""Runs a pass (or a list of passes) in coremltools and in milkit on the same program and compares.

    from pass_parity import check_passes
    check_passes(build, [((2, "S"), "fp32")], ["common::cast_optimization"], opset="iOS17")
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from milkit.passes import apply_passes
from parity import _build, _ct, _make_symbols, compare_programs, reset_ct_names


def ct_run(prog: Any, names: Sequence[str], options: dict | None = None) -> None:
    """Runs coremltools' passes in order, with options set like PassPipeline.set_options."""
    from coremltools.converters.mil.mil.passes.defs.cleanup.const_deduplication import const_deduplication
    from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY

    try:
        for name in names:
            p = PASS_REGISTRY[name]
            for k, v in (options or {}).get(name, {}).items():
                setattr(p, k, v)
            p(prog)
    finally:
        const_deduplication._const_threshold = 100  # a class attribute in coremltools


def build_both(build: Callable, specs: Sequence, opset: str = "iOS17"):
    """(coremltools program, milkit program, input symbol names), built from the same function."""
    _ct()
    symtab = _make_symbols(specs)
    reset_ct_names()
    cp = _build("ct", build, specs, opset, symtab)
    mp = _build("mk", build, specs, opset, symtab)
    return cp, mp, {v[0].name for v in symtab.values()}


def check_passes(build: Callable, specs: Sequence, names: Sequence[str], opset: str = "iOS17",
                 options: dict | None = None, rtol: float = 1e-5):
    """Builds with both, runs the passes in both, compares op for op; returns both programs."""
    cp, mp, syms = build_both(build, specs, opset)
    ct_run(cp, names, options)
    apply_passes(mp, list(names), options, verify_each=True)
    try:
        compare_programs(cp, mp, syms, rtol)
    except AssertionError as e:
        raise AssertionError(f"[{opset}] {e}\n--- coremltools:{cp}\n--- milkit:{mp}") from None
    assert_values_exact(cp, mp)
    assert_inputs_equal(cp, mp)
    mp.validate()
    return cp, mp


def assert_inputs_equal(cp: Any, mp: Any) -> None:
    """Function input names, dtypes and ranks (compare_programs checks ops and outputs)."""
    from coremltools.converters.mil.mil import types as ctypes

    ci = [(v.name, ctypes.builtin_to_string(v.dtype), len(v.shape)) for v in cp.functions["main"].inputs.values()]
    mi = [(v.name, v.dtype.__name__, len(v.shape)) for v in mp.functions["main"].inputs.values()]
    assert ci == mi, f"inputs {mi} != coremltools {ci}"


def assert_values_exact(cp: Any, mp: Any) -> None:
    """Known values must be bit-identical (compare_programs tolerates 1e-6 absolute)."""
    import numpy as np

    for co, mo in zip(cp.functions["main"].operations, mp.functions["main"].operations):
        for cv, mv in zip(co.outputs, mo.outputs):
            if cv.val is None or mv.val is None:
                continue
            ca, ma = np.asarray(cv.val), np.asarray(mv.val)
            if ca.dtype.kind == "f":
                assert np.array_equal(ca, ma.astype(ca.dtype), equal_nan=True), (
                    f"{co.op_type} '{co.name}': value {ma} != coremltools {ca}")


def op_types(prog: Any) -> list:
    return [o.op_type for o in prog.functions["main"].operations]
