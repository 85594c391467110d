#!/usr/bin/env python3
"""Products by a weight (a linear op: x [M, K] @ W[N, K].T + b) in milkit's interpreter against
onnxruntime's Gemm on the same shape and weights, in one run, 2 threads each: the shapes of the
benchmark networks' linears (ConvNeXt-T, ViT-B/16, GPT-2). milkit runs its own GEMM
(sgemm_panels: the weight packed per call into 48-column panels); with --blas a child process
runs the same products through OpenBLAS (MILKIT_GEMM=blas), the kernel milkit used before. fp16
rows time an fp16 program (the weight read as fp16, widened while packed) against the same
onnxruntime fp32 figure.

    python benchmarks/bench_gemm.py [--runs 20] [--threads 2] [--blas]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Any

import numpy as np
from bench_gemv import median_s

# (M, N, K, where it comes from)
SHAPES = [
    (49, 3072, 768, "ConvNeXt-T stage 4 mlp in"),
    (49, 768, 3072, "ConvNeXt-T stage 4 mlp out"),
    (196, 1536, 384, "ConvNeXt-T stage 3 mlp in"),
    (3136, 384, 96, "ConvNeXt-T stage 1 mlp in"),
    (197, 2304, 768, "ViT-B/16 qkv"),
    (197, 3072, 768, "ViT-B/16 mlp in"),
    (197, 768, 3072, "ViT-B/16 mlp out"),
    (128, 768, 3072, "GPT-2 mlp out"),
]


def operands(m: int, n: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (rng.standard_normal((m, k)).astype(np.float32),
            (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32),
            rng.standard_normal(n).astype(np.float32))


def milkit_s(m: int, n: int, k: int, fp16: bool, runs: int) -> float:
    import milkit as ct
    from milkit import Builder as mb
    from milkit import types

    x, w, b = operands(m, n, k)
    dt = np.float16 if fp16 else np.float32

    @mb.program(input_specs=[mb.TensorSpec(shape=(m, k), dtype=types.fp16 if fp16 else types.fp32)],
                opset_version=ct.target.iOS18)
    def prog(xv: Any) -> Any:
        return mb.linear(x=xv, weight=w.astype(dt), bias=b.astype(dt))

    prec = ct.precision.FLOAT16 if fp16 else ct.precision.FLOAT32
    model = ct.convert(prog, minimum_deployment_target=ct.target.iOS18, compute_precision=prec)
    name = list(prog.functions["main"].inputs)[0]
    feed = {name: x.astype(dt)}
    return median_s(lambda: model.predict(feed), runs)


def onnxruntime_s(m: int, n: int, k: int, runs: int, threads: int, tmp: str) -> float:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    x, w, b = operands(m, n, k)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)], "gemm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    path = os.path.join(tmp, f"gemm_{m}_{n}_{k}.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return median_s(lambda: sess.run(None, {"x": x}), runs)


def child(runs: int, threads: int) -> None:
    """milkit's fp32 figures of every shape (run with MILKIT_GEMM set by the parent)."""
    import milkit as ct

    ct.set_num_threads(threads)
    print(json.dumps([milkit_s(m, n, k, False, runs) for m, n, k, _ in SHAPES]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--blas", action="store_true", help="also time milkit with OpenBLAS (MILKIT_GEMM=blas)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.runs, a.threads)
        return
    import milkit as ct

    ct.set_num_threads(a.threads)
    blas = None
    if a.blas:
        r = subprocess.run([sys.executable, __file__, "--child", "--runs", str(a.runs), "--threads", str(a.threads)],
                           env=dict(os.environ, MILKIT_GEMM="blas"), capture_output=True, text=True, check=True)
        blas = json.loads(r.stdout.strip().splitlines()[-1])
    tmp = tempfile.mkdtemp(prefix="milkit-gemm-")
    print(f"milkit's GEMM: {ct._core.gemm_kernel()}")
    print(f"{'M':>5} {'N':>5} {'K':>5}  {'ort ms':>7} {'milkit':>7} {'vs ort':>7} {'GF/s':>5} {'fp16':>7} {'vs ort':>7}"
          f"{'  blas   vs ort' if blas else ''}  shape of")
    for i, (m, n, k, what) in enumerate(SHAPES):
        o = onnxruntime_s(m, n, k, a.runs, a.threads, tmp)
        f32 = milkit_s(m, n, k, False, a.runs)
        f16 = milkit_s(m, n, k, True, a.runs)
        extra = f"  {blas[i] * 1e3:6.3f} {blas[i] / o:6.2f}x" if blas else ""
        print(f"{m:5} {n:5} {k:5}  {o * 1e3:7.3f} {f32 * 1e3:7.3f} {f32 / o:6.2f}x {2 * m * n * k / f32 / 1e9:5.0f} "
              f"{f16 * 1e3:7.3f} {f16 / o:6.2f}x{extra}  {what}", flush=True)


if __name__ == "__main__":
    main()
