"""ONNX Slice with INT64_MAX / INT64_MIN starts and ends (the "to the end of the dim" bounds
exporters write), constant or built at run time from a Concat with the model's shape, with
positive and negative steps, on known and symbolic dims, against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from support.onnx_util import check, make_model, milkit_run

MAX, MIN = int(np.iinfo(np.int64).max), int(np.iinfo(np.int64).min)
X = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)


def i64(name: str, v) -> TensorProto:
    return numpy_helper.from_array(np.array(v, np.int64), name)


def vi(name: str, shape, et=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, et, shape)


# (starts, ends, axes, steps)
BOUNDS = {
    "ends_max": ([1, 0], [MAX, MAX], [0, 1], [1, 1]),
    "starts_min": ([MIN, 2], [3, MAX], [0, 1], [1, 1]),
    "ends_min_forward": ([0], [MIN], [1], [1]),
    "neg_step_ends_min": ([MAX, -1], [MIN, MIN], [0, 1], [-1, -2]),
    "neg_step_from_last": ([-1], [MIN], [1], [-1]),
    "neg_step_starts_min": ([MIN], [MIN], [1], [-1]),
    "neg_step_ends_max": ([3], [MAX], [1], [-1]),
}
DIMS = {"static": [4, 6], "symbolic_rows": ["N", 6], "symbolic": ["N", "M"]}


@pytest.mark.parametrize("dims", sorted(DIMS))
@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_constant_bounds_clamp_to_the_dim(name: str, dims: str) -> None:
    s, e, a, st = BOUNDS[name]
    node = helper.make_node("Slice", ["x", "s", "e", "a", "p"], ["y"])
    inits = [i64("s", s), i64("e", e), i64("a", a), i64("p", st)]
    check(make_model([node], [vi("x", DIMS[dims])], [vi("y", ["r", "c"])], inits), {"x": X})


def test_constant_node_bounds() -> None:
    nodes = [helper.make_node("Constant", [], ["s"], value=i64("sv", [1])),
             helper.make_node("Constant", [], ["e"], value=i64("ev", [MAX])),
             helper.make_node("Constant", [], ["a"], value=i64("av", [1])),
             helper.make_node("Slice", ["x", "s", "e", "a"], ["y"])]
    check(make_model(nodes, [vi("x", [4, 6])], [vi("y", [4, 5])]), {"x": X})


@pytest.mark.parametrize("steps, bound", [([1, 1], MAX), ([1, -1], MIN), ([1, 1], MIN), ([1, -1], MAX)])
def test_run_time_bounds_from_a_concat_with_the_shape(steps, bound) -> None:
    # ends = [shape(x)[0], bound]: the constant reaches Slice only through Concat (and Unsqueeze)
    nodes = [helper.make_node("Shape", ["x"], ["sh"]),
             helper.make_node("Gather", ["sh", "i0"], ["d0"], axis=0),
             helper.make_node("Unsqueeze", ["b0", "ax0"], ["b"]),
             helper.make_node("Concat", ["d0", "b"], ["e"], axis=0),
             helper.make_node("Slice", ["x", "s", "e", "a", "p"], ["y"])]
    start = 2 if steps[1] > 0 else 4
    inits = [i64("i0", [0]), i64("b0", bound), i64("ax0", [0]), i64("s", [1, start]), i64("a", [0, 1]),
             i64("p", steps)]
    m = make_model(nodes, [vi("x", ["N", 6])], [vi("y", ["r", "c"])], inits)
    check(m, {"x": X})
    check(m, {"x": X[:3]})


def test_an_out_of_range_constant_read_elsewhere_is_still_refused() -> None:
    # the bound also feeds an Add: it is a number there, not a slice bound
    nodes = [helper.make_node("Shape", ["x"], ["sh"]),
             helper.make_node("Gather", ["sh", "i01"], ["d01"], axis=0),
             helper.make_node("Concat", ["d01", "big"], ["e"], axis=0),
             helper.make_node("Add", ["big", "one"], ["y2"]),
             helper.make_node("Slice", ["x", "s", "e"], ["y"])]
    inits = [i64("big", [MAX]), i64("one", [1]), i64("s", [1, 2, 0]), i64("i01", [0, 1])]
    m = make_model(nodes, [vi("x", ["N", 6, 2])], [vi("y", ["r", "c", "d"]), vi("y2", [1], TensorProto.INT64)], inits)
    with pytest.raises(ValueError, match="'big'.*does not fit in int32"):
        milkit_run(m, {"x": np.zeros((4, 6, 2), np.float32)})


def test_a_bound_a_branch_slices_with_and_the_outer_graph_adds_is_still_refused() -> None:
    # the outer constant is read as a Slice end inside If's branches and as a number outside
    def branch(name: str) -> helper.GraphProto:
        return helper.make_graph([helper.make_node("Slice", ["x", "s", "big", "a"], [name + "_y"])], name, [],
                                 [vi(name + "_y", ["r", "c"])])
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=branch("t"), else_branch=branch("e")),
             helper.make_node("Add", ["big", "one"], ["y2"])]
    inits = [i64("big", [MAX]), i64("one", [1]), i64("s", [1]), i64("a", [1])]
    m = make_model(nodes, [vi("x", [4, 6]), vi("cond", [], TensorProto.BOOL)],
                   [vi("y", ["r", "c"]), vi("y2", [1], TensorProto.INT64)], inits)
    with pytest.raises(ValueError, match="'big'.*does not fit in int32"):
        milkit_run(m, {"x": X, "cond": np.array(True)})


def test_a_bound_read_only_by_branch_slices_converts() -> None:
    def branch(name: str, start: int) -> helper.GraphProto:
        return helper.make_graph([helper.make_node("Shape", ["x"], [name + "_sh"]),
                                  helper.make_node("Gather", ["_sh".join([name, ""]), "i0"], [name + "_d0"], axis=0),
                                  helper.make_node("Concat", [name + "_d0", "big"], [name + "_e"], axis=0),
                                  helper.make_node("Slice", ["x", "s" + str(start), name + "_e", "a"], [name + "_y"])],
                                 name, [], [vi(name + "_y", ["r", "c"])])
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=branch("t", 1), else_branch=branch("e", 2))]
    inits = [i64("big", [MAX]), i64("i0", [0]), i64("s1", [0, 1]), i64("s2", [1, 2]), i64("a", [0, 1])]
    m = make_model(nodes, [vi("x", ["N", 6]), vi("cond", [], TensorProto.BOOL)], [vi("y", ["r", "c"])], inits)
    for c in (True, False):
        check(m, {"x": X, "cond": np.array(c)})
