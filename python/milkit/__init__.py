"""milkit: build Core ML ML Programs (MIL) fast, with coremltools' Builder API.

    import milkit as ct
    from milkit import Builder as mb, types, get_new_symbol
"""

from __future__ import annotations

import os as _os

from . import _core, frontends, models, runtime, types
from ._target import AvailableTarget, target
from ._version import __version__ as __version__
from .builder import Builder, Placeholder, StateTensorSpec, TensorSpec
from .convert import (
    ClassifierConfig,
    ComputePrecision,
    EnumeratedShapes,
    MLModel,
    RangeDim,
    Shape,
    SkippedPassesWarning,
    TensorType,
    convert,
    precision,
)
from .graph import show
from .image_types import ColorLayout, ImageType, colorlayout
from .io import load, save
from .pipeline import PassPipeline
from .program import Block, Function, Operation, Program, Var, mil_list
from .progress import set_progress
from .runtime import num_threads, run, set_num_threads
from .symbolic import SymExpr, get_new_symbol, get_new_variadic_symbol
from .text import parse, program_to_text, to_text

_core._set_package_dir(_os.path.dirname(_os.path.abspath(__file__)) + _os.sep)

MilkitError = _core.MilkitError
MilkitTypeError = _core.MilkitTypeError
MilkitValueError = _core.MilkitValueError
FormatError = _core.FormatError
MilkitIOError = _core.MilkitIOError
MilkitIndexError = _core.MilkitIndexError
VerifyError = _core.VerifyError
UnsupportedOpsError = _core.UnsupportedOpsError


__all__ = [
    "ClassifierConfig",
    "ColorLayout",
    "ComputePrecision",
    "ImageType",
    "colorlayout",
    "EnumeratedShapes",
    "MLModel",
    "PassPipeline",
    "RangeDim",
    "Shape",
    "SkippedPassesWarning",
    "TensorType",
    "convert",
    "load",
    "frontends",
    "models",
    "parse",
    "precision",
    "program_to_text",
    "save",
    "AvailableTarget",
    "Block",
    "Builder",
    "FormatError",
    "Function",
    "MilkitError",
    "MilkitIOError",
    "MilkitIndexError",
    "MilkitTypeError",
    "MilkitValueError",
    "Operation",
    "Placeholder",
    "Program",
    "StateTensorSpec",
    "SymExpr",
    "TensorSpec",
    "Var",
    "VerifyError",
    "UnsupportedOpsError",
    "get_new_symbol",
    "get_new_variadic_symbol",
    "mil_list",
    "num_threads",
    "run",
    "runtime",
    "set_num_threads",
    "set_progress",
    "show",
    "target",
    "to_text",
    "types",
]


def __getattr__(name: str) -> object:
    # ``milkit.optimize`` (coremltools' ``ct.optimize``) and ``milkit.utils`` (coremltools'
    # ``ct.utils``) are imported on first use
    if name in ("optimize", "utils"):
        import importlib

        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'milkit' has no attribute {name!r}")
