"""Numeric tests of the interpreter's normalization kernels against torch.nn.functional / numpy:
batch_norm, instance_norm, l2_norm, layer_norm, local_response_norm.

fp16 programs: the reference is computed in fp32 from the same fp16 inputs, then rounded to fp16."""

from __future__ import annotations

from typing import Any

import milkit as ct
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from support.exec_util import assert_close, rand, run_op

FP16_TOL = {"rtol": 2e-3, "atol": 2e-3}
FP32_TOL = {"rtol": 1e-5, "atol": 2e-5}


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))


def _tol(dtype: Any) -> dict[str, float]:
    return FP16_TOL if np.dtype(dtype) == np.float16 else FP32_TOL


# ------------------------------------------------------------------------------------------ batch_norm


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5), (1, 4, 2, 3, 3), (2, 3), (0, 3, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("affine", [False, True])
def test_batch_norm(shape: tuple[int, ...], dtype: Any, affine: bool) -> None:
    c = shape[1]
    x = rand(*shape, dtype=dtype, lo=-3, hi=3)
    mean = rand(c, dtype=dtype, seed=1)
    var = rand(c, dtype=dtype, lo=0.1, hi=2.0, seed=2)
    gamma = rand(c, dtype=dtype, lo=0.5, hi=2.0, seed=3)
    beta = rand(c, dtype=dtype, seed=4)
    eps = dtype(1e-3)
    params: dict[str, Any] = {"mean": mean, "variance": var, "epsilon": eps}
    if affine:
        params.update(gamma=gamma, beta=beta)
    (got,) = run_op("batch_norm", {"x": x}, opset=ct.target.iOS15, **params)
    want = F.batch_norm(_t(x), _t(mean), _t(var), _t(gamma) if affine else None, _t(beta) if affine else None,
                        training=False, eps=float(eps)).numpy().astype(dtype)
    assert got.dtype == dtype
    assert_close(got, want, **_tol(dtype))


def test_batch_norm_mixed_precision_symbolic() -> None:
    """iOS17+: fp16 x with fp32 parameters; symbolic N and spatial dims."""
    x = rand(2, 3, 4, 5, dtype=np.float16, lo=-3, hi=3)
    mean, var = rand(3, seed=1), rand(3, lo=0.1, hi=2.0, seed=2)
    gamma, beta = rand(3, seed=3), rand(3, seed=4)
    (got,) = run_op("batch_norm", {"x": x}, symbolic=True, mean=mean, variance=var, gamma=gamma, beta=beta,
                    epsilon=np.float32(1e-5))
    want = F.batch_norm(_t(x), _t(mean), _t(var), _t(gamma), _t(beta), training=False, eps=1e-5)
    assert_close(got, want.numpy().astype(np.float16), **FP16_TOL)


def test_batch_norm_nan_inf() -> None:
    x = np.array([[[np.nan, np.inf, -np.inf, 1.0]]], np.float32)
    (got,) = run_op("batch_norm", {"x": x}, mean=np.zeros(1, np.float32), variance=np.ones(1, np.float32),
                    beta=np.ones(1, np.float32))
    assert_close(got, np.array([[[np.nan, np.inf, -np.inf, 1 / np.sqrt(1 + 1e-5) + 1]]], np.float32))


# ------------------------------------------------------------------------------------------ instance_norm


@pytest.mark.parametrize("shape", [(2, 3, 7), (2, 3, 4, 5), (1, 2, 64, 80), (0, 3, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("affine", [False, True])
def test_instance_norm(shape: tuple[int, ...], dtype: Any, affine: bool) -> None:
    c = shape[1]
    x = rand(*shape, dtype=dtype, lo=-3, hi=5)
    gamma, beta = rand(c, dtype=dtype, lo=0.5, hi=2, seed=3), rand(c, dtype=dtype, seed=4)
    params: dict[str, Any] = {"epsilon": dtype(1e-5)}
    if affine:
        params.update(gamma=gamma, beta=beta)
    (got,) = run_op("instance_norm", {"x": x}, opset=ct.target.iOS15, **params)
    if x.size == 0:  # torch rejects an empty batch
        assert got.shape == shape
        return
    want = F.instance_norm(_t(x), weight=_t(gamma) if affine else None, bias=_t(beta) if affine else None,
                           eps=1e-5).numpy().astype(dtype)
    assert_close(got, want, **_tol(dtype))


def test_instance_norm_symbolic_constant_plane() -> None:
    """A constant plane normalizes to 0 (variance 0, eps keeps it finite); symbolic dims."""
    x = rand(2, 3, 4, 5)
    x[1, 2] = 7.0
    gamma, beta = rand(3, seed=3), rand(3, seed=4)
    (got,) = run_op("instance_norm", {"x": x}, symbolic=True, gamma=gamma, beta=beta, epsilon=np.float32(1e-5))
    want = F.instance_norm(_t(x), weight=_t(gamma), bias=_t(beta), eps=1e-5).numpy()
    assert_close(got[0], want[0], **FP32_TOL)
    assert_close(got[1, :2], want[1, :2], **FP32_TOL)
    # exactly beta (torch's float mean of the plane is off by an ulp, amplified by 1/sqrt(eps))
    assert_close(got[1, 2], np.full((4, 5), beta[2], np.float32), rtol=0, atol=0)


# ------------------------------------------------------------------------------------------ l2_norm


def _l2_ref(x: np.ndarray, eps: float) -> np.ndarray:
    """coremltools' value inference: each batch (dims before the last 3) over its last 3 dims."""
    x64 = x.astype(np.float64)
    flat = x64.reshape(int(np.prod(x.shape[:-3], dtype=np.int64)), -1)
    out = flat / np.sqrt(np.sum(flat * flat, axis=1, keepdims=True) + eps)
    return out.reshape(x.shape)


@pytest.mark.parametrize("shape", [(3, 4, 5), (2, 3, 4, 5), (2, 2, 3, 4, 5), (2, 0, 4, 5), (1, 1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("opset", [ct.target.iOS15, ct.target.iOS17])
def test_l2_norm(shape: tuple[int, ...], dtype: Any, opset: Any) -> None:
    x = rand(*shape, dtype=dtype, lo=-2, hi=2)
    (got,) = run_op("l2_norm", {"x": x}, opset=opset, epsilon=dtype(1e-6))
    assert_close(got, _l2_ref(x.astype(np.float32), 1e-6).astype(dtype), **_tol(dtype))


def test_l2_norm_default_eps_zeros_symbolic() -> None:
    """An all-zero batch gives 0 (eps avoids 0/0); default epsilon 1e-6; symbolic dims."""
    x = rand(2, 3, 4, 5)
    x[0] = 0
    (got,) = run_op("l2_norm", {"x": x}, symbolic=True)
    assert_close(got, _l2_ref(x, 1e-6).astype(np.float32), **FP32_TOL)
    assert not got[0].any()
    # large eps is visible: the spec's sqrt(sum + eps)
    (got,) = run_op("l2_norm", {"x": x}, epsilon=np.float32(100.0))
    assert_close(got, _l2_ref(x, 100.0).astype(np.float32), **FP32_TOL)


def test_l2_norm_fp16_extremes() -> None:
    """fp16 values whose squares overflow fp16 are summed in fp32 (as the fp32 reference)."""
    x = np.full((1, 2, 2), 60000, np.float16)
    (got,) = run_op("l2_norm", {"x": x})
    assert_close(got, np.full((1, 2, 2), 0.5, np.float16), **FP16_TOL)


# ------------------------------------------------------------------------------------------ layer_norm


def _ln_ref(x: np.ndarray, axes: list[int] | None, gamma: np.ndarray | None, beta: np.ndarray | None,
            eps: float) -> np.ndarray:
    """coremltools' np_layer_norm."""
    rank = x.ndim
    axes = list(range(rank)) if axes is None else [a + rank if a < 0 else a for a in axes]
    nshape = [x.shape[i] if i in axes else 1 for i in range(rank)]
    g = np.ones(nshape) if gamma is None else np.reshape(gamma, nshape)
    b = np.zeros(nshape) if beta is None else np.reshape(beta, nshape)
    num = x - np.mean(x, axis=tuple(axes), keepdims=True)
    den = np.sqrt(np.sum(np.square(num), axis=tuple(axes), keepdims=True) / np.prod(nshape) + eps)
    return num / den * g + b


LN_CASES: list[tuple[tuple[int, ...], list[int] | None]] = [
    ((2, 5, 768), [-1]),
    ((4, 6), [1]),
    ((3, 4, 5), [1, 2]),
    ((3, 4, 5), None),
    ((3, 4, 5), [0]),
    ((3, 4, 5), [0, 2]),
    ((2, 3, 4, 5), [-3, -1]),
    ((2, 3, 4, 5), [1, 2]),
    ((3, 1, 5), [1]),
]


@pytest.mark.parametrize("shape,axes", LN_CASES)
@pytest.mark.parametrize("affine", ["none", "gamma", "beta", "both"])
def test_layer_norm_fp32(shape: tuple[int, ...], axes: list[int] | None, affine: str) -> None:
    x = rand(*shape, lo=-3, hi=4)
    rank = len(shape)
    pos = list(range(rank)) if axes is None else sorted(a % rank for a in axes)
    nshape = tuple(shape[a] for a in pos)
    gamma = rand(*nshape, lo=0.5, hi=2, seed=3) if affine in ("gamma", "both") else None
    beta = rand(*nshape, seed=4) if affine in ("beta", "both") else None
    params: dict[str, Any] = {"epsilon": np.float32(1e-5)}
    if axes is not None:
        params["axes"] = np.array(axes, np.int32)
    if gamma is not None:
        params["gamma"] = gamma
    if beta is not None:
        params["beta"] = beta
    (got,) = run_op("layer_norm", {"x": x}, **params)
    want = _ln_ref(x.astype(np.float64), axes, gamma, beta, 1e-5).astype(np.float32)
    assert_close(got, want, rtol=1e-5, atol=5e-5)


def test_layer_norm_torch_trailing_symbolic() -> None:
    x = rand(3, 7, 64, lo=-3, hi=3)
    gamma, beta = rand(7, 64, seed=3), rand(7, 64, seed=4)
    (got,) = run_op("layer_norm", {"x": x}, symbolic=True, axes=np.array([-2, -1], np.int32), gamma=gamma,
                    beta=beta, epsilon=np.float32(1e-5))
    want = F.layer_norm(_t(x), (7, 64), weight=_t(gamma), bias=_t(beta), eps=1e-5).numpy()
    assert_close(got, want, rtol=1e-5, atol=5e-5)


@pytest.mark.parametrize("opset,param_dtype", [(ct.target.iOS15, np.float16), (ct.target.iOS18, np.float32),
                                               (ct.target.iOS18, np.float16)])
@pytest.mark.parametrize("axes", [[-1], [0, 2]])
def test_layer_norm_fp16(opset: Any, param_dtype: Any, axes: list[int]) -> None:
    x = rand(4, 6, 96, dtype=np.float16, lo=-3, hi=5)
    nshape = tuple(x.shape[a] for a in sorted(a % 3 for a in axes))
    gamma = rand(*nshape, dtype=param_dtype, lo=0.5, hi=2, seed=3)
    beta = rand(*nshape, dtype=param_dtype, seed=4)
    (got,) = run_op("layer_norm", {"x": x}, opset=opset, axes=np.array(axes, np.int32), gamma=gamma, beta=beta,
                    epsilon=param_dtype(1e-5))
    assert got.dtype == np.float16
    want = _ln_ref(x.astype(np.float32), axes, gamma.astype(np.float32), beta.astype(np.float32), 1e-5)
    assert_close(got, want.astype(np.float32).astype(np.float16), **FP16_TOL)


def test_layer_norm_large_offset_and_constant_rows() -> None:
    """Two-pass variance: a large common offset does not cancel the variance away."""
    x = (rand(8, 256, lo=-1, hi=1) + 1e4).astype(np.float32)
    x[3] = 5.0
    (got,) = run_op("layer_norm", {"x": x}, axes=np.array([1], np.int32), epsilon=np.float32(1e-5))
    want = F.layer_norm(torch.from_numpy(x).double(), (256,), eps=1e-5).numpy()
    assert_close(got, want.astype(np.float32), rtol=1e-4, atol=2e-3)
    assert not got[3].any()


def test_layer_norm_nan_and_empty() -> None:
    x = rand(3, 4)
    x[1, 2] = np.nan
    (got,) = run_op("layer_norm", {"x": x}, axes=np.array([1], np.int32))
    assert np.isnan(got[1]).all() and np.isfinite(got[[0, 2]]).all()
    (got,) = run_op("layer_norm", {"x": np.zeros((0, 4), np.float32)}, axes=np.array([1], np.int32))
    assert got.shape == (0, 4)


# ------------------------------------------------------------------------------------------ local_response_norm


def _lrn_ref(x: np.ndarray, size: int, alpha: float, beta: float, k: float) -> np.ndarray:
    """Core ML's LRN: channel axis -3, window [c - (size-1)//2, c + size//2], alpha / size."""
    x64 = np.moveaxis(x.astype(np.float64), -3, 0)
    c = x64.shape[0]
    sq = x64 * x64
    out = np.empty_like(x64)
    for ch in range(c):
        lo, hi = max(0, ch - (size - 1) // 2), min(c - 1, ch + size // 2)
        out[ch] = x64[ch] / (k + alpha / size * sq[lo:hi + 1].sum(axis=0)) ** beta
    return np.moveaxis(out, 0, -3)


def test_lrn_coremltools_runtime_values() -> None:
    """coremltools' LRN smoke test expectations (produced by the Core ML runtime, both backends):
    a (1, 3, 2) input is [C=1, H=3, W=2], so every element is normalized by itself alone."""
    x = np.array([[[1.0, -7.0], [5.0, -6.0], [-3.0, -5.0]]], dtype=np.float32)
    (got,) = run_op("local_response_norm", {"x": x}, size=np.int32(2))
    assert_close(got, np.array([[[0.99996257, -6.98716545], [4.99531746, -5.99191284],
                                 [-2.99898791, -4.99531746]]], np.float32), rtol=1e-6)
    (got,) = run_op("local_response_norm", {"x": x}, size=np.int32(3), alpha=np.float32(1e-4),
                    beta=np.float32(0.75), k=np.float32(1.0))
    assert_close(got, np.array([[[0.99997497, -6.99143696], [4.99687672, -5.99460602],
                                 [-2.99932504, -4.99687672]]], np.float32), rtol=1e-6)


@pytest.mark.parametrize("size", [1, 3, 5, 7])
@pytest.mark.parametrize("alpha,beta,k", [(1e-4, 0.75, 1.0), (0.5, 0.5, 2.0), (1.0, 1.0, 1.0)])
def test_lrn_rank4_vs_torch(size: int, alpha: float, beta: float, k: float) -> None:
    """Rank 4 ([N, C, H, W]) with odd sizes: exactly torch's local_response_norm."""
    x = rand(2, 6, 5, 7, lo=-2, hi=2)
    (got,) = run_op("local_response_norm", {"x": x}, size=np.int32(size), alpha=np.float32(alpha),
                    beta=np.float32(beta), k=np.float32(k))
    want = F.local_response_norm(_t(x), size, alpha=alpha, beta=beta, k=k).numpy()
    assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert_close(got, _lrn_ref(x, size, alpha, beta, k).astype(np.float32), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("size", [2, 4])
def test_lrn_even_size_window(size: int) -> None:
    """Even sizes: the window reaches one channel further up than down (ONNX / Caffe); torch's
    window is shifted one channel down."""
    x = rand(1, 5, 3, 3, lo=-2, hi=2)
    (got,) = run_op("local_response_norm", {"x": x}, size=np.int32(size), alpha=np.float32(1.0),
                    beta=np.float32(1.0), k=np.float32(1.0))
    assert_close(got, _lrn_ref(x, size, 1.0, 1.0, 1.0).astype(np.float32), rtol=1e-5, atol=1e-6)
    torch_out = F.local_response_norm(_t(x), size, alpha=1.0, beta=1.0, k=1.0).numpy()
    assert not np.allclose(got, torch_out, rtol=1e-3)
    # torch's window for channel c is ours for channel c - 1: compare the denominators x / y
    den_ours, den_torch = x / got, x / torch_out
    assert_close(den_ours[:, :-1], den_torch[:, 1:], rtol=1e-4)


@pytest.mark.parametrize("shape", [(4, 3, 5), (2, 2, 5, 3, 4), (0, 3, 2, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_lrn_ranks_and_fp16(shape: tuple[int, ...], dtype: Any) -> None:
    """Channel axis is -3 for every rank: rank 3 is [C, H, W], rank 5 [B0, B1, C, H, W]."""
    x = rand(*shape, dtype=dtype, lo=-2, hi=2)
    (got,) = run_op("local_response_norm", {"x": x}, opset=ct.target.iOS15, size=np.int32(3),
                    alpha=dtype(0.3), beta=dtype(0.75), k=dtype(1.5))
    want = _lrn_ref(x.astype(np.float32), 3, float(dtype(0.3)), 0.75, 1.5)
    assert_close(got, want.astype(np.float32).astype(dtype), **_tol(dtype))


def test_lrn_symbolic_defaults() -> None:
    x = rand(2, 4, 3, 3, lo=-20, hi=20)
    (got,) = run_op("local_response_norm", {"x": x}, symbolic=True, size=np.int32(3))
    want = F.local_response_norm(_t(x), 3).numpy()  # defaults alpha 1e-4, beta 0.75, k 1 as torch
    assert_close(got, want, rtol=1e-5, atol=1e-6)
