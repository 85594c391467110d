"""The interpreter's elementwise unary kernels (abs .. tanh, inverse / log / rsqrt, clip,
threshold, logical_not, cast) and select, against numpy: fp32 and fp16 programs, int32, special
values, rounding halfway cases, every cast dtype pair, broadcasting, empty and symbolic shapes."""

from __future__ import annotations

import math
from typing import Any, Callable

import milkit as ct
import numpy as np
import pytest
from support.exec_util import assert_close, astype_x86, rand, run_op

# op -> (reference on float64, lo, hi of the random inputs)
FLOAT_OPS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], float, float]] = {
    "abs": (np.abs, -5, 5),
    "acos": (np.arccos, -1, 1),
    "asin": (np.arcsin, -1, 1),
    "atan": (np.arctan, -10, 10),
    "atanh": (np.arctanh, -0.99, 0.99),
    "ceil": (np.ceil, -10, 10),
    "cos": (np.cos, -10, 10),
    "cosh": (np.cosh, -10, 10),
    "erf": (np.vectorize(math.erf, otypes=[np.float64]), -4, 4),
    "exp": (np.exp, -20, 20),
    "exp2": (np.exp2, -20, 20),
    "floor": (np.floor, -10, 10),
    "round": (np.round, -10, 10),
    "sign": (np.sign, -5, 5),
    "sin": (np.sin, -10, 10),
    "sinh": (np.sinh, -10, 10),
    "sqrt": (np.sqrt, 0, 100),
    "square": (np.square, -100, 100),
    "tan": (np.tan, -1.5, 1.5),
    "tanh": (np.tanh, -10, 10),
}
INT_OPS = ["abs", "exp2", "sign", "square"]
SHAPES = [(7,), (3, 4, 5), (2, 1, 3, 8), (100_003,)]
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 1e-30, -1e-30,
                    1e30, -1e30, 100.0, -100.0, 3e-39], np.float32)


def run(op: str, inputs: dict[str, Any], **kw: Any) -> np.ndarray:
    """Runs `op`: arrays of rank >= 1 are program inputs, rank-0 ones consts (programs have no
    rank-0 inputs); `kw` holds the other parameters."""
    feeds = {k: v for k, v in inputs.items() if np.ndim(v) > 0}
    consts = {k: np.asarray(v) for k, v in inputs.items() if np.ndim(v) == 0}
    return run_op(op, feeds, **kw, **consts)[0]


def ref64(op: str, x: np.ndarray) -> np.ndarray:
    """The exact value (float64) of `op` at x."""
    with np.errstate(all="ignore"):
        return np.asarray(FLOAT_OPS[op][0](x.astype(np.float64)))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("op", list(FLOAT_OPS))
def test_fp32(op: str, shape: tuple[int, ...]) -> None:
    _, lo, hi = FLOAT_OPS[op]
    x = rand(*shape, lo=lo, hi=hi, seed=len(shape))
    got = run(op, {"x": x})
    assert got.dtype == np.float32
    assert_close(got, ref64(op, x).astype(np.float32), rtol=6e-7, atol=1e-37)


@pytest.mark.parametrize("op", list(FLOAT_OPS))
def test_fp16_program(op: str) -> None:
    """fp16 in, fp16 out: the reference is the fp32 result of the same fp16 inputs, rounded."""
    _, lo, hi = FLOAT_OPS[op]
    x = rand(4, 33, lo=lo, hi=hi, seed=2).astype(np.float16)
    got = run(op, {"x": x})
    assert got.dtype == np.float16
    with np.errstate(over="ignore"):
        want = ref64(op, x).astype(np.float32).astype(np.float16)
    assert_close(got, want, rtol=1e-3, atol=6e-8)


@pytest.mark.parametrize("op", list(FLOAT_OPS))
def test_special_values(op: str) -> None:
    """NaN, +-inf, +-0, tiny and huge values, as numpy computes them in float32."""
    got = run(op, {"x": SPECIAL})
    with np.errstate(all="ignore"):
        want = ref64(op, SPECIAL).astype(np.float32)
    assert_close(got, want, rtol=6e-7, atol=0)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


def test_fp16_extremes() -> None:
    x = np.array([65504, -65504, 6e-8, -6e-8, 1e-4, 11.1, -11.1, 0.0], np.float16)
    np.testing.assert_array_equal(run("square", {"x": x})[:2], [np.inf, np.inf])
    np.testing.assert_array_equal(run("exp", {"x": x})[5], np.inf)
    np.testing.assert_array_equal(run("abs", {"x": x}), np.abs(x))
    np.testing.assert_array_equal(run("sign", {"x": x}), np.sign(x))
    assert_close(run("sqrt", {"x": np.abs(x)}), np.sqrt(np.abs(x).astype(np.float32)).astype(np.float16), rtol=1e-3)


@pytest.mark.parametrize("op", INT_OPS)
def test_int32(op: str) -> None:
    """int32 abs / square wrap like numpy (abs(INT32_MIN) == INT32_MIN); exp2 is numpy's float64
    result stored back as int32 (truncated; out of range gives INT32_MIN)."""
    x = np.concatenate([np.array([0, 1, -1, 2**31 - 1, -(2**31), 46340, 46341, -46341, 65536, 30, 31, 40, -1, -3],
                                 np.int32), rand(50, lo=-100, hi=100, dtype=np.int32)])
    got = run(op, {"x": x})
    assert got.dtype == np.int32
    with np.errstate(all="ignore"):
        if op == "exp2":
            want = astype_x86(np.exp2(x.astype(np.float64)), np.int32)
        else:
            want = {"abs": np.abs, "sign": np.sign, "square": np.square}[op](x)
    np.testing.assert_array_equal(got, want)


def test_int32_values() -> None:
    x = np.array([-(2**31), 46341, 30, 31, -1], np.int32)
    np.testing.assert_array_equal(run("abs", {"x": x}), [-(2**31), 46341, 30, 31, 1])
    np.testing.assert_array_equal(run("square", {"x": x}), [0, -2147479015, 900, 961, 1])
    np.testing.assert_array_equal(run("exp2", {"x": x}), [0, -(2**31), 2**30, -(2**31), 0])


@pytest.mark.parametrize("op", ["round", "floor", "ceil"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_rounding(op: str, dtype: Any) -> None:
    """Halfway cases (round is half to even, like np.round), values near 2^23, signed zeros."""
    halves = np.arange(-10.5, 11, 0.5)
    with np.errstate(over="ignore"):  # the big values are inf in fp16
            x = np.concatenate([halves, [0.49999997, -0.49999997, 4194304.5, 8388607.5, -8388607.5, 8388609.0,
                                     16777216.0, 1e30, -1e30, -0.0, -0.2, 0.2, 2047.5, 1023.5, np.inf, -np.inf,
                                     np.nan]]).astype(dtype)
    got = run(op, {"x": x})
    want = {"round": np.round, "floor": np.floor, "ceil": np.ceil}[op](x)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    if op == "round":
        np.testing.assert_array_equal(run(op, {"x": np.array([0.5, 1.5, 2.5, -0.5, -2.5], dtype)}),
                                      [0, 2, 2, -0.0, -2])


EPS_OPS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], float]] = {
    "inverse": (np.reciprocal, 1e-4),
    "log": (np.log, 1e-45),
    "rsqrt": (lambda v: 1 / np.sqrt(v), 1e-12),
}


@pytest.mark.parametrize("opset", [ct.target.iOS15, ct.target.iOS17, ct.target.iOS18], ids=str)
@pytest.mark.parametrize("op", list(EPS_OPS))
def test_epsilon_default(op: str, opset: Any) -> None:
    """The default epsilon (in x's dtype), including x == 0 (log(0 + 1e-45) is finite in fp32)."""
    f, eps = EPS_OPS[op]
    x = np.concatenate([[0.0, 1e-4, 2.0], rand(40, lo=0, hi=5)]).astype(np.float32)
    with np.errstate(all="ignore"):
        want = f(x + np.float32(eps))
    assert_close(run(op, {"x": x}, opset=opset), want, rtol=3e-7)
    x16 = x.astype(np.float16)
    with np.errstate(all="ignore"):
        want16 = f(x16.astype(np.float32) + np.float32(np.float16(eps))).astype(np.float16)
    got16 = run(op, {"x": x16}, opset=opset)
    assert got16.dtype == np.float16
    assert_close(got16, want16, rtol=1e-3)


@pytest.mark.parametrize("op", list(EPS_OPS))
@pytest.mark.parametrize("xdt,edt", [(np.float32, np.float32), (np.float16, np.float32), (np.float32, np.float16),
                                     (np.float16, np.float16)], ids=str)
def test_epsilon_given(op: str, xdt: Any, edt: Any) -> None:
    """An explicit epsilon, of x's dtype or the other float dtype (iOS17's domain U); negative
    sums give NaN (log, rsqrt) like numpy."""
    f, _ = EPS_OPS[op]
    x = rand(5, 8, lo=-1, hi=3, seed=4).astype(xdt)
    eps = edt(0.75)
    with np.errstate(all="ignore"):
        want = f(x.astype(np.float32) + np.float32(eps)).astype(xdt)
    got = run(op, {"x": x}, epsilon=eps)
    assert got.dtype == xdt
    assert_close(got, want, rtol=1e-3 if xdt == np.float16 else 3e-7)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_clip(dtype: Any) -> None:
    x = np.concatenate([rand(300, lo=-4, hi=4), [np.nan, np.inf, -np.inf, -1.5, 2.5]]).astype(dtype)
    got = run("clip", {"x": x}, alpha=dtype(-1.5), beta=dtype(2.5))
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, np.minimum(np.maximum(x, dtype(-1.5)), dtype(2.5)))
    assert np.isnan(got[300])


def test_clip_ios15_tensor_bounds() -> None:
    """iOS15's clip takes tensors alpha / beta broadcast to x, and does not require alpha < beta."""
    x = rand(3, 4, lo=-4, hi=4, seed=5)
    alpha = np.array([-1, 0, 1, 3], np.float32)
    beta = np.array([[2], [0.5], [1]], np.float32)
    got = run("clip", {"x": x}, alpha=alpha, beta=beta, opset=ct.target.iOS15)
    np.testing.assert_array_equal(got, np.minimum(np.maximum(x, alpha), beta))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_threshold(dtype: Any) -> None:
    x = rand(6, 50, lo=-10, hi=10, dtype=dtype, seed=6)
    got = run("threshold", {"x": x}, alpha=np.asarray(2, dtype))
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, np.maximum(x, np.asarray(2, dtype)))
    alpha = rand(50, lo=-5, hi=5, dtype=dtype, seed=7)
    np.testing.assert_array_equal(run("threshold", {"x": x}, alpha=alpha), np.maximum(x, alpha))


def test_threshold_nan() -> None:
    x = np.array([np.nan, 1.0, -np.inf, np.inf], np.float32)
    np.testing.assert_array_equal(run("threshold", {"x": x}, alpha=np.float32(0)), np.maximum(x, np.float32(0)))
    assert np.isnan(run("threshold", {"x": x}, alpha=np.float32(np.nan))).all()


@pytest.mark.parametrize("shape", [(5,), (3, 70_001)], ids=str)
def test_logical_not(shape: tuple[int, ...]) -> None:
    x = rand(*shape, dtype=np.bool_, seed=8)
    got = run("logical_not", {"x": x})
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, ~x)


# ---- cast --------------------------------------------------------------------------------------

CAST_DTYPES = {"fp16": np.float16, "fp32": np.float32, "int8": np.int8, "uint8": np.uint8, "int16": np.int16,
               "uint16": np.uint16, "int32": np.int32, "bool": np.bool_}


def cast_source(dtype: Any) -> np.ndarray:
    """Values of `dtype` that exercise a cast: extremes, fractions, NaN / inf, fp16 rounding."""
    dt = np.dtype(dtype)
    if dt.kind == "b":  # long enough for the kernels' vector loops and their tails
        return np.concatenate([np.array([True, False, True, True, False] * 3, bool), rand(1001, dtype=np.bool_, seed=9)])
    if dt.kind in "iu":
        info = np.iinfo(dt)
        edge = [info.min, info.max, 0, 1, info.max - 1, info.min + 1, 127, 128, 255, 256, 32767, 32768, 65504, 65519,
                65520, 70000, 16777217]
        vals = np.array([v for v in edge if info.min <= v <= info.max], np.int64)
        return np.concatenate([vals, rand(1000, lo=info.min // 2, hi=info.max // 2, dtype=np.int64, seed=9)]).astype(dt)
    edge = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.9, 1.5, 127.99, 128.0, -128.5, -129.5, 255.5, 256.0, 300.7,
            32767.5, 32768.0, -32769.0, 65504.0, 65519.0, 65520.0, 65535.9, 70000.0, 2147483520.0, 2147483648.0,
            -2147483648.0, -2147483904.0, 4294967296.0, 1e10, -1e10, 1e30, 1.00048828125, 1.00146484375, 6e-8,
            3e-8, 1e-9, 1e-7]
    with np.errstate(all="ignore"):
        return np.concatenate([np.array(edge), rand(1003, lo=-300, hi=300, dtype=np.float64, seed=10)]).astype(dt)


@pytest.mark.parametrize("to", list(CAST_DTYPES))
@pytest.mark.parametrize("src", list(CAST_DTYPES))
def test_cast(src: str, to: str) -> None:
    """Every pair of iOS17's cast dtypes, exactly numpy's astype on x86 (float -> int: through
    int32, NaN and out-of-range values give INT32_MIN, then wrapped)."""
    x = cast_source(CAST_DTYPES[src])
    got = run("cast", {"x": x}, dtype=to)
    want = astype_x86(x, CAST_DTYPES[to])
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    if want.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("src,to", [("fp32", "int32"), ("int32", "fp16"), ("fp16", "bool"), ("bool", "fp32"),
                                    ("fp32", "fp32")])
def test_cast_ios15(src: str, to: str) -> None:
    x = cast_source(CAST_DTYPES[src])
    want = astype_x86(x, CAST_DTYPES[to])
    np.testing.assert_array_equal(run("cast", {"x": x}, dtype=to, opset=ct.target.iOS15), want)


def test_cast_symbolic_and_empty() -> None:
    x = rand(3, 5, lo=-50, hi=50)
    np.testing.assert_array_equal(run_op("cast", {"x": x}, symbolic=True, dtype="int16")[0], x.astype(np.int16))
    e = run("cast", {"x": np.zeros((0, 4), np.float16)}, dtype="int32")
    assert e.shape == (0, 4) and e.dtype == np.int32


# ---- select ------------------------------------------------------------------------------------

SELECT_SHAPES = [
    ((3, 4), (3, 4), (3, 4)),
    ((3, 4), (4,), (3, 1)),
    ((2, 1, 4), (3, 1), (1, 4)),
    ((4,), (2, 3, 4), ()),
    ((), (2, 3), (2, 3)),
    ((5, 1), (), (1, 6)),
    ((1,), (7,), (7,)),
]


@pytest.mark.parametrize("shapes", SELECT_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.bool_])
def test_select(dtype: Any, shapes: tuple[tuple[int, ...], ...]) -> None:
    """numpy.where with cond, a and b all broadcast; fp16 copied exactly."""
    c = rand(*shapes[0], dtype=np.bool_, seed=11)
    a = rand(*shapes[1], lo=-100, hi=100, dtype=dtype, seed=12)
    b = rand(*shapes[2], lo=-100, hi=100, dtype=dtype, seed=13)
    got = run("select", {"cond": c, "a": a, "b": b})
    want = np.where(c, a, b)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_select_fp16_bits() -> None:
    """select moves fp16 elements without converting them: NaN payloads, -0 and subnormals kept."""
    bits = np.array([0x7E01, 0xFE00, 0x8000, 0x0001, 0x7C00, 0x3C00], np.uint16)
    a = bits.view(np.float16)
    b = np.zeros(6, np.float16)
    got = run("select", {"cond": np.array([True] * 6), "a": a, "b": b})
    np.testing.assert_array_equal(got.view(np.uint16), bits)


def test_select_symbolic_large_empty() -> None:
    c = rand(40, 3000, dtype=np.bool_, seed=14)
    a = rand(40, 3000, seed=15)
    b = rand(3000, seed=16)
    np.testing.assert_array_equal(run_op("select", {"cond": c, "a": a, "b": b}, symbolic=True)[0], np.where(c, a, b))
    np.testing.assert_array_equal(run("select", {"cond": c[:, :1], "a": a, "b": b}), np.where(c[:, :1], a, b))
    # a condition per row (torch's safe softmax: rows with every score masked become 0), the
    # other operand a scalar (a fill) or a column (one value per row); rows split across threads
    fill = np.array([7.5], np.float32)
    np.testing.assert_array_equal(run("select", {"cond": c[:, :1], "a": fill, "b": a}), np.where(c[:, :1], fill, a))
    col = b[:40, None]
    np.testing.assert_array_equal(run("select", {"cond": c[:, 1:2], "a": a, "b": col}), np.where(c[:, 1:2], a, col))
    e = run("select", {"cond": np.zeros((0, 3), bool), "a": np.ones(3, np.float32), "b": np.zeros(3, np.float32)})
    assert e.shape == (0, 3)


# ---- shapes ------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["sin", "abs", "round", "exp2", "log", "clip", "threshold", "logical_not"])
def test_empty_and_symbolic(op: str) -> None:
    params: dict[str, Any] = {}
    if op == "clip":
        params = {"alpha": np.float32(-0.5), "beta": np.float32(0.5)}
    if op == "threshold":
        params = {"alpha": np.float32(0.1)}
    dt = np.bool_ if op == "logical_not" else np.float32
    for shape in [(0,), (2, 0, 3)]:
        got = run(op, {"x": np.zeros(shape, dt)}, **params)
        assert got.shape == shape and got.dtype == dt
    x = rand(3, 5, dtype=dt, lo=0.1, hi=2, seed=17)
    plain = run(op, {"x": x}, **params)
    symbolic = run_op(op, {"x": x}, symbolic=True, **params)[0]
    np.testing.assert_array_equal(plain, symbolic)
    assert plain.shape == (3, 5)
