"""common::replace_stack_reshape and common::fuse_stack_split against coremltools."""

import pytest
from support.pass_parity import check_passes, op_types

STACKRESHAPE = "common::replace_stack_reshape"


@pytest.mark.parametrize("opset", ["iOS15", "iOS17"])
def test_stack_reshape(opset):
    def build(mb, x, y):
        a = mb.stack(values=[x, y], axis=2)  # (1, 5, 2, 3, 4) -> interleaved concat on axis 1
        b = mb.reshape(x=a, shape=[1, 10, 3, 4])
        c = mb.stack(values=[x, y], axis=1)  # (1, 2, 5, 3, 4) -> concat on axis 1
        d = mb.reshape(x=c, shape=[1, 10, 3, 4])
        return mb.relu(x=b), d

    _, mp = check_passes(build, [((1, 5, 3, 4), "fp32"), ((1, 5, 3, 4), "fp32")], [STACKRESHAPE], opset)
    assert "stack" not in op_types(mp) and op_types(mp).count("concat") == 2


def test_stack_reshape_symbolic():
    def build(mb, x, y):
        a = mb.stack(values=[x, y], axis=1)  # (S, 2, 3) -> (S, 6)
        return mb.reshape(x=a, shape=[-1, 6]), mb.reshape(x=mb.stack(values=[x, y], axis=0), shape=[-1, 3])

    _, mp = check_passes(build, [(("S", 3), "fp32"), (("S", 3), "fp32")], [STACKRESHAPE])
    assert op_types(mp).count("concat") == 2  # (2, S, 3) -> (2*S, 3) matches too


def test_stack_reshape_negative():
    def build(mb, x, y):
        a = mb.stack(values=[x, y], axis=3)  # merged away from the stack axis: kept
        b = mb.reshape(x=a, shape=[2, 5, 3, 4])
        c = mb.stack(values=[x, y], axis=-3)  # negative axis: kept
        d = mb.reshape(x=c, shape=[1, 10, 3, 4])
        e = mb.stack(values=[x, y], axis=1)  # two consumers: kept
        f = mb.reshape(x=e, shape=[1, 10, 3, 4])
        g = mb.stack(values=[x, y, x], axis=1)  # tripled: kept
        h = mb.reshape(x=g, shape=[1, 15, 3, 4])
        i = mb.stack(values=[x, y], axis=1)  # rank drops by two: kept
        j = mb.reshape(x=i, shape=[10, 12])
        return b, d, f, mb.relu(x=e), h, j

    _, mp = check_passes(build, [((1, 5, 3, 4), "fp32"), ((1, 5, 3, 4), "fp32")], [STACKRESHAPE])
    assert "concat" not in op_types(mp)


STACKSPLIT = "common::fuse_stack_split"


@pytest.mark.parametrize("opset", ["iOS15", "iOS18"])
def test_stack_split(opset):
    def build(mb, x, y):
        s = mb.stack(values=[x, y, x], axis=0)
        a, b, c = mb.split(x=s, axis=0, num_splits=3)
        t = mb.stack(values=[x, y], axis=-1)
        d, e = mb.split(x=t, axis=-1, split_sizes=[1, 1])
        sa, sb, sc = mb.squeeze(x=a, axes=[0]), mb.squeeze(x=b, axes=[0]), mb.squeeze(x=c, axes=[-3])
        return sa, mb.relu(x=sb), sc, mb.squeeze(x=d, axes=[2]), mb.squeeze(x=e, axes=[-1])

    _, mp = check_passes(build, [((2, 3), "fp32"), ((2, 3), "fp32")], [STACKSPLIT], opset)
    assert "stack" not in op_types(mp) and op_types(mp).count("identity") == 5


def test_stack_split_symbolic_two_splits():
    def build(mb, x, y):
        s = mb.stack(values=[x, y], axis=1)
        a, b = mb.split(x=s, axis=1, num_splits=2)
        c, d = mb.split(x=s, axis=1, split_sizes=[1, 1])
        return [mb.squeeze(x=v, axes=[1]) for v in (a, b, c, d)]

    _, mp = check_passes(build, [(("S", 3), "fp32"), (("S", 3), "fp32")], [STACKSPLIT])
    assert "stack" not in op_types(mp)


def test_stack_split_negative():
    def build(mb, x, y):
        s = mb.stack(values=[x, y], axis=0)
        a, b = mb.split(x=s, axis=1, num_splits=3 - 1)  # other axis: kept
        t = mb.stack(values=[x, y], axis=0)
        c, d = mb.split(x=t, axis=0, num_splits=2)
        u = mb.stack(values=[x, y], axis=0)  # stack also read by a relu: split fused, stack kept
        e, f = mb.split(x=u, axis=0, num_splits=2)
        return (a, b, c, mb.squeeze(x=d, axes=[0]), mb.squeeze(x=e, axes=[0]), mb.squeeze(x=f, axes=[0]),
                mb.relu(x=u))

    _, mp = check_passes(build, [((2, 2), "fp32"), ((2, 2), "fp32")], [STACKSPLIT])
    assert op_types(mp).count("stack") == 3


def test_stack_split_other_squeeze_axes():
    def build(mb, x):
        w = mb.stack(values=[x, x], axis=0)  # (2, 1, 2); squeezes on axis 1 (or two axes): kept
        g, h = mb.split(x=w, axis=0, num_splits=2)
        return mb.squeeze(x=g, axes=[1]), mb.squeeze(x=h, axes=[0, 1])

    _, mp = check_passes(build, [((1, 2), "fp32")], [STACKSPLIT])
    assert "identity" not in op_types(mp)
