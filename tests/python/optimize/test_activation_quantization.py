"""milkit.optimize.coreml.linear_quantize_activations: calibration with milkit's interpreter, and
quantize / dequantize pairs as coremltools' passes insert them (packages byte-identical to the ones
coremltools writes from the same ranges); the quantized models compute close to the float ones."""

from __future__ import annotations

import warnings

import milkit
import milkit.optimize as mto
import numpy as np
import pytest
from milkit import _core
from milkit.optimize.coreml._post_training_quantization import _calibration_stats
from support.compress_util import assert_same_package, ct_modules, sqnr_db

RNG = np.random.default_rng(0)
CONV = {
    "c1": (RNG.standard_normal((8, 4, 3, 3)) * 0.3).astype(np.float32),
    "c2": (RNG.standard_normal((8, 8, 3, 3)) * 0.2).astype(np.float32),
    "bias": RNG.standard_normal((1, 8, 1, 1)).astype(np.float32),
    "l1": (RNG.standard_normal((16, 32)) * 0.2).astype(np.float32),
    "l2": (RNG.standard_normal((10, 16)) * 0.3).astype(np.float32),
}
TF = {k: (RNG.standard_normal(s) * 0.2).astype(np.float32) for k, s in
      {"q": (32, 32), "k": (32, 32), "v": (32, 32), "o": (32, 32), "m1": (64, 32), "m2": (32, 64)}.items()}
TF["bq"] = (RNG.standard_normal(32) * 0.1).astype(np.float32)


def convnet(B, target):
    """conv + relu (read twice), a residual add, an add of a const, max / avg pooling, linear +
    sigmoid, linear."""
    W = CONV

    @B.program(input_specs=[B.TensorSpec(shape=(1, 4, 8, 8))], opset_version=target)
    def prog(x):
        r = B.relu(x=B.conv(x=x, weight=W["c1"], pad_type="same", name="conv1"), name="relu1")
        c2 = B.conv(x=r, weight=W["c2"], pad_type="same", name="conv2")
        a = B.add(x=c2, y=r, name="res")
        a = B.add(x=a, y=W["bias"], name="addc")
        p = B.max_pool(x=a, kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid", name="mp")
        p = B.avg_pool(x=p, kernel_sizes=[2, 2], strides=[1, 1], pad_type="same", name="ap")
        f = B.reshape(x=p, shape=[4, 32], name="flat")
        h = B.sigmoid(x=B.linear(x=f, weight=W["l1"], name="fc1"), name="sig")
        return B.linear(x=h, weight=W["l2"], name="fc2")

    return prog


def transformer(B, target):
    """A transformer block: layer norm, q / k / v linears, two attention heads whose outputs are
    concatenated, an output linear, residual adds, an MLP (linear, relu, linear)."""
    W = TF

    @B.program(input_specs=[B.TensorSpec(shape=(1, 8, 32))], opset_version=target)
    def prog(x):
        h = B.layer_norm(x=x, axes=[-1], name="ln")
        q = B.linear(x=h, weight=W["q"], bias=W["bq"], name="q")
        k = B.linear(x=h, weight=W["k"], name="k")
        v = B.linear(x=h, weight=W["v"], name="v")
        heads = []
        for i in range(2):
            b, s = [0, 0, 16 * i], [1, 8, 16]
            qi = B.slice_by_size(x=q, begin=b, size=s, name=f"q{i}")
            ki = B.slice_by_size(x=k, begin=b, size=s, name=f"k{i}")
            vi = B.slice_by_size(x=v, begin=b, size=s, name=f"v{i}")
            sc = B.mul(x=B.matmul(x=qi, y=ki, transpose_y=True, name=f"s{i}"), y=0.25, name=f"ss{i}")
            heads.append(B.matmul(x=B.softmax(x=sc, axis=-1, name=f"p{i}"), y=vi, name=f"o{i}"))
        cat = B.concat(values=heads, axis=-1, name="cat")
        r1 = B.add(x=x, y=B.linear(x=cat, weight=W["o"], name="proj"), name="res1")
        m = B.relu(x=B.linear(x=r1, weight=W["m1"], name="fc1"), name="act")
        return B.add(x=r1, y=B.linear(x=m, weight=W["m2"], name="fc2"), name="res2")

    return prog


MODELS = {"convnet": (convnet, (1, 4, 8, 8)), "transformer": (transformer, (1, 8, 32))}


def samples(shape, n, seed):
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(n)]


def convert_both(build, target_name="iOS17", fp32=False):
    ct, mb, _ = ct_modules()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = ct.convert(build(mb, getattr(ct.target, target_name)), convert_to="mlprogram",
                       minimum_deployment_target=getattr(ct.target, target_name), skip_model_load=True,
                       compute_precision=ct.precision.FLOAT32 if fp32 else ct.precision.FLOAT16)
    b = milkit.convert(build(milkit.Builder, getattr(milkit.target, target_name)),
                       minimum_deployment_target=getattr(milkit.target, target_name),
                       compute_precision=milkit.precision.FLOAT32 if fp32 else None)
    return a, b


def ct_quantize_activations(ct_model, config, stats):
    """coremltools' three passes of linear_quantize_activations on its model, with given stats."""
    from coremltools.converters.mil.mil.passes.graph_pass import PassOption
    from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY
    from coremltools.models.utils import _apply_graph_pass

    passes = []
    for name in ("compression::insert_prefix_quantize_dequantize_pair",
                 "compression::insert_suffix_quantize_dequantize_pair"):
        p = PASS_REGISTRY[name]
        p.set_options([PassOption("config", config), PassOption("activation_stats", stats)])
        passes.append(p)
    passes.append(PASS_REGISTRY["common::dequantize_quantize_pair_elimination"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _apply_graph_pass(ct_model, passes, spec_version=8, skip_model_load=True)


def configs(c):
    """(id, OptimizationConfig) built with module `c` (coremltools' or milkit's optimize.coreml)."""
    q = c.OpLinearQuantizerConfig
    return {
        "symmetric_int8": c.OptimizationConfig(global_config=q()),
        "linear_int8": c.OptimizationConfig(global_config=q(mode="linear")),
        "symmetric_uint8": c.OptimizationConfig(global_config=q(dtype="uint8")),
        "linear_uint8": c.OptimizationConfig(global_config=q(mode="linear", dtype="uint8")),
        "op_type_and_name": c.OptimizationConfig(
            global_config=q(), op_type_configs={"add": None, "max_pool": q(mode="linear", dtype="uint8")},
            op_name_configs={"fc2_cast_fp16": None, "conv2_cast_fp16": q(mode="linear"),
                             "q_cast_fp16": q(dtype="uint8")}),
    }


def quantize_both(model, config_id, target_name="iOS17", fp32=False):
    build, shape = MODELS[model]
    a, b = convert_both(build, target_name, fp32)
    data = samples(shape, 3, 1)
    stats = _calibration_stats(b, data)
    _, _, cto = ct_modules()
    qb = mto.coreml.linear_quantize_activations(b, configs(mto.coreml)[config_id], data)
    try:
        qa = ct_quantize_activations(a, configs(cto.coreml)[config_id], stats)
    except Exception as e:  # returned for the caller to compare
        qa = e
    return qa, qb, b, data


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("config_id", ["symmetric_int8", "linear_int8", "symmetric_uint8", "linear_uint8",
                                       "op_type_and_name"])
def test_same_package_as_coremltools_passes(tmp_path, model, config_id):
    qa, qb, _, _ = quantize_both(model, config_id)
    assert not isinstance(qa, Exception), qa
    assert_same_package(qa, qb, str(tmp_path))
    ops = [op.op_type for op in qb.get_program().functions["main"].operations]
    assert "quantize" in ops and "dequantize" in ops


def test_ios16_model_is_raised_to_ios17_as_coremltools(tmp_path):
    qa, qb, _, _ = quantize_both("convnet", "symmetric_int8", target_name="iOS16")
    assert_same_package(qa, qb, str(tmp_path))
    assert qb.get_spec().specificationVersion == 8


def test_fp32_program_gets_fp32_scales_where_coremltools_raises():
    qa, qb, b, data = quantize_both("convnet", "symmetric_int8", fp32=True)
    assert isinstance(qa, ValueError) and "must have the same data type" in str(qa)
    assert np.isfinite(qb.predict(data[0])["fc2"]).all()
    prog = milkit.load(b.package_path)  # a Program is rewritten in place, without the conversion
    cfg = mto.coreml.OptimizationConfig(global_config=mto.coreml.OpLinearQuantizerConfig())
    mto.coreml.linear_quantize_activations(prog, cfg, data)
    fn = prog.functions["main"]
    scales = [op.inputs["scale"].val for op in fn.operations if op.op_type in ("quantize", "dequantize")]
    assert len(scales) >= 10 and all(s.dtype == np.float32 for s in scales)
    out = milkit.run(prog, data[0])["fc2"]
    assert sqnr_db(b.predict(data[0])["fc2"], out) > 25


def _sqnr(model, n_cal=8):
    build, shape = MODELS[model]
    _, b = convert_both(build)
    cfg = mto.coreml.OptimizationConfig(global_config=mto.coreml.OpLinearQuantizerConfig())
    q = mto.coreml.linear_quantize_activations(b, cfg, samples(shape, n_cal, 2))
    held_out = samples(shape, 4, 3)
    out = [o for o in b.get_spec().description.output][0].name
    ref = np.concatenate([b.predict(d)[out].ravel() for d in held_out])
    got = np.concatenate([q.predict(d)[out].ravel() for d in held_out])
    n_q = sum(op.op_type == "quantize" for op in q.get_program().functions["main"].operations)
    return sqnr_db(ref, got), n_q


@pytest.mark.parametrize("model,min_db", [("convnet", 25.0), ("transformer", 25.0)])
def test_quantized_model_close_to_float(model, min_db):
    db, n_q = _sqnr(model)
    print(f"{model}: SQNR {db:.1f} dB over held-out samples, {n_q} quantize ops")
    assert n_q >= 5
    assert db > min_db, db


# -- calibration statistics ------------------------------------------------------------------

def stats_program(B, target):
    """fp32 ops whose results numpy computes exactly; a concat of r and t, a bool op."""

    @B.program(input_specs=[B.TensorSpec(shape=(2, 6)), B.TensorSpec(shape=(2, 6))], opset_version=target)
    def prog(x, y):
        r = B.relu(x=x, name="r")
        s = B.sub(x=x, y=y, name="s")
        t = B.mul(x=s, y=0.5, name="t")
        g = B.greater(x=x, y=y, name="g")
        sel = B.select(cond=g, a=r, b=s, name="sel")
        c = B.concat(values=[r, t], axis=1, name="c")
        return B.mul(x=c, y=2.0, name="out"), B.add(x=sel, y=1.0, name="out2")

    return prog


def _stats_model():
    return milkit.convert(stats_program(milkit.Builder, milkit.target.iOS17),
                          minimum_deployment_target=milkit.target.iOS17, compute_precision=milkit.precision.FLOAT32)


def _expected(x, y):
    r, s = np.maximum(x, 0), x - y
    t = s * np.float32(0.5)
    sel = np.where(x > y, r, s)
    return {"x": x, "y": y, "r": r, "s": s, "t": t, "sel": sel, "c": np.concatenate([r, t], 1),
            "out": np.concatenate([r, t], 1) * np.float32(2), "out2": sel + np.float32(1)}


def _rng(a):
    return float(np.min(a)), float(np.max(a))


def _pair_data(seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((2, 6)).astype(np.float32), rng.standard_normal((2, 6)).astype(np.float32)


def test_calibrated_vars_are_coremltools_ones():
    m = _stats_model()  # keeps its temporary package alive
    fn = milkit.load(m.package_path).functions["main"]
    assert _core.calibrated_vars(fn) == ["r", "s", "t", "sel", "c"]  # not the bool g, not the outputs
    assert [sorted(g) for g in _core.concat_groups(fn)] == [["c", "r", "t"]]


def test_single_sample_stats_are_exact_ranges():
    x, y = _pair_data(5)
    stats = _calibration_stats(_stats_model(), [{"x": x, "y": y}])
    e = _expected(x, y)
    assert set(stats) == set(e)
    for name in ("x", "y", "s", "sel", "out", "out2"):
        assert (stats[name]["rmin"], stats[name]["rmax"]) == _rng(e[name]), name
    # the concat's inputs and output share the union of their ranges
    group = (min(_rng(e["r"])[0], _rng(e["t"])[0]), max(_rng(e["r"])[1], _rng(e["t"])[1]))
    for name in ("r", "t", "c"):
        assert (stats[name]["rmin"], stats[name]["rmax"]) == group, name
    assert group != _rng(e["r"])


def test_two_samples_give_the_union_of_ranges_not_the_last_one():
    """coremltools' calibration keeps the last sample's range (its _update_tensor_range overwrites
    the range with the current sample before the min / max); milkit's is the union over the
    samples, which is what calibration means."""
    from coremltools.optimize._utils import _update_tensor_range

    (x1, y1), (x2, y2) = _pair_data(6), _pair_data(7)
    x2 = x2 * np.float32(0.1)  # the second sample has the smaller range
    stats = _calibration_stats(_stats_model(), [{"x": x1, "y": y1}, {"x": x2, "y": y2}])
    e1, e2 = _expected(x1, y1), _expected(x2, y2)
    for name in ("x", "s", "sel", "out2"):
        lo = min(_rng(e1[name])[0], _rng(e2[name])[0])
        hi = max(_rng(e1[name])[1], _rng(e2[name])[1])
        assert (stats[name]["rmin"], stats[name]["rmax"]) == (lo, hi), name
    ct_stats: dict = {"x": {}}
    for a in (x1, x2):
        _update_tensor_range("x", a, ct_stats)
    assert (ct_stats["x"]["rmin"], ct_stats["x"]["rmax"]) == _rng(x2)
    assert (stats["x"]["rmin"], stats["x"]["rmax"]) != _rng(x2)


def test_group_size_does_not_change_stats():
    data = [{"x": x, "y": y} for x, y in (_pair_data(8), _pair_data(9))]
    m = _stats_model()
    assert _calibration_stats(m, data, 2) == _calibration_stats(m, data) == _calibration_stats(m, data, 1)


def test_program_in_place_and_none_key_for_single_input():
    build, shape = MODELS["convnet"]
    _, b = convert_both(build)
    prog = milkit.load(b.package_path)
    cfg = mto.coreml.OptimizationConfig(global_config=mto.coreml.OpLinearQuantizerConfig())
    x = samples(shape, 1, 4)[0]["x"]
    sample = {None: x}
    out = mto.coreml.linear_quantize_activations(prog, cfg, [sample])
    assert out is prog and sample == {None: x}  # the caller's dict is left as it was
    assert any(op.op_type == "quantize" for op in prog.functions["main"].operations)


# -- bad input ----------------------------------------------------------------------------------

def test_config_must_be_an_optimization_config_of_linear_quantizer_configs():
    _, b = convert_both(MODELS["convnet"][0])
    data = samples((1, 4, 8, 8), 1, 0)
    with pytest.raises(ValueError, match="config must be of type OptimizationConfig"):
        mto.coreml.linear_quantize_activations(b, mto.coreml.OpLinearQuantizerConfig(), data)
    pal = mto.coreml.OptimizationConfig(global_config=mto.coreml.OpPalettizerConfig(nbits=4))
    with pytest.raises(ValueError, match="insert_prefix_quantize_dequantize_pair only accept "
                                         "OpLinearQuantizerConfig type config. Got OpPalettizerConfig"):
        mto.coreml.linear_quantize_activations(b, pal, data)
    int4 = mto.coreml.OptimizationConfig(global_config=mto.coreml.OpLinearQuantizerConfig(dtype="int4"))
    with pytest.raises(ValueError, match="unrecognized output dtype \"int4\""):
        mto.coreml.linear_quantize_activations(b, int4, data)


def test_sample_errors_name_the_input():
    m = _stats_model()
    cfg = mto.coreml.OptimizationConfig(global_config=mto.coreml.OpLinearQuantizerConfig())
    x, y = _pair_data(1)
    with pytest.raises(ValueError, match="no data for the model input 'y'"):
        mto.coreml.linear_quantize_activations(m, cfg, [{"x": x}])
    with pytest.raises(ValueError, match="'z', which is not an input"):
        mto.coreml.linear_quantize_activations(m, cfg, [{"x": x, "y": y, "z": y}])
    with pytest.raises(ValueError, match="please provide the name for each data"):
        mto.coreml.linear_quantize_activations(m, cfg, [{None: x}])
    with pytest.raises(ValueError, match="calibration_op_group_size"):
        mto.coreml.linear_quantize_activations(m, cfg, [{"x": x, "y": y}], calibration_op_group_size=0)
    with pytest.raises(ValueError, match="sample_data is empty"):
        mto.coreml.linear_quantize_activations(m, cfg, [])


def test_program_older_than_ios17_is_left_alone_with_a_warning():
    build, shape = MODELS["convnet"]
    m = convert_both(build, "iOS16")[1]
    prog = milkit.load(m.package_path)
    cfg = mto.coreml.OptimizationConfig(global_config=mto.coreml.OpLinearQuantizerConfig())
    before = [op.op_type for op in prog.functions["main"].operations]
    with pytest.warns(UserWarning, match="not compatible with iOS17"):
        mto.coreml.linear_quantize_activations(prog, cfg, samples(shape, 1, 0))
    assert [op.op_type for op in prog.functions["main"].operations] == before
