"""More tensor operators of the torch.export importer, against torch eager in both dialects
(TRAINING as exported, core ATen after run_decompositions): scatter_reduce, masked_scatter,
empty_strided, nonzero, tensor_split, meshgrid, diag, trace, rot90, linspace, tri*_indices,
take_along_dim, index_add, index_fill, mT, eye, outer, kron, cross, channel_shuffle and circular
padding. Most of the TRAINING-dialect ops decompose into ops the importer already knows in core
ATen; scatter_reduce, masked_scatter, empty_strided, triu/tril_indices and nonzero stay."""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F
from support.torch_util import DIALECTS, Fn, check, r, ri

torch.manual_seed(0)



# an index with repeats and every position of a length-5 dim hit except 3
IDX = torch.tensor([[0, 4, 4, 1], [2, 2, 0, 0], [1, 1, 1, 4]])
REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _sr_all(include_self: bool) -> Callable[..., Any]:
    return lambda x, i, s: tuple(x.scatter_reduce(1, i, s, red, include_self=include_self) for red in REDUCTIONS)


# several variants per case where they share inputs: core ATen's run_decompositions dominates the
# time of a case
CASES = {
    # core ATen
    "scatter_reduce_self": (_sr_all(True), (r(3, 5), IDX, r(3, 4))),
    "scatter_reduce_noself": (_sr_all(False), (r(3, 5), IDX, r(3, 4))),
    # negative dim; an index smaller than self off dim and than src (torch reads src's leading
    # block): scatter_nd with full coordinates
    "scatter_reduce_small_index": (lambda x, i, s: (x.scatter_reduce(-1, i, s, "sum"),
                                                    x.scatter_reduce(-1, i, s, "amin", include_self=False)),
                                   (r(3, 5), IDX[:2, :3], r(3, 4))),
    "scatter_reduce_int": (lambda x, i, s: (x.scatter_reduce(1, i, s, "amax", include_self=False),
                                            x.scatter_reduce(1, i, s, "mean"),
                                            x.scatter_reduce(1, i, s, "mean", include_self=False)),
                           (ri(20, 3, 5) - 10, IDX, ri(20, 3, 4) - 10)),
    "scatter_reduce_dim0": (lambda x, i, s: x.scatter_reduce(0, i, s, "prod", include_self=False),
                            (r(4, 3), torch.tensor([[3, 0, 3], [3, 1, 0]]), r(2, 3))),
    "masked_scatter": (lambda x, m, s: (x.masked_scatter(m > 0, s), x.masked_scatter(m[0] > 0, s)),
                       (r(3, 4), r(3, 4), r(13))),
    "masked_scatter_int": (lambda x, m, s: x.masked_scatter(m, s), (ri(9, 2, 3), r(2, 3) > 0, ri(9, 6) + 10)),
    "empty_strided": (lambda x: (x + torch.empty_strided((3, 4), (4, 1)).zero_(),
                                 x.new_empty_strided((3, 4), (1, 3)).fill_(2) * x), (r(3, 4),)),
    "tri_indices": (lambda x, y: (x[tuple(torch.triu_indices(3, 4, 1))], y[tuple(torch.tril_indices(4, 3, -1))],
                                  torch.tril_indices(3, 3) + x[:1, :1].long()), (r(3, 4), r(4, 3))),
    # TRAINING-dialect composites (core ATen decomposes them)
    "tensor_split": (lambda x: torch.tensor_split(x, 3, dim=1) + torch.tensor_split(x, [1, 4], dim=-1)
                     + torch.tensor_split(x, 2), (r(2, 7),)),
    # negative indices are slice bounds
    "tensor_split_neg": (lambda x: torch.tensor_split(x, [2, -2, 5], dim=0) + torch.tensor_split(x, [-1], dim=1),
                         (r(6, 3),)),
    "meshgrid": (lambda x, y, z: torch.meshgrid(x, y, z, indexing="ij") + torch.meshgrid(x, y, z, indexing="xy")
                 + torch.meshgrid(x, y, indexing="xy"), (r(3), r(4), r(2))),
    "diag_1d": (lambda x, y: (torch.diag(x), torch.diag(x, 2), torch.diag(x, -1), torch.diag(y, -2)),
                (r(3), ri(9, 3) + 1)),
    "diag_2d": (lambda x: (torch.diag(x), torch.diag(x, 1), torch.diag(x, -2), torch.diag(x.T, -1)), (r(3, 4),)),
    "trace": (lambda x, y: (torch.trace(x), torch.trace(y)), (r(3, 4), ri(9, 4, 3))),
    "rot90": (lambda x: (torch.rot90(x), torch.rot90(x, 2, [1, 2]), torch.rot90(x, -1, [-1, 0]), torch.rot90(x, 4),
                         torch.rot90(x, 3, [2, 1])), (r(2, 3, 4),)),
    # int linspace truncates each value
    "linspace": (lambda x: (x + torch.linspace(-1, 2, 7), x[:1] + torch.linspace(3, 5, 1),
                            x[:4].long() + torch.linspace(0, 10, 4, dtype=torch.int64),
                            torch.linspace(-3, 7, 6, dtype=torch.int32) + x[:6].int()), (r(7) * 3,)),
    "take_along_dim": (lambda x, i: (torch.take_along_dim(x, i, dim=1), torch.take_along_dim(x, i - 4, dim=-1),
                                     torch.take_along_dim(x, i[:2, :1], dim=0), torch.take_along_dim(x, i)),
                       (r(3, 4), ri(4, 3, 6))),
    "index_add": (lambda x, i, s, y, t: (x.index_add(0, i, s), x.T.index_add(-1, i, s.T, alpha=2.5),
                                         y.index_add(1, i[1:3], t, alpha=3)),
                  (r(5, 3), torch.tensor([0, 2, 2, 4]), r(4, 3), ri(9, 2, 3), ri(9, 2, 2))),
    # negative and 0-d indices
    "index_fill": (lambda x, i, v, y: (x.index_fill(1, i, -1.0), x.index_fill(-1, i - 3, 7), x.index_fill(0, i[1:], v),
                                       y.index_fill(1, i[0] - 1, 7)),
                   (r(3, 4), torch.tensor([0, 2]), torch.tensor(0.5), ri(5, 2, 3, 4))),
    "mT_eye": (lambda x, y: (x.mT, y + torch.eye(3), torch.eye(3, 5, dtype=torch.int32) + y[:, :1].int(),
                             torch.eye(2, dtype=torch.bool)), (r(2, 3, 4), r(3, 3))),
    "outer_kron": (lambda x, y, z: (torch.outer(x, y), torch.outer(x.long(), y), torch.kron(z, z[:2, :2]),
                                    torch.kron(x, z.reshape(2, 3, 2))), (r(3), r(4), r(4, 3))),
    "cross": (lambda x, y, z: (torch.linalg.cross(x, y), torch.cross(x, y, dim=1), torch.cross(z, z.flip(0)),
                               torch.linalg.cross(z.permute(1, 0, 2), x[:1].T.unsqueeze(1), dim=0)),
              (r(4, 3), r(4, 3), r(2, 3, 3))),
    "channel_shuffle": (lambda x: (F.channel_shuffle(x, 2), F.channel_shuffle(x.flatten(2), 3)), (r(2, 6, 2, 3),)),
    "channel_shuffle_mod": (torch.nn.ChannelShuffle(3), (r(2, 6, 5),)),
    # torch crops negative pads first, then wraps around the rest
    "pad_circular": (lambda x, y: (F.pad(x, (1, 2, 2, 1), mode="circular"), F.pad(x[0], (-1, 3), mode="circular"),
                                   F.pad(y, (1, 1, 0, 2, 1, 0), mode="circular")), (r(1, 2, 3, 4), r(1, 1, 2, 3, 4))),
    "conv2d_circular": (torch.nn.Conv2d(2, 3, 3, padding=1, padding_mode="circular"), (r(1, 2, 5, 6),)),
    "conv1d_circular": (torch.nn.Conv1d(2, 3, 3, padding=2, padding_mode="circular"), (r(1, 2, 7),)),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_op(name: str, dialect: str) -> None:
    fn, args = CASES[name]
    mod = fn if isinstance(fn, torch.nn.Module) else Fn(fn)
    with torch.no_grad():
        for p in mod.parameters():
            p.copy_(torch.randn_like(p))
    check(mod, args, dialect)


B = torch.export.Dim("b", min=2, max=16)

# symbolic sizes: (fn, args, dynamic_shapes, other args to run)
DYNAMIC = {
    # x.numel() of a dynamic tensor exports as aten.sym_numel (TRAINING) / sym_size * 4 (core)
    "sym_numel": (lambda x: x.reshape(-1) * x.numel(), (r(3, 4),), ({0: B},), [(r(5, 4),)]),
    "meshgrid": (lambda x, y: torch.meshgrid(x, y, indexing="xy"), (r(3), r(4)), ({0: B}, None), [(r(6), r(4))]),
    "diag_1d": (lambda x: torch.diag(x, 1), (r(3),), ({0: B},), [(r(5),)]),
    "masked_scatter": (lambda x, s: x.masked_scatter(x > 0, s), (r(3, 4), r(100)), ({0: B}, None), [(r(7, 4), r(100))]),
    "index_fill": (lambda x, i: x.index_fill(0, i, 2.0), (r(3, 4), torch.tensor([0, -1])), ({0: B}, None),
                   [(r(6, 4), torch.tensor([0, -1]))]),
    "index_add": (lambda x, i, s: x.index_add(1, i, s, alpha=2), (r(3, 5), torch.tensor([4, 0, 4]), r(3, 3)),
                  ({0: B}, None, {0: B}), [(r(6, 5), torch.tensor([4, 0, 4]), r(6, 3))]),
    # roll along a symbolic dim: shifts larger than the length and negative ones wrap at run time
    "roll": (lambda x: torch.roll(x, 2, 0) + torch.roll(x, -7, 0) * 10 + torch.roll(x, (5, 1), (0, 1)) * 100,
             (r(3, 4),), ({0: B},), [(r(6, 4),), (r(2, 4),)]),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(DYNAMIC))
def test_dynamic(name: str, dialect: str) -> None:
    fn, args, ds, more = DYNAMIC[name]
    check(Fn(fn), args, dialect, dynamic_shapes=(ds,), more_args=more)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_nonzero(dialect: str) -> None:
    # torch.nonzero's data-dependent row count: MIL's non_zero has its [count, rank] layout
    check(Fn(lambda x: (torch.nonzero(x > 0), torch.argwhere(x[0] > 0.5))), (r(3, 4),), dialect,
          more_args=[(torch.ones(3, 4),), (-torch.ones(3, 4),)])


@pytest.mark.parametrize("fn, args, msg", [
    (lambda x: torch.tensor_split(x, 3), (r(2, 3),), "empty piece"),
    (lambda x: torch.diag(x, 4), (r(3, 3),), "is empty"),
])
def test_unsupported(fn: Callable[..., Any], args: tuple, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        check(Fn(fn), args, "training")
