"""No import cycle in the milkit package: every ``import`` counts, module-level or inside a
function (a function-local import hides a cycle from Python's import, not from the reader)."""

from __future__ import annotations

import ast
import os

import milkit

PKG_DIR = os.path.dirname(os.path.abspath(milkit.__file__))


def _modules(pkg_dir: str) -> dict[str, str]:
    """Module name -> file, for every .py file of the package (``milkit.frontends.onnx``, ...)."""
    top = os.path.dirname(pkg_dir)
    mods = {}
    for dirpath, _dirs, files in os.walk(pkg_dir):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                name = os.path.relpath(path, top)[:-3].replace(os.sep, ".")
                mods[name[: -len(".__init__")] if name.endswith(".__init__") else name] = path
    return mods


def import_graph(pkg_dir: str) -> dict[str, set[str]]:
    """Module -> the package modules it imports anywhere in its body (a package's own
    ``__init__`` is left out as a target: importing a submodule always runs its parents)."""
    mods = _modules(pkg_dir)
    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        is_pkg = path.endswith("__init__.py")
        base_parts = mod.split(".") if is_pkg else mod.split(".")[:-1]
        deps: set[str] = set()
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = base_parts[: len(base_parts) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in mods else base)
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for t in targets:
                if t in mods and t != mod and not mod.startswith(t + "."):
                    deps.add(t)
        graph[mod] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_check_finds_a_cycle():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(g) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_function_local_imports(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "x.py").write_text("from . import y\n")
    (pkg / "y.py").write_text("def f():\n    from .x import g\n")
    assert cycles(import_graph(str(pkg))) == [["pkg.x", "pkg.y"]]


def test_milkit_has_no_import_cycle():
    graph = import_graph(PKG_DIR)
    assert "milkit.convert" in graph and "milkit.frontends.onnx" in graph
    found = cycles(graph)
    detail = "; ".join(" <-> ".join(c) + " (" + ", ".join(f"{m} imports {sorted(graph[m] & set(c))}" for m in c) + ")"
                       for c in found)
    assert not found, f"import cycles in milkit: {detail}"
