#!/usr/bin/env python3
"""Side-by-side convert benchmark: milkit against coremltools on the same workload, in one run.

Each measurement is a fresh process (so peak RSS is its own); the two backends alternate
A B A B ..., and the ratio coremltools/milkit is taken pair by pair, then the median. Each worker
also reports the op types of the converted program, and the run says whether both backends wrote
the same graph.

  python benchmarks/compare.py chain --n 10000 --precision fp16
  python benchmarks/compare.py transformer --layers 12 --hidden 768 --symbolic --precision fp16
  python benchmarks/compare.py convformer --layers 24 --hidden 512 --precision fp16
  python benchmarks/compare.py ... --backends milkit        (one backend only)

Workloads: `chain` and `transformer` are the shared ones (../shared/bench/workloads.py);
`convformer` (defined here) is a transformer in the NCHW conv layout that converters produce
(Apple's (B, C, 1, S) layout, TF-style NHWC islands): per layer a layer_norm over channels between
a transpose to channels-last and back, 1x1 convs for q/k/v/o and the MLP, attention with
reshape/transpose/matmul/softmax, and channels-last bias + gelu and scale islands between
transposes that `reduce_transposes` removes.

Phases: build (the @mb.program trace, weights made beforehand), convert (ct.convert with the
DEFAULT pipeline: passes, proto, weights), save (model.save to a .mlpackage). Prints a table; the
last lines are the convert and convert+save speed-ups of milkit over coremltools.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED_BENCH = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "bench"))


def backend(name: str) -> tuple:
    if name == "coremltools":
        import coremltools as ct
        from coremltools.converters.mil import Builder as mb
        from coremltools.converters.mil.mil import get_new_symbol, types
    elif name == "milkit":
        import milkit as ct
        from milkit import Builder as mb
        from milkit import get_new_symbol, types
    else:
        raise ValueError(name)
    return ct, mb, types, get_new_symbol


def convformer_weights(layers: int, hidden: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)

    def f(*s: int) -> np.ndarray:
        return rng.standard_normal(s, dtype=np.float32) * 0.02

    H = hidden
    return [dict(ln1_g=np.ones(H, np.float32), ln1_b=np.zeros(H, np.float32),
                 wq=f(H, H, 1, 1), bq=f(H), wk=f(H, H, 1, 1), wv=f(H, H, 1, 1), wo=f(H, H, 1, 1),
                 ln2_g=np.ones(H, np.float32), ln2_b=np.zeros(H, np.float32),
                 w1=f(4 * H, H, 1, 1), b1=f(4 * H), w2=f(H, 4 * H, 1, 1), ls=f(H) + 1.0)
            for _ in range(layers)]


def build_convformer(ct: Any, mb: Any, types: Any, get_new_symbol: Any, layers: list, hidden: int,
                     seq: int, head_dim: int = 64) -> Any:
    """Pre-norm transformer layers on a (1, C, 1, S) input (NCHW with H=1)."""
    H, nh = hidden, hidden // head_dim
    scale = np.float32(1.0 / np.sqrt(head_dim))
    last = [0, 3, 2, 1]  # (1, C, 1, S) <-> (1, S, 1, C): channels last and back

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, H, 1, seq), dtype=types.fp32)],
                opset_version=ct.target.iOS17)
    def prog(x):
        for L in layers:
            # layer_norm over channels, channels-last (stays: layer_norm is not unary-like)
            h = mb.transpose(x=x, perm=last)
            h = mb.layer_norm(x=h, axes=[-1], gamma=L["ln1_g"], beta=L["ln1_b"], epsilon=1e-5)
            h = mb.transpose(x=h, perm=last)
            q = mb.conv(x=h, weight=L["wq"])
            k = mb.conv(x=h, weight=L["wk"])
            v = mb.conv(x=h, weight=L["wv"])
            # q bias added channels-last, as a TF graph does (removed by reduce_transposes)
            q = mb.transpose(x=mb.add(x=mb.transpose(x=q, perm=last), y=L["bq"]), perm=last)
            q = mb.transpose(x=mb.reshape(x=q, shape=[1, nh, head_dim, seq]), perm=[0, 1, 3, 2])
            k = mb.reshape(x=k, shape=[1, nh, head_dim, seq])
            v = mb.transpose(x=mb.reshape(x=v, shape=[1, nh, head_dim, seq]), perm=[0, 1, 3, 2])
            s = mb.softmax(x=mb.mul(x=mb.matmul(x=q, y=k), y=scale), axis=-1)
            a = mb.transpose(x=mb.matmul(x=s, y=v), perm=[0, 1, 3, 2])
            a = mb.reshape(x=a, shape=[1, H, 1, seq])
            x = mb.add(x=x, y=mb.conv(x=a, weight=L["wo"]))
            h = mb.transpose(x=x, perm=last)
            h = mb.layer_norm(x=h, axes=[-1], gamma=L["ln2_g"], beta=L["ln2_b"], epsilon=1e-5)
            h = mb.transpose(x=h, perm=last)
            m = mb.conv(x=h, weight=L["w1"])
            # bias + gelu channels-last, then back (removed by reduce_transposes)
            m = mb.transpose(x=m, perm=last)
            m = mb.gelu(x=mb.add(x=m, y=L["b1"]), mode="EXACT")
            m = mb.transpose(x=m, perm=last)
            m = mb.conv(x=m, weight=L["w2"])
            # layer scale channels-last (removed by reduce_transposes)
            m = mb.transpose(x=mb.mul(x=mb.transpose(x=m, perm=last), y=L["ls"]), perm=last)
            x = mb.add(x=x, y=m)
        return x

    return prog


def worker(a: argparse.Namespace) -> None:
    ct, mb, types, sym = backend(a.backend)
    if a.workload == "convformer":
        layers = convformer_weights(a.layers, a.hidden)
        t0 = time.perf_counter()
        prog = build_convformer(ct, mb, types, sym, layers, a.hidden, a.seq)
    else:
        if not os.path.exists(os.path.join(SHARED_BENCH, "workloads.py")):
            raise SystemExit(f"workload {a.workload} needs {SHARED_BENCH}/workloads.py")
        sys.path.insert(0, SHARED_BENCH)
        import workloads as W

        if a.workload == "chain":
            consts = W.chain_weights(a.n)
            t0 = time.perf_counter()
            prog = W.build_chain(ct, mb, types, sym, consts)
        else:
            tl = W.transformer_weights(a.layers, a.hidden)
            t0 = time.perf_counter()
            prog = W.build_transformer(ct, mb, types, sym, tl, a.hidden, None if a.symbolic else a.seq)
    build = time.perf_counter() - t0
    prec = ct.precision.FLOAT16 if a.precision == "fp16" else ct.precision.FLOAT32
    t0 = time.perf_counter()
    model = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS17,
                       compute_precision=prec, skip_model_load=True)
    convert = time.perf_counter() - t0
    d = tempfile.mkdtemp()
    t0 = time.perf_counter()
    model.save(os.path.join(d, "m.mlpackage"))
    save = time.perf_counter() - t0
    wb = os.path.join(d, "m.mlpackage", "Data", "com.apple.CoreML", "weights", "weight.bin")
    size = os.path.getsize(wb) if os.path.exists(wb) else 0
    shutil.rmtree(d, ignore_errors=True)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ops = [op.op_type for op in model._mil_program.functions["main"].operations]
    print("RESULT " + json.dumps(dict(build=build, convert=convert, save=save, rss_mb=rss,
                                      weight_bin_mb=size / 2**20, ops=ops)))


def run_one(backend_name: str, argv: list) -> dict:
    out = subprocess.run([sys.executable, __file__, "--worker", "--backend", backend_name] + argv,
                         capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{backend_name} failed:\n{out.stderr[-2000:]}")


def same_graph(a: list, b: list) -> str:
    if a == b:
        n = {t: a.count(t) for t in ("transpose", "conv", "layer_norm")}
        return f"same op types ({len(a)} ops; " + ", ".join(f"{k} {v}" for k, v in n.items()) + ")"
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"DIFFERENT op types: {len(a)} vs {len(b)} ops, first difference at {i}: {a[i:i + 3]} vs {b[i:i + 3]}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=["chain", "transformer", "convformer"])
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--symbolic", action="store_true")
    ap.add_argument("--precision", choices=["fp16", "fp32"], default="fp16")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--backends", default="coremltools,milkit")
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--backend")
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    argv = [a.workload, "--n", str(a.n), "--layers", str(a.layers), "--hidden", str(a.hidden),
            "--seq", str(a.seq), "--precision", a.precision] + (["--symbolic"] if a.symbolic else [])
    backends = a.backends.split(",")
    res: dict = {b: [] for b in backends}
    for _ in range(a.runs):
        for b in backends:
            res[b].append(run_one(b, argv))
    keys = ["build", "convert", "save", "rss_mb", "weight_bin_mb"]
    print(f"workload: {' '.join(argv)}; runs: {a.runs}; medians")
    print("backend      " + "".join(f"{k:>14}" for k in keys))
    for b in backends:
        print(f"{b:<13}" + "".join(f"{statistics.median(r[k] for r in res[b]):>14.4f}" for k in keys))
    if len(backends) == 2:
        A, B = res[backends[0]], res[backends[1]]
        print(f"graph: {same_graph(A[0]['ops'], B[0]['ops'])}")
        for k in ["build", "convert", "save"]:
            r = statistics.median(x[k] / max(y[k], 1e-9) for x, y in zip(A, B))
            print(f"{k} speed-up of {backends[1]} over {backends[0]}: {r:.1f}x")
        r = statistics.median((x["convert"] + x["save"]) / max(y["convert"] + y["save"], 1e-9)
                              for x, y in zip(A, B))
        print(f"convert+save speed-up of {backends[1]} over {backends[0]}: {r:.1f}x")


if __name__ == "__main__":
    main()
