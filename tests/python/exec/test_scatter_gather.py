"""Numeric tests of the interpreter's gather / scatter kernels against numpy: gather,
gather_along_axis, gather_nd, scatter, scatter_along_axis, scatter_nd.

Gathers move raw elements (checked bit-exactly, fp16 included); scatters are checked against a
sequential reference (updates applied in index order, in fp32 for fp16 data, wrapping int32)."""

from __future__ import annotations

import itertools
from typing import Any

import milkit as ct
import numpy as np
import pytest
from support.exec_util import assert_close, rand, run_op

T17 = [np.float32, np.float16, np.int32, np.int16, np.uint16, np.int8, np.uint8]
I17 = [np.int32, np.int16, np.uint16, np.int8, np.uint8]
MODES = ["update", "add", "sub", "mul", "div", "max", "min"]


def _data(shape: tuple[int, ...], dtype: Any, seed: int = 0) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return rand(*shape, dtype=dtype, lo=-10, hi=10, seed=seed)
    info = np.iinfo(dtype)
    return rand(*shape, dtype=dtype, lo=max(info.min, -1000), hi=min(info.max, 1000), seed=seed)


def _idx(shape: tuple[int, ...], n: int, dtype: Any = np.int32, negative: bool = False, seed: int = 1) -> np.ndarray:
    lo = -n if negative and np.dtype(dtype).kind == "i" else 0
    return rand(*shape, dtype=np.int64, lo=lo, hi=n, seed=seed).astype(dtype)


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    assert got.tobytes() == want.tobytes()


# ------------------------------------------------------------------------------------------------ gather


def _gather_ref(x: np.ndarray, idx: np.ndarray, axis: int, batch_dims: int) -> np.ndarray:
    """coremltools' compute_gather (np.take per batch)."""
    idx = idx.astype(np.int64)
    if batch_dims == 0:
        return np.take(x, idx, axis=axis)
    bshape = x.shape[:batch_dims]
    xb = x.reshape((-1,) + x.shape[batch_dims:])
    ib = idx.reshape((-1,) + idx.shape[batch_dims:])
    res = np.stack([np.take(p, i, axis=axis - batch_dims) for p, i in zip(xb, ib)])
    return res.reshape(bshape + res.shape[1:])


@pytest.mark.parametrize("xshape,ishape,axis", [((5,), (3,), 0), ((5, 4), (2, 3), 0), ((5, 4), (6,), 1),
                                                ((3, 4, 5), (2, 2), -1), ((3, 4, 5), (7,), 1),
                                                ((50, 64), (4, 9), 0), ((3, 0, 2), (2,), 0), ((4, 3), (0,), 0)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_gather(xshape: tuple[int, ...], ishape: tuple[int, ...], axis: int, dtype: Any) -> None:
    x = _data(xshape, dtype)
    idx = _idx(ishape, xshape[axis], negative=True)
    (got,) = run_op("gather", {"x": x, "indices": idx}, opset=ct.target.iOS15, axis=axis)
    _same_bits(got, _gather_ref(x, idx, axis, 0))


@pytest.mark.parametrize("xdtype", T17)
@pytest.mark.parametrize("idtype", I17)
def test_gather_ios17_dtypes(xdtype: Any, idtype: Any) -> None:
    x = _data((6, 4, 3), xdtype)
    idx = _idx((2, 5), 4, idtype, negative=True)
    (got,) = run_op("gather", {"x": x, "indices": idx}, axis=1)
    _same_bits(got, _gather_ref(x, idx, 1, 0))


@pytest.mark.parametrize("idtype", [np.int32, np.int16, np.uint16])
@pytest.mark.parametrize("xshape,ishape,axis,bd", [((2, 5, 3), (2, 4), 1, 1), ((2, 3, 5, 4), (2, 3, 2), 2, 2),
                                                   ((2, 3, 5, 4), (2, 6), 3, 1), ((2, 3, 5), (2, 3), 2, 2),
                                                   ((2, 5, 3), (2, 4, 2), 2, 1)])
def test_gather_batch_dims(idtype: Any, xshape: tuple[int, ...], ishape: tuple[int, ...], axis: int, bd: int) -> None:
    x = _data(xshape, np.float32)
    idx = _idx(ishape, xshape[axis], idtype)
    (got,) = run_op("gather", {"x": x, "indices": idx}, opset=ct.target.iOS16, axis=axis, batch_dims=bd)
    _same_bits(got, _gather_ref(x, idx, axis, bd))


def test_gather_const_scalar_index_and_symbolic() -> None:
    x = _data((4, 5, 6), np.float32)
    (got,) = run_op("gather", {"x": x}, indices=np.int32(-2), axis=1)
    _same_bits(got, x[:, -2, :])
    idx = _idx((3, 2), 5)
    (got,) = run_op("gather", {"x": x, "indices": idx}, symbolic=True, axis=1)
    _same_bits(got, _gather_ref(x, idx, 1, 0))


def test_gather_fp16_special_values_exact() -> None:
    x = np.array([np.inf, -np.inf, np.nan, 65504, -65504, 6e-8, -0.0, 1.0], np.float16)
    x[2] = np.frombuffer(np.uint16(0x7E01).tobytes(), np.float16)[0]  # a NaN payload survives
    idx = np.array([7, 2, 0, 1, 3, 4, 5, 6, 2], np.int32)
    (got,) = run_op("gather", {"x": x, "indices": idx})
    _same_bits(got, x[idx])


def test_gather_embedding_large() -> None:
    """Embedding-style lookup, big enough for several parallel chunks."""
    table = _data((1000, 256), np.float32)
    idx = _idx((4, 128), 1000)
    (got,) = run_op("gather", {"x": table, "indices": idx}, axis=0)
    _same_bits(got, table[idx])
    small = idx.reshape(-1)[:300] % 256
    (got,) = run_op("gather", {"x": table, "indices": small.astype(np.int32)}, axis=1)
    _same_bits(got, np.take(table, small, axis=1))


@pytest.mark.parametrize("bad", [5, -6, 1000, -(2**31)])
def test_gather_out_of_range(bad: int) -> None:
    x = _data((5, 3), np.float32)
    idx = np.array([0, 4, bad, 1], np.int32)
    with pytest.raises(IndexError, match=rf"gather.*index {bad} \(indices element 2\).*dim 0 of x.*\[-5, 5\)"):
        run_op("gather", {"x": x, "indices": idx})


def test_gather_validate_indices_rejects_negative() -> None:
    x = _data((5, 3), np.float32)
    idx = np.array([0, -1], np.int32)
    (got,) = run_op("gather", {"x": x, "indices": idx}, validate_indices=False)
    _same_bits(got, x[[0, -1]])
    with pytest.raises(IndexError, match=r"index -1 .*valid indices are in \[0, 5\)"):
        run_op("gather", {"x": x, "indices": idx}, validate_indices=True)
    # uint8 indices are never negative, 255 is simply out of range
    with pytest.raises(IndexError, match="index 255"):
        run_op("gather", {"x": x, "indices": np.array([255], np.uint8)})


# ------------------------------------------------------------------------------------------ gather_along_axis


@pytest.mark.parametrize("xshape,m,axis", [((5,), 7, 0), ((4, 5), 3, 0), ((4, 5), 8, 1), ((3, 4, 5), 2, 1),
                                           ((3, 4, 5), 6, -1), ((2, 300, 70), 5, 1), ((3, 4), 0, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_gather_along_axis(xshape: tuple[int, ...], m: int, axis: int, dtype: Any) -> None:
    x = _data(xshape, dtype)
    ishape = list(xshape)
    ishape[axis] = m
    idx = _idx(tuple(ishape), xshape[axis], negative=True)
    (got,) = run_op("gather_along_axis", {"x": x, "indices": idx}, opset=ct.target.iOS15, axis=axis)
    _same_bits(got, np.take_along_axis(x, idx.astype(np.int64), axis=axis))


@pytest.mark.parametrize("xdtype,idtype", [(np.int8, np.uint8), (np.uint16, np.int16), (np.uint8, np.int8),
                                           (np.int16, np.uint16), (np.float16, np.int32)])
def test_gather_along_axis_ios17_dtypes_symbolic(xdtype: Any, idtype: Any) -> None:
    x = _data((3, 6, 4), xdtype)
    idx = _idx((3, 5, 4), 6, idtype, negative=True)
    (got,) = run_op("gather_along_axis", {"x": x, "indices": idx}, symbolic=True, axis=1)
    _same_bits(got, np.take_along_axis(x, idx.astype(np.int64), axis=1))


def test_gather_along_axis_errors() -> None:
    x = _data((3, 4), np.float32)
    idx = np.zeros((3, 2), np.int32)
    idx[2, 1] = 4
    with pytest.raises(IndexError, match=r"gather_along_axis.*index 4 \(indices element 5\).*dim 1 of x"):
        run_op("gather_along_axis", {"x": x, "indices": idx}, axis=1)
    idx[2, 1] = -1
    with pytest.raises(IndexError, match=r"index -1"):
        run_op("gather_along_axis", {"x": x, "indices": idx}, axis=1, validate_indices=True)
    with pytest.raises(ValueError, match=r"differ at dim 0"):  # symbolic dims bound to mismatching sizes
        run_op("gather_along_axis", {"x": x, "indices": np.zeros((2, 2), np.int32)}, symbolic=True, axis=1)


# ------------------------------------------------------------------------------------------------ gather_nd


def _gather_nd_ref(x: np.ndarray, idx: np.ndarray, bd: int) -> np.ndarray:
    idx = idx.astype(np.int64)
    depth = idx.shape[-1]
    out_shape = idx.shape[:-1] + x.shape[bd + depth:]
    out = np.empty(out_shape, x.dtype)
    for pos in itertools.product(*[range(n) for n in idx.shape[:-1]]):
        out[pos] = x[pos[:bd] + tuple(idx[pos])]
    return out


@pytest.mark.parametrize("xshape,ishape,bd", [((4, 5), (3, 1), 0), ((4, 5), (3, 2), 0), ((4, 5, 6), (2, 3, 2), 0),
                                              ((4, 5, 6), (7, 3), 0), ((2, 5, 6), (2, 3, 1), 1),
                                              ((2, 3, 5, 6), (2, 3, 4, 2), 2), ((2, 5, 6), (2, 4, 2), 1),
                                              ((30, 40, 8), (50, 2), 0), ((4, 5), (0, 2), 0)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_gather_nd(xshape: tuple[int, ...], ishape: tuple[int, ...], bd: int, dtype: Any) -> None:
    x = _data(xshape, dtype)
    depth = ishape[-1]
    cols = [_idx(ishape[:-1] + (1,), xshape[bd + j], seed=j) for j in range(depth)]
    idx = np.concatenate(cols, axis=-1) if cols else np.zeros(ishape, np.int32)
    (got,) = run_op("gather_nd", {"x": x, "indices": idx}, opset=ct.target.iOS16, batch_dims=bd)
    _same_bits(got, _gather_nd_ref(x, idx, bd))


@pytest.mark.parametrize("idtype", I17)
def test_gather_nd_ios17_dtypes_negative(idtype: Any) -> None:
    x = _data((4, 5, 3), np.int8)
    idx = np.array([[1, 2], [3, 4], [0, 0]], idtype)
    if np.dtype(idtype).kind == "i":
        idx[1] = [-1, -1]
    (got,) = run_op("gather_nd", {"x": x, "indices": idx})
    want = np.stack([x[tuple(i)] for i in idx.astype(np.int64)])
    _same_bits(got, want)


def test_gather_nd_out_of_range() -> None:
    x = _data((4, 5), np.float32)
    idx = np.array([[1, 2], [3, 5]], np.int32)  # 5 addresses dim 1 (size 5)
    with pytest.raises(IndexError, match=r"gather_nd.*index 5 \(indices element 3\).*dim 1 of x"):
        run_op("gather_nd", {"x": x, "indices": idx})
    idx = np.array([[4, 0]], np.int32)
    with pytest.raises(IndexError, match=r"index 4 \(indices element 0\).*dim 0"):
        run_op("gather_nd", {"x": x, "indices": idx})


# ------------------------------------------------------------------------------------------------ scatters


def _comb(mode: str, a: Any, b: Any, is_int: bool) -> Any:
    if mode == "update":
        return b
    if mode == "add":
        return a + b
    if mode == "sub":
        return a - b
    if mode == "mul":
        return a * b
    if mode == "div":
        if is_int:
            return 0 if b == 0 else int(a / b) if abs(a) < 2**52 else a // b
        return a / b
    if mode == "max":
        return np.maximum(a, b)
    return np.minimum(a, b)


def _apply(data: np.ndarray, targets: list[tuple[int, ...]], updates: np.ndarray, mode: str) -> np.ndarray:
    """Applies updates in order: fp32 arithmetic for floats (fp16 rounded at the end), int64
    wrapped to int32 for ints."""
    is_int = data.dtype.kind in "iu"
    out = data.astype(np.int64 if is_int else np.float32)
    upd = updates.reshape(-1).astype(np.int64 if is_int else np.float32)
    with np.errstate(all="ignore"):
        for t, u in zip(targets, upd):
            v = _comb(mode, out[t], u, is_int)
            out[t] = (np.int64(v) + 2**31) % 2**32 - 2**31 if is_int else v
    return out.astype(data.dtype)


def _norm(i: int, n: int) -> int:
    return i + n if i < 0 else i


def _scatter_targets(dshape: tuple[int, ...], idx: np.ndarray, axis: int) -> list[tuple[int, ...]]:
    ushape = dshape[:axis] + idx.shape + dshape[axis + 1:]
    k = idx.ndim
    flat = idx.astype(np.int64)
    return [pos[:axis] + (_norm(int(flat[pos[axis:axis + k]]), dshape[axis]),) + pos[axis + k:]
            for pos in np.ndindex(*ushape)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dshape,ishape,axis", [((6,), (4,), 0), ((5, 3), (4,), 0), ((5, 3), (5,), 1),
                                                ((3, 4, 2), (6,), -2), ((3, 4, 2), (2, 2), 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_scatter(mode: str, dshape: tuple[int, ...], ishape: tuple[int, ...], axis: int, dtype: Any) -> None:
    ax = axis % len(dshape)
    data = _data(dshape, dtype)
    idx = _idx(ishape, dshape[ax], negative=True, seed=2)  # repeats: updates apply in order
    upd = _data(dshape[:ax] + ishape + dshape[ax + 1:], dtype, seed=3)
    if dtype == np.int32 and mode == "div":
        upd[upd % 7 == 0] = 0  # integer division by zero gives 0
    (got,) = run_op("scatter", {"data": data, "indices": idx, "updates": upd}, opset=ct.target.iOS15, axis=axis,
                    mode=mode)
    want = _apply(data, _scatter_targets(dshape, idx, ax), upd, mode)
    assert_close(got, want, rtol=1e-6, atol=0)


def test_scatter_default_mode_is_add_and_symbolic() -> None:
    data = _data((4, 3), np.float32)
    idx = np.array([1, 1, 3], np.int32)
    upd = _data((3, 3), np.float32, seed=3)
    (got,) = run_op("scatter", {"data": data, "indices": idx, "updates": upd}, symbolic=True)
    assert_close(got, _apply(data, _scatter_targets((4, 3), idx, 0), upd, "add"), rtol=1e-6, atol=0)


def test_scatter_int32_wrap_div_and_nan() -> None:
    data = np.array([2**31 - 1, -(2**31), 7, -7, 5], np.int32)
    idx = np.array([0, 1, 2, 3, 4], np.int32)
    (got,) = run_op("scatter", {"data": data, "indices": idx, "updates": np.array([1, -1, 2, 2, 0], np.int32)},
                    mode="add")
    _same_bits(got, np.array([-(2**31), 2**31 - 1, 9, -5, 5], np.int32))
    (got,) = run_op("scatter", {"data": data, "indices": idx, "updates": np.array([2, -1, 2, 2, 0], np.int32)},
                    mode="div")
    _same_bits(got, np.array([2**30 - 1, -(2**31), 3, -3, 0], np.int32))  # truncation; INT_MIN / -1 wraps
    f = np.array([1.0, np.nan, 3.0], np.float32)
    (got,) = run_op("scatter", {"data": f, "indices": np.array([0, 1, 2], np.int32),
                                "updates": np.array([np.nan, 2.0, 1.0], np.float32)}, mode="max")
    assert_close(got, np.array([np.nan, np.nan, 3.0], np.float32))


def test_scatter_fp16_extremes() -> None:
    """fp16 data computes in fp32 and is rounded once: 60000 + 60000 - 60000 stays finite,
    60000 + 60000 overflows; halfway sums round to even (2048 + 1 -> 2048, 2050 + 1 -> 2052)."""
    data = np.array([60000, 60000, 1.0, 2048, 2050], np.float16)
    (got,) = run_op("scatter", {"data": data, "indices": np.array([0, 1, 1, 3, 4], np.int32),
                                "updates": np.array([60000, 60000, -60000, 1.0, 1.0], np.float16)}, mode="add")
    _same_bits(got, np.array([np.inf, 60000, 1.0, 2048, 2052], np.float16))


def test_scatters_empty() -> None:
    """No indices: the data passes through unchanged."""
    data = _data((4, 3), np.float32)
    empty = np.zeros((0,), np.int32)
    (got,) = run_op("scatter", {"data": data, "indices": empty, "updates": np.zeros((0, 3), np.float32)})
    _same_bits(got, data)
    (got,) = run_op("scatter_along_axis", {"data": data, "indices": np.zeros((0, 3), np.int32),
                                           "updates": np.zeros((0, 3), np.float32)})
    _same_bits(got, data)
    (got,) = run_op("scatter_nd", {"data": data, "indices": np.zeros((0, 1), np.int32),
                                   "updates": np.zeros((0, 3), np.float32)})
    _same_bits(got, data)


def test_scatter_errors() -> None:
    data = _data((4, 3), np.float32)
    with pytest.raises(IndexError, match=r"scatter.*index 4 \(indices element 1\).*dim 0 of data"):
        run_op("scatter", {"data": data, "indices": np.array([0, 4], np.int32),
                           "updates": _data((2, 3), np.float32)})
    with pytest.raises(IndexError, match=r"index -1.*\[0, 4\)"):
        run_op("scatter", {"data": data, "indices": np.array([0, -1], np.int32),
                           "updates": _data((2, 3), np.float32)}, validate_indices=True)


def _along_targets(dshape: tuple[int, ...], idx: np.ndarray, axis: int) -> list[tuple[int, ...]]:
    return [pos[:axis] + (_norm(int(idx[pos]), dshape[axis]),) + pos[axis + 1:] for pos in np.ndindex(*idx.shape)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dshape,m,axis", [((6,), 9, 0), ((4, 5), 6, 0), ((4, 5), 3, 1), ((3, 4, 5), 7, -2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_scatter_along_axis(mode: str, dshape: tuple[int, ...], m: int, axis: int, dtype: Any) -> None:
    ax = axis % len(dshape)
    ishape = dshape[:ax] + (m,) + dshape[ax + 1:]
    data = _data(dshape, dtype)
    idx = _idx(ishape, dshape[ax], negative=True, seed=2)
    upd = _data(ishape, dtype, seed=3)
    (got,) = run_op("scatter_along_axis", {"data": data, "indices": idx, "updates": upd}, opset=ct.target.iOS15,
                    axis=axis, mode=mode)
    want = _apply(data, _along_targets(dshape, idx, ax), upd, mode)
    assert_close(got, want, rtol=1e-6, atol=0)


def test_scatter_along_axis_large_add() -> None:
    """Several parallel blocks; repeated indices accumulate in order (np.add.at)."""
    data = _data((3, 40, 2000), np.float32)
    idx = _idx((3, 50, 2000), 40, seed=2)
    upd = _data((3, 50, 2000), np.float32, seed=3)
    (got,) = run_op("scatter_along_axis", {"data": data, "indices": idx, "updates": upd}, axis=1, mode="add")
    want = data.copy()
    p, _, j = np.indices(idx.shape)
    np.add.at(want, (p, idx.astype(np.int64), j), upd)
    assert_close(got, want, rtol=1e-6, atol=1e-5)


def test_scatter_along_axis_errors() -> None:
    data = _data((3, 4), np.int32)
    idx = np.zeros((3, 2), np.int32)
    idx[1, 0] = -5
    with pytest.raises(IndexError, match=r"scatter_along_axis.*index -5 \(indices element 2\).*dim 1 of data"):
        run_op("scatter_along_axis", {"data": data, "indices": idx, "updates": np.zeros((3, 2), np.int32)}, axis=1)


def _nd_targets(dshape: tuple[int, ...], idx: np.ndarray) -> list[tuple[int, ...]]:
    depth = idx.shape[-1]
    tail = dshape[depth:]
    out = []
    for pos in np.ndindex(*idx.shape[:-1]):
        head = tuple(_norm(int(v), dshape[j]) for j, v in enumerate(idx[pos]))
        out.extend(head + t for t in np.ndindex(*tail))
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dshape,ishape", [((6,), (8, 1)), ((4, 5), (6, 1)), ((4, 5), (7, 2)), ((3, 4, 5), (2, 3, 2)),
                                           ((3, 4, 5), (4, 3))])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_scatter_nd(mode: str, dshape: tuple[int, ...], ishape: tuple[int, ...], dtype: Any) -> None:
    depth = ishape[-1]
    data = _data(dshape, dtype)
    cols = [_idx(ishape[:-1] + (1,), dshape[j], negative=True, seed=10 + j) for j in range(depth)]
    idx = np.concatenate(cols, axis=-1)
    upd = _data(ishape[:-1] + dshape[depth:], dtype, seed=3)
    (got,) = run_op("scatter_nd", {"data": data, "indices": idx, "updates": upd}, opset=ct.target.iOS15, mode=mode)
    want = _apply(data, _nd_targets(dshape, idx), upd, mode)
    assert_close(got, want, rtol=1e-6, atol=0)


def test_scatter_nd_large_slices() -> None:
    data = _data((6, 3000), np.float32)
    idx = np.array([[1], [4], [1], [0]], np.int32)
    upd = _data((4, 3000), np.float32, seed=3)
    (got,) = run_op("scatter_nd", {"data": data, "indices": idx, "updates": upd}, mode="mul")
    want = data.copy()
    for i, u in zip(idx[:, 0], upd):
        want[i] *= u
    assert_close(got, want, rtol=1e-6, atol=0)


def test_scatter_nd_errors() -> None:
    data = _data((4, 5), np.float32)
    idx = np.array([[1, 2], [2, 7]], np.int32)
    with pytest.raises(IndexError, match=r"scatter_nd.*index 7 \(indices element 3\).*dim 1 of data"):
        run_op("scatter_nd", {"data": data, "indices": idx, "updates": np.zeros(2, np.float32)})
