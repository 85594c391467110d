"""Parity of linear and matmul with coremltools, at every opset."""

import milkit
import numpy as np
import pytest
from milkit import Builder as mb_mk
from milkit import types as mk_types
from support.parity import ALL_OPSETS, check, check_error

RNG = np.random.default_rng(0)
W = RNG.standard_normal((5, 4)).astype(np.float32)
B = RNG.standard_normal(5).astype(np.float32)


def mk_build(build, specs, opset="iOS17"):
    """Builds with milkit only (cases where coremltools is wrong); returns the main function."""
    in_specs = [mb_mk.TensorSpec(shape=tuple(milkit.get_new_symbol(d) if isinstance(d, str) else d for d in s),
                                 dtype=getattr(mk_types, t)) for s, t in specs]
    names = [f"x{i}" if i else "x" for i in range(len(specs))]
    ns = {"build": build, "mb": mb_mk}
    exec(f"def main({', '.join(names)}):\n    return build(mb, {', '.join(names)})\n", ns)
    prog = mb_mk.program(input_specs=in_specs, opset_version=getattr(milkit.target, opset))(ns["main"])
    return prog.functions["main"]


def out_of(fn):
    return list(fn.operations)[-1].outputs[0]


# ---------------------------------------------------------------------------------------- linear


@pytest.mark.parametrize("shape", [(4,), (3, 4), (2, 3, 4), ("S", 4), (1, "S", 4), (2, 3, 6, 4)])
def test_linear_shapes(shape):
    check(lambda mb, x: mb.linear(x=x, weight=W), [(shape, "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.linear(x=x, weight=W, bias=B), [(shape, "fp32")], ALL_OPSETS)


def test_linear_symbolic_inner_dim():
    # an unknown D_in is not an error: it may be 4
    check(lambda mb, x: mb.linear(x=x, weight=W), [((2, "S"), "fp32")], ALL_OPSETS)


@pytest.mark.parametrize("dtype", ["fp16", "fp32", "int32"])
def test_linear_dtypes(dtype):
    np_t = {"fp16": np.float16, "fp32": np.float32, "int32": np.int32}[dtype]
    check(lambda mb, x: mb.linear(x=x, weight=W.astype(np_t)), [((2, 4), dtype)], ALL_OPSETS)


def test_linear_ios17_mixed_precision():
    # iOS17: weight and bias are in domain U, so fp16 weights with an fp32 x are allowed; the
    # default bias takes the weight's dtype
    check(lambda mb, x: mb.linear(x=x, weight=W.astype(np.float16)), [((2, 4), "fp32")], ["iOS17", "iOS18"])
    check(lambda mb, x: mb.linear(x=x, weight=W, bias=B), [((2, 4), "fp16")], ["iOS17", "iOS18"])
    # before iOS17 they share T with x
    check_error(lambda mb, x: mb.linear(x=x, weight=W.astype(np.float16)), [((2, 4), "fp32")], "iOS16",
                match=r"linear 'linear_0'.*'weight'.*fp16")
    # weight and bias still share U
    check_error(lambda mb, x: mb.linear(x=x, weight=W.astype(np.float16), bias=B), [((2, 4), "fp32")],
                match=r"linear 'linear_0'.*'bias'.*bias has dtype fp32 whereas weight has dtype fp16")


def test_linear_fold():
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    check(lambda mb, _: mb.linear(x=x, weight=W, bias=B), [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, _: mb.linear(x=x[0, 0], weight=W), [((1,), "fp32")], ALL_OPSETS)
    xi = np.arange(8, dtype=np.int32).reshape(2, 4)
    wi = np.arange(-10, 10, dtype=np.int32).reshape(5, 4)
    check(lambda mb, _: mb.linear(x=xi, weight=wi, bias=np.arange(5, dtype=np.int32)), [((1,), "fp32")],
          ALL_OPSETS)
    # iOS17 mixed: fp16 x with fp32 weights folds to fp16
    xh = np.array([[1, 2, 3, 4]], np.float16)
    wh = np.arange(20, dtype=np.float32).reshape(5, 4)
    check(lambda mb, _: mb.linear(x=xh, weight=wh), [((1,), "fp32")], ["iOS17"])


def test_linear_names():
    check(lambda mb, x: mb.linear(x=mb.linear(x=x, weight=W, name="fc1"), weight=W.T.copy(), name="fc2"),
          [((2, 4), "fp32")], ALL_OPSETS)


def test_linear_inner_mismatch():
    e = check_error(lambda mb, x: mb.linear(x=x, weight=W), [((2, 3), "fp32")],
                    match=r"linear 'linear_0'.*\(2, 3\).*is 3.*\(5, 4\).*is 4")
    assert isinstance(e, ValueError)


def test_linear_bias_mismatch():
    check_error(lambda mb, x: mb.linear(x=x, weight=W, bias=np.zeros(3, np.float32)), [((2, 4), "fp32")],
                match=r"linear 'linear_0'.*'bias' has size 3.*D_out = 5")


@pytest.mark.parametrize("w", [np.ones(4, np.float32), np.ones((1, 5, 4), np.float32)])
def test_linear_weight_rank(w):
    check_error(lambda mb, x: mb.linear(x=x, weight=w), [((2, 4), "fp32")], match=r"'weight' must have rank 2")


def test_linear_bias_rank():
    check_error(lambda mb, x: mb.linear(x=x, weight=W, bias=np.zeros((1, 5), np.float32)), [((2, 4), "fp32")],
                match=r"'bias' must have rank 1")


def test_linear_weight_must_be_const():
    check_error(lambda mb, x, w: mb.linear(x=x, weight=w), [((2, 4), "fp32"), ((5, 4), "fp32")],
                match=r"linear 'linear_0'.*'weight'.*constant")


def test_linear_bad_dtype():
    check_error(lambda mb, x: mb.linear(x=x, weight=W.astype(bool)), [((2, 4), "bool")],
                match=r"linear 'linear_0'.*bool")


# ---------------------------------------------------------------------------------------- matmul


@pytest.mark.parametrize("shapes", [
    [((3, 4), "fp32"), ((4, 5), "fp32")],
    [((2, 3, 4), "fp32"), ((4, 5), "fp32")],
    [((3, 4), "fp32"), ((2, 4, 5), "fp32")],
    [((10, 1, 3, 4), "fp32"), ((7, 4, 5), "fp32")],
    [(("S", 3, 4), "fp32"), ((1, 4, 5), "fp32")],
    [(("S", 3, 4), "fp32"), (("S", 4, 5), "fp32")],
    [(("S", 3, 4), "fp32"), (("T", 4, 5), "fp32")],
    [((2, "S", 4), "fp32"), ((4, "T"), "fp32")],
    [((3, "K"), "fp32"), ((4, 5), "fp32")],
    [((3, "K"), "fp32"), (("K", 5), "fp32")],
    [((4,), "fp32"), ((4, 5), "fp32")],
    [(("K",), "fp32"), (("K", 5), "fp32")],
    [((3, 4), "int32"), ((4, 5), "int32")],
    [((3, 4), "fp16"), ((4, 5), "fp16")],
])
def test_matmul_vars(shapes):
    check(lambda mb, x, y: mb.matmul(x=x, y=y), shapes, ALL_OPSETS)


@pytest.mark.parametrize("tx,ty,xs,ys", [
    (True, False, (4, 3), (4, 5)),
    (False, True, (3, 4), (5, 4)),
    (True, True, (2, 4, 3), (5, 4)),
    (True, True, ("B", 4, "S"), ("B", 5, 4)),
    (False, False, (3, 4), (4, 5)),
])
def test_matmul_transpose(tx, ty, xs, ys):
    check(lambda mb, x, y: mb.matmul(x=x, y=y, transpose_x=tx, transpose_y=ty), [(xs, "fp32"), (ys, "fp32")],
          ALL_OPSETS)


def test_matmul_fold():
    a = RNG.standard_normal((2, 1, 3, 4)).astype(np.float32)
    b = RNG.standard_normal((5, 4, 2)).astype(np.float32)
    check(lambda mb, _: mb.matmul(x=a, y=b), [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, _: mb.matmul(x=a, y=b.swapaxes(-1, -2).copy(), transpose_y=True), [((1,), "fp32")], ["iOS17"])
    check(lambda mb, _: mb.matmul(x=a.swapaxes(-1, -2).copy(), y=b, transpose_x=True), [((1,), "fp32")], ["iOS17"])
    ai = np.arange(6, dtype=np.int32).reshape(2, 3)
    check(lambda mb, _: mb.matmul(x=ai, y=ai, transpose_y=True), [((1,), "fp32")], ALL_OPSETS)
    # rank-1 x against a matrix
    check(lambda mb, _: mb.matmul(x=np.array([1.0, 2.0, 3.0], np.float32), y=ai.astype(np.float32).T.copy()),
          [((1,), "fp32")], ["iOS17"])


def test_matmul_ios17_one_const_mixed():
    # iOS17: when exactly one operand is a const op their dtypes may differ; the output takes the
    # dtype of the non-const one
    wh = W.T.astype(np.float16).copy()
    check(lambda mb, x: mb.matmul(x=x, y=wh), [((2, 4), "fp32")], ["iOS17", "iOS18"])
    check(lambda mb, x: mb.matmul(x=W.astype(np.float16), y=x), [((4, 3), "fp32")], ["iOS17", "iOS18"])
    check_error(lambda mb, x: mb.matmul(x=x, y=wh), [((2, 4), "fp32")], "iOS16",
                match=r"matmul 'matmul_0'.*'y'.*fp16")


def test_matmul_ios17_both_const_or_both_var_must_match():
    check_error(lambda mb, x, y: mb.matmul(x=x, y=y), [((2, 4), "fp32"), ((4, 3), "fp16")],
                match=r"matmul 'matmul_0'.*both non-const.*fp32.*fp16")
    check_error(lambda mb, _: mb.matmul(x=np.ones((2, 3), np.float32), y=np.ones((3, 2), np.float16)),
                [((1,), "fp32")], match=r"matmul 'matmul_0'.*both const")


def test_matmul_inner_mismatch_names_shapes_and_dims():
    e = check_error(lambda mb, x, y: mb.matmul(x=x, y=y), [((3, 4), "fp32"), ((5, 6), "fp32")],
                    match=r"matmul 'matmul_0'.*\(3, 4\).*\(5, 6\).*inner dims differ \(x: 4, y: 5\)")
    assert isinstance(e, ValueError)
    check_error(lambda mb, x, y: mb.matmul(x=x, y=y, transpose_x=True), [((3, 4), "fp32"), ((4, 6), "fp32")],
                match=r"transposed.*x: 3, y: 4")


def test_matmul_batch_broadcast_error():
    check_error(lambda mb, x, y: mb.matmul(x=x, y=y), [((2, 3, 4), "fp32"), ((3, 4, 5), "fp32")],
                match=r"matmul 'matmul_0'.*batch.*2 vs 3")


def test_matmul_rank1_transpose_x_error():
    check_error(lambda mb, x, y: mb.matmul(x=x, y=y, transpose_x=True), [((4,), "fp32"), ((4, 6), "fp32")],
                match=r"x is rank 1, but transpose_x is True")


def test_matmul_transpose_must_be_const():
    check_error(lambda mb, x, y, t: mb.matmul(x=x, y=y, transpose_x=t),
                [((3, 4), "fp32"), ((4, 6), "fp32"), ((1,), "bool")], match=r"'transpose_x'.*constant")


# coremltools 9.0 cannot type a rank-1 y (IndexError on y_shape[-2]) and, for a rank-1 x with a
# batched y, drops the batch dim instead of the inserted one ((4,) @ (2, 4, 3) -> (1, 3)). The op
# definition (numpy matmul: "append a 1 to y, then remove the inserted dimension") is what
# milkit implements; these assert milkit alone.
def test_matmul_rank1_y_follows_numpy():
    assert out_of(mk_build(lambda mb, x, y: mb.matmul(x=x, y=y), [((2, 3, 4), "fp32"), ((4,), "fp32")])).shape == (2, 3)
    assert out_of(mk_build(lambda mb, x, y: mb.matmul(x=x, y=y), [((4,), "fp32"), ((4,), "fp32")])).shape == ()
    o = out_of(mk_build(lambda mb, x, y: mb.matmul(x=x, y=y), [((4,), "fp32"), ((2, 4, 3), "fp32")]))
    assert o.shape == (2, 3)
    with pytest.raises(ValueError, match=r"y is rank 1, but transpose_y is True"):
        mk_build(lambda mb, x, y: mb.matmul(x=x, y=y, transpose_y=True), [((3, 4), "fp32"), ((4,), "fp32")])
    with pytest.raises(ValueError, match=r"inner dims differ \(x: 4, y: 5\)"):
        mk_build(lambda mb, x, y: mb.matmul(x=x, y=y), [((3, 4), "fp32"), ((5,), "fp32")])


def test_matmul_rank1_fold_follows_numpy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = np.array([1.0, -1.0, 2.0, 0.5], np.float32)
    o = out_of(mk_build(lambda mb, _: mb.matmul(x=a, y=v), [((1,), "fp32")]))
    np.testing.assert_allclose(o.val, a @ v)
    o = out_of(mk_build(lambda mb, _: mb.matmul(x=v, y=v), [((1,), "fp32")]))
    assert o.shape == () and np.isclose(o.val, v @ v)
    b = np.arange(24, dtype=np.int32).reshape(2, 4, 3)
    o = out_of(mk_build(lambda mb, _: mb.matmul(x=np.array([1, 2, 3, 4], np.int32), y=b), [((1,), "fp32")]))
    np.testing.assert_array_equal(o.val, np.array([1, 2, 3, 4], np.int32) @ b)


# ---------------------------------------------------------------------------------------- einsum


@pytest.mark.parametrize("eq,xs,ys", [
    ("nchw,nwhu->nchu", (2, 3, 4, 5), (2, 5, 4, 6)),
    ("abcd,adce->abce", (1, 3, 4, 5), (2, 5, 1, 6)),
    ("nchw,nwhu->nchu", ("B", 3, "H", 5), ("B", 5, "H", 6)),
    ("nchw,nwhu->nchu", (1, 3, 1, "K"), ("B", "K", "H", 6)),
    ("chw,whr->chr", (3, 4, 5), (5, 4, 6)),
    ("chw,whr->chr", (3, 1, 5), (5, "H", 6)),
])
@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_einsum(eq, xs, ys, dtype):
    check(lambda mb, x, y: mb.einsum(values=(x, y), equation=eq), [(xs, dtype), (ys, dtype)], ALL_OPSETS)


def test_einsum_fold():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3, 1, 5)).astype(np.float32)
    b = rng.standard_normal((1, 5, 4, 6)).astype(np.float32)
    check(lambda mb, _: mb.einsum(values=(a, b), equation="nchw,nwhu->nchu"), [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, _: mb.einsum(values=(a[0], b[0]), equation="chw,whr->chr"), [((1,), "fp32")], ["iOS17"])
    ai = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    check(lambda mb, _: mb.einsum(values=(ai, ai.transpose(2, 1, 0).copy()), equation="chw,whr->chr"),
          [((1,), "fp32")], ["iOS17"])


def test_einsum_errors():
    check_error(lambda mb, x, y: mb.einsum(values=(x, y), equation="nchw,nwhu->nchu"),
                [((2, 3, 4, 5), "fp32"), ((2, 6, 4, 6), "fp32")], match=r"einsum 'einsum_0'.*contracted dims differ")
    check_error(lambda mb, x, y: mb.einsum(values=(x, y), equation="nchw,nwhu->nchu"),
                [((2, 3, 4, 5), "fp32"), ((3, 5, 4, 6), "fp32")], match=r"dim -4 differs: 2 vs 3")
    check_error(lambda mb, x, y: mb.einsum(values=(x, y), equation="nchw,nuhw->nchu"),
                [((2, 3, 4, 5), "fp32"), ((2, 5, 4, 5), "fp32")], match=r"'equation'.*not supported")
    check_error(lambda mb, x, y: mb.einsum(values=(x, y), equation="chw,whr->chr"),
                [((3, 4, 5), "fp32"), ((2, 5, 4, 6), "fp32")], match=r"same rank")
    check_error(lambda mb, x, y: mb.einsum(values=(x, y), equation="chw,whr->chr"),
                [((3, 4, 5), "fp32"), ((5, 4, 6), "fp16")], match=r"einsum 'einsum_0'.*fp32.*fp16")
    check_error(lambda mb, x: mb.einsum(values=(x,), equation="chw,whr->chr"), [((3, 4, 5), "fp32")],
                match=r"'values' must hold 2 tensors")


def test_einsum_equation_rank_must_match_inputs():
    # coremltools accepts a rank-3 equation for rank-4 inputs (it checks the equation and the
    # ranks separately) and types the result as the rank-4 case; numpy's einsum rejects it, so
    # milkit does too (asserted on milkit alone)
    with pytest.raises(ValueError, match=r"einsum 'einsum_0'.*\"chw,whr->chr\" is not supported for rank 4"):
        mk_build(lambda mb, x, y: mb.einsum(values=(x, y), equation="chw,whr->chr"),
                 [((2, 3, 4, 5), "fp32"), ((2, 5, 4, 6), "fp32")])
