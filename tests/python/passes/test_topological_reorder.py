"""common::topological_reorder against coremltools."""

import pytest
from support.parity import ALL_OPSETS
from support.pass_parity import check_passes

P = "common::topological_reorder"


@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_casts_and_transposes_move_to_first_use(opset):
    def build(mb, x):
        c = mb.cast(x=x, dtype="fp16")
        t = mb.transpose(x=x, perm=[1, 0])
        c2 = mb.cast(x=c, dtype="fp32")
        a = mb.relu(x=x)
        b = mb.add(x=a, y=c2)
        d = mb.matmul(x=t, y=b)
        out_cast = mb.cast(x=a, dtype="int32")  # only a block output: goes to the end
        t2 = mb.transpose(x=b, perm=[1, 0])
        return d, out_cast, mb.add(x=mb.relu(x=d), y=t2), mb.cast(x=b, dtype="fp16")

    check_passes(build, [((3, 3), "fp32")], [P], opset)
    check_passes(build, [((3, 3), "fp32")], ["common::add_fp16_cast", P], opset)


def test_symbolic():
    def build(mb, x):
        t = mb.transpose(x=x, perm=[1, 0])
        r = mb.relu(x=x)
        return mb.matmul(x=r, y=t), mb.cast(x=t, dtype="fp16")

    check_passes(build, [(("S", 4), "fp32")], [P])
