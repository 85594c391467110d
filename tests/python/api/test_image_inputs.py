"""Image inputs and outputs (milkit.ImageType, milkit.colorlayout) against coremltools 9: the passes
common::image_input_preprocess and mil_backend::insert_image_preprocessing_ops op for op, the model
description convert writes, predict with PIL images, and loading packages back."""

import warnings

import milkit
import numpy as np
import pytest
from milkit.passes import apply_passes
from support.parity import _build, _ct, _make_symbols, compare_programs
from support.pass_parity import assert_inputs_equal, assert_values_exact, build_both, ct_run, op_types

PRE = "common::image_input_preprocess"
INS = "mil_backend::insert_image_preprocessing_ops"


def _image_type(lib, im):
    """A ct.ImageType / milkit.ImageType from a dict; shape dims ("R", lo, hi, default) are RangeDims,
    {"enum": [...], "default": ...} is EnumeratedShapes."""
    kw = dict(im)
    kw["color_layout"] = getattr(lib.colorlayout, kw.get("color_layout", "RGB"))
    shape = kw.get("shape")
    if isinstance(shape, dict):
        kw["shape"] = lib.EnumeratedShapes(shapes=shape["enum"], default=shape.get("default"))
    elif shape is not None and any(isinstance(d, tuple) for d in shape):
        kw["shape"] = lib.Shape([lib.RangeDim(d[1], d[2], default=d[3]) if isinstance(d, tuple) else d for d in shape])
    return lib.ImageType(**kw)


def _pass_both(build, specs, images, opset="iOS17", names=(PRE, INS)):
    """Builds with both libraries, marks the image inputs, runs the passes in both and compares op
    for op; returns (coremltools program, milkit program, milkit program before the passes)."""
    ct = _ct()[0]
    cp, mp, syms = build_both(build, specs, opset)
    before = _build("mk", build, specs, opset, _make_symbols(specs))
    # coremltools' milinternal frontend turns channel_first=None into True before the passes
    cp.functions["main"].set_input_types(tuple(_image_type(ct, {"channel_first": True, **im}) for im in images))
    mp.functions["main"].set_input_types([_image_type(milkit, im) for im in images])
    before.functions["main"].set_input_types([_image_type(milkit, im) for im in images])
    ct_run(cp, list(names))
    apply_passes(mp, list(names), verify_each=True)
    try:
        compare_programs(cp, mp, syms)
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- coremltools:{cp}\n--- milkit:{mp}") from None
    assert_values_exact(cp, mp)
    assert_inputs_equal(cp, mp)
    for cv, mv in zip(cp.functions["main"].inputs.values(), mp.functions["main"].inputs.values()):
        assert [d if isinstance(d, int) else str(d) for d in cv.shape] == \
               [d if isinstance(d, int) else str(d) for d in mv.shape]
    mp.validate()
    return cp, mp, before


def _reference_feed(images, feed, names):
    """What the program before the passes reads when Core ML feeds `feed` (NCHW images)."""
    out = dict(feed)
    for im in images:
        x = feed[im["name"]].astype(np.float64)
        gray = im.get("color_layout", "RGB").startswith("GRAY")
        bias = np.asarray(im.get("bias", 0.0 if gray else [0.0, 0.0, 0.0]), np.float64)
        if not gray:
            bias = bias.reshape((3, 1, 1))
        y = x * im.get("scale", 1.0) + bias
        if im.get("channel_first") is False:
            r = y.ndim
            y = y.transpose(list(range(r - 3)) + [r - 2, r - 1, r - 3])
        out[im["name"]] = y.astype(feed[im["name"]].dtype)
    return out


def _check_numbers(before, after, images, sizes=None, rtol=1e-5):
    """The program after the passes, fed NCHW pixels, computes what the one before computes on the
    scaled, biased (and NHWC-transposed) pixels (a numpy computation)."""
    rng = np.random.default_rng(0)
    feed = {}
    for name, v in after.functions["main"].inputs.items():
        shape = [d if isinstance(d, int) else (sizes or {}).get(str(d), 4) for d in v.shape]
        dt = np.float16 if v.dtype.__name__ == "fp16" else np.float32
        feed[name] = rng.integers(0, 256, size=shape).astype(dt)
    got = milkit.run(after, feed)
    want = milkit.run(before, _reference_feed(images, feed, list(feed)))
    assert len(got) == len(want)
    for g, w in zip(got.values(), want.values()):  # by position: a returned input is renamed
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=rtol)


# ---- the passes, op for op -------------------------------------------------------------------

def _conv_like(mb, x):
    return mb.relu(x=mb.add(x=x, y=1.0)), mb.reduce_mean(x=x, axes=[1])


CASES = {
    "rgb_nchw": ([((1, 3, 4, 5), "fp32")], [dict(name="x", shape=(1, 3, 4, 5), scale=2.0, bias=[1.0, 2.0, 3.0])]),
    "bgr_nhwc": ([((1, 4, 5, 3), "fp32")], [dict(name="x", shape=(1, 4, 5, 3), scale=1 / 255.0,
                                                 bias=[-0.5, -0.25, 0.125], color_layout="BGR",
                                                 channel_first=False)]),
    "gray_scale_only": ([((1, 1, 4, 5), "fp32")], [dict(name="x", shape=(1, 1, 4, 5), scale=0.5,
                                                        color_layout="GRAYSCALE")]),
    "gray_bias_only": ([((1, 1, 4, 5), "fp32")], [dict(name="x", shape=(1, 1, 4, 5), bias=10.0,
                                                       color_layout="GRAYSCALE")]),
    "rgb_bias_one_channel": ([((1, 3, 4, 5), "fp32")], [dict(name="x", bias=[0.0, 0.0, 7.0])]),
    "rgb_rank3": ([((3, 4, 5), "fp32")], [dict(name="x", scale=3.0, bias=[1.0, 2.0, 3.0])]),
    "nhwc_no_scale": ([((1, 4, 5, 3), "fp32")], [dict(name="x", shape=(1, 4, 5, 3), channel_first=False)]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_passes_match_coremltools(case):
    specs, images = CASES[case]
    _, mp, before = _pass_both(_conv_like, specs, images)
    _check_numbers(before, mp, images)


def test_gray_fp16_consts_take_the_input_dtype():
    images = [dict(name="x", shape=(1, 1, 4, 5), scale=2.0, bias=1.5, color_layout="GRAYSCALE_FLOAT16")]
    cp, mp, before = _pass_both(lambda mb, x: mb.relu(x=x), [((1, 1, 4, 5), "fp16")], images, opset="iOS16")
    ops = {o.name: o for o in mp.functions["main"].operations}
    assert ops["x__scaled__"].outputs[0].dtype.__name__ == "fp16"
    assert ops["x__biased___y_0"].outputs[0].val.dtype == np.float16
    _check_numbers(before, mp, images, rtol=1e-2)


def test_two_images_in_the_order_given():
    # the preprocessing ops follow the order of `inputs`; each transpose goes before the current
    # first op (the transpose of the input given later comes first)
    specs = [((1, 4, 5, 3), "fp32"), ((2, 3), "fp32"), ((1, 6, 7, 1), "fp32")]

    def build(mb, x, x1, x2):
        return mb.reduce_sum(x=x, axes=[1, 2]), mb.relu(x=x1), mb.reduce_sum(x=x2, axes=[1, 2])

    images = [dict(name="x2", shape=(1, 6, 7, 1), scale=4.0, bias=2.0, color_layout="GRAYSCALE", channel_first=False),
              dict(name="x", shape=(1, 4, 5, 3), scale=2.0, bias=[1.0, 2.0, 3.0], color_layout="BGR",
                   channel_first=False)]
    _, mp, before = _pass_both(build, specs, images)
    names = [o.name for o in mp.functions["main"].operations if o.op_type != "const"]
    assert names[:6] == ["x2__scaled__", "x2__biased__", "x__scaled__", "x__biased__",
                         "x__transpose_from_nchw__", "x2__transpose_from_nchw__"]
    _check_numbers(before, mp, images)


def test_input_that_is_also_an_output():
    # deliberate difference: coremltools replaces the function output with the new var renamed to
    # the input's name, so input and output share the name "x" (its own convert then fails in
    # dedup_op_and_var_names); milkit keeps the new var's name
    ct = _ct()[0]
    images = [dict(name="x", shape=(1, 4, 5, 3), scale=2.0, bias=[1.0, 1.0, 1.0], channel_first=False)]
    build = lambda mb, x: (x, mb.relu(x=x))  # noqa: E731
    specs = [((1, 4, 5, 3), "fp32")]
    cp, mp, _ = build_both(build, specs)
    before = _build("mk", build, specs, "iOS17", {})
    cp.functions["main"].set_input_types(tuple(_image_type(ct, im) for im in images))
    for p in (mp, before):
        p.functions["main"].set_input_types([_image_type(milkit, im) for im in images])
    ct_run(cp, [PRE, INS])
    apply_passes(mp, [PRE, INS], verify_each=True)
    ops = lambda p: [(o.op_type, o.name) for o in p.functions["main"].operations]  # noqa: E731
    assert ops(mp) == ops(cp)
    assert [v.name for v in cp.functions["main"].outputs] == ["x", "relu_0"]
    assert [v.name for v in mp.functions["main"].outputs] == ["x__transpose_from_nchw__", "relu_0"]
    _check_numbers(before, mp, images)


def test_symbolic_nhwc_input():
    images = [dict(name="x", shape=(1, ("R", 2, 8, 4), ("R", 3, 9, 5), 3), scale=0.5, channel_first=False)]
    cp, mp, before = _pass_both(_conv_like, [((1, "H", "W", 3), "fp32")], images)
    ct_type = cp.functions["main"].input_types[0]
    mk_type = mp.functions["main"].image_inputs["x"]
    assert ct_type.channel_first and mk_type.channel_first
    assert list(ct_type.shape.default) == [1, 3, 4, 5] == list(mk_type.shape_default)
    _check_numbers(before, mp, images, sizes={"H": 6, "W": 7})


def test_enumerated_nhwc_shapes_are_transposed():
    shapes = [(1, 4, 5, 3), (1, 6, 7, 3)]
    images = [dict(name="x", shape={"enum": shapes, "default": (1, 6, 7, 3)}, channel_first=False)]
    cp, mp, _ = _pass_both(_conv_like, [((1, "H", "W", 3), "fp32")], images)
    ct_shape = cp.functions["main"].input_types[0].shape
    mk_shape = mp.functions["main"].image_inputs["x"].shape
    assert [list(s.shape) for s in ct_shape.shapes] == [list(s) for s in mk_shape.shapes] == [[1, 3, 4, 5],
                                                                                              [1, 3, 6, 7]]
    assert list(ct_shape.default) == list(mk_shape.default) == [1, 3, 6, 7]


def test_passes_leave_other_programs_alone():
    # no image inputs, a channel-first image without scale or bias: nothing changes
    for images in ([], [dict(name="x", shape=(1, 3, 4, 5))], [dict(name="x", color_layout="BGR", scale=1.0)]):
        cp, mp, _ = _pass_both(_conv_like, [((1, 3, 4, 5), "fp32")], images)
        assert op_types(mp) == ["const", "add", "relu", "const", "const", "reduce_mean"]


def test_empty_function_is_left_alone():
    # coremltools skips a function without ops; a channel-last input still becomes channel first
    images = [dict(name="x", shape=(1, 4, 5, 3), scale=2.0, channel_first=False)]
    cp, mp, _ = _pass_both(lambda mb, x: x, [((1, 4, 5, 3), "fp32")], images, names=(INS,))
    assert op_types(mp) == op_types(cp) == []


def test_nhwc_without_shape():
    # coremltools' image_input_preprocess fails on a channel-last ImageType without a shape
    # (UnboundLocalError); milkit takes the shape from the program
    from milkit import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4, 5, 3))])
    def prog(x):
        return mb.relu(x=x)

    before = _build("mk", lambda mb, x: mb.relu(x=x), [((1, 4, 5, 3), "fp32")], "iOS17", {})
    images = [dict(name="x", channel_first=False, scale=3.0)]
    for p in (prog, before):
        p.functions["main"].set_input_types([_image_type(milkit, im) for im in images])
    apply_passes(prog, [PRE, INS], verify_each=True)
    assert tuple(prog.functions["main"].inputs["x"].shape) == (1, 3, 4, 5)
    _check_numbers(before, prog, images)


def test_insert_twice_changes_nothing_more():
    # milkit marks the preprocessing as done (scale 1, no bias) once the ops are in; coremltools,
    # whose pass runs once per convert, would insert them again on a second run
    images = [dict(name="x", scale=2.0, bias=[1.0, 2.0, 3.0])]
    _, mp, _ = _pass_both(_conv_like, [((1, 3, 4, 5), "fp32")], images)
    n = len(op_types(mp))
    apply_passes(mp, [PRE, INS])
    assert len(op_types(mp)) == n
    im = mp.functions["main"].image_inputs["x"]
    assert im.scale == 1.0 and im.bias == [0.0, 0.0, 0.0] and im.color_layout is milkit.colorlayout.RGB


def test_channel_last_needs_rank_3():
    from milkit import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=(4, 3))])
    def prog(x):
        return mb.relu(x=x)

    with pytest.raises(ValueError, match="rank 4"):
        prog.functions["main"].set_input_types([milkit.ImageType(name="x", channel_first=False)])


# ---- ImageType ---------------------------------------------------------------------------------

def test_image_type_like_coremltools():
    ct = _ct()[0]
    for lib in (ct, milkit):
        t = lib.ImageType(name="x", color_layout=lib.colorlayout.GRAYSCALE_FLOAT16)
        assert t.bias == 0.0 and t.scale == 1.0 and t.channel_first is None
        assert lib.ImageType(color_layout="BGR").bias == [0.0, 0.0, 0.0]
        assert lib.ImageType(color_layout="G").color_layout is lib.colorlayout.GRAYSCALE
        with pytest.raises(ValueError, match="color_layout should be an enum"):
            lib.ImageType(color_layout="GRAY")
    assert milkit.ImageType(color_layout=milkit.colorlayout.GRAYSCALE_FLOAT16).dtype is milkit.types.fp16
    assert milkit.ImageType().dtype is None
    assert [c.value for c in milkit.colorlayout] == [c.value for c in ct.colorlayout]
    # coremltools' own enum is accepted too
    assert milkit.ImageType(color_layout=ct.colorlayout.BGR).color_layout is milkit.colorlayout.BGR
    # milkit checks what coremltools takes unchecked and fails on later
    with pytest.raises(ValueError, match="3 floats"):
        milkit.ImageType(bias=0.5)
    with pytest.raises(ValueError, match="must be a float"):
        milkit.ImageType(color_layout=milkit.colorlayout.GRAYSCALE, bias=[0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match="scale must be a float"):
        milkit.ImageType(scale=[1.0, 2.0, 3.0])


# ---- convert: the model description -------------------------------------------------------------

def _both_convert(build, specs, inputs, outputs=None, opset="iOS17", precision="FLOAT16", tmp_path=None):
    """coremltools.convert and milkit.convert of the same program (coremltools ignores `outputs` for
    a MIL program, so its image outputs are set on the function, as its frontends do)."""
    ct = _ct()[0]
    cp, mp, _ = build_both(build, specs, opset)
    if outputs:
        cp.functions["main"].set_output_types([_image_type(ct, o) if o else ct.TensorType() for o in outputs])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = ct.convert(cp, inputs=[_image_type(ct, im) for im in inputs], skip_model_load=True,
                        minimum_deployment_target=getattr(ct.target, opset),
                        compute_precision=getattr(ct.precision, precision))
        mm = milkit.convert(mp, inputs=[_image_type(milkit, im) for im in inputs],
                            outputs=[_image_type(milkit, o) if o else milkit.TensorType() for o in outputs]
                            if outputs else None,
                            minimum_deployment_target=getattr(milkit.target, opset),
                            compute_precision=getattr(milkit.precision, precision))
    assert not {PRE, INS} & set(mm.skipped_passes)
    compare_programs(cm._mil_program, mm.get_program(), set())
    cs = cm.get_spec()
    path = str(tmp_path / "mk.mlpackage")
    mm.save(path)
    ms = ct.models.MLModel(path, skip_model_load=True).get_spec()
    for a, b in ((cs.description.input, ms.description.input), (cs.description.output, ms.description.output)):
        assert [f.SerializeToString() for f in b] == [f.SerializeToString() for f in a], f"{list(b)} != {list(a)}"
    assert ms.mlProgram.functions["main"] == cs.mlProgram.functions["main"]
    return cs, ms, mm, path


DESC_CASES = {
    "rgb": ([((1, 3, 6, 8), "fp32")], [dict(name="x", scale=1 / 255.0, bias=[-1.0, -2.0, -3.0])], None, "iOS15"),
    "bgr_nhwc": ([((1, 6, 8, 3), "fp32")], [dict(name="x", shape=(1, 6, 8, 3), color_layout="BGR",
                                                 channel_first=False, scale=2.0)], None, "iOS16"),
    "gray": ([((1, 1, 6, 8), "fp32")], [dict(name="x", color_layout="GRAYSCALE", bias=3.0)], None, "iOS17"),
    "gray_fp16": ([((1, 1, 6, 8), "fp16")], [dict(name="x", color_layout="GRAYSCALE_FLOAT16", scale=0.5)],
                  None, "iOS16"),
    "ranges": ([((1, 3, "H", "W"), "fp32")],
               [dict(name="x", shape=(1, 3, ("R", 4, 64, 16), ("R", 8, 32, 8)), bias=[1.0, 1.0, 1.0])], None, "iOS17"),
    "ranges_nhwc": ([((1, "H", "W", 1), "fp32")],
                    [dict(name="x", shape=(1, ("R", 4, 64, 16), ("R", 8, 32, 8), 1), color_layout="GRAYSCALE",
                          channel_first=False)], None, "iOS17"),
    "enumerated": ([((1, 3, "H", "W"), "fp32")],
                   [dict(name="x", shape={"enum": [(1, 3, 4, 4), (1, 3, 8, 6), (1, 3, 4, 4)],
                                          "default": (1, 3, 8, 6)})], None, "iOS17"),
    "enumerated_ios18": ([((1, 3, "H", "W"), "fp32")],
                         [dict(name="x", shape={"enum": [(1, 3, 4, 4), (1, 3, 8, 6), (1, 3, 4, 4)],
                                                "default": (1, 3, 2, 2)})], None, "iOS18"),
    "rgb_out": ([((1, 3, 6, 8), "fp32")], [dict(name="x", color_layout="BGR")], [dict(color_layout="RGB"), None],
                "iOS16"),
    "gray_out_flexible": ([((1, 1, "H", "W"), "fp32")], [], [dict(color_layout="GRAYSCALE"), None], "iOS17"),
}


def _relu_mean(mb, x):
    return mb.relu(x=mb.add(x=x, y=x)), mb.reduce_mean(x=x, axes=[2, 3])


@pytest.mark.parametrize("case", sorted(DESC_CASES))
def test_description_matches_coremltools(case, tmp_path):
    specs, inputs, outputs, opset = DESC_CASES[case]
    cs, ms, _, _ = _both_convert(_relu_mean, specs, inputs, outputs, opset=opset, tmp_path=tmp_path)
    if inputs:
        assert ms.description.input[0].type.WhichOneof("Type") == "imageType"
    if outputs:
        assert ms.description.output[0].type.WhichOneof("Type") == "imageType"


def test_gray_fp16_output(tmp_path):
    # GRAYSCALE_FLOAT16 outputs are fp16 (update_output_dtypes casts them, as coremltools does
    # when its frontend sets the output types)
    cs, ms, mm, _ = _both_convert(_relu_mean, [((1, 1, 4, 5), "fp32")], [], [dict(color_layout="GRAYSCALE_FLOAT16"),
                                                                             None],
                                  opset="iOS16", precision="FLOAT32", tmp_path=tmp_path)
    assert mm.get_program().functions["main"].outputs[0].dtype is milkit.types.fp16
    assert ms.description.output[0].type.imageType.colorSpace == 40


def test_image_output_fp16_is_cast_to_fp32(tmp_path):
    # deliberate difference: an RGB output is read as fp32 by Core ML; coremltools writes an fp16
    # program output as is, milkit casts it (as update_output_dtypes does for a TensorType dtype)
    from milkit import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 3, 4, 5), dtype=milkit.types.fp16)],
                opset_version=milkit.target.iOS16)
    def prog(x):
        return mb.relu(x=x)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = milkit.convert(prog, minimum_deployment_target=milkit.target.iOS16,
                           outputs=[milkit.ImageType(name="img", color_layout=milkit.colorlayout.RGB)])
    assert m.get_program().functions["main"].outputs[0].dtype is milkit.types.fp32
    assert m.get_spec().description.output[0].name == "img"


def test_description_errors(tmp_path):
    from milkit import Builder as mb

    def prog_of(shape, dtype=milkit.types.fp32, opset=milkit.target.iOS17):
        @mb.program(input_specs=[mb.TensorSpec(shape=shape, dtype=dtype)], opset_version=opset)
        def prog(x):
            return mb.relu(x=x)

        return prog

    conv = lambda p, **kw: milkit.convert(p, minimum_deployment_target=milkit.target.iOS17, **kw)  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=r"must be of kind \(1, 3, H, W\)"):
            conv(prog_of((1, 4, 5, 6)), inputs=[milkit.ImageType(name="x")])
        with pytest.raises(ValueError, match="must have rank 4"):
            conv(prog_of((3, 5, 6)), inputs=[milkit.ImageType(name="x")])
        with pytest.raises(ValueError, match=r"must be of kind \(1, 1, H, W\)"):
            conv(prog_of((1, 3, 5, 6)), outputs=[milkit.ImageType(color_layout=milkit.colorlayout.GRAYSCALE)])
        # Core ML fills an RGB image as fp32 (coremltools' frontends make such inputs fp32; it does
        # not check a MIL program's input)
        with pytest.raises(ValueError, match="must be fp32 in the program"):
            conv(prog_of((1, 3, 5, 6), milkit.types.fp16), inputs=[milkit.ImageType(name="x")])
        with pytest.raises(ValueError, match="must be fp16 in the program"):
            conv(prog_of((1, 1, 5, 6)),
                 inputs=[milkit.ImageType(name="x", color_layout=milkit.colorlayout.GRAYSCALE_FLOAT16)])
        with pytest.raises(ValueError, match="'scale' must be 1.0"):
            conv(prog_of((1, 3, 5, 6)), outputs=[milkit.ImageType(scale=2.0)])
        with pytest.raises(ValueError, match="'channel_first' must be None"):
            conv(prog_of((1, 3, 5, 6)), outputs=[milkit.ImageType(channel_first=True)])
        with pytest.raises(ValueError, match="no input named"):
            conv(prog_of((1, 3, 5, 6)), inputs=[milkit.ImageType(name="y")])
        # a scale never put into the program cannot be saved (it would be lost)
        p = prog_of((1, 3, 5, 6))
        p.functions["main"].set_input_types([milkit.ImageType(name="x", scale=2.0)])
        with pytest.raises(ValueError, match="not in the program yet"):
            milkit.save(p, str(tmp_path / "never.mlpackage"))
        assert not (tmp_path / "never.mlpackage").exists()
        # a channel-last input left so (no image_input_preprocess) cannot be described
        with pytest.raises(ValueError, match="channel_first format"):
            conv(prog_of((1, 3, 6, 3)), inputs=[milkit.ImageType(name="x", channel_first=False)],
                 pass_pipeline=milkit.PassPipeline.EMPTY)


# ---- predict with PIL images ------------------------------------------------------------------

def _model(build, shape, inputs, outputs=None, dtype=milkit.types.fp32, opset=milkit.target.iOS17, **kw):
    from milkit import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=shape, dtype=dtype)], opset_version=opset)
    def prog(x):
        return build(mb, x)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return milkit.convert(prog, inputs=inputs, outputs=outputs, minimum_deployment_target=opset,
                              compute_precision=milkit.precision.FLOAT32, **kw)


def _rgb(h, w, seed=0):
    from PIL import Image

    a = np.random.default_rng(seed).integers(0, 256, size=(h, w, 3)).astype(np.uint8)
    return Image.fromarray(a, "RGB"), a


@pytest.mark.parametrize("layout", ["RGB", "BGR"])
@pytest.mark.parametrize("channel_first", [None, False])
def test_predict_color_image(layout, channel_first):
    img, a = _rgb(6, 8)
    scale, bias = 1 / 255.0, [-0.5, 0.25, 2.0]
    shape = (1, 3, 6, 8) if channel_first is None else (1, 6, 8, 3)
    m = _model(lambda mb, x: mb.mul(x=x, y=1.0), shape,
               [milkit.ImageType(name="x", scale=scale, bias=bias, color_layout=getattr(milkit.colorlayout, layout),
                                 channel_first=channel_first)])
    out = m.predict({"x": img})
    y = list(out.values())[0]
    chw = a.transpose(2, 0, 1).astype(np.float64)
    if layout == "BGR":
        chw = chw[::-1]
    want = chw * scale + np.array(bias).reshape(3, 1, 1)
    if channel_first is False:
        want = want.transpose(1, 2, 0)
    np.testing.assert_allclose(y[0], want, rtol=1e-6, atol=1e-6)


def test_predict_grayscale_images():
    from PIL import Image

    a = np.random.default_rng(1).integers(0, 256, size=(5, 7)).astype(np.uint8)
    m = _model(lambda mb, x: mb.mul(x=x, y=1.0), (1, 1, 5, 7),
               [milkit.ImageType(name="x", scale=2.0, bias=-3.0, color_layout=milkit.colorlayout.GRAYSCALE)])
    y = list(m.predict({"x": Image.fromarray(a, "L")}).values())[0]
    np.testing.assert_allclose(y[0, 0], a * 2.0 - 3.0)

    f = np.random.default_rng(2).random((5, 7)).astype(np.float32)
    m16 = _model(lambda mb, x: mb.mul(x=x, y=np.float16(1.0)), (1, 1, 5, 7),
                 [milkit.ImageType(name="x", scale=0.5, bias=0.25, color_layout=milkit.colorlayout.GRAYSCALE_FLOAT16)],
                 dtype=milkit.types.fp16, opset=milkit.target.iOS16)
    y16 = list(m16.predict({"x": Image.fromarray(f, "F")}).values())[0]
    want = (f.astype(np.float16).astype(np.float32) * 0.5 + 0.25)
    np.testing.assert_allclose(y16[0, 0].astype(np.float32), want, rtol=2e-3, atol=2e-3)


def test_predict_image_outputs():
    from PIL import Image

    img, a = _rgb(4, 6, seed=3)
    # BGR in, RGB out: the channels come out reversed; values past 255 are clipped
    m = _model(lambda mb, x: (mb.add(x=x, y=0.4), mb.mul(x=mb.slice_by_index(x=x, begin=[0, 0, 0, 0],
                                                                               end=[1, 1, 4, 6]), y=-1.0)),
               (1, 3, 4, 6), [milkit.ImageType(name="x", color_layout=milkit.colorlayout.BGR, bias=[100.0, 0.0, 0.0])],
               outputs=[milkit.ImageType(name="rgb", color_layout=milkit.colorlayout.RGB),
                        milkit.ImageType(name="gray", color_layout=milkit.colorlayout.GRAYSCALE)])
    out = m.predict({"x": img})
    assert out["rgb"].mode == "RGBA" and out["rgb"].size == (6, 4)
    got = np.asarray(out["rgb"])
    bgr = a[:, :, ::-1].astype(np.float64) + np.array([100.0, 0.0, 0.0]) + 0.4
    np.testing.assert_array_equal(got[:, :, :3], np.clip(np.rint(bgr), 0, 255).astype(np.uint8))
    assert (got[:, :, 3] == 255).all()
    assert out["gray"].mode == "L"
    np.testing.assert_array_equal(np.asarray(out["gray"]), np.zeros((4, 6), np.uint8))  # negatives clip to 0

    f = _model(lambda mb, x: mb.mul(x=x, y=0.5), (1, 1, 3, 4), None,
               outputs=[milkit.ImageType(name="f", color_layout=milkit.colorlayout.GRAYSCALE_FLOAT16)],
               opset=milkit.target.iOS16)
    x = np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)
    fo = f.predict({"x": x})["f"]
    assert isinstance(fo, Image.Image) and fo.mode == "F"
    np.testing.assert_allclose(np.asarray(fo), x[0, 0] * 0.5)


def test_predict_checks_images():
    from PIL import Image

    m = _model(lambda mb, x: mb.relu(x=x), (1, 3, 4, 6), [milkit.ImageType(name="x")])
    img, _ = _rgb(4, 6)
    with pytest.raises(TypeError, match="must be of type PIL.Image.Image in the input dict"):
        m.predict({"x": np.zeros((1, 3, 4, 6), np.float32)})
    with pytest.raises(TypeError, match="mode=='RGB'"):
        m.predict({"x": img.convert("L")})
    with pytest.raises(ValueError, match="6x4"):
        m.predict({"x": _rgb(5, 6)[0]})
    g = _model(lambda mb, x: mb.relu(x=x), (1, 1, 4, 6), [milkit.ImageType(name="x", color_layout="G")])
    with pytest.raises(TypeError, match="mode=='L'"):
        g.predict({"x": img})
    assert np.asarray(g.predict({"x": img.convert("L")})[g.get_spec().description.output[0].name]).shape == (1, 1, 4, 6)
    f = _model(lambda mb, x: mb.relu(x=x), (1, 1, 4, 6), [milkit.ImageType(name="x", color_layout=milkit.colorlayout
                                                                            .GRAYSCALE_FLOAT16)],
               dtype=milkit.types.fp16, opset=milkit.target.iOS16)
    with pytest.raises(TypeError, match="mode=='F'"):
        f.predict({"x": img.convert("L")})
    assert isinstance(f.predict({"x": Image.fromarray(np.ones((4, 6), np.float32), "F")}), dict)


def test_predict_flexible_images():
    from milkit import Builder as mb

    H, W = milkit.get_new_symbol(), milkit.get_new_symbol()

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 3, H, W))], opset_version=milkit.target.iOS17)
    def prog(x):
        return mb.relu(x=x)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = milkit.convert(prog, minimum_deployment_target=milkit.target.iOS17, inputs=[milkit.ImageType(
            name="x", shape=milkit.EnumeratedShapes([(1, 3, 4, 6), (1, 3, 8, 10)]), scale=2.0)])
    out = m.predict({"x": _rgb(8, 10)[0]})
    assert list(out.values())[0].shape == (1, 3, 8, 10)
    with pytest.raises(ValueError, match="not one of the model's sizes"):
        m.predict({"x": _rgb(6, 6)[0]})

    H2, W2 = milkit.get_new_symbol(), milkit.get_new_symbol()

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 3, H2, W2))], opset_version=milkit.target.iOS17)
    def prog2(x):
        return mb.relu(x=x)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = milkit.convert(prog2, minimum_deployment_target=milkit.target.iOS17, inputs=[milkit.ImageType(
            name="x", shape=(1, 3, milkit.RangeDim(2, 8), milkit.RangeDim(2, 8)))])
    assert list(r.predict({"x": _rgb(3, 7)[0]}).values())[0].shape == (1, 3, 3, 7)
    with pytest.raises(ValueError, match="outside the model's range"):
        r.predict({"x": _rgb(9, 7)[0]})


# ---- loading packages back ----------------------------------------------------------------------

def test_load_keeps_image_inputs_and_outputs(tmp_path):
    ct = _ct()[0]
    for case in ("bgr_nhwc", "ranges", "enumerated_ios18", "rgb_out", "gray_out_flexible"):
        specs, inputs, outputs, opset = DESC_CASES[case]
        _, ms, _, path = _both_convert(_relu_mean, specs, inputs, outputs, opset=opset, tmp_path=tmp_path)
        prog = milkit.load(path)
        fn = prog.functions["main"]
        for fd in ms.description.input:
            if fd.type.WhichOneof("Type") == "imageType":
                im = fn.image_inputs[fd.name]
                assert im.channel_first is True and im.scale == 1.0
                assert im.color_layout.name == ct.proto.FeatureTypes_pb2.ImageFeatureType.ColorSpace.Name(
                    fd.type.imageType.colorSpace)
        assert list(fn.image_outputs) == [fd.name for fd in ms.description.output
                                          if fd.type.WhichOneof("Type") == "imageType"]
        again = str(tmp_path / f"again_{case}.mlpackage")
        milkit.save(prog, again, minimum_deployment_target=getattr(milkit.target, opset))
        a = ct.models.MLModel(again, skip_model_load=True).get_spec()
        assert a.description.input == ms.description.input
        assert a.description.output == ms.description.output
