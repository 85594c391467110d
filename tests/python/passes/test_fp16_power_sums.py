"""common::add_fp16_cast rescales p-norms written as pow / reduce_sum / pow (core ATen's vector
norms) by the largest |x| before casting, so their powers stay within fp16's range."""

import numpy as np
from support.parity import _build, _make_symbols
from support.pass_parity import op_types

FP16 = "common::add_fp16_cast"


def _norms(mb, x):
    a = mb.sqrt(x=mb.reduce_sum(x=mb.mul(x=x, y=x), axes=[1], keep_dims=True))
    b = mb.pow(x=mb.reduce_sum(x=mb.pow(x=mb.abs(x=x), y=np.float32(3)), axes=[1]), y=np.float32(1 / 3))
    c = mb.pow(x=mb.reduce_sum(x=mb.pow(x=x, y=np.float32(4)), axes=[0, 1], keep_dims=False), y=np.float32(0.25))
    signed = mb.pow(x=mb.reduce_sum(x=mb.pow(x=x, y=np.float32(3)), axes=[1]), y=np.float32(1 / 3))  # not a norm
    return a, b, c, signed


def _run(scale):
    import milkit
    from milkit.passes import apply_passes

    specs = [((3, 16), "fp32")]
    before = _build("mk", _norms, specs, "iOS17", _make_symbols(specs))
    after = _build("mk", _norms, specs, "iOS17", _make_symbols(specs))
    apply_passes(after, [FP16], None, verify_each=True)
    x = (np.random.default_rng(0).standard_normal((3, 16)) * scale).astype(np.float32)
    return before, after, milkit.run(before, {"x": x}), milkit.run(after, {"x": x}), x


def test_power_sums_are_rescaled_and_stay_finite() -> None:
    _, after, ref, got, x = _run(300.0)
    ops = op_types(after)
    assert ops.count("reduce_max") == 6  # the scale and the outer max of each of the three norms
    want = [np.sqrt((x.astype(np.float64) ** 2).sum(1, keepdims=True)),
            (np.abs(x.astype(np.float64)) ** 3).sum(1) ** (1 / 3),
            (x.astype(np.float64) ** 4).sum() ** 0.25]
    for k, w in zip(list(got)[:3], want):
        assert np.isfinite(got[k]).all()
        np.testing.assert_allclose(got[k].astype(np.float64), w, rtol=2e-2)


def test_power_sums_keep_their_numbers() -> None:
    _, _, ref, got, _ = _run(1.0)
    for k in ref:
        np.testing.assert_allclose(got[k].astype(np.float32), ref[k], rtol=2e-2, atol=1e-2)


def test_zero_rows() -> None:
    import milkit

    _, after, _, _, _ = _run(1.0)
    out = milkit.run(after, {"x": np.zeros((3, 16), np.float32)})
    for k in list(out)[:3]:
        np.testing.assert_array_equal(out[k], 0)
