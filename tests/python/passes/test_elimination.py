"""Passes, compared with coremltools' own passes on the same programs."""

import numpy as np
import pytest
from milkit.passes import apply_pass, pass_names
from support.parity import _build, _ct, _make_symbols, compare_programs, reset_ct_names


def _both(build, specs, opset="iOS17"):
    symtab = _make_symbols(specs)
    reset_ct_names()
    cp = _build("ct", build, specs, opset, symtab)
    mp = _build("mk", build, specs, opset, symtab)
    return cp, mp, {v[0].name for v in symtab.values()}


def _ct_pass(prog, name):
    from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY

    PASS_REGISTRY[name](prog)


def _dead_program(mb, x):
    a = mb.add(x=x, y=1.0)
    mb.mul(x=a, y=2.0)  # unused
    mb.sub(x=x, y=np.ones((4,), np.float32))  # unused
    return mb.relu(x=a) if hasattr(mb, "relu") and False else mb.maximum(x=a, y=0.0)


@pytest.mark.parametrize("name", ["common::dead_code_elimination", "common::const_elimination",
                                  "common::dedup_op_and_var_names"])
def test_pass_matches_coremltools(name):
    _ct()

    def build(mb, x):
        a = mb.add(x=x, y=1.0)
        mb.mul(x=a, y=2.0)  # dead
        folded = mb.mul(x=np.ones((4,), np.float32), y=np.float32(3))  # foldable
        b = mb.add(x=a, y=folded)
        c = mb.sub(x=b, y=b, name="add_0")  # duplicate op name
        return mb.maximum(x=c, y=0.0)

    cp, mp, syms = _both(build, [(("S", 4), "fp32")])
    _ct_pass(cp, name)
    apply_pass(mp, name)
    compare_programs(cp, mp, syms)
    mp.validate()


def test_dce_keeps_outputs_and_removes_chains():
    def build(mb, x):
        dead = mb.add(x=x, y=1.0)
        dead2 = mb.mul(x=dead, y=dead)
        mb.sub(x=dead2, y=x)
        return mb.add(x=x, y=x)

    cp, mp, syms = _both(build, [((2,), "fp32")])
    _ct_pass(cp, "common::dead_code_elimination")
    apply_pass(mp, "common::dead_code_elimination")
    compare_programs(cp, mp, syms)
    assert [o.op_type for o in mp.functions["main"].operations] == ["add"]


def test_const_elimination_skip_by_size():
    def build(mb, x):
        big = mb.add(x=np.ones((20,), np.float32), y=np.float32(1))
        small = mb.add(x=np.ones((2,), np.float32), y=np.float32(1))
        return mb.add(x=x, y=mb.mul(x=mb.reduce_sum(x=big, axes=[0]) if False else small, y=np.float32(2)))

    cp, mp, syms = _both(build, [((2,), "fp32")])
    apply_pass(mp, "common::const_elimination", skip_const_by_size=10)
    ops = [o.op_type for o in mp.functions["main"].operations]
    assert ops.count("add") == 2  # the 20-element fold is kept as an op, the small one is a const
    mp.validate()


def test_unknown_pass_is_an_error():
    _, mp, _ = _both(lambda mb, x: mb.add(x=x, y=x), [((2,), "fp32")])
    with pytest.raises(ValueError, match="unknown graph pass 'common::nope'"):
        apply_pass(mp, "common::nope")
    assert "common::const_elimination" in pass_names()
