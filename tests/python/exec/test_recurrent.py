"""Numeric tests of the interpreter's recurrent kernels (gru, lstm, rnn) against torch.nn.LSTM / GRU /
RNN and numpy references of the Core ML cell definitions.

Weight layouts: MIL's lstm gates are [i, f, o, z] (torch: [i, f, g, o], g = z) with one bias
(torch's b_ih + b_hh); MIL's gru gates are [r, o, z] (torch: [r, z, n], n = o) and its iOS15 cell
applies the reset gate before the recurrent product (R_o (r * h)), unlike torch, so it is checked
against numpy; iOS18's reset_after=True with input_bias is torch's GRU. direction="reverse" runs
from the last step and lists the states in that order (torch on the flipped sequence); a
bidirectional lstm's backward half is aligned with the input (torch's bidirectional output)."""

from __future__ import annotations

from typing import Any

import milkit as ct
import numpy as np
import pytest
import torch
from support.exec_util import assert_close, rand, run_op

FP32_TOL = {"rtol": 1e-4, "atol": 1e-5}
FP16_TOL = {"rtol": 2e-3, "atol": 2e-3}


def _tol(dtype: Any) -> dict[str, float]:
    return FP16_TOL if np.dtype(dtype) == np.float16 else FP32_TOL


def _np(t: torch.Tensor, dtype: Any = np.float32) -> np.ndarray:
    return t.detach().numpy().astype(dtype)


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))


def _opset(dtype: Any) -> Any:
    return ct.target.iOS17 if np.dtype(dtype) == np.float16 else ct.target.iOS15


def _ifgo_to_ifoz(w: np.ndarray) -> np.ndarray:
    i, f, g, o = np.split(w, 4)
    return np.concatenate([i, f, o, g])


def _rzn_to_roz(w: np.ndarray) -> np.ndarray:
    r, z, n = np.split(w, 3)
    return np.concatenate([r, n, z])


# ------------------------------------------------------------------------------------------ lstm


@pytest.mark.parametrize("direction", ["forward", "reverse"])
@pytest.mark.parametrize("output_sequence", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("has_bias", [True, False])
def test_lstm_vs_torch(direction: str, output_sequence: bool, dtype: Any, has_bias: bool) -> None:
    S, B, I, H = 5, 3, 4, 6
    torch.manual_seed(0)
    m = torch.nn.LSTM(I, H, bias=has_bias)
    sd = {k: v.detach().numpy() for k, v in m.state_dict().items()}
    wih = _ifgo_to_ifoz(sd["weight_ih_l0"]).astype(dtype)
    whh = _ifgo_to_ifoz(sd["weight_hh_l0"]).astype(dtype)
    x, h0, c0 = rand(S, B, I, dtype=dtype), rand(B, H, dtype=dtype, seed=1), rand(B, H, dtype=dtype, seed=2)
    params: dict[str, Any] = {"weight_ih": wih, "weight_hh": whh, "direction": direction,
                              "output_sequence": output_sequence}
    if has_bias:
        params["bias"] = _ifgo_to_ifoz(sd["bias_ih_l0"] + sd["bias_hh_l0"]).astype(dtype)
    # the reference (torch.nn.LSTM) runs with the weights the program holds (rounded to fp16)
    xin = np.flip(x, 0) if direction == "reverse" else x
    got = run_op("lstm", {"x": x, "initial_h": h0, "initial_c": c0}, opset=_opset(dtype), **params)
    want = _lstm_ref(xin, h0, c0, wih, whh, params.get("bias"))
    y, hn, cn = want
    if not output_sequence:
        y = y[-1:]
    for g, w in zip(got, (y, hn, cn)):
        assert g.dtype == dtype
        assert_close(g, w.astype(dtype), **_tol(dtype))


def _lstm_ref(x: np.ndarray, h0: np.ndarray, c0: np.ndarray, wih: np.ndarray, whh: np.ndarray,
              bias: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """torch.nn.LSTM with MIL-layout weights (forward over x)."""
    H = whh.shape[1]
    m = torch.nn.LSTM(x.shape[2], H, bias=bias is not None)
    inv = [*range(0, 2 * H), *range(3 * H, 4 * H), *range(2 * H, 3 * H)]  # ifoz -> ifgo
    with torch.no_grad():
        m.weight_ih_l0.copy_(_t(wih[inv]))
        m.weight_hh_l0.copy_(_t(whh[inv]))
        if bias is not None:
            m.bias_ih_l0.copy_(_t(bias[inv]))
            m.bias_hh_l0.zero_()
        y, (hn, cn) = m(_t(x), (_t(h0)[None], _t(c0)[None]))
    return _np(y), _np(hn[0]), _np(cn[0])


@pytest.mark.parametrize("output_sequence", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_lstm_bidirectional_vs_torch(output_sequence: bool, dtype: Any) -> None:
    S, B, I, H = 4, 2, 3, 5
    torch.manual_seed(1)
    m = torch.nn.LSTM(I, H, bidirectional=True)
    with torch.no_grad():  # round the weights to the program's dtype
        for p in m.parameters():
            p.copy_(p.to(torch.float16 if dtype == np.float16 else torch.float32).float())
    sd = {k: v.detach().numpy() for k, v in m.state_dict().items()}
    x = rand(S, B, I, dtype=dtype)
    h0, c0 = rand(2, B, H, dtype=dtype, seed=1), rand(2, B, H, dtype=dtype, seed=2)
    params = {
        "weight_ih": _ifgo_to_ifoz(sd["weight_ih_l0"]).astype(dtype),
        "weight_hh": _ifgo_to_ifoz(sd["weight_hh_l0"]).astype(dtype),
        "bias": _ifgo_to_ifoz(sd["bias_ih_l0"] + sd["bias_hh_l0"]).astype(dtype),
        "weight_ih_back": _ifgo_to_ifoz(sd["weight_ih_l0_reverse"]).astype(dtype),
        "weight_hh_back": _ifgo_to_ifoz(sd["weight_hh_l0_reverse"]).astype(dtype),
        "bias_back": _ifgo_to_ifoz(sd["bias_ih_l0_reverse"] + sd["bias_hh_l0_reverse"]).astype(dtype),
        "direction": "bidirectional", "output_sequence": output_sequence,
    }
    h0m = np.concatenate([h0[0], h0[1]], axis=1)
    c0m = np.concatenate([c0[0], c0[1]], axis=1)
    y, hn, cn = run_op("lstm", {"x": x, "initial_h": h0m, "initial_c": c0m}, opset=_opset(dtype), **params)
    with torch.no_grad():
        ty, (thn, tcn) = m(_t(x), (_t(h0), _t(c0)))
    if not output_sequence:
        ty = torch.cat([ty[-1:, :, :H], ty[:1, :, H:]], dim=2)
    assert y.shape == (S if output_sequence else 1, B, 2 * H)
    assert_close(y, _np(ty, dtype), **_tol(dtype))
    assert_close(hn, _np(torch.cat([thn[0], thn[1]], 1), dtype), **_tol(dtype))
    assert_close(cn, _np(torch.cat([tcn[0], tcn[1]], 1), dtype), **_tol(dtype))


def _act(name: str, x: np.ndarray) -> np.ndarray:
    return {
        "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
        "tanh": np.tanh,
        "scaled_tanh": np.tanh,
        "relu": lambda v: np.maximum(v, 0),
        "linear": lambda v: v,
        "hard_sigmoid": lambda v: np.minimum(np.maximum(0.2 * v + 0.5, 0), 1),
    }[name](x)


def _lstm_numpy(x, h, c, wih, whh, b, p, clip, ra, ca, act):
    """Core ML's lstm cell (coremltools' reference in its backend tests), forward."""
    x, h, c = x.astype(np.float64), h.astype(np.float64), c.astype(np.float64)
    wi, wf, wo, wz = np.split(wih.astype(np.float64), 4)
    hi, hf, ho, hz = np.split(whh.astype(np.float64), 4)
    bi, bf, bo, bz = np.split(b.astype(np.float64), 4)
    pi, pf, po = np.split(p.astype(np.float64), 3)
    ys = []
    for t in range(x.shape[0]):
        xt = x[t]
        i = _act(ra, xt @ wi.T + h @ hi.T + bi + c * pi)
        f = _act(ra, xt @ wf.T + h @ hf.T + bf + c * pf)
        z = _act(ca, xt @ wz.T + h @ hz.T + bz)
        c = f * c + i * z
        if clip is not None:
            c = np.clip(c, -clip, clip)
        o = _act(ra, xt @ wo.T + h @ ho.T + bo + c * po)
        h = o * _act(act, c)
        ys.append(h)
    return np.stack(ys), h, c


@pytest.mark.parametrize("acts", [("sigmoid", "tanh", "tanh"), ("hard_sigmoid", "relu", "linear"),
                                  ("sigmoid", "scaled_tanh", "relu"), ("SIGMOID", "Tanh", "tanh")])
@pytest.mark.parametrize("clip", [None, 0.3])
def test_lstm_peephole_clip_activations(acts: tuple[str, str, str], clip: float | None) -> None:
    S, B, I, H = 6, 2, 3, 4
    x, h0, c0 = rand(S, B, I), rand(B, H, seed=1), rand(B, H, lo=-2, hi=2, seed=2)
    wih, whh = rand(4 * H, I, seed=3), rand(4 * H, H, seed=4)
    b, p = rand(4 * H, seed=5), rand(3 * H, seed=6)
    ra, ca, act = acts
    params: dict[str, Any] = {"weight_ih": wih, "weight_hh": whh, "bias": b, "peephole": p, "output_sequence": True,
                              "recurrent_activation": ra, "cell_activation": ca, "activation": act}
    if clip is not None:
        params["clip"] = np.float32(clip)
    y, hn, cn = run_op("lstm", {"x": x, "initial_h": h0, "initial_c": c0}, **params)
    wy, wh, wc = _lstm_numpy(x, h0, c0, wih, whh, b, p, clip, ra.lower(), ca.lower(), act.lower())
    assert_close(y, wy.astype(np.float32), **FP32_TOL)
    assert_close(hn, wh.astype(np.float32), **FP32_TOL)
    assert_close(cn, wc.astype(np.float32), **FP32_TOL)
    if clip is not None:
        assert np.abs(cn).max() <= clip + 1e-7


def test_lstm_bidirectional_peephole_back() -> None:
    """The backward direction uses bias_back and peephole_back, aligned with the input."""
    S, B, I, H = 3, 2, 2, 3
    x, h0, c0 = rand(S, B, I), rand(B, 2 * H, seed=1), rand(B, 2 * H, seed=2)
    w = [rand(4 * H, I, seed=3), rand(4 * H, H, seed=4), rand(4 * H, seed=5), rand(3 * H, seed=6)]
    wb = [rand(4 * H, I, seed=7), rand(4 * H, H, seed=8), rand(4 * H, seed=9), rand(3 * H, seed=10)]
    y, hn, cn = run_op("lstm", {"x": x, "initial_h": h0, "initial_c": c0}, weight_ih=w[0], weight_hh=w[1], bias=w[2],
                       peephole=w[3], weight_ih_back=wb[0], weight_hh_back=wb[1], bias_back=wb[2], peephole_back=wb[3],
                       direction="bidirectional", output_sequence=True, clip=np.float32(0.5))
    fy, fh, fc = _lstm_numpy(x, h0[:, :H], c0[:, :H], *w, 0.5, "sigmoid", "tanh", "tanh")
    by, bh, bc = _lstm_numpy(x[::-1], h0[:, H:], c0[:, H:], *wb, 0.5, "sigmoid", "tanh", "tanh")
    assert_close(y, np.concatenate([fy, by[::-1]], axis=2).astype(np.float32), **FP32_TOL)
    assert_close(hn, np.concatenate([fh, bh], axis=1).astype(np.float32), **FP32_TOL)
    assert_close(cn, np.concatenate([fc, bc], axis=1).astype(np.float32), **FP32_TOL)


def test_lstm_symbolic_shapes() -> None:
    """Sequence length and batch as symbols: the kernel's output binds them."""
    S, B, I, H = 4, 3, 2, 5
    x, h0, c0 = rand(S, B, I), rand(B, H, seed=1), rand(B, H, seed=2)
    wih, whh = rand(4 * H, I, seed=3), rand(4 * H, H, seed=4)
    for seq in (True, False):
        got = run_op("lstm", {"x": x, "initial_h": h0, "initial_c": c0}, symbolic=True, weight_ih=wih,
                     weight_hh=whh, output_sequence=seq)
        want = _lstm_numpy(x, h0, c0, wih, whh, np.zeros(4 * H), np.zeros(3 * H), None, "sigmoid", "tanh", "tanh")
        assert_close(got[0], (want[0] if seq else want[0][-1:]).astype(np.float32), **FP32_TOL)
        assert_close(got[1], want[1].astype(np.float32), **FP32_TOL)


def test_lstm_empty_sequence() -> None:
    """No step: the final states are the initial ones."""
    h0, c0 = rand(2, 3, seed=1), rand(2, 3, seed=2)
    y, hn, cn = run_op("lstm", {"x": np.zeros((0, 2, 4), np.float32), "initial_h": h0, "initial_c": c0},
                       weight_ih=rand(12, 4), weight_hh=rand(12, 3))
    assert_close(y, h0[None])
    assert_close(hn, h0)
    assert_close(cn, c0)


def test_lstm_bad_shapes_at_run_time() -> None:
    """Shapes coremltools' type inference accepts but the cell cannot run: a clear error."""
    h0 = rand(2, 3)
    with pytest.raises(ValueError, match=r"lstm.*'initial_h' has shape \(2, 3\), expected \(4, 3\)"):
        run_op("lstm", {"x": rand(5, 4, 2), "initial_h": h0, "initial_c": rand(4, 3)},
               weight_ih=rand(12, 2), weight_hh=rand(12, 3))
    with pytest.raises(ValueError, match=r"lstm.*'weight_ih' has shape \(12, 3\), expected \(12, 2\)"):
        run_op("lstm", {"x": rand(5, 2, 2), "initial_h": h0, "initial_c": h0},
               weight_ih=rand(12, 3), weight_hh=rand(12, 3))
    with pytest.raises(ValueError, match=r"lstm.*'weight_hh' has shape \(14, 3\)"):
        # coremltools accepts 14 // 3 == 4 rows
        run_op("lstm", {"x": rand(5, 2, 2), "initial_h": h0, "initial_c": h0},
               weight_ih=rand(12, 2), weight_hh=rand(14, 3))


# ------------------------------------------------------------------------------------------ gru


def _gru_numpy(x, h, wih, whh, b, ra="sigmoid", act="tanh", ib=None, reset_after=False):
    """Core ML's gru cell (coremltools' reference in its backend tests), gates [r, o, z]."""
    x, h = x.astype(np.float64), h.astype(np.float64)
    wr, wo, wz = np.split(wih.astype(np.float64), 3)
    rr, ro, rz = np.split(whh.astype(np.float64), 3)
    br, bo, bz = np.split(b.astype(np.float64), 3)
    ir, io, iz = np.split(ib.astype(np.float64), 3) if ib is not None else (0, 0, 0)
    ys = []
    for t in range(x.shape[0]):
        xt = x[t]
        z = _act(ra, xt @ wz.T + iz + h @ rz.T + bz)
        r = _act(ra, xt @ wr.T + ir + h @ rr.T + br)
        if reset_after:
            o = _act(act, xt @ wo.T + io + r * (h @ ro.T + bo))
        else:
            o = _act(act, xt @ wo.T + io + (r * h) @ ro.T + bo)
        h = (1 - z) * o + z * h
        ys.append(h)
    return np.stack(ys), h


@pytest.mark.parametrize("direction", ["forward", "reverse"])
@pytest.mark.parametrize("output_sequence", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("acts", [("sigmoid", "tanh"), ("tanh", "sigmoid"), ("hard_sigmoid", "relu")])
def test_gru(direction: str, output_sequence: bool, dtype: Any, acts: tuple[str, str]) -> None:
    S, B, I, H = 5, 2, 3, 4
    x, h0 = rand(S, B, I, dtype=dtype), rand(B, H, dtype=dtype, seed=1)
    wih, whh, b = rand(3 * H, I, dtype=dtype, seed=2), rand(3 * H, H, dtype=dtype, seed=3), rand(3 * H, dtype=dtype,
                                                                                                 seed=4)
    y, hn = run_op("gru", {"x": x, "initial_h": h0}, opset=_opset(dtype), weight_ih=wih, weight_hh=whh, bias=b,
                   direction=direction, output_sequence=output_sequence, recurrent_activation=acts[0],
                   activation=acts[1])
    wy, wh = _gru_numpy(x[::-1] if direction == "reverse" else x, h0, wih, whh, b, *acts)
    assert y.dtype == dtype and hn.dtype == dtype
    assert_close(y, (wy if output_sequence else wy[-1:]).astype(dtype), **_tol(dtype))
    assert_close(hn, wh.astype(dtype), **_tol(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_gru_ios18_reset_after_is_torch(dtype: Any, direction: str) -> None:
    """reset_after=True with input_bias = b_ih and bias = b_hh is torch.nn.GRU."""
    S, B, I, H = 4, 3, 2, 5
    torch.manual_seed(2)
    m = torch.nn.GRU(I, H)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(p.to(torch.float16 if dtype == np.float16 else torch.float32).float())
    sd = {k: v.detach().numpy() for k, v in m.state_dict().items()}
    x, h0 = rand(S, B, I, dtype=dtype), rand(B, H, dtype=dtype, seed=1)
    y, hn = run_op("gru", {"x": x, "initial_h": h0}, opset=ct.target.iOS18,
                   weight_ih=_rzn_to_roz(sd["weight_ih_l0"]).astype(dtype),
                   weight_hh=_rzn_to_roz(sd["weight_hh_l0"]).astype(dtype),
                   input_bias=_rzn_to_roz(sd["bias_ih_l0"]).astype(dtype), bias=_rzn_to_roz(sd["bias_hh_l0"]).astype(dtype),
                   reset_after=True, output_sequence=True, direction=direction)
    xin = np.flip(x, 0).copy() if direction == "reverse" else x
    with torch.no_grad():
        ty, th = m(_t(xin), _t(h0)[None])
    assert_close(y, _np(ty, dtype), **_tol(dtype))
    assert_close(hn, _np(th[0], dtype), **_tol(dtype))


def test_gru_ios18_input_bias_without_reset_after() -> None:
    S, B, I, H = 3, 2, 2, 3
    x, h0 = rand(S, B, I), rand(B, H, seed=1)
    wih, whh, b, ib = rand(3 * H, I, seed=2), rand(3 * H, H, seed=3), rand(3 * H, seed=4), rand(3 * H, seed=5)
    for reset_after in (False, True):
        y, hn = run_op("gru", {"x": x, "initial_h": h0}, opset=ct.target.iOS18, weight_ih=wih, weight_hh=whh,
                       bias=b, input_bias=ib, reset_after=reset_after, output_sequence=True)
        wy, wh = _gru_numpy(x, h0, wih, whh, b, ib=ib, reset_after=reset_after)
        assert_close(y, wy.astype(np.float32), **FP32_TOL)
        assert_close(hn, wh.astype(np.float32), **FP32_TOL)
    # without bias: reset_after keeps working (bias taken as 0)
    y, _ = run_op("gru", {"x": x, "initial_h": h0}, opset=ct.target.iOS18, weight_ih=wih, weight_hh=whh,
                  reset_after=True, output_sequence=True)
    assert_close(y, _gru_numpy(x, h0, wih, whh, np.zeros(3 * H), reset_after=True)[0].astype(np.float32), **FP32_TOL)


def test_gru_symbolic_and_bad_activation() -> None:
    S, B, I, H = 4, 2, 3, 2
    x, h0 = rand(S, B, I), rand(B, H, seed=1)
    wih, whh = rand(3 * H, I, seed=2), rand(3 * H, H, seed=3)
    y, hn = run_op("gru", {"x": x, "initial_h": h0}, symbolic=True, weight_ih=wih, weight_hh=whh, output_sequence=True)
    wy, wh = _gru_numpy(x, h0, wih, whh, np.zeros(3 * H))
    assert_close(y, wy.astype(np.float32), **FP32_TOL)
    # coremltools does not check gru's activation names; the kernel does
    with pytest.raises(ValueError, match=r"gru.*'activation' = \"swish\" is not a supported activation"):
        run_op("gru", {"x": x, "initial_h": h0}, weight_ih=wih, weight_hh=whh, activation="swish")


# ------------------------------------------------------------------------------------------ rnn


@pytest.mark.parametrize("direction", ["forward", "reverse"])
@pytest.mark.parametrize("output_sequence", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_rnn_vs_torch(direction: str, output_sequence: bool, dtype: Any, nonlinearity: str) -> None:
    S, B, I, H = 6, 3, 4, 5
    torch.manual_seed(3)
    m = torch.nn.RNN(I, H, nonlinearity=nonlinearity)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(p.to(torch.float16 if dtype == np.float16 else torch.float32).float())
    sd = {k: v.detach().numpy() for k, v in m.state_dict().items()}
    bias = (sd["bias_ih_l0"] + sd["bias_hh_l0"]).astype(dtype)
    with torch.no_grad():  # one bias, rounded as the program's
        m.bias_ih_l0.copy_(_t(bias))
        m.bias_hh_l0.zero_()
    x, h0 = rand(S, B, I, dtype=dtype), rand(B, H, dtype=dtype, seed=1)
    y, hn = run_op("rnn", {"x": x, "initial_h": h0}, opset=_opset(dtype), weight_ih=sd["weight_ih_l0"].astype(dtype),
                   weight_hh=sd["weight_hh_l0"].astype(dtype), bias=bias, direction=direction,
                   output_sequence=output_sequence, activation=nonlinearity)
    xin = np.flip(x, 0).copy() if direction == "reverse" else x
    with torch.no_grad():
        ty, th = m(_t(xin), _t(h0)[None])
    if not output_sequence:
        ty = ty[-1:]
    assert y.dtype == dtype
    assert_close(y, _np(ty, dtype), **_tol(dtype))
    assert_close(hn, _np(th[0], dtype), **_tol(dtype))


@pytest.mark.parametrize("act", ["sigmoid", "linear", "scaled_tanh", "hard_sigmoid", "sigmoid_hard"])
def test_rnn_activations_symbolic(act: str) -> None:
    S, B, I, H = 3, 2, 2, 3
    x, h0 = rand(S, B, I), rand(B, H, seed=1)
    wih, whh, b = rand(H, I, seed=2), rand(H, H, seed=3), rand(H, seed=4)
    y, hn = run_op("rnn", {"x": x, "initial_h": h0}, symbolic=True, weight_ih=wih, weight_hh=whh, bias=b,
                   activation=act, output_sequence=True)
    name = "hard_sigmoid" if act == "sigmoid_hard" else act
    h = h0.astype(np.float64)
    ys = []
    for t in range(S):
        h = _act(name, x[t] @ wih.T + h @ whh.T + b)
        ys.append(h)
    assert_close(y, np.stack(ys).astype(np.float32), **FP32_TOL)
    assert_close(hn, h.astype(np.float32), **FP32_TOL)


def test_rnn_bad_initial_h() -> None:
    with pytest.raises(ValueError, match=r"rnn.*'initial_h' has shape \(2, 4\), expected \(2, 3\)"):
        run_op("rnn", {"x": rand(3, 2, 2), "initial_h": rand(2, 4)}, weight_ih=rand(3, 2), weight_hh=rand(3, 3))
