"""Program, Function, Block, Operation and Var as users see them (coremltools' API names)."""

from __future__ import annotations

from typing import Any

from . import _core, types

__all__ = ["Program", "Function", "Block", "Operation", "Var", "mil_list"]

# The compiled classes, and below every Python-side method milkit adds to them (this module is the
# one place that does; milkit/__init__ imports it before anything is built).
Program = _core.Program
Function = _core.Function
Block = _core.Block
Operation = _core.Operation
Var = _core.Var


# ---- Program -----------------------------------------------------------------------------------
def _prog_find_ops(self: Any, prefix: str | None = None, op_type: str | None = None, exactly_one: bool = False) -> list:
    """Ops of every function whose name starts with ``prefix`` and whose type is ``op_type``
    (None: any); with ``exactly_one``, raises ValueError unless exactly one matches."""
    found = []
    for f in self.functions.values():
        found.extend(f.find_ops(prefix or "", op_type or ""))
    if exactly_one and len(found) != 1:
        raise ValueError(f"Found {len(found)} ops matching prefix={prefix!r}, op_type={op_type!r}; expected one")
    return found


def _prog_validate(self: Any, check_essential_scope: bool = False) -> None:
    """Checks every function (SSA, use lists, types agree with inference); raises
    milkit.VerifyError naming the function and op on the first problem."""
    for name, f in self.functions.items():
        _core.verify_function(f, name)


def _prog_getitem(self: Any, func_name: str) -> Any:
    """``prog["main"]``: the function of that name (coremltools' ``Program.__getitem__``)."""
    functions = self.functions
    if func_name not in functions:
        raise KeyError(f"Function {func_name} not found in among functions {functions.keys()}.")
    return functions[func_name]


def _prog_str(self: Any) -> str:
    return _core.Program.__str__(self)


Program.find_ops = _prog_find_ops
Program.validate = _prog_validate
Program.__repr__ = _prog_str
Program.__getitem__ = _prog_getitem


def _prog_add_function(self: Any, name: str, f: Any) -> None:
    _core.Program.add_function(self, name, f)


# ---- Function ----------------------------------------------------------------------------------
def _fn_inputs(self: Any) -> dict:
    """The inputs, a dict of input name -> Var, in order (states included)."""
    return {v.name: v for v in self._inputs_list}


Function._inputs_list = Function.inputs
Function.inputs = property(_fn_inputs)
Function.opset_version = property(lambda self: _target_of(self.opset),
                                  doc="The opset as a target (``milkit.target.iOS17``...).")
Function.__repr__ = lambda self: self.to_str("function")


def _fn_set_input_types(self: Any, inputs: Any) -> None:
    """coremltools' ``Function.set_input_types``: applies ``TensorType`` s and ``ImageType`` s
    (shapes, symbol ranges, image inputs) to this function's inputs, by name or in order."""
    from ._apply_types import _apply_input_types

    if not isinstance(inputs, (list, tuple)):
        raise ValueError(f"input types should be a list or tuple, got {type(inputs).__name__}")
    enumerated = _apply_input_types(self, list(inputs))
    if enumerated:
        raise ValueError("EnumeratedShapes of tensor inputs are given to milkit.convert, not set on a function")


def _fn_set_output_types(self: Any, outputs: Any) -> None:
    """coremltools' ``Function.set_output_types``: ``ImageType`` s (by position) make outputs
    images; other entries leave their output a tensor."""
    from ._apply_types import _apply_output_types

    if len(outputs) != len(self.outputs):
        raise ValueError(f"{len(outputs)} output types given, the function has {len(self.outputs)} outputs")
    _apply_output_types(self, list(outputs))


def _fn_image_inputs(self: Any) -> dict:
    """The image inputs: input name -> ``ImageType`` (scale 1 and no bias once
    mil_backend::insert_image_preprocessing_ops has put them into the program)."""
    from .image_types import _input_types_of

    return _input_types_of(self)


def _fn_image_outputs(self: Any) -> dict:
    """The image outputs: output name -> ``milkit.colorlayout``."""
    from .image_types import ColorLayout

    outs = self.outputs
    return {outs[i].name: ColorLayout(c) for i, c in sorted(self._image_outputs().items())}


Function.set_input_types = _fn_set_input_types
Function.set_output_types = _fn_set_output_types
Function.image_inputs = property(_fn_image_inputs)
Function.image_outputs = property(_fn_image_outputs)


def _target_of(v: int) -> Any:
    from ._target import AvailableTarget

    return AvailableTarget(v)


# ---- Var ---------------------------------------------------------------------------------------
def _var_dtype(self: Any) -> Any:
    """The element type (``types.fp32``...); a list's element type for lists; the dict type for
    a dict (as coremltools)."""
    if self._kind == "dict":
        return types.type_of(self)
    return types.dtype_from_code(self._dtype_code)


def _var_elem_type(self: Any) -> Any:
    """A list's element type (coremltools' ``ListVar.elem_type``)."""
    if self._kind != "list":
        raise AttributeError(f"'Var' {self.name!r} is not a list and has no elem_type")
    return types.dtype_from_code(self._dtype_code)


class mil_list:  # noqa: N801 - coremltools' name
    """A list value for a const (coremltools' ``mil_list``): ``mb.const(val=mil_list(["cat", "dog"]))``
    makes a ``list[str, 2]`` const, as classify's ``classes`` takes. Elements are str, or ints
    (int64 when the first is an ``np.int64``, else int32, as in coremltools)."""

    def __init__(self, ls: Any = None) -> None:
        self.ls = ls if ls is not None else []
        if not isinstance(self.ls, list):
            raise TypeError("Type of 'ls' must be list in the 'mil_list' class")

    def __repr__(self) -> str:
        return f"mil_list({self.ls!r})"


Var.dtype = property(_var_dtype)
Var.elem_type = property(_var_elem_type)
Var.sym_type = property(types.type_of)
Var.is_descendant_of_const = property(lambda self: self.val is not None,
                                      doc="Whether the value is known at build time.")


def _is_tensor_or_scalar_of(self: Any, dtype: Any) -> bool:
    """Whether the var is a tensor or scalar of ``dtype`` (a DType or its name)."""
    if isinstance(dtype, str):
        dtype = types.string_to_builtin(dtype)
    return self._kind in ("tensor", "scalar") and self.dtype is dtype


Var.is_tensor_or_scalar_of = _is_tensor_or_scalar_of


def _binop(op: str, swap: bool = False) -> Any:
    def f(self: Any, other: Any) -> Any:
        from .builder import Builder

        caller = getattr(Builder, op)
        other = _match_dtype(self, other)
        return caller(x=other, y=self) if swap else caller(x=self, y=other)

    return f


def _match_dtype(var: Any, other: Any) -> Any:
    # Python scalars take the var's dtype, so `x * 2.0` works on fp16 and int32 vars alike.
    import numpy as np

    if isinstance(other, (bool, int, float)) and not isinstance(other, np.generic):
        np_t = types.nptype_from_builtin(var.dtype)
        return np_t(other)
    return other


for _name, _op in [
    ("__add__", "add"),
    ("__sub__", "sub"),
    ("__mul__", "mul"),
    ("__truediv__", "real_div"),
    ("__floordiv__", "floor_div"),
    ("__mod__", "mod"),
    ("__pow__", "pow"),
    ("__lt__", "less"),
    ("__le__", "less_equal"),
    ("__gt__", "greater"),
    ("__ge__", "greater_equal"),
]:
    setattr(Var, _name, _binop(_op))
for _name, _op in [
    ("__radd__", "add"),
    ("__rsub__", "sub"),
    ("__rmul__", "mul"),
    ("__rtruediv__", "real_div"),
    ("__rfloordiv__", "floor_div"),
    ("__rmod__", "mod"),
    ("__rpow__", "pow"),
]:
    setattr(Var, _name, _binop(_op, swap=True))


def _neg(self: Any) -> Any:
    from .builder import Builder

    return Builder.mul(x=self, y=_match_dtype(self, -1))


def _matmul(self: Any, other: Any) -> Any:
    from .builder import Builder

    return Builder.matmul(x=self, y=other)


def _rmatmul(self: Any, other: Any) -> Any:
    from .builder import Builder

    return Builder.matmul(x=other, y=self)


Var.__neg__ = _neg
Var.__matmul__ = _matmul
Var.__rmatmul__ = _rmatmul
Var.__hash__ = object.__hash__


# ---- rich display (Jupyter) and graphs ---------------------------------------------------------
def _display() -> Any:
    from . import display

    return display


def _prog_to_dot(self: Any, function_name: str | None = None, **options: Any) -> str:
    """Graphviz DOT source of the program's graph (every function, or ``function_name``); see
    :func:`milkit.graph.to_dot` for the options."""
    from .graph import to_dot

    return to_dot(self, function_name=function_name, **options)


def _fn_to_dot(self: Any, **options: Any) -> str:
    """Graphviz DOT source of the function's graph; see :func:`milkit.graph.to_dot`."""
    from .graph import to_dot

    return to_dot(self, **options)


Program._repr_html_ = lambda self: _display().program_html(self)
Function._repr_html_ = lambda self: _display().function_html(self)
Block._repr_html_ = lambda self: _display().block_html(self)
Operation._repr_html_ = lambda self: _display().operation_html(self)
Var._repr_html_ = lambda self: _display().var_html(self)
Program.to_dot = _prog_to_dot
Function.to_dot = _fn_to_dot


# ---- SymExpr -----------------------------------------------------------------------------------
def _sym_to_sympy(self: Any) -> Any:
    """The expression as a sympy expression (needs sympy); see :func:`milkit.symbolic.to_sympy`."""
    from .symbolic import to_sympy

    return to_sympy(self)


_core.SymExpr.to_sympy = _sym_to_sympy
