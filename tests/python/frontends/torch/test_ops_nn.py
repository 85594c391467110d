"""The torch.export importer's less common neural-network operators, op by op against torch eager,
in both dialects (TRAINING as exported, core ATen after run_decompositions): grid sampling,
cdist / pdist, embedding_bag, fold / unfold, adaptive 3-d average pooling, cosine similarity,
bilinear, aminmax, dilated max pooling, max pooling's indices and max_unpool2d / 3d."""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F
from support.torch_util import DIALECTS, Fn, check, convert, export, r, ri

torch.manual_seed(0)



def grid(*s: int) -> torch.Tensor:
    return torch.rand(*s) * 2.6 - 1.3  # some points outside [-1, 1]


def gs(mode: str, pad: str, align: bool) -> Callable[..., Any]:
    return lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=pad, align_corners=align)


def grid_all(x: torch.Tensor, g: torch.Tensor) -> tuple:
    """Every mode, padding and align_corners of F.grid_sample."""
    return tuple(F.grid_sample(x, g, mode=m, padding_mode=p, align_corners=a)
                 for m in ("bilinear", "nearest", "bicubic") for p in ("zeros", "border", "reflection")
                 for a in (False, True))


def cdist_all(x: torch.Tensor, y: torch.Tensor, big: torch.Tensor) -> tuple:
    """p = 2 direct (< 26 rows), by matmul (> 25 rows or by compute_mode), forced direct; other p;
    broadcast batch dims."""
    return (torch.cdist(x, y), torch.cdist(big, y), torch.cdist(x, y, compute_mode="use_mm_for_euclid_dist"),
            torch.cdist(big, y, compute_mode="donot_use_mm_for_euclid_dist"), torch.cdist(x, y[0, :3], p=1.0),
            torch.cdist(x.round(), y.round(), p=0.0), torch.cdist(x, y, p=float("inf")), torch.cdist(x, y, p=3.5))


def ebag_2d(w: torch.Tensor, i: torch.Tensor) -> tuple:
    """2-D input (no offsets): each mode, with and without padding_idx (negative, wrapped)."""
    return tuple(F.embedding_bag(i, w, mode=m, padding_idx=p) for m in ("sum", "mean", "max") for p in (None, 2, -1))


def ebag_offsets(w: torch.Tensor, i: torch.Tensor, o: torch.Tensor, p: torch.Tensor) -> tuple:
    """1-D input with offsets (an empty bag): each mode, padding, per_sample_weights,
    include_last_offset."""
    return (*(F.embedding_bag(i, w, o, mode=m) for m in ("sum", "mean", "max")),
            *(F.embedding_bag(i, w, o, mode=m, padding_idx=0) for m in ("sum", "mean", "max")),
            F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p),
            *(F.embedding_bag(i, w, torch.cat([o, o.new_tensor([i.numel()])]), mode=m, include_last_offset=True)
              for m in ("sum", "mean", "max")))


def unpool(x: torch.Tensor) -> tuple:
    y, i = F.max_pool2d(x, 2, return_indices=True)
    y2, i2 = F.max_pool2d(x, 3, stride=2, padding=1, return_indices=True)
    return (F.max_unpool2d(y, i, 2, output_size=x.shape[-2:]),
            F.max_unpool2d(y2, i2, 3, stride=2, padding=1, output_size=x.shape[-2:]), F.max_unpool2d(y[0], i[0], 2, output_size=x.shape[-2:]))


# ties: small integers as floats, so the first maximum's index is what is checked
TIES = ri(3, 1, 2, 6, 7).float()
# NaNs: torch's index is the last NaN in the window
NANS = torch.where(torch.rand(1, 2, 5, 6) < 0.15, float("nan"), r(1, 2, 5, 6))
# padding_idx 0 (entries), 2 and 9 (2-d input); bags [0, 2), [2, 2), [2, 5), [5, 7)
EB_IDX = torch.tensor([0, 3, 1, 0, 4, 0, 0])
EB_2D = torch.tensor([[2, 2, 2], [1, 2, 3], [4, 5, 2], [9, 9, 9], [1, 9, 3]])

CASES = {
    "grid_sample": (grid_all, (r(2, 3, 5, 6), grid(2, 4, 7, 2) * 1.5)),
    "grid_sample_3d": (lambda x, g: tuple(F.grid_sample(x, g, mode=m, padding_mode=p, align_corners=a)
                                          for m in ("bilinear", "nearest") for p in ("zeros", "border", "reflection")
                                          for a in (False, True)),
                       (r(2, 2, 3, 4, 5), grid(2, 2, 3, 4, 3) * 1.5)),
    "cdist": (cdist_all, (r(2, 4, 3), r(2, 5, 3), r(2, 30, 3))),
    "pdist": (lambda x: (F.pdist(x), F.pdist(x, p=1.0), F.pdist(x, p=float("inf")), F.pdist(x, p=0.5)), (r(5, 3),)),
    "embedding_bag_2d": (ebag_2d, (r(10, 3), EB_2D)),
    "embedding_bag_offsets": (ebag_offsets, (r(10, 3), EB_IDX, torch.tensor([0, 2, 2, 5]), r(7))),
    "unfold": (lambda x: (F.unfold(x, (2, 3)), F.unfold(x, (2, 3), dilation=(2, 1), padding=1, stride=(2, 1)),
                          F.unfold(x[0], 2, stride=2)), (r(2, 3, 6, 7),)),
    "fold": (lambda x, y, z: (F.fold(x, (4, 5), (2, 2)), F.fold(y, (7, 6), (2, 3), dilation=(2, 1), padding=1, stride=(2, 1)),
                              F.fold(z, (5, 5), 2, stride=2), F.fold(x[0], (4, 5), (2, 2))),
             (r(2, 12, 12), r(2, 18, 24), r(2, 8, 4))),
    "adaptive_avg_pool3d": (lambda x: (F.adaptive_avg_pool3d(x, (2, 3, 2)), F.adaptive_avg_pool3d(x, (2, 5, 1)),
                                       F.adaptive_avg_pool3d(x, 1)), (r(2, 2, 4, 5, 3),)),
    "cosine_similarity": (lambda x, y, z: (F.cosine_similarity(x, y), F.cosine_similarity(x[:, :1], y, dim=1),
                                           F.cosine_similarity(z * 0.1, y[0], dim=-1, eps=0.5),
                                           F.cosine_similarity(x * 0, y)),
                          (r(3, 4), r(3, 4), r(2, 3, 4))),
    "bilinear": (lambda x, y, w, b: (F.bilinear(x, y, w, b), F.bilinear(x.reshape(2, 2, 4), y.reshape(2, 2, 5), w)),
                 (r(4, 4), r(4, 5), r(6, 4, 5), r(6))),
    "trilinear": (lambda a, b, c: torch.ops.aten._trilinear(a, b, c, [2], [0], [1], [1]), (r(2, 3), r(3, 4), r(2, 4))),
    "aminmax": (lambda x, i: (*torch.aminmax(x, dim=1), *torch.aminmax(x, dim=-1, keepdim=True), *torch.aminmax(x),
                              *torch.aminmax(x, keepdim=True), *torch.aminmax(i, dim=0), *torch.aminmax(x > 0, dim=0)),
                (r(2, 3, 4), ri(9, 3, 4) - 4)),
    "max_pool_dilated": (lambda x, y, z: (F.max_pool2d(x, 3, stride=2, padding=1, dilation=2),
                                          F.max_pool2d(x, 2, stride=2, dilation=(2, 3), ceil_mode=True),
                                          F.max_pool2d(x[0], 2, dilation=2),
                                          F.max_pool1d(y, 3, stride=1, padding=1, dilation=2),
                                          F.max_pool3d(z, 2, stride=1, dilation=2)),
                         (r(2, 3, 9, 10), r(2, 3, 9), r(1, 2, 5, 5, 5))),
    "max_pool_indices": (lambda x, t, nan: (*F.max_pool2d(x, 2, return_indices=True),
                                       *F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, return_indices=True),
                                       *F.max_pool2d(t, 3, stride=1, padding=1, return_indices=True),
                                       *F.max_pool2d(x[0], 2, dilation=2, return_indices=True),
                                       F.max_pool2d(x * 0 - float("inf"), 2, padding=1, return_indices=True)[1],
                                       F.max_pool2d(nan, 3, stride=1, padding=1, return_indices=True)[1]),
                         (r(2, 3, 8, 9), TIES, NANS)),
    "max_pool_indices_1d_3d": (lambda x, y: (*F.max_pool1d(x, 3, stride=2, padding=1, return_indices=True),
                                             *F.max_pool3d(y, 2, return_indices=True)),
                               (r(2, 3, 9), r(1, 2, 4, 4, 5))),
    "max_unpool2d": (unpool, (r(2, 3, 5, 7),)),
    "max_unpool3d": (lambda x: F.max_unpool3d(*F.max_pool3d(x, 2, stride=2, padding=1, return_indices=True), 2, stride=2,
                                              padding=1, output_size=x.shape[-3:]), (r(1, 2, 4, 5, 3),)),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_op(name: str, dialect: str) -> None:
    fn, args = CASES[name]
    check(Fn(fn), args, dialect)


@pytest.mark.parametrize("name", ["grid_sample", "embedding_bag_offsets", "cdist"])
def test_op_fp16(name: str) -> None:
    fn, args = CASES[name]
    check(Fn(fn), args, "core", rtol=2e-2, precision="fp16")


# ---- dynamic shapes ------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
def test_embedding_bag_dynamic(dialect: str) -> None:
    n = torch.export.Dim("n", min=2, max=64)
    b = torch.export.Dim("b", min=2, max=16)
    fn = Fn(lambda w, i, o: F.embedding_bag(i, w, o, mode="mean"))
    check(fn, (r(10, 3), ri(10, 7), torch.tensor([0, 2, 5])), dialect,
          dynamic_shapes=(({}, {0: n}, {0: b}),),
          more_args=[(r(10, 3), ri(10, 11), torch.tensor([0, 1, 1, 6, 9]))])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_cdist_dynamic(dialect: str) -> None:
    # torch guards on the side of 25 rows the example is on: direct below, matmul above
    small, big = torch.export.Dim("small", min=2, max=25), torch.export.Dim("big", min=26, max=64)
    fn = Fn(lambda x, y: torch.cdist(x, y))
    check(fn, (r(4, 3), r(5, 3)), dialect, dynamic_shapes=(({0: small}, {}),), more_args=[(r(20, 3), r(5, 3))])
    check(fn, (r(30, 3), r(5, 3)), dialect, dynamic_shapes=(({0: big}, {}),), more_args=[(r(40, 3), r(5, 3))])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_grid_sample_dynamic(dialect: str) -> None:
    h = torch.export.Dim("h", min=2, max=64)
    fn = Fn(gs("bilinear", "zeros", False))
    check(fn, (r(1, 2, 5, 6), grid(1, 5, 3, 2)), dialect, dynamic_shapes=(({2: h}, {1: h}),),
          more_args=[(r(1, 2, 9, 6), grid(1, 9, 3, 2))])


def batch_ops(x: torch.Tensor) -> tuple:
    cols = F.unfold(x, 2, padding=1)
    y, i = F.max_pool2d(x, 2, dilation=2, return_indices=True)
    return cols, F.fold(cols, (6, 7), 2, padding=1), y, i, F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2, output_size=[6, 7])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_dynamic_batch(dialect: str) -> None:
    b = torch.export.Dim("b", min=2, max=16)
    check(Fn(batch_ops), (r(2, 3, 6, 7),), dialect, dynamic_shapes=(({0: b},),), more_args=[(r(5, 3, 6, 7),)])


# ---- what fails, and how -----------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
def test_grid_sample_bicubic_dynamic_fails(dialect: str) -> None:
    h = torch.export.Dim("h", min=2, max=64)
    ep = export(Fn(gs("bicubic", "zeros", False)), (r(1, 2, 5, 6), grid(1, 4, 3, 2)), dialect,
                dynamic_shapes=(({2: h}, {}),))
    with pytest.raises(ValueError, match="bicubic grid sampling needs the shapes"):
        convert(ep)




@pytest.mark.parametrize("dialect", DIALECTS)
def test_embedding_bag_later_output_fails(dialect: str) -> None:
    def fn(w: torch.Tensor, i: torch.Tensor, o: torch.Tensor) -> Any:
        out = torch.ops.aten._embedding_bag(w, i, o, False, 0)
        return out[0], out[1]

    ep = export(Fn(fn), (r(10, 3), ri(10, 6), torch.tensor([0, 2])), dialect)
    with pytest.raises(ValueError, match="offset2bag"):
        convert(ep)
