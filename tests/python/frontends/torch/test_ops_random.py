"""Random ops (rand, randn, randint, bernoulli, normal, uniform_, multinomial, randperm, training
dropout): the values are fresh draws, so shapes, dtypes, ranges and sample statistics are checked,
and a program whose result does not depend on the draws matches eager exactly."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from support.torch_util import DIALECTS, Fn, check, convert, export, r

N = 20000


def run(fn, args, dialect: str, precision: str = "fp32", dynamic_shapes=None) -> list:
    ep = export(Fn(fn), args, dialect, dynamic_shapes)
    mm = convert(ep, precision)
    names = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    return list(mm.predict({n: a.numpy() for n, a in zip(names, args)}).values()), mm, names


def stats_ok(v: np.ndarray, mean: float, std: float) -> None:
    v = v.astype(np.float64).ravel()
    assert abs(v.mean() - mean) < 6 * std / np.sqrt(v.size) + 1e-3
    assert abs(v.std() - std) < 0.05 * std + 1e-3


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("precision", ("fp32", "fp16"))
def test_uniform_and_normal(dialect: str, precision: str) -> None:
    x = r(100, 200)
    fns = lambda x: (torch.rand(N), torch.randn(N), torch.rand_like(x), torch.randn_like(x),  # noqa: E731
                     torch.empty(N).uniform_(-1.0, 3.0), torch.normal(2.0, 3.0, (N,)))
    outs, _, _ = run(fns, (x,), dialect, precision)
    u, z, ul, zl, w, nm = outs
    assert u.shape == (N,) and ul.shape == (100, 200) and zl.shape == (100, 200)
    for a in (u, ul):
        assert a.min() >= 0 and a.max() < 1
        stats_ok(a, 0.5, np.sqrt(1 / 12))
    stats_ok(z, 0, 1)
    stats_ok(zl, 0, 1)
    assert w.min() >= -1 and w.max() < 3
    stats_ok(w, 1, 4 / np.sqrt(12))
    stats_ok(nm, 2, 3)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_randint(dialect: str) -> None:
    x = r(100, 200)
    outs, _, _ = run(lambda x: (torch.randint(3, 9, (N,)), torch.randint(5, (N,)), torch.randint_like(x, 2, 6)),
                     (x,), dialect)
    a, b, c = outs
    assert a.min() == 3 and a.max() == 8 and np.issubdtype(a.dtype, np.integer)
    assert b.min() == 0 and b.max() == 4
    assert c.dtype == np.float32 and set(np.unique(c)) == {2.0, 3.0, 4.0, 5.0}
    stats_ok(a, 5.5, np.sqrt((6 * 6 - 1) / 12))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_bernoulli(dialect: str) -> None:
    p = torch.full((N,), 0.25)
    x = r(N)
    outs, _, _ = run(lambda p, x: (torch.bernoulli(p), torch.bernoulli(x, 0.7), torch.bernoulli(p * 0 + 1)),
                     (p, x), dialect)
    a, b, c = outs
    assert set(np.unique(a)) <= {0.0, 1.0} and set(np.unique(b)) <= {0.0, 1.0}
    stats_ok(a, 0.25, np.sqrt(0.25 * 0.75))
    stats_ok(b, 0.7, np.sqrt(0.7 * 0.3))
    assert (c == 1).all()


@pytest.mark.parametrize("dialect", DIALECTS)
def test_normal_tensor_parameters(dialect: str) -> None:
    mean = torch.full((N,), -2.0)
    std = torch.full((N,), 0.5)
    outs, _, _ = run(lambda m, s: (torch.normal(m, s), torch.normal(m, 2.0), torch.normal(1.0, s)),
                     (mean, std), dialect)
    stats_ok(outs[0], -2, 0.5)
    stats_ok(outs[1], -2, 2)
    stats_ok(outs[2], 1, 0.5)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_multinomial_and_randperm(dialect: str) -> None:
    w = torch.tensor([[0.0, 1.0, 3.0], [2.0, 0.0, 2.0]])
    outs, mm, names = run(lambda w: (torch.multinomial(w, 4000, replacement=True), torch.randperm(50)), (w,), dialect)
    s, perm = outs
    assert s.shape == (2, 4000)
    assert set(np.unique(s[0])) == {1, 2} and set(np.unique(s[1])) == {0, 2}
    assert abs((s[0] == 2).mean() - 0.75) < 0.05
    assert sorted(perm.tolist()) == list(range(50))
    perm2 = list(mm.predict({names[0]: w.numpy()}).values())[1]
    assert not np.array_equal(perm, perm2)


def test_multinomial_without_replacement_is_refused() -> None:
    ep = export(Fn(lambda w: torch.multinomial(w, 2)), (torch.rand(2, 5),))
    with pytest.raises(ValueError, match="without replacement"):
        convert(ep)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_distinct_draws_differ(dialect: str) -> None:
    x = r(64)
    outs, mm, names = run(lambda x: (torch.rand_like(x), torch.rand_like(x), torch.randn(64)), (x,), dialect)
    assert not np.array_equal(outs[0], outs[1])
    again = list(mm.predict({names[0]: x.numpy()}).values())
    assert not np.array_equal(outs[0], again[0]) and not np.array_equal(outs[2], again[2])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("precision,rtol", (("fp32", 0.0), ("fp16", 1e-3)))
def test_draws_times_zero_match_eager(dialect: str, precision: str, rtol: float) -> None:
    seq = torch.export.Dim("seq", min=2, max=64)
    fn = lambda x: torch.rand_like(x) * 0 + x + torch.randn(x.shape[0], 3) * 0  # noqa: E731
    check(Fn(fn), (r(5, 3),), dialect, rtol=rtol, precision=precision, dynamic_shapes=(({0: seq},),),
          more_args=[(r(9, 3),)])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_training_dropout_is_identity(dialect: str) -> None:
    x = r(4, 6)
    outs, _, _ = run(lambda x: F.dropout(x, 0.5, training=True) + 1, (x,), dialect)
    np.testing.assert_allclose(outs[0], x.numpy() + 1, rtol=1e-6)
