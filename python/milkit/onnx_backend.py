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

from typing import Any, Dict, Sequence, Tuple

from onnx.backend.base import Backend, BackendRep

__all__ = ["MilkitBackend", "MilkitRep", "prepare", "run_model", "run_node", "supports_device"]

# ONNX TensorProto element type -> numpy dtype name
_NP_OF_ONNX = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
               10: "float16", 11: "float64", 12: "uint32", 13: "uint64"}


class MilkitRep(BackendRep):
    """A converted model: ``run(inputs)`` returns the outputs in the graph's order."""

    def __init__(self, program: Any, info: Dict[str, Any]) -> None:
        import milkit

        self.program = program
        self.info = info
        self._plan = milkit.runtime.plan(program)
        self._fn = program.functions[program.default_function_name]

    def run(self, inputs: Any, **kwargs: Any) -> Tuple[Any, ...]:
        import numpy as np

        from . import runtime

        names = self.info["input_names"]
        if isinstance(inputs, dict):
            feed = dict(inputs)
        else:
            if not isinstance(inputs, (list, tuple)):
                inputs = [inputs]
            if len(inputs) > len(names):
                raise ValueError(f"{len(inputs)} inputs given, the model has {len(names)}: {names}")
            feed = dict(zip(names, inputs))
        fin = self._fn.inputs
        for k, v in list(feed.items()):
            a = np.asarray(v)
            var = fin.get(k)
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
        vals = list(outs.values())
        res = []
        for i, v in enumerate(vals):
            t = self.info["output_types"][i] if i < len(self.info["output_types"]) else 0
            want = _NP_OF_ONNX.get(t)
            v = np.asarray(v)
            if want is not None and v.dtype != np.dtype(want):
                v = v.astype(want)
            res.append(v)
        return tuple(res)

class MilkitBackend(Backend):
    """ONNX backend running models with milkit's interpreter (CPU)."""

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> MilkitRep:
        import milkit

        target = kwargs.pop("minimum_deployment_target", milkit.target.iOS18)
        precision = kwargs.pop("compute_precision", milkit.precision.FLOAT32)
        passes = kwargs.pop("pass_pipeline", None)
        from .convert import _run_pipeline_only
        from .frontends import onnx as _onnx

        prog, info = _onnx.import_model(model, int(target))
        _run_pipeline_only(prog, target, precision, passes)
        return MilkitRep(prog, info)

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
