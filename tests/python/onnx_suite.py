"""ONNX's backend conformance suite (the node cases the ``onnx`` package generates) against
``milkit.onnx_backend``, with the expected failures kept in ``onnx_backend_xfail.txt``.

Run as a script to rerun every case and rewrite that file (each failing case with the error as
its reason); ``test_onnx_backend_suite.py`` runs the suite in ``make test``.

    PYTHONPATH=python python3 tests/python/onnx_suite.py [--write]
"""

from __future__ import annotations

import os
import re
import sys
import unittest
import warnings
from typing import Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
XFAIL_FILE = os.path.join(HERE, "onnx_backend_xfail.txt")


def read_xfail() -> Dict[str, str]:
    """test name (without the _cpu suffix) -> reason."""
    out: Dict[str, str] = {}
    if not os.path.exists(XFAIL_FILE):
        return out
    with open(XFAIL_FILE) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition("#")
            out[name.strip()] = reason.strip()
    return out


def node_test_class(xfail: bool = True) -> type:
    """The unittest class of ONNX's node cases, run by milkit's backend (CPU only)."""
    import milkit.onnx_backend as backend
    import onnx.backend.test

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bt = onnx.backend.test.BackendTest(backend, __name__)
    if xfail:
        for name in read_xfail():
            bt.xfail("^" + re.escape(name) + "_cpu$")
    cls = bt.test_cases["OnnxBackendNodeModelTest"]
    # the runner makes a CUDA twin of every case, skipped for a CPU backend: drop them
    for name in [n for n in vars(cls) if n.startswith("test_") and n.endswith("_cuda")]:
        delattr(cls, name)
    return cls


# element types milkit claims: it computes in fp32 / fp16 / int32 / bool and narrows to them, and
# holds bf16, the float8 family, float4 e2m1, int4 / uint4 and int2 / uint2 exactly in fp32 / int32
# (conversions into them rounded in the program); strings and complex numbers are not claimed
CLAIMED_TYPES = {1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26}


def _elem_types(model) -> set:
    g = model.graph
    types = {v.type.tensor_type.elem_type for v in list(g.input) + list(g.output) if v.type.HasField("tensor_type")}
    types |= {t.data_type for t in g.initializer}
    for n in g.node:
        for a in n.attribute:
            if a.HasField("t"):
                types.add(a.t.data_type)
            if a.name == "to":
                types.add(a.i)
    return types


def node_case_ops() -> Dict[str, List[str]]:
    """case name -> the operators of its graph (default domain); a case holding an element type
    milkit does not claim gets the pseudo-operator '<dtype>'."""
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    out = {}
    for c in cases:
        ops = {n.op_type for n in c.model.graph.node}
        if not _elem_types(c.model) <= CLAIMED_TYPES:
            ops.add("<dtype>")
        out[c.name] = sorted(ops)
    return out


def run_all() -> Tuple[int, Dict[str, str]]:
    """Runs every node case without expected failures; returns (count, failures name -> reason)."""
    cls = node_test_class(xfail=False)
    suite = unittest.TestLoader().loadTestsFromTestCase(cls)
    result = unittest.TestResult()
    suite.run(result)
    fails: Dict[str, str] = {}
    for test, tb in result.failures + result.errors:
        name = test.id().rsplit(".", 1)[-1]
        if name.endswith("_cpu"):
            name = name[: -len("_cpu")]
        lines = [ln for ln in tb.strip().splitlines() if ln.strip()]
        last = lines[-1] if lines else "failed"
        # keep the first line of the message, short, without addresses or temp paths
        last = re.sub(r"0x[0-9a-f]+", "0x..", last)[:180]
        fails[name] = last
    return result.testsRun, fails


def main() -> None:
    n, fails = run_all()
    print(f"{n} cases, {len(fails)} fail ({100.0 * (n - len(fails)) / max(n, 1):.1f}% pass)")
    if "--write" in sys.argv:
        with open(XFAIL_FILE, "w") as f:
            f.write("# ONNX backend node cases milkit is expected to fail, one per line: name  # reason\n")
            f.write("# Rewritten by `PYTHONPATH=python python3 tests/python/onnx_suite.py --write`.\n")
            for name in sorted(fails):
                f.write(f"{name}  # {fails[name]}\n")


if __name__ == "__main__":
    main()
