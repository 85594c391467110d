"""Numeric tests of the scaled_dot_product_attention kernel against
torch.nn.functional.scaled_dot_product_attention (bool masks: True takes part; float masks are added)."""

from __future__ import annotations

from typing import Any

import milkit as ct
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from milkit import Builder as mb
from support.exec_util import assert_close, rand, run_op, run_prog

FP32_TOL = {"rtol": 1e-5, "atol": 1e-5}
FP16_TOL = {"rtol": 2e-3, "atol": 2e-3}


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a)).float() if a.dtype != np.bool_ else torch.from_numpy(a)


def _tol(dtype: Any) -> dict[str, float]:
    return FP16_TOL if np.dtype(dtype) == np.float16 else FP32_TOL


def _ref(q: np.ndarray, k: np.ndarray, v: np.ndarray, m: np.ndarray | None = None) -> np.ndarray:
    if m is not None:  # torch wants a mask of rank >= 2: broadcast it to the scores' shape
        m = np.broadcast_to(m, q.shape[:-1] + k.shape[-2:-1]).copy()
    with torch.no_grad():
        out = F.scaled_dot_product_attention(_t(q), _t(k), _t(v), attn_mask=None if m is None else _t(m))
    return out.numpy().astype(q.dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shapes", [((2, 5, 8), (2, 7, 8), (2, 7, 6)), ((1, 3, 4, 16), (1, 3, 9, 16), (1, 3, 9, 16)),
                                    ((2, 2, 2, 1, 3), (2, 2, 2, 4, 3), (2, 2, 2, 4, 2))])
@pytest.mark.parametrize("symbolic", [False, True])
def test_sdpa_no_mask(dtype: Any, shapes: tuple, symbolic: bool) -> None:
    q, k, v = (rand(*s, dtype=dtype, lo=-2, hi=2, seed=i) for i, s in enumerate(shapes))
    (got,) = run_op("scaled_dot_product_attention", {"query": q, "key": k, "value": v}, symbolic=symbolic)
    assert got.dtype == dtype
    assert_close(got, _ref(q, k, v), **_tol(dtype))


@pytest.mark.parametrize("mask_dtype", [np.bool_, np.float32, np.float16])
@pytest.mark.parametrize("mask_shape", [(7,), (5, 7), (2, 1, 5, 7), (1, 3, 1, 7), (2, 3, 5, 7)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_sdpa_masks(mask_dtype: Any, mask_shape: tuple, dtype: Any) -> None:
    q, k, v = rand(2, 3, 5, 4, dtype=dtype), rand(2, 3, 7, 4, dtype=dtype, seed=1), rand(2, 3, 7, 6, dtype=dtype, seed=2)
    if mask_dtype == np.bool_:
        m = rand(*mask_shape, dtype=np.bool_, seed=3)
        m[..., 0] = True  # every row keeps a score (a fully masked row is NaN; see below)
    else:
        m = rand(*mask_shape, dtype=mask_dtype, lo=-3, hi=1, seed=3)
    (got,) = run_op("scaled_dot_product_attention", {"query": q, "key": k, "value": v, "attn_mask": m})
    assert_close(got, _ref(q, k, v, m.astype(np.float32) if m.dtype == np.float16 else m), **_tol(dtype))


def test_sdpa_mask_minus_inf_and_symbolic() -> None:
    q, k, v = rand(1, 4, 3), rand(1, 6, 3, seed=1), rand(1, 6, 2, seed=2)
    m = np.zeros((4, 6), np.float32)
    m[:, 3:] = -np.inf
    (got,) = run_op("scaled_dot_product_attention", {"query": q, "key": k, "value": v, "attn_mask": m}, symbolic=True)
    assert_close(got, _ref(q, k, v, m))
    (same,) = run_op("scaled_dot_product_attention", {"query": q, "key": k[:, :3], "value": v[:, :3]})
    assert_close(got, same)


def test_sdpa_fully_masked_row_is_nan() -> None:
    """Difference from torch, pinned: a row whose bool mask is all False gives NaN, as coremltools'
    documented formula (masked_fill(-inf), softmax) and its value inference compute; torch's math
    kernel (torch >= 2.5, _safe_softmax) gives 0 for such rows."""
    q, k, v = rand(1, 2, 3), rand(1, 4, 3, seed=1), rand(1, 4, 2, seed=2)
    m = np.array([[True, False, True, False], [False] * 4])
    (got,) = run_op("scaled_dot_product_attention", {"query": q, "key": k, "value": v, "attn_mask": m})
    assert_close(got[:, 0], _ref(q, k, v, m)[:, 0])
    assert np.isnan(got[:, 1]).all()
    assert not np.isnan(_ref(q, k, v, m)[:, 1]).any()
    # the folded value (coremltools' value inference) agrees with the kernel
    prog = mb.program(input_specs=[mb.TensorSpec(shape=(1,))], opset_version=ct.target.iOS18)(
        lambda x: mb.scaled_dot_product_attention(query=q, key=k, value=v, attn_mask=m))
    folded = prog.functions["main"].outputs[0].val
    assert_close(folded, got, rtol=1e-5, atol=1e-6)


def test_sdpa_kernel_matches_value_inference() -> None:
    q, k, v = rand(2, 3, 4), rand(2, 5, 4, seed=1), rand(2, 5, 3, seed=2)
    m = rand(3, 5, dtype=np.bool_, seed=3)
    m[:, 0] = True
    (got,) = run_op("scaled_dot_product_attention", {"query": q, "key": k, "value": v, "attn_mask": m})
    prog = mb.program(input_specs=[mb.TensorSpec(shape=(1,))], opset_version=ct.target.iOS18)(
        lambda x: mb.scaled_dot_product_attention(query=q, key=k, value=v, attn_mask=m))
    assert_close(prog.functions["main"].outputs[0].val, got, rtol=1e-5, atol=1e-6)


def test_sdpa_mismatched_symbolic_dims_at_run_time() -> None:
    """Dims the type inference could not compare (symbols) are checked by the kernel."""
    with pytest.raises(ValueError, match=r"scaled_dot_product_attention.*same batch dims"):
        run_op("scaled_dot_product_attention", {"query": rand(2, 3, 4), "key": rand(3, 5, 4), "value": rand(3, 5, 4)},
               symbolic=True)
    with pytest.raises(ValueError, match=r"scaled_dot_product_attention.*embedding dim"):
        run_op("scaled_dot_product_attention", {"query": rand(2, 3, 4), "key": rand(2, 5, 3), "value": rand(2, 5, 4)},
               symbolic=True)
    with pytest.raises(ValueError, match=r"scaled_dot_product_attention.*attn_mask.*does not broadcast"):
        run_op("scaled_dot_product_attention", {"query": rand(2, 3, 4), "key": rand(2, 5, 4), "value": rand(2, 5, 4),
                                                "attn_mask": rand(4, 5, dtype=np.bool_)}, symbolic=True)


def test_sdpa_in_program_with_projections() -> None:
    """Attention of a small self-attention block (projections, heads via reshape / transpose)."""
    B, L, E, nh = 2, 6, 8, 2
    wq, wk, wv = rand(E, E, seed=1), rand(E, E, seed=2), rand(E, E, seed=3)
    causal = np.tril(np.ones((L, L), np.bool_))

    def heads(mb_: Any, t: Any) -> Any:
        return mb_.transpose(x=mb_.reshape(x=t, shape=[B, L, nh, E // nh]), perm=[0, 2, 1, 3])

    def build(x: Any) -> Any:
        q, k, v = (heads(mb, mb.linear(x=x, weight=w)) for w in (wq, wk, wv))
        return mb.scaled_dot_product_attention(query=q, key=k, value=v, attn_mask=causal)

    x = rand(B, L, E)
    (got,) = run_prog(build, {"x": x})
    tx = _t(x)

    def th(w: np.ndarray) -> torch.Tensor:
        return (tx @ _t(w).T).reshape(B, L, nh, E // nh).transpose(1, 2)

    want = F.scaled_dot_product_attention(th(wq), th(wk), th(wv), is_causal=True).numpy()
    assert_close(got, want, **FP32_TOL)
