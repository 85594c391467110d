"""Passes of the default pipeline against coremltools: add_int16_cast, int_op_canonicalization,
canonicalize_inplace_pattern, prefer_state_in_downstream; and DEFAULT no longer skipping them."""

import warnings

import numpy as np
import pytest
from pass_parity import build_both, check_passes, ct_run, op_types

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
    from parity import _build, _make_symbols

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


# ---- int_op_canonicalization -------------------------------------------------------------------

INTOP = "common::int_op_canonicalization"


@pytest.mark.parametrize("opset", ["iOS16", "iOS17", "iOS18"])
def test_int_op_canonicalization_without_quantization(opset):
    # no dequantize -> reshape -> quantize chain: nothing changes (milkit has no quantize /
    # dequantize ops yet, so the rewrite itself cannot be built here)
    def build(mb, x):
        r = mb.reshape(x=mb.cast(x=x, dtype="int32"), shape=[3, 2])
        return mb.reshape(x=x, shape=[-1]), r

    cp, mp = check_passes(build, [((2, 3), "fp32")], [INTOP], opset=opset)
    assert _ops(mp) == ["cast", "reshape", "reshape"]


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
    from pass_parity import check_numbers_only

    mp = check_numbers_only(build, STATES, [CANON], opset="iOS18")
    assert _ops(mp)[:5] == ["read_state", "mul", "coreml_update_state", "add", "coreml_update_state"]


# ---- the default pipeline ----------------------------------------------------------------------

MINE = ["common::fuse_dilated_conv", "common::compose_conv1d", "common::fuse_prelu",
        "common::fuse_onehot_matmul_to_gather", "common::expand_dynamic_linear",
        "common::add_conv_transpose_output_shape", "common::int_op_canonicalization", INT16, CANON, PREFER]


def test_default_pipeline_runs_these_passes():
    import milkit
    from milkit import Builder as mb
    from milkit.passes import pass_names

    assert set(MINE) <= set(pass_names())
    assert set(MINE) <= set(milkit.PassPipeline.DEFAULT.passes)

    @mb.program(input_specs=[mb.TensorSpec(shape=(2,))], opset_version=milkit.target.iOS17)
    def prog(x):
        return mb.add(x=x, y=1.0)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = milkit.convert(prog, minimum_deployment_target=milkit.target.iOS17)
    # DEFAULT skips nothing, and says nothing about skipping
    assert m.skipped_passes == []
    assert not [w for w in caught if issubclass(w.category, milkit.SkippedPassesWarning)]
    # every pass of coremltools' pipelines is registered
    from milkit.pipeline import BACKEND_MLPROGRAM_PASSES, CLEANUP_PASSES, COMMON_PASSES

    assert set(COMMON_PASSES + CLEANUP_PASSES + BACKEND_MLPROGRAM_PASSES) <= set(pass_names())


def test_default_pipeline_parity():
    """coremltools' DEFAULT pipeline (the passes milkit has) on a program where the new passes fire."""
    import milkit
    from milkit.passes import pass_names

    have = set(pass_names())
    names = [n for n in milkit.PassPipeline.DEFAULT.passes if n in have]
    rng = np.random.RandomState(0)
    w2 = rng.randn(4, 3, 3, 3).astype(np.float32)
    w1 = rng.randn(4, 4, 1, 3).astype(np.float32)
    alpha = rng.randn(4, 1, 1).astype(np.float32)
    table = rng.randn(6, 8).astype(np.float32)

    def build(mb, x, i, s):
        y = mb.space_to_batch(x=x, block_shape=[2, 2], paddings=[[2, 2], [2, 2]])
        y = mb.batch_to_space(x=mb.conv(x=y, weight=w2), block_shape=[2, 2], crops=[[0, 0], [0, 0]])
        y = mb.add(x=mb.relu(x=y), y=mb.mul(x=mb.relu(x=mb.mul(x=y, y=-1.0)), y=alpha))  # prelu
        y = mb.reduce_mean(x=y, axes=[2])  # (1, 4, 8)
        c = mb.conv(x=mb.expand_dims(x=y, axes=[2]), weight=w1, pad_type="same")
        y = mb.squeeze(x=c, axes=[2])  # (1, 4, 8)
        e = mb.matmul(x=mb.one_hot(indices=i, one_hot_vector_size=6, on_value=1.0, off_value=0.0), y=table)
        g = mb.gather(x=y, indices=i, axis=1)  # (1, 2, 8)
        r = mb.read_state(input=s)
        u = mb.add(x=r, y=mb.cast(x=mb.reduce_sum(x=e, axes=[0], keep_dims=True), dtype="fp16"))
        out = mb.add(x=g, y=mb.cast(x=u, dtype="fp32"))
        mb.coreml_update_state(state=s, value=u)
        return out

    specs = [((1, 3, 8, 8), "fp32"), ((2,), "int32"), ((1, 8), "fp16", "state")]
    # (numbers: one_hot gives zeros for indices outside [0, 6) where the gather it becomes wraps or
    # fails, and add_int16_cast wraps negative ones)
    cp, mp = check_passes(build, specs, names, opset="iOS18", numbers=False)
    ops = _ops(mp)
    assert _ops(cp) == ops
    for gone in ("space_to_batch", "expand_dims", "one_hot", "mul"):
        assert gone not in ops
    assert "prelu" in ops and "gather" in ops
