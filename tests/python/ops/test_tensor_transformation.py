"""Parity of the tensor_transformation ops with coremltools, and milkit's exact symbolic shapes."""

import numpy as np
import pytest
from support.builders import mk_build
from support.parity import ALL_OPSETS, check, check_error


def mk_out(prog, i=0):
    return [str(d) for d in prog.functions["main"].outputs[i].shape]


# ---------------------------------------------------------------------------------------------
# reshape


@pytest.mark.parametrize("shape,spec", [
    ([3, 2, 2], ((2, 6), "fp32")),
    ([-1], ((2, 3, 4), "fp16")),
    ([4, -1], ((2, 6), "int32")),
    ([0, -1], ((2, 3, 4), "fp32")),
    ([6, 4], ((2, 3, 4), "bool")),
    ([1, 1], ((1,), "fp32")),
])
def test_reshape_static(shape, spec):
    check(lambda mb, x: mb.reshape(x=x, shape=shape), [spec], ALL_OPSETS)


def test_reshape_symbolic_minus_one():
    # coremltools solves these exactly too: parity over the symbolic expressions
    for shape in ([-1], [2, -1], [-1, 2, 2], [-1, 6]):
        res = check(lambda mb, x: mb.reshape(x=x, shape=shape), [(("S", 4, 3), "fp32")], ALL_OPSETS)
        assert res[-1].improved == []


def test_reshape_symbolic_exact_strings():
    p = mk_build(lambda mb, x: mb.reshape(x=x, shape=[-1]), [(("S", 4), "fp32")])
    assert mk_out(p) == ["4*S"]
    p = mk_build(lambda mb, x: mb.reshape(x=x, shape=[2, -1]), [(("S", 4), "fp32")])
    assert mk_out(p) == ["2", "2*S"]
    p = mk_build(lambda mb, x: mb.reshape(x=x, shape=[-1, 2, 2]), [(("S", 4), "fp32")])
    assert mk_out(p) == ["S", "2", "2"]


def test_reshape_by_runtime_shape():
    # a runtime shape of length 3: nothing is known, fresh dims as in coremltools
    res = check(lambda mb, x, s: mb.reshape(x=x, shape=s), [(("S", 4), "fp32"), ((3,), "int32")],
                ALL_OPSETS)
    assert len(res[-1].improved) == 3
    # a runtime shape of length 1: the single dim holds every element (coremltools: fresh)
    res = check(lambda mb, x, s: mb.reshape(x=x, shape=s), [(("S", 4), "fp32"), ((1,), "int32")],
                ALL_OPSETS)
    assert len(res[-1].improved) == 1
    p = mk_build(lambda mb, x, s: mb.reshape(x=x, shape=s), [(("S", 4), "fp32"), ((1,), "int32")])
    assert mk_out(p) == ["4*S"]


def test_reshape_const_fold():
    a = np.arange(12, dtype=np.float32)
    check(lambda mb, x: mb.reshape(x=a, shape=[3, -1]), [((1,), "fp32")], ALL_OPSETS)
    b = np.arange(6, dtype=np.int32).reshape(2, 3)
    check(lambda mb, x: mb.reshape(x=b, shape=[0, 3]), [((1,), "fp32")], ALL_OPSETS)


def test_reshape_ios17_zero_rule_and_dtypes():
    # iOS17: 0 copies the dim right-aligned; out of range -> 1
    check(lambda mb, x: mb.reshape(x=x, shape=[1, 0, -1, 0]), [((2, 50), "fp32")], ["iOS17", "iOS18"])
    check(lambda mb, x: mb.reshape(x=x, shape=np.array([-1], np.int16)), [((2, 3), "int8")],
          ["iOS17", "iOS18"])
    check(lambda mb, x: mb.reshape(x=x, shape=[3, 2]), [((2, 3), "uint16")], ["iOS17", "iOS18"])


def test_reshape_errors():
    e = check_error(lambda mb, x: mb.reshape(x=x, shape=[4, -1]), [((2, 3), "fp32")],
                    match=r"reshape 'reshape_0'.*\(2, 3\).*6.*\[4, 1\]|reshape 'reshape_0'.*6")
    assert isinstance(e, ValueError)
    check_error(lambda mb, x: mb.reshape(x=x, shape=[-1, -1]), [((2, 3), "fp32")],
                match=r"reshape 'reshape_0'.*only one dimension equal to -1")
    check_error(lambda mb, x: mb.reshape(x=x, shape=[5]), [((2, 3), "fp32")],
                match=r"reshape 'reshape_0'.*\(2, 3\)")
    # iOS15: 0 needs the same rank
    check_error(lambda mb, x: mb.reshape(x=x, shape=[1, 0, -1, 0]), [((2, 50), "fp32")], opset="iOS16",
                match=r"reshape 'reshape_0'.*0")
    # int8 x only from iOS17
    check_error(lambda mb, x: mb.reshape(x=x, shape=[-1]), [((2, 3), "int8")], opset="iOS16",
                match=r"reshape 'reshape_0'.*'x'.*int8")


def test_reshape_proven_symbolic_conflict_is_error():
    # coremltools accepts (its dynamic path never checks the volume); 4*S can never be 15
    with pytest.raises(ValueError, match=r"reshape 'reshape_0'.*4\*S.*15"):
        mk_build(lambda mb, x: mb.reshape(x=x, shape=[3, 5]), [(("S", 4), "fp32")])


def test_reshape_symbolic_zero_copies_dim():
    # coremltools' dynamic path ignores 0 and gives dim 0 (a bug); the op definition says 0
    # copies the corresponding dim of x
    p = mk_build(lambda mb, x: mb.reshape(x=x, shape=[0, -1]), [(("S", 2, 3), "fp32")], "iOS17")
    assert mk_out(p) == ["2", "3*S"]
    p = mk_build(lambda mb, x: mb.reshape(x=x, shape=[0, -1]), [(("S", 6), "fp32")], "iOS16")
    assert mk_out(p) == ["S", "6"]


# ---------------------------------------------------------------------------------------------
# transpose


@pytest.mark.parametrize("perm,spec", [
    ([1, 0], ((2, "S"), "fp32")),
    ([2, 0, 1], ((2, 3, 4), "fp16")),
    ([-1, 0, 1], (("A", 3, "B"), "int32")),
    ([0], ((5,), "bool")),
])
def test_transpose(perm, spec):
    res = check(lambda mb, x: mb.transpose(x=x, perm=perm), [spec], ALL_OPSETS)
    assert res[-1].improved == []


def test_transpose_fold_and_dtypes():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    check(lambda mb, x: mb.transpose(x=a, perm=[2, 0, 1]), [((1,), "fp32")], ALL_OPSETS)
    b = np.arange(6, dtype=np.int32).reshape(2, 3)
    check(lambda mb, x: mb.transpose(x=b, perm=[1, 0]), [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.transpose(x=x, perm=[1, 0]), [((2, 3), "uint8")], ["iOS17", "iOS18"])


def test_transpose_errors():
    check_error(lambda mb, x: mb.transpose(x=x, perm=[1, 0, 2]), [((2, 3), "fp32")],
                match=r"transpose 'transpose_0'.*'perm'.*3 != 2")
    check_error(lambda mb, x: mb.transpose(x=x, perm=[0, 1]), [((2, 3), "int16")], opset="iOS16",
                match=r"transpose 'transpose_0'.*'x'.*int16")
    # coremltools indexes the shape with a non-permutation and accepts it; it is not a perm
    with pytest.raises(ValueError, match=r"transpose 'transpose_0'.*not a permutation"):
        mk_build(lambda mb, x: mb.transpose(x=x, perm=[0, 0]), [((2, 3), "fp32")])


# ---------------------------------------------------------------------------------------------
# squeeze / expand_dims


@pytest.mark.parametrize("kw,spec", [
    ({}, ((1, "S", 1, 3), "fp32")),
    ({"axes": [0]}, ((1, "S", 1, 3), "fp16")),
    ({"axes": [-2, 0]}, ((1, "S", 1, 3), "int32")),
    ({"axes": [1]}, ((1, 2, 3), "bool")),  # a non-1 dim is kept (PyTorch semantics)
    ({}, ((1, 1), "fp32")),  # to a scalar
])
def test_squeeze(kw, spec):
    check(lambda mb, x: mb.squeeze(x=x, **kw), [spec], ALL_OPSETS)


def test_squeeze_fold_and_errors():
    a = np.arange(6, dtype=np.float32).reshape(1, 6, 1)
    check(lambda mb, x: mb.squeeze(x=a), [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.squeeze(x=a, axes=[-1]), [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.squeeze(x=x), [((1, 4), "int8")], ["iOS17", "iOS18"])
    check_error(lambda mb, x: mb.squeeze(x=x, axes=[3]), [((1, 2, 3), "fp32")],
                match=r"squeeze 'squeeze_0'.*'axes'.*3")


@pytest.mark.parametrize("axes,spec", [
    ([0], (("S", 3), "fp32")),
    ([-1], (("S", 3), "fp16")),
    ([0, 3], ((2, 3), "int32")),
    ([1, -1], (("S",), "bool")),
])
def test_expand_dims(axes, spec):
    check(lambda mb, x: mb.expand_dims(x=x, axes=axes), [spec], ALL_OPSETS)


def test_expand_dims_fold_scalar_and_errors():
    check(lambda mb, x: mb.expand_dims(x=np.float32(2.5), axes=[0]), [((1,), "fp32")], ALL_OPSETS)
    b = np.arange(6, dtype=np.int32).reshape(2, 3)
    check(lambda mb, x: mb.expand_dims(x=b, axes=[1]), [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.expand_dims(x=x, axes=[0]), [((2,), "uint16")], ["iOS17", "iOS18"])
    check_error(lambda mb, x: mb.expand_dims(x=x, axes=[3]), [((2, 3), "fp32")],
                match=r"expand_dims 'expand_dims_0'.*'axes'.*3.*out of bounds")


# ---------------------------------------------------------------------------------------------
# slice_by_index


@pytest.mark.parametrize("kw,spec", [
    (dict(begin=[0, 1], end=[2, 3]), ((4, 5), "fp32")),
    (dict(begin=[1, 0], end=[0, 0], end_mask=[True, True]), ((4, 5), "fp16")),
    (dict(begin=[0, 0], end=[0, 0], begin_mask=[True, True], end_mask=[True, True], stride=[2, 3]),
     ((5, 7), "int32")),
    (dict(begin=[-1, 0], end=[0, 2], end_mask=[True, False]), ((4, 5), "bool")),
    (dict(begin=[-1, -1], end=[-2, 0], stride=[-1, 1], end_mask=[False, True]), ((4, 5), "fp32")),
    (dict(begin=[0, 0], end=[0, 0], begin_mask=[True, True], end_mask=[True, True], stride=[-1, -2]),
     ((4, 5), "fp32")),
    (dict(begin=[1, 2], end=[0, 0], squeeze_mask=[True, False], end_mask=[False, True]), ((4, 5), "fp32")),
    (dict(begin=[1, 2], end=[0, 0], squeeze_mask=[True, True]), ((4, 5), "fp32")),
    (dict(begin=[2, 0], end=[3, 2]), (("S", "T"), "fp32")),  # deterministic 1 and 2 on symbols
    (dict(begin=[0, 0], end=[0, 0], begin_mask=[True, True], end_mask=[True, True]), (("S", 4), "fp32")),
])
def test_slice_by_index(kw, spec):
    check(lambda mb, x: mb.slice_by_index(x=x, **kw), [spec], ALL_OPSETS)


def test_slice_by_index_symbolic_exact():
    # x[1:, :-1, ::2, 1::3] over symbols: exact expressions (coremltools: fresh symbols)
    build = lambda mb, x: mb.slice_by_index(  # noqa: E731
        x=x, begin=[1, 0, 0, 1], end=[0, -1, 0, 0], stride=[1, 1, 2, 3],
        begin_mask=[False, True, True, False], end_mask=[True, False, True, True])
    res = check(build, [(("A", "B", "C", "D"), "fp32")], ALL_OPSETS)
    assert len(res[-1].improved) == 4
    p = mk_build(build, [(("A", "B", "C", "D"), "fp32")])
    assert mk_out(p)[:2] == ["A - 1", "B - 1"]
    from milkit.symbolic import to_sympy
    d2, d3 = p.functions["main"].outputs[0].shape[2:]
    for n in range(1, 12):
        assert to_sympy(d2).subs({s: n for s in to_sympy(d2).free_symbols}) == len(range(n)[::2])
        assert to_sympy(d3).subs({s: n for s in to_sympy(d3).free_symbols}) == len(range(n)[1::3])


# clamping is exact: x[0:3] and x[-3:] over S are min(3, S)
@pytest.mark.parametrize("kw,want", [
    pytest.param(dict(begin=[0], end=[3]), "min(3, S)", id="head_3"),
    pytest.param(dict(begin=[-3], end=[0], end_mask=[True]), "min(3, S)", id="tail_3"),
    pytest.param(dict(begin=[1], end=[3]), "min(2, S - 1)", id="from_1_to_3"),
    pytest.param(dict(begin=[-3], end=[-1]), "min(2, S - 1)", id="from_minus_3_to_minus_1"),
    pytest.param(dict(begin=[0], end=[-1]), "S - 1", id="all_but_last"),
    pytest.param(dict(begin=[-1], end=[0], end_mask=[True], stride=[-1]), "S", id="reversed"),
])
def test_slice_by_index_symbolic_clamped(kw, want):
    p = mk_build(lambda mb, x: mb.slice_by_index(x=x, **kw), [(("S",), "fp32")])
    assert mk_out(p) == [want], kw
    check(lambda mb, x: mb.slice_by_index(x=x, **kw), [(("S",), "fp32")], ["iOS17"])


def test_slice_by_index_negative_indices_concrete():
    # coremltools' shape solver overwrites the const begin/end in place for negative indices on
    # known dims (so a parity check of the consts cannot pass); milkit keeps them and follows
    # numpy (for x[-1:-5:-1] on 4 elements coremltools' clamping would give 3, numpy 4)
    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    p = mk_build(lambda mb, x: mb.slice_by_index(x=a, begin=[-1, 0], end=[-5, 5], stride=[-1, 1]),
                 [((1,), "fp32")])
    out = p.functions["main"].outputs[0]
    assert mk_out(p) == ["4", "5"]
    np.testing.assert_array_equal(out.val, a[-1:-5:-1, 0:5])
    p = mk_build(lambda mb, x: mb.slice_by_index(x=a, begin=[-3, -4], end=[-1, 0], end_mask=[False, True]),
                 [((1,), "fp32")])
    np.testing.assert_array_equal(p.functions["main"].outputs[0].val, a[-3:-1, -4:])


def test_slice_by_index_fold():
    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    check(lambda mb, x: mb.slice_by_index(x=a, begin=[1, 0], end=[3, 5], stride=[1, 2]),
          [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.slice_by_index(x=a, begin=[3, 0], end=[0, 5], stride=[-1, 2], end_mask=[True, False]),
          [((1,), "fp32")], ALL_OPSETS)
    b = np.arange(6, dtype=np.int32)
    check(lambda mb, x: mb.slice_by_index(x=b, begin=[2], end=[0], squeeze_mask=[True]),
          [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.slice_by_index(x=b, begin=[4], end=[0], end_mask=[True]),
          [((1,), "fp32")], ALL_OPSETS)


def test_slice_by_index_runtime_begin_and_dtypes():
    check(lambda mb, x, b: mb.slice_by_index(x=x, begin=b, end=[4, 5]), [((4, 5), "fp32"), ((2,), "int32")],
          ALL_OPSETS)
    check(lambda mb, x, b: mb.slice_by_index(x=x, begin=b, end=[4, 5], begin_mask=[True, False]),
          [((4, 5), "fp32"), ((2,), "int32")], ALL_OPSETS)
    check(lambda mb, x: mb.slice_by_index(x=x, begin=np.array([1, 0], np.int16), end=np.array([3, 2], np.int16),
                                          stride=np.array([1, 1], np.int16)),
          [((4, 5), "int8")], ["iOS17", "iOS18"])


def test_slice_by_index_errors():
    check_error(lambda mb, x: mb.slice_by_index(x=x, begin=[3, 0], end=[1, 2]), [((4, 5), "fp32")],
                match=r"slice_by_index 'slice_by_index_0'.*dimension 0.*\(3, 1, 1\)")
    check_error(lambda mb, x: mb.slice_by_index(x=x, begin=[0], end=[1, 2]), [((4, 5), "fp32")],
                match=r"slice_by_index 'slice_by_index_0'.*'begin'.*rank")
    # U domain: begin int16 and stride int32 must match at iOS17
    check_error(lambda mb, x: mb.slice_by_index(x=x, begin=np.array([0], np.int16), end=np.array([1], np.int16),
                                                stride=[1]),
                [((4,), "fp32")], match=r"slice_by_index 'slice_by_index_0'.*'stride'")


def test_slice_by_index_zero_stride_is_error():
    # coremltools divides by zero; a zero stride is invalid
    with pytest.raises(ValueError, match=r"slice_by_index 'slice_by_index_0'.*'stride'"):
        mk_build(lambda mb, x: mb.slice_by_index(x=x, begin=[0], end=[2], stride=[0]), [((4,), "fp32")])


# ---------------------------------------------------------------------------------------------
# slice_by_size


@pytest.mark.parametrize("begin,size,spec", [
    ([1, 0], [2, 3], ((4, 5), "fp32")),
    ([1, 2], [-1, -1], ((4, 5), "fp16")),
    ([1, 2], [-1, 2], (("S", 5), "int32")),  # size -1: dim - begin
    ([0, 0], [1, -1], (("S", "T"), "bool")),
])
def test_slice_by_size(begin, size, spec):
    res = check(lambda mb, x: mb.slice_by_size(x=x, begin=begin, size=size), [spec], ALL_OPSETS)
    assert res[-1].improved == []


def test_slice_by_size_symbolic_strings_and_runtime():
    p = mk_build(lambda mb, x: mb.slice_by_size(x=x, begin=[1, 2], size=[-1, 2]), [(("S", 5), "fp32")])
    assert mk_out(p) == ["S - 1", "2"]
    check(lambda mb, x, b: mb.slice_by_size(x=x, begin=b, size=[2, 2]), [((4, 5), "fp32"), ((2,), "int32")],
          ALL_OPSETS)
    check(lambda mb, x, s: mb.slice_by_size(x=x, begin=[0, 0], size=s), [((4, 5), "fp32"), ((2,), "int32")],
          ALL_OPSETS)
    check(lambda mb, x: mb.slice_by_size(x=x, begin=np.array([0], np.int8), size=np.array([-1], np.int8)),
          [((4,), "uint8")], ["iOS17", "iOS18"])


def test_slice_by_size_fold():
    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    check(lambda mb, x: mb.slice_by_size(x=a, begin=[1, 1], size=[2, -1]), [((1,), "fp32")], ALL_OPSETS)
    b = np.arange(6, dtype=np.int32)
    check(lambda mb, x: mb.slice_by_size(x=b, begin=[2], size=[3]), [((1,), "fp32")], ALL_OPSETS)


def test_slice_by_size_errors():
    check_error(lambda mb, x: mb.slice_by_size(x=x, begin=[0], size=[1, 1]), [((4, 5), "fp32")],
                match=r"slice_by_size 'slice_by_size_0'.*'begin'")
    check_error(lambda mb, x: mb.slice_by_size(x=x, begin=[[0, 0]], size=[1, 1]), [((4, 5), "fp32")],
                match=r"slice_by_size 'slice_by_size_0'.*'begin'.*1-D")


def test_slice_by_size_negative_begin_minus_one():
    # coremltools gives dim - begin = 7 for begin -2 (a bug); numpy/runtime gives 2
    p = mk_build(lambda mb, x: mb.slice_by_size(x=x, begin=[-2], size=[-1]), [((5,), "fp32")])
    assert mk_out(p) == ["2"]


# ---------------------------------------------------------------------------------------------
# reverse, reverse_sequence


@pytest.mark.parametrize("kw,spec", [
    ({}, (("S", 3), "fp32")),
    ({"axes": [0]}, ((2, 3), "int32")),
    ({"axes": [-1]}, ((2, 3), "bool")),
])
def test_reverse(kw, spec):
    check(lambda mb, x: mb.reverse(x=x, **kw), [spec], ALL_OPSETS)


def test_reverse_fold_and_errors():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    check(lambda mb, x: mb.reverse(x=a), [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.reverse(x=a, axes=[1]), [((1,), "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.reverse(x=x), [((3,), "int16")], ["iOS17", "iOS18"])
    check_error(lambda mb, x: mb.reverse(x=x), [((3,), "int16")], opset="iOS16",
                match=r"reverse 'reverse_0'.*'x'.*int16")


def test_reverse_sequence():
    check(lambda mb, x, l: mb.reverse_sequence(x=x, lengths=l, seq_axis=1, batch_axis=0),
          [((2, "S", 3), "fp32"), ((2,), "int32")], ALL_OPSETS)
    check(lambda mb, x, l: mb.reverse_sequence(x=x, lengths=l), [((2, 3), "int32"), ((2,), "int32")],
          ALL_OPSETS)
    check(lambda mb, x, l: mb.reverse_sequence(x=x, lengths=l), [((2, 3), "fp16"), ((2,), "int16")],
          ["iOS17", "iOS18"])


# ---------------------------------------------------------------------------------------------
# reshape_like (iOS16+)


def test_reshape_like():
    def build(mb, x, r0, r1):
        return mb.reshape_like(x=x, ref_tensors=(r0, r1), begins=(0, 1), ends=(2, 0), end_masks=(False, True))
    check(build, [((6, 10), "fp32"), ((2, 3, 4), "fp32"), ((1, 5, 2), "int32")], ["iOS16", "iOS17", "iOS18"])
    check(build, [((6, 10), "int8"), ((2, 3, 4), "fp32"), ((1, 5, 2), "fp32")], ["iOS17", "iOS18"])
    check_error(build, [((6, 11), "fp32"), ((2, 3, 4), "fp32"), ((1, 5, 2), "fp32")], opset="iOS16",
                match=r"reshape_like 'reshape_like_0'.*\(6, 11\).*not consistent")
    check_error(build, [((6, 10), "fp32"), ((2, "S", 4), "fp32"), ((1, 5, 2), "fp32")], opset="iOS16",
                match=r"reshape_like 'reshape_like_0'.*symbolic")
    check_error(build, [((6, 10), "fp32"), ((2, 3, 4), "fp32"), ((1, 5, 2), "fp32")], opset="iOS15",
                match=r"reshape_like.*iOS16")


# ---------------------------------------------------------------------------------------------
# depth_to_space, space_to_depth, pixel_shuffle, pixel_unshuffle, space_to_batch, batch_to_space


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_depth_space(dtype):
    check(lambda mb, x: mb.depth_to_space(x=x, block_size=2), [((1, 8, 3, 5), dtype)], ALL_OPSETS)
    check(lambda mb, x: mb.space_to_depth(x=x, block_size=2), [((1, 2, 4, 6), dtype)], ALL_OPSETS)
    check(lambda mb, x: mb.pixel_shuffle(x=x, upscale_factor=3), [((2, 9, 3, 5), dtype)], ALL_OPSETS)
    check(lambda mb, x: mb.pixel_unshuffle(x=x, downscale_factor=np.uint32(2)), [((1, 3, 4, 6), dtype)],
          ["iOS16", "iOS17", "iOS18"])
    # symbolic batch and spatial dims
    check(lambda mb, x: mb.depth_to_space(x=x, block_size=2), [(("B", 8, "H", 5), dtype)], ALL_OPSETS)
    p = mk_build(lambda mb, x: mb.depth_to_space(x=x, block_size=2), [(("B", 8, "H", 5), dtype)])
    assert mk_out(p) == ["B", "2", "2*H", "10"]
    check(lambda mb, x: mb.space_to_depth(x=x, block_size=2), [(("B", 2, 4, 6), dtype)], ALL_OPSETS)


def test_depth_space_errors():
    check_error(lambda mb, x: mb.depth_to_space(x=x, block_size=2), [((8, 3, 5), "fp32")],
                match=r"depth_to_space 'depth_to_space_0'.*rank-4")
    check_error(lambda mb, x: mb.pixel_shuffle(x=x, upscale_factor=2), [((1, 4, 3, 5), "int32")],
                match=r"pixel_shuffle 'pixel_shuffle_0'.*'x'.*int32")
    check_error(lambda mb, x: mb.pixel_unshuffle(x=x, downscale_factor=2), [((1, 4, 4, 4), "fp32")],
                match=r"pixel_unshuffle 'pixel_unshuffle_0'.*'downscale_factor'.*int32")
    # coremltools floors 6 // 4 silently; 6 channels cannot be split into blocks of 4
    with pytest.raises(ValueError, match=r"depth_to_space 'depth_to_space_0'.*6.*divisible"):
        mk_build(lambda mb, x: mb.depth_to_space(x=x, block_size=2), [((1, 6, 3, 5), "fp32")])


def test_space_batch():
    check(lambda mb, x: mb.space_to_batch(x=x, block_shape=[2, 3], paddings=[[1, 1], [0, 3]]),
          [((2, 3, 4, 6), "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.batch_to_space(x=x, block_shape=[2, 3], crops=[[1, 1], [0, 3]]),
          [((12, 3, 4, 6), "fp16")], ALL_OPSETS)
    check(lambda mb, x: mb.space_to_batch(x=x, block_shape=[2, 2], paddings=[[0, 0], [0, 0]]),
          [(("B", 3, 4, 6), "fp32")], ALL_OPSETS)
    check_error(lambda mb, x: mb.batch_to_space(x=x, block_shape=[2, 3], crops=[[0, 0], [0, 0]]),
                [((5, 3, 4, 6), "fp32")], match=r"batch_to_space 'batch_to_space_0'.*divisible")
    check_error(lambda mb, x: mb.space_to_batch(x=x, block_shape=[2, 2], paddings=[[0, 0], [0, 0]]),
                [((5, 3, 4), "fp32")], match=r"space_to_batch 'space_to_batch_0'.*rank 4")
    check_error(lambda mb, x: mb.space_to_batch(x=x, block_shape=[2, 2, 2], paddings=[[0, 0], [0, 0], [0, 0]]),
                [((5, 3, 4, 4), "fp32")], match=r"space_to_batch 'space_to_batch_0'.*2")


def test_batch_to_space_symbolic_batch():
    # coremltools gives B/4 (a rational); milkit B//4 (exact when the batch is divisible)
    p = mk_build(lambda mb, x: mb.batch_to_space(x=x, block_shape=[2, 2], crops=[[0, 0], [0, 0]]),
                 [(("B", 3, 4, 6), "fp32")])
    assert mk_out(p) == ["B//4", "3", "8", "12"]


# ---------------------------------------------------------------------------------------------
# sliding_windows


def test_sliding_windows():
    check(lambda mb, x: mb.sliding_windows(x=x, axis=1, size=3), [((2, 8, 4), "fp32")], ALL_OPSETS)
    check(lambda mb, x: mb.sliding_windows(x=x, axis=-1, size=2, stride=2), [((2, 8, 5), "int32")], ALL_OPSETS)
    check(lambda mb, x: mb.sliding_windows(x=x, axis=0, size=2), [(("S", 4), "fp16")], ALL_OPSETS)
    # (S - 2)//3 + 1: coremltools' floor(S/3 - 2/3) + 1 is the same, but sympy cannot prove it
    p = mk_build(lambda mb, x: mb.sliding_windows(x=x, axis=0, size=2, stride=3), [(("S", 4), "fp16")])
    from milkit.symbolic import to_sympy
    d = to_sympy(p.functions["main"].outputs[0].shape[0])
    for n in range(2, 12):
        assert d.subs({s: n for s in d.free_symbols}) == (n - 2) // 3 + 1
    check(lambda mb, x: mb.sliding_windows(x=x, axis=0, size=2), [((4,), "bool")], ["iOS17", "iOS18"])
    check_error(lambda mb, x: mb.sliding_windows(x=x, axis=0, size=2), [((4,), "bool")], opset="iOS16",
                match=r"sliding_windows 'sliding_windows_0'.*'x'.*bool")


# ---------------------------------------------------------------------------------------------
# slice_update (iOS18)


def test_slice_update():
    check(lambda mb, x, u: mb.slice_update(x=x, update=u, begin=[0, 1], end=[2, 3]),
          [((4, 5), "fp32"), ((2, 2), "fp32")], ["iOS18"])
    check(lambda mb, x, u: mb.slice_update(x=x, update=u, begin=[1, 0], end=[0, 5], squeeze_mask=[True, False]),
          [(("S", 5), "int32"), ((5,), "int32")], ["iOS18"])
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    u = -np.ones((3, 2), np.float32)
    check(lambda mb, x: mb.slice_update(x=a, update=u, begin=[0, 0], end=[3, 4], stride=[1, 2]),
          [((1,), "fp32")], ["iOS18"])
    check_error(lambda mb, x, u: mb.slice_update(x=x, update=u, begin=[0, 1], end=[2, 3]),
                [((4, 5), "fp32"), ((2, 3), "fp32")], opset="iOS18",
                match=r"slice_update 'slice_update_0'.*'update'.*\(2, 2\)")
    check_error(lambda mb, x, u: mb.slice_update(x=x, update=u, begin=[0, 1], end=[2, 3]),
                [((4, 5), "fp32"), ((2, 2), "fp32")], opset="iOS17", match=r"slice_update.*iOS18")
