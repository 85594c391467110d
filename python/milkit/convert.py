"""``milkit.convert``: a Program to a Core ML ML Program package, like ``coremltools.convert``.

    model = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS17,
                       compute_precision=ct.precision.FLOAT16,
                       inputs=[ct.TensorType(name="x", shape=(1, ct.RangeDim(1, 512), 64))])
    model.save("encoder.mlpackage")

As in coremltools the program is rewritten in place: the main pipeline (``pass_pipeline``,
default ``PassPipeline.DEFAULT``, without the fp16 passes for FLOAT32), then the
``backend_mlprogram`` passes, then it is written to a temporary package that ``save`` copies.
Passes milkit does not implement yet are skipped and reported (``SkippedPassesWarning`` and
``model.skipped_passes``).
"""

from __future__ import annotations

import copy
import os
import tempfile
import warnings
from typing import Any, Dict, List, Sequence

from . import _core, types
from ._apply_types import _apply_input_types, _apply_output_types, _input_name
from ._classifier import ClassifierConfig, _add_classify_op
from ._target import AvailableTarget
from .input_types import EnumeratedShapes, RangeDim, Shape, TensorType
from .mlmodel import MLModel
from .pipeline import ComputePrecision, PassPipeline, _pipeline_length, _print_pass_times, _run_pipeline, precision
from .progress import Progress

__all__ = [
    "ClassifierConfig",
    "ComputePrecision",
    "precision",
    "RangeDim",
    "Shape",
    "EnumeratedShapes",
    "TensorType",
    "MLModel",
    "SkippedPassesWarning",
    "convert",
]


class SkippedPassesWarning(UserWarning):
    """A pipeline named passes that milkit does not implement yet; they were skipped."""


def _target_value(t: Any) -> int:
    v = getattr(t, "value", t)
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"minimum_deployment_target must be a target (e.g. ct.target.iOS17), got {t!r}")
    return int(v)


def convert(model: Any, source: str = "auto", inputs: Sequence[Any] | None = None,
            outputs: Sequence[Any] | None = None, classifier_config: Any = None,
            minimum_deployment_target: Any = None, convert_to: str | None = None,
            compute_precision: Any = None, skip_model_load: bool = False, compute_units: Any = None,
            package_dir: str | None = None, debug: bool = False, pass_pipeline: PassPipeline | None = None,
            states: Any = None) -> MLModel:
    """Converts a milkit Program into an ML Program package, as ``coremltools.convert`` does for a
    MIL program (``source="milinternal"``).

    The program is rewritten in place: ``inputs`` are applied to its default function, the main
    pipeline runs (``pass_pipeline``; without the fp16 passes for FLOAT32), then coremltools'
    ``backend_mlprogram`` passes; the package is written to a temporary directory that
    ``MLModel.save`` copies. Passes milkit lacks are skipped and reported
    (:class:`SkippedPassesWarning`, ``model.skipped_passes``).

    Args:
        model: the milkit Program.
        source: ``"auto"`` or ``"milinternal"``.
        inputs: ``TensorType`` s giving shapes (ints, ``RangeDim``, ``EnumeratedShapes``) and names
            to the default function's inputs, by name or in order; ``ImageType`` s make inputs
            images (see :mod:`milkit.image_types`). As in coremltools, a torch program converted
            with FLOAT16 precision for iOS16 or later takes fp16 for an fp32 input given a
            ``TensorType`` without a dtype (integer inputs keep their dtype).
        outputs: names for the outputs (objects with a ``name``), in order; a ``TensorType`` with
            a dtype casts the output, an ``ImageType`` makes it an image. As in coremltools, a
            torch program converted with FLOAT16 precision for iOS16 or later has fp16 outputs
            where they would be fp32, unless given a dtype here.
        minimum_deployment_target: a ``milkit.target`` (default iOS15); sets the specification
            version and the opset written.
        convert_to: ``None`` or ``"mlprogram"``.
        compute_precision: ``precision.FLOAT16`` (default: fp16 compute and weights) or
            ``precision.FLOAT32``.
        skip_model_load: accepted for compatibility (milkit never loads Core ML).
        package_dir: where the temporary package is made.
        pass_pipeline: a :class:`PassPipeline` (default ``PassPipeline.DEFAULT``).
        classifier_config: a :class:`ClassifierConfig`: after the passes a ``classify`` op is
            added over the probabilities, and the model is described as a classifier (label and
            probabilities outputs, ``predictedFeatureName`` / ``predictedProbabilitiesName``), as
            coremltools does.
        compute_units: kept on the model, unused.
        debug: unused.
        states: unused (state inputs come from the program's ``StateTensorSpec`` s).

    Returns:
        An :class:`MLModel` backed by the temporary package.
    """
    if source not in ("auto", "milinternal", "onnx", "pytorch"):
        raise ValueError(f"source {source!r} is not supported; milkit converts its own Programs, "
                         f"torch.export programs (.pt2) and ONNX models")
    from .frontends import onnx as _onnx
    from .frontends import torch as _torch

    import_target = (int(AvailableTarget.iOS15) if minimum_deployment_target is None
                     else _target_value(minimum_deployment_target))
    from_torch = False
    if source == "onnx" or (source == "auto" and _onnx.is_onnx_source(model)):
        model, _info = _onnx.import_model(model, import_target, input_dims=_importer_input_dims(model, inputs))
    elif source == "pytorch" or (source == "auto" and _torch.is_torch_source(model)):
        from_torch = True
        if not _torch.is_torch_source(model):
            raise TypeError(f"source 'pytorch' takes a torch.export ExportedProgram or a .pt2 path, got "
                            f"{type(model).__name__} (trace the model with torch.export.export first)")
        # inputs= are matched by position (their names rename the inputs, as in coremltools)
        dims = _importer_input_dims(model, [_Renamed(t, f"#{k}") for k, t in enumerate(inputs or [])])
        model, _info = _torch.import_model(model, import_target, input_dims=dims)
        fin = list(model.functions[model.default_function_name].inputs.values())
        for k, t in enumerate(inputs or []):
            if getattr(t, "name", None) and k < len(fin) and fin[k].name != t.name:
                fin[k].name = t.name
    if not isinstance(model, _core.Program):
        raise TypeError(f"milkit.convert takes a milkit Program (source 'milinternal'), a torch.export "
                        f"program (an ExportedProgram or a .pt2 path) or an ONNX model (a .onnx path or a "
                        f"ModelProto), got {type(model).__name__}")
    if convert_to not in (None, "mlprogram"):
        raise ValueError(f"convert_to={convert_to!r} is not supported: milkit writes ML Programs only")
    if classifier_config is not None and not isinstance(classifier_config, ClassifierConfig):
        raise ValueError("`classifier_config` must be of type ClassifierConfig")
    target = (int(AvailableTarget.iOS15) if minimum_deployment_target is None
              else _target_value(minimum_deployment_target))
    if target < int(AvailableTarget.iOS15):
        raise ValueError("an ML Program needs minimum_deployment_target iOS15 or later")
    for fname, f in model.functions.items():
        if f.opset > target:
            raise ValueError(f"function {fname!r} uses opset {AvailableTarget(f.opset).name}, newer than "
                             f"minimum_deployment_target {AvailableTarget(target).name}")
    if compute_precision is None:
        compute_precision = ComputePrecision.FLOAT16
    if compute_precision not in (ComputePrecision.FLOAT16, ComputePrecision.FLOAT32):
        raise ValueError(f"Invalid value of the argument 'compute_precision': {compute_precision}")
    main = model.functions[model.default_function_name]
    fp16_io = (from_torch and target >= int(AvailableTarget.iOS16)
               and compute_precision == ComputePrecision.FLOAT16)
    if fp16_io and inputs:
        inputs = _default_fp16_inputs(main, inputs)
    enumerated = _apply_input_types(main, inputs) if inputs else {}
    if fp16_io and classifier_config is None:
        outputs = _default_fp16_outputs(main, outputs)

    if outputs and classifier_config is None:
        n_out = len(main.outputs)
        if len(outputs) != n_out:
            raise ValueError(f"outputs: {len(outputs)} given, the program has {n_out}")
        _apply_output_types(main, outputs)
    with Progress("convert", total=_pipeline_length(pass_pipeline, compute_precision) + 1, unit="pass") as bar:
        skipped, times = _run_pipeline(model, pass_pipeline, compute_precision, outputs, bar)
        if outputs and classifier_config is None:
            for o, v in zip(outputs, model.functions[model.default_function_name].outputs):
                if getattr(o, "name", None):
                    v.name = o.name
        if classifier_config is not None:
            # as coremltools (backend load), after every pass: the writer describes classify's
            # outputs as the predicted feature and probabilities
            _add_classify_op(model, classifier_config)
        path = tempfile.mkdtemp(suffix=".mlpackage", dir=package_dir)
        os.rmdir(path)
        _core.save_mlpackage(model, path, target, False, enumerated)
        bar.update(1, "write")
    timing = debug or os.environ.get("MILKIT_PASS_TIMES", "") not in ("", "0")
    if timing:
        _print_pass_times(times)
    uniq = sorted(set(skipped))
    if uniq:
        warnings.warn(f"milkit skipped {len(uniq)} passes it does not implement yet: {', '.join(uniq)}",
                      SkippedPassesWarning, stacklevel=2)
    return MLModel(path, is_temp_package=True, mil_program=model, skip_model_load=skip_model_load,
                   skipped_passes=uniq)


def _default_fp16_inputs(fn: Any, inputs: Sequence[Any]) -> List[Any]:
    """coremltools' default fp16 inputs for torch programs (``use_default_fp16_io``: target iOS16 or
    later and FLOAT16 precision): a TensorType in ``inputs`` without a dtype makes its fp32 input
    fp16. Inputs given no TensorType stay fp32, as in coremltools. Integer inputs keep their
    dtype: coremltools 9.0 makes them fp16 too (an int64 token input given ``TensorType(shape=...)``
    becomes a FLOAT16 input cast to int32), which rounds every index above 2048 to a neighbour
    (token 2049 reads row 2048), so milkit does not follow it there. Copies: the caller's
    TensorTypes are left as they are. ``inputs`` are matched as ``_apply_input_types`` matches
    them: by name, else by position."""
    fin = fn.inputs
    names = list(fin)
    res = []
    for i, t in enumerate(inputs):
        name = _input_name(t, i, names) if type(t) is TensorType else None  # others: left as they are
        res.append(_fp16_copy(t) if name in fin and fin[name].dtype == types.fp32 else t)
    return res


def _default_fp16_outputs(fn: Any, outputs: Sequence[Any] | None) -> List[Any]:
    """coremltools' default fp16 outputs for torch programs (``use_default_fp16_io``: target iOS16 or
    later and FLOAT16 precision): each output the importer made fp32 becomes fp16 unless ``outputs``
    gives it a dtype (or is not a TensorType). Copies: the caller's TensorTypes are left as they
    are."""
    outs = list(fn.outputs)
    if outputs is None:
        return [TensorType(dtype=types.fp16 if v.dtype == types.fp32 else None) for v in outs]
    res = [_fp16_copy(o) if v.dtype == types.fp32 else o for o, v in zip(outputs, outs)]
    return res + list(outputs[len(res):])


def _fp16_copy(t: Any) -> Any:
    """A copy of TensorType `t` with dtype fp16 when it gives no dtype; else `t` itself (a dtype
    given, or another kind of type)."""
    if type(t) is not TensorType or t.dtype is not None:
        return t
    t = copy.copy(t)
    t.dtype = types.fp16
    return t


class _Renamed:
    """A TensorType seen under another name (the torch importer matches inputs= by position)."""

    def __init__(self, t: Any, name: str) -> None:
        self.shape = getattr(t, "shape", None)
        self.name = name


def _importer_input_dims(model: Any, inputs: Sequence[Any] | None) -> Dict[str, List[int]]:
    """The dims an importer fixes from ``inputs``: TensorTypes with a name and a shape, their int
    dims (RangeDims and enumerated shapes are applied to the imported program afterwards)."""
    out: Dict[str, List[int]] = {}
    for t in inputs or []:
        shape = getattr(t, "shape", None)
        name = getattr(t, "name", None)
        if not name or shape is None or isinstance(shape, EnumeratedShapes):
            continue
        dims = getattr(shape, "shape", shape)
        out[name] = [d if isinstance(d, int) and not isinstance(d, bool) and d >= 0 else -1 for d in dims]
    return out
