"""Parity of conv, conv_transpose and conv_quantized with coremltools, at every opset, plus
exact symbolic output sizes where coremltools gives up."""

import numpy as np
import pytest
import sympy
from support.parity import ALL_OPSETS, check, check_error
from support.symeval import assert_exact

rng = np.random.default_rng(0)


def W(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


W1 = W(4, 3, 3)
W2 = W(8, 3, 3, 3)
W2G = W(8, 1, 3, 3)      # groups=3 (depthwise x 8/3? no: C_in 3, groups 3 -> weight[1] = 1)
W2K2 = W(8, 3, 2, 2)
W3 = W(4, 3, 3, 3, 3)
B8 = W(8)
B4 = W(4)

# ---------------------------------------------------------------------------------------------
# conv


@pytest.mark.parametrize("kw", [
    dict(),
    dict(strides=[2, 2]),
    dict(pad_type="same"),
    dict(pad_type="same", strides=[2, 3]),
    dict(pad_type="same_lower", strides=[2, 2]),
    dict(pad_type="custom", pad=[1, 2, 0, 3]),
    dict(pad_type="custom", pad=[1, 1, 1, 1], strides=[2, 2], dilations=[2, 1]),
    dict(dilations=[2, 3]),
    dict(pad_type="same", dilations=[2, 2], strides=[2, 2]),
    dict(bias=B8),
    dict(bias=B8, pad_type="valid", strides=[3, 3], groups=1),
])
def test_conv2d(kw):
    check(lambda mb, x: mb.conv(x=x, weight=W2, **kw), [((2, 3, 17, 16), "fp32")], ALL_OPSETS)


def test_conv2d_even_kernel_same_and_same_lower():
    for pt in ["same", "same_lower"]:
        check(lambda mb, x: mb.conv(x=x, weight=W2K2, pad_type=pt, strides=[2, 2]), [((1, 3, 9, 10), "fp32")],
              ALL_OPSETS)


def test_conv_groups():
    check(lambda mb, x: mb.conv(x=x, weight=W2G, groups=3, pad_type="same"), [((1, 3, 8, 8), "fp32")], ALL_OPSETS)
    w = W(6, 2, 3, 3)
    check(lambda mb, x: mb.conv(x=x, weight=w, groups=2), [((1, 4, 8, 8), "fp32")], ALL_OPSETS)


@pytest.mark.parametrize("kw", [dict(), dict(strides=[2]), dict(pad_type="same", strides=[3]),
                                dict(pad_type="custom", pad=[2, 0]), dict(dilations=[3], bias=B4)])
def test_conv1d(kw):
    check(lambda mb, x: mb.conv(x=x, weight=W1, **kw), [((2, 3, 20), "fp32")], ALL_OPSETS)


@pytest.mark.parametrize("kw", [dict(), dict(strides=[1, 2, 3]), dict(pad_type="same", strides=[2, 2, 2]),
                                dict(pad_type="custom", pad=[1, 1, 0, 0, 2, 2], dilations=[1, 2, 1])])
def test_conv3d(kw):
    check(lambda mb, x: mb.conv(x=x, weight=W3, **kw), [((1, 3, 9, 10, 11), "fp32")], ALL_OPSETS)


def test_conv_fp16():
    w16 = W2.astype(np.float16)
    check(lambda mb, x: mb.conv(x=x, weight=w16, bias=B8.astype(np.float16), strides=[2, 2]),
          [((1, 3, 16, 16), "fp16")], ALL_OPSETS)


@pytest.mark.parametrize("xdt,wdt", [("fp16", np.float32), ("fp32", np.float16)])
def test_conv_mixed_precision_from_ios17(xdt, wdt):
    # iOS15/16: x, weight, bias share domain T (both raise); iOS17+: weight/bias in domain U
    w = W2.astype(wdt)
    res = check(lambda mb, x: mb.conv(x=x, weight=w, bias=B8.astype(wdt)), [((1, 3, 8, 8), xdt)], ALL_OPSETS)
    assert res[0] is None and res[1] is None
    assert res[2] is not None and res[3] is not None
    out = res[2].mk_prog.find_ops(op_type="conv", exactly_one=True)[0].outputs[0]
    assert out.dtype.__name__ == xdt


def test_conv_dynamic_weight_and_bias():
    # weight may be a runtime var at every opset; a runtime bias only from iOS17
    check(lambda mb, x, x1: mb.conv(x=x, weight=x1, strides=[2, 2]), [((1, 3, 8, 8), "fp32"), ((8, 3, 3, 3), "fp32")],
          ALL_OPSETS)
    res = check(lambda mb, x, x1: mb.conv(x=x, weight=W2, bias=x1), [((1, 3, 8, 8), "fp32"), ((8,), "fp32")],
                ALL_OPSETS)
    assert res[0] is None and res[2] is not None


def test_conv_dynamic_weight_dilations_error():
    check_error(lambda mb, x, x1: mb.conv(x=x, weight=x1, dilations=[2, 1]),
                [((1, 3, 8, 8), "fp32"), ((8, 3, 3, 3), "fp32")], match=r"conv 'conv_0'.*dynamic.*dilations")
    # weight computed from consts only is const-like: dilations are fine
    check(lambda mb, x: mb.conv(x=x, weight=mb.mul(x=W2, y=2.0), dilations=[2, 1]), [((1, 3, 8, 8), "fp32")],
          ALL_OPSETS)


def test_conv_default_consts_named_and_ordered():
    res = check(lambda mb, x: mb.conv(x=x, weight=W2), [((1, 3, 8, 8), "fp32")], ["iOS17"])[0]
    names = [o.name for o in res.mk_prog.functions["main"].operations]
    assert names == ["conv_0_weight_0", "conv_0_strides_0", "conv_0_pad_type_0", "conv_0_pad_0",
                     "conv_0_dilations_0", "conv_0_groups_0", "conv_0"]


def test_conv_symbolic_batch_and_channels():
    check(lambda mb, x: mb.conv(x=x, weight=W2, bias=B8, pad_type="same", strides=[2, 2]),
          [(("B", 3, 16, 16), "fp32")], ALL_OPSETS)
    # symbolic C_in: coremltools skips the channel checks
    check(lambda mb, x: mb.conv(x=x, weight=W2), [((1, "C", 8, 8), "fp32")], ALL_OPSETS)


def test_conv_symbolic_spatial_valid_is_floor_expression():
    out = assert_exact(lambda mb, x: mb.conv(x=x, weight=W2, strides=[2, 2]), ("B", 3, "H", "W"), "conv")
    H = [s for s in out[2].free_symbols][0]
    assert sympy.simplify(out[2] - (sympy.floor((H - 3) / 2) + 1)) == 0 or all(
        int(out[2].subs(H, h)) == (h - 3) // 2 + 1 for h in range(1, 50))
    assert out[1] == 8


def test_conv_symbolic_valid_kernel3_stride2_form():
    from milkit.symbolic import to_sympy

    res = check(lambda mb, x: mb.conv(x=x, weight=W2, strides=[2, 2]), [((1, 3, "H", 8), "fp32")], ["iOS17"])[0]
    d = res.mk_prog.find_ops(op_type="conv", exactly_one=True)[0].outputs[0].shape[2]
    H = res.mk_prog.functions["main"].inputs["x"].shape[2]
    assert d.kind in ("poly", "floordiv")
    # (H - 3)//2 + 1 canonicalized
    assert d.compare_eq((H - 3) // 2 + 1) and d.compare_eq((H - 1) // 2)
    e = to_sympy(d)
    for h in range(3, 40):
        assert int(e.subs({s: h for s in e.free_symbols})) == (h - 3) // 2 + 1


@pytest.mark.parametrize("kw", [
    dict(pad_type="same", strides=[2, 2]),
    dict(pad_type="same", strides=[3, 1], dilations=[2, 2]),
    dict(pad_type="same_lower", strides=[2, 3]),
    dict(pad_type="custom", pad=[1, 2, 3, 0], strides=[2, 3]),
    dict(pad_type="valid", strides=[3, 2], dilations=[2, 1]),
    dict(pad_type="custom", pad=[0, 0, 4, 4], dilations=[3, 2]),
])
def test_conv_symbolic_spatial_exact(kw):
    assert_exact(lambda mb, x: mb.conv(x=x, weight=W2, **kw), ("B", 3, "H", "W"), "conv")


def test_conv_same_is_ceildiv():
    from milkit.symbolic import to_sympy

    res = check(lambda mb, x: mb.conv(x=x, weight=W2, pad_type="same", strides=[3, 3]), [((1, 3, "H", "W"), "fp32")],
                ["iOS17"])[0]
    d = res.mk_prog.find_ops(op_type="conv", exactly_one=True)[0].outputs[0].shape[2]
    H = res.mk_prog.functions["main"].inputs["x"].shape[2]
    assert d.compare_eq((H + 2) // 3) and d.compare_eq(H.ceildiv(3))
    assert str(d) == str((H + 2) // 3)
    e = to_sympy(d)
    for h in range(1, 30):
        assert int(e.subs({s: h for s in e.free_symbols})) == -(-h // 3)


def test_conv_1d_and_3d_symbolic_exact():
    assert_exact(lambda mb, x: mb.conv(x=x, weight=W1, strides=[2], pad_type="custom", pad=[1, 0]), (1, 3, "L"), "conv")
    assert_exact(lambda mb, x: mb.conv(x=x, weight=W3, strides=[2, 1, 2], pad_type="same"), (1, 3, "D", 5, "H"),
                 "conv", values=range(1, 20))


# errors


def test_conv_error_groups_not_dividing():
    check_error(lambda mb, x: mb.conv(x=x, weight=W(6, 2, 3, 3), groups=2), [((1, 5, 8, 8), "fp32")],
                match=r"conv 'conv_0'.*input channels 5 not divisible by groups 2")


def test_conv_error_weight_channel_mismatch():
    check_error(lambda mb, x: mb.conv(x=x, weight=W2), [((1, 4, 8, 8), "fp32")],
                match=r"conv 'conv_0'.*C_in / groups = 4/1 != weight\[1\] \(3\)")
    check_error(lambda mb, x: mb.conv(x=x, weight=W(6, 2, 3, 3), groups=4), [((1, 4, 8, 8), "fp32")],
                match=r"C_in / groups = 4/4 != weight\[1\] \(2\)")


def test_conv_error_bias():
    check_error(lambda mb, x: mb.conv(x=x, weight=W2, bias=B4), [((1, 3, 8, 8), "fp32")],
                match=r"conv 'conv_0'.*'bias'.*bias values 4 not equal to # output channels 8")


def test_conv_error_pad_length():
    check_error(lambda mb, x: mb.conv(x=x, weight=W2, pad_type="custom", pad=[1, 1, 1]), [((1, 3, 8, 8), "fp32")],
                match=r"conv 'conv_0'.*pad \(length 3\)")


def test_conv_error_strides_length():
    check_error(lambda mb, x: mb.conv(x=x, weight=W2, strides=[1, 1, 1]), [((1, 3, 8, 8), "fp32")],
                match=r"conv 'conv_0'.*strides \[1, 1, 1\] \(length 3\)")


def test_conv_error_bad_pad_type():
    check_error(lambda mb, x: mb.conv(x=x, weight=W2, pad_type="full"), [((1, 3, 8, 8), "fp32")],
                match=r"conv 'conv_0'.*pad_type.*\"full\"")
    # conv's pad_type is case sensitive (the pools lower-case theirs)
    check_error(lambda mb, x: mb.conv(x=x, weight=W2, pad_type="SAME"), [((1, 3, 8, 8), "fp32")],
                match=r"conv 'conv_0'.*\"SAME\"")


def test_conv_error_kernel_larger_than_input():
    check_error(lambda mb, x: mb.conv(x=x, weight=W2), [((1, 3, 8, 2), "fp32")],
                match=r"conv 'conv_0'.*spatial dimension 1 has invalid output size 0")
    check_error(lambda mb, x: mb.conv(x=x, weight=W2, dilations=[4, 1]), [((1, 3, 8, 8), "fp32")],
                match=r"conv 'conv_0'.*spatial dimension 0 .*effective kernel size 9")


def test_conv_same_lower_not_in_ios15():
    res = check(lambda mb, x: mb.conv(x=x, weight=W2, pad_type="same_lower"), [((1, 3, 8, 8), "fp32")], ALL_OPSETS)
    assert res[0] is None and all(r is not None for r in res[1:])
    check_error(lambda mb, x: mb.conv(x=x, weight=W2, pad_type="same_lower"), [((1, 3, 8, 8), "fp32")],
                opset="iOS15", match=r"conv 'conv_0'.*same_lower.*iOS15")


def test_conv_error_rank_and_dtype():
    check_error(lambda mb, x: mb.conv(x=x, weight=W(4, 3)), [((1, 3), "fp32")], match=r"conv 'conv_0'")
    check_error(lambda mb, x: mb.conv(x=x, weight=W2), [((1, 3, 8, 8), "int32")], match=r"conv 'conv_0'.*'x'.*int32")
    check_error(lambda mb, x: mb.conv(x=x, weight=W2, strides=[2, 2]), [((1, 3, 8, 8), "fp16")], opset="iOS16",
                match=r"conv 'conv_0'.*'weight'.*fp32.*fp16")


# ---------------------------------------------------------------------------------------------
# conv_transpose

WT2 = W(3, 4, 3, 3)    # [C_in, C_out/groups, K...]
WT1 = W(3, 4, 3)
WT3 = W(3, 2, 2, 3, 3)


@pytest.mark.parametrize("kw", [
    dict(),
    dict(strides=[2, 2]),
    dict(pad_type="same", strides=[2, 3]),
    dict(pad_type="custom", pad=[1, 0, 2, 1], strides=[2, 2]),
    dict(dilations=[2, 1], strides=[2, 1]),
    dict(bias=B4),
    dict(groups=3, bias=W(12)),
    dict(output_shape=[2, 4, 17, 15], strides=[2, 2]),
])
def test_conv_transpose_2d(kw):
    check(lambda mb, x: mb.conv_transpose(x=x, weight=WT2, **kw), [((2, 3, 8, 7), "fp32")], ALL_OPSETS)


def test_conv_transpose_1d_3d():
    check(lambda mb, x: mb.conv_transpose(x=x, weight=WT1, strides=[3], pad_type="custom", pad=[1, 1]),
          [((1, 3, 10), "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.conv_transpose(x=x, weight=WT3, strides=[1, 2, 2], pad_type="same"),
          [((1, 3, 4, 5, 6), "fp32")], ALL_OPSETS)


def test_conv_transpose_symbolic():
    # coremltools is exact here too: the expressions are compared with sympy by the harness
    for kw in [dict(strides=[2, 2]), dict(pad_type="same", strides=[2, 3]),
               dict(pad_type="custom", pad=[1, 2, 0, 1], strides=[3, 2], dilations=[2, 1])]:
        res = check(lambda mb, x: mb.conv_transpose(x=x, weight=WT2, **kw), [(("B", 3, "H", "W"), "fp32")], ALL_OPSETS)
        assert not res[0].improved


def test_conv_transpose_symbolic_expression():
    from milkit.symbolic import to_sympy

    res = check(lambda mb, x: mb.conv_transpose(x=x, weight=WT2, strides=[2, 2], pad_type="custom", pad=[1, 1, 0, 0]),
                [((1, 3, "H", 4), "fp32")], ["iOS17"])[0]
    d = res.mk_prog.find_ops(op_type="conv_transpose", exactly_one=True)[0].outputs[0].shape[2]
    H = res.mk_prog.functions["main"].inputs["x"].shape[2]
    assert d.compare_eq(2 * (H - 1) + 3 - 2)
    e = to_sympy(d)
    assert [int(e.subs({s: h for s in e.free_symbols})) for h in (1, 2, 5)] == [1, 3, 9]


def test_conv_transpose_mixed_and_dynamic_weight_ios17():
    w16 = WT2.astype(np.float16)
    res = check(lambda mb, x: mb.conv_transpose(x=x, weight=w16, strides=[2, 2]), [((1, 3, 5, 5), "fp32")],
                ALL_OPSETS)
    assert res[1] is None and res[2] is not None
    # weight must be const before iOS17
    res = check(lambda mb, x, x1: mb.conv_transpose(x=x, weight=x1), [((1, 3, 5, 5), "fp32"), ((3, 4, 3, 3), "fp32")],
                ALL_OPSETS)
    assert res[1] is None and res[2] is not None


def test_conv_transpose_errors():
    check_error(lambda mb, x: mb.conv_transpose(x=x, weight=WT2, bias=B8), [((1, 3, 5, 5), "fp32")],
                match=r"conv_transpose 'conv_transpose_0'.*bias values 8 not equal to # output channels 4")
    check_error(lambda mb, x: mb.conv_transpose(x=x, weight=WT2, pad_type="same_lower"), [((1, 3, 5, 5), "fp32")],
                match=r"conv_transpose 'conv_transpose_0'.*same_lower")
    check_error(lambda mb, x: mb.conv_transpose(x=x, weight=WT2, output_shape=[1, 5, 7, 7]), [((1, 3, 5, 5), "fp32")],
                match=r"output_shape\[1\] must equal C_out = 4")
    # a symbolic batch never equals a given output_shape[0]
    check_error(lambda mb, x: mb.conv_transpose(x=x, weight=WT2, output_shape=[1, 4, 7, 7]),
                [(("B", 3, 5, 5), "fp32")], match=r"output_shape\[0\] must equal the batch dim")
    check_error(lambda mb, x: mb.conv_transpose(x=x, weight=WT2, strides=[2]), [((1, 3, 5, 5), "fp32")],
                match=r"'strides'")
    # at iOS17 the bias may be a runtime var, but coremltools reads its value: rejected
    check_error(lambda mb, x, x1: mb.conv_transpose(x=x, weight=WT2, bias=x1),
                [((1, 3, 5, 5), "fp32"), ((4,), "fp32")], match=r"'bias'.*compile-time constant")


# ---------------------------------------------------------------------------------------------
# conv_quantized

WQ = rng.integers(0, 255, (8, 3, 3, 3)).astype(np.uint8)


def test_conv_quantized():
    check(lambda mb, x: mb.conv_quantized(x=x, weight=WQ, quantization_type="linear", quant_scale=np.float32(0.1),
                                          quant_bias=np.float32(0.0), strides=[2, 2], pad_type="same"),
          [(("B", 3, 16, 16), "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.conv_quantized(x=x, weight=WQ, quantization_type="lut", nbits=4,
                                          quant_scale=np.float16(0.1), quant_bias=np.float16(0.0),
                                          bias=np.arange(8, dtype=np.uint8)),
          [((1, 3, 8, 8), "fp16")], ALL_OPSETS)
    check_error(lambda mb, x: mb.conv_quantized(x=x, weight=WQ.astype(np.int8), quantization_type="linear",
                                                quant_scale=np.float32(0.1), quant_bias=np.float32(0.0)),
                [((1, 3, 8, 8), "fp32")], match=r"conv_quantized 'conv_quantized_0'.*'weight'.*int8")
    assert_exact(lambda mb, x: mb.conv_quantized(x=x, weight=WQ, quantization_type="linear",
                                                 quant_scale=np.float32(0.1), quant_bias=np.float32(0.0),
                                                 strides=[2, 1]), (1, 3, "H", "W"), "conv_quantized",
                 values=range(1, 16), min_checked=5)


def test_conv_symbolic_kernel_of_dynamic_weight():
    """Deliberate disagreement: with a known input size and a symbolic kernel size (a runtime
    weight), coremltools fails ('Cannot convert expression to float'); milkit gives the exact size."""
    import coremltools as ct
    import milkit
    from coremltools.converters.mil import Builder as cmb
    from coremltools.converters.mil.mil import get_new_symbol as c_sym
    from coremltools.converters.mil.mil import types as ctypes
    from milkit import Builder as mb
    from milkit import types
    from milkit.symbolic import to_sympy

    ck = c_sym()
    with pytest.raises(TypeError):
        @cmb.program(input_specs=[cmb.TensorSpec((1, 3, 8, 8), ctypes.fp32), cmb.TensorSpec((4, 3, ck, ck), ctypes.fp32)],
                     opset_version=ct.target.iOS17)
        def cprog(x, w):
            return cmb.conv(x=x, weight=w, strides=[2, 2])

    K = milkit.get_new_symbol("K")

    @mb.program(input_specs=[mb.TensorSpec((1, 3, 8, 8), types.fp32), mb.TensorSpec((4, 3, K, K), types.fp32)],
                opset_version=milkit.target.iOS17)
    def prog(x, w):
        return mb.conv(x=x, weight=w, strides=[2, 2])

    d = prog.find_ops(op_type="conv", exactly_one=True)[0].outputs[0].shape[2]
    e = to_sympy(d)
    assert [int(e.subs({s: k for s in e.free_symbols})) for k in range(1, 9)] == [(8 - k) // 2 + 1 for k in range(1, 9)]


def test_conv_error_scalar_strides():
    check_error(lambda mb, x: mb.conv(x=x, weight=W1, strides=2), [((1, 3, 8), "fp32")],
                match=r"conv 'conv_0'.*'strides' must be a list")
    check_error(lambda mb, x: mb.conv_transpose(x=x, weight=WT1, dilations=1), [((1, 3, 8), "fp32")],
                match=r"conv_transpose 'conv_transpose_0'.*'dilations' must be a list")
