"""compression::linear_quantize_weights through milkit.optimize.coreml: the packages are the ones
coremltools writes (program and weight.bin bytes), the errors and skips are coremltools', and the
quantized model computes what its dequantized weights say."""

from __future__ import annotations

import warnings

import milkit
import milkit.optimize as mto
import numpy as np
import pytest
from support.compress_util import assert_same_package, both, convert_both, ct_modules, model_fn, sqnr_db, weights

CONFIGS = [
    dict(),
    dict(mode="linear"),
    dict(mode="linear", dtype="uint8"),
    dict(mode="linear_symmetric", dtype="uint8"),
    dict(granularity="per_tensor"),
    dict(mode="linear", granularity="per_tensor", dtype="int8", weight_threshold=100),
    dict(dtype="int4", granularity="per_block", block_size=16),
    dict(mode="linear", dtype="uint4", granularity="per_block", block_size=8),
    dict(dtype="int4", granularity="per_channel", weight_threshold=10),
    dict(dtype="uint4", mode="linear", granularity="per_block", block_size=[0, 32]),
    dict(granularity="per_block", block_size=5),  # does not divide: coremltools skips with a warning
]


@pytest.mark.parametrize("target", ["iOS16", "iOS17", "iOS18"])
@pytest.mark.parametrize("kw", CONFIGS, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()) or "default")
def test_same_package_as_coremltools(tmp_path, target, kw):
    a, b = convert_both(target)

    def run(mod, m):
        cfg = mod.coreml.OptimizationConfig(global_config=mod.coreml.OpLinearQuantizerConfig(**kw))
        return mod.coreml.linear_quantize_weights(m, cfg)

    qa, qb = both(run, a, b)
    if isinstance(qa, Exception):
        assert isinstance(qb, type(qa)), (qa, qb)
        assert str(qa).split(".")[0] in str(qb)
        return
    assert not isinstance(qb, Exception), qb
    assert_same_package(qa, qb, str(tmp_path))


@pytest.mark.parametrize("transpose_y", [False, True])
def test_matmul_axes_as_coremltools(tmp_path, transpose_y):
    a, b = convert_both("iOS18", transpose_y=transpose_y)

    def run(mod, m):
        cfg = mod.coreml.OptimizationConfig(global_config=mod.coreml.OpLinearQuantizerConfig(
            dtype="int4", granularity="per_block", block_size=16))
        return mod.coreml.linear_quantize_weights(m, cfg)

    qa, qb = both(run, a, b)
    assert_same_package(qa, qb, str(tmp_path))


def test_op_type_and_op_name_configs_as_coremltools(tmp_path):
    a, b = convert_both("iOS18")

    def run(mod, m):
        c = mod.coreml
        cfg = c.OptimizationConfig(
            global_config=c.OpLinearQuantizerConfig(mode="linear"),
            op_type_configs={"conv": c.OpLinearQuantizerConfig(dtype="int4", granularity="per_tensor"),
                             "matmul": None},
            op_name_configs={"lin_cast_fp16": c.OpLinearQuantizerConfig(dtype="uint8")})
        return c.linear_quantize_weights(m, cfg)

    qa, qb = both(run, a, b)
    assert_same_package(qa, qb, str(tmp_path))
    ops = {op.op_type for op in qb.get_program().functions["main"].operations}
    assert "constexpr_blockwise_shift_scale" in ops


def test_const_name_config_wins():
    _, b = convert_both("iOS18")
    prog = milkit.load(b.package_path)
    consts = [op.name for op in prog.functions["main"].operations if op.op_type == "const"]
    lin_w = next(n for n in consts if n.startswith("lin_weight"))
    c = mto.coreml
    cfg = c.OptimizationConfig(global_config=None, op_name_configs={lin_w: c.OpLinearQuantizerConfig()})
    out = c.linear_quantize_weights(prog, cfg)
    assert out is prog
    q = [op for op in prog.functions["main"].operations if op.op_type == "constexpr_blockwise_shift_scale"]
    assert [op.name for op in q] == [lin_w + "_quantized"]


def test_outputs_follow_the_dequantized_weights():
    _, b = convert_both("iOS18")
    rng = np.random.default_rng(1)
    feed = {"img": rng.standard_normal((1, 8, 6, 12)).astype(np.float32),
            "x": rng.standard_normal((2, 96)).astype(np.float32)}
    ref = b.predict(feed)
    c = mto.coreml
    for kw, floor in [(dict(), 30.0), (dict(dtype="int4", granularity="per_block", block_size=16), 14.0)]:
        q = c.linear_quantize_weights(b, c.OptimizationConfig(global_config=c.OpLinearQuantizerConfig(**kw)))
        got = q.predict(feed)
        for k in ref:
            assert sqnr_db(ref[k], got[k]) > floor, (kw, k, sqnr_db(ref[k], got[k]))


def test_conflicting_configs_for_a_shared_weight_raise():
    W = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)

    @milkit.Builder.program(input_specs=[milkit.Builder.TensorSpec(shape=(1, 64))], opset_version=milkit.target.iOS18)
    def prog(x):
        w = milkit.Builder.const(val=W, name="w")
        return milkit.Builder.linear(x=x, weight=w, name="a"), milkit.Builder.matmul(x=x, y=w, name="b")

    c = mto.coreml
    cfg = c.OptimizationConfig(global_config=c.OpLinearQuantizerConfig(),
                               op_name_configs={"a": c.OpLinearQuantizerConfig(dtype="int4")})
    with pytest.raises(ValueError, match="compression config conflict detected between ops"):
        c.linear_quantize_weights(prog, cfg)


def test_inf_weight_is_skipped_with_a_warning():
    W = np.ones((64, 64), np.float32)
    W[3, 4] = np.inf

    @milkit.Builder.program(input_specs=[milkit.Builder.TensorSpec(shape=(1, 64))], opset_version=milkit.target.iOS18)
    def prog(x):
        return milkit.Builder.linear(x=x, weight=W, name="a")

    c = mto.coreml
    with pytest.warns(UserWarning, match="has inf/-inf"):
        c.linear_quantize_weights(prog, c.OptimizationConfig(global_config=c.OpLinearQuantizerConfig()))
    assert not any(op.op_type.startswith("constexpr") for op in prog.functions["main"].operations)


def _convert_both_with(W, target_name="iOS18"):
    ct, mb, _ = ct_modules()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = ct.convert(model_fn(mb, W, getattr(ct.target, target_name)), convert_to="mlprogram",
                       minimum_deployment_target=getattr(ct.target, target_name), skip_model_load=True)
    b = milkit.convert(model_fn(milkit.Builder, W, getattr(milkit.target, target_name)),
                       minimum_deployment_target=getattr(milkit.target, target_name))
    return a, b


@pytest.mark.parametrize("kw", [dict(), dict(mode="linear", dtype="uint8"),
                                dict(dtype="int4", granularity="per_block", block_size=8),
                                dict(granularity="per_block", block_size=5), dict(granularity="per_tensor")],
                         ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()) or "default")
def test_fp16_weights_with_inf_and_nan_as_coremltools(tmp_path, kw):
    # an inf in one row (the weight is skipped, with coremltools' warning, whatever the block
    # sizes), NaNs in another weight (quantized; their blocks become zeros)
    W = weights()
    W["lin"][5, 7] = -np.inf
    W["mm"][3, 0] = np.inf
    W["conv"][2, 1, 0, 0] = np.nan
    a, b = _convert_both_with(W)
    _, _, cto = ct_modules()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = cto.coreml
        qa = c.linear_quantize_weights(a, c.OptimizationConfig(global_config=c.OpLinearQuantizerConfig(**kw)))
    c = mto.coreml
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        qb = c.linear_quantize_weights(b, c.OptimizationConfig(global_config=c.OpLinearQuantizerConfig(**kw)))
    said = [str(w.message) for w in caught]
    # coremltools logs its inf warning (without the const's name): each weight with inf gets that
    # warning only, also where its block sizes would be skipped as well
    for name in ("lin_weight", "mm_y"):
        about = [m for m in said if f"const {name}" in m or f"on {name}" in m]
        assert len(about) == 1 and "has inf/-inf" in about[0], (name, said)
    assert_same_package(qa, qb, str(tmp_path))


def test_wrong_config_kind_is_refused():
    c = mto.coreml
    cfg = c.OptimizationConfig(global_config=c.OpPalettizerConfig(nbits=4))
    with pytest.raises(ValueError, match="only accept OpLinearQuantizerConfig"):
        c.linear_quantize_weights(milkit.Program(), cfg)


def test_every_function_of_a_program_is_compressed():
    W = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    B = milkit.Builder

    def one(name):
        @B.program(input_specs=[B.TensorSpec(shape=(1, 64))], opset_version=milkit.target.iOS18)
        def prog(x):
            return B.linear(x=x, weight=W, name=name)
        return prog

    prog = one("a")
    prog.add_function("second", one("b").functions["main"])
    c = mto.coreml
    c.linear_quantize_weights(prog, c.OptimizationConfig(global_config=c.OpLinearQuantizerConfig()))
    for f in prog.functions.values():
        assert [op.op_type for op in f.operations if op.op_type.startswith("constexpr")] == \
            ["constexpr_blockwise_shift_scale"]


def test_multifunction_packages_are_refused_as_coremltools(tmp_path):
    W = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    B = milkit.Builder

    @B.program(input_specs=[B.TensorSpec(shape=(1, 64))], opset_version=milkit.target.iOS18)
    def prog(x):
        return B.linear(x=x, weight=W, name="a")

    model = milkit.convert(prog, minimum_deployment_target=milkit.target.iOS18)
    other = milkit.load(model.package_path)
    other.add_function("second", other.functions["main"])
    path = str(tmp_path / "multi.mlpackage")
    milkit.save(other, path)
    c = mto.coreml
    with pytest.raises(ValueError, match="not supported for a multifunction model"):
        c.linear_quantize_weights(milkit.models.MLModel(path), c.OptimizationConfig(
            global_config=c.OpLinearQuantizerConfig()))
