"""Short facts about a Var, as the notebook display and the graph drawing show them."""

from __future__ import annotations

from typing import Any, Iterable

__all__ = ["_elements", "_shape_text", "_type_text"]


def _shape_text(shape: Iterable[Any]) -> str:
    dims = [str(d) for d in shape]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def _type_text(v: Any) -> str:
    """``(2, S, 8) fp32`` for tensors and scalars, ``state (2, 4) fp16`` for states, the IR's
    spelling for lists, tuples and dicts."""
    kind = v._kind
    if kind in ("tensor", "scalar"):
        if not v._has_rank:
            return f"(?) {v.dtype}"
        return f"{_shape_text(v.shape)} {v.dtype}"
    if kind == "state":
        return f"state {_shape_text(v.shape)} {v.dtype}"
    return str(v._type_str)


def _elements(v: Any) -> int | None:
    if v._kind == "scalar":
        return 1
    if v._kind != "tensor" or not v._has_rank:
        return None
    n = 1
    for d in v.shape:
        if not isinstance(d, int):
            return None
        n *= d
    return n
