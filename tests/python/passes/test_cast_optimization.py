"""common::cast_optimization against coremltools."""

import numpy as np
import pytest
from support.parity import ALL_OPSETS
from support.pass_parity import check_passes, op_types

P = "common::cast_optimization"


@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_same_dtype_and_chains(opset):
    def build(mb, x):
        a = mb.cast(x=x, dtype="fp32")  # same dtype: removed
        b = mb.cast(x=mb.cast(x=a, dtype="fp16"), dtype="fp32")  # fp16 limits: fused to x->fp32? no
        c = mb.cast(x=mb.cast(x=a, dtype="int32"), dtype="fp16")  # int32 limits resolution: kept
        d = mb.cast(x=mb.cast(x=mb.cast(x=x, dtype="fp16"), dtype="fp32"), dtype="fp16")
        return mb.add(x=b, y=mb.cast(x=c, dtype="fp32")), d

    cp, mp = check_passes(build, [(("S", 3), "fp32")], [P], opset)


@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_cancelling_casts(opset):
    def build(mb, x):
        h = mb.cast(x=x, dtype="fp16")
        back = mb.cast(x=h, dtype="fp32")  # x is fp32, fp16 range inside fp32: fp32 back -> not exact
        r = mb.relu(x=h)
        i = mb.cast(x=mb.cast(x=x, dtype="int32"), dtype="fp32")
        return mb.add(x=back, y=i), r

    check_passes(build, [((2, "S"), "fp32")], [P], opset)


@pytest.mark.parametrize("opset", ["iOS16", "iOS17", "iOS18"])
def test_int_chains_and_io(opset):
    def build(mb, x):
        a = mb.cast(x=x, dtype="fp16")  # int32 -> fp16 -> int32: cancels, output is the input
        b = mb.cast(x=a, dtype="int32")
        c = mb.cast(x=mb.cast(x=x, dtype="fp32"), dtype="fp16")  # int32 -> fp32 -> fp16: fused
        d = mb.cast(x=x, dtype="int32")  # same dtype on a function input that is an output
        e = mb.cast(x=mb.cast(x=x, dtype="bool"), dtype="fp32")  # bool limits: kept
        return b, c, d, e

    cp, mp = check_passes(build, [((4,), "int32")], [P], opset)
    assert "identity" in op_types(mp)


def test_fused_cast_name_and_multiple_children():
    def build(mb, x):
        a = mb.cast(x=x, dtype="fp32")  # fp16 -> fp32
        b = mb.cast(x=a, dtype="fp16")  # cancels
        c = mb.cast(x=a, dtype="int32")  # fp16 -> fp32 -> int32: fusable to fp16 -> int32
        d = mb.cast(x=a, dtype="int32")
        return mb.add(x=b, y=b), mb.add(x=c, y=d), mb.relu(x=a)

    cp, mp = check_passes(build, [((3, 4), "fp16")], [P])
    ops = [o.name for o in mp.functions["main"].operations]
    assert ops.count("x_to_int32") == 2  # coremltools names both fused casts alike


def test_const_chain():
    def build(mb, x):
        k = mb.cast(x=mb.cast(x=np.arange(4, dtype=np.int32), dtype="fp32"), dtype="fp16")
        return mb.add(x=x, y=k)

    check_passes(build, [((4,), "fp16")], [P, "common::const_elimination", "common::dead_code_elimination"])


@pytest.mark.parametrize("opset", ["iOS16", "iOS17"])
def test_long_chains_take_several_sweeps(opset):
    # chains whose fusions make new casts that later sweeps fuse again, interleaved with other
    # ops and with branches (one sweep of the block sees only the ops there were when it began)
    def build(mb, x, y):
        a = mb.cast(x=x, dtype="fp32")
        a = mb.cast(x=a, dtype="fp16")
        r = mb.relu(x=a)
        a = mb.cast(x=a, dtype="fp32")
        b = mb.cast(x=mb.cast(x=y, dtype="fp32"), dtype="fp16")
        a = mb.cast(x=a, dtype="int32")
        c = mb.cast(x=b, dtype="fp32")
        a = mb.cast(x=a, dtype="fp32")
        d = mb.cast(x=c, dtype="fp16")
        e = mb.cast(x=mb.cast(x=d, dtype="fp32"), dtype="int32")
        f = mb.cast(x=mb.cast(x=mb.cast(x=r, dtype="fp32"), dtype="fp16"), dtype="fp32")
        return a, e, f, mb.add(x=c, y=c)

    cp, mp = check_passes(build, [((4,), "int32"), ((2, 3), "int32")], [P], opset)
    names = [o.name for o in mp.functions["main"].operations if o.op_type == "cast"]
    # fused in a later sweep than the fusion that made its input's cast
    assert "x_to_fp16_to_int32" in names and "x1_to_fp16_to_int32" in names
