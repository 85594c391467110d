"""Numeric tests of the interpreter's reduction kernels (reduce_* ops) against numpy.

Float references are computed in float64 from the same inputs (fp16 programs: from the fp16
inputs, rounded to fp16 at the end); int32 references follow coremltools' value inference
(numpy on int32, cast back to int32: sums and products wrap, means and logs truncate)."""

from __future__ import annotations

from typing import Any, Callable

import milkit as ct
import numpy as np
import pytest
from support.exec_util import assert_close, rand, run_op

AxesT = tuple[int, ...] | None


def _lse(x: np.ndarray, axis: AxesT, keepdims: bool) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    m_fin = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):
        r = np.log(np.sum(np.exp(x - m_fin), axis=axis, keepdims=True)) + m_fin
    r = np.where(np.isfinite(m), r, m)
    return r if keepdims else np.squeeze(r, axis=axis) if axis is not None else r.reshape(())


FLOAT_REF: dict[str, Callable[[np.ndarray, AxesT, bool], np.ndarray]] = {
    "reduce_l1_norm": lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k),
    "reduce_l2_norm": lambda x, a, k: np.sqrt(np.sum(np.square(x), axis=a, keepdims=k)),
    "reduce_log_sum": lambda x, a, k: np.log(np.sum(x, axis=a, keepdims=k)),
    "reduce_log_sum_exp": _lse,
    "reduce_max": lambda x, a, k: np.max(x, axis=a, keepdims=k),
    "reduce_mean": lambda x, a, k: np.mean(x, axis=a, keepdims=k),
    "reduce_min": lambda x, a, k: np.min(x, axis=a, keepdims=k),
    "reduce_prod": lambda x, a, k: np.prod(x, axis=a, keepdims=k),
    "reduce_sum": lambda x, a, k: np.sum(x, axis=a, keepdims=k),
    "reduce_sum_square": lambda x, a, k: np.sum(np.square(x), axis=a, keepdims=k),
}
OPS = sorted(FLOAT_REF)

# (shape, axes): rows (innermost reduced), columns (innermost kept), mixed runs, size-1 dims
CASES: list[tuple[tuple[int, ...], list[int] | None]] = [
    ((7,), None),
    ((3, 4, 5), None),
    ((3, 4, 5), [2]),
    ((3, 4, 5), [0]),
    ((3, 4, 5), [1]),
    ((3, 4, 5), [0, 2]),
    ((3, 4, 5), [-1, -2]),
    ((2, 3, 4, 5), [1, 3]),
    ((2, 3, 4, 5), [0, 2]),
    ((2, 1, 4, 1), [1, 3]),
    ((2, 1, 4, 1), [0, 1]),
    ((5, 300), [0]),
    ((300, 37), [1]),
    ((4, 6), []),
]


def _inputs(op: str, shape: tuple[int, ...], dtype: Any, seed: int = 0) -> np.ndarray:
    if op == "reduce_log_sum":
        return rand(*shape, dtype=dtype, lo=0.1, hi=1.0, seed=seed)
    if op == "reduce_prod":
        return rand(*shape, dtype=dtype, lo=0.5, hi=1.5, seed=seed)
    return rand(*shape, dtype=dtype, lo=-2.0, hi=2.0, seed=seed)


def _axes_kw(axes: list[int] | None) -> dict[str, Any]:
    return {} if axes is None else {"axes": np.array(axes, np.int32)}


def _np_axes(axes: list[int] | None) -> AxesT:
    return None if axes is None else tuple(axes)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape,axes", CASES)
@pytest.mark.parametrize("keep_dims", [False, True])
def test_reduce_fp32(op: str, shape: tuple[int, ...], axes: list[int] | None, keep_dims: bool) -> None:
    x = _inputs(op, shape, np.float32)
    (got,) = run_op(op, {"x": x}, keep_dims=keep_dims, **_axes_kw(axes))
    want = FLOAT_REF[op](x.astype(np.float64), _np_axes(axes), keep_dims).astype(np.float32)
    assert got.dtype == np.float32
    assert_close(got, want, rtol=2e-5, atol=1e-5)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape,axes", [((3, 4, 5), [1]), ((6, 33), [-1]), ((3, 4, 5), None)])
def test_reduce_fp16(op: str, shape: tuple[int, ...], axes: list[int] | None) -> None:
    x = _inputs(op, shape, np.float16)
    (got,) = run_op(op, {"x": x}, **_axes_kw(axes))
    want = FLOAT_REF[op](x.astype(np.float32), _np_axes(axes), False).astype(np.float16)
    assert got.dtype == np.float16
    assert_close(got, want, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("op", OPS)
def test_reduce_symbolic(op: str) -> None:
    x = _inputs(op, (3, 4, 5), np.float32, seed=3)
    (got,) = run_op(op, {"x": x}, symbolic=True, axes=[0, 2], keep_dims=True)
    assert_close(got, FLOAT_REF[op](x.astype(np.float64), (0, 2), True).astype(np.float32), rtol=2e-5, atol=1e-5)


@pytest.mark.parametrize("op", OPS)
def test_reduce_large_parallel(op: str) -> None:
    """Big enough for several parallel chunks in both layouts."""
    x = _inputs(op, (96, 700), np.float32, seed=5)
    if op == "reduce_prod":
        x = (1 + (x - 1) * 0.01).astype(np.float32)
    for axes in ([1], [0]):
        (got,) = run_op(op, {"x": x}, axes=axes)
        assert_close(got, FLOAT_REF[op](x.astype(np.float64), tuple(axes), False).astype(np.float32),
                     rtol=5e-5, atol=1e-4)


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_max", "reduce_argmin", "reduce_l2_norm", "reduce_prod"])
def test_reduce_all_long_split(op: str) -> None:
    """One long row (reduce everything) is split in parallel chunks."""
    x = rand(2, 3, 70000, seed=9)
    if op == "reduce_prod":
        x = (1 + x * 1e-4).astype(np.float32)
    x[1, 2, 65537] = 5.0
    if op in ARG_REF:
        (got,) = run_op(op, {"x": x.reshape(-1)}, axis=0)
        assert_close(got, np.array(ARG_REF[op](x), np.int32))
        return
    (got,) = run_op(op, {"x": x})
    assert_close(got, FLOAT_REF[op](x.astype(np.float64), None, False).astype(np.float32), rtol=2e-5)
    xi = rand(3, 140000, dtype=np.int32, lo=-1000, hi=1000)
    if op != "reduce_prod":
        (got,) = run_op(op, {"x": xi})
        assert_close(got, _int_ref(op, xi, None, False))


def _int_ref(op: str, x: np.ndarray, axes: AxesT, keep: bool) -> np.ndarray:
    """coremltools' value inference on int32: numpy, cast back to int32."""
    with np.errstate(all="ignore"):
        if op == "reduce_log_sum_exp":
            r = _lse(x.astype(np.float64), axes, keep)
        else:
            r = FLOAT_REF[op](x, axes, keep)
        return np.asarray(r).astype(np.int32)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape,axes", [((3, 4, 5), [1]), ((3, 4, 5), [0, 2]), ((40,), None), ((6, 300), [1])])
def test_reduce_int32(op: str, shape: tuple[int, ...], axes: list[int] | None) -> None:
    lo, hi = (1, 20) if op == "reduce_log_sum" else (-3, 4) if op == "reduce_prod" else (-50, 50)
    x = rand(*shape, dtype=np.int32, lo=lo, hi=hi, seed=1)
    (got,) = run_op(op, {"x": x}, **_axes_kw(axes))
    assert got.dtype == np.int32
    assert_close(got, _int_ref(op, x, _np_axes(axes), False))


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_prod", "reduce_sum_square", "reduce_l1_norm",
                                "reduce_mean", "reduce_l2_norm"])
def test_reduce_int32_overflow(op: str) -> None:
    """Sums / products wrap at 32 bits (numpy int32 results); mean and l2 use exact sums."""
    x = np.array([[2**31 - 1, 2**31 - 1, 5, -(2**31)], [70000, 70000, 3, 2**30]], dtype=np.int32)
    (got,) = run_op(op, {"x": x}, axes=[1])
    assert_close(got, _int_ref(op, x, (1,), False))


def test_reduce_nan_inf() -> None:
    nan, inf = np.nan, np.inf
    x = np.array([[1, nan, 3], [-inf, 2, inf], [-inf, -inf, -inf], [inf, 1, 2], [1, 2, nan]], np.float32)
    for op in ["reduce_max", "reduce_min", "reduce_sum", "reduce_mean", "reduce_prod"]:
        (got,) = run_op(op, {"x": x}, axes=[1])
        with np.errstate(invalid="ignore"):
            assert_close(got, FLOAT_REF[op](x, (1,), False))
    # column layout: NaN propagates per lane
    (got,) = run_op("reduce_max", {"x": x.T.copy()}, axes=[0])
    assert_close(got, np.max(x, axis=1))
    # log_sum_exp: an infinite max is the result (torch.logsumexp), NaN propagates
    (got,) = run_op("reduce_log_sum_exp", {"x": x}, axes=[1])
    assert_close(got, np.array([nan, inf, -inf, inf, nan], np.float32))
    (got,) = run_op("reduce_log_sum_exp", {"x": x.T.copy()}, axes=[0])
    assert_close(got, np.array([nan, inf, -inf, inf, nan], np.float32))


@pytest.mark.parametrize("op", ["reduce_max", "reduce_min", "reduce_sum", "reduce_l1_norm", "reduce_argmax",
                                "reduce_argmin"])
@pytest.mark.parametrize("pos", [0, 5, 17, 63, 99])
def test_reduce_nan_inf_long_rows(op: str, pos: int) -> None:
    """Rows / columns long enough for the SIMD lanes: a NaN anywhere propagates (argmax: its
    index), infinities win max / min."""
    x = rand(6, 100, seed=7)
    x[0, pos] = np.nan
    x[1, pos] = np.inf
    x[2, pos] = -np.inf
    x[3, pos], x[3, (pos + 37) % 100] = np.nan, np.inf
    x[4, pos], x[4, 99 - pos] = 3.0, 3.0  # ties: the first index
    for axis in (1, 0):
        xs = x if axis == 1 else x.T.copy()
        if op in ARG_REF:
            (got,) = run_op(op, {"x": xs}, axis=axis)
            assert_close(got, ARG_REF[op](xs, axis=axis).astype(np.int32))
        else:
            (got,) = run_op(op, {"x": xs}, axes=np.array([axis], np.int32))
            assert_close(got, FLOAT_REF[op](xs.astype(np.float64), (axis,), False).astype(np.float32), rtol=1e-5)


def test_reduce_log_sum_exp_stable() -> None:
    """No overflow for large inputs (exp(1000) is inf in any float)."""
    x = np.array([[1000.0, 1000.0, 990.0], [-1000.0, -1001.0, -1002.0]], np.float32)
    (got,) = run_op("reduce_log_sum_exp", {"x": x}, axes=[-1])
    assert_close(got, _lse(x.astype(np.float64), (1,), False).astype(np.float32), rtol=1e-6)
    # wide ranges (differences down to the exp underflow) and -inf elements, in rows and columns
    x = (np.random.default_rng(0).normal(0, 30, (64, 257))).astype(np.float32)
    x[::5, 3::7] = -np.inf
    for axis in (1, 0):
        xs = x if axis == 1 else x.T.copy()
        (got,) = run_op("reduce_log_sum_exp", {"x": xs}, axes=[axis])
        assert_close(got, _lse(xs.astype(np.float64), (axis,), False).astype(np.float32), rtol=1e-6, atol=1e-6)


def test_reduce_fp16_extremes() -> None:
    """fp16 sums beyond 65504 overflow to inf only when the result is rounded to fp16."""
    x = np.full((2, 4), 60000, np.float16)
    (got,) = run_op("reduce_mean", {"x": x}, axes=[1])
    assert_close(got, np.full((2,), 60000, np.float16))
    (got,) = run_op("reduce_sum", {"x": x}, axes=[1])
    assert np.isinf(got).all() and got.dtype == np.float16
    (got,) = run_op("reduce_l2_norm", {"x": x}, axes=[1])
    assert np.isinf(got).all()  # 120000 > fp16 max
    tiny = np.full((1, 8), 6e-8, np.float16)  # subnormal
    (got,) = run_op("reduce_sum", {"x": tiny}, axes=[1])
    assert_close(got, np.array([np.float32(tiny[0, 0]) * 8], np.float16))


@pytest.mark.parametrize("op,want", [("reduce_sum", 0.0), ("reduce_prod", 1.0), ("reduce_l2_norm", 0.0),
                                     ("reduce_sum_square", 0.0), ("reduce_l1_norm", 0.0),
                                     ("reduce_log_sum", -np.inf), ("reduce_log_sum_exp", -np.inf),
                                     ("reduce_mean", np.nan)])
def test_reduce_empty(op: str, want: float) -> None:
    x = np.zeros((3, 0), np.float32)
    (got,) = run_op(op, {"x": x}, axes=[1])
    assert_close(got, np.full((3,), want, np.float32))
    (got,) = run_op(op, {"x": x}, axes=[0], keep_dims=True)
    assert got.shape == (1, 0)


@pytest.mark.parametrize("op", ["reduce_max", "reduce_min"])
def test_reduce_empty_max_fails(op: str) -> None:
    with pytest.raises(ValueError, match=op + ".*zero-size"):
        run_op(op, {"x": np.zeros((3, 0), np.float32)}, axes=[1])


def test_reduce_to_scalar() -> None:
    (got,) = run_op("reduce_sum", {"x": np.full((1, 1), 2.5, np.float32)})
    assert got.shape == () and got == np.float32(2.5)
    (got,) = run_op("reduce_l2_norm", {"x": np.full((1, 1), -2.5, np.float32)}, axes=np.array([1, 0], np.int32),
                    keep_dims=True)
    assert got.shape == (1, 1) and got[0, 0] == np.float32(2.5)


# ------------------------------------------------------------------------------------ argmax / argmin

ARG_REF = {"reduce_argmax": np.argmax, "reduce_argmin": np.argmin}


@pytest.mark.parametrize("op", sorted(ARG_REF))
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
@pytest.mark.parametrize("shape,axis", [((7,), 0), ((3, 4, 5), 1), ((3, 4, 5), -1), ((3, 4, 5), 0),
                                        ((4, 300), 0), ((300, 9), -1)])
@pytest.mark.parametrize("keep_dims", [False, True])
def test_arg(op: str, dtype: Any, shape: tuple[int, ...], axis: int, keep_dims: bool) -> None:
    # few distinct values: many ties, numpy returns the first
    x = rand(*shape, dtype=np.int32, lo=-3, hi=3, seed=2).astype(dtype)
    (got,) = run_op(op, {"x": x}, axis=axis, keep_dims=keep_dims)
    want = ARG_REF[op](x, axis=axis)
    if keep_dims:
        want = np.expand_dims(want, axis)
    assert got.dtype == np.int32
    assert_close(got, want.astype(np.int32))


@pytest.mark.parametrize("op", sorted(ARG_REF))
def test_arg_nan_inf(op: str) -> None:
    nan, inf = np.nan, np.inf
    x = np.array([[1, nan, 3, nan], [-inf, 2, inf, inf], [2, 2, -inf, -inf], [nan, 1, 2, 3]], np.float32)
    for axis in (0, 1):
        xs = x if axis == 1 else x.T.copy()
        (got,) = run_op(op, {"x": xs}, axis=axis)
        assert_close(got, ARG_REF[op](xs, axis=axis).astype(np.int32))


@pytest.mark.parametrize("op", sorted(ARG_REF))
def test_arg_uint16_output_and_default_axis(op: str) -> None:
    x = rand(2, 3, 70, seed=4)
    (got,) = run_op(op, {"x": x}, opset=ct.target.iOS17, output_dtype="uint16")
    assert got.dtype == np.uint16
    assert_close(got, ARG_REF[op](x, axis=-1).astype(np.uint16))
    (got,) = run_op(op, {"x": x}, opset=ct.target.iOS15, symbolic=True)
    assert_close(got, ARG_REF[op](x, axis=-1).astype(np.int32))


@pytest.mark.parametrize("op", sorted(ARG_REF))
def test_arg_empty(op: str) -> None:
    (got,) = run_op(op, {"x": np.zeros((0, 4), np.float32)}, axis=1)
    assert got.shape == (0,)
    with pytest.raises(ValueError, match="empty axis"):
        run_op(op, {"x": np.zeros((3, 0), np.float32)}, axis=1)
