"""torch.export programs -> milkit Program, translated in C++.

``milkit.convert(exported_program)`` and ``milkit.convert("model.pt2")`` come here. An in-memory
``ExportedProgram`` (any dialect: TRAINING as ``torch.export.export`` returns it, ATen or core ATen
after ``run_decompositions()``) is serialized to torch's JSON schema (the graph only) and its
parameters, buffers and constants are handed to C++ by reference (no copies of contiguous CPU
tensors). A ``.pt2`` archive is read entirely in C++ with its weights memory-mapped, so converting
one does not need torch.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Tuple

from .. import _core

__all__ = ["is_torch_source", "is_pt2_path", "import_model", "supported_ops", "unsupported_ops", "unsupported_reason"]

# torch dtype name -> milkit storage dtype name (kept as stored; the importer narrows)
_DTYPES = {
    "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64",
    "int64": "int64", "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool",
}


def is_pt2_path(model: Any) -> bool:
    """Whether `model` is a path ending in .pt2."""
    return isinstance(model, (str, os.PathLike)) and os.fspath(model).lower().endswith(".pt2")


def is_torch_source(model: Any) -> bool:
    """Whether `model` is a torch.export program: a .pt2 path or an ``ExportedProgram`` (by duck
    typing, so torch is not imported here)."""
    if is_pt2_path(model):
        return True
    t = type(model)
    return t.__name__ == "ExportedProgram" and hasattr(model, "graph_signature") and hasattr(model, "graph_module")


def _tensor_entry(name: str, t: Any) -> Tuple[Any, str]:
    """A tensor as (numpy array sharing its memory where possible, milkit dtype name)."""
    import torch

    if not isinstance(t, torch.Tensor):
        raise TypeError(f"the program's constant '{name}' is a {type(t).__name__}, not a tensor")
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.is_complex():
        # its (real, imaginary) pairs on a last axis of 2, as a .pt2 archive's reader reads them
        t = torch.view_as_real(t.resolve_conj())
    dname = str(t.dtype).replace("torch.", "")
    if dname not in _DTYPES:
        raise ValueError(f"tensor '{name}' has dtype {t.dtype}, which milkit cannot read")
    t = t.contiguous()
    if dname == "bfloat16":
        arr = t.view(torch.int16).numpy()
    else:
        arr = t.numpy()
    return arr, _DTYPES[dname]


def _serialize(ep: Any) -> bytes:
    """The program's graph in torch's JSON schema (weights left out: they go by reference).

    This is what ``torch._export.serde.serialize.serialize`` writes as the .pt2's model.json, made
    by the same serializer classes without the two steps that only check the program (its
    ``validate()`` and a canonical-form test on a deep copy), which take most of the time. If
    torch's internals move, the public function is used.
    """
    import torch
    from torch._export.serde import schema
    from torch._export.serde import serialize as serde

    try:
        try:
            gm = serde.GraphModuleSerializer(ep.graph_signature, ep.module_call_graph).serialize(ep.graph_module)
        except NotImplementedError:
            # torch cannot write the input/output pytree specs of a program returning a type it
            # has no serialization name for (torch.return_types.topk, ...; torch.export.save fails
            # on such programs too). milkit reads only the graph and its signature, so the module
            # call graph with those specs is left out.
            gm = serde.GraphModuleSerializer(ep.graph_signature, []).serialize(ep.graph_module)
        prog = schema.ExportedProgram(
            graph_module=gm,
            opset_version=serde.ExportedProgramSerializer().opset_version,
            range_constraints=serde.serialize_range_constraints(ep.range_constraints),
            schema_version=schema.SchemaVersion(major=serde.SCHEMA_VERSION[0], minor=serde.SCHEMA_VERSION[1]),
            verifiers=[v.dialect for v in ep.verifiers],
            torch_version=torch.__version__,
            guards_code=getattr(ep, "_guards_code", []),
        )
        return bytes(serde._to_json_bytes(prog))
    except (AttributeError, TypeError, ImportError):  # pragma: no cover - other torch versions
        art = serde.serialize(ep, serialize_state_dict=False, serialize_constants=False,
                              serialize_example_inputs=False)
        return bytes(art.exported_program)


def import_model(model: Any, target: int, input_dims: Dict[str, List[int]] | None = None
                 ) -> Tuple[Any, Dict[str, Any]]:
    """Imports `model` (a .pt2 path or an ``ExportedProgram``) for deployment target `target`
    (a specification version). Returns the Program and what the importer learned (user input and
    output names, states, dialect, schema version).

    `input_dims` fixes input dims by user input name (-1 keeps the program's dim).
    """
    dims = dict(input_dims or {})
    if is_pt2_path(model):
        path = os.fspath(model)
        if not os.path.exists(path):
            raise FileNotFoundError(f".pt2 archive '{path}' does not exist")
        return _core.import_pt2_file(path, target, dims)
    if not is_torch_source(model):
        raise TypeError(f"not a torch.export program: {type(model).__name__}")
    text = _serialize(model)
    weights = {k: _tensor_entry(k, v) for k, v in model.state_dict.items()}
    constants = {}
    for k, v in getattr(model, "constants", {}).items():
        try:
            import torch
        except ImportError:  # pragma: no cover - an ExportedProgram implies torch
            raise
        if isinstance(v, torch.Tensor):
            constants[k] = _tensor_entry(k, v)
    return _core.import_torch_export(text, weights, constants, target, dims, "<ExportedProgram>")


def supported_ops() -> List[str]:
    """The ATen operators milkit converts ("aten.add" for every overload, or one overload)."""
    return list(_core.torch_supported_ops())


def unsupported_ops() -> Dict[str, str]:
    """The operators (or families, written with ``*``) milkit does not convert, each with the reason
    (gradients, sparse tensors, memory layout, ...)."""
    return dict(_core.torch_unsupported_ops())


def unsupported_reason(target: str) -> str:
    """Why milkit cannot convert the operator of `target` (``"aten.convolution_backward.default"``),
    or ``""`` when no reason is on record."""
    return str(_core.torch_unsupported_reason(target))
