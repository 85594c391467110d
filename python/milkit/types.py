"""MIL types, mirroring ``coremltools.converters.mil.mil.types``.

Element types are singletons (``types.fp32``); composite types (``types.tensor(types.fp32,
(2, 3))``) are cached, so equal types are the same object.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Sequence

from . import _core

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "DType",
    "TensorType",
    "ListType",
    "TupleType",
    "DictType",
    "StateType",
    "fp16",
    "fp32",
    "fp64",
    "bf16",
    "fp8e4m3fn",
    "fp8e5m2",
    "complex64",
    "int4",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint1",
    "uint2",
    "uint3",
    "uint4",
    "uint6",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
    "str",
    "string",
    "float",
    "double",
    "tensor",
    "list",
    "tuple",
    "dict",
    "state",
    "is_tensor",
    "is_scalar",
    "is_list",
    "is_tuple",
    "is_dict",
    "is_state",
    "is_float",
    "is_int",
    "is_signed_int",
    "is_unsigned_int",
    "is_sub_byte",
    "is_bool",
    "is_str",
    "is_complex",
    "builtin_to_string",
    "string_to_builtin",
    "numpy_type_to_builtin_type",
    "nptype_from_builtin",
    "dtype_from_code",
    "np_dtype_for",
    "np_int4_dtype",
    "np_uint1_dtype",
    "np_uint2_dtype",
    "np_uint3_dtype",
    "np_uint4_dtype",
    "np_uint6_dtype",
    "promote_types",
    "type_of",
]

_builtin_bool = bool
_builtin_str = str
_builtin_list = list
_builtin_tuple = tuple
_builtin_dict = dict


class DType:
    """A MIL element type (``types.fp32``). Compares by identity; ``__name__`` is its short name."""

    __slots__ = ("__name__", "code", "bits")

    def __init__(self, name: _builtin_str, code: int) -> None:
        self.__name__ = name
        self.code = code
        self.bits = {"bool": 8, "string": 0}.get(name) or _bits(name)

    def __repr__(self) -> _builtin_str:
        return self.__name__

    __str__ = __repr__

    def __reduce__(self) -> Any:
        return (dtype_from_code, (self.code,))

    def get_primitive(self) -> "DType":
        return self


def _bits(name: _builtin_str) -> int:
    digits = "".join(c for c in name if c.isdigit())
    if name.startswith("fp8"):
        return 8
    return int(digits) if digits else 0


_BY_CODE: _builtin_dict[int, DType] = {}
_BY_NAME: _builtin_dict[_builtin_str, DType] = {}
for _name, _code in _core.DTYPES:
    _d = DType(_name, _code)
    _BY_CODE[_code] = _d
    _BY_NAME[_name] = _d

fp16 = _BY_NAME["fp16"]
fp32 = _BY_NAME["fp32"]
fp64 = _BY_NAME["fp64"]
bf16 = _BY_NAME["bf16"]
fp8e4m3fn = _BY_NAME["fp8e4m3fn"]
fp8e5m2 = _BY_NAME["fp8e5m2"]
complex64 = _BY_NAME["complex64"]  # the complex dialect's type (not a MIL.proto type)
int4 = _BY_NAME["int4"]
int8 = _BY_NAME["int8"]
int16 = _BY_NAME["int16"]
int32 = _BY_NAME["int32"]
int64 = _BY_NAME["int64"]
uint1 = _BY_NAME["uint1"]
uint2 = _BY_NAME["uint2"]
uint3 = _BY_NAME["uint3"]
uint4 = _BY_NAME["uint4"]
uint6 = _BY_NAME["uint6"]
uint8 = _BY_NAME["uint8"]
uint16 = _BY_NAME["uint16"]
uint32 = _BY_NAME["uint32"]
uint64 = _BY_NAME["uint64"]
bool = _BY_NAME["bool"]  # noqa: A001 - mirrors coremltools' types.bool
string = _BY_NAME["string"]
str = string  # noqa: A001 - mirrors coremltools' types.str
float = fp32  # noqa: A001
double = fp64

_ALIASES = {"str": string, "float": fp32, "double": fp64, "int": int32}


def dtype_from_code(code: int) -> DType:
    """The DType with a MIL.proto DataType code."""
    return _BY_CODE[code]


class _Composite:
    __slots__ = ()

    def __repr__(self) -> _builtin_str:
        return self.__str__()


class TensorType(_Composite):
    """``types.tensor(dtype, shape)``; a rank-0 tensor stands for a scalar."""

    __slots__ = ("_dtype", "_shape")

    def __init__(self, dtype: DType, shape: Sequence[Any]) -> None:
        self._dtype = dtype
        self._shape = _builtin_tuple(shape)

    def get_primitive(self) -> DType:
        return self._dtype

    def get_shape(self) -> _builtin_tuple:
        return self._shape

    def __str__(self) -> _builtin_str:
        return "tensor[" + ",".join(_builtin_str(d) for d in self._shape) + "," + self._dtype.__name__ + "]"

    def __eq__(self, other: object) -> _builtin_bool:
        return isinstance(other, TensorType) and other._dtype is self._dtype and other._shape == self._shape

    def __hash__(self) -> int:
        return hash((self._dtype.code, self._shape))


class ListType(_Composite):
    """``types.list(elem_type, init_length, dynamic_length)``."""

    __slots__ = ("T", "init_length", "dynamic_length")

    def __init__(self, elem: Any, init_length: Any = None, dynamic_length: _builtin_bool = True) -> None:
        self.T = (elem,)
        self.init_length = init_length
        self.dynamic_length = dynamic_length

    def elem_type(self) -> Any:
        return self.T[0]

    def __str__(self) -> _builtin_str:
        return f"list[{self.T[0]},{self.init_length}]"

    def __eq__(self, other: object) -> _builtin_bool:
        return isinstance(other, ListType) and other.T == self.T and other.init_length == self.init_length

    def __hash__(self) -> int:
        return hash((self.T, self.init_length))


class TupleType(_Composite):
    """``types.tuple(types)``."""

    __slots__ = ("T",)

    def __init__(self, members: Sequence[Any]) -> None:
        self.T = _builtin_tuple(members)

    def __str__(self) -> _builtin_str:
        return "tuple(" + ",".join(_builtin_str(t) for t in self.T) + ")"

    def __eq__(self, other: object) -> _builtin_bool:
        return isinstance(other, TupleType) and other.T == self.T

    def __hash__(self) -> int:
        return hash(self.T)


class DictType(_Composite):
    """``types.dict(key, value)``."""

    __slots__ = ("T",)

    def __init__(self, key: Any, value: Any) -> None:
        self.T = (key, value)

    def __str__(self) -> _builtin_str:
        return f"dict[{self.T[0]},{self.T[1]}]"

    def __eq__(self, other: object) -> _builtin_bool:
        return isinstance(other, DictType) and other.T == self.T

    def __hash__(self) -> int:
        return hash(self.T)


class StateType(_Composite):
    """``types.state(tensor_type)`` (iOS18 states)."""

    __slots__ = ("T",)

    def __init__(self, wrapped: TensorType) -> None:
        self.T = (wrapped,)

    def wrapped_type(self) -> TensorType:
        return self.T[0]

    def __str__(self) -> _builtin_str:
        return f"state[{self.T[0]}]"

    def __eq__(self, other: object) -> _builtin_bool:
        return isinstance(other, StateType) and other.T == self.T

    def __hash__(self) -> int:
        return hash(self.T)


@functools.lru_cache(maxsize=4096)
def _tensor(dtype: DType, shape: _builtin_tuple) -> TensorType:
    return TensorType(dtype, shape)


def tensor(dtype: DType, shape: Sequence[Any]) -> TensorType:
    """A tensor type (cached: equal arguments give the same object)."""
    shape_t = _builtin_tuple(shape)
    try:
        return _tensor(dtype, shape_t)
    except TypeError:  # unhashable dims
        return TensorType(dtype, shape_t)


def list(elem_type: Any, init_length: Any = None, dynamic_length: _builtin_bool = True) -> ListType:  # noqa: A001
    """A list type."""
    return ListType(elem_type, init_length, dynamic_length)


def tuple(members: Sequence[Any]) -> TupleType:  # noqa: A001
    """A tuple type."""
    return TupleType(members)


def dict(key: Any, value: Any) -> DictType:  # noqa: A001
    """A dictionary type."""
    return DictType(key, value)


def state(wrapped: TensorType) -> StateType:
    """A state type wrapping a tensor type."""
    if not isinstance(wrapped, TensorType):
        raise TypeError(f"a state wraps a tensor type, got {wrapped}")
    return StateType(wrapped)


def is_tensor(t: Any) -> _builtin_bool:
    return isinstance(t, TensorType)


def is_scalar(t: Any) -> _builtin_bool:
    return isinstance(t, DType)


def is_list(t: Any) -> _builtin_bool:
    return isinstance(t, ListType)


def is_tuple(t: Any) -> _builtin_bool:
    return isinstance(t, TupleType)


def is_dict(t: Any) -> _builtin_bool:
    return isinstance(t, DictType)


def is_state(t: Any) -> _builtin_bool:
    return isinstance(t, StateType)


def _prim(t: Any) -> Any:
    return t.get_primitive() if isinstance(t, TensorType) else t


def is_float(t: Any) -> _builtin_bool:
    p = _prim(t)
    return p in (fp16, fp32, fp64, bf16, fp8e4m3fn, fp8e5m2)


def is_signed_int(t: Any) -> _builtin_bool:
    return _prim(t) in (int4, int8, int16, int32, int64)


def is_unsigned_int(t: Any) -> _builtin_bool:
    return _prim(t) in (uint1, uint2, uint3, uint4, uint6, uint8, uint16, uint32, uint64)


def is_int(t: Any) -> _builtin_bool:
    return is_signed_int(t) or is_unsigned_int(t)


def is_sub_byte(t: Any) -> _builtin_bool:
    return _prim(t) in (int4, uint1, uint2, uint3, uint4, uint6)


def is_bool(t: Any) -> _builtin_bool:
    return _prim(t) is bool


def is_str(t: Any) -> _builtin_bool:
    return _prim(t) is string


def is_complex(t: Any) -> _builtin_bool:
    """complex64: the type of complex dialect ops' data (coremltools' ``types.is_complex``)."""
    return _prim(t) is complex64


def builtin_to_string(t: Any) -> _builtin_str | None:
    """``types.fp32`` -> ``"fp32"``; None for non-element types."""
    if isinstance(t, DType):
        return t.__name__
    return None


def string_to_builtin(s: _builtin_str) -> DType | None:
    """``"fp32"`` -> ``types.fp32``; None when unknown."""
    if s in _ALIASES:
        return _ALIASES[s]
    return _BY_NAME.get(s)


_SUB_BYTE_NAMES = ("int4", "uint1", "uint2", "uint3", "uint4", "uint6")


@functools.cache
def _sub_byte_dtype(name: _builtin_str) -> "np.dtype":
    import numpy as np

    base = np.int8 if name == "int4" else np.uint8
    return np.dtype(base, metadata={"true_dtype": _BY_NAME[name]})


def np_dtype_for(name: _builtin_str) -> "np.dtype":
    """The numpy dtype used for a MIL element type name (sub-byte types carry metadata)."""
    import numpy as np

    if name in _SUB_BYTE_NAMES:
        return _sub_byte_dtype(name)
    return np.dtype(nptype_from_builtin(_BY_NAME[name]))


@functools.cache
def _np_tables() -> tuple:
    import numpy as np

    to_builtin = {
        np.dtype(np.float16): fp16,
        np.dtype(np.float32): fp32,
        np.dtype(np.float64): fp64,
        np.dtype(np.int8): int8,
        np.dtype(np.int16): int16,
        np.dtype(np.int32): int32,
        np.dtype(np.int64): int64,
        np.dtype(np.uint8): uint8,
        np.dtype(np.uint16): uint16,
        np.dtype(np.uint32): uint32,
        np.dtype(np.uint64): uint64,
        np.dtype(np.bool_): bool,
        np.dtype(np.complex64): complex64,
    }
    from_builtin = {
        fp16: np.float16,
        fp32: np.float32,
        fp64: np.float64,
        int8: np.int8,
        int16: np.int16,
        int32: np.int32,
        int64: np.int64,
        uint8: np.uint8,
        uint16: np.uint16,
        uint32: np.uint32,
        uint64: np.uint64,
        bool: np.bool_,
        string: np.str_,
        int4: np.int8,
        uint1: np.uint8,
        uint2: np.uint8,
        uint3: np.uint8,
        uint4: np.uint8,
        uint6: np.uint8,
        bf16: np.float32,
        fp8e4m3fn: np.float32,
        fp8e5m2: np.float32,
        complex64: np.complex64,
    }
    return to_builtin, from_builtin


def numpy_type_to_builtin_type(nptype: Any) -> DType:
    """numpy dtype (or type) -> MIL element type; sub-byte metadata is honoured."""
    import numpy as np

    if nptype in (_builtin_bool,):
        return bool
    if nptype is _builtin_str or nptype is np.str_:
        return string
    d = np.dtype(nptype)
    md = d.metadata
    if md and "true_dtype" in md:
        t = md["true_dtype"]
        name = getattr(t, "__name__", t)
        return _BY_NAME[_builtin_str(name)]
    if d.kind in "US":
        return string
    to_builtin = _np_tables()[0]
    if d in to_builtin:
        return to_builtin[d]
    raise TypeError(f"unsupported numpy type {nptype}")


def nptype_from_builtin(t: Any) -> type:
    """MIL element type -> numpy scalar type (sub-byte types map to their byte containers)."""
    t = _prim(t)
    from_builtin = _np_tables()[1]
    if t not in from_builtin:
        raise TypeError(f"no numpy type for {t}")
    return from_builtin[t]


def promote_types(a: DType, b: DType) -> DType:
    """coremltools' promotion: numpy's, except float with int gives the float."""
    return _BY_CODE[_core.promote_dtypes(a.code, b.code)]


def type_of(var: Any) -> Any:
    """The MIL type of a Var (what coremltools calls ``sym_type``)."""
    kind = var._kind
    if kind == "state":
        return state(tensor(_BY_CODE[var._dtype_code], var.shape))
    if kind == "dict":
        key, value = var._type_detail
        return dict(_BY_CODE[key], _BY_CODE[value])
    dt = _BY_CODE[var._dtype_code]
    if kind == "scalar":
        return dt
    if kind == "list":
        detail = var._type_detail  # a list of scalars (a mil_list const) knows its length
        if detail is not None:
            return list(dt, init_length=detail[0], dynamic_length=detail[1])
        return list(dt)
    return tensor(dt, var.shape)


def __getattr__(name: _builtin_str) -> Any:
    if name in _ALIASES:
        return _ALIASES[name]
    if name.startswith("np_") and name.endswith("_dtype") and name[3:-6] in _SUB_BYTE_NAMES:
        return _sub_byte_dtype(name[3:-6])
    raise AttributeError(f"module 'milkit.types' has no attribute '{name}'")
