"""ONNX ModelProto -> milkit Program, read in C++ (the ``onnx`` package is not needed).

``milkit.convert("model.onnx")`` and ``milkit.convert(model_proto)`` come here. The importer keeps
ONNX value names for the ops' outputs, turns ``dim_param`` names into named symbols (the same name
twice is the same symbol) and unknown dims into fresh ones, narrows int64 to int32 and double to
fp32 (Core ML computes in those), and lists every node it cannot convert in one error.

An operator milkit has no converter for but that ONNX defines as a function of other operators
(a schema function body, e.g. CenterCropPad, AffineGrid, RotaryEmbedding) is expanded into that
body when the ``onnx`` package is installed: the node becomes a call of a model-local function
holding the body (picked for the model's opset, with the node's attributes and schema defaults),
which the importer inlines. Without ``onnx`` such nodes are reported as unsupported.
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
    try:
        return _import(model, target, base_dir, dims)
    except _core.UnsupportedOpsError:
        expanded = _expand_schema_functions(model)
        if expanded is None:
            raise
        proto, folder = expanded
        return _core.import_onnx_bytes(proto.SerializeToString(), target, base_dir or folder, "<ModelProto>", dims)


def _import(model: Any, target: int, base_dir: str | None, dims: Dict[str, List[int]]) -> Tuple[Any, Dict[str, Any]]:
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


_EXPANDED_DOMAIN = "milkit.schema_function"


def _expand_schema_functions(model: Any) -> Tuple[Any, str] | None:
    """A copy of `model` where every default-domain node milkit cannot convert and whose schema
    has a function body (for the model's opset) calls a model-local function holding that body;
    None when the ``onnx`` package is missing or no node was expanded. Returns (model, folder of
    the model's external data)."""
    try:
        import onnx
        from onnx import defs, shape_inference
    except ImportError:
        return None
    folder = ""
    if isinstance(model, (str, os.PathLike)):
        folder = os.path.dirname(os.path.abspath(os.fspath(model)))
        m = onnx.load(os.fspath(model), load_external_data=False)
    elif isinstance(model, (bytes, bytearray, memoryview)):
        m = onnx.load_from_string(bytes(model))
    else:
        m = onnx.ModelProto()
        m.CopyFrom(model)
    opset = max([o.version for o in m.opset_import if o.domain in ("", "ai.onnx")] or [0])
    if not opset:
        return None
    supported = set(supported_ops())
    local = {(f.domain, f.name) for f in m.functions}
    try:  # input types, for the functions that depend on them
        inferred = shape_inference.infer_shapes(m)
    except Exception:  # noqa: BLE001 - types are a help, not a need
        inferred = m
    types: Dict[str, Any] = {}

    def collect(g: Any) -> None:
        for v in list(g.input) + list(g.output) + list(g.value_info):
            types[v.name] = v.type
        for t in g.initializer:
            types[t.name] = onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims))
        for nd in g.node:
            for a in nd.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    collect(a.g)
                for sg in a.graphs:
                    collect(sg)

    collect(inferred.graph)
    made: List[Any] = []

    def body_for(node: Any) -> Any:
        if node.domain not in ("", "ai.onnx") or node.op_type in supported or ("", node.op_type) in local:
            return None
        try:
            schema = defs.get_schema(node.op_type, opset, "")
        except Exception:  # noqa: BLE001 - not an ONNX operator (at this opset)
            return None
        call = onnx.NodeProto()
        call.CopyFrom(node)
        have = {a.name for a in call.attribute}
        for name, a in schema.attributes.items():
            if name not in have and a.default_value and a.default_value.name:
                call.attribute.append(a.default_value)
        f = None
        versions = [v for v in schema.function_opset_versions if v <= opset]
        if versions:
            f = onnx.FunctionProto.FromString(schema.get_function_with_opset_version(max(versions)))
        else:
            versions = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
            if versions:
                in_types = []
                for name in call.input:
                    t = types.get(name)
                    if name and t is None:
                        return None
                    in_types.append((t or onnx.TypeProto()).SerializeToString())
                try:
                    data = schema.get_context_dependent_function_with_opset_version(
                        max(versions), call.SerializeToString(), in_types)
                except Exception:  # noqa: BLE001 - the schema could not build a body for these types
                    return None
                f = onnx.FunctionProto.FromString(data)
        if f is None or not f.node:
            return None
        f.domain = _EXPANDED_DOMAIN
        f.name = f"{node.op_type}_{len(made)}"
        made.append(f)
        call.domain = _EXPANDED_DOMAIN
        call.op_type = f.name
        return call

    def walk(nodes: Any) -> None:
        for i in range(len(nodes)):
            nd = nodes[i]
            for a in nd.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g.node)
                for sg in a.graphs:
                    walk(sg.node)
            call = body_for(nd)
            if call is not None:
                nodes[i].CopyFrom(call)

    walk(m.graph.node)
    k = 0
    while k < len(made):  # bodies may hold further operators to expand
        walk(made[k].node)
        k += 1
    if not made:
        return None
    m.functions.extend(made)
    m.opset_import.append(onnx.helper.make_opsetid(_EXPANDED_DOMAIN, 1))
    return m, folder


def supported_ops() -> List[str]:
    """The ONNX operators (default domain) milkit converts, sorted."""
    return list(_core.onnx_supported_ops())
