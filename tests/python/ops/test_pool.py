"""Parity of avg_pool, max_pool and l2_pool with coremltools, at every opset, plus exact symbolic
output sizes (ceil_mode included) where coremltools gives up."""

import pytest
from support.parity import ALL_OPSETS, check, check_error
from support.symeval import assert_exact

POOLS = ["avg_pool", "max_pool", "l2_pool"]


def pool(mb, op, x, **kw):
    return getattr(mb, op)(x=x, **kw)


@pytest.mark.parametrize("op", POOLS)
@pytest.mark.parametrize("kw", [
    dict(kernel_sizes=[2, 2], pad_type="valid"),
    dict(kernel_sizes=[3, 3], strides=[2, 2], pad_type="valid"),
    dict(kernel_sizes=[3, 2], strides=[2, 3], pad_type="same"),
    dict(kernel_sizes=[2, 2], strides=[2, 2], pad_type="same_lower"),
    dict(kernel_sizes=[3, 3], strides=[2, 2], pad_type="custom", pad=[1, 1, 0, 2]),
    dict(kernel_sizes=[3, 3], strides=[2, 2], pad_type="valid", ceil_mode=True),
    dict(kernel_sizes=[3, 3], strides=[2, 2], pad_type="custom", pad=[1, 1, 1, 1], ceil_mode=True),
    dict(kernel_sizes=[2, 2], strides=[2, 2], pad_type="same_lower", ceil_mode=True),
    dict(kernel_sizes=[3, 3], pad_type="SAME"),
])
def test_pool2d(op, kw):
    check(lambda mb, x: pool(mb, op, x, **kw), [((2, 3, 11, 10), "fp32")], ALL_OPSETS)


@pytest.mark.parametrize("op", POOLS)
def test_pool1d_and_fp16(op):
    check(lambda mb, x: pool(mb, op, x, kernel_sizes=[3], strides=[2], pad_type="custom", pad=[1, 1], ceil_mode=True),
          [((1, 4, 13), "fp16")], ALL_OPSETS)
    check(lambda mb, x: pool(mb, op, x, kernel_sizes=[4], pad_type="same"), [((1, 4, 13), "fp32")], ALL_OPSETS)


@pytest.mark.parametrize("op", ["avg_pool", "max_pool"])
def test_pool3d(op):
    check(lambda mb, x: pool(mb, op, x, kernel_sizes=[2, 3, 2], strides=[1, 2, 2], pad_type="same"),
          [((1, 2, 5, 6, 7), "fp32")], ALL_OPSETS)
    check(lambda mb, x: pool(mb, op, x, kernel_sizes=[2, 2, 2], pad_type="custom", pad=[0, 1, 1, 0, 2, 2]),
          [((1, 2, 5, 6, 7), "fp32")], ALL_OPSETS)


def test_avg_pool_exclude_padding_and_default_order():
    for ex in (True, False):
        check(lambda mb, x: mb.avg_pool(x=x, kernel_sizes=[3, 3], pad_type="custom", pad=[1, 1, 1, 1],
                                        exclude_padding_from_average=ex), [((1, 3, 8, 8), "fp32")], ALL_OPSETS)
    res = check(lambda mb, x: mb.avg_pool(x=x, kernel_sizes=[2, 2], pad_type="valid"), [((1, 3, 8, 8), "fp32")],
                ["iOS17"])[0]
    names = [o.name for o in res.mk_prog.functions["main"].operations]
    assert names == ["avg_pool_0_kernel_sizes_0", "avg_pool_0_pad_type_0", "avg_pool_0_strides_0", "avg_pool_0_pad_0",
                     "avg_pool_0_ceil_mode_0", "avg_pool_0_exclude_padding_from_average_0", "avg_pool_0"]


@pytest.mark.parametrize("op", POOLS)
def test_pool_symbolic_batch_and_channels(op):
    check(lambda mb, x: pool(mb, op, x, kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid"),
          [(("B", "C", 8, 8), "fp32")], ALL_OPSETS)


@pytest.mark.parametrize("op", POOLS)
@pytest.mark.parametrize("kw", [
    dict(kernel_sizes=[3, 3], strides=[2, 2], pad_type="valid"),
    dict(kernel_sizes=[3, 2], strides=[2, 3], pad_type="same"),
    dict(kernel_sizes=[2, 3], strides=[3, 2], pad_type="same_lower"),
    dict(kernel_sizes=[3, 3], strides=[2, 3], pad_type="custom", pad=[2, 1, 0, 3]),
])
def test_pool_symbolic_spatial_exact(op, kw):
    assert_exact(lambda mb, x: pool(mb, op, x, **kw), ("B", 3, "H", "W"), op)


@pytest.mark.parametrize("kw", [
    dict(kernel_sizes=[3, 3], strides=[2, 2], pad_type="valid", ceil_mode=True),
    dict(kernel_sizes=[2, 3], strides=[3, 2], pad_type="valid", ceil_mode=True),
    dict(kernel_sizes=[3, 3], strides=[2, 2], pad_type="custom", pad=[1, 1, 1, 1], ceil_mode=True),
    dict(kernel_sizes=[2, 4], strides=[3, 3], pad_type="custom", pad=[1, 1, 2, 2], ceil_mode=True),
    # pad larger than the kernel: the general (min/max indicator) form
    dict(kernel_sizes=[2, 2], strides=[2, 3], pad_type="custom", pad=[3, 3, 5, 5], ceil_mode=True),
    # same_lower with ceil_mode: the padding is itself symbolic
    dict(kernel_sizes=[2, 3], strides=[2, 2], pad_type="same_lower", ceil_mode=True),
    dict(kernel_sizes=[4, 1], strides=[3, 2], pad_type="same_lower", ceil_mode=True),
])
@pytest.mark.parametrize("op", ["avg_pool", "max_pool"])
def test_pool_symbolic_ceil_mode_exact(op, kw):
    assert_exact(lambda mb, x: pool(mb, op, x, **kw), (1, 3, "H", "W"), op)


def test_pool_symbolic_1d_exact():
    assert_exact(lambda mb, x: mb.max_pool(x=x, kernel_sizes=[3], strides=[2], pad_type="custom", pad=[1, 1],
                                           ceil_mode=True), ("B", 3, "L"), "max_pool")
    assert_exact(lambda mb, x: mb.l2_pool(x=x, kernel_sizes=[5], strides=[4], pad_type="same"), (1, 3, "L"), "l2_pool")


def test_pool_valid_symbolic_form():
    res = check(lambda mb, x: mb.max_pool(x=x, kernel_sizes=[3, 3], strides=[2, 2], pad_type="valid"),
                [((1, 3, "H", 8), "fp32")], ["iOS17"])[0]
    d = res.mk_prog.find_ops(op_type="max_pool", exactly_one=True)[0].outputs[0].shape[2]
    H = res.mk_prog.functions["main"].inputs["x"].shape[2]
    assert d.compare_eq((H - 3) // 2 + 1)
    res = check(lambda mb, x: mb.max_pool(x=x, kernel_sizes=[3, 3], strides=[4, 4], pad_type="same"),
                [((1, 3, "H", 8), "fp32")], ["iOS17"])[0]
    d = res.mk_prog.find_ops(op_type="max_pool", exactly_one=True)[0].outputs[0].shape[2]
    H = res.mk_prog.functions["main"].inputs["x"].shape[2]
    assert d.compare_eq((H + 3) // 4)


# errors


@pytest.mark.parametrize("op", POOLS)
def test_pool_error_bad_pad_type(op):
    check_error(lambda mb, x: pool(mb, op, x, kernel_sizes=[2, 2], pad_type="full"), [((1, 3, 8, 8), "fp32")],
                match=rf"{op} '{op}_0'.*pad_type.*\"full\"")


@pytest.mark.parametrize("op", POOLS)
def test_pool_error_missing_pad_type(op):
    check_error(lambda mb, x: pool(mb, op, x, kernel_sizes=[2, 2]), [((1, 3, 8, 8), "fp32")],
                match=rf"{op} '{op}_0'.*pad_type")


@pytest.mark.parametrize("op", POOLS)
def test_pool_error_kernel_too_large(op):
    check_error(lambda mb, x: pool(mb, op, x, kernel_sizes=[3, 9], pad_type="valid"), [((1, 3, 8, 8), "fp32")],
                match=rf"{op} '{op}_0'.*spatial dimension 1 has invalid output size 0")
    # but a padded input fits
    check(lambda mb, x: pool(mb, op, x, kernel_sizes=[3, 9], pad_type="custom", pad=[0, 0, 1, 0]),
          [((1, 3, 8, 8), "fp32")], ALL_OPSETS)


@pytest.mark.parametrize("op", POOLS)
def test_pool_error_pad_and_kernel_lengths(op):
    check_error(lambda mb, x: pool(mb, op, x, kernel_sizes=[2, 2], pad_type="custom", pad=[1, 1]),
                [((1, 3, 8, 8), "fp32")], match=rf"{op} '{op}_0'.*pad \(length 2\)")
    # the pad length is checked whatever the pad_type
    check_error(lambda mb, x: pool(mb, op, x, kernel_sizes=[2, 2], pad_type="valid", pad=[1, 1, 1]),
                [((1, 3, 8, 8), "fp32")], match=rf"{op} '{op}_0'.*pad \(length 3\)")
    check_error(lambda mb, x: pool(mb, op, x, kernel_sizes=[2], pad_type="valid"), [((1, 3, 8, 8), "fp32")],
                match=rf"{op} '{op}_0'.*kernel_shape \(length 1\)")


@pytest.mark.parametrize("op", POOLS)
def test_pool_error_ceil_mode(op):
    check_error(lambda mb, x: pool(mb, op, x, kernel_sizes=[2, 2], pad_type="same", ceil_mode=True),
                [((1, 3, 8, 8), "fp32")], match=rf"{op} '{op}_0'.*ceil_mode.*same")
    check_error(lambda mb, x: pool(mb, op, x, kernel_sizes=[2, 2], pad_type="custom", pad=[1, 0, 1, 1],
                                   ceil_mode=True), [((1, 3, 8, 8), "fp32")], match=r"symmetric")


def test_pool_error_ceil_mode_3d_and_l2_3d():
    check_error(lambda mb, x: mb.max_pool(x=x, kernel_sizes=[2, 2, 2], pad_type="valid", ceil_mode=True),
                [((1, 3, 8, 8, 8), "fp32")], match=r"max_pool 'max_pool_0'.*ceil_mode.*1D or 2D")
    check_error(lambda mb, x: mb.l2_pool(x=x, kernel_sizes=[2, 2, 2], pad_type="valid"),
                [((1, 3, 8, 8, 8), "fp32")], match=r"l2_pool 'l2_pool_0'.*1 or 2 spatial dims, got 3")


@pytest.mark.parametrize("op", POOLS)
def test_pool_same_lower_not_in_ios15(op):
    res = check(lambda mb, x: pool(mb, op, x, kernel_sizes=[2, 2], pad_type="same_lower"), [((1, 3, 7, 7), "fp32")],
                ALL_OPSETS)
    assert res[0] is None and res[1] is not None
    check_error(lambda mb, x: pool(mb, op, x, kernel_sizes=[2, 2], pad_type="same_lower"), [((1, 3, 7, 7), "fp32")],
                opset="iOS15", match=rf"{op} '{op}_0'.*same_lower.*iOS15")


def test_pool_error_dtype():
    check_error(lambda mb, x: mb.max_pool(x=x, kernel_sizes=[2, 2], pad_type="valid"), [((1, 3, 8, 8), "int32")],
                match=r"max_pool 'max_pool_0'.*'x'.*int32")


def test_pool_error_scalar_lists():
    check_error(lambda mb, x: mb.max_pool(x=x, kernel_sizes=2, pad_type="valid"), [((1, 3, 8), "fp32")],
                match=r"max_pool 'max_pool_0'.*'kernel_sizes' must be a list")
    check_error(lambda mb, x: mb.avg_pool(x=x, kernel_sizes=[2], strides=1, pad_type="valid"), [((1, 3, 8), "fp32")],
                match=r"avg_pool 'avg_pool_0'.*'strides' must be a list")
