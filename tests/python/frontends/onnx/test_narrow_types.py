"""ONNX element types Core ML has no tensors of (bfloat16, the float8 family, float4 e2m1, int4 /
int2) held exactly in fp32 / int32, BitCast's bit patterns, and operators expanded into their ONNX
function bodies: checked against ONNX's reference evaluator on many values, specials included
(the backend suite has only a few values per case)."""

from __future__ import annotations

import milkit
import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from support.onnx_util import make_model, milkit_run

F = TensorProto.FLOAT


def values() -> np.ndarray:
    """Every binade from tiny to huge, ties of the narrow formats, and the specials."""
    r = np.random.default_rng(3)
    mags = np.exp2(r.uniform(-20, 20, 400)).astype(np.float32)
    signs = np.where(r.random(400) < 0.5, -1, 1).astype(np.float32)
    ties = np.array([0.25 * k + 0.125 for k in range(-40, 40)] + [464, 480, 248, 61440, 57344, 6.5, 5, 7], np.float32)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 3.4e38, 1.5, -2.5], np.float32)
    return np.concatenate([mags * signs, ties, specials])


def same(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = a.astype(np.float32), b.astype(np.float32)
    return bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


NARROW_FLOATS = [TensorProto.BFLOAT16, TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FNUZ, TensorProto.FLOAT8E5M2,
                 TensorProto.FLOAT8E5M2FNUZ, TensorProto.FLOAT4E2M1]


@pytest.mark.parametrize("to", NARROW_FLOATS)
@pytest.mark.parametrize("saturate", [0, 1])
def test_cast_to_narrow_floats_rounds_like_the_reference(to, saturate):
    x = values()
    node = helper.make_node("Cast", ["x"], ["y"], to=to, saturate=saturate)
    m = make_model([node], [helper.make_tensor_value_info("x", F, [len(x)])],
                   [helper.make_tensor_value_info("y", to, [len(x)])], opset=23)
    (want,) = ReferenceEvaluator(m).run(None, {"x": x})
    (got,) = milkit_run(m, {"x": x})
    assert got.dtype == want.dtype
    bad = ~((got.astype(np.float32) == want.astype(np.float32)) | (np.isnan(got.astype(np.float32)) & np.isnan(want.astype(np.float32))))
    assert not bad.any(), (x[bad][:6], got[bad][:6], want[bad][:6])


@pytest.mark.parametrize("to", [TensorProto.INT4, TensorProto.UINT4, TensorProto.INT2, TensorProto.UINT2])
def test_cast_to_narrow_ints_truncates_and_wraps_like_the_reference(to):
    x = np.arange(-20, 20, 0.75, dtype=np.float32)
    node = helper.make_node("Cast", ["x"], ["y"], to=to)
    m = make_model([node], [helper.make_tensor_value_info("x", F, [len(x)])],
                   [helper.make_tensor_value_info("y", to, [len(x)])], opset=23)
    (want,) = ReferenceEvaluator(m).run(None, {"x": x})
    (got,) = milkit_run(m, {"x": x})
    np.testing.assert_array_equal(got.astype(np.int32), want.astype(np.int32))


def test_narrow_inputs_and_initializers_are_held_exactly():
    # a float8 input and a float8 initializer, added in fp32 and cast back to float8
    w = np.array([0.5, -3.0, 448.0, 0.0156], dtype=ml_dtypes.float8_e4m3fn)
    x = np.array([1.0, 2.0, -448.0, 0.0], dtype=ml_dtypes.float8_e4m3fn)
    nodes = [helper.make_node("Cast", ["x"], ["xf"], to=F), helper.make_node("Cast", ["w"], ["wf"], to=F),
             helper.make_node("Add", ["xf", "wf"], ["s"]), helper.make_node("Cast", ["s"], ["y"], to=TensorProto.FLOAT8E4M3FN)]
    init = onnx.numpy_helper.from_array(w, "w")
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT8E4M3FN, [4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FN, [4])], [init], opset=23)
    (want,) = ReferenceEvaluator(m).run(None, {"x": x})
    (got,) = milkit_run(m, {"x": x})
    assert got.dtype == want.dtype and same(got, want)


def test_the_backend_only_changes_storage_of_narrow_outputs():
    from milkit.onnx_backend import _to_narrow

    ok = _to_narrow(np.array([0.5, 448.0, np.nan], np.float32), "float8_e4m3fn")
    assert ok.dtype == ml_dtypes.float8_e4m3fn
    with pytest.raises(ValueError, match="not all float8_e4m3fn values"):
        _to_narrow(np.array([0.3], np.float32), "float8_e4m3fn")  # rounding is the program's job
    with pytest.raises(ValueError, match="not all int4 values"):
        _to_narrow(np.array([9], np.int32), "int4")


@pytest.mark.parametrize("src,dst,np_src,np_dst", [
    (F, TensorProto.INT32, np.float32, np.int32),
    (TensorProto.FLOAT16, TensorProto.INT16, np.float16, np.int16),
    (TensorProto.FLOAT16, TensorProto.UINT16, np.float16, np.uint16),
])
def test_bitcast_float_bit_patterns_both_ways(src, dst, np_src, np_dst):
    fi = np.finfo(np_src)
    x = np.array([0.0, -0.0, 1.0, -2.5, 3.75, np.inf, -np.inf, fi.max, -fi.max, fi.tiny, fi.smallest_subnormal,
                  -fi.smallest_subnormal * 3, 0.1, 1e-3], np_src)
    fwd = make_model([helper.make_node("BitCast", ["x"], ["y"], to=dst)], [helper.make_tensor_value_info("x", src, [len(x)])],
                     [helper.make_tensor_value_info("y", dst, [len(x)])], opset=26)
    (got,) = milkit_run(fwd, {"x": x})
    np.testing.assert_array_equal(got, x.view(np_dst))
    back = make_model([helper.make_node("BitCast", ["x"], ["y"], to=src)], [helper.make_tensor_value_info("x", dst, [len(x)])],
                      [helper.make_tensor_value_info("y", src, [len(x)])], opset=26)
    (rt,) = milkit_run(back, {"x": x.view(np_dst)})
    np.testing.assert_array_equal(rt.view(np_dst), x.view(np_dst))  # -0.0 and subnormals bit for bit


def test_bitcast_of_64_bit_types_is_refused():
    m = make_model([helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.INT64)],
                   [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.INT64, [2])], opset=26)
    with pytest.raises(ValueError, match="64-bit types are held in 32 bits"):
        milkit.frontends.onnx.import_model(m, int(milkit.target.iOS18))


def test_an_operator_with_a_schema_function_is_expanded_into_it():
    # CenterCropPad has no converter of its own: its ONNX function body is inlined
    assert "CenterCropPad" not in milkit.frontends.onnx.supported_ops()
    node = helper.make_node("CenterCropPad", ["x", "s"], ["y"], axes=[0, 1])
    s = onnx.numpy_helper.from_array(np.array([5, 7], np.int64), "s")
    m = make_model([node], [helper.make_tensor_value_info("x", F, [8, 4, 3])], [helper.make_tensor_value_info("y", F, [5, 7, 3])],
                   [s], opset=18)
    x = np.random.default_rng(0).standard_normal((8, 4, 3)).astype(np.float32)
    (want,) = ReferenceEvaluator(m).run(None, {"x": x})
    (got,) = milkit_run(m, {"x": x})
    np.testing.assert_array_equal(got, want)
    prog, _ = milkit.frontends.onnx.import_model(m, int(milkit.target.iOS18))
    assert "CenterCropPad" not in str(prog)


def test_operators_without_a_function_body_are_still_listed():
    node = helper.make_node("StringNormalizer", ["x"], ["y"], case_change_action="LOWER")
    m = make_model([node], [helper.make_tensor_value_info("x", TensorProto.STRING, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.STRING, [2])], opset=18)
    from milkit.frontends.onnx import _expand_schema_functions

    assert _expand_schema_functions(m) is None
    with pytest.raises(ValueError, match="StringNormalizer"):
        milkit.frontends.onnx.import_model(m, int(milkit.target.iOS18))


def test_an_unknown_domain_is_reported_with_its_name():
    node = helper.make_node("FusedGemm", ["x"], ["y"], domain="com.microsoft")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, [2])], [helper.make_tensor_value_info("y", F, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)])
    with pytest.raises(ValueError, match="com.microsoft"):
        milkit.frontends.onnx.import_model(m, int(milkit.target.iOS18))
