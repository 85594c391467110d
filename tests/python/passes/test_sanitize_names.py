"""mil_backend::sanitize_name_strings and common::sanitize_input_output_names against coremltools."""

import numpy as np
import pytest
from milkit.passes import apply_pass
from support.parity import ALL_OPSETS, compare_programs
from support.pass_parity import build_both, ct_run

NAMES = ["1st/conv.weight", "fp16", "a-b", "a_b", "a_b_0", "état", "state", "_ok", "x.y:0", "9", "a b",
         "bool", "a-b"]


def _build(mb, x, x1):
    v = x
    for i in range(len(NAMES)):
        v = mb.add(x=v, y=np.float32(i))
    return mb.mul(x=v, y=x1), mb.relu(x=v)


def _rename(prog):
    fn = prog.functions["main"]
    ops = [o for o in fn.operations if o.op_type != "const"]
    for o, n in zip(ops, NAMES):
        o.name = n
        o.outputs[0].name = n
    outs = fn.outputs
    outs[0].name = "out/0"
    outs[1].name = "int32"
    for i, v in enumerate(fn.inputs.values()):
        v.name = ["in.put", "2nd"][i]


@pytest.mark.parametrize("opset", ALL_OPSETS)
@pytest.mark.parametrize("name", ["mil_backend::sanitize_name_strings", "common::sanitize_input_output_names"])
def test_sanitize(opset, name):
    cp, mp, syms = build_both(_build, [(("S", 2), "fp32"), ((1, 2), "fp32")], opset)
    _rename(cp)
    _rename(mp)
    # coremltools asserts that input dict keys equal var names; rebuild its dict after renaming
    f = cp.functions["main"]
    f._input_dict = {v.name: v for v in f._input_dict.values()}
    ct_run(cp, [name])
    apply_pass(mp, name)
    compare_programs(cp, mp, syms)
    assert [v.name for v in mp.functions["main"].inputs.values()] == ["in_put", "var_2nd"]
    names = [o.name for o in mp.functions["main"].operations]
    if name.startswith("mil_backend"):
        assert "fp16_workaround" in names and "a_b_0_1" in names and "op_9" in names
    mp.validate()
