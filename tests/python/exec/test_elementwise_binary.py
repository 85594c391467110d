"""The interpreter's 18 elementwise binary kernels against numpy: broadcasting, fp16 programs,
int32 wrapping, floor_div / mod signs, NaN and inf, division by zero, empty and symbolic shapes."""

from __future__ import annotations

from typing import Any, Callable

import milkit as ct
import numpy as np
import pytest
from milkit import Builder as mb
from support.exec_util import assert_close, astype_x86, rand, run_op, run_prog

ARITH: dict[str, Callable[..., Any]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "real_div": np.true_divide,
    "floor_div": np.floor_divide,
    "mod": np.mod,
    "pow": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
}
COMPARE: dict[str, Callable[..., Any]] = {
    "equal": np.equal,
    "not_equal": np.not_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "less": np.less,
    "less_equal": np.less_equal,
}
LOGICAL: dict[str, Callable[..., Any]] = {
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}
NUMERIC = {**ARITH, **COMPARE}

SHAPES = [
    ((3, 4), (3, 4)),
    ((3, 4), (4,)),
    ((4,), (3, 4)),
    ((2, 1, 4), (3, 1)),
    ((), (5,)),
    ((5,), ()),
    ((1,), (2, 3)),
    ((2, 3, 1, 5), (1, 3, 4, 1)),
]


def ref(op: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """numpy's result of `op` (warnings about division by zero / overflow silenced)."""
    with np.errstate(all="ignore"):
        return np.asarray({**NUMERIC, **LOGICAL}[op](x, y))


def run_bin(op: str, x: np.ndarray, y: np.ndarray, **kw: Any) -> np.ndarray:
    """Runs `op` on x and y; a rank-0 operand is a const (programs have no rank-0 inputs)."""
    inputs: dict[str, np.ndarray] = {}
    consts: dict[str, np.ndarray] = {}
    for name, a in (("x", x), ("y", y)):
        (consts if np.ndim(a) == 0 else inputs)[name] = np.asarray(a)
    assert inputs, "both operands rank 0: the op would be folded, not run"
    return run_op(op, inputs, **kw, **consts)[0]


def operands(op: str, xs: tuple[int, ...], ys: tuple[int, ...], dtype: Any, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Random x, y for `op`: divisors away from 0, pow with a positive base (real result)."""
    x = rand(*xs, lo=-3, hi=3, seed=seed).astype(dtype)
    y = rand(*ys, lo=-3, hi=3, seed=seed + 1).astype(dtype)
    if op in ("real_div", "floor_div", "mod"):
        y = np.where(np.abs(y) < 0.25, np.asarray(0.5, dtype), y).astype(dtype)
    if op == "pow":
        x = np.abs(x) + np.asarray(0.1, dtype)
    return x, y


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("op", list(NUMERIC))
def test_fp32_broadcast(op: str, shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    x, y = operands(op, *shapes, np.float32)
    got = run_bin(op, x, y)
    want = ref(op, x, y)
    assert got.dtype == want.dtype
    # the same IEEE operations as numpy: exact, except pow (libm vs numpy's power)
    assert_close(got, want, rtol=2e-7 if op == "pow" else 0, atol=0)


@pytest.mark.parametrize("op", list(NUMERIC))
def test_fp16_program(op: str) -> None:
    x, y = operands(op, (4, 5), (5,), np.float16, seed=3)
    got = run_bin(op, x, y)
    want = ref(op, x.astype(np.float32), y.astype(np.float32))
    if want.dtype == np.float32:
        want = want.astype(np.float16)
    assert got.dtype == want.dtype
    assert_close(got, want, rtol=1e-3 if op == "pow" else 0, atol=0)


def test_fp16_extremes() -> None:
    x = np.array([65504, -65504, 6e-8, 1e-4, 60000, 0.0], np.float16)
    y = np.array([65504, -65504, 6e-8, 1e-4, 2, -0.0], np.float16)
    for op in ("add", "mul", "real_div", "sub"):
        got = run_bin(op, x, y)
        with np.errstate(over="ignore"):
            want = ref(op, x.astype(np.float32), y.astype(np.float32)).astype(np.float16)
        assert_close(got, want, rtol=0, atol=0)
    assert np.isinf(run_op("add", {"x": x, "y": y})[0][:2]).all()


INT_X = np.array([7, -7, 7, -7, 0, 6, -6, 1, -1, 2**31 - 1, -(2**31), -(2**31), 5], np.int32)
INT_Y = np.array([2, 2, -2, -2, 3, 3, -3, 0, 0, 1, -1, 2**31 - 1, -(2**31)], np.int32)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "floor_div", "mod", "maximum", "minimum", *COMPARE])
def test_int32(op: str) -> None:
    """int32 wraps on overflow; floor_div / mod follow Python's signs; // 0 and % 0 give 0."""
    got = run_op(op, {"x": INT_X, "y": INT_Y})[0]
    want = ref(op, INT_X, INT_Y)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_int32_overflow_wraps() -> None:
    big = np.array([2**31 - 1, -(2**31), 65536, 46341, -(2**31)], np.int32)
    one = np.array([1, 1, 65536, 46341, -1], np.int32)
    np.testing.assert_array_equal(run_op("add", {"x": big, "y": one})[0],
                                  np.array([-(2**31), -(2**31) + 1, 131072, 92682, 2**31 - 1], np.int32))
    np.testing.assert_array_equal(run_op("sub", {"x": big, "y": one})[0],
                                  np.array([2**31 - 2, 2**31 - 1, 0, 0, -(2**31) + 1], np.int32))
    np.testing.assert_array_equal(run_op("mul", {"x": big, "y": one})[0],
                                  np.array([2**31 - 1, -(2**31), 0, -2147479015, -(2**31)], np.int32))


def test_int32_floor_div_mod_signs() -> None:
    x = np.repeat(np.arange(-9, 10, dtype=np.int32), 8)
    y = np.tile(np.array([-4, -3, -2, -1, 1, 2, 3, 4], np.int32), 19)
    q = run_op("floor_div", {"x": x, "y": y})[0]
    r = run_op("mod", {"x": x, "y": y})[0]
    np.testing.assert_array_equal(q, [a // b for a, b in zip(x.tolist(), y.tolist())])
    np.testing.assert_array_equal(r, [a % b for a, b in zip(x.tolist(), y.tolist())])
    np.testing.assert_array_equal(q * y + r, x)


def test_int32_real_div() -> None:
    """numpy's float64 quotient cast back to int32: truncation, x / 0 and overflow give INT32_MIN."""
    got = run_op("real_div", {"x": INT_X, "y": INT_Y})[0]
    with np.errstate(all="ignore"):
        want = astype_x86(np.true_divide(INT_X, INT_Y), np.int32)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got[:4], [3, -3, -3, 3])
    np.testing.assert_array_equal(got[7:9], [-(2**31), -(2**31)])


def test_int32_pow() -> None:
    """Integer powers wrap like numpy's int32 power; a negative exponent truncates the exact value
    (1, -1 or 0; numpy refuses it)."""
    x = np.repeat(np.arange(-5, 6, dtype=np.int32), 14)
    y = np.tile(np.array([0, 1, 2, 3, 5, 8, 13, 21, 31, 40, -1, -2, -3, -7], np.int32), 11)

    def exact(a: int, b: int) -> int:
        if b < 0:
            return 1 if a == 1 else (-1 if a == -1 and b % 2 else (1 if a == -1 else 0))
        v = pow(a, b, 2**32)
        return v - 2**32 if v >= 2**31 else v

    got = run_op("pow", {"x": x, "y": y})[0]
    np.testing.assert_array_equal(got, [exact(a, b) for a, b in zip(x.tolist(), y.tolist())])
    pos = y >= 0
    np.testing.assert_array_equal(got[pos], np.power(x[pos], y[pos]))


def test_int32_exact_compare() -> None:
    """ints are compared as ints, not through float (2^24 + 1 != 2^24)."""
    x = np.array([16777217, 2**31 - 1, -(2**31)], np.int32)
    y = np.array([16777216, 2**31 - 2, -(2**31) + 1], np.int32)
    np.testing.assert_array_equal(run_op("equal", {"x": x, "y": y})[0], [False, False, False])
    np.testing.assert_array_equal(run_op("greater", {"x": x, "y": y})[0], [True, True, False])


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 1e30, 0.1], np.float32)


@pytest.mark.parametrize("op", list(NUMERIC))
def test_special_values(op: str) -> None:
    """Every pair of NaN, +-inf, +-0, ... : NaN propagation (maximum / minimum too), division by
    zero, floor_div / mod with infinite or zero divisors, comparisons with NaN."""
    x = np.repeat(SPECIAL, SPECIAL.size)
    y = np.tile(SPECIAL, SPECIAL.size)
    got = run_bin(op, x, y)
    want = ref(op, x, y)
    assert got.dtype == want.dtype
    if op == "pow":
        assert_close(got, want, rtol=2e-7, atol=0)
    else:
        np.testing.assert_array_equal(got, want)


def test_float_floor_div_exact() -> None:
    """floor_div is the floor of the exact quotient, like np.floor_divide (1 // 0.1 == 9)."""
    x = rand(2000, lo=-50, hi=50, seed=5)
    y = rand(2000, lo=-1, hi=1, seed=6)
    x[:4] = [1.0, -1.0, 0.3, -0.3]
    y[:4] = [0.1, 0.1, 0.1, -0.1]
    q = run_op("floor_div", {"x": x, "y": y})[0]
    r = run_op("mod", {"x": x, "y": y})[0]
    np.testing.assert_array_equal(q, np.floor_divide(x, y))
    np.testing.assert_array_equal(r, np.mod(x, y))
    assert q[0] == 9.0
    assert (np.sign(r[r != 0]) == np.sign(y[r != 0])).all()


def test_float_floor_div_mod_large_quotients() -> None:
    """Quotients around and beyond 2^23 (where the kernel leaves its double-precision path for
    numpy's fmod-based one) match numpy bit for bit."""
    rng = np.random.default_rng(12)
    mag = 10.0 ** rng.uniform(-3, 30, 3000)
    x = (mag * rng.choice([-1, 1], 3000)).astype(np.float32)
    y = (10.0 ** rng.uniform(-3, 3, 3000) * rng.choice([-1, 1], 3000)).astype(np.float32)
    edge = np.float32(2**23)
    x[:6] = [edge - 1, edge, edge + 2, -edge, -edge + 1, 3 * edge]
    y[:6] = [1, 1, 1, 1, 1, 3]
    np.testing.assert_array_equal(run_op("floor_div", {"x": x, "y": y})[0], np.floor_divide(x, y))
    np.testing.assert_array_equal(run_op("mod", {"x": x, "y": y})[0], np.mod(x, y))


@pytest.mark.parametrize("op", list(LOGICAL))
@pytest.mark.parametrize("shapes", [((2, 3), (2, 3)), ((2, 3), (3,)), ((), (4, 1)), ((3, 1), (1, 5))], ids=str)
def test_logical(op: str, shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    x = rand(*shapes[0], dtype=np.bool_, seed=1)
    y = rand(*shapes[1], dtype=np.bool_, seed=2)
    got = run_bin(op, x, y)
    np.testing.assert_array_equal(got, ref(op, x, y))
    assert got.dtype == np.bool_


@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 3, 4), (1,))], ids=str)
@pytest.mark.parametrize("op", ["add", "mul", "floor_div", "maximum", "less", "logical_xor"])
def test_symbolic(op: str, shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    """Every input dim a symbol: size-1 dims are only known to broadcast at run time."""
    if op == "logical_xor":
        x, y = rand(*shapes[0], dtype=np.bool_), rand(*shapes[1], dtype=np.bool_, seed=1)
    else:
        x, y = operands(op, *shapes, np.float32)
    got = run_bin(op, x, y, symbolic=True)
    np.testing.assert_array_equal(got, ref(op, x, y))


@pytest.mark.parametrize("shapes", [((0, 3), (3,)), ((0,), ()), ((2, 0), (1, 1)), ((4, 1), (0,))], ids=str)
@pytest.mark.parametrize("op", ["add", "pow", "greater", "logical_or"])
def test_empty(op: str, shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    dt = np.bool_ if op == "logical_or" else np.float32
    x = np.zeros(shapes[0], dt)
    y = np.ones(shapes[1], dt)
    got = run_bin(op, x, y)
    want = ref(op, x, y)
    assert got.shape == want.shape and got.dtype == want.dtype


@pytest.mark.parametrize("op", ["add", "sub", "mod", "maximum", "greater_equal"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_large_parallel(op: str, dtype: Any) -> None:
    """Big enough to be split across threads, through each of the loop's paths."""
    x = rand(300, 1000, lo=-100, hi=100, dtype=dtype, seed=7)
    for y in (rand(300, 1000, lo=1, hi=50, dtype=dtype, seed=8), rand(1000, lo=1, hi=50, dtype=dtype, seed=9),
              rand(300, 1, lo=1, hi=50, dtype=dtype, seed=10), np.asarray(rand(1, lo=1, hi=50, dtype=dtype)[0])):
        got = run_bin(op, x, y)
        np.testing.assert_array_equal(got, ref(op, x, y))
    outer = run_bin(op, x[:1], x[:, :1])
    np.testing.assert_array_equal(outer, ref(op, x[:1], x[:, :1]))


def test_chain_fp16() -> None:
    """A multi-op fp16 program: each op rounds its result to fp16."""
    x = rand(6, 7, lo=-4, hi=4, seed=11).astype(np.float16)
    y = rand(7, lo=0.5, hi=2, seed=12).astype(np.float16)
    got = run_prog(lambda a, b: mb.mod(x=mb.mul(x=a, y=b), y=mb.add(x=b, y=b)), {"x": x, "y": y})[0]
    f = np.float32
    prod = (x.astype(f) * y.astype(f)).astype(np.float16)
    both = (y.astype(f) + y.astype(f)).astype(np.float16)
    want = np.mod(prod.astype(f), both.astype(f)).astype(np.float16)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want)


def test_opset_ios15() -> None:
    x, y = operands("floor_div", (3, 4), (4,), np.float32)
    got = run_bin("floor_div", x, y, opset=ct.target.iOS15)
    np.testing.assert_array_equal(got, np.floor_divide(x, y))


def test_maximum_minimum_fold_propagates_nan_like_the_kernel() -> None:
    """Constant folding and the kernel agree with np.maximum / np.minimum on NaN."""
    from milkit import types

    a = np.array([np.nan, 1.0, 2.0], np.float32)
    b = np.array([0.0, np.nan, 1.0], np.float32)

    @mb.program(input_specs=[mb.TensorSpec(shape=(3,), dtype=types.fp32)], opset_version=ct.target.iOS17)
    def prog(x: Any) -> Any:
        return mb.maximum(x=a, y=b), mb.minimum(x=a, y=b), mb.maximum(x=x, y=b)

    ops = prog.functions["main"].find_ops(op_type="maximum") + prog.functions["main"].find_ops(op_type="minimum")
    folded = [o.outputs[0].val for o in ops if o.outputs[0].val is not None]
    np.testing.assert_array_equal(folded[0], np.maximum(a, b))
    np.testing.assert_array_equal(folded[1], np.minimum(a, b))
    _, _, run_max = ct.run(prog, {"x": a}).values()
    np.testing.assert_array_equal(run_max, np.maximum(a, b))
