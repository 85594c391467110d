"""Interpreter kernels of the image resizing ops against torch.nn.functional (interpolate, grid_sample,
affine_grid), numpy references written from the ops' documented grids, and the expected values of coremltools'
own op tests (measured on Apple's runtime); fp32 and fp16, symbolic shapes, a save / load / predict round trip.

Grids (coremltools' resize_bilinear docs): over X input pixels sampled at N points, point i is
STRICT_ALIGN_CORNERS i (X - 1) / (N - 1); ALIGN_CORNERS the same but (X - 1) / 2 for N = 1; DEFAULT i X / N;
OFFSET_CORNERS (i + 0.5) max(1, X - 1) / N; UNALIGN_CORNERS (i + 0.5) X / N - 0.5; clamped to [0, X - 1].
torch's interpolate with align_corners=True is STRICT_ALIGN_CORNERS, with align_corners=False (and
recompute_scale_factor=True, as the upsample_bilinear docs say) UNALIGN_CORNERS.

Nearest neighbor is not pinned down by the MIL docs: upsample_nearest_neighbor follows torch's interpolate with a
scale factor (the torch frontend maps it 1:1), resize_nearest_neighbor and resize(NEAREST_NEIGHBOR, DEFAULT) use
half-pixel centers (tf's half_pixel_centers=True, which coremltools' TensorFlow frontend lowers to both; torch's
"nearest-exact"); coremltools' test of resize(NEAREST_NEIGHBOR) (2 -> 3 gives [a, b, b]) agrees and rules out the
legacy floor(i X / N) ([a, a, b])."""

from __future__ import annotations

import warnings
from typing import Any

import milkit as ct
import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from milkit import Builder as mb
from milkit import types
from support.exec_util import assert_close, rand, run_op, run_prog

F32 = np.float32
F16 = {"rtol": 3e-3, "atol": 3e-3}
MODES = ["STRICT_ALIGN_CORNERS", "ALIGN_CORNERS", "UNALIGN_CORNERS", "DEFAULT", "OFFSET_CORNERS"]


def t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))


def tol(dtype: Any) -> dict:
    return F16 if np.dtype(dtype) == np.float16 else {"rtol": 1e-5, "atol": 1e-5}


# ---------------------------------------------------------------------------------------------
# numpy references


def grid(mode: str, n: int, length: float) -> np.ndarray:
    """Grid points of `mode` for n outputs over [0, length] (an input of length + 1 pixels)."""
    i = np.arange(n, dtype=np.float64)
    x = length + 1
    if mode in ("STRICT_ALIGN_CORNERS", "ALIGN_CORNERS"):
        g = i * length / (n - 1) if n > 1 else np.full(n, length / 2 if mode == "ALIGN_CORNERS" else 0.0)
    elif mode == "DEFAULT":
        g = i * x / n
    elif mode == "OFFSET_CORNERS":
        d = max(1.0, length) / n
        g = 0.5 * d + i * d
    else:
        g = (i + 0.5) * x / n - 0.5
    return np.clip(g, 0, length)


def interp(x: np.ndarray, axis: int, g: np.ndarray) -> np.ndarray:
    """Linear interpolation of x along `axis` at positions g in [0, n - 1]."""
    n = x.shape[axis]
    lo = np.minimum(np.floor(g).astype(np.int64), n - 1)
    hi = np.minimum(lo + 1, n - 1)
    shape = [1] * x.ndim
    shape[axis] = -1
    w = (g - lo).reshape(shape)
    return np.take(x, lo, axis) * (1 - w) + np.take(x, hi, axis) * w


def ref_resize(x: np.ndarray, sizes: list[int], mode: str) -> np.ndarray:
    """Linear resize of the last len(sizes) dims of x."""
    y = x.astype(np.float64)
    for k, n in enumerate(sizes):
        axis = x.ndim - len(sizes) + k
        y = interp(y, axis, grid(mode, n, x.shape[axis] - 1))
    return y


def ref_nearest(x: np.ndarray, sizes: list[int], mode: str) -> np.ndarray:
    y = x
    for k, n in enumerate(sizes):
        axis = x.ndim - len(sizes) + k
        m = x.shape[axis]
        if mode in ("DEFAULT", "UNALIGN_CORNERS"):
            idx = np.floor((np.arange(n) + 0.5) * (m / n))
        else:  # the grid point rounded half away from zero
            idx = np.floor(grid(mode, n, m - 1) + 0.5)
        y = np.take(y, np.minimum(idx.astype(np.int64), m - 1), axis)
    return y


# ---------------------------------------------------------------------------------------------
# upsample_nearest_neighbor, upsample_bilinear


@pytest.mark.parametrize("scales", [(2, 3), (1, 1), (2.5, 1.5), (0.5, 0.75), (3.0, 2.0), (1.25, 0.4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_upsample_nearest_neighbor(scales: tuple, dtype: Any) -> None:
    x = rand(2, 3, 6, 7, dtype=dtype)
    sh, sw = (F32(s) if isinstance(s, float) else s for s in scales)
    (y,) = run_op("upsample_nearest_neighbor", {"x": x}, scale_factor_height=sh, scale_factor_width=sw)
    want = TF.interpolate(t(x), scale_factor=(float(sh), float(sw)), mode="nearest").numpy()
    assert y.dtype == dtype
    assert_close(y, want.astype(dtype), **tol(dtype))


def test_upsample_nearest_neighbor_coremltools_case() -> None:
    x = np.array([1.5, 2.5, 3.5], F32).reshape(1, 1, 1, 3)
    (y,) = run_op("upsample_nearest_neighbor", {"x": x}, scale_factor_height=1, scale_factor_width=2)
    assert_close(y, np.array([1.5, 1.5, 2.5, 2.5, 3.5, 3.5], F32).reshape(1, 1, 1, 6))


@pytest.mark.parametrize("scales", [(2, 3), (2.5, 1.5), (0.5, 0.75), (1.7, 2.6), (1, 1)])
@pytest.mark.parametrize("align_corners", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_upsample_bilinear(scales: tuple, align_corners: bool, dtype: Any) -> None:
    x = rand(2, 3, 5, 6, dtype=dtype)
    sh, sw = (F32(s) if isinstance(s, float) else s for s in scales)
    (y,) = run_op("upsample_bilinear", {"x": x}, scale_factor_height=sh, scale_factor_width=sw,
                  align_corners=align_corners)
    want = TF.interpolate(t(x), scale_factor=(float(sh), float(sw)), mode="bilinear", align_corners=align_corners,
                          recompute_scale_factor=True).numpy()
    assert_close(y, want.astype(dtype), **tol(dtype))


def test_upsample_bilinear_half_pixel_centers() -> None:
    x = rand(1, 2, 5, 6)
    for ac, hpc, mode in [(False, True, "UNALIGN_CORNERS"), (False, False, "DEFAULT"), (True, False, "STRICT_ALIGN_CORNERS")]:
        (y,) = run_op("upsample_bilinear", {"x": x}, opset=ct.target.iOS16, scale_factor_height=F32(1.6),
                      scale_factor_width=F32(3), align_corners=ac, half_pixel_centers=hpc)
        assert y.shape == (1, 2, 8, 18)
        assert_close(y, ref_resize(x, [8, 18], mode).astype(F32))
    with pytest.raises(ValueError, match=r"upsample_bilinear.*align_corners and half_pixel_centers"):
        run_op("upsample_bilinear", {"x": x}, opset=ct.target.iOS16, align_corners=True, half_pixel_centers=True)


def test_upsample_bilinear_coremltools_cases() -> None:
    x = np.array([0, 1], F32).reshape(1, 1, 2)
    (y,) = run_op("upsample_bilinear", {"x": x}, scale_factor_height=1, scale_factor_width=3, align_corners=True)
    assert_close(y, np.array([0, 0.2, 0.4, 0.6, 0.8, 1], F32).reshape(1, 1, 6))
    (y,) = run_op("upsample_bilinear", {"x": x}, scale_factor_height=F32(1), scale_factor_width=F32(2.6),
                  align_corners=False)
    assert_close(y, np.array([0, 0.1, 0.5, 0.9, 1], F32).reshape(1, 1, 5))


# ---------------------------------------------------------------------------------------------
# resize_bilinear, resize_nearest_neighbor


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("size", [(9, 4), (1, 1), (6, 13), (2, 1)])
def test_resize_bilinear(mode: str, size: tuple) -> None:
    x = rand(2, 3, 5, 6)
    (y,) = run_op("resize_bilinear", {"x": x}, target_size_height=size[0], target_size_width=size[1],
                  sampling_mode=mode)
    assert_close(y, ref_resize(x, list(size), mode).astype(F32))
    if mode in ("STRICT_ALIGN_CORNERS", "UNALIGN_CORNERS"):
        want = TF.interpolate(t(x), size=size, mode="bilinear", align_corners=mode == "STRICT_ALIGN_CORNERS")
        assert_close(y, want.numpy())


# the grid points of coremltools' resize_bilinear docs for Xin = 2 (x = [0, 1] samples the grid itself)
DOCUMENTED_GRIDS = {
    ("UNALIGN_CORNERS", 5): [0., 0.1, 0.5, 0.9, 1.], ("STRICT_ALIGN_CORNERS", 5): [0., 0.25, 0.5, 0.75, 1.],
    ("ALIGN_CORNERS", 5): [0., 0.25, 0.5, 0.75, 1.], ("DEFAULT", 5): [0., 0.4, 0.8, 1., 1.],
    ("OFFSET_CORNERS", 5): [0.1, 0.3, 0.5, 0.7, 0.9],
    ("UNALIGN_CORNERS", 6): [0., 0., 1 / 3, 2 / 3, 1., 1.], ("STRICT_ALIGN_CORNERS", 6): [0., 0.2, 0.4, 0.6, 0.8, 1.],
    ("DEFAULT", 6): [0., 1 / 3, 2 / 3, 1., 1., 1.], ("OFFSET_CORNERS", 6): [1 / 12, 0.25, 5 / 12, 7 / 12, 0.75, 11 / 12],
    ("ALIGN_CORNERS", 1): [0.5], ("STRICT_ALIGN_CORNERS", 1): [0.0],
}


@pytest.mark.parametrize("mode,n", list(DOCUMENTED_GRIDS), ids=[f"{m}-{n}" for m, n in DOCUMENTED_GRIDS])
def test_resize_bilinear_documented_grids(mode: str, n: int) -> None:
    x = np.array([0, 1], F32).reshape(1, 1, 2)
    want = DOCUMENTED_GRIDS[(mode, n)]
    (y,) = run_op("resize_bilinear", {"x": x}, target_size_height=1, target_size_width=n, sampling_mode=mode)
    assert_close(y.ravel(), np.array(want, F32))


def test_resize_bilinear_fp16_and_rank() -> None:
    x = rand(3, 5, 4, dtype=np.float16)
    (y,) = run_op("resize_bilinear", {"x": x}, target_size_height=7, target_size_width=3, sampling_mode="DEFAULT")
    assert y.dtype == np.float16
    assert_close(y, ref_resize(x.astype(F32), [7, 3], "DEFAULT").astype(np.float16), **F16)
    x = rand(2, 1, 2, 4, 5)
    (y,) = run_op("resize_bilinear", {"x": x}, target_size_height=3, target_size_width=8, sampling_mode="OFFSET_CORNERS")
    assert_close(y, ref_resize(x, [3, 8], "OFFSET_CORNERS").astype(F32))


@pytest.mark.parametrize("size", [(9, 4), (1, 1), (6, 13), (2, 3), (5, 6)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_resize_nearest_neighbor(size: tuple, dtype: Any) -> None:
    x = rand(2, 3, 5, 6, dtype=dtype)
    (y,) = run_op("resize_nearest_neighbor", {"x": x}, target_size_height=size[0], target_size_width=size[1])
    assert_close(y, TF.interpolate(t(x), size=size, mode="nearest-exact").numpy().astype(dtype))
    assert_close(y, ref_nearest(x, list(size), "DEFAULT"))


def test_resize_nearest_neighbor_coremltools_case() -> None:
    x = np.array([0.37, 6.17], F32).reshape(1, 1, 2, 1)
    (y,) = run_op("resize_nearest_neighbor", {"x": x}, target_size_height=2, target_size_width=3)
    assert_close(y, np.array([0.37, 0.37, 0.37, 6.17, 6.17, 6.17], F32).reshape(1, 1, 2, 3))


# ---------------------------------------------------------------------------------------------
# resize (iOS17)


U32 = np.uint32


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("interp_mode", ["LINEAR", "NEAREST_NEIGHBOR"])
def test_resize_modes(mode: str, interp_mode: str) -> None:
    x = rand(2, 3, 5, 6)
    for sizes in ([7, 4], [1, 9], [10, 12], [2, 3]):
        (y,) = run_op("resize", {"x": x}, shape=np.array(sizes, np.int32), resized_dims=U32(2),
                      interpolation_mode=interp_mode, sampling_mode=mode)
        want = ref_resize(x, sizes, mode) if interp_mode == "LINEAR" else ref_nearest(x, sizes, mode)
        assert_close(y, want.astype(F32))


def test_resize_torch_1d_3d() -> None:
    x = rand(2, 3, 4, 5, 6)
    for rd, sizes, tm in [(1, [11], "linear"), (3, [3, 7, 2], "trilinear")]:
        for mode, ac in [("STRICT_ALIGN_CORNERS", True), ("UNALIGN_CORNERS", False)]:
            (y,) = run_op("resize", {"x": x}, shape=np.array([0] * (3 - rd) + sizes, np.int32), resized_dims=U32(rd),
                          sampling_mode=mode)
            xt = t(x).reshape(-1, 1, 6) if rd == 1 else t(x)
            want = TF.interpolate(xt, size=sizes, mode=tm, align_corners=ac).reshape(y.shape)
            assert_close(y, want.numpy())
    (y,) = run_op("resize", {"x": x}, shape=np.array([3, 7, 2], np.int32), resized_dims=U32(3),
                  interpolation_mode="NEAREST_NEIGHBOR")
    assert_close(y, TF.interpolate(t(x), size=[3, 7, 2], mode="nearest-exact").numpy())


def test_resize_coremltools_cases() -> None:
    x = np.array([-6.174, 9.371], F32).reshape(1, 1, 1, 2, 1)
    (y,) = run_op("resize", {"x": x}, shape=np.array([1, 1, 3, 2], np.int32), resized_dims=U32(2),
                  interpolation_mode="NEAREST_NEIGHBOR")
    assert_close(y, np.array([-6.174, -6.174, 9.371, 9.371, 9.371, 9.371], F32).reshape(1, 1, 1, 3, 2))
    x = np.array([0, 1], F32).reshape(1, 1, 2)
    (y,) = run_op("resize", {"x": x}, shape=np.array([1, 5], np.int32), resized_dims=U32(2))
    assert_close(y, np.array([0, 0.4, 0.8, 1, 1], F32).reshape(1, 1, 5))
    x = np.array([-6.174, 9.371], F32).reshape(1, 1, 1, 2, 1)
    for m in ["LINEAR", "NEAREST_NEIGHBOR"]:  # 0 keeps a dim
        (y,) = run_op("resize", {"x": x}, shape=np.array([0, 0, 0], np.int32), resized_dims=U32(3), interpolation_mode=m)
        assert_close(y, x)


def test_resize_dynamic_shape_int32_fp16() -> None:
    x = rand(1, 2, 4, 5)
    for sizes in ([3, 8], [0, 2], [9, 0]):
        s = np.array(sizes, np.int32)
        (y,) = run_op("resize", {"x": x, "shape": s}, resized_dims=U32(2))
        full = [4 if v == 0 and i == 0 else 5 if v == 0 else v for i, v in enumerate(sizes)]
        assert_close(y, ref_resize(x, full, "DEFAULT").astype(F32))
    (y,) = run_op("resize", {"x": x, "shape": np.array([3, 8], np.int32)}, symbolic=True, resized_dims=U32(2),
                  sampling_mode="UNALIGN_CORNERS")
    assert_close(y, TF.interpolate(t(x), size=(3, 8), mode="bilinear", align_corners=False).numpy())
    xi = (rand(1, 2, 4, 5) * 100).astype(np.int32)
    (y,) = run_op("resize", {"x": xi}, shape=np.array([7, 3], np.uint16), resized_dims=U32(2))
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, np.rint(ref_resize(xi, [7, 3], "DEFAULT")).astype(np.int32))
    xh = rand(1, 2, 4, 5, dtype=np.float16)
    (y,) = run_op("resize", {"x": xh}, shape=np.array([6, 2], np.int16), resized_dims=U32(2),
                  interpolation_mode="NEAREST_NEIGHBOR")
    assert y.dtype == np.float16
    assert_close(y, ref_nearest(xh, [6, 2], "DEFAULT"))
    with pytest.raises(ValueError, match=r"resize.*negative"):
        run_op("resize", {"x": x, "shape": np.array([-3, 2], np.int32)}, resized_dims=U32(2))
    with pytest.raises(ValueError, match=r"resize.*more than the rank of x"):
        run_op("resize", {"x": rand(4, 5), "shape": np.array([1, 3, 2], np.int32)}, resized_dims=U32(2))


# ---------------------------------------------------------------------------------------------
# crop


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_crop(dtype: Any) -> None:
    x = rand(2, 3, 6, 7, dtype=dtype)
    for ch, cw in [([0, 1], [1, 1]), ([2, 3], [0, 0]), ([0, 0], [6, 0]), ([3, 3], [0, 1])]:
        (y,) = run_op("crop", {"x": x}, crop_height=ch, crop_width=cw)
        np.testing.assert_array_equal(y, x[..., ch[0]:6 - ch[1], cw[0]:7 - cw[1]])
    (y,) = run_op("crop", {"x": x}, symbolic=True, crop_height=[1, 2], crop_width=[2, 1])
    np.testing.assert_array_equal(y, x[..., 1:4, 2:6])
    x = np.arange(1, 17, dtype=F32).reshape(1, 1, 4, 4)
    (y,) = run_op("crop", {"x": x}, crop_height=[0, 1], crop_width=[1, 1])  # coremltools' test
    np.testing.assert_array_equal(y, np.array([2, 3, 6, 7, 10, 11], F32).reshape(1, 1, 3, 2))
    with pytest.raises(ValueError, match=r"crop.*do not fit"):
        run_op("crop", {"x": rand(1, 4, 5)}, symbolic=True, crop_height=[3, 3], crop_width=[0, 0])


# ---------------------------------------------------------------------------------------------
# crop_resize


def corners(b: np.ndarray, box_mode: str) -> tuple:
    if box_mode == "CORNERS_HEIGHT_FIRST":
        return b[0], b[1], b[2], b[3]
    if box_mode == "CORNERS_WIDTH_FIRST":
        return b[1], b[0], b[3], b[2]
    if box_mode == "CENTER_SIZE_HEIGHT_FIRST":
        return b[0] - b[2] / 2, b[1] - b[3] / 2, b[0] + b[2] / 2, b[1] + b[3] / 2
    return b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2


def box_grid(mode: str, n: int, s: float, e: float) -> np.ndarray:
    """The box from s to e stands for [0, X - 1], X - 1 = e - s; a reversed box samples the mirrored grid."""
    return s + np.sign(e - s or 1) * grid(mode, n, abs(e - s))


def bilinear_at(img: np.ndarray, y: float, x: float, pad: float) -> np.ndarray:
    """img [C, H, W] at (y, x); pad_value outside [0, H - 1] x [0, W - 1] (tf.image.crop_and_resize)."""
    H, W = img.shape[1:]
    if not (0 <= y <= H - 1 and 0 <= x <= W - 1):
        return np.full(img.shape[0], pad)
    y0, x0 = min(int(np.floor(y)), H - 1), min(int(np.floor(x)), W - 1)
    y1, x1 = min(y0 + 1, H - 1), min(x0 + 1, W - 1)
    wy, wx = y - y0, x - x0
    top = img[:, y0, x0] * (1 - wx) + img[:, y0, x1] * wx
    bot = img[:, y1, x0] * (1 - wx) + img[:, y1, x1] * wx
    return top * (1 - wy) + bot * wy


def ref_crop_resize(x: np.ndarray, boxes: np.ndarray, bidx: list, th: int, tw: int, mode: str = "DEFAULT",
                    box_mode: str = "CORNERS_HEIGHT_FIRST", normalized: bool = False, scale: float = 1.0,
                    pad: float = 0.0) -> np.ndarray:
    """[N, C, th, tw]: box n of image bidx[n]."""
    x = x.astype(np.float64)
    H, W = x.shape[2:]
    out = np.zeros((len(boxes), x.shape[1], th, tw))
    for n, b in enumerate(boxes.astype(np.float64)):
        h0, w0, h1, w1 = (v * scale for v in corners(b, box_mode))
        if normalized:
            h0, h1, w0, w1 = h0 * (H - 1), h1 * (H - 1), w0 * (W - 1), w1 * (W - 1)
        for i, gy in enumerate(box_grid(mode, th, h0, h1)):
            for j, gx in enumerate(box_grid(mode, tw, w0, w1)):
                out[n, :, i, j] = bilinear_at(x[bidx[n]], gy, gx, pad)
    return out


def test_crop_resize_coremltools_cases() -> None:
    # coremltools' TestCropResize (iOS15 roi), expected values from Apple's runtime
    x = np.arange(1, 17, dtype=F32).reshape(1, 1, 4, 4)
    roi = np.array([1, 1, 2, 2], F32).reshape(1, 1, 4, 1, 1)
    cases = [
        (roi, 2, False, [6, 7, 10, 11]),
        (roi, 4, False, [6, 6.333333, 6.666666, 7, 7.333333, 7.666666, 8, 8.333333, 8.666666, 9, 9.333333, 9.666666, 10,
                         10.333333, 10.666666, 11]),
        (roi, 1, False, [8.5]),
        (np.array([0, 0, 0, 1 / 3, 1 / 3], F32).reshape(1, 1, 5, 1, 1), 2, True, [1, 2, 5, 6]),
        (np.array([2, 2, 1, 1], F32).reshape(1, 1, 4, 1, 1), 2, False, [11, 10, 7, 6]),
    ]
    for r, n, norm, want in cases:
        y = run_prog(lambda x: mb.crop_resize(x=x, roi=r, target_height=n, target_width=n, normalized_coordinates=norm,
                                              sampling_mode="ALIGN_CORNERS"), {"x": x}, opset=ct.target.iOS15)[0]
        assert_close(y, np.array(want, F32).reshape(1, 1, 1, n, n), rtol=1e-5)
    # iOS17 test: one box and three
    boxes = np.array([[1, 1, 2, 2], [0, 0, 1, 1], [2, 2, 3, 3]], F32)
    (y,) = run_prog(lambda x: mb.crop_resize(x=x, boxes=boxes, box_indices=np.zeros(3, np.int32), target_height=2,
                                             target_width=2, sampling_mode="ALIGN_CORNERS"), {"x": x})
    want = np.array([[6, 7, 10, 11], [1, 2, 5, 6], [11, 12, 15, 16]], F32).reshape(3, 1, 2, 2)
    assert_close(y, want)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("box_mode", ["CORNERS_HEIGHT_FIRST", "CORNERS_WIDTH_FIRST", "CENTER_SIZE_HEIGHT_FIRST",
                                      "CENTER_SIZE_WIDTH_FIRST"])
def test_crop_resize_boxes(mode: str, box_mode: str) -> None:
    x = rand(2, 3, 6, 7)
    boxes = np.array([[1, 1, 4, 5], [0.3, 0.5, 2.5, 6], [4.5, 3, 1.2, 0.5], [-1, 2, 7, 9]], F32)
    bidx = [1, 0, 1, 0]
    (y,) = run_prog(lambda x: mb.crop_resize(x=x, boxes=boxes, box_indices=np.array(bidx, np.int32), target_height=3,
                                             target_width=5, sampling_mode=mode, box_coordinate_mode=box_mode,
                                             pad_value=F32(-2)), {"x": x})
    assert_close(y, ref_crop_resize(x, boxes, bidx, 3, 5, mode, box_mode, pad=-2).astype(F32))


def test_crop_resize_tf_crop_and_resize() -> None:
    """tf.image.crop_and_resize (bilinear) as coremltools' TensorFlow frontend converts it: normalized boxes,
    ALIGN_CORNERS, extrapolation_value -> pad_value; the formula from tf's documentation."""
    x = rand(2, 3, 6, 7)
    boxes = np.array([[0.1, 0.2, 0.8, 0.9], [0.5, -0.3, 1.2, 0.6], [0.0, 0.0, 1.0, 1.0]], F32)
    bidx = np.array([1, 0, 0], np.int32)
    H, W = 6, 7
    for ch, cw in [(4, 5), (1, 3)]:
        (y,) = run_prog(lambda x: mb.crop_resize(x=x, boxes=boxes, box_indices=bidx, target_height=ch, target_width=cw,
                                                 normalized_coordinates=True, sampling_mode="ALIGN_CORNERS",
                                                 pad_value=F32(0.25)), {"x": x})
        want = np.zeros((3, 3, ch, cw))
        for n, (y1, x1, y2, x2) in enumerate(boxes.astype(np.float64)):
            for i in range(ch):
                iy = y1 * (H - 1) + i * (y2 - y1) * (H - 1) / (ch - 1) if ch > 1 else 0.5 * (y1 + y2) * (H - 1)
                for j in range(cw):
                    ix = x1 * (W - 1) + j * (x2 - x1) * (W - 1) / (cw - 1) if cw > 1 else 0.5 * (x1 + x2) * (W - 1)
                    want[n, :, i, j] = bilinear_at(x[bidx[n]].astype(np.float64), iy, ix, 0.25)
        assert_close(y, want.astype(F32))


def test_crop_resize_roi_align() -> None:
    """Core ML's CropResize note: RoI Align is crop_resize (OFFSET_CORNERS) followed by average pooling. The
    reference is RoI Align's sampling (torchvision's roi_align, aligned=False) written out for boxes inside the
    image: bin = max(roi_size, 1) / pooled, samples at start + (p + (k + 0.5) / ratio) * bin, averaged. (Boxes
    under a pixel differ: RoI Align samples past their end, crop_resize clamps every grid to its box.)"""
    x = rand(1, 2, 9, 10)
    rois = np.array([[1.2, 0.5, 6.8, 7.1], [2, 3, 3.5, 4.25], [0, 0, 8, 9]], F32)  # x1, y1, x2, y2 (torchvision)
    pooled, ratio, scale = 2, 2, 0.9

    def prog(x: Any) -> Any:
        boxes = rois[:, [1, 0, 3, 2]]  # CORNERS_HEIGHT_FIRST
        c = mb.crop_resize(x=x, boxes=boxes, box_indices=np.zeros(3, np.int32), target_height=pooled * ratio,
                           target_width=pooled * ratio, spatial_scale=F32(scale), sampling_mode="OFFSET_CORNERS")
        return mb.avg_pool(x=c, kernel_sizes=[ratio, ratio], strides=[ratio, ratio], pad_type="valid")

    (y,) = run_prog(prog, {"x": x})
    want = np.zeros((3, 2, pooled, pooled))
    xd = x[0].astype(np.float64)
    for n, (x1, y1, x2, y2) in enumerate(rois.astype(np.float64) * scale):
        bh, bw = max(y2 - y1, 1) / pooled, max(x2 - x1, 1) / pooled
        for ph in range(pooled):
            for pw in range(pooled):
                acc = 0
                for iy in range(ratio):
                    for ix in range(ratio):
                        acc += bilinear_at(xd, y1 + (ph + (iy + 0.5) / ratio) * bh, x1 + (pw + (ix + 0.5) / ratio) * bw, 0)
                want[n, :, ph, pw] = acc / ratio**2
    assert_close(y, want.astype(F32))


def test_crop_resize_roi_versions_fp16_symbolic() -> None:
    x = rand(2, 3, 6, 7)
    roi4 = np.array([[1, 1, 4, 5], [0, 0.5, 2.5, 6]], F32)
    for opset in (ct.target.iOS15, ct.target.iOS16):
        # 4 coordinates: every box from every image -> [N, B, C, h, w]
        (y,) = run_prog(lambda x: mb.crop_resize(x=x, roi=roi4.reshape(2, 1, 4, 1, 1), target_height=3, target_width=2,
                                                 sampling_mode="UNALIGN_CORNERS"), {"x": x}, opset=opset)
        want = np.stack([ref_crop_resize(x, roi4, [b, b], 3, 2, "UNALIGN_CORNERS") for b in range(2)], axis=1)
        assert_close(y, want.astype(F32))
        # 5 coordinates: a batch index per box -> [N, 1, C, h, w]
        roi5 = np.concatenate([np.array([[1], [0]], F32), roi4], axis=1).reshape(2, 1, 5, 1, 1)
        (y,) = run_prog(lambda x: mb.crop_resize(x=x, roi=roi5, target_height=3, target_width=2), {"x": x}, opset=opset)
        assert_close(y, ref_crop_resize(x, roi4, [1, 0], 3, 2)[:, None].astype(F32))
    # the roi as a run-time input, fp16, pad_value
    xh = rand(2, 3, 6, 7, dtype=np.float16)
    r = np.array([[0, -1, 0, 5, 9]], np.float16).reshape(1, 1, 5, 1, 1)
    (y,) = run_op("crop_resize", {"x": xh, "roi": r}, opset=ct.target.iOS16, target_height=4, target_width=4,
                  pad_value=np.float16(3))
    assert y.dtype == np.float16
    want = ref_crop_resize(xh.astype(F32), r.reshape(1, 5)[:, 1:].astype(F32), [0], 4, 4, pad=3)[:, None]
    assert_close(y, want.astype(np.float16), **F16)
    # iOS17, symbolic shapes, boxes and indices at run time, uint16 boxes, default indices
    boxes = np.array([[1, 1, 4, 5], [0, 2, 2, 6]], F32)
    idx = np.array([1, 1], np.int32)
    (y,) = run_op("crop_resize", {"x": x, "boxes": boxes, "box_indices": idx}, target_height=2, target_width=3)
    assert_close(y, ref_crop_resize(x, boxes, [1, 1], 2, 3).astype(F32))
    (y,) = run_op("crop_resize", {"x": x}, symbolic=True, boxes=boxes.astype(np.uint16), target_height=2,
                  target_width=3, sampling_mode="OFFSET_CORNERS")
    assert_close(y, ref_crop_resize(x, boxes, [0, 1], 2, 3, "OFFSET_CORNERS").astype(F32))
    (y,) = run_op("crop_resize", {"x": x}, symbolic=True, boxes=boxes, box_indices=idx, target_height=2,
                  target_width=3)
    assert_close(y, ref_crop_resize(x, boxes, [1, 1], 2, 3).astype(F32))
    with pytest.raises(IndexError, match=r"crop_resize.*box_indices\[1\] = 2"):
        run_op("crop_resize", {"x": x, "boxes": boxes, "box_indices": np.array([0, 2], np.int32)})
    with pytest.raises(IndexError, match=r"crop_resize.*out of range"):
        run_op("crop_resize", {"x": x, "roi": np.array([2, 0, 0, 1, 1], F32).reshape(1, 1, 5, 1, 1)},
               opset=ct.target.iOS16)


# ---------------------------------------------------------------------------------------------
# resample, affine


TORCH_PAD = {"constant": "zeros", "border": "border", "reflection": "reflection", "symmetric": "reflection"}


def torch_resample(x: np.ndarray, coords: np.ndarray, sampling: str, padding: str, value: float, cmode: str,
                   ac: bool) -> np.ndarray:
    """grid_sample on the pixel positions Core ML's modes give: reflection about pixel centers is torch's
    reflection with align_corners=True, about the edges ("symmetric") with align_corners=False; constant padding
    with value v is v + grid_sample(x - v) with zeros (the weights of a sample sum to 1)."""
    H, W = x.shape[2:]
    c = coords.astype(np.float64)
    sizes = np.array([W, H], np.float64)
    if cmode == "unnormalized":
        p = c
    elif cmode == "normalized_minus_one_to_one":
        p = (c + 1) / 2 * (sizes - 1) if ac else ((c + 1) * sizes - 1) / 2
    else:
        p = c * (sizes - 1) if ac else c * sizes - 0.5
    tac = padding != "symmetric"
    g = 2 * p / (sizes - 1) - 1 if tac else (2 * p + 1) / sizes - 1
    y = TF.grid_sample(t(x) - value, t(g), mode=sampling, padding_mode=TORCH_PAD[padding], align_corners=tac) + value
    return y.numpy()


@pytest.mark.parametrize("sampling", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding", ["constant", "border", "reflection", "symmetric"])
@pytest.mark.parametrize("cmode", ["normalized_minus_one_to_one", "normalized_zero_to_one", "unnormalized"])
@pytest.mark.parametrize("ac", [True, False])
def test_resample(sampling: str, padding: str, cmode: str, ac: bool) -> None:
    x = rand(2, 3, 5, 6)
    lo, hi = {"normalized_minus_one_to_one": (-1.6, 1.6), "normalized_zero_to_one": (-0.4, 1.4),
              "unnormalized": (-3.0, 8.0)}[cmode]
    coords = rand(2, 4, 7, 2, lo=lo, hi=hi, seed=1)
    value = 0.0 if padding != "constant" else -0.75
    (y,) = run_op("resample", {"x": x, "coordinates": coords}, sampling_mode=sampling, padding_mode=padding,
                  padding_value=F32(value), coordinates_mode=cmode, align_corners=ac)
    assert_close(y, torch_resample(x, coords, sampling, padding, value, cmode, ac), rtol=1e-4, atol=1e-5)


def test_resample_documented_padding() -> None:
    # the 1-d examples of the resample docs: |1, 2, 3| padded by 3 on each side
    x = np.array([1, 2, 3], F32).reshape(1, 1, 1, 3)
    c = np.stack([np.arange(-3, 6, dtype=F32), np.zeros(9, F32)], -1).reshape(1, 1, 9, 2)
    docs = {"constant": [0, 0, 0, 1, 2, 3, 0, 0, 0], "border": [1, 1, 1, 1, 2, 3, 3, 3, 3],
            "reflection": [2, 3, 2, 1, 2, 3, 2, 1, 2], "symmetric": [3, 2, 1, 1, 2, 3, 3, 2, 1]}
    for padding, want in docs.items():
        for sampling in ("bilinear", "nearest"):
            (y,) = run_op("resample", {"x": x, "coordinates": c}, sampling_mode=sampling, padding_mode=padding,
                          padding_value=F32(0), coordinates_mode="unnormalized", align_corners=True)
            assert_close(y.ravel(), np.array(want, F32))


@pytest.mark.parametrize("cdt", [np.float16, np.int32, np.int8, np.uint8, np.int16, np.uint16])
def test_resample_coordinate_dtypes_fp16_symbolic(cdt: Any) -> None:
    x = rand(1, 2, 5, 6, dtype=np.float16)
    coords = rand(1, 3, 4, 2, lo=0, hi=5, seed=2).astype(cdt)
    (y,) = run_op("resample", {"x": x, "coordinates": coords}, symbolic=True, sampling_mode="bilinear",
                  padding_mode="border", padding_value=np.float16(0), coordinates_mode="unnormalized",
                  align_corners=False)
    assert y.dtype == np.float16
    want = torch_resample(x.astype(F32), coords.astype(F32), "bilinear", "border", 0.0, "unnormalized", False)
    assert_close(y, want.astype(np.float16), **F16)


def test_resample_nan_and_far_coordinates() -> None:
    x = rand(1, 1, 3, 4)
    c = np.array([np.nan, 0, 1e30, 1, -1e30, -1e30, np.inf, 0], F32).reshape(1, 1, 4, 2)
    (y,) = run_op("resample", {"x": x, "coordinates": c}, sampling_mode="bilinear", padding_mode="constant",
                  padding_value=F32(7), coordinates_mode="unnormalized", align_corners=True)
    assert_close(y.ravel(), np.full(4, 7, F32))
    (y,) = run_op("resample", {"x": x, "coordinates": c}, sampling_mode="nearest", padding_mode="border",
                  padding_value=F32(7), coordinates_mode="unnormalized", align_corners=True)
    assert_close(y.ravel(), np.array([0, x[0, 0, 1, 3], x[0, 0, 0, 0], x[0, 0, 0, 3]], F32))


@pytest.mark.filterwarnings("ignore:Since version 1.3.0, affine_grid")  # torch: unit-size grids are 0 now
@pytest.mark.parametrize("ac", [True, False])
@pytest.mark.parametrize("rows", [1, 2])
@pytest.mark.parametrize("out", [(4, 5), (1, 3), (7, 1)])
def test_affine(ac: bool, rows: int, out: tuple) -> None:
    x = rand(2, 3, 5, 6)
    theta = np.array([[0.9, -0.3, 0.1, 0.4, 1.2, -0.2], [1.1, 0.2, -0.5, -0.1, 0.7, 0.3]], F32)[:rows]
    (y,) = run_op("affine", {"x": x, "transform_matrix": theta}, output_height=out[0], output_width=out[1],
                  sampling_mode="bilinear", padding_mode="constant", padding_value=F32(0),
                  coordinates_mode="normalized_minus_one_to_one", align_corners=ac)
    th = t(theta).reshape(rows, 2, 3).expand(2, 2, 3)
    g = TF.affine_grid(th, [2, 3, *out], align_corners=ac)
    want = TF.grid_sample(t(x), g, mode="bilinear", padding_mode="zeros", align_corners=ac)
    assert_close(y, want.numpy(), rtol=1e-4, atol=1e-5)


def test_affine_fp16_symbolic() -> None:
    x = rand(2, 3, 5, 6, dtype=np.float16)
    theta = np.array([[0.5, 0.1, 0.2, -0.3, 0.8, 0.0]], np.float16)
    (y,) = run_op("affine", {"x": x, "transform_matrix": theta}, symbolic=True, output_height=6, output_width=4,
                  sampling_mode="bilinear", padding_mode="constant", padding_value=np.float16(0),
                  coordinates_mode="normalized_minus_one_to_one", align_corners=False)
    assert y.dtype == np.float16
    g = TF.affine_grid(t(theta).reshape(1, 2, 3).expand(2, 2, 3), [2, 3, 6, 4], align_corners=False)
    want = TF.grid_sample(t(x), g, mode="bilinear", padding_mode="zeros", align_corners=False)
    assert_close(y, want.numpy().astype(np.float16), **F16)
    with pytest.raises(ValueError, match=r"affine.*transform_matrix must have shape"):
        run_op("affine", {"x": x, "transform_matrix": np.ones((3, 6), np.float16)}, symbolic=True, output_height=2,
               output_width=2, sampling_mode="bilinear", padding_mode="constant", padding_value=np.float16(0),
               coordinates_mode="normalized_minus_one_to_one", align_corners=True)


# ---------------------------------------------------------------------------------------------
# symbolic shapes and a package round trip


def test_symbolic_shapes_bind() -> None:
    x = rand(2, 3, 5, 6)
    (y,) = run_op("upsample_nearest_neighbor", {"x": x}, symbolic=True, scale_factor_height=2, scale_factor_width=3)
    assert_close(y, TF.interpolate(t(x), scale_factor=(2, 3), mode="nearest").numpy())
    (y,) = run_op("upsample_bilinear", {"x": x}, symbolic=True, scale_factor_height=F32(1.5), scale_factor_width=F32(0.5),
                  align_corners=False)
    assert_close(y, TF.interpolate(t(x), scale_factor=(1.5, 0.5), mode="bilinear", align_corners=False,
                                   recompute_scale_factor=True).numpy())
    (y,) = run_op("resize_bilinear", {"x": x}, symbolic=True, target_size_height=4, target_size_width=9,
                  sampling_mode="ALIGN_CORNERS")
    assert_close(y, ref_resize(x, [4, 9], "ALIGN_CORNERS").astype(F32))
    (y,) = run_op("resize_nearest_neighbor", {"x": x}, symbolic=True, target_size_height=8, target_size_width=2)
    assert_close(y, TF.interpolate(t(x), size=(8, 2), mode="nearest-exact").numpy())
    c = rand(2, 3, 4, 2, seed=3)
    (y,) = run_op("resample", {"x": x, "coordinates": c}, symbolic=True, sampling_mode="nearest",
                  padding_mode="reflection", padding_value=F32(0), coordinates_mode="normalized_minus_one_to_one",
                  align_corners=True)
    assert_close(y, TF.grid_sample(t(x), t(c), mode="nearest", padding_mode="reflection", align_corners=True).numpy())


def _all_image_ops(mb: Any, x: Any, c: Any, ios17: bool = True) -> tuple:
    boxes = np.array([[0, 1, 3, 4], [1, 1, 2, 5]], F32)
    if ios17:
        extra = (mb.resize(x=x, shape=np.array([4, 11], np.int32), resized_dims=U32(2),
                           interpolation_mode="NEAREST_NEIGHBOR", sampling_mode="UNALIGN_CORNERS"),
                 mb.crop_resize(x=x, boxes=boxes, box_indices=np.array([1, 0], np.int32), target_height=3,
                                target_width=2, box_coordinate_mode="CORNERS_WIDTH_FIRST", pad_value=F32(1)))
    else:
        roi = np.concatenate([np.array([[1], [0]], F32), boxes], 1).reshape(2, 1, 5, 1, 1)
        extra = (mb.crop_resize(x=x, roi=roi, target_height=3, target_width=2, box_coordinate_mode="CORNERS_WIDTH_FIRST"),)
    return (
        mb.upsample_nearest_neighbor(x=x, scale_factor_height=2, scale_factor_width=3),
        mb.upsample_bilinear(x=x, scale_factor_height=F32(1.5), scale_factor_width=F32(2), align_corners=False),
        mb.resize_nearest_neighbor(x=x, target_size_height=3, target_size_width=9),
        mb.resize_bilinear(x=x, target_size_height=7, target_size_width=2, sampling_mode="OFFSET_CORNERS"),
        *extra,
        mb.crop(x=x, crop_height=[1, 2], crop_width=[0, 3]),
        mb.resample(x=x, coordinates=c, sampling_mode="bilinear", padding_mode="symmetric", padding_value=F32(0),
                    coordinates_mode="normalized_zero_to_one", align_corners=False),
        mb.affine(x=x, transform_matrix=np.array([[0.8, 0.1, 0.0, -0.2, 1.1, 0.1]], F32), output_height=3,
                  output_width=4, sampling_mode="bilinear", padding_mode="constant", padding_value=F32(0),
                  coordinates_mode="normalized_minus_one_to_one", align_corners=True),
    )


@pytest.mark.parametrize("opset", ["iOS15", "iOS17"])
@pytest.mark.parametrize("precision", ["FLOAT32", "FLOAT16"])
def test_converts_like_coremltools(opset: str, precision: str) -> None:
    """DEFAULT pipeline: the same proto ops (types, names, inputs, outputs) as coremltools' convert; for FLOAT16 the
    fp16 pass must leave resample's coordinates alone where fp16 is not allowed (iOS15)."""
    from support.parity import _build, _ct, _make_symbols, reset_ct_names

    ctm, _, _, _ = _ct()
    specs = [((2, 3, 6, 7), "fp32"), ((2, 4, 5, 2), "fp32")]

    def build(mb: Any, x: Any, c: Any) -> tuple:
        return _all_image_ops(mb, x, c, ios17=opset == "iOS17")

    symtab = _make_symbols(specs)
    reset_ct_names()
    cp = _build("ct", build, specs, opset, symtab)
    mp = _build("mk", build, specs, opset, symtab)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = ctm.convert(cp, minimum_deployment_target=getattr(ctm.target, opset), skip_model_load=True,
                         compute_precision=getattr(ctm.precision, precision))
        mm = ct.convert(mp, minimum_deployment_target=getattr(ct.target, opset),
                        compute_precision=getattr(ct.precision, precision))

    def ops(model: Any) -> list:
        fn = model.get_spec().mlProgram.functions["main"]
        blk = fn.block_specializations[fn.opset]
        return [(o.type, [x.name for x in o.outputs], {k: [b.name for b in a.arguments] for k, a in o.inputs.items()})
                for o in blk.operations]

    assert ops(mm) == ops(cm)


@pytest.mark.parametrize("precision", ["FLOAT32", "FLOAT16"])
def test_package_round_trip(tmp_path: Any, precision: str) -> None:
    """convert + save + load + predict equals milkit.run on the program; coremltools' loader reads the package."""
    import coremltools
    from coremltools.converters.mil.frontend.milproto.load import load as milproto_to_pymil

    specs = [mb.TensorSpec(shape=(2, 3, 6, 7), dtype=types.fp32), mb.TensorSpec(shape=(2, 4, 5, 2), dtype=types.fp32)]

    @mb.program(input_specs=specs, opset_version=ct.target.iOS17)
    def prog(x: Any, c: Any) -> Any:
        return _all_image_ops(mb, x, c)

    feed = {"x": rand(2, 3, 6, 7), "c": rand(2, 4, 5, 2, lo=-0.2, hi=1.2, seed=5)}
    want = list(ct.run(prog, feed).values())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = ct.convert(prog, minimum_deployment_target=ct.target.iOS17,
                           compute_precision=getattr(ct.precision, precision))
    path = str(tmp_path / "img.mlpackage")
    model.save(path)
    back = ct.models.MLModel(path)
    got = list(back.predict(feed).values())
    tl = {"rtol": 1e-5, "atol": 1e-5} if precision == "FLOAT32" else {"rtol": 1e-2, "atol": 1e-2}
    assert len(got) == len(want) == 9
    for g, w in zip(got, want):
        assert_close(g.astype(F32), w, **tl)
    loaded = ct.load(path)
    loaded.validate()
    types_used = {op.op_type for op in loaded.find_ops()} - {"const", "cast"}
    assert types_used == {"upsample_nearest_neighbor", "upsample_bilinear", "resize_nearest_neighbor",
                          "resize_bilinear", "resize", "crop", "crop_resize", "resample", "affine"}
    m = coremltools.models.MLModel(path, skip_model_load=True)
    spec = m.get_spec()
    back_ct = milproto_to_pymil(spec, spec.specificationVersion, m.weights_dir)
    assert {op.op_type for op in back_ct.functions["main"].operations} >= types_used
    for a, b in zip(back_ct.functions["main"].outputs, loaded.functions["main"].outputs):
        assert tuple(a.shape) == tuple(b.shape)


@pytest.mark.parametrize("opset", ["iOS15", "iOS17"])
def test_text_round_trip(opset: str) -> None:
    from milkit import text

    specs = [mb.TensorSpec(shape=(2, 3, 6, 7), dtype=types.fp32), mb.TensorSpec(shape=(2, 4, 5, 2), dtype=types.fp32)]

    @mb.program(input_specs=specs, opset_version=getattr(ct.target, opset))
    def prog(x: Any, c: Any) -> Any:
        return _all_image_ops(mb, x, c, ios17=opset == "iOS17")

    s = text.to_text(prog, consts=True)
    back = text.parse(s)
    assert text.to_text(back, consts=True) == s
    feed = {"x": rand(2, 3, 6, 7), "c": rand(2, 4, 5, 2, seed=4)}
    for a, b in zip(ct.run(prog, feed).values(), ct.run(back, feed).values()):
        np.testing.assert_array_equal(a, b)
