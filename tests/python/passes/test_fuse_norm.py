"""common::fuse_layernorm_or_instancenorm against coremltools' own pass."""

import numpy as np
import pytest
from milkit.passes import apply_passes
from support.pass_parity import build_both, check_passes, ct_run, op_types

DTYPES = [("fp32", np.float32), ("fp16", np.float16)]


def _check(build, shape, dt, name, opset="iOS17", numbers_rtol=None):
    cp, mp = check_passes(build, [(shape, dt)], [name], opset=opset, numbers_rtol=numbers_rtol)
    ct_ops = [t for t in op_types(cp) if t != "const"]
    mk_ops = [t for t in op_types(mp) if t != "const"]
    assert ct_ops == mk_ops
    return mk_ops


# ---- fuse_layernorm_or_instancenorm -------------------------------------------------------------

LN = "common::fuse_layernorm_or_instancenorm"


def _p1(axes, gshape, npdt, eps=1e-5, extra=False):  # extra: the mean has another consumer
    def build(mb, x):
        g = np.full(gshape, 1.5, npdt)
        b = np.full(gshape, 0.25, npdt)
        mean = mb.reduce_mean(x=x, axes=axes, keep_dims=True)
        d = mb.sub(x=x, y=mean)
        var = mb.reduce_mean(x=mb.square(x=d), axes=axes, keep_dims=True)
        r = mb.rsqrt(x=mb.add(x=var, y=npdt(eps) if np.isscalar(eps) else eps))
        mg = mb.mul(x=r, y=g)
        mx = mb.mul(x=x, y=mg)
        mm = mb.mul(x=mean, y=mg)
        out = mb.add(x=mx, y=mb.sub(x=b, y=mm))
        if extra:
            return out, mb.relu(x=mean)
        return mb.relu(x=out)

    return build


def _p2(axes, gshape, npdt):
    def build(mb, x):
        mean = mb.reduce_mean(x=x, axes=axes, keep_dims=True)
        d0 = mb.sub(x=x, y=mean)
        d1 = mb.sub(x=x, y=mean)
        var = mb.reduce_mean(x=mb.square(x=d0), axes=axes, keep_dims=True)
        p = mb.pow(x=mb.add(x=var, y=npdt(1e-5)), y=npdt(0.5))
        n = mb.real_div(x=d1, y=p)
        return mb.add(x=mb.mul(x=n, y=np.full(gshape, 2.0, npdt)), y=np.full(gshape, 0.5, npdt))

    return build


def _p3(axes, npdt):
    def build(mb, x):
        mean = mb.reduce_mean(x=x, axes=axes, keep_dims=True)
        d = mb.sub(x=x, y=mean)
        var = mb.reduce_mean(x=mb.square(x=d), axes=axes, keep_dims=True)
        r = mb.rsqrt(x=mb.add(x=var, y=npdt(1e-5)))
        m1 = mb.mul(x=x, y=r)
        m2 = mb.mul(x=mean, y=r)
        return mb.add(x=m1, y=mb.mul(x=m2, y=npdt(-1.0)))

    return build


def _p4(axes, n, gshape, npdt):
    def build(mb, x):
        sq = mb.mul(x=x, y=x)
        s = mb.reduce_sum(x=x, axes=axes, keep_dims=True)
        mean = mb.mul(x=s, y=npdt(1.0 / n))
        msq = mb.mul(x=mean, y=mean)
        s2 = mb.reduce_sum(x=sq, axes=axes, keep_dims=True)
        var = mb.sub(x=mb.mul(x=s2, y=npdt(1.0 / n)), y=msq)
        r = mb.rsqrt(x=mb.add(x=var, y=npdt(1e-5)))
        mg = mb.mul(x=r, y=np.full(gshape, 1.5, npdt))
        m1 = mb.mul(x=x, y=mg)
        m2 = mb.mul(x=mean, y=mg)
        return mb.add(x=m1, y=mb.sub(x=np.full(gshape, 0.25, npdt), y=m2))

    return build


def _p5(npdt, affine, gshape=(1, 4, 1, 1)):
    def build(mb, x):
        mean = mb.reduce_mean(x=x, axes=[1], keep_dims=True)
        d = mb.sub(x=x, y=mean)
        var = mb.reduce_mean(x=mb.mul(x=d, y=d), axes=[1], keep_dims=True)
        r = mb.rsqrt(x=mb.add(x=var, y=npdt(1e-6)))
        out = mb.mul(x=d, y=r)
        if affine:
            out = mb.add(x=out, y=np.arange(4, dtype=npdt).reshape(gshape))
            out = mb.mul(x=out, y=(np.arange(4, dtype=npdt) + 1).reshape(gshape))
        return out

    return build


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("shape", [(2, 3, 8), ("S", "T", 8)])
def test_layernorm_pattern_1(dt, npdt, shape):
    assert _check(_p1([-1], (8,), npdt), shape, dt, LN) == ["layer_norm", "relu"]


@pytest.mark.parametrize("dt,npdt", DTYPES)
def test_layernorm_pattern_1_two_axes(dt, npdt):
    assert _check(_p1([2, 1], (3, 8), npdt), ("S", 3, 8), dt, LN) == ["layer_norm", "relu"]


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("shape", [(2, 3, 8), ("S", "T", 8)])
def test_layernorm_pattern_2(dt, npdt, shape):
    assert _check(_p2([-1], (8,), npdt), shape, dt, LN) == ["layer_norm"]


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("shape", [(2, 3, 8), ("S", 3, 8)])
def test_layernorm_pattern_4(dt, npdt, shape):
    assert _check(_p4([-1], 8, (8,), npdt), shape, dt, LN) == ["layer_norm"]


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("shape", [(1, 4, 5, 6), ("S", 4, "T", 6)])
def test_layernorm_pattern_5(dt, npdt, affine, shape):
    assert _check(_p5(npdt, affine), shape, dt, LN) == ["layer_norm"]


@pytest.mark.parametrize("shape", [(1, 3, 5, 6), ("S", 3, 5, "T")])
def test_instancenorm_pattern_1(shape):
    assert _check(_p1([2, 3], (1, 3, 1, 1), np.float32), shape, "fp32", LN) == ["instance_norm", "relu"]


def test_instancenorm_pattern_1_channel_last():
    ops = _check(_p1([1, 2], (1, 1, 1, 3), np.float32), ("S", 5, 6, 3), "fp32", LN)
    assert ops == ["transpose", "instance_norm", "transpose", "relu"]


@pytest.mark.parametrize("shape", [(1, 3, 5, 6), ("S", 3, 5, 6)])
def test_instancenorm_pattern_2(shape):
    assert _check(_p2([2, 3], (1, 3, 1, 1), np.float32), shape, "fp32", LN) == ["instance_norm"]


@pytest.mark.parametrize("shape", [(1, 3, 5, 6), ("S", 3, "T", 6)])
def test_instancenorm_pattern_3(shape):
    assert _check(_p3([2, 3], np.float32), shape, "fp32", LN) == ["instance_norm"]


@pytest.mark.parametrize("shape", [(1, 3, 5, 6), ("S", 3, 5, 6)])
def test_instancenorm_pattern_4(shape):
    assert _check(_p4([2, 3], 30, (1, 3, 1, 1), np.float32), shape, "fp32", LN) == ["instance_norm"]


def test_layernorm_pattern_1_axis_minus3():
    # rank 4, axes [-3]: gamma / beta become fresh consts and the old ones are removed
    assert _check(_p1([1], (4,), np.float32), ("S", 4, 5, 4), "fp32", LN) == ["layer_norm", "relu"]


@pytest.mark.parametrize("kind", ["extra", "axes", "gamma_rank", "eps_tensor"])
def test_layernorm_negative(kind):
    if kind == "extra":
        build = _p1([-1], (8,), np.float32, extra=True)
    elif kind == "axes":
        build = _p1([1], (3, 1), np.float32)
    elif kind == "gamma_rank":
        build = _p1([-1], (1, 8), np.float32)
    else:
        build = _p1([-1], (8,), np.float32, eps=np.full((1,), 1e-5, np.float32))
    ops = _check(build, ("S", 3, 8), "fp32", LN)
    assert "layer_norm" not in ops and "instance_norm" not in ops


@pytest.mark.parametrize("kind", ["no_gamma", "wrong_axes", "not_square"])
def test_layernorm_pattern_5_negative(kind):
    def build(mb, x):
        mean = mb.reduce_mean(x=x, axes=[2] if kind == "wrong_axes" else [1], keep_dims=True)
        d = mb.sub(x=x, y=mean)
        sq = mb.mul(x=d, y=x) if kind == "not_square" else mb.mul(x=d, y=d)
        var = mb.reduce_mean(x=sq, axes=[2] if kind == "wrong_axes" else [1], keep_dims=True)
        out = mb.mul(x=d, y=mb.rsqrt(x=mb.add(x=var, y=np.float32(1e-6))))
        out = mb.add(x=out, y=np.ones((1, 4, 1, 1), np.float32))
        return out if kind == "no_gamma" else mb.mul(x=out, y=np.ones((1, 4, 1, 1), np.float32))

    assert "layer_norm" not in _check(build, ("S", 4, 5, 6), "fp32", LN)


def test_layernorm_two_in_a_row():
    def build(mb, x):
        y = _p2([-1], (8,), np.float32)(mb, x)
        return _p4([-1], 8, (8,), np.float32)(mb, mb.relu(x=y))

    assert _check(build, ("S", 8), "fp32", LN) == ["layer_norm", "relu", "layer_norm"]


def test_layernorm_removed_op_still_used():
    # coremltools raises (the sub has another consumer); milkit leaves the pattern alone.
    def build(mb, x):
        mean = mb.reduce_mean(x=x, axes=[-1], keep_dims=True)
        d = mb.sub(x=x, y=mean)
        r = mb.rsqrt(x=mb.add(x=mb.reduce_mean(x=mb.square(x=d), axes=[-1], keep_dims=True), y=np.float32(1e-5)))
        mg = mb.mul(x=r, y=np.ones((8,), np.float32))
        out = mb.add(x=mb.mul(x=x, y=mg), y=mb.sub(x=np.zeros((8,), np.float32), y=mb.mul(x=mean, y=mg)))
        return out, mb.relu(x=d)

    cp, mp, _ = build_both(build, [(("S", 8), "fp32")])
    with pytest.raises(ValueError, match="Cannot delete op"):
        ct_run(cp, [LN])
    apply_passes(mp, [LN], verify_each=True)
    assert "layer_norm" not in op_types(mp)


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("shape", [(2, 3, 8), ("S", "T", 8)])
@pytest.mark.parametrize("kind", ["instance", "channel_last", "axis_minus3"])
def test_norm_fp16_and_symbolic(dt, npdt, shape, kind):
    if kind == "instance":
        ops = _check(_p2([2, 3], (1, 3, 1, 1), npdt), (shape[0], 3, 5, shape[2]), dt, LN)
        assert ops == ["instance_norm"]
    elif kind == "channel_last":
        ops = _check(_p1([1, 2], (1, 1, 1, 3), npdt), ("S", 5, shape[1], 3), dt, LN)
        assert ops == ["transpose", "instance_norm", "transpose", "relu"]
    else:
        ops = _check(_p1([1], (4,), npdt), (shape[0], 4, 5, 4), dt, LN)
        assert ops == ["layer_norm", "relu"]


@pytest.mark.parametrize("build,shape", [(_p3([-1], np.float32), ("S", 3, 5)),
                                         (_p5(np.float32, True, (4, 1)), ("S", 4, 5))])
def test_made_consts_stay_when_fusion_fails(build, shape):
    # patterns 3 and 5 append gamma / beta consts to the block before the final checks fail
    cp, mp = check_passes(build, [(shape, "fp32")], [LN])
    names = [o.name for o in cp.functions["main"].operations]
    assert names[-2].startswith("_fuse_layernorm") and names[-1].startswith("_fuse_layernorm")
    assert "layer_norm" not in op_types(mp)


def test_instancenorm_pattern_3_fp16_raises():
    # the made gamma / beta are fp32: both reject an fp16 epsilon
    cp, mp, _ = build_both(_p3([2, 3], np.float16), [(("S", 3, 5, 6), "fp16")])
    with pytest.raises(ValueError, match="same data type"):
        ct_run(cp, [LN])
    with pytest.raises(TypeError):
        apply_passes(mp, [LN])


def test_layernorm_pattern_5_rank2_const_order():
    # coremltools leaves the made gamma / beta after the layer_norm; milkit puts them before it
    cp, mp, _ = build_both(_p5(np.float32, True, (4,)), [(("S", 4), "fp32")])
    ct_run(cp, [LN])
    apply_passes(mp, [LN], verify_each=True)
    assert [t for t in op_types(cp) if t != "const"] == [t for t in op_types(mp) if t != "const"] == ["layer_norm"]


def test_instancenorm_pattern_3_channel_last_wrong_gamma():
    # coremltools sizes gamma from dim 1 (not the channel dim after the transpose) and fuses;
    # milkit's instance_norm rejects that gamma, so milkit leaves the pattern alone.
    cp, mp, _ = build_both(_p3([1, 2], np.float32), [(("S", 5, 6, 3), "fp32")])
    ct_run(cp, [LN])
    apply_passes(mp, [LN], verify_each=True)
    assert "instance_norm" in op_types(cp)
    assert "instance_norm" not in op_types(mp)
