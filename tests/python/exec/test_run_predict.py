"""milkit.run and MLModel.predict as users call them: coremltools' predict semantics, packages
written by milkit and by coremltools (FLOAT32 and FLOAT16 DEFAULT), states, threads, bad input."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Any

import milkit as ct
import numpy as np
import pytest
from milkit import Builder as mb
from milkit import get_new_symbol, types

W1 = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32) * 0.3
B1 = np.random.default_rng(1).standard_normal(16).astype(np.float32) * 0.1
W2 = np.random.default_rng(2).standard_normal((4, 16)).astype(np.float32) * 0.3


def _mlp_build(b: Any) -> Any:
    """Builds the same small network with either builder (milkit's or coremltools')."""
    def fn(x: Any) -> Any:
        h = b.relu(x=b.linear(x=x, weight=W1, bias=B1))
        h = b.layer_norm(x=h, axes=[-1], epsilon=1e-5)
        return b.softmax(x=b.linear(x=h, weight=W2), axis=-1)
    return fn


def _mlp_numpy(x: np.ndarray) -> np.ndarray:
    h = np.maximum(x @ W1.T + B1, 0)
    h = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5)
    z = h @ W2.T
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _mlp_prog(seq: Any = 5) -> Any:
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, seq, 8), dtype=types.fp32)], opset_version=ct.target.iOS17)
    def prog(x: Any) -> Any:
        return _mlp_build(mb)(x)
    return prog


def test_run_returns_outputs_by_name() -> None:
    x = np.random.default_rng(3).standard_normal((1, 5, 8)).astype(np.float32)
    out = ct.run(_mlp_prog(), {"x": x})
    assert list(out) == [_mlp_prog().functions["main"].outputs[0].name]
    (y,) = out.values()
    np.testing.assert_allclose(y, _mlp_numpy(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("precision", ["FLOAT32", "FLOAT16"])
def test_predict_converted_symbolic(tmp_path: Any, precision: str) -> None:
    S = get_new_symbol("S")
    model = ct.convert(_mlp_prog(S), minimum_deployment_target=ct.target.iOS17,
                       compute_precision=getattr(ct.precision, precision),
                       inputs=[ct.TensorType(name="x", shape=(1, ct.RangeDim(1, 64), 8))])
    tol = 1e-5 if precision == "FLOAT32" else 2e-2
    for n in (1, 7, 64):
        x = np.random.default_rng(n).standard_normal((1, n, 8)).astype(np.float32)
        (y,) = model.predict({"x": x}).values()
        np.testing.assert_allclose(y.astype(np.float32), _mlp_numpy(x), rtol=tol, atol=tol)
    with pytest.raises(ValueError, match="outside the range"):
        model.predict({"x": np.zeros((1, 65, 8), np.float32)})
    # a list of dicts runs each
    xs = [np.full((1, 2, 8), v, np.float32) for v in (0.5, -1.0)]
    res = model.predict([{"x": x} for x in xs])
    assert isinstance(res, list) and len(res) == 2
    path = str(tmp_path / "m.mlpackage")
    model.save(path)
    (y2,) = ct.models.MLModel(path).predict({"x": xs[0]}).values()
    np.testing.assert_array_equal(y2, list(res[0].values())[0])


def test_bad_inputs_name_the_input() -> None:
    model = ct.convert(_mlp_prog(), minimum_deployment_target=ct.target.iOS17)
    x = np.zeros((1, 5, 8), np.float32)
    with pytest.raises(ValueError, match=r"missing input 'x' \(the inputs are: x\)$"):
        model.predict({})
    # a feed under another name says so
    with pytest.raises(ValueError, match=r"missing input 'x' .*; the feed has 'input', which is not an input$"):
        model.predict({"input": x})
    with pytest.raises(ValueError, match=r"; the feed has 'a', 'b', which are not inputs$"):
        model.predict({"a": x, "b": x})
    with pytest.raises(ValueError, match="unknown input 'y'"):
        model.predict({"x": x, "y": x})
    with pytest.raises(ValueError, match="rank 2"):
        model.predict({"x": np.zeros((5, 8), np.float32)})
    with pytest.raises(ValueError, match="dim 1"):
        model.predict({"x": np.zeros((1, 6, 8), np.float32)})
    with pytest.raises(ValueError, match="cannot be cast safely"):
        model.predict({"x": x.astype(np.complex64)})
    # fp64 and int inputs are cast like coremltools does
    (a,) = model.predict({"x": x.astype(np.float64)}).values()
    (b,) = model.predict({"x": x.astype(np.int64)}).values()
    np.testing.assert_array_equal(a, b)


def test_int_inputs_checked_for_range() -> None:
    @mb.program(input_specs=[mb.TensorSpec(shape=(3,), dtype=types.int32)], opset_version=ct.target.iOS17)
    def prog(i: Any) -> Any:
        return mb.add(x=i, y=np.int32(1))

    (y,) = ct.run(prog, {"i": np.array([1, 2, 3], np.int64)}).values()
    np.testing.assert_array_equal(y, [2, 3, 4])
    with pytest.raises(ValueError, match="do not fit int32"):
        ct.run(prog, {"i": np.array([1, 2, 2**40], np.int64)})
    with pytest.raises(ValueError, match="cannot be cast safely"):
        ct.run(prog, {"i": np.array([1.5, 2, 3])})


def test_threads_share_a_model() -> None:
    model = ct.convert(_mlp_prog(), minimum_deployment_target=ct.target.iOS17)
    xs = [np.random.default_rng(i).standard_normal((1, 5, 8)).astype(np.float32) for i in range(8)]
    want = [list(model.predict({"x": x}).values())[0] for x in xs]
    errors: list[str] = []

    def worker(k: int) -> None:
        for _ in range(20):
            i = (k * 3 + _) % len(xs)
            (y,) = model.predict({"x": xs[i]}).values()
            if not np.array_equal(y, want[i]):
                errors.append(f"thread {k} input {i}")

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def test_num_threads_setting() -> None:
    old = ct.num_threads()
    try:
        ct.set_num_threads(1)
        assert ct.num_threads() == 1
        x = np.random.default_rng(9).standard_normal((1, 5, 8)).astype(np.float32)
        (y1,) = ct.run(_mlp_prog(), {"x": x}).values()
        (y2,) = ct.run(_mlp_prog(), {"x": x}, num_threads=2).values()
        np.testing.assert_allclose(y1, y2, rtol=1e-6)
    finally:
        ct.set_num_threads(old)
    out = subprocess.run([sys.executable, "-c", "import milkit; print(milkit.num_threads())"],
                         env={**os.environ, "MILKIT_NUM_THREADS": "3"}, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "3"


def test_stateful_model_predict() -> None:
    @mb.program(input_specs=[mb.StateTensorSpec(shape=(2, 3), dtype=types.fp16),
                             mb.TensorSpec(shape=(2, 3), dtype=types.fp16)], opset_version=ct.target.iOS18)
    def prog(cache: Any, x: Any) -> Any:
        total = mb.add(x=mb.read_state(input=cache), y=x)
        mb.coreml_update_state(state=cache, value=total)
        return mb.mul(x=total, y=np.float16(2))

    model = ct.convert(prog, minimum_deployment_target=ct.target.iOS18)
    state = model.make_state()
    x = np.ones((2, 3), np.float16)
    for k in (1, 2, 3):
        (y,) = model.predict({"x": x}, state=state).values()
        np.testing.assert_array_equal(y, np.full((2, 3), 2 * k, np.float16))
    np.testing.assert_array_equal(state.read_state("cache"), np.full((2, 3), 3, np.float16))
    (y,) = model.predict({"x": x}, state=model.make_state()).values()
    np.testing.assert_array_equal(y, np.full((2, 3), 2, np.float16))
    with pytest.raises(ValueError, match="make_state"):
        model.predict({"x": x})


@pytest.mark.parametrize("precision", ["FLOAT32", "FLOAT16"])
def test_predict_package_written_by_coremltools(tmp_path: Any, precision: str) -> None:
    import coremltools as cmt
    from coremltools.converters.mil import Builder as cmb
    from coremltools.converters.mil.mil import types as ctypes

    @cmb.program(input_specs=[cmb.TensorSpec(shape=(1, 5, 8), dtype=ctypes.fp32)],
                 opset_version=cmt.target.iOS17)
    def prog(x: Any) -> Any:
        return _mlp_build(cmb)(x)

    m = cmt.convert(prog, convert_to="mlprogram", minimum_deployment_target=cmt.target.iOS17,
                    compute_precision=getattr(cmt.precision, precision), skip_model_load=True)
    path = str(tmp_path / "ct.mlpackage")
    m.save(path)
    x = np.random.default_rng(4).standard_normal((1, 5, 8)).astype(np.float32)
    (y,) = ct.models.MLModel(path).predict({"x": x}).values()
    tol = 1e-5 if precision == "FLOAT32" else 2e-2
    np.testing.assert_allclose(y.astype(np.float32), _mlp_numpy(x), rtol=tol, atol=tol)


def test_results_are_read_only_views() -> None:
    x = np.random.default_rng(5).standard_normal((1, 5, 8)).astype(np.float32)
    (y,) = ct.run(_mlp_prog(), {"x": x}).values()
    assert not y.flags.writeable
    y2 = y.copy()
    y2[0, 0, 0] = 1.0


def test_enumerated_shapes_are_enforced() -> None:
    S = get_new_symbol("S")
    model = ct.convert(_mlp_prog(S), minimum_deployment_target=ct.target.iOS17,
                       inputs=[ct.TensorType(name="x", shape=ct.EnumeratedShapes(shapes=[(1, 2, 8), (1, 4, 8)]))])
    for n in (2, 4):
        (y,) = model.predict({"x": np.ones((1, n, 8), np.float32)}).values()
        assert y.shape == (1, n, 4)
    with pytest.raises(ValueError, match="not one of the model's enumerated shapes"):
        model.predict({"x": np.ones((1, 3, 8), np.float32)})


_CACHE_CHILD = r"""
import json, sys
import numpy as np
from milkit import Builder as mb, _core
import milkit as ct

@mb.program(input_specs=[mb.TensorSpec(shape=(256, 512))])
def prog(x):
    return mb.relu(x=mb.add(x=mb.mul(x=x, y=2.0), y=1.0))

fn = prog.functions["main"]
plan = _core.Plan(fn)
x = np.linspace(-1, 1, 256 * 512, dtype=np.float32).reshape(256, 512)
outs = [plan.run({"x": x})[0][1] for _ in range(3)]
same = all(np.array_equal(o, outs[0]) for o in outs)
print(json.dumps({"held": _core.buffer_cache_bytes(), "same": same,
                  "right": bool(np.array_equal(outs[0], np.maximum(x * 2 + 1, 0)))}))
"""


@pytest.mark.parametrize("limit_mb,expect", [(None, "some"), ("0", "none"), ("0.6", "at most")])
def test_buffer_cache(limit_mb: Any, expect: str) -> None:
    """Freed buffers of 64 KB or more (here 512 KB intermediates) are kept for the next run,
    within MILKIT_BUFFER_CACHE_MB (0 keeps none); reused buffers give the same results."""
    import json

    env = dict(os.environ)
    env.pop("MILKIT_BUFFER_CACHE_MB", None)
    if limit_mb is not None:
        env["MILKIT_BUFFER_CACHE_MB"] = limit_mb
    r = subprocess.run([sys.executable, "-c", _CACHE_CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["same"] and got["right"]
    asan = "libasan" in os.environ.get("LD_PRELOAD", "")  # the cache is off under AddressSanitizer
    if expect == "some" and not asan:
        assert got["held"] >= 256 * 512 * 4
    elif expect == "none" or asan:
        assert got["held"] == 0
    else:
        assert 0 < got["held"] <= 0.6 * 1024 * 1024
