"""What the commands share: bad-input errors, loading a source (package or MIL text), the facts
of a loaded program (used by ``info``, ``diff`` and ``validate``), and formatting."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

__all__ = [
    "CliError",
    "Source",
    "load_source",
    "read_description",
    "program_facts",
    "var_facts",
    "shape_str",
    "human_bytes",
    "emit_json",
    "is_weight",
    "SMALL_CONST_ELEMS",
    "UNSUPPORTED_SUFFIXES",
    "with_path",
    "parse_text_file",
    "dim_fact",
    "plural",
    "targets",
]

# consts with at most this many elements are printed inline as values (as MIL text does) and
# diffed as op attributes; bigger const tensors are weights
SMALL_CONST_ELEMS = 10

# sources other issues will add; named here so the message is clear rather than a parse error
UNSUPPORTED_SUFFIXES = {".pt": "PyTorch (.pt; export it with torch.export and save a .pt2)",
                        ".pth": "PyTorch (.pth)", ".tflite": "TensorFlow Lite (.tflite)", ".h5": "Keras (.h5)"}


class CliError(Exception):
    """Bad input (missing file, corrupt package, wrong value): printed as one line, exit 1."""


@dataclass
class Source:
    """A loaded program and where it came from."""

    path: str
    kind: str  # "mlpackage", "mlmodel" or "mil" (MIL text)
    program: Any
    description: Optional[Dict[str, Any]] = None  # the package's ModelDescription (see read_description)
    model_file: Optional[str] = None  # the package's model.mlmodel

    @property
    def is_package(self) -> bool:
        return self.kind in ("mlpackage", "mlmodel")



def with_path(path: str, e: BaseException) -> str:
    """The exception's message, prefixed with `path` unless it already names it."""
    msg = " ".join(str(e).split()) or type(e).__name__
    base = os.path.basename(os.path.normpath(path))
    return msg if base and base in msg else f"{path}: {msg}"


def _guard(path: str, fn: Callable[[], Any]) -> Any:
    import milkit

    try:
        return fn()
    except (milkit.MilkitError, ValueError, TypeError, OSError, KeyError, UnicodeDecodeError) as e:
        raise CliError(with_path(path, e)) from e


def read_description(model_file: str) -> Dict[str, Any]:
    """The ModelDescription of a model.mlmodel (specification version, metadata, features)."""
    from milkit import _core

    with open(model_file, "rb") as f:
        return json.loads(_core.model_description_json(f.read(), model_file))


def load_source(path: str) -> Source:
    """Loads a package (a directory or a model.mlmodel) or a MIL text file; CliError on bad input."""
    import milkit

    if not os.path.exists(path):
        raise CliError(f"{path}: no such file or directory")
    suffix = os.path.splitext(os.path.normpath(path))[1].lower()
    if os.path.isdir(path) or suffix == ".mlmodel":
        from milkit.mlmodel import _package_model_path

        prog = _guard(path, lambda: milkit.load(path))
        model_file = _guard(path, lambda: _package_model_path(path))
        desc = _guard(path, lambda: read_description(model_file))
        return Source(path, "mlpackage" if os.path.isdir(path) else "mlmodel", prog, desc, model_file)
    if suffix in (".onnx", ".pt2"):
        # an importer's source: the imported MIL program, at the newest opset (states need iOS18)
        from milkit.frontends import onnx as _onnx
        from milkit.frontends import torch as _torch

        importer = _onnx if suffix == ".onnx" else _torch
        prog = _guard(path, lambda: importer.import_model(path, int(milkit.target.iOS18))[0])
        return Source(path, suffix[1:], prog)
    if suffix in UNSUPPORTED_SUFFIXES:
        raise CliError(f"{path}: {UNSUPPORTED_SUFFIXES[suffix]} files are not supported yet; give an .mlpackage, "
                       "a MIL text file, an .onnx model or a .pt2 archive")
    return Source(path, "mil", _guard(path, lambda: parse_text_file(path)))


def parse_text_file(path: str) -> Any:
    """Parses a saved MIL text file (``milkit.to_text`` / ``str(prog)``)."""
    import milkit

    with open(path, "rb") as f:
        data = f.read()
    if b"\0" in data[:4096]:
        raise CliError(f"{path}: not an .mlpackage nor a MIL text file (binary content)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CliError(f"{path}: not a MIL text file (not UTF-8: {e.reason} at byte {e.start})") from e
    if not text.strip():
        raise CliError(f"{path}: empty file (expected MIL text)")
    try:
        return milkit.parse(text)
    except milkit.MilkitError as e:
        raise CliError(f"{path}: not a valid MIL text: {e}") from e


# ---- facts -------------------------------------------------------------------------------------
def dim_fact(d: Any) -> Any:
    return d if isinstance(d, int) else str(d)


def var_facts(v: Any) -> Dict[str, Any]:
    """name, dtype, shape (symbolic dims as strings) and the ranges of its symbolic dims."""
    out: Dict[str, Any] = {"name": v.name, "kind": v._kind, "dtype": str(v.dtype), "type": v._type_str}
    try:
        shape = list(v.shape) if v._has_rank else None
    except Exception:  # noqa: BLE001 - lists / tuples have no single shape
        shape = None
    out["shape"] = None if shape is None else [dim_fact(d) for d in shape]
    ranges = {}
    for d in shape or []:
        if not isinstance(d, int) and getattr(d, "is_symbol", False):
            lo, hi = d.range
            ranges[str(d)] = [lo, hi]
    if ranges:
        out["ranges"] = ranges
    return out


def is_weight(var: Any) -> bool:
    """A const tensor bigger than SMALL_CONST_ELEMS elements (static shape)."""
    if var._kind != "tensor":
        return False
    shape = var.shape
    if not all(isinstance(d, int) for d in shape):
        return False
    n = 1
    for d in shape:
        n *= d
    return n > SMALL_CONST_ELEMS


def _nbytes(var: Any) -> int:
    n = 1
    for d in var.shape:
        n *= d
    return (n * var.dtype.bits + 7) // 8


def _scheme(op: Any) -> Dict[str, Any]:
    """Bits and granularity of one constexpr op."""
    t = op.op_type
    inp = op.inputs
    if t == "constexpr_affine_dequantize":
        n = 1
        for d in inp["scale"].shape:
            n *= d
        return {"bits": inp["quantized_data"].dtype.bits, "granularity": "per_tensor" if n == 1 else "per_channel"}
    if t in ("constexpr_blockwise_shift_scale", "constexpr_sparse_blockwise_shift_scale"):
        data = inp["data"] if "data" in inp else inp["nonzero_data"]
        sshape, dshape = list(inp["scale"].shape), list(op.outputs[-1].shape)
        blocks = [d // s for d, s in zip(dshape, sshape) if s > 1]
        g = ("per_tensor" if not blocks else "per_channel" if all(b == 1 for b in blocks) and len(blocks) == 1
             else "per_block")
        return {"bits": data.dtype.bits, "granularity": g}
    if t in ("constexpr_lut_to_dense", "constexpr_lut_to_sparse"):
        lshape = list(inp["lut"].shape)
        if len(lshape) == 1:  # iOS16: one table
            return {"bits": max(1, (lshape[0] - 1).bit_length()), "granularity": "per_tensor"}
        groups = 1
        for d in lshape[:-2]:
            groups *= d
        return {"bits": max(1, (lshape[-2] - 1).bit_length()),
                "granularity": "per_tensor" if groups == 1 else f"per_grouped_channel ({groups} tables)",
                **({"vector": lshape[-1]} if lshape[-1] > 1 else {})}
    if t == "constexpr_sparse_to_dense":
        out = op.outputs[0]
        n = 1
        for d in out.shape:
            n *= d
        nz = inp["nonzero_data"].shape[0] if inp["nonzero_data"].shape else 0
        return {"bits": None, "granularity": f"sparse ({1 - nz / max(n, 1):.0%} zeros)"}
    return {"bits": None, "granularity": ""}


def compressed_weights(f: Any) -> List[Dict[str, Any]]:
    """Each compressed weight of a function (a chain of constexpr ops read by other ops): the ops,
    bits, granularity, and bytes dense and compressed."""
    out = []
    for op in f.find_ops():
        if not op.op_type.startswith("constexpr_"):
            continue
        users = [c for v in op.outputs for c in v.child_ops]
        if users and all(c.op_type.startswith("constexpr_") for c in users):
            continue  # an inner link of a chain
        chain, packed, stack, seen = [], 0, [op], set()
        while stack:
            o = stack.pop()
            if o.name in seen:
                continue
            seen.add(o.name)
            chain.append(o)
            for v in o.inputs.values():
                for x in (v if isinstance(v, (list, tuple)) else [v]):
                    if x.op is None:
                        continue
                    if x.op.op_type == "const" and x._kind == "tensor":
                        packed += _nbytes(x)
                    elif x.op.op_type.startswith("constexpr_"):
                        stack.append(x.op)
        dense = op.outputs[-1] if op.op_type == "constexpr_sparse_blockwise_shift_scale" else op.outputs[0]
        schemes = [dict(_scheme(o), op=o.op_type) for o in chain]
        out.append({"name": op.name, "shape": [int(d) for d in dense.shape], "dtype": str(dense.dtype),
                    "ops": schemes, "dense_bytes": _nbytes(dense), "compressed_bytes": packed})
    return out


def _feature_map(desc: Optional[Dict[str, Any]], fname: str, default: str) -> Dict[str, Dict[str, Any]]:
    """The description's features (inputs, outputs, states) of function `fname`, by name."""
    if not desc:
        return {}
    for fd in desc.get("functions", []):
        if fd["name"] == fname:
            return {f["name"]: f for k in ("input", "output", "state") for f in fd.get(k, [])}
    if fname != default:
        return {}
    return {f["name"]: f for k in ("input", "output", "state") for f in desc.get(k, [])}


def program_facts(src: Source) -> Dict[str, Any]:
    """Everything ``milkit info`` reports, as plain JSON-able data."""
    from milkit import _core
    from milkit._target import AvailableTarget

    prog = src.program
    desc = src.description
    facts: Dict[str, Any] = {"path": src.path, "kind": src.kind}
    if desc is not None:
        spec = int(desc["specificationVersion"])
    else:
        spec = int(_core.default_package_target(prog))
    facts["specification_version"] = spec
    try:
        facts["deployment_target"] = AvailableTarget(spec).name
    except ValueError:
        facts["deployment_target"] = None
    default = prog.default_function_name
    facts["default_function"] = default
    functions = []
    by_dtype: Dict[str, Dict[str, int]] = {}
    n_weights = n_bytes = 0
    for fname, f in prog.functions.items():
        feats = _feature_map(desc, fname, default)
        ops = f.find_ops()
        counts = Counter(o.op_type for o in ops if o.op_type != "const")
        inputs, states = [], []
        for v in f.inputs.values():
            vf = var_facts(v)
            fd = feats.get(v.name)
            if fd is not None:
                t = fd["type"].get("array", fd["type"])
                if "enumeratedShapes" in t:
                    vf["enumerated_shapes"] = t["enumeratedShapes"]
                    vf["default_shape"] = t.get("shape")
                if fd.get("shortDescription"):
                    vf["description"] = fd["shortDescription"]
            (states if v._kind == "state" else inputs).append(vf)
        outputs = []
        for v in f.outputs:
            vf = var_facts(v)
            fd = feats.get(v.name)
            if fd is not None and fd.get("shortDescription"):
                vf["description"] = fd["shortDescription"]
            outputs.append(vf)
        consts = [o.outputs[0] for o in ops if o.op_type == "const"]
        for c in consts:
            if c._kind != "tensor" or not all(isinstance(d, int) for d in c.shape):
                continue
            b = _nbytes(c)
            e = by_dtype.setdefault(str(c.dtype), {"count": 0, "bytes": 0})
            e["count"] += 1
            e["bytes"] += b
            n_weights += 1
            n_bytes += b
        functions.append({
            "name": fname,
            "default": fname == default,
            "opset": f.opset_version.name,
            "inputs": inputs,
            "outputs": outputs,
            "states": states,
            "num_ops": sum(counts.values()),
            "num_consts": len(consts),
            "ops": dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
            "compressed_weights": compressed_weights(f),
        })
    facts["functions"] = functions
    facts["weights"] = {"count": n_weights, "bytes": n_bytes,
                        "by_dtype": dict(sorted(by_dtype.items(), key=lambda kv: -kv[1]["bytes"]))}
    if src.kind == "mlpackage":
        wfile = os.path.join(os.path.dirname(src.model_file or ""), "weights", "weight.bin")
        facts["weights"]["file_bytes"] = os.path.getsize(wfile) if os.path.exists(wfile) else 0
    if src.model_file is not None:
        facts["shared_weights"] = _guard(src.path, lambda: shared_weights(src.model_file, list(prog.functions)))
    if desc is not None:
        md = desc.get("metadata", {})
        facts["metadata"] = {
            "author": md.get("author", ""),
            "license": md.get("license", ""),
            "version": md.get("versionString", ""),
            "short_description": md.get("shortDescription", ""),
            "user_defined": dict(md.get("userDefined", {})),
        }
    else:
        facts["metadata"] = {"build_info": dict(prog._attributes())}
    return facts


def shared_weights(model_file: str, functions: List[str]) -> Dict[str, Any]:
    """The weights that several consts point at (one blob offset of weight.bin referenced more
    than once, as in a multifunction package whose functions share weights):
    {"groups": [{"file", "offset", "bytes", "consts": [{"function", "name"[, "attribute"]}]}],
     "bytes": size of those blobs (stored once), "saved_bytes": what separate copies would add}."""
    import struct

    from milkit import _core

    with open(model_file, "rb") as f:
        refs = _core.blob_references(f.read(), model_file)
    order = {name: i for i, name in enumerate(functions)}
    by_blob: Dict[Any, List[Any]] = {}
    for i, (fn, op, attr, file, offset) in enumerate(refs):
        by_blob.setdefault((file, offset), []).append((order.get(fn, len(order)), i, fn, op, attr))
    groups = []
    base = os.path.dirname(model_file)
    for (file, offset), members in sorted(by_blob.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if len(members) < 2:
            continue
        size = 0
        path = os.path.join(base, file.replace("@model_path/", "", 1))
        if os.path.isfile(path):  # the blob's metadata record: magic, dtype, sizeInBytes
            with open(path, "rb") as f:
                f.seek(offset)
                head = f.read(16)
            if len(head) == 16:
                size = struct.unpack("<IIQ", head)[2]
        consts = []
        for _, _, fn, op, attr in sorted(members):
            c = {"function": fn, "name": op}
            if attr != "val":
                c["attribute"] = attr
            consts.append(c)
        groups.append({"file": file, "offset": offset, "bytes": size, "consts": consts})
    return {"groups": groups, "bytes": sum(g["bytes"] for g in groups),
            "saved_bytes": sum(g["bytes"] * (len(g["consts"]) - 1) for g in groups)}


# ---- formatting --------------------------------------------------------------------------------
def _bound(v: Any) -> str:
    return "inf)" if v is None or v == -1 else f"{v}]"


def shape_str(vf: Dict[str, Any]) -> str:
    """``(1, is0, 4) fp32`` with ``is0 in [1, 64]`` and enumerated shapes when known."""
    if vf.get("shape") is None:
        return vf["type"]
    dims = vf["shape"]
    s = "(" + ", ".join(str(d) for d in dims) + ("," if len(dims) == 1 else "") + f") {vf['dtype']}"
    extra = [f"{k} in [{lo}, {_bound(hi)}" for k, (lo, hi) in vf.get("ranges", {}).items()]
    if "enumerated_shapes" in vf:
        extra.append("enumerated shapes " + ", ".join(str(tuple(e)) for e in vf["enumerated_shapes"]))
    return s + ("  " + "; ".join(extra) if extra else "")


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{int(n)} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def emit_json(obj: Any) -> None:
    """Prints `obj` as indented JSON on stdout."""
    sys.stdout.write(json.dumps(obj, indent=2, default=_json_default) + "\n")


def _json_default(o: Any) -> Any:
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def targets() -> List[str]:
    """Deployment targets an ML Program can be written for (``--target`` choices)."""
    return ["iOS15", "iOS16", "iOS17", "iOS18"]
