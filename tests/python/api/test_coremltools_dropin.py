"""Programs written for coremltools, run with milkit as a drop-in: what milkit must raise or accept
where coremltools does."""

import numpy as np
import pytest
from support.parity import _build, _ct, _make_symbols, reset_ct_names


def _both_raise(build, specs, opset="iOS17"):
    """Builds with both; returns (coremltools error, milkit error)."""
    symtab = _make_symbols(specs)
    reset_ct_names()
    errs = []
    for kind in ("ct", "mk"):
        try:
            _build(kind, build, specs, opset, symtab)
            errs.append(None)
        except Exception as e:
            errs.append(e)
    return errs


SCATTERS = {
    "scatter": lambda mb, d, u: mb.scatter(data=d, indices=np.array([0, 4], np.int32), updates=u,
                                           validate_indices=True),
    "scatter_along_axis": lambda mb, d, u: mb.scatter_along_axis(
        data=d, indices=np.array([[0, 4, 1]], np.int32), updates=mb.slice_by_size(x=u, begin=[0, 0], size=[1, 3]),
        axis=0, validate_indices=True),
    "scatter_nd": lambda mb, d, u: mb.scatter_nd(data=d, indices=np.array([[0], [4]], np.int32), updates=u,
                                                 validate_indices=True),
    "gather": lambda mb, d, u: mb.gather(x=d, indices=np.array([0, 4], np.int32), validate_indices=True),
    "gather_along_axis": lambda mb, d, u: mb.gather_along_axis(x=d, indices=np.array([[4, 0, 0]], np.int32),
                                                               validate_indices=True),
    "gather_nd": lambda mb, d, u: mb.gather_nd(x=d, indices=np.array([[4]], np.int32), validate_indices=True),
}


@pytest.mark.parametrize("op", sorted(SCATTERS))
def test_validate_indices_raises_index_error(op):
    import milkit

    c, m = _both_raise(SCATTERS[op], [((3, 3), "fp32"), ((2, 3), "fp32")])
    assert isinstance(c, IndexError), c
    assert isinstance(m, IndexError) and isinstance(m, milkit.MilkitIndexError), repr(m)
    assert isinstance(m, ValueError)  # milkit's errors stay ValueErrors too
    # coremltools' wording (for the _nd ops coremltools prints the bound as a shape tuple; milkit
    # gives the bound of the dim the index addresses)
    assert f"Indices is out of bounds for `{op}` node {op}_0. Expected indices between [0, 3)" in str(m)
    if not op.endswith("_nd"):
        assert str(c).split(", but got")[0] in str(m)


def test_program_getitem():
    import milkit
    from milkit import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=(2,))])
    def prog(x):
        return mb.relu(x=x)

    assert prog["main"] is not None
    assert [o.op_type for o in prog["main"].operations] == ["relu"]
    with pytest.raises(KeyError, match="Function other not found"):
        prog["other"]
    _ct()
    assert isinstance(prog, milkit.Program)


def _messages(build, specs, opset):
    c, m = _both_raise(build, specs, opset)
    assert c is not None and m is not None, (c, m)
    assert isinstance(m, type(c)) or isinstance(m, ValueError), (type(c), type(m))
    return str(c), str(m)


def test_error_wording_unknown_input():
    c, m = _messages(lambda mb, x: mb.topk(x=x, k=2, output_indices_dtype="fp32"), [((4,), "fp32")], "iOS16")
    assert "Unknown input 'output_indices_dtype' for op 'topk'" in c
    assert "Unknown input 'output_indices_dtype' for op 'topk'" in m


def test_error_wording_reshape_zero():
    c, m = _messages(lambda mb, x: mb.reshape(x=x, shape=[0, 2]), [((2, 4), "fp32")], "iOS17")
    assert "Invalid target shape in `reshape` op" in c
    assert "Invalid target shape in `reshape` op ((2, 4) to [0, 2])" in m


def test_error_wording_mixed_dtypes():
    c, m = _messages(lambda mb, x: mb.matmul(x=x, y=np.ones((4, 2), np.float16)), [((3, 4), "fp32")], "iOS15")
    want = ("In op, of type matmul, named matmul_0, the named input `y` must have the same data type as the "
            "named input `x`. However, y has dtype fp16 whereas x has dtype fp32.")
    assert want in c and want in m


def test_error_conv_rank_names_the_problem():
    # coremltools' message for a rank-2 conv input is accidental (it complains about the dtype of
    # the strides it made for the missing spatial dims); milkit names the real problem instead
    c, m = _messages(lambda mb, x: mb.conv(x=x, weight=np.ones((2, 3, 1), np.float32)), [((3, 4), "fp32")], "iOS17")
    assert "strides" in c
    assert "input 'x' must have rank >= 3" in m
