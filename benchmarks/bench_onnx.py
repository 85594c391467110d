#!/usr/bin/env python3
"""ONNX import: milkit.convert + save of a .onnx file against a plain read and write of the same
weights (the floor any converter pays) and against onnxruntime's session creation for the file,
all in one run. Models: torchvision resnet18 and vit_b_16 (random weights), exported once.

    PYTHONPATH=python python3 benchmarks/bench_onnx.py [--models resnet18,vit_b_16] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
import warnings


def export(name: str, path: str) -> None:
    import torch
    import torchvision

    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.randn(1, 3, 224, 224),), path, input_names=["x"], output_names=["y"],
                          opset_version=17, dynamo=False)


def plain_copy(path: str, out_dir: str) -> None:
    """Reads every initializer's bytes and writes them to one file (what a converter must at least do)."""
    import onnx

    m = onnx.load(path)
    with open(os.path.join(out_dir, "weights.bin"), "wb") as f:
        for t in m.graph.initializer:
            f.write(t.raw_data)
        f.flush()
        os.fsync(f.fileno())


def milkit_convert(path: str, precision: str, out_dir: str) -> None:
    import milkit

    p = milkit.precision.FLOAT16 if precision == "fp16" else milkit.precision.FLOAT32
    m = milkit.convert(path, minimum_deployment_target=milkit.target.iOS17, compute_precision=p)
    m.save(os.path.join(out_dir, "m.mlpackage"))


def ort_session(path: str, out_dir: str) -> None:
    import onnxruntime as ort

    ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def timed(fn, *args, runs: int) -> float:
    ts = []
    for _ in range(runs):
        d = tempfile.mkdtemp()
        t0 = time.perf_counter()
        fn(*args, d)
        ts.append(time.perf_counter() - t0)
        shutil.rmtree(d)
    return statistics.median(ts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", default="resnet18,vit_b_16")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    work = tempfile.mkdtemp()
    print("| model | weights | plain read+write | milkit fp32 | milkit fp16 | onnxruntime session | "
          "milkit fp32 / plain | milkit fp32 / ort |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        path = os.path.join(work, name + ".onnx")
        export(name, path)
        mb = os.path.getsize(path) / 1e6
        plain = timed(plain_copy, path, runs=args.runs)
        f32 = timed(milkit_convert, path, "fp32", runs=args.runs)
        f16 = timed(milkit_convert, path, "fp16", runs=args.runs)
        ort = timed(ort_session, path, runs=args.runs)
        print(f"| {name} | {mb:.0f} MB | {plain * 1e3:.0f} ms | {f32 * 1e3:.0f} ms | {f16 * 1e3:.0f} ms | "
              f"{ort * 1e3:.0f} ms | {f32 / plain:.2f}x | {f32 / ort:.2f}x |", flush=True)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
