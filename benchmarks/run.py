#!/usr/bin/env python3
"""Runs every benchmark against coremltools in one go (ratios, not absolute times)."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    cmds = [
        [sys.executable, os.path.join(HERE, "bench_build.py"), "--workload", "chain", "--n", "10000"],
        [sys.executable, os.path.join(HERE, "bench_build.py"), "--workload", "transformer", "--layers", "12",
         "--hidden", "768", "--runs", "3"],
    ]
    for c in cmds:
        print("$", " ".join(os.path.relpath(x) if x.endswith(".py") else x for x in c[1:]), flush=True)
        subprocess.run(c, check=True)


if __name__ == "__main__":
    main()
