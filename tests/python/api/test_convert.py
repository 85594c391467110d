"""milkit.convert against coremltools.convert on the same programs."""

import gc
import os
import warnings

import milkit
import numpy as np
import pytest
from support.parity import _build, _ct, _make_symbols, reset_ct_names


def _both(build, specs, opset="iOS17"):
    symtab = _make_symbols(specs)
    reset_ct_names()
    cp = _build("ct", build, specs, opset, symtab)
    mp = _build("mk", build, specs, opset, symtab)
    return cp, mp


def _mlprogram(spec):
    p = spec.mlProgram
    return p.functions["main"]


def _ops(fn_spec, opset):
    return [(op.type, op.attributes["name"].immediateValue.tensor.strings.values[0],
             [o.name for o in op.outputs], sorted(op.inputs.keys()))
            for op in fn_spec.block_specializations[opset].operations]


def _convert_both(build, specs, opset="iOS17", **kw):
    ct, _, _, _ = _ct()
    cp, mp = _both(build, specs, opset)
    t = getattr(ct.target, opset)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = ct.convert(cp, convert_to="mlprogram", minimum_deployment_target=t, skip_model_load=True,
                        compute_precision=ct.precision.FLOAT32, pass_pipeline=ct.PassPipeline.EMPTY, **kw)
        mm = milkit.convert(mp, convert_to="mlprogram", minimum_deployment_target=getattr(milkit.target, opset),
                            skip_model_load=True, compute_precision=milkit.precision.FLOAT32,
                            pass_pipeline=milkit.PassPipeline.EMPTY,
                            **{k: v for k, v in kw.items() if k != "inputs"})
    return cm, mm


def _weights(model):
    p = os.path.join(model.weights_dir, "weight.bin")
    return open(p, "rb").read() if os.path.exists(p) else b""


@pytest.mark.parametrize("opset", ["iOS15", "iOS16", "iOS17", "iOS18"])
def test_fp32_empty_matches_coremltools_op_for_op(opset, tmp_path):
    w = np.random.default_rng(0).random((16, 8)).astype(np.float32)
    b = np.random.default_rng(1).random((16,)).astype(np.float32)

    def build(mb, x):
        h = mb.linear(x=x, weight=w, bias=b)
        h = mb.relu(x=h)
        return mb.reduce_mean(x=mb.mul(x=h, y=2.0), axes=[-1], keep_dims=True)

    cm, mm = _convert_both(build, [((1, "S", 8), "fp32")], opset)
    cs, ms = cm.get_spec(), mm.get_spec()
    assert cs.specificationVersion == ms.specificationVersion
    op_name = next(iter(_mlprogram(cs).block_specializations))
    assert _mlprogram(ms).opset == _mlprogram(cs).opset == op_name
    assert _ops(_mlprogram(ms), op_name) == _ops(_mlprogram(cs), op_name)
    assert _weights(mm) == _weights(cm)
    assert [i.name for i in ms.description.input] == [i.name for i in cs.description.input]
    mm.save(tmp_path / "m.mlpackage")
    # it loads in coremltools and in milkit
    ct, _, _, _ = _ct()
    from coremltools.converters.mil.frontend.milproto.load import load as milproto_to_pymil

    loaded = ct.models.MLModel(str(tmp_path / "m.mlpackage"), skip_model_load=True)
    milproto_to_pymil(loaded.get_spec(), loaded.get_spec().specificationVersion, loaded.weights_dir)
    back = milkit.load(tmp_path / "m.mlpackage")
    back.validate()


def test_range_dim_sets_the_shape_range():
    ct, _, _, _ = _ct()

    def build(mb, x):
        return mb.add(x=x, y=1.0)

    _, mp = _both(build, [((1, "S", 4), "fp32")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mm = milkit.convert(mp, minimum_deployment_target=milkit.target.iOS17, compute_precision=milkit.precision.FLOAT32,
                            inputs=[milkit.TensorType(name="x", shape=(1, milkit.RangeDim(2, 512), 4))])
    rng = mm.get_spec().description.input[0].type.multiArrayType.shapeRange.sizeRanges
    assert [(r.lowerBound, r.upperBound) for r in rng] == [(1, 1), (2, 512), (4, 4)]


def test_convert_errors():
    _, mp = _both(lambda mb, x: mb.add(x=x, y=1.0), [((2,), "fp32")], "iOS18")
    with pytest.raises(ValueError, match="newer than minimum_deployment_target iOS17"):
        milkit.convert(mp, minimum_deployment_target=milkit.target.iOS17)
    with pytest.raises(TypeError, match="milkit Program"):
        milkit.convert(object())
    with pytest.raises(ValueError, match="neuralnetwork"):
        milkit.convert(mp, convert_to="neuralnetwork")
    with pytest.raises(ValueError, match="no input named 'y'"):
        milkit.convert(mp, minimum_deployment_target=milkit.target.iOS18,
                       inputs=[milkit.TensorType(name="y", shape=(2,))])


def test_default_pipeline_skips_nothing(tmp_path):
    _, mp = _both(lambda mb, x: mb.add(x=x, y=1.0), [((2,), "fp32")])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = milkit.convert(mp, minimum_deployment_target=milkit.target.iOS17)
    # every pass of DEFAULT and of the backend is milkit's own: nothing skipped or reported
    assert m.skipped_passes == []
    assert not [w for w in caught if issubclass(w.category, milkit.SkippedPassesWarning)]
    m.save(tmp_path / "a.mlpackage")
    m.save(tmp_path / "a.mlpackage")  # overwrite in place
    assert (tmp_path / "a.mlpackage" / "Manifest.json").exists()
    assert milkit.PassPipeline.EMPTY.passes == []
    assert len(milkit.PassPipeline.DEFAULT.passes) == 95


def test_edit_a_loaded_package_and_save(tmp_path):
    """Convert, save, load, insert an op with set_before_op, save as is."""
    import coremltools
    from coremltools.converters.mil.frontend.milproto.load import load as milproto_to_pymil
    from milkit import Builder as mb

    S = milkit.get_new_symbol("S")

    @mb.program(input_specs=[mb.TensorSpec((1, S, 8))], opset_version=milkit.target.iOS17)
    def prog(x):
        return mb.softmax(x=mb.linear(x=x, weight=np.ones((8, 8), np.float32)), axis=-1)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = milkit.convert(prog, minimum_deployment_target=milkit.target.iOS17,
                               compute_precision=milkit.precision.FLOAT16,
                               inputs=[milkit.TensorType(name="x", shape=(1, milkit.RangeDim(1, 64), 8))])
    model.save(tmp_path / "enc.mlpackage")
    prog2 = milkit.load(tmp_path / "enc.mlpackage")
    softmax = prog2.functions["main"].find_ops(op_type="softmax")[0]
    with mb.set_before_op(softmax):
        scaled = mb.mul(x=softmax.inputs["x"], y=np.float16(0.5), name="scaled")
    softmax.enclosing_block.replace_uses_of_var_after_op(scaled.op, softmax.inputs["x"], scaled)
    assert softmax.inputs["x"] is scaled
    prog2.validate()
    milkit.save(prog2, tmp_path / "edited.mlpackage")
    m = coremltools.models.MLModel(str(tmp_path / "edited.mlpackage"), skip_model_load=True)
    back = milproto_to_pymil(m.get_spec(), m.get_spec().specificationVersion, m.weights_dir)
    assert "scaled" in [op.name for op in back.functions["main"].operations]
    names = [op.name for op in milkit.load(tmp_path / "edited.mlpackage").find_ops()]
    assert names.index("scaled") < names.index(softmax.name)


@pytest.mark.parametrize("opset", ["iOS16", "iOS17", "iOS18"])
def test_coremltools_fp16_package_round_trips(opset, tmp_path):
    """A package coremltools converts with its DEFAULT pipeline at FLOAT16 loads in milkit and saves
    back to the same MIL program and weight.bin."""
    ct, _, _, _ = _ct()
    w = np.random.default_rng(3).standard_normal((16, 8)).astype(np.float32)

    def build(mb, x):
        h = mb.layer_norm(x=x, axes=[-1], epsilon=1e-5)
        h = mb.gelu(x=mb.linear(x=h, weight=w, bias=np.zeros(16, np.float32)), mode="EXACT")
        return mb.softmax(x=h, axis=-1)

    cp, _ = _both(build, [((1, "S", 8), "fp32")], opset)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = ct.convert(cp, minimum_deployment_target=getattr(ct.target, opset), skip_model_load=True,
                        compute_precision=ct.precision.FLOAT16)
    src = tmp_path / "ct16.mlpackage"
    cm.save(str(src))
    prog = milkit.load(src)
    assert any(op.op_type == "cast" for op in prog.find_ops())
    out = tmp_path / "again.mlpackage"
    milkit.save(prog, out)
    a = ct.models.MLModel(str(src), skip_model_load=True).get_spec()
    b = ct.models.MLModel(str(out), skip_model_load=True).get_spec()
    assert a.mlProgram.functions["main"] == b.mlProgram.functions["main"]
    assert [i.name for i in a.description.input] == [i.name for i in b.description.input]
    wa = os.path.join(str(src), "Data", "com.apple.CoreML", "weights", "weight.bin")
    wb = os.path.join(str(out), "Data", "com.apple.CoreML", "weights", "weight.bin")
    assert open(wa, "rb").read() == open(wb, "rb").read()


def test_output_dtypes_are_applied():
    # convert(outputs=[TensorType(dtype=...)]) casts the outputs as coremltools'
    # update_output_dtypes does (the old output is renamed "<name>_type_<dtype>"; a cast takes its
    # name). coremltools itself ignores `outputs` for a MIL program (source "milinternal"); milkit
    # applies what the user asked for.
    from milkit import Builder as mb

    def make():
        @mb.program(input_specs=[mb.TensorSpec(shape=(2, 3))], opset_version=milkit.target.iOS17)
        def prog(x):
            return mb.relu(x=x), mb.cast(x=x, dtype="int32"), x

        return prog

    x = np.array([[-1.5, 0.25, 2.0], [3.0, -4.0, 0.5]], np.float32)
    for precision in (milkit.precision.FLOAT32, milkit.precision.FLOAT16):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            m = milkit.convert(make(), minimum_deployment_target=milkit.target.iOS17, compute_precision=precision,
                               outputs=[milkit.TensorType(name="a", dtype=np.float16),
                                        milkit.TensorType(name="b", dtype=np.float32),
                                        milkit.TensorType(dtype=np.float16)])
        assert any("is also an input var" in str(e.message) for e in w)
        spec = m.get_spec()
        dts = [o.type.multiArrayType.dataType for o in spec.description.output]
        fp16, fp32 = 65552, 65568
        assert dts == [fp16, fp32, fp32]  # "c" is the input x: its dtype cannot change
        out = m.predict({"x": x})
        assert out["a"].dtype == np.float16 and out["b"].dtype == np.float32
        np.testing.assert_array_equal(out["a"], np.maximum(x, 0).astype(np.float16))
        np.testing.assert_array_equal(out["b"], x.astype(np.int32).astype(np.float32))
        text = milkit.to_text(m.get_program())
        assert "relu_0_type_fp32" in text or precision is milkit.precision.FLOAT16
        assert "cast_0_type_int32" in text


def test_save_links_a_temporary_package_and_copies_others(tmp_path, monkeypatch):
    """convert's own temporary package is hard-linked into place (its files are never written
    again); the saved package outlives the model; a package loaded from a user's path is copied;
    where linking fails (another file system) save copies."""
    from milkit import Builder as mb

    w = np.arange(64 * 64, dtype=np.float32).reshape(64, 64) / 4096

    @mb.program(input_specs=[mb.TensorSpec((2, 64))], opset_version=milkit.target.iOS17)
    def prog(x):
        return mb.linear(x=x, weight=w)

    m = milkit.convert(prog, minimum_deployment_target=milkit.target.iOS17,
                       compute_precision=milkit.precision.FLOAT32)
    rel = os.path.join("Data", "com.apple.CoreML", "weights", "weight.bin")
    tmp_weights = os.path.join(m.package_path, rel)
    m.save(tmp_path / "a.mlpackage")
    saved = tmp_path / "a.mlpackage" / rel
    assert os.path.samefile(saved, tmp_weights)
    x = np.random.RandomState(0).rand(2, 64).astype(np.float32)
    want = m.predict({"x": x})
    del m
    gc.collect()
    assert not os.path.exists(tmp_weights)  # the temporary package is gone, the saved one is whole
    back = milkit.models.MLModel(str(tmp_path / "a.mlpackage"))
    got = back.predict({"x": x})
    np.testing.assert_array_equal(list(got.values())[0], list(want.values())[0])
    back.save(tmp_path / "b.mlpackage")  # not a temporary package: copied
    assert not os.path.samefile(tmp_path / "b.mlpackage" / rel, saved)
    assert (tmp_path / "b.mlpackage" / rel).read_bytes() == saved.read_bytes()

    m2 = milkit.convert(prog, minimum_deployment_target=milkit.target.iOS17,
                        compute_precision=milkit.precision.FLOAT32)

    def no_link(src: str, dst: str) -> None:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", no_link)
    m2.save(tmp_path / "c.mlpackage")
    assert not os.path.samefile(tmp_path / "c.mlpackage" / rel, os.path.join(m2.package_path, rel))
    assert (tmp_path / "c.mlpackage" / rel).read_bytes() == saved.read_bytes()
