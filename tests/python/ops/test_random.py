"""Parity of random_bernoulli, random_categorical, random_normal and random_uniform with coremltools:
inputs and defaults (in coremltools' materialization order), output shapes from known, symbolic and
unknown `shape` values, dtypes, errors; and the deliberate differences, pinned."""

from __future__ import annotations

import milkit
import numpy as np
import pytest
from milkit import Builder as mb_mk
from support.parity import ALL_OPSETS, check, check_error

F16 = np.float16


@pytest.mark.parametrize("build", [
    lambda mb, x: mb.random_bernoulli(shape=[2, 3]),
    lambda mb, x: mb.random_bernoulli(shape=[4], prob=F16(0.25), seed=7),
    lambda mb, x: mb.random_bernoulli(shape=np.array([1, 2, 3], np.int32), prob=np.float32(0.9)),
    lambda mb, x: mb.random_normal(shape=[2, 3]),
    lambda mb, x: mb.random_normal(shape=[5], mean=F16(1), stddev=F16(2), seed=1),
    lambda mb, x: mb.random_uniform(shape=[2, 3, 4]),
    lambda mb, x: mb.random_uniform(shape=[3], low=F16(-1), high=F16(1), seed=-1),
    lambda mb, x: mb.random_uniform(shape=[0, 2], low=np.float32(2), high=np.float32(3), seed=11),
])
def test_random_const_shape(build):
    check(build, [((1,), "fp32")], ALL_OPSETS)


@pytest.mark.parametrize("op", ["random_bernoulli", "random_normal", "random_uniform"])
def test_random_symbolic_shape(op):
    # the value of mb.shape(x): the output has x's symbolic dims
    check(lambda mb, x: getattr(mb, op)(shape=mb.shape(x=x)), [(("S", 4, "T"), "fp32")], ALL_OPSETS)
    check(lambda mb, x: getattr(mb, op)(shape=mb.concat(values=[mb.shape(x=x), [3]], axis=0), seed=3),
          [(("S", 2), "fp16")], ALL_OPSETS)
    # a run-time shape of known length: one fresh symbol per element
    check(lambda mb, s: getattr(mb, op)(shape=s), [((3,), "int32")], ALL_OPSETS)


@pytest.mark.parametrize("op", ["random_bernoulli", "random_normal", "random_uniform"])
def test_random_shape_of_unknown_length(op):
    """A shape vector of symbolic length: coremltools gives a tensor of one variadic symbol, milkit a
    tensor of unknown rank (its representation of the same thing)."""
    from support.parity import _build, _make_symbols, reset_ct_names

    specs = [(("N",), "int32")]
    symtab = _make_symbols(specs)
    reset_ct_names()
    cp = _build("ct", lambda mb, s: getattr(mb, op)(shape=s), specs, "iOS17", symtab)
    mp = _build("mk", lambda mb, s: getattr(mb, op)(shape=s), specs, "iOS17", symtab)
    (cv,) = cp.functions["main"].outputs
    (mv,) = mp.functions["main"].outputs
    assert len(cv.shape) == 1 and str(cv.shape[0]).startswith("*")
    assert not mv._has_rank
    assert [o.name for o in cp.functions["main"].operations] == [o.name for o in mp.functions["main"].operations]


@pytest.mark.parametrize("build", [
    lambda mb, x: mb.random_categorical(x=x),
    lambda mb, x: mb.random_categorical(x=x, mode="probs", size=5, seed=3),
    lambda mb, x: mb.random_categorical(x=x, size=0),
    lambda mb, x: mb.random_categorical(x=mb.reduce_sum(x=x, axes=[0, 1, 2]), size=2),  # rank 1
])
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_random_categorical(build, dtype):
    check(build, [(("B", 2, "K"), dtype)], ALL_OPSETS)


def test_random_categorical_scalar_x_as_coremltools():
    # coremltools: x.shape[:-1] of a scalar is (), so the output is (size,) (the kernel rejects it)
    check(lambda mb, x: mb.random_categorical(x=np.float32(3), size=4), [((1,), "fp32")], ALL_OPSETS)


def test_random_errors():
    spec = [((2,), "int32")]
    check_error(lambda mb, s: mb.random_normal(shape=[2, 3], mean=F16(1)), spec,
                match=r"random_normal 'random_normal_0'.*'mean' is fp16 but 'stddev' is fp32")
    check_error(lambda mb, s: mb.random_uniform(shape=[2, 3], high=F16(1)), spec,
                match=r"random_uniform 'random_uniform_0'.*'low' is fp32 but 'high' is fp16")
    check_error(lambda mb, s: mb.random_uniform(shape=[2, 3], low=F16(0), high=np.float32(1)), spec,
                match=r"random_uniform 'random_uniform_0'.*'high'")
    check_error(lambda mb, s: mb.random_normal(shape=[2.0, 3.0]), spec, match=r"random_normal 'random_normal_0'.*'shape'")
    check_error(lambda mb, s: mb.random_normal(shape=np.int32(3)), spec, match=r"random_normal 'random_normal_0'.*'shape'")
    check_error(lambda mb, s: mb.random_bernoulli(shape=[2], prob=np.int32(1)), spec,
                match=r"random_bernoulli 'random_bernoulli_0'.*'prob'")
    check_error(lambda mb, s: mb.random_bernoulli(shape=[2], seed=mb.reduce_sum(x=s)), spec,
                match=r"random_bernoulli 'random_bernoulli_0'.*'seed'.*constant")
    check_error(lambda mb, s: mb.random_bernoulli(shape=[2], seed=np.float32(1)), spec,
                match=r"random_bernoulli 'random_bernoulli_0'.*'seed'")
    check_error(lambda mb, s: mb.random_categorical(x=s), spec, match=r"random_categorical 'random_categorical_0'.*'x'")
    check_error(lambda mb, s: mb.random_categorical(x=np.zeros((2, 3), np.float32), size=np.array([2, 3], np.int32)),
                spec, match=r"random_categorical 'random_categorical_0'.*'size'")
    check_error(lambda mb, s: mb.random_categorical(x=np.zeros((2, 3), np.float32), mode=1), spec,
                match=r"random_categorical 'random_categorical_0'.*'mode'")


def _mk(build, spec=((1,), "fp32")):
    return mb_mk.program(input_specs=[mb_mk.TensorSpec(shape=spec[0], dtype=getattr(milkit.types, spec[1]))],
                         opset_version=milkit.target.iOS17)(build)


def test_pinned_differences():
    """Differences from coremltools, pinned. coremltools makes types with negative dims from a known
    negative `shape` element or a negative `size` (no tensor can have them); and it accepts a
    `shape` input of rank 2 (it reads its first dim as the output rank). milkit rejects these."""
    from coremltools.converters.mil import Builder as cmb
    from coremltools.converters.mil.mil import types

    for op in ["random_bernoulli", "random_normal", "random_uniform"]:
        fn = getattr(cmb, op)
        p = cmb.program(input_specs=[cmb.TensorSpec(shape=(1,))])(lambda x: fn(shape=[2, -3]))
        assert p.functions["main"].outputs[0].shape == (2, -3)
        mfn = getattr(mb_mk, op)
        with pytest.raises(ValueError, match=rf"{op} '{op}_0'.*'shape'.*negative dim at index 1"):
            _mk(lambda x: mfn(shape=[2, -3]))
    p = cmb.program(input_specs=[cmb.TensorSpec(shape=(1,))])(
        lambda x: cmb.random_categorical(x=np.zeros((2, 3), np.float32), size=-2))
    assert p.functions["main"].outputs[0].shape == (2, -2)
    with pytest.raises(ValueError, match=r"random_categorical 'random_categorical_0'.*'size'.*non-negative"):
        _mk(lambda x: mb_mk.random_categorical(x=np.zeros((2, 3), np.float32), size=-2))
    p = cmb.program(input_specs=[cmb.TensorSpec(shape=(2, 2), dtype=types.int32)])(lambda s: cmb.random_normal(shape=s))
    assert len(p.functions["main"].outputs[0].shape) == 2
    with pytest.raises(ValueError, match=r"random_normal 'random_normal_0'.*'shape' must be a 1-D"):
        _mk(lambda s: mb_mk.random_normal(shape=s), ((2, 2), "int32"))
