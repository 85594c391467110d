"""``milkit compress``: each kind of compression from flags or a coremltools YAML config, what
``milkit info`` then shows, and bad input as one-line errors."""

from __future__ import annotations

import json

import milkit
import numpy as np
import pytest
from milkit import Builder as mb
from milkit.cli import main


@pytest.fixture(scope="module")
def pkg(tmp_path_factory):
    rng = np.random.default_rng(0)
    W = rng.standard_normal((64, 64)).astype(np.float32)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 64))], opset_version=milkit.target.iOS18)
    def prog(x):
        return mb.linear(x=x, weight=W, name="lin")

    path = str(tmp_path_factory.mktemp("cli") / "m.mlpackage")
    milkit.convert(prog, minimum_deployment_target=milkit.target.iOS18).save(path)
    return path


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("flags,op,bits", [
    (["--palettize", "4"], "lut_to_dense", 4),
    (["--palettize", "2", "--granularity", "per_grouped_channel", "--group-size", "16"], "lut_to_dense", 2),
    (["--quantize", "int8"], "blockwise_shift_scale", 8),
    (["--quantize", "uint4", "--granularity", "per_block", "--block-size", "16", "--mode", "linear"],
     "blockwise_shift_scale", 4),
    (["--prune", "0.5"], "sparse_to_dense", None),
    (["--n-m", "2:4"], "sparse_to_dense", None),
])
def test_compress_from_flags(capsys, tmp_path, pkg, flags, op, bits):
    out = tmp_path / "c.mlpackage"
    code, text, err = cli(capsys, "compress", pkg, "-o", out, *flags)
    assert code == 0, err
    assert "1 compressed weight op" in text
    code, info, _ = cli(capsys, "info", out, "--json")
    cws = json.loads(info)["functions"][0]["compressed_weights"]
    assert len(cws) == 1 and cws[0]["ops"][0]["op"] == "constexpr_" + op
    assert cws[0]["ops"][0]["bits"] == bits
    assert cws[0]["compressed_bytes"] < cws[0]["dense_bytes"]
    code, info, _ = cli(capsys, "info", out)
    assert "compressed weights: 1" in info and "lin_weight" in info
    x = np.random.default_rng(1).standard_normal((1, 64)).astype(np.float32)
    ref = milkit.models.MLModel(pkg).predict({"x": x})["lin"]
    got = milkit.models.MLModel(str(out)).predict({"x": x})["lin"]
    assert np.abs(ref - got).max() < np.abs(ref).max()  # a compressed linear, not garbage


def test_compress_from_yaml(capsys, tmp_path, pkg):
    pytest.importorskip("yaml")
    y = tmp_path / "c.yaml"
    y.write_text("config_type: OpPalettizerConfig\nglobal_config:\n  mode: uniform\n  nbits: 6\n")
    code, text, err = cli(capsys, "compress", pkg, "-o", tmp_path / "c.mlpackage", "--config", y)
    assert code == 0, err
    prog = milkit.load(str(tmp_path / "c.mlpackage"))
    assert [o.op_type for o in prog.functions["main"].operations if o.op_type.startswith("constexpr")] == \
        ["constexpr_lut_to_dense"]


def test_bad_input(capsys, tmp_path, pkg):
    code, _, err = cli(capsys, "compress", tmp_path / "missing.mlpackage", "-o", tmp_path / "o.mlpackage",
                       "--quantize", "int8")
    assert code == 1 and "missing.mlpackage: not an .mlpackage directory" in err
    code, _, err = cli(capsys, "compress", pkg, "-o", tmp_path / "o.mlpackage", "--palettize", "5")
    assert code == 2
    code, _, err = cli(capsys, "compress", pkg, "-o", tmp_path / "o.mlpackage", "--n-m", "2-4")
    assert code == 1 and "--n-m: expected N:M" in err
    pytest.importorskip("yaml")
    y = tmp_path / "mixed.yaml"
    y.write_text("config_type: OpPalettizerConfig\nglobal_config:\n  nbits: 4\nop_type_configs:\n  linear:\n"
                 "    config_type: OpLinearQuantizerConfig\n")
    code, _, err = cli(capsys, "compress", pkg, "-o", tmp_path / "o.mlpackage", "--config", y)
    assert code == 1 and "may not mix" in err
    code, _, err = cli(capsys, "compress", pkg, "-o", tmp_path / "o.mlpackage", "--prune", "1.5")
    assert code == 1 and "target_sparsity" in err
    assert not (tmp_path / "o.mlpackage").exists()
