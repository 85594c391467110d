"""common::fuse_onehot_matmul_to_gather and common::expand_dynamic_linear against coremltools."""

import numpy as np
import pytest
from support.pass_parity import check_same_ops as _check
from support.pass_parity import ct_ops_after as _ct_ops
from support.pass_parity import op_types
from support.pass_parity import rand as _r

DTYPES = [("fp32", np.float32), ("fp16", np.float16)]


# ---- fuse_onehot_matmul_to_gather --------------------------------------------------------------

ONEHOT = "common::fuse_onehot_matmul_to_gather"


def _in_range_numbers(build, specs, opset, n):
    """Runs the program before and after the pass on indices in [0, n) (one_hot gives zeros for
    others where gather fails or wraps)."""
    import milkit
    from milkit.passes import apply_passes
    from support.parity import _build, _make_symbols

    before = _build("mk", build, specs, opset, _make_symbols(specs))
    after = _build("mk", build, specs, opset, _make_symbols(specs))
    apply_passes(after, [ONEHOT], None, verify_each=True)
    rng = np.random.default_rng(0)
    shape = [4 if isinstance(d, str) else d for d in specs[0][0]]
    feed = {"x": rng.integers(0, n, size=shape).astype(np.int32)}
    a, b = milkit.run(before, feed), milkit.run(after, feed)
    for k in a:
        np.testing.assert_allclose(b[k], a[k], rtol=1e-6)
    return after


@pytest.mark.parametrize("opset", ["iOS15", "iOS16", "iOS17", "iOS18"])
@pytest.mark.parametrize("dt,npdt", DTYPES)
def test_onehot_matmul(opset, dt, npdt):
    w = _r(6, 4, dt=npdt)

    def build(mb, x):
        oh = mb.one_hot(indices=x, one_hot_vector_size=6, axis=-1, on_value=npdt(1), off_value=npdt(0))
        return mb.relu(x=mb.matmul(x=oh, y=w))

    specs = [(("S", 3), "int32")]
    ops = _check(build, specs, ONEHOT, opset, numbers=False)
    assert "one_hot" not in ops and "gather" in ops
    assert ("select" in ops) == (opset in ("iOS17", "iOS18"))
    _in_range_numbers(build, specs, opset, 6)


def test_onehot_matmul_block_output():
    def build(mb, x):
        oh = mb.one_hot(indices=x, one_hot_vector_size=5, on_value=1.0, off_value=0.0)
        return mb.matmul(x=oh, y=_r(5, 2))

    specs = [((2, 3), "int32")]
    assert _check(build, specs, ONEHOT, numbers=False) == ["greater_equal", "shape", "slice_by_index", "add",
                                                          "select", "gather"]
    _in_range_numbers(build, specs, "iOS17", 5)


def test_onehot_matmul_negative():
    def build(mb, x, y):
        w = _r(5, 2)
        a = mb.matmul(x=mb.one_hot(indices=x, one_hot_vector_size=5, axis=-2, on_value=1.0, off_value=0.0),
                      y=_r(2, 3))  # not the last axis
        b = mb.matmul(x=mb.one_hot(indices=x, one_hot_vector_size=5, on_value=2.0, off_value=0.0), y=w)
        c = mb.matmul(x=mb.one_hot(indices=x, one_hot_vector_size=5, on_value=1.0, off_value=-1.0), y=w)
        e = mb.matmul(x=mb.one_hot(indices=x, one_hot_vector_size=5, on_value=1.0, off_value=0.0),
                      y=_r(2, 5), transpose_y=True)
        f = mb.matmul(x=mb.one_hot(indices=x, one_hot_vector_size=5, on_value=1.0, off_value=0.0), y=y)  # dynamic W
        oh = mb.one_hot(indices=x, one_hot_vector_size=5, on_value=1.0, off_value=0.0)
        g = mb.matmul(x=oh, y=w)
        h = mb.relu(x=oh)  # two users
        oh2 = mb.one_hot(indices=x, one_hot_vector_size=5, on_value=1.0, off_value=0.0)
        i = mb.matmul(x=oh2, y=w)
        k = mb.matmul(x=_r(2, 2), y=mb.one_hot(indices=x, one_hot_vector_size=5, on_value=1.0, off_value=0.0))
        return a, b, c, e, f, g, h, i, oh2, k  # oh2 is a block output

    ops = _check(build, [((2,), "int32"), ((5, 2), "fp32")], ONEHOT)
    assert "gather" not in ops


def test_onehot_matmul_differs_from_coremltools():
    # coremltools takes on_value within 1e-3 of 1, and axis=0 on rank-1 indices (rank - 1, not the
    # last axis of the one_hot output) as the last axis; both change the numbers. milkit does not.
    def build_value(mb, x):
        oh = mb.one_hot(indices=x, one_hot_vector_size=4, on_value=1.0005, off_value=0.0)
        return mb.matmul(x=oh, y=_r(4, 3))

    def build_axis(mb, x):
        oh = mb.one_hot(indices=x, one_hot_vector_size=4, axis=0, on_value=1.0, off_value=0.0)  # (4, 4)
        return mb.matmul(x=oh, y=_r(4, 3))

    for build in (build_value, build_axis):
        assert "gather" in _ct_ops(build, [((4,), "int32")], ONEHOT)
        mp = _in_range_numbers(build, [((4,), "int32")], "iOS17", 4)
        assert "one_hot" in op_types(mp)


# ---- expand_dynamic_linear ---------------------------------------------------------------------

EDL = "common::expand_dynamic_linear"


@pytest.mark.parametrize("dt,npdt", DTYPES)
def test_expand_dynamic_linear(dt, npdt):
    def build(mb, x):
        w = _r(4, 3, dt=np.float32)
        wd = mb.cast(x=w, dtype=dt)  # known value, but not a const op: "dynamic"
        bd = mb.add(x=_r(4, seed=1, dt=npdt), y=npdt(1))
        a = mb.linear(x=x, weight=w.astype(npdt), bias=bd)  # static weight, dynamic bias
        b = mb.linear(x=x, weight=wd)  # dynamic weight, zero default bias
        c = mb.linear(x=x, weight=wd, bias=np.zeros(4, npdt))  # zero const bias
        d = mb.linear(x=x, weight=wd, bias=_r(4, seed=2, dt=npdt))
        e = mb.linear(x=x, weight=wd, bias=bd)
        f = mb.linear(x=x, weight=w.astype(npdt), bias=_r(4, seed=3, dt=npdt))  # static: unchanged
        return mb.relu(x=a), b, c, d, mb.relu(x=e), f

    ops = _check(build, [(("S", 3), dt)], EDL)
    assert ops.count("linear") == 2 and ops.count("matmul") == 4


@pytest.mark.parametrize("zero", [True, False])
def test_expand_dynamic_linear_constexpr_bias(zero):
    def build(mb, x):
        q = np.zeros((4,), np.uint8) + (3 if zero else np.arange(4, dtype=np.uint8))
        bias = mb.constexpr_affine_dequantize(quantized_data=q, zero_point=np.uint8(3), scale=np.float32(0.5), axis=0)
        wd = mb.cast(x=_r(4, 3, dt=np.float16), dtype="fp32")
        return mb.linear(x=x, weight=wd, bias=bias)

    ops = _check(build, [((2, 3), "fp32")], EDL, "iOS16")
    assert ops == ["constexpr_affine_dequantize", "cast", "matmul"] + ([] if zero else ["add"])


def test_expand_dynamic_linear_constexpr_weight():
    def build(mb, x):
        w = mb.constexpr_affine_dequantize(quantized_data=np.arange(12, dtype=np.uint8).reshape(4, 3),
                                           zero_point=np.uint8(1), scale=np.float32(0.1), axis=0)
        return mb.linear(x=x, weight=w)

    assert _check(build, [((2, 3), "fp32")], EDL, "iOS16") == ["constexpr_affine_dequantize", "linear"]
