"""Shape passes against coremltools: merge_consecutive_reshapes / transposes, remove_symbolic_reshape,
fuse_squeeze_expand_dims, rank0_expand_dims_swap, remove_redundant_ops, update_output_dtypes,
loop_invariant_elimination."""

import numpy as np
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


REDUNDANT = "common::remove_redundant_ops"


@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_redundant_ops(opset):
    def build(mb, x):
        a = mb.relu(x=x)
        b = mb.relu(x=x)
        c = mb.add(x=a, y=1.0)
        d = mb.add(x=b, y=1.0)  # same after a == b: removed in the next round
        e = mb.mul(x=c, y=np.full((2, 4), 2.0, np.float32))
        f = mb.mul(x=d, y=np.full((2, 4), 2.0, np.float32))
        g = mb.concat(values=[e, f], axis=0)
        h = mb.concat(values=[e, f], axis=0)
        i = mb.concat(values=[e, f], axis=1)  # other axis: kept
        return mb.add(x=g, y=h), i

    _, mp = check_passes(build, [((2, 4), "fp32")], [REDUNDANT], opset)
    assert op_types(mp).count("relu") == 1


def test_redundant_ops_negative():
    def build(mb, x):
        a = mb.add(x=x, y=1.0)
        b = mb.add(x=x, y=np.float32(1.0))
        c = mb.add(x=x, y=2.0)  # other value: kept
        d = mb.add(x=x, y=np.ones((1, 4), np.float32))  # other shape: kept
        e = mb.add(x=x, y=np.ones((4,), np.float32))  # other shape: kept
        big1 = mb.mul(x=x, y=np.ones((100, 2, 4), np.float32))
        big2 = mb.mul(x=x, y=np.ones((100, 2, 4), np.float32))  # 100+ elements: kept
        n1 = mb.add(x=x, y=np.nan)
        n2 = mb.add(x=x, y=np.nan)  # NaN never equal: kept
        o = mb.relu(x=x)
        o2 = mb.relu(x=x)  # o2 is an output: kept
        return a, b, c, d, e, big1, big2, n1, n2, o, o2

    _, mp = check_passes(build, [((2, 4), "fp32")], [REDUNDANT])


def test_redundant_ops_symbolic_and_int():
    def build(mb, x, y):
        s1 = mb.shape(x=x)
        s2 = mb.shape(x=x)
        r1 = mb.reshape(x=x, shape=s1)
        r2 = mb.reshape(x=x, shape=s2)  # s1 == s2 after the first round
        i1 = mb.add(x=y, y=np.int32(3))
        i2 = mb.add(x=y, y=3)
        i3 = mb.add(x=y, y=np.array([3], np.int32))  # other shape: kept
        t1 = mb.transpose(x=x, perm=[1, 0])
        t2 = mb.transpose(x=x, perm=[1, 0])
        sp = mb.split(x=x, num_splits=2, axis=1)
        sp2 = mb.split(x=x, num_splits=2, axis=1)  # two outputs: kept
        return mb.add(x=r1, y=r2), i1, i2, i3, mb.matmul(x=t1, y=t2), sp[0], sp2[1]

    _, mp = check_passes(build, [(("S", 4), "fp32"), (("T",), "int32")], [REDUNDANT])
    assert op_types(mp).count("shape") == 1


def test_redundant_ops_constexpr():
    q = np.arange(12, dtype=np.uint8).reshape(4, 3)

    def build(mb, x):
        d1 = mb.constexpr_affine_dequantize(quantized_data=q, zero_point=np.uint8(3), scale=np.float32(0.5), axis=0)
        d2 = mb.constexpr_affine_dequantize(quantized_data=q, zero_point=np.uint8(3), scale=np.float32(0.5), axis=0)
        a = mb.add(x=x, y=d1)
        b = mb.add(x=x, y=d2)  # constexpr outputs have no value: compared by identity, kept
        c = mb.add(x=x, y=d1)  # same var: removed
        return mb.mul(x=a, y=b), mb.relu(x=c)

    _, mp = check_passes(build, [((4, 3), "fp32")], [REDUNDANT], "iOS16")
    assert op_types(mp).count("add") == 2


@pytest.mark.parametrize("name", ["common::update_output_dtypes", "common::loop_invariant_elimination"])
@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_no_output_types_no_loops(name, opset):
    # programs built with mb.program have no output_types and milkit has no while_loop: unchanged
    def build(mb, x, y):
        a = mb.cast(x=mb.relu(x=x), dtype="fp16")
        return a, mb.add(x=y, y=1), x

    _, mp = check_passes(build, [(("S", 4), "fp32"), ((3,), "int32")], [name], opset)
    assert [t for t in op_types(mp) if t != "const"] == ["relu", "cast", "add"]
