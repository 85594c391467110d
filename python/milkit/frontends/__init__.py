"""Importers from other model formats (ONNX), each reading its format in C++ (see DESIGN.md)."""

from __future__ import annotations

from . import onnx

__all__ = ["onnx"]
