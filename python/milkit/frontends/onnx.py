"""ONNX ModelProto -> milkit Program, read in C++ (the ``onnx`` package is not needed).

``milkit.convert("model.onnx")`` and ``milkit.convert(model_proto)`` come here. The importer keeps
ONNX value names for the ops' outputs, turns ``dim_param`` names into named symbols (the same name
twice is the same symbol) and unknown dims into fresh ones, narrows int64 to int32 and double to
fp32 (Core ML computes in those), and lists every node it cannot convert in one error.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Tuple

from .. import _core

__all__ = ["is_onnx_source", "import_model", "supported_ops"]


def is_onnx_source(model: Any) -> bool:
    """Whether `model` is an ONNX model: a path ending in .onnx, or a ModelProto (by duck typing,
    so ``onnx`` is not imported here)."""
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model).lower().endswith(".onnx")
    t = type(model)
    return t.__name__ == "ModelProto" and hasattr(model, "SerializeToString") and hasattr(model, "graph")


def import_model(model: Any, target: int, base_dir: str | None = None,
                 input_dims: Dict[str, List[int]] | None = None) -> Tuple[Any, Dict[str, Any]]:
    """Imports `model` (a path, a ModelProto, or the bytes of one) for deployment target `target`
    (a specification version). Returns the Program and what the importer learned (input and output
    names with their ONNX element types, opset, metadata).

    A ModelProto whose weights live in external files needs `base_dir`, the folder they are in.
    `input_dims` fixes input dims by input name (-1 keeps the model's dim).
    """
    dims = dict(input_dims or {})
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.exists(path):
            raise FileNotFoundError(f"ONNX model '{path}' does not exist")
        return _core.import_onnx_file(path, target, dims)
    if isinstance(model, (bytes, bytearray, memoryview)):
        return _core.import_onnx_bytes(model, target, base_dir or "", "<ModelProto bytes>", dims)
    if is_onnx_source(model):
        data = model.SerializeToString()
        return _core.import_onnx_bytes(data, target, base_dir or "", "<ModelProto>", dims)
    raise TypeError(f"not an ONNX model: {type(model).__name__}")


def supported_ops() -> List[str]:
    """The ONNX operators (default domain) milkit converts, sorted."""
    return list(_core.onnx_supported_ops())
