"""Model utilities (coremltools' ``coremltools.models.utils``): multifunction packages, renaming
features, reading and writing specs.

    from milkit.utils import MultiFunctionDescriptor, save_multifunction

    desc = MultiFunctionDescriptor()
    desc.add_function("prefill.mlpackage", "main", "prefill")
    desc.add_function("decode.mlpackage", "main", "decode")
    desc.default_function_name = "decode"
    save_multifunction(desc, "llm.mlpackage")

``save_multifunction`` writes the package coremltools writes, byte for byte: equal weights of
the functions are stored once in ``weight.bin``. Weights stay memory-mapped from the source
packages and are compared in chunks, never read whole into Python.

``rename_feature``, ``load_spec`` and ``save_spec`` work on coremltools' ``Model`` protos (the
``spec`` that ``MLModel.get_spec()`` returns), so they need coremltools.
"""

from __future__ import annotations

import copy
import json
import os
from typing import Dict, List, Optional, Tuple

from . import _core

__all__ = [
    "MultiFunctionDescriptor",
    "save_multifunction",
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
