"""Interpreter kernels of the tensor_transformation ops, checked against numpy / torch.

These ops only move elements, so every comparison is bit-exact: float inputs are random bit
patterns (NaNs with payloads, infinities, subnormals, -0.0 included) compared as raw integers."""

from __future__ import annotations

from typing import Any

import milkit as ct
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from milkit import Builder as mb
from support.exec_util import run_op, run_prog

ALL_DTYPES = [np.float32, np.float16, np.int32, np.bool_, np.int8, np.uint8, np.int16, np.uint16]
FLOATS = [np.float32, np.float16]


def data(shape: tuple[int, ...], dtype: Any = np.float32, seed: int = 0) -> np.ndarray:
    """Random values of `dtype`; floats are random bit patterns (NaN, inf, subnormals...)."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    bits = rng.integers(0, 256, size=(*shape, dt.itemsize), dtype=np.uint8)
    return bits.view(dt).reshape(shape)


def same(got: np.ndarray, want: np.ndarray) -> None:
    """Same shape, dtype and bytes."""
    want = np.array(want, order="C")
    got = np.array(got, order="C")
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    w = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[want.dtype.itemsize]
    np.testing.assert_array_equal(got.reshape(-1).view(w), want.reshape(-1).view(w))


def one(op: str, inputs: dict[str, Any], **kw: Any) -> np.ndarray:
    (out,) = run_op(op, inputs, **kw)
    return out


# ---------------------------------------------------------------------------------------------
# transpose


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("shape,perm", [
    ((3, 4), [1, 0]),
    ((2, 3, 4), [2, 0, 1]),
    ((2, 3, 4, 5), [0, 2, 1, 3]),
    ((2, 3, 4, 5), [0, 1, 3, 2]),
    ((2, 1, 4, 1), [3, 2, 1, 0]),
])
def test_transpose(dtype: Any, shape: tuple[int, ...], perm: list[int]) -> None:
    x = data(shape, dtype)
    same(one("transpose", {"x": x}, perm=perm), x.transpose(perm))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8])
@pytest.mark.parametrize("shape,perm", [
    ((67, 45), [1, 0]),                  # blocked 2-D transpose, ragged tiles
    ((3, 130, 70), [0, 2, 1]),           # batched
    ((2, 37, 5, 64), [0, 2, 1, 3]),      # attention heads split: contiguous rows
    ((2, 5, 37, 64), [0, 1, 3, 2]),      # k^T
    ((4, 33, 3, 9, 17), [4, 1, 3, 0, 2]),
    ((256, 300), [1, 0]),                # large enough to run in parallel
    ((5003, 9), [1, 0]),                 # one band of long rows: parallel over row tiles
    ((3, 4099, 5), [0, 2, 1]),           # short output rows (NCHW -> NHWC-like)
])
def test_transpose_large(dtype: Any, shape: tuple[int, ...], perm: list[int]) -> None:
    x = data(shape, dtype, seed=1)
    same(one("transpose", {"x": x}, perm=perm), x.transpose(perm))


def test_transpose_negative_perm_symbolic_empty() -> None:
    x = data((2, 3, 4))
    same(one("transpose", {"x": x}, perm=[-1, 0, -2]), x.transpose(2, 0, 1))
    same(one("transpose", {"x": x}, perm=[2, 0, 1], symbolic=True), x.transpose(2, 0, 1))
    e = data((0, 3, 2), np.int32)
    same(one("transpose", {"x": e}, perm=[1, 2, 0]), e.transpose(1, 2, 0))


@pytest.mark.parametrize("opset", [ct.target.iOS15, ct.target.iOS16])
def test_transpose_ios15(opset: Any) -> None:
    x = data((3, 5, 2), np.int32)
    same(one("transpose", {"x": x}, perm=[1, 2, 0], opset=opset), x.transpose(1, 2, 0))


def test_transpose_in_program_matches_torch() -> None:
    q = torch.randn(2, 7, 24)

    def build(x: Any) -> Any:
        h = mb.reshape(x=x, shape=[2, 7, 4, 6])
        h = mb.transpose(x=h, perm=[0, 2, 1, 3])
        return mb.transpose(x=h, perm=[0, 1, 3, 2])

    (got,) = run_prog(build, {"x": q.numpy()})
    want = q.view(2, 7, 4, 6).permute(0, 2, 1, 3).transpose(-1, -2).contiguous().numpy()
    same(got, want)


# ---------------------------------------------------------------------------------------------
# reshape, expand_dims, squeeze, reshape_like


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("xshape,shape,want", [
    ((2, 3, 4), [4, -1], (4, 6)),
    ((2, 3, 4), [-1], (24,)),
    ((2, 3, 4), [0, -1], (3, 8)),               # iOS17: zeros right-aligned
    ((2, 3, 4), [1, 0, -1, 0], (1, 2, 3, 4)),
    ((2, 50), [1, 0, -1, 0], (1, 1, 2, 50)),    # the spec's example
    ((1,), [], ()),
    ((0, 3), [3, -1, 2], (3, 0, 2)),
])
def test_reshape(dtype: Any, xshape: tuple[int, ...], shape: list[int], want: tuple[int, ...]) -> None:
    x = data(xshape, dtype)
    same(one("reshape", {"x": x}, shape=np.array(shape, np.int32)), x.reshape(want))


def test_reshape_zero_ios15_vs_ios17() -> None:
    x = data((2, 3, 4))
    for opset in (ct.target.iOS15, ct.target.iOS17):
        same(one("reshape", {"x": x}, shape=[0, -1, 2], opset=opset), x.reshape(2, 6, 2))
    # iOS17 aligns zeros to the right: shape[1] matches x.shape[0]
    same(one("reshape", {"x": x}, shape=[-1, 0, 1, 1], opset=ct.target.iOS17), x.reshape(12, 2, 1, 1))
    # iOS15 requires len(shape) == rank(x) when shape has a 0 (checked at run time too)
    s = np.array([-1, 0, 1, 1], np.int32)
    same(one("reshape", {"x": x, "shape": s}, opset=ct.target.iOS17), x.reshape(12, 2, 1, 1))
    with pytest.raises(ValueError, match="reshape.*has a 0"):
        run_op("reshape", {"x": x, "shape": s}, opset=ct.target.iOS15)


def test_reshape_symbolic() -> None:
    x = data((3, 4, 5))
    same(one("reshape", {"x": x}, shape=[-1, 5], symbolic=True), x.reshape(12, 5))
    same(one("reshape", {"x": x}, shape=[0, -1], symbolic=True), x.reshape(4, 15))
    same(one("reshape", {"x": x}, shape=[0, -1, 1], symbolic=True, opset=ct.target.iOS15),
         x.reshape(3, 20, 1))
    same(one("reshape", {"x": x}, shape=[5, 0, -1], symbolic=True), x.reshape(5, 4, 3))


@pytest.mark.parametrize("shape_dtype", [np.int32, np.int16, np.int8])
def test_reshape_run_time_shape(shape_dtype: Any) -> None:
    # the shape is a run-time tensor: the output shape comes from its values
    x = data((2, 3, 4), np.uint8)
    for shape, want in (([4, 6], (4, 6)), ([-1, 2], (12, 2)), ([-1, 0, 1], (8, 3, 1))):
        s = np.array(shape, shape_dtype)
        same(one("reshape", {"x": x, "shape": s}), x.reshape(want))
        same(one("reshape", {"x": x, "shape": s}, symbolic=True), x.reshape(want))


def test_reshape_run_time_errors() -> None:
    x = data((2, 3, 4))
    with pytest.raises(ValueError, match="reshape"):
        run_op("reshape", {"x": x, "shape": np.array([5, -1], np.int32)})
    with pytest.raises(ValueError, match="reshape"):
        run_op("reshape", {"x": x, "shape": np.array([-1, -1], np.int32)})
    with pytest.raises(ValueError, match="reshape"):
        run_op("reshape", {"x": x, "shape": np.array([4, 7], np.int32)})
    with pytest.raises(ValueError, match="reshape"):
        run_op("reshape", {"x": x, "shape": np.array([-2, 12], np.int32)})
    big = np.iinfo(np.int32).max
    with pytest.raises(ValueError, match="reshape"):
        run_op("reshape", {"x": x, "shape": np.array([big, big, big, -1], np.int32)})
    with pytest.raises(ValueError, match="reshape"):
        run_op("reshape", {"x": x, "shape": np.array([big, big, big, 0], np.int32)})


def test_reshape_shape_from_program() -> None:
    # the shape is computed by another op at run time
    a = data((6, 4), np.float16)

    def build(x: Any, s: Any) -> Any:
        return mb.reshape(x=x, shape=mb.reverse(x=s))

    (got,) = run_prog(build, {"x": a, "s": np.array([3, 8], np.int32)})
    same(got, a.reshape(8, 3))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("shape,axes", [
    ((2, 3), [0]),
    ((2, 3), [-1]),
    ((2, 3), [1, 3]),
    ((2, 3), [-1, -4]),
    ((0, 4), [1]),
])
def test_expand_dims(dtype: Any, shape: tuple[int, ...], axes: list[int]) -> None:
    x = data(shape, dtype)
    same(one("expand_dims", {"x": x}, axes=axes), np.expand_dims(x, tuple(axes)))


def test_expand_dims_of_scalar() -> None:
    x = data((2, 3), np.int16)

    def build(a: Any) -> Any:
        s = mb.slice_by_index(x=a, begin=[1, 2], end=[0, 0], squeeze_mask=[True, True])
        return mb.expand_dims(x=s, axes=[0, -1])

    (got,) = run_prog(build, {"x": x})
    same(got, x[1:2, 2:3])


def test_expand_dims_symbolic_ios15() -> None:
    x = data((2, 3), np.int32)
    same(one("expand_dims", {"x": x}, axes=[-1, 0], symbolic=True), x[None, :, :, None])
    same(one("expand_dims", {"x": x}, axes=[1], opset=ct.target.iOS15), x[:, None])


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("shape,axes,want", [
    ((1, 3, 1, 2), None, (3, 2)),
    ((1, 3, 1, 2), [0], (3, 1, 2)),
    ((1, 3, 1, 2), [-2, 0], (3, 2)),
    ((1, 3, 1, 2), [1], (1, 3, 1, 2)),        # a dim that is not 1 stays (PyTorch semantics)
    ((1, 1), None, ()),
    ((0, 1), [1], (0,)),
])
def test_squeeze(dtype: Any, shape: tuple[int, ...], axes: list[int] | None, want: tuple[int, ...]) -> None:
    x = data(shape, dtype)
    kw = {} if axes is None else {"axes": axes}
    same(one("squeeze", {"x": x}, **kw), x.reshape(want))


def test_squeeze_symbolic_keeps_symbolic_dims() -> None:
    # the type inference assumes a symbolic dim is not 1 (as coremltools): the kernel matches it
    x = data((1, 3, 1))
    assert one("squeeze", {"x": x}, symbolic=True).shape == (1, 3, 1)
    assert one("squeeze", {"x": x}, axes=[0], symbolic=True).shape == (1, 3, 1)

    def build(a: Any) -> Any:
        return mb.squeeze(x=mb.reshape(x=a, shape=[1, -1, 1]), axes=[0, 2])

    (got,) = run_prog(build, {"x": x})
    same(got, x.reshape(3))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.bool_, np.uint16])
@pytest.mark.parametrize("begins,ends,masks", [
    ((1, 1), (2, 0), (False, True)),      # r0.shape[1:2] + r1.shape[1:]
    ((-2, -2), (2, 3), (False, False)),   # r0.shape[-2:2] + r1.shape[-2:3]
])
def test_reshape_like(dtype: Any, begins: tuple[int, ...], ends: tuple[int, ...], masks: tuple[bool, ...]) -> None:
    x = data((2, 3, 4, 5), dtype)
    refs = [data((2, 6, 7), np.float32), data((9, 4, 5), np.int32)]
    for opset in (ct.target.iOS16, ct.target.iOS18):
        if opset == ct.target.iOS16 and dtype == np.uint16:
            continue
        (got,) = run_op("reshape_like", {"x": x, "ref_tensors": refs}, begins=begins, ends=ends, end_masks=masks,
                        opset=opset)
        same(got, x.reshape(6, 4, 5))


# ---------------------------------------------------------------------------------------------
# reverse, reverse_sequence


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("shape,axes", [
    ((5,), None),
    ((3, 4), [0]),
    ((3, 4), [-1]),
    ((2, 3, 4), None),
    ((2, 3, 4), [0, 2]),
    ((2, 3, 4), [1, 1]),      # flipped twice: unchanged (np.flip per listed axis)
    ((0, 3), [1]),
])
def test_reverse(dtype: Any, shape: tuple[int, ...], axes: list[int] | None) -> None:
    x = data(shape, dtype)
    want = x
    for a in axes if axes is not None else range(x.ndim):
        want = np.flip(want, a)
    kw = {} if axes is None else {"axes": axes}
    same(one("reverse", {"x": x}, **kw), want)
    if x.size:
        same(one("reverse", {"x": x}, symbolic=True, **kw), want)


def test_reverse_matches_torch_flip_large() -> None:
    x = torch.randn(9, 70, 130)
    same(one("reverse", {"x": x.numpy()}, axes=[2, 0]), torch.flip(x, [2, 0]).numpy())


def ref_reverse_sequence(x: np.ndarray, lengths: np.ndarray, seq_axis: int, batch_axis: int) -> np.ndarray:
    out = x.copy()
    for b, n in enumerate(lengths):
        src = np.take(x, b, axis=batch_axis)
        sa = seq_axis - (1 if seq_axis > batch_axis else 0)
        part = np.take(src, np.arange(n)[::-1], axis=sa)
        idx: list[Any] = [slice(None)] * x.ndim
        idx[batch_axis] = b
        idx[seq_axis] = slice(0, n)
        out[tuple(idx)] = part
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.bool_, np.int8, np.uint16])
@pytest.mark.parametrize("shape,seq_axis,batch_axis", [
    ((4, 6), 1, 0),
    ((6, 4), 0, 1),
    ((3, 5, 2, 4), 1, 3),
    ((3, 2, 5, 4), -2, 0),
    ((2, 4, 3, 5), 3, 1),
])
def test_reverse_sequence(dtype: Any, shape: tuple[int, ...], seq_axis: int, batch_axis: int) -> None:
    x = data(shape, dtype)
    ns = shape[seq_axis]
    rng = np.random.default_rng(3)
    lengths = rng.integers(0, ns + 1, size=shape[batch_axis]).astype(np.int32)
    lengths[0] = ns
    want = ref_reverse_sequence(x, lengths, seq_axis % x.ndim, batch_axis % x.ndim)
    got = one("reverse_sequence", {"x": x, "lengths": lengths}, seq_axis=seq_axis, batch_axis=batch_axis)
    same(got, want)
    got = one("reverse_sequence", {"x": x, "lengths": lengths.astype(np.int16)}, seq_axis=seq_axis,
              batch_axis=batch_axis, symbolic=True)
    same(got, want)


def test_reverse_sequence_bad_length() -> None:
    x = data((3, 4))
    with pytest.raises(IndexError, match=r"reverse_sequence.*lengths\[1\] = 5"):
        run_op("reverse_sequence", {"x": x, "lengths": np.array([1, 5, 0], np.int32)}, seq_axis=1,
               batch_axis=0)
    with pytest.raises(IndexError, match="reverse_sequence"):
        run_op("reverse_sequence", {"x": x, "lengths": np.array([1, -1, 0], np.int32)}, seq_axis=1,
               batch_axis=0)
    with pytest.raises(ValueError, match="reverse_sequence"):
        run_op("reverse_sequence", {"x": x, "lengths": np.array([1, 2], np.int32)}, seq_axis=1, batch_axis=0)


# ---------------------------------------------------------------------------------------------
# slice_by_index, slice_by_size, slice_update


SLICES = [
    # begin, end, stride, begin_mask, end_mask, squeeze_mask, numpy index
    ([1, 0, 0], [3, 4, 5], None, None, None, None, np.s_[1:3, 0:4, 0:5]),
    ([0, 1, 1], [4, 3, 5], [2, 1, 2], None, None, None, np.s_[0:4:2, 1:3, 1:5:2]),
    ([-1, -1, 4], [-5, 0, 0], [-1, -2, -3], None, None, None, np.s_[-1:-5:-1, -1:0:-2, 4:0:-3]),
    ([3, 2, 1], [0, 0, 0], [-1, -1, -1], [False, True, False], [True, False, True], None,
     np.s_[3::-1, :0:-1, 1::-1]),
    ([-10, 1, -2], [10, 100, 5], [1, 3, 1], None, None, None, np.s_[-10:10, 1:100:3, -2:5]),
    ([1, 2, 0], [0, 0, 5], None, None, None, [True, True, False], np.s_[1, 2, 0:5]),
    ([-1, 0, -1], [0, 4, 0], None, [False, True, False], None, [True, False, True], np.s_[-1, 0:4, -1]),
    ([0, 0, 0], [0, 0, 0], None, None, None, [True, True, True], np.s_[0, 0, 0]),
    ([2, 3, 1], [2, -4, 4], None, None, None, None, np.s_[2:2, 3:-4, 1:4]),   # empty
    ([0, 0, 0], [0, 0, 0], [1, -1, 2], [True] * 3, [True] * 3, None, np.s_[::1, ::-1, ::2]),
]


def slice_kw(case: tuple[Any, ...]) -> dict[str, Any]:
    b, e, s, bm, em, sm, _ = case
    kw: dict[str, Any] = {"begin": np.array(b, np.int32), "end": np.array(e, np.int32)}
    for name, v in (("stride", s), ("begin_mask", bm), ("end_mask", em), ("squeeze_mask", sm)):
        if v is not None:
            kw[name] = np.array(v, np.int32 if name == "stride" else np.bool_)
    return kw


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("case", SLICES)
def test_slice_by_index(dtype: Any, case: tuple[Any, ...]) -> None:
    x = data((4, 5, 6), dtype)
    want = x[case[-1]]
    same(one("slice_by_index", {"x": x}, **slice_kw(case)), want)


@pytest.mark.parametrize("case", SLICES)
def test_slice_by_index_run_time_bounds(case: tuple[Any, ...]) -> None:
    # begin / end as run-time tensors, x symbolic
    x = data((4, 5, 6), np.float16)
    kw = slice_kw(case)
    b, e = kw.pop("begin"), kw.pop("end")
    same(one("slice_by_index", {"x": x, "begin": b, "end": e}, **kw), x[case[-1]])
    same(one("slice_by_index", {"x": x}, symbolic=True, begin=b, end=e, **kw), x[case[-1]])
    if "stride" in kw:
        kw["stride"] = kw["stride"].astype(np.int8)
    same(one("slice_by_index", {"x": x, "begin": b.astype(np.int8), "end": e.astype(np.int8)}, **kw),
         x[case[-1]])


def test_slice_by_index_ios15_and_large() -> None:
    x = data((40, 300), np.int32)
    same(one("slice_by_index", {"x": x}, begin=[3, 290], end=[39, 5], stride=[2, -3],
             opset=ct.target.iOS15), x[3:39:2, 290:5:-3])
    t = torch.randn(8, 64, 96)
    same(one("slice_by_index", {"x": t.numpy()}, begin=[0, 1, 0], end=[8, 64, 96], stride=[1, 2, 1]),
         t[:, 1::2, :].contiguous().numpy())


def test_slice_by_index_bad_index() -> None:
    x = data((4, 5))
    with pytest.raises(IndexError, match="slice_by_index.*index 7"):
        run_op("slice_by_index", {"x": x, "begin": np.array([7, 0], np.int32), "end": np.array([0, 5], np.int32)},
               squeeze_mask=[True, False])
    with pytest.raises(IndexError, match="slice_by_index.*index -5"):
        run_op("slice_by_index", {"x": x, "begin": np.array([-5, 0], np.int32), "end": np.array([0, 5], np.int32)},
               squeeze_mask=[True, False])


SIZES = [
    ([0, 0, 0], [4, 5, 6]),
    ([1, 2, 3], [2, 3, 3]),
    ([1, 2, 3], [-1, -1, -1]),
    ([-3, -1, 0], [2, 1, -1]),
    ([4, 0, 6], [0, 5, 0]),
    ([2, 2, 2], [0, 3, 1]),
]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("begin,size", SIZES)
def test_slice_by_size(dtype: Any, begin: list[int], size: list[int]) -> None:
    x = data((4, 5, 6), dtype)
    idx = []
    for b, s, n in zip(begin, size, x.shape):
        b = b + n if b < 0 else b
        idx.append(slice(b, n if s == -1 else b + s))
    want = x[tuple(idx)]
    same(one("slice_by_size", {"x": x}, begin=begin, size=size), want)
    same(one("slice_by_size", {"x": x, "begin": np.array(begin, np.int32)}, size=size), want)
    if x.size:
        same(one("slice_by_size", {"x": x}, begin=begin, size=size, symbolic=True), want)
    same(one("slice_by_size", {"x": x, "begin": np.array(begin, np.int16), "size": np.array(size, np.int16)}),
         want)


def test_slice_by_size_out_of_range() -> None:
    x = data((4, 5))
    with pytest.raises(IndexError, match=r"slice_by_size.*begin\[0\] = 5"):
        run_op("slice_by_size", {"x": x, "begin": np.array([5, 0], np.int32)}, size=[-1, 2])
    with pytest.raises(IndexError, match="slice_by_size.*size 3"):
        run_op("slice_by_size", {"x": x, "begin": np.array([2, 0], np.int32)}, size=[3, 2])
    with pytest.raises(IndexError, match=r"slice_by_size.*begin\[1\] = -6"):
        run_op("slice_by_size", {"x": x, "begin": np.array([0, -6], np.int32)}, size=[1, 1])


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("case", SLICES[:8] + SLICES[9:])
def test_slice_update(dtype: Any, case: tuple[Any, ...]) -> None:
    x = data((4, 5, 6), dtype, seed=1)
    want = x.copy()
    target = want[case[-1]]
    upd = data(np.shape(target) if np.ndim(target) else (1,), dtype, seed=2)
    if np.ndim(target) == 0:
        return  # rank-0 updates are not supported by the op
    want[case[-1]] = upd
    same(one("slice_update", {"x": x, "update": upd}, **slice_kw(case)), want)
    kw = slice_kw(case)
    b, e = kw.pop("begin"), kw.pop("end")
    same(one("slice_update", {"x": x, "update": upd, "begin": b, "end": e}, **kw), want)


def test_slice_update_kv_cache() -> None:
    # the KV-cache write pattern: one position of a [B, H, S, D] cache
    cache = data((2, 4, 16, 8), np.float16)
    new = data((2, 4, 1, 8), np.float16, seed=5)
    pos = np.array([0, 0, 9, 0], np.int32)
    end = np.array([2, 4, 10, 8], np.int32)
    want = cache.copy()
    want[:, :, 9:10, :] = new
    same(one("slice_update", {"x": cache, "update": new, "begin": pos, "end": end}), want)
    same(one("slice_update", {"x": cache, "update": new, "begin": pos, "end": end}, symbolic=True), want)


def test_slice_update_run_time_mismatch() -> None:
    x = data((4, 5))
    with pytest.raises(IndexError, match="slice_update"):
        run_op("slice_update", {"x": x, "update": data((2, 5)), "begin": np.array([3, 0], np.int32),
                                "end": np.array([5, 5], np.int32)})


# ---------------------------------------------------------------------------------------------
# sliding_windows


def ref_sliding(x: np.ndarray, axis: int, size: int, stride: int) -> np.ndarray:
    v = np.lib.stride_tricks.sliding_window_view(x, size, axis=axis)
    v = np.take(v, np.arange(0, v.shape[axis], stride), axis=axis)
    return np.moveaxis(v, -1, axis % x.ndim + 1)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("shape,axis,size,stride", [
    ((10,), 0, 3, 1),
    ((10,), 0, 3, 4),
    ((3, 9, 2), 1, 4, 2),
    ((3, 9, 2), -1, 2, 1),
    ((7, 4), 0, 7, 3),
    ((0, 6), 1, 2, 2),
])
def test_sliding_windows(dtype: Any, shape: tuple[int, ...], axis: int, size: int, stride: int) -> None:
    x = data(shape, dtype)
    want = ref_sliding(x, axis, size, stride)
    same(one("sliding_windows", {"x": x}, axis=axis, size=size, stride=stride), want)
    if x.size:
        same(one("sliding_windows", {"x": x}, axis=axis, size=size, stride=stride, symbolic=True), want)


def test_sliding_windows_matches_torch_unfold() -> None:
    t = torch.randn(2, 50, 3)
    got = one("sliding_windows", {"x": t.numpy()}, axis=1, size=5, stride=3)
    same(got, t.unfold(1, 5, 3).permute(0, 1, 3, 2).contiguous().numpy())


# ---------------------------------------------------------------------------------------------
# depth_to_space, space_to_depth, pixel_shuffle, pixel_unshuffle


def ref_depth_to_space(x: np.ndarray, b: int) -> np.ndarray:
    n, c, h, w = x.shape
    return x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2).reshape(n, c // (b * b), h * b, w * b)


def ref_space_to_depth(x: np.ndarray, b: int) -> np.ndarray:
    n, c, h, w = x.shape
    return x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4).reshape(n, c * b * b, h // b, w // b)


def test_depth_to_space_coremltools_examples() -> None:
    x = np.array([[[[9.0]], [[5.0]], [[1.0]], [[3.0]]]], np.float32)
    same(one("depth_to_space", {"x": x}, block_size=2), np.array([[[[9.0, 5.0], [1.0, 3.0]]]], np.float32))
    y = np.array([[[[7.0, 9.0], [4.0, 6.0]]]], np.float32)
    same(one("space_to_depth", {"x": y}, block_size=2), np.array([[[[7.0]], [[9.0]], [[4.0]], [[6.0]]]], np.float32))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,b", [((2, 8, 3, 5), 2), ((1, 18, 2, 2), 3), ((3, 4, 1, 1), 1), ((0, 4, 2, 2), 2)])
def test_depth_to_space(dtype: Any, shape: tuple[int, ...], b: int) -> None:
    x = data(shape, dtype)
    want = ref_depth_to_space(x, b)
    same(one("depth_to_space", {"x": x}, block_size=b), want)
    same(one("space_to_depth", {"x": want}, block_size=b), x)  # the inverse
    same(ref_space_to_depth(want, b), x)
    if x.size:
        same(one("depth_to_space", {"x": x}, block_size=b, symbolic=True), want)
        same(one("space_to_depth", {"x": want}, block_size=b, symbolic=True), x)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,f", [((2, 8, 3, 5), 2), ((1, 27, 4, 2), 3), ((2, 3, 2, 2), 1), ((1, 4, 0, 3), 2)])
def test_pixel_shuffle(dtype: Any, shape: tuple[int, ...], f: int) -> None:
    x = data(shape, dtype)
    # torch on the raw bits (int16/int32 views) so NaN payloads compare exactly
    bits = torch.from_numpy(x.view(np.int16 if x.itemsize == 2 else np.int32).copy())
    want = F.pixel_shuffle(bits, f).numpy().view(x.dtype)
    same(one("pixel_shuffle", {"x": x}, upscale_factor=f), want)
    if x.size:
        same(one("pixel_shuffle", {"x": x}, upscale_factor=f, symbolic=True), want)
    # pixel_unshuffle inverts it (torch returns empty inputs unchanged, so compare with x)
    same(one("pixel_unshuffle", {"x": want}, downscale_factor=np.uint32(f)), x)


def test_pixel_shuffle_large_matches_torch() -> None:
    t = torch.randn(2, 64, 40, 24)
    same(one("pixel_shuffle", {"x": t.numpy()}, upscale_factor=4), F.pixel_shuffle(t, 4).numpy())
    same(one("pixel_unshuffle", {"x": t.numpy()}, downscale_factor=np.uint32(4)), F.pixel_unshuffle(t, 4).numpy())


def test_depth_ops_run_time_divisibility() -> None:
    x = data((1, 6, 2, 2))
    with pytest.raises(ValueError, match="depth_to_space"):
        run_op("depth_to_space", {"x": x}, block_size=2, symbolic=True)
    with pytest.raises(ValueError, match="space_to_depth"):
        run_op("space_to_depth", {"x": data((1, 1, 3, 4))}, block_size=2, symbolic=True)


# ---------------------------------------------------------------------------------------------
# space_to_batch, batch_to_space


def ref_space_to_batch(x: np.ndarray, block: list[int], pads: list[list[int]]) -> np.ndarray:
    n, c, _, _ = x.shape
    p = np.pad(x, [(0, 0), (0, 0), tuple(pads[0]), tuple(pads[1])])
    bh, bw = block
    h, w = p.shape[2] // bh, p.shape[3] // bw
    return p.reshape(n, c, h, bh, w, bw).transpose(3, 5, 0, 1, 2, 4).reshape(bh * bw * n, c, h, w)


def ref_batch_to_space(x: np.ndarray, block: list[int], crops: list[list[int]]) -> np.ndarray:
    bh, bw = block
    nb, c, h, w = x.shape
    n = nb // (bh * bw)
    y = x.reshape(bh, bw, n, c, h, w).transpose(2, 3, 4, 0, 5, 1).reshape(n, c, h * bh, w * bw)
    return y[:, :, crops[0][0]:h * bh - crops[0][1], crops[1][0]:w * bw - crops[1][1]]


def test_space_batch_coremltools_examples() -> None:
    x = np.arange(1, 17, dtype=np.float32).reshape(2, 1, 2, 4)
    want = np.array([[[[0, 1, 3]]], [[[0, 9, 11]]], [[[0, 2, 4]]], [[[0, 10, 12]]], [[[0, 5, 7]]], [[[0, 13, 15]]],
                     [[[0, 6, 8]]], [[[0, 14, 16]]]], np.float32)
    same(one("space_to_batch", {"x": x}, block_shape=[2, 2], paddings=[[0, 0], [2, 0]]), want)
    same(one("batch_to_space", {"x": want}, block_shape=[2, 2], crops=[[0, 0], [2, 0]]), x)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,block,pads", [
    ((2, 3, 4, 6), [2, 3], [[0, 0], [0, 0]]),
    ((1, 2, 5, 3), [2, 2], [[1, 0], [0, 1]]),
    ((3, 1, 2, 7), [3, 1], [[2, 2], [1, 0]]),
    ((2, 2, 3, 3), [2, 3], [[1, 2], [4, 2]]),   # padding wider than the block
    ((1, 1, 1, 1), [1, 1], [[2, 1], [0, 3]]),   # rows and columns of padding only
    ((0, 2, 2, 2), [2, 2], [[0, 0], [0, 0]]),
])
def test_space_to_batch_round_trip(dtype: Any, shape: tuple[int, ...], block: list[int], pads: list[list[int]]) -> None:
    x = data(shape, dtype)
    want = ref_space_to_batch(x, block, pads)
    got = one("space_to_batch", {"x": x}, block_shape=block, paddings=pads)
    same(got, want)
    back = one("batch_to_space", {"x": want}, block_shape=block, crops=pads)
    same(back, x)
    same(back, ref_batch_to_space(want, block, pads))
    if x.size:
        same(one("space_to_batch", {"x": x}, block_shape=block, paddings=pads, symbolic=True), want)
        same(one("batch_to_space", {"x": want}, block_shape=block, crops=pads, symbolic=True), x)


def test_space_batch_run_time_errors() -> None:
    with pytest.raises(ValueError, match="space_to_batch"):
        run_op("space_to_batch", {"x": data((1, 1, 3, 4))}, block_shape=[2, 2], paddings=[[0, 0], [0, 0]],
               symbolic=True)
    with pytest.raises(ValueError, match="batch_to_space"):
        run_op("batch_to_space", {"x": data((3, 1, 2, 2))}, block_shape=[2, 1], crops=[[0, 0], [0, 0]],
               symbolic=True)


def test_slice_run_time_shape_contradicts_type() -> None:
    # x[5:6] is one element by the type (coremltools' rule for constant bounds), but x has 3
    x = data((3, 2))
    with pytest.raises(IndexError, match=r"slice_by_index.*\(0, 2\)"):
        run_op("slice_by_index", {"x": x}, begin=[5, 0], end=[6, 2], symbolic=True)


def test_reshape_like_const_refs_and_x_symbolic() -> None:
    x = data((2, 3, 4), np.int8)
    refs = (np.zeros((4, 6), np.float32), np.zeros((1, 1), np.int32))
    (got,) = run_op("reshape_like", {"x": x}, ref_tensors=refs, begins=(0, 0), ends=(2, 1), end_masks=(False, False))
    same(got, x.reshape(4, 6, 1))
    (got,) = run_op("reshape_like", {"x": x}, symbolic=True, ref_tensors=refs, begins=(0, 0), ends=(0, 0),
                    end_masks=(True, True))
    same(got, x.reshape(4, 6, 1, 1))
