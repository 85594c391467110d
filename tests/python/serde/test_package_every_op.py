"""Every op of the foundation library in a package: written by milkit, read back by coremltools'
loader (which re-runs validation and type inference on every op) and by milkit, at each target."""

import warnings

import milkit as ct
import numpy as np
import pytest
from milkit import Builder as mb
from milkit import get_new_symbol, types

F = np.float32


RNG = np.random.default_rng(0)
W_LIN = RNG.random((6, 8), dtype=F)
W_MM = RNG.random((8, 5), dtype=F)
W_CONV = RNG.random((6, 4, 3, 3), dtype=F)
W_CONVT = RNG.random((4, 2, 3, 3), dtype=F)
SPECS = [((1, 4, 8, 8), "fp32"), (("S", 8), "fp32"), ((2, 3), "int32")]


def _all_ops(mb, x, s, k):
    outs = []
    y = mb.mul(x=x, y=F(0.5))
    for op in ["add", "sub", "mul", "real_div", "floor_div", "mod", "pow", "maximum", "minimum"]:
        outs.append(getattr(mb, op)(x=x, y=mb.add(x=y, y=F(1.5))))
    cmps = [getattr(mb, op)(x=x, y=y) for op in
            ["equal", "not_equal", "greater", "greater_equal", "less", "less_equal"]]
    # bool outputs are not allowed by Core ML: cast them
    outs += [mb.cast(x=b, dtype="fp32") for b in
             [mb.logical_and(x=cmps[0], y=cmps[1]), mb.logical_or(x=cmps[2], y=cmps[3]),
              mb.logical_xor(x=cmps[4], y=cmps[5]), mb.logical_not(x=cmps[0])]]
    t = mb.tanh(x=x)
    for op in ["abs", "acos", "asin", "atan", "atanh", "ceil", "cos", "cosh", "erf", "exp", "exp2", "floor",
               "round", "sign", "sin", "sinh", "sqrt", "square", "tan", "tanh"]:
        outs.append(getattr(mb, op)(x=t))
    outs += [mb.inverse(x=x), mb.log(x=x), mb.rsqrt(x=x), mb.clip(x=x, alpha=F(-1), beta=F(1)),
             mb.threshold(x=x, alpha=F(0.1)), mb.cast(x=x, dtype="int32")]
    outs += [mb.clamped_relu(x=x, alpha=F(0.1), beta=F(6)), mb.elu(x=x, alpha=F(1)),
             mb.gelu(x=x, mode="TANH_APPROXIMATION"),
             mb.leaky_relu(x=x, alpha=F(0.2)), mb.linear_activation(x=x, alpha=F(2), beta=F(1)),
             mb.prelu(x=x, alpha=np.full((4,), 0.1, F)), mb.relu(x=x), mb.relu6(x=x),
             mb.scaled_tanh(x=x, alpha=F(1), beta=F(2)), mb.sigmoid(x=x), mb.sigmoid_hard(x=x, alpha=F(0.2), beta=F(0.5)),
             mb.silu(x=x), mb.softmax(x=x, axis=1), mb.softplus(x=x),
             mb.softplus_parametric(x=x, alpha=np.ones((4,), F), beta=np.ones((4,), F)), mb.softsign(x=x),
             mb.thresholded_relu(x=x, alpha=F(0.5))]
    outs += [mb.linear(x=s, weight=W_LIN, bias=np.zeros(6, F)), mb.matmul(x=s, y=W_MM, transpose_y=False)]
    outs += [mb.conv(x=x, weight=W_CONV, strides=[2, 2], pad_type="same"),
             mb.conv_transpose(x=x, weight=W_CONVT, strides=[2, 2], pad_type="valid")]
    outs += [mb.avg_pool(x=x, kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid"),
             mb.max_pool(x=x, kernel_sizes=[3, 3], strides=[1, 1], pad_type="same"),
             mb.l2_pool(x=x, kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid")]
    outs += [mb.batch_norm(x=x, mean=np.zeros(4, F), variance=np.ones(4, F), gamma=np.ones(4, F), beta=np.zeros(4, F)),
             mb.instance_norm(x=x, gamma=np.ones(4, F), beta=np.zeros(4, F)),
             mb.layer_norm(x=s, axes=[-1], gamma=np.ones(8, F), beta=np.zeros(8, F)),
             mb.l2_norm(x=x), mb.local_response_norm(x=x, size=3)]
    for op in ["reduce_l1_norm", "reduce_l2_norm", "reduce_log_sum", "reduce_log_sum_exp", "reduce_max",
               "reduce_mean", "reduce_min", "reduce_prod", "reduce_sum", "reduce_sum_square"]:
        outs.append(getattr(mb, op)(x=x, axes=[2, 3], keep_dims=True))
    outs += [mb.reduce_argmax(x=x, axis=1), mb.reduce_argmin(x=x, axis=2, keep_dims=True)]
    r = mb.reshape(x=s, shape=[-1, 2, 4])
    outs += [r, mb.transpose(x=r, perm=[1, 0, 2]), mb.squeeze(x=mb.expand_dims(x=s, axes=[0]), axes=[0])]
    outs += [mb.concat(values=[s, s], axis=0), mb.stack(values=[s, s], axis=1)]
    outs += list(mb.split(x=s, num_splits=2, axis=1))
    outs += [mb.slice_by_index(x=s, begin=[0, 1], end=[0, 7], stride=[1, 2], begin_mask=[True, False],
                               end_mask=[True, False]),
             mb.slice_by_size(x=s, begin=[0, 2], size=[-1, 4])]
    outs += [mb.gather(x=s, indices=np.array([0, 2], np.int32), axis=1),
             mb.gather_along_axis(x=x, indices=np.zeros((1, 4, 8, 8), np.int32), axis=1)]
    outs += [mb.tile(x=s, reps=[2, 1]), mb.pad(x=s, pad=[1, 1, 0, 2], mode="constant", constant_val=F(0))]
    shp = mb.shape(x=s)
    outs += [shp, mb.fill(shape=shp, value=F(1)), mb.range_1d(start=0, end=mb.reduce_max(x=k), step=1)]
    outs += [mb.select(cond=cmps[0], a=x, b=y), mb.identity(x=k)]
    return tuple(outs)


def _all_ops_program(target):
    S = get_new_symbol("S")
    dims = {"S": S}
    specs = [mb.TensorSpec(tuple(dims.get(d, d) for d in shape), getattr(types, dt)) for shape, dt in SPECS]

    @mb.program(input_specs=specs, opset_version=target)
    def prog(x, s, k):
        return _all_ops(mb, x, s, k)

    return prog


@pytest.mark.parametrize("opset", ["iOS15", "iOS16", "iOS17", "iOS18"])
def test_every_op_survives_coremltools_loader(opset, tmp_path):
    import coremltools
    from coremltools.converters.mil.frontend.milproto.load import load as milproto_to_pymil

    target = getattr(ct.target, opset)
    prog = _all_ops_program(target)
    prog.validate()
    types_used = {op.op_type for op in prog.find_ops()}
    path = tmp_path / "all.mlpackage"
    ct.save(prog, path, minimum_deployment_target=target)
    m = coremltools.models.MLModel(str(path), skip_model_load=True)
    spec = m.get_spec()
    back_ct = milproto_to_pymil(spec, spec.specificationVersion, m.weights_dir)
    assert {op.op_type for op in back_ct.functions["main"].operations} == types_used
    back = ct.load(path)
    back.validate()
    assert [op.op_type for op in back.find_ops()] == [op.op_type for op in prog.find_ops()]
    # every output type survives: compare ranks and dtypes with what coremltools re-inferred
    ct_outs = back_ct.functions["main"].outputs
    mk_outs = back.functions["main"].outputs
    assert len(ct_outs) == len(mk_outs)
    from coremltools.converters.mil.mil import types as ctypes

    for a, b in zip(ct_outs, mk_outs):
        assert ctypes.builtin_to_string(a.dtype) == b.dtype.__name__, (a.name, b.name)
        assert len(a.shape) == len(b.shape), (a.name, a.shape, b.shape)


@pytest.mark.parametrize("opset", ["iOS15", "iOS17", "iOS18"])
def test_every_op_converts_like_coremltools(opset):
    """FLOAT32 + EMPTY: the same proto ops (types, names, inputs, outputs) and weight.bin bytes."""
    from support.parity import _build, _ct, _make_symbols, reset_ct_names

    ctm, _, _, _ = _ct()
    symtab = _make_symbols(SPECS)
    reset_ct_names()
    cp = _build("ct", _all_ops, SPECS, opset, symtab)
    mp = _build("mk", _all_ops, SPECS, opset, symtab)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = ctm.convert(cp, minimum_deployment_target=getattr(ctm.target, opset), skip_model_load=True,
                         compute_precision=ctm.precision.FLOAT32, pass_pipeline=ctm.PassPipeline.EMPTY)
        mm = ct.convert(mp, minimum_deployment_target=getattr(ct.target, opset),
                        compute_precision=ct.precision.FLOAT32, pass_pipeline=ct.PassPipeline.EMPTY)

    def ops(model):
        fn = model.get_spec().mlProgram.functions["main"]
        blk = fn.block_specializations[fn.opset]
        return [(o.type, [x.name for x in o.outputs], {k: [b.name for b in a.arguments] for k, a in o.inputs.items()})
                for o in blk.operations]

    assert ops(mm) == ops(cm)
    wb = "weight.bin"
    with open(f"{cm.weights_dir}/{wb}", "rb") as a, open(f"{mm.weights_dir}/{wb}", "rb") as b:
        assert a.read() == b.read()


def test_every_op_converts_fp16(tmp_path):
    prog = _all_ops_program(ct.target.iOS17)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = ct.convert(prog, minimum_deployment_target=ct.target.iOS17, compute_precision=ct.precision.FLOAT16)
    model.save(tmp_path / "fp16.mlpackage")
    back = ct.load(tmp_path / "fp16.mlpackage")
    back.validate()
    assert any(op.op_type == "cast" for op in back.find_ops())
