"""``milkit convert SRC -o OUT.mlpackage``: a package or a saved MIL text to a new package.

A source kind is a function keyed by the source's suffix (``SOURCES``); it returns the program
and the ``milkit.convert`` arguments the source implies (input types, deployment target). A
directory is read as a package and any other file as MIL text; ``.onnx`` goes to the ONNX importer
and ``.pt2`` to the torch.export importer.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import Any, Callable, Dict, Tuple

from ._common import UNSUPPORTED_SUFFIXES, CliError, load_source, plural, targets

__all__ = ["register", "run", "SOURCES", "source_kind"]

NAME = "convert"

# (program, extra milkit.convert keyword arguments, the source's own deployment target or None)
Loaded = Tuple[Any, Dict[str, Any], Any]


def _from_package(path: str) -> Loaded:
    import milkit

    src = load_source(path)
    kwargs: Dict[str, Any] = {}
    desc = src.description or {}
    inputs = []
    for fd in desc.get("input", []):  # the default function's enumerated shapes survive the round trip
        t = fd.get("type", {})
        if "enumeratedShapes" in t and len(t["enumeratedShapes"]) >= 2:
            inputs.append(milkit.TensorType(name=fd["name"], shape=milkit.EnumeratedShapes(
                t["enumeratedShapes"], default=t.get("shape") or None)))
    if inputs:
        kwargs["inputs"] = inputs
    spec = desc.get("specificationVersion")
    return src.program, kwargs, (milkit.target(spec) if spec in set(int(t) for t in milkit.target) else None)


def _from_mil_text(path: str) -> Loaded:
    return load_source(path).program, {}, None


def _from_importer(path: str) -> Loaded:
    # milkit.convert imports the file itself (.onnx, .pt2), at the deployment target (default iOS15,
    # as coremltools)
    return path, {}, None


def _not_supported_yet(kind: str) -> Callable[[str], Loaded]:
    def load(path: str) -> Loaded:
        raise CliError(f"{path}: converting {kind} files is not supported yet; give an .mlpackage or a MIL text "
                       "file")

    return load


SOURCES: Dict[str, Callable[[str], Loaded]] = {
    ".mlpackage": _from_package,
    ".mlmodel": _from_package,
    ".mil": _from_mil_text,
    ".txt": _from_mil_text,
    ".onnx": _from_importer,
    ".pt2": _from_importer,
    **{suffix: _not_supported_yet(kind) for suffix, kind in UNSUPPORTED_SUFFIXES.items()},
}


def source_kind(path: str) -> Callable[[str], Loaded]:
    """The loader of `path`: by suffix; a directory is a package; another file is MIL text."""
    suffix = os.path.splitext(os.path.normpath(path))[1].lower()
    if suffix in SOURCES:
        return SOURCES[suffix]
    return _from_package if os.path.isdir(path) else _from_mil_text


def register(sub: Any) -> None:
    p = sub.add_parser(
        NAME, help="convert a package or a MIL text file to an .mlpackage",
        description="Converts SRC (an .mlpackage, a model.mlmodel or a MIL text file as written by "
                    "'milkit print --consts' or milkit.to_text(prog, consts=True)) to an ML Program package "
                    "with milkit.convert: the pass pipeline, then the ML Program backend passes. "
                    "An .onnx model or a .pt2 archive (torch.export.save) is imported (default target "
                    "iOS15; a program that mutates buffers needs --target iOS18 for its states).")
    p.add_argument("source", metavar="SRC", help="source: .mlpackage, model.mlmodel, MIL text, .onnx or .pt2 file")
    p.add_argument("-o", "--output", required=True, metavar="OUT.mlpackage", help="the package to write")
    p.add_argument("--precision", choices=("fp16", "fp32"), default="fp16",
                   help="compute precision (default fp16, as coremltools: fp32 ops get fp16 casts)")
    p.add_argument("--target", choices=targets(), default=None,
                   help="minimum deployment target (default: the source's, or its functions' newest opset)")
    p.add_argument("--pipeline", choices=("default", "empty", "cleanup"), default="default",
                   help="pass pipeline before the backend passes (default: coremltools' default pipeline)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import milkit
    from milkit import _core

    if not os.path.exists(args.source):
        raise CliError(f"{args.source}: no such file or directory")
    out = args.output
    if os.path.exists(out) and not os.path.isdir(out):
        raise CliError(f"{out}: exists and is not a directory (the output is an .mlpackage directory)")
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise CliError(f"{out}: the directory {parent} does not exist")
    prog, kwargs, own_target = source_kind(args.source)(args.source)
    if args.target is not None:
        target = milkit.target[args.target]
    elif isinstance(prog, str):  # an importer's source file (.onnx, .pt2): coremltools' default target
        target = milkit.target.iOS15
    else:
        target = milkit.target(max(int(_core.default_package_target(prog)), int(own_target or 0)))
    pipeline = {"default": milkit.PassPipeline.DEFAULT, "empty": milkit.PassPipeline.EMPTY,
                "cleanup": milkit.PassPipeline.CLEANUP}[args.pipeline]
    precision = milkit.precision.FLOAT16 if args.precision == "fp16" else milkit.precision.FLOAT32
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model = milkit.convert(prog, minimum_deployment_target=target, compute_precision=precision,
                                   pass_pipeline=pipeline, package_dir=parent, **kwargs)
            model.save(out)
        except (milkit.MilkitError, ValueError, TypeError, OSError) as e:
            raise CliError(f"{args.source}: {' '.join(str(e).split())}") from e
    for w in caught:
        if issubclass(w.category, milkit.SkippedPassesWarning):
            continue  # reported below, shorter
        sys.stderr.write(f"milkit convert: warning: {w.message}\n")
    prog = model.get_program()
    n_ops = sum(1 for f in prog.functions.values() for o in f.find_ops() if o.op_type != "const")
    n_skip = len(model.skipped_passes)
    note = f", skipped {n_skip} pass{'es' if n_skip != 1 else ''} milkit lacks" if n_skip else ""
    print(f"wrote {out} ({target.name}, {args.precision}, {args.pipeline} pipeline, {plural(n_ops, 'op')}{note})")
    return 0
