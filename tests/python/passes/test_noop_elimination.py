"""common::noop_elimination against coremltools."""

import numpy as np
import pytest
from support.parity import ALL_OPSETS
from support.pass_parity import check_passes, op_types

P = "common::noop_elimination"


@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_elementwise(opset):
    def build(mb, x, x1):
        a = mb.add(x=x, y=0.0)
        b = mb.add(x=np.zeros((1, 4), np.float32), y=a)  # broadcast to the same type: removed
        c = mb.add(x=b, y=np.zeros((2, 1, 4), np.float32))  # changes the shape: kept
        d = mb.mul(x=1.0, y=b)
        e = mb.sub(x=0.0, y=d)  # 0 - x: kept
        f = mb.sub(x=e, y=0.0)
        g = mb.real_div(x=f, y=1.0)
        h = mb.pow(x=g, y=1.0)
        i = mb.floor_div(x=x1, y=1)
        j = mb.mul(x=h, y=mb.fill(shape=[4], value=1.0))
        k = mb.real_div(x=x1, y=1)  # int / int -> fp32: kept
        return c, j, i, k, mb.add(x=j, y=0.0)

    check_passes(build, [(("S", 4), "fp32"), ((4,), "int32")], [P], opset)


@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_shape_ops(opset):
    def build(mb, x):
        a = mb.reshape(x=x, shape=[2, -1, 4])
        b = mb.reshape(x=a, shape=[2, 3, 2, 2])  # changes the shape: kept
        c = mb.transpose(x=a, perm=[0, -2, 2])
        d = mb.transpose(x=c, perm=[1, 0, 2])  # kept
        e = mb.slice_by_index(x=d, begin=[0, 0, 0], end=[3, 2, 4])
        f = mb.slice_by_index(x=e, begin=[0, 0, 0], end=[3, 2, 4], stride=[1, 1, -1])  # kept
        g = mb.slice_by_size(x=f, begin=[0, 0, 0], size=[-1, -1, -1])
        h = mb.tile(x=g, reps=[1, 1, 1])
        i = mb.pad(x=h, pad=[0, 0, 0, 0, 0, 0])
        j = mb.split(x=i, num_splits=1, axis=0)  # one output: a Var, as in coremltools
        k = mb.identity(x=j)
        m = mb.linear_activation(x=k, alpha=1.0, beta=0.0)
        n = mb.linear_activation(x=m, alpha=2.0, beta=0.0)  # kept
        return b, n, mb.identity(x=n)

    cp, mp = check_passes(build, [((2, 3, 4), "fp32")], [P], opset)
    assert "identity" in op_types(mp)  # an identity that is an output stays


def test_symbolic_reshape():
    def build(mb, x):
        s = mb.shape(x=x)
        return mb.relu(x=mb.reshape(x=x, shape=s))

    check_passes(build, [(("S", "T"), "fp32")], [P])
