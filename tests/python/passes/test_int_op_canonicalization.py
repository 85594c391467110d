"""common::int_op_canonicalization against coremltools on dequantize -> reshape -> quantize chains,
and on programs without such a chain (where nothing changes)."""

import numpy as np
import pytest
from support.pass_parity import build_both, check_numbers_only, check_passes, ct_run, op_types

INTOP = "common::int_op_canonicalization"


def _ops(prog):
    return [t for t in op_types(prog) if t != "const"]


ZP, SCALE = np.int8(3), np.float32(0.5)


def _chain(mb, x, zp=ZP, scale=SCALE, zp2=ZP, scale2=SCALE, dt="int8"):
    q = mb.quantize(input=x, zero_point=zp, scale=scale, output_dtype=dt)
    dq = mb.dequantize(input=q, zero_point=zp, scale=scale)
    r = mb.reshape(x=dq, shape=[3, 2])
    return mb.quantize(input=r, zero_point=zp2, scale=scale2, output_dtype=dt)


@pytest.mark.parametrize("opset", ["iOS17", "iOS18"])
@pytest.mark.parametrize("dt", ["fp32", "fp16"])
def test_int_op_canonicalization(opset, dt):
    npdt = np.float32 if dt == "fp32" else np.float16

    def build(mb, x):
        out = _chain(mb, x, scale=npdt(0.5), scale2=npdt(0.5))
        return mb.dequantize(input=out, zero_point=np.int8(3), scale=npdt(0.5))

    cp, mp = check_passes(build, [((2, 3), dt)], [INTOP], opset=opset)
    assert _ops(cp) == _ops(mp) == ["quantize", "dequantize", "reshape", "dequantize"]


def test_int_op_canonicalization_block_output_and_shared_dequantize():
    def build(mb, x):
        q = mb.quantize(input=x, scale=np.float32(0.1), output_dtype="uint8")
        dq = mb.dequantize(input=q, scale=np.float32(0.1))
        a = mb.quantize(input=mb.reshape(x=dq, shape=[-1]), scale=np.float32(0.1), output_dtype="uint8")
        return a, mb.relu(x=dq)  # a keeps its name; the dequantize stays for relu

    cp, mp = check_passes(build, [(("S", 3), "fp32")], [INTOP])
    assert _ops(mp) == ["quantize", "dequantize", "reshape", "relu"]


def test_int_op_canonicalization_negative():
    def build(mb, x):
        q = mb.quantize(input=x, scale=np.float32(0.1), output_dtype="int8")
        dq = mb.dequantize(input=q, scale=np.float32(0.1))
        r = mb.reshape(x=dq, shape=[3, 2])
        a = mb.quantize(input=r, scale=np.float32(0.1), output_dtype="int8")
        b = mb.relu(x=r)  # the reshape has two users
        c = mb.quantize(input=mb.reshape(x=x, shape=[6]), scale=np.float32(0.1), output_dtype="int8")  # no dequantize
        d = mb.quantize(input=mb.transpose(x=dq, perm=[1, 0]), scale=np.float32(0.1), output_dtype="int8")
        return a, b, c, d

    cp, mp = check_passes(build, [((2, 3), "fp32")], [INTOP])
    assert _ops(mp).count("reshape") == 2


@pytest.mark.parametrize("kw", [dict(scale2=np.float32(0.25)), dict(zp2=np.int8(1)),
                                dict(zp=np.uint8(3), zp2=np.uint8(3), dt="uint8")])
def test_int_op_canonicalization_differs_from_coremltools(kw):
    # coremltools drops the pair whatever the quantize's parameters; with another scale or zero
    # point the result changes, so milkit requires them equal (the uint8 case shows it does rewrite
    # equal parameters of another dtype)
    def build(mb, x):
        return mb.dequantize(input=_chain(mb, x, **kw), zero_point=kw.get("zp2", np.int8(3)),
                             scale=kw.get("scale2", np.float32(0.5)))

    specs = [((2, 3), "fp32")]
    if "dt" in kw:
        cp, mp = check_passes(build, specs, [INTOP])
        assert "reshape" in _ops(mp) and _ops(mp).count("quantize") == 1
        return
    cp, _, _ = build_both(build, specs)
    ct_run(cp, [INTOP])
    assert _ops(cp).count("quantize") == 1
    mp = check_numbers_only(build, specs, [INTOP])
    assert _ops(mp).count("quantize") == 2


@pytest.mark.parametrize("opset", ["iOS16", "iOS17", "iOS18"])
def test_int_op_canonicalization_without_quantization(opset):
    # no dequantize -> reshape -> quantize chain: nothing changes
    def build(mb, x):
        r = mb.reshape(x=mb.cast(x=x, dtype="int32"), shape=[3, 2])
        return mb.reshape(x=x, shape=[-1]), r

    cp, mp = check_passes(build, [((2, 3), "fp32")], [INTOP], opset=opset)
    assert _ops(mp) == ["cast", "reshape", "reshape"]
