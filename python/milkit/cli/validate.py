"""``milkit validate PKG [--json]``: loads a package with every check and reports the problems."""

from __future__ import annotations

import argparse
import os
from typing import Any, Dict, List

from ._common import CliError, emit_json, load_source, plural

__all__ = ["register", "run", "validate"]

NAME = "validate"

# ArrayFeatureType.ArrayDataType -> MIL dtype name
_ARRAY_DTYPES = {"FLOAT32": "fp32", "FLOAT16": "fp16", "DOUBLE": "fp64", "INT32": "int32", "INT8": "int8"}
CHECKS = ("load", "verify", "description", "weights", "plan")


def register(sub: Any) -> None:
    p = sub.add_parser(
        NAME, help="load a package with every check and report its problems",
        description="Checks an .mlpackage (or a model.mlmodel, or a MIL text file): the Manifest and model files "
                    "and every op's types (load: every op is rebuilt with type inference), SSA form and unique "
                    "valid names (verify), that the ModelDescription matches the program's inputs, outputs and "
                    "states (description), that every weight is readable (weights), and that the interpreter "
                    "can plan every function (plan).",
        epilog="Exit status: 0 when there is no problem, 1 when there is any (or the file is missing).")
    p.add_argument("model", metavar="PKG", help=".mlpackage directory, model.mlmodel or MIL text file")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def _check_features(where: str, kind: str, feats: List[Dict[str, Any]], vars_: List[Any]) -> List[str]:
    problems = []
    want = [v.name for v in vars_]
    have = [f["name"] for f in feats]
    if have != want:
        problems.append(f"{where}: the description's {kind}s are {have}, the program's are {want}")
        return problems
    for f, v in zip(feats, vars_):
        t = f["type"]
        if kind == "state":
            if t.get("kind") != "state":
                problems.append(f"{where}: state {v.name!r} is described as {t.get('kind')}")
                continue
            t = t.get("array", {})
        if t.get("kind") != "multiArray":
            continue  # images and other feature kinds: nothing milkit writes or checks
        dt = _ARRAY_DTYPES.get(t.get("dataType", ""))
        if dt is None:
            problems.append(f"{where}: {kind} {v.name!r} has an invalid data type {t.get('dataType')}")
        elif dt != str(v.dtype) and not (kind == "output" and dt == "fp32" and str(v.dtype) == "fp64"):
            problems.append(f"{where}: {kind} {v.name!r} is described as {t['dataType']}, the program's is {v.dtype}")
        if not v._has_rank:
            continue
        shape = list(v.shape)
        shapes = [t.get("shape", [])] + list(t.get("enumeratedShapes", []))
        for s in shapes:
            if s and len(s) != len(shape):
                problems.append(f"{where}: {kind} {v.name!r} is described with shape {tuple(s)}, the program's "
                                f"rank is {len(shape)}")
                break
            if kind == "input" and s and any(isinstance(d, int) and d != e for d, e in zip(shape, s)):
                problems.append(f"{where}: input {v.name!r} is described with shape {tuple(s)}, which differs from "
                                f"the program's static dims {tuple(shape)}")
                break
        rng = t.get("shapeRange")
        if rng is not None and len(rng) != len(shape):
            problems.append(f"{where}: {kind} {v.name!r} has {len(rng)} shape ranges for rank {len(shape)}")
    return problems


def _description_problems(src: Any) -> List[str]:
    desc = src.description
    prog = src.program
    problems: List[str] = []
    if not desc.get("isMLProgram", False):
        problems.append("the model is not an ML Program")
    funcs = prog.functions
    described = {fd["name"]: fd for fd in desc.get("functions", [])}
    for n in described:
        if n not in funcs:
            problems.append(f"the description names function {n!r}, which the program lacks")
    dfn = desc.get("defaultFunctionName") or ""
    if dfn and dfn not in funcs:
        problems.append(f"the default function {dfn!r} is not in the program")
    for fname, f in funcs.items():
        fd = described.get(fname)
        if fd is None:
            if fname != prog.default_function_name:
                if described:
                    problems.append(f"function {fname!r} has no FunctionDescription")
                continue
            fd = desc
        where = f"function {fname!r}"
        ins = [v for v in f.inputs.values() if v._kind != "state"]
        states = [v for v in f.inputs.values() if v._kind == "state"]
        problems += _check_features(where, "input", fd.get("input", []), ins)
        problems += _check_features(where, "output", fd.get("output", []), list(f.outputs))
        problems += _check_features(where, "state", fd.get("state", []), states)
    return problems


def validate(path: str) -> Dict[str, Any]:
    """Runs every check on `path`; returns {"path", "ok", "checks": {check: "ok" | "failed" |
    "skipped"}, "problems": [{"check", "message"}]}. Raises CliError only for a missing path."""
    from milkit import _core, runtime

    if not os.path.exists(path):
        raise CliError(f"{path}: no such file or directory")
    checks = {c: "skipped" for c in CHECKS}
    problems: List[Dict[str, str]] = []

    def fail(check: str, msg: str) -> None:
        checks[check] = "failed"
        problems.append({"check": check, "message": msg})

    try:
        src = load_source(path)
    except CliError as e:
        fail("load", str(e))
        return {"path": path, "ok": False, "checks": checks, "problems": problems}
    checks["load"] = "ok"
    prog = src.program
    for c in ("verify", "weights", "plan"):
        checks[c] = "ok"
    for fname, f in prog.functions.items():
        try:
            _core.verify_function(f, fname, True)
        except Exception as e:  # noqa: BLE001 - every failure is a finding
            fail("verify", _one_line(e))
        try:
            for o in f.find_ops(op_type="const"):
                o.outputs[0].val  # noqa: B018 - reads the value (weight.bin through its mapping)
        except Exception as e:  # noqa: BLE001
            fail("weights", f"function {fname!r}: {_one_line(e)}")
        try:
            runtime.plan(prog, fname)
        except Exception as e:  # noqa: BLE001
            fail("plan", f"function {fname!r}: {_one_line(e)}")
    if src.description is not None:
        checks["description"] = "ok"
        for msg in _description_problems(src):
            fail("description", msg)
        if src.kind == "mlpackage":
            try:
                from milkit.mlmodel import _package_enumerated_shapes

                _package_enumerated_shapes(path)
            except Exception as e:  # noqa: BLE001
                fail("description", _one_line(e))
    return {"path": path, "ok": not problems, "checks": checks, "problems": problems}


def run(args: argparse.Namespace) -> int:
    res = validate(args.model)
    if args.json:
        emit_json(res)
    elif res["ok"]:
        done = [c for c, s in res["checks"].items() if s == "ok"]
        print(f"{args.model}: ok ({', '.join(done)})")
    else:
        print(f"{args.model}: {plural(len(res['problems']), 'problem')}")
        for p in res["problems"]:
            print(f"  - {p['check']}: {p['message']}")
    return 0 if res["ok"] else 1
