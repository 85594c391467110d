"""``milkit diff A B [--json] [--exit-code]``: what differs between two packages or MIL texts.

Ops are matched by name within functions of the same name. An op's inputs are compared by what
they refer to: ``%var`` for values computed in the program and for weights, the value itself for
small consts (at most SMALL_CONST_ELEMS elements: MIL's attributes such as ``axes`` or
``transpose_x``). Weights (bigger const tensors) are matched by their const op's name and
compared by dtype, shape and values (max abs difference). Packages also compare their
ModelDescription: metadata, input / output / state features and the specification version.
"""

from __future__ import annotations

import argparse
from typing import Any, Dict, List, Optional, Tuple

from ._common import emit_json, is_weight, load_source, plural, var_facts

__all__ = ["register", "run", "diff_sources", "format_diff"]

NAME = "diff"


def register(sub: Any) -> None:
    p = sub.add_parser(
        NAME, help="show what differs between two packages or MIL texts",
        description="Compares two programs (each an .mlpackage, a model.mlmodel or a MIL text file): functions, "
                    "their inputs and outputs, ops added, removed or changed (type, inputs, attributes, outputs; "
                    "ops are matched by name), weights that differ (with the max abs difference) and, for "
                    "packages, the description (metadata, features, specification version).",
        epilog="Exit status: 0 when both load (whether or not they differ), 1 on bad input; with --exit-code, "
               "1 also when they differ (as git diff --exit-code).")
    p.add_argument("a", metavar="A", help="the old program: .mlpackage, model.mlmodel or MIL text file")
    p.add_argument("b", metavar="B", help="the new program")
    p.add_argument("--json", action="store_true", help="print the differences as JSON")
    p.add_argument("--exit-code", action="store_true", help="exit with status 1 when the programs differ")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    a = load_source(args.a)
    b = load_source(args.b)
    d = diff_sources(a, b)
    if args.json:
        emit_json(d)
    else:
        print(format_diff(d))
    return 1 if args.exit_code and not d["identical"] else 0


# ---- values ------------------------------------------------------------------------------------
def _value_str(var: Any) -> str:
    import numpy as np

    val = var.val
    if isinstance(val, str):
        return repr(val)
    arr = np.asarray(val)
    if arr.dtype == np.bool_:
        return str(arr.tolist())
    text = str(arr.tolist()) if arr.ndim else repr(arr.item())
    return f"{text} ({var.dtype})"


def _ref(var: Any) -> str:
    op = var.op
    if op is not None and op.op_type == "const" and not is_weight(var):
        return _value_str(var)
    return "%" + var.name


def _keyed_ops(f: Any) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(ops by name, weights by const op name); a repeated name gets '#2', '#3'."""
    ops: Dict[str, Any] = {}
    weights: Dict[str, Any] = {}
    for o in f.find_ops():
        if o.op_type == "const":
            if is_weight(o.outputs[0]):
                weights[_unique(weights, o.name)] = o.outputs[0]
            continue
        ops[_unique(ops, o.name)] = o
    return ops, weights


def _unique(d: Dict[str, Any], name: str) -> str:
    if name not in d:
        return name
    k = 2
    while f"{name}#{k}" in d:
        k += 1
    return f"{name}#{k}"


def _op_record(o: Any) -> Dict[str, Any]:
    inputs: Dict[str, Any] = {}
    for k, v in o.inputs.items():
        inputs[k] = [_ref(x) for x in v] if isinstance(v, tuple) else _ref(v)
    return {"type": o.op_type, "inputs": inputs, "outputs": [f"%{v.name}: {v._type_str}" for v in o.outputs],
            "blocks": len(o.blocks)}


def _record_changes(ra: Dict[str, Any], rb: Dict[str, Any]) -> List[Dict[str, Any]]:
    ch: List[Dict[str, Any]] = []
    if ra["type"] != rb["type"]:
        ch.append({"field": "type", "a": ra["type"], "b": rb["type"]})
    for k in list(ra["inputs"]) + [k for k in rb["inputs"] if k not in ra["inputs"]]:
        va, vb = ra["inputs"].get(k), rb["inputs"].get(k)
        if va != vb:
            ch.append({"field": f"input {k}", "a": va, "b": vb})
    for i in range(max(len(ra["outputs"]), len(rb["outputs"]))):
        va = ra["outputs"][i] if i < len(ra["outputs"]) else None
        vb = rb["outputs"][i] if i < len(rb["outputs"]) else None
        if va != vb:
            ch.append({"field": f"output {i}", "a": va, "b": vb})
    if ra["blocks"] != rb["blocks"]:
        ch.append({"field": "blocks", "a": ra["blocks"], "b": rb["blocks"]})
    return ch


def _weight_fact(fname: str, name: str, v: Any) -> Dict[str, Any]:
    return {"function": fname, "name": name, "dtype": str(v.dtype), "shape": list(v.shape)}


def _weight_change(fname: str, name: str, va: Any, vb: Any) -> Optional[Dict[str, Any]]:
    import numpy as np

    changes = []
    if str(va.dtype) != str(vb.dtype):
        changes.append({"field": "dtype", "a": str(va.dtype), "b": str(vb.dtype)})
    if list(va.shape) != list(vb.shape):
        changes.append({"field": "shape", "a": list(va.shape), "b": list(vb.shape)})
    out: Dict[str, Any] = {"function": fname, "name": name, "dtype": str(vb.dtype), "shape": list(vb.shape),
                           "changes": changes}
    if list(va.shape) == list(vb.shape):
        a = np.asarray(va.val)
        b = np.asarray(vb.val)
        if a.dtype.kind in "biuf" and b.dtype.kind in "biuf":
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            both_nan = np.isnan(a64) & np.isnan(b64)
            differ = (a64 != b64) & ~both_nan
            n = int(differ.sum())
            if n:
                delta = np.abs(a64 - b64)[differ]
                out["num_different"] = n
                out["num_elements"] = int(a.size)
                out["max_abs_diff"] = float(np.nanmax(delta)) if not np.all(np.isnan(delta)) else float("nan")
        elif not np.array_equal(a, b):
            out["num_different"] = int((a != b).sum())
            out["num_elements"] = int(a.size)
    if not changes and "num_different" not in out:
        return None
    return out


# ---- description -------------------------------------------------------------------------------
def _feature_str(f: Dict[str, Any]) -> str:
    t = f["type"]
    s = _type_str(t)
    if f.get("isOptional"):
        s += " optional"
    if f.get("shortDescription"):
        s += f" -- {f['shortDescription']}"
    return s


def _type_str(t: Dict[str, Any]) -> str:
    kind = t.get("kind")
    if kind == "state":
        return "state " + (_type_str(t["array"]) if "array" in t else "?")
    if kind == "multiArray":
        s = f"{t['dataType']} {tuple(t.get('shape', []))}"
        if "shapeRange" in t:
            s += " range " + " x ".join(f"[{lo}, {'inf' if hi == -1 else hi}]" for lo, hi in t["shapeRange"])
        if "enumeratedShapes" in t:
            s += " enumerated " + ", ".join(str(tuple(e)) for e in t["enumeratedShapes"])
        if "defaultValue" in t:
            s += f" default {t['defaultValue']}"
        return s
    if kind == "image":
        return f"image {t.get('colorSpace')} {t.get('width')}x{t.get('height')}"
    return str(kind)


def _flat_description(d: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for k in ("specificationVersion", "isUpdatable", "defaultFunctionName", "predictedFeatureName",
              "predictedProbabilitiesName"):
        out[k] = d.get(k)
    md = d.get("metadata", {})
    for k in ("author", "license", "versionString", "shortDescription"):
        out[f"metadata.{k}"] = md.get(k, "")
    for k, v in md.get("userDefined", {}).items():
        out[f"metadata.userDefined[{k}]"] = v
    for kind in ("input", "output", "state"):
        for i, f in enumerate(d.get(kind, [])):
            out[f"{kind} {f['name']}"] = f"#{i} " + _feature_str(f)
    for fd in d.get("functions", []):
        for kind in ("input", "output", "state"):
            for i, f in enumerate(fd.get(kind, [])):
                out[f"function {fd['name']} {kind} {f['name']}"] = f"#{i} " + _feature_str(f)
    return out


def _dict_changes(a: Dict[str, Any], b: Dict[str, Any]) -> List[Dict[str, Any]]:
    keys = list(a) + [k for k in b if k not in a]
    return [{"field": k, "a": a.get(k), "b": b.get(k)} for k in keys if a.get(k) != b.get(k)]


# ---- programs ----------------------------------------------------------------------------------
def _fn_io(f: Any, ranges: bool) -> Dict[str, Any]:
    out: Dict[str, Any] = {"opset": f.opset_version.name}
    for v in f.inputs.values():
        vf = var_facts(v)
        rng = "".join(f" {k} in [{lo}, {'inf)' if hi is None else f'{hi}]'}"
                      for k, (lo, hi) in vf.get("ranges", {}).items()) if ranges else ""
        out[f"{'state' if v._kind == 'state' else 'input'} {v.name}"] = v._type_str + rng
    for i, v in enumerate(f.outputs):
        out[f"output {i}"] = f"%{v.name}: {v._type_str}"
    return out


def _symbol_map(fa: Any, fb: Any, oa: Dict[str, Any], ob: Dict[str, Any]) -> Dict[str, str]:
    """B's symbol names -> A's, for the symbolic dims at the same place of same-named inputs, then
    of the outputs of same-named ops (each load or parse names symbols anew, so only their places
    can be compared)."""
    out: Dict[str, str] = {}

    def match(va: Any, vb: Any) -> None:
        if not va._has_rank or not vb._has_rank or va._kind == "list" or vb._kind == "list":
            return
        for da, db in zip(va.shape, vb.shape):
            if getattr(da, "is_symbol", False) and getattr(db, "is_symbol", False):
                out.setdefault(str(db), str(da))

    ia = fa.inputs
    for name, vb in fb.inputs.items():
        if name in ia:
            match(ia[name], vb)
    for name, opb in ob.items():
        if name in oa:
            for va, vb in zip(oa[name].outputs, opb.outputs):
                match(va, vb)
    return out


class _Renamer:
    """Rewrites B's symbol names in type strings to A's."""

    def __init__(self, mapping: Dict[str, str]) -> None:
        import re

        self.mapping = {k: v for k, v in mapping.items() if k != v}
        self.pattern = re.compile(r"\b(" + "|".join(map(re.escape, self.mapping)) + r")\b") if self.mapping else None

    def __call__(self, x: Any) -> Any:
        if self.pattern is None:
            return x
        if isinstance(x, str):
            return self.pattern.sub(lambda m: self.mapping[m.group(1)], x)
        if isinstance(x, list):
            return [self(e) for e in x]
        if isinstance(x, dict):
            return {k: self(v) for k, v in x.items()}
        return x


def diff_sources(a: Any, b: Any) -> Dict[str, Any]:
    """The differences between two loaded sources (see the module docstring), as JSON-able data."""
    pa, pb = a.program, b.program
    res: Dict[str, Any] = {"a": a.path, "b": b.path, "notes": []}
    if a.description is not None and b.description is not None:
        res["description"] = _dict_changes(_flat_description(a.description), _flat_description(b.description))
    else:
        res["description"] = []
        if a.description is not None or b.description is not None:
            res["notes"].append("the description is not compared: only one side is a package")
    fa, fb = pa.functions, pb.functions
    res["functions"] = {
        "added": [n for n in fb if n not in fa],
        "removed": [n for n in fa if n not in fb],
        "default": None if pa.default_function_name == pb.default_function_name
        else {"a": pa.default_function_name, "b": pb.default_function_name},
    }
    res["function_changes"] = []
    ops: Dict[str, List[Any]] = {"added": [], "removed": [], "changed": []}
    weights: Dict[str, List[Any]] = {"added": [], "removed": [], "changed": []}
    ranges = a.kind != "mil" and b.kind != "mil"
    if not ranges:
        res["notes"].append("symbolic dim ranges are not compared: MIL text does not carry them")
    for fname in [n for n in fa if n in fb]:
        oa, wa = _keyed_ops(fa[fname])
        ob, wb = _keyed_ops(fb[fname])
        rename = _Renamer(_symbol_map(fa[fname], fb[fname], oa, ob))
        for c in _dict_changes(_fn_io(fa[fname], ranges), rename(_fn_io(fb[fname], ranges))):
            res["function_changes"].append({"function": fname, **c})
        for n, o in oa.items():
            if n not in ob:
                ops["removed"].append({"function": fname, "name": n, "type": o.op_type})
        for n, o in ob.items():
            if n not in oa:
                ops["added"].append({"function": fname, "name": n, "type": o.op_type})
            else:
                ch = _record_changes(_op_record(oa[n]), rename(_op_record(o)))
                if ch:
                    ops["changed"].append({"function": fname, "name": n, "type": o.op_type, "changes": ch})
        for n, v in wa.items():
            if n not in wb:
                weights["removed"].append(_weight_fact(fname, n, v))
        for n, v in wb.items():
            if n not in wa:
                weights["added"].append(_weight_fact(fname, n, v))
            else:
                wc = _weight_change(fname, n, wa[n], v)
                if wc is not None:
                    weights["changed"].append(wc)
    res["ops"] = ops
    res["weights"] = weights
    counts = {
        "description": len(res["description"]),
        "functions": len(res["functions"]["added"]) + len(res["functions"]["removed"])
        + (res["functions"]["default"] is not None) + len(res["function_changes"]),
        "ops_added": len(ops["added"]),
        "ops_removed": len(ops["removed"]),
        "ops_changed": len(ops["changed"]),
        "weights_added": len(weights["added"]),
        "weights_removed": len(weights["removed"]),
        "weights_changed": len(weights["changed"]),
    }
    res["summary"] = counts
    res["identical"] = not any(counts.values())
    return res


def _v(x: Any) -> str:
    if x is None:
        return "(none)"
    if x == "":
        return "''"
    if isinstance(x, list):
        return "(" + ", ".join(str(e) for e in x) + ")" if all(isinstance(e, int) for e in x) else str(x)
    return str(x)


def format_diff(d: Dict[str, Any]) -> str:
    """``diff``'s terminal text: '-' only in A, '+' only in B, '~' changed."""
    lines = [f"--- {d['a']}", f"+++ {d['b']}"]
    for note in d["notes"]:
        lines.append(f"note: {note}")
    if d["description"]:
        lines.append("description:")
        for c in d["description"]:
            lines.append(f"  ~ {c['field']}: {_v(c['a'])} -> {_v(c['b'])}")
    fns = d["functions"]
    for n in fns["removed"]:
        lines.append(f"- function {n}")
    for n in fns["added"]:
        lines.append(f"+ function {n}")
    if fns["default"] is not None:
        lines.append(f"~ default function: {fns['default']['a']} -> {fns['default']['b']}")
    by_fn: Dict[str, List[str]] = {}
    for c in d["function_changes"]:
        by_fn.setdefault(c["function"], []).append(f"  ~ {c['field']}: {_v(c['a'])} -> {_v(c['b'])}")
    for o in d["ops"]["removed"]:
        by_fn.setdefault(o["function"], []).append(f"  - op {o['name']} ({o['type']})")
    for o in d["ops"]["added"]:
        by_fn.setdefault(o["function"], []).append(f"  + op {o['name']} ({o['type']})")
    for o in d["ops"]["changed"]:
        rows = by_fn.setdefault(o["function"], [])
        rows.append(f"  ~ op {o['name']} ({o['type']})")
        for c in o["changes"]:
            rows.append(f"      {c['field']}: {_v(c['a'])} -> {_v(c['b'])}")
    for w in d["weights"]["removed"]:
        by_fn.setdefault(w["function"], []).append(f"  - weight {w['name']} {_v(w['shape'])} {w['dtype']}")
    for w in d["weights"]["added"]:
        by_fn.setdefault(w["function"], []).append(f"  + weight {w['name']} {_v(w['shape'])} {w['dtype']}")
    for w in d["weights"]["changed"]:
        parts = [f"{c['field']} {_v(c['a'])} -> {_v(c['b'])}" for c in w["changes"]]
        if "num_different" in w:
            s = f"{w['num_different']} of {w['num_elements']} values differ"
            if "max_abs_diff" in w:
                s += f", max abs diff {w['max_abs_diff']:.6g}"
            parts.append(s)
        by_fn.setdefault(w["function"], []).append(
            f"  ~ weight {w['name']} {_v(w['shape'])} {w['dtype']}: " + "; ".join(parts))
    for fname, rows in by_fn.items():
        lines.append(f"function {fname}:")
        lines.extend(rows)
    s = d["summary"]
    if d["identical"]:
        lines.append("no differences")
    else:
        parts = []
        if s["description"]:
            parts.append(plural(s["description"], "description change"))
        if s["functions"]:
            parts.append(plural(s["functions"], "function change"))
        ops = [f"{s[k]} {w}" for k, w in (("ops_added", "added"), ("ops_removed", "removed"),
                                           ("ops_changed", "changed")) if s[k]]
        if ops:
            parts.append("ops: " + ", ".join(ops))
        ws = [f"{s[k]} {w}" for k, w in (("weights_added", "added"), ("weights_removed", "removed"),
                                          ("weights_changed", "changed")) if s[k]]
        if ws:
            parts.append("weights: " + ", ".join(ws))
        lines.append("; ".join(parts))
    return "\n".join(lines)
