"""The ``milkit`` command line (also ``python -m milkit``): inspect, compare, convert, run and
validate ML Program packages and MIL text files.

    milkit info model.mlpackage [--json]
    milkit print model.mlpackage [--consts] [--function NAME]
    milkit diff a.mlpackage b.mlpackage [--json] [--exit-code]
    milkit convert model.mil -o model.mlpackage [--precision fp16|fp32] [--target iOS17]
                   [--pipeline default|empty|cleanup]
    milkit compress model.mlpackage -o small.mlpackage (--palettize N | --quantize DTYPE | --prune S |
                    --n-m N:M | --config config.yaml) [--granularity G] [--group-size N] ...
    milkit run model.mlpackage --input x=x.npy [--output-dir DIR] [--function NAME]
    milkit validate model.mlpackage [--json]

Exit status: 0 success; 1 bad input (a missing file, a corrupt package, a file that is not a
package, invalid values, validation problems, and for ``diff --exit-code`` differences);
2 usage errors (unknown command or option, missing argument). Bad input is reported as one line
on stderr naming the file; ``--traceback`` (or ``MILKIT_TRACEBACK=1``) shows Python's traceback
instead, for bug reports. ``import milkit`` does not import this package.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence

from . import compress, convert, diff, info, run, text, validate
from ._common import CliError

__all__ = ["main", "build_parser"]

_COMMANDS = (info, text, diff, convert, compress, run, validate)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    from milkit import __version__

    parser = argparse.ArgumentParser(
        prog="milkit",
        description="Inspect, compare, convert, run and validate Core ML ML Program packages (.mlpackage) "
                    "and MIL text files.",
        epilog="Exit status: 0 ok, 1 bad input (missing or corrupt file, validation problems), 2 usage error. "
               "Run 'milkit COMMAND --help' for a command's options.")
    parser.add_argument("--version", action="version", version=f"milkit {__version__}")
    parser.add_argument("--no-progress", action="store_true", help="never draw progress bars (as MILKIT_PROGRESS=0)")
    parser.add_argument("--traceback", action="store_true",
                        help="on errors show Python's traceback instead of a one-line message")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for mod in _COMMANDS:
        mod.register(sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the command line with `argv` (default: ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as e:  # --help, --version (0) and usage errors (2)
        return int(e.code or 0) if not isinstance(e.code, str) else 2
    if args.no_progress:
        from milkit.progress import set_progress

        set_progress(False)
    traceback = args.traceback or os.environ.get("MILKIT_TRACEBACK", "") not in ("", "0")
    prog = f"milkit {args.command}"
    try:
        return int(args.func(args) or 0)
    except CliError as e:
        if traceback:
            raise
        _error(prog, str(e))
        return 1
    except KeyboardInterrupt:
        _error(prog, "interrupted")
        return 130
    except BrokenPipeError:  # `milkit print x | head`
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1
    except Exception as e:  # noqa: BLE001 - a bug or an input we did not foresee: still no traceback
        if traceback:
            raise
        _error(prog, f"{type(e).__name__}: {' '.join(str(e).split())} (run with --traceback for details)")
        return 1


def _error(prog: str, msg: str) -> None:
    sys.stderr.write(f"{prog}: error: {msg}\n")
    sys.stderr.flush()
