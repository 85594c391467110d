"""Rank-0 outputs of ONNX models.

The importer keeps a rank-0 ONNX output rank 0 in the MIL program and the model description
describes it as a multiarray with no shape, as coremltools' converter describes a rank-0 torch
output. ``MLModel.predict`` gives Core ML's view of any converted model, whatever its source:
Core ML's multiarrays have rank >= 1, so the value comes back with shape (1,), the same rule as
for torch programs (a user running the converted model on a device gets (1,), and predict shows
what the device returns). The ONNX backend API (``milkit.onnx_backend``), whose callers compare
with onnxruntime, keeps ONNX's shape ()."""

from __future__ import annotations

import milkit
import numpy as np
import pytest
from onnx import TensorProto, helper
from support.onnx_util import check, make_model

X = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5


def _model(node, out_type=TensorProto.FLOAT):
    return make_model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                      [helper.make_tensor_value_info("y", out_type, [])], opset=17)


MODELS = {
    "reduce_sum": lambda: _model(helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0)),
    "reduce_max": lambda: _model(helper.make_node("ReduceMax", ["x"], ["y"], keepdims=0)),
    "reduce_l2": lambda: _model(helper.make_node("ReduceL2", ["x"], ["y"], keepdims=0)),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_onnx_backend_keeps_rank_zero(name: str) -> None:
    (got,) = check(MODELS[name](), {"x": X})
    assert got.shape == ()


@pytest.mark.parametrize("name", sorted(MODELS))
def test_predict_returns_shape_one(name: str) -> None:
    model = MODELS[name]()
    (want,) = check(model, {"x": X})
    mm = milkit.convert(model, compute_precision=milkit.precision.FLOAT32)
    (got,) = mm.predict({"x": X}).values()
    assert got.shape == (1,)
    np.testing.assert_allclose(got[0], want, rtol=1e-6)
    (desc,) = mm.get_spec().description.output
    t = desc.type.multiArrayType
    assert list(t.shape) == [] and t.WhichOneof("ShapeFlexibility") is None and t.dataType == t.FLOAT32
    (out,) = mm.get_program().functions["main"].outputs
    assert out.shape == ()
