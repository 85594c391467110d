"""Model utilities (coremltools' ``coremltools.models.utils``): multifunction packages, renaming
features, reading and writing specs.

    from milkit.utils import MultiFunctionDescriptor, save_multifunction

    desc = MultiFunctionDescriptor()
    desc.add_function("prefill.mlpackage", "main", "prefill")
    desc.add_function("decode.mlpackage", "main", "decode")
    desc.default_function_name = "decode"
    save_multifunction(desc, "llm.mlpackage")

``save_multifunction`` writes the package coremltools writes: the same ``weight.bin`` bytes, in
which equal weights of the functions are stored once, and the same Model proto (milkit writes the
program's maps in program order where coremltools' order varies between processes, and keeps the
names of state writes that coremltools' loader renames). Weights stay memory-mapped from the source
packages and are compared in chunks, never read whole into Python.

``rename_feature``, ``load_spec`` and ``save_spec`` work on coremltools' ``Model`` protos (the
``spec`` that ``MLModel.get_spec()`` returns), so they need coremltools.
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any, Dict, List, Optional, Tuple

from . import _core

__all__ = [
    "MultiFunctionDescriptor",
    "save_multifunction",
    "rename_feature",
    "load_spec",
    "save_spec",
]

_SPEC_IOS18 = 9  # the first specification version with multifunction models


def _model_file(model_path: str) -> str:
    from .mlmodel import _package_model_path

    return _package_model_path(model_path)


def _read_model_bytes(model_path: str) -> bytes:
    path = _model_file(model_path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no model.mlmodel in {model_path!r}")
    with open(path, "rb") as f:
        return f.read()


def _has_weights_item(model_path: str) -> bool:
    """Whether the package's Manifest lists Core ML's weights folder (as coremltools looks it up)."""
    manifest = os.path.join(model_path, "Manifest.json")
    try:
        with open(manifest, encoding="utf-8") as f:
            entries = json.load(f).get("itemInfoEntries", {})
    except (OSError, ValueError):
        return False
    return any(e.get("name") == "weights" and e.get("author") == "com.apple.CoreML" for e in entries.values())


class MultiFunctionDescriptor:
    """Which functions of which packages make a multifunction package (coremltools'
    ``MultiFunctionDescriptor``): ``add_function`` takes a function of a package under a new name,
    ``add_model`` takes all of a package's functions, and ``default_function_name`` must be set
    before ``save_multifunction``.

    Given `model_path`, the descriptor starts with all the functions of that package.
    """

    def __init__(self, model_path: Optional[str] = None) -> None:
        self._default_function_name: Optional[str] = None
        self._name_to_source_function: Dict[str, Tuple[str, str]] = {}
        self._modelpath_to_functions: Dict[str, List[str]] = {}
        self._modelpath_to_spec_version: Dict[str, int] = {}
        if model_path is not None:
            self.add_model(model_path)

    def _functions(self) -> Dict[str, Tuple[str, str]]:
        """Target function name -> (model path, source function name), in the order added."""
        return copy.copy(self._name_to_source_function)

    def _add_modelpath_to_cache(self, model_path: str) -> None:
        if model_path in self._modelpath_to_functions:
            return
        try:
            data = _read_model_bytes(model_path)
            desc = json.loads(_core.model_description_json(data, model_path))
        except Exception as err:
            raise ValueError(f"invalid model_path {model_path} with error {err} while loading.") from err
        # a model older than iOS18 has no `functions`: its one function is "main"
        names = [f["name"] for f in desc.get("functions", [])]
        self._modelpath_to_functions[model_path] = names or ["main"]
        self._modelpath_to_spec_version[model_path] = int(desc.get("specificationVersion", 0))

    @property
    def default_function_name(self) -> Optional[str]:
        """The function a multifunction package runs by default."""
        return self._default_function_name

    @default_function_name.setter
    def default_function_name(self, val: str) -> None:
        if not isinstance(val, str):
            raise ValueError(f"default_function_name must be type of str. Got {val}.")
        self._default_function_name = val

    def add_function(self, model_path: str, src_function_name: str, target_function_name: str) -> None:
        """Adds the function `src_function_name` of the package at `model_path` as
        `target_function_name`."""
        self._add_modelpath_to_cache(model_path)
        if src_function_name not in self._modelpath_to_functions[model_path]:
            raise ValueError(f"src_function_name {src_function_name} not found in {model_path}.")
        if target_function_name in self._name_to_source_function:
            raise ValueError(f"function {target_function_name} already exist.")
        self._name_to_source_function[target_function_name] = (model_path, src_function_name)

    def add_model(self, model_path: str) -> None:
        """Adds every function of the package at `model_path` under its own name."""
        self._add_modelpath_to_cache(model_path)
        for name in self._modelpath_to_functions[model_path]:
            self.add_function(model_path, name, name)

    def remove_function(self, function_name: str) -> None:
        """Removes the function `function_name` from the descriptor."""
        if function_name not in self._name_to_source_function:
            raise ValueError(f"function_name {function_name} not found.")
        del self._name_to_source_function[function_name]


def save_multifunction(desc: MultiFunctionDescriptor, destination_path: str | os.PathLike) -> None:
    """Writes the functions of `desc` as one multifunction .mlpackage at `destination_path`
    (coremltools' ``save_multifunction``).

    The package targets iOS18 at least (the newest specification version of the sources, if
    newer). Each function keeps its description from its source package. Equal consts are
    deduplicated within each function (``common::const_deduplication``), then equal const
    tensors across (and within) functions point at one copy in ``weight.bin``, as coremltools
    does. Source weights stay memory-mapped; equal candidates are compared in chunks.
    """
    from .progress import Progress

    functions = desc._functions()
    default = desc.default_function_name
    if default is None:
        raise ValueError(
            "default_function_name must be set for the MultiFunctionDescriptor instance before calling "
            "save_multifunction.")
    if default not in functions:
        raise ValueError(f"default_function_name {default} not found in the program. Available functions names "
                         f"are {list(functions)}")
    paths: List[str] = []
    for model_path, _ in functions.values():
        if model_path not in paths:
            if not _has_weights_item(model_path):
                raise ValueError(f"weight_dir for model_path {model_path} not found.")
            paths.append(model_path)
    spec_version = max([desc._modelpath_to_spec_version[p] for p in paths] + [_SPEC_IOS18])
    destination_path = os.fspath(destination_path)
    with Progress(f"save {os.path.basename(destination_path)}", total=len(paths) + 2) as bar:
        programs = {}
        for p in paths:
            programs[p] = _core.load_mlpackage(p, spec_version)
            bar.update(1)
        multi = _core.Program()
        sources = []
        model_bytes = {p: _read_model_bytes(p) for p in paths}
        for target, (model_path, src) in functions.items():
            multi.add_function(target, programs[model_path].functions[src])
            sources.append((model_bytes[model_path], src, target))
        multi.default_function_name = default
        _core.run_passes(multi, ["common::const_deduplication"])
        _core.share_consts_across_functions(multi)
        bar.update(1)
        description = _core.multifunction_description(sources, default)
        _core.save_mlpackage(multi, destination_path, spec_version, True, {}, description, False)
        bar.update(1)


# ---- specs ---------------------------------------------------------------------------------------
_RESERVED = frozenset((
    "any", "bool", "program", "func", "tensor", "list", "dict", "tuple", "true", "false", "string", "bf16",
    "fp16", "fp32", "fp64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "state"))


def _is_mil_name(name: str) -> bool:
    """Whether coremltools' name sanitizer keeps `name` as is."""
    import re

    return re.sub("[^a-zA-Z0-9_]", "_", name) == name and not re.match("[^a-zA-Z_]", name) and name not in _RESERVED


def _rename_in(features: Any, current_name: str, new_name: str) -> bool:
    hit = False
    for feat in features:
        if feat.name == current_name:
            feat.name = new_name
            hit = True
    return hit


def _rename_in_list(names: Any, current_name: str, new_name: str) -> None:
    for i, n in enumerate(names):
        if n == current_name:
            names[i] = new_name


def _rename_in_mil_function(fn: Any, current_name: str, new_name: str) -> None:
    """The function's inputs, its blocks' outputs, and the bindings and outputs of their ops (the
    top level of each block specialization, as coremltools does)."""
    _rename_in(fn.inputs, current_name, new_name)
    for block in fn.block_specializations.values():
        _rename_in_list(block.outputs, current_name, new_name)
        for op in block.operations:
            for arg in op.inputs.values():
                for binding in arg.arguments:
                    if binding.HasField("name") and binding.name == current_name:
                        binding.name = new_name
            _rename_in(op.outputs, current_name, new_name)


def _rename_in_neural_network(spec: Any, current_name: str, new_name: str, rename_inputs: bool,
                              rename_outputs: bool) -> None:
    for kind in ("neuralNetwork", "neuralNetworkClassifier", "neuralNetworkRegressor"):
        if not spec.HasField(kind):
            continue
        nn = getattr(spec, kind)
        if rename_inputs:
            for layer in nn.layers:
                _rename_in_list(layer.input, current_name, new_name)
                if rename_outputs:
                    _rename_in_list(layer.output, current_name, new_name)
            for pre in nn.preprocessing:
                if pre.featureName == current_name:
                    pre.featureName = new_name
        if kind == "neuralNetworkClassifier" and nn.labelProbabilityLayerName == current_name:
            nn.labelProbabilityLayerName = new_name


def rename_feature(spec: Any, current_name: str, new_name: str, rename_inputs: bool = True,
                   rename_outputs: bool = True, function_name: Optional[str] = None) -> None:
    """Renames an input or output of a Model proto in place (coremltools' ``rename_feature``): in
    the model description and, for an ML Program, in the MIL program (the function's input, the
    block outputs and every op argument or output of that name). Nothing happens when no feature
    has that name. An ML Program name must match ``[a-zA-Z_][a-zA-Z0-9_]*`` (ValueError).

    `function_name` picks one function of a multifunction model: its FunctionDescription and its
    MIL function are renamed, no other. None renames the top-level description (a model with one
    function) and the feature in every MIL function, as coremltools does.
    """
    if not rename_inputs and not rename_outputs:
        return
    desc: Any = spec.description
    if function_name is not None and len(spec.description.functions) > 0:
        found = [f for f in spec.description.functions if f.name == function_name]
        if not found:
            raise ValueError(f"function {function_name!r} not found; the model has "
                             f"{[f.name for f in spec.description.functions]}")
        desc = found[0]
    changed = False
    if rename_inputs:
        changed = _rename_in(desc.input, current_name, new_name) or changed
    if rename_outputs:
        changed = _rename_in(desc.output, current_name, new_name) or changed
        if desc.predictedFeatureName == current_name:
            desc.predictedFeatureName = new_name
        if desc.predictedProbabilitiesName == current_name:
            desc.predictedProbabilitiesName = new_name
    if not changed:
        return
    _rename_in_neural_network(spec, current_name, new_name, rename_inputs, rename_outputs)
    if spec.HasField("featureVectorizer") and rename_inputs:
        for col in spec.featureVectorizer.inputList:
            if col.inputColumn == current_name:
                col.inputColumn = new_name
    pipeline = None
    for kind in ("pipeline", "pipelineClassifier", "pipelineRegressor"):
        if spec.HasField(kind):
            pipeline = spec.pipeline if kind == "pipeline" else getattr(spec, kind).pipeline
            break
    if pipeline is not None:
        last = len(spec.pipeline.models)  # coremltools counts the plain pipeline's models here
        for i, model in enumerate(pipeline.models):
            rename_feature(model, current_name, new_name, rename_inputs or i != 0, rename_outputs or i < last)
    if spec.HasField("mlProgram"):
        if not _is_mil_name(new_name):
            raise ValueError("Input/output names for ML Program must be of the format [a-zA-Z_][a-zA-Z0-9_]*. "
                             "That is, it must start with a letter and only contain numerals, underscore or letters. "
                             f"Provided feature name, \"{new_name}\" does not satisfy these requirements.")
        for name, fn in spec.mlProgram.functions.items():
            if function_name is None or name == function_name or len(spec.description.functions) == 0:
                _rename_in_mil_function(fn, current_name, new_name)


def load_spec(model_path: str | os.PathLike) -> Any:
    """The Model proto of an .mlpackage (its Manifest's root model) or a .mlmodel file, parsed with
    coremltools' generated classes (coremltools' ``load_spec``; needs coremltools)."""
    from coremltools.proto import Model_pb2

    spec = Model_pb2.Model()
    with open(_model_file(os.fspath(model_path)), "rb") as f:
        spec.ParseFromString(f.read())
    return spec


def save_spec(spec: Any, filename: str | os.PathLike, auto_set_specification_version: bool = False,
              weights_dir: Optional[str] = None) -> None:
    """Writes a Model proto as a .mlmodel file or an .mlpackage (coremltools' ``save_spec``). No
    extension means .mlmodel. An ML Program package needs `weights_dir`, the folder holding its
    weight.bin (an empty folder for a model without weights), copied into the package.
    `auto_set_specification_version` needs Core ML (macOS): here it only warns."""
    filename = os.fspath(filename)
    ext = os.path.splitext(filename)[1]
    if not ext:
        filename += ".mlmodel"
    elif ext not in (".mlmodel", ".mlpackage"):
        raise Exception(f"Extension must be .mlmodel or .mlpackage (not {ext})")
    if auto_set_specification_version:
        import warnings

        warnings.warn("Failed to automatic set specification version for this model.", RuntimeWarning, stacklevel=2)
    if ext != ".mlpackage":
        with open(filename, "wb") as f:
            f.write(spec.SerializeToString())
        return
    if spec.WhichOneof("Type") == "mlProgram" and weights_dir is None:
        raise Exception("spec of type mlProgram cannot be saved without the weights file. Please provide the path "
                        "to the weights file as well, using the 'weights_dir' argument.")
    if os.path.exists(filename):
        if os.listdir(filename):
            raise FileExistsError(f"The package_path is invalid because it's a non-empty directory: {filename}")
        os.rmdir(filename)
    from .mlmodel import _write_package

    _write_package(spec, filename, weights_dir)
