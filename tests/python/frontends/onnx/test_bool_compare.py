"""ONNX Equal on bool tensors (with broadcasting, at the opsets that allow bool), next to the
logical ops that take bools, against onnxruntime; mixed bool / number inputs are refused by name."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from support.onnx_util import check, make_model, milkit_run

B = TensorProto.BOOL
A = np.array([[True, False, True], [False, False, True]])
C = np.array([True, True, False])


def vi(name: str, shape, et=B):
    return helper.make_tensor_value_info(name, et, shape)


@pytest.mark.parametrize("opset", [11, 13, 19])
@pytest.mark.parametrize("op", ["Equal", "And", "Or", "Xor"])
def test_bool_inputs(op: str, opset: int) -> None:
    m = make_model([helper.make_node(op, ["a", "b"], ["y"])], [vi("a", [2, 3]), vi("b", [3])], [vi("y", [2, 3])],
                   opset=opset)
    check(m, {"a": A, "b": C})


def test_equal_of_bools_feeding_where_and_not() -> None:
    # a comparison of two comparisons, as exported masks are compared
    nodes = [helper.make_node("Greater", ["x", "z"], ["gx"]),
             helper.make_node("Less", ["y", "z"], ["ly"]),
             helper.make_node("Equal", ["gx", "ly"], ["eq"]),
             helper.make_node("Not", ["eq"], ["ne"]),
             helper.make_node("Where", ["eq", "x", "y"], ["w"])]
    f = TensorProto.FLOAT
    m = make_model(nodes, [vi("x", ["N", 4], f), vi("y", ["N", 4], f), vi("z", [1], f)],
                   [vi("ne", ["N", 4]), vi("w", ["N", 4], f)])
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 5, 4)).astype(np.float32)
    check(m, {"x": x, "y": y, "z": np.zeros(1, np.float32)})


def test_equal_of_a_bool_and_a_number_is_refused_by_name() -> None:
    m = make_model([helper.make_node("Equal", ["a", "x"], ["y"], name="eq_mixed")],
                   [vi("a", [3]), vi("x", [3], TensorProto.FLOAT)], [vi("y", [3])])
    with pytest.raises(ValueError, match="'eq_mixed'.*Equal of a bool and a non-bool tensor"):
        milkit_run(m, {"a": C, "x": np.ones(3, np.float32)})
