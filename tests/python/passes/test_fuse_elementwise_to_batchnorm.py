"""common::fuse_elementwise_to_batchnorm against coremltools' own pass."""

import numpy as np
import pytest
from milkit.passes import apply_passes
from support.pass_parity import build_both, check_passes, ct_run, op_types


def _check(build, shape, dt, name, opset="iOS17", numbers_rtol=None):
    cp, mp = check_passes(build, [(shape, dt)], [name], opset=opset, numbers_rtol=numbers_rtol)
    ct_ops = [t for t in op_types(cp) if t != "const"]
    mk_ops = [t for t in op_types(mp) if t != "const"]
    assert ct_ops == mk_ops
    return mk_ops


# ---- fuse_elementwise_to_batchnorm --------------------------------------------------------------

EB = "common::fuse_elementwise_to_batchnorm"


@pytest.mark.parametrize("shape", [(1, 3, 4, 5), ("S", 3, "T", 5)])
@pytest.mark.parametrize("gshape,bshape", [((1, 3, 1, 1), (3, 1, 1)), ((3, 1, 1), (1, 3, 1, 1))])
@pytest.mark.parametrize("swap", [False, True])
def test_fuse_elementwise_to_batchnorm(shape, gshape, bshape, swap):
    g = np.arange(1, 4, dtype=np.float32).reshape(gshape)
    b = (np.arange(3, dtype=np.float32) + 0.5).reshape(bshape)

    def build(mb, x):
        m = mb.mul(x=g, y=x) if swap else mb.mul(x=x, y=g)
        a = mb.add(x=b, y=m) if swap else mb.add(x=m, y=b)
        m2 = mb.mul(x=mb.relu(x=a), y=g)
        return mb.add(x=m2, y=b)  # function output

    assert _check(build, shape, "fp32", EB) == ["batch_norm", "relu", "batch_norm"]


@pytest.mark.parametrize("kind", ["rank3", "c1", "gshape", "extra", "output", "nonconst"])
def test_fuse_elementwise_to_batchnorm_negative(kind):
    shape = ("S", 3, 4) if kind == "rank3" else ("S", 3, 4, 4)

    def build(mb, x):
        if kind == "c1":
            g = np.ones((1, 1, 1, 1), np.float32)
        elif kind == "gshape":
            g = np.ones((1, 3, 1, 4), np.float32)
        else:
            g = np.ones((3, 1, 1), np.float32)
        m = mb.mul(x=x, y=g)
        b = mb.relu(x=x) if kind == "nonconst" else np.ones((3, 1, 1), np.float32)
        a = mb.add(x=m, y=b)
        if kind == "extra":
            return a, mb.relu(x=m)
        if kind == "output":
            return a, m
        return a

    assert "batch_norm" not in _check(build, shape, "fp32", EB)


def test_fuse_elementwise_to_batchnorm_fp16_raises():
    # coremltools builds the batch_norm with fp32 mean / variance, which fp16 x rejects.
    def build(mb, x):
        m = mb.mul(x=x, y=np.ones((1, 3, 1, 1), np.float16))
        return mb.add(x=m, y=np.ones((3, 1, 1), np.float16))

    cp, mp, _ = build_both(build, [((1, 3, 2, 2), "fp16")])
    with pytest.raises(ValueError, match="same data type"):
        ct_run(cp, [EB])
    with pytest.raises(ValueError):
        apply_passes(mp, [EB])


def test_fuse_elementwise_to_batchnorm_beta_other_channels():
    # coremltools squeezes a (1, 1, 1) beta to a scalar and still fuses; milkit's batch_norm needs
    # beta of shape (C,), so milkit leaves the pattern alone.
    def build(mb, x):
        m = mb.mul(x=x, y=np.ones((1, 3, 1, 1), np.float32))
        return mb.add(x=m, y=np.ones((1, 1, 1), np.float32))

    cp, mp, _ = build_both(build, [((1, 3, 2, 2), "fp32")])
    ct_run(cp, [EB])
    apply_passes(mp, [EB], verify_each=True)
    assert [t for t in op_types(cp) if t != "const"] == ["batch_norm"]
    assert [t for t in op_types(mp) if t != "const"] == ["mul", "add"]
