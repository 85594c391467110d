"""compression::prune_weights through milkit.optimize.coreml: packages byte-identical to
coremltools' for threshold, magnitude, block and n:m pruning at iOS16-18, its skips and its
errors."""

from __future__ import annotations

import milkit.optimize as mto
import numpy as np
import pytest
from support.compress_util import assert_same_package, both, convert_both, sqnr_db

CONFIGS = [
    ("OpThresholdPrunerConfig", dict(threshold=0.3, minimum_sparsity_percentile=0.1)),
    ("OpThresholdPrunerConfig", dict(threshold=0.01)),  # too little sparsity: skipped
    ("OpMagnitudePrunerConfig", dict(target_sparsity=0.5)),
    ("OpMagnitudePrunerConfig", dict(target_sparsity=0.75, weight_threshold=100)),
    ("OpMagnitudePrunerConfig", dict(target_sparsity=1.0)),
    ("OpMagnitudePrunerConfig", dict(target_sparsity=0.0)),
    ("OpMagnitudePrunerConfig", dict(target_sparsity=0.5, block_size=2)),
    ("OpMagnitudePrunerConfig", dict(target_sparsity=0.4, block_size=4, dim=1)),
    ("OpMagnitudePrunerConfig", dict(target_sparsity=0.5, block_size=40)),  # block too large: skipped
    ("OpMagnitudePrunerConfig", dict(n_m_ratio=(2, 4))),
    ("OpMagnitudePrunerConfig", dict(n_m_ratio=(1, 3), dim=0)),
    ("OpMagnitudePrunerConfig", dict(n_m_ratio=(3, 7))),
]


@pytest.mark.parametrize("target", ["iOS16", "iOS18"])
@pytest.mark.parametrize("cls,kw", CONFIGS, ids=[f"{c}-{k}" for c, k in CONFIGS])
def test_same_package_as_coremltools(tmp_path, target, cls, kw):
    a, b = convert_both(target)

    def run(mod, m):
        cfg = mod.coreml.OptimizationConfig(global_config=getattr(mod.coreml, cls)(**kw))
        return mod.coreml.prune_weights(m, cfg)

    qa, qb = both(run, a, b)
    if isinstance(qa, Exception):
        assert isinstance(qb, type(qa)), (qa, qb)
        return
    assert not isinstance(qb, Exception), qb
    assert_same_package(qa, qb, str(tmp_path))


def test_structural_pruning_of_a_matmul_weight_needs_its_name(tmp_path):
    a, b = convert_both("iOS18")
    from milkit import load

    name = next(op.name for op in load(b.package_path).functions["main"].operations
                if op.op_type == "const" and op.name.startswith("mm_y"))

    def run(mod, m):
        c = mod.coreml
        cfg = c.OptimizationConfig(global_config=c.OpMagnitudePrunerConfig(n_m_ratio=(1, 2)),
                                   op_name_configs={name: c.OpMagnitudePrunerConfig(n_m_ratio=(1, 4))})
        return c.prune_weights(m, cfg)

    qa, qb = both(run, a, b)
    assert_same_package(qa, qb, str(tmp_path))


def test_outputs_follow_the_pruned_weights():
    _, b = convert_both("iOS18")
    rng = np.random.default_rng(1)
    feed = {"img": rng.standard_normal((1, 8, 6, 12)).astype(np.float32),
            "x": rng.standard_normal((2, 96)).astype(np.float32)}
    ref = b.predict(feed)
    c = mto.coreml
    q = c.prune_weights(b, c.OptimizationConfig(global_config=c.OpMagnitudePrunerConfig(target_sparsity=0.1)))
    got = q.predict(feed)
    for k in ref:
        assert sqnr_db(ref[k], got[k]) > 8.0, (k, sqnr_db(ref[k], got[k]))
