"""Parity of the 17 activation ops with coremltools, at every opset."""

import numpy as np
import pytest
from support.parity import ALL_OPSETS, check, check_error

NO_PARAM = ["relu", "relu6", "sigmoid", "silu", "softplus", "softsign"]
ALPHA = ["elu", "leaky_relu", "thresholded_relu"]
ALPHA_BETA = ["clamped_relu", "linear_activation", "scaled_tanh", "sigmoid_hard"]
SHAPES = [(2, 3), (2, "S", 4), ("S", "T")]
NP = {"fp16": np.float16, "fp32": np.float32}
VALUES = np.array([[-3.0, -1.5, -0.25, 0.0], [0.25, 1.0, 2.5, 7.0]])


def params(op, np_dtype):
    if op in ALPHA:
        return {"alpha": np_dtype(0.5)}
    if op in ALPHA_BETA:
        return {"alpha": np_dtype(0.5), "beta": np_dtype(1.5)}
    return {}


def milkit_program(build, shape=(2, 3), dtype="fp32", opset="iOS17"):
    import milkit
    from milkit import Builder as mb
    from milkit import types

    @mb.program(input_specs=[mb.TensorSpec(shape, getattr(types, dtype))],
                opset_version=getattr(milkit.target, opset))
    def prog(x):
        return build(mb, x)

    return prog


def op_outputs(prog, op_type):
    return [o.outputs[0] for o in prog.functions["main"].operations if o.op_type == op_type]


# ---- shared behaviour -----------------------------------------------------------------------

@pytest.mark.parametrize("op", NO_PARAM + ALPHA + ALPHA_BETA)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_activation_vars(op, shape, dtype):
    kw = params(op, NP[dtype])
    check(lambda mb, x: getattr(mb, op)(x=x, **kw), [(shape, dtype)], ALL_OPSETS)


@pytest.mark.parametrize("op", NO_PARAM + ALPHA + ALPHA_BETA)
@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_activation_const_fold(op, dtype):
    a = VALUES.astype(NP[dtype])
    kw = params(op, NP[dtype])
    check(lambda mb, x: getattr(mb, op)(x=a, **kw), [((1,), "fp32")], ALL_OPSETS)


@pytest.mark.parametrize("op", ["relu", "relu6", "sigmoid", "softplus", "softsign", "elu", "leaky_relu"]
                         + ALPHA_BETA)
def test_activation_scalar_fold(op):
    kw = params(op, np.float32)
    check(lambda mb, x: getattr(mb, op)(x=np.float32(-0.75), **kw), [((1,), "fp32")], ["iOS17"])


@pytest.mark.parametrize("op", ALPHA + ALPHA_BETA)
def test_params_other_dtype_from_ios17(op):
    # iOS15/16: alpha/beta share T with x (error); iOS17+: they have their own domain U
    kw = params(op, np.float32)
    check(lambda mb, x: getattr(mb, op)(x=x, **kw), [((2, "S"), "fp16")], ALL_OPSETS)
    a = VALUES.astype(np.float16)
    check(lambda mb, x: getattr(mb, op)(x=a, **kw), [((1,), "fp32")], ["iOS17", "iOS18"])
    check_error(lambda mb, x: getattr(mb, op)(x=x, **kw), [((2,), "fp16")], opset="iOS16",
                match=rf"{op} '{op}_0'.*'alpha'.*alpha has dtype fp32 whereas x has dtype fp16")


@pytest.mark.parametrize("op", ALPHA_BETA)
def test_alpha_beta_share_u(op):
    # in iOS17 alpha and beta share the domain U
    check_error(lambda mb, x: getattr(mb, op)(x=x, alpha=np.float16(1), beta=np.float32(1)),
                [((2,), "fp32")], opset="iOS17", match=rf"{op} '{op}_0'.*'beta'.*fp32.*'alpha'.*fp16")


@pytest.mark.parametrize("op", NO_PARAM + ALPHA + ALPHA_BETA + ["gelu", "softmax", "prelu",
                                                                 "softplus_parametric"])
@pytest.mark.parametrize("dtype", ["int32", "bool"])
def test_rejects_non_float_x(op, dtype):
    kw = params(op, np.float32)
    if op in ("prelu",):
        kw = {"alpha": np.array([1.0, 1.0], np.float32)}
    if op == "softplus_parametric":
        kw = {"alpha": np.array([1.0, 1.0], np.float32), "beta": np.array([1.0, 1.0], np.float32)}
    check_error(lambda mb, x: getattr(mb, op)(x=x, **kw), [((1, 2, 3), dtype)], opset="iOS17",
                match=rf"{op} '{op}_0'.*'x'.*{dtype}")


@pytest.mark.parametrize("op", ALPHA + ALPHA_BETA)
def test_params_must_be_const(op):
    def build(mb, x, x1):
        kw = dict(params(op, np.float32), alpha=x1)
        return getattr(mb, op)(x=x, **kw)

    check_error(build, [((2,), "fp32"), ((1,), "fp32")], match=rf"{op} '{op}_0'.*'alpha'.*const")


@pytest.mark.parametrize("op", ALPHA + ALPHA_BETA)
def test_params_required(op):
    check_error(lambda mb, x: getattr(mb, op)(x=x), [((2,), "fp32")],
                match=rf"{op} '{op}_0'.*missing required input 'alpha'")
    if op in ALPHA_BETA:
        check_error(lambda mb, x: getattr(mb, op)(x=x, alpha=1.0), [((2,), "fp32")],
                    match=rf"{op} '{op}_0'.*missing required input 'beta'")


@pytest.mark.parametrize("op", ALPHA_BETA)
def test_alpha_beta_broadcast_fold(op):
    # numpy broadcasting of tensor alpha/beta, as coremltools' value inference does
    a = VALUES.astype(np.float32)
    alpha = np.array([0.5, -1.0, 2.0, 1.0], np.float32)
    beta = np.array([[1.0], [3.0]], np.float32)
    check(lambda mb, x: getattr(mb, op)(x=a, alpha=alpha, beta=beta), [((1,), "fp32")], ALL_OPSETS)


def test_silu_is_not_folded():
    # coremltools' silu has no value_inference: the output of a const input stays unknown
    a = VALUES.astype(np.float32)
    res = check(lambda mb, x: mb.silu(x=a), [((1,), "fp32")], ALL_OPSETS)
    for r in res:
        (out,) = op_outputs(r.mk_prog, "silu")
        assert out.val is None


def test_relu_nan_propagates():
    a = np.array([np.nan, -1.0, np.inf, -np.inf], np.float32)
    for op in ["relu", "relu6", "sigmoid", "softsign"]:
        check(lambda mb, x: getattr(mb, op)(x=a), [((1,), "fp32")], ["iOS17"])


# ---- thresholded_relu: where coremltools' value inference is wrong ----------------------------

def test_thresholded_relu_fold_does_not_modify_x():
    # coremltools' value_inference does `y = self.x.val; y[y < alpha] = 0`, writing into the
    # const x (and into the user's numpy array). The op is "return x if x >= alpha else 0":
    # milkit leaves x alone.
    a = np.array([-1.0, 0.5, 2.0], np.float32)
    prog = milkit_program(lambda mb, x: mb.thresholded_relu(x=a, alpha=1.0))
    consts = op_outputs(prog, "const")
    np.testing.assert_array_equal(a, [-1.0, 0.5, 2.0])
    np.testing.assert_array_equal(consts[0].val, [-1.0, 0.5, 2.0])
    np.testing.assert_array_equal(op_outputs(prog, "thresholded_relu")[0].val, [0.0, 0.0, 2.0])


def test_thresholded_relu_scalar_fold():
    # coremltools raises TypeError ('numpy.float32' object does not support item assignment)
    # when x is a scalar const; the definition is well defined for scalars, so milkit folds.
    for opset in ["iOS15", "iOS17"]:
        prog = milkit_program(lambda mb, x: mb.thresholded_relu(x=np.float32(0.5), alpha=1.0),
                              opset=opset)
        assert float(op_outputs(prog, "thresholded_relu")[0].val) == 0.0
        prog = milkit_program(lambda mb, x: mb.thresholded_relu(x=np.float32(1.5), alpha=1.0),
                              opset=opset)
        assert float(op_outputs(prog, "thresholded_relu")[0].val) == 1.5


def test_thresholded_relu_tensor_alpha_fold():
    a = np.array([[-1.0, 0.5, 2.0], [3.0, 1.0, 0.0]], np.float32)
    alpha = np.array([0.0, 1.0, 2.5], np.float32)
    check(lambda mb, x: mb.thresholded_relu(x=a, alpha=alpha), [((1,), "fp32")], ALL_OPSETS)


# ---- gelu -----------------------------------------------------------------------------------

MODES = ["EXACT", "TANH_APPROXIMATION", "SIGMOID_APPROXIMATION"]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_gelu_default_mode(shape, dtype):
    # the default mode is a const "EXACT" named gelu_0_mode_0
    check(lambda mb, x: mb.gelu(x=x), [(shape, dtype)], ALL_OPSETS)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_gelu_modes(mode, dtype):
    check(lambda mb, x: mb.gelu(x=x, mode=mode), [((2, "S"), dtype)], ALL_OPSETS)
    a = VALUES.astype(NP[dtype])
    check(lambda mb, x: mb.gelu(x=a, mode=mode), [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.gelu(x=NP[dtype](-0.5), mode=mode), [((1,), "fp32")], ["iOS17"])


def test_gelu_errors():
    e = check_error(lambda mb, x: mb.gelu(x=x, mode="TANH"), [((2,), "fp32")],
                    match=r"gelu 'gelu_0'.*'mode'.*unrecognized value of mode: \"TANH\"")
    assert isinstance(e, ValueError)
    check_error(lambda mb, x: mb.gelu(x=x, mode=1), [((2,), "fp32")], match=r"gelu 'gelu_0'.*'mode'.*int32")


# ---- softmax --------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES + [(2, "S", 3, "T")])
@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
@pytest.mark.parametrize("axis", [None, 0, 1, -2])
def test_softmax_vars(shape, dtype, axis):
    kw = {} if axis is None else {"axis": axis}
    check(lambda mb, x: mb.softmax(x=x, **kw), [(shape, dtype)], ALL_OPSETS)


@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, 2])
def test_softmax_fold(dtype, axis):
    a = np.arange(24, dtype=np.float64).reshape(2, 3, 4) * 0.37 - 3
    a = a.astype(NP[dtype])
    kw = {} if axis is None else {"axis": axis}
    check(lambda mb, x: mb.softmax(x=a, **kw), [((1,), "fp32")], ALL_OPSETS)


def test_softmax_axis():
    # like coremltools, an out-of-range axis is not checked on a non-const x ...
    check(lambda mb, x: mb.softmax(x=x, axis=5), [((2, 3), "fp32")], ALL_OPSETS)
    # ... but folding a const x needs a valid axis
    a = np.ones((2, 3), np.float32)
    check_error(lambda mb, x: mb.softmax(x=a, axis=2), [((1,), "fp32")],
                match=r"softmax 'softmax_0'.*axis")
    check_error(lambda mb, x, x1: mb.softmax(x=x, axis=x1), [((2, 3), "fp32"), ((1,), "int32")],
                match=r"softmax 'softmax_0'.*'axis'.*const")
    check_error(lambda mb, x: mb.softmax(x=x, axis=np.float32(1)), [((2, 3), "fp32")],
                match=r"softmax 'softmax_0'.*'axis'.*fp32")


# ---- prelu ----------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 3, 4), (1, 3, "S", "T"), ("B", 3, 2, 2, 2)])
@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_prelu_vars(shape, dtype):
    same = np.full(3, 0.25, NP[dtype])
    check(lambda mb, x: mb.prelu(x=x, alpha=same), [(shape, dtype)], ALL_OPSETS)
    if len(shape) == 4:
        per_channel = np.array([0.1, 0.2, 0.3], NP[dtype])
        check(lambda mb, x: mb.prelu(x=x, alpha=per_channel), [(shape, dtype)], ALL_OPSETS)


@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_prelu_fold(dtype):
    a = (np.arange(24).reshape(1, 3, 2, 4) - 12).astype(NP[dtype])
    alpha = np.array([0.1, 0.2, 0.3], NP[dtype])
    check(lambda mb, x: mb.prelu(x=a, alpha=alpha), [((1,), "fp32")], ALL_OPSETS)
    a3 = (np.arange(12).reshape(2, 3, 2) - 6).astype(NP[dtype])
    check(lambda mb, x: mb.prelu(x=a3, alpha=np.full(3, 0.5, NP[dtype])), [((1,), "fp32")], ALL_OPSETS)


def test_prelu_mixed_dtype_from_ios17():
    check(lambda mb, x: mb.prelu(x=x, alpha=np.array([0.1, 0.2], np.float32)), [((1, 2, 3, 3), "fp16")],
          ALL_OPSETS)


def test_prelu_errors():
    al = np.array([0.1, 0.2, 0.3], np.float32)
    check_error(lambda mb, x: mb.prelu(x=x, alpha=al), [((2, 3), "fp32")],
                match=r"prelu 'prelu_0'.*x must be rank 3 or 4 or 5, instead it is of rank 2")
    check_error(lambda mb, x: mb.prelu(x=x, alpha=al), [((1, 3, 2, 2, 2, 2), "fp32")],
                match=r"prelu 'prelu_0'.*rank 6")
    check_error(lambda mb, x: mb.prelu(x=x, alpha=al.reshape(1, 3)), [((1, 3, 2, 2), "fp32")],
                match=r"prelu 'prelu_0'.*alpha should be rank 1")
    check_error(lambda mb, x: mb.prelu(x=x, alpha=al), [((1, 4, 2, 2), "fp32")],
                match=r"prelu 'prelu_0'.*alpha \(3\).*dimension 1 of x \(4\)")
    # a symbolic channel dim never equals alpha's length (coremltools compares with !=)
    check_error(lambda mb, x: mb.prelu(x=x, alpha=al), [((1, "C", 2, 2), "fp32")],
                match=r"prelu 'prelu_0'.*dimension 1 of x \(is\d+\)")
    check_error(lambda mb, x: mb.prelu(x=x, alpha=al), [((1, 3, 2), "fp32")],
                match=r"prelu 'prelu_0'.*rank 3 or rank 5 input is only supported when all the values of alpha are same")
    check_error(lambda mb, x: mb.prelu(x=x, alpha=al), [((1, 3, 2, 2, 2), "fp32")],
                match=r"prelu 'prelu_0'.*all the values of alpha are same")
    check_error(lambda mb, x, x1: mb.prelu(x=x, alpha=x1), [((1, 3, 2, 2), "fp32"), ((3,), "fp32")],
                match=r"prelu 'prelu_0'.*'alpha'.*const")


# ---- softplus_parametric --------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 3, 4), (1, 3, "S", "T"), ("B", 3, 2, 2, 2)])
@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_softplus_parametric_vars(shape, dtype):
    alpha = np.array([0.5, 1.0, 2.0], NP[dtype])
    beta = np.array([1.0, -1.0, 0.5], NP[dtype])
    check(lambda mb, x: mb.softplus_parametric(x=x, alpha=alpha, beta=beta), [(shape, dtype)], ALL_OPSETS)


@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_softplus_parametric_fold(dtype):
    a = ((np.arange(24).reshape(2, 3, 4) - 12) * 0.25).astype(NP[dtype])
    alpha = np.array([0.5, 1.0, 2.0], NP[dtype])
    beta = np.array([1.0, -1.0, 0.5], NP[dtype])
    check(lambda mb, x: mb.softplus_parametric(x=a, alpha=alpha, beta=beta), [((1,), "fp32")], ALL_OPSETS)


def test_softplus_parametric_mixed_dtype_from_ios17():
    alpha = np.array([0.5, 1.0], np.float32)
    check(lambda mb, x: mb.softplus_parametric(x=x, alpha=alpha, beta=alpha), [((1, 2, 3), "fp16")],
          ALL_OPSETS)


def test_softplus_parametric_errors():
    al = np.array([0.5, 1.0, 2.0], np.float32)
    sp = lambda x, a, b: (lambda mb, v: mb.softplus_parametric(x=v, alpha=a, beta=b))  # noqa: E731
    check_error(sp(None, al, al), [((2, 3), "fp32")], match=r"softplus_parametric 'softplus_parametric_0'.*x should be at least rank 3")
    check_error(sp(None, al.reshape(3, 1), al), [((2, 3, 4), "fp32")], match=r"'alpha'.*alpha should be rank 1")
    check_error(sp(None, al[:2], al), [((2, 3, 4), "fp32")], match=r"'alpha'.*Size of dimension 0 of alpha")
    check_error(sp(None, al, al.reshape(1, 3)), [((2, 3, 4), "fp32")], match=r"'beta'.*beta should be rank 1")
    check_error(sp(None, al, al[:2]), [((2, 3, 4), "fp32")], match=r"'beta'.*Size of dimension 0 of beta")
    check_error(sp(None, al, al), [((2, "C", 4), "fp32")], match=r"'alpha'.*Size of dimension 0 of alpha")
    check_error(lambda mb, x: mb.softplus_parametric(x=x, alpha=al), [((2, 3, 4), "fp32")],
                match=r"softplus_parametric 'softplus_parametric_0'.*missing required input 'beta'")


def test_gelu_exact_of_empty_const_folds_to_empty():
    # coremltools computes gelu EXACT with np.vectorize, which raises for size-0 inputs; the op is
    # element-wise, so milkit folds an empty x to an empty value (TANH mode agrees with coremltools).
    prog = milkit_program(lambda mb, x: mb.gelu(x=np.zeros((0, 3), np.float32)))
    (out,) = op_outputs(prog, "gelu")
    assert np.asarray(out.val).shape == (0, 3)
    check(lambda mb, x: mb.gelu(x=np.zeros((0, 3), np.float32), mode="TANH_APPROXIMATION"),
          [((1,), "fp32")], ["iOS17"])
