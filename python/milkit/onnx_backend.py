"""An ONNX backend (``onnx.backend.base.Backend``) that converts with milkit and runs the program
with milkit's interpreter, so ONNX's own backend test suite can check the importer.

    import milkit.onnx_backend as backend
    rep = backend.prepare(model_proto)
    outputs = rep.run([x])            # as onnxruntime's backend does
    outputs = backend.run_model(model_proto, [x])

Inputs are cast to what the program takes (int64 -> int32 with a range check, double -> fp32)
and outputs back to the element types the ONNX graph declares. The program is converted with
``compute_precision=FLOAT32`` and the DEFAULT passes at iOS18 (override with ``prepare(...,
minimum_deployment_target=..., compute_precision=...)``).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Sequence, Tuple

from onnx.backend.base import Backend, BackendRep

__all__ = ["MilkitBackend", "MilkitRep", "prepare", "run_model", "run_node", "supports_device"]

# ONNX TensorProto element type -> numpy dtype name
_NP_OF_ONNX = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
               10: "float16", 11: "float64", 12: "uint32", 13: "uint64"}


# ONNX's narrow element types (ml_dtypes' numpy dtypes), which milkit holds exactly in fp32 / int32
_NARROW_OF_ONNX = {16: "bfloat16", 17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2",
                   20: "float8_e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4_e2m1fn", 24: "float8_e8m0fnu",
                   25: "uint2", 26: "int2"}
_NARROW_INTS = {"uint4", "int4", "uint2", "int2"}


def _to_narrow(v: Any, name: str) -> Any:
    """A holder array (fp32 / int32) as ONNX narrow type `name`; the program has already rounded
    the values to the type, so this only changes the storage (checked: a value the type cannot
    hold exactly is an error, not rounded here)."""
    import ml_dtypes
    import numpy as np

    out = v.astype(getattr(ml_dtypes, name))
    back = out.astype(v.dtype)
    same = (back == v) | (np.isnan(back) & np.isnan(v)) if v.dtype.kind == "f" else back == v
    if not np.all(same):
        raise ValueError(f"output values are not all {name} values: {v[~same].ravel()[:4]}")
    return out


_NEEDS_CONST = re.compile(r"\(input '([^']+)'\) must be known at conversion time")
# a node whose output shape depends on values only known at run time
_NEEDS_SHAPE = re.compile(r"ONNX .*node with output '([^']+)': .*needs the shape to be known at conversion time")


def _convert(model: Any, options: Dict[str, Any]) -> Tuple[Any, Dict[str, Any]]:
    import milkit

    from .frontends import onnx as _onnx
    from .pipeline import _run_pipeline_only

    target = options.get("minimum_deployment_target", milkit.target.iOS18)
    prog, info = _onnx.import_model(model, int(target))
    _run_pipeline_only(prog, target, options.get("compute_precision", milkit.precision.FLOAT32),
                       options.get("pass_pipeline"))
    return prog, info


def _with_inputs_as_constants(model: Any, values: Dict[str, Any]) -> Any:
    """A copy of `model` where the graph inputs in `values` are initializers holding them."""
    from onnx import numpy_helper

    m = type(model)()
    m.CopyFrom(model)
    keep = [i for i in m.graph.input if i.name not in values]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    for name, v in values.items():
        m.graph.initializer.append(numpy_helper.from_array(v, name))
    return m


# element types of shape-like graph inputs (the integers), which may be folded into a conversion
_INTEGER_TYPES = {2, 3, 4, 5, 6, 7, 12, 13}


def _integer_inputs_feeding(graph: Any, name: str) -> List[str]:
    """The integer graph inputs that value `name` is computed from (not through Shape or Size,
    whose outputs depend on shapes only), in graph-input order."""
    producer: Dict[str, Any] = {}

    def produced(nodes: Any) -> None:  # subgraphs' values too
        for n in nodes:
            for o in n.output:
                producer[o] = n
            for a in n.attribute:
                for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    produced(g.node)

    produced(graph.node)
    inputs = {i.name: i for i in graph.input}
    todo = [name]
    if name not in producer and name not in inputs:
        # a value inside an operator expanded into its ONNX function body: what feeds those nodes
        from .frontends.onnx import supported_ops

        native = set(supported_ops())
        todo = [i for n in graph.node if n.op_type not in native for i in n.input]
    seen, found = set(), set()
    while todo:
        v = todo.pop()
        if v in seen or not v:
            continue
        seen.add(v)
        if v in inputs:
            if inputs[v].type.tensor_type.elem_type in _INTEGER_TYPES:
                found.add(v)
            continue
        n = producer.get(v)
        if n is None or n.op_type in ("Shape", "Size"):
            continue
        todo.extend(n.input)
        todo.extend(_names_read_by_subgraphs(n))
    return [i.name for i in graph.input if i.name in found]


def _names_read_by_subgraphs(node: Any) -> List[str]:
    """Names the subgraphs of `node` (If / Loop / Scan bodies) read, outer-scope ones included."""
    out: List[str] = []
    for a in node.attribute:
        graphs = ([a.g] if a.HasField("g") else []) + list(a.graphs)
        for g in graphs:
            for sn in g.node:
                out.extend(sn.input)
                out.extend(_names_read_by_subgraphs(sn))
    return out


class MilkitRep(BackendRep):
    """A converted model: ``run(inputs)`` returns the outputs in the graph's order.

    Core ML needs some operands at conversion time (axes, pads, sizes, split sizes, k). When a
    model takes one of those as a graph input, the rep converts at each ``run`` with that input's
    value folded in (and keeps the program while the value stays the same), so every run computes
    what the ONNX graph computes for its inputs."""

    def __init__(self, model: Any, options: Dict[str, Any], path: str | None = None) -> None:
        self.model = model
        self.path = path  # converted from the file (external data mapped) unless inputs are folded
        self.options = options
        self.fixed: List[str] = []  # graph inputs folded into the program
        self._key: Any = None
        self.program: Any = None
        self.info: Dict[str, Any] = {}
        self._convert({})

    def _convert(self, values: Dict[str, Any]) -> None:
        import milkit

        graph_inputs = [i.name for i in self.model.graph.input]
        model = _with_inputs_as_constants(self.model, values) if values else (self.path or self.model)
        try:
            self.program, self.info = _convert(model, self.options)
        except milkit.MilkitValueError as e:
            m = _NEEDS_CONST.search(str(e)) or _NEEDS_SHAPE.search(str(e))
            if not m:
                raise
            if m.group(1) in graph_inputs:
                need = [m.group(1)]
            else:  # computed from graph inputs: fold the integer ones it is computed from
                need = _integer_inputs_feeding(self.model.graph, m.group(1))
            need = [n for n in need if n not in self.fixed]
            if not need:
                raise
            self.fixed.extend(need)  # converted at run time, with their values folded in
            self.program = None
            return
        self._plan = milkit.runtime.plan(self.program)
        self._fn = self.program.functions[self.program.default_function_name]
        self.info["input_names"] = [n for n in graph_inputs if n in self._fn.inputs or n in values]

    def run(self, inputs: Any, **kwargs: Any) -> Tuple[Any, ...]:
        import numpy as np

        from . import runtime

        names = [i.name for i in self.model.graph.input
                 if i.name not in {t.name for t in self.model.graph.initializer}]
        if isinstance(inputs, dict):
            feed = dict(inputs)
        else:
            if not isinstance(inputs, (list, tuple)):
                inputs = [inputs]
            if len(inputs) > len(names):
                raise ValueError(f"{len(inputs)} inputs given, the model has {len(names)}: {names}")
            feed = dict(zip(names, inputs))
        if self.fixed:
            for _ in range(16):
                missing = [n for n in self.fixed if n not in feed]
                if missing:
                    raise ValueError(f"input {missing[0]!r} is needed to convert the model")
                values = {n: np.asarray(feed[n]) for n in self.fixed}
                key = tuple((n, v.dtype.str, v.shape, v.tobytes()) for n, v in sorted(values.items()))
                if key == self._key and self.program is not None:
                    break
                before = len(self.fixed)
                self._convert(values)
                if self.program is not None:
                    self._key = key
                    break
                if len(self.fixed) == before:
                    raise RuntimeError("conversion did not converge")
            for n in self.fixed:
                feed.pop(n, None)
        fin = self._fn.inputs
        for k, v in list(feed.items()):
            a = np.asarray(v)
            var = fin.get(k)
            if a.dtype.kind == "V" and a.dtype.name in _NARROW_OF_ONNX.values():  # held exactly
                a = a.astype(np.int32 if a.dtype.name in _NARROW_INTS else np.float32)
            if var is not None and a.dtype.kind in "iub" and a.dtype != np.int32 and a.dtype != np.bool_:
                if a.size and (a.min() < -2**31 or a.max() > 2**31 - 1):
                    raise ValueError(f"input {k!r}: values do not fit int32, which Core ML computes integers in")
                a = a.astype(np.int32)
            elif a.dtype == np.float64:
                a = a.astype(np.float32)
            elif a.dtype == np.bool_ and var is not None and var.dtype != "bool":
                a = a.astype(np.int32)
            feed[k] = a
        outs = dict(self._plan.run(runtime.coerce_inputs(self._fn, feed), None))
        res = []
        for i, v in enumerate(outs.values()):
            t = self.info["output_types"][i] if i < len(self.info["output_types"]) else 0
            want = _NP_OF_ONNX.get(t)
            v = np.asarray(v)
            if t in _NARROW_OF_ONNX:
                v = _to_narrow(v, _NARROW_OF_ONNX[t])
            elif want is not None and v.dtype != np.dtype(want):
                v = v.astype(want)
            res.append(v)
        return tuple(res)


class MilkitBackend(Backend):
    """ONNX backend running models with milkit's interpreter (CPU)."""

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> MilkitRep:
        import onnx

        path = None
        if isinstance(model, str):
            path = model
            model = onnx.load(model, load_external_data=False)
        elif isinstance(model, bytes):
            model = onnx.load_from_string(model)
        options = {k: kwargs.pop(k) for k in ("minimum_deployment_target", "compute_precision", "pass_pipeline")
                   if k in kwargs}
        return MilkitRep(model, options, path)

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU", **kwargs: Any) -> Tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: Any, inputs: Any, device: str = "CPU", outputs_info: Any = None,
                 **kwargs: Any) -> Tuple[Any, ...]:
        import numpy as np
        import onnx
        from onnx import helper

        ins = [np.asarray(x) for x in inputs]
        vin = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
               for name, a in zip(node.input, ins)]
        if outputs_info:
            vout = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dt)), shp)
                    for name, (dt, shp) in zip(node.output, outputs_info)]
        else:
            vout = [helper.make_tensor_value_info(name, onnx.TensorProto.UNDEFINED, None) for name in node.output]
        graph = helper.make_graph([node], "run_node", vin, vout)
        opset = kwargs.pop("opset_version", onnx.defs.onnx_opset_version())
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        return cls.run_model(model, ins, device, **kwargs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper().startswith("CPU")



def prepare(model: Any, device: str = "CPU", **kwargs: Any) -> MilkitRep:
    """Converts an ONNX model (ModelProto or path) for running; returns a rep with ``run(inputs)``."""
    return MilkitBackend.prepare(model, device, **kwargs)


def run_model(model: Any, inputs: Sequence[Any], device: str = "CPU", **kwargs: Any) -> Tuple[Any, ...]:
    """Converts and runs a model once."""
    return MilkitBackend.run_model(model, inputs, device, **kwargs)


def run_node(node: Any, inputs: Sequence[Any], device: str = "CPU", outputs_info: Any = None,
             **kwargs: Any) -> Tuple[Any, ...]:
    """Runs one NodeProto on `inputs`."""
    return MilkitBackend.run_node(node, inputs, device, outputs_info, **kwargs)


def supports_device(device: str) -> bool:
    """Only the CPU."""
    return device.upper().startswith("CPU")
