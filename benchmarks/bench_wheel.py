#!/usr/bin/env python3
"""The binary wheel against the source build, in the same run (the wheel must not be a slower
build), plus the wheel's own figures: size, install time into a fresh venv, `import milkit` time.

    python benchmarks/bench_wheel.py [--wheel dist/milkit-*.whl] [--rounds 5]

Each round runs one child per build, alternating (wheel venv, then PYTHONPATH=python), each child
timing: build + convert + save of a 12-layer 768-wide transformer with a symbolic sequence (FLOAT16),
and predict of a 6-layer 512-wide one at sequence 128 (2 threads). Medians are reported.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CHILD = r'''
import json, os, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
import numpy as np
t0 = time.perf_counter()
import milkit as ct
t_import = time.perf_counter() - t0
sys.path.pop(0)
sys.path.insert(0, os.path.join(sys.argv[2], "examples"))
from demo import build, transformer_weights
w = transformer_weights(12, 768)
t0 = time.perf_counter()
prog = build(w, 768)
with tempfile.TemporaryDirectory() as tmp:
    m = ct.convert(prog, minimum_deployment_target=ct.target.iOS17, compute_precision=ct.precision.FLOAT16)
    m.save(os.path.join(tmp, "t.mlpackage"))
t_convert = time.perf_counter() - t0
small = ct.convert(build(transformer_weights(6, 512, seed=1), 512), minimum_deployment_target=ct.target.iOS17,
                   compute_precision=ct.precision.FLOAT32)
x = np.random.default_rng(0).standard_normal((1, 128, 512)).astype(np.float32)
small.predict({"x": x})
ts = []
for _ in range(5):
    t0 = time.perf_counter(); small.predict({"x": x}); ts.append(time.perf_counter() - t0)
print(json.dumps({"file": ct.__file__, "import": t_import, "convert": t_convert, "predict": sorted(ts)[2]}))
'''


def _child(python: str, path: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(MILKIT_NUM_THREADS="2", MILKIT_PROGRESS="0")
    out = subprocess.run([python, "-c", CHILD, path, ROOT], capture_output=True, text=True, env=env, check=True,
                         cwd=tempfile.gettempdir())
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--wheel", default=None)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    wheel = args.wheel or sorted(glob.glob(os.path.join(ROOT, "dist", "milkit-*manylinux*.whl")))[-1]
    with tempfile.TemporaryDirectory() as tmp:
        venv = os.path.join(tmp, "venv")
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
        py = os.path.join(venv, "bin", "python")
        t0 = time.perf_counter()
        subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check", wheel],
                       check=True)
        t_install = time.perf_counter() - t0
        rows: dict[str, list[dict]] = {"wheel": [], "source": []}
        for _ in range(args.rounds):
            rows["wheel"].append(_child(py, os.path.join(tmp, "nothing")))
            rows["source"].append(_child(sys.executable, os.path.join(ROOT, "python")))
    assert "site-packages" in rows["wheel"][0]["file"] and "site-packages" not in rows["source"][0]["file"]
    med = {k: {m: statistics.median(r[m] for r in v) for m in ("import", "convert", "predict")}
           for k, v in rows.items()}
    print(f"wheel: {os.path.basename(wheel)}, {os.path.getsize(wheel) / 1e6:.1f} MB; "
          f"pip install --no-deps into a fresh venv: {t_install:.1f} s")
    print("| measure | source build | wheel | wheel / source |")
    print("|---|---|---|---|")
    for m, label, unit in (("import", "import milkit", 1e3), ("convert", "build + convert + save, 12x768 fp16", 1),
                           ("predict", "predict, 6x512 seq 128, 2 threads", 1e3)):
        s, w = med["source"][m], med["wheel"][m]
        u = "ms" if unit == 1e3 else "s"
        print(f"| {label} | {s * unit:.3g} {u} | {w * unit:.3g} {u} | {w / s:.2f}x |")


if __name__ == "__main__":
    main()
