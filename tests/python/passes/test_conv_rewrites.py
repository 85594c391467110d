"""common::fuse_dilated_conv, common::compose_conv1d and common::add_conv_transpose_output_shape against
coremltools."""

import numpy as np
import pytest
from support.pass_parity import build_both, check_numbers_only, check_passes, ct_run, op_types
from support.pass_parity import check_same_ops as _check
from support.pass_parity import ct_ops_after as _ct_ops
from support.pass_parity import non_const_ops as _ops
from support.pass_parity import rand as _r

DTYPES = [("fp32", np.float32), ("fp16", np.float16)]


# ---- fuse_dilated_conv -------------------------------------------------------------------------

DIL = "common::fuse_dilated_conv"


def _dilated(npdt, h=8, pads=((2, 2), (2, 2)), crops=((0, 0), (0, 0)), k=3, block=(2, 2), **conv):
    def build(mb, x):
        s = mb.space_to_batch(x=x, block_shape=list(block), paddings=[list(p) for p in pads])
        c = mb.conv(x=s, weight=_r(4, 3, k, k, dt=npdt), bias=_r(4, seed=1, dt=npdt), **conv)
        b = mb.batch_to_space(x=c, block_shape=list(block), crops=[list(p) for p in crops])
        return mb.relu(x=b)

    return build


@pytest.mark.parametrize("dt,npdt", DTYPES)
def test_dilated_conv_same_padding(dt, npdt):
    ops = _check(_dilated(npdt), [(("S", 3, 8, 8), dt)], DIL)
    assert ops == ["conv", "relu"]
    # height 7: the padding ends one row later and the crop removes it again
    ops = _check(_dilated(npdt, pads=((2, 3), (2, 2)), crops=((0, 1), (0, 0))), [((1, 3, 7, 8), dt)], DIL)
    assert ops == ["conv", "relu"]


@pytest.mark.parametrize("opset", ["iOS15", "iOS17", "iOS18"])
def test_dilated_conv_valid(opset):
    ops = _check(_dilated(np.float32, pads=((0, 0), (0, 0))), [((2, 3, 8, 8), "fp32")], DIL, opset)
    assert ops == ["conv", "relu"]
    ops = _check(_dilated(np.float32, pads=((0, 0), (0, 0)), block=(2, 3), k=1), [((1, 3, 8, 9), "fp32")], DIL, opset)
    assert ops == ["conv", "relu"]


def test_dilated_conv_odd_same_conv():
    # an inner "same" conv with an odd kernel is the dilated "same" conv
    ops = _check(_dilated(np.float32, pads=((0, 0), (0, 0)), pad_type="same"), [((1, 3, 8, 8), "fp32")], DIL)
    assert ops == ["conv", "relu"]


def test_dilated_conv_output_of_block():
    def build(mb, x):
        s = mb.space_to_batch(x=x, block_shape=[2, 2], paddings=[[0, 0], [0, 0]])
        c = mb.conv(x=s, weight=_r(4, 3, 3, 3))
        return mb.batch_to_space(x=c, block_shape=[2, 2], crops=[[0, 0], [0, 0]])  # keeps its name

    assert _check(build, [((1, 3, 8, 8), "fp32")], DIL) == ["conv"]


def test_dilated_conv_negative():
    def build(mb, x, y):
        w = _r(4, 3, 3, 3)
        s = mb.space_to_batch(x=x, block_shape=[2, 2], paddings=[[0, 0], [0, 0]])
        a = mb.batch_to_space(x=mb.conv(x=s, weight=w), block_shape=[2, 1], crops=[[0, 0], [0, 0]])  # shapes differ
        s2 = mb.space_to_batch(x=x, block_shape=[2, 2], paddings=[[2, 2], [0, 0]])
        b = mb.batch_to_space(x=mb.conv(x=s2, weight=w), block_shape=[2, 2], crops=[[0, 0], [0, 0]])  # not "same"
        s3 = mb.space_to_batch(x=x, block_shape=[2, 2], paddings=[[0, 0], [0, 0]])
        c3 = mb.conv(x=s3, weight=w)
        c = mb.batch_to_space(x=c3, block_shape=[2, 2], crops=[[0, 0], [0, 0]])
        d = mb.relu(x=c3)  # the conv has two users
        s4 = mb.space_to_batch(x=y, block_shape=[2, 2], paddings=[[0, 0], [0, 0]])
        e = mb.batch_to_space(x=mb.relu(x=mb.conv(x=s4, weight=w)), block_shape=[2, 2], crops=[[0, 0], [0, 0]])
        s5 = mb.space_to_batch(x=x, block_shape=[2, 2], paddings=[[0, 0], [0, 0]])
        c5 = mb.conv(x=s5, weight=w)
        f = mb.batch_to_space(x=c5, block_shape=[2, 2], crops=[[0, 0], [0, 0]])
        return a, b, c, d, e, f, c5  # c5 is a block output

    ops = _check(build, [((1, 3, 8, 8), "fp32"), ((1, 3, 8, 8), "fp32")], DIL)
    assert ops.count("space_to_batch") == 5


def test_dilated_conv_symbolic_padded():
    # "same" padding needs the input height: nothing is fused on a symbolic one
    # (not compared op for op: milkit's space_to_batch shape is (H + 4) // 2 where coremltools has
    # H / 2 + 2)
    build, specs = _dilated(np.float32), [((1, 3, "H", 8), "fp32")]
    assert "space_to_batch" in _ct_ops(build, specs, DIL)
    assert "space_to_batch" in op_types(check_numbers_only(build, specs, [DIL]))


@pytest.mark.parametrize("conv", [dict(strides=[2, 2]), dict(pad_type="same", k=2), dict(dilations=[2, 2])])
def test_dilated_conv_differs_from_coremltools(conv):
    # coremltools fuses these too, replacing the conv's strides or keeping a "same" padding that
    # splits differently for an even kernel (the fused conv computes something else), or replacing
    # the conv's dilations (then the output shape changes and coremltools raises). milkit leaves
    # them alone.
    k = conv.pop("k", 3)
    build = _dilated(np.float32, h=16, pads=((0, 0), (0, 0)), k=k, **conv)
    specs = [((1, 3, 16, 16), "fp32")]
    if "dilations" in conv:
        with pytest.raises(ValueError, match="compatible"):
            _ct_ops(build, specs, DIL)
    else:
        assert _ct_ops(build, specs, DIL) == ["conv", "relu"]
    mp = check_numbers_only(build, specs, [DIL])
    assert "space_to_batch" in op_types(mp)


def test_dilated_conv_crops_differ_from_coremltools():
    # zero paddings: coremltools ignores the crops and writes a conv of another shape (it raises
    # when the output has users, and changes the function's output shape when it has not)
    def build(mb, x):
        s = mb.space_to_batch(x=x, block_shape=[2, 2], paddings=[[0, 0], [0, 0]])
        c = mb.conv(x=s, weight=_r(4, 3, 3, 3))
        return mb.batch_to_space(x=c, block_shape=[2, 2], crops=[[0, 2], [0, 0]])

    cp, _, _ = build_both(build, [((1, 3, 8, 8), "fp32")])
    ct_run(cp, [DIL])
    assert _ops(cp) == ["conv"] and cp.functions["main"].outputs[0].shape == (1, 4, 4, 4)
    mp = check_numbers_only(build, [((1, 3, 8, 8), "fp32")], [DIL])
    assert "space_to_batch" in op_types(mp) and mp.functions["main"].outputs[0].shape == (1, 4, 2, 4)


# ---- compose_conv1d ----------------------------------------------------------------------------

C1D = "common::compose_conv1d"


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("axes", [(-2, -2), (2, 2), (2, -2)])
def test_compose_conv1d(dt, npdt, axes):
    def build(mb, x):
        e = mb.expand_dims(x=x, axes=[axes[0]])
        c = mb.conv(x=e, weight=_r(4, 3, 1, 3, dt=npdt), bias=_r(4, seed=1, dt=npdt), strides=[1, 2],
                    pad=[0, 0, 1, 1], pad_type="custom", dilations=[1, 2], groups=1)
        return mb.relu(x=mb.squeeze(x=c, axes=[axes[1]]))

    assert _check(build, [(("S", 3, 9), dt)], C1D) == ["squeeze", "conv", "relu"]


@pytest.mark.parametrize("opset", ["iOS15", "iOS18"])
def test_compose_conv1d_no_bias_output(opset):
    def build(mb, x):
        c = mb.conv(x=mb.expand_dims(x=x, axes=[2]), weight=_r(6, 1, 1, 2), groups=3, pad_type="same")
        return mb.squeeze(x=c, axes=[2])  # a block output: the conv takes its name

    assert _check(build, [((1, 3, "L"), "fp32")], C1D, opset) == ["squeeze", "conv"]


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("axes,perm", [((1, 1), (0, 3, 1, 2)), ((-3, -3), (0, -1, 1, 2)), ((1, -3), (0, 3, 1, 2))])
def test_compose_conv1d_channel_last(dt, npdt, axes, perm):
    def build(mb, x):
        t = mb.transpose(x=mb.expand_dims(x=x, axes=[axes[0]]), perm=list(perm))
        c = mb.conv(x=t, weight=_r(4, 3, 1, 3, dt=npdt), bias=_r(4, seed=1, dt=npdt), pad_type="same")
        t2 = mb.transpose(x=c, perm=[0, -2, -1, 1])
        return mb.relu(x=mb.squeeze(x=t2, axes=[axes[1]]))

    ops = _check(build, [(("S", 7, 3), dt)], C1D)
    assert ops == ["transpose", "squeeze", "conv", "transpose", "relu"]


def test_compose_conv1d_negative():
    def build(mb, x, y):
        w = _r(4, 3, 1, 3)
        a = mb.squeeze(x=mb.conv(x=mb.expand_dims(x=x, axes=[-1]), weight=_r(4, 3, 3, 1)), axes=[-1])  # width
        e = mb.expand_dims(x=x, axes=[2])
        b = mb.squeeze(x=mb.conv(x=e, weight=w), axes=[2])
        b2 = mb.relu(x=e)  # the expand_dims has two users
        c = mb.conv(x=mb.expand_dims(x=x, axes=[2]), weight=w)
        d = mb.squeeze(x=c, axes=[2])  # c is a block output
        f = mb.squeeze(x=mb.conv(x=mb.expand_dims(x=y, axes=[2]), weight=_r(4, 3, 1, 1, 3)), axes=[2])  # rank-4 x
        t = mb.transpose(x=mb.expand_dims(x=mb.transpose(x=x, perm=[0, 2, 1]), axes=[1]), perm=[0, 3, 2, 1])
        g = mb.squeeze(x=mb.transpose(x=mb.conv(x=t, weight=_r(4, 3, 1, 1)), perm=[0, 2, 3, 1]), axes=[1])  # perm
        return a, b, b2, c, d, f, g

    ops = _check(build, [((2, 3, 8), "fp32"), ((2, 3, 4, 8), "fp32")], C1D)
    assert ops.count("expand_dims") == 5


def test_compose_conv1d_tall_kernel_differs_from_coremltools():
    # a kernel of height 3 on the dummy height (padded back to 1): coremltools fails squeezing the
    # weight; milkit leaves the pattern alone
    def build(mb, x):
        c = mb.conv(x=mb.expand_dims(x=x, axes=[2]), weight=_r(4, 3, 3, 3), pad=[1, 1, 0, 0], pad_type="custom")
        return mb.squeeze(x=c, axes=[2])

    with pytest.raises(ValueError):
        _ct_ops(build, [((1, 3, 8), "fp32")], C1D)
    mp = check_numbers_only(build, [((1, 3, 8), "fp32")], [C1D])
    assert "expand_dims" in op_types(mp)


# ---- add_conv_transpose_output_shape -----------------------------------------------------------

CTOS = "common::add_conv_transpose_output_shape"


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("opset", ["iOS15", "iOS17"])
def test_conv_transpose_output_shape(dt, npdt, opset):
    def build(mb, x):
        a = mb.conv_transpose(x=x, weight=_r(3, 4, 2, 2, dt=npdt), strides=[2, 2], bias=_r(4, seed=1, dt=npdt))
        b = mb.conv_transpose(x=x, weight=_r(3, 2, 3, dt=npdt).reshape(3, 2, 3, 1), pad_type="same")
        c = mb.conv_transpose(x=x, weight=_r(3, 2, 2, 2, dt=npdt), output_shape=[1, 2, 5, 5], strides=[2, 2])
        return mb.relu(x=a), b, c

    _, mp = check_passes(build, [((1, 3, 2, 2), dt)], [CTOS], opset=opset)
    names = [o.name for o in mp.functions["main"].operations if o.op_type == "conv_transpose"]
    assert names == ["conv_transpose_0_has_output_shape", "conv_transpose_1_has_output_shape", "conv_transpose_2"]


def test_conv_transpose_output_shape_symbolic():
    def build(mb, x):
        return mb.conv_transpose(x=x, weight=_r(3, 4, 2, 2), strides=[2, 2])

    _, mp = check_passes(build, [(("S", 3, 2, 2), "fp32")], [CTOS])
    assert [o.name for o in mp.functions["main"].operations if o.op_type == "conv_transpose"] == ["conv_transpose_0"]
