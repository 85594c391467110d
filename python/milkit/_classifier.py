"""``ct.ClassifierConfig``: the classify op ``convert`` adds at the end of a classifier's
main function, as coremltools does."""

from __future__ import annotations

import os
from typing import Any

from . import _core, types
from .builder import Builder as mb
from .program import mil_list

__all__ = ['ClassifierConfig']


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
