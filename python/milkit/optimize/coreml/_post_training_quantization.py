"""The compression functions of coremltools.optimize.coreml: each takes an ``MLModel`` (or a milkit
``Program``), runs one C++ compression pass over every function, and returns a new ``MLModel`` (or
the Program, compressed in place), as coremltools does: the model is loaded at a specification
version of at least iOS16, compressed, and converted again with the default pipeline."""

from __future__ import annotations

import os
import warnings
from typing import Any, Callable, Dict

from ._config import OptimizationConfig

__all__ = [
    "decompress_weights",
    "linear_quantize_weights",
    "palettize_weights",
    "prune_weights",
]

_IOS16 = 7  # milkit.target.iOS16


class _LutFunctions:
    """Custom LUT functions of a running pass, by the id the config JSON names."""

    current: Dict[int, Callable] = {}


def _custom_lut(key: int, weight: Any, channel_axis: int, group_size: int, cluster_dim: int) -> tuple:
    """Runs the custom LUT function `key` per channel group, as coremltools'
    grouped_channelwise_compress does: (nbits, lut of rank + 2, indices, vector axis or None)."""
    import numpy as np

    fn = _LutFunctions.current[key]
    data = np.swapaxes(weight, 0, channel_axis) if channel_axis != 0 else weight
    groups = data.shape[0] // group_size if group_size else 1
    luts, idxs = [], []
    for part in np.split(data, groups, axis=0):
        lut, idx = fn(part)
        if not isinstance(lut, np.ndarray) or not isinstance(idx, np.ndarray):
            raise ValueError("LUT and indices must be type of numpy array.")
        luts.append(lut)
        idxs.append(idx)
    lut, idx = np.stack(luts, axis=0), np.stack(idxs, axis=0)
    nbits = int(np.ceil(np.log2(lut.shape[1])))
    target = list(data.shape)
    if cluster_dim > 1:
        target[0] //= cluster_dim
    idx = idx.reshape(target)
    lshape = [1] * (data.ndim + 2)
    lshape[0], lshape[-2], lshape[-1] = groups, 2 ** nbits, cluster_dim
    lut = lut.reshape(lshape)
    if channel_axis != 0:
        lut, idx = np.swapaxes(lut, 0, channel_axis), np.swapaxes(idx, 0, channel_axis)
    return nbits, lut.astype(np.float32), idx.astype(np.uint8), (None if cluster_dim == 1 else channel_axis)


def _check_config(config: Any, allowed: tuple, fn: str) -> None:
    if not isinstance(config, OptimizationConfig):
        raise ValueError(f"config must be of type OptimizationConfig. Got {type(config)}.")
    for c in config._all():
        if not isinstance(c, allowed):
            names = ", ".join(t.__name__ for t in allowed)
            raise ValueError(f"{fn} only accept {names} type config. Got {type(c).__name__}.")
    for k in config.op_type_configs:
        if k == "const":
            raise ValueError("const ops cannot be set by the `set_op_type` function. Please use `set_global`")


def _load(model: Any, what: str) -> tuple:
    """(program, the MLModel or None, target)."""
    from ... import _core
    from ...mlmodel import MLModel

    if isinstance(model, _core.Program):
        return model, None, max(f.opset for f in model.functions.values())
    if not isinstance(model, MLModel):
        raise TypeError(f"{what} takes an MLModel (an mlprogram) or a milkit Program, got {type(model).__name__}")
    from ...io import load

    prog = load(model.package_path)
    if len(prog.functions) > 1:
        raise ValueError(f"{what} is not supported for a multifunction model.")
    target = max(_IOS16, max(f.opset for f in prog.functions.values()))
    for f in prog.functions.values():
        if f.opset < target:
            f.opset = target
    return prog, model, target


def _run(model: Any, pass_name: str, config: OptimizationConfig | None, joint_compression: bool, what: str) -> Any:
    from ... import _core

    if not isinstance(joint_compression, bool):
        raise ValueError(f"joint_compression only supports bool, but got {type(joint_compression)}")
    prog, mlmodel, target = _load(model, what)
    options = {}
    if config is not None:
        text, functions = config._to_json()
        _LutFunctions.current = functions
        options = {"config": text, "joint_compression": "1" if joint_compression else "0"}
    try:
        _core.run_pass(prog, pass_name, options)
    finally:
        _LutFunctions.current = {}
        for message in _core.take_compression_warnings():
            warnings.warn(message, UserWarning, stacklevel=3)
    return prog if mlmodel is None else _reconvert(prog, mlmodel, target)


def _reconvert(prog: Any, mlmodel: Any, target: int) -> Any:
    """The program written as a new package with the default pipeline (coremltools'
    _apply_graph_pass)."""
    from ...convert import convert

    return convert(prog, minimum_deployment_target=target, compute_units=mlmodel.compute_unit,
                   package_dir=os.path.dirname(mlmodel.package_path) if mlmodel.is_temp_package else None)


def linear_quantize_weights(mlmodel: Any, config: OptimizationConfig, joint_compression: bool = False) -> Any:
    """Quantizes the weights linearly (int8 / uint8 / int4 / uint4; per tensor, per channel or per
    block) as coremltools' ``linear_quantize_weights``: weights become
    ``constexpr_affine_dequantize`` (iOS16 / iOS17) or ``constexpr_blockwise_shift_scale`` (iOS18)
    ops. With ``joint_compression`` a palettized model's LUTs or a pruned model's non-zero values
    are quantized (iOS18)."""
    from ._config import OpLinearQuantizerConfig

    _check_config(config, (OpLinearQuantizerConfig,), "linear_quantize_weights")
    return _run(mlmodel, "compression::linear_quantize_weights", config, joint_compression,
                "linear_quantize_weights")


def palettize_weights(mlmodel: Any, config: OptimizationConfig, joint_compression: bool = False) -> Any:
    """Palettizes the weights (each becomes indices into a LUT of 2**nbits entries: kmeans,
    uniform, unique or a custom function; per tensor or per grouped channel; scalar or vector
    entries), as coremltools' ``palettize_weights``; the ops are ``constexpr_lut_to_dense`` (with
    a ``constexpr_blockwise_shift_scale`` after it for a per-channel scale). With
    ``joint_compression`` a pruned or quantized model is palettized further (iOS18)."""
    from ._config import OpPalettizerConfig

    _check_config(config, (OpPalettizerConfig,), "palettize_weights")
    return _run(mlmodel, "compression::palettize_weights", config, joint_compression, "palettize_weights")


def prune_weights(mlmodel: Any, config: OptimizationConfig, joint_compression: bool = False) -> Any:
    """Prunes the weights (threshold, magnitude, block or n:m sparsity) as coremltools'
    ``prune_weights``; the ops are ``constexpr_sparse_to_dense``. With ``joint_compression`` a
    quantized or palettized model's weights are pruned too (iOS18)."""
    from ._config import OpMagnitudePrunerConfig, OpThresholdPrunerConfig

    _check_config(config, (OpThresholdPrunerConfig, OpMagnitudePrunerConfig), "prune_weights")
    return _run(mlmodel, "compression::prune_weights", config, joint_compression, "prune_weights")




def decompress_weights(mlmodel: Any) -> Any:
    """Turns every compressed weight (``constexpr_*`` ops: quantized, palettized, sparse, chained)
    back into a plain const (coremltools' ``decompress_weights``); works on packages coremltools
    wrote as well."""
    return _run(mlmodel, "compression::decompress_weights", None, False, "decompress_weights")
