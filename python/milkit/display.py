"""Rich display in Jupyter: the ``_repr_html_`` of Program, Function, Block, Operation, Var and
MLModel.

Each display is a compact summary (inputs, outputs and states with their symbolic dims and the
symbols' ranges, an op histogram, const and weight sizes by dtype) followed by the MIL text
collapsed behind a ``<details>``. It stays cheap on big programs: one walk over the ops, weight
sizes from the const types (no value is read), and the text cut past ``MAX_TEXT_CHARS``.

Every user string (op, var and function names, metadata, paths) is escaped, and the markup is
well-formed XML (no void elements, no named entities besides the XML ones), so the display can be
embedded anywhere.
"""

from __future__ import annotations

import html
from collections import Counter
from typing import Any, Iterable

from ._facts import _elements, _type_text

__all__ = [
    "MAX_TEXT_CHARS",
    "MAX_HISTOGRAM_ROWS",
    "program_html",
    "function_html",
    "block_html",
    "operation_html",
    "var_html",
    "mlmodel_html",
    "format_bytes",
    "html_page",
]

#: MIL text longer than this (characters) is cut at a line end, with a note saying how much is left.
MAX_TEXT_CHARS = 60_000
#: Op types listed in a histogram; the rest are summed on one row.
MAX_HISTOGRAM_ROWS = 24

_INF = "\u221e"
_IN = "\u2208"
_DASH = "\u2014"
_ELLIPSIS = "\u2026"

_ROOT = ("font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; font-size: 13px; "
         "line-height: 1.45; max-width: 980px")
_TABLE = "border-collapse: collapse; margin: 4px 0 6px 0; font-size: 12.5px"
_TH = "text-align: left; padding: 2px 10px 2px 0; font-weight: 600; border-bottom: 1px solid #9995"
_TD = "text-align: left; padding: 1px 10px 1px 0; vertical-align: top"
_MONO = "font-family: Menlo, Consolas, 'DejaVu Sans Mono', monospace; font-size: 12px"
_MUTED = "color: #777"
_BADGE = ("display: inline-block; padding: 0 6px; margin-left: 6px; border-radius: 8px; "
          "background: #8882; font-size: 11.5px")
_PRE = (_MONO + "; white-space: pre; overflow-x: auto; max-height: 420px; overflow-y: auto; "
        "margin: 4px 0; padding: 6px; background: #8881; border-radius: 4px")


def _e(s: Any) -> str:
    """Escapes any value's ``str`` for HTML text and attribute values."""
    return html.escape(str(s), quote=True)


def format_bytes(n: int) -> str:
    """``n`` bytes in a readable unit (``1.5 MiB``)."""
    if n < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024.0  # type: ignore[assignment]
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    return f"{n} B"  # pragma: no cover


# ---- facts -------------------------------------------------------------------------------------
def _symbols_of(vars_: Iterable[Any]) -> list:
    """The free symbols of the vars' shapes, in order of first appearance."""
    seen: dict = {}
    for v in vars_:
        if v._kind not in ("tensor", "scalar", "state") or not v._has_rank:
            continue
        for d in v.shape:
            if isinstance(d, int):
                continue
            for s in getattr(d, "free_symbols", ()):
                seen.setdefault(str(s), s)
    return list(seen.values())


def _range_text(sym: Any) -> str:
    lo, hi = sym.range
    return f"[{lo}, {_INF})" if hi is None else f"[{lo}, {hi}]"


class _Stats:
    """One walk over a block's ops (nested blocks included): counts by type and const sizes."""

    def __init__(self, ops: list) -> None:
        self.counts: Counter = Counter()
        self.const_count = 0
        self.const_bytes = 0
        self.by_dtype: dict = {}
        for o in ops:
            t = o.op_type
            self.counts[t] += 1
            if t != "const":
                continue
            self.const_count += 1
            v = o.outputs[0]
            n = _elements(v)
            if n is None:
                continue
            dt = v.dtype
            nbytes = (n * dt.bits + 7) // 8 if dt.bits else 0
            self.const_bytes += nbytes
            cnt, b = self.by_dtype.get(str(dt), (0, 0))
            self.by_dtype[str(dt)] = (cnt + 1, b + nbytes)
        self.op_count = sum(self.counts.values()) - self.const_count


# ---- pieces of markup --------------------------------------------------------------------------
def _table(header: list[str], rows: list[list[str]]) -> str:
    """A table; header and cells are markup (callers escape)."""
    out = [f'<table style="{_TABLE}"><thead><tr>']
    out += [f'<th style="{_TH}">{h}</th>' for h in header]
    out.append("</tr></thead><tbody>")
    for r in rows:
        out.append("<tr>" + "".join(f'<td style="{_TD}">{c}</td>' for c in r) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _mono(s: Any) -> str:
    return f'<span style="{_MONO}">{_e(s)}</span>'


def _muted(s: Any) -> str:
    return f'<span style="{_MUTED}">{_e(s)}</span>'


def _badge(s: Any) -> str:
    return f'<span style="{_BADGE}">{_e(s)}</span>'


def _io_table(fn_inputs: list, outputs: list) -> str:
    rows = []
    for v in fn_inputs:
        kind = "state" if v._kind == "state" else "input"
        rows.append([_e(kind), _mono(v.name), _mono(_type_text(v))])
    for v in outputs:
        rows.append(["output", _mono(v.name), _mono(_type_text(v))])
    if not rows:
        return ""
    return _table(["", "name", "type"], rows)


def _symbols_line(vars_: list) -> str:
    syms = _symbols_of(vars_)
    if not syms:
        return ""
    items = [f"{_mono(s)} {_IN} {_e(_range_text(s))}" for s in syms]
    return f'<div>symbols: {", ".join(items)}</div>'


def _histogram(stats: _Stats) -> str:
    counts = [(t, n) for t, n in stats.counts.most_common() if t != "const"]
    if not counts:
        return f"<div>{_muted('no ops')}</div>"
    top = counts[0][1]
    rows = []
    for t, n in counts[:MAX_HISTOGRAM_ROWS]:
        width = max(1, round(120 * n / top))
        bar = (f'<span style="display: inline-block; height: 9px; width: {width}px; '
               'background: #4a90d9; border-radius: 2px"></span>')
        rows.append([_mono(t), f'<span style="{_MONO}">{n}</span>', bar])
    rest = counts[MAX_HISTOGRAM_ROWS:]
    if rest:
        rows.append([_muted(f"{len(rest)} more types"), _e(sum(n for _, n in rest)), ""])
    return _table(["op type", "count", ""], rows)


def _weights_line(stats: _Stats) -> str:
    if not stats.const_count:
        return f"<div>weights: {_muted('none')}</div>"
    parts = [f"{_e(dt)}: {cnt} ({_e(format_bytes(b))})" for dt, (cnt, b) in sorted(stats.by_dtype.items())]
    detail = f" {_DASH} " + ", ".join(parts) if parts else ""
    return f"<div>weights: {stats.const_count} consts, {_e(format_bytes(stats.const_bytes))}{detail}</div>"


def _text_details(title: str, text: str, open_: bool = False) -> str:
    lines = text.count("\n") + 1
    shown = text
    note = ""
    if len(text) > MAX_TEXT_CHARS:
        cut = text.rfind("\n", 0, MAX_TEXT_CHARS)
        shown = text[: cut if cut > 0 else MAX_TEXT_CHARS]
        rest = lines - (shown.count("\n") + 1)
        msg = (f"{_ELLIPSIS} {rest} more lines not shown ({len(text) - len(shown)} characters); "
               "print() the object for all of it")
        note = f"<div>{_muted(msg)}</div>"
    attr = ' open="open"' if open_ else ""
    return (f'<details{attr}><summary style="cursor: pointer">{_e(title)} '
            f'{_muted(f"({lines} lines)")}</summary><pre style="{_PRE}">{_e(shown)}</pre>{note}</details>')


def _root(inner: str) -> str:
    return f'<div class="milkit-repr" style="{_ROOT}">{inner}</div>'


def _title(kind: str, name: str | None, extra: str = "") -> str:
    nm = f" {_mono(name)}" if name is not None else ""
    return f'<div style="font-weight: 600; margin-bottom: 2px">{_e(kind)}{nm}{extra}</div>'


def _function_section(name: str, fn: Any, default: bool = False) -> str:
    stats = _Stats(fn.find_ops())
    inputs = list(fn.inputs.values())
    outputs = list(fn.outputs)
    extra = _badge(fn.opset_version.name)
    if default:
        extra += _badge("default")
    head = _title("function", name, extra)
    facts = (f"<div>{stats.op_count} ops, {stats.const_count} consts "
             f"({_e(format_bytes(stats.const_bytes))})</div>")
    left = _io_table(inputs, outputs) + _symbols_line(inputs + outputs) + _weights_line(stats)
    return head + facts + _columns(left, _histogram(stats))


def _columns(left: str, right: str) -> str:
    """Two blocks side by side (stacked when the page is narrow)."""
    return ('<div style="display: flex; flex-wrap: wrap; column-gap: 36px; align-items: flex-start">'
            f"<div>{left}</div><div>{right}</div></div>")


def _metadata_table(attrs: dict) -> str:
    if not attrs:
        return ""
    rows = [[_mono(k), _e(v)] for k, v in sorted(attrs.items())]
    return "<div>metadata</div>" + _table(["key", "value"], rows)


# ---- the displays ------------------------------------------------------------------------------
def program_html(prog: Any) -> str:
    """The HTML display of a Program: each function's summary, metadata, the MIL text."""
    funcs = prog.functions
    default = prog.default_function_name
    parts = [_title("Program", None, _badge(f"{len(funcs)} function{'s' if len(funcs) != 1 else ''}"))]
    for name, fn in funcs.items():
        parts.append('<div style="margin: 4px 0 8px 12px">'
                     + _function_section(name, fn, default=(name == default and len(funcs) > 1)) + "</div>")
    parts.append(_metadata_table(dict(prog._attributes())))
    parts.append(_text_details("MIL text", str(prog)))
    return _root("".join(parts))


def function_html(fn: Any, name: str = "function") -> str:
    """The HTML display of a Function."""
    return _root(_function_section(name, fn) + _text_details("MIL text", fn.to_str(name)))


def block_html(block: Any) -> str:
    """The HTML display of a Block (a function's body or a nested block)."""
    stats = _Stats(block.find_ops())
    outer = block.outer_op
    where = f" of {outer.op_type} {outer.name!r}" if outer is not None else ""
    head = _title("Block", None, _muted(where) if where else "")
    rows = [["input", _mono(v.name), _mono(_type_text(v))] for v in block.inputs]
    rows += [["output", _mono(v.name), _mono(_type_text(v))] for v in block.outputs]
    body = (f"<div>{stats.op_count} ops, {stats.const_count} consts "
            f"({_e(format_bytes(stats.const_bytes))})</div>")
    if rows:
        body += _table(["", "name", "type"], rows)
    body = _columns(body + _symbols_line(list(block.inputs) + list(block.outputs)) + _weights_line(stats),
                    _histogram(stats))
    return _root(head + body + _text_details("MIL text", str(block)))


def _small_value(v: Any) -> str:
    n = _elements(v)
    if n is None or n > 16 or v.val is None:
        return ""
    text = str(v.val)
    if len(text) > 120:
        text = text[:117] + "..."
    return text


def operation_html(op: Any) -> str:
    """The HTML display of an Operation: its inputs and outputs with types, nested blocks, the
    location it was built at, and its MIL text."""
    extra = _badge(op.op_type)
    if op.erased:
        extra += _badge("erased")
    head = _title("Operation", op.name, extra)
    rows = []
    for k, val in op.inputs.items():
        vs = val if isinstance(val, tuple) else (val,)
        for i, v in enumerate(vs):
            label = k if len(vs) == 1 else f"{k}[{i}]"
            src = v.op
            const = src is not None and src.op_type == "const"
            note = _small_value(v) if const else ""
            rows.append([_mono(label), _mono(v.name), _mono(_type_text(v)),
                         _muted(("const " + note) if const else "")])
    for i, v in enumerate(op.outputs):
        rows.append([_e(f"output {i}"), _mono(v.name), _mono(_type_text(v)),
                     _muted(f"{len(v.child_ops)} consumers")])
    body = _table(["input", "var", "type", ""], rows) if rows else ""
    if op.blocks:
        body += f"<div>{len(op.blocks)} nested blocks</div>"
    loc = op.location
    if loc is not None:
        body += f"<div>built at {_mono(f'{loc[0]}:{loc[1]}')}</div>"
    return _root(head + body + _text_details("MIL text", str(op).strip("\n"), open_=len(str(op)) < 400))


def var_html(v: Any) -> str:
    """The HTML display of a Var: its type, symbols, producer and consumers."""
    head = _title("Var", v.name, _badge(_type_text(v)))
    rows = []
    src = v.op
    rows.append(["produced by", _mono(f"{src.op_type} {src.name!r}") if src is not None else _e("a function input")])
    users = v.child_ops
    shown = ", ".join(o.name for o in users[:8]) + (f", {_ELLIPSIS} ({len(users)} in all)" if len(users) > 8 else "")
    rows.append(["consumed by", _mono(shown) if users else _muted("nothing")])
    value = _small_value(v) if src is not None and src.op_type == "const" else ""
    if value:
        rows.append(["value", _mono(value)])
    syms = _symbols_of([v])
    if syms:
        rows.append(["symbols", ", ".join(f"{_mono(s)} {_IN} {_e(_range_text(s))}" for s in syms)])
    body = f'<table style="{_TABLE}"><tbody>' + "".join(
        f'<tr><td style="{_TD}; {_MUTED}">{_e(k)}</td><td style="{_TD}">{c}</td></tr>' for k, c in rows
    ) + "</tbody></table>"
    return _root(head + body)


def mlmodel_html(model: Any) -> str:
    """The HTML display of an MLModel: its package and the program it holds."""
    head = _title("MLModel", model.package_path)
    parts = [head]
    if model.skipped_passes:
        parts.append(f"<div>skipped passes: {_mono(', '.join(model.skipped_passes))}</div>")
    prog = model.get_program()
    if prog is None:
        try:
            from .io import load

            prog = load(model.package_path)
        except Exception as ex:  # a broken package still displays, with the reason
            parts.append(f"<div>cannot read the package: {_e(ex)}</div>")
    if prog is not None:
        parts.append(program_html(prog))
    return _root("".join(parts))


def html_page(obj: Any, graph: bool = False, title: str = "milkit") -> str:
    """A standalone HTML document showing ``obj``'s display (what a notebook cell shows), and with
    ``graph=True`` its graph drawn by :func:`milkit.show` (a Program or Function; needs Graphviz).
    Save it to a file to look at a model in a browser."""
    body = obj._repr_html_()
    if graph:
        from .graph import show

        svg = show(obj).data
        svg = svg[svg.index("<svg"):]
        body += f'<div style="margin-top: 12px">{svg}</div>'
    return ('<!DOCTYPE html><html><head><meta charset="utf-8"/>'
            f"<title>{_e(title)}</title></head>"
            f'<body style="margin: 12px; background: white; color: #222">{body}</body></html>')
