"""Applies ``TensorType`` s and ``ImageType`` s to a function's inputs and outputs: symbol
ranges, enumerated shapes, image inputs and outputs, output dtypes (``convert`` and
``Function.set_input_types`` / ``set_output_types``)."""

from __future__ import annotations

import warnings
from typing import Any, Sequence

from . import _core, types
from .builder import Builder as mb
from .builder import _as_dtype
from .image_types import ImageType, _check_image_input, _check_image_output, _image_input_record
from .input_types import EnumeratedShapes, RangeDim, TensorType

__all__ = ['_apply_input_types', '_apply_output_types', '_update_output_dtypes']


def _input_name(t: Any, i: int, names: Sequence[str]) -> str | None:
    """The input that ``inputs[i]`` (`t`) gives a type to: the one it names, else the i-th of
    `names` (the function's inputs in order), else None."""
    return t.name if t.name is not None else names[i] if i < len(names) else None


def _apply_input_types(fn: Any, inputs: Sequence[Any]) -> dict:
    """Applies ``inputs`` (TensorTypes and ImageTypes) to function `fn`: symbol ranges, and the
    image inputs recorded on the function (replacing those of the inputs named); returns the
    enumerated shapes of tensor inputs by input name, for the writer."""

    enumerated: dict = {}
    fin = fn.inputs
    names = list(fin)
    images = []
    named = set()
    for i, t in enumerate(inputs):
        if not isinstance(t, (TensorType, ImageType)):
            raise TypeError(f"inputs[{i}] must be ct.TensorType or ct.ImageType, got {type(t).__name__}")
        name = _input_name(t, i, names)
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
            _cast_input(fn, name, _as_dtype(t.dtype))
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


# requested dtype -> the program's dtype it stands for without a cast (coremltools narrows these
# inputs to the dtype Core ML computes in)
_NARROWED = {"int64": "int32", "fp64": "fp32"}


def _cast_input(fn: Any, name: str, want: Any) -> None:
    """Input `name` takes dtype `want` and a cast to the dtype the program reads is inserted before
    the first op (coremltools does the same for ``TensorType(dtype=...)`` differing from the traced
    input: an int program input given fp32 or fp16 reads ``cast(x, dtype="int32")``). An int64 /
    fp64 request for an int32 / fp32 input is the narrowing coremltools applies: no cast."""
    var = fn.inputs[name]
    have = types.builtin_to_string(var.dtype)
    want_s = types.builtin_to_string(want)
    if _NARROWED.get(want_s) == have:
        return
    if var._kind not in ("tensor", "scalar"):
        raise ValueError(f"input {name!r}: only tensor inputs take a dtype")
    fn._retype_input(name, want.code)
    ops = fn.operations
    _core._push_scope(fn, None, ops[0] if ops else None)
    try:
        c = mb.cast(x=var, dtype=have)
    finally:
        _core._pop_scope()
    fn.block.replace_uses_of_var_after_op(anchor_op=c.op, old_var=var, new_var=c)


def _apply_output_types(fn: Any, outputs: Sequence[Any]) -> None:
    """Records the ImageTypes of ``outputs`` as the function's image outputs (by position)."""
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
