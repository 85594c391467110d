"""Saving and loading ML Programs as ``.mlpackage`` directories.

    milkit.save(prog, "model.mlpackage", minimum_deployment_target=milkit.target.iOS17)
    prog = milkit.load("model.mlpackage")

Packages are written the way coremltools writes them (``Manifest.json``, ``model.mlmodel``,
``weights/weight.bin``) and can be opened with ``coremltools.models.MLModel``.
"""

from __future__ import annotations

import os
from typing import Any

from . import _core
from .progress import Progress

__all__ = ["save", "load"]


def _spec_version(target: Any) -> int:
    value = getattr(target, "value", target)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"minimum_deployment_target must be a milkit.target (or coremltools) target, got {target!r}")
    return int(value)


def save(program: Any, path: str | os.PathLike, minimum_deployment_target: Any = None) -> None:
    """Writes `program` as is (no passes) as an .mlpackage at `path`.

    The write is atomic: a failure leaves an existing package at `path` untouched.
    `minimum_deployment_target` defaults to the newest opset of the program's functions, at
    least iOS15; it sets the specification version and the opset written for every function.
    """
    if not isinstance(program, _core.Program):
        raise TypeError(f"milkit.save expects a milkit Program, got {type(program).__name__}")
    target = None if minimum_deployment_target is None else _spec_version(minimum_deployment_target)
    path = os.fspath(path)
    with Progress(f"save {os.path.basename(path)}"):
        _core.save_mlpackage(program, path, target)


def load(path: str | os.PathLike) -> Any:
    """Reads an .mlpackage (or a bare model.mlmodel beside its ``weights`` folder) as a Program.

    Every op is rebuilt through the builder, so validation and type inference run again; const
    weights borrow a memory mapping of weight.bin. Malformed files raise milkit.FormatError.
    """
    path = os.fspath(path)
    with Progress(f"load {os.path.basename(path)}"):
        return _core.load_mlpackage(path)
