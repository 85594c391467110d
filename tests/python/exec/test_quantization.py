"""Numeric tests of the quantize / dequantize kernels against numpy (coremltools' reference:
clip(round_half_even(x / scale) + zero_point) and scale * (q - zero_point)), per tensor and per axis,
int8 / uint8, fp16 / fp32."""

from __future__ import annotations

from typing import Any

import milkit as ct
import numpy as np
import pytest
from milkit import Builder as mb
from support.exec_util import assert_close, rand, run_op, run_prog

IOS17 = ct.target.iOS17


def _bshape(p: np.ndarray, rank: int, axis: int | None) -> np.ndarray:
    if p.ndim == 0:
        return p
    shape = [1] * rank
    shape[axis % rank] = p.size
    return p.reshape(shape)


def _quantize_ref(x: np.ndarray, scale: np.ndarray, zp: np.ndarray | None, axis: int | None, od: Any) -> np.ndarray:
    info = np.iinfo(od)
    q = np.around(x / _bshape(scale, x.ndim, axis))  # in x's dtype, half to even
    if zp is not None:
        q = q + _bshape(zp, x.ndim, axis).astype(q.dtype)
    return np.clip(q, info.min, info.max).astype(od)


def _dequantize_ref(q: np.ndarray, scale: np.ndarray, zp: np.ndarray | None, axis: int | None) -> np.ndarray:
    d = q.astype(np.float32)
    if zp is not None:
        d = d - _bshape(zp, q.ndim, axis).astype(np.float32)
    return (d * _bshape(scale, q.ndim, axis)).astype(scale.dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("od", [np.int8, np.uint8])
@pytest.mark.parametrize("with_zp", [False, True])
@pytest.mark.parametrize("symbolic", [False, True])
def test_quantize_per_tensor(dtype: Any, od: Any, with_zp: bool, symbolic: bool) -> None:
    x = rand(3, 4, 5, dtype=dtype, lo=-8, hi=8)
    scale = dtype(0.03)
    params: dict[str, Any] = {"scale": scale, "output_dtype": np.dtype(od).name}
    zp = None
    if with_zp:
        zp = np.array(7 if od == np.int8 else 128, od)
        params["zero_point"] = zp
    (got,) = run_op("quantize", {"input": x}, opset=IOS17, symbolic=symbolic, **params)
    want = _quantize_ref(x, np.asarray(scale), zp, None, od)
    assert got.dtype == od
    np.testing.assert_array_equal(got, want)
    assert got.min() == np.iinfo(od).min and got.max() == np.iinfo(od).max  # the clip is exercised


@pytest.mark.parametrize("axis", [0, 1, -1, -3])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("od", [np.int8, np.uint8])
def test_quantize_per_axis(axis: int, dtype: Any, od: Any) -> None:
    x = rand(3, 4, 5, dtype=dtype, lo=-2, hi=2)
    n = x.shape[axis]
    scale = np.linspace(0.01, 0.05, n).astype(dtype)
    zp = np.arange(n).astype(od) * 3
    (got,) = run_op("quantize", {"input": x}, opset=IOS17, scale=scale, zero_point=zp, axis=axis,
                    output_dtype=np.dtype(od).name)
    np.testing.assert_array_equal(got, _quantize_ref(x, scale, zp, axis, od))


def test_quantize_round_half_to_even_and_nan() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49, np.nan, np.inf, -np.inf], np.float32)
    (got,) = run_op("quantize", {"input": x}, opset=IOS17, scale=np.float32(1), output_dtype="int8")
    np.testing.assert_array_equal(got, np.array([0, 2, 2, 0, -2, -2, 3, 0, 127, -128], np.int8))
    # fp16: the division is rounded to fp16 first (2.5 / 1 exact; 0.0105 / 0.003 -> 3.5 in fp16 -> 4)
    x16 = np.array([2.5, 0.0105, 0.0075], np.float16)
    (got,) = run_op("quantize", {"input": x16}, opset=IOS17, scale=np.float16(0.003), output_dtype="int8")
    np.testing.assert_array_equal(got, _quantize_ref(x16, np.asarray(np.float16(0.003)), None, None, np.int8))
    np.testing.assert_array_equal(got, np.array([127, 4, 2], np.int8))  # fp32 division would give 3 for 0.0105


@pytest.mark.parametrize("sdt", [np.float32, np.float16])
@pytest.mark.parametrize("qdt", [np.int8, np.uint8])
@pytest.mark.parametrize("axis", [None, 0, 2, -2])
def test_dequantize(sdt: Any, qdt: Any, axis: int | None) -> None:
    q = rand(3, 4, 5, dtype=qdt, lo=np.iinfo(qdt).min, hi=np.iinfo(qdt).max + 1)
    if axis is None:
        scale, zp = np.asarray(sdt(0.07)), np.asarray(qdt(5))
        params: dict[str, Any] = {"scale": sdt(0.07), "zero_point": qdt(5)}
    else:
        n = q.shape[axis]
        scale, zp = np.linspace(0.01, 0.2, n).astype(sdt), (np.arange(n) * 7).astype(qdt)
        params = {"scale": scale, "zero_point": zp, "axis": axis}
    # symbolic dims only per tensor: per axis, coremltools' type check wants a known axis dim
    (got,) = run_op("dequantize", {"input": q}, opset=IOS17, symbolic=axis is None, **params)
    assert got.dtype == sdt
    assert_close(got, _dequantize_ref(q, scale, zp, axis), rtol=1e-6, atol=0)
    params.pop("zero_point")
    (got,) = run_op("dequantize", {"input": q}, opset=IOS17, **params)
    assert_close(got, _dequantize_ref(q, scale, None, axis), rtol=1e-6, atol=0)


def test_kernel_matches_value_inference() -> None:
    """quantize of a known input folds (coremltools' value inference); the kernel gives the same."""
    x = rand(4, 6, lo=-3, hi=3)
    scale = np.linspace(0.01, 0.04, 6).astype(np.float32)
    zp = np.arange(6).astype(np.int8)
    prog = mb.program(input_specs=[mb.TensorSpec(shape=(1,))], opset_version=IOS17)(
        lambda _: mb.quantize(input=x, scale=scale, zero_point=zp, axis=1, output_dtype="int8"))
    folded = prog.functions["main"].outputs[0].val
    (got,) = run_op("quantize", {"input": x}, opset=IOS17, scale=scale, zero_point=zp, axis=1, output_dtype="int8")
    np.testing.assert_array_equal(folded, got)


def test_quantize_dequantize_round_trip_and_quantized_weight() -> None:
    x = rand(2, 8, lo=-1, hi=1)
    wq = rand(3, 8, dtype=np.int8, lo=-128, hi=128, seed=1)
    ws = np.linspace(0.001, 0.01, 3).astype(np.float32)

    def build(xv: Any) -> Any:
        q = mb.quantize(input=xv, scale=np.float32(1 / 127), output_dtype="int8")
        xd = mb.dequantize(input=q, scale=np.float32(1 / 127))
        # a dequantized constant is a compile-time constant (a quantized linear weight)
        w = mb.dequantize(input=wq, scale=ws, axis=0)
        return xd, mb.linear(x=xd, weight=w)

    xd, y = run_prog(build, {"x": x}, opset=IOS17)
    want_xd = _dequantize_ref(_quantize_ref(x, np.asarray(np.float32(1 / 127)), None, None, np.int8),
                              np.asarray(np.float32(1 / 127)), None, None)
    assert_close(xd, want_xd, rtol=1e-6, atol=0)
    assert np.abs(xd - x).max() <= 0.5 / 127 + 1e-6
    assert_close(y, want_xd @ (wq.astype(np.float32) * ws[:, None]).T, rtol=1e-5, atol=1e-6)
