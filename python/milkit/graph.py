"""Drawing a program's graph with Graphviz: ``prog.to_dot()`` and ``milkit.show(prog)``.

    dot_source = prog.to_dot()          # DOT text; needs nothing
    milkit.show(prog)                   # an SVG that Jupyter displays (needs Graphviz)

Ops are boxes (op type, name, first output's type), function inputs and outputs ellipses. Ops
are grouped into clusters by the scope their name carries: the parts before the last ``scope_sep``
(``"/"`` by default, as in ``encoder/layer_0/q_proj``; pass ``"."`` for ``layers.0.attn.q``).
Control-flow ops draw their nested blocks as clusters.

Consts are folded into their consumer's label by default (``consts="fold"``: ``weight (64, 64)
fp32``, small values shown), or left out (``"hide"``) or drawn as nodes (``"show"``).

A graph with more than ``max_nodes`` ops is folded so that it stays readable and fast to lay out:
each scope at the deepest level that fits becomes one summary node (its op count and most common
op types); when even the top-level scopes are too many, consecutive ops and scopes are folded into
runs of about equal size. The number of nodes is therefore about ``max_nodes`` whatever the size of
the program; a 10,000-op program renders in about a second.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Iterator

from ._facts import _elements, _type_text

__all__ = ["DEFAULT_MAX_NODES", "SVG", "show", "to_dot"]

#: Ops drawn one by one below this count; bigger graphs are folded.
DEFAULT_MAX_NODES = 200

_NAME_CHARS = 48  # a name longer than this is shortened in labels


def _q(s: str) -> str:
    """A DOT double-quoted string holding ``s`` literally (newlines become line breaks)."""
    s = s.replace("\\", "\\\\").replace('"', '\\"')
    s = s.replace("\r", "").replace("\n", "\\n")
    return f'"{s}"'


def _short(name: str) -> str:
    name = name.replace("\n", " ")
    return name if len(name) <= _NAME_CHARS else name[: _NAME_CHARS - 1] + "\u2026"


def _const_note(name: str, v: Any) -> str:
    n = _elements(v)
    if n is not None and n <= 4 and v.val is not None:
        val = str(v.val).replace("\n", " ")
        if len(val) <= 24:
            return f"{name}={val}"
    return f"{name}: {_type_text(v)}"


class _Fn:
    """The nodes, clusters and edges of one function's drawing."""

    def __init__(self, prefix: str, fn: Any, consts: str, max_nodes: int, scope_sep: str) -> None:
        self.prefix = prefix
        self.fn = fn
        self.consts = consts
        self.sep = scope_sep
        self.nodes: dict = {}  # id -> (label, attrs, cluster path)
        self.edges: set = set()
        self.edge_list: list = []
        self.unit_of: dict = {}  # op key -> node id
        self.var_node: dict = {}  # var key -> node id (inputs)
        self.counter = 0
        self.folded = False
        body = list(fn.operations)
        visible = self.visible = self._count_visible(body)
        if visible > max_nodes:
            self.folded = True
            self._fold(body, max_nodes)
        else:
            self._full(body, ())
        self._io()

    # ---- helpers ----
    def _new_id(self) -> str:
        self.counter += 1
        return f"{self.prefix}n{self.counter}"

    def _scope(self, name: str) -> tuple:
        if not self.sep:
            return ()
        parts = name.split(self.sep)[:-1]
        return tuple(p for p in parts if p)

    def _is_visible(self, op: Any) -> bool:
        return op.op_type != "const" or self.consts == "show"

    def _count_visible(self, ops: list) -> int:
        n = 0
        for op in ops:
            if self._is_visible(op):
                n += 1
            for b in op.blocks:
                n += self._count_visible(b.operations)
        return n

    @staticmethod
    def _key(x: Any) -> tuple:
        # handles are fresh objects; (kind, name) identifies an op or var within a function
        return (x.name,)

    def _edge(self, a: str, b: str) -> None:
        if a != b and (a, b) not in self.edges:
            self.edges.add((a, b))
            self.edge_list.append((a, b))

    # ---- full drawing ----
    def _leaf(self, name: str) -> str:
        """The name without its scope (which the enclosing clusters show)."""
        if self.sep and self._scope(name):
            return name.rsplit(self.sep, 1)[-1] or name
        return name

    def _op_label(self, op: Any) -> str:
        lines = [op.op_type, _short(self._leaf(op.name))]
        if op.outputs:
            lines.append(_type_text(op.outputs[0]) + (f" (+{len(op.outputs) - 1})" if len(op.outputs) > 1 else ""))
        if self.consts == "fold":
            notes = []
            for k, val in op.inputs.items():
                vs = val if isinstance(val, tuple) else (val,)
                for v in vs:
                    src = v.op
                    if src is not None and src.op_type == "const":
                        notes.append(_const_note(k, v))
            if len(notes) > 4:
                notes = notes[:3] + [f"+{len(notes) - 3} consts"]
            lines += notes
        return "\n".join(lines)

    def _full(self, ops: list, cluster: tuple) -> None:
        for op in ops:
            if not self._is_visible(op):
                continue
            nid = self._new_id()
            path = cluster + self._scope(op.name)
            if op.op_type == "const":
                self.nodes[nid] = (f"const\n{_short(self._leaf(op.name))}\n{_type_text(op.outputs[0])}",
                                   'shape=note, fillcolor="#f2f2f2", fontsize=8', path)
            else:
                self.nodes[nid] = (self._op_label(op), "", path)
            self.unit_of[self._key(op)] = nid
            for bi, b in enumerate(op.blocks):
                self._full(b.operations, path + (f"\x00{op.name} block {bi}",))
        for op in ops:
            if self._is_visible(op):
                self._op_edges(op)
            for b in op.blocks:
                for v in b.outputs:
                    src = self._source(v)
                    if src is not None:
                        self._edge(src, self.unit_of[self._key(op)])

    def _source(self, v: Any) -> str | None:
        """The node a var comes from: its producer's unit, an input node, or None (a hidden
        const)."""
        src = v.op
        if src is None:
            return self.var_node.get(self._key(v)) or self._input_node(v)
        if src.op_type == "const" and self.consts != "show":
            return None
        return self.unit_of.get(self._key(src))

    def _input_node(self, v: Any) -> str:
        nid = self._new_id()
        self.nodes[nid] = (f"{_short(v.name)}\n{_type_text(v)}", 'shape=ellipse, fillcolor="#e3f4e1"', ())
        self.var_node[self._key(v)] = nid
        return nid

    def _op_edges(self, op: Any) -> None:
        dst = self.unit_of[self._key(op)]
        for val in op.inputs.values():
            for v in val if isinstance(val, tuple) else (val,):
                src = self._source(v)
                if src is not None:
                    self._edge(src, dst)

    # ---- folded drawing ----
    def _fold(self, body: list, max_nodes: int) -> None:
        """Units: top-level ops (their nested blocks inside), grouped by scope at the deepest level
        that gives at most ``max_nodes`` units, else runs of consecutive units."""
        ops = [op for op in body if self._is_visible(op) or op.blocks]
        paths = [self._scope(op.name) for op in ops]
        depth = max((len(p) for p in paths), default=0)
        keys: list | None = None
        for d in range(depth, 0, -1):
            cand = [p[:d] if p else ("\x00op", i) for i, p in enumerate(paths)]
            if len(set(cand)) <= max_nodes:
                keys = cand
                break
        if keys is None:
            # runs: consecutive ops (grouped by top-level scope first) of about equal op count
            top = [p[:1] if p else ("\x00op", i) for i, p in enumerate(paths)]
            target = max(1, math.ceil(len(ops) / max_nodes))
            keys, run, in_run, prev = [], 0, 0, None
            for k in top:
                if k != prev and in_run >= target:
                    run, in_run = run + 1, 0
                keys.append(("\x00run", run))
                in_run += 1
                prev = k
        groups: dict = {}
        for op, k in zip(ops, keys):
            groups.setdefault(k, []).append(op)
        for k, members in groups.items():
            nid = self._new_id()
            for op in members:
                self._map_nested(op, nid)
            if len(members) == 1 and not members[0].blocks:
                op = members[0]
                self.nodes[nid] = (self._op_label(op), "", self._scope(op.name))
                continue
            counts: Counter = Counter()
            for op in members:
                self._count_types(op, counts)
            total = sum(counts.values())
            common = ", ".join(f"{t} {n}" for t, n in counts.most_common(3))
            if k and k[0] == "\x00run":
                first, last = self._run_end(members[0]), self._run_end(members[-1])
                title = first if first == last else f"{_short(first)} \u2026 {_short(last)}"
                cluster: tuple = ()
            elif k and k[0] == "\x00op":
                title = f"{members[0].op_type} {_short(members[0].name)}"
                cluster = ()
            else:
                title = self.sep.join(k)
                cluster = tuple(k[:-1])
            self.nodes[nid] = (f"{_short(title)}\n{total} ops\n{common}",
                               'shape=box3d, fillcolor="#fdf1dc"', cluster)
        for op in ops:
            self._fold_edges(op, self.unit_of[self._key(op)])

    def _run_end(self, op: Any) -> str:
        """How a run names its first or last op: its top-level scope, else its name."""
        path = self._scope(op.name)
        return path[0] if path else op.name

    def _map_nested(self, op: Any, nid: str) -> None:
        self.unit_of[self._key(op)] = nid
        for b in op.blocks:
            for inner in b.operations:
                self._map_nested(inner, nid)

    def _count_types(self, op: Any, counts: Counter) -> None:
        if self._is_visible(op):
            counts[op.op_type] += 1
        for b in op.blocks:
            for inner in b.operations:
                self._count_types(inner, counts)

    def _fold_edges(self, op: Any, dst: str) -> None:
        for val in op.inputs.values():
            for v in val if isinstance(val, tuple) else (val,):
                src = v.op
                if src is None and self._key(v) not in self.var_node and not self._is_fn_input(v):
                    continue  # a nested block's own input
                s = self._source(v)
                if s is not None:
                    self._edge(s, dst)
        for b in op.blocks:
            for inner in b.operations:
                self._fold_edges(inner, dst)

    def _is_fn_input(self, v: Any) -> bool:
        return v.name in self._fn_inputs

    @property
    def _fn_inputs(self) -> dict:
        if not hasattr(self, "_fn_inputs_cache"):
            self._fn_inputs_cache = self.fn.inputs
        return self._fn_inputs_cache

    # ---- inputs and outputs ----
    def _io(self) -> None:
        for v in self._fn_inputs.values():
            if self._key(v) not in self.var_node:
                self._input_node(v)
        for v in self.fn.outputs:
            nid = self._new_id()
            self.nodes[nid] = (f"{_short(v.name)}\n{_type_text(v)}", 'shape=ellipse, fillcolor="#fbe3e3"', ())
            src = self._source(v)
            if src is not None:
                self._edge(src, nid)

    # ---- output ----
    def lines(self, indent: str) -> Iterator[str]:
        tree: dict = {}
        for nid, (_, _, path) in self.nodes.items():
            node = tree
            for p in path:
                node = node.setdefault(p, {})
            node.setdefault("\x01nodes", []).append(nid)
        yield from self._emit(tree, indent, ())
        for a, b in self.edge_list:
            yield f"{indent}{a} -> {b};"

    def _emit(self, tree: dict, indent: str, path: tuple) -> Iterator[str]:
        for nid in tree.get("\x01nodes", []):
            label, attrs, _ = self.nodes[nid]
            extra = f", {attrs}" if attrs else ""
            yield f"{indent}{nid} [label={_q(label)}{extra}];"
        for name, sub in tree.items():
            if name == "\x01nodes":
                continue
            self.counter += 1
            cid = f"cluster_{self.prefix}c{self.counter}"
            title = name[1:] if name.startswith("\x00") else name
            yield f"{indent}subgraph {cid} {{"
            yield f'{indent}  label={_q(_short(title))}; style="rounded,dashed"; color="#8a8a8a";'
            yield from self._emit(sub, indent + "  ", path + (name,))
            yield f"{indent}}}"


def _functions(obj: Any, function_name: str | None) -> list:
    from . import _core

    if isinstance(obj, _core.Function):
        return [("function", obj)]
    if isinstance(obj, _core.Program):
        funcs = obj.functions
        if function_name is not None:
            if function_name not in funcs:
                raise ValueError(f"the program has no function named {function_name!r}; "
                                 f"its functions are {sorted(funcs)}")
            return [(function_name, funcs[function_name])]
        return list(funcs.items())
    raise TypeError(f"to_dot expects a milkit Program or Function, got {type(obj).__name__}")


def to_dot(obj: Any, function_name: str | None = None, consts: str = "fold", max_nodes: int = DEFAULT_MAX_NODES,
           scope_sep: str = "/", rankdir: str = "TB") -> str:
    """Graphviz DOT source drawing a Program (each function; one with ``function_name``) or a
    Function.

    Args:
        obj: a milkit Program or Function.
        function_name: draw only this function of a Program.
        consts: ``"fold"`` (listed in their consumer's label), ``"hide"`` or ``"show"`` (nodes).
        max_nodes: graphs with more ops than this are folded into summary nodes (per function,
            shared among the functions of a Program).
        scope_sep: the separator of scopes in op names (``""``: no scope clusters).
        rankdir: Graphviz's layout direction (``"TB"`` top to bottom, ``"LR"`` left to right).

    Returns:
        The DOT text, to render with Graphviz (``dot -Tsvg``) or :func:`show`.
    """
    if consts not in ("fold", "hide", "show"):
        raise ValueError(f"consts must be 'fold', 'hide' or 'show', got {consts!r}")
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, int) or max_nodes < 1:
        raise ValueError(f"max_nodes must be a positive int, got {max_nodes!r}")
    if rankdir not in ("TB", "LR", "BT", "RL"):
        raise ValueError(f"rankdir must be TB, LR, BT or RL, got {rankdir!r}")
    funcs = _functions(obj, function_name)
    per_fn = max(10, max_nodes // max(1, len(funcs)))
    out = [
        "digraph milkit {",
        f'  rankdir={rankdir}; newrank=true; compound=true; fontname="Helvetica"; fontsize=11;',
        '  node [shape=box, style="rounded,filled", fillcolor="#eaf1fb", color="#5b7fb5", '
        'fontname="Helvetica", fontsize=10];',
        '  edge [color="#666666", arrowsize=0.6];',
    ]
    several = len(funcs) > 1
    for fi, (name, fn) in enumerate(funcs):
        g = _Fn(f"f{fi}", fn, consts, per_fn, scope_sep)
        if several:
            out.append(f"  subgraph cluster_fn{fi} {{")
            title = f"function {name}" + (" (folded)" if g.folded else "")
            out.append(f'    label={_q(title)}; style="rounded"; color="#333333";')
            out.extend(g.lines("    "))
            out.append("  }")
        else:
            if g.folded:
                out.append(f"  label={_q(f'{name}: {g.visible} ops, folded')}; labelloc=t;")
            out.extend(g.lines("  "))
    out.append("}")
    return "\n".join(out) + "\n"


class SVG:
    """A rendered graph: ``data`` holds the SVG text; Jupyter displays it."""

    def __init__(self, data: str) -> None:
        self.data = data

    def _repr_svg_(self) -> str:
        return self.data

    def __str__(self) -> str:
        return self.data

    def __repr__(self) -> str:
        return f"<milkit.graph.SVG, {len(self.data)} characters>"

    def save(self, path: str) -> None:
        """Writes the SVG to ``path``."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.data)


def show(obj: Any, function_name: str | None = None, **options: Any) -> SVG:
    """Draws a Program or Function as SVG with Graphviz (the ``graphviz`` Python package and
    Graphviz's ``dot`` program); in Jupyter the result displays as the picture.

    Takes :func:`to_dot`'s options. Big programs are folded (``max_nodes``), so a 10,000-op
    program renders in about a second.
    """
    source = to_dot(obj, function_name=function_name, **options)
    try:
        import graphviz
    except ImportError:
        raise ImportError("milkit.show needs the graphviz Python package (pip install graphviz) and "
                          "Graphviz's dot program (apt-get install graphviz); prog.to_dot() gives the "
                          "DOT text without them") from None
    try:
        data = graphviz.Source(source).pipe(format="svg", encoding="utf-8")
    except graphviz.ExecutableNotFound:
        raise RuntimeError("milkit.show needs Graphviz's dot program on the PATH (apt-get install "
                           "graphviz)") from None
    return SVG(data)
