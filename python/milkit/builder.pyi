"""Type stubs for milkit.builder, generated from the op registry by milkit._stubgen."""

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
    @staticmethod
    def add(x: _Value, y: _Value, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def equal(x: _Value, y: _Value, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def floor_div(x: _Value, y: _Value, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def greater(x: _Value, y: _Value, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def greater_equal(x: _Value, y: _Value, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def less(x: _Value, y: _Value, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def less_equal(x: _Value, y: _Value, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def logical_and(x: _Value, y: _Value, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool}; y: tensor of {bool}"""
    @staticmethod
    def logical_or(x: _Value, y: _Value, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool}; y: tensor of {bool}"""
    @staticmethod
    def logical_xor(x: _Value, y: _Value, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {bool}; y: tensor of {bool}"""
    @staticmethod
    def maximum(x: _Value, y: _Value, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def minimum(x: _Value, y: _Value, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def mod(x: _Value, y: _Value, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def mul(x: _Value, y: _Value, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def not_equal(x: _Value, y: _Value, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def pow(x: _Value, y: _Value, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def real_div(x: _Value, y: _Value, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
    @staticmethod
    def select(cond: _Value, a: _Value, b: _Value, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """cond: tensor of {bool, string, fp16, fp32, fp64, bf16, int8, int16, int32, int64, int4, uint8, uint16, uint32, uint64, uint4, uint2, uint1, uint6, uint3, fp8e4m3fn, fp8e5m2}; a: tensor of {bool, string, fp16, fp32, fp64, bf16, int8, int16, int32, int64, int4, uint8, uint16, uint32, uint64, uint4, uint2, uint1, uint6, uint3, fp8e4m3fn, fp8e5m2}; b: tensor of {bool, string, fp16, fp32, fp64, bf16, int8, int16, int32, int64, int4, uint8, uint16, uint32, uint64, uint4, uint2, uint1, uint6, uint3, fp8e4m3fn, fp8e5m2}"""
    @staticmethod
    def sub(x: _Value, y: _Value, name: str | None = ..., before_op: Operation | None = ...) -> Any:
        """x: tensor of {fp16, fp32, int32}; y: tensor of {fp16, fp32, int32}"""
