"""Parity of the 18 elementwise binary ops with coremltools, at every opset."""

import numpy as np
import pytest
from support.parity import ALL_OPSETS, check, check_error

BINARY = ["add", "sub", "mul", "real_div", "floor_div", "mod", "pow", "maximum", "minimum",
          "equal", "not_equal", "greater", "greater_equal", "less", "less_equal"]
LOGICAL = ["logical_and", "logical_or", "logical_xor"]


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("shapes", [
    [((2, 3), "fp32"), ((2, 3), "fp32")],
    [((1, "S", 4), "fp32"), ((3, 1, 4), "fp32")],
    [(("S", 1, 4), "fp32"), ((1, "T", 4), "fp32")],
    [(("S", 4), "fp32"), ((3, 4), "fp32")],
    [((4,), "int32"), ((2, 4), "int32")],
])
def test_binary_vars(op, shapes):
    check(lambda mb, x, y: getattr(mb, op)(x=x, y=y), shapes, ALL_OPSETS)


@pytest.mark.parametrize("op", BINARY)
def test_binary_const_fold(op):
    a = np.array([[1.5, -2.0, 3.0]], np.float32)
    b = np.array([2.0, 4.0, -1.5], np.float32)
    check(lambda mb, x: getattr(mb, op)(x=a, y=b), [((1, 3), "fp32")], ["iOS17"])


@pytest.mark.parametrize("op", ["add", "sub", "mul", "floor_div", "mod", "maximum", "minimum", "pow"])
def test_binary_int_fold(op):
    a = np.array([7, -3, 9], np.int32)
    b = np.array([2, 5, 2], np.int32)
    check(lambda mb, x: getattr(mb, op)(x=a, y=b), [((1,), "fp32")], ["iOS17"])


@pytest.mark.parametrize("op", LOGICAL)
def test_logical(op):
    check(lambda mb, x, y: getattr(mb, op)(x=x, y=y), [((2, 3), "bool"), (("S", 1, 3), "bool")], ALL_OPSETS)
    a = np.array([True, False, True])
    b = np.array([True, True, False])
    check(lambda mb, x: getattr(mb, op)(x=a, y=b), [((1,), "fp32")], ["iOS17"])


def test_scalar_consts_and_names():
    check(lambda mb, x: mb.mul(x=mb.add(x=x, y=2.0), y=np.float32(0.5), name="scaled"), [((2, "S"), "fp32")],
          ALL_OPSETS)


def test_broadcast_conflict_names_dim_and_shapes():
    e = check_error(lambda mb, x, y: mb.add(x=x, y=y), [((2, 4), "fp32"), ((3, 4), "fp32")],
                    match=r"add 'add_0'.*\(2, 4\).*\(3, 4\).*dim 0 .*2 vs 3")
    assert isinstance(e, ValueError)


def test_dtype_mismatch_is_type_error():
    e = check_error(lambda mb, x: mb.add(x=x, y=np.float16(2.0)), [((2,), "fp32")],
                    match=r"add 'add_0'.*'y'.*y has dtype fp16 whereas x has dtype fp32")
    assert isinstance(e, TypeError)


def test_bad_dtype_domain():
    check_error(lambda mb, x, y: mb.add(x=x, y=y), [((2,), "bool"), ((2,), "bool")],
                match=r"add 'add_0'.*'x'.*bool")
