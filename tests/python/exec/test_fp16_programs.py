"""fp16 programs run op by op as fp16: each op's result is rounded to fp16 whether it goes to an
op computing in fp32 (the interpreter may keep it as fp32 holding fp16 values), to an op reading
fp16 as it is (cast), through a view (reshape), or out of the program."""

from __future__ import annotations

import numpy as np
from milkit import Builder as mb
from support.exec_util import rand, run_prog

F16, F32 = np.float16, np.float32


def op16(f, *xs: np.ndarray) -> np.ndarray:
    """f over the fp16 values computed in fp32, rounded to fp16 (one fp16 op)."""
    return f(*(np.asarray(x).astype(F32) for x in xs)).astype(F32).astype(F16)


def test_chain_of_fp32_computing_ops_rounds_each_result() -> None:
    x = rand(3, 37, dtype=F16, lo=-3, hi=3, seed=1)
    y = rand(3, 37, dtype=F16, lo=0.5, hi=2, seed=2)
    (got,) = run_prog(lambda a, b: mb.real_div(x=mb.sub(x=mb.mul(x=mb.add(x=a, y=b), y=F16(1.37)), y=a), y=b),
                      {"x": x, "y": y})
    want = op16(np.add, x, y)
    want = op16(np.multiply, want, F16(1.37))
    want = op16(np.subtract, want, x)
    want = op16(np.true_divide, want, y)
    assert got.dtype == F16
    np.testing.assert_array_equal(got, want)
    # the rounding is not a no-op here: fp32 results differ
    exact = ((x.astype(F32) + y) * F32(F16(1.37)) - x) / y
    assert np.any(exact.astype(F16) != got) or np.any(exact != got.astype(F32))


def test_value_read_by_fp32_ops_cast_reshape_and_as_output() -> None:
    x = rand(2, 3, 5, dtype=F16, lo=-2, hi=2, seed=3)
    y = rand(2, 3, 5, dtype=F16, lo=-2, hi=2, seed=4)

    def build(a: object, b: object) -> tuple:
        s = mb.mul(x=a, y=b)                                 # read by all below
        r = mb.reshape(x=s, shape=[6, 5])                    # a view of s, computing in fp32
        t = mb.add(x=mb.reshape(x=r, shape=[2, 3, 5]), y=b)  # fp32-computing reader
        c = mb.cast(x=s, dtype="fp32")                       # reads fp16 as it is
        return mb.mul(x=t, y=F16(1.37)), c, s, mb.sigmoid(x=r)

    mul_t, c, s, sig = run_prog(build, {"x": x, "y": y})
    want_s = op16(np.multiply, x, y)
    np.testing.assert_array_equal(s, want_s)
    np.testing.assert_array_equal(c, want_s.astype(F32))
    assert c.dtype == F32 and s.dtype == F16 and mul_t.dtype == F16
    np.testing.assert_array_equal(mul_t, op16(np.multiply, op16(np.add, want_s, y), F16(1.37)))
    assert sig.dtype == F16 and sig.shape == (6, 5)
    np.testing.assert_allclose(sig.astype(F32), (1 / (1 + np.exp(-want_s.astype(F32)))).reshape(6, 5),
                               rtol=1e-3, atol=1e-3)


def test_values_moved_between_fp32_ops_keep_fp16_values() -> None:
    """transpose, reshape, slices, squeeze and expand_dims between ops computing in fp32, and a moved
    value also returned (so kept as fp16) or cast."""
    x = rand(2, 6, 5, dtype=F16, lo=-2, hi=2, seed=5)
    y = rand(2, 6, 5, dtype=F16, lo=0.5, hi=2, seed=6)

    def build(a: object, b: object) -> tuple:
        s = mb.mul(x=a, y=b)
        t = mb.transpose(x=s, perm=[0, 2, 1])                                     # (2, 5, 6)
        u = mb.slice_by_index(x=t, begin=[0, 1, 0], end=[2, 5, 6], stride=[1, 2, 1])  # (2, 2, 6)
        v = mb.expand_dims(x=mb.squeeze(x=mb.slice_by_size(x=u, begin=[1, 0, 0], size=[1, 2, 6]),
                                        axes=[0]), axes=[1])                    # (2, 1, 6)
        w = mb.real_div(x=v, y=F16(0.7))
        moved = mb.reshape(x=s, shape=[12, 5])
        return w, moved, mb.cast(x=mb.transpose(x=s, perm=[1, 0, 2]), dtype="fp32"), mb.add(x=moved, y=F16(0.1))

    w, moved, c, added = run_prog(build, {"x": x, "y": y})
    s = op16(np.multiply, x, y)
    u = s.transpose(0, 2, 1)[:, 1:5:2, :]
    np.testing.assert_array_equal(w, op16(np.true_divide, u[1][:, None, :], F16(0.7)))
    np.testing.assert_array_equal(moved, s.reshape(12, 5))
    np.testing.assert_array_equal(c, s.transpose(1, 0, 2).astype(F32))
    np.testing.assert_array_equal(added, op16(np.add, s.reshape(12, 5), F16(0.1)))
    assert w.dtype == F16 and moved.dtype == F16 and added.dtype == F16
