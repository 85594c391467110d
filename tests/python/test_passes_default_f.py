"""Passes of the default pipeline against coremltools: fuse_dilated_conv, compose_conv1d, fuse_prelu,
fuse_onehot_matmul_to_gather, expand_dynamic_linear, add_conv_transpose_output_shape."""

import numpy as np
import pytest
from pass_parity import build_both, check_numbers_only, check_passes, ct_run, op_types

DTYPES = [("fp32", np.float32), ("fp16", np.float16)]


def _r(*shape, seed=0, dt=np.float32):
    return np.random.RandomState(seed).randn(*shape).astype(dt)


def _ops(prog):
    return [t for t in op_types(prog) if t != "const"]


def _check(build, specs, name, opset="iOS17", numbers=True):
    cp, mp = check_passes(build, specs, [name], opset=opset, numbers=numbers)
    assert _ops(cp) == _ops(mp)
    return _ops(mp)


def _ct_ops(build, specs, name, opset="iOS17"):
    """coremltools' op types (no consts) after its pass, for the cases where milkit differs."""
    cp, _, _ = build_both(build, specs, opset)
    ct_run(cp, [name])
    return _ops(cp)


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


# ---- fuse_prelu --------------------------------------------------------------------------------

PRELU = "common::fuse_prelu"


def _prelu_graph(mb, x, a, neg_first=False, alpha_first=False, relu_first=False, neg=-1.0):
    n = mb.mul(x=neg, y=x) if neg_first else mb.mul(x=x, y=neg)
    r1 = mb.relu(x=n)
    m = mb.mul(x=a, y=r1) if alpha_first else mb.mul(x=r1, y=a)
    r2 = mb.relu(x=x)
    return mb.add(x=m, y=r2) if relu_first else mb.add(x=r2, y=m)


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("shape", [(3, 1, 1), (1, 3, 1, 1)])
@pytest.mark.parametrize("variant", [{}, dict(neg_first=True, alpha_first=True, relu_first=True)])
def test_fuse_prelu_pattern1(dt, npdt, shape, variant):
    def build(mb, x):
        return mb.sigmoid(x=_prelu_graph(mb, x, _r(*shape, dt=npdt), neg=npdt(-1), **variant))

    assert _check(build, [(("B", 3, "H", 5), dt)], PRELU) == ["prelu", "sigmoid"]


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("shape", [(3,), (1, 3), (1, 1, 1, 3)])
def test_fuse_prelu_pattern2(dt, npdt, shape):
    def build(mb, x):
        t = mb.transpose(x=x, perm=[0, 2, 3, 1])
        return _prelu_graph(mb, t, _r(*shape, dt=npdt), neg=npdt(-1))  # a block output

    assert _check(build, [(("B", 3, 4, "W"), dt)], PRELU) == ["prelu", "transpose"]


def test_fuse_prelu_both_patterns_and_tolerance():
    def build(mb, x):
        a = _prelu_graph(mb, x, _r(3, 1, 1), neg=-1.0005)  # -1 within 1e-3
        t = mb.transpose(x=a, perm=[0, 2, 3, 1])
        b = _prelu_graph(mb, t, _r(3, seed=1))
        return mb.relu(x=b)

    cp, mp = check_passes(build, [((2, 3, 4, 5), "fp32")], [PRELU], numbers_rtol=2e-3)
    assert _ops(cp) == _ops(mp) == ["prelu", "prelu", "transpose", "relu"]


def test_fuse_prelu_negative():
    def build(mb, x, y):
        a = _prelu_graph(mb, x, _r(1, 1, 3))  # pattern 1 wants the channel on axis -3
        b = _prelu_graph(mb, x, _r(3, 1, 1), neg=-2.0)
        n = mb.mul(x=x, y=-1.0)
        r1 = mb.relu(x=n)
        c = mb.add(x=mb.relu(x=x), y=mb.mul(x=r1, y=_r(3, 1, 1)))
        c2 = mb.exp(x=r1)  # relu1 has two users
        d = _prelu_graph(mb, mb.transpose(x=x, perm=[0, 3, 1, 2]), _r(4))  # another perm
        e = _prelu_graph(mb, y, _r(3, 1))  # rank 3
        f = _prelu_graph(mb, x, mb.relu(x=x))  # alpha not const
        return a, b, c, c2, d, e, f

    ops = _check(build, [((2, 3, 4, 3), "fp32"), ((2, 3, 4), "fp32")], PRELU)
    assert "prelu" not in ops


@pytest.mark.parametrize("which", ["relu1", "relu2"])
def test_fuse_prelu_block_output_inside(which):
    def build(mb, x):
        r1 = mb.relu(x=mb.mul(x=x, y=-1.0))
        r2 = mb.relu(x=x)
        out = mb.add(x=r2, y=mb.mul(x=r1, y=_r(3, 1, 1)))
        return out, (r1 if which == "relu1" else r2)

    # block outputs are not consumers, so the structure matches; the match is rejected because a
    # matched op other than the add outputs a block output
    assert "prelu" not in _check(build, [((1, 3, 2, 2), "fp32")], PRELU)


def test_fuse_prelu_channel_mismatch_differs_from_coremltools():
    # one alpha for 3 channels: coremltools' prelu raises (alpha length != channels); milkit keeps
    # the graph (prelu_to_lrelu-style broadcasting is not prelu's semantics)
    def build(mb, x):
        return _prelu_graph(mb, x, _r(1, 1, 1))

    with pytest.raises(ValueError, match="alpha"):
        _ct_ops(build, [((1, 3, 2, 2), "fp32")], PRELU)
    mp = check_numbers_only(build, [((1, 3, 2, 2), "fp32")], [PRELU])
    assert "prelu" not in op_types(mp)


# ---- fuse_onehot_matmul_to_gather --------------------------------------------------------------

ONEHOT = "common::fuse_onehot_matmul_to_gather"


def _in_range_numbers(build, specs, opset, n):
    """Runs the program before and after the pass on indices in [0, n) (one_hot gives zeros for
    others where gather fails or wraps)."""
    import milkit
    from milkit.passes import apply_passes
    from parity import _build, _make_symbols

    before = _build("mk", build, specs, opset, _make_symbols(specs))
    after = _build("mk", build, specs, opset, _make_symbols(specs))
    apply_passes(after, [ONEHOT], None, verify_each=True)
    rng = np.random.default_rng(0)
    shape = [4 if isinstance(d, str) else d for d in specs[0][0]]
    feed = {"x": rng.integers(0, n, size=shape).astype(np.int32)}
    a, b = milkit.run(before, feed), milkit.run(after, feed)
    for k in a:
        np.testing.assert_allclose(b[k], a[k], rtol=1e-6)
    return after


@pytest.mark.parametrize("opset", ["iOS15", "iOS16", "iOS17", "iOS18"])
@pytest.mark.parametrize("dt,npdt", DTYPES)
def test_onehot_matmul(opset, dt, npdt):
    w = _r(6, 4, dt=npdt)

    def build(mb, x):
        oh = mb.one_hot(indices=x, one_hot_vector_size=6, axis=-1, on_value=npdt(1), off_value=npdt(0))
        return mb.relu(x=mb.matmul(x=oh, y=w))

    specs = [(("S", 3), "int32")]
    ops = _check(build, specs, ONEHOT, opset, numbers=False)
    assert "one_hot" not in ops and "gather" in ops
    assert ("select" in ops) == (opset in ("iOS17", "iOS18"))
    _in_range_numbers(build, specs, opset, 6)


def test_onehot_matmul_block_output():
    def build(mb, x):
        oh = mb.one_hot(indices=x, one_hot_vector_size=5, on_value=1.0, off_value=0.0)
        return mb.matmul(x=oh, y=_r(5, 2))

    specs = [((2, 3), "int32")]
    assert _check(build, specs, ONEHOT, numbers=False) == ["greater_equal", "shape", "slice_by_index", "add",
                                                          "select", "gather"]
    _in_range_numbers(build, specs, "iOS17", 5)


def test_onehot_matmul_negative():
    def build(mb, x, y):
        w = _r(5, 2)
        a = mb.matmul(x=mb.one_hot(indices=x, one_hot_vector_size=5, axis=-2, on_value=1.0, off_value=0.0),
                      y=_r(2, 3))  # not the last axis
        b = mb.matmul(x=mb.one_hot(indices=x, one_hot_vector_size=5, on_value=2.0, off_value=0.0), y=w)
        c = mb.matmul(x=mb.one_hot(indices=x, one_hot_vector_size=5, on_value=1.0, off_value=-1.0), y=w)
        e = mb.matmul(x=mb.one_hot(indices=x, one_hot_vector_size=5, on_value=1.0, off_value=0.0),
                      y=_r(2, 5), transpose_y=True)
        f = mb.matmul(x=mb.one_hot(indices=x, one_hot_vector_size=5, on_value=1.0, off_value=0.0), y=y)  # dynamic W
        oh = mb.one_hot(indices=x, one_hot_vector_size=5, on_value=1.0, off_value=0.0)
        g = mb.matmul(x=oh, y=w)
        h = mb.relu(x=oh)  # two users
        oh2 = mb.one_hot(indices=x, one_hot_vector_size=5, on_value=1.0, off_value=0.0)
        i = mb.matmul(x=oh2, y=w)
        k = mb.matmul(x=_r(2, 2), y=mb.one_hot(indices=x, one_hot_vector_size=5, on_value=1.0, off_value=0.0))
        return a, b, c, e, f, g, h, i, oh2, k  # oh2 is a block output

    ops = _check(build, [((2,), "int32"), ((5, 2), "fp32")], ONEHOT)
    assert "gather" not in ops


def test_onehot_matmul_differs_from_coremltools():
    # coremltools takes on_value within 1e-3 of 1, and axis=0 on rank-1 indices (rank - 1, not the
    # last axis of the one_hot output) as the last axis; both change the numbers. milkit does not.
    def build_value(mb, x):
        oh = mb.one_hot(indices=x, one_hot_vector_size=4, on_value=1.0005, off_value=0.0)
        return mb.matmul(x=oh, y=_r(4, 3))

    def build_axis(mb, x):
        oh = mb.one_hot(indices=x, one_hot_vector_size=4, axis=0, on_value=1.0, off_value=0.0)  # (4, 4)
        return mb.matmul(x=oh, y=_r(4, 3))

    for build in (build_value, build_axis):
        assert "gather" in _ct_ops(build, [((4,), "int32")], ONEHOT)
        mp = _in_range_numbers(build, [((4,), "int32")], "iOS17", 4)
        assert "one_hot" in op_types(mp)


# ---- expand_dynamic_linear ---------------------------------------------------------------------

EDL = "common::expand_dynamic_linear"


@pytest.mark.parametrize("dt,npdt", DTYPES)
def test_expand_dynamic_linear(dt, npdt):
    def build(mb, x):
        w = _r(4, 3, dt=np.float32)
        wd = mb.cast(x=w, dtype=dt)  # known value, but not a const op: "dynamic"
        bd = mb.add(x=_r(4, seed=1, dt=npdt), y=npdt(1))
        a = mb.linear(x=x, weight=w.astype(npdt), bias=bd)  # static weight, dynamic bias
        b = mb.linear(x=x, weight=wd)  # dynamic weight, zero default bias
        c = mb.linear(x=x, weight=wd, bias=np.zeros(4, npdt))  # zero const bias
        d = mb.linear(x=x, weight=wd, bias=_r(4, seed=2, dt=npdt))
        e = mb.linear(x=x, weight=wd, bias=bd)
        f = mb.linear(x=x, weight=w.astype(npdt), bias=_r(4, seed=3, dt=npdt))  # static: unchanged
        return mb.relu(x=a), b, c, d, mb.relu(x=e), f

    ops = _check(build, [(("S", 3), dt)], EDL)
    assert ops.count("linear") == 2 and ops.count("matmul") == 4


@pytest.mark.parametrize("zero", [True, False])
def test_expand_dynamic_linear_constexpr_bias(zero):
    def build(mb, x):
        q = np.zeros((4,), np.uint8) + (3 if zero else np.arange(4, dtype=np.uint8))
        bias = mb.constexpr_affine_dequantize(quantized_data=q, zero_point=np.uint8(3), scale=np.float32(0.5), axis=0)
        wd = mb.cast(x=_r(4, 3, dt=np.float16), dtype="fp32")
        return mb.linear(x=x, weight=wd, bias=bias)

    ops = _check(build, [((2, 3), "fp32")], EDL, "iOS16")
    assert ops == ["constexpr_affine_dequantize", "cast", "matmul"] + ([] if zero else ["add"])


def test_expand_dynamic_linear_constexpr_weight():
    def build(mb, x):
        w = mb.constexpr_affine_dequantize(quantized_data=np.arange(12, dtype=np.uint8).reshape(4, 3),
                                           zero_point=np.uint8(1), scale=np.float32(0.1), axis=0)
        return mb.linear(x=x, weight=w)

    assert _check(build, [((2, 3), "fp32")], EDL, "iOS16") == ["constexpr_affine_dequantize", "linear"]


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
