"""Helpers for the torch.export importer's tests: export a module, convert it with milkit, run
both and compare (fp32 within 1e-4 relative to the largest reference value, unless told)."""

from __future__ import annotations

import warnings
from typing import Any, Callable, Dict, Sequence

import milkit
import numpy as np
import torch

__all__ = ["export", "convert", "compare", "check", "randomize", "DIALECTS", "Fn", "r", "ri"]

DIALECTS = ("training", "core")


class Fn(torch.nn.Module):
    """A module running `fn` on its inputs (op tests export lambdas through it)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *a: Any) -> Any:
        return self.fn(*a)


def r(*s: int) -> torch.Tensor:
    """A float tensor of shape `s` from the standard normal."""
    return torch.randn(*s)


def ri(hi: int, *s: int) -> torch.Tensor:
    """An int64 tensor of shape `s` with values in [0, hi)."""
    return torch.randint(0, hi, s)


def export(module: torch.nn.Module, args: Sequence[Any], dialect: str = "training",
           dynamic_shapes: Any = None, kwargs: Dict[str, Any] | None = None, strict: bool = False) -> Any:
    """torch.export of `module` in the TRAINING dialect, or core ATen ("core")."""
    ep = torch.export.export(module.eval(), tuple(args), kwargs=kwargs, dynamic_shapes=dynamic_shapes, strict=strict)
    if dialect == "core":
        ep = ep.run_decompositions()
    return ep


def convert(ep: Any, precision: str = "fp32", target: Any = None, **kw: Any) -> Any:
    """milkit.convert with FLOAT32 (or FLOAT16) compute and iOS17 (or `target`)."""
    prec = milkit.precision.FLOAT32 if precision == "fp32" else milkit.precision.FLOAT16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return milkit.convert(ep, compute_precision=prec,
                              minimum_deployment_target=target or milkit.target.iOS17, **kw)


def randomize(m: torch.nn.Module) -> torch.nn.Module:
    """Random weights (fixed seed) and batch-norm statistics, in eval mode: default inits leave
    some heads at zero (vit_b_16's), which would make a check vacuous."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * (1.0 / max(1, p[0].numel()) ** 0.5 if p.dim() > 1 else 0.1))
        for name, b in m.named_buffers():
            if name.endswith("running_var"):
                b.copy_(torch.rand(b.shape, generator=g) + 0.5)
            elif name.endswith("running_mean"):
                b.copy_(torch.randn(b.shape, generator=g) * 0.1)
    return m.eval()


def _flat(out: Any) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        r: list = []
        for o in out:
            r += _flat(o)
        return r
    if hasattr(out, "to_tuple"):
        return _flat(out.to_tuple())
    raise TypeError(type(out))


def compare(got: Dict[str, np.ndarray], ref: Any, rtol: float = 1e-4, what: str = "") -> None:
    """Every output within rtol of the largest reference magnitude (exact for ints and bools)."""
    refs = [r.detach().numpy() for r in _flat(ref)]
    outs = list(got.values())
    assert len(outs) == len(refs), f"{what}: {len(outs)} outputs, torch gives {len(refs)}"
    for k, (o, r) in enumerate(zip(outs, refs)):
        o = np.asarray(o)
        # predict returns a rank-0 torch output with shape (1,), as Core ML does
        want_shape = (1,) if r.shape == () else r.shape
        assert o.shape == want_shape, f"{what}: output {k} has shape {o.shape}, torch {r.shape}"
        o = o.reshape(r.shape)
        if r.dtype == np.bool_ or np.issubdtype(r.dtype, np.integer):
            np.testing.assert_array_equal(o.astype(r.dtype), r, err_msg=f"{what}: output {k}")
            continue
        scale = max(float(np.abs(r).max()) if r.size else 0.0, 1e-6)
        err = float(np.abs(o.astype(np.float64) - r.astype(np.float64)).max()) if r.size else 0.0
        assert np.isfinite(o).all() == np.isfinite(r).all(), f"{what}: output {k} finiteness differs"
        assert err <= rtol * scale, f"{what}: output {k} differs by {err:.3g} (scale {scale:.3g}, rtol {rtol})"


def check(module: torch.nn.Module, args: Sequence[Any], dialect: str = "training", rtol: float = 1e-4,
          precision: str = "fp32", dynamic_shapes: Any = None, more_args: Sequence[Sequence[Any]] = (),
          target: Any = None) -> Any:
    """Exports, converts, predicts on `args` (and each of `more_args`) and compares with eager."""
    ep = export(module, args, dialect, dynamic_shapes)
    mm = convert(ep, precision, target)
    names = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    for a in [tuple(args)] + [tuple(m) for m in more_args]:
        feed = {nm: v.numpy() for nm, v in zip(names, a)}
        with torch.no_grad():
            ref = module(*a)
        compare(mm.predict(feed), ref, rtol, what=f"{type(module).__name__} ({dialect})")
    return mm
