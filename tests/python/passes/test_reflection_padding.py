"""common::use_reflection_padding against coremltools."""

import pytest
from support.pass_parity import check_passes, op_types

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
