"""The ONNX importer (milkit.convert of a .onnx file or a ModelProto): numbers against onnxruntime,
symbolic dims, the package coremltools loads, and bad models rejected with clear errors."""

from __future__ import annotations

import os
import subprocess
import sys

import milkit
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from support.onnx_util import check, make_model, milkit_run

F = TensorProto.FLOAT
RNG = np.random.default_rng(0)


def rnd(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def vi(name: str, shape, et=F):
    return helper.make_tensor_value_info(name, et, shape)


def init(name: str, arr: np.ndarray):
    return numpy_helper.from_array(arr, name)


def mlp_model(batch="N"):
    r = np.random.default_rng(1)
    w = [r.standard_normal(s).astype(np.float32) for s in ((8, 16), (16,), (4, 16), (4,))]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["hb"]),
        helper.make_node("Relu", ["hb"], ["r"]),
        helper.make_node("Gemm", ["r", "w2", "b2"], ["g"], transB=1, alpha=0.5),
        helper.make_node("Softmax", ["g"], ["y"], axis=-1),
    ]
    inits = [init("w1", w[0]), init("b1", w[1]), init("w2", w[2]), init("b2", w[3])]
    return make_model(nodes, [vi("x", [batch, 8])], [vi("y", [batch, 4])], inits)


def test_mlp_matches_onnxruntime_at_two_batch_sizes():
    m = mlp_model()
    for n in (1, 5):
        check(m, {"x": rnd(n, 8)})


def test_dim_param_becomes_a_named_symbol_and_values_keep_their_names():
    prog, info = milkit.frontends.onnx.import_model(mlp_model("batch"), int(milkit.target.iOS17))
    f = prog.functions["main"]
    (x,) = f.inputs.values()
    assert str(x.shape[0]) == "batch" and x.shape[1] == 8
    assert str(f.outputs[0].shape[0]) == "batch"
    assert [v.name for v in f.outputs] == ["y"]
    assert info["input_names"] == ["x"] and info["output_types"] == [F]
    text = str(prog)
    assert "hb" in text and "%r" in text or "r = " in text


def conv_model():
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["bn"], epsilon=1e-3),
        helper.make_node("Relu", ["bn"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["p"], ["ap"], kernel_shape=[2, 2], pads=[0, 0, 1, 1]),
        helper.make_node("GlobalAveragePool", ["ap"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["f"]),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1),
    ]
    inits = [init("w", rnd(6, 3, 3, 3)), init("b", rnd(6)), init("s", rnd(6)), init("bb", rnd(6)),
             init("m", rnd(6)), init("v", np.abs(rnd(6)) + 0.5), init("fw", rnd(5, 6)), init("fb", rnd(5))]
    return make_model(nodes, [vi("x", [1, 3, 17, 17])], [vi("y", [1, 5])], inits)


def test_conv_net_matches_onnxruntime():
    check(conv_model(), {"x": rnd(1, 3, 17, 17)})


def test_fp16_conversion_is_close():
    check(conv_model(), {"x": rnd(1, 3, 17, 17)}, rtol=2e-2, atol=2e-2, compute_precision=milkit.precision.FLOAT16)


def test_dynamic_shape_chain_shape_gather_concat_reshape():
    # the exporters' idiom: reshape to (batch, -1) computed from Shape at run time
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    inits = [init("zero", np.array(0, np.int64)), init("ax0", np.array([0], np.int64)),
             init("minus1", np.array([-1], np.int64))]
    m = make_model(nodes, [vi("x", ["B", 3, 4])], [vi("y", ["B", 12])], inits)
    for b in (1, 3):
        check(m, {"x": rnd(b, 3, 4)})


def test_slice_split_transpose_concat_pad_and_friends():
    nodes = [
        helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["sl"]),
        helper.make_node("Transpose", ["sl"], ["t"], perm=[0, 2, 1]),
        helper.make_node("Split", ["t", "sizes"], ["a", "b"], axis=1),
        helper.make_node("Concat", ["b", "a"], ["c"], axis=1),
        helper.make_node("Pad", ["c", "pads", "pv"], ["p"], mode="constant"),
        helper.make_node("ReduceMean", ["p"], ["rm"], axes=[2], keepdims=0),
        helper.make_node("Unsqueeze", ["rm", "uax"], ["u"]),
        helper.make_node("Tile", ["u", "reps"], ["ti"]),
        helper.make_node("Where", ["cond", "ti", "zf"], ["y"]),
        helper.make_node("ArgMax", ["y"], ["am"], axis=1, keepdims=0),
    ]
    inits = [init("st", np.array([1, 0], np.int64)), init("en", np.array([2**62, -1], np.int64)),
             init("ax", np.array([1, 2], np.int64)), init("sp", np.array([1, 2], np.int64)),
             init("sizes", np.array([1, 2], np.int64)), init("pads", np.array([0, 1, 0, 0, 2, 1], np.int64)),
             init("pv", np.array(0.5, np.float32)), init("uax", np.array([-1], np.int64)),
             init("reps", np.array([1, 1, 3], np.int64)), init("zf", np.array(0.0, np.float32))]
    m = make_model(nodes, [vi("x", [2, 5, 6]), vi("cond", [1, 1, 3], TensorProto.BOOL)],
                   [vi("y", [2, 6, 3]), vi("am", [2, 3], TensorProto.INT64)], inits, opset=17)
    got = check(m, {"x": rnd(2, 5, 6), "cond": np.array([[[True, False, True]]])})
    assert got[1].dtype == np.int64


def test_int_ops_and_int64_outputs():
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Div", ["s", "d"], ["q"]),
             helper.make_node("Mod", ["s", "d"], ["r"], fmod=0), helper.make_node("Mod", ["s", "d"], ["fr"], fmod=1)]
    m = make_model(nodes, [vi("a", [6], TensorProto.INT64), vi("b", [6], TensorProto.INT64)],
                   [vi(o, [6], TensorProto.INT64) for o in ("q", "r", "fr")],
                   [init("d", np.array([3, -3, 4, -4, 5, 7], np.int64))])
    check(m, {"a": np.array([7, 7, -9, -9, 11, 0], np.int64), "b": np.array([1, 2, 3, 4, -20, 1], np.int64)})


def test_convert_writes_a_package_coremltools_loads(tmp_path):
    import coremltools as ct

    p = tmp_path / "mlp.onnx"
    onnx.save(mlp_model(), str(p))
    mlmodel = milkit.convert(str(p), minimum_deployment_target=milkit.target.iOS17,
                             compute_precision=milkit.precision.FLOAT32)
    x = rnd(3, 8)
    out = mlmodel.predict({"x": x})
    (want,) = milkit_run(mlp_model(), {"x": x})
    np.testing.assert_allclose(out["y"], want, rtol=1e-5, atol=1e-6)
    pkg = tmp_path / "mlp.mlpackage"
    mlmodel.save(str(pkg))
    m = ct.models.MLModel(str(pkg), skip_model_load=True)
    desc = m.get_spec().description
    assert [i.name for i in desc.input] == ["x"] and [o.name for o in desc.output] == ["y"]
    # a ModelProto converts the same way
    m2 = milkit.convert(mlp_model(), minimum_deployment_target=milkit.target.iOS17,
                        compute_precision=milkit.precision.FLOAT32)
    np.testing.assert_allclose(m2.predict({"x": x})["y"], want, rtol=1e-5, atol=1e-6)


def test_external_data_is_read_and_mapped(tmp_path):
    m = mlp_model()
    onnx.save_model(m, str(tmp_path / "ext.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    assert os.path.getsize(tmp_path / "weights.bin") > 0
    x = rnd(2, 8)
    (want,) = milkit_run(mlp_model(), {"x": x})
    (got,) = milkit_run(str(tmp_path / "ext.onnx"), {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_local_functions_are_inlined():
    fn = helper.make_function("custom", "AddRelu", ["a", "b"], ["y"],
                              [helper.make_node("Add", ["a", "b"], ["t"]), helper.make_node("Relu", ["t"], ["y"])],
                              [helper.make_opsetid("", 17)])
    graph = helper.make_graph([helper.make_node("AddRelu", ["x", "x"], ["y"], domain="custom")], "g",
                              [vi("x", [4])], [vi("y", [4])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("custom", 1)],
                          functions=[fn])
    m.ir_version = 10
    check(m, {"x": rnd(4)})


# ---- bad models ----------------------------------------------------------------------------

def test_every_unsupported_node_is_listed_in_one_error():
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("StringNormalizer", ["a"], ["b"], name="norm1"),
             helper.make_node("MyOp", ["b"], ["c"], domain="com.example", name="mine"),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "g", [vi("x", [2])], [vi("y", [2])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    with pytest.raises(ValueError) as e:
        milkit_run(m, {"x": rnd(2)})
    msg = str(e.value)
    assert "2 nodes" in msg and "'norm1' (StringNormalizer)" in msg and "'mine'" in msg and "com.example" in msg
    # a typed error: the labels are there without parsing the message
    assert isinstance(e.value, milkit.UnsupportedOpsError) and isinstance(e.value, milkit.MilkitValueError)
    assert len(e.value.nodes) == 2
    assert "'norm1' (StringNormalizer)" in e.value.nodes[0] and "'mine'" in e.value.nodes[1]


def test_truncated_and_garbage_models_raise_format_error(tmp_path):
    data = mlp_model().SerializeToString()
    for bad in (data[: len(data) // 2], b"\x08\x07garbage" * 10, b""):
        p = tmp_path / "bad.onnx"
        p.write_bytes(bad)
        with pytest.raises(milkit.FormatError):
            milkit.convert(str(p))


def test_cycle_and_undefined_inputs_raise_format_error():
    cyc = helper.make_graph([helper.make_node("Relu", ["b"], ["a"], name="n1"),
                             helper.make_node("Relu", ["a"], ["b"], name="n2"),
                             helper.make_node("Add", ["x", "a"], ["y"])], "g", [vi("x", [2])], [vi("y", [2])])
    m = helper.make_model(cyc, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(milkit.FormatError, match="cycle"):
        milkit_run(m, {"x": rnd(2)})
    und = helper.make_graph([helper.make_node("Add", ["x", "nope"], ["y"], name="adder")], "g",
                            [vi("x", [2])], [vi("y", [2])])
    m = helper.make_model(und, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(milkit.FormatError, match="'adder'.*'nope'"):
        milkit_run(m, {"x": rnd(2)})


def test_initializer_smaller_than_its_shape_raises_format_error():
    t = init("w", rnd(4, 4))
    t.raw_data = t.raw_data[:20]
    m = helper.make_model(helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                                            [vi("x", [1, 4])], [vi("y", [1, 4])], initializer=[t]),
                          opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(milkit.FormatError, match="initializer 'w'.*20 bytes.*needs 64"):
        milkit_run(m, {"x": rnd(1, 4)})


def test_external_data_leaving_the_folder_is_refused(tmp_path):
    outside = tmp_path / "secret.bin"
    outside.write_bytes(b"\0" * 64)
    sub = tmp_path / "model"
    sub.mkdir()
    t = TensorProto()
    t.name, t.data_type = "w", F
    t.dims.extend([4, 4])
    t.data_location = TensorProto.EXTERNAL
    for loc in ("../secret.bin", str(outside)):
        del t.external_data[:]
        e = t.external_data.add()
        e.key, e.value = "location", loc
        m = helper.make_model(helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                                                [vi("x", [1, 4])], [vi("y", [1, 4])], initializer=[t]),
                              opset_imports=[helper.make_opsetid("", 17)])
        onnx.save(m, str(sub / "m.onnx"))
        with pytest.raises(milkit.FormatError, match="leaves the model's folder|absolute path"):
            milkit.convert(str(sub / "m.onnx"))


def test_int64_constant_out_of_int32_range_is_an_error():
    m = make_model([helper.make_node("Add", ["x", "big"], ["y"])], [vi("x", [1], TensorProto.INT64)],
                   [vi("y", [1], TensorProto.INT64)], [init("big", np.array([2**40], np.int64))])
    with pytest.raises(ValueError, match="'big'.*does not fit in int32"):
        milkit_run(m, {"x": np.array([1], np.int64)})


def test_import_milkit_does_not_import_onnx():
    code = "import sys, milkit; assert 'onnx' not in sys.modules and 'onnxruntime' not in sys.modules, 'imported'"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_convert_inputs_rename_and_bound_dims():
    m = milkit.convert(mlp_model("batch"), minimum_deployment_target=milkit.target.iOS17,
                       compute_precision=milkit.precision.FLOAT32,
                       inputs=[milkit.TensorType(name="x", shape=(milkit.RangeDim(1, 16), 8))])
    desc = m.get_spec().description
    (inp,) = desc.input
    rng = inp.type.multiArrayType.shapeRange.sizeRanges
    assert (rng[0].lowerBound, rng[0].upperBound) == (1, 16) and (rng[1].lowerBound, rng[1].upperBound) == (8, 8)
    x = rnd(4, 8)
    (want,) = milkit_run(mlp_model("batch"), {"x": x})
    np.testing.assert_allclose(m.predict({"x": x})["y"], want, rtol=1e-5, atol=1e-6)
    e = milkit.convert(mlp_model("batch"), minimum_deployment_target=milkit.target.iOS17,
                       inputs=[milkit.TensorType(name="x", shape=(2, 8))])
    assert list(e.get_spec().description.input[0].type.multiArrayType.shape) == [2, 8]


# ---- opsets and attribute types, refused as onnxruntime refuses them -------------------------

def _relu_model(opsets):
    node = helper.make_node("Relu", ["x"], ["y"], name="act")
    graph = helper.make_graph([node], "g", [vi("x", [2])], [vi("y", [2])])
    return helper.make_model(graph, opset_imports=opsets)


def test_a_default_domain_node_without_a_default_domain_opset_is_refused():
    m = _relu_model([helper.make_opsetid("com.example", 1)])
    with pytest.raises(milkit.FormatError, match=r"node 'act' \(Relu\).*no opset of the default domain"):
        milkit.convert(m)


@pytest.mark.parametrize("domain,version", [("", onnx.defs.onnx_opset_version() + 1), ("ai.onnx", 99),
                                            ("ai.onnx.ml", 6)])
def test_an_opset_newer_than_milkit_knows_is_refused(domain, version):
    opsets = [helper.make_opsetid(domain, version)]
    if domain == "ai.onnx.ml":
        opsets.append(helper.make_opsetid("", 17))
    with pytest.raises(milkit.FormatError, match=f"opset {version} of domain '{domain or 'ai.onnx'}'.*knows opsets up to"):
        milkit.convert(_relu_model(opsets))


def test_the_newest_released_opset_is_known():
    milkit.convert(_relu_model([helper.make_opsetid("", onnx.defs.onnx_opset_version())]))


def _attr_model(op, attr_name, attr_value, node_name):
    node = helper.make_node(op, ["x"], ["y"], name=node_name)
    node.attribute.append(helper.make_attribute(attr_name, attr_value))
    graph = helper.make_graph([node], "g", [vi("x", [2, 3])], [vi("y", None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("op,attr_name,value,got,want", [
    ("Transpose", "perm", "10", "STRING", "INTS"),
    ("Transpose", "perm", [1.0, 0.0], "FLOATS", "INTS"),
    ("LeakyRelu", "alpha", 2, "INT", "FLOAT"),  # onnxruntime takes no INT for a FLOAT either
    ("Flatten", "axis", 1.0, "FLOAT", "INT"),
    ("Softmax", "axis", [1], "INTS", "INT"),
    ("EyeLike", "dtype", 1.0, "FLOAT", "INT"),  # an optional attribute without a default
])
def test_an_attribute_of_the_wrong_type_is_refused(op, attr_name, value, got, want):
    with pytest.raises(milkit.FormatError) as e:
        milkit.convert(_attr_model(op, attr_name, value, "bad_node"))
    msg = str(e.value)
    assert f"'bad_node' ({op})" in msg and f"'{attr_name}'" in msg and got in msg and want in msg


@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_resolves_the_entry_of_the_models_opset(opset):
    # before opset 13 Softmax normalizes over the flattened dims from axis on; from 13 along axis only
    node = helper.make_node("Softmax", ["x"], ["y"], axis=1)
    m = make_model([node], [vi("x", [2, 3, 4])], [vi("y", [2, 3, 4])], opset=opset)
    x = rnd(2, 3, 4)
    (y,) = check(m, {"x": x})
    axes = (1, 2) if opset == 11 else (1,)
    np.testing.assert_allclose(y.sum(axis=axes), np.ones_like(y.sum(axis=axes)), rtol=1e-5)


@pytest.mark.parametrize("opset", [10, 18])
def test_pad_resolves_the_entry_of_the_models_opset(opset):
    # opset 10: pads are an attribute; from 11 an input (and from 18 with axes)
    x = rnd(2, 3)
    if opset == 10:
        m = make_model([helper.make_node("Pad", ["x"], ["y"], pads=[0, 1, 0, 2], value=1.5)],
                       [vi("x", [2, 3])], [vi("y", [2, 6])], opset=opset)
    else:
        m = make_model([helper.make_node("Pad", ["x", "pads", "v", "axes"], ["y"])], [vi("x", [2, 3])], [vi("y", [2, 6])],
                       [init("pads", np.array([1, 2], np.int64)), init("v", np.array(1.5, np.float32)),
                        init("axes", np.array([1], np.int64))], opset=opset)
    (y,) = check(m, {"x": x})
    np.testing.assert_array_equal(y, np.pad(x, [(0, 0), (1, 2)], constant_values=1.5))


@pytest.mark.parametrize("attr_name,value", [
    ("mode", "bilinear"),  # ONNX calls it "linear"; a value outside the list is not guessed
    ("coordinate_transformation_mode", "half-pixel"),
    ("nearest_mode", "round"),
])
def test_resize_refuses_a_string_attribute_value_onnx_does_not_define(attr_name, value):
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], name="up")
    node.attribute.append(helper.make_attribute(attr_name, value))
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    graph = helper.make_graph([node], "g", [vi("x", [1, 1, 2, 2])], [vi("y", None)], [scales])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    with pytest.raises(milkit.FormatError) as e:
        milkit.convert(m)
    msg = str(e.value)
    assert "'up' (Resize)" in msg and f"'{attr_name}' is '{value}'" in msg and "not one of" in msg


@pytest.mark.parametrize("opset", [6, 11, 13])
def test_clip_resolves_the_entry_of_the_models_opset(opset):
    # before opset 11 the bounds are the attributes min / max; from 11 the inputs 1 and 2
    x = rnd(3, 4) * 3
    if opset == 6:
        node = helper.make_node("Clip", ["x"], ["y"], min=-0.5, max=1.25)
        m = make_model([node], [vi("x", [3, 4])], [vi("y", [3, 4])], opset=opset)
    else:
        node = helper.make_node("Clip", ["x", "lo", "hi"], ["y"])
        inits = [numpy_helper.from_array(np.array(-0.5, np.float32), "lo"),
                 numpy_helper.from_array(np.array(1.25, np.float32), "hi")]
        m = make_model([node], [vi("x", [3, 4])], [vi("y", [3, 4])], inits, opset=opset)
    (y,) = check(m, {"x": x})
    np.testing.assert_array_equal(y, np.clip(x, -0.5, 1.25))


@pytest.mark.parametrize("opset", [1, 10, 11])
def test_topk_resolves_the_entry_of_the_models_opset(opset):
    # before opset 10, k is an attribute; from 10 the input K
    x = rnd(2, 6)
    if opset == 1:
        node = helper.make_node("TopK", ["x"], ["v", "i"], k=3, axis=1)
        inits = []
    else:
        node = helper.make_node("TopK", ["x", "K"], ["v", "i"], axis=1)
        inits = [numpy_helper.from_array(np.array([3], np.int64), "K")]
    outs = [helper.make_tensor_value_info("v", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("i", TensorProto.INT64, [2, 3])]
    m = make_model([node], [vi("x", [2, 6])], outs, inits, opset=opset)
    v, _ = check(m, {"x": x})
    np.testing.assert_allclose(v, -np.sort(-x, axis=1)[:, :3], rtol=1e-6)


@pytest.mark.parametrize("opset", [9, 13])
def test_slice_resolves_the_entry_of_the_models_opset(opset):
    # before opset 10 starts / ends / axes are attributes (no steps); from 10 inputs
    x = rnd(4, 6)
    if opset == 9:
        node = helper.make_node("Slice", ["x"], ["y"], starts=[1, -4], ends=[3, 100], axes=[0, 1])
        inits = []
    else:
        node = helper.make_node("Slice", ["x", "s", "e", "a"], ["y"])
        inits = [numpy_helper.from_array(np.array(v, np.int64), k)
                 for k, v in (("s", [1, -4]), ("e", [3, 100]), ("a", [0, 1]))]
    m = make_model([node], [vi("x", [4, 6])], [vi("y", [2, 4])], inits, opset=opset)
    (y,) = check(m, {"x": x})
    np.testing.assert_array_equal(y, x[1:3, -4:])
