"""The recurrent, random, attention and quantization ops in packages: each op is built, converted (as
coremltools converts the same program: the same proto ops and weights), saved, loaded (by milkit and
by coremltools' loader, which re-runs type inference) and predicted (the same numbers as milkit.run
of the built program)."""

from __future__ import annotations

import os
import warnings
from typing import Any, Callable

import milkit as ct
import numpy as np
import pytest

RNG = np.random.default_rng(0)
F = np.float32


def _w(*shape: int, dtype: Any = F) -> np.ndarray:
    return RNG.uniform(-0.5, 0.5, shape).astype(dtype)


L_IH, L_HH, L_B, L_P = _w(12, 4), _w(12, 3), _w(12), _w(9)
L_IH2, L_HH2 = _w(12, 4), _w(12, 3)
G_IH, G_HH, G_B, G_IB = _w(9, 4), _w(9, 3), _w(9), _w(9)
R_IH, R_HH = _w(3, 4), _w(3, 3)
K, V = _w(2, 5, 8), _w(2, 5, 6)
MASK = RNG.random((3, 5)) > 0.3
MASK[:, 0] = True
WQ = RNG.integers(-128, 128, (5, 4)).astype(np.int8)

X3 = ((("S", 2, 4), "fp32"), (("S", 2, 4), F))
H = (((2, 3), "fp32"), ((2, 3), F))
H6 = (((2, 6), "fp32"), ((2, 6), F))

# name -> (opset, build(mb, *inputs), [(spec shape, spec dtype)], [concrete input shapes / dtypes])
CASES: dict[str, tuple[str, Callable[..., Any], list, list]] = {
    "lstm": ("iOS15", lambda mb, x, h, c: mb.lstm(x=x, initial_h=h, initial_c=c, weight_ih=L_IH, weight_hh=L_HH,
                                                  bias=L_B, peephole=L_P, clip=F(1.0), output_sequence=True),
             [X3, H, H]),
    "lstm_bidirectional": ("iOS17", lambda mb, x, h, c: mb.lstm(
        x=x, initial_h=h, initial_c=c, weight_ih=L_IH, weight_hh=L_HH, weight_ih_back=L_IH2, weight_hh_back=L_HH2,
        direction="bidirectional"), [X3, H6, H6]),
    "gru": ("iOS15", lambda mb, x, h: mb.gru(x=x, initial_h=h, weight_ih=G_IH, weight_hh=G_HH, bias=G_B,
                                             direction="reverse", output_sequence=True), [X3, H]),
    "gru_ios18": ("iOS18", lambda mb, x, h: mb.gru(x=x, initial_h=h, weight_ih=G_IH, weight_hh=G_HH, bias=G_B,
                                                   input_bias=G_IB, reset_after=True), [X3, H]),
    "rnn": ("iOS15", lambda mb, x, h: mb.rnn(x=x, initial_h=h, weight_ih=R_IH, weight_hh=R_HH, activation="relu",
                                             output_sequence=True), [X3, H]),
    "random_bernoulli": ("iOS15", lambda mb, x: mb.add(x=x, y=mb.random_bernoulli(shape=mb.shape(x=x), prob=F(0.3),
                                                                                   seed=5)), [X3]),
    "random_normal": ("iOS15", lambda mb, x: mb.random_normal(shape=[3, 4], mean=F(1), stddev=F(2), seed=6), [X3]),
    "random_uniform": ("iOS16", lambda mb, x: mb.add(x=x, y=mb.random_uniform(shape=mb.shape(x=x), low=F(-1),
                                                                               high=F(1), seed=7)), [X3]),
    "random_categorical": ("iOS17", lambda mb, x: mb.random_categorical(x=x, size=3, seed=8), [X3]),
    "scaled_dot_product_attention": ("iOS18", lambda mb, q: mb.scaled_dot_product_attention(
        query=q, key=K, value=V, attn_mask=MASK), [(((2, 3, 8), "fp32"), ((2, 3, 8), F))]),
    "quantize": ("iOS17", lambda mb, x: mb.quantize(input=x, scale=np.array([0.01, 0.02], F), axis=1,
                                                    zero_point=np.array([3, -3], np.int8), output_dtype="int8"), [X3]),
    "dequantize": ("iOS17", lambda mb, x: mb.dequantize(input=mb.quantize(input=x, scale=F(0.01),
                                                                          output_dtype="uint8", zero_point=np.uint8(128)),
                                                        scale=F(0.01), zero_point=np.uint8(128)), [X3]),
}


def _feed(case: list) -> list[np.ndarray]:
    out = []
    for i, (_, (shape, dtype)) in enumerate(case):
        shape = tuple(4 if d == "S" else d for d in shape)
        out.append(np.random.default_rng(i).uniform(-1, 1, shape).astype(dtype))
    return out


def _build(kind: str, name: str) -> Any:
    from support.parity import _build, _make_symbols, reset_ct_names

    opset, build, case = CASES[name]
    specs = [s for s, _ in case]
    reset_ct_names()
    return _build(kind, build, specs, opset, _make_symbols(specs))


@pytest.mark.parametrize("name", list(CASES))
def test_convert_save_load_predict(name: str, tmp_path: Any) -> None:
    import coremltools
    from coremltools.converters.mil.frontend.milproto.load import load as milproto_to_pymil

    opset, _, case = CASES[name]
    target = getattr(ct.target, opset)
    prog = _build("mk", name)
    feed = dict(zip(prog.functions["main"].inputs, _feed(case)))
    want = ct.run(prog, feed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = ct.convert(prog, minimum_deployment_target=target, compute_precision=ct.precision.FLOAT32)
    path = tmp_path / f"{name}.mlpackage"
    model.save(path)
    back = ct.load(path)
    back.validate()
    op_types = {op.op_type for op in back.find_ops()}
    assert name.split("_ios")[0].replace("_bidirectional", "").replace("_weight", "") in op_types
    got = ct.models.MLModel(path).predict(feed)
    assert list(got) == list(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=1e-6, err_msg=k)
    # coremltools' loader re-runs its type inference on every op of the package
    m = coremltools.models.MLModel(str(path), skip_model_load=True)
    spec = m.get_spec()
    ct_prog = milproto_to_pymil(spec, spec.specificationVersion, m.weights_dir)
    assert {op.op_type for op in ct_prog.functions["main"].operations} == op_types


def _proto_ops(model: Any) -> list:
    fn = model.get_spec().mlProgram.functions["main"]
    blk = fn.block_specializations[fn.opset]
    return [(o.type, [x.name for x in o.outputs], {k: [b.name for b in a.arguments] for k, a in o.inputs.items()})
            for o in blk.operations]


def _weights(model: Any) -> bytes | None:
    path = os.path.join(model.weights_dir, "weight.bin")
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return f.read()


def _convert_both(name: str, **kw: Any) -> tuple[Any, Any]:
    from support.parity import _ct

    ctm = _ct()[0]
    opset = CASES[name][0]
    cp, mp = _build("ct", name), _build("mk", name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = ctm.convert(cp, minimum_deployment_target=getattr(ctm.target, opset), skip_model_load=True,
                         **{k: (getattr(ctm.precision, v) if k == "compute_precision" else getattr(ctm.PassPipeline, v))
                            for k, v in kw.items()})
        mm = ct.convert(mp, minimum_deployment_target=getattr(ct.target, opset),
                        **{k: (getattr(ct.precision, v) if k == "compute_precision" else getattr(ct.PassPipeline, v))
                           for k, v in kw.items()})
    return cm, mm


@pytest.mark.parametrize("name", list(CASES))
def test_converts_like_coremltools(name: str) -> None:
    """FLOAT32 + EMPTY: the same proto ops (types, outputs, input bindings) and weights."""
    cm, mm = _convert_both(name, compute_precision="FLOAT32", pass_pipeline="EMPTY")
    assert _proto_ops(mm) == _proto_ops(cm)
    assert _weights(mm) == _weights(cm)


@pytest.mark.parametrize("name", [n for n in CASES if "quantize" not in n])
def test_converts_fp16_like_coremltools(name: str) -> None:
    """The default pipeline in FLOAT16: the fp16 pass handles each op as coremltools' does (fp32-only
    iOS15 recurrent ops stay fp32; random ops follow their parameters' dtype)."""
    cm, mm = _convert_both(name, compute_precision="FLOAT16")
    assert _proto_ops(mm) == _proto_ops(cm)
    assert _weights(mm) == _weights(cm)


def test_dequantized_weight_needs_dequantize_to_constexpr() -> None:
    """A dequantize of a constant may feed a const input (a linear weight), but the file must bind
    const inputs to consts or constexpr ops: coremltools' dequantize_to_constexpr pass rewrites it
    to constexpr_affine_dequantize; without that pass (EMPTY) both refuse to write the model."""
    from support.parity import _ct

    ctm, cmb = _ct()[:2]

    def build(mb: Any) -> Any:
        target = (ct.target if mb is ct.Builder else ctm.target).iOS17
        return mb.program(input_specs=[mb.TensorSpec(shape=(2, 4))], opset_version=target)(
            lambda x: mb.linear(x=x, weight=mb.dequantize(input=WQ, scale=F(0.01))))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=r"Input weight \(dequantize_0\) must be const or constexpr"):
            ctm.convert(build(cmb), minimum_deployment_target=ctm.target.iOS17, skip_model_load=True,
                        pass_pipeline=ctm.PassPipeline.EMPTY)
        with pytest.raises(ValueError, match=r"linear 'linear_0'.*input 'weight' \(dequantize_0\) must be const or "
                                             r"constexpr"):
            ct.convert(build(ct.Builder), minimum_deployment_target=ct.target.iOS17,
                       pass_pipeline=ct.PassPipeline.EMPTY)
