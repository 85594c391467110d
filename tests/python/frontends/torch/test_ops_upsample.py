"""The torch.export importer's upsampling (interpolate / upsample_*), op by op against torch eager: both dialects (TRAINING as
exported, core ATen after run_decompositions), fp32 within 1e-4 of the largest reference value."""

from __future__ import annotations

from typing import Any, Callable

import milkit
import pytest
import torch
import torch.nn.functional as F
from support.torch_util import DIALECTS, Fn, check, convert, export, r

torch.manual_seed(0)


def _op_types(mm: Any) -> set:
    return {op.op_type for op in mm._mil_program.functions["main"].find_ops()}


# ---- upsampling -----------------------------------------------------------------------------------


def _interp(**kw: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: F.interpolate(x, **kw)


UPSAMPLE = {
    # nearest: integer factors -> upsample_nearest_neighbor, the rest by gathered indices
    "nearest_x2": (_interp(scale_factor=2, mode="nearest"), r(1, 2, 4, 5), "upsample_nearest_neighbor"),
    "nearest_x3x2": (_interp(scale_factor=(3, 2), mode="nearest"), r(1, 2, 4, 5), "upsample_nearest_neighbor"),
    "nearest_x1.5": (_interp(scale_factor=1.5, mode="nearest"), r(1, 2, 4, 5), "gather"),
    "nearest_x1.7": (_interp(scale_factor=1.7, mode="nearest"), r(1, 2, 5, 7), "gather"),
    "nearest_size": (_interp(size=(7, 9), mode="nearest"), r(1, 2, 4, 5), "gather"),
    "nearest_size_x2x3": (_interp(size=(8, 15), mode="nearest"), r(1, 2, 4, 5), "upsample_nearest_neighbor"),
    "nearest_down": (_interp(size=(3, 2), mode="nearest"), r(1, 2, 8, 5), "gather"),
    "nearest_module": (torch.nn.UpsamplingNearest2d(scale_factor=2), r(1, 3, 4, 4), "upsample_nearest_neighbor"),
    # nearest-exact: half-pixel centers
    "nearest_exact_size": (_interp(size=(7, 9), mode="nearest-exact"), r(1, 2, 4, 5), "resize_nearest_neighbor"),
    "nearest_exact_x2": (_interp(scale_factor=2, mode="nearest-exact"), r(1, 2, 4, 5), "upsample_nearest_neighbor"),
    "nearest_exact_x1.7": (_interp(scale_factor=1.7, mode="nearest-exact"), r(1, 2, 5, 7), "gather"),
    # bilinear: resize_bilinear when torch's scale is in / out, else gathered taps
    "bilinear_x2": (_interp(scale_factor=2, mode="bilinear"), r(1, 2, 4, 5), "resize_bilinear"),
    "bilinear_x2_ac": (_interp(scale_factor=2, mode="bilinear", align_corners=True), r(1, 2, 4, 5), "resize_bilinear"),
    "bilinear_size": (_interp(size=(7, 9), mode="bilinear"), r(1, 2, 4, 5), "resize_bilinear"),
    "bilinear_size_ac": (_interp(size=(7, 9), mode="bilinear", align_corners=True), r(1, 2, 4, 5), "resize_bilinear"),
    "bilinear_x1.7": (_interp(scale_factor=1.7, mode="bilinear"), r(1, 2, 5, 7), "gather"),
    "bilinear_x1.7_recompute": (_interp(scale_factor=1.7, mode="bilinear", recompute_scale_factor=True),
                                r(1, 2, 5, 7), "resize_bilinear"),
    "bilinear_down": (_interp(size=(3, 4), mode="bilinear"), r(1, 2, 8, 9), "resize_bilinear"),
    "bilinear_x0.6": (_interp(scale_factor=0.6, mode="bilinear"), r(1, 2, 8, 9), "gather"),
    "bilinear_module": (torch.nn.UpsamplingBilinear2d(scale_factor=2), r(1, 3, 4, 4), "resize_bilinear"),
    # 1-d through the 2-d ops (a height of 1)
    "nearest1d_x2": (_interp(scale_factor=2, mode="nearest"), r(1, 2, 5), "upsample_nearest_neighbor"),
    "nearest1d_size": (_interp(size=7, mode="nearest"), r(1, 2, 5), "gather"),
    "nearest_exact1d": (_interp(size=7, mode="nearest-exact"), r(1, 2, 5), "resize_nearest_neighbor"),
    "linear1d_x2": (_interp(scale_factor=2, mode="linear"), r(1, 2, 5), "resize_bilinear"),
    "linear1d_ac": (_interp(size=9, mode="linear", align_corners=True), r(1, 2, 5), "resize_bilinear"),
    "linear1d_x1.3": (_interp(scale_factor=1.3, mode="linear"), r(1, 2, 5), "gather"),
    # bicubic: gathered taps (torch's cubic convolution)
    "bicubic_x2": (_interp(scale_factor=2, mode="bicubic"), r(1, 2, 4, 5), "gather"),
    "bicubic_size_ac": (_interp(size=(7, 6), mode="bicubic", align_corners=True), r(1, 2, 4, 5), "gather"),
    "bicubic_x1.7": (_interp(scale_factor=1.7, mode="bicubic"), r(1, 2, 5, 7), "gather"),
    # antialiased (torchvision's Resize): a filter matrix per axis
    "bilinear_aa_x0.5": (_interp(scale_factor=0.5, mode="bilinear", antialias=True), r(1, 2, 8, 6), "matmul"),
    "bilinear_aa_size": (_interp(size=(3, 5), mode="bilinear", antialias=True), r(1, 2, 8, 11), "matmul"),
    "bilinear_aa_up": (_interp(size=(9, 7), mode="bilinear", antialias=True), r(1, 2, 4, 5), "matmul"),
    "bilinear_aa_ac": (_interp(size=(3, 4), mode="bilinear", antialias=True, align_corners=True), r(1, 2, 8, 9),
                       "matmul"),
    "bicubic_aa_size": (_interp(size=(3, 5), mode="bicubic", antialias=True), r(1, 2, 8, 11), "matmul"),
    "bicubic_aa_x0.4": (_interp(scale_factor=0.4, mode="bicubic", antialias=True), r(1, 2, 10, 12), "matmul"),
    # 3-d: taps per axis
    "nearest3d_x2": (_interp(scale_factor=2, mode="nearest"), r(1, 2, 2, 3, 4), "gather"),
    "nearest3d_size": (_interp(size=(3, 5, 7), mode="nearest"), r(1, 2, 2, 3, 4), "gather"),
    "nearest_exact3d": (_interp(size=(3, 5, 7), mode="nearest-exact"), r(1, 2, 2, 3, 4), "gather"),
    "trilinear_x2": (_interp(scale_factor=2, mode="trilinear"), r(1, 2, 2, 3, 4), "gather"),
    "trilinear_ac": (_interp(size=(3, 5, 7), mode="trilinear", align_corners=True), r(1, 2, 2, 3, 4), "gather"),
    "trilinear_mixed": (_interp(scale_factor=(1.5, 1.7, 0.6), mode="trilinear"), r(1, 2, 2, 3, 5), "gather"),
    # the .default overloads, as other decompositions call them
    "nearest2d_default": (lambda x: torch.ops.aten.upsample_nearest2d.default(x, [8, 10], 2.0, 2.0), r(1, 2, 4, 5),
                          "upsample_nearest_neighbor"),
    "nearest2d_default_scales": (lambda x: torch.ops.aten.upsample_nearest2d.default(x, [6, 8], 1.7, 1.7),
                                 r(1, 2, 4, 5), "gather"),
    "bilinear2d_default": (lambda x: torch.ops.aten.upsample_bilinear2d.default(x, [7, 9], False), r(1, 2, 4, 5),
                           "resize_bilinear"),
    "bilinear2d_default_ac": (lambda x: torch.ops.aten.upsample_bilinear2d.default(x, [7, 9], True, 1.5, 1.5),
                              r(1, 2, 4, 5), "resize_bilinear"),
    "nearest_exact2d_default": (lambda x: torch.ops.aten._upsample_nearest_exact2d.default(x, [7, 9]), r(1, 2, 4, 5),
                                "resize_nearest_neighbor"),
    "linear1d_default": (lambda x: torch.ops.aten.upsample_linear1d.default(x, [9], False, 1.7), r(1, 2, 5), "gather"),
    "nearest1d_default": (lambda x: torch.ops.aten.upsample_nearest1d.default(x, [10]), r(1, 2, 5),
                          "upsample_nearest_neighbor"),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(UPSAMPLE))
def test_upsample(name: str, dialect: str) -> None:
    fn, x, op = UPSAMPLE[name]
    mod = fn if isinstance(fn, torch.nn.Module) else Fn(fn)
    mm = check(mod, (x,), dialect)
    if dialect == "training":  # core ATen decomposes some of them into index arithmetic
        assert op in _op_types(mm), _op_types(mm)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bilinear_ac"])
def test_upsample_symbolic_size(mode: str, dialect: str) -> None:
    kw = {"mode": mode.split("_")[0]}
    if mode == "bilinear_ac":
        kw["align_corners"] = True
    h, w = torch.export.Dim("h", min=2, max=32), torch.export.Dim("w", min=2, max=32)
    check(Fn(_interp(scale_factor=2, **kw)), (r(1, 2, 4, 5),), dialect, dynamic_shapes=(({2: h, 3: w},),),
          more_args=[(r(1, 2, 7, 3),)], target=milkit.target.iOS16)


def test_upsample_symbolic_errors() -> None:
    h = torch.export.Dim("h", min=2, max=32)
    ep = export(Fn(_interp(scale_factor=2, mode="bilinear")), (r(1, 2, 4, 5),), dynamic_shapes=(({2: h},),))
    with pytest.raises(ValueError, match="needs iOS16"):
        convert(ep, target=milkit.target.iOS15)
    ep = export(Fn(_interp(scale_factor=1.5, mode="nearest")), (r(1, 2, 4, 5),), dynamic_shapes=(({2: h},),))
    with pytest.raises(ValueError, match="integer scale factors"):
        convert(ep)
