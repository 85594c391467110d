"""The coremltools-compatible ``Builder`` (``mb``): ``mb.program``, ``mb.<op>(...)``, specs."""

from __future__ import annotations

import contextlib
import inspect
from typing import Any, Callable, Iterator, Sequence

from . import _core, types
from ._target import AvailableTarget

__all__ = ["Builder", "Placeholder", "TensorSpec", "StateTensorSpec"]


class Placeholder:
    """A function input declaration (``mb.TensorSpec``): shape (ints, symbols, -1/None for a
    fresh symbol) and dtype (default fp32)."""

    is_state = False

    def __init__(
        self,
        sym_shape: Sequence[Any],
        dtype: Any = None,
        name: str | None = None,
        allow_rank0_input: bool = False,
    ) -> None:
        if not isinstance(sym_shape, (list, tuple)) and not hasattr(sym_shape, "tolist"):
            raise ValueError(f"Illegal shape for Placeholder: {sym_shape!r}")
        shape = list(sym_shape.tolist() if hasattr(sym_shape, "tolist") else sym_shape)
        if len(shape) == 0 and not allow_rank0_input:
            raise ValueError("Rank-0 (input None) is not supported; pass allow_rank0_input=True")
        self.sym_shape = shape
        self.dtype = types.fp32 if dtype is None else _as_dtype(dtype)
        self.name = name

    @property
    def shape(self) -> list:
        return self.sym_shape

    def type_inference(self) -> Any:
        return types.tensor(self.dtype, self.sym_shape)

    def __repr__(self) -> str:
        return f"TensorSpec(shape={tuple(self.sym_shape)}, dtype={self.dtype})"


class StateTensorPlaceholder(Placeholder):
    """An iOS18 state input (``mb.StateTensorSpec``)."""

    is_state = True

    def __init__(self, sym_shape: Sequence[Any], dtype: Any = None, name: str | None = None) -> None:
        super().__init__(sym_shape, dtype, name, allow_rank0_input=True)

    def type_inference(self) -> Any:
        return types.state(types.tensor(self.dtype, self.sym_shape))

    def __repr__(self) -> str:
        return f"StateTensorSpec(shape={tuple(self.sym_shape)}, dtype={self.dtype})"


def TensorSpec(shape: Sequence[Any], dtype: Any = None) -> Placeholder:  # noqa: N802
    """An input of the given shape and dtype (default fp32)."""
    return Placeholder(shape, dtype)


def StateTensorSpec(shape: Sequence[Any], dtype: Any = None) -> StateTensorPlaceholder:  # noqa: N802
    """An iOS18 state input wrapping a tensor of the given shape and dtype."""
    return StateTensorPlaceholder(shape, dtype)


def _as_dtype(d: Any) -> types.DType:
    if isinstance(d, types.DType):
        return d
    if isinstance(d, str):
        t = types.string_to_builtin(d)
        if t is None:
            raise TypeError(f"unknown dtype {d!r}")
        return t
    name = getattr(d, "__name__", None)  # a coremltools builtin class
    if isinstance(name, str) and types.string_to_builtin(name) is not None:
        return types.string_to_builtin(name)  # type: ignore[return-value]
    return types.numpy_type_to_builtin_type(d)


def _opset_value(opset_version: Any) -> int | None:
    if opset_version is None:
        return None
    return int(opset_version)


def _build_function(
    func: Callable[..., Any],
    input_specs: Sequence[Placeholder] | None,
    opset_version: Any,
) -> Any:
    specs = list(input_specs or [])
    params = list(inspect.signature(func).parameters.values())
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(names) != len(specs):
        raise ValueError(
            f"{func.__name__} takes {len(names)} inputs ({', '.join(names)}) but "
            f"{len(specs)} input_specs were given"
        )
    opset = _opset_value(opset_version)
    fn = _core.Function(opset if opset is not None else int(AvailableTarget.iOS13))
    fn.opset_auto = opset is None
    in_vars = []
    for name, spec in zip(names, specs):
        if not isinstance(spec, Placeholder):
            raise TypeError(f"input_specs must be mb.TensorSpec / mb.StateTensorSpec, got {spec!r}")
        in_vars.append(fn.add_input(spec.name or name, spec.dtype.code, spec.sym_shape, spec.is_state))
    _core._push_scope(fn)
    try:
        outs = func(*in_vars)
    finally:
        _core._pop_scope()
    if outs is None:
        outs = []
    if isinstance(outs, _core.Var):
        outs = [outs]
    outs = list(outs)
    for o in outs:
        if not isinstance(o, _core.Var):
            raise TypeError(f"{func.__name__} must return Vars, got {type(o).__name__}")
    fn.set_outputs(outs)
    return fn


class _BuilderMeta(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            caller = _core.op_caller(name)
        except TypeError:
            raise AttributeError(f"Builder has no op '{name}'") from None
        setattr(cls, name, caller)
        return caller


class Builder(metaclass=_BuilderMeta):
    """coremltools' ``Builder``: every registered op is ``Builder.<op_type>(**inputs)``."""

    TensorSpec = staticmethod(TensorSpec)
    StateTensorSpec = staticmethod(StateTensorSpec)

    @staticmethod
    def placeholder(
        shape: Sequence[Any], dtype: Any = None, allow_rank0_input: bool = False, name: str | None = None
    ) -> Placeholder:
        """An input declaration, like ``TensorSpec`` (coremltools' ``mb.placeholder``)."""
        return Placeholder(shape, dtype, name=name, allow_rank0_input=allow_rank0_input)

    @staticmethod
    def program(
        input_specs: Sequence[Placeholder] | None = None,
        opset_version: Any = None,
        function_name: str = "main",
    ) -> Callable[[Callable[..., Any]], Any]:
        """Decorator: traces the function once and returns a Program with it as ``function_name``."""

        def wrapper(func: Callable[..., Any]) -> Any:
            prog = _core.Program()  # milkit.program adds the Python-side methods to the class
            prog.add_function(function_name, _build_function(func, input_specs, opset_version))
            return prog

        return wrapper

    @staticmethod
    def function(
        input_specs: Sequence[Placeholder] | None = None, opset_version: Any = None
    ) -> Callable[[Callable[..., Any]], Any]:
        """Decorator: traces the function and returns a Function (for multifunction programs)."""

        def wrapper(func: Callable[..., Any]) -> Any:
            return _build_function(func, input_specs, opset_version)

        return wrapper

    @staticmethod
    @contextlib.contextmanager
    def set_before_op(before_op: Any) -> Iterator[None]:
        """Ops created inside the block are inserted before ``before_op`` (in its function)."""
        fn = before_op.enclosing_block
        if fn is None:
            raise ValueError(f"op '{before_op.name}' is not in a block")
        _core._push_scope(_function_of(before_op), None, before_op)
        try:
            yield
        finally:
            _core._pop_scope()

    @staticmethod
    @contextlib.contextmanager
    def scope(*scopes: Any) -> Iterator[None]:
        """Debug scopes (accepted for compatibility; like coremltools, not serialized)."""
        yield

    @staticmethod
    def const(val: Any, name: str | None = None, before_op: Any = None) -> Any:
        """A const op holding ``val`` (coremltools' typing rules)."""
        if before_op is not None:
            with Builder.set_before_op(before_op):
                return _core._add_const(val, name or "")
        return _core._add_const(val, name or "")


def _function_of(op: Any) -> Any:
    return op._function


for _op in _core.op_names() + _core.dialect_op_names():
    if _op != "const":
        setattr(Builder, _op, _core.op_caller(_op))
