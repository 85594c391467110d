#!/usr/bin/env python3
"""One convolution at a time, side by side in one run, 2 threads each: milkit's interpreter
against onnxruntime and torch eager on the conv shapes of ResNet-18, MobileNetV3-Large,
EfficientNet-B0 and ConvNeXt-Tiny at 224x224 (batch 1, fp32, with bias): stem, 3x3, strided,
1x1 (stride 1 and 2) and depthwise (3x3, 5x5, 7x7). Each conv is a torch module converted with
torch.export (milkit) and torch.onnx.export (onnxruntime); outputs are checked against torch
before timing; latency is the median of --runs runs. The total line weighs nothing: it is the
plain sum over the shapes listed.

    python benchmarks/bench_conv_shapes.py [--runs 30] [--threads 2] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings

from bench_predict import median_ms, rel_err

# name: (C_in, C_out, kernel, stride, groups, H=W of the input)
SHAPES = {
    "stem 7x7 s2 3>64 @224": (3, 64, 7, 2, 1, 224),
    "3x3 64>64 @56": (64, 64, 3, 1, 1, 56),
    "3x3 s2 64>128 @56": (64, 128, 3, 2, 1, 56),
    "3x3 128>128 @28": (128, 128, 3, 1, 1, 28),
    "3x3 256>256 @14": (256, 256, 3, 1, 1, 14),
    "3x3 512>512 @7": (512, 512, 3, 1, 1, 7),
    "1x1 s2 64>128 @56": (64, 128, 1, 2, 1, 56),
    "1x1 16>64 @112": (16, 64, 1, 1, 1, 112),
    "1x1 96>24 @56": (96, 24, 1, 1, 1, 56),
    "1x1 96>384 @56": (96, 384, 1, 1, 1, 56),
    "1x1 384>96 @56": (384, 96, 1, 1, 1, 56),
    "1x1 672>112 @14": (672, 112, 1, 1, 1, 14),
    "dw 3x3 32 @112": (32, 32, 3, 1, 32, 112),
    "dw 3x3 s2 64 @112": (64, 64, 3, 2, 64, 112),
    "dw 3x3 144 @56": (144, 144, 3, 1, 144, 56),
    "dw 5x5 s2 144 @56": (144, 144, 5, 2, 144, 56),
    "dw 5x5 672 @14": (672, 672, 5, 1, 672, 14),
    "dw 7x7 96 @56": (96, 96, 7, 1, 96, 56),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    import milkit as ct
    import onnxruntime as ort
    import torch

    torch.set_num_threads(a.threads)
    ct.set_num_threads(a.threads)
    tmp = tempfile.mkdtemp(prefix="milkit-conv-")
    print(f"{'shape':24} {'milkit ms':>10} {'ort ms':>8} {'torch ms':>9} {'vs ort':>7} {'rel err':>9}")
    tot = [0.0, 0.0, 0.0]
    for name, (ci, co, k, s, g, hw) in SHAPES.items():
        if a.only not in name:
            continue
        torch.manual_seed(0)
        mod = torch.nn.Conv2d(ci, co, k, stride=s, padding=k // 2, groups=g).eval()
        x = torch.randn(1, ci, hw, hw)
        with torch.no_grad():
            want = mod(x).numpy()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ep = torch.export.export(mod, (x,))
            mm = ct.convert(ep, minimum_deployment_target=ct.target.iOS17, compute_precision=ct.precision.FLOAT32)
            path = os.path.join(tmp, "c.onnx")
            with torch.no_grad():
                torch.onnx.export(mod, (x,), path, dynamo=False, input_names=["input"], opset_version=17)
        feed = {mm.get_spec().description.input[0].name: x.numpy()}
        err = rel_err(next(iter(mm.predict(feed).values())), want)
        so = ort.SessionOptions()
        so.intra_op_num_threads = a.threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        feed_o = {"input": x.numpy()}

        def run_torch(mod: torch.nn.Module = mod, x: torch.Tensor = x) -> None:
            with torch.no_grad():
                mod(x)

        # Each runtime's idle workers spin for a while after its last call (torch's OpenMP
        # threads, onnxruntime's pool): on a 2-core machine they would take the next runtime's
        # cores, so each measurement starts after a pause.
        torch_ms = median_ms(run_torch, a.runs)
        time.sleep(0.5)
        milkit_ms = median_ms(lambda m=mm, f=feed: m.predict(f), a.runs)
        time.sleep(0.5)
        t = [milkit_ms, median_ms(lambda s=sess, f=feed_o: s.run(None, f), a.runs), torch_ms]
        time.sleep(0.5)
        tot = [u + v for u, v in zip(tot, t)]
        print(f"{name:24} {t[0]:10.3f} {t[1]:8.3f} {t[2]:9.3f} {t[0] / t[1]:6.2f}x {err:9.1e}", flush=True)
    print(f"{'total':24} {tot[0]:10.3f} {tot[1]:8.3f} {tot[2]:9.3f} {tot[0] / tot[1]:6.2f}x")


if __name__ == "__main__":
    main()
