"""Generates ``builder.pyi`` (typed signatures of every ``mb.<op>``) from the op registry.

    python -m milkit._stubgen            # rewrites python/milkit/builder.pyi
    python -m milkit._stubgen --check    # exit 1 when the committed stub is stale
"""

from __future__ import annotations

import os
import sys

from . import _core

__all__ = ["generate", "main"]

_HEADER = '''"""Type stubs for milkit.builder, generated from the op registry by milkit._stubgen."""

from typing import Any, Callable, ContextManager, Sequence

from .program import Function, Operation, Program, Var

_Value = Any  # a Var, or a Python / numpy value turned into an implicit const

class Placeholder:
    sym_shape: list
    dtype: Any
    name: str | None
    def __init__(self, sym_shape: Sequence[Any], dtype: Any = ..., name: str | None = ...,
                 allow_rank0_input: bool = ...) -> None: ...

class StateTensorPlaceholder(Placeholder): ...

def TensorSpec(shape: Sequence[Any], dtype: Any = ...) -> Placeholder: ...
def StateTensorSpec(shape: Sequence[Any], dtype: Any = ...) -> StateTensorPlaceholder: ...

class Builder:
    @staticmethod
    def TensorSpec(shape: Sequence[Any], dtype: Any = ...) -> Placeholder: ...
    @staticmethod
    def StateTensorSpec(shape: Sequence[Any], dtype: Any = ...) -> StateTensorPlaceholder: ...
    @staticmethod
    def placeholder(shape: Sequence[Any], dtype: Any = ..., allow_rank0_input: bool = ...,
                    name: str | None = ...) -> Placeholder: ...
    @staticmethod
    def program(input_specs: Sequence[Placeholder] | None = ..., opset_version: Any = ...,
                function_name: str = ...) -> Callable[[Callable[..., Any]], Program]: ...
    @staticmethod
    def function(input_specs: Sequence[Placeholder] | None = ...,
                 opset_version: Any = ...) -> Callable[[Callable[..., Any]], Function]: ...
    @staticmethod
    def set_before_op(before_op: Operation) -> ContextManager[None]: ...
    @staticmethod
    def scope(*scopes: Any) -> ContextManager[None]: ...
    @staticmethod
    def const(val: Any, name: str | None = ..., before_op: Operation | None = ...) -> Var: ...
'''


# the Python functions that build a control-flow op's blocks (coremltools' keyword names)
_BLOCK_FNS = {
    "cond": ["_true_fn: Callable[[], Any]", "_false_fn: Callable[[], Any]"],
    "while_loop": ["_cond: Callable[..., Var]", "_body: Callable[..., Any]"],
}


def _signature(op: str) -> str:
    newest = _core.op_versions(op)[-1]
    inputs = _core.op_inputs(op, newest)
    params = []
    doc = []
    keyword_only = False
    for i in inputs:
        ann = "Sequence[_Value]" if i["kind"] == "tuple" else "_Value"
        if not i["optional"] and any(p.endswith("= ...") for p in params) and not keyword_only:
            # a required input after an optional one: the rest can only be passed by keyword
            params.append("*")
            keyword_only = True
        params.append(f"{i['name']}: {ann}" + (" = ..." if i["optional"] else ""))
        flags = ", ".join(f for f, on in (("const", i["const"]), ("optional", i["optional"])) if on)
        doc.append(f"{i['name']}: {i['kind']} of {{{i['dtypes']}}}" + (f" ({flags})" if flags else ""))
    params += ([] if keyword_only else ["*"]) + _BLOCK_FNS.get(op, []) + [
        "name: str | None = ...", "before_op: Operation | None = ..."]
    # positional use is allowed in input order; keyword use is what coremltools accepts
    sig = f"    @staticmethod\n    def {op}({', '.join(params)}) -> Any:\n"
    sig += '        """' + "; ".join(doc) + '"""\n'
    return sig


def generate() -> str:
    """The stub text for the current registry."""
    ops = sorted(o for o in _core.op_names() + _core.dialect_op_names() if o != "const")
    return _HEADER + "".join(_signature(o) for o in ops)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    path = os.path.join(os.path.dirname(__file__), "builder.pyi")
    text = generate()
    if "--check" in argv:
        with open(path, encoding="utf-8") as f:
            return 0 if f.read() == text else 1
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
