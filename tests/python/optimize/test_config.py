"""milkit.optimize.coreml's configs against coremltools': the same defaults, the same exception
type and message for each invalid setting, and the same structures from a dict or a YAML file."""

from __future__ import annotations

import milkit.optimize as mto
import numpy as np
import pytest
from support.compress_util import ct_modules

BAD = [
    ("OpPalettizerConfig", dict(nbits=5)),
    ("OpPalettizerConfig", dict(mode="kmeans")),
    ("OpPalettizerConfig", dict(mode="unique", nbits=4)),
    ("OpPalettizerConfig", dict(mode="custom")),
    ("OpPalettizerConfig", dict(mode="kmeans", nbits=4, lut_function=len)),
    ("OpPalettizerConfig", dict(mode="bogus", nbits=4)),
    ("OpPalettizerConfig", dict(nbits=4, granularity="per_channel")),
    ("OpPalettizerConfig", dict(nbits=4, granularity="per_row")),
    ("OpLinearQuantizerConfig", dict(mode="affine")),
    ("OpLinearQuantizerConfig", dict(dtype="int16")),
    ("OpLinearQuantizerConfig", dict(dtype="int2")),
    ("OpLinearQuantizerConfig", dict(dtype=np.int32)),
    ("OpLinearQuantizerConfig", dict(granularity="per_grouped_channel")),
    ("OpLinearQuantizerConfig", dict(block_size=-1)),
    ("OpLinearQuantizerConfig", dict(block_size=[1, -2])),
    ("OpLinearQuantizerConfig", dict(weight_threshold=-3)),
    ("OpMagnitudePrunerConfig", dict()),
    ("OpMagnitudePrunerConfig", dict(target_sparsity=0.5, n_m_ratio=(1, 2))),
    ("OpMagnitudePrunerConfig", dict(target_sparsity=1.5)),
    ("OpMagnitudePrunerConfig", dict(target_sparsity=0.5, block_size=1)),
    ("OpMagnitudePrunerConfig", dict(n_m_ratio=(3, 2))),
    ("OpMagnitudePrunerConfig", dict(target_sparsity=0.5, dim=1)),
    ("OpMagnitudePrunerConfig", dict(n_m_ratio=(1, 2), dim=2)),
    ("OpThresholdPrunerConfig", dict(threshold=-1.0)),
    ("OpThresholdPrunerConfig", dict(minimum_sparsity_percentile=2.0)),
]


def _build(mod, name, kw):
    try:
        return getattr(mod.coreml, name)(**kw)
    except Exception as e:  # compared by the caller
        return e


@pytest.mark.parametrize("name,kw", BAD, ids=[f"{n}-{k}" for n, k in BAD])
def test_invalid_settings_raise_as_coremltools(name, kw):
    _, _, cto = ct_modules()
    a, b = _build(cto, name, kw), _build(mto, name, kw)
    assert isinstance(a, Exception) and isinstance(b, Exception), (a, b)
    assert isinstance(b, ValueError) == isinstance(a, ValueError), (a, b)
    # the message names the same setting
    for word in ("nbits", "mode", "lut_function", "granularity", "dtype", "block_size", "weight_threshold",
                 "target_sparsity", "n_m_ratio", "dim", "threshold", "minimum_sparsity_percentile"):
        if f'"{word}"' in str(a) or f"'{word}'" in str(a):
            assert word in str(b), (a, b)


@pytest.mark.parametrize("name,kw", [
    ("OpLinearQuantizerConfig", dict()),
    ("OpPalettizerConfig", dict(nbits=4)),
    ("OpPalettizerConfig", dict(mode="unique", granularity="per_grouped_channel", group_size=8)),
    ("OpMagnitudePrunerConfig", dict(target_sparsity=0.5, block_size=2)),
    ("OpMagnitudePrunerConfig", dict(n_m_ratio=(2, 4))),
    ("OpThresholdPrunerConfig", dict()),
])
def test_defaults_as_coremltools(name, kw):
    _, _, cto = ct_modules()
    a, b = getattr(cto.coreml, name)(**kw), getattr(mto.coreml, name)(**kw)
    for field in b._FIELDS:
        va, vb = getattr(a, field), getattr(b, field)
        if field == "dtype":
            from coremltools.converters.mil.mil import types as ctypes

            assert ctypes.builtin_to_string(va) == str(vb)
        elif field == "granularity":
            assert va.name == vb.name
        elif field == "n_m_ratio":
            assert (tuple(va) if va is not None else None) == vb
        else:
            assert va == vb, (field, va, vb)


def test_structural_pruning_refuses_other_op_types():
    c = mto.coreml
    with pytest.raises(ValueError, match="does not support op type matmul"):
        c.OptimizationConfig(op_type_configs={"matmul": c.OpMagnitudePrunerConfig(n_m_ratio=(1, 2))})
    cfg = c.OptimizationConfig()
    with pytest.raises(ValueError, match="does not support op type add"):
        cfg.set_op_type("add", c.OpMagnitudePrunerConfig(target_sparsity=0.5, block_size=2))


def test_from_dict_and_yaml(tmp_path):
    d = {
        "config_type": "OpThresholdPrunerConfig",
        "global_config": {"threshold": 0.01},
        "op_type_configs": {"conv": {"config_type": "OpMagnitudePrunerConfig", "n_m_ratio": [3, 4]}},
        "op_name_configs": {"lin": None},
    }
    cfg = mto.coreml.OptimizationConfig.from_dict(d)
    assert cfg.global_config == mto.coreml.OpThresholdPrunerConfig(threshold=0.01)
    assert cfg.op_type_configs["conv"].n_m_ratio == (3, 4) and cfg.op_type_configs["conv"].dim == 1
    assert cfg.op_name_configs == {"lin": None}
    pytest.importorskip("yaml")
    y = tmp_path / "c.yaml"
    y.write_text("config_type: OpPalettizerConfig\nglobal_config:\n  mode: kmeans\n  nbits: 4\n"
                 "  granularity: per_grouped_channel\n  group_size: 16\nop_type_configs:\n  conv:\n"
                 "    mode: uniform\n    nbits: 1\n")
    cfg = mto.coreml.OptimizationConfig.from_yaml(str(y))
    assert cfg.global_config.group_size == 16 and cfg.op_type_configs["conv"].mode == "UNIFORM"
    with open(y) as f:
        assert mto.coreml.OptimizationConfig.from_yaml(f) == cfg


def test_from_dict_refuses_bad_structures():
    for bad, match in [({"global_config": {}}, "config_type must be provided"),
                       ({"config_type": "OpPalettizerConfig", "extra": 1}, "Invalid key extra"),
                       ({"config_type": "OpPalettizerConfig", "global_config": {"nbits": 4, "typo": 1}}, "typo"),
                       ({"config_type": "OpPalettizerConfig", "global_config": {"mode": "custom",
                                                                                "lut_function": "f"}},
                        "does not support lut_function")]:
        with pytest.raises(ValueError, match=match):
            mto.coreml.OptimizationConfig.from_dict(bad)


def test_reachable_as_milkit_optimize():
    import milkit

    assert milkit.optimize.coreml.OpPalettizerConfig is mto.coreml.OpPalettizerConfig
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        milkit.nonexistent  # noqa: B018
