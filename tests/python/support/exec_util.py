"""Helpers for the interpreter's numeric tests: build a one-op program around numpy inputs, run
it with milkit.run, compare with a reference (numpy or torch.nn.functional)."""

from __future__ import annotations

import inspect
import os
import platform
import subprocess
import sys
from typing import Any, Callable

import milkit as ct
import numpy as np
from milkit import Builder as mb
from milkit import get_new_symbol, types

__all__ = ["run_op", "run_prog", "assert_close", "astype_x86", "MIL_DTYPE", "rand", "at_threads", "run_child"]

MIL_DTYPE = {
    np.dtype(np.float16): types.fp16,
    np.dtype(np.float32): types.fp32,
    np.dtype(np.int32): types.int32,
    np.dtype(np.bool_): types.bool,
    np.dtype(np.int8): types.int8,
    np.dtype(np.uint8): types.uint8,
    np.dtype(np.int16): types.int16,
    np.dtype(np.uint16): types.uint16,
}


def run_child(code: str, env: dict[str, str], text: bool = True,
              timeout: int = 300) -> subprocess.CompletedProcess:
    """Runs Python `code` in a child process with `env` added to this one's environment (the
    extension reads MILKIT_NO_AVX512 and MILKIT_PROFILE once per process), its output captured."""
    return subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env), capture_output=True,
                          text=text, timeout=timeout)


def at_threads(fn: Callable[[], Any], threads: tuple[int, ...] = (1, 2, 3)) -> list[Any]:
    """fn()'s result with the interpreter on each thread count in turn (the default restored
    after each, even when fn raises)."""
    outs = []
    for t in threads:
        ct.set_num_threads(t)
        try:
            outs.append(fn())
        finally:
            ct.set_num_threads(0)
    return outs


def rand(*shape: int, dtype: Any = np.float32, lo: float = -1.0, hi: float = 1.0, seed: int = 0) -> np.ndarray:
    """Uniform random values in [lo, hi) of `dtype` (ints: integers in [lo, hi))."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        return rng.integers(int(lo), int(hi), size=shape).astype(dt)
    return rng.uniform(lo, hi, size=shape).astype(dt)


def astype_x86(x: np.ndarray, dtype: Any) -> np.ndarray:
    """numpy's `x.astype(dtype)` as it is on x86-64, which milkit follows on every machine: a float
    converts to an integer type through int32 (truncated; NaN and values outside int32 give
    INT32_MIN, what cvttss2si / cvttsd2si return), then wraps to the narrower type. numpy's own
    float -> int conversion is the CPU's (on aarch64 it saturates, and NaN gives 0), so it is the
    reference only on x86-64, where this function checks that it agrees."""
    x = np.asarray(x)
    dt = np.dtype(dtype)
    with np.errstate(all="ignore"):
        if x.dtype.kind != "f" or dt.kind not in "iu":
            return x.astype(dt)
        if dt.itemsize > 4:
            raise ValueError(f"astype_x86: float -> {dt} is not through int32")
        f = x.astype(np.float64)
        ok = (f > -(2.0**31) - 1) & (f < 2.0**31)  # False for NaN too
        want = np.where(ok, np.trunc(np.where(ok, f, 0.0)), -(2.0**31)).astype(np.int32).astype(dt)
        if platform.machine().lower() in ("x86_64", "amd64"):
            np.testing.assert_array_equal(want, x.astype(dt), err_msg="astype_x86 disagrees with numpy on x86-64")
    return want


def _with_params(fn: Callable[..., Any], names: list[str]) -> Callable[..., Any]:
    """`fn(*xs)` with a signature of one positional parameter per name (the builder reads it)."""
    params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names]

    def wrapper(*xs: Any) -> Any:
        return fn(*xs)

    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return wrapper


def run_op(op: str, inputs: dict[str, np.ndarray], opset: Any = None, symbolic: bool = False,
           **params: Any) -> list[np.ndarray]:
    """Builds ``mb.<op>(**placeholders, **params)`` with one function input per array in `inputs`
    (list values become tuple inputs: one placeholder each), runs it, returns the outputs.

    `symbolic=True` gives every input dim a symbol, so the run binds them (checks kernels against
    the symbolic type inference). `params` are passed as they are (consts)."""
    specs = []
    names: list[tuple[str, int | None]] = []
    flat: dict[str, np.ndarray] = {}
    for key, val in inputs.items():
        vals = val if isinstance(val, list) else [val]
        for j, a in enumerate(vals):
            a = np.asarray(a)
            name = f"{key}_{j}" if isinstance(val, list) else key
            shape = tuple(get_new_symbol() for _ in a.shape) if symbolic else a.shape
            specs.append(mb.TensorSpec(shape=shape, dtype=MIL_DTYPE[a.dtype]))
            names.append((key, j if isinstance(val, list) else None))
            flat[name] = a
    kw: dict[str, Any] = {}
    if opset is None:
        opset = ct.target.iOS18

    def body(*xs: Any) -> Any:
        for (key, j), x in zip(names, xs):
            if j is None:
                kw[key] = x
            else:
                kw.setdefault(key, []).append(x)
        return getattr(mb, op)(**kw, **params)

    prog = mb.program(input_specs=specs, opset_version=opset)(_with_params(body, list(flat)))

    # function input names are the placeholders' names in order
    fn = prog.functions["main"]
    in_names = list(fn.inputs)
    feed = dict(zip(in_names, flat.values()))
    out = ct.run(prog, feed)
    return list(out.values())


def run_prog(build: Callable[..., Any], inputs: dict[str, np.ndarray], opset: Any = None) -> list[np.ndarray]:
    """Builds a program whose inputs are `inputs` (in order) with `build(*vars)`, runs it."""
    specs = [mb.TensorSpec(shape=a.shape, dtype=MIL_DTYPE[np.asarray(a).dtype]) for a in inputs.values()]

    prog = mb.program(input_specs=specs, opset_version=opset or ct.target.iOS18)(
        _with_params(lambda *xs: build(*xs), list(inputs)))

    feed = dict(zip(prog.functions["main"].inputs, inputs.values()))
    return list(ct.run(prog, feed).values())


def assert_close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Same shape and dtype kind; values close (NaN where the reference has NaN)."""
    want = np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    if want.dtype.kind in "biu" and got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True)
