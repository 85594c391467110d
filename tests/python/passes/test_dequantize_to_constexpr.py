"""common::dequantize_to_constexpr against coremltools' own pass (op for op), with the numbers
before and after."""

import numpy as np
import pytest
from support.pass_parity import build_both, check_numbers_only, check_passes, ct_run, op_types

NAME = ["common::dequantize_to_constexpr"]
F32 = [((2, 3), "fp32")]
Q = np.array([[-100, -5, 0], [3, 100, 127]], np.int8)
SMALL = np.array([[-8, -5, 0], [3, 7, 1]], np.int8)  # fits int4
USMALL = np.array([[0, 15, 2], [3, 9, 1]], np.uint8)  # fits uint4


def _const_ops(prog):
    return [o for o in prog.functions["main"].operations if o.op_type.startswith("constexpr_")]


def _dtype(prog, name):
    for o in prog.functions["main"].operations:
        if o.outputs[0].name == name:
            return o.outputs[0].dtype.__name__
    raise KeyError(name)


@pytest.mark.parametrize("data,zp", [
    pytest.param(Q, None, id="int8"),
    pytest.param(SMALL, None, id="int8_small"),
    pytest.param(SMALL, np.int8(2), id="int8_small_zero_point"),
    pytest.param(USMALL, None, id="uint8_small"),
    pytest.param(USMALL, np.uint8(3), id="uint8_small_zero_point"),
    pytest.param(Q, np.int8(0), id="int8_zero_zero_point"),
])
@pytest.mark.parametrize("opset", ["iOS17", "iOS18"])
def test_per_tensor(opset, data, zp):
    def build(mb, x):
        kw = {} if zp is None else {"zero_point": zp}
        return mb.add(x=x, y=mb.dequantize(input=data, scale=np.float32(0.25), **kw))

    cp, mp = check_passes(build, F32, NAME, opset=opset)
    (c,) = _const_ops(mp)
    assert c.op_type == ("constexpr_blockwise_shift_scale" if opset == "iOS18" else "constexpr_affine_dequantize")
    assert c.name == "dequantize_0_affine_dequantized"
    assert "dequantize" not in op_types(mp)


def test_ios18_narrows_to_4_bits():
    def build(mb, x, data):
        return mb.add(x=x, y=mb.dequantize(input=data, scale=np.float32(0.5)))

    for data, dt in ((SMALL, "int4"), (USMALL, "uint4"), (Q, "int8"),
                     (np.array([[0, 16, 2], [3, 9, 1]], np.uint8), "uint8")):
        _, mp = check_passes(lambda mb, x, data=data: build(mb, x, data), F32, NAME, opset="iOS18")
        assert _dtype(mp, "dequantize_0_affine_dequantized_data_0") == dt


@pytest.mark.parametrize("opset", ["iOS17", "iOS18"])
def test_per_channel(opset):
    for axis in (0, 1, -1, -2):
        n = Q.shape[axis]
        scale = np.linspace(0.1, 0.5, n).astype(np.float32)
        for data, zp in ((Q, np.arange(n).astype(np.int8)), (SMALL, np.arange(n).astype(np.int8)),
                         (USMALL, np.zeros(n, np.uint8)), (USMALL, None)):
            def build(mb, x, data=data, zp=zp, axis=axis, scale=scale):
                kw = {} if zp is None else {"zero_point": zp}
                return mb.add(x=x, y=mb.dequantize(input=data, scale=scale, axis=axis, **kw))

            check_passes(build, F32, NAME, opset=opset)


@pytest.mark.parametrize("opset", ["iOS17", "iOS18"])
def test_length_one_vectors_and_fp16(opset):
    # per channel along a dim of size 1: iOS17 squeezes scale and zero point to scalars
    def build(mb, x):
        d = mb.dequantize(input=Q[:1], scale=np.array([0.5], np.float32), zero_point=np.array([3], np.int8), axis=0)
        h = mb.dequantize(input=SMALL, scale=np.array([0.5, 0.25, 2], np.float16), axis=1)
        return mb.add(x=x, y=d), mb.add(x=mb.cast(x=x, dtype="fp16"), y=h)

    cp, mp = check_passes(build, F32, NAME, opset=opset)
    assert len(_const_ops(mp)) == 2


def test_rank_1_and_rank_4():
    def build(mb, x):
        a = mb.dequantize(input=np.arange(3, dtype=np.int8), scale=np.float32(0.5))
        w = np.arange(48, dtype=np.int8).reshape(2, 3, 2, 4) - 24
        b = mb.dequantize(input=w, scale=np.array([0.5, 1.0, 2.0], np.float32), axis=1,
                          zero_point=np.array([1, -2, 3], np.int8))
        return mb.add(x=x, y=a), mb.reduce_sum(x=b, axes=[0, 2, 3])

    for opset in ("iOS17", "iOS18"):
        check_passes(build, F32, NAME, opset=opset)


def test_function_output_and_several_readers():
    def build(mb, x):
        d = mb.dequantize(input=Q, scale=np.float32(0.5))
        return mb.add(x=x, y=d), mb.mul(x=x, y=d), d

    for opset in ("iOS17", "iOS18"):
        cp, mp = check_passes(build, F32, NAME, opset=opset)
        assert [v.name for v in mp.functions["main"].outputs][-1] == "dequantize_0"


def test_nested_blocks():
    def build(mb, x):
        p = mb.greater(x=mb.reduce_sum(x=x), y=0.0)
        return mb.cond(pred=p, _true_fn=lambda: mb.add(x=x, y=mb.dequantize(input=Q, scale=np.float32(0.5))),
                       _false_fn=lambda: mb.sub(x=x, y=mb.dequantize(input=SMALL, scale=np.float32(2.0))))

    for opset in ("iOS17", "iOS18"):
        cp, mp = check_passes(build, F32, NAME, opset=opset)
        cond = [o for o in mp.functions["main"].operations if o.op_type == "cond"][0]
        for blk in cond.blocks:
            assert "dequantize" not in [o.op_type for o in blk.operations]


@pytest.mark.parametrize("opset", ["iOS17", "iOS18"])
def test_left_alone(opset):
    def runtime_input(mb, x):
        q = mb.quantize(input=x, scale=np.float32(0.05), output_dtype="int8")
        return mb.dequantize(input=q, scale=np.float32(0.05))

    cp, mp = check_passes(runtime_input, F32, NAME, opset=opset)
    assert "dequantize" in op_types(mp) and not _const_ops(mp)

    def int_input(mb, x):
        return mb.dequantize(input=x, scale=np.float32(0.5), zero_point=np.int8(1))

    cp, mp = check_passes(int_input, [((2, 3), "int8")], NAME, opset=opset)
    assert not _const_ops(mp)


@pytest.mark.parametrize("opset", ["iOS17", "iOS18"])
def test_scalar_data_left_alone_differs_from_coremltools(opset):
    # coremltools' constexpr ops need rank >= 1 (constexpr_affine_dequantize's axis 0 is out of
    # range, constexpr_blockwise_shift_scale refuses a scalar), so its pass raises on a valid
    # program; milkit keeps the dequantize, which runs as an op
    def build(mb, x):
        return mb.add(x=x, y=mb.dequantize(input=np.int8(3), scale=np.float32(0.5)))

    cp, _, _ = build_both(build, F32, opset)
    with pytest.raises(ValueError):
        ct_run(cp, NAME)
    mp = check_numbers_only(build, F32, NAME, opset=opset)
    assert "dequantize" in op_types(mp)


def test_ios18_offset_outside_4_bits_differs_from_coremltools():
    # data fitting int4 with zero point 20: coremltools makes the data int4 and gives the offset
    # 20 the dtype int4, which cannot hold it (the written model would compute with 20 wrapped to
    # 4); milkit keeps both int8
    def build(mb, x):
        return mb.add(x=x, y=mb.dequantize(input=SMALL, scale=np.float32(0.5), zero_point=np.int8(20)))

    cp, _, _ = build_both(build, F32, "iOS18")
    ct_run(cp, NAME)
    assert _dtype_ct(cp, "dequantize_0_affine_dequantized_offset_0") == "int4"
    mp = check_numbers_only(build, F32, NAME, opset="iOS18")
    assert _dtype(mp, "dequantize_0_affine_dequantized_data_0") == "int8"
    assert _dtype(mp, "dequantize_0_affine_dequantized_offset_0") == "int8"
    # an offset that fits narrows with the data, as in coremltools
    def fits(mb, x):
        return mb.add(x=x, y=mb.dequantize(input=SMALL, scale=np.float32(0.5), zero_point=np.int8(-8)))

    _, mp = check_passes(fits, F32, NAME, opset="iOS18")
    assert _dtype(mp, "dequantize_0_affine_dequantized_offset_0") == "int4"


def _dtype_ct(prog, name):
    from coremltools.converters.mil.mil import types

    for o in prog.functions["main"].operations:
        if o.outputs[0].name == name:
            return types.builtin_to_string(o.outputs[0].dtype)
    raise KeyError(name)
