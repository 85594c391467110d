"""Resize, Reshape and Trilu whose sizes, target shape or diagonal are computed at run time (from
the input's Shape, through Gather / Slice / Mul / Concat, or given as graph inputs), as
exporters write them for models with dynamic dims (torch.onnx.export(dynamo=True) writes
Shape -> Gather -> Mul -> Concat for an interpolate of a symbolic size, and Reshape targets
concatenated from run-time dims with 0 and -1 entries). Each model is converted once and run
with several input sizes against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from support.onnx_util import make_model, ort_run

RNG = np.random.default_rng(0)


def i64(name: str, v) -> TensorProto:
    return numpy_helper.from_array(np.array(v, np.int64), name)


def f32(name: str, v) -> TensorProto:
    return numpy_helper.from_array(np.array(v, np.float32), name)


def vi(name: str, shape, et=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, et, shape)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def check_sizes(model, feeds, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    """One conversion (no input fixed at conversion time) run on every feed, against onnxruntime."""
    import milkit.onnx_backend as backend

    rep = backend.prepare(model)
    for feed in feeds:
        want = ort_run(model, feed)
        got = rep.run(feed)
        assert not rep.fixed, f"inputs {rep.fixed} were needed at conversion time"
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape, (g.shape, w.shape)
            assert g.dtype == w.dtype, (g.dtype, w.dtype)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


IMAGES = [{"x": rand(1, 3, 4, 5)}, {"x": rand(2, 3, 6, 3)}, {"x": rand(1, 3, 1, 7)}]


def doubled_sizes_nodes(factor_name: str = "two") -> list:
    """sizes = Concat(Shape(x)[:2], Shape(x)[2:] * factor)."""
    return [helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node("Gather", ["s", "hw_idx"], ["hw"], axis=0),
            helper.make_node("Mul", ["hw", factor_name], ["hw2"]),
            helper.make_node("Slice", ["s", "zero", "two_end"], ["nc"]),
            helper.make_node("Concat", ["nc", "hw2"], ["sizes"], axis=0)]


SIZES_INITS = [i64("hw_idx", [2, 3]), i64("two", [2, 2]), i64("zero", [0]), i64("two_end", [2])]

# (mode, coordinate_transformation_mode, nearest_mode)
MODES = [("nearest", "half_pixel", "round_prefer_floor"), ("nearest", "asymmetric", "floor"),
         ("nearest", "half_pixel", "round_prefer_ceil"), ("nearest", "align_corners", "round_prefer_floor"),
         ("nearest", "pytorch_half_pixel", "ceil"), ("linear", "half_pixel", "round_prefer_floor"),
         ("linear", "align_corners", "round_prefer_floor"), ("linear", "asymmetric", "round_prefer_floor"),
         ("linear", "pytorch_half_pixel", "round_prefer_floor"),
         ("linear", "half_pixel_symmetric", "round_prefer_floor")]


@pytest.mark.parametrize("mode, coord, nearest", MODES)
def test_resize_sizes_from_the_input_shape(mode: str, coord: str, nearest: str) -> None:
    nodes = doubled_sizes_nodes() + [helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode,
                                                      coordinate_transformation_mode=coord, nearest_mode=nearest)]
    model = make_model(nodes, [vi("x", ["n", 3, "h", "w"])], [vi("y", ["n", 3, "H", "W"])], SIZES_INITS,
                       opset=18 if coord == "half_pixel_symmetric" else 17)
    check_sizes(model, IMAGES)


@pytest.mark.parametrize("mode, coord, nearest", MODES)
def test_resize_sizes_from_another_inputs_shape(mode: str, coord: str, nearest: str) -> None:
    """Up and down, by factors that are not integers (sizes = Shape(like))."""
    nodes = [helper.make_node("Shape", ["like"], ["sizes"]),
             helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode,
                              coordinate_transformation_mode=coord, nearest_mode=nearest)]
    model = make_model(nodes, [vi("x", ["n", 3, "h", "w"]), vi("like", ["n", 3, "H", "W"])],
                       [vi("y", ["n", 3, "H", "W"])], opset=18 if coord == "half_pixel_symmetric" else 17)
    feeds = [{"x": rand(1, 3, 4, 5), "like": np.zeros((1, 3, 7, 3), np.float32)},
             {"x": rand(2, 3, 8, 6), "like": np.zeros((2, 3, 3, 13), np.float32)},
             {"x": rand(1, 3, 5, 5), "like": np.zeros((1, 3, 1, 1), np.float32)}]
    check_sizes(model, feeds)


def test_resize_sizes_for_axes() -> None:
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "hw_idx"], ["hw"], axis=0),
             helper.make_node("Mul", ["hw", "three"], ["sizes"]),
             helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear", axes=[2, 3])]
    model = make_model(nodes, [vi("x", ["n", 3, "h", "w"])], [vi("y", ["n", 3, "H", "W"])],
                       [i64("hw_idx", [2, 3]), i64("three", [3, 3])], opset=18)
    check_sizes(model, IMAGES)


def test_resize_sizes_as_a_graph_input() -> None:
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest")
    model = make_model([node], [vi("x", [1, 2, "h", "w"]), vi("sizes", [4], TensorProto.INT64)],
                       [vi("y", [1, 2, "H", "W"])])
    check_sizes(model, [{"x": rand(1, 2, 4, 4), "sizes": np.array([1, 2, 8, 3], np.int64)},
                        {"x": rand(1, 2, 3, 5), "sizes": np.array([1, 2, 2, 10], np.int64)}])


@pytest.mark.parametrize("mode, coord, nearest", MODES[:2] + MODES[5:7])
@pytest.mark.parametrize("scales", [[1, 1, 2, 2], [1, 1, 1.5, 0.5]])
def test_resize_constant_scales_of_symbolic_sizes(scales: list, mode: str, coord: str, nearest: str) -> None:
    """Constant scales on an input of symbolic size (torch's interpolate(scale_factor=...))."""
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode, coordinate_transformation_mode=coord,
                            nearest_mode=nearest)
    model = make_model([node], [vi("x", ["n", 3, "h", "w"])], [vi("y", ["n", 3, "H", "W"])], [f32("scales", scales)])
    check_sizes(model, [{"x": rand(1, 3, 4, 6)}, {"x": rand(2, 3, 6, 5)}])


def test_resize_cubic_needs_known_sizes() -> None:
    import milkit.onnx_backend as backend

    nodes = doubled_sizes_nodes() + [helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="cubic")]
    model = make_model(nodes, [vi("x", ["n", 3, "h", "w"])], [vi("y", ["n", 3, "H", "W"])], SIZES_INITS)
    with pytest.raises(ValueError, match="sizes .* must be known at conversion time"):
        backend.prepare(model).run(IMAGES[0])


def _reshape_model(nodes: list, inits: list, out_rank: int):
    return make_model(nodes + [helper.make_node("Reshape", ["x", "shp"], ["y"])], [vi("x", ["n", "h", "w"])],
                      [vi("y", [f"d{i}" for i in range(out_rank)])], inits)


CUBES = [{"x": rand(2, 3, 4)}, {"x": rand(5, 7, 2)}, {"x": rand(1, 1, 6)}]
SHAPE_IDX = [i64("i0", [0]), i64("i1", [1]), i64("i2", [2]), i64("zero", [0]), i64("minus", [-1])]
GATHERS = [helper.make_node("Shape", ["x"], ["s"])] + [
    helper.make_node("Gather", ["s", f"i{k}"], [f"d{k}"], axis=0) for k in range(3)]


@pytest.mark.parametrize("case", ["n_minus1", "zero_h_minus1", "n_hw", "minus1_w", "w_h_n"])
def test_reshape_to_run_time_dims(case: str) -> None:
    pieces, rank = {"n_minus1": (["d0", "minus"], 2), "zero_h_minus1": (["zero", "d1", "minus"], 3),
                    "n_hw": (["d0", "hw"], 2), "minus1_w": (["minus", "d2"], 2),
                    "w_h_n": (["d2", "d1", "d0"], 3)}[case]
    nodes = GATHERS + [helper.make_node("Mul", ["d1", "d2"], ["hw"]),
                       helper.make_node("Concat", pieces, ["shp"], axis=0)]
    check_sizes(_reshape_model(nodes, SHAPE_IDX, rank), CUBES)


def test_reshape_to_another_inputs_shape() -> None:
    nodes = [helper.make_node("Shape", ["like"], ["shp"]), helper.make_node("Reshape", ["x", "shp"], ["y"])]
    model = make_model(nodes, [vi("x", ["n", "m"]), vi("like", ["a", "b", "c"])], [vi("y", ["a", "b", "c"])])
    check_sizes(model, [{"x": rand(4, 6), "like": np.zeros((2, 3, 4), np.float32)},
                        {"x": rand(3, 2), "like": np.zeros((1, 3, 2), np.float32)}])


def test_reshape_to_a_shape_input_with_zero_and_minus_one() -> None:
    model = make_model([helper.make_node("Reshape", ["x", "shp"], ["y"])],
                       [vi("x", ["n", "m"]), vi("shp", [3], TensorProto.INT64)], [vi("y", ["a", "b", "c"])])
    check_sizes(model, [{"x": rand(4, 6), "shp": np.array([0, -1, 2], np.int64)},
                        {"x": rand(3, 4), "shp": np.array([3, 2, -1], np.int64)},
                        {"x": rand(2, 8), "shp": np.array([0, 2, 4], np.int64)}])


MATRICES = [{"x": rand(4, 5)}, {"x": rand(6, 3)}, {"x": rand(1, 1)}]


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [-2, 0, 1, 4])
def test_trilu_k_as_an_input(upper: int, k: int) -> None:
    model = make_model([helper.make_node("Trilu", ["x", "k"], ["y"], upper=upper)],
                       [vi("x", ["b", "n", "m"]), vi("k", [], TensorProto.INT64)], [vi("y", ["b", "n", "m"])])
    check_sizes(model, [{"x": rand(2, 4, 5), "k": np.array(k, np.int64)},
                        {"x": rand(1, 6, 3), "k": np.array(-k, np.int64)}])


@pytest.mark.parametrize("upper", [0, 1])
def test_trilu_k_from_the_shape(upper: int) -> None:
    """k = rows - 3, from Shape -> Gather -> Sub."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "i0"], ["rows"], axis=0),
             helper.make_node("Sub", ["rows", "three"], ["k"]),
             helper.make_node("Trilu", ["x", "k"], ["y"], upper=upper)]
    model = make_model(nodes, [vi("x", ["n", "m"])], [vi("y", ["n", "m"])], [i64("i0", 0), i64("three", 3)])
    check_sizes(model, MATRICES)


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, -1, 2])
def test_trilu_constant_k_of_symbolic_sizes(upper: int, k) -> None:
    ins = ["x"] if k is None else ["x", "k"]
    inits = [] if k is None else [i64("k", k)]
    model = make_model([helper.make_node("Trilu", ins, ["y"], upper=upper)], [vi("x", ["n", "m"])],
                       [vi("y", ["n", "m"])], inits)
    check_sizes(model, MATRICES)


def test_trilu_of_ints_with_k_an_input() -> None:
    model = make_model([helper.make_node("Trilu", ["x", "k"], ["y"])],
                       [vi("x", ["n", "m"], TensorProto.INT32), vi("k", [], TensorProto.INT64)],
                       [vi("y", ["n", "m"], TensorProto.INT32)])
    check_sizes(model, [{"x": RNG.integers(-9, 9, (3, 4), dtype=np.int32), "k": np.array(1, np.int64)},
                        {"x": RNG.integers(-9, 9, (5, 2), dtype=np.int32), "k": np.array(-1, np.int64)}])
