"""Numeric tests of the random kernels: output shapes and dtypes, distribution statistics, seeds
(a seed gives the same values on every run; seed=-1, the default, gives fresh values each run) and
random_categorical's logits / probs modes."""

from __future__ import annotations

from typing import Any

import milkit as ct
import numpy as np
import pytest
from milkit import Builder as mb
from milkit import get_new_symbol, types
from support.exec_util import run_prog

N = 20000  # samples for the statistics: standard errors ~ 0.7% of the spread


def _prog(build: Any, specs: list | None = None, opset: Any = None) -> Any:
    specs = specs or [mb.TensorSpec(shape=(1,), dtype=types.fp32)]
    return mb.program(input_specs=specs, opset_version=opset or ct.target.iOS18)(build)


def _run(prog: Any, feed: dict | None = None) -> np.ndarray:
    fn = prog.functions["main"]
    feed = feed or {name: np.zeros((1,), np.float32) for name in fn.inputs}
    return list(ct.run(prog, feed).values())[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_uniform(dtype: Any) -> None:
    lo, hi = dtype(-2.0), dtype(3.0)
    out = _run(_prog(lambda x: mb.random_uniform(shape=[N // 100, 100], low=lo, high=hi, seed=7)))
    assert out.shape == (N // 100, 100) and out.dtype == dtype
    assert out.min() >= -2.0 and out.max() < 3.0
    assert abs(out.mean() - 0.5) < 0.05
    assert abs(out.std() - 5 / np.sqrt(12)) < 0.05
    hist, _ = np.histogram(out, bins=10, range=(-2, 3))
    assert np.all(np.abs(hist / N - 0.1) < 0.01)


def test_uniform_stays_below_high_in_fp16() -> None:
    """A sample that rounds to `high` in the output dtype is moved one step below it."""
    out = _run(_prog(lambda x: mb.random_uniform(shape=[N], low=np.float16(1.0), high=np.float16(1.001), seed=3)))
    assert out.dtype == np.float16
    assert np.all(out >= np.float16(1.0)) and np.all(out < np.float16(1.001))
    out = _run(_prog(lambda x: mb.random_uniform(shape=[8], low=np.float32(2.0), high=np.float32(2.0), seed=3)))
    np.testing.assert_array_equal(out, np.full(8, 2.0, np.float32))  # high == low gives low


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_normal(dtype: Any) -> None:
    out = _run(_prog(lambda x: mb.random_normal(shape=[N], mean=dtype(1.5), stddev=dtype(0.5), seed=11)))
    assert out.shape == (N,) and out.dtype == dtype
    o = out.astype(np.float64)
    assert abs(o.mean() - 1.5) < 0.02
    assert abs(o.std() - 0.5) < 0.02
    # shape: the fractions within 1 and 2 standard deviations
    assert abs(np.mean(np.abs(o - 1.5) < 0.5) - 0.6827) < 0.02
    assert abs(np.mean(np.abs(o - 1.5) < 1.0) - 0.9545) < 0.01
    assert abs(((o - 1.5) ** 3).mean() / 0.125) < 0.1  # skew ~ 0


def test_normal_defaults() -> None:
    out = _run(_prog(lambda x: mb.random_normal(shape=[N], seed=1)))
    assert out.dtype == np.float32
    assert abs(out.mean()) < 0.03 and abs(out.std() - 1) < 0.03


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("p", [0.5, 0.1, 0.0, 1.0])
def test_bernoulli(dtype: Any, p: float) -> None:
    out = _run(_prog(lambda x: mb.random_bernoulli(shape=[4, N // 4], prob=dtype(p), seed=5)))
    assert out.shape == (4, N // 4) and out.dtype == dtype
    assert set(np.unique(out)) <= {0.0, 1.0}
    assert abs(out.mean() - p) < 0.015


def test_bernoulli_default_prob() -> None:
    out = _run(_prog(lambda x: mb.random_bernoulli(shape=[N])))
    assert out.dtype == np.float32 and abs(out.mean() - 0.5) < 0.015


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_categorical_logits(dtype: Any) -> None:
    logits = np.array([[0.0, 1.0, 2.0, -1.0], [3.0, 0.0, 0.0, -np.inf]], dtype)
    out = _run(_prog(lambda x: mb.random_categorical(x=logits, size=N, seed=9)))
    assert out.shape == (2, N) and out.dtype == dtype
    for row, want in zip(out, _softmax(logits.astype(np.float64))):
        freq = np.bincount(row.astype(np.int64), minlength=4) / N
        np.testing.assert_allclose(freq, want, atol=0.015)
    assert not np.any(out[1] == 3)  # probability 0


def test_categorical_probs_mode() -> None:
    probs = np.array([[0.1, 0.0, 0.6, 0.3], [0.0, 0.0, 0.0, 1.0], [2.0, 2.0, 0.0, 0.0]], np.float32)
    out = _run(_prog(lambda x: mb.random_categorical(x=probs, mode="probs", size=N, seed=2)))
    assert out.shape == (3, N)
    for row, p in zip(out, probs):
        freq = np.bincount(row.astype(np.int64), minlength=4) / N
        np.testing.assert_allclose(freq, p / p.sum(), atol=0.015)


def test_categorical_symbolic_batch_and_default_size() -> None:
    x = np.log(np.array([[0.25, 0.75]] * 3 + [[1.0, 0.0]], np.float32) + 1e-30)
    B = get_new_symbol()
    prog = _prog(lambda x: mb.random_categorical(x=x, seed=4), [mb.TensorSpec(shape=(B, 2), dtype=types.fp32)])
    out = _run(prog, {"x": x})
    assert out.shape == (4, 1)
    assert out[3, 0] == 0.0


def test_shape_from_a_run_time_tensor() -> None:
    """shape computed at run time (mb.shape of a symbolic input): the kernel binds the symbols."""
    S = get_new_symbol()
    spec = [mb.TensorSpec(shape=(S, 3), dtype=types.fp32)]

    def build(x: Any) -> Any:
        return mb.add(x=x, y=mb.random_uniform(shape=mb.shape(x=x), seed=1))

    x = np.zeros((5, 3), np.float32)
    out = _run(_prog(build, spec), {"x": x})
    assert out.shape == (5, 3) and np.all((out >= 0) & (out < 1))
    # a shape input of unknown value: fresh symbols in the type, bound by the run
    (out,) = run_prog(lambda s: mb.random_normal(shape=s, seed=3), {"s": np.array([2, 0, 4], np.int32)})
    assert out.shape == (2, 0, 4)


@pytest.mark.parametrize("op, kw", [("random_uniform", {}), ("random_normal", {}), ("random_bernoulli", {}),
                                    ("random_categorical", {})])
def test_seed_determinism(op: str, kw: dict) -> None:
    def build(seed: int) -> Any:
        def f(x: Any) -> Any:
            if op == "random_categorical":
                return mb.random_categorical(x=np.zeros((4, 10), np.float32), size=50, seed=seed)
            return getattr(mb, op)(shape=[8, 25], seed=seed)
        return _prog(f)

    prog = build(42)
    a, b = _run(prog), _run(prog)
    np.testing.assert_array_equal(a, b)  # the same program twice
    np.testing.assert_array_equal(a, _run(build(42)))  # a rebuilt program
    ct.set_num_threads(1)
    try:
        np.testing.assert_array_equal(a, _run(build(42)))  # independent of the thread count
    finally:
        ct.set_num_threads(0)
    assert not np.array_equal(a, _run(build(43)))
    # seed = -1 (the default): fresh values on every run
    prog = build(-1)
    assert not np.array_equal(_run(prog), _run(prog))


def test_fp16_and_fp32_streams_match() -> None:
    """The same seed draws the same numbers in both dtypes (rounded)."""
    a = _run(_prog(lambda x: mb.random_normal(shape=[100], seed=8)))
    b = _run(_prog(lambda x: mb.random_normal(shape=[100], mean=np.float16(0), stddev=np.float16(1), seed=8)))
    np.testing.assert_array_equal(a.astype(np.float16), b)


def test_run_time_errors() -> None:
    with pytest.raises(ValueError, match=r"random_uniform.*'shape'.*negative"):
        run_prog(lambda s: mb.random_uniform(shape=s), {"s": np.array([2, -1], np.int32)})
    probs = np.array([[0.5, -0.1, 0.6]], np.float32)
    with pytest.raises(ValueError, match=r"random_categorical.*probs.*non-negative"):
        _run(_prog(lambda x: mb.random_categorical(x=probs, mode="probs")))
    with pytest.raises(ValueError, match=r"random_categorical.*empty distribution"):
        _run(_prog(lambda x: mb.random_categorical(x=np.zeros((1, 3), np.float32), mode="probs")))
    with pytest.raises(ValueError, match=r"random_categorical.*mode \"log\""):
        _run(_prog(lambda x: mb.random_categorical(x=np.zeros((1, 3), np.float32), mode="log")))
    with pytest.raises(ValueError, match=r"random_categorical.*nan"):
        _run(_prog(lambda x: mb.random_categorical(x=np.array([[0, np.nan]], np.float32))))
