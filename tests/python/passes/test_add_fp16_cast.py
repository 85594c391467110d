"""common::add_fp16_cast (FP16ComputePrecision) against coremltools, alone and followed by the
cleanup passes coremltools runs after it."""

import numpy as np
import pytest
from support.parity import ALL_OPSETS
from support.pass_parity import check_passes

P = "common::add_fp16_cast"
AFTER = [P, "common::const_elimination", "common::dead_code_elimination", "common::cast_optimization",
         "common::dead_code_elimination", "common::const_elimination"]
rng = np.random.default_rng(1)
W = rng.standard_normal((6, 4)).astype(np.float32)


def _mlp(mb, x):
    a = mb.linear(x=x, weight=W, bias=np.ones((6,), np.float32))
    b = mb.relu(x=a)
    c = mb.add(x=b, y=b)  # b has several users: one cached cast
    d = mb.mul(x=b, y=np.float32(2))
    s = mb.shape(x=d)  # fp32 in, int32 out
    e = mb.softmax(x=mb.sub(x=c, y=d), axis=-1)
    return e, s, mb.reduce_mean(x=e, axes=[-1], keep_dims=False)


@pytest.mark.parametrize("opset", ALL_OPSETS)
@pytest.mark.parametrize("passes", [[P], AFTER], ids=["alone", "cleanup"])
def test_mlp(opset, passes):
    cp, mp = check_passes(_mlp, [(("S", 4), "fp32")], passes, opset)
    if passes is AFTER:
        fn = mp.functions["main"]
        consts = [o for o in fn.operations if o.op_type == "const" and o.outputs[0].dtype.__name__ == "fp16"]
        assert consts, "the weights should be fp16 consts"


@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_mixed_precision_and_exclusions(opset):
    def build(mb, x):
        a = mb.leaky_relu(x=x, alpha=0.1)
        b = mb.sigmoid_hard(x=a, alpha=0.2, beta=0.5)
        c = mb.rsqrt(x=mb.abs(x=b), epsilon=1e-6)
        d = mb.log(x=c, epsilon=1e-30)  # the fp16 cast flushes 1e-30 to 0: smallest subnormal kept
        e = mb.cast(x=d, dtype="fp16")  # cast is never rewritten
        f = mb.add(x=d, y=np.float32(70000))  # overflows fp16: stays fp32
        g = mb.add(x=d, y=np.float32(-3e38))  # treated as -inf: fp16
        g = mb.add(x=g, y=np.float32(-1e38))  # fp32(1e38) < 1e38 in float64, not in numpy's fp32 test
        g = mb.add(x=g, y=np.array([1e37, 0], np.float32)[:1])  # finite and too big: stays fp32
        h = mb.mul(x=x, y=np.array([1e-9, -1e-9, 0, 1], np.float32))  # tiny values
        return e, f, g, h

    check_passes(build, [((2, 4), "fp32")], [P], opset)
    check_passes(build, [((2, 4), "fp32")], AFTER, opset)


def test_skip_ops_by_type():
    check_passes(_mlp, [((3, 4), "fp32")], AFTER, "iOS17", {P: {"skip_ops_by_type": "relu,mul"}})
    _, mp = check_passes(_mlp, [((3, 4), "fp32")], [P], "iOS17", {P: {"skip_ops_by_type": "relu,mul"}})
    names = [o.name for o in mp.functions["main"].operations]
    assert "relu_0" in names and "add_0_cast_fp16" in names


def test_fp16_and_int_inputs_untouched_and_outputs_keep_names():
    def build(mb, x, x1):
        a = mb.add(x=x, y=x)  # fp16 already: unchanged
        b = mb.add(x=x1, y=x1)  # int32: unchanged
        c = mb.cast(x=x, dtype="fp32")
        d = mb.matmul(x=c, y=c, transpose_y=True)
        return a, b, d

    cp, mp = check_passes(build, [((3, 3), "fp16"), ((3,), "int32")], [P], "iOS16")
    assert [v.name for v in mp.functions["main"].outputs] == ["add_0", "add_1", "matmul_0"]
    assert "matmul_0_cast_fp16" in [o.name for o in mp.functions["main"].operations]


def test_multi_output_and_tuple_inputs():
    def build(mb, x):
        a, b = mb.split(x=x, num_splits=2, axis=0)
        c = mb.concat(values=[a, b, a], axis=1)
        v, i = mb.topk(x=c, k=2)
        return v, i, mb.layer_norm(x=c, axes=[-1])

    for opset in ALL_OPSETS:
        check_passes(build, [((4, 3), "fp32")], [P], opset)
        check_passes(build, [((4, 3), "fp32")], AFTER, opset)


def test_weights_past_the_fold_limit_become_fp16_consts():
    """A weight of more than 2**24 elements (the builder folds no larger result) still becomes an
    fp16 const: its cast is lazy, so it folds at any size, as coremltools folds every cast of a
    const. (An 8B LLM's feed-forward weights were left fp32 behind a run-time cast.)"""
    import milkit as ct
    from milkit import Builder as mb
    from milkit import types

    w = np.zeros((4097, 4096), np.float32)
    w[0, :4] = [1.0, -2.0, 65504.0, 1e-8]

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4096), dtype=types.fp32)], opset_version=ct.target.iOS17)
    def prog(x):
        return mb.linear(x=x, weight=w)

    m = ct.convert(prog, minimum_deployment_target=ct.target.iOS17, compute_precision=ct.precision.FLOAT16)
    fn = m._mil_program.functions["main"]
    casts = [o for o in fn.operations if o.op_type == "cast"]
    assert len(casts) == 2 and all(c.inputs["x"].op is None or c.inputs["x"].op.op_type != "const" for c in casts)
    weights = [o for o in fn.operations if o.op_type == "const" and o.outputs[0].shape == (4097, 4096)]
    assert len(weights) == 1 and weights[0].outputs[0].dtype == types.fp16
    got = weights[0].outputs[0].val[0, :4]
    np.testing.assert_array_equal(got, np.array([1.0, -2.0, 65504.0, 1e-8], np.float32).astype(np.float16))



FOLLOWS = {P: {"_cast_optimization_follows": "1"}}


def _round_trips(mb, x, y):
    a = mb.relu(x=x)  # its fp32 cast is read twice by one op, by two other ops and by an output
    b = mb.add(x=a, y=a)
    c = mb.mul(x=a, y=np.float32(3))
    k = mb.add(x=np.ones((4,), np.float32), y=np.float32(1))  # folded: a constant fp16 value
    m = mb.mul(x=k, y=c)
    d = mb.cast(x=b, dtype="fp16")  # a cast is not rewritten: it keeps reading the fp32 cast
    pred = mb.greater(x=mb.reduce_sum(x=y), y=np.float32(0))
    # (inside a branch: sub's fp32 value is read by relu alone, in the same block)
    e = mb.cond(pred=pred, _true_fn=lambda: mb.relu(x=mb.sub(x=c, y=b)), _false_fn=lambda: mb.add(x=c, y=m))
    f = mb.softmax(x=mb.add(x=e, y=y), axis=-1)
    # a chain whose fp32 values only ops of this block read, ending in a cast, which reads fp32
    g = mb.exp(x=mb.sqrt(x=mb.abs(x=mb.mul(x=f, y=y))))
    h = mb.cast(x=g, dtype="fp16")
    return a, d, f, h


def _milkit_run(specs, opset, passes, options):
    from milkit.passes import apply_passes
    from support.pass_parity import _build, _make_symbols

    p = _build("mk", _round_trips, specs, opset, _make_symbols(specs))
    apply_passes(p, list(passes), options, verify_each=True)
    return p


@pytest.mark.parametrize("opset", ["iOS16", "iOS17", "iOS18"])
def test_without_fp32_round_trips_when_cast_optimization_follows(opset):
    # the casts back to fp16 of the pass's own fp32 casts are not made: after cast_optimization
    # and dead_code_elimination the program is coremltools' (and the one made with them)
    from milkit.passes import apply_passes
    from support.parity import compare_programs
    from support.pass_parity import assert_values_exact, build_both, ct_run

    specs = [((2, 4), "fp32"), ((2, 4), "fp32")]
    cp, mp, syms = build_both(_round_trips, specs, opset)
    ct_run(cp, AFTER)
    apply_passes(mp, list(AFTER), FOLLOWS, verify_each=True)
    compare_programs(cp, mp, syms)
    assert_values_exact(cp, mp)
    assert str(_milkit_run(specs, opset, AFTER, None)) == str(mp)
    # the pass alone does make fewer casts with the option
    def casts(p):
        return sum(o.op_type == "cast" for o in p.functions["main"].operations)

    assert casts(_milkit_run(specs, opset, [P], FOLLOWS)) < casts(_milkit_run(specs, opset, [P], None))


def test_fp32_casts_are_made_only_where_an_op_reads_fp32():
    # with the option, an output that only ops of its own block read gets its cast to fp32 only
    # when one of them stays fp32 (here the cast op); the others read the fp16 value
    import milkit as ct
    from milkit import Builder as mb
    from milkit.passes import apply_passes

    @mb.program(input_specs=[mb.TensorSpec((2, 4))], opset_version=ct.target.iOS17)
    def prog(x):
        b = mb.sqrt(x=mb.abs(x=x, name="a"), name="b")
        c = mb.exp(x=b, name="c")
        return mb.cast(x=c, dtype="fp16", name="d"), mb.relu(x=b, name="e")

    apply_passes(prog, [P], FOLLOWS, verify_each=True)
    ops = [o for o in prog.functions["main"].operations if o.op_type != "const"]
    assert [o.name for o in ops] == ["x_to_fp16", "a_cast_fp16", "b_cast_fp16", "c_cast_fp16",
                                     "c_cast_fp16_to_fp32", "d", "e_cast_fp16", "e_cast_fp16_to_fp32"]
    assert ops[5].inputs["x"].name == "c_cast_fp16_to_fp32" and ops[6].inputs["x"].name == "b_cast_fp16"


def test_convert_says_when_cast_optimization_follows():
    import milkit
    from milkit.pipeline import _cast_optimization_follows, _pipeline_passes

    passes, _ = _pipeline_passes(None, milkit.precision.FLOAT16)
    i = passes.index(P)
    assert _cast_optimization_follows(passes, i)
    assert not _cast_optimization_follows(passes[:i + 1] + ["common::noop_elimination"] + passes[i + 1:], i)
    assert not _cast_optimization_follows([p for p in passes if p != "common::cast_optimization"], i)
