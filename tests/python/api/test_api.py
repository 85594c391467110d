"""The Python API: coremltools-compatible names, typing rules, vars, errors, import cost."""

import os
import subprocess
import sys

import milkit
import milkit as ct
import numpy as np
import pytest
from milkit import Builder as mb
from milkit import get_new_symbol, get_new_variadic_symbol, types


def test_top_level_names():
    for name in ["Builder", "types", "get_new_symbol", "get_new_variadic_symbol", "target", "Program",
                 "Function", "Var", "Operation"]:
        assert hasattr(milkit, name), name
    assert int(ct.target.iOS15) == 6 and int(ct.target.iOS18) == 9 and int(ct.target.iOS26) == 10
    assert ct.target.macOS14 is ct.target.iOS17


def test_types_module():
    assert types.builtin_to_string(types.fp32) == "fp32"
    assert types.string_to_builtin("int32") is types.int32
    assert types.string_to_builtin("str") is types.str
    assert types.numpy_type_to_builtin_type(np.float16) is types.fp16
    assert types.numpy_type_to_builtin_type(types.np_int4_dtype) is types.int4
    assert types.nptype_from_builtin(types.int8) is np.int8
    t = types.tensor(types.fp32, (2, 3))
    assert t is types.tensor(types.fp32, [2, 3])
    assert types.is_tensor(t) and not types.is_tensor(types.fp32)
    assert types.is_scalar(types.fp32)
    assert t.get_primitive() is types.fp32 and t.get_shape() == (2, 3)
    assert types.is_float(types.fp16) and types.is_int(types.uint6) and types.is_sub_byte(types.uint3)
    assert types.promote_types(types.fp16, types.int32) is types.fp16
    assert types.is_state(types.state(t)) and types.state(t).wrapped_type() is t
    for name in ["bf16", "fp8e4m3fn", "fp8e5m2", "uint1", "uint2", "uint3", "uint4", "uint6", "int4"]:
        assert types.string_to_builtin(name) is getattr(types, name)


def test_symbols_and_arithmetic():
    S = get_new_symbol("S")
    T = get_new_symbol("T")
    assert str(S) == "S" and S.name == "S"
    assert str(S * 4) == "4*S"
    assert str(S + T) == "S + T" and (S + T) == (T + S)
    assert 2 * S + S == 3 * S
    assert (4 * S) // 4 == S
    assert S - S == 0 and isinstance(S - S, int)
    assert str((S - 1) // 2 + 1) == "(S + 1)//2"
    auto = get_new_symbol()
    assert auto.name.startswith("is")
    assert get_new_symbol().name != auto.name
    # named symbols can be reused across programs; same name is a different symbol
    assert get_new_symbol("S") != S
    assert S.compare_le(S + 1) is True and S.compare_eq(T) is None
    v = get_new_variadic_symbol()
    assert v.is_variadic and v.name.startswith("*")


def test_symbols_sympy_roundtrip():
    import sympy
    from milkit.symbolic import from_sympy, to_sympy

    S = get_new_symbol("S")
    e = (S - 1) // 2 + 1
    se = to_sympy(e)
    for s in range(1, 20):
        assert int(se.subs({sympy.Symbol("S", integer=True, positive=True): s})) == (s - 1) // 2 + 1
    back = from_sympy(se, {"S": S})
    assert back == e
    assert from_sympy(sympy.Symbol("S") * 4, {"S": S}) == 4 * S


def _prog(fn, specs, opset=ct.target.iOS17):
    return mb.program(input_specs=specs, opset_version=opset)(fn)


def test_program_var_op_api():
    S = get_new_symbol("S")

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, S, 4))], opset_version=ct.target.iOS17)
    def prog(x):
        y = mb.add(x=x, y=1.0)
        return mb.mul(x=y, y=y, name="sq")

    f = prog.functions["main"]
    assert list(f.inputs) == ["x"]
    x = f.inputs["x"]
    assert x.shape == (1, S, 4) and x.dtype is types.fp32 and x.rank == 3
    assert x.op is None and x.val is None
    assert [o.op_type for o in f.operations] == ["const", "add", "mul"]
    add = prog.find_ops(op_type="add", exactly_one=True)[0]
    assert add.name == "add_0" and add.outputs[0].name == "add_0"
    assert set(add.inputs) == {"x", "y"} and add.inputs["x"] is x and add.x is x
    c = add.inputs["y"]
    assert c.name == "add_0_y_0" and c.op.op_type == "const"
    assert c.val == np.float32(1.0) and c.val.dtype == np.float32
    assert [op.name for op in add.outputs[0].child_ops] == ["sq", "sq"]
    assert f.outputs[0].name == "sq"
    assert types.is_tensor(f.outputs[0].sym_type)
    assert f.opset_version == ct.target.iOS17
    assert prog.find_ops(prefix="sq")[0].op_type == "mul"
    prog.validate()
    text = str(prog)
    assert text.startswith("\nmain[CoreML7](%x: (1, S, 4, fp32)(Tensor)) {")
    assert '%add_0: (1, S, 4, fp32)(Tensor) = add(x=%x, y=1.0, name="add_0")' in text
    assert text.rstrip().endswith("} -> (%sq)\n}")


@pytest.mark.parametrize("value,dtype,want", [
    pytest.param(1, types.int32, np.int32(1), id="int"),
    pytest.param(2**40, types.int32, np.int32(2**31 - 1), id="int_clipped_high"),
    pytest.param(-(2**40), types.int32, np.int32(-(2**31)), id="int_clipped_low"),
    pytest.param(1.5, types.fp32, np.float32(1.5), id="float"),
    pytest.param(np.float64(1.5), types.fp32, np.float32(1.5), id="np_float64_to_fp32"),
    pytest.param(np.int64(7), types.int32, np.int32(7), id="np_int64_to_int32"),
    pytest.param(True, types.bool, True, id="bool"),
    pytest.param("same", types.str, "same", id="str"),
    pytest.param(np.float16(2), types.fp16, np.float16(2), id="np_float16"),
    pytest.param(np.int8(-3), types.int8, np.int8(-3), id="np_int8"),
    pytest.param(np.uint8(3), types.uint8, np.uint8(3), id="np_uint8"),
    pytest.param(np.int16(-3), types.int16, np.int16(-3), id="np_int16"),
    pytest.param(np.uint32(3), types.uint32, np.uint32(3), id="np_uint32"),
])
def test_const_typing_rules(value, dtype, want):
    @mb.program(input_specs=[mb.TensorSpec((1,))])
    def prog(x):
        return mb.const(val=value)

    out = prog.functions["main"].outputs[0]
    assert out.dtype is dtype, (value, out.dtype)
    assert out.val == want and out.shape == ()


@pytest.mark.parametrize("value,dtype,shape", [
    pytest.param([1, 2, 3], types.int32, (3,), id="int_list"),
    pytest.param([1.0, 2.0], types.fp32, (2,), id="float_list"),
    pytest.param(np.array([1, 2**40], np.int64), types.int32, (2,), id="np_int64_to_int32"),
    pytest.param(np.zeros((2, 2), np.float64), types.fp32, (2, 2), id="np_float64_to_fp32"),
    pytest.param(np.zeros((2,), np.float16), types.fp16, (2,), id="np_float16"),
    pytest.param(np.array([True, False]), types.bool, (2,), id="np_bool"),
    pytest.param(np.array(["a", "bc"]), types.str, (2,), id="np_str"),
    pytest.param(np.array([1, -2], dtype=types.np_int4_dtype), types.int4, (2,), id="np_int4"),
    pytest.param(np.array([3, 1], dtype=types.np_uint2_dtype), types.uint2, (2,), id="np_uint2"),
])
def test_const_array_typing_rules(value, dtype, shape):
    @mb.program(input_specs=[mb.TensorSpec((1,))])
    def prog(x):
        return mb.const(val=value)

    out = prog.functions["main"].outputs[0]
    assert out.dtype is dtype and out.shape == shape, (value, out.dtype, out.shape)


@pytest.mark.parametrize("value", [
    pytest.param([1, -2, 2**40, -(2**40)], id="ints_clipped"),
    pytest.param((3, 4), id="int_tuple"),
    pytest.param([2**63], id="uint64_range"),
    pytest.param([0.1, -1e40, float("inf")], id="floats"),
    pytest.param([1, 2.5], id="int_and_float"),
    pytest.param([2.5, 1], id="float_and_int"),
    pytest.param([True, 2], id="bool_and_int"),
    pytest.param([[1, 2], [3, 4]], id="nested"),
    pytest.param([np.int64(5), 6], id="numpy_int_first"),
])
def test_python_number_lists_are_typed_as_numpy_arrays_of_them(value):
    # coremltools makes a const of np.array(value): int64 clipped to int32, float64 to fp32
    arr = np.array(value)
    if arr.dtype.kind in "iu":
        want = np.clip(arr, -(2**31), 2**31 - 1).astype(np.int32)
    else:
        want = arr.astype(np.float32) if arr.dtype.kind == "f" else arr

    @mb.program(input_specs=[mb.TensorSpec((1,))])
    def prog(x):
        return mb.const(val=value)

    got = prog.functions["main"].outputs[0].val
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_const_int64_array_values_are_clipped_to_int32():
    # int64 values are clipped to int32 like coremltools
    @mb.program(input_specs=[mb.TensorSpec((1,))])
    def prog2(x):
        return mb.const(val=np.array([1, 2**40], np.int64))

    assert prog2.functions["main"].outputs[0].val.tolist() == [1, 2**31 - 1]


def test_weights_are_not_copied():
    w = np.random.rand(64, 64).astype(np.float32)

    @mb.program(input_specs=[mb.TensorSpec((64, 64))])
    def prog(x):
        return mb.add(x=x, y=w)

    c = prog.functions["main"].find_ops(op_type="const")[0].outputs[0]
    assert np.shares_memory(c.val, w)
    assert not c.val.flags.writeable


def test_symbolic_const_is_an_error():
    S = get_new_symbol("S")
    with pytest.raises(TypeError, match="symbolic"):
        @mb.program(input_specs=[mb.TensorSpec((S, 2))])
        def prog(x):
            return mb.add(x=x, y=np.float32(1)) if False else mb.const(val=[S, 2])


def test_positional_arguments_follow_input_order():
    @mb.program(input_specs=[mb.TensorSpec((2,)), mb.TensorSpec((2,))])
    def prog(x, y):
        return mb.sub(x, y)

    op = prog.find_ops(op_type="sub")[0]
    assert op.inputs["x"].name == "x" and op.inputs["y"].name == "y"
    with pytest.raises(TypeError, match=r"at most 2 positional arguments \(x, y\)"):
        @mb.program(input_specs=[mb.TensorSpec((2,))])
        def bad(x):
            return mb.sub(x, x, x)


def test_op_callers_take_every_call_form():
    # mb.<op> is a vectorcall object: keywords come as names beside the values, or (through
    # **kwargs, functools.partial, or a C caller) as a dict; all forms build the same op
    import functools

    assert isinstance(mb.add, milkit._core.OpCaller)
    assert mb.add.op_type == "add" and repr(mb.add) == "<milkit op 'add'>"
    with pytest.raises(AttributeError):
        mb.add.op_type = "sub"
    with pytest.raises(TypeError):  # only op_caller() makes them (one made empty would crash)
        milkit._core.OpCaller()

    @mb.program(input_specs=[mb.TensorSpec((2,))])
    def prog(x):
        a = mb.add(x=x, y=1.0, name="kw")
        b = mb.add(x, **{"y": 2.0, "name": "star"})
        c = functools.partial(mb.add, y=3.0)(x=x, name="partial")
        d = mb.add.__call__(x, 4.0, name="method")
        e = mb.add(*(x, 5.0))
        return mb.concat(values=[a, b, c, d, e], axis=0)

    adds = prog.find_ops(op_type="add")
    assert [op.name for op in adds] == ["kw", "star", "partial", "method", "add_0"]
    assert [float(op.inputs["y"].val) for op in adds] == [1.0, 2.0, 3.0, 4.0, 5.0]
    with pytest.raises(TypeError, match="argument 'x' given twice"):
        @mb.program(input_specs=[mb.TensorSpec((2,))])
        def twice(x):
            return mb.add(x, x=x, y=1.0)
    with pytest.raises(TypeError, match="Unknown input 'z'"):
        @mb.program(input_specs=[mb.TensorSpec((2,))])
        def unknown(x):
            return mb.add(x=x, **{"z": 1.0})
    with pytest.raises(ValueError, match="no function is being built"):
        mb.add(x=1.0, y=2.0)


def test_errors_name_op_input_and_user_line():
    with pytest.raises(TypeError) as e:
        @mb.program(input_specs=[mb.TensorSpec((2,))])
        def prog(x):
            return mb.add(x=x, y=np.float16(1))  # the line named in the message

    msg = str(e.value)
    assert "add 'add_0'" in msg and "'y'" in msg and "fp16" in msg
    assert f"{os.path.basename(__file__)}:" in msg
    with pytest.raises(TypeError, match="Unknown input 'z' for op 'add'; its inputs are: x, y"):
        @mb.program(input_specs=[mb.TensorSpec((2,))])
        def prog2(x):
            return mb.add(x=x, z=x)
    with pytest.raises(TypeError, match="missing required input 'y'"):
        @mb.program(input_specs=[mb.TensorSpec((2,))])
        def prog3(x):
            return mb.add(x=x)
    with pytest.raises(ValueError, match="no function is being built"):
        mb.add(x=1.0, y=2.0)
    empty = milkit._core.Var.__new__(milkit._core.Var)  # a Var object holding no var
    with pytest.raises(ValueError, match="holds no var"):
        @mb.program(input_specs=[mb.TensorSpec((2,))])
        def prog4(x):
            return mb.add(x=x, y=empty)
    with pytest.raises(AttributeError):
        mb.no_such_op  # noqa: B018
    assert isinstance(e.value, milkit.MilkitError)
    # coremltools raises ValueError for input validation; milkit's TypeErrors are ValueErrors too
    assert isinstance(e.value, ValueError)


def test_ops_record_the_line_they_are_built_at():
    import inspect

    first = inspect.currentframe().f_lineno + 5  # the mb.add line below

    @mb.program(input_specs=[mb.TensorSpec((2,))])
    def prog(x):
        for _ in range(3):
            x = mb.add(x=x, y=1.0)
        return mb.mul(x=x, y=2.0)

    ops = prog.functions["main"].operations
    assert [op.location for op in ops if op.op_type == "add"] == [(__file__, first)] * 3
    assert [op.location for op in ops if op.op_type == "mul"] == [(__file__, first + 1)]
    # the implicit consts carry the line of the op that made them
    assert {op.location[1] for op in ops if op.op_type == "const"} == {first, first + 1}


def test_unconvertible_values_name_the_op_and_input():
    with pytest.raises(TypeError, match="^mb.add input 'y': cannot make a const from a value of type object$"):
        @mb.program(input_specs=[mb.TensorSpec((2,))])
        def prog(x):
            return mb.add(x=x, y=object())
    with pytest.raises(TypeError, match="^mb.add input 'y': a list of vars is not a value"):
        @mb.program(input_specs=[mb.TensorSpec((2,))])
        def prog2(x):
            return mb.add(x=x, y=[x, x])


def test_errors_raised_inside_block_functions_propagate_unchanged():
    class BlockFunctionError(Exception):
        pass

    def true_fn():
        raise BlockFunctionError("from the block function")

    with pytest.raises(BlockFunctionError, match="from the block function"):
        @mb.program(input_specs=[mb.TensorSpec((2,))])
        def prog(x):
            pred = mb.greater(x=mb.reduce_max(x=x), y=0.0)
            return mb.cond(pred=pred, _true_fn=true_fn, _false_fn=lambda: x)


def test_var_operators():
    @mb.program(input_specs=[mb.TensorSpec((2, 3)), mb.TensorSpec((2, 3), dtype=types.fp16)])
    def prog(x, h):
        a = x + x
        b = x * 2.0
        c = 1.0 - x
        d = -x
        e = h * 2.0  # python floats take the var's dtype
        return a, b, c, d, e

    ops = [o.op_type for o in prog.functions["main"].operations if o.op_type != "const"]
    assert ops == ["add", "mul", "sub", "mul", "mul"]
    outs = prog.functions["main"].outputs
    assert outs[4].dtype is types.fp16


def test_set_before_op_inserts_in_place():
    @mb.program(input_specs=[mb.TensorSpec((2,))])
    def prog(x):
        a = mb.add(x=x, y=1.0)
        return mb.mul(x=a, y=a)

    mul = prog.find_ops(op_type="mul")[0]
    with mb.set_before_op(mul):
        s = mb.sub(x=mul.inputs["x"], y=2.0)
    mul.enclosing_block.operations  # noqa: B018
    names = [o.name for o in prog.functions["main"].operations]
    assert names.index("sub_0") < names.index("mul_0")
    assert s.op.name == "sub_0"
    prog.validate()


def test_opset_defaults_follow_ops():
    @mb.program(input_specs=[mb.TensorSpec((2,))])
    def prog(x):
        return mb.add(x=x, y=1.0)

    assert "main[CoreML3]" in str(prog)


def test_import_is_fast_and_lean():
    code = (
        "import time, sys; t=time.perf_counter(); import milkit; dt=time.perf_counter()-t;"
        "bad=[m for m in ('sympy','torch','coremltools','onnx','numpy') if m in sys.modules];"
        "print(dt, bad)"
    )
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    dt, bad = out.stdout.split(" ", 1)
    assert bad.strip() == "[]"
    assert float(dt) < 2.0  # generous bound for a loaded CI machine; typical value is in the notes


def test_stub_matches_registry():
    from milkit import _stubgen

    path = os.path.join(os.path.dirname(milkit.__file__), "builder.pyi")
    with open(path, encoding="utf-8") as f:
        assert f.read() == _stubgen.generate(), "run: python -m milkit._stubgen"


def test_coremltools_sub_byte_numpy_dtypes_are_accepted():
    from coremltools.converters.mil.mil import types as ctypes

    for ct_dtype, want in [(ctypes.np_int4_dtype, types.int4), (ctypes.np_uint4_dtype, types.uint4),
                           (ctypes.np_uint1_dtype, types.uint1), (ctypes.np_uint6_dtype, types.uint6)]:
        arr = np.array([1, 0, 1], dtype=ct_dtype)

        @mb.program(input_specs=[mb.TensorSpec((1,))])
        def prog(x):
            return mb.const(val=arr)

        assert prog.functions["main"].outputs[0].dtype is want


def test_huge_constant_folds_are_skipped_not_allocated():
    @mb.program(input_specs=[mb.TensorSpec((2,))])
    def prog(x):
        return mb.fill(shape=[2000000, 1000000], value=1.0)

    out = prog.functions["main"].outputs[0]
    assert out.shape == (2000000, 1000000) and out.val is None


def test_stub_is_valid_python():
    import ast

    path = os.path.join(os.path.dirname(milkit.__file__), "builder.pyi")
    with open(path, encoding="utf-8") as f:
        ast.parse(f.read())
