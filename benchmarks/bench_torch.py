#!/usr/bin/env python3
"""torch.export import: ``milkit.convert(ep)`` against coremltools' ``ct.convert(ep.run_decompositions())``
(FLOAT16, iOS17), end to end (convert + save), in one run, plus milkit's ``.pt2`` path and the
peak memory each conversion adds over the process before it (sampled every 5 ms), against the
model's fp32 weights. Each measurement runs in its own process, so one does not warm the other.

Models: torchvision resnet18 and vit_b_16, a 12-layer GPT-2 from transformers (hidden 768, vocab
50257, sequence 128) and the same architecture in plain torch (gpt2_plain: coremltools fails on
transformers' GPT-2), all with random weights.

    PYTHONPATH=python python3 benchmarks/bench_torch.py [--models resnet18,vit_b_16,gpt2] [--skip-coremltools]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

WORKER = r"""
import json, os, sys, tempfile, threading, time, warnings, shutil
warnings.simplefilter("ignore")
import torch

name, tool, path = sys.argv[1], sys.argv[2], sys.argv[3]


def build(name):
    torch.manual_seed(0)
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = GPT2Config(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024)
        m = GPT2LMHeadModel(cfg).eval()
        m.config.use_cache = False
        x = torch.randint(0, 50257, (1, 128))

        class Wrap(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, input_ids):
                return self.m(input_ids=input_ids, use_cache=False).logits

        return Wrap(m).eval(), (x,)
    if name == "gpt2_plain":
        # the same architecture written in plain torch (minGPT style): coremltools cannot convert
        # transformers' GPT-2 (its decomposed program keeps aten.alias), so the comparison uses this
        import math

        class Block(torch.nn.Module):
            def __init__(self, d, h):
                super().__init__()
                self.h = h
                self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
                self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
                self.fc, self.out = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

            def forward(self, x):
                B, T, C = x.shape
                q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
                q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.h))
                mask = torch.ones(T, T).tril()
                att = att.masked_fill(mask == 0, float("-inf")).softmax(dim=-1)
                y = (att @ v).transpose(1, 2).reshape(B, T, C)
                x = x + self.proj(y)
                return x + self.out(torch.nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh"))

        class GPT(torch.nn.Module):
            def __init__(self, n_layer=12, d=768, h=12, vocab=50257, n_pos=1024):
                super().__init__()
                self.wte, self.wpe = torch.nn.Embedding(vocab, d), torch.nn.Embedding(n_pos, d)
                self.blocks = torch.nn.ModuleList(Block(d, h) for _ in range(n_layer))
                self.ln_f = torch.nn.LayerNorm(d)
                self.head = torch.nn.Linear(d, vocab, bias=False)

            def forward(self, idx):
                x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
                for b in self.blocks:
                    x = b(x)
                return self.head(self.ln_f(x))

        return GPT().eval(), (torch.randint(0, 50257, (1, 128)),)
    import torchvision
    return getattr(torchvision.models, name)(weights=None).eval(), (torch.randn(1, 3, 224, 224),)


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


model, args = build(name)
weights = sum(p.numel() * p.element_size() for p in model.state_dict().values())
ep = torch.export.export(model, args, strict=False)
if tool == "coremltools":
    ep = ep.run_decompositions()
elif tool == "pt2":
    torch.export.save(ep, path)
    del ep, model
    import gc; gc.collect()
base = rss()
peak = [base]
stop = [False]


def sample():
    while not stop[0]:
        peak[0] = max(peak[0], rss())
        time.sleep(0.005)


th = threading.Thread(target=sample, daemon=True)
th.start()
out = tempfile.mkdtemp()
t0 = time.perf_counter()
if tool == "coremltools":
    import coremltools as ct
    m = ct.convert(ep, minimum_deployment_target=ct.target.iOS17, compute_precision=ct.precision.FLOAT16,
                   skip_model_load=True)
else:
    import milkit
    m = milkit.convert(ep if tool == "milkit" else path, minimum_deployment_target=milkit.target.iOS17,
                       compute_precision=milkit.precision.FLOAT16)
m.save(os.path.join(out, "m.mlpackage"))
dt = time.perf_counter() - t0
stop[0] = True
th.join()
# both tools' MLModels keep the converted MIL program
ops = sum(1 for op in m._mil_program.functions["main"].operations if op.op_type != "const")
shutil.rmtree(out)
print(json.dumps({"seconds": dt, "peak_extra": peak[0] - base, "weights": weights, "ops": ops}))
"""


def run(name: str, tool: str, tmp: str) -> dict:
    r = subprocess.run([sys.executable, "-c", WORKER, name, tool, os.path.join(tmp, f"{name}.pt2")],
                       capture_output=True, text=True, env=os.environ)
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet18,vit_b_16,gpt2,gpt2_plain")
    ap.add_argument("--skip-coremltools", action="store_true")
    a = ap.parse_args()
    print("torch.export -> ML Program, FLOAT16, iOS17, convert + save (seconds; memory as x fp32 weights)")
    print(f"{'model':<11} {'weights':>8} {'coremltools':>12} {'milkit':>8} {'ratio':>7} {'.pt2':>7} "
          f"{'mem(milkit)':>11} {'mem(.pt2)':>9} {'mem(ct)':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.models.split(","):
            mk = run(name, "milkit", tmp)
            pt = run(name, "pt2", tmp)
            ct = {"error": "skipped"} if a.skip_coremltools else run(name, "coremltools", tmp)
            w = mk.get("weights") or pt.get("weights") or 1

            def sec(r: dict) -> str:
                return f"{r['seconds']:.2f}" if "seconds" in r else "fail"

            def mem(r: dict, w: float = w) -> str:
                return f"{r['peak_extra'] / w:.2f}x" if "peak_extra" in r else "-"

            ratio = f"{ct['seconds'] / mk['seconds']:.1f}x" if "seconds" in ct and "seconds" in mk else "-"
            print(f"{name:<11} {w / 1e6:>6.0f}MB {sec(ct):>12} {sec(mk):>8} {ratio:>7} {sec(pt):>7} "
                  f"{mem(mk):>11} {mem(pt):>9} {mem(ct):>8}", flush=True)
            if mk.get("ops") is not None:
                print(f"  MIL ops (non-const): milkit {mk['ops']}, coremltools {ct.get('ops', '-')}")
            for label, r in (("milkit", mk), (".pt2", pt), ("coremltools", ct)):
                if "error" in r and r["error"] != "skipped":
                    print(f"  {label}: {r['error']}")


if __name__ == "__main__":
    main()
