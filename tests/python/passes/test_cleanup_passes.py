"""common::remove_redundant_ops, common::update_output_dtypes and common::loop_invariant_elimination
against coremltools."""

import numpy as np
import pytest
from support.parity import ALL_OPSETS
from support.pass_parity import check_passes, op_types

REDUNDANT = "common::remove_redundant_ops"


@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_redundant_ops(opset):
    def build(mb, x):
        a = mb.relu(x=x)
        b = mb.relu(x=x)
        c = mb.add(x=a, y=1.0)
        d = mb.add(x=b, y=1.0)  # same after a == b: removed in the next round
        e = mb.mul(x=c, y=np.full((2, 4), 2.0, np.float32))
        f = mb.mul(x=d, y=np.full((2, 4), 2.0, np.float32))
        g = mb.concat(values=[e, f], axis=0)
        h = mb.concat(values=[e, f], axis=0)
        i = mb.concat(values=[e, f], axis=1)  # other axis: kept
        return mb.add(x=g, y=h), i

    _, mp = check_passes(build, [((2, 4), "fp32")], [REDUNDANT], opset)
    assert op_types(mp).count("relu") == 1


def test_redundant_ops_negative():
    def build(mb, x):
        a = mb.add(x=x, y=1.0)
        b = mb.add(x=x, y=np.float32(1.0))
        c = mb.add(x=x, y=2.0)  # other value: kept
        d = mb.add(x=x, y=np.ones((1, 4), np.float32))  # other shape: kept
        e = mb.add(x=x, y=np.ones((4,), np.float32))  # other shape: kept
        big1 = mb.mul(x=x, y=np.ones((100, 2, 4), np.float32))
        big2 = mb.mul(x=x, y=np.ones((100, 2, 4), np.float32))  # 100+ elements: kept
        n1 = mb.add(x=x, y=np.nan)
        n2 = mb.add(x=x, y=np.nan)  # NaN never equal: kept
        o = mb.relu(x=x)
        o2 = mb.relu(x=x)  # o2 is an output: kept
        return a, b, c, d, e, big1, big2, n1, n2, o, o2

    _, mp = check_passes(build, [((2, 4), "fp32")], [REDUNDANT])


def test_redundant_ops_symbolic_and_int():
    def build(mb, x, y):
        s1 = mb.shape(x=x)
        s2 = mb.shape(x=x)
        r1 = mb.reshape(x=x, shape=s1)
        r2 = mb.reshape(x=x, shape=s2)  # s1 == s2 after the first round
        i1 = mb.add(x=y, y=np.int32(3))
        i2 = mb.add(x=y, y=3)
        i3 = mb.add(x=y, y=np.array([3], np.int32))  # other shape: kept
        t1 = mb.transpose(x=x, perm=[1, 0])
        t2 = mb.transpose(x=x, perm=[1, 0])
        sp = mb.split(x=x, num_splits=2, axis=1)
        sp2 = mb.split(x=x, num_splits=2, axis=1)  # two outputs: kept
        return mb.add(x=r1, y=r2), i1, i2, i3, mb.matmul(x=t1, y=t2), sp[0], sp2[1]

    _, mp = check_passes(build, [(("S", 4), "fp32"), (("T",), "int32")], [REDUNDANT])
    assert op_types(mp).count("shape") == 1


def test_redundant_ops_constexpr():
    q = np.arange(12, dtype=np.uint8).reshape(4, 3)

    def build(mb, x):
        d1 = mb.constexpr_affine_dequantize(quantized_data=q, zero_point=np.uint8(3), scale=np.float32(0.5), axis=0)
        d2 = mb.constexpr_affine_dequantize(quantized_data=q, zero_point=np.uint8(3), scale=np.float32(0.5), axis=0)
        a = mb.add(x=x, y=d1)
        b = mb.add(x=x, y=d2)  # constexpr outputs have no value: compared by identity, kept
        c = mb.add(x=x, y=d1)  # same var: removed
        return mb.mul(x=a, y=b), mb.relu(x=c)

    _, mp = check_passes(build, [((4, 3), "fp32")], [REDUNDANT], "iOS16")
    assert op_types(mp).count("add") == 2


@pytest.mark.parametrize("name", ["common::update_output_dtypes", "common::loop_invariant_elimination"])
@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_no_output_types_no_loops(name, opset):
    # programs built with mb.program have no output_types and milkit has no while_loop: unchanged
    def build(mb, x, y):
        a = mb.cast(x=mb.relu(x=x), dtype="fp16")
        return a, mb.add(x=y, y=1), x

    _, mp = check_passes(build, [(("S", 4), "fp32"), ((3,), "int32")], [name], opset)
    assert [t for t in op_types(mp) if t != "const"] == ["relu", "cast", "add"]
