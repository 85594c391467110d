"""The torch.export importer's norms against torch eager: vector and matrix norms (linalg.norm,
linalg.matrix_norm, torch.norm), p-norms in FLOAT16, batch norm by batch statistics, weight norm.
Both dialects (TRAINING as exported, core ATen after run_decompositions); fp32 within 1e-4 of the
largest reference value, fp16 within 2e-2."""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F
from support.torch_util import DIALECTS, Fn, check, convert, export, r

torch.manual_seed(0)

INF = float("inf")

# ---- vector and matrix norms -----------------------------------------------------------------------

NORMS = {
    "linalg_norm_flat": (lambda x: torch.linalg.norm(x), (r(3, 4, 5),)),
    "linalg_norm_dims_no_ord": (lambda x: torch.linalg.norm(x, dim=(1, 2), keepdim=True), (r(3, 4, 5),)),
    "linalg_norm_dim_no_ord": (lambda x: torch.linalg.norm(x, dim=-1), (r(3, 4, 5),)),
    "linalg_norm_vec_2": (lambda x: torch.linalg.norm(x, 2, dim=-1, keepdim=True), (r(3, 4, 5),)),
    "linalg_norm_vec_1": (lambda x: torch.linalg.norm(x, 1, dim=1), (r(3, 4, 5),)),
    "linalg_norm_vec_3": (lambda x: torch.linalg.norm(x, 3, dim=1), (r(3, 4, 5),)),
    "linalg_norm_vec_half": (lambda x: torch.linalg.norm(x, 0.5, dim=0), (r(3, 4, 5),)),
    "linalg_norm_vec_0": (lambda x: torch.linalg.norm(x * (x > 0), 0, dim=2), (r(3, 4, 5),)),
    "linalg_norm_vec_neg1": (lambda x: torch.linalg.norm(x, -1, dim=1), (r(3, 4, 5),)),
    "linalg_norm_vec_inf": (lambda x: torch.linalg.norm(x, INF, dim=1), (r(3, 4, 5),)),
    "linalg_norm_vec_neginf": (lambda x: torch.linalg.norm(x, -INF, dim=[2], keepdim=True), (r(3, 4, 5),)),
    "linalg_norm_1d_ord": (lambda x: torch.linalg.norm(x, 3), (r(7),)),
    "linalg_norm_2d_ord_1": (lambda x: torch.linalg.norm(x, 1), (r(4, 5),)),
    "linalg_norm_2d_ord_inf": (lambda x: torch.linalg.norm(x, INF), (r(4, 5),)),
    "linalg_norm_2d_fro": (lambda x: torch.linalg.norm(x, "fro"), (r(4, 5),)),
    "linalg_norm_mat_1": (lambda x: torch.linalg.norm(x, 1, dim=(0, 1)), (r(3, 4, 5),)),
    "linalg_norm_mat_neg1": (lambda x: torch.linalg.norm(x, -1, dim=(1, 2), keepdim=True), (r(3, 4, 5),)),
    "linalg_norm_mat_inf": (lambda x: torch.linalg.norm(x, INF, dim=(2, 0)), (r(3, 4, 5),)),
    "linalg_norm_mat_neginf": (lambda x: torch.linalg.norm(x, -INF, dim=(-1, -2)), (r(3, 4, 5),)),
    "linalg_norm_mat_fro": (lambda x: torch.linalg.norm(x, "fro", dim=(0, 2), keepdim=True), (r(3, 4, 5),)),
    "linalg_norm_dtype": (lambda x: torch.linalg.norm(x, 3, dim=1, dtype=torch.float32), (r(3, 4, 5),)),
    "matrix_norm_default": (lambda x: torch.linalg.matrix_norm(x), (r(3, 4, 5),)),
    "matrix_norm_1": (lambda x: torch.linalg.matrix_norm(x, 1), (r(3, 4, 5),)),
    "matrix_norm_inf_dims": (lambda x: torch.linalg.matrix_norm(x, -INF, dim=(0, 2), keepdim=True), (r(3, 4, 5),)),
    "vector_norm_0": (lambda x: torch.linalg.vector_norm(x * (x > 0), 0), (r(3, 4),)),
    "torch_norm_p3": (lambda x: torch.norm(x, 3, dim=1), (r(3, 4, 5),)),
    "torch_norm_fro": (lambda x: torch.norm(x, "fro"), (r(3, 4, 5),)),
    "torch_norm_fro_dims": (lambda x: torch.norm(x, "fro", dim=(1, 2)), (r(3, 4, 5),)),
    "tensor_norm_p1": (lambda x: x.norm(p=1, dim=(0, 1), keepdim=True), (r(3, 4, 5),)),
    "tensor_norm_inf": (lambda x: x.norm(p=INF), (r(3, 4, 5),)),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(NORMS))
def test_norm(name: str, dialect: str) -> None:
    fn, args = NORMS[name]
    check(Fn(fn), args, dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_norms_symbolic_batch(dialect: str) -> None:
    b = torch.export.Dim("b", min=2, max=16)
    fn = Fn(lambda x: (torch.linalg.norm(x, 3, dim=-1), torch.linalg.norm(x, "fro", dim=(1, 2)), torch.linalg.norm(x)))
    check(fn, (r(3, 4, 5),), dialect, dynamic_shapes=(({0: b},),), more_args=[(r(6, 4, 5),)])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("ord_", [2, -2, "nuc"])
def test_matrix_norm_needing_singular_values_is_refused(ord_, dialect: str) -> None:
    ep = export(Fn(lambda x: torch.linalg.norm(x, ord_, dim=(0, 1))), (r(4, 5),), dialect)
    with pytest.raises(ValueError, match="no singular value decomposition"):
        convert(ep)


# ---- p-norms in FLOAT16 -----------------------------------------------------------------------------


class GroupNormByNorms(torch.nn.Module):
    """Group-norm-like: each group scaled to unit 2-norm and by its largest entry, then an affine map."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.rand(8) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = x.reshape(x.shape[0], 2, -1)
        y = g / g.norm(dim=-1, keepdim=True).clamp_min(1e-6) + g / torch.linalg.vector_norm(g, INF, -1, True)
        return y.reshape_as(x) * self.w[None, :, None]


FP16 = {
    "normalize": Fn(lambda x: F.normalize(x * 300, dim=-1)),
    "vector_norm_2": Fn(lambda x: torch.linalg.vector_norm(x * 300, 2, dim=-1)),
    "vector_norm_1": Fn(lambda x: torch.linalg.vector_norm(x * 30, 1, dim=-1)),
    "vector_norm_3": Fn(lambda x: torch.linalg.vector_norm(x * 300, 3, dim=-1)),
    "vector_norm_4": Fn(lambda x: torch.linalg.vector_norm(x * 300, 4, dim=(1, 2), keepdim=True)),
    "vector_norm_inf": Fn(lambda x: torch.linalg.vector_norm(x * 300, INF, dim=-1)),
    "vector_norm_half": Fn(lambda x: torch.linalg.vector_norm(x, 0.5, dim=-1)),
    "norm_all": Fn(lambda x: (x * 300).norm()),
    "group_norm_like": GroupNormByNorms(),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(FP16))
def test_p_norm_fp16(name: str, dialect: str) -> None:
    check(FP16[name], (r(2, 8, 16),), dialect, precision="fp16", rtol=2e-2)


def test_zero_input_norms() -> None:
    fn = Fn(lambda x: (torch.linalg.vector_norm(x * 0, 3, dim=-1), torch.linalg.vector_norm(x * 0, -2, dim=-1)))
    for precision in ("fp32", "fp16"):
        check(fn, (r(2, 5),), "training", precision=precision, rtol=2e-2)


# ---- batch norm by batch statistics -----------------------------------------------------------------


class StandardizedConv(torch.nn.Module):
    """A conv whose weight is standardized per output channel by batch_norm in training form."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 3, 3, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = F.batch_norm(self.w.reshape(1, 4, -1), None, None, training=True, momentum=0.0, eps=1e-5)
        return F.conv2d(x, w.reshape_as(self.w))


class BatchStatsNorm(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.g = torch.nn.Parameter(torch.rand(3) + 0.5)
        self.b = torch.nn.Parameter(torch.randn(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, None, None, self.g, self.b, training=True, eps=1e-3)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_batch_norm_batch_statistics_on_weights(dialect: str, precision: str) -> None:
    check(StandardizedConv(), (r(1, 3, 8, 8),), dialect, precision=precision, rtol=1e-4 if precision == "fp32" else 2e-2)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_batch_norm_batch_statistics_on_activations(dialect: str) -> None:
    check(BatchStatsNorm(), (r(2, 3, 4, 5),), dialect)
    check(BatchStatsNorm(), (r(4, 3),), dialect)
    b = torch.export.Dim("b", min=2, max=16)
    check(BatchStatsNorm(), (r(2, 3, 4, 5),), dialect, dynamic_shapes=({0: b},), more_args=[(r(5, 3, 4, 5),)])


def test_batch_norm_training_with_running_statistics_is_refused() -> None:
    class WithStats(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("rm", torch.zeros(3))
            self.register_buffer("rv", torch.ones(3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.batch_norm(x, self.rm, self.rv, training=True)

    for dialect in DIALECTS:
        with pytest.raises(ValueError, match="training mode"):
            convert(export(WithStats(), (r(2, 3, 4),), dialect))


# ---- weight norm ------------------------------------------------------------------------------------


def _weight_norm_module(kind: str, dim: int, old: bool) -> torch.nn.Module:
    layer = torch.nn.Conv1d(4, 6, 3) if kind == "conv1d" else torch.nn.Linear(5, 6)
    wn = torch.nn.utils.weight_norm if old else torch.nn.utils.parametrizations.weight_norm
    with pytest.warns(FutureWarning) if old else contextlib.nullcontext():
        m = wn(layer, dim=dim)
    with torch.no_grad():  # g away from ||v|| so the norm matters
        for name, p in m.named_parameters():
            if name.endswith(("weight_g", "original0")):
                p.mul_(torch.rand(p.shape) + 0.5)
    return m


WEIGHT_NORM = [("conv1d", 0), ("conv1d", 2), ("conv1d", -1), ("conv1d", 1), ("linear", 0), ("linear", 1), ("linear", -1)]


@pytest.mark.parametrize("old", [False, True], ids=["parametrization", "hook"])
@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kind,dim", WEIGHT_NORM)
def test_weight_norm(kind: str, dim: int, dialect: str, old: bool) -> None:
    m = _weight_norm_module(kind, dim, old)
    x = r(2, 4, 9) if kind == "conv1d" else r(3, 5)
    check(m, (x,), dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_weight_norm_fp16(dialect: str) -> None:
    check(_weight_norm_module("conv1d", 2, False), (r(1, 4, 9),), dialect, precision="fp16", rtol=2e-2)


# ---- negative indices in FLOAT16 --------------------------------------------------------------------


def _written_index(x: torch.Tensor, i: torch.Tensor) -> tuple:
    first = x[torch.tensor([3, 1])]  # a constant index before the computed one
    ids = i.index_put((torch.tensor([0]),), torch.tensor(-1))
    return first, x[ids], x[ids, i.clamp(max=2)]


def _input_index(x: torch.Tensor, i: torch.Tensor) -> tuple:
    return x[torch.tensor([0, 1])], x[i], x[:, i.clamp(max=2)]


NEGATIVE_INDEX = {"written_by_index_put": _written_index, "input": _input_index}


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(NEGATIVE_INDEX))
def test_negative_computed_index(name: str, dialect: str, precision: str) -> None:
    check(Fn(NEGATIVE_INDEX[name]), (r(5, 3), torch.tensor([-2, 1, 4])), dialect, precision=precision,
          rtol=1e-4 if precision == "fp32" else 2e-2)
