"""A compact text summary of a program: functions, inputs and outputs with symbolic shapes, op
counts by type, const and weight sizes."""

from __future__ import annotations

from collections import Counter
from typing import Any

__all__ = ["summary"]


def _shape(v: Any) -> str:
    return "(" + ", ".join(str(d) for d in v.shape) + ")"


def summary(prog: Any) -> str:
    """A multi-line summary of ``prog`` (a milkit Program)."""
    lines = []
    for name, f in prog.functions.items():
        ops = [o for o in f.find_ops()]
        counts = Counter(o.op_type for o in ops)
        consts = [o.outputs[0] for o in ops if o.op_type == "const"]
        weight_bytes = sum(c.val.nbytes for c in consts if c.val is not None and hasattr(c.val, "nbytes"))
        lines.append(f"function {name} [{f.opset_version.name}]: {len(ops) - counts['const']} ops, "
                     f"{counts['const']} consts ({weight_bytes / 2**20:.1f} MiB)")
        for v in f.inputs.values():
            lines.append(f"  input  {v.name}: {_shape(v)} {v.dtype}")
        for v in f.outputs:
            lines.append(f"  output {v.name}: {_shape(v)} {v.dtype}")
        lines.append("  ops by type: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items()) if k != "const"))
    return "\n".join(lines)
