"""``milkit info PKG [--json]``: what a package (or MIL text) holds."""

from __future__ import annotations

import argparse
from typing import Any, Dict, List

from ._common import emit_json, human_bytes, load_source, plural, program_facts, shape_str

__all__ = ["register", "run", "format_facts"]

NAME = "info"


def register(sub: Any) -> None:
    p = sub.add_parser(
        NAME, help="show a package's spec version, functions, inputs, outputs, states, ops, weights, metadata",
        description="Shows the specification version and deployment target, the functions (and the default), "
                    "each function's inputs and outputs with shapes (symbolic dims with their ranges, enumerated "
                    "shapes) and states, an op histogram, the weights (count and bytes by dtype), the weights "
                    "that several consts share (one offset of weight.bin, as in multifunction packages) and the "
                    "metadata (author, license, version, description, user-defined) of an .mlpackage, a "
                    "model.mlmodel or a MIL text file.")
    p.add_argument("model", metavar="PKG", help=".mlpackage directory, model.mlmodel or MIL text file")
    p.add_argument("--json", action="store_true", help="print the facts as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    facts = program_facts(load_source(args.model))
    if args.json:
        emit_json(facts)
    else:
        print(format_facts(facts))
    return 0


def format_facts(facts: Dict[str, Any]) -> str:
    """``info``'s terminal text."""
    kinds = {"mlpackage": "ML Program package", "mlmodel": "ML Program model file", "mil": "MIL text"}
    lines: List[str] = [f"{facts['path']} ({kinds[facts['kind']]})"]
    target = facts["deployment_target"] or "?"
    if facts["kind"] == "mil":
        lines.append(f"  deployment target: {target} (specification version {facts['specification_version']}, "
                     "from the functions' opsets)")
    else:
        lines.append(f"  specification version: {facts['specification_version']} (deployment target {target})")
    names = [f["name"] + (" (default)" if f["default"] else "") for f in facts["functions"]]
    lines.append(f"  functions: {', '.join(names)}")
    md = facts["metadata"]
    shown = [(k, md.get(k)) for k in ("author", "license", "version", "short_description") if md.get(k)]
    extra = md.get("user_defined") or md.get("build_info") or {}
    if shown or extra:
        lines.append("  metadata:")
        for k, v in shown:
            lines.append(f"    {k.replace('_', ' ')}: {v}")
        for k, v in extra.items():
            lines.append(f"    {k}: {v}")
    for f in facts["functions"]:
        lines.append(f"function {f['name']} [{f['opset']}]" + (" (default)" if f["default"] else ""))
        for title, key in (("inputs", "inputs"), ("outputs", "outputs"), ("states", "states")):
            if not f[key] and key == "states":
                continue
            lines.append(f"  {title}:" + ("" if f[key] else " none"))
            for v in f[key]:
                desc = f"  -- {v['description']}" if v.get("description") else ""
                lines.append(f"    {v['name']}: {shape_str(v)}{desc}")
        hist = ", ".join(f"{k} {n}" for k, n in f["ops"].items())
        lines.append(f"  ops: {f['num_ops']} ({plural(f['num_consts'], 'const')})" + (f": {hist}" if hist else ""))
        if f["compressed_weights"]:
            lines.append(f"  compressed weights: {len(f['compressed_weights'])}")
        for cw in f["compressed_weights"]:
            how = " <- ".join(o["op"].replace("constexpr_", "") + (f" {o['bits']}-bit" if o["bits"] else "")
                              + (f" {o['granularity']}" if o["granularity"] else "") for o in cw["ops"])
            lines.append(f"    {cw['name']}: {cw['dtype']} {tuple(cw['shape'])}, {how}: "
                         f"{human_bytes(cw['dense_bytes'])} -> {human_bytes(cw['compressed_bytes'])}")
    w = facts["weights"]
    line = f"weights: {plural(w['count'], 'const tensor')}, {human_bytes(w['bytes'])}"
    if w["by_dtype"]:
        parts = [f"{k}: {d['count']}, {human_bytes(d['bytes'])}" for k, d in w["by_dtype"].items()]
        line += " (" + ", ".join(parts) + ")"
    lines.append(line)
    if "file_bytes" in w:
        lines.append(f"  weight.bin: {human_bytes(w['file_bytes'])}")
    shared = facts.get("shared_weights") or {}
    if shared.get("groups"):
        lines.append(f"shared weights: {plural(len(shared['groups']), 'blob')}, {human_bytes(shared['bytes'])} "
                     f"stored once ({human_bytes(shared['saved_bytes'])} saved)")
        for g in shared["groups"]:
            names = ", ".join(f"{c['function']}.{c['name']}" + (f".{c['attribute']}" if "attribute" in c else "")
                              for c in g["consts"])
            lines.append(f"  @{g['offset']} ({human_bytes(g['bytes'])}): {names}")
    return "\n".join(lines)
