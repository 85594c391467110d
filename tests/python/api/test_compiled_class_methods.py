"""The Python-side methods of the compiled classes (Program, Function, Block, Operation, Var,
SymExpr...) are defined in one visible place, ``milkit/program.py``: no other module of the package
assigns attributes to a class of ``milkit._core``."""

from __future__ import annotations

import ast
import inspect
import os
from typing import Any

import milkit
from milkit import _core

PKG_DIR = os.path.dirname(os.path.abspath(milkit.__file__))
COMPILED = {name for name, obj in vars(_core).items() if inspect.isclass(obj)}


def _python_function(attr: Any) -> Any:
    """The Python function behind a class attribute (function, property getter, static or class
    method), or None for what the extension defines."""
    if isinstance(attr, property):
        attr = attr.fget
    if isinstance(attr, (staticmethod, classmethod)):
        attr = attr.__func__
    return attr if inspect.isfunction(attr) else None


def test_every_python_method_of_a_compiled_class_is_assigned_in_program_py() -> None:
    with open(os.path.join(PKG_DIR, "program.py"), encoding="utf-8") as fh:
        assigned = {h.split(": ", 1)[1] for h in _patched_classes(ast.parse(fh.read()))}
    found = 0
    for name in sorted(COMPILED):
        for attr_name, attr in vars(getattr(_core, name)).items():
            fn = _python_function(attr)
            if fn is None:
                continue
            found += 1
            # defined there (the operators are made in a loop by setattr) or assigned there by name
            assert fn.__module__ == "milkit.program" or f"{name}.{attr_name}" in assigned, (
                f"_core.{name}.{attr_name} comes from {fn.__module__} and is not assigned in milkit/program.py; the "
                f"Python-side methods of the compiled classes belong there")
    assert found >= 20  # Program.find_ops, Function.inputs, Var.dtype, ... are there


def _patched_classes(tree: ast.AST) -> list[str]:
    """`X.attr = ...` / `_core.X.attr = ...` / `setattr(X, ...)` where X names a compiled class."""
    def class_name(node: ast.AST) -> str | None:
        if isinstance(node, ast.Name) and node.id in COMPILED:
            return node.id
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "_core":
            return node.attr
        return None

    hits = []
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for t in targets:
            if isinstance(t, ast.Attribute) and class_name(t.value):
                hits.append(f"line {t.lineno}: {class_name(t.value)}.{t.attr}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
                and node.args and class_name(node.args[0])):
            hits.append(f"line {node.lineno}: setattr({class_name(node.args[0])}, ...)")
    return hits


def test_no_other_module_assigns_to_a_compiled_class() -> None:
    offenders = {}
    seen_program = False
    for dirpath, _dirs, files in os.walk(PKG_DIR):
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(dirpath, f)
            with open(path, encoding="utf-8") as fh:
                hits = _patched_classes(ast.parse(fh.read(), path))
            if os.path.relpath(path, PKG_DIR) == "program.py":
                seen_program = bool(hits)
            elif hits:
                offenders[os.path.relpath(path, PKG_DIR)] = hits
    assert seen_program, "the scan finds no assignment in program.py: it no longer sees what it looks for"
    assert not offenders, f"compiled classes patched outside milkit/program.py: {offenders}"
