"""cond, while_loop and the list ops: building (names, types, rebuilds) against coremltools, the
writer / reader / text format with nested blocks, the interpreter's numbers, errors, and the passes
that walk nested blocks."""

import re
import warnings

import milkit
import numpy as np
import pytest
from support.parity import _build, _ct, _make_symbols, reset_ct_names
from support.pass_parity import check_passes

# ---- programs (each takes the builder module first, as parity's build functions do) ----------


def counter_loop(mb, x):
    def cond(i, a):
        return mb.less(x=i, y=5)

    def body(i, a):
        return mb.add(x=i, y=1), mb.mul(x=a, y=2.0)

    i, a = mb.while_loop(_cond=cond, _body=body, loop_vars=(0, x))
    return i, a


def cond_both(mb, x, p):
    s = mb.squeeze(x=p)

    def t():
        return mb.add(x=x, y=1.0), x

    def f():
        return mb.sub(x=x, y=1.0), mb.relu(x=x)

    return mb.cond(pred=s, _true_fn=t, _false_fn=f)


def growing_loop(mb, x):
    # the body changes a loop var's shape: coremltools rebuilds the blocks with a fresh symbol
    def cond(i, a):
        return mb.less(x=i, y=3)

    def body(i, a):
        return mb.add(x=i, y=1), mb.concat(values=[a, x], axis=0)

    return mb.while_loop(_cond=cond, _body=body, loop_vars=(0, x))


def nested(mb, x, n):
    # a cond inside a while body, reading outer vars
    def cond(i, a):
        return mb.less(x=i, y=mb.squeeze(x=n))

    def body(i, a):
        even = mb.equal(x=mb.mod(x=i, y=2), y=0)

        def t():
            return mb.add(x=a, y=x)

        def f():
            return mb.mul(x=a, y=0.5)

        return mb.add(x=i, y=1), mb.cond(pred=even, _true_fn=t, _false_fn=f)

    return mb.while_loop(_cond=cond, _body=body, loop_vars=(0, x))


def list_loop(mb, x):
    # a TensorArray pattern: write x * i at index i, then gather
    ls = mb.make_list(init_length=4, elem_shape=(2, 3), dtype="fp32", dynamic_length=False)

    def cond(i, l):
        return mb.less(x=i, y=4)

    def body(i, l):
        v = mb.mul(x=x, y=mb.cast(x=i, dtype="fp32"))
        return mb.add(x=i, y=1), mb.list_write(ls=l, index=i, value=v)

    _, l = mb.while_loop(_cond=cond, _body=body, loop_vars=(0, ls))
    return mb.list_gather(ls=l, indices=[3, 0, 2]), mb.list_length(ls=l), mb.list_read(ls=l, index=1)


def list_ops(mb, x):
    ls = mb.make_list(init_length=2, elem_shape=(2, 3), dtype="fp32")
    ls = mb.list_write(ls=ls, index=0, value=x)
    ls = mb.list_write(ls=ls, index=1, value=mb.relu(x=x))
    ls = mb.list_scatter(ls=ls, indices=[3, 2], value=mb.stack(values=[x, mb.mul(x=x, y=-1.0)], axis=0))
    return mb.list_gather(ls=ls, indices=[3, 1, 0, 2]), mb.list_length(ls=ls)


def invariant_loop(mb, x, y):
    # y is returned unchanged: loop_invariant_elimination drops it
    def cond(i, a, b):
        return mb.less(x=i, y=3)

    def body(i, a, b):
        return mb.add(x=i, y=1), mb.add(x=a, y=b), b

    return mb.while_loop(_cond=cond, _body=body, loop_vars=(0, x, y))


PROGRAMS = {
    "counter_loop": (counter_loop, [((2, 3), "fp32")]),
    "cond_both": (cond_both, [((2, 3), "fp32"), ((1,), "bool")]),
    "growing_loop": (growing_loop, [((1, 3), "fp32")]),
    "nested": (nested, [((2, "S"), "fp32"), ((1,), "int32")]),
    "list_loop": (list_loop, [((2, 3), "fp32")]),
    "list_ops": (list_ops, [((2, 3), "fp32")]),
    "invariant_loop": (invariant_loop, [((2, 3), "fp32"), ((2, 3), "fp32")]),
}


def _norm(text: str) -> str:
    # fresh symbols are numbered by each library's own counter
    text = re.sub(r"\bblock\d+\(", "blockN(", str(text))  # coremltools counts blocks globally
    return re.sub(r"\bis\d+\b", "isN", text)


def _both(name, opset="iOS17"):
    build, specs = PROGRAMS[name]
    _ct()
    symtab = _make_symbols(specs)
    reset_ct_names()
    cp = _build("ct", build, specs, opset, symtab)
    mp = _build("mk", build, specs, opset, symtab)
    return cp, mp


# ---- building: the same program as coremltools --------------------------------------------------


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("opset", ["iOS15", "iOS18"])
def test_builds_as_coremltools(name, opset):
    cp, mp = _both(name, opset)
    m = _norm(mp)
    if name == "growing_loop":
        # milkit keeps concat's sum (isN + 1) where coremltools makes a fresh symbol (deliberate,
        # see the concat tests); the loop var itself is a fresh symbol in both
        assert "(isN + 1, 3, fp32)(Tensor) = concat" in m
        m = m.replace("(isN + 1, 3, fp32)(Tensor) = concat", "(isN, 3, fp32)(Tensor) = concat")
    assert m == _norm(cp)
    mp.validate()


def test_rebuild_names_and_fresh_symbol():
    # the body changes i's value and a's shape: both blocks are built twice (names advance), a's
    # block input gets a fresh symbol, as in coremltools
    _, mp = _both("growing_loop")
    text = str(mp)
    assert "less_1" in text and "concat_1" in text and "less_0" not in text
    body = mp.functions["main"].operations[-1].blocks[1]
    assert not isinstance(body.inputs[1].shape[0], int)
    assert mp.functions["main"].operations[-1].outputs[1].shape[1] == 3


def test_while_loop_returns_single_var_for_one_loop_var():
    from milkit import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=(2,))])
    def prog(x):
        r = mb.while_loop(_cond=lambda a: mb.less(x=mb.reduce_sum(x=a), y=100.0),
                          _body=lambda a: mb.mul(x=a, y=2.0), loop_vars=(x,))
        assert isinstance(r, milkit.Var)
        return r

    out = milkit.run(prog, {"x": np.array([1.0, 2.0], np.float32)})
    np.testing.assert_array_equal(list(out.values())[0], [64.0, 128.0])


# ---- the writer, the reader and the text format ----------------------------------------------------


def _ct_convert(cp, pipeline, opset="iOS17"):
    ct, _, _, _ = _ct()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ct.convert(cp, convert_to="mlprogram", minimum_deployment_target=getattr(ct.target, opset),
                          skip_model_load=True, compute_precision=ct.precision.FLOAT32,
                          pass_pipeline=getattr(ct.PassPipeline, pipeline))


def _mk_convert(mp, pipeline, opset="iOS17", precision="FLOAT32"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return milkit.convert(mp, minimum_deployment_target=getattr(milkit.target, opset),
                              compute_precision=getattr(milkit.precision, precision),
                              pass_pipeline=getattr(milkit.PassPipeline, pipeline))


def _program_proto(model):
    p = model.get_spec().mlProgram
    p.ClearField("attributes")  # buildInfo names the writer
    return p


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("pipeline", ["EMPTY", "DEFAULT"])
def test_package_equals_coremltools(name, pipeline):
    cp, mp = _both(name)
    cm = _ct_convert(cp, pipeline)
    mm = _mk_convert(mp, pipeline)
    assert _program_proto(mm) == _program_proto(cm)


@pytest.mark.parametrize("name", ["counter_loop", "cond_both", "nested", "list_loop"])
def test_fp16_default_equals_coremltools(name):
    cp, mp = _both(name)
    ct, _, _, _ = _ct()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = ct.convert(cp, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS17,
                        skip_model_load=True, compute_precision=ct.precision.FLOAT16)
    mm = _mk_convert(mp, "DEFAULT", precision="FLOAT16")
    assert _program_proto(mm) == _program_proto(cm)


@pytest.mark.parametrize("pipeline", ["EMPTY", "DEFAULT"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_save_load_round_trip(name, pipeline, tmp_path):
    _, mp = _both(name)
    feed = _feed(name)
    want = milkit.run(mp, feed)
    m = _mk_convert(mp, pipeline)
    m.save(tmp_path / "m.mlpackage")
    back = milkit.load(tmp_path / "m.mlpackage")
    back.validate()
    # strict names: while_loop's blocks share their inputs again (one var per name)
    milkit._core.verify_function(back.functions["main"], "main", True)
    # the same ops, names and nesting (the proto does not keep symbol identity, so a loaded
    # block input gets a symbol of its own: types may print differently)
    assert _op_tree(back.functions["main"]) == _op_tree(m.get_program().functions["main"])
    got = milkit.models.MLModel(str(tmp_path / "m.mlpackage")).predict(feed)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6)
    # coremltools reads it too
    ct, _, _, _ = _ct()
    from coremltools.converters.mil.frontend.milproto.load import load as milproto_to_pymil

    loaded = ct.models.MLModel(str(tmp_path / "m.mlpackage"), skip_model_load=True)
    milproto_to_pymil(loaded.get_spec(), loaded.get_spec().specificationVersion, loaded.weights_dir)


def _op_tree(block):
    return [(op.op_type, op.name, [o.name for o in op.outputs],
             [([v.name for v in b.inputs], _op_tree(b), [v.name for v in b.outputs]) for b in op.blocks])
            for op in block.operations]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_text_round_trip(name):
    _, mp = _both(name)
    text = milkit.to_text(mp, consts=True)
    back = milkit.parse(text)
    back.validate()
    assert milkit.to_text(back, consts=True) == text
    feed = _feed(name)
    a, b = milkit.run(mp, feed), milkit.run(back, feed)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_coremltools_format_parses_back():
    _, mp = _both("cond_both")
    back = milkit.parse(str(mp))
    assert str(back) == str(mp)


def test_parse_errors_inside_blocks():
    _, mp = _both("counter_loop")
    text = milkit.to_text(mp, consts=True)
    bad = text.replace("mul(x=%x_x0", "mul(x=%nope")
    with pytest.raises(milkit.FormatError, match="nope"):
        milkit.parse(bad)
    # a block var is not visible after its block
    bad = text.replace("-> (%while_loop_0_0, %while_loop_0_1)", "-> (%while_loop_0_0, %mul_1)")
    with pytest.raises(milkit.FormatError, match="mul_1"):
        milkit.parse(bad)


# ---- numbers ------------------------------------------------------------------------------------


def _feed(name):
    rng = np.random.default_rng(0)
    _, specs = PROGRAMS[name]
    feed = {}
    for i, (shape, dtype) in enumerate(specs):
        key = "x" if i == 0 else f"x{i}"
        shape = tuple(4 if isinstance(d, str) else d for d in shape)
        if dtype == "bool":
            feed[key] = np.array([True])
        elif dtype == "int32":
            feed[key] = np.array([5], np.int32)
        else:
            feed[key] = rng.uniform(-1, 1, shape).astype(np.float32)
    return feed


def _outs(prog, feed):
    out = milkit.run(prog, feed)
    return [np.asarray(v) for v in out.values()]


def test_numbers_counter_and_cond():
    _, mp = _both("counter_loop")
    x = _feed("counter_loop")["x"]
    i, a = _outs(mp, {"x": x})
    assert i == 5
    np.testing.assert_array_equal(a, x * 32)
    _, mp = _both("cond_both")
    for p in (True, False):
        c, d = _outs(mp, {"x": x, "x1": np.array([p])})
        np.testing.assert_array_equal(c, x + 1 if p else x - 1)
        np.testing.assert_array_equal(d, x if p else np.maximum(x, 0))


def test_numbers_growing_shape():
    _, mp = _both("growing_loop")
    x = np.arange(3, dtype=np.float32).reshape(1, 3)
    i, a = _outs(mp, {"x": x})
    assert i == 3
    np.testing.assert_array_equal(a, np.concatenate([x] * 4, axis=0))


@pytest.mark.parametrize("n", [0, 1, 4, 7])
def test_numbers_nested_with_symbolic_width(n):
    _, mp = _both("nested")
    x = np.random.default_rng(n).uniform(-1, 1, (2, 5)).astype(np.float32)
    want = x.copy()
    for i in range(n):
        want = want + x if i % 2 == 0 else want * np.float32(0.5)
    i, a = _outs(mp, {"x": x, "x1": np.array([n], np.int32)})
    assert i == n
    np.testing.assert_allclose(a, want, rtol=1e-6)


def test_numbers_lists():
    x = _feed("list_loop")["x"]
    _, mp = _both("list_loop")
    g, n, r = _outs(mp, {"x": x})
    np.testing.assert_array_equal(g, np.stack([x * 3, x * 0, x * 2]))
    assert n == 4
    np.testing.assert_array_equal(r, x)
    _, mp = _both("list_ops")
    g, n = _outs(mp, {"x": x})
    np.testing.assert_array_equal(g, np.stack([x, np.maximum(x, 0), x, -x]))
    assert n == 4


def test_list_errors_at_run_time():
    from milkit import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=(2,)), mb.TensorSpec(shape=(1,), dtype=milkit.types.int32)],
                opset_version=milkit.target.iOS17)
    def fixed(x, i):
        ls = mb.make_list(init_length=2, elem_shape=(2,), dynamic_length=False)
        return mb.list_read(ls=mb.list_write(ls=ls, index=mb.squeeze(x=i), value=x), index=0)

    x = np.ones(2, np.float32)
    np.testing.assert_array_equal(_outs(fixed, {"x": x, "i": np.array([0], np.int32)})[0], x)
    with pytest.raises(milkit.MilkitIndexError, match="list_write.*index 2 is out of range"):
        milkit.run(fixed, {"x": x, "i": np.array([2], np.int32)})
    with pytest.raises(ValueError, match="list_read.*never written"):
        milkit.run(fixed, {"x": x, "i": np.array([1], np.int32)})


def test_runaway_loop_stops(monkeypatch):
    import subprocess
    import sys

    code = (
        "import numpy as np, milkit\n"
        "from milkit import Builder as mb\n"
        "@mb.program(input_specs=[mb.TensorSpec(shape=(1,))])\n"
        "def p(x):\n"
        "    return mb.while_loop(_cond=lambda a: mb.greater(x=mb.squeeze(x=a), y=-1.0),\n"
        "                         _body=lambda a: mb.add(x=a, y=1.0), loop_vars=(x,))\n"
        "try:\n"
        "    milkit.run(p, {'x': np.zeros(1, np.float32)})\n"
        "except ValueError as e:\n"
        "    print('ERR', e)\n")
    env = dict(__import__("os").environ, MILKIT_MAX_LOOP_ITERATIONS="1000")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert "ERR" in r.stdout and "stopped after 1000 iterations" in r.stdout, r.stdout + r.stderr


# ---- errors while building -------------------------------------------------------------------


def test_build_errors():
    from milkit import Builder as mb

    spec = [mb.TensorSpec(shape=(2,)), mb.TensorSpec(shape=(1,), dtype=milkit.types.bool)]

    def prog(fn):
        return mb.program(input_specs=spec)(fn)

    with pytest.raises(ValueError, match="true branch returns 2 vars but the false branch returns 1"):
        prog(lambda x, p: mb.cond(pred=p, _true_fn=lambda: (x, x), _false_fn=lambda: x))
    with pytest.raises(ValueError, match="mismatch false branch"):
        prog(lambda x, p: mb.cond(pred=p, _true_fn=lambda: x, _false_fn=lambda: mb.cast(x=x, dtype="int32")))
    with pytest.raises(TypeError, match="_false_fn"):
        prog(lambda x, p: mb.cond(pred=p, _true_fn=lambda: x))
    with pytest.raises(TypeError, match="must be a function"):
        prog(lambda x, p: mb.cond(pred=p, _true_fn=lambda: x, _false_fn=3))
    with pytest.raises(TypeError, match="must return Vars"):
        prog(lambda x, p: mb.cond(pred=p, _true_fn=lambda: x, _false_fn=lambda: 3.0))
    with pytest.raises(ValueError, match="_cond must return one bool var"):
        prog(lambda x, p: mb.while_loop(_cond=lambda a: a, _body=lambda a: a, loop_vars=(x,)))
    with pytest.raises(ValueError, match="_body must return 1 vars"):
        prog(lambda x, p: mb.while_loop(_cond=lambda a: p, _body=lambda a: (a, a), loop_vars=(x,)))
    with pytest.raises(ValueError, match="changes in the body"):
        prog(lambda x, p: mb.while_loop(_cond=lambda a: p, _body=lambda a: mb.reduce_sum(x=a), loop_vars=(x,)))

    def other_branch(x, p):
        inner = []

        def t():
            inner.append(mb.relu(x=x))
            return inner[0]

        return mb.cond(pred=p, _true_fn=t, _false_fn=lambda: inner[0])

    with pytest.raises(ValueError, match="not visible"):
        prog(other_branch)
    with pytest.raises(ValueError, match="Elem type mismatch"):
        prog(lambda x, p: mb.list_write(ls=mb.make_list(elem_shape=(3,)), index=0, value=x))
    with pytest.raises(ValueError, match="Cannot scatter"):
        prog(lambda x, p: mb.list_scatter(ls=mb.make_list(elem_shape=()), indices=[0], value=x))

    # the failed ops left nothing behind
    @mb.program(input_specs=spec)
    def ok(x, p):
        try:
            mb.cond(pred=p, _true_fn=lambda: mb.relu(x=x), _false_fn=lambda: (x, x))
        except ValueError:
            pass
        return x

    assert [o.op_type for o in ok.functions["main"].operations] == []


# ---- passes over nested blocks ------------------------------------------------------------------


def test_loop_invariant_elimination_as_coremltools():
    build, specs = PROGRAMS["invariant_loop"]
    check_passes(build, specs, ["common::loop_invariant_elimination"])


def test_loop_invariant_elimination_keeps_block_output_names():
    # the invariant is returned by the function: an identity keeps its name (coremltools)
    def build(mb, x, y):
        return mb.while_loop(_cond=lambda i, b: mb.less(x=i, y=3),
                             _body=lambda i, b: (mb.add(x=i, y=1), b), loop_vars=(0, y))

    check_passes(build, [((2, 3), "fp32"), ((2, 3), "fp32")], ["common::loop_invariant_elimination"])


def test_loop_invariant_elimination_outer_var_differs_from_coremltools():
    # Deliberate difference: the body returns an outer var z that is not the loop var's initial
    # value. coremltools treats the loop var as invariant and reads the initial value (wrong after
    # one iteration: a = z); milkit keeps the loop var, and the numbers stay the same.
    from support.pass_parity import assert_same_numbers, build_both

    def build(mb, x, z):
        return mb.while_loop(_cond=lambda i, a: mb.less(x=i, y=2),
                             _body=lambda i, a: (mb.add(x=i, y=1), z), loop_vars=(0, x))

    specs = [((2,), "fp32"), ((2,), "fp32")]
    before = _build("mk", build, specs, "iOS17", _make_symbols(specs))
    _, mp, _ = build_both(build, specs)
    from milkit.passes import apply_passes

    apply_passes(mp, ["common::loop_invariant_elimination"])
    assert len(mp.functions["main"].operations[-1].outputs) == 2
    assert_same_numbers(before, mp, specs, ["common::loop_invariant_elimination"])


@pytest.mark.parametrize("name", ["counter_loop", "nested", "list_loop", "cond_both"])
def test_default_pipeline_keeps_numbers(name):
    _, mp = _both(name)
    feed = _feed(name)
    want = milkit.run(mp, feed)
    _, mp2 = _both(name)
    m = _mk_convert(mp2, "DEFAULT")
    got = m.predict(feed)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6)


def test_dead_code_and_consts_inside_blocks():
    def build(mb, x):
        def body(i, a):
            mb.relu(x=a)  # dead
            c = mb.add(x=mb.const(val=np.float32(1.0)), y=2.0)  # folds
            return mb.add(x=i, y=1), mb.add(x=a, y=c)

        return mb.while_loop(_cond=lambda i, a: mb.less(x=i, y=3), _body=body, loop_vars=(0, x))

    check_passes(build, [((2,), "fp32")], ["common::dead_code_elimination", "common::const_elimination"])


def test_while_loop_rebuilds_until_the_loop_vars_settle():
    # Round 1 knows the counter (0), so x[i:i+1] is (1,) and y keeps (1,); round 2 (the counter's
    # value dropped) makes the slice's dim a fresh symbol, which y's (1,) does not admit; round 3
    # builds with y's dim a symbol too. coremltools stops after its second build with "not a
    # subtype"; milkit rebuilds until the types settle (ONNX's loop11 needs it), which is right
    # since the program is well typed with y: (s,).
    from coremltools.converters.mil import Builder as cmb
    from milkit import Builder as mb

    def build(b):
        @b.program(input_specs=[b.TensorSpec(shape=(5,))])
        def prog(x):
            def cond(i, y):
                return b.less(x=i, y=4)

            def body(i, y):
                s = b.slice_by_index(x=x, begin=b.reshape(x=i, shape=[1]), end=b.reshape(x=b.add(x=i, y=1), shape=[1]))
                return b.add(x=i, y=1), b.add(x=s, y=y)

            return b.while_loop(_cond=cond, _body=body, loop_vars=(0, np.zeros(1, np.float32)))

        return prog

    with pytest.raises(ValueError, match="not a subtype"):
        build(cmb)
    prog = build(mb)
    x = np.arange(5, dtype=np.float32)
    out = milkit.run(prog, {"x": x})
    got = [np.asarray(v) for v in (out.values() if isinstance(out, dict) else out)]
    assert int(got[0]) == 4 and np.allclose(got[1], [0 + 1 + 2 + 3])
