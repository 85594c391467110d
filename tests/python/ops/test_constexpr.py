"""constexpr (compression) ops: type inference and validation parity with coremltools 9.0, and
their serialization (attributes for the iOS16 classes, inline input values for the iOS18 ones)
through milkit.save / milkit.convert / milkit.load against coremltools."""

import warnings

import milkit
import numpy as np
import pytest
from coremltools.converters.mil.mil import types as ctypes
from support.parity import _build, _ct, _make_symbols, check, check_error, reset_ct_names

X43 = [((4, 3), "fp32")]
X46 = [((4, 6), "fp16")]

QDATA = np.arange(12, dtype=np.uint8).reshape(4, 3)
SCALE4 = np.array([0.5, 1.0, 2.0, 4.0], dtype=np.float32)
LUT4 = np.array([-1.0, 0.0, 0.5, 2.0], dtype=np.float16)
LUT_IDX = np.array([0b11100100, 0b00011011], dtype=np.uint8)  # 8 2-bit indices
MASK = np.array([0b10100101, 0b00000001], dtype=np.uint8)  # 5 set bits of 10
NZ5 = np.arange(1, 6, dtype=np.float32)


def _u(dtype_name, values, shape=None):
    a = np.array(values, dtype=getattr(ctypes, f"np_{dtype_name}_dtype"))
    return a if shape is None else a.reshape(shape)


INT4_DATA = _u("int4", [(i % 16) - 8 for i in range(24)], (4, 6))
INT4_OFF = _u("int4", [1, -2, 3, 0, 0, -1], (2, 3))
SCALE23 = np.array([[0.5, 1, 2], [0.25, 4, 8]], dtype=np.float16)
UINT2_IDX = _u("uint2", [i % 4 for i in range(24)], (4, 6))
MASK46 = _u("uint1", [1 if i % 3 == 0 else 0 for i in range(24)], (4, 6))  # 8 ones


# ---- iOS16 ops: parity ------------------------------------------------------------------------

def test_affine_dequantize_parity():
    def build(mb, x):
        d = mb.constexpr_affine_dequantize(quantized_data=QDATA, zero_point=np.uint8(3), scale=SCALE4, axis=0)
        return mb.add(x=x, y=d)

    for res in check(build, X43, opsets=("iOS16", "iOS17", "iOS18")):
        d = res.mk_prog.functions["main"].find_ops(op_type="constexpr_affine_dequantize")[0].outputs[0]
        assert d.dtype is milkit.types.fp32 and d.shape == (4, 3) and d.val is None  # never folded


def test_affine_dequantize_variants_parity():
    # vector zero point along axis -1, int8 data, fp16 scale
    data = np.arange(-6, 6, dtype=np.int8).reshape(4, 3)
    check(lambda mb, x: mb.relu(x=mb.constexpr_affine_dequantize(
        quantized_data=data, zero_point=np.array([0, 1, -1], dtype=np.int8),
        scale=np.array([0.5, 0.25, 2.0], dtype=np.float16), axis=-1)), X43, opsets=("iOS16",))
    # fp32 zero point
    check(lambda mb, x: mb.relu(x=mb.constexpr_affine_dequantize(
        quantized_data=QDATA, zero_point=np.float32(1.5), scale=np.float32(0.1), axis=1)), X43, opsets=("iOS17",))


def test_affine_dequantize_errors():
    def deq(**kw):
        args = dict(quantized_data=QDATA, zero_point=np.uint8(0), scale=SCALE4, axis=0)
        args.update(kw)
        return lambda mb, x: mb.constexpr_affine_dequantize(**args)

    check_error(deq(axis=2), X43, opset="iOS16", match="axis needs to be in the range")
    check_error(deq(axis=-3), X43, opset="iOS16", match="axis needs to be in the range")
    check_error(deq(scale=np.ones((4, 1), np.float32)), X43, opset="iOS16", match="scale needs to be either")
    check_error(deq(zero_point=np.zeros(3, np.uint8)), X43, opset="iOS16", match="zero_point, if vector")
    check_error(deq(scale=np.ones(3, np.float32)), X43, opset="iOS16", match="scale, if vector")
    check_error(deq(quantized_data=QDATA.astype(np.int32)), X43, opset="iOS16")
    check_error(deq(scale=np.ones(4, np.int32)), X43, opset="iOS16")
    # not before iOS16
    check_error(deq(), X43, opset="iOS15")
    # const-only inputs
    check_error(lambda mb, x: mb.constexpr_affine_dequantize(quantized_data=QDATA, zero_point=np.uint8(0),
                                                             scale=mb.reduce_max(x=x, axes=[1]), axis=0),
                X43, opset="iOS16")


def test_cast_parity():
    src = np.arange(6, dtype=np.float16).reshape(2, 3)
    for res in check(lambda mb, x: mb.add(x=x, y=mb.constexpr_cast(source_val=src, output_dtype="fp32")),
                     [((2, 3), "fp32")], opsets=("iOS16", "iOS17", "iOS18")):
        c = res.mk_prog.functions["main"].find_ops(op_type="constexpr_cast")[0].outputs[0]
        assert c.dtype is milkit.types.fp32 and c.shape == (2, 3)
    check_error(lambda mb, x: mb.constexpr_cast(source_val=src, output_dtype="fp16"), [((2, 3), "fp32")],
                opset="iOS16", match="Only output_dtype = fp32")
    check_error(lambda mb, x: mb.constexpr_cast(source_val=src.astype(np.float32), output_dtype="fp32"),
                [((2, 3), "fp32")], opset="iOS18")


def test_lut_to_dense_ios16_parity():
    def build(mb, x):
        w = mb.constexpr_lut_to_dense(indices=LUT_IDX, lut=LUT4, shape=np.array([2, 4], dtype=np.uint32))
        return mb.add(x=x, y=w)

    for res in check(build, [((2, 4), "fp16")], opsets=("iOS16", "iOS17")):
        w = res.mk_prog.functions["main"].find_ops(op_type="constexpr_lut_to_dense")[0].outputs[0]
        assert w.dtype is milkit.types.fp16 and w.shape == (2, 4)
    # a 1-bit lut over an int8 table
    check(lambda mb, x: mb.constexpr_lut_to_dense(indices=np.array([0xFF, 0x01], np.uint8),
                                                  lut=np.array([1, -1], np.int8), shape=np.array([9], np.uint32)),
          X43, opsets=("iOS16",))


def test_lut_to_dense_ios16_errors():
    shape = np.array([2, 4], dtype=np.uint32)
    spec = [((2, 4), "fp16")]
    check_error(lambda mb, x: mb.constexpr_lut_to_dense(indices=LUT_IDX, lut=np.ones(3, np.float16), shape=shape),
                spec, opset="iOS16", match="lut should be a vector of size")
    check_error(lambda mb, x: mb.constexpr_lut_to_dense(indices=LUT_IDX.reshape(2, 1), lut=LUT4, shape=shape),
                spec, opset="iOS16", match="indices needs to have rank == 1")
    check_error(lambda mb, x: mb.constexpr_lut_to_dense(indices=LUT_IDX, lut=LUT4.reshape(2, 2), shape=shape),
                spec, opset="iOS16", match="lut needs to have rank == 1")
    check_error(lambda mb, x: mb.constexpr_lut_to_dense(indices=LUT_IDX, lut=LUT4,
                                                        shape=np.array([3, 4], np.uint32)),
                spec, opset="iOS16", match="M = ceil")
    check_error(lambda mb, x: mb.constexpr_lut_to_dense(indices=LUT_IDX, lut=LUT4, shape=np.array([2, 4], np.int32)),
                spec, opset="iOS16")


def test_sparse_to_dense_ios16_parity():
    def build(mb, x):
        return mb.add(x=x, y=mb.constexpr_sparse_to_dense(nonzero_data=NZ5, mask=MASK,
                                                           shape=np.array([2, 5], np.uint32)))

    for res in check(build, [((2, 5), "fp32")], opsets=("iOS16", "iOS17")):
        w = res.mk_prog.functions["main"].find_ops(op_type="constexpr_sparse_to_dense")[0].outputs[0]
        assert w.dtype is milkit.types.fp32 and w.shape == (2, 5)


def test_sparse_to_dense_ios16_errors():
    spec = [((2, 5), "fp32")]
    shape = np.array([2, 5], np.uint32)
    check_error(lambda mb, x: mb.constexpr_sparse_to_dense(nonzero_data=NZ5[:4], mask=MASK, shape=shape),
                spec, opset="iOS16", match="Number of set bits")
    check_error(lambda mb, x: mb.constexpr_sparse_to_dense(nonzero_data=NZ5, mask=MASK,
                                                           shape=np.array([2, 9], np.uint32)),
                spec, opset="iOS16", match="M = ceil")
    check_error(lambda mb, x: mb.constexpr_sparse_to_dense(nonzero_data=np.ones(6, np.float32),
                                                           mask=np.array([0b10100101, 0b00000101], np.uint8),
                                                           shape=shape),
                spec, opset="iOS16", match="Padded bits")
    check_error(lambda mb, x: mb.constexpr_sparse_to_dense(nonzero_data=NZ5.reshape(5, 1), mask=MASK, shape=shape),
                spec, opset="iOS16", match="nonzero_data needs to have rank == 1")


# ---- iOS18 ops: parity ------------------------------------------------------------------------

def test_blockwise_shift_scale_parity():
    def build(mb, x):
        w = mb.constexpr_blockwise_shift_scale(data=INT4_DATA, scale=SCALE23, offset=INT4_OFF)
        return mb.add(x=x, y=w)

    [res] = check(build, X46, opsets=("iOS18",))
    w = res.mk_prog.functions["main"].find_ops(op_type="constexpr_blockwise_shift_scale")[0].outputs[0]
    assert w.dtype is milkit.types.fp16 and w.shape == (4, 6)
    # uint8 data, fp32 scale, no offset; float offset with int data
    check(lambda mb, x: mb.constexpr_blockwise_shift_scale(data=np.arange(24, dtype=np.uint8).reshape(4, 6),
                                                           scale=np.ones((4, 1), np.float32)), X46, opsets=("iOS18",))
    check(lambda mb, x: mb.constexpr_blockwise_shift_scale(data=np.arange(24, dtype=np.int8).reshape(4, 6),
                                                           scale=SCALE23, offset=np.ones((2, 3), np.float16)),
          X46, opsets=("iOS18",))


def test_blockwise_shift_scale_errors():
    def bss(**kw):
        args = dict(data=INT4_DATA, scale=SCALE23)
        args.update(kw)
        return lambda mb, x: mb.constexpr_blockwise_shift_scale(**args)

    check_error(bss(scale=np.ones(2, np.float16)), X46, opset="iOS18", match="same rank")
    check_error(bss(scale=np.ones((3, 3), np.float16)), X46, opset="iOS18", match="factor of")
    check_error(bss(offset=_u("int4", [1, 2, 3], (3, 1))), X46, opset="iOS18", match="shape of 'offset'")
    check_error(bss(offset=np.ones((2, 3), np.int8)), X46, opset="iOS18", match="dtype of 'offset'")
    check_error(bss(data=np.float32(2.0), scale=np.float32(1.0)), X46, opset="iOS18", match="at least rank 1")
    check_error(bss(), X46, opset="iOS17")


def test_lut_to_dense_ios18_parity():
    lut = np.array([-1, 0, 1, 2], np.float16).reshape(1, 1, 4, 1)
    check(lambda mb, x: mb.add(x=x, y=mb.constexpr_lut_to_dense(indices=UINT2_IDX, lut=lut)), X46, opsets=("iOS18",))
    # per-block palettes of vectors along axis 0: output (8, 6)
    lut_v = np.arange(2 * 3 * 4 * 2, dtype=np.float32).reshape(2, 3, 4, 2)
    [res] = check(lambda mb, x: mb.constexpr_lut_to_dense(indices=UINT2_IDX, lut=lut_v, vector_axis=0),
                  X46, opsets=("iOS18",))
    out = res.mk_prog.functions["main"].find_ops(op_type="constexpr_lut_to_dense")[0].outputs[0]
    assert out.shape == (8, 6) and out.dtype is milkit.types.fp32
    check(lambda mb, x: mb.constexpr_lut_to_dense(indices=UINT2_IDX, lut=lut_v, vector_axis=-1),
          X46, opsets=("iOS18",))


def test_lut_to_dense_ios18_errors():
    lut = np.zeros((1, 1, 4, 1), np.float16)

    def l2d(**kw):
        args = dict(indices=UINT2_IDX, lut=lut)
        args.update(kw)
        return lambda mb, x: mb.constexpr_lut_to_dense(**args)

    check_error(l2d(lut=np.zeros((1, 4, 1), np.float16)), X46, opset="iOS18", match="2 more dim")
    check_error(l2d(lut=np.zeros((3, 1, 4, 1), np.float16)), X46, opset="iOS18", match="divisible")
    check_error(l2d(lut=np.zeros((1, 1, 3, 1), np.float16)), X46, opset="iOS18", match="2\\^nbits")
    check_error(l2d(lut=np.zeros((1, 1, 16, 1), np.float16)), X46, opset="iOS18", match="should be uint4")
    check_error(l2d(lut=np.zeros((1, 1, 4, 2), np.float16)), X46, opset="iOS18", match="vector_axis' need")
    check_error(l2d(lut=np.zeros((1, 1, 4, 2), np.float16), vector_axis=2), X46, opset="iOS18",
                match="valid range")
    check_error(l2d(indices=_u("uint2", [1])[0]), X46, opset="iOS18")
    # the iOS16 signature is gone at iOS18
    check_error(lambda mb, x: mb.constexpr_lut_to_dense(indices=LUT_IDX, lut=LUT4, shape=np.array([2, 4], np.uint32)),
                X46, opset="iOS18")


def test_sparse_to_dense_ios18_parity():
    nz = np.arange(8, dtype=np.float16)
    [res] = check(lambda mb, x: mb.add(x=x, y=mb.constexpr_sparse_to_dense(nonzero_data=nz, mask=MASK46)),
                  X46, opsets=("iOS18",))
    out = res.mk_prog.functions["main"].find_ops(op_type="constexpr_sparse_to_dense")[0].outputs[0]
    assert out.shape == (4, 6) and out.dtype is milkit.types.fp16
    check(lambda mb, x: mb.constexpr_sparse_to_dense(nonzero_data=_u("int4", list(range(8))), mask=MASK46),
          X46, opsets=("iOS18",))
    check_error(lambda mb, x: mb.constexpr_sparse_to_dense(nonzero_data=nz[:7], mask=MASK46), X46, opset="iOS18",
                match="Number of 1s in mask")
    check_error(lambda mb, x: mb.constexpr_sparse_to_dense(nonzero_data=nz.reshape(2, 4), mask=MASK46), X46,
                opset="iOS18", match="rank 1")
    check_error(lambda mb, x: mb.constexpr_sparse_to_dense(nonzero_data=nz, mask=MASK46.astype(np.uint8)), X46,
                opset="iOS18")


def _lut_to_sparse(mb, x, vector_axis=None):
    lut = np.arange(4, dtype=np.float16).reshape(1, 1, 4, 1)
    kw = {}
    if vector_axis is not None:
        lut = np.arange(8, dtype=np.float16).reshape(1, 1, 4, 2)
        kw["vector_axis"] = vector_axis
    mask, nz = mb.constexpr_lut_to_sparse(indices_mask=MASK46, indices_nonzero_data=_u("uint2", [0, 1, 2, 3] * 2),
                                          lut=lut, **kw)
    return mb.constexpr_sparse_to_dense(nonzero_data=nz, mask=mask)


def test_lut_to_sparse_parity():
    [res] = check(lambda mb, x: mb.add(x=x, y=_lut_to_sparse(mb, x)), X46, opsets=("iOS18",))
    op = res.mk_prog.functions["main"].find_ops(op_type="constexpr_lut_to_sparse")[0]
    assert [(o.dtype, o.shape) for o in op.outputs] == [(milkit.types.uint1, (4, 6)), (milkit.types.fp16, (8,))]
    [res] = check(lambda mb, x: _lut_to_sparse(mb, x, vector_axis=1), X46, opsets=("iOS18",))
    op = res.mk_prog.functions["main"].find_ops(op_type="constexpr_lut_to_sparse")[0]
    assert [o.shape for o in op.outputs] == [(4, 12), (16,)]
    check_error(lambda mb, x: mb.constexpr_lut_to_sparse(indices_mask=MASK46, indices_nonzero_data=_u("uint2", [0] * 7),
                                                         lut=np.zeros((1, 1, 4, 1), np.float16)),
                X46, opset="iOS18", match="Number of 1s")
    check_error(lambda mb, x: mb.constexpr_lut_to_sparse(indices_mask=MASK46, indices_nonzero_data=_u("uint2", [0] * 8),
                                                         lut=np.zeros((1, 1, 2, 1), np.float16)),
                X46, opset="iOS18", match="should be uint1")


def test_sparse_blockwise_shift_scale_parity():
    def build(mb, x):
        mask, nz = mb.constexpr_sparse_blockwise_shift_scale(
            data_mask=MASK46, nonzero_data=np.arange(8, dtype=np.int8), scale=SCALE23,
            offset=np.ones((2, 3), np.int8))
        return mb.add(x=x, y=mb.constexpr_sparse_to_dense(nonzero_data=nz, mask=mask))

    [res] = check(build, X46, opsets=("iOS18",))
    op = res.mk_prog.functions["main"].find_ops(op_type="constexpr_sparse_blockwise_shift_scale")[0]
    assert [(o.dtype, o.shape) for o in op.outputs] == [(milkit.types.uint1, (4, 6)), (milkit.types.fp16, (8,))]
    check_error(lambda mb, x: mb.constexpr_sparse_blockwise_shift_scale(
        data_mask=MASK46, nonzero_data=np.arange(8, dtype=np.int8), scale=np.ones((3, 3), np.float16)),
        X46, opset="iOS18", match="factor of")
    check_error(lambda mb, x: mb.constexpr_sparse_blockwise_shift_scale(
        data_mask=MASK46, nonzero_data=np.arange(9, dtype=np.int8), scale=SCALE23),
        X46, opset="iOS18", match="Number of 1s")


def test_constexpr_outputs_are_not_folded_by_the_default_pipeline():
    # const elimination and friends must keep the compressed form
    _, mp = _programs(lambda mb, x: mb.add(x=x, y=mb.constexpr_cast(
        source_val=np.ones((2, 3), np.float16), output_dtype="fp32")), [((2, 3), "fp32")], "iOS16")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec = milkit.convert(mp, minimum_deployment_target=milkit.target.iOS16, skip_model_load=True,
                              compute_precision=milkit.precision.FLOAT32).get_spec()
    assert [r[0] for r in _rows(spec)] == ["constexpr_cast", "add"]


# ---- serialization ----------------------------------------------------------------------------

def _programs(build, specs, opset):
    symtab = _make_symbols(specs)
    reset_ct_names()
    return _build("ct", build, specs, opset, symtab), _build("mk", build, specs, opset, symtab)


def _ios16_model(mb, x):
    big = np.arange(-20, 20, dtype=np.int8).reshape(4, 10)
    a = mb.constexpr_affine_dequantize(quantized_data=big, zero_point=np.int8(1),
                                       scale=np.linspace(0.1, 1, 4).astype(np.float32), axis=0, name="deq")
    b = mb.constexpr_cast(source_val=np.arange(40, dtype=np.float16).reshape(4, 10), output_dtype="fp32", name="cast16")
    c = mb.constexpr_lut_to_dense(indices=np.arange(10, dtype=np.uint8), lut=np.linspace(-1, 1, 4).astype(np.float32),
                                  shape=np.array([4, 10], np.uint32), name="lut")
    d = mb.constexpr_sparse_to_dense(nonzero_data=np.arange(1, 21, dtype=np.float32),
                                     mask=np.array([0xFF, 0x0F, 0, 0, 0xFF] + [0] * 5, np.uint8),
                                     shape=np.array([4, 20], np.uint32), name="sparse")
    e = mb.add(x=mb.add(x=x, y=a), y=mb.mul(x=b, y=c))
    # the scale const is shared with a regular op: it is emitted and its blob stored once
    return mb.add(x=e, y=mb.slice_by_size(x=d, begin=[0, 0], size=[4, 10]))


def _ios18_model(mb, x):
    w = mb.constexpr_blockwise_shift_scale(data=_u("int4", [(i % 16) - 8 for i in range(40)], (4, 10)),
                                           scale=np.full((2, 5), 0.5, np.float16), offset=_u("int4", [1] * 10, (2, 5)),
                                           name="bss")
    mask = _u("uint1", [1 if i % 2 else 0 for i in range(40)], (4, 10))
    m, nz = mb.constexpr_lut_to_sparse(indices_mask=mask, indices_nonzero_data=_u("uint4", [i % 16 for i in range(20)]),
                                       lut=np.arange(16, dtype=np.float16).reshape(1, 1, 16, 1), name="l2s")
    s = mb.constexpr_sparse_to_dense(nonzero_data=nz, mask=m, name="s2d")
    l2d = mb.constexpr_lut_to_dense(indices=_u("uint2", [i % 4 for i in range(40)], (4, 10)),
                                    lut=np.arange(16, dtype=np.float16).reshape(2, 2, 4, 1), name="l2d")
    sm, snz = mb.constexpr_sparse_blockwise_shift_scale(data_mask=mask, nonzero_data=np.arange(20, dtype=np.int8),
                                                        scale=np.full((1, 1), 2.0, np.float16), name="sbss")
    s2 = mb.constexpr_sparse_to_dense(nonzero_data=snz, mask=sm, name="s2d_2")
    c = mb.constexpr_cast(source_val=np.ones((4, 10), np.float16), output_dtype="fp32", name="c18")
    y = mb.add(x=mb.add(x=mb.add(x=x, y=w), y=mb.add(x=s, y=l2d)), y=s2)
    return mb.add(x=mb.cast(x=y, dtype="fp32"), y=c)


MODELS = [
    ("iOS16", _ios16_model, [((4, 10), "fp32")]),
    ("iOS17", _ios16_model, [((4, 10), "fp32")]),
    ("iOS18", _ios18_model, [((4, 10), "fp16")]),
]


def _rows(spec):
    fn = spec.mlProgram.functions["main"]
    blk = fn.block_specializations[fn.opset]
    rows = []
    for op in blk.operations:
        inputs = {k: [a.SerializeToString() for a in v.arguments] for k, v in op.inputs.items()}
        attrs = {k: v.SerializeToString() for k, v in op.attributes.items()}
        rows.append((op.type, inputs, attrs, [(o.name, o.type.SerializeToString()) for o in op.outputs]))
    return rows


def _target(mod, opset):
    return getattr(mod.target, opset)


def _ct_convert(prog, opset):
    ct, _, _, _ = _ct()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=_target(ct, opset),
                          skip_model_load=True, compute_precision=ct.precision.FLOAT32,
                          pass_pipeline=ct.PassPipeline.EMPTY)


def _mk_convert(prog, opset):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return milkit.convert(prog, minimum_deployment_target=_target(milkit, opset), skip_model_load=True,
                              compute_precision=milkit.precision.FLOAT32, pass_pipeline=milkit.PassPipeline.EMPTY)


def _weights(pkg):
    return (pkg / "Data" / "com.apple.CoreML" / "weights" / "weight.bin").read_bytes()


@pytest.mark.parametrize("opset,build,specs", MODELS, ids=[m[0] for m in MODELS])
def test_convert_matches_coremltools(tmp_path, opset, build, specs):
    cp, mp = _programs(build, specs, opset)
    cm, mm = _ct_convert(cp, opset), _mk_convert(mp, opset)
    cs, ms = cm.get_spec(), mm.get_spec()
    assert ms.specificationVersion == cs.specificationVersion
    assert _rows(ms) == _rows(cs)
    cm.save(str(tmp_path / "ct.mlpackage"))
    mm.save(str(tmp_path / "mk.mlpackage"))
    assert _weights(tmp_path / "mk.mlpackage") == _weights(tmp_path / "ct.mlpackage")
    rows = _rows(ms)
    types = [r[0] for r in rows]
    constexprs = [r for r in rows if r[0].startswith("constexpr_")]
    if opset == "iOS18":
        # parameters are inline input values; sparse_to_dense reads l2s by name
        assert all(not r[2].keys() - {"name"} for r in constexprs)
        s2d = next(r for r in constexprs if r[0] == "constexpr_sparse_to_dense")
        assert set(s2d[1]) == {"nonzero_data", "mask"}
        assert types.count("const") == 1  # only the cast's dtype
    else:
        # parameters are attributes, no inputs; only the shared scale const is emitted
        assert all(not r[1] for r in constexprs)
        assert set(constexprs[0][2]) == {"name", "quantized_data", "zero_point", "scale", "axis"}
        assert types.count("const") == 2  # the slice's begin / size


@pytest.mark.parametrize("opset,build,specs", MODELS, ids=[m[0] for m in MODELS])
def test_saved_package_loads_in_coremltools_and_back(tmp_path, opset, build, specs):
    ct, _, _, _ = _ct()
    from coremltools.converters.mil.frontend.milproto.load import load as milproto_to_pymil

    _, mp = _programs(build, specs, opset)
    path = tmp_path / "m.mlpackage"
    milkit.save(mp, path, minimum_deployment_target=_target(milkit, opset))
    m = ct.models.MLModel(str(path), skip_model_load=True)
    spec = m.get_spec()
    prog = milproto_to_pymil(spec, spec.specificationVersion, m.weights_dir)
    ct_ops = [o.op_type for o in prog.functions["main"].operations if o.op_type != "const"]
    mk_ops = [o.op_type for o in mp.functions["main"].operations if o.op_type != "const"]
    assert ct_ops == mk_ops
    back = milkit.load(path)
    back.validate()
    got = [(o.op_type, o.name, [(v.dtype, v.shape) for v in o.outputs]) for o in back.functions["main"].operations
           if o.op_type != "const"]
    want = [(o.op_type, o.name, [(v.dtype, v.shape) for v in o.outputs]) for o in mp.functions["main"].operations
            if o.op_type != "const"]
    assert got == want
    # and saving it again writes the same ops and weights
    milkit.save(back, tmp_path / "again.mlpackage", minimum_deployment_target=_target(milkit, opset))
    again = ct.models.MLModel(str(tmp_path / "again.mlpackage"), skip_model_load=True).get_spec()
    assert _rows(again) == _rows(spec)
    assert _weights(tmp_path / "again.mlpackage") == _weights(path)


@pytest.mark.parametrize("opset,build,specs", MODELS, ids=[m[0] for m in MODELS])
def test_coremltools_package_round_trips(tmp_path, opset, build, specs):
    ct, _, _, _ = _ct()
    cp, _ = _programs(build, specs, opset)
    cm = _ct_convert(cp, opset)
    cm.save(str(tmp_path / "ct.mlpackage"))
    prog = milkit.load(tmp_path / "ct.mlpackage")
    milkit.save(prog, tmp_path / "mk.mlpackage", minimum_deployment_target=_target(milkit, opset))
    ms = ct.models.MLModel(str(tmp_path / "mk.mlpackage"), skip_model_load=True).get_spec()
    assert _rows(ms) == _rows(cm.get_spec())
    assert _weights(tmp_path / "mk.mlpackage") == _weights(tmp_path / "ct.mlpackage")


def test_ios16_constexpr_fed_by_constexpr_cannot_be_an_attribute():
    # an iOS16-class parameter must be a value; coremltools fails too (it has no value to write)
    def build(mb, x):
        lut = mb.constexpr_cast(source_val=np.ones(4, np.float16), output_dtype="fp32")
        return mb.add(x=x, y=mb.constexpr_lut_to_dense(indices=LUT_IDX, lut=lut, shape=np.array([2, 4], np.uint32)))

    cp, mp = _programs(build, [((2, 4), "fp32")], "iOS17")
    with pytest.raises(Exception):  # noqa: B017 - coremltools fails with whatever numpy raises on None
        _ct_convert(cp, "iOS17")
    with pytest.raises(ValueError, match="parameter 'lut' must be a const value"):
        _mk_convert(mp, "iOS17")
