"""Activation / elementwise fusion passes, compared with coremltools' own passes."""

import numpy as np
import pytest
from pass_parity import check_passes, op_types

DTYPES = [("fp32", np.float32), ("fp16", np.float16)]
SHAPES = [(2, 3), ("S", 3), ("S", "T")]


def _specs(shape, dt):
    return [(shape, dt)]


def _check(build, shape, dt, name, opset="iOS17"):
    cp, mp = check_passes(build, _specs(shape, dt), [name], opset=opset)
    def strip(prog):
        return [t for t in op_types(prog) if t != "const"]

    ct_ops, mk_ops = strip(cp), strip(mp)
    assert ct_ops == mk_ops
    return ct_ops, mk_ops


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

