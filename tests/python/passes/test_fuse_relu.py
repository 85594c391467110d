"""common::fuse_leaky_relu, common::merge_consecutive_relus and common::prelu_to_lrelu against coremltools'
own passes."""

import numpy as np
import pytest
from support.pass_parity import check_same_ops

DTYPES = [("fp32", np.float32), ("fp16", np.float16)]
SHAPES = [(2, 3), ("S", 3), ("S", "T")]


def _check(build, shape, dt, name, opset="iOS17", numbers=True):
    ops = check_same_ops(build, [(shape, dt)], name, opset=opset, numbers=numbers)
    return ops, ops


# ---- fuse_leaky_relu ----------------------------------------------------------------------------


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("order", [0, 1])
def test_fuse_leaky_relu(dt, npdt, shape, order):
    def build(mb, x):
        m = mb.mul(x=x, y=npdt(0.2)) if order else mb.mul(x=npdt(0.3), y=x)
        a = mb.maximum(x=m, y=x) if order else mb.maximum(x=x, y=m)
        m2 = mb.mul(x=a, y=npdt(1.0))
        return mb.maximum(x=a, y=m2)  # function output, alpha 1 (inclusive bound)

    ct_ops, mk_ops = _check(build, shape, dt, "common::fuse_leaky_relu")
    assert mk_ops == ["leaky_relu", "leaky_relu"]


@pytest.mark.parametrize("kind", ["alpha", "extra", "other", "output", "tensor"])
def test_fuse_leaky_relu_negative(kind):
    def build(mb, x):
        alpha = {"alpha": 1.5, "tensor": np.array([0.2, 0.3, 0.4], np.float32)}.get(kind, 0.2)
        m = mb.mul(x=x, y=np.float32(alpha) if kind != "tensor" else alpha)
        other = mb.relu(x=x) if kind == "other" else x
        a = mb.maximum(x=m, y=other)
        if kind == "extra":
            return a, mb.relu(x=m)
        if kind == "output":
            return a, m
        return a

    ct_ops, mk_ops = _check(build, ("S", 3), "fp32", "common::fuse_leaky_relu")
    assert "leaky_relu" not in mk_ops


# ---- merge_consecutive_relus --------------------------------------------------------------------


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_merge_consecutive_relus(dt, npdt, shape):
    def build(mb, x):
        r = mb.relu(x=mb.relu(x=mb.relu(x=x)))
        s = mb.relu(x=mb.add(x=r, y=npdt(1.0)))
        return mb.relu(x=s)

    ct_ops, mk_ops = _check(build, shape, dt, "common::merge_consecutive_relus")
    assert mk_ops == ["relu", "add", "relu"]


def test_merge_consecutive_relus_negative():
    def build(mb, x):
        r = mb.relu(x=x)
        a = mb.relu(x=r)
        b = mb.sigmoid(x=r)  # r has two consumers
        r2 = mb.relu(x=b)
        return a, r2, mb.relu(x=r2)  # r2 is an output and is merged into

    ct_ops, mk_ops = _check(build, ("S", 3), "fp32", "common::merge_consecutive_relus")
    assert mk_ops == ["relu", "relu", "sigmoid", "relu"]


# ---- prelu_to_lrelu -----------------------------------------------------------------------------


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("shape", [(1, 3, 4, 4), ("S", 3, 2, "T")])
def test_prelu_to_lrelu(dt, npdt, shape):
    def build(mb, x):
        a = mb.prelu(x=x, alpha=np.array([0.25, 0.25, 0.25], npdt))
        b = mb.prelu(x=a, alpha=np.array([0.25, 0.5, 0.25], npdt))  # differs: kept
        return mb.prelu(x=b, alpha=np.array([0.1, 0.1, 0.1], npdt))

    ct_ops, mk_ops = _check(build, shape, dt, "common::prelu_to_lrelu")
    assert mk_ops == ["leaky_relu", "prelu", "leaky_relu"]


def test_fuse_leaky_relu_alpha_zero():
    def build(mb, x):
        return mb.maximum(x=mb.mul(x=x, y=np.float32(0.0)), y=x)

    ct_ops, mk_ops = _check(build, ("S",), "fp32", "common::fuse_leaky_relu")
    assert mk_ops == ["leaky_relu"]


def test_merge_consecutive_relus_output_in_chain():
    def build(mb, x):
        a = mb.relu(x=x)
        b = mb.relu(x=a)
        return mb.relu(x=b), a

    _check(build, ("S", 3), "fp32", "common::merge_consecutive_relus")
