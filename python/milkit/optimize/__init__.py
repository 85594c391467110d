"""Model compression with coremltools' names: ``milkit.optimize.coreml`` (``import milkit.optimize as
cto`` in place of ``import coremltools.optimize as cto``)."""

from __future__ import annotations

from . import coreml

__all__ = ["coreml"]
