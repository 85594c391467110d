"""Data-dependent shapes through the torch.export importer: bool-mask indexing, index_put with a
bool mask, nonzero / where(condition) / masked_select, and sizes read from their results. Each
output must come out of predict with torch's shape, for several inputs of one program."""

import pytest
import torch
from support.torch_util import DIALECTS, Fn, check, r

torch.manual_seed(0)


def _more(*shapes):
    return [tuple(r(*s) for s in shapes) for _ in range(2)]


CASES = {
    "mask_rows": (lambda x: x[x > 0], ((3, 4),)),
    "mask_leading_dims": (lambda x: x[x[..., 0] > 0], ((3, 4, 5),)),
    "mask_inner_dim": (lambda x: x[:, x[0] > 0] * 2, ((3, 6),)),
    "mask_put_compact": (lambda x, y: torch.index_put(x, (x > 0,), y[x > 0]), ((3, 4), (3, 4))),
    "mask_put_rows": (lambda x, y: torch.index_put(x, (x[:, 0] > 0,), y[x[:, 0] > 0] * 3), ((5, 3), (5, 3))),
    "mask_put_scalar": (lambda x: torch.index_put(x, (x > 0,), torch.tensor(7.0)), ((3, 4),)),
    "mask_put_accumulate": (lambda x, y: torch.index_put(x, (x > 0,), y[x > 0], accumulate=True), ((3, 4), (3, 4))),
    "masked_scatter": (lambda x, y: x.masked_scatter(x > 0, y), ((3, 4), (3, 4))),
    "nonzero": (lambda x: torch.nonzero(x > 0), ((3, 4),)),
    "where_condition": (lambda x: torch.where(x > 0), ((3, 4),)),
    "where_condition_1d": (lambda x: torch.where(x > 0)[0] * 2, ((7,),)),
    "masked_select": (lambda x, m: torch.masked_select(x, m > 0), ((3, 4), (4,))),
    "count_sized_zeros": (lambda x: torch.zeros(x[x > 0].shape[0], 2) + 1, ((3, 4),)),
    "mask_then_reduce": (lambda x: (x[x > 0].sum(), x[x > 0].exp()), ((3, 4),)),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_data_dependent(name, dialect):
    fn, shapes = CASES[name]
    check(Fn(fn), tuple(r(*s) for s in shapes), dialect, more_args=_more(*shapes))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_mask_selecting_nothing_or_everything(dialect):
    args = (r(3, 4),)
    check(Fn(lambda x: x[x > -100] + x[x > 100].sum()), args, dialect,
          more_args=[(torch.full((3, 4), 200.0),), (torch.full((3, 4), -1.0),)])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_mask_put_of_rows_selecting_nothing(dialect):
    fn = Fn(lambda x, y: torch.index_put(x, (x[:, 0] > 0,), y[x[:, 0] > 0] * 3))
    check(fn, (r(5, 3), r(5, 3)), dialect, more_args=[(-torch.ones(5, 3), r(5, 3)), (torch.ones(5, 3), r(5, 3))])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_mask_index_of_symbolic_size(dialect):
    b = torch.export.Dim("b", min=2, max=16)
    check(Fn(lambda x: x[x[:, 0] > 0]), (r(4, 3),), dialect, dynamic_shapes=(({0: b},),),
          more_args=[(r(9, 3),), (r(2, 3),)])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_mask_index_fp16(dialect):
    check(Fn(lambda x: x[x > 0] * 2), (r(3, 4),), dialect, precision="fp16", rtol=2e-2,
          more_args=_more((3, 4)))
