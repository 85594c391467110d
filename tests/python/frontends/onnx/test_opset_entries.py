"""Operators whose inputs, attributes or defaults changed between opsets: the model's opset picks
the table entry, and each entry gives onnxruntime's numbers at its own opset."""

from __future__ import annotations

import milkit
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from support.onnx_util import check, const, make_model, milkit_run, vi

RNG = np.random.default_rng(7)


def rnd(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def i64(name: str, values) -> object:
    return const(name, values, np.int64)


def f32(name: str, values) -> object:
    return const(name, values, np.float32)


@pytest.mark.parametrize("opset", [11, 13])
def test_reduce_sum_axes_attribute_before_13_input_from_13(opset):
    x = rnd(2, 3, 4)
    if opset == 11:
        node, inits = helper.make_node("ReduceSum", ["x"], ["y"], axes=[1], keepdims=0), []
    else:
        node, inits = helper.make_node("ReduceSum", ["x", "a"], ["y"], keepdims=0), [i64("a", [1])]
    (y,) = check(make_model([node], [vi("x", [2, 3, 4])], [vi("y", [2, 4])], inits, opset=opset), {"x": x})
    np.testing.assert_allclose(y, x.sum(axis=1), rtol=1e-5)


@pytest.mark.parametrize("op,ref", [("ReduceMean", np.mean), ("ReduceMax", np.max),
                                    ("ReduceL2", lambda a, axis: np.sqrt((a * a).sum(axis=axis)))])
@pytest.mark.parametrize("opset", [17, 18])
def test_reductions_axes_attribute_before_18_input_from_18(op, ref, opset):
    x = rnd(2, 3, 4)
    if opset == 17:
        node, inits = helper.make_node(op, ["x"], ["y"], axes=[-1], keepdims=0), []
    else:
        node, inits = helper.make_node(op, ["x", "a"], ["y"], keepdims=0), [i64("a", [-1])]
    (y,) = check(make_model([node], [vi("x", [2, 3, 4])], [vi("y", [2, 3])], inits, opset=opset), {"x": x})
    np.testing.assert_allclose(y, ref(x, axis=-1), rtol=1e-5)


def test_reduce_from_18_without_axes_reduces_everything_or_nothing():
    x = rnd(2, 3)
    every = make_model([helper.make_node("ReduceMax", ["x"], ["y"], keepdims=0)],
                       [vi("x", [2, 3])], [vi("y", [])], opset=18)
    np.testing.assert_allclose(check(every, {"x": x})[0], x.max(), rtol=1e-6)
    none = make_model([helper.make_node("ReduceMax", ["x"], ["y"], noop_with_empty_axes=1)],
                      [vi("x", [2, 3])], [vi("y", [2, 3])], opset=18)
    np.testing.assert_array_equal(check(none, {"x": x})[0], x)


@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_and_unsqueeze_axes_attribute_before_13_input_from_13(opset):
    x = rnd(2, 1, 3)
    if opset == 11:
        nodes = [helper.make_node("Squeeze", ["x"], ["s"], axes=[1]),
                 helper.make_node("Unsqueeze", ["s"], ["y"], axes=[0, -1])]
        inits = []
    else:
        nodes = [helper.make_node("Squeeze", ["x", "a"], ["s"]),
                 helper.make_node("Unsqueeze", ["s", "b"], ["y"])]
        inits = [i64("a", [1]), i64("b", [0, -1])]
    m = make_model(nodes, [vi("x", [2, 1, 3])], [vi("y", [1, 2, 3, 1])], inits, opset=opset)
    (y,) = check(m, {"x": x})
    np.testing.assert_array_equal(y, x.reshape(1, 2, 3, 1))


@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_without_axes_drops_every_unit_dim(opset):
    x = rnd(1, 3, 1)
    m = make_model([helper.make_node("Squeeze", ["x"], ["y"])], [vi("x", [1, 3, 1])], [vi("y", [3])], opset=opset)
    np.testing.assert_array_equal(check(m, {"x": x})[0], x.reshape(3))


def test_reshape_shape_attribute_before_opset_5():
    # onnxruntime runs no opset older than 7: the reference is numpy
    x = rnd(2, 3, 4)
    m = make_model([helper.make_node("Reshape", ["x"], ["y"], shape=[0, -1])],
                   [vi("x", [2, 3, 4])], [vi("y", [2, 12])], opset=4)
    (y,) = milkit_run(m, {"x": x})
    np.testing.assert_array_equal(y, x.reshape(2, 12))


@pytest.mark.parametrize("shape", [[0, -1], [2, 0, -1], [-1]])
def test_reshape_shape_input_from_opset_5(shape):
    x = rnd(2, 3, 4)
    want = x.reshape([x.shape[i] if d == 0 else d for i, d in enumerate(shape)])
    m = make_model([helper.make_node("Reshape", ["x", "s"], ["y"])], [vi("x", [2, 3, 4])],
                   [vi("y", list(want.shape))], [i64("s", shape)], opset=13)
    np.testing.assert_array_equal(check(m, {"x": x})[0], want)


@pytest.mark.parametrize("opset", [11, 13])
def test_split_sizes_attribute_before_13_input_from_13(opset):
    x = rnd(2, 7)
    outs = [vi("a", [2, 3]), vi("b", [2, 4])]
    if opset == 11:
        node, inits = helper.make_node("Split", ["x"], ["a", "b"], axis=1, split=[3, 4]), []
    else:
        node, inits = helper.make_node("Split", ["x", "s"], ["a", "b"], axis=1), [i64("s", [3, 4])]
    a, b = check(make_model([node], [vi("x", [2, 7])], outs, inits, opset=opset), {"x": x})
    np.testing.assert_array_equal(a, x[:, :3])
    np.testing.assert_array_equal(b, x[:, 3:])


def test_split_from_18_into_uneven_equal_parts():
    x = rnd(7, 2)
    node = helper.make_node("Split", ["x"], ["a", "b", "c"], axis=0, num_outputs=3)
    m = make_model([node], [vi("x", [7, 2])], [vi("a", [3, 2]), vi("b", [3, 2]), vi("c", [1, 2])], opset=18)
    a, b, c = check(m, {"x": x})
    np.testing.assert_array_equal(np.concatenate([a, b, c]), x)
    assert c.shape == (1, 2)


def test_dropout_in_inference_is_the_input_and_an_all_true_mask_from_12():
    x = rnd(3, 4)
    node = helper.make_node("Dropout", ["x"], ["y", "m"])
    m = make_model([node], [vi("x", [3, 4])], [vi("y", [3, 4]), vi("m", [3, 4], TensorProto.BOOL)], opset=12)
    y, mask = check(m, {"x": x})
    np.testing.assert_array_equal(y, x)
    assert mask.all()


def test_dropout_mask_before_12_is_all_true_as_onnx_defines_it():
    # Dropout-12 defines the mask as the kept elements (output = data * mask / (1 - ratio)), and
    # ONNX's reference implementation gives an all-true mask in inference at every opset;
    # onnxruntime's kernel for opsets 7-11 writes all-false ("nothing dropped"). milkit follows ONNX.
    from onnx.reference import ReferenceEvaluator

    x = rnd(3, 4)
    node = helper.make_node("Dropout", ["x"], ["y", "m"])
    m = make_model([node], [vi("x", [3, 4])], [vi("y", [3, 4]), vi("m", [3, 4], TensorProto.BOOL)], opset=10)
    y, mask = milkit_run(m, {"x": x})
    ref_y, ref_mask = ReferenceEvaluator(m).run(None, {"x": x})
    np.testing.assert_array_equal(y, ref_y)
    np.testing.assert_array_equal(mask, ref_mask)
    assert mask.all()


def test_dropout_from_12_in_training_keeps_and_scales():
    x = np.abs(rnd(64, 64)) + 0.5
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "m"], seed=3)
    m = make_model([node], [vi("x", [64, 64])], [vi("y", [64, 64]), vi("m", [64, 64], TensorProto.BOOL)],
                   [f32("r", 0.25), numpy_helper.from_array(np.array(True), "t")], opset=13)
    y, mask = milkit_run(m, {"x": x})
    np.testing.assert_allclose(y[mask], x[mask] / 0.75, rtol=1e-6)
    assert (y[~mask] == 0).all()
    assert 0.65 < mask.mean() < 0.85


def _bn_inits() -> list:
    return [f32("s", [1.0, 2.0, 0.5]), f32("b", [0.0, 0.1, -0.2]), f32("mean", [0.1, -0.3, 0.2]),
            f32("var", [1.0, 0.5, 2.0])]


@pytest.mark.parametrize("opset", [9, 14, 15])
def test_batch_normalization_in_inference_at_each_entry(opset):
    x = rnd(2, 3, 4, 4)
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "mean", "var"], ["y"], epsilon=1e-3)
    m = make_model([node], [vi("x", [2, 3, 4, 4])], [vi("y", [2, 3, 4, 4])], _bn_inits(), opset=opset)
    check(m, {"x": x})


def test_batch_normalization_training_before_14_follows_the_requested_outputs():
    # before 14, asking for the running statistics means training: the batch's own statistics
    x = rnd(4, 3, 5, 5) * 2 + 1
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "mean", "var"], ["y", "rm", "rv", "", ""],
                            epsilon=1e-5, momentum=0.8)
    m = make_model([node], [vi("x", [4, 3, 5, 5])], [vi("y", [4, 3, 5, 5]), vi("rm", [3]), vi("rv", [3])],
                   _bn_inits(), opset=9)
    y, rm, _ = milkit_run(m, {"x": x})
    mu = x.mean(axis=(0, 2, 3))
    var = x.var(axis=(0, 2, 3))
    sc, b = np.array([1.0, 2.0, 0.5], np.float32), np.array([0.0, 0.1, -0.2], np.float32)
    want = (x - mu[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5) * sc[:, None, None] + b[:, None, None]
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(rm, 0.8 * np.array([0.1, -0.3, 0.2]) + 0.2 * mu, rtol=1e-5, atol=1e-6)


def test_batch_normalization_from_14_trains_by_its_attribute():
    x = rnd(4, 3, 5, 5) * 2 + 1
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "mean", "var"], ["y", "rm", "rv"],
                            training_mode=1, momentum=0.8)
    m = make_model([node], [vi("x", [4, 3, 5, 5])], [vi("y", [4, 3, 5, 5]), vi("rm", [3]), vi("rv", [3])],
                   _bn_inits(), opset=15)
    check(m, {"x": x}, rtol=1e-4, atol=1e-4)


def test_batch_normalization_saved_statistics_before_14_are_refused_with_the_node():
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "mean", "var"],
                            ["y", "rm", "rv", "sm", "sv"], name="bn7")
    m = make_model([node], [vi("x", [2, 3, 4])],
                   [vi("y", [2, 3, 4]), vi("rm", [3]), vi("rv", [3]), vi("sm", [3]), vi("sv", [3])],
                   _bn_inits(), opset=9)
    with pytest.raises(ValueError, match=r"'bn7'.*saved mean / variance"):
        milkit.convert(m)


@pytest.mark.parametrize("opset", [8, 9, 16])
def test_scan_batch_axis_at_8_and_per_input_axes_from_9(opset):
    # a running sum over the sequence; Scan-8 has sequence_lens first and a batch axis 0
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
         helper.make_node("Identity", ["s_out"], ["y_t"])], "body",
        [vi("s_in", [2]), vi("x_t", [2])], [vi("s_out", [2]), vi("y_t", [2])])
    if opset == 8:
        x = rnd(3, 5, 2)  # [batch, sequence, 2]
        node = helper.make_node("Scan", ["", "s0", "x"], ["s", "y"], body=body, num_scan_inputs=1)
        m = make_model([node], [vi("s0", [3, 2]), vi("x", [3, 5, 2])], [vi("s", [3, 2]), vi("y", [3, 5, 2])],
                       opset=opset)
        s0 = rnd(3, 2)
        s, y = milkit_run(m, {"s0": s0, "x": x})  # onnxruntime runs no Scan-8
        np.testing.assert_allclose(y, s0[:, None, :] + np.cumsum(x, axis=1), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(s, y[:, -1], rtol=1e-6)
    else:
        x = rnd(5, 2)
        node = helper.make_node("Scan", ["s0", "x"], ["s", "y"], body=body, num_scan_inputs=1)
        m = make_model([node], [vi("s0", [2]), vi("x", [5, 2])], [vi("s", [2]), vi("y", [5, 2])], opset=opset)
        s0 = rnd(2)
        s, y = check(m, {"s0": s0, "x": x})
        np.testing.assert_allclose(y, s0 + np.cumsum(x, axis=0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opset", [10, 13])
def test_resize_scales_at_10_and_roi_scales_sizes_from_11(opset):
    x = rnd(1, 1, 3, 4)
    if opset == 10:
        node = helper.make_node("Resize", ["x", "sc"], ["y"], mode="nearest")
    else:
        node = helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="nearest",
                                coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    m = make_model([node], [vi("x", [1, 1, 3, 4])], [vi("y", [1, 1, 6, 8])], [f32("sc", [1, 1, 2, 2])], opset=opset)
    (y,) = check(m, {"x": x})
    np.testing.assert_array_equal(y, x.repeat(2, axis=2).repeat(2, axis=3))


@pytest.mark.parametrize("opset", [7, 9])
def test_upsample_scales_attribute_at_7_input_from_9(opset):
    x = rnd(1, 2, 2, 3)
    if opset == 7:
        node, inits = helper.make_node("Upsample", ["x"], ["y"], scales=[1.0, 1.0, 2.0, 3.0]), []
    else:
        node, inits = helper.make_node("Upsample", ["x", "sc"], ["y"]), [f32("sc", [1, 1, 2, 3])]
    m = make_model([node], [vi("x", [1, 2, 2, 3])], [vi("y", [1, 2, 4, 9])], inits, opset=opset)
    (y,) = check(m, {"x": x})
    np.testing.assert_array_equal(y, x.repeat(2, axis=2).repeat(3, axis=3))


@pytest.mark.parametrize("opset", [16, 20])
def test_grid_sample_default_mode_is_bilinear_at_16_and_linear_from_20(opset):
    x = rnd(1, 2, 4, 5)
    g = (RNG.random((1, 3, 3, 2)).astype(np.float32) * 2 - 1)
    node = helper.make_node("GridSample", ["x", "g"], ["y"])  # mode left to its default
    m = make_model([node], [vi("x", [1, 2, 4, 5]), vi("g", [1, 3, 3, 2])], [vi("y", [1, 2, 3, 3])], opset=opset)
    (y,) = milkit_run(m, {"x": x, "g": g})
    import torch
    import torch.nn.functional as tf

    want = tf.grid_sample(torch.from_numpy(x), torch.from_numpy(g), mode="bilinear", align_corners=False)
    np.testing.assert_allclose(y, want.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opset", [10, 16])
def test_roi_align_default_coordinates_per_opset(opset):
    # output_half_pixel before 16, half_pixel from it: the two differ by half a pixel
    x = rnd(1, 2, 8, 8)
    rois = np.array([[0.5, 1.0, 6.0, 5.5], [2.0, 2.0, 7.5, 7.0]], np.float32)
    node = helper.make_node("RoiAlign", ["x", "r", "i"], ["y"], output_height=2, output_width=3, sampling_ratio=2)
    m = make_model([node], [vi("x", [1, 2, 8, 8]), vi("r", [2, 4])], [vi("y", [2, 2, 2, 3])],
                   [i64("i", [0, 0])], opset=opset)
    check(m, {"x": x, "r": rois}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opset", [17, 20])
def test_dft_axis_attribute_at_17_input_from_20(opset):
    x = rnd(2, 8, 1)
    if opset == 17:
        node, inits = helper.make_node("DFT", ["x"], ["y"], axis=1), []
    else:
        node, inits = helper.make_node("DFT", ["x", "", "a"], ["y"]), [i64("a", 1)]
    m = make_model([node], [vi("x", [2, 8, 1])], [vi("y", [2, 8, 2])], inits, opset=opset)
    (y,) = check(m, {"x": x}, rtol=1e-4, atol=1e-4)
    want = np.fft.fft(x[..., 0], axis=1)
    np.testing.assert_allclose(y[..., 0] + 1j * y[..., 1], want, rtol=1e-4, atol=1e-4)


def test_an_operator_before_its_first_opset_names_the_opset():
    body = helper.make_graph([helper.make_node("Identity", ["a"], ["b"])], "body", [vi("a", [2])], [vi("b", [2])])
    node = helper.make_node("Scan", ["x"], ["y"], body=body, num_scan_inputs=1, name="early")
    graph = helper.make_graph([node], "g", [vi("x", [3, 2])], [vi("y", None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 7)])
    with pytest.raises(milkit.UnsupportedOpsError, match=r"(?s)opset 7.*'early' \(Scan\) \(converted from a later opset\)"):
        milkit.convert(m)
