"""common::fuse_conv_bias, fuse_conv_scale and fuse_conv_batchnorm against coremltools."""

import numpy as np
import pytest
from support.pass_parity import check_numbers_only, check_passes, op_types


def _r(*shape, seed=0, dt=np.float32):
    return np.random.RandomState(seed).randn(*shape).astype(dt)


CB = "common::fuse_conv_bias"


@pytest.mark.parametrize("dt", ["fp32", "fp16"])
def test_conv_bias(dt):
    npdt = np.float32 if dt == "fp32" else np.float16

    def build(mb, x):
        w = _r(4, 3, 1, 1, dt=npdt)
        a = mb.add(x=mb.conv(x=x, weight=w), y=_r(1, 4, 1, 1, seed=1, dt=npdt))  # no bias
        b = mb.sub(x=mb.conv(x=x, weight=w, bias=_r(4, seed=2, dt=npdt)), y=_r(4, 1, 1, seed=3, dt=npdt))
        c = mb.add(x=npdt(1.5), y=mb.conv(x=x, weight=w))  # scalar, broadcast to Cout
        d = mb.sub(x=mb.conv(x=x, weight=w, bias=_r(4, seed=4, dt=npdt)), y=npdt(0.25), name="out_d")
        e = mb.add(x=mb.conv_transpose(x=x, weight=_r(3, 4, 1, 1, seed=5, dt=npdt)), y=_r(4, 1, 1, seed=6, dt=npdt))
        return a, b, c, d, e

    cp, mp = check_passes(build, [(("S", 3, 5, 5), dt)], [CB])
    assert "add" not in op_types(mp) and "sub" not in op_types(mp)


@pytest.mark.parametrize("dt", ["fp32", "fp16"])
def test_conv_bias_transpose(dt):
    npdt = np.float32 if dt == "fp32" else np.float16

    def build(mb, x):
        w = _r(4, 3, 1, 1, dt=npdt)
        t = mb.transpose(x=mb.conv(x=x, weight=w), perm=[0, 2, 3, 1])
        a = mb.add(x=t, y=_r(4, seed=1, dt=npdt))
        t2 = mb.transpose(x=mb.conv(x=x, weight=w, bias=_r(4, seed=2, dt=npdt)), perm=[0, 2, 3, 1])
        b = mb.sub(x=_r(1, 1, 4, seed=3, dt=npdt), y=t2)  # negates weight and bias
        t3 = mb.transpose(x=mb.conv(x=x, weight=w), perm=[0, 2, 3, 1])
        c = mb.sub(x=t3, y=npdt(2.0), name="out_c")
        t4 = mb.transpose(x=mb.conv(x=x, weight=w), perm=[0, 2, 3, 1])
        d = mb.add(x=t4, y=_r(5, 4, seed=4, dt=npdt))  # 20 elements: not fused
        return a, b, c, d

    cp, mp = check_passes(build, [(("S", 3, 5, 5), dt)], [CB])
    assert op_types(mp).count("add") + op_types(mp).count("sub") == 1


def test_conv_bias_negative():
    def build(mb, x, y):
        w = _r(4, 3, 1, 1)
        a = mb.add(x=mb.conv(x=x, weight=w), y=y)  # dynamic
        b = mb.add(x=mb.conv(x=x, weight=w), y=_r(1, 4, 5, 1, seed=1))  # spatial dim
        c = mb.sub(x=_r(1, 4, 1, 1, seed=2), y=mb.conv(x=x, weight=w))  # const x of a sub
        cv = mb.conv(x=x, weight=w)
        d = mb.add(x=mb.add(x=cv, y=1.0), y=cv)  # two users
        cv2 = mb.conv(x=x, weight=w)
        e = mb.mul(x=cv2, y=2.0)
        cv3 = mb.conv(x=x, weight=w, bias=_r(4, seed=3))
        f = mb.sub(x=cv3, y=_r(1, 1, 1, 1, seed=4))  # fused: (1,1,1,1) squeezes to ()
        return a, b, c, d, e, cv2, f

    cp, mp = check_passes(build, [(("S", 3, 5, 5), "fp32"), (("S", 4, 5, 5), "fp32")], [CB])


def test_conv_bias_sub_negates_const_in_place():
    def build(mb, x):
        k = mb.const(val=_r(1, 4, 1, 1, seed=1), name="k")
        w = _r(4, 3, 1, 1)
        return mb.sub(x=mb.conv(x=x, weight=w), y=k), mb.add(x=k, y=0.0)

    cp, mp = check_passes(build, [((1, 3, 2, 2), "fp32")], [CB])


CS = "common::fuse_conv_scale"


@pytest.mark.parametrize("dt", ["fp32", "fp16"])
def test_conv_scale(dt):
    npdt = np.float32 if dt == "fp32" else np.float16

    def build_deconv(mb, x):
        a = mb.mul(x=mb.conv_transpose(x=x, weight=_r(3, 4, 2, 2, dt=npdt)), y=_r(1, 4, 1, 1, seed=1, dt=npdt))
        c = mb.mul(x=mb.conv_transpose(x=x, weight=_r(3, 4, 2, 2, seed=5, dt=npdt)), y=npdt(-2.5))
        return a, c

    def build_grouped_deconv(mb, x):
        # coremltools scales the wrong channels of a grouped conv_transpose (its (Cout, Cin/groups)
        # view of the weight); milkit's fused weights differ from coremltools' here, on purpose
        return mb.real_div(x=mb.conv_transpose(x=x, weight=_r(3, 2, 2, 2, seed=2, dt=npdt), groups=3,
                                               bias=_r(6, seed=3, dt=npdt)), y=_r(6, 1, 1, seed=4, dt=npdt))

    cp, mp = check_passes(lambda mb, x: build_simple(mb, x, npdt), [(("S", 3, 5, 5), dt)], [CS])
    assert "mul" not in op_types(mp) and "real_div" not in op_types(mp)
    cp, mp = check_passes(build_deconv, [(("S", 3, 5, 5), dt)], [CS])
    assert "mul" not in op_types(mp) and "real_div" not in op_types(mp)
    mp = check_numbers_only(build_grouped_deconv, [(("S", 3, 5, 5), dt)], [CS])
    assert op_types(mp).count("conv_transpose") == 1 and "real_div" not in op_types(mp)


def build_simple(mb, x, npdt):
    w = _r(4, 3, 1, 1, dt=npdt)
    a = mb.mul(x=mb.conv(x=x, weight=w), y=npdt(1.7))  # scalar, no bias
    b = mb.mul(x=_r(1, 4, 1, 1, seed=1, dt=npdt), y=mb.conv(x=x, weight=w, bias=_r(4, seed=2, dt=npdt)))
    c = mb.real_div(x=mb.conv(x=x, weight=w), y=_r(4, 1, 1, seed=3, dt=npdt), name="out_c")
    d = mb.real_div(x=mb.conv(x=x, weight=w), y=np.array([3.0], npdt))  # shape (1,)
    g = mb.mul(x=mb.conv(x=x, weight=_r(6, 1, 3, 3, seed=5, dt=npdt), groups=3), y=_r(6, 1, 1, seed=6, dt=npdt))
    e = mb.real_div(x=mb.conv(x=x, weight=w), y=np.array(7.0, npdt))  # rank-0 array
    return a, b, c, d, g, e


def test_conv_scale_negative():
    def build(mb, x, y):
        w = _r(4, 3, 1, 1)
        a = mb.mul(x=mb.conv(x=x, weight=w), y=y)  # dynamic
        b = mb.mul(x=mb.conv(x=x, weight=w), y=_r(1, 1, 4, 1, 1, seed=1))  # rank 5 for a rank-4 weight
        c = mb.mul(x=mb.conv(x=x, weight=w), y=_r(1, 1, 5, 5, seed=2))  # not per channel
        cv = mb.conv(x=x, weight=w)
        d = mb.mul(x=mb.mul(x=cv, y=2.0), y=cv)  # two users (the inner mul is fused)
        e = mb.add(x=mb.conv(x=x, weight=w), y=2.0)
        cv2 = mb.conv(x=x, weight=w)
        return a, b, c, d, e, cv2, mb.mul(x=cv2, y=2.0)  # cv2 is a block output: not fused

    check_passes(build, [(("S", 3, 5, 5), "fp32"), (("S", 4, 5, 5), "fp32")], [CS])
    # 4 / conv(x): coremltools folds it as conv(x) / 4 (wrong numbers); milkit keeps the division
    mp = check_numbers_only(lambda mb, x: mb.real_div(x=4.0, y=mb.conv(x=x, weight=_r(4, 3, 1, 1))),
                            [(("S", 3, 5, 5), "fp32")], [CS])
    assert op_types(mp).count("real_div") == 1


CBN = "common::fuse_conv_batchnorm"


def _bn(mb, x, c, npdt, seed=0, **kw):
    r = np.random.RandomState(seed)
    return mb.batch_norm(x=x, mean=r.randn(c).astype(npdt), variance=r.rand(c).astype(npdt) + npdt(0.5),
                         gamma=r.randn(c).astype(npdt), beta=r.randn(c).astype(npdt), **kw)


@pytest.mark.parametrize("dt", ["fp32", "fp16"])
def test_conv_batchnorm(dt):
    npdt = np.float32 if dt == "fp32" else np.float16

    def build(mb, x):
        a = _bn(mb, mb.conv(x=x, weight=_r(4, 3, 1, 1, dt=npdt)), 4, npdt)  # no bias
        b = _bn(mb, mb.conv(x=x, weight=_r(6, 1, 3, 3, seed=1, dt=npdt), bias=_r(6, seed=2, dt=npdt), groups=3),
                6, npdt, seed=3, epsilon=npdt(1e-3), name="out_b")
        c = _bn(mb, mb.conv_transpose(x=x, weight=_r(3, 4, 2, 2, seed=4, dt=npdt)), 4, npdt, seed=5)
        return a, b, c

    def build_grouped_deconv(mb, x):
        # coremltools scales the wrong channels of a grouped conv_transpose; milkit differs here
        return _bn(mb, mb.conv_transpose(x=x, weight=_r(3, 2, 2, 2, seed=6, dt=npdt), groups=3,
                                         bias=_r(6, seed=7, dt=npdt)), 6, npdt, seed=8)

    cp, mp = check_passes(build, [(("S", 3, 5, 5), dt)], [CBN])
    assert "batch_norm" not in op_types(mp)
    mp = check_numbers_only(build_grouped_deconv, [(("S", 3, 5, 5), dt)], [CBN])
    assert "batch_norm" not in op_types(mp)


def test_conv_batchnorm_1d_3d():
    def build(mb, x, y):
        a = _bn(mb, mb.conv(x=x, weight=_r(4, 3, 2)), 4, np.float32)
        b = _bn(mb, mb.conv(x=y, weight=_r(2, 3, 1, 1, 1, seed=1)), 2, np.float32, seed=1)
        return a, b

    cp, mp = check_passes(build, [(("S", 3, 5), "fp32"), ((1, 3, 2, 2, 2), "fp32")], [CBN])
    assert "batch_norm" not in op_types(mp)


def test_conv_batchnorm_negative():
    def build(mb, x):
        w = _r(4, 3, 1, 1)
        cv = mb.conv(x=x, weight=w)
        a = mb.add(x=_bn(mb, cv, 4, np.float32), y=cv)  # two users
        cv2 = mb.conv(x=x, weight=w)
        b = _bn(mb, cv2, 4, np.float32)  # cv2 is a block output
        c = _bn(mb, mb.relu(x=mb.conv(x=x, weight=w)), 4, np.float32)  # not directly after the conv
        return a, b, cv2, c

    cp, mp = check_passes(build, [(("S", 3, 5, 5), "fp32")], [CBN])
    assert op_types(mp).count("batch_norm") == 3


@pytest.mark.parametrize("dt", ["fp32", "fp16"])
def test_conv_bias_scale_1d_and_deconv(dt):
    npdt = np.float32 if dt == "fp32" else np.float16

    def build(mb, x):
        a = mb.add(x=mb.conv(x=x, weight=_r(4, 3, 2, dt=npdt)), y=_r(4, 1, seed=1, dt=npdt))
        b = mb.add(x=mb.conv_transpose(x=x, weight=_r(3, 5, 2, seed=2, dt=npdt)), y=npdt(0.5))
        c = mb.mul(x=mb.conv_transpose(x=x, weight=_r(3, 5, 2, seed=3, dt=npdt)), y=_r(1, 5, 1, seed=4, dt=npdt))
        d = mb.real_div(x=mb.conv(x=x, weight=_r(4, 3, 2, seed=5, dt=npdt), bias=_r(4, seed=6, dt=npdt)),
                        y=npdt(3.0))
        return a, b, c, d

    cp, mp = check_passes(build, [(("S", 3, 7), dt)], [CB, CS])
    assert op_types(mp).count("conv") + op_types(mp).count("conv_transpose") == 4
    assert not {"add", "mul", "real_div"} & set(op_types(mp))


def test_conv_batchnorm_mixed_precision():
    def build(mb, x):
        conv = mb.conv(x=x, weight=_r(4, 3, 1, 1, dt=np.float16), bias=_r(4, seed=1, dt=np.float16))
        return _bn(mb, conv, 4, np.float32, seed=2, epsilon=np.float32(1e-3))  # fp32 parameters (iOS17)

    cp, mp = check_passes(build, [(("S", 3, 2, 2), "fp16")], [CBN])
    assert "batch_norm" not in op_types(mp)
