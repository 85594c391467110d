"""Interpreter kernels of linear, matmul and einsum against numpy (fp32, fp16, int32, iOS17 mixed
dtypes, broadcasting, rank-1 operands, transposes, symbolic shapes, empty tensors, NaN / inf)."""

from __future__ import annotations

from typing import Any

import milkit as ct
import numpy as np
import pytest
from milkit import Builder as mb
from milkit import get_new_symbol
from support.exec_util import assert_close, at_threads, rand, run_op, run_prog

F16 = {"rtol": 2e-3, "atol": 2e-3}


def np_matmul(x: np.ndarray, y: np.ndarray, tx: bool = False, ty: bool = False) -> np.ndarray:
    """numpy reference in fp32 (fp16 inputs computed in fp32, then rounded back)."""
    dt = x.dtype
    if dt == np.float16:
        x, y = x.astype(np.float32), y.astype(np.float32)
    if tx:
        x = np.swapaxes(x, -1, -2)
    if ty:
        y = np.swapaxes(y, -1, -2)
    r = np.matmul(x, y)
    return r.astype(dt)


# ------------------------------------------------------------------------------------------
# matmul

# stored shapes (transpose_x / transpose_y swap the last two dims of the stored operand)
MATMUL_SHAPES = [
    ((3, 4), (4, 5), False, False),
    ((4,), (4,), False, False),
    ((4,), (2, 4, 3), False, False),
    ((2, 3, 4), (4,), False, False),
    ((2, 3, 4), (4, 5), False, False),  # batch folded into M
    ((4, 5), (2, 5, 3), False, False),  # x broadcast over y's batch
    ((2, 1, 3, 4), (5, 4, 6), False, False),  # broadcast batch dims
    ((3, 1, 6, 4), (1, 2, 4, 6), True, True),
    ((2, 4, 3), (2, 5, 4), True, True),
    ((2, 4, 3), (4, 5), True, False),
    ((3, 4), (2, 6, 4), False, True),
    ((50, 2, 3), (50, 3, 2), False, False),  # many tiny products (plain loop across threads)
    ((4, 2, 19), (4, 3, 19), False, True),  # plain-loop dot products (8 partial sums and a tail)
    ((2, 70, 80), (2, 80, 90), False, False),  # BLAS per batch
    ((1, 64, 96), (128, 96), False, True),
    # one row or column: matrix-vector products
    ((40,), (2, 40, 30), False, False),
    ((40,), (30, 40), False, True),
    ((40, 1), (40, 30), True, False),
    ((30, 40), (40, 1), False, False),
    ((40, 30), (40,), True, False),
    ((2, 30, 40), (40,), False, False),
]


@pytest.mark.parametrize("xs, ys, tx, ty", MATMUL_SHAPES)
def test_matmul_fp32(xs: tuple, ys: tuple, tx: bool, ty: bool) -> None:
    x, y = rand(*xs, seed=1), rand(*ys, seed=2)
    got = run_op("matmul", {"x": x, "y": y}, transpose_x=tx, transpose_y=ty)[0]
    assert_close(got, np_matmul(x, y, tx, ty), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("xs, ys, tx, ty", MATMUL_SHAPES[:9])
def test_matmul_fp16(xs: tuple, ys: tuple, tx: bool, ty: bool) -> None:
    x, y = rand(*xs, dtype=np.float16, seed=3), rand(*ys, dtype=np.float16, seed=4)
    got = run_op("matmul", {"x": x, "y": y}, transpose_x=tx, transpose_y=ty)[0]
    assert got.dtype == np.float16
    assert_close(got, np_matmul(x, y, tx, ty), **F16)


@pytest.mark.parametrize("xs, ys", [((3, 4), (4, 5)), ((2, 3, 4), (4,)), ((2, 2, 3), (2, 3, 2))])
def test_matmul_int32_wraps(xs: tuple, ys: tuple) -> None:
    x = rand(*xs, dtype=np.int32, lo=-(2**20), hi=2**20, seed=5)
    y = rand(*ys, dtype=np.int32, lo=-(2**20), hi=2**20, seed=6)
    got = run_op("matmul", {"x": x, "y": y})[0]
    want = np.matmul(x.astype(np.int64), y.astype(np.int64)).astype(np.int32)  # wraps mod 2**32
    assert got.dtype == np.int32
    assert (np.abs(np.matmul(x.astype(np.int64), y.astype(np.int64))) > 2**31).any()
    assert_close(got, want)


def test_matmul_symbolic() -> None:
    x, y = rand(2, 3, 4, seed=7), rand(2, 4, 5, seed=8)
    got = run_op("matmul", {"x": x, "y": y}, symbolic=True)[0]
    assert_close(got, x @ y, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("xs, ys", [((3, 0), (0, 5)), ((0, 4), (4, 5)), ((2, 3, 4), (4, 0)), ((0, 3, 4), (4, 2))])
def test_matmul_empty(xs: tuple, ys: tuple) -> None:
    x, y = rand(*xs, seed=9), rand(*ys, seed=10)
    got = run_op("matmul", {"x": x, "y": y})[0]
    assert_close(got, x @ y)


def test_matmul_nan_inf() -> None:
    x = rand(3, 4, seed=11)
    y = rand(4, 2, seed=12)
    x[0, 1] = np.nan
    x[2, 0] = np.inf
    got = run_op("matmul", {"x": x, "y": y})[0]
    with np.errstate(invalid="ignore"):
        want = x @ y
    assert np.isnan(got[0]).all() and np.isinf(got[2]).any()
    assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_matmul_ios17_const_of_another_dtype() -> None:
    x = rand(2, 3, 4, dtype=np.float16, seed=13)
    w = rand(4, 5, seed=14)  # fp32 const, output fp16 (x's)
    got = run_op("matmul", {"x": x}, y=w)[0]
    assert got.dtype == np.float16
    assert_close(got, (x.astype(np.float32) @ w).astype(np.float16), **F16)
    # int32 non-const x with an fp32 const y: computed in float, truncated to int32 (np.matmul then astype)
    xi = rand(3, 4, dtype=np.int32, lo=-50, hi=50, seed=15)
    wf = rand(4, 2, lo=-3, hi=3, seed=16)
    got = run_op("matmul", {"x": xi}, y=wf)[0]
    assert got.dtype == np.int32
    assert_close(got, np.matmul(xi, wf).astype(np.int32))
    # halfway values truncate toward zero (astype), they do not round
    xh = np.array([[1, -1], [3, -3]], np.int32)
    got = run_op("matmul", {"x": xh}, y=np.array([[2.5], [0.0]], np.float32))[0]
    np.testing.assert_array_equal(got, np.array([[2], [7]], np.int32))
    got = run_op("matmul", {"x": -xh}, y=np.array([[2.5], [0.0]], np.float32))[0]
    np.testing.assert_array_equal(got, np.array([[-2], [-7]], np.int32))
    # an int32 const x with an fp32 y: fp32 output
    got = run_op("matmul", {"y": wf}, x=xi)[0]
    assert got.dtype == np.float32
    assert_close(got, xi.astype(np.float32) @ wf, rtol=1e-5, atol=1e-5)


def test_matmul_ios15_opset() -> None:
    x, y = rand(2, 3, 4, seed=17), rand(4, 5, seed=18)
    got = run_op("matmul", {"x": x, "y": y}, opset=ct.target.iOS15, transpose_x=False)[0]
    assert_close(got, x @ y, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------------
# linear


@pytest.mark.parametrize("xs", [(4,), (3, 4), (2, 3, 4), (2, 70, 96)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_fp32(xs: tuple, bias: bool) -> None:
    x = rand(*xs, seed=20)
    w = rand(40, xs[-1], seed=21)
    params = {"weight": w}
    want = x @ w.T
    if bias:
        b = rand(40, seed=22)
        params["bias"] = b
        want = want + b
    got = run_op("linear", {"x": x}, **params)[0]
    assert_close(got, want, rtol=1e-5, atol=1e-5)


# products by a weight of 5 rows or more: milkit's panel GEMM (48-column panels, 8- or 4-row
# register blocks, k in blocks of 512) at the edges of each: rows, columns and k that do not
# divide, a long k accumulating into C, a single column
GEMM_SHAPES = [(5, 1, 7), (8, 48, 16), (9, 49, 17), (13, 95, 100), (33, 97, 513), (70, 130, 1100), (7, 3, 0)]


@pytest.mark.parametrize("m,n,k", GEMM_SHAPES)
@pytest.mark.parametrize("bias", [True, False])
def test_linear_gemm_edges(m: int, n: int, k: int, bias: bool) -> None:
    """linear against numpy in float64, and the same bits on 1, 2 and 3 threads."""
    x = rand(m, k, seed=30)
    w = rand(n, k, seed=31)
    params: dict = {"weight": w}
    want = x.astype(np.float64) @ w.astype(np.float64).T
    if bias:
        params["bias"] = rand(n, seed=32)
        want = want + params["bias"]
    outs = at_threads(lambda: run_op("linear", {"x": x}, **params)[0])
    assert_close(outs[0], want.astype(np.float32), rtol=1e-5, atol=1e-5 * max(k, 1) ** 0.5)
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])


@pytest.mark.parametrize("m,n,k", GEMM_SHAPES[:-1])
@pytest.mark.parametrize("ty", [False, True])
def test_matmul_const_gemm_edges(m: int, n: int, k: int, ty: bool) -> None:
    """matmul by a constant y stored [K, N] (an imported MatMul) or [N, K]; and by a y that is an
    input (the same kernel)."""
    x = rand(2, m, k, seed=33)
    y = rand(n, k, seed=34) if ty else rand(k, n, seed=34)
    want = np_matmul(x.astype(np.float64), y.astype(np.float64), ty=ty).astype(np.float32)
    got = run_op("matmul", {"x": x}, y=y, transpose_y=ty)[0]
    assert_close(got, want, rtol=1e-5, atol=1e-5 * k**0.5)
    got2 = run_prog(lambda a, b: mb.matmul(x=a, y=b, transpose_y=ty), {"x": x, "y": y})[0]
    np.testing.assert_array_equal(got2, got)


@pytest.mark.parametrize("m,n,k", GEMM_SHAPES[:-1])
def test_linear_fp16_gemm_edges(m: int, n: int, k: int) -> None:
    """An fp16 weight widened while its panels are packed gives the fp32 product of its values."""
    x = rand(m, k, dtype=np.float16, seed=35)
    w = rand(n, k, dtype=np.float16, seed=36)
    got = run_op("linear", {"x": x}, weight=w)[0]
    want = (x.astype(np.float64) @ w.astype(np.float64).T).astype(np.float16)
    assert got.dtype == np.float16
    assert_close(got, want, **F16)


@pytest.mark.parametrize("m,n,k", [(70, 130, 1100), (9, 49, 17)])
@pytest.mark.parametrize("then_relu", [False, True])
def test_linear_fp16_rounded_once(m: int, n: int, k: int, then_relu: bool) -> None:
    """An fp16 program's linear rounds the fp32 sum once, at the end (the GEMM rounds its outputs
    as it stores the last block of k): the bits of the fp32 program's result on the same values,
    rounded to fp16; whether the output stays wide for an fp32 reader (relu) or not."""
    x = rand(m, k, dtype=np.float16, seed=37)
    w = rand(n, k, dtype=np.float16, seed=38)
    b = rand(n, dtype=np.float16, seed=39)

    def build(xv: Any, wv: np.ndarray, bv: np.ndarray) -> Any:
        y = mb.linear(x=xv, weight=wv, bias=bv)
        return mb.relu(x=y) if then_relu else y

    got16 = run_prog(lambda xv: build(xv, w, b), {"x": x})[0]
    got32 = run_prog(lambda xv: build(xv, w.astype(np.float32), b.astype(np.float32)), {"x": x.astype(np.float32)})[0]
    assert got16.dtype == np.float16
    np.testing.assert_array_equal(got16, got32.astype(np.float16))


@pytest.mark.parametrize("env", [{"MILKIT_NO_AVX512": "1"}, {"MILKIT_GEMM": "blas"}])
def test_gemm_edges_other_kernels(env: dict) -> None:
    """The AVX2 register blocks (AVX-512 forced off) and OpenBLAS (MILKIT_GEMM=blas) on the same
    edges, in a child process (the choice is made once per process)."""
    import os
    import subprocess
    import sys

    code = (
        "import importlib.util, sys\n"
        f"sys.path.insert(0, {os.path.dirname(os.path.dirname(__file__))!r})\n"
        f"spec = importlib.util.spec_from_file_location('tl', {__file__!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "for mnk in m.GEMM_SHAPES:\n"
        "    m.test_linear_gemm_edges(*mnk, True)\n"
        "for mnk in m.GEMM_SHAPES[:-1]:\n"
        "    m.test_matmul_const_gemm_edges(*mnk, False)\n"
        "    m.test_linear_fp16_gemm_edges(*mnk)\n"
        "import milkit._core as c; print(c.gemm_kernel())\n")
    child_env = {k: v for k, v in os.environ.items() if k not in ("MILKIT_GEMM", "MILKIT_NO_AVX512")}
    r = subprocess.run([sys.executable, "-c", code], env=dict(child_env, **env), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-1] == ("blas" if "MILKIT_GEMM" in env else "panels")


def test_linear_fp16() -> None:
    x = rand(2, 5, 16, dtype=np.float16, seed=23)
    w = rand(8, 16, dtype=np.float16, seed=24)
    b = rand(8, dtype=np.float16, seed=25)
    got = run_op("linear", {"x": x}, weight=w, bias=b)[0]
    want = (x.astype(np.float32) @ w.astype(np.float32).T + b.astype(np.float32)).astype(np.float16)
    assert got.dtype == np.float16
    assert_close(got, want, **F16)


def test_linear_fp16_extremes() -> None:
    # products overflow fp16 in the fp32 sum only after rounding: 65504 stays, 2 * 65504 is inf
    x = np.array([[65504.0, 1.0], [65504.0, 65504.0], [-65504.0, -65504.0]], np.float16)
    w = np.array([[1.0, 0.0], [1.0, 1.0]], np.float16)
    got = run_op("linear", {"x": x}, weight=w)[0]
    with np.errstate(over="ignore"):
        want = (x.astype(np.float32) @ w.astype(np.float32).T).astype(np.float16)
    np.testing.assert_array_equal(got, want)
    assert np.isinf(got[1, 1]) and got[0, 0] == 65504.0
    # fp32 sums exactly halfway between two fp16 values round to even
    x = np.array([[1.0, 2.0**-11], [1.0, 3 * 2.0**-11]], np.float16)
    got = run_op("linear", {"x": x}, weight=np.ones((1, 2), np.float16))[0]
    np.testing.assert_array_equal(got[:, 0], np.array([1.0, 1.0 + 2.0**-9], np.float16))


def test_linear_ios17_weight_dtype() -> None:
    x = rand(3, 8, dtype=np.float16, seed=26)
    w = rand(5, 8, seed=27)
    b = rand(5, seed=28)
    got = run_op("linear", {"x": x}, weight=w, bias=b)[0]
    assert got.dtype == np.float16
    assert_close(got, (x.astype(np.float32) @ w.T + b).astype(np.float16), **F16)


def test_linear_int32_wraps() -> None:
    x = rand(3, 6, dtype=np.int32, lo=-(2**20), hi=2**20, seed=29)
    w = rand(4, 6, dtype=np.int32, lo=-(2**20), hi=2**20, seed=30)
    b = rand(4, dtype=np.int32, lo=-100, hi=100, seed=31)
    got = run_op("linear", {"x": x}, weight=w, bias=b)[0]
    want = (x.astype(np.int64) @ w.astype(np.int64).T + b).astype(np.int32)
    assert got.dtype == np.int32
    assert_close(got, want)


def test_linear_int32_x_float_weight() -> None:
    x = rand(3, 4, dtype=np.int32, lo=-20, hi=20, seed=32)
    w = rand(2, 4, lo=-2, hi=2, seed=33)
    b = rand(2, seed=34)
    got = run_op("linear", {"x": x}, weight=w, bias=b)[0]
    assert got.dtype == np.int32
    assert_close(got, (np.matmul(x, w.T) + b).astype(np.int32))


def test_linear_symbolic_and_empty() -> None:
    x = rand(2, 3, 8, seed=35)
    w, b = rand(6, 8, seed=36), rand(6, seed=37)
    got = run_op("linear", {"x": x}, symbolic=True, weight=w, bias=b)[0]
    assert_close(got, x @ w.T + b, rtol=1e-5, atol=1e-6)
    x0 = rand(0, 8, seed=38)
    got = run_op("linear", {"x": x0}, weight=w, bias=b)[0]
    assert got.shape == (0, 6)


def test_linear_nan_propagates() -> None:
    x = rand(3, 8, seed=39)
    x[1, 2] = np.nan
    w = rand(4, 8, seed=40)
    got = run_op("linear", {"x": x}, weight=w)[0]
    assert np.isnan(got[1]).all() and not np.isnan(got[[0, 2]]).any()
    assert_close(got[[0, 2]], (x @ w.T)[[0, 2]], rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------------
# einsum

EINSUM = [
    ("nchw,nwhu->nchu", (2, 3, 4, 5), (2, 5, 4, 6)),
    ("abcd,adce->abce", (1, 3, 4, 5), (2, 5, 4, 6)),  # B broadcast
    ("nchw,nwhu->nchu", (2, 3, 1, 5), (2, 5, 4, 6)),  # H broadcast (x)
    ("nchw,nwhu->nchu", (2, 3, 4, 5), (1, 5, 1, 6)),  # B and H broadcast (y)
    ("chw,whr->chr", (3, 4, 5), (5, 4, 6)),
    ("ijk,kjl->ijl", (3, 1, 5), (5, 4, 6)),
    ("nchw,nwhu->nchu", (2, 40, 3, 32), (2, 32, 3, 48)),  # BLAS per (b, h)
    ("nchw,nwhu->nchu", (1, 200, 3, 100), (1, 100, 3, 1)),  # strided matrix-vector products
    ("nchw,nwhu->nchu", (1, 1, 3, 100), (1, 100, 3, 200)),
]


def np_einsum(eq: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """coremltools' value inference: broadcast dims -2 (and -4), then np.einsum."""
    xs, ys = list(x.shape), list(y.shape)
    for d in ([-2, -4] if x.ndim == 4 else [-2]):
        m = max(xs[d], ys[d])
        xs[d] = ys[d] = m
    return np.einsum(eq, np.broadcast_to(x, xs), np.broadcast_to(y, ys))


@pytest.mark.parametrize("eq, xs, ys", EINSUM)
def test_einsum_fp32(eq: str, xs: tuple, ys: tuple) -> None:
    x, y = rand(*xs, seed=41), rand(*ys, seed=42)
    got = run_op("einsum", {"values": [x, y]}, equation=eq)[0]
    assert_close(got, np_einsum(eq, x, y), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("eq, xs, ys", EINSUM[:5])
def test_einsum_fp16(eq: str, xs: tuple, ys: tuple) -> None:
    x, y = rand(*xs, dtype=np.float16, seed=43), rand(*ys, dtype=np.float16, seed=44)
    got = run_op("einsum", {"values": [x, y]}, equation=eq)[0]
    want = np_einsum(eq, x.astype(np.float32), y.astype(np.float32)).astype(np.float16)
    assert got.dtype == np.float16
    assert_close(got, want, **F16)


def test_einsum_int32() -> None:
    x = rand(2, 3, 4, 5, dtype=np.int32, lo=-(2**16), hi=2**16, seed=45)
    y = rand(2, 5, 4, 6, dtype=np.int32, lo=-(2**16), hi=2**16, seed=46)
    got = run_op("einsum", {"values": [x, y]}, equation="nchw,nwhu->nchu")[0]
    want = np.einsum("nchw,nwhu->nchu", x.astype(np.int64), y.astype(np.int64)).astype(np.int32)
    assert got.dtype == np.int32
    assert_close(got, want)



def test_einsum_symbolic() -> None:
    # C and W symbolic (coremltools requires the broadcast dims to be structurally equal)
    xf, yf = rand(3, 4, 5, seed=47), rand(5, 4, 6, seed=48)
    specs = [mb.TensorSpec(shape=(get_new_symbol(), 4, 5)), mb.TensorSpec(shape=(5, 4, get_new_symbol()))]

    @mb.program(input_specs=specs, opset_version=ct.target.iOS18)
    def prog(a: Any, b: Any) -> Any:
        return mb.einsum(values=[a, b], equation="chw,whr->chr")

    names = list(prog.functions["main"].inputs)
    got = list(ct.run(prog, {names[0]: xf, names[1]: yf}).values())[0]
    assert_close(got, np.einsum("chw,whr->chr", xf, yf), rtol=1e-5, atol=1e-6)


def test_einsum_empty() -> None:
    x, y = rand(2, 0, 4, 5, seed=49), rand(2, 5, 4, 6, seed=50)
    got = run_op("einsum", {"values": [x, y]}, equation="nchw,nwhu->nchu")[0]
    assert got.shape == (2, 0, 4, 6)
    x, y = rand(3, 4, 0, seed=51), rand(0, 4, 6, seed=52)
    got = run_op("einsum", {"values": [x, y]}, equation="chw,whr->chr")[0]
    assert_close(got, np.zeros((3, 4, 6), np.float32))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.bool_])
def test_einsum_small_int_and_bool(dtype: type) -> None:
    """einsum's schema takes any dtype: integers wrap in their own width, bool is or-of-ands."""
    info = np.iinfo(dtype) if dtype != np.bool_ else None
    lo, hi = (info.min, info.max) if info is not None else (0, 2)
    x = rand(2, 3, 4, 5, dtype=dtype, lo=lo, hi=hi, seed=53)
    y = rand(2, 5, 4, 6, dtype=dtype, lo=lo, hi=hi, seed=54)
    got = run_op("einsum", {"values": [x, y]}, equation="nchw,nwhu->nchu")[0]
    if dtype == np.bool_:
        want = np.einsum("nchw,nwhu->nchu", x.astype(np.int64), y.astype(np.int64)) > 0
    else:
        want = np.einsum("nchw,nwhu->nchu", x.astype(np.int64), y.astype(np.int64)).astype(dtype)
    assert got.dtype == dtype
    assert_close(got, want)
