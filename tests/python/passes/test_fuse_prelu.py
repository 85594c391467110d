"""common::fuse_prelu against coremltools."""

import numpy as np
import pytest
from support.pass_parity import check_numbers_only, check_passes, op_types
from support.pass_parity import check_same_ops as _check
from support.pass_parity import ct_ops_after as _ct_ops
from support.pass_parity import non_const_ops as _ops
from support.pass_parity import rand as _r

DTYPES = [("fp32", np.float32), ("fp16", np.float16)]


# ---- fuse_prelu --------------------------------------------------------------------------------

PRELU = "common::fuse_prelu"


def _prelu_graph(mb, x, a, neg_first=False, alpha_first=False, relu_first=False, neg=-1.0):
    n = mb.mul(x=neg, y=x) if neg_first else mb.mul(x=x, y=neg)
    r1 = mb.relu(x=n)
    m = mb.mul(x=a, y=r1) if alpha_first else mb.mul(x=r1, y=a)
    r2 = mb.relu(x=x)
    return mb.add(x=m, y=r2) if relu_first else mb.add(x=r2, y=m)


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("shape", [(3, 1, 1), (1, 3, 1, 1)])
@pytest.mark.parametrize("variant", [{}, dict(neg_first=True, alpha_first=True, relu_first=True)])
def test_fuse_prelu_pattern1(dt, npdt, shape, variant):
    def build(mb, x):
        return mb.sigmoid(x=_prelu_graph(mb, x, _r(*shape, dt=npdt), neg=npdt(-1), **variant))

    assert _check(build, [(("B", 3, "H", 5), dt)], PRELU) == ["prelu", "sigmoid"]


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("shape", [(3,), (1, 3), (1, 1, 1, 3)])
def test_fuse_prelu_pattern2(dt, npdt, shape):
    def build(mb, x):
        t = mb.transpose(x=x, perm=[0, 2, 3, 1])
        return _prelu_graph(mb, t, _r(*shape, dt=npdt), neg=npdt(-1))  # a block output

    assert _check(build, [(("B", 3, 4, "W"), dt)], PRELU) == ["prelu", "transpose"]


def test_fuse_prelu_both_patterns_and_tolerance():
    def build(mb, x):
        a = _prelu_graph(mb, x, _r(3, 1, 1), neg=-1.0005)  # -1 within 1e-3
        t = mb.transpose(x=a, perm=[0, 2, 3, 1])
        b = _prelu_graph(mb, t, _r(3, seed=1))
        return mb.relu(x=b)

    cp, mp = check_passes(build, [((2, 3, 4, 5), "fp32")], [PRELU], numbers_rtol=2e-3)
    assert _ops(cp) == _ops(mp) == ["prelu", "prelu", "transpose", "relu"]


def test_fuse_prelu_negative():
    def build(mb, x, y):
        a = _prelu_graph(mb, x, _r(1, 1, 3))  # pattern 1 wants the channel on axis -3
        b = _prelu_graph(mb, x, _r(3, 1, 1), neg=-2.0)
        n = mb.mul(x=x, y=-1.0)
        r1 = mb.relu(x=n)
        c = mb.add(x=mb.relu(x=x), y=mb.mul(x=r1, y=_r(3, 1, 1)))
        c2 = mb.exp(x=r1)  # relu1 has two users
        d = _prelu_graph(mb, mb.transpose(x=x, perm=[0, 3, 1, 2]), _r(4))  # another perm
        e = _prelu_graph(mb, y, _r(3, 1))  # rank 3
        f = _prelu_graph(mb, x, mb.relu(x=x))  # alpha not const
        return a, b, c, c2, d, e, f

    ops = _check(build, [((2, 3, 4, 3), "fp32"), ((2, 3, 4), "fp32")], PRELU)
    assert "prelu" not in ops


@pytest.mark.parametrize("which", ["relu1", "relu2"])
def test_fuse_prelu_block_output_inside(which):
    def build(mb, x):
        r1 = mb.relu(x=mb.mul(x=x, y=-1.0))
        r2 = mb.relu(x=x)
        out = mb.add(x=r2, y=mb.mul(x=r1, y=_r(3, 1, 1)))
        return out, (r1 if which == "relu1" else r2)

    # block outputs are not consumers, so the structure matches; the match is rejected because a
    # matched op other than the add outputs a block output
    assert "prelu" not in _check(build, [((1, 3, 2, 2), "fp32")], PRELU)


def test_fuse_prelu_channel_mismatch_differs_from_coremltools():
    # one alpha for 3 channels: coremltools' prelu raises (alpha length != channels); milkit keeps
    # the graph (prelu_to_lrelu-style broadcasting is not prelu's semantics)
    def build(mb, x):
        return _prelu_graph(mb, x, _r(1, 1, 1))

    with pytest.raises(ValueError, match="alpha"):
        _ct_ops(build, [((1, 3, 2, 2), "fp32")], PRELU)
    mp = check_numbers_only(build, [((1, 3, 2, 2), "fp32")], [PRELU])
    assert "prelu" not in op_types(mp)
