"""common::distributive_quantized_binary_op_scale_normalization against coremltools' own pass (op for
op), with the numbers before and after (milkit's interpreter), on the programs of coremltools'
TestDistributiveQuantizedBinaryOpScaleNormalization and on programs where the pass must not fire."""

import numpy as np
import pytest
from support.pass_parity import build_both, check_numbers_only, check_passes, ct_run, op_types

NAME = ["common::distributive_quantized_binary_op_scale_normalization"]


def _params(rng, shape, per_axis, dtype=np.float32, qdtype=np.int8):
    """scale, zero point, axis: per tensor or along a random axis (coremltools' test helper)."""
    lo, hi = (-128, 128) if qdtype == np.int8 else (0, 256)
    if not per_axis:
        return dtype(rng.uniform(0.05, 1.0)), qdtype(rng.integers(lo, hi)), None
    axis = int(rng.integers(-len(shape), len(shape)))
    n = shape[axis]
    return (rng.uniform(0.05, 1.0, n).astype(dtype), rng.integers(lo, hi, n).astype(qdtype), axis)


def _q(mb, v, p, qdtype="int8"):
    s, zp, axis = p
    return mb.quantize(input=v, scale=s, zero_point=zp, axis=axis, output_dtype=qdtype)


def _dq(mb, v, p):
    s, zp, axis = p
    return mb.dequantize(input=v, scale=s, zero_point=zp, axis=axis)


def _binary(op_type, relu, px, py, pz, qdtype="int8"):
    def build(mb, x, y):
        dx = _dq(mb, _q(mb, x, px, qdtype), px)
        dy = _dq(mb, _q(mb, y, py, qdtype), py)
        z = getattr(mb, op_type)(x=dx, y=dy)
        if relu:
            z = mb.relu(x=z)
        return _dq(mb, _q(mb, z, pz, qdtype), pz)

    return build


def _scales(prog, op_type):
    return [np.asarray(o.inputs["scale"].val) for o in prog.functions["main"].operations if o.op_type == op_type]


@pytest.mark.parametrize("op_type", ["add", "sub"])
@pytest.mark.parametrize("relu", [True, False])
@pytest.mark.parametrize("rank", [1, 3, 5])
@pytest.mark.parametrize("axis_on_x", [True, False])
def test_normalize(op_type, relu, rank, axis_on_x):
    rng = np.random.default_rng(rank * 7 + relu * 3 + axis_on_x)
    shape = tuple(int(d) for d in rng.integers(1, 5, rank))
    px = _params(rng, shape, axis_on_x)
    py = _params(rng, shape, not axis_on_x)
    pz = _params(rng, shape, True)
    cp, mp = check_passes(_binary(op_type, relu, px, py, pz), [(shape, "fp32")] * 2, NAME, opset="iOS17")
    dq, q = _scales(mp, "dequantize"), _scales(mp, "quantize")
    # the divisor is the scalar scale: y's, or x's when x and y swap roles
    num, den = (px[0], py[0]) if axis_on_x else (py[0], px[0])
    assert np.array_equal(dq[2], np.float32(num) / np.float32(den)) and dq[3] == 1.0
    assert np.array_equal(q[2], pz[0] / np.float32(den))
    assert op_types(mp).count("dequantize") == 5  # the old ones stay for dead_code_elimination


def test_fp16_and_uint8():
    rng = np.random.default_rng(5)
    shape = (2, 3)
    px = _params(rng, shape, False, np.float16, np.uint8)
    py = _params(rng, shape, False, np.float16, np.uint8)
    pz = _params(rng, shape, True, np.float16, np.uint8)
    _, mp = check_passes(_binary("add", False, px, py, pz, "uint8"), [(shape, "fp16")] * 2, NAME, opset="iOS17")
    dq = _scales(mp, "dequantize")
    assert dq[2].dtype == np.float16 and dq[2] == np.float16(np.float32(px[0]) / np.float32(py[0]))


def test_versatile_inputs():
    # dequantize x also feeds exp: that reader keeps the old dequantize
    sx, sy, sz = np.float32(0.2), np.float32(0.3), np.float32(0.5)

    def build(mb, x, y):
        dx = mb.dequantize(input=mb.quantize(input=x, scale=sx, output_dtype="uint8"), scale=sx)
        dy = mb.dequantize(input=mb.quantize(input=y, scale=sy, output_dtype="uint8"), scale=sy)
        qz = mb.quantize(input=mb.add(x=dx, y=dy), scale=sz, output_dtype="uint8")
        qz1 = mb.quantize(input=mb.exp(x=dx), scale=sz, output_dtype="uint8")
        return mb.dequantize(input=qz, scale=sz), mb.dequantize(input=qz1, scale=sz)

    _, mp = check_passes(build, [((2, 1), "fp32")] * 2, NAME, opset="iOS17")
    ops = mp.functions["main"].operations
    exp = [o for o in ops if o.op_type == "exp"][0]
    assert exp.inputs["x"].op.inputs["scale"].val == sx


def test_one_dequantize_on_both_sides_and_quantized_output():
    # add(d, d): both inputs read the x-side dequantize (scale 1), the y-side one is left unread;
    # the quantize output is the function's output and keeps its name
    s = np.float32(0.25)

    def build(mb, x):
        d = mb.dequantize(input=mb.quantize(input=x, scale=s, zero_point=np.int8(2), output_dtype="int8"),
                          scale=s, zero_point=np.int8(2))
        return mb.quantize(input=mb.sub(x=d, y=d), scale=np.float32(0.1), output_dtype="int8")

    cp, mp = check_passes(build, [((3, 4), "fp32")], NAME, opset="iOS17")
    sub = [o for o in mp.functions["main"].operations if o.op_type == "sub"][0]
    assert sub.inputs["x"] is sub.inputs["y"]
    assert [v.name for v in mp.functions["main"].outputs] == ["quantize_1"]


def test_nested_block():
    s = np.float32(0.25)

    def build(mb, x, y):
        dx = mb.dequantize(input=mb.quantize(input=x, scale=s, output_dtype="int8"), scale=s)
        dy = mb.dequantize(input=mb.quantize(input=y, scale=np.float32(0.5), output_dtype="int8"),
                           scale=np.float32(0.5))

        def branch(op_type):
            def fn():
                z = getattr(mb, op_type)(x=dx, y=dy)
                return mb.dequantize(input=mb.quantize(input=z, scale=np.float32(0.3), output_dtype="int8"),
                                     scale=np.float32(0.3))
            return fn

        return mb.cond(pred=mb.greater(x=mb.reduce_sum(x=x), y=0.0), _true_fn=branch("add"), _false_fn=branch("sub"))

    cp, mp = check_passes(build, [((2, 3), "fp32")] * 2, NAME, opset="iOS17")
    blocks = [o for o in mp.functions["main"].operations if o.op_type == "cond"][0].blocks
    for b in blocks:
        assert [o.inputs["scale"].val for o in b.operations if o.op_type == "quantize"] == [np.float32(0.3 / 0.5)]


# ---- where the pass must not fire ---------------------------------------------------------------

def _unchanged(build, specs, opset="iOS17"):
    cp, mp = check_passes(build, specs, NAME, opset=opset)
    before, _, _ = build_both(build, specs, opset)
    assert op_types(mp) == op_types(before)
    return mp


def _scalar_scales(sx, sy, sz):
    return [(np.float32(v), None, None) for v in (sx, sy, sz)]


def test_skip_fp16_underflow_and_overflow():
    # neither scale can divide: a quotient leaves fp16's range either way
    for sx, sy, sz in ((5e-8, -5e-8, 0.8), (1e3, 1e-2, 1e-5), (1e-2, 1e3, 1e-5)):
        _unchanged(_binary("add", False, *_scalar_scales(sx, sy, sz), "uint8"), [((1, 2), "fp32")] * 2)


def test_overflow_one_way_swaps():
    # s_x / s_y = 1e5 overflows fp16; s_y / s_x does not: x's scale becomes 1
    _, mp = check_passes(_binary("add", False, *_scalar_scales(1e3, 1e-2, 0.8), "uint8"), [((1, 2), "fp32")] * 2,
                         NAME, opset="iOS17")
    dq = _scales(mp, "dequantize")
    assert dq[2] == np.float32(1e-2) / np.float32(1e3) and dq[3] == 1.0


@pytest.mark.parametrize("rank", [1, 2, 5])
def test_skip_two_vector_scales(rank):
    rng = np.random.default_rng(rank)
    shape = tuple(int(d) for d in rng.integers(1, 5, rank))
    px = _params(rng, shape, True, np.float16, np.uint8)
    py = _params(rng, shape, True, np.float16, np.uint8)
    pz = _params(rng, shape, False, np.float16, np.uint8)
    _unchanged(_binary("add", False, px, py, pz, "uint8"), [(shape, "fp16")] * 2)


_S, _T = np.float32(0.25), np.float32(0.5)


def _dq_scalar(mb, v, sc=_S):
    return mb.dequantize(input=mb.quantize(input=v, scale=sc, output_dtype="int8"), scale=sc)


def _q_scalar(mb, v):
    return mb.quantize(input=v, scale=_T, output_dtype="int8")


def _mul(mb, x, y):  # not distributive
    return _q_scalar(mb, mb.mul(x=_dq_scalar(mb, x), y=_dq_scalar(mb, y)))


def _plain_input(mb, x, y):  # y is not dequantized
    return _q_scalar(mb, mb.add(x=_dq_scalar(mb, x), y=y))


def _no_quantize(mb, x, y):
    return mb.relu(x=mb.add(x=_dq_scalar(mb, x), y=_dq_scalar(mb, y)))


def _two_readers(mb, x, y):  # the add also feeds exp
    z = mb.add(x=_dq_scalar(mb, x), y=_dq_scalar(mb, y))
    return _q_scalar(mb, z), mb.exp(x=z)


def _relu_two_readers(mb, x, y):
    r = mb.relu(x=mb.add(x=_dq_scalar(mb, x), y=_dq_scalar(mb, y)))
    return _q_scalar(mb, r), mb.exp(x=r)


def _add_is_output(mb, x, y):  # the add's output leaves the pattern
    z = mb.add(x=_dq_scalar(mb, x), y=_dq_scalar(mb, y))
    return _q_scalar(mb, z), z


def _dequantize_is_output(mb, x, y):
    d = _dq_scalar(mb, y)
    return _q_scalar(mb, mb.add(x=_dq_scalar(mb, x), y=d)), d


@pytest.mark.parametrize("build", [_mul, _plain_input, _no_quantize, _two_readers, _relu_two_readers, _add_is_output,
                                   _dequantize_is_output], ids=lambda f: f.__name__.lstrip("_"))
def test_skip_patterns_that_do_not_match(build):
    _unchanged(build, [((2, 3), "fp32")] * 2)


# ---- deliberate differences ---------------------------------------------------------------------

def _relu_negative_scale(sx):
    sy, sz = np.float32(-0.25), np.float32(0.5)

    def build(mb, x, y):
        dx = mb.dequantize(input=mb.quantize(input=x, scale=sx, output_dtype="int8"), scale=sx)
        dy = mb.dequantize(input=mb.quantize(input=y, scale=sy, output_dtype="int8"), scale=sy)
        return mb.quantize(input=mb.relu(x=mb.add(x=dx, y=dy)), scale=sz, output_dtype="int8")

    return build


def test_relu_needs_a_positive_divisor_differs_from_coremltools():
    # relu(z / s) == relu(z) / s only for s > 0. coremltools divides by y's scale -0.25 anyway,
    # which changes the results (shown with numpy on the scales it writes); milkit divides by x's
    # positive scale instead, and leaves the pattern alone when no scalar scale is positive.
    specs = [((2, 3), "fp32")] * 2
    build = _relu_negative_scale(np.float32(0.125))
    cp, _, _ = build_both(build, specs, "iOS17")
    ct_run(cp, NAME)
    ct_dq, ct_q = _scales(cp, "dequantize"), _scales(cp, "quantize")
    assert ct_dq[2] == np.float32(0.125) / np.float32(-0.25) and ct_dq[3] == 1.0
    qx, qy = np.int8(8), np.int8(1)  # x = 1.0, y = -0.25: relu(0.75) / 0.5 rounds to 2
    before = np.round(max(qx * 0.125 + qy * -0.25, 0.0) / 0.5)
    after = np.round(max(qx * ct_dq[2] + qy * ct_dq[3], 0.0) / ct_q[2])
    assert before == 2 and after == 0

    mp = check_numbers_only(build, specs, NAME)
    dq, q = _scales(mp, "dequantize"), _scales(mp, "quantize")
    assert dq[2] == np.float32(-0.25) / np.float32(0.125) and dq[3] == 1.0 and q[2] == np.float32(4.0)

    mp = check_numbers_only(_relu_negative_scale(np.float32(-0.125)), specs, NAME)
    assert op_types(mp).count("dequantize") == 2


def test_add_returned_by_a_nested_block_differs_from_coremltools():
    # the add's output is also what a cond branch returns: coremltools rewrites anyway (it only
    # checks the enclosing block's outputs), so the cond returns z / s_y; milkit leaves it alone
    s, t = np.float32(0.25), np.float32(0.5)

    def build(mb, x, y):
        dx = mb.dequantize(input=mb.quantize(input=x, scale=s, output_dtype="int8"), scale=s)
        dy = mb.dequantize(input=mb.quantize(input=y, scale=t, output_dtype="int8"), scale=t)
        z = mb.add(x=dx, y=dy)
        qz = mb.quantize(input=z, scale=np.float32(0.3), output_dtype="int8")
        c = mb.cond(pred=mb.greater(x=mb.reduce_sum(x=x), y=0.0), _true_fn=lambda: z, _false_fn=lambda: dx)
        return qz, c

    specs = [((2, 3), "fp32")] * 2
    cp, _, _ = build_both(build, specs, "iOS17")
    ct_run(cp, NAME)
    assert [o.inputs["scale"].val for o in cp.functions["main"].operations if o.op_type == "dequantize"][-1] == 1.0
    mp = check_numbers_only(build, specs, NAME)
    assert op_types(mp).count("dequantize") == 2


def test_default_pipeline_parity():
    """coremltools' DEFAULT pipeline (the passes milkit has) on a program where the pass fires."""
    import milkit
    from milkit.passes import pass_names

    have = set(pass_names())
    names = [n for n in milkit.PassPipeline.DEFAULT.passes if n in have]
    assert NAME[0] in names
    rng = np.random.default_rng(11)
    px, py, pz = _params(rng, (2, 3), True), _params(rng, (2, 3), False), _params(rng, (2, 3), False)
    cp, mp = check_passes(_binary("sub", True, px, py, pz), [((2, 3), "fp32")] * 2, names, opset="iOS17")
    assert op_types(mp).count("dequantize") == 3  # the old x / y ones are gone
