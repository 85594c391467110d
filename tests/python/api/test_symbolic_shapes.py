"""The symbolic-shape guarantees of milkit, end to end from Python.

Where coremltools gives up and makes a fresh symbol, milkit keeps the exact expression; each test
checks the expression itself and, where coremltools agrees, parity with it.
"""

import milkit as ct
import numpy as np
import pytest
from milkit import Builder as mb
from milkit import get_new_symbol, types
from support.parity import ALL_OPSETS, check


def _out(prog, i=0):
    return prog.functions["main"].outputs[i]


def _shape(fn, *specs, opset=ct.target.iOS17):
    prog = mb.program(input_specs=[mb.TensorSpec(shape=s, dtype=types.fp32) for s in specs],
                      opset_version=opset)(fn)
    prog.validate()
    return prog


def test_reshape_minus_one():
    S = get_new_symbol("S")
    p = _shape(lambda x: mb.reshape(x=x, shape=[-1]), (S, 4))
    assert _out(p).shape == (4 * S,) and str(_out(p).shape[0]) == "4*S"
    p = _shape(lambda x: mb.reshape(x=x, shape=[2, -1]), (S, 4))
    assert _out(p).shape == (2, 2 * S)
    check(lambda mb, x: mb.reshape(x=x, shape=[2, -1]), [(("S", 4), "fp32")], ALL_OPSETS)


def test_reshape_by_computed_shape():
    S = get_new_symbol("S")

    def fn(x):
        s = mb.shape(x=x)
        d0 = mb.gather(x=s, indices=[0], axis=0)
        new_shape = mb.concat(values=[d0, np.array([2, 2], np.int32)], axis=0)
        return mb.reshape(x=x, shape=new_shape)

    p = _shape(fn, (S, 4))
    assert _out(p).shape == (S, 2, 2)
    shp = p.find_ops(op_type="shape")[0].outputs[0]
    assert shp.val is None and list(shp.sym_val) == [S, 4]
    check(lambda mb, x: mb.reshape(x=x, shape=mb.concat(values=[mb.gather(x=mb.shape(x=x), indices=[0], axis=0),
                                                                np.array([2, 2], np.int32)], axis=0)),
          [(("S", 4), "fp32")], ALL_OPSETS)


def test_broadcast_rules():
    S, T = get_new_symbol("S"), get_new_symbol("T")
    p = _shape(lambda x, y: mb.add(x=x, y=y), (S, 1, 4), (1, T, 4))
    assert _out(p).shape == (S, T, 4)
    p = _shape(lambda x, y: mb.add(x=x, y=y), (S, 4), (3, 4))
    assert _out(p).shape == (3, 4)  # as coremltools does
    with pytest.raises(ValueError, match=r"dim 0.*\(2, 4\).*\(3, 4\)|\(2, 4\).*\(3, 4\).*dim 0"):
        _shape(lambda x, y: mb.add(x=x, y=y), (2, 4), (3, 4))


def test_concat_keeps_the_sum():
    S, T = get_new_symbol("S"), get_new_symbol("T")
    p = _shape(lambda a, b, c: mb.concat(values=[a, b, c], axis=0), (S, 8), (T, 8), (S, 8))
    assert _out(p).shape == (2 * S + T, 8) and str(_out(p).shape[0]) == "2*S + T"


@pytest.mark.parametrize("pad_type,stride,dil", [("valid", 1, 1), ("valid", 2, 1), ("same", 2, 1),
                                                 ("valid", 1, 2), ("custom", 2, 1)])
def test_conv_output_size_is_exact(pad_type, stride, dil):
    H = get_new_symbol("H")
    w = np.random.rand(4, 3, 3, 3).astype(np.float32)
    kw = dict(strides=[stride, stride], dilations=[dil, dil], pad_type=pad_type)
    if pad_type == "custom":
        kw["pad"] = [1, 1, 1, 1]
    p = _shape(lambda x: mb.conv(x=x, weight=w, **kw), (1, 3, H, 16))
    h = _out(p).shape[2]
    # evaluate the expression against the concrete formula
    from milkit.symbolic import to_sympy

    e = to_sympy(h)
    for hv in range(8, 40):
        k = (3 - 1) * dil + 1
        if pad_type == "valid":
            want = (hv - k) // stride + 1
        elif pad_type == "same":
            want = -(-hv // stride)
        else:
            want = (hv + 2 - k) // stride + 1
        got = int(e.subs({s: hv for s in e.free_symbols}))
        assert got == want, (pad_type, stride, dil, hv, str(h))


def test_pool_output_size_is_exact():
    H = get_new_symbol("H")
    p = _shape(lambda x: mb.max_pool(x=x, kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid"), (1, 3, H, 8))
    from milkit.symbolic import to_sympy

    e = to_sympy(_out(p).shape[2])
    for hv in range(2, 30):
        assert int(e.subs({s: hv for s in e.free_symbols})) == (hv - 2) // 2 + 1


def test_slice_with_stride_is_exact():
    S = get_new_symbol("S")
    p = _shape(lambda x: mb.slice_by_index(x=x, begin=[1, 0], end=[0, 4], stride=[2, 1],
                                           end_mask=[True, False]), (S, 4))
    from milkit.symbolic import to_sympy

    e = to_sympy(_out(p).shape[0])
    for sv in range(2, 30):
        assert int(e.subs({s: sv for s in e.free_symbols})) == len(range(1, sv, 2))


def test_symbol_algebra_identities():
    S = get_new_symbol("S")
    assert 2 * S + S == 3 * S
    assert (4 * S) // 4 == S
    assert S - S == 0


def test_symbols_reused_across_programs():
    S = get_new_symbol("S")
    p1 = _shape(lambda x: mb.add(x=x, y=x), (S, 2))
    p2 = _shape(lambda x: mb.mul(x=x, y=x), (S, 2))
    assert _out(p1).shape[0] == _out(p2).shape[0] == S
