"""Parity of quantize and dequantize (iOS17) with coremltools: types, symbolic dims, value inference
(quantize folds; dequantize does not), constness of a dequantized constant, and the errors."""

from __future__ import annotations

import numpy as np
import pytest
from support.parity import check, check_error

OPSETS = ("iOS17", "iOS18")
RNG = np.random.default_rng(0)
X = RNG.uniform(-3, 3, (2, 3, 4)).astype(np.float32)
X[0, 0, :3] = [0.5, 1.5, -2.5]  # ties: round half to even
X16 = X.astype(np.float16)
Q8 = RNG.integers(-128, 128, (2, 3, 4)).astype(np.int8)
QU8 = RNG.integers(0, 256, (2, 3, 4)).astype(np.uint8)
S3 = np.array([0.05, 0.1, 0.02], np.float32)
S4 = np.array([0.05, 0.1, 0.02, 1.0], np.float32)


@pytest.mark.parametrize("kw", [
    {"scale": np.float32(0.05), "output_dtype": "int8"},
    {"scale": np.float32(1.0), "output_dtype": "uint8", "zero_point": np.uint8(3)},
    {"scale": np.float32(0.01), "output_dtype": "int8", "zero_point": np.int8(-5)},
    {"scale": S3, "zero_point": np.array([1, 2, 3], np.uint8), "axis": 1, "output_dtype": "uint8"},
    {"scale": S4, "zero_point": np.array([1, -2, 3, 0], np.int8), "axis": -1, "output_dtype": "int8"},
    {"scale": S3, "axis": -2, "output_dtype": "int8"},
])
def test_quantize(kw):
    check(lambda mb, x: mb.quantize(input=x, **kw), [(("B", 3, 4), "fp32")], OPSETS)
    # a known input folds (numpy: divide, np.around, add the zero point, clip, cast)
    check(lambda mb, x: mb.quantize(input=X, **kw), [((1,), "fp32")], OPSETS)


def test_quantize_fp16():
    kw = {"scale": S3.astype(np.float16), "axis": 1, "output_dtype": "int8"}
    check(lambda mb, x: mb.quantize(input=x, **kw), [((2, 3, "N"), "fp16")], OPSETS)
    check(lambda mb, x: mb.quantize(input=X16, **kw), [((1,), "fp32")], OPSETS)
    check(lambda mb, x: mb.quantize(input=X16, scale=np.float16(0.003), output_dtype="uint8"), [((1,), "fp32")], OPSETS)


@pytest.mark.parametrize("kw", [
    {"scale": np.float32(0.05)},
    {"scale": np.float16(0.05), "zero_point": np.int8(3)},
    {"scale": S4, "zero_point": np.array([1, -2, 3, 0], np.int8), "axis": 2},
    {"scale": S3.astype(np.float16), "axis": -2},
])
def test_dequantize(kw):
    check(lambda mb, x: mb.dequantize(input=x, **kw), [(("B", 3, 4), "int8")], OPSETS)
    # no value inference in coremltools (it only materializes dequantize for passes)
    check(lambda mb, x: mb.dequantize(input=Q8, **kw), [((1,), "fp32")], OPSETS)


def test_dequantize_uint8():
    check(lambda mb, x: mb.dequantize(input=x, scale=S3, zero_point=np.array([0, 128, 255], np.uint8), axis=0),
          [((3, "N"), "uint8")], OPSETS)


def test_dequantized_constant_is_a_compile_time_constant():
    """coremltools treats a dequantize of a constant as a constant: it can feed const inputs
    (quantized weights)."""
    w = RNG.integers(-128, 128, (5, 4)).astype(np.int8)

    def build(mb, x):
        return mb.linear(x=x, weight=mb.dequantize(input=w, scale=np.float32(0.02)))

    check(build, [(("B", 4), "fp32")], OPSETS)
    check_error(lambda mb, x, q: mb.linear(x=x, weight=mb.dequantize(input=q, scale=np.float32(0.02))),
                [(("B", 4), "fp32"), ((5, 4), "int8")], "iOS17", match=r"linear 'linear_0'.*'weight'.*constant")


def test_opsets():
    for opset in ["iOS15", "iOS16"]:
        check_error(lambda mb, x: mb.quantize(input=x, scale=np.float32(1), output_dtype="int8"), [((2,), "fp32")],
                    opset, match="quantize")
        check_error(lambda mb, x: mb.dequantize(input=x, scale=np.float32(1)), [((2,), "int8")], opset,
                    match="dequantize")


def test_quantize_errors():
    spec = [((2, 3, 4), "fp32")]

    def err(match, spec=spec, **kw):
        check_error(lambda mb, x: mb.quantize(input=x, **kw), spec, "iOS17", match=r"quantize 'quantize_0'.*" + match)

    err("'output_dtype'.*fp32", scale=np.float32(1), output_dtype="fp32")
    err("'output_dtype'.*int4", scale=np.float32(1), output_dtype="int4")
    err("'output_dtype'.*foo", scale=np.float32(1), output_dtype="foo")
    err("'zero_point'.*int8.*uint8", scale=np.float32(1), zero_point=np.int8(1), output_dtype="uint8")
    err("'zero_point'", scale=np.float32(1), zero_point=np.int32(1), output_dtype="int8")
    err("'scale' cannot be 0", scale=np.float32(0), output_dtype="int8")
    err("'scale' cannot be 0", scale=np.zeros(3, np.float32), axis=1, output_dtype="int8")
    err("'axis' must not be given", scale=np.float32(1), axis=0, output_dtype="int8")
    err("'zero_point' must be a scalar", scale=np.float32(1), zero_point=np.zeros(3, np.int8), output_dtype="int8")
    err("'axis' must be given", scale=S3, output_dtype="int8")
    err("'axis'.*range", scale=S3, axis=3, output_dtype="int8")
    err("'axis'.*range", scale=S3, axis=-4, output_dtype="int8")
    err("'scale' is a vector of length 3.*dim 2", scale=S3, axis=2, output_dtype="int8")
    err("'zero_point' must be a vector", scale=S3, axis=1, zero_point=np.int8(0), output_dtype="int8")
    err("'zero_point' is a vector of length 4", scale=S3, axis=1, zero_point=np.zeros(4, np.int8), output_dtype="int8")
    err("'scale'.*scalars or vectors", scale=np.ones((3, 1), np.float32), axis=1, output_dtype="int8")
    err("'scale'", scale=np.float16(1), output_dtype="int8")  # not the input's dtype
    err("'input'", spec=[((2, 3), "int32")], scale=np.float32(1), output_dtype="int8")
    # a symbolic axis dim never equals the vector's length in coremltools' check
    err("'scale' is a vector of length 3", spec=[((2, "C"), "fp32")], scale=S3, axis=1, output_dtype="int8")
    check_error(lambda mb, x, s: mb.quantize(input=x, scale=s, output_dtype="int8"), spec + [((1,), "fp32")],
                match=r"quantize 'quantize_0'.*'scale'.*constant")


def test_dequantize_errors():
    spec = [((2, 3, 4), "int8")]

    def err(match, spec=spec, **kw):
        check_error(lambda mb, x: mb.dequantize(input=x, **kw), spec, "iOS17",
                    match=r"dequantize 'dequantize_0'.*" + match)

    err("'zero_point'", scale=np.float32(1), zero_point=np.uint8(1))
    err("'axis' must not be given", scale=np.float32(1), axis=1)
    err("'axis' must be given", scale=S3)
    err("'scale' is a vector of length 3.*dim 0", scale=S3, axis=0)
    err("'zero_point' must be a vector", scale=S3, axis=1, zero_point=np.int8(0))
    err("'input'", spec=[((2, 3), "int32")], scale=np.float32(1))
    err("'input'", spec=[((2, 3), "fp32")], scale=np.float32(1))
    err("'scale'", scale=np.int32(1))
