"""Feeds and results of converted torch programs as Core ML takes and gives them: rank-0 outputs
come back from ``predict`` with shape (1,) (Core ML's multiarrays have rank >= 1) and are described
as coremltools describes them; feeds of another dtype are cast as Core ML casts them; and
``convert(inputs=[TensorType(dtype=...)])`` retypes an input with a cast, as coremltools does."""

from __future__ import annotations

import warnings

import milkit
import numpy as np
import pytest
import torch
from support.torch_util import DIALECTS, Fn, check, convert, export, r, ri

SCALAR_OUTPUTS = {
    "sum": (lambda x: x.sum(), (r(3, 4),)),
    "amax": (lambda x: x.amax(), (r(3, 4),)),
    "einsum": (lambda x, y: torch.einsum("ij,ij->", x, y), (r(3, 4), r(3, 4))),
    "vector_norm": (lambda x: torch.linalg.vector_norm(x), (r(5),)),
    "tensor_const": (lambda x: x.mean() + torch.tensor(1.5), (r(2, 3),)),
    "argmax_flat": (lambda x: x.argmax(), (r(3, 4),)),
    "int_sum": (lambda i: i.sum(), (ri(7, 3, 2),)),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(SCALAR_OUTPUTS))
def test_scalar_output_shape_is_one(name: str, dialect: str) -> None:
    fn, args = SCALAR_OUTPUTS[name]
    mm = check(Fn(fn), args, dialect)  # check() expects (1,) for a rank-0 torch output
    (out,) = mm.predict({n: a.numpy() for n, a in zip(_input_names(Fn(fn), args, dialect), args)}).values()
    assert out.shape == (1,)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_scalar_output_fp16(dialect: str) -> None:
    check(Fn(lambda x: (x * x).sum()), (r(4, 4),), dialect, rtol=2e-2, precision="fp16")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_scalar_output_symbolic_sizes(dialect: str) -> None:
    n = torch.export.Dim("n", min=2, max=64)
    check(Fn(lambda x: x.sum()), (r(5, 3),), dialect, dynamic_shapes=(({0: n},),), more_args=[(r(9, 3),)])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_scalar_output_described_as_coremltools(dialect: str) -> None:
    """coremltools (torch.export frontend) keeps a rank-0 output rank 0 in the MIL program (no
    expand_dims / reshape) and describes it as a multiarray with no shape and no shape range; the
    tests compare with that description, measured from coremltools' conversion of ``x.sum()``."""
    mm = convert(export(Fn(lambda x: x.sum()), (r(2, 3),), dialect))
    (desc,) = mm.get_spec().description.output
    t = desc.type.multiArrayType
    assert list(t.shape) == [] and t.WhichOneof("ShapeFlexibility") is None
    assert t.dataType == t.FLOAT32
    fn = mm.get_program().functions["main"]
    (out,) = fn.outputs
    assert out.shape == ()
    assert not fn.find_ops(op_type="expand_dims") and not fn.find_ops(op_type="reshape")


def _input_names(module: torch.nn.Module, args: tuple, dialect: str) -> list:
    ep = export(module, args, dialect)
    return [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]


def _first_input(mm: milkit.models.MLModel) -> str:
    return list(mm.get_program().functions["main"].inputs)[0]


class Embed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.e = torch.nn.Embedding(10, 4)

    def forward(self, i: torch.Tensor) -> torch.Tensor:
        return self.e(i)


def _embed(dialect: str, **kw: object) -> tuple:
    torch.manual_seed(0)
    m = Embed().eval()
    return m, convert(export(m, (ri(10, 2, 3),), dialect), **kw)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_int_input_takes_integral_floats(dialect: str) -> None:
    m, mm = _embed(dialect)
    i = ri(10, 2, 3)
    want = m(i).detach().numpy()
    for feed in (i.numpy(), i.numpy().astype(np.float32), i.numpy().astype(np.float64), i.numpy().astype(np.int32)):
        (got,) = mm.predict({"i": feed}).values()
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_int_input_refuses_fractions(dialect: str) -> None:
    _, mm = _embed(dialect)
    feed = np.array([[1, 2, 3], [4, 1.5, 6]], np.float32)
    with pytest.raises(ValueError, match=r"input 'i' .*1\.5, which is not an integer"):
        mm.predict({"i": feed})
    with pytest.raises(ValueError, match=r"input 'i'.*nan"):
        mm.predict({"i": np.full((2, 3), np.nan, np.float32)})
    with pytest.raises(ValueError, match=r"input 'i'.*does not fit int32"):
        mm.predict({"i": np.full((2, 3), 2.0**40, np.float64)})


def test_bool_feeds_int_input() -> None:
    m = Fn(lambda i: i * 3 + 1)
    mm = convert(export(m, (ri(5, 4),)))
    b = np.array([True, False, True, True])
    (got,) = mm.predict({_first_input(mm): b}).values()
    np.testing.assert_array_equal(got, b.astype(np.int64) * 3 + 1)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_float64_feeds_float_input(precision: str) -> None:
    mm = convert(export(Fn(lambda x: x * 2), (r(3),)), precision)
    x = np.array([0.5, -1.25, 3.0])
    (got,) = mm.predict({_first_input(mm): x}).values()
    np.testing.assert_allclose(got, x * 2, rtol=1e-3)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_scalar_input_takes_shape_one(dialect: str) -> None:
    ep = export(Fn(lambda x, s: x * s), (r(3), torch.tensor(2.0)), dialect)
    mm = convert(ep)
    names = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    x = np.array([1.0, 2.0, 3.0], np.float32)
    for s in (np.array([3.0], np.float32), np.array(3.0, np.float32)):
        (got,) = mm.predict({names[0]: x, names[1]: s}).values()
        np.testing.assert_array_equal(got, x * 3)
    with pytest.raises(ValueError):
        mm.predict({names[0]: x, names[1]: np.array([3.0, 4.0], np.float32)})


# (requested dtype, Core ML input dataType, whether a cast to int32 reads the input), as
# coremltools converts an int64 torch input given TensorType(dtype=...)
RETYPED = [(np.int32, "INT32", False), (np.int64, "INT32", False), (np.float32, "FLOAT32", True),
           (np.float16, "FLOAT16", True)]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("dtype, data_type, cast", RETYPED)
def test_input_dtype_casts_like_coremltools(dtype: type, data_type: str, cast: bool, dialect: str) -> None:
    m, mm = _embed(dialect, inputs=[milkit.TensorType(name="i", shape=(2, 3), dtype=dtype)])
    (desc,) = mm.get_spec().description.input
    t = desc.type.multiArrayType
    assert type(t).ArrayDataType.Name(t.dataType) == data_type
    fn = mm.get_program().functions["main"]
    casts = [op for op in fn.find_ops(op_type="cast") if op.x.name == "i"]
    assert len(casts) == int(cast)
    if cast:
        assert casts[0].outputs[0]._dtype_code == milkit.types.int32.code
    i = ri(10, 2, 3)
    (got,) = mm.predict({"i": i.numpy().astype(dtype)}).values()
    np.testing.assert_allclose(got, m(i).detach().numpy(), rtol=1e-6)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reduction_of_a_retyped_input(op: str, dialect: str) -> None:
    """An int64 torch input read as fp32 (a cast inserted) feeding argmax / argmin over dim 1."""
    m = Fn(lambda i: getattr(i, op)(dim=1))
    mm = convert(export(m, (ri(50, 3, 5),), dialect),
                 inputs=[milkit.TensorType(shape=(3, 5), dtype=np.float32)])
    i = ri(50, 3, 5)
    (got,) = mm.predict({_first_input(mm): i.numpy().astype(np.float32)}).values()
    np.testing.assert_array_equal(got, m(i).numpy())


# coremltools 9.0 (its use_default_fp16_io), measured on relu(x) * 2, x.sum() and torchvision's
# ResNet-18: with minimum_deployment_target iOS16 or later and FLOAT16 precision, a torch
# program's fp32 outputs are fp16 (no cast back to fp32 at the end); with iOS15 they stay fp32.
# The inputs stay fp32, other outputs keep their dtype, and an output given a dtype keeps it.
@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("target", ["iOS15", "iOS16", "iOS17"])
def test_fp32_outputs_are_fp16_from_ios16_in_fp16(target: str, dialect: str) -> None:
    m = Fn(lambda x: (x.argmax(), torch.relu(x) * 2))
    x = r(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mm = milkit.convert(export(m, (x,), dialect), minimum_deployment_target=getattr(milkit.target, target))
    desc = mm.get_spec().description
    fp = "FLOAT32" if target == "iOS15" else "FLOAT16"
    got = [o.type.multiArrayType for o in desc.output]
    assert [type(t).ArrayDataType.Name(t.dataType) for t in got] == ["INT32", fp]
    t = desc.input[0].type.multiArrayType
    assert type(t).ArrayDataType.Name(t.dataType) == "FLOAT32"
    fn = mm.get_program().functions["main"]
    assert fn.outputs[1].op.op_type == ("cast" if target == "iOS15" else "mul")
    argmax, y = mm.predict({_first_input(mm): x.numpy()}).values()
    assert y.dtype == (np.float32 if target == "iOS15" else np.float16)
    np.testing.assert_allclose(y, (torch.relu(x) * 2).numpy(), rtol=1e-3)
    assert argmax.reshape(()) == x.argmax().item()


@pytest.mark.parametrize("dialect", DIALECTS)
def test_fp16_outputs_yield_to_explicit_ones(dialect: str) -> None:
    m = Fn(lambda x: (torch.relu(x), x * 2))
    ep = export(m, (r(2, 3),), dialect)
    given = [milkit.TensorType(name="a"), milkit.TensorType(name="b", dtype=np.float32)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mm = milkit.convert(ep, minimum_deployment_target=milkit.target.iOS17, outputs=given)
        fp32 = milkit.convert(ep, minimum_deployment_target=milkit.target.iOS17,
                              compute_precision=milkit.precision.FLOAT32)
    got = {o.name: type(o.type.multiArrayType).ArrayDataType.Name(o.type.multiArrayType.dataType)
           for o in mm.get_spec().description.output}
    assert got == {"a": "FLOAT16", "b": "FLOAT32"}
    assert given[0].dtype is None  # the caller's TensorType is left as it was
    assert all(o.type.multiArrayType.dataType == o.type.multiArrayType.FLOAT32
               for o in fp32.get_spec().description.output)


# coremltools 9.0 (torch.export programs after run_decompositions, measured on relu(x) * 2 with
# inputs=[TensorType(shape=(2, 3))]): with iOS16 or later and FLOAT16 precision, an fp32 input given
# a TensorType without a dtype is a FLOAT16 input and the program has no cast (non-const ops
# [relu, mul]); with a dtype of np.float32 it stays FLOAT32 ([cast, relu, mul]); with iOS15 or
# FLOAT32 precision it stays FLOAT32. An input given a name only is made fp16 too.
FP16_INPUT_CASES = {
    # (target, precision, dtype given): (input dtype, non-const ops)
    ("iOS17", "FLOAT16", None): ("FLOAT16", ["relu", "mul"]),
    ("iOS16", "FLOAT16", None): ("FLOAT16", ["relu", "mul"]),
    ("iOS17", "FLOAT16", np.float32): ("FLOAT32", ["cast", "relu", "mul"]),
    ("iOS15", "FLOAT16", None): ("FLOAT32", ["cast", "relu", "mul", "cast"]),
    ("iOS17", "FLOAT32", None): ("FLOAT32", ["relu", "mul"]),
}


def _dtype_name(feature: object) -> str:
    t = feature.type.multiArrayType  # type: ignore[attr-defined]
    return type(t).ArrayDataType.Name(t.dataType)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("case", sorted(FP16_INPUT_CASES, key=str))
def test_tensortype_inputs_are_fp16_from_ios16_in_fp16(case: tuple, dialect: str) -> None:
    target, precision, dtype = case
    want_dtype, want_ops = FP16_INPUT_CASES[case]
    x = r(2, 3)
    given = [milkit.TensorType(shape=(2, 3), dtype=dtype)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mm = milkit.convert(export(Fn(lambda x: torch.relu(x) * 2), (x,), dialect), inputs=given,
                            minimum_deployment_target=getattr(milkit.target, target),
                            compute_precision=getattr(milkit.precision, precision))
    desc = mm.get_spec().description
    assert _dtype_name(desc.input[0]) == want_dtype
    ops = [op.op_type for op in mm.get_program().functions["main"].operations if op.op_type != "const"]
    assert ops == want_ops
    assert given[0].dtype is dtype  # the caller's TensorType is left as it was
    feed = x.numpy().astype(np.float16 if want_dtype == "FLOAT16" else np.float32)
    (y,) = mm.predict({desc.input[0].name: feed}).values()
    np.testing.assert_allclose(y.astype(np.float32), (torch.relu(x) * 2).numpy(), rtol=1e-3)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_fp16_inputs_by_name_and_integer_inputs_kept(dialect: str) -> None:
    """A TensorType that renames its input (torch inputs are matched by position, as in
    coremltools) makes it fp16 too; an input given no TensorType stays fp32. An int64 input given a TensorType without a dtype keeps its integer
    dtype. Here milkit departs from coremltools on purpose: coremltools 9.0 makes it a FLOAT16 input
    (measured: an embedding's index input given TensorType(shape=(1, 4)) with iOS17 is FLOAT16,
    cast to int32 in the program), which cannot hold the integers above 2048: an index of 2049 would
    read row 2048. The test feeds such an index."""
    emb = torch.nn.Embedding(3000, 2)

    def f(x: torch.Tensor, i: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return x * 2 + emb(i).sum() + z

    args = (r(2, 3), torch.tensor([[2049, 7]]), r(2, 3))
    given = [milkit.TensorType(name="a", shape=(2, 3)), milkit.TensorType(name="i", shape=(1, 2))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mm = milkit.convert(export(Fn(f), args, dialect), inputs=given,
                            minimum_deployment_target=milkit.target.iOS17)
    kinds = {i.name: _dtype_name(i) for i in mm.get_spec().description.input}
    assert kinds == {"a": "FLOAT16", "i": "INT32", "a_2": "FLOAT32"}
    feed = {"a": args[0].numpy().astype(np.float16), "i": args[1].numpy().astype(np.int32), "a_2": args[2].numpy()}
    (y,) = mm.predict(feed).values()
    with torch.no_grad():
        want = f(*args).numpy()
    np.testing.assert_allclose(y.astype(np.float32), want, rtol=2e-3, atol=2e-3)
