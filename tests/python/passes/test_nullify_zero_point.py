"""common::nullify_redundant_quantization_zero_point against coremltools' own pass (op for op), with
the numbers before and after."""

import numpy as np
from support.pass_parity import check_passes, op_types

NAME = ["common::nullify_redundant_quantization_zero_point"]
F32 = [((2, 3), "fp32")]
I8 = [((2, 3), "int8")]
Q = np.array([[-128, -5, 0], [3, 100, 127]], np.int8)


def test_zero_zero_point_is_dropped():
    def build(mb, x):
        q = mb.quantize(input=x, scale=np.float32(0.1), zero_point=np.int8(0), output_dtype="int8")
        return mb.dequantize(input=q, scale=np.float32(0.1), zero_point=np.int8(0))

    cp, mp = check_passes(build, F32, NAME, opset="iOS17")
    for op in mp.functions["main"].operations:
        if op.op_type in ("quantize", "dequantize"):
            assert "zero_point" not in op.inputs


def test_const_dequantize_128_moves_into_the_const():
    for zp, dt in ((np.int8(-128), np.int8), (np.uint8(128), np.uint8)):
        data = Q if dt == np.int8 else (Q.astype(np.int16) + 128).astype(np.uint8)

        def build(mb, x, zp=zp, data=data):
            return mb.add(x=x, y=mb.dequantize(input=data, scale=np.float32(0.5), zero_point=zp))

        check_passes(build, F32, NAME, opset="iOS17")


def test_quantize_dequantize_128_pair():
    def build(mb, x):
        q = mb.quantize(input=x, scale=np.float32(0.05), zero_point=np.int8(-128), output_dtype="int8")
        return mb.dequantize(input=q, scale=np.float32(0.05), zero_point=np.int8(-128))

    cp, mp = check_passes(build, F32, NAME, opset="iOS17")
    assert "uint8" in str(mp)

    def per_axis(mb, x):
        zp = np.array([128, 128], np.uint8)
        q = mb.quantize(input=x, scale=np.array([0.1, 0.2], np.float32), zero_point=zp, axis=0,
                        output_dtype="uint8")
        return mb.dequantize(input=q, scale=np.array([0.1, 0.2], np.float32), zero_point=zp, axis=0)

    check_passes(per_axis, F32, NAME, opset="iOS17")


def test_left_alone():
    def other_zp(mb, x):
        q = mb.quantize(input=x, scale=np.float32(0.05), zero_point=np.int8(-128), output_dtype="int8")
        return mb.dequantize(input=q, scale=np.float32(0.05), zero_point=np.int8(3))

    cp, mp = check_passes(other_zp, F32, NAME, opset="iOS17")
    assert op_types(mp).count("quantize") == 1

    def two_readers(mb, x):
        q = mb.quantize(input=x, scale=np.float32(0.05), zero_point=np.int8(-128), output_dtype="int8")
        return (mb.dequantize(input=q, scale=np.float32(0.05), zero_point=np.int8(-128)),
                mb.dequantize(input=q, scale=np.float32(0.1), zero_point=np.int8(-128)))

    check_passes(two_readers, F32, NAME, opset="iOS17")

    def runtime_input(mb, x):
        return mb.dequantize(input=x, scale=np.float32(0.5), zero_point=np.int8(-128))

    check_passes(runtime_input, I8, NAME, opset="iOS17")
