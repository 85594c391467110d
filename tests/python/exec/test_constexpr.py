"""constexpr decompression in the interpreter (done once when a plan is made), checked against
coremltools' own decompress functions, iOS16 and iOS18 forms."""

from __future__ import annotations

from typing import Any, Callable

import milkit as ct
import numpy as np
import pytest
from coremltools.converters.mil.mil import types as ctypes
from coremltools.converters.mil.mil.ops.defs.iOS16 import constexpr_ops as c16
from coremltools.converters.mil.mil.ops.defs.iOS18 import compression as c18
from milkit import Builder as mb
from milkit import types


def _u(dtype_name: str, values: Any, shape: tuple | None = None) -> np.ndarray:
    a = np.array(values, dtype=getattr(ctypes, f"np_{dtype_name}_dtype"))
    return a if shape is None else a.reshape(shape)


def _run_const(make: Callable[[], Any], shape: tuple, dtype: Any, opset: Any) -> np.ndarray:
    """Runs a program returning constexpr output + zeros (an input, so the op is not dead)."""
    mil_dt = types.fp16 if dtype == np.float16 else types.fp32

    @mb.program(input_specs=[mb.TensorSpec(shape=shape, dtype=mil_dt)], opset_version=opset)
    def prog(x: Any) -> Any:
        return mb.add(x=x, y=make())

    (out,) = ct.run(prog, {"x": np.zeros(shape, dtype)}).values()
    return out


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("scale_dtype", [np.float32, np.float16])
@pytest.mark.parametrize("qdtype", [np.uint8, np.int8])
def test_affine_dequantize(axis: int, scale_dtype: Any, qdtype: Any) -> None:
    rng = np.random.default_rng(1)
    q = rng.integers(-100 if qdtype == np.int8 else 0, 100, size=(4, 6)).astype(qdtype)
    n = q.shape[axis]
    scale = rng.uniform(0.01, 2, size=n).astype(scale_dtype)
    zp = rng.integers(0, 10, size=n).astype(qdtype)
    want = c16.constexpr_affine_dequantize.decompress(q, zp, scale, axis)
    got = _run_const(lambda: mb.constexpr_affine_dequantize(quantized_data=q, zero_point=zp, scale=scale, axis=axis),
                     (4, 6), scale_dtype, ct.target.iOS16)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    # scalar zero point and scale
    want = c16.constexpr_affine_dequantize.decompress(q, qdtype(3), scale_dtype(0.5), axis)
    got = _run_const(lambda: mb.constexpr_affine_dequantize(quantized_data=q, zero_point=qdtype(3),
                                                            scale=scale_dtype(0.5), axis=axis),
                     (4, 6), scale_dtype, ct.target.iOS16)
    np.testing.assert_array_equal(got, want)


def test_cast_ios16() -> None:
    src = np.array([[1.5, -2.25, 65504.0], [np.inf, -0.0, 1e-7]], dtype=np.float16)
    got = _run_const(lambda: mb.constexpr_cast(source_val=src, output_dtype="fp32"), (2, 3), np.float32,
                     ct.target.iOS16)
    np.testing.assert_array_equal(got, src.astype(np.float32))


@pytest.mark.parametrize("nbits", [1, 2, 4, 8])
def test_lut_to_dense_ios16(nbits: int) -> None:
    rng = np.random.default_rng(nbits)
    shape = (3, 5)
    lut = rng.uniform(-1, 1, size=2**nbits).astype(np.float32)
    n_bytes = int(np.ceil(nbits * 15 / 8))
    idx = rng.integers(0, 256, size=n_bytes).astype(np.uint8)
    want = c16.constexpr_lut_to_dense.decompress(lut, idx, np.array(shape))
    got = _run_const(lambda: mb.constexpr_lut_to_dense(indices=idx, lut=lut, shape=np.array(shape, np.uint32)),
                     shape, np.float32, ct.target.iOS16)
    np.testing.assert_array_equal(got, want)


def test_sparse_to_dense_ios16() -> None:
    mask = np.array([0b10100101, 0b00000001], dtype=np.uint8)  # 5 set bits of 10
    nz = np.arange(1, 6, dtype=np.float32)
    want = c16.constexpr_sparse_to_dense.decompress(nz, mask, np.array((2, 5)))
    got = _run_const(lambda: mb.constexpr_sparse_to_dense(nonzero_data=nz, mask=mask,
                                                          shape=np.array((2, 5), np.uint32)),
                     (2, 5), np.float32, ct.target.iOS16)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("with_offset", [False, True])
@pytest.mark.parametrize("data_kind", ["int4", "uint8", "int8", "fp16"])
@pytest.mark.parametrize("scale_dtype", [np.float16, np.float32])
def test_blockwise_shift_scale(with_offset: bool, data_kind: str, scale_dtype: Any) -> None:
    rng = np.random.default_rng(7)
    if data_kind == "int4":
        data = _u("int4", rng.integers(-8, 8, size=24), (4, 6))
        off = _u("int4", rng.integers(-8, 8, size=6), (2, 3))
    elif data_kind == "fp16":
        data = rng.uniform(-4, 4, size=(4, 6)).astype(np.float16)
        off = rng.uniform(-1, 1, size=(2, 3)).astype(np.float16)
    else:
        dt = np.uint8 if data_kind == "uint8" else np.int8
        data = rng.integers(0, 100, size=(4, 6)).astype(dt)
        off = rng.integers(0, 10, size=(2, 3)).astype(dt)
    scale = rng.uniform(0.01, 3, size=(2, 3)).astype(scale_dtype)
    offset = off if with_offset else None
    want = c18.constexpr_blockwise_shift_scale.decompress(data, scale, offset)
    kw: dict[str, Any] = {"data": data, "scale": scale}
    if with_offset:
        kw["offset"] = off
    got = _run_const(lambda: mb.constexpr_blockwise_shift_scale(**kw), (4, 6), scale_dtype, ct.target.iOS18)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("vector", [1, 2])
@pytest.mark.parametrize("vector_axis", [0, 1])
def test_lut_to_dense_ios18(vector: int, vector_axis: int) -> None:
    rng = np.random.default_rng(3)
    idx = _u("uint2", rng.integers(0, 4, size=24), (4, 6))
    lut = rng.uniform(-1, 1, size=(2, 3, 4, vector)).astype(np.float16)  # blocks of 2 x 2
    va = vector_axis if vector > 1 else None
    want = c18.constexpr_lut_to_dense.decompress(idx, lut, va)
    kw: dict[str, Any] = {"indices": idx, "lut": lut}
    if va is not None:
        kw["vector_axis"] = np.int32(va)
    got = _run_const(lambda: mb.constexpr_lut_to_dense(**kw), want.shape, np.float16, ct.target.iOS18)
    np.testing.assert_array_equal(got, want)


def test_sparse_ops_ios18() -> None:
    rng = np.random.default_rng(5)
    mask = _u("uint1", [1 if i % 3 == 0 else 0 for i in range(24)], (4, 6))
    nz = rng.uniform(-2, 2, size=8).astype(np.float32)
    want = c18.constexpr_sparse_to_dense.decompress(nz, mask)
    got = _run_const(lambda: mb.constexpr_sparse_to_dense(nonzero_data=nz, mask=mask), (4, 6), np.float32,
                     ct.target.iOS18)
    np.testing.assert_array_equal(got, want)

    # sparse + blockwise shift-scale, densified afterwards
    q = _u("int4", rng.integers(-8, 8, size=8))
    scale = rng.uniform(0.1, 1, size=(2, 3)).astype(np.float16)
    m_want, nz_want = c18.constexpr_sparse_blockwise_shift_scale.decompress(mask, q, scale, None)
    want = c18.constexpr_sparse_to_dense.decompress(nz_want, m_want)

    def sparse_shift() -> Any:
        m, v = mb.constexpr_sparse_blockwise_shift_scale(data_mask=mask, nonzero_data=q, scale=scale)
        return mb.constexpr_sparse_to_dense(nonzero_data=v, mask=m)

    got = _run_const(sparse_shift, (4, 6), np.float16, ct.target.iOS18)
    np.testing.assert_array_equal(got, want)

    # sparse palettized (vector lut along axis 1)
    idx_nz = _u("uint2", rng.integers(0, 4, size=8))
    lut = rng.uniform(-1, 1, size=(1, 1, 4, 2)).astype(np.float32)
    m_want, nz_want = c18.constexpr_lut_to_sparse.decompress(mask, idx_nz, lut, 1)
    want = c18.constexpr_sparse_to_dense.decompress(nz_want, m_want)

    def lut_sparse() -> Any:
        m, v = mb.constexpr_lut_to_sparse(indices_mask=mask, indices_nonzero_data=idx_nz, lut=lut,
                                          vector_axis=np.int32(1))
        return mb.constexpr_sparse_to_dense(nonzero_data=v, mask=m)

    got = _run_const(lut_sparse, (4, 12), np.float32, ct.target.iOS18)
    np.testing.assert_array_equal(got, want)


def test_decompressed_once_per_plan() -> None:
    """The plan holds the decompressed weight (counted in const_bytes); runs reuse it."""
    q = np.arange(24, dtype=np.uint8).reshape(4, 6)

    @mb.program(input_specs=[mb.TensorSpec(shape=(4, 6), dtype=types.fp32)], opset_version=ct.target.iOS16)
    def prog(x: Any) -> Any:
        d = mb.constexpr_affine_dequantize(quantized_data=q, zero_point=np.uint8(1), scale=np.float32(2), axis=0)
        return mb.add(x=x, y=d)

    plan = ct.runtime.plan(prog)
    assert plan.const_bytes == 24 * 4
    x = np.ones((4, 6), np.float32)
    for _ in range(2):
        (out,) = dict(plan.run({"x": x})).values()
        np.testing.assert_array_equal(out, 1 + (q.astype(np.float32) - 1) * 2)
