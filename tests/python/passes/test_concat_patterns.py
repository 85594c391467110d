"""common::detect_concat_interleave and common::concat_to_pixel_shuffle against coremltools."""

import pytest
from support.pass_parity import check_passes, op_types

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
