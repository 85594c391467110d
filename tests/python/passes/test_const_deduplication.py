"""common::const_deduplication against coremltools."""

import numpy as np
import pytest
from support.parity import ALL_OPSETS
from support.pass_parity import check_passes, op_types

P = "common::const_deduplication"
rng = np.random.default_rng(0)
W = rng.standard_normal((16, 8)).astype(np.float32)
B = rng.standard_normal((16,)).astype(np.float32)


@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_linear_weights_are_shared(opset):
    w2 = W.copy()
    w3 = W.copy()
    w3[5, 5] += 1e-3  # beyond the tolerance: kept
    w4 = W.copy()
    w4[15, 7] = np.nextafter(w4[15, 7], np.float32(10))  # outside the hashed prefix, 1 ulp: kept

    def build(mb, x):
        a = mb.linear(x=x, weight=W, bias=B)
        b = mb.linear(x=x, weight=w2, bias=B.copy())
        c = mb.linear(x=x, weight=w3, bias=B)
        d = mb.linear(x=x, weight=w4)
        return mb.add(x=mb.add(x=a, y=b), y=mb.add(x=c, y=d))

    cp, mp = check_passes(build, [(("S", 8), "fp32")], [P], opset)
    # weights W, w3, w4 survive (w2 merged); 3 given biases + d's default bias are under 100 elements
    assert op_types(mp).count("const") == 3 + 4


def test_threshold_option_and_dtypes():
    h = rng.standard_normal((12,)).astype(np.float16)
    i = np.arange(12, dtype=np.int32)

    def build(mb, x):
        a = mb.add(x=x, y=h)
        b = mb.add(x=x, y=h.copy())
        c = mb.add(x=mb.cast(x=x, dtype="int32"), y=i)
        d = mb.add(x=mb.cast(x=x, dtype="int32"), y=i.copy())
        e = mb.mul(x=a, y=b)
        return e, mb.add(x=c, y=d)

    for thr in (10, 12, 13, 100):
        check_passes(build, [((12,), "fp16")], [P], "iOS17", {P: {"const_threshold": thr}})


def test_fp16_tolerance_and_outputs():
    h = np.linspace(-1, 1, 128).astype(np.float16)
    h2 = h.copy()
    h2[3] = np.nextafter(h2[3], np.float16(2))  # hashed element differs: kept
    tiny = np.zeros((128,), np.float16)
    tiny2 = tiny.copy()
    tiny2[120] = np.float16(2 ** -24)  # within fp16's 6e-8 tolerance, past the hash prefix: merged

    def build(mb, x):
        k1 = mb.const(val=h, name="k1")
        k2 = mb.const(val=h.copy(), name="k2")  # function output: kept
        a = mb.add(x=x, y=k1)
        b = mb.add(x=x, y=h2)
        c = mb.add(x=mb.add(x=x, y=tiny), y=tiny2)
        return mb.add(x=mb.add(x=a, y=b), y=c), k2, mb.mul(x=x, y=h.copy())

    _, mp = check_passes(build, [((128,), "fp16")], [P], "iOS16")
    assert op_types(mp).count("const") == 4  # k1, k2, h2, tiny (tiny2 and the last h merged)


def test_bad_option():
    from milkit.passes import apply_pass
    from support.pass_parity import build_both

    _, mp, _ = build_both(lambda mb, x: mb.add(x=x, y=x), [((2,), "fp32")])
    with pytest.raises(ValueError, match="const_threshold"):
        apply_pass(mp, P, const_threshold="ten")
