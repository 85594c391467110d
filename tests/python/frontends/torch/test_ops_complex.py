"""Complex tensors inside a program (a real and an imaginary part): view_as_complex / complex /
polar, arithmetic, shape ops, complex weights and rotary embeddings, against torch eager."""

from __future__ import annotations

import pytest
import torch
from support.torch_util import DIALECTS, Fn, check, convert, export, r

PRECISIONS = (("fp32", 1e-4), ("fp16", 3e-2))

CASES = {
    "view_as_complex_real": (lambda x: torch.view_as_real(torch.view_as_complex(x) * 2), (r(3, 4, 2),)),
    "complex_parts": (lambda x, y: (torch.complex(x, y).real, torch.complex(x, y).imag), (r(3, 4), r(3, 4))),
    "complex_broadcast": (lambda x, y: torch.view_as_real(torch.complex(x, y)), (r(3, 4), r(1, 4))),
    "abs_angle": (lambda x, y: (torch.complex(x, y).abs(), torch.complex(x, y).angle()), (r(3, 4), r(3, 4))),
    "polar": (lambda a, t: torch.view_as_real(torch.polar(a.abs(), t)), (r(2, 5), r(2, 5))),
    "mul_div": (lambda x, y: torch.view_as_real(torch.complex(x, y) * torch.complex(y, x) / torch.complex(x + 3, y)),
                (r(3, 4), r(3, 4))),
    "add_sub_real": (lambda x, y: torch.view_as_real(torch.complex(x, y) + y - 2 * torch.complex(y, x) - x),
                     (r(3, 4), r(3, 4))),
    "real_div_complex": (lambda x, y: torch.view_as_real(x / torch.complex(x + 3, y) * 0.5), (r(3, 4), r(3, 4))),
    "neg_conj_exp": (lambda x, y: torch.view_as_real((-torch.complex(x, y)).conj().exp()), (r(3, 4), r(3, 4))),
    "shape_ops": (lambda x: torch.view_as_real(torch.view_as_complex(x).permute(1, 0).reshape(2, 6)[:, 1:5]),
                  (r(3, 4, 2),)),
    "cat_stack": (lambda x, y: torch.view_as_real(torch.cat([torch.complex(x, y), torch.complex(y, x)], 0).unsqueeze(0)),
                  (r(3, 4), r(3, 4))),
    "cat_with_real": (lambda x, y: torch.view_as_real(torch.stack([torch.complex(x, y), y.to(torch.complex64)], 1)),
                      (r(3, 4), r(3, 4))),
    "sum_select": (lambda x: torch.view_as_real(torch.view_as_complex(x).sum(1)[1:]), (r(3, 4, 2),)),
    "real_of_real_angle": (lambda x: (torch.real(x) + 1, torch.angle(x)), (r(3, 4),)),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("precision,rtol", PRECISIONS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_complex_ops(name: str, dialect: str, precision: str, rtol: float) -> None:
    fn, args = CASES[name]
    check(Fn(fn), args, dialect, rtol=rtol, precision=precision)


def precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0) -> torch.Tensor:
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    return torch.polar(torch.ones_like(freqs), freqs)


class Rotary(torch.nn.Module):
    """LLaMA's apply_rotary_emb: a complex64 freqs_cis buffer sliced to the sequence length."""

    def __init__(self, heads: int = 2, dim: int = 8, end: int = 32) -> None:
        super().__init__()
        self.register_buffer("freqs_cis", precompute_freqs_cis(dim, end))

    def forward(self, xq: torch.Tensor, xk: torch.Tensor) -> tuple:
        seqlen = xq.shape[1]
        freqs_cis = self.freqs_cis[:seqlen]
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
        shape = [d if i == 1 or i == xq_.ndim - 1 else 1 for i, d in enumerate(xq_.shape)]
        freqs_cis = freqs_cis.view(*shape)
        xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
        xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
        return xq_out.type_as(xq), xk_out.type_as(xk)


class RotaryPolar(torch.nn.Module):
    """Rotary angles computed in the program from positions (polar of ones and an outer product)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seqlen = x.shape[1]
        freqs = 1.0 / (10000.0 ** (torch.arange(0, 8, 2, dtype=torch.float32) / 8))
        ang = torch.outer(torch.arange(seqlen, dtype=torch.float32), freqs)
        fc = torch.polar(torch.ones_like(ang), ang).view(1, seqlen, 1, 4)
        xc = torch.view_as_complex(x.reshape(*x.shape[:-1], 4, 2))
        return torch.view_as_real(xc * fc).flatten(3)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("precision,rtol", PRECISIONS)
def test_rotary_embedding_symbolic_length(dialect: str, precision: str, rtol: float) -> None:
    seq = torch.export.Dim("seq", min=2, max=32)
    args = (r(2, 5, 2, 8), r(2, 5, 2, 8))
    more = [(r(2, 9, 2, 8), r(2, 9, 2, 8))]
    check(Rotary(), args, dialect, rtol=rtol, precision=precision,
          dynamic_shapes=({1: seq}, {1: seq}), more_args=more)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_rotary_polar_symbolic_length(dialect: str) -> None:
    seq = torch.export.Dim("seq", min=2, max=32)
    check(RotaryPolar(), (r(2, 5, 3, 8),), dialect, dynamic_shapes=({1: seq},), more_args=[(r(2, 7, 3, 8),)])


def test_complex_output_is_refused() -> None:
    ep = export(Fn(lambda x, y: torch.complex(x, y) * 2), (r(3), r(3)))
    with pytest.raises(ValueError, match="complex tensor; Core ML has no complex multiarrays.*view_as_real"):
        convert(ep)


def test_unsupported_complex_op_is_named() -> None:
    ep = export(Fn(lambda x, y: torch.view_as_real(torch.complex(x, y).sqrt())), (r(3), r(3)))
    with pytest.raises(ValueError, match="sqrt.*of a complex tensor is not supported"):
        convert(ep)

