"""common::fuse_gelu_exact and common::fuse_gelu_tanh_approximation against coremltools' own passes."""

import numpy as np
import pytest
from support.pass_parity import check_same_ops

DTYPES = [("fp32", np.float32), ("fp16", np.float16)]
SHAPES = [(2, 3), ("S", 3), ("S", "T")]


def _check(build, shape, dt, name, opset="iOS17", numbers=True):
    ops = check_same_ops(build, [(shape, dt)], name, opset=opset, numbers=numbers)
    return ops, ops


# ---- fuse_gelu_exact ----------------------------------------------------------------------------


def _gelu_exact(variant, npdt, first="div", extra=False, bad=False):
    def build(mb, x):
        if first == "div":
            d = mb.real_div(x=x, y=npdt(1.4142))
        else:
            d = mb.mul(x=x, y=npdt(0.70710678))
        e = mb.erf(x=d)
        a = mb.add(x=e, y=npdt(1.0 if not bad else 2.0))
        if variant == 1:
            m = mb.mul(x=a, y=npdt(0.5))
            out = mb.mul(x=m, y=x)
        elif variant == 2:
            m = mb.mul(x=x, y=a)
            out = mb.mul(x=npdt(0.5), y=m)
        else:
            h = mb.mul(x=npdt(0.5), y=x)
            out = mb.mul(x=h, y=a)
        if extra:
            return out, mb.relu(x=e)  # erf has a second consumer
        return mb.relu(x=out)

    return build


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("variant", [1, 2, 3])
@pytest.mark.parametrize("first", ["div", "mul"])
def test_fuse_gelu_exact(dt, npdt, variant, first):
    ct_ops, mk_ops = _check(_gelu_exact(variant, npdt, first), ("S", 4), dt, "common::fuse_gelu_exact")
    assert mk_ops == ["gelu", "relu"]


@pytest.mark.parametrize("variant", [1, 2, 3])
@pytest.mark.parametrize("kind", ["extra", "bad"])
def test_fuse_gelu_exact_negative(variant, kind):
    build = _gelu_exact(variant, np.float32, extra=kind == "extra", bad=kind == "bad")
    ct_ops, mk_ops = _check(build, (2, 4), "fp32", "common::fuse_gelu_exact")
    assert "gelu" not in mk_ops


def test_fuse_gelu_exact_output_is_function_output():
    def build(mb, x):
        e = mb.erf(x=mb.real_div(x=x, y=np.float32(1.41421)))
        return mb.mul(x=mb.mul(x=mb.add(x=e, y=np.float32(1.0)), y=np.float32(0.5)), y=x)

    ct_ops, mk_ops = _check(build, ("S",), "fp32", "common::fuse_gelu_exact")
    assert mk_ops == ["gelu"]


# ---- fuse_gelu_tanh_approximation ---------------------------------------------------------------


def _gelu_tanh(pattern, npdt, extra=False, c1=0.044715, swap=False):
    def build(mb, x):
        p = mb.pow(x=x, y=npdt(3.0))
        m1 = mb.mul(x=p, y=npdt(c1)) if swap else mb.mul(x=npdt(c1), y=p)
        a = mb.add(x=x, y=m1)
        m2 = mb.mul(x=npdt(0.7978845834732056), y=a)
        t = mb.tanh(x=m2)
        a1 = mb.add(x=t, y=npdt(1.0))
        if pattern == 1:
            m = mb.mul(x=npdt(0.5), y=a1)
            out = mb.mul(x=x, y=m)
        else:
            m = mb.mul(x=x, y=npdt(0.5))
            out = mb.mul(x=a1, y=m)
        if extra:
            return out, mb.sigmoid(x=t)
        return mb.relu(x=out)

    return build


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("pattern", [1, 2])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("swap", [False, True])
def test_fuse_gelu_tanh(dt, npdt, pattern, shape, swap):
    ct_ops, mk_ops = _check(_gelu_tanh(pattern, npdt, swap=swap), shape, dt,
                            "common::fuse_gelu_tanh_approximation")
    assert mk_ops == ["gelu", "relu"]


@pytest.mark.parametrize("pattern", [1, 2])
@pytest.mark.parametrize("kind", ["extra", "const"])
def test_fuse_gelu_tanh_negative(pattern, kind):
    build = _gelu_tanh(pattern, np.float32, extra=kind == "extra", c1=0.05 if kind == "const" else 0.044715)
    ct_ops, mk_ops = _check(build, ("S", 3), "fp32", "common::fuse_gelu_tanh_approximation")
    assert "gelu" not in mk_ops


def test_fuse_gelu_tanh_two_in_a_row():
    def build(mb, x):
        y = _gelu_tanh(1, np.float32)(mb, x)
        return _gelu_tanh(2, np.float32)(mb, y)

    ct_ops, mk_ops = _check(build, (2, 3), "fp32", "common::fuse_gelu_tanh_approximation")
    assert mk_ops == ["gelu", "relu", "gelu", "relu"]


def test_fuse_gelu_tanh_root_with_extra_consumer():
    def build(mb, x):
        return _gelu_tanh(1, np.float32)(mb, x), mb.sigmoid(x=x)

    ct_ops, mk_ops = _check(build, ("S", 3), "fp32", "common::fuse_gelu_tanh_approximation")
    assert "gelu" not in mk_ops


def test_fuse_gelu_exact_root_with_extra_consumer():
    def build(mb, x):
        return _gelu_exact(3, np.float32)(mb, x), mb.sigmoid(x=x)

    ct_ops, mk_ops = _check(build, ("S", 3), "fp32", "common::fuse_gelu_exact")
    assert "gelu" in mk_ops
