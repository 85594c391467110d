"""Parity of the 27 elementwise unary ops with coremltools, at every opset."""

import numpy as np
import pytest
from support.parity import ALL_OPSETS, check, check_error

FLOAT_ONLY = ["acos", "asin", "atan", "atanh", "ceil", "cos", "cosh", "erf", "exp", "floor",
              "round", "sin", "sinh", "sqrt", "tan", "tanh"]
WITH_INT = ["abs", "exp2", "sign", "square"]
EPSILON = ["inverse", "log", "rsqrt"]

SHAPES = [(2, 3), (2, "S", 4), ("S", "T")]

# values inside every op's domain (acos/asin/atanh need |x| < 1)
UNIT = np.array([[-0.75, -0.5, 0.0], [0.25, 0.5, 0.9]])
WIDE = np.array([[-2.5, -1.5, -0.5], [0.0, 1.25, 2.5]])


def values_for(op, dtype):
    v = UNIT if op in ("acos", "asin", "atanh") else WIDE
    return v.astype(dtype)


@pytest.mark.parametrize("op", FLOAT_ONLY + WITH_INT)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_unary_vars(op, shape, dtype):
    check(lambda mb, x: getattr(mb, op)(x=x), [(shape, dtype)], ALL_OPSETS)


@pytest.mark.parametrize("op", WITH_INT)
@pytest.mark.parametrize("shape", SHAPES)
def test_unary_int_vars(op, shape):
    check(lambda mb, x: getattr(mb, op)(x=x), [(shape, "int32")], ALL_OPSETS)


@pytest.mark.parametrize("op", FLOAT_ONLY + WITH_INT)
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_unary_const_fold(op, dtype):
    a = values_for(op, dtype)
    check(lambda mb, x: getattr(mb, op)(x=a), [((1,), "fp32")], ALL_OPSETS)


@pytest.mark.parametrize("op", FLOAT_ONLY + WITH_INT)
def test_unary_scalar_fold(op):
    a = np.float32(0.5)
    check(lambda mb, x: getattr(mb, op)(x=a, name="s"), [((1,), "fp32")], ["iOS17"])


@pytest.mark.parametrize("op", WITH_INT)
def test_unary_int_fold(op):
    # abs(INT32_MIN) wraps; square overflows int32; exp2 of int32 truncates (and overflows to
    # INT32_MIN) because numpy computes it in float64 and coremltools stores it as int32
    a = np.array([-2147483648, -7, -1, 0, 3, 46341, 40], np.int32)
    check(lambda mb, x: getattr(mb, op)(x=a), [((1,), "fp32")], ALL_OPSETS)


def test_round_half_to_even_and_nan_propagation():
    a = np.array([0.5, 1.5, 2.5, -0.5, -1.5, np.nan, np.inf], np.float32)
    check(lambda mb, x: mb.round(x=a), [((1,), "fp32")], ["iOS17"])
    check(lambda mb, x: mb.sign(x=a), [((1,), "fp32")], ["iOS17"])
    check(lambda mb, x: mb.sqrt(x=np.array([-1.0, 4.0], np.float32)), [((1,), "fp32")], ["iOS17"])


def test_unary_chain_keeps_names_and_symbols():
    check(lambda mb, x: mb.tanh(x=mb.exp(x=mb.abs(x=x), name="e")), [(("B", 3, "S"), "fp16")],
          ALL_OPSETS)


@pytest.mark.parametrize("op", FLOAT_ONLY)
def test_float_only_rejects_int32(op):
    e = check_error(lambda mb, x: getattr(mb, op)(x=x), [((2,), "int32")],
                    match=rf"{op} '{op}_0'.*'x'.*int32")
    assert isinstance(e, TypeError)


@pytest.mark.parametrize("op", FLOAT_ONLY + WITH_INT + EPSILON + ["clip", "threshold"])
def test_rejects_bool(op):
    def build(mb, x):
        kw = {"alpha": True} if op == "threshold" else {}
        if op == "clip":
            kw = {"alpha": False, "beta": True}
        return getattr(mb, op)(x=x, **kw)

    check_error(build, [((2,), "bool")], match=rf"{op} '{op}_0'.*bool")


@pytest.mark.parametrize("op", FLOAT_ONLY + WITH_INT + ["logical_not", "cast"])
def test_missing_x(op):
    kw = {"dtype": "fp32"} if op == "cast" else {}
    check_error(lambda mb, x: getattr(mb, op)(**kw), [((2,), "fp32")],
                match=rf"{op} '{op}_0'.*missing required input 'x'")


# ---- logical_not ----------------------------------------------------------------------------

def test_logical_not():
    check(lambda mb, x: mb.logical_not(x=x), [(("S", 3), "bool")], ALL_OPSETS)
    a = np.array([[True, False], [False, True]])
    check(lambda mb, x: mb.logical_not(x=a), [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.logical_not(x=np.bool_(True)), [((1,), "fp32")], ["iOS17"])


@pytest.mark.parametrize("dtype", ["fp32", "int32", "fp16"])
def test_logical_not_rejects_non_bool(dtype):
    check_error(lambda mb, x: mb.logical_not(x=x), [((2,), dtype)],
                match=rf"logical_not 'logical_not_0'.*'x'.*{dtype}")


# ---- epsilon ops: inverse, log, rsqrt ---------------------------------------------------------

@pytest.mark.parametrize("op", EPSILON)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_epsilon_default(op, shape, dtype):
    # the default epsilon is a const of x's dtype named <op>_0_epsilon_0
    check(lambda mb, x: getattr(mb, op)(x=x), [(shape, dtype)], ALL_OPSETS)


@pytest.mark.parametrize("op", EPSILON)
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_epsilon_given(op, dtype):
    check(lambda mb, x: getattr(mb, op)(x=x, epsilon=dtype(1e-3)), [((2, "S"), np.dtype(dtype).name.replace("float", "fp"))],
          ALL_OPSETS)


@pytest.mark.parametrize("op", EPSILON)
def test_epsilon_other_dtype_from_ios17(op):
    # iOS15/16: epsilon shares T with x (error); iOS17+: epsilon has its own domain U
    check(lambda mb, x: getattr(mb, op)(x=x, epsilon=np.float32(1e-3)), [((2, 3), "fp16")], ALL_OPSETS)
    check(lambda mb, x: getattr(mb, op)(x=x, epsilon=np.float16(1e-3)), [((2, 3), "fp32")], ALL_OPSETS)
    check_error(lambda mb, x: getattr(mb, op)(x=x, epsilon=np.float32(1e-3)), [((2, 3), "fp16")],
                opset="iOS16", match=rf"{op} '{op}_0'.*'epsilon'.*fp32.*'x'.*fp16")


@pytest.mark.parametrize("op", EPSILON)
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_epsilon_fold(op, dtype):
    a = np.array([[0.0, 0.5, 2.0], [4.0, 1e-3, 100.0]], dtype)
    check(lambda mb, x: getattr(mb, op)(x=a), [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, x: getattr(mb, op)(x=a, epsilon=dtype(0.5)), [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, x: getattr(mb, op)(x=dtype(3.0)), [((1,), "fp32")], ["iOS17"])


@pytest.mark.parametrize("op", EPSILON)
def test_epsilon_fold_mixed_dtype(op):
    a = np.array([0.25, 2.0, 9.0], np.float16)
    check(lambda mb, x: getattr(mb, op)(x=a, epsilon=np.float32(0.125)), [((1,), "fp32")], ["iOS17", "iOS18"])


@pytest.mark.parametrize("op", EPSILON)
def test_epsilon_must_be_const(op):
    check_error(lambda mb, x, x1: getattr(mb, op)(x=x, epsilon=x1), [((2,), "fp32"), ((1,), "fp32")],
                match=rf"{op} '{op}_0'.*'epsilon'.*const")


@pytest.mark.parametrize("op", EPSILON)
def test_epsilon_rejects_int32(op):
    check_error(lambda mb, x: getattr(mb, op)(x=x), [((2,), "int32")], match=rf"{op} '{op}_0'.*'x'.*int32")


# ---- clip / threshold -----------------------------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_clip_vars(shape, dtype):
    name = "fp16" if dtype == np.float16 else "fp32"
    check(lambda mb, x: mb.clip(x=x, alpha=dtype(-1.0), beta=dtype(2.0)), [(shape, name)], ALL_OPSETS)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_clip_fold(dtype):
    a = np.array([[-3.0, -1.0, 0.5], [2.0, 7.0, np.nan]], dtype)
    check(lambda mb, x: mb.clip(x=a, alpha=dtype(-1.5), beta=dtype(2.0)), [((1,), "fp32")], ALL_OPSETS)


def test_clip_alpha_not_below_beta():
    # iOS15/16 accept alpha >= beta; iOS17 validates it
    check(lambda mb, x: mb.clip(x=x, alpha=2.0, beta=1.0), [((2,), "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.clip(x=x, alpha=1.0, beta=1.0), [((2,), "fp32")], ALL_OPSETS)
    e = check_error(lambda mb, x: mb.clip(x=x, alpha=2.0, beta=1.0), [((2,), "fp32")], opset="iOS17",
                    match=r"clip 'clip_0'.*`alpha` value \(2.0\) should be smaller than `beta` value \(1.0\)")
    assert isinstance(e, ValueError)


def test_clip_errors():
    check_error(lambda mb, x: mb.clip(x=x, alpha=np.float16(0), beta=1.0), [((2,), "fp32")],
                match=r"clip 'clip_0'.*'alpha'.*fp16")
    check_error(lambda mb, x, x1: mb.clip(x=x, alpha=x1, beta=1.0), [((2,), "fp32"), ((1,), "fp32")],
                match=r"clip 'clip_0'.*'alpha'.*const")
    check_error(lambda mb, x: mb.clip(x=x, alpha=0.0), [((2,), "fp32")],
                match=r"clip 'clip_0'.*missing required input 'beta'")
    check_error(lambda mb, x: mb.clip(x=x, alpha=0, beta=1), [((2,), "int32")],
                match=r"clip 'clip_0'.*'x'.*int32")


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype,alpha", [("fp16", np.float16(0.5)), ("fp32", 0.5), ("int32", 2)])
def test_threshold_vars(shape, dtype, alpha):
    check(lambda mb, x: mb.threshold(x=x, alpha=alpha), [(shape, dtype)], ALL_OPSETS)


def test_threshold_fold():
    for a, alpha in [(np.array([-2.0, 0.5, 3.0], np.float32), np.float32(0.75)),
                     (np.array([-2.0, 0.5, 3.0], np.float16), np.float16(0.75)),
                     (np.array([-5, 0, 7], np.int32), np.int32(1))]:
        check(lambda mb, x: mb.threshold(x=a, alpha=alpha), [((1,), "fp32")], ALL_OPSETS)


def test_threshold_errors():
    check_error(lambda mb, x, x1: mb.threshold(x=x, alpha=x1), [((2,), "fp32"), ((1,), "fp32")],
                match=r"threshold 'threshold_0'.*'alpha'.*const")
    check_error(lambda mb, x: mb.threshold(x=x, alpha=1), [((2,), "fp32")],
                match=r"threshold 'threshold_0'.*'alpha'.*alpha has dtype int32 whereas x has dtype fp32")
    check_error(lambda mb, x: mb.threshold(x=x), [((2,), "fp32")],
                match=r"threshold 'threshold_0'.*missing required input 'alpha'")


# ---- cast -----------------------------------------------------------------------------------

CAST_TO = ["fp16", "fp32", "int32", "bool", "int8", "uint8", "int16", "uint16"]
CAST_FROM = ["fp16", "fp32", "int32", "bool", "int8", "uint8", "int16", "uint16"]


@pytest.mark.parametrize("src", CAST_FROM)
@pytest.mark.parametrize("to", CAST_TO)
def test_cast_vars(src, to):
    # int8/uint8/int16/uint16 exist from iOS17 only (both sides must raise before that)
    check(lambda mb, x: mb.cast(x=x, dtype=to), [((2, "S"), src)], ALL_OPSETS)


CAST_VALUES = [3e9, -3e9, 300.0, -1.0, -129.5, 70000.0, np.nan, np.inf, -np.inf, 2.7, -2.7, 0.0]


@pytest.mark.parametrize("to", CAST_TO)
@pytest.mark.parametrize("src", [np.float32, np.float16])
def test_cast_fold_float(to, src):
    # numpy semantics: float -> int goes through int32 (NaN/overflow -> INT32_MIN), then wraps
    a = np.array(CAST_VALUES, src)
    check(lambda mb, x: mb.cast(x=a, dtype=to), [((1,), "fp32")], ALL_OPSETS)


@pytest.mark.parametrize("to", CAST_TO)
def test_cast_fold_int(to):
    a = np.array([300, -1, 70000, -70000, 2**31 - 1, 0], np.int32)
    check(lambda mb, x: mb.cast(x=a, dtype=to), [((1,), "fp32")], ALL_OPSETS)
    b = np.array([True, False])
    check(lambda mb, x: mb.cast(x=b, dtype=to), [((1,), "fp32")], ALL_OPSETS)


@pytest.mark.parametrize("to", ["int32", "bool", "fp16", "uint8"])
def test_cast_fold_scalar(to):
    check(lambda mb, x: mb.cast(x=np.float32(-2.7), dtype=to), [((1,), "fp32")], ["iOS17"])


@pytest.mark.parametrize("bad", ["int64", "float32", "fp64", "string", "uint32", "foo"])
def test_cast_bad_dtype(bad):
    for opset in ["iOS15", "iOS17"]:
        check_error(lambda mb, x: mb.cast(x=x, dtype=bad), [((2,), "fp32")], opset=opset,
                    match=rf"cast 'cast_0'.*'dtype'.*Provided '{bad}'")


def test_cast_int8_needs_ios17():
    check_error(lambda mb, x: mb.cast(x=x, dtype="int8"), [((2,), "fp32")], opset="iOS16",
                match=r"cast 'cast_0'.*one of the \['fp16', 'fp32', 'int32', 'bool'\]")
    check_error(lambda mb, x: mb.cast(x=x, dtype="fp32"), [((2,), "int8")], opset="iOS16",
                match=r"cast 'cast_0'.*'x'.*int8")


def test_cast_errors():
    check_error(lambda mb, x: mb.cast(x=x), [((2,), "fp32")],
                match=r"cast 'cast_0'.*missing required input 'dtype'")
    check_error(lambda mb, x: mb.cast(x=x, dtype=1), [((2,), "fp32")],
                match=r"cast 'cast_0'.*'dtype'.*int32")


def test_cast_chain_and_auto_opset():
    check(lambda mb, x: mb.cast(x=mb.cast(x=x, dtype="int32"), dtype="fp16"), [(("S", 2), "fp32")],
          ALL_OPSETS + (None,))
    # with no opset given, the oldest cast (iOS13) is used: int16 x is rejected, as in coremltools
    check_error(lambda mb, x: mb.cast(x=x, dtype="fp32"), [(("S", 2), "int16")], opset=None,
                match=r"cast 'cast_0'.*'x'.*int16")


def test_erf_of_empty_const_folds_to_empty():
    # coremltools' erf uses np.vectorize(math.erf), which raises "cannot call `vectorize` on size
    # 0 inputs" for an empty x. erf of an empty tensor is the empty tensor (the op is element-wise),
    # so milkit folds it; other element-wise ops agree with coremltools on this.
    import milkit
    from milkit import Builder as mb
    from milkit import types

    @mb.program(input_specs=[mb.TensorSpec((1,), types.fp32)], opset_version=milkit.target.iOS17)
    def prog(x):
        return mb.erf(x=np.zeros((0, 3), np.float32))

    (out,) = [o.outputs[0] for o in prog.functions["main"].operations if o.op_type == "erf"]
    assert out.shape == (0, 3)
    assert np.asarray(out.val).shape == (0, 3)
    check(lambda mb, x: mb.exp(x=np.zeros((0, 3), np.float32)), [((1,), "fp32")], ["iOS17"])
