"""FFTs (torch.fft functions, their core ATen _fft_r2c / _fft_c2r / _fft_c2c, stft) as DFT
products on the parts of complex tensors, against torch eager; outputs made real with
view_as_real or abs."""

from __future__ import annotations

import pytest
import torch
from support.torch_util import DIALECTS, Fn, check, convert, export, r

vr = torch.view_as_real
F = torch.fft


def spectrogram(x: torch.Tensor) -> torch.Tensor:
    frames = x.unfold(-1, 16, 4) * torch.hann_window(16)
    return F.rfft(frames).abs() ** 2


CASES = {
    "rfft": (lambda x: vr(F.rfft(x)), (r(3, 16),)),
    "rfft_odd_dim0": (lambda x: vr(F.rfft(x, dim=0)), (r(7, 4),)),
    "rfft_n_pad": (lambda x: vr(F.rfft(x, n=20)), (r(2, 13),)),
    "rfft_n_trunc": (lambda x: vr(F.rfft(x, n=9)), (r(2, 12),)),
    "irfft": (lambda x: F.irfft(F.rfft(x) * 2), (r(3, 16),)),
    "irfft_n_odd": (lambda x: F.irfft(F.rfft(x), n=15), (r(3, 15),)),
    "irfft_complex_in": (lambda x, y: F.irfft(torch.complex(x, y), n=10), (r(2, 6), r(2, 6))),
    "fft_complex": (lambda x, y: vr(F.fft(torch.complex(x, y))), (r(3, 12), r(3, 12))),
    "ifft_complex": (lambda x, y: vr(F.ifft(torch.complex(x, y), dim=0)), (r(5, 4), r(5, 4))),
    "fft_real_n": (lambda x: vr(F.fft(x, n=8)), (r(3, 6),)),
    "fft2": (lambda x, y: vr(F.fft2(torch.complex(x, y))), (r(2, 6, 8), r(2, 6, 8))),
    "ifft2_ortho": (lambda x, y: vr(F.ifft2(torch.complex(x, y), norm="ortho")), (r(6, 8), r(6, 8))),
    "rfft2": (lambda x: vr(F.rfft2(x)), (r(2, 6, 10),)),
    "irfft2": (lambda x: F.irfft2(F.rfft2(x), s=(6, 10)), (r(2, 6, 10),)),
    "rfftn_s": (lambda x: vr(F.rfftn(x, s=(4, 5, 8))), (r(3, 5, 6),)),
    "fftn_dims": (lambda x: vr(F.fftn(x, dim=(0, 2))), (r(4, 3, 6),)),
    "norm_ortho": (lambda x: (vr(F.rfft(x, norm="ortho")), F.irfft(F.rfft(x), norm="ortho")), (r(3, 16),)),
    "norm_forward": (lambda x, y: (vr(F.fft(torch.complex(x, y), norm="forward")),
                                   vr(F.ifft(torch.complex(x, y), norm="forward"))), (r(3, 10), r(3, 10))),
    # real bins (DC, Nyquist) have a +0 imaginary part, as torch's: the angle of a negative one is pi
    "angle_of_real_bins": (lambda x: F.rfft(x - 10).angle(), (r(2, 16),)),
    "abs_angle_real_imag": (lambda x: (F.rfft(x).abs(), F.rfft(x).angle(), F.rfft(x).real, F.rfft(x).imag),
                            (r(2, 16),)),
    "spectral_filter": (lambda x, w: F.irfft(F.rfft(x) * w, n=32), (r(2, 32), r(17))),
    "spectrogram": (spectrogram, (r(2, 64),)),
    "hfft_ihfft": (lambda x, y: (F.hfft(torch.complex(x, y), n=11), vr(F.ihfft(x).resolve_conj())),
                   (r(3, 6), r(3, 6))),
    "hfft2_ihfft2": (lambda x, y: (F.hfft2(torch.complex(x, y), norm="ortho"), vr(F.ihfft2(x).resolve_conj())),
                     (r(4, 6), r(4, 6))),
    "hfftn_ihfftn": (lambda x: (F.hfftn(F.ihfftn(x), s=(3, 4, 6)), vr(F.ihfftn(x, norm="forward").resolve_conj())),
                     (r(3, 4, 6),)),
    "long_signal": (lambda x: (vr(F.rfft(x)), F.irfft(F.rfft(x), n=2048)), (r(2, 2048),)),
}

FP16 = ("rfft", "irfft", "fft2", "spectrogram")


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_fft(name: str, dialect: str) -> None:
    fn, args = CASES[name]
    check(Fn(fn), args, dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", FP16)
def test_fft_fp16(name: str, dialect: str) -> None:
    fn, args = CASES[name]
    check(Fn(fn), args, dialect, rtol=2e-2, precision="fp16")


class Stft(torch.nn.Module):
    def __init__(self, n_fft: int = 16, hop: int = 4, win: int | None = None, center: bool = True,
                 normalized: bool = False, onesided: bool = True) -> None:
        super().__init__()
        self.n_fft, self.hop, self.win, self.center = n_fft, hop, win, center
        self.normalized, self.onesided = normalized, onesided
        self.register_buffer("window", torch.hann_window(win or n_fft))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.stft(x, self.n_fft, self.hop, self.win, self.window, self.center, normalized=self.normalized,
                       onesided=self.onesided, return_complex=True)
        return vr(s)


STFTS = {
    "default": Stft(),
    "no_center": Stft(center=False),
    "short_window": Stft(n_fft=16, hop=5, win=10),
    "normalized_twosided": Stft(normalized=True, onesided=False),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(STFTS))
def test_stft(name: str, dialect: str) -> None:
    check(STFTS[name], (r(2, 100),), dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_stft_magnitude_fp16(dialect: str) -> None:
    check(Fn(lambda x: torch.stft(x, 32, 8, window=torch.hann_window(32), return_complex=True).abs()),
          (r(1, 160),), dialect, rtol=2e-2, precision="fp16")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_fft_of_symbolic_length_is_refused(dialect: str) -> None:
    n = torch.export.Dim("n", min=4, max=64)
    ep = export(Fn(lambda x: vr(F.rfft(x))), (r(2, 16),), dialect, dynamic_shapes=(({1: n},),))
    with pytest.raises(ValueError, match=r"FFT (input )?length along dim 1 must be known \(it is s"):
        convert(ep)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_fft_symbolic_batch(dialect: str) -> None:
    b = torch.export.Dim("b", min=1, max=8)
    check(Fn(lambda x: F.irfft(F.rfft(x) * 0.5, n=16)), (r(3, 16),), dialect, dynamic_shapes=(({0: b},),),
          more_args=[(r(5, 16),)])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_stft_of_one_signal(dialect: str) -> None:
    check(Fn(lambda x: torch.stft(x, 20, 6, window=torch.hamming_window(20), return_complex=True).abs()),
          (r(90),), dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_stft_symbolic_batch(dialect: str) -> None:
    b = torch.export.Dim("b", min=1, max=8)
    check(STFTS["default"], (r(2, 100),), dialect, dynamic_shapes=({0: b},), more_args=[(r(3, 100),)])


def spectrum(*shape: int, n_fft: int = 16, hop: int = 4) -> torch.Tensor:
    return vr(torch.stft(torch.randn(*shape), n_fft, hop, window=torch.hann_window(n_fft), return_complex=True))


ISTFTS = {
    "default": (lambda x: torch.istft(torch.view_as_complex(x), 16, 4, window=torch.hann_window(16)),
                spectrum(2, 64)),
    "length_one_signal": (lambda x: torch.istft(torch.view_as_complex(x), 16, 4, window=torch.hann_window(16),
                                                length=70), spectrum(70)),
    "short_window_normalized": (lambda x: torch.istft(torch.view_as_complex(x), 16, 4, 12, torch.hann_window(12),
                                                      normalized=True), spectrum(2, 60)),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(ISTFTS))
def test_istft(name: str, dialect: str) -> None:
    fn, x = ISTFTS[name]
    check(Fn(fn), (x,), dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_stft_istft_round_trip_symbolic_batch(dialect: str) -> None:
    b = torch.export.Dim("b", min=1, max=8)
    fn = ISTFTS["default"][0]
    check(Fn(fn), (spectrum(2, 64),), dialect, dynamic_shapes=(({0: b},),),
          more_args=[(spectrum(3, 64),)])
