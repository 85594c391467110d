"""Parity of the tensor_operation ops (and select) with coremltools, at every opset.

Where coremltools makes a fresh symbol, milkit keeps an exact expression; those cases assert
milkit's expression. Where coremltools is wrong by the op's definition, the test says so and
asserts milkit's behaviour directly.
"""

import numpy as np
import pytest
from support.parity import ALL_OPSETS, check, check_error


def _mk(build, specs, opset="iOS17"):
    """Builds with milkit only; returns the main function."""
    import milkit
    from milkit import Builder as mb
    from milkit import types

    syms = {}
    in_specs = []
    for shape, dtype in specs:
        dims = []
        for d in shape:
            if isinstance(d, str):
                syms.setdefault(d, milkit.get_new_symbol(d))
                dims.append(syms[d])
            else:
                dims.append(d)
        in_specs.append(mb.TensorSpec(shape=tuple(dims), dtype=getattr(types, dtype)))
    names = [f"x{i}" if i else "x" for i in range(len(specs))]
    ns = {"build": build, "mb": mb}
    exec(f"def main({', '.join(names)}):\n    return build(mb, {', '.join(names)})\n", ns)
    prog = mb.program(input_specs=in_specs, opset_version=getattr(milkit.target, opset))(ns["main"])
    return prog.functions["main"]


def _out_shape(res, i=0):
    return tuple(str(d) for d in res.mk_prog.functions["main"].outputs[i].shape)


def _shape(v):
    return tuple(str(d) for d in v.shape)


def _in_syms(res):
    """Names of the input symbols, in order of first appearance (the harness names them)."""
    names = []
    for v in res.mk_prog.functions["main"].inputs.values():
        for d in v.shape:
            if not isinstance(d, int) and str(d) not in names:
                names.append(str(d))
    return names


# ---------------------------------------------------------------------------------------------
# concat


@pytest.mark.parametrize("specs,axis", [
    ([((2, 3), "fp32"), ((4, 3), "fp32")], 0),
    ([((2, 3), "fp32"), ((2, 5), "fp32")], -1),
    ([((2, 3), "int32"), ((2, 3), "int32"), ((2, 1), "int32")], 1),
    ([((2, 3), "bool"), ((1, 3), "bool")], 0),
    ([((2, 3), "fp16"), ((1, 3), "fp16")], -2),
])
def test_concat_static(specs, axis):
    n = len(specs)
    check(lambda mb, *xs: mb.concat(values=list(xs[:n]), axis=axis), specs, ALL_OPSETS)


def test_concat_symbolic_sum():
    res = check(lambda mb, x, y: mb.concat(values=[x, y, x], axis=0),
                [(("S", 8), "fp32"), (("T", 8), "fp32")], ALL_OPSETS)
    for r in res:
        assert r.improved, "coremltools makes a fresh symbol here"
        S, T = _in_syms(r)
        assert _out_shape(r) == (f"2*{S} + {T}", "8")


def test_concat_symbolic_non_axis_dims():
    res = check(lambda mb, x, y: mb.concat(values=[x, y], axis=1),
                [(("S", 2), "fp32"), (("S", 3), "fp32")], ALL_OPSETS)
    assert _out_shape(res[0]) == (_in_syms(res[0])[0], "5")


def test_concat_interleave_and_implicit_consts():
    # more than 10 elements: no fresh-symbol value in coremltools (whose folding ignores interleave)
    check(lambda mb, x: mb.concat(values=[x, np.ones((2, 6), np.float32)], axis=0, interleave=True),
          [((2, 6), "fp32")], ALL_OPSETS)


def test_concat_const_fold():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(3, dtype=np.float32).reshape(1, 3)
    check(lambda mb, x: mb.concat(values=[a, b, a], axis=0), [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.concat(values=[a, a], axis=1), [((1,), "fp32")], ["iOS17"])
    ai = np.array([1, 2], np.int32)
    check(lambda mb, x: mb.concat(values=[ai, np.array([3], np.int32)], axis=0), [((1,), "fp32")], ["iOS17"])


def test_concat_interleave_value():
    # coremltools ignores `interleave` when folding (np.concatenate); the op's definition
    # interleaves: out[0::2] = a, out[1::2] = b.
    a = np.array([[1, 2], [3, 4]], np.int32)
    b = np.array([[5, 6], [7, 8]], np.int32)
    f = _mk(lambda mb, x: mb.concat(values=[a, b], axis=0, interleave=True), [((1,), "fp32")])
    np.testing.assert_array_equal(f.outputs[0].val, [[1, 2], [5, 6], [3, 4], [7, 8]])
    f = _mk(lambda mb, x: mb.concat(values=[a, b], axis=1, interleave=True), [((1,), "fp32")])
    np.testing.assert_array_equal(f.outputs[0].val, [[1, 5, 2, 6], [3, 7, 4, 8]])


def test_concat_fresh_symbols_for_small_unknown_tensors():
    # coremltools stands in fresh symbols for unknown tensors of <= 10 elements
    res = check(lambda mb, x: mb.concat(values=[x, np.array([1, 2], np.int32)], axis=0),
                [((2,), "int32")], ALL_OPSETS)
    v = res[0].mk_prog.functions["main"].outputs[0]
    assert v.val is None and [int(d) for d in v.sym_val[2:]] == [1, 2]


def test_concat_symbolic_values_propagate():
    def build(mb, x):
        s = mb.shape(x=x)
        first, _ = mb.split(x=s, num_splits=2, axis=0)
        shp = mb.concat(values=[first, [2, 2]], axis=0)
        return mb.fill(shape=shp, value=1.0)

    res = check(build, [(("S", 4), "fp32")], ALL_OPSETS)
    f = res[0].mk_prog.functions["main"]
    concat = [op for op in f.operations if op.op_type == "concat"][0]
    assert concat.outputs[0].val is None
    S = _in_syms(res[0])[0]
    assert [str(d) for d in concat.outputs[0].sym_val] == [S, "2", "2"]
    assert _out_shape(res[0]) == (S, "2", "2")


def test_concat_errors():
    check_error(lambda mb, x, y: mb.concat(values=[x, y], axis=0), [((2, 3), "fp32"), ((2, 4), "fp32")],
                match=r"concat 'concat_0'.*dim 1.*\(2, 3\).*\(2, 4\)")
    check_error(lambda mb, x, y: mb.concat(values=[x, y], axis=0), [((2, 3), "fp32"), ((2, 3), "fp16")],
                match=r"concat 'concat_0'.*same data type|share one")
    check_error(lambda mb, x, y: mb.concat(values=[x, y], axis=2), [((2, 3), "fp32"), ((2, 3), "fp32")],
                match=r"concat 'concat_0'.*axis")
    check_error(lambda mb, x, y: mb.concat(values=[x, y], axis=0), [((2, 3), "fp32"), ((3,), "fp32")],
                match=r"concat 'concat_0'.*rank")
    check_error(lambda mb, x, y: mb.concat(values=[x, y], axis=0, interleave=True),
                [((2, 3), "fp32"), ((1, 3), "fp32")], match=r"concat 'concat_0'.*interleave")
    check_error(lambda mb, x: mb.concat(values=[x, x], axis=x), [((1,), "int32")], match=r"axis")


def test_concat_proven_symbolic_conflict():
    # (S, 8) vs (S + 1, 8) cannot agree on dim 0; coremltools skips symbolic dims.
    def build(mb, x):
        y = mb.pad(x=x, pad=[0, 1, 0, 0])
        return mb.concat(values=[x, y], axis=1)

    with pytest.raises(ValueError, match=r"concat 'concat_0'.*dim 0.*S vs S \+ 1"):
        _mk(build, [(("S", 8), "fp32")])


# ---------------------------------------------------------------------------------------------
# split


@pytest.mark.parametrize("kw", [
    dict(num_splits=2, axis=0),
    dict(num_splits=3, axis=-1),
    dict(split_sizes=[1, 3], axis=0),
    dict(split_sizes=[2, 1, 3], num_splits=3, axis=1),
    dict(num_splits=1, axis=0),
])
@pytest.mark.parametrize("dtype", ["fp32", "int32", "bool", "fp16"])
def test_split_static(kw, dtype):
    check(lambda mb, x: mb.split(x=x, **kw), [((4, 6), dtype)], ALL_OPSETS)


def test_split_symbolic_other_dim():
    check(lambda mb, x: mb.split(x=x, split_sizes=[1, 3], axis=1), [(("S", 4), "fp32")], ALL_OPSETS)


def test_split_symbolic_floordiv():
    # coremltools gives S/2 (a rational); milkit gives the exact integer S//2.
    f = _mk(lambda mb, x: mb.split(x=x, num_splits=2, axis=0), [(("S", 4), "fp32")])
    assert [_shape(v) for v in f.outputs] == [("S//2", "4"), ("S//2", "4")]
    assert [v.name for v in f.outputs] == ["split_0_0", "split_0_1"]
    f = _mk(lambda mb, x: mb.split(x=x, num_splits=2, axis=0), [(("S", 4), "fp32")])
    # split of a dim that is a known multiple
    f = _mk(lambda mb, x: mb.split(x=mb.tile(x=x, reps=[3, 1]), num_splits=3, axis=0),
            [(("S", 4), "fp32")])
    assert [_shape(v) for v in f.outputs] == [("S", "4")] * 3


def test_split_values():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    check(lambda mb, x: mb.split(x=a, split_sizes=[1, 3], axis=1), [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.split(x=a, num_splits=3, axis=0), [((1,), "fp32")], ["iOS17"])
    check(lambda mb, x: mb.split(x=a, num_splits=1, axis=0), [((1,), "fp32")], ["iOS17"])


def test_split_symbolic_values():
    res = check(lambda mb, x: mb.split(x=mb.shape(x=x), num_splits=3, axis=0), [(("S", 4, "T"), "fp32")],
                ALL_OPSETS)
    outs = res[0].mk_prog.functions["main"].outputs
    S, T = _in_syms(res[0])
    assert [str(o.sym_val[0]) for o in outs] == [S, "4", T]
    assert outs[0].val is None and outs[1].val is not None


def test_split_errors():
    check_error(lambda mb, x: mb.split(x=x, num_splits=4, axis=0), [((6, 2), "fp32")],
                match=r"split 'split_0'.*does not divide dim 0.*6")
    check_error(lambda mb, x: mb.split(x=x, axis=0), [((6, 2), "fp32")],
                match=r"split 'split_0'.*num_splits.*split_sizes")
    check_error(lambda mb, x: mb.split(x=x, num_splits=2, axis=2), [((6, 2), "fp32")], match=r"axis")
    check_error(lambda mb, x: mb.split(x=x, num_splits=x, axis=0), [((2,), "int32")], match=r"num_splits")


def test_split_sizes_must_sum_to_dim():
    # coremltools accepts split_sizes that do not cover the dim (giving wrong shapes); the op's
    # definition requires the sum to equal the dim, and milkit rejects a proven mismatch.
    with pytest.raises(ValueError, match=r"split 'split_0'.*sum to 4.*dim 0.*\(6, 2\)"):
        _mk(lambda mb, x: mb.split(x=x, split_sizes=[2, 2], axis=0), [((6, 2), "fp32")])
    with pytest.raises(ValueError, match=r"split 'split_0'.*num_splits = 3"):
        _mk(lambda mb, x: mb.split(x=x, split_sizes=[2, 4], num_splits=3, axis=0), [((6, 2), "fp32")])


# ---------------------------------------------------------------------------------------------
# stack


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_stack_static(axis):
    check(lambda mb, x, y: mb.stack(values=[x, y, x], axis=axis), [((2, 3), "fp32"), ((2, 3), "fp32")],
          ALL_OPSETS)


@pytest.mark.parametrize("dtype", ["int32", "bool", "fp16"])
def test_stack_dtypes(dtype):
    check(lambda mb, x, y: mb.stack(values=[x, y], axis=0), [((2,), dtype), ((2,), dtype)], ALL_OPSETS)


def test_stack_symbolic():
    res = check(lambda mb, x, y: mb.stack(values=[x, y], axis=1), [(("S", 3), "fp32"), (("S", 3), "fp32")],
                ALL_OPSETS)
    assert _out_shape(res[0]) == (_in_syms(res[0])[0], "2", "3")
    # coremltools takes the first fully static shape
    res = check(lambda mb, x, y: mb.stack(values=[x, y], axis=0), [(("S", 3), "fp32"), ((4, 3), "fp32")],
                ALL_OPSETS)
    assert _out_shape(res[0]) == ("2", "4", "3")


def test_stack_values():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    check(lambda mb, x: mb.stack(values=[a, a + 1], axis=1), [((1,), "fp32")], ALL_OPSETS)

    def build(mb, x):
        s0, s1 = mb.split(x=mb.shape(x=x), num_splits=2, axis=0)
        return mb.stack(values=[s1, s0], axis=0)

    res = check(build, [(("S", 4), "fp32")], ALL_OPSETS)
    v = res[0].mk_prog.functions["main"].outputs[0]
    assert v.val is None and [[str(d) for d in row] for row in v.sym_val] == [["4"], [_in_syms(res[0])[0]]]


def test_stack_errors():
    check_error(lambda mb, x, y: mb.stack(values=[x, y], axis=0), [((2, 3), "fp32"), ((3, 3), "fp32")],
                match=r"stack 'stack_0'.*\(3, 3\).*\(2, 3\)")
    check_error(lambda mb, x, y: mb.stack(values=[x, y], axis=0), [((2, 3), "fp32"), ((2, 3), "int32")],
                match=r"stack 'stack_0'")
    check_error(lambda mb, x, y: mb.stack(values=[x, y], axis=3), [((2, 3), "fp32"), ((2, 3), "fp32")],
                match=r"stack 'stack_0'.*axis")


# ---------------------------------------------------------------------------------------------
# tile


@pytest.mark.parametrize("dtype", ["fp32", "int32", "bool", "fp16"])
def test_tile_static(dtype):
    check(lambda mb, x: mb.tile(x=x, reps=[2, 3]), [((2, 3), dtype)], ALL_OPSETS)


def test_tile_symbolic():
    res = check(lambda mb, x: mb.tile(x=x, reps=[3, 1, 2]), [(("S", "T", 4), "fp32")], ALL_OPSETS)
    assert res[0].improved
    S, T = _in_syms(res[0])
    assert _out_shape(res[0]) == (f"3*{S}", T, "8")


def test_tile_symbolic_reps():
    def build(mb, x, y):
        return mb.tile(x=y, reps=mb.shape(x=x))

    res = check(build, [(("S", 2), "fp32"), ((3, 5), "fp32")], ALL_OPSETS)
    assert _out_shape(res[0]) == (f"3*{_in_syms(res[0])[0]}", "10")


def test_tile_unknown_reps():
    check(lambda mb, x, r: mb.tile(x=x, reps=r), [((2, 3), "fp32"), ((2,), "int32")], ALL_OPSETS)


def test_tile_values():
    a = np.array([[1, 2], [3, 4]], np.int32)
    check(lambda mb, x: mb.tile(x=a, reps=[2, 3]), [((1,), "fp32")], ALL_OPSETS)


def test_tile_errors():
    check_error(lambda mb, x: mb.tile(x=x, reps=[2]), [((2, 3), "fp32")], match=r"tile 'tile_0'.*reps")
    check_error(lambda mb, x: mb.tile(x=x, reps=[2, 0]), [((2, 3), "fp32")], match=r"tile 'tile_0'.*greater than 0")


# ---------------------------------------------------------------------------------------------
# pad


@pytest.mark.parametrize("kw", [
    dict(pad=[1, 2]),
    dict(pad=[1, 2, 0, 3]),
    dict(pad=[1, 1, 1, 1], mode="reflect"),
    dict(pad=[2, 0, 1, 1], mode="replicate"),
    dict(pad=[0, 1], constant_val=2.5),
])
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_pad_static(kw, dtype):
    if dtype == "fp16" and "constant_val" in kw:
        kw = dict(kw, constant_val=np.float16(kw["constant_val"]))
    check(lambda mb, x: mb.pad(x=x, **kw), [((3, 4), dtype)], ALL_OPSETS)


def test_pad_symbolic():
    res = check(lambda mb, x: mb.pad(x=x, pad=[1, 2, 0, 3]), [(("S", "T"), "fp32")], ALL_OPSETS)
    S, T = _in_syms(res[0])
    assert _out_shape(res[0]) == (f"{S} + 3", f"{T} + 3")


def test_pad_symbolic_pad_values():
    # pad amounts from a shape: coremltools gives a fresh symbol, milkit the exact sum
    def build(mb, x, y):
        return mb.pad(x=y, pad=mb.shape(x=x))

    res = check(build, [(("S", 2), "fp32"), (("T",), "fp32")], ALL_OPSETS)
    S, T = _in_syms(res[0])
    assert _out_shape(res[0]) == (f"{S} + {T} + 2",)


def test_pad_unknown_pad():
    check(lambda mb, x, p: mb.pad(x=x, pad=p), [((2, 3), "fp32"), ((4,), "int32")], ALL_OPSETS)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate"])
def test_pad_values(mode):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    check(lambda mb, x: mb.pad(x=a, pad=[1, 2, 3, 2], mode=mode), [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.pad(x=a, pad=[2, 1], mode=mode, constant_val=-1.0), [((1,), "fp32")], ["iOS17"])


def test_pad_errors():
    check_error(lambda mb, x: mb.pad(x=x, pad=[1, 1, 1]), [((2, 3), "fp32")], match=r"pad 'pad_0'.*even")
    check_error(lambda mb, x: mb.pad(x=x, pad=[1, -1]), [((2, 3), "fp32")], match=r"pad 'pad_0'.*non-negative")
    check_error(lambda mb, x: mb.pad(x=x, pad=[1, 1, 1, 1, 1, 1]), [((2, 3), "fp32")], match=r"pad 'pad_0'.*rank")
    check_error(lambda mb, x: mb.pad(x=x, pad=[1, 1], mode="wrap"), [((2, 3), "fp32")], match=r"pad 'pad_0'.*mode")
    check_error(lambda mb, x, p: mb.pad(x=x, pad=p), [((2, 3), "fp32"), ((2,), "int32")],
                match=r"pad 'pad_0'.*\(4,\)")
    check_error(lambda mb, x: mb.pad(x=x, pad=[1, 1]), [((2, 3), "int32")], match=r"pad 'pad_0'.*'x'")


# ---------------------------------------------------------------------------------------------
# fill, fill_like


@pytest.mark.parametrize("value", [None, 2.5, 3, True, np.float16(1.5)])
def test_fill_const_shape(value):
    kw = {} if value is None else {"value": value}
    check(lambda mb, x: mb.fill(shape=[2, 3], **kw), [((1,), "fp32")], ALL_OPSETS)


def test_fill_symbolic_shape():
    res = check(lambda mb, x: mb.fill(shape=mb.shape(x=x), value=1), [(("S", 4), "fp32")], ALL_OPSETS)
    assert _out_shape(res[0]) == (_in_syms(res[0])[0], "4")


def test_fill_unknown_shape():
    check(lambda mb, s: mb.fill(shape=s, value=1.0), [((3,), "int32")], ALL_OPSETS)


def test_fill_errors():
    check_error(lambda mb, x: mb.fill(shape=[2, -1]), [((1,), "fp32")], match=r"fill 'fill_0'.*non-negative")
    check_error(lambda mb, x: mb.fill(shape=[2.0, 1.0]), [((1,), "fp32")], match=r"fill 'fill_0'.*'shape'")


@pytest.mark.parametrize("value", [None, 2, 1.5, False])
def test_fill_like(value):
    kw = {} if value is None else {"value": value}
    check(lambda mb, x: mb.fill_like(ref_tensor=x, **kw), [(("S", 3), "int32")], ("iOS16", "iOS17", "iOS18"))


def test_fill_like_value_and_opset():
    a = np.zeros((2, 2), np.float32)
    check(lambda mb, x: mb.fill_like(ref_tensor=a, value=7), [((1,), "fp32")], ["iOS17"])
    check_error(lambda mb, x: mb.fill_like(ref_tensor=x), [((2,), "fp32")], opset="iOS15", match=r"fill_like")


# ---------------------------------------------------------------------------------------------
# shape, identity


@pytest.mark.parametrize("dtype", ["fp32", "int32", "bool", "fp16"])
def test_shape_static(dtype):
    res = check(lambda mb, x: mb.shape(x=x), [((2, 3, 4), dtype)], ALL_OPSETS)
    np.testing.assert_array_equal(res[0].mk_prog.functions["main"].outputs[0].val, [2, 3, 4])


def test_shape_symbolic_value():
    res = check(lambda mb, x: mb.shape(x=x), [(("S", 4), "fp32")], ALL_OPSETS)
    v = res[0].mk_prog.functions["main"].outputs[0]
    assert v.val is None
    assert [str(d) for d in v.sym_val] == [_in_syms(res[0])[0], "4"]
    assert v.dtype.__name__ == "int32" and _shape(v) == ("2",)


def test_shape_symbolic_arithmetic():
    # shape values feed symbolic arithmetic exactly
    res = check(lambda mb, x: mb.mul(x=mb.shape(x=x), y=2), [(("S", 4), "fp32")], ALL_OPSETS)
    S = _in_syms(res[0])[0]
    assert [str(d) for d in res[0].mk_prog.functions["main"].outputs[0].sym_val] == [f"2*{S}", "8"]


def test_shape_errors():
    check_error(lambda mb, x: mb.shape(x=x), [((2,), "int8")], match=r"shape 'shape_0'.*'x'")


@pytest.mark.parametrize("dtype", ["fp32", "int32", "bool"])
def test_identity(dtype):
    check(lambda mb, x: mb.identity(x=x), [(("S", 3), dtype)], ALL_OPSETS)


def test_identity_values():
    check(lambda mb, x: mb.identity(x=np.array([1.0, 2.0], np.float32)), [((1,), "fp32")], ALL_OPSETS)
    res = check(lambda mb, x: mb.identity(x=mb.shape(x=x)), [(("S", 4), "fp32")], ALL_OPSETS)
    S = _in_syms(res[0])[0]
    assert [str(d) for d in res[0].mk_prog.functions["main"].outputs[0].sym_val] == [S, "4"]


# ---------------------------------------------------------------------------------------------
# range_1d


@pytest.mark.parametrize("args", [(0, 10, 3), (10, 0, -2), (-3, 4, 1), (0.0, 1.0, 0.25), (1.0, -2.0, -0.5)])
def test_range_const(args):
    s, e, st = args
    check(lambda mb, x: mb.range_1d(start=s, end=e, step=st), [((1,), "fp32")], ALL_OPSETS)


def test_range_unknown():
    res = check(lambda mb, x, y: mb.range_1d(start=x, end=y, step=x), [((1,), "int32"), ((1,), "int32")],
                ALL_OPSETS)
    assert res[0].improved


def test_range_empty_has_length_zero():
    # coremltools gives shape (-5,) with an empty value; an empty range has length 0.
    f = _mk(lambda mb, x: mb.range_1d(start=5, end=0, step=1), [((1,), "fp32")])
    assert _shape(f.outputs[0]) == ("0",)
    assert f.outputs[0].val.shape == (0,)


def test_range_symbolic_length():
    # coremltools gives (S/2,) (not an integer); milkit the exact ceil-div.
    def build(mb, x):
        s0, _ = mb.split(x=mb.shape(x=x), num_splits=2, axis=0)
        return mb.range_1d(start=0, end=s0, step=2)

    f = _mk(build, [(("S", 4), "fp32")])
    assert _shape(f.outputs[0]) == ("(S + 1)//2",)  # == ceil(S / 2)

    def build2(mb, x):
        s0, s1 = mb.split(x=mb.shape(x=x), num_splits=2, axis=0)
        return mb.range_1d(start=s1, end=s0, step=1)

    f = _mk(build2, [(("S", "T"), "fp32")])
    assert _shape(f.outputs[0]) == ("max(0, S - T)",)


def test_range_errors():
    check_error(lambda mb, x: mb.range_1d(start=0, end=5.0, step=1), [((1,), "fp32")], match=r"range_1d")
    check_error(lambda mb, x: mb.range_1d(start=True, end=True, step=True), [((1,), "fp32")], match=r"range_1d")


# ---------------------------------------------------------------------------------------------
# select


@pytest.mark.parametrize("shapes", [
    [((2, 3), "bool"), ((2, 3), "fp32"), ((2, 3), "fp32")],
    [((2, 3), "bool"), ((1, 3), "int32"), ((2, 1), "int32")],
    [((2, 3), "bool"), (("S", 1, 3), "fp16"), ((2, 3), "fp16")],
    [((1,), "bool"), ((2, 3), "bool"), ((3,), "bool")],
])
def test_select_vars(shapes):
    check(lambda mb, c, a, b: mb.select(cond=c, a=a, b=b), shapes, ALL_OPSETS)


def test_select_values():
    c = np.array([[True, False, True]])
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    b = np.array([-1.0], np.float32)
    check(lambda mb, x: mb.select(cond=c, a=a, b=b), [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.select(cond=True, a=np.int32(3), b=np.int32(4)), [((1,), "fp32")], ["iOS17"])


def test_select_cond_broadcasts():
    # coremltools' type inference ignores cond's shape (a (2, 4) cond with scalar a and b gives a
    # scalar there); the op's definition and np.where broadcast all three.
    f = _mk(lambda mb, c: mb.select(cond=c, a=1.0, b=2.0), [((2, 4), "bool")])
    assert _shape(f.outputs[0]) == ("2", "4")
    f = _mk(lambda mb, x: mb.select(cond=np.array([True, False]), a=1.0, b=2.0), [((1,), "fp32")])
    np.testing.assert_array_equal(f.outputs[0].val, [1.0, 2.0])


def test_select_symbolic_values():
    f = _mk(lambda mb, x: mb.select(cond=np.array([False, True]), a=mb.shape(x=x), b=np.array([7, 7], np.int32)),
            [(("S", 4), "fp32")])
    assert [str(d) for d in f.outputs[0].sym_val] == ["7", "4"]
    f = _mk(lambda mb, x: mb.select(cond=np.array([True, False]), a=mb.shape(x=x), b=np.array([7, 7], np.int32)),
            [(("S", 4), "fp32")])
    assert [str(d) for d in f.outputs[0].sym_val] == ["S", "7"]


def test_select_errors():
    check_error(lambda mb, c, a, b: mb.select(cond=c, a=a, b=b),
                [((2, 3), "bool"), ((2, 3), "fp32"), ((4, 3), "fp32")],
                match=r"select 'select_0'.*\(2, 3\).*\(4, 3\).*dim 0")
    check_error(lambda mb, c, a, b: mb.select(cond=c, a=a, b=b),
                [((2, 3), "fp32"), ((2, 3), "fp32"), ((2, 3), "fp32")], match=r"select 'select_0'.*'cond'")
    check_error(lambda mb, c, a, b: mb.select(cond=c, a=a, b=b),
                [((2, 3), "bool"), ((2, 3), "fp32"), ((2, 3), "int32")], match=r"select 'select_0'.*'b'")
    with pytest.raises(ValueError, match=r"select 'select_0'.*cond.*\(3, 3\).*dim 0"):
        _mk(lambda mb, c, a: mb.select(cond=c, a=a, b=a), [((3, 3), "bool"), ((2, 3), "fp32")])


# ---------------------------------------------------------------------------------------------
# band_part, cumsum, flatten2d


@pytest.mark.parametrize("kw", [{}, dict(lower=0), dict(upper=0), dict(lower=1, upper=0)])
def test_band_part(kw):
    check(lambda mb, x: mb.band_part(x=x, **kw), [(("S", 3, 4), "fp32")], ALL_OPSETS)
    a = np.arange(12, dtype=np.int32).reshape(3, 4) + 1
    check(lambda mb, x: mb.band_part(x=a, **kw), [((1,), "fp32")], ["iOS17"])


@pytest.mark.parametrize("kw", [{}, dict(axis=1), dict(axis=-1, reverse=True)])
def test_cumsum(kw):
    check(lambda mb, x: mb.cumsum(x=x, **kw), [(("S", 3), "fp32")], ALL_OPSETS)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    check(lambda mb, x: mb.cumsum(x=a, **kw), [((1,), "fp32")], ["iOS17"])


def test_cumsum_exclusive_value():
    # coremltools' exclusive folding crashes (np.zeros(shape, data)); by definition the first
    # element is 0 and each element sums the previous ones.
    a = np.array([1, 2, 3], np.int32)
    f = _mk(lambda mb, x: mb.cumsum(x=a, exclusive=True), [((1,), "fp32")])
    np.testing.assert_array_equal(f.outputs[0].val, [0, 1, 3])
    f = _mk(lambda mb, x: mb.cumsum(x=a, exclusive=True, reverse=True), [((1,), "fp32")])
    np.testing.assert_array_equal(f.outputs[0].val, [5, 3, 0])


def test_cumsum_errors():
    check_error(lambda mb, x: mb.cumsum(x=x, axis=-2), [((2, 3), "fp32")], match=r"cumsum 'cumsum_0'.*axis")
    check_error(lambda mb, x: mb.cumsum(x=x), [((2, 3), "bool")], match=r"cumsum 'cumsum_0'.*'x'")


@pytest.mark.parametrize("axis", [None, 0, 2, -1, 3])
def test_flatten2d(axis):
    kw = {} if axis is None else {"axis": axis}
    res = check(lambda mb, x: mb.flatten2d(x=x, **kw), [(("S", 3, 4), "fp32")], ALL_OPSETS)
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    if axis in (0, 3):
        # coremltools' folding fails here (np.prod of an empty list is a float); milkit folds
        f = _mk(lambda mb, x: mb.flatten2d(x=a, **kw), [((1,), "fp32")])
        np.testing.assert_array_equal(f.outputs[0].val, a.reshape(1, 24) if axis == 0 else a.reshape(24, 1))
    else:
        check(lambda mb, x: mb.flatten2d(x=a, **kw), [((1,), "fp32")], ["iOS17"])
    if axis is None:
        assert _out_shape(res[0]) == (_in_syms(res[0])[0], "12")


def test_flatten2d_symbolic_value():
    # coremltools allows SYMBOL values but then reads x.val (None) and crashes; milkit reshapes
    # the symbolic value.
    f = _mk(lambda mb, x: mb.flatten2d(x=mb.shape(x=x), axis=-1), [(("S", 3), "fp32")])
    v = f.outputs[0]
    assert _shape(v) == ("1", "2")
    assert v.val is None and [str(d) for d in v.sym_val[0]] == ["S", "3"]


# ---------------------------------------------------------------------------------------------
# one_hot, non_zero


@pytest.mark.parametrize("kw", [{}, dict(axis=0), dict(axis=1), dict(on_value=2.0, off_value=-1.0),
                                dict(on_value=True, off_value=False)])
def test_one_hot(kw):
    check(lambda mb, x: mb.one_hot(indices=x, one_hot_vector_size=5, **kw), [(("S", 3), "int32")], ALL_OPSETS)


def test_one_hot_symbolic_depth():
    def build(mb, x, i):
        depth, _ = mb.split(x=mb.shape(x=x), num_splits=2, axis=0)
        return mb.one_hot(indices=i, one_hot_vector_size=depth)

    # coremltools needs a scalar depth; milkit uses the exact symbolic depth
    f = _mk(build, [(("S", 3), "fp32"), ((4,), "int32")])
    assert _shape(f.outputs[0]) == ("4", "S")
    # an unknown depth: a fresh symbol in both
    res = check(lambda mb, i, d: mb.one_hot(indices=i, one_hot_vector_size=d), [((4,), "int32"), ((1,), "int32")],
                ALL_OPSETS)
    assert all(r.improved for r in res)


def test_one_hot_errors():
    check_error(lambda mb, x: mb.one_hot(indices=x, one_hot_vector_size=5, axis=3), [((2, 3), "int32")],
                match=r"one_hot 'one_hot_0'.*axis")
    check_error(lambda mb, x: mb.one_hot(indices=x, one_hot_vector_size=-1), [((2, 3), "int32")],
                match=r"one_hot 'one_hot_0'.*non-negative")
    check_error(lambda mb, x: mb.one_hot(indices=x, one_hot_vector_size=4, on_value=1.0), [((2, 3), "int32")],
                match=r"one_hot 'one_hot_0'")


@pytest.mark.parametrize("dtype", ["fp32", "int32", "bool"])
def test_non_zero(dtype):
    check(lambda mb, x: mb.non_zero(x=x), [(("S", 3), dtype)], ALL_OPSETS)


def test_non_zero_value():
    a = np.array([[0, 1, 0], [2, 0, 3]], np.float32)
    res = check(lambda mb, x: mb.non_zero(x=a), [((1,), "fp32")], ALL_OPSETS)
    np.testing.assert_array_equal(res[0].mk_prog.functions["main"].outputs[0].val, [[0, 1], [1, 0], [1, 2]])


# ---------------------------------------------------------------------------------------------
# argsort, topk


@pytest.mark.parametrize("kw", [{}, dict(axis=0), dict(ascending=True)])
def test_argsort(kw):
    check(lambda mb, x: mb.argsort(x=x, **kw), [(("S", 4), "fp32")], ALL_OPSETS)
    a = np.array([[3.0, 1.0, 2.0, 5.0], [0.0, -1.0, 7.0, 4.0]], np.float32)
    check(lambda mb, x: mb.argsort(x=a, **kw), [((1,), "fp32")], ALL_OPSETS)


@pytest.mark.parametrize("kw", [{}, dict(k=2), dict(k=2, axis=0), dict(k=3, ascending=True)])
def test_topk(kw):
    res = check(lambda mb, x: mb.topk(x=x, **kw), [((3, 4), "fp32")], ALL_OPSETS)
    assert [v.name for v in res[0].mk_prog.functions["main"].outputs[0:1]]
    a = np.array([[3.0, 1.0, 2.0, 5.0], [0.0, -1.0, 7.0, 4.0], [1.0, 2.0, 3.0, 4.0]], np.float32)
    check(lambda mb, x: mb.topk(x=a, **kw), [((1,), "fp32")], ALL_OPSETS)


def test_topk_names_and_versions():
    res = check(lambda mb, x: mb.topk(x=x, k=2), [(("S", 4), "int32")], ALL_OPSETS)
    for r in res:
        names = [o.name for op in r.mk_prog.functions["main"].operations if op.op_type == "topk" for o in op.outputs]
        assert names == ["topk_0_0", "topk_0_1"]
    check(lambda mb, x: mb.topk(x=x, k=2, return_indices=False), [((3, 4), "fp32")], ("iOS16", "iOS17", "iOS18"))
    check(lambda mb, x: mb.topk(x=x, k=2, sort=False), [((3, 4), "fp32")], ("iOS16", "iOS17", "iOS18"))
    check(lambda mb, x: mb.topk(x=x, k=2, output_indices_dtype="uint16"), [((3, 4), "fp16")], ("iOS17", "iOS18"))
    check(lambda mb, x: mb.topk(x=x, k=np.int16(2)), [((3, 4), "int8")], ("iOS17", "iOS18"))


def test_topk_errors():
    check_error(lambda mb, x: mb.topk(x=x, k=5), [((3, 4), "fp32")], match=r"topk 'topk_0'.*K=5")
    check_error(lambda mb, x: mb.topk(x=x, k=2, return_indices=False, output_indices_dtype="int32"),
                [((3, 4), "fp32")], match=r"topk 'topk_0'.*output_indices_dtype")
    check_error(lambda mb, x: mb.topk(x=x, k=2, output_indices_dtype="int8"), [((3, 4), "fp32")],
                match=r"topk 'topk_0'.*output_indices_dtype")
    check_error(lambda mb, x: mb.topk(x=x, return_indices=False), [((3, 4), "fp32")], opset="iOS15",
                match=r"topk.*return_indices")


# ---------------------------------------------------------------------------------------------
# non_maximum_suppression


def test_nms_ios15():
    check(lambda mb, b, s: mb.non_maximum_suppression(boxes=b, scores=s, iou_threshold=0.5, score_threshold=0.1,
                                                      max_boxes=7),
          [(("N", 20, 4), "fp32"), (("N", 20, 3), "fp32")], ("iOS15", "iOS16"))


def test_nms_ios17():
    check(lambda mb, b, s: mb.non_maximum_suppression(boxes=b, scores=s, iou_threshold=0.5, max_boxes=7,
                                                      per_class_suppression=True),
          [(("N", 4, 20), "fp16"), (("N", 3, 20), "fp16")], ("iOS17", "iOS18"))
    check_error(lambda mb, b, s: mb.non_maximum_suppression(boxes=b, scores=s, iou_threshold=0.5,
                                                            score_threshold=0.1, max_boxes=7),
                [((1, 4, 20), "fp32"), ((1, 3, 20), "fp32")], match=r"score_threshold")
