"""``milkit.models.MLModel`` (coremltools' ``ct.models.MLModel`` location)."""

from .convert import MLModel

__all__ = ["MLModel"]
