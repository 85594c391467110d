"""common::guard_negative_gather_indices against coremltools."""

import pytest
from support.pass_parity import check_passes, op_types

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
