"""Runs a pass (or a list of passes) in coremltools and in milkit on the same program and compares.

    from support.pass_parity import check_passes
    check_passes(build, [((2, "S"), "fp32")], ["common::cast_optimization"], opset="iOS17")
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from milkit.passes import apply_passes

from support.parity import _build, _ct, _make_symbols, compare_programs, reset_ct_names


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
                 options: dict | None = None, rtol: float = 1e-5, numbers_rtol: float | None = None,
                 numbers: bool = True):
    """Builds with both, runs the passes in both, compares op for op; returns both programs."""
    cp, mp, syms = build_both(build, specs, opset)
    before = _build("mk", build, specs, opset, _make_symbols(specs))
    ct_run(cp, names, options)
    apply_passes(mp, list(names), options, verify_each=True)
    try:
        compare_programs(cp, mp, syms, rtol)
    except AssertionError as e:
        raise AssertionError(f"[{opset}] {e}\n--- coremltools:{cp}\n--- milkit:{mp}") from None
    assert_values_exact(cp, mp)
    assert_inputs_equal(cp, mp)
    mp.validate()
    if numbers:
        assert_same_numbers(before, mp, specs, names, numbers_rtol)
    return cp, mp


def check_numbers_only(build: Callable, specs: Sequence, names: Sequence[str], opset: str = "iOS17") -> Any:
    """For rewrites where milkit deliberately differs from coremltools (whose rewrite changes the
    numbers): builds with milkit, runs the passes, checks the program computes what it computed
    before; returns the rewritten program."""
    before = _build("mk", build, specs, opset, _make_symbols(specs))
    mp = _build("mk", build, specs, opset, _make_symbols(specs))
    apply_passes(mp, list(names), None, verify_each=True)
    mp.validate()
    assert_same_numbers(before, mp, specs, names)
    return mp


def random_feed(prog: Any, specs: Sequence, seed: int = 0, sym_size: int | None = None,
                int_range: tuple = (-5, 6)) -> dict:
    """Random inputs for a program built from `specs`: each symbol gets a size (3, 4, 5, ..., or
    `sym_size` for all), floats are normal, ints uniform in `int_range`, bools random; state
    inputs are left out."""
    import numpy as np

    rng = np.random.default_rng(seed)
    sizes: dict = {}
    feed = {}
    for spec, name in zip(specs, prog.functions["main"].inputs):
        if len(spec) > 2 and spec[2] == "state":
            continue
        shape = []
        for d in spec[0]:
            if isinstance(d, str):
                sizes.setdefault(d, sym_size or 3 + len(sizes))
                shape.append(sizes[d])
            else:
                shape.append(d)
        dt = spec[1]
        if dt in ("fp32", "fp16"):
            a = rng.standard_normal(shape).astype(np.float32 if dt == "fp32" else np.float16)
        elif dt == "bool":
            a = rng.random(shape) < 0.5
        else:
            a = rng.integers(int_range[0], int_range[1], size=shape).astype(getattr(np, dt))
        feed[name] = a
    return feed


def _run(prog: Any, feed: dict, has_state: bool) -> list:
    import milkit

    plan = milkit.runtime.plan(prog)
    state = plan.make_state() if has_state else None
    return [v for _, v in plan.run(milkit.runtime.coerce_inputs(prog.functions["main"], feed), state)]


def assert_same_numbers(before: Any, after: Any, specs: Sequence, names: Sequence[str] = (),
                        rtol: float | None = None) -> None:
    """A pass is right when the program computes the same numbers before and after it: runs both
    with milkit's interpreter on the same random inputs and compares every output in order
    (fp32 within 1e-4 relative, fp16 within fp16 rounding of the reordered arithmetic).

    Symbolic dims get distinct sizes first; when the program cannot run on those (its ops tie the
    symbols together, or int inputs index into a dim), all symbols get 2, then 1, with small
    non-negative ints. A program that runs on none of them fails the test."""
    import milkit
    import numpy as np

    has_state = any(len(s) > 2 and s[2] == "state" for s in specs)
    attempts = [dict(), dict(sym_size=4), dict(sym_size=2, int_range=(0, 2)), dict(sym_size=1, int_range=(0, 1))]
    err: Exception | None = None
    for kw in attempts:
        feed = random_feed(before, specs, **kw)
        try:
            ref = _run(before, feed, has_state)
            break
        except (milkit.MilkitValueError, IndexError) as e:
            err = e
    else:
        raise AssertionError(f"the program before {list(names)} runs on no test input: {err}")
    got = _run(after, feed, has_state)
    fp16 = "common::add_fp16_cast" in names or any(s[1] == "fp16" for s in specs)
    assert len(ref) == len(got), f"{list(names)}: {len(ref)} outputs before, {len(got)} after"
    for i, (a, b) in enumerate(zip(ref, got)):
        assert a.shape == b.shape, f"{list(names)}: output {i} shape {a.shape} before, {b.shape} after"
        if rtol is not None:
            tol = (rtol, rtol)
        else:
            tol = (2e-2, 2e-2) if fp16 or a.dtype == np.float16 or b.dtype == np.float16 else (1e-4, 1e-5)
        np.testing.assert_allclose(b.astype(np.float64), a.astype(np.float64), rtol=tol[0], atol=tol[1],
                                   equal_nan=True, err_msg=f"{list(names)} changed output {i}")


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


def rand(*shape: int, seed: int = 0, dt: Any = None) -> Any:
    """A reproducible normal sample of `shape` (float32 unless `dt`)."""
    import numpy as np

    return np.random.RandomState(seed).randn(*shape).astype(dt or np.float32)


def non_const_ops(prog: Any) -> list:
    """The program's op types without the consts."""
    return [t for t in op_types(prog) if t != "const"]


def check_same_ops(build: Callable, specs: Sequence, name: str, opset: str = "iOS17", numbers: bool = True) -> list:
    """Runs pass `name` in coremltools and milkit (check_passes), checks both leave the same
    non-const op types, and returns them."""
    cp, mp = check_passes(build, specs, [name], opset=opset, numbers=numbers)
    assert non_const_ops(cp) == non_const_ops(mp)
    return non_const_ops(mp)


def ct_ops_after(build: Callable, specs: Sequence, name: str, opset: str = "iOS17") -> list:
    """coremltools' non-const op types after its pass `name` alone (where milkit differs on purpose)."""
    cp, _, _ = build_both(build, specs, opset)
    ct_run(cp, [name])
    return non_const_ops(cp)
