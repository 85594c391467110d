"""The complex dialect (complex, complex_real, complex_fft, ..., complex_stft) and
common::lower_complex_dialect_ops, against coremltools: the ops are built with both libraries and
compared op for op (types included); the pass runs in both and the lowered programs are compared op
for op (names, inputs, consts, types); the lowered program runs in milkit's interpreter and its
numbers match numpy's np.fft.* (or a numpy STFT)."""

import milkit
import numpy as np
import pytest
from milkit import Builder as mb
from milkit import types
from milkit.passes import apply_passes
from support.parity import _build, _make_symbols, check, check_error, compare_programs
from support.pass_parity import assert_inputs_equal, build_both, ct_run

LOWER = "common::lower_complex_dialect_ops"
RNG = np.random.default_rng(0)


# ---- helpers -----------------------------------------------------------------------------------


def _downstream_of_trig(prog) -> set:
    """Names of ops whose value derives from a folded cos / sin."""
    tainted: set = set()
    for op in prog.functions["main"].operations:
        ins = []
        for v in op.inputs.values():
            ins += list(v) if isinstance(v, (list, tuple)) else [v]
        if op.op_type in ("cos", "sin") or any(v.op is not None and v.op.name in tainted for v in ins):
            tainted.add(op.name)
    return tainted


def _assert_values(cp, mp) -> None:
    """Known values are bit-identical, except those computed from the folded DFT matrices: milkit
    folds cos / sin in double and rounds once (correctly rounded), numpy's float32 cos / sin are
    off by up to an ulp; those must agree within 1e-6."""
    trig = _downstream_of_trig(mp)
    for co, mo in zip(cp.functions["main"].operations, mp.functions["main"].operations):
        for cv, mv in zip(co.outputs, mo.outputs):
            if cv.val is None or mv.val is None:
                continue
            ca, ma = np.asarray(cv.val), np.asarray(mv.val)
            if ca.dtype.kind != "f":
                continue
            if mo.name in trig:
                np.testing.assert_allclose(ma, ca, rtol=1e-6, atol=1e-6, err_msg=mo.name)
            else:
                assert np.array_equal(ca, ma.astype(ca.dtype)), f"{mo.name}: {ma} != coremltools {ca}"


def _drop_float_placeholders(cp) -> None:
    """coremltools' concat gives small tensors it cannot compute a sym_val of fresh symbols, one per
    element, float tensors too (the zero padding of an FFT), and reshape / transpose / matmul pass
    them on; they stand for unknown floats, which milkit does not track. Dropped before comparing."""
    for op in cp.functions["main"].operations:
        for v in op.outputs:
            if v.val is None and v.sym_val is not None and types.is_float(types.string_to_builtin(_ct_dtype_name(v))):
                v._sym_val = None


def _ct_dtype_name(v) -> str:
    from coremltools.converters.mil.mil import types as ctypes

    return ctypes.builtin_to_string(v.dtype)


def lower_both(build, specs, opset="iOS17"):
    """Builds with both libraries, runs the pass in both, compares the lowered programs op for op;
    returns milkit's lowered program (verified and validated)."""
    cp, mp, syms = build_both(build, specs, opset)
    ct_run(cp, [LOWER])
    apply_passes(mp, [LOWER], None, verify_each=True)
    _drop_float_placeholders(cp)
    try:
        compare_programs(cp, mp, syms)
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- coremltools:{cp}\n--- milkit:{mp}") from None
    _assert_values(cp, mp)
    assert_inputs_equal(cp, mp)
    mp.validate()
    assert not [o for o in mp.functions["main"].operations if o.op_type.startswith("complex")]
    return mp


def run(prog, *arrays):
    names = list(prog.functions["main"].inputs)
    out = milkit.run(prog, dict(zip(names, arrays)))
    return [out[v.name] for v in prog.functions["main"].outputs]


def close(got, want, tol=2e-4):
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def parts(mb, c):
    return mb.complex_real(data=c), mb.complex_imag(data=c)


def f32(*shape):
    return (shape, "fp32")


# ---- the ops ----------------------------------------------------------------------------------


def test_dialect_ops_are_registered_and_callable():
    import milkit._core as core

    names = set(core.dialect_op_names())
    assert names == {"complex", "complex_real", "complex_imag", "complex_fft", "complex_fftn", "complex_rfft",
                     "complex_rfftn", "complex_ifft", "complex_ifftn", "complex_irfft", "complex_irfftn",
                     "complex_shape", "complex_abs", "complex_stft"}
    for opset in (1, 6, 9):
        assert not names & set(core.op_names(opset)), "dialect ops are not core ops"
    assert all(callable(getattr(mb, n)) for n in names)
    assert types.complex64.__name__ == "complex64" and types.is_complex(types.complex64)
    assert not types.is_complex(types.fp32) and not types.is_float(types.complex64)


SHAPE_CASES = [
    # (name, build, input specs)
    ("complex", lambda mb, x, y: mb.complex(real_data=x, imag_data=y), [f32(2, 3), f32(2, 3)]),
    ("fft default", lambda mb, x: mb.complex_fft(data=x), [f32(2, 5)]),
    ("fft n trims dim 0", lambda mb, x: mb.complex_fft(data=x, n=3, dim=0, norm="ortho"), [f32(5, 2)]),
    ("fft n pads", lambda mb, x: mb.complex_fft(data=x, n=8, dim=-2), [f32(3, 5, 2)]),
    ("fft complex", lambda mb, x, y: mb.complex_fft(data=mb.complex(real_data=x, imag_data=y), n=4),
     [f32(3), f32(3)]),
    ("fftn all", lambda mb, x: mb.complex_fftn(data=x), [f32(2, 3, 4)]),
    ("fftn shapes", lambda mb, x: mb.complex_fftn(data=x, shapes=[5, 2]), [f32(2, 3, 4)]),
    ("fftn dims", lambda mb, x: mb.complex_fftn(data=x, dims=[0, -1], norm="forward"), [f32(2, 3, 4)]),
    ("fftn both", lambda mb, x: mb.complex_fftn(data=x, shapes=[3, 7], dims=[2, 0]), [f32(2, 3, 4)]),
    ("rfft", lambda mb, x: mb.complex_rfft(data=x), [f32(3, 6)]),
    ("rfft odd n dim 0", lambda mb, x: mb.complex_rfft(data=x, n=7, dim=0), [f32(6, 3)]),
    ("rfftn", lambda mb, x: mb.complex_rfftn(data=x, dims=[1, 0]), [f32(4, 5, 2)]),
    ("ifft", lambda mb, x, y: mb.complex_ifft(data=mb.complex(real_data=x, imag_data=y), n=2, dim=0),
     [f32(4, 3), f32(4, 3)]),
    ("ifftn", lambda mb, x, y: mb.complex_ifftn(data=mb.complex(real_data=x, imag_data=y), shapes=[6]),
     [f32(4, 3), f32(4, 3)]),
    ("irfft", lambda mb, x, y: mb.complex_irfft(data=mb.complex(real_data=x, imag_data=y)), [f32(2, 5), f32(2, 5)]),
    ("irfft n", lambda mb, x, y: mb.complex_irfft(data=mb.complex(real_data=x, imag_data=y), n=7, dim=0),
     [f32(5, 2), f32(5, 2)]),
    ("irfftn", lambda mb, x, y: mb.complex_irfftn(data=mb.complex(real_data=x, imag_data=y)),
     [f32(3, 4), f32(3, 4)]),
    ("irfftn shapes", lambda mb, x, y: mb.complex_irfftn(data=mb.complex(real_data=x, imag_data=y), shapes=[2, 9]),
     [f32(3, 4), f32(3, 4)]),
    ("shape", lambda mb, x: mb.complex_shape(x=mb.complex(real_data=x, imag_data=x)), [f32(2, 3, 1)]),
    ("abs", lambda mb, x: mb.complex_abs(x=mb.complex_fft(data=x)), [f32(2, 3)]),
    ("real imag", lambda mb, x: parts(mb, mb.complex_rfft(data=x)), [f32(6)]),
    ("stft", lambda mb, x: mb.complex_stft(input=x, n_fft=8), [f32(40)]),
    ("stft batch", lambda mb, x: mb.complex_stft(input=x, n_fft=8, hop_length=3, onesided=False), [f32(2, 30)]),
    ("stft window", lambda mb, x: mb.complex_stft(input=x, n_fft=8, win_length=6, window=np.hanning(6).astype(np.float32),
                                                  normalized=True), [f32(33)]),
    # symbolic sizes: the types keep the expressions coremltools makes
    ("fft symbolic", lambda mb, x: mb.complex_fft(data=x, n=4), [(("S", 6), "fp32")]),
    ("rfft symbolic", lambda mb, x: mb.complex_rfft(data=x), [((2, "S"), "fp32")]),
    ("irfft symbolic", lambda mb, x, y: mb.complex_irfft(data=mb.complex(real_data=x, imag_data=y)),
     [((2, "S"), "fp32"), ((2, "S"), "fp32")]),
    ("stft symbolic", lambda mb, x: mb.complex_stft(input=x, n_fft=8, hop_length=2), [(("S",), "fp32")]),
    ("shape symbolic", lambda mb, x: mb.complex_shape(x=mb.complex(real_data=x, imag_data=x)), [((2, "S"), "fp32")]),
]


@pytest.mark.parametrize("name,build,specs", SHAPE_CASES, ids=[c[0] for c in SHAPE_CASES])
def test_types_match_coremltools(name, build, specs):
    check(build, specs, opsets=("iOS15", "iOS18"))


BAD = [
    ("norm", lambda mb, x: mb.complex_fft(data=x, norm="foo"), [f32(4)], "norm"),
    ("fftn norm", lambda mb, x: mb.complex_fftn(data=x, norm="none"), [f32(4)], "norm"),
    ("dim out of range", lambda mb, x: mb.complex_fft(data=x, dim=2), [f32(4, 6)], "Invalid dim 2"),
    ("dims out of range", lambda mb, x: mb.complex_fftn(data=x, dims=[0, -3]), [f32(4, 6)], "Invalid dim -3"),
    ("n zero", lambda mb, x: mb.complex_fft(data=x, n=0), [f32(4, 6)], "Invalid shape 0"),
    ("shapes negative", lambda mb, x: mb.complex_rfftn(data=x, shapes=[-1]), [f32(4, 6)], "Invalid shape -1"),
    ("shapes dims lengths", lambda mb, x: mb.complex_fftn(data=x, shapes=[2, 3], dims=[0]), [f32(4, 6)],
     "same number of elements"),
    ("complex shapes differ", lambda mb, x, y: mb.complex(real_data=x, imag_data=y), [f32(4, 6), f32(4, 5)],
     "must match"),
    ("complex fp16", lambda mb, x: mb.complex(real_data=x, imag_data=x), [((4,), "fp16")], "real_data"),
    ("rfft of complex", lambda mb, x: mb.complex_rfft(data=mb.complex(real_data=x, imag_data=x)), [f32(4)], "data"),
    ("ifft of real", lambda mb, x: mb.complex_ifft(data=x), [f32(4)], "data"),
    ("real of real", lambda mb, x: mb.complex_real(data=x), [f32(4)], "data"),
    ("abs of real", lambda mb, x: mb.complex_abs(x=x), [f32(4)], "x"),
    ("core op on complex", lambda mb, x: mb.add(x=mb.complex(real_data=x, imag_data=x), y=1.0), [f32(4)], "add"),
    ("stft without n_fft", lambda mb, x: mb.complex_stft(input=x), [f32(16)], "n_fft"),
    ("stft window dtype", lambda mb, x: mb.complex_stft(input=x, n_fft=4, window=np.ones(4, np.int32)), [f32(16)],
     "window"),
]


@pytest.mark.parametrize("name,build,specs,match", BAD, ids=[c[0] for c in BAD])
def test_bad_programs_fail_in_both(name, build, specs, match):
    check_error(build, specs, match=match)


def test_stft_type_errors_coremltools_lacks():
    # coremltools divides by zero for a hop of 0 and makes a negative frame count for a signal
    # shorter than n_fft; milkit names the input instead
    def build(hop, length):
        @mb.program(input_specs=[mb.TensorSpec(shape=(length,))])
        def prog(x):
            return mb.complex_real(data=mb.complex_stft(input=x, n_fft=8, hop_length=hop))

        return prog

    with pytest.raises(ValueError, match="hop_length.*must be positive"):
        build(0, 32)
    with pytest.raises(ValueError, match="fewer than n_fft"):
        build(2, 5)
    with pytest.raises(ValueError, match="n_fft // 4"):
        mb.program(input_specs=[mb.TensorSpec(shape=(8,))])(lambda x: mb.complex_stft(input=x, n_fft=3))


# ---- the pass against coremltools, and the numbers against numpy -----------------------------

NORMS = ["backward", "forward", "ortho"]


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("shape,n,dim", [((8,), None, -1), ((2, 3, 4), None, -1), ((2, 3, 4), None, 0),
                                         ((3, 5), 3, 1), ((3, 5), 7, -1), ((4, 2, 3), 6, -3)])
def test_fft_of_real(shape, n, dim, norm):
    mp = lower_both(lambda mb, x: parts(mb, mb.complex_fft(data=x, n=n, dim=dim, norm=norm)), [f32(*shape)])
    x = rand(*shape)
    re, im = run(mp, x)
    want = np.fft.fft(x, n=n, axis=dim, norm=norm)
    close(re, want.real)
    close(im, want.imag)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("shape,n,dim", [((6,), None, 0), ((3, 4), 5, 0), ((2, 5, 3), 2, -2)])
def test_fft_and_ifft_of_complex(shape, n, dim, norm):
    def build(mb, x, y):
        c = mb.complex(real_data=x, imag_data=y)
        return parts(mb, mb.complex_fft(data=c, n=n, dim=dim, norm=norm)) + parts(
            mb,
            mb.complex_ifft(data=c, n=n, dim=dim, norm=norm))

    mp = lower_both(build, [f32(*shape), f32(*shape)])
    x, y = rand(*shape), rand(*shape)
    got = run(mp, x, y)
    for (re, im), want in zip([got[:2], got[2:]], [np.fft.fft(x + 1j * y, n=n, axis=dim, norm=norm),
                                                     np.fft.ifft(x + 1j * y, n=n, axis=dim, norm=norm)]):
        close(re, want.real)
        close(im, want.imag)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("shape,n,dim", [((8,), None, -1), ((7, 3), None, 0), ((3, 6), 5, 1), ((2, 4, 3), 9, -2)])
def test_rfft(shape, n, dim, norm):
    mp = lower_both(lambda mb, x: parts(mb, mb.complex_rfft(data=x, n=n, dim=dim, norm=norm)), [f32(*shape)])
    x = rand(*shape)
    re, im = run(mp, x)
    want = np.fft.rfft(x, n=n, axis=dim, norm=norm)
    close(re, want.real)
    close(im, want.imag)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("shape,n,dim", [((5,), None, -1), ((2, 5), 8, -1), ((2, 5), 9, 1), ((4, 3), 5, 0),
                                         ((6, 2), 3, 0), ((2, 2), None, 1), ((2, 3), 10, 1), ((3, 2), 7, -2)])
def test_irfft(shape, n, dim, norm):
    def build(mb, x, y):
        return mb.complex_irfft(data=mb.complex(real_data=x, imag_data=y), n=n, dim=dim, norm=norm)

    mp = lower_both(build, [f32(*shape), f32(*shape)])
    x, y = rand(*shape), rand(*shape)
    (got,) = run(mp, x, y)
    close(got, np.fft.irfft(x + 1j * y, n=n, axis=dim, norm=norm))


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("shape,s,axes", [((2, 3, 4), None, None), ((2, 3, 4), [5, 2], None),
                                          ((2, 3, 4), None, [0, -1]), ((3, 4), [2, 6], [1, 0])])
def test_fftn_ifftn(shape, s, axes, norm):
    def build(mb, x, y):
        c = mb.complex(real_data=x, imag_data=y)
        return (parts(mb, mb.complex_fftn(data=x, shapes=s, dims=axes, norm=norm))
                + parts(mb, mb.complex_fftn(data=c, shapes=s, dims=axes, norm=norm))
                + parts(mb, mb.complex_ifftn(data=c, shapes=s, dims=axes, norm=norm)))

    mp = lower_both(build, [f32(*shape), f32(*shape)])
    x, y = rand(*shape), rand(*shape)
    got = run(mp, x, y)
    axes = axes if axes is not None or s is None else list(range(len(shape) - len(s), len(shape)))
    wants = [np.fft.fftn(x, s=s, axes=axes, norm=norm), np.fft.fftn(x + 1j * y, s=s, axes=axes, norm=norm),
             np.fft.ifftn(x + 1j * y, s=s, axes=axes, norm=norm)]
    for i, want in enumerate(wants):
        close(got[2 * i], want.real)
        close(got[2 * i + 1], want.imag)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("shape,s,axes", [((4, 6), None, None), ((3, 4, 5), [3, 7], None),
                                          ((3, 4, 5), None, [2, 0]), ((4, 5), [6, 3], [1, 0])])
def test_rfftn_irfftn(shape, s, axes, norm):
    def build(mb, x, y):
        c = mb.complex(real_data=x, imag_data=y)
        return parts(mb, mb.complex_rfftn(data=x, shapes=s, dims=axes, norm=norm)) + (
            mb.complex_irfftn(data=c, shapes=s, dims=axes, norm=norm),)

    mp = lower_both(build, [f32(*shape), f32(*shape)])
    x, y = rand(*shape), rand(*shape)
    re, im, inv = run(mp, x, y)
    axes = axes if axes is not None or s is None else list(range(len(shape) - len(s), len(shape)))
    want = np.fft.rfftn(x, s=s, axes=axes, norm=norm)
    close(re, want.real)
    close(im, want.imag)
    close(inv, np.fft.irfftn(x + 1j * y, s=s, axes=axes, norm=norm))


def _np_stft(x, n_fft, hop, window, onesided, normalized):
    frames = (x.shape[-1] - n_fft) // hop + 1
    seg = np.stack([x[..., t * hop:t * hop + n_fft] for t in range(frames)], axis=-1)  # [..., n_fft, T]
    k = np.arange(n_fft // 2 + 1 if onesided else n_fft)
    dft = np.exp(-2j * np.pi * np.outer(k, np.arange(n_fft)) / n_fft)
    out = np.einsum("fn,...nt->...ft", dft * window, seg)
    return out / np.sqrt(n_fft) if normalized else out


STFT = [  # (shape, n_fft, hop, win_length, window, normalized, onesided)
    ((40,), 8, None, None, None, False, True),
    ((2, 33), 8, 3, None, None, False, False),
    ((37,), 16, 5, 10, None, True, True),
    ((2, 30), 8, 2, 6, "hann", False, True),
    ((29,), 6, 1, None, "hann", True, False),
]


@pytest.mark.parametrize("shape,n_fft,hop,win_length,window,normalized,onesided", STFT)
def test_stft(shape, n_fft, hop, win_length, window, normalized, onesided):
    w = None if window is None else np.hanning(win_length or n_fft).astype(np.float32)

    def build(mb, x):
        return parts(mb, mb.complex_stft(input=x, n_fft=n_fft, hop_length=hop, win_length=win_length, window=w,
                                     normalized=normalized, onesided=onesided))

    mp = lower_both(build, [f32(*shape)])
    x = rand(*shape)
    re, im = run(mp, x)
    full = np.ones(n_fft, np.float32) if w is None and win_length is None else None
    if full is None:
        wl = win_length or n_fft
        left = (n_fft - wl) // 2
        full = np.zeros(n_fft, np.float32)
        full[left:left + wl] = np.ones(wl, np.float32) if w is None else w
    want = _np_stft(x, n_fft, hop or n_fft // 4, full, onesided, normalized)
    close(re, want.real)
    close(im, want.imag)


def test_stft_of_complex():
    def build(mb, x, y):
        c = mb.complex(real_data=x, imag_data=y)
        return parts(mb, mb.complex_stft(input=c, n_fft=8, hop_length=4, onesided=False))

    mp = lower_both(build, [f32(2, 24), f32(2, 24)])
    x, y = rand(2, 24), rand(2, 24)
    re, im = run(mp, x, y)
    want = _np_stft(x + 1j * y, 8, 4, np.ones(8), False, False)
    close(re, want.real)
    close(im, want.imag)


def test_symbolic_signal_length_lowers():
    # stft, abs, real / imag need no static size: a symbolic length lowers in both libraries
    def build(mb, x):
        return parts(mb, mb.complex_stft(input=x, n_fft=8, hop_length=2)) + (
            mb.complex_abs(x=mb.complex(real_data=x, imag_data=x)),)

    mp = lower_both(build, [((2, "S"), "fp32")])
    x = rand(2, 20)
    re, im, a = run(mp, x)
    want = _np_stft(x, 8, 2, np.ones(8), True, False)
    close(re, want.real)
    close(im, want.imag)
    close(a, np.abs(x + 1j * x))


@pytest.mark.parametrize("shape", [(5,), (2, 3), (2, 1, 4)])
def test_abs_real_imag(shape):
    def build(mb, x, y):
        c = mb.complex(real_data=x, imag_data=y)
        return mb.complex_abs(x=c), mb.complex_real(data=c), mb.complex_imag(data=c), mb.complex_abs(
            x=mb.complex_fft(data=x))

    mp = lower_both(build, [f32(*shape), f32(*shape)])
    x, y = rand(*shape), rand(*shape)
    a, re, im, fa = run(mp, x, y)
    close(a, np.abs(x + 1j * y))
    np.testing.assert_array_equal(re, x)
    np.testing.assert_array_equal(im, y)
    close(fa, np.abs(np.fft.fft(x)))
    outs = [v.name for v in mp.functions["main"].outputs]
    assert outs == ["complex_abs_0", "complex_real_0", "complex_imag_0", "complex_abs_1"]


@pytest.mark.parametrize("opset", ["iOS15", "iOS16", "iOS18"])
def test_lowering_at_other_opsets(opset):
    def build(mb, x, y):
        c = mb.complex(real_data=x, imag_data=y)
        return (parts(mb, mb.complex_fft(data=x, n=3, dim=0)) + parts(mb, mb.complex_ifft(data=c, n=6, norm="ortho"))
                + (mb.complex_irfft(data=c, n=3), mb.complex_irfft(data=c, n=9, dim=0))
                + parts(mb, mb.complex_stft(input=x, n_fft=4, hop_length=1, win_length=3)))

    mp = lower_both(build, [f32(4, 5), f32(4, 5)], opset)
    x, y = rand(4, 5), rand(4, 5)
    got = run(mp, x, y)
    z = x + 1j * y
    wants = [np.fft.fft(x, n=3, axis=0), np.fft.ifft(z, n=6, norm="ortho")]
    for i, want in enumerate(wants):
        close(got[2 * i], want.real)
        close(got[2 * i + 1], want.imag)
    close(got[4], np.fft.irfft(z, n=3))
    close(got[5], np.fft.irfft(z, n=9, axis=0))
    window = np.array([1, 1, 1, 0], np.float32)  # win_length 3 in n_fft 4: (4 - 3) // 2 = 0 zeros left
    want = _np_stft(x, 4, 1, window, True, False)
    close(got[6], want.real)
    close(got[7], want.imag)


def test_round_trips_and_chains():
    def build(mb, x):
        back = mb.complex_ifft(data=mb.complex_fft(data=x, norm="ortho"), norm="ortho")
        again = mb.complex_irfft(data=mb.complex_rfft(data=x, dim=0), n=5, dim=0)
        rr = mb.complex_rfft(data=mb.complex_real(data=back), dim=1)
        return mb.complex_real(data=back), mb.complex_imag(data=back), again, mb.complex_abs(x=rr)

    mp = lower_both(build, [f32(5, 4)])
    x = rand(5, 4)
    re, im, again, a = run(mp, x)
    close(re, x)
    close(im, np.zeros_like(x))
    close(again, x)
    close(a, np.abs(np.fft.rfft(x, axis=1)))


def test_dead_dialect_ops_are_lowered_and_removed():
    # an unused fft is lowered like coremltools does (its core ops stay for dead_code_elimination)
    mp = lower_both(lambda mb, x: (mb.complex_fft(data=x), mb.relu(x=x))[1], [f32(4)])
    assert "relu" in [o.op_type for o in mp.functions["main"].operations]


def test_complex_shape_is_lowered():
    # coremltools' lowering of complex_shape reads a missing input ("data"; the op's input is x) and
    # raises AttributeError; milkit lowers it to the shape of the real part as the op intends
    specs = [f32(2, 3, 4)]
    cp, mp, _ = build_both(lambda mb, x: mb.complex_shape(x=mb.complex(real_data=x, imag_data=x)), specs)
    with pytest.raises(AttributeError):
        ct_run(cp, [LOWER])
    apply_passes(mp, [LOWER], None, verify_each=True)
    ops = [o for o in mp.functions["main"].operations if o.op_type != "const"]
    assert [o.op_type for o in ops] == ["shape"]
    assert ops[0].inputs["x"].name == "x"
    np.testing.assert_array_equal(run(mp, rand(2, 3, 4))[0], [2, 3, 4])


# ---- what the pass refuses ----------------------------------------------------------------------


def _ct_and_mk_pass_errors(build, specs, match_ct, match_mk):
    cp, mp, _ = build_both(build, specs)
    with pytest.raises(Exception, match=match_ct):
        ct_run(cp, [LOWER])
    with pytest.raises(ValueError, match=match_mk):
        apply_passes(mp, [LOWER], None)
    return mp


def test_complex_function_output_is_refused():
    mp = _ct_and_mk_pass_errors(lambda mb, x: mb.complex_fft(data=x), [f32(4)],
                                "complex data as model's output", "complex data as model's output")
    # nothing changed
    assert [o.op_type for o in mp.functions["main"].operations if o.op_type != "const"] == ["complex_fft"]


def test_stft_lowering_errors():
    _ct_and_mk_pass_errors(lambda mb, x: parts(mb, mb.complex_stft(input=x, n_fft=4, win_length=6)), [f32(16)],
                           "Window length", "complex_stft 'complex_stft_0'.*Window length")
    _ct_and_mk_pass_errors(
        lambda mb, x: parts(mb, mb.complex_stft(input=mb.complex(real_data=x, imag_data=x), n_fft=4)), [f32(16)],
        "Onesided", "Onesided is only valid for real inputs")


@pytest.mark.parametrize("shape,dim", [((2, "S"), -1), ((2, "S"), 0)])
def test_fft_of_symbolic_shape_is_refused_before_any_change(shape, dim):
    # coremltools fails half way (a sympy comparison, or a const of a symbol); milkit refuses first
    mp = _ct_and_mk_pass_errors(lambda mb, x: mb.complex_real(data=mb.complex_fft(data=x, dim=dim)),
                                [(shape, "fp32")], None, r"complex_fft 'complex_fft_0'.*fully known.*\(2, \w+, fp32\)")
    assert [o.op_type for o in mp.functions["main"].operations if o.op_type != "const"] == [
        "complex_fft", "complex_real"]


def test_complex_data_into_a_core_op_is_refused():
    # identity takes any dtype, so coremltools builds it; its pass then points identity at a var no
    # op makes. milkit refuses, naming the op.
    @mb.program(input_specs=[mb.TensorSpec(shape=(3,))])
    def prog(x):
        c = mb.identity(x=mb.complex(real_data=x, imag_data=x))
        return mb.complex_real(data=c)

    with pytest.raises(ValueError, match="identity 'identity_0'.*complex value 'complex_0'"):
        apply_passes(prog, [LOWER], None)


def test_complex_constants_are_refused():
    # coremltools accepts numpy complex consts; milkit builds complex data only with mb.complex
    # (the frontends need nothing else), and says so instead of guessing a type
    with pytest.raises(TypeError, match="complex64"):
        @mb.program(input_specs=[mb.TensorSpec(shape=(2,))])
        def prog(x):
            return mb.complex_real(data=np.array([1 + 2j, 3], np.complex64))


def test_nested_dialect_ops_are_left_like_coremltools():
    # coremltools lowers only the function body; ops in a cond's blocks stay, and running or
    # saving then fails clearly
    def build(mb, x):
        return mb.cond(pred=mb.greater(x=mb.reduce_sum(x=x), y=0.0),
                       _true_fn=lambda: mb.complex_abs(x=mb.complex_fft(data=x)), _false_fn=lambda: mb.relu(x=x))

    specs = [f32(4)]
    cp, mp, _ = build_both(build, specs)
    ct_run(cp, [LOWER])
    apply_passes(mp, [LOWER], None, verify_each=True)
    compare_programs(cp, mp, set())
    with pytest.raises(ValueError, match="complex_fft.*lower_complex_dialect_ops"):
        milkit.run(mp, {"x": rand(4)})


# ---- saving and running ------------------------------------------------------------------------


def _unlowered():
    return _build("mk", lambda mb, x: mb.complex_abs(x=mb.complex_fft(data=x)), [f32(4)], "iOS17",
                  _make_symbols([f32(4)]))


def test_running_complex_ops_fails_clearly():
    with pytest.raises(ValueError, match=r"no kernel.*complex_fft 'complex_fft_0'.*complex_abs 'complex_abs_0'"
                                         r".*lower them first with common::lower_complex_dialect_ops"):
        milkit.run(_unlowered(), {"x": rand(4)})


def test_saving_complex_ops_fails_clearly(tmp_path):
    with pytest.raises(ValueError, match=r"complex_fft 'complex_fft_0'.*complex dialect op.*"
                                         r"common::lower_complex_dialect_ops"):
        milkit.save(_unlowered(), tmp_path / "m.mlpackage")
    assert not (tmp_path / "m.mlpackage").exists()


def test_convert_lowers_and_saves(tmp_path):
    import warnings

    prog = _unlowered()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = milkit.convert(prog, minimum_deployment_target=milkit.target.iOS17,
                           compute_precision=milkit.precision.FLOAT32)
    assert LOWER not in m.skipped_passes
    types_ = {o.op_type for o in prog.functions["main"].operations}
    assert not {t for t in types_ if t.startswith("complex")}
    x = rand(4)
    np.testing.assert_allclose(milkit.run(prog, {"x": x})["complex_abs_0"], np.abs(np.fft.fft(x)), rtol=1e-4,
                               atol=1e-5)
    m.save(tmp_path / "m.mlpackage")
    from coremltools.models import MLModel

    MLModel(str(tmp_path / "m.mlpackage"), skip_model_load=True)


def test_text_format_round_trips_unlowered_programs():
    from milkit.text import parse, to_text

    prog = _unlowered()
    text = to_text(prog)
    assert "complex64" in text
    assert to_text(parse(text)) == text
