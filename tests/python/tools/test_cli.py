"""The milkit command line: every command on packages written by milkit and by coremltools, on MIL
text, and on bad input (missing file, corrupt package, a directory that is not a package), with
exit statuses 0 / 1 / 2, --json outputs and no traceback. Most cases call milkit.cli.main in
process; a few run `python -m milkit` as a subprocess."""

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
from milkit import Builder as mb
from milkit import types
from milkit.cli import main

PY_DIR = os.path.dirname(os.path.dirname(os.path.abspath(milkit.__file__)))
ROOT = os.path.dirname(PY_DIR)
MODEL = os.path.join("Data", "com.apple.CoreML", "model.mlmodel")
WEIGHTS = os.path.join("Data", "com.apple.CoreML", "weights", "weight.bin")
W = np.arange(64, dtype=np.float32).reshape(4, 16) / 8


def _mk_prog(act="relu", w=W, scale=2.0, extra=False):
    """x: (1, s, 4) fp32 with s in [1, 64]; y: (2,) int32."""
    s = milkit.get_new_symbol("s")

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, s, 4)), mb.TensorSpec(shape=(2,), dtype=types.int32)],
                opset_version=milkit.target.iOS17)
    def prog(x, y):
        h = mb.matmul(x=x, y=w, name="mm")
        h = getattr(mb, act)(x=h, name="act")
        h = mb.mul(x=h, y=np.float32(scale), name="scale")
        if extra:
            h = mb.sigmoid(x=h, name="extra")
        return h, mb.add(x=y, y=np.int32(1), name="y1")

    return prog


def _convert_save(prog, path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = milkit.convert(prog, minimum_deployment_target=milkit.target.iOS17,
                               compute_precision=milkit.precision.FLOAT32, pass_pipeline=milkit.PassPipeline.EMPTY,
                               **kw)
    model.save(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    f = {"dir": str(d)}
    rng = [milkit.TensorType(name="x", shape=(1, milkit.RangeDim(1, 64), 4))]
    f["mk"] = str(d / "mk.mlpackage")
    _convert_save(_mk_prog(), f["mk"], inputs=rng)
    # the same program with an op changed, a weight changed, an attribute changed and an op added
    f["mk2"] = str(d / "mk2.mlpackage")
    w2 = W.copy()
    w2[1, 2] += 0.5
    _convert_save(_mk_prog(act="tanh", w=w2, scale=3.0, extra=True), f["mk2"], inputs=rng)
    f["mil"] = str(d / "mk.mil")
    with open(f["mil"], "w") as fh:
        fh.write(milkit.to_text(milkit.load(f["mk"]), consts=True))
    # enumerated shapes
    e = milkit.get_new_symbol("e")

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, e))], opset_version=milkit.target.iOS17)
    def enum_prog(x):
        return mb.relu(x=x, name="r")

    f["enum"] = str(d / "enum.mlpackage")
    _convert_save(enum_prog, f["enum"], inputs=[milkit.TensorType(name="x", shape=milkit.EnumeratedShapes(
        [(1, 4), (1, 8)], default=(1, 8)))])
    # a stateful iOS18 package
    @mb.program(input_specs=[mb.StateTensorSpec(shape=(2, 3), dtype=types.fp16),
                             mb.TensorSpec(shape=(2, 3), dtype=types.fp16)], opset_version=milkit.target.iOS18)
    def state_prog(cache, x):
        mb.coreml_update_state(state=cache, value=x)
        return mb.add(x=mb.read_state(input=cache), y=x, name="out")

    f["state"] = str(d / "state.mlpackage")
    milkit.save(state_prog, f["state"])
    f["ct"] = _coremltools_package(d)
    # bad input
    f["missing"] = str(d / "missing.mlpackage")
    f["notpkg"] = str(d / "notpkg")
    os.makedirs(f["notpkg"])
    with open(os.path.join(f["notpkg"], "readme.txt"), "w") as fh:
        fh.write("hello")
    for kind in ("trunc_model", "bad_manifest", "trunc_weights"):
        p = str(d / f"{kind}.mlpackage")
        shutil.copytree(f["mk"], p)
        if kind == "bad_manifest":
            with open(os.path.join(p, "Manifest.json"), "w") as fh:
                fh.write('{"fileFormatVersion": "1.0.0", ')
        else:
            target = os.path.join(p, MODEL if kind == "trunc_model" else WEIGHTS)
            with open(target, "rb") as fh:
                data = fh.read()
            with open(target, "wb") as fh:
                fh.write(data[: len(data) // 2])
        f[kind] = p
    np.save(d / "x.npy", np.linspace(-1, 1, 12, dtype=np.float32).reshape(1, 3, 4))
    np.save(d / "y.npy", np.array([3, 4], np.int32))
    np.save(d / "y_float.npy", np.array([3.5, 4.0], np.float32))
    np.save(d / "x_rank2.npy", np.ones((3, 4), np.float32))
    np.save(d / "xs.npy", np.full((2, 3), 1.5, np.float16))
    return f


def _coremltools_package(d) -> str:
    logging.disable(logging.WARNING)
    import coremltools as ct
    from coremltools.converters.mil import Builder as cmb

    @cmb.program(input_specs=[cmb.TensorSpec(shape=(1, 4))], opset_version=ct.target.iOS16)
    def prog(x):
        return cmb.relu(x=cmb.matmul(x=x, y=W, name="mm"), name="out")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS16, skip_model_load=True)
    m.author = "Ada <ada@example.com>"
    m.license = "MIT"
    m.short_description = "a small <test> model"
    m.version = "1.2"
    m.user_defined_metadata["k"] = "v"
    path = str(d / "ct.mlpackage")
    m.save(path)
    return path


def cli(capsys, *argv):
    """Runs main(argv) in process: (exit status, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def cli_subprocess(*argv, cwd=None):
    env = dict(os.environ, PYTHONPATH=PY_DIR, MILKIT_PROGRESS="0")
    r = subprocess.run([sys.executable, "-m", "milkit", *map(str, argv)], capture_output=True, text=True, env=env,
                       cwd=cwd, timeout=120)
    return r.returncode, r.stdout, r.stderr


def assert_bad_input(code, err, *names):
    """Exit 1 with one clear line on stderr naming the file; the bad-input path, not a crash."""
    assert code == 1, err
    assert "Traceback" not in err
    assert "--traceback" not in err, err  # the message of an unforeseen exception, i.e. a bug
    assert err.startswith("milkit "), err
    assert len(err.strip().splitlines()) == 1, err
    assert any(n in err for n in names), err


# ---- subprocess ----------------------------------------------------------------------------------
def test_python_dash_m_runs_commands(files):
    code, out, err = cli_subprocess("info", files["mk"])
    assert code == 0, err
    assert "function main [iOS17]" in out
    code, out, err = cli_subprocess("--help")
    assert code == 0 and "info" in out and "validate" in out
    code, out, err = cli_subprocess("info", files["trunc_model"])
    assert code == 1 and "Traceback" not in err and "trunc_model.mlpackage" in err
    assert "not a valid Core ML model protobuf" in err
    code, out, err = cli_subprocess("info", files["missing"])
    assert code == 1 and "Traceback" not in err and "missing.mlpackage: no such file or directory" in err
    code, out, err = cli_subprocess("frobnicate")
    assert code == 2 and "Traceback" not in err and "invalid choice" in err
    code, out, err = cli_subprocess("info", files["ct"], "--json")
    assert code == 0 and json.loads(out)["metadata"]["author"] == "Ada <ada@example.com>"


def test_console_script_is_declared_and_import_stays_lazy():
    with open(os.path.join(ROOT, "pyproject.toml")) as fh:
        text = fh.read()
    assert re.search(r'^\[project\.scripts\]\s*\nmilkit = "milkit\.cli:main"', text, re.M)
    assert re.search(r'dependencies = \[.*"tqdm', text)
    code = ("import sys, milkit; bad = [m for m in ('milkit.cli', 'tqdm', 'numpy', 'coremltools', 'torch') "
            "if m in sys.modules]; print(bad)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=PY_DIR), timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


# ---- usage errors and help -------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [
    [],
    ["frobnicate"],
    ["info"],
    ["info", "a", "b"],
    ["print", "x", "--bogus"],
    ["diff", "a"],
    ["convert", "a.mil"],  # -o is required
    ["convert", "a.mil", "-o", "b.mlpackage", "--precision", "fp8"],
    ["convert", "a.mil", "-o", "b.mlpackage", "--target", "iOS14"],
    ["convert", "a.mil", "-o", "b.mlpackage", "--pipeline", "fast"],
    ["run", "m.mlpackage", "--input", "x"],
    ["run", "m.mlpackage", "--input", "=x.npy"],
    ["validate"],
])
def test_usage_errors_exit_2(capsys, argv):
    code, out, err = cli(capsys, *argv)
    assert code == 2, (argv, err)
    assert "usage:" in err and "Traceback" not in err


@pytest.mark.parametrize("command", ["info", "print", "diff", "convert", "run", "validate"])
def test_every_command_has_help(capsys, command):
    code, out, err = cli(capsys, command, "--help")
    assert code == 0
    assert out.startswith(f"usage: milkit {command}")


def test_version(capsys):
    code, out, _ = cli(capsys, "--version")
    assert code == 0 and out.strip() == f"milkit {milkit.__version__}"


# ---- bad input for every command -------------------------------------------------------------------
BAD = ["missing", "notpkg", "trunc_model", "bad_manifest", "trunc_weights"]
BAD_MESSAGES = {
    "missing": "no such file or directory",
    "notpkg": "not an .mlpackage: Manifest.json is missing",
    "trunc_model": "not a valid Core ML model protobuf",
    "bad_manifest": "invalid JSON",
    "trunc_weights": "past the end of the file",
}


def _argv(command, path, files):
    out = os.path.join(files["dir"], "out_bad.mlpackage")
    return {
        "info": ["info", path],
        "info --json": ["info", path, "--json"],
        "print": ["print", path],
        "diff": ["diff", files["mk"], path],
        "diff2": ["diff", path, files["mk"], "--json"],
        "convert": ["convert", path, "-o", out],
        "run": ["run", path, "--input", f"x={files['dir']}/x.npy"],
    }[command]


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("command", ["info", "info --json", "print", "diff", "diff2", "convert", "run"])
def test_bad_input_is_one_clear_line(capsys, files, command, bad):
    code, out, err = cli(capsys, *_argv(command, files[bad], files))
    assert_bad_input(code, err, os.path.basename(files[bad]))
    assert BAD_MESSAGES[bad] in err
    assert out == ""
    assert not os.path.exists(os.path.join(files["dir"], "out_bad.mlpackage"))


@pytest.mark.parametrize("bad", BAD)
def test_validate_reports_bad_input(capsys, files, bad):
    code, out, err = cli(capsys, "validate", files[bad])
    assert code == 1
    assert "Traceback" not in out + err
    text = out + err
    assert os.path.basename(files[bad]) in text and BAD_MESSAGES[bad] in text
    if bad != "missing":
        code, out, _ = cli(capsys, "validate", files[bad], "--json")
        res = json.loads(out)
        assert code == 1 and res["ok"] is False and res["checks"]["load"] == "failed"
        assert BAD_MESSAGES[bad] in res["problems"][0]["message"]


def test_text_file_errors(capsys, files, tmp_path):
    bad_text = tmp_path / "bad.mil"
    bad_text.write_text("main[CoreML7](%x: (1, fp32)(Tensor)) {\n  block0() {\n    %y = frob(x=%x)\n")
    code, _, err = cli(capsys, "info", bad_text)
    assert_bad_input(code, err, "bad.mil")
    assert "not a valid MIL text" in err
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\x00\x01\x02garbage")
    code, _, err = cli(capsys, "print", binary)
    assert_bad_input(code, err, "blob.bin")
    empty = tmp_path / "empty.mil"
    empty.write_text("")
    code, _, err = cli(capsys, "info", empty)
    assert_bad_input(code, err, "empty.mil")
    for suffix in (".pt",):
        p = tmp_path / f"model{suffix}"
        p.write_bytes(b"PK\x03\x04")
        code, _, err = cli(capsys, "convert", p, "-o", tmp_path / "o.mlpackage")
        assert_bad_input(code, err, f"model{suffix}")
        assert "not supported yet" in err
        code, _, err = cli(capsys, "info", p)
        assert_bad_input(code, err, f"model{suffix}")
        assert "not supported yet" in err


def test_traceback_flag_shows_python_traceback(files):
    code, _, err = cli_subprocess("--traceback", "info", files["trunc_model"])
    assert code == 1 and "Traceback" in err and "FormatError" in err


# ---- info --------------------------------------------------------------------------------------
def test_info_milkit_package(capsys, files):
    code, out, err = cli(capsys, "info", files["mk"])
    assert code == 0, err
    assert "specification version: 8 (deployment target iOS17)" in out
    assert "functions: main (default)" in out
    assert re.search(r"x: \(1, (\w+), 4\) fp32  \1 in \[1, 64\]", out), out  # the loader names symbols anew
    assert "y: (2,) int32" in out
    assert "matmul 1" in out and "tanh" not in out
    assert "weights: 1 const tensor, 256 B (fp32: 1, 256 B)" in out
    assert "milkit-version: 0.1.0" in out

    code, out, _ = cli(capsys, "info", files["mk"], "--json")
    facts = json.loads(out)
    assert facts["kind"] == "mlpackage"
    assert facts["specification_version"] == 8 and facts["deployment_target"] == "iOS17"
    assert facts["default_function"] == "main"
    (fn,) = facts["functions"]
    assert fn["name"] == "main" and fn["default"] and fn["opset"] == "iOS17"
    x, y = fn["inputs"]
    sym = x["shape"][1]
    assert x["name"] == "x" and x["dtype"] == "fp32" and x["shape"] == [1, sym, 4] and isinstance(sym, str)
    assert x["ranges"] == {sym: [1, 64]}
    assert y["shape"] == [2] and y["dtype"] == "int32" and "ranges" not in y
    assert [o["name"] for o in fn["outputs"]] == ["scale", "y1"]
    assert fn["outputs"][0]["shape"] == [1, sym, 16]
    assert fn["states"] == []
    assert fn["ops"] == {"add": 1, "matmul": 1, "mul": 1, "relu": 1}
    assert fn["num_ops"] == 4
    assert facts["weights"]["count"] == 1 and facts["weights"]["bytes"] == W.nbytes
    assert facts["weights"]["by_dtype"] == {"fp32": {"count": 1, "bytes": W.nbytes}}
    assert facts["weights"]["file_bytes"] == os.path.getsize(os.path.join(files["mk"], WEIGHTS))
    assert facts["metadata"]["user_defined"] == {"milkit-version": milkit.__version__}


def test_info_coremltools_package_metadata(capsys, files):
    code, out, err = cli(capsys, "info", files["ct"])
    assert code == 0, err
    assert "specification version: 7 (deployment target iOS16)" in out
    assert "author: Ada <ada@example.com>" in out and "license: MIT" in out and "version: 1.2" in out
    assert "short description: a small <test> model" in out
    assert "com.github.apple.coremltools.version:" in out
    facts = json.loads(cli(capsys, "info", files["ct"], "--json")[1])
    md = facts["metadata"]
    assert md["author"] == "Ada <ada@example.com>" and md["license"] == "MIT" and md["version"] == "1.2"
    assert md["short_description"] == "a small <test> model"
    assert md["user_defined"]["k"] == "v"
    assert md["user_defined"]["com.github.apple.coremltools.source"] == "milinternal"
    fn = facts["functions"][0]
    assert fn["ops"] == {"cast": 2, "matmul": 1, "relu": 1}  # coremltools' fp16 pipeline
    assert facts["weights"]["by_dtype"] == {"fp16": {"count": 1, "bytes": W.size * 2}}


def test_info_enumerated_shapes_states_and_text(capsys, files):
    facts = json.loads(cli(capsys, "info", files["enum"], "--json")[1])
    x = facts["functions"][0]["inputs"][0]
    assert x["enumerated_shapes"] == [[1, 8], [1, 4]] and x["default_shape"] == [1, 8]
    out = cli(capsys, "info", files["enum"])[1]
    assert "enumerated shapes (1, 8), (1, 4)" in out

    facts = json.loads(cli(capsys, "info", files["state"], "--json")[1])
    fn = facts["functions"][0]
    assert [s["name"] for s in fn["states"]] == ["cache"] and fn["states"][0]["dtype"] == "fp16"
    assert fn["states"][0]["shape"] == [2, 3]
    assert [i["name"] for i in fn["inputs"]] == ["x"]
    assert facts["deployment_target"] == "iOS18"
    assert "states:\n    cache: (2, 3) fp16" in cli(capsys, "info", files["state"])[1]

    code, out, _ = cli(capsys, "info", files["mil"], "--json")
    facts = json.loads(out)
    assert code == 0 and facts["kind"] == "mil" and facts["deployment_target"] == "iOS17"
    assert facts["functions"][0]["ops"] == {"add": 1, "matmul": 1, "mul": 1, "relu": 1}
    assert "file_bytes" not in facts["weights"] and facts["weights"]["bytes"] == W.nbytes


# ---- print -------------------------------------------------------------------------------------
def test_print(capsys, files):
    code, out, _ = cli(capsys, "print", files["mk"])
    assert code == 0
    prog = milkit.load(files["mk"])

    def same(a, b):  # each load names the symbolic dim anew
        return re.sub(r"\bis\d+\b", "S", a).rstrip("\n") == re.sub(r"\bis\d+\b", "S", b).rstrip("\n")

    assert same(out, str(prog))
    code, out, _ = cli(capsys, "print", files["mk"], "--consts")
    assert same(out, milkit.to_text(prog, consts=True))
    back = milkit.parse(out)  # exact: parses back to the same weights
    w = [o for o in back.find_ops(op_type="const") if o.name == "mm_y_0"][0]
    np.testing.assert_array_equal(w.outputs[0].val, W)
    code, out, _ = cli(capsys, "print", files["mk"], "--consts", "--max-const-elems", "4")
    assert "<elided 64 elems>" in out
    code, out, _ = cli(capsys, "print", files["ct"], "--function", "main")
    assert code == 0 and out.lstrip().startswith("main[CoreML6]")
    code, _, err = cli(capsys, "print", files["ct"], "--function", "nope")
    assert_bad_input(code, err, "ct.mlpackage")
    assert "no function named 'nope'" in err


# ---- diff --------------------------------------------------------------------------------------
def test_diff_same_program_package_and_text(capsys, files):
    code, out, _ = cli(capsys, "diff", files["mk"], files["mil"], "--exit-code")
    assert code == 0, out
    assert "no differences" in out
    assert "only one side is a package" in out
    assert "MIL text does not carry them" in out  # symbolic dim ranges
    code, out, _ = cli(capsys, "diff", files["mk"], files["mk"], "--json")
    d = json.loads(out)
    assert code == 0 and d["identical"] and d["notes"] == [] and d["description"] == []


def test_diff_changed_program(capsys, files):
    code, out, _ = cli(capsys, "diff", files["mk"], files["mk2"])
    assert code == 0  # differences alone do not fail without --exit-code
    assert f"--- {files['mk']}" in out and f"+++ {files['mk2']}" in out
    assert "~ op act (tanh)" in out and "type: relu -> tanh" in out
    assert "+ op extra (sigmoid)" in out
    assert "input y: 2.0 (fp32) -> 3.0 (fp32)" in out
    assert "~ weight mm_y_0 (4, 16) fp32: 1 of 64 values differ, max abs diff 0.5" in out
    assert cli(capsys, "diff", files["mk"], files["mk2"], "--exit-code")[0] == 1

    d = json.loads(cli(capsys, "diff", files["mk"], files["mk2"], "--json")[1])
    assert not d["identical"]
    assert d["ops"]["added"] == [{"function": "main", "name": "extra", "type": "sigmoid"}]
    assert d["ops"]["removed"] == []
    changed = {o["name"]: o for o in d["ops"]["changed"]}
    assert {c["field"] for c in changed["act"]["changes"]} >= {"type"}
    assert {"field": "input y", "a": "2.0 (fp32)", "b": "3.0 (fp32)"} in changed["scale"]["changes"]
    assert "mm" not in changed  # its weight differs, its inputs refer to the same %mm_y_0
    (w,) = d["weights"]["changed"]
    assert w["name"] == "mm_y_0" and w["num_different"] == 1 and w["max_abs_diff"] == 0.5
    assert w["num_elements"] == 64 and w["changes"] == []
    # the outputs: a different op now produces the first one
    assert any(c["field"] == "output 0" for c in d["function_changes"])
    assert d["summary"]["ops_added"] == 1 and d["summary"]["weights_changed"] == 1


def test_diff_milkit_vs_coremltools_package(capsys, files):
    code, out, _ = cli(capsys, "diff", files["mk"], files["ct"])
    assert code == 0
    assert "~ specificationVersion: 8 -> 7" in out
    assert "~ metadata.author: '' -> Ada <ada@example.com>" in out
    assert "~ opset: iOS17 -> iOS16" in out
    assert "- weight mm_y_0 (4, 16) fp32" in out and "+ weight mm_y_0_to_fp16 (4, 16) fp16" in out
    d = json.loads(cli(capsys, "diff", files["mk"], files["ct"], "--json")[1])
    fields = {c["field"]: c for c in d["description"]}
    assert fields["metadata.license"] == {"field": "metadata.license", "a": "", "b": "MIT"}
    assert fields["specificationVersion"]["b"] == 7
    assert "input x" in fields  # (1, s, 4) with a range vs (1, 4)
    assert {o["type"] for o in d["ops"]["added"]} >= {"cast"}


def test_diff_weight_dtype_and_shape_changes(capsys, files, tmp_path):
    a, b = tmp_path / "a.mil", tmp_path / "b.mil"
    a.write_text(milkit.to_text(_mk_prog(), consts=True))
    b.write_text(milkit.to_text(_mk_prog(w=np.ones((4, 8), np.float32)), consts=True))
    d = json.loads(cli(capsys, "diff", a, b, "--json")[1])
    (w,) = d["weights"]["changed"]
    assert w["changes"] == [{"field": "shape", "a": [4, 16], "b": [4, 8]}] and "max_abs_diff" not in w
    out = cli(capsys, "diff", a, b)[1]
    assert "shape (4, 16) -> (4, 8)" in out


# ---- convert ------------------------------------------------------------------------------------
def test_convert_mil_text(capsys, files, tmp_path):
    out_pkg = tmp_path / "from_text.mlpackage"
    code, out, err = cli(capsys, "convert", files["mil"], "-o", out_pkg, "--precision", "fp32")
    assert code == 0, err
    assert f"wrote {out_pkg} (iOS17, fp32" in out
    prog = milkit.load(out_pkg)
    assert "cast" not in {o.op_type for o in prog.find_ops()}
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 2, 4)
    y = np.array([1, 2], np.int32)
    want = milkit.run(milkit.load(files["mk"]), {"x": x, "y": y})
    got = milkit.run(prog, {"x": x, "y": y})
    np.testing.assert_allclose(got["scale"], want["scale"], rtol=1e-6)
    # fp16 (the default precision) adds the casts
    code, _, _ = cli(capsys, "convert", files["mil"], "-o", tmp_path / "fp16.mlpackage")
    assert code == 0
    assert "cast" in {o.op_type for o in milkit.load(tmp_path / "fp16.mlpackage").find_ops()}


def test_convert_package_target_pipeline(capsys, files, tmp_path):
    out_pkg = tmp_path / "t18.mlpackage"
    code, out, err = cli(capsys, "convert", files["ct"], "-o", out_pkg, "--target", "iOS18", "--pipeline", "empty")
    assert code == 0, err
    facts = json.loads(cli(capsys, "info", out_pkg, "--json")[1])
    assert facts["specification_version"] == 9 and facts["functions"][0]["opset"] == "iOS18"
    assert "iOS18" in out and "empty pipeline" in out
    # the default target is the source's own
    code, out, _ = cli(capsys, "convert", files["ct"], "-o", tmp_path / "own.mlpackage", "--pipeline", "cleanup")
    assert code == 0 and "(iOS16," in out
    # enumerated shapes of a package survive conversion
    code, _, _ = cli(capsys, "convert", files["enum"], "-o", tmp_path / "enum2.mlpackage")
    x = json.loads(cli(capsys, "info", tmp_path / "enum2.mlpackage", "--json")[1])["functions"][0]["inputs"][0]
    assert code == 0 and x["enumerated_shapes"] == [[1, 8], [1, 4]]
    # replacing an existing package
    code, _, _ = cli(capsys, "convert", files["mil"], "-o", out_pkg)
    assert code == 0 and json.loads(cli(capsys, "info", out_pkg, "--json")[1])["deployment_target"] == "iOS17"


def test_convert_errors(capsys, files, tmp_path):
    code, _, err = cli(capsys, "convert", files["state"], "-o", tmp_path / "o.mlpackage", "--target", "iOS17")
    assert_bad_input(code, err, "state.mlpackage")
    assert "newer than minimum_deployment_target iOS17" in err
    code, _, err = cli(capsys, "convert", files["mk"], "-o", tmp_path / "no" / "such" / "o.mlpackage")
    assert_bad_input(code, err, "o.mlpackage")
    assert "does not exist" in err
    (tmp_path / "file.mlpackage").write_text("x")
    code, _, err = cli(capsys, "convert", files["mk"], "-o", tmp_path / "file.mlpackage")
    assert_bad_input(code, err, "file.mlpackage")


# ---- run ---------------------------------------------------------------------------------------
def test_run_milkit_package(capsys, files, tmp_path):
    d = files["dir"]
    x = np.load(os.path.join(d, "x.npy"))
    y = np.load(os.path.join(d, "y.npy"))
    want = milkit.run(milkit.load(files["mk"]), {"x": x, "y": y})
    code, out, err = cli(capsys, "run", files["mk"], "--input", f"x={d}/x.npy", "-i", f"y={d}/y.npy",
                         "--output-dir", tmp_path / "outs")
    assert code == 0, err
    assert "scale: shape (1, 3, 16) float32" in out and "y1: shape (2,) int32" in out
    assert f"min {want['scale'].min():.6g}" in out
    assert "[4, 5]" in out
    for name in ("scale", "y1"):
        np.testing.assert_array_equal(np.load(tmp_path / "outs" / f"{name}.npy"), want[name])
    code, out, _ = cli(capsys, "run", files["mk"], "-i", f"x={d}/x.npy", "-i", f"y={d}/y.npy", "--json",
                       "--print-values")
    res = json.loads(out)
    assert res["function"] == "main"
    assert res["outputs"]["y1"] == {"shape": [2], "dtype": "int32", "nan": 0, "min": 4.0, "max": 5.0, "mean": 4.5,
                                    "values": [4, 5]}
    np.testing.assert_allclose(np.array(res["outputs"]["scale"]["values"], np.float32), want["scale"])
    code, out, _ = cli(capsys, "run", files["mk"], "-i", f"x={d}/x.npy", "-i", f"y={d}/y.npy", "--print-values")
    assert "..." not in out.split("y1:")[0]  # every value of the first output


def test_run_coremltools_text_and_state(capsys, files):
    d = files["dir"]
    np.save(os.path.join(d, "x14.npy"), np.ones((1, 4), np.float32))
    code, out, err = cli(capsys, "run", files["ct"], "-i", f"x={d}/x14.npy")
    assert code == 0, err
    want = (np.ones((1, 4), np.float32) @ W).max()
    assert "out: shape (1, 16) float32" in out and f"max {want:.6g}" in out
    code, out, err = cli(capsys, "run", files["mil"], "-i", f"x={d}/x.npy", "-i", f"y={d}/y.npy")
    assert code == 0 and "scale: shape (1, 3, 16) float32" in out, err
    code, out, err = cli(capsys, "run", files["state"], "-i", f"x={d}/xs.npy")
    assert code == 0, err
    assert "out: shape (2, 3) float16  min 3  max 3" in out  # a fresh zero state: cache = x, out = 2x


@pytest.mark.parametrize("case, inputs, message", [
    ("unknown name", ["z=x.npy", "y=y.npy"], "has no input named 'z'; its inputs are x, y"),
    ("missing input", ["x=x.npy"], "missing input y: give --input y=FILE.npy"),
    ("bad shape", ["x=x_rank2.npy", "y=y.npy"], "input 'x' has shape (3, 4)"),
    ("bad dtype", ["x=x.npy", "y=y_float.npy"], "input 'y' has dtype float32, which cannot be cast safely"),
    ("missing file", ["x=nope.npy", "y=y.npy"], "nope.npy: no such file"),
    ("not npy", ["x=../mk.mil", "y=y.npy"], "not a .npy file"),
    ("twice", ["x=x.npy", "x=x.npy", "y=y.npy"], "given twice"),
])
def test_run_bad_inputs(capsys, files, case, inputs, message):
    d = files["dir"]
    argv = ["run", files["mk"]]
    for i in inputs:
        name, path = i.split("=")
        argv += ["--input", f"{name}={os.path.join(d, path) if path != '../mk.mil' else files['mil']}"]
    code, out, err = cli(capsys, *argv)
    assert_bad_input(code, err, "mk.mlpackage", "nope.npy", "mk.mil", "'x'")
    assert message in err, err
    code, _, err = cli(capsys, "run", files["mk"], "--function", "other", "-i", f"x={d}/x.npy")
    assert_bad_input(code, err, "mk.mlpackage")
    assert "no function named 'other'" in err


def test_run_enumerated_shape_is_checked(capsys, files, tmp_path):
    np.save(tmp_path / "x6.npy", np.ones((1, 6), np.float32))
    np.save(tmp_path / "x4.npy", np.ones((1, 4), np.float32))
    assert cli(capsys, "run", files["enum"], "-i", f"x={tmp_path}/x4.npy")[0] == 0
    code, _, err = cli(capsys, "run", files["enum"], "-i", f"x={tmp_path}/x6.npy")
    assert_bad_input(code, err, "enum.mlpackage")
    assert "not one of the model's enumerated shapes" in err


# ---- validate ----------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["mk", "ct", "enum", "state", "mil"])
def test_validate_ok(capsys, files, key):
    code, out, err = cli(capsys, "validate", files[key])
    assert code == 0, out + err
    assert out.startswith(f"{files[key]}: ok (load, verify")
    res = json.loads(cli(capsys, "validate", files[key], "--json")[1])
    assert res["ok"] and res["problems"] == []
    want = "ok" if key != "mil" else "skipped"  # a MIL text has no description
    assert res["checks"] == {"load": "ok", "verify": "ok", "description": want, "weights": "ok", "plan": "ok"}


def test_validate_description_mismatch(capsys, files, tmp_path):
    from coremltools.proto import Model_pb2

    pkg = tmp_path / "renamed.mlpackage"
    shutil.copytree(files["ct"], pkg)
    spec = Model_pb2.Model()
    spec.ParseFromString((pkg / MODEL).read_bytes())
    spec.description.input[0].name = "renamed"
    spec.description.output[0].type.multiArrayType.dataType = Model_pb2.ArrayFeatureType.INT32
    (pkg / MODEL).write_bytes(spec.SerializeToString())
    code, out, err = cli(capsys, "validate", pkg)
    assert code == 1 and "Traceback" not in out + err
    assert "2 problems" in out
    assert "description: function 'main': the description's inputs are ['renamed'], the program's are ['x']" in out
    assert "output 'out' is described as INT32, the program's is fp32" in out
    res = json.loads(cli(capsys, "validate", pkg, "--json")[1])
    assert res["checks"]["description"] == "failed" and res["checks"]["plan"] == "ok"


def test_convert_pt2(tmp_path, capsys):
    import torch

    ep = torch.export.export(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval(), (torch.randn(2, 4),))
    src = tmp_path / "mlp.pt2"
    torch.export.save(ep, str(src))
    code, out, err = cli(capsys, "convert", src, "-o", tmp_path / "mlp.mlpackage", "--target", "iOS17")
    assert code == 0, err
    assert "iOS17" in out and os.path.isdir(tmp_path / "mlp.mlpackage")
    code, out, err = cli(capsys, "print", src)
    assert code == 0, err
    assert "linear(" in out and "relu(" in out
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(b"PK\x03\x04")
    for cmd in (["convert", bad, "-o", tmp_path / "o.mlpackage"], ["info", bad]):
        code, _, err = cli(capsys, *cmd)
        assert_bad_input(code, err, "bad.pt2")


def test_convert_onnx(tmp_path, capsys):
    import onnx
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    src = tmp_path / "relu.onnx"
    onnx.save(m, str(src))
    code, out, err = cli(capsys, "convert", src, "-o", tmp_path / "relu.mlpackage", "--target", "iOS17")
    assert code == 0, err
    assert "iOS17" in out and os.path.isdir(tmp_path / "relu.mlpackage")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"PK\x03\x04")
    code, _, err = cli(capsys, "convert", bad, "-o", tmp_path / "o.mlpackage")
    assert_bad_input(code, err, "bad.onnx")
    assert "not an ONNX model" in err
