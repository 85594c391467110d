"""joint_compression=True: a compressed model compressed again (prune then palettize or quantize,
palettize then quantize its LUT, quantize then palettize its data, quantize or palettize then
prune), packages byte-identical to coremltools', and its refusals."""

from __future__ import annotations

import milkit.optimize as mto
import numpy as np
import pytest
from support.compress_util import assert_same_package, both, ct_modules, sqnr_db

from .test_palettize import _models


def _cfg(c, cls, **kw):
    return c.OptimizationConfig(global_config=getattr(c, cls)(**kw))


def _prune(mod, m):
    c = mod.coreml
    return c.prune_weights(m, _cfg(c, "OpMagnitudePrunerConfig", target_sparsity=0.5))


def _palettize(mod, m, joint=False, **kw):
    c = mod.coreml
    return c.palettize_weights(m, _cfg(c, "OpPalettizerConfig", **(kw or dict(mode="uniform", nbits=4))),
                               joint_compression=joint)


def _quantize(mod, m, joint=False, **kw):
    c = mod.coreml
    return c.linear_quantize_weights(m, _cfg(c, "OpLinearQuantizerConfig", **kw), joint_compression=joint)


CHAINS = {
    "prune-palettize": (_prune, lambda mod, m: _palettize(mod, m, True)),
    "prune-palettize-kmeans": (_prune, lambda mod, m: _palettize(mod, m, True, mode="kmeans", nbits=3)),
    "prune-quantize": (_prune, lambda mod, m: _quantize(mod, m, True)),
    "prune-quantize-int4-block": (_prune, lambda mod, m: _quantize(mod, m, True, dtype="int4", granularity="per_block",
                                                                      block_size=32)),
    "palettize-quantize": (lambda mod, m: _palettize(mod, m, mode="kmeans", nbits=4),
                           lambda mod, m: _quantize(mod, m, True, granularity="per_tensor")),
    "palettize-grouped-quantize": (lambda mod, m: _palettize(mod, m, mode="uniform", nbits=4,
                                                             granularity="per_grouped_channel", group_size=32),
                                   lambda mod, m: _quantize(mod, m, True, granularity="per_tensor", mode="linear")),
    "quantize-palettize": (lambda mod, m: _quantize(mod, m),
                           lambda mod, m: _palettize(mod, m, True, mode="unique")),
    "quantize-prune": (lambda mod, m: _quantize(mod, m, dtype="int4", granularity="per_block", block_size=16),
                       lambda mod, m: mod.coreml.prune_weights(m, _cfg(mod.coreml, "OpMagnitudePrunerConfig",
                                                                       target_sparsity=0.3), joint_compression=True)),
    "palettize-prune": (lambda mod, m: _palettize(mod, m, mode="uniform", nbits=4),
                        lambda mod, m: mod.coreml.prune_weights(m, _cfg(mod.coreml, "OpThresholdPrunerConfig",
                                                                        threshold=0.6, minimum_sparsity_percentile=0.1),
                                                                joint_compression=True)),
}


@pytest.mark.parametrize("chain", list(CHAINS))
def test_same_package_as_coremltools(tmp_path, chain):
    first, second = CHAINS[chain]
    a, b, W = _models("iOS18")
    fa, fb = both(first, a, b)
    assert not isinstance(fa, Exception) and not isinstance(fb, Exception), (fa, fb)
    sa, sb = both(second, fa, fb)
    assert not isinstance(sa, Exception) and not isinstance(sb, Exception), (sa, sb)
    assert_same_package(sa, sb, str(tmp_path))
    ops = [op.op_type for op in sb.get_program().functions["main"].operations if op.op_type.startswith("constexpr")]
    assert len(ops) >= 2, ops  # compressed twice
    x = np.random.default_rng(0).standard_normal((1, W.shape[1])).astype(np.float32)
    ref, got = b.predict({"x": x}), sb.predict({"x": x})
    assert all(sqnr_db(ref[k], got[k]) > 2.0 for k in ref)


def test_joint_needs_ios18():
    _, _, cto = ct_modules()
    a, b, _ = _models("iOS17")
    fa, fb = both(_prune, a, b)
    sa, sb = both(lambda mod, m: _quantize(mod, m, True), fa, fb)
    assert isinstance(sa, ValueError) and isinstance(sb, ValueError)
    assert "Joint compression is only supported since iOS18" in str(sb)
    del cto


def test_joint_flag_must_be_a_bool():
    _, b, _ = _models("iOS18")
    c = mto.coreml
    with pytest.raises(ValueError, match="joint_compression only supports bool"):
        c.prune_weights(b, _cfg(c, "OpMagnitudePrunerConfig", target_sparsity=0.5), joint_compression="yes")
