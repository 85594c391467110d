"""``milkit.models.MLModel`` (coremltools' ``ct.models.MLModel`` location)."""

from .mlmodel import MLModel

__all__ = ["MLModel"]
