"""common::merge_consecutive_paddings and common::fuse_pad_conv against coremltools."""

import numpy as np
import pytest
from support.pass_parity import check_passes, op_types


def _r(*shape, seed=0, dt=np.float32):
    return np.random.RandomState(seed).randn(*shape).astype(dt)


MCP = "common::merge_consecutive_paddings"


@pytest.mark.parametrize("dt", ["fp32", "fp16"])
def test_merge_consecutive_paddings(dt):
    cv = np.float32(0.5) if dt == "fp32" else np.float16(0.5)

    def build(mb, x):
        # explicit constant_val: coremltools fails on fp16 with the default one
        a = mb.pad(x=mb.pad(x=x, pad=[1, 1], mode="reflect", constant_val=cv), pad=[1, 1, 0, 0], mode="reflect")
        b = mb.pad(x=mb.pad(x=mb.pad(x=x, pad=[1, 2], constant_val=cv), pad=[0, 0, 2, 1], constant_val=cv),
                   pad=[0, 0, 1, 1, 1, 1], constant_val=cv, name="out_b")  # chain of three
        c = mb.pad(x=mb.pad(x=x, pad=[1, 0], mode="replicate", constant_val=cv), pad=[0, 1], mode="replicate")
        return a, b, c

    cp, mp = check_passes(build, [(("S", 2, 6, 8), dt)], [MCP])
    assert op_types(mp).count("pad") == 3


def test_merge_consecutive_paddings_negative():
    def build(mb, x):
        a = mb.pad(x=mb.pad(x=x, pad=[1, 1], constant_val=1.0), pad=[1, 1], constant_val=2.0)  # values differ
        b = mb.pad(x=mb.pad(x=x, pad=[1, 1], mode="reflect"), pad=[1, 0], mode="reflect")  # same amount twice
        c = mb.pad(x=mb.pad(x=x, pad=[1, 1], mode="reflect"), pad=[0, 0, 1, 1], mode="replicate")  # modes
        p = mb.pad(x=x, pad=[1, 1])
        d = mb.add(x=mb.pad(x=p, pad=[1, 1]), y=1.0)
        return a, b, c, d, mb.relu(x=p)  # p has two users

    cp, mp = check_passes(build, [(("S", 2, 6, 8), "fp32")], [MCP])
    assert op_types(mp).count("pad") == 8


PC = "common::fuse_pad_conv"


@pytest.mark.parametrize("dt", ["fp32", "fp16"])
def test_pad_conv(dt):
    npdt = np.float32 if dt == "fp32" else np.float16

    def build(mb, x):
        w = _r(4, 3, 3, 3, dt=npdt)
        p = mb.pad(x=x, pad=[1, 1, 2, 2, 0, 0], mode="constant", constant_val=npdt(0.0))
        a = mb.conv(x=mb.transpose(x=p, perm=[0, 3, 1, 2]), weight=w)
        p2 = mb.pad(x=x, pad=[1, 2, 0, 0], mode="reflect", constant_val=npdt(0.0))
        t1 = mb.transpose(x=p2, perm=[0, -1, 1, 2], name="t1")
        b = mb.conv(x=t1, weight=w)
        return a, b, mb.relu(x=t1)

    cp, mp = check_passes(build, [(("S", 6, 6, 3), dt)], [PC])
    assert op_types(mp).index("transpose") < op_types(mp).index("pad")


def test_pad_conv_two_transposes():
    # coremltools walks the transposes in set order (not deterministic), so only the result's shape
    # is compared here: both transposes get their own transpose -> pad.
    from milkit.passes import apply_pass
    from support.pass_parity import build_both

    def build(mb, x):
        p = mb.pad(x=x, pad=[1, 2, 0, 0], mode="reflect")
        t1 = mb.transpose(x=p, perm=[0, -1, 1, 2])
        t2 = mb.transpose(x=p, perm=[0, 3, 2, 1])
        return mb.conv(x=t1, weight=_r(4, 3, 1, 1)), mb.conv_transpose(x=t2, weight=_r(3, 2, 1, 1))

    cp, mp, _ = build_both(build, [(("S", 6, 6, 3), "fp32")])
    apply_pass(mp, PC)
    mp.validate()
    ops = [o for o in mp.functions["main"].operations if o.op_type in ("transpose", "pad")]
    assert [o.op_type for o in ops] == ["transpose", "pad", "transpose", "pad"]
    assert [list(o.pad.val) for o in ops if o.op_type == "pad"] == [[0, 0, 1, 2], [1, 2, 0, 0]]


def test_pad_conv_negative():
    def build(mb, x):
        w = _r(4, 3, 3, 3)
        p = mb.pad(x=x, pad=[1, 1, 2, 2, 0, 0])
        a = mb.conv(x=mb.transpose(x=p, perm=[0, 3, 1, 2]), weight=w)
        b = mb.relu(x=p)  # another user
        p2 = mb.pad(x=x, pad=[1, 1, 0, 0])
        c = mb.relu(x=mb.transpose(x=p2, perm=[0, 3, 1, 2]))  # no conv after the transpose
        p3 = mb.pad(x=x, pad=[1, 1, 0, 0])
        d = mb.conv(x=mb.transpose(x=p3, perm=[0, 3, 1, 2]), weight=w)
        return a, b, c, d, p3  # p3 is a block output

    cp, mp = check_passes(build, [(("S", 6, 6, 3), "fp32")], [PC])
    assert op_types(mp).count("pad") == 3


def test_merge_consecutive_paddings_fp16_default_constant_val():
    # coremltools fails here (it re-creates the default constant_val as fp32); milkit merges
    from milkit.passes import apply_pass
    from support.pass_parity import build_both

    def build(mb, x):
        return mb.pad(x=mb.pad(x=x, pad=[1, 1], mode="reflect"), pad=[1, 1, 0, 0], mode="reflect")

    cp, mp, _ = build_both(build, [(("S", 2, 6, 8), "fp16")])
    apply_pass(mp, MCP)
    mp.validate()
    pads = [o for o in mp.functions["main"].operations if o.op_type == "pad"]
    assert len(pads) == 1 and list(pads[0].pad.val) == [1, 1, 1, 1]
