"""Parity of the image resizing ops with coremltools at every opset (iOS15-iOS18): upsample_nearest_neighbor,
upsample_bilinear, resize_nearest_neighbor, resize_bilinear, resize (iOS17), crop, crop_resize (three versions),
resample (three versions) and affine. Inputs, defaults, dtypes, output types (symbolic dims included) and errors;
then the places where milkit deliberately differs from coremltools, each pinned with its reason."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import pytest
from support.parity import ALL_OPSETS, _build, _make_symbols, check, check_error, reset_ct_names
from support.symeval import assert_exact

F = np.float32
SAMPLING = ["STRICT_ALIGN_CORNERS", "ALIGN_CORNERS", "UNALIGN_CORNERS", "DEFAULT", "OFFSET_CORNERS"]
BOX_MODES = ["CORNERS_HEIGHT_FIRST", "CORNERS_WIDTH_FIRST", "CENTER_SIZE_HEIGHT_FIRST", "CENTER_SIZE_WIDTH_FIRST"]
X4 = [((2, 3, 6, 7), "fp32")]
XSYM = [(("B", 3, "H", "W"), "fp32")]


def pinned(build: Callable, specs: Sequence, opset: str = "iOS17", match: str = "") -> Exception:
    """coremltools accepts the program, milkit rejects it with an error naming the op."""
    symtab = _make_symbols(specs)
    reset_ct_names()
    _build("ct", build, specs, opset, symtab)  # must not raise
    with pytest.raises(Exception, match=match) as e:
        _build("mk", build, specs, opset, symtab)
    return e.value


def out_shape(res: Any, op: str) -> tuple:
    ops = res.mk_prog.find_ops(op_type=op)
    assert ops, op
    return tuple(ops[-1].outputs[0].shape)


# ---------------------------------------------------------------------------------------------
# upsample_nearest_neighbor, upsample_bilinear


@pytest.mark.parametrize("op", ["upsample_nearest_neighbor", "upsample_bilinear"])
@pytest.mark.parametrize("kw", [
    {},
    dict(scale_factor_height=2, scale_factor_width=3),
    dict(scale_factor_height=2.5, scale_factor_width=1.5),
    dict(scale_factor_height=0.5, scale_factor_width=0.75),
    dict(scale_factor_height=2.6),   # the width keeps its int32 default: defaults skip the domain check
    dict(scale_factor_width=F(1.3)),
])
def test_upsample(op, kw):
    check(lambda mb, x: getattr(mb, op)(x=x, **kw), X4, ALL_OPSETS)
    check(lambda mb, x: getattr(mb, op)(x=x, **kw), [((3, 5, 4), "fp16")], ALL_OPSETS)
    check(lambda mb, x: getattr(mb, op)(x=x, **kw), [((1, 2, 3, 5, 4), "fp32")], ["iOS16"])


@pytest.mark.parametrize("kw", [dict(align_corners=True), dict(align_corners=False)])
def test_upsample_bilinear_align_corners(kw):
    check(lambda mb, x: mb.upsample_bilinear(x=x, scale_factor_height=2, scale_factor_width=2, **kw), X4, ALL_OPSETS)


@pytest.mark.parametrize("ac, hpc", [(True, False), (False, True), (False, False), (True, True)])
def test_upsample_bilinear_half_pixel_centers_from_ios16(ac, hpc):
    def build(mb, x):
        return mb.upsample_bilinear(x=x, scale_factor_height=2.0, scale_factor_width=1.5, align_corners=ac,
                                    half_pixel_centers=hpc)
    res = check(build, X4, ALL_OPSETS)
    assert res[0] is None and all(r is not None for r in res[1:])  # iOS15 has no half_pixel_centers
    check_error(build, X4, "iOS15", match=r"upsample_bilinear.*Unknown input 'half_pixel_centers'")
    # no default is materialized when it is left out
    res = check(lambda mb, x: mb.upsample_bilinear(x=x, scale_factor_height=2), X4, ["iOS16"])[0]
    assert "half_pixel_centers" not in res.mk_prog.find_ops(op_type="upsample_bilinear")[0].inputs


@pytest.mark.parametrize("op", ["upsample_nearest_neighbor", "upsample_bilinear"])
def test_upsample_symbolic(op):
    # coremltools gives up (fresh symbols); milkit keeps integral scales exact
    res = check(lambda mb, x: getattr(mb, op)(x=x, scale_factor_height=2, scale_factor_width=3), XSYM, ALL_OPSETS)
    assert res[0].improved
    shp = out_shape(res[0], op)
    H, W = (res[0].mk_prog.functions["main"].inputs["x"].shape[i] for i in (2, 3))
    assert shp[2].compare_eq(2 * H) and shp[3].compare_eq(3 * W)
    check(lambda mb, x: getattr(mb, op)(x=x, scale_factor_height=2.5, scale_factor_width=F(4.0)), XSYM, ALL_OPSETS)
    assert_exact(lambda mb, x: getattr(mb, op)(x=x, scale_factor_height=F(3), scale_factor_width=F(2.0)),
                 ("B", 3, "H", "W"), op, values=range(1, 12), min_checked=10)


@pytest.mark.parametrize("op", ["upsample_nearest_neighbor", "upsample_bilinear"])
def test_upsample_errors(op):
    check_error(lambda mb, x: getattr(mb, op)(x=x, scale_factor_height=2), [((4, 5), "fp32")],
                match=rf"{op} '{op}_0'.*'x' must have rank at least 3")
    check_error(lambda mb, x: getattr(mb, op)(x=x, scale_factor_height=2), [((1, 4, 5), "int32")],
                match=rf"{op} '{op}_0'.*'x'.*int32")
    # the two scale factors share a type domain when both are given
    check_error(lambda mb, x: getattr(mb, op)(x=x, scale_factor_height=2, scale_factor_width=1.5), X4,
                match=rf"{op} '{op}_0'.*scale_factor_width")
    check_error(lambda mb, x: getattr(mb, op)(x=x, scale_factor_height="2"), X4, match=rf"{op} '{op}_0'")
    check_error(lambda mb, x: getattr(mb, op)(x=x, scale_factor_height=mb.add(x=F(1), y=mb.reduce_max(x=x))), X4,
                match=rf"{op} '{op}_0'.*scale_factor_height")


# ---------------------------------------------------------------------------------------------
# resize_nearest_neighbor, resize_bilinear


@pytest.mark.parametrize("shape", [(2, 3, 6, 7), (3, 4, 5), (1, 1, 2, 3, 4)])
def test_resize_nearest_neighbor(shape):
    check(lambda mb, x: mb.resize_nearest_neighbor(x=x, target_size_height=9, target_size_width=2),
          [(shape, "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.resize_nearest_neighbor(x=x, target_size_height=1, target_size_width=1),
          [(shape, "fp16")], ALL_OPSETS)


@pytest.mark.parametrize("mode", SAMPLING)
def test_resize_bilinear_modes(mode):
    check(lambda mb, x: mb.resize_bilinear(x=x, target_size_height=4, target_size_width=11, sampling_mode=mode),
          X4, ALL_OPSETS)
    check(lambda mb, x: mb.resize_bilinear(x=x, target_size_height=1, target_size_width=3, sampling_mode=mode),
          [((3, 5, 4), "fp16")], ALL_OPSETS)


def test_resize_bilinear_defaults():
    res = check(lambda mb, x: mb.resize_bilinear(x=x), X4, ALL_OPSETS)
    assert out_shape(res[0], "resize_bilinear") == (2, 3, 1, 1)
    check(lambda mb, x: mb.resize_bilinear(x=x, target_size_width=5), X4, ALL_OPSETS)


@pytest.mark.parametrize("op", ["resize_nearest_neighbor", "resize_bilinear"])
def test_resize_target_symbolic(op):
    res = check(lambda mb, x: getattr(mb, op)(x=x, target_size_height=5, target_size_width=6), XSYM, ALL_OPSETS)
    assert out_shape(res[0], op)[2:] == (5, 6)


def test_resize_target_errors():
    check_error(lambda mb, x: mb.resize_nearest_neighbor(x=x, target_size_height=2), X4,
                match=r"resize_nearest_neighbor 'resize_nearest_neighbor_0'.*target_size_width")
    check_error(lambda mb, x: mb.resize_nearest_neighbor(x=x, target_size_height=2, target_size_width=2),
                [((4, 5), "fp32")], match=r"resize_nearest_neighbor 'resize_nearest_neighbor_0'.*rank at least 3")
    check_error(lambda mb, x: mb.resize_bilinear(x=x, sampling_mode="BILINEAR"), X4,
                match=r"resize_bilinear 'resize_bilinear_0'.*sampling_mode.*unrecognized.*\"BILINEAR\"")
    check_error(lambda mb, x: mb.resize_bilinear(x=x, sampling_mode="default"), X4, match=r"sampling_mode")
    check_error(lambda mb, x: mb.resize_bilinear(x=x, target_size_height=2.0), X4,
                match=r"resize_bilinear 'resize_bilinear_0'.*target_size_height")
    check_error(lambda mb, x: mb.resize_bilinear(x=x), [((1, 4, 5), "int32")], match=r"resize_bilinear.*int32")


# ---------------------------------------------------------------------------------------------
# resize (iOS17)


U32 = np.uint32


@pytest.mark.parametrize("shape, rd", [
    ([6, 8], 2), ([1, 0, 8], 2), ([1, 0, 8], 3), ([9, 0, 0, 2], 4), ([6, 8], 0), ([5], 1), ([3, 7], 1),
])
@pytest.mark.parametrize("mode", [{}, dict(interpolation_mode="NEAREST_NEIGHBOR", sampling_mode="ALIGN_CORNERS"),
                                  dict(interpolation_mode="LINEAR", sampling_mode="OFFSET_CORNERS")])
def test_resize_const_shape(shape, rd, mode):
    res = check(lambda mb, x: mb.resize(x=x, shape=np.array(shape, np.int32), resized_dims=U32(rd), **mode),
                [((1, 3, 4, 5), "fp32")], ALL_OPSETS)
    assert res[0] is None and res[1] is None  # iOS17 op
    assert res[2] is not None and res[3] is not None


@pytest.mark.parametrize("dtype", ["fp16", "int32"])
@pytest.mark.parametrize("sdt", [np.int16, np.uint16, np.uint32])
def test_resize_dtypes(dtype, sdt):
    check(lambda mb, x: mb.resize(x=x, shape=np.array([6, 8], sdt), resized_dims=U32(2)), [((3, 4, 5), dtype)],
          ["iOS17", "iOS18"])


def test_resize_dynamic_shape():
    # `shape` a function input: every resized dim is unknown
    res = check(lambda mb, x, s: mb.resize(x=x, shape=s, resized_dims=U32(2)),
                [((1, 3, 4, 5), "fp32"), ((2,), "int32")], ["iOS17", "iOS18"])
    shp = out_shape(res[0], "resize")
    assert shp[:2] == (1, 3) and not isinstance(shp[2], int) and not isinstance(shp[3], int)
    # `shape` from the shape of a symbolic x: coremltools gives up, milkit keeps the input's dims
    res = check(lambda mb, x: mb.resize(x=x, shape=mb.shape(x=x), resized_dims=U32(2)), XSYM, ["iOS17", "iOS18"])
    assert res[0].improved
    xs = res[0].mk_prog.functions["main"].inputs["x"].shape
    shp = out_shape(res[0], "resize")
    assert shp[1] == 3 and shp[2].compare_eq(xs[2]) and shp[3].compare_eq(xs[3])
    # a concrete x: the shape is known, as in coremltools
    check(lambda mb, x: mb.resize(x=x, shape=mb.shape(x=x), resized_dims=U32(3)), X4, ["iOS17"])
    # 0 inherits a symbolic dim of x
    check(lambda mb, x: mb.resize(x=x, shape=np.array([0, 8], np.int32), resized_dims=U32(2)), XSYM, ["iOS17"])


def test_resize_defaults_order():
    res = check(lambda mb, x: mb.resize(x=x, shape=np.array([6, 8], np.int32), resized_dims=U32(2)),
                [((1, 3, 4, 5), "fp32")], ["iOS17"])[0]
    names = [o.name for o in res.mk_prog.functions["main"].operations]
    assert names == ["resize_0_shape_0", "resize_0_resized_dims_0", "resize_0_interpolation_mode_0",
                     "resize_0_sampling_mode_0", "resize_0"]


def test_resize_errors():
    def err(build, specs=((1, 3, 4, 5), "fp32"), match=""):
        check_error(build, [specs], "iOS17", match=r"resize 'resize_0'.*" + match)

    shp = np.array([6, 8], np.int32)
    err(lambda mb, x: mb.resize(x=x, shape=shp, resized_dims=2), match="resized_dims.*int32")
    err(lambda mb, x: mb.resize(x=x, shape=np.array([1, 0, 8], np.int32), resized_dims=U32(4)),
        match=r"resized_dims.*must <= shape's size \(3\)")
    err(lambda mb, x: mb.resize(x=x, shape=np.array([1, 1, 1, 0, 8], np.int32), resized_dims=U32(2)),
        match=r"shape's size \(5\) must <= x's rank \(4\)")
    err(lambda mb, x: mb.resize(x=x, shape=np.array([[6, 8]], np.int32), resized_dims=U32(2)), match="rank must be 1")
    err(lambda mb, x: mb.resize(x=x, shape=shp, resized_dims=U32(2), interpolation_mode="BICUBIC"),
        match="interpolation_mode.*BICUBIC")
    err(lambda mb, x: mb.resize(x=x, shape=shp, resized_dims=U32(2), sampling_mode="BAD"), match="sampling_mode.*BAD")
    err(lambda mb, x: mb.resize(x=x, shape=shp.astype(np.float32), resized_dims=U32(2)), match="shape.*fp32")
    err(lambda mb, x: mb.resize(x=x, shape=shp, resized_dims=U32(2)), specs=((4,), "fp32"), match="rank")
    err(lambda mb, x: mb.resize(x=x, shape=shp, resized_dims=U32(2)), specs=((3, 4), "bool"), match="x.*bool")
    check_error(lambda mb, x: mb.resize(x=x, shape=shp, resized_dims=U32(2)), [((1, 3, 4, 5), "fp32")], "iOS16",
                match=r"resize")


# ---------------------------------------------------------------------------------------------
# crop


@pytest.mark.parametrize("kw", [dict(crop_height=[0, 1], crop_width=[1, 1]), dict(crop_height=[2, 3], crop_width=[0, 0]),
                                dict(crop_height=np.array([[1, 1]], np.int32), crop_width=[3, 2])])
def test_crop(kw):
    check(lambda mb, x: mb.crop(x=x, **kw), X4, ALL_OPSETS)
    check(lambda mb, x: mb.crop(x=x, **kw), [((3, 6, 7), "fp16")], ALL_OPSETS)


def test_crop_symbolic():
    # coremltools computes the expression too: it must be the same
    res = check(lambda mb, x: mb.crop(x=x, crop_height=[1, 2], crop_width=[0, 4]), XSYM, ALL_OPSETS)
    assert not res[0].improved
    check(lambda mb, x: mb.crop(x=x, crop_height=[0, 0], crop_width=[1, 0]), [(("B", "C", 5, "W"), "fp16")],
          ALL_OPSETS)


def test_crop_errors():
    check_error(lambda mb, x: mb.crop(x=x, crop_height=[0, 1], crop_width=[1, 1]), [((6, 7), "fp32")],
                match=r"crop 'crop_0'.*rank 3")
    check_error(lambda mb, x: mb.crop(x=x, crop_height=[0, 1, 2], crop_width=[1, 1]), X4,
                match=r"crop 'crop_0'.*crop_height must have 2 elements. Provided 3")
    check_error(lambda mb, x: mb.crop(x=x, crop_height=[0, 1], crop_width=[1]), X4,
                match=r"crop 'crop_0'.*crop_width must have 2 elements")
    check_error(lambda mb, x: mb.crop(x=x, crop_height=[0, 1]), X4, match=r"crop 'crop_0'.*crop_width")
    check_error(lambda mb, x: mb.crop(x=x, crop_height=[0.0, 1.0], crop_width=[1, 1]), X4, match=r"crop_height")
    check_error(lambda mb, x: mb.crop(x=x, crop_height=[0, 1], crop_width=[1, 1]), [((1, 6, 7), "int32")],
                match=r"crop 'crop_0'.*int32")


# ---------------------------------------------------------------------------------------------
# crop_resize


ROI4 = np.array([[1, 1, 4, 5], [0, 0.5, 2.5, 6]], F).reshape(2, 1, 4, 1, 1)
ROI5 = np.array([[0, 1, 1, 4, 5], [0, 0, 0.5, 2.5, 6]], F).reshape(2, 1, 5, 1, 1)
BOXES = np.array([[1, 1, 4, 5], [0, 0.5, 2.5, 6], [3, 3, 1, 1]], F)


@pytest.mark.parametrize("mode", SAMPLING)
@pytest.mark.parametrize("box_mode", BOX_MODES)
def test_crop_resize_roi(mode, box_mode):
    def build(mb, x):
        return mb.crop_resize(x=x, roi=ROI4, target_height=3, target_width=4, sampling_mode=mode,
                              box_coordinate_mode=box_mode, spatial_scale=F(0.5), normalized_coordinates=False)
    res = check(build, X4, ALL_OPSETS)
    assert res[2] is None and res[3] is None  # iOS17 replaced roi by boxes
    assert out_shape(res[0], "crop_resize") == (2, 2, 3, 3, 4)


def test_crop_resize_roi_defaults_and_pad_value():
    res = check(lambda mb, x: mb.crop_resize(x=x, roi=ROI4), X4, ["iOS15", "iOS16"])
    names = [o.name for o in res[1].mk_prog.functions["main"].operations]
    assert names[-2] == "crop_resize_0_pad_value_0"  # iOS16: pad_value defaults to 0.0 (fp32)
    check(lambda mb, x: mb.crop_resize(x=x, roi=ROI4.astype(np.float16)), [((2, 3, 6, 7), "fp16")], ["iOS15", "iOS16"])
    res = check(lambda mb, x: mb.crop_resize(x=x, roi=ROI4, pad_value=F(-1)), X4, ALL_OPSETS)
    assert res[0] is None and res[1] is not None  # no pad_value before iOS16
    check(lambda mb, x: mb.crop_resize(x=x, roi=ROI4.astype(np.float16), pad_value=np.float16(2)),
          [((2, 3, 6, 7), "fp16")], ["iOS16"])
    # roi as a function input, symbolic N and x
    check(lambda mb, x, r: mb.crop_resize(x=x, roi=r, target_height=2, target_width=2),
          [(("B", "C", "H", "W"), "fp32"), (("N", 1, 4, 1, 1), "fp32")], ["iOS15", "iOS16"])


@pytest.mark.parametrize("mode", SAMPLING)
@pytest.mark.parametrize("box_mode", BOX_MODES)
def test_crop_resize_boxes(mode, box_mode):
    def build(mb, x):
        return mb.crop_resize(x=x, boxes=BOXES, box_indices=np.array([1, 0, 1], np.int32), target_height=2,
                              target_width=5, sampling_mode=mode, box_coordinate_mode=box_mode, pad_value=F(0.5))
    res = check(build, X4, ALL_OPSETS)
    assert res[0] is None and res[1] is None and out_shape(res[2], "crop_resize") == (3, 3, 2, 5)


def test_crop_resize_boxes_variants():
    x3 = [((3, 2, 6, 7), "fp32")]
    # default box_indices = arange(N), as an int32 const
    res = check(lambda mb, x: mb.crop_resize(x=x, boxes=BOXES), x3, ["iOS17", "iOS18"])
    op = res[0].mk_prog.find_ops(op_type="crop_resize")[0]
    assert list(op.inputs["box_indices"].val) == [0, 1, 2] and op.inputs["box_indices"].dtype.__name__ == "int32"
    check(lambda mb, x: mb.crop_resize(x=x, boxes=BOXES.astype(np.float16), box_indices=np.zeros(3, np.uint16)),
          x3, ["iOS17"])
    check(lambda mb, x: mb.crop_resize(x=x, boxes=BOXES.astype(np.uint16), normalized_coordinates=False),
          [((3, 2, 6, 7), "fp16")], ["iOS17"])
    check(lambda mb, x: mb.crop_resize(x=x, boxes=BOXES / 8, normalized_coordinates=True, target_height=4),
          x3, ["iOS17"])
    # boxes and box_indices as function inputs, symbolic (but N: see test_improved_crop_resize_symbolic)
    check(lambda mb, x, b, i: mb.crop_resize(x=x, boxes=b, box_indices=i, target_height=2, target_width=3),
          [(("B", "C", "H", "W"), "fp32"), ((5, 4), "fp32"), ((5,), "int32")], ["iOS17", "iOS18"])
    check(lambda mb, x, b: mb.crop_resize(x=x, boxes=b, box_indices=np.array([0, 1], np.int32)),
          [((2, 3, "H", "W"), "fp16"), ((2, 4), "fp16")], ["iOS17"])


def test_crop_resize_errors():
    def err(build, specs=X4, opset="iOS17", match=""):
        check_error(build, specs, opset, match=r"crop_resize 'crop_resize_0'.*" + match)

    for op in ["iOS15", "iOS16"]:
        err(lambda mb, x: mb.crop_resize(x=x, roi=ROI4), [((3, 6, 7), "fp32")], op, "rank 4")
        err(lambda mb, x: mb.crop_resize(x=x, roi=ROI4.reshape(2, 4)), X4, op, "rank 5")
        err(lambda mb, x: mb.crop_resize(x=x, roi=ROI4, sampling_mode="BILINEAR"), X4, op, "unrecognized sampling mode")
        err(lambda mb, x: mb.crop_resize(x=x, roi=ROI4, box_coordinate_mode="XYXY"), X4, op,
            "unrecognized box_coordinate_mode")
        err(lambda mb, x: mb.crop_resize(x=x, roi=ROI4, spatial_scale=2), X4, op, "spatial_scale.*int32")
        err(lambda mb, x: mb.crop_resize(x=x, roi=ROI4), [((2, 3, 6, 7), "fp16")], op, "roi.*fp32")
        check_error(lambda mb, x: mb.crop_resize(x=x, boxes=BOXES), X4, op,
                    match=r"crop_resize.*Unknown input 'boxes'")
    check_error(lambda mb, x: mb.crop_resize(x=x, roi=ROI4), X4, "iOS17", match=r"crop_resize.*Unknown input 'roi'")
    check_error(lambda mb, x: mb.crop_resize(x=x, roi=ROI4, pad_value=F(1)), X4, "iOS15",
                match=r"crop_resize.*Unknown input 'pad_value'")
    err(lambda mb, x: mb.crop_resize(x=x, boxes=BOXES[:2]), [((2, 3, 6), "fp32")], match="rank 4")
    err(lambda mb, x: mb.crop_resize(x=x, boxes=np.zeros((2, 5), F)), match=r"boxes.*\[N, 4\]")
    err(lambda mb, x: mb.crop_resize(x=x, boxes=np.zeros((2, 4, 1), F)), match=r"boxes.*\[N, 4\]")
    err(lambda mb, x: mb.crop_resize(x=x, boxes=BOXES), match=r"N dimension of \"boxes\" \(3\).*B dimension")
    err(lambda mb, x: mb.crop_resize(x=x, boxes=BOXES, box_indices=np.array([0, 1], np.int32)),
        match=r"box_indices.*shape \[3\]")
    err(lambda mb, x: mb.crop_resize(x=x, boxes=BOXES, box_indices=np.array([0, 1, 2], np.int32)),
        match=r"box_indices.*>= B dimension of x \(2\)")
    err(lambda mb, x: mb.crop_resize(x=x, boxes=BOXES.astype(np.uint16), box_indices=np.zeros(3, np.int32),
                                     normalized_coordinates=True), match=r"boxes.*fp16 or fp32")
    err(lambda mb, x: mb.crop_resize(x=x, boxes=BOXES, box_indices=np.zeros(3, np.int16)), match="box_indices.*int16")
    err(lambda mb, x: mb.crop_resize(x=x, boxes=BOXES[:2], pad_value=np.float16(1)), match="pad_value")
    err(lambda mb, x: mb.crop_resize(x=x, boxes=BOXES[:2], sampling_mode="NEAREST"), match="sampling mode")


# ---------------------------------------------------------------------------------------------
# resample


def resample(mb, x, c, **kw):
    args = dict(sampling_mode="bilinear", padding_mode="constant", padding_value=F(0.0),
                coordinates_mode="normalized_minus_one_to_one", align_corners=False)
    args.update(kw)
    return mb.resample(x=x, coordinates=c, **args)


@pytest.mark.parametrize("kw", [
    {}, dict(sampling_mode="nearest", padding_mode="border"), dict(padding_mode="reflection", align_corners=True),
    dict(padding_mode="symmetric", coordinates_mode="unnormalized"), dict(coordinates_mode="normalized_zero_to_one"),
    dict(padding_value=F(-2.5)),
])
def test_resample(kw):
    check(lambda mb, x, c: resample(mb, x, c, **kw), [((2, 3, 6, 7), "fp32"), ((2, 4, 5, 2), "fp32")], ALL_OPSETS)
    check(lambda mb, x: resample(mb, x, np.zeros((2, 4, 5, 2), F), **kw), X4, ALL_OPSETS)


@pytest.mark.parametrize("cdt, first", [("fp32", 0), ("int32", 0), ("fp16", 1), ("int8", 2), ("uint8", 2),
                                         ("int16", 2), ("uint16", 2), ("bool", 4)])
def test_resample_coordinate_dtypes(cdt, first):
    # fp16 coordinates from iOS16, 8 / 16-bit integers from iOS17
    res = check(lambda mb, x, c: resample(mb, x, c), [((1, 3, 6, 7), "fp32"), ((1, 4, 5, 2), cdt)], ALL_OPSETS)
    assert [r is not None for r in res] == [i >= first for i in range(4)]


def test_resample_fp16_and_symbolic():
    check(lambda mb, x, c: resample(mb, x, c, padding_value=np.float16(1)),
          [((1, 3, 6, 7), "fp16"), ((1, 4, 5, 2), "fp16")], ["iOS16", "iOS17", "iOS18"])
    check(lambda mb, x, c: resample(mb, x, c), [(("B", "C", "H", "W"), "fp32"), (("B", "P", "Q", 2), "fp32")],
          ALL_OPSETS)
    check(lambda mb, x, c: resample(mb, x, c), [(("B", "C", "H", "W"), "fp32"), (("N", "P", "Q", "K"), "fp32")],
          ALL_OPSETS)


def test_resample_errors():
    def err(build, specs, match):
        check_error(build, specs, "iOS17", match=r"resample 'resample_0'.*" + match)

    err(lambda mb, x, c: resample(mb, x, c), [((3, 6, 7), "fp32"), ((1, 4, 5, 2), "fp32")], "'x'.*rank 4")
    err(lambda mb, x, c: resample(mb, x, c), [((1, 3, 6, 7), "fp32"), ((1, 4, 2), "fp32")], "'coordinates'.*rank 4")
    err(lambda mb, x, c: resample(mb, x, c), [((2, 3, 6, 7), "fp32"), ((3, 4, 5, 2), "fp32")], "batch size: 2 vs. 3")
    err(lambda mb, x, c: resample(mb, x, c), [((1, 3, 6, 7), "fp32"), ((1, 4, 5, 3), "fp32")], "last dimension must be 2")
    err(lambda mb, x, c: resample(mb, x, c, padding_value=np.float16(0)), [((1, 3, 6, 7), "fp32"), ((1, 4, 5, 2), "fp32")],
        "padding_value")
    err(lambda mb, x, c: resample(mb, x, c, align_corners=1), [((1, 3, 6, 7), "fp32"), ((1, 4, 5, 2), "fp32")],
        "align_corners")
    err(lambda mb, x, c: mb.resample(x=x, coordinates=c, sampling_mode="bilinear"),
        [((1, 3, 6, 7), "fp32"), ((1, 4, 5, 2), "fp32")], "padding_mode")


# ---------------------------------------------------------------------------------------------
# affine


def affine(mb, x, t, **kw):
    args = dict(output_height=4, output_width=5, sampling_mode="bilinear", padding_mode="constant",
                padding_value=F(0.0), coordinates_mode="normalized_minus_one_to_one", align_corners=True)
    args.update(kw)
    return mb.affine(x=x, transform_matrix=t, **args)


@pytest.mark.parametrize("kw", [{}, dict(align_corners=False), dict(sampling_mode="BILINEAR", padding_mode="Constant"),
                                dict(output_height=1, output_width=9)])
@pytest.mark.parametrize("rows", [1, 2])
def test_affine(kw, rows):
    specs = [((2, 3, 6, 7), "fp32"), ((rows, 6), "fp32")]
    res = check(lambda mb, x, t: affine(mb, x, t, **kw), specs, ALL_OPSETS)
    assert res[0] is not None
    check(lambda mb, x: affine(mb, x, np.ones((rows, 6), F), **kw), X4, ALL_OPSETS)


def test_affine_fp16_and_symbolic():
    check(lambda mb, x, t: affine(mb, x, t, padding_value=np.float16(0)), [((2, 3, 6, 7), "fp16"), ((2, 6), "fp16")],
          ALL_OPSETS)
    check(lambda mb, x, t: affine(mb, x, t), [(("B", "C", "H", "W"), "fp32"), (("B", 6), "fp32")], ALL_OPSETS)
    check(lambda mb, x, t: affine(mb, x, t), [(("B", "C", "H", "W"), "fp32"), (("D", "K"), "fp32")], ALL_OPSETS)


def test_affine_errors():
    specs = [((2, 3, 6, 7), "fp32"), ((2, 6), "fp32")]

    def err(build, match, sp=specs):
        check_error(build, sp, "iOS17", match=r"affine 'affine_0'.*" + match)

    err(lambda mb, x, t: affine(mb, x, t), "'x'.*rank 4", [((3, 6, 7), "fp32"), ((2, 6), "fp32")])
    err(lambda mb, x, t: affine(mb, x, t), "transform_matrix.*rank 2", [((2, 3, 6, 7), "fp32"), ((2, 6, 1), "fp32")])
    err(lambda mb, x, t: affine(mb, x, t), "last dimension must be 6", [((2, 3, 6, 7), "fp32"), ((2, 5), "fp32")])
    err(lambda mb, x, t: affine(mb, x, t, sampling_mode="nearest"), "sampling_mode.*not implemented")
    err(lambda mb, x, t: affine(mb, x, t, coordinates_mode="unnormalized"), "coordinates_mode.*not implemented")
    err(lambda mb, x, t: affine(mb, x, t, padding_mode="border"), "padding_mode.*not implemented")
    err(lambda mb, x, t: affine(mb, x, t, padding_value=F(1)), "padding_mode.*not implemented")
    err(lambda mb, x, t: affine(mb, x, t), "transform_matrix.*fp16", [((2, 3, 6, 7), "fp32"), ((2, 6), "fp16")])
    err(lambda mb, x, t: mb.affine(x=x, transform_matrix=t, output_height=2), "output_width")
    # affine and resample start at iOS15
    check_error(lambda mb, x, t: affine(mb, x, t), [((2, 3, 6, 7), "fp32"), ((2, 6), "fp32")], "iOS14", match="affine")
    check_error(lambda mb, x, c: resample(mb, x, c), [((1, 3, 6, 7), "fp32"), ((1, 4, 5, 2), "fp32")], "iOS14",
                match="resample")


# ---------------------------------------------------------------------------------------------
# deliberate differences from coremltools


@pytest.mark.parametrize("op", ["upsample_nearest_neighbor", "upsample_bilinear"])
def test_pinned_nonpositive_scale(op):
    # coremltools types a negative dim (floor(-1 * 6) = -6), or 0 for a zero scale
    pinned(lambda mb, x: getattr(mb, op)(x=x, scale_factor_height=-1), X4, match=rf"{op} '{op}_0'.*must be positive")
    pinned(lambda mb, x: getattr(mb, op)(x=x, scale_factor_width=F(0)), X4, match=r"scale_factor_width.*positive")


def test_pinned_negative_sizes():
    # coremltools types negative dims from negative target sizes, crop amounts and `shape` elements
    pinned(lambda mb, x: mb.resize_bilinear(x=x, target_size_height=-2), X4,
           match=r"resize_bilinear 'resize_bilinear_0'.*target_size_height.*non-negative")
    pinned(lambda mb, x: mb.resize_nearest_neighbor(x=x, target_size_height=3, target_size_width=-1), X4,
           match=r"target_size_width.*non-negative")
    pinned(lambda mb, x: mb.crop(x=x, crop_height=[-1, 0], crop_width=[0, 0]), X4, match=r"crop 'crop_0'.*negative")
    pinned(lambda mb, x: mb.crop(x=x, crop_height=[4, 3], crop_width=[0, 0]), X4, match=r"crops more than")
    pinned(lambda mb, x: mb.resize(x=x, shape=np.array([-1, 8], np.int32), resized_dims=U32(2)), X4,
           match=r"resize 'resize_0'.*negative element")
    pinned(lambda mb, x: mb.crop_resize(x=x, boxes=BOXES[:2], target_height=-2), X4,
           match=r"crop_resize.*target_height.*non-negative")
    pinned(lambda mb, x, t: affine(mb, x, t, output_width=-5), [((2, 3, 6, 7), "fp32"), ((2, 6), "fp32")],
           match=r"affine 'affine_0'.*output_width.*non-negative")


def test_pinned_resample_modes_checked():
    # coremltools checks none of resample's mode strings; Core ML rejects them when the model loads
    specs = [((1, 3, 6, 7), "fp32"), ((1, 4, 5, 2), "fp32")]
    for kw, name in [(dict(sampling_mode="bicubic"), "sampling_mode"), (dict(padding_mode="zeros"), "padding_mode"),
                     (dict(coordinates_mode="pixels"), "coordinates_mode")]:
        pinned(lambda mb, x, c: resample(mb, x, c, **kw), specs, match=rf"resample 'resample_0'.*'{name}'.*unsupported")
    # case does not matter (affine compares lower-cased strings; resample follows)
    check(lambda mb, x, c: resample(mb, x, c, sampling_mode="Nearest", padding_mode="BORDER"), specs, ["iOS17"])


def test_pinned_affine_rows():
    # the documented D is 1 or B; coremltools accepts any
    pinned(lambda mb, x, t: affine(mb, x, t), [((2, 3, 6, 7), "fp32"), ((3, 6), "fp32")],
           match=r"affine 'affine_0'.*1 or B \(2\) rows")


def test_pinned_crop_resize_roi_shape():
    # a roi must be [N, 1, 4 | 5, 1, 1] (coremltools takes any rank-5 tensor)
    pinned(lambda mb, x: mb.crop_resize(x=x, roi=np.zeros((3, 1, 3, 1, 1), F)), X4, "iOS16",
           match=r"crop_resize 'crop_resize_0'.*roi.*\[N, 1, 4, 1, 1\]")
    # with 5 coordinates (a batch index first) each box makes one crop: [N, 1, C, h, w] (the op's documentation
    # and Core ML's CropResize layer; coremltools types [N, B, C, h, w], which is only the same for B == 1, and its
    # own TensorFlow frontend squeezes axis 1 of the result)
    res = check(lambda mb, x: mb.crop_resize(x=x, roi=ROI5, target_height=3, target_width=2),
                [((1, 3, 6, 7), "fp32")], ["iOS15", "iOS16"])
    assert out_shape(res[0], "crop_resize") == (2, 1, 3, 3, 2)
    symtab = _make_symbols(X4)
    for opset in ["iOS15", "iOS16"]:
        reset_ct_names()
        build = lambda mb, x: mb.crop_resize(x=x, roi=ROI5, target_height=3, target_width=2)  # noqa: E731
        cp = _build("ct", build, X4, opset, symtab)
        mp = _build("mk", build, X4, opset, symtab)
        assert tuple(cp.find_ops(op_type="crop_resize")[0].outputs[0].shape) == (2, 2, 3, 3, 2)
        assert tuple(mp.find_ops(op_type="crop_resize")[0].outputs[0].shape) == (2, 1, 3, 3, 2)


def test_improved_crop_resize_symbolic():
    # iOS17 crop_resize: coremltools fails with a TypeError comparing N with a symbolic B (default box_indices) or an
    # index with it, and computes its default box_indices list(range(N)) even when box_indices is given, so a
    # symbolic N always fails; milkit builds these (the kernel checks the indices at run time)
    cases = [(lambda mb, x: mb.crop_resize(x=x, boxes=BOXES[:2]), XSYM),
             (lambda mb, x: mb.crop_resize(x=x, boxes=BOXES[:2], box_indices=np.array([0, 5], np.int32)), XSYM),
             (lambda mb, x, b, i: mb.crop_resize(x=x, boxes=b, box_indices=i),
              [(("B", "C", "H", "W"), "fp32"), (("N", 4), "fp32"), (("N",), "int32")]),
             (lambda mb, x, b: mb.crop_resize(x=x, boxes=b), [(("B", "C", "H", "W"), "fp32"), (("N", 4), "fp32")])]
    for build, specs in cases:
        symtab = _make_symbols(specs)
        reset_ct_names()
        with pytest.raises(TypeError):
            _build("ct", build, specs, "iOS17", symtab)
        mp = _build("mk", build, specs, "iOS17", symtab)
        shp = tuple(mp.find_ops(op_type="crop_resize")[0].outputs[0].shape)
        assert shp[2:] == (1, 1) and shp[1] == mp.functions["main"].inputs["x"].shape[1]
    # no default box_indices without a known N (the kernel uses arange(N))
    op = mp.find_ops(op_type="crop_resize")[0]
    assert "box_indices" not in op.inputs
