"""EnumeratedShapes in milkit.convert's `inputs`, against coremltools.convert (milinternal)."""

import warnings

import milkit
import pytest
from support.parity import _build, _ct, _make_symbols, reset_ct_names


def _progs(shape, opset="iOS17"):
    specs = [(shape, "fp32")]
    symtab = _make_symbols(specs)
    reset_ct_names()
    build = lambda mb, x: mb.relu(x=x)  # noqa: E731
    return _build("ct", build, specs, opset, symtab), _build("mk", build, specs, opset, symtab)


def _convert(cp, mp, opset, shapes, default=None):
    ct, _, _, _ = _ct()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = ct.convert(cp, minimum_deployment_target=getattr(ct.target, opset), skip_model_load=True,
                        compute_precision=ct.precision.FLOAT32, pass_pipeline=ct.PassPipeline.EMPTY,
                        inputs=[ct.TensorType(name="x", shape=ct.EnumeratedShapes(shapes=shapes, default=default))])
        mm = milkit.convert(mp, minimum_deployment_target=getattr(milkit.target, opset), skip_model_load=True,
                            compute_precision=milkit.precision.FLOAT32, pass_pipeline=milkit.PassPipeline.EMPTY,
                            inputs=[milkit.TensorType(name="x", shape=milkit.EnumeratedShapes(shapes=shapes,
                                                                                              default=default))])
    return cm.get_spec(), mm.get_spec()


CASES = [
    ([(1, 4, 8), (1, 6, 8), (1, 4, 8)], (1, 6, 8)),   # duplicate; default not first
    ([(1, 4, 8), (1, 6, 8)], None),                   # default = the first shape
    ([(1, 4, 8), (1, 6, 8)], (1, 2, 8)),              # default not listed: goes first
]


@pytest.mark.parametrize("opset", ["iOS17", "iOS18"])
@pytest.mark.parametrize("shapes,default", CASES)
def test_description_matches_coremltools(opset, shapes, default):
    cs, ms = _convert(*_progs((1, "S", 8), opset), opset, shapes, default)
    assert ms.description.input[0].SerializeToString() == cs.description.input[0].SerializeToString()
    assert ms.description.output[0].SerializeToString() == cs.description.output[0].SerializeToString()
    fn = lambda s: s.mlProgram.functions["main"].inputs[0].SerializeToString()  # noqa: E731
    assert fn(ms) == fn(cs)
    at = ms.description.input[0].type.multiArrayType
    assert at.WhichOneof("ShapeFlexibility") == "enumeratedShapes"
    assert list(at.shape) == list(default or shapes[0])


def test_two_symbolic_dims_match_coremltools():
    shapes = [(1, 4, 8), (2, 6, 8), (3, 6, 8)]
    cs, ms = _convert(*_progs(("B", "S", 8), "iOS18"), "iOS18", shapes)
    assert ms.description.input[0].SerializeToString() == cs.description.input[0].SerializeToString()


def test_static_program_input_is_described_as_is():
    # coremltools (milinternal) ignores the enumeration when the program's input is static
    cs, ms = _convert(*_progs((1, 4, 8)), "iOS17", [(1, 4, 8), (1, 6, 8)], (1, 6, 8))
    assert ms.description.input[0].SerializeToString() == cs.description.input[0].SerializeToString()
    assert ms.description.input[0].type.multiArrayType.WhichOneof("ShapeFlexibility") is None
    _, mp = _progs((1, 4, 8))
    with pytest.warns(UserWarning, match="static"):
        milkit.convert(mp, minimum_deployment_target=milkit.target.iOS17, pass_pipeline=milkit.PassPipeline.EMPTY,
                       inputs=[milkit.TensorType(name="x", shape=milkit.EnumeratedShapes([(1, 4, 8), (1, 6, 8)]))])


def test_enumerated_shapes_errors():
    ct, _, _, _ = _ct()
    for make in (ct.EnumeratedShapes, milkit.EnumeratedShapes):
        with pytest.raises(ValueError, match="len >= 2"):
            make(shapes=[(1, 2)])
        with pytest.raises(ValueError, match="list or tuple"):
            make(shapes=[(1, 2), (1, 3)], default=5)
    with pytest.raises(ValueError, match="positive ints"):
        milkit.EnumeratedShapes([(1, 0), (1, 2)])
    # shapes must fit the program's input (coremltools does not check)
    _, mp = _progs((1, "S", 8))
    with pytest.raises(ValueError, match="rank"):
        milkit.convert(mp, minimum_deployment_target=milkit.target.iOS17,
                       inputs=[milkit.TensorType(name="x", shape=milkit.EnumeratedShapes([(1, 4), (1, 6)]))])
    _, mp = _progs((1, "S", 8))
    with pytest.raises(ValueError, match="static dim 8"):
        milkit.convert(mp, minimum_deployment_target=milkit.target.iOS17,
                       inputs=[milkit.TensorType(name="x", shape=milkit.EnumeratedShapes([(1, 4, 8), (1, 6, 9)]))])
