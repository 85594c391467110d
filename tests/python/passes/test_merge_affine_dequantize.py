"""common::merge_affine_dequantize_with_consecutive_ops against coremltools' own pass (op for op),
with the numbers before and after."""

import numpy as np
import pytest
from support.pass_parity import build_both, check_numbers_only, check_passes, ct_run, op_types

NAME = ["common::merge_affine_dequantize_with_consecutive_ops"]
F32 = [((2, 3), "fp32")]
D = (np.arange(24).reshape(2, 3, 4) - 12).astype(np.int8)
U = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)


def _ops(prog):
    return [t for t in op_types(prog) if t != "const"]


ZP1 = np.int8(1)


def _per_tensor(mb, data=D, zp=ZP1, axis=0):
    return mb.constexpr_affine_dequantize(quantized_data=data, zero_point=zp, scale=np.float32(0.5), axis=axis)


def _out(mb, x, w):
    return mb.add(x=mb.reduce_sum(x=x), y=w)


@pytest.mark.parametrize("opset", ["iOS16", "iOS17"])
def test_per_tensor_chain(opset):
    def build(mb, x):
        w = mb.transpose(x=_per_tensor(mb), perm=[2, 0, 1])
        w = mb.expand_dims(x=w, axes=[0])
        return _out(mb, x, mb.squeeze(x=w))

    cp, mp = check_passes(build, F32, NAME, opset=opset)
    assert _ops(mp) == ["constexpr_affine_dequantize", "reduce_sum", "add"]
    assert [o.name for o in mp.functions["main"].operations if o.op_type.startswith("constexpr")] == ["squeeze_0"]

    def reshapes(mb, x):
        w = mb.reshape(x=_per_tensor(mb, data=U, zp=np.uint8(3), axis=-1), shape=[4, 6])
        w = mb.squeeze(x=mb.expand_dims(x=w, axes=[1, -1]), axes=[-1])
        return _out(mb, x, mb.transpose(x=w, perm=[2, 1, 0]))

    cp, mp = check_passes(reshapes, F32, NAME, opset=opset)
    assert _ops(mp) == ["constexpr_affine_dequantize", "reduce_sum", "add"]


@pytest.mark.parametrize("opset", ["iOS16", "iOS17", "iOS18"])
def test_per_channel_takes_only_transposes(opset):
    def build(mb, x):
        w = mb.constexpr_affine_dequantize(quantized_data=D, zero_point=np.array([1, 2, 3], np.int8),
                                           scale=np.array([1, 2, 3], np.float32), axis=-2)
        w = mb.transpose(x=mb.transpose(x=w, perm=[2, 0, 1]), perm=[0, 2, 1])
        return _out(mb, x, mb.reshape(x=w, shape=[-1]))

    cp, mp = check_passes(build, F32, NAME, opset=opset)
    assert _ops(mp) == ["constexpr_affine_dequantize", "reshape", "reduce_sum", "add"]

    def fp32_zero_point(mb, x):
        w = mb.constexpr_affine_dequantize(quantized_data=U, zero_point=np.array([1.5, 2, 3, 4], np.float32),
                                           scale=np.array([1, 2, 3, 4], np.float16), axis=2)
        return mb.add(x=mb.cast(x=mb.reduce_sum(x=x), dtype="fp16"), y=mb.transpose(x=w, perm=[2, 1, 0]))

    cp, mp = check_passes(fp32_zero_point, F32, NAME, opset=opset)
    # the new op stands where the last absorbed op stood
    assert _ops(mp) == ["reduce_sum", "cast", "constexpr_affine_dequantize", "add"]


def test_chain_ends_at_function_output_or_fork():
    def build(mb, x):
        w = mb.transpose(x=_per_tensor(mb), perm=[1, 0, 2])  # a function output: absorbed, then stop
        r = mb.reshape(x=w, shape=[-1])
        return w, _out(mb, x, r)

    cp, mp = check_passes(build, F32, NAME, opset="iOS17")
    assert _ops(mp) == ["constexpr_affine_dequantize", "reshape", "reduce_sum", "add"]
    assert [v.name for v in mp.functions["main"].outputs][0] == "transpose_0"

    def fork(mb, x):
        w = mb.transpose(x=_per_tensor(mb), perm=[1, 0, 2])  # two readers: absorbed, then stop
        return _out(mb, x, mb.reshape(x=w, shape=[-1])), _out(mb, x, mb.expand_dims(x=w, axes=[0]))

    cp, mp = check_passes(fork, F32, NAME, opset="iOS17")
    assert _ops(mp).count("constexpr_affine_dequantize") == 1 and "transpose" not in _ops(mp)


def test_left_alone():
    def output_itself(mb, x):
        w = _per_tensor(mb)
        return w, _out(mb, x, mb.transpose(x=w, perm=[1, 0, 2]))

    cp, mp = check_passes(output_itself, F32, NAME, opset="iOS17")
    assert "transpose" in _ops(mp)

    def two_readers(mb, x):
        w = _per_tensor(mb)
        return _out(mb, x, mb.transpose(x=w, perm=[1, 0, 2])), _out(mb, x, mb.reshape(x=w, shape=[-1]))

    cp, mp = check_passes(two_readers, F32, NAME, opset="iOS17")
    assert "transpose" in _ops(mp)

    def shared_data(mb, x):
        d = mb.const(val=D)
        a = mb.transpose(x=_per_tensor(mb, data=d), perm=[1, 0, 2])
        b = mb.reshape(x=_per_tensor(mb, data=d), shape=[-1])
        return _out(mb, x, a), _out(mb, x, b)

    cp, mp = check_passes(shared_data, F32, NAME, opset="iOS17")
    assert _ops(mp).count("transpose") == 1

    def other_ops(mb, x):
        w = _per_tensor(mb)
        return _out(mb, x, mb.relu(x=mb.slice_by_size(x=w, begin=[0, 0, 0], size=[1, 3, 4])))

    cp, mp = check_passes(other_ops, F32, NAME, opset="iOS17")
    assert "slice_by_size" in _ops(mp)

    def per_channel_reshape(mb, x):
        w = mb.constexpr_affine_dequantize(quantized_data=D, zero_point=np.array([1, 2], np.int8),
                                           scale=np.array([1, 2], np.float32), axis=0)
        return _out(mb, x, mb.reshape(x=w, shape=[-1]))

    cp, mp = check_passes(per_channel_reshape, F32, NAME, opset="iOS17")
    assert "reshape" in _ops(mp)


def test_nested_blocks():
    def build(mb, x):
        p = mb.greater(x=mb.reduce_sum(x=x), y=0.0)

        def t():
            return _out(mb, x, mb.reshape(x=mb.transpose(x=_per_tensor(mb), perm=[2, 1, 0]), shape=[-1]))

        def f():
            return _out(mb, x, mb.reshape(x=_per_tensor(mb, axis=-1), shape=[24]))

        return mb.cond(pred=p, _true_fn=t, _false_fn=f)

    cp, mp = check_passes(build, F32, NAME, opset="iOS17")
    cond = [o for o in mp.functions["main"].operations if o.op_type == "cond"][0]
    for blk in cond.blocks:
        assert [o.op_type for o in blk.operations if o.op_type != "const"] == [
            "constexpr_affine_dequantize", "reduce_sum", "add"]


def test_axis_outside_new_rank_differs_from_coremltools():
    # per tensor, a reshape to fewer dims than the old axis: coremltools keeps the old axis and
    # fails its own type check; the axis of a per-tensor dequantization does not matter, so
    # milkit uses 0
    def build(mb, x):
        return _out(mb, x, mb.reshape(x=_per_tensor(mb, axis=2), shape=[-1]))

    cp, _, _ = build_both(build, F32, "iOS17")
    with pytest.raises(ValueError):
        ct_run(cp, NAME)
    mp = check_numbers_only(build, F32, NAME, opset="iOS17")
    assert _ops(mp) == ["constexpr_affine_dequantize", "reduce_sum", "add"]
    c = mp.functions["main"].operations[[o.op_type for o in mp.functions["main"].operations].index(
        "constexpr_affine_dequantize")]
    assert int(c.inputs["axis"].val) == 0


def test_ios18_per_tensor_differs_from_coremltools():
    # at iOS18 coremltools builds the per-tensor result with constexpr_blockwise_shift_scale's
    # helper, which cannot take the old op's vars (TypeError); milkit keeps
    # constexpr_affine_dequantize, as coremltools does per channel
    def build(mb, x):
        return _out(mb, x, mb.transpose(x=_per_tensor(mb), perm=[2, 0, 1]))

    cp, _, _ = build_both(build, F32, "iOS18")
    with pytest.raises(TypeError):
        ct_run(cp, NAME)
    mp = check_numbers_only(build, F32, NAME, opset="iOS18")
    assert _ops(mp) == ["constexpr_affine_dequantize", "reduce_sum", "add"]


def test_reader_in_a_nested_block_differs_from_coremltools():
    # the constexpr op's only reader is inside a cond branch: coremltools builds the new op in the
    # branch and then fails removing it from the outer block (KeyError); milkit leaves the chain
    def build(mb, x):
        w = _per_tensor(mb)
        p = mb.greater(x=mb.reduce_sum(x=x), y=0.0)
        return mb.cond(pred=p, _true_fn=lambda: mb.reshape(x=mb.transpose(x=w, perm=[2, 1, 0]), shape=[-1]),
                       _false_fn=lambda: mb.reshape(x=D.astype(np.float32), shape=[-1]))

    cp, _, _ = build_both(build, F32, "iOS17")
    with pytest.raises(KeyError):
        ct_run(cp, NAME)
    mp = check_numbers_only(build, F32, NAME, opset="iOS17")
    cond = [o for o in mp.functions["main"].operations if o.op_type == "cond"][0]
    assert [o.op_type for o in cond.blocks[0].operations if o.op_type != "const"] == ["transpose", "reshape"]
