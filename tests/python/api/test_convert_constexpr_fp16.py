"""Programs whose weights come from constexpr ops through milkit.convert with
compute_precision=FLOAT16 (the default pipeline): the same Core ML program as coremltools.convert
(every op of the block and weight.bin byte for byte), and the numbers of the original program.

add_fp16_cast puts a cast between a constexpr op and the op that needs a compile-time constant
(linear's weight, conv's weight, constexpr_lut_to_dense's lut); coremltools' const-ness rule
(Var.is_descendant_of_const: a value, a constexpr output, or an op over such constants) accepts
that, and const_elimination / cast_optimization then fold the cast into the constexpr op
("constexpr_affine_dequantize_0_cast_fp16" with an fp16 scale)."""

import os
import warnings

import milkit
import numpy as np
import pytest
from support.parity import _build, _ct, _make_symbols, check, check_error, reset_ct_names
from support.pass_parity import check_passes

_, _, CTYPES, _ = _ct()

RNG = np.random.default_rng(0)
Q = RNG.integers(-100, 100, (4, 3)).astype(np.int8)
QT = Q.T.copy()
WCONV = RNG.integers(-50, 50, (4, 3, 2, 1)).astype(np.int8)
H16 = RNG.standard_normal((4, 3)).astype(np.float16)
LUTQ = RNG.integers(-8, 8, (1, 1, 4, 1)).astype(np.int8)
IDX = RNG.integers(0, 4, (4, 3)).astype(np.uint8)
MASK = RNG.random((4, 3)) < 0.5
NZ = RNG.integers(-8, 8, int(MASK.sum())).astype(np.int8)
# sub-byte arrays (coremltools' numpy dtypes; both builders take them)
LUTQ4 = LUTQ.astype(CTYPES.np_int4_dtype)
IDX1 = IDX.astype(CTYPES.np_uint1_dtype) % 2
IDX2 = IDX.astype(CTYPES.np_uint2_dtype)
MASK1 = MASK.astype(CTYPES.np_uint1_dtype)
NZIDX2 = (np.arange(int(MASK.sum())) % 4).astype(CTYPES.np_uint2_dtype)


def affine_linear(mb, x):
    w = mb.constexpr_affine_dequantize(quantized_data=Q, zero_point=np.int8(0), scale=np.float32(0.1), axis=0)
    return mb.linear(x=x, weight=w)


def affine_per_channel_bias(mb, x):
    w = mb.constexpr_affine_dequantize(quantized_data=Q, zero_point=np.array([1, 2, 3, 4], np.int8),
                                       scale=np.array([0.1, 0.2, 0.3, 0.4], np.float32), axis=0)
    return mb.linear(x=x, weight=w, bias=np.ones(4, np.float32))


def affine_transposed(mb, x):  # merge_affine_dequantize_with_consecutive_ops absorbs the transpose
    w = mb.constexpr_affine_dequantize(quantized_data=QT, zero_point=np.int8(0), scale=np.float32(0.1), axis=0)
    return mb.linear(x=x, weight=mb.transpose(x=w, perm=[1, 0]))


def affine_two_readers(mb, x):
    w = mb.constexpr_affine_dequantize(quantized_data=Q, zero_point=np.int8(0), scale=np.float32(0.1), axis=0)
    return mb.linear(x=x, weight=w), mb.reduce_max(x=w, axes=[0])


def affine_matmul(mb, x):
    w = mb.constexpr_affine_dequantize(quantized_data=Q, zero_point=np.int8(0), scale=np.float32(0.1), axis=0)
    return mb.add(x=mb.matmul(x=x, y=w, transpose_y=True), y=mb.reduce_sum(x=w, axes=[1]))


def affine_conv(mb, x):
    w = mb.constexpr_affine_dequantize(quantized_data=WCONV, zero_point=np.int8(0), scale=np.float32(0.02), axis=0)
    return mb.conv(x=mb.reshape(x=x, shape=[1, 3, 2, 1]), weight=w, bias=np.ones(4, np.float32))


def dequantize_linear(mb, x):  # dequantize_to_constexpr first
    return mb.linear(x=x, weight=mb.dequantize(input=Q, scale=np.float32(0.1), zero_point=np.int8(3)))


def cast_linear(mb, x):
    return mb.linear(x=x, weight=mb.constexpr_cast(source_val=H16, output_dtype="fp32"))


def lut_linear_ios16(mb, x):
    w = mb.constexpr_lut_to_dense(indices=np.array([0b11100100, 0b00011011, 0b10101010], np.uint8),
                                  lut=np.array([1, 2, 3, 4], np.float32), shape=np.array([4, 3], np.uint32))
    return mb.linear(x=x, weight=w)


def shift_scale_linear(mb, x):
    w = mb.constexpr_blockwise_shift_scale(data=Q, scale=np.array([[0.1], [0.2], [0.3], [0.4]], np.float32),
                                           offset=np.array([[1], [2], [3], [4]], np.int8))
    return mb.linear(x=x, weight=w)


def shift_scale_into_lut(mb, x):  # iOS18 joint compression: a quantized lut
    lut = mb.constexpr_blockwise_shift_scale(data=LUTQ4, scale=np.full((1, 1, 1, 1), 0.1, np.float32))
    w = mb.constexpr_lut_to_dense(indices=IDX2, lut=lut)
    return mb.linear(x=x, weight=w)


def sparse_shift_scale(mb, x):
    m, v = mb.constexpr_sparse_blockwise_shift_scale(data_mask=MASK1, nonzero_data=NZ,
                                                     scale=np.full((1, 1), 0.5, np.float32))
    return mb.linear(x=x, weight=mb.constexpr_sparse_to_dense(nonzero_data=v, mask=m))


def lut_to_sparse(mb, x):
    m, v = mb.constexpr_lut_to_sparse(indices_mask=MASK1, indices_nonzero_data=NZIDX2,
                                      lut=np.array([1.0, 2, 3, 4], np.float32).reshape(1, 1, 4, 1))
    return mb.linear(x=x, weight=mb.constexpr_sparse_to_dense(nonzero_data=v, mask=m))


CASES = [
    (affine_linear, ("iOS16", "iOS17", "iOS18")),
    (affine_per_channel_bias, ("iOS16", "iOS18")),
    (affine_transposed, ("iOS16", "iOS17")),
    (affine_two_readers, ("iOS16",)),
    (affine_matmul, ("iOS16", "iOS18")),
    (affine_conv, ("iOS16", "iOS17")),
    (dequantize_linear, ("iOS17", "iOS18")),
    (cast_linear, ("iOS16", "iOS18")),
    (lut_linear_ios16, ("iOS16",)),
    (shift_scale_linear, ("iOS18",)),
    (shift_scale_into_lut, ("iOS18",)),
    (sparse_shift_scale, ("iOS18",)),
    (lut_to_sparse, ("iOS18",)),
]
PARAMS = [pytest.param(build, opset, id=f"{build.__name__}-{opset}") for build, opsets in CASES for opset in opsets]
SPECS = [((2, 3), "fp32")]


def _block(model):
    fn = model.get_spec().mlProgram.functions["main"]
    return fn.block_specializations[fn.opset]


def _weights(model):
    p = os.path.join(model.weights_dir, "weight.bin")
    return open(p, "rb").read() if os.path.exists(p) else b""


def _convert_both(build, opset, precision="FLOAT16"):
    ct = _ct()[0]
    symtab = _make_symbols(SPECS)
    reset_ct_names()
    cp = _build("ct", build, SPECS, opset, symtab)
    mp = _build("mk", build, SPECS, opset, symtab)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = ct.convert(cp, convert_to="mlprogram", compute_precision=getattr(ct.precision, precision),
                        minimum_deployment_target=getattr(ct.target, opset), skip_model_load=True)
        mm = milkit.convert(mp, compute_precision=getattr(milkit.precision, precision),
                            minimum_deployment_target=getattr(milkit.target, opset))
    return cm, mm


@pytest.mark.parametrize("build, opset", PARAMS)
def test_fp16_convert_matches_coremltools(build, opset):
    cm, mm = _convert_both(build, opset)
    cb, mb_ = _block(cm), _block(mm)
    ctypes_ = [o.type for o in cb.operations]
    assert [o.type for o in mb_.operations] == ctypes_
    for co, mo in zip(cb.operations, mb_.operations):
        assert mo == co, f"{co.type} differs:\n--- coremltools\n{co}\n--- milkit\n{mo}"
    assert _weights(mm) == _weights(cm)
    # no cast of a constexpr output is left: the fp16 cast went into the constexpr op (except after
    # constexpr_cast, whose output is fp32 only: there the weight is cast and linear becomes matmul)
    names = {o.outputs[0].name: o.type for o in mb_.operations}
    for o in mb_.operations:
        if o.type == "cast":
            src = names.get(o.inputs["x"].arguments[0].name, "")
            assert not src.startswith("constexpr_") or src == "constexpr_cast", f"{o.outputs[0].name} casts a {src}"
    # the numbers: the original program (fp32, milkit's interpreter) against the converted package
    before = _build("mk", build, SPECS, opset, _make_symbols(SPECS))
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    ref, got = milkit.run(before, {"x": x}), mm.predict({"x": x})
    assert list(ref) == list(got)
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=2e-2, atol=2e-2 * float(np.max(np.abs(ref[k]))))


@pytest.mark.parametrize("build, opset", [(dequantize_linear, "iOS17"), (dequantize_linear, "iOS18"),
                                          (affine_transposed, "iOS16")])
def test_fp32_convert_matches_coremltools(build, opset):
    cm, mm = _convert_both(build, opset, "FLOAT32")
    assert list(_block(mm).operations) == list(_block(cm).operations)
    assert _weights(mm) == _weights(cm)
    assert not {"dequantize", "transpose"} & {o.type for o in _block(mm).operations}


@pytest.mark.parametrize("build, opset", [(affine_linear, "iOS16"), (affine_two_readers, "iOS16"),
                                          (affine_conv, "iOS17"), (shift_scale_into_lut, "iOS18"),
                                          (sparse_shift_scale, "iOS18"), (lut_to_sparse, "iOS18")])
def test_fp16_passes_one_by_one(build, opset):
    # after add_fp16_cast alone, casts stand between the constexpr ops and their readers (the
    # interpreter computes them once when it plans); cast_optimization then joins the cast pairs
    names = ["common::add_fp16_cast", "common::const_elimination", "common::cast_optimization",
             "common::dead_code_elimination"]
    for n in range(1, len(names) + 1):
        cp, mp = check_passes(build, SPECS, names[:n], opset=opset)
    assert not [o for o in mp.functions["main"].operations if o.op_type == "cast" and
                o.inputs["x"].op is not None and o.inputs["x"].op.op_type.startswith("constexpr_")]


# ---- the const-ness rule (coremltools' Var.is_descendant_of_const) ---------------------------


def test_an_op_over_constexpr_outputs_is_a_constant():
    def cast_weight(mb, x):
        w = mb.constexpr_affine_dequantize(quantized_data=Q, zero_point=np.int8(0), scale=np.float32(0.1), axis=0)
        return mb.linear(x=mb.cast(x=x, dtype="fp16"), weight=mb.cast(x=w, dtype="fp16"))

    def added_weights(mb, x):  # an op over a constexpr output and a const
        w = mb.constexpr_affine_dequantize(quantized_data=Q, zero_point=np.int8(0), scale=np.float32(0.1), axis=0)
        return mb.linear(x=x, weight=mb.add(x=w, y=np.float32(1)))

    def dilated_conv(mb, x):  # conv takes dilations only with a constant weight
        w = mb.constexpr_affine_dequantize(quantized_data=WCONV, zero_point=np.int8(0), scale=np.float32(0.1), axis=0)
        return mb.conv(x=mb.reshape(x=x, shape=[1, 3, 2, 1]), weight=mb.cast(x=w, dtype="fp32"), dilations=[2, 1],
                       pad_type="same")

    def lut_from_cast(mb, x):
        lut = mb.constexpr_blockwise_shift_scale(data=LUTQ, scale=np.full((1, 1, 1, 1), 0.1, np.float32))
        w = mb.constexpr_lut_to_dense(indices=IDX2, lut=mb.cast(x=lut, dtype="fp16"))
        return mb.linear(x=mb.cast(x=x, dtype="fp16"), weight=w)

    check(cast_weight, SPECS, opsets=("iOS16", "iOS18"))
    check(added_weights, SPECS, opsets=("iOS16",))
    check(dilated_conv, SPECS, opsets=("iOS16",))
    check(lut_from_cast, SPECS, opsets=("iOS18",))


def test_an_op_over_a_runtime_value_is_not():
    def runtime_weight(mb, x):
        w = mb.constexpr_affine_dequantize(quantized_data=Q[:, :2], zero_point=np.int8(0), scale=np.float32(0.1),
                                           axis=0)
        return mb.linear(x=mb.slice_by_size(x=x, begin=[0, 0], size=[2, 2]), weight=mb.add(x=w, y=mb.reduce_sum(x=x)))

    check_error(runtime_weight, SPECS, "iOS16", match="weight.*compile-time constant")

    def lut_from_input(mb, x):
        lut = mb.reshape(x=mb.slice_by_size(x=x, begin=[0, 0], size=[1, 2]), shape=[1, 1, 2, 1])
        return mb.constexpr_lut_to_dense(indices=IDX1, lut=lut)

    check_error(lut_from_input, SPECS, "iOS18", match="lut.*compile-time constant")


def test_the_file_still_needs_a_const_or_constexpr_output():
    # the builder accepts linear(weight=cast(constexpr)); the file cannot say it, so a conversion
    # without the passes that fold the cast fails, in coremltools as in milkit
    def build(mb, x):
        w = mb.constexpr_affine_dequantize(quantized_data=Q, zero_point=np.int8(0), scale=np.float32(0.1), axis=0)
        return mb.linear(x=mb.cast(x=x, dtype="fp16"), weight=mb.cast(x=w, dtype="fp16"))

    ct = _ct()[0]
    symtab = _make_symbols(SPECS)
    reset_ct_names()
    cp = _build("ct", build, SPECS, "iOS16", symtab)
    mp = _build("mk", build, SPECS, "iOS16", symtab)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="const"):
            ct.convert(cp, convert_to="mlprogram", pass_pipeline=ct.PassPipeline.EMPTY,
                       minimum_deployment_target=ct.target.iOS16, skip_model_load=True)
        with pytest.raises(ValueError, match="weight.*must be const or constexpr"):
            milkit.convert(mp, pass_pipeline=milkit.PassPipeline.EMPTY, minimum_deployment_target=milkit.target.iOS16)
