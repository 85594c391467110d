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

import enum
import numbers
import os
import shutil
import sys
import tempfile
import threading
import time
import warnings
from typing import Any, Dict, List, Sequence, Tuple

from . import _core, types
from ._target import AvailableTarget
from .pipeline import BACKEND_MLPROGRAM_PASSES, PassPipeline
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


class ComputePrecision(enum.Enum):
    """``ct.precision``."""

    FLOAT16 = "float16"
    FLOAT32 = "float32"


precision = ComputePrecision


class SkippedPassesWarning(UserWarning):
    """A pipeline named passes that milkit does not implement yet; they were skipped."""


class RangeDim:
    """A flexible dimension ``[lower_bound, upper_bound]`` (-1: unbounded)."""

    def __init__(self, lower_bound: int = 1, upper_bound: int = -1, default: int | None = None,
                 symbol: str | None = None) -> None:
        if upper_bound != -1 and lower_bound > upper_bound:
            raise ValueError(f"RangeDim: lower_bound {lower_bound} exceeds upper_bound {upper_bound}")
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        self.default = lower_bound if default is None else default
        self.symbol = symbol

    def __repr__(self) -> str:
        return f"RangeDim(lower_bound={self.lower_bound}, upper_bound={self.upper_bound}, default={self.default})"


class Shape:
    """A shape of ints and RangeDims."""

    def __init__(self, shape: Sequence[Any], default: Sequence[int] | None = None) -> None:
        self.shape = tuple(shape)
        self.default = default


class EnumeratedShapes:
    """A set of allowed shapes (``ct.EnumeratedShapes``), written as the input's
    ``enumeratedShapes``; ``default`` (the first shape when not given) becomes its ``shape``."""

    def __init__(self, shapes: Sequence[Sequence[int]], default: Sequence[int] | None = None) -> None:
        if not isinstance(shapes, (list, tuple)):
            raise ValueError(f"EnumeratedShapes should be list or tuple of shape, got type {type(shapes)} instead")
        if len(shapes) < 2:
            raise ValueError(
                f"EnumeratedShapes should be take a list or tuple with len >= 2, got {len(shapes)} instead")
        self.shapes = [tuple(s.shape if isinstance(s, Shape) else s) for s in shapes]
        for s in self.shapes:
            for d in s:
                if isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 1:
                    raise ValueError(f"EnumeratedShapes: shape {s} must hold positive ints only")
        self.shapes = [tuple(int(d) for d in s) for s in self.shapes]
        if default is not None and not isinstance(default, (list, tuple)):
            raise ValueError(f"Default shape should be list or tuple, got type {type(default)} instead")
        self.default = tuple(int(d) for d in default) if default is not None else self.shapes[0]


class TensorType:
    """An input or output description (``ct.TensorType``)."""

    def __init__(self, name: str | None = None, shape: Any = None, dtype: Any = None,
                 default_value: Any = None) -> None:
        self.name = name
        self.shape = shape.shape if isinstance(shape, Shape) else shape
        self.dtype = dtype
        self.default_value = default_value


class ClassifierConfig:
    """Makes ``convert`` produce a classifier (``ct.ClassifierConfig``).

    Args:
        class_labels: a list of str or int labels, one per element of the probabilities tensor,
            or the path of a text file with one label per line.
        predicted_feature_name: the name of the label output (default ``"classLabel"``); the
            probabilities output is this name plus ``"_probs"``.
        predicted_probabilities_output: the name of the var holding the probabilities (default:
            the output of the program's last op that is not a const and has one output).
    """

    def __init__(self, class_labels: Any, predicted_feature_name: str | None = "classLabel",
                 predicted_probabilities_output: str | None = None) -> None:
        self.class_labels = class_labels
        self.predicted_feature_name = predicted_feature_name
        self.predicted_probabilities_output = predicted_probabilities_output


_RESERVED_NAMES = {"any", "bool", "program", "func", "tensor", "list", "dict", "tuple", "true", "false", "string",
                   "bf16", "fp16", "fp32", "fp64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                   "uint64", "state"}


def _sanitize_name(name: str) -> str:
    """coremltools' NameSanitizer.sanitize_name for one name: [A-Za-z0-9_] only, a leading "_"
    before a name not starting with a letter or "_", reserved words get "_workaround"."""
    import re

    new = re.sub("[^a-zA-Z0-9_]", "_", name)
    if re.match("[^a-zA-Z_]", new):
        new = "_" + new
    if new in _RESERVED_NAMES:
        new += "_workaround"
    return new


def _add_classify_op(prog: Any, config: ClassifierConfig) -> tuple:
    """coremltools' _add_classify_op (backend/mil/load.py), run after the passes: a classify op at
    the end of the main function over the probabilities var (cast to fp32 when needed), whose
    label and probabilities replace the probabilities among the outputs, first. Returns the
    names of the two outputs."""
    import numpy as np

    from .builder import Builder as mb
    from .program import mil_list

    if prog.default_function_name not in prog.functions:
        raise ValueError(f"Default function {prog.default_function_name} not found in program")
    if len(prog.functions) > 1:
        raise NotImplementedError("classifier model not supported in multi-functions export.")
    if "main" not in prog.functions:
        raise ValueError("a classifier needs the program's function 'main'")
    fn = prog.functions["main"]
    message = "Class labels must be a list of integers / strings or a file path"
    labels = config.class_labels
    if isinstance(labels, str):
        if not os.path.isfile(labels):
            raise ValueError(f"Path to class labels ({labels}) does not exist.")
        with open(labels, encoding="utf-8") as f:
            classes: list = f.read().splitlines()
    elif isinstance(labels, list):
        classes = labels
        if not all(isinstance(c, (int, str)) and not isinstance(c, bool) for c in classes):
            raise ValueError(message)
    else:
        raise ValueError(message)
    if not classes:
        raise ValueError("ClassifierConfig: class_labels is empty")

    ops = fn.operations
    prob = None
    if not config.predicted_probabilities_output:
        # the output of the last non-const op with one output
        for op in reversed(ops):
            if op.op_type != "const" and len(op.outputs) == 1:
                prob = op.outputs[0]
                break
        if prob is None:
            raise ValueError("Unable to determine the tensor in the graph that corresponds to the probabilities "
                             "for the classifier output")
    else:
        want = _sanitize_name(config.predicted_probabilities_output)
        for op in ops:
            for out in op.outputs:
                if out.name == want:
                    prob = out
        if prob is None:
            raise ValueError(f"'predicted_probabilities_output', '{want}', provided in 'ClassifierConfig', "
                             "does not exist in the MIL program.")

    outputs = list(fn.outputs)
    if isinstance(classes[0], int):
        classes = [np.int64(c) for c in classes]
    _core._push_scope(fn)
    try:
        classes_var = mb.const(val=mil_list(classes))
        if prob.dtype != types.fp32:
            outputs = [o for o in outputs if o.name != prob.name]
            prob = mb.cast(x=prob, dtype="fp32", name=prob.name + "_cast_to_fp32")
        label, probs = mb.classify(probabilities=prob, classes=classes_var)
    finally:
        _core._pop_scope()
    name = "classLabel" if config.predicted_feature_name is None else config.predicted_feature_name
    label.name = name
    probs.name = name + "_probs"
    fn.set_outputs([label, probs] + [o for o in outputs if o.name != prob.name])
    return label.name, probs.name


class MLModel:
    """A converted model backed by a package directory (coremltools' ``MLModel`` subset)."""

    def __init__(self, model: str | os.PathLike, is_temp_package: bool = False, mil_program: Any = None,
                 skip_model_load: bool = True, skipped_passes: Sequence[str] = (), compute_units: Any = None,
                 weights_dir: str | None = None, function_name: str | None = None,
                 optimization_hints: Any = None) -> None:
        self.package_path = os.fspath(model)
        if not os.path.exists(self.package_path):
            raise ValueError(f"no model at {self.package_path!r}")
        self.is_temp_package = is_temp_package
        self._mil_program = mil_program
        self.skipped_passes = list(skipped_passes)
        self.compute_unit = compute_units
        self.function_name = function_name
        self._plan: Any = None
        self._plan_lock = threading.Lock()

    @property
    def weights_dir(self) -> str:
        return os.path.join(self.package_path, "Data", "com.apple.CoreML", "weights")

    def save(self, path: str | os.PathLike) -> None:
        """Copies the package to ``path`` (atomically: a copy beside it, then a rename).

        The files of a temporary package that ``convert`` wrote (``is_temp_package``) are never
        written again, so on the same file system they are hard-linked rather than copied: saving a
        model with hundreds of MB of weights then takes milliseconds. Other packages (one loaded
        from the user's own path) are always copied."""
        path = os.fspath(path)
        parent = os.path.dirname(os.path.abspath(path))
        tmp = tempfile.mkdtemp(prefix=".milkit-save-", dir=parent)
        try:
            staged = os.path.join(tmp, "pkg")
            total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(self.package_path) for f in fs)
            with Progress(f"save {os.path.basename(path)}", total=total, unit="B", unit_scale=True) as bar:
                link = [self.is_temp_package]

                def copy(src: str, dst: str) -> Any:
                    size = os.path.getsize(src)
                    if link[0]:
                        try:
                            os.link(src, dst)
                            bar.update(size)
                            return dst
                        except OSError:  # another file system, or no hard links there
                            link[0] = False
                    out = shutil.copy2(src, dst)
                    bar.update(size)
                    return out

                shutil.copytree(self.package_path, staged, copy_function=copy)
            old = None
            if os.path.exists(path):
                old = os.path.join(tmp, "old")
                os.rename(path, old)
            try:
                os.rename(staged, path)
            except OSError:
                if old is not None:
                    os.rename(old, path)
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def get_spec(self) -> Any:
        """The Model proto, parsed with coremltools' generated classes (needs coremltools)."""
        from coremltools.proto import Model_pb2

        spec = Model_pb2.Model()
        with open(os.path.join(self.package_path, "Data", "com.apple.CoreML", "model.mlmodel"), "rb") as f:
            spec.ParseFromString(f.read())
        return spec

    def get_program(self) -> Any:
        """The MIL program as converted."""
        return self._mil_program

    def _get_plan(self) -> Any:
        """The interpreter's plan of the package's function (made once, from the package itself)."""
        with self._plan_lock:
            if self._plan is None:
                from . import runtime
                from .io import load

                with Progress(f"load {os.path.basename(self.package_path)}", total=2) as bar:
                    prog = load(self.package_path)
                    bar.update(1, "plan")
                    name = self.function_name or prog.default_function_name
                    self._plan = runtime.plan(prog, name)
                    bar.update(1)
                self._fn = prog.functions[name]
                self._enumerated = _package_enumerated_shapes(self.package_path)
                self._image_in, self._image_out = _package_image_features(self.package_path, self.function_name)
            return self._plan

    def predict(self, data: Any, state: Any = None) -> Any:
        """Runs the model with milkit's interpreter (any OS), as coremltools' ``MLModel.predict``:
        `data` is a dict of input name -> array (a list of dicts runs each and returns a list);
        returns a dict of output name -> numpy array (a classifier's label is a str or int and its
        probabilities a dict label -> float, as Core ML returns them). Image inputs take PIL images
        (mode 'RGB' for RGB / BGR, 'L' for GRAYSCALE, 'F' for GRAYSCALE_FLOAT16), turned into the
        tensor Core ML feeds; image outputs come back as PIL images ('RGBA', 'L' or 'F'). Stateful models take
        ``state=model.make_state()``. Several threads may predict on one model at once."""
        from . import runtime

        plan = self._get_plan()
        if isinstance(data, (list, tuple)):
            return [self.predict(d, state) for d in data]
        if self._image_in and isinstance(data, dict):
            from .image_types import check_image_size, image_to_array

            data = dict(data)
            for name, desc in self._image_in.items():
                if name in data:
                    data[name] = image_to_array(data[name], name, desc["colorSpace"])
                    check_image_size(data[name], name, desc)
        feed = runtime.coerce_inputs(self._fn, data)
        for name, shapes in self._enumerated.items():
            if name in feed and list(feed[name].shape) not in shapes:
                raise ValueError(f"input {name!r} has shape {tuple(feed[name].shape)}, which is not one of the "
                                 f"model's enumerated shapes {[tuple(s) for s in shapes]}")
        out = runtime.outputs_as_coreml(self._fn, plan.run(feed, state))
        if self._image_out:
            from .image_types import array_to_image

            for name, desc in self._image_out.items():
                if name in out:
                    out[name] = array_to_image(out[name], name, desc["colorSpace"])
        return out

    def make_state(self) -> Any:
        """A fresh state object (zero-filled) for a stateful (iOS18) model."""
        plan = self._get_plan()
        if not plan.has_states:
            raise ValueError("the model has no states")
        return plan.make_state()

    def __del__(self) -> None:
        if getattr(self, "is_temp_package", False):
            shutil.rmtree(self.package_path, ignore_errors=True)

    def __repr__(self) -> str:
        return f"MLModel({self.package_path!r})"

    def _repr_html_(self) -> str:
        from .display import mlmodel_html

        return mlmodel_html(self)


def _package_enumerated_shapes(path: str) -> dict:
    """Input name -> list of enumerated shapes, from the package's model description."""
    with open(_package_model_path(path), "rb") as f:
        shapes = _core.enumerated_shapes(f.read())
    return {k: [list(s) for s in v] for k, v in shapes.items()}


def _package_image_features(path: str, function_name: str | None) -> tuple:
    """(input name -> image description, output name -> image description) of the package's
    function (the default one when `function_name` is None), from its model description."""
    import json

    with open(_package_model_path(path), "rb") as f:
        desc = json.loads(_core.model_description_json(f.read(), path))
    ins, outs = desc.get("input", []), desc.get("output", [])
    for fd in desc.get("functions", []):
        if fd.get("name") == (function_name or desc.get("defaultFunctionName")):
            ins, outs = fd.get("input", []), fd.get("output", [])
    pick = lambda fs: {f["name"]: f["type"] for f in fs if f["type"].get("kind") == "image"}  # noqa: E731
    return pick(ins), pick(outs)


def _package_model_path(path: str) -> str:
    """The model.mlmodel of a package (its Manifest's root item), or `path` itself for a file."""
    import json

    model = path
    if os.path.isdir(path):
        model = os.path.join(path, "Data", "com.apple.CoreML", "model.mlmodel")
        manifest = os.path.join(path, "Manifest.json")
        if os.path.exists(manifest):
            with open(manifest, encoding="utf-8") as f:
                m = json.load(f)
            entry = m.get("itemInfoEntries", {}).get(m.get("rootModelIdentifier", ""), {})
            if "path" in entry:
                model = os.path.join(path, "Data", entry["path"])
    return model


def _target_value(t: Any) -> int:
    v = getattr(t, "value", t)
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"minimum_deployment_target must be a target (e.g. ct.target.iOS17), got {t!r}")
    return int(v)


def _apply_input_types(fn: Any, inputs: Sequence[Any]) -> dict:
    """Applies ``inputs`` (TensorTypes and ImageTypes) to function `fn`: symbol ranges, and the
    image inputs recorded on the function (replacing those of the inputs named); returns the
    enumerated shapes of tensor inputs by input name, for the writer."""
    from . import types
    from .builder import _as_dtype
    from .image_types import ImageType, _check_image_input, _image_input_record

    enumerated: dict = {}
    fin = fn.inputs
    names = list(fin)
    images = []
    named = set()
    for i, t in enumerate(inputs):
        if not isinstance(t, (TensorType, ImageType)):
            raise TypeError(f"inputs[{i}] must be ct.TensorType or ct.ImageType, got {type(t).__name__}")
        name = t.name if t.name is not None else names[i] if i < len(fin) else None
        if name not in fin:
            raise ValueError(f"inputs[{i}]: the program has no input named {t.name!r}; its inputs are {names}")
        if name in named:
            raise ValueError(f"inputs[{i}]: input {name!r} is given twice")
        named.add(name)
        var = fin[name]
        if isinstance(t, ImageType):
            _check_image_input(t, name, var)
            es = t.shape if isinstance(t.shape, EnumeratedShapes) else None
            if es is not None and not all(isinstance(d, int) for d in var.shape):
                _check_enumerated(name, es, var)
            images.append(_image_input_record(t, names.index(name), var, es))
        elif t.dtype is not None and _as_dtype(t.dtype) is not var.dtype:
            raise ValueError(f"input {name!r}: dtype {types.builtin_to_string(_as_dtype(t.dtype))} differs from "
                             f"the program's {var.dtype}; cast inside the program instead")
        if t.shape is None:
            continue
        if isinstance(t.shape, EnumeratedShapes):
            if all(isinstance(d, int) for d in var.shape):
                # coremltools (milinternal) describes a static input by its program shape and
                # drops the enumerated shapes
                warnings.warn(f"input {name!r}: the program's shape {tuple(var.shape)} is static, so its "
                              "EnumeratedShapes are ignored (as coremltools does); make the differing dims "
                              "symbolic in the TensorSpec to use them", UserWarning, stacklevel=3)
                if isinstance(t, ImageType):
                    images[-1]["enumerated_shapes"] = []
            elif not isinstance(t, ImageType):
                _check_enumerated(name, t.shape, var)
                enumerated[name] = ([list(sh) for sh in t.shape.shapes], list(t.shape.default))
            continue
        shape = list(t.shape)
        if len(shape) != len(var.shape):
            raise ValueError(f"input {name!r}: shape {tuple(shape)} has rank {len(shape)}, the program's "
                             f"{var.shape} has rank {len(var.shape)}")
        for k, (want, have) in enumerate(zip(shape, var.shape)):
            if isinstance(want, RangeDim):
                if isinstance(have, int):
                    if not (want.lower_bound <= have and (want.upper_bound == -1 or have <= want.upper_bound)):
                        raise ValueError(f"input {name!r} dim {k}: {have} is outside {want}")
                    continue
                hi = None if want.upper_bound == -1 else want.upper_bound
                have.set_range(want.lower_bound, hi)
            elif isinstance(want, int) and want >= 0:
                if isinstance(have, int) and have != want:
                    raise ValueError(f"input {name!r} dim {k}: {want} differs from the program's {have}")
                if not isinstance(have, int):
                    raise ValueError(f"input {name!r} dim {k}: the program's dim {have} is symbolic; give a RangeDim "
                                     "or fix it in the TensorSpec")
    keep = [r for r in fn._image_inputs() if names[r["input"]] not in named]
    fn._set_image_inputs(keep + images)
    return enumerated


def _apply_output_types(fn: Any, outputs: Sequence[Any]) -> None:
    """Records the ImageTypes of ``outputs`` as the function's image outputs (by position)."""
    from .image_types import ImageType, _check_image_output

    recs = {}
    for i, o in enumerate(outputs):
        if isinstance(o, ImageType):
            _check_image_output(o, i)
            recs[i] = o.color_layout.value
    fn._set_image_outputs(recs)


def _check_enumerated(name: str, es: EnumeratedShapes, var: Any) -> None:
    """Every enumerated shape (and the default) must have the input's rank and agree with its
    static dims (coremltools does not check; Core ML would reject such a model)."""
    rank = len(var.shape)
    for s in list(es.shapes) + [es.default]:
        if len(s) != rank:
            raise ValueError(f"input {name!r}: enumerated shape {s} has rank {len(s)}, the program's "
                             f"{tuple(var.shape)} has rank {rank}")
        for k, (want, have) in enumerate(zip(s, var.shape)):
            if isinstance(have, int) and want != have:
                raise ValueError(f"input {name!r} dim {k}: enumerated shape {s} differs from the program's "
                                 f"static dim {have}")


def _update_output_dtypes(model: Any, outputs: Sequence[Any]) -> None:
    """coremltools' update_output_dtypes for ``convert(outputs=[TensorType(dtype=...)])``: an output
    whose dtype differs from the requested one is renamed "<name>_type_<dtype>" and a cast to the
    requested dtype takes its name. An output that is also an input keeps its dtype (a warning)."""
    from . import types
    from .builder import Builder as mb
    from .builder import _as_dtype

    fn = model.functions[model.default_function_name]
    inputs = set(fn.inputs)  # input names
    new_outputs = []
    changed = False
    for o, v in zip(outputs, fn.outputs):
        # an image output is read as fp32 (fp16 for GRAYSCALE_FLOAT16); coremltools casts only
        # GRAYSCALE_FLOAT16 (the one ImageType with a dtype) and would write an fp16 RGB output as is
        want = getattr(o, "_tensor_dtype", None) or getattr(o, "dtype", None)
        if want is None or v._kind not in ("tensor", "scalar"):
            new_outputs.append(v)
            continue
        want_t = _as_dtype(want)
        if want_t == v.dtype:
            new_outputs.append(v)
            continue
        if v.name in inputs and v.op is None:
            warnings.warn(f"Output var '{v.name}' is also an input var, hence the dtype cannot be changed: "
                          f"output var '{v.name}' remains dtype {types.builtin_to_string(v.dtype)}", stacklevel=3)
            new_outputs.append(v)
            continue
        name = v.name
        v.name = f"{name}_type_{types.builtin_to_string(v.dtype)}"
        _core._push_scope(fn)
        try:
            c = mb.cast(x=v, dtype=types.builtin_to_string(want_t))
        finally:
            _core._pop_scope()
        c.name = name
        new_outputs.append(c)
        changed = True
    if changed:
        fn.set_outputs(new_outputs)


def _print_pass_times(times: list) -> None:
    """Per-pass wall times of one convert, slowest first (convert(debug=True) or MILKIT_PASS_TIMES=1)."""
    total = sum(t for _, t in times) or 1e-9
    agg: dict = {}
    for name, t in times:
        n, s = agg.get(name, (0, 0.0))
        agg[name] = (n + 1, s + t)
    lines = [f"milkit convert: {len(times)} pass runs, {total * 1e3:.1f} ms"]
    for name, (n, t) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"  {name:<52} {t * 1e3:9.2f} ms {100 * t / total:5.1f}%" + (f"  ({n} runs)" if n > 1 else ""))
    print("\n".join(lines), file=sys.stderr)


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
            images (see :mod:`milkit.image_types`).
        outputs: names for the outputs (objects with a ``name``), in order; a ``TensorType`` with
            a dtype casts the output, an ``ImageType`` makes it an image.
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
    if source == "onnx" or (source == "auto" and _onnx.is_onnx_source(model)):
        model, _info = _onnx.import_model(model, import_target, input_dims=_importer_input_dims(model, inputs))
    elif source == "pytorch" or (source == "auto" and _torch.is_torch_source(model)):
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
    enumerated = _apply_input_types(main, inputs) if inputs else {}

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


def _pipeline_passes(pass_pipeline: Any, compute_precision: Any) -> Tuple[List[str], Dict[str, Any]]:
    """The passes convert runs (main pipeline, then the backend's) and their options."""
    pipeline = PassPipeline.DEFAULT if pass_pipeline is None else pass_pipeline
    main_passes = pipeline.passes
    if compute_precision is ComputePrecision.FLOAT32:
        main_passes = [p for p in main_passes if p not in ("common::add_fp16_cast", "common::add_int16_cast")]
    options = pipeline.get_all_options()
    # coremltools' _construct_other_pipelines: a DEFAULT pass the main pipeline leaves out is
    # also left out of the backend pipeline (EMPTY folds nothing anywhere)
    left_out = set(PassPipeline.DEFAULT.passes) - set(pipeline.passes)
    backend = [p for p in BACKEND_MLPROGRAM_PASSES if p not in left_out]
    return list(main_passes) + backend, options


def _pipeline_length(pass_pipeline: Any, compute_precision: Any) -> int:
    return len(_pipeline_passes(pass_pipeline, compute_precision)[0])


def _run_pipeline(model: Any, pass_pipeline: Any, compute_precision: Any, outputs: Any = None,
                  bar: Any = None) -> Tuple[List[str], List[Tuple[str, float]]]:
    """Runs convert's passes on `model` in place; returns (skipped passes, per-pass seconds)."""
    all_passes, options = _pipeline_passes(pass_pipeline, compute_precision)
    skipped: list = []
    times: list = []
    for name in all_passes:  # one at a time, so the bar ticks per pass
        t0 = time.perf_counter()
        if name == "common::update_output_dtypes" and outputs:
            _update_output_dtypes(model, outputs)
        skipped += _core.run_passes(model, [name], {name: options[name]} if name in options else {}, False, True)
        times.append((name, time.perf_counter() - t0))
        if bar is not None:
            bar.update(1, name.split("::")[-1])
    return skipped, times


def _run_pipeline_only(model: Any, minimum_deployment_target: Any, compute_precision: Any,
                       pass_pipeline: Any = None) -> List[str]:
    """convert's passes without writing a package (the ONNX backend runs the result in memory)."""
    if compute_precision is None:
        compute_precision = ComputePrecision.FLOAT16
    return _run_pipeline(model, pass_pipeline, compute_precision)[0]


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
