"""Whole networks by numbers: a ResNet-18 and a GPT-2-style decoder built with milkit's builder
from a torch module's weights run like torch eager; convert with the DEFAULT pipeline (FLOAT32 and
FLOAT16) keeps the numbers; and every pass of the pipeline, applied one at a time, leaves the
program computing the same outputs as before it (a pass that changes numbers is a bug)."""

from __future__ import annotations

import os
import sys
from typing import Any

import milkit as ct
import numpy as np
import pytest
from milkit.passes import pass_names
from milkit.pipeline import BACKEND_MLPROGRAM_PASSES, COMMON_PASSES

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "benchmarks"))
import models

torch = pytest.importorskip("torch")


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a.astype(np.float64) - b)) / max(float(np.max(np.abs(b))), 1e-12))


@pytest.fixture(scope="module")
def resnet() -> tuple:
    mod = models.resnet18_torch(num_classes=10, width=8)
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    with torch.no_grad():
        want = mod(torch.from_numpy(x)).numpy()
    return (lambda: models.resnet18_milkit(models.state_numpy(mod), size=32)), {"x": x}, want


@pytest.fixture(scope="module")
def gpt2() -> tuple:
    mod = models.gpt2_torch(layers=2, hidden=64, heads=4, vocab=97, max_pos=32)
    ids = np.random.default_rng(0).integers(0, 97, size=(1, 16))
    with torch.no_grad():
        want = mod(torch.from_numpy(ids)).numpy()
    return (lambda: models.gpt2_milkit(models.state_numpy(mod), seq=16, heads=4)), {"ids": ids.astype(np.int32)}, want


@pytest.mark.parametrize("workload", ["resnet", "gpt2"])
def test_matches_torch_eager(workload: str, request: Any) -> None:
    build, feed, want = request.getfixturevalue(workload)
    (got,) = ct.run(build(), feed).values()
    assert _rel(got, want) < 1e-4


@pytest.mark.parametrize("precision", ["FLOAT32", "FLOAT16"])
@pytest.mark.parametrize("workload", ["resnet", "gpt2"])
def test_converted_default_pipeline(workload: str, precision: str, request: Any) -> None:
    build, feed, want = request.getfixturevalue(workload)
    model = ct.convert(build(), minimum_deployment_target=ct.target.iOS17,
                       compute_precision=getattr(ct.precision, precision))
    (got,) = model.predict(feed).values()
    assert _rel(got, want) < (1e-4 if precision == "FLOAT32" else 2e-2)


@pytest.mark.parametrize("workload", ["resnet", "gpt2"])
def test_each_pass_keeps_the_numbers(workload: str, request: Any) -> None:
    build, feed, want = request.getfixturevalue(workload)
    prog = build()
    have = set(pass_names())
    before = list(ct.run(prog, feed).values())[0]
    changed = []
    fp16 = False  # after add_fp16_cast the program computes in fp16 (outputs are cast back)
    for name in COMMON_PASSES + BACKEND_MLPROGRAM_PASSES:
        if name not in have:
            continue
        ops_before = ct.to_text(prog)
        ct.passes.apply_pass(prog, name)
        after = list(ct.run(prog, feed).values())[0]
        fp16 = fp16 or name == "common::add_fp16_cast"
        err = _rel(after, before.astype(np.float32))
        assert err < (2e-2 if fp16 else 1e-4), f"{name} changed the outputs (relative error {err:.2e})"
        if ct.to_text(prog) != ops_before:
            changed.append(name)
        before = after
    # the pipeline did rewrite these programs (the check above saw real rewrites)
    assert changed, "no pass changed the program"
