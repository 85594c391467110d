"""`.item()` (aten.item in the TRAINING dialect, _local_scalar_dense in core ATen): the value a
tensor holds, used as a scalar operand, stays a rank-0 tensor of the program, against torch eager."""

from __future__ import annotations

import milkit
import pytest
import torch
from support.torch_util import DIALECTS, Fn, check, convert, export, r, ri

torch.manual_seed(0)

CASES = {
    "mul_float": (lambda x, y: x * y.sum().item(), (r(4, 3), r(3))),
    "add_int": (lambda x, y: x + y.max().item(), (r(4, 3), ri(5, 3))),
    "add_alpha": (lambda x, y: torch.add(x, y[0].item(), alpha=2), (r(4, 3), r(3))),
    "div_sub": (lambda x, y: x / y.abs().max().item() - y.min().item(), (r(4, 3), r(3))),
    "int_times_int": (lambda x, y: x * y[1].item(), (ri(7, 4, 3), ri(5, 3))),
    "compare": (lambda x, y: x > y.mean().item(), (r(4, 3), r(3))),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_item(name: str, dialect: str) -> None:
    fn, args = CASES[name]
    check(Fn(fn), args, dialect, more_args=[tuple(a * 2 for a in args)])


def test_item_fp16() -> None:
    fn, args = CASES["div_sub"]
    check(Fn(fn), args, "training", rtol=2e-2, precision="fp16")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_item_where_a_known_number_is_needed(dialect: str) -> None:
    ep = export(Fn(lambda x, y: x + torch.full((3,), y[0].item())), (r(4, 3), r(3)), dialect)
    with pytest.raises(milkit.MilkitValueError, match=r"fill_value.*\.item\(\).*known when converting"):
        convert(ep)
