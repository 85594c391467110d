"""iOS18 states: read_state / coreml_update_state against coremltools, and their round trip
through .mlpackage files (milkit.save / milkit.load / milkit.convert vs coremltools)."""

import warnings

import milkit
import numpy as np
import pytest
from support.parity import _build, _ct, _make_symbols, check, check_error, reset_ct_names

STATE = [((2, 3), "fp16", "state"), ((2, 3), "fp16")]


def test_update_state_parity_every_opset():
    # a dialect op: available at every opset, like coremltools
    check(lambda mb, s, x: mb.coreml_update_state(state=s, value=x), STATE, opsets=("iOS15", "iOS17", "iOS18"))


def test_read_state_parity():
    def build(mb, s, x):
        u = mb.coreml_update_state(state=s, value=mb.relu(x=x))
        return mb.add(x=u, y=mb.read_state(input=s))

    [res] = check(build, STATE, opsets=("iOS18",))
    ops = [o.op_type for o in res.mk_prog.functions["main"].operations]
    assert ops == ["relu", "coreml_update_state", "read_state", "add"]
    out = res.mk_prog.functions["main"].outputs[0]
    assert out.shape == (2, 3) and out.dtype is milkit.types.fp16


def test_state_dtypes_parity():
    for dt in ("fp32", "int32", "bool"):
        check(lambda mb, s, x: mb.coreml_update_state(state=s, value=x), [((4,), dt, "state"), ((4,), dt)],
              opsets=("iOS18",))


def test_state_errors_parity():
    # read_state is iOS18
    check_error(lambda mb, s, x: mb.read_state(input=s), STATE, opset="iOS17")
    # the value must have the wrapped shape and dtype
    check_error(lambda mb, s, x: mb.coreml_update_state(state=s, value=mb.reshape(x=x, shape=[3, 2])), STATE,
                opset="iOS18", match="not matched")
    check_error(lambda mb, s, x: mb.coreml_update_state(state=s, value=mb.cast(x=x, dtype="fp32")), STATE,
                opset="iOS18", match="not matched")
    # a state is not a tensor, a tensor is not a state
    check_error(lambda mb, s, x: mb.read_state(input=x), STATE, opset="iOS18")
    check_error(lambda mb, s, x: mb.relu(x=s), STATE, opset="iOS18")
    # int64 is outside the value domain
    check_error(lambda mb, s, x: mb.coreml_update_state(state=s, value=x), [((2,), "int64", "state"), ((2,), "int64")],
                opset="iOS18")


def _kv_cache(mb, k_cache, v_cache, x):  # the harness names the inputs x, x1, x2
    """A KV-cache step: shift the cache, append x, attend over it; the v update is unused."""
    cur = mb.read_state(input=k_cache, name="k_read")
    kept = mb.slice_by_index(x=cur, begin=[0, 1, 0], end=[1, 4, 8], name="k_keep")
    new = mb.concat(values=[kept, x], axis=1, name="k_new")
    k = mb.coreml_update_state(state=k_cache, value=new, name="k_update")
    mb.coreml_update_state(state=v_cache, value=new, name="v_update")
    return mb.matmul(x=x, y=k, transpose_y=True, name="scores")


KV_SPECS = [((1, 4, 8), "fp16", "state"), ((1, 4, 8), "fp16", "state"), ((1, 1, 8), "fp16")]


def _programs(build=_kv_cache, specs=KV_SPECS, opset="iOS18"):
    symtab = _make_symbols(specs)
    reset_ct_names()
    return _build("ct", build, specs, opset, symtab), _build("mk", build, specs, opset, symtab)


def _op_rows(spec):
    fn = spec.mlProgram.functions["main"]
    blk = fn.block_specializations[fn.opset]
    return [(op.type, op.attributes["name"].immediateValue.tensor.strings.values[0],
             {k: [a.name for a in v.arguments] for k, v in op.inputs.items()},
             [(o.name, o.type.SerializeToString()) for o in op.outputs]) for op in blk.operations]


def _desc(spec):
    d = spec.description
    return ([f.SerializeToString() for f in d.input], [f.SerializeToString() for f in d.output],
            [f.SerializeToString() for f in d.state])


def _fn_inputs(spec):
    return [i.SerializeToString() for i in spec.mlProgram.functions["main"].inputs]


def _ct_convert(prog, **kw):
    ct, _, _, _ = _ct()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS18, skip_model_load=True,
                          compute_precision=ct.precision.FLOAT32, pass_pipeline=ct.PassPipeline.EMPTY, **kw)


def _mk_convert(prog, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kw.setdefault("pass_pipeline", milkit.PassPipeline.EMPTY)
        return milkit.convert(prog, minimum_deployment_target=milkit.target.iOS18, skip_model_load=True,
                              compute_precision=milkit.precision.FLOAT32, **kw)


def test_milkit_saved_stateful_package_opens_in_coremltools(tmp_path):
    ct, _, _, _ = _ct()
    from coremltools.converters.mil.frontend.milproto.load import load as milproto_to_pymil

    _, mp = _programs()
    milkit.save(mp, tmp_path / "kv.mlpackage", minimum_deployment_target=milkit.target.iOS18)
    m = ct.models.MLModel(str(tmp_path / "kv.mlpackage"), skip_model_load=True)
    spec = m.get_spec()
    assert spec.specificationVersion == 9
    assert [s.name for s in spec.description.state] == ["x", "x1"]
    assert [i.name for i in spec.description.input] == ["x2"]
    st = spec.description.state[0].type.stateType.arrayType
    assert list(st.shape) == [1, 4, 8] and st.dataType == ct.proto.FeatureTypes_pb2.ArrayFeatureType.FLOAT16
    rows = _op_rows(spec)
    assert [(r[0], r[1]) for r in rows if "state" in r[0]] == [
        ("read_state", "k_read"), ("write_state", "k_update_write_state"), ("read_state", "k_update"),
        ("write_state", "v_update_write_state")]
    assert spec.mlProgram.functions["main"].inputs[0].type.WhichOneof("type") == "stateType"
    prog = milproto_to_pymil(spec, spec.specificationVersion, m.weights_dir)
    ops = [o.op_type for o in prog.functions["main"].operations if o.op_type != "const"]
    assert ops == ["read_state", "slice_by_index", "concat", "coreml_update_state", "coreml_update_state", "matmul"]
    # and milkit reads it back to the same program
    back = milkit.load(tmp_path / "kv.mlpackage")
    back.validate()
    assert [(o.op_type, o.name) for o in back.functions["main"].operations] == \
        [(o.op_type, o.name) for o in mp.functions["main"].operations]


def test_coremltools_stateful_package_round_trips(tmp_path):
    cp, _ = _programs()
    cm = _ct_convert(cp)
    cm.save(str(tmp_path / "ct.mlpackage"))
    prog = milkit.load(tmp_path / "ct.mlpackage")
    ops = [o.op_type for o in prog.functions["main"].operations if o.op_type != "const"]
    assert ops == ["read_state", "slice_by_index", "concat", "coreml_update_state", "coreml_update_state", "matmul"]
    milkit.save(prog, tmp_path / "mk.mlpackage", minimum_deployment_target=milkit.target.iOS18)
    cs = cm.get_spec()
    ct, _, _, _ = _ct()
    ms = ct.models.MLModel(str(tmp_path / "mk.mlpackage"), skip_model_load=True).get_spec()
    assert _op_rows(ms) == _op_rows(cs)
    assert _desc(ms) == _desc(cs)
    assert _fn_inputs(ms) == _fn_inputs(cs)


def test_convert_matches_coremltools_op_for_op():
    cp, mp = _programs()
    cs, ms = _ct_convert(cp).get_spec(), _mk_convert(mp).get_spec()
    assert ms.specificationVersion == cs.specificationVersion == 9
    assert _op_rows(ms) == _op_rows(cs)
    assert _desc(ms) == _desc(cs)
    assert _fn_inputs(ms) == _fn_inputs(cs)


def test_convert_unused_update_survives_default_pipeline():
    # dead code elimination must keep the state writes
    _, mp = _programs()
    ms = _mk_convert(mp, pass_pipeline=None).get_spec()
    types = [r[0] for r in _op_rows(ms)]
    assert types.count("write_state") == 2


def test_state_writer_errors():
    # fp16 only, like coremltools
    specs = [((4,), "fp32", "state"), ((4,), "fp32")]
    cp, mp = _programs(lambda mb, s, x: mb.coreml_update_state(state=s, value=x), specs)
    with pytest.raises(ValueError, match="State only support fp16 dtype"):
        _ct_convert(cp)
    with pytest.raises(ValueError, match="State only support fp16 dtype. Got input var x with dtype fp32"):
        _mk_convert(mp)
    # states need iOS18
    _, mp = _programs(lambda mb, s, x: mb.coreml_update_state(state=s, value=x), STATE, opset=None)
    with pytest.raises(ValueError, match="iOS18"):
        milkit.convert(mp, minimum_deployment_target=milkit.target.iOS17, compute_precision=milkit.precision.FLOAT32,
                       pass_pipeline=milkit.PassPipeline.EMPTY)


def test_unmerged_write_state_reads_back_by_name(tmp_path):
    # a write_state with no read_state after it keeps the original op name
    _, mp = _programs(lambda mb, s, x: (mb.coreml_update_state(state=s, value=x, name="upd"), mb.relu(x=x))[1], STATE)
    milkit.save(mp, tmp_path / "u.mlpackage", minimum_deployment_target=milkit.target.iOS18)
    back = milkit.load(tmp_path / "u.mlpackage")
    assert [(o.op_type, o.name) for o in back.functions["main"].operations] == [
        ("coreml_update_state", "upd"), ("relu", "relu_0")]
    np.testing.assert_equal(len(back.functions["main"].inputs), 2)
