"""Interpreter kernels of avg_pool, max_pool and l2_pool against a numpy window reference, itself
checked against torch.nn.functional (max_pool*d, avg_pool*d with count_include_pad, lp_pool*d):
1d / 2d / 3d, every pad_type, asymmetric padding, ceil_mode, exclude_padding_from_average, fp16,
symbolic shapes, empty batches, NaN / inf.

Semantics: windows start at o * stride - pad_before ("same": total // 2 before, "same_lower": the
extra element before); padding never wins a max and adds 0 to an l2 sum; avg_pool divides by the
window clipped to the padded input (torch's count_include_pad, ceil_mode included) or, with
exclude_padding_from_average, by the input elements covered. Windows with no input element give
-inf (max) and 0 (avg, l2)."""

from __future__ import annotations

import math

import milkit as ct
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from support.exec_util import assert_close, rand, run_op

F16 = {"rtol": 2e-3, "atol": 2e-3}


def pads_of(pad_type: str, n: list[int], k: list[int], s: list[int], pad: list[int] | None) -> list[tuple[int, int]]:
    out = []
    for i in range(len(n)):
        if pad_type == "valid":
            out.append((0, 0))
        elif pad_type == "custom":
            assert pad is not None
            out.append((pad[2 * i], pad[2 * i + 1]))
        else:
            total = max(0, (math.ceil(n[i] / s[i]) - 1) * s[i] + k[i] - n[i])
            before = total - total // 2 if pad_type == "same_lower" else total // 2
            out.append((before, total - before))
    return out


def ref_pool(x: np.ndarray, kind: str, k: list[int], s: list[int], pad_type: str, pad: list[int] | None = None,
             ceil_mode: bool = False, exclude: bool = False) -> np.ndarray:
    """Window-by-window numpy reference in fp32 (coremltools' output sizes)."""
    x = x.astype(np.float32)
    nd = len(k)
    n = list(x.shape[2:])
    pads = pads_of(pad_type, n, k, s, pad)
    outs = []
    for i in range(nd):
        total = pads[i][0] + pads[i][1]
        if not ceil_mode:
            o = (n[i] + total - k[i]) // s[i] + 1
        else:
            o = (n[i] + total - k[i] + s[i] - 1) // s[i] + 1
            if total > 0 and (o - 1) * s[i] >= n[i] + total / 2:
                o -= 1
        outs.append(o)
    res = np.zeros(x.shape[:2] + tuple(outs), np.float32)
    axes = tuple(range(2, 2 + nd))
    for idx in np.ndindex(*outs):
        sl: list[slice] = [slice(None), slice(None)]
        padded, covered = 1, 1
        for i in range(nd):
            start = idx[i] * s[i] - pads[i][0]
            end = start + k[i]
            lo, hi = max(start, 0), max(min(end, n[i]), max(start, 0))
            sl.append(slice(lo, hi))
            padded *= min(end, n[i] + pads[i][1]) - start
            covered *= hi - lo
        win = x[tuple(sl)]
        where = (slice(None), slice(None)) + idx
        if kind == "max":
            res[where] = win.max(axis=axes) if covered else -np.inf
        elif kind == "l2":
            res[where] = np.sqrt((win * win).sum(axis=axes))
        else:
            cnt = covered if exclude else padded
            res[where] = win.sum(axis=axes) / cnt if cnt else 0.0
    return res


POOL_CASES = [
    # x shape, kernel, strides, pad_type, pad, ceil_mode
    ((2, 3, 11), [3], [2], "valid", None, False),
    ((1, 2, 10), [4], [3], "same", None, False),
    ((1, 2, 10), [4], [3], "same_lower", None, False),
    ((1, 2, 11), [3], [2], "custom", [1, 1], True),
    ((2, 3, 9, 10), [3, 3], [2, 2], "valid", None, False),
    ((2, 3, 9, 10), [3, 3], [2, 2], "valid", None, True),
    ((1, 2, 10, 9), [2, 3], [2, 2], "same", None, False),
    ((1, 2, 10, 9), [2, 3], [2, 2], "same_lower", None, False),
    ((1, 2, 8, 9), [3, 2], [1, 2], "custom", [2, 0, 1, 1], False),
    ((1, 2, 9, 8), [3, 3], [2, 2], "custom", [1, 1, 1, 1], True),
    ((1, 2, 12, 12), [3, 3], [2, 2], "custom", [1, 1, 1, 1], False),
    ((1, 2, 5, 6, 7), [2, 3, 2], [2, 1, 2], "same", None, False),
    ((1, 2, 5, 6, 7), [3, 2, 3], [1, 2, 2], "custom", [1, 0, 0, 1, 1, 1], False),
    # outputs at least 8 wide (row-wise kernel; the narrow ones go window by window)
    ((1, 2, 30), [4], [3], "same_lower", None, False),
    ((1, 2, 7, 20), [3, 3], [1, 2], "same", None, False),
    ((1, 2, 6, 21), [3, 3], [2, 2], "custom", [1, 1, 1, 1], True),
    ((1, 2, 5, 17), [2, 3], [1, 1], "custom", [0, 1, 2, 0], False),
    ((1, 1, 3, 4, 18), [2, 2, 3], [1, 1, 2], "same", None, False),
]


# l2_pool has 1 or 2 spatial dims: 3-d cases run for the other kinds only
POOL_KIND_CASES = [(*c, kind) for kind in ("max", "avg", "avg_exclude", "l2") for c in POOL_CASES
                   if not (kind == "l2" and len(c[1]) > 2)]


@pytest.mark.parametrize("xs, k, s, pad_type, pad, ceil_mode, kind", POOL_KIND_CASES)
def test_pool_fp32(xs: tuple, k: list, s: list, pad_type: str, pad: list | None, ceil_mode: bool, kind: str) -> None:
    x = rand(*xs, seed=1)
    params = {"kernel_sizes": k, "strides": s, "pad_type": pad_type, "ceil_mode": ceil_mode}
    if pad is not None:
        params["pad"] = pad
    op = {"max": "max_pool", "l2": "l2_pool"}.get(kind, "avg_pool")
    if op == "avg_pool":
        params["exclude_padding_from_average"] = kind == "avg_exclude"
    got = run_op(op, {"x": x}, **params)[0]
    want = ref_pool(x, kind[:3] if kind != "l2" else "l2", k, s, pad_type, pad, ceil_mode, kind == "avg_exclude")
    assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("nd, k, s, p, ceil_mode", [(1, 3, 2, 1, False), (1, 4, 3, 2, True), (2, 3, 2, 1, True),
                                                    (2, 2, 2, 0, True), (2, 3, 1, 1, False), (3, 3, 2, 1, False)])
def test_reference_matches_torch(nd: int, k: int, s: int, p: int, ceil_mode: bool) -> None:
    """The reference's semantics are torch's for symmetric padding (and ceil_mode)."""
    x = rand(2, 3, *([9] * nd), seed=2)
    tx = torch.tensor(x)
    maxp = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[nd]
    avgp = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[nd]
    args = {"kernel_sizes": [k] * nd, "strides": [s] * nd, "pad_type": "custom", "pad": [p] * (2 * nd),
            "ceil_mode": ceil_mode}
    ref = ref_pool(x, "max", [k] * nd, [s] * nd, "custom", [p] * (2 * nd), ceil_mode)
    assert_close(ref, maxp(tx, k, s, p, ceil_mode=ceil_mode).numpy())
    assert_close(run_op("max_pool", {"x": x}, **args)[0], ref)
    for excl in (False, True):
        ref = ref_pool(x, "avg", [k] * nd, [s] * nd, "custom", [p] * (2 * nd), ceil_mode, excl)
        want = avgp(tx, k, s, p, ceil_mode=ceil_mode, count_include_pad=not excl).numpy()
        assert_close(ref, want, rtol=1e-5, atol=1e-6)
        got = run_op("avg_pool", {"x": x}, exclude_padding_from_average=excl, **args)[0]
        assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("nd", [1, 2])
def test_l2_pool_matches_torch_lp_pool(nd: int) -> None:
    x = rand(2, 3, *([10] * nd), seed=3)
    lp = {1: F.lp_pool1d, 2: F.lp_pool2d}[nd]
    want = lp(torch.tensor(x), 2.0, 3, 2).numpy()
    got = run_op("l2_pool", {"x": x}, kernel_sizes=[3] * nd, strides=[2] * nd, pad_type="valid")[0]
    assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["max_pool", "avg_pool", "l2_pool"])
def test_pool_fp16(op: str) -> None:
    x = rand(1, 3, 9, 8, dtype=np.float16, lo=-100, hi=100, seed=4)
    x[0, 0, 0, :4] = [65504, 65504, -65504, 60000]
    got = run_op(op, {"x": x}, kernel_sizes=[2, 3], strides=[2, 1], pad_type="same")[0]
    kind = {"max_pool": "max", "avg_pool": "avg", "l2_pool": "l2"}[op]
    with np.errstate(over="ignore"):
        want = ref_pool(x, kind, [2, 3], [2, 1], "same").astype(np.float16)
    assert got.dtype == np.float16
    if op == "l2_pool":
        assert np.isinf(got[0, 0, 0, :3]).all()  # sqrt(65504^2 + ...) overflows fp16
    assert_close(got, want, **F16)


@pytest.mark.parametrize("width", [6, 20])
def test_pool_nan_inf(width: int) -> None:
    x = rand(1, 2, 6, width, seed=5)
    x[0, 0, 1, 1] = np.nan
    x[0, 1, 4, 4] = np.inf
    x[0, 1, 0, 0] = -np.inf
    for op, kind in (("max_pool", "max"), ("avg_pool", "avg"), ("l2_pool", "l2")):
        got = run_op(op, {"x": x}, kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid")[0]
        with np.errstate(invalid="ignore"):
            want = ref_pool(x, kind, [2, 2], [2, 2], "valid")
        assert np.isnan(got[0, 0, 0, 0]), op
        assert_close(got, want, rtol=1e-5, atol=1e-6)
    # NaN wins a max wherever it sits in the window
    y = np.zeros((1, 1, 1, 4 + width), np.float32)
    y[0, 0, 0, 3] = np.nan
    y[0, 0, 0, 4] = 1.0
    got = run_op("max_pool", {"x": y}, kernel_sizes=[1, 4], strides=[1, 1], pad_type="valid")[0]
    # np.max's semantics (torch's CPU max_pool lets a later 1.0 replace the NaN in window 1)
    assert np.isnan(got[..., :4]).all() and got[0, 0, 0, 4] == 1.0
    assert_close(got, ref_pool(y, "max", [1, 4], [1, 1], "valid"))


def test_pool_window_all_padding() -> None:
    x = rand(1, 1, 3, seed=6, lo=1, hi=2)
    args = {"kernel_sizes": [2], "strides": [1], "pad_type": "custom", "pad": [3, 3]}
    got = run_op("max_pool", {"x": x}, **args)[0]
    assert got[0, 0, 0] == -np.inf and np.isfinite(got[0, 0, 2:5]).all()
    assert_close(got, ref_pool(x, "max", [2], [1], "custom", [3, 3]))
    for excl in (False, True):
        got = run_op("avg_pool", {"x": x}, exclude_padding_from_average=excl, **args)[0]
        assert_close(got, ref_pool(x, "avg", [2], [1], "custom", [3, 3], exclude=excl), rtol=1e-6)
        assert got[0, 0, 0] == 0.0
    got = run_op("l2_pool", {"x": x}, **args)[0]
    assert_close(got, ref_pool(x, "l2", [2], [1], "custom", [3, 3]), rtol=1e-6)


@pytest.mark.parametrize("op", ["max_pool", "avg_pool", "l2_pool"])
def test_pool_symbolic_and_empty(op: str) -> None:
    x = rand(2, 3, 10, 7, seed=7)
    kind = {"max_pool": "max", "avg_pool": "avg", "l2_pool": "l2"}[op]
    got = run_op(op, {"x": x}, symbolic=True, kernel_sizes=[3, 2], strides=[2, 2], pad_type="same_lower")[0]
    assert_close(got, ref_pool(x, kind, [3, 2], [2, 2], "same_lower"), rtol=1e-5, atol=1e-6)
    got = run_op(op, {"x": x}, symbolic=True, kernel_sizes=[3, 3], strides=[2, 2], pad_type="custom",
                 pad=[1, 1, 1, 1], ceil_mode=True)[0]
    assert_close(got, ref_pool(x, kind, [3, 3], [2, 2], "custom", [1, 1, 1, 1], True), rtol=1e-5, atol=1e-6)
    got = run_op(op, {"x": rand(0, 3, 6, 6)}, kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid")[0]
    assert got.shape == (0, 3, 3, 3)


def test_global_avg_pool_large() -> None:
    x = rand(2, 64, 7, 7, seed=8)
    got = run_op("avg_pool", {"x": x}, kernel_sizes=[7, 7], strides=[1, 1], pad_type="valid")[0]
    assert_close(got, x.mean(axis=(2, 3), keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("seed", range(4))
def test_pool_random_configs(seed: int) -> None:
    """Random small geometries: tiny inputs, pads up to the kernel size, ceil_mode, all pad types."""
    rng = np.random.default_rng(seed)
    checked = 0
    for it in range(15):
        nd = int(rng.integers(1, 4))
        ins = [int(v) for v in rng.integers(1, 12, nd)]
        ks = [int(v) for v in rng.integers(1, 5, nd)]
        st = [int(v) for v in rng.integers(1, 4, nd)]
        pt = str(rng.choice(["valid", "same", "same_lower", "custom"]))
        ceil_mode = nd <= 2 and pt in ("valid", "custom") and bool(rng.random() < 0.4)
        pad = [int(v) for v in rng.integers(0, 4, 2 * nd)]
        if ceil_mode:
            pad = [pad[2 * (i // 2)] for i in range(2 * nd)]
        kind = str(rng.choice(["max", "avg", "avg_exclude", "l2"] if nd <= 2 else ["max", "avg", "avg_exclude"]))
        cpad = pad if pt == "custom" else None
        pads = pads_of(pt, ins, ks, st, cpad)
        if any(ins[i] + sum(pads[i]) < ks[i] for i in range(nd)):
            continue
        x = rand(2, 2, *ins, seed=seed * 100 + it)
        op = {"max": "max_pool", "l2": "l2_pool"}.get(kind, "avg_pool")
        params = {"kernel_sizes": ks, "strides": st, "pad_type": pt, "ceil_mode": ceil_mode}
        if cpad:
            params["pad"] = pad
        if op == "avg_pool":
            params["exclude_padding_from_average"] = kind == "avg_exclude"
        got = run_op(op, {"x": x}, **params)[0]
        want = ref_pool(x, "l2" if kind == "l2" else kind[:3], ks, st, pt, cpad, ceil_mode, kind == "avg_exclude")
        assert_close(got, want, rtol=1e-5, atol=1e-5)
        checked += 1
    assert checked >= 8


# Rows wide enough for the vector blocks (16 columns, two at a time, the last overlapping) with
# window-by-window borders: odd widths, strides 1-3, pads up to 2, ceil_mode, batch 2, 1-3 dims.
WIDE_CASES = [
    ((2, 3, 9, 113), [3, 3], [2, 2], [1, 1, 1, 1], False),
    ((1, 2, 8, 112), [3, 3], [2, 2], [1, 1, 1, 1], True),
    ((2, 2, 7, 71), [3, 3], [1, 1], [1, 1, 1, 1], False),
    ((1, 2, 6, 70), [5, 5], [1, 1], [2, 2, 2, 2], False),
    ((1, 2, 7, 95), [2, 2], [2, 2], [0, 0, 0, 0], True),
    ((1, 2, 7, 101), [3, 4], [3, 3], [1, 1, 2, 2], True),
    ((1, 2, 7, 101), [3, 4], [3, 3], [1, 0, 2, 1], False),
    ((1, 2, 5, 66), [3, 2], [1, 2], [0, 1, 1, 0], False),
    ((2, 3, 130), [3], [2], [1, 1], False),
    ((1, 2, 97), [5], [3], [2, 2], True),
    ((1, 2, 3, 4, 67), [2, 3, 3], [1, 2, 2], [1, 0, 0, 1, 1, 1], False),
    ((1, 1, 4, 3, 40), [3, 1, 3], [2, 1, 1], [1, 1, 0, 0, 1, 1], False),
]


@pytest.mark.parametrize("kind, xs, k, s, pad, ceil_mode",
                         [(kind, *case) for kind in ("max", "avg", "avg_exclude", "l2") for case in WIDE_CASES
                          if kind != "l2" or len(case[1]) <= 2])  # l2_pool has 1 or 2 spatial dims
def test_pool_wide_rows(kind: str, xs: tuple, k: list, s: list, pad: list, ceil_mode: bool) -> None:
    x = rand(*xs, seed=11)
    op = {"max": "max_pool", "l2": "l2_pool"}.get(kind, "avg_pool")
    params = {"kernel_sizes": k, "strides": s, "pad_type": "custom", "pad": pad, "ceil_mode": ceil_mode}
    if op == "avg_pool":
        params["exclude_padding_from_average"] = kind == "avg_exclude"
    got = run_op(op, {"x": x}, **params)[0]
    want = ref_pool(x, "l2" if kind == "l2" else kind[:3], k, s, "custom", pad, ceil_mode, kind == "avg_exclude")
    if kind == "max":
        np.testing.assert_array_equal(got, want)  # a max is exact
    else:
        assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("nd, s, p", [(2, 2, 1), (2, 1, 1), (2, 3, 0), (1, 2, 1), (3, 2, 1)])
def test_pool_wide_rows_match_torch(nd: int, s: int, p: int) -> None:
    x = rand(2, 4, *([5] * (nd - 1)), 77, seed=12)
    tx = torch.tensor(x)
    maxp = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[nd]
    avgp = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[nd]
    args = {"kernel_sizes": [3] * nd, "strides": [s] * nd, "pad_type": "custom", "pad": [p] * (2 * nd)}
    np.testing.assert_array_equal(run_op("max_pool", {"x": x}, **args)[0], maxp(tx, 3, s, p).numpy())
    for excl in (False, True):
        want = avgp(tx, 3, s, p, count_include_pad=not excl).numpy()
        assert_close(run_op("avg_pool", {"x": x}, exclude_padding_from_average=excl, **args)[0], want,
                     rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("s", [1, 2, 3])
def test_pool_nan_in_wide_rows(s: int) -> None:
    """A NaN in one plane (interior, border, last column) makes every window holding it NaN; the
    other planes' windows are unchanged (np.max semantics)."""
    x = rand(2, 3, 9, 75, seed=13)
    x[0, 1, 4, 40] = np.nan  # interior
    x[0, 1, 0, 0] = np.nan  # first column, border windows
    x[1, 2, 8, 74] = np.nan  # last row, last column
    x[1, 0, 3, 20] = np.inf
    x[1, 0, 5, 21] = -np.inf
    args = {"kernel_sizes": [3, 3], "strides": [s, s], "pad_type": "custom", "pad": [1, 1, 1, 1]}
    got = run_op("max_pool", {"x": x}, **args)[0]
    want = ref_pool(x, "max", [3, 3], [s, s], "custom", [1, 1, 1, 1])
    np.testing.assert_array_equal(got, want)  # NaN where want is NaN, the rest exact
    assert np.isnan(got).sum() == np.isnan(want).sum() > 0
    with np.errstate(invalid="ignore"):
        got = run_op("avg_pool", {"x": x}, **args)[0]
        want = ref_pool(x, "avg", [3, 3], [s, s], "custom", [1, 1, 1, 1])
    assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["max_pool", "avg_pool", "l2_pool"])
def test_pool_same_bits_any_thread_count(op: str) -> None:
    """Planes and bands of rows split across 1-3 threads (few planes: bands within a plane) give
    the same bits; a NaN in one band makes that band go window by window."""
    outs = []
    for xs in ((1, 2, 40, 67), (3, 5, 11, 50)):
        x = rand(*xs, seed=14)
        x[0, 1, 20 % xs[2], 33] = np.nan
        for threads in (1, 2, 3):
            ct.set_num_threads(threads)
            try:
                with np.errstate(invalid="ignore"):
                    got = run_op(op, {"x": x}, kernel_sizes=[3, 3], strides=[2, 1], pad_type="custom",
                                 pad=[1, 1, 1, 1])[0]
            finally:
                ct.set_num_threads(0)
            outs.append(got)
        for got in outs[-2:]:
            np.testing.assert_array_equal(got.view(np.uint32), outs[-3].view(np.uint32))
