"""Running MIL programs on any machine: ``milkit.run`` and the interpreter behind
``MLModel.predict``.

    out = milkit.run(prog, {"x": x})        # dict: output name -> numpy array

Each op runs a C++ kernel; fp16 programs compute every op in fp32 and round its result to fp16
(the reference behaviour the tests compare against). Symbolic dims are bound from the input shapes
at each call. The GIL is released while a program runs, so several threads can run at once.
"""

from __future__ import annotations

from typing import Any, Mapping

from . import _core

__all__ = ["run", "set_num_threads", "num_threads", "State", "Plan", "plan"]

State = _core.State
Plan = _core.Plan

# MIL.proto DataType codes -> numpy dtype names (numpy is imported when a program runs)
_NP_OF = {
    1: "bool",
    10: "float16",
    11: "float32",
    12: "float64",
    21: "int8",
    22: "int16",
    23: "int32",
    24: "int64",
    31: "uint8",
    32: "uint16",
    33: "uint32",
    34: "uint64",
}


def num_threads() -> int:
    """Threads the interpreter's kernels use (``MILKIT_NUM_THREADS``, else every core)."""
    return int(_core.num_threads())


def set_num_threads(n: int) -> None:
    """Sets the threads the interpreter's kernels use; 0 restores the default."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"set_num_threads expects a non-negative int, got {n!r}")
    _core.set_num_threads(n)


def _function(prog: Any, function_name: str | None) -> Any:
    if isinstance(prog, _core.Function):
        return prog
    if not isinstance(prog, _core.Program):
        raise TypeError(f"milkit.run expects a milkit Program or Function, got {type(prog).__name__}")
    name = function_name or prog.default_function_name
    funcs = prog.functions
    if name not in funcs:
        raise ValueError(f"the program has no function named {name!r}; its functions are {sorted(funcs)}")
    return funcs[name]


def plan(prog: Any, function_name: str | None = None) -> Any:
    """Plans a function of `prog` once, for many runs (``Plan.run(inputs, state)``)."""
    return _core.Plan(_function(prog, function_name))


def _c_order(arr: Any) -> Any:
    """A C-ordered array of the same shape (np.ascontiguousarray would make a 0-d array 1-d)."""
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


def coerce_inputs(fn: Any, data: Mapping[str, Any], as_coreml: bool = False) -> dict:
    """The inputs as C-ordered arrays of the declared dtypes. Values of another dtype are cast when
    numpy can do it without losing the kind (fp64 -> fp32, int64 -> int32 within range, int ->
    float, bool -> int); anything else (float -> int, out-of-range ints) raises ValueError naming
    the input.

    With `as_coreml` (``MLModel.predict``) the feeds are taken as Core ML takes them: float values
    for an int input are cast when every one is integral (1.5 for an int32 input raises), and a
    (1,) array feeds a rank-0 input."""
    import numpy as np

    if not isinstance(data, Mapping):
        raise TypeError(f"inputs must be a dict of name -> array, got {type(data).__name__}")
    inputs = fn.inputs
    out = {}
    for name, value in data.items():
        if not isinstance(name, str):
            raise TypeError(f"input names must be strings, got {name!r}")
        var = inputs.get(name)
        arr = np.asarray(value)
        if var is None or var._kind == "state" or var._dtype_code not in _NP_OF:
            out[name] = _c_order(arr)  # the interpreter reports the unknown name
            continue
        want = np.dtype(_NP_OF[var._dtype_code])
        if as_coreml and arr.shape == (1,) and var._kind == "scalar":
            arr = arr.reshape(())
        if arr.dtype != want:
            ok = np.can_cast(arr.dtype, want, "same_kind") or (
                arr.dtype.kind in "biu" and want.kind in "fc") or (arr.dtype.kind == "b" and want.kind in "iu")
            if as_coreml and not ok and arr.dtype.kind == "f" and want.kind in "iu":
                arr = _integral(name, arr, want)
                ok = True
            if ok and arr.dtype.kind in "iu" and want.kind in "iu" and arr.size:
                info = np.iinfo(want)
                lo, hi = arr.min(), arr.max()
                if lo < info.min or hi > info.max:
                    raise ValueError(f"input {name!r}: values in [{lo}, {hi}] do not fit {want.name}")
            if not ok:
                raise ValueError(f"input {name!r} has dtype {arr.dtype.name}, which cannot be cast safely to "
                                 f"the model's {want.name}")
            arr = arr.astype(want)
        out[name] = _c_order(arr)
    return out


def _integral(name: str, arr: Any, want: Any) -> Any:
    """Float feeds of an int input as integers of their values (in range and integral), else a
    ValueError naming the input and a value that is not."""
    import numpy as np

    info = np.iinfo(want)
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(arr) | (arr != np.trunc(arr))
        if bad.any():
            raise ValueError(f"input {name!r} has dtype {arr.dtype.name}, which cannot be cast safely to the "
                             f"model's {want.name}: it holds {arr[bad].flat[0]}, which is not an integer")
        out = (arr < info.min) | (arr > info.max)
        if out.any():
            raise ValueError(f"input {name!r}: the value {arr[out].flat[0]} does not fit {want.name}")
    return arr.astype(want)


def classifier_labels(fn: Any) -> set:
    """Names of the function's outputs that are classify labels (returned as Python scalars)."""
    out = set()
    for v in fn.outputs:
        op = v.op
        if op is not None and op.op_type == "classify" and v.op_output_idx == 0:
            out.add(v.name)
    return out


def outputs_as_coreml(fn: Any, outs: list) -> dict:
    """A run's [(name, value)] as a dict; a classifier's int64 label becomes a Python int (its str
    label is a str already, its probabilities a dict), as Core ML returns them."""
    labels = classifier_labels(fn)
    result = {}
    for name, value in outs:
        if name in labels and not isinstance(value, str):
            value = value.item()
        result[name] = value
    return result


def run(prog: Any, inputs: Mapping[str, Any], function_name: str = "main", state: Any = None,
        num_threads: int | None = None) -> dict:
    """Runs function `function_name` of `prog` on `inputs` (name -> array) and returns the outputs
    as a dict name -> numpy array, in the function's output order (a classify label as a str or
    int, its probabilities as a dict label -> float).

    `state` is a ``State`` from ``milkit.runtime.plan(prog).make_state()`` or
    ``MLModel.make_state()`` for programs with state inputs. `num_threads` sets the kernels'
    thread count for this and later runs (as ``set_num_threads``).
    """
    if num_threads is not None:
        set_num_threads(num_threads)
    # "main" (the default) means the program's default function, whatever its name
    if isinstance(prog, _core.Program) and function_name == "main" and "main" not in prog.functions:
        function_name = prog.default_function_name
    fn = _function(prog, function_name)
    p = _core.Plan(fn)
    return outputs_as_coreml(fn, p.run(coerce_inputs(fn, inputs), state))
