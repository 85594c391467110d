"""Elementwise ops after a conv that read only its output and each other's results (hardswish
and hardsigmoid as converted programs spell them, relu, relu6, silu, sigmoid, sigmoid_hard, scalar
arithmetic): the plan runs them inside the conv's step. Results must be bit for bit those of the
ops' own kernels (the same program with the conv's output also returned, which keeps every op
separate), in fp16 programs too (each op's result rounded to fp16); ops that broadcast a tensor,
read another input, or whose results are read elsewhere stay separate."""

from __future__ import annotations

from typing import Any, Callable

import milkit as ct
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from milkit import Builder as mb
from support.exec_util import rand, run_child, run_prog

# a chain: (op, operand) pairs applied in order to the conv output; operand "head" is the conv output,
# ("r", v) puts the scalar v first (sub(x=v, y=cur)), a float is a scalar second operand; "r" is the
# residual tensor given to build_chain (("rt",): the residual first)
HARDSWISH = [("add", 3.0), ("maximum", 0.0), ("minimum", 6.0), ("mul", "head"), ("mul", 1 / 6)]
HARDSIGMOID = [("maximum", 0.0), ("minimum", 6.0), ("mul", 1 / 6)]
CHAINS = {
    "hardswish": HARDSWISH,
    "hardswish_swapped": [("add", ("r", 3.0)), ("maximum", ("r", 0.0)), ("minimum", 6.0), ("mul", ("h",)),
                          ("real_div", 6.0)],
    "hardsigmoid": HARDSIGMOID,
    "arith": [("sub", ("r", 0.75)), ("real_div", ("r", 3.0)), ("sub", 0.3), ("minimum", "head"), ("add", "head"),
              ("sub", ("h",)), ("maximum", ("h",)), ("mul", 1.7)],
    "relu_relu6": [("relu", None), ("mul", 4.1), ("relu6", None)],
    # products then sums, of scalars and of the head: one FMA in place of a product and its sum
    # would change the low bits
    "scale_shift": [("mul", 1.7), ("add", 0.3), ("mul", "head"), ("sub", ("r", 0.2)), ("mul", ("h",)),
                    ("add", "head")],
    "silu_sigmoid": [("silu", None), ("add", 0.5), ("sigmoid", None)],
    "sigmoid_hard": [("sigmoid_hard", (0.2, 0.5)), ("mul", "head")],
    # infinities, then NaN (inf * 0) through maximum, minimum and relu, which keep it as numpy does
    "nan_propagation": [("mul", 1e30), ("mul", 1e30), ("mul", 0.0), ("maximum", "head"), ("minimum", ("h",)),
                        ("relu", None), ("add", 1.0)],
}
NP = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "real_div": np.true_divide, "maximum": np.maximum,
      "minimum": np.minimum}


def build_chain(chain: list, dt: Any, c: Any, rv: Any = None) -> Any:
    """The chain's ops over conv output c (rv: the residual its "r" links read)."""
    cur = c
    for op, arg in chain:
        if arg == "r":
            cur = getattr(mb, op)(x=cur, y=rv)
        elif arg == ("rt",):
            cur = getattr(mb, op)(x=rv, y=cur)
        elif op in ("relu", "relu6", "silu", "sigmoid"):
            cur = getattr(mb, op)(x=cur)
        elif op == "sigmoid_hard":
            cur = mb.sigmoid_hard(x=cur, alpha=dt(arg[0]), beta=dt(arg[1]))
        elif arg == "head":
            cur = getattr(mb, op)(x=cur, y=c)
        elif arg == ("h",):
            cur = getattr(mb, op)(x=c, y=cur)
        elif isinstance(arg, tuple):
            cur = getattr(mb, op)(x=dt(arg[1]), y=cur)
        else:
            with np.errstate(over="ignore"):  # 1e30 is inf in fp16
                y = arg if isinstance(arg, np.ndarray) else dt(arg)
            cur = getattr(mb, op)(x=cur, y=y)
    return cur


def ref_chain(chain: list, dt: Any, c: np.ndarray, rv: np.ndarray | None = None) -> np.ndarray:
    """The chain op by op in fp32 with each result rounded to dt (torch for the activations); rv:
    the residual its "r" links read."""
    def r(v: Any) -> np.ndarray:
        return np.asarray(v, np.float32).astype(dt).astype(np.float32)

    head = r(c)
    cur = head
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for op, arg in chain:
            if arg == "r":
                cur = r(NP[op](cur, r(rv)))
            elif arg == ("rt",):
                cur = r(NP[op](r(rv), cur))
            else:
                cur = ref_link(op, arg, dt, cur, head, r)
    return cur


def ref_link(op: str, arg: Any, dt: Any, cur: np.ndarray, head: np.ndarray, r: Callable) -> np.ndarray:
    """One op of ref_chain."""
    t = torch.from_numpy(cur)
    if op in ("relu", "relu6", "silu"):
        return r(getattr(F, op)(t).numpy())
    if op == "sigmoid":
        return r(torch.sigmoid(t).numpy())
    if op == "sigmoid_hard":
        a, b = np.float32(dt(arg[0])), np.float32(dt(arg[1]))
        return r(np.minimum(np.maximum(a * cur + b, 0), 1))
    if arg == "head":
        return r(NP[op](cur, head))
    if arg == ("h",):
        return r(NP[op](head, cur))
    if isinstance(arg, tuple):
        return r(NP[op](np.float32(dt(arg[1])), cur))
    return r(NP[op](cur, np.asarray(arg).astype(dt).astype(np.float32)))


def conv_of(w: np.ndarray, b: np.ndarray) -> Callable[[Any], Any]:
    return lambda v: mb.conv(x=v, weight=w, bias=b, pad_type="custom", pad=[1, 1, 1, 1])


def torch_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    f = np.float32
    return F.conv2d(torch.tensor(x.astype(f)), torch.tensor(w.astype(f)), torch.tensor(b.astype(f)), padding=1).numpy()


def run_fused_and_apart(chain: list, x: np.ndarray, w: np.ndarray, b: np.ndarray,
                        conv: Callable[[Any], Any] | None = None, rv: np.ndarray | None = None) -> tuple:
    """The chain's result with the conv's output read only by it, and with it returned too (the
    conv is conv_of(w, b) unless given; rv: a residual input, read by the chain's "r" links)."""
    dt = x.dtype.type
    conv = conv or conv_of(w, b)
    feed = {"x": x} if rv is None else {"x": x, "r": rv}
    (fused,) = run_prog(lambda v, *u: build_chain(chain, dt, conv(v), *u), feed)
    apart, c = run_prog(lambda v, *u: (lambda cv: (build_chain(chain, dt, cv, *u), cv))(conv(v)), feed)
    return fused, apart, c


def fused_equals_apart(chain: list, x: np.ndarray, w: np.ndarray, b: np.ndarray,
                       conv: Callable[[Any], Any] | None = None, rv: np.ndarray | None = None) -> tuple:
    """run_fused_and_apart on 1, 2 and 3 threads: the fused result has x's dtype and the bits of
    the ops apart each time. Returns the last (fused, conv output)."""
    for threads in (1, 2, 3):
        ct.set_num_threads(threads)
        try:
            fused, apart, c = run_fused_and_apart(chain, x, w, b, conv, rv)
        finally:
            ct.set_num_threads(0)
        assert fused.dtype == x.dtype
        np.testing.assert_array_equal(fused, apart)
    return fused, c


@pytest.mark.parametrize("name", sorted(CHAINS))
@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(2, 4, 11, 13), (1, 3, 45, 47)])
def test_chain_after_conv_matches_its_ops(name: str, dt: type, shape: tuple) -> None:
    chain = CHAINS[name]
    x = rand(*shape, dtype=dt, lo=-3, hi=3, seed=1)
    w, b = rand(5, shape[1], 3, 3, dtype=dt, seed=2), rand(5, dtype=dt, lo=-2, hi=2, seed=3)
    fused, c = fused_equals_apart(chain, x, w, b)
    assert fused.dtype == np.dtype(dt)
    want = ref_chain(chain, dt, c.astype(np.float32))
    # silu and sigmoid are a few ulp from torch's; sigmoid_hard's a * x + b may be one fma
    exact = not any(op in ("silu", "sigmoid", "sigmoid_hard") for op, _ in chain)
    if exact:
        np.testing.assert_array_equal(fused.astype(np.float32), want)
    else:
        np.testing.assert_allclose(fused.astype(np.float32), want, rtol=2e-3 if dt == np.float16 else 1e-5,
                                   atol=2e-3 if dt == np.float16 else 1e-6)
    tol = {"rtol": 3e-3, "atol": 3e-3} if dt == np.float16 else {"rtol": 1e-4, "atol": 1e-4}
    np.testing.assert_allclose(c.astype(np.float32), torch_conv(x, w, b), **tol)
    if name == "hardswish":
        np.testing.assert_allclose(fused.astype(np.float32), F.hardswish(torch.tensor(c.astype(np.float32))).numpy(),
                                   **tol)


@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_chain_stops_where_a_result_is_read_elsewhere(dt: type) -> None:
    """A result of the chain also returned: the ops up to it may fuse, the rest run apart."""
    x = rand(1, 3, 9, 10, dtype=dt, lo=-3, hi=3, seed=4)
    w, b = rand(4, 3, 3, 3, dtype=dt, seed=5), rand(4, dtype=dt, seed=6)
    conv = conv_of(w, b)

    def build(v: Any) -> tuple:
        c = conv(v)
        mid = build_chain(HARDSWISH[:3], dt, c)  # add, maximum, minimum: returned too
        return mb.mul(x=mb.mul(x=c, y=mid), y=dt(1 / 6)), mid

    out, mid = run_prog(build, {"x": x})
    _, _, c = run_fused_and_apart(HARDSWISH, x, w, b)
    np.testing.assert_array_equal(mid.astype(np.float32), ref_chain(HARDSWISH[:3], dt, c.astype(np.float32)))
    np.testing.assert_array_equal(out.astype(np.float32), ref_chain(HARDSWISH, dt, c.astype(np.float32)))


@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_broadcasting_and_runtime_operands_stay_apart(dt: type) -> None:
    """A per-channel constant (broadcast) and a constant that widens the shape are not links;
    a second input of the conv output's shape is (a residual operand). Results match op by op."""
    x = rand(2, 3, 7, 9, dtype=dt, lo=-3, hi=3, seed=7)
    y = rand(2, 4, 7, 9, dtype=dt, lo=-1, hi=1, seed=8)
    w, b = rand(4, 3, 3, 3, dtype=dt, seed=9), rand(4, dtype=dt, seed=10)
    per_channel = rand(1, 4, 1, 1, dtype=dt, seed=11)
    wider = rand(3, 1, 1, 1, 1, dtype=dt, seed=12)
    conv = conv_of(w, b)

    def build(v: Any, u: Any) -> tuple:
        c1 = mb.add(x=mb.mul(x=conv(v), y=per_channel), y=dt(0.5))
        c2 = mb.relu(x=mb.mul(x=conv(v), y=u))
        c3 = mb.sub(x=conv(v), y=wider)
        return c1, c2, c3

    c1, c2, c3 = run_prog(build, {"x": x, "y": y})
    (c,) = run_prog(lambda v: conv(v), {"x": x})
    cf = c.astype(np.float32)

    def r(v: np.ndarray) -> np.ndarray:
        return v.astype(dt).astype(np.float32)

    np.testing.assert_array_equal(c1.astype(np.float32), r(r(cf * per_channel.astype(np.float32)) + np.float32(dt(0.5))))
    np.testing.assert_array_equal(c2.astype(np.float32), np.maximum(r(cf * y.astype(np.float32)), 0))
    assert c3.shape == (3, 2, 4, 7, 9)
    np.testing.assert_array_equal(c3.astype(np.float32), r(cf - wider.astype(np.float32)))


@pytest.mark.parametrize("name", ["hardswish", "sigmoid_hard", "relu_relu6", "arith", "scale_shift"])
@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize(
    ("shape", "cout"),
    [((2, 40, 7, 7), 37), ((1, 48, 14, 14), 24), ((1, 600, 5, 5), 20), ((1, 700, 14, 14), 9)],
)
def test_chain_after_pointwise_conv(name: str, dt: type, shape: tuple, cout: int) -> None:
    """1x1 convs of more input channels over small images compute blocks of output channels from
    their bias across every pixel and run the chain on each block while it is in cache (7x7: 48
    columns and one; a long inner dim of two blocks of k; an input too large to pack whole, which
    takes the other path). The bits are those of the ops apart, on 1, 2 and 3 threads."""
    chain = CHAINS[name]
    x = rand(*shape, dtype=dt, lo=-1, hi=1, seed=13)
    w, b = rand(cout, shape[1], 1, 1, dtype=dt, lo=-0.2, hi=0.2, seed=14), rand(cout, dtype=dt, lo=-2, hi=2, seed=15)

    fused, c = fused_equals_apart(chain, x, w, b, lambda v: mb.conv(x=v, weight=w, bias=b))
    want = ref_chain(chain, dt, c.astype(np.float32))
    tol = {"rtol": 3e-3, "atol": 3e-3} if dt == np.float16 else {"rtol": 1e-5, "atol": 1e-5}
    np.testing.assert_allclose(fused.astype(np.float32), want, **tol)
    f = np.float32
    ref = F.conv2d(torch.tensor(x.astype(f)), torch.tensor(w.astype(f)), torch.tensor(b.astype(f))).numpy()
    np.testing.assert_allclose(c.astype(np.float32), ref, **({"rtol": 3e-3, "atol": 3e-3} if dt == np.float16 else {"rtol": 1e-4, "atol": 1e-4}))


@pytest.mark.parametrize("name", ["hardswish", "sigmoid_hard", "relu_relu6", "scale_shift"])
@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize(("shape", "k", "s"), [((2, 20, 7, 7), 3, 1), ((1, 16, 40, 40), 5, 2), ((1, 8, 60, 60), 3, 1)])
def test_chain_after_depthwise_conv(name: str, dt: type, shape: tuple, k: int, s: int) -> None:
    """A depthwise conv runs the chain on each block of 16 channels (or each plane) as it is
    finished: the bits of the ops apart, on 1, 2 and 3 threads."""
    chain = CHAINS[name]
    c_in = shape[1]
    x = rand(*shape, dtype=dt, lo=-2, hi=2, seed=16)
    w, b = rand(c_in, 1, k, k, dtype=dt, seed=17), rand(c_in, dtype=dt, lo=-1, hi=1, seed=18)

    def conv(v: Any) -> Any:
        return mb.conv(x=v, weight=w, bias=b, groups=c_in, strides=[s, s], pad_type="custom", pad=[k // 2] * 4)

    fused, c = fused_equals_apart(chain, x, w, b, conv)
    tol = {"rtol": 3e-3, "atol": 3e-3} if dt == np.float16 else {"rtol": 1e-5, "atol": 1e-5}
    np.testing.assert_allclose(fused.astype(np.float32), ref_chain(chain, dt, c.astype(np.float32)), **tol)


# (input shape, weight shape, conv arguments): the conv kernels' paths (pointwise tiles of few input
# channels, row blocks, a 1x1 over a large image, depthwise by channel blocks and by planes, a
# stem, Winograd 3x3, im2col with a stride, groups, a 1x1 image)
ROUNDED_CONVS = [
    ((1, 8, 30, 30), (24, 8, 1, 1), {}),
    ((1, 40, 14, 14), (36, 40, 1, 1), {}),
    ((1, 48, 80, 80), (20, 48, 1, 1), {}),
    ((1, 32, 14, 14), (32, 1, 3, 3), {"groups": 32, "pad_type": "same"}),
    ((1, 16, 90, 90), (16, 1, 3, 3), {"groups": 16, "strides": [2, 2], "pad_type": "same"}),
    ((1, 3, 64, 64), (16, 3, 3, 3), {"strides": [2, 2], "pad_type": "same"}),
    ((1, 24, 20, 20), (32, 24, 3, 3), {"pad_type": "same"}),
    ((1, 24, 21, 21), (40, 24, 3, 3), {"strides": [2, 2], "pad_type": "valid"}),
    ((2, 24, 9, 9), (30, 8, 3, 3), {"groups": 3, "pad_type": "same"}),
    ((1, 64, 1, 1), (48, 64, 1, 1), {}),
]


@pytest.mark.parametrize(("xs", "ws", "kw"), ROUNDED_CONVS)
def test_fp16_conv_output_rounded_in_the_kernel(xs: tuple, ws: tuple, kw: dict) -> None:
    """An fp16 conv output read by another fp32-computing op (kept in fp32 between them) is
    rounded to fp16 by the conv kernel, tile by tile: the reader sees the bits it sees when the
    output is also returned (then cast to fp16), on 1, 2 and 3 threads."""
    dt = np.float16
    x = rand(*xs, dtype=dt, lo=-1, hi=1, seed=19)
    w, b = rand(*ws, dtype=dt, lo=-0.3, hi=0.3, seed=20), rand(ws[0], dtype=dt, lo=-1, hi=1, seed=21)
    per_channel = rand(1, ws[0], 1, 1, dtype=dt, lo=0.9, hi=1.1, seed=22)

    def conv(v: Any) -> Any:
        return mb.conv(x=v, weight=w, bias=b, **kw)

    for threads in (1, 2, 3):
        ct.set_num_threads(threads)
        try:
            (alone,) = run_prog(lambda v: mb.add(x=mb.mul(x=conv(v), y=per_channel), y=dt(0.1)), {"x": x})
            (apart, c) = run_prog(lambda v: (lambda cv: (mb.add(x=mb.mul(x=cv, y=per_channel), y=dt(0.1)), cv))(conv(v)),
                                  {"x": x})
        finally:
            ct.set_num_threads(0)
        assert alone.dtype == np.float16
        np.testing.assert_array_equal(alone, apart)
    if "strides" not in kw:  # torch's "same" padding takes stride 1 only
        f = np.float32
        ref = F.conv2d(torch.tensor(x.astype(f)), torch.tensor(w.astype(f)), torch.tensor(b.astype(f)),
                       groups=kw.get("groups", 1), padding=kw.get("pad_type", "valid")).numpy()
        np.testing.assert_allclose(c.astype(np.float32), ref, rtol=3e-3, atol=3e-3)


# chains reading a tensor of the conv output's shape besides ("r": the op's second operand,
# ("rt",): its first), as a residual block's add does
RESIDUAL_CHAINS = {
    "add": [("add", "r")],
    "add_relu": [("add", "r"), ("relu", None)],
    "sub_first_max": [("sub", ("rt",)), ("maximum", "r"), ("mul", 0.5), ("minimum", "head")],
    "hardswish_add": HARDSWISH + [("add", ("rt",))],
}


@pytest.mark.parametrize("name", sorted(RESIDUAL_CHAINS))
@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize(("xs", "ws", "kw"), ROUNDED_CONVS)
def test_residual_chain_in_conv(name: str, dt: type, xs: tuple, ws: tuple, kw: dict) -> None:
    """A chain that reads another tensor of the conv output's shape (a residual block's add) runs
    in the conv's step on every conv path, each tile reading the tensor at its own elements: the
    bits of the ops apart (the conv's output also returned), on 1, 2 and 3 threads, and the values
    of the ops in numpy."""
    chain = RESIDUAL_CHAINS[name]
    x = rand(*xs, dtype=dt, lo=-1, hi=1, seed=30)
    w, b = rand(*ws, dtype=dt, lo=-0.3, hi=0.3, seed=31), rand(ws[0], dtype=dt, lo=-1, hi=1, seed=32)

    def conv(v: Any) -> Any:
        return mb.conv(x=v, weight=w, bias=b, **kw)

    (c0,) = run_prog(conv, {"x": x})
    rv = rand(*c0.shape, dtype=dt, lo=-2, hi=2, seed=33)
    fused, c = fused_equals_apart(chain, x, w, b, conv, rv)
    assert fused.dtype == np.dtype(dt)
    np.testing.assert_array_equal(fused.astype(np.float32), ref_chain(chain, dt, c.astype(np.float32), rv))


@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_chain_stops_before_reading_its_own_result(dt: type) -> None:
    """A link whose other operand is an earlier result of the chain (never stored when fused) is
    not a residual link: the chain stops before it, and the values are the ops'."""
    x = rand(1, 4, 9, 9, dtype=dt, lo=-2, hi=2, seed=34)
    w, b = rand(6, 4, 3, 3, dtype=dt, seed=35), rand(6, dtype=dt, seed=36)

    def build(v: Any) -> Any:
        c = conv_of(w, b)(v)
        a = mb.relu(x=c)
        return mb.add(x=mb.mul(x=a, y=dt(2)), y=a)

    (got,) = run_prog(build, {"x": x})
    (c,) = run_prog(conv_of(w, b), {"x": x})

    def r(v: np.ndarray) -> np.ndarray:
        return v.astype(dt).astype(np.float32)

    a = np.maximum(c.astype(np.float32), 0)
    np.testing.assert_array_equal(got.astype(np.float32), r(r(a * np.float32(2)) + a))


def test_residual_chain_is_fused() -> None:
    """The profile names the fused step conv+add+relu (no add step of its own), and an operand of
    another shape (broadcast) leaves the add apart."""
    code = (
        "import numpy as np\n"
        "from milkit import Builder as mb\n"
        "import milkit\n"
        "x = np.ones((1, 8, 12, 12), np.float32); r = np.ones((1, 16, 12, 12), np.float32)\n"
        "w = np.full((16, 8, 1, 1), 0.1, np.float32); r1 = np.ones((1, 16, 1, 12), np.float32)\n"
        "@mb.program(input_specs=[mb.TensorSpec(shape=x.shape), mb.TensorSpec(shape=r.shape),\n"
        "                         mb.TensorSpec(shape=r1.shape)])\n"
        "def prog(a, b, d):\n"
        "    y = mb.relu(x=mb.add(x=mb.conv(x=a, weight=w), y=b))\n"
        "    return y, mb.add(x=mb.conv(x=a, weight=w), y=d)\n"
        "milkit.runtime.run(prog, {'a': x, 'b': r, 'd': r1})\n")
    out = run_child(code, {"MILKIT_PROFILE": "ops"}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [ln.split()[0] for ln in (out.stdout + out.stderr).splitlines() if ln.startswith("  ")]
    assert "conv+add+relu" in rows, rows
    assert "add" in rows and "conv" in rows, rows  # the broadcasting add stays apart
