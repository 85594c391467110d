"""common::canonicalize_inplace_pattern and common::prefer_state_in_downstream against coremltools."""


import numpy as np
import pytest
from support.pass_parity import build_both, check_passes, ct_run, op_types


def _ops(prog):
    return [t for t in op_types(prog) if t != "const"]


# ---- canonicalize_inplace_pattern / prefer_state_in_downstream ---------------------------------

CANON = "common::canonicalize_inplace_pattern"
PREFER = "common::prefer_state_in_downstream"
STATES = [((2, 3), "fp16", "state"), ((2, 3), "fp16", "state"), ((2, 3), "fp16")]


def _late_update(mb, s1, s2, x):
    r1 = mb.read_state(input=s1)
    a = mb.mul(x=r1, y=x)
    b = mb.add(x=a, y=np.float16(1))
    c = mb.relu(x=b)
    u1 = mb.coreml_update_state(state=s1, value=a)
    d = mb.add(x=a, y=c)
    return d, mb.sub(x=u1, y=a), a


@pytest.mark.parametrize("names", [[CANON], [PREFER], [CANON, PREFER]])
def test_state_passes(names):
    cp, mp = check_passes(_late_update, STATES, names, opset="iOS18")
    assert _ops(cp) == _ops(mp)


def test_canonicalize_moves_update():
    _, mp = check_passes(_late_update, STATES, [CANON], opset="iOS18")
    assert _ops(mp)[:3] == ["read_state", "mul", "coreml_update_state"]


def test_prefer_state_rewires_later_users():
    _, mp = check_passes(_late_update, STATES, [CANON, PREFER], opset="iOS18")
    ops = mp.functions["main"].operations
    upd = [o for o in ops if o.op_type == "coreml_update_state"][0]
    later = ops[ops.index(upd) + 1:]
    assert all(v is not upd.inputs["value"] for o in later for v in o.inputs.values())


def test_state_passes_several_updates():
    def build(mb, s1, s2, x):
        r1 = mb.read_state(input=s1)
        a = mb.mul(x=r1, y=x)
        b = mb.add(x=a, y=np.float16(1))
        c = mb.relu(x=b)
        mb.coreml_update_state(state=s2, value=a)
        u1 = mb.coreml_update_state(state=s1, value=a)  # two updates of one value
        return mb.add(x=a, y=c), u1

    for names in ([CANON], [PREFER], [CANON, PREFER]):
        cp, mp = check_passes(build, STATES, names, opset="iOS18")
        assert _ops(cp) == _ops(mp)


def test_state_passes_negative():
    def build(mb, s1, s2, x):
        r1 = mb.read_state(input=s1)
        mb.coreml_update_state(state=s1, value=x)  # value is a function input only read by updates
        a = mb.mul(x=r1, y=x)
        u = mb.coreml_update_state(state=s2, value=a)  # already canonical; a has no other user
        return u

    for names in ([CANON], [PREFER]):
        cp, mp = check_passes(build, STATES, names, opset="iOS18")
        assert _ops(cp) == _ops(mp)


def test_canonicalize_removed_anchor_differs_from_coremltools():
    # the op after `add_0` when the pass started is an update that the pass already rebuilt and
    # removed: coremltools raises KeyError inserting before it; milkit puts the new update right
    # after add_0
    def build(mb, s1, s2, x):
        r1 = mb.read_state(input=s1)
        a = mb.mul(x=r1, y=x)
        b = mb.add(x=a, y=np.float16(1))
        u1 = mb.coreml_update_state(state=s1, value=a)
        mb.coreml_update_state(state=s2, value=b)
        return mb.add(x=u1, y=mb.relu(x=b))

    cp, _, _ = build_both(build, STATES, "iOS18")
    with pytest.raises(KeyError):
        ct_run(cp, [CANON])
    from support.pass_parity import check_numbers_only

    mp = check_numbers_only(build, STATES, [CANON], opset="iOS18")
    assert _ops(mp)[:5] == ["read_state", "mul", "coreml_update_state", "add", "coreml_update_state"]
