"""The interpreter's activation kernels against torch.nn.functional (computed in float64) or the
op's numpy formula: fp32 and fp16 programs, every gelu mode, softmax on every axis, per-channel
prelu / softplus_parametric, parameters broadcast to x, NaN / inf, empty and symbolic shapes."""

from __future__ import annotations

import math
from typing import Any, Callable

import milkit as ct
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from support.exec_util import assert_close, rand, run_child, run_op

Ref = Callable[[torch.Tensor], torch.Tensor]
def exact(f: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """`f` of fp32 x in float64, warnings silenced. The references use the stable forms of the
    functions (0.5 x (1 + erf) is 0 in float64 where gelu is 1e-30)."""

    def g(x: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return f(x.astype(np.float64))

    return g


def gelu_tanh_arg(x: np.ndarray) -> np.ndarray:
    """2 sqrt(2 / pi) (x + 0.044715 x^3), the argument of gelu TANH_APPROXIMATION's exp."""
    return 2 * np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)


# Ops whose fp32 result cannot be closer than the rounding of an exp argument computed in fp32
# (arg * 2^-24 relative per rounding, ~80 far in gelu's tail): their tolerance grows with it.
ARG_ROUNDING: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "gelu_tanh": lambda x: np.abs(gelu_tanh_arg(x.astype(np.float64))),
    "gelu_sigmoid": lambda x: np.abs(1.702 * x.astype(np.float64)),
}


def assert_rel(name: str, x: np.ndarray, got: np.ndarray, want: np.ndarray, rtol: float) -> None:
    """|got - want| <= rtol |want| (+ what rounding the exp argument costs for `name`); NaN where
    the reference has NaN, infinities equal."""
    tol = np.full(x.shape, rtol)
    if name in ARG_ROUNDING:
        with np.errstate(all="ignore"):
            tol = tol + 2.5e-7 * np.nan_to_num(ARG_ROUNDING[name](x), posinf=0.0)
    want32 = want.astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want32))
    ok = np.isnan(want32) | (got == want32)
    with np.errstate(all="ignore"):
        err = np.abs(got.astype(np.float64) - want)
        ok |= err <= tol * np.abs(want) + 1e-37
    assert ok.all(), f"{name}: {np.count_nonzero(~ok)} mismatches, x={x[~ok][:5]}, got={got[~ok][:5]}, want={want[~ok][:5]}"


_erfc = np.vectorize(math.erfc, otypes=[np.float64])

# ops of x alone (gelu by mode): (op, params, torch reference, exact reference on fp32 x)
UNARY: dict[str, tuple[str, dict[str, Any], Ref, Callable[[np.ndarray], np.ndarray]]] = {
    "relu": ("relu", {}, F.relu, exact(lambda x: np.maximum(x, 0.0))),
    "relu6": ("relu6", {}, F.relu6, exact(lambda x: np.minimum(np.maximum(x, 0.0), 6.0))),
    "sigmoid": ("sigmoid", {}, torch.sigmoid, exact(lambda x: 1 / (1 + np.exp(-x)))),
    "silu": ("silu", {}, F.silu, exact(lambda x: x / (1 + np.exp(-x)))),
    "softsign": ("softsign", {}, F.softsign, exact(lambda x: x / (1 + np.abs(x)))),
    "softplus": ("softplus", {}, lambda t: F.softplus(t, threshold=1000), exact(lambda x: np.logaddexp(0, x))),
    "gelu_exact": ("gelu", {"mode": "EXACT"}, F.gelu, exact(lambda x: 0.5 * x * _erfc(-x / np.sqrt(2)))),
    "gelu_default": ("gelu", {}, F.gelu, exact(lambda x: 0.5 * x * _erfc(-x / np.sqrt(2)))),
    "gelu_tanh": ("gelu", {"mode": "TANH_APPROXIMATION"}, lambda t: F.gelu(t, approximate="tanh"),
                  exact(lambda x: x / (1 + np.exp(-gelu_tanh_arg(x))))),
    "gelu_sigmoid": ("gelu", {"mode": "SIGMOID_APPROXIMATION"}, lambda t: t * torch.sigmoid(1.702 * t),
                     exact(lambda x: x / (1 + np.exp(-1.702 * x)))),
}


def np_max(a: Any, b: Any) -> Any:
    return np.maximum(a, b)


# ops with alpha (and beta): (alpha, beta or None, reference on float64 arrays)
PARAM: dict[str, tuple[float, float | None, Callable[[np.ndarray, Any, Any], np.ndarray]]] = {
    "clamped_relu": (0.3, 2.5, lambda x, a, b: np.minimum(np.maximum(x, 0), b) + np.minimum(np.minimum(x, 0) * a, b)),
    "elu": (0.7, None, lambda x, a, b: F.elu(torch.from_numpy(x), float(a)).numpy()),
    "leaky_relu": (0.05, None, lambda x, a, b: F.leaky_relu(torch.from_numpy(x), float(a)).numpy()),
    "linear_activation": (1.5, -0.25, lambda x, a, b: a * x + b),
    "scaled_tanh": (1.7, 0.6, lambda x, a, b: a * np.tanh(b * x)),
    "sigmoid_hard": (0.2, 0.5, lambda x, a, b: np.minimum(np.maximum(a * x + b, 0), 1)),
    "thresholded_relu": (0.4, None, lambda x, a, b: np.where(x < a, 0, x)),
}

SHAPES = [(7,), (2, 3, 4), (1, 5, 2, 3), (300, 1001)]
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 1e-6, -1e-6, 0.5, -0.5, 3.0, -3.0, 10.0,
                    -10.0, 20.0, -20.0, 50.0, -50.0, 88.0, -88.0, 100.0, -100.0, 1e30, -1e30,
                    # where sigmoid's and silu's exp(-x) is held (x > 86.5: 1 + exp(-x) is 1) and
                    # where exp's own argument is (|x| > 104)
                    86.4, -86.4, 86.5, -86.5, 86.6, -86.6, 87.5, -87.5, 104.5, -104.5],
                   np.float32)


def torch_ref(f: Ref, x: np.ndarray) -> np.ndarray:
    return f(torch.from_numpy(x.astype(np.float64))).numpy()


def run(op: str, x: np.ndarray, **kw: Any) -> np.ndarray:
    return run_op(op, {"x": x}, **kw)[0]


# ---- ops of x alone ----------------------------------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_fp32(name: str, shape: tuple[int, ...]) -> None:
    op, params, f, ex = UNARY[name]
    x = rand(*shape, lo=-12, hi=12, seed=len(shape))
    got = run(op, x, **params)
    assert got.dtype == np.float32
    assert_rel(name, x, got, ex(x), rtol=1e-6)
    # and torch.nn.functional, away from the tails (where its float64 gelu cancels to 0)
    mid = np.abs(x) < 4
    assert_close(got[mid], torch_ref(f, x[mid]).astype(np.float32), rtol=2e-6, atol=1e-37)


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_fp16(name: str) -> None:
    op, params, f, _ = UNARY[name]
    x = rand(6, 40, lo=-8, hi=8, seed=3).astype(np.float16)
    got = run(op, x, **params)
    assert got.dtype == np.float16
    want = torch_ref(f, x).astype(np.float32).astype(np.float16)
    assert_close(got, want, rtol=1e-3, atol=6e-8)


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_special(name: str) -> None:
    """NaN propagates; inf, huge and tiny inputs give the exact results (a tail value that
    underflows in fp32 may be 0)."""
    op, params, f, ex = UNARY[name]
    got = run(op, SPECIAL, **params)
    assert_rel(name, SPECIAL, got, ex(SPECIAL), rtol=1e-6)
    # torch agrees on which inputs give NaN (softsign(inf) and silu(-inf) are NaN there too)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(torch_ref(f, SPECIAL)))


def test_fp16_extremes() -> None:
    x = np.array([65504, -65504, 11.1, -11.1, 6e-8, -6e-8, 0], np.float16)
    np.testing.assert_array_equal(run("relu", x), np.maximum(x, 0))
    np.testing.assert_array_equal(run("relu6", x), np.minimum(np.maximum(x, 0), 6))
    np.testing.assert_array_equal(run("sigmoid", x)[:2], [1, 0])
    np.testing.assert_array_equal(run("silu", x)[:2], [65504, 0])
    np.testing.assert_array_equal(run("softplus", x)[:2], [65504, 0])
    soft = run("softmax", x[None, :4].astype(np.float16))
    np.testing.assert_array_equal(soft, [[1, 0, 0, 0]])


def test_gelu_tails() -> None:
    """Far tails keep their relative accuracy (no 1 + erf(x) or 1 + tanh(u) cancellation)."""
    x = np.array([-5, -7, -9, -12, -13.5, 5, 9], np.float32)
    x64 = x.astype(np.float64)
    want = np.array([0.5 * v * math.erfc(-v / np.sqrt(2)) for v in x64])
    assert_close(run("gelu", x), want.astype(np.float32), rtol=2e-6, atol=1e-44)  # -13.5: subnormal
    u2 = 2 * np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64**3)
    assert_close(run("gelu", x, mode="TANH_APPROXIMATION"), (x64 / (1 + np.exp(-u2))).astype(np.float32), rtol=1e-5,
                 atol=0)


def test_gelu_bad_mode() -> None:
    with pytest.raises(Exception, match="mode"):
        run("gelu", rand(3), mode="ERF")


# ---- ops with alpha / beta ---------------------------------------------------------------------

def param_ref(op: str, x: np.ndarray, a: Any, b: Any) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(PARAM[op][2](x.astype(np.float64), np.float64(a), None if b is None else np.float64(b)))


def param_kw(op: str, dtype: Any = np.float32) -> dict[str, Any]:
    a, b, _ = PARAM[op]
    kw = {"alpha": dtype(a)}
    if b is not None:
        kw["beta"] = dtype(b)
    return kw


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("op", list(PARAM))
def test_param_fp32(op: str, shape: tuple[int, ...]) -> None:
    x = rand(*shape, lo=-6, hi=6, seed=len(shape) + 10)
    got = run(op, x, **param_kw(op))
    a, b, _ = PARAM[op]
    assert got.dtype == np.float32
    assert_close(got, param_ref(op, x, np.float32(a), None if b is None else np.float32(b)).astype(np.float32),
                 rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("opset", [ct.target.iOS15, ct.target.iOS17], ids=str)
@pytest.mark.parametrize("op", list(PARAM))
def test_param_fp16(op: str, opset: Any) -> None:
    """fp16 x with fp16 parameters (iOS15's domain T), or fp32 ones (iOS17's domain U)."""
    pdt = np.float16 if opset == ct.target.iOS15 else np.float32
    x = rand(5, 24, lo=-6, hi=6, seed=4).astype(np.float16)
    got = run(op, x, opset=opset, **param_kw(op, pdt))
    a, b, _ = PARAM[op]
    want = param_ref(op, x, pdt(a), None if b is None else pdt(b)).astype(np.float32).astype(np.float16)
    assert got.dtype == np.float16
    assert_close(got, want, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("op", list(PARAM))
def test_param_fp16_alpha_fp32_x(op: str) -> None:
    """iOS17: fp16 parameters with an fp32 x."""
    x = rand(4, 9, lo=-6, hi=6, seed=5)
    got = run(op, x, **param_kw(op, np.float16))
    a, b, _ = PARAM[op]
    want = param_ref(op, x, np.float16(a), None if b is None else np.float16(b)).astype(np.float32)
    assert_close(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("op", list(PARAM))
def test_param_special(op: str) -> None:
    got = run(op, SPECIAL, **param_kw(op))
    a, b, _ = PARAM[op]
    want = param_ref(op, SPECIAL, np.float32(a), None if b is None else np.float32(b)).astype(np.float32)
    assert_close(got, want, rtol=1e-6, atol=1e-30)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


@pytest.mark.parametrize("op", ["clamped_relu", "linear_activation", "thresholded_relu", "sigmoid_hard"])
def test_param_tensors(op: str) -> None:
    """Tensor parameters broadcast to x, as the numpy formulas do."""
    x = rand(3, 4, 5, lo=-4, hi=4, seed=6)
    alpha = rand(4, 1, lo=0.1, hi=1, seed=7)
    beta = rand(5, lo=0.5, hi=3, seed=8)
    kw: dict[str, Any] = {"alpha": alpha}
    if PARAM[op][1] is not None:
        kw["beta"] = beta
    got = run(op, x, **kw)
    with np.errstate(all="ignore"):
        want = PARAM[op][2](x.astype(np.float64), alpha.astype(np.float64), beta.astype(np.float64))
    assert_close(got, want.astype(np.float32), rtol=1e-6, atol=1e-7)


def test_thresholded_relu_boundary() -> None:
    """x == alpha is kept (y[y < alpha] = 0)."""
    x = np.array([0.5, 0.4999, 0.5001, -1, np.nan], np.float32)
    np.testing.assert_array_equal(run("thresholded_relu", x, alpha=np.float32(0.5)),
                                  np.array([0.5, 0, 0.5001, 0, np.nan], np.float32))


def test_elu_near_zero() -> None:
    """elu keeps relative accuracy for tiny negative x (expm1, not exp(x) - 1)."""
    x = -(10.0 ** -np.arange(1, 12, dtype=np.float32))
    assert_close(run("elu", x, alpha=np.float32(2)), (2 * np.expm1(x.astype(np.float64))).astype(np.float32),
                 rtol=1e-6, atol=0)


# ---- per-channel parameters --------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5), (1, 4, 2, 3, 2), (2, 16, 40, 40)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_prelu(shape: tuple[int, ...], dtype: Any) -> None:
    """alpha along dim 1 (rank 3 and 5 need one value repeated)."""
    x = rand(*shape, lo=-3, hi=3, seed=9).astype(dtype)
    c = shape[1]
    alpha = rand(c, lo=0.05, hi=0.5, seed=10).astype(dtype)
    if len(shape) != 4:
        alpha[:] = alpha[0]
    got = run("prelu", x, alpha=alpha)
    want = F.prelu(torch.from_numpy(x.astype(np.float64)), torch.from_numpy(alpha.astype(np.float64))).numpy()
    assert got.dtype == dtype
    if dtype == np.float16:
        assert_close(got, want.astype(np.float32).astype(np.float16), rtol=1e-3, atol=6e-8)
    else:
        assert_close(got, want.astype(np.float32), rtol=1e-7, atol=0)


def test_prelu_special() -> None:
    x = np.broadcast_to(SPECIAL[None, None, :], (1, 2, SPECIAL.size)).reshape(1, 2, -1, 1).copy()
    alpha = np.array([0.25, 0.0], np.float32)
    got = run("prelu", x, alpha=alpha)
    with np.errstate(all="ignore"):
        want = np.maximum(x, 0) + np.minimum(x, 0) * alpha[None, :, None, None]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5), (1, 2, 2, 3, 2), (2, 8, 30, 30)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_softplus_parametric(shape: tuple[int, ...], dtype: Any) -> None:
    """alpha * log(1 + exp(beta * x)) with alpha and beta along dim 1; beta * x up to 120 (no
    overflow: the stable form log1p(exp(-|z|)) + max(z, 0)); torch's softplus for beta * x."""
    x = rand(*shape, lo=-20, hi=20, seed=11).astype(dtype)
    c = shape[1]
    alpha = rand(c, lo=0.2, hi=2, seed=12).astype(dtype)
    beta = rand(c, lo=-6, hi=6, seed=13).astype(dtype)
    got = run("softplus_parametric", x, alpha=alpha, beta=beta)
    bshape = (1, c) + (1,) * (len(shape) - 2)
    z = (x.astype(np.float32) * beta.astype(np.float32).reshape(bshape)).astype(np.float64)  # rounded as in fp32
    want = alpha.astype(np.float64).reshape(bshape) * np.logaddexp(0, z)
    assert got.dtype == dtype
    if dtype == np.float16:
        assert_close(got, want.astype(np.float32).astype(np.float16), rtol=2e-3, atol=1e-6)
    else:
        assert_close(got, want.astype(np.float32), rtol=1e-6, atol=1e-37)
        sp = F.softplus(torch.from_numpy(z), threshold=1000).numpy() * alpha.astype(np.float64).reshape(bshape)
        assert_close(got, sp.astype(np.float32), rtol=1e-6, atol=1e-37)


# ---- softmax -----------------------------------------------------------------------------------

SOFTMAX_CASES = [((5,), -1), ((5,), 0), ((3, 7), 0), ((3, 7), 1), ((3, 7), -2), ((2, 3, 4, 5), 0), ((2, 3, 4, 5), 1),
                 ((2, 3, 4, 5), 2), ((2, 3, 4, 5), -1), ((2, 5, 1100), 1), ((2, 5, 1100), -2), ((1, 3000), -1),
                 ((64, 1000), 1), ((64, 1000), 0), ((3, 1, 4), 1), ((7, 9), -1)]


@pytest.mark.parametrize("shape,axis", SOFTMAX_CASES, ids=str)
def test_softmax(shape: tuple[int, ...], axis: int) -> None:
    x = rand(*shape, lo=-10, hi=10, seed=len(shape))
    got = run("softmax", x, axis=axis)
    want = torch.softmax(torch.from_numpy(x.astype(np.float64)), dim=axis).numpy()
    assert_close(got, want.astype(np.float32), rtol=2e-6, atol=1e-37)


def test_softmax_default_axis_and_fp16() -> None:
    x = rand(4, 6, 9, lo=-5, hi=5, seed=14)
    want = torch.softmax(torch.from_numpy(x.astype(np.float64)), dim=-1).numpy().astype(np.float32)
    assert_close(run("softmax", x), want, rtol=2e-6, atol=1e-37)
    x16 = x.astype(np.float16)
    for axis in (0, 1, -1):
        want16 = torch.softmax(torch.from_numpy(x16.astype(np.float64)), dim=axis).numpy()
        got16 = run("softmax", x16, axis=axis)
        assert got16.dtype == np.float16
        assert_close(got16, want16.astype(np.float32).astype(np.float16), rtol=1e-3, atol=6e-8)


def test_softmax_large_and_masked() -> None:
    """Large magnitudes are stable (x - max); -inf entries (a mask) give 0; a NaN, +inf or an
    all -inf row gives NaN like numpy's formula."""
    x = rand(6, 20, lo=-1, hi=1, seed=15) * 1000
    x[1, 5:] = -np.inf
    x[2, 3] = np.nan
    x[3, 0] = np.inf
    x[4, :] = -np.inf
    got = run("softmax", x, axis=-1)
    with np.errstate(all="ignore"):
        e = np.exp(x - np.max(x, axis=-1, keepdims=True))
        want = e / e.sum(axis=-1, keepdims=True)
    assert_close(got, want, rtol=2e-6, atol=1e-37)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got[2:5]).all() and not np.isnan(got[[0, 1, 5]]).any()
    # and along a non-last axis
    got0 = run("softmax", np.ascontiguousarray(x.T), axis=0)
    np.testing.assert_array_equal(np.isnan(got0), np.isnan(want.T))
    assert_close(got0, want.T, rtol=2e-6, atol=1e-37)


def test_softmax_sums_to_one() -> None:
    x = rand(8, 32000, lo=-30, hi=30, seed=16)
    got = run("softmax", x)
    assert_close(got.astype(np.float64).sum(axis=-1), np.ones(8), rtol=1e-5, atol=0)


def test_softmax_bad_axis() -> None:
    with pytest.raises(Exception, match="axis"):
        run("softmax", rand(2, 3), axis=2)


# ---- shapes ------------------------------------------------------------------------------------

ALL_OPS: list[tuple[str, dict[str, Any]]] = [
    *[(op, params) for op, params, _, _ in UNARY.values()],
    *[(op, param_kw(op)) for op in PARAM],
    ("softmax", {"axis": -1}),
    ("softmax", {"axis": 0}),
]


@pytest.mark.parametrize("op,params", ALL_OPS, ids=str)
def test_empty_and_symbolic(op: str, params: dict[str, Any]) -> None:
    for shape in [(0,), (0, 4), (3, 0)]:
        got = run(op, np.zeros(shape, np.float32), **params)
        assert got.shape == shape and got.dtype == np.float32
    x = rand(3, 5, lo=-3, hi=3, seed=17)
    np.testing.assert_array_equal(run_op(op, {"x": x}, symbolic=True, **params)[0], run(op, x, **params))


@pytest.mark.parametrize("op", ["prelu", "softplus_parametric"])
def test_channel_symbolic_other_dims(op: str) -> None:
    """Only dim 1 has to be known (it sizes alpha); the others may be symbols."""
    from milkit import Builder as mb
    from milkit import get_new_symbol

    x = rand(2, 3, 4, 5, lo=-3, hi=3, seed=18)
    alpha = np.array([0.1, 0.2, 0.3], np.float32)
    beta = np.array([0.5, 1.0, 2.0], np.float32)
    kw: dict[str, Any] = {"alpha": alpha} if op == "prelu" else {"alpha": alpha, "beta": beta}
    spec = mb.TensorSpec(shape=(get_new_symbol(), 3, get_new_symbol(), get_new_symbol()))
    prog = mb.program(input_specs=[spec], opset_version=ct.target.iOS18)(lambda x: getattr(mb, op)(x=x, **kw))
    got = list(ct.run(prog, {list(prog.functions["main"].inputs)[0]: x}).values())[0]
    np.testing.assert_array_equal(got, run(op, x, **kw))


def _activation_bits() -> dict:
    """Outputs of the vectorized activations and softmax on a fixed input (odd length: the tails)."""
    x = np.linspace(-12, 12, 4099, dtype=np.float32).reshape(1, 4099)
    outs = {}
    for op, kw in [("gelu", {"mode": "EXACT"}), ("gelu", {"mode": "TANH_APPROXIMATION"}), ("sigmoid", {}),
                   ("silu", {}), ("tanh", {}), ("softplus", {}), ("elu", {"alpha": 0.7}), ("softmax", {"axis": -1})]:
        outs[f"{op}{kw}"] = run(op, x, **kw)
    return outs


def test_avx512_and_avx2_same_bits() -> None:
    """The 16-lane kernels make the operations of the 8-lane ones (AVX-512 forced off in a child)."""
    import os
    import pickle

    code = (
        "import importlib.util, pickle, sys\n"
        f"sys.path.insert(0, {os.path.dirname(os.path.dirname(__file__))!r})\n"
        f"spec = importlib.util.spec_from_file_location('ta', {__file__!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "sys.stdout.buffer.write(pickle.dumps(m._activation_bits()))\n")
    r = run_child(code, {"MILKIT_NO_AVX512": "1"}, text=False)
    assert r.returncode == 0, r.stderr[-2000:]
    other = pickle.loads(r.stdout)
    for k, v in _activation_bits().items():
        np.testing.assert_array_equal(v, other[k], err_msg=k)
