"""common::expand_high_rank_reshape_and_transpose against coremltools."""

import pytest
from support.pass_parity import check_passes, op_types

EXPAND = "common::expand_high_rank_reshape_and_transpose"


@pytest.mark.parametrize("opset", ["iOS15", "iOS17"])
def test_expand_high_rank_grouped(opset):
    def build(mb, x):
        r = mb.reshape(x=x, shape=[1, 2, 3, 4, 5, 6])
        t = mb.transpose(x=r, perm=[4, 5, 3, 2, 0, 1])
        return mb.reshape(x=t, shape=[6, 20, 6])

    _, mp = check_passes(build, [((720,), "fp32")], [EXPAND], opset)
    assert op_types(mp).count("transpose") == 1


def test_expand_high_rank_full():
    def build(mb, x):
        r = mb.reshape(x=x, shape=[2, 3, 2, 3, 2, 3])
        t = mb.transpose(x=r, perm=[5, 3, 1, 4, 2, 0])
        return mb.relu(x=mb.reshape(x=t, shape=[6, 6, 6]))

    _, mp = check_passes(build, [((6, 36), "fp32")], [EXPAND])
    assert op_types(mp).count("transpose") == 6


def test_expand_high_rank_negative():
    def build(mb, x, y):
        r = mb.reshape(x=x, shape=[1, 2, 3, 4, 5])  # rank 5: kept
        a = mb.reshape(x=mb.transpose(x=r, perm=[4, 3, 2, 1, 0]), shape=[120])
        s = mb.reshape(x=x, shape=[1, 2, 3, 4, 5, 1])  # transpose output is a block output
        t = mb.transpose(x=s, perm=[5, 4, 3, 2, 1, 0])
        b = mb.reshape(x=t, shape=[120])
        u = mb.reshape(x=x, shape=[1, 2, 3, 4, 5, 1])  # ends in a rank-6 reshape
        c = mb.reshape(x=mb.transpose(x=u, perm=[5, 4, 3, 2, 1, 0]), shape=[1, 1, 1, 1, 1, 120])
        v = mb.reshape(x=y, shape=mb.shape(x=y))  # symbolic shape
        d = mb.reshape(x=mb.transpose(x=v, perm=[5, 4, 3, 2, 1, 0]), shape=[-1])
        return a, t, b, c, d

    _, mp = check_passes(build, [((120,), "fp32"), ((1, 2, 3, 4, 5, "S"), "fp32")], [EXPAND])
    assert op_types(mp).count("transpose") == 4
