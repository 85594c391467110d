"""Compressed weights kept packed by the interpreter: linear, matmul and conv read constexpr
chains (palettized, quantized, sparse, cast) packed and decompress them tile by tile. The numbers
must be the ones of a plan that decompresses every constexpr op when it is made."""

from __future__ import annotations

import os
from typing import Any, Callable

import milkit as ct
import numpy as np
import pytest
from coremltools.converters.mil.mil import types as ctypes
from milkit import Builder as mb
from milkit import _core, types
from support.exec_util import run_child

IOS16, IOS18 = ct.target.iOS16, ct.target.iOS18


def _u(dtype_name: str, values: Any, shape: tuple | None = None) -> np.ndarray:
    np_dt = getattr(np, dtype_name) if dtype_name in ("int8", "uint8") else getattr(ctypes, f"np_{dtype_name}_dtype")
    a = np.array(np.asarray(values).tolist(), dtype=np_dt)
    return a if shape is None else a.reshape(shape)


def _pack_bits(values: np.ndarray, nbits: int) -> np.ndarray:
    """LSB-first bit packing (iOS16 indices and masks)."""
    bits = ((values.reshape(-1, 1).astype(np.int64) >> np.arange(nbits)) & 1).astype(np.uint8).reshape(-1)
    return np.packbits(bits, bitorder="little")


# ---- weight makers: (shape, dtype, rng) -> a var of that shape and dtype ----------------------------

def _lut16(nbits: int) -> Callable[..., Any]:
    def make(shape: tuple, dt: Any, rng: Any) -> Any:
        idx = rng.integers(0, 2**nbits, size=int(np.prod(shape)))
        lut = rng.uniform(-1, 1, size=2**nbits).astype(dt)
        return mb.constexpr_lut_to_dense(indices=_pack_bits(idx, nbits), lut=lut, shape=np.array(shape, np.uint32))
    return make


def _affine16(qdt: Any, axis: int | None) -> Callable[..., Any]:
    def make(shape: tuple, dt: Any, rng: Any) -> Any:
        lo = -100 if qdt == np.int8 else 0
        q = rng.integers(lo, 100, size=shape).astype(qdt)
        if axis is None:
            zp, scale, ax = qdt(3), dt(0.0125), 0
        else:
            zp = rng.integers(0, 10, size=shape[axis]).astype(qdt)
            scale, ax = rng.uniform(0.001, 0.05, size=shape[axis]).astype(dt), axis
        return mb.constexpr_affine_dequantize(quantized_data=q, zero_point=zp, scale=scale, axis=ax)
    return make


def _lut18_table(shape: tuple, dt: Any, rng: Any, nbits: int, blocks: tuple, vector: int = 1) -> tuple:
    kind = "uint8" if nbits == 8 else f"uint{nbits}"
    idx = _u(kind, rng.integers(0, 2**nbits, size=int(np.prod(shape))), shape)
    lut = rng.uniform(-1, 1, size=(*blocks, 2**nbits, vector)).astype(dt)
    return idx, lut


def _lut18(nbits: int, granularity: str) -> Callable[..., Any]:
    def make(shape: tuple, dt: Any, rng: Any) -> Any:
        blocks = [1] * len(shape)
        if granularity == "per_channel":
            blocks[0] = shape[0]
        elif granularity == "per_grouped_channel":
            blocks[0] = shape[0] // 4
        elif granularity == "blockwise":
            blocks[0], blocks[1] = shape[0] // 2, shape[1] // 4
        idx, lut = _lut18_table(shape, dt, rng, nbits, tuple(blocks))
        return mb.constexpr_lut_to_dense(indices=idx, lut=lut)
    return make


def _vector_lut(shape: tuple, dt: Any, rng: Any) -> Any:
    ishape = (shape[0] // 2, *shape[1:])
    idx, lut = _lut18_table(ishape, dt, rng, 2, (1,) * len(shape), vector=2)
    return mb.constexpr_lut_to_dense(indices=idx, lut=lut, vector_axis=np.int32(0))


def _shift_scale(kind: str, with_offset: bool, block: int) -> Callable[..., Any]:
    def make(shape: tuple, dt: Any, rng: Any) -> Any:
        lo, hi = {"int4": (-8, 8), "uint4": (0, 16), "int8": (-128, 128), "uint8": (0, 256)}[kind]
        data = _u(kind, rng.integers(lo, hi, size=int(np.prod(shape))), shape)
        sshape = [1] * len(shape)
        sshape[0] = shape[0]
        sshape[1] = shape[1] // block if block else 1  # blocks along the inner dim, or per channel
        scale = rng.uniform(0.001, 0.05, size=sshape).astype(dt)
        kw: dict[str, Any] = {"data": data, "scale": scale}
        if with_offset:
            kw["offset"] = _u(kind, rng.integers(lo // 2, hi // 2, size=int(np.prod(sshape))), tuple(sshape))
        return mb.constexpr_blockwise_shift_scale(**kw)
    return make


def _quantized_lut(shape: tuple, dt: Any, rng: Any) -> Any:
    """A palettized weight whose per-channel table is itself int8-quantized."""
    blocks = (shape[0],) + (1,) * (len(shape) - 1)
    idx, _ = _lut18_table(shape, dt, rng, 4, blocks)
    qlut = _u("int8", rng.integers(-128, 128, size=shape[0] * 16), (*blocks, 16, 1))
    lut = mb.constexpr_blockwise_shift_scale(
        data=qlut, scale=rng.uniform(0.001, 0.01, size=(*blocks, 1, 1)).astype(dt))
    return mb.constexpr_lut_to_dense(indices=idx, lut=lut)


def _lut_then_scale(shape: tuple, dt: Any, rng: Any) -> Any:
    """A per-tensor palettized weight with a per-channel scale after it."""
    idx, lut = _lut18_table(shape, dt, rng, 4, (1,) * len(shape))
    dense = mb.constexpr_lut_to_dense(indices=idx, lut=lut)
    scale = rng.uniform(0.5, 2, size=(shape[0],) + (1,) * (len(shape) - 1)).astype(dt)
    return mb.constexpr_blockwise_shift_scale(data=dense, scale=scale)


def _sparse16(shape: tuple, dt: Any, rng: Any) -> Any:
    n = int(np.prod(shape))
    bits = (rng.uniform(size=n) < 0.4).astype(np.uint8)
    nz = rng.uniform(-1, 1, size=int(bits.sum())).astype(dt)
    return mb.constexpr_sparse_to_dense(nonzero_data=nz, mask=_pack_bits(bits, 1), shape=np.array(shape, np.uint32))


def _sparse18(shape: tuple, dt: Any, rng: Any) -> Any:
    mask = _u("uint1", (rng.uniform(size=int(np.prod(shape))) < 0.5).astype(np.uint8), shape)
    nz = rng.uniform(-1, 1, size=int(mask.astype(np.int64).sum())).astype(dt)
    return mb.constexpr_sparse_to_dense(nonzero_data=nz, mask=mask)


def _sparse_shift_scale(shape: tuple, dt: Any, rng: Any) -> Any:
    mask = _u("uint1", (rng.uniform(size=int(np.prod(shape))) < 0.5).astype(np.uint8), shape)
    q = _u("int8", rng.integers(-128, 128, size=int(mask.astype(np.int64).sum())))
    scale = rng.uniform(0.001, 0.05, size=(shape[0],) + (1,) * (len(shape) - 1)).astype(dt)
    m, v = mb.constexpr_sparse_blockwise_shift_scale(data_mask=mask, nonzero_data=q, scale=scale)
    return mb.constexpr_sparse_to_dense(nonzero_data=v, mask=m)


def _lut_sparse(shape: tuple, dt: Any, rng: Any) -> Any:
    mask = _u("uint1", (rng.uniform(size=int(np.prod(shape))) < 0.5).astype(np.uint8), shape)
    idx = _u("uint4", rng.integers(0, 16, size=int(mask.astype(np.int64).sum())))
    lut = rng.uniform(-1, 1, size=(1,) * len(shape) + (16, 1)).astype(dt)
    m, v = mb.constexpr_lut_to_sparse(indices_mask=mask, indices_nonzero_data=idx, lut=lut)
    return mb.constexpr_sparse_to_dense(nonzero_data=v, mask=m)


def _cast16(shape: tuple, dt: Any, rng: Any) -> Any:
    src = rng.uniform(-1, 1, size=shape).astype(np.float16)
    w = mb.constexpr_cast(source_val=src, output_dtype="fp32")
    return w if dt == np.float32 else mb.cast(x=w, dtype="fp16")


MAKERS: dict[str, tuple[Any, Callable[..., Any]]] = {
    "lut16_2bit": (IOS16, _lut16(2)),
    "lut16_4bit": (IOS16, _lut16(4)),
    "lut16_8bit": (IOS16, _lut16(8)),
    "affine16_uint8_axis0": (IOS16, _affine16(np.uint8, 0)),
    "affine16_int8_axis1": (IOS16, _affine16(np.int8, 1)),
    "affine16_int8_scalar": (IOS16, _affine16(np.int8, None)),
    "sparse16": (IOS16, _sparse16),
    "cast16": (IOS16, _cast16),
    "lut18_4bit_per_tensor": (IOS18, _lut18(4, "per_tensor")),
    "lut18_2bit_per_channel": (IOS18, _lut18(2, "per_channel")),
    "lut18_4bit_per_grouped_channel": (IOS18, _lut18(4, "per_grouped_channel")),
    "lut18_3bit_blockwise": (IOS18, _lut18(3, "blockwise")),
    "lut18_6bit_per_channel": (IOS18, _lut18(6, "per_channel")),
    "lut18_8bit_per_tensor": (IOS18, _lut18(8, "per_tensor")),
    "bss_int4": (IOS18, _shift_scale("int4", False, 0)),
    "bss_int4_offset_block8": (IOS18, _shift_scale("int4", True, 8)),
    "bss_uint4_offset": (IOS18, _shift_scale("uint4", True, 0)),
    "bss_uint4_block4": (IOS18, _shift_scale("uint4", False, 4)),
    "bss_int8_block8": (IOS18, _shift_scale("int8", False, 8)),
    "bss_int8_offset": (IOS18, _shift_scale("int8", True, 0)),
    "bss_uint8_offset_block4": (IOS18, _shift_scale("uint8", True, 4)),
    "bss_uint8": (IOS18, _shift_scale("uint8", False, 0)),
    "quantized_lut": (IOS18, _quantized_lut),
    "lut_then_scale": (IOS18, _lut_then_scale),
    "sparse18": (IOS18, _sparse18),
    "sparse_shift_scale": (IOS18, _sparse_shift_scale),
    "lut_sparse": (IOS18, _lut_sparse),
}


def _plans(prog: Any) -> tuple[Any, Any]:
    fn = prog.functions[prog.default_function_name]
    return _core.Plan(fn), _core.Plan(fn, packed_weights=False)


def _check(prog: Any, inputs: dict, packed: bool = True, exact: bool = True) -> None:
    """Packed and decompress-at-plan-time plans give the same bits (`exact`), or, for products of
    16 rows or more (decoded panel by panel: OpenBLAS's edge kernels decide the last bit of a
    column at a panel's edge), the same values to one fp16 rounding, nearly all bit for bit."""
    fast, ref = _plans(prog)
    assert ref.packed_weight_count == 0
    assert (fast.packed_weight_count > 0) == packed
    if packed:
        assert fast.const_bytes < ref.const_bytes
    got = dict(fast.run(inputs))
    want = dict(ref.run(inputs))
    for k, v in want.items():
        assert got[k].dtype == v.dtype
        if exact:
            np.testing.assert_array_equal(got[k], v)
        else:
            np.testing.assert_allclose(got[k].astype(np.float32), v.astype(np.float32), rtol=2e-3, atol=1e-3)
            assert np.mean(got[k] == v) > 0.99


def _mil(dt: Any) -> Any:
    return types.fp16 if dt == np.float16 else types.fp32


@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("name", sorted(MAKERS))
def test_linear(name: str, dt: Any) -> None:
    opset, make = MAKERS[name]
    rng = np.random.default_rng(abs(hash(name)) % 1000)
    bias = rng.uniform(-1, 1, size=48).astype(dt)

    @mb.program(input_specs=[mb.TensorSpec(shape=(3, 40), dtype=_mil(dt))], opset_version=opset)
    def prog(x: Any) -> Any:
        return mb.linear(x=x, weight=make((48, 40), dt, rng), bias=bias)

    _check(prog, {"x": rng.uniform(-1, 1, size=(3, 40)).astype(dt)})


@pytest.mark.parametrize("transpose_y", [False, True])
@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("name", ["lut16_4bit", "affine16_int8_axis1", "lut18_4bit_per_grouped_channel",
                                  "bss_int4_offset_block8", "quantized_lut", "sparse18", "lut_sparse"])
def test_matmul(name: str, dt: Any, transpose_y: bool) -> None:
    opset, make = MAKERS[name]
    rng = np.random.default_rng(abs(hash(name)) % 1000)
    wshape = (56, 32) if transpose_y else (32, 56)

    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 5, 32), dtype=_mil(dt))], opset_version=opset)
    def prog(x: Any) -> Any:
        return mb.matmul(x=x, y=make(wshape, dt, rng), transpose_y=transpose_y)

    _check(prog, {"x": rng.uniform(-1, 1, size=(2, 5, 32)).astype(dt)})


@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("name", ["lut16_4bit", "affine16_uint8_axis0", "lut18_4bit_per_tensor",
                                  "lut18_2bit_per_channel", "bss_uint4_offset", "bss_int8_block8", "lut_then_scale",
                                  "sparse16", "sparse_shift_scale"])
def test_conv(name: str, dt: Any) -> None:
    opset, make = MAKERS[name]
    rng = np.random.default_rng(abs(hash(name)) % 1000)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 8, 9, 9), dtype=_mil(dt))], opset_version=opset)
    def prog(x: Any) -> Any:
        return mb.conv(x=x, weight=make((16, 8, 3, 3), dt, rng), pad_type="same")

    _check(prog, {"x": rng.uniform(-1, 1, size=(1, 8, 9, 9)).astype(dt)})


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize(("name", "dt"), [("plain16", np.float16), ("cast16", np.float16), ("lut18_4bit_per_grouped_channel", np.float16),
                                          ("bss_int4_offset_block8", np.float32), ("sparse16", np.float16)])
@pytest.mark.parametrize(("hw", "groups", "cout"), [(7, 1, 256), (9, 2, 256), (3, 1, 256), (7, 1, 200), (16, 1, 200),
                                                   (14, 1, 200), (14, 1, 256)])
def test_conv_large_weight_small_image(name: str, dt: Any, hw: int, groups: int, cout: int, threads: int) -> None:
    """A weight larger than one decoding chunk (1 MiB of fp32; 256 output channels) over an image of
    few pixels (ResNet's 3x3 convs at 7x7): the GEMM decodes each block of 8 rows as it reads it,
    once per panel of 48 pixels (7x7: a panel of 48 and one of 1, k in blocks of 512 and a tail).
    A weight within one chunk (200 output channels) is decoded whole across the threads. The bits
    of the weight decompressed at plan time, on 1, 2 and 3 threads. (14x14: a narrow last panel of
    4 columns, summed as dot products over the same blocks of k by every GEMM path.)"""
    opset, make = (IOS16, lambda shape, _, r: r.uniform(-1, 1, size=shape).astype(np.float16)) if name == "plain16" \
        else MAKERS[name]
    rng = np.random.default_rng(23)
    cin = 120 * groups

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, cin, hw, hw), dtype=_mil(dt))], opset_version=opset)
    def prog(x: Any) -> Any:
        return mb.conv(x=x, weight=make((cout * groups, 120, 3, 3), dt, rng), bias=rng.uniform(-1, 1, cout * groups).astype(dt),
                       groups=groups, pad_type="same")

    ct.set_num_threads(threads)
    try:
        inputs = {"x": rng.uniform(-1, 1, size=(1, cin, hw, hw)).astype(dt)}
        if _core.gemm_kernel() == "panels":
            # a plain fp16 weight is read in place, not counted as a packed one
            _check(prog, inputs, packed=name != "plain16")
        else:
            # OpenBLAS (MILKIT_GEMM=blas, or no AVX2): its blocking of a chunk's rows decides the
            # last bits of fp32 sums
            fast, ref = _plans(prog)
            got, want = dict(fast.run(inputs)), dict(ref.run(inputs))
            for k, v in want.items():
                np.testing.assert_allclose(got[k].astype(np.float32), v.astype(np.float32), rtol=2e-3, atol=1e-4)
    finally:
        ct.set_num_threads(0)


@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("name", ["lut18_4bit_per_grouped_channel", "lut18_2bit_per_channel", "lut18_3bit_blockwise",
                                  "bss_int8_offset", "bss_int4_offset_block8", "bss_uint4_block4", "bss_int8_block1",
                                  "affine16_uint8_axis0", "affine16_int8_axis1", "lut_then_scale", "quantized_lut",
                                  "sparse_shift_scale"])
def test_conv_1x1(name: str, dt: Any) -> None:
    """A 1x1 weight [C_out, C_in, 1, 1] whose tables or scales vary per output channel, per block
    of input channels or per element: the decoder's runs span the trailing unit dims (a run per
    element was 3x slower on ResNet-50) and still read each element's own table or scale."""
    opset, make = (IOS18, _shift_scale("int8", True, 1)) if name == "bss_int8_block1" else MAKERS[name]
    rng = np.random.default_rng(abs(hash(name)) % 1000 + 2)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 16, 12, 12), dtype=_mil(dt))], opset_version=opset)
    def prog(x: Any) -> Any:
        return mb.conv(x=x, weight=make((32, 16, 1, 1), dt, rng))

    _check(prog, {"x": rng.uniform(-1, 1, size=(1, 16, 12, 12)).astype(dt)})


@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("name", ["lut16_4bit", "affine16_uint8_axis0", "lut18_2bit_per_channel", "sparse16"])
def test_conv_depthwise(name: str, dt: Any) -> None:
    """A compressed depthwise weight (two output channels per input channel, stride 2) gives the
    bits of the decompressed one."""
    opset, make = MAKERS[name]
    rng = np.random.default_rng(abs(hash(name)) % 1000 + 1)

    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 8, 19, 21), dtype=_mil(dt))], opset_version=opset)
    def prog(x: Any) -> Any:
        return mb.conv(x=x, weight=make((16, 1, 5, 5), dt, rng), groups=8, strides=[2, 2], pad_type="same")

    _check(prog, {"x": rng.uniform(-1, 1, size=(2, 8, 19, 21)).astype(dt)})


@pytest.mark.parametrize("rows", [1, 9, 37])
@pytest.mark.parametrize("name", ["lut18_4bit_per_grouped_channel", "bss_int4_offset_block8", "sparse16"])
def test_panels(name: str, rows: int) -> None:
    """Weights of several panels (a long inner dim), one row (matrix-vector) and many."""
    opset, make = MAKERS[name]
    rng = np.random.default_rng(11)

    @mb.program(input_specs=[mb.TensorSpec(shape=(rows, 640), dtype=types.fp16)], opset_version=opset)
    def prog(x: Any) -> Any:
        h = mb.linear(x=x, weight=make((400, 640), np.float16, rng))
        return mb.matmul(x=h, y=make((400, 304), np.float16, rng))

    # milkit's GEMM decodes the packed panels into the layout of the fp32 copy's: the same sums
    exact = rows < 16 or _core.gemm_kernel() == "panels"
    _check(prog, {"x": rng.uniform(-1, 1, size=(rows, 640)).astype(np.float16)}, exact=exact)


def test_fp32_weight_cast_to_fp16() -> None:
    """add_fp16_cast's cast between an fp32 constexpr op and the fp16 op reading it."""
    rng = np.random.default_rng(2)
    idx, lut = _lut18_table((48, 40), np.float32, rng, 4, (48, 1))

    @mb.program(input_specs=[mb.TensorSpec(shape=(3, 40), dtype=types.fp16)], opset_version=IOS18)
    def prog(x: Any) -> Any:
        w = mb.cast(x=mb.constexpr_lut_to_dense(indices=idx, lut=lut), dtype="fp16")
        return mb.linear(x=x, weight=w)

    _check(prog, {"x": rng.uniform(-1, 1, size=(3, 40)).astype(np.float16)})


def test_vector_lut_is_decompressed_when_planned() -> None:
    rng = np.random.default_rng(4)

    @mb.program(input_specs=[mb.TensorSpec(shape=(3, 40), dtype=types.fp32)], opset_version=IOS18)
    def prog(x: Any) -> Any:
        return mb.linear(x=x, weight=_vector_lut((48, 40), np.float32, rng))

    _check(prog, {"x": rng.uniform(-1, 1, size=(3, 40)).astype(np.float32)}, packed=False)


def test_other_readers_get_the_decompressed_weight() -> None:
    """A constexpr output also read by another op is decompressed once; both readers agree."""
    rng = np.random.default_rng(6)
    idx, lut = _lut18_table((48, 40), np.float32, rng, 4, (1, 1))

    @mb.program(input_specs=[mb.TensorSpec(shape=(48, 40), dtype=types.fp32)], opset_version=IOS18)
    def prog(x: Any) -> Any:
        w = mb.constexpr_lut_to_dense(indices=idx, lut=lut)
        return mb.add(x=mb.linear(x=x, weight=w), y=mb.reduce_sum(x=w, axes=[1], keep_dims=False))

    _check(prog, {"x": rng.uniform(-1, 1, size=(48, 40)).astype(np.float32)}, packed=False)


def test_dense_weights_env(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(8)

    @mb.program(input_specs=[mb.TensorSpec(shape=(3, 40), dtype=types.fp32)], opset_version=IOS18)
    def prog(x: Any) -> Any:
        return mb.linear(x=x, weight=_lut18(4, "per_channel")((48, 40), np.float32, rng))

    fn = prog.functions[prog.default_function_name]
    assert _core.Plan(fn).packed_weight_count == 1
    monkeypatch.setenv("MILKIT_DENSE_WEIGHTS", "1")
    assert _core.Plan(fn).packed_weight_count == 0


def test_packed_bytes_of_a_4bit_linear() -> None:
    """A 4-bit palettized 4096 x 4096 fp16 linear holds a quarter of its dense fp16 bytes."""
    rng = np.random.default_rng(9)
    n = 4096
    idx = _u("uint4", rng.integers(0, 16, size=n * n), (n, n))
    lut = rng.uniform(-1, 1, size=(n, 1, 16, 1)).astype(np.float16)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, n), dtype=types.fp16)], opset_version=IOS18)
    def prog(x: Any) -> Any:
        return mb.linear(x=x, weight=mb.constexpr_lut_to_dense(indices=idx, lut=lut))

    fast, ref = _plans(prog)
    dense = n * n * 2
    assert fast.packed_weight_count == 1
    assert fast.packed_weight_dense_bytes == dense
    # 4-bit indices plus a per-channel table of 16 entries (held as fp32)
    assert fast.packed_weight_bytes == n * n // 2 + n * 16 * 4
    assert dense / 4 <= fast.packed_weight_bytes <= dense / 4 * 1.1
    # the old path holds the decompressed fp16 weight and its fp32 copy
    assert ref.const_bytes >= dense * 3
    assert fast.const_bytes <= fast.packed_weight_bytes
    x = rng.uniform(-1, 1, size=(1, n)).astype(np.float16)
    np.testing.assert_array_equal(fast.run({"x": x})[0][1], ref.run({"x": x})[0][1])


def _fp16_products(rows: int, k: int, n: int, n2: int, rng: Any) -> Any:
    w = rng.uniform(-1, 1, size=(n, k)).astype(np.float16)
    y = rng.uniform(-1, 1, size=(n, n2)).astype(np.float16)
    yt = rng.uniform(-1, 1, size=(n2, n)).astype(np.float16)

    @mb.program(input_specs=[mb.TensorSpec(shape=(rows, k), dtype=types.fp16)], opset_version=IOS18)
    def prog(x: Any) -> Any:
        h = mb.linear(x=x, weight=w)
        return mb.matmul(x=h, y=y), mb.matmul(x=h, y=yt, transpose_y=True)

    return prog


@pytest.mark.parametrize("rows", [1, 2, 4, 5, 9])
def test_fp16_weights_read_in_place(rows: int) -> None:
    """Large fp16 weights stay fp16 (no fp32 copy) and give the bits of their fp32 copies, for
    matrix-vector products (odd sizes: every tail) and for BLAS products of more rows."""
    rng = np.random.default_rng(rows)
    prog = _fp16_products(rows, 517, 263, 129, rng)
    fast, ref = _plans(prog)
    assert fast.in_place_weight_count == 3 and ref.in_place_weight_count == 0
    assert fast.in_place_weight_bytes == (263 * 517 + 2 * 263 * 129) * 2
    assert fast.const_bytes < 263 * 517
    assert ref.const_bytes >= (263 * 517 + 2 * 263 * 129) * 4
    x = {"x": rng.uniform(-1, 1, size=(rows, 517)).astype(np.float16)}
    got, want = dict(fast.run(x)), dict(ref.run(x))
    for k, v in want.items():
        np.testing.assert_array_equal(got[k], v)


@pytest.mark.parametrize("name", ["lut18_4bit_per_grouped_channel", "bss_int4_offset_block8", "bss_int8_block8"])
def test_decode_threads_agree(name: str) -> None:
    """A matrix-vector product's outputs do not depend on how the threads split them."""
    opset, make = MAKERS[name]
    rng = np.random.default_rng(5)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 1032), dtype=types.fp16)], opset_version=opset)
    def prog(x: Any) -> Any:
        return mb.linear(x=x, weight=make((1000, 1032), np.float16, rng))

    fast, ref = _plans(prog)
    x = {"x": rng.uniform(-1, 1, size=(1, 1032)).astype(np.float16)}
    want = ref.run(x)[0][1]
    try:
        for t in (1, 2, 3):
            _core.set_num_threads(t)
            np.testing.assert_array_equal(fast.run(x)[0][1], want)
    finally:
        _core.set_num_threads(0)


def _rss_anon() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


def test_weight_cache_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """With MILKIT_WEIGHT_CACHE_MB=0 a plan over N bytes of fp16 weights holds no fp32 copy
    (its anonymous memory grows far less than the 2N of one). Products by the fp16 weight read it
    in place at any number of rows with milkit's GEMM (panels widened while packed): nothing goes
    to the cache, whatever its limit. With OpenBLAS (MILKIT_GEMM=blas, or no AVX2) products of
    5-15 rows widen the weight and keep it within the limit; 16 rows or more decode panels."""
    rng = np.random.default_rng(3)
    k, n = 4096, 2048
    w = rng.uniform(-1, 1, size=(n, k)).astype(np.float16)  # N = 16 MB
    panels_gemm = _core.gemm_kernel() == "panels"

    def plan_of(rows: int) -> Any:
        @mb.program(input_specs=[mb.TensorSpec(shape=(rows, k), dtype=types.fp16)], opset_version=IOS18)
        def prog(x: Any) -> Any:
            return mb.linear(x=x, weight=w)

        return _core.Plan(prog.functions[prog.default_function_name])

    def x_of(rows: int) -> dict:
        return {"x": rng.uniform(-1, 1, size=(rows, k)).astype(np.float16)}

    monkeypatch.setenv("MILKIT_WEIGHT_CACHE_MB", "0")
    before = _rss_anon()
    one, many, panels = plan_of(1), plan_of(8), plan_of(16)
    for _ in range(2):
        one.run(x_of(1))
        many.run(x_of(8))
        panels.run(x_of(16))
        assert _core.weight_cache_bytes() == 0
    if "libasan" not in os.environ.get("LD_PRELOAD", ""):  # ASan's quarantine keeps freed memory
        assert _rss_anon() - before < w.nbytes
    monkeypatch.setenv("MILKIT_WEIGHT_CACHE_MB", "100")
    panels.run(x_of(16))
    assert _core.weight_cache_bytes() == 0
    x = x_of(8)
    first = many.run(x)[0][1]
    widened = 0 if panels_gemm else n * k * 4
    assert _core.weight_cache_bytes() == widened
    np.testing.assert_array_equal(many.run(x)[0][1], first)
    one.run(x_of(1))  # a matrix-vector product reads the fp16 weight, not the cache
    assert _core.weight_cache_bytes() == widened
    monkeypatch.setenv("MILKIT_WEIGHT_CACHE_MB", "20")  # the limit is read at each use
    np.testing.assert_array_equal(many.run(x)[0][1], first)
    assert _core.weight_cache_bytes() == 0
    monkeypatch.setenv("MILKIT_WEIGHT_CACHE_MB", "100")
    many.run(x)
    del many
    assert _core.weight_cache_bytes() == 0


@pytest.mark.parametrize(
    "shape,cw,k,stride,groups",
    [
        ((1, 128, 56, 56), 256, 3, 1, 1),  # bands of rows, each decoding the weight by chunks
        ((1, 256, 7, 7), 256, 3, 1, 1),  # few output pixels: chunks of channels across threads
        ((2, 384, 9, 11), 384, 3, 2, 2),  # strided, grouped, two images
        ((1, 512, 14, 14), 640, 1, 1, 1),  # 1x1 on the NCHW input
    ],
)
@pytest.mark.parametrize("name", ["fp16", "lut18_4bit_per_grouped_channel"])
def test_conv_large_weight_decoded_by_chunks(name: str, shape: tuple, cw: int, k: int, stride: int, groups: int) -> None:
    """A conv weight of more than 256K elements, read in place (fp16) or compressed, is decoded a
    chunk of output channels at a time as the conv runs: no fp32 copy of it is made or cached
    (even with room in the weight cache), and the output is the decompressed plan's to one fp16
    rounding, nearly all bit for bit (OpenBLAS's edge kernels decide the last bit at a chunk's
    edge)."""
    rng = np.random.default_rng(cw + k)
    wshape = (cw, shape[1] // groups, k, k)
    assert int(np.prod(wshape)) > 262144
    opset, make = MAKERS[name] if name != "fp16" else (IOS18, None)

    @mb.program(input_specs=[mb.TensorSpec(shape=shape, dtype=types.fp16)], opset_version=opset)
    def prog(x: Any) -> Any:
        if make is None:
            weight: Any = rng.uniform(-0.1, 0.1, size=wshape).astype(np.float16)
        else:
            weight = make(wshape, np.float16, rng)
        return mb.conv(x=x, weight=weight, strides=[stride, stride], groups=groups, pad_type="same")

    try:
        _core.set_num_threads(2)
        os.environ["MILKIT_WEIGHT_CACHE_MB"] = "100"
        fast, ref = _plans(prog)
        assert fast.packed_weight_count == (name != "fp16") and ref.packed_weight_count == 0
        x = {"x": rng.uniform(-1, 1, size=shape).astype(np.float16)}
        got, want = fast.run(x)[0][1], ref.run(x)[0][1]
        assert _core.weight_cache_bytes() == 0
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)
        assert np.mean(got == want) > 0.99
    finally:
        os.environ.pop("MILKIT_WEIGHT_CACHE_MB", None)
        _core.set_num_threads(0)


def _fused_rows_case(name: str, k: int, rows: int, dt: Any = np.float16) -> None:
    """A decode-shaped linear (1-4 rows) over a weight the fused matrix-vector kernels read where
    it lies (fp16 rows, 4-bit indices into per-row tables): the bits of the decompressed plan."""
    rng = np.random.default_rng(k * 10 + rows)
    n = 96
    if name == "fp16":  # large enough to be read in place
        k = k * 8
    opset = IOS18 if name == "fp16" else MAKERS[name][0]

    @mb.program(input_specs=[mb.TensorSpec(shape=(rows, k), dtype=_mil(dt))], opset_version=opset)
    def prog(x: Any) -> Any:
        if name == "fp16":
            w = rng.uniform(-1, 1, size=(n, k)).astype(np.float16)
        else:
            w = MAKERS[name][1]((n, k), dt, rng)
        return mb.linear(x=x, weight=w)

    fast, ref = _plans(prog)
    x = {"x": rng.uniform(-1, 1, size=(rows, k)).astype(dt)}
    np.testing.assert_array_equal(fast.run(x)[0][1], ref.run(x)[0][1])


FUSED = ["fp16", "lut18_4bit_per_grouped_channel", "lut18_4bit_per_tensor", "lut16_4bit", "lut18_2bit_per_channel"]


@pytest.mark.parametrize("rows", [1, 2, 4])
@pytest.mark.parametrize("k", [46, 45, 64])
@pytest.mark.parametrize("name", FUSED)
def test_fused_rows(name: str, k: int, rows: int) -> None:
    """Inner sizes with every tail (46: a block of 32, one of 8, a scalar tail; 45: odd, so 4-bit
    rows are not byte-aligned and take the panel path; 64: blocks only)."""
    _fused_rows_case(name, k, rows)


# quantized weights (blockwise_shift_scale) and inner sizes they allow: per channel with every
# tail (46) and odd (45: int4 rows not byte-aligned), blocks of 8 (a power of two: fused), blocks
# of 4 (8 lanes would span two scales: the panel path)
FUSED_INT = [(name, k) for name in ("bss_int4", "bss_uint4_offset", "bss_int8_offset", "bss_uint8") for k in (46, 45)] + [
    ("bss_int4_offset_block8", 72), ("bss_int8_block8", 88), ("bss_uint4_block4", 44), ("bss_uint8_offset_block4", 52)]


@pytest.mark.parametrize("dt", [np.float16, np.float32])
@pytest.mark.parametrize("rows", [1, 4])
@pytest.mark.parametrize(("name", "k"), FUSED_INT)
def test_fused_int_rows(name: str, k: int, rows: int, dt: Any) -> None:
    """Quantized rows, scaled (and offset) lane by lane in the dot, give the constexpr op's bits
    (fp16 scales round after the offset and after the product)."""
    _fused_rows_case(name, k, rows, dt)


# products of 5 rows or more by the same weights, with an inner size over one block of k (512):
# milkit's GEMM decodes each panel's rows from their row form, the second block at k = 512
PANEL_FORMS = [(name, 512 + k) for name in FUSED[1:] for k in (46, 45)] + [(name, 512 + k) for name, k in FUSED_INT]


@pytest.mark.parametrize("dt", [np.float16, np.float32])
@pytest.mark.parametrize(("name", "k"), PANEL_FORMS)
def test_panel_row_forms(name: str, k: int, dt: Any) -> None:
    """Panels packed from the rows' packed bytes (4-bit tables, quantized integers with their
    scales and offsets) give the bits of the decompressed plan, with every tail of k."""
    _fused_rows_case(name, k, 9, dt)


def test_fused_rows_avx2() -> None:
    """The AVX2 kernels (matrix-vector products and panels decoded from row forms) give the same
    bits where the machine has AVX-512 (forced off in a child)."""
    code = (
        "import importlib.util, sys\n"
        "import numpy as np\n"
        f"sys.path.insert(0, {os.path.dirname(os.path.dirname(__file__))!r})\n"
        f"spec = importlib.util.spec_from_file_location('tpw', {__file__!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "for name in m.FUSED:\n"
        "    for k in (46, 45):\n"
        "        for rows in (1, 3):\n"
        "            m._fused_rows_case(name, k, rows)\n"
        "for name, k in m.FUSED_INT:\n"
        "    for dt in (np.float16, np.float32):\n"
        "        m._fused_rows_case(name, k, 2, dt)\n"
        "for name, k in m.PANEL_FORMS:\n"
        "    m._fused_rows_case(name, k, 9, np.float16)\n"
        "print('ok')\n")
    r = run_child(code, {"MILKIT_NO_AVX512": "1"})
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:]


@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("name", sorted(MAKERS))
def test_gather(name: str, dt: Any) -> None:
    """An embedding table held packed: gather decodes the rows it reads (any axis, batch dims,
    negative indices) and gives what the decompressed table gives."""
    opset, make = MAKERS[name]
    rng = np.random.default_rng(abs(hash(name)) % 1000 + 7)
    ids = np.array([[3, -1, 0], [47, 5, 5]], np.int32)
    cols = np.array([[1, 39, -40]], np.int32)

    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 3), dtype=types.int32),
                             mb.TensorSpec(shape=(1, 3), dtype=types.int32)], opset_version=opset)
    def prog(i: Any, j: Any) -> Any:
        table = make((48, 40), dt, rng)
        rows = mb.gather(x=table, indices=i, axis=0)
        return rows, mb.gather(x=table, indices=j, axis=1), mb.gather(x=table, indices=mb.squeeze(x=j), axis=-1)

    _check(prog, {"i": ids, "j": cols})


def test_gather_packed_errors() -> None:
    """An index out of range of a packed table is the same IndexError as for a dense one."""
    rng = np.random.default_rng(1)

    @mb.program(input_specs=[mb.TensorSpec(shape=(2,), dtype=types.int32)], opset_version=IOS18)
    def prog(i: Any) -> Any:
        return mb.gather(x=MAKERS["lut18_4bit_per_grouped_channel"][1]((48, 40), np.float16, rng), indices=i)

    fast, ref = _plans(prog)
    assert fast.packed_weight_count == 1
    for plan in (fast, ref):
        with pytest.raises(IndexError, match=r"index 48 .* out of range for dim 0 of x \(shape \(48, 40\)\)"):
            plan.run({"i": np.array([0, 48], np.int32)})


@pytest.mark.parametrize("rows", [16, 21])
def test_panel_products_of_large_weights(rows: int) -> None:
    """Products of 16 rows or more over a packed weight decode it panel by panel (nothing goes
    to the weight cache) and give the widened weight's products. Not always their
    bits: OpenBLAS sums an element at the edge of a block of columns in its edge kernel, so where
    the blocks end decides the last bit (as parallel_sgemm's split by thread count does); the
    fp16 outputs agree to one rounding."""
    rng = np.random.default_rng(rows)
    n = 4096
    make = MAKERS["lut18_4bit_per_grouped_channel"][1]

    @mb.program(input_specs=[mb.TensorSpec(shape=(rows, n), dtype=types.fp16)], opset_version=IOS18)
    def prog(x: Any) -> Any:
        h = mb.linear(x=x, weight=make((n, n), np.float16, rng))
        return mb.matmul(x=h, y=make((n, n + 8), np.float16, rng))

    fast, ref = _plans(prog)
    x = {"x": rng.uniform(-1, 1, size=(rows, n)).astype(np.float16)}
    got = fast.run(x)[0][1].astype(np.float32)
    assert _core.weight_cache_bytes() == 0
    want = ref.run(x)[0][1].astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
    assert np.mean(got == want) > 0.999
