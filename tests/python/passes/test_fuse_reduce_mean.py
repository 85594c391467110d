"""common::fuse_reduce_mean against coremltools' own pass."""

import numpy as np
import pytest
from support.pass_parity import check_passes, op_types

DTYPES = [("fp32", np.float32), ("fp16", np.float16)]


def _check(build, shape, dt, name, opset="iOS17", numbers_rtol=None):
    cp, mp = check_passes(build, [(shape, dt)], [name], opset=opset, numbers_rtol=numbers_rtol)
    ct_ops = [t for t in op_types(cp) if t != "const"]
    mk_ops = [t for t in op_types(mp) if t != "const"]
    assert ct_ops == mk_ops
    return mk_ops


# ---- fuse_reduce_mean ---------------------------------------------------------------------------

RM = "common::fuse_reduce_mean"


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("shape", [(2, 3, 4), ("S", 3, 4), ("S", "T", 4)])
@pytest.mark.parametrize("kind", ["mul", "div"])
@pytest.mark.parametrize("keep", [True, False])
def test_fuse_reduce_mean(dt, npdt, shape, kind, keep):
    def build(mb, x):
        s = mb.reduce_sum(x=x, axes=[-1], keep_dims=keep)
        m = mb.mul(x=npdt(0.25), y=s) if kind == "mul" else mb.real_div(x=s, y=npdt(4.0))
        s2 = mb.reduce_sum(x=x, axes=[2])
        out = mb.real_div(x=s2, y=np.float32(4.0).astype(npdt)) if kind == "mul" else mb.mul(x=s2, y=npdt(0.25))
        return mb.relu(x=m), out  # the second one is a function output: keeps its name

    assert _check(build, shape, dt, RM) == ["reduce_mean", "reduce_mean", "relu"]


@pytest.mark.parametrize("dt,npdt", DTYPES)
def test_fuse_reduce_mean_two_axes(dt, npdt):
    def build(mb, x):
        s = mb.reduce_sum(x=x, axes=[0, 2], keep_dims=True)
        return mb.mul(x=s, y=npdt(1.0 / 6.0))

    assert _check(build, (2, "S", 3), dt, RM) == ["reduce_mean"]


@pytest.mark.parametrize("kind", ["symbolic", "value", "extra", "output", "div_swapped", "no_axes", "other_op"])
def test_fuse_reduce_mean_negative(kind):
    def build(mb, x):
        if kind == "no_axes":
            s = mb.reduce_sum(x=x)
        else:
            s = mb.reduce_sum(x=x, axes=[0] if kind == "symbolic" else [1])
        if kind == "value":
            return mb.mul(x=s, y=np.float32(0.26))
        if kind == "div_swapped":
            return mb.real_div(x=np.float32(4.0), y=s)
        if kind == "other_op":
            return mb.add(x=s, y=np.float32(0.25))
        m = mb.mul(x=s, y=np.float32(0.25))
        if kind == "extra":
            return m, mb.relu(x=s)
        if kind == "output":
            return m, s
        return m

    assert "reduce_mean" not in _check(build, ("S", 4), "fp32", RM)


def test_fuse_reduce_mean_div_tolerance():
    def build(mb, x):
        a = mb.real_div(x=mb.reduce_sum(x=x, axes=[1]), y=np.float32(4.009))
        return mb.real_div(x=mb.reduce_sum(x=x, axes=[1]), y=np.float32(4.02)), a

    # coremltools' match tolerance: sum / 4.009 becomes mean (sum / 4), a 0.22% change by design
    assert _check(build, ("S", 4), "fp32", RM, numbers_rtol=3e-3) == ["reduce_mean", "reduce_sum", "real_div"]
