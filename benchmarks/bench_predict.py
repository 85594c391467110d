#!/usr/bin/env python3
"""Inference latency on Linux, side by side in one run, 2 threads each: milkit's interpreter
(MLModel.predict on the converted package) against torch eager and onnxruntime (the same torch
module exported with torch.onnx.export). Workloads: ResNet-18 (1x3x224x224, fp32) and a 12-layer
GPT-2-style decoder (hidden 768, 12 heads, sequence 128, causal, fp32), from the same weights;
then torchvision's convolution networks (ResNet-18, MobileNetV3-Large, EfficientNet-B0,
ConvNeXt-Tiny; random weights, 1x3x224x224) imported with torch.export, as an fp32 and an fp16
package each (the fp16 rows compare against the same fp32 torch and onnxruntime runs).

Outputs are checked against torch (max relative error) before timing; latency is the median of
--runs runs after warm-up. "first ms" is the first run's latency of a freshly loaded model
(milkit: opening the package, planning, packing weights and the first predict; onnxruntime:
creating the session and its first run). Peak RSS of a predict-only process is measured in a
child process.

    python benchmarks/bench_predict.py [--workload resnet18|gpt2|conv|all|<net>] [--runs 10] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Any, Callable, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def median_ms(fn: Callable[[], Any], runs: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def torch_reference(mod: Any, feed: Any, runs: int) -> Tuple[np.ndarray, float]:
    """torch eager's output for `feed` and its median latency in ms."""
    import torch

    with torch.no_grad():
        want = mod(feed).numpy()

    def run_torch() -> None:
        with torch.no_grad():
            mod(feed)

    return want, median_ms(run_torch, runs)


def onnx_export(mod: Any, feed: Any, tmp: str, name: str, threads: int) -> Tuple[str, Any]:
    """`mod` exported to ONNX under `tmp` (input "input", opset 17), and onnxruntime session
    options for `threads` intra-op threads."""
    import onnxruntime as ort
    import torch

    onnx_path = os.path.join(tmp, f"{name}.onnx")
    # nn.MultiheadAttention's inference fast path is one aten op the exporter cannot write
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    with torch.no_grad():
        torch.onnx.export(mod, (feed,), onnx_path, dynamo=False, input_names=["input"], opset_version=17)
    torch.backends.mha.set_fastpath_enabled(fastpath)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return onnx_path, so


def child_figures(pkg: str, feed: dict, tmp: str, threads: int) -> dict:
    """The predict-only child's figures (peak RSS, weights) for package `pkg` fed `feed`."""
    feed_path = os.path.join(tmp, "feed.npz")
    np.savez(feed_path, **feed)
    out = subprocess.run([sys.executable, __file__, "--child", pkg, feed_path, "--threads", str(threads)],
                         capture_output=True, text=True, check=True, env=os.environ)
    return json.loads(out.stdout.strip().splitlines()[-1])


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a.astype(np.float64) - b)) / max(np.max(np.abs(b)), 1e-12))


def _vm_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def child_rss(pkg: str, feed_path: str, threads: int) -> None:
    """Child: open the package, predict once, print peak RSS (VmHWM: ru_maxrss survives exec and
    would report the parent's) before and after, and the weights' size."""
    import milkit as ct

    ct.set_num_threads(threads)
    feed = dict(np.load(feed_path))
    base = _vm_kb("VmHWM")
    m = ct.models.MLModel(pkg)
    m.predict(feed)
    peak = _vm_kb("VmHWM")
    wbin = os.path.join(pkg, "Data", "com.apple.CoreML", "weights", "weight.bin")
    plan = m._get_plan()
    print(json.dumps({"rss_before_mb": base / 1024, "rss_peak_mb": peak / 1024,
                      "weights_mb": os.path.getsize(wbin) / 2**20,
                      "activations_peak_mb": plan.last_peak_bytes / 2**20,
                      "plan_const_mb": plan.const_bytes / 2**20}))


def bench(name: str, runs: int, threads: int) -> list[dict]:
    import milkit as ct
    import models
    import torch

    torch.set_num_threads(threads)
    ct.set_num_threads(threads)
    if name == "resnet18":
        mod = models.resnet18_torch()
        x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
        prog = models.resnet18_milkit(models.state_numpy(mod))
        feed_t: Any = torch.from_numpy(x)
        feed_m = {"x": x}
    else:
        mod = models.gpt2_torch()
        ids = np.random.default_rng(0).integers(0, 50257, size=(1, 128))
        prog = models.gpt2_milkit(models.state_numpy(mod), seq=128)
        feed_t = torch.from_numpy(ids)
        feed_m = {"ids": ids.astype(np.int32)}
    # torch first, before the other runtimes start their worker threads
    want, torch_ms = torch_reference(mod, feed_t, runs)

    tmp = tempfile.mkdtemp(prefix="milkit-bench-")
    ref = onnxruntime_figures(mod, feed_t, want, tmp, name, runs, threads)
    ref["torch_ms"] = torch_ms
    return milkit_rows(name, lambda prec: ct.convert(prog, minimum_deployment_target=ct.target.iOS17,
                                                     compute_precision=PRECISION[prec](ct)),
                       lambda pkg: feed_m, want, ref, tmp, runs, threads)


def onnxruntime_figures(mod: Any, feed_t: Any, want: np.ndarray, tmp: str, name: str, runs: int,
                        threads: int) -> dict:
    """onnxruntime on `mod` exported to ONNX: its latency, first-run latency and error."""
    import onnxruntime as ort

    onnx_path, so = onnx_export(mod, feed_t, tmp, name, threads)
    feed_o = {"input": feed_t.numpy()}
    sess, first = first_ms(lambda: ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"]),
                           lambda s: s.run(None, feed_o))
    return {"onnxruntime_ms": median_ms(lambda: sess.run(None, feed_o), runs),
            "onnxruntime_first_ms": first,
            "onnxruntime_rel_err": rel_err(sess.run(None, feed_o)[0], want)}


def milkit_rows(name: str, convert: Callable[[str], Any], feed_of: Callable[[str], dict], want: np.ndarray,
                ref: dict, tmp: str, runs: int, threads: int) -> list[dict]:
    """milkit's fp32 and fp16 packages of one workload (`convert(precision)` makes the model,
    `feed_of(package)` its feed), each checked against torch's output `want` before timing, with
    the reference figures `ref` beside."""
    import milkit as ct

    rows = []
    for prec in ("fp32", "fp16"):
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mlmodel = convert(prec)
        convert_s = time.perf_counter() - t
        pkg = os.path.join(tmp, f"{name}_{prec}.mlpackage")
        mlmodel.save(pkg)
        del mlmodel
        feed_m = feed_of(pkg)
        model, m_first = first_ms(lambda p=pkg: ct.models.MLModel(p), lambda m, f=feed_m: m.predict(f))
        (got,) = model.predict(feed_m).values()
        err_m = rel_err(got, want)
        if not err_m <= MAX_ERR[prec]:
            raise SystemExit(f"{name} {prec}: milkit's output differs from torch's by {err_m:.2e}")
        res = {"workload": f"{name}/{prec}",
               "milkit_ms": median_ms(lambda m=model, f=feed_m: m.predict(f), runs),
               "milkit_first_ms": m_first,
               "milkit_rel_err": err_m,
               "milkit_convert_s": convert_s,
               **ref}
        res.update(child_figures(pkg, feed_m, tmp, threads))
        rows.append(res)
    return rows


# torchvision networks (convolution networks and ViT-B/16): name -> constructor name in
# torchvision.models
CONV_NETS = {
    "tv_resnet18": "resnet18",
    "mobilenet_v3_large": "mobilenet_v3_large",
    "efficientnet_b0": "efficientnet_b0",
    "convnext_tiny": "convnext_tiny",
    "vit_b_16": "vit_b_16",
}
# largest relative error accepted before timing: fp32 and fp16 packages against fp32 torch
MAX_ERR = {"fp32": 1e-3, "fp16": 5e-2}
# compute precision of each package, from the milkit module
PRECISION = {"fp32": lambda ct: ct.precision.FLOAT32, "fp16": lambda ct: ct.precision.FLOAT16}


def randomize(m: Any) -> Any:
    """Random weights that keep activations in fp16's range (He-scaled kernels, affine weights
    near 1, small biases, random batch-norm statistics): torchvision's own initialisation makes
    some of these networks' outputs vanish below fp16's smallest value."""
    import torch

    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for n, p in m.named_parameters():
            if p.dim() > 1 and p[0].numel() > 1:
                p.copy_(torch.randn(p.shape, generator=g) * (2.0 / p[0].numel()) ** 0.5)
            elif n.endswith("weight") or p.dim() > 1:
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
        for n, b in m.named_buffers():
            if n.endswith("running_var"):
                b.copy_(torch.rand(b.shape, generator=g) + 0.5)
            elif n.endswith("running_mean"):
                b.copy_(torch.randn(b.shape, generator=g) * 0.1)
    return m.eval()


def first_ms(make: Callable[[], Any], run: Callable[[Any], Any]) -> tuple[Any, float]:
    """A freshly made runner and the time to make it and run it once."""
    t = time.perf_counter()
    obj = make()
    run(obj)
    return obj, (time.perf_counter() - t) * 1e3


def bench_conv(name: str, runs: int, threads: int) -> list[dict]:
    """One torchvision network: torch eager and onnxruntime once, milkit's fp32 and fp16 packages."""
    import milkit as ct
    import torch
    import torchvision

    torch.set_num_threads(threads)
    ct.set_num_threads(threads)
    mod = randomize(getattr(torchvision.models, CONV_NETS[name])())
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    feed_t = torch.from_numpy(x)
    want, torch_ms = torch_reference(mod, feed_t, runs)
    tmp = tempfile.mkdtemp(prefix="milkit-bench-")
    ref = onnxruntime_figures(mod, feed_t, want, tmp, name, runs, threads)
    ref["torch_ms"] = torch_ms
    ep = torch.export.export(mod, (feed_t,)).run_decompositions()

    def feed_of(pkg: str) -> dict:
        return {ct.models.MLModel(pkg).get_spec().description.input[0].name: x}

    return milkit_rows(name, lambda prec: ct.convert(ep, minimum_deployment_target=ct.target.iOS17,
                                                     compute_precision=PRECISION[prec](ct)),
                       feed_of, want, ref, tmp, runs, threads)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="all", choices=["all", "resnet18", "gpt2", "conv", *CONV_NETS])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--child", nargs=2, metavar=("PKG", "FEED"))
    a = ap.parse_args()
    if a.child:
        child_rss(a.child[0], a.child[1], a.threads)
        return
    if a.workload == "all":
        names = ["resnet18", "gpt2", *CONV_NETS]
    elif a.workload == "conv":
        names = list(CONV_NETS)
    else:
        names = [a.workload]
    print(f"{'workload':10} {'milkit ms':>10} {'ort ms':>8} {'torch ms':>9} {'vs ort':>7} {'vs torch':>9} "
          f"{'rel err':>9} {'predict RSS MB':>15} {'weights MB':>11} {'act. MB':>8}")
    for n in names:
        for r in bench_conv(n, a.runs, a.threads) if n in CONV_NETS else bench(n, a.runs, a.threads):
            print(f"{r['workload']:10} {r['milkit_ms']:10.1f} {r['onnxruntime_ms']:8.1f} {r['torch_ms']:9.1f} "
                  f"{r['milkit_ms'] / r['onnxruntime_ms']:6.2f}x {r['milkit_ms'] / r['torch_ms']:8.2f}x "
                  f"{r['milkit_rel_err']:9.1e} {r['rss_peak_mb'] - r['rss_before_mb']:15.0f} "
                  f"{r['weights_mb']:11.0f} {r['activations_peak_mb']:8.1f}", flush=True)
            if "milkit_first_ms" in r:
                print(f"{'':10} first run (load, plan, pack, run): milkit {r['milkit_first_ms']:.0f} ms, "
                      f"onnxruntime {r['onnxruntime_first_ms']:.0f} ms", flush=True)
            print("  " + json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
