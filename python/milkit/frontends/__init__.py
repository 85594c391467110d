"""Importers from other model formats (ONNX, torch.export), each reading its format in C++ (see DESIGN.md)."""

from __future__ import annotations

from . import onnx, torch

__all__ = ["onnx", "torch"]
