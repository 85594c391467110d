"""common::add_int16_cast against coremltools."""


import numpy as np
import pytest
from support.pass_parity import check_passes, op_types

INT16 = "common::add_int16_cast"


def _ops(prog):
    return [t for t in op_types(prog) if t != "const"]


def _names(prog, op_type):
    return [o.name for o in prog.functions["main"].operations if o.op_type == op_type]


def _int16_program(mb, x, i):
    a = mb.gather(x=x, indices=i, axis=0)  # function input indices: the initial int16
    x2 = mb.cast(x=x, dtype="int32")
    a2 = mb.gather(x=x2, indices=i, axis=0)  # int32 data cast too; i is cast once (two users)
    b = mb.gather_along_axis(x=x, indices=mb.tile(x=mb.expand_dims(x=i, axes=[1]), reps=[1, 3]), axis=0)
    c = mb.gather_nd(x=x, indices=mb.expand_dims(x=i, axes=[1]))
    d = mb.squeeze(x=mb.expand_dims(x=x2, axes=[0]), axes=[0])
    e = mb.topk(x=x2, k=2)
    return a, a2, b, c, d, e[0], e[1]


@pytest.mark.parametrize("opset", ["iOS15", "iOS16", "iOS17", "iOS18"])
def test_int16_cast(opset):
    specs = [((4, 3), "fp32"), ((2,), "int32")]
    # numbers: coremltools' state leaks uint16 into casts of dynamic values, which wraps negative
    # ones (the pass trades range for speed, as add_fp16_cast trades precision); compared on
    # non-negative inputs below
    cp, mp = check_passes(_int16_program, specs, [INT16], opset=opset, numbers=False)
    assert _ops(cp) == _ops(mp)
    changed = opset in ("iOS17", "iOS18")  # cast supports int16 / uint16 from iOS17
    assert ("gather_0_cast_uint16" in _names(mp, "gather")) == changed
    assert (_ops(mp).count("cast") > 1) == changed
    _numbers(_int16_program, specs, opset)


def _numbers(build, specs, opset, names=(INT16,), lo=0, hi=3):
    import milkit
    from milkit.passes import apply_passes
    from support.parity import _build, _make_symbols

    before = _build("mk", build, specs, opset, _make_symbols(specs))
    after = _build("mk", build, specs, opset, _make_symbols(specs))
    apply_passes(after, list(names), None, verify_each=True)
    rng = np.random.default_rng(0)
    feed = {}
    for (shape, dt), name in zip(specs, ["x"] + [f"x{n}" for n in range(1, len(specs))]):
        shape = [3 if isinstance(d, str) else d for d in shape]
        npdt = {"int32": np.int32, "uint16": np.uint16, "fp16": np.float16}.get(dt, np.float32)
        feed[name] = (rng.integers(lo, hi, size=shape) if "int" in dt else rng.uniform(0, 5, shape)).astype(npdt)
    a, b = milkit.run(before, feed), milkit.run(after, feed)
    assert list(a) == list(b)
    for k in a:
        assert b[k].dtype == a[k].dtype
        np.testing.assert_array_equal(b[k], a[k])


def test_int16_cast_consts_and_casts():
    def build(mb, x, i, u):
        small = mb.gather(x=x, indices=np.array([0, 1], np.int32), axis=0)  # uint16 const
        neg = mb.gather(x=x, indices=np.array([-1, 2], np.int32), axis=0)  # int16 const
        huge = mb.gather(x=mb.cast(x=x, dtype="int32"), indices=[0], axis=0)  # fits uint16
        far = mb.gather(x=np.arange(70000, dtype=np.int32).reshape(7, 10000), indices=i, axis=1)  # data > int16
        fromu = mb.gather(x=x, indices=mb.cast(x=u, dtype="int32"), axis=0)  # cast of uint16: uint16
        fromf = mb.gather(x=x, indices=mb.cast(x=mb.cast(x=u, dtype="fp32"), dtype="int32"), axis=0)
        return small, neg, huge, far, fromu, fromf

    specs = [((4, 3), "fp32"), ((2,), "int32"), ((2,), "uint16")]
    cp, mp = check_passes(build, specs, [INT16], opset="iOS18", numbers=False)
    assert _ops(cp) == _ops(mp)
    _numbers(build, specs, "iOS18")


def test_int16_cast_large_dim():
    # dynamic indices into a dim past 32767 stay int32
    def build(mb, x, i):
        return mb.gather(x=x, indices=i, axis=-1), mb.gather_along_axis(x=x, indices=mb.tile(x=mb.expand_dims(
            x=i, axes=[0]), reps=[2, 1]), axis=1)

    cp, mp = check_passes(build, [((2, 40000), "fp16"), ((3,), "int32")], [INT16], opset="iOS17", numbers=False)
    assert _ops(cp) == _ops(mp)
    assert _names(mp, "gather") == ["gather_0"]


def test_int16_cast_symbolic_and_nested_state():
    def build(mb, x, i):
        s = mb.squeeze(x=mb.cast(x=x, dtype="int32"), axes=[1])  # the state is int16 from the start
        g = mb.gather(x=s, indices=i, axis=0)
        t = mb.topk(x=mb.cast(x=x, dtype="int32"), k=1, axis=0, output_indices_dtype="int32")
        return g, t[1]

    cp, mp = check_passes(build, [(("S", 1), "fp32"), (("T",), "int32")], [INT16], opset="iOS17", numbers=False)
    assert _ops(cp) == _ops(mp)
