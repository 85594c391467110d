"""The DEFAULT pipeline: it holds fuse_dilated_conv, compose_conv1d, fuse_prelu,
fuse_onehot_matmul_to_gather, expand_dynamic_linear, add_conv_transpose_output_shape,
int_op_canonicalization, add_int16_cast, canonicalize_inplace_pattern and prefer_state_in_downstream,
skips no pass (and warns of none), registers every pass of coremltools' pipelines, and on a program
where those passes fire gives coremltools' program."""

import warnings

import numpy as np
from support.pass_parity import check_passes, op_types

INT16 = "common::add_int16_cast"


def _ops(prog):
    return [t for t in op_types(prog) if t != "const"]


CANON = "common::canonicalize_inplace_pattern"
PREFER = "common::prefer_state_in_downstream"

PASSES = ["common::fuse_dilated_conv", "common::compose_conv1d", "common::fuse_prelu",
        "common::fuse_onehot_matmul_to_gather", "common::expand_dynamic_linear",
        "common::add_conv_transpose_output_shape", "common::int_op_canonicalization", INT16, CANON, PREFER]


def test_default_pipeline_runs_these_passes():
    import milkit
    from milkit import Builder as mb
    from milkit.passes import pass_names

    assert set(PASSES) <= set(pass_names())
    assert set(PASSES) <= set(milkit.PassPipeline.DEFAULT.passes)

    @mb.program(input_specs=[mb.TensorSpec(shape=(2,))], opset_version=milkit.target.iOS17)
    def prog(x):
        return mb.add(x=x, y=1.0)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = milkit.convert(prog, minimum_deployment_target=milkit.target.iOS17)
    # DEFAULT skips nothing, and says nothing about skipping
    assert m.skipped_passes == []
    assert not [w for w in caught if issubclass(w.category, milkit.SkippedPassesWarning)]
    # every pass of coremltools' pipelines is registered
    from milkit.pipeline import BACKEND_MLPROGRAM_PASSES, CLEANUP_PASSES, COMMON_PASSES

    assert set(COMMON_PASSES + CLEANUP_PASSES + BACKEND_MLPROGRAM_PASSES) <= set(pass_names())


def test_default_pipeline_parity():
    """coremltools' DEFAULT pipeline (the passes milkit has) on a program where the new passes fire."""
    import milkit
    from milkit.passes import pass_names

    have = set(pass_names())
    names = [n for n in milkit.PassPipeline.DEFAULT.passes if n in have]
    rng = np.random.RandomState(0)
    w2 = rng.randn(4, 3, 3, 3).astype(np.float32)
    w1 = rng.randn(4, 4, 1, 3).astype(np.float32)
    alpha = rng.randn(4, 1, 1).astype(np.float32)
    table = rng.randn(6, 8).astype(np.float32)

    def build(mb, x, i, s):
        y = mb.space_to_batch(x=x, block_shape=[2, 2], paddings=[[2, 2], [2, 2]])
        y = mb.batch_to_space(x=mb.conv(x=y, weight=w2), block_shape=[2, 2], crops=[[0, 0], [0, 0]])
        y = mb.add(x=mb.relu(x=y), y=mb.mul(x=mb.relu(x=mb.mul(x=y, y=-1.0)), y=alpha))  # prelu
        y = mb.reduce_mean(x=y, axes=[2])  # (1, 4, 8)
        c = mb.conv(x=mb.expand_dims(x=y, axes=[2]), weight=w1, pad_type="same")
        y = mb.squeeze(x=c, axes=[2])  # (1, 4, 8)
        e = mb.matmul(x=mb.one_hot(indices=i, one_hot_vector_size=6, on_value=1.0, off_value=0.0), y=table)
        g = mb.gather(x=y, indices=i, axis=1)  # (1, 2, 8)
        r = mb.read_state(input=s)
        u = mb.add(x=r, y=mb.cast(x=mb.reduce_sum(x=e, axes=[0], keep_dims=True), dtype="fp16"))
        out = mb.add(x=g, y=mb.cast(x=u, dtype="fp32"))
        mb.coreml_update_state(state=s, value=u)
        return out

    specs = [((1, 3, 8, 8), "fp32"), ((2,), "int32"), ((1, 8), "fp16", "state")]
    # (numbers: one_hot gives zeros for indices outside [0, 6) where the gather it becomes wraps or
    # fails, and add_int16_cast wraps negative ones)
    cp, mp = check_passes(build, specs, names, opset="iOS18", numbers=False)
    ops = _ops(mp)
    assert _ops(cp) == ops
    for gone in ("space_to_batch", "expand_dims", "one_hot", "mul"):
        assert gone not in ops
    assert "prelu" in ops and "gather" in ops
