#!/usr/bin/env python3
"""LLM decode on Linux: a Llama-style decoder (benchmarks/llm_model.py) from .pt2 to tokens.

Each step runs in a fresh child process (benchmarks/memwatch.py) that reports its wall time and
peak anonymous memory (RssAnon: mapped weight files are not counted), optionally under a cgroup
memory cap:

  write      export prefill (T=128) and decode (T=1) with fake weights, write both .pt2 archives
             weight by weight (fp16 weights, fp32 caches)
  convert    milkit.convert of each .pt2 (FLOAT16, iOS18, caches as states), then save
  palettize  4-bit k-means per grouped channel (group 16) of each saved package, then save
  multifunction  save_multifunction of the prefill and decode packages into llm_<kind>.mlpackage
             (weights stored once); the run step then uses its two functions
  run        load both packages (the multifunction package's two functions when there is one),
             prefill 128 tokens, greedy decode (one warm-up step, then 16 timed)
             for the fp16 and the 4-bit packages
  torch      eager prefill + decode on the same weights (fp32, bf16, fp16)
  onnx       the decode step exported to ONNX (caches as inputs/outputs, fp32 weights) and run
             with onnxruntime
  coremltools  ct.convert of the decode program (FLOAT16, iOS18), for scale: coremltools has no
             index_copy, so the slice-assignment variant, exported from fp16 weights in memory

Files go to build/bench/llm-<size> (or --dir), never into git. Each row ends with the machine's
1-minute load average when the step finished: timings on a shared machine are only comparable at
similar load.

    PYTHONPATH=python python3 benchmarks/bench_llm.py [--size 0.5b|1b|8b|tiny] [--steps write,...]
        [--cap-mb N] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import llm_model as L  # noqa: E402
import memwatch  # noqa: E402

STEPS = ["write", "convert", "palettize", "multifunction", "run", "torch", "onnx", "coremltools"]
PREFILL = 128
DECODE_STEPS = 16

PRELUDE = r"""
import json, os, sys, time, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, {here!r})
import llm_model as L
C = L.PRESETS[{size!r}]
D = {dir!r}
def rss_mb():
    with open("/proc/self/status") as f:
        return {{l.split(":")[0]: int(l.split()[1]) / 1024 for l in f if l.startswith(("VmRSS", "RssAnon", "RssFile"))}}
def result(**kw):
    print("RESULT " + json.dumps(dict(kw, loadavg=os.getloadavg()[0])))
"""

WRITE = r"""
import torch
p = L.export_pt2(C, D, dtype=getattr(torch, {wdtype!r}), prefill={prefill}, programs={programs!r})
result(**p["seconds"], bytes=sum(os.path.getsize(p[k]) for k in {programs!r}))
"""

CONVERT = r"""
import milkit
out = {{}}
for name in {programs!r}:
    t0 = time.perf_counter()
    mm = milkit.convert(os.path.join(D, name + ".pt2"), compute_precision=milkit.precision.FLOAT16,
                        minimum_deployment_target=milkit.target.iOS18)
    out["convert_" + name] = time.perf_counter() - t0
    if {direct_4bit}:  # no fp16 package: palettize the converted model and save only the 4-bit one
        c = milkit.optimize.coreml
        cfg = c.OptimizationConfig(global_config=c.OpPalettizerConfig(mode="kmeans", nbits=4,
                                   granularity="per_grouped_channel", group_size=16))
        t0 = time.perf_counter()
        mm = c.palettize_weights(mm, cfg)
        out["palettize_" + name] = time.perf_counter() - t0
        kind = "4bit"
    else:
        kind = "fp16"
    t0 = time.perf_counter()
    mm.save(os.path.join(D, name + "_" + kind + ".mlpackage"))
    out["save_" + name] = time.perf_counter() - t0
    del mm
result(**out)
"""

PALETTIZE = r"""
import milkit
c = milkit.optimize.coreml
cfg = c.OptimizationConfig(global_config=c.OpPalettizerConfig(mode="kmeans", nbits=4,
                           granularity="per_grouped_channel", group_size=16))
out = {{}}
for name in {programs!r}:
    t0 = time.perf_counter()
    mm = milkit.models.MLModel(os.path.join(D, name + "_fp16.mlpackage"))
    out["load_" + name] = time.perf_counter() - t0
    t0 = time.perf_counter()
    mm = c.palettize_weights(mm, cfg)
    out["palettize_" + name] = time.perf_counter() - t0
    t0 = time.perf_counter()
    mm.save(os.path.join(D, name + "_4bit.mlpackage"))
    out["save_" + name] = time.perf_counter() - t0
    del mm
result(**out)
"""

MULTIFUNCTION = r"""
import milkit
desc = milkit.utils.MultiFunctionDescriptor()
for name in {programs!r}:
    desc.add_function(os.path.join(D, name + "_{kind}.mlpackage"), "main", name)
desc.default_function_name = "decode"
t0 = time.perf_counter()
milkit.utils.save_multifunction(desc, os.path.join(D, "llm_{kind}.mlpackage"))
save = time.perf_counter() - t0
def size(p):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(p) for f in fs)
parts = sum(size(os.path.join(D, n + "_{kind}.mlpackage")) for n in {programs!r})
result(save_multifunction=save, parts_gb=parts / 1e9, package_gb=size(os.path.join(D, "llm_{kind}.mlpackage")) / 1e9)
"""

RUN = r"""
import milkit, numpy as np
t0 = time.perf_counter()
has_prefill = "prefill" in {programs!r}
if {multi}:  # the multifunction package: both functions of one file, weights stored once
    path = os.path.join(D, "llm_{kind}.mlpackage")
    pre = milkit.models.MLModel(path, function_name="prefill") if has_prefill else None
    dec = milkit.models.MLModel(path, function_name="decode")
else:
    pre = milkit.models.MLModel(os.path.join(D, "prefill_{kind}.mlpackage")) if has_prefill else None
    dec = milkit.models.MLModel(os.path.join(D, "decode_{kind}.mlpackage"))
load = time.perf_counter() - t0
state = dec.make_state()
rng = np.random.default_rng(0)
ids = rng.integers(0, C.vocab, (1, {prefill})).astype(np.int32)
t0 = time.perf_counter()
if has_prefill:
    out = list(pre.predict({{"ids": ids, "p": np.arange({prefill}, dtype=np.int32)}}, state=state).values())[0]
    tok, pos = int(out[0, -1].argmax()), {prefill}
else:  # decode from position 0 (no prefill program)
    tok, pos = 1, 0
prefill = time.perf_counter() - t0
times, tokens = [], []
for i in range({steps} + 1):
    t0 = time.perf_counter()
    feed = {{"ids": np.array([[tok]], np.int32), "p": np.array([pos], np.int32)}}
    out = list(dec.predict(feed, state=state).values())[0]
    times.append(time.perf_counter() - t0)
    tok, pos = int(out[0, -1].argmax()), pos + 1
    tokens.append(tok)
result(load=load, prefill=prefill, first_decode=times[0], tok_s={steps} / sum(times[1:]), tokens=tokens, **rss_mb())
"""

TORCH = r"""
import torch
torch.set_num_threads({threads})
dtype = getattr(torch, {dtype!r})
t0 = time.perf_counter()
m = L.build_model(C, dtype=dtype)
build = time.perf_counter() - t0
g = torch.Generator().manual_seed(0)
ids = torch.randint(0, C.vocab, (1, {prefill}), generator=g)
with torch.no_grad():
    t0 = time.perf_counter()
    out = m(ids, torch.arange({prefill}))
    prefill = time.perf_counter() - t0
    tok, pos, times, tokens = int(out[0, -1].argmax()), {prefill}, [], []
    for i in range({steps} + 1):
        t0 = time.perf_counter()
        out = m(torch.tensor([[tok]]), torch.tensor([pos]))
        times.append(time.perf_counter() - t0)
        tok, pos = int(out[0, -1].argmax()), pos + 1
        tokens.append(tok)
result(build=build, prefill=prefill, first_decode=times[0], tok_s={steps} / sum(times[1:]), tokens=tokens, **rss_mb())
"""

ONNX = r"""
import numpy as np, onnxruntime as ort, torch
m = L.build_model(C)
f = L.functional_step(m)
caches = [torch.zeros(1, C.kv_heads, C.max_len, C.head_dim) for _ in range(2 * C.layers)]
names = [f"{{k}}_{{i}}" for i in range(C.layers) for k in ("k", "v")]
os.makedirs(os.path.join(D, "onnx"), exist_ok=True)  # the model and its external weight files
path = os.path.join(D, "onnx", "decode_fp32.onnx")
t0 = time.perf_counter()
if not os.path.exists(path):  # the weights do not change between runs: exported once
    torch.onnx.export(f, (torch.tensor([[1]]), torch.tensor([0]), *caches), path, dynamo=False, opset_version=17,
                      input_names=["ids", "pos"] + names, output_names=["logits"] + ["new_" + n for n in names])
export = time.perf_counter() - t0
del m, f
t0 = time.perf_counter()
so = ort.SessionOptions()
so.intra_op_num_threads = {threads}
s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
load = time.perf_counter() - t0
feed = {{n: c.numpy() for n, c in zip(names, caches)}}
tok, pos, times = 1, {prefill}, []
for i in range({steps} + 1):
    t0 = time.perf_counter()
    out = s.run(None, {{"ids": np.array([[tok]], np.int64), "pos": np.array([pos], np.int64), **feed}})
    times.append(time.perf_counter() - t0)
    feed = dict(zip(names, out[1:]))
    tok, pos = int(out[0][0, -1].argmax()), pos + 1
result(export=export, load=load, first_decode=times[0], tok_s={steps} / sum(times[1:]), **rss_mb())
"""

COREMLTOOLS = r"""
import torch, coremltools as ct
# coremltools has no index_copy: the same decoder with slice-assignment caches, built in memory
t0 = time.perf_counter()
m = L.build_model(C, dtype=torch.float16, mode="slice")
ep = L.export_programs(m, {prefill})["decode"].run_decompositions({{}})
export = time.perf_counter() - t0
before = rss_mb()["RssAnon"]
t0 = time.perf_counter()
mm = ct.convert(ep, minimum_deployment_target=ct.target.iOS18, compute_precision=ct.precision.FLOAT16,
                skip_model_load=True)
result(export=export, convert=time.perf_counter() - t0, RssAnon_before=before)
"""


def child(code: str, args: argparse.Namespace, **fmt: object) -> dict:
    """Runs one step in a watched child; its RESULT line plus seconds and peak RssAnon."""
    prelude = PRELUDE.format(here=HERE, size=args.size, dir=args.dir)
    path = os.pathsep.join([os.path.join(ROOT, "python"), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, MILKIT_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads), PYTHONPATH=path)
    code = prelude + code.format(prefill=args.prefill, steps=DECODE_STEPS, programs=tuple(args.programs.split(",")),
                                 direct_4bit=args.direct_4bit, threads=args.threads, wdtype=args.dtype, **fmt)
    w = memwatch.run(code, cap_mb=args.cap_mb, env=env)
    lines = [ln for ln in w.out.splitlines() if ln.startswith("RESULT ")]
    if w.rc != 0 or not lines:
        err = (w.err.strip().splitlines() or ["?"])[-1]
        return {"error": ("killed by the memory cap" if w.oom else f"rc {w.rc}: {err}")[:200],
                "seconds": w.seconds, "peak_mb": w.peak_mb}
    r = json.loads(lines[-1][len("RESULT "):])
    r.update(seconds=w.seconds, peak_mb=w.peak_mb)
    return r


def fmt_row(what: str, r: dict, keys: list[str]) -> str:
    if "error" in r:
        return f"  {what:<36} FAILED: {r['error']}"
    parts = []
    for k in keys:
        if k in r:
            v = r[k]
            if k == "tok_s":
                parts.append(f"{v:.1f} tok/s")
            elif k.endswith("_gb"):
                parts.append(f"{k[:-3]} {v:.2f} GB")
            elif k in ("VmRSS", "RssAnon", "RssAnon_before"):
                parts.append(f"{k} {v:.0f} MiB")
            else:
                parts.append(f"{k} {v:.2f}s" if isinstance(v, float) else f"{k} {v}")
    return f"  {what:<36} {'; '.join(parts)}; peak RssAnon {r['peak_mb']:.0f} MiB; load avg {r.get('loadavg', 0):.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="0.5b", choices=sorted(L.PRESETS))
    ap.add_argument("--steps", default=",".join(STEPS), help="comma-separated subset of " + ",".join(STEPS))
    ap.add_argument("--prefill", type=int, default=PREFILL, help="prompt length (the prefill program's T)")
    ap.add_argument("--programs", default="prefill,decode", help="which programs to write and convert")
    ap.add_argument("--direct-4bit", action="store_true",
                    help="convert palettizes in memory and saves only the 4-bit packages (no fp16 package on disk)")
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"],
                    help="dtype of the weights in the written .pt2 archives")
    ap.add_argument("--kinds", default=None, help="packages the run step uses (fp16,4bit; default all there are)")
    ap.add_argument("--torch-dtypes", default="float32,bfloat16,float16")
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="threads of milkit's interpreter, torch and onnxruntime (on a busy machine 1 is fairer)")
    ap.add_argument("--cap-mb", type=int, default=None, help="cgroup memory cap for every child")
    ap.add_argument("--dir", default=None, help="where the archives and packages go")
    args = ap.parse_args()
    args.dir = os.path.abspath(args.dir or os.path.join(ROOT, "build", "bench", f"llm-{args.size}"))
    os.makedirs(args.dir, exist_ok=True)
    steps = args.steps.split(",")
    c = L.PRESETS[args.size]
    if args.prefill + DECODE_STEPS + 1 > c.max_len:
        ap.error(f"prefill {args.prefill} + {DECODE_STEPS + 1} decode steps do not fit max_len {c.max_len}")
    print(f"model {args.size}: {L.param_count(c) / 1e9:.2f}B parameters ({c}), prefill {args.prefill}, "
          f"decode {DECODE_STEPS} steps, {args.threads} threads of {os.cpu_count()} cores; files in {args.dir}",
          flush=True)
    rows = []

    def show(what: str, r: dict, keys: list[str]) -> None:
        rows.append(fmt_row(what, r, keys))
        print(rows[-1], flush=True)

    if "write" in steps:
        show("write .pt2 (export + archives)", child(WRITE, args),
             ["export", "write_prefill", "write_decode", "seconds"])
    if "convert" in steps:
        what = "milkit convert fp16" + (" + palettize 4-bit" if args.direct_4bit else "") + " + save"
        show(what, child(CONVERT, args),
             ["convert_prefill", "convert_decode", "palettize_prefill", "palettize_decode", "save_prefill",
              "save_decode"])
    if "palettize" in steps and not args.direct_4bit:
        show("milkit palettize 4-bit + save", child(PALETTIZE, args),
             ["load_decode", "palettize_prefill", "palettize_decode", "save_prefill", "save_decode"])
    kinds = args.kinds.split(",") if args.kinds else ["4bit"] if args.direct_4bit else ["fp16", "4bit"]
    multi = "multifunction" in steps and len(args.programs.split(",")) > 1
    if multi:
        for kind in kinds:
            show(f"milkit save_multifunction {kind}", child(MULTIFUNCTION, args, kind=kind),
                 ["save_multifunction", "parts_gb", "package_gb"])
    run_keys = ["load", "prefill", "first_decode", "tok_s", "VmRSS", "RssAnon"]
    if "run" in steps:
        for kind in kinds:
            # the multifunction package when it was just made or is there from an earlier run
            mf = multi or ("prefill" in args.programs and
                           os.path.isdir(os.path.join(args.dir, f"llm_{kind}.mlpackage")))
            what = f"milkit run {kind}" + (" (multifunction)" if mf else "")
            show(what, child(RUN, args, kind=kind, multi=mf), run_keys)
    if "torch" in steps:
        for dt in args.torch_dtypes.split(","):
            show(f"torch eager {dt}", child(TORCH, args, dtype=dt),
                 ["build", "prefill", "first_decode", "tok_s", "VmRSS"])
    if "onnx" in steps:
        show("onnxruntime fp32 (decode only)", child(ONNX, args), ["export", "load", "first_decode", "tok_s", "VmRSS"])
    if "coremltools" in steps:
        show("coremltools convert decode fp16", child(COREMLTOOLS, args), ["export", "convert", "RssAnon_before"])
    print("\nsummary (" + args.size + f", {L.param_count(c) / 1e9:.2f}B):")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
