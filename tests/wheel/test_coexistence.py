"""The installed wheel beside torch, onnx and onnxruntime in one process, in each import order
that matters: milkit's protobuf-lite, OpenBLAS and minizip are linked into its extension with only
PyInit__core exported, so nothing of theirs can bind to another package's copy (or the reverse).

Run by packaging/test-wheel.sh with the Python of a venv that has the wheel installed and sees the
system's torch, onnx and onnxruntime:  python -m pytest tests/wheel/test_coexistence.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

__all__: list[str] = []

HERE = os.path.dirname(os.path.abspath(__file__))

# each of torch / onnx / onnxruntime before milkit, all of them before, milkit before all of them
ORDERS = [
    ("torch", "milkit"),
    ("onnx", "milkit"),
    ("onnxruntime", "milkit"),
    ("torch", "onnx", "onnxruntime", "milkit"),
    ("onnxruntime", "onnx", "torch", "milkit"),
    ("milkit", "torch", "onnx", "onnxruntime"),
    ("milkit", "onnxruntime", "onnx", "torch"),
]

SCRIPT = textwrap.dedent('''
    import importlib, os, sys, tempfile
    order = sys.argv[2].split(",")
    mods = {name: importlib.import_module(name) for name in order}
    import numpy as np
    import milkit as ct
    import onnx, onnxruntime as ort, torch
    assert "site-packages" in ct.__file__ and os.path.realpath(ct.__file__).startswith(os.path.realpath(sys.prefix)), ct.__file__
    fx = sys.argv[1]
    exp = np.load(os.path.join(fx, "expected.npz"))
    # milkit: an .onnx, a .pt2, and a saved package loaded and run
    m = ct.convert(os.path.join(fx, "model.onnx"), minimum_deployment_target=ct.target.iOS17, compute_precision=ct.precision.FLOAT32)
    got = m.predict({"input": exp["onnx_x_6"]})["output"]
    assert np.allclose(got, exp["onnx_y_6"], rtol=1e-5, atol=1e-6), "onnx"
    m = ct.convert(os.path.join(fx, "model.pt2"), minimum_deployment_target=ct.target.iOS17, compute_precision=ct.precision.FLOAT32)
    with tempfile.TemporaryDirectory() as tmp:
        m.save(os.path.join(tmp, "m.mlpackage"))
        (got,) = ct.models.MLModel(os.path.join(tmp, "m.mlpackage")).predict({"x": exp["pt2_x_11"]}).values()
    assert np.allclose(got, exp["pt2_y_11"], rtol=1e-4, atol=1e-4), "pt2"
    # milkit from a torch program in memory (torch's own objects handed over)
    ep = torch.export.load(os.path.join(fx, "model.pt2"))
    (got,) = ct.convert(ep, minimum_deployment_target=ct.target.iOS17, compute_precision=ct.precision.FLOAT32).predict({"x": exp["pt2_x_5"]}).values()
    assert np.allclose(got, exp["pt2_y_5"], rtol=1e-4, atol=1e-4), "ExportedProgram"
    # ... and from an onnx.ModelProto parsed by onnx's protobuf
    proto = onnx.load(os.path.join(fx, "model.onnx"))
    onnx.checker.check_model(proto)
    got = ct.convert(proto, minimum_deployment_target=ct.target.iOS17, compute_precision=ct.precision.FLOAT32).predict({"input": exp["onnx_x_1"]})["output"]
    assert np.allclose(got, exp["onnx_y_1"], rtol=1e-5, atol=1e-6), "ModelProto"
    # the others still work after milkit ran
    sess = ort.InferenceSession(os.path.join(fx, "model.onnx"), providers=["CPUExecutionProvider"])
    assert np.allclose(sess.run(None, {"input": exp["onnx_x_6"]})[0], exp["onnx_y_6"], rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        y = ep.module()(torch.from_numpy(exp["pt2_x_11"])).numpy()
    assert np.allclose(y, exp["pt2_y_11"], rtol=1e-4, atol=1e-4)
    a = np.random.default_rng(0).standard_normal((300, 300)).astype(np.float32)
    assert np.allclose(a @ a, torch.from_numpy(a) @ torch.from_numpy(a), rtol=1e-4, atol=1e-3)
    print("ok", ",".join(order))
''')


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = str(tmp_path_factory.mktemp("fixtures"))
    subprocess.run([sys.executable, os.path.join(HERE, "make_fixtures.py"), out], check=True,
                   capture_output=True)
    return out


@pytest.mark.parametrize("order", ORDERS, ids=["-".join(o) for o in ORDERS])
def test_import_order(order: tuple[str, ...], fixtures: str, tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["MILKIT_NUM_THREADS"] = "2"
    r = subprocess.run([sys.executable, "-c", SCRIPT, fixtures, ",".join(order)], capture_output=True, text=True,
                       env=env, cwd=str(tmp_path), timeout=600)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert f"ok {','.join(order)}" in r.stdout


def test_extension_exports_only_its_init() -> None:
    import milkit

    ext = [f for f in os.listdir(os.path.dirname(milkit.__file__)) if f.startswith("_core") and f.endswith(".so")]
    assert len(ext) == 1, ext
    out = subprocess.run(["nm", "-D", "--defined-only", os.path.join(os.path.dirname(milkit.__file__), ext[0])],
                         capture_output=True, text=True, check=True).stdout
    names = [line.split()[-1] for line in out.splitlines() if line.strip()]
    assert names == ["PyInit__core"], names[:20]


def test_threads_do_not_oversubscribe(tmp_path) -> None:
    """numpy's OpenBLAS and milkit's pool, with 2 threads set: milkit's own OpenBLAS computes
    single-threaded blocks (its pool does the splitting), so while milkit predicts, the CPU time goes
    to MILKIT_NUM_THREADS threads (the caller's and one worker); the idle OpenBLAS pools (numpy's,
    milkit's) take none of it."""
    script = textwrap.dedent('''
        import os, numpy as np, milkit as ct
        from milkit import Builder as mb, types
        def cpu():
            out = {}
            for t in os.listdir("/proc/self/task"):
                f = open(f"/proc/self/task/{t}/stat").read().rsplit(")", 1)[1].split()
                out[t] = int(f[11]) + int(f[12])   # utime + stime, in clock ticks
            return out
        a = np.ones((512, 512), np.float32); a @ a        # numpy's OpenBLAS pool starts
        @mb.program(input_specs=[mb.TensorSpec(shape=(1024, 1024), dtype=types.fp32)])
        def prog(x):
            for _ in range(8):
                x = mb.matmul(x=x, y=x)
            return x
        model = ct.convert(prog, minimum_deployment_target=ct.target.iOS17, compute_precision=ct.precision.FLOAT32)
        x = np.full((1024, 1024), 1e-3, np.float32)
        model.predict({"x": x})
        c0 = cpu()
        for _ in range(3):
            model.predict({"x": x})
        c1 = cpu()
        print("ticks", *sorted((c1[t] - c0.get(t, 0) for t in c1), reverse=True))
    ''')
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["MILKIT_NUM_THREADS"] = "2"
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=str(tmp_path),
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    ticks = [int(t) for t in r.stdout.split()[1:]]
    print(f"threads {len(ticks)}, CPU ticks per thread while predicting: {ticks}")
    assert len(ticks) >= 3 and ticks[1] > 0, r.stdout   # the pool's worker did work
    assert sum(ticks[2:]) <= 0.05 * sum(ticks) + 1, f"threads beyond the 2 set took CPU time: {ticks}"
