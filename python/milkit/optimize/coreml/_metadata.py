"""``get_weights_metadata`` (coremltools' names): the weights of a model, how sparse they are, how
many distinct values they hold, and which ops read them."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Dict, List, Optional

import numpy as np

__all__ = ["CoreMLOpMetaData", "CoreMLWeightMetaData", "get_weights_metadata"]


class CoreMLOpMetaData:
    """An op reading a weight: its type, name, and the names of the weights it reads by input
    (``params_name_mapping``, also readable as attributes: ``meta.weight``)."""

    def __init__(self, op_type: str, name: str, params_name_mapping: Dict[str, str]) -> None:
        self.op_type = op_type
        self.name = name
        self.params_name_mapping = params_name_mapping

    def __getattr__(self, key: str) -> str:
        mapping = self.__dict__.get("params_name_mapping", {})
        if key in mapping:
            return mapping[key]
        raise AttributeError(key)

    def __str__(self) -> str:
        res = f"{self.op_type}(name={self.name}"
        for k, v in self.params_name_mapping.items():
            res += f", {k}={v}"
        return res + ", ...)"

    __repr__ = __str__


class CoreMLWeightMetaData:
    """A weight: its value, sparsity (fraction of elements with magnitude <= 1e-12), number of
    distinct values, and the ops reading it."""

    def __init__(self, val: np.ndarray, sparsity: Optional[float] = None, unique_values: Optional[int] = None,
                 child_ops: Optional[List[CoreMLOpMetaData]] = None) -> None:
        if not isinstance(val, np.ndarray):
            raise TypeError(f"val must be a numpy array, got {type(val).__name__}")
        self.val = val
        self.sparsity = float(np.sum(np.abs(val) <= 1e-12) / val.size) if sparsity is None else sparsity
        self.unique_values = int(len(np.unique(val))) if unique_values is None else unique_values
        self.child_ops = child_ops

    def __str__(self) -> str:
        res = "[  \n"
        res += f"  val: np.ndarray(shape={self.val.shape}, dtype={self.val.dtype})\n"
        res += f"  sparsity: {self.sparsity}\n"
        res += f"  unique_values: {self.unique_values}\n"
        if self.child_ops is not None:
            res += "  child_ops: [\n"
            for c in self.child_ops:
                res += f"    {c}\n"
            res += "  ]\n"
        return res + "]"

    __repr__ = __str__


class _MetaDataDict(OrderedDict):
    def __str__(self) -> str:
        return "".join(f"{k}\n{v}\n" for k, v in self.items())


def _valid(val: Any, weight_threshold: int) -> bool:
    return isinstance(val, np.ndarray) and val.size >= weight_threshold


def get_weights_metadata(mlmodel: Any, weight_threshold: int = 2048) -> "OrderedDict[str, CoreMLWeightMetaData]":
    """The const weights of at least ``weight_threshold`` elements, by const name, with their
    sparsity, distinct values and child ops (coremltools' ``get_weights_metadata``). Takes an
    MLModel or a milkit Program; the names are the ones ``op_name_configs`` takes."""
    from ... import _core
    from ...io import load

    prog = mlmodel if isinstance(mlmodel, _core.Program) else load(mlmodel.package_path)
    res = _MetaDataDict()

    def block(b: Any) -> None:
        candidates = []
        for op in b.operations:
            for nb in op.blocks:
                block(nb)
            if op.op_type == "const" and _valid(op.outputs[0].val, weight_threshold):
                candidates.append(op)
        for op in candidates:
            children: List[CoreMLOpMetaData] = []
            seen = set()
            for child in op.outputs[0].child_ops:
                if child.name in seen:
                    continue
                seen.add(child.name)
                mapping = OrderedDict()
                for k, v in child.inputs.items():
                    if isinstance(v, (list, tuple)):
                        continue
                    if v.op is not None and v.op.op_type == "const" and _valid(v.val, weight_threshold):
                        mapping[k] = v.op.name
                children.append(CoreMLOpMetaData(child.op_type, child.name, mapping))
            res[op.name] = CoreMLWeightMetaData(np.asarray(op.outputs[0].val), child_ops=children)

    for f in prog.functions.values():
        block(f)
    return res
