"""`milkit info` on a multifunction package: its functions (the default marked), each function's
inputs, outputs and states, and the weights its functions share (which consts point at one
offset of weight.bin, and the bytes stored once)."""

from __future__ import annotations

import json
import os

import milkit
import numpy as np
import pytest
from milkit import Builder as mb
from milkit import types
from milkit.cli import main
from milkit.utils import MultiFunctionDescriptor, save_multifunction

W = np.arange(512, dtype=np.float32).reshape(16, 32) / 64
W_OTHER = -W


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def multi(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("multi")

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4, 32))], opset_version=milkit.target.iOS18)
    def prefill(x):
        return mb.linear(x=x, weight=W, name="proj")

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 32)), mb.StateTensorSpec(shape=(1, 16), dtype=types.fp16)],
                opset_version=milkit.target.iOS18)
    def decode(x, cache):
        y = mb.cast(x=mb.linear(x=x, weight=W, name="proj"), dtype="fp16", name="y16")
        mb.coreml_update_state(state=cache, value=y, name="upd")
        return mb.linear(x=x, weight=W_OTHER, name="other")

    desc = MultiFunctionDescriptor()
    for name, prog in (("prefill", prefill), ("decode", decode)):
        path = str(d / f"{name}.mlpackage")
        milkit.save(prog, path)
        desc.add_function(path, "main", name)
    desc.default_function_name = "decode"
    out = str(d / "multi.mlpackage")
    save_multifunction(desc, out)
    return out


def test_info_lists_functions_and_shared_weights(capsys, multi):
    code, out, err = cli(capsys, "info", multi)
    assert code == 0, err
    assert "specification version: 9 (deployment target iOS18)" in out
    assert "functions: prefill, decode (default)" in out
    assert "function decode [iOS18] (default)" in out and "cache: (1, 16) fp16" in out
    assert "shared weights: 2 blobs, 2.1 KiB stored once (2.1 KiB saved)" in out
    assert "  @64 (2.0 KiB): prefill.proj_weight_0, decode.proj_weight_0\n" in out
    # the zero biases the builder adds to each linear are equal: one blob, also within decode
    assert "  @2176 (64 B): prefill.proj_bias_0, decode.proj_bias_0, decode.other_bias_0" in out

    code, out, _ = cli(capsys, "info", multi, "--json")
    facts = json.loads(out)
    assert [f["name"] for f in facts["functions"]] == ["prefill", "decode"]
    assert facts["default_function"] == "decode"
    (state,) = facts["functions"][1]["states"]
    assert state["name"] == "cache"
    shared = facts["shared_weights"]
    g, bias = shared["groups"]
    assert g["consts"] == [{"function": "prefill", "name": "proj_weight_0"},
                           {"function": "decode", "name": "proj_weight_0"}]
    assert [c["name"] for c in bias["consts"]] == ["proj_bias_0", "proj_bias_0", "other_bias_0"]
    assert g["bytes"] == W.nbytes and bias["bytes"] == 64
    assert shared["bytes"] == W.nbytes + 64 and shared["saved_bytes"] == W.nbytes + 2 * 64
    assert g["file"] == "@model_path/weights/weight.bin"
    with open(os.path.join(multi, "Data", "com.apple.CoreML", "weights", "weight.bin"), "rb") as f:
        blob = f.read()
    assert blob.count(W.tobytes()) == 1
    assert blob.find(W.tobytes()) == g["offset"] + 64  # the data follows its 64-byte metadata record


def test_info_of_a_package_without_shared_weights(capsys, tmp_path):
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 32))], opset_version=milkit.target.iOS17)
    def prog(x):
        return mb.linear(x=x, weight=W, name="proj")

    path = str(tmp_path / "one.mlpackage")
    milkit.save(prog, path)
    code, out, _ = cli(capsys, "info", path)
    assert code == 0 and "shared weights" not in out
    code, out, _ = cli(capsys, "info", path, "--json")
    assert json.loads(out)["shared_weights"] == {"groups": [], "bytes": 0, "saved_bytes": 0}
