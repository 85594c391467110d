#!/usr/bin/env python3
"""Build-time benchmark: milkit vs coremltools on the same workload, same run.

Uses the shared workloads (../shared/bench/workloads.py) and runs each measurement in a fresh
process, alternating backends; reports medians and the per-op speed-up (coremltools / milkit).

    python benchmarks/bench_build.py --workload chain --n 10000 --runs 3
    python benchmarks/bench_build.py --workload transformer --layers 12 --hidden 768
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED_BENCH = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "bench"))


def worker(a: argparse.Namespace) -> None:
    sys.path.insert(0, SHARED_BENCH)
    import workloads as W

    ct, mb, types, sym = W.backend(a.backend)
    if a.workload == "chain":
        consts = W.chain_weights(a.n)
        t0 = time.perf_counter()
        prog = W.build_chain(ct, mb, types, sym, consts)
    else:
        layers = W.transformer_weights(a.layers, a.hidden)
        t0 = time.perf_counter()
        prog = W.build_transformer(ct, mb, types, sym, layers, a.hidden, None)
    dt = time.perf_counter() - t0
    nops = sum(1 for op in prog.functions["main"].operations if op.op_type != "const")
    print("RESULT " + json.dumps({"build": dt, "ops": nops}))


def run_one(backend: str, argv: list[str]) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(HERE, "..", "python") + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, __file__, "--worker", "--backend", backend, *argv],
                         capture_output=True, text=True, env=env)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{backend} failed:\n{out.stderr[-3000:]}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", choices=["chain", "transformer"], default="chain")
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--backends", default="coremltools,milkit")
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--backend")
    a = ap.parse_args()
    if a.worker:
        worker(a)
        return
    argv = ["--workload", a.workload, "--n", str(a.n), "--layers", str(a.layers), "--hidden", str(a.hidden)]
    backends = a.backends.split(",")
    res: dict[str, list] = {b: [] for b in backends}
    for _ in range(a.runs):
        for b in backends:
            res[b].append(run_one(b, argv))
    print(f"build benchmark: {a.workload} {' '.join(argv)}; runs={a.runs}; medians")
    for b in backends:
        build = statistics.median(r["build"] for r in res[b])
        ops = res[b][0]["ops"]
        print(f"  {b:<12} build {build:9.4f} s   {ops} ops   {1e6 * build / ops:8.2f} us/op")
    if len(backends) == 2:
        pairs = zip(res[backends[0]], res[backends[1]])
        ratio = statistics.median(x["build"] / max(y["build"], 1e-9) for x, y in pairs)
        print(f"build speed-up of {backends[1]} over {backends[0]}: {ratio:.1f}x")


if __name__ == "__main__":
    main()
