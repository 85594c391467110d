"""milkit.parse / milkit.to_text: exact round trips, coremltools' format, symbols, errors, fuzz."""

from __future__ import annotations

import random

import milkit
import numpy as np
import pytest
from milkit import Builder as mb
from milkit import types

TARGETS = ("iOS15", "iOS16", "iOS17", "iOS18")


def _ops(prog):
    out = []
    for f in prog.functions.values():
        out.extend(f.operations)
    return out


def _same_values(a, b):
    oa, ob = _ops(a), _ops(b)
    assert [o.op_type for o in oa] == [o.op_type for o in ob]
    assert [o.name for o in oa] == [o.name for o in ob]
    for x, y in zip(oa, ob):
        for u, v in zip(x.outputs, y.outputs):
            assert u.name == v.name
            assert str(u) == str(v)
            if u.val is None:
                assert v.val is None
                continue
            uv, vv = np.asarray(u.val), np.asarray(v.val)
            assert uv.dtype == vv.dtype and uv.shape == vv.shape, u.name
            if uv.dtype.kind == "f":
                np.testing.assert_array_equal(uv.view(f"u{uv.itemsize}"), vv.view(f"u{vv.itemsize}"))
            else:
                np.testing.assert_array_equal(uv, vv)


def _round_trip(prog):
    text = milkit.to_text(prog, consts=True)
    back = milkit.parse(text)
    assert milkit.to_text(back, consts=True) == text
    assert str(back) == str(prog)
    _same_values(prog, back)
    return back


def _many_ops(target):
    S = milkit.get_new_symbol("S")

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 3, S, 8), dtype=types.fp32)],
                opset_version=getattr(milkit.target, target))
    def prog(x):
        w = np.linspace(-1, 1, 4 * 3 * 9).astype(np.float32).reshape(4, 3, 3, 3)
        c = mb.conv(x=x, weight=w, pad_type="same")
        p = mb.avg_pool(x=c, kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid")
        a = mb.leaky_relu(x=mb.tanh(x=p), alpha=0.2)
        e = mb.sub(x=mb.exp(x=a), y=np.float32(0.5))
        lin = mb.linear(x=e, weight=np.full((6, 4), 0.25, np.float32), bias=np.arange(6, dtype=np.float32))
        mm = mb.matmul(x=lin, y=lin, transpose_y=True)
        t = mb.transpose(x=mm, perm=[0, 1, 3, 2])
        parts = mb.split(x=lin, num_splits=3, axis=-1)
        cat = mb.concat(values=[parts[2], parts[0]], axis=-1)
        red = mb.reduce_max(x=cat, axes=[1], keep_dims=False)
        sh = mb.shape(x=red)
        g = mb.gather(x=sh, indices=[1], axis=0)
        rs = mb.reshape(x=red, shape=[-1])
        sm = mb.softmax(x=lin, axis=-1)
        ln = mb.layer_norm(x=sm, axes=[-1], epsilon=1e-5)
        h = mb.cast(x=ln, dtype="fp16")
        return t, parts[1], g, rs, h

    return prog


@pytest.mark.parametrize("target", TARGETS)
def test_round_trip_many_op_families(target):
    prog = _many_ops(target)
    back = _round_trip(prog)
    f = back.functions["main"]
    assert f.opset_version == getattr(milkit.target, target)
    assert f.find_ops(op_type="split")[0].outputs[1].name == f.outputs[1].name


def _sub(name, raw):
    return raw.astype(getattr(types, f"np_{name}_dtype"))


def test_round_trip_all_const_dtypes():
    rng = np.random.default_rng(3)
    consts = {
        "fp16": np.array([0.1, -0.0, 65504, 6e-8, np.inf, -np.inf, np.nan, 1 / 3], np.float16),
        "fp32": np.array([[0.1, -0.0, 1e-45, 3.4028235e38], [np.inf, -np.inf, np.nan, 1 / 3]], np.float32),
        "fp32_scalar": np.float32(0.1),
        "fp16_scalar": np.float16(0.3),
        "int8": np.array([-128, 127, 0], np.int8),
        "uint8": np.array([0, 255], np.uint8),
        "int16": np.array([-32768, 32767], np.int16),
        "uint16": np.array([0, 65535], np.uint16),
        "int32": rng.integers(-2**31, 2**31, (3, 2)).astype(np.int32),
        "uint32": np.array([0, 2**32 - 1], np.uint32),
        "int4": _sub("int4", np.array([-8, 7, 0, -1], np.int8)),
        "uint1": _sub("uint1", np.array([0, 1, 1], np.uint8)),
        "uint2": _sub("uint2", np.array([3, 0], np.uint8)),
        "uint3": _sub("uint3", np.array([7, 5], np.uint8)),
        "uint4": _sub("uint4", np.array([15, 1], np.uint8)),
        "uint6": _sub("uint6", np.array([63, 2], np.uint8)),
        "bool": np.array([True, False]),
        "str": "quote \" and \\ and \n newline",
        "empty": np.zeros((0, 3), np.float32),
    }

    @mb.program(input_specs=[mb.TensorSpec(shape=(2,), dtype=types.fp32)], opset_version=milkit.target.iOS18)
    def prog(x):
        outs = [mb.const(val=v, name="c_" + k) for k, v in consts.items()]
        return tuple(outs) + (mb.relu(x=x),)

    text = milkit.to_text(prog, consts=True)
    assert '%c_uint6: (2,uint6)*(Tensor) = const(val=[63, 2], name="c_uint6")' in text
    assert 'val="quote \\" and \\\\ and \\n newline"' in text
    back = _round_trip(prog)
    outs = back.functions["main"].outputs
    for (k, v), o in zip(consts.items(), outs):
        if k == "str":
            assert o.val == v
        else:
            assert np.asarray(o.val).tobytes() == np.asarray(v).tobytes(), k


def test_elided_consts_read_back_as_zeros():
    @mb.program(input_specs=[mb.TensorSpec(shape=(64, 64), dtype=types.fp16)], opset_version=milkit.target.iOS17)
    def prog(x):
        return mb.matmul(x=x, y=np.ones((64, 64), np.float16), name="mm")

    text = milkit.to_text(prog, consts=True, max_const_elems=100)
    assert "val=<elided 4096 elems>" in text
    back = milkit.parse(text)
    assert milkit.to_text(back, consts=True, max_const_elems=100) == text
    w = back.functions["main"].find_ops(op_type="matmul")[0].inputs["y"]
    assert w.val.dtype == np.float16 and w.val.shape == (64, 64) and not w.val.any()
    with pytest.raises(ValueError):
        milkit.to_text(prog, consts=True, max_const_elems=-1)
    with pytest.raises(TypeError):
        milkit.to_text("not a program")


@pytest.mark.parametrize("target", TARGETS)
def test_default_format_parses_back(target):
    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 5), dtype=types.fp16),
                             mb.TensorSpec(shape=(3,), dtype=types.int32)],
                opset_version=getattr(milkit.target, target))
    def prog(x, i):
        a = mb.mul(x=x, y=np.float16(0.1))
        c = mb.clip(x=a, alpha=np.float16(0.0), beta=np.float16(6.0))
        f = mb.fill(shape=[2, 3], value=np.float16(2.5))
        g = mb.gather(x=c, indices=[1, 0], axis=0)
        s = mb.slice_by_index(x=g, begin=[0, 1], end=[2, 4], end_mask=[False, True])
        k = mb.add(x=i, y=7)
        return f, s, k, mb.reduce_sum(x=c, axes=[-1])

    text = str(prog)
    back = milkit.parse(text)
    assert str(back) == text
    _same_values(prog, back)
    ops = {o.op_type: o for o in _ops(back)}
    assert ops["fill"].inputs["value"].dtype == types.fp16
    assert ops["clip"].inputs["beta"].dtype == types.fp16
    assert ops["add"].inputs["y"].dtype == types.int32


def test_default_format_hidden_const_is_explained():
    @mb.program(input_specs=[mb.TensorSpec(shape=(20,), dtype=types.fp32)])
    def prog(x):
        return mb.add(x=x, y=np.arange(20, dtype=np.float32))

    with pytest.raises(milkit.FormatError, match=r"line 4, column \d+: undefined var '%add_0_y_0'.*consts=True"):
        milkit.parse(str(prog))
    _round_trip(prog)


def test_symbolic_expressions():
    text = (
        "\nmain[CoreML7](%x: ((S + 1)//2, 2*S + T, fp32)(Tensor),\n"
        "              %y: (S, T % 3, min(S, T), fp16)(Tensor)) {\n"
        "  block0() {\n"
        "    %shape_0: (2,int32)^(Tensor) = shape(x=%x, name=\"shape_0\")\n"
        "    %r: ((S + 1)//2, 2*S + T, fp32)(Tensor) = reshape(x=%x, shape=%shape_0, name=\"r\")\n"
        "    %t: (2*S + T, (S + 1)//2, fp32)(Tensor) = transpose(x=%r, perm=[1, 0], name=\"t\")\n"
        "    %e: (1, 2*S + T, (S + 1)//2, fp32)(Tensor) = expand_dims(x=%t, axes=[0], name=\"e\")\n"
        "  } -> (%e, %y)\n"
        "}\n"
    )
    prog = milkit.parse(text)
    assert str(prog) == text
    x, y = prog.functions["main"].inputs.values() if isinstance(prog.functions["main"].inputs, dict) \
        else prog.functions["main"].inputs
    assert str(x.shape[0]) == "(S + 1)//2"
    assert str(x.shape[1]) == "2*S + T"
    _round_trip(prog)


@pytest.mark.parametrize("text, pattern", [
    ("\nmain[CoreML7](%x: (2, fp32)(Tensor)) {\n  block0() {\n    %y: (3, fp32)(Tensor) = relu(x=%x, name=\"y\")\n  } -> (%y)\n}\n",
     r"line 4, column 5: relu 'y': output '%y' is declared \(3, fp32\) but milkit infers \(2, fp32\)"),
    ("\nmain[CoreML7](%x: (2, fp32)(Tensor)) {\n  block0() {\n    %y: (2, fp32)(Tensor) = relu(x=%x,, name=\"y\")\n  } -> (%y)\n}\n",
     r"line 4, column 39: expected an argument name but found ','"),
    ("\nmain[CoreML42](%x: (2, fp32)(Tensor)) {", r"line 2, column 6: unknown opset 'CoreML42'"),
    ("main[CoreML7](%x: (2, fp32)(Tensor)) {\n  block0() {\n    %y: (2, fp32)(Tensor) = softmax(x=%x, axis=1.5, name=\"y\")\n  } -> (%y)\n}\n",
     r"line 3, column 29: softmax 'y'"),
])
def test_errors_have_line_and_column(text, pattern):
    with pytest.raises(milkit.FormatError, match=pattern) as info:
        milkit.parse(text)
    assert isinstance(info.value, ValueError)


def test_parse_rejects_non_text():
    with pytest.raises(TypeError):
        milkit.parse(b"main")


def test_fuzz_mutations_raise_format_error():
    seeds = [milkit.to_text(_many_ops("iOS17"), consts=True), str(_many_ops("iOS18"))]
    rnd = random.Random(99)
    alphabet = "()[]{},:=*^%+-/<>\"'\\ \n0123456789.eS_fp?"
    errors = 0
    for i in range(300):
        t = seeds[i % 2]
        for _ in range(rnd.randint(1, 3)):
            if not t:
                break
            at = rnd.randrange(len(t))
            kind = rnd.randrange(4)
            if kind == 0:
                t = t[:at] + t[at + rnd.randint(1, 6):]
            elif kind == 1:
                t = t[:at] + rnd.choice(alphabet) + t[at:]
            elif kind == 2:
                t = t[:at] + rnd.choice(alphabet) + t[at + 1:]
            else:
                t = t[:at]
        try:
            milkit.parse(t)
        except milkit.FormatError:
            errors += 1
    assert errors > 200
