"""Interpreter kernels of conv, conv_transpose and conv_quantized against torch.nn.functional
(1d / 2d / 3d, strides, dilations, groups incl. depthwise, every pad_type, output_shape, fp16,
dynamic weights, symbolic shapes, empty batches, NaN propagation).

"same" padding follows coremltools: total = max(0, (ceil(n / s) - 1) * s + ek - n), total // 2
before ("same_lower": the extra element before). conv_transpose crops its full output by pad
before ("custom"), by max(0, full - out) // 2 ("same", TensorFlow's conv2d_transpose) or nothing
("valid"); an output_shape beyond the crop extends the end (torch's output_padding)."""

from __future__ import annotations

import math
from typing import Any

import milkit as ct
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from milkit import Builder as mb
from support.exec_util import assert_close, at_threads, rand, run_child, run_op, run_prog

F16 = {"rtol": 3e-3, "atol": 3e-3}
CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def spatial_pads(pad_type: str, n: list[int], k: list[int], s: list[int], d: list[int],
                 pad: list[int] | None) -> list[tuple[int, int]]:
    """(before, after) per spatial dim, coremltools' aggregated_pad split."""
    out = []
    for i in range(len(n)):
        ek = (k[i] - 1) * d[i] + 1
        if pad_type == "valid":
            out.append((0, 0))
        elif pad_type == "custom":
            assert pad is not None
            out.append((pad[2 * i], pad[2 * i + 1]))
        else:
            total = max(0, (math.ceil(n[i] / s[i]) - 1) * s[i] + ek - n[i])
            before = total - total // 2 if pad_type == "same_lower" else total // 2
            out.append((before, total - before))
    return out


def ref_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, strides: list[int], dilations: list[int],
             groups: int, pad_type: str, pad: list[int] | None = None) -> np.ndarray:
    """torch conv in fp32 on x zero-padded per coremltools' pad_type."""
    nd = x.ndim - 2
    pads = spatial_pads(pad_type, list(x.shape[2:]), list(w.shape[2:]), strides, dilations, pad)
    flat = [p for pair in reversed(pads) for p in pair]  # F.pad: last dim first
    tx = F.pad(torch.tensor(x.astype(np.float32)), flat)
    tb = None if b is None else torch.tensor(b.astype(np.float32))
    return CONV[nd](tx, torch.tensor(w.astype(np.float32)), tb, stride=strides, dilation=dilations,
                    groups=groups).numpy()


CONV_CASES = [
    # x shape, weight shape, strides, dilations, groups, pad_type, pad
    ((2, 3, 17), (4, 3, 3), [1], [1], 1, "valid", None),
    ((1, 4, 20), (6, 2, 4), [3], [2], 2, "same", None),
    ((1, 4, 19), (4, 1, 4), [2], [1], 4, "same_lower", None),
    ((2, 3, 9, 10), (5, 3, 3, 3), [1, 1], [1, 1], 1, "valid", None),
    ((1, 3, 11, 10), (8, 3, 3, 3), [2, 2], [1, 1], 1, "same", None),
    ((1, 3, 11, 10), (8, 3, 4, 2), [2, 3], [1, 1], 1, "same_lower", None),
    ((1, 3, 11, 10), (8, 3, 4, 2), [2, 3], [1, 1], 1, "same", None),
    ((1, 4, 12, 9), (6, 2, 3, 3), [1, 2], [2, 1], 2, "custom", [2, 0, 1, 3]),
    ((2, 6, 10, 10), (6, 1, 3, 3), [1, 1], [1, 1], 6, "custom", [1, 1, 1, 1]),  # depthwise
    ((1, 4, 13, 11), (8, 1, 3, 5), [2, 1], [1, 2], 4, "same", None),  # depthwise, multiplier 2
    ((1, 4, 12, 12), (4, 1, 7, 7), [2, 2], [1, 1], 4, "custom", [3, 3, 3, 3]),
    ((2, 16, 8, 8), (8, 16, 1, 1), [1, 1], [1, 1], 1, "valid", None),  # 1x1: direct GEMM
    ((1, 16, 8, 8), (12, 4, 1, 1), [1, 1], [1, 1], 4, "valid", None),  # grouped 1x1
    ((1, 8, 9, 9), (4, 8, 1, 1), [2, 2], [1, 1], 1, "valid", None),  # strided 1x1 (im2col)
    ((1, 64, 70, 66), (8, 64, 3, 3), [1, 1], [1, 1], 1, "same", None),  # im2col in several bands
    ((1, 2, 5, 6, 7), (3, 2, 2, 3, 3), [1, 2, 1], [1, 1, 2], 1, "same", None),
    ((2, 4, 6, 5, 6), (4, 2, 3, 3, 1), [2, 1, 1], [1, 1, 1], 2, "custom", [1, 0, 0, 2, 1, 1]),
    ((1, 3, 4, 5, 6), (3, 1, 3, 3, 3), [1, 1, 1], [1, 1, 1], 3, "same_lower", None),  # depthwise 3d
    # taps whose every output lies in the left padding (a dilated kernel over a 1-wide input)
    ((1, 2, 1), (3, 2, 2), [1], [2], 1, "custom", [3, 0]),
    ((1, 2, 2, 1), (2, 1, 2, 2), [1, 1], [1, 2], 2, "custom", [0, 0, 3, 0]),
    # depthwise rows with no interior (every output misses some tap)
    ((1, 2, 5, 3), (2, 1, 3, 3), [1, 3], [1, 2], 2, "same", None),
    ((1, 1, 7, 1, 3), (1, 1, 1, 4, 3), [2, 3, 3], [1, 1, 2], 1, "same", None),
]


@pytest.mark.parametrize("xs, ws, strides, dilations, groups, pad_type, pad", CONV_CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_conv_fp32(xs: tuple, ws: tuple, strides: list, dilations: list, groups: int, pad_type: str,
                   pad: list | None, bias: bool) -> None:
    x, w = rand(*xs, seed=1), rand(*ws, seed=2)
    b = rand(ws[0], seed=3) if bias else None
    params = {"weight": w, "strides": strides, "dilations": dilations, "groups": groups, "pad_type": pad_type}
    if pad is not None:
        params["pad"] = pad
    if b is not None:
        params["bias"] = b
    got = run_op("conv", {"x": x}, **params)[0]
    assert_close(got, ref_conv(x, w, b, strides, dilations, groups, pad_type, pad), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", [CONV_CASES[i] for i in (1, 4, 8, 11, 15)])
def test_conv_fp16(case: tuple) -> None:
    xs, ws, strides, dilations, groups, pad_type, pad = case
    x, w, b = rand(*xs, dtype=np.float16, seed=4), rand(*ws, dtype=np.float16, seed=5), rand(ws[0], dtype=np.float16)
    extra = {"pad": pad} if pad is not None else {}
    got = run_op("conv", {"x": x}, weight=w, bias=b, strides=strides, dilations=dilations, groups=groups,
                 pad_type=pad_type, **extra)[0]
    assert got.dtype == np.float16
    want = ref_conv(x, w, b, strides, dilations, groups, pad_type, pad).astype(np.float16)
    assert_close(got, want, **F16)


def test_conv_ios17_mixed_dtypes_and_ios15() -> None:
    x, w, b = rand(1, 3, 8, 8, dtype=np.float16, seed=6), rand(4, 3, 3, 3, seed=7), rand(4, seed=8)
    got = run_op("conv", {"x": x}, weight=w, bias=b, pad_type="same")[0]
    assert got.dtype == np.float16
    assert_close(got, ref_conv(x, w, b, [1, 1], [1, 1], 1, "same").astype(np.float16), **F16)
    x32 = x.astype(np.float32)
    got = run_op("conv", {"x": x32}, opset=ct.target.iOS15, weight=w, pad_type="same")[0]
    assert_close(got, ref_conv(x32, w, None, [1, 1], [1, 1], 1, "same"), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("groups", [1, 2])
def test_conv_dynamic_weight(groups: int) -> None:
    x, w = rand(2, 4, 7, 9, seed=9), rand(6, 4 // groups, 3, 2, seed=10)
    got = run_op("conv", {"x": x, "weight": w}, strides=[2, 1], pad_type="same", groups=groups)[0]
    assert_close(got, ref_conv(x, w, None, [2, 1], [1, 1], groups, "same"), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("pad_type", ["valid", "same", "same_lower", "custom"])
def test_conv_symbolic(pad_type: str) -> None:
    x, w, b = rand(2, 4, 9, 12, seed=11), rand(6, 2, 3, 4, seed=12), rand(6, seed=13)
    pad = [1, 2, 0, 3] if pad_type == "custom" else None
    params = {"pad": pad} if pad else {}
    got = run_op("conv", {"x": x}, symbolic=True, weight=w, bias=b, strides=[2, 3], groups=2,
                 pad_type=pad_type, **params)[0]
    assert_close(got, ref_conv(x, w, b, [2, 3], [1, 1], 2, pad_type, pad), rtol=1e-4, atol=1e-4)


def test_conv_empty_batch_and_nan() -> None:
    w, b = rand(5, 3, 3, 3, seed=14), rand(5, seed=15)
    got = run_op("conv", {"x": rand(0, 3, 6, 6)}, weight=w, bias=b)[0]
    assert got.shape == (0, 5, 4, 4)
    x = rand(1, 3, 8, 8, seed=16)
    x[0, 1, 0, 0] = np.nan
    x[0, 2, 7, 7] = np.inf
    got = run_op("conv", {"x": x}, weight=w, bias=b, pad_type="same")[0]
    want = ref_conv(x, w, b, [1, 1], [1, 1], 1, "same")
    assert np.isnan(got[0, :, :2, :2]).all() and not np.isnan(got[0, :, 3:6, 3:6]).any()
    assert_close(got, want, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------------------
# conv_transpose


def ref_conv_transpose(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, strides: list[int],
                       dilations: list[int], groups: int, crop: list[int], out: list[int]) -> np.ndarray:
    """The full transposed conv (torch, no padding), cropped by `crop` before and sized `out`
    (zeros past the full output), plus bias."""
    nd = x.ndim - 2
    full = CONV_T[nd](torch.tensor(x.astype(np.float32)), torch.tensor(w.astype(np.float32)), stride=strides,
                      dilation=dilations, groups=groups).numpy()
    res = np.zeros(full.shape[:2] + tuple(out), np.float32)
    src, dst = [slice(None)] * 2, [slice(None)] * 2
    for i in range(nd):
        n = max(0, min(out[i], full.shape[2 + i] - crop[i]))
        src.append(slice(crop[i], crop[i] + n))
        dst.append(slice(0, n))
    res[tuple(dst)] = full[tuple(src)]
    if b is not None:
        res += b.astype(np.float32).reshape((1, -1) + (1,) * nd)
    return res


def transpose_geometry(xs: tuple, ws: tuple, strides: list[int], dilations: list[int], pad_type: str,
                       pad: list[int] | None, out_sizes: list[int] | None) -> tuple[list[int], list[int]]:
    """(crop before, output size) per spatial dim."""
    crop, out = [], []
    for i in range(len(xs) - 2):
        ek = (ws[2 + i] - 1) * dilations[i] + 1
        full = (xs[2 + i] - 1) * strides[i] + ek
        if out_sizes is not None:
            o = out_sizes[i]
        elif pad_type == "same":
            o = xs[2 + i] * strides[i]
        elif pad_type == "custom":
            assert pad is not None
            o = full - pad[2 * i] - pad[2 * i + 1]
        else:
            o = full
        out.append(o)
        if pad_type == "custom":
            assert pad is not None
            crop.append(pad[2 * i])
        elif pad_type == "same":
            crop.append(max(0, full - o) // 2)
        else:
            crop.append(0)
    return crop, out


CONV_T_CASES = [
    # x shape, weight shape [C_in, C_out / groups, *K], strides, dilations, groups, pad_type, pad, output spatial
    ((2, 3, 7), (3, 4, 3), [2], [1], 1, "valid", None, None),
    ((1, 4, 6), (4, 3, 4), [3], [2], 2, "same", None, None),
    ((1, 4, 6), (4, 1, 2), [3], [1], 4, "same", None, None),  # stride > kernel: the end holds the bias
    ((1, 3, 5, 6), (3, 2, 3, 3), [2, 2], [1, 1], 1, "custom", [1, 1, 1, 1], None),
    ((2, 4, 5, 4), (4, 3, 3, 2), [2, 1], [1, 2], 2, "custom", [2, 0, 0, 1], None),
    ((1, 3, 5, 6), (3, 2, 4, 4), [2, 2], [1, 1], 1, "same", None, None),
    ((1, 3, 5, 6), (3, 2, 3, 3), [2, 2], [1, 1], 1, "same", None, [9, 12]),  # TF SAME with output_shape
    ((1, 3, 5, 6), (3, 2, 3, 3), [2, 2], [1, 1], 1, "valid", None, [12, 14]),  # beyond the full output
    ((1, 3, 5, 6), (3, 2, 3, 3), [2, 2], [1, 1], 1, "custom", [1, 1, 1, 1], [10, 12]),  # output_padding 1
    ((1, 6, 4, 4), (6, 1, 3, 3), [1, 1], [1, 1], 6, "custom", [1, 1, 1, 1], None),  # depthwise
    ((1, 2, 3, 4, 3), (2, 3, 2, 3, 2), [2, 1, 2], [1, 1, 1], 1, "valid", None, None),
    ((1, 4, 3, 3, 2), (4, 1, 3, 2, 3), [1, 2, 2], [2, 1, 1], 2, "custom", [1, 1, 0, 1, 2, 0], None),
    ((1, 4, 64, 64), (4, 64, 3, 3), [2, 2], [1, 1], 1, "custom", [1, 1, 1, 1], None),  # columns in 2 bands
]


@pytest.mark.parametrize("xs, ws, strides, dilations, groups, pad_type, pad, out_sizes", CONV_T_CASES)
def test_conv_transpose_fp32(xs: tuple, ws: tuple, strides: list, dilations: list, groups: int, pad_type: str,
                             pad: list | None, out_sizes: list | None) -> None:
    x, w, b = rand(*xs, seed=20), rand(*ws, seed=21), rand(ws[1] * groups, seed=22)
    params = {"weight": w, "bias": b, "strides": strides, "dilations": dilations, "groups": groups,
              "pad_type": pad_type}
    if pad is not None:
        params["pad"] = pad
    if out_sizes is not None:
        params["output_shape"] = [xs[0], ws[1] * groups] + out_sizes
    got = run_op("conv_transpose", {"x": x}, **params)[0]
    crop, out = transpose_geometry(xs, ws, strides, dilations, pad_type, pad, out_sizes)
    assert_close(got, ref_conv_transpose(x, w, b, strides, dilations, groups, crop, out), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("nd, p, op_, s, d", [(1, 1, 1, 2, 1), (2, 1, 1, 2, 1), (2, 2, 1, 3, 2), (3, 1, 1, 2, 1)])
def test_conv_transpose_torch_output_padding(nd: int, p: int, op_: int, s: int, d: int) -> None:
    """custom pad p plus output_shape one larger per dim is torch's padding=p, output_padding=1."""
    xs = (1, 3) + (4,) * nd
    ws = (3, 2) + (3,) * nd
    x, w, b = rand(*xs, seed=23), rand(*ws, seed=24), rand(2, seed=25)
    full = (4 - 1) * s + (3 - 1) * d + 1
    got = run_op("conv_transpose", {"x": x}, weight=w, bias=b, strides=[s] * nd, dilations=[d] * nd,
                 pad_type="custom", pad=[p] * (2 * nd), output_shape=[1, 2] + [full - 2 * p + op_] * nd)[0]
    want = CONV_T[nd](torch.tensor(x), torch.tensor(w), torch.tensor(b), stride=s, padding=p, output_padding=op_,
                      dilation=d).numpy()
    assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_conv_transpose_fp16_and_symbolic() -> None:
    xs, ws = (1, 4, 5, 6), (4, 3, 3, 3)
    x, w, b = rand(*xs, dtype=np.float16, seed=26), rand(*ws, dtype=np.float16, seed=27), rand(3, dtype=np.float16)
    got = run_op("conv_transpose", {"x": x}, weight=w, bias=b, strides=[2, 2], pad_type="same")[0]
    crop, out = transpose_geometry(xs, ws, [2, 2], [1, 1], "same", None, None)
    assert got.dtype == np.float16
    assert_close(got, ref_conv_transpose(x, w, b, [2, 2], [1, 1], 1, crop, out).astype(np.float16), **F16)
    x32 = x.astype(np.float32)
    got = run_op("conv_transpose", {"x": x32}, symbolic=True, weight=w.astype(np.float32), strides=[2, 1],
                 pad_type="custom", pad=[1, 0, 0, 1])[0]
    crop, out = transpose_geometry(xs, ws, [2, 1], [1, 1], "custom", [1, 0, 0, 1], None)
    assert_close(got, ref_conv_transpose(x32, w, None, [2, 1], [1, 1], 1, crop, out), rtol=1e-4, atol=1e-4)


def test_conv_transpose_empty_batch() -> None:
    w = rand(3, 2, 3, 3, seed=28)
    got = run_op("conv_transpose", {"x": rand(0, 3, 4, 4)}, weight=w, strides=[2, 2])[0]
    assert got.shape == (0, 2, 9, 9)


# ------------------------------------------------------------------------------------------
# conv_quantized


@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_conv_quantized(per_channel: bool, dtype: type) -> None:
    x = rand(1, 4, 9, 8, dtype=dtype, seed=30)
    wq = rand(6, 2, 3, 3, dtype=np.uint8, lo=0, hi=256, seed=31)
    bias = rand(6, dtype=np.uint8, lo=0, hi=4, seed=32)
    n = 6 if per_channel else 1
    scale = rand(n, dtype=dtype, lo=0.001, hi=0.01, seed=33)
    qbias = rand(n, dtype=dtype, lo=-0.5, hi=0.5, seed=34)
    got = run_op("conv_quantized", {"x": x}, weight=wq, bias=bias, quantization_type="linear",
                 quant_scale=scale, quant_bias=qbias, strides=[2, 1], pad_type="same", groups=2)[0]
    wf = wq.astype(np.float32) * scale.astype(np.float32).reshape(-1, 1, 1, 1) + qbias.astype(np.float32).reshape(
        -1, 1, 1, 1)
    want = ref_conv(x, wf, bias.astype(np.float32), [2, 1], [1, 1], 2, "same").astype(dtype)
    assert got.dtype == dtype
    assert_close(got, want, **(F16 if dtype == np.float16 else {"rtol": 1e-4, "atol": 1e-4}))


def test_conv_quantized_bad_data() -> None:
    x = rand(1, 2, 5, 5, seed=35)
    scale, qbias = np.array([0.1], np.float32), np.array([0.0], np.float32)
    wq = np.full((3, 2, 3, 3), 20, np.uint8)
    with pytest.raises(ValueError, match=r"conv_quantized.*nbits = 4"):
        run_op("conv_quantized", {"x": x}, weight=wq, quantization_type="linear", quant_scale=scale,
               quant_bias=qbias, nbits=4)
    with pytest.raises(ValueError, match=r"conv_quantized.*lut"):
        run_op("conv_quantized", {"x": x}, weight=wq, quantization_type="lut", quant_scale=scale, quant_bias=qbias)


@pytest.mark.parametrize("nd", [1, 2])
@pytest.mark.parametrize("seed", range(6))
def test_conv_depthwise_random_configs(seed: int, nd: int) -> None:
    """Depthwise convs (one input channel per group, 1 to 3 outputs each) against torch: odd and
    even sizes on both sides of the 16-column blocks, square and oblong kernels, strides and
    dilations 1 to 3, pads larger than the kernel, batches of 1 to 3."""
    rng = np.random.default_rng(100 + seed)
    checked = 0
    for it in range(10):
        c, mult = int(rng.integers(1, 6)), int(rng.integers(1, 4))
        ins = [int(rng.integers(1, 12)) for _ in range(nd - 1)] + [int(rng.choice([1, 5, 15, 16, 17, 33, 40]))]
        ks = [int(rng.choice([1, 2, 3, 5, 7])) for _ in range(nd)]
        st = [int(v) for v in rng.integers(1, 4, nd)]
        dl = [int(v) for v in rng.integers(1, 4, nd)]
        pad = [int(v) for v in rng.integers(0, 9, 2 * nd)]
        pt = str(rng.choice(["valid", "same", "same_lower", "custom"]))
        cpad = pad if pt == "custom" else None
        pads = spatial_pads(pt, ins, ks, st, dl, cpad)
        if not all(ins[i] + sum(pads[i]) >= (ks[i] - 1) * dl[i] + 1 for i in range(nd)):
            continue
        x = rand(int(rng.integers(1, 4)), c, *ins, seed=seed * 100 + it)
        w, b = rand(c * mult, 1, *ks, seed=it + 1), rand(c * mult, seed=it + 2)
        bias = {"bias": b} if it % 2 else {}
        extra = {"pad": pad} if cpad else {}
        got = run_op("conv", {"x": x}, weight=w, strides=st, dilations=dl, groups=c, pad_type=pt, **bias,
                     **extra)[0]
        assert_close(got, ref_conv(x, w, b if bias else None, st, dl, c, pt, cpad), rtol=1e-4, atol=1e-4)
        checked += 1
    assert checked >= 5


@pytest.mark.parametrize("shape", [(1, 32, 112, 112, 3, 1), (1, 64, 112, 112, 3, 2), (2, 24, 28, 30, 5, 2),
                                   (1, 40, 14, 14, 5, 1), (1, 12, 56, 57, 7, 1), (2, 8, 14, 20, 7, 1),
                                   (1, 8, 7, 7, 7, 1), (3, 6, 9, 9, 3, 3)])
def test_conv_depthwise_network_shapes(shape: tuple) -> None:
    """Depthwise convs as the mobile networks have them (torch's symmetric padding k // 2)."""
    n, c, h, wd, k, s = shape
    x, w, b = rand(n, c, h, wd, seed=k), rand(c, 1, k, k, seed=s), rand(c, seed=3)
    got = run_op("conv", {"x": x}, weight=w, bias=b, strides=[s, s], groups=c, pad_type="custom",
                 pad=[k // 2] * 4)[0]
    want = F.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), stride=s, padding=k // 2, groups=c).numpy()
    assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("xs, ws, strides, dilations, groups, pad", [
    ((3, 6, 23, 19), (10, 3, 3, 3), [1, 1], [1, 1], 2, [1, 1, 1, 1]),
    ((1, 3, 45, 45), (16, 3, 7, 7), [2, 2], [1, 1], 1, [3, 3, 3, 3]),
    ((2, 8, 17, 30), (12, 8, 1, 1), [2, 2], [1, 1], 1, [0, 0, 0, 0]),
    ((1, 5, 31, 9), (4, 5, 3, 2), [1, 2], [2, 1], 1, [2, 1, 0, 3]),
    ((2, 4, 9, 40), (6, 2, 3, 3), [1, 1], [1, 1], 2, [1, 1, 1, 1]),
])
def test_conv_bands_across_threads(threads: int, xs: tuple, ws: tuple, strides: list, dilations: list, groups: int,
                                   pad: list) -> None:
    """im2col convs whose output rows are split in bands across the threads (each band's columns
    made by its thread): every band, image and group lands in place."""
    x, w, b = rand(*xs, seed=30), rand(*ws, seed=31), rand(ws[0], seed=32)
    ct.set_num_threads(threads)
    try:
        got = run_op("conv", {"x": x}, weight=w, bias=b, strides=strides, dilations=dilations, groups=groups,
                     pad_type="custom", pad=pad)[0]
    finally:
        ct.set_num_threads(0)
    assert_close(got, ref_conv(x, w, b, strides, dilations, groups, "custom", pad), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("xs, ws, strides, groups, pad", [
    ((1, 64, 7, 7), (200, 64, 3, 3), [1, 1], 1, [1, 1, 1, 1]),  # 49 pixels: 48 columns and 1
    ((2, 32, 5, 5), (70, 16, 3, 3), [1, 1], 2, [1, 1, 1, 1]),  # 25 pixels, two groups
    ((1, 600, 14, 14), (37, 600, 1, 1), [1, 1], 1, [0, 0, 0, 0]),  # 1x1, input too large to pack whole
    ((2, 24, 3, 3), (19, 24, 3, 3), [1, 1], 1, [0, 0, 0, 0]),  # one pixel
    ((1, 40, 16, 16), (33, 40, 5, 5), [1, 1], 1, [2, 2, 2, 2]),  # 256 pixels, the most so done
    ((1, 8, 9, 9), (27, 8, 3, 3), [2, 2], 1, [1, 1, 1, 1]),  # strided, 25 pixels
    # narrow last panels as dot products along k (AVX-512): k in several blocks, 4 columns, and a
    # panel of 4 columns alone
    ((1, 256, 7, 7), (40, 256, 3, 3), [1, 1], 1, [1, 1, 1, 1]),
    ((1, 48, 14, 14), (30, 48, 3, 3), [1, 1], 1, [1, 1, 1, 1]),
    ((1, 20, 2, 2), (10, 20, 3, 3), [1, 1], 1, [1, 1, 1, 1]),
])
def test_conv_few_pixels_rows_read_once(xs: tuple, ws: tuple, strides: list, groups: int, pad: list) -> None:
    """Convs of up to 256 output pixels over a dense weight multiply each block of weight rows once
    for every column panel (exec::sgemm_rows_outer): every row block, narrow last panel (1 to 8
    columns) and group lands in place, with the same bits on any number of threads."""
    x, w, b = rand(*xs, seed=40), rand(*ws, seed=41), rand(ws[0], seed=42)
    want = ref_conv(x, w, b, strides, [1, 1], groups, "custom", pad)
    outs = []
    for threads in (1, 2, 3):
        ct.set_num_threads(threads)
        try:
            outs.append(run_op("conv", {"x": x}, weight=w, bias=b, strides=strides, groups=groups,
                               pad_type="custom", pad=pad)[0])
        finally:
            ct.set_num_threads(0)
        assert_close(outs[-1], want, rtol=1e-4, atol=1e-4)
    assert all(np.array_equal(o, outs[0]) for o in outs)


@pytest.mark.parametrize("hw, k", [(16, 3), (16, 1), (40, 3)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_conv_no_input_channels(hw: int, k: int, with_bias: bool) -> None:
    """A conv over zero input channels sums nothing: its output is the bias (or 0), also where
    the output buffer is one a NaN-filled tensor of the same size left behind (256 output pixels
    and fewer go to exec::sgemm_rows_outer, larger images to the other GEMMs)."""
    x0 = np.zeros((1, 0, hw, hw), np.float32)
    x1 = rand(1, 64, hw, hw, seed=43)
    w = np.zeros((64, 0, k, k), np.float32)
    b = rand(64, seed=44)
    kw: dict[str, Any] = {"bias": b} if with_bias else {}

    def build(a: Any, e: Any) -> Any:
        s = mb.reduce_sum(x=mb.mul(x=a, y=np.float32(np.nan)))  # a freed 64-channel buffer of NaN
        return s, mb.conv(x=e, weight=w, pad_type="custom", pad=[k // 2] * 4, **kw)

    _, got = run_prog(build, {"x1": x1, "x0": x0})
    want = np.broadcast_to((b if with_bias else np.zeros(64, np.float32))[None, :, None, None], got.shape)
    np.testing.assert_array_equal(got, want)


ACTS = {"relu": F.relu, "relu6": F.relu6, "silu": F.silu}


@pytest.mark.parametrize("act", sorted(ACTS))
@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("groups, k", [(1, 3), (1, 1), (4, 3)])
def test_conv_then_activation(act: str, dt: type, groups: int, k: int) -> None:
    """An activation reading only a conv's output (which the plan applies inside the conv) gives
    torch's values, and the same bits as when the conv's output is also read elsewhere (the
    activation's own kernel); fp16 rounds the conv's output before the activation."""
    x = rand(2, 4, 11, 13, dtype=dt, lo=-2, hi=2, seed=20)
    w, b = rand(8, 4 // groups, k, k, dtype=dt, seed=21), rand(8, dtype=dt, seed=22)

    def conv(v: object) -> object:
        return mb.conv(x=v, weight=w, bias=b, groups=groups, pad_type="same")

    (fused,) = run_prog(lambda v: getattr(mb, act)(x=conv(v)), {"x": x})
    y, alone = run_prog(lambda v: (lambda c: (c, getattr(mb, act)(x=c)))(conv(v)), {"x": x})
    assert fused.dtype == np.dtype(dt)
    np.testing.assert_array_equal(fused, alone)
    c = torch.tensor(ref_conv(x, w, b, [1, 1], [1, 1], groups, "same").astype(dt).astype(np.float32))
    want = ACTS[act](c).numpy().astype(dt)
    assert_close(fused, want, **(F16 if dt == np.float16 else {"rtol": 1e-4, "atol": 1e-4}))
    assert_close(y, c.numpy().astype(dt), **(F16 if dt == np.float16 else {"rtol": 1e-4, "atol": 1e-4}))


@pytest.mark.parametrize("seed", range(4))
def test_conv_and_transpose_random_configs(seed: int) -> None:
    """Random small geometries (tiny inputs, large pads, dilations, strides past the kernel)."""
    rng = np.random.default_rng(seed)
    checked = 0
    for it in range(12):
        nd = int(rng.integers(1, 4))
        g = int(rng.choice([1, 1, 2, 3]))
        cin, cout = g * int(rng.integers(1, 4)), g * int(rng.integers(1, 4))
        ins = [int(v) for v in rng.integers(1, 8, nd)]
        ks = [int(v) for v in rng.integers(1, 5, nd)]
        st = [int(v) for v in rng.integers(1, 4, nd)]
        dl = [int(v) for v in rng.integers(1, 3, nd)]
        pad = [int(v) for v in rng.integers(0, 4, 2 * nd)]
        pt = str(rng.choice(["valid", "same", "same_lower", "custom"]))
        x = rand(int(rng.integers(1, 3)), cin, *ins, seed=seed * 100 + it)
        w, b = rand(cout, cin // g, *ks, seed=it + 1), rand(cout, seed=it + 2)
        cpad = pad if pt == "custom" else None
        pads = spatial_pads(pt, ins, ks, st, dl, cpad)
        if all(ins[i] + sum(pads[i]) >= (ks[i] - 1) * dl[i] + 1 for i in range(nd)):
            extra = {"pad": pad} if cpad else {}
            got = run_op("conv", {"x": x}, weight=w, bias=b, strides=st, dilations=dl, groups=g, pad_type=pt,
                         **extra)[0]
            assert_close(got, ref_conv(x, w, b, st, dl, g, pt, cpad), rtol=1e-4, atol=1e-4)
            checked += 1
        tpt = "valid" if pt == "same_lower" else pt
        wt = rand(cin, cout // g, *ks, seed=it + 3)
        outs = None
        if rng.random() < 0.4:
            outs = [(ins[i] - 1) * st[i] + (ks[i] - 1) * dl[i] + 1 + int(rng.integers(-1, 3)) for i in range(nd)]
        crop, osz = transpose_geometry(x.shape, wt.shape, st, dl, tpt, cpad, outs)
        if all(o > 0 for o in osz):
            params = {"weight": wt, "bias": b, "strides": st, "dilations": dl, "groups": g, "pad_type": tpt}
            if tpt == "custom":
                params["pad"] = pad
            if outs is not None:
                params["output_shape"] = [x.shape[0], cout] + outs
            got = run_op("conv_transpose", {"x": x}, **params)[0]
            assert_close(got, ref_conv_transpose(x, wt, b, st, dl, g, crop, osz), rtol=1e-4, atol=1e-4)
            checked += 1
    assert checked >= 12


# ------------------------------------------------------------------------------------------
# Winograd: 3x3 stride-1 convs of 16 channels or more and 36 output tiles of 2x2 or more, by
# F(4x4, 3x3) when there are 36 tiles of 4x4, else F(2x2, 3x3)


WINOGRAD_CASES = [
    # x shape, weight shape, pad (top, bottom, left, right as [t, b, l, r])
    ((1, 16, 12, 12), (16, 16, 3, 3), [1, 1, 1, 1]),  # the smallest it takes: 6x6 tiles
    ((2, 24, 17, 13), (20, 24, 3, 3), [1, 1, 1, 1]),  # odd sizes: a last row and column of half tiles
    ((1, 32, 15, 16), (48, 32, 3, 3), [0, 0, 0, 0]),  # valid
    ((1, 17, 14, 19), (33, 17, 3, 3), [2, 0, 0, 3]),  # asymmetric pads, wider than the kernel
    ((1, 16, 130, 40), (16, 16, 3, 3), [1, 1, 1, 1]),  # several chunks of tile rows
    ((1, 160, 14, 14), (176, 160, 3, 3), [1, 1, 1, 1]),  # filters made per block of output channels
    ((1, 64, 56, 56), (64, 64, 3, 3), [1, 1, 1, 1]),  # ResNet's first stage: F(4x4, 3x3) from here on
    ((2, 16, 23, 22), (24, 16, 3, 3), [0, 2, 1, 1]),  # the smallest F(4x4): 6x6 tiles, partial ones
    ((1, 96, 30, 30), (80, 96, 3, 3), [1, 1, 1, 1]),  # F(4x4) filters made per block of channels
    ((1, 32, 200, 64), (16, 32, 3, 3), [1, 1, 1, 1]),  # F(4x4) in several chunks of tile rows
]


@pytest.mark.parametrize("xs, ws, pad", WINOGRAD_CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_conv_winograd(xs: tuple, ws: tuple, pad: list, bias: bool) -> None:
    """Against torch in fp64, relative to the output's largest value (a tile's transforms mix its
    values: F(4x4, 3x3)'s error is about 20x the direct sum's, 5e-6 on ResNet's first stage), with
    every tile, chunk and channel block in place."""
    x, w = rand(*xs, seed=40), rand(*ws, seed=41, lo=-0.2, hi=0.2)
    b = rand(ws[0], seed=42) if bias else None
    params: dict = {"weight": w, "pad_type": "custom", "pad": pad}
    if b is not None:
        params["bias"] = b
    got = run_op("conv", {"x": x}, **params)[0]
    tpad = [pad[2], pad[3], pad[0], pad[1]]
    want = F.conv2d(F.pad(torch.tensor(x, dtype=torch.float64), tpad), torch.tensor(w, dtype=torch.float64),
                    None if b is None else torch.tensor(b, dtype=torch.float64)).numpy()
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= 2e-6 * scale * np.sqrt(ws[1])


@pytest.mark.parametrize("xs, ws, pad", [WINOGRAD_CASES[i] for i in (1, 4, 5, 7, 8)])
def test_conv_winograd_threads_agree(xs: tuple, ws: tuple, pad: list) -> None:
    """The same bits on 1, 2 and 3 threads: every GEMM sums over all input channels at once, so
    the blocking by threads does not change any sum."""
    x, w, b = rand(*xs, seed=43), rand(*ws, seed=44), rand(ws[0], seed=45)
    outs = at_threads(lambda: run_op("conv", {"x": x}, weight=w, bias=b, pad_type="custom", pad=pad)[0])
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])


@pytest.mark.parametrize("where", ["x_inf_nan", "x_overflows", "w_inf"])
def test_conv_winograd_not_finite_is_direct(where: str) -> None:
    """Where an output is not finite, the conv is recomputed directly: the transforms mix a whole
    4x4 patch (inf - inf = NaN beside an inf, or a sum of large finite inputs overflowing), and
    the direct conv gives each output what its own window gives, as torch does."""
    x, w, b = rand(1, 16, 12, 12, seed=46), rand(16, 16, 3, 3, seed=47, lo=-1e-3, hi=1e-3), rand(16, seed=48)
    if where == "x_inf_nan":
        x[0, 3, 5, 5] = np.inf
        x[0, 7, 0, 11] = np.nan
    elif where == "x_overflows":
        x[0, :, 4:8, 4:8] = 3e38  # direct: 3e38 * 1e-3 summed stays finite; B^T d overflows
    else:
        w[2, 5, 1, 1] = np.inf
    got = run_op("conv", {"x": x}, weight=w, bias=b, pad_type="same")[0]
    want = ref_conv(x, w, b, [1, 1], [1, 1], 1, "same")
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    assert_close(got, want, rtol=1e-4, atol=1e-4)
    if where == "x_overflows":
        assert np.isfinite(got).all()


def test_conv_winograd_fp16() -> None:
    """An fp16 program (fp16 weight read in place, computed in fp32, rounded once)."""
    x, w, b = rand(1, 32, 20, 20, dtype=np.float16, seed=49), rand(32, 32, 3, 3, dtype=np.float16, seed=50,
                                                                    lo=-0.2, hi=0.2), rand(32, dtype=np.float16)
    got = run_op("conv", {"x": x}, weight=w, bias=b, pad_type="same")[0]
    assert got.dtype == np.float16
    assert_close(got, ref_conv(x, w, b, [1, 1], [1, 1], 1, "same").astype(np.float16), **F16)


def test_conv_winograd_is_taken_and_can_be_turned_off() -> None:
    """MILKIT_WINOGRAD=0 (read once per process) runs such convs by im2col + GEMM: the two agree
    to rounding (relative to the output's largest value: a tile's transforms mix its values) and
    differ in the last bits, which shows the shapes above take the Winograd path."""
    import subprocess
    import sys

    code = ("import numpy as np, sys; sys.path.insert(0, %r); from support.exec_util import rand, run_op; "
            "x, w = rand(1, 64, 56, 56, seed=40), rand(64, 64, 3, 3, seed=41); "
            "sys.stdout.buffer.write(run_op('conv', {'x': x}, weight=w, pad_type='same')[0].tobytes())")
    import os
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    outs = []
    for flag in ("1", "0"):
        env = dict(os.environ, MILKIT_WINOGRAD=flag)
        res = subprocess.run([sys.executable, "-c", code % here], env=env, capture_output=True, check=True)
        outs.append(np.frombuffer(res.stdout, dtype=np.float32))
    assert not np.array_equal(outs[0], outs[1])
    assert np.abs(outs[0] - outs[1]).max() <= 2e-5 * np.abs(outs[1]).max()


# convs of 1-4 input channels (a network's stem: conv_direct.cpp's small-Cin kernel), against torch:
# odd sizes, rows narrower and wider than a vector, kernels 1x3 to 7x7, strides 1-3, dilations,
# asymmetric pads, batches, output channels not a multiple of the register block, with and without bias
SMALL_CIN_CASES = [
    ((1, 3, 45, 45), (16, 3, 7, 7), [2, 2], [1, 1], [3, 3, 3, 3]),
    ((2, 3, 33, 37), (13, 3, 3, 3), [2, 2], [1, 1], [1, 1, 1, 1]),
    ((1, 3, 30, 31), (32, 3, 3, 3), [1, 1], [1, 1], [1, 1, 1, 1]),
    ((1, 1, 17, 70), (9, 1, 5, 5), [3, 3], [1, 1], [2, 1, 0, 3]),
    ((2, 4, 11, 9), (5, 4, 3, 3), [1, 2], [2, 1], [2, 2, 1, 1]),
    ((1, 2, 8, 100), (17, 2, 1, 3), [1, 2], [1, 2], [0, 0, 2, 2]),
    ((1, 3, 14, 5), (8, 3, 7, 7), [1, 1], [1, 1], [3, 3, 3, 3]),
    ((1, 4, 21, 66), (24, 4, 5, 5), [2, 2], [1, 1], [0, 0, 0, 0]),
    ((1, 3, 9, 200), (1, 3, 3, 7), [3, 2], [1, 3], [1, 0, 4, 2]),
]


@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("xs, ws, strides, dilations, pad", SMALL_CIN_CASES)
def test_conv_small_cin(xs: tuple, ws: tuple, strides: list, dilations: list, pad: list, with_bias: bool) -> None:
    x, w, b = rand(*xs, seed=40), rand(*ws, seed=41), rand(ws[0], seed=42)
    bias = {"bias": b} if with_bias else {}
    got = run_op("conv", {"x": x}, weight=w, strides=strides, dilations=dilations, pad_type="custom", pad=pad,
                 **bias)[0]
    assert_close(got, ref_conv(x, w, b if with_bias else None, strides, dilations, 1, "custom", pad), rtol=1e-4,
                 atol=1e-4)


def test_conv_small_cin_fp16_and_same_pad() -> None:
    x, w, b = rand(1, 3, 40, 41, dtype=np.float16, seed=43), rand(16, 3, 3, 3, dtype=np.float16, seed=44), \
        rand(16, dtype=np.float16, seed=45)
    got = run_op("conv", {"x": x}, weight=w, bias=b, strides=[2, 2], pad_type="same")[0]
    want = ref_conv(x.astype(np.float32), w.astype(np.float32), b.astype(np.float32), [2, 2], [1, 1], 1, "same", None)
    assert got.dtype == np.float16
    assert_close(got, want.astype(np.float16), **F16)


@pytest.mark.parametrize("xs, ws, groups, k, s", [
    ((1, 3, 37, 45), (16, 3, 7, 7), 1, 7, 2),  # small-Cin
    ((2, 3, 19, 33), (8, 3, 3, 3), 1, 3, 1),  # small-Cin, batch 2
    ((1, 16, 23, 30), (16, 1, 3, 3), 16, 3, 2),  # depthwise
    ((2, 8, 13, 7), (16, 1, 5, 5), 8, 5, 1),  # depthwise, multiplier 2, rows narrower than a vector
    ((1, 4, 9, 17), (4, 1, 5, 5), 4, 5, 2),
])
def test_direct_convs_same_bits_any_thread_count(xs: tuple, ws: tuple, groups: int, k: int, s: int) -> None:
    """The direct kernels (depthwise, small-Cin) give the same bits at 1, 2 and 3 threads."""
    x, w, b = rand(*xs, seed=50), rand(*ws, seed=51), rand(ws[0], seed=52)
    outs = at_threads(lambda: run_op("conv", {"x": x}, weight=w, bias=b, strides=[s, s], groups=groups,
                                     pad_type="custom", pad=[k // 2] * 4)[0])
    for got in outs[1:]:
        np.testing.assert_array_equal(got.view(np.uint32), outs[0].view(np.uint32))
    want = F.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), stride=s, padding=k // 2, groups=groups)
    assert_close(outs[0], want.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("k, s", [(3, 1), (3, 2), (5, 1), (5, 2)])
@pytest.mark.parametrize("h, wd", [(1, 7), (5, 14), (7, 15), (9, 17), (6, 33), (11, 56), (4, 3)])
def test_conv_depthwise_row_blocks(k: int, s: int, h: int, wd: int) -> None:
    """The 3x3 / 5x5 depthwise bodies: heights on both sides of the four-row blocks, widths
    narrower than a vector, one and a half vectors (the overlapping last block), several."""
    x, w, b = rand(2, 6, h, wd, seed=60), rand(12, 1, k, k, seed=61), rand(12, seed=62)
    for pad in ([k // 2] * 4, [0, 1, 2, 0]):
        if h + pad[0] + pad[1] < k or wd + pad[2] + pad[3] < k:
            continue
        got = run_op("conv", {"x": x}, weight=w, bias=b, strides=[s, s], groups=6, pad_type="custom", pad=pad)[0]
        assert_close(got, ref_conv(x, w, b, [s, s], [1, 1], 6, "custom", pad), rtol=1e-4, atol=1e-4)


# depthwise convs over planes up to 56x56 (stride 1 or 2, no dilation): on AVX-512 CPUs blocks
# of 16 channels are transposed into one vector per pixel and every FMA takes 16 channels; the
# channels past the last block of 16 go plane by plane. (x shape, kernel, stride, pad):
# remainders, 7x7 and 14x14 planes, 16x16, a row of three runs, asymmetric and no padding, a
# kernel that is not square, a 1x1 output, ConvNeXt's 7x7 taps at 56x56, 28x30 at stride 2.
DW_BLOCK_CASES = [
    ((2, 37, 7, 7), (5, 5), 1, [2, 2, 2, 2]),
    ((1, 16, 14, 14), (3, 3), 1, [1, 1, 1, 1]),
    ((1, 48, 14, 14), (5, 5), 2, [2, 2, 2, 2]),
    ((1, 32, 16, 16), (3, 3), 1, [1, 1, 1, 1]),
    ((1, 16, 13, 11), (3, 3), 2, [0, 1, 2, 0]),
    ((2, 20, 9, 20), (3, 5), 1, [1, 1, 2, 2]),
    ((1, 17, 1, 1), (3, 3), 1, [1, 1, 1, 1]),
    ((1, 64, 5, 40), (3, 3), 1, [1, 1, 1, 1]),
    ((1, 16, 9, 9), (3, 3), 1, [0, 0, 0, 0]),
    ((1, 16, 56, 56), (7, 7), 1, [3, 3, 3, 3]),
    ((1, 32, 28, 30), (5, 5), 2, [2, 2, 2, 2]),
]


def _dw_block_case(i: int, bias: bool) -> np.ndarray:
    xs, k, s, pad = DW_BLOCK_CASES[i]
    x = rand(*xs, lo=-2, hi=2, seed=70 + i)
    w = rand(xs[1], 1, *k, seed=80 + i)
    b = rand(xs[1], seed=90 + i) if bias else None
    return run_op("conv", {"x": x}, weight=w, bias=b, strides=[s, s], groups=xs[1], pad_type="custom", pad=pad)[0]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("i", range(len(DW_BLOCK_CASES)))
def test_conv_depthwise_channel_blocks(i: int, bias: bool) -> None:
    xs, k, s, pad = DW_BLOCK_CASES[i]
    outs = at_threads(lambda: _dw_block_case(i, bias))
    for got in outs[1:]:
        np.testing.assert_array_equal(got.view(np.uint32), outs[0].view(np.uint32))
    x = rand(*xs, lo=-2, hi=2, seed=70 + i)
    w = rand(xs[1], 1, *k, seed=80 + i)
    b = rand(xs[1], seed=90 + i) if bias else None
    assert_close(outs[0], ref_conv(x, w, b, [s, s], [1, 1], xs[1], "custom", pad), rtol=1e-4, atol=1e-4)


def test_conv_depthwise_channel_blocks_same_bits_as_planes(tmp_path: Any) -> None:
    """The channel blocks sum each output's taps in the order the per-plane bodies do: the bits
    of the AVX2 bodies (AVX-512 forced off in a child) on every case."""
    import os

    code = (
        "import importlib.util, sys\n"
        "import numpy as np\n"
        f"sys.path.insert(0, {os.path.dirname(os.path.dirname(__file__))!r})\n"
        f"spec = importlib.util.spec_from_file_location('tc', {__file__!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "for i in range(len(m.DW_BLOCK_CASES)):\n"
        f"    np.save({str(tmp_path)!r} + f'/{{i}}.npy', m._dw_block_case(i, True))\n")
    r = run_child(code, {"MILKIT_NO_AVX512": "1"})
    assert r.returncode == 0, r.stderr[-2000:]
    for i in range(len(DW_BLOCK_CASES)):
        planes = np.load(tmp_path / f"{i}.npy")
        np.testing.assert_array_equal(_dw_block_case(i, True).view(np.uint32), planes.view(np.uint32))


# 1x1 convs: up to 32 input channels per group conv.cpp's pointwise tiles (conv_direct.cpp's
# small-K kernel; tiles split over channels, and over pixels in large planes), BLAS above; 1x1
# images (squeeze-and-excite) as matrix-vector products. Columns narrower than a vector, not a
# multiple of it, rows not a multiple of the register block, groups, batches.
POINTWISE_CASES = [
    ((1, 16, 37, 41), 24, 1),
    ((2, 32, 9, 7), 13, 1),
    ((1, 33, 5, 3), 17, 1),
    ((1, 8, 1, 3), 9, 1),
    ((2, 12, 20, 20), 18, 3),
    ((1, 16, 64, 64), 64, 1),
    ((1, 24, 90, 90), 40, 1),
    ((1, 160, 7, 7), 960, 1),
    ((1, 672, 14, 14), 112, 1),
    ((1, 960, 7, 7), 160, 1),  # the narrow last panel over two blocks of k
    ((1, 1100, 2, 2), 20, 1),  # 4 pixels: one narrow panel, three blocks of k
    ((1, 240, 1, 1), 960, 1),
    ((3, 40, 1, 1), 10, 1),
    ((4, 33, 1, 1), 70, 1),
    ((6, 40, 1, 1), 24, 1),  # more images than a matrix-vector product takes: BLAS
    ((2, 24, 1, 1), 12, 4),
]


@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("xs, cout, groups", POINTWISE_CASES)
def test_conv_pointwise(xs: tuple, cout: int, groups: int, with_bias: bool) -> None:
    """1x1 convs give torch's values; the pointwise tiles and the matrix-vector products give the
    same bits at 1, 2 and 3 threads (their blocks depend on the shape only)."""
    x, w, b = rand(*xs, seed=60), rand(cout, xs[1] // groups, 1, 1, seed=61), rand(cout, seed=62)
    bias = {"bias": b} if with_bias else {}
    outs = at_threads(lambda: run_op("conv", {"x": x}, weight=w, groups=groups, pad_type="valid", **bias)[0])
    if xs[1] // groups <= 32 or (xs[2] * xs[3] == 1 and xs[0] <= 4):
        for got in outs[1:]:
            np.testing.assert_array_equal(got.view(np.uint32), outs[0].view(np.uint32))
    want = F.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b) if with_bias else None, groups=groups)
    assert_close(outs[0], want.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("xs, cout", [((1, 240, 1, 1), 960), ((3, 64, 1, 1), 300), ((2, 16, 9, 13), 40),
                                      ((1, 96, 14, 14), 200)])
def test_conv_pointwise_fp16(xs: tuple, cout: int) -> None:
    """fp16 1x1 convs (the weight read in place or decoded for the call) against the fp32 conv."""
    x, w, b = rand(*xs, dtype=np.float16, seed=63), rand(cout, xs[1], 1, 1, dtype=np.float16, seed=64), \
        rand(cout, dtype=np.float16, seed=65)
    got = run_op("conv", {"x": x}, weight=w, bias=b, pad_type="valid")[0]
    want = ref_conv(x.astype(np.float32), w.astype(np.float32), b.astype(np.float32), [1, 1], [1, 1], 1, "valid",
                    None)
    assert got.dtype == np.float16
    assert_close(got, want.astype(np.float16), **F16)


@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("xs, ws, groups, s", [
    ((1, 16, 40, 40), (64, 16, 1, 1), 1, 1),  # pointwise tiles
    ((1, 16, 70, 70), (24, 16, 1, 1), 1, 1),  # pointwise tiles split over pixels
    ((1, 100, 14, 14), (200, 100, 1, 1), 1, 1),  # BLAS, the chain after it
    ((2, 8, 5, 5), (12, 8, 1, 1), 1, 1),
    ((1, 32, 21, 20), (32, 1, 3, 3), 32, 2),  # depthwise, the chain after the kernel
    ((2, 24, 9, 30), (48, 1, 5, 5), 24, 1),
    ((1, 3, 30, 31), (16, 3, 7, 7), 1, 2),  # stem, the chain after the kernel
])
def test_conv_fused_chain_in_kernels(dt: type, xs: tuple, ws: tuple, groups: int, s: int) -> None:
    """A hardswish chain fused into a conv (in its tiles, or over its whole output) gives the
    bits of the ops' own kernels (the conv's output also read elsewhere, so nothing fuses)."""
    x, w, b = rand(*xs, dtype=dt, lo=-2, hi=2, seed=66), rand(*ws, dtype=dt, seed=67), rand(ws[0], dtype=dt, seed=68)
    pad = [ws[2] // 2] * 4

    def chain(c: object) -> object:
        return mb.mul(x=c, y=mb.sigmoid_hard(x=c, alpha=1.0 / 6, beta=0.5))

    def conv(v: object) -> object:
        return mb.conv(x=v, weight=w, bias=b, groups=groups, strides=[s, s], pad_type="custom", pad=pad)

    (fused,) = run_prog(lambda v: chain(conv(v)), {"x": x})
    _, alone = run_prog(lambda v: (lambda c: (c, chain(c)))(conv(v)), {"x": x})
    np.testing.assert_array_equal(fused, alone)
    c = ref_conv(x.astype(np.float32), w.astype(np.float32), b.astype(np.float32), [s, s], [1, 1], groups, "custom",
                 pad)
    c = c.astype(dt).astype(np.float32)
    want = c * np.clip(c / 6 + 0.5, 0, 1)
    assert_close(fused, want.astype(dt), **(F16 if dt == np.float16 else {"rtol": 1e-4, "atol": 1e-4}))
