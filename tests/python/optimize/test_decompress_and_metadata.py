"""decompress_weights and get_weights_metadata: the same results as coremltools' on milkit's
compressed packages and on coremltools' own."""

from __future__ import annotations

import milkit
import milkit.optimize as mto
import numpy as np
import pytest
from support.compress_util import assert_same_package, both, convert_both


def _quantize(mod, m, **kw):
    c = mod.coreml
    return c.linear_quantize_weights(m, c.OptimizationConfig(global_config=c.OpLinearQuantizerConfig(**kw)))


@pytest.mark.parametrize("target,kw", [("iOS16", {}), ("iOS18", dict(dtype="int4", granularity="per_block",
                                                                    block_size=16, mode="linear"))])
def test_decompress_as_coremltools(tmp_path, target, kw):
    a, b = convert_both(target)
    qa, qb = both(lambda mod, m: _quantize(mod, m, **kw), a, b)
    da, db = both(lambda mod, m: mod.coreml.decompress_weights(m), qa, qb)
    assert_same_package(da, db, str(tmp_path))
    ops = {op.op_type for op in db.get_program().functions["main"].operations}
    assert not any(t.startswith("constexpr") for t in ops)


def test_decompress_reads_coremltools_packages(tmp_path):
    """coremltools' compressed package decompressed by milkit gives what coremltools' gives."""
    a, _ = convert_both("iOS18")
    qa, _ = both(lambda mod, m: _quantize(mod, m, dtype="uint4", mode="linear", granularity="per_block",
                                          block_size=8), a, a)
    qa.save(str(tmp_path / "ct_q.mlpackage"))
    from support.compress_util import ct_modules

    ct, _, cto = ct_modules()
    ref = cto.coreml.decompress_weights(qa)
    mine = mto.coreml.decompress_weights(milkit.models.MLModel(str(tmp_path / "ct_q.mlpackage")))
    assert_same_package(ref, mine, str(tmp_path))


def test_weights_metadata_as_coremltools():
    a, b = convert_both("iOS18")
    ma, mb_ = both(lambda mod, m: mod.coreml.get_weights_metadata(m, weight_threshold=100), a, b)
    assert list(ma) == list(mb_)
    for k in ma:
        np.testing.assert_array_equal(ma[k].val, mb_[k].val)
        assert ma[k].sparsity == mb_[k].sparsity
        assert ma[k].unique_values == mb_[k].unique_values
        assert [str(c) for c in ma[k].child_ops] == [str(c) for c in mb_[k].child_ops]
    assert str(mb_) == str(ma)
