"""common::reduce_transposes against coremltools' own pass: op for op (names, types, values) and
the same numbers before and after (milkit's interpreter), on programs where transposes move
through unary-like, binary, concat / split / pad / reduce ops and cancel, and on programs that
coremltools leaves unchanged. The last tests pin where milkit deliberately differs (coremltools'
rewrite computes something else or raises)."""

import warnings

import milkit
import numpy as np
import pytest
from support.pass_parity import build_both, check_numbers_only, check_passes, ct_run, op_types

RT = "common::reduce_transposes"
TO_NHWC = [0, 2, 3, 1]
TO_NCHW = [0, 3, 1, 2]
DTYPES = [("fp32", np.float32), ("fp16", np.float16)]
SHAPES = [(1, 2, 3, 4), ("B", 2, "H", "W")]  # NCHW; symbolic batch and spatial dims


def _check(build, specs, numbers=True, opset="iOS17"):
    """Runs both passes, compares op for op and the numbers; returns milkit's non-const op types."""
    _, mp = check_passes(build, specs, [RT], opset=opset, numbers=numbers)
    return [t for t in op_types(mp) if t != "const"]


def _unchanged(build, specs, opset="iOS17"):
    """coremltools leaves the program as it is; so does milkit (checked op for op)."""
    cp, mp, _ = build_both(build, specs, opset)
    before = [(o.op_type, o.name) for o in mp.functions["main"].operations]
    after = _check(build, specs, opset=opset)
    assert [t for t, _ in before if t != "const"] == after
    return after


# ---- cancelling pairs and unary-like ops -------------------------------------------------------


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_cancel_pair_and_relu(dt, npdt, shape):
    def build(mb, x):
        t = mb.transpose(x=x, perm=TO_NHWC)
        r = mb.relu(x=t)
        u = mb.transpose(x=r, perm=TO_NCHW)
        return mb.mul(x=u, y=npdt(2.0))

    assert _check(build, [(shape, dt)]) == ["relu", "mul"]


def test_cancel_pair_of_input_is_output():
    """transpose(transpose(x)) as a function output: an identity of x takes the output's name."""

    def build(mb, x):
        t = mb.transpose(x=x, perm=[1, 0])
        return mb.transpose(x=t, perm=[1, 0])

    assert _check(build, [((3, 4), "fp32")]) == ["identity"]


UNARY = {
    "relu": {}, "log": {}, "relu6": {}, "abs": {}, "acos": {}, "asin": {}, "atan": {}, "atanh": {},
    "ceil": {}, "clip": dict(alpha=-0.5, beta=0.5), "cos": {}, "cosh": {}, "erf": {}, "exp": {},
    "exp2": {}, "floor": {}, "identity": {}, "round": {}, "rsqrt": {}, "sign": {}, "sin": {},
    "sinh": {}, "sqrt": {}, "square": {}, "pow": dict(y=2.0), "tan": {}, "tanh": {},
    "threshold": dict(alpha=0.1), "clamped_relu": dict(alpha=0.1, beta=0.5), "elu": dict(alpha=1.0),
    "gelu": dict(mode="TANH_APPROXIMATION"), "leaky_relu": dict(alpha=0.1),
    "linear_activation": dict(alpha=2.0, beta=1.0), "scaled_tanh": dict(alpha=1.0, beta=0.5),
    "sigmoid": {}, "sigmoid_hard": dict(alpha=0.2, beta=0.5), "softplus": {}, "softsign": {},
    "thresholded_relu": dict(alpha=0.5),
}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_like(op):
    def build(mb, x):
        t = mb.transpose(x=x, perm=TO_NHWC)
        a = getattr(mb, op)(x=t, **{k: (np.float32(v) if isinstance(v, float) else v) for k, v in UNARY[op].items()})
        return mb.transpose(x=mb.relu(x=a), perm=TO_NCHW)

    assert _check(build, [((1, 2, 3, 4), "fp32")]) == [op, "relu"]


def test_unary_like_bool_and_softplus_parametric_keeping_channels():
    def build(mb, x, b):
        t = mb.transpose(x=b, perm=[0, 1, 3, 2])
        n = mb.transpose(x=mb.logical_not(x=t), perm=[0, 1, 3, 2])
        u = mb.transpose(x=x, perm=[0, 1, 3, 2])  # keeps the channel axis: passes
        s = mb.softplus_parametric(x=u, alpha=np.array([1.0, 2.0], np.float32),
                                   beta=np.array([0.5, 1.5], np.float32))
        return mb.transpose(x=s, perm=[0, 1, 3, 2]), n

    assert _check(build, [((1, 2, 3, 4), "fp32"), ((1, 2, 3, 4), "bool")]) == ["logical_not", "softplus_parametric"]


@pytest.mark.parametrize("dt,npdt", DTYPES)
def test_const_input_chain(dt, npdt):
    """A transposed const: values are inferred again after the rewrite."""

    def build(mb, x):
        c = np.arange(24, dtype=npdt).reshape(2, 3, 4)
        t = mb.transpose(x=c, perm=[2, 0, 1])
        e = mb.transpose(x=mb.relu(x=mb.sub(x=t, y=npdt(5.0))), perm=[1, 2, 0])
        return mb.add(x=x, y=e)

    assert _check(build, [((2, 3, 4), dt)]) == ["sub", "relu", "add"]


def test_rank2_rank3_and_negative_perms():
    def build(mb, x, y):
        a = mb.transpose(x=mb.tanh(x=mb.transpose(x=x, perm=[1, 0])), perm=[-1, 0])
        b = mb.transpose(x=y, perm=[0, -1, -2])  # as fuse_transpose_matmul leaves perms
        c = mb.transpose(x=mb.sigmoid(x=b), perm=[0, 2, 1])
        return a, c

    assert _check(build, [((3, 4), "fp32"), ((2, 3, 4), "fp16")]) == ["tanh", "sigmoid"]


# ---- binary ops ----------------------------------------------------------------------------


BINARY = ["add", "mul", "sub", "real_div", "maximum", "minimum"]


def _other(kind, npdt):
    rng = np.random.default_rng(3)
    return {
        "scalar": npdt(1.5),
        "channel": (rng.random(2) + 0.5).astype(npdt),  # (C,) broadcast over NHWC's last axis
        "rank3": (rng.random((3, 4, 2)) + 0.5).astype(npdt),
        "full": (rng.random((1, 3, 4, 2)) + 0.5).astype(npdt),
        "unit": (rng.random((1, 1, 1, 1)) + 0.5).astype(npdt),
    }[kind]


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("kind", ["scalar", "channel", "rank3", "full", "unit"])
@pytest.mark.parametrize("dt,npdt", DTYPES)
def test_binary_const(op, kind, dt, npdt):
    c = _other(kind, npdt)

    def build(mb, x):
        t = mb.transpose(x=x, perm=TO_NHWC)
        a = getattr(mb, op)(x=t, y=c)
        b = getattr(mb, op)(x=c, y=mb.relu(x=a))  # the const first
        return mb.transpose(x=b, perm=TO_NCHW)

    assert _check(build, [((1, 2, 3, 4), dt)]) == [op, "relu", op]


def test_binary_const_symbolic():
    c = np.array([1.0, 2.0], np.float32)

    def build(mb, x):
        t = mb.transpose(x=x, perm=TO_NHWC)
        a = mb.add(x=t, y=c)
        return mb.transpose(x=mb.mul(x=a, y=c), perm=TO_NCHW)

    assert _check(build, [(("B", 2, "H", "W"), "fp32")]) == ["add", "mul"]


def test_binary_both_transposed():
    def build(mb, x, y):
        a = mb.transpose(x=x, perm=TO_NHWC)
        b = mb.transpose(x=y, perm=TO_NHWC)
        s = mb.sub(x=mb.relu(x=a), y=b)
        return mb.transpose(x=mb.maximum(x=s, y=s), perm=TO_NCHW)

    assert _check(build, [((1, 2, 3, 4), "fp32"), ((1, 2, 3, 4), "fp32")]) == ["relu", "sub", "maximum"]


@pytest.mark.parametrize("other", [(2,), (1, 1, 1, 2), (1, 3, 1, 1), (3, 1, 2)])
def test_binary_other_input_reshaped(other):
    """A non-const other input of a static shape: a reshape does the inverse transpose."""

    def build(mb, x, y):
        t = mb.transpose(x=x, perm=TO_NHWC)
        return mb.transpose(x=mb.add(x=t, y=y), perm=TO_NCHW)

    ops = _check(build, [((1, 2, 3, 4), "fp32"), (other, "fp32")])
    if other == (3, 1, 2):  # two non-unit dims moved: the transposes stay
        assert ops == ["transpose", "add", "transpose"]
    else:
        assert ops == ["reshape", "add"]


def test_binary_different_perms_is_unchanged():
    def build(mb, x, y):
        a = mb.transpose(x=x, perm=TO_NHWC)
        b = mb.transpose(x=y, perm=TO_NCHW)
        return mb.transpose(x=mb.add(x=a, y=b), perm=TO_NCHW)

    _unchanged(build, [((1, 3, 3, 3), "fp32"), ((1, 3, 3, 3), "fp32")])


def test_binary_other_input_symbolic_or_of_higher_rank():
    """mul with a symbolic other input, or one of higher rank, materializes the transpose."""

    def build(mb, x, y, z):
        a = mb.transpose(x=x, perm=TO_NHWC)
        m = mb.mul(x=a, y=y)
        n = mb.mul(x=z, y=a)
        return m, n, mb.transpose(x=mb.relu(x=a), perm=TO_NCHW), mb.transpose(x=mb.exp(x=a), perm=TO_NCHW)

    ops = _check(build, [((1, 2, 3, 4), "fp32"), (("S", 1, 1, 2), "fp32"), ((2, 1, 3, 4, 2), "fp32")])
    assert ops == ["transpose", "mul", "transpose", "mul", "relu", "exp"]


# ---- concat / split / pad / reduce ------------------------------------------------------------


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_concat_with_const_and_split(dt, npdt, shape):
    def build(mb, x, y):
        a = mb.transpose(x=x, perm=TO_NHWC)
        b = mb.transpose(x=y, perm=TO_NHWC)
        c = mb.concat(values=[a, mb.exp(x=b)], axis=-1)
        p, q = mb.split(x=c, num_splits=2, axis=3)
        r = mb.concat(values=[q, p], axis=1, interleave=True)
        return mb.transpose(x=r, perm=TO_NCHW)

    ops = _check(build, [(shape, dt), (shape, dt)])
    assert ops == ["exp", "concat", "split", "concat"]


def test_concat_const_input():
    c = np.arange(24, dtype=np.float32).reshape(1, 3, 4, 2)

    def build(mb, x):
        a = mb.transpose(x=x, perm=TO_NHWC)
        return mb.transpose(x=mb.concat(values=[a, c, a], axis=-1), perm=TO_NCHW)

    assert _check(build, [((1, 2, 3, 4), "fp32")]) == ["concat"]


def test_concat_negative():
    def build(mb, x, y):
        a = mb.transpose(x=x, perm=TO_NHWC)
        c = mb.concat(values=[a, y], axis=-1)  # y is not transposed
        return mb.transpose(x=c, perm=TO_NCHW)

    _unchanged(build, [((1, 2, 3, 4), "fp32"), ((1, 3, 4, 2), "fp32")])


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate"])
@pytest.mark.parametrize("shape", [(1, 2, 3, 4), (1, 2, "H", 4)])
def test_pad(mode, shape):
    def build(mb, x):
        a = mb.transpose(x=x, perm=TO_NHWC)
        p = mb.pad(x=a, pad=[0, 0, 1, 1, 1, 0, 0, 0], mode=mode)  # H and W of NHWC
        r = mb.relu(x=p)
        q = mb.pad(x=r, pad=[0, 0, 0, 0, 1, 2, 1, 1], mode=mode)  # W and C of NHWC
        return mb.transpose(x=q, perm=TO_NCHW), mb.transpose(x=r, perm=TO_NCHW)

    ops = _check(build, [(shape, "fp32")])
    if mode == "constant":
        assert ops == ["pad", "relu", "pad"]
    else:  # the second pad would pad C of NCHW (not one of the last two dims): materialized
        assert ops == ["pad", "relu", "transpose", "pad", "transpose"]


@pytest.mark.parametrize("mode", ["constant", "reflect"])
def test_pad_short_list(mode):
    """Pad amounts for the last dims only: they pass when they stay on the last dims."""

    def build(mb, x):
        a = mb.transpose(x=x, perm=[1, 0, 3, 2])
        p = mb.pad(x=a, pad=[1, 0, 1, 2], mode=mode)
        b = mb.transpose(x=x, perm=[0, 2, 3, 1])
        q = mb.pad(x=b, pad=[1, 1], mode=mode)  # would pad dim 1: stays
        return mb.transpose(x=p, perm=[1, 0, 3, 2]), mb.transpose(x=q, perm=TO_NCHW)

    ops = _check(build, [((2, 3, 4, 5), "fp32")])
    assert ops == ["pad", "transpose", "pad", "transpose"]


def test_pad_negative():
    def build(mb, x, p):
        a = mb.transpose(x=x, perm=TO_NHWC)
        b = mb.pad(x=a, pad=p)  # pad amounts not const
        return mb.transpose(x=b, perm=TO_NCHW)

    _unchanged(build, [((1, 2, 3, 4), "fp32"), ((8,), "int32")])


REDUCE = ["reduce_l1_norm", "reduce_l2_norm", "reduce_max", "reduce_log_sum", "reduce_log_sum_exp",
          "reduce_mean", "reduce_min", "reduce_prod", "reduce_sum", "reduce_sum_square"]


@pytest.mark.parametrize("op", REDUCE)
def test_reduce_keep_dims(op):
    def build(mb, x):
        a = mb.transpose(x=x, perm=TO_NHWC)
        r = getattr(mb, op)(x=mb.abs(x=a), axes=[1, -2], keep_dims=True)
        return mb.transpose(x=r, perm=TO_NCHW)

    assert _check(build, [((1, 2, 3, 4), "fp32")]) == ["abs", op]


def test_reduce_symbolic_fp16():
    def build(mb, x):
        a = mb.transpose(x=x, perm=TO_NHWC)
        r = mb.reduce_mean(x=a, axes=[-1], keep_dims=True)
        return mb.transpose(x=mb.sub(x=a, y=r), perm=TO_NCHW)

    assert _check(build, [(("B", 2, "H", "W"), "fp16")]) == ["reduce_mean", "sub"]


def test_reduce_without_keep_dims_materializes():
    def build(mb, x):
        a = mb.transpose(x=x, perm=TO_NHWC)
        r = mb.reduce_sum(x=a, axes=[1], keep_dims=False)
        return mb.transpose(x=mb.relu(x=a), perm=TO_NCHW), r

    # 1 start + 1 cancel against 1 materializing op: removed, a transpose before reduce_sum
    assert _check(build, [((1, 2, 3, 4), "fp32")]) == ["transpose", "reduce_sum", "relu"]


def test_slice_materializes():
    """coremltools' pass does not move transposes through slice_by_index or slice_by_size."""

    def build(mb, x):
        a = mb.transpose(x=x, perm=TO_NHWC)
        s = mb.slice_by_index(x=a, begin=[0, 0, 0, 0], end=[1, 2, 3, 1])
        z = mb.slice_by_size(x=a, begin=[0, 1, 1, 0], size=[1, 2, 2, 2])
        return mb.transpose(x=s, perm=TO_NCHW), z

    _unchanged(build, [((1, 2, 3, 4), "fp32")])


# ---- layouts from converters -------------------------------------------------------------------


@pytest.mark.parametrize("dt,npdt", DTYPES)
@pytest.mark.parametrize("shape", [(1, 4, 5, 2), (1, "H", "W", 2)])
def test_nhwc_model_with_nchw_convs(dt, npdt, shape):
    """A TF-style model: NHWC input, each conv wrapped in transposes to NCHW and back."""
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((3, 2, 3, 3)).astype(npdt) * npdt(0.3)
    w2 = rng.standard_normal((3, 3, 1, 1)).astype(npdt) * npdt(0.3)
    bias = rng.standard_normal(3).astype(npdt)

    def build(mb, x):
        h = mb.transpose(x=x, perm=TO_NCHW)
        h = mb.conv(x=h, weight=w1, pad_type="same")
        h = mb.transpose(x=h, perm=TO_NHWC)
        h = mb.relu(x=mb.add(x=h, y=bias))
        h = mb.transpose(x=h, perm=TO_NCHW)
        h = mb.conv(x=h, weight=w2)
        h = mb.transpose(x=h, perm=TO_NHWC)
        h = mb.mul(x=h, y=npdt(0.5))
        h = mb.transpose(x=h, perm=TO_NCHW)
        h = mb.avg_pool(x=h, kernel_sizes=[2, 2], strides=[1, 1], pad_type="same")
        return mb.transpose(x=h, perm=TO_NHWC)

    ops = _check(build, [(shape, dt)])
    assert ops == ["transpose", "conv", "add", "relu", "conv", "mul", "avg_pool", "transpose"]


def test_nchw_model_with_nhwc_layer_norm():
    """layer_norm over channels between transposes materializes: coremltools keeps them."""
    g = np.linspace(0.5, 1.5, 4).astype(np.float32)

    def build(mb, x):
        h = mb.transpose(x=x, perm=TO_NHWC)
        h = mb.layer_norm(x=h, axes=[-1], gamma=g, beta=g, epsilon=1e-5)
        h = mb.transpose(x=h, perm=TO_NCHW)
        return mb.relu(x=h)

    _unchanged(build, [((1, 4, 3, 3), "fp32")])


# ---- consumers, outputs ------------------------------------------------------------------------


def test_two_consumers_cancel_and_pool():
    """coremltools' example 3: the transpose moves to the pool, the pair cancels."""

    def build(mb, x):
        t = mb.transpose(x=x, perm=TO_NHWC)
        r = mb.relu(x=t)
        p = mb.max_pool(x=r, kernel_sizes=[1, 1], strides=[1, 1], pad_type="valid")
        q = mb.transpose(x=mb.log(x=mb.relu(x=t)), perm=TO_NCHW)
        return p, q

    assert _check(build, [((1, 2, 3, 4), "fp32")]) == ["relu", "transpose", "max_pool", "relu", "log"]


def test_more_materializing_than_removed_is_unchanged():
    def build(mb, x):
        t = mb.transpose(x=x, perm=TO_NHWC)
        r = mb.relu(x=t)
        a = mb.max_pool(x=r, kernel_sizes=[1, 1], strides=[1, 1], pad_type="valid")
        b = mb.avg_pool(x=r, kernel_sizes=[1, 1], strides=[1, 1], pad_type="valid")
        return a, b, mb.transpose(x=r, perm=TO_NCHW)

    _unchanged(build, [((1, 2, 3, 4), "fp32")])


def test_lazy_outputs_get_materialized_with_their_names():
    """relu's output is a function output: a transpose named like it is inserted at the end and
    relu becomes "_before_transpose_op_relu_0"; the cancelling transpose's output name goes to
    the op before it."""

    def build(mb, x):
        t = mb.transpose(x=x, perm=TO_NHWC)
        r = mb.relu(x=t)
        s = mb.sigmoid(x=r)
        return r, mb.transpose(x=s, perm=TO_NCHW), mb.transpose(x=mb.exp(x=r), perm=TO_NCHW), r

    ops = _check(build, [((1, 2, 3, 4), "fp32")])
    assert ops == ["relu", "sigmoid", "exp", "transpose"]


def test_cancelling_transposes_as_outputs():
    """Two cancelling transposes of the same var are both outputs: the var takes the first name,
    an identity the second."""

    def build(mb, x):
        r = mb.relu(x=mb.transpose(x=x, perm=TO_NHWC))
        return mb.transpose(x=r, perm=TO_NCHW), mb.transpose(x=r, perm=TO_NCHW)

    assert _check(build, [((1, 2, 3, 4), "fp32")]) == ["relu", "identity"]


def test_transpose_output_and_unused_transpose_stay():
    def build(mb, x):
        t = mb.transpose(x=x, perm=TO_NHWC)  # a function output: materialized there
        mb.transpose(x=x, perm=[0, 1, 3, 2])  # unused
        u = mb.transpose(x=x, perm=[0, 2, 1, 3])
        v = mb.transpose(x=u, perm=[0, 1, 3, 2])  # not the inverse
        return t, mb.relu(x=v)

    _unchanged(build, [((1, 2, 3, 4), "fp32")])


def test_several_starts_meeting():
    """Transposes on two inputs meet at an add and cancel downstream as one group."""

    def build(mb, x, y):
        a = mb.relu(x=mb.transpose(x=x, perm=TO_NHWC))
        b = mb.transpose(x=y, perm=TO_NHWC)
        s = mb.add(x=a, y=b)
        return mb.transpose(x=s, perm=TO_NCHW), mb.transpose(x=mb.exp(x=s), perm=TO_NCHW)

    assert _check(build, [((1, 2, 3, 4), "fp32"), ((1, 2, 3, 4), "fp32")]) == ["relu", "add", "exp"]


def test_starts_meeting_at_an_unused_op_kept():
    """Two transposes meet at an unused add; the one with a materializing op stays (1 start, 1
    materializing op), so both stay, as in coremltools."""

    def build(mb, x, y):
        a = mb.transpose(x=x, perm=TO_NHWC)
        b = mb.transpose(x=y, perm=TO_NHWC)
        mb.add(x=a, y=b)
        return mb.layer_norm(x=a, axes=[-1])

    _unchanged(build, [((1, 2, 3, 4), "fp32"), ((1, 2, 3, 4), "fp32")])


# ---- blocks ---------------------------------------------------------------------------------


def test_function_with_control_flow_is_unchanged():
    """coremltools rewrites only flat function bodies (nothing inside or around a cond)."""

    def build(mb, x, p):
        r = mb.relu(x=mb.transpose(x=x, perm=TO_NHWC))

        def true_fn():
            a = mb.transpose(x=x, perm=TO_NHWC)
            return mb.transpose(x=mb.relu(x=a), perm=TO_NCHW)

        def false_fn():
            return mb.identity(x=x)

        c = mb.cond(pred=mb.squeeze(x=p), _true_fn=true_fn, _false_fn=false_fn)
        return mb.transpose(x=r, perm=TO_NCHW), c

    _unchanged(build, [((1, 2, 3, 4), "fp32"), ((1,), "bool")])


def test_in_default_pipeline():
    """convert with the DEFAULT pipeline runs reduce_transposes (not reported skipped) and gives
    coremltools' ops."""
    from support.parity import _ct

    ct = _ct()[0]
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((3, 2, 1, 1)).astype(np.float32)
    w2 = rng.standard_normal((2, 3, 1, 1)).astype(np.float32)

    def build(mb, x):
        h = mb.transpose(x=mb.conv(x=mb.transpose(x=x, perm=TO_NCHW), weight=w1), perm=TO_NHWC)
        h = mb.relu(x=mb.add(x=h, y=np.linspace(-1, 1, 3).astype(np.float32)))
        return mb.transpose(x=mb.conv(x=mb.transpose(x=h, perm=TO_NCHW), weight=w2), perm=TO_NHWC)

    cp, mp, _ = build_both(build, [((1, 4, 4, 2), "fp32")])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = ct.convert(cp, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS17,
                        skip_model_load=True)
        mm = milkit.convert(mp, convert_to="mlprogram", minimum_deployment_target=milkit.target.iOS17)
    assert RT not in mm.skipped_passes
    want = [o.op_type for o in cm._mil_program.functions["main"].operations]
    got = [o.op_type for o in mm._mil_program.functions["main"].operations]
    assert got == want
    assert got.count("transpose") == 2


# ---- where milkit deliberately differs ---------------------------------------------------------


def test_differs_pow_with_broadcast_exponent():
    """coremltools treats pow as unary and ignores y: a per-channel exponent ends up on the
    wrong axis (wrong numbers). milkit keeps the transposes."""
    y = np.array([1.0, 2.0, 3.0, 1.0], np.float32)

    def build(mb, x):
        a = mb.transpose(x=x, perm=TO_NHWC)
        return mb.transpose(x=mb.pow(x=mb.abs(x=a), y=y), perm=TO_NCHW)

    mp = check_numbers_only(build, [((1, 4, 4, 4), "fp32")], [RT])
    assert op_types(mp).count("transpose") == 2


def test_differs_softplus_parametric_moving_channels():
    """coremltools moves the transpose through softplus_parametric and then fails type inference
    (alpha has the old channel count); milkit keeps the transposes."""

    def build(mb, x):
        a = mb.transpose(x=x, perm=TO_NHWC)
        s = mb.softplus_parametric(x=a, alpha=np.ones(3, np.float32), beta=np.ones(3, np.float32))
        return mb.transpose(x=s, perm=TO_NCHW)

    cp, _, _ = build_both(build, [((1, 2, 3, 4), "fp32")])
    with pytest.raises(ValueError, match="alpha"):
        ct_run(cp, [RT])
    mp = check_numbers_only(build, [((1, 2, 3, 4), "fp32")], [RT])
    assert op_types(mp).count("transpose") == 2


def test_differs_reduce_without_axes():
    """coremltools raises KeyError('axes'); milkit stops the transpose there."""

    def build(mb, x):
        a = mb.transpose(x=x, perm=TO_NHWC)
        r = mb.reduce_max(x=a, keep_dims=True)
        return mb.transpose(x=mb.relu(x=a), perm=TO_NCHW), r

    cp, _, _ = build_both(build, [((1, 2, 3, 4), "fp32")])
    with pytest.raises(KeyError):
        ct_run(cp, [RT])
    mp = check_numbers_only(build, [((1, 2, 3, 4), "fp32")], [RT])
    assert [t for t in op_types(mp) if t != "const"] == ["transpose", "reduce_max", "relu"]


def test_differs_op_reading_both_layouts():
    """matmul(x=a, y=transpose(a)): coremltools' materialized transpose replaces both inputs
    (computes transpose(a) @ transpose(a)); milkit replaces only the input that was transposed."""

    def build(mb, x):
        t = mb.transpose(x=x, perm=[0, 1, 3, 2])
        m = mb.matmul(x=x, y=t)
        return m, mb.transpose(x=mb.relu(x=t), perm=[0, 1, 3, 2])

    cp, _, _ = build_both(build, [((1, 2, 3, 3), "fp32")])
    ct_run(cp, [RT])
    mm = [o for o in cp.functions["main"].operations if o.op_type == "matmul"][0]
    assert mm.x is mm.y  # coremltools: both inputs are the new transpose
    mp = check_numbers_only(build, [((1, 2, 3, 3), "fp32")], [RT])
    m = [o for o in mp.functions["main"].operations if o.op_type == "matmul"][0]
    assert m.inputs["x"].name == "x" and m.inputs["y"].op.op_type == "transpose"


def test_differs_output_name_kept():
    """relu(x) is an output and feeds transpose -> inverse transpose (another output):
    coremltools renames relu to the second output's name and the first output name is lost;
    milkit adds an identity so both outputs keep their names."""

    def build(mb, x):
        r = mb.relu(x=x)
        t = mb.transpose(x=r, perm=TO_NHWC)
        return r, mb.transpose(x=t, perm=TO_NCHW)

    cp, _, _ = build_both(build, [((1, 2, 3, 4), "fp32")])
    ct_run(cp, [RT])
    assert [v.name for v in cp.functions["main"].outputs] == ["transpose_1", "transpose_1"]
    mp = check_numbers_only(build, [((1, 2, 3, 4), "fp32")], [RT])
    assert [v.name for v in mp.functions["main"].outputs] == ["relu_0", "transpose_1"]
    assert [t for t in op_types(mp) if t != "const"] == ["relu", "identity"]


def test_differs_starts_meeting_at_an_unused_op():
    """Two transposes meet at an add whose result is unused; only one has an inverse downstream.
    coremltools removes that one and re-infers the add with mismatched inputs (it raises);
    milkit removes both."""

    def build(mb, x, y):
        a = mb.transpose(x=x, perm=TO_NHWC)
        b = mb.transpose(x=y, perm=TO_NHWC)
        mb.add(x=a, y=b)
        return mb.transpose(x=mb.relu(x=a), perm=TO_NCHW)

    specs = [((1, 2, 3, 4), "fp32"), ((1, 2, 3, 4), "fp32")]
    cp, _, _ = build_both(build, specs)
    with pytest.raises(ValueError):
        ct_run(cp, [RT])
    mp = check_numbers_only(build, specs, [RT])
    assert "transpose" not in op_types(mp)


def test_differs_output_names_across_transposes():
    """sigmoid(x) feeds two transpose pairs whose second transposes are outputs: coremltools
    renames sigmoid for the first pair, forgets it, renames it again for the second and the first
    output loses its name; milkit renames once and adds an identity for the second."""

    def build(mb, x):
        s = mb.sigmoid(x=x)
        a = mb.transpose(x=mb.transpose(x=s, perm=[0, 1, 3, 2]), perm=[0, 1, 3, 2])
        b = mb.transpose(x=mb.transpose(x=s, perm=TO_NHWC), perm=TO_NCHW)
        return a, b

    cp, _, _ = build_both(build, [((1, 2, 3, 4), "fp32")])
    ct_run(cp, [RT])
    assert [v.name for v in cp.functions["main"].outputs] == ["transpose_3", "transpose_3"]
    mp = check_numbers_only(build, [((1, 2, 3, 4), "fp32")], [RT])
    assert [v.name for v in mp.functions["main"].outputs] == ["transpose_1", "transpose_3"]
    assert [t for t in op_types(mp) if t != "const"] == ["sigmoid", "identity"]
