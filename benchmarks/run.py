#!/usr/bin/env python3
"""Runs every benchmark against coremltools in one go (ratios in the same run, not absolute times).

- build: the @mb.program trace, per op (benchmarks/bench_build.py);
- predict: milkit's interpreter against torch eager and onnxruntime (benchmarks/bench_predict.py);
- convert + save: ../shared/bench/compare.py (chain of 10,000 adds and the 12-layer transformer
  with a symbolic sequence, fp16), which also reports peak RSS;
- ONNX import: convert + save of resnet18 and vit_b_16 from .onnx against a plain read and write of
  the weights and onnxruntime's session creation (benchmarks/bench_onnx.py);
- torch.export import: milkit.convert(ep) against ct.convert(ep.run_decompositions()) for resnet18,
  vit_b_16 and a 12-layer GPT-2, with the .pt2 path and peak memory (benchmarks/bench_torch.py);
- convert + save of a 24-layer transformer in the NCHW conv layout with transposes
  (benchmarks/compare.py convformer; it also checks both write the same op types);
- the binary wheel against the source build on the same transformer, with the wheel's size, install
  and import time (benchmarks/bench_wheel.py; after make wheel).
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
COMPARE = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "bench", "compare.py"))


def main() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(HERE, "..", "python") + os.pathsep + env.get("PYTHONPATH", "")
    cmds = [
        [sys.executable, os.path.join(HERE, "bench_build.py"), "--workload", "chain", "--n", "10000"],
        [sys.executable, os.path.join(HERE, "bench_build.py"), "--workload", "transformer", "--layers", "12",
         "--hidden", "768"],
    ]
    cmds.append([sys.executable, os.path.join(HERE, "bench_predict.py"), "--runs", "10", "--threads", "2"])
    if os.path.exists(COMPARE):
        cmds += [
            [sys.executable, COMPARE, "chain", "--n", "10000", "--precision", "fp16"],
            [sys.executable, COMPARE, "transformer", "--layers", "12", "--hidden", "768", "--symbolic",
             "--precision", "fp16"],
        ]
    else:
        print(f"({COMPARE} not found: convert benchmarks skipped)")
    cmds.append([sys.executable, os.path.join(HERE, "bench_onnx.py"), "--runs", "3"])
    cmds.append([sys.executable, os.path.join(HERE, "bench_torch.py")])
    cmds.append([sys.executable, os.path.join(HERE, "compare.py"), "convformer", "--layers", "24", "--hidden",
                 "512", "--precision", "fp16"])
    import glob

    if glob.glob(os.path.join(HERE, "..", "dist", "milkit-*manylinux*.whl")):
        cmds.append([sys.executable, os.path.join(HERE, "bench_wheel.py")])
    else:
        print("(no wheel in dist/: make wheel for the wheel-against-source benchmark)")
    for c in cmds:
        print("$", " ".join(os.path.relpath(x) if x.endswith(".py") else x for x in c[1:]), flush=True)
        subprocess.run(c, check=True, env=env)


if __name__ == "__main__":
    main()
