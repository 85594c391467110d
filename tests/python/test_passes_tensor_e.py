"""Tensor passes against coremltools: guard_negative_gather_indices, replace_stack_reshape, fuse_stack_split,
use_reflection_padding, expand_high_rank_reshape_and_transpose, detect_concat_interleave,
concat_to_pixel_shuffle."""

import pytest
from pass_parity import check_passes, op_types

GUARD = "common::guard_negative_gather_indices"


@pytest.mark.parametrize("opset", ["iOS16", "iOS17", "iOS18"])
def test_guard_gather(opset):
    def build(mb, x, i):
        a = mb.gather(x=x, indices=i, axis=1)
        b = mb.gather(x=x, indices=i, axis=-1)
        return mb.relu(x=a), b

    _, mp = check_passes(build, [((2, 3, 4), "fp32"), ((2,), "int32")], [GUARD], opset)
    assert ("select" in op_types(mp)) == (opset != "iOS16")


def test_guard_gather_nd_and_symbolic():
    def build(mb, x, i):
        return mb.gather_nd(x=x, indices=i), mb.gather(x=x, indices=[0, -1], axis=0)

    check_passes(build, [(("S", 3, 4), "fp32"), (("T", 2), "int32")], [GUARD])


def test_guard_casts():
    def build(mb, x, i):
        return mb.gather(x=x, indices=i, axis=0)

    check_passes(build, [((4, 3), "int8"), ((2,), "int16")], [GUARD])


def test_guard_negative_unsigned():
    def build(mb, x, i):
        return mb.gather(x=x, indices=i, axis=0)

    _, mp = check_passes(build, [((4, 3), "fp32"), ((2,), "uint16")], [GUARD])
    assert "select" not in op_types(mp)


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


REFLECT = "common::use_reflection_padding"
DCE = "common::dead_code_elimination"  # coremltools rewrites negative slice begins in place; drop them
EM = [True, True, True, False]


def _sl(mb, x, b, e, mask=EM):
    return mb.slice_by_index(x=x, begin=[0, 0, 0, b], end=[0, 0, 0, e], end_mask=mask)


@pytest.mark.parametrize("opset", ["iOS15", "iOS17"])
def test_reflection_padding(opset):
    def build(mb, x):
        a = mb.concat(values=[_sl(mb, x, 1, 2), x, _sl(mb, x, -2, -1)], axis=3)
        b = mb.concat(values=[_sl(mb, x, 2, 3), _sl(mb, x, 1, 2), x, _sl(mb, x, 6, 7), _sl(mb, x, -3, -2)], axis=3)
        return mb.relu(x=a), b

    _, mp = check_passes(build, [((1, 2, 6, 8), "fp32")], [REFLECT, DCE], opset)
    assert op_types(mp).count("pad") == 2 and "slice_by_index" not in op_types(mp)


def test_reflection_padding_h_axis_and_symbolic():
    def build(mb, x):
        m = [True, True, False, True]
        top = mb.slice_by_index(x=x, begin=[0, 0, 1, 0], end=[0, 0, 2, 0], end_mask=m)
        bot = mb.slice_by_index(x=x, begin=[0, 0, -2, 0], end=[0, 0, -1, 0], end_mask=m)
        return mb.concat(values=[top, x, bot], axis=2)

    _, mp = check_passes(build, [(("B", 2, "H", "W"), "fp32")], [REFLECT, DCE])
    assert "pad" in op_types(mp)


def test_reflection_padding_inferred_mask():
    def build(mb, x):
        a = mb.slice_by_index(x=x, begin=[0, 0, 1], end=[1, 2, 2])  # mask inferred from the shape
        b = mb.slice_by_index(x=x, begin=[0, 0, -2], end=[1, 2, -1])
        return mb.concat(values=[a, x, b], axis=2)

    _, mp = check_passes(build, [((1, 2, 5), "fp32")], [REFLECT, DCE])
    assert "pad" in op_types(mp)


def test_reflection_padding_negative():
    def build(mb, x, y):
        a = mb.concat(values=[_sl(mb, x, 1, 2), x], axis=3)  # even count
        b = mb.concat(values=[_sl(mb, x, 0, 1), x, _sl(mb, x, 6, 7)], axis=3)  # wrong order
        c = mb.concat(values=[_sl(mb, x, 1, 3), x, _sl(mb, x, 5, 7)], axis=3)  # two wide
        d = mb.concat(values=[_sl(mb, y, 1, 2), x, _sl(mb, y, 6, 7)], axis=3)  # slices of another var
        s = _sl(mb, x, 1, 2)
        e = mb.concat(values=[s, x, _sl(mb, x, 6, 7)], axis=3)  # slice is a block output
        f0 = mb.slice_by_index(x=x, begin=[0, 0, 0, 1], end=[1, 2, 6, 2], end_mask=[False] * 4)
        f = mb.concat(values=[f0, x, _sl(mb, x, 6, 7)], axis=3)  # mask says axis 0
        g = mb.concat(values=[x, x, x], axis=3)
        return a, b, c, d, s, e, f, g

    _, mp = check_passes(build, [((1, 2, 6, 8), "fp32"), ((1, 2, 6, 8), "fp32")], [REFLECT])
    assert "pad" not in op_types(mp)


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


INTERLEAVE = "common::detect_concat_interleave"


def _shuffle(mb, vals, axis=-3, s1=None, perm=(0, 2, 1, 3, 4), s2=None):
    c = mb.concat(values=vals, axis=axis)
    r = mb.reshape(x=c, shape=s1 or [1, len(vals), 3, 4, 5])
    t = mb.transpose(x=r, perm=list(perm))
    return c, r, t, mb.reshape(x=t, shape=s2 or [1, 3 * len(vals), 4, 5])


@pytest.mark.parametrize("opset", ["iOS15", "iOS17"])
def test_concat_interleave(opset):
    def build(mb, x, y):
        a = _shuffle(mb, [x, y])[3]
        b = _shuffle(mb, [x, y, x], axis=1)[3]
        return mb.relu(x=a), b

    _, mp = check_passes(build, [((1, 3, 4, 5), "fp32"), ((1, 3, 4, 5), "fp32")], [INTERLEAVE], opset)
    assert op_types(mp).count("concat") == 2 and "transpose" not in op_types(mp)


def test_concat_interleave_negative():
    def build(mb, x, y):
        c, r, t, a = _shuffle(mb, [x, y])  # concat is a block output
        b = _shuffle(mb, [x, y], perm=(0, 1, 2, 3, 4))[3]
        d = _shuffle(mb, [x, y], s1=[1, 2, 3, 20, 1])[3]
        _, _, t2, e = _shuffle(mb, [x, y])  # transpose is a block output
        f = _shuffle(mb, [x, y], s2=[1, 6, 20, 1])[3]
        return c, a, b, d, t2, e, f

    _, mp = check_passes(build, [((1, 3, 4, 5), "fp32"), ((1, 3, 4, 5), "fp32")], [INTERLEAVE])
    assert op_types(mp).count("transpose") == 5


def test_concat_interleave_symbolic():
    def build(mb, x, y):
        c = mb.concat(values=[x, y], axis=1)
        r = mb.reshape(x=c, shape=[-1, 2, 3, 4, 5])
        return mb.reshape(x=mb.transpose(x=r, perm=[0, 2, 1, 3, 4]), shape=[-1, 6, 4, 5])

    _, mp = check_passes(build, [(("B", 3, 4, 5), "fp32"), (("B", 3, 4, 5), "fp32")], [INTERLEAVE])
    assert "transpose" in op_types(mp)


PIXEL = "common::concat_to_pixel_shuffle"


@pytest.mark.parametrize("opset", ["iOS15", "iOS17"])
def test_concat_to_pixel_shuffle(opset):
    def build(mb, a, b, c, d):
        h0 = mb.concat(values=[a, b], axis=2, interleave=True)
        h1 = mb.concat(values=[c, d], axis=2, interleave=True)
        return mb.concat(values=[h0, h1], axis=3, interleave=True)

    spec = ((1, 2, 3, 4), "fp32")
    _, mp = check_passes(build, [spec] * 4, [PIXEL], opset)
    assert "pixel_shuffle" in op_types(mp) and op_types(mp).count("concat") == 1


def test_concat_to_pixel_shuffle_symbolic():
    def build(mb, a, b):
        h0 = mb.concat(values=[a, b], axis=2, interleave=True)
        h1 = mb.concat(values=[b, a], axis=2, interleave=True)
        return mb.relu(x=mb.concat(values=[h0, h1], axis=3, interleave=True))

    spec = (("N", 2, "H", "W"), "fp32")
    _, mp = check_passes(build, [spec] * 2, [PIXEL])
    assert "pixel_shuffle" in op_types(mp)


def test_concat_to_pixel_shuffle_negative():
    def build(mb, a, b):
        h0 = mb.concat(values=[a, b], axis=2, interleave=True)
        h1 = mb.concat(values=[b, a], axis=2, interleave=False)  # not interleaved
        o1 = mb.concat(values=[h0, h1], axis=3, interleave=True)
        h2 = mb.concat(values=[a, b], axis=2, interleave=True)
        o2 = mb.concat(values=[h2, h2], axis=-1, interleave=True)  # axis -1
        h3 = mb.concat(values=[a, b], axis=3, interleave=True)  # inner axis 3
        o3 = mb.concat(values=[h3, h3], axis=3, interleave=True)
        o4 = mb.concat(values=[h2, h0], axis=3, interleave=False)
        return o1, o2, o3, o4

    spec = ((1, 2, 3, 4), "fp32")
    _, mp = check_passes(build, [spec] * 2, [PIXEL])
    assert "pixel_shuffle" not in op_types(mp)
