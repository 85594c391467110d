"""common::divide_to_multiply and common::select_optimization against coremltools' own passes."""

import numpy as np
import pytest
from support.pass_parity import check_same_ops, op_types

DTYPES = [("fp32", np.float32), ("fp16", np.float16)]
SHAPES = [(2, 3), ("S", 3), ("S", "T")]


def _check(build, shape, dt, name, opset="iOS17", numbers=True):
    ops = check_same_ops(build, [(shape, dt)], name, opset=opset, numbers=numbers)
    return ops, ops


# ---- divide_to_multiply -------------------------------------------------------------------------


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_divide_to_multiply(dt, npdt, shape):
    def build(mb, x):
        a = mb.real_div(x=x, y=npdt(4.0))
        b = mb.real_div(x=a, y=np.array([2.0, 8.0, 0.5], npdt) if shape[-1] == 3 else npdt(3.0))
        return mb.real_div(x=b, y=npdt(0.1))  # block output: keeps its name

    ct_ops, mk_ops = _check(build, shape, dt, "common::divide_to_multiply")
    assert mk_ops == ["mul", "mul", "mul"]


@pytest.mark.parametrize("dt,npdt", DTYPES)
def test_divide_to_multiply_negative(dt, npdt):
    def build(mb, x):
        a = mb.real_div(x=x, y=npdt(0.0))  # inverse not finite
        b = mb.real_div(x=npdt(2.0), y=a)  # divisor not const
        c = mb.real_div(x=b, y=np.array([1.0, 0.0, 2.0], npdt))  # one zero
        i = mb.cast(x=c, dtype="int32")
        return mb.real_div(x=i, y=np.int32(2))  # integer division stays

    ct_ops, mk_ops = _check(build, ("S", 3), dt, "common::divide_to_multiply")
    assert mk_ops.count("real_div") == 4


# ---- select_optimization ------------------------------------------------------------------------


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("cond", [True, False])
def test_select_const_scalar_cond(dt, npdt, shape, cond):
    def build(mb, x):
        y = mb.relu(x=x)
        s = mb.select(cond=np.array(cond), a=x, b=y)
        r = mb.reduce_sum(x=s, axes=[0], keep_dims=True)
        t = mb.select(cond=np.array(cond), a=r, b=r) if False else (
            mb.select(cond=np.array(cond), a=r, b=y) if cond else mb.select(cond=np.array(cond), a=y, b=r))
        # t: the picked side (1, n) is broadcast with the other: no rewrite
        u = mb.select(cond=np.array([cond, cond, cond]) if shape[-1] == 3 else np.array(cond), a=npdt(1.0), b=t)
        return mb.add(x=u, y=npdt(1.0)), s

    ct_ops, mk_ops = _check(build, shape, dt, "common::select_optimization")
    assert "identity" in mk_ops


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("shape", [(2, 3), ("S", 3)])
@pytest.mark.parametrize("side", ["a", "b"])
def test_select_inf(dt, npdt, shape, side):
    def build(mb, x):
        cond = np.array([True, False, True])
        inf = npdt(-np.inf)
        s = mb.select(cond=cond, a=inf, b=x) if side == "a" else mb.select(cond=cond, a=x, b=inf)
        m = np.array([[np.inf, -np.inf, np.inf]], npdt)
        c2 = np.array([[True], [False]]) if shape[0] == 2 else np.array([[False, True, True]])
        t = mb.select(cond=c2, a=s, b=m) if side == "b" else mb.select(cond=c2, a=m, b=s)
        return mb.relu(x=t)

    # numbers: see test_select_inf_opposite_infinities (coremltools' rewrite, kept for parity)
    ct_ops, mk_ops = _check(build, shape, dt, "common::select_optimization", numbers=False)
    assert "select" not in mk_ops


def test_select_inf_opposite_infinities():
    """select(cond, inf_const, x) -> add(inf_const or 0, x) is coremltools' rewrite (kept: it is the
    attention-mask idiom, and a drop-in must write the same model). It is exact while x is finite
    where the constant is picked; where x holds the opposite infinity the add gives NaN instead of
    the constant. Pinned here so the difference is known, not silent."""
    import milkit
    from milkit import Builder as mb
    from milkit import types
    from milkit.passes import apply_pass

    def make():
        @mb.program(input_specs=[mb.TensorSpec(shape=(3,), dtype=types.fp32)], opset_version=milkit.target.iOS17)
        def prog(x):
            return mb.select(cond=np.array([True, False, True]), a=np.float32(np.inf), b=x)
        return prog

    before, after = make(), make()
    apply_pass(after, "common::select_optimization")
    assert "select" not in op_types(after)
    x = np.array([1.0, -np.inf, -np.inf], np.float32)
    (b,) = milkit.run(before, {"x": x}).values()
    (a,) = milkit.run(after, {"x": x}).values()
    np.testing.assert_array_equal(b, [np.inf, -np.inf, np.inf])
    np.testing.assert_array_equal(a, [np.inf, -np.inf, np.nan])  # the only difference
    finite = np.array([1.0, -2.0, 3.0], np.float32)
    (a,) = milkit.run(after, {"x": finite}).values()
    (b,) = milkit.run(before, {"x": finite}).values()
    np.testing.assert_array_equal(a, b)


def test_select_negative():
    def build(mb, x):
        c = mb.greater(x=x, y=np.float32(0))
        s = mb.select(cond=c, a=x, b=np.float32(np.inf))  # cond not const
        t = mb.select(cond=np.array([True, False, True]), a=x, b=np.float32(3.0))  # finite const
        u = mb.select(cond=np.array([True, True, True]), a=np.ones(3, np.float32), b=np.zeros(3, np.float32))
        return mb.add(x=mb.add(x=s, y=t), y=u)

    ct_ops, mk_ops = _check(build, ("S", 3), "fp32", "common::select_optimization")
    assert mk_ops.count("select") == 3


# ---- more edge cases ----------------------------------------------------------------------------


@pytest.mark.parametrize("dt,npdt", DTYPES)
def test_divide_to_multiply_rounding(dt, npdt):
    def build(mb, x):
        a = mb.real_div(x=x, y=np.array([3.0, 7.0, 0.3], npdt))
        return mb.real_div(x=a, y=npdt(11.0))

    _check(build, ("S", 3), dt, "common::divide_to_multiply")


@pytest.mark.parametrize("dt,npdt", DTYPES)
def test_select_all_true_tensor_cond(dt, npdt):
    def build(mb, x):
        y = mb.sigmoid(x=x)
        return mb.select(cond=np.array([1, 1, 1], np.int32) > 0, a=x, b=y)

    ct_ops, mk_ops = _check(build, ("S", 3), dt, "common::select_optimization")
    assert mk_ops == ["sigmoid", "identity"]
