"""``milkit run PKG --input name=file.npy ...``: runs a package with milkit's interpreter."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, Tuple

from ._common import CliError, emit_json, load_source

__all__ = ["register", "run"]

NAME = "run"


def _input_arg(text: str) -> Tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=FILE.npy, got {text!r}")
    return name, path


def register(sub: Any) -> None:
    p = sub.add_parser(
        NAME, help="run a package with milkit's interpreter on .npy inputs",
        description="Runs a function of an .mlpackage (or a model.mlmodel, or a MIL text file) with milkit's "
                    "interpreter (MLModel.predict) on inputs read from .npy files, and prints each output's "
                    "name, shape, dtype and a summary (min, max, mean, leading values). Stateful models run "
                    "with a fresh zero state.")
    p.add_argument("model", metavar="PKG", help=".mlpackage directory, model.mlmodel or MIL text file")
    p.add_argument("--input", "-i", dest="inputs", action="append", type=_input_arg, default=[],
                   metavar="NAME=FILE.npy", help="an input's value (repeat for each input)")
    p.add_argument("--function", metavar="NAME", help="the function to run (default: the default function)")
    p.add_argument("--output-dir", "-o", metavar="DIR", help="save each output as DIR/NAME.npy")
    p.add_argument("--print-values", action="store_true", help="print every output value")
    p.add_argument("--json", action="store_true", help="print the outputs' facts as JSON")
    p.set_defaults(func=run)


def _read_npy(name: str, path: str) -> Any:
    import numpy as np

    if not os.path.isfile(path):
        raise CliError(f"{path}: no such file (input {name!r})")
    try:
        with open(path, "rb") as f:
            magic = f.read(6)
        if magic.startswith(b"PK"):
            raise CliError(f"{path}: an .npz archive; give one .npy file per input (input {name!r})")
        if magic != b"\x93NUMPY":
            raise CliError(f"{path}: not a .npy file (input {name!r}); save arrays with numpy.save")
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise CliError(f"{path}: not a readable .npy array (input {name!r}): {' '.join(str(e).split())}") from e


def _stats(arr: Any) -> Dict[str, Any]:
    import numpy as np

    out: Dict[str, Any] = {"shape": list(arr.shape), "dtype": arr.dtype.name}
    if arr.size and arr.dtype.kind in "biuf":
        a = arr.astype(np.float64)
        finite = a[np.isfinite(a)]
        out["nan"] = int(np.isnan(a).sum())
        if finite.size:
            out["min"] = float(finite.min())
            out["max"] = float(finite.max())
            out["mean"] = float(finite.mean())
    return out


def _brief(arr: Any, full: bool) -> str:
    import numpy as np

    if full:
        return np.array2string(arr, threshold=sys.maxsize, max_line_width=120, separator=", ")
    flat = arr.reshape(-1)
    head = ", ".join(f"{x:.6g}" if arr.dtype.kind == "f" else str(x) for x in flat[:6].tolist())
    return "[" + head + (", ..." if flat.size > 6 else "") + "]"


def run(args: argparse.Namespace) -> int:
    import milkit
    from milkit import runtime

    src = load_source(args.model)
    prog = src.program
    fname = args.function or prog.default_function_name
    funcs = prog.functions
    if fname not in funcs:
        raise CliError(f"{args.model}: no function named {fname!r}; its functions are {', '.join(funcs)}")
    fn = funcs[fname]
    declared = [v.name for v in fn.inputs.values() if v._kind != "state"]
    feed: Dict[str, Any] = {}
    for name, path in args.inputs:
        if name not in declared:
            raise CliError(f"{args.model}: function {fname!r} has no input named {name!r}; its inputs are "
                           f"{', '.join(declared) or '(none)'}")
        if name in feed:
            raise CliError(f"input {name!r} is given twice")
        feed[name] = _read_npy(name, path)
    missing = [n for n in declared if n not in feed]
    if missing:
        raise CliError(f"{args.model}: missing input{'s' if len(missing) > 1 else ''} {', '.join(missing)}: give "
                       + " ".join(f"--input {n}=FILE.npy" for n in missing))
    try:
        if src.is_package:
            model = milkit.models.MLModel(src.path, function_name=fname)
            state = model.make_state() if model._get_plan().has_states else None
            outputs = model.predict(feed, state=state)
        else:
            plan = runtime.plan(prog, fname)
            state = plan.make_state() if plan.has_states else None
            outputs = dict(plan.run(runtime.coerce_inputs(fn, feed), state))
    except (milkit.MilkitError, ValueError, TypeError) as e:
        raise CliError(f"{args.model}: {' '.join(str(e).split())}") from e
    saved: Dict[str, str] = {}
    if args.output_dir:
        import numpy as np

        try:
            os.makedirs(args.output_dir, exist_ok=True)
            for name, arr in outputs.items():
                path = os.path.join(args.output_dir, name.replace(os.sep, "_") + ".npy")
                np.save(path, arr)
                saved[name] = path
        except OSError as e:
            raise CliError(f"{args.output_dir}: cannot save the outputs: {e.strerror or e}") from e
    if args.json:
        facts = {}
        for name, arr in outputs.items():
            facts[name] = _stats(arr)
            if name in saved:
                facts[name]["file"] = saved[name]
            if args.print_values:
                facts[name]["values"] = arr.tolist()
        emit_json({"model": src.path, "function": fname, "outputs": facts})
        return 0
    for name, arr in outputs.items():
        st = _stats(arr)
        line = f"{name}: shape {tuple(arr.shape)} {arr.dtype.name}"
        if "min" in st:
            line += f"  min {st['min']:.6g}  max {st['max']:.6g}  mean {st['mean']:.6g}"
        if st.get("nan"):
            line += f"  nan {st['nan']}"
        if name in saved:
            line += f"  -> {saved[name]}"
        print(line)
        if arr.size:
            print("  " + _brief(arr, args.print_values).replace("\n", "\n  "))
    return 0
