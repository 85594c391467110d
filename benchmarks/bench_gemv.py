#!/usr/bin/env python3
"""Decode-shaped products (one row of activations times a large weight) in milkit's interpreter,
by weight storage, against onnxruntime's fp32 MatMul on the same shape. Every weight byte is read
once per product, so the figure of merit is GB/s of weight bytes (as stored) read.

    python benchmarks/bench_gemv.py [--k 4096] [--n 14336] [--rows 1] [--runs 20] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

import numpy as np


def median_s(fn: Callable[[], Any], runs: int) -> float:
    for _ in range(3):
        fn()
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def weights(kind: str, n: int, k: int, rng: Any, mb: Any, ctypes: Any) -> tuple[Any, int]:
    """A [n, k] weight var of `kind` and its stored bytes."""
    if kind == "fp32":
        return rng.uniform(-1, 1, size=(n, k)).astype(np.float32), n * k * 4
    if kind == "fp16":
        return rng.uniform(-1, 1, size=(n, k)).astype(np.float16), n * k * 2
    if kind == "lut4":  # 4-bit palettized, a table per 16 output channels
        idx = np.asarray(rng.integers(0, 16, size=(n, k)), dtype=ctypes.np_uint4_dtype)
        lut = rng.uniform(-1, 1, size=(n // 16, 1, 16, 1)).astype(np.float16)
        return mb.constexpr_lut_to_dense(indices=idx, lut=lut), n * k // 2 + lut.size * 2
    bits = 8 if kind == "int8" else 4
    data = np.asarray(rng.integers(-(2 ** (bits - 1)), 2 ** (bits - 1), size=(n, k)),
                      dtype=np.int8 if bits == 8 else ctypes.np_int4_dtype)
    block = k if bits == 8 else 32  # int8 per channel, int4 per block of 32 inputs
    scale = rng.uniform(0.001, 0.01, size=(n, k // block)).astype(np.float16)
    return mb.constexpr_blockwise_shift_scale(data=data, scale=scale), n * k * bits // 8 + scale.size * 2


def milkit_case(kind: str, args: Any) -> tuple[float, int]:
    import milkit as ct
    from coremltools.converters.mil.mil import types as ctypes
    from milkit import Builder as mb
    from milkit import _core, types

    rng = np.random.default_rng(0)
    holder: dict[str, int] = {}

    @mb.program(input_specs=[mb.TensorSpec(shape=(args.rows, args.k), dtype=types.fp16)],
                opset_version=ct.target.iOS18)
    def prog(x: Any) -> Any:
        w, nbytes = weights(kind, args.n, args.k, rng, mb, ctypes)
        holder["bytes"] = nbytes
        return mb.linear(x=x, weight=w)

    plan = _core.Plan(prog.functions[prog.default_function_name])
    x = {"x": rng.uniform(-1, 1, size=(args.rows, args.k)).astype(np.float16)}
    return median_s(lambda: plan.run(x), args.runs), holder["bytes"]


def ort_case(args: Any) -> float:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(0).uniform(-1, 1, size=(args.k, args.n)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [args.rows, args.k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [args.rows, args.n])],
        [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    path = os.path.join(tempfile.mkdtemp(), "mm.onnx")
    onnx.save(m, path, save_as_external_data=True)
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    x = {"x": np.random.default_rng(1).uniform(-1, 1, size=(args.rows, args.k)).astype(np.float32)}
    return median_s(lambda: s.run(None, x), args.runs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--n", type=int, default=14336)
    ap.add_argument("--rows", type=int, default=1)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kinds", default="fp32,fp16,int8,lut4,int4")
    args = ap.parse_args()
    os.environ["MILKIT_NUM_THREADS"] = str(args.threads)
    print(f"[{args.rows}, {args.k}] x [{args.k}, {args.n}], {args.threads} threads", file=sys.stderr)
    t = ort_case(args)
    b = args.k * args.n * 4
    print(f"onnxruntime fp32   {t * 1e3:8.2f} ms  {b / t / 1e9:6.2f} GB/s")
    for kind in args.kinds.split(","):
        t, b = milkit_case(kind, args)
        print(f"milkit {kind:<11} {t * 1e3:8.2f} ms  {b / t / 1e9:6.2f} GB/s  ({b / 1e6:.0f} MB)")


if __name__ == "__main__":
    main()
