#!/usr/bin/env python3
"""Weight compression: milkit.optimize.coreml against coremltools.optimize.coreml on the same fp16
packages, in one run. Each row is load + compress + save of one package, in a fresh process per
measurement (so peak memory is its own); coremltools runs with scikit-learn installed and
num_kmeans_workers=2, milkit with 2 threads.

Models (made once with milkit, iOS18, fp16): a 12-layer GPT-2-size transformer stack (hidden 768,
85M parameters) and a torchvision ResNet-50 (random weights). Rows: 4-bit k-means per grouped
channel (group_size 16), 4-bit k-means per tensor, int4 per block (32), int8 per channel and 50%
magnitude pruning. Columns: seconds of each tool, the speed-up, the peak memory above the process
before the call against the fp16 weights, and the reconstruction error of the weights (SQNR in dB,
higher is better) of each tool. Then the 4-bit model's predict time and resident memory against
the fp16 model's, with milkit's interpreter.

    PYTHONPATH=python python3 benchmarks/bench_compress.py [--models gpt2,resnet50] [--rows ...]
        [--skip-coremltools]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "bench"))

ROWS = {
    "kmeans4_grouped16": ("palettize", dict(mode="kmeans", nbits=4, granularity="per_grouped_channel", group_size=16)),
    "kmeans4_tensor": ("palettize", dict(mode="kmeans", nbits=4)),
    "int4_block32": ("quantize", dict(dtype="int4", granularity="per_block", block_size=32)),
    "int8_channel": ("quantize", dict(dtype="int8", granularity="per_channel")),
    "prune50": ("prune", dict(target_sparsity=0.5)),
}

WORKER = r"""
import json, os, resource, sys, tempfile, threading, time, warnings, shutil
warnings.simplefilter("ignore")
tool, src, kind, kw = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
if tool == "coremltools":
    import coremltools as ct, coremltools.optimize as cto
    load = lambda p: ct.models.MLModel(p, skip_model_load=True)
    if kind == "palettize":
        kw["num_kmeans_workers"] = 2
else:
    import milkit as ct, milkit.optimize as cto
    ct.set_num_threads(2)
    load = lambda p: ct.models.MLModel(p)
c = cto.coreml
cfg_cls = {"palettize": c.OpPalettizerConfig, "quantize": c.OpLinearQuantizerConfig,
           "prune": c.OpMagnitudePrunerConfig}[kind]
fn = {"palettize": c.palettize_weights, "quantize": c.linear_quantize_weights, "prune": c.prune_weights}[kind]
config = c.OptimizationConfig(global_config=cfg_cls(**kw))


def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


peak = [0]
stop = threading.Event()


def sample():
    while not stop.is_set():
        peak[0] = max(peak[0], rss())
        time.sleep(0.005)


base = rss()
threading.Thread(target=sample, daemon=True).start()
out = tempfile.mkdtemp(dir=os.path.dirname(src))
t0 = time.perf_counter()
m = fn(load(src), config)
m.save(os.path.join(out, "c.mlpackage"))
dt = time.perf_counter() - t0
stop.set()
print(json.dumps({"seconds": dt, "peak": max(peak[0], rss()) - base, "out": os.path.join(out, "c.mlpackage")}))
"""


def make_models(names: list, d: str) -> dict:
    """The fp16 iOS18 packages, by name, and their fp16 weight bytes."""
    import milkit
    import numpy as np

    out = {}
    if "gpt2" in names:
        sys.path.insert(0, SHARED)
        import workloads as W

        ct, mb, types, sym = W.backend("milkit")
        prog = W.build_transformer(ct, mb, types, sym, W.transformer_weights(12, 768), 768, 128)
        path = os.path.join(d, "gpt2.mlpackage")
        milkit.convert(prog, minimum_deployment_target=milkit.target.iOS18).save(path)
        out["gpt2"] = path
    if "resnet50" in names:
        import torch
        import torchvision

        torch.manual_seed(0)
        m = torchvision.models.resnet50().eval()
        ep = torch.export.export(m, (torch.randn(1, 3, 224, 224),))
        path = os.path.join(d, "resnet50.mlpackage")
        milkit.convert(ep, minimum_deployment_target=milkit.target.iOS18).save(path)
        out["resnet50"] = path
    del np
    return out


def weights_of(path: str) -> list:
    """The dense weights of a package (decompressed with milkit), in program order."""
    import milkit
    import milkit.optimize as mto
    import numpy as np

    m = mto.coreml.decompress_weights(milkit.models.MLModel(path))
    f = m.get_program().functions["main"]
    return [np.asarray(op.outputs[0].val, np.float32) for op in f.operations
            if op.op_type == "const" and getattr(op.outputs[0].val, "size", 0) > 2048]


def sqnr(ref: list, got: list) -> float:
    import numpy as np

    if len(ref) != len(got):
        return float("nan")
    s = sum(float(np.sum(r.astype(np.float64) ** 2)) for r in ref)
    n = sum(float(np.sum((r.astype(np.float64) - g) ** 2)) for r, g in zip(ref, got))
    return float("inf") if n == 0 else 10 * np.log10(s / n)


def run(tool: str, src: str, kind: str, kw: dict, env: dict) -> dict:
    r = subprocess.run([sys.executable, "-c", WORKER, tool, src, kind, json.dumps(kw)], capture_output=True,
                       text=True, env=env)
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def predict_row(src: str, small: str) -> str:
    """Predict time and resident memory of the compressed model against the fp16 one (milkit)."""
    code = r"""
import sys, time, numpy as np, milkit
milkit.set_num_threads(2)
m = milkit.models.MLModel(sys.argv[1])
f = milkit.load(sys.argv[1]).functions["main"]
rng = np.random.default_rng(0)
feed = {n: rng.standard_normal([int(d) for d in v.shape]).astype(np.float32) for n, v in f.inputs.items()}
m.predict(feed)
t0 = time.perf_counter()
for _ in range(3):
    m.predict(feed)
dt = (time.perf_counter() - t0) / 3
rss = [int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith('VmRSS:')][0]
print(dt, rss)
"""
    vals = []
    for p in (src, small):
        r = subprocess.run([sys.executable, "-c", code, p], capture_output=True, text=True)
        if r.returncode != 0:
            return f"predict failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}"
        vals.append([float(x) for x in r.stdout.split()])
    (t16, m16), (t4, m4) = vals
    return (f"predict fp16 {t16 * 1e3:.1f} ms, RSS {m16 / 2**20:.0f} MiB | 4-bit {t4 * 1e3:.1f} ms "
            f"({t16 / t4:.2f}x), RSS {m4 / 2**20:.0f} MiB ({m4 / m16:.2f}x)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="gpt2,resnet50")
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--skip-coremltools", action="store_true")
    a = ap.parse_args()
    env = dict(os.environ, MILKIT_PROGRESS="0")
    d = tempfile.mkdtemp(dir=os.environ.get("BENCH_DIR"))
    models = make_models(a.models.split(","), d)
    print(f"{'model':9} {'row':18} {'coremltools s':>13} {'milkit s':>9} {'speed-up':>8} "
          f"{'peak/fp16 ct':>12} {'peak/fp16 mk':>12} {'SQNR ct':>8} {'SQNR mk':>8}")
    for name, src in models.items():
        ref = weights_of(src)
        fp16_bytes = sum(r.size * 2 for r in ref)
        small = None
        for row in a.rows.split(","):
            kind, kw = ROWS[row]
            mk = run("milkit", src, kind, dict(kw), env)
            ct = {"error": "skipped"} if a.skip_coremltools else run("coremltools", src, kind, dict(kw), env)
            cells = []
            for r in (ct, mk):
                r["sqnr"] = sqnr(ref, weights_of(r["out"])) if "out" in r else float("nan")
            speed = ct["seconds"] / mk["seconds"] if "seconds" in ct and "seconds" in mk else float("nan")
            for r in (ct, mk):
                cells.append(f"{r['seconds']:.2f}" if "seconds" in r else r.get("error", "?")[:13])
            pc, pm = (r.get("peak", float("nan")) / fp16_bytes for r in (ct, mk))
            print(f"{name:9} {row:18} {cells[0]:>13} {cells[1]:>9} {speed:>7.1f}x {pc:>12.2f} {pm:>12.2f} "
                  f"{ct['sqnr']:>8.2f} {mk['sqnr']:>8.2f}", flush=True)
            if row == "kmeans4_grouped16" and "out" in mk:
                small = mk["out"]
        if small:
            print(f"{name:9} {predict_row(src, small)}", flush=True)


if __name__ == "__main__":
    main()
