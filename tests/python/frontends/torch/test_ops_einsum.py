"""The torch.export importer's einsum and diagonal, op by op against torch eager: both dialects (TRAINING as
exported, core ATen after run_decompositions), fp32 within 1e-4 of the largest reference value."""

from __future__ import annotations

import pytest
import torch
from support.torch_util import DIALECTS, Fn, check, r

torch.manual_seed(0)


# ---- einsum ---------------------------------------------------------------------------------------

EINSUM = {
    "bij,bjk->bik": (r(2, 3, 4), r(2, 4, 5)),
    "bhqd,bhkd->bhqk": (r(2, 2, 3, 4), r(2, 2, 5, 4)),
    "ij->ji": (r(3, 4),),
    "ii->i": (r(3, 3),),
    "ii": (r(3, 3),),
    "iij->j": (r(3, 3, 2),),
    "i,j->ij": (r(3), r(4)),
    "bnd,nd->bn": (r(2, 3, 4), r(3, 4)),
    "...ij,...jk->...ik": (r(2, 3, 4), r(2, 4, 5)),
    "...ij,...jk": (r(2, 1, 3, 4), r(5, 4, 2)),
    "ij,jk,kl->il": (r(2, 3), r(3, 4), r(4, 5)),
    "i,i->": (r(5), r(5)),
    "ij->": (r(3, 4),),
    "bij->bj": (r(2, 3, 4),),
    "abc,cd->abd": (r(2, 3, 4), r(4, 5)),
    "ab,cd->abcd": (r(2, 3), r(4, 5)),
    "bxy,byz->bxz": (r(1, 3, 4), r(2, 4, 5)),
    "b i j, b j k -> b i k": (r(2, 3, 4), r(2, 4, 5)),
    "abcd,adce->abe": (r(2, 3, 4, 5), r(2, 5, 4, 6)),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("eq", sorted(EINSUM))
def test_einsum(eq: str, dialect: str) -> None:
    check(Fn(lambda *x: torch.einsum(eq, *x)), EINSUM[eq], dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_einsum_dynamic_batch(dialect: str) -> None:
    b = torch.export.Dim("b", min=1, max=8)
    check(Fn(lambda x, y: torch.einsum("abc,cd->abd", x, y) + torch.einsum("abc,abc->a", x, x)[:, None, None]),
          (r(2, 3, 4), r(4, 5)), dialect, dynamic_shapes=(({0: b}, None),), more_args=[(r(6, 3, 4), r(4, 5))])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("offset,d1,d2", [(0, 0, 1), (1, 1, 2), (-1, 2, 0), (2, -1, -2)])
def test_diagonal(offset: int, d1: int, d2: int, dialect: str) -> None:
    check(Fn(lambda x: torch.diagonal(x, offset, d1, d2) * 2), (r(3, 4, 5),), dialect)
