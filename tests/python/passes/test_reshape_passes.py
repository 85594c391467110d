"""Reshape and transpose passes against coremltools: merge_consecutive_reshapes / transposes,
remove_symbolic_reshape, fuse_squeeze_expand_dims, rank0_expand_dims_swap."""

import pytest
from support.parity import ALL_OPSETS
from support.pass_parity import check_passes, op_types

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


SYMRESHAPE = "common::remove_symbolic_reshape"


@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_symbolic_reshape(opset):
    def build(mb, x):
        s = mb.shape(x=x)
        a = mb.reshape(x=x, shape=s)  # (S, 4) -> [-1, 4]
        d0 = mb.gather(x=mb.shape(x=x), indices=[0])
        shp = mb.concat(values=[d0, [2, 2]], axis=0)
        b = mb.reshape(x=a, shape=shp)  # (S, 2, 2) -> [-1, 2, 2]; the concat goes too
        return mb.relu(x=b)

    _, mp = check_passes(build, [(("S", 4), "fp32")], [SYMRESHAPE], opset)
    assert "concat" not in op_types(mp)


def test_symbolic_reshape_negative():
    def build(mb, x):
        s = mb.shape(x=x)
        a = mb.reshape(x=x, shape=s)  # shape var read twice: kept
        b = mb.reshape(x=x, shape=s)
        c = mb.reshape(x=x, shape=mb.shape(x=x))  # two symbols: kept
        d = mb.reshape(x=x, shape=[-1])  # known shape: kept
        return a, b, c, d

    _, mp = check_passes(build, [(("S", "T"), "fp32")], [SYMRESHAPE])
    assert op_types(mp).count("shape") == 2


def test_symbolic_reshape_output_name():
    def build(mb, x):
        return mb.reshape(x=x, shape=mb.shape(x=x))

    check_passes(build, [(("S", 3), "fp32")], [SYMRESHAPE])


SQUEEZE = "common::fuse_squeeze_expand_dims"


@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_squeeze_expand_dims(opset):
    def build(mb, x):
        a = mb.squeeze(x=x, axes=[1, 3])
        b = mb.expand_dims(x=a, axes=[1, 3])
        c = mb.squeeze(x=x)
        d = mb.expand_dims(x=c, axes=[1, 3])
        return mb.relu(x=b), d

    _, mp = check_passes(build, [((3, 1, 4, 1), "fp32")], [SQUEEZE], opset)
    assert op_types(mp).count("identity") == 2


def test_squeeze_expand_dims_negative_and_symbolic():
    def build(mb, x):
        a = mb.squeeze(x=x, axes=[1])
        b = mb.expand_dims(x=a, axes=[0])  # different shape: kept
        c = mb.squeeze(x=x, axes=[1])
        d = mb.expand_dims(x=c, axes=[1])  # c also feeds relu: kept
        e = mb.squeeze(x=x, axes=[1])
        f = mb.expand_dims(x=e, axes=[-2])  # symbolic shapes equal: fused
        g = mb.squeeze(x=x, axes=[1])
        h = mb.expand_dims(x=g, axes=[1])  # g is an output: kept
        return b, d, mb.relu(x=c), f, g, h

    check_passes(build, [(("S", 1, "T"), "fp32")], [SQUEEZE])


RANK0 = "common::rank0_expand_dims_swap"


@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_rank0_swap(opset):
    def build(mb, x0):
        x = mb.squeeze(x=x0)
        a = mb.sub(x=x, y=1.0)
        b = mb.expand_dims(x=a, axes=[0])
        c = mb.mul(x=2.0, y=x)
        d = mb.expand_dims(x=c, axes=[0])
        f = mb.relu(x=c)
        return mb.relu(x=b), d, f

    check_passes(build, [((1,), "fp32")], [RANK0], opset)


def test_rank0_swap_op_reading_twice():
    # coremltools rebuilds add(c, c) once per read and leaves an unused copy with the same name;
    # milkit rebuilds it once: equal after dead code elimination.
    def build(mb, x0):
        c = mb.mul(x=2.0, y=mb.squeeze(x=x0))
        return mb.expand_dims(x=c, axes=[0]), mb.add(x=c, y=c)

    _, mp = check_passes(build, [((1,), "fp32")], [RANK0, "common::dead_code_elimination"])
    assert op_types(mp).count("add") == 1


def test_rank0_swap_negative():
    def build(mb, x0, y0):
        x, y = mb.squeeze(x=x0), mb.reduce_sum(x=y0)
        a = mb.add(x=x, y=y)
        b = mb.expand_dims(x=a, axes=[0])  # no const input: kept
        c = mb.add(x=x, y=1.0)
        d = mb.expand_dims(x=c, axes=[-1])  # axes [-1]: kept
        e = mb.add(x=x, y=2.0)
        f = mb.expand_dims(x=e, axes=[0])
        g = mb.expand_dims(x=e, axes=[0])  # two expand_dims: kept
        h = mb.real_div(x=x, y=2.0)
        i = mb.expand_dims(x=h, axes=[0])  # h is an output: kept
        j = mb.maximum(x=x, y=2.0)
        k = mb.expand_dims(x=j, axes=[0])  # not a listed op: kept
        return b, d, f, g, h, i, k

    _, mp = check_passes(build, [((1,), "fp32"), (("S",), "fp32")], [RANK0])
    assert op_types(mp).count("expand_dims") == 6
