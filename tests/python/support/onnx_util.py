"""Helpers for the ONNX importer's tests: small models built with onnx.helper, run by milkit
(convert + interpreter) and by onnxruntime on the same inputs."""

from __future__ import annotations

from typing import Any, Dict, Sequence

import numpy as np


def vi(name: str, shape: Any, elem_type: int = 1) -> Any:
    """A value info of `name` with `shape` (None: unknown) and ONNX element type (FLOAT)."""
    from onnx import helper

    return helper.make_tensor_value_info(name, elem_type, shape)


def const(name: str, values: Any, dtype: Any = np.float32) -> Any:
    """An initializer `name` holding `values` as `dtype`."""
    from onnx import numpy_helper

    return numpy_helper.from_array(np.array(values, dtype), name)


def make_model(nodes: Sequence[Any], inputs: Sequence[Any], outputs: Sequence[Any],
               initializers: Sequence[Any] = (), opset: int = 17, name: str = "g") -> Any:
    from onnx import checker, helper

    graph = helper.make_graph(list(nodes), name, list(inputs), list(outputs), initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)
    checker.check_model(model)
    return model


def ort_run(model: Any, feed: Dict[str, np.ndarray]) -> list:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feed)


def milkit_run(model: Any, feed: Dict[str, np.ndarray], **kw: Any) -> tuple:
    import milkit.onnx_backend as backend

    return backend.prepare(model, **kw).run(feed)


def check(model: Any, feed: Dict[str, np.ndarray], rtol: float = 1e-4, atol: float = 1e-5, **kw: Any) -> tuple:
    """Runs both and compares every output (values, dtypes, shapes)."""
    want = ort_run(model, feed)
    got = milkit_run(model, feed, **kw)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape, (g.shape, w.shape)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        np.testing.assert_allclose(g.astype(np.float64) if g.dtype != np.bool_ else g,
                                   w.astype(np.float64) if w.dtype != np.bool_ else w, rtol=rtol, atol=atol)
    return got
