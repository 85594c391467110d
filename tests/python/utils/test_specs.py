"""load_spec / save_spec / rename_feature (milkit.utils) against coremltools' on the same specs,
byte for byte once saved, and MLModel built from a spec plus a weights folder."""

from __future__ import annotations

import json
import os
import warnings

import milkit
import numpy as np
import pytest
from milkit.models import MLModel
from milkit.utils import MultiFunctionDescriptor, load_spec, rename_feature, save_multifunction, save_spec

ct = pytest.importorskip("coremltools")
MODEL = os.path.join("Data", "com.apple.CoreML", "model.mlmodel")
WEIGHTS = os.path.join("Data", "com.apple.CoreML", "weights", "weight.bin")


def _ctu():
    from coremltools.models import utils

    return utils


def _read(path, rel=""):
    with open(os.path.join(path, rel) if rel else path, "rb") as f:
        return f.read()


def _weights_dir(pkg):
    return os.path.join(pkg, "Data", "com.apple.CoreML", "weights")


def test_load_spec_as_coremltools(packages):
    for name in ("prefill", "decode"):
        assert load_spec(packages[name]) == _ctu().load_spec(packages[name])
    model_file = os.path.join(packages["other"], MODEL)
    assert load_spec(model_file) == _ctu().load_spec(model_file)


@pytest.mark.parametrize("current,new,inputs,outputs", [
    ("x", "tokens", True, True), ("out", "logits", True, True), ("x", "tokens", False, True),
    ("out", "logits", True, False), ("missing", "y2", True, True), ("x", "tokens", False, False)])
def test_rename_then_save_as_coremltools(packages, tmp_path, current, new, inputs, outputs):
    a, b = _ctu().load_spec(packages["decode"]), load_spec(packages["decode"])
    _ctu().rename_feature(a, current, new, inputs, outputs)
    rename_feature(b, current, new, inputs, outputs)
    assert a == b
    pa, pb = str(tmp_path / "ct.mlpackage"), str(tmp_path / "mk.mlpackage")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _ctu().save_spec(a, pa, weights_dir=_weights_dir(packages["decode"]))
    save_spec(b, pb, weights_dir=_weights_dir(packages["decode"]))
    # the same process serializes both specs: the same bytes
    assert _read(pa, MODEL) == _read(pb, MODEL)
    assert _read(pa, WEIGHTS) == _read(pb, WEIGHTS)
    ma, mb_ = json.loads(_read(pa, "Manifest.json")), json.loads(_read(pb, "Manifest.json"))
    strip = lambda m: sorted((e["name"], e["author"], e["path"], e["description"])  # noqa: E731
                             for e in m["itemInfoEntries"].values())
    assert strip(ma) == strip(mb_) and ma["fileFormatVersion"] == mb_["fileFormatVersion"]
    assert ma["itemInfoEntries"][ma["rootModelIdentifier"]]["name"] == "model.mlmodel"
    assert mb_["itemInfoEntries"][mb_["rootModelIdentifier"]]["name"] == "model.mlmodel"


def test_renamed_model_runs(packages):
    spec = load_spec(packages["decode"])
    rename_feature(spec, "x", "tokens")
    rename_feature(spec, "out", "logits")
    m = MLModel(spec, weights_dir=_weights_dir(packages["decode"]))
    ref = MLModel(packages["decode"])
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(1, 1, 32)
    got = m.predict({"tokens": x}, m.make_state())
    np.testing.assert_array_equal(got["logits"], ref.predict({"x": x}, ref.make_state())["out"])
    path = m.package_path
    assert m.is_temp_package and os.path.isdir(path)
    del m
    assert not os.path.exists(path)


def test_invalid_names_and_missing_weights_as_coremltools(packages):
    msgs = []
    for mod in (_ctu(), milkit.utils):
        got = []
        for bad in ("1x", "a-b", "fp16", "state"):
            spec = mod.load_spec(packages["prefill"])  # the description is renamed before the check
            with pytest.raises(ValueError) as e:
                mod.rename_feature(spec, "x", bad)
            got.append(str(e.value))
        msgs.append(got)
    assert msgs[0] == msgs[1]
    with pytest.raises(Exception) as want:
        ct.models.MLModel(_ctu().load_spec(packages["prefill"]))
    with pytest.raises(Exception) as got:
        MLModel(load_spec(packages["prefill"]))
    assert str(got.value) == str(want.value)


def test_save_spec_files(packages, tmp_path):
    spec = load_spec(packages["other"])
    save_spec(spec, str(tmp_path / "plain"))  # no extension: a .mlmodel file
    assert _read(str(tmp_path / "plain.mlmodel")) == spec.SerializeToString()
    with pytest.raises(Exception, match="Extension must be .mlmodel or .mlpackage"):
        save_spec(spec, str(tmp_path / "x.bin"))
    with pytest.raises(Exception, match="weights_dir"):
        save_spec(spec, str(tmp_path / "x.mlpackage"))
    out = str(tmp_path / "round.mlpackage")
    save_spec(spec, out, weights_dir=_weights_dir(packages["other"]))
    assert load_spec(out) == spec
    assert milkit.to_text(milkit.load(out)) == milkit.to_text(milkit.load(packages["other"]))


def test_rename_in_one_function_of_a_multifunction_model(packages, tmp_path):
    d = MultiFunctionDescriptor()
    d.add_function(packages["prefill"], "main", "prefill")
    d.add_function(packages["decode"], "main", "decode")
    d.default_function_name = "decode"
    pkg = str(tmp_path / "multi.mlpackage")
    save_multifunction(d, pkg)
    # as coremltools: without a function, a multifunction model's features are not renamed
    a, b = _ctu().load_spec(pkg), load_spec(pkg)
    _ctu().rename_feature(a, "x", "tokens")
    rename_feature(b, "x", "tokens")
    assert a == b == load_spec(pkg)

    rename_feature(b, "x", "tokens", function_name="decode")
    fns = {f.name: f for f in b.description.functions}
    assert [i.name for i in fns["decode"].input] == ["tokens"] and [i.name for i in fns["prefill"].input] == ["x"]
    assert [i.name for i in b.mlProgram.functions["decode"].inputs] == ["tokens", "cache"]
    assert [i.name for i in b.mlProgram.functions["prefill"].inputs] == ["x"]
    with pytest.raises(ValueError, match="function 'nope' not found"):
        rename_feature(b, "x", "y", function_name="nope")
    m = MLModel(b, weights_dir=_weights_dir(pkg), function_name="decode")
    x = np.ones((1, 1, 32), np.float32)
    ref = MLModel(packages["decode"])
    np.testing.assert_array_equal(m.predict({"tokens": x}, m.make_state())["out"],
                                  ref.predict({"x": x}, ref.make_state())["out"])
    p = MLModel(b, weights_dir=_weights_dir(pkg), function_name="prefill")
    assert p.predict({"x": np.ones((1, 8, 32), np.float32)})["out"].shape == (1, 8, 1, 16)
