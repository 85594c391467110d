"""`.item()` (aten.item in the TRAINING dialect, _local_scalar_dense in core ATen): the value a
tensor holds, used as a scalar operand, stays a rank-0 tensor of the program; an integer read this
way (torch's unbacked symbol) sizes topk, slices and new tensors at run time; against torch eager."""

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
    "full": (lambda x, y: (x + torch.full((3,), y[0].item()), x.new_full((4, 3), y[1].item()),
                           torch.full_like(x, y[2].item())), (r(4, 3), r(3))),
    "clamp": (lambda x, y: (torch.clamp(x, min=y[0].item()), torch.clamp(x, max=y[1].item()),
                            torch.clamp(x, y[0].item(), y[1].abs().item()), x.clamp_min(y[2].item()),
                            x.clamp_max(y[2].item())), (r(4, 3), r(3))),
    "pow": (lambda x, y: x.abs() ** y[0].item(), (r(4, 3), r(3))),
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
    # MIL's leaky_relu takes its alpha as a constant
    ep = export(Fn(lambda x, y: torch.nn.functional.leaky_relu(x, y[0].item())), (r(4, 3), r(3)), dialect)
    with pytest.raises(milkit.MilkitValueError, match=r"negative_slope.*\.item\(\).*known when converting"):
        convert(ep)


def _topk_by_value(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    kk = k.item()
    torch._check(kk >= 1)
    torch._check(kk <= x.shape[1])
    return torch.topk(x, kk).values


def _sizes_by_value(x: torch.Tensor, k: torch.Tensor) -> tuple:
    kk = k.item()
    torch._check(kk >= 1)
    torch._check(kk + 1 <= x.shape[0])
    return x[:kk] * 2, torch.zeros(kk, 2) + k, x[: kk + 1].sum(0)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_item_as_a_size(dialect: str) -> None:
    check(Fn(_topk_by_value), (r(3, 8), torch.tensor(3)), dialect,
          more_args=[(r(3, 8), torch.tensor(5)), (r(3, 8), torch.tensor(1))])
    check(Fn(_sizes_by_value), (r(6, 2), torch.tensor(2)), dialect,
          more_args=[(r(6, 2), torch.tensor(4)), (r(6, 2), torch.tensor(5))])
