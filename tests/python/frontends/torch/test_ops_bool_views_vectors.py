"""Bool and integer bitwise arithmetic, *_copy view variants, broadcast_tensors and vector
products of the torch.export importer, against torch eager in both dialects (TRAINING as exported,
core ATen after run_decompositions): ~ of bool and integer tensors, + and * of bool tensors (logical
or / and, bool result), transpose_copy / t_copy / narrow_copy / diagonal_copy / unfold_copy /
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
