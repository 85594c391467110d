"""common::canonicalize_quantized_lut_pattern against coremltools' own pass (op for op), with the
numbers before and after (milkit's interpreter), on the programs of coremltools' TestReorderQuantizedLut
and on programs where the pass must not fire or where milkit deliberately differs."""

import numpy as np
import pytest
from coremltools.converters.mil.mil import types as ctypes
from support.pass_parity import build_both, check_numbers_only, check_passes, ct_run, op_types

NAME = ["common::canonicalize_quantized_lut_pattern"]
LUT = "constexpr_lut_to_dense"
SHIFT = "constexpr_blockwise_shift_scale"


def _indices(rng, shape, nbits=4):
    return rng.integers(0, 2**nbits, shape).astype(getattr(ctypes, f"np_uint{nbits}_dtype"))


def _lut_first(mb, idx, lut, scale, offset=None, names=(None, None), vector_axis=None):
    """Pattern 2: lut(int8) -> constexpr_lut_to_dense -> constexpr_blockwise_shift_scale."""
    kw = {} if vector_axis is None else {"vector_axis": vector_axis}
    if names[0]:
        kw["name"] = names[0]
    dense = mb.constexpr_lut_to_dense(indices=idx, lut=lut, **kw)
    kw = {} if offset is None else {"offset": offset}
    if names[1]:
        kw["name"] = names[1]
    return mb.constexpr_blockwise_shift_scale(data=dense, scale=scale, **kw)


def _dequant_first(mb, idx, lut, scale, offset=None, names=(None, None), vector_axis=None):
    """Pattern 1: lut(int8) -> constexpr_blockwise_shift_scale -> constexpr_lut_to_dense."""
    kw = {} if offset is None else {"offset": offset}
    if names[0]:
        kw["name"] = names[0]
    deq = mb.constexpr_blockwise_shift_scale(data=lut, scale=scale, **kw)
    kw = {} if vector_axis is None else {"vector_axis": vector_axis}
    if names[1]:
        kw["name"] = names[1]
    return mb.constexpr_lut_to_dense(indices=idx, lut=deq, **kw)


def _first_readers(prog):
    """For each constexpr op: the op type of its (only) reader."""
    ops = prog.functions["main"].operations
    return {o.op_type: sorted({c.op_type for c in o.outputs[0].child_ops}) for o in ops if o.op_type in (LUT, SHIFT)}


def _two_orders(shape, same=True):
    """coremltools' test: one weight in each order, each feeding a linear (the same weight unless
    `same` is false)."""
    rng = np.random.default_rng(len(shape))
    w = (8, shape[-1])
    idx = _indices(rng, w)
    lut = rng.integers(0, 6, w + (16, 1)).astype(np.int8)
    lut2 = lut if same else lut[::-1].copy()
    scale, offset = np.float16(2.0).reshape(1, 1), np.int8(1).reshape(1, 1)

    def build(mb, x):
        w1 = _lut_first(mb, idx, lut, scale, offset)
        w2 = _dequant_first(mb, idx, lut2, scale.reshape(1, 1, 1, 1), offset.reshape(1, 1, 1, 1))
        return mb.add(x=mb.linear(x=x, weight=w1), y=mb.linear(x=x, weight=w2))

    return build


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 4)])
@pytest.mark.parametrize("opset", ["iOS18", "iOS26"])
def test_two_orders(shape, opset):
    cp, mp = check_passes(_two_orders(shape), [(shape, "fp16")], NAME, opset=opset)
    assert op_types(mp).count(LUT) == 2 and op_types(mp).count(SHIFT) == 2
    if opset == "iOS18":  # dequantize first before iOS26
        assert _first_readers(mp) == {SHIFT: [LUT], LUT: ["linear"]}
    else:  # Core ML fixed lut -> shift_scale in iOS26
        assert _first_readers(mp) == {LUT: [SHIFT], SHIFT: ["linear"]}


@pytest.mark.parametrize("opset", ["iOS18", "iOS26"])
def test_names_are_kept_by_position(opset):
    # names without the op type in them are the user's: the first new op takes the first old op's
    # name and the last one the last's (the weight's name); made-up names are made afresh
    rng = np.random.default_rng(1)
    idx, lut = _indices(rng, (8, 4)), rng.integers(-8, 8, (1, 1, 16, 1)).astype(np.int8)
    s2, s4 = np.float16(0.5).reshape(1, 1), np.float16(0.5).reshape(1, 1, 1, 1)

    def build(mb, x):
        if opset == "iOS18":
            a = _lut_first(mb, idx, lut, s2, names=("w1_palette", "w1"))
            b = _lut_first(mb, idx, lut, s2, names=(None, "w2"))
        else:
            a = _dequant_first(mb, idx, lut, s4, names=("w1_q", "w1"))
            b = _dequant_first(mb, idx, lut, s4, names=("w2_q", None))
        return mb.linear(x=x, weight=a), mb.linear(x=x, weight=b)

    cp, mp = check_passes(build, [((2, 4), "fp16")], NAME, opset=opset)
    names = [o.name for o in mp.functions["main"].operations if o.op_type in (LUT, SHIFT)]
    assert "w1" in names and ("w2" in names if opset == "iOS18" else "w2_q" in names)


def test_per_channel_scale_repeats_the_palette():
    # 8 rows share 4 palettes (2 rows each); one scale per row: the palettes are repeated to 8 so
    # each carries its row's scale; an int8 offset per row moves the same way
    rng = np.random.default_rng(2)
    idx = _indices(rng, (8, 6))
    lut = rng.integers(-8, 8, (4, 1, 16, 1)).astype(np.int8)
    scale = rng.uniform(0.1, 1.0, (8, 1)).astype(np.float16)
    offset = rng.integers(-3, 3, (8, 1)).astype(np.int8)

    def build(mb, x):
        return mb.linear(x=x, weight=_lut_first(mb, idx, lut, scale, offset))

    cp, mp = check_passes(build, [((3, 6), "fp16")], NAME, opset="iOS18")
    shift = [o for o in mp.functions["main"].operations if o.op_type == SHIFT][0]
    assert shift.inputs["data"].shape == (8, 1, 16, 1) and shift.inputs["scale"].shape == (8, 1, 1, 1)
    assert np.array_equal(shift.inputs["data"].val, np.repeat(lut, 2, axis=0))


def test_per_block_scale_within_palettes():
    # 2 scales over 4 palettes: no repeat, but (as in coremltools) the palette becomes a new const
    rng = np.random.default_rng(3)
    idx = _indices(rng, (8, 6), nbits=2)
    lut = rng.integers(-8, 8, (4, 1, 4, 1)).astype(np.int8)
    scale = np.array([[0.5], [0.25]], np.float32)

    def build(mb, x):
        return mb.linear(x=x, weight=_lut_first(mb, idx, lut, scale))

    cp, mp = check_passes(build, [((3, 6), "fp32")], NAME, opset="iOS18")
    shift = [o for o in mp.functions["main"].operations if o.op_type == SHIFT][0]
    assert shift.inputs["data"].op.op_type == "const" and shift.inputs["data"].shape == (4, 1, 4, 1)


def test_nested_block():
    rng = np.random.default_rng(4)
    idx, lut = _indices(rng, (4, 3)), rng.integers(-8, 8, (1, 1, 16, 1)).astype(np.int8)

    def build(mb, x):
        def body():
            return mb.linear(x=x, weight=_lut_first(mb, idx, lut, np.float16(0.5).reshape(1, 1)))

        return mb.cond(pred=mb.greater(x=mb.reduce_sum(x=x), y=np.float16(0)), _true_fn=body,
                       _false_fn=lambda: mb.linear(x=x, weight=np.ones((4, 3), np.float16)))

    cp, mp = check_passes(build, [((2, 3), "fp16")], NAME, opset="iOS18")
    block = [o for o in mp.functions["main"].operations if o.op_type == "cond"][0].blocks[0]
    assert [o.op_type for o in block.operations if o.op_type in (LUT, SHIFT)] == [SHIFT, LUT]


# ---- where the pass must not fire ---------------------------------------------------------------

def _unchanged(build, specs, opset):
    cp, mp = check_passes(build, specs, NAME, opset=opset)
    before, _, _ = build_both(build, specs, opset)
    assert [(o.op_type, o.name) for o in mp.functions["main"].operations] == [
        (o.op_type, o.name) for o in before.functions["main"].operations]


def test_left_alone():
    rng = np.random.default_rng(5)
    idx, lut = _indices(rng, (4, 3)), rng.integers(-8, 8, (1, 1, 16, 1)).astype(np.int8)
    s2, s4 = np.float16(0.5).reshape(1, 1), np.float16(0.5).reshape(1, 1, 1, 1)

    def canonical(opset):
        first = _dequant_first if opset == "iOS18" else _lut_first
        return lambda mb, x: mb.linear(x=x, weight=first(mb, idx, lut, s4 if opset == "iOS18" else s2))

    def two_readers(mb, x):  # the dense int8 weight is read twice
        dense = mb.constexpr_lut_to_dense(indices=idx, lut=lut)
        w = mb.constexpr_blockwise_shift_scale(data=dense, scale=s2)
        return mb.linear(x=x, weight=w), mb.cast(x=dense, dtype="fp16")

    def plain_lut(mb, x):  # fp16 palette, no quantization
        return mb.linear(x=x, weight=mb.constexpr_lut_to_dense(indices=idx, lut=lut.astype(np.float16)))

    for opset in ("iOS18", "iOS26"):
        _unchanged(canonical(opset), [((2, 3), "fp16")], opset)
    _unchanged(two_readers, [((2, 3), "fp16")], "iOS18")
    _unchanged(plain_lut, [((2, 3), "fp16")], "iOS18")


# ---- deliberate differences ---------------------------------------------------------------------

def _ct_raises(build, specs, opset, exc):
    cp, _, _ = build_both(build, specs, opset)
    with pytest.raises(exc):
        ct_run(cp, NAME)


def test_ios26_keeps_the_scale_rank_differs_from_coremltools():
    # 1 -> 2 at iOS26: the scale loses the palette's two trailing dims. coremltools reshapes it to
    # those trailing dims instead, (1, 1): a rank-4 conv weight then gets a rank-2 scale (the op
    # is invalid), and a per-channel scale cannot be reshaped at all. milkit rewrites both.
    rng = np.random.default_rng(6)
    cidx, clut = _indices(rng, (4, 2, 1, 1)), rng.integers(-8, 8, (1, 1, 1, 1, 16, 1)).astype(np.int8)
    lidx, llut = _indices(rng, (8, 3)), rng.integers(-8, 8, (4, 1, 16, 1)).astype(np.int8)
    lscale = rng.uniform(0.1, 1.0, (4, 1, 1, 1)).astype(np.float16)

    def conv(mb, x):
        w = _dequant_first(mb, cidx, clut, np.full((1,) * 6, 0.5, np.float16))
        return mb.conv(x=x, weight=w)

    def per_channel(mb, x):
        return mb.linear(x=x, weight=_dequant_first(mb, lidx, llut, lscale))

    for build, specs, reader in ((conv, [((1, 2, 3, 3), "fp16")], "conv"),
                                 (per_channel, [((2, 3), "fp16")], "linear")):
        _ct_raises(build, specs, "iOS26", ValueError)
        mp = check_numbers_only(build, specs, NAME, opset="iOS26")
        assert _first_readers(mp) == {LUT: [SHIFT], SHIFT: [reader]}
    shift = [o for o in mp.functions["main"].operations if o.op_type == SHIFT][0]
    assert shift.inputs["scale"].shape == (4, 1)


def test_vector_palette_keeps_vector_axis_differs_from_coremltools():
    # palettes of 2-vectors along axis 0: coremltools drops vector_axis, which a vector palette
    # needs (it raises); milkit keeps it
    rng = np.random.default_rng(7)
    idx = _indices(rng, (4, 3), nbits=2)
    lut = rng.integers(-8, 8, (1, 1, 4, 2)).astype(np.int8)
    s2, s4 = np.float16(0.5).reshape(1, 1), np.float16(0.5).reshape(1, 1, 1, 1)
    cases = [("iOS18", lambda mb, x: mb.linear(x=x, weight=_lut_first(mb, idx, lut, s2, vector_axis=0))),
             ("iOS26", lambda mb, x: mb.linear(x=x, weight=_dequant_first(mb, idx, lut, s4, vector_axis=0)))]
    for opset, build in cases:
        _ct_raises(build, [((2, 3), "fp16")], opset, ValueError)
        mp = check_numbers_only(build, [((2, 3), "fp16")], NAME, opset=opset)
        lut_op = [o for o in mp.functions["main"].operations if o.op_type == LUT][0]
        assert lut_op.inputs["vector_axis"].val == 0
        assert _first_readers(mp) == ({SHIFT: [LUT], LUT: ["linear"]} if opset == "iOS18" else
                                      {LUT: [SHIFT], SHIFT: ["linear"]})


def test_invalid_rewrites_are_left_alone_differs_from_coremltools():
    # coremltools raises where the reordered ops would be invalid; milkit leaves the pattern:
    # - 3 palettes (2 rows each) under 2 scales (3 rows each): no palette sits in one scale block
    # - iOS26 with one scale per palette entry (the trailing dims of the scale are not 1)
    # - the dense int8 weight is also the function's output (coremltools cannot remove its op)
    rng = np.random.default_rng(8)
    idx = _indices(rng, (6, 3), nbits=2)
    lut3 = rng.integers(-8, 8, (3, 1, 4, 1)).astype(np.int8)
    lut1 = rng.integers(-8, 8, (1, 1, 4, 1)).astype(np.int8)

    def misaligned(mb, x):
        return mb.linear(x=x, weight=_lut_first(mb, idx, lut3, np.array([[0.5], [2.0]], np.float16)))

    def per_entry(mb, x):
        scale = np.linspace(0.25, 1, 4).astype(np.float16).reshape(1, 1, 4, 1)
        return mb.linear(x=x, weight=_dequant_first(mb, idx, lut1, scale))

    def dense_is_output(mb, x):
        dense = mb.constexpr_lut_to_dense(indices=idx, lut=lut1)
        w = mb.constexpr_blockwise_shift_scale(data=dense, scale=np.float16(0.5).reshape(1, 1))
        return mb.linear(x=x, weight=w), dense

    for build, opset, exc in ((misaligned, "iOS18", ValueError), (per_entry, "iOS26", AssertionError),
                              (dense_is_output, "iOS18", ValueError)):
        _ct_raises(build, [((2, 3), "fp16")], opset, exc)
        before, _, _ = build_both(build, [((2, 3), "fp16")], opset)
        mp = check_numbers_only(build, [((2, 3), "fp16")], NAME, opset=opset)
        assert op_types(mp) == op_types(before)


@pytest.mark.parametrize("opset", ["iOS18", "iOS26"])
def test_default_pipeline_parity(opset):
    """coremltools' DEFAULT pipeline (the passes milkit has) on a program where the pass fires."""
    import milkit
    from milkit.passes import pass_names

    have = set(pass_names())
    names = [n for n in milkit.PassPipeline.DEFAULT.passes if n in have]
    assert NAME[0] in names
    # (two different weights: coremltools' const_deduplication would merge two equal constexpr
    # chains, which milkit's does not do)
    cp, mp = check_passes(_two_orders((4, 3), same=False), [((4, 3), "fp16")], names, opset=opset)
    assert op_types(mp).count(LUT) == 2 and op_types(mp).count(SHIFT) == 2
