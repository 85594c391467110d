"""milkit.save / milkit.load against coremltools: package layout, proto, weight.bin bytes."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import warnings

import milkit
import numpy as np
import pytest
from support import parity

logging.disable(logging.WARNING)
warnings.filterwarnings("ignore")

ct = pytest.importorskip("coremltools")
from coremltools.converters.mil.frontend.milproto.load import load as milproto_to_pymil  # noqa: E402
from coremltools.converters.mil.mil import types as ctypes  # noqa: E402
from coremltools.proto import Model_pb2  # noqa: E402

TARGETS = ("iOS15", "iOS16", "iOS17", "iOS18")
WEIGHTS = "Data/com.apple.CoreML/weights/weight.bin"
MODEL = "Data/com.apple.CoreML/model.mlmodel"


class SubByte:
    """A sub-byte array: milkit and coremltools mark sub-byte numpy dtypes differently."""

    def __init__(self, name: str, raw: np.ndarray):
        self.name, self.raw = name, raw

    def get(self, mb):
        mod = milkit.types if mb.__module__.startswith("milkit") else ctypes
        return self.raw.astype(getattr(mod, f"np_{self.name}_dtype"))


def _consts() -> dict:
    rng = np.random.default_rng(7)

    def sub(name, n, lo, hi):
        return SubByte(name, rng.integers(lo, hi + 1, size=n).astype(np.int8 if lo < 0 else np.uint8))

    return {
        "fp16": rng.standard_normal((3, 4)).astype(np.float16),   # blob
        "fp16_small": rng.standard_normal(5).astype(np.float16),  # immediate bytes
        "fp32": rng.standard_normal((2, 2, 3)).astype(np.float32),
        "fp32_scalar": np.float32(0.25),
        "int8": rng.integers(-128, 128, 11).astype(np.int8),
        "int8_small": rng.integers(-128, 128, 3).astype(np.int8),
        "uint8": rng.integers(0, 256, 13).astype(np.uint8),
        "int16": rng.integers(-30000, 30000, 10).astype(np.int16),     # ints; blob at iOS18
        "uint16": rng.integers(0, 65535, 12).astype(np.uint16),
        "int16_small": rng.integers(-30000, 30000, 4).astype(np.int16),
        "int32": rng.integers(-2**31, 2**31, (4, 5)).astype(np.int32),  # ints; blob at iOS18
        "int32_scalar": np.int32(-7),
        "uint32": rng.integers(0, 2**32, 10, dtype=np.uint64).astype(np.uint32),  # bytes; blob iOS18
        "uint32_small": np.array([1, 2**32 - 1], dtype=np.uint32),
        "int4": sub("int4", 11, -8, 7),
        "int4_small": sub("int4", 3, -8, 7),
        "uint1": sub("uint1", 17, 0, 1),
        "uint2": sub("uint2", 9, 0, 3),      # immediate bytes
        "uint3": sub("uint3", 10, 0, 7),
        "uint4": sub("uint4", 15, 0, 15),
        "uint6": sub("uint6", 12, 0, 63),
        "uint6_small": sub("uint6", 5, 0, 63),
        "bool": np.array([True, False, True, True]),
        "bool_scalar": np.bool_(False),
        "str": "hello",
        "empty_fp32": np.zeros((0, 3), dtype=np.float32),
    }


CONSTS = _consts()


def build_all_consts(mb, x):
    for k, v in CONSTS.items():
        mb.const(val=v.get(mb) if isinstance(v, SubByte) else v, name="c_" + k)
    w = CONSTS["fp32"].reshape(-1)[:4]
    return mb.add(x=x, y=np.float32(1.5)), mb.mul(x=x, y=w)


def build_int32(mb, x):
    big = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    return mb.add(x=x, y=big), mb.sub(x=x, y=np.int32(3))


def build_fp16(mb, x):
    w = np.linspace(-1, 1, 12).astype(np.float16).reshape(3, 4)
    return mb.mul(x=x, y=w)


def _convert_ct(prog, target: str, path: str) -> None:
    m = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=getattr(ct.target, target),
                   compute_precision=ct.precision.FLOAT32, pass_pipeline=ct.PassPipeline.EMPTY,
                   skip_model_load=True)
    m.save(path)


def _build_both(build, specs, target):
    symtab = parity._make_symbols(specs)
    parity.reset_ct_names()
    cp = parity._build("ct", build, specs, target, symtab)
    mp = parity._build("mk", build, specs, target, symtab)
    return cp, mp


def _open_with_ct(path: str):
    """coremltools' Linux-side acceptance check: MLModel + the milproto loader."""
    m = ct.models.MLModel(path, skip_model_load=True)
    spec = m.get_spec()
    prog = milproto_to_pymil(spec, spec.specificationVersion, m.weights_dir)
    return spec, prog


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _weights(pkg: str) -> bytes | None:
    """weight.bin of a package, None when there is none (no blob consts)."""
    p = os.path.join(pkg, WEIGHTS)
    assert os.path.isdir(os.path.dirname(p))  # the weights folder always exists
    return _read(p) if os.path.exists(p) else None


def _spec(path: str):
    s = Model_pb2.Model()
    s.ParseFromString(_read(os.path.join(path, MODEL)))
    return s


def _strip(spec):
    s = Model_pb2.Model()
    s.CopyFrom(spec)
    s.mlProgram.attributes.clear()
    s.description.ClearField("metadata")
    return s


def _ops(prog) -> list:
    """Op types, names, output names, dtypes and shapes (symbols as '?'), for either library."""
    mod = milkit.types if type(prog).__module__.startswith("milkit") else ctypes
    out = []
    for name, f in prog.functions.items():
        for op in f.operations:
            outs = [(v.name, mod.builtin_to_string(v.dtype),
                     tuple(int(d) if isinstance(d, (int, np.integer)) else "?" for d in v.shape)) for v in op.outputs]
            out.append((name, op.op_type, op.name, outs))
    return out


CASES = [
    ("all_consts_symbolic", build_all_consts, [((2, "S", 4), "fp32")]),
    ("all_consts_static", build_all_consts, [((2, 3, 4), "fp32")]),
    ("int32_io", build_int32, [((2, 3, 4), "int32")]),
    ("int32_symbolic", build_int32, [(("B", 3, 4), "int32")]),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name,build,specs", CASES, ids=[c[0] for c in CASES])
def test_matches_coremltools(tmp_path, target, name, build, specs):
    cp, mp = _build_both(build, specs, target)
    ct_pkg, mk_pkg = str(tmp_path / "ct.mlpackage"), str(tmp_path / "mk.mlpackage")
    _convert_ct(cp, target, ct_pkg)
    milkit.save(mp, mk_pkg, minimum_deployment_target=getattr(milkit.target, target))

    # coremltools accepts milkit's package, and rebuilds the same program from it
    spec, loaded = _open_with_ct(mk_pkg)
    assert spec.specificationVersion == getattr(ct.target, target).value
    _, ct_loaded = _open_with_ct(ct_pkg)
    assert _ops(loaded) == _ops(ct_loaded)

    # byte-identical weights, equal protos (maps compare as maps); metadata differs by design
    assert _weights(mk_pkg) == _weights(ct_pkg)
    ct_spec = _spec(ct_pkg)
    assert _strip(spec).mlProgram == _strip(ct_spec).mlProgram
    assert _strip(spec).description == _strip(ct_spec).description
    assert spec.description.metadata.userDefined["milkit-version"] == milkit.__version__


@pytest.mark.parametrize("target", ["iOS17", "iOS18"])
def test_fp16_io_and_default_target(tmp_path, target):
    cp, mp = _build_both(build_fp16, [((3, 4), "fp16")], target)
    ct_pkg, mk_pkg = str(tmp_path / "ct.mlpackage"), str(tmp_path / "mk.mlpackage")
    _convert_ct(cp, target, ct_pkg)
    milkit.save(mp, mk_pkg)  # default: the function's opset
    spec, _ = _open_with_ct(mk_pkg)
    assert spec.specificationVersion == getattr(ct.target, target).value
    assert spec.mlProgram.functions["main"].opset == f"CoreML{spec.specificationVersion - 1}"
    assert _weights(mk_pkg) == _weights(ct_pkg)
    assert _strip(spec) == _strip(_spec(ct_pkg))


def test_default_target_is_at_least_ios15(tmp_path):
    from milkit import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=(2,), dtype=milkit.types.fp32)], opset_version=milkit.target.iOS14)
    def prog(x):
        return mb.add(x=x, y=1.0)

    milkit.save(prog, tmp_path / "a.mlpackage")
    spec, _ = _open_with_ct(str(tmp_path / "a.mlpackage"))
    assert spec.specificationVersion == 6
    assert spec.mlProgram.functions["main"].opset == "CoreML5"


def test_manifest_format(tmp_path):
    _, mp = _build_both(build_int32, [((2, 3, 4), "int32")], "iOS17")
    pkg = tmp_path / "m.mlpackage"
    milkit.save(mp, pkg)
    text = (pkg / "Manifest.json").read_text()
    j = json.loads(text)
    assert text == json.dumps(j, indent=4, sort_keys=True, separators=(",", ": ")) + "\n"
    assert j["fileFormatVersion"] == "1.0.0"
    uuid = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
    assert all(uuid.match(k) for k in j["itemInfoEntries"])
    items = {v["name"]: (k, v) for k, v in j["itemInfoEntries"].items()}
    assert items["model.mlmodel"][1] == {"author": "com.apple.CoreML", "description": "CoreML Model Specification",
                                         "name": "model.mlmodel", "path": "com.apple.CoreML/model.mlmodel"}
    assert items["weights"][1] == {"author": "com.apple.CoreML", "description": "CoreML Model Weights",
                                   "name": "weights", "path": "com.apple.CoreML/weights"}
    assert j["rootModelIdentifier"] == items["model.mlmodel"][0]
    # same structure as the one coremltools writes
    cp, _ = _build_both(build_int32, [((2, 3, 4), "int32")], "iOS17")
    _convert_ct(cp, "iOS17", str(tmp_path / "ct.mlpackage"))
    cj = json.loads((tmp_path / "ct.mlpackage" / "Manifest.json").read_text())
    assert sorted(sorted(v.items()) for v in cj["itemInfoEntries"].values()) == sorted(sorted(v.items()) for v in j["itemInfoEntries"].values())
    # a second save makes new UUIDs
    milkit.save(mp, pkg)
    assert json.loads((pkg / "Manifest.json").read_text())["rootModelIdentifier"] != j["rootModelIdentifier"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name,build,specs", CASES, ids=[c[0] for c in CASES])
def test_coremltools_package_round_trips(tmp_path, target, name, build, specs):
    cp, _ = _build_both(build, specs, target)
    ct_pkg = str(tmp_path / "ct.mlpackage")
    _convert_ct(cp, target, ct_pkg)
    prog = milkit.load(ct_pkg)
    _, ct_loaded = _open_with_ct(ct_pkg)
    assert _ops(prog) == _ops(ct_loaded)
    f = prog.functions["main"]
    assert f.opset_version == getattr(milkit.target, target)
    # buildInfo is carried over
    assert any(k.startswith("coremltools") for k in prog._attributes())
    again = str(tmp_path / "again.mlpackage")
    milkit.save(prog, again)
    assert _weights(again) == _weights(ct_pkg)
    a, b = _spec(again), _spec(ct_pkg)
    assert _strip(a).mlProgram == _strip(b).mlProgram
    assert _strip(a).description == _strip(b).description
    assert dict(a.description.metadata.userDefined)["coremltools-version"] == ct.__version__
    # const values survive (blob ones borrow the mapping)
    c = {op.name: op.outputs[0].val for op in f.operations if op.op_type == "const"}
    if "c_fp16" in c:
        np.testing.assert_array_equal(c["c_fp16"], CONSTS["fp16"])
        np.testing.assert_array_equal(c["c_int4"].astype(np.int8), CONSTS["int4"].raw)
        np.testing.assert_array_equal(c["c_uint6"].astype(np.uint8), CONSTS["uint6"].raw)
        np.testing.assert_array_equal(c["c_uint32"], CONSTS["uint32"])
        np.testing.assert_array_equal(c["c_bool"], CONSTS["bool"])
        assert c["c_str"] == "hello"


def test_load_bare_mlmodel_and_symbol_ranges(tmp_path):
    from milkit import Builder as mb

    s = milkit.get_new_symbol("S")

    @mb.program(input_specs=[mb.TensorSpec(shape=(s, 10), dtype=milkit.types.fp32)], opset_version=milkit.target.iOS17)
    def prog(x):
        return mb.mul(x=x, y=np.arange(10, dtype=np.float32))

    pkg = tmp_path / "r.mlpackage"
    milkit.save(prog, pkg)
    spec = _spec(str(pkg))
    rng = spec.description.input[0].type.multiArrayType.shapeRange.sizeRanges
    assert [(r.lowerBound, r.upperBound) for r in rng] == [(1, 2), (10, 10)]
    assert list(spec.description.input[0].type.multiArrayType.shape) == [1, 10]
    # a bare model.mlmodel beside its weights folder loads too
    bare = tmp_path / "bare"
    shutil.copytree(pkg / "Data" / "com.apple.CoreML", bare)
    p = milkit.load(bare / "model.mlmodel")
    assert [op.op_type for op in p.functions["main"].operations] == ["const", "mul"]


# ---- atomicity ---------------------------------------------------------------------------------
def _snapshot(path) -> dict:
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            full = os.path.join(root, f)
            out[os.path.relpath(full, path)] = _read(full)
    return out


def test_atomic_save_keeps_old_package(tmp_path):
    from milkit import Builder as mb

    pkg = tmp_path / "m.mlpackage"
    _, good = _build_both(build_int32, [((2, 3, 4), "int32")], "iOS17")
    milkit.save(good, pkg)
    before = _snapshot(pkg)

    @mb.program(input_specs=[mb.TensorSpec(shape=(64,), dtype=milkit.types.fp32)], opset_version=milkit.target.iOS17)
    def bad(x):
        y = mb.add(x=x, y=np.ones(64, dtype=np.float32))  # written to weight.bin first
        return mb.less(x=y, y=np.float32(0))               # a bool output cannot be serialized

    with pytest.raises(milkit.MilkitValueError, match="bool"):
        milkit.save(bad, pkg)
    assert _snapshot(pkg) == before
    assert sorted(os.listdir(tmp_path)) == ["m.mlpackage"]  # no temp dir left behind
    assert [op.op_type for op in milkit.load(pkg).functions["main"].operations] == ["const", "add", "const", "sub"]
    # a successful save replaces the package, leaving nothing else
    _, other = _build_both(build_fp16, [((3, 4), "fp16")], "iOS17")
    milkit.save(other, pkg)
    assert sorted(os.listdir(tmp_path)) == ["m.mlpackage"]
    assert [op.op_type for op in milkit.load(pkg).functions["main"].operations] == ["const", "mul"]


# ---- malformed packages ------------------------------------------------------------------------
@pytest.fixture
def good_pkg(tmp_path):
    _, mp = _build_both(build_all_consts, [((2, "S", 4), "fp32")], "iOS18")
    pkg = tmp_path / "good.mlpackage"
    milkit.save(mp, pkg)
    return pkg


def _with_spec(pkg, edit) -> None:
    s = _spec(str(pkg))
    edit(s)
    (pkg / MODEL).write_bytes(s.SerializeToString())


def _main_block(s):
    f = s.mlProgram.functions["main"]
    return f.block_specializations[f.opset]


def _op(s, name):
    for op in _main_block(s).operations:
        if op.attributes["name"].immediateValue.tensor.strings.values[0] == name:
            return op
    raise KeyError(name)


def _swap_first_two_nonconst(s):
    ops = _main_block(s).operations
    idx = [i for i, o in enumerate(ops) if o.type == "add"][0]
    # move the add before its const input
    a = type(ops[0])()
    a.CopyFrom(ops[idx])
    b = type(ops[0])()
    b.CopyFrom(ops[idx - 1])
    ops[idx - 1].CopyFrom(a)
    ops[idx].CopyFrom(b)


SPEC_EDITS = {
    "undefined var": (lambda s: setattr(_op(s, "add_0").inputs["x"].arguments[0], "name", "nope"), "undefined var 'nope'"),
    "later-defined var": (_swap_first_two_nonconst, "used before it is defined"),
    "missing block for opset": (lambda s: setattr(s.mlProgram.functions["main"], "opset", "CoreML3"), "missing block specialization"),
    "element count mismatch": (lambda s: _op(s, "c_bool").attributes["val"].type.tensorType.dimensions[0].constant.__setattr__("size", 5),
                               "elements"),
    "blob element count": (lambda s: _op(s, "c_fp16").attributes["val"].type.tensorType.dimensions[0].constant.__setattr__("size", 4),
                           "declared shape"),
    "blob dtype": (lambda s: _op(s, "c_fp16").attributes["val"].type.tensorType.__setattr__("dataType", 11), "does not match"),
    "blob offset": (lambda s: _op(s, "c_fp16").attributes["val"].blobFileValue.__setattr__("offset", 100), "not a metadata record"),
    "declared output type": (lambda s: _op(s, "add_0").outputs[0].type.tensorType.__setattr__("dataType", 10),
                             "add_0.*does not match the inferred"),
    "output rank": (lambda s: _op(s, "mul_0").outputs[0].type.tensorType.__setattr__("rank", 2), "rank"),
    "output count": (lambda s: _op(s, "add_0").outputs.add(name="extra").type.CopyFrom(_op(s, "add_0").outputs[0].type),
                     "declares 2 outputs"),
    "unknown op": (lambda s: _op(s, "add_0").__setattr__("type", "frobnicate"), "frobnicate"),
    "bad input dtype": (lambda s: _op(s, "add_0").inputs["y"].arguments[0].__setattr__("name", "c_int8"), "add_0"),
    "program version": (lambda s: s.mlProgram.__setattr__("version", 2), "program version"),
    "spec version": (lambda s: s.__setattr__("specificationVersion", 99), "specificationVersion"),
    "not an mlprogram": (lambda s: s.ClearField("mlProgram"), "ML Program"),
    "block output": (lambda s: _main_block(s).outputs.__setitem__(0, "gone"), "undefined var 'gone'"),
    "bad dtype code": (lambda s: _op(s, "c_bool").attributes["val"].type.tensorType.__setattr__("dataType", 77), "data type code"),
    "wrong field": (lambda s: _op(s, "c_bool").attributes["val"].type.tensorType.__setattr__("dataType", 23), "field"),
}


@pytest.mark.parametrize("case", sorted(SPEC_EDITS))
def test_malformed_model_raises_format_error(good_pkg, case):
    edit, match = SPEC_EDITS[case]
    _with_spec(good_pkg, edit)
    with pytest.raises(milkit.FormatError, match=match):
        milkit.load(good_pkg)


def test_garbage_model_file(good_pkg):
    (good_pkg / MODEL).write_bytes(b"\xff\xff\xff\xff garbage")
    with pytest.raises(milkit.FormatError, match="protobuf"):
        milkit.load(good_pkg)


def _edit_manifest(pkg, edit) -> None:
    j = json.loads((pkg / "Manifest.json").read_text())
    edit(j)
    (pkg / "Manifest.json").write_text(json.dumps(j))


def _model_item(j):
    return j["itemInfoEntries"][j["rootModelIdentifier"]]


MANIFEST_EDITS = {
    "dotdot": (lambda j: _model_item(j).__setitem__("path", "../../x/model.mlmodel"), "leaves the package"),
    "absolute": (lambda j: _model_item(j).__setitem__("path", "/etc/passwd"), "absolute"),
    "missing key": (lambda j: _model_item(j).pop("author"), "author"),
    "non-string key": (lambda j: _model_item(j).__setitem__("name", 3), "name"),
    "newer version": (lambda j: j.__setitem__("fileFormatVersion", "1.1.0"), "newer"),
    "bad version": (lambda j: j.__setitem__("fileFormatVersion", "one"), "major.minor.patch"),
    "no root": (lambda j: j.__setitem__("rootModelIdentifier", "nope"), "names no item"),
    "missing item file": (lambda j: _model_item(j).__setitem__("path", "com.apple.CoreML/other.mlmodel"), "does not exist"),
    "no entries": (lambda j: j.pop("itemInfoEntries"), "itemInfoEntries"),
}


@pytest.mark.parametrize("case", sorted(MANIFEST_EDITS))
def test_malformed_manifest(good_pkg, case):
    edit, match = MANIFEST_EDITS[case]
    _edit_manifest(good_pkg, edit)
    with pytest.raises(milkit.FormatError, match=match):
        milkit.load(good_pkg)


def test_manifest_symlink_escape(good_pkg, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(good_pkg / MODEL, outside / "model.mlmodel")
    os.symlink(outside, good_pkg / "Data" / "evil")
    _edit_manifest(good_pkg, lambda j: _model_item(j).__setitem__("path", "evil/model.mlmodel"))
    with pytest.raises(milkit.FormatError, match="outside the package"):
        milkit.load(good_pkg)


def test_weight_symlink_escape(good_pkg, tmp_path):
    w = good_pkg / WEIGHTS
    shutil.move(w, tmp_path / "weight.bin")
    os.symlink(tmp_path / "weight.bin", w)
    with pytest.raises(milkit.FormatError, match="outside the package"):
        milkit.load(good_pkg)


def test_missing_manifest_and_weights(good_pkg):
    (good_pkg / WEIGHTS).unlink()
    with pytest.raises(milkit.FormatError, match="does not exist"):
        milkit.load(good_pkg)
    (good_pkg / "Manifest.json").unlink()
    with pytest.raises(milkit.FormatError, match="Manifest.json"):
        milkit.load(good_pkg)
    with pytest.raises(milkit.MilkitIOError):
        milkit.load(good_pkg / "nonexistent.mlpackage")


# ---- fuzz --------------------------------------------------------------------------------------
FUZZ_SCRIPT = r"""
import os, random, shutil, sys
import milkit
src, work, seed, iters = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
files = ["Data/com.apple.CoreML/model.mlmodel", "Data/com.apple.CoreML/weights/weight.bin", "Manifest.json"]
orig = {f: open(os.path.join(src, f), "rb").read() for f in files}
counts = {"ok": 0}
for i in range(iters):
    f = files[i % 3]
    data = bytearray(orig[f])
    kind = rng.randrange(4)
    if kind == 0:
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif kind == 1:
        del data[rng.randrange(len(data)):]
    elif kind == 2:
        p = rng.randrange(len(data))
        data[p:p] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    else:
        p = rng.randrange(len(data))
        data[p] ^= 1 << rng.randrange(8)
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(src, work)
    with open(os.path.join(work, f), "wb") as out:
        out.write(data)
    try:
        prog = milkit.load(work)
        milkit.save(prog, work + ".again")  # whatever loads must be savable or fail cleanly
        counts["ok"] += 1
    except milkit.MilkitError as e:
        name = type(e).__name__
        counts[name] = counts.get(name, 0) + 1
print(counts)
"""


def test_fuzz_mutated_packages_raise_milkit_errors(good_pkg, tmp_path):
    script = tmp_path / "fuzz.py"
    script.write_text(FUZZ_SCRIPT)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(milkit.__file__))] + sys.path)
    r = subprocess.run([sys.executable, str(script), str(good_pkg), str(tmp_path / "work.mlpackage"), "1234", "600"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, f"crash or foreign exception (rc={r.returncode}):\n{r.stderr[-3000:]}"
    counts = eval(r.stdout.strip().splitlines()[-1])
    assert sum(counts.values()) == 600
    assert counts.get("FormatError", 0) > 100  # the mutations were actually detected
