"""compression::palettize_weights through milkit.optimize.coreml: where coremltools is deterministic
(uniform, unique, and k-means on fp16 groups of at least 10,000 elements, which it solves exactly
with kmeans1d) the packages are coremltools' byte for byte; elsewhere milkit's exact k-means
reconstructs the weights at least as well as coremltools' scikit-learn k-means."""

from __future__ import annotations

import milkit
import milkit.optimize as mto
import numpy as np
import pytest
from support.compress_util import assert_same_package, both, ct_modules, sqnr_db


def _models(target: str, shape=(128, 160), seed=0):
    """(coremltools MLModel, milkit MLModel) with one linear of `shape` (fp16 weights)."""
    ct, mb, _ = ct_modules()
    W = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    out = []
    for B, lib in ((mb, ct), (milkit.Builder, milkit)):
        t = getattr(lib.target, target)

        @B.program(input_specs=[B.TensorSpec(shape=(1, shape[1]))], opset_version=t)
        def prog(x):
            return B.linear(x=x, weight=W, name="lin")

        kw = dict(skip_model_load=True) if lib is ct else {}
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.append(lib.convert(prog, convert_to="mlprogram", minimum_deployment_target=t, **kw))
    return out[0], out[1], W


DETERMINISTIC = [
    ("iOS16", dict(mode="uniform", nbits=4)),
    ("iOS16", dict(mode="unique", weight_threshold=100)),
    ("iOS16", dict(mode="kmeans", nbits=2)),
    ("iOS17", dict(mode="kmeans", nbits=6)),
    ("iOS18", dict(mode="kmeans", nbits=4)),
    ("iOS18", dict(mode="kmeans", nbits=3)),
    ("iOS18", dict(mode="uniform", nbits=8, granularity="per_grouped_channel", group_size=16)),
    ("iOS18", dict(mode="kmeans", nbits=4, granularity="per_grouped_channel", group_size=64)),
    ("iOS18", dict(mode="kmeans", nbits=1, granularity="per_grouped_channel", group_size=128)),
    ("iOS18", dict(mode="kmeans", nbits=4, enable_per_channel_scale=True)),
    ("iOS18", dict(mode="uniform", nbits=4, granularity="per_grouped_channel", group_size=32,
                   enable_per_channel_scale=True)),
    ("iOS18", dict(mode="uniform", nbits=2, granularity="per_grouped_channel", group_size=48)),  # skipped
    ("iOS16", dict(mode="uniform", nbits=4, granularity="per_grouped_channel", group_size=16)),  # error
]


@pytest.mark.parametrize("target,kw", DETERMINISTIC, ids=[f"{t}-{k}" for t, k in DETERMINISTIC])
def test_same_package_as_coremltools(tmp_path, target, kw):
    a, b, _ = _models(target)

    def run(mod, m):
        cfg = mod.coreml.OptimizationConfig(global_config=mod.coreml.OpPalettizerConfig(**kw))
        return mod.coreml.palettize_weights(m, cfg)

    qa, qb = both(run, a, b)
    if isinstance(qa, Exception):
        assert isinstance(qb, type(qa)), (qa, qb)
        return
    assert not isinstance(qb, Exception), qb
    assert_same_package(qa, qb, str(tmp_path))


def test_unique_vectors_as_coremltools(tmp_path):
    W = np.repeat(np.arange(8, dtype=np.float32)[:, None], 4, axis=1)
    W = np.tile(W, (16, 40))  # 128 x 160, few distinct 2-vectors along axis 0
    ct, mb, _ = ct_modules()
    a, b, _ = _models("iOS18")
    del a, b
    out = []
    for B, lib in ((mb, ct), (milkit.Builder, milkit)):
        @B.program(input_specs=[B.TensorSpec(shape=(1, 160))], opset_version=lib.target.iOS18)
        def prog(x):
            return B.linear(x=x, weight=W, name="lin")

        kw = dict(skip_model_load=True) if lib is ct else {}
        out.append(lib.convert(prog, convert_to="mlprogram", minimum_deployment_target=lib.target.iOS18, **kw))

    def run(mod, m):
        cfg = mod.coreml.OptimizationConfig(global_config=mod.coreml.OpPalettizerConfig(
            mode="unique", cluster_dim=2, granularity="per_grouped_channel", group_size=32))
        return mod.coreml.palettize_weights(m, cfg)

    qa, qb = both(run, *out)
    assert_same_package(qa, qb, str(tmp_path))


@pytest.mark.parametrize("kw", [dict(nbits=4, granularity="per_grouped_channel", group_size=16),
                                dict(nbits=2), dict(nbits=4, cluster_dim=2)])
def test_kmeans_error_at_most_coremltools(kw):
    """Small groups (under 10,000 elements): coremltools uses scikit-learn's k-means; milkit's exact
    1-D k-means (and its vector k-means) reconstruct at least as well."""
    pytest.importorskip("sklearn")
    a, b, W = _models("iOS18", shape=(64, 96))

    def run(mod, m):
        cfg = mod.coreml.OptimizationConfig(global_config=mod.coreml.OpPalettizerConfig(mode="kmeans", **kw))
        return mod.coreml.decompress_weights(mod.coreml.palettize_weights(m, cfg))

    da, db = both(run, a, b)
    ref = W.astype(np.float16).astype(np.float32)

    def weight(m):
        prog = milkit.load(m.package_path if hasattr(m, "package_path") else m.get_spec())
        return next(op.outputs[0].val for op in prog.functions["main"].operations
                    if op.op_type == "const" and op.outputs[0].shape == W.shape)

    import tempfile

    with tempfile.TemporaryDirectory() as d:
        da.save(d + "/a.mlpackage")
        wa = weight(milkit.models.MLModel(d + "/a.mlpackage"))
    wb = weight(db)
    ea, eb = sqnr_db(ref, wa), sqnr_db(ref, wb)
    slack = 0.0 if kw.get("cluster_dim", 1) == 1 else 0.5  # Lloyd from k-means++ vs sklearn's best of n_init
    assert eb >= ea - slack, (eb, ea)


def test_outputs_follow_the_palette():
    _, b, W = _models("iOS18")
    x = np.random.default_rng(2).standard_normal((1, W.shape[1])).astype(np.float32)
    ref = b.predict({"x": x})
    c = mto.coreml
    for kw, floor in [(dict(nbits=8), 35.0), (dict(nbits=4, granularity="per_grouped_channel", group_size=16), 15.0),
                      (dict(nbits=4, cluster_dim=2, granularity="per_grouped_channel", group_size=32), 9.0)]:
        q = c.palettize_weights(b, c.OptimizationConfig(global_config=c.OpPalettizerConfig(mode="kmeans", **kw)))
        got = q.predict({"x": x})
        for k in ref:
            assert sqnr_db(ref[k], got[k]) > floor, (kw, sqnr_db(ref[k], got[k]))


def test_custom_lut_function():
    _, b, W = _models("iOS18")

    def lut_function(weight):
        lut = np.linspace(weight.min(), weight.max(), 4).astype(weight.dtype)
        idx = np.abs(weight.reshape(-1, 1) - lut.reshape(1, -1)).argmin(axis=1).astype(np.uint8)
        return lut, idx

    c = mto.coreml
    q = c.palettize_weights(b, c.OptimizationConfig(global_config=c.OpPalettizerConfig(mode="custom",
                                                                                        lut_function=lut_function)))
    d = c.decompress_weights(q)
    w = next(op.outputs[0].val for op in d.get_program().functions["main"].operations
             if op.op_type == "const" and op.outputs[0].shape == W.shape)
    lut, idx = lut_function(W.astype(np.float16))
    np.testing.assert_array_equal(w, lut[idx].reshape(W.shape))
