"""Shape passes against coremltools: merge_consecutive_reshapes / transposes, remove_symbolic_reshape,
fuse_squeeze_expand_dims, rank0_expand_dims_swap, remove_redundant_ops, update_output_dtypes,
loop_invariant_elimination."""

import pytest
from parity import ALL_OPSETS
from pass_parity import check_passes, op_types

RESHAPES = "common::merge_consecutive_reshapes"
TRANSPOSES = "common::merge_consecutive_transposes"


@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_reshapes_chain(opset):
    def build(mb, x):
        a = mb.reshape(x=x, shape=[6, 4])
        b = mb.reshape(x=a, shape=[4, 6])
        c = mb.reshape(x=b, shape=[2, 12])
        return mb.relu(x=c)

    _, mp = check_passes(build, [((2, 3, 4), "fp32")], [RESHAPES], opset)
    assert op_types(mp).count("reshape") == 1


def test_reshapes_output_and_fanout():
    def build(mb, x):
        a = mb.reshape(x=x, shape=[6, 4])
        b = mb.reshape(x=a, shape=[4, 6])  # a block output: the chain ends here
        c = mb.reshape(x=b, shape=[24])
        d = mb.reshape(x=c, shape=[2, 12])  # two consumers: chain c -> d, d kept as the end
        e = mb.reshape(x=d, shape=[12, 2])
        return b, mb.relu(x=d), e, mb.reshape(x=mb.reshape(x=x, shape=[24]), shape=[4, 6])

    _, mp = check_passes(build, [((2, 3, 4), "fp32")], [RESHAPES])


def test_reshapes_negative():
    def build(mb, x):
        a = mb.reshape(x=x, shape=[6, 4])
        return mb.relu(x=a), mb.reshape(x=a, shape=[24]), mb.transpose(x=a, perm=[1, 0])

    _, mp = check_passes(build, [((2, 3, 4), "fp32")], [RESHAPES])
    assert op_types(mp).count("reshape") == 2


def test_reshapes_symbolic():
    def build(mb, x):
        a = mb.reshape(x=x, shape=[-1, 4])
        b = mb.reshape(x=a, shape=[2, -1])
        s = mb.shape(x=x)
        c = mb.reshape(x=b, shape=s)  # symbolic shape var: reused by the merged reshape
        return mb.reshape(x=mb.reshape(x=c, shape=[-1]), shape=[-1, 2])

    check_passes(build, [(("S", 2, 4), "fp32")], [RESHAPES])


@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_transposes(opset):
    def build(mb, x):
        a = mb.transpose(x=x, perm=[1, 0, 2])
        b = mb.transpose(x=a, perm=[-1, 0, 1])
        c = mb.transpose(x=b, perm=[0, 2, 1])
        t = mb.transpose(x=x, perm=[2, 1, 0])
        u = mb.transpose(x=t, perm=[2, 1, 0])  # identity perm: kept as a transpose
        return mb.relu(x=c), u

    _, mp = check_passes(build, [((2, 3, 4), "fp32")], [TRANSPOSES], opset)


def test_transposes_negative_and_symbolic():
    def build(mb, x):
        a = mb.transpose(x=x, perm=[1, 0, 2])
        b = mb.transpose(x=a, perm=[0, 2, 1])  # a has two consumers: kept
        c = mb.transpose(x=x, perm=[0, 2, 1])
        d = mb.transpose(x=c, perm=[0, 2, 1])  # c is an output: kept
        e = mb.transpose(x=x, perm=[2, 0, 1])
        f = mb.relu(x=e)  # not a transpose child
        return b, mb.relu(x=a), c, d, f, mb.transpose(x=mb.transpose(x=x, perm=[2, 0, 1]), perm=[2, 0, 1])

    check_passes(build, [(("S", "T", 4), "fp32")], [TRANSPOSES])
