"""Graph passes (coremltools' names, e.g. ``common::dead_code_elimination``)."""

from __future__ import annotations

from typing import Any

from . import _core

__all__ = ["apply_pass", "apply_passes", "pass_names"]


def pass_names() -> list[str]:
    """Names of every pass milkit implements."""
    return list(_core.pass_names())


def apply_passes(prog: Any, names: list[str], options: dict[str, dict[str, Any]] | None = None,
                 verify_each: bool = False) -> None:
    """Runs passes in place, in order. ``options`` maps a pass name to its string options."""
    opts = {k: {o: str(v) for o, v in d.items()} for k, d in (options or {}).items()}
    _core.run_passes(prog, names, opts, verify_each, False)


def apply_pass(prog: Any, name: str, **options: Any) -> None:
    """Runs one pass in place."""
    apply_passes(prog, [name], {name: options} if options else None)
