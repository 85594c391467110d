"""The installed wheel, used as a person would, where nothing else is installed (the clean root of
packaging/test-wheel.sh): the README's quick start, a transformer converted, saved, loaded and run
against numpy, `milkit info` and `milkit --version`, and a .pt2 and an .onnx imported and run
against torch eager's and onnxruntime's outputs (made on the host by make_fixtures.py).

    python smoke.py FIXTURES_DIR README.md
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

__all__ = ["main"]


def _check(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> None:
    got = np.asarray(got)
    if got.shape != want.shape:
        raise AssertionError(f"{name}: shape {got.shape}, expected {want.shape}")
    err = float(np.max(np.abs(got - want))) if want.size else 0.0
    if not np.allclose(got, want, rtol=rtol, atol=atol):
        raise AssertionError(f"{name}: max abs error {err}")
    print(f"ok  {name}: max abs error {err:.2e}")


def _readme_quickstart(readme: str) -> None:
    text = open(readme, encoding="utf-8").read()
    block = re.search(r"```python\n(.*?)```", text, re.S)
    assert block, "the README has no python block"
    code = block.group(1)
    assert "mb.program" in code, "the README's first python block is not the quick start"
    scope: dict = {}
    exec(compile(code, "README.md quick start", "exec"), scope)
    prog = scope["prog"]
    text = str(prog)
    assert "transpose" in text and "layer_norm" in text, text
    print("ok  README quick start:", text.splitlines()[1].strip()[:80])


def _layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-5) * g + b


def _transformer(tmp: str) -> None:
    import milkit as ct
    from milkit import Builder as mb
    from milkit import get_new_symbol, types

    H, heads, hd = 64, 4, 16
    rng = np.random.default_rng(0)

    def f(*s: int) -> np.ndarray:
        return (rng.standard_normal(s) * 0.1).astype(np.float32)

    layers = [dict(g1=1 + f(H), b1=f(H), wq=f(H, H), wk=f(H, H), wv=f(H, H), wo=f(H, H), bo=f(H),
                   g2=1 + f(H), b2=f(H), w1=f(4 * H, H), c1=f(4 * H), w2=f(H, 4 * H), c2=f(H)) for _ in range(2)]
    S = get_new_symbol("S")

    def heads_of(t):
        return mb.transpose(x=mb.reshape(x=t, shape=[1, -1, heads, hd]), perm=[0, 2, 1, 3])

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, S, H), dtype=types.fp32)], opset_version=ct.target.iOS17)
    def prog(x):
        for L in layers:
            h = mb.layer_norm(x=x, axes=[-1], gamma=L["g1"], beta=L["b1"], epsilon=1e-5)
            q, k, v = (heads_of(mb.linear(x=h, weight=L[w])) for w in ("wq", "wk", "wv"))
            s = mb.softmax(x=mb.mul(x=mb.matmul(x=q, y=k, transpose_y=True), y=np.float32(hd ** -0.5)), axis=-1)
            a = mb.reshape(x=mb.transpose(x=mb.matmul(x=s, y=v), perm=[0, 2, 1, 3]), shape=[1, -1, H])
            x = mb.add(x=x, y=mb.linear(x=a, weight=L["wo"], bias=L["bo"]))
            h = mb.layer_norm(x=x, axes=[-1], gamma=L["g2"], beta=L["b2"], epsilon=1e-5)
            m = mb.relu(x=mb.linear(x=h, weight=L["w1"], bias=L["c1"]))
            x = mb.add(x=x, y=mb.linear(x=m, weight=L["w2"], bias=L["c2"]))
        return x

    def reference(x: np.ndarray) -> np.ndarray:
        for L in layers:
            h = _layer_norm(x, L["g1"], L["b1"])
            q, k, v = ((h @ L[w].T).reshape(1, -1, heads, hd).transpose(0, 2, 1, 3) for w in ("wq", "wk", "wv"))
            s = q @ k.transpose(0, 1, 3, 2) * hd ** -0.5
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            a = (s @ v).transpose(0, 2, 1, 3).reshape(1, -1, H)
            x = x + a @ L["wo"].T + L["bo"]
            h = _layer_norm(x, L["g2"], L["b2"])
            x = x + np.maximum(h @ L["w1"].T + L["c1"], 0) @ L["w2"].T + L["c2"]
        return x

    for precision, tol in ((ct.precision.FLOAT32, 1e-4), (ct.precision.FLOAT16, 3e-2)):
        model = ct.convert(prog, minimum_deployment_target=ct.target.iOS17, compute_precision=precision,
                           inputs=[ct.TensorType(name="x", shape=(1, ct.RangeDim(1, 128), H))])
        path = os.path.join(tmp, f"encoder_{precision.name.lower()}.mlpackage")
        model.save(path)
        loaded = ct.models.MLModel(path)
        for n in (3, 17):
            x = rng.standard_normal((1, n, H)).astype(np.float32)
            (got,) = loaded.predict({"x": x}).values()
            _check(f"transformer {precision.name} seq {n}", got.astype(np.float32), reference(x), tol, tol)
        prog2 = ct.load(path)
        assert len(list(prog2.functions["main"].operations)) > 10


def _cli(tmp: str) -> None:
    exe = os.path.join(os.path.dirname(sys.executable), "milkit")  # the console script pip installed
    assert os.access(exe, os.X_OK), f"no milkit command beside {sys.executable}"
    pkg = os.path.join(tmp, "encoder_float32.mlpackage")
    out = subprocess.run([exe, "info", pkg], capture_output=True, text=True, check=True).stdout
    assert "x" in out and "main" in out, out
    print("ok  milkit info:", out.splitlines()[0][:80])
    ver = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    import milkit

    assert ver == f"milkit {milkit.__version__}", ver
    print("ok  milkit --version:", ver)


def _imports(fixtures: str, tmp: str) -> None:
    import milkit as ct

    exp = np.load(os.path.join(fixtures, "expected.npz"))
    m = ct.convert(os.path.join(fixtures, "model.pt2"), minimum_deployment_target=ct.target.iOS17,
                   compute_precision=ct.precision.FLOAT32)
    (name_in,) = m.get_program().functions["main"].inputs
    m.save(os.path.join(tmp, "pt2.mlpackage"))
    m = ct.models.MLModel(os.path.join(tmp, "pt2.mlpackage"))
    for n in (5, 11):
        (got,) = m.predict({name_in: exp[f"pt2_x_{n}"]}).values()
        _check(f".pt2 seq {n} vs torch eager", got, exp[f"pt2_y_{n}"], 1e-4, 1e-4)
    m = ct.convert(os.path.join(fixtures, "model.onnx"), minimum_deployment_target=ct.target.iOS17,
                   compute_precision=ct.precision.FLOAT32)
    for n in (1, 6):
        _check(f".onnx batch {n} vs onnxruntime", m.predict({"input": exp[f"onnx_x_{n}"]})["output"],
               exp[f"onnx_y_{n}"], 1e-5, 1e-6)
    assert "torch" not in sys.modules and "onnx" not in sys.modules


def _import_time() -> float:
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import milkit"], check=True)
        best = min(best, time.perf_counter() - t)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    bare = time.perf_counter() - t
    print(f"ok  import milkit: {1000 * (best - bare):.0f} ms over a bare interpreter start ({1000 * best:.0f} ms total)")
    return best - bare


def main(argv: list[str]) -> int:
    fixtures, readme = argv[1], argv[2]
    import milkit

    assert "site-packages" in milkit.__file__, milkit.__file__
    print("milkit", milkit.__version__, "from", os.path.dirname(milkit.__file__))
    with tempfile.TemporaryDirectory() as tmp:
        _readme_quickstart(readme)
        _transformer(tmp)
        _cli(tmp)
        _imports(fixtures, tmp)
    _import_time()
    print("smoke: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
