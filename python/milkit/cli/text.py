"""``milkit print PKG [--consts] [--function NAME]``: the MIL text of a package."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._common import CliError, load_source

__all__ = ["register", "run"]

NAME = "print"


def register(sub: Any) -> None:
    p = sub.add_parser(
        NAME, help="print the MIL text of a package",
        description="Prints the program of an .mlpackage (or a model.mlmodel, or a MIL text file) as MIL text, "
                    "as str(prog) does. With --consts every const is printed with its exact value, so "
                    "'milkit convert' (milkit.parse) can read the text back.")
    p.add_argument("model", metavar="PKG", help=".mlpackage directory, model.mlmodel or MIL text file")
    p.add_argument("--consts", action="store_true", help="print every const op with its value")
    p.add_argument("--max-const-elems", type=int, default=None, metavar="N",
                   help="with --consts, elide const values of more than N elements")
    p.add_argument("--function", metavar="NAME", help="print only this function")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import milkit

    if args.max_const_elems is not None and args.max_const_elems < 0:
        raise CliError(f"--max-const-elems must be >= 0, got {args.max_const_elems}")
    prog = load_source(args.model).program
    if args.function is not None:
        funcs = prog.functions
        if args.function not in funcs:
            raise CliError(f"{args.model}: no function named {args.function!r}; its functions are "
                           f"{', '.join(funcs)}")
        one = milkit.Program()
        one.add_function(args.function, funcs[args.function])
        one.default_function_name = args.function
        prog = one
    text = milkit.to_text(prog, consts=args.consts, max_const_elems=args.max_const_elems)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0
