"""common::dequantize_quantize_pair_elimination against coremltools' own pass (op for op), with the
numbers before and after."""

import numpy as np
from support.pass_parity import check_passes, op_types

NAME = ["common::dequantize_quantize_pair_elimination"]
I8 = [((2, 3), "int8")]


def test_pair_removed():
    def build(mb, x):
        d = mb.dequantize(input=x, scale=np.float32(0.5), zero_point=np.int8(1))
        q = mb.quantize(input=d, scale=np.float32(0.5), zero_point=np.int8(1), output_dtype="int8")
        return mb.dequantize(input=q, scale=np.float32(0.25))

    cp, mp = check_passes(build, I8, NAME, opset="iOS17")
    assert op_types(mp).count("quantize") == 0


def test_pair_kept_when_params_differ_or_dequantize_is_read_elsewhere():
    def differ(mb, x):
        d = mb.dequantize(input=x, scale=np.float32(0.5))
        q = mb.quantize(input=d, scale=np.float32(0.25), output_dtype="int8")
        return mb.dequantize(input=q, scale=np.float32(0.25))

    cp, mp = check_passes(differ, I8, NAME, opset="iOS17")
    assert "quantize" in op_types(mp)

    def shared(mb, x):
        d = mb.dequantize(input=x, scale=np.float32(0.5))
        q = mb.quantize(input=d, scale=np.float32(0.5), output_dtype="int8")
        return mb.dequantize(input=q, scale=np.float32(0.25)), mb.relu(x=d)

    cp, mp = check_passes(shared, I8, NAME, opset="iOS17")
    assert "dequantize" in op_types(mp) and "quantize" not in op_types(mp)


def test_per_axis_and_zero_point_presence():
    s = np.array([0.5, 0.25], np.float32)

    def same(mb, x):
        d = mb.dequantize(input=x, scale=s, axis=0)
        q = mb.quantize(input=d, scale=s, axis=0, output_dtype="int8")
        return mb.dequantize(input=q, scale=np.float32(0.125))

    check_passes(same, I8, NAME, opset="iOS17")

    def zp_only_on_one(mb, x):
        d = mb.dequantize(input=x, scale=np.float32(0.5), zero_point=np.int8(0))
        q = mb.quantize(input=d, scale=np.float32(0.5), output_dtype="int8")
        return mb.dequantize(input=q, scale=np.float32(0.125))

    cp, mp = check_passes(zp_only_on_one, I8, NAME, opset="iOS17")
    assert "quantize" in op_types(mp)


def test_dequantize_output_of_the_function_is_kept():
    def build(mb, x):
        d = mb.dequantize(input=x, scale=np.float32(0.5))
        q = mb.quantize(input=d, scale=np.float32(0.5), output_dtype="int8")
        return d, mb.dequantize(input=q, scale=np.float32(0.25))

    cp, mp = check_passes(build, I8, NAME, opset="iOS17")
    assert "quantize" in op_types(mp)
