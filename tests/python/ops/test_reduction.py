"""Parity of the 12 reduction ops with coremltools, at every opset."""

import milkit
import numpy as np
import pytest
from milkit import Builder as mb_mk
from milkit import types as mk_types
from support.parity import ALL_OPSETS, check, check_error

REDUCE = ["reduce_l1_norm", "reduce_l2_norm", "reduce_log_sum", "reduce_log_sum_exp", "reduce_max",
          "reduce_mean", "reduce_min", "reduce_prod", "reduce_sum", "reduce_sum_square"]
ARG = ["reduce_argmax", "reduce_argmin"]


def mk_build(build, specs, opset="iOS17"):
    """Builds with milkit only (cases where coremltools is wrong); returns the last op's output."""
    in_specs = [mb_mk.TensorSpec(shape=tuple(milkit.get_new_symbol(d) if isinstance(d, str) else d for d in s),
                                 dtype=getattr(mk_types, t)) for s, t in specs]
    names = [f"x{i}" if i else "x" for i in range(len(specs))]
    ns = {"build": build, "mb": mb_mk}
    exec(f"def main({', '.join(names)}):\n    return build(mb, {', '.join(names)})\n", ns)
    prog = mb_mk.program(input_specs=in_specs, opset_version=getattr(milkit.target, opset))(ns["main"])
    return list(prog.functions["main"].operations)[-1].outputs[0]


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("axes", [None, [1], [-1], [0, 2], [-1, 0], [2, 0, 1], []])
@pytest.mark.parametrize("keep_dims", [None, False, True])
def test_reduce_symbolic(op, axes, keep_dims):
    kw = {}
    if axes is not None:
        kw["axes"] = np.array(axes, np.int32)
    if keep_dims is not None:
        kw["keep_dims"] = keep_dims
    check(lambda mb, x: getattr(mb, op)(x=x, **kw), [((2, "S", 4), "fp32")], ALL_OPSETS)


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("dtype", ["fp16", "int32"])
def test_reduce_dtypes(op, dtype):
    check(lambda mb, x: getattr(mb, op)(x=x, axes=[0], keep_dims=True), [((3, "S"), dtype)], ALL_OPSETS)
    check(lambda mb, x: getattr(mb, op)(x=x), [((3, 5), dtype)], ["iOS17"])


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("axes", [None, [0], [-1], [1, 0]])
@pytest.mark.parametrize("keep_dims", [False, True])
def test_reduce_fold_fp32(op, axes, keep_dims):
    rng = np.random.default_rng(1)
    v = rng.uniform(0.5, 2.0, (2, 3, 4)).astype(np.float32)
    v[0, 1, 2] = -1.25  # a negative (log_sum stays defined: every slice sums > 0)
    kw = {} if axes is None else {"axes": axes}
    check(lambda mb, _: getattr(mb, op)(x=v, keep_dims=keep_dims, **kw), [((1,), "fp32")], ["iOS15", "iOS17"])


@pytest.mark.parametrize("op", REDUCE)
def test_reduce_fold_int32(op):
    # coremltools casts the numpy result back to int32: means and logs truncate, and the integer
    # reductions are exact
    v = np.array([[3, 4, 1], [7, -2, 5]], np.int32)
    check(lambda mb, _: getattr(mb, op)(x=v, axes=[1]), [((1,), "fp32")], ["iOS17"])
    check(lambda mb, _: getattr(mb, op)(x=v, axes=[0], keep_dims=True), [((1,), "fp32")], ["iOS17"])
    if op != "reduce_log_sum":
        check(lambda mb, _: getattr(mb, op)(x=v), [((1,), "fp32")], ["iOS17"])


@pytest.mark.parametrize("op", REDUCE)
def test_reduce_fold_fp16(op):
    v = np.array([[1.0, 2.0, 0.5], [4.0, 0.25, 3.0]], np.float16)
    check(lambda mb, _: getattr(mb, op)(x=v, axes=[-1]), [((1,), "fp32")], ["iOS17"], rtol=2e-3)


def test_reduce_fold_scalar():
    check(lambda mb, _: mb.reduce_sum(x=np.float32(3.0)), [((1,), "fp32")], ["iOS17"])


@pytest.mark.parametrize("op", REDUCE)
def test_reduce_fold_empty_axes(op):
    v = np.arange(6, dtype=np.float32).reshape(2, 3)
    check(lambda mb, _: getattr(mb, op)(x=v + 1, axes=np.zeros(0, np.int32)), [((1,), "fp32")], ["iOS17"])


def test_reduce_chain_and_names():
    check(lambda mb, x: mb.reduce_max(x=mb.reduce_mean(x=x, axes=[2, 3], keep_dims=True), axes=[1], name="m"),
          [(("B", 3, 8, 8), "fp32")], ALL_OPSETS)


@pytest.mark.parametrize("op", REDUCE)
def test_reduce_errors(op):
    # axes past the end (coremltools raises IndexError)
    check_error(lambda mb, x: getattr(mb, op)(x=x, axes=[3]), [((2, "S", 4), "fp32")],
                match=rf"{op} '{op}_0'.*'axes' = 3 is out of range for x of rank 3")
    check_error(lambda mb, x: getattr(mb, op)(x=x, axes=[3], keep_dims=True), [((2, "S", 4), "fp32")],
                match=r"out of range")
    # axes must be const, rank 1, int32
    check_error(lambda mb, x, a: getattr(mb, op)(x=x, axes=a), [((2, 4), "fp32"), ((1,), "int32")],
                match=r"'axes'.*constant")
    check_error(lambda mb, x: getattr(mb, op)(x=x, axes=1), [((2, 4), "fp32")], match=r"'axes' must be a rank-1")
    check_error(lambda mb, x: getattr(mb, op)(x=x), [((2, 4), "bool")], match=rf"{op} '{op}_0'.*'x'.*bool")
    check_error(lambda mb, _: getattr(mb, op)(x=np.float32(1.0), axes=[0]), [((1,), "fp32")],
                match=r"out of range for x of rank 0")


# coremltools 9.0 wraps an axis in [-2*rank, -rank) (it normalizes once, then lets Python's list
# indexing wrap again: axes=[-4] on rank 3 reduces the last axis) and pops the same position
# twice for a duplicate axis (axes=[1, 1] on (2, S, 4) gives (2,)). Both are invalid per the op
# definition and numpy, so milkit reports them; these assert milkit alone.
@pytest.mark.parametrize("op", REDUCE)
def test_reduce_invalid_axes_coremltools_accepts(op):
    with pytest.raises(ValueError, match=r"'axes' = -4 is out of range for x of rank 3"):
        mk_build(lambda mb, x: getattr(mb, op)(x=x, axes=[-4]), [((2, "S", 4), "fp32")])
    with pytest.raises(ValueError, match=r"'axes' lists axis 1 more than once"):
        mk_build(lambda mb, x: getattr(mb, op)(x=x, axes=[1, -2]), [((2, "S", 4), "fp32")])


# ------------------------------------------------------------------------------- argmax / argmin


@pytest.mark.parametrize("op", ARG)
@pytest.mark.parametrize("axis", [None, 0, 1, -1, -3])
@pytest.mark.parametrize("keep_dims", [None, False, True])
def test_arg_symbolic(op, axis, keep_dims):
    kw = {}
    if axis is not None:
        kw["axis"] = axis
    if keep_dims is not None:
        kw["keep_dims"] = keep_dims
    check(lambda mb, x: getattr(mb, op)(x=x, **kw), [((2, "S", 4), "fp32")], ALL_OPSETS)


@pytest.mark.parametrize("op", ARG)
@pytest.mark.parametrize("dtype", ["fp16", "int32"])
def test_arg_dtypes(op, dtype):
    check(lambda mb, x: getattr(mb, op)(x=x, axis=0), [((3, "S"), dtype)], ALL_OPSETS)


@pytest.mark.parametrize("op", ARG)
@pytest.mark.parametrize("output_dtype", ["int32", "uint16", "UINT16"])
def test_arg_output_dtype(op, output_dtype):
    check(lambda mb, x: getattr(mb, op)(x=x, output_dtype=output_dtype), [((3, "S"), "fp32")], ["iOS17", "iOS18"])
    v = np.array([[1.0, 5.0, 5.0], [4.0, 4.0, -1.0]], np.float32)
    check(lambda mb, _: getattr(mb, op)(x=v, axis=0, output_dtype=output_dtype), [((1,), "fp32")], ["iOS17"])


@pytest.mark.parametrize("op", ARG)
def test_arg_fold(op):
    v = np.array([[[1.0, 5.0, 5.0], [4.0, 4.0, -1.0]], [[0.0, 7.0, 2.0], [9.0, -3.0, 9.0]]], np.float32)
    for axis in [0, 1, 2, -1]:
        for keep in [False, True]:
            check(lambda mb, _: getattr(mb, op)(x=v, axis=axis, keep_dims=keep), [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, _: getattr(mb, op)(x=np.array([3, 1, 3, 1], np.int32)), [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, _: getattr(mb, op)(x=np.array([1.0, np.nan, 3.0], np.float32)), [((1,), "fp32")], ["iOS17"])


@pytest.mark.parametrize("op", ARG)
def test_arg_errors(op):
    check_error(lambda mb, x: getattr(mb, op)(x=x, output_dtype="int16"), [((3, 4), "fp32")],
                match=rf"{op} '{op}_0'.*'output_dtype'.*int16")
    check_error(lambda mb, x: getattr(mb, op)(x=x, output_dtype="int32"), [((3, 4), "fp32")], "iOS16",
                match=r"Unknown input 'output_dtype'")
    check_error(lambda mb, x: getattr(mb, op)(x=x, axis=2), [((3, 4), "fp32")],
                match=r"'axis' = 2 is out of range for x of rank 2")
    check_error(lambda mb, _: getattr(mb, op)(x=np.float32(1.0)), [((1,), "fp32")], match=r"rank >= 1")
    check_error(lambda mb, x: getattr(mb, op)(x=x), [((3, 4), "bool")], match=r"'x'.*bool")
    # coremltools wraps axis=-3 on rank 2 to the last axis; milkit reports it (see above)
    with pytest.raises(ValueError, match=r"'axis' = -3 is out of range"):
        mk_build(lambda mb, x: getattr(mb, op)(x=x, axis=-3), [((3, 4), "fp32")])
