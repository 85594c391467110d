"""Input and output descriptions for ``milkit.convert`` (coremltools' ``ct.RangeDim``,
``ct.Shape``, ``ct.EnumeratedShapes``, ``ct.TensorType``)."""

from __future__ import annotations

import numbers
from typing import Any, Sequence

__all__ = ['RangeDim', 'Shape', 'EnumeratedShapes', 'TensorType']


class RangeDim:
    """A flexible dimension ``[lower_bound, upper_bound]`` (-1: unbounded)."""

    def __init__(self, lower_bound: int = 1, upper_bound: int = -1, default: int | None = None,
                 symbol: str | None = None) -> None:
        if upper_bound != -1 and lower_bound > upper_bound:
            raise ValueError(f"RangeDim: lower_bound {lower_bound} exceeds upper_bound {upper_bound}")
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        self.default = lower_bound if default is None else default
        self.symbol = symbol

    def __repr__(self) -> str:
        return f"RangeDim(lower_bound={self.lower_bound}, upper_bound={self.upper_bound}, default={self.default})"


class Shape:
    """A shape of ints and RangeDims."""

    def __init__(self, shape: Sequence[Any], default: Sequence[int] | None = None) -> None:
        self.shape = tuple(shape)
        self.default = default


class EnumeratedShapes:
    """A set of allowed shapes (``ct.EnumeratedShapes``), written as the input's
    ``enumeratedShapes``; ``default`` (the first shape when not given) becomes its ``shape``."""

    def __init__(self, shapes: Sequence[Sequence[int]], default: Sequence[int] | None = None) -> None:
        if not isinstance(shapes, (list, tuple)):
            raise ValueError(f"EnumeratedShapes should be list or tuple of shape, got type {type(shapes)} instead")
        if len(shapes) < 2:
            raise ValueError(
                f"EnumeratedShapes should be take a list or tuple with len >= 2, got {len(shapes)} instead")
        self.shapes = [tuple(s.shape if isinstance(s, Shape) else s) for s in shapes]
        for s in self.shapes:
            for d in s:
                if isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 1:
                    raise ValueError(f"EnumeratedShapes: shape {s} must hold positive ints only")
        self.shapes = [tuple(int(d) for d in s) for s in self.shapes]
        if default is not None and not isinstance(default, (list, tuple)):
            raise ValueError(f"Default shape should be list or tuple, got type {type(default)} instead")
        self.default = tuple(int(d) for d in default) if default is not None else self.shapes[0]


class TensorType:
    """An input or output description (``ct.TensorType``)."""

    def __init__(self, name: str | None = None, shape: Any = None, dtype: Any = None,
                 default_value: Any = None) -> None:
        self.name = name
        self.shape = shape.shape if isinstance(shape, Shape) else shape
        self.dtype = dtype
        self.default_value = default_value
