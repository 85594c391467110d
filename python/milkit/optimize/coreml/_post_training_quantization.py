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
    "linear_quantize_activations",
    "linear_quantize_weights",
    "palettize_weights",
    "prune_weights",
]

_IOS16 = 7  # milkit.target.iOS16
_IOS17 = 8  # milkit.target.iOS17


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


def _load(model: Any, what: str, minimum: int = _IOS16) -> tuple:
    """(program, the MLModel or None, target); an MLModel's program is raised to the `minimum`
    opset (coremltools' _apply_graph_pass spec_version), a Program is taken as it is."""
    from ... import _core
    from ...mlmodel import MLModel

    if isinstance(model, _core.Program):
        return model, None, max(f.opset for f in model.functions.values())
    if not isinstance(model, MLModel):
        raise TypeError(f"{what} takes an MLModel (an mlprogram) or a milkit Program, got {type(model).__name__}")
    from ...io import load

    if minimum > _IOS16:  # read at the raised target, each op at its version there, as coremltools
        prog = _core.load_mlpackage(model.package_path, minimum)
    else:
        prog = load(model.package_path)
    if len(prog.functions) > 1:
        raise ValueError(f"{what} is not supported for a multifunction model.")
    target = max(minimum, max(f.opset for f in prog.functions.values()))
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


def _samples(fn: Any, sample_data: Any) -> list:
    """coremltools' sample_data (a list of dicts input name -> array; the key None names the only
    input of a single-input model) checked against the function's inputs and cast to their
    dtypes. The caller's dicts are not changed."""
    from ...runtime import coerce_inputs

    if not isinstance(sample_data, (list, tuple)):
        raise ValueError(f"sample_data must be a list of dicts (input name -> array), got {type(sample_data).__name__}")
    if len(sample_data) == 0:
        raise ValueError("sample_data is empty: calibration needs at least one sample")
    names = list(fn.inputs)
    out = []
    for i, sample in enumerate(sample_data):
        if not isinstance(sample, dict):
            raise ValueError(f"sample_data[{i}] must be a dict (input name -> array), got {type(sample).__name__}")
        sample = dict(sample)
        if None in sample:
            if len(sample) > 1 or len(names) > 1:
                raise ValueError("When the model has multiple inputs, please provide the name for each data in "
                                 "`sample_data`")
            sample = {names[0]: sample[None]}
        for name in names:
            if name not in sample:
                raise ValueError(f"sample_data[{i}] has no data for the model input {name!r} (the model's inputs "
                                 f"are {names})")
        for name in sample:
            if name not in names:
                raise ValueError(f"sample_data[{i}] names {name!r}, which is not an input of the model (the model's "
                                 f"inputs are {names})")
        out.append(coerce_inputs(fn, sample))
    return out


def _calibration_stats(model: Any, sample_data: Any,
                       calibration_op_group_size: int = -1) -> Dict[str, Dict[str, float]]:
    """The calibrated range of each activation as coremltools' stats dict ``{var name: {"rmin": ..,
    "rmax": ..}}`` (see :func:`linear_quantize_activations`)."""
    prog, _, _ = _load(model, "linear_quantize_activations", _IOS17)
    return _stats_of(prog, sample_data, calibration_op_group_size)


def _stats_of(prog: Any, sample_data: Any, group_size: Any) -> Dict[str, Dict[str, float]]:
    from ... import _core

    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size == 0 or group_size < -1:
        raise ValueError(f"calibration_op_group_size must be -1 or a positive int, got {group_size!r}")
    if len(prog.functions) != 1:
        raise ValueError("linear_quantize_activations is not supported for a multifunction model.")
    fn = prog.functions[prog.default_function_name]
    ranges = _core.calibrate_activations(fn, _samples(fn, sample_data), group_size)
    return {name: {"rmin": lo, "rmax": hi} for name, (lo, hi) in ranges.items()}


def _stats_json(stats: Dict[str, Dict[str, float]]) -> str:
    import json
    import math

    def bound(v: float) -> Any:
        v = float(v)
        return v if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))

    return json.dumps({k: [bound(r["rmin"]), bound(r["rmax"])] for k, r in stats.items()}, sort_keys=True)


def linear_quantize_activations(mlmodel: Any, config: OptimizationConfig, sample_data: Any,
                                calibration_op_group_size: int = -1) -> Any:
    """Quantizes activations to 8 bits (coremltools' ``linear_quantize_activations``): the model
    runs every sample of `sample_data` with milkit's interpreter (any OS, no temporary package) to
    calibrate the range of each activation, then ``quantize`` -> ``dequantize`` pairs with those
    ranges go before the inputs of each conv, linear, avg_pool, max_pool and add (both inputs
    non-const) and after each such op (or the activation that follows it), as configured by
    `config` (an ``OptimizationConfig`` of ``OpLinearQuantizerConfig``: mode, int8 / uint8), and
    redundant pairs are removed. The model is raised to iOS17 (where quantize / dequantize exist);
    a Program older than that is left alone with a warning.

    `sample_data` is a list of dicts input name -> array (the key ``None`` names the only input of
    a single-input model). `calibration_op_group_size` (-1: all) bounds how many activations one
    calibration run keeps, i.e. its memory; every group runs each sample.

    Deliberate differences from coremltools: the range of an activation is the union over all
    samples (coremltools' calibration keeps only the last sample's range); concat groups that share
    a tensor are merged transitively (coremltools' greedy merge depends on set order); activations
    that are model outputs are calibrated too, so an op reading one is quantized (coremltools
    raises KeyError); an fp32 model gets fp32 scales after ops (coremltools raises).

    Returns a new ``MLModel`` (or the Program, rewritten in place)."""
    import warnings as _warnings

    from ... import _core
    from ._config import OpLinearQuantizerConfig

    _check_config(config, (OpLinearQuantizerConfig,), "insert_prefix_quantize_dequantize_pair")
    prog, mlmodel, target = _load(mlmodel, "linear_quantize_activations", _IOS17)
    stats = _stats_of(prog, sample_data, calibration_op_group_size)
    text, _ = config._to_json()
    options = {"config": text, "activation_stats": _stats_json(stats)}
    try:
        for name in ("compression::insert_prefix_quantize_dequantize_pair",
                     "compression::insert_suffix_quantize_dequantize_pair"):
            _core.run_pass(prog, name, options)
        _core.run_pass(prog, "common::dequantize_quantize_pair_elimination", {})
    finally:
        for message in _core.take_compression_warnings():
            _warnings.warn(message, UserWarning, stacklevel=2)
    return prog if mlmodel is None else _reconvert(prog, mlmodel, target)
