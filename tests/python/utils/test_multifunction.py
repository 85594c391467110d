"""Multifunction packages: milkit.utils.MultiFunctionDescriptor / save_multifunction against
coremltools' (the same weight.bin bytes and the same Model proto), weights shared across and
within functions, coremltools' validation errors, and running each function of the package."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import milkit
import numpy as np
import pytest
from milkit.utils import MultiFunctionDescriptor, save_multifunction
from support.multifunction_util import SMALL, W_HALF, W_OTHER, W

MODEL = os.path.join("Data", "com.apple.CoreML", "model.mlmodel")
WEIGHTS = os.path.join("Data", "com.apple.CoreML", "weights", "weight.bin")
ct = pytest.importorskip("coremltools")


def _read(path: str, rel: str) -> bytes:
    with open(os.path.join(path, rel), "rb") as f:
        return f.read()


def _spec(path: str):
    from coremltools.proto import Model_pb2

    s = Model_pb2.Model()
    s.ParseFromString(_read(path, MODEL))
    return s


def _both(tmp_path, functions, default, add_models=()):
    """Saves the same descriptor with coremltools and with milkit; returns both paths."""
    from coremltools.models import utils as ctu

    out = []
    for mod, name in ((ctu, "ct"), (milkit.utils, "mk")):
        d = mod.MultiFunctionDescriptor()
        for path in add_models:
            d.add_model(path)
        for args in functions:
            d.add_function(*args)
        d.default_function_name = default
        path = str(tmp_path / f"{name}.mlpackage")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mod.save_multifunction(d, path)
        out.append(path)
    return out


def _assert_same(a: str, b: str) -> None:
    """weight.bin byte for byte; model.mlmodel byte for byte up to the order of the entries of
    the MIL program's maps (functions, op inputs, attributes): coremltools serializes them with
    upb, whose map order follows a hash seeded per process (the same program saved twice by
    coremltools gives different bytes), while milkit writes them in program order."""
    assert _read(a, WEIGHTS) == _read(b, WEIGHTS)
    ba, bb = _read(a, MODEL), _read(b, MODEL)
    # specificationVersion and the description come before the program (field 502): raw equal
    cut = bb.index(b"\xb2\x1f")
    assert ba[:cut] == bb[:cut]
    sa, sb = _spec(a), _spec(b)
    _align_state_write_names(sa, sb)
    assert sa == sb
    assert sa.SerializeToString(deterministic=True) == sb.SerializeToString(deterministic=True)


def _align_state_write_names(sa, sb) -> None:
    """The one difference in content: coremltools' milproto loader rebuilds each `write_state` op
    as an unnamed `coreml_update_state`, so when it writes the package again the op is named
    `coreml_update_state_<n>_write_state`, n from the builder's process-wide counter of unnamed
    ops (it depends on what was loaded before). milkit keeps the name the op has in its source
    package. Op names mean nothing to Core ML; this checks the difference is exactly that and
    gives coremltools' ops milkit's names."""
    import re

    for fname, fa in sa.mlProgram.functions.items():
        fb = sb.mlProgram.functions[fname]
        ops_a = [op for blk in fa.block_specializations.values() for op in blk.operations]
        ops_b = [op for blk in fb.block_specializations.values() for op in blk.operations]
        for oa, ob in zip(ops_a, ops_b):
            if oa.type != "write_state":
                continue
            name_a = oa.attributes["name"].immediateValue.tensor.strings.values
            name_b = ob.attributes["name"].immediateValue.tensor.strings.values
            assert re.fullmatch(r"coreml_update_state_\d+_write_state", name_a[0]), name_a[0]
            name_a[0] = name_b[0]


def test_same_package_as_coremltools(packages, tmp_path):
    a, b = _both(tmp_path, [(packages["prefill"], "main", "prefill"), (packages["decode"], "main", "decode"),
                            (packages["other"], "main", "other")], "decode")
    _assert_same(a, b)
    spec = _spec(b)
    assert spec.specificationVersion == 9
    assert [f.name for f in spec.description.functions] == ["prefill", "decode", "other"]
    assert spec.description.defaultFunctionName == "decode"
    assert [s.name for s in spec.description.functions[1].state] == ["cache"]
    assert not spec.description.HasField("metadata") and not spec.mlProgram.attributes
    # milkit writes the functions in the descriptor's order, the same bytes every time
    again = str(tmp_path / "again.mlpackage")
    d = MultiFunctionDescriptor()
    for n in ("prefill", "decode", "other"):
        d.add_function(packages[n], "main", n)
    d.default_function_name = "decode"
    save_multifunction(d, again)
    assert _read(again, MODEL) == _read(b, MODEL) and _read(again, WEIGHTS) == _read(b, WEIGHTS)


def test_shared_weights_stored_once(packages, tmp_path):
    _, b = _both(tmp_path, [(packages["prefill"], "main", "prefill"), (packages["decode"], "main", "decode"),
                            (packages["other"], "main", "other")], "prefill")
    blob = _read(b, WEIGHTS)
    for arr in (W, W_HALF, SMALL.astype(np.float16), W_OTHER):
        assert blob.count(arr.tobytes()) == 1
    one = [_read(packages[n], WEIGHTS) for n in ("prefill", "decode", "other")]
    assert len(blob) < sum(len(x) for x in one)
    # every const of the three functions holding W points at one blob offset
    refs = [r for r in milkit._core.blob_references(_read(b, MODEL)) if r[1] == "proj_weight_0"]
    assert len(refs) == 2 and len({r[4] for r in refs}) == 1
    # one function of `other` is deduplicated inside: one weight const left (coremltools' pass)
    fn = milkit.load(b).functions["other"]
    assert sum(1 for op in fn.operations if op.op_type == "const" and op.outputs[0].shape == (64, 32)) == 1


def test_coremltools_loads_it(packages, tmp_path):
    from coremltools.converters.mil.frontend.milproto.load import load as milproto_load

    _, b = _both(tmp_path, [(packages["prefill"], "main", "prefill"), (packages["decode"], "main", "decode")],
                 "decode")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = ct.models.MLModel(b, skip_model_load=True)
        spec = m.get_spec()
        prog = milproto_load(spec, spec.specificationVersion, os.path.join(b, "Data", "com.apple.CoreML", "weights"))
    assert set(prog.functions) == {"prefill", "decode"}
    w = [op.outputs[0].val for op in prog.functions["decode"].operations if op.name == "proj_weight_0"]
    np.testing.assert_array_equal(w[0], W)


def test_add_model_of_a_multifunction_package(packages, tmp_path):
    first, _ = _both(tmp_path, [(packages["prefill"], "main", "prefill"), (packages["decode"], "main", "decode")],
                     "decode")
    sub = tmp_path / "again"
    sub.mkdir()
    a, b = _both(sub, [(packages["other"], "main", "other"), (first, "prefill", "prefill_2")], "other",
                 add_models=[first])
    _assert_same(a, b)
    assert [f.name for f in _spec(b).description.functions] == ["prefill", "decode", "other", "prefill_2"]


def test_one_function_and_renamed(packages, tmp_path):
    a, b = _both(tmp_path, [(packages["other"], "main", "renamed")], "renamed")
    _assert_same(a, b)


def _errors(mod, packages, tmp_path):
    """The messages of each misuse."""
    out = []

    def attempt(fn):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fn()
            out.append(None)
        except Exception as e:
            out.append((type(e).__name__, str(e).split(" with error ")[0]))

    d = mod.MultiFunctionDescriptor(packages["other"])
    attempt(lambda: d.add_function(packages["other"], "nope", "x"))
    attempt(lambda: d.add_function(packages["other"], "main", "main"))
    attempt(lambda: d.remove_function("nope"))
    attempt(lambda: setattr(d, "default_function_name", 3))
    attempt(lambda: mod.save_multifunction(d, str(tmp_path / "a.mlpackage")))
    d.default_function_name = "nope"
    attempt(lambda: mod.save_multifunction(d, str(tmp_path / "b.mlpackage")))
    attempt(lambda: mod.MultiFunctionDescriptor(str(tmp_path / "missing.mlpackage")))
    d.remove_function("main")
    attempt(lambda: d._functions())
    return out


def test_errors_as_coremltools(packages, tmp_path):
    from coremltools.models import utils as ctu

    want = _errors(ctu, packages, tmp_path)
    got = _errors(milkit.utils, packages, tmp_path)
    assert got == want
    assert all(e is not None for e in want[:-1])


def test_each_function_predicts(packages, tmp_path):
    _, b = _both(tmp_path, [(packages["prefill"], "main", "prefill"), (packages["decode"], "main", "decode")],
                 "decode")
    rng = np.random.default_rng(1)
    xp = rng.standard_normal((1, 8, 32)).astype(np.float32)
    xd = rng.standard_normal((1, 1, 32)).astype(np.float32)
    ref_p = milkit.models.MLModel(packages["prefill"]).predict({"x": xp})
    got_p = milkit.models.MLModel(b, function_name="prefill").predict({"x": xp})
    np.testing.assert_array_equal(got_p["out"], ref_p["out"])
    ref_m, got_m = milkit.models.MLModel(packages["decode"]), milkit.models.MLModel(b, function_name="decode")
    default = milkit.models.MLModel(b)  # the default function: decode
    rs, gs, ds = ref_m.make_state(), got_m.make_state(), default.make_state()
    for _ in range(3):  # the state accumulates across calls
        want = ref_m.predict({"x": xd}, rs)["out"]
        np.testing.assert_array_equal(got_m.predict({"x": xd}, gs)["out"], want)
        np.testing.assert_array_equal(default.predict({"x": xd}, ds)["out"], want)
    with pytest.raises(ValueError, match="no states"):
        milkit.models.MLModel(b, function_name="prefill").make_state()


def test_utils_is_a_lazy_attribute():
    code = ("import sys, milkit; assert 'milkit.utils' not in sys.modules; "
            "u = milkit.utils; assert 'milkit.utils' in sys.modules and u.save_multifunction; "
            "assert not any(m in sys.modules for m in ('torch', 'onnx', 'coremltools'))")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(milkit.__file__)))
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
