"""classify (coremltools iOS15/classify.py) end to end: the op's typing against coremltools', its
errors, list consts (mil_list), the package coremltools writes for a classifier
(ct.convert(..., classifier_config=...)) against milkit's op for op and byte for byte, loading it
back in both, the MIL text, and predict (label and probabilities as Core ML returns them)."""

import os
import warnings

import milkit
import numpy as np
import pytest
from support.parity import _build, _ct, _make_symbols, reset_ct_names

LABELS = ["cat", "dog", "bird"]
INT_LABELS = [7, 3, 11]


def _mil_list(mb):
    """The mil_list class of the library `mb` belongs to."""
    if mb is milkit.Builder:
        return milkit.mil_list
    from coremltools.converters.mil.mil import mil_list

    return mil_list


def _classes(mb, labels):
    """A const list of the labels, as coremltools' _add_classify_op makes it (ints as np.int64)."""
    if isinstance(labels[0], int):
        labels = [np.int64(c) for c in labels]
    return mb.const(val=_mil_list(mb)(list(labels)))


def _both(build, specs, opset="iOS15"):
    symtab = _make_symbols(specs)
    reset_ct_names()
    cp = _build("ct", build, specs, opset, symtab)
    mp = _build("mk", build, specs, opset, symtab)
    return cp, mp


def _both_errors(build, specs, opset="iOS15"):
    symtab = _make_symbols(specs)
    errs = []
    for kind in ("ct", "mk"):
        reset_ct_names()
        try:
            _build(kind, build, specs, opset, symtab)
            errs.append(None)
        except Exception as e:
            errs.append(e)
    return errs


def _ct_type_name(t):
    from coremltools.converters.mil.mil import types as ctypes

    return {"str": "string"}.get(ctypes.builtin_to_string(t), ctypes.builtin_to_string(t))


# ---- the op -------------------------------------------------------------------------------------


@pytest.mark.parametrize("labels", [LABELS, INT_LABELS], ids=["str", "int64"])
@pytest.mark.parametrize("opset", ["iOS15", "iOS16", "iOS17", "iOS18", None])
def test_types_match_coremltools(labels, opset):
    def build(mb, x):
        return mb.classify(probabilities=x, classes=_classes(mb, labels))

    cp, mp = _both(build, [((1, 3), "fp32")], opset)
    cops, mops = list(cp.functions["main"].operations), list(mp.functions["main"].operations)
    assert [(o.op_type, o.name) for o in cops] == [(o.op_type, o.name) for o in mops]
    assert int(cp.functions["main"].opset_version) == int(mp.functions["main"].opset_version)
    # the const list: list[str|int64, 3] holding the labels
    cc, mc = cops[0].outputs[0], mops[0].outputs[0]
    assert cc.name == mc.name
    assert _ct_type_name(cc.elem_type) == mc.elem_type.__name__
    assert milkit.types.is_list(mc.sym_type) and mc.sym_type.init_length == 3
    assert mc.val == cc.val
    assert [type(v) for v in mc.val] == [type(v) for v in cc.val]
    # classify's outputs: the label scalar and the dict label -> fp64
    (cl, cd), (ml, md) = cops[1].outputs, mops[1].outputs
    assert [cl.name, cd.name] == [ml.name, md.name] == ["classify_0_0", "classify_0_1"]
    assert _ct_type_name(cl.sym_type) == ml.sym_type.__name__ == ("string" if labels is LABELS else "int64")
    assert milkit.types.is_dict(md.sym_type)
    assert [_ct_type_name(t) for t in cd.sym_type.T] == [t.__name__ for t in md.sym_type.T]
    assert ml.shape == cl.shape == () and md.shape == cd.shape == ()
    assert ml.val is None and md.val is None
    assert [v.name for v in mp.functions["main"].outputs] == ["classify_0_0", "classify_0_1"]


def test_symbolic_probabilities_are_accepted_like_coremltools():
    # the size check only applies to a static shape (coremltools' any_symbolic test)
    def build(mb, x):
        return mb.classify(probabilities=x, classes=_classes(mb, LABELS))

    cp, mp = _both(build, [((1, "S"), "fp32")])
    assert [o.op_type for o in mp.functions["main"].operations] == ["const", "classify"]


def test_plain_python_list_is_a_mil_list():
    # Deliberate difference: coremltools' Builder does not turn a Python list into a const for a
    # list input (mb.classify(classes=[...]) fails with AttributeError 'list' object has no
    # attribute 'is_descendant_of_const'); milkit makes the mil_list const, with ints as int64 (the
    # label type classify takes, as ct.convert's ClassifierConfig does).
    from milkit import Builder as mb

    for labels, dt in [(LABELS, "string"), (INT_LABELS, "int64")]:
        @mb.program(input_specs=[mb.TensorSpec(shape=(3,))], opset_version=milkit.target.iOS15)
        def prog(x):
            return mb.classify(probabilities=x, classes=labels)

        c = prog.functions["main"].operations[0]
        assert c.op_type == "const" and c.name == "classify_0_classes_0"
        assert c.outputs[0].elem_type.__name__ == dt
        assert list(c.outputs[0].val) == labels
    [e] = [e for e in _both_errors(lambda mb, x: mb.classify(probabilities=x, classes=LABELS), [((3,), "fp32")])
           if e is not None]  # coremltools only
    assert isinstance(e, AttributeError)


ERRORS = {
    # probabilities must be fp32
    "fp16_probabilities": (lambda mb, x: mb.classify(probabilities=mb.cast(x=x, dtype="fp16"),
                                                     classes=_classes(mb, LABELS)), "probabilities"),
    # Python ints in a mil_list are int32, which classify refuses
    "int32_labels": (lambda mb, x: mb.classify(probabilities=x, classes=mb.const(val=_mil_list(mb)([1, 2, 3]))),
                     "str or int64"),
    # the number of classes must match the size of a static probabilities tensor
    "size_mismatch": (lambda mb, x: mb.classify(probabilities=x, classes=_classes(mb, ["a", "b"])),
                      "number of classes"),
    # classes must be a list, not a tensor
    "tensor_classes": (lambda mb, x: mb.classify(probabilities=x, classes=mb.const(val=np.array(LABELS))),
                       "classes"),
    # classes must be a compile-time constant
    "runtime_list": (lambda mb, x: mb.classify(
        probabilities=x, classes=mb.make_list(init_length=3, dtype="fp32", elem_shape=[1])), "classes"),
    # an empty mil_list is refused
    "empty_list": (lambda mb, x: mb.classify(probabilities=x, classes=mb.const(val=_mil_list(mb)([]))),
                   "empty"),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_like_coremltools(case):
    build, match = ERRORS[case]
    c_err, m_err = _both_errors(build, [((1, 3), "fp32")])
    assert c_err is not None, "coremltools accepted it"
    assert m_err is not None, "milkit accepted it"
    assert isinstance(m_err, (ValueError, TypeError)), repr(m_err)
    assert match in str(m_err), str(m_err)
    if case != "empty_list":  # the const fails before any classify op exists
        assert "classify" in str(m_err)


def test_mil_list_mixed_elements_are_refused():
    from milkit import Builder as mb

    with pytest.raises(TypeError, match="share one type"):
        @mb.program(input_specs=[mb.TensorSpec(shape=(2,))])
        def prog(x):
            return mb.classify(probabilities=x, classes=mb.const(val=milkit.mil_list(["a", 1])))


# ---- the package, against coremltools -----------------------------------------------------------


def _softmax(mb, x):
    return mb.softmax(x=x, axis=-1, name="probs")


def _two_outputs(mb, x):
    p = mb.softmax(x=x, axis=-1, name="probs")
    return mb.relu(x=x, name="r"), p


CASES = {
    "str_fp16": (_softmax, [((1, 3), "fp32")], dict(class_labels=LABELS), "FLOAT16"),
    "int_fp32": (_softmax, [((1, 3), "fp32")], dict(class_labels=INT_LABELS), "FLOAT32"),
    # the probabilities are fp16 outputs: a cast to fp32 named "<var>_cast_to_fp32" is added
    "fp16_input": (_softmax, [((1, 3), "fp16")], dict(class_labels=LABELS), "FLOAT16"),
    # a named probabilities var and a named label; the other output stays after the classifier's
    "named": (_two_outputs, [((1, 3), "fp32")],
              dict(class_labels=LABELS, predicted_feature_name="animal", predicted_probabilities_output="probs"),
              "FLOAT32"),
}


def _convert_both(case, tmp_path, opset="iOS15"):
    ct, _, _, _ = _ct()
    build, specs, cfg, precision = CASES[case]
    cp, mp = _both(build, specs, opset)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = ct.convert(cp, convert_to="mlprogram", minimum_deployment_target=getattr(ct.target, opset),
                        skip_model_load=True, compute_precision=getattr(ct.precision, precision),
                        classifier_config=ct.ClassifierConfig(**cfg))
        mm = milkit.convert(mp, convert_to="mlprogram", minimum_deployment_target=getattr(milkit.target, opset),
                            compute_precision=getattr(milkit.precision, precision),
                            classifier_config=milkit.ClassifierConfig(**cfg))
    cpath = str(tmp_path / "ct.mlpackage")
    cm.save(cpath)
    mpath = str(tmp_path / "mk.mlpackage")
    mm.save(mpath)
    cspec = ct.models.MLModel(cpath, skip_model_load=True).get_spec()
    mspec = ct.models.MLModel(mpath, skip_model_load=True).get_spec()
    return cspec, mspec, cpath, mpath


def _description(spec):
    d = type(spec.description)()
    d.CopyFrom(spec.description)
    d.ClearField("metadata")
    return d


@pytest.mark.parametrize("case", sorted(CASES))
def test_package_matches_coremltools(case, tmp_path):
    cspec, mspec, _, _ = _convert_both(case, tmp_path)
    cf, mf = cspec.mlProgram.functions["main"], mspec.mlProgram.functions["main"]
    assert cf == mf
    # byte for byte (deterministic map order): classes inline as a list literal, no const for them
    assert cf.SerializeToString(deterministic=True) == mf.SerializeToString(deterministic=True)
    ops = cf.block_specializations["CoreML5"].operations
    cls = ops[-1]
    assert cls.type == "classify" and all(op.type != "const" or "classes" not in o.name
                                          for op in ops for o in op.outputs)
    assert cls.inputs["classes"].arguments[0].value.immediateValue.WhichOneof("value") == "list"
    # the description: label (stringType / int64Type), probabilities (dictionaryType), names
    assert _description(cspec) == _description(mspec)
    assert cspec.specificationVersion == mspec.specificationVersion
    name = CASES[case][2].get("predicted_feature_name", "classLabel")
    assert mspec.description.predictedFeatureName == name
    assert mspec.description.predictedProbabilitiesName == name + "_probs"
    out = {o.name: o.type.WhichOneof("Type") for o in mspec.description.output}
    assert out[name] == ("int64Type" if case.startswith("int") else "stringType")
    assert out[name + "_probs"] == "dictionaryType"


def test_class_labels_from_a_file(tmp_path):
    ct, _, _, _ = _ct()
    labels = tmp_path / "labels.txt"
    labels.write_text("cat\ndog\nbird\n")
    cp, mp = _both(_softmax, [((1, 3), "fp32")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = ct.convert(cp, skip_model_load=True, minimum_deployment_target=ct.target.iOS15,
                        classifier_config=ct.ClassifierConfig(str(labels)))
        mm = milkit.convert(mp, minimum_deployment_target=milkit.target.iOS15,
                            classifier_config=milkit.ClassifierConfig(str(labels)))
    assert cm.get_spec().mlProgram.functions["main"] == mm.get_spec().mlProgram.functions["main"]
    assert mm.predict({"x": np.array([[0.0, 2.0, 1.0]], np.float32)})["classLabel"] == "dog"


def test_classifier_config_errors(tmp_path):
    from milkit import Builder as mb

    def prog():
        @mb.program(input_specs=[mb.TensorSpec(shape=(1, 3))], opset_version=milkit.target.iOS15)
        def p(x):
            return mb.softmax(x=x, axis=-1, name="probs")

        return p

    with pytest.raises(ValueError, match="ClassifierConfig"):
        milkit.convert(prog(), classifier_config={"class_labels": LABELS})
    with pytest.raises(ValueError, match="does not exist"):
        milkit.convert(prog(), classifier_config=milkit.ClassifierConfig(str(tmp_path / "nope.txt")))
    with pytest.raises(ValueError, match="'nope'.*does not exist in the MIL program"):
        milkit.convert(prog(), classifier_config=milkit.ClassifierConfig(LABELS, predicted_probabilities_output="nope"))
    with pytest.raises(ValueError, match="number of classes"):
        milkit.convert(prog(), classifier_config=milkit.ClassifierConfig(["a", "b"]))
    with pytest.raises(ValueError, match="integers / strings"):
        milkit.convert(prog(), classifier_config=milkit.ClassifierConfig([1.5, 2.5, 3.5]))


def test_classes_feeding_another_op_cannot_be_written(tmp_path):
    # coremltools' create_block: the classes const of a block-ending classify is inlined, so it
    # may feed nothing else
    ct, _, _, _ = _ct()

    def build(mb, x):
        c = _classes(mb, LABELS)
        n = mb.list_length(ls=c)
        return mb.classify(probabilities=x, classes=c)[0], n

    cp, mp = _both(build, [((1, 3), "fp32")])
    with pytest.raises(ValueError, match="only 1 op"):
        ct.convert(cp, skip_model_load=True, pass_pipeline=ct.PassPipeline.EMPTY)
    with pytest.raises(ValueError, match="only 1 op"):
        milkit.save(mp, tmp_path / "bad.mlpackage")


# ---- reading back ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["str_fp16", "int_fp32", "named"])
def test_coremltools_package_loads_and_saves_back(case, tmp_path):
    ct, _, _, _ = _ct()
    cspec, _, cpath, _ = _convert_both(case, tmp_path)
    prog = milkit.load(cpath)
    ops = prog.functions["main"].operations
    cls = [op for op in ops if op.op_type == "classify"]
    assert len(cls) == 1 and cls[0] is ops[-1] or cls[0].name == ops[-1].name
    classes = cls[0].inputs["classes"]
    want = CASES[case][2]["class_labels"]
    assert [v if isinstance(v, str) else int(v) for v in classes.val] == want
    out = tmp_path / "again.mlpackage"
    milkit.save(prog, out)
    again = ct.models.MLModel(str(out), skip_model_load=True).get_spec()
    assert again.mlProgram.functions["main"] == cspec.mlProgram.functions["main"]
    assert _description(again) == _description(cspec)


def test_milkit_package_loads_in_coremltools(tmp_path):
    from coremltools.converters.mil.frontend.milproto.load import load as milproto_to_pymil

    ct, _, _, _ = _ct()
    for case in ("str_fp16", "int_fp32"):
        _, mspec, _, mpath = _convert_both(case, tmp_path / case)
        m = ct.models.MLModel(mpath, skip_model_load=True)
        back = milproto_to_pymil(m.get_spec(), m.get_spec().specificationVersion, m.weights_dir)
        op = back.functions["main"].operations[-1]
        assert op.op_type == "classify"
        assert [v if isinstance(v, str) else int(v) for v in op.classes.val] == CASES[case][2]["class_labels"]


def test_reader_rejects_a_bad_list_literal(tmp_path):
    ct, _, _, _ = _ct()
    _, _, cpath, _ = _convert_both("str_fp16", tmp_path)
    spec = ct.models.MLModel(cpath, skip_model_load=True).get_spec()
    ops = spec.mlProgram.functions["main"].block_specializations["CoreML5"].operations
    ops[-1].inputs["classes"].arguments[0].value.type.listType.length.constant.size = 5
    bad = tmp_path / "bad.mlmodel"
    bad.write_bytes(spec.SerializeToString())
    with pytest.raises(milkit.FormatError, match="list holds 3 values, its type declares length 5"):
        milkit.load(bad)


# ---- text ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("labels", [LABELS, INT_LABELS], ids=["str", "int64"])
def test_text_round_trip(labels):
    from milkit import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 3))], opset_version=milkit.target.iOS15)
    def prog(x):
        return mb.classify(probabilities=mb.softmax(x=x, axis=-1), classes=_classes(mb, labels))

    exact = milkit.to_text(prog, consts=True)
    assert "List[3, (" in exact and "dict[" in exact
    assert milkit.to_text(milkit.parse(exact), consts=True) == exact
    # coremltools' format: the classes inline
    short = str(prog)
    assert "classes=[" in short
    again = milkit.parse(short)
    assert str(again) == short
    c = again.functions["main"].find_ops(op_type="classify")[0]
    assert [v if isinstance(v, str) else int(v) for v in c.inputs["classes"].val] == labels
    assert c.inputs["classes"].elem_type.__name__ == ("string" if labels is LABELS else "int64")


# ---- predict ------------------------------------------------------------------------------------


def _np_softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


@pytest.mark.parametrize("case", sorted(CASES))
def test_predict_gives_label_and_probabilities(case, tmp_path):
    _, _, cpath, mpath = _convert_both(case, tmp_path)
    build, specs, cfg, precision = CASES[case]
    dt = np.float16 if specs[0][1] == "fp16" else np.float32
    x = np.array([[0.5, 2.0, -1.0]], dt)
    labels = cfg["class_labels"]
    name = cfg.get("predicted_feature_name", "classLabel")
    want = _np_softmax(x.astype(np.float64)[0])
    for path in (mpath, cpath):  # milkit's package, and coremltools' run by milkit's interpreter
        out = milkit.models.MLModel(path).predict({"x": x})
        assert out[name] == labels[1] and type(out[name]) is type(labels[1])
        probs = out[name + "_probs"]
        assert isinstance(probs, dict) and list(probs) == labels
        assert all(type(v) is float for v in probs.values())
        tol = 2e-3 if precision == "FLOAT16" else 1e-6
        np.testing.assert_allclose([probs[k] for k in labels], want, rtol=tol, atol=tol)


def test_run_ties_and_symbolic_size():
    from milkit import Builder as mb

    S = milkit.get_new_symbol("S")

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, S))], opset_version=milkit.target.iOS15)
    def prog(x):
        return mb.classify(probabilities=x, classes=_classes(mb, INT_LABELS))

    out = milkit.run(prog, {"x": np.array([[0.25, 0.5, 0.5]], np.float32)})
    assert out["classify_0_0"] == 3 and type(out["classify_0_0"]) is int  # the first of equal maxima
    assert out["classify_0_1"] == {7: 0.25, 3: 0.5, 11: 0.5}
    with pytest.raises(ValueError, match=r"number of classes \(3\) must match the size of 'probabilities'"):
        milkit.run(prog, {"x": np.zeros((1, 2), np.float32)})


def test_default_pipeline_keeps_a_built_classify(tmp_path):
    # a program built with classify runs through convert's passes and is described as a
    # classifier (coremltools cannot write it without classifier_config: its description has no
    # type for a str output; milkit describes classify's outputs the same way either way)
    from milkit import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 3))], opset_version=milkit.target.iOS15)
    def prog(x):
        label, probs = mb.classify(probabilities=mb.softmax(x=x, axis=-1), classes=LABELS)
        return label, probs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", milkit.SkippedPassesWarning)
        m = milkit.convert(prog, minimum_deployment_target=milkit.target.iOS15)
    spec = m.get_spec()
    assert spec.description.predictedFeatureName == "classify_0_0"
    assert spec.description.predictedProbabilitiesName == "classify_0_1"
    out = m.predict({"x": np.array([[3.0, 1.0, 0.0]], np.float32)})
    assert out["classify_0_0"] == "cat"
    assert os.path.isdir(m.package_path)


@pytest.mark.parametrize("labels", [LABELS, INT_LABELS], ids=["str", "int64"])
def test_classify_not_last_writes_its_classes_const_too(labels, tmp_path):
    # coremltools inlines classify's classes always, and skips their const op only when classify
    # ends the block (as it always does in a classifier); otherwise the const is written with a
    # list value. Deliberate difference: coremltools cannot write that const (its types_to_proto
    # takes the list type itself for the element type of a list of scalars and fails); milkit
    # writes it as MIL.proto defines it, a ListType of rank-0 tensors with an immediate list.
    ct, _, _, _ = _ct()

    def build(mb, x):
        mb.classify(probabilities=x, classes=_classes(mb, labels))
        return mb.relu(x=x)

    cp, mp = _both(build, [((1, 3), "fp32")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mm = milkit.convert(mp, minimum_deployment_target=milkit.target.iOS15,
                            compute_precision=milkit.precision.FLOAT32, pass_pipeline=milkit.PassPipeline.EMPTY)
        with pytest.raises(ValueError, match="Unknown map from SSA type"):
            ct.convert(cp, skip_model_load=True, minimum_deployment_target=ct.target.iOS15,
                       compute_precision=ct.precision.FLOAT32, pass_pipeline=ct.PassPipeline.EMPTY)
    mf = mm.get_spec().mlProgram.functions["main"]
    ops = mf.block_specializations["CoreML5"].operations
    assert [op.type for op in ops] == ["const", "classify", "relu"]
    assert ops[0].attributes["val"].immediateValue.WhichOneof("value") == "list"
    assert ops[0].outputs[0].type.listType.type.tensorType.rank == 0
    back = milkit.load(mm.package_path)
    c = back.find_ops(op_type="const")[0].outputs[0]
    assert [v if isinstance(v, str) else int(v) for v in c.val] == labels
    assert c.elem_type.__name__ == ("string" if labels is LABELS else "int64")
