"""Sphinx extension writing the torch importer's operator table (``guides/_generated/torch_ops.md``,
included by the PyTorch guide) from the importer's own table when the docs are built, so the
guide cannot drift from what milkit converts. torch, where installed, marks the core ATen ops."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Set

__all__ = ["setup", "core_aten_ops", "render"]


def core_aten_ops() -> Set[str]:
    """The core ATen operator names ("aten.add") of the installed torch; empty without torch."""
    try:
        import torch
    except ImportError:  # pragma: no cover - the docs build installs torch
        return set()
    names: Set[str] = set()
    # every aten schema torch knows (dir(torch.ops.aten) lists only the operators loaded so far)
    every = {str(s.name).split("::", 1)[1] for s in torch._C._jit_get_all_schemas() if str(s.name).startswith("aten::")}
    for name in sorted(every | set(dir(torch.ops.aten))):
        try:
            packet = getattr(torch.ops.aten, name)
            overloads = packet.overloads()
        except (AttributeError, RuntimeError):
            continue
        for o in overloads:
            if o == "out" or o.endswith("_out"):
                continue
            if torch.Tag.core in getattr(packet, o).tags:
                names.add("aten." + name)
    return names


def render() -> str:
    """The Markdown of the operator tables."""
    from milkit.frontends import torch as frontend

    by_name: Dict[str, List[str]] = {}
    for key in frontend.supported_ops():
        parts = key.split(".")
        name = ".".join(parts[:2])
        by_name.setdefault(name, [])
        if len(parts) > 2:
            by_name[name].append(parts[2])
    core = core_aten_ops()
    lines = [
        f"milkit converts {len(by_name)} operators (every overload unless some are named), "
        f"{len(core & set(by_name))} of torch's {len(core)} core ATen operators among them.",
        "",
        "| operator | overloads | core ATen |",
        "|---|---|---|",
    ]
    for name in sorted(by_name, key=lambda n: n.lstrip("_").lower()):
        overloads = ", ".join(f"`{o}`" for o in sorted(by_name[name])) or "all"
        lines.append(f"| `{name}` | {overloads} | {'yes' if name in core else ''} |")
    missing = sorted(n for n in core - set(by_name))
    lines += ["", "Core ATen operators milkit does not convert, and why:", "",
              "| operator | reason |", "|---|---|"]
    for name in missing:
        lines.append(f"| `{name}` | {frontend.unsupported_reason(name) or 'no converter yet'} |")
    lines += ["", "Other operators and families milkit refuses with a reason (the error names it):", "",
              "| operator | reason |", "|---|---|"]
    for name, why in frontend.unsupported_ops().items():
        if name not in missing:
            lines.append(f"| `{name}` | {why} |")
    return "\n".join(lines) + "\n"


def _write(app: Any) -> None:
    out = os.path.join(app.srcdir, "guides", "_generated", "torch_ops.md")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    text = render()
    if not os.path.exists(out) or open(out, encoding="utf-8").read() != text:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)


def setup(app: Any) -> Dict[str, Any]:
    """Registers the table writer to run before the sources are read."""
    app.connect("builder-inited", _write)
    return {"parallel_read_safe": True}
