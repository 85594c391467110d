"""Small packages for the model utilities (tests/python/utils): a prefill-like and a stateful decode-like function
sharing weights, one with other weights (written for iOS17), and duplicates inside a function."""

from __future__ import annotations

import os

__all__ = ["B", "SMALL", "W", "W_HALF", "W_OTHER", "build_decode", "build_other", "build_prefill", "packages"]

import milkit
import numpy as np
import pytest
from milkit import Builder as mb
from milkit import types

RNG = np.random.default_rng(7)
W = RNG.standard_normal((64, 32)).astype(np.float32)
B = RNG.standard_normal((64,)).astype(np.float32)
W_HALF = RNG.standard_normal((16, 64)).astype(np.float16)
SMALL = np.linspace(-1, 1, 16).astype(np.float32)  # stored in weight.bin (>= 10), not deduplicated in a function
W_OTHER = RNG.standard_normal((64, 32)).astype(np.float32)


def build_prefill(seq: int = 8) -> object:
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, seq, 32))], opset_version=milkit.target.iOS18)
    def prog(x):
        h = mb.linear(x=x, weight=W, bias=B, name="proj")
        h = mb.relu(x=h, name="act")
        h = mb.cast(x=h, dtype="fp16", name="to16")
        y = mb.linear(x=h, weight=W_HALF, name="down")
        y = mb.reshape(x=y, shape=[1, seq, 1, 16], name="r")
        y = mb.add(x=y, y=SMALL.astype(np.float16), name="y")
        return mb.cast(x=y, dtype="fp32", name="out")
    return prog


def build_decode() -> object:
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 1, 32)),
                             mb.StateTensorSpec(shape=(1, 16), dtype=types.fp16)],
                opset_version=milkit.target.iOS18)
    def prog(x, cache):
        h = mb.linear(x=x, weight=W, bias=B, name="proj")
        h = mb.relu(x=h, name="act")
        h = mb.cast(x=h, dtype="fp16", name="to16")
        y = mb.linear(x=h, weight=W_HALF, name="down")
        y = mb.reshape(x=y, shape=[1, 16], name="r")
        old = mb.read_state(input=cache, name="old")
        y = mb.add(x=y, y=old, name="acc")
        mb.coreml_update_state(state=cache, value=y, name="upd")
        y = mb.add(x=y, y=SMALL.astype(np.float16), name="y")
        # the same values again in this function: one copy in weight.bin
        z = mb.mul(x=y, y=SMALL.astype(np.float16), name="z")
        return mb.cast(x=z, dtype="fp32", name="out")
    return prog


def build_other() -> object:
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 1, 32))], opset_version=milkit.target.iOS17)
    def prog(x):
        a = mb.linear(x=x, weight=W_OTHER, name="a")
        # an equal (but separate) const in one function: merged by const_deduplication
        b = mb.linear(x=x, weight=W_OTHER.copy(), name="b")
        c = mb.add(x=a, y=b, name="c")
        return mb.add(x=c, y=B, name="out")
    return prog


@pytest.fixture(scope="session")
def packages(tmp_path_factory) -> dict:
    """name -> path of small packages written by milkit."""
    d = tmp_path_factory.mktemp("sources")
    out = {}
    for name, build in (("prefill", build_prefill), ("decode", build_decode), ("other", build_other)):
        path = os.path.join(str(d), f"{name}.mlpackage")
        milkit.save(build(), path)
        out[name] = path
    return out
