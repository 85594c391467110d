"""MIL text: print a program (optionally with every const and its exact value) and parse it back.

    text = milkit.to_text(prog, consts=True)   # exact: parse(text) gives an equal program
    prog2 = milkit.parse(text)
    prog3 = milkit.parse(str(prog))            # coremltools' print format (small programs)

In coremltools' format (``str(prog)``, the default ``to_text``) consts are not printed: small
ones appear inline without their dtype (``y=2.0``), which the parser infers from the op's other
inputs and the declared output types (Python's rules otherwise: int -> int32, float -> fp32), and
bigger ones (more than 10 elements, or inside tuple inputs) only as ``%name`` references, which
cannot be parsed back. With ``consts=True`` every const is printed as its own line with its exact
value; consts with more than ``max_const_elems`` elements are elided (``val=<elided N elems>``)
and read back as zeros of their dtype and shape. Malformed text raises milkit.FormatError with
the line and column.
"""

from __future__ import annotations

from typing import Any, Optional

from . import _core

__all__ = ["parse", "to_text"]


def parse(text: str) -> Any:
    """Parses MIL text (``str(prog)`` or ``to_text(prog, consts=True)``) into a Program.

    Every op is rebuilt through the builder with its printed name and output names, so
    validation and type inference run again; declared output types must match inference.
    """
    if not isinstance(text, str):
        raise TypeError(f"milkit.parse expects a str, got {type(text).__name__}")
    return _core.parse_program(text)


def to_text(program: Any, consts: bool = False, max_const_elems: Optional[int] = None) -> str:
    """Prints `program` like ``str(program)``; with ``consts=True`` every const op is printed too,
    with its exact value (elided past ``max_const_elems`` elements)."""
    if not isinstance(program, _core.Program):
        raise TypeError(f"milkit.to_text expects a milkit Program, got {type(program).__name__}")
    if max_const_elems is not None:
        if isinstance(max_const_elems, bool) or not isinstance(max_const_elems, int):
            raise TypeError(f"max_const_elems must be an int or None, got {max_const_elems!r}")
        if max_const_elems < 0:
            raise ValueError(f"max_const_elems must be >= 0, got {max_const_elems}")
    return _core.program_to_text(program, bool(consts), max_const_elems)


program_to_text = to_text
