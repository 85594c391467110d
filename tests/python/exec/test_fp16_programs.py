"""fp16 programs run op by op as fp16: each op's result is rounded to fp16 whether it goes to an
op computing in fp32 (the interpreter may keep it as fp32 holding fp16 values), to an op reading
fp16 as it is (cast), through a view (reshape), or out of the program."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from milkit import Builder as mb
from support.exec_util import rand, run_prog

F16, F32 = np.float16, np.float32


def op16(f, *xs: np.ndarray) -> np.ndarray:
    """f over the fp16 values computed in fp32, rounded to fp16 (one fp16 op)."""
    return f(*(np.asarray(x).astype(F32) for x in xs)).astype(F32).astype(F16)


def test_chain_of_fp32_computing_ops_rounds_each_result() -> None:
    x = rand(3, 37, dtype=F16, lo=-3, hi=3, seed=1)
    y = rand(3, 37, dtype=F16, lo=0.5, hi=2, seed=2)
    (got,) = run_prog(lambda a, b: mb.real_div(x=mb.sub(x=mb.mul(x=mb.add(x=a, y=b), y=F16(1.37)), y=a), y=b),
                      {"x": x, "y": y})
    want = op16(np.add, x, y)
    want = op16(np.multiply, want, F16(1.37))
    want = op16(np.subtract, want, x)
    want = op16(np.true_divide, want, y)
    assert got.dtype == F16
    np.testing.assert_array_equal(got, want)
    # the rounding is not a no-op here: fp32 results differ
    exact = ((x.astype(F32) + y) * F32(F16(1.37)) - x) / y
    assert np.any(exact.astype(F16) != got) or np.any(exact != got.astype(F32))


def test_value_read_by_fp32_ops_cast_reshape_and_as_output() -> None:
    x = rand(2, 3, 5, dtype=F16, lo=-2, hi=2, seed=3)
    y = rand(2, 3, 5, dtype=F16, lo=-2, hi=2, seed=4)

    def build(a: object, b: object) -> tuple:
        s = mb.mul(x=a, y=b)                                 # read by all below
        r = mb.reshape(x=s, shape=[6, 5])                    # a view of s, computing in fp32
        t = mb.add(x=mb.reshape(x=r, shape=[2, 3, 5]), y=b)  # fp32-computing reader
        c = mb.cast(x=s, dtype="fp32")                       # reads fp16 as it is
        return mb.mul(x=t, y=F16(1.37)), c, s, mb.sigmoid(x=r)

    mul_t, c, s, sig = run_prog(build, {"x": x, "y": y})
    want_s = op16(np.multiply, x, y)
    np.testing.assert_array_equal(s, want_s)
    np.testing.assert_array_equal(c, want_s.astype(F32))
    assert c.dtype == F32 and s.dtype == F16 and mul_t.dtype == F16
    np.testing.assert_array_equal(mul_t, op16(np.multiply, op16(np.add, want_s, y), F16(1.37)))
    assert sig.dtype == F16 and sig.shape == (6, 5)
    np.testing.assert_allclose(sig.astype(F32), (1 / (1 + np.exp(-want_s.astype(F32)))).reshape(6, 5),
                               rtol=1e-3, atol=1e-3)


def test_values_moved_between_fp32_ops_keep_fp16_values() -> None:
    """transpose, reshape, slices, squeeze and expand_dims between ops computing in fp32, and a moved
    value also returned (so kept as fp16) or cast."""
    x = rand(2, 6, 5, dtype=F16, lo=-2, hi=2, seed=5)
    y = rand(2, 6, 5, dtype=F16, lo=0.5, hi=2, seed=6)

    def build(a: object, b: object) -> tuple:
        s = mb.mul(x=a, y=b)
        t = mb.transpose(x=s, perm=[0, 2, 1])                                     # (2, 5, 6)
        u = mb.slice_by_index(x=t, begin=[0, 1, 0], end=[2, 5, 6], stride=[1, 2, 1])  # (2, 2, 6)
        v = mb.expand_dims(x=mb.squeeze(x=mb.slice_by_size(x=u, begin=[1, 0, 0], size=[1, 2, 6]),
                                        axes=[0]), axes=[1])                    # (2, 1, 6)
        w = mb.real_div(x=v, y=F16(0.7))
        moved = mb.reshape(x=s, shape=[12, 5])
        return w, moved, mb.cast(x=mb.transpose(x=s, perm=[1, 0, 2]), dtype="fp32"), mb.add(x=moved, y=F16(0.1))

    w, moved, c, added = run_prog(build, {"x": x, "y": y})
    s = op16(np.multiply, x, y)
    u = s.transpose(0, 2, 1)[:, 1:5:2, :]
    np.testing.assert_array_equal(w, op16(np.true_divide, u[1][:, None, :], F16(0.7)))
    np.testing.assert_array_equal(moved, s.reshape(12, 5))
    np.testing.assert_array_equal(c, s.transpose(1, 0, 2).astype(F32))
    np.testing.assert_array_equal(added, op16(np.add, s.reshape(12, 5), F16(0.1)))
    assert w.dtype == F16 and moved.dtype == F16 and added.dtype == F16



def _gathers(a: object, b: object, i: object) -> tuple:
    """q, k and v-like gathers of one fp16 product (by a constant index, by run-time indices, of a
    transposed view) read only by ops computing in fp32."""
    s = mb.mul(x=a, y=b)
    q = mb.gather(x=s, indices=np.int32(1), axis=0)                 # (4, 7)
    k = mb.gather(x=s, indices=i, axis=0)                           # (3, 4, 7), indices at run time
    g = mb.gather(x=mb.transpose(x=s, perm=[0, 2, 1]), indices=np.array([6, 0], np.int32), axis=1)
    return mb.matmul(x=q, y=k, transpose_y=True), mb.add(x=g, y=F16(0.3))


GATHER_INPUTS = {"x": rand(3, 4, 7, dtype=F16, lo=-2, hi=2, seed=7), "y": rand(3, 4, 7, dtype=F16, lo=0.5, hi=2, seed=8),
                 "i": np.array([2, 0, 2], np.int32)}


def test_values_gathered_between_fp32_ops_keep_fp16_values() -> None:
    """gather between ops computing in fp32, as attention takes q, k and v; and a gather whose
    result is also returned (so kept as fp16). Each result is the fp16 op by op."""
    x, y, idx = GATHER_INPUTS.values()
    qk, g = run_prog(_gathers, GATHER_INPUTS)
    s = op16(np.multiply, x, y).astype(F32)
    want_qk = (s[1][None] @ s[idx].transpose(0, 2, 1)).astype(F16)
    np.testing.assert_allclose(qk.astype(F32), want_qk.astype(F32), rtol=2e-3, atol=2e-3)
    np.testing.assert_array_equal(g, op16(np.add, s.transpose(0, 2, 1)[:, [6, 0], :], F16(0.3)))
    assert qk.dtype == F16 and g.dtype == F16

    def kept_too(a: object, b: object) -> tuple:
        kept = mb.gather(x=mb.mul(x=a, y=b), indices=np.int32(2), axis=0)
        return kept, mb.real_div(x=kept, y=F16(0.7))

    kept, div = run_prog(kept_too, {"x": x, "y": y})
    np.testing.assert_array_equal(kept, s[2].astype(F16))
    np.testing.assert_array_equal(div, op16(np.true_divide, s[2], F16(0.7)))
    assert kept.dtype == F16 and div.dtype == F16


def _profile_of(build: str, inputs: str) -> str:
    """MILKIT_PROFILE=ops's report (stderr) of a child process that runs this module's program
    `build` on its inputs `inputs`."""
    tests = str(Path(__file__).resolve().parents[1])
    code = (
        f"import sys; sys.path.insert(0, {tests!r})\n"
        f"from exec.test_fp16_programs import {build}, {inputs}\n"
        "from support.exec_util import run_prog\n"
        f"run_prog({build}, {inputs})\n"
    )
    env = dict(os.environ, MILKIT_PROFILE="ops")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stderr


def test_gathered_values_are_not_converted_back_to_fp32() -> None:
    """The gathers pass the fp32 tensor holding fp16 values through: the products and the add read
    it as it is, with no conversion by the frame (MILKIT_PROFILE lists conversions)."""
    profile = _profile_of("_gathers", "GATHER_INPUTS")
    assert "gather" in profile
    assert "args of matmul converted" not in profile and "args of add converted" not in profile


TRI = np.triu(np.full((4, 4), -1e4, F32), k=1)  # a causal mask, kept fp32 (fp16 cannot hold -1e5)


def _attention(a: object, b: object) -> tuple:
    """An fp16 program's attention as GPT-2's converts: one product split into q, k and v for ops
    computing in fp32, the mask added in fp32 between casts; q also returned cast to fp32."""
    s = mb.mul(x=a, y=b)                                          # (4, 12)
    q, k, v = mb.split(x=s, num_splits=3, axis=1)                 # (4, 4) each
    qk = mb.matmul(x=q, y=k, transpose_y=True)
    masked = mb.cast(x=mb.add(x=mb.cast(x=qk, dtype="fp32"), y=TRI), dtype="fp16")
    return mb.matmul(x=mb.softmax(x=masked, axis=-1), y=v), mb.cast(x=q, dtype="fp32"), mb.cast(x=qk, dtype="fp32")


ATTENTION_INPUTS = {"x": rand(4, 12, dtype=F16, lo=-2, hi=2, seed=9), "y": rand(4, 12, dtype=F16, lo=0.5, hi=2, seed=10)}


def test_split_and_casts_between_fp32_ops_keep_fp16_values() -> None:
    """split's parts and casts to fp32 between ops computing in fp32 (the interpreter keeps them as
    fp32 tensors holding fp16 values): each result is the fp16 op by op, and a cast to fp32 gives
    the fp16 values exactly. With one part also returned, the parts stay fp16: the same values."""
    out, q32, qk32 = run_prog(_attention, ATTENTION_INPUTS)
    x, y = ATTENTION_INPUTS.values()
    s = op16(np.multiply, x, y)
    q, k, v = (s[:, i * 4:(i + 1) * 4] for i in range(3))
    qk = op16(lambda a, b: a @ b.T, q, k)
    masked = (qk.astype(F32) + TRI).astype(F16)
    e = np.exp(masked.astype(F32) - masked.astype(F32).max(-1, keepdims=True))
    p = (e / e.sum(-1, keepdims=True)).astype(F16)
    np.testing.assert_array_equal(q32, q.astype(F32))
    assert q32.dtype == F32 and qk32.dtype == F32 and out.dtype == F16
    np.testing.assert_allclose(qk32, qk.astype(F32), rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(out.astype(F32), op16(np.matmul, p, v).astype(F32), rtol=3e-3, atol=3e-3)

    def part_returned(a: object, b: object) -> tuple:
        q, k, _ = mb.split(x=mb.mul(x=a, y=b), num_splits=3, axis=1)
        return q, mb.matmul(x=q, y=k, transpose_y=True)

    q_kept, qk_kept = run_prog(part_returned, ATTENTION_INPUTS)
    assert q_kept.dtype == F16
    np.testing.assert_array_equal(q_kept, q)
    np.testing.assert_array_equal(qk_kept, qk32.astype(F16))


def test_split_parts_are_not_converted_back_to_fp32() -> None:
    """The split and the casts pass the fp32 tensor holding fp16 values through: the products and
    the add read it with no conversion by the frame (MILKIT_PROFILE lists conversions)."""
    profile = _profile_of("_attention", "ATTENTION_INPUTS")
    assert "split" in profile
    assert "args of matmul converted" not in profile and "args of add converted" not in profile
