"""Numeric tests of the interpreter's tensor_operation kernels (cpp/src/exec/kernels/tensor_operation.cpp)
against numpy and torch: concat, split, stack, tile, pad, fill, fill_like, shape, identity, flatten2d,
band_part, one_hot, non_zero, cumsum, range_1d, argsort, topk, non_maximum_suppression.

Data-movement ops must be bit-exact for every dtype: their fp16 inputs are random bit patterns (NaN
payloads, infinities, subnormals) compared as raw bits."""

from __future__ import annotations

from typing import Any

import milkit as ct
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from support.exec_util import assert_close, rand, run_op

ALL_DTYPES = [np.float32, np.float16, np.int32, np.bool_, np.int8, np.uint8, np.int16, np.uint16]
NUMERIC_BOOL = [np.float32, np.float16, np.int32, np.bool_]


def data(*shape: int, dtype: Any = np.float32, seed: int = 0) -> np.ndarray:
    """Random elements of `dtype`; fp16 gets random bit patterns (NaN, inf, subnormals included)."""
    dt = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    if dt == np.float16:
        return rng.integers(0, 1 << 16, size=shape, dtype=np.uint16).view(np.float16)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -1000), min(info.max, 1000), size=shape, endpoint=True).astype(dt)
    return rand(*shape, dtype=dt, seed=seed)


def assert_bits(got: np.ndarray, want: np.ndarray) -> None:
    """Same shape, dtype and raw bytes."""
    want = np.ascontiguousarray(want)
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    assert np.ascontiguousarray(got).tobytes() == want.tobytes()


def f16_ref(fn: Any, *xs: np.ndarray) -> np.ndarray:
    """The fp16 reference: fn on the fp32 values of the fp16 inputs, rounded to fp16."""
    return np.asarray(fn(*[x.astype(np.float32) for x in xs])).astype(np.float16)


# ---------------------------------------------------------------------------------------------------------------
# concat, stack, split


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("shapes,axis", [
    ([(2, 3), (2, 5), (2, 1)], 1),
    ([(2, 3), (4, 3)], 0),
    ([(2, 3, 4), (2, 3, 1), (2, 3, 0)], -1),
    ([(1, 2, 3), (3, 2, 3)], -3),
    ([(2, 0, 3), (2, 4, 3)], 1),
    ([(5,)], 0),
])
def test_concat(dtype: Any, shapes: list[tuple[int, ...]], axis: int) -> None:
    xs = [data(*s, dtype=dtype, seed=i) for i, s in enumerate(shapes)]
    (got,) = run_op("concat", {"values": xs}, axis=axis)
    assert_bits(got, np.concatenate(xs, axis=axis))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.bool_])
@pytest.mark.parametrize("shape,axis", [((3, 2), 0), ((3, 2), 1), ((2, 3, 4), -2), ((4,), 0), ((2, 0, 3), 2)])
def test_concat_interleave(dtype: Any, shape: tuple[int, ...], axis: int) -> None:
    xs = [data(*shape, dtype=dtype, seed=i) for i in range(3)]
    (got,) = run_op("concat", {"values": xs}, axis=axis, interleave=True)
    a = axis % len(shape)
    want = np.stack(xs, axis=a + 1).reshape(shape[:a] + (3 * shape[a],) + shape[a + 1:])
    assert_bits(got, want)


def test_concat_symbolic_and_large() -> None:
    # symbolic dims bind at run time; large inputs take the parallel copy paths
    a, b = data(3, 200, 700, seed=1), data(3, 100, 700, seed=2)
    (got,) = run_op("concat", {"values": [a, b]}, axis=1, symbolic=True)
    assert_bits(got, np.concatenate([a, b], axis=1))
    a, b = data(600, 1000, seed=3), data(500, 1000, seed=4)
    (got,) = run_op("concat", {"values": [a, b]}, axis=0)
    assert_bits(got, np.concatenate([a, b], axis=0))
    (got,) = run_op("concat", {"values": [a, a[:, :3]]}, axis=-1)
    assert_bits(got, np.concatenate([a, a[:, :3]], axis=-1))


def test_concat_runtime_shape_mismatch() -> None:
    with pytest.raises(ValueError, match="concat"):
        run_op("concat", {"values": [data(2, 3), data(3, 3)]}, axis=1, symbolic=True)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("shape,axis", [((2, 3), 0), ((2, 3), 2), ((2, 3), -1), ((4,), -2), ((2, 0, 3), 1)])
def test_stack(dtype: Any, shape: tuple[int, ...], axis: int) -> None:
    xs = [data(*shape, dtype=dtype, seed=i) for i in range(3)]
    (got,) = run_op("stack", {"values": xs}, axis=axis)
    assert_bits(got, np.stack(xs, axis=axis))


def test_stack_symbolic() -> None:
    xs = [data(3, 5, seed=i) for i in range(4)]
    (got,) = run_op("stack", {"values": xs}, axis=1, symbolic=True)
    assert_bits(got, np.stack(xs, axis=1))


@pytest.mark.parametrize("dtype", NUMERIC_BOOL)
@pytest.mark.parametrize("shape,axis,params", [
    ((6, 4), 0, {"num_splits": 3}),
    ((6, 4), 1, {"num_splits": 2}),
    ((2, 6, 3), -2, {"split_sizes": [1, 0, 5]}),
    ((2, 7), -1, {"split_sizes": [3, 4]}),
    ((7, 2), 0, {"split_sizes": [2, 5], "num_splits": 2}),
    ((5,), 0, {"num_splits": 1}),
    ((0, 4), 1, {"num_splits": 2}),
])
def test_split(dtype: Any, shape: tuple[int, ...], axis: int, params: dict[str, Any]) -> None:
    x = data(*shape, dtype=dtype)
    got = run_op("split", {"x": x}, axis=axis, **params)
    if "split_sizes" in params:
        cuts = np.cumsum(params["split_sizes"])[:-1]
        want = np.split(x, cuts, axis=axis)
    else:
        want = np.split(x, params["num_splits"], axis=axis)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_bits(g, w)


def test_split_symbolic_and_large() -> None:
    x = data(4, 3000, 3, seed=5)
    got = run_op("split", {"x": x}, axis=1, num_splits=3, symbolic=True)
    for g, w in zip(got, np.split(x, 3, axis=1)):
        assert_bits(g, w)
    # a qkv-like split of the last axis, and one of the first axis (views of x)
    x = data(256, 3 * 512, seed=6)
    for axis in (0, 1):
        got = run_op("split", {"x": x}, axis=axis, split_sizes=[128, 64, 64] if axis == 0 else [512, 512, 512])
        cuts = [128, 192] if axis == 0 else [512, 1024]
        for g, w in zip(got, np.split(x, cuts, axis=axis)):
            assert_bits(g, w)


def test_split_then_concat_program() -> None:
    # split outputs (views for axis 0) feed a later op after x itself is freed
    from support.exec_util import run_prog

    x = data(6, 5, seed=7)

    def build(v: Any) -> Any:
        a, b, c = ct.Builder.split(x=v, split_sizes=[1, 2, 3], axis=0)
        return ct.Builder.concat(values=[c, a, b], axis=0)

    (got,) = run_prog(build, {"x": x})
    assert_bits(got, np.concatenate([x[3:], x[:1], x[1:3]], axis=0))


# ---------------------------------------------------------------------------------------------------------------
# tile, pad


@pytest.mark.parametrize("dtype", NUMERIC_BOOL)
@pytest.mark.parametrize("shape,reps", [
    ((2, 3), [2, 3]),
    ((2, 3), [1, 1]),
    ((4,), [5]),
    ((2, 1, 3), [3, 4, 1]),
    ((1, 2, 1, 2), [2, 1, 3, 2]),
    ((0, 3), [2, 2]),
])
def test_tile(dtype: Any, shape: tuple[int, ...], reps: list[int]) -> None:
    x = data(*shape, dtype=dtype)
    (got,) = run_op("tile", {"x": x}, reps=reps)
    assert_bits(got, np.tile(x, reps))


def test_tile_runtime_reps() -> None:
    x = data(3, 4, 5, seed=2)
    for reps in ([2, 1, 3], [1, 50, 1], [3, 0, 2]):
        (got,) = run_op("tile", {"x": x, "reps": np.array(reps, np.int32)})
        assert_bits(got, np.tile(x, reps))
    (got,) = run_op("tile", {"x": x}, reps=[2, 2, 2], symbolic=True)
    assert_bits(got, np.tile(x, [2, 2, 2]))
    with pytest.raises(ValueError, match="negative"):
        run_op("tile", {"x": x, "reps": np.array([1, -1, 1], np.int32)})


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate"])
@pytest.mark.parametrize("shape,pad", [
    ((3, 4), [1, 2]),
    ((3, 4), [2, 1, 0, 3]),
    ((2, 3, 5), [1, 1, 2, 2]),
    ((2, 3, 5), [0, 0, 0, 0, 0, 0]),
    ((1, 2, 4, 4), [0, 0, 0, 0, 3, 1, 1, 3]),
    ((6,), [9, 13]),
    ((2, 1), [0, 0, 2, 3]),
])
def test_pad(dtype: Any, mode: str, shape: tuple[int, ...], pad: list[int]) -> None:
    x = data(*shape, dtype=dtype)
    n = len(pad) // 2
    width = [(0, 0)] * (len(shape) - n) + [(pad[2 * i], pad[2 * i + 1]) for i in range(n)]
    kw: dict[str, Any] = {"mode": mode}
    if mode == "constant":
        kw["constant_val"] = dtype(-2.5)
        want = np.pad(x, width, mode="constant", constant_values=dtype(-2.5))
    else:
        want = np.pad(x, width, mode="reflect" if mode == "reflect" else "edge")
    (got,) = run_op("pad", {"x": x}, pad=np.array(pad, np.int32), **kw)
    assert_bits(got, want)


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_vs_torch(mode: str) -> None:
    x = rand(2, 3, 7, 9, seed=3)
    (got,) = run_op("pad", {"x": x}, pad=np.array([0, 0, 0, 0, 2, 4, 6, 1], np.int32), mode=mode)
    want = F.pad(torch.from_numpy(x), (6, 1, 2, 4), mode=mode).numpy()
    assert_bits(got, want)


def test_pad_runtime_and_errors() -> None:
    x = data(3, 4, seed=4)
    (got,) = run_op("pad", {"x": x, "pad": np.array([1, 0, 2, 2], np.int32)}, constant_val=np.float32(np.nan))
    assert_bits(got, np.pad(x, [(1, 0), (2, 2)], constant_values=np.float32(np.nan)))
    (got,) = run_op("pad", {"x": x}, pad=np.array([1, 2], np.int32), mode="reflect", symbolic=True)
    assert_bits(got, np.pad(x, [(0, 0), (1, 2)], mode="reflect"))
    # the default constant_val (0.0) pads an fp16 x with fp16 zeros
    h = data(2, 3, dtype=np.float16)
    (got,) = run_op("pad", {"x": h}, pad=np.array([2, 1], np.int32))
    assert_bits(got, np.pad(h, [(0, 0), (2, 1)]))
    # constant padding of an empty dim works, reflecting it cannot
    e = np.zeros((2, 0), np.float32)
    (got,) = run_op("pad", {"x": e}, pad=np.array([1, 1], np.int32), constant_val=np.float32(7))
    assert_bits(got, np.full((2, 2), 7, np.float32))
    with pytest.raises(ValueError, match="empty"):
        run_op("pad", {"x": e, "pad": np.array([0, 0, 1, 1], np.int32)}, mode="reflect")
    with pytest.raises(ValueError, match="negative"):
        run_op("pad", {"x": x, "pad": np.array([0, 0, -1, 1], np.int32)})


# ---------------------------------------------------------------------------------------------------------------
# fill, fill_like, shape, identity, flatten2d


@pytest.mark.parametrize("value", [np.float32(1.5), np.float16(-65504.0), np.int32(-7), True, np.float32(np.inf)])
@pytest.mark.parametrize("shape", [[2, 3], [4], [2, 0, 3], [1, 1, 1, 1], [300, 500]])
def test_fill(value: Any, shape: list[int]) -> None:
    (got,) = run_op("fill", {"shape": np.array(shape, np.int32)}, value=value)
    want = np.full(shape, value, dtype=np.asarray(value).dtype)
    assert_bits(got, want)


def test_fill_bad_shapes() -> None:
    with pytest.raises(ValueError, match="negative"):
        run_op("fill", {"shape": np.array([2, -1], np.int32)}, value=np.float32(1))
    with pytest.raises(ValueError, match="too large"):
        run_op("fill", {"shape": np.array([2**31 - 1] * 3, np.int32)}, value=np.float32(1))
    with pytest.raises(ValueError, match="too large"):
        run_op("tile", {"x": data(2, 2), "reps": np.array([2**30, 2**30], np.int32)})


@pytest.mark.parametrize("ref_dtype", NUMERIC_BOOL)
@pytest.mark.parametrize("value", [np.float32(0.25), np.float16(np.nan), np.int32(2**31 - 1), False])
def test_fill_like(ref_dtype: Any, value: Any) -> None:
    empty = ref_dtype == np.bool_
    ref = data(3, 0, 2, dtype=ref_dtype) if empty else data(3, 4, 2, dtype=ref_dtype)
    (got,) = run_op("fill_like", {"ref_tensor": ref}, value=value, symbolic=not empty)
    assert_bits(got, np.full(ref.shape, value, dtype=np.asarray(value).dtype))


@pytest.mark.parametrize("dtype", NUMERIC_BOOL)
@pytest.mark.parametrize("shape", [(3,), (2, 5), (1, 0, 4), (2, 3, 4, 5, 1)])
def test_shape(dtype: Any, shape: tuple[int, ...]) -> None:
    # symbolic dims: the shape is not known at compile time, the kernel makes it (symbols are >= 1)
    (got,) = run_op("shape", {"x": data(*shape, dtype=dtype)}, symbolic=0 not in shape)
    assert_bits(got, np.array(shape, np.int32))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_identity(dtype: Any) -> None:
    x = data(3, 4, dtype=dtype)
    (got,) = run_op("identity", {"x": x}, symbolic=True)
    assert_bits(got, x)


@pytest.mark.parametrize("dtype", NUMERIC_BOOL)
@pytest.mark.parametrize("shape,axis", [((2, 3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), 3), ((2, 3, 4), -1),
                                        ((2, 3, 4), -3), ((5,), 1), ((2, 0, 3), 2)])
def test_flatten2d(dtype: Any, shape: tuple[int, ...], axis: int) -> None:
    x = data(*shape, dtype=dtype)
    (got,) = run_op("flatten2d", {"x": x}, axis=axis, symbolic=0 not in shape)
    a = axis + len(shape) if axis < 0 else axis
    assert_bits(got, x.reshape(int(np.prod(shape[:a])), int(np.prod(shape[a:]))))


# ---------------------------------------------------------------------------------------------------------------
# band_part, one_hot, non_zero


def band_ref(x: np.ndarray, lower: int, upper: int) -> np.ndarray:
    M, N = x.shape[-2:]
    m, n = np.arange(M)[:, None], np.arange(N)[None, :]
    keep = ((lower < 0) | (m - n <= lower)) & ((upper < 0) | (n - m <= upper))
    return np.where(keep, x, np.zeros((), x.dtype))


@pytest.mark.parametrize("dtype", NUMERIC_BOOL)
@pytest.mark.parametrize("lower,upper", [(-1, -1), (0, -1), (-1, 0), (0, 0), (1, 2), (5, 0), (0, 9)])
@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 5, 4), (3, 0)])
def test_band_part(dtype: Any, lower: int, upper: int, shape: tuple[int, ...]) -> None:
    x = data(*shape, dtype=dtype)
    (got,) = run_op("band_part", {"x": x}, lower=lower, upper=upper)
    assert_bits(got, band_ref(x, lower, upper))


def test_band_part_vs_torch() -> None:
    x = rand(3, 7, 9, seed=8)
    t = torch.from_numpy(x)
    for (lo, up), want in [((-1, 0), torch.tril(t)), ((0, -1), torch.triu(t)), ((2, 1), torch.triu(torch.tril(t, 1), -2))]:
        (got,) = run_op("band_part", {"x": x}, lower=lo, upper=up, symbolic=True)
        assert_close(got, want.numpy(), rtol=0, atol=0)
    # outside the band is 0 even for NaN / inf (a select, not NaN * 0)
    y = np.full((3, 3), np.nan, np.float32)
    (got,) = run_op("band_part", {"x": y}, lower=0, upper=0)
    assert_bits(got, np.where(np.eye(3, dtype=bool), y, np.float32(0)))


def one_hot_ref(ind: np.ndarray, depth: int, axis: int, on: Any, off: Any) -> np.ndarray:
    oh = ind[..., None] == np.arange(depth)
    out = np.where(oh, on, off).astype(np.asarray(on).dtype)
    cut = axis if axis >= 0 else ind.ndim + axis + 1
    return np.moveaxis(out, -1, cut)


@pytest.mark.parametrize("on,off", [(np.float32(1), np.float32(0)), (np.float16(2.5), np.float16(-1)),
                                    (np.int32(7), np.int32(-3)), (True, False)])
@pytest.mark.parametrize("shape,axis", [((5,), -1), ((5,), 0), ((2, 3), 1), ((2, 3), -3), ((2, 3), 2), ((0, 2), 0)])
def test_one_hot(on: Any, off: Any, shape: tuple[int, ...], axis: int) -> None:
    depth = 4
    ind = rand(*shape, dtype=np.int32, lo=-2, hi=7)  # out of range (negative too) gives all off
    (got,) = run_op("one_hot", {"indices": ind}, one_hot_vector_size=depth, axis=axis, on_value=on, off_value=off)
    assert_bits(got, one_hot_ref(ind, depth, axis, on, off))


def test_one_hot_runtime_depth() -> None:
    ind = rand(3, 4, dtype=np.int32, lo=0, hi=6)
    (got,) = run_op("one_hot", {"indices": ind, "one_hot_vector_size": np.array([6], np.int32)})
    assert_bits(got, one_hot_ref(ind, 6, -1, np.int32(1), np.int32(0)))
    want = F.one_hot(torch.from_numpy(ind).long(), 6).numpy().astype(np.int32)
    assert_bits(got, want)


@pytest.mark.parametrize("dtype", NUMERIC_BOOL)
@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 4), (2, 1, 3, 2), (0, 3), (300, 500)])
def test_non_zero(dtype: Any, shape: tuple[int, ...]) -> None:
    x = rand(*shape, dtype=np.int32, lo=-1, hi=2).astype(dtype)  # about a third are zero
    (got,) = run_op("non_zero", {"x": x})
    assert_bits(got, np.argwhere(x).astype(np.int32))


def test_non_zero_special_values() -> None:
    x = np.array([[0.0, -0.0, np.nan], [np.inf, 1e-45, 0.0]], np.float32)
    (got,) = run_op("non_zero", {"x": x}, symbolic=True)
    assert_bits(got, np.argwhere(x).astype(np.int32))
    h = np.array([0.0, -0.0, np.nan, 6e-8, -np.inf, 0.0], np.float16)
    (got,) = run_op("non_zero", {"x": h})
    assert_bits(got, np.argwhere(h).astype(np.int32))
    (got,) = run_op("non_zero", {"x": np.zeros((2, 3), np.int32)})
    assert got.shape == (0, 2)


# ---------------------------------------------------------------------------------------------------------------
# cumsum, range_1d


def cumsum_ref(v: np.ndarray, axis: int, exclusive: bool, reverse: bool) -> np.ndarray:
    """numpy's sequential cumsum in v's dtype; exclusive shifts it by one (exact)."""
    if reverse:
        v = np.flip(v, axis)
    c = np.cumsum(v, axis=axis, dtype=v.dtype)
    if exclusive and c.shape[axis]:
        c = np.concatenate([np.zeros_like(np.take(c, [0], axis=axis)), np.delete(c, -1, axis=axis)], axis=axis)
    return np.flip(c, axis) if reverse else c


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("shape,axis", [((7,), 0), ((3, 5), 0), ((3, 5), 1), ((2, 3, 4), -1), ((2, 1500, 3), 1),
                                        ((4, 0), 1)])
def test_cumsum(dtype: Any, exclusive: bool, reverse: bool, shape: tuple[int, ...], axis: int) -> None:
    x = rand(*shape, dtype=dtype, lo=-50, hi=50) if dtype == np.int32 else rand(*shape, dtype=dtype, lo=-2, hi=2)

    def ref(v: np.ndarray) -> np.ndarray:
        return cumsum_ref(v, axis, exclusive, reverse)

    (got,) = run_op("cumsum", {"x": x}, axis=axis, exclusive=exclusive, reverse=reverse, symbolic=0 not in shape)
    want = f16_ref(ref, x) if dtype == np.float16 else ref(x)
    assert_bits(got, want)


def test_cumsum_vs_torch_and_specials() -> None:
    x = rand(4, 33, 6, seed=9)
    (got,) = run_op("cumsum", {"x": x}, axis=1)
    assert_close(got, torch.cumsum(torch.from_numpy(x), 1).numpy(), rtol=1e-5, atol=1e-5)
    # int32 wraps on overflow; NaN and inf propagate forward
    (got,) = run_op("cumsum", {"x": np.array([2**31 - 1, 1, 5], np.int32)})
    assert_bits(got, np.array([2**31 - 1, -(2**31), -(2**31) + 5], np.int32))
    y = np.array([1, np.inf, 2, -np.inf, 3], np.float32)
    (got,) = run_op("cumsum", {"x": y})
    assert_close(got, np.array([1, np.inf, np.inf, np.nan, np.nan], np.float32))
    # fp16: fp32 accumulation rounded once (a sum of 4096 ones stays exact)
    h = np.ones(4096, np.float16)
    (got,) = run_op("cumsum", {"x": h})
    assert_bits(got, np.arange(1, 4097).astype(np.float16))


@pytest.mark.parametrize("start,end,step", [(0, 10, 1), (10, -2, -3), (5, 5, 1), (5, 0, 2), (-7, 8, 4), (0, 1, 100),
                                            (2**31 - 10, 2**31 - 1, 3)])
def test_range_1d_int(start: int, end: int, step: int) -> None:
    (got,) = run_op("range_1d", {"start": np.array([start], np.int32), "end": np.array([end], np.int32),
                                 "step": np.array([step], np.int32)})
    assert_bits(got, np.arange(start, end, step, dtype=np.int32))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("start,end,step", [(0, 2, 0.3), (-3, 7, 0.01), (5, -5, -0.37), (0.1, 2000, 0.7), (1, 1, 0.5),
                                            (3, 1, 0.5), (0, 1, 0.125)])
def test_range_1d_float(dtype: Any, start: float, end: float, step: float) -> None:
    # numpy's arange in the program's dtype
    (got,) = run_op("range_1d", {"start": np.array([start], dtype), "end": np.array([end], dtype),
                                 "step": np.array([step], dtype)})
    assert_bits(got, np.arange(dtype(start), dtype(end), dtype(step), dtype=dtype))


def test_range_1d_errors() -> None:
    with pytest.raises(ValueError, match="step"):
        run_op("range_1d", {"start": np.array([0], np.int32), "end": np.array([3], np.int32),
                            "step": np.array([0], np.int32)})
    with pytest.raises(ValueError, match="range_1d"):
        run_op("range_1d", {"start": np.array([0], np.float32), "end": np.array([np.inf], np.float32),
                            "step": np.array([1], np.float32)})


# ---------------------------------------------------------------------------------------------------------------
# argsort, topk


def sort_ref(x: np.ndarray, axis: int, ascending: bool) -> np.ndarray:
    """Stable argsort; descending puts NaN last too (coremltools' argsort of -x)."""
    key = x.astype(np.float64) if x.dtype.kind in "iu" else x.astype(np.float32)
    return np.argsort(key if ascending else -key, axis=axis, kind="stable").astype(np.int32)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
@pytest.mark.parametrize("ascending", [False, True])
@pytest.mark.parametrize("shape,axis", [((9,), 0), ((4, 6), -1), ((4, 6), 0), ((3, 5, 4), 1), ((2, 1000), 1),
                                        ((3, 0), 0)])
def test_argsort(dtype: Any, ascending: bool, shape: tuple[int, ...], axis: int) -> None:
    x = rand(*shape, dtype=dtype, lo=-4, hi=4)  # ints: many ties (lower index first)
    if dtype == np.float16:
        x = np.round(x * 2).astype(np.float16) / np.float16(2)  # ties for fp16 too
    (got,) = run_op("argsort", {"x": x}, axis=axis, ascending=ascending)
    assert_bits(got, sort_ref(x, axis, ascending))


def test_argsort_specials() -> None:
    x = np.array([3.0, np.nan, -np.inf, 0.0, -0.0, np.inf, np.nan, 3.0], np.float32)
    for asc in (False, True):
        (got,) = run_op("argsort", {"x": x}, ascending=asc, symbolic=True)
        assert_bits(got, sort_ref(x, 0, asc))
    i = np.array([-(2**31), 2**31 - 1, 0, -(2**31)], np.int32)
    (got,) = run_op("argsort", {"x": i})
    assert_bits(got, np.array([1, 2, 0, 3], np.int32))


def topk_ref(x: np.ndarray, k: int, axis: int, ascending: bool) -> tuple[np.ndarray, np.ndarray]:
    idx = np.take(sort_ref(x, axis, ascending), np.arange(k), axis=axis)
    return np.take_along_axis(x, idx.astype(np.int64), axis=axis), idx


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int8, np.uint8, np.int16, np.uint16])
@pytest.mark.parametrize("ascending", [False, True])
@pytest.mark.parametrize("shape,k,axis", [((10,), 3, 0), ((4, 7), 7, -1), ((6, 5), 2, 0), ((2, 9, 3), -1, 1),
                                          ((3, 300), 5, -1)])
def test_topk(dtype: Any, ascending: bool, shape: tuple[int, ...], k: int, axis: int) -> None:
    x = data(*shape, dtype=dtype) if dtype != np.float16 else rand(*shape, dtype=np.float16, lo=-3, hi=3)
    if np.dtype(dtype).kind in "iu":
        x = (x % 7).astype(dtype)  # ties
    vals, inds = run_op("topk", {"x": x}, k=k, axis=axis, ascending=ascending)
    kk = shape[axis] if k == -1 else k
    wv, wi = topk_ref(x, kk, axis, ascending)
    assert_bits(vals, wv)
    assert_bits(inds, wi)


@pytest.mark.parametrize("opset", [ct.target.iOS15, ct.target.iOS16, ct.target.iOS17])
def test_topk_opsets_vs_torch(opset: Any) -> None:
    x = rand(3, 50, 4, seed=11)
    vals, inds = run_op("topk", {"x": x}, k=6, axis=1, opset=opset)
    tv, ti = torch.topk(torch.from_numpy(x), 6, dim=1)
    assert_bits(vals, tv.numpy())
    assert_bits(inds, ti.numpy().astype(np.int32))
    vals, inds = run_op("topk", {"x": x}, k=4, axis=-1, ascending=True, opset=opset, symbolic=True)
    tv, ti = torch.topk(torch.from_numpy(x), 4, dim=-1, largest=False)
    assert_bits(vals, tv.numpy())
    assert_bits(inds, ti.numpy().astype(np.int32))


def test_topk_options() -> None:
    x = rand(4, 20, seed=12)
    wv, wi = topk_ref(x, 5, 1, False)
    (vals,) = run_op("topk", {"x": x}, k=5, return_indices=False)
    assert_bits(vals, wv)
    vals, inds = run_op("topk", {"x": x}, k=5, output_indices_dtype="uint16")
    assert_bits(vals, wv)
    assert_bits(inds, wi.astype(np.uint16))
    # sort=False: any order is allowed; the set of selected elements is what counts
    vals, inds = run_op("topk", {"x": x}, k=5, sort=False)
    assert_bits(np.sort(inds, axis=1), np.sort(wi, axis=1))
    assert_bits(np.take_along_axis(x, inds.astype(np.int64), axis=1), vals)
    # k = -1 sorts the whole axis
    vals, inds = run_op("topk", {"x": x}, k=-1, ascending=True)
    assert_bits(inds, sort_ref(x, 1, True))
    # NaN sorts after every number in both directions (coremltools: argsort of x / -x)
    y = np.array([[1.0, np.nan, 3.0, -np.inf, 2.0]], np.float32)
    vals, inds = run_op("topk", {"x": y}, k=4)
    assert_bits(inds, np.array([[2, 4, 0, 3]], np.int32))
    vals, inds = run_op("topk", {"x": y}, k=5, ascending=True)
    assert_bits(inds, np.array([[3, 0, 4, 2, 1]], np.int32))


# ---------------------------------------------------------------------------------------------------------------
# non_maximum_suppression


def nms_ref(boxes: np.ndarray, scores: np.ndarray, iou_thr: float, score_thr: float, max_boxes: int,
            per_class: bool) -> list[np.ndarray]:
    """The NeuralNetwork spec's NMS layer on (n, B, 4) center boxes and (n, B, K) scores: 4 padded outputs."""
    n, B, K = scores.shape
    ob = np.zeros((n, max_boxes, 4), np.float32)
    osc = np.zeros((n, max_boxes, K), np.float32)
    oi = np.full((n, max_boxes), -1, np.int32)
    oc = np.zeros(n, np.int32)
    for b in range(n):
        bx = boxes[b].astype(np.float64)
        lo, hi = bx[:, :2] - np.abs(bx[:, 2:]) / 2, bx[:, :2] + np.abs(bx[:, 2:]) / 2
        area = np.prod(hi - lo, axis=1)
        best, cls = scores[b].max(axis=1), scores[b].argmax(axis=1)
        order = sorted((i for i in range(B) if best[i] >= score_thr), key=lambda i: (-best[i], i))
        sel: list[int] = []
        for i in order:
            if len(sel) == max_boxes:
                break
            ok = True
            for j in sel:
                if per_class and cls[i] != cls[j]:
                    continue
                wh = np.clip(np.minimum(hi[i], hi[j]) - np.maximum(lo[i], lo[j]), 0, None)
                inter = wh[0] * wh[1]
                union = area[i] + area[j] - inter
                if union > 0 and inter / union > iou_thr:
                    ok = False
                    break
            if ok:
                sel.append(i)
        if not sel and B:
            sel = [min(range(B), key=lambda i: (-best[i], i))]
        for r, i in enumerate(sel):
            ob[b, r], osc[b, r], oi[b, r] = boxes[b, i], scores[b, i], i
        oc[b] = len(sel)
    return [ob, osc, oi, oc]


def nms_inputs(n: int, B: int, K: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centers = rng.uniform(0, 10, size=(n, B, 2))
    sizes = rng.uniform(1, 4, size=(n, B, 2))
    boxes = np.concatenate([centers, sizes], axis=-1).astype(np.float32)
    scores = rng.uniform(0, 1, size=(n, B, K)).astype(np.float32)
    return boxes, scores


def test_nms_hand_case() -> None:
    # box 1 overlaps box 0 (IoU 0.9 > 0.5) and is suppressed; box 2 is far away; box 3 scores too low
    boxes = np.array([[[0.5, 0.5, 1, 1], [0.55, 0.5, 1, 1], [3, 3, 1, 1], [6, 6, 1, 1]]], np.float32)
    scores = np.array([[[0.9], [0.8], [0.7], [0.05]]], np.float32)
    ob, osc, oi, oc = run_op("non_maximum_suppression", {"boxes": boxes, "scores": scores}, iou_threshold=0.5,
                             score_threshold=0.1, max_boxes=4, opset=ct.target.iOS15)
    assert_bits(oi, np.array([[0, 2, -1, -1]], np.int32))
    assert_bits(oc, np.array([2], np.int32))
    assert_bits(ob, np.array([[[0.5, 0.5, 1, 1], [3, 3, 1, 1], [0, 0, 0, 0], [0, 0, 0, 0]]], np.float32))
    assert_bits(osc, np.array([[[0.9], [0.7], [0], [0]]], np.float32))
    # nothing above the threshold: the best box is output alone (the spec never gives an empty output)
    *_, oi, oc = run_op("non_maximum_suppression", {"boxes": boxes, "scores": scores}, iou_threshold=0.5,
                        score_threshold=0.95, max_boxes=2, opset=ct.target.iOS15)
    assert_bits(oi, np.array([[0, -1]], np.int32))
    assert_bits(oc, np.array([1], np.int32))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("per_class", [False, True])
@pytest.mark.parametrize("n,B,K,iou,score_thr,max_boxes", [(1, 30, 1, 0.3, 0.0, 10), (2, 50, 3, 0.5, 0.4, 20),
                                                         (3, 40, 4, 0.1, 0.2, 40), (1, 8, 2, 0.7, 0.99, 5),
                                                         (2, 0, 2, 0.5, 0.0, 3)])
def test_nms_ios15(dtype: Any, per_class: bool, n: int, B: int, K: int, iou: float, score_thr: float,
                   max_boxes: int) -> None:
    boxes, scores = nms_inputs(n, B, K, seed=B + K)
    boxes, scores = boxes.astype(dtype), scores.astype(dtype)
    got = run_op("non_maximum_suppression", {"boxes": boxes, "scores": scores}, iou_threshold=dtype(iou),
                 score_threshold=dtype(score_thr), max_boxes=max_boxes, per_class_suppression=per_class,
                 opset=ct.target.iOS15)
    want = nms_ref(boxes.astype(np.float32), scores.astype(np.float32), float(dtype(iou)), float(dtype(score_thr)),
                   max_boxes, per_class)
    for g, w in zip(got, want):
        assert_bits(g, w.astype(dtype) if w.dtype == np.float32 else w)


@pytest.mark.parametrize("per_class", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_nms_ios17(per_class: bool, dtype: Any) -> None:
    # iOS17: boxes (n, 4, B), scores (n, K, B), no score threshold, no count output
    boxes, scores = nms_inputs(2, 60, 3, seed=5)
    boxes, scores = boxes.astype(dtype), scores.astype(dtype)
    got = run_op("non_maximum_suppression", {"boxes": boxes.transpose(0, 2, 1).copy(),
                                             "scores": scores.transpose(0, 2, 1).copy()},
                 iou_threshold=dtype(0.3), max_boxes=25, per_class_suppression=per_class, symbolic=True)
    ob, osc, oi, _ = nms_ref(boxes.astype(np.float32), scores.astype(np.float32), float(dtype(0.3)), -np.inf, 25,
                             per_class)
    assert len(got) == 3
    assert_bits(got[0], ob.transpose(0, 2, 1).astype(dtype))
    assert_bits(got[1], osc.transpose(0, 2, 1).astype(dtype))
    assert_bits(got[2], oi)


def test_nms_ties_and_max_boxes() -> None:
    # equal scores: lower index first; max_boxes cuts the selection
    boxes = np.array([[[i * 5.0, 0, 1, 1] for i in range(6)]], np.float32)
    scores = np.array([[[0.5], [0.7], [0.5], [0.7], [0.5], [0.1]]], np.float32)
    *_, oi, oc = run_op("non_maximum_suppression", {"boxes": boxes, "scores": scores}, iou_threshold=0.5,
                        score_threshold=0.0, max_boxes=4, opset=ct.target.iOS15)
    assert_bits(oi, np.array([[1, 3, 0, 2]], np.int32))
    assert_bits(oc, np.array([4], np.int32))
