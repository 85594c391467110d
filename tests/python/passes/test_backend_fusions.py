"""mil_backend::fuse_activation_silu, mil_backend::fuse_pow2_sqrt and
nn_backend::handle_unused_inputs against coremltools."""

import numpy as np
import pytest
from support.parity import ALL_OPSETS
from support.pass_parity import build_both, check_passes, ct_run, op_types

SILU = "mil_backend::fuse_activation_silu"
POW = "mil_backend::fuse_pow2_sqrt"
UNUSED = "nn_backend::handle_unused_inputs"


@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_silu(opset):
    def build(mb, x, x1):
        a = mb.mul(x=x, y=mb.sigmoid(x=x))  # fused
        b = mb.mul(x=mb.sigmoid(x=a), y=a)  # fused (either order), chains
        s = mb.sigmoid(x=b)
        c = mb.mul(x=b, y=s)
        d = mb.add(x=s, y=1.0)  # s has two users: not fused
        e = mb.mul(x=x1, y=mb.sigmoid(x=x))  # other input: not fused
        out_sig = mb.sigmoid(x=x1)  # a block output: not fused
        return mb.add(x=c, y=d), e, out_sig, mb.mul(x=x1, y=out_sig)

    cp, mp = check_passes(build, [(("S", 3), "fp32"), (("S", 3), "fp32")], [SILU], opset)
    assert op_types(mp).count("silu") == 2


def test_silu_output_keeps_name():
    cp, mp = check_passes(lambda mb, x: mb.mul(x=x, y=mb.sigmoid(x=x), name="out"), [((2,), "fp16")], [SILU])
    assert [o.name for o in mp.functions["main"].operations] == ["out"]


def _pow2_build(mb, x):
    a = mb.sqrt(x=mb.pow(x=x, y=2.0))  # fused: abs(x)
    b = mb.pow(x=mb.sqrt(x=a), y=np.array([2.0, 2.0, 2.0], np.float32))  # pow(sqrt(.), 2): kept
    c = mb.sqrt(x=mb.pow(x=b, y=3.0))  # not 2
    p = mb.pow(x=c, y=2.0)
    d = mb.add(x=mb.sqrt(x=p), y=p)  # pow has two users
    return d, mb.sqrt(x=mb.pow(x=x, y=2.0), name="out")


@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_pow2_sqrt(opset):
    """milkit differs from coremltools on purpose: coremltools turns sqrt(pow(x, 2)) and
    pow(sqrt(x), 2) into identity(x), which is wrong for x < 0 (|x| and NaN); milkit makes the
    first abs(x) and keeps the second, so the program computes the same numbers (checked)."""
    import milkit
    from milkit import Builder as mb
    from milkit import types
    from milkit.passes import apply_pass
    from support.pass_parity import assert_same_numbers

    def make():
        return mb.program(input_specs=[mb.TensorSpec(shape=(2, 3), dtype=types.fp32)],
                          opset_version=getattr(milkit.target, opset))(lambda x: _pow2_build(mb, x))

    before, prog = make(), make()
    apply_pass(prog, POW)
    ops = op_types(prog)
    assert ops.count("abs") == 2 and ops.count("identity") == 0
    assert ops.count("pow") == 3 and ops.count("sqrt") == 3
    assert prog.functions["main"].outputs[1].name == "out"
    assert_same_numbers(before, prog, [((2, 3), "fp32")], [POW])


def test_pow2_sqrt_coremltools_changes_numbers():
    """The reason for the difference: coremltools' own pass makes sqrt(pow(x, 2)) the identity."""
    cp, _, _ = build_both(lambda mb, x: mb.sqrt(x=mb.pow(x=x, y=2.0)), [((3,), "fp32")])
    ct_run(cp, [POW])
    assert [t for t in op_types(cp) if t != "const"] == ["identity"]  # |x| became x: wrong for x < 0


@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_handle_unused_inputs(opset):
    def build(mb, x, x1, x2):
        return mb.add(x=x1, y=1.0), x2

    cp, mp = check_passes(build, [((2,), "fp32"), ((2,), "fp32"), ((3,), "int32")], [UNUSED], opset)
    assert [o.name for o in mp.functions["main"].operations if o.op_type == "identity"] == ["x_tmp", "x2_tmp"]
