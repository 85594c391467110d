"""Parity of the scatter / gather ops with coremltools at every opset."""

import numpy as np
import pytest
from support.builders import mk_build
from support.parity import ALL_OPSETS, check, check_error

# ---------------------------------------------------------------------------------------------
# gather


@pytest.mark.parametrize("kw,specs", [
    ({"axis": 1}, [(("S", 4), "fp32"), ((2, 3), "int32")]),
    ({}, [((5, "S"), "fp16"), ((3,), "int32")]),
    ({"axis": -1}, [((2, 3, 4), "int32"), (("T",), "int32")]),
    ({"axis": 0}, [((5, 2), "fp32"), ((1,), "int32")]),
])
def test_gather_vars(kw, specs):
    res = check(lambda mb, x, i: mb.gather(x=x, indices=i, **kw), specs, ALL_OPSETS)
    assert res[-1].improved == []


def test_gather_const_indices_and_scalar():
    check(lambda mb, x: mb.gather(x=x, indices=[1, 0, 1], axis=1), [(("S", 4), "fp32")], ALL_OPSETS)
    # a scalar index removes the axis; rank-1 x gives a scalar
    check(lambda mb, x: mb.gather(x=x, indices=np.int32(2), axis=0), [((5,), "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.gather(x=x, indices=np.int32(-1), axis=1), [((2, 5), "int32")], ALL_OPSETS)


def test_gather_fold():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    check(lambda mb, x: mb.gather(x=a, indices=[2, 0], axis=0), [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.gather(x=a, indices=[[1, -1], [0, 3]], axis=1), [((1,), "fp32")], ALL_OPSETS)
    b = np.arange(6, dtype=np.int32)
    check(lambda mb, x: mb.gather(x=b, indices=np.int32(4)), [((1,), "fp32")], ALL_OPSETS)


def test_gather_batch_dims():
    specs = [((2, 3, 4), "fp32"), ((2, 5), "int32")]
    check(lambda mb, x, i: mb.gather(x=x, indices=i, axis=1, batch_dims=1), specs, ["iOS16", "iOS17", "iOS18"])
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    idx = np.array([[0, 2], [1, 1]], np.int32)
    res = check(lambda mb, x: mb.gather(x=a, indices=idx, axis=1, batch_dims=1), [((1,), "fp32")],
                ["iOS16", "iOS17", "iOS18"])
    want = np.stack([a[0][idx[0]], a[1][idx[1]]])
    np.testing.assert_array_equal(res[-1].mk_prog.functions["main"].outputs[0].val, want)
    # batch_dims does not exist before iOS16
    check_error(lambda mb, x, i: mb.gather(x=x, indices=i, axis=1, batch_dims=1), specs, opset="iOS15",
                match=r"gather.*batch_dims")
    check_error(lambda mb, x, i: mb.gather(x=x, indices=i, axis=1, batch_dims=3), specs, opset="iOS17",
                match=r"gather 'gather_0'.*'batch_dims'.*less than x.rank")


def test_gather_index_dtypes():
    check(lambda mb, x, i: mb.gather(x=x, indices=i), [((4, 2), "fp32"), ((3,), "int16")],
          ["iOS16", "iOS17", "iOS18"])
    check(lambda mb, x, i: mb.gather(x=x, indices=i), [((4, 2), "int8"), ((3,), "uint8")], ["iOS17", "iOS18"])
    check_error(lambda mb, x, i: mb.gather(x=x, indices=i), [((4, 2), "fp32"), ((3,), "int16")], opset="iOS15",
                match=r"gather 'gather_0'.*'indices'.*int16")
    check_error(lambda mb, x, i: mb.gather(x=x, indices=i), [((4, 2), "fp32"), ((3,), "uint8")], opset="iOS16",
                match=r"gather 'gather_0'.*'indices'.*uint8")
    check_error(lambda mb, x, i: mb.gather(x=x, indices=i), [((4, 2), "bool"), ((3,), "int32")],
                match=r"gather 'gather_0'.*'x'.*bool")


def test_gather_errors_and_validate():
    check_error(lambda mb, x: mb.gather(x=x, indices=[0], axis=2), [((4, 2), "fp32")],
                match=r"gather 'gather_0'.*'axis'.*2.*out of bounds")
    check_error(lambda mb, x: mb.gather(x=x, indices=[0, 4], validate_indices=True), [((4, 2), "fp32")],
                match=r"gather 'gather_0'.*'indices'.*\[0, 4\)")
    check(lambda mb, x: mb.gather(x=x, indices=[0, 3], validate_indices=True), [((4, 2), "fp32")],
          ["iOS17", "iOS18"])
    a = np.arange(4, dtype=np.float32)
    check_error(lambda mb, x: mb.gather(x=a, indices=[5]), [((1,), "fp32")],
                match=r"gather 'gather_0'.*'indices'.*5.*out of bounds")


def test_gather_symbolic_value_cpp_side():
    # a gathered symbolic value (a shape) keeps its symbols: checked in the C++ tests (no
    # mb.shape here); here a known int vector gathers to a known value
    check(lambda mb, x: mb.gather(x=np.array([7, 8, 9], np.int32), indices=[2, 0]), [((1,), "fp32")],
          ALL_OPSETS)


# ---------------------------------------------------------------------------------------------
# gather_along_axis


@pytest.mark.parametrize("axis,specs", [
    (0, [((3, 4), "fp32"), ((5, 4), "int32")]),
    (1, [(("S", 4), "fp16"), (("S", 2), "int32")]),
    (-1, [((2, 3, 4), "int32"), ((2, 3, 1), "int32")]),
])
def test_gather_along_axis(axis, specs):
    check(lambda mb, x, i: mb.gather_along_axis(x=x, indices=i, axis=axis), specs, ALL_OPSETS)


def test_gather_along_axis_default_fold_and_errors():
    check(lambda mb, x, i: mb.gather_along_axis(x=x, indices=i), [((3, 4), "fp32"), ((2, 4), "int32")], ALL_OPSETS)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([[2, 0, 1, -1]], np.int32)
    res = check(lambda mb, x: mb.gather_along_axis(x=a, indices=idx, axis=0), [((1,), "fp32")], ALL_OPSETS)
    np.testing.assert_array_equal(res[-1].mk_prog.functions["main"].outputs[0].val,
                                  np.take_along_axis(a, idx, 0))
    check(lambda mb, x, i: mb.gather_along_axis(x=x, indices=i), [((3, 4), "uint8"), ((2, 4), "int8")],
          ["iOS17", "iOS18"])
    check_error(lambda mb, x, i: mb.gather_along_axis(x=x, indices=i), [((3, 4), "fp32"), ((2,), "int32")],
                match=r"gather_along_axis 'gather_along_axis_0'.*rank")
    check_error(lambda mb, x, i: mb.gather_along_axis(x=x, indices=i, axis=0), [((3, 4), "fp32"), ((2, 3), "int32")],
                match=r"gather_along_axis 'gather_along_axis_0'.*axis 1.*4 vs 3")
    check_error(lambda mb, x, i: mb.gather_along_axis(x=x, indices=i, axis=2), [((3, 4), "fp32"), ((2, 4), "int32")],
                match=r"gather_along_axis 'gather_along_axis_0'.*'axis'")
    check_error(lambda mb, x: mb.gather_along_axis(x=x, indices=np.array([[3, 0]], np.int32), validate_indices=True),
                [((3, 2), "fp32")], match=r"gather_along_axis 'gather_along_axis_0'.*'indices'")


# ---------------------------------------------------------------------------------------------
# gather_nd


def test_gather_nd():
    check(lambda mb, x, i: mb.gather_nd(x=x, indices=i), [((3, 4, 5), "fp32"), (("S", 2), "int32")], ALL_OPSETS)
    check(lambda mb, x, i: mb.gather_nd(x=x, indices=i), [(("A", 4), "int32"), ((2, 3, 2), "int32")], ALL_OPSETS)
    check(lambda mb, x, i: mb.gather_nd(x=x, indices=i, batch_dims=1), [((2, 4, 5), "fp16"), ((2, 3, 1), "int32")],
          ["iOS16", "iOS17", "iOS18"])
    check_error(lambda mb, x, i: mb.gather_nd(x=x, indices=i, batch_dims=1), [((2, 4), "fp32"), ((2, 3, 2), "int32")],
                opset="iOS16", match=r"gather_nd 'gather_nd_0'.*smaller or equal")


# ---------------------------------------------------------------------------------------------
# scatter family


@pytest.mark.parametrize("kw", [{}, {"axis": 1, "mode": "update"}, {"axis": -1, "mode": "max"}])
def test_scatter(kw):
    ax = kw.get("axis", 0)
    ushape = (2, 4) if ax == 0 else (3, 2)
    check(lambda mb, d, i, u: mb.scatter(data=d, indices=i, updates=u, **kw),
          [((3, 4), "fp32"), ((2,), "int32"), (ushape, "fp32")], ALL_OPSETS)


def test_scatter_errors():
    check_error(lambda mb, d, i, u: mb.scatter(data=d, indices=i, updates=u),
                [((3, 4), "fp32"), ((2,), "int32"), ((3, 4), "fp32")],
                match=r"scatter 'scatter_0'.*'updates'.*\(2, 4\)")
    check_error(lambda mb, d, i, u: mb.scatter(data=d, indices=i, updates=u),
                [((3, 4), "fp32"), ((2,), "int32"), ((2, 4), "fp16")], match=r"scatter 'scatter_0'.*'updates'")


def test_scatter_along_axis():
    check(lambda mb, d, i, u: mb.scatter_along_axis(data=d, indices=i, updates=u, axis=1),
          [((3, 4), "fp32"), ((3, 2), "int32"), ((3, 2), "fp32")], ALL_OPSETS)
    a = np.zeros((2, 3), np.float32)
    idx = np.array([[1, 0, 1]], np.int32)
    upd = np.array([[5.0, 6.0, 7.0]], np.float32)
    res = check(lambda mb, x: mb.scatter_along_axis(data=a, indices=idx, updates=upd, axis=0, mode="update"),
                [((1,), "fp32")], ALL_OPSETS)
    want = a.copy()
    np.put_along_axis(want, idx, upd, 0)
    np.testing.assert_array_equal(res[-1].mk_prog.functions["main"].outputs[0].val, want)
    check_error(lambda mb, d, i, u: mb.scatter_along_axis(data=d, indices=i, updates=u, axis=1),
                [((3, 4), "fp32"), ((2, 2), "int32"), ((2, 2), "fp32")],
                match=r"scatter_along_axis 'scatter_along_axis_0'.*axis 0")


def test_scatter_along_axis_fold_honours_mode():
    # coremltools folds with put_along_axis whatever the mode; the op adds by default
    a = np.ones((2, 2), np.float32)
    p = mk_build(lambda mb, x: mb.scatter_along_axis(
        data=a, indices=np.array([[1, 1]], np.int32), updates=np.array([[2.0, 3.0]], np.float32)),
        [((1,), "fp32")])
    np.testing.assert_array_equal(p.functions["main"].outputs[0].val, [[1, 1], [3, 4]])


def test_scatter_nd():
    check(lambda mb, d, i, u: mb.scatter_nd(data=d, indices=i, updates=u),
          [((3, 4, 5), "fp32"), ((6, 2), "int32"), ((6, 5), "fp32")], ALL_OPSETS)
    check(lambda mb, d, i, u: mb.scatter_nd(data=d, indices=i, updates=u, mode="update"),
          [(("S", 4), "int32"), ((2, 1), "int32"), ((2, 4), "int32")], ALL_OPSETS)
    check_error(lambda mb, d, i, u: mb.scatter_nd(data=d, indices=i, updates=u),
                [((3, 4, 5), "fp32"), ((6, 2), "int32"), ((6, 4), "fp32")],
                match=r"scatter_nd 'scatter_nd_0'.*'updates'")


def test_scatter_validate_indices():
    check_error(lambda mb, d, u: mb.scatter(data=d, indices=np.array([0, 3], np.int32), updates=u,
                                            validate_indices=True),
                [((3, 4), "fp32"), ((2, 4), "fp32")], match=r"scatter 'scatter_0'.*'indices'")
    check(lambda mb, d, u: mb.scatter(data=d, indices=np.array([0, 2], np.int32), updates=u, validate_indices=True),
          [((3, 4), "fp32"), ((2, 4), "fp32")], ["iOS17", "iOS18"])
