"""Bool and integer bitwise arithmetic, *_copy view variants, broadcast_tensors and vector
products of the torch.export importer, against torch eager in both dialects (TRAINING as exported,
core ATen after run_decompositions): ~ of bool and integer tensors, + and * of bool tensors (logical
or / and, bool result), comparisons of bool tensors, transpose_copy / t_copy / narrow_copy / diagonal_copy / unfold_copy /
split_copy, broadcast_tensors, mv, linalg.vecdot, hstack, fliplr / flipud and atleast_1d/2d/3d."""

from __future__ import annotations

import pytest
import torch
from support.torch_util import DIALECTS, Fn, check, r, ri

torch.manual_seed(0)

CASES = {
    # ~x: logical not of a bool, every bit flipped for an integer (two's complement)
    "bitwise_not_bool": (lambda x: (torch.bitwise_not(x > 0), ~(x < 0.5)), (r(3, 4),)),
    "bitwise_not_int64": (lambda x: (torch.bitwise_not(x), ~x + 1), (ri(20, 3, 4) - 10,)),
    "bitwise_not_int32": (lambda x: ~x, (ri(20, 5).int() - 10,)),
    "bitwise_not_uint8": (lambda x: ~x, (torch.tensor([0, 1, 7, 128, 254, 255], dtype=torch.uint8),)),
    # torch keeps bool for + and * of bools: logical or, logical and
    "add_bool": (lambda x, y: ((x > 0) + (y > 0), torch.add(x > 0, y < 0)), (r(3, 4), r(4))),
    "mul_bool": (lambda x, y: ((x > 0) * (y > 0), torch.mul(x > 0, True), (x > 0) * False), (r(3, 4), r(4))),
    "add_mul_bool_mixed": (lambda x, y: ((x > 0) + (y > 0) * (x < 1), ((x > 0) + (y > 0)).float() * x),
                           (r(3, 4), r(3, 4))),
    # comparisons of bools (as 0 / 1)
    "compare_bool": (lambda x, y: ((x > 0) == (y > 0), (x > 0) != (y > 0), (x > 0) == True,  # noqa: E712
                                   (x > 0) > (y > 0), (x > 0) <= (y < 0)), (r(3, 4), r(4))),
    # *_copy variants convert as their views
    "transpose_copy": (lambda x: (torch.transpose_copy(x, 0, 2), torch.transpose_copy(x, -1, 1),
                                  torch.t_copy(x[0]), torch.t_copy(x[0, 0])), (r(2, 3, 4),)),
    "permute_copy": (lambda x: torch.permute_copy(x, (2, 0, 1)), (r(2, 3, 4),)),
    "narrow_diagonal_copy": (lambda x: (torch.narrow_copy(x, 1, 1, 2), torch.diagonal_copy(x, 1, 1, 2),
                                        torch.diagonal_copy(x[0])), (r(2, 3, 4),)),
    "unfold_split_copy": (lambda x: (torch.ops.aten.unfold_copy(x, 2, 2, 1),)
                          + tuple(torch.split_copy(x, 2, dim=-1)), (r(2, 3, 5),)),
    "broadcast_tensors": (lambda x, y, z: torch.broadcast_tensors(x, y, z), (r(2, 1, 4), r(3, 1), r(()))),
    "broadcast_tensors_same": (lambda x, y: torch.broadcast_tensors(x, y * 2), (r(2, 3), r(2, 3))),
    "broadcast_tensors_int_bool": (lambda x, y: torch.broadcast_tensors(x, y > 0), (ri(5, 3, 1), r(4))),
    # vector products
    "mv": (lambda a, v: (torch.mv(a, v), a.mv(v * 2)), (r(3, 4), r(4))),
    "linalg_vecdot": (lambda x, y: (torch.linalg.vecdot(x, y), torch.linalg.vecdot(x, y, dim=1),
                                    torch.linalg.vecdot(x[0], y, dim=-2)), (r(2, 3, 4), r(3, 4))),
    # stacking, flipping, minimum ranks
    "hstack": (lambda x, y, z: (torch.hstack((x, y)), torch.hstack((z, z * 2, z[:1])), torch.hstack((x,))),
               (r(2, 3), r(2, 4), r(3))),
    "hstack_0d": (lambda x, y: torch.hstack((x, y, x)), (r(()), r(()))),
    "hstack_promote": (lambda x, y: torch.hstack((x, y)), (r(2, 3, 2), ri(5, 2, 1, 2))),
    "fliplr_flipud": (lambda x, y: (torch.fliplr(x), torch.flipud(x), torch.flipud(y), torch.fliplr(x[0])),
                      (r(2, 3, 4), r(5))),
    "atleast": (lambda x, y, z, w: (torch.atleast_1d(x), torch.atleast_2d(x), torch.atleast_3d(x),
                                    torch.atleast_1d(y), torch.atleast_2d(y), torch.atleast_3d(y),
                                    torch.atleast_2d(z), torch.atleast_3d(z), torch.atleast_3d(w),
                                    torch.atleast_1d(w)), (r(()), r(3), r(2, 3), r(2, 3, 4))),
    "atleast_sequence": (lambda x, y, z: torch.atleast_1d((x, y)) + torch.atleast_2d((x, y, z))
                         + torch.atleast_3d((x, y, z)) + torch.atleast_3d([z]), (r(()), r(3), r(2, 3))),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_op(name: str, dialect: str) -> None:
    fn, args = CASES[name]
    check(Fn(fn), args, dialect)


B = torch.export.Dim("b", min=2, max=16)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_broadcast_tensors_dynamic(dialect: str) -> None:
    # a symbolic size broadcast against 1 and against itself
    check(Fn(lambda x, y: torch.broadcast_tensors(x, y)), (r(3, 1), r(1, 4)), dialect,
          dynamic_shapes=(({0: B}, None),), more_args=[(r(6, 1), r(1, 4))])


@pytest.mark.parametrize("name", ["mv", "linalg_vecdot", "hstack"])
def test_op_fp16(name: str) -> None:
    fn, args = CASES[name]
    check(Fn(fn), args, "training", rtol=2e-2, precision="fp16")

