"""Parity of batch_norm, instance_norm, layer_norm, l2_norm and local_response_norm with coremltools."""

import milkit
import numpy as np
import pytest
from milkit import Builder as mb_mk
from milkit import types as mk_types
from support.parity import ALL_OPSETS, check, check_error

C = np.linspace(0.5, 1.5, 3).astype(np.float32)
C16 = C.astype(np.float16)


def mk_build(build, specs, opset="iOS17"):
    """Builds with milkit only (cases where coremltools is wrong); returns the ops."""
    in_specs = [mb_mk.TensorSpec(shape=tuple(milkit.get_new_symbol(d) if isinstance(d, str) else d for d in s),
                                 dtype=getattr(mk_types, t)) for s, t in specs]
    names = [f"x{i}" if i else "x" for i in range(len(specs))]
    ns = {"build": build, "mb": mb_mk}
    exec(f"def main({', '.join(names)}):\n    return build(mb, {', '.join(names)})\n", ns)
    prog = mb_mk.program(input_specs=in_specs, opset_version=getattr(milkit.target, opset))(ns["main"])
    return list(prog.functions["main"].operations)


# ------------------------------------------------------------------------------------ batch_norm


@pytest.mark.parametrize("shape", [("N", 3, 8), (2, 3, "H", "W"), (1, 3, 2, 2, 2)])
@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_batch_norm(shape, dtype):
    c = C16 if dtype == "fp16" else C
    eps = np.float16(1e-3) if dtype == "fp16" else 1e-3
    check(lambda mb, x: mb.batch_norm(x=x, mean=c, variance=c), [(shape, dtype)], ALL_OPSETS)
    check(lambda mb, x: mb.batch_norm(x=x, mean=c, variance=c, gamma=c, beta=c, epsilon=eps), [(shape, dtype)],
          ALL_OPSETS)
    check(lambda mb, x: mb.batch_norm(x=x, mean=c, variance=c, beta=c), [(shape, dtype)], ALL_OPSETS)


def test_batch_norm_ios17_mixed():
    # iOS17: the parameters (domain U) may differ from x (domain T), but share one dtype
    check(lambda mb, x: mb.batch_norm(x=x, mean=C, variance=C, gamma=C, epsilon=np.float32(1e-3)),
          [((1, 3, 4), "fp16")], ["iOS17", "iOS18"])
    check(lambda mb, x: mb.batch_norm(x=x, mean=C16, variance=C16), [((1, 3, 4), "fp32")], ["iOS17", "iOS18"])
    check_error(lambda mb, x: mb.batch_norm(x=x, mean=C, variance=C), [((1, 3, 4), "fp16")], "iOS16",
                match=r"batch_norm 'batch_norm_0'.*'mean'.*fp32")
    check_error(lambda mb, x: mb.batch_norm(x=x, mean=C, variance=C, epsilon=np.float16(1e-3)),
                [((1, 3, 4), "fp16")], match=r"'epsilon'.*epsilon has dtype fp16 whereas mean has dtype fp32")


def test_batch_norm_errors():
    check_error(lambda mb, x, m: mb.batch_norm(x=x, mean=m, variance=C), [((1, 3, 4), "fp32"), ((3,), "fp32")],
                match=r"batch_norm 'batch_norm_0'.*'mean'.*constant")
    check_error(lambda mb, x: mb.batch_norm(x=x, mean=C.astype(np.int32), variance=C.astype(np.int32)),
                [((1, 3, 4), "int32")], match=r"'x'.*int32")


def test_batch_norm_not_folded():
    # coremltools has no value inference for batch_norm
    check(lambda mb, _: mb.batch_norm(x=np.ones((1, 3, 2), np.float32), mean=C, variance=C), [((1,), "fp32")],
          ["iOS17"])
    ops = mk_build(lambda mb, _: mb.batch_norm(x=np.ones((1, 3, 2), np.float32), mean=C, variance=C),
                   [((1,), "fp32")])
    assert ops[-1].outputs[0].val is None


# coremltools does not check the parameter sizes of batch_norm / instance_norm against the
# channel dim C = x.shape[1]; the op definition requires [C], so milkit reports a provable
# mismatch (asserted on milkit alone).
def test_channel_param_mismatch_is_reported():
    with pytest.raises(ValueError, match=r"batch_norm 'batch_norm_0'.*'mean' has length 4 but x \(shape \(2, 3, 4\)\) has C = 3"):
        mk_build(lambda mb, x: mb.batch_norm(x=x, mean=np.ones(4, np.float32), variance=C), [((2, 3, 4), "fp32")])
    with pytest.raises(ValueError, match=r"instance_norm 'instance_norm_0'.*'gamma' must have rank 1"):
        mk_build(lambda mb, x: mb.instance_norm(x=x, gamma=np.ones((1, 3), np.float32)), [((2, 3, 4), "fp32")])
    # a symbolic C cannot be disproved
    mk_build(lambda mb, x: mb.batch_norm(x=x, mean=np.ones(4, np.float32), variance=np.ones(4, np.float32)),
             [((2, "C", 4), "fp32")])


# --------------------------------------------------------------------------------- instance_norm


@pytest.mark.parametrize("shape", [("N", 3, 8), (2, 3, "H", "W")])
@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_instance_norm(shape, dtype):
    c = C16 if dtype == "fp16" else C
    check(lambda mb, x: mb.instance_norm(x=x), [(shape, dtype)], ALL_OPSETS)
    check(lambda mb, x: mb.instance_norm(x=x, gamma=c, beta=c), [(shape, dtype)], ALL_OPSETS)
    check(lambda mb, x: mb.instance_norm(x=x, gamma=c, epsilon=np.float16(1e-2) if dtype == "fp16" else 1e-2),
          [(shape, dtype)], ALL_OPSETS)


def test_instance_norm_ios17_mixed():
    check(lambda mb, x: mb.instance_norm(x=x, gamma=C16, beta=C16, epsilon=np.float16(1e-3)),
          [((1, 3, 4, 4), "fp32")], ["iOS17", "iOS18"])
    check_error(lambda mb, x: mb.instance_norm(x=x, gamma=C16), [((1, 3, 4, 4), "fp32")], "iOS15",
                match=r"instance_norm 'instance_norm_0'.*'gamma'.*fp16")


# --------------------------------------------------------------------------------------- l2_norm


@pytest.mark.parametrize("shape", [(3, 4, 5), ("N", 3, 4, 5), (2, "S", 3, 4, 5)])
@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_l2_norm(shape, dtype):
    check(lambda mb, x: mb.l2_norm(x=x), [(shape, dtype)], ALL_OPSETS)


def test_l2_norm_epsilon_and_mixed():
    check(lambda mb, x: mb.l2_norm(x=x, epsilon=1e-3), [((1, 3, 4), "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.l2_norm(x=x, epsilon=np.float16(1e-3)), [((1, 3, 4), "fp16")], ALL_OPSETS)
    check(lambda mb, x: mb.l2_norm(x=x, epsilon=np.float32(1e-3)), [((1, 3, 4), "fp16")], ["iOS17", "iOS18"])
    check_error(lambda mb, x: mb.l2_norm(x=x, epsilon=np.float32(1e-3)), [((1, 3, 4), "fp16")], "iOS16",
                match=r"'epsilon'.*fp32")


def test_l2_norm_fold():
    v = np.arange(24, dtype=np.float32).reshape(2, 1, 3, 4) - 5
    check(lambda mb, _: mb.l2_norm(x=v), [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, _: mb.l2_norm(x=v[0], epsilon=1.0), [((1,), "fp32")], ["iOS17"])
    check(lambda mb, _: mb.l2_norm(x=v.reshape(2, 1, 1, 3, 4)), [((1,), "fp32")], ["iOS17"])
    check(lambda mb, _: mb.l2_norm(x=v.astype(np.float16)), [((1,), "fp32")], ["iOS17"], rtol=2e-3)


def test_l2_norm_rank_error():
    check_error(lambda mb, x: mb.l2_norm(x=x), [((3, 4), "fp32")], match=r"l2_norm 'l2_norm_0'.*rank >= 3, got rank 2")


# ------------------------------------------------------------------------------------ layer_norm


@pytest.mark.parametrize("axes", [[-1], [2], [1, 2], [0, 2], [-2, -1], [2, 1], [0, 1, 2], []])
@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_layer_norm_axes(axes, dtype):
    check(lambda mb, x: mb.layer_norm(x=x, axes=np.array(axes, np.int32)), [(("S", 3, 4), dtype)], ALL_OPSETS)


def test_layer_norm_gamma_beta():
    g = np.linspace(0.5, 2.0, 12).astype(np.float32).reshape(3, 4)
    b = g[::-1].copy()
    check(lambda mb, x: mb.layer_norm(x=x, axes=[1, 2], gamma=g, beta=b), [(("S", 3, 4), "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.layer_norm(x=x, axes=[-1], gamma=g[0], epsilon=1e-3), [(("S", 3, 4), "fp32")],
          ALL_OPSETS)
    # axes listed out of order: gamma still has shape x.shape[sorted(axes)]
    check(lambda mb, x: mb.layer_norm(x=x, axes=[2, 1], gamma=g), [(("S", 3, 4), "fp32")], ALL_OPSETS)
    # a symbolic normalized dim accepts any gamma size
    check(lambda mb, x: mb.layer_norm(x=x, axes=[0, 2], gamma=np.ones((7, 4), np.float32)),
          [(("S", 3, 4), "fp32")], ALL_OPSETS)


def test_layer_norm_ios17_mixed():
    g = np.ones(4, np.float16)
    check(lambda mb, x: mb.layer_norm(x=x, axes=[-1], gamma=g, beta=g, epsilon=np.float16(1e-5)),
          [((2, 3, 4), "fp32")], ["iOS17", "iOS18"])
    check(lambda mb, x: mb.layer_norm(x=x, axes=[-1], gamma=np.ones(4, np.float32)), [((2, 3, 4), "fp16")],
          ["iOS17", "iOS18"])
    check_error(lambda mb, x: mb.layer_norm(x=x, axes=[-1], gamma=g), [((2, 3, 4), "fp32")], "iOS16",
                match=r"layer_norm 'layer_norm_0'.*'gamma'.*fp16")


def test_layer_norm_fold():
    v = np.arange(24, dtype=np.float32).reshape(2, 3, 4) ** 1.5
    g = np.linspace(0.5, 2.0, 12).astype(np.float32).reshape(3, 4)
    check(lambda mb, _: mb.layer_norm(x=v, axes=[-1]), [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, _: mb.layer_norm(x=v, axes=[2, 1], gamma=g, beta=g), [((1,), "fp32")], ["iOS17"])
    check(lambda mb, _: mb.layer_norm(x=v, axes=[0, 2], gamma=g[:2, :], epsilon=1.0), [((1,), "fp32")],
          ["iOS17"])
    check(lambda mb, _: mb.layer_norm(x=v, axes=np.zeros(0, np.int32), gamma=np.float32(2.0), beta=np.float32(0.5)), [((1,), "fp32")],
          ["iOS17"])
    check(lambda mb, _: mb.layer_norm(x=(v / 10).astype(np.float16), axes=[1]), [((1,), "fp32")], ["iOS17"],
          rtol=5e-3)


def test_layer_norm_errors():
    check_error(lambda mb, x: mb.layer_norm(x=x, axes=[3]), [(("S", 3, 4), "fp32")],
                match=r"layer_norm 'layer_norm_0'.*'axes' = 3 is out of range for x of rank 3")
    check_error(lambda mb, x: mb.layer_norm(x=x, axes=[-4]), [(("S", 3, 4), "fp32")], match=r"out of range")
    check_error(lambda mb, x: mb.layer_norm(x=x, axes=[-1], gamma=np.ones(3, np.float32)), [(("S", 3, 4), "fp32")],
                match=r"'gamma' has shape \(3,\) but x.shape\[axes\] is \(4,\)")
    check_error(lambda mb, x: mb.layer_norm(x=x, axes=[1, 2], gamma=np.ones(12, np.float32)),
                [(("S", 3, 4), "fp32")], match=r"'gamma' has shape \(12,\) but x.shape\[axes\] is \(3, 4\)")


# coremltools 9.0 cannot build layer_norm without axes ("Cannot add const range(0, 3)"), checks
# beta against gamma's shape (so a wrong beta passes) and crashes when only beta is given. The op
# definition: axes defaults to every axis, beta has shape x.shape[axes]; milkit implements it.
def test_layer_norm_default_axes():
    ops = mk_build(lambda mb, x: mb.layer_norm(x=x), [(("S", 3, 4), "fp32")])
    assert [o.name for o in ops] == ["layer_norm_0_axes_0", "layer_norm_0_epsilon_0", "layer_norm_0"]
    np.testing.assert_array_equal(ops[0].outputs[0].val, [0, 1, 2])
    assert ops[0].outputs[0].dtype.__name__ == "int32"
    assert ops[-1].outputs[0].shape[1:] == (3, 4)
    v = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = mk_build(lambda mb, _: mb.layer_norm(x=v), [((1,), "fp32")])[-1].outputs[0]
    np.testing.assert_allclose(out.val, (v - v.mean()) / np.sqrt(v.var() + 1e-5), rtol=1e-5)


def test_layer_norm_beta_checked_against_x():
    with pytest.raises(ValueError, match=r"'beta' has shape \(3,\) but x.shape\[axes\] is \(4,\)"):
        mk_build(lambda mb, x: mb.layer_norm(x=x, axes=[-1], gamma=np.ones(4, np.float32),
                                             beta=np.ones(3, np.float32)), [(("S", 3, 4), "fp32")])
    ops = mk_build(lambda mb, x: mb.layer_norm(x=x, axes=[-1], beta=np.ones(4, np.float32)),
                   [(("S", 3, 4), "fp32")])
    assert [o.name for o in ops] == ["layer_norm_0_axes_0", "layer_norm_0_beta_0", "layer_norm_0_epsilon_0",
                                     "layer_norm_0"]


# --------------------------------------------------------------------------- local_response_norm


@pytest.mark.parametrize("shape", [("N", 3, 8), (2, 5, "H", "W")])
@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_local_response_norm(shape, dtype):
    check(lambda mb, x: mb.local_response_norm(x=x, size=3), [(shape, dtype)], ALL_OPSETS)
    f = np.float16 if dtype == "fp16" else np.float32
    check(lambda mb, x: mb.local_response_norm(x=x, size=5, alpha=f(1e-3), beta=f(0.5), k=f(2.0)),
          [(shape, dtype)], ALL_OPSETS)
    check(lambda mb, x: mb.local_response_norm(x=x, size=5, k=f(2.0)), [(shape, dtype)], ALL_OPSETS)


def test_local_response_norm_mixed_and_errors():
    check(lambda mb, x: mb.local_response_norm(x=x, size=3, alpha=np.float32(1e-3), beta=np.float32(0.5),
                                               k=np.float32(2.0)), [((1, 3, 4), "fp16")], ["iOS17", "iOS18"])
    check_error(lambda mb, x: mb.local_response_norm(x=x, size=3, alpha=np.float32(1e-3)), [((1, 3, 4), "fp16")],
                "iOS16", match=r"'alpha'.*fp32")
    check_error(lambda mb, x: mb.local_response_norm(x=x), [((1, 3, 4), "fp32")],
                match=r"local_response_norm 'local_response_norm_0'.*missing required input 'size'")
    check_error(lambda mb, x: mb.local_response_norm(x=x, size=3.0), [((1, 3, 4), "fp32")], match=r"'size'.*fp32")
